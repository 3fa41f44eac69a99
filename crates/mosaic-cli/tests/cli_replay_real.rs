//! The central invariant: a trace replayed at queue depth 1 on a real
//! array (`mosaic replay --on`) and in the simulator, with the same layout,
//! gives identical per-member operation counts and bytes, and identical
//! operation counts by kind and stripe method.

use std::path::Path;

use crate::common;
use common::{device_counts as members, json, msr_trace, ok, TraceSpec};

/// A seeded trace: mixed reads and writes, odd sizes (widened to blocks),
/// offsets within `span` (so neither side wraps).
fn trace(path: &Path, n: usize, span: u64, write_pct: u64) {
    let sizes = [512u64, 1536, 4096, 8192, 16384, 65536, 200_000, 262_144];
    msr_trace(path, &TraceSpec { seed: 0x9e37_79b9_7f4a_7c15, requests: n, span, write_pct, sizes: &sizes, hot: None });
}

/// Replay one trace on a real array of `level` and in the simulator;
/// assert identical per-member counts; both reports.  A `:zoned`
/// suffix marks a log-structured kind (DVS), whose report has no
/// stripe-method counts.
fn same_ops(level: &str, create: &[&str], sim: &[&str]) -> (serde_json::Value, serde_json::Value) {
    let t = tempfile::tempdir().unwrap();
    let tr = t.path().join("t.csv");
    let (n, writes) = workload(level);
    trace(&tr, n, span(level), writes);
    let arr = t.path().join("arr");
    let a = arr.to_str().unwrap();
    let kind = if level.starts_with("remap:") { "remap" } else { level.trim_end_matches(":zoned") };
    let mut c = vec!["create", "-a", a, "--level", kind, "--stripe-unit", "64K"];
    c.extend_from_slice(create);
    ok(&c);
    let trs = tr.to_str().unwrap();
    let real = json(&ok(&["replay", "--trace", trs, "--on", a, "--queue-depth", "1", "--json"]));
    let mut s = vec!["replay", "--trace", trs, "--layout", level.trim_end_matches(":zoned"), "--stripe-unit", "64K", "--block-size", "4096", "--mode", "closed", "--queue-depth", "1", "--json"];
    s.extend_from_slice(sim);
    let simulated = json(&ok(&s));
    assert_eq!(real["requests"], n as u64);
    assert_eq!(real["wrapped"], 0, "{level}: the trace must fit the real array");
    let (rm, sm) = (members(&real), members(&simulated));
    assert_eq!(rm.len(), sm.len(), "{level}");
    assert!(rm.iter().map(|m| m[1]).sum::<u64>() > 600, "{level}: too little work to prove anything");
    assert_eq!(rm, sm, "{level}: per-member counts differ (real, then simulated)");
    if level.ends_with(":zoned") || level == "tier" || level.starts_with("remap:") {
        return (real, simulated);
    }
    assert_eq!(real["ops"], simulated["ops"], "{level}: operation counts by kind differ");
    if level == "raid1" {
        return (real, simulated); // mirrors: no small-write methods
    }
    // The workload exercises small writes (read-modify-write or reconstruct-write).
    let small = |k: &str| real["ops"][k].as_u64().unwrap();
    assert!(small("stripes_rmw") + small("stripes_rcw") > 100, "{level}: {}", real["ops"]);
    (real, simulated)
}

#[test]
fn raid5_real_and_simulated_do_the_same_device_operations() {
    same_ops("raid5", &["--members", "5", "--member-size", "16M"], &["--drives", "5"]);
}

/// A mirror of mixed drives with its slow member write-mostly (md's
/// `--write-mostly`): the real array and the simulator given the same
/// flag read the same members, and the write-mostly one is never read
/// while the others serve; without the flag it takes its share.
#[test]
fn raid1_write_mostly_real_and_simulated_do_the_same_device_operations() {
    let (real, _) = same_ops("raid1", &["--members", "3", "--member-size", "64M", "--write-mostly", "1"], &["--drives", "3", "--write-mostly", "1"]);
    let m = members(&real);
    assert!(m[1][0] == 0 && m[0][0] > 0 && m[2][0] > 0, "member 1 is written, never read: {m:?}");
    assert!(m.iter().all(|c| c[1] == m[0][1]), "every copy written alike: {m:?}");
    let (real, _) = same_ops("raid1", &["--members", "3", "--member-size", "64M"], &["--drives", "3"]);
    assert!(members(&real)[1][0] > 0, "without the flag member 1 takes reads");
}

