"""TEST PACK `wop.samples.python.runaway`: a node that never finishes on its
own, so that sdk/verify-samples.sh can show the sandbox limits stopping it.
Not an example to copy.

{"mode": "spin"}  -> loops forever (stopped by the fuel limit).
{"mode": "alloc"} -> allocates and fills 1 MiB chunks forever, keeping each
                     one (stopped by the memory limit).
"""

from wop_sdk import Ctx, NodeError, Outcome, Request


def invoke(ctx: Ctx, request: Request) -> Outcome:
    inputs = request.inputs
    mode = inputs.get("mode") if isinstance(inputs, dict) else None
    if mode not in ("spin", "alloc"):
        raise NodeError.validation('inputs.mode must be "spin" or "alloc"')
    ctx.log.info("running away", {"mode": mode})
    if mode == "spin":
        n = 0
        while True:
            n += 1
    chunks = []
    while True:
        chunks.append(bytes([len(chunks) & 0xFF]) * (1 << 20))  # filled, so touched
