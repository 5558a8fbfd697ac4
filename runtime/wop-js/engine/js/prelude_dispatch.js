/*
 * prelude_dispatch.js — the dispatcher the Rust side calls, installed on the native
 * object (read by Rust after the prelude ran; the pack never sees it):
 *   setPack(namespace)        once at build time, with the entry module namespace
 *   hasHandler(typeId) → bool build-time export check
 *   dispatch(requestJson) → Promise<string>, never rejects
 *   advanceTimers() → bool    fire the next virtual timer
 *
 * Handler conventions (registry survey): `export const nodes = {typeId: fn(ctx)}`,
 * `export default {typeId: fn(ctx)}`, `export const nodeHandlers = {typeId: fn(inputs, ctx)}`
 * (also reachable as `default.nodeHandlers`; its handlers return raw outputs).
 *
 * Every value the dispatcher itself reads or builds goes through primordials
 * captured at prelude time, so a pack that overwrites JSON, Object.prototype,
 * Array.prototype.push, Promise.prototype.then, String.prototype.* … cannot make it
 * throw or return a malformed envelope.
 */
(function () {
  'use strict';
  const P = globalThis.__wop.__p;
  const native = P.native;
  const MAX_RESULT_CHARS = 16 * 1024 * 1024; // larger outputs are refused (invalid_node_result)
  let pack = null;

  function isObj(v) { return v !== null && (typeof v === 'object' || typeof v === 'function'); }

  /* ---- handler lookup ---- */
  // Returns {fn, raw} (raw: nodeHandlers convention, fn(inputs, ctx) returning outputs) or null.
  function lookupIn(typeId) {
    if (pack === null) return null;
    const ns = pack;
    const maps = [];
    const nodes = P.own(ns, 'nodes');
    const def = P.own(ns, 'default');
    if (isObj(nodes)) P.append(maps, { m: nodes, raw: false });
    if (isObj(def)) {
      P.append(maps, { m: def, raw: false });
      const dn = P.own(def, 'nodes');
      if (isObj(dn)) P.append(maps, { m: dn, raw: false });
      const dh = P.own(def, 'nodeHandlers');
      if (isObj(dh) && typeof dh !== 'function') P.append(maps, { m: dh, raw: true });
    }
    const nh = P.own(ns, 'nodeHandlers');
    if (isObj(nh) && typeof nh !== 'function') P.append(maps, { m: nh, raw: true });
    // 1. exact key
    for (let i = 0; i < maps.length; i++) {
      const fn = P.own(maps[i].m, typeId);
      if (typeof fn === 'function') return { fn, raw: maps[i].raw };
    }
    // 2. qualified ids: "<pack>/<typeId>", "<typeId>@<version>", "<pack-ns>.<short typeId>":
    //    match the longest key that is a dot/slash-delimited suffix of the requested id.
    let id = typeId;
    const at = P.StringLastIndexOf(id, '@');
    if (at > 0) id = P.StringSlice(id, 0, at);
    let best = null, bestLen = -1;
    for (let i = 0; i < maps.length; i++) {
      const keys = P.ObjectKeys(maps[i].m);
      for (let k = 0; k < keys.length; k++) {
        const key = keys[k];
        const fn = P.own(maps[i].m, key);
        if (typeof fn !== 'function' || key.length <= bestLen) continue;
        if (key === id) { best = { fn, raw: maps[i].raw }; bestLen = key.length; continue; }
        if (id.length > key.length && P.StringSlice(id, id.length - key.length) === key) {
          const sep = id[id.length - key.length - 1];
          if (sep === '.' || sep === '/' || sep === ':') { best = { fn, raw: maps[i].raw }; bestLen = key.length; }
        }
      }
    }
    if (best !== null) return best;
    // 3. a function-valued `nodeHandlers(inputs, ctx)` serves every type.
    if (typeof nh === 'function') return { fn: nh, raw: true };
    return null;
  }

  /* ---- envelopes (built by concatenation: no reliance on the pack-reachable JSON/prototypes) ---- */
  function str(v) { return P.JSONStringify(P.StringCtor(v)); } // strings never consult toJSON
  function errEnvelope(code, message, details) {
    let d = '';
    if (details !== undefined) {
      const s = P.safeStringify(details);
      if (s !== undefined && s.length <= 65536) d = ',"details":' + s;
    }
    let m = message;
    if (m.length > 65536) m = P.StringSlice(m, 0, 65536) + '…';
    return '{"err":{"code":' + str(code) + ',"message":' + str(m) + d + '}}';
  }
  function okEnvelope(kind, value) {
    let s;
    try { s = P.JSONStringify(value === undefined ? null : value); } catch (e) {
      return errEnvelope('invalid_node_result', 'the node ' + (kind === 'completed' ? 'outputs' : 'suspend value') + ' cannot be serialised as JSON: ' + safeMessage(e));
    }
    if (s === undefined) s = 'null';
    if (s.length > MAX_RESULT_CHARS) {
      return errEnvelope('invalid_node_result', 'the node ' + (kind === 'completed' ? 'outputs' : 'suspend value') + ' are too large (' + s.length + ' characters of JSON; at most ' + MAX_RESULT_CHARS + ')');
    }
    return '{"ok":{"' + kind + '":' + s + '}}';
  }
  function safeMessage(e) {
    try {
      if (isObj(e)) { const m = e.message; if (m !== undefined) return P.StringCtor(m); }
      return P.StringCtor(e);
    } catch (_) { return '(unprintable error)'; }
  }
  function safeCode(e, dflt) {
    try {
      if (!isObj(e)) return dflt;
      const c = e.code;
      if (typeof c === 'string' && c !== '') return c;
      if (typeof c === 'number') return P.StringCtor(c);
    } catch (_) { /* fall through */ }
    return dflt;
  }
  function errFromThrown(e) {
    let details;
    try { if (isObj(e)) details = e.details; } catch (_) { details = undefined; }
    return errEnvelope(safeCode(e, 'node_error'), safeMessage(e), details);
  }

  function describeShape(r) {
    if (r === null) return 'null';
    if (typeof r !== 'object') return typeof r;
    try {
      const keys = P.ObjectKeys(r);
      let status = '';
      try { if (typeof r.status === 'string') status = ' with status "' + r.status + '"'; } catch (_) { /* ignore */ }
      return 'an object' + status + ' (keys: ' + P.ArrayJoin(P.ArraySlice(keys, 0, 8), ', ') + ')';
    } catch (_) { return 'an object'; }
  }

  // Maps a handler's settled value to an envelope string.
  function fromResult(r, raw, resumeInfo) {
    let status;
    try { status = isObj(r) ? r.status : undefined; } catch (e) { return errFromThrown(e); }
    // `{outputs}` without a status (four registry node types return it)
    // is a success, as the reference engine takes it.
    let bare = false;
    try { bare = status === undefined && isObj(r) && P.hasOwn(r, 'outputs'); } catch (e) { return errFromThrown(e); }
    if (status === 'success' || bare) {
      let outputs;
      try { outputs = r.outputs; } catch (e) { return errFromThrown(e); }
      return okEnvelope('completed', outputs === undefined ? {} : outputs);
    }
    if (status === 'error') {
      let error, code = 'node_error', message = 'the node reported an error', details;
      try {
        error = r.error;
        if (isObj(error)) {
          code = safeCode(error, 'node_error');
          if (error.message !== undefined) message = P.StringCtor(error.message);
          details = error.details;
        } else if (error !== undefined) message = P.StringCtor(error);
      } catch (e) { return errFromThrown(e); }
      return errEnvelope(code, message, details);
    }
    if (status === 'suspended' || status === 'waiting') {
      // Not used by the registry; accepted for hosts' own packs.
      let v;
      try { v = r.suspend !== undefined ? r.suspend : r.interrupt !== undefined ? r.interrupt : r.outputs; } catch (e) { return errFromThrown(e); }
      return okEnvelope('suspended', v === undefined ? null : v);
    }
    if (raw) return okEnvelope('completed', r === undefined ? {} : r);
    // core.flow.wait does `return ctx.suspend(...)`: on resume it returns the resume value itself.
    if (resumeInfo.returned && r === resumeInfo.value) return okEnvelope('completed', { resumed: true, payload: r });
    return errEnvelope('invalid_node_result',
      'a node handler must return {status: "success", outputs} or {status: "error", error: {code, message}} (or throw an Error with .code); got ' + describeShape(r));
  }

  /* ---- ctx ---- */
  const LEVELS = { debug: 0, trace: 0, info: 1, log: 1, warn: 2, warning: 2, error: 3, fatal: 3 };
  function makeLog() {
    // ctx.log(level, msg, fields) (registry style) | ctx.log(msg, fields) | ctx.log.info(msg, fields)
    const log = function (a, b, c) {
      if (typeof a === 'string' && P.hasOwn(LEVELS, a) && arguments.length >= 2) P.hostLog(LEVELS[a], typeof b === 'string' ? b : P.format([b]), c);
      else P.hostLog(1, typeof a === 'string' ? a : P.format([a]), b);
    };
    const names = P.ObjectKeys(LEVELS);
    for (let i = 0; i < names.length; i++) {
      const lvl = LEVELS[names[i]];
      P.put(log, names[i], function (msg, fields) { P.hostLog(lvl, typeof msg === 'string' ? msg : P.format([msg]), fields); });
    }
    return log;
  }
  function makeVariables(seed) {
    const m = new P.Map();
    if (isObj(seed)) { const ks = P.ObjectKeys(seed); for (let i = 0; i < ks.length; i++) P.MapSet(m, ks[i], seed[ks[i]]); }
    return {
      get(k) { return P.MapGet(m, P.StringCtor(k)); },
      set(k, v) { P.MapSet(m, P.StringCtor(k), v); return v; },
      has(k) { return P.MapHas(m, P.StringCtor(k)); },
      delete(k) { return P.MapDelete(m, P.StringCtor(k)); },
      toJSON() { const o = {}; P.MapForEach(m, (v, k) => P.put(o, k, v)); return o; },
    };
  }

  // Built once, at build time, into the snapshot: every invocation runs in
  // a fresh instance of that snapshot, so nothing a pack does to these
  // objects outlives its own invocation, and no call pays to rebuild them
  // (the ~170 service stubs alone cost millions of instructions per call).
  const SHARED = P.buildServices({});
  const SHARED_LOG = makeLog();
  const SHARED_SIGNAL = P.neverAbortSignal();
  const SHARED_SECRETS = P.buildSecrets();
  const SHARED_MCP = P.buildMcp();

  function buildCtx(req, onSuspend, resumeInfo) {
    const c = P.own(req, 'context') || {};
    const inputs = isObj(P.own(req, 'inputs')) ? req.inputs : {};
    const config = isObj(P.own(req, 'config')) ? req.config : {};
    // triggerData: request.context.triggerData, else inputs.triggerData.
    const td = P.own(c, 'triggerData');
    // variables: seeded from context.variables / inputs.variables (an in-memory get/set map).
    const vs = P.own(c, 'variables');
    // One object literal: spread and literal keys define own data
    // properties (no [[Set]], so no setter a pack put on Object.prototype
    // runs), in one native step each — per-key defineProperty cost ~10k
    // instructions a key, most of an invocation's cost.
    const ctx = {
      ...SHARED,
      inputs,
      config,
      nodeId: P.own(c, 'nodeId'),
      runId: P.own(c, 'runId'),
      tenantId: P.own(c, 'tenantId'),
      attempt: P.own(c, 'attempt'),
      typeId: P.own(c, 'typeId'),
      triggerData: td !== undefined ? td : P.own(inputs, 'triggerData'),
      variables: makeVariables(vs !== undefined ? vs : P.own(inputs, 'variables')),
      log: SHARED_LOG,
      emit: function emit(event, data) {
        let ev = event, d = data;
        if (isObj(event) && arguments.length === 1) {
          try { ev = event.type !== undefined ? event.type : event.kind !== undefined ? event.kind : 'event'; d = event; } catch (_) { ev = 'event'; }
        }
        P.hostLog(1, 'emit', { event: typeof ev === 'string' ? ev : P.format([ev]), data: d });
        return P.PromiseResolve(undefined);
      },
      suspend: function suspend(value) {
        if (resumeInfo.available) {
          // Replay after resume: the first suspend returns the resume payload.
          resumeInfo.available = false;
          resumeInfo.returned = true;
          return P.PromiseResolve(resumeInfo.value);
        }
        onSuspend(value === undefined ? null : value);
        return new P.Promise(() => {}); // never settles: the invocation ends here
      },
      signal: SHARED_SIGNAL,
      secrets: SHARED_SECRETS,
      mcp: SHARED_MCP,
    };
    const extra = ['userId', 'trustBoundary', 'workflowId'];
    for (let i = 0; i < extra.length; i++) { const v = P.own(c, extra[i]); if (v !== undefined) P.put(ctx, extra[i], v); }
    return ctx;
  }

  /* ---- dispatch ---- */
  function dispatch(requestJson) {
    let settle;
    const out = new P.Promise((resolve) => { settle = resolve; });
    let done = false;
    const finish = (s) => {
      if (done) return;
      done = true;
      P.timers.reset();
      settle(s);
    };
    try {
      P.timers.reset();
      P.resetRandom();
      P.startMs = P.NumberCtor(P.ReflectApply(P.n_nowMs, undefined, []));
      let req;
      try { req = P.JSONParse(P.StringCtor(requestJson)); } catch (e) {
        finish(errEnvelope('invalid_request', 'the request is not JSON: ' + safeMessage(e)));
        return out;
      }
      const typeId = P.StringCtor(P.own(P.own(req, 'context'), 'typeId'));
      const h = lookupIn(typeId);
      if (h === null) {
        finish(errEnvelope('node_type_not_found', 'this pack exports no handler for node type "' + typeId + '"'));
        return out;
      }
      const resume = P.own(req, 'resume');
      const resumeInfo = { available: resume !== undefined && resume !== null, returned: false, value: resume };
      const ctx = buildCtx(req, (v) => finish(okEnvelope('suspended', v)), resumeInfo);
      let r;
      try {
        r = h.raw ? P.ReflectApply(h.fn, undefined, [ctx.inputs, ctx]) : P.ReflectApply(h.fn, undefined, [ctx]);
      } catch (e) {
        finish(errFromThrown(e));
        return out;
      }
      const onValue = (v) => { try { finish(fromResult(v, h.raw, resumeInfo)); } catch (e) { finish(errEnvelope('invalid_node_result', 'the node result could not be read: ' + safeMessage(e))); } };
      const onError = (e) => { try { finish(errFromThrown(e)); } catch (_) { finish(errEnvelope('node_error', '(unprintable error)')); } };
      if (isObj(r)) {
        let then;
        try { then = r.then; } catch (e) { onError(e); return out; }
        if (typeof then === 'function') {
          // Adopt the handler's promise with the captured `then` when it is a genuine
          // promise (a pack's patched Promise.prototype.then cannot intercept it).
          try {
            if (r instanceof P.Promise) P.PromiseThen(r, onValue, onError);
            else P.ReflectApply(then, r, [onValue, onError]);
          } catch (e) { onError(e); }
          return out;
        }
      }
      onValue(r);
    } catch (e) {
      finish(errEnvelope('node_error', 'dispatch failed: ' + safeMessage(e)));
    }
    return out;
  }

  function setPack(ns) {
    if (pack !== null) throw new P.Error('setPack: already set');
    pack = ns;
  }
  function hasHandler(typeId) { return lookupIn(P.StringCtor(typeId)) !== null; }
  function advanceTimers() { return P.timers.advance(); }

  native.setPack = setPack;
  native.hasHandler = hasHandler;
  native.dispatch = dispatch;
  native.advanceTimers = advanceTimers;
})();
