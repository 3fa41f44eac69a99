//! Data-safety regressions, each reproduced exactly from the command line:
//! a stale member is never read, one writer per array for every kind, a
//! copy of an array is its own array, one bad member does not make an
//! array unopenable, and wide rs codes fit their superblock.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::common;
use common::{fails, json, mosaic, ok};

/// Every file under `dir`, recursively, with its bytes.
fn tree(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else {
                out.push((p.clone(), fs::read(&p).unwrap()));
            }
        }
    }
    out.sort();
    out
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// A seeded pattern: different for every `seed` and block.
fn pattern(seed: u8, len: usize) -> Vec<u8> {
    (0..len).map(|i| (i / 4096) as u8 ^ (i as u8).wrapping_mul(31) ^ seed.wrapping_mul(101)).collect()
}

fn raid5(dir: &Path) {
    ok(&["create", "-a", s(dir), "--level", "raid5", "--members", "4", "--member-size", "4M", "--stripe-unit", "4K"]);
}

fn write(arr: &str, off: &str, data: &[u8], t: &Path) {
    let f = t.join(format!("in-{}.bin", data.len()));
    fs::write(&f, data).unwrap();
    ok(&["write", "-a", arr, "--offset", off, "--input", s(&f)]);
}

/// Read `len` bytes at 0, returning the bytes and stderr.
fn read(arr: &str, len: usize, t: &Path) -> (Vec<u8>, String) {
    let f = t.join("out.bin");
    let o = mosaic(&["read", "-a", arr, "--offset", "0", "--length", &len.to_string(), "--output", s(&f)]);
    let e = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(o.status.success(), "read failed: {e}");
    (fs::read(&f).unwrap(), e)
}

#[test]
fn stale_member_is_failed_named_and_never_read() {
    let t = tempfile::tempdir().unwrap();
    let a = t.path().join("a");
    raid5(&a);
    let arr = s(&a);
    let len = 1 << 20;
    let old = pattern(1, len);
    let new = pattern(2, len);
    write(arr, "0", &old, t.path());
    let m1 = a.join("member-01.img");
    let aside = t.path().join("member-01.old");
    fs::copy(&m1, &aside).unwrap();
    write(arr, "0", &new, t.path());
    fs::copy(&aside, &m1).unwrap();

    // info names the stale member and shows it failed; exit 0 (degraded).
    let o = mosaic(&["info", "-a", arr, "--json"]);
    assert!(o.status.success());
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(e.contains("member-01.img") && e.contains("member 1 is stale") && e.contains("missed writes"), "{e}");
    let i = json(&String::from_utf8_lossy(&o.stdout));
    assert_eq!(i["member_list"][1]["state"]["state"], "failed", "{i}");
    assert_eq!(i["degraded"], true);

    // Reads return the new bytes, every block.
    let (got, _) = read(arr, len, t.path());
    assert!(got == new, "a stale member was read");
    // A repairing scrub does not make the old bytes permanent.
    let o = mosaic(&["scrub", "-a", arr, "--repair"]);
    assert!(o.status.code().is_some(), "scrub crashed");
    assert_eq!(read(arr, len, t.path()).0, new);

    // Rebuilding onto the same file brings it back; then it carries the
    // new bytes: with another member failed everything still reads back.
    ok(&["replace", "-a", arr, "--member", "1", "--drive", s(&m1)]);
    let i = json(&ok(&["info", "-a", arr, "--json"]));
    assert_eq!(i["degraded"], false, "{i}");
    ok(&["fail", "-a", arr, "--member", "2"]);
    assert_eq!(read(arr, len, t.path()).0, new);
}

#[test]
fn a_copy_of_an_array_is_its_own_array() {
    let t = tempfile::tempdir().unwrap();
    for level in ["raid5", "cbro:3+1,cda=raid5:3"] {
        let a = t.path().join(format!("a-{}", level.len()));
        let b = t.path().join(format!("b-{}", level.len()));
        let mut args = vec!["create", "-a", s(&a), "--level", level, "--member-size", "4M", "--stripe-unit", "4K"];
        if level == "raid5" {
            args.extend(["--members", "4"]);
        }
        ok(&args);
        write(s(&a), "0", &pattern(3, 256 << 10), t.path());
        let st = Command::new("cp").args(["-a", s(&a), s(&b)]).status().unwrap();
        assert!(st.success());
        let before = tree(&a);
        // Write B, degrade it, write again, rebuild: A does not change.
        let data = pattern(4, 256 << 10);
        write(s(&b), "0", &data, t.path());
        ok(&["fail", "-a", s(&b), "--member", "0"]);
        write(s(&b), "64K", &data[..64 << 10], t.path());
        ok(&["replace", "-a", s(&b), "--member", "0", "--drive", s(&b.join("new0.img"))]);
        ok(&["scrub", "-a", s(&b)]);
        assert!(tree(&a) == before, "{level}: writing the copy changed the original");
        let mut want = data.clone();
        want[64 << 10..128 << 10].copy_from_slice(&data[..64 << 10]);
        assert_eq!(read(s(&b), 256 << 10, t.path()).0, want, "{level}");
        assert_eq!(read(s(&a), 256 << 10, t.path()).0, pattern(3, 256 << 10), "{level}");
    }
}

