//! `mosaic examine` and `mosaic assemble --scan`: two arrays whose
//! members are shuffled across directories (and renamed) are found by
//! UUID, members in index order, and open from the printed spec with
//! their bytes; a missing member, a stale copy and a foreign file are
//! reported as such.

use crate::common;
use common::{json, mosaic, ok};

use std::path::Path;

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len).map(|i| (i as u32).wrapping_mul(2654435761).to_le_bytes()[2] ^ seed).collect()
}

fn write(dir: &Path, arr: &str, data: &[u8]) {
    let f = dir.join("in.bin");
    std::fs::write(&f, data).unwrap();
    ok(&["write", "-a", arr, "--offset", "0", "--input", f.to_str().unwrap()]);
}

fn read(dir: &Path, arr: &str, len: usize) -> Vec<u8> {
    let f = dir.join("out.bin");
    ok(&["read", "-a", arr, "--offset", "0", "--length", &len.to_string(), "--output", f.to_str().unwrap(), "--force"]);
    std::fs::read(f).unwrap()
}

#[test]
fn assemble_finds_two_arrays_whose_members_are_shuffled_across_directories() {
    let t = tempfile::tempdir().unwrap();
    let d = t.path();
    let (a, b) = (d.join("a"), d.join("b"));
    ok(&["create", "-a", a.to_str().unwrap(), "--level", "raid5", "--members", "4", "--member-size", "8M"]);
    ok(&["create", "-a", b.to_str().unwrap(), "--level", "raid6", "--members", "5", "--member-size", "8M", "--journal-size", "4M"]);
    let (da, db) = (pattern(1 << 20, 1), pattern(1 << 20, 2));
    write(d, a.to_str().unwrap(), &da);
    write(d, b.to_str().unwrap(), &db);
    let ua = json(&ok(&["info", "-a", a.to_str().unwrap(), "--json"]))["uuid"].as_str().unwrap().to_string();
    // Shuffle: members of both arrays renamed into two other directories.
    let (x, y) = (d.join("x"), d.join("y"));
    std::fs::create_dir_all(&x).unwrap();
    std::fs::create_dir_all(y.join("deep")).unwrap();
    std::fs::rename(a.join("member-00.img"), x.join("disk7")).unwrap();
    std::fs::rename(b.join("member-03.img"), x.join("disk1")).unwrap();
    std::fs::rename(a.join("member-02.img"), y.join("deep/disk3")).unwrap();
    std::fs::rename(b.join("member-00.img"), y.join("disk0")).unwrap();
    std::fs::write(x.join("notes.txt"), b"not a member").unwrap();
    let ex = json(&ok(&["examine", x.join("disk7").to_str().unwrap(), "--json"]));
    assert_eq!((ex["label"]["array_uuid"].as_str().unwrap(), ex["label"]["member_index"].as_u64().unwrap()), (ua.as_str(), 0));
    assert_eq!(ex["label"]["policy"]["geometry"]["level"], "raid5");
    let scan: Vec<&str> = vec!["assemble", "--scan", x.to_str().unwrap(), y.to_str().unwrap(), a.to_str().unwrap(), b.to_str().unwrap(), "--json"];
    let found = json(&ok(&scan));
    let arrays = found.as_array().unwrap();
    assert_eq!(arrays.len(), 2, "{found}");
    for f in arrays {
        let arr = &f["array"];
        assert_eq!(arr["complete"], true, "{f}");
        assert!(arr["missing"].as_array().unwrap().is_empty());
        let idx: Vec<u64> = arr["found"].as_array().unwrap().iter().map(|m| m["index"].as_u64().unwrap()).collect();
        assert_eq!(idx, (0..idx.len() as u64).collect::<Vec<_>>(), "members in index order");
        assert_eq!(arr["journals"].as_array().unwrap().len(), 1);
        let spec = f["spec"].as_str().unwrap();
        let (want, level) = if arr["uuid"] == ua.as_str() { (&da, "raid5") } else { (&db, "raid6") };
        assert_eq!(arr["level"], level);
        assert_eq!(&read(d, spec, 1 << 20), want, "{level}: the bytes, opened from the printed spec");
    }
}

