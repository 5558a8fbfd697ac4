// Prelude test harness. Run: node --experimental-vm-modules runtime/wop-js/engine/js/test/run.mjs
// (re-executes itself with the flag when started without it).
// Evaluates the prelude in a fresh node:vm context (no Node globals) over a mock
// `__wop` built on Node's crypto, loads real registry packs as vm.SourceTextModule
// (node:crypto / node:dns/promises linked to the sandbox modules), and compares
// dispatch() of every case in runtime/wop-cli/tests/fixtures/registry-js-cases.json
// with the envelope the same handler returns under plain Node (recorded there by
// expected.mjs --write; expected.mjs --check re-verifies it).
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import vm from 'node:vm';
import nodeCrypto from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { PACKS, readCases, packVersion, canonical, caseLabel } from './expected.mjs';

if (!vm.SourceTextModule) {
  const r = spawnSync(process.execPath, ['--experimental-vm-modules', '--no-warnings', fileURLToPath(import.meta.url), ...process.argv.slice(2)], { stdio: 'inherit' });
  process.exit(r.status ?? 1);
}

const JS = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
// Packs (one directory per pack: index.mjs, pack.json): $WOP_REGISTRY_PACKS, default /work/registry-tree/packs
// (the registry's `packs/`), or the fixture archives unpacked by unpack-fixtures.sh.
const REGISTRY = PACKS;
let passed = 0, failed = 0;
function ok(name, cond, info) {
  if (cond) { passed++; console.log('  ok   ' + name); }
  else { failed++; console.log('  FAIL ' + name + (info !== undefined ? '\n       ' + String(info).slice(0, 600) : '')); }
}

/* ---- a sandbox: fresh context + mock natives + prelude ---- */
// Every host service name the prelude knows (its SERVICES list).
const ALL_SERVICES = [...fs.readFileSync(path.join(JS, 'prelude_ctx.js'), 'utf8').match(/const SERVICES = \[([\s\S]*?)\];/)[1].matchAll(/'([^']+)'/g)].map((m) => m[1]);

// `services`: the names the operator mapped (the host's answer to run.services); none by default.
function makeSandbox({ toolCall, fetch, mcp, hostTrigger, services = [] } = {}) {
  const context = vm.createContext({});
  const U8 = vm.runInContext('Uint8Array', context);
  const toCtx = (buf) => { const u = new U8(buf.length); u.set(buf); return u; };
  const logs = [];
  const calls = [];
  const asked = { services: 0 };
  const native = {
    log: (level, message, fields) => { logs.push({ level, message, fields }); },
    nowMs: () => Date.now(),
    randomBytes: (n) => toCtx(nodeCrypto.randomBytes(n)),
    toolCall: (id, args, idem) => {
      // The invocation's own trigger payload (the host answers null when it has none).
      if (id === 'service:run.triggerData') return { ok: JSON.stringify(hostTrigger ?? null) };
      if (id === 'service:run.services') { asked.services++; return { ok: JSON.stringify(services) }; }
      calls.push({ id, args, idem }); return toolCall ? toolCall(id, args, idem) : { err: { kind: 'not-found', code: 'no_such_tool', message: 'no tool ' + id } }; },
    fetch: (method, url, headers, body, idem) => { calls.push({ fetch: true, method, url, headers, body: body && Buffer.from(body).toString(), idem }); return fetch ? fetch(method, url, headers, body, idem, toCtx) : { err: { code: 'egress_denied', message: 'no egress in tests' } }; },
    mcp: (op, serverId, a1, a2, idem) => { calls.push({ mcp: op, serverId, a1, a2 }); return mcp ? mcp(op, serverId, a1, a2) : { err: { code: 'mcp_unavailable', message: 'no mcp' } }; },
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
      const file = spec === 'node:crypto' ? 'node_crypto.mjs' : spec === 'node:dns/promises' ? 'node_dns_promises.mjs' : null;
      if (!file) throw new Error('unknown module ' + spec);
      mods.set(spec, new vm.SourceTextModule(fs.readFileSync(path.join(JS, file), 'utf8'), { context, identifier: spec }));
    }
    return mods.get(spec);
  };
  const linker = async (spec) => builtin(spec);
  const importDyn = async (spec) => { const m = builtin(spec); if (m.status === 'unlinked') await m.link(linker); if (m.status === 'linked') await m.evaluate(); return m; };
  async function loadPack(source, id = 'pack.mjs') {
    native.noteSource(source); // as the engine does, before the pack's code runs
    const m = new vm.SourceTextModule(source, { context, identifier: id, importModuleDynamically: importDyn });
    await m.link(linker);
    await m.evaluate();
    native.setPack(m.namespace);
    return m.namespace;
  }
  const then = Promise.prototype.then; // outer-realm then: immune to the pack's tampering
  async function dispatch(req) {
    const p = native.dispatch(typeof req === 'string' ? req : JSON.stringify(req));
    let settled = false, value, rejected = false;
    then.call(p, (v) => { settled = true; value = v; }, (e) => { settled = true; rejected = true; value = e; });
    for (let i = 0; i < 100000; i++) {
      await new Promise((r) => setImmediate(r));
      if (settled) break;
      if (!native.advanceTimers()) { await new Promise((r) => setImmediate(r)); if (!settled) return { neverSettled: true }; }
    }
    if (rejected) return { rejected: value };
    return value;
  }
  const run = (code) => vm.runInContext(code, context);
  return { context, native, logs, calls, asked, loadPack, dispatch, run };
}

