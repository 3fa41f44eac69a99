//! The array commands through `mosaic_volume`: the same write / read /
//! info / fail / replace / scrub for a raid5 and a DVS array, bytes checked.

use std::fs;
use std::path::Path;

use crate::common;
use common::{fails, json, mosaic, ok};

fn data(len: usize, seed: u32) -> Vec<u8> {
    (0..len as u32).map(|i| (i.wrapping_mul(2246822519).wrapping_add(seed) >> 11) as u8).collect()
}

fn read_back(spec: &str, off: &str, len: usize, out: &Path) -> Vec<u8> {
    ok(&["read", "-a", spec, "--offset", off, "--length", &len.to_string(), "--output", out.to_str().unwrap()]);
    fs::read(out).unwrap()
}

fn state(info: &serde_json::Value, m: usize) -> String {
    info["volume"]["members"][m]["state"]["state"].as_str().unwrap().to_string()
}

#[test]
fn raid5_through_the_volume_interface() {
    let t = tempfile::tempdir().unwrap();
    let a = t.path().join("r5");
    let ad = a.to_str().unwrap();
    ok(&["create", "-a", ad, "--level", "raid5", "--members", "4", "--member-size", "4M", "--stripe-unit", "16K"]);
    let bytes = data(600 << 10, 1);
    let input = t.path().join("in.bin");
    fs::write(&input, &bytes).unwrap();
    let w = json(&ok(&["write", "-a", ad, "--offset", "64K", "--input", input.to_str().unwrap(), "--json"]));
    assert!(w["device_writes"].as_u64().unwrap() > 0 && w["ops"].is_object(), "{w}");
    let out = t.path().join("out.bin");
    assert!(read_back(ad, "64K", bytes.len(), &out) == bytes, "read differs");

    let info = json(&ok(&["info", "-a", ad, "--json"]));
    assert_eq!(info["kind"], "fixed");
    assert_eq!(info["level"], "raid5");
    assert_eq!(info["member_list"].as_array().unwrap().len(), 4);
    assert_eq!(info["volume"]["members"].as_array().unwrap().len(), 4);
    assert_eq!(info["volume"]["degraded"], false);
    let human = ok(&["info", "-a", ad]);
    assert!(human.contains("level      raid5 (3 data + 1 code columns)") && human.contains("active"), "{human}");

    ok(&["fail", "-a", ad, "--member", "1"]);
    let info = json(&ok(&["info", "-a", ad, "--json"]));
    assert_eq!(state(&info, 1), "failed", "{info}");
    assert_eq!(info["volume"]["degraded"], true);
    assert!(read_back(ad, "64K", bytes.len(), &out) == bytes, "degraded read differs");
    let e = fails(&["fail", "-a", ad, "--member", "2"]);
    assert!(e.contains("data would be lost"), "{e}");

    let r = ok(&["replace", "-a", ad, "--member", "1", "--drive", t.path().join("new1.img").to_str().unwrap()]);
    assert!(r.contains("rebuilt member(s) [1]"), "{r}");
    let info = json(&ok(&["info", "-a", ad, "--json"]));
    assert_eq!(info["volume"]["degraded"], false, "{info}");
    assert!(read_back(ad, "64K", bytes.len(), &out) == bytes, "read after rebuild differs");
    let s = ok(&["scrub", "-a", ad]);
    assert!(s.contains("all consistent"), "{s}");
}

