/**
 * wop-sdk: OpenWOP node packs in JavaScript.
 *
 * A node pack is a WebAssembly component implementing one or more OpenWOP
 * node types against the `openwop:node-pack@0.1.0` WIT world. `sdk/js/build.sh`
 * turns a pack directory (`pack.json` + `pack.js`) into such a component with
 * componentize-qjs (QuickJS) and assembles it with `wop pack`.
 *
 * Your `pack.js` exports one function, `invoke(ctx, request)`, and may export
 * `describe()` (by default the description is taken from `pack.json`):
 *
 * ```js
 * import { Outcome, NodeError } from "wop-sdk";
 *
 * export function invoke(ctx, request) {
 *   const name = request.inputs.name ?? "world";
 *   ctx.log.info("greeting", { name });
 *   return Outcome.completed({ greeting: `Hello, ${name}!` });
 * }
 * ```
 *
 * Returning a plain value is the same as `Outcome.completed(value)`. Throwing
 * a {@link NodeError} (or a {@link ToolError} from `ctx.tools.call`, or the
 * error of a refused `ctx.http.fetch`) fails the node with that error's
 * `code`, `message` and `details`; any other exception fails it with
 * `internal_error`.
 *
 * Capabilities are what you declare: the build imports exactly the host
 * interfaces listed in `pack.json` `x-wop.capabilities` (`log`, `clock`,
 * `random`, `tools`, `http`, `mcp`), so the runtime sees no interface the pack
 * does not ask for. Using an undeclared one throws a `NodeError` with code
 * `internal_error` that names the missing capability. WASI is stubbed out
 * entirely, so the SDK provides what QuickJS would take from it:
 * `Date.now()` and `new Date()` read the host clock (`clock` capability) and
 * `Math.random()` the host's random source (`random`); both are replay-safe
 * (the same run, node and attempt see the same values), and without the
 * capability they throw the `NodeError` naming it. `console.log` & co.
 * become log lines when the pack declares `log`. Code at module top level
 * runs once, at build time, when there is no host: console output there is
 * dropped and the host clock and random source are not available.
 *
 * @module wop-sdk
 */

// Generated per pack by build.sh: the host interfaces this pack imports
// (`undefined` for the ones it did not declare) and the pack's description
// from pack.json.
import * as host from "./_imports.js";
import { manifest } from "./_manifest.js";

/** Common OpenWOP error codes used by this SDK. */
export const codes = Object.freeze({
  /** The node's inputs, config or arguments are invalid. */
  VALIDATION_ERROR: "validation_error",
  /** The pack itself misbehaved. */
  INTERNAL_ERROR: "internal_error",
});

/**
 * A node failure: an OpenWOP error `code`, a `message` for people and
 * optional machine-readable `details` (a JSON object).
 *
 * Thrown from `invoke`, it is reported as the node's own failure with exactly
 * this code, message and details.
 */
export class NodeError extends Error {
  /**
   * @param {string} code OpenWOP error code, e.g. `validation_error`.
   * @param {string} message Human-readable message.
   * @param {object} [details] Machine-readable details (a JSON object).
   */
  constructor(code, message, details) {
    super(message);
    this.name = "NodeError";
    /** @type {string} */
    this.code = code;
    /** @type {object | undefined} */
    this.details = details;
  }

  /** A `validation_error` with `message` (and optional `details`). */
  static validation(message, details) {
    return new NodeError(codes.VALIDATION_ERROR, message, details);
  }

  /** `code: message`. */
  toString() {
    return `${this.code}: ${this.message}`;
  }
}

/**
 * A failed tool call. `kind` says which WIT `tool-error` case it was:
 * `forbidden`, `not-found`, `rate-limited`, `budget-exhausted`, `conflict` or
 * `failed`; `code`, `message` and `details` are the protocol error. Thrown
 * out of `invoke` unchanged, it fails the node with the tool's code.
 */
export class ToolError extends NodeError {
  constructor(kind, code, message, details) {
    super(code, message, details);
    this.name = "ToolError";
    /** @type {"forbidden"|"not-found"|"rate-limited"|"budget-exhausted"|"conflict"|"failed"} */
    this.kind = kind;
  }
}

