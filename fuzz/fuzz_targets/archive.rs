//! Pack archives (`.tgz`) through `wop_core::archive::read_tgz` with small
//! caps: never panics, never returns a path that leaves the pack
//! directory, never more entries or bytes than the caps; and what
//! `write_tgz` writes reads back the same.
#![no_main]

use libfuzzer_sys::fuzz_target;
use wop_core::archive::{check_entry_path, read_tgz_capped, write_tgz};

fuzz_target!(|data: &[u8]| {
    // As given (mostly not gzip), and gzip-wrapped so the tar layer is
    // reached too.
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    let _ = std::io::Write::write_all(&mut gz, data);
    let wrapped = gz.finish().unwrap_or_default();
    for bytes in [data, wrapped.as_slice()] {
        if let Ok(files) = read_tgz_capped(bytes, 16, 1 << 16, 1 << 18) {
            assert!(files.len() <= 16);
            let total: usize = files.values().map(Vec::len).sum();
            assert!(total <= 1 << 18);
            for (p, d) in &files {
                assert!(d.len() <= 1 << 16);
                assert_eq!(check_entry_path(p).as_deref(), Ok(p.as_str()), "{p}");
            }
            if let Ok(again) = write_tgz(&files) {
                assert_eq!(read_tgz_capped(&again, 16, 1 << 16, 1 << 20).ok(), Some(files));
            }
        }
    }
});