/// `status --json` of `arr`, whatever its health (the exit code says it).
fn status(arr: &Path) -> serde_json::Value {
    json(&String::from_utf8_lossy(&mosaic(&["status", "-a", s(arr), "--json"]).stdout))
}

/// A copy's own drives outside its directory (a replacement, a spare,
/// one inside the copy of a remapped array but outside its inner array's
/// directory) stay the copy's at every later open, while the original's
/// drives outside its directory are never used by the copy; and a copy's
/// failed member keeps the path of its file in the copy.
#[test]
fn a_copys_own_drives_outside_its_directory_stay_its_own() {
    let t = tempfile::tempdir().unwrap();
    let (a, b) = (t.path().join("a"), t.path().join("b"));
    let out = |n: &str| t.path().join(n).display().to_string();
    raid5(&a);
    let data = pattern(11, 512 << 10);
    write(s(&a), "0", &data, t.path());
    ok(&["fail", "-a", s(&a), "--member", "1"]);
    ok(&["replace", "-a", s(&a), "--member", "1", "--drive", &out("a-out.img")]);
    ok(&["add", "-a", s(&a), "--spare", &out("a-spare.img")]);
    assert!(Command::new("cp").args(["-a", s(&a), s(&b)]).status().unwrap().success());
    let theirs = |n: &str| fs::read(t.path().join(n)).unwrap();
    let before = (tree(&a), theirs("a-out.img"), theirs("a-spare.img"));
    // The original's member 1 and spare are not the copy's.
    let st = status(&b);
    assert_eq!(st[0]["health"], "degraded", "{st}");
    assert_eq!(st[0]["spares"], serde_json::json!([]), "{st}");
    ok(&["replace", "-a", s(&b), "--member", "1", "--drive", &out("b-out.img")]);
    ok(&["add", "-a", s(&b), "--spare", &out("b-spare.img")]);
    ok(&["fail", "-a", s(&b), "--member", "2"]);
    let st = status(&b);
    let m = &st[0]["members"];
    assert_eq!(st[0]["health"], "degraded", "{st}");
    assert!(m[1]["path"] == out("b-out.img").as_str() && m[1]["state"]["state"] == "active", "{st}");
    let own2 = b.canonicalize().unwrap().join("member-02.img");
    assert!(m[2]["path"] == own2.display().to_string().as_str() && m[2]["state"]["state"] == "failed", "{st}");
    assert!(st[0]["spares"].to_string().contains("b-spare.img"), "{st}");
    ok(&["replace", "-a", s(&b), "--member", "2", "--drive", &out("b-out2.img")]);
    let st = status(&b);
    assert_eq!(st[0]["health"], "healthy", "{st}");
    assert_eq!(read(s(&b), 512 << 10, t.path()).0, data);
    assert!((tree(&a), theirs("a-out.img"), theirs("a-spare.img")) == before, "the copy changed the original's drives");
    assert_eq!(status(&a)[0]["health"], "healthy");

    // A remapped array's copy: a drive in the copy, outside its inner array.
    let (r, r2) = (t.path().join("r"), t.path().join("r2"));
    ok(&["create", "-a", s(&r), "--level", "remap", "--inner", "raid5:3", "--member-size", "16M"]);
    write(s(&r), "0", &data, t.path());
    assert!(Command::new("cp").args(["-a", s(&r), s(&r2)]).status().unwrap().success());
    ok(&["fail", "-a", s(&r2), "--member", "1"]);
    ok(&["replace", "-a", s(&r2), "--member", "1", "--drive", s(&r2.join("new1.img"))]);
    let st = status(&r2);
    assert_eq!(st[0]["health"], "healthy", "{st}");
    assert_eq!(read(s(&r2), 512 << 10, t.path()).0, data);
}

/// Damage member 1 of a fresh raid5 with `f`; the array must open
/// degraded, name the file and `why`, and read back every byte.
fn opens_degraded_without(why: &str, f: impl Fn(&Path, &Path)) {
    let t = tempfile::tempdir().unwrap();
    let a = t.path().join("a");
    raid5(&a);
    let data = pattern(5, 512 << 10);
    write(s(&a), "0", &data, t.path());
    f(&a.join("member-01.img"), t.path());
    let (got, e) = read(s(&a), data.len(), t.path());
    assert!(e.contains("member-01.img") && e.contains(why), "{why}: {e}");
    assert!(got == data, "{why}: wrong bytes");
    let i = json(&ok(&["info", "-a", s(&a), "--json"]));
    assert_eq!(i["member_list"][1]["state"]["state"], "failed", "{why}: {i}");
    // A second bad member is more than raid5 tolerates: refused, naming both.
    f(&a.join("member-02.img"), t.path());
    let e = fails(&["info", "-a", s(&a)]);
    assert!(e.contains("member-01.img") && e.contains("member-02.img") && e.contains("more than the 1"), "{why}: {e}");
}

