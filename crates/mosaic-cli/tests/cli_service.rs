//! A served array under a real client (fio over NBD, verifying every
//! block with crc32c): a member fails and a hot spare takes over and is
//! rebuilt online; an online `scrub --repair` under load; a grow from 4 to
//! 6 members killed with SIGKILL mid-restripe and resumed.  `status
//! --json` is checked at each stage, and `--on-event` hears the failure.

use crate::common;
use common::fio::{fio, passed, status, wait_status};
use common::{fails, json, mosaic, ok};

use std::process::{Command, Stdio};
use std::time::Duration;

#[test]
fn a_hot_spare_takes_over_and_is_rebuilt_online_under_fio_verify() {
    let t = tempfile::tempdir().unwrap();
    let arr = t.path().join("arr");
    let a = arr.to_str().unwrap();
    let spare = t.path().join("spare.img");
    ok(&["create", "-a", a, "--level", "raid5", "--members", "4", "--member-size", "24M", "--spare", spare.to_str().unwrap()]);
    let log = t.path().join("events.log");
    let on_event = format!("echo \"$MOSAIC_EVENT ${{MOSAIC_MEMBER:-}}\" >> {}", log.display());
    let srv = common::serve::Serve::start(a, &["--quiet", "--on-event", &on_event, "--maint-rate", "16M"]);
    // Stage 1: healthy, one spare ready.
    let (code, s) = status(a);
    assert_eq!((code, s["health"].as_str()), (0, Some("healthy")), "{s}");
    assert_eq!(s["spares"].as_array().map(|v| v.len()), Some(1), "{s}");
    assert!(s["journal"]["capacity"].as_u64().unwrap() > 0, "journal fill is shown: {s}");
    // fio writes 40 MiB at random and verifies every block, while a member fails.
    let job = fio(t.path(), srv.port, "spare", &["--rw=randwrite", "--size=40M", "--rate_iops=4000"]).spawn().unwrap();
    std::thread::sleep(Duration::from_millis(800));
    assert!(ok(&["fail", "-a", a, "--member", "2"]).contains("marked failed"));
    // Stage 2: the spare took member 2's place and is rebuilt while fio runs.
    let s = wait_status(a, 120, "the spare rebuilt", |s| s["health"] == "healthy" && s["maintenance"].is_null());
    assert_eq!(s["spares"].as_array().map(|v| v.len()), Some(0), "the spare is used: {s}");
    assert_eq!(s["members"][2]["path"].as_str().map(|p| p.ends_with("spare.img")), Some(true), "member 2 is the spare now: {s}");
    let kinds: Vec<&str> = s["events"].as_array().unwrap().iter().filter_map(|e| e["kind"].as_str()).collect();
    for k in ["member-failed", "spare-takeover", "rebuild-start", "rebuild-end"] {
        assert!(kinds.contains(&k), "status lists the {k} event: {kinds:?}");
    }
    passed(job, "randwrite + verify through a failure and an online rebuild");
    // Stage 3: the clients' counts are in status, with rates.
    let (_, s) = status(a);
    assert!(s["clients"]["writes"].as_u64().unwrap() >= 10240, "40 MiB of 4 KiB writes counted: {s}");
    assert!(s["client_rates"]["write_ops_per_s"].as_f64().unwrap() > 0.0, "{s}");
    let text = ok(&["status", "-a", a]);
    assert!(text.contains("spare-takeover") && text.contains("journal") && text.contains("errors(r/w/cksum)"), "{text}");
    let (code, _) = srv.stop();
    assert_eq!(code, 0);
    let events = std::fs::read_to_string(&log).unwrap();
    assert!(events.lines().any(|l| l == "member-failed 2"), "--on-event heard the failure: {events}");
    assert!(events.lines().any(|l| l == "spare-takeover 2"), "{events}");
    // Offline: every stripe consistent, the spare is member 2 for good.
    assert!(ok(&["scrub", "-a", a]).contains("all consistent"));
    let info = json(&ok(&["info", "-a", a, "--json"]));
    assert!(info["member_list"][2]["path"].as_str().unwrap().ends_with("spare.img"), "{info}");
}