#[test]
fn raid6_real_and_simulated_do_the_same_device_operations() {
    same_ops("raid6", &["--members", "6", "--member-size", "16M"], &["--drives", "6"]);
}

#[test]
fn nested_cbro_real_and_simulated_do_the_same_device_operations() {
    same_ops("cbro:4+1,cda=raid5:3", &["--member-size", "16M"], &[]);
}

/// Requests and percent writes: DVS gets enough writes to fill its
/// 153 MiB and garbage-collect.
fn workload(level: &str) -> (usize, u64) {
    if level.ends_with(":zoned") || level == "tier" {
        (2500, 85)
    } else if level.starts_with("remap:") {
        // One outer operation per request: more requests.
        (1500, 60)
    } else {
        (600, 60)
    }
}

/// The trace's span: within the array (DVS: its 153 MiB of 5 x 64 MiB).
fn span(level: &str) -> u64 {
    if level == "tier" {
        96 << 20
    } else if level.ends_with(":zoned") {
        140 << 20
    } else {
        48 << 20
    }
}

#[test]
fn dvs_real_and_simulated_do_the_same_device_operations_gc_and_metadata_included() {
    // The simulated drives are shaped like the real members: 64 MiB of
    // 8 MiB zones, the first conventional (where DVS keeps its metadata).
    let (_, simulated) = same_ops(
        "dvs:zoned",
        &["--members", "5", "--member-size", "64M", "--zoned", "--zone-size", "8M"],
        &["--drives", "5", "--device", "smr:default,capacity=67108864,zone_size=8388608,conventional_zones=1"],
    );
    // The metadata log and garbage collection are among the operations
    // both sides counted.
    assert!(simulated["ops"]["meta_writes"].as_u64().unwrap() > 100, "{}", simulated["ops"]);
    let policy = |k: &str| simulated["policy"].as_array().unwrap().iter().find(|p| p[0] == k).map(|p| p[1].as_f64().unwrap()).unwrap();
    assert!(policy("foreground gc") + policy("background gc") > 0.0 && policy("gc moved chunks") > 100.0, "{}", simulated["policy"]);
}

#[test]
fn tier_real_and_simulated_do_the_same_device_operations_demotion_and_map_included() {
    // The simulated arrays are sized like the real ones: a raid1 of two
    // 24 MiB SSDs in front of a raid5 of five 32 MiB HDDs, so the trace
    // overflows the fast tier and demotes.
    // Both decide by the request clock: the policy's time-based choices
    // (write runs, ReHypar's d/t, recency) then follow the requests, not
    // how fast either side's drives are.
    let sizes = ["--fast", "raid1:2", "--slow", "raid5:5", "--fast-size", "24M", "--slow-size", "32M", "--tier-request-clock", "1000000"];
    let mut sim = sizes.to_vec();
    sim.extend(["--device", "0-1=ssd:samsung-830-128g", "--device", "2-6=hdd:seagate-st91000640ss"]);
    let (real, simulated) = same_ops("tier", &sizes, &sim);
    let policy = |k: &str| simulated["policy"].as_array().unwrap().iter().find(|p| p[0] == k).map(|p| p[1].as_f64().unwrap()).unwrap();
    assert!(policy("demote_batches") > 0.0, "{}", simulated["policy"]);
    assert!(policy("map_bytes_written") > 0.0, "{}", simulated["policy"]);
    // The two members are the inner arrays: fast, then slow.
    assert_eq!(members(&real).len(), 2);
}

#[test]
fn remap_real_and_simulated_do_the_same_device_operations() {
    // The remapped array over a raid5 of four 24 MiB drives, as created
    // and as replayed; both count the operations on their one member,
    // the inner array.
    let (real, _) = same_ops("remap:raid5", &["--inner", "raid5:4", "--member-size", "24M"], &["--drives", "4", "--member-size", "24M"]);
    assert_eq!(members(&real).len(), 1);
}
