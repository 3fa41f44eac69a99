//! The experiment commands (`eval`, `replay`, `model`, `advise`, `adapt`,
//! `trace stats`, `bench replay`) refuse degenerate values with an error
//! naming the option, instead of printing a table of zeros or NaNs, and
//! name every choice when one is unknown.

use crate::common::{fails, mosaic, msr_trace, ok, TraceSpec};

/// Run `mosaic args`, expect it refused (exit 1, or clap's 2) with an
/// error line naming `option`, no panic.
fn refused(args: &[&str], option: &str) -> String {
    let o = mosaic(args);
    let e = String::from_utf8_lossy(&o.stderr).into_owned();
    let code = o.status.code();
    assert!(matches!(code, Some(1 | 2)), "mosaic {args:?}: exit {code:?}: {e}");
    assert!(e.starts_with("error: ") && !e.contains("panicked"), "mosaic {args:?}: {e}");
    assert!(e.contains(option), "mosaic {args:?}: the error does not name {option}: {e}");
    e
}

/// A count of zero runs nothing: `eval cbro --requests 0` printed 0 IOPS
/// and NaN ratios with exit 0, `bench replay --repeat 0` ran once,
/// `advise --queue-depth 0` was taken as 1.
#[test]
fn zero_counts_are_refused_naming_the_option() {
    let t = tempfile::tempdir().unwrap();
    let trace = t.path().join("t.csv");
    msr_trace(&trace, &TraceSpec { seed: 5, requests: 50, span: 1 << 30, write_pct: 50, sizes: &[4096], hot: None });
    let tr = trace.to_str().unwrap();
    let cases: &[(&[&str], &str)] = &[
        (&["eval", "cbro", "--requests", "0", "--part", "offload"], "--requests"),
        (&["eval", "cbro", "--unit-requests", "0", "--part", "units"], "--unit-requests"),
        (&["eval", "adapt", "--quick", "--planted", "2", "--requests", "0"], "--requests"),
        (&["eval", "adapt", "--quick", "--planted", "2", "--drives", "0"], "--drives"),
        (&["eval", "adapt", "--quick", "--planted", "2", "--hdd-drives", "0"], "--hdd-drives"),
        (&["eval", "dvs", "--quick", "--count", "0"], "--count"),
        (&["eval", "tier", "--quick", "--trace-requests", "0"], "--trace-requests"),
        (&["bench", "replay", "--requests", "1000", "--repeat", "0"], "--repeat"),
        (&["advise", "--trace", tr, "--queue-depth", "0"], "--queue-depth"),
        (&["adapt", "-a", "nowhere", "--dry-run", "--trace", tr, "--threshold", "0"], "--threshold"),
        (&["adapt", "-a", "nowhere", "--dry-run", "--trace", tr, "--requests", "0"], "--requests"),
    ];
    for (args, option) in cases {
        refused(args, option);
    }
}

/// `eval ppc --unit` is the stripe unit, and the cache page: the error
/// said "logical block size must be 512 or 4096 bytes", naming no option.
/// `model --sizes 1:1` printed rows of 0.00 KiB.
#[test]
fn sizes_below_a_sector_or_off_the_block_are_refused() {
    for unit in ["0", "3K", "8K"] {
        let e = refused(&["eval", "ppc", "--unit", unit], "--unit");
        assert!(e.contains("512 or 4096 bytes"), "{e}");
    }
    let e = refused(&["model", "--sizes", "1:1"], "--sizes");
    assert!(e.contains("512-byte sector"), "{e}");
}

/// An unknown replay layout is answered with every layout replay takes
/// (the list named only the fixed levels).
#[test]
fn an_unknown_replay_layout_names_every_layout() {
    let e = refused(&["replay", "--synthetic", "randwrite", "--count", "10", "--layout", "bogus"], "--layout \"bogus\"");
    for l in ["raid5", "rs:K+M", "tier", "remap:LEVEL", "dvs", "segment-raid5", "sblock-raid5"] {
        assert!(e.contains(l), "{l} missing: {e}");
    }
}

/// `trace stats --trace FILE` is the same as `trace stats FILE` (it asked
/// for the positional FILE as well); giving both is refused.
#[test]
fn trace_stats_takes_the_file_either_way() {
    let t = tempfile::tempdir().unwrap();
    let trace = t.path().join("t.csv");
    msr_trace(&trace, &TraceSpec { seed: 7, requests: 40, span: 1 << 30, write_pct: 50, sizes: &[4096, 8192], hot: None });
    let tr = trace.to_str().unwrap();
    let positional = ok(&["trace", "stats", tr, "--json"]);
    let option = ok(&["trace", "stats", "--trace", tr, "--json"]);
    assert_eq!(positional, option);
    assert!(positional.contains("\"requests\": 40"), "{positional}");
    let e = fails(&["trace", "stats", tr, "--trace", tr]);
    assert!(e.contains("cannot be used with"), "{e}");
}

/// `adapt -a` of a path that is not there says so (it said "the inner
/// array arr/missing/inner: arr/missing/inner: No such file").
#[test]
fn adapt_of_a_missing_array_says_there_is_none() {
    let t = tempfile::tempdir().unwrap();
    let trace = t.path().join("t.csv");
    msr_trace(&trace, &TraceSpec { seed: 9, requests: 20, span: 1 << 30, write_pct: 50, sizes: &[4096], hot: None });
    let missing = t.path().join("missing");
    let e = fails(&["adapt", "-a", missing.to_str().unwrap(), "--dry-run", "--trace", trace.to_str().unwrap()]);
    assert!(e.contains(&format!("no array at {}: no such file or directory", missing.display())), "{e}");
    assert!(!e.contains("inner"), "{e}");
}

/// `eval adapt` without `--trace` where no default trace is found (the
/// tests run with `MOSAIC_DEFAULT_TRACE` empty) says where it looked and
/// what to give instead.
#[test]
fn eval_adapt_without_a_trace_says_where_it_looked() {
    let e = refused(&["eval", "adapt", "--quick"], "--trace");
    assert!(e.contains("no --trace given and no shared/traces/cloudphysics-vscsi-part1.csv beside the working directory or the mosaic binary"), "{e}");
    assert!(e.contains("give --trace FILE, or --planted N for a synthetic trace"), "{e}");
}
