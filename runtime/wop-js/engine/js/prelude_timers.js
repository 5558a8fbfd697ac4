/*
 * prelude_timers.js — virtual timers, queueMicrotask, Event/EventTarget,
 * AbortController/AbortSignal.
 *
 * Time is virtual: a timer fires only when the Rust driver finds the job
 * queue empty and calls `advanceTimers()` (installed on the native object by
 * prelude_dispatch.js from P.timers.advance). Timers fire in (deadline, creation)
 * order; the virtual clock jumps to the fired timer's deadline. `Date.now()`
 * stays the host clock. Timer state is reset by the dispatcher at the start
 * and end of every invocation.
 */
(function () {
  'use strict';
  const P = globalThis.__wop.__p;
  const timers = new P.Map(); // id -> {deadline, seq, interval, fn, args}
  let nextId = 1;
  let seq = 0;
  let virtualNow = 0;

  function toDelay(ms) {
    const n = P.NumberCtor(ms);
    return n > 0 && n < 2147483648 ? P.MathFloor(n) : 0; // Node: out of range → 1ms; same order here
  }
  function add(fn, ms, args, repeat) {
    if (typeof fn !== 'function') throw P.codedError('ERR_INVALID_ARG_TYPE', 'The "callback" argument must be of type function', undefined, P.TypeError);
    const id = nextId++;
    const delay = toDelay(ms);
    P.MapSet(timers, id, { deadline: virtualNow + delay, seq: seq++, interval: repeat ? P.MathMax(1, delay) : -1, fn, args });
    return id;
  }
  // Node returns Timeout objects; numbers are fine for the registry (clearTimeout(t) only).
  function idOf(t) { return typeof t === 'object' && t !== null && typeof t._id === 'number' ? t._id : t; }
  function clear(t) { P.MapDelete(timers, idOf(t)); }

  /** Fires the earliest timer; returns false when none is pending. */
  function advance() {
    let best = null, bestId = 0;
    P.MapForEach(timers, (t, id) => {
      if (best === null || t.deadline < best.deadline || (t.deadline === best.deadline && t.seq < best.seq)) { best = t; bestId = id; }
    });
    if (best === null) return false;
    if (best.deadline > virtualNow) virtualNow = best.deadline;
    if (best.interval >= 0) { best.deadline = virtualNow + best.interval; best.seq = seq++; }
    else P.MapDelete(timers, bestId);
    try { P.ReflectApply(best.fn, undefined, best.args); } catch (e) {
      // Node would crash the process on an uncaught timer error; we log and go on
      // (the node sees its own failure through its promise chain).
      P.hostLog(3, 'uncaught exception in timer callback: ' + describe(e));
    }
    return true;
  }
  function describe(e) {
    try { return e && typeof e === 'object' && 'message' in e ? P.StringCtor(e.message) : P.StringCtor(e); } catch (_) { return '(unprintable)'; }
  }
  function reset() { P.MapClear(timers); virtualNow = 0; }
  P.timers = P.ObjectFreeze({ advance, reset, now: () => virtualNow, add, clear });

  P.defineGlobal('setTimeout', function setTimeout(fn, ms, ...args) { return add(fn, ms, args, false); });
  P.defineGlobal('setInterval', function setInterval(fn, ms, ...args) { return add(fn, ms, args, true); });
  P.defineGlobal('setImmediate', function setImmediate(fn, ...args) { return add(fn, 0, args, false); });
  P.defineGlobal('clearTimeout', function clearTimeout(t) { clear(t); });
  P.defineGlobal('clearInterval', function clearInterval(t) { clear(t); });
  P.defineGlobal('clearImmediate', function clearImmediate(t) { clear(t); });
  P.defineGlobal('queueMicrotask', function queueMicrotask(fn) {
    if (typeof fn !== 'function') throw new P.TypeError('queueMicrotask: callback must be a function');
    P.PromiseThen(P.PromiseResolve(), () => {
      try { fn(); } catch (e) { P.hostLog(3, 'uncaught exception in microtask: ' + describe(e)); }
    });
  });

  /* ---- Event / EventTarget (minimal) ---- */
  class Event {
    constructor(type, init) {
      this.type = String(type);
      this.bubbles = !!(init && init.bubbles);
      this.cancelable = !!(init && init.cancelable);
      this.defaultPrevented = false;
      this.target = null;
      this.currentTarget = null;
      this.timeStamp = virtualNow;
    }
    preventDefault() { if (this.cancelable) this.defaultPrevented = true; }
    stopPropagation() {}
    stopImmediatePropagation() { this._stop = true; }
  }
  class EventTarget {
    constructor() { P.ObjectDefineProperty(this, '_listeners', { value: new P.Map(), writable: false, enumerable: false }); }
    addEventListener(type, listener, options) {
      if (listener === null || listener === undefined) return;
      type = String(type);
      let list = P.MapGet(this._listeners, type);
      if (!list) { list = []; P.MapSet(this._listeners, type, list); }
      if (list.some((l) => l.listener === listener)) return;
      const once = typeof options === 'object' && options !== null && !!options.once;
      list.push({ listener, once });
      const sig = typeof options === 'object' && options !== null ? options.signal : undefined;
      if (sig && typeof sig.addEventListener === 'function') sig.addEventListener('abort', () => this.removeEventListener(type, listener), { once: true });
    }
    removeEventListener(type, listener) {
      const list = P.MapGet(this._listeners, String(type));
      if (!list) return;
      const i = list.findIndex((l) => l.listener === listener);
      if (i >= 0) list.splice(i, 1);
    }
    dispatchEvent(event) {
      event.target = this; event.currentTarget = this;
      const list = P.MapGet(this._listeners, event.type);
      const handlerProp = this['on' + event.type];
      const all = list ? list.slice() : [];
      if (typeof handlerProp === 'function') all.unshift({ listener: handlerProp, once: false });
      for (const l of all) {
        if (l.once) this.removeEventListener(event.type, l.listener);
        try {
          if (typeof l.listener === 'function') l.listener.call(this, event);
          else if (l.listener && typeof l.listener.handleEvent === 'function') l.listener.handleEvent(event);
        } catch (e) { P.hostLog(3, 'uncaught exception in event listener: ' + describe(e)); }
        if (event._stop) break;
      }
      return !event.defaultPrevented;
    }
  }

  /* ---- AbortController / AbortSignal ---- */
  function domException(message, name) {
    const e = new P.Error(message);
    P.put(e, 'name', name);
    P.put(e, 'code', name === 'AbortError' ? 20 : name === 'TimeoutError' ? 23 : 0);
    return e;
  }
  const kCreate = {};
  class AbortSignal extends EventTarget {
    constructor(key) {
      if (key !== kCreate) throw new P.TypeError('Illegal constructor');
      super();
      this._aborted = false;
      this._reason = undefined;
      this.onabort = null;
    }
    get aborted() { return this._aborted; }
    get reason() { return this._reason; }
    throwIfAborted() { if (this._aborted) throw this._reason; }
    static abort(reason) { const s = new AbortSignal(kCreate); signalAbort(s, reason === undefined ? domException('This operation was aborted', 'AbortError') : reason); return s; }
    static timeout(ms) {
      const s = new AbortSignal(kCreate);
      add(() => signalAbort(s, domException('The operation was aborted due to timeout', 'TimeoutError')), ms, [], false);
      return s;
    }
    static any(signals) {
      const s = new AbortSignal(kCreate);
      for (const x of signals) {
        if (x.aborted) { signalAbort(s, x.reason); return s; }
      }
      for (const x of signals) x.addEventListener('abort', () => signalAbort(s, x.reason), { once: true });
      return s;
    }
  }
  function signalAbort(s, reason) {
    if (s._aborted) return;
    s._aborted = true;
    s._reason = reason;
    s.dispatchEvent(new Event('abort'));
  }
  class AbortController {
    constructor() { this._signal = new AbortSignal(kCreate); }
    get signal() { return this._signal; }
    abort(reason) { signalAbort(this._signal, reason === undefined ? domException('This operation was aborted', 'AbortError') : reason); }
  }
  /** A signal that never aborts (ctx.signal: the host cancels by dropping the instance). */
  P.neverAbortSignal = () => new AbortSignal(kCreate);
  P.domException = domException;

  P.defineGlobal('Event', Event);
  P.defineGlobal('EventTarget', EventTarget);
  P.defineGlobal('AbortSignal', AbortSignal);
  P.defineGlobal('AbortController', AbortController);
  P.classes = [Event, EventTarget, AbortSignal, AbortController];
})();