/** How an invocation ended, when it did not fail. */
export const Outcome = Object.freeze({
  /** The node finished with `output` (any JSON-serializable value). */
  completed(output) {
    return { [OUTCOME]: "completed", value: output };
  },
  /**
   * The node waits for outside input; `interrupt` describes it. The runtime
   * invokes the node again with `request.resume` set.
   */
  suspended(interrupt) {
    return { [OUTCOME]: "suspended", value: interrupt };
  },
});

const OUTCOME = Symbol("wop.outcome");

// ---------------------------------------------------------------------------
// Helpers

// True while the host runs `describe` or `invoke` (the module's top level
// runs at build time, when the component is pre-initialized: no host then).
let inHost = false;

function need(name) {
  if (!inHost) {
    throw new Error(
      `the \`${name}\` capability is not available at module top level (it runs once, at build time); use it inside invoke()`,
    );
  }
  const iface = host[name];
  if (iface === undefined) {
    throw new NodeError(
      codes.INTERNAL_ERROR,
      `the pack uses the \`${name}\` capability but pack.json does not declare it in x-wop.capabilities`,
      { capability: name },
    );
  }
  return iface;
}

function parseLenient(json) {
  if (json === null || json === undefined) return undefined;
  try {
    return JSON.parse(json);
  } catch {
    return json;
  }
}

function toJson(value, what) {
  const s = JSON.stringify(value === undefined ? null : value);
  if (s === undefined) {
    throw new NodeError(codes.INTERNAL_ERROR, `${what} is not serializable as JSON`);
  }
  return s;
}

/** The `{tag, val}` a host call threw, from whatever wrapper carries it. */
function witErr(e) {
  if (e && typeof e === "object") {
    if ("tag" in e && "val" in e) return e;
    if (e.payload !== undefined) return witErr(e.payload);
    if (e.cause !== undefined) return witErr(e.cause);
    if ("code" in e && "message" in e) return e;
  }
  return undefined;
}

function errorInfo(info) {
  return {
    code: String(info.code),
    message: String(info.message),
    details: parseLenient(info.details),
  };
}

// QuickJS has no TextEncoder/TextDecoder: UTF-8 by hand.
function encodeUtf8(s) {
  const out = [];
  for (const ch of s) {
    let c = ch.codePointAt(0);
    if (c >= 0xd800 && c <= 0xdfff) c = 0xfffd; // lone surrogate
    if (c < 0x80) out.push(c);
    else if (c < 0x800) out.push(0xc0 | (c >> 6), 0x80 | (c & 63));
    else if (c < 0x10000) out.push(0xe0 | (c >> 12), 0x80 | ((c >> 6) & 63), 0x80 | (c & 63));
    else out.push(0xf0 | (c >> 18), 0x80 | ((c >> 12) & 63), 0x80 | ((c >> 6) & 63), 0x80 | (c & 63));
  }
  return Uint8Array.from(out);
}

/** Decode UTF-8; invalid sequences become U+FFFD (like `from_utf8_lossy`). */
function utf8(bytes) {
  const b = bytes instanceof Uint8Array ? bytes : Uint8Array.from(bytes);
  let s = "";
  let i = 0;
  while (i < b.length) {
    const c = b[i];
    let n = 0;
    let cp = 0xfffd;
    let min = 0;
    if (c < 0x80) { cp = c; n = 0; }
    else if (c >= 0xc2 && c < 0xe0) { cp = c & 31; n = 1; min = 0x80; }
    else if (c >= 0xe0 && c < 0xf0) { cp = c & 15; n = 2; min = 0x800; }
    else if (c >= 0xf0 && c < 0xf5) { cp = c & 7; n = 3; min = 0x10000; }
    else { s += "\ufffd"; i++; continue; }
    let j = 1;
    for (; j <= n; j++) {
      const d = b[i + j];
      if (d === undefined || (d & 0xc0) !== 0x80) break;
      cp = (cp << 6) | (d & 63);
    }
    if (j <= n || cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) {
      s += "\ufffd";
      i += Math.max(1, j);
      continue;
    }
    s += String.fromCodePoint(cp);
    i += n + 1;
  }
  return s;
}

// ---------------------------------------------------------------------------
// console: QuickJS has none, and WASI stdio is stubbed. `console.log` & co.
// become log lines when the pack declares `log`, and are dropped otherwise.

