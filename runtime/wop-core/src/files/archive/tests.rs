use super::*;
use std::io::Write as _;

/// One raw USTAR header (no validation: hostile archives are built here).
fn header(name: &str, kind: u8, size: u64, link: &str) -> [u8; 512] {
    let mut h = [0u8; 512];
    h[..name.len()].copy_from_slice(name.as_bytes());
    h[100..107].copy_from_slice(b"0000644");
    h[108..115].copy_from_slice(b"0000000");
    h[116..123].copy_from_slice(b"0000000");
    let sz = format!("{size:011o}");
    h[124..124 + sz.len()].copy_from_slice(sz.as_bytes());
    h[136..147].copy_from_slice(b"00000000000");
    h[156] = kind;
    h[157..157 + link.len()].copy_from_slice(link.as_bytes());
    h[257..263].copy_from_slice(b"ustar\0");
    h[263..265].copy_from_slice(b"00");
    h[148..156].copy_from_slice(b"        ");
    let sum: u32 = h.iter().map(|&b| u32::from(b)).sum();
    let ck = format!("{sum:06o}\0 ");
    h[148..156].copy_from_slice(ck.as_bytes());
    h
}

/// A GNU sparse entry whose real size is `real`: one byte of data at its
/// very end, the rest a hole.
fn gnu_sparse(name: &str, real: u64) -> ([u8; 512], Vec<u8>) {
    let mut h = header(name, b'S', 1, "");
    h[257..265].copy_from_slice(b"ustar  \0");
    let off = format!("{:011o}", real - 1);
    h[386..386 + off.len()].copy_from_slice(off.as_bytes());
    h[398..409].copy_from_slice(b"00000000001");
    let rs = format!("{real:011o}");
    h[483..483 + rs.len()].copy_from_slice(rs.as_bytes());
    h[148..156].copy_from_slice(b"        ");
    let sum: u32 = h.iter().map(|&b| u32::from(b)).sum();
    h[148..156].copy_from_slice(format!("{sum:06o}\0 ").as_bytes());
    (h, vec![1u8])
}

/// A gzip-compressed tar of raw (header, data) entries.
fn tgz(entries: &[([u8; 512], Vec<u8>)]) -> Vec<u8> {
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    for (h, data) in entries {
        gz.write_all(h).unwrap();
        gz.write_all(data).unwrap();
        let pad = (512 - data.len() % 512) % 512;
        gz.write_all(&vec![0u8; pad]).unwrap();
    }
    gz.write_all(&[0u8; 1024]).unwrap();
    gz.finish().unwrap()
}

fn file(name: &str, data: &[u8]) -> ([u8; 512], Vec<u8>) {
    (header(name, b'0', data.len() as u64, ""), data.to_vec())
}

#[test]
fn writing_is_deterministic_and_reads_back() {
    let mut files = BTreeMap::new();
    files.insert("pack.json".to_owned(), b"{}".to_vec());
    files.insert("keys/pack.json.sig".to_owned(), vec![7u8; 64]);
    files.insert("hello.wasm".to_owned(), vec![0, 97, 115, 109]);
    let a = write_tgz(&files).unwrap();
    let b = write_tgz(&files).unwrap();
    assert_eq!(a, b, "same files, same bytes");
    assert_eq!(read_tgz(&a).unwrap(), files);
    assert!(integrity(&a).starts_with("sha256-"));
    // Sorted entries, mtime 0, mode 644, uid/gid 0.
    let mut ar = tar::Archive::new(flate2::read::GzDecoder::new(a.as_slice()));
    let seen: Vec<(String, u64, u32, u64)> = ar
        .entries()
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            let h = e.header();
            (
                e.path().unwrap().display().to_string(),
                h.mtime().unwrap(),
                h.mode().unwrap(),
                h.uid().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        seen,
        [
            ("hello.wasm".to_owned(), 0, 0o644, 0),
            ("keys/pack.json.sig".to_owned(), 0, 0o644, 0),
            ("pack.json".to_owned(), 0, 0o644, 0),
        ]
    );
}

#[test]
fn hostile_entries_are_refused_by_reason() {
    for (entries, reason) in [
        (vec![file("../evil", b"x")], "parent-path"),
        (vec![file("a/../../evil", b"x")], "parent-path"),
        (vec![file("/etc/passwd", b"x")], "absolute-path"),
        (vec![file("a\\b", b"x")], "bad-path"),
        (vec![(header("l", b'2', 0, "/etc/passwd"), vec![])], "link"),
        (vec![(header("h", b'1', 0, "pack.json"), vec![])], "link"),
        (vec![(header("dev", b'3', 0, ""), vec![])], "special-file"),
        (vec![(header("fifo", b'6', 0, ""), vec![])], "special-file"),
        // A GNU sparse entry claiming 2 GB: refused by type, nothing read.
        (vec![gnu_sparse("sparse", 2 << 30)], "special-file"),
        // A regular entry declaring 2 GB: refused before reading.
        (
            vec![(header("big.wasm", b'0', 2 << 30, ""), vec![])],
            "entry-too-large",
        ),
        (vec![file("a", b"1"), file("a", b"2")], "duplicate"),
    ] {
        let e = read_tgz(&tgz(&entries)).unwrap_err();
        assert_eq!(e.reason, reason, "{e}");
    }
    assert_eq!(read_tgz(b"PK\x03\x04zip").unwrap_err().reason, "not-gzip");
    let mut junk = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    junk.write_all(&[1u8; 700]).unwrap();
    assert_eq!(
        read_tgz(&junk.finish().unwrap()).unwrap_err().reason,
        "not-tar"
    );
}

