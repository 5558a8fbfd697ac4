/* wop.c -- the C SDK over the wit-bindgen C bindings of the world `pack`
 * (see wop.h). build.sh generates the bindings (pack.h / pack.c /
 * pack_component_type.o) from the full openwop:node-pack world; the linker
 * drops every host function the pack never calls, so the component imports
 * only the interfaces the pack uses. */
#include <stdlib.h>
#include <string.h>

#include "pack.h"
#include "wop.h"

struct wop_ctx {
    int unused;
};

/* ---- strings ------------------------------------------------------------ */

static char *dup_n(const uint8_t *p, size_t len) {
    char *s = malloc(len + 1);
    if (!s) abort();
    if (len) memcpy(s, p, len);
    s[len] = '\0';
    return s;
}

static char *dup_str(const char *s) { return s ? dup_n((const uint8_t *)s, strlen(s)) : NULL; }

/* Borrow a C string as a WIT string (no copy: the callee copies). */
static pack_string_t borrow(const char *s) {
    pack_string_t w = {(uint8_t *)s, s ? strlen(s) : 0};
    return w;
}

/* A C string from a WIT string, taking over its memory when possible. */
static char *take(pack_string_t *w) {
    char *s = dup_n(w->ptr, w->len);
    pack_string_free(w);
    return s;
}

/* ---- errors and outcomes ------------------------------------------------ */

bool wop_error_set(wop_error_t *err, const char *code, const char *message, const char *details_json) {
    err->code = dup_str(code ? code : WOP_INTERNAL_ERROR);
    err->message = dup_str(message ? message : "");
    err->details = dup_str(details_json);
    return false;
}

bool wop_error_validation(wop_error_t *err, const char *fmt, ...) {
    wop_buf_t b = {0};
    va_list ap;
    va_start(ap, fmt);
    wop_buf_vprintf(&b, fmt, ap);
    va_end(ap);
    err->code = dup_str(WOP_VALIDATION_ERROR);
    err->message = b.data ? b.data : dup_str("");
    err->details = NULL;
    return false;
}

void wop_error_free(wop_error_t *err) {
    free(err->code);
    free(err->message);
    free(err->details);
    err->code = err->message = err->details = NULL;
}

static void error_from_wit(wop_error_t *err, openwop_node_pack_types_error_info_t *info) {
    err->code = take(&info->code);
    err->message = take(&info->message);
    err->details = info->details.is_some ? take(&info->details.val) : NULL;
}

bool wop_completed(wop_outcome_t *out, const char *json) {
    out->suspended = false;
    out->json = dup_str(json);
    return true;
}

bool wop_suspended(wop_outcome_t *out, const char *json) {
    out->suspended = true;
    out->json = dup_str(json);
    return true;
}

/* ---- log, clock, random ------------------------------------------------- */

void wop_log(const wop_ctx_t *ctx, wop_level_t level, const char *message, const char *fields_json) {
    (void)ctx;
    static const openwop_node_pack_log_level_t levels[] = {
        OPENWOP_NODE_PACK_LOG_LEVEL_DEBUG, OPENWOP_NODE_PACK_LOG_LEVEL_INFO,
        OPENWOP_NODE_PACK_LOG_LEVEL_WARN, OPENWOP_NODE_PACK_LOG_LEVEL_ERROR};
    pack_string_t msg = borrow(message ? message : "");
    pack_string_t fields = borrow(fields_json);
    openwop_node_pack_log_log(levels[level & 3], &msg, fields_json ? &fields : NULL);
}

void wop_log_debug(const wop_ctx_t *ctx, const char *m, const char *f) { wop_log(ctx, WOP_DEBUG, m, f); }
void wop_log_info(const wop_ctx_t *ctx, const char *m, const char *f) { wop_log(ctx, WOP_INFO, m, f); }
void wop_log_warn(const wop_ctx_t *ctx, const char *m, const char *f) { wop_log(ctx, WOP_WARN, m, f); }
void wop_log_error(const wop_ctx_t *ctx, const char *m, const char *f) { wop_log(ctx, WOP_ERROR, m, f); }

uint64_t wop_now_ms(const wop_ctx_t *ctx) {
    (void)ctx;
    return openwop_node_pack_clock_now_ms();
}

