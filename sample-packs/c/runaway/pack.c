/* TEST PACK `wop.samples.c.runaway`: a node that never finishes on its own,
 * so that sdk/verify-samples.sh can show the sandbox limits stopping it.
 * Not an example to copy.
 *
 * {"mode":"spin"}  -> loops forever (stopped by the fuel limit).
 * {"mode":"alloc"} -> allocates and fills 1 MiB chunks forever, keeping each
 *                     one in a list (stopped by the memory limit). */
#include <stdlib.h>
#include <string.h>
#include "wop.h"

#define CHUNK (1u << 20)

/* The newest chunk: a volatile global, so the allocations cannot be optimized away. */
void *volatile runaway_head;

bool wop_invoke(const wop_ctx_t *ctx, const wop_request_t *req, wop_outcome_t *out, wop_error_t *err) {
    const char *mode = req->inputs->kind == WOP_JSON_OBJECT ? wop_json_string(wop_json_get(req->inputs, "mode")) : NULL;
    bool spin = mode && strcmp(mode, "spin") == 0;
    if (!spin && !(mode && strcmp(mode, "alloc") == 0)) {
        return wop_error_validation(err, "inputs.mode must be \"spin\" or \"alloc\"");
    }
    wop_buf_t fields = {0};
    wop_buf_printf(&fields, "{\"mode\":\"%s\"}", mode);
    wop_log_info(ctx, "running away", wop_buf_str(&fields));
    if (spin) {
        volatile unsigned long n = 0;
        for (;;) n++;
    }
    for (;;) {
        void **chunk = malloc(CHUNK);
        if (!chunk) return wop_error_set(err, "node_failed", "malloc returned NULL", NULL);
        memset(chunk, 0x5a, CHUNK); /* touch every page */
        *chunk = runaway_head;      /* each chunk points to the previous one */
        runaway_head = chunk;
    }
}