const req = (typeId, inputs = {}, config = {}, resume = null) => ({
  context: { runId: 'run-1', nodeId: 'node-1', tenantId: 't-1', attempt: 1, typeId }, inputs, config, resume,
});
const packSrc = (name) => fs.readFileSync(path.join(REGISTRY, name, 'index.mjs'), 'utf8');

/* ---- 1. real registry nodes: every case of the cases file, sandbox vs plain Node ----
 * runtime/wop-cli/tests/fixtures/registry-js-cases.json holds, per case, the envelope
 * the node returns when called directly under plain Node (computed by expected.mjs). */
console.log(`registry nodes (sandbox vs plain Node), packs from ${REGISTRY}:`);
{
  const cases = readCases();
  const sandboxes = new Map();
  const versions = new Map();
  for (const [i, c] of cases.entries()) {
    const name = caseLabel(c, i);
    try {
      if (!versions.has(c.pack)) versions.set(c.pack, packVersion(c.pack, REGISTRY));
      const have = versions.get(c.pack);
      if (have !== c.version) { ok(name, false, `${c.pack} in ${REGISTRY} is ${have === null ? 'missing' : 'version ' + have}; the case wants ${c.version}`); continue; }
      if (!sandboxes.has(c.pack)) { const sb = makeSandbox(); await sb.loadPack(packSrc(c.pack), c.pack); sandboxes.set(c.pack, sb); }
      const got = await sandboxes.get(c.pack).dispatch(req(c.typeId, c.inputs, c.config, c.resume ?? null));
      let gotV; try { gotV = typeof got === 'string' ? JSON.parse(got) : { notAnEnvelope: got }; } catch { gotV = { unparsable: got }; }
      ok(name, canonical(gotV) === canonical(c.expected), `sandbox:  ${typeof got === 'string' ? got : JSON.stringify(got)}\n       expected: ${JSON.stringify(c.expected)}`);
    } catch (e) { ok(name, false, e.stack); }
  }
}

/* ---- 2. every code pack in REGISTRY loads and every manifest typeId has a handler ---- */
{
  let packs = 0, missing = [];
  const dirs = fs.existsSync(REGISTRY) ? fs.readdirSync(REGISTRY).sort() : [];
  for (const p of dirs) {
    const f = path.join(REGISTRY, p, 'index.mjs');
    if (!fs.existsSync(f)) continue;
    packs++;
    try {
      const sb = makeSandbox();
      await sb.loadPack(fs.readFileSync(f, 'utf8'), p);
      for (const n of JSON.parse(fs.readFileSync(path.join(REGISTRY, p, 'pack.json'), 'utf8')).nodes || []) if (!sb.native.hasHandler(n.typeId)) missing.push(n.typeId);
    } catch (e) { missing.push(p + ': ' + e.message); }
  }
  if (packs === 0) console.log(`  skip all code packs load: no pack with an index.mjs in ${REGISTRY}`);
  else ok(`all ${packs} code packs in ${REGISTRY} load in the sandbox and export every manifest node`, missing.length === 0, missing.join(', '));
}