#[test]
fn missing_and_stale_members_and_foreign_files_are_named() {
    let t = tempfile::tempdir().unwrap();
    let d = t.path();
    let a = d.join("a");
    ok(&["create", "-a", a.to_str().unwrap(), "--level", "raid5", "--members", "4", "--member-size", "8M"]);
    // An old copy of member 1, then the array moves on (two event rounds).
    std::fs::copy(a.join("member-01.img"), d.join("old-member-01.img")).unwrap();
    ok(&["fail", "-a", a.to_str().unwrap(), "--member", "3"]);
    std::fs::remove_file(a.join("member-03.img")).unwrap();
    let o = mosaic(&["assemble", "--scan", a.to_str().unwrap(), d.join("old-member-01.img").to_str().unwrap(), "--json"]);
    let found = json(&String::from_utf8_lossy(&o.stdout));
    let arr = &found[0]["array"];
    assert_eq!(arr["missing"], serde_json::json!([3]), "{found}");
    assert_eq!(arr["duplicates"].as_array().unwrap().len(), 1, "the old copy of member 1 is set aside: {found}");
    assert_eq!(arr["complete"], true, "raid5 opens with one member out");
    assert_eq!(o.status.code(), Some(0));
    // Only the old copy of member 1 and member 0: two out, incomplete.
    std::fs::remove_file(a.join("member-01.img")).unwrap();
    let o = mosaic(&["assemble", "--scan", a.join("member-00.img").to_str().unwrap(), d.join("old-member-01.img").to_str().unwrap(), "--json"]);
    assert_eq!(o.status.code(), Some(4), "incomplete: exit 4");
    let found = json(&String::from_utf8_lossy(&o.stdout));
    let m1 = found[0]["array"]["found"].as_array().unwrap().iter().find(|m| m["index"] == 1).cloned().unwrap();
    assert_eq!(m1["stale"], true, "the old copy missed event rounds: {found}");
    // Plain files carry nothing: examine says so and fails.
    std::fs::write(d.join("plain"), vec![0u8; 8192]).unwrap();
    let e = common::fails(&["examine", d.join("plain").to_str().unwrap()]);
    assert!(e.contains("nothing of mosaic's"), "{e}");
    let empty = tempfile::tempdir().unwrap();
    assert!(ok(&["assemble", "--scan", empty.path().to_str().unwrap()]).contains("no arrays found"));
}

/// A copy of an array directory (`cp -a`) has the array's UUID but is its
/// own array: assemble lists each directory as one array, never mixing
/// their members, and a member replaced onto a device outside the
/// directory goes with the original (its home), as open does.
#[test]
fn copies_of_an_array_are_listed_apart_and_never_mixed() {
    let t = tempfile::tempdir().unwrap();
    let d = t.path();
    let a = d.join("a");
    let out = d.join("out.img");
    ok(&["create", "-a", a.to_str().unwrap(), "--level", "raid5", "--members", "3", "--member-size", "8M"]);
    let data = pattern(1 << 20, 5);
    write(d, a.to_str().unwrap(), &data);
    ok(&["fail", "-a", a.to_str().unwrap(), "--member", "2"]);
    ok(&["replace", "-a", a.to_str().unwrap(), "--member", "2", "--drive", out.to_str().unwrap()]);
    let c = d.join("c");
    assert!(std::process::Command::new("cp").args(["-a", a.to_str().unwrap(), c.to_str().unwrap()]).status().unwrap().success());
    let found = json(&String::from_utf8_lossy(&mosaic(&["assemble", "--scan", d.to_str().unwrap(), "--json"]).stdout));
    let arrays = found.as_array().unwrap();
    assert_eq!(arrays.len(), 2, "{found}");
    let canon = |p: &Path| std::fs::canonicalize(p).unwrap().display().to_string();
    for f in arrays {
        let arr = &f["array"];
        let dir = arr["copy"]["dir"].as_str().unwrap();
        let original = dir == canon(&a);
        assert_eq!(arr["copy"]["original"], original, "{f}");
        let paths: Vec<&str> = arr["found"].as_array().unwrap().iter().map(|m| m["path"].as_str().unwrap()).collect();
        if original {
            // Members 0 and 1 in its directory, member 2 the replacement outside it.
            assert_eq!(paths, vec![canon(&a.join("member-00.img")), canon(&a.join("member-01.img")), canon(&out)], "{f}");
            assert_eq!(arr["complete"], true);
            assert_eq!(&read(d, f["spec"].as_str().unwrap(), 1 << 20), &data);
        } else {
            assert_eq!(dir, canon(&c));
            assert!(paths.iter().all(|p| p.starts_with(dir)), "only the copy's own files: {f}");
            let m2 = &arr["found"][2];
            assert_eq!(m2["stale"], true, "the copy's member 2 is the old one, replaced before the copy: {f}");
        }
    }
}

