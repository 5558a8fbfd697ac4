//! Why a JavaScript pack could not be built, each with its own code.

/// A refused or failed build. [`JsBuildError::code`] is the error code the
/// CLI and the loader report.
#[derive(Debug, thiserror::Error)]
pub enum JsBuildError {
    /// The pack's code itself was refused: a syntax error, an import that
    /// is not allowed, a declared node that is not exported, top-level
    /// code that failed. `code` is the engine's (`js_syntax_error`,
    /// `js_import_not_allowed`, `js_node_not_exported`, `js_module_failed`, …);
    /// `message` names the file and line where the engine knows them.
    #[error("{code}: {message}")]
    Pack {
        /// The engine's code.
        code: String,
        /// What, and where.
        message: String,
    },
    /// The pack's files are not a buildable bundle (missing entry, a file
    /// that is not UTF-8, too many or too large sources).
    #[error("js_bundle_invalid: {0}")]
    Bundle(String),
    /// The pack's top-level code ran out of the build's fuel or memory.
    #[error("js_build_limit: {0}")]
    Limit(String),
    /// The engine or the component encoder failed (a bug of ours, not the
    /// pack's).
    #[error("js_engine_failed: {0}")]
    Engine(String),
}

impl JsBuildError {
    /// The error code.
    pub fn code(&self) -> &str {
        match self {
            Self::Pack { code, .. } => code,
            Self::Bundle(_) => "js_bundle_invalid",
            Self::Limit(_) => "js_build_limit",
            Self::Engine(_) => "js_engine_failed",
        }
    }

    /// The message without the code.
    pub fn message(&self) -> String {
        match self {
            Self::Pack { message, .. } => message.clone(),
            Self::Bundle(m) | Self::Limit(m) | Self::Engine(m) => m.clone(),
        }
    }

    /// Parses the engine's `wop-js-init-error: <code>: <message>` line.
    pub(crate) fn from_engine_stderr(stderr: &str) -> Option<Self> {
        let line = stderr
            .lines()
            .find_map(|l| l.strip_prefix("wop-js-init-error: "))?;
        let (code, message) = line.split_once(": ").unwrap_or(("js_engine_failed", line));
        let code = if code.starts_with("js_") && code.len() < 40 {
            code
        } else {
            "js_engine_failed"
        };
        Some(Self::Pack {
            code: code.to_owned(),
            message: message.to_owned(),
        })
    }
}
