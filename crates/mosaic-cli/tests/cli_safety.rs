//! CLI input safety: no command overwrites another array's member or
//! journal without --force (never the array being read), a failed create
//! leaves nothing behind, --member-size must agree with existing files,
//! synthetic replays reject inconsistent sizes, trace commands refuse
//! devices and FIFOs, and write/read take any offset and length, stdin
//! and stdout.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use crate::common;
use common::{fails, json, mosaic, ok, stderr};

/// Every file under `dir` with its bytes, sorted.
fn snapshot(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut v = Vec::new();
    for e in fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            v.extend(snapshot(&p));
        } else {
            let b = fs::read(&p).unwrap();
            v.push((p, b));
        }
    }
    v.sort();
    v
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

fn raid5(dir: &Path) {
    ok(&["create", "-a", s(dir), "--level", "raid5", "--members", "3", "--member-size", "4M", "--stripe-unit", "4K"]);
}

fn dvs(dir: &Path) {
    ok(&["create", "-a", s(dir), "--level", "dvs", "--members", "3", "--member-size", "4M", "--zoned", "--stripe-unit", "64K", "--zone-size", "1M"]);
}

/// The array's UUID as `mosaic info` prints it.
fn uuid(spec: &Path) -> String {
    json(&ok(&["info", "-a", s(spec), "--json"]))["volume"]["uuid"].as_str().unwrap().to_string()
}

/// Deterministic bytes.
fn data(len: usize, seed: u32) -> Vec<u8> {
    (0..len as u32).map(|i| (i.wrapping_mul(2654435761).wrapping_add(seed) >> 13) as u8).collect()
}

/// Run mosaic with `input` on its standard input; stdout and stderr captured.
fn with_stdin(args: &[&str], input: &[u8]) -> Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_mosaic")).args(args).stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    c.stdin.take().unwrap().write_all(input).unwrap();
    c.wait_with_output().unwrap()
}

