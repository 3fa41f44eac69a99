//! `mosaic grow --level` (mdadm's `--grow --level`, md's takeover): a
//! 2-member mirror made raid5 then grown, a raid0 given a parity member
//! offline and under a server with a client writing, refusals.

use std::path::Path;

use crate::common;
use common::serve::Serve;
use common::{fails, json, ok, pattern};

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// Write `data` at 0 and check the array reads it back.
fn write_read(dir: &Path, a: &Path, data: &[u8]) {
    let input = dir.join("in.bin");
    std::fs::write(&input, data).unwrap();
    ok(&["write", "-a", s(a), "--offset", "0", "--input", s(&input)]);
    assert_reads(dir, a, data);
}

fn assert_reads(dir: &Path, a: &Path, data: &[u8]) {
    let out = dir.join("out.bin");
    ok(&["read", "-a", s(a), "--offset", "0", "--length", &data.len().to_string(), "--output", s(&out)]);
    assert!(std::fs::read(&out).unwrap() == data, "the bytes read back");
}

#[test]
fn a_mirror_becomes_raid5_and_grows_and_raid0_takes_a_parity_member() {
    let t = tempfile::tempdir().unwrap();
    let a = t.path().join("mirror");
    ok(&["create", "-a", s(&a), "--level", "raid1", "--members", "2", "--member-size", "6M"]);
    let data = pattern(5 << 20, 1);
    write_read(t.path(), &a, &data);
    let rep = json(&ok(&["grow", "-a", s(&a), "--level", "raid5", "--json"]));
    assert_eq!((rep["takeover"]["from"].as_str(), rep["takeover"]["to"].as_str(), rep["rebuild"].is_null()), (Some("raid1"), Some("raid5"), true), "{rep}");
    let info = json(&ok(&["info", "-a", s(&a), "--json"]));
    assert_eq!(info["level"].as_str(), Some("raid5"), "{info}");
    assert!(ok(&["scrub", "-a", s(&a)]).contains("all consistent"));
    let grown = ok(&["grow", "-a", s(&a), "--members", "3"]);
    assert!(grown.starts_with("grown to 3 members, capacity 10.0 MiB"), "{grown}");
    assert_reads(t.path(), &a, &data);
    // In one command, as mdadm --grow --level=5 --raid-devices=3.
    let c = t.path().join("mirror2");
    ok(&["create", "-a", s(&c), "--level", "raid1", "--members", "2", "--member-size", "6M"]);
    write_read(t.path(), &c, &data);
    // A drive the grow would refuse is refused before the level changes.
    let small = t.path().join("small.img");
    std::fs::File::create(&small).unwrap().set_len(1 << 20).unwrap();
    let e = fails(&["grow", "-a", s(&c), "--level", "raid5", "--add", s(&small)]);
    assert!(e.contains("small.img: too small to join"), "{e}");
    assert_eq!(json(&ok(&["info", "-a", s(&c), "--json"]))["level"].as_str(), Some("raid1"));
    let text = ok(&["grow", "-a", s(&c), "--level", "raid5", "--members", "3"]);
    assert!(text.starts_with("level changed from raid1 to raid5, 2 members (no data moved)\ngrown to 3 members, capacity 10.0 MiB"), "{text}");
    assert_reads(t.path(), &c, &data);
    assert!(ok(&["scrub", "-a", s(&c)]).contains("all consistent"));
    // raid0 -> raid4: the parity member rebuilt, then any data member may go.
    let b = t.path().join("striped");
    ok(&["create", "-a", s(&b), "--level", "raid0", "--members", "3", "--member-size", "4M"]);
    let data = pattern(9 << 20, 2);
    write_read(t.path(), &b, &data);
    let e = fails(&["grow", "-a", s(&b), "--level", "raid4"]);
    assert!(e.contains("exactly one new member for the parity"), "{e}");
    let e = fails(&["grow", "-a", s(&b), "--level", "raid5", "--members", "4"]);
    assert!(e.contains("raid0 to raid5 moves data"), "{e}");
    let e = fails(&["grow", "-a", s(&b), "--level", "raid4", "--size", "max"]);
    assert!(e.contains("cannot be used with"), "{e}");
    let text = ok(&["grow", "-a", s(&b), "--level", "raid4", "--members", "4"]);
    assert!(text.starts_with("level changed from raid0 to raid4, 4 members; member(s) [3] added and rebuilt\nrebuilt member(s) [3]"), "{text}");
    assert!(ok(&["scrub", "-a", s(&b)]).contains("all consistent"));
    ok(&["fail", "-a", s(&b), "--member", "1"]);
    assert_reads(t.path(), &b, &data);
}

