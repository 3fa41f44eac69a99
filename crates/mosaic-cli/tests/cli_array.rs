//! CLI tests for the array commands: every bad-input case gives a clear
//! message and leaves member files unchanged; rebuild resumes after a kill.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common;
use common::{fails, mosaic, ok};

fn snapshot(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut v: Vec<_> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_file())
        .map(|p| {
            let b = fs::read(&p).unwrap();
            (p, b)
        })
        .collect();
    v.sort();
    v
}

fn create(dir: &Path, level: &str, members: &str, unit: &str) -> String {
    ok(&["create", "-a", dir.to_str().unwrap(), "--level", level, "--members", members, "--member-size", "4M", "--stripe-unit", unit])
}

#[test]
fn create_write_read_info_round_trip() {
    let t = tempfile::tempdir().unwrap();
    let dir = t.path().join("arr");
    let out = create(&dir, "raid6", "6", "12K");
    assert!(out.contains("raid6"), "{out}");
    let input = t.path().join("in.bin");
    let data: Vec<u8> = (0..200_000u32).flat_map(|i| i.to_le_bytes()).take(196_608).collect();
    fs::write(&input, &data).unwrap();
    let w = ok(&["write", "-a", dir.to_str().unwrap(), "--offset", "8K", "--input", input.to_str().unwrap(), "--json"]);
    let wj: serde_json::Value = serde_json::from_str(&w).unwrap();
    assert!(wj["device_writes"].as_u64().unwrap() > 0);
    let output = t.path().join("out.bin");
    ok(&["read", "-a", dir.to_str().unwrap(), "--offset", "8K", "--length", "192K", "--output", output.to_str().unwrap()]);
    assert_eq!(fs::read(&output).unwrap(), data);
    // Comma-list spec in shuffled order.
    let mut paths: Vec<String> = fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path().display().to_string()).collect();
    paths.sort();
    paths.reverse();
    let info = ok(&["info", "-a", &paths.join(","), "--json"]);
    let ij: serde_json::Value = serde_json::from_str(&info).unwrap();
    assert_eq!(ij["level"], "raid6");
    assert_eq!(ij["stripe_unit"], 12288);
    assert_eq!(ij["state"], "clean");
    assert_eq!(ij["member_list"].as_array().unwrap().len(), 6);
    let human = ok(&["info", "-a", dir.to_str().unwrap()]);
    assert!(human.contains("capacity"), "{human}");
}

#[test]
fn error_cases_are_clear_and_change_nothing() {
    let t = tempfile::tempdir().unwrap();
    let a = t.path().join("a");
    let b = t.path().join("b");
    create(&a, "raid5", "4", "4K");
    create(&b, "raid5", "4", "4K");
    let before_a = snapshot(&a);
    let before_b = snapshot(&b);
    let ad = a.to_str().unwrap();

    // Wrong member count.
    let e = fails(&["create", "-a", t.path().join("c").to_str().unwrap(), "--level", "rs:4+2", "--members", "5", "--member-size", "4M"]);
    assert!(e.contains("wrong member count"), "{e}");
    let e = fails(&["create", "-a", "x1,x2", "--level", "raid6", "--members", "4"]);
    assert!(e.contains("wrong member count"), "{e}");
    // Bad geometry.
    let e = fails(&["create", "-a", t.path().join("d").to_str().unwrap(), "--level", "raid5", "--members", "4", "--member-size", "4M", "--stripe-unit", "6000"]);
    assert!(e.contains("multiple of the block size"), "{e}");
    // Member too small.
    let e = fails(&["create", "-a", t.path().join("e").to_str().unwrap(), "--level", "raid5", "--members", "4", "--member-size", "100K"]);
    assert!(e.contains("too small"), "{e}");
    // Members from two arrays.
    let mixed = format!(
        "{},{},{},{}",
        a.join("member-00.img").display(),
        a.join("member-01.img").display(),
        a.join("member-02.img").display(),
        b.join("member-03.img").display()
    );
    // One device of another array is reported by name and not used: the
    // array opens degraded (as md assembles), and nothing is written.
    let o = mosaic(&["info", "-a", &mixed]);
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success() && e.contains("member-03.img: belongs to another array"), "{e}");
    // Out-of-range I/O (unaligned I/O is byte-granular: cli_safety).
    let input = t.path().join("in.bin");
    fs::write(&input, vec![1u8; 4096]).unwrap();
    let e = fails(&["write", "-a", ad, "--offset", "1G", "--input", input.to_str().unwrap()]);
    assert!(e.contains("beyond the array capacity"), "{e}");
    let e = fails(&["read", "-a", ad, "--offset", "0", "--length", "1G", "--output", t.path().join("o").to_str().unwrap()]);
    assert!(e.contains("beyond the array capacity"), "{e}");
    // More failures than M.
    let e = fails(&["fail", "-a", ad, "--member", "9"]);
    assert!(e.contains("no member 9"), "{e}");
    assert_eq!(snapshot(&a), before_a, "member files changed by failed commands");
    assert_eq!(snapshot(&b), before_b);

    // Corrupt superblock: every command names the member.
    let c = t.path().join("c2");
    create(&c, "raid5", "4", "4K");
    let m1 = c.join("member-01.img");
    let mut bytes = fs::read(&m1).unwrap();
    bytes[40] ^= 0xff;
    bytes[(64 << 10) + 40] ^= 0xff;
    fs::write(&m1, &bytes).unwrap();
    let before_c = snapshot(&c);
    let o = mosaic(&["info", "-a", c.to_str().unwrap()]);
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success() && e.contains("member-01.img") && e.contains("corrupt superblock"), "{e}");
    // Missing superblock (a zeroed file in the member list).
    let z = t.path().join("zero.img");
    fs::write(&z, vec![0u8; 4 << 20]).unwrap();
    let e = fails(&["info", "-a", &format!("{},{}", a.join("member-00.img").display(), z.display())]);
    assert!(e.contains("no mosaic superblock") && e.contains("missing or failed"), "{e}");
    // Overwriting an existing array needs --force.
    let e = fails(&["create", "-a", ad, "--level", "raid5", "--members", "4", "--member-size", "4M"]);
    assert!(e.contains("--force"), "{e}");
    assert_eq!(snapshot(&c), before_c);
    assert_eq!(snapshot(&a), before_a);
}

