// node:dns/promises for packs in the wop sandbox. DNS is the host's job (its
// safe-fetch resolves, pins and SSRF-checks every outbound request), so every
// lookup fails with ENOTFOUND. Packs that guard their own egress (core.openwop.http,
// core.openwop.rag) prefer ctx.http.safeFetch, which the sandbox always provides.
function fail(syscall, hostname) {
  const e = new Error(`${syscall} ENOTFOUND ${hostname}: DNS is not available in the wop sandbox (the host resolves names in its safe-fetch)`);
  e.code = 'ENOTFOUND';
  e.errno = -3008;
  e.syscall = syscall;
  e.hostname = String(hostname);
  return e;
}
const rejecter = (syscall) => (hostname) => Promise.reject(fail(syscall, hostname));

export const lookup = rejecter('getaddrinfo');
export const lookupService = rejecter('getnameinfo');
export const resolve = rejecter('queryA');
export const resolve4 = rejecter('queryA');
export const resolve6 = rejecter('queryAaaa');
export const resolveAny = rejecter('queryAny');
export const resolveCname = rejecter('queryCname');
export const resolveMx = rejecter('queryMx');
export const resolveNs = rejecter('queryNs');
export const resolveTxt = rejecter('queryTxt');
export const resolveSrv = rejecter('querySrv');
export const resolveCaa = rejecter('queryCaa');
export const resolvePtr = rejecter('queryPtr');
export const resolveSoa = rejecter('querySoa');
export const reverse = rejecter('getHostByAddr');
export function getServers() { return []; }
export function setServers() {}
export class Resolver {
  constructor() {
    Object.assign(this, { lookup, resolve, resolve4, resolve6, resolveAny, resolveCname, resolveMx, resolveNs, resolveTxt, resolveSrv, resolveCaa, resolvePtr, resolveSoa, reverse, getServers, setServers });
  }
  cancel() {}
}
export default Object.freeze({
  lookup, lookupService, resolve, resolve4, resolve6, resolveAny, resolveCname, resolveMx, resolveNs,
  resolveTxt, resolveSrv, resolveCaa, resolvePtr, resolveSoa, reverse, getServers, setServers, Resolver,
});