size_t wop_random_bytes(const wop_ctx_t *ctx, uint8_t *buf, size_t len) {
    (void)ctx;
    size_t filled = 0;
    while (filled < len) {
        size_t chunk = len - filled;
        if (chunk > 65536) chunk = 65536; /* the host traps above 64 KiB */
        pack_list_u8_t bytes;
        openwop_node_pack_random_fill((uint32_t)chunk, &bytes);
        size_t n = bytes.len < chunk ? bytes.len : chunk;
        if (n) memcpy(buf + filled, bytes.ptr, n);
        pack_list_u8_free(&bytes);
        if (n == 0) break;
        filled += n;
    }
    return filled;
}

/* ---- tools -------------------------------------------------------------- */

wop_tool_error_kind_t wop_tools_call(const wop_ctx_t *ctx, const char *tool_id, const char *args_json,
                                     const char *idempotency_key, char **result_json, wop_error_t *err) {
    (void)ctx;
    pack_string_t id = borrow(tool_id);
    pack_string_t args = borrow(args_json ? args_json : "{}");
    pack_string_t key = borrow(idempotency_key);
    openwop_node_pack_tools_json_t ret;
    openwop_node_pack_tools_tool_error_t e;
    *result_json = NULL;
    if (openwop_node_pack_tools_call(&id, &args, idempotency_key ? &key : NULL, &ret, &e)) {
        *result_json = take(&ret);
        return WOP_TOOL_OK;
    }
    /* Every case carries an error-info at the same place in the union. */
    error_from_wit(err, &e.val.failed);
    switch (e.tag) {
    case OPENWOP_NODE_PACK_TOOLS_TOOL_ERROR_FORBIDDEN: return WOP_TOOL_FORBIDDEN;
    case OPENWOP_NODE_PACK_TOOLS_TOOL_ERROR_NOT_FOUND: return WOP_TOOL_NOT_FOUND;
    case OPENWOP_NODE_PACK_TOOLS_TOOL_ERROR_RATE_LIMITED: return WOP_TOOL_RATE_LIMITED;
    case OPENWOP_NODE_PACK_TOOLS_TOOL_ERROR_BUDGET_EXHAUSTED: return WOP_TOOL_BUDGET_EXHAUSTED;
    case OPENWOP_NODE_PACK_TOOLS_TOOL_ERROR_CONFLICT: return WOP_TOOL_CONFLICT;
    default: return WOP_TOOL_FAILED;
    }
}

char *wop_tools_list(const wop_ctx_t *ctx, size_t *count) {
    (void)ctx;
    static const char *const tiers[] = {"pure", "read", "write", "exec"};
    openwop_node_pack_tools_list_tool_descriptor_t list;
    openwop_node_pack_tools_list(&list);
    wop_buf_t b = {0};
    wop_buf_puts(&b, "[");
    for (size_t i = 0; i < list.len; i++) {
        openwop_node_pack_tools_tool_descriptor_t *d = &list.ptr[i];
        if (i) wop_buf_puts(&b, ",");
        wop_buf_puts(&b, "{\"toolId\":");
        wop_buf_json_string_n(&b, (const char *)d->tool_id.ptr, d->tool_id.len);
        if (d->title.is_some) {
            wop_buf_puts(&b, ",\"title\":");
            wop_buf_json_string_n(&b, (const char *)d->title.val.ptr, d->title.val.len);
        }
        if (d->description.is_some) {
            wop_buf_puts(&b, ",\"description\":");
            wop_buf_json_string_n(&b, (const char *)d->description.val.ptr, d->description.val.len);
        }
        wop_buf_printf(&b, ",\"safetyTier\":\"%s\"", tiers[d->safety_tier & 3]);
        /* Schemas are JSON the host validated: embed them as they are. */
        if (d->input_schema.is_some) {
            wop_buf_puts(&b, ",\"inputSchema\":");
            wop_buf_append(&b, (const char *)d->input_schema.val.ptr, d->input_schema.val.len);
        }
        if (d->output_schema.is_some) {
            wop_buf_puts(&b, ",\"outputSchema\":");
            wop_buf_append(&b, (const char *)d->output_schema.val.ptr, d->output_schema.val.len);
        }
        wop_buf_puts(&b, "}");
    }
    wop_buf_puts(&b, "]");
    if (count) *count = list.len;
    openwop_node_pack_tools_list_tool_descriptor_free(&list);
    return b.data;
}

/* ---- http --------------------------------------------------------------- */

