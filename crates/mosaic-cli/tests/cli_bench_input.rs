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

/// Where `bench dvs` and `bench tier` make their scratch directory.
fn scratch_base() -> std::path::PathBuf {
    match std::fs::metadata("/dev/shm") {
        Ok(m) if m.is_dir() => "/dev/shm".into(),
        _ => std::env::temp_dir(),
    }
}

/// Scratch directories (`.tmp*` in `base`) holding a file of at least
/// `len` bytes, up to 4 levels down.
fn scratch_with_file_of(base: &std::path::Path, len: u64) -> Vec<std::path::PathBuf> {
    fn has(dir: &std::path::Path, len: u64, depth: u32) -> bool {
        let Ok(rd) = std::fs::read_dir(dir) else { return false };
        rd.flatten().any(|e| match e.metadata() {
            Ok(m) if m.is_dir() => depth > 0 && has(&e.path(), len, depth - 1),
            Ok(m) => m.len() >= len,
            Err(_) => false,
        })
    }
    let Ok(rd) = std::fs::read_dir(base) else { return Vec::new() };
    rd.flatten().map(|e| e.path()).filter(|p| p.file_name().is_some_and(|n| n.to_string_lossy().starts_with(".tmp")) && has(p, len, 3)).collect()
}

/// Run `mosaic args`, giving it `secs` seconds: its output, or a failure
/// once it has run that long (it was filling the scratch directory:
/// killed, and the scratch directories with its 1 EiB member files
/// removed).
fn within(args: &[&str], secs: u64) -> std::process::Output {
    use std::process::{Command, Stdio};
    let mut c = Command::new(env!("CARGO_BIN_EXE_mosaic")).args(args).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("run mosaic");
    let t0 = std::time::Instant::now();
    while t0.elapsed() < std::time::Duration::from_secs(secs) {
        if c.try_wait().expect("wait").is_some() {
            return c.wait_with_output().expect("output");
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let _ = c.kill();
    let _ = c.wait();
    for d in scratch_with_file_of(&scratch_base(), 1 << 60) {
        let _ = std::fs::remove_dir_all(d);
    }
    panic!("mosaic {args:?}: still running after {secs} s (filling {} instead of refusing)", scratch_base().display());
}

/// `bench dvs` and `bench tier` make their member files in a scratch
/// directory (/dev/shm, RAM, when it exists) and fill them: files larger
/// than the space free there are refused, naming the flag and the space,
/// before any is made (1 EiB members filled /dev/shm until killed).
#[test]
fn bench_member_files_beyond_the_scratch_space_are_refused_before_any_is_made() {
    let base = scratch_base();
    for (args, files) in [
        (&["bench", "dvs", "--seconds", "0.05", "--member-size", "1E"][..], "--member-size 1.0 EiB x 6 (5 members and a rebuild's replacement)"),
        (&["bench", "dvs", "--seconds", "0.05", "--random-only", "--member-size", "1E"][..], "--member-size 1.0 EiB x 5 (5 members)"),
        (&["bench", "tier", "--seconds", "0.05", "--member-size", "1E"][..], "--member-size 1.0 EiB x 28"),
    ] {
        let o = within(args, 10);
        let e = String::from_utf8_lossy(&o.stderr).into_owned();
        assert_eq!(o.status.code(), Some(1), "mosaic {args:?}: {e}");
        assert!(e.starts_with(&format!("error: {files}")), "mosaic {args:?}: {e}");
        assert!(e.contains(&format!("of files in {}, more than the ", base.display())) && e.contains(" free there"), "mosaic {args:?}: {e}");
        assert!(o.stdout.is_empty(), "mosaic {args:?}: {}", String::from_utf8_lossy(&o.stdout));
        assert_eq!(scratch_with_file_of(&base, 1 << 60), Vec::<std::path::PathBuf>::new(), "mosaic {args:?} made its member files");
    }
}

/// `bench dvs --member-size`: whole 4 MiB zones, at least 3 (fewer leave
/// no room for data); refused when parsed, naming the flag and the rule.
#[test]
fn bench_dvs_member_size_must_be_whole_zones_of_at_least_12_mib() {
    for v in ["0", "1", "4K", "4M", "8M", "63M", "12582913"] {
        let e = refused(&["bench", "dvs", "--member-size", v], "--member-size");
        assert!(e.contains(&format!("{v:?}: give a whole number of 4.0 MiB zones, at least 12.0 MiB")), "{v}: {e}");
    }
}

/// `bench tier --member-size` too small for the tier's layout (0 among
/// them), or so large its slow members (2x) pass a file's end, is refused
/// when parsed with the range; the smallest allowed runs.
#[test]
fn bench_tier_member_size_must_hold_the_tier_layout() {
    for v in ["0", "1", "1M", "2M", "3M", "3583K", "3670015", "4611686018427387904", "15E"] {
        let e = refused(&["bench", "tier", "--seconds", "0.05", "--member-size", v], "--member-size");
        assert!(e.contains(&format!("{v:?}: give at least 3.5 MiB")) && e.contains("and at most 4.0 EiB"), "{v}: {e}");
    }
    let v = crate::common::json(&crate::common::ok(&["bench", "tier", "--seconds", "0.01", "--member-size", "3.5M", "--json"]));
    assert_eq!(v.as_array().map(Vec::len), Some(6), "{v}");
}

/// `bench cache`: a count of 0 made every per-write column NaN (0 / 0)
/// and `--repeat 0` silently ran once; counts are refused out of range,
/// a cache below one page and a journal too small for the caches by
/// their flags.  One write gives finite figures.
#[test]
fn bench_cache_counts_and_sizes_that_leave_a_ratio_undefined_are_refused() {
    for v in ["0", "100000001", "18446744073709551615"] {
        let e = refused(&["bench", "cache", "--writes", v], "--writes");
        assert!(e.contains("1..=100000000"), "{v}: {e}");
    }
    for v in ["0", "101"] {
        let e = refused(&["bench", "cache", "--writes", "10", "--repeat", v], "--repeat");
        assert!(e.contains("1..=100"), "{v}: {e}");
    }
    for v in ["0", "1", "4095"] {
        let e = refused(&["bench", "cache", "--writes", "10", "--cache-size", v], "--cache-size");
        assert!(e.contains("at least one page, 4 KiB"), "{v}: {e}");
    }
    for (j, c) in [("0", "1M"), ("1M", "1M"), ("20M", "1M"), ("96M", "8M")] {
        let e = refused(&["bench", "cache", "--writes", "10", "--journal-size", j, "--cache-size", c], "--journal-size");
        assert!(e.contains("is too small for --cache-size") && e.contains("need a journal of at least"), "{j} {c}: {e}");
    }
    let v = crate::common::json(&crate::common::ok(&["bench", "cache", "--writes", "1", "--repeat", "1", "--random-only", "--config", "ppc", "--json"]));
    let rows = v.as_array().expect("rows");
    assert_eq!(rows.len(), 2, "{v}");
    for r in rows {
        for k in ["ops_per_sec", "ops_per_cpu_sec", "ratio_to_no_cache", "device_reads_per_write", "device_writes_per_write", "journal_records_per_write"] {
            assert!(r[k].as_f64().is_some_and(f64::is_finite), "{k} is not a finite number: {r}");
        }
    }
}
