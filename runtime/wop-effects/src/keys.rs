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
    let mut out = String::with_capacity(s.len());
    push_part(&mut out, s);
    out
}

/// [`part`], appended to `out`. Keys are built on every invocation (the
/// run's ledger at admission, its roll-ups and usage record after), so
/// each is one allocation rather than one per segment and escape.
fn push_part(out: &mut String, s: &str) {
    let start = out.len();
    if s.contains(['%', '/']) {
        for c in s.chars() {
            match c {
                '%' => out.push_str("%25"),
                '/' => out.push_str("%2F"),
                c => out.push(c),
            }
        }
    } else {
        out.push_str(s);
    }
    if out.len() - start <= 96 {
        return;
    }
    let mut end = start + 64;
    while !out.is_char_boundary(end) {
        end -= 1;
    }
    out.truncate(end);
    let digest = wop_core::jcs::sha256_hex(&serde_json::Value::String(s.to_owned()));
    out.push('~');
    out.push_str(&digest[..16]);
}

/// `<prefix><tenant>/<run><suffix>`, both ids escaped.
fn scoped(prefix: &str, tenant: &str, run: &str, suffix: &str) -> String {
    let mut k = String::with_capacity(prefix.len() + tenant.len() + run.len() + suffix.len() + 1);
    k.push_str(prefix);
    push_part(&mut k, tenant);
    k.push('/');
    push_part(&mut k, run);
    k.push_str(suffix);
    k
}

/// `<tenant>/<run>`, both escaped: the scope of every per-run record.
pub fn run_scope(tenant: &str, run: &str) -> String {
    scoped("", tenant, run, "")
}

/// A run's ledger.
pub fn ledger(tenant: &str, run: &str) -> String {
    scoped("ledger/", tenant, run, "")
}

/// A run's roll-up.
pub fn run_rollup(tenant: &str, run: &str) -> String {
    scoped("rollup/run/", tenant, run, "")
}

/// The prefix of a run's usage records (`None`: every run of the tenant).
pub fn usage_prefix(tenant: &str, run: Option<&str>) -> String {
    match run {
        Some(r) => scoped("usage/", tenant, r, "/"),
        None => {
            let mut k = String::from("usage/");
            push_part(&mut k, tenant);
            k.push('/');
            k
        }
    }
}

/// The prefix of a run's effect listing.
pub fn run_index_prefix(tenant: &str, run: &str) -> String {
    scoped("run/", tenant, run, "/")
}

/// The first key after every key starting with `prefix` (`None`: no
/// bound): the end of a prefix scan by range.
pub fn prefix_end(prefix: &str) -> Option<String> {
    let mut chars: Vec<char> = prefix.chars().collect();
    while let Some(c) = chars.pop() {
        let n = if c as u32 == 0xD7FF {
            0xE000
        } else {
            c as u32 + 1
        };
        if let Some(next) = char::from_u32(n) {
            chars.push(next);
            return Some(chars.into_iter().collect());
        }
    }
    None
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

    /// The keys as the store has always written them: escaped with two
    /// `replace`s, cut on a char boundary of the escaped text, joined by
    /// `format!` (the keys of existing sled and PostgreSQL stores).
    fn part_as_written(s: &str) -> String {
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

    #[test]
    fn keys_are_the_keys_stores_already_hold() {
        let ids = [
            String::new(),
            "r".to_owned(),
            "a/b%2Fc%".to_owned(),
            "é/".repeat(40),
            format!("{}é{}", "x".repeat(63), "/".repeat(40)),
            format!("{}€", "%".repeat(21)),
            "y".repeat(96),
            "y".repeat(97),
        ];
        for t in &ids {
            assert_eq!(part(t), part_as_written(t), "{t:?}");
            for r in &ids {
                let scope = format!("{}/{}", part_as_written(t), part_as_written(r));
                assert_eq!(run_scope(t, r), scope);
                assert_eq!(ledger(t, r), format!("ledger/{scope}"));
                assert_eq!(run_rollup(t, r), format!("rollup/run/{scope}"));
                assert_eq!(usage_prefix(t, Some(r)), format!("usage/{scope}/"));
                assert_eq!(run_index_prefix(t, r), format!("run/{scope}/"));
            }
            assert_eq!(
                usage_prefix(t, None),
                format!("usage/{}/", part_as_written(t))
            );
        }
    }
}
