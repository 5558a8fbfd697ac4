//! JSON of a struct without its top-level fields that hold their default
//! (`0`, `""`, `[]`, `{}`, `null`, `false`), written straight from the
//! struct: each field is encoded once into a scratch buffer and copied
//! out unless it is a default. No `serde_json::Value` tree is built: this
//! runs on every recorded invocation, and through the tree encoding the
//! usage record was 12 % of `wop serve`'s CPU per `hello` (decision 0023).
//!
//! Only a plain struct is supported (`serialize_struct`); anything else
//! (a map, a `#[serde(flatten)]` struct) returns `None`, and the caller
//! takes the tree path instead.

use serde::Serialize;
use serde::ser::{self, Impossible, SerializeStruct, Serializer};

/// `value` (a plain struct) as JSON without its default-valued top-level
/// fields, or `None` if it is not a plain struct.
pub(super) fn to_vec<T: Serialize>(value: &T) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(512);
    value.serialize(Compact { out: &mut out }).ok()?;
    Some(out)
}

/// Whether `json` (one encoded value) is a default: zero, empty, null or
/// false.
fn is_default(json: &[u8]) -> bool {
    matches!(
        json,
        b"0" | b"0.0" | b"-0.0" | b"\"\"" | b"[]" | b"{}" | b"null" | b"false"
    )
}

/// The error of everything but a plain struct.
#[derive(Debug)]
pub(super) struct Unsupported;

impl std::fmt::Display for Unsupported {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("not a plain struct")
    }
}

impl std::error::Error for Unsupported {}

impl ser::Error for Unsupported {
    fn custom<T: std::fmt::Display>(_: T) -> Self {
        Unsupported
    }
}

struct Compact<'a> {
    out: &'a mut Vec<u8>,
}

/// The fields of the struct being written.
struct Fields<'a> {
    out: &'a mut Vec<u8>,
    first: bool,
    scratch: Vec<u8>,
}

impl SerializeStruct for Fields<'_> {
    type Ok = ();
    type Error = Unsupported;

    fn serialize_field<T: ?Sized + Serialize>(
        &mut self,
        key: &'static str,
        value: &T,
    ) -> Result<(), Unsupported> {
        self.scratch.clear();
        serde_json::to_writer(&mut self.scratch, value).map_err(|_| Unsupported)?;
        if is_default(&self.scratch) {
            return Ok(());
        }
        if !self.first {
            self.out.push(b',');
        }
        self.first = false;
        serde_json::to_writer(&mut *self.out, key).map_err(|_| Unsupported)?;
        self.out.push(b':');
        self.out.extend_from_slice(&self.scratch);
        Ok(())
    }

    fn end(self) -> Result<(), Unsupported> {
        self.out.push(b'}');
        Ok(())
    }
}

/// Everything but `serialize_struct` is unsupported.
macro_rules! unsupported {
    ($($name:ident($($arg:ty),*) -> $ret:ty;)*) => {
        $(fn $name(self, $(_: $arg),*) -> Result<$ret, Unsupported> {
            Err(Unsupported)
        })*
    };
}

impl<'a> Serializer for Compact<'a> {
    type Ok = ();
    type Error = Unsupported;
    type SerializeSeq = Impossible<(), Unsupported>;
    type SerializeTuple = Impossible<(), Unsupported>;
    type SerializeTupleStruct = Impossible<(), Unsupported>;
    type SerializeTupleVariant = Impossible<(), Unsupported>;
    type SerializeMap = Impossible<(), Unsupported>;
    type SerializeStruct = Fields<'a>;
    type SerializeStructVariant = Impossible<(), Unsupported>;

    fn serialize_struct(self, _: &'static str, _: usize) -> Result<Fields<'a>, Unsupported> {
        self.out.push(b'{');
        Ok(Fields {
            out: self.out,
            first: true,
            scratch: Vec::with_capacity(128),
        })
    }

    unsupported! {
        serialize_bool(bool) -> ();
        serialize_i8(i8) -> ();
        serialize_i16(i16) -> ();
        serialize_i32(i32) -> ();
        serialize_i64(i64) -> ();
        serialize_u8(u8) -> ();
        serialize_u16(u16) -> ();
        serialize_u32(u32) -> ();
        serialize_u64(u64) -> ();
        serialize_f32(f32) -> ();
        serialize_f64(f64) -> ();
        serialize_char(char) -> ();
        serialize_str(&str) -> ();
        serialize_bytes(&[u8]) -> ();
        serialize_none() -> ();
        serialize_unit() -> ();
        serialize_unit_struct(&'static str) -> ();
        serialize_unit_variant(&'static str, u32, &'static str) -> ();
        serialize_seq(Option<usize>) -> Impossible<(), Unsupported>;
        serialize_tuple(usize) -> Impossible<(), Unsupported>;
        serialize_tuple_struct(&'static str, usize) -> Impossible<(), Unsupported>;
        serialize_tuple_variant(&'static str, u32, &'static str, usize) -> Impossible<(), Unsupported>;
        serialize_map(Option<usize>) -> Impossible<(), Unsupported>;
        serialize_struct_variant(&'static str, u32, &'static str, usize) -> Impossible<(), Unsupported>;
    }

    fn serialize_some<T: ?Sized + Serialize>(self, _: &T) -> Result<(), Unsupported> {
        Err(Unsupported)
    }

    fn serialize_newtype_struct<T: ?Sized + Serialize>(
        self,
        _: &'static str,
        _: &T,
    ) -> Result<(), Unsupported> {
        Err(Unsupported)
    }

    fn serialize_newtype_variant<T: ?Sized + Serialize>(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: &T,
    ) -> Result<(), Unsupported> {
        Err(Unsupported)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    #[derive(Serialize, Default)]
    #[serde(rename_all = "camelCase")]
    struct S {
        name: String,
        n: u64,
        x: f64,
        neg_zero: f64,
        on: bool,
        list: Vec<u8>,
        map: BTreeMap<String, u8>,
        opt: Option<u8>,
        quote: String,
    }

    #[test]
    fn drops_top_level_defaults_only() {
        let s = S {
            name: "a".into(),
            neg_zero: -0.0,
            list: vec![0],
            map: [("k".to_owned(), 0)].into(),
            quote: "\"x\"".into(),
            ..Default::default()
        };
        let got: serde_json::Value = serde_json::from_slice(&to_vec(&s).unwrap()).unwrap();
        assert_eq!(
            got,
            serde_json::json!({"name": "a", "list": [0], "map": {"k": 0}, "quote": "\"x\""})
        );
        assert_eq!(to_vec(&S::default()).unwrap(), b"{}");
    }

    #[test]
    fn anything_but_a_plain_struct_is_refused() {
        assert!(to_vec(&BTreeMap::from([("a", 1)])).is_none());
        assert!(to_vec(&7u8).is_none());
        #[derive(Serialize)]
        struct Flat {
            #[serde(flatten)]
            inner: BTreeMap<String, u8>,
        }
        assert!(
            to_vec(&Flat {
                inner: BTreeMap::new()
            })
            .is_none()
        );
    }
}
