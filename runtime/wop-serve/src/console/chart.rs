//! The cost chart: an SVG drawn on the server (no chart library, no
//! script): one line per pack over the last minutes, with axes and a
//! legend.

use super::html::esc;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

const W: f64 = 720.0;
const H: f64 = 220.0;
const PAD_L: f64 = 64.0;
const PAD_B: f64 = 28.0;
const PAD_T: f64 = 12.0;
const PAD_R: f64 = 12.0;
const COLORS: [&str; 8] = [
    "#2563eb", "#dc2626", "#16a34a", "#9333ea", "#ea580c", "#0891b2", "#ca8a04", "#4b5563",
];

/// The SVG of `series` (minute → pack → cost) over the `minutes` ending at
/// `now_minute`; `currency` labels the axis.
pub(crate) fn cost_svg(
    series: &BTreeMap<u64, BTreeMap<String, f64>>,
    now_minute: u64,
    minutes: u64,
    currency: &str,
) -> String {
    let first = now_minute.saturating_sub(minutes.saturating_sub(1));
    let packs: BTreeSet<&String> = series.values().flat_map(|m| m.keys()).collect();
    let max = series
        .values()
        .flat_map(|m| m.values())
        .copied()
        .fold(0.0_f64, f64::max);
    let top = if max > 0.0 { max * 1.1 } else { 1.0 };
    let x = |minute: u64| {
        PAD_L
            + (minute.saturating_sub(first)) as f64 * (W - PAD_L - PAD_R)
                / (minutes.max(2) - 1) as f64
    };
    let y = |v: f64| H - PAD_B - v / top * (H - PAD_B - PAD_T);
    let mut s = String::new();
    let _ = write!(
        s,
        r#"<svg id="cost-chart" role="img" aria-label="cost per pack per minute" viewBox="0 0 {W} {H}" width="100%" height="{H}" xmlns="http://www.w3.org/2000/svg">"#
    );
    // Axes and a few gridlines with labels.
    for i in 0..=4 {
        let v = top * f64::from(i) / 4.0;
        let yy = y(v);
        let _ = write!(
            s,
            r##"<line x1="{PAD_L}" y1="{yy:.1}" x2="{}" y2="{yy:.1}" stroke="#e5e7eb"/><text x="{}" y="{:.1}" font-size="11" text-anchor="end" fill="#6b7280">{v:.4}</text>"##,
            W - PAD_R,
            PAD_L - 6.0,
            yy + 4.0
        );
    }
    let _ = write!(
        s,
        r##"<text x="{PAD_L}" y="{}" font-size="11" fill="#6b7280">{} min ago</text><text x="{}" y="{}" font-size="11" text-anchor="end" fill="#6b7280">now ({})</text>"##,
        H - 8.0,
        minutes,
        W - PAD_R,
        H - 8.0,
        esc(currency)
    );
    for (i, pack) in packs.iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        let points: Vec<String> = (first..=now_minute)
            .map(|m| {
                let v = series
                    .get(&m)
                    .and_then(|p| p.get(*pack))
                    .copied()
                    .unwrap_or(0.0);
                format!("{:.1},{:.1}", x(m), y(v))
            })
            .collect();
        let _ = write!(
            s,
            r#"<polyline class="series" data-pack="{}" fill="none" stroke="{color}" stroke-width="2" points="{}"/>"#,
            esc(pack),
            points.join(" ")
        );
        let ly = PAD_T + 14.0 * i as f64;
        let _ = write!(
            s,
            r#"<rect x="{}" y="{:.1}" width="10" height="10" fill="{color}"/><text x="{}" y="{:.1}" font-size="11">{}</text>"#,
            PAD_L + 8.0,
            ly,
            PAD_L + 22.0,
            ly + 9.0,
            esc(pack)
        );
    }
    if packs.is_empty() {
        let _ = write!(
            s,
            r##"<text x="{}" y="{}" font-size="13" text-anchor="middle" fill="#6b7280">no invocations with a cost yet</text>"##,
            W / 2.0,
            H / 2.0
        );
    }
    s.push_str("</svg>");
    s
}
