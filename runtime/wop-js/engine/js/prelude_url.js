/*
 * prelude_url.js — URL and URLSearchParams (WHATWG-ish).
 * Good for http(s)/ws(s)/ftp/file URLs with userinfo, port, query and hash,
 * relative resolution against a base, and opaque URLs (mailto:, data:, urn:).
 * Not implemented: IDNA/punycode hosts (non-ASCII hosts are percent-encoded
 * and rejected), IPv4 number normalisation (e.g. 0x7f.1).
 */
(function () {
  'use strict';
  const P = globalThis.__wop.__p;
  const SPECIAL = { 'http:': '80', 'https:': '443', 'ws:': '80', 'wss:': '443', 'ftp:': '21', 'file:': '' };
  const isSpecial = (p) => P.hasOwn(SPECIAL, p);

  function invalid(input) { return P.codedError('ERR_INVALID_URL', 'Invalid URL: ' + input, undefined, P.TypeError); }

  // Percent-encodes characters outside the given "keep" set (plus controls, space, non-ASCII).
  function pctEncode(s, extra) {
    const bytes = P.enc.utf8Encode(s);
    let out = '';
    for (let i = 0; i < bytes.length; i++) {
      const b = bytes[i];
      const ch = String.fromCharCode(b);
      if (b <= 0x20 || b >= 0x7f || P.StringIndexOf(extra, ch) >= 0) {
        out += '%' + (b < 16 ? '0' : '') + b.toString(16).toUpperCase();
      } else out += ch;
    }
    return out;
  }
  const PATH_SET = '"#<>?`{}';
  const QUERY_SET = '"#<>';
  const SPECIAL_QUERY_SET = '"#<>\'';
  const FRAGMENT_SET = '"<>`';
  const USERINFO_SET = '"#<>?`{}/:;=@[\\]^|';

  function parseHost(h, special) {
    if (h === '') { if (special) return null; return ''; }
    if (h[0] === '[') { return h[h.length - 1] === ']' ? P.StringToLowerCase(h) : null; }
    let d;
    try { d = decodeURIComponent(h); } catch (_) { return null; }
    if (!special) return pctEncode(h, '');
    d = P.StringToLowerCase(d);
    if (/[\u0000-\u0020#%/:<>?@[\\\]^|\u007f]/.test(d)) return null;
    if (/[^\u0000-\u007f]/.test(d)) return null; // IDNA not supported
    return d;
  }

  function normalizePath(segments, special) {
    const out = [];
    for (let i = 0; i < segments.length; i++) {
      const s = segments[i];
      const low = P.StringToLowerCase(s);
      const isLast = i === segments.length - 1;
      if (s === '..' || low === '.%2e' || low === '%2e.' || low === '%2e%2e') {
        if (out.length) out.pop();
        if (isLast) out.push('');
      } else if (s === '.' || low === '%2e') {
        if (isLast) out.push('');
      } else out.push(s);
    }
    return out;
  }

  // Parses `input` (optionally against a parsed base record) into a record.
  function parse(input, base) {
    let s = P.StringCtor(input).replace(/^[\u0000-\u0020]+|[\u0000-\u0020]+$/g, '').replace(/[\t\n\r]/g, '');
    const r = { protocol: '', username: '', password: '', hostname: '', port: '', path: [], opaque: null, query: null, fragment: null };
    const hashAt = s.indexOf('#');
    if (hashAt >= 0) { r.fragment = pctEncode(s.slice(hashAt + 1), FRAGMENT_SET); s = s.slice(0, hashAt); }
    const m = /^([a-zA-Z][a-zA-Z0-9+.-]*):/.exec(s);
    let rest;
    if (m) {
      r.protocol = P.StringToLowerCase(m[1]) + ':';
      rest = s.slice(m[0].length);
      if (isSpecial(r.protocol)) {
        rest = rest.replace(/\\/g, '/');
        if (base && base.protocol === r.protocol && rest[0] !== '/') return resolveRelative(rest, base, r);
        rest = rest.replace(/^\/*/, '//');
      } else if (rest[0] !== '/') {
        // Opaque path: mailto:x, data:..., urn:...
        const q = rest.indexOf('?');
        if (q >= 0) { r.query = pctEncode(rest.slice(q + 1), QUERY_SET); rest = rest.slice(0, q); }
        r.opaque = pctEncode(rest, '');
        return r;
      }
    } else {
      if (!base) throw invalid(input);
      if (base.opaque !== null) {
        if (s === '' && hashAt >= 0) { const c = copy(base); c.fragment = r.fragment; return c; }
        throw invalid(input);
      }
      r.protocol = base.protocol;
      rest = isSpecial(r.protocol) ? s.replace(/\\/g, '/') : s;
      return resolveRelative(rest, base, r);
    }
    return parseAuthorityAndPath(rest, r, input);
  }

  function copy(b) { return { protocol: b.protocol, username: b.username, password: b.password, hostname: b.hostname, port: b.port, path: b.path.slice(), opaque: b.opaque, query: b.query, fragment: b.fragment }; }

  function parseAuthorityAndPath(rest, r, input) {
    const special = isSpecial(r.protocol);
    if (rest.slice(0, 2) === '//') {
      rest = rest.slice(2);
      const end = rest.search(special ? /[/?]/ : /[/?]/);
      let auth = end >= 0 ? rest.slice(0, end) : rest;
      rest = end >= 0 ? rest.slice(end) : '';
      const at = auth.lastIndexOf('@');
      if (at >= 0) {
        const cred = auth.slice(0, at); auth = auth.slice(at + 1);
        const c = cred.indexOf(':');
        r.username = pctEncode(c >= 0 ? cred.slice(0, c) : cred, USERINFO_SET);
        r.password = c >= 0 ? pctEncode(cred.slice(c + 1), USERINFO_SET) : '';
      }
      const pm = /:(\d*)$/.exec(auth);
      if (pm && auth[0] !== '[' || (pm && auth.lastIndexOf(']') < pm.index)) {
        auth = auth.slice(0, pm.index);
        if (pm[1] !== '') {
          const n = P.NumberCtor(pm[1]);
          if (n > 65535) throw invalid(input);
          r.port = P.StringCtor(n) === SPECIAL[r.protocol] ? '' : P.StringCtor(n);
        }
      } else if (/:/.test(auth) && auth[0] !== '[') throw invalid(input);
      const host = parseHost(auth, special && r.protocol !== 'file:');
      if (host === null) throw invalid(input);
      r.hostname = host;
    } else if (special && r.protocol !== 'file:') throw invalid(input);
    return parsePathQuery(rest, r);
  }

  function parsePathQuery(rest, r) {
    const special = isSpecial(r.protocol);
    const q = rest.indexOf('?');
    if (q >= 0) { r.query = pctEncode(rest.slice(q + 1), special ? SPECIAL_QUERY_SET : QUERY_SET); rest = rest.slice(0, q); }
    if (rest === '') { r.path = special ? [''] : []; return r; }
    const segs = rest.split('/');
    if (segs[0] === '') segs.shift();
    r.path = normalizePath(segs.map((x) => pctEncode(x, PATH_SET)), special);
    return r;
  }

  function resolveRelative(rest, base, r) {
    if (rest.slice(0, 2) === '//') return parseAuthorityAndPath(rest, r, rest);
    r.username = base.username; r.password = base.password; r.hostname = base.hostname; r.port = base.port;
    if (rest === '') { r.path = base.path.slice(); r.query = base.query; return r; }
    if (rest[0] === '?') { r.path = base.path.slice(); r.query = pctEncode(rest.slice(1), isSpecial(r.protocol) ? SPECIAL_QUERY_SET : QUERY_SET); return r; }
    if (rest[0] === '/') return parsePathQuery(rest, r);
    // Merge with the base path minus its last segment.
    const dir = base.path.slice(0, -1);
    const q = rest.indexOf('?');
    const pathPart = q >= 0 ? rest.slice(0, q) : rest;
    if (q >= 0) r.query = pctEncode(rest.slice(q + 1), isSpecial(r.protocol) ? SPECIAL_QUERY_SET : QUERY_SET);
    r.path = normalizePath(dir.concat(pathPart.split('/').map((x) => pctEncode(x, PATH_SET))), true);
    return r;
  }

  /* ---- URLSearchParams ---- */
  function formEncode(s) {
    return pctEncode(P.StringCtor(s), '!"#$%&\'()+,/:;<=>?@[\\]^`{|}~').replace(/%20/g, '+');
  }
  function formDecode(s) {
    s = s.replace(/\+/g, ' ');
    try { return decodeURIComponent(s); } catch (_) {
      return s.replace(/%([0-9a-fA-F]{2})/g, (_m, h) => String.fromCharCode(parseInt(h, 16)));
    }
  }
  class URLSearchParams {
    constructor(init) {
      this._list = [];
      this._url = null;
      if (init === undefined || init === null) return;
      if (typeof init === 'object' || typeof init === 'function') {
        if (typeof init[Symbol.iterator] === 'function') {
          for (const pair of init) {
            const p = Array.from(pair);
            if (p.length !== 2) throw new TypeError('Each query pair must be an iterable [name, value] tuple');
            this._list.push([String(p[0]), String(p[1])]);
          }
        } else {
          for (const k of Object.keys(init)) this._list.push([k, String(init[k])]);
        }
      } else this._parse(String(init));
    }
    _parse(s) {
      this._list = [];
      if (s[0] === '?') s = s.slice(1);
      for (const part of s.split('&')) {
        if (part === '') continue;
        const eq = part.indexOf('=');
        this._list.push(eq >= 0 ? [formDecode(part.slice(0, eq)), formDecode(part.slice(eq + 1))] : [formDecode(part), '']);
      }
    }
    _update() { if (this._url) { const s = this.toString(); this._url._r.query = s === '' ? null : s; } }
    get size() { return this._list.length; }
    append(k, v) { this._list.push([String(k), String(v)]); this._update(); }
    delete(k, v) { k = String(k); this._list = this._list.filter((p) => !(p[0] === k && (v === undefined || p[1] === String(v)))); this._update(); }
    get(k) { k = String(k); const p = this._list.find((x) => x[0] === k); return p ? p[1] : null; }
    getAll(k) { k = String(k); return this._list.filter((x) => x[0] === k).map((x) => x[1]); }
    has(k, v) { k = String(k); return this._list.some((x) => x[0] === k && (v === undefined || x[1] === String(v))); }
    set(k, v) {
      k = String(k); v = String(v);
      const i = this._list.findIndex((x) => x[0] === k);
      if (i < 0) this._list.push([k, v]);
      else { this._list[i][1] = v; this._list = this._list.filter((x, j) => j <= i || x[0] !== k); }
      this._update();
    }
    sort() { this._list = this._list.map((x, i) => [x, i]).sort((a, b) => (a[0][0] < b[0][0] ? -1 : a[0][0] > b[0][0] ? 1 : a[1] - b[1])).map((x) => x[0]); this._update(); }
    forEach(cb, thisArg) { for (const [k, v] of this._list.slice()) cb.call(thisArg, v, k, this); }
    keys() { return this._list.map((x) => x[0])[Symbol.iterator](); }
    values() { return this._list.map((x) => x[1])[Symbol.iterator](); }
    entries() { return this._list.map((x) => [x[0], x[1]])[Symbol.iterator](); }
    [Symbol.iterator]() { return this.entries(); }
    toString() { return this._list.map((x) => formEncode(x[0]) + '=' + formEncode(x[1])).join('&'); }
    get [Symbol.toStringTag]() { return 'URLSearchParams'; }
  }

  /* ---- URL ---- */
  function serialize(r, excludeFragment) {
    let out = r.protocol;
    if (r.opaque !== null) out += r.opaque;
    else {
      if (r.hostname !== '' || r.protocol === 'file:' || isSpecial(r.protocol)) {
        out += '//';
        if (r.username !== '' || r.password !== '') out += r.username + (r.password !== '' ? ':' + r.password : '') + '@';
        out += r.hostname + (r.port !== '' ? ':' + r.port : '');
      }
      out += pathString(r);
    }
    if (r.query !== null) out += '?' + r.query;
    if (!excludeFragment && r.fragment !== null) out += '#' + r.fragment;
    return out;
  }
  function pathString(r) { return r.opaque !== null ? r.opaque : (r.path.length ? '/' + r.path.join('/') : ''); }

  class URL {
    constructor(url, base) {
      let b = null;
      if (base !== undefined) b = (base instanceof URL ? base : new URL(String(base)))._r;
      this._r = parse(url instanceof URL ? url.href : String(url), b);
      this._sp = null;
    }
    static canParse(url, base) { try { new URL(url, base); return true; } catch (_) { return false; } }
    static parse(url, base) { try { return new URL(url, base); } catch (_) { return null; } }
    get href() { return serialize(this._r, false); }
    set href(v) { this._r = parse(String(v), null); if (this._sp) this._sp._parse(this._r.query || ''); }
    get origin() {
      const p = this._r.protocol;
      if (p === 'http:' || p === 'https:' || p === 'ws:' || p === 'wss:' || p === 'ftp:') return p + '//' + this.host;
      return 'null';
    }
    get protocol() { return this._r.protocol; }
    set protocol(v) {
      v = String(v).replace(/:.*$/, '').toLowerCase() + ':';
      if (/^[a-z][a-z0-9+.-]*:$/.test(v) && isSpecial(v) === isSpecial(this._r.protocol)) {
        this._r.protocol = v;
        if (this._r.port === SPECIAL[v]) this._r.port = '';
      }
    }
    get username() { return this._r.username; }
    set username(v) { this._r.username = pctEncode(String(v), USERINFO_SET); }
    get password() { return this._r.password; }
    set password(v) { this._r.password = pctEncode(String(v), USERINFO_SET); }
    get host() { return this._r.hostname + (this._r.port !== '' ? ':' + this._r.port : ''); }
    set host(v) {
      const m = /^([^:/?#]*|\[[^\]]*\])(?::(\d*))?/.exec(String(v));
      const h = parseHost(m[1], isSpecial(this._r.protocol));
      if (h === null || h === '') return;
      this._r.hostname = h;
      if (m[2] !== undefined && m[2] !== '') this.port = m[2];
    }
    get hostname() { return this._r.hostname; }
    set hostname(v) { const h = parseHost(String(v), isSpecial(this._r.protocol)); if (h !== null && h !== '') this._r.hostname = h; }
    get port() { return this._r.port; }
    set port(v) {
      v = String(v);
      if (v === '') { this._r.port = ''; return; }
      const m = /^\d+/.exec(v);
      if (!m || Number(m[0]) > 65535) return;
      const n = String(Number(m[0]));
      this._r.port = n === SPECIAL[this._r.protocol] ? '' : n;
    }
    get pathname() { return pathString(this._r); }
    set pathname(v) {
      if (this._r.opaque !== null) return;
      let s = String(v);
      if (isSpecial(this._r.protocol)) s = s.replace(/\\/g, '/');
      const segs = s.split('/');
      if (segs[0] === '') segs.shift();
      this._r.path = normalizePath(segs.map((x) => pctEncode(x, PATH_SET)), true);
    }
    get search() { return this._r.query === null || this._r.query === '' ? '' : '?' + this._r.query; }
    set search(v) {
      let s = String(v);
      if (s[0] === '?') s = s.slice(1);
      this._r.query = s === '' ? null : pctEncode(s, isSpecial(this._r.protocol) ? SPECIAL_QUERY_SET : QUERY_SET);
      if (this._sp) this._sp._parse(s);
    }
    get searchParams() {
      if (!this._sp) { this._sp = new URLSearchParams(this._r.query || ''); this._sp._url = this; }
      return this._sp;
    }
    get hash() { return this._r.fragment === null || this._r.fragment === '' ? '' : '#' + this._r.fragment; }
    set hash(v) { let s = String(v); if (s[0] === '#') s = s.slice(1); this._r.fragment = s === '' ? null : pctEncode(s, FRAGMENT_SET); }
    toString() { return this.href; }
    toJSON() { return this.href; }
    get [Symbol.toStringTag]() { return 'URL'; }
  }
  P.URL = URL;
  P.URLSearchParams = URLSearchParams;
  P.defineGlobal('URL', URL);
  P.defineGlobal('URLSearchParams', URLSearchParams);
})();
