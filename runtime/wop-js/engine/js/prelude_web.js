/*
 * prelude_web.js — console, crypto (randomUUID, getRandomValues, subtle.digest),
 * Math.random (host randomness), structuredClone, process.env, performance.
 * Nothing here calls the host at build time: the random pool fills lazily.
 */
(function () {
  'use strict';
  const P = globalThis.__wop.__p;
  const U8 = P.Uint8Array;

  /* ---- host randomness: a small pool, reset by the dispatcher per invocation
         so that what a node draws depends only on its own host calls (replay). */
  let pool = null, poolAt = 0;
  function randomBytes(n) {
    n = n >>> 0;
    if (n > 65536) throw P.codedError('ERR_OUT_OF_RANGE', 'at most 65536 random bytes per call', undefined, P.RangeError);
    return P.toU8(P.ReflectApply(P.n_randomBytes, undefined, [n]));
  }
  function randomByte() {
    if (pool === null || poolAt >= pool.length) { pool = randomBytes(256); poolAt = 0; }
    return pool[poolAt++];
  }
  P.randomBytes = randomBytes;
  P.resetRandom = function () { pool = null; poolAt = 0; };

  // The QuickJS seed is frozen in the build snapshot; replace it with host randomness (53 bits).
  const random = function random() {
    let hi = 0;
    for (let i = 0; i < 3; i++) hi = hi * 256 + randomByte();      // 24 bits
    let lo = 0;
    for (let i = 0; i < 4; i++) lo = lo * 256 + randomByte();      // 32 bits
    hi = hi >>> 3;                                                   // 21 bits
    return (hi * 4294967296 + lo) / 9007199254740992;                // 53 bits / 2^53
  };
  P.ObjectDefineProperty(Math, 'random', { value: random, writable: true, enumerable: false, configurable: true });

  function hex(b) { return (b < 16 ? '0' : '') + b.toString(16); }
  function randomUUID() {
    const b = randomBytes(16);
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let s = '';
    for (let i = 0; i < 16; i++) { s += hex(b[i]); if (i === 3 || i === 5 || i === 7 || i === 9) s += '-'; }
    return s;
  }
  P.randomUUID = randomUUID;

  const SUBTLE_ALGS = { 'SHA-1': 'sha1', 'SHA-256': 'sha256', 'SHA-384': 'sha384', 'SHA-512': 'sha512' };
  function digestNative(alg, data) { return P.toU8(P.ReflectApply(P.n_digest, undefined, [alg, P.toU8(data)])); }
  function hmacNative(alg, key, data) { return P.toU8(P.ReflectApply(P.n_hmac, undefined, [alg, P.toU8(key), P.toU8(data)])); }
  P.digest = digestNative;
  P.hmac = hmacNative;

  function getRandomValues(ta) {
    if (!P.isView(ta) || ta instanceof Float32Array || ta instanceof Float64Array || ta instanceof DataView) {
      throw P.codedError(17, 'getRandomValues: the argument must be an integer TypedArray', undefined, P.TypeError);
    }
    const u = P.toU8(ta);
    if (u.length > 65536) throw P.codedError('QuotaExceededError', 'getRandomValues: at most 65536 bytes', undefined, P.RangeError);
    P.U8Set(u, randomBytes(u.length));
    return ta;
  }
  const subtle = {
    digest(algorithm, data) {
      try {
        const name = typeof algorithm === 'string' ? algorithm : algorithm && algorithm.name;
        const alg = SUBTLE_ALGS[P.StringCtor(name).toUpperCase()];
        if (!alg) throw P.codedError('NotSupportedError', 'Unrecognized algorithm name', undefined, P.Error);
        const out = digestNative(alg, data);
        return P.PromiseResolve(P.ABSlice(P.TA_buffer(out), P.TA_byteOffset(out), P.TA_byteOffset(out) + P.TA_length(out)));
      } catch (e) { return P.PromiseReject(e); }
    },
  };
  for (const m of ['encrypt', 'decrypt', 'sign', 'verify', 'generateKey', 'deriveKey', 'deriveBits', 'importKey', 'exportKey', 'wrapKey', 'unwrapKey']) {
    subtle[m] = function () { return P.PromiseReject(P.codedError('NotSupportedError', 'crypto.subtle.' + m + ' is not available in this sandbox')); };
  }
  const crypto = { randomUUID, getRandomValues, subtle: P.ObjectFreeze(subtle) };
  P.webcrypto = P.ObjectFreeze(crypto);
  P.defineGlobal('crypto', P.webcrypto);

  /* ---- console ---- */
  function fmt(v) {
    if (typeof v === 'string') return v;
    if (v instanceof P.Error) { try { return v.stack ? P.StringCtor(v.stack) : v.name + ': ' + v.message; } catch (_) { return '[Error]'; } }
    if (typeof v === 'object' && v !== null) { const s = P.safeStringify(v); if (s !== undefined) return s; }
    try { return P.StringCtor(v); } catch (_) { return '[unprintable]'; }
  }
  function format(args) {
    let out = '';
    for (let i = 0; i < args.length; i++) out += (i ? ' ' : '') + fmt(args[i]);
    return out;
  }
  const mk = (level) => function (...args) { P.hostLog(level, format(args)); };
  const counts = new P.Map();
  const console = {
    log: mk(1), info: mk(1), warn: mk(2), error: mk(3), debug: mk(0), trace: mk(0),
    dir: mk(1), table: mk(1),
    assert(cond, ...args) { if (!cond) P.hostLog(3, 'Assertion failed' + (args.length ? ': ' + format(args) : '')); },
    count(label) { label = label === undefined ? 'default' : P.StringCtor(label); const n = (P.MapGet(counts, label) || 0) + 1; P.MapSet(counts, label, n); P.hostLog(1, label + ': ' + n); },
    time() {}, timeEnd() {}, timeLog() {}, group() {}, groupEnd() {}, groupCollapsed() {},
  };
  P.format = format;
  P.defineGlobal('console', console);

  /* ---- structuredClone (JSON-based; keeps Date, Map, Set, typed arrays shallowly right) ---- */
  function clone(v, seen) {
    if (typeof v !== 'object' || v === null) {
      if (typeof v === 'function' || typeof v === 'symbol') throw P.codedError('DataCloneError', 'could not be cloned', undefined, P.Error);
      return v;
    }
    if (seen.has(v)) return seen.get(v);
    if (v instanceof Date) return new Date(v.getTime());
    if (v instanceof RegExp) return new RegExp(v.source, v.flags);
    if (P.isView(v)) { const c = v.slice ? v.slice() : new v.constructor(v); seen.set(v, c); return c; }
    if (v instanceof P.ArrayBuffer) return P.ABSlice(v, 0);
    if (v instanceof Map) { const m = new Map(); seen.set(v, m); v.forEach((x, k) => m.set(clone(k, seen), clone(x, seen))); return m; }
    if (v instanceof Set) { const s = new Set(); seen.set(v, s); v.forEach((x) => s.add(clone(x, seen))); return s; }
    if (v instanceof P.Error) { const e = new P.Error(v.message); e.name = v.name; return e; }
    const out = P.ArrayIsArray(v) ? [] : {};
    seen.set(v, out);
    for (const k of P.ObjectKeys(v)) P.put(out, k, clone(v[k], seen));
    return out;
  }
  P.defineGlobal('structuredClone', function structuredClone(v) { return clone(v, new Map()); });

  /* ---- process (env only: packs read process.env.X === 'true' toggles; all off) ---- */
  P.defineGlobal('process', P.ObjectFreeze({ env: P.ObjectFreeze({}), platform: 'wasi', versions: P.ObjectFreeze({}), browser: false }));

  /* ---- performance.now: virtual timer clock plus host clock progress ---- */
  P.defineGlobal('performance', P.ObjectFreeze({
    now() { return P.timers.now() + (P.NumberCtor(P.ReflectApply(P.n_nowMs, undefined, [])) - (P.startMs || 0)); },
    get timeOrigin() { return P.startMs || 0; },
  }));
})();
