//! `mosaic grow --size` (mdadm's `--grow --size`): the member files grown
//! behind the array, as larger drives would be, then the array takes more
//! of each; the old bytes stay, the new space reads zeros, scrub is clean.

use std::fs::OpenOptions;
use std::path::Path;

use crate::common;
use common::{fails, json, ok};

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// Member `i`'s file of the directory array `a` made `size` bytes long.
fn resize(a: &Path, i: usize, size: u64) {
    OpenOptions::new().write(true).open(a.join(format!("member-0{i}.img"))).unwrap().set_len(size).unwrap();
}

#[test]
fn grow_size_takes_the_larger_drives_and_keeps_the_bytes() {
    let t = tempfile::tempdir().unwrap();
    let a = t.path().join("arr");
    ok(&["create", "-a", s(&a), "--level", "raid6", "--members", "5", "--member-size", "4M"]);
    let pattern: Vec<u8> = (0..9u32 << 20).map(|i| (i.wrapping_mul(2654435761) >> 11) as u8).collect();
    let input = t.path().join("pattern.bin");
    std::fs::write(&input, &pattern).unwrap();
    ok(&["write", "-a", s(&a), "--offset", "0", "--input", s(&input)]);
    let e = fails(&["grow", "-a", s(&a), "--size", "max"]);
    assert!(e.contains("nothing to grow: each member gives 3145728 bytes already"), "{e}");
    // Larger drives: 12 MiB, one of 10 MiB.
    (0..5).for_each(|i| resize(&a, i, if i == 3 { 10 << 20 } else { 12 << 20 }));
    let e = fails(&["grow", "-a", s(&a), "--size", "10M"]);
    assert!(e.contains("member-03.img: too small for 10485760 bytes a member: it holds 9437184 after the array's 1048576-byte header"), "{e}");
    let e = fails(&["grow", "-a", s(&a), "--size", "max", "--add", s(&t.path().join("x.img"))]);
    assert!(e.contains("cannot be used with"), "{e}");
    let e = fails(&["grow", "-a", s(&a), "--size", "lots"]);
    assert!(e.contains("invalid value 'lots' for '--size <SIZE|max>'") && e.contains("(or \"max\")"), "{e}");
    let rep = json(&ok(&["grow", "-a", s(&a), "--size", "max", "--json"]));
    assert_eq!((rep["member_data_size_before"].as_u64(), rep["member_data_size"].as_u64()), (Some(3 << 20), Some(9 << 20)), "{rep}");
    assert_eq!((rep["capacity_before"].as_u64(), rep["capacity"].as_u64()), (Some(9 << 20), Some(27 << 20)), "{rep}");
    assert_eq!(rep["bytes_written"].as_u64(), Some(5 * (6 << 20)), "every member's new 6 MiB, once: {rep}");
    let info = json(&ok(&["info", "-a", s(&a), "--json"]));
    assert_eq!(info["capacity"].as_u64(), Some(27 << 20), "{info}");
    let out = t.path().join("back.bin");
    ok(&["read", "-a", s(&a), "--offset", "0", "--length", "27M", "--output", s(&out)]);
    let back = std::fs::read(&out).unwrap();
    assert!(back[..pattern.len()] == pattern[..], "the old bytes read back");
    assert!(back[pattern.len()..].iter().all(|&b| b == 0), "the new space reads zeros");
    assert!(ok(&["scrub", "-a", s(&a)]).contains("all consistent"));
    // Served: grown under the server, with a client connected; a new
    // connection sees the new size, and the server's events say so.
    (0..5).for_each(|i| resize(&a, i, 16 << 20));
    let srv = common::serve::Serve::start(s(&a), &["--quiet"]);
    let uri = format!("nbd://127.0.0.1:{}/mosaic", srv.port);
    assert_eq!(nbd_size(&uri), 27 << 20);
    let text = ok(&["grow", "-a", s(&a), "--size", "max"]);
    assert!(text.starts_with("grown to 15.0 MiB a member, capacity 45.0 MiB (was 27.0 MiB): 96 new stripes written with zeros"), "{text}");
    assert_eq!(nbd_size(&uri), 45 << 20, "a new connection sees the new size");
    let st = json(&ok(&["status", "-a", s(&a), "--json"]))[0].clone();
    let kinds: Vec<&str> = st["events"].as_array().unwrap().iter().filter_map(|e| e["kind"].as_str()).collect();
    assert!(kinds.contains(&"grow-start") && kinds.contains(&"grow-end"), "{st}");
    let e = fails(&["grow", "-a", s(&a), "--size", "max"]);
    assert!(e.contains("nothing to grow"), "the server's refusal: {e}");
    srv.stop();
    let out = t.path().join("back2.bin");
    ok(&["read", "-a", s(&a), "--offset", "0", "--length", "45M", "--output", s(&out)]);
    let back = std::fs::read(&out).unwrap();
    assert!(back[..pattern.len()] == pattern[..] && back[pattern.len()..].iter().all(|&b| b == 0), "grown online: the bytes, then zeros");
    assert!(ok(&["scrub", "-a", s(&a)]).contains("all consistent"));
}

/// The export size a new NBD connection to `uri` learns (libnbd's nbdinfo).
fn nbd_size(uri: &str) -> u64 {
    let o = std::process::Command::new("nbdinfo").args(["--size", uri]).output().expect("nbdinfo (libnbd-bin)");
    assert!(o.status.success(), "nbdinfo: {}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8_lossy(&o.stdout).trim().parse().unwrap()
}
