//! CLI tests for trace stats, replay, model and advise.

use std::fs;
use crate::common;
use common::{fails, json, ok};


#[test]
fn trace_stats_and_bad_lines() {
    let t = tempfile::tempdir().unwrap();
    let p = t.path().join("t.csv");
    fs::write(&p, "0,100,4096,W,0.0\n0,108,4096,W,0.001\n1,5000,8192,R,0.002\n").unwrap();
    let s = json(&ok(&["trace", "stats", p.to_str().unwrap(), "--json"]));
    assert_eq!(s["requests"], 3);
    assert_eq!(s["writes"], 2);
    assert_eq!(s["format"], "spc");
    // 4 KiB at sector 100 spans 4 KiB blocks 12-13, at 108 blocks 13-14, 8 KiB at 5000 blocks 625-626.
    assert_eq!(s["footprint_blocks"], 5);
    assert!((s["sequential_fraction"].as_f64().unwrap() - 1.0 / 3.0).abs() < 1e-9);
    let human = ok(&["trace", "stats", p.to_str().unwrap()]);
    assert!(human.contains("requests") && human.contains("3 over 0.002 s"), "{human}");
    fs::write(&p, "0,100,4096,W,0.0\n0,1x8,4096,W,0.001\n").unwrap();
    let e = fails(&["trace", "stats", p.to_str().unwrap(), "--format", "spc"]);
    assert!(e.contains("t.csv:2: field 'LBA'"), "{e}");
    let s = json(&ok(&["trace", "stats", p.to_str().unwrap(), "--format", "spc", "--skip-bad", "--json"]));
    assert_eq!(s["skipped_bad"], 1);
    let e = fails(&["trace", "stats", p.to_str().unwrap(), "--format", "nope"]);
    assert!(e.contains("unknown trace format"), "{e}");
}

#[test]
fn replay_json_totals_are_deterministic() {
    let args = ["replay", "--synthetic", "randwrite", "--count", "3000", "--layout", "raid5", "--drives", "5", "--json"];
    let a = ok(&args);
    let b = ok(&args);
    assert_eq!(a, b, "same seed, same report");
    let j = json(&a);
    assert_eq!(j["requests"], 3000);
    assert_eq!(j["writes"], 3000);
    assert_eq!(j["reads"], 0);
    // 4 KiB random writes on raid5 4+1 with 64 KiB units: RMW, 2 reads and 2 writes each.
    assert_eq!(j["device_reads"], 6000);
    assert_eq!(j["device_writes"], 6000);
    assert_eq!(j["devices"].as_array().unwrap().len(), 5);
    let per: u64 = j["devices"].as_array().unwrap().iter().map(|d| d["writes"].as_u64().unwrap()).sum();
    assert_eq!(per, 6000);
    assert_eq!(j["ops"]["stripes_rmw"], 3000);
    let c = json(&ok(&["replay", "--synthetic", "randwrite", "--count", "3000", "--layout", "raid5", "--drives", "5", "--seed", "2", "--json"]));
    assert_ne!(c["write_latency"]["mean_us"], j["write_latency"]["mean_us"], "another seed, another run");
}

#[test]
fn replay_compare_plot_and_mixed_devices() {
    let t = tempfile::tempdir().unwrap();
    let svg = t.path().join("r.svg");
    let out = ok(&["replay", "--synthetic", "mixed:50", "--count", "2000", "--drives", "6", "--compare", "raid5,raid6,rs:3+3", "--plot", svg.to_str().unwrap()]);
    assert!(out.contains("raid5 5+1") && out.contains("raid6 4+2") && out.contains("rs:3+3"), "{out}");
    let s = fs::read_to_string(&svg).unwrap();
    assert!(s.contains("<svg") && s.contains("response time CDF"), "not an SVG plot");
    assert!(out.contains(&format!("wrote plot {}", svg.display())), "where the plot went not said: {out}");
    let j = json(&ok(&["replay", "--synthetic", "randwrite", "--count", "500", "--drives", "5", "--device", "hdd:seagate-st91000640ss", "--device", "4=ssd:samsung-830-128g", "--json"]));
    assert!(j["devices"][4]["model"].as_str().unwrap().contains("samsung"), "{}", j["devices"][4]);
    assert!(j["devices"][0]["model"].as_str().unwrap().contains("seagate"));
    let e = fails(&["replay", "--synthetic", "randwrite", "--device", "hdd:nope"]);
    assert!(e.contains("known:"), "{e}");
    let e = fails(&["replay", "--synthetic", "randwrite", "--layout", "raid7"]);
    assert!(e.contains("unknown --layout \"raid7\"") && e.contains("tier, remap:LEVEL, dvs"), "{e}");
    let e = fails(&["replay", "--synthetic", "randwrite", "--device", "9=ssd:generic-sata"]);
    assert!(e.contains("outside"), "{e}");
}

