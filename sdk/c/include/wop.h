/*
 * wop.h -- OpenWOP node packs in C.
 *
 * A node pack is a WebAssembly component implementing one or more OpenWOP
 * node types against the `openwop:node-pack@0.1.0` WIT world. sdk/c/build.sh
 * compiles a pack directory (pack.json + *.c) with clang + wasi-libc, links
 * it into a component with wasm-component-ld and assembles it with `wop pack`.
 *
 * Your pack defines one function:
 *
 *     #include "wop.h"
 *
 *     bool wop_invoke(const wop_ctx_t *ctx, const wop_request_t *req,
 *                     wop_outcome_t *out, wop_error_t *err) {
 *         const char *name = wop_json_string(wop_json_get(req->inputs, "name"));
 *         wop_buf_t b = {0};
 *         wop_buf_printf(&b, "{\"greeting\":");
 *         ...
 *         return wop_completed(out, wop_buf_str(&b));
 *     }
 *
 * Return true with `out` set (wop_completed / wop_suspended), or false with
 * `err` set (wop_error_set / wop_error_validation, or the error a host call
 * filled in): the node then fails with exactly that code, message and
 * details. `describe` is generated from pack.json; define
 * WOP_CUSTOM_DESCRIBE and implement wop_describe() to override it.
 *
 * Memory: everything the SDK returns (strings, parsed JSON, buffers, error
 * fields) is heap memory owned by the invocation. The runtime runs every
 * invocation in a fresh instance and throws it away afterwards, so packs need
 * not free anything; the wop_*_free functions exist for long loops.
 *
 * Capabilities are what you call: the component imports only the host
 * interfaces whose functions the pack actually uses (the linker drops the
 * rest), and those must be listed in pack.json `x-wop.capabilities`. The
 * SDK needs nothing from WASI (no stdio, files, clocks or sockets), so a C
 * pack imports no WASI interface at all unless you call libc functions that
 * need one (printf, fopen, time, ...): prefer wop_log_* and wop_now_ms().
 */
#ifndef WOP_H
#define WOP_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------ */
/* JSON (a small parser and a string builder)                               */
/* ------------------------------------------------------------------------ */

/** The kind of a JSON value. */
typedef enum {
    WOP_JSON_NULL,
    WOP_JSON_BOOL,
    WOP_JSON_NUMBER,
    WOP_JSON_STRING,
    WOP_JSON_ARRAY,
    WOP_JSON_OBJECT,
} wop_json_kind_t;

/**
 * A parsed JSON value. Arrays and objects hold `count` children in `items`
 * (objects also their member names in `keys`). `raw`/`raw_len` is the
 * value's exact source text, handy for passing a sub-value on unchanged.
 */
typedef struct wop_json {
    wop_json_kind_t kind;
    bool boolean;          /**< WOP_JSON_BOOL */
    double number;         /**< WOP_JSON_NUMBER */
    char *string;          /**< WOP_JSON_STRING: decoded, NUL-terminated */
    size_t string_len;     /**< WOP_JSON_STRING: length in bytes (may contain NUL) */
    size_t count;          /**< WOP_JSON_ARRAY / WOP_JSON_OBJECT */
    struct wop_json **items;
    char **keys;           /**< WOP_JSON_OBJECT: decoded member names */
    const char *raw;
    size_t raw_len;
} wop_json_t;

/** Parse `len` bytes of JSON text; NULL if it is not one valid JSON value.
 *  The result points into `text` (raw), so keep `text` alive. */
wop_json_t *wop_json_parse(const char *text, size_t len);
/** Free a value from wop_json_parse (optional, see "Memory"). */
void wop_json_free(wop_json_t *v);
/** The member `key` of an object; NULL if `obj` is NULL, not an object, or has no such member. */
const wop_json_t *wop_json_get(const wop_json_t *obj, const char *key);
/** Element `i` of an array; NULL when out of range or not an array. */
const wop_json_t *wop_json_at(const wop_json_t *arr, size_t i);
/** The string of a WOP_JSON_STRING, else NULL. */
const char *wop_json_string(const wop_json_t *v);
/** Whether `v` is present and a JSON null (a missing member is NULL, not null). */
bool wop_json_is_null(const wop_json_t *v);
/** Whether `v` is `true`. */
bool wop_json_is_true(const wop_json_t *v);
/** Copy of the value's source text, NUL-terminated ("null" for NULL). */
char *wop_json_raw(const wop_json_t *v);

