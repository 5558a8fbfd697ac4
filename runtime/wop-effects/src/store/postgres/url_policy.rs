//! Parsing a store URL: our parameters, the TLS policy, and password redaction.

use super::PostgresOptions;
use crate::store::StoreError;
use std::str::FromStr;
use tokio_postgres::config::{Host, SslMode};

/// A parsed store URL: the driver's config plus our own parameters.
pub(super) struct Parsed {
    pub(super) config: tokio_postgres::Config,
    pub(super) options: PostgresOptions,
    pub(super) display: String,
}

/// `url` with the password (if any) replaced by `***`.
pub fn redact_url(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let (authority, tail) = match rest.find(['/', '?']) {
        Some(i) => rest.split_at(i),
        None => (rest, ""),
    };
    let mut out = format!("{scheme}://");
    match authority.rsplit_once('@') {
        Some((userinfo, hosts)) => {
            match userinfo.split_once(':') {
                Some((user, _)) => out.push_str(&format!("{user}:***@")),
                None => out.push_str(&format!("{userinfo}@")),
            }
            out.push_str(hosts);
        }
        None => out.push_str(authority),
    }
    // A password can also be a query parameter.
    let tail: Vec<String> = match tail.split_once('?') {
        Some((path, query)) => {
            let q: Vec<String> = query
                .split('&')
                .map(|kv| {
                    if kv.starts_with("password=") {
                        "password=***".to_owned()
                    } else {
                        kv.to_owned()
                    }
                })
                .collect();
            vec![path.to_owned(), "?".to_owned(), q.join("&")]
        }
        None => vec![tail.to_owned()],
    };
    out.push_str(&tail.concat());
    out
}

fn valid_schema_name(s: &str) -> bool {
    let mut chars = s.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
        && s.len() <= 63
}

pub(super) fn parse(url: &str, mut options: PostgresOptions) -> Result<Parsed, StoreError> {
    let display = redact_url(url);
    if !(url.starts_with("postgres://") || url.starts_with("postgresql://")) {
        return Err(StoreError::Unavailable(format!(
            "not a PostgreSQL URL (postgres://… or postgresql://…): {display}"
        )));
    }
    // Take our own parameters out of the query string.
    let driver_url = match url.split_once('?') {
        None => url.to_owned(),
        Some((base, query)) => {
            let mut kept = Vec::new();
            for kv in query.split('&').filter(|kv| !kv.is_empty()) {
                if let Some(v) = kv.strip_prefix("wop_schema=") {
                    options.schema = Some(v.to_owned());
                } else if let Some(v) = kv.strip_prefix("wop_pool=") {
                    options.max_connections =
                        v.parse().ok().filter(|n| *n > 0).ok_or_else(|| {
                            StoreError::Unavailable(format!(
                                "wop_pool must be a positive number of connections in {display}"
                            ))
                        })?;
                } else {
                    kept.push(kv);
                }
            }
            if kept.is_empty() {
                base.to_owned()
            } else {
                format!("{base}?{}", kept.join("&"))
            }
        }
    };
    if let Some(s) = &options.schema
        && !valid_schema_name(s)
    {
        return Err(StoreError::Unavailable(format!(
            "invalid PostgreSQL schema name {s:?} (letters, digits and _; at most 63)"
        )));
    }
    let mut config = tokio_postgres::Config::from_str(&driver_url)
        .map_err(|e| StoreError::Unavailable(format!("invalid PostgreSQL URL {display}: {e}")))?;
    if config.get_hosts().is_empty() && config.get_hostaddrs().is_empty() {
        return Err(StoreError::Unavailable(format!(
            "the PostgreSQL URL {display} names no host"
        )));
    }
    let remote: Vec<String> = config
        .get_hosts()
        .iter()
        .filter_map(|h| match h {
            Host::Tcp(name) if !is_loopback_name(name) => Some(name.clone()),
            _ => None,
        })
        .chain(
            config
                .get_hostaddrs()
                .iter()
                .filter(|a| !a.is_loopback())
                .map(|a| a.to_string()),
        )
        .collect();
    if !remote.is_empty() && config.get_ssl_mode() != SslMode::Disable {
        return Err(StoreError::Unavailable(format!(
            "refusing PostgreSQL URL {display}: host {} is not loopback and this build has no \
             TLS; add sslmode=disable to accept cleartext to it, or reach it through a local \
             TLS tunnel",
            remote.join(", ")
        )));
    }
    if config.get_ssl_mode() != SslMode::Disable {
        // Loopback without TLS: do not even attempt the TLS handshake.
        config.ssl_mode(SslMode::Disable);
    }
    if config.get_application_name().is_none() {
        config.application_name("wop");
    }
    if config.get_connect_timeout().is_none() {
        config.connect_timeout(options.connect_timeout);
    }
    Ok(Parsed {
        config,
        options,
        display,
    })
}

fn is_loopback_name(name: &str) -> bool {
    let name = name.trim_start_matches('[').trim_end_matches(']');
    name.eq_ignore_ascii_case("localhost")
        || name
            .parse::<std::net::IpAddr>()
            .is_ok_and(|a| a.is_loopback())
}
