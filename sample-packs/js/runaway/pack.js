// TEST PACK `wop.samples.js.runaway`: a node that never finishes on its own,
// so that sdk/verify-samples.sh can show the sandbox limits stopping it.
// Not an example to copy.
//
// {"mode":"spin"}  -> loops forever (stopped by the fuel limit).
// {"mode":"alloc"} -> allocates and fills 1 MiB chunks forever, keeping
//                     each one (stopped by the memory limit).
import { NodeError } from "wop-sdk";

export function invoke(ctx, request) {
  const mode = request.inputs?.mode;
  if (mode !== "spin" && mode !== "alloc") {
    throw NodeError.validation('inputs.mode must be "spin" or "alloc"');
  }
  ctx.log.info("running away", { mode });
  if (mode === "spin") {
    let n = 0;
    for (;;) n = (n + 1) | 0;
  }
  const chunks = [];
  for (;;) {
    const chunk = new Uint8Array(1 << 20);
    chunk.fill(chunks.length & 0xff); // touch every page
    chunks.push(chunk);
  }
}
