// Computes the `expected` envelope of every case in
// runtime/wop-cli/tests/fixtures/registry-js-cases.json by calling the node
// handler directly under plain Node (no sandbox), the reference the wop
// sandbox is compared with (run.mjs, tests/javascript.rs).
//
//   node expected.mjs --write   rewrite the cases file with fresh `expected` values
//   node expected.mjs --check   exit 1 when a stored `expected` differs (default)
//
// Packs are read from $WOP_REGISTRY_PACKS (default /work/registry-tree/packs):
// one directory per pack holding index.mjs and pack.json (the registry's
// `packs/<name>/`, or the fixture archives unpacked by unpack-fixtures.sh).
// The cases file can be overridden with $WOP_JS_CASES.
//
// A case is {pack, version, typeId, inputs, config, [resume], expected}:
//   expected  {"ok":{"completed": outputs}} | {"err":{"code", "message"[, "details"]}}
//   resume    optional: the node is run as resumed — ctx.suspend(...) resolves
//             to this value (the sandbox does the same with the request's
//             `resume`); without it the plain ctx has no suspend.
// The plain ctx is {inputs, config, nodeId:'node-1', runId:'run-1',
// tenantId:'t-1', attempt:1, log(){}, emit(){}, variables: new Map(), signal},
// plus triggerData = inputs.triggerData when the inputs carry one (the
// sandbox's documented fallback when the request context has none).
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const HERE = path.dirname(fileURLToPath(import.meta.url));
export const PACKS = process.env.WOP_REGISTRY_PACKS || '/work/registry-tree/packs';
export const CASES_FILE = process.env.WOP_JS_CASES
  || path.resolve(HERE, '../../../../wop-cli/tests/fixtures/registry-js-cases.json');

export function readCases(file = CASES_FILE) {
  const cases = JSON.parse(fs.readFileSync(file, 'utf8'));
  if (!Array.isArray(cases)) throw new Error(file + ': not a JSON array');
  return cases;
}

/** The pack's version as its pack.json declares it (null when the pack is absent). */
export function packVersion(pack, packs = PACKS) {
  const f = path.join(packs, pack, 'pack.json');
  if (!fs.existsSync(f)) return null;
  return JSON.parse(fs.readFileSync(f, 'utf8')).version ?? null;
}

// Handler lookup, in the sandbox dispatcher's order (prelude_dispatch.js):
// nodes[typeId], default[typeId], default.nodes[typeId], default.nodeHandlers[typeId],
// nodeHandlers[typeId]; nodeHandlers handlers are fn(inputs, ctx) returning raw outputs.
function lookup(ns, typeId) {
  const isObj = (v) => v !== null && (typeof v === 'object' || typeof v === 'function');
  const maps = [];
  if (isObj(ns.nodes)) maps.push({ m: ns.nodes, raw: false });
  if (isObj(ns.default)) {
    maps.push({ m: ns.default, raw: false });
    if (isObj(ns.default.nodes)) maps.push({ m: ns.default.nodes, raw: false });
    if (isObj(ns.default.nodeHandlers) && typeof ns.default.nodeHandlers !== 'function') maps.push({ m: ns.default.nodeHandlers, raw: true });
  }
  if (isObj(ns.nodeHandlers) && typeof ns.nodeHandlers !== 'function') maps.push({ m: ns.nodeHandlers, raw: true });
  for (const { m, raw } of maps) if (Object.hasOwn(m, typeId) && typeof m[typeId] === 'function') return { fn: m[typeId], raw };
  return null;
}

const clone = (v) => (v === undefined ? undefined : JSON.parse(JSON.stringify(v)));

// {"err":{code, message[, details]}}: details only when the error carries them (as the sandbox does).
function errEnvelope(code, message, details) {
  const err = { code: code || 'node_error', message: String(message) };
  if (details !== undefined) err.details = details;
  return JSON.stringify({ err });
}