function consoleLine(args) {
  return args
    .map((a) => {
      if (typeof a === "string") return a;
      try {
        const j = JSON.stringify(a);
        return j === undefined ? String(a) : j;
      } catch {
        return String(a);
      }
    })
    .join(" ");
}

if (typeof globalThis.console === "undefined") {
  const to = (level) => (...args) => {
    if (inHost && host.log !== undefined) host.log.log(level, consoleLine(args), null);
  };
  globalThis.console = {
    log: to("info"),
    info: to("info"),
    debug: to("debug"),
    warn: to("warn"),
    error: to("error"),
  };
}

// ---------------------------------------------------------------------------
// Date and Math.random: QuickJS reads them from WASI, which is stubbed (the
// call would trap with `unreachable`). They read the host's replayable
// clock and random source instead (capabilities `clock`, `random`).

function hostNowMs() {
  return Number(need("clock").nowMs());
}

const RealDate = globalThis.Date;
class HostDate extends RealDate {
  constructor(...args) {
    if (args.length === 0) super(hostNowMs());
    else super(...args);
  }
  static now() {
    return hostNowMs();
  }
}
globalThis.Date = HostDate;

Math.random = function random() {
  const bytes = need("random").fill(7);
  // 53 random bits as a double in [0, 1).
  let x = 0;
  for (const b of bytes) x = x * 256 + b;
  return (x % 2 ** 53) / 2 ** 53;
};

// ---------------------------------------------------------------------------
// The context

/**
 * Structured logging (`log` capability). Every line becomes a `log.appended`
 * event of the run. `fields` must be a JSON object (the host drops anything
 * else with a warning); long messages are truncated by the host.
 */
export class Log {
  /**
   * Append one line at `level` (`"debug"`, `"info"`, `"warn"`, `"error"`).
   * @param {"debug"|"info"|"warn"|"error"} level
   * @param {string} message
   * @param {object} [fields]
   */
  write(level, message, fields) {
    need("log").log(level, String(message), fields === undefined ? null : toJson(fields, "log fields"));
  }
  /** Log at debug level. */
  debug(message, fields) { this.write("debug", message, fields); }
  /** Log at info level. */
  info(message, fields) { this.write("info", message, fields); }
  /** Log at warn level. */
  warn(message, fields) { this.write("warn", message, fields); }
  /** Log at error level. */
  error(message, fields) { this.write("error", message, fields); }
}

/**
 * Tool calls through the host's gate (`tools` capability): authorization
 * (pack grant and the principal's scopes, failing closed), rate limits,
 * budgets and durable effect claims.
 */
export class Tools {
  /**
   * Call `toolId` with JSON `args`; returns the tool's JSON result.
   *
   * `idempotencyKey`, when given, names the business operation: the same key
   * never fires the effect twice, across retries and executors. Without it
   * the effect identity is the position of this call in the invocation.
   *
   * @param {string} toolId `<scope>:<id>`
   * @param {any} [args] JSON arguments (default `{}`)
   * @param {string} [idempotencyKey]
   * @returns {any}
   * @throws {ToolError} `forbidden`, `not_found`, `rate_limited`, ...
   */
  call(toolId, args = {}, idempotencyKey) {
    const tools = need("tools");
    let result;
    try {
      result = tools.call(String(toolId), toJson(args, "tool arguments"), idempotencyKey ?? null);
    } catch (e) {
      const err = witErr(e);
      if (err && "tag" in err) {
        const info = errorInfo(err.val);
        throw new ToolError(err.tag, info.code, info.message, info.details);
      }
      throw e;
    }
    try {
      return JSON.parse(result);
    } catch (e) {
      throw new ToolError("failed", codes.VALIDATION_ERROR, `tool \`${toolId}\` returned malformed JSON: ${e}`);
    }
  }

  /**
   * The tools this invocation may call, sorted by `toolId`, as OpenWOP
   * `ToolDescriptor`s: `{toolId, title?, description?, safetyTier,
   * inputSchema?, outputSchema?}`.
   */
  list() {
    return need("tools").list().map((d) => {
      const out = { toolId: d.toolId };
      if (d.title != null) out.title = d.title;
      if (d.description != null) out.description = d.description;
      out.safetyTier = d.safetyTier;
      if (d.inputSchema != null) out.inputSchema = parseLenient(d.inputSchema);
      if (d.outputSchema != null) out.outputSchema = parseLenient(d.outputSchema);
      return out;
    });
  }
}