#[test]
fn an_online_scrub_repairs_under_load() {
    let t = tempfile::tempdir().unwrap();
    let arr = t.path().join("arr");
    let a = arr.to_str().unwrap();
    ok(&["create", "-a", a, "--level", "raid6", "--members", "5", "--member-size", "16M"]);
    // Known bytes past what fio touches, then one member's unit there damaged.
    let pattern: Vec<u8> = (0..8u32 << 20).map(|i| (i.wrapping_mul(2654435761) >> 13) as u8).collect();
    let input = t.path().join("pattern.bin");
    std::fs::write(&input, &pattern).unwrap();
    ok(&["write", "-a", a, "--offset", "32M", "--input", input.to_str().unwrap()]);
    let m1 = arr.join("member-01.img");
    let f = std::fs::OpenOptions::new().write(true).open(&m1).unwrap();
    std::os::unix::fs::FileExt::write_all_at(&f, &[0xa5; 4096], (1 << 20) + (12 << 20)).unwrap();
    drop(f);
    let srv = common::serve::Serve::start(a, &["--quiet", "--maint-rate", "32M"]);
    let job = fio(t.path(), srv.port, "scrub", &["--rw=randrw", "--size=24M", "--rate_iops=3000"]).spawn().unwrap();
    std::thread::sleep(Duration::from_millis(500));
    let rep = json(&ok(&["scrub", "-a", a, "--repair", "--json"]));
    assert!(rep["mismatched"].as_u64().unwrap() >= 1, "the damage is found: {rep}");
    assert!(rep["findings"].as_array().unwrap().iter().any(|f| f["member"] == 1), "and located on member 1: {rep}");
    passed(job, "randrw + verify during an online scrub --repair");
    let (_, s) = status(a);
    assert!(s["members"][1]["errors"]["checksum"].as_u64().unwrap() >= 1, "status counts the checksum error: {s}");
    let rep = json(&ok(&["scrub", "-a", a, "--json"]));
    assert_eq!(rep["mismatched"], 0, "repaired: {rep}");
    srv.stop();
    let out = t.path().join("back.bin");
    ok(&["read", "-a", a, "--offset", "32M", "--length", "8M", "--output", out.to_str().unwrap()]);
    assert!(std::fs::read(&out).unwrap() == pattern, "the damaged unit was rewritten from the others");
}

#[test]
fn a_grow_killed_mid_restripe_resumes_and_loses_nothing() {
    let t = tempfile::tempdir().unwrap();
    let arr = t.path().join("arr");
    let a = arr.to_str().unwrap();
    ok(&["create", "-a", a, "--level", "raid5", "--members", "4", "--member-size", "24M"]);
    let srv = common::serve::Serve::start(a, &["--quiet", "--maint-rate", "6M"]);
    // Region A, written and verified before the grow.
    let region_a = ["--rw=write", "--size=30M", "--offset=0"];
    let first = fio(t.path(), srv.port, "a", &region_a).spawn().unwrap();
    passed(first, "region A before the grow");
    // The grow runs through the server; fio writes and verifies region B meanwhile.
    let grow = Command::new(env!("CARGO_BIN_EXE_mosaic")).args(["grow", "-a", a, "--members", "6"]).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    let s = wait_status(a, 60, "the grow started", |s| s["maintenance"]["what"] == "grow");
    assert_eq!(s["health"], "healthy", "{s}");
    let region_b = ["--rw=randwrite", "--size=8M", "--offset=34M"];
    passed(fio(t.path(), srv.port, "b", &region_b).spawn().unwrap(), "region B during the grow");
    let s = wait_status(a, 120, "the restripe under way", |s| {
        let g = &s["grow"];
        g["done_stripes"].as_u64().unwrap_or(0) * 5 >= g["total_stripes"].as_u64().unwrap_or(u64::MAX)
    });
    let done = s["grow"]["done_stripes"].as_u64().unwrap();
    assert!(done < s["grow"]["total_stripes"].as_u64().unwrap(), "killed mid-restripe: {s}");
    // kill -9: no flush, no close.
    let mut srv = srv;
    srv.child.kill().unwrap();
    srv.child.wait().unwrap();
    let _ = grow.wait_with_output();
    // Offline the array opens mid-grow and says so.
    let info = json(&ok(&["info", "-a", a, "--json"]));
    assert!(info["grow"]["done_stripes"].as_u64().unwrap() >= done, "{info}");
    // The same grow asked again points to the one that stopped.
    let e = fails(&["grow", "-a", a, "--members", "6"]);
    assert!(e.contains("a grow to 6 members stopped before it ended; resume it with mosaic grow -a"), "{e}");
    // Served again, the grow resumes by itself and ends.
    let srv = common::serve::Serve::start(a, &["--quiet", "--maint-rate", "0"]);
    let s = wait_status(a, 120, "the resumed grow done", |s| s["grow"].is_null() && s["maintenance"].is_null());
    assert_eq!((s["health"].as_str(), s["members"].as_array().unwrap().len()), (Some("healthy"), 6), "{s}");
    assert_eq!(s["capacity"], 5 * 23 * 1024 * 1024, "capacity of 6 members: {s}");
    let kinds: Vec<&str> = s["events"].as_array().unwrap().iter().filter_map(|e| e["kind"].as_str()).collect();
    assert!(kinds.contains(&"grow-end"), "{kinds:?}");
    // Both regions verify after the kill and the resume; the new space takes writes.
    passed(fio(t.path(), srv.port, "a", &[&region_a[..], &["--verify_only"]].concat()).spawn().unwrap(), "region A after the resume");
    passed(fio(t.path(), srv.port, "b", &[&region_b[..], &["--verify_only"]].concat()).spawn().unwrap(), "region B after the resume");
    passed(fio(t.path(), srv.port, "c", &["--rw=write", "--size=20M", "--offset=90M"]).spawn().unwrap(), "the new space");
    srv.stop();
    assert!(ok(&["scrub", "-a", a]).contains("all consistent"));
}

