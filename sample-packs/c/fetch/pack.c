/* `wop.samples.c.fetch`: fetches one URL through the host's safe-fetch. The
 * C twin of sample-packs/samples/fetch.
 *
 * Input {"url", "method"?, "headers"?: {name: value}, "body"?: text,
 * "idempotencyKey"?, "showBody"?} -> {"status", "headers": {...a few},
 * "bodyLength", "body"?}. A refused fetch fails the node with the host's
 * error (egress_denied with details.reason, upstream_unavailable, ...). */
#include <stdlib.h>
#include <string.h>

#include "wop.h"

/* Response headers worth showing. */
static const char *const SHOWN[] = {"content-type", "content-length", "location", "etag", "last-modified", "server"};
#define N_SHOWN (sizeof SHOWN / sizeof SHOWN[0])

static char lower(char c) { return (c >= 'A' && c <= 'Z') ? (char)(c - 'A' + 'a') : c; }

static bool eq_ignore_case(const char *a, const char *b) {
    for (; *a && *b; a++, b++)
        if (lower(*a) != lower(*b)) return false;
    return *a == *b;
}

static int cmp_headers(const void *a, const void *b) {
    return strcmp(((const wop_header_t *)a)->name, ((const wop_header_t *)b)->name);
}

bool wop_invoke(const wop_ctx_t *ctx, const wop_request_t *req, wop_outcome_t *out, wop_error_t *err) {
    const wop_json_t *in = req->inputs;
    const char *url = wop_json_string(wop_json_get(in, "url"));
    if (!url) return wop_error_validation(err, "invalid inputs: `url` (a string) is required");
    const char *method = wop_json_string(wop_json_get(in, "method"));
    if (!method) method = "GET";

    wop_http_request_t r = {.method = method, .url = url};
    const wop_json_t *hdrs = wop_json_get(in, "headers");
    wop_header_t *headers = NULL;
    if (hdrs && hdrs->kind == WOP_JSON_OBJECT && hdrs->count) {
        headers = calloc(hdrs->count, sizeof *headers);
        for (size_t i = 0; i < hdrs->count; i++) {
            const char *value = wop_json_string(hdrs->items[i]);
            if (!value) return wop_error_validation(err, "invalid inputs: header `%s` must be a string", hdrs->keys[i]);
            headers[i] = (wop_header_t){hdrs->keys[i], value};
        }
        /* Sorted by name, like the Rust sample's BTreeMap. */
        qsort(headers, hdrs->count, sizeof *headers, cmp_headers);
        r.headers = headers;
        r.header_count = hdrs->count;
    }
    const wop_json_t *body = wop_json_get(in, "body");
    if (body && body->kind == WOP_JSON_STRING) {
        r.body = (const uint8_t *)body->string;
        r.body_len = body->string_len;
    }
    r.idempotency_key = wop_json_string(wop_json_get(in, "idempotencyKey"));

    wop_buf_t b = {0};
    wop_buf_puts(&b, "{\"method\":");
    wop_buf_json_string(&b, method);
    wop_buf_puts(&b, "}");
    wop_log_info(ctx, "fetching", wop_buf_str(&b));
    wop_buf_free(&b);

    wop_http_response_t resp;
    /* A refused or failed fetch fails the node with the host's error. */
    if (!wop_http_fetch(ctx, &r, &resp, err)) return false;

    wop_buf_printf(&b, "{\"status\":%u,\"headers\":{", (unsigned)resp.status);
    bool seen[N_SHOWN] = {false};
    bool first = true;
    for (size_t i = 0; i < resp.header_count; i++) {
        for (size_t k = 0; k < N_SHOWN; k++) {
            if (!seen[k] && eq_ignore_case(resp.headers[i].name, SHOWN[k])) {
                seen[k] = true;
                if (!first) wop_buf_puts(&b, ",");
                first = false;
                wop_buf_json_string(&b, SHOWN[k]);
                wop_buf_puts(&b, ":");
                wop_buf_json_string(&b, resp.headers[i].value);
            }
        }
    }
    wop_buf_printf(&b, "},\"bodyLength\":%zu", resp.body_len);
    if (wop_json_is_true(wop_json_get(in, "showBody"))) {
        /* The body as text: invalid UTF-8 becomes U+FFFD, like the Rust sample. */
        wop_buf_puts(&b, ",\"body\":");
        wop_buf_json_string_n(&b, (const char *)resp.body, resp.body_len);
    }
    wop_buf_puts(&b, "}");
    return wop_completed(out, wop_buf_str(&b));
}