#[test]
fn dvs_through_the_volume_interface() {
    let t = tempfile::tempdir().unwrap();
    let d = t.path().join("dvs");
    let ds = d.to_str().unwrap();
    ok(&[
        "create",
        "-a",
        ds,
        "--level",
        "dvs",
        "--members",
        "5",
        "--member-size",
        "64M",
        "--zoned",
        "--stripe-unit",
        "64K",
        "--zone-size",
        "8M",
        "--dvs-cache",
        "1M",
    ]);
    let bytes = data(3 << 20, 2);
    let input = t.path().join("in.bin");
    fs::write(&input, &bytes).unwrap();
    let w = json(&ok(&["write", "-a", ds, "--offset", "128K", "--input", input.to_str().unwrap(), "--json"]));
    assert!(w["device_writes"].as_u64().unwrap() > 0 && w["bytes"] == 3 << 20, "{w}");
    let out = t.path().join("out.bin");
    assert!(read_back(ds, "128K", bytes.len(), &out) == bytes, "read differs");

    let info = json(&ok(&["info", "-a", ds, "--json"]));
    assert_eq!(info["kind"], "dvs");
    assert_eq!(info["volume"]["level"], "dvs");
    assert_eq!(info["volume"]["members"].as_array().unwrap().len(), 5);
    assert!((0..5).all(|m| state(&info, m) == "active"), "{info}");
    assert!(info["ssgs"].as_u64().unwrap() > 0, "the DVS info is kept: {info}");
    let human = ok(&["info", "-a", ds]);
    assert!(human.contains("dvs array") && human.contains("SSGs") && human.contains("active"), "{human}");

    // `fail` is recorded: member 1's file is still there, but it stays
    // failed (its label's event counter is behind: stale, not used); a
    // second failure is refused (k = 1).
    ok(&["fail", "-a", ds, "--member", "1"]);
    let info = json(&ok(&["info", "-a", ds, "--json"]));
    assert_eq!(state(&info, 1), "failed", "{info}");
    assert_eq!(info["volume"]["members"][1]["present"], false);
    let e = fails(&["fail", "-a", ds, "--member", "2"]);
    assert!(e.contains("data would be lost"), "{e}");
    assert!(read_back(ds, "128K", bytes.len(), &out) == bytes, "degraded read differs");
    let r = ok(&["replace", "-a", ds, "--member", "1", "--drive", t.path().join("new1.zoned").to_str().unwrap()]);
    assert!(r.contains("rebuilt member(s) [1]"), "{r}");
    // A member lost: the array opens degraded and reads reconstruct.
    fs::rename(d.join("dvs-2.zoned"), t.path().join("lost.zoned")).unwrap();
    let info = json(&ok(&["info", "-a", ds, "--json"]));
    assert_eq!(state(&info, 2), "failed", "{info}");
    assert_eq!(info["volume"]["members"][2]["present"], false);
    assert_eq!(info["volume"]["degraded"], true);
    assert!(read_back(ds, "128K", bytes.len(), &out) == bytes, "degraded read differs");
    let e = fails(&["rebuild", "-a", ds]);
    assert!(e.contains("nothing to rebuild") && e.contains("[2]"), "{e}");

    // Replace: the new drive is created and rebuilt where it is given.
    let new = t.path().join("new.zoned");
    let r = ok(&["replace", "-a", ds, "--member", "2", "--drive", new.to_str().unwrap()]);
    assert!(r.contains("rebuilt member(s) [2]"), "{r}");
    assert!(new.exists() && !d.join("dvs-2.zoned").exists());
    let info = json(&ok(&["info", "-a", ds, "--json"]));
    assert_eq!(info["volume"]["degraded"], false, "{info}");
    assert!(read_back(ds, "128K", bytes.len(), &out) == bytes, "read after replace differs");
    let s = ok(&["scrub", "-a", ds]);
    assert!(s.contains("0 stripes with mismatched parity"), "{s}");
    let s = json(&ok(&["scrub", "-a", ds, "--json"]));
    assert!(s["stripes_checked"].as_u64().unwrap() > 0 && s["mismatched"] == 0, "{s}");
    let s = ok(&["scrub", "-a", ds, "--repair"]);
    assert!(s.contains("0 stripes with mismatched parity"), "{s}");
    let e = fails(&["rebuild", "-a", ds]);
    assert!(e.contains("nothing to rebuild"), "{e}");
}

#[test]
fn bad_input_is_refused_clearly_for_every_kind() {
    let t = tempfile::tempdir().unwrap();
    let r = t.path().join("r5");
    ok(&["create", "-a", r.to_str().unwrap(), "--level", "raid5", "--members", "4", "--member-size", "4M", "--stripe-unit", "16K"]);
    let d = t.path().join("dvs");
    ok(&[
        "create",
        "-a",
        d.to_str().unwrap(),
        "--level",
        "dvs",
        "--members",
        "4",
        "--member-size",
        "32M",
        "--zoned",
        "--stripe-unit",
        "64K",
        "--zone-size",
        "4M",
    ]);
    let page = t.path().join("page.bin");
    fs::write(&page, vec![5u8; 4096]).unwrap();
    for spec in [r.to_str().unwrap(), d.to_str().unwrap()] {
        let e = fails(&["write", "-a", spec, "--offset", "1T", "--input", page.to_str().unwrap()]);
        assert!(e.contains("beyond the array capacity"), "{e}");
        let e = fails(&["read", "-a", spec, "--offset", "0", "--length", "1T", "--output", t.path().join("o").to_str().unwrap()]);
        assert!(e.contains("beyond the array capacity"), "{e}");
        let e = fails(&["replace", "-a", spec, "--member", "9", "--drive", t.path().join("x").to_str().unwrap()]);
        assert!(e.contains("no member 9"), "{e}");
        assert!(!t.path().join("x").exists(), "a refused replace left a drive file");
    }
    // Replacing with another member of the same array is refused.
    let e = fails(&["replace", "-a", d.to_str().unwrap(), "--member", "0", "--drive", d.join("dvs-1.zoned").to_str().unwrap()]);
    assert!(e.contains("is member 1 of this array"), "{e}");
    let e = fails(&["info", "-a", t.path().join("none").to_str().unwrap()]);
    assert!(!e.is_empty());
    let o = mosaic(&["serve", "-a", d.to_str().unwrap(), "--cache", "ppc", "--socket", t.path().join("s").to_str().unwrap()]);
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success() && e.contains("DVS array has its own write cache"), "{e}");
}