/** A growable NUL-terminated string buffer. Zero-initialize it: `wop_buf_t b = {0};` */
typedef struct {
    char *data;
    size_t len;
    size_t cap;
} wop_buf_t;

/** Append `len` bytes. */
void wop_buf_append(wop_buf_t *b, const char *s, size_t len);
/** Append a NUL-terminated string. */
void wop_buf_puts(wop_buf_t *b, const char *s);
/** Append printf-style (%s %d %u %ld %lu %lld %llu %zu %x %c %% and %.*s). */
void wop_buf_printf(wop_buf_t *b, const char *fmt, ...);
/** wop_buf_printf with a va_list. */
void wop_buf_vprintf(wop_buf_t *b, const char *fmt, va_list ap);
/** Append `s` (of `len` bytes) as a quoted, escaped JSON string; invalid
 *  UTF-8 becomes U+FFFD, so the result is always valid JSON. */
void wop_buf_json_string_n(wop_buf_t *b, const char *s, size_t len);
/** Append NUL-terminated `s` as a quoted, escaped JSON string. */
void wop_buf_json_string(wop_buf_t *b, const char *s);
/** The buffer's text ("" when empty). */
const char *wop_buf_str(const wop_buf_t *b);
/** Free the buffer's memory and reset it. */
void wop_buf_free(wop_buf_t *b);

/* ------------------------------------------------------------------------ */
/* Errors                                                                   */
/* ------------------------------------------------------------------------ */

/** Common OpenWOP error codes. */
#define WOP_VALIDATION_ERROR "validation_error"
#define WOP_INTERNAL_ERROR "internal_error"

/**
 * A protocol error: an OpenWOP `code` (`forbidden`, `validation_error`,
 * `egress_denied`, ...), a `message` for people and optional `details`
 * (JSON object text, or NULL). Host calls fill one in when they fail;
 * returning false from wop_invoke fails the node with it.
 */
typedef struct {
    char *code;
    char *message;
    char *details;
} wop_error_t;

/** Set `err` (strings are copied; `details_json` may be NULL). Returns false,
 *  so `return wop_error_set(err, ...);` fails the node. */
bool wop_error_set(wop_error_t *err, const char *code, const char *message, const char *details_json);
/** Set a `validation_error` with a printf-style message; returns false. */
bool wop_error_validation(wop_error_t *err, const char *fmt, ...);
/** Free the error's strings and reset it. */
void wop_error_free(wop_error_t *err);

/** Which `tool-error` case a failed tool call was. */
typedef enum {
    WOP_TOOL_OK = 0,              /**< the call succeeded */
    WOP_TOOL_FORBIDDEN,           /**< not granted, or a missing scope; not performed */
    WOP_TOOL_NOT_FOUND,           /**< no such tool for this caller */
    WOP_TOOL_RATE_LIMITED,        /**< details.retryAfterMs; not performed */
    WOP_TOOL_BUDGET_EXHAUSTED,    /**< details.dimension; not performed */
    WOP_TOOL_CONFLICT,            /**< idempotency_in_flight / idempotency_key_mismatch */
    WOP_TOOL_FAILED,              /**< ran (or may have run) and failed, or outcome unknown */
} wop_tool_error_kind_t;

/* ------------------------------------------------------------------------ */
/* The request and the outcome                                              */
/* ------------------------------------------------------------------------ */

