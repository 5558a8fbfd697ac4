//! How identifiers become store keys. Every record that belongs to a run
//! is keyed by `(tenant, run)`: run ids are chosen by callers, are not
//! secrets and are not unique across tenants, so two tenants using the same
//! run id must never share a ledger, a roll-up, usage records or an effect
//! listing (issue 19).
//!
//! | record | key |
//! |---|---|
//! | run ledger | `ledger/<tenant>/<run>` |
//! | run roll-up | `rollup/run/<tenant>/<run>` |
//! | usage record | `usage/<tenant>/<run>/<ms>-<pid>-<seq>` |
//! | effect listing entry | `run/<tenant>/<run>/<effectId>` |
//! | effect record | `effect/<effectId>` (the id already binds the tenant) |
//! | keyspace version | `meta/keyspace` (see [`crate::store::keyspace`]) |
//!
//! Each `<tenant>` and `<run>` is one escaped segment ([`part`]), so a
//! prefix scan of one tenant's run never reaches another's records.

/// An identifier as one key segment: `%` and `/` escaped, and past 96
/// bytes cut and suffixed with a digest of the whole (so long ids stay
/// distinct and keys stay short).
pub fn part(s: &str) -> String {
    let esc = s.replace('%', "%25").replace('/', "%2F");
    if esc.len() <= 96 {
        return esc;
    }
    let mut end = 64;
    while !esc.is_char_boundary(end) {
        end -= 1;
    }
    let digest = wop_core::jcs::sha256_hex(&serde_json::Value::String(s.to_owned()));
    format!("{}~{}", &esc[..end], &digest[..16])
}

/// `<tenant>/<run>`, both escaped: the scope of every per-run record.
pub fn run_scope(tenant: &str, run: &str) -> String {
    format!("{}/{}", part(tenant), part(run))
}

/// A run's ledger.
pub fn ledger(tenant: &str, run: &str) -> String {
    format!("ledger/{}", run_scope(tenant, run))
}

/// A run's roll-up.
pub fn run_rollup(tenant: &str, run: &str) -> String {
    format!("rollup/run/{}", run_scope(tenant, run))
}

/// The prefix of a run's usage records (`None`: every run of the tenant).
pub fn usage_prefix(tenant: &str, run: Option<&str>) -> String {
    match run {
        Some(r) => format!("usage/{}/", run_scope(tenant, r)),
        None => format!("usage/{}/", part(tenant)),
    }
}

/// The prefix of a run's effect listing.
pub fn run_index_prefix(tenant: &str, run: &str) -> String {
    format!("run/{}/", run_scope(tenant, run))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scopes_never_overlap() {
        // A run id with a slash cannot reach into another tenant's scope.
        assert_ne!(run_scope("a", "b/c"), run_scope("a/b", "c"));
        assert_eq!(run_scope("a", "b/c"), "a/b%2Fc");
        assert_eq!(run_scope("a%2Fb", "c"), "a%252Fb/c");
        // Tenant prefixes: `acme` never matches `acme2`'s records.
        assert!(!usage_prefix("acme2", None).starts_with(&usage_prefix("acme", None)));
        // One run's prefix never covers another's ("r" vs "r2", "" vs "r").
        assert!(!usage_prefix("t", Some("r2")).starts_with(&usage_prefix("t", Some("r"))));
        assert!(!usage_prefix("t", Some("r")).starts_with(&usage_prefix("t", Some(""))));
        assert!(!run_index_prefix("t", "r2").starts_with(&run_index_prefix("t", "r")));
        let long = "x".repeat(500);
        let p = part(&long);
        assert!(p.len() < 100 && p != part(&"x".repeat(501)));
    }
}
