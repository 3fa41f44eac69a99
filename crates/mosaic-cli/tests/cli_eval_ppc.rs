//! `mosaic eval ppc` on the recorded traces: the thresholds,
//! measured by real replays of the ext2 Postmark trace that
//! `scripts/record-traces.sh` records (in `$MOSAIC_TRACES`, else the
//! repository's `target/traces`), and of the CloudPhysics trace.

use std::path::PathBuf;

use crate::common;
use common::{json, ok};

fn traces_dir() -> PathBuf {
    std::env::var_os("MOSAIC_TRACES").map(PathBuf::from).unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/traces"))
}

/// The row of `policy` in a list of eval points.
fn row<'a>(pts: &'a serde_json::Value, policy: &str) -> &'a serde_json::Value {
    pts.as_array().unwrap().iter().find(|p| p["policy"] == policy).unwrap_or_else(|| panic!("no {policy} row in {pts}"))
}

fn f(p: &serde_json::Value, key: &str) -> f64 {
    p[key].as_f64().unwrap_or_else(|| panic!("no {key} in {p}"))
}

/// On the recorded ext2 Postmark trace, against the paper's RAID-5 (a
/// write cache, destage by reading the rest of the stripe): FPC writes at
/// most 0.65x its parity, PPC reads less, PPC+data at most 0.6x.  With the
/// CloudPhysics trace (when the shared folder has it), ppc and ppc+data
/// cost no more device operations than `none`.
#[test]
fn the_recorded_postmark_trace_meets_the_papers_ordering() {
    let dir = traces_dir();
    let ext2 = dir.join("postmark-ext2.csv");
    assert!(ext2.exists(), "{} is missing: run scripts/record-traces.sh (it records the ext2/ext4 Postmark and fio traces into {})", ext2.display(), dir.display());
    let mut args = vec!["eval", "ppc", "--json", "--traces"];
    let d = dir.to_string_lossy().into_owned();
    args.push(&d);
    let cp = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/traces/cloudphysics-vscsi-part1.csv");
    let cps = cp.to_string_lossy().into_owned();
    if cp.exists() {
        args.extend(["--trace", &cps]);
    }
    let out = json(&ok(&args));
    let rec = &out["recorded"][0];
    assert_eq!(rec["name"], "recorded postmark on ext2", "{rec}");
    let pts = &rec["points"];
    let (raid5, fpc, ppc, data) = (row(pts, "raid5"), row(pts, "fpc"), row(pts, "ppc"), row(pts, "ppc+data"));
    let (w, r) = ("parity_writes_per_write", "parity_reads_per_write");
    assert!(f(raid5, w) > 0.0 && f(raid5, r) > 0.0, "raid5 wrote and read parity: {raid5}");
    assert!(f(fpc, w) <= 0.65 * f(raid5, w), "fpc parity writes {} vs raid5 {}", f(fpc, w), f(raid5, w));
    assert!(f(ppc, r) < f(raid5, r), "ppc parity reads {} vs raid5 {}", f(ppc, r), f(raid5, r));
    // Also below mosaic's own small writes (RMW or RCW, whichever reads less).
    let none = row(pts, "none");
    assert!(f(ppc, r) < f(none, r), "ppc parity reads {} vs none {}", f(ppc, r), f(none, r));
    assert!(f(data, r) <= 0.6 * f(raid5, r), "ppc+data parity reads {} vs raid5 {}", f(data, r), f(raid5, r));
    if cp.exists() {
        let t = &out["trace"];
        let ops = |p: &str| row(t, p)["device_ops"].as_u64().unwrap();
        for p in ["ppc", "ppc+data"] {
            assert!(ops(p) <= ops("none"), "cloudphysics: {p} {} device ops vs none {}", ops(p), ops("none"));
        }
    }
}