/* ---- 3. dispatcher behaviour with a synthetic pack ---- */
console.log('dispatcher:');
const SYNTH = `
export const nodes = {
  'x.ok': async (ctx) => ({ status: 'success', outputs: { n: ctx.inputs.n + 1, node: ctx.nodeId, run: ctx.runId } }),
  'x.err': async () => ({ status: 'error', error: { code: 'BAD_THING', message: 'it broke', details: { k: 1 } } }),
  'x.throw': async () => { throw Object.assign(new Error('nope'), { code: 'E_NOPE' }); },
  'x.throwPlain': async () => { throw new Error('plain'); },
  'x.throwString': async () => { throw 'a string'; },
  'x.shape': async () => ({ ok: true, result: { a: 1 } }),
  'x.bare': async () => ({ outputs: { a: 1 } }),
  'x.undef': async () => undefined,
  'x.cyclic': async () => { const o = {}; o.self = o; return { status: 'success', outputs: o }; },
  'x.huge': async () => ({ status: 'success', outputs: { s: 'x'.repeat(17 * 1024 * 1024) } }),
  'x.bigint': async () => ({ status: 'success', outputs: { n: 10n } }),
  'x.sync': (ctx) => ({ status: 'success', outputs: { sync: true } }),
  'x.timers': async () => {
    const order = [];
    await new Promise((r) => { setTimeout(() => { order.push('t50'); r(); }, 50); setTimeout(() => order.push('t10'), 10); setImmediate(() => order.push('imm')); queueMicrotask(() => order.push('micro')); });
    let n = 0; await new Promise((r) => { const id = setInterval(() => { if (++n === 3) { clearInterval(id); r(); } }, 1000); });
    const t = setTimeout(() => order.push('cleared'), 5); clearTimeout(t);
    await new Promise((r) => setTimeout(r, 86400000));
    return { status: 'success', outputs: { order, n } };
  },
  'x.never': async () => { await new Promise(() => {}); },
  'x.abort': async () => {
    const s = AbortSignal.timeout(100);
    const ev = await new Promise((r) => s.addEventListener('abort', () => r(s.reason.name)));
    const c = new AbortController(); c.abort(); return { status: 'success', outputs: { ev, aborted: c.signal.aborted, ctxSignal: typeof ctx === 'undefined' } };
  },
  'x.suspend': async (ctx) => { const r = await ctx.suspend({ kind: 'approval', prompt: 'ok?' }); return { status: 'success', outputs: { got: r } }; },
  'x.wait': async (ctx) => ctx.suspend({ kind: 'duration', seconds: 5 }),
  'x.suspend2': async (ctx) => {
    const a = await ctx.suspend({ step: 1 });
    const b = await ctx.suspend({ step: 2, after: a });
    return { status: 'success', outputs: { a, b } };
  },
  'x.log': async (ctx) => { ctx.log('warn', 'w', { a: 1 }); ctx.log('plain'); ctx.log.error('e', { b: 2 }); console.info('c', { d: 3 }); await ctx.emit({ type: 'node.progress', data: 1 }); ctx.emit('custom', { x: 1 }); return { status: 'success', outputs: {} }; },
  'x.feat': async (ctx) => ({ status: 'success', outputs: { callAI: typeof ctx.callAI, emb: typeof ctx.callAI?.embeddings, safeFetch: typeof ctx.http?.safeFetch, db: 'db' in ctx, obs: typeof ctx.obs } }),
  'x.trigset': async (ctx) => { ctx.triggerData = { z: 1 }; return { status: 'success', outputs: { t: ctx.triggerData } }; },
  'x.vars2': async (ctx) => { const j1 = JSON.stringify(ctx.variables); ctx.variables.set('n', 1); const { has } = ctx.variables; return { status: 'success', outputs: { j1, j2: JSON.stringify(ctx.variables), has: has('n'), del: ctx.variables.delete('a'), after: ctx.variables.has('a') } }; },
  'x.vars': async (ctx) => { const before = ctx.variables.get('a'); ctx.variables.set('b', 2); return { status: 'success', outputs: { before, b: ctx.variables.get('b'), trig: ctx.triggerData ?? null } }; },
  'x.service': async (ctx) => { const r = await ctx.db.sql.query({ sql: 'select 1' }); const ai = await ctx.callAI({ prompt: 'hi' }); const s = await ctx.secrets.resolve({ ref: 'secret://x' }); return { status: 'success', outputs: { r, ai, s } }; },
  'x.serviceErr': async (ctx) => { await ctx.kanban.taskGet({ id: 1 }); },
  'x.mcp': async (ctx) => {
    const t = await ctx.mcp.listTools('srv');
    const i = await ctx.mcp.invokeTool('srv', 'echo', { a: 1 }, {});
    const rr = await ctx.mcp.readResource('srv', 'file:///a');
    const st = await ctx.mcp.serverStatus('srv', { timeoutMs: 10 });
    await ctx.mcp.ping({ serverId: 'srv' });
    let un; try { await ctx.mcp.listPrompts({ serverId: 'srv' }); } catch (e) { un = e.code; }
    return { status: 'success', outputs: { t, i, rr, st, un } };
  },
  'x.fetch': async (ctx) => {
    const form = new FormData(); form.append('a', '1'); form.append('f', new Blob([new Uint8Array([1, 2])], { type: 'application/x-test' }), 'f.bin');
    const r = await fetch('https://api.example.com/v1/items?q=1', { method: 'POST', headers: { 'Content-Type': 'application/json', 'X-A': 'b' }, body: JSON.stringify({ a: 1 }) });
    const j = await r.json();
    const r2 = await fetch(new URL('/form', 'https://api.example.com/base/'), { method: 'PUT', body: form });
    const r3 = await fetch('https://api.example.com/u', { method: 'POST', body: new URLSearchParams({ x: 'a b', y: '&' }) });
    let e; try { await fetch('https://blocked.example.com/'); } catch (err) { e = { name: err.name, code: err.code, isTypeError: err instanceof TypeError }; }
    return { status: 'success', outputs: { status: r.status, ok: r.ok, ct: r.headers.get('content-type'), j, text: await r2.text(), r3: await r3.text(), e } };
  },
  'x.idem': async () => {
    const r = await fetch('https://api.example.com/v1/items?q=1', { method: 'POST', headers: { 'Idempotency-Key': 'order-42', 'X-A': 'b' }, body: '{}' });
    return { status: 'success', outputs: await r.json() };
  },
  'x.globals': async () => {
    const u = new URL('https://User:pw@Example.COM:443/a/./b/../c%20d?x=1&y=two#frag');
    u.searchParams.append('z', 'a b');
    const rel = new URL('../up?q', 'http://h.test:8080/p/q/r').href;
    const b = Buffer.from('héllo');
    const te = new TextEncoder().encode('✓');
    const h = await crypto.subtle.digest('SHA-256', new TextEncoder().encode('abc'));
    return { status: 'success', outputs: {
      href: u.href, origin: u.origin, host: u.host, hostname: u.hostname, port: u.port, pathname: u.pathname, search: u.search, hash: u.hash, protocol: u.protocol, rel,
      sp: new URLSearchParams('a=1&b=%20x+y&a=2').getAll('a').concat(new URLSearchParams({ q: 'x y&z' }).toString()),
      b64: b.toString('base64'), b64url: Buffer.from([251, 255]).toString('base64url'), hex: b.toString('hex'), back: Buffer.from(b.toString('base64'), 'base64').toString('utf8'),
      concat: Buffer.concat([Buffer.from('a'), Buffer.from([98])]).toString(), isBuf: Buffer.isBuffer(b), len: Buffer.byteLength('✓'), alloc: Buffer.alloc(3).length,
      te: Array.from(te), td: new TextDecoder().decode(te), atob: atob(btoa('hi')),
      uuid: /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/.test(crypto.randomUUID()),
      sha: Buffer.from(h).toString('hex'), rnd: Math.random() >= 0 && Math.random() < 1, clone: structuredClone({ a: [1, { b: 2 }] }),
    } };
  },
};
export default nodes;
`;
{
  const mcpMock = (op, serverId, a1, a2) => {
    if (op === 'list-tools') return { ok: JSON.stringify({ tools: [{ name: 'echo' }] }) };
    if (op === 'call-tool') return { ok: JSON.stringify({ content: [{ type: 'text', text: a2 }], isError: false }) };
    if (op === 'read-resource') return { ok: JSON.stringify({ contents: [{ uri: a1, mimeType: 'text/plain', text: 'hello' }] }) };
    if (op === 'server-health') return { ok: JSON.stringify({ available: true, name: 'srv', version: '1' }) };
    return { err: { code: 'bad_op', message: op } };
  };
  const toolMock = (id, args) => {
    // The host sends details as JSON text (engine/src/native.rs).
    if (id === 'service:kanban.taskGet') return { err: { kind: 'forbidden', code: 'not_granted', message: 'no kanban', details: JSON.stringify({ id }) } };
    if (id === 'service:secrets.resolve') return { ok: JSON.stringify({ handle: 'h-123' }) };
    return { ok: JSON.stringify({ id, args: JSON.parse(args) }) };
  };
  const fetchMock = (method, url, headers, body, idem, toCtx) => {
    if (url.includes('blocked')) return { err: { code: 'ssrf_blocked', message: 'blocked by policy' } };
    if (method === 'POST' && url.endsWith('/items?q=1')) return { status: 201, headers: [['content-type', 'application/json']], body: toCtx(Buffer.from(JSON.stringify({ echo: Buffer.from(body).toString(), h: headers, idem: idem === undefined ? null : idem }))) };
    return { status: 200, headers: [['content-type', 'text/plain']], body: toCtx(Buffer.from(method + ' ' + url + ' ' + (headers.find((h) => h[0] === 'content-type') || [])[1] + ' ' + Buffer.from(body || []).toString().replace(/WopFormBoundary[0-9a-f]+/g, 'B'))) };
  };
  const sb = makeSandbox({ toolCall: toolMock, mcp: mcpMock, fetch: fetchMock, services: ALL_SERVICES });
  await sb.loadPack(SYNTH, 'synth.mjs');
  const D = async (t, inputs, config, resume) => { const r = await sb.dispatch(req(t, inputs, config, resume)); return typeof r === 'string' ? r : JSON.stringify(r); };
  const J = (s) => { try { return JSON.parse(s); } catch { return { unparsable: s }; } };

  ok('success → completed', await D('x.ok', { n: 1 }) === '{"ok":{"completed":{"n":2,"node":"node-1","run":"run-1"}}}');
  let r = J(await D('x.err'));
  ok('status:error → err with code/message/details', r.err?.code === 'BAD_THING' && r.err.message === 'it broke' && r.err.details?.k === 1, JSON.stringify(r));
  r = J(await D('x.throw')); ok('thrown error code', r.err?.code === 'E_NOPE' && r.err.message === 'nope', JSON.stringify(r));
  r = J(await D('x.throwPlain')); ok('thrown error without code → node_error', r.err?.code === 'node_error' && r.err.message === 'plain', JSON.stringify(r));
  r = J(await D('x.throwString')); ok('thrown string → node_error', r.err?.code === 'node_error' && r.err.message === 'a string', JSON.stringify(r));
  r = J(await D('x.shape')); ok('invalid result shape → invalid_node_result', r.err?.code === 'invalid_node_result' && /status/.test(r.err.message), JSON.stringify(r));
  r = J(await D('x.bare')); ok('{outputs} without a status → completed', r.ok?.completed?.a === 1, JSON.stringify(r));
  r = J(await D('x.undef')); ok('undefined result → invalid_node_result', r.err?.code === 'invalid_node_result', JSON.stringify(r));
  r = J(await D('x.cyclic')); ok('cyclic outputs → invalid_node_result', r.err?.code === 'invalid_node_result', JSON.stringify(r));
  r = J(await D('x.huge')); ok('huge outputs → invalid_node_result', r.err?.code === 'invalid_node_result' && /too large/.test(r.err.message), JSON.stringify(r).slice(0, 200));
  r = J(await D('x.bigint')); ok('BigInt outputs → invalid_node_result', r.err?.code === 'invalid_node_result', JSON.stringify(r));
  r = J(await D('x.sync')); ok('synchronous handler', r.ok?.completed?.sync === true, JSON.stringify(r));
  r = J(await D('no.such.type')); ok('unknown typeId → node_type_not_found', r.err?.code === 'node_type_not_found', JSON.stringify(r));
  r = J(await D('vendor.acme.pack/x.ok', { n: 41 })); ok('qualified typeId falls back to the short key', r.ok?.completed?.n === 42, JSON.stringify(r));
  r = J(await sb.dispatch('not json')); ok('bad request JSON → err', r.err?.code === 'invalid_request', JSON.stringify(r));
  r = J(await D('x.timers')); ok('virtual timers fire in deadline order', JSON.stringify(r.ok?.completed) === '{"order":["micro","imm","t10","t50"],"n":3}', JSON.stringify(r));
  r = await sb.dispatch(req('x.never')); ok('a never-settling node is reported (no timers left)', r.neverSettled === true, JSON.stringify(r));
  r = J(await D('x.abort')); ok('AbortSignal.timeout + AbortController', r.ok?.completed?.ev === 'TimeoutError' && r.ok.completed.aborted === true, JSON.stringify(r));
  r = J(await D('x.suspend')); ok('ctx.suspend → suspended', JSON.stringify(r) === '{"ok":{"suspended":{"kind":"approval","prompt":"ok?"}}}', JSON.stringify(r));
  r = J(await D('x.suspend', {}, {}, { action: 'accept' })); ok('resume → suspend returns the resume value', r.ok?.completed?.got?.action === 'accept', JSON.stringify(r));
  r = J(await D('x.suspend2')); ok('two suspend points: the first run suspends at the first', JSON.stringify(r) === '{"ok":{"suspended":{"step":1}}}', JSON.stringify(r));
  r = J(await D('x.suspend2', {}, {}, { ok: 1 })); ok('the re-run after a resume passes the first point and suspends at the second', JSON.stringify(r) === '{"ok":{"suspended":{"step":2,"after":{"ok":1}}}}', JSON.stringify(r));
  r = J(await D('x.wait')); ok('return ctx.suspend(...) → suspended', r.ok?.suspended?.kind === 'duration', JSON.stringify(r));
  r = J(await D('x.wait', {}, {}, { at: 1 })); ok('return ctx.suspend(...) on resume → completed {resumed, payload}', r.ok?.completed?.resumed === true && r.ok.completed.payload.at === 1, JSON.stringify(r));
  sb.logs.length = 0;
  r = J(await D('x.log'));
  const lv = sb.logs.map((l) => l.level + ':' + l.message + (l.fields ? ':' + l.fields : '')).join('|');
  ok('ctx.log / ctx.log.<level> / console / emit → host log', r.ok && lv === '2:w:{"a":1}|1:plain|3:e:{"b":2}|1:c {"d":3}|1:emit:{"event":"node.progress","data":{"type":"node.progress","data":1}}|1:emit:{"event":"custom","data":{"x":1}}', lv);
  r = J(await sb.dispatch({ ...req('x.vars', { variables: { a: 1 }, triggerData: { t: 1 } }) }));
  ok('ctx.variables seeded from inputs.variables; triggerData', r.ok?.completed?.before === 1 && r.ok.completed.b === 2 && r.ok.completed.trig?.t === 1, JSON.stringify(r));
  {
    const rq = req('x.vars2', { variables: { a: 'from-inputs' } });
    rq.context.variables = { a: 'from-context' };
    r = J(await sb.dispatch(rq));
    ok('ctx.variables: context.variables wins over inputs.variables, JSON, unbound methods, delete', r.ok?.completed?.j1 === '{"a":"from-context"}' && r.ok.completed.j2 === '{"a":"from-context","n":1}' && r.ok.completed.has === true && r.ok.completed.del === true && r.ok.completed.after === false, JSON.stringify(r));
  }
  {
    const sbT = makeSandbox({ hostTrigger: { t: 2 } });
    await sbT.loadPack(SYNTH, 'synth.mjs');
    r = J(await sbT.dispatch(req('x.vars', { triggerData: { t: 1 } })));
    ok("ctx.triggerData: the invocation's payload (from the host) before inputs.triggerData", r.ok?.completed?.trig?.t === 2, JSON.stringify(r));
    r = J(await sbT.dispatch(req('x.trigset')));
    ok('ctx.triggerData is assignable like a data property', r.ok?.completed?.t?.z === 1, JSON.stringify(r));
    r = J(await sbT.dispatch(req('x.feat')));
    ok('nothing mapped: no host service in ctx (feature detection sees none), safe-fetch still there', JSON.stringify(r.ok?.completed) === '{"callAI":"undefined","emb":"undefined","safeFetch":"function","db":false,"obs":"undefined"}', JSON.stringify(r));
    const sbM = makeSandbox({ services: ['callAI.embeddings', 'observability.metric', 'not.a.service'] });
    await sbM.loadPack(SYNTH, 'synth.mjs');
    r = J(await sbM.dispatch(req('x.feat')));
    ok('only the mapped services exist in ctx', JSON.stringify(r.ok?.completed) === '{"callAI":"object","emb":"function","safeFetch":"function","db":false,"obs":"object"}', JSON.stringify(r));
  }
  {
    // A pack whose source names no host service is never given one, and
    // the host is not asked which are mapped; naming one any way asks.
    const plain = "export const nodes = { 'p.ok': async (ctx) => ({ status: 'success', outputs: { n: Object.keys(ctx).length, http: typeof ctx.http.safeFetch } }) };";
    const sbP = makeSandbox({ services: ['callAI'] });
    await sbP.loadPack(plain, 'plain.mjs');
    r = J(await sbP.dispatch(req('p.ok')));
    const sbP2 = makeSandbox({ services: [] });
    await sbP2.loadPack(plain, 'plain.mjs');
    const r2 = J(await sbP2.dispatch(req('p.ok')));
    ok('a pack naming no service: the host is not asked, ctx as with nothing mapped, safe-fetch kept', r.ok?.completed?.http === 'function' && r.ok.completed.n === r2.ok?.completed?.n && sbP.asked.services === 0, JSON.stringify([r, r2, sbP.asked]));
    const destr = "export const nodes = { 'p.ai': async (ctx) => { const { callAI } = ctx; return { status: 'success', outputs: { t: typeof callAI } }; } };";
    const sbD = makeSandbox({ services: ['callAI'] });
    await sbD.loadPack(destr, 'destr.mjs');
    r = J(await sbD.dispatch(req('p.ai')));
    ok('a service named only by destructuring is still mapped (the host is asked)', r.ok?.completed?.t === 'function' && sbD.asked.services === 1, JSON.stringify([r, sbD.asked]));
    const sbW = makeSandbox({ services: ['callAI'] });
    await sbW.loadPack("export const nodes = { 'p.w': async (ctx) => ({ status: 'success', outputs: { t: typeof ctx['call' + 'AI'], x: 'recallAIs' } }) };", 'w.mjs');
    r = J(await sbW.dispatch(req('p.w')));
    ok('a service name inside a longer word is not naming it', r.ok?.completed?.t === 'undefined' && sbW.asked.services === 0, JSON.stringify([r, sbW.asked]));
  }
  sb.calls.length = 0;
  r = J(await D('x.service'));
  ok('host services → toolCall("service:<name>", [args])', r.ok?.completed?.r?.id === 'service:db.sql.query' && JSON.stringify(r.ok.completed.r.args) === '[{"sql":"select 1"}]' && r.ok.completed.ai.id === 'service:callAI' && r.ok.completed.s.handle === 'h-123', JSON.stringify(r));
  r = J(await D('x.serviceErr')); ok('service {err} → thrown coded Error', r.err?.code === 'not_granted' && r.err.message === 'no kanban', JSON.stringify(r));
  ok('a rethrown host error fails with its details as an object', r.err?.details?.id === 'service:kanban.taskGet', JSON.stringify(r));
  r = J(await D('x.mcp'));
  const m = r.ok?.completed;
  ok('ctx.mcp maps onto the native ops', m && m.t.tools[0].name === 'echo' && m.i.result[0].text === '{"a":1}' && m.i.isError === false && m.rr.content === 'hello' && m.rr.mimeType === 'text/plain' && m.st.available === true && m.un === 'unsupported_mcp_method', JSON.stringify(r));
  sb.calls.length = 0;
  r = J(await D('x.fetch'));
  const f = r.ok?.completed;
  ok('fetch: JSON POST, headers, status, ok', f && f.status === 201 && f.ok === true && f.ct === 'application/json' && f.j.echo === '{"a":1}' && f.j.h.some((h) => h[0] === 'x-a' && h[1] === 'b'), JSON.stringify(r));
  ok('fetch: FormData multipart + new URL(rel, base)', f && /^PUT https:\/\/api\.example\.com\/form multipart\/form-data; boundary=----WopFormBoundary[0-9a-f]{24} ------B\r\nContent-Disposition: form-data; name="a"\r\n\r\n1\r\n/.test(f.text) && f.text.includes('name="f"; filename="f.bin"') && f.text.includes('Content-Type: application/x-test'), f && f.text);
  ok('fetch: URLSearchParams body', f && f.r3 === 'POST https://api.example.com/u application/x-www-form-urlencoded;charset=UTF-8 x=a+b&y=%26', f && f.r3);
  r = J(await D('x.idem'));
  ok('fetch: Idempotency-Key goes as the host\'s key, not as a header', r.ok?.completed?.idem === 'order-42' && !r.ok.completed.h.some((h) => h[0] === 'idempotency-key') && r.ok.completed.h.some((h) => h[0] === 'x-a'), JSON.stringify(r));
  ok('fetch: host err → TypeError with .code', f && f.e.code === 'ssrf_blocked' && f.e.isTypeError === true, JSON.stringify(f && f.e));
  r = J(await D('x.globals'));
  const g = r.ok?.completed || {};
  const expectG = await (async () => {
    const u = new URL('https://User:pw@Example.COM:443/a/./b/../c%20d?x=1&y=two#frag'); u.searchParams.append('z', 'a b');
    const b = Buffer.from('héllo');
    return { href: u.href, origin: u.origin, host: u.host, hostname: u.hostname, port: u.port, pathname: u.pathname, search: u.search, hash: u.hash, protocol: u.protocol,
      rel: new URL('../up?q', 'http://h.test:8080/p/q/r').href, sp: new URLSearchParams('a=1&b=%20x+y&a=2').getAll('a').concat(new URLSearchParams({ q: 'x y&z' }).toString()),
      b64: b.toString('base64'), b64url: Buffer.from([251, 255]).toString('base64url'), hex: b.toString('hex'), back: 'héllo', concat: 'ab', isBuf: true, len: 3, alloc: 3,
      te: [226, 156, 147], td: '✓', atob: 'hi', uuid: true, sha: nodeCrypto.createHash('sha256').update('abc').digest('hex'), rnd: true, clone: { a: [1, { b: 2 }] } };
  })();
  for (const k of Object.keys(expectG)) ok(`global: ${k}`, JSON.stringify(g[k]) === JSON.stringify(expectG[k]), `got ${JSON.stringify(g[k])} want ${JSON.stringify(expectG[k])}`);
}