/// "raid6 over 8 remote HDD servers on 10 GbE": the same device
/// operations as local drives, each paying the link; a WAN link costs more.
#[test]
fn replay_over_networked_drives_pays_the_link() {
    let run = |dev: &str| json(&ok(&["replay", "--synthetic", "mixed:50", "--count", "2000", "--layout", "raid6", "--drives", "8", "--device", dev, "--json"]));
    let hdd = "hdd:seagate-st91000640ss";
    let (local, lan, wan) = (run(hdd), run(&format!("net:10gbe/{hdd}")), run(&format!("net:wan,jitter_us=2000/{hdd}")));
    for r in [&lan, &wan] {
        assert_eq!((&r["device_reads"], &r["device_writes"]), (&local["device_reads"], &local["device_writes"]), "the link changes time, not operations");
    }
    let mean = |r: &serde_json::Value| r["write_latency"]["mean_us"].as_f64().unwrap();
    // A raid6 small write is two round trips deep (read old, write new): at
    // 50 us each, 10 GbE adds at least 100 us.
    assert!(mean(&lan) > mean(&local) + 100.0 && mean(&lan) < mean(&local) * 1.5, "{} vs {}", mean(&lan), mean(&local));
    assert!(mean(&wan) > mean(&local) + 40_000.0, "{} vs {}", mean(&wan), mean(&local));
    assert!(lan["devices"][0]["model"].as_str().unwrap().contains("10 Gbit/s link"), "{}", lan["devices"][0]);
    assert_eq!(run(&format!("net:wan,jitter_us=2000/{hdd}")), wan, "seeded jitter repeats");
    let e = fails(&["replay", "--synthetic", "randwrite", "--device", "net:5gbe/hdd:seagate-st91000640ss"]);
    assert!(e.contains("unknown link") && e.contains("10gbe"), "{e}");
    let e = fails(&["replay", "--synthetic", "randwrite", "--device", "net:10gbe"]);
    assert!(e.contains("net:LINK/DRIVE"), "{e}");
}

#[test]
fn replay_real_trace_open_loop() {
    let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/traces/cloudphysics-vscsi-part1.csv");
    if !p.exists() {
        eprintln!("skipping: no shared trace");
        return;
    }
    let j = json(&ok(&["replay", "--trace", p.to_str().unwrap(), "--first", "5000", "--layout", "raid5", "--drives", "5", "--device", "ssd:samsung-830-128g", "--json"]));
    assert_eq!(j["requests"], 5000);
    assert!(j["read_latency"]["p99_us"].as_f64().unwrap() > 0.0);
}

#[test]
fn model_reproduces_the_paper() {
    let j = json(&ok(&["model", "--device", "hdd:seagate-st91000640ss", "--drives", "9", "--codes", "1", "--json"]));
    let x = j["rmw_vs_fsw"][0]["beats_fsw_below_bytes"].as_f64().unwrap() / 1024.0;
    assert!((x - 779.06).abs() < 0.01, "{x}");
    let human = ok(&["model", "--drives", "10", "--codes", "2"]);
    assert!(human.contains("377.23 KiB"), "{human}");
    let human = ok(&["model", "--drives", "10", "--codes", "1"]);
    assert!(human.contains("895.92 KiB") && human.contains("948.62 KiB") && human.contains("930.38 KiB"), "{human}");
    let e = fails(&["model", "--drives", "3", "--codes", "3"]);
    assert!(e.contains("n > k"), "{e}");
    let e = fails(&["model", "--sizes", "4K"]);
    assert!(e.contains("MIN:MAX"), "{e}");
}

#[test]
fn advise_on_a_trace() {
    let t = tempfile::tempdir().unwrap();
    let p = t.path().join("w.csv");
    let mut text = String::new();
    for i in 0..3000u64 {
        text.push_str(&format!("{},h,0,Write,{},{},10\n", 128166372003061629 + i * 10_000, (i * 7_919 % 100_000) * 65536, 256 * 1024));
    }
    fs::write(&p, text).unwrap();
    let j = json(&ok(&["advise", "--trace", p.to_str().unwrap(), "--drives", "9", "--codes", "1", "--json"]));
    let best = j["best_unit"].as_u64().unwrap();
    // 256 KiB writes on 9 HDDs: RMW with one unit per write wins (Sect. 4.1).
    assert!(best >= 256 * 1024, "best unit {best}");
    let e = fails(&["advise", "--drives", "9"]);
    assert!(e.contains("--trace"), "{e}");
}

