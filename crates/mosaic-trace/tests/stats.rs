//! Trace statistics.

use crate::common;

use std::path::PathBuf;

use common::*;
use mosaic_trace::{open, stats, Format, TraceOptions};

#[test]
fn stats_of_a_small_trace() {
    // Times 0, 1 ms, 3 ms, 6 ms; the 2nd and 4th requests are sequential.
    let text = "\
0,0,4096,w,0.000
0,8,8192,r,0.001
0,1000,512,w,0.003
0,1001,2097152,w,0.006
";
    let st = stats(mem("s.csv", text, &TraceOptions::default())).unwrap();
    assert_eq!(st.format, Format::Spc);
    assert_eq!((st.requests, st.reads, st.writes), (4, 1, 3));
    assert_eq!((st.read_bytes, st.write_bytes), (8192, 4096 + 512 + 2097152));
    assert_eq!(st.read_share_count, 0.25);
    assert_eq!(st.write_share_count, 0.75);
    assert!((st.read_share_bytes + st.write_share_bytes - 1.0).abs() < 1e-12);
    assert_eq!(st.sequential_fraction, 0.5);
    // Blocks: [0,1) [1,3) [125,126) [125,638) -> 0..3 and 125..638.
    assert_eq!(st.footprint_blocks, 3 + 513);
    assert_eq!(st.footprint_bytes, (3 + 513) * 4096);
    assert_eq!(st.duration_s, 0.006);
    assert_eq!(st.interarrival_us_max, 3000.0);
    assert!((st.interarrival_us_p50 - 2000.0).abs() < 10.0, "{}", st.interarrival_us_p50);
    let counts: Vec<(&str, u64)> = st.size_histogram.iter().filter(|b| b.count() > 0).map(|b| (b.label.as_str(), b.count())).collect();
    assert_eq!(counts, vec![("512", 1), ("4K", 1), ("8K", 1), (">1M", 1)]);
    assert_eq!(st.write_size_counts(), vec![(512, 1), (4096, 1), (2097152, 1)]);
    let table = st.to_string();
    assert!(table.contains("footprint      516 distinct 4 KiB blocks"), "{table}");
    assert!(table.contains(">1M"), "{table}");
    let json = serde_json::to_value(&st).unwrap();
    assert_eq!(json["format"], "spc");
    assert_eq!(json["write_sizes"]["4096"], 1);
    assert_eq!(json["size_histogram"][3]["label"], "4K");
}

#[test]
fn stats_count_skips() {
    let st = stats(open(&fixture("blkparse.txt"), &opts_device("8,0")).unwrap()).unwrap();
    assert_eq!((st.requests, st.skipped_ops, st.filtered), (3, 3, 1));
    let st = stats(open(&fixture("cloudphysics.csv"), &TraceOptions::default()).unwrap()).unwrap();
    assert_eq!((st.requests, st.skipped_ops), (6, 1));
    assert_eq!(st.duration_s, 3.5);
}

/// Requests before the first one are counted and the table warns of them.
#[test]
fn stats_warn_of_clamped_times() {
    let st = stats(mem("s.csv", "0,0,4096,w,2\n0,8,4096,w,1\n0,16,4096,w,3\n", &TraceOptions::default())).unwrap();
    assert_eq!((st.requests, st.clamped), (3, 1));
    let table = st.to_string();
    assert!(table.contains("warning        1 requests earlier than the first request (timestamps out of order) read at time 0"), "{table}");
    assert_eq!(serde_json::to_value(&st).unwrap()["clamped"], 1);
    let st = stats(mem("s.csv", "0,0,4096,w,2\n0,8,4096,w,3\n", &TraceOptions::default())).unwrap();
    assert_eq!(st.clamped, 0);
    assert!(!st.to_string().contains("warning"));
}

#[test]
fn empty_stats() {
    let st = stats(mem("e", "ASU,LBA,Size,Opcode,Timestamp\n", &TraceOptions::default())).unwrap();
    assert_eq!(st.requests, 0);
    assert_eq!(st.interarrival_us_p99, 0.0);
    assert!(!st.to_string().is_empty());
}

fn real_trace() -> Option<PathBuf> {
    let p = std::env::var_os("MOSAIC_TRACES")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/traces"))
        .join("cloudphysics-vscsi-part1.csv");
    if p.exists() {
        Some(p)
    } else {
        eprintln!("skipping: {} not present", p.display());
        None
    }
}

#[test]
fn real_cloudphysics_trace() {
    let Some(p) = real_trace() else { return };
    let r = open(&p, &TraceOptions::default()).unwrap();
    assert_eq!(r.format(), Format::CloudPhysics);
    let st = stats(r).unwrap();
    // Its README: 56,936 requests, 22,427 reads (889 MB), 34,509 writes (1.21 GB).
    assert_eq!((st.requests, st.reads, st.writes), (56_936, 22_427, 34_509));
    assert!((st.read_bytes as f64 / 1e6 - 889.0).abs() < 1.0, "{}", st.read_bytes);
    assert!((st.write_bytes as f64 / 1e9 - 1.21).abs() < 0.01, "{}", st.write_bytes);
    assert_eq!((st.skipped_bad, st.skipped_ops), (0, 0));
    assert_eq!(st.write_sizes.values().sum::<u64>(), 34_509);
    // Spread within each second: arrivals are strictly increasing.
    let mut prev = None;
    for q in open(&p, &TraceOptions::default()).unwrap() {
        let t = q.unwrap().time_ns;
        assert!(prev.is_none_or(|p| t > p), "{prev:?} then {t}");
        prev = Some(t);
    }
    assert!(st.interarrival_us_p50 > 0.0);
    assert!(st.duration_s > 3000.0 && st.duration_s < 4000.0, "{}", st.duration_s);
    assert_eq!(st.clamped, 0);
}

/// Without its header the real trace is still detected as CloudPhysics
/// (by the shape of its lines) and reads the same.
#[test]
fn real_cloudphysics_trace_without_its_header() {
    let Some(p) = real_trace() else { return };
    let text = std::fs::read_to_string(&p).unwrap();
    let body = text.split_once('\n').unwrap().1;
    assert!(body.starts_with("1,"));
    let with: Vec<_> = open(&p, &TraceOptions::default()).unwrap().map(|x| x.unwrap()).collect();
    let r = mem("body", body, &TraceOptions::default());
    assert_eq!(r.format(), Format::CloudPhysics);
    let without: Vec<_> = r.map(|x| x.unwrap()).collect();
    assert_eq!(without.len(), 56_936);
    assert!(without == with);
}
