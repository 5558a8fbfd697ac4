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
  const HANDLERS = new P.Map();

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
  /**
   * ctx.variables: an in-memory get/set map seeded from `seed` (the
   * request's context.variables) or else inputs.variables. The map and its
   * seed are made on first use: most nodes never touch it, and building
   * them cost ~35k instructions a call.
   */
  function makeVariables(seed, inputs) {
    let m = null;
    const map = () => {
      if (m === null) {
        m = new P.Map();
        const s = seed !== undefined ? seed : P.own(inputs, 'variables');
        if (isObj(s)) { const ks = P.ObjectKeys(s); for (let i = 0; i < ks.length; i++) P.MapSet(m, ks[i], s[ks[i]]); }
      }
      return m;
    };
    return {
      get(k) { return P.MapGet(map(), P.StringCtor(k)); },
      set(k, v) { P.MapSet(map(), P.StringCtor(k), v); return v; },
      has(k) { return P.MapHas(map(), P.StringCtor(k)); },
      delete(k) { return P.MapDelete(map(), P.StringCtor(k)); },
      toJSON() { const o = {}; P.MapForEach(map(), (v, k) => P.put(o, k, v)); return o; },
    };
  }

  /** ctx.emit: shared by every ctx (it keeps no per-call state). */
  function emit(event, data) {
    let ev = event, d = data;
    if (isObj(event) && arguments.length === 1) {
      try { ev = event.type !== undefined ? event.type : event.kind !== undefined ? event.kind : 'event'; d = event; } catch (_) { ev = 'event'; }
    }
    P.hostLog(1, 'emit', { event: typeof ev === 'string' ? ev : P.format([ev]), data: d });
    return P.PromiseResolve(undefined);
  }

  // Built once, at build time, into the snapshot: every invocation runs in
  // a fresh instance of that snapshot, so nothing a pack does to these
  // objects outlives its own invocation, and no call pays to rebuild them.
  // Host services: only those the operator mapped exist (built per call,
  // usually none or a few; all ~170 stubs cost millions of instructions).
  // Nothing mapped (the common case): no service stubs at all, only the
  // host's safe-fetch under its protocol name.
  const NO_SERVICES = P.buildServices({}, []);
  const SHARED_LOG = makeLog();
  const SHARED_SIGNAL = P.neverAbortSignal();
  const SHARED_SECRETS = P.buildSecrets();
  const SHARED_MCP = P.buildMcp();

  /**
   * The request's own fields, copied (one native call each) into objects
   * without a prototype: plain reads of them cannot see anything a pack put
   * on Object.prototype, at a fraction of a `P.own` per field (~7k
   * instructions each in QuickJS).
   */
  function ownFields(req) {
    const rq = P.ObjectAssign(P.ObjectCreate(null), isObj(req) ? req : {});
    const c = P.ObjectAssign(P.ObjectCreate(null), isObj(rq.context) ? rq.context : {});
    return { rq, c };
  }

  function buildCtx(rq, c, onSuspend, resumeInfo, given) {
    const mapped = given !== undefined ? given : namesServices ? P.mappedServices() : NO_NAMES;
    const services = mapped.length === 0 ? NO_SERVICES : P.buildServices({}, mapped);
    const inputs = isObj(rq.inputs) ? rq.inputs : {};
    const config = isObj(rq.config) ? rq.config : {};
    // triggerData: request.context.triggerData, else inputs.triggerData.
    const td = c.triggerData;
    const trig = { done: false, value: undefined };
    // variables: seeded from context.variables / inputs.variables (an in-memory get/set map).
    const vs = c.variables;
    // One object literal: spread and literal keys define own data
    // properties (no [[Set]], so no setter a pack put on Object.prototype
    // runs), in one native step each — per-key defineProperty cost ~10k
    // instructions a key, most of an invocation's cost.
    const ctx = {
      ...services,
      inputs,
      config,
      nodeId: c.nodeId,
      runId: c.runId,
      tenantId: c.tenantId,
      attempt: c.attempt,
      typeId: c.typeId,
      // The run's trigger payload, asked of the host on first read (most
      // nodes never read it): the invocation's triggerData, else the
      // request's, else inputs.triggerData. Assignable, like a data property.
      get triggerData() {
        if (!trig.done) {
          trig.done = true;
          let v = null;
          try { v = P.callTool('service:run.triggerData', '[]', undefined); } catch (_) { v = null; }
          trig.value = v !== null && v !== undefined ? v : td !== undefined ? td : P.own(inputs, 'triggerData');
        }
        return trig.value;
      },
      set triggerData(v) { trig.done = true; trig.value = v; },
      variables: makeVariables(vs, inputs),
      log: SHARED_LOG,
      emit,
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
    // `c` has no prototype: plain reads see only the request's own fields.
    if (c.userId !== undefined) P.put(ctx, 'userId', c.userId);
    if (c.trustBoundary !== undefined) P.put(ctx, 'trustBoundary', c.trustBoundary);
    if (c.workflowId !== undefined) P.put(ctx, 'workflowId', c.workflowId);
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
      const { rq, c } = ownFields(req);
      const typeId = P.StringCtor(c.typeId);
      const h = P.MapHas(HANDLERS, typeId) ? P.MapGet(HANDLERS, typeId) : lookupIn(typeId);
      if (h === null) {
        finish(errEnvelope('node_type_not_found', 'this pack exports no handler for node type "' + typeId + '"'));
        return out;
      }
      const resume = rq.resume;
      const resumeInfo = { available: resume !== undefined && resume !== null, returned: false, value: resume };
      const ctx = buildCtx(rq, c, (v) => finish(okEnvelope('suspended', v)), resumeInfo);
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

  // Whether the pack's source names any host service (noteSource, at build
  // time): a pack that names none cannot reach one, so the host is not
  // asked which are mapped (~20k instructions a call). Unknown: asked.
  let namesServices = true;
  let noted = false;
  const NO_NAMES = [];
  function noteSource(text) {
    if (!noted) { noted = true; namesServices = false; }
    if (!namesServices && P.namesAnyService(P.StringCtor(text))) namesServices = true;
  }

  function setPack(ns) {
    if (pack !== null) throw new P.Error('setPack: already set');
    pack = ns;
    warm();
  }

  // Object shapes are shared while an object of that shape is alive:
  // building one request and one ctx at build time, and keeping them in
  // the snapshot, lets every invocation's JSON.parse and ctx literal reuse
  // those shapes instead of creating ~30 new ones. Nothing here reaches
  // the host (no service is asked for: `mapped` is given).
  const WARM = [];
  function warm() {
    const req = P.JSONParse('{"context":{"runId":"","nodeId":"","tenantId":"","attempt":1,"typeId":""},"inputs":{},"config":{},"resume":null}');
    const resumeInfo = { available: false, returned: false, value: null };
    P.append(WARM, req);
    P.append(WARM, resumeInfo);
    const { rq, c } = ownFields(req);
    P.append(WARM, rq);
    P.append(WARM, c);
    P.append(WARM, buildCtx(rq, c, () => {}, resumeInfo, []));
  }
  // The build checks every manifest node through here (engine init.rs), so
  // the snapshot holds each declared node's handler: a call finds it with
  // one Map lookup instead of walking the exports (~70k instructions).
  function hasHandler(typeId) {
    const id = P.StringCtor(typeId);
    const h = lookupIn(id);
    if (h !== null) P.MapSet(HANDLERS, id, h);
    return h !== null;
  }
  function advanceTimers() { return P.timers.advance(); }

  native.noteSource = noteSource;
  native.setPack = setPack;
  native.hasHandler = hasHandler;
  native.dispatch = dispatch;
  native.advanceTimers = advanceTimers;
})();