/// `wipe`, as `mdadm --zero-superblock`: a device of an array is refused
/// without `--force` (nothing written, even for the other devices named),
/// erased with it (a member, the journal, a spare, a DVS zoned file whose
/// zone header stays), refused while its array is served, and a
/// directory is never wiped whole.  A wiped device is free for any array.
#[test]
fn wipe_erases_labels_and_journal_headers_only_when_forced() {
    let t = tempfile::tempdir().unwrap();
    let d = t.path();
    let p = |n: &str| d.join(n).to_str().unwrap().to_string();
    ok(&["create", "-a", &p("a"), "--level", "raid5", "--members", "3", "--member-size", "8M", "--spare", &p("sp.img")]);
    ok(&["create", "-a", &p("z"), "--level", "dvs", "--members", "4", "--member-size", "32M", "--zoned", "--stripe-unit", "64K"]);
    std::fs::write(d.join("plain"), b"not mosaic's").unwrap();
    let m0 = std::fs::read(d.join("a/member-00.img")).unwrap();
    let e = common::fails(&["wipe", &p("plain"), &p("a/member-00.img")]);
    assert!(e.contains("is member 0 of array") && e.contains("--force") && e.contains("nothing was written"), "{e}");
    assert!(std::fs::read(d.join("a/member-00.img")).unwrap() == m0, "nothing written without --force");
    let e = common::fails(&["wipe", "--force", &p("a")]);
    assert!(e.contains("not a directory"), "{e}");
    // A path that is not there is an error (a mistyped one would pass
    // as "nothing to erase"), and nothing else given is written.
    let e = common::fails(&["wipe", "--force", &p("plain"), &p("no-such.img")]);
    assert!(e.contains("no-such.img: no such file or device (nothing was written)"), "{e}");
    // Served: in use.
    let srv = common::serve::Serve::start(&p("a"), &["--quiet"]);
    let e = common::fails(&["wipe", "--force", &p("a/member-01.img")]);
    assert!(e.contains("in use"), "{e}");
    srv.stop();
    let out = json(&ok(&["wipe", "--force", "--json", &p("plain"), &p("a/member-00.img"), &p("a/journal.img"), &p("sp.img"), &p("z/dvs-1.zoned")]));
    let erased: Vec<bool> = out.as_array().unwrap().iter().map(|w| w["erased"].as_bool().unwrap()).collect();
    assert_eq!(erased, vec![false, true, true, true, true], "{out}");
    assert!(out[4]["was"].as_str().unwrap().contains("member 1 of DVS array"), "{out}");
    for f in ["a/member-00.img", "a/journal.img", "sp.img"] {
        assert!(String::from_utf8_lossy(&mosaic(&["examine", &p(f)]).stderr).contains("nothing of mosaic's"), "{f}");
    }
    assert!(ok(&["examine", &p("z/dvs-1.zoned")]).contains("an emulated zoned drive"), "the zone header stays");
    assert_eq!(std::fs::read(d.join("plain")).unwrap(), b"not mosaic's");
    // Only the label went: the member's data area is as it was.
    let now = std::fs::read(d.join("a/member-00.img")).unwrap();
    assert!(now[1 << 20..] == m0[1 << 20..]);
    // Free for any array: no --force needed now.
    ok(&["create", "-a", &p("a/member-00.img"), "--level", "raid0", "--members", "1"]);
}