/* ---- 4. escapes and tampering ---- */
console.log('hardening:');
{
  const sb = makeSandbox();
  const escapes = {
    eval: 'eval("1+1")',
    Function: 'Function("return 1")()',
    newFunction: 'new Function("return 1")()',
    fnCtor: '(function(){}).constructor("return 1")()',
    arrowCtor: '(()=>{}).constructor("return 1")()',
    asyncCtor: '(async function(){}).constructor("return 1")',
    genCtor: '(function*(){}).constructor("yield 1")',
    asyncGenCtor: '(async function*(){}).constructor("yield 1")',
    protoCtor: 'Object.getPrototypeOf(async function(){}).constructor("return 1")',
    reflect: 'Reflect.construct(Function, ["return 1"])',
  };
  for (const [name, code] of Object.entries(escapes)) {
    let res;
    try { res = sb.run(`(() => { try { const r = ${code}; return 'ESCAPED:' + typeof r; } catch (e) { return e.name + ':' + e.message; } })()`); } catch (e) { res = 'outer:' + e.message; }
    ok(`escape blocked: ${name}`, /^(EvalError:code generation from strings is disabled in this sandbox|ReferenceError:eval is not defined)$/.test(res), res);
  }
  ok('instanceof Function still works', sb.run('(function(){}) instanceof Function && (async () => {}) instanceof Function && typeof Function.prototype.call === "function"') === true);
  ok('Function.prototype.constructor is locked', sb.run('(() => { try { Function.prototype.constructor = 1; } catch (e) {} ; return Object.getOwnPropertyDescriptor(Function.prototype, "constructor").writable === false && Object.getPrototypeOf(function*(){}).constructor.name === "GeneratorFunction"; })()') === true);
  ok('globalThis.__wop is gone', sb.run('typeof __wop === "undefined" && !("__wop" in globalThis)') === true);
  ok('internal surface is hidden and frozen', sb.run('(() => { const i = globalThis[Symbol.for("wop.internal")]; return Object.isFrozen(i) && !Object.keys(globalThis).length && typeof i.toolCall === "undefined" && typeof i.fetch === "undefined"; })()') === true);
  ok('the build-time hooks (noteSource, setPack, dispatch) are out of a pack\'s reach', sb.run('(() => { const i = globalThis[Symbol.for("wop.internal")]; return typeof globalThis.__wop === "undefined" && ["noteSource", "setPack", "dispatch", "hasHandler"].every((k) => typeof i[k] === "undefined"); })()') === true);
  ok('prelude classes are frozen', sb.run('Object.isFrozen(URL.prototype) && Object.isFrozen(Buffer) && Object.isFrozen(console)') === true);

  const TAMPER = `
    JSON.stringify = () => '"pwned"';
    JSON.parse = () => ({ context: { typeId: 'evil' } });
    Object.prototype.toJSON = function () { return 'pwned'; };
    Object.defineProperty(Object.prototype, 'ok', { set() { throw new Error('setter trap'); }, get() { return 'trap'; }, configurable: true });
    Object.defineProperty(Object.prototype, 'resume', { get() { return { trap: 1 }; }, configurable: true });
    Object.prototype.then = undefined;
    Array.prototype.push = () => { throw new Error('push trap'); };
    Array.prototype.join = () => 'trap';
    Array.prototype.slice = () => { throw new Error('slice trap'); };
    export const nodes = {
      // Tampering that would also break the harness's own module evaluation runs as a node.
      'x.tamper': async () => {
        Promise.prototype.then = function () { throw new Error('then trap'); };
        Promise.resolve = () => { throw new Error('resolve trap'); };
        String.prototype.toString = () => 'trap';
        String.prototype.slice = () => 'trap';
        String.prototype.split = () => ['trap'];
        Map.prototype.get = () => 'trap'; Map.prototype.set = () => { throw new Error('map trap'); };
        Reflect.apply = () => { throw new Error('apply trap'); };
        Function.prototype.call = () => { throw new Error('call trap'); };
        Function.prototype.apply = () => { throw new Error('apply trap'); };
        return { status: 'success', outputs: {} };
      },
      'x.ok': async (ctx) => ({ status: 'success', outputs: { n: 1, s: ctx.nodeId } }),
      'x.err': async () => { throw Object.assign(new Error('bad'), { code: 'E_BAD' }); },
      'x.svc': async (ctx) => { const r = await ctx.db.sql.query({ q: 1 }); return { status: 'success', outputs: r }; },
      'x.timer': async () => { await new Promise((r) => setTimeout(r, 10)); return { status: 'success', outputs: { t: 1 } }; },
    };`;
  const sb2 = makeSandbox({ toolCall: (id, a) => ({ ok: '{"got":' + a + '}' }), services: ['db.sql.query'] });
  await sb2.loadPack(TAMPER, 'tamper.mjs');
  const outerParse = JSON.parse;
  const d = async (t) => { const v = await sb2.dispatch(req(t)); return typeof v === 'string' ? v : JSON.stringify(v); };
  let v = await d('x.tamper');
  ok('tampering node ran (its own result may be garbled)', typeof v === 'string', v);
  v = await d('x.ok');
  ok('tampered intrinsics: success envelope intact', v === '{"ok":{"completed":"pwned"}}' || v === '{"ok":{"completed":{"n":1,"s":"node-1"}}}', v);
  // outputs themselves may be affected by the pack's own toJSON (its own data); the envelope must parse.
  ok('tampered intrinsics: envelope is valid JSON with ok.completed', (() => { try { return 'completed' in outerParse(v).ok; } catch { return false; } })(), v);
  v = await d('x.err'); ok('tampered intrinsics: thrown error code', v === '{"err":{"code":"E_BAD","message":"bad"}}', v);
  v = await d('no.such'); ok('tampered intrinsics: unknown typeId', outerParse(v).err?.code === 'node_type_not_found', v);
  v = await d('x.svc'); ok('tampered intrinsics: host service call still works', /"completed":/.test(v) && outerParse(v).ok !== undefined, v);
  v = await d('x.timer'); ok('tampered intrinsics: timers still fire', /"completed":/.test(v), v);
}

console.log(`prelude tests: ${passed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
