//! CLI tests of the small-write caches: `replay --cache` and `eval ppc`.

use crate::common;
use common::{fails, json, ok};


fn policy(r: &serde_json::Value, key: &str) -> f64 {
    r["policy"].as_array().unwrap().iter().find(|kv| kv[0] == key).unwrap_or_else(|| panic!("no {key} in {r}"))[1].as_f64().unwrap()
}

/// The same random 4 KiB writes through each policy: a write cache large
/// enough for the whole footprint absorbs every rewrite, so only the first
/// write of each page reaches a drive; the parity policies differ in what
/// they read and write for parity, which the run reports.
#[test]
fn replay_through_each_cache() {
    let base = ["replay", "--synthetic", "randwrite", "--count", "4000", "--footprint", "1M", "--stripe-unit", "4K", "--block-size", "4096", "--device", "ssd:samsung-830-128g", "--drives", "5", "--json"];
    let mut args: Vec<&str> = base.to_vec();
    args.extend(["--cache", "none,fpc,ppc,ppc+data", "--cache-size", "2M"]);
    let each = |args: &[&str]| {
        let j = json(&ok(args));
        let mut reps = vec![j.clone()];
        reps.extend(j["compare"].as_array().unwrap().iter().cloned());
        assert_eq!(reps.len(), 4);
        reps
    };
    let mut kept = args.clone();
    kept.push("--keep-cache");
    for r in &each(&kept) {
        // 1 MiB footprint = 256 pages, all fit in a 2 MiB cache: every write
        // after a page's first is a hit and no destage happens during the run.
        assert_eq!(r["device_writes"], 0, "{}", r["layout"]);
        assert!(policy(r, "write_hits") >= 4000.0 - 256.0, "{}", r["layout"]);
    }
    // By default the run ends with the caches destaged, counted as the
    // writes' work: every page written once (64 full stripes of 4 data
    // pages and their parity).
    for r in &each(&args) {
        assert_eq!(r["device_writes"], 320, "{}", r["layout"]);
        assert!((r["device_writes_per_write"].as_f64().unwrap() - 320.0 / 4000.0).abs() < 1e-9, "{r}");
    }
    let e = common::fails(&["replay", "--synthetic", "randwrite", "--count", "10", "--keep-cache"]);
    assert!(e.contains("--cache"), "{e}");
    // A one-page cache destages on every write: none does RMW (2 reads, 2 writes).
    let mut args: Vec<&str> = base.to_vec();
    args.extend(["--cache", "none", "--cache-size", "4K"]);
    let r = json(&ok(&args));
    assert!((r["device_reads_per_write"].as_f64().unwrap() - 2.0).abs() < 0.01, "{r}");
    assert!((r["device_writes_per_write"].as_f64().unwrap() - 2.0).abs() < 0.01, "{r}");
    // Without a cache the same replay is the planner's plain RMW.
    let plain = json(&ok(&base));
    assert_eq!(plain["device_reads"], 8000);
}

#[test]
fn cache_errors_are_clear() {
    let e = fails(&["replay", "--synthetic", "randwrite", "--count", "10", "--cache", "lru"]);
    assert!(e.contains("unknown cache policy \"lru\""), "{e}");
    let e = fails(&["replay", "--synthetic", "randwrite", "--count", "10", "--layout", "raid0", "--cache", "ppc"]);
    assert!(e.contains("needs a parity layout"), "{e}");
}

/// `mosaic eval ppc` on a short run: every section present, the paper's
/// RAID-5 and four policies each, normalised to it, the recorded traces
/// noted missing (naming the script that records them), and the data
/// buffer pays off on random 4 KiB writes (fewer parity reads than ppc).
#[test]
fn eval_ppc_runs_and_normalises() {
    let t = tempfile::tempdir().unwrap();
    // A --trace that does not exist is an error, not a silent skip.
    let e = fails(&["eval", "ppc", "--json", "--trace", "/nonexistent"]);
    assert!(e.contains("trace /nonexistent does not exist"), "{e}");
    // Without --trace, where the default trace is absent (no ../shared
    // beside the working directory, whatever sits beside the temp dir):
    // skipped with a note.
    let cwd = t.path().join("work");
    std::fs::create_dir(&cwd).unwrap();
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_mosaic"))
        .args(["eval", "ppc", "--json", "--plot", t.path().to_str().unwrap()])
        .env("MOSAIC_TRACES", t.path().join("no-traces"))
        .env("MOSAIC_DEFAULT_TRACE", "")
        .current_dir(&cwd)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let j = json(&String::from_utf8_lossy(&o.stdout));
    for sec in ["postmark", "iozone", "randwrite_4k"] {
        let pts = j[sec].as_array().unwrap();
        let names: Vec<&str> = pts.iter().map(|p| p["policy"].as_str().unwrap()).collect();
        assert_eq!(names, ["raid5", "none", "fpc", "ppc", "ppc+data"], "{sec}");
        assert!((pts[0]["perf_vs_raid5"].as_f64().unwrap() - 1.0).abs() < 1e-9);
        assert!((pts[1]["perf_vs_none"].as_f64().unwrap() - 1.0).abs() < 1e-9);
        for p in pts {
            assert!(p["device_work_ms"].as_f64().unwrap() >= p["busiest_drive_ms"].as_f64().unwrap(), "{p}");
            assert!(p["destage_s"].as_f64().unwrap() > 0.0 && p["destage_s"].as_f64() < p["duration_s"].as_f64(), "{p}");
        }
    }
    assert_eq!(j["postmark"][4]["paper_reads_per_write"].as_f64(), Some(0.65));
    assert_eq!(j["width_sweep"].as_array().unwrap().len(), 20);
    assert!(j["trace_note"].as_str().unwrap().contains("no trace"));
    for rec in j["recorded"].as_array().unwrap() {
        assert!(rec["points"].as_array().unwrap().is_empty());
        assert!(rec["note"].as_str().unwrap().contains("run scripts/record-traces.sh"), "{rec}");
    }
    let r = j["randwrite_4k"].as_array().unwrap();
    let (ppc, data) = (&r[3], &r[4]);
    assert!(data["parity_reads_per_write"].as_f64() < ppc["parity_reads_per_write"].as_f64());
    // Parity is written at most once per destaged row under every parity cache.
    for p in &r[1..] {
        assert!(p["parity_writes_per_write"].as_f64() <= r[0]["parity_writes_per_write"].as_f64(), "{p}");
    }
    // Every experiment plotted, and said where (on stderr: stdout is the JSON).
    let err = String::from_utf8_lossy(&o.stderr);
    for f in ["ppc-parity.svg", "ppc-perf.svg", "ppc-width.svg", "ppc-latency.svg"] {
        let p = t.path().join(f);
        assert!(p.exists(), "no {f}");
        assert!(err.contains(&format!("wrote plot {}", p.display())), "{f} not listed: {err}");
    }
}