/// Run mosaic, killing it (and failing) when it takes over 30 s: a hang is a defect.
fn bounded(args: &[&str]) -> Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_mosaic")).args(args).stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    let t0 = Instant::now();
    while c.try_wait().unwrap().is_none() {
        if t0.elapsed() > Duration::from_secs(30) {
            c.kill().unwrap();
            panic!("mosaic {args:?} hung");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    c.wait_with_output().unwrap()
}

#[test]
fn create_refuses_another_arrays_journal_member_or_directory() {
    let t = tempfile::tempdir().unwrap();
    let (a, b, z) = (t.path().join("a"), t.path().join("b"), t.path().join("z"));
    raid5(&b);
    dvs(&z);
    let (ub, uz) = (uuid(&b), uuid(&z));
    let (before_b, before_z) = (snapshot(&b), snapshot(&z));
    let base = ["create", "-a", s(&a), "--level", "raid5", "--members", "3", "--member-size", "4M", "--stripe-unit", "4K", "--journal"];
    let cases = [
        (b.join("journal.img"), format!("is the journal of array {ub}; use --force to overwrite it")),
        (b.join("member-01.img"), format!("is member 1 of array {ub}; use --force to overwrite it")),
        (z.join("dvs-2.zoned"), format!("is member 2 of DVS array {uz}; use --force to overwrite it")),
    ];
    for (j, want) in &cases {
        let mut args = base.to_vec();
        args.push(s(j));
        let e = fails(&args);
        assert_eq!(e.trim_end(), format!("error: {} {want}", j.display()));
        assert!(!a.exists(), "a refused create made {}", a.display());
    }
    // A directory holding an array (its members, journal, DVS files).
    for dir in [&b, &z] {
        let e = fails(&["create", "-a", s(dir), "--level", "raid5", "--members", "3", "--member-size", "4M", "--stripe-unit", "4K"]);
        assert!(e.starts_with(&format!("error: {} is a directory holding an array (", dir.display())) && e.trim_end().ends_with("; use --force to overwrite it"), "{e}");
    }
    // Member lists: another array's members need --force (as before).
    let list = format!("{},{},{}", b.join("member-00.img").display(), b.join("member-01.img").display(), b.join("member-02.img").display());
    let e = fails(&["create", "-a", &list, "--level", "raid5", "--stripe-unit", "4K", "--no-journal"]);
    assert_eq!(e.trim_end(), format!("error: {} is member 0 of array {ub}; use --force to overwrite it", b.join("member-00.img").display()));
    assert_eq!(snapshot(&b), before_b, "refused creates changed array b");
    assert_eq!(snapshot(&z), before_z, "refused creates changed array z");
    // With --force the journal is taken over.
    let mut args = base.to_vec();
    args.extend([s(&cases[0].0), "--force"]);
    ok(&args);
    let e = fails(&["write", "-a", s(&b), "--offset", "0", "--input", s(&b.join("member-00.img"))]);
    assert!(e.contains("journal belongs to array"), "{e}");
}

#[test]
fn replace_refuses_another_arrays_drive_without_force() {
    let t = tempfile::tempdir().unwrap();
    let (a, b) = (t.path().join("a"), t.path().join("b"));
    raid5(&a);
    raid5(&b);
    let bytes = data(64 << 10, 3);
    let input = t.path().join("in.bin");
    fs::write(&input, &bytes).unwrap();
    ok(&["write", "-a", s(&a), "--offset", "0", "--input", s(&input)]);
    ok(&["fail", "-a", s(&a), "--member", "1"]);
    let before_b = snapshot(&b);
    let drive = b.join("member-02.img");
    let e = fails(&["replace", "-a", s(&a), "--member", "1", "--drive", s(&drive)]);
    assert_eq!(e.trim_end(), format!("error: {} is member 2 of array {}; use --force to overwrite it", drive.display(), uuid(&b)));
    // The array's own journal is never a member, --force or not.
    let e = fails(&["replace", "-a", s(&a), "--member", "1", "--drive", s(&a.join("journal.img")), "--force"]);
    assert_eq!(e.trim_end(), format!("error: {} is the journal of array {}, the array being repaired: it cannot be a member too", a.join("journal.img").display(), uuid(&a)));
    assert_eq!(snapshot(&b), before_b, "a refused replace changed array b");
    let info = json(&ok(&["info", "-a", s(&a), "--json"]));
    assert_eq!(info["volume"]["members"][1]["state"]["state"], "failed", "{info}");
    // The array's own failed member back in its slot needs no --force.
    let own = a.join("member-01.img");
    let r = ok(&["replace", "-a", s(&a), "--member", "1", "--drive", s(&own)]);
    assert!(r.contains("rebuilt member(s) [1]"), "{r}");
    ok(&["fail", "-a", s(&a), "--member", "1"]);
    // --force takes another array's member, rebuilds, and the bytes read back.
    let r = ok(&["replace", "-a", s(&a), "--member", "1", "--drive", s(&drive), "--force"]);
    assert!(r.contains("rebuilt member(s) [1]"), "{r}");
    let o = mosaic(&["read", "-a", s(&a), "--offset", "0", "--length", "64K", "--output", "-"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(o.stdout == bytes, "read after replace differs");
}

#[test]
fn read_output_never_overwrites_the_array_being_read() {
    let t = tempfile::tempdir().unwrap();
    let (a, b, c) = (t.path().join("a"), t.path().join("b"), t.path().join("c"));
    raid5(&a);
    raid5(&b);
    ok(&["create", "-a", s(&c), "--level", "cbro:2+1,cda=raid5:3", "--member-size", "4M", "--stripe-unit", "4K"]);
    let (ua, ub) = (uuid(&a), uuid(&b));
    let bytes = data(8192, 9);
    let input = t.path().join("in.bin");
    fs::write(&input, &bytes).unwrap();
    ok(&["write", "-a", s(&a), "--offset", "0", "--input", s(&input)]);
    let (before_a, before_b, before_c) = (snapshot(&a), snapshot(&b), snapshot(&c));
    for force in [false, true] {
        for (f, what) in [(a.join("member-00.img"), format!("member 0 of array {ua}")), (a.join("journal.img"), format!("the journal of array {ua}"))] {
            let mut args = vec!["read", "-a", s(&a), "--offset", "0", "--length", "8K", "--output", s(&f)];
            if force {
                args.push("--force");
            }
            let e = fails(&args);
            assert_eq!(e.trim_end(), format!("error: {} is {what}, the array being read: reading into it would destroy what is read", f.display()));
        }
        // A member of a nested check drive array of the array being read.
        let inner = c.join("cda-0").join("member-00.img");
        let mut args = vec!["read", "-a", s(&c), "--offset", "0", "--length", "8K", "--output", s(&inner)];
        if force {
            args.push("--force");
        }
        let e = fails(&args);
        assert!(e.starts_with(&format!("error: {} is member 0 of array ", inner.display())) && e.trim_end().ends_with(", the array being read: reading into it would destroy what is read"), "{e}");
    }
    let other = b.join("member-00.img");
    let e = fails(&["read", "-a", s(&a), "--offset", "0", "--length", "8K", "--output", s(&other)]);
    assert_eq!(e.trim_end(), format!("error: {} is member 0 of array {ub}; use --force to overwrite it", other.display()));
    assert_eq!(snapshot(&a), before_a);
    assert_eq!(snapshot(&b), before_b);
    assert_eq!(snapshot(&c), before_c);
    ok(&["read", "-a", s(&a), "--offset", "0", "--length", "8K", "--output", s(&other), "--force"]);
    assert!(fs::read(&other).unwrap() == bytes, "--force read did not write the bytes");
    // Plain files are written without --force.
    let plain = t.path().join("plain.bin");
    fs::write(&plain, b"old contents").unwrap();
    ok(&["read", "-a", s(&a), "--offset", "0", "--length", "8K", "--output", s(&plain)]);
    assert!(fs::read(&plain).unwrap() == bytes);
}

#[test]
fn other_outputs_are_guarded_too() {
    let t = tempfile::tempdir().unwrap();
    let a = t.path().join("a");
    raid5(&a);
    let ua = uuid(&a);
    let before = snapshot(&a);
    let m = a.join("member-02.img");
    let want = format!("error: {} is member 2 of array {ua}; use --force to overwrite it", m.display());
    let e = fails(&["replay", "--synthetic", "randwrite", "--count", "10", "--plot", s(&m)]);
    assert_eq!(e.trim_end(), want);
    let e = fails(&["eval", "cbro", "--requests", "10", "--plot", s(&m)]);
    assert_eq!(e.trim_end(), want);
    for cmd in ["ppc", "dvs", "adapt"] {
        let e = fails(&["eval", cmd, "--plot", s(&a)]);
        assert!(e.starts_with(&format!("error: {} is a directory holding an array (", a.display())), "{e}");
    }
    assert_eq!(snapshot(&a), before, "a refused output changed the array");
    // A member or journal of an older mosaic format is refused too.
    for (at, magic) in [(0, b"MOSAICSB"), (65536, b"MOSAICSB"), (0, b"MOSAICJL"), (0, b"MOSAICZD")] {
        let old = t.path().join("old.img");
        let mut b = vec![0u8; 1 << 20];
        b[at..at + 8].copy_from_slice(magic);
        fs::write(&old, &b).unwrap();
        let e = fails(&["replay", "--synthetic", "randwrite", "--count", "10", "--plot", s(&old)]);
        assert_eq!(e.trim_end(), format!("error: {} is an array of an older mosaic format; use --force to overwrite it", old.display()));
        assert!(fs::read(&old).unwrap() == b, "a refused output changed the old array");
    }
    // A plain file is fine.
    let plot = t.path().join("plot.svg");
    ok(&["replay", "--synthetic", "randwrite", "--count", "10", "--plot", s(&plot)]);
    assert!(fs::read_to_string(&plot).unwrap().starts_with("<svg"), "no SVG written");
}

#[test]
fn a_failed_create_leaves_no_files_behind() {
    let t = tempfile::tempdir().unwrap();
    let small = ["--journal-size", "4K"];
    // A new directory (and its parents): all gone.
    let deep = t.path().join("x").join("y").join("arr");
    let mut args = vec!["create", "-a", s(&deep), "--level", "raid5", "--members", "3", "--member-size", "4M", "--stripe-unit", "4K"];
    args.extend(small);
    let e = fails(&args);
    assert_eq!(e.trim_end(), format!("error: {}: journal too small: 4096 bytes, needs at least 1048576", deep.join("journal.img").display()));
    assert!(!t.path().join("x").exists(), "the failed create left {}", t.path().join("x").display());
    // Nested check drive arrays: cda-I directories go too.
    let c = t.path().join("c");
    let mut args = vec!["create", "-a", s(&c), "--level", "cbro:2+1,cda=raid5:3", "--member-size", "4M", "--stripe-unit", "4K"];
    args.extend(small);
    let e = fails(&args);
    assert!(e.contains("journal too small"), "{e}");
    assert!(!c.exists(), "the failed create left {}", c.display());
    // An existing directory keeps what it had, unchanged.
    let keep = t.path().join("keep");
    fs::create_dir(&keep).unwrap();
    fs::write(keep.join("notes.txt"), b"mine").unwrap();
    let mut args = vec!["create", "-a", s(&keep), "--level", "raid5", "--members", "3", "--member-size", "4M", "--stripe-unit", "4K"];
    args.extend(small);
    fails(&args);
    assert_eq!(snapshot(&keep), vec![(keep.join("notes.txt"), b"mine".to_vec())]);
    // Existing members: the journal file create made is removed, the members stay.
    let paths: Vec<PathBuf> = (0..3).map(|i| t.path().join(format!("d{i}"))).collect();
    for p in &paths {
        fs::write(p, vec![7u8; 2 << 20]).unwrap();
    }
    let list = paths.iter().map(|p| s(p)).collect::<Vec<_>>().join(",");
    let j = t.path().join("j.img");
    let e = fails(&["create", "-a", &list, "--level", "raid5", "--stripe-unit", "4K", "--journal", s(&j), "--journal-size", "4K"]);
    assert!(e.contains("journal too small"), "{e}");
    assert!(!j.exists(), "the failed create left {}", j.display());
    for p in &paths {
        assert!(fs::read(p).unwrap() == vec![7u8; 2 << 20], "{} changed", p.display());
    }
    // A member larger than any file can be: refused by the file's name,
    // not "out of range integral type conversion attempted", and gone.
    let big = t.path().join("big");
    let e = fails(&["create", "-a", s(&big), "--level", "raid5", "--members", "3", "--member-size", "8E"]);
    assert!(e.contains("member-00.img: 9223372036854775808 bytes is larger than any file can be"), "{e}");
    assert!(!big.exists(), "the failed create left {}", big.display());
    // rs with no code members is raid0 by another name: refused, saying so.
    let e = fails(&["create", "-a", s(&big), "--level", "rs:4+0", "--member-size", "4M"]);
    assert!(e.contains("no code members") && e.contains("use raid0"), "{e}");
    assert!(!big.exists(), "the failed create left {}", big.display());
    // An unknown level is answered with every level create takes; names
    // are case-blind for every kind, as for the fixed ones.
    for bad in ["foo", "tier:3", "remapx"] {
        let e = fails(&["create", "-a", s(&big), "--level", bad]);
        assert!(e.contains(&format!("unknown level {bad:?}")) && e.contains("dvs[:2], tier, remap"), "{e}");
    }
    let e = fails(&["create", "-a", s(&big), "--level", "Tier"]);
    assert!(e.contains("--level tier needs --fast"), "{e}");
    assert!(!big.exists(), "the failed create left {}", big.display());
}

#[test]
fn member_size_must_agree_with_existing_files() {
    let t = tempfile::tempdir().unwrap();
    let paths: Vec<PathBuf> = (0..3).map(|i| t.path().join(format!("d{i}"))).collect();
    for p in &paths {
        fs::File::create(p).unwrap().set_len(3 << 20).unwrap();
    }
    let list = paths.iter().map(|p| s(p)).collect::<Vec<_>>().join(",");
    let e = fails(&["create", "-a", &list, "--level", "raid5", "--stripe-unit", "4K", "--member-size", "4M", "--no-journal"]);
    assert_eq!(e.trim_end(), format!("error: {} is 3145728 bytes but --member-size says 4194304: give the size it has, or leave --member-size out", paths[0].display()));
    for p in &paths {
        assert_eq!(fs::metadata(p).unwrap().len(), 3 << 20);
        assert!(fs::read(p).unwrap().iter().all(|&x| x == 0), "{} was written", p.display());
    }
    // The matching size is fine.
    ok(&["create", "-a", &list, "--level", "raid5", "--stripe-unit", "4K", "--member-size", "3M", "--no-journal"]);
    // --force over a directory whose members have another size.
    let a = t.path().join("a");
    raid5(&a);
    let before = snapshot(&a);
    let e = fails(&["create", "-a", s(&a), "--level", "raid5", "--members", "3", "--member-size", "8M", "--stripe-unit", "4K", "--force"]);
    assert_eq!(e.trim_end(), format!("error: {} is 4194304 bytes but --member-size says 8388608: give the size it has, or leave --member-size out", a.join("member-00.img").display()));
    assert_eq!(snapshot(&a), before);
    let z = t.path().join("z");
    dvs(&z);
    let e = fails(&["create", "-a", s(&z), "--level", "dvs", "--members", "3", "--member-size", "8M", "--zoned", "--stripe-unit", "64K", "--zone-size", "1M", "--force"]);
    assert_eq!(
        e.trim_end(),
        format!("error: {} is 4198400 bytes but --member-size says 8388608 (8392704 with its 4096-byte zone header): give the size it has, or leave --member-size out", z.join("dvs-0.zoned").display())
    );
}

#[test]
fn synthetic_replay_rejects_inconsistent_sizes() {
    let base = ["replay", "--synthetic", "randwrite", "--device", "ram:default", "--drives", "3"];
    let cases: [(&[&str], &str); 6] = [
        (&["--size", "0"], "error: --size 0: a synthetic request needs at least one block"),
        (&["--footprint", "0"], "error: --footprint 0: a synthetic workload needs a span to address"),
        (&["--count", "0"], "error: --count 0: a synthetic workload needs at least one request"),
        (&["--size", "8K", "--footprint", "4K"], "error: --size 8192 is larger than --footprint 4096: every request must fit in the span"),
        (&["--size", "1000", "--count", "10"], "error: replaying on raid5: --size 1000 is not a multiple of the array's 512-byte block size"),
        (&["--footprint", "1T", "--count", "10"], "error: replaying on raid5: --footprint 1099511627776 is beyond the array's capacity of 137438953472 bytes"),
    ];
    for (extra, want) in cases {
        let mut args = base.to_vec();
        args.extend(extra);
        let e = fails(&args);
        assert_eq!(e.trim_end(), want, "{args:?}");
    }
    let r = json(&ok(&["replay", "--synthetic", "randwrite", "--device", "ram:default", "--drives", "3", "--size", "4K", "--footprint", "4K", "--count", "10", "--json"]));
    assert_eq!(r["requests"], 10, "{r}");
}

#[test]
fn trace_commands_refuse_devices_and_fifos() {
    let o = bounded(&["trace", "stats", "/dev/null"]);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(stderr(&o), "error: /dev/null: a character device/FIFO, not a trace file\n");
    let t = tempfile::tempdir().unwrap();
    let fifo = t.path().join("fifo");
    assert!(Command::new("mkfifo").arg(&fifo).status().unwrap().success());
    let o = bounded(&["trace", "stats", s(&fifo)]);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(stderr(&o), format!("error: {}: a character device/FIFO, not a trace file\n", fifo.display()));
    let o = bounded(&["replay", "--trace", s(&fifo)]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains(&format!("{}: a character device/FIFO, not a trace file", fifo.display())), "{}", stderr(&o));
}

#[test]
fn write_and_read_take_any_offset_and_length() {
    let t = tempfile::tempdir().unwrap();
    let a = t.path().join("a");
    ok(&["create", "-a", s(&a), "--level", "raid5", "--members", "4", "--member-size", "8M", "--stripe-unit", "4K"]);
    let mut model = vec![0u8; 16 << 10];
    let three = t.path().join("three.bin");
    fs::write(&three, b"xyz").unwrap();
    let w = json(&ok(&["write", "-a", s(&a), "--offset", "4093", "--input", s(&three), "--json"]));
    assert_eq!((w["offset"].as_u64(), w["bytes"].as_u64()), (Some(4093), Some(3)), "{w}");
    model[4093..4096].copy_from_slice(b"xyz");
    // Ten bytes across the block boundary, both blocks partial.
    let ten = data(10, 5);
    fs::write(t.path().join("ten.bin"), &ten).unwrap();
    ok(&["write", "-a", s(&a), "--offset", "8190", "--input", s(&t.path().join("ten.bin"))]);
    model[8190..8200].copy_from_slice(&ten);
    let out = t.path().join("out.bin");
    ok(&["read", "-a", s(&a), "--offset", "4090", "--length", "10", "--output", s(&out)]);
    assert_eq!(fs::read(&out).unwrap(), model[4090..4100].to_vec());
    ok(&["read", "-a", s(&a), "--offset", "8185", "--length", "20", "--output", s(&out)]);
    assert_eq!(fs::read(&out).unwrap(), model[8185..8205].to_vec());

    // Standard input, larger than one 8 MiB piece, at an odd offset.
    let big = data(9 << 20, 11);
    let off = 12_345u64;
    let o = with_stdin(&["write", "-a", s(&a), "--offset", &off.to_string(), "--input", "-", "--json"], &big);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(json(&String::from_utf8_lossy(&o.stdout))["bytes"], big.len() as u64);
    // Standard output: the bytes on stdout, the report on stderr.
    let rd = ["read", "-a", s(&a), "--offset", "12345", "--length", &big.len().to_string(), "--output"];
    for target in ["-", "/dev/stdout"] {
        let mut args = rd.to_vec();
        args.push(target);
        let o = mosaic(&args);
        assert!(o.status.success(), "--output {target}: {}", stderr(&o));
        assert!(o.stdout == big, "--output {target}: bytes differ ({} read)", o.stdout.len());
        assert!(stderr(&o).starts_with("read 9.0 MiB at offset 12345: "), "{}", stderr(&o));
    }
    // The edges of the streamed write kept their neighbours.
    ok(&["read", "-a", s(&a), "--offset", "8185", "--length", "20", "--output", s(&out)]);
    assert_eq!(fs::read(&out).unwrap(), model[8185..8205].to_vec());
    let o = mosaic(&["read", "-a", s(&a), "--offset", &(off - 3).to_string(), "--length", "6", "--output", "-"]);
    assert_eq!(o.stdout, [&[0u8; 3][..], &big[..3]].concat());
    let end = off + big.len() as u64;
    let o = mosaic(&["read", "-a", s(&a), "--offset", &(end - 2).to_string(), "--length", "4", "--output", "-"]);
    assert_eq!(o.stdout, [&big[big.len() - 2..], &[0u8; 2][..]].concat());
    // Beyond the capacity and empty input are errors.
    let e = fails(&["read", "-a", s(&a), "--offset", "1G", "--length", "1", "--output", s(&out)]);
    assert!(e.contains("beyond the array capacity"), "{e}");
    let o = with_stdin(&["write", "-a", s(&a), "--offset", "0", "--input", "-"], b"");
    assert_eq!((o.status.code(), stderr(&o)), (Some(1), "error: standard input: input is empty\n".to_string()));
}

#[test]
fn dvs_arrays_take_byte_granular_io_too() {
    let t = tempfile::tempdir().unwrap();
    let z = t.path().join("z");
    dvs(&z);
    let bytes = data(5000, 2);
    let o = with_stdin(&["write", "-a", s(&z), "--offset", "4093", "--input", "-"], &bytes);
    assert!(o.status.success(), "{}", stderr(&o));
    let o = mosaic(&["read", "-a", s(&z), "--offset", "4090", "--length", "5010", "--output", "-"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(o.stdout, [&[0u8; 3][..], &bytes[..], &[0u8; 7][..]].concat());
}

/// A copy of an array carries its identity (array UUID, member UUIDs),
/// but is its own array: commands on the original refuse the copy's
/// files without --force, as they refuse any other array's.
#[test]
fn a_copys_members_and_journal_are_another_arrays() {
    let t = tempfile::tempdir().unwrap();
    let (a, b) = (t.path().join("a"), t.path().join("b"));
    ok(&["create", "-a", s(&a), "--level", "raid5", "--members", "3", "--member-size", "4M", "--stripe-unit", "4K", "--journal-size", "1M"]);
    fs::create_dir(&b).unwrap();
    for e in fs::read_dir(&a).unwrap() {
        let p = e.unwrap().path();
        fs::copy(&p, b.join(p.file_name().unwrap())).unwrap();
    }
    let before = snapshot(&b);
    let e = fails(&["add", "-a", s(&a), "--spare", s(&b.join("member-01.img"))]);
    assert!(e.contains("copy's member") && e.contains("--force"), "{e}");
    let e = fails(&["grow", "-a", s(&a), "--add", s(&b.join("member-02.img"))]);
    assert!(e.contains("copy's member") && e.contains("--force"), "{e}");
    let e = fails(&["replace-journal", "-a", s(&a), "--journal", s(&b.join("journal.img"))]);
    assert!(e.contains("copy's journal") && e.contains("--force"), "{e}");
    assert!(snapshot(&b) == before, "the copy's files were written");
    ok(&["info", "-a", s(&b)]);
    // The original's own failed member is still taken back.
    ok(&["fail", "-a", s(&a), "--member", "1"]);
    ok(&["replace", "-a", s(&a), "--member", "1", "--drive", s(&a.join("member-01.img"))]);
    let st = mosaic(&["status", "-a", s(&a)]);
    assert_eq!(st.status.code(), Some(0), "{}", String::from_utf8_lossy(&st.stdout));
}

/// A trace whose read and write byte totals add past 2^64, and whose
/// last request ends within a block of it: stats reports it, and replay
/// refuses the request with a clear error; neither panics.
#[test]
fn a_trace_of_huge_sizes_is_reported_not_a_panic() {
    let t = tempfile::tempdir().unwrap();
    let f = t.path().join("huge.csv");
    fs::write(&f, "128166372003061629,wdev,0,Write,3872768,4096,1125\n128166372003161629,wdev,0,Read,0,18446744073709551615,1\n").unwrap();
    let out = ok(&["trace", "stats", s(&f)]);
    assert!(out.contains('2'), "{out}");
    let e = fails(&["replay", "--trace", s(&f)]);
    assert!(e.contains("a read of 18446744073709551615 bytes at offset 0") && e.contains("larger than") && !e.contains("panicked"), "{e}");
}

/// `--skip-bad` replays a damaged trace, and says how many lines it
/// skipped, as `trace stats` does: replay, replay on a real array, advise.
/// A request whose time goes back before the first is counted aloud too.
#[test]
fn skipped_malformed_lines_are_counted_aloud() {
    let t = tempfile::tempdir().unwrap();
    let f = t.path().join("bad.csv");
    fs::write(&f, "128166372003061629,wdev,0,Write,0,4096,1125\n128166372003161629,wdev,0,Write,12x,4096,1\n128166372002261629,wdev,0,Write,8192,4096,1\n").unwrap();
    let e = fails(&["replay", "--trace", s(&f)]);
    assert!(e.contains(":2:"), "without --skip-bad the line is named: {e}");
    let arr = t.path().join("arr");
    raid5(&arr);
    for args in [vec!["replay", "--skip-bad", "--trace", s(&f)], vec!["advise", "--skip-bad", "--trace", s(&f)], vec!["replay", "--skip-bad", "--trace", s(&f), "--on", s(&arr)]] {
        let out = mosaic(&args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{args:?}: {err}");
        assert!(err.contains("skipped 1 malformed lines (--skip-bad)"), "{args:?}: {err}");
        assert!(err.contains("1 requests earlier than the first request (timestamps out of order) were read at time 0"), "{args:?}: {err}");
    }
}

/// `serve --demo` creates its array in ./mosaic-data with `create`'s
/// guard: another array's journal there is refused, never written over.
#[test]
fn serve_demo_never_writes_over_another_arrays_journal() {
    let t = tempfile::tempdir().unwrap();
    ok(&["create", "-a", s(&t.path().join("j")), "--level", "raid5", "--members", "3", "--member-size", "4M", "--stripe-unit", "4K", "--journal-size", "1M"]);
    let demo = t.path().join("mosaic-data");
    fs::create_dir(&demo).unwrap();
    fs::copy(t.path().join("j").join("journal.img"), demo.join("journal.img")).unwrap();
    let before = fs::read(demo.join("journal.img")).unwrap();
    let sock = t.path().join("demo.sock");
    let o = Command::new(env!("CARGO_BIN_EXE_mosaic")).current_dir(t.path()).args(["serve", "--demo", "--socket", s(&sock)]).output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success() && err.contains("demo array") && err.contains("journal"), "{err}");
    assert!(fs::read(demo.join("journal.img")).unwrap() == before, "the other array's journal was written");
    assert!(!demo.join("member-00.img").exists());
}

/// An error says each thing once: a path, an I/O error that its error
/// type both shows and chains, a nonexistent array.
#[test]
fn an_error_names_each_thing_once() {
    let t = tempfile::tempdir().unwrap();
    let once = |e: &str, what: &str| assert_eq!(e.matches(what).count(), 1, "{what:?} in {e}");
    let none = t.path().join("none");
    let e = fails(&["info", "-a", s(&none)]);
    assert_eq!(e.trim_end(), format!("error: no array at {}: no such file or directory", none.display()));
    let o = mosaic(&["examine", s(&none)]);
    assert_eq!((o.status.code(), String::from_utf8_lossy(&o.stdout).to_string()), (Some(1), String::new()));
    assert_eq!(stderr(&o).trim_end(), format!("error: {}: no such file or directory", none.display()));
    let a = t.path().join("a");
    raid5(&a);
    let nodir = t.path().join("nodir");
    let e = fails(&["replace-journal", "-a", s(&a), "--journal", s(&nodir.join("j"))]);
    once(&e, "nodir/j");
    ok(&["fail", "-a", s(&a), "--member", "0"]);
    let e = fails(&["replace", "-a", s(&a), "--member", "0", "--drive", s(&nodir.join("x"))]);
    once(&e, "nodir/x");
    once(&e, "No such file");
    let z = t.path().join("z");
    dvs(&z);
    let junk = t.path().join("junk");
    fs::write(&junk, vec![0u8; 1 << 20]).unwrap();
    let e = fails(&["add", "-a", s(&z), "--spare", s(&junk)]);
    once(&e, "not an emulated zoned drive");
}

/// Member files are sparse, so create may promise more than the file
/// system holds: it says so (stderr), and still creates the array, as a
/// sparse file vdev or a thin LV is made; an array that fits is quiet.
#[test]
fn a_create_larger_than_the_free_space_warns_that_it_is_thin() {
    let t = tempfile::tempdir().unwrap();
    let small = t.path().join("small");
    let o = mosaic(&["create", "-a", s(&small), "--level", "raid5", "--members", "3", "--member-size", "4M", "--stripe-unit", "4K"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(!stderr(&o).contains("warning"), "{}", stderr(&o));
    // 3 x 15 TiB: past the free space of any test machine's /tmp, within
    // ext4's largest file.
    let big = t.path().join("big");
    let o = mosaic(&["create", "-a", s(&big), "--level", "raid5", "--members", "3", "--member-size", "15T", "--no-journal"]);
    let e = stderr(&o);
    assert_eq!(o.status.code(), Some(0), "{e}");
    assert!(e.contains("warning: the array's files are sparse: 45.0 TiB of them is not yet allocated") && e.contains("writes will fail once it fills"), "{e}");
    assert!(json(&ok(&["info", "-a", s(&big), "--json"]))["volume"]["capacity"].as_u64().is_some_and(|c| c > 29 << 40));
}

/// `status` calls a member missing only when its device is not there: a
/// failed member is set aside on purpose (its state says so), and called
/// missing once its file is gone too.
#[test]
fn status_calls_a_failed_member_missing_only_when_it_is_gone() {
    let t = tempfile::tempdir().unwrap();
    let a = t.path().join("a");
    raid5(&a);
    ok(&["fail", "-a", s(&a), "--member", "1"]);
    let o = mosaic(&["status", "-a", s(&a)]);
    let out = String::from_utf8_lossy(&o.stdout).to_string();
    assert_eq!(o.status.code(), Some(4), "{out}");
    let line = out.lines().find(|l| l.contains("member-01.img")).unwrap_or_default();
    assert!(line.contains("failed") && !line.contains("(missing)"), "{out}");
    fs::remove_file(a.join("member-01.img")).unwrap();
    let out = String::from_utf8_lossy(&mosaic(&["status", "-a", s(&a)]).stdout).to_string();
    let line = out.lines().find(|l| l.contains("member-01.img")).unwrap_or_default();
    assert!(line.contains("failed") && line.contains("(missing)"), "{out}");
}

/// The inner arrays of a tier and of a remapped array hold their owner's
/// structures: `write` and `serve` refuse them (a write through one
/// wrecked the owner; their own maintenance stays allowed), and
/// `assemble --scan` names the owner instead of offering them; the owner
/// itself is written as before.
#[test]
fn an_inner_array_takes_no_client_data_on_its_own() {
    let t = tempfile::tempdir().unwrap();
    let data = t.path().join("x.bin");
    fs::write(&data, vec![0x5a; 64 << 10]).unwrap();
    let x = data.to_str().unwrap();
    let tier = t.path().join("tier");
    ok(&["create", "-a", s(&tier), "--level", "tier", "--fast", "raid1:2", "--slow", "raid5:3", "--fast-size", "8M", "--slow-size", "16M"]);
    let remap = t.path().join("remap");
    ok(&["create", "-a", s(&remap), "--level", "remap", "--inner", "raid5:3", "--member-size", "16M"]);
    for (inner, owner) in [(tier.join("slow"), "the slow side of a tier"), (tier.join("fast"), "the fast side of a tier"), (remap.join("inner"), "the inner array of a remapped array")] {
        let e = fails(&["write", "-a", s(&inner), "--offset", "0", "--input", x]);
        assert!(e.contains(&format!("this array is {owner}")) && e.contains("write through that array instead"), "{e}");
        let e = fails(&["serve", "-a", s(&inner), "--listen", "127.0.0.1:0"]);
        assert!(e.contains(&format!("this array is {owner}")), "serve: {e}");
        assert!(ok(&["info", "-a", s(&inner)]).contains("raid"), "read-only opens work");
        let scan = ok(&["assemble", "--scan", s(&inner)]);
        assert!(scan.contains(&format!("part of another array: {owner}")) && !scan.contains("  -a "), "{scan}");
        let top = inner.parent().unwrap().canonicalize().unwrap();
        assert!(scan.contains(&format!("(open that one: -a {})", top.display())), "{scan}");
    }
    // A copy's inner array names the copy, not the original its labels'
    // home is.
    let copy = t.path().join("remap-copy");
    assert!(std::process::Command::new("cp").args(["-a", s(&remap), s(&copy)]).status().unwrap().success());
    let scan = ok(&["assemble", "--scan", s(&copy)]);
    assert!(scan.contains(&format!("(open that one: -a {})", copy.canonicalize().unwrap().display())), "{scan}");
    for owner in [&tier, &remap] {
        ok(&["write", "-a", s(owner), "--offset", "0", "--input", x]);
        let back = t.path().join("back.bin");
        ok(&["read", "-a", s(owner), "--offset", "0", "--length", "64K", "--output", s(&back)]);
        assert!(fs::read(&back).unwrap() == vec![0x5a; 64 << 10]);
    }
}

/// A CBRO array whose check drive array is an array of its own: `assemble
/// --scan` finds it whole (the nested array as its member), offers its
/// directory (a member list cannot name an array member), and names the
/// check drive array as part of it; written through the offered spec, it
/// stays healthy (a list of its data files left the check drive array
/// out and failed it for good).
#[test]
fn assemble_finds_a_cbro_array_whole_and_its_spec_keeps_it_healthy() {
    let t = tempfile::tempdir().unwrap();
    let cb = t.path().join("cb");
    ok(&["create", "-a", s(&cb), "--level", "cbro:4+1,cda=raid5:3", "--member-size", "16M"]);
    let scan = ok(&["assemble", "--scan", s(&cb)]);
    assert!(scan.contains("(fixed, cbro:4+1): 5 of 5 members") && scan.contains("array:") && !scan.contains("missing"), "{scan}");
    assert!(scan.contains("part of another array: a check drive array of a CBRO array"), "{scan}");
    let specs: Vec<&str> = scan.lines().filter_map(|l| l.strip_prefix("  -a ")).collect();
    assert_eq!(specs.len(), 1, "{scan}");
    let data = t.path().join("x.bin");
    fs::write(&data, vec![0x3c; 1 << 20]).unwrap();
    ok(&["write", "-a", specs[0], "--offset", "0", "--input", s(&data)]);
    assert!(ok(&["status", "-a", s(&cb)]).contains("HEALTHY"));
    let e = fails(&["write", "-a", s(&cb.join("cda-0")), "--offset", "0", "--input", s(&data)]);
    assert!(e.contains("this array is a check drive array of a CBRO array"), "{e}");
    // A copy's spec and check drive array are the copy's, not the
    // original's its labels' home names.
    let copy = t.path().join("cb-copy");
    assert!(std::process::Command::new("cp").args(["-a", s(&cb), s(&copy)]).status().unwrap().success());
    let scan = ok(&["assemble", "--scan", s(&copy)]);
    let c = copy.canonicalize().unwrap();
    let specs: Vec<&str> = scan.lines().filter_map(|l| l.strip_prefix("  -a ")).collect();
    assert!(specs == [c.to_str().unwrap()] && scan.contains(&format!("array:{}", c.join("cda-0").display())), "{scan}");
}
