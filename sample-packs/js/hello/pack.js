// `wop.samples.js.hello`: greets `inputs.name` (default "world") and logs the
// greeting at info level. The JavaScript twin of sample-packs/samples/hello.
import { NodeError, Outcome } from "wop-sdk";

export function invoke(ctx, request) {
  const inputs = request.inputs;
  if (inputs === null || typeof inputs !== "object" || Array.isArray(inputs)) {
    throw NodeError.validation("invalid inputs: expected an object");
  }
  const name = inputs.name ?? "world";
  if (typeof name !== "string") {
    throw NodeError.validation("invalid inputs: `name` must be a string");
  }
  ctx.log.info("greeting", { name });
  return Outcome.completed({ greeting: `Hello, ${name}!` });
}