#[test]
fn too_many_failures_refused() {
    let t = tempfile::tempdir().unwrap();
    let a = t.path().join("a");
    create(&a, "raid5", "4", "4K");
    let ad = a.to_str().unwrap();
    ok(&["fail", "-a", ad, "--member", "1"]);
    let before = snapshot(&a);
    let e = fails(&["fail", "-a", ad, "--member", "2"]);
    assert!(e.contains("data would be lost"), "{e}");
    assert_eq!(snapshot(&a), before);
    // Assembling with a second member missing is refused too.
    let list = format!("{},{}", a.join("member-00.img").display(), a.join("member-03.img").display());
    let e = fails(&["info", "-a", &list]);
    assert!(e.contains("missing or failed"), "{e}");
}

#[test]
fn degraded_read_replace_rebuild_resume_after_kill() {
    let t = tempfile::tempdir().unwrap();
    let a = t.path().join("a");
    create(&a, "raid6", "5", "4K");
    let ad = a.to_str().unwrap();
    let info: serde_json::Value = serde_json::from_str(&ok(&["info", "-a", ad, "--json"])).unwrap();
    let cap = info["capacity"].as_u64().unwrap();
    let data: Vec<u8> = (0..cap).map(|i| (i * 13 % 241) as u8).collect();
    let input = t.path().join("in.bin");
    fs::write(&input, &data).unwrap();
    ok(&["write", "-a", ad, "--offset", "0", "--input", input.to_str().unwrap()]);
    ok(&["fail", "-a", ad, "--member", "0"]);
    ok(&["fail", "-a", ad, "--member", "3"]);
    let out = t.path().join("out.bin");
    ok(&["read", "-a", ad, "--offset", "0", "--length", &cap.to_string(), "--output", out.to_str().unwrap()]);
    assert!(fs::read(&out).unwrap() == data, "degraded read differs");

    // Replace member 0; the rebuild is killed part-way (abort, like kill -9).
    let new0 = a.join("new-00.img");
    let o = Command::new(env!("CARGO_BIN_EXE_mosaic"))
        .args(["replace", "-a", ad, "--member", "0", "--drive", new0.to_str().unwrap()])
        .env("MOSAIC_FAULT_ABORT_REBUILD_AFTER", "300")
        .output()
        .unwrap();
    assert!(!o.status.success(), "rebuild should have been killed");
    let info: serde_json::Value = serde_json::from_str(&ok(&["info", "-a", ad, "--json"])).unwrap();
    let st = &info["member_list"][0]["state"];
    assert_eq!(st["state"], "rebuilding", "{info}");
    // Resume: finishes, data intact, scrub clean.
    let r = ok(&["rebuild", "-a", ad, "--json"]);
    let rj: serde_json::Value = serde_json::from_str(&r).unwrap();
    let resumed = rj["resumed_from"].as_u64().unwrap();
    assert!(resumed > 0 && resumed <= 300, "resumed from {resumed}: the checkpoint was not used");
    ok(&["replace", "-a", ad, "--member", "3", "--drive", a.join("new-03.img").to_str().unwrap()]);
    let info: serde_json::Value = serde_json::from_str(&ok(&["info", "-a", ad, "--json"])).unwrap();
    assert_eq!(info["degraded"], false, "{info}");
    ok(&["read", "-a", ad, "--offset", "0", "--length", &cap.to_string(), "--output", out.to_str().unwrap()]);
    assert!(fs::read(&out).unwrap() == data, "data differs after rebuild");
    let s = ok(&["scrub", "-a", ad, "--json"]);
    let sj: serde_json::Value = serde_json::from_str(&s).unwrap();
    assert_eq!(sj["mismatched_stripes"].as_array().unwrap().len(), 0);
    // Rebuilt members equal what the code says: fail two others and read again.
    ok(&["fail", "-a", ad, "--member", "1"]);
    ok(&["fail", "-a", ad, "--member", "2"]);
    ok(&["read", "-a", ad, "--offset", "0", "--length", &cap.to_string(), "--output", out.to_str().unwrap()]);
    assert!(fs::read(&out).unwrap() == data, "data differs reading from rebuilt members");
}