#[test]
fn one_bad_member_does_not_make_an_array_unopenable() {
    opens_degraded_without("corrupt superblock", |m, _| {
        let mut b = fs::read(m).unwrap();
        b[40] ^= 0xff;
        b[(64 << 10) + 40] ^= 0xff;
        fs::write(m, b).unwrap();
    });
    opens_degraded_without("no mosaic superblock", |m, _| {
        let len = fs::metadata(m).unwrap().len() as usize;
        fs::write(m, vec![0u8; len]).unwrap();
    });
    opens_degraded_without("too small", |m, _| {
        fs::OpenOptions::new().write(true).open(m).unwrap().set_len(2 << 20).unwrap();
    });
    opens_degraded_without("belongs to another array", |m, t| {
        let other = t.join(format!("other-{}", m.file_name().unwrap().to_str().unwrap()));
        raid5(&other);
        fs::copy(other.join("member-01.img"), m).unwrap();
    });
}

/// `mosaic serve` of `arr` on a unix socket, once it listens.
fn serve(arr: &Path, sock: &Path, extra: &[&str]) -> Child {
    let child = Command::new(env!("CARGO_BIN_EXE_mosaic"))
        .args(["serve", "-a", s(arr), "--socket", s(sock)])
        .args(extra)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let t0 = Instant::now();
    while !sock.exists() {
        assert!(t0.elapsed() < Duration::from_secs(20), "serve did not start");
        std::thread::sleep(Duration::from_millis(20));
    }
    child
}

fn stop(mut c: Child) {
    unsafe { libc::kill(c.id() as i32, libc::SIGTERM) };
    let st = c.wait().unwrap();
    assert!(st.success(), "serve exit {st:?}");
}

#[test]
fn one_writer_per_array_for_every_kind() {
    let t = tempfile::tempdir().unwrap();
    let kinds: [(&str, Vec<&str>); 4] = [
        ("raid5", vec!["--level", "raid5", "--members", "4", "--member-size", "4M", "--stripe-unit", "4K"]),
        ("cached", vec!["--level", "raid5", "--members", "4", "--member-size", "4M", "--stripe-unit", "4K"]),
        ("cbro", vec!["--level", "cbro:3+1,cda=raid5:3", "--member-size", "4M", "--stripe-unit", "4K"]),
        ("dvs", vec!["--level", "dvs", "--members", "5", "--member-size", "64M", "--zoned", "--stripe-unit", "64K", "--zone-size", "8M"]),
    ];
    let input = t.path().join("in.bin");
    fs::write(&input, pattern(6, 64 << 10)).unwrap();
    for (name, args) in kinds {
        let d = t.path().join(name);
        let mut c = vec!["create", "-a", s(&d)];
        c.extend(args.iter().copied());
        ok(&c);
        let before = tree(&d);
        let sock = t.path().join(format!("{name}.sock"));
        let extra: &[&str] = if name == "cached" { &["--cache", "ppc", "--cache-size", "1M"] } else { &[] };
        let server = serve(&d, &sock, extra);
        let busy = |what: &[&str]| {
            let e = fails(what);
            assert!(e.contains("in use by another mosaic process"), "{name} {what:?}: {e}");
        };
        busy(&["write", "-a", s(&d), "--offset", "0", "--input", s(&input)]);
        let e = fails(&["read", "-a", s(&d), "--offset", "0", "--length", "4K", "--output", s(&t.path().join("r.bin"))]);
        assert!(e.contains("the array is served by `mosaic serve`") && e.contains("mosaic stop -a"), "{name}: {e}");
        // scrub, replace, rebuild, fail and info go through the server's
        // control channel (tests/cli_control.rs), never to the members.
        let mut force = c.clone();
        force.push("--force");
        busy(&force);
        let o = mosaic(&["serve", "-a", s(&d), "--socket", s(&t.path().join("second.sock"))]);
        assert!(!o.status.success(), "{name}: a second serve ran");
        assert!(String::from_utf8_lossy(&o.stderr).contains("in use by another mosaic process"), "{name}");
        stop(server);
        // Nothing the refused commands did reached the members.
        let after = tree(&d);
        assert_eq!(before.len(), after.len(), "{name}");
        if name != "dvs" {
            // (a served DVS array writes its own checkpoint at open and close)
            assert!(before == after, "{name}: a refused command changed the array");
        }
    }
}