/** The envelope (a JSON string) the handler produces under plain Node. */
export async function plainEnvelope(pack, typeId, inputs = {}, config = {}, resume, packs = PACKS) {
  const ns = await import(pathToFileURL(path.join(packs, pack, 'index.mjs')).href);
  const h = lookup(ns, typeId);
  if (!h) throw new Error(`${pack}: no handler for ${typeId}`);
  inputs = clone(inputs) ?? {};
  config = clone(config) ?? {};
  const ctx = { inputs, config, nodeId: 'node-1', runId: 'run-1', tenantId: 't-1', attempt: 1, log() {}, emit() {}, variables: new Map(), signal: new AbortController().signal };
  if (inputs && Object.hasOwn(inputs, 'triggerData')) ctx.triggerData = inputs.triggerData;
  if (resume !== undefined && resume !== null) { const r = clone(resume); ctx.suspend = async () => r; }
  try {
    const r = h.raw ? await h.fn(inputs, ctx) : await h.fn(ctx);
    if (h.raw) return JSON.stringify({ ok: { completed: r === undefined ? {} : r } });
    if (r && r.status === 'success') return JSON.stringify({ ok: { completed: r.outputs === undefined ? {} : r.outputs } });
    if (r && r.status === 'error') return errEnvelope(r.error.code, r.error.message, r.error.details);
    throw new Error(`${pack} ${typeId}: the handler returned a value plainEnvelope cannot express: ${JSON.stringify(r)}`);
  } catch (e) {
    if (/cannot express/.test(e && e.message)) throw e;
    return errEnvelope(e && e.code, e && e.message !== undefined ? e.message : e, e && e.details);
  }
}

/** JSON with object keys sorted: equal envelopes compare equal whatever their key order. */
export function canonical(v) {
  if (Array.isArray(v)) return '[' + v.map(canonical).join(',') + ']';
  if (v !== null && typeof v === 'object') return '{' + Object.keys(v).sort().map((k) => JSON.stringify(k) + ':' + canonical(v[k])).join(',') + '}';
  return JSON.stringify(v);
}

export const caseLabel = (c, i) => `#${i} ${c.typeId} ${JSON.stringify(c.inputs).slice(0, 50)}`;

async function main() {
  const mode = process.argv.includes('--write') ? 'write' : 'check';
  const cases = readCases();
  let diffs = 0, errors = 0;
  const versions = new Map();
  for (const [i, c] of cases.entries()) {
    if (!versions.has(c.pack)) versions.set(c.pack, packVersion(c.pack));
    const have = versions.get(c.pack);
    if (have !== c.version) {
      console.error(`${caseLabel(c, i)}: ${c.pack} in ${PACKS} is ${have === null ? 'missing' : 'version ' + have}, the case wants ${c.version}`);
      errors++;
      continue;
    }
    let env;
    try { env = JSON.parse(await plainEnvelope(c.pack, c.typeId, c.inputs, c.config, c.resume)); } catch (e) {
      console.error(`${caseLabel(c, i)}: ${e.message}`);
      errors++;
      continue;
    }
    if (mode === 'write') c.expected = env;
    else if (canonical(env) !== canonical(c.expected)) {
      diffs++;
      console.error(`${caseLabel(c, i)} differs\n  stored: ${JSON.stringify(c.expected)}\n  plain:  ${JSON.stringify(env)}`);
    }
  }
  if (errors) { console.error(`${errors} case(s) could not be computed`); process.exit(1); }
  if (mode === 'write') {
    fs.writeFileSync(CASES_FILE, JSON.stringify(cases, null, 2) + '\n');
    console.log(`wrote ${cases.length} expected envelopes to ${CASES_FILE}`);
  } else if (diffs) {
    console.error(`${diffs} of ${cases.length} expected envelopes differ (regenerate with --write)`);
    process.exit(1);
  } else console.log(`all ${cases.length} expected envelopes match plain Node`);
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) await main();