/** One node invocation. All strings are NUL-terminated. */
typedef struct {
    const char *run_id;
    const char *node_id;
    const char *tenant_id;
    uint32_t attempt;      /**< starts at 1, grows with each retry */
    const char *type_id;   /**< which of the pack's node types is invoked */
    const wop_json_t *inputs;  /**< the node's inputs (parsed) */
    const wop_json_t *config;  /**< static configuration (parsed, `{}` if none) */
    const wop_json_t *resume;  /**< the resume value after `suspended`, else NULL */
    const char *inputs_text;   /**< the inputs' JSON text */
} wop_request_t;

/** How an invocation ended, when it did not fail. */
typedef struct {
    bool suspended;  /**< false: completed; true: suspended */
    char *json;      /**< the output (or the interrupt payload) as JSON text */
} wop_outcome_t;

/** Complete with `json` (JSON text, copied). Returns true. */
bool wop_completed(wop_outcome_t *out, const char *json);
/** Suspend with the interrupt payload `json` (copied); the runtime invokes
 *  again with req->resume set. Returns true. */
bool wop_suspended(wop_outcome_t *out, const char *json);

/** The invocation context. Every host call is bound by the host to this
 *  invocation (run, node, tenant, attempt, principal). */
typedef struct wop_ctx wop_ctx_t;

/**
 * Implemented by the pack: run one node invocation. Return true with `out`
 * set, or false with `err` set (the node's own failure).
 */
bool wop_invoke(const wop_ctx_t *ctx, const wop_request_t *req, wop_outcome_t *out, wop_error_t *err);

/** One node type (for wop_describe). */
typedef struct {
    const char *type_id;
    const char *version;
} wop_node_info_t;

/** The pack's self-description (for wop_describe); must match pack.json. */
typedef struct {
    const char *name;
    const char *version;
    const wop_node_info_t *nodes;
    size_t node_count;
} wop_pack_info_t;

/** Describe the pack. build.sh generates it from pack.json unless the pack
 *  is compiled with -DWOP_CUSTOM_DESCRIBE and defines it. */
void wop_describe(wop_pack_info_t *info);

/* ------------------------------------------------------------------------ */
/* log                                                                      */
/* ------------------------------------------------------------------------ */

/** Log severity. */
typedef enum { WOP_DEBUG, WOP_INFO, WOP_WARN, WOP_ERROR } wop_level_t;

/** Append one line to the run's log (`log` capability); `fields_json` is a
 *  JSON object's text or NULL. Each line is a `log.appended` event. */
void wop_log(const wop_ctx_t *ctx, wop_level_t level, const char *message, const char *fields_json);
/** Log at debug level. */
void wop_log_debug(const wop_ctx_t *ctx, const char *message, const char *fields_json);
/** Log at info level. */
void wop_log_info(const wop_ctx_t *ctx, const char *message, const char *fields_json);
/** Log at warn level. */
void wop_log_warn(const wop_ctx_t *ctx, const char *message, const char *fields_json);
/** Log at error level. */
void wop_log_error(const wop_ctx_t *ctx, const char *message, const char *fields_json);

/* ------------------------------------------------------------------------ */
/* clock, random                                                            */
/* ------------------------------------------------------------------------ */

/** Milliseconds since the Unix epoch from the host (`clock` capability):
 *  replay-safe, advances by 1 ms per call. Use instead of time(). */
uint64_t wop_now_ms(const wop_ctx_t *ctx);

/** Fill `buf` with `len` bytes from the host's random stream (`random`
 *  capability): replay-safe, seeded per (run, node, attempt); not for key
 *  material. Returns the number of bytes written. */
size_t wop_random_bytes(const wop_ctx_t *ctx, uint8_t *buf, size_t len);

/* ------------------------------------------------------------------------ */
/* tools                                                                    */
/* ------------------------------------------------------------------------ */

/**
 * Call `tool_id` with `args_json` (JSON text; NULL means `{}`) through the
 * host's gate (`tools` capability). `idempotency_key` (may be NULL) names the
 * business operation so the effect fires at most once across retries.
 *
 * On success returns WOP_TOOL_OK and sets `*result_json` to the tool's JSON
 * result. Otherwise returns the kind and fills `err` with the protocol error
 * (`forbidden`, `not_found`, `rate_limited`, ...): `return false` from
 * wop_invoke to fail the node with it.
 */