#[test]
fn eval_cbro_matches_the_model_and_shows_the_cda_bottleneck() {
    let j = json(&ok(&["eval", "cbro", "--part", "offload", "--requests", "6000", "--json"]));
    let rows = j["offload"].as_array().unwrap();
    let at = |kib: u64| rows.iter().find(|r| r["size"].as_u64() == Some(kib * 1024)).unwrap();
    let r4 = at(4);
    // Model: (d+k)/d = 2 over RAID-5 and 3 over RAID-6 for d = 1; within 10%.
    let g5 = r4["gain_over_raid5"].as_f64().unwrap();
    let g6 = r4["gain_over_raid6"].as_f64().unwrap();
    assert!((g5 / 2.0 - 1.0).abs() < 0.10, "gain over raid5 {g5}");
    assert!((g6 / 3.0 - 1.0).abs() < 0.10, "gain over raid6 {g6}");
    assert_eq!(r4["cda_keeps_up"], true);
    // A single HDD as CDA is the bottleneck: far below RAID-5.
    assert!(r4["hdd_cda_gain_over_raid5"].as_f64().unwrap() < 0.5);
    // At 1 MiB the SSD CDA no longer keeps up, and the gain drops below the model.
    let r1m = at(1024);
    assert_eq!(r1m["cda_keeps_up"], false, "{r1m}");
    assert!(r1m["gain_over_raid5"].as_f64().unwrap() < 1.5, "{r1m}");
}

#[test]
fn model_cbro_checks() {
    let e = fails(&["model", "--cda-device", "bogus"]);
    assert!(e.contains("--cda-device \"bogus\"") && !e.contains("--device \"bogus\""), "the option that gave it: {e}");
    let j = json(&ok(&["model", "--drives", "16", "--codes", "2", "--sizes", "4K:1M", "--cda-device", "ssd:samsung-830-128g", "--json"]));
    let rows = j["cbro"].as_array().unwrap();
    // HDD: α = 1, S_CBRO,RMW = n / 2; gain (d+k)/d = 3 for k = 2.
    assert!((rows[0]["speedup_rmw"].as_f64().unwrap() - 8.0).abs() < 0.01);
    assert!((rows[0]["gain_d1"].as_f64().unwrap() - 3.0).abs() < 1e-9);
    assert_eq!(rows[0]["check"]["performance_ok"], true);
    assert_eq!(rows.last().unwrap()["check"]["performance_ok"], false);
    // A 128 GB SSD cannot hold the code blocks of a full 1 TB data drive.
    assert_eq!(rows[0]["check"]["capacity_ok"], false);
    let human = ok(&["model", "--drives", "16", "--codes", "1", "--sizes", "4K:1M", "--cda-device", "ssd:samsung-830-128g"]);
    assert!(human.contains("CDA will be the bottleneck"), "{human}");
}

#[test]
fn eval_tier_quick_prints_paper_beside_mosaic_and_partitioning_wins_on_space() {
    let out = ok(&["eval", "tier", "--quick"]);
    assert!(out.contains("paper"), "{out}");
    let j = json(&ok(&["eval", "tier", "--quick", "--json"]));
    let live = |case: &str| j["space"].as_array().unwrap().iter().find(|r| r["case"] == case).map(|r| r["live_fraction"].as_f64().unwrap());
    // Chunk partitioning keeps more of the allocated fast space live than
    // plain fixed extents, on the Postmark-like small-file workload.
    let (re, fixed) = (live("rehypar 64K V=8").unwrap(), live("fixed 64K").expect("a fixed-extent row"));
    assert!(re > fixed, "ReHypar {re} vs fixed {fixed}");
    // The tier beats all-HDD on IOzone-like writes (virtual time).
    let mibs = |scheme: &str| j["iozone"].as_array().unwrap().iter().find(|r| r["run"]["scheme"].as_str().unwrap().starts_with(scheme)).map(|r| r["run"]["mib_per_s"].as_f64().unwrap()).unwrap();
    assert!(mibs("tier") > 2.0 * mibs("all-hdd"), "{}", j["iozone"]);
}

