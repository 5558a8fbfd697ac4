"""`wop.samples.python.hello`: greets `inputs.name` (default "world") and logs
the greeting at info level. The Python twin of sample-packs/samples/hello."""

from wop_sdk import Ctx, NodeError, Outcome, Request


def invoke(ctx: Ctx, request: Request) -> Outcome:
    inputs = request.inputs
    if not isinstance(inputs, dict):
        raise NodeError.validation("invalid inputs: expected an object")
    name = inputs.get("name")
    if name is None:
        name = "world"
    if not isinstance(name, str):
        raise NodeError.validation("invalid inputs: `name` must be a string")
    ctx.log.info("greeting", {"name": name})
    return Outcome.completed({"greeting": f"Hello, {name}!"})
