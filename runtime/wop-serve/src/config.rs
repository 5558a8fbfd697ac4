//! The server's own settings (`serve.toml`), separate from the operator
//! policy (which `wop_core::policy::Policy` parses with
//! `deny_unknown_fields`).
//!
//! ```toml
//! maxInFlight = 64            # concurrent invocations; beyond → 503
//! maxInFlightPerTenant = 48   # of those, most one tenant holds; beyond → 429 (default: all with one tenant, 3/4 with several)
//! maxConnections = 1024       # open connections; beyond → 503 and close
//! maxBodyBytes = 1048576      # request body cap → 413
//! maxJsonDepth = 64           # JSON nesting cap → 400 validation_error
//! headerTimeoutMs = 10000     # time to receive the request head
//! bodyTimeoutMs = 30000       # time to receive the body → 408
//! writeTimeoutMs = 10000      # a client that reads nothing for this long is dropped
//! sseQueueBytes = 1048576     # events queued for one text/event-stream client
//! sendBufferBytes = 0         # SO_SNDBUF of client connections (0: the OS's autotuning)
//! drainTimeoutMs = 30000      # SIGTERM: how long in-flight requests may finish
//! idleReleaseMs = 30000       # idle this long: the sandbox pool's kept memory goes back to the OS (0: never)
//! retentionPurgeMinutes = 60  # effect and usage records (and idle runs' ledgers) past the retention are deleted this often (0: never)
//! memoryStoreBytes = 1073741824  # --memory-store: the most it holds; past it new claims → effect_store_full
//! diskReserveBytes = 268435456   # sled store: free space kept on its disk; below it new claims → effect_store_full (default: a tenth of the disk, 16–256 MiB)
//! maxStoreBytesPerTenant = 0     # records one tenant holds (effects, usage); past it its new claims and invocations → effect_store_full (default: none with one tenant, 3/4 of the store with several; 0: none)
//! retryAfterSecs = 1          # `Retry-After` on 503
//! anonymousLoopback = false   # serve without a token (loopback listen only)
//! anonymousScopes = []
//! allowedOrigins = []         # browser origins allowed to call (others: 403)
//! behindTls = false           # clients reach this server over HTTPS only
//! trustedProxies = []         # proxies (IPs or CIDRs) whose X-Forwarded-Proto is believed
//!
//! [[tokens]]
//! sha256 = "<hex sha256 of the bearer token>"
//! principal = "host-1"
//! tenant = "acme"
//! scopes = ["payments.write"]
//! ```

use serde::Deserialize;
use std::path::Path;

/// One accepted bearer token, stored as its SHA-256 (never in clear).
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TokenEntry {
    /// Lower-case hex SHA-256 of the token's bytes.
    pub sha256: String,
    /// The principal id the token authenticates.
    pub principal: String,
    /// The principal's tenant (`(anon:)?[A-Za-z0-9._~-]{1,128}`).
    pub tenant: String,
    /// Scopes granted to the principal.
    #[serde(default)]
    pub scopes: Vec<String>,
}

