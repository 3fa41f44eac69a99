//! A DVS directory array keeps the devices the user gives where the user
//! put them, as md and the fixed levels do: a replacement drive and a hot
//! spare in another directory stay there (the directory records their
//! paths), the array reads back its bytes at every later open, a spare is
//! removed by the path it was added with, and a copy of the directory
//! does not take its original's devices.

use std::fs;
use std::path::Path;

use crate::common;
use common::fio::{status, wait_status};
use common::{json, mosaic, ok};

/// The zoned files directly in `dir`, sorted.
fn zoned_in(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).filter(|n| n.contains(".zoned")).collect();
    v.sort();
    v
}

#[test]
fn a_dvs_array_keeps_its_replacement_and_spares_where_the_user_put_them() {
    let t = tempfile::tempdir().unwrap();
    let (arr, other) = (t.path().join("dvs"), t.path().join("otherdisk"));
    fs::create_dir(&other).unwrap();
    let a = arr.to_str().unwrap();
    let p = |n: &str| other.join(n).to_str().unwrap().to_string();
    ok(&["create", "-a", a, "--level", "dvs", "--members", "5", "--member-size", "16M", "--zoned", "--stripe-unit", "64K", "--zone-size", "1M"]);
    let data: Vec<u8> = (0..(3u32 << 19)).map(|i| (i.wrapping_mul(2654435761) >> 13) as u8).collect();
    let input = t.path().join("in.bin");
    fs::write(&input, &data).unwrap();
    ok(&["write", "-a", a, "--offset", "64K", "--input", input.to_str().unwrap()]);
    let out = t.path().join("out.bin");
    let reads_back = |what: &str| {
        ok(&["read", "-a", a, "--offset", "64K", "--length", &data.len().to_string(), "--output", out.to_str().unwrap()]);
        assert!(fs::read(&out).unwrap() == data, "{what}: the bytes differ");
    };

    // Replace: the new drive stays in the other directory; the failed
    // member's own file is kept aside in the array's.
    ok(&["fail", "-a", a, "--member", "3"]);
    let r = ok(&["replace", "-a", a, "--member", "3", "--drive", &p("new3.zoned")]);
    assert!(r.contains("rebuilt member(s) [3]"), "{r}");
    assert!(other.join("new3.zoned").exists(), "the new drive was moved");
    assert_eq!(zoned_in(&arr), ["dvs-0.zoned", "dvs-1.zoned", "dvs-2.zoned", "dvs-3.zoned.replaced", "dvs-4.zoned"]);
    let (code, s) = status(a);
    assert_eq!((code, s["members"][3]["path"].as_str()), (0, Some(p("new3.zoned").as_str())), "found at the next open: {s}");
    reads_back("after the replace");

    // A copy of the directory does not take the original's devices
    // outside it: it is degraded, and says why.
    let copy = t.path().join("copy");
    assert!(std::process::Command::new("cp").args(["-a", a, copy.to_str().unwrap()]).status().unwrap().success());
    let o = mosaic(&["status", "-a", copy.to_str().unwrap(), "--json"]);
    let s = json(&String::from_utf8_lossy(&o.stdout));
    let present: Vec<bool> = s[0]["members"].as_array().unwrap().iter().map(|m| m["present"].as_bool().unwrap()).collect();
    assert_eq!(present, [true, true, true, false, true], "{s}");
    let o = mosaic(&["info", "-a", copy.to_str().unwrap()]);
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(e.contains(&format!("{} is outside this directory", p("new3.zoned"))) && e.contains("this directory is a copy of it, so it is not used"), "{e}");
    // The scan of the copy says so too, with the copy's array.
    let scan = ok(&["assemble", "--scan", copy.to_str().unwrap()]);
    assert!(scan.contains(&format!("  warning: {} is outside this directory", p("new3.zoned"))), "{scan}");
    let found = json(&ok(&["assemble", "--scan", copy.to_str().unwrap(), "--json"]));
    assert!(found[0]["array"]["warnings"][0].as_str().is_some_and(|w| w.contains("so it is not used")), "{found}");
    assert_eq!(status(a).0, 0, "the original is whole");
    reads_back("the original, after its copy was opened");

    // A spare there stays there and is removed by the path it was added with.
    let added = ok(&["add", "-a", a, "--spare", &p("spare.zoned")]);
    assert!(added.contains("is a hot spare"), "{added}");
    assert_eq!(status(a).1["spares"], serde_json::json!([p("spare.zoned")]), "found at the next open");
    assert!(other.join("spare.zoned").exists() && !zoned_in(&arr).iter().any(|n| n.contains("spare")), "{:?}", zoned_in(&arr));
    let r = json(&ok(&["remove", "-a", a, "--spare", &p("spare.zoned"), "--json"]));
    assert_eq!(r["removed"][0]["now"].as_str(), Some(p("spare.zoned").as_str()), "{r}");
    assert!(other.join("spare.zoned").exists(), "the removed spare's file stays where it was");
    let o = mosaic(&["status", "-a", a, "--json"]);
    let s = json(&String::from_utf8_lossy(&o.stdout));
    assert_eq!((o.status.code(), s[0]["spares"].as_array().map(Vec::len)), (Some(0), Some(0)), "{s}");
    assert!(!String::from_utf8_lossy(&o.stderr).contains("warning"), "{}", String::from_utf8_lossy(&o.stderr));
    let e = ok(&["examine", &p("spare.zoned")]);
    assert!(e.contains("emulated zoned drive") && !e.contains("array"), "its label erased: {e}");
    reads_back("after the spare came and went");

    // A spare that takes a failed member's place online serves it from
    // where it is.
    ok(&["add", "-a", a, "--spare", &p("spare2.zoned")]);
    let srv = common::serve::Serve::start(a, &["--quiet"]);
    ok(&["fail", "-a", a, "--member", "1"]);
    let s = wait_status(a, 60, "the spare rebuilt", |s| s["health"] == "healthy" && s["maintenance"].is_null());
    assert_eq!(s["members"][1]["path"].as_str(), Some(p("spare2.zoned").as_str()), "{s}");
    srv.stop();
    assert!(other.join("spare2.zoned").exists());
    assert_eq!(zoned_in(&arr), ["dvs-0.zoned", "dvs-1.zoned.replaced", "dvs-2.zoned", "dvs-3.zoned.replaced", "dvs-4.zoned"]);
    let (code, s) = status(a);
    assert_eq!((code, s["members"][1]["path"].as_str()), (0, Some(p("spare2.zoned").as_str())), "{s}");
    reads_back("on the former spare, reopened");
    let s = json(&ok(&["scrub", "-a", a, "--json"]));
    assert_eq!(s["mismatched"], 0, "{s}");

    // A former member, kept aside, is taken back as a spare without
    // --force: the labels list the identities they replaced.
    let former = arr.join("dvs-3.zoned.replaced");
    let added = ok(&["add", "-a", a, "--spare", former.to_str().unwrap()]);
    assert!(added.contains("is a hot spare"), "{added}");
    let (code, s) = status(a);
    assert_eq!((code, s["spares"].as_array().map(Vec::len)), (0, Some(1)), "{s}");
    reads_back("with a former member as a spare");
}