#[test]
fn rs_with_255_members_fits_its_superblock() {
    let t = tempfile::tempdir().unwrap();
    let a = t.path().join("wide");
    ok(&["create", "-a", s(&a), "--level", "rs:250+5", "--member-size", "1028K", "--stripe-unit", "4K", "--no-journal"]);
    let data = pattern(7, 250 * 4096);
    write(s(&a), "0", &data, t.path());
    for m in [3, 100, 200, 251, 254] {
        ok(&["fail", "-a", s(&a), "--member", &m.to_string()]);
    }
    let i = json(&ok(&["info", "-a", s(&a), "--json"]));
    assert_eq!(i["member_list"].as_array().unwrap().len(), 255);
    assert_eq!(read(s(&a), data.len(), t.path()).0, data);
}

/// Flip bytes of member file `m` at member data offset `at`.
fn rot(m: &Path, at: u64) {
    use std::os::unix::fs::FileExt;
    let f = fs::OpenOptions::new().read(true).write(true).open(m).unwrap();
    let mut b = [0u8; 8];
    f.read_exact_at(&mut b, (1 << 20) + at).unwrap();
    for x in &mut b {
        *x ^= 0x5a;
    }
    f.write_all_at(&b, (1 << 20) + at).unwrap();
}

#[test]
fn scrub_locates_with_two_redundant_columns_and_says_when_it_cannot() {
    let t = tempfile::tempdir().unwrap();
    let data = pattern(8, 256 << 10);
    // raid6: the wrong column is found and rewritten, not the parity.
    let a = t.path().join("r6");
    ok(&["create", "-a", s(&a), "--level", "raid6", "--members", "6", "--member-size", "4M", "--stripe-unit", "4K"]);
    write(s(&a), "0", &data, t.path());
    rot(&a.join("member-00.img"), 100);
    let o = mosaic(&["scrub", "-a", s(&a)]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(3), "{out}");
    assert!(out.contains("stripe 0: member 0 holds the wrong") && out.contains("1 of"), "{out}");
    let out = ok(&["scrub", "-a", s(&a), "--repair"]);
    assert!(out.contains("(repaired)"), "{out}");
    assert!(ok(&["scrub", "-a", s(&a)]).contains("all consistent"));
    assert_eq!(read(s(&a), data.len(), t.path()).0, data);
    // raid5: found, but which column is wrong cannot be told.
    let b = t.path().join("r5");
    raid5(&b);
    write(s(&b), "0", &data, t.path());
    rot(&b.join("member-02.img"), 4096 * 3 + 9);
    let o = mosaic(&["scrub", "-a", s(&b)]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(3), "{out}");
    assert!(out.contains("stripe 3: code column(s)") && out.contains("cannot be located"), "{out}");
    // Degraded: says how many stripes it could not verify, never "all
    // consistent", and exits 4 (degraded), not 0: it verified nothing.
    ok(&["scrub", "-a", s(&b), "--repair"]);
    ok(&["fail", "-a", s(&b), "--member", "1"]);
    let o = mosaic(&["scrub", "-a", s(&b)]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(4), "{out}");
    assert!(out.contains("768 stripes could not be verified") && !out.contains("all consistent"), "{out}");
}

#[test]
fn a_copy_does_not_use_the_originals_external_journal() {
    let t = tempfile::tempdir().unwrap();
    let a = t.path().join("a");
    let j = t.path().join("fast-journal.img");
    ok(&["create", "-a", s(&a), "--level", "raid5", "--members", "4", "--member-size", "4M", "--stripe-unit", "4K", "--journal", s(&j), "--journal-size", "4M"]);
    write(s(&a), "0", &pattern(9, 64 << 10), t.path());
    let b = t.path().join("b");
    assert!(Command::new("cp").args(["-a", s(&a), s(&b)]).status().unwrap().success());
    let before = (tree(&a), fs::read(&j).unwrap());
    let input = t.path().join("x.bin");
    fs::write(&input, pattern(10, 4096)).unwrap();
    let e = fails(&["write", "-a", s(&b), "--offset", "0", "--input", s(&input)]);
    assert!(e.contains("fast-journal.img") && e.contains("is a copy") && e.contains(s(&a.canonicalize().unwrap())), "{e}");
    // Reading the copy is fine (it needs no journal to read).
    assert_eq!(read(s(&b), 64 << 10, t.path()).0, pattern(9, 64 << 10));
    assert!((tree(&a), fs::read(&j).unwrap()) == before, "the original changed");
}