#[test]
fn tier_remapped_and_cached_arrays_take_spares() {
    let t = tempfile::tempdir().unwrap();
    let tier = t.path().join("tier");
    let remap = t.path().join("remap");
    let (ta, ra) = (tier.to_str().unwrap(), remap.to_str().unwrap());
    ok(&["create", "-a", ta, "--level", "tier", "--fast", "raid1:2", "--slow", "raid5:4", "--fast-size", "16M", "--slow-size", "16M"]);
    ok(&["create", "-a", ra, "--level", "remap", "--inner", "raid5:4", "--member-size", "16M", "--journal-size", "8M"]);
    // A tier's spare names its side.
    let bare = t.path().join("bare.img");
    let e = common::fails(&["add", "-a", ta, "--spare", bare.to_str().unwrap()]);
    assert!(e.contains("fast:") && e.contains("slow:"), "{e}");
    let slow_spare = format!("slow:{}", t.path().join("slow-spare.img").display());
    ok(&["add", "-a", ta, "--spare", &slow_spare]);
    let added = json(&ok(&["add", "-a", ra, "--spare", t.path().join("remap-spare.img").to_str().unwrap(), "--json"]));
    assert_eq!((added["served"].as_bool(), added["spares"][0].as_str()), (Some(false), t.path().join("remap-spare.img").to_str()), "{added}");
    assert_eq!(added["status"]["spares"].as_array().map(Vec::len), Some(1), "the status after: {added}");
    // A fixed array served behind the partial-parity cache: destaged first.
    let cached = t.path().join("cached");
    let ca = cached.to_str().unwrap();
    ok(&["create", "-a", ca, "--level", "raid5", "--members", "4", "--member-size", "16M", "--spare", t.path().join("cached-spare.img").to_str().unwrap()]);
    for (a, member, spare, extra) in [(ta, 3, "slow-spare.img", None), (ra, 1, "remap-spare.img", None), (ca, 2, "cached-spare.img", Some("ppc"))] {
        let mut args = vec!["--quiet"];
        if let Some(c) = extra {
            args.extend(["--cache", c]);
        }
        let srv = common::serve::Serve::start(a, &args);
        let (_, s) = status(a);
        assert_eq!(s["spares"].as_array().map(Vec::len), Some(1), "{a}: {s}");
        ok(&["fail", "-a", a, "--member", &member.to_string()]);
        let s = wait_status(a, 60, "the spare rebuilt", |s| s["health"] == "healthy" && s["maintenance"].is_null());
        assert!(s["members"][member]["path"].as_str().unwrap().ends_with(spare), "{a}: {s}");
        assert_eq!(s["spares"].as_array().map(Vec::len), Some(0), "{s}");
        srv.stop();
    }
}