#[test]
fn scrub_cli_reports_stripe_numbers_and_repairs() {
    let t = tempfile::tempdir().unwrap();
    let a = t.path().join("a");
    create(&a, "raid5", "4", "4K");
    let ad = a.to_str().unwrap();
    let input = t.path().join("in.bin");
    fs::write(&input, vec![0x42u8; 3 * 4096 * 20]).unwrap();
    ok(&["write", "-a", ad, "--offset", "0", "--input", input.to_str().unwrap()]);
    // Stripe 7's parity is on member 4-1-(7 mod 4) = 0 for n = 4.
    let m0 = a.join("member-00.img");
    let mut bytes = fs::read(&m0).unwrap();
    bytes[(1 << 20) + 7 * 4096 + 5] ^= 1;
    fs::write(&m0, &bytes).unwrap();
    let o = mosaic(&["scrub", "-a", ad]);
    assert_eq!(o.status.code(), Some(3), "scrub found a mismatch: exit 3");
    let s = String::from_utf8_lossy(&o.stdout);
    assert!(s.contains("1 of") && s.contains(": 7"), "{s}");
    ok(&["scrub", "-a", ad, "--repair"]);
    let s = ok(&["scrub", "-a", ad]);
    assert!(s.contains("all consistent"), "{s}");
}

#[test]
fn create_on_existing_files_syncs_parity() {
    let t = tempfile::tempdir().unwrap();
    let mut paths = Vec::new();
    for i in 0..4u8 {
        let p = t.path().join(format!("disk{i}"));
        // Arbitrary old contents: the initial sync must make parity agree.
        fs::write(&p, (0..(4u32 << 20)).map(|x| (x as u8).wrapping_mul(i + 3)).collect::<Vec<u8>>()).unwrap();
        paths.push(p.display().to_string());
    }
    let list = paths.join(",");
    ok(&["create", "-a", &list, "--level", "raid5", "--stripe-unit", "8K"]);
    let s = ok(&["scrub", "-a", &list, "--json"]);
    let sj: serde_json::Value = serde_json::from_str(&s).unwrap();
    assert_eq!(sj["mismatched_stripes"].as_array().unwrap().len(), 0, "{s}");
    // A member of the wrong size is refused, naming it.
    let small = t.path().join("small");
    fs::write(&small, vec![0u8; 512 << 10]).unwrap();
    let bad = format!("{},{},{}", t.path().join("x1").display(), t.path().join("x2").display(), small.display());
    fs::write(t.path().join("x1"), vec![0u8; 4 << 20]).unwrap();
    fs::write(t.path().join("x2"), vec![0u8; 4 << 20]).unwrap();
    let e = fails(&["create", "-a", &bad, "--level", "raid5"]);
    assert!(e.contains("small") && e.contains("too small"), "{e}");
}

#[test]
fn a_second_writer_is_refused_while_the_first_holds_the_array() {
    let t = tempfile::tempdir().unwrap();
    let a = t.path().join("a");
    create(&a, "raid5", "4", "4K");
    // Hold one member with an exclusive lock, as a running mosaic would.
    let m = mosaic_dev_lock(&a.join("member-02.img"));
    let input = t.path().join("in.bin");
    fs::write(&input, vec![7u8; 4096]).unwrap();
    let e = fails(&["write", "-a", a.to_str().unwrap(), "--offset", "0", "--input", input.to_str().unwrap()]);
    assert!(e.contains("in use by another mosaic process"), "{e}");
    drop(m);
    ok(&["write", "-a", a.to_str().unwrap(), "--offset", "0", "--input", input.to_str().unwrap()]);
}

