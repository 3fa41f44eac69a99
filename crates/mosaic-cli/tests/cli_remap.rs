//! `mosaic create --level remap` and `mosaic adapt` on a real raid5
//! remapped array: a trace with a planted correlation structure (cliques
//! of units requested together, all on one drive at first) is planned to
//! zero conflicts; the migration killed with SIGKILL half-way loses
//! nothing and a re-run resumes; every byte reads back and the inner
//! parity scrubs clean; a degraded array pauses; bad input is an error.

use crate::common;
use common::{fails, json, mosaic, ok};

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

const UNIT: u64 = 64 << 10;

/// `rounds` rounds of the 40 cliques in a seeded order (xorshift).
fn clique_rounds(rounds: usize) -> Vec<Vec<u64>> {
    let mut x = 7u64;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    (0..rounds).map(|_| (0..40u64).map(|k| (k + next() % 40) % 40).collect()).collect()
}

/// Clique g: units 12g + 0/4/8/12 ... spaced so that several of them
/// share a drive at home; 40 cliques, each requested 20 times, the four
/// units of one arriving together, cliques 5 ms apart.
fn planted(path: &Path) {
    let mut out = String::new();
    let mut t = 128_166_372_000_000_000u64;
    for round in clique_rounds(20) {
        for g in round {
            for i in 0..4 {
                let unit = g * 16 + i * 4;
                out.push_str(&format!("{t},host,0,Read,{},{UNIT},100\n", unit * UNIT));
            }
            t += 50_000;
        }
    }
    std::fs::write(path, out).unwrap();
}

fn create(dir: &Path) -> String {
    let arr = dir.join("arr").to_str().unwrap().to_string();
    // A quarter of each drive spare: the 160 planted units start on one
    // drive, and 120 of them must find room elsewhere (W).
    ok(&["create", "-a", &arr, "--level", "remap", "--inner", "raid5:4", "--member-size", "24M", "--journal-size", "8M", "--remap-spare", "0.25"]);
    arr
}

/// Fill the array with a pattern; the bytes.
fn fill(dir: &Path, arr: &str) -> Vec<u8> {
    let info = json(&ok(&["info", "-a", arr, "--json"]));
    let cap = info["volume"]["capacity"].as_u64().unwrap();
    // Identity and size at the top, as every kind has them.
    assert_eq!((info["capacity"].as_u64(), &info["uuid"]), (Some(cap), &info["volume"]["uuid"]), "{info}");
    assert!(info["uuid"].is_string(), "{info}");
    let bytes: Vec<u8> = (0..cap as u32).map(|i| (i.wrapping_mul(2654435761) >> 13) as u8).collect();
    let f = dir.join("fill.bin");
    std::fs::write(&f, &bytes).unwrap();
    ok(&["write", "-a", arr, "--offset", "0", "--input", f.to_str().unwrap()]);
    bytes
}

fn read_all(dir: &Path, arr: &str, len: usize) -> Vec<u8> {
    let out = dir.join("out.bin");
    ok(&["read", "-a", arr, "--offset", "0", "--length", &len.to_string(), "--output", out.to_str().unwrap(), "--force"]);
    std::fs::read(out).unwrap()
}