bool wop_http_fetch(const wop_ctx_t *ctx, const wop_http_request_t *req, wop_http_response_t *resp,
                    wop_error_t *err) {
    (void)ctx;
    openwop_node_pack_http_header_t *hs = NULL;
    if (req->header_count) {
        hs = calloc(req->header_count, sizeof *hs);
        if (!hs) abort();
        for (size_t i = 0; i < req->header_count; i++) {
            hs[i].name = borrow(req->headers[i].name);
            hs[i].value = borrow(req->headers[i].value);
        }
    }
    openwop_node_pack_http_request_t r = {
        .method = borrow(req->method ? req->method : "GET"),
        .url = borrow(req->url ? req->url : ""),
        .headers = {hs, req->header_count},
        .body = {req->body != NULL, {(uint8_t *)req->body, req->body_len}},
        .idempotency_key = {req->idempotency_key != NULL, borrow(req->idempotency_key)},
    };
    openwop_node_pack_http_response_t ret;
    openwop_node_pack_http_error_info_t e;
    bool ok = openwop_node_pack_http_safe_fetch(&r, &ret, &e);
    free(hs);
    memset(resp, 0, sizeof *resp);
    if (!ok) {
        error_from_wit(err, &e);
        return false;
    }
    resp->status = ret.status;
    resp->header_count = ret.headers.len;
    resp->headers = calloc(ret.headers.len ? ret.headers.len : 1, sizeof *resp->headers);
    if (!resp->headers) abort();
    for (size_t i = 0; i < ret.headers.len; i++) {
        resp->headers[i].name = take(&ret.headers.ptr[i].name);
        resp->headers[i].value = take(&ret.headers.ptr[i].value);
    }
    free(ret.headers.ptr);
    resp->body = (uint8_t *)dup_n(ret.body.ptr, ret.body.len);
    resp->body_len = ret.body.len;
    pack_list_u8_free(&ret.body);
    return true;
}

static char lower(char c) { return (c >= 'A' && c <= 'Z') ? (char)(c - 'A' + 'a') : c; }

const char *wop_http_header(const wop_http_response_t *resp, const char *name) {
    for (size_t i = 0; i < resp->header_count; i++) {
        const char *a = resp->headers[i].name, *b = name;
        while (*a && *b && lower(*a) == lower(*b)) a++, b++;
        if (!*a && !*b) return resp->headers[i].value;
    }
    return NULL;
}

/* ---- mcp ---------------------------------------------------------------- */

static bool mcp_result(bool ok, openwop_node_pack_mcp_json_t *ret, openwop_node_pack_mcp_error_info_t *e,
                       char **result_json, wop_error_t *err) {
    *result_json = NULL;
    if (ok) {
        *result_json = take(ret);
        return true;
    }
    error_from_wit(err, e);
    return false;
}

bool wop_mcp_call_tool(const wop_ctx_t *ctx, const char *server_id, const char *name, const char *args_json,
                       const char *idempotency_key, char **result_json, wop_error_t *err) {
    (void)ctx;
    pack_string_t s = borrow(server_id), n = borrow(name), a = borrow(args_json ? args_json : "{}"),
                  k = borrow(idempotency_key);
    openwop_node_pack_mcp_json_t ret;
    openwop_node_pack_mcp_error_info_t e;
    bool ok = openwop_node_pack_mcp_call_tool(&s, &n, &a, idempotency_key ? &k : NULL, &ret, &e);
    return mcp_result(ok, &ret, &e, result_json, err);
}

bool wop_mcp_list_tools(const wop_ctx_t *ctx, const char *server_id, const char *cursor, char **result_json,
                        wop_error_t *err) {
    (void)ctx;
    pack_string_t s = borrow(server_id), c = borrow(cursor);
    openwop_node_pack_mcp_json_t ret;
    openwop_node_pack_mcp_error_info_t e;
    bool ok = openwop_node_pack_mcp_list_tools(&s, cursor ? &c : NULL, &ret, &e);
    return mcp_result(ok, &ret, &e, result_json, err);
}

bool wop_mcp_read_resource(const wop_ctx_t *ctx, const char *server_id, const char *uri, char **result_json,
                           wop_error_t *err) {
    (void)ctx;
    pack_string_t s = borrow(server_id), u = borrow(uri);
    openwop_node_pack_mcp_json_t ret;
    openwop_node_pack_mcp_error_info_t e;
    bool ok = openwop_node_pack_mcp_read_resource(&s, &u, &ret, &e);
    return mcp_result(ok, &ret, &e, result_json, err);
}