#[test]
fn a_dvs_array_takes_a_hot_spare_online_and_keeps_its_bytes() {
    let t = tempfile::tempdir().unwrap();
    let arr = t.path().join("dvs");
    let a = arr.to_str().unwrap();
    let spare = t.path().join("first-spare.zoned");
    ok(&["create", "-a", a, "--level", "dvs", "--members", "5", "--member-size", "32M", "--zoned", "--stripe-unit", "64K", "--spare", spare.to_str().unwrap()]);
    // The spare stays where it was given; the next open finds it there.
    assert!(spare.exists() && arr.join(mosaic_dvs::files::PATHS_FILE).exists());
    let data: Vec<u8> = (0..3u32 << 20).map(|i| (i.wrapping_mul(2654435761) >> 13) as u8).collect();
    let input = t.path().join("data");
    std::fs::write(&input, &data).unwrap();
    ok(&["write", "-a", a, "--offset", "1M", "--input", input.to_str().unwrap()]);
    // A slow rebuild (8 MiB/s): status must answer while it runs, so the
    // rebuild cannot hold the array between its steps.
    let srv = common::serve::Serve::start(a, &["--quiet", "--maint-rate", "8M"]);
    // A second spare, added online.
    let added = json(&ok(&["add", "-a", a, "--spare", t.path().join("second-spare.zoned").to_str().unwrap(), "--json"]));
    assert_eq!(added["served"], true, "{added}");
    assert_eq!(added["status"]["spares"].as_array().map(Vec::len), Some(2), "the status after: {added}");
    let (_, s) = status(a);
    assert_eq!(s["spares"].as_array().map(Vec::len), Some(2), "{s}");
    ok(&["fail", "-a", a, "--member", "1"]);
    let s = wait_status(a, 60, "the rebuild running", |s| !s["maintenance"].is_null());
    assert_eq!(s["members"][1]["state"]["state"], "rebuilding", "{s}");
    let s = wait_status(a, 60, "the spare rebuilt", |s| s["health"] == "healthy" && s["maintenance"].is_null());
    assert!(s["members"][1]["path"].as_str().unwrap().ends_with("first-spare.zoned"), "{s}");
    assert_eq!(s["spares"].as_array().map(Vec::len), Some(1), "{s}");
    srv.stop();
    // The failed member's old file is kept aside; the array reads back.
    assert!(arr.join("dvs-1.zoned.replaced").exists());
    let out = t.path().join("back");
    ok(&["read", "-a", a, "--offset", "1M", "--length", "3M", "--output", out.to_str().unwrap()]);
    assert!(std::fs::read(&out).unwrap() == data, "bytes differ after the spare took over");
    let scrub = json(&ok(&["scrub", "-a", a, "--json"]));
    assert_eq!(scrub["mismatched"], 0, "{scrub}");
    // With member 1 on the former spare, another member can be lost.
    ok(&["fail", "-a", a, "--member", "3"]);
    ok(&["read", "-a", a, "--offset", "1M", "--length", "3M", "--output", out.to_str().unwrap()]);
    assert!(std::fs::read(&out).unwrap() == data, "bytes differ with member 3 failed");
}

