//! `wop.samples.transform`: a pure JSON transform with no host calls.
//!
//! Input `{"items": [{...}, ...], "select": ["field", ...]?, "sortBy": "field"?}`;
//! output `{"items": [...], "count": n}` where every item is projected onto
//! the `select`ed fields (all fields when `select` is absent) and the list is
//! stably sorted by the `sortBy` field (items lacking it sort first).

use std::cmp::Ordering;

use serde::Deserialize;
use serde_json::{Map, Value, json};
use wop_sdk::{Ctx, NodeError, Outcome, Pack, PackInfo, Request};

/// The pack.
struct Transform;

/// The node's inputs.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Inputs {
    /// The objects to transform.
    items: Vec<Map<String, Value>>,
    /// The fields to keep; all fields when absent.
    #[serde(default)]
    select: Option<Vec<String>>,
    /// The field to sort by; input order when absent.
    #[serde(default)]
    sort_by: Option<String>,
}

/// The rank of a JSON value's type in the sort order.
fn type_rank(value: &Value) -> u8 {
    match value {
        Value::Null => 0,
        Value::Bool(_) => 1,
        Value::Number(_) => 2,
        Value::String(_) => 3,
        Value::Array(_) => 4,
        Value::Object(_) => 5,
    }
}

/// A total order on JSON values: null < booleans < numbers < strings <
/// arrays < objects; arrays and objects compare by their JSON text.
fn compare(a: &Value, b: &Value) -> Ordering {
    match (a, b) {
        (Value::Bool(x), Value::Bool(y)) => x.cmp(y),
        (Value::Number(x), Value::Number(y)) => {
            let (x, y) = (x.as_f64().unwrap_or(0.0), y.as_f64().unwrap_or(0.0));
            x.total_cmp(&y)
        }
        (Value::String(x), Value::String(y)) => x.cmp(y),
        (Value::Array(_), Value::Array(_)) | (Value::Object(_), Value::Object(_)) => {
            a.to_string().cmp(&b.to_string())
        }
        _ => type_rank(a).cmp(&type_rank(b)),
    }
}

impl Pack for Transform {
    fn describe() -> PackInfo {
        PackInfo::new("transform", "0.1.0").node("wop.samples.transform", "0.1.0")
    }

    fn invoke(_ctx: &Ctx, request: Request) -> Result<Outcome, NodeError> {
        let inputs: Inputs = request.inputs_as()?;
        let mut items = inputs.items;
        if let Some(field) = &inputs.sort_by {
            items.sort_by(|a, b| {
                compare(
                    a.get(field).unwrap_or(&Value::Null),
                    b.get(field).unwrap_or(&Value::Null),
                )
            });
        }
        let items: Vec<Value> = items
            .into_iter()
            .map(|item| match &inputs.select {
                None => Value::Object(item),
                Some(fields) => Value::Object(
                    fields
                        .iter()
                        .filter_map(|f| item.get(f).map(|v| (f.clone(), v.clone())))
                        .collect(),
                ),
            })
            .collect();
        let count = items.len();
        Outcome::completed(json!({ "items": items, "count": count }))
    }
}

wop_sdk::export_pack!(Transform);
