//! DVS-RAID from the command line: a zoned array on files, the replay
//! comparison on SMR models, and the errors.

use std::fs;

mod common;
use common::{fails, json, ok};


#[test]
fn dvs_array_round_trip_on_zoned_files() {
    let t = tempfile::tempdir().unwrap();
    let d = t.path().join("dvs");
    let ds = d.to_str().unwrap();
    ok(&["create", "-a", ds, "--level", "dvs", "--members", "5", "--member-size", "64M", "--zoned", "--stripe-unit", "64K", "--zone-size", "8M"]);
    let data: Vec<u8> = (0..(3u32 << 20)).map(|i| (i.wrapping_mul(2246822519) >> 11) as u8).collect();
    let input = t.path().join("in.bin");
    fs::write(&input, &data).unwrap();
    // Written twice: the second pass appends new stripes and invalidates the first.
    ok(&["write", "-a", ds, "--offset", "128K", "--input", input.to_str().unwrap()]);
    ok(&["write", "-a", ds, "--offset", "128K", "--input", input.to_str().unwrap()]);
    let out = t.path().join("out.bin");
    ok(&["read", "-a", ds, "--offset", "128K", "--length", "3M", "--output", out.to_str().unwrap()]);
    assert!(fs::read(&out).unwrap() == data);
    let info = ok(&["info", "-a", ds]);
    assert!(info.contains("dvs array"), "{info}");
    let s = ok(&["scrub", "-a", ds]);
    assert!(s.contains("0 stripes with mismatched parity"), "{s}");
    let e = fails(&["fail", "-a", ds, "--member", "1"]);
    assert!(e.contains("mosaic replace"), "{e}");
}

#[test]
fn replay_compares_dvs_with_the_smr_baselines() {
    let j = json(&ok(&[
        "replay", "--synthetic", "randwrite", "--count", "3000", "--size", "4K", "--footprint", "64M", "--stripe-unit", "64K", "--device", "smr:default", "--compare", "dvs,segment-raid5,raid5", "--json",
    ]));
    let mut reps = vec![j.clone()];
    reps.extend(j["compare"].as_array().unwrap().iter().cloned());
    let layouts: Vec<String> = reps.iter().map(|r| r["layout"].as_str().unwrap().to_string()).collect();
    assert!(layouts[0].starts_with("dvs") && layouts[1].starts_with("segment-raid5") && layouts[2].starts_with("raid5"), "{layouts:?}");
    // DVS appends: it never reads old data to update parity, so it does
    // fewer reads per write than RAID-5's read-modify-write (2 per write).
    let rpw = |r: &serde_json::Value| r["device_reads_per_write"].as_f64().unwrap();
    assert!(rpw(&reps[0]) < rpw(&reps[2]), "dvs {} raid5 {}", rpw(&reps[0]), rpw(&reps[2]));
    assert!((rpw(&reps[2]) - 2.0).abs() < 1e-9);
    // Segment RAID-5 rewrites whole segments: far slower than DVS.
    let mean = |r: &serde_json::Value| r["write_latency"]["mean_us"].as_f64().unwrap();
    assert!(mean(&reps[1]) > 10.0 * mean(&reps[0]));
}

#[test]
fn dvs_errors_are_clear() {
    let t = tempfile::tempdir().unwrap();
    let d = t.path().join("x");
    let e = fails(&["create", "-a", d.to_str().unwrap(), "--level", "dvs", "--members", "5", "--member-size", "64M"]);
    assert!(e.contains("needs --zoned"), "{e}");
    let e = fails(&["create", "-a", d.to_str().unwrap(), "--level", "raid5", "--members", "5", "--member-size", "64M", "--zoned"]);
    assert!(e.contains("--zoned is for --level dvs"), "{e}");
    let e = fails(&["replay", "--synthetic", "randwrite", "--count", "10", "--layout", "dvs", "--device", "smr:default", "--cache", "ppc"]);
    assert!(e.contains("has its own write cache"), "{e}");
}
