//! The central invariant for the small-write caches: a trace replayed at
//! queue depth 1 on a real raid5 4+1 array behind each cache policy
//! (`mosaic replay --on ARRAY --cache P`, byte mode) and in the simulator
//! (counting mode) gives identical per-member operation counts and bytes,
//! and identical operation counts by kind.
//!
//! The journal is made large enough that the real volume never reaches its
//! half-full checkpoint (which destages everything, a durability step the
//! simulator, with no journal, does not model).

use std::path::Path;

use crate::common;
use common::{device_counts as members, json, msr_trace, ok, TraceSpec};

/// A seeded trace: mixed reads and writes, odd sizes (widened to blocks,
/// so pages of a 64 KiB unit are written in part), half of them in a hot
/// 4 MiB so the caches hit and merge, offsets within `span` (so neither
/// side wraps).
fn trace(path: &Path, n: usize, span: u64) {
    let sizes = [512u64, 1536, 4096, 8192, 12_288, 16384, 65536, 200_000, 262_144, 600_000];
    msr_trace(path, &TraceSpec { seed: 0x2545_f491_4f6c_dd1d, requests: n, span, write_pct: 60, sizes: &sizes, hot: Some(4 << 20) });
}

/// Device operations by kind (data/code, read/write, counts and bytes).
/// The stripe-method counters are left out: the real volume counts them
/// only for the plans `Array` runs itself.
fn kinds(r: &serde_json::Value) -> Vec<(String, u64)> {
    let ops = r["ops"].as_object().unwrap();
    ops.iter().filter(|(k, _)| !k.starts_with("stripes_")).map(|(k, v)| (k.clone(), v.as_u64().unwrap())).collect()
}

/// Replay the trace on a fresh real raid5 4+1 array of stripe unit `unit`
/// behind `policy` and in the simulator; assert identical per-member
/// counts and kinds; the real report.
fn same_ops(dir: &Path, tr: &Path, unit: &str, policy: &str) -> serde_json::Value {
    let arr = dir.join(format!("arr-{unit}-{policy}"));
    let a = arr.to_str().unwrap();
    ok(&["create", "-a", a, "--level", "raid5", "--members", "5", "--member-size", "16M", "--stripe-unit", unit, "--journal-size", "512M"]);
    let trs = tr.to_str().unwrap();
    let cache = ["--cache", policy, "--cache-size", "256K"];
    let mut r = vec!["replay", "--trace", trs, "--on", a, "--queue-depth", "1", "--json"];
    r.extend_from_slice(&cache);
    let real = json(&ok(&r));
    let mut s = vec!["replay", "--trace", trs, "--layout", "raid5", "--drives", "5", "--stripe-unit", unit, "--block-size", "4096", "--mode", "closed", "--queue-depth", "1", "--json"];
    s.extend_from_slice(&cache);
    let simulated = json(&ok(&s));
    let what = format!("unit {unit} cache {policy}");
    assert_eq!(real["requests"], 500, "{what}");
    assert_eq!(real["wrapped"], 0, "{what}: the trace must fit the real array");
    let (rm, sm) = (members(&real), members(&simulated));
    assert_eq!(rm.len(), 5, "{what}");
    assert!(rm.iter().map(|m| m[1]).sum::<u64>() > 500, "{what}: too little work to prove anything");
    assert_eq!(rm, sm, "{what}: per-member counts differ (real, then simulated)");
    assert_eq!(kinds(&real), kinds(&simulated), "{what}: operation counts by kind differ");
    assert_eq!(real["ops"], simulated["ops"], "{what}: stripe-method counts differ");
    // Both ends destage the caches and count it as the writes' work.
    for k in ["device_reads_per_write", "device_writes_per_write"] {
        assert_eq!(real[k], simulated[k], "{what}: {k}");
    }
    real
}

/// (code reads, code writes) of a report.
fn code_ops(r: &serde_json::Value) -> (u64, u64) {
    (r["ops"]["code_reads"].as_u64().unwrap(), r["ops"]["code_writes"].as_u64().unwrap())
}

/// Every policy at one stripe unit: the same operations on both sides, and
/// the policies differ as the paper says they should (the caches did
/// real work on the real array).
fn every_policy(unit: &str) {
    let t = tempfile::tempdir().unwrap();
    let tr = t.path().join("t.csv");
    trace(&tr, 500, 48 << 20);
    let reports: Vec<serde_json::Value> = ["none", "fpc", "ppc", "ppc+data"].iter().map(|p| same_ops(t.path(), &tr, unit, p)).collect();
    let [none, fpc, ppc, ppcd] = [0, 1, 2, 3].map(|i| code_ops(&reports[i]));
    // fpc keeps full parity: fewer code writes than none.
    assert!(fpc.1 < none.1, "unit {unit}: fpc {fpc:?} vs none {none:?}");
    // ppc never reads old code to fold an update in; none's RMW does.
    assert!(ppc.0 < none.0, "unit {unit}: ppc {ppc:?} vs none {none:?}");
    // The old-data buffer saves data reads of ppc's merges.
    let data_reads = |i: usize| reports[i]["ops"]["data_reads"].as_u64().unwrap();
    assert!(data_reads(3) < data_reads(2), "unit {unit}: ppc+data {} vs ppc {} data reads", data_reads(3), data_reads(2));
    assert!(ppcd.0 <= ppc.0, "unit {unit}: ppc+data {ppcd:?} vs ppc {ppc:?}");
    // Reads that the write cache holds cost nothing: the policies' device
    // reads are not all the same.
    let reads: Vec<u64> = reports.iter().map(|r| r["device_reads"].as_u64().unwrap()).collect();
    assert!(reads.windows(2).any(|w| w[0] != w[1]), "unit {unit}: {reads:?}");
}

#[test]
fn caches_real_and_simulated_do_the_same_device_operations_unit_64k() {
    every_policy("64K");
}

#[test]
fn caches_real_and_simulated_do_the_same_device_operations_unit_4k() {
    every_policy("4K");
}
