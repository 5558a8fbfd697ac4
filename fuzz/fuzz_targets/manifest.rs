//! `pack.json` bytes → `Manifest::parse` (parser + validator), then what
//! the loader does with a valid manifest before any code is read: the
//! signed bytes (JCS), the upgrade diff, and grants/limits/egress
//! resolution against a policy.
//!
//! Checks: never panics; a valid manifest re-serialized by us
//! re-parses to the same manifest (with `kind`/`engines` restored); its
//! paths stay inside the pack directory; a manifest adds nothing to itself.
#![no_main]

use libfuzzer_sys::fuzz_target;
use serde_json::{Value, json};
use wop_core::manifest::{Manifest, check_relative_path};
use wop_core::policy::Policy;

fuzz_target!(|data: &[u8]| {
    let _ = wop_core::trust::signed_bytes(data);
    let Ok(m) = Manifest::parse(data) else {
        return;
    };
    assert!(wop_core::manifest::valid_name(&m.name), "{m:?}");
    assert!(
        check_relative_path(&m.runtime.entry, "$.runtime.entry").is_ok(),
        "{m:?}"
    );
    assert!(!m.nodes.is_empty());
    assert!(wop_core::trust::diff::additions(&m, &m).is_empty(), "{m:?}");

    // Our own rendering of a valid manifest is valid and means the same.
    if let Ok(mut v) = serde_json::to_value(&m) {
        if let Some(o) = v.as_object_mut() {
            o.insert("kind".into(), json!("node"));
            let openwop = o.remove("openwop").unwrap_or(Value::Null);
            o.insert("engines".into(), json!({ "openwop": openwop }));
            if let Some(w) = o.remove("wop") {
                o.insert("x-wop".into(), w);
            }
        }
        match Manifest::parse(v.to_string().as_bytes()) {
            Ok(again) => assert_eq!(again, m, "re-parse of {v}"),
            Err(e) => panic!("our rendering of a valid manifest is refused: {e}\n{v}"),
        }
    }

    for policy in [Policy::default(), generous()] {
        let r = wop_core::pack::resolve(&policy, &m);
        // requested ∩ granted, plus the base set: never more than asked.
        for c in &r.effective {
            assert!(c.is_base() || m.wop.capabilities.contains(c), "{c:?}");
        }
        // Limits are clamped to the operator's ceilings.
        let ceil = policy.limits();
        assert!(r.limits.fuel <= ceil.fuel);
        assert!(r.limits.memory_bytes <= ceil.memory_bytes);
        assert!(r.limits.wall_clock_ms <= ceil.wall_clock_ms);
        assert!(r.limits.output_bytes <= ceil.output_bytes);
    }
});

fn generous() -> Policy {
    Policy::from_toml(wop_fuzz::GENEROUS_POLICY).unwrap_or_default()
}