/// `create` over existing drives with a spare it must refuse (too small, a
/// directory, in a missing directory, a member, the journal, given twice)
/// refuses before it writes anything; `add` refuses a spare given twice
/// before it adds either.
#[test]
fn a_refused_spare_leaves_every_drive_as_it_was() {
    let t = tempfile::tempdir().unwrap();
    let d = t.path();
    for i in 1..=3 {
        fs::write(d.join(format!("m{i}")), pattern(40 + i as u8, 4 << 20)).unwrap();
    }
    fs::write(d.join("j"), pattern(44, 4 << 20)).unwrap();
    fs::write(d.join("zero"), b"").unwrap();
    fs::write(d.join("small"), pattern(45, 1 << 20)).unwrap();
    fs::create_dir(d.join("dir")).unwrap();
    let list = ["m1", "m2", "m3"].map(|m| d.join(m).display().to_string()).join(",");
    let spares: [(&[&str], &str); 7] = [
        (&["zero"], "too small for a spare: 0 bytes"),
        (&["small"], "too small for a spare: 1048576 bytes"),
        (&["dir"], "is a directory"),
        (&["nodir/s"], "nodir does not exist"),
        (&["m2"], "is a member or the journal of the array being created"),
        (&["j"], "is a member or the journal of the array being created"),
        (&["s", "s"], "is given twice as --spare"),
    ];
    for (given, why) in spares {
        let before = tree(d);
        let mut args = vec!["create", "-a", &list, "--level", "raid5", "--journal", s(&d.join("j")).to_string().leak()];
        for sp in given {
            args.extend(["--spare", d.join(sp).display().to_string().leak()]);
        }
        let e = fails(&args);
        assert!(!e.contains("panicked") && e.contains(why), "{given:?}: {e}");
        assert!(tree(d) == before, "{given:?}: a refused create changed the drives ({e})");
    }
    // A member that is also the journal is named so, not "in use".
    let before = tree(d);
    let e = fails(&["create", "-a", &list, "--level", "raid5", "--journal", s(&d.join("m3"))]);
    assert!(e.contains("named as a member and as the journal"), "{e}");
    assert!(tree(d) == before);
    let a = d.join("a");
    raid5(&a);
    let before = tree(&a);
    let s1 = d.join("s1");
    let e = fails(&["add", "-a", s(&a), "--spare", s(&s1), "--spare", s(&s1)]);
    assert!(e.contains("given twice"), "{e}");
    assert!(tree(&a) == before && !s1.exists(), "a refused add changed the array");
    // A good spare, then one too small: neither is added, and the good
    // one (new, or an existing file) is neither created nor written.
    for s1_exists in [false, true] {
        if s1_exists {
            fs::write(&s1, pattern(46, 4 << 20)).unwrap();
        }
        let (before, s1_before) = (tree(&a), fs::read(&s1).ok());
        let e = fails(&["add", "-a", s(&a), "--spare", s(&s1), "--spare", s(&d.join("small"))]);
        assert!(e.contains("small: too small for a spare"), "{e}");
        assert!(tree(&a) == before && fs::read(&s1).ok() == s1_before, "a refused add changed the array or its first spare");
        assert_eq!(json(&ok(&["info", "-a", s(&a), "--json"]))["spares"], serde_json::json!([]));
    }
    // remove, the same: a spare and one that is not (or the spare twice)
    // remove neither.
    ok(&["add", "-a", s(&a), "--spare", s(&s1)]);
    for second in [d.join("small"), d.join(".").join("s1")] {
        let before = (tree(&a), fs::read(&s1).unwrap());
        let e = fails(&["remove", "-a", s(&a), "--spare", s(&s1), "--spare", s(&second)]);
        assert!(e.contains("is not a hot spare of this array") || e.contains("is given twice as --spare"), "{e}");
        assert!((tree(&a), fs::read(&s1).unwrap()) == before, "a refused remove changed the array or the spare");
        assert_eq!(json(&ok(&["info", "-a", s(&a), "--json"]))["spares"].as_array().map(Vec::len), Some(1));
    }
    ok(&["remove", "-a", s(&a), "--spare", s(&s1)]);
    let before = tree(&a);
    let g1 = d.join("g1");
    let e = fails(&["grow", "-a", s(&a), "--add", s(&g1), "--add", &format!("{}/./g1", d.display())]);
    assert!(e.contains("given twice as --add"), "{e}");
    assert!(tree(&a) == before && !g1.exists(), "a refused grow changed the array");
}

/// A journal too small for one full-stripe write's record is refused at
/// create (before any file is made), not at the first such write.
#[test]
fn a_journal_too_small_for_a_full_stripe_is_refused_at_create() {
    let t = tempfile::tempdir().unwrap();
    let a = t.path().join("a");
    let e = fails(&["create", "-a", s(&a), "--level", "raid5", "--members", "3", "--member-size", "10M", "--stripe-unit", "4M", "--journal-size", "1M"]);
    assert!(e.contains("cannot hold the record of one full-stripe write (3 columns of 4194304 bytes)"), "{e}");
    assert!(!a.exists(), "a refused create left {}", a.display());
    ok(&["create", "-a", s(&a), "--level", "raid5", "--members", "3", "--member-size", "10M", "--stripe-unit", "4M", "--journal-size", "13M"]);
    write(s(&a), "0", &pattern(46, 8 << 20), t.path());
    assert_eq!(read(s(&a), 8 << 20, t.path()).0, pattern(46, 8 << 20));
}