/// The server's own settings. Every field has a default (see the module
/// docs); unknown keys are errors.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct ServeConfig {
    /// Concurrent invocations (MCP `tools/call` and the invoke API). Default 64.
    pub max_in_flight: usize,
    /// Of those, the most one tenant's invocations may hold at once;
    /// beyond, `429 rate_limited` with `Retry-After`, so that one tenant
    /// cannot take every slot (decision 0048). At most `maxInFlight`.
    /// Default: `maxInFlight` when the server has one tenant (or only the
    /// anonymous one), three quarters of it when its tokens (and the
    /// anonymous principal) name several.
    pub max_in_flight_per_tenant: Option<usize>,
    /// Concurrently open client connections. A connection beyond the cap
    /// is accepted, answered `503 service_unavailable` with `Retry-After`
    /// and `Connection: close`, and closed. Default 1024.
    pub max_connections: usize,
    /// Request body cap in bytes. Default 1 MiB.
    pub max_body_bytes: usize,
    /// JSON nesting cap. Default 64.
    pub max_json_depth: usize,
    /// Time to receive a request head, ms. Default 10 000.
    pub header_timeout_ms: u64,
    /// Time to receive a request body, ms. Default 30 000.
    pub body_timeout_ms: u64,
    /// How long a write to a client may make no progress before the
    /// connection is dropped (a client that stops reading), ms. Default
    /// 10 000.
    pub write_timeout_ms: u64,
    /// Bytes of events queued for one `text/event-stream` client before it
    /// is dropped as too slow (the final outcome frame is always queued).
    /// Default 1 MiB.
    pub sse_queue_bytes: usize,
    /// The kernel send buffer of each client connection (`SO_SNDBUF`; Linux
    /// doubles it). 0 keeps the OS's autotuning (up to
    /// `net.ipv4.tcp_wmem`'s maximum per connection). Bounds the kernel
    /// memory a client that stops reading can hold. Default 0.
    pub send_buffer_bytes: usize,
    /// On shutdown, how long in-flight requests may finish, ms. Default 30 000.
    pub drain_timeout_ms: u64,
    /// After this long without an invocation, the memory the sandbox's
    /// instance pool keeps resident for idle slots (up to 8 MiB per slot
    /// used, decision 0028) is given back to the OS, so an idle server's
    /// RSS falls back to what it holds besides the pool; the next
    /// invocations pay their page faults again. ms; 0 never releases.
    /// Default 30 000.
    pub idle_release_ms: u64,
    /// How often finished effect records and usage records older than
    /// the policy's retention (`effects.retentionDays`, at least 14 days)
    /// are deleted: the first time this long after start, then every
    /// this long. Minutes; 0 never (then `wop effects purge` by hand).
    /// Default 60.
    pub retention_purge_minutes: u64,
    /// With `--memory-store`: the most bytes the store holds (keys,
    /// values and 64 bytes per entry). Past it a new effect claim, an
    /// idempotency claim or a budgeted run's ledger is refused with
    /// `effect_store_full` (`507` for an idempotent request) before
    /// anything runs, and usage records are not kept; the outcome of an
    /// effect already claimed may use an eighth more (decision 0046). At
    /// least 1 MiB. Default 1 GiB.
    pub memory_store_bytes: u64,
    /// On a sled store: the bytes of free space kept on the store's disk
    /// (decision 0053). A write that would leave less is refused before
    /// it reaches sled, which does not recover from a full disk without
    /// a restart: a new effect claim, an idempotency claim, a run's ledger
    /// or a usage record with `effect_store_full` (`507` for an
    /// idempotent request) below this, a claim's outcome or a ledger's
    /// debit below half of it; removals (retention) always go ahead.
    /// Writes resume by themselves once space returns. 0: no reserve.
    /// Default: a tenth of the disk, within 16 MiB to 256 MiB.
    pub disk_reserve_bytes: Option<u64>,
    /// The most bytes of records one tenant holds in a sled or in-memory
    /// store: its effect records (a keyed invocation's recorded response,
    /// an effectful tool call's result, their listing entries; decision
    /// 0054) and what its invocations record (usage records, run
    /// roll-ups and ledgers; decision 0055). Past it the tenant's new
    /// effect claims and idempotency claims are refused with
    /// `effect_store_full` (`507` for an idempotent request) and its own
    /// figures, and so are its invocations without a key, before they
    /// start; its recorded claims are still replayed, a claim's outcome
    /// and an admitted invocation's usage are still recorded, and other
    /// tenants go on. Retention gives the bytes back. Default: none when
    /// the server has one tenant; with several, three quarters of what the
    /// store can hold (the in-memory store's `memoryStoreBytes`; on sled,
    /// what the tenants hold at start plus a quarter of the free space
    /// above `diskReserveBytes`, sled's files taking up to 4 times the
    /// bytes written), so a quarter is always left to the others.
    /// 0: none. Not for a PostgreSQL store (executors sharing it would each
    /// count only their own writes).
    pub max_store_bytes_per_tenant: Option<u64>,
    /// Usage of runs **without a budget** (usage records and roll-ups) is
    /// written off the response path, at most this many ms after the
    /// invocation (or once 1,000 are waiting), and at drain; `GET
    /// /usage` on this server sees it at once. A crash loses at most this
    /// window of those usage records, never an effect claim, a ledger or
    /// a budget debit: runs with a budget are recorded before their
    /// response either way. 0 writes every usage record before its
    /// response. At most 1 000. Default: 10 on sled and in memory (one
    /// process owns the store, so no one else reads it; 4× less time per
    /// invocation on sled, decision 0036), 0 on PostgreSQL and on a store
    /// the embedder built (other executors read the same usage).
    pub usage_defer_ms: Option<u64>,
    /// `Retry-After` seconds on `503`. Default 1.
    pub retry_after_secs: u64,
    /// Serve requests without a token (refused unless the listen address is
    /// loopback). Default false.
    pub anonymous_loopback: bool,
    /// Scopes of the anonymous principal. Default none.
    pub anonymous_scopes: Vec<String>,
    /// Browser origins (`scheme://host[:port]`) whose requests are served.
    /// A request carrying any other `Origin` is refused with `403` before
    /// anything runs. Default none: no web page may call the server.
    pub allowed_origins: Vec<String>,
    /// Clients reach this server over HTTPS only (a TLS-terminating proxy
    /// in front of it): the console's session cookie is then
    /// `__Host-wop_console` with `Secure` and `Path=/`. Default false.
    pub behind_tls: bool,
    /// The proxies (IP addresses or CIDRs, `10.0.0.0/8`) in front of this
    /// server whose `X-Forwarded-Proto` is believed: a request from one of
    /// them with `X-Forwarded-Proto: https` is taken as served over HTTPS
    /// (the console cookie as with `behindTls`). The header is ignored from
    /// any other peer, and such a proxy must set it itself, not pass on a
    /// client's. Default none.
    pub trusted_proxies: Vec<String>,
    /// Accepted bearer tokens. Default none.
    pub tokens: Vec<TokenEntry>,
}