/// `remove --spare`, as mdadm's `--remove` of a spare: on the disks and
/// through a server, on fixed, DVS and tier arrays.  The array stops
/// listing the spare, a failure afterwards does not take it, and its
/// label is erased, so another array takes it without `--force`.
#[test]
fn a_hot_spare_is_removed_offline_or_online_and_is_free_again() {
    let t = tempfile::tempdir().unwrap();
    let p = |n: &str| t.path().join(n).to_str().unwrap().to_string();
    let (a, s1, s2) = (p("arr"), p("s1.img"), p("s2.img"));
    ok(&["create", "-a", &a, "--level", "raid5", "--members", "4", "--member-size", "8M", "--spare", &s1, "--spare", &s2]);
    let e = common::fails(&["remove", "-a", &a, "--spare", &p("arr/member-00.img")]);
    assert!(e.contains("not a hot spare") && e.contains("s1.img") && e.contains("s2.img"), "{e}");
    // On the disks.
    let r = json(&ok(&["remove", "-a", &a, "--spare", &s1, "--json"]));
    assert_eq!((r["served"].as_bool(), r["removed"][0]["now"].as_str()), (Some(false), Some(s1.as_str())), "{r}");
    assert_eq!(r["status"]["spares"], serde_json::json!([s2]), "{r}");
    assert!(String::from_utf8_lossy(&mosaic(&["examine", &s1]).stderr).contains("nothing of mosaic's"));
    // Free again: another array takes it without --force.
    let other = p("other");
    ok(&["create", "-a", &other, "--level", "raid1", "--members", "2", "--member-size", "8M"]);
    ok(&["add", "-a", &other, "--spare", &s1]);
    // Through the server: the last spare goes, and a failure then stays degraded.
    let srv = common::serve::Serve::start(&a, &["--quiet"]);
    // All or nothing there too: a name that is not a spare removes none,
    // and a spare too small adds none (the good one is not even made).
    let e = common::fails(&["remove", "-a", &a, "--spare", &s2, "--spare", &p("arr/member-00.img")]);
    assert!(e.contains("member-00.img is not a hot spare"), "{e}");
    let small = p("small.img");
    std::fs::write(&small, vec![0u8; 1 << 20]).unwrap();
    let e = common::fails(&["add", "-a", &a, "--spare", &p("s3.img"), "--spare", &small]);
    assert!(e.contains("too small for a spare"), "{e}");
    assert!(!t.path().join("s3.img").exists(), "a refused add made its first spare");
    assert_eq!(status(&a).1["spares"], serde_json::json!([s2]), "nothing added or removed");
    let r = json(&ok(&["remove", "-a", &a, "--spare", &s2, "--json"]));
    assert_eq!(r["served"], true, "{r}");
    assert_eq!(r["status"]["spares"], serde_json::json!([]), "{r}");
    let kinds: Vec<&str> = r["status"]["events"].as_array().unwrap().iter().filter_map(|e| e["kind"].as_str()).collect();
    assert!(kinds.contains(&"spare-removed"), "{kinds:?}");
    ok(&["fail", "-a", &a, "--member", "1"]);
    let (code, s) = status(&a);
    assert_eq!((code, s["health"].as_str(), s["maintenance"].is_null()), (4, Some("degraded"), true), "no spare took over: {s}");
    srv.stop();
    assert!(!mosaic(&["examine", &s2]).status.success(), "the label is erased");
    ok(&["add", "-a", &other, "--spare", &s2]);
    assert_eq!(status(&other).1["spares"].as_array().map(Vec::len), Some(2));
    // A DVS directory array: a spare's file the directory names (as an
    // older mosaic moved spares in) is set aside, so the directory no
    // longer offers it, and the array opens clean.
    let d = p("dvs");
    ok(&["create", "-a", &d, "--level", "dvs", "--members", "5", "--member-size", "32M", "--zoned", "--stripe-unit", "64K"]);
    ok(&["add", "-a", &d, "--spare", &p("dvs/dvs-spare-0123abcd.zoned")]);
    let listed = status(&d).1["spares"][0].as_str().unwrap().to_string();
    assert!(listed.ends_with("dvs/dvs-spare-0123abcd.zoned") && !t.path().join("dvs").join(mosaic_dvs::files::PATHS_FILE).exists(), "named by the directory: {listed}");
    let srv = common::serve::Serve::start(&d, &["--quiet"]);
    let r = json(&ok(&["remove", "-a", &d, "--spare", &listed, "--json"]));
    srv.stop();
    let now = r["removed"][0]["now"].as_str().unwrap();
    assert_eq!((r["served"].as_bool(), now), (Some(true), format!("{listed}.removed").as_str()), "{r}");
    let o = mosaic(&["status", "-a", &d, "--json"]);
    let s = json(&String::from_utf8_lossy(&o.stdout));
    assert_eq!((o.status.code(), s[0]["spares"].as_array().map(Vec::len)), (Some(0), Some(0)), "{s}");
    assert!(!String::from_utf8_lossy(&o.stderr).contains("warning"), "{}", String::from_utf8_lossy(&o.stderr));
    let e = ok(&["examine", now]);
    assert!(e.contains("emulated zoned drive") && !e.contains("array"), "a zoned file, its label erased: {e}");
    ok(&["add", "-a", &d, "--spare", now]);
    assert_eq!(status(&d).1["spares"].as_array().map(Vec::len), Some(1), "taken again without --force");
    // A tier array: its spare is found on its side, named with or without it.
    let ta = p("tier");
    ok(&["create", "-a", &ta, "--level", "tier", "--fast", "raid1:2", "--slow", "raid5:4", "--fast-size", "16M", "--slow-size", "16M"]);
    ok(&["add", "-a", &ta, "--spare", &format!("slow:{}", p("ts1.img")), "--spare", &format!("fast:{}", p("ts2.img"))]);
    ok(&["remove", "-a", &ta, "--spare", &p("ts1.img"), "--spare", &format!("fast:{}", p("ts2.img"))]);
    assert_eq!(status(&ta).1["spares"], serde_json::json!([]));
}