#[test]
fn a_hundred_thousand_entries_stop_at_the_cap() {
    let one = file("f", b"");
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    for i in 0..100_000u32 {
        let h = header(&format!("f{i}"), b'0', 0, "");
        gz.write_all(&h).unwrap();
    }
    gz.write_all(&[0u8; 1024]).unwrap();
    let bytes = gz.finish().unwrap();
    drop(one);
    let e = read_tgz(&bytes).unwrap_err();
    assert_eq!(e.reason, "too-many-entries", "{e}");
}

#[test]
fn a_gzip_bomb_stops_at_the_decompressed_cap() {
    // 64 MiB of zeros compress to a few tens of KiB; the caps here are
    // small so the test is quick, the mechanism is the default's.
    let zeros = vec![0u8; 64 << 20];
    let bomb = tgz(&[file("z", &zeros)]);
    assert!(bomb.len() < 1 << 20, "{}", bomb.len());
    let e = read_tgz_capped(&bomb, 8, 128 << 20, 1 << 20).unwrap_err();
    assert_eq!(e.reason, "too-large", "{e}");
    // Trailing garbage after the cap is never reached either.
    let e = read_tgz_capped(&bomb, 8, 1 << 20, 128 << 20).unwrap_err();
    assert_eq!(e.reason, "entry-too-large", "{e}");
}

#[test]
fn the_gzip_stream_is_read_to_its_end_and_checked() {
    let good = tgz(&[file("pack.json", b"{}")]);
    assert!(read_tgz(&good).is_ok());
    let n = good.len();
    let mut crc = good.clone();
    crc[n - 8] ^= 1;
    let mut len = good.clone();
    len[n - 2] ^= 1;
    let mut junk = good.clone();
    junk.extend_from_slice(b"junk");
    let mut two = good.clone();
    two.extend_from_slice(&good);
    for (what, bytes, reason) in [
        ("crc", crc, "gzip-trailer"),
        ("length", len, "gzip-trailer"),
        ("cut", good[..n - 8].to_vec(), "gzip-truncated"),
        ("cut-1", good[..n - 1].to_vec(), "gzip-truncated"),
        ("junk", junk, "trailing-bytes"),
        ("two-members", two, "trailing-bytes"),
    ] {
        let e = read_tgz(&bytes).unwrap_err();
        assert_eq!(
            (e.reason, e.code),
            (reason, ErrorCode::PackArchiveCorrupt),
            "{what}: {e}"
        );
    }
}

#[test]
fn long_paths_are_refused_before_anything_is_written() {
    let seg = "a".repeat(256);
    let e = check_entry_path(&seg).unwrap_err();
    assert_eq!(
        (e.reason, e.limit, e.observed),
        ("path-too-long", Some(255), Some(256))
    );
    assert_eq!(e.code, ErrorCode::PackArchiveInvalid);
    assert!(check_entry_path(&"a".repeat(255)).is_ok());
    let deep = vec!["d".repeat(200); 6].join("/");
    let e = check_entry_path(&deep).unwrap_err();
    assert_eq!((e.reason, e.limit), ("path-too-long", Some(1024)));
}

#[test]
fn the_root_directory_entry_is_skipped() {
    let dot = (header("./", b'5', 0, ""), vec![]);
    let files = read_tgz(&tgz(&[dot, file("./pack.json", b"{}")])).unwrap();
    assert_eq!(files.keys().collect::<Vec<_>>(), ["pack.json"]);
}

#[test]
fn real_sized_packs_fit_and_the_entry_cap_reports_its_numbers() {
    let many: Vec<_> = (0..200).map(|i| file(&format!("f{i}"), b"x")).collect();
    assert_eq!(read_tgz(&tgz(&many)).unwrap().len(), 200);
    let e = read_tgz_capped(&tgz(&many), 100, 1 << 20, 1 << 30).unwrap_err();
    assert_eq!(
        (e.reason, e.code, e.limit, e.observed),
        (
            "too-many-entries",
            ErrorCode::PackTooLarge,
            Some(100),
            Some(101)
        )
    );
}
