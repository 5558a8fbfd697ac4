//! The size of a JSON value's compact text, without building the text.
//!
//! Limits count JSON values by their compact text (`serde_json`'s
//! `to_string`): log fields against the log cap, inputs for fuel per
//! input byte, ABI v1 state entries against the state cap. Counting
//! through a writer that only adds lengths gives the same number without
//! allocating the text (for a large input, its whole size again) and
//! without `Display`'s formatter adapter.

use serde_json::Value;

/// A writer that keeps only the number of bytes written to it.
struct Count(usize);

impl std::io::Write for Count {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0 = self.0.saturating_add(bytes.len());
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The length in bytes of `value.to_string()`.
pub fn text_len(value: &Value) -> usize {
    let mut count = Count(0);
    match serde_json::to_writer(&mut count, value) {
        Ok(()) => count.0,
        // Writing a `Value` to a writer that never fails cannot fail; if
        // it ever did, count the way the limits always have.
        Err(_) => value.to_string().len(),
    }
}

#[cfg(test)]
mod tests {
    use super::text_len;
    use serde_json::json;

    #[test]
    fn text_len_is_the_length_of_the_compact_text() {
        for v in [
            json!(null),
            json!(1e5),
            json!(-0.0),
            json!(u64::MAX),
            json!("é\u{1}\"\\\n€𝄞"),
            json!({"b": [1, 2.5, true, {"c": "\u{7f}"}], "a": {}}),
            json!([[], {}, "", [null]]),
            serde_json::from_str(r#"{ "k" : "\u00e9\u0000" , "n" : 1E-7 }"#).expect("json"),
        ] {
            assert_eq!(text_len(&v), v.to_string().len(), "{v}");
        }
    }
}