#[test]
fn replay_of_a_tier_refuses_bad_options_with_their_reason() {
    let base = ["replay", "--layout", "tier", "--synthetic", "randwrite", "--count", "10", "--footprint", "64M", "--device", "ssd:samsung-830-128g"];
    let with = |extra: &[&'static str]| base.iter().copied().chain(extra.iter().copied()).collect::<Vec<&str>>();
    let e = fails(&with(&["--cache", "ppc"]));
    assert!(e.contains("the tier's fast array is its cache"), "{e}");
    let e = fails(&with(&["--fast-size", "512K"]));
    assert!(e.contains("is too small"), "{e}");
    let e = fails(&with(&["--fast", "raid9:2"]));
    assert!(e.contains("bad inner array \"raid9:2\""), "{e}");
}

/// A replay that wraps requests past the array's capacity, or widens them
/// to blocks, says so in its text (the JSON has the counts).
#[test]
fn replay_says_when_it_wrapped_or_widened_requests() {
    let t = tempfile::tempdir().unwrap();
    let p = t.path().join("t.csv");
    common::msr_trace(&p, &common::TraceSpec { seed: 7, requests: 200, span: 4 << 30, write_pct: 50, sizes: &[512, 4096], hot: None });
    let tr = p.to_str().unwrap();
    let small = ["replay", "--trace", tr, "--device", "ssd:samsung-830-128g,capacity=268435456", "--block-size", "4096"];
    let out = ok(&small);
    assert!(out.contains("requests lay past the array's capacity and were wrapped into it") && out.contains("were widened"), "{out}");
    let j = json(&ok(&small.iter().copied().chain(["--json"]).collect::<Vec<_>>()));
    assert!(j["wrapped"].as_u64().unwrap() > 100 && j["realigned"].as_u64().unwrap() > 50, "{j}");
    let aligned = t.path().join("a.csv");
    std::fs::write(&aligned, "128166372000000000,host,0,Write,4096,8192,100\n128166372000001000,host,0,Read,0,4096,100\n").unwrap();
    let out = ok(&["replay", "--trace", aligned.to_str().unwrap(), "--block-size", "512"]);
    assert!(!out.contains("note: "), "{out}");
}

/// `replay --on` replays on the array as it is: the options that model a
/// layout or drives are refused, not silently ignored.
#[test]
fn replay_on_a_real_array_refuses_the_options_that_model_one() {
    for opt in [&["--layout", "raid6"][..], &["--drives", "9"], &["--device", "ssd:samsung-830-128g"], &["--stripe-unit", "4K"], &["--block-size", "4096"], &["--mode", "open"], &["--policy", "rcw"], &["--time-scale", "2"]] {
        let mut args = vec!["replay", "--synthetic", "randwrite", "--on", "/nonexistent/arr"];
        args.extend_from_slice(opt);
        let e = fails(&args);
        assert!(e.contains("the argument '--on <ON>' cannot be used with") && e.contains(opt[0]), "{opt:?}: {e}");
    }
}

/// A tier over drives so large that its map (every block of theirs)
/// would not fit in memory is refused before anything is allocated, and
/// the error names the way out; the same drives with the sizes given run.
#[test]
fn replay_of_a_tier_too_large_to_map_says_how_to_model_it() {
    let base = ["replay", "--layout", "tier", "--synthetic", "randwrite", "--count", "10", "--device", "hdd:seagate-st91000640ss,capacity=4000000000000"];
    let e = fails(&base);
    assert!(e.contains("its map would take about") && e.contains("--slow-size and --fast-size"), "{e}");
    let j = json(&ok(&base.iter().copied().chain(["--slow-size", "1G", "--fast-size", "256M", "--json"]).collect::<Vec<_>>()));
    assert_eq!(j["requests"], 10, "{j}");
}

#[test]
fn eval_given_a_trace_that_does_not_exist_is_an_error() {
    for which in ["tier", "dvs", "ppc", "adapt"] {
        let e = fails(&["eval", which, "--trace", "/nonexistent/t.csv"]);
        assert!(e.contains("/nonexistent/t.csv"), "eval {which}: {e}");
    }
}

/// `bench array --threads` measures each count of writers it is given,
/// and a count outside 1..=256 is refused with the range.
#[test]
fn bench_array_measures_each_thread_count_and_refuses_zero() {
    let e = fails(&["bench", "array", "--threads", "0"]);
    assert!(e.contains("0 is not in 1..=256"), "{e}");
    let v = json(&ok(&["bench", "array", "--threads", "1,2", "--seconds", "0.02", "--member-size", "4M", "--random-only", "--json"]));
    let rows: Vec<(String, u64)> = v.as_array().unwrap().iter().map(|r| (r["layout"].as_str().unwrap().to_string(), r["threads"].as_u64().unwrap())).collect();
    let want: Vec<(String, u64)> = ["raid5 4+1", "raid6 8+2"].iter().flat_map(|l| [1, 2].map(|t| (l.to_string(), t))).collect();
    assert_eq!(rows, want);
    assert!(v.as_array().unwrap().iter().all(|r| r["array_per_sec"].as_f64().unwrap() > 0.0), "{v}");
    assert!(v.as_array().unwrap().iter().all(|r| r.get("journal_records_per_write").is_none()), "no journal, no journal count: {v}");
}

/// `bench array --journal`: the arrays get a RAM journal, and every write
/// measured, a 4 KiB one or a 1 MiB run of whole stripes, from one writer
/// or two, is exactly one journal record (the ring's checkpoints, which a
/// journal this small takes often, add none).
#[test]
fn bench_array_with_a_journal_logs_one_record_a_write() {
    let v = json(&ok(&["bench", "array", "--journal", "8M", "--threads", "1,2", "--seconds", "0.05", "--member-size", "4M", "--json"]));
    let rows = v.as_array().unwrap();
    assert_eq!(rows.len(), 8, "2 layouts x 2 writer counts x 2 workloads: {v}");
    for r in rows {
        assert!(r["layout"].as_str().unwrap().ends_with(" + journal"), "{r}");
        assert!(r["array_per_sec"].as_f64().unwrap() > 0.0, "{r}");
        assert_eq!(r["journal_records_per_write"].as_f64(), Some(1.0), "{r}");
    }
    // A journal too small to hold a record is refused, naming both sizes.
    let e = fails(&["bench", "array", "--journal", "100K", "--seconds", "0.02", "--member-size", "4M"]);
    assert!(e.contains("journal too small: 102400 bytes, needs at least 1048576"), "{e}");
}

/// `bench dvs --repeat 2 --threads 1,2 --random-only`: every scheme at
/// every writer count in each round, ratios taken within a round (raid5's
/// are exactly 1), the row's ratio the median of its rounds', and raid5's
/// small write the read-modify-write it is (2 reads and 2 writes of 4 KiB
/// a write); no scrub or rebuild rows.
#[test]
fn bench_dvs_takes_ratios_within_rounds_at_each_writer_count() {
    // A count given twice is measured once.
    let v = json(&ok(&["bench", "dvs", "--seconds", "0.05", "--threads", "1,2,1", "--repeat", "2", "--random-only", "--json"]));
    let rows = v.as_array().unwrap();
    let random: Vec<&serde_json::Value> = rows.iter().filter(|r| r["workload"] == "4 KiB random write").collect();
    let keys: Vec<(String, u64)> = random.iter().map(|r| (r["scheme"].as_str().unwrap().to_string(), r["threads"].as_u64().unwrap())).collect();
    let schemes = ["raid5 4+1 + journal", "dvs 4+1 write-through", "dvs 4+1 + 16 MiB SSG cache"];
    let want: Vec<(String, u64)> = [1, 2].iter().flat_map(|&t| schemes.map(|s| (s.to_string(), t))).collect();
    assert_eq!(keys, want);
    assert!(rows.iter().all(|r| !r["workload"].as_str().unwrap().starts_with("scrub") && !r["workload"].as_str().unwrap().starts_with("rebuild")), "{v}");
    for r in rows {
        let rounds: Vec<f64> = r["ratios_per_round"].as_array().unwrap().iter().map(|x| x.as_f64().unwrap()).collect();
        assert_eq!((rounds.len(), r["per_round"].as_array().unwrap().len()), (2, 2), "{r}");
        let mut sorted = rounds.clone();
        sorted.sort_by(f64::total_cmp);
        assert_eq!(r["ratio_to_raid5"].as_f64().unwrap(), sorted[1], "{r}");
        if r["scheme"] == schemes[0] {
            assert!(rounds.iter().all(|&x| x == 1.0), "{r}");
        }
        assert!(r["per_sec"].as_f64().unwrap() > 0.0, "{r}");
    }
    for r in random.iter().filter(|r| r["scheme"] == schemes[0]) {
        assert_eq!((r["member_ops_per_write"].as_f64().unwrap(), r["member_kib_per_write"].as_f64().unwrap()), (4.0, 16.0), "{r}");
    }
    let e = fails(&["bench", "dvs", "--repeat", "0"]);
    assert!(e.contains("0 is not in 1..=100"), "{e}");
}