/// One `trustedProxies` entry: an address and how many leading bits of it
/// must match.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Net {
    addr: std::net::IpAddr,
    bits: u8,
}

impl Net {
    /// `a.b.c.d`, `a.b.c.d/n`, an IPv6 address, or one with `/n`.
    pub(crate) fn parse(s: &str) -> Option<Net> {
        let (addr, bits) = match s.split_once('/') {
            Some((a, b)) => (a, Some(b)),
            None => (s, None),
        };
        let addr: std::net::IpAddr = addr.parse().ok()?;
        let max = if addr.is_ipv4() { 32 } else { 128 };
        let bits = match bits {
            None => max,
            Some(b) if !b.is_empty() && b.bytes().all(|c| c.is_ascii_digit()) => b.parse().ok()?,
            Some(_) => return None,
        };
        (bits <= max).then_some(Net { addr, bits })
    }

    /// Whether `ip` is in this network (an IPv4-mapped IPv6 peer as its
    /// IPv4 address).
    pub(crate) fn contains(&self, ip: std::net::IpAddr) -> bool {
        use std::net::IpAddr;
        let prefix = |a: u128, b: u128, width: u32| {
            let bits = u32::from(self.bits);
            bits == 0 || (a ^ b) >> (width - bits) == 0
        };
        match (self.addr, ip.to_canonical()) {
            (IpAddr::V4(n), IpAddr::V4(i)) => {
                prefix(u128::from(u32::from(n)), u128::from(u32::from(i)), 32)
            }
            (IpAddr::V6(n), IpAddr::V6(i)) => prefix(u128::from(n), u128::from(i), 128),
            _ => false,
        }
    }
}

impl Default for ServeConfig {
    fn default() -> Self {
        Self {
            max_in_flight: 64,
            max_in_flight_per_tenant: None,
            max_connections: 1024,
            max_body_bytes: 1 << 20,
            max_json_depth: 64,
            header_timeout_ms: 10_000,
            body_timeout_ms: 30_000,
            write_timeout_ms: 10_000,
            sse_queue_bytes: 1 << 20,
            send_buffer_bytes: 0,
            drain_timeout_ms: 30_000,
            idle_release_ms: 30_000,
            retention_purge_minutes: 60,
            memory_store_bytes: wop_runtime::store::MEMORY_STORE_BYTES,
            disk_reserve_bytes: None,
            max_store_bytes_per_tenant: None,
            usage_defer_ms: None,
            retry_after_secs: 1,
            anonymous_loopback: false,
            anonymous_scopes: Vec::new(),
            allowed_origins: Vec::new(),
            behind_tls: false,
            trusted_proxies: Vec::new(),
            tokens: Vec::new(),
        }
    }
}

/// An origin as `serve.toml` lists it and a browser sends it:
/// `scheme://host[:port]`, compared with the scheme and host lower-cased
/// and a default port (`:80` for http, `:443` for https) dropped.
pub(crate) fn normalize_origin(origin: &str) -> Option<String> {
    let (scheme, rest) = origin.split_once("://")?;
    let scheme = scheme.to_ascii_lowercase();
    if !matches!(scheme.as_str(), "http" | "https") || rest.is_empty() || rest.contains('/') {
        return None;
    }
    let rest = rest.to_ascii_lowercase();
    let host = match (scheme.as_str(), rest.rsplit_once(':')) {
        ("http", Some((h, "80"))) | ("https", Some((h, "443"))) => h,
        _ => rest.as_str(),
    };
    Some(format!("{scheme}://{host}"))
}