/** An HTTP response with its body read completely. */
export class HttpResponse {
  constructor(status, headers, body) {
    /** Status code. @type {number} */
    this.status = status;
    /** Response headers as `[name, value]` pairs. @type {Array<[string, string]>} */
    this.headers = headers;
    /** The body. @type {Uint8Array} */
    this.body = body;
  }
  /** Whether the status is 2xx. */
  get ok() {
    return this.status >= 200 && this.status < 300;
  }
  /** The first header named `name` (case-insensitive), or `undefined`. */
  header(name) {
    const lower = name.toLowerCase();
    const h = this.headers.find(([n]) => n.toLowerCase() === lower);
    return h ? h[1] : undefined;
  }
  /** The body as UTF-8 text (invalid sequences become U+FFFD). */
  text() {
    return utf8(this.body);
  }
  /** The body parsed as JSON; malformed JSON throws a `validation_error`. */
  json() {
    try {
      return JSON.parse(this.text());
    } catch (e) {
      throw NodeError.validation(`response body is not JSON: ${e}`);
    }
  }
}

/**
 * SSRF-guarded HTTP egress, "safe-fetch" (`http` capability): the only
 * network a pack gets. The host checks the destination against the pack's
 * allow-list and refuses private, loopback, link-local and metadata
 * addresses (`egress_denied`, `details.reason`).
 */
export class Http {
  /**
   * Fetch a URL. A non-2xx status is a successful fetch: check `ok`.
   *
   * @param {string | {url: string, method?: string, headers?: object | Array<[string, string]>,
   *   body?: string | Uint8Array, json?: any, idempotencyKey?: string}} request
   *   A URL (GET) or a request. `headers` is an object or `[name, value]`
   *   pairs; `json` sets a JSON body and `content-type: application/json`;
   *   `idempotencyKey` is for non-GET/HEAD methods (see `Tools.call`).
   * @returns {HttpResponse}
   * @throws {NodeError} the host's refusal (`egress_denied`, `upstream_unavailable`, ...)
   */
  fetch(request) {
    const http = need("http");
    const r = typeof request === "string" ? { url: request } : request;
    let headers = Array.isArray(r.headers) ? r.headers.slice() : Object.entries(r.headers ?? {});
    let body = r.body;
    if (r.json !== undefined) {
      headers.push(["content-type", "application/json"]);
      body = toJson(r.json, "request body");
    }
    if (typeof body === "string") body = encodeUtf8(body);
    let resp;
    try {
      resp = http.safeFetch({
        method: r.method ?? "GET",
        url: String(r.url),
        headers: headers.map(([name, value]) => ({ name: String(name), value: String(value) })),
        body: body ?? null,
        idempotencyKey: r.idempotencyKey ?? null,
      });
    } catch (e) {
      const info = witErr(e);
      if (info) {
        const i = errorInfo("tag" in info ? info.val : info);
        throw new NodeError(i.code, i.message, i.details);
      }
      throw e;
    }
    const bytes = resp.body instanceof Uint8Array ? resp.body : Uint8Array.from(resp.body ?? []);
    return new HttpResponse(resp.status, resp.headers.map((h) => [h.name, h.value]), bytes);
  }
}

/**
 * A client for the MCP servers the operator attached (`mcp` capability).
 * Results are the server's JSON, unaltered; an MCP result with
 * `isError: true` is a success value. Every method throws a `NodeError` when
 * the host refuses (`not_found` for a server the operator did not attach,
 * `forbidden` for one this pack was not granted) or the server fails
 * (`upstream_unavailable`, retryable; `mcp_error` with the server's JSON-RPC
 * error). Calls pass the gate like tool calls (`mcp:<server>/<tool>`).
 */