/// Paths given relative to where the command runs (a spare at create, a
/// replacement outside the array's directory) are found by the next open
/// from anywhere: their hints are recorded absolute, not resolved from the
/// array's home.
#[test]
fn relative_spare_and_replacement_paths_are_found_by_the_next_open() {
    let t = tempfile::tempdir().unwrap();
    let p = |n: &str| t.path().join(n).to_str().unwrap().to_string();
    let run = |args: &[&str]| {
        let o = Command::new(env!("CARGO_BIN_EXE_mosaic")).current_dir(t.path()).args(args).output().unwrap();
        assert!(o.status.success(), "{args:?}: {}", String::from_utf8_lossy(&o.stderr));
    };
    run(&["create", "-a", "rel", "--level", "raid5", "--members", "3", "--member-size", "8M", "--spare", "rel-spare.img"]);
    let pattern: Vec<u8> = (0..4u32 << 20).map(|i| (i.wrapping_mul(2654435761) >> 11) as u8).collect();
    std::fs::write(t.path().join("in"), &pattern).unwrap();
    run(&["write", "-a", "rel", "--offset", "0", "--input", "in"]);
    let (_, s) = status(&p("rel"));
    assert_eq!(s["spares"], serde_json::json!([p("rel-spare.img")]), "{s}");
    run(&["fail", "-a", "rel", "--member", "1"]);
    run(&["replace", "-a", "rel", "--member", "1", "--drive", "new-1.img"]);
    run(&["fail", "-a", "rel", "--member", "2"]);
    run(&["replace", "-a", "rel", "--member", "2", "--drive", "rel/new-2.img"]);
    let (code, s) = status(&p("rel"));
    assert_eq!((code, s["members"][1]["path"].as_str(), s["members"][2]["path"].as_str()), (0, Some(p("new-1.img").as_str()), Some(p("rel/new-2.img").as_str())), "{s}");
    // Both replacements carry the bytes: lose member 0 and read back.
    ok(&["fail", "-a", &p("rel"), "--member", "0"]);
    let out = p("out");
    ok(&["read", "-a", &p("rel"), "--offset", "0", "--length", "4M", "--output", &out]);
    assert!(std::fs::read(&out).unwrap() == pattern);
}

#[test]
fn grow_spare_and_watch_refusals_say_why() {
    let t = tempfile::tempdir().unwrap();
    let arr = t.path().join("arr");
    let a = arr.to_str().unwrap();
    ok(&["create", "-a", a, "--level", "raid5", "--members", "4", "--member-size", "8M"]);
    let e = common::fails(&["grow", "-a", a, "--members", "3"]);
    assert!(e.contains("shrinking is not supported"), "{e}");
    let e = common::fails(&["grow", "-a", a]);
    assert!(e.contains("no grow is in progress"), "{e}");
    let e = common::fails(&["status", "-a", a, "--watch", "0"]);
    assert!(e.contains("positive number of seconds"), "{e}");
    let mirror = t.path().join("mirror");
    ok(&["create", "-a", mirror.to_str().unwrap(), "--level", "raid1", "--members", "2", "--member-size", "8M"]);
    let e = common::fails(&["grow", "-a", mirror.to_str().unwrap(), "--members", "3"]);
    assert!(e.contains("cannot grow"), "{e}");
    assert!(!mirror.join("member-02.img").exists(), "a refused grow leaves no new file");
    // A spare that belongs to another array is refused without --force.
    let e = common::fails(&["add", "-a", a, "--spare", mirror.join("member-00.img").to_str().unwrap()]);
    assert!(e.contains("--force"), "{e}");
    // A working member of this array is named as such, not as "in use".
    let e = common::fails(&["add", "-a", a, "--spare", arr.join("member-01.img").to_str().unwrap()]);
    assert!(e.contains("is member 1 of this array"), "{e}");
    let e = common::fails(&["grow", "-a", a, "--add", arr.join("member-02.img").to_str().unwrap()]);
    assert!(e.contains("is member 2 of this array"), "{e}");
    ok(&["fail", "-a", a, "--member", "0"]);
    let e = common::fails(&["replace", "-a", a, "--member", "0", "--drive", arr.join("member-03.img").to_str().unwrap()]);
    assert!(e.contains("is member 3 of this array"), "{e}");
}