/// The anonymous loopback principal's tenant.
pub(crate) const ANON_TENANT: &str = "anon:local";

/// A tenant id usable on the wire (in `effectId`).
pub(crate) fn valid_tenant(t: &str) -> bool {
    let t = t.strip_prefix("anon:").unwrap_or(t);
    (1..=128).contains(&t.len())
        && t.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'~' | b'-'))
}

impl ServeConfig {
    /// Parses `serve.toml` text and validates it.
    pub fn from_toml(text: &str) -> Result<Self, String> {
        let cfg: ServeConfig = toml::from_str(text).map_err(|e| e.to_string())?;
        cfg.validate()?;
        Ok(cfg)
    }

    /// Reads and parses a `serve.toml` file.
    pub fn from_file(path: &Path) -> Result<Self, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        Self::from_toml(&text).map_err(|e| format!("{}: {e}", path.display()))
    }

    /// Checks limits and token entries.
    pub fn validate(&self) -> Result<(), String> {
        if self.max_in_flight == 0 {
            return Err("maxInFlight must be at least 1".into());
        }
        if self.max_connections == 0 {
            return Err("maxConnections must be at least 1".into());
        }
        let most = tokio::sync::Semaphore::MAX_PERMITS;
        if self.max_in_flight > most || self.max_connections > most {
            return Err(format!(
                "maxInFlight and maxConnections must be at most {most}"
            ));
        }
        if self
            .max_in_flight_per_tenant
            .is_some_and(|n| n == 0 || n > self.max_in_flight)
        {
            return Err("maxInFlightPerTenant must be between 1 and maxInFlight".into());
        }
        if self.memory_store_bytes < 1 << 20 {
            return Err("memoryStoreBytes must be at least 1048576 (1 MiB)".into());
        }
        if self.write_timeout_ms == 0 || self.sse_queue_bytes == 0 {
            return Err("writeTimeoutMs and sseQueueBytes must be at least 1".into());
        }
        if self.max_body_bytes == 0 || self.max_json_depth == 0 {
            return Err("maxBodyBytes and maxJsonDepth must be at least 1".into());
        }
        for (i, o) in self.allowed_origins.iter().enumerate() {
            if normalize_origin(o).is_none() {
                return Err(format!(
                    "allowedOrigins[{i}] `{o}` must be an origin: http(s)://host[:port], no path"
                ));
            }
        }
        for (i, p) in self.trusted_proxies.iter().enumerate() {
            if Net::parse(p).is_none() {
                return Err(format!(
                    "trustedProxies[{i}] `{p}` must be an IP address or a CIDR (10.0.0.0/8, fd00::/8)"
                ));
            }
        }
        for (i, t) in self.tokens.iter().enumerate() {
            if t.sha256.len() != 64 || !t.sha256.bytes().all(|b| b.is_ascii_hexdigit()) {
                return Err(format!("tokens[{i}].sha256 must be 64 hex digits"));
            }
            if !valid_tenant(&t.tenant) {
                return Err(format!(
                    "tokens[{i}].tenant `{}` must match (anon:)?[A-Za-z0-9._~-]{{1,128}}",
                    t.tenant
                ));
            }
            if t.principal.is_empty() {
                return Err(format!("tokens[{i}].principal must not be empty"));
            }
        }
        Ok(())
    }

    /// The tenants this server's principals belong to (the anonymous
    /// one's included when it is on).
    pub(crate) fn tenants(&self) -> std::collections::BTreeSet<&str> {
        let mut tenants: std::collections::BTreeSet<&str> =
            self.tokens.iter().map(|t| t.tenant.as_str()).collect();
        if self.anonymous_loopback {
            tenants.insert(ANON_TENANT);
        }
        tenants
    }
}

/// What one of `tenants` may hold of `total` when `serve.toml` sets no
/// per-tenant figure: with one tenant (or none) all of it; with several,
/// three quarters (at least one), so that a quarter is always left to the
/// others. `maxInFlightPerTenant` and `maxStoreBytesPerTenant` both
/// default to it.
pub(crate) fn tenant_default(total: u64, tenants: usize) -> u64 {
    if tenants <= 1 {
        total
    } else {
        (total / 4 * 3 + total % 4 * 3 / 4).max(1)
    }
}