#[test]
fn adapt_recovers_a_planted_structure_survives_kill_9_and_resumes() {
    let d = tempfile::tempdir().unwrap();
    let arr = create(d.path());
    let bytes = fill(d.path(), &arr);
    let trace = d.path().join("planted.csv");
    planted(&trace);
    let tr = trace.to_str().unwrap();
    let dry = json(&ok(&["adapt", "-a", &arr, "--trace", tr, "--dry-run", "--json"]));
    let t = &dry["plan"]["target"];
    assert!(t["conflicts_before"].as_u64().unwrap() > 0, "{dry}");
    assert_eq!(t["conflicts_after"].as_u64().unwrap(), 0, "the planted structure is recovered: {dry}");
    let moves = t["moves"].as_array().unwrap();
    assert!(moves.len() >= 40, "{dry}");
    let benefit = |i: usize| moves[i]["benefit"].as_i64().unwrap();
    assert!((1..moves.len()).all(|i| benefit(i - 1) >= benefit(i)), "best first");
    assert!(dry["prediction"]["gain"].as_f64().unwrap() > 0.0, "the simulator predicts a gain: {dry}");
    // A slow migration, killed with SIGKILL once it has moved something.
    let mut child = Command::new(env!("CARGO_BIN_EXE_mosaic")).args(["adapt", "-a", &arr, "--trace", tr, "--rate", "512K"]).stdout(std::process::Stdio::null()).spawn().unwrap();
    let start = Instant::now();
    loop {
        std::thread::sleep(Duration::from_millis(300));
        let moved = moved_units(&arr);
        if moved > 0 || start.elapsed() > Duration::from_secs(30) {
            break;
        }
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let partial = moved_units(&arr);
    assert!(partial > 0, "the killed run moved something first");
    assert_eq!(read_all(d.path(), &arr, bytes.len()), bytes, "nothing lost after kill -9");
    // The re-run resumes from the placement on disk and finishes.
    let run = json(&ok(&["adapt", "-a", &arr, "--trace", tr, "--json"]));
    assert_eq!(run["migrated"]["left"].as_u64().unwrap(), 0, "{run}");
    assert!(run["plan"]["target"]["moves"].as_array().unwrap().len() < moves.len() + 1, "{run}");
    let after = json(&ok(&["adapt", "-a", &arr, "--trace", tr, "--dry-run", "--json"]));
    assert_eq!(after["plan"]["target"]["conflicts_before"].as_u64().unwrap(), 0, "{after}");
    assert!(after["plan"]["target"]["moves"].as_array().unwrap().is_empty());
    assert_eq!(read_all(d.path(), &arr, bytes.len()), bytes, "every byte after the migration");
    let s = json(&ok(&["scrub", "-a", &arr, "--json"]));
    assert_eq!(s["mismatched"].as_u64().unwrap(), 0, "inner parity consistent: {s}");
}

fn moved_units(arr: &str) -> u64 {
    let o = mosaic(&["info", "-a", arr, "--json"]);
    if !o.status.success() {
        return 0; // busy: the migration holds it
    }
    json(&String::from_utf8_lossy(&o.stdout))["stats"]["moved_units"].as_u64().unwrap_or(0)
}

#[test]
fn a_degraded_array_pauses_and_bad_input_is_an_error() {
    let d = tempfile::tempdir().unwrap();
    let arr = create(d.path());
    let trace = d.path().join("planted.csv");
    planted(&trace);
    let tr = trace.to_str().unwrap();
    ok(&["fail", "-a", &arr, "--member", "1"]);
    let o = mosaic(&["adapt", "-a", &arr, "--trace", tr]);
    assert_eq!(o.status.code(), Some(4), "paused while degraded: exit 4; {}", String::from_utf8_lossy(&o.stderr));
    assert!(String::from_utf8_lossy(&o.stderr).contains("paused"));
    let bad = d.path().join("bad.csv");
    std::fs::write(&bad, "128166372000000000,host,0,Read,0,65536,100\nnot a line\n").unwrap();
    let e = fails(&["adapt", "-a", &arr, "--trace", bad.to_str().unwrap(), "--dry-run"]);
    assert!(e.contains("line 2") || e.contains(":2"), "{e}");
    let e = fails(&["adapt", "-a", &arr, "--trace", tr, "--max-move", "150%"]);
    assert!(e.contains("max-move"), "{e}");
    let e = fails(&["adapt", "-a", &arr, "--dry-run"]);
    assert!(e.contains("no --trace") && e.contains("monitor.trace"), "{e}");
    let e = fails(&["create", "-a", d.path().join("x").to_str().unwrap(), "--level", "remap", "--member-size", "8M"]);
    assert!(e.contains("--inner"), "{e}");
    let e = fails(&["create", "-a", d.path().join("y").to_str().unwrap(), "--level", "remap", "--inner", "raid1:2", "--member-size", "8M"]);
    assert!(e.contains("raid1"), "{e}");
}

/// `serve --adapt-every`: a client reads the planted cliques over NBD
/// (qemu-io, a clique's four reads back to back, cliques 5 ms apart) and
/// writes elsewhere; the server's monitor ring feeds the periodic job,
/// which moves units while the client works.  Afterwards the planted
/// structure has no conflict left and every byte is what was written.
#[test]
fn serve_adapts_online_from_what_clients_request() {
    let d = tempfile::tempdir().unwrap();
    let arr = create(d.path());
    let mut bytes = fill(d.path(), &arr);
    let mut cmds: Vec<String> = Vec::new();
    for (round, gs) in (0u64..).zip(clique_rounds(12)) {
        for g in gs {
            for i in 0..4 {
                cmds.push(format!("read {} 64k", (g * 16 + i * 4) * UNIT));
            }
            cmds.push("sleep 5".into());
        }
        // A client write away from the cliques, during the migration.
        let off = (700 + round) * UNIT;
        cmds.push(format!("write -P {} {off} 64k", 0x40 + round));
        bytes[off as usize..(off + UNIT) as usize].fill(0x40 + round as u8);
    }
    let srv = common::serve::Serve::start(&arr, &["--adapt-every", "0.5", "--adapt-min-requests", "200", "--adapt-rate", "0", "--quiet"]);
    let uri = format!("nbd://127.0.0.1:{}/mosaic", srv.port);
    let mut args = vec!["-f".to_string(), "raw".into(), uri];
    for c in &cmds {
        args.push("-c".into());
        args.push(c.clone());
    }
    let o = Command::new("qemu-io").args(&args).output().expect("qemu-io");
    assert!(o.status.success(), "qemu-io: {}", String::from_utf8_lossy(&o.stderr));
    std::thread::sleep(Duration::from_millis(1500));
    let (code, log) = srv.stop();
    assert_eq!(code, 0, "{log:?}");
    let moved: Vec<&String> = log.iter().filter(|l| l.contains("adapt: moved")).collect();
    assert!(!moved.is_empty(), "the job moved units while serving: {log:?}");
    // The monitored requests were saved for `mosaic adapt` without --trace.
    assert!(log.iter().any(|l| l.contains("monitored requests saved")), "{log:?}");
    let again = json(&ok(&["adapt", "-a", &arr, "--dry-run", "--json"]));
    assert!(again["plan"]["requests"].as_u64().unwrap() >= 12 * 40 * 4, "{again}");
    let trace = d.path().join("planted.csv");
    planted(&trace);
    let after = json(&ok(&["adapt", "-a", &arr, "--trace", trace.to_str().unwrap(), "--dry-run", "--json"]));
    let before = after["plan"]["target"]["conflicts_before"].as_u64().unwrap();
    assert!(before < 4800 / 4, "the planted conflicts (4800 at home) mostly gone: {before}");
    assert_eq!(read_all(d.path(), &arr, bytes.len()), bytes, "every byte after online migration");
}
