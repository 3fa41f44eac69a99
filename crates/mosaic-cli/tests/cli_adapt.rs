//! `mosaic eval adapt` on the real trace: the planned layout lowers the
//! train graph's conflicts and the test half's parallel depth, moves
//! data, and the correlator speed-up is reported.

use crate::common;
use common::{fails, json, ok};

/// The real trace, beside the repository (`../shared/traces`).
fn trace() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/traces/cloudphysics-vscsi-part1.csv")
}

#[test]
fn eval_adapt_plans_a_layout_that_lowers_conflicts_on_the_test_half() {
    let p = trace();
    let trace = p.to_str().unwrap();
    let r = json(&ok(&["eval", "adapt", "--trace", trace, "--requests", "6000", "--quick", "--array", "ssd", "--json"]));
    assert!(r["hdd"].is_null(), "--array ssd runs no HDD array");
    let rows = r["ssd"]["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 2, "alpha 0 and 1 at threshold 1");
    for row in rows {
        let f = |k: &str| row[k].as_f64().unwrap();
        assert!(f("edges") > 100.0, "{row}");
        assert!(f("train_conflicts_after") < f("train_conflicts_before"), "{row}");
        assert!(f("bytes_moved") > 0.0, "{row}");
        let (st, ad) = (row["test_static"]["mean_depth"].as_f64().unwrap(), row["test_adaptive"]["mean_depth"].as_f64().unwrap());
        assert!(ad <= st && ad >= 1.0, "{row}");
    }
    // A skewed initial layout (alpha 1) leaves more to gain than a uniform one.
    let c = |i: usize| rows[i]["train_conflicts_before"].as_f64().unwrap();
    assert!(c(1) > c(0), "alpha 1 starts with more conflicts");
    assert_eq!(r["speedup"].as_array().unwrap().len(), 2);
}

/// The hard-disk array: a maximum group from the drive model, groups
/// formed, and rows planned on units and on groups with response times.
#[test]
fn eval_adapt_reports_the_hdd_array_with_and_without_grouping() {
    let p = trace();
    let r = json(&ok(&["eval", "adapt", "--trace", p.to_str().unwrap(), "--requests", "6000", "--quick", "--array", "hdd", "--hdd-drives", "8", "--json"]));
    assert!(r["ssd"].is_null(), "--array hdd runs no SSD array");
    let h = &r["hdd"];
    assert_eq!(h["drive"], "hdd:seagate-st91000640ss-detailed");
    assert_eq!(h["drives"], 8);
    let g = &h["grouping"];
    assert_eq!(g["max_group_bytes"], 1_259_315, "(17.06 - 7.5 + 4.1667) ms x 89,592 KiB/s");
    for (rows, grouped) in [(&h["rows"], false), (&g["rows"], true)] {
        let rows = rows.as_array().unwrap();
        assert_eq!(rows.len(), 2, "alpha 0 and 1 at threshold 1");
        for row in rows {
            let f = |k: &str| row[k].as_f64().unwrap();
            assert!(f("edges") > 0.0 && f("bytes_moved") > 0.0, "{row}");
            assert!(f("train_conflicts_after") < f("train_conflicts_before"), "{row}");
            for side in ["static_ms", "adaptive_ms"] {
                assert!(["read", "write", "all"].iter().all(|k| row[side][k].as_f64().unwrap() > 0.0), "{row}");
            }
            assert_eq!(row["groups"].is_null(), !grouped, "{row}");
        }
    }
    let grows = g["rows"].as_array().unwrap();
    assert!(grows.iter().all(|x| x["groups"]["groups"].as_u64().unwrap() > 0), "{g}");
    // Groups are vertices of several units: the grouped graph is smaller.
    let v = |rows: &serde_json::Value, i: usize| rows[i]["vertices"].as_u64().unwrap();
    assert!((0..2).all(|i| v(&g["rows"], i) < v(&h["rows"], i)), "{h}");
}

#[test]
fn eval_adapt_names_a_missing_trace_and_a_malformed_line() {
    let e = fails(&["eval", "adapt", "--trace", "/nonexistent/t.csv", "--quick"]);
    assert!(e.contains("trace /nonexistent/t.csv"), "{e}");
    let t = tempfile::tempdir().unwrap();
    let p = t.path().join("bad.csv");
    std::fs::write(&p, "version,time,op,size,lbn\n1,5633898,2a,512,42932745\n1,5633898,2a,oops,1\n").unwrap();
    let e = fails(&["eval", "adapt", "--trace", p.to_str().unwrap(), "--quick"]);
    assert!(e.contains("bad.csv:3") && e.contains("size"), "{e}");
}

/// `--plot DIR`: the directory is created, the three SVGs written (their
/// series named) and listed.
#[test]
fn eval_adapt_plots_into_a_directory() {
    let p = trace();
    let t = tempfile::tempdir().unwrap();
    let dir = t.path().join("plots");
    let out = ok(&["eval", "adapt", "--trace", p.to_str().unwrap(), "--requests", "6000", "--quick", "--array", "ssd", "--plot", dir.to_str().unwrap()]);
    for (f, names) in [("adapt-response.svg", &["SSD static", "SSD adaptive"][..]), ("adapt-cost-gain.svg", &["SSD (mosaic)", "paper Table 2 (AFA)"]), ("adapt-depth.svg", &["SSD static", "SSD adaptive"])] {
        let path = dir.join(f);
        assert!(out.contains(&format!("wrote plot {}", path.display())), "{f} not listed: {out}");
        let s = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{f}: {e}"));
        assert!(s.starts_with("<svg") || s.starts_with("<?xml"), "{f}: not an SVG");
        assert!(names.iter().all(|n| s.contains(n)), "{f}: series missing");
    }
}
