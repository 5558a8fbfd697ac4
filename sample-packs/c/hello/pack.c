/* `wop.samples.c.hello`: greets `inputs.name` (default "world") and logs the
 * greeting at info level. The C twin of sample-packs/samples/hello. */
#include "wop.h"

bool wop_invoke(const wop_ctx_t *ctx, const wop_request_t *req, wop_outcome_t *out, wop_error_t *err) {
    if (req->inputs->kind != WOP_JSON_OBJECT) {
        return wop_error_validation(err, "invalid inputs: expected an object");
    }
    const wop_json_t *name_v = wop_json_get(req->inputs, "name");
    const char *name = "world";
    if (name_v && !wop_json_is_null(name_v)) {
        name = wop_json_string(name_v);
        if (!name) return wop_error_validation(err, "invalid inputs: `name` must be a string");
    }

    wop_buf_t fields = {0};
    wop_buf_puts(&fields, "{\"name\":");
    wop_buf_json_string(&fields, name);
    wop_buf_puts(&fields, "}");
    wop_log_info(ctx, "greeting", wop_buf_str(&fields));

    wop_buf_t greeting = {0};
    wop_buf_printf(&greeting, "Hello, %s!", name);
    wop_buf_t output = {0};
    wop_buf_puts(&output, "{\"greeting\":");
    wop_buf_json_string(&output, wop_buf_str(&greeting));
    wop_buf_puts(&output, "}");
    return wop_completed(out, wop_buf_str(&output));
}
