//! `mosaic write-mostly` and `create --write-mostly` (mdadm's
//! `--write-mostly`): which mirror members are read only when no other
//! copy serves, set offline or through the server, shown by `info` and
//! `status`, refused where it means nothing.

use std::path::Path;

use crate::common;
use common::{fails, json, ok};

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// The write-mostly flags `info --json` shows, member by member.
fn flags(a: &str) -> Vec<bool> {
    let info = json(&ok(&["info", "-a", a, "--json"]));
    info["member_list"].as_array().unwrap().iter().map(|m| m["write_mostly"] == true).collect()
}

#[test]
fn write_mostly_members_are_set_shown_and_refused_where_they_mean_nothing() {
    let t = tempfile::tempdir().unwrap();
    let a = t.path().join("mirror");
    ok(&["create", "-a", s(&a), "--level", "raid1", "--members", "3", "--member-size", "8M", "--write-mostly", "2"]);
    assert_eq!(flags(s(&a)), [false, false, true]);
    assert!(ok(&["status", "-a", s(&a)]).lines().any(|l| l.contains("member-02.img") && l.ends_with("(write-mostly)")));
    assert!(ok(&["info", "-a", s(&a)]).lines().any(|l| l.ends_with("member-02.img (write-mostly)")));
    let e = fails(&["write-mostly", "-a", s(&a), "--member", "0,1,2"]);
    assert!(e.contains("every member of the mirror would be write-mostly: at least one must take its reads"), "{e}");
    let e = fails(&["write-mostly", "-a", s(&a)]);
    assert!(e.contains("--member <N>") || e.contains("required"), "{e}");
    assert_eq!(ok(&["write-mostly", "-a", s(&a), "--member", "1"]), "write-mostly members [1]: read only when no other copy serves\n");
    assert_eq!(flags(s(&a)), [false, true, false]);
    // Through the server: the reads move at once, the flag is kept.
    let srv = common::serve::Serve::start(s(&a), &["--quiet"]);
    let out = json(&ok(&["write-mostly", "-a", s(&a), "--member", "0", "--json"]));
    assert_eq!((out["write_mostly"].clone(), out["served"].clone()), (serde_json::json!([0]), serde_json::json!(true)), "{out}");
    assert_eq!(ok(&["write-mostly", "-a", s(&a), "--none"]), "no member is write-mostly: reads spread over every copy\n");
    ok(&["write-mostly", "-a", s(&a), "--member", "0"]);
    srv.stop();
    assert_eq!(flags(s(&a)), [true, false, false]);
    // Where every member holds data reads need, the flag is refused, and a
    // refused create leaves nothing behind.
    let r5 = t.path().join("r5");
    let e = fails(&["create", "-a", s(&r5), "--level", "raid5", "--members", "3", "--member-size", "8M", "--write-mostly", "1"]);
    assert!(e.contains("write-mostly members are for mirrors (raid1), not raid5"), "{e}");
    assert!(!r5.exists(), "the refused create left {}", r5.display());
    // The simulator takes the flag too (a slot named twice is one).
    let sim = json(&ok(&["replay", "--layout", "raid1", "--drives", "2", "--synthetic", "randread", "--count", "200", "--write-mostly", "1,1", "--json"]));
    let reads: Vec<u64> = sim["devices"].as_array().unwrap().iter().map(|d| d["reads"].as_u64().unwrap()).collect();
    assert_eq!(reads, [200, 0], "{sim}");
    let e = fails(&["replay", "--layout", "raid5", "--drives", "4", "--synthetic", "randread", "--count", "10", "--write-mostly", "1"]);
    assert!(e.contains("write-mostly members are for mirrors (raid1), not raid5"), "{e}");
}

/// Kinds with no mirror copies to choose between, and a real replay
/// (whose array has its own flags), refuse `--write-mostly` and `grow
/// --size` with a message that says so.
#[test]
fn kinds_without_mirrors_refuse_write_mostly_and_grow_size() {
    let t = tempfile::tempdir().unwrap();
    let d = t.path().join("dvs");
    ok(&["create", "-a", s(&d), "--level", "dvs", "--members", "5", "--member-size", "64M", "--zoned", "--stripe-unit", "64K", "--zone-size", "8M"]);
    let e = fails(&["grow", "-a", s(&d), "--size", "max"]);
    assert!(e.contains("a dvs array cannot grow in size: grow --size works on fixed raid0, raid1, raid4, raid5, raid6 and rs arrays"), "{e}");
    let e = fails(&["write-mostly", "-a", s(&d), "--member", "1"]);
    assert!(e.contains("a dvs array has no write-mostly members: they are for fixed raid1 (mirror) arrays"), "{e}");
    let d2 = t.path().join("dvs2");
    let e = fails(&["create", "-a", s(&d2), "--level", "dvs", "--members", "5", "--member-size", "64M", "--zoned", "--zone-size", "8M", "--write-mostly", "1"]);
    assert!(e.contains("--write-mostly is for raid1 (mirror) arrays, not dvs"), "{e}");
    let e = fails(&["replay", "--layout", "dvs", "--drives", "5", "--synthetic", "randwrite", "--count", "10", "--write-mostly", "1"]);
    assert!(e.contains("--write-mostly is for raid1 (mirror) layouts, not dvs"), "{e}");
    let m = t.path().join("mirror");
    ok(&["create", "-a", s(&m), "--level", "raid1", "--members", "2", "--member-size", "8M"]);
    let e = fails(&["replay", "--on", s(&m), "--synthetic", "randread", "--count", "10", "--write-mostly", "1"]);
    assert!(e.contains("--on replays on a real array, whose write-mostly members are its own (mosaic write-mostly)"), "{e}");
}