/// A journal moved out of the array's directory (`replace-journal`) is the
/// one used afterwards, though the old file of the same name stays there.
#[test]
fn a_journal_moved_out_of_the_directory_is_the_one_used() {
    let t = tempfile::tempdir().unwrap();
    let a = t.path().join("a");
    ok(&["create", "-a", s(&a), "--level", "raid5", "--members", "4", "--member-size", "4M", "--stripe-unit", "4K", "--journal-size", "4M"]);
    write(s(&a), "0", &pattern(24, 64 << 10), t.path());
    let ext = t.path().join("ext");
    fs::create_dir(&ext).unwrap();
    ok(&["replace-journal", "-a", s(&a), "--journal", s(&ext.join("journal.img"))]);
    let old = fs::read(a.join("journal.img")).unwrap();
    write(s(&a), "0", &pattern(25, 64 << 10), t.path());
    let i = json(&ok(&["info", "-a", s(&a), "--json"]));
    assert!(i["journal"].as_str().is_some_and(|j| j.contains("ext/journal.img")), "{i}");
    assert!(fs::read(a.join("journal.img")).unwrap() == old, "the old journal in the directory was used");
    assert_eq!(read(s(&a), 64 << 10, t.path()).0, pattern(25, 64 << 10));
}

/// `cp -a A B; mv A C`: neither directory is the other's copy by its
/// path (A's home is gone), so both would follow the hint to the external
/// journal.  The first to write takes it; the other never replays (or
/// appends to) that copy's records, and gets a journal of its own.
#[test]
fn two_copies_never_share_an_external_journal() {
    let t = tempfile::tempdir().unwrap();
    let (a, b, c) = (t.path().join("a"), t.path().join("b"), t.path().join("c"));
    let j = t.path().join("fast-journal.img");
    ok(&["create", "-a", s(&a), "--level", "raid5", "--members", "4", "--member-size", "4M", "--stripe-unit", "4K", "--journal", s(&j), "--journal-size", "4M"]);
    write(s(&a), "0", &pattern(20, 64 << 10), t.path());
    assert!(Command::new("cp").args(["-a", s(&a), s(&b)]).status().unwrap().success());
    assert!(Command::new("mv").args([s(&a), s(&c)]).status().unwrap().success());
    // B writes first: the journal is B's now.
    write(s(&b), "0", &pattern(21, 64 << 10), t.path());
    let c_before = tree(&c);
    let input = t.path().join("x.bin");
    fs::write(&input, pattern(22, 4096)).unwrap();
    let e = fails(&["write", "-a", s(&c), "--offset", "0", "--input", s(&input)]);
    assert!(e.contains("fast-journal.img") && e.contains("last written by another copy") && e.contains("replace-journal"), "{e}");
    assert!(tree(&c) == c_before, "a refused write changed C");
    // C reads its own bytes (not B's) without the journal.
    let (got, e) = read(s(&c), 64 << 10, t.path());
    assert!(got == pattern(20, 64 << 10), "C read another copy's writes");
    assert!(e.contains("cannot be used"), "{e}");
    // With a journal of its own, C is writable; B keeps its own bytes.
    ok(&["replace-journal", "-a", s(&c), "--journal", s(&t.path().join("c-journal.img"))]);
    write(s(&c), "0", &pattern(23, 64 << 10), t.path());
    assert_eq!(read(s(&c), 64 << 10, t.path()).0, pattern(23, 64 << 10));
    assert_eq!(read(s(&b), 64 << 10, t.path()).0, pattern(21, 64 << 10));
}

/// Two copies written apart reach the same event counter; a list mixing
/// their members must not make one array of them.
#[test]
fn members_of_two_copies_written_apart_are_never_mixed() {
    let t = tempfile::tempdir().unwrap();
    let (a, b) = (t.path().join("a"), t.path().join("b"));
    raid5(&a);
    write(s(&a), "0", &pattern(30, 256 << 10), t.path());
    assert!(Command::new("cp").args(["-a", s(&a), s(&b)]).status().unwrap().success());
    write(s(&a), "0", &pattern(31, 256 << 10), t.path());
    write(s(&b), "0", &pattern(32, 256 << 10), t.path());
    let events = |d: &Path| json(&ok(&["info", "-a", s(d), "--json"]))["events"].as_u64();
    assert_eq!(events(&a), events(&b), "the copies are not at the same event counter: the test shows nothing");
    let m = |d: &Path, i: usize| d.join(format!("member-{i:02}.img")).display().to_string();
    // Three of A's members and one of B's: B's is named and not used.
    let list = [m(&a, 0), m(&a, 1), m(&a, 2), m(&b, 3)].join(",");
    let (got, e) = read(&list, 256 << 10, t.path());
    assert!(e.contains("member-03.img: member 3 carries the writes of another copy"), "{e}");
    assert!(got == pattern(31, 256 << 10), "a mix of two copies was read");
    // Two of each: neither is the array.
    let list = [m(&a, 0), m(&a, 1), m(&b, 2), m(&b, 3)].join(",");
    let e = fails(&["read", "-a", &list, "--offset", "0", "--length", "4096", "--output", s(&t.path().join("o"))]);
    assert!(e.contains("two copies of array") && e.contains("give the members of one copy") && e.contains("move the other copy's files out of the array's directory"), "{e}");
}

