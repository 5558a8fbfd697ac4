"""`wop.samples.python.tool-call`: calls one tool through the host's gate.
The Python twin of sample-packs/samples/tool-call.

Input {"tool": "<scope>:<id>", "arguments": {...}?, "idempotencyKey": "..."?}
-> {"tool": ..., "result": <the tool's JSON result>}. A refused or failed call
fails the node with the tool error's code, message and details.
{"list": true} -> {"tools": [<ToolDescriptor>, ...]}. "repeat": n calls the
tool n times in a loop and returns {"tool", "results": [...]}.
"""

from wop_sdk import Ctx, NodeError, Outcome, Request


def invoke(ctx: Ctx, request: Request) -> Outcome:
    inputs = request.inputs
    if not isinstance(inputs, dict):
        raise NodeError.validation("invalid inputs: expected an object")
    if inputs.get("list") is True:
        tools = ctx.tools.list()
        ctx.log.info("listed tools", {"count": len(tools)})
        return Outcome.completed({"tools": tools})
    tool = inputs.get("tool")
    if not isinstance(tool, str):
        raise NodeError.validation("inputs.tool is required unless inputs.list is true")
    arguments = inputs.get("arguments")
    if arguments is None:
        arguments = {}
    ctx.log.info("calling tool", {"tool": tool})
    # A ToolError is a NodeError carrying the tool's code, message and
    # details: letting it propagate fails the node with the tool's error.
    repeat = inputs.get("repeat")
    if repeat is not None:
        results = [ctx.tools.call(tool, arguments) for _ in range(int(repeat))]
        return Outcome.completed({"tool": tool, "results": results})
    result = ctx.tools.call(tool, arguments, inputs.get("idempotencyKey"))
    return Outcome.completed({"tool": tool, "result": result})
