//! `mosaic advise` refuses requests longer than the simulator plans as
//! one (mosaic_sim::engine::MAX_REQUEST, 1 GiB), as `replay` does.

use std::fs;

use crate::common;
use common::{fails, json, mosaic};

/// A request over 1 GiB (a damaged size) is refused at once, naming its
/// line; with --skip-bad it is skipped, counted and warned of.
#[test]
fn advise_refuses_requests_over_1_gib() {
    let t = tempfile::tempdir().unwrap();
    let p = t.path().join("w.csv");
    let s = |p: &std::path::Path| p.to_str().unwrap().to_string();
    let mut text = String::new();
    for i in 0..200u64 {
        text.push_str(&format!("{},h,0,Write,{},65536,10\n", 128166372003061629 + i * 10_000, i * 65536));
    }
    for (len, line) in [((1u64 << 30) + 4096, 201), (1 << 40, 201)] {
        let bad = format!("{text}128166372013061629,h,0,Write,0,{len},10\n128166372013061630,h,0,Write,0,4096,10\n");
        fs::write(&p, bad).unwrap();
        let start = std::time::Instant::now();
        let e = fails(&["advise", "--trace", &s(&p)]);
        assert!(e.contains(&format!("w.csv:{line}: field 'Size': a write of {len} bytes at offset 0: larger than the 1073741824 bytes")), "{e}");
        assert!(start.elapsed().as_secs() < 60, "refused only after {:?}", start.elapsed());
        let out = mosaic(&["advise", "--skip-bad", "--trace", &s(&p), "--json"]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{err}");
        assert!(err.contains("skipped 1 malformed lines (--skip-bad)"), "{err}");
        assert_eq!(json(&String::from_utf8_lossy(&out.stdout))["writes"], 201);
    }
    // Reads are held to the same cap (replay refuses them too).
    fs::write(&p, format!("{text}128166372013061629,h,0,Read,0,{},10\n", 1u64 << 40)).unwrap();
    let e = fails(&["advise", "--trace", &s(&p)]);
    assert!(e.contains("w.csv:201: field 'Size': a read of 1099511627776 bytes"), "{e}");
}
