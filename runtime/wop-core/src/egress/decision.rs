//! One egress decision and the `egress.decided` event it becomes: the
//! verdict ([`Verdict`]), the protocol's closed reasons ([`reason`]) and
//! the decisions about the destination ([`Decision::allowed`],
//! [`Decision::denied`]) or about a credential ([`CredentialDecision`],
//! made in [`crate::secrets::decide`]).

use super::Denial;
use crate::model::events::Event;

/// The `reason` vocabulary of `egress.decided` (closed).
pub mod reason {
    /// Allowed.
    pub const OK: &str = "ok";
    /// The destination is not in the credential's audience.
    pub const OUT_OF_AUDIENCE: &str = "out-of-audience";
    /// The credential expired.
    pub const EXPIRED: &str = "expired";
    /// The SSRF guard refused the destination.
    pub const SSRF_BLOCKED: &str = "ssrf-blocked";
    /// No provenance for the credential (the pack named one it does not have).
    pub const PROVENANCE_UNEVALUABLE: &str = "provenance-unevaluable";
    /// The operator's policy refused the destination.
    pub const POLICY_DENIED: &str = "policy-denied";
}

/// `egress.decided.decision`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Proceeds (with the credential, if one was considered).
    Allowed,
    /// Refused.
    Denied,
    /// Proceeds without the credential.
    Downgraded,
}

impl Verdict {
    /// `allowed`, `denied`, `downgraded`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Allowed => "allowed",
            Self::Denied => "denied",
            Self::Downgraded => "downgraded",
        }
    }
}

/// One credential decision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CredentialDecision {
    /// The verdict.
    pub verdict: Verdict,
    /// The credential considered.
    pub credential_id: Option<String>,
    /// From [`reason`].
    pub reason: &'static str,
    /// Finer than the reason, when it is (for a credential,
    /// [`crate::secrets::decide::cause`]).
    pub cause: Option<&'static str>,
}

/// One egress decision, for the `egress.decided` event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    /// The verdict.
    pub verdict: Verdict,
    /// `host[:port]`.
    pub destination: String,
    /// The protocol's closed reason ([`reason`]).
    pub reason: &'static str,
    /// Our finer cause (a [`Denial::reason`], or `redirect` for an
    /// allowed hop).
    pub cause: Option<&'static str>,
    /// The credential the decision is about.
    pub credential_id: Option<String>,
}

impl Decision {
    /// The destination is allowed (`cause`: why, when not the plain case).
    pub fn allowed(destination: String, cause: Option<&'static str>) -> Self {
        Self {
            verdict: Verdict::Allowed,
            destination,
            reason: reason::OK,
            cause,
            credential_id: None,
        }
    }

    /// The destination is refused for `denial`.
    pub fn denied(destination: String, denial: &Denial) -> Self {
        let closed = match denial.reason {
            "ssrf-blocked" | "dns" => reason::SSRF_BLOCKED,
            _ => reason::POLICY_DENIED,
        };
        Self {
            verdict: Verdict::Denied,
            destination,
            reason: closed,
            cause: Some(denial.reason),
            credential_id: None,
        }
    }

    /// A credential decision about `destination`.
    pub fn credential(destination: String, d: &CredentialDecision) -> Self {
        Self {
            verdict: d.verdict,
            destination,
            reason: d.reason,
            cause: d.cause,
            credential_id: d.credential_id.clone(),
        }
    }

    /// Whether the request proceeds.
    pub fn proceeds(&self) -> bool {
        self.verdict != Verdict::Denied
    }

    /// The event.
    pub fn event(&self) -> Event {
        Event::EgressDecided {
            decision: self.verdict.as_str().to_owned(),
            destination: self.destination.clone(),
            reason: self.reason.to_owned(),
            credential_id: self.credential_id.clone(),
            cause: self.cause.map(str::to_owned),
        }
    }
}