#[test]
fn serve_record_and_demo_dir_never_overwrite_an_array() {
    let t = tempfile::tempdir().unwrap();
    let a = t.path().join("a");
    raid5(&a);
    let before = tree(&a);
    let member = a.join("member-02.img");
    let e = fails(&["serve", "-a", s(&a), "--socket", s(&t.path().join("x.sock")), "--record", s(&member)]);
    assert!(e.contains("member-02.img is member 2 of array") && e.contains("--force"), "{e}");
    let e = fails(&["demo", "--dir", s(&a), "--member-size", "4M"]);
    assert!(e.contains("a directory holding an array") && e.contains("--force"), "{e}");
    assert!(tree(&a) == before, "a refused command changed the array");
}

#[test]
fn a_stale_member_inside_a_check_drive_array_is_named_and_never_read() {
    let t = tempfile::tempdir().unwrap();
    let a = t.path().join("c");
    ok(&["create", "-a", s(&a), "--level", "cbro:3+1,cda=raid5:3", "--member-size", "4M", "--stripe-unit", "4K"]);
    let len = 512 << 10;
    write(s(&a), "0", &pattern(11, len), t.path());
    let m = a.join("cda-0").join("member-01.img");
    let aside = t.path().join("cda-member.old");
    fs::copy(&m, &aside).unwrap();
    let new = pattern(12, len);
    write(s(&a), "0", &new, t.path());
    fs::copy(&aside, &m).unwrap();
    let (got, e) = read(s(&a), len, t.path());
    assert!(e.contains("check drive array") && e.contains("cda-0") && e.contains("member 1 is stale"), "{e}");
    assert!(got == new, "a stale member of the check drive array was read");
    // Lose a data member too: the code on the check drive array (now
    // degraded) still rebuilds the new bytes.
    ok(&["fail", "-a", s(&a), "--member", "0"]);
    assert_eq!(read(s(&a), len, t.path()).0, new);
}

/// A grow whose first steps rewrite more than the members' reserved
/// bytes can hold a second copy of (512 KiB units) is refused without
/// `--backup-file`, naming it, as mdadm's is; with one (a relative path
/// is made absolute) it grows, keeps every byte, and removes the file.
#[test]
fn a_grow_too_large_for_a_second_copy_takes_a_backup_file() {
    let t = tempfile::tempdir().unwrap();
    let a = t.path().join("a");
    ok(&["create", "-a", s(&a), "--level", "raid5", "--members", "4", "--member-size", "16M", "--stripe-unit", "512K"]);
    let data = pattern(47, 1 << 20);
    write(s(&a), "0", &data, t.path());
    let before = tree(&a);
    let e = fails(&["grow", "-a", s(&a), "--members", "5"]);
    assert!(e.contains("--backup-file FILE on another device") && e.contains("more than the 917504 each member reserves"), "{e}");
    assert!(tree(&a) == before, "a refused grow changed the array");
    let e = fails(&["grow", "-a", s(&a), "--backup-file", "b.img"]);
    assert!(e.contains("--backup-file is for starting a grow"), "{e}");
    let o = Command::new(env!("CARGO_BIN_EXE_mosaic")).current_dir(t.path()).args(["grow", "-a", s(&a), "--members", "5", "--backup-file", "b.img"]).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(String::from_utf8_lossy(&o.stdout).contains("grown to 5 members"), "{}", String::from_utf8_lossy(&o.stdout));
    assert!(!t.path().join("b.img").exists(), "the grow's end removes the backup file");
    assert_eq!(read(s(&a), data.len(), t.path()).0, data);
    assert!(ok(&["scrub", "-a", s(&a)]).contains("all consistent"));
}

