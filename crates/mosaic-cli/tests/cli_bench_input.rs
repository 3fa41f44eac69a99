//! `mosaic bench ...` refuses bad input with a clear error naming the
//! option (exit 1, or clap's 2), never a panic (101) or an abort (134).

use crate::common::mosaic;

/// Run `mosaic args`, expect it refused: exit 1 or 2, one clear error line
/// naming `option`, no panic.
fn refused(args: &[&str], option: &str) -> String {
    let o = mosaic(args);
    let e = String::from_utf8_lossy(&o.stderr).into_owned();
    let code = o.status.code();
    assert!(matches!(code, Some(1 | 2)), "mosaic {args:?}: exit {code:?} (101 is a panic, 134 an abort, None a signal): {e}");
    assert!(e.starts_with("error: "), "mosaic {args:?}: no clear error line: {e}");
    assert!(!e.contains("panicked"), "mosaic {args:?}: panic: {e}");
    assert!(e.contains(option), "mosaic {args:?}: the error does not name {option}: {e}");
    e
}

/// `--seconds` of every bench that has one: finite, above zero, at most
/// 1e6, checked when the arguments are parsed.
#[test]
fn bench_seconds_must_be_positive_finite_and_bounded() {
    for bench in ["encode", "array", "dvs", "tier"] {
        for v in ["-1", "0", "nan", "inf", "1e300", "1e7", "x"] {
            let e = refused(&["bench", bench, &format!("--seconds={v}")], "--seconds");
            assert!(e.contains("above 0 and at most 1000000"), "bench {bench} --seconds={v}: the range is not said: {e}");
        }
    }
}

/// `bench cache --footprint` below one 4 KiB page leaves the random writes
/// no block to pick; above the bench array's capacity, no room.
#[test]
fn bench_cache_footprint_must_hold_a_page_and_fit_the_array() {
    for v in ["0", "1", "4095"] {
        let e = refused(&["bench", "cache", "--writes", "10", "--footprint", v], "--footprint");
        assert!(e.contains("at least one page, 4 KiB"), "{e}");
    }
    let e = refused(&["bench", "cache", "--writes", "10", "--random-only", "--repeat", "1", "--footprint", "1T"], "--footprint");
    assert!(e.contains("capacity"), "{e}");
}

/// RAM members, journals and caches larger than the machine's memory are
/// refused before anything is allocated (allocating them aborted).
#[test]
fn bench_ram_sizes_beyond_the_machines_memory_are_refused() {
    for (args, option) in [
        (&["bench", "array", "--seconds", "0.1", "--member-size", "1E"][..], "--member-size"),
        (&["bench", "array", "--seconds", "0.1", "--member-size", "1T"][..], "--member-size"),
        (&["bench", "array", "--seconds", "0.1", "--journal", "1E"][..], "--journal"),
        (&["bench", "cache", "--writes", "10", "--journal-size", "1E"][..], "--journal-size"),
        (&["bench", "cache", "--writes", "10", "--cache-size", "1E"][..], "--cache-size"),
    ] {
        let e = refused(args, option);
        assert!(e.contains("more than this machine's"), "{e}");
    }
}

/// `bench replay --requests`: 0 is no trace, and an unbounded count an
/// unbounded temporary file; both refused when parsed.
#[test]
fn bench_replay_requests_must_be_1_to_100_million() {
    for v in ["0", "100000001", "18446744073709551615"] {
        let e = refused(&["bench", "replay", "--requests", v], "--requests");
        assert!(e.contains("1..=100000000"), "{e}");
    }
}
