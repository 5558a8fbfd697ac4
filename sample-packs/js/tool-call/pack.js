// `wop.samples.js.tool-call`: calls one tool through the host's gate. The
// JavaScript twin of sample-packs/samples/tool-call.
//
// Input {"tool": "<scope>:<id>", "arguments": {...}?, "idempotencyKey": "..."?}
// -> {"tool": ..., "result": <the tool's JSON result>}. A refused or failed
// call fails the node with the tool error's code, message and details.
// {"list": true} -> {"tools": [<ToolDescriptor>, ...]}. "repeat": n calls the
// tool n times in a loop and returns {"tool", "results": [...]}.
import { NodeError, Outcome } from "wop-sdk";

export function invoke(ctx, request) {
  const inputs = request.inputs;
  if (inputs === null || typeof inputs !== "object" || Array.isArray(inputs)) {
    throw NodeError.validation("invalid inputs: expected an object");
  }
  if (inputs.list === true) {
    const tools = ctx.tools.list();
    ctx.log.info("listed tools", { count: tools.length });
    return Outcome.completed({ tools });
  }
  const tool = inputs.tool;
  if (typeof tool !== "string") {
    throw NodeError.validation("inputs.tool is required unless inputs.list is true");
  }
  const args = inputs.arguments ?? {};
  ctx.log.info("calling tool", { tool });
  // A ToolError is a NodeError carrying the tool's code, message and
  // details: letting it propagate fails the node with the tool's error.
  if (inputs.repeat != null) {
    const results = [];
    for (let i = 0; i < inputs.repeat; i++) {
      results.push(ctx.tools.call(tool, args));
    }
    return Outcome.completed({ tool, results });
  }
  const result = ctx.tools.call(tool, args, inputs.idempotencyKey);
  return Outcome.completed({ tool, result });
}