/// md's "cannot start dirty degraded array", from the command line: the
/// server of an array without a journal killed after a write (so the
/// array is dirty), then a member gone.  Writable commands are refused,
/// naming the flag, and write nothing; reads work and say why their
/// bytes may be wrong; `--start-dirty-degraded` opens it for the replace,
/// and a repairing scrub then records it clean.
#[test]
fn a_dirty_degraded_array_without_a_journal_opens_for_writing_only_when_told() {
    let t = tempfile::tempdir().unwrap();
    let arr = t.path().join("arr");
    let a = s(&arr);
    ok(&["create", "-a", a, "--level", "raid5", "--members", "4", "--member-size", "8M", "--stripe-unit", "4K", "--no-journal"]);
    let mut srv = common::serve::Serve::start(a, &[]);
    let o = Command::new("qemu-io").args(["-f", "raw", &format!("nbd://127.0.0.1:{}/mosaic", srv.port), "-c", "write -P 0x5a 0 64k"]).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    srv.child.kill().unwrap();
    srv.child.wait().unwrap();
    assert_eq!(json(&ok(&["info", "-a", a, "--json"]))["state"], "dirty", "killed after a write: dirty");
    fs::rename(arr.join("member-02.img"), t.path().join("gone.img")).unwrap();
    let input = t.path().join("in.bin");
    fs::write(&input, pattern(3, 4096)).unwrap();
    let before = tree(&arr);
    for cmd in [&["write", "-a", a, "--offset", "0", "--input", s(&input)][..], &["scrub", "-a", a, "--repair"]] {
        let e = fails(cmd);
        assert!(e.contains("not shut down cleanly") && e.contains("degraded") && e.contains("--start-dirty-degraded"), "{cmd:?}: {e}");
    }
    assert!(tree(&arr) == before, "a refused command wrote to the members");
    let out = t.path().join("out.bin");
    let o = mosaic(&["read", "-a", a, "--offset", "0", "--length", "64K", "--output", s(&out)]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success() && err.contains("member(s) [2] not in service") && err.contains("may be wrong"), "{err}");
    assert_eq!(fs::read(&out).unwrap(), vec![0x5a; 64 << 10], "this write completed before the kill");
    ok(&["--start-dirty-degraded", "replace", "-a", a, "--member", "2", "--drive", s(&t.path().join("new.img"))]);
    assert_eq!(json(&ok(&["info", "-a", a, "--json"]))["state"], "dirty", "rebuilt, not yet resynced: still unclean");
    ok(&["scrub", "-a", a, "--repair"]);
    assert_eq!(json(&ok(&["info", "-a", a, "--json"]))["state"], "clean");
}

/// Every kind takes a failed member's own drive back (`replace` onto the
/// file it failed on, as md re-adds a device, without `--force`: it is this
/// array's, an inner array's for a tier or a remapped array), rebuilds it
/// and reads every byte back; a drive in service as another member is
/// refused as this array's, never as another process's or another array's.
#[test]
fn a_failed_members_own_drive_is_taken_back_by_every_kind() {
    let t = tempfile::tempdir().unwrap();
    let data = pattern(21, 1 << 20);
    let kinds: [(&str, &[&str], &str, &str); 3] = [
        ("dvs", &["--level", "dvs", "--members", "4", "--member-size", "64M", "--zoned", "--zone-size", "4M"], "dvs-2.zoned", "dvs-1.zoned"),
        ("tier", &["--level", "tier", "--fast", "raid1:2", "--slow", "raid5:3", "--fast-size", "16M", "--slow-size", "16M"], "slow/member-00.img", "fast/member-01.img"),
        ("remap", &["--level", "remap", "--inner", "raid5:3", "--member-size", "16M"], "inner/member-02.img", "inner/member-01.img"),
    ];
    for (name, create, own, other) in kinds {
        let a = t.path().join(name);
        let mut args = vec!["create", "-a", s(&a)];
        args.extend(create);
        ok(&args);
        write(s(&a), "0", &data, t.path());
        // The member whose file is `own`: its index in `status`.
        let st = status(&a);
        let ends = |m: &serde_json::Value, f: &str| m["path"].as_str().is_some_and(|p| p.ends_with(f));
        let idx = |f: &str| st[0]["members"].as_array().unwrap().iter().find(|m| ends(m, f)).map(|m| m["index"].as_u64().unwrap()).unwrap().to_string();
        let (i, busy) = (idx(own), idx(other));
        ok(&["fail", "-a", s(&a), "--member", &i]);
        write(s(&a), "64K", &data[..64 << 10], t.path());
        let e = fails(&["replace", "-a", s(&a), "--member", &i, "--drive", s(&a.join(other))]);
        assert!(e.contains(&format!("is member {busy} of this array")) && !e.contains("another"), "{name}: {e}");
        ok(&["replace", "-a", s(&a), "--member", &i, "--drive", s(&a.join(own))]);
        assert_eq!(status(&a)[0]["health"], "healthy", "{name}");
        let mut want = data.clone();
        want[64 << 10..128 << 10].copy_from_slice(&data[..64 << 10]);
        assert!(read(s(&a), 1 << 20, t.path()).0 == want, "{name}: the bytes after the rebuild");
    }
}
