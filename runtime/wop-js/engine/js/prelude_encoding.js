/*
 * prelude_encoding.js — TextEncoder/TextDecoder (utf-8), atob/btoa, Buffer.
 * Byte<->string codecs (utf8, hex, base64, base64url, latin1) are exposed to
 * later files as P.enc.
 */
(function () {
  'use strict';
  const P = globalThis.__wop.__p;
  const U8 = P.Uint8Array;
  const fromCharCode = P.StringFromCharCode;
  const charCodeAt = P.StringCharCodeAt;

  const B64 = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/';
  const B64URL = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';
  const B64REV = new U8(128).fill(255);
  for (let i = 0; i < 64; i++) { B64REV[charCodeAt(B64, i)] = i; }
  B64REV[45] = 62; B64REV[95] = 63; // '-' and '_' (base64url) decode too, as in Node

  function utf8Encode(s) { return P.ReflectApply(P.n_utf8Encode, undefined, [P.StringCtor(s)]); }
  function utf8Decode(u8) { return P.ReflectApply(P.n_utf8Decode, undefined, [P.toU8(u8)]); }

  // Builds a string from char codes in chunks (avoids huge argument lists).
  function codesToString(bytes, start, end) {
    let out = '';
    for (let i = start; i < end; i += 8192) {
      const n = P.MathMin(end, i + 8192);
      let chunk = '';
      for (let j = i; j < n; j++) chunk += fromCharCode(bytes[j]);
      out += chunk;
    }
    return out;
  }

  function base64Encode(bytes, url) {
    const T = url ? B64URL : B64;
    const n = bytes.length;
    let out = '';
    let i = 0;
    for (; i + 2 < n; i += 3) {
      const v = (bytes[i] << 16) | (bytes[i + 1] << 8) | bytes[i + 2];
      out += T[v >> 18] + T[(v >> 12) & 63] + T[(v >> 6) & 63] + T[v & 63];
    }
    if (i < n) {
      const v = (bytes[i] << 16) | ((i + 1 < n ? bytes[i + 1] : 0) << 8);
      out += T[v >> 18] + T[(v >> 12) & 63];
      if (i + 1 < n) out += T[(v >> 6) & 63]; else if (!url) out += '=';
      if (!url) out += '=';
    }
    return out;
  }
  // Lenient decoder (Node semantics): skips whitespace/invalid chars, stops at '='.
  function base64Decode(s) {
    s = P.StringCtor(s);
    const out = new U8(((s.length * 3) >> 2) + 3);
    let acc = 0, bits = 0, o = 0;
    for (let i = 0; i < s.length; i++) {
      const c = charCodeAt(s, i);
      if (c === 61) break; // '='
      const v = c < 128 ? B64REV[c] : 255;
      if (v === 255) continue;
      acc = (acc << 6) | v; bits += 6;
      if (bits >= 8) { bits -= 8; out[o++] = (acc >> bits) & 255; }
    }
    return P.U8Slice(out, 0, o);
  }
  const HEX = '0123456789abcdef';
  function hexEncode(bytes) {
    let out = '';
    for (let i = 0; i < bytes.length; i++) out += HEX[bytes[i] >> 4] + HEX[bytes[i] & 15];
    return out;
  }
  function hexVal(c) {
    if (c >= 48 && c <= 57) return c - 48;
    if (c >= 97 && c <= 102) return c - 87;
    if (c >= 65 && c <= 70) return c - 55;
    return -1;
  }
  // Node semantics: decoding stops at the first invalid pair.
  function hexDecode(s) {
    s = P.StringCtor(s);
    const n = s.length >> 1;
    const out = new U8(n);
    let o = 0;
    for (; o < n; o++) {
      const hi = hexVal(charCodeAt(s, 2 * o)), lo = hexVal(charCodeAt(s, 2 * o + 1));
      if (hi < 0 || lo < 0) break;
      out[o] = (hi << 4) | lo;
    }
    return o === n ? out : P.U8Slice(out, 0, o);
  }
  function latin1Encode(s) {
    s = P.StringCtor(s);
    const out = new U8(s.length);
    for (let i = 0; i < s.length; i++) out[i] = charCodeAt(s, i) & 255;
    return out;
  }
  function normEnc(enc) {
    const e = enc === undefined || enc === null ? 'utf8' : P.StringToLowerCase(P.StringCtor(enc));
    switch (e) {
      case 'utf8': case 'utf-8': return 'utf8';
      case 'hex': return 'hex';
      case 'base64': return 'base64';
      case 'base64url': return 'base64url';
      case 'latin1': case 'binary': return 'latin1';
      case 'ascii': return 'ascii';
      case 'ucs2': case 'ucs-2': case 'utf16le': case 'utf-16le': return 'utf16le';
      default: throw P.codedError('ERR_UNKNOWN_ENCODING', 'Unknown encoding: ' + e, undefined, P.TypeError);
    }
  }
  function encodeString(s, enc) {
    switch (normEnc(enc)) {
      case 'utf8': return utf8Encode(s);
      case 'hex': return hexDecode(s);
      case 'base64': case 'base64url': return base64Decode(s);
      case 'latin1': case 'ascii': return latin1Encode(s);
      case 'utf16le': {
        s = P.StringCtor(s);
        const out = new U8(s.length * 2);
        for (let i = 0; i < s.length; i++) { const c = charCodeAt(s, i); out[2 * i] = c & 255; out[2 * i + 1] = c >> 8; }
        return out;
      }
    }
  }
  function decodeBytes(bytes, enc) {
    switch (normEnc(enc)) {
      case 'utf8': return utf8Decode(bytes);
      case 'hex': return hexEncode(bytes);
      case 'base64': return base64Encode(bytes, false);
      case 'base64url': return base64Encode(bytes, true);
      case 'latin1': return codesToString(bytes, 0, bytes.length);
      case 'ascii': { let s = ''; for (let i = 0; i < bytes.length; i++) s += fromCharCode(bytes[i] & 127); return s; }
      case 'utf16le': { let s = ''; for (let i = 0; i + 1 < bytes.length; i += 2) s += fromCharCode(bytes[i] | (bytes[i + 1] << 8)); return s; }
    }
  }
  P.enc = P.ObjectFreeze({ utf8Encode, utf8Decode, base64Encode, base64Decode, hexEncode, hexDecode, encodeString, decodeBytes, normEnc });

  /* ---- TextEncoder / TextDecoder ---- */
  class TextEncoder {
    get encoding() { return 'utf-8'; }
    encode(input) { return utf8Encode(input === undefined ? '' : input); }
    encodeInto(src, dest) {
      const bytes = utf8Encode(src);
      const n = P.MathMin(bytes.length, dest.length);
      // Do not split a multi-byte sequence.
      let m = n;
      if (m < bytes.length) while (m > 0 && (bytes[m] & 0xc0) === 0x80) m--;
      dest.set(P.U8Slice(bytes, 0, m));
      return { read: utf8Decode(P.U8Slice(bytes, 0, m)).length, written: m };
    }
  }
  class TextDecoder {
    constructor(label, options) {
      const l = label === undefined ? 'utf-8' : P.StringToLowerCase(P.StringCtor(label));
      if (l !== 'utf-8' && l !== 'utf8' && l !== 'unicode-1-1-utf-8') {
        throw new P.RangeError('TextDecoder: only utf-8 is supported in this sandbox, got ' + label);
      }
      this._fatal = !!(options && options.fatal);
      this._ignoreBOM = !!(options && options.ignoreBOM);
    }
    get encoding() { return 'utf-8'; }
    get fatal() { return this._fatal; }
    get ignoreBOM() { return this._ignoreBOM; }
    decode(input) {
      if (input === undefined) return '';
      let s = utf8Decode(P.toU8(input));
      if (this._fatal && P.StringIndexOf(s, '\uFFFD') >= 0) {
        // The native decoder is lossy; re-check whether U+FFFD was really in the input.
        const again = utf8Encode(s);
        const orig = P.toU8(input);
        let same = again.length === orig.length;
        for (let i = 0; same && i < orig.length; i++) same = again[i] === orig[i];
        if (!same) throw new P.TypeError('The encoded data was not valid for encoding utf-8');
      }
      if (!this._ignoreBOM && charCodeAt(s, 0) === 0xfeff) s = P.StringSlice(s, 1);
      return s;
    }
  }
  P.defineGlobal('TextEncoder', TextEncoder);
  P.defineGlobal('TextDecoder', TextDecoder);

  /* ---- atob / btoa (web semantics: latin1 strings) ---- */
  P.defineGlobal('btoa', function btoa(s) {
    s = P.StringCtor(s);
    for (let i = 0; i < s.length; i++) if (charCodeAt(s, i) > 255) throw P.codedError('InvalidCharacterError', 'Invalid character', undefined);
    return base64Encode(latin1Encode(s), false);
  });
  P.defineGlobal('atob', function atob(s) {
    const b = base64Decode(P.StringCtor(s));
    return codesToString(b, 0, b.length);
  });

  /* ---- Buffer: a Uint8Array subclass with Node's commonly used surface ---- */
  class Buffer extends U8 {
    static from(value, encOrOffset, length) {
      if (typeof value === 'string') return toBuffer(encodeString(value, encOrOffset));
      if (value instanceof P.ArrayBuffer) {
        const off = encOrOffset === undefined ? 0 : encOrOffset >>> 0;
        const len = length === undefined ? value.byteLength - off : length >>> 0;
        return new Buffer(value, off, len); // shares memory, as in Node
      }
      if (P.isView(value)) { const u = P.toU8(value); const b = new Buffer(u.length); b.set(u); return b; }
      if (value && typeof value === 'object') {
        if (value.type === 'Buffer' && P.ArrayIsArray(value.data)) value = value.data;
        const n = value.length >>> 0; const b = new Buffer(n);
        for (let i = 0; i < n; i++) b[i] = value[i] & 255;
        return b;
      }
      throw new P.TypeError('The first argument must be of type string, Buffer, ArrayBuffer, Array, or Array-like Object');
    }
    static alloc(size, fill, enc) {
      const b = new Buffer(size >>> 0);
      if (fill !== undefined && fill !== 0) b.fill(fill, 0, b.length, enc);
      return b;
    }
    static allocUnsafe(size) { return new Buffer(size >>> 0); }
    static isBuffer(v) { return v instanceof Buffer; }
    static isEncoding(e) { try { normEnc(e); return typeof e === 'string'; } catch (_) { return false; } }
    static byteLength(v, enc) {
      if (typeof v === 'string') return encodeString(v, enc).length;
      if (v instanceof P.ArrayBuffer) return v.byteLength;
      return P.toU8(v).length;
    }
    static concat(list, totalLength) {
      let total = 0;
      for (let i = 0; i < list.length; i++) total += list[i].length;
      if (totalLength !== undefined) total = totalLength >>> 0;
      const out = new Buffer(total);
      let o = 0;
      for (let i = 0; i < list.length && o < total; i++) {
        const u = P.toU8(list[i]);
        const n = P.MathMin(u.length, total - o);
        out.set(n === u.length ? u : P.U8Slice(u, 0, n), o); o += n;
      }
      return out;
    }
    static compare(a, b) { return a.compare(b); }
    toString(enc, start, end) {
      const s = start === undefined ? 0 : P.MathMax(0, start | 0);
      const e = end === undefined ? this.length : P.MathMin(this.length, end | 0);
      const u = P.toU8(this);
      return decodeBytes(s === 0 && e === u.length ? u : P.U8Slice(u, s, P.MathMax(s, e)), enc);
    }
    toJSON() { return { type: 'Buffer', data: Array.from(this) }; }
    equals(o) { return this.compare(o) === 0; }
    compare(o) {
      const a = this, b = P.toU8(o);
      const n = P.MathMin(a.length, b.length);
      for (let i = 0; i < n; i++) if (a[i] !== b[i]) return a[i] < b[i] ? -1 : 1;
      return a.length === b.length ? 0 : (a.length < b.length ? -1 : 1);
    }
    write(string, offset, length, enc) {
      if (typeof offset === 'string') { enc = offset; offset = 0; length = undefined; }
      else if (typeof length === 'string') { enc = length; length = undefined; }
      offset = offset === undefined ? 0 : offset >>> 0;
      const bytes = encodeString(string, enc);
      const n = P.MathMin(bytes.length, this.length - offset, length === undefined ? Infinity : length >>> 0);
      this.set(P.U8Slice(bytes, 0, n), offset);
      return n;
    }
    fill(value, offset, end, enc) {
      if (typeof value === 'string') {
        if (typeof offset === 'string') { enc = offset; offset = 0; end = this.length; }
        const bytes = encodeString(value, enc);
        const s = offset === undefined ? 0 : offset >>> 0, e = end === undefined ? this.length : end >>> 0;
        if (bytes.length === 0) return super.fill(0, s, e);
        for (let i = s, j = 0; i < e; i++, j = (j + 1) % bytes.length) this[i] = bytes[j];
        return this;
      }
      return super.fill(value, offset, end);
    }
    // slice shares memory in Node (like subarray).
    slice(start, end) { return this.subarray(start, end); }
    subarray(start, end) {
      const u = U8.prototype.subarray.call(this, start, end);
      return new Buffer(P.TA_buffer(u), P.TA_byteOffset(u), P.TA_length(u));
    }
    readUInt8(o) { return this[o >>> 0]; }
    readUInt16BE(o) { o >>>= 0; return (this[o] << 8) | this[o + 1]; }
    readUInt32BE(o) { o >>>= 0; return ((this[o] * 0x1000000) + ((this[o + 1] << 16) | (this[o + 2] << 8) | this[o + 3])); }
    writeUInt8(v, o) { this[o >>> 0] = v; return (o >>> 0) + 1; }
    readUInt16LE(o) { o >>>= 0; return this[o] | (this[o + 1] << 8); }
    readUInt32LE(o) { o >>>= 0; return ((this[o + 3] * 0x1000000) + ((this[o + 2] << 16) | (this[o + 1] << 8) | this[o])); }
    readInt32BE(o) { o >>>= 0; return (this[o] << 24) | (this[o + 1] << 16) | (this[o + 2] << 8) | this[o + 3]; }
    readBigUInt64BE(o) { o >>>= 0; return (BigInt(this.readUInt32BE(o)) << 32n) | BigInt(this.readUInt32BE(o + 4)); }
    writeUInt16BE(v, o) { o >>>= 0; this[o] = v >>> 8; this[o + 1] = v; return o + 2; }
    writeUInt32LE(v, o) { o >>>= 0; this[o + 3] = v >>> 24; this[o + 2] = v >>> 16; this[o + 1] = v >>> 8; this[o] = v; return o + 4; }
    writeBigUInt64BE(v, o) {
      o = o === undefined ? 0 : o >>> 0;
      const big = BigInt.asUintN(64, BigInt(v));
      this.writeUInt32BE(Number(big >> 32n), o);
      this.writeUInt32BE(Number(big & 0xffffffffn), o + 4);
      return o + 8;
    }
    copy(target, targetStart, sourceStart, sourceEnd) {
      const ts = targetStart === undefined ? 0 : targetStart >>> 0;
      const ss = sourceStart === undefined ? 0 : sourceStart >>> 0;
      const se = sourceEnd === undefined ? this.length : P.MathMin(this.length, sourceEnd >>> 0);
      const n = P.MathMax(0, P.MathMin(se - ss, target.length - ts));
      P.U8Set(P.toU8(target), P.U8Slice(P.toU8(this), ss, ss + n), ts);
      return n;
    }
    writeUInt32BE(v, o) { o >>>= 0; this[o] = v >>> 24; this[o + 1] = v >>> 16; this[o + 2] = v >>> 8; this[o + 3] = v; return o + 4; }
  }
  // `new Buffer(...)`-style species: map/filter/slice on a Buffer yield Buffers.
  function toBuffer(u8) { return new Buffer(P.TA_buffer(u8), P.TA_byteOffset(u8), P.TA_length(u8)); }
  P.toBuffer = toBuffer;
  P.Buffer = Buffer;
  P.defineGlobal('Buffer', Buffer);
})();
