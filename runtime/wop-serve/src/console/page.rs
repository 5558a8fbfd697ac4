//! The console's pages, rendered on the server from the service's state.

use super::html::{esc, page};
use crate::observe::recent;
use crate::state::Shared;
use serde_json::Value;
use std::fmt::Write as _;
use wop_runtime::effects::RunEffects;

/// The login form (with an error, after a refused token).
pub(crate) fn login(error: Option<&str>) -> String {
    let err = error.map_or(String::new(), |e| {
        format!(r#"<p class="bad" id="login-error">{}</p>"#, esc(e))
    });
    page(
        "wop console: sign in",
        "",
        &format!(
            r#"<section><h2>Sign in</h2>{err}<p class="muted">Paste an operator token (scope <code>wop.operator</code>). It is checked once; the browser then holds a session cookie (HttpOnly, SameSite=Strict), never the token.</p>
<form method="post" action="/console/login"><input type="password" name="token" id="token" size="48" autocomplete="off" required> <button type="submit" id="sign-in">Sign in</button></form></section>"#
        ),
    )
}

/// One run's effects, for the run form.
pub(crate) struct RunView {
    pub tenant: String,
    pub run: String,
    /// The first page of its listing (the console shows at most
    /// [`MAX_PAGE`](wop_runtime::effects::MAX_PAGE) effects).
    pub effects: Result<RunEffects, String>,
}

/// The dashboard.
pub(crate) fn dashboard(st: &Shared, principal: &str, run: Option<RunView>) -> String {
    let (_, h) = st.health();
    let header = format!(
        r#"<span class="stat">{} packs · {} node types</span><span class="stat">in flight {} / {}</span><span class="stat">connections {} / {}</span><span class="stat">store {}</span><span class="stat">signed in as {}</span><form method="post" action="/console/logout"><button>Sign out</button></form>"#,
        h["packs"],
        h["nodeTypes"],
        h["inFlight"],
        h["maxInFlight"],
        h["connections"],
        h["maxConnections"],
        h["store"].as_str().unwrap_or("?"),
        esc(principal)
    );
    let mut body = String::new();
    packs(st, &mut body);
    refused(&st.refused, &mut body);
    recent(st, &mut body);
    cost(st, &mut body);
    run_effects(run, &mut body);
    page("wop console", &header, &body)
}

fn packs(st: &Shared, out: &mut String) {
    out.push_str(r#"<section id="packs"><h2>Loaded packs</h2><table><tr><th>pack</th><th>version</th><th>node types</th><th>capabilities (effective)</th><th>limits</th><th>provenance</th></tr>"#);
    for p in st.rt.packs() {
        let caps: Vec<String> = p
            .capabilities
            .iter()
            .map(|c| format!(r#"<span class="pill">{}</span>"#, esc(c.as_str())))
            .collect();
        let types: Vec<String> = p
            .type_ids
            .iter()
            .map(|t| format!("<code>{}</code>", esc(t)))
            .collect();
        let _ = write!(
            out,
            r#"<tr class="pack"><td><b>{}</b></td><td>{}</td><td>{}</td><td>{}</td><td class="muted">fuel {} · {} ms · {} MiB</td><td class="provenance">{}</td></tr>"#,
            esc(&p.name),
            esc(&p.version),
            types.join("<br>"),
            caps.join(" "),
            p.limits.fuel,
            p.limits.wall_clock_ms,
            p.limits.memory_bytes >> 20,
            esc(st.provenance.get(&p.name).map_or("", String::as_str)),
        );
    }
    out.push_str("</table></section>");
}

fn refused(list: &[Value], out: &mut String) {
    if list.is_empty() {
        return;
    }
    out.push_str(r#"<section id="refused"><h2>Refused packs</h2><table><tr><th>where</th><th>code</th><th>why</th></tr>"#);
    for r in list {
        let s = |k: &str| esc(r.get(k).and_then(Value::as_str).unwrap_or(""));
        let _ = write!(
            out,
            r#"<tr><td><code>{}</code></td><td class="bad">{}</td><td>{}</td></tr>"#,
            s("dir"),
            s("code"),
            s("message")
        );
    }
    out.push_str("</table></section>");
}

fn recent(st: &Shared, out: &mut String) {
    let rows = st.observers.recent.latest(50);
    let _ = write!(
        out,
        r#"<section id="recent"><h2>Recent invocations <span class="muted">(last {} of up to {})</span></h2><table><tr><th>at (UTC)</th><th>tenant</th><th>node type</th><th>outcome</th><th>wall ms</th><th>fuel</th><th>cost</th><th>invocation</th></tr>"#,
        rows.len(),
        recent::RING
    );
    for r in rows {
        let class = if r.code == "completed" { "ok" } else { "bad" };
        let _ = write!(
            out,
            r#"<tr class="invocation"><td>{}</td><td>{}</td><td><code>{}</code></td><td class="{class} code">{}</td><td class="num">{:.2}</td><td class="num">{}</td><td class="num">{:.6} {}</td><td><code>{}</code></td></tr>"#,
            esc(&crate::wire::rfc3339(r.at_ms)),
            esc(&r.tenant),
            esc(&r.type_id),
            esc(&r.code),
            r.wall_us as f64 / 1000.0,
            r.fuel,
            r.cost,
            esc(&r.currency),
            esc(&r.invocation_id)
        );
    }
    out.push_str("</table></section>");
}

fn cost(st: &Shared, out: &mut String) {
    let series = st.observers.recent.cost_series();
    let now = wop_runtime::effects::now_ms() / 60_000;
    let currency = st.rt.policy().prices.currency.clone();
    let _ = write!(
        out,
        r#"<section id="cost"><h2>Cost per pack, per minute <span class="muted">(last {} minutes, the policy's price table)</span></h2>{}</section>"#,
        recent::MINUTES,
        super::chart::cost_svg(&series, now, recent::MINUTES, &currency)
    );
}

fn run_effects(run: Option<RunView>, out: &mut String) {
    let (tenant, id) = run.as_ref().map_or((String::new(), String::new()), |r| {
        (r.tenant.clone(), r.run.clone())
    });
    let _ = write!(
        out,
        r#"<section id="effects"><h2>A run's effects</h2><form method="get" action="/console">tenant <input name="tenant" value="{}" required> run <input name="run" value="{}" required> <button>Show</button></form>"#,
        esc(&tenant),
        esc(&id)
    );
    if let Some(r) = run {
        match r.effects {
            Err(e) => {
                let _ = write!(out, r#"<p class="bad">{}</p>"#, esc(&e));
            }
            Ok(page) if page.effects.is_empty() => {
                out.push_str(r#"<p class="muted">no effects recorded for this run</p>"#);
            }
            Ok(page) => {
                out.push_str("<table><tr><th>effect</th><th>node</th><th>attempt</th><th>keying</th><th>state</th><th>at (UTC)</th></tr>");
                let shown = page.effects.len();
                for e in page.effects {
                    let state = serde_json::to_value(e.state)
                        .ok()
                        .and_then(|v| v.as_str().map(str::to_owned))
                        .unwrap_or_default();
                    let keying = serde_json::to_value(e.keying)
                        .ok()
                        .and_then(|v| v.as_str().map(str::to_owned))
                        .unwrap_or_default();
                    let _ = write!(
                        out,
                        r#"<tr class="effect"><td><code>{}</code></td><td>{}</td><td class="num">{}</td><td>{}</td><td>{}</td><td>{}</td></tr>"#,
                        esc(&e.effect_id),
                        esc(&e.node_id),
                        e.attempt,
                        esc(&keying),
                        esc(&state),
                        esc(&crate::wire::rfc3339(e.at))
                    );
                }
                out.push_str("</table>");
                if page.next.is_some() {
                    let _ = write!(
                        out,
                        r#"<p class="muted">the first {shown} effects of this run; <code>GET /runs/{{runId}}/effects?after=</code> lists the rest</p>"#
                    );
                }
            }
        }
    }
    out.push_str("</section>");
}