/// A server that stops answering its control socket is named by
/// `status` after the wait (`--server-timeout`), not waited for forever;
/// a bad `--remote-timeout` or `--server-timeout` and `--spare` at create
/// on a tier say why.
#[test]
fn a_server_that_does_not_answer_is_named_and_bad_options_say_why() {
    let t = tempfile::tempdir().unwrap();
    let arr = t.path().join("arr");
    let a = arr.to_str().unwrap();
    ok(&["create", "-a", a, "--level", "raid5", "--members", "3", "--member-size", "8M"]);
    let mut srv = common::serve::Serve::start(a, &["--quiet"]);
    let pid = srv.child.id().to_string();
    std::process::Command::new("kill").args(["-STOP", &pid]).status().unwrap();
    let t0 = std::time::Instant::now();
    let o = mosaic(&["status", "-a", a, "--server-timeout", "1.5"]);
    let waited = t0.elapsed();
    std::process::Command::new("kill").args(["-CONT", &pid]).status().unwrap();
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success() && e.contains("did not answer within 1.5 s"), "{e}");
    assert!(waited >= std::time::Duration::from_millis(1500), "{waited:?}");
    assert!(srv.alive());
    srv.stop();
    let e = common::fails(&["status", "-a", a, "--remote-timeout", "0"]);
    assert!(e.contains("not a positive number of seconds"), "{e}");
    let e = common::fails(&["status", "-a", a, "--server-timeout", "0"]);
    assert!(e.contains("not a positive number of seconds"), "{e}");
    let tier = t.path().join("tier");
    let e = common::fails(&["create", "-a", tier.to_str().unwrap(), "--level", "tier", "--fast", "raid1:2", "--slow", "raid5:4", "--spare", t.path().join("s.img").to_str().unwrap()]);
    assert!(e.contains("mosaic add --spare"), "{e}");
}

/// An array whose members and journal are on the RAM file system: its
/// members are mapped and its small requests served on the connection's
/// reader (large ones by the workers).  fio writes 4 KiB to 256 KiB blocks
/// at random and verifies them while a member fails; then the array
/// rebuilds onto a new member and scrubs clean.
#[test]
fn an_array_in_ram_serves_inline_through_a_failure() {
    let t = tempfile::tempdir_in("/dev/shm").expect("a RAM file system at /dev/shm");
    let arr = t.path().join("arr");
    let a = arr.to_str().unwrap();
    ok(&["create", "-a", a, "--level", "raid5", "--members", "4", "--member-size", "24M"]);
    let srv = common::serve::Serve::start(a, &["--quiet"]);
    let job = fio(t.path(), srv.port, "ram", &["--rw=randwrite", "--size=40M", "--bsrange=4k-256k", "--rate_iops=2000"]).spawn().unwrap();
    std::thread::sleep(Duration::from_millis(800));
    assert!(ok(&["fail", "-a", a, "--member", "1"]).contains("marked failed"));
    passed(job, "randwrite + verify on RAM members through a failure");
    let (code, _) = srv.stop();
    assert_eq!(code, 0);
    let new1 = t.path().join("new1.img");
    ok(&["replace", "-a", a, "--member", "1", "--drive", new1.to_str().unwrap()]);
    assert!(ok(&["scrub", "-a", a]).contains("all consistent"));
}