export class Mcp {
  #call(fn, ...args) {
    const mcp = need("mcp");
    try {
      return JSON.parse(mcp[fn](...args));
    } catch (e) {
      const info = witErr(e);
      if (info) {
        const i = errorInfo("tag" in info ? info.val : info);
        throw new NodeError(i.code, i.message, i.details);
      }
      throw e;
    }
  }
  /** `tools/call` `name` with `args` on `serverId`; effects are claimed like `Tools.call`. */
  callTool(serverId, name, args = {}, idempotencyKey) {
    return this.#call("callTool", serverId, name, toJson(args, "MCP arguments"), idempotencyKey ?? null);
  }
  /** `tools/list` on `serverId`, one page at a time (pass the previous `nextCursor`). */
  listTools(serverId, cursor) {
    return this.#call("listTools", serverId, cursor ?? null);
  }
  /** `resources/read` of `uri` on `serverId`. */
  readResource(serverId, uri) {
    return this.#call("readResource", serverId, uri);
  }
  /** The host's health document for `serverId`. */
  serverHealth(serverId) {
    return this.#call("serverHealth", serverId);
  }
}

/**
 * The host capabilities available to one node invocation. Every call is
 * bound by the host to this invocation (run, node, tenant, attempt,
 * principal).
 */
export class Ctx {
  constructor() {
    /** Structured logging. @type {Log} */
    this.log = new Log();
    /** Gated tool calls. @type {Tools} */
    this.tools = new Tools();
    /** SSRF-guarded HTTP egress. @type {Http} */
    this.http = new Http();
    /** MCP client. @type {Mcp} */
    this.mcp = new Mcp();
  }

  /**
   * The host clock in milliseconds since the Unix epoch (`clock`
   * capability). Replay-safe: a re-execution of the same attempt sees the
   * same values; it advances by 1 ms per call. Use it instead of `Date.now()`.
   */
  nowMs() {
    return Number(need("clock").nowMs());
  }

  /**
   * `len` bytes from the host's random stream (`random` capability).
   * Replay-safe (seeded per run, node and attempt); not for key material.
   * Use it instead of `Math.random()` / `crypto`.
   * @returns {Uint8Array}
   */
  randomBytes(len) {
    const random = need("random");
    const out = new Uint8Array(len);
    let filled = 0;
    while (filled < len) {
      const chunk = Math.min(len - filled, 65536);
      const bytes = random.fill(chunk);
      if (!bytes || bytes.length === 0) break;
      out.set(bytes, filled);
      filled += bytes.length;
    }
    return out.subarray(0, filled);
  }
}

// ---------------------------------------------------------------------------
// The export glue (used by the entry module build.sh generates)

/**
 * Wrap a pack module (`{invoke, describe?}`) as the WIT `node` export.
 * Not needed by pack authors: build.sh generates the entry that calls it.
 */
export function exportPack(pack) {
  if (typeof pack.invoke !== "function") {
    throw new Error("pack.js must export a function invoke(ctx, request)");
  }
  return {
    describe() {
      inHost = true;
      const info = typeof pack.describe === "function" ? pack.describe() : manifest;
      return {
        name: info.name,
        version: info.version,
        nodes: info.nodes.map((n) => ({ typeId: n.typeId, version: n.version })),
      };
    },
    invoke(request) {
      inHost = true;
      let outcome;
      try {
        const parse = (what, json) => {
          try {
            return JSON.parse(json);
          } catch (e) {
            throw NodeError.validation(`${what} is not valid JSON: ${e}`);
          }
        };
        const c = request.context;
        const req = {
          context: {
            runId: c.runId,
            nodeId: c.nodeId,
            tenantId: c.tenantId,
            attempt: c.attempt,
            typeId: c.typeId,
          },
          inputs: parse("inputs", request.inputs),
          config: parse("config", request.config),
          resume: request.resume == null ? undefined : parse("resume", request.resume),
        };
        outcome = pack.invoke(new Ctx(), req);
        if (outcome && typeof outcome.then === "function") {
          throw new NodeError(codes.INTERNAL_ERROR, "invoke must be synchronous (it returned a Promise)");
        }
        if (!(outcome && typeof outcome === "object" && OUTCOME in outcome)) {
          outcome = Outcome.completed(outcome);
        }
        return { tag: outcome[OUTCOME], val: toJson(outcome.value, "output") };
      } catch (e) {
        // A top-level `result` export reports its error by throwing the
        // error-info record.
        if (e instanceof NodeError) {
          throw {
            code: e.code,
            message: e.message,
            details: e.details === undefined ? null : toJson(e.details, "error details"),
          };
        }
        throw {
          code: codes.INTERNAL_ERROR,
          message: `uncaught exception: ${e && e.stack ? `${e}\n${e.stack}` : String(e)}`,
          details: null,
        };
      }
    },
  };
}