bool wop_mcp_server_health(const wop_ctx_t *ctx, const char *server_id, char **result_json, wop_error_t *err) {
    (void)ctx;
    pack_string_t s = borrow(server_id);
    openwop_node_pack_mcp_json_t ret;
    openwop_node_pack_mcp_error_info_t e;
    bool ok = openwop_node_pack_mcp_server_health(&s, &ret, &e);
    return mcp_result(ok, &ret, &e, result_json, err);
}

/* ---- the exports -------------------------------------------------------- */

void exports_openwop_node_pack_node_describe(exports_openwop_node_pack_node_pack_info_t *ret) {
    wop_pack_info_t info = {0};
    wop_describe(&info);
    pack_string_dup(&ret->name, info.name);
    pack_string_dup(&ret->version, info.version);
    ret->nodes.len = info.node_count;
    ret->nodes.ptr = calloc(info.node_count ? info.node_count : 1, sizeof *ret->nodes.ptr);
    if (!ret->nodes.ptr) abort();
    for (size_t i = 0; i < info.node_count; i++) {
        pack_string_dup(&ret->nodes.ptr[i].type_id, info.nodes[i].type_id);
        pack_string_dup(&ret->nodes.ptr[i].version, info.nodes[i].version);
    }
}

static void set_wit_string(pack_string_t *w, const char *s) { pack_string_dup(w, s ? s : ""); }

bool exports_openwop_node_pack_node_invoke(exports_openwop_node_pack_node_request_t *request,
                                           exports_openwop_node_pack_node_outcome_t *ret,
                                           exports_openwop_node_pack_node_error_info_t *err) {
    struct wop_ctx ctx = {0};
    wop_error_t e = {0};
    wop_outcome_t out = {0};
    bool ok;

    char *run_id = take(&request->context.run_id);
    char *node_id = take(&request->context.node_id);
    char *tenant_id = take(&request->context.tenant_id);
    char *type_id = take(&request->context.type_id);
    char *inputs_text = take(&request->inputs);
    char *config_text = take(&request->config);
    char *resume_text = request->resume.is_some ? take(&request->resume.val) : NULL;

    wop_json_t *inputs = wop_json_parse(inputs_text, strlen(inputs_text));
    wop_json_t *config = wop_json_parse(config_text, strlen(config_text));
    wop_json_t *resume = resume_text ? wop_json_parse(resume_text, strlen(resume_text)) : NULL;
    if (!inputs) {
        ok = wop_error_set(&e, WOP_VALIDATION_ERROR, "inputs is not valid JSON", NULL);
    } else if (!config) {
        ok = wop_error_set(&e, WOP_VALIDATION_ERROR, "config is not valid JSON", NULL);
    } else if (resume_text && !resume) {
        ok = wop_error_set(&e, WOP_VALIDATION_ERROR, "resume is not valid JSON", NULL);
    } else {
        wop_request_t req = {
            .run_id = run_id,
            .node_id = node_id,
            .tenant_id = tenant_id,
            .attempt = request->context.attempt,
            .type_id = type_id,
            .inputs = inputs,
            .config = config,
            .resume = resume,
            .inputs_text = inputs_text,
        };
        ok = wop_invoke(&ctx, &req, &out, &e);
        if (ok && !out.json) {
            ok = wop_error_set(&e, WOP_INTERNAL_ERROR,
                               "wop_invoke returned true without wop_completed/wop_suspended", NULL);
        }
    }

    if (ok) {
        ret->tag = out.suspended ? EXPORTS_OPENWOP_NODE_PACK_NODE_OUTCOME_SUSPENDED
                                 : EXPORTS_OPENWOP_NODE_PACK_NODE_OUTCOME_COMPLETED;
        set_wit_string(&ret->val.completed, out.json);
    } else {
        set_wit_string(&err->code, e.code ? e.code : WOP_INTERNAL_ERROR);
        set_wit_string(&err->message, e.message ? e.message : "wop_invoke failed without setting an error");
        err->details.is_some = e.details != NULL;
        if (e.details) set_wit_string(&err->details.val, e.details);
    }
    /* The instance is discarded after the invocation; free what is cheap to. */
    free(out.json);
    wop_error_free(&e);
    wop_json_free(inputs);
    wop_json_free(config);
    wop_json_free(resume);
    free(run_id);
    free(node_id);
    free(tenant_id);
    free(type_id);
    free(inputs_text);
    free(config_text);
    free(resume_text);
    return ok;
}
