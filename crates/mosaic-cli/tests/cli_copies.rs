//! Copies of an array (`cp -a`), mixed up with it: a copy is its own
//! array (identities are UUIDs, paths are hints, copies are told apart by
//! session), so one copy's member never out-votes the array's own, the
//! array's own former member is not taken for a copy's, and scans name the
//! original.

use std::fs;
use std::path::Path;
use std::process::Command;

use crate::common;
use common::{fails, json, mosaic, ok};

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

fn pattern(seed: u8, len: usize) -> Vec<u8> {
    (0..len).map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed) ^ (i >> 12) as u8).collect()
}

fn cp_a(from: &Path, to: &Path) {
    assert!(Command::new("cp").args(["-a", s(from), s(to)]).status().unwrap().success());
}

fn write(spec: &str, data: &[u8], tmp: &Path) {
    let input = tmp.join("in.bin");
    fs::write(&input, data).unwrap();
    ok(&["write", "-a", spec, "--offset", "0", "--input", s(&input)]);
}

/// Read `len` bytes at 0: the bytes and stderr (the open's warnings).
fn read(spec: &str, len: usize, tmp: &Path) -> (Vec<u8>, String) {
    let out = tmp.join("out.bin");
    let o = mosaic(&["read", "-a", spec, "--offset", "0", "--length", &len.to_string(), "--output", s(&out)]);
    let e = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(o.status.success(), "read of {spec} failed: {e}");
    (fs::read(&out).unwrap(), e)
}

/// `cp -a P Q`, Q written twice (its event counter goes ahead), then Q's
/// `file` copied over P's (a wrong restore, a mixed-up disk).
fn copy_written_further(p: &Path, q: &Path, file: &str, tmp: &Path) {
    cp_a(p, q);
    for seed in [2, 3] {
        write(s(q), &pattern(seed, 64 << 10), tmp);
    }
    fs::copy(q.join(file), p.join(file)).unwrap();
}

/// The audit's case: P's three good members were called stale, and P
/// could not be opened, because one member of a copy had gone further.
#[test]
fn one_member_of_a_copy_written_further_does_not_out_vote_the_array() {
    let t = tempfile::tempdir().unwrap();
    let (p, q) = (t.path().join("p"), t.path().join("q"));
    ok(&["create", "-a", s(&p), "--level", "raid5", "--members", "4", "--member-size", "4M", "--stripe-unit", "4K"]);
    let mine = pattern(1, 64 << 10);
    write(s(&p), &mine, t.path());
    copy_written_further(&p, &q, "member-02.img", t.path());
    let (got, e) = read(s(&p), mine.len(), t.path());
    assert!(got == mine, "P read another copy's bytes");
    assert!(e.contains("member-02.img: member 2 carries the writes of another copy") && e.contains("another copy's member") && e.contains("not used"), "{e}");
    assert!(!e.contains("stale"), "P's own members were called stale: {e}");
    assert_eq!(mosaic(&["status", "-a", s(&p)]).status.code(), Some(4), "P is degraded, not failed");
    // The scan marks the intruder, not P's members.
    let found = json(&ok(&["assemble", "--scan", s(&p), "--json"]));
    let arr = &found[0]["array"];
    let marks: Vec<(bool, bool)> = arr["found"].as_array().unwrap().iter().map(|m| (m["stale"] == true, m["other_copy"] == true)).collect();
    assert_eq!(marks, [(false, false), (false, false), (false, true), (false, false)], "{found}");
    assert_eq!(arr["complete"], true, "{found}");
    assert!(ok(&["assemble", "--scan", s(&p)]).contains("ANOTHER COPY'S"));
    // A writable open leaves Q's file alone and keeps P's bytes.
    let q2 = fs::read(q.join("member-02.img")).unwrap();
    let theirs = pattern(4, 4096);
    write(s(&p), &theirs, t.path());
    assert!(fs::read(p.join("member-02.img")).unwrap() == q2, "the copy's member was written");
    let (got, _) = read(s(&p), mine.len(), t.path());
    assert!(got[..4096] == theirs[..] && got[4096..] == mine[4096..]);
}

/// Two members of each copy (raid5 of 4): neither can serve the array;
/// refused, naming both groups.
#[test]
fn two_copies_neither_able_to_serve_are_refused_naming_both() {
    let t = tempfile::tempdir().unwrap();
    let (p, q) = (t.path().join("p"), t.path().join("q"));
    ok(&["create", "-a", s(&p), "--level", "raid5", "--members", "4", "--member-size", "4M", "--stripe-unit", "4K"]);
    write(s(&p), &pattern(1, 64 << 10), t.path());
    copy_written_further(&p, &q, "member-02.img", t.path());
    fs::copy(q.join("member-03.img"), p.join("member-03.img")).unwrap();
    let e = fails(&["read", "-a", s(&p), "--offset", "0", "--length", "4096", "--output", s(&t.path().join("o"))]);
    assert!(e.contains("two copies of array") && e.contains("none with enough members") && e.contains("give the members of one copy"), "{e}");
    assert!(e.contains("member-00.img, ") && e.contains("member-02.img, ") && !e.contains("replace --member"), "{e}");
}

