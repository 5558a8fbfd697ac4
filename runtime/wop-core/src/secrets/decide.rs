//! The credential decisions of one egress (RFC 0079 §C): which of an
//! invocation's credentials go with a request, and the `egress.decided`
//! verdicts. A credential is attached only to a destination in its
//! audience and never after it expired; a request the pack addressed with
//! a credential outside its audience is refused (or, where the operator
//! allows it, sent without it); a redirect never carries one to another
//! origin.

use super::audience::Fit;
use super::{Credential, Credentials, OutOfAudience};
use crate::egress::allow::Dest;
/// The `egress.decided` vocabulary a decision is written in.
pub use crate::egress::decision::{CredentialDecision, Verdict, reason};
use crate::egress::plain;
use std::sync::Arc;

/// The request header a pack names credentials with (comma-separated ids).
/// The host removes it; it is never sent.
pub const NAMING_HEADER: &str = "x-wop-credential";

/// Our finer causes of a credential decision (`egress.decided.cause`, and
/// the error's `details.reason` when it refuses the request).
pub mod cause {
    /// The audience has a path prefix and the request's path starts with
    /// it, but is not plain ([`crate::egress::plain`]).
    pub const PATH_NOT_PLAIN: &str = "path-not-plain";
}

/// What goes with one request.
#[derive(Debug, Default)]
pub struct Plan {
    /// The credentials to attach.
    pub attach: Vec<Arc<Credential>>,
    /// The decisions, for `egress.decided`.
    pub decisions: Vec<CredentialDecision>,
    /// Why the request is refused, if it is (the last decision is the denial).
    pub refused: Option<String>,
}

impl Plan {
    fn decide(&mut self, verdict: Verdict, id: Option<&str>, reason: &'static str) {
        self.decisions.push(CredentialDecision {
            verdict,
            credential_id: id.map(str::to_owned),
            reason,
            cause: None,
        });
    }

    fn refuse(&mut self, id: Option<&str>, reason: &'static str, message: String) -> &mut Self {
        self.decide(Verdict::Denied, id, reason);
        self.refused = Some(message);
        self
    }

    /// The reason of the last decision (the denial, when refused).
    pub fn last_reason(&self) -> &'static str {
        self.decisions
            .last()
            .map_or(reason::POLICY_DENIED, |d| d.reason)
    }

    /// What a refusal's error names as `details.reason`: the last
    /// decision's cause if it has one, else its reason.
    pub fn refusal_reason(&self) -> &'static str {
        self.decisions
            .last()
            .and_then(|d| d.cause)
            .unwrap_or_else(|| self.last_reason())
    }

    /// Attaches `c` (`allowed`), or refuses the request if it expired
    /// (`denied`, `expired`); whether it was attached.
    fn attach_unless_expired(&mut self, c: &Arc<Credential>, now_ms: u64) -> bool {
        if c.expired(now_ms) {
            let message = format!("credential `{}` has expired", c.id());
            self.refuse(Some(c.id()), reason::EXPIRED, message);
            return false;
        }
        self.decide(Verdict::Allowed, Some(c.id()), reason::OK);
        self.attach.push(c.clone());
        true
    }

    /// Refuses when two attached credentials would set the same header.
    fn check_conflicts(&mut self) {
        for (i, a) in self.attach.iter().enumerate() {
            if let Some(b) = self.attach[..i]
                .iter()
                .find(|b| b.attach().header_name() == a.attach().header_name())
            {
                let message = format!(
                    "credentials `{}` and `{}` would both set `{}`; name the one to send with the \
                     `{NAMING_HEADER}` request header",
                    b.id(),
                    a.id(),
                    a.attach().header_name()
                );
                let id = a.id().to_owned();
                self.refuse(Some(&id), reason::POLICY_DENIED, message);
                return;
            }
        }
    }
}

/// Parses the naming header's value into ids (empty entries dropped).
pub fn named_ids(values: &[&str]) -> Vec<String> {
    values
        .iter()
        .flat_map(|v| v.split(','))
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .collect()
}

fn out_of_audience(plan: &mut Plan, c: &Arc<Credential>, reason: &'static str, message: String) {
    match c.out_of_audience() {
        OutOfAudience::Deny => {
            plan.refuse(Some(c.id()), reason, message);
        }
        OutOfAudience::Downgrade => plan.decide(Verdict::Downgraded, Some(c.id()), reason),
    }
}

