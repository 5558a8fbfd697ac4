/*
 * prelude_harden.js — LAST prelude file. Removes code generation from strings,
 * freezes the objects the prelude installed, publishes the small internal
 * surface the node:* modules need, and deletes `globalThis.__wop`.
 */
(function () {
  'use strict';
  const native = globalThis.__wop;
  const P = native.__p;
  const define = P.ObjectDefineProperty;
  const MESSAGE = 'code generation from strings is disabled in this sandbox';

  /* 1. no eval */
  delete globalThis.eval;
  // quickjs-libc style globals, should the embedding ever add them.
  const hostish = ['std', 'os', 'print', 'scriptArgs', 'bjson', '__loadScript'];
  for (let i = 0; i < hostish.length; i++) delete globalThis[hostish[i]];

  /* 2. Function and the hidden constructors throw EvalError; `instanceof` keeps working. */
  function blockConstructor(Original, name, setGlobal) {
    const proto = Original.prototype;
    const Blocked = function () { throw new P.EvalError(MESSAGE); };
    define(Blocked, 'name', { value: name });
    define(Blocked, 'length', { value: 1 });
    define(Blocked, 'prototype', { value: proto, writable: false, enumerable: false, configurable: false });
    define(proto, 'constructor', { value: Blocked, writable: false, enumerable: false, configurable: false });
    P.ObjectFreeze(Blocked);
    if (setGlobal) define(globalThis, name, { value: Blocked, writable: false, enumerable: false, configurable: false });
  }
  const AsyncFunction = P.ObjectGetPrototypeOf(async function () {}).constructor;
  const GeneratorFunction = P.ObjectGetPrototypeOf(function* () {}).constructor;
  const AsyncGeneratorFunction = P.ObjectGetPrototypeOf(async function* () {}).constructor;
  blockConstructor(Function, 'Function', true);
  blockConstructor(AsyncFunction, 'AsyncFunction', false);
  blockConstructor(GeneratorFunction, 'GeneratorFunction', false);
  blockConstructor(AsyncGeneratorFunction, 'AsyncGeneratorFunction', false);

  /* 3. Freeze what the prelude installed (classes, prototypes, singletons), so a node
        cannot leave a trap for a later invocation in the same instance. ES intrinsics
        (Object.prototype, Array.prototype, JSON, Promise …) are left mutable to avoid
        the "override mistake" breaking ordinary pack code; the dispatcher, ctx and
        timers never read them at run time (they use primordials captured in
        prelude_intrinsics.js). */
  const names = ['TextEncoder', 'TextDecoder', 'Buffer', 'URL', 'URLSearchParams', 'crypto', 'console',
    'structuredClone', 'atob', 'btoa', 'setTimeout', 'setInterval', 'setImmediate', 'clearTimeout',
    'clearInterval', 'clearImmediate', 'queueMicrotask', 'fetch', 'process', 'performance'];
  const freezeDeep = (v) => {
    if (v === null || (typeof v !== 'object' && typeof v !== 'function') || P.ObjectIsFrozen(v)) return;
    P.ObjectFreeze(v);
    if (typeof v === 'function' && v.prototype) freezeDeep(v.prototype);
  };
  for (let i = 0; i < names.length; i++) freezeDeep(globalThis[names[i]]);
  for (let i = 0; i < P.classes.length; i++) freezeDeep(P.classes[i]);

  /* 4. The node:* modules' way in: only pure helpers (nothing that reaches toolCall,
        fetch or mcp), frozen, non-enumerable, non-configurable. */
  define(globalThis, Symbol.for('wop.internal'), {
    value: P.ObjectFreeze({
      digest: P.digest, hmac: P.hmac, randomBytes: P.randomBytes, randomUUID: P.randomUUID,
      Buffer: P.Buffer, toBuffer: P.toBuffer, toU8: P.toU8, enc: P.enc, webcrypto: P.webcrypto,
      codedError: P.codedError,
    }),
    writable: false, enumerable: false, configurable: false,
  });

  /* 5. Hide the native object. The Rust side keeps its own reference and reads
        setPack / hasHandler / dispatch / advanceTimers off it. */
  delete native.__p;
  delete globalThis.__wop;
})();