/// Make an array in P with `create` (after `-a P`), copy it to Q, write Q
/// further, put Q's `file` among P's: P reads its own bytes, and the
/// intruder is named `said`, not P's members stale.
fn intruder_among(create: &[&str], file: &str, said: &str) {
    let t = tempfile::tempdir().unwrap();
    let (p, q) = (t.path().join("p"), t.path().join("q"));
    ok(&[&["create", "-a", s(&p)][..], create].concat());
    let mine = pattern(1, 64 << 10);
    write(s(&p), &mine, t.path());
    copy_written_further(&p, &q, file, t.path());
    let (got, e) = read(s(&p), mine.len(), t.path());
    assert!(got == mine, "P read another copy's bytes");
    assert!(e.contains(said) && !e.contains("is stale"), "{e}");
}

/// A DVS directory shares the rule.
#[test]
fn a_dvs_copys_member_written_further_does_not_out_vote_the_array() {
    let create = ["--level", "dvs", "--members", "4", "--member-size", "16M", "--zoned", "--zone-size", "1M"];
    intruder_among(&create, "dvs-2.zoned", "dvs-2.zoned (zoned): member 2 carries the writes of another copy");
}

/// A tier's inner array (a fixed array) shares it too.
#[test]
fn a_tier_copys_inner_member_written_further_does_not_out_vote_the_array() {
    let create = ["--level", "tier", "--fast", "raid1:2", "--slow", "raid5:3", "--fast-size", "8M", "--slow-size", "16M"];
    intruder_among(&create, "slow/member-01.img", "member-01.img: member 1 carries the writes of another copy");
}

/// The array's own member, replaced onto a drive outside its directory,
/// leaves its file there: the array recorded the replacement, so no
/// command warns about the file again (md and ZFS pass over a replaced
/// disk; `assemble --scan` lists it as replaced), and `add --spare` takes
/// it back as md does.  A copy's replaced member (an identity this array
/// never had) is still refused, and the message says what it may be.
#[test]
fn the_arrays_former_member_is_quiet_and_taken_back_as_a_spare() {
    let t = tempfile::tempdir().unwrap();
    let (a, c) = (t.path().join("a"), t.path().join("c"));
    ok(&["create", "-a", s(&a), "--level", "raid5", "--members", "3", "--member-size", "4M", "--stripe-unit", "4K"]);
    let data = pattern(9, 64 << 10);
    write(s(&a), &data, t.path());
    cp_a(&a, &c);
    for (dir, drive) in [(&a, t.path().join("a-new0.img")), (&c, t.path().join("c-new0.img"))] {
        ok(&["fail", "-a", s(dir), "--member", "0"]);
        ok(&["replace", "-a", s(dir), "--member", "0", "--drive", s(&drive)]);
    }
    let o = mosaic(&["info", "-a", s(&a)]);
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success() && !e.contains("warning"), "the replaced member's file is warned about: {e}");
    let scan = ok(&["assemble", "--scan", s(&a)]);
    assert!(scan.contains("member-00.img") && scan.contains("REPLACED"), "{scan}");
    // The copy's new member 0 is no former member of A.
    let e = fails(&["add", "-a", s(&a), "--spare", s(&t.path().join("c-new0.img"))]);
    assert!(e.contains("a copy's member (another array), or a former member of this one that it keeps no record of replacing") && e.contains("--force"), "{e}");
    let out = ok(&["add", "-a", s(&a), "--spare", s(&a.join("member-00.img"))]);
    assert!(out.contains("hot spare"), "{out}");
    let st = json(&ok(&["info", "-a", s(&a), "--json"]));
    assert_eq!(st["spares"].as_array().map(Vec::len), Some(1), "{st}");
    assert_eq!(read(s(&a), data.len(), t.path()).0, data);
}

/// A DVS directory and its copy: the scan names the original (the
/// directory whose files were born with the array), as for fixed arrays.
#[test]
fn a_dvs_directory_and_its_copy_are_told_apart_by_the_scan() {
    let t = tempfile::tempdir().unwrap();
    let (d, d2) = (t.path().join("d"), t.path().join("d2"));
    ok(&["create", "-a", s(&d), "--level", "dvs", "--members", "4", "--member-size", "16M", "--zoned", "--zone-size", "1M"]);
    cp_a(&d, &d2);
    if fs::metadata(d.join("dvs-0.zoned")).and_then(|m| m.created()).is_err() {
        return; // no birth times on this file system
    }
    let out = ok(&["assemble", "--scan", s(&d), s(&d2)]);
    let canon = |p: &Path| fs::canonicalize(p).unwrap().display().to_string();
    assert!(out.contains(&format!("(the original, in {}:", canon(&d))), "{out}");
    assert!(out.contains(&format!("(a copy, in {}:", canon(&d2))), "{out}");
}
