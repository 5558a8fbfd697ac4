/* `wop.samples.c.tool-call`: calls one tool through the host's gate. The C
 * twin of sample-packs/samples/tool-call.
 *
 * Input {"tool": "<scope>:<id>", "arguments": {...}?, "idempotencyKey": "..."?}
 * -> {"tool": ..., "result": <the tool's JSON result>}. A refused or failed
 * call fails the node with the tool error's code, message and details.
 * {"list": true} -> {"tools": [<ToolDescriptor>, ...]}. "repeat": n calls the
 * tool n times in a loop and returns {"tool", "results": [...]}. */
#include "wop.h"

bool wop_invoke(const wop_ctx_t *ctx, const wop_request_t *req, wop_outcome_t *out, wop_error_t *err) {
    const wop_json_t *in = req->inputs;
    if (in->kind != WOP_JSON_OBJECT) return wop_error_validation(err, "invalid inputs: expected an object");

    wop_buf_t b = {0};
    if (wop_json_is_true(wop_json_get(in, "list"))) {
        size_t count = 0;
        char *tools = wop_tools_list(ctx, &count);
        wop_buf_printf(&b, "{\"count\":%zu}", count);
        wop_log_info(ctx, "listed tools", wop_buf_str(&b));
        wop_buf_free(&b);
        wop_buf_printf(&b, "{\"tools\":%s}", tools);
        return wop_completed(out, wop_buf_str(&b));
    }

    const char *tool = wop_json_string(wop_json_get(in, "tool"));
    if (!tool) return wop_error_validation(err, "inputs.tool is required unless inputs.list is true");
    const wop_json_t *args_v = wop_json_get(in, "arguments");
    char *args = (args_v && !wop_json_is_null(args_v)) ? wop_json_raw(args_v) : "{}";

    wop_buf_puts(&b, "{\"tool\":");
    wop_buf_json_string(&b, tool);
    wop_buf_puts(&b, "}");
    wop_log_info(ctx, "calling tool", wop_buf_str(&b));
    wop_buf_free(&b);

    wop_buf_puts(&b, "{\"tool\":");
    wop_buf_json_string(&b, tool);
    char *result = NULL;
    const wop_json_t *repeat = wop_json_get(in, "repeat");
    if (repeat && repeat->kind == WOP_JSON_NUMBER) {
        wop_buf_puts(&b, ",\"results\":[");
        for (long i = 0; i < (long)repeat->number; i++) {
            /* A refused or failed call: `err` carries the tool's code,
             * message and details, and returning false fails the node. */
            if (wop_tools_call(ctx, tool, args, NULL, &result, err) != WOP_TOOL_OK) return false;
            if (i) wop_buf_puts(&b, ",");
            wop_buf_puts(&b, result);
        }
        wop_buf_puts(&b, "]}");
        return wop_completed(out, wop_buf_str(&b));
    }
    const char *key = wop_json_string(wop_json_get(in, "idempotencyKey"));
    if (wop_tools_call(ctx, tool, args, key, &result, err) != WOP_TOOL_OK) return false;
    wop_buf_printf(&b, ",\"result\":%s}", result);
    return wop_completed(out, wop_buf_str(&b));
}
