//! A node's JSON Schemas (draft 2020-12) for its config and inputs, as the
//! protocol's manifests reference them (`configSchemaRef`,
//! `inputSchemaRef`): compiled once at load, checked at admission, before
//! anything runs. Only references inside a schema resolve (`#/$defs/…`);
//! nothing is fetched and no other file is read.

use crate::error::{ErrorCode, LoadError, NodeError};
use serde_json::Value;

/// A compiled schema and the pack file it came from.
pub struct Schema {
    file: String,
    validator: jsonschema::Validator,
}

impl std::fmt::Debug for Schema {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Schema").field("file", &self.file).finish()
    }
}

impl Schema {
    /// Compiles `raw` (the schema file `file`, referenced at `json_path`).
    pub fn compile(raw: &[u8], file: &str, json_path: &str) -> Result<Schema, LoadError> {
        let v: Value = serde_json::from_slice(raw)
            .map_err(|e| LoadError::validation(json_path, format!("`{file}` is not JSON: {e}")))?;
        let validator = jsonschema::draft202012::options()
            .should_validate_formats(false)
            .build(&v)
            .map_err(|e| {
                LoadError::validation(
                    json_path,
                    format!("`{file}` is not a usable JSON Schema: {e}"),
                )
            })?;
        Ok(Schema {
            file: file.to_owned(),
            validator,
        })
    }
}

/// One node's schemas.
#[derive(Debug, Default)]
pub struct NodeSchemas {
    /// `configSchemaRef`, compiled.
    pub config: Option<Schema>,
    /// `inputSchemaRef`, compiled.
    pub inputs: Option<Schema>,
}

/// `$.inputs` + a JSON pointer, as a JSON path (`$.inputs.items[2].name`).
fn json_path(root: &str, pointer: &str) -> String {
    let mut out = root.to_owned();
    for seg in pointer.split('/').skip(1) {
        let seg = seg.replace("~1", "/").replace("~0", "~");
        if !seg.is_empty() && seg.bytes().all(|b| b.is_ascii_digit()) {
            out.push_str(&format!("[{seg}]"));
        } else if !seg.is_empty()
            && seg
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
        {
            out.push('.');
            out.push_str(&seg);
        } else {
            out.push_str(&format!("[{}]", Value::String(seg)));
        }
    }
    out
}

fn check(schema: &Schema, value: &Value, root: &str) -> Result<(), NodeError> {
    let Err(e) = schema.validator.validate(value) else {
        return Ok(());
    };
    let path = json_path(root, e.instance_path().as_str());
    let message = format!(
        "{path}: {} (the node's schema `{}`; nothing ran)",
        crate::text::cut(&e.to_string(), 300),
        schema.file
    );
    let details = crate::details! {
        "path" => path,
        "schema" => schema.file.clone(),
        "schemaPath" => e.schema_path().as_str().to_owned(),
    };
    Err(NodeError::runtime(
        ErrorCode::ValidationError,
        message,
        details,
    ))
}

impl NodeSchemas {
    /// `config` then `inputs` against their schemas: the first violation,
    /// as `validation_error` with its JSON path (`details.path`).
    pub fn check(&self, inputs: &Value, config: &Value) -> Result<(), NodeError> {
        if let Some(s) = &self.config {
            check(s, config, "$.config")?;
        }
        if let Some(s) = &self.inputs {
            check(s, inputs, "$.inputs")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema(v: Value) -> Schema {
        Schema::compile(
            v.to_string().as_bytes(),
            "schemas/x.json",
            "$.nodes[0].inputSchemaRef",
        )
        .unwrap()
    }

    #[test]
    fn the_first_violation_with_its_json_path() {
        let s = NodeSchemas {
            config: None,
            inputs: Some(schema(json!({
                "type": "object",
                "required": ["text"],
                "properties": {"text": {"type": "string"}, "items": {"type": "array", "items": {"$ref": "#/$defs/item"}}},
                "$defs": {"item": {"type": "object", "properties": {"n": {"type": "integer"}}}}
            }))),
        };
        assert!(s.check(&json!({"text": "a"}), &json!({})).is_ok());
        let e = s.check(&json!({"text": 7}), &json!({})).unwrap_err();
        assert_eq!(e.code, ErrorCode::ValidationError.as_str());
        assert_eq!(
            e.details.as_ref().and_then(|d| d.get("path")),
            Some(&json!("$.inputs.text")),
            "{e:?}"
        );
        let e = s
            .check(
                &json!({"text": "a", "items": [{"n": 1}, {"n": "x"}]}),
                &json!({}),
            )
            .unwrap_err();
        assert_eq!(
            e.details.as_ref().and_then(|d| d.get("path")),
            Some(&json!("$.inputs.items[1].n")),
            "{e:?}"
        );
        let e = s.check(&json!({}), &json!({})).unwrap_err();
        assert!(e.message.contains("text"), "{e:?}");
    }

    #[test]
    fn a_broken_or_remote_schema_is_refused_at_load() {
        let bad = Schema::compile(b"{\"type\": 7}", "s.json", "$.nodes[0].configSchemaRef");
        assert!(bad.is_err());
        let remote = Schema::compile(
            br#"{"$ref": "https://example.com/s.json"}"#,
            "s.json",
            "$.nodes[0].configSchemaRef",
        );
        assert!(remote.is_err(), "a remote reference must not be fetched");
        assert!(Schema::compile(b"not json", "s.json", "$").is_err());
    }
}
