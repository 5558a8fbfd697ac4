/*
 * prelude_fetch.js — Headers, Blob, File, FormData, Request, Response and
 * fetch() over the host's SSRF-guarded native fetch (synchronous; the
 * returned promise is already settled when fetch() returns).
 * Body kinds accepted: string, Uint8Array/ArrayBuffer/views, URLSearchParams,
 * FormData (multipart, string and Blob fields), Blob.
 * On a host err, fetch rejects with a TypeError carrying `.code`, `.details`
 * and `.cause` (Node's undici rejects with TypeError('fetch failed')).
 */
(function () {
  'use strict';
  const P = globalThis.__wop.__p;
  const E = P.enc;

  function normName(n) {
    n = String(n);
    if (!/^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/.test(n)) throw new TypeError('Invalid header name: ' + n);
    return n.toLowerCase();
  }
  function normValue(v) { return String(v).replace(/^[\t\n\r ]+|[\t\n\r ]+$/g, ''); }

  class Headers {
    constructor(init) {
      this._m = new Map(); // lowercased name -> [values]
      if (init === undefined || init === null) return;
      if (init instanceof Headers) { init.forEach((v, k) => this.append(k, v)); return; }
      if (typeof init[Symbol.iterator] === 'function') {
        for (const pair of init) {
          const p = Array.from(pair);
          if (p.length !== 2) throw new TypeError('Header pairs must contain exactly two items');
          this.append(p[0], p[1]);
        }
        return;
      }
      for (const k of Object.keys(init)) this.append(k, init[k]);
    }
    append(k, v) { k = normName(k); const l = this._m.get(k); if (l) l.push(normValue(v)); else this._m.set(k, [normValue(v)]); }
    set(k, v) { this._m.set(normName(k), [normValue(v)]); }
    get(k) { const l = this._m.get(normName(k)); return l ? l.join(', ') : null; }
    getSetCookie() { return (this._m.get('set-cookie') || []).slice(); }
    has(k) { return this._m.has(normName(k)); }
    delete(k) { this._m.delete(normName(k)); }
    forEach(cb, thisArg) { for (const [k, v] of this.entries()) cb.call(thisArg, v, k, this); }
    *entries() {
      const keys = Array.from(this._m.keys()).sort();
      for (const k of keys) {
        if (k === 'set-cookie') for (const v of this._m.get(k)) yield [k, v];
        else yield [k, this._m.get(k).join(', ')];
      }
    }
    *keys() { for (const [k] of this.entries()) yield k; }
    *values() { for (const [, v] of this.entries()) yield v; }
    [Symbol.iterator]() { return this.entries(); }
    get [Symbol.toStringTag]() { return 'Headers'; }
  }

  class Blob {
    constructor(parts, options) {
      const chunks = [];
      for (const p of parts || []) {
        if (p instanceof Blob) chunks.push(p._bytes);
        else if (typeof p === 'string') chunks.push(E.utf8Encode(p));
        else chunks.push(P.toU8(p));
      }
      this._bytes = P.Buffer.concat(chunks);
      this._type = options && options.type !== undefined ? String(options.type).toLowerCase() : '';
    }
    get size() { return this._bytes.length; }
    get type() { return this._type; }
    arrayBuffer() { const b = this._bytes; return Promise.resolve(P.ABSlice(P.TA_buffer(b), P.TA_byteOffset(b), P.TA_byteOffset(b) + b.length)); }
    bytes() { return Promise.resolve(new Uint8Array(P.U8Slice(this._bytes))); }
    text() { return Promise.resolve(E.utf8Decode(this._bytes)); }
    slice(start, end, type) { const b = new Blob([], { type }); b._bytes = P.Buffer.from(P.U8Slice(this._bytes, start, end)); return b; }
    get [Symbol.toStringTag]() { return 'Blob'; }
  }
  class File extends Blob {
    constructor(parts, name, options) { super(parts, options); this._name = String(name); this.lastModified = (options && options.lastModified) || 0; }
    get name() { return this._name; }
    get [Symbol.toStringTag]() { return 'File'; }
  }

  class FormData {
    constructor() { this._list = []; }
    _entry(name, value, filename) {
      name = String(name);
      if (value instanceof Blob) {
        const fname = filename !== undefined ? String(filename) : value instanceof File ? value.name : 'blob';
        if (!(value instanceof File) || filename !== undefined) { const f = new File([], fname, { type: value.type }); f._bytes = value._bytes; value = f; }
        return [name, value];
      }
      return [name, String(value)];
    }
    append(name, value, filename) { this._list.push(this._entry(name, value, filename)); }
    set(name, value, filename) {
      const e = this._entry(name, value, filename);
      const i = this._list.findIndex((x) => x[0] === e[0]);
      if (i < 0) this._list.push(e);
      else { this._list[i] = e; this._list = this._list.filter((x, j) => j <= i || x[0] !== e[0]); }
    }
    get(name) { const e = this._list.find((x) => x[0] === String(name)); return e ? e[1] : null; }
    getAll(name) { return this._list.filter((x) => x[0] === String(name)).map((x) => x[1]); }
    has(name) { return this._list.some((x) => x[0] === String(name)); }
    delete(name) { this._list = this._list.filter((x) => x[0] !== String(name)); }
    forEach(cb, thisArg) { for (const [k, v] of this._list.slice()) cb.call(thisArg, v, k, this); }
    *entries() { for (const e of this._list.slice()) yield [e[0], e[1]]; }
    *keys() { for (const e of this._list.slice()) yield e[0]; }
    *values() { for (const e of this._list.slice()) yield e[1]; }
    [Symbol.iterator]() { return this.entries(); }
    get [Symbol.toStringTag]() { return 'FormData'; }
  }
  function multipart(fd) {
    const rnd = P.randomBytes(12);
    const boundary = '----WopFormBoundary' + E.hexEncode(rnd);
    const esc = (s) => s.replace(/\r/g, '%0D').replace(/\n/g, '%0A').replace(/"/g, '%22');
    const parts = [];
    for (const [name, value] of fd._list) {
      let head = '--' + boundary + '\r\nContent-Disposition: form-data; name="' + esc(name) + '"';
      if (value instanceof File) {
        head += '; filename="' + esc(value.name) + '"\r\nContent-Type: ' + (value.type || 'application/octet-stream') + '\r\n\r\n';
        parts.push(E.utf8Encode(head), value._bytes, E.utf8Encode('\r\n'));
      } else {
        parts.push(E.utf8Encode(head + '\r\n\r\n' + value.replace(/\r?\n|\r/g, '\r\n') + '\r\n'));
      }
    }
    parts.push(E.utf8Encode('--' + boundary + '--\r\n'));
    return { bytes: P.Buffer.concat(parts), type: 'multipart/form-data; boundary=' + boundary };
  }

  // Extracts (bytes, default content-type) from a body init.
  function extractBody(body) {
    if (body === undefined || body === null) return { bytes: undefined, type: null };
    if (typeof body === 'string') return { bytes: E.utf8Encode(body), type: 'text/plain;charset=UTF-8' };
    if (body instanceof P.URLSearchParams) return { bytes: E.utf8Encode(body.toString()), type: 'application/x-www-form-urlencoded;charset=UTF-8' };
    if (body instanceof FormData) return multipart(body);
    if (body instanceof Blob) return { bytes: body._bytes, type: body.type || null };
    if (body instanceof P.ArrayBuffer || P.isView(body)) return { bytes: P.toU8(body), type: null };
    if (typeof body === 'object' && typeof body.getReader === 'function') throw new TypeError('streaming request bodies are not supported in this sandbox');
    return { bytes: E.utf8Encode(String(body)), type: 'text/plain;charset=UTF-8' };
  }

  class Body {
    _consume() {
      if (this._used) return Promise.reject(new TypeError('Body is unusable: Body has already been read'));
      this._used = true;
      return Promise.resolve(this._bytes || new Uint8Array(0));
    }
    get bodyUsed() { return !!this._used; }
    get body() {
      // Minimal ReadableStream-like: one chunk. Enough for `for await (const c of res.body)` and getReader().
      if (this._bytes === null || this._bytes === undefined) return null;
      const self = this;
      return {
        locked: false,
        getReader() {
          let done = false;
          return {
            read() {
              if (done || self._used) return Promise.resolve({ done: true, value: undefined });
              done = true; self._used = true;
              return Promise.resolve({ done: false, value: new Uint8Array(P.U8Slice(self._bytes)) });
            },
            releaseLock() {}, cancel() { done = true; return Promise.resolve(); },
          };
        },
        async *[Symbol.asyncIterator]() { const r = this.getReader(); for (;;) { const x = await r.read(); if (x.done) return; yield x.value; } },
        cancel() { self._used = true; return Promise.resolve(); },
      };
    }
    arrayBuffer() { return this._consume().then((b) => P.ABSlice(P.TA_buffer(b), P.TA_byteOffset(b), P.TA_byteOffset(b) + P.TA_length(b))); }
    bytes() { return this._consume().then((b) => new Uint8Array(P.U8Slice(b))); }
    text() { return this._consume().then((b) => E.utf8Decode(b)); }
    json() { return this.text().then((t) => JSON.parse(t)); }
    blob() { return this._consume().then((b) => { const x = new Blob([], { type: this.headers.get('content-type') || '' }); x._bytes = P.Buffer.from(b); return x; }); }
    formData() {
      return this.text().then((t) => {
        const ct = this.headers.get('content-type') || '';
        if (!/application\/x-www-form-urlencoded/i.test(ct)) throw new TypeError('formData(): only application/x-www-form-urlencoded bodies are supported');
        const fd = new FormData();
        for (const [k, v] of new P.URLSearchParams(t)) fd.append(k, v);
        return fd;
      });
    }
  }

  class Request extends Body {
    constructor(input, init) {
      super();
      init = init || {};
      if (input instanceof Request) {
        this._url = input._url; this._method = input._method; this._headers = new Headers(input._headers);
        this._bytes = input._bytes; this._signal = input._signal;
      } else {
        this._url = new P.URL(String(input)).href;
        this._method = 'GET'; this._headers = new Headers(); this._bytes = null; this._signal = null;
      }
      if (init.method !== undefined) {
        const m = String(init.method);
        this._method = /^(get|head|post|put|delete|options|patch)$/i.test(m) ? m.toUpperCase() : m;
      }
      if (init.headers !== undefined) this._headers = new Headers(init.headers);
      if (init.body !== undefined && init.body !== null) {
        if (this._method === 'GET' || this._method === 'HEAD') throw new TypeError('Request with GET/HEAD method cannot have body.');
        const b = extractBody(init.body);
        this._bytes = b.bytes;
        if (b.type && !this._headers.has('content-type')) this._headers.set('content-type', b.type);
      }
      if (init.signal !== undefined) this._signal = init.signal;
      this.redirect = init.redirect || 'follow';
    }
    get url() { return this._url; }
    get method() { return this._method; }
    get headers() { return this._headers; }
    get signal() { return this._signal || (this._signal = P.neverAbortSignal()); }
    clone() { return new Request(this); }
    get [Symbol.toStringTag]() { return 'Request'; }
  }

  const STATUS_TEXT = { 200: 'OK', 201: 'Created', 202: 'Accepted', 204: 'No Content', 301: 'Moved Permanently', 302: 'Found', 304: 'Not Modified', 400: 'Bad Request', 401: 'Unauthorized', 403: 'Forbidden', 404: 'Not Found', 409: 'Conflict', 422: 'Unprocessable Entity', 429: 'Too Many Requests', 500: 'Internal Server Error', 502: 'Bad Gateway', 503: 'Service Unavailable', 504: 'Gateway Timeout' };
  class Response extends Body {
    constructor(body, init) {
      super();
      init = init || {};
      this._status = init.status === undefined ? 200 : init.status | 0;
      if (this._status < 200 || this._status > 599) throw new RangeError('init["status"] must be in the range of 200 to 599, inclusive.');
      this._statusText = init.statusText === undefined ? (STATUS_TEXT[this._status] || '') : String(init.statusText);
      this._headers = new Headers(init.headers);
      const b = extractBody(body);
      this._bytes = b.bytes === undefined ? null : b.bytes;
      if (b.type && !this._headers.has('content-type')) this._headers.set('content-type', b.type);
      this._url = '';
      this._redirected = false;
      this.type = 'default';
    }
    static json(data, init) {
      const h = new Headers(init && init.headers);
      if (!h.has('content-type')) h.set('content-type', 'application/json');
      return new Response(JSON.stringify(data), Object.assign({}, init, { headers: h }));
    }
    static error() { const r = new Response(null, { status: 200 }); r._status = 0; r.type = 'error'; return r; }
    static redirect(url, status) { return new Response(null, { status: status || 302, headers: { location: new P.URL(String(url)).href } }); }
    get status() { return this._status; }
    get ok() { return this._status >= 200 && this._status <= 299; }
    get statusText() { return this._statusText; }
    get headers() { return this._headers; }
    get url() { return this._url; }
    get redirected() { return this._redirected; }
    clone() {
      if (this._used) throw new TypeError('Response.clone: Body has already been consumed.');
      const r = new Response(null, { status: this._status === 0 ? 200 : this._status, statusText: this._statusText, headers: this._headers });
      r._status = this._status; r._bytes = this._bytes; r._url = this._url; r.type = this.type;
      return r;
    }
    get [Symbol.toStringTag]() { return 'Response'; }
  }

  function fetchError(code, message, details) {
    const cause = P.codedError(code, message, details);
    const e = P.codedError(code, message, details, P.TypeError);
    P.put(e, 'cause', cause);
    return e;
  }

  function fetch(input, init) {
    try {
      const req = new Request(input, init);
      const sig = req._signal;
      if (sig && sig.aborted) return P.PromiseReject(sig.reason);
      // A pack's Idempotency-Key is the business key of the effect: the
      // host derives the effect's identity from it and sends the header
      // itself (safe-fetch refuses it as a plain header).
      const headers = [];
      for (const [k, v] of req.headers) if (k !== 'idempotency-key') headers.push([k, v]);
      let idem;
      const ik = req.headers.get('idempotency-key');
      if (ik !== null) idem = ik;
      const r = P.ReflectApply(P.n_fetch, undefined, [req.method, req.url, headers, req._bytes === null ? undefined : req._bytes, idem]);
      const err = P.own(r, 'err');
      if (err !== undefined) {
        return P.PromiseReject(fetchError(P.StringCtor(P.own(err, 'code') || 'fetch_failed'), P.StringCtor(P.own(err, 'message') || 'fetch failed'), P.hostDetails(err)));
      }
      const res = new Response(null, { status: 200, headers: P.own(r, 'headers') || [] });
      const status = P.NumberCtor(P.own(r, 'status'));
      res._status = status;
      res._statusText = STATUS_TEXT[status] || '';
      res._bytes = P.toU8(P.own(r, 'body') || new Uint8Array(0));
      res._url = req.url;
      res.type = 'basic';
      return P.PromiseResolve(res);
    } catch (e) {
      return P.PromiseReject(e);
    }
  }
  P.fetch = fetch;
  P.Headers = Headers;

  P.defineGlobal('Headers', Headers);
  P.defineGlobal('Blob', Blob);
  P.defineGlobal('File', File);
  P.defineGlobal('FormData', FormData);
  P.defineGlobal('Request', Request);
  P.defineGlobal('Response', Response);
  P.defineGlobal('fetch', fetch);
  P.classes.push(Headers, Blob, File, FormData, Body, Request, Response);
})();