#[test]
fn a_served_raid0_takes_its_parity_member_under_a_client() {
    let t = tempfile::tempdir().unwrap();
    let a = t.path().join("arr");
    ok(&["create", "-a", s(&a), "--level", "raid0", "--members", "3", "--member-size", "8M"]);
    let srv = Serve::start(s(&a), &["--quiet"]);
    let uri = format!("nbd://127.0.0.1:{}/mosaic", srv.port);
    let data = pattern(12 << 20, 3);
    let src = t.path().join("src");
    std::fs::write(&src, &data).unwrap();
    let copy = |from: &str, to: &str| {
        let o = std::process::Command::new("nbdcopy").args([from, to]).output().expect("nbdcopy (libnbd-bin)");
        assert!(o.status.success(), "nbdcopy {from} {to}: {}", String::from_utf8_lossy(&o.stderr));
    };
    copy(s(&src), &uri);
    // A client keeps writing while the level changes and the parity is built.
    let writer = {
        let (src, uri) = (src.clone(), uri.clone());
        std::thread::spawn(move || {
            for _ in 0..3 {
                let o = std::process::Command::new("nbdcopy").args([s(&src), &uri]).output().unwrap();
                assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
            }
        })
    };
    let text = ok(&["grow", "-a", s(&a), "--level", "raid4", "--members", "4"]);
    assert!(text.contains("level changed from raid0 to raid4, 4 members") && text.contains("rebuilt member(s) [3]"), "{text}");
    writer.join().unwrap();
    let st = json(&ok(&["status", "-a", s(&a), "--json"]))[0].clone();
    assert_eq!((st["level"].as_str(), st["health"].as_str(), st["members"].as_array().map(Vec::len)), (Some("raid4"), Some("healthy"), Some(4)), "{st}");
    // The parity is real: a data member fails under the server, the bytes stay.
    ok(&["fail", "-a", s(&a), "--member", "0"]);
    let back = t.path().join("back");
    copy(&uri, s(&back));
    assert!(std::fs::read(&back).unwrap()[..data.len()] == data[..], "read back degraded, through the server");
    let (code, _) = srv.stop();
    assert_eq!(code, 0);
}

#[test]
fn raid4_drops_its_parity_member_and_a_mirror_its_last_copies() {
    let t = tempfile::tempdir().unwrap();
    let b = t.path().join("striped");
    ok(&["create", "-a", s(&b), "--level", "raid0", "--members", "2", "--member-size", "4M"]);
    let data = pattern(6 << 20, 4);
    write_read(t.path(), &b, &data);
    ok(&["grow", "-a", s(&b), "--level", "raid4", "--members", "3"]);
    let e = fails(&["grow", "-a", s(&b), "--level", "raid5"]);
    assert!(e.contains("raid4 to raid5 moves data"), "{e}");
    let text = ok(&["grow", "-a", s(&b), "--level", "raid0"]);
    assert!(text.starts_with("level changed from raid4 to raid0, 2 members; dropped ") && text.contains("member-02.img (label erased: free for any array)"), "{text}");
    assert_reads(t.path(), &b, &data);
    let e = String::from_utf8_lossy(&common::mosaic(&["examine", s(&b.join("member-02.img"))]).stderr).to_string();
    assert!(e.contains("nothing of mosaic's"), "{e}");
    // A 3-way mirror keeps two copies.
    let m = t.path().join("mirror");
    ok(&["create", "-a", s(&m), "--level", "raid1", "--members", "3", "--member-size", "4M"]);
    let data = pattern(3 << 20, 5);
    write_read(t.path(), &m, &data);
    let rep = json(&ok(&["grow", "-a", s(&m), "--level", "raid1", "--members", "2", "--json"]));
    assert_eq!((rep["takeover"]["members"].as_u64(), rep["takeover"]["dropped"].as_array().map(Vec::len)), (Some(2), Some(1)), "{rep}");
    ok(&["fail", "-a", s(&m), "--member", "0"]);
    assert_reads(t.path(), &m, &data);
}
