//! The small validators that judge names a pack (or an MCP server)
//! supplies: pack names, manifest paths, component import names (the
//! import gate), tool ids and grant patterns, MCP server ids, error codes
//! and tool descriptors.
//!
//! Input: lines; each line is judged alone and against the next one
//! (as pattern and id), and the whole input as a tool descriptor (JSON).
//!
//! Checks: never panics; what a validator accepts has the documented
//! shape (no `..`/absolute path escapes, only `openwop:node-pack`/`wasi:`
//! imports allowed, a capability granted only if granted, `*` only at a
//! pattern's end, bounded lengths).
#![no_main]

use libfuzzer_sys::fuzz_target;
use wop_core::capability::{ImportVerdict, classify_import};
use wop_core::tools::ToolDescriptor;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(t) = serde_json::from_str::<ToolDescriptor>(text)
        && t.validate().is_ok()
    {
        assert!(t.tool_id.len() <= 256 && t.tool_id.contains(':'), "{t:?}");
    }
    let granted = wop_fuzz::caps(u16::from(data.first().copied().unwrap_or(0)));
    let lines: Vec<&str> = text.split('\n').collect();
    let (_, refusal) = wop_core::pack::judge_imports("fuzz", lines.iter().copied(), &granted);
    let mut any_refused = false;
    for (i, s) in lines.iter().enumerate() {
        one(s, &granted, &mut any_refused);
        let next = lines.get(i + 1).copied().unwrap_or("");
        pair(s, next);
    }
    assert_eq!(refusal.is_some(), any_refused);
});

fn one(s: &str, granted: &std::collections::BTreeSet<wop_core::Capability>, refused: &mut bool) {
    if wop_core::manifest::valid_name(s) {
        assert!(!s.is_empty() && s.len() <= 214);
        assert!(
            !s.bytes()
                .any(|b| b.is_ascii_uppercase() || b == b'\\' || b == b':')
        );
    }
    if wop_core::manifest::check_relative_path(s, "$.x").is_ok() {
        assert!(!s.is_empty() && !s.starts_with(['/', '\\']) && !s.contains(':'));
        assert!(!s.split(['/', '\\']).any(|seg| seg == ".."), "{s:?}");
    }
    if wop_core::policy::mcp::is_valid_server_id(s) {
        assert!(!s.is_empty() && s.len() <= wop_core::policy::mcp::MAX_SERVER_ID_LEN);
        assert!(!s.contains('/'), "{s:?}");
    }
    if wop_core::outcome::valid_code(s) {
        assert!(s.len() <= wop_core::outcome::MAX_CODE_BYTES);
    }
    let _ = wop_core::ErrorCode::parse(s);
    match classify_import(s, granted) {
        ImportVerdict::Allowed => {
            assert!(
                s.starts_with("openwop:node-pack/") || s.starts_with("wasi:"),
                "{s:?}"
            );
        }
        ImportVerdict::Granted(c) => {
            assert!(
                granted.contains(&c) && s.starts_with("openwop:node-pack/"),
                "{s:?}"
            );
        }
        ImportVerdict::Escape(_) => {
            assert!(s.starts_with("wasi:"), "{s:?}");
            *refused = true;
        }
        ImportVerdict::NotGranted(c) => {
            assert!(!granted.contains(&c), "{s:?}");
            *refused = true;
        }
        ImportVerdict::Unknown => *refused = true,
    }
}

fn pair(pattern: &str, id: &str) {
    match wop_core::authz::pattern_matches(pattern, id) {
        Ok(true) => match pattern.strip_suffix('*') {
            Some(prefix) => assert!(id.starts_with(prefix) && !prefix.contains('*')),
            None => assert_eq!(pattern, id),
        },
        Ok(false) => assert!(!pattern.contains('*') || pattern.ends_with('*')),
        Err(_) => assert!(pattern.contains('*')),
    }
    if wop_core::trust::name_matches(pattern, id) {
        let prefix = pattern.strip_suffix('*');
        assert!(prefix.map_or(pattern == id, |p| id.starts_with(p)));
    }
}