fn mosaic_dev_lock(p: &Path) -> std::fs::File {
    use std::os::fd::AsRawFd;
    let f = std::fs::OpenOptions::new().read(true).write(true).open(p).unwrap();
    // SAFETY: flock on a descriptor we own.
    assert_eq!(unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX) }, 0);
    f
}

#[test]
fn cbro_on_files_with_a_smaller_striped_cda() {
    let t = tempfile::tempdir().unwrap();
    let mk = |name: &str, size: usize| {
        let p = t.path().join(name);
        fs::write(&p, vec![0u8; size]).unwrap();
        p.display().to_string()
    };
    // 4 data members of 4 MiB (3 MiB of units each); a CDA of two members
    // needs 1 MiB header + 1.5 MiB each.
    let data: Vec<String> = (0..4).map(|i| mk(&format!("d{i}"), 4 << 20)).collect();
    let small: Vec<String> = (0..2).map(|i| mk(&format!("s{i}"), 2 << 20)).collect();
    let list = [data.clone(), small].concat().join(",");
    let e = fails(&["create", "-a", &list, "--level", "cbro:4+1,cda=raid0:2", "--stripe-unit", "4K", "--assume-clean"]);
    assert!(e.contains("check drive array member too small"), "{e}");
    let ok_cda: Vec<String> = (0..2).map(|i| mk(&format!("c{i}"), (5 << 20) / 2)).collect();
    let list = [data, ok_cda].concat().join(",");
    ok(&["create", "-a", &list, "--level", "cbro:4+1,cda=raid0:2", "--stripe-unit", "4K"]);
    let info: serde_json::Value = serde_json::from_str(&ok(&["info", "-a", &list, "--json"])).unwrap();
    assert_eq!(info["capacity"], 4 * (3 << 20));
    let input = t.path().join("in.bin");
    let bytes: Vec<u8> = (0..(12u32 << 20)).map(|i| (i % 251) as u8).collect();
    fs::write(&input, &bytes).unwrap();
    ok(&["write", "-a", &list, "--offset", "0", "--input", input.to_str().unwrap()]);
    ok(&["fail", "-a", &list, "--member", "2"]);
    let out = t.path().join("out.bin");
    ok(&["read", "-a", &list, "--offset", "0", "--length", "12M", "--output", out.to_str().unwrap()]);
    assert!(fs::read(&out).unwrap() == bytes, "degraded cbro read differs");
}

/// raid0 keeps no redundancy: a scrub says there is nothing to check and
/// exits 0 (not 4, "degraded", which a cron job would report).
#[test]
fn a_scrub_of_raid0_says_it_has_nothing_to_check() {
    let t = tempfile::tempdir().unwrap();
    let a = t.path().join("z");
    let a = a.to_str().unwrap();
    ok(&["create", "-a", a, "--level", "raid0", "--members", "2", "--member-size", "8M"]);
    let o = mosaic(&["scrub", "-a", a]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{o:?}");
    assert!(out.contains("raid0 keeps no redundancy: there is nothing a scrub can check") && !out.contains("degraded"), "{out}");
    assert!(ok(&["status", "-a", a]).contains("HEALTHY"));
}

/// Members of different sizes: the array takes as much of each as the
/// smallest holds, and `create` says what the larger ones leave unused
/// (as mdadm does); `examine` shows when the array was made as a date.
#[test]
fn create_says_what_larger_members_leave_unused() {
    let t = tempfile::tempdir().unwrap();
    let files: Vec<std::path::PathBuf> = [64u64, 64, 16].iter().enumerate().map(|(i, mib)| {
        let p = t.path().join(format!("m{i}.img"));
        std::fs::File::create(&p).unwrap().set_len(mib << 20).unwrap();
        p
    }).collect();
    let list = files.iter().map(|p| p.to_str().unwrap()).collect::<Vec<_>>().join(",");
    let o = common::mosaic(&["create", "-a", &list, "--level", "raid5", "--no-journal"]);
    assert!(o.status.success());
    let e = String::from_utf8_lossy(&o.stderr);
    for i in [0, 1] {
        assert!(e.contains(&format!("member {i} ({}) is larger than the array uses: 48.0 MiB of it unused", files[i].display())), "{e}");
    }
    assert!(!e.contains("member 2 ("), "{e}");
    let ex = common::ok(&["examine", files[0].to_str().unwrap()]);
    let created = ex.lines().find(|l| l.trim_start().starts_with("created")).unwrap_or_default();
    assert!(created.contains("T") && created.ends_with('Z'), "{ex}");
}