/// The hex SHA-256 of a token, as `serve.toml` stores it.
pub fn token_sha256(token: &str) -> String {
    use sha2::Digest as _;
    hex::encode(sha2::Sha256::digest(token.as_bytes()))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn parses_and_validates() {
        let c = ServeConfig::from_toml(&format!(
            "maxInFlight = 2\n[[tokens]]\nsha256 = \"{}\"\nprincipal = \"h\"\ntenant = \"acme\"\n",
            token_sha256("t")
        ));
        assert!(matches!(c, Ok(ref c) if c.max_in_flight == 2 && c.tokens.len() == 1));
        assert!(ServeConfig::from_toml("nope = 1").is_err());
        assert!(ServeConfig::from_toml("maxInFlight = 0").is_err());
        assert!(ServeConfig::from_toml("maxConnections = 0").is_err());
        assert!(
            matches!(ServeConfig::from_toml("maxConnections = 3"), Ok(ref c) if c.max_connections == 3)
        );
        assert_eq!(ServeConfig::default().max_connections, 1024);
        assert_eq!(ServeConfig::default().retention_purge_minutes, 60);
        assert_eq!(ServeConfig::default().memory_store_bytes, 1 << 30);
        for bad in [
            "maxInFlightPerTenant = 0",
            "maxInFlight = 4\nmaxInFlightPerTenant = 5",
        ] {
            let e = ServeConfig::from_toml(bad).unwrap_err();
            assert!(e.contains("maxInFlightPerTenant"), "{e}");
        }
        let small = ServeConfig::from_toml("memoryStoreBytes = 1000");
        assert!(small.is_err_and(|e| e.contains("memoryStoreBytes")));
        let set = ServeConfig::from_toml("memoryStoreBytes = 2097152");
        assert!(matches!(set, Ok(ref c) if c.memory_store_bytes == 2 << 20));
        assert!(
            matches!(ServeConfig::from_toml("retentionPurgeMinutes = 0"), Ok(ref c) if c.retention_purge_minutes == 0)
        );
        assert!(
            ServeConfig::from_toml(
                "[[tokens]]\nsha256 = \"ab\"\nprincipal = \"h\"\ntenant = \"acme\"\n"
            )
            .is_err()
        );
        assert!(valid_tenant("anon:local") && valid_tenant("a.b-c") && !valid_tenant("a/b"));
    }

    #[test]
    fn by_default_a_tenant_leaves_a_quarter_to_the_others() {
        assert_eq!(tenant_default(64, 0), 64);
        assert_eq!(tenant_default(64, 1), 64);
        assert_eq!(tenant_default(64, 2), 48);
        assert_eq!(tenant_default(7, 2), 5);
        assert_eq!(tenant_default(1, 3), 1);
        assert_eq!(tenant_default(u64::MAX, 2), u64::MAX / 4 * 3 + 2);
    }

    #[test]
    fn trusted_proxies_are_addresses_or_cidrs() {
        let ip = |s: &str| s.parse::<std::net::IpAddr>().unwrap();
        let net = |s: &str| Net::parse(s).unwrap();
        assert!(net("10.0.0.0/8").contains(ip("10.1.2.3")));
        assert!(!net("10.0.0.0/8").contains(ip("11.0.0.1")));
        assert!(net("127.0.0.1").contains(ip("127.0.0.1")));
        assert!(!net("127.0.0.1").contains(ip("127.0.0.2")));
        assert!(net("127.0.0.1").contains(ip("::ffff:127.0.0.1")));
        assert!(net("0.0.0.0/0").contains(ip("8.8.8.8")));
        assert!(!net("0.0.0.0/0").contains(ip("::1")));
        assert!(net("fd00::/8").contains(ip("fd12::1")));
        assert!(!net("fd00::/8").contains(ip("fe80::1")));
        assert!(net("::/0").contains(ip("2001:db8::1")));
        for bad in [
            "",
            "10.0.0.0/33",
            "::/129",
            "10.0.0.0/",
            "10.0.0.0/+8",
            "proxy.local",
            "10.0.0.0/8/8",
        ] {
            assert_eq!(Net::parse(bad), None, "{bad}");
        }
        assert!(ServeConfig::from_toml("trustedProxies = [\"10.0.0.0/8\", \"::1\"]").is_ok());
        let e = ServeConfig::from_toml("trustedProxies = [\"proxy.local\"]").unwrap_err();
        assert!(e.contains("trustedProxies[0]"), "{e}");
    }
}
