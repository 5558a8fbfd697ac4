/*
 * prelude_intrinsics.js — first prelude file (see ORDER).
 *
 * Captures the native host API (`globalThis.__wop`, installed by the Rust
 * side) and every intrinsic the shim relies on, BEFORE any pack code can run.
 * Later prelude files reach these through `globalThis.__wop.__p` (the "primordials"
 * bag); the last file (prelude_harden.js) deletes `globalThis.__wop`, so the pack
 * never sees either. Everything here is plain ES2020, no dependencies.
 */
(function () {
  'use strict';
  const native = globalThis.__wop;
  if (!native || typeof native !== 'object') throw new Error('wop prelude: globalThis.__wop missing');

  const FnCall = Function.prototype.call;
  const FnBind = Function.prototype.bind;
  // uncurry(Array.prototype.slice)(arr, 1) === arr.slice(1), immune to later tampering.
  const uncurry = (fn) => FnBind.call(FnCall, fn);

  const P = {
    native,
    uncurry,
    // Raw native functions, captured so that nothing reaches them through `native` later.
    n_log: native.log, n_nowMs: native.nowMs, n_randomBytes: native.randomBytes,
    n_toolCall: native.toolCall, n_fetch: native.fetch, n_mcp: native.mcp,
    n_digest: native.digest, n_hmac: native.hmac,
    n_utf8Encode: native.utf8Encode, n_utf8Decode: native.utf8Decode,

    ReflectApply: Reflect.apply,
    ReflectOwnKeys: Reflect.ownKeys,
    JSONStringify: JSON.stringify,
    JSONParse: JSON.parse,
    ObjectKeys: Object.keys,
    ObjectCreate: Object.create,
    ObjectAssign: Object.assign,
    ObjectFreeze: Object.freeze,
    ObjectDefineProperty: Object.defineProperty,
    ObjectGetPrototypeOf: Object.getPrototypeOf,
    ObjectGetOwnPropertyDescriptor: Object.getOwnPropertyDescriptor,
    ObjectGetOwnPropertyNames: Object.getOwnPropertyNames,
    ObjectIsFrozen: Object.isFrozen,
    hasOwn: uncurry(Object.prototype.hasOwnProperty),
    ObjectToString: uncurry(Object.prototype.toString),
    ArrayIsArray: Array.isArray,
    ArraySlice: uncurry(Array.prototype.slice),
    ArrayJoin: uncurry(Array.prototype.join),
    StringCtor: String,
    NumberCtor: Number,
    StringSlice: uncurry(String.prototype.slice),
    StringIndexOf: uncurry(String.prototype.indexOf),
    StringLastIndexOf: uncurry(String.prototype.lastIndexOf),
    StringCharCodeAt: uncurry(String.prototype.charCodeAt),
    StringToLowerCase: uncurry(String.prototype.toLowerCase),
    StringFromCharCode: String.fromCharCode,
    MathFloor: Math.floor,
    MathMax: Math.max,
    MathMin: Math.min,
    Promise,
    PromiseResolve: FnBind.call(Promise.resolve, Promise),
    PromiseReject: FnBind.call(Promise.reject, Promise),
    PromiseThen: uncurry(Promise.prototype.then),
    Error, TypeError, RangeError, EvalError,
    ErrorCaptureStack: null,
    Map,
    MapGet: uncurry(Map.prototype.get),
    MapSet: uncurry(Map.prototype.set),
    MapHas: uncurry(Map.prototype.has),
    MapDelete: uncurry(Map.prototype.delete),
    MapClear: uncurry(Map.prototype.clear),
    MapForEach: uncurry(Map.prototype.forEach),
    Uint8Array,
    ArrayBuffer,
    U8Slice: uncurry(Uint8Array.prototype.slice),
    U8Set: uncurry(Uint8Array.prototype.set),
    ABSlice: uncurry(ArrayBuffer.prototype.slice),
    // TypedArray getters (the %TypedArray%.prototype accessors), immune to shadowing.
    TA_length: uncurry(Object.getOwnPropertyDescriptor(Object.getPrototypeOf(Uint8Array.prototype), 'length').get),
    TA_buffer: uncurry(Object.getOwnPropertyDescriptor(Object.getPrototypeOf(Uint8Array.prototype), 'buffer').get),
    TA_byteOffset: uncurry(Object.getOwnPropertyDescriptor(Object.getPrototypeOf(Uint8Array.prototype), 'byteOffset').get),
    TA_byteLength: uncurry(Object.getOwnPropertyDescriptor(Object.getPrototypeOf(Uint8Array.prototype), 'byteLength').get),
    isView: ArrayBuffer.isView,
  };

  /** Defines an own data property without going through [[Set]] (no setters on prototypes are hit). */
  P.put = function put(obj, key, value) {
    P.ObjectDefineProperty(obj, key, { value, writable: true, enumerable: true, configurable: true });
    return obj;
  };
  /** Appends to an array without Array.prototype.push or [[Set]]. */
  P.append = function append(arr, value) { return P.put(arr, arr.length, value); };
  /** Own property read: undefined when the property is not own (prototype pollution cannot leak in). */
  P.own = function own(obj, key) {
    if (obj === null || (typeof obj !== 'object' && typeof obj !== 'function')) return undefined;
    return P.hasOwn(obj, key) ? obj[key] : undefined;
  };
  /** Error with a `.code` (and optional `.details`), built with captured constructors. */
  P.codedError = function codedError(code, message, details, Ctor) {
    const e = new (Ctor || P.Error)(message);
    P.put(e, 'code', code);
    if (details !== undefined) P.put(e, 'details', details);
    return e;
  };
  /** A host error's details: the host sends JSON text; the pack gets the
   * object (a node that rethrows the error must fail with object details).
   * Undefined when absent or not JSON. */
  P.hostDetails = function hostDetails(err) {
    const d = P.own(err, 'details');
    if (d === undefined || d === null) return undefined;
    if (typeof d !== 'string') return d;
    try { return P.JSONParse(d); } catch (_) { return undefined; }
  };
  /** JSON.stringify that never throws: returns undefined on failure (cycles, BigInt, throwing getters). */
  P.safeStringify = function safeStringify(v) {
    try { return P.JSONStringify(v); } catch (_) { return undefined; }
  };
  /** Converts a Uint8Array-like to a plain Uint8Array copy (detaches from subclasses). */
  P.toU8 = function toU8(v) {
    if (v instanceof P.Uint8Array) return new P.Uint8Array(P.TA_buffer(v), P.TA_byteOffset(v), P.TA_length(v));
    if (v instanceof P.ArrayBuffer) return new P.Uint8Array(v);
    if (P.isView(v)) return new P.Uint8Array(v.buffer, v.byteOffset, v.byteLength);
    throw new P.TypeError('expected a Uint8Array, ArrayBuffer or ArrayBufferView');
  };
  /** Host log (level 0..3). Never throws. */
  P.hostLog = function hostLog(level, message, fields) {
    let f;
    if (fields !== undefined) f = P.safeStringify(fields);
    try { P.ReflectApply(P.n_log, undefined, [level, P.StringCtor(message), f]); } catch (_) { /* logging never fails a node */ }
  };
  /** Defines a global: writable + configurable (as Node/web globals are), not enumerable. */
  P.defineGlobal = function defineGlobal(name, value) {
    P.ObjectDefineProperty(globalThis, name, { value, writable: true, enumerable: false, configurable: true });
  };

  P.ObjectDefineProperty(native, '__p', { value: P, writable: false, enumerable: false, configurable: true });
})();