wop_tool_error_kind_t wop_tools_call(const wop_ctx_t *ctx, const char *tool_id, const char *args_json,
                                     const char *idempotency_key, char **result_json, wop_error_t *err);

/** The tools this invocation may call, as JSON text of an array of OpenWOP
 *  ToolDescriptors (`toolId`, `title`?, `description`?, `safetyTier`,
 *  `inputSchema`?, `outputSchema`?), sorted by toolId. `*count` (may be
 *  NULL) receives the number of tools. */
char *wop_tools_list(const wop_ctx_t *ctx, size_t *count);

/* ------------------------------------------------------------------------ */
/* http (safe-fetch)                                                        */
/* ------------------------------------------------------------------------ */

/** One HTTP header. */
typedef struct {
    const char *name;
    const char *value;
} wop_header_t;

/** An outgoing request. Zero-initialize and set what you need. */
typedef struct {
    const char *method;           /**< NULL means "GET" */
    const char *url;              /**< absolute; https unless the operator allows http */
    const wop_header_t *headers;  /**< hop-by-hop, Host and Proxy-* are refused */
    size_t header_count;
    const uint8_t *body;          /**< NULL: no body */
    size_t body_len;
    const char *idempotency_key;  /**< for non-GET/HEAD methods, or NULL */
} wop_http_request_t;

/** A response with its body read completely (NUL-terminated for convenience;
 *  `body_len` is the real length). */
typedef struct {
    uint16_t status;
    wop_header_t *headers;
    size_t header_count;
    uint8_t *body;
    size_t body_len;
} wop_http_response_t;

/**
 * Fetch through the host's SSRF-guarded egress (`http` capability). Returns
 * true with `resp` filled (a non-2xx status is a successful fetch), or false
 * with `err` filled (`egress_denied` with details.reason, `upstream_unavailable`, ...).
 */
bool wop_http_fetch(const wop_ctx_t *ctx, const wop_http_request_t *req, wop_http_response_t *resp,
                    wop_error_t *err);

/** The first response header named `name` (case-insensitive), or NULL. */
const char *wop_http_header(const wop_http_response_t *resp, const char *name);

/* ------------------------------------------------------------------------ */
/* mcp                                                                      */
/* ------------------------------------------------------------------------ */

/* MCP servers the operator attached (`mcp` capability). Each returns true
 * with `*result_json` set to the server's JSON (an `isError` result is a
 * success) or false with `err` filled: `not_found` for a server the operator
 * did not attach, `forbidden` for a tool or server this pack was not granted
 * (operator policy `[packs.<name>] mcp`), `upstream_unavailable` (retryable)
 * when the server cannot be reached, `mcp_error` for the server's JSON-RPC
 * error. Calls pass the gate like tool calls (`mcp:<server>/<tool>`). */

/** `tools/call` `name` on `server_id`; effects are claimed like wop_tools_call. */
bool wop_mcp_call_tool(const wop_ctx_t *ctx, const char *server_id, const char *name, const char *args_json,
                       const char *idempotency_key, char **result_json, wop_error_t *err);
/** `tools/list` on `server_id`, one page at a time (`cursor` may be NULL). */
bool wop_mcp_list_tools(const wop_ctx_t *ctx, const char *server_id, const char *cursor, char **result_json,
                        wop_error_t *err);
/** `resources/read` of `uri` on `server_id`. */
bool wop_mcp_read_resource(const wop_ctx_t *ctx, const char *server_id, const char *uri, char **result_json,
                           wop_error_t *err);
/** The host's health document for `server_id`. */
bool wop_mcp_server_health(const wop_ctx_t *ctx, const char *server_id, char **result_json, wop_error_t *err);

#ifdef __cplusplus
}
#endif

#endif /* WOP_H */
