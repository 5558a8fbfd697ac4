//! HTML building blocks: escaping (every value from a pack, a manifest, a
//! caller or a store is escaped) and the page frame.

/// `s` escaped for HTML text and attribute values.
pub(crate) fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

const STYLE: &str = r#"
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:0;color:#111827;background:#f9fafb}
header{background:#111827;color:#f9fafb;padding:10px 24px;display:flex;gap:24px;align-items:baseline;flex-wrap:wrap}
header h1{font-size:18px;margin:0}header .stat{color:#d1d5db}header form{margin-left:auto}
main{padding:16px 24px;max-width:1200px}
section{background:#fff;border:1px solid #e5e7eb;border-radius:8px;padding:12px 16px;margin:0 0 16px}
h2{font-size:15px;margin:0 0 8px}
table{border-collapse:collapse;width:100%;font-size:13px}
th,td{text-align:left;padding:4px 8px;border-bottom:1px solid #f3f4f6;vertical-align:top}
th{color:#6b7280;font-weight:600}
td.num{text-align:right;font-variant-numeric:tabular-nums}
code{font:12px ui-monospace,SFMono-Regular,Menlo,monospace}
.ok{color:#15803d}.bad{color:#b91c1c}.muted{color:#6b7280}
.pill{display:inline-block;padding:0 6px;border-radius:9px;background:#eef2ff;margin:1px}
input{font:inherit;padding:3px 6px}button{font:inherit;padding:3px 10px}
"#;

/// A whole page: `title`, an optional header strip, and `body`.
pub(crate) fn page(title: &str, header: &str, body: &str) -> String {
    format!(
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><meta name=\"viewport\" content=\"width=device-width,initial-scale=1\"><title>{}</title><style>{STYLE}</style></head><body><header><h1>wop console</h1>{header}</header><main>{body}</main></body></html>",
        esc(title)
    )
}
