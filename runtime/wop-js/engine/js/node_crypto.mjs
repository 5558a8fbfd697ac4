// node:crypto for packs in the wop sandbox: hashes and HMACs over the host's
// digest/hmac natives, randomness over the host's random source.
// Ciphers, signatures, key objects and X509 are named (so packs that import
// them still link) but throw ERR_FEATURE_UNAVAILABLE_IN_SANDBOX when used.
const I = globalThis[Symbol.for('wop.internal')];
const { Buffer, enc } = I;

const ALGS = { md5: 'md5', sha1: 'sha1', 'sha-1': 'sha1', sha256: 'sha256', 'sha-256': 'sha256',
  sha384: 'sha384', 'sha-384': 'sha384', sha512: 'sha512', 'sha-512': 'sha512' };
function algOf(a) {
  const n = ALGS[String(a).toLowerCase()];
  if (!n) throw I.codedError('ERR_OSSL_EVP_UNSUPPORTED', `Digest method not supported: ${a}`);
  return n;
}
function toBytes(data, inputEncoding) {
  if (typeof data === 'string') return enc.encodeString(data, inputEncoding);
  if (ArrayBuffer.isView(data) || data instanceof ArrayBuffer) return I.toU8(data);
  throw I.codedError('ERR_INVALID_ARG_TYPE', 'The "data" argument must be of type string or an instance of Buffer, TypedArray, or DataView.', undefined, TypeError);
}
function output(bytes, encoding) {
  const b = I.toBuffer(bytes);
  return encoding === undefined || encoding === 'buffer' ? b : b.toString(encoding);
}

// Buffers the input and hashes once at digest() (the natives are one-shot).
class Accumulator {
  constructor() { this._chunks = []; this._done = false; }
  update(data, inputEncoding) {
    if (this._done) throw I.codedError('ERR_CRYPTO_HASH_FINALIZED', 'Digest already called');
    this._chunks.push(toBytes(data, inputEncoding));
    return this;
  }
  _bytes() {
    if (this._done) throw I.codedError('ERR_CRYPTO_HASH_FINALIZED', 'Digest already called');
    this._done = true;
    return Buffer.concat(this._chunks);
  }
}
export class Hash extends Accumulator {
  constructor(algorithm) { super(); this._alg = algOf(algorithm); }
  digest(encoding) { return output(I.digest(this._alg, this._bytes()), encoding); }
  copy() { const h = new Hash(this._alg); h._chunks = this._chunks.slice(); return h; }
}
export class Hmac extends Accumulator {
  constructor(algorithm, key) {
    super();
    this._alg = algOf(algorithm);
    if (key && typeof key === 'object' && key._secret) key = key._secret;
    this._key = toBytes(key);
  }
  digest(encoding) { return output(I.hmac(this._alg, this._key, this._bytes()), encoding); }
}

export function createHash(algorithm) { return new Hash(algorithm); }
export function createHmac(algorithm, key) { return new Hmac(algorithm, key); }
export function hash(algorithm, data, outputEncoding = 'hex') { return createHash(algorithm).update(data).digest(outputEncoding); }
export function getHashes() { return ['md5', 'sha1', 'sha256', 'sha384', 'sha512']; }

export function randomBytes(size, callback) {
  const b = I.toBuffer(I.randomBytes(size));
  if (typeof callback === 'function') { queueMicrotask(() => callback(null, b)); return undefined; }
  return b;
}
export function randomFillSync(buf, offset = 0, size) {
  const u = I.toU8(buf);
  const n = size === undefined ? u.length - offset : size;
  u.set(I.randomBytes(n), offset);
  return buf;
}
export function randomInt(min, max) {
  if (max === undefined) { max = min; min = 0; }
  const range = max - min;
  if (!(range > 0) || range > 2 ** 48) throw I.codedError('ERR_OUT_OF_RANGE', 'randomInt: invalid range', undefined, RangeError);
  const limit = 2 ** 48 - (2 ** 48 % range);
  for (;;) {
    const b = I.randomBytes(6);
    const x = ((b[0] * 256 + b[1]) * 256 + b[2]) * 16777216 + ((b[3] << 16) | (b[4] << 8) | b[5]);
    if (x < limit) return min + (x % range);
  }
}
export function randomUUID() { return I.randomUUID(); }
export function getRandomValues(ta) { return I.webcrypto.getRandomValues(ta); }

export function timingSafeEqual(a, b) {
  const x = I.toU8(a), y = I.toU8(b);
  if (x.length !== y.length) throw I.codedError('ERR_CRYPTO_TIMING_SAFE_EQUAL_LENGTH', 'Input buffers must have the same byte length', undefined, RangeError);
  let d = 0;
  for (let i = 0; i < x.length; i++) d |= x[i] ^ y[i];
  return d === 0;
}

// A secret KeyObject is enough for createHmac(createSecretKey(...)).
export function createSecretKey(key, encoding) {
  const k = toBytes(key, encoding);
  return Object.freeze({ type: 'secret', symmetricKeySize: k.length, _secret: k, export: () => I.toBuffer(k.slice()) });
}

function unavailable(name) {
  return function () {
    throw I.codedError('ERR_FEATURE_UNAVAILABLE_IN_SANDBOX', `crypto.${name} is not available in the wop sandbox`);
  };
}
export const createCipheriv = unavailable('createCipheriv');
export const createDecipheriv = unavailable('createDecipheriv');
export const createSign = unavailable('createSign');
export const createVerify = unavailable('createVerify');
export const sign = unavailable('sign');
export const verify = unavailable('verify');
export const createPublicKey = unavailable('createPublicKey');
export const createPrivateKey = unavailable('createPrivateKey');
export const generateKeyPairSync = unavailable('generateKeyPairSync');
export const generateKeyPair = unavailable('generateKeyPair');
export const pbkdf2Sync = unavailable('pbkdf2Sync');
export const pbkdf2 = unavailable('pbkdf2');
export const scryptSync = unavailable('scryptSync');
export const scrypt = unavailable('scrypt');
export const hkdfSync = unavailable('hkdfSync');
export const publicEncrypt = unavailable('publicEncrypt');
export const privateDecrypt = unavailable('privateDecrypt');
export class X509Certificate { constructor() { unavailable('X509Certificate')(); } }

export const webcrypto = I.webcrypto;
export const subtle = I.webcrypto.subtle;
export const constants = Object.freeze({});

export default Object.freeze({
  Hash, Hmac, createHash, createHmac, hash, getHashes, randomBytes, randomFillSync, randomInt, randomUUID,
  getRandomValues, timingSafeEqual, createSecretKey, createCipheriv, createDecipheriv, createSign, createVerify,
  sign, verify, createPublicKey, createPrivateKey, generateKeyPairSync, generateKeyPair, pbkdf2Sync, pbkdf2,
  scryptSync, scrypt, hkdfSync, publicEncrypt, privateDecrypt, X509Certificate, webcrypto, subtle, constants,
});
