//! Operator policy TOML → `Policy::from_toml` (serde + every section's
//! validation: limits, tools, prices, runs, effects, mcp, trust, egress,
//! per-pack grants), then the accessors the runtime calls.
//!
//! Checks: never panics; a policy that loads renders back to TOML that
//! loads to the same policy; derived limits/budgets/settings are computed
//! without panicking; a pack's grant resolves against a manifest.
#![no_main]

use libfuzzer_sys::fuzz_target;
use wop_core::manifest::Manifest;
use wop_core::policy::Policy;

const MANIFEST: &str = r#"{"kind":"node","name":"fuzz.pack","version":"1.0.0",
 "engines":{"openwop":">=1.0.0"},
 "nodes":[{"typeId":"fuzz.node","version":"1.0.0","category":"c","role":"worker"}],
 "runtime":{"language":"wasm-component","entry":"pack.wasm"},
 "x-wop":{"sha256":"0000000000000000000000000000000000000000000000000000000000000000",
  "capabilities":["tools","http","mcp"],"tools":["crm:*"],
  "egress":["api.example.com","*.example.org:*"],
  "limits":{"fuel":1000,"memoryBytes":1048576},
  "mcp":{"servers":["everything"]}}}"#;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(p) = Policy::from_toml(text) else {
        return;
    };
    let _ = p.limits();
    let _ = p.runs.budget();
    let _ = p.runs.bounds();
    let _ = p.egress.settings();
    let _ = p.effects.store_spec();
    if let Ok(m) = Manifest::parse(MANIFEST.as_bytes()) {
        let r = wop_core::pack::resolve(&p, &m);
        for c in &r.effective {
            assert!(c.is_base() || m.wop.capabilities.contains(c), "{c:?}");
        }
        let _ = wop_core::pack::check_escalation(&p, &m);
        let _ = wop_core::pack::signature_required(&p, &m.name);
    }
    for name in p.packs.keys() {
        let _ = p.grant(name);
    }
    // What we accept, we can write back, and it means the same.
    match toml::to_string(&p) {
        Ok(again) => match Policy::from_toml(&again) {
            Ok(q) => assert_eq!(p, q, "round trip through\n{again}"),
            Err(e) => panic!("a loaded policy renders to a refused one: {e}\n{again}"),
        },
        Err(e) => panic!("a loaded policy does not render to TOML: {e}"),
    }
});
