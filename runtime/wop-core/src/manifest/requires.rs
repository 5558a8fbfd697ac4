//! `runtime.requires[]`: the platform primitives a pack declares it needs
//! (the protocol's closed vocabulary). A declaration, not a grant (what
//! the operator grants is judged in [`crate::pack::requires`]); an unknown
//! token is `invalid_manifest`.

use crate::error::LoadError;
use serde_json::Value;

/// The protocol's vocabulary.
pub const TOKENS: [&str; 8] = [
    "net.dns",
    "net.outbound",
    "crypto",
    "subprocess",
    "fs.read",
    "fs.write",
    "env.read",
    "clock",
];

/// Reads `runtime.requires` (absent and `[]` are the same).
pub fn parse(v: Option<&Value>) -> Result<Vec<String>, LoadError> {
    let bad = |path: String, message: String| Err(LoadError::InvalidManifest { path, message });
    let items = match v {
        None | Some(Value::Null) => return Ok(Vec::new()),
        Some(Value::Array(a)) => a,
        Some(_) => return bad("$.runtime.requires".into(), "must be an array".into()),
    };
    let mut out: Vec<String> = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let path = format!("$.runtime.requires[{i}]");
        let Some(t) = item.as_str() else {
            return bad(path, "must be a string".into());
        };
        if !TOKENS.contains(&t) {
            let shown = &t[..t.floor_char_boundary(40)];
            return bad(
                path,
                format!(
                    "`{shown}` is not a runtime requirement; the vocabulary is {}",
                    TOKENS.join(", ")
                ),
            );
        }
        if out.iter().any(|o| o == t) {
            return bad(path, format!("`{t}` is listed twice"));
        }
        out.push(t.to_owned());
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use crate::error::LoadError;
    use crate::manifest::Manifest;

    fn manifest(requires: &str) -> Result<Manifest, LoadError> {
        let text = format!(
            r#"{{"kind":"node","name":"p","version":"1.0.0","engines":{{"openwop":">=1.0.0"}},
            "nodes":[{{"typeId":"p.a","version":"1.0.0","category":"c","role":"worker"}}],
            "runtime":{{"language":"wasm-component","entry":"p.wasm","requires":{requires}}},
            "x-wop":{{"sha256":"{}"}}}}"#,
            "a".repeat(64)
        );
        Manifest::parse(text.as_bytes())
    }

    #[test]
    fn only_the_vocabulary_once_each() {
        assert!(manifest(r#"["clock","net.outbound","fs.write"]"#).is_ok());
        assert!(manifest("[]").is_ok());
        for bad in [
            r#"["net.smtp"]"#,
            r#"["clock","clock"]"#,
            r#"[1]"#,
            r#""clock""#,
        ] {
            match manifest(bad) {
                Err(LoadError::InvalidManifest { .. }) => {}
                other => panic!("{bad}: {other:?}"),
            }
        }
    }
}
