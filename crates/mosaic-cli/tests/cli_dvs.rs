//! DVS-RAID from the command line: a zoned array on files, the replay
//! comparison on SMR models, and the errors.

use std::fs;

use crate::common;
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
}

/// Fail, replace, a rebuild killed part-way and resumed, rot found by
/// scrub, located and repaired (dvs:2), from the command line.
#[test]
fn dvs_maintenance_from_the_command_line() {
    let t = tempfile::tempdir().unwrap();
    let d = t.path().join("dvs");
    let ds = d.to_str().unwrap();
    ok(&["create", "-a", ds, "--level", "dvs:2", "--members", "5", "--member-size", "64M", "--zoned", "--stripe-unit", "64K", "--zone-size", "4M"]);
    let data: Vec<u8> = (0..(24u32 << 20)).map(|i| (i.wrapping_mul(2654435761) >> 13) as u8).collect();
    let input = t.path().join("in.bin");
    fs::write(&input, &data).unwrap();
    ok(&["write", "-a", ds, "--offset", "0", "--input", input.to_str().unwrap()]);
    let out = t.path().join("out.bin");
    let read_all = || {
        ok(&["read", "-a", ds, "--offset", "0", "--length", "24M", "--output", out.to_str().unwrap()]);
        fs::read(&out).unwrap() == data
    };
    ok(&["fail", "-a", ds, "--member", "3"]);
    // Replace, with the rebuild killed after two SSGs.
    let new = t.path().join("new3.zoned");
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_mosaic"))
        .args(["replace", "-a", ds, "--member", "3", "--drive", new.to_str().unwrap()])
        .env("MOSAIC_FAULT_ABORT_REBUILD_AFTER", "2")
        .output()
        .unwrap();
    assert!(!o.status.success(), "the rebuild was to stop");
    let info = json(&ok(&["info", "-a", ds, "--json"]));
    let st = &info["volume"]["members"][3]["state"];
    assert_eq!(st["state"], "rebuilding", "{info}");
    let done = st["done"].as_u64().unwrap();
    assert!(done >= 1, "{info}");
    assert!(new.exists() && !d.join("dvs-3.zoned").exists(), "the new drive stays where it was given, its path recorded at replace time");
    assert!(read_all(), "read while half rebuilt");
    let r = json(&ok(&["rebuild", "-a", ds, "--json"]));
    assert_eq!(r["resumed_from"].as_u64(), Some(done), "{r}");
    assert!(read_all(), "read after the resumed rebuild");
    let s = ok(&["scrub", "-a", ds]);
    assert!(s.contains("0 stripes with mismatched parity"), "{s}");
    // Rot inside member 0's first data zone (the SSGs of the 24 MiB
    // written are in segments 0.., each a zone; SSG 0 is physical segment 0).
    let conv = info["config"]["conventional"].as_u64().unwrap();
    let f = fs::OpenOptions::new().write(true).open(d.join("dvs-0.zoned")).unwrap();
    std::os::unix::fs::FileExt::write_at(&f, &[0x5a; 2048], 4096 + conv * (4 << 20) + 3 * (64 << 10) + 512).unwrap();
    drop(f);
    let o = common::mosaic(&["scrub", "-a", ds]);
    let s = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(3), "{s}");
    assert!(s.contains("1 of") && s.contains("SSG 0 row") && s.contains("member 0 holds the wrong column"), "{s}");
    let s = ok(&["scrub", "-a", ds, "--repair"]);
    assert!(s.contains("re-striped"), "{s}");
    let s = ok(&["scrub", "-a", ds]);
    assert!(s.contains("0 stripes with mismatched parity"), "{s}");
    assert!(read_all(), "the located column was corrected");
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

#[test]
fn eval_dvs_quick_prints_paper_beside_mosaic() {
    let t = ok(&["eval", "dvs", "--quick"]);
    for want in ["paper vs mosaic", "0.74 (0.99/1.33)", "rw-dense", "rw-sparse", "sat/s", "Seg saturated throughput"] {
        assert!(t.contains(want), "no {want:?} in:\n{t}");
    }
    let j = json(&ok(&["eval", "dvs", "--quick", "--json"]));
    let rows = j["overall"].as_array().unwrap();
    // Every scheme on every workload, each with its saturated throughput.
    assert!(rows.len() >= 16, "{}", rows.len());
    let seg = rows.iter().find(|r| r["scheme"] == "segment-raid5" && r["workload"] == "rw-dense").unwrap();
    assert!(seg["sat_iops"].as_f64().unwrap() < seg["offered_iops"].as_f64().unwrap(), "{seg}");
    let dvs = rows.iter().find(|r| r["scheme"] == "dvs" && r["workload"] == "rw-dense").unwrap();
    assert!(dvs["zone_resets"].as_u64().unwrap() > 0 && dvs["idle_resets"] == dvs["zone_resets"], "{dvs}");
}

/// The map `nbdinfo --map --json` reads from a served export: (offset,
/// length, hole) runs of base:allocation.
fn allocation_map(uri: &str) -> Vec<(u64, u64, bool)> {
    let o = std::process::Command::new("nbdinfo").args(["--map", "--json", uri]).output().expect("nbdinfo (libnbd-bin)");
    assert!(o.status.success(), "nbdinfo --map: {}", String::from_utf8_lossy(&o.stderr));
    let v = json(&String::from_utf8_lossy(&o.stdout));
    v.as_array().unwrap().iter().map(|e| (e["offset"].as_u64().unwrap(), e["length"].as_u64().unwrap(), e["type"].as_u64().unwrap() & 1 == 1)).collect()
}

/// A client's TRIM reaches a served DVS array: the whole chunks it covers
/// read as zeros and are holes in base:allocation (so `nbdcopy` skips
/// them), and the chunks it cuts keep their bytes.
#[test]
fn a_trim_over_nbd_makes_whole_dvs_chunks_holes() {
    let t = tempfile::tempdir().unwrap();
    let d = t.path().join("dvs");
    let ds = d.to_str().unwrap();
    ok(&["create", "-a", ds, "--level", "dvs", "--members", "5", "--member-size", "64M", "--zoned", "--stripe-unit", "64K", "--zone-size", "8M"]);
    let srv = common::serve::Serve::start(ds, &[]);
    let uri = format!("nbd://127.0.0.1:{}", srv.port);
    common::qemu_io(&uri, &["write -P 0x5a 0 1M", "flush", "discard 96K 640K", "read -P 0x5a 0 128K", "read -P 0 128K 576K", "read -P 0x5a 704K 320K"]);
    let map = allocation_map(&uri);
    let holes: Vec<(u64, u64)> = map.iter().filter(|r| r.2 && r.0 < 1 << 20).map(|r| (r.0, r.1)).collect();
    assert_eq!(holes, [(128 << 10, 576 << 10)], "chunks 2..11 whole in the trim: {map:?}");
    assert!(map.iter().any(|r| !r.2 && r.0 == 0 && r.1 == 128 << 10), "the first two chunks hold data: {map:?}");
}