/// A credential whose audience would take the request but for its path,
/// which is not plain: never attached; the request is refused, or sent
/// without it where the operator downgrades (`policy-denied`, cause
/// `path-not-plain`), named or not.
fn not_plain(plan: &mut Plan, c: &Arc<Credential>, path: &str) {
    let why = plain::check(path)
        .err()
        .map_or("an unusual form", |w| w.describe());
    let message = format!(
        "credential `{}` is not attached: its audience is a path prefix, and this path has {why}, \
         which a decoding server or proxy may read as a path outside it; request the plain path",
        c.id()
    );
    out_of_audience(plan, c, reason::POLICY_DENIED, message);
    if let Some(d) = plan.decisions.last_mut() {
        d.cause = Some(cause::PATH_NOT_PLAIN);
    }
}

/// The first request of a safe-fetch to `dest` (URL path `path`). With no
/// credential named, every in-audience credential goes; with names, only
/// those, and a named one outside its audience is refused or downgraded.
pub fn first_request(
    creds: &Credentials,
    named: &[String],
    dest: &Dest<'_>,
    path: &str,
    now_ms: u64,
) -> Plan {
    let mut plan = Plan::default();
    for n in named {
        if creds.get(n).is_none() {
            let shown = super::valid_id(n).then_some(n.as_str());
            let message = format!(
                "this node has no credential `{}` (declare it in pack.json `requiresSecrets` and \
                 have the operator grant it)",
                shown.unwrap_or("<invalid id>")
            );
            plan.refuse(shown, reason::PROVENANCE_UNEVALUABLE, message);
            return plan;
        }
    }
    for c in creds.iter() {
        let is_named = named.iter().any(|n| n == c.id());
        if !named.is_empty() && !is_named {
            continue;
        }
        let fit = c.audience_fit(dest, path);
        if fit == Fit::NotPlain {
            not_plain(&mut plan, c, path);
            if plan.refused.is_some() {
                return plan;
            }
            continue;
        }
        if fit == Fit::Out {
            if is_named {
                let message = format!(
                    "credential `{}` may not be sent to this destination (it is outside the \
                     credential's audience)",
                    c.id()
                );
                out_of_audience(&mut plan, c, reason::OUT_OF_AUDIENCE, message);
                if plan.refused.is_some() {
                    return plan;
                }
            }
            continue;
        }
        if !plan.attach_unless_expired(c, now_ms) {
            return plan;
        }
    }
    plan.check_conflicts();
    plan
}

/// A redirect hop of a request that carried `attached`: kept only on the
/// same origin and in the audience; otherwise refused or downgraded.
pub fn hop(
    attached: &[Arc<Credential>],
    same_origin: bool,
    dest: &Dest<'_>,
    path: &str,
    now_ms: u64,
) -> Plan {
    let mut plan = Plan::default();
    for c in attached {
        let fit = c.audience_fit(dest, path);
        if same_origin && fit == Fit::NotPlain {
            not_plain(&mut plan, c, path);
            if plan.refused.is_some() {
                return plan;
            }
            continue;
        }
        if !same_origin || fit != Fit::In {
            let why = if same_origin {
                reason::OUT_OF_AUDIENCE
            } else {
                reason::POLICY_DENIED
            };
            let message = format!(
                "a redirect would carry credential `{}` {}",
                c.id(),
                if same_origin {
                    "outside its audience"
                } else {
                    "to another origin"
                }
            );
            out_of_audience(&mut plan, c, why, message);
            if plan.refused.is_some() {
                return plan;
            }
            continue;
        }
        if !plan.attach_unless_expired(c, now_ms) {
            return plan;
        }
    }
    plan
}

/// A call of the tool `tool_id` (an HTTP tool or an MCP server's tool).
pub fn for_tool(creds: &Credentials, tool_id: &str, now_ms: u64) -> Plan {
    let mut plan = Plan::default();
    for c in creds.for_tool(tool_id) {
        if !plan.attach_unless_expired(&c, now_ms) {
            return plan;
        }
    }
    plan.check_conflicts();
    plan
}
