// Registry survey: classifies every node type of every code pack (a directory with
// index.mjs + pack.json under $WOP_REGISTRY_PACKS, default /work/registry-tree/packs)
// into exactly one reason, the first that applies:
//   no-handler          the manifest declares it, the module exports no handler for it
//   needs-mcp           the handler reaches ctx.mcp.*
//   needs-host-service  it calls a host service (toolCall("service:…"), ctx.secrets.resolve)
//   needs-fetch         it calls fetch / ctx.http.safeFetch
//   unsupported-api     it hits something the sandbox lacks (Intl, sandboxed node:crypto, node:dns)
//   runs                none of the above: it runs with the ctx shim alone
//
// Dynamic first: each handler runs in the same node:vm sandbox as run.mjs (prelude +
// node:* sandbox modules, `Intl` removed as in QuickJS) over a *permissive* recording
// `__wop` (every service/MCP call answers `{}`, every fetch answers 200 `{}`), so it gets
// as far as it can; inputs/config come from the node's schemas. The recorded natives and
// the final error decide the row. When the run ends early (an error before any native,
// not an unsupported-API error, or it never settles) the row is decided by a static
// reading of the handler's source instead and is marked `"decidedBy": "static"`.
//
//   node runtime/wop-js/engine/js/test/survey.mjs [--json out.json] [--build] [--wop path/to/wop]
//   --build  also runs `wop inspect <copy> --no-cache` on an unsigned copy of every code pack
//            (signing block and keys/ removed), retrying a pack_runtime_requirement_unmet
//            refusal with a policy that grants what the refusal asks for.
import { spawnSync, spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import vm from 'node:vm';
import nodeCrypto from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { PACKS } from './expected.mjs';

if (!vm.SourceTextModule) {
  const r = spawnSync(process.execPath, ['--experimental-vm-modules', '--no-warnings', fileURLToPath(import.meta.url), ...process.argv.slice(2)], { stdio: 'inherit' });
  process.exit(r.status ?? 1);
}
const argv = process.argv.slice(2);
const opt = (name) => { const i = argv.indexOf(name); return i >= 0 ? argv[i + 1] : undefined; };
const JSON_OUT = opt('--json');
const WOP = opt('--wop') || '/work/main/target/debug/wop';
const JS = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

/* ---- what the prelude knows: host services, sandboxed crypto ---- */
const ctxSrc = fs.readFileSync(path.join(JS, 'prelude_ctx.js'), 'utf8');
const SERVICES = [...ctxSrc.match(/const SERVICES = \[([\s\S]*?)\];/)[1].matchAll(/'([^']+)'/g)].map((m) => m[1]).concat('secrets.resolve');
const CRYPTO_UNAVAILABLE = [...fs.readFileSync(path.join(JS, 'node_crypto.mjs'), 'utf8').matchAll(/unavailable\('(\w+)'\)/g)].map((m) => m[1]);

/* ---- the sandbox (copied from run.mjs's makeSandbox, minus what the survey does not need) ---- */
const MAX_CALLS = 200; // a handler that loops over a permissive mock is stopped here
function makeSandbox() {
  const context = vm.createContext({});
  vm.runInContext('delete globalThis.Intl', context); // QuickJS has no Intl
  const U8 = vm.runInContext('Uint8Array', context);
  const toCtx = (buf) => { const u = new U8(buf.length); u.set(buf); return u; };
  const calls = [];
  const record = (c) => { calls.push(c); return calls.length <= MAX_CALLS; };
  const stop = { err: { code: 'survey_call_limit', message: 'too many host calls' } };
  const native = {
    log: () => {},
    nowMs: () => Date.now(),
    randomBytes: (n) => toCtx(nodeCrypto.randomBytes(n)),
    // run.triggerData is the invocation's own data (no host service): none here.
    // Every service is mapped here (the survey records which a node reaches).
    toolCall: (id) => (id === 'service:run.triggerData' ? { ok: 'null' } : id === 'service:run.services' ? { ok: JSON.stringify(SERVICES) } : record({ tool: id }) ? { ok: '{}' } : stop),
    fetch: (method, url) => (record({ fetch: method + ' ' + url }) ? { status: 200, headers: [['content-type', 'application/json']], body: toCtx(Buffer.from('{}')) } : stop),
    mcp: (op) => (record({ mcp: op }) ? { ok: '{}' } : stop),
    digest: (alg, data) => toCtx(nodeCrypto.createHash(alg).update(Buffer.from(data)).digest()),
    hmac: (alg, key, data) => toCtx(nodeCrypto.createHmac(alg, Buffer.from(key)).update(Buffer.from(data)).digest()),
    utf8Encode: (s) => toCtx(Buffer.from(String(s), 'utf8')),
    utf8Decode: (u8) => Buffer.from(u8.buffer, u8.byteOffset, u8.byteLength).toString('utf8'),
  };
  context.__wop = native;
  const order = fs.readFileSync(path.join(JS, 'ORDER'), 'utf8').split('\n').map((l) => l.trim()).filter((l) => l && !l.startsWith('#'));
  for (const f of order) new vm.Script(fs.readFileSync(path.join(JS, f), 'utf8'), { filename: f }).runInContext(context);
  const mods = new Map();
  const builtin = (spec) => {
    if (!mods.has(spec)) {
      const file = { 'node:crypto': 'node_crypto.mjs', 'node:dns/promises': 'node_dns_promises.mjs' }[spec];
      if (!file) throw new Error('unknown module ' + spec);
      mods.set(spec, new vm.SourceTextModule(fs.readFileSync(path.join(JS, file), 'utf8'), { context, identifier: spec }));
    }
    return mods.get(spec);
  };
  const importDyn = async (spec) => { const m = builtin(spec); if (m.status === 'unlinked') await m.link(builtin); if (m.status === 'linked') await m.evaluate(); return m; };
  async function loadPack(source, id) {
    const m = new vm.SourceTextModule(source, { context, identifier: id, importModuleDynamically: importDyn });
    await m.link(builtin);
    await m.evaluate();
    native.setPack(m.namespace);
    return m.namespace;
  }
  const then = Promise.prototype.then;
  async function dispatch(req) {
    const p = native.dispatch(JSON.stringify(req));
    let settled = false, value;
    then.call(p, (v) => { settled = true; value = v; }, (e) => { settled = true; value = JSON.stringify({ err: { code: 'rejected', message: String(e) } }); });
    const deadline = Date.now() + 5000;
    for (let i = 0; i < 20000 && Date.now() < deadline; i++) {
      await new Promise((r) => setImmediate(r));
      if (settled) return JSON.parse(value);
      if (!native.advanceTimers()) { await new Promise((r) => setImmediate(r)); if (!settled) return { neverSettled: true }; }
    }
    return settled ? JSON.parse(value) : { neverSettled: true };
  }
  return { native, calls, loadPack, dispatch };
}

/* ---- a value from a JSON Schema: examples/default/const/enum first, else minimal by type ---- */
// `key` (the property name) picks a plausible string for an untyped/format-less timestamp or URL.
function sample(schema, root, depth = 0, key = '') {
  if (!schema || typeof schema !== 'object' || depth > 8) return undefined;
  if (schema.$ref) {
    const m = /^#\/(.*)$/.exec(schema.$ref);
    const target = m ? m[1].split('/').reduce((o, k) => o && o[decodeURIComponent(k)], root) : undefined;
    return target ? sample(target, root, depth + 1, key) : {};
  }
  if (Array.isArray(schema.examples) && schema.examples.length) return schema.examples[0];
  if (schema.default !== undefined) return schema.default;
  if (schema.const !== undefined) return schema.const;
  if (Array.isArray(schema.enum) && schema.enum.length) return schema.enum[0];
  for (const k of ['oneOf', 'anyOf']) if (Array.isArray(schema[k]) && schema[k].length) return sample(schema[k][0], root, depth + 1, key);
  if (Array.isArray(schema.allOf)) return Object.assign({}, ...schema.allOf.map((s) => sample(s, root, depth + 1)).filter((v) => v && typeof v === 'object'));
  let type = Array.isArray(schema.type) ? schema.type.find((t) => t !== 'null') : schema.type;
  if (!type) type = schema.properties ? 'object' : schema.items ? 'array' : /timestamp|date|time|url|uri/i.test(key) ? 'string' : undefined;
  switch (type) {
    case 'object': {
      const o = {};
      for (const [k, s] of Object.entries(schema.properties || {})) {
        // required properties always; optional ones only when the schema names a value for them
        const named = s && (s.examples !== undefined || s.default !== undefined || s.const !== undefined);
        if ((schema.required || []).includes(k) || named) { const v = sample(s, root, depth + 1, k); if (v !== undefined) o[k] = v; }
      }
      for (const k of schema.required || []) if (!(k in o)) o[k] = 'x';
      return o;
    }
    case 'array': { const n = Math.max(1, schema.minItems || 0); const it = sample(schema.items || {}, root, depth + 1); return it === undefined ? [] : Array(n).fill(it); }
    case 'string': {
      const f = { uri: 'https://example.com/', url: 'https://example.com/', email: 'a@example.com', 'date-time': '2024-01-01T00:00:00Z', date: '2024-01-01', uuid: '00000000-0000-4000-8000-000000000000' }[schema.format];
      const byName = /timestamp|date|time|At$/.test(key) ? '2024-01-01T00:00:00Z' : /url|uri|endpoint/i.test(key) ? 'https://example.com/' : undefined;
      return f || byName || 'x'.repeat(Math.max(1, schema.minLength || 1));
    }
    case 'integer': case 'number': return schema.minimum ?? (schema.exclusiveMinimum !== undefined ? schema.exclusiveMinimum + 1 : 1);
    case 'boolean': return false;
    case 'null': return null;
    default: return undefined;
  }
}
function fromSchemaFile(dir, ref) {
  if (!ref) return {};
  try { const s = JSON.parse(fs.readFileSync(path.join(dir, ref), 'utf8')); const v = sample(s, s); return v && typeof v === 'object' && !Array.isArray(v) ? v : {}; } catch { return {}; }
}

/* ---- static reading ---- */
// Comments out, strings kept (doc comments name services the code never calls).
const stripComments = (src) => src.replace(/("(?:\\.|[^"\\\n])*"|'(?:\\.|[^'\\\n])*'|`(?:\\.|[^`\\])*`)|\/\*[\s\S]*?\*\/|\/\/[^\n]*/g, (m, str) => str || '');
// Top-level declarations (column 0) of a module: name → text up to the next one.
function topLevel(src) {
  const re = /^(?:export\s+)?(?:default\s+)?(?:async\s+)?(?:function\*?\s+([\w$]+)|(?:const|let|var|class)\s+([\w$]+))/gm;
  const starts = [...src.matchAll(re)].map((m) => ({ name: m[1] || m[2], at: m.index }));
  const decls = new Map();
  starts.forEach((s, i) => { if (s.name !== 'nodes' && s.name !== 'nodeHandlers') decls.set(s.name, src.slice(s.at, i + 1 < starts.length ? starts[i + 1].at : src.length)); });
  return decls;
}
// The handler's text plus, transitively, every top-level declaration it names.
function handlerScope(fnText, decls) {
  const seen = new Set(), parts = [fnText], queue = [fnText];
  while (queue.length) for (const [id] of queue.pop().matchAll(/[A-Za-z_$][\w$]*/g)) {
    if (decls.has(id) && !seen.has(id)) { seen.add(id); parts.push(decls.get(id)); queue.push(decls.get(id)); }
  }
  return parts.join('\n');
}
// What a piece of source reaches: mcp, host services, fetch, unsupported APIs.
function scan(text, moduleSrc) {
  const services = new Set();
  for (const m of text.matchAll(/\bctx\??\.([A-Za-z_$][\w$]*(?:\??\.[A-Za-z_$][\w$]*)*)(\??\.?\[)?/g)) {
    let p = m[1].replace(/\?/g, '');
    if (p.startsWith('obs.') || p === 'obs') p = 'observability' + p.slice(3);
    const exact = SERVICES.filter((s) => p === s || p.startsWith(s + '.')).sort((a, b) => b.length - a.length)[0];
    if (exact) services.add(exact);
    else if (m[2] && SERVICES.some((s) => s.startsWith(p + '.'))) services.add(p + '.*'); // ctx.db?.[surface]…
  }
  if (/\bctx\[/.test(text)) services.add('ctx[<computed>]');
  const unsupported = [];
  if (/\bIntl\b/.test(text)) unsupported.push('Intl');
  for (const n of CRYPTO_UNAVAILABLE) if (new RegExp('\\b' + n + '\\b').test(text)) unsupported.push('crypto.' + n);
  const dns = /import\s*\{([^}]*)\}\s*from\s*'node:dns(?:\/promises)?'/.exec(moduleSrc);
  if (dns) for (const n of dns[1].split(',').map((s) => s.trim().split(/\s+as\s+/).pop()).filter(Boolean)) if (new RegExp('\\b' + n + '\\s*\\(').test(text)) unsupported.push('dns.' + n);
  return {
    mcp: /\bctx\??\.mcp\b/.test(text),
    services: [...services].sort(),
    fetch: /(?<![\w$])fetch\s*\(|globalThis\.fetch\b|\bsafeFetch\b/.test(text),
    unsupported: [...new Set(unsupported)],
  };
}

/* ---- handler lookup by exact key (the dispatcher's order); null → hasHandler found it some other way ---- */
function lookupFn(ns, typeId) {
  const isObj = (v) => v !== null && (typeof v === 'object' || typeof v === 'function');
  const maps = [ns.nodes, ns.default, ns.default && ns.default.nodes, ns.default && ns.default.nodeHandlers, ns.nodeHandlers].filter(isObj);
  for (const m of maps) if (Object.hasOwn(m, typeId) && typeof m[typeId] === 'function') return m[typeId];
  return null;
}

/* ---- classification of one row from a dynamic run ---- */
function fromRun(calls, env) {
  const mcp = [...new Set(calls.filter((c) => c.mcp).map((c) => c.mcp))];
  const services = [...new Set(calls.filter((c) => c.tool).map((c) => c.tool.replace(/^service:/, '')))].sort();
  const fetches = calls.filter((c) => c.fetch).length;
  const err = env.err;
  if (err && err.code === 'unsupported_mcp_method') mcp.push('unsupported:' + err.message);
  if (mcp.length) return { reason: 'needs-mcp', mcp };
  // A handler's own "host does not implement ctx.x.y" check (HOST_CAPABILITY_MISSING and the like).
  const missing = err && /ctx\.([\w.]+)/.exec(err.message || '');
  if (err && /CAPABILITY_MISSING|not_implemented|HOST_/i.test(err.code || '') && missing) services.push(missing[1] + (SERVICES.includes(missing[1]) ? '' : ' (not in prelude)'));
  if (services.length) return { reason: 'needs-host-service', services };
  if (fetches) return { reason: 'needs-fetch', fetches };
  // The sandbox's own refusals (also when a pack re-wraps them, e.g. core.openwop.rag's URL_DNS_FAILED).
  const msg = (err && err.message) || '';
  const api = /\bIntl is not defined/.test(msg) ? 'Intl' : /(crypto\.\w+) is not available in the wop sandbox/.exec(msg)?.[1]
    ?? (/DNS is not available in the wop sandbox/.test(msg) ? 'node:dns' : err && err.code === 'ERR_FEATURE_UNAVAILABLE_IN_SANDBOX' ? 'crypto' : undefined);
  if (api) return { reason: 'unsupported-api', unsupported: [api] };
  if (env.ok) return { reason: 'runs' };
  return null; // ended early (error before any native, or never settled): decide statically
}
function fromStatic(s) {
  if (s.mcp) return { reason: 'needs-mcp' };
  if (s.services.length) return { reason: 'needs-host-service', services: s.services };
  if (s.fetch) return { reason: 'needs-fetch' };
  if (s.unsupported.length) return { reason: 'unsupported-api', unsupported: s.unsupported };
  return { reason: 'runs' };
}

/* ---- the survey ---- */
const REASONS = ['no-handler', 'needs-mcp', 'needs-host-service', 'needs-fetch', 'unsupported-api', 'runs'];
const rows = [];
const packDirs = fs.readdirSync(PACKS).sort().filter((p) => fs.existsSync(path.join(PACKS, p, 'index.mjs')));
for (const pack of packDirs) {
  const dir = path.join(PACKS, pack);
  const manifest = JSON.parse(fs.readFileSync(path.join(dir, 'pack.json'), 'utf8'));
  const source = fs.readFileSync(path.join(dir, 'index.mjs'), 'utf8');
  const modText = stripComments(source);
  const decls = topLevel(modText);
  const nodes = manifest.nodes || [];
  let sb, ns;
  try { sb = makeSandbox(); ns = await sb.loadPack(source, pack); } catch (e) {
    for (const n of nodes) rows.push({ pack, typeId: n.typeId, reason: 'no-handler', decidedBy: 'dynamic', note: 'module failed to load: ' + e.message });
    continue;
  }
  // Static scope: the handler's text plus the top-level declarations it names, or the whole module when
  // the handler is shared — factory-made closures (one source, several function objects: what they do
  // depends on captured arguments), computed `ctx[...]` access, or a handler found other than by exact key.
  const fns = new Map(nodes.map((n) => [n.typeId, lookupFn(ns, n.typeId)]));
  const objsByText = new Map();
  for (const fn of fns.values()) if (fn) { const t = Function.prototype.toString.call(fn); objsByText.set(t, (objsByText.get(t) || new Set()).add(fn)); }
  for (const n of nodes) {
    const row = { pack, typeId: n.typeId };
    if (!sb.native.hasHandler(n.typeId)) { rows.push({ ...row, reason: 'no-handler', decidedBy: 'dynamic' }); continue; }
    const fn = fns.get(n.typeId), raw = fn && Function.prototype.toString.call(fn), t = raw && stripComments(raw);
    const scope = t && objsByText.get(raw).size === 1 && !/\bctx(?:\??\.[\w$]+)*\??\.?\[/.test(t) ? 'handler' : 'module';
    const stat = scan(scope === 'handler' ? handlerScope(t, decls) : modText, modText);
    const inputs = fromSchemaFile(dir, n.inputSchemaRef), config = fromSchemaFile(dir, n.configSchemaRef);
    sb.calls.length = 0;
    const env = await sb.dispatch({ context: { runId: 'run-1', nodeId: 'node-1', tenantId: 't-1', attempt: 1, typeId: n.typeId }, inputs, config, resume: null });
    const ended = env.neverSettled ? { code: 'never_settled' } : env.err ? { code: env.err.code, message: String(env.err.message).slice(0, 200) } : undefined;
    const dyn = fromRun(sb.calls, env);
    const decided = dyn ? { ...dyn, decidedBy: 'dynamic' } : { ...fromStatic(stat), decidedBy: 'static' };
    rows.push({ ...row, ...decided, outcome: env.ok ? Object.keys(env.ok)[0] : env.neverSettled ? 'never-settled' : 'error', error: ended, static: stat, staticScope: scope, calls: sb.calls.length });
  }
}

/* ---- report ---- */
const count = (rs) => Object.fromEntries(REASONS.map((r) => [r, rs.filter((x) => x.reason === r).length]));
const total = count(rows);
console.log(`survey of ${packDirs.length} code packs, ${rows.length} node types (packs: ${PACKS})\n`);
console.log('reason               total  dynamic  static');
for (const r of REASONS) {
  const rs = rows.filter((x) => x.reason === r);
  console.log(`${r.padEnd(20)} ${String(rs.length).padStart(5)}  ${String(rs.filter((x) => x.decidedBy === 'dynamic').length).padStart(7)}  ${String(rs.filter((x) => x.decidedBy === 'static').length).padStart(6)}`);
}
console.log(`${'total'.padEnd(20)} ${String(rows.length).padStart(5)}  ${String(rows.filter((x) => x.decidedBy === 'dynamic').length).padStart(7)}  ${String(rows.filter((x) => x.decidedBy === 'static').length).padStart(6)}`);
// Honesty check: dynamic "runs" rows whose source also names a service/fetch/mcp on a branch the sample inputs did not take.
const maybe = rows.filter((x) => x.reason === 'runs' && x.decidedBy === 'dynamic' && x.static && fromStatic(x.static).reason !== 'runs');
const maybeH = maybe.filter((x) => x.staticScope === 'handler');
console.log(`static rows: the run ended early (error before any host call, or never settled), decided by reading the source`);
console.log(`dynamic "runs" rows whose source also names a service/fetch/mcp/unsupported API on a branch the sample inputs did not take: ${maybe.length}`
  + ` (${maybeH.length} in the handler's own code${maybeH.length ? ': ' + maybeH.map((x) => `${x.typeId} [${fromStatic(x.static).reason}${x.static.services.length ? ' ' + x.static.services.join(',') : ''}${x.static.unsupported.length ? ' ' + x.static.unsupported.join(',') : ''}]`).join('; ') : ''}; ${maybe.length - maybeH.length} only via a whole-module scan of a shared handler)`);
const shape = rows.filter((x) => x.error && x.error.code === 'invalid_node_result');
if (shape.length) console.log(`the dispatcher refused the result shape (invalid_node_result) in ${shape.length} runs: ${shape.map((x) => x.typeId).join(', ')}`);

const svc = {};
for (const x of rows.filter((r) => r.reason === 'needs-host-service')) for (const s of x.services) svc[s] = (svc[s] || 0) + 1;
console.log('\nneeds-host-service, node types per service (a node may need several):');
for (const [s, n] of Object.entries(svc).sort((a, b) => b[1] - a[1] || a[0].localeCompare(b[0]))) console.log(`  ${String(n).padStart(3)}  ${s}`);

console.log('\nper pack:  ' + REASONS.map((r) => r.replace('needs-', '').replace('unsupported-api', 'unsup').replace('no-handler', 'nohandler').replace('host-service', 'service')).join(' '));
for (const p of packDirs) {
  const c = count(rows.filter((x) => x.pack === p));
  console.log(`  ${p.padEnd(48)} ${REASONS.map((r) => String(c[r] || '.').padStart(4)).join(' ')}`);
}

/* ---- optional: build every code pack with `wop inspect` (unsigned copy) ---- */
let builds;
if (argv.includes('--build')) {
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'wop-survey-'));
  const run = (args) => new Promise((resolve) => {
    const ch = spawn(WOP, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    ch.stdout.on('data', (d) => { out += d; }); ch.stderr.on('data', (d) => { out += d; });
    ch.on('close', (code) => resolve({ code, out }));
  });
  async function build(pack) {
    const dir = path.join(tmp, pack);
    fs.cpSync(path.join(PACKS, pack), dir, { recursive: true });
    fs.rmSync(path.join(dir, 'keys'), { recursive: true, force: true });
    const pj = JSON.parse(fs.readFileSync(path.join(dir, 'pack.json'), 'utf8'));
    delete pj.signing;
    fs.writeFileSync(path.join(dir, 'pack.json'), JSON.stringify(pj, null, 2));
    const first = await run(['inspect', dir, '--no-cache']);
    const res = { pack, exit: first.code, refusal: first.code ? refusal(first.out) : undefined };
    if (first.code && /pack_runtime_requirement_unmet/.test(first.out)) {
      // Grant what the advice names: net.* → capabilities = ["http"] + egress; fs.* → filesystem.
      const name = pj.name || pack;
      const needs = (/requires ([\w., ]+) which/.exec(first.out) || [, ''])[1].split(/,\s*/);
      const lines = [`[packs."${name}"]`];
      if (needs.some((t) => t.startsWith('net.'))) lines.push('capabilities = ["http"]', 'egress = ["*"]');
      if (needs.some((t) => t.startsWith('fs.'))) lines.push('filesystem = ["/tmp"]');
      const policy = path.join(tmp, pack + '.policy.toml');
      fs.writeFileSync(policy, lines.join('\n') + '\n');
      const second = await run(['inspect', dir, '--no-cache', '--policy', policy]);
      Object.assign(res, { retriedWith: lines.join('\\n'), retryExit: second.code, retryRefusal: second.code ? refusal(second.out) : undefined });
    }
    return res;
  }
  function refusal(out) {
    const code = (/refused: ([\w]+)/.exec(out) || /\b([a-z]+_[a-z_]+)\b/.exec(out) || [, 'unknown'])[1];
    const inner = /\((js_[\w]+)\)/.exec(out) || /\b(js_[a-z_]+)\b/.exec(out);
    return { code: code + (inner ? ` (${inner[1]})` : ''), message: out.trim().split('\n').slice(-3).join(' ').slice(0, 400) };
  }
  builds = [];
  const queue = [...packDirs], workers = Math.max(1, Math.min(8, os.cpus().length));
  await Promise.all(Array.from({ length: workers }, async () => { while (queue.length) builds.push(await build(queue.shift())); }));
  builds.sort((a, b) => a.pack.localeCompare(b.pack));
  fs.rmSync(tmp, { recursive: true, force: true });
  const okFirst = builds.filter((b) => b.exit === 0).length;
  const okRetry = builds.filter((b) => b.exit !== 0 && b.retryExit === 0).length;
  console.log(`\nwop inspect --no-cache (unsigned copies): ${okFirst} of ${builds.length} build with the default policy, ${okRetry} more with a granting policy, ${builds.length - okFirst - okRetry} refused`);
  for (const b of builds.filter((x) => x.exit !== 0)) {
    console.log(`  ${b.pack}: ${b.refusal.code}` + (b.retriedWith ? ` → retried with ${b.retriedWith}: ${b.retryExit === 0 ? 'builds' : b.retryRefusal.code}` : ''));
  }
}

if (JSON_OUT) {
  fs.writeFileSync(JSON_OUT, JSON.stringify({ packs: PACKS, total: rows.length, counts: total, services: svc, rows, builds }, null, 2) + '\n');
  console.log(`\nwrote ${JSON_OUT}`);
}
