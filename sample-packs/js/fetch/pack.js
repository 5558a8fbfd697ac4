// `wop.samples.js.fetch`: fetches one URL through the host's safe-fetch. The
// JavaScript twin of sample-packs/samples/fetch.
//
// Input {"url", "method"?, "headers"?: {name: value}, "body"?: text,
// "idempotencyKey"?, "showBody"?} -> {"status", "headers": {...a few},
// "bodyLength", "body"?}. A refused fetch fails the node with the host's
// error (egress_denied with details.reason, upstream_unavailable, ...).
import { NodeError, Outcome } from "wop-sdk";

// Response headers worth showing.
const SHOWN = ["content-type", "content-length", "location", "etag", "last-modified", "server"];

export function invoke(ctx, request) {
  const inputs = request.inputs;
  if (inputs === null || typeof inputs !== "object" || typeof inputs.url !== "string") {
    throw NodeError.validation("invalid inputs: `url` (a string) is required");
  }
  const method = inputs.method ?? "GET";
  // Headers sorted by name, like the Rust sample's BTreeMap.
  const headers = Object.entries(inputs.headers ?? {}).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  ctx.log.info("fetching", { method });
  const resp = ctx.http.fetch({
    url: inputs.url,
    method,
    headers,
    body: inputs.body,
    idempotencyKey: inputs.idempotencyKey,
  });
  const shown = {};
  for (const [name, value] of resp.headers) {
    const lower = name.toLowerCase();
    if (SHOWN.includes(lower) && !(lower in shown)) shown[lower] = value;
  }
  const out = { status: resp.status, headers: shown, bodyLength: resp.body.length };
  if (inputs.showBody === true) out.body = resp.text();
  return Outcome.completed(out);
}
