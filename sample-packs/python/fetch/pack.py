"""`wop.samples.python.fetch`: fetches one URL through the host's safe-fetch.
The Python twin of sample-packs/samples/fetch.

Input {"url", "method"?, "headers"?: {name: value}, "body"?: text,
"idempotencyKey"?, "showBody"?} -> {"status", "headers": {...a few},
"bodyLength", "body"?}. A refused fetch fails the node with the host's error
(egress_denied with details.reason, upstream_unavailable, ...).
"""

from wop_sdk import Ctx, NodeError, Outcome, Request

# Response headers worth showing.
SHOWN = ("content-type", "content-length", "location", "etag", "last-modified", "server")


def invoke(ctx: Ctx, request: Request) -> Outcome:
    inputs = request.inputs
    if not isinstance(inputs, dict) or not isinstance(inputs.get("url"), str):
        raise NodeError.validation("invalid inputs: `url` (a string) is required")
    method = inputs.get("method") or "GET"
    headers = sorted((inputs.get("headers") or {}).items())
    ctx.log.info("fetching", {"method": method})
    resp = ctx.http.fetch(
        inputs["url"],
        method=method,
        headers=headers,
        body=inputs.get("body"),
        idempotency_key=inputs.get("idempotencyKey"),
    )
    shown = {}
    for name, value in resp.headers:
        lower = name.lower()
        if lower in SHOWN and lower not in shown:
            shown[lower] = value
    out = {"status": resp.status, "headers": shown, "bodyLength": len(resp.body)}
    if inputs.get("showBody") is True:
        out["body"] = resp.text()
    return Outcome.completed(out)
