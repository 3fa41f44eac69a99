//! The server's log and events: `--log-format json` writes one JSON object
//! a line with the events' fields; a stale member and a journal replay
//! found at open are events of their own kinds.

use crate::common;
use common::serve::{event_log, wait_for, Serve};
use common::{fails, json, mosaic, ok};

use std::process::Command;

#[test]
fn json_logs_are_one_object_a_line_with_the_events_fields() {
    let t = tempfile::tempdir().unwrap();
    let arr = t.path().join("arr");
    let a = arr.to_str().unwrap();
    ok(&["create", "-a", a, "--level", "raid5", "--members", "3", "--member-size", "8M"]);
    let uuid = json(&ok(&["info", "-a", a, "--json"]))["uuid"].as_str().unwrap().to_string();
    let srv = Serve::start(a, &["--log-format", "json", "--log-level", "info"]);
    let o = Command::new("qemu-io").args(["-f", "raw", &format!("nbd://127.0.0.1:{}/mosaic", srv.port), "-c", "write 0 64k"]).output().unwrap();
    assert!(o.status.success());
    ok(&["fail", "-a", a, "--member", "1"]);
    let (code, lines) = srv.stop();
    assert_eq!(code, 0, "{lines:#?}");
    let logs: Vec<serde_json::Value> = lines.iter().map(|l| json(l)).collect();
    for l in &logs {
        let ts = l["timestamp"].as_str().unwrap_or_else(|| panic!("no timestamp: {l}"));
        assert!(ts.len() == 24 && ts.ends_with('Z') && ts.as_bytes()[10] == b'T', "{ts}");
        assert!(["INFO", "WARN", "ERROR"].contains(&l["level"].as_str().unwrap()), "{l}");
        assert!(l["message"].is_string(), "{l}");
    }
    let failed = logs.iter().find(|l| l["kind"] == "member-failed").unwrap_or_else(|| panic!("{lines:#?}"));
    assert_eq!((failed["level"].as_str(), failed["member"].as_u64(), failed["array"].as_str()), (Some("WARN"), Some(1), Some(uuid.as_str())), "{failed}");
    assert!(failed["message"].as_str().unwrap().starts_with("mosaic serve: member 1 failed by request"), "{failed}");
    // The connection lines of the NBD server too, and the clean stop last.
    assert!(logs.iter().any(|l| l["message"].as_str().unwrap().starts_with("mosaic-nbd: conn 1 from 127.0.0.1:")), "{lines:#?}");
    assert_eq!(logs.last().unwrap()["message"], "mosaic serve: array flushed and closed clean");
}

/// A member swapped for an old copy after a crash: the next server's open
/// finds it stale and replays the journal; each is an event, with its
/// kind, in the --on-event program's environment.
#[test]
fn a_stale_member_and_a_journal_replay_at_open_are_events() {
    let t = tempfile::tempdir().unwrap();
    let arr = t.path().join("arr");
    let a = arr.to_str().unwrap();
    ok(&["create", "-a", a, "--level", "raid5", "--members", "3", "--member-size", "8M"]);
    let uuid = json(&ok(&["info", "-a", a, "--json"]))["uuid"].as_str().unwrap().to_string();
    let old = t.path().join("old-02.img");
    std::fs::copy(arr.join("member-02.img"), &old).unwrap();
    let mut srv = Serve::start(a, &["--quiet"]);
    let o = Command::new("qemu-io").args(["-f", "raw", &format!("nbd://127.0.0.1:{}/mosaic", srv.port), "-c", "write -P 0x7e 0 1M"]).output().unwrap();
    assert!(o.status.success());
    // A crash: no flush, no close.
    srv.child.kill().unwrap();
    srv.child.wait().unwrap();
    drop(srv);
    std::fs::copy(&old, arr.join("member-02.img")).unwrap();
    let log = t.path().join("events.log");
    let cmd = format!("echo \"$MOSAIC_EVENT ${{MOSAIC_MEMBER:--}} $MOSAIC_ARRAY $MOSAIC_DETAIL\" >> {}", log.display());
    let srv = Serve::start(a, &["--quiet", "--on-event", &cmd]);
    let (code, lines) = srv.stop();
    assert_eq!(code, 0, "{lines:#?}");
    let got = std::fs::read_to_string(&log).unwrap();
    let kinds: Vec<(&str, &str, &str)> = got
        .lines()
        .map(|l| {
            let mut w = l.split(' ');
            (w.next().unwrap(), w.next().unwrap(), w.next().unwrap())
        })
        .collect();
    assert_eq!(kinds, [("member-stale", "2", uuid.as_str()), ("journal-replay", "-", uuid.as_str())], "{got}");
    assert!(got.contains("member 2 is stale (event counter"), "{got}");
    assert!(got.contains("journal replayed at open: "), "{got}");
    // Logged as a warning and as news, with the kinds as fields.
    assert!(lines.iter().any(|l| l.contains(" WARN mosaic serve: warning at open: ") && l.contains(" kind=member-stale ") && l.ends_with(" member=2")), "{lines:#?}");
    assert!(lines.iter().any(|l| l.contains(" INFO mosaic serve: journal replayed at open: ") && l.contains(" kind=journal-replay ")), "{lines:#?}");
    // The bytes written before the crash are there (degraded: member 2 is out).
    let out = t.path().join("out.bin");
    ok(&["read", "-a", a, "--offset", "0", "--length", "1M", "--output", out.to_str().unwrap()]);
    assert!(std::fs::read(&out).unwrap().iter().all(|&b| b == 0x7e));
}

/// A server of the array at `a` killed (no flush, no close) after a
/// client's write: the array is left dirty.
fn killed_after_a_write(a: &str) {
    let mut srv = Serve::start(a, &["--quiet"]);
    let o = Command::new("qemu-io").args(["-f", "raw", &format!("nbd://127.0.0.1:{}/mosaic", srv.port), "-c", "write -P 0x5a 0 64k"]).output().unwrap();
    assert!(o.status.success(), "{a}");
    srv.child.kill().unwrap();
    srv.child.wait().unwrap();
}

/// A new `level` array of `members` 8 MiB members (4 KiB units) without
/// a journal at `a`, left dirty by [`killed_after_a_write`].
fn dirty_without_a_journal(a: &str, level: &str, members: &str) {
    ok(&["create", "-a", a, "--level", level, "--members", members, "--member-size", "8M", "--stripe-unit", "4K", "--no-journal"]);
    killed_after_a_write(a);
}


/// Serve the array at `a` until its resync ends, stop the server (exit
/// 0), and return the event log it wrote in `dir`.
fn served_until_resynced(dir: &std::path::Path, a: &str) -> String {
    let (log, cmd) = event_log(dir, "events.log");
    let srv = Serve::start(a, &["--quiet", "--on-event", &cmd]);
    wait_for(&log, "resync-end", &srv);
    let (code, lines) = srv.stop();
    assert_eq!(code, 0, "{lines:#?}");
    std::fs::read_to_string(&log).unwrap()
}

/// md's resync after an unclean shutdown: the server of an array without
/// a journal killed after a write leaves it dirty, with a stripe torn
/// (one unit changed behind the array's back); the next server resyncs
/// it by itself (a repairing scrub: events resync-start and resync-end),
/// and the array is recorded clean, its code agreeing with its data.
#[test]
fn a_server_resyncs_an_unjournalled_array_that_was_not_shut_down_cleanly() {
    let t = tempfile::tempdir().unwrap();
    let arr = t.path().join("arr");
    let a = arr.to_str().unwrap();
    dirty_without_a_journal(a, "raid5", "4");
    // Stripe 3's unit on member 1 torn: new bytes, code not rewritten.
    let f = std::fs::OpenOptions::new().write(true).open(arr.join("member-01.img")).unwrap();
    std::os::unix::fs::FileExt::write_all_at(&f, &[0xee; 4096], (1 << 20) + 3 * 4096).unwrap();
    drop(f);
    assert_eq!(json(&ok(&["info", "-a", a, "--json"]))["state"], "dirty");
    let st = ok(&["status", "-a", a]);
    assert!(st.contains("HEALTHY") && st.contains("resync needed"), "{st}");
    assert_eq!(json(&ok(&["status", "-a", a, "--json"]))[0]["resync_needed"], true);
    let got = served_until_resynced(t.path(), a);
    let events: Vec<&str> = got.lines().filter(|l| l.starts_with("resync-")).collect();
    assert_eq!(events.len(), 2, "{got}");
    assert!(events[0].starts_with("resync-start "), "{got}");
    assert!(events[1].starts_with("resync-end resync done: ") && events[1].contains(" 1 repaired"), "{got}");
    assert_eq!(json(&ok(&["info", "-a", a, "--json"]))["state"], "clean");
    assert_eq!(json(&ok(&["status", "-a", a, "--json"]))[0]["resync_needed"], false);
    let s = json(&ok(&["scrub", "-a", a, "--json"]));
    assert_eq!(s["mismatched"], 0, "{s}");
}

/// A raid5 array of 4 members (4 KiB units) at `arr` without a journal,
/// with a bitmap of 64 KiB a bit, left dirty by [`killed_after_a_write`],
/// then member 1's unit of each of `stripes` torn (new bytes, code not
/// rewritten).
fn crashed_with_a_bitmap(arr: &std::path::Path, stripes: &[u64]) {
    let a = arr.to_str().unwrap();
    ok(&["create", "-a", a, "--level", "raid5", "--members", "4", "--member-size", "8M", "--stripe-unit", "4K", "--no-journal", "--bitmap", "internal", "--bitmap-chunk", "64K"]);
    killed_after_a_write(a);
    let f = std::fs::OpenOptions::new().write(true).open(arr.join("member-01.img")).unwrap();
    for s in stripes {
        std::os::unix::fs::FileExt::write_all_at(&f, &[0xee; 4096], (1 << 20) + s * 4096).unwrap();
    }
}

/// With a write-intent bitmap the server's resync after an unclean
/// shutdown scrubs only the region the killed server wrote (stripes
/// 0..16 at 64 KiB a bit and 4 KiB units): it repairs the torn stripe
/// there and leaves one spoilt far from any write for a scrub to find.
#[test]
fn with_a_bitmap_the_resync_scrubs_only_the_regions_written_before_the_crash() {
    let t = tempfile::tempdir().unwrap();
    let arr = t.path().join("arr");
    let a = arr.to_str().unwrap();
    crashed_with_a_bitmap(&arr, &[3, 100]);
    let info = json(&ok(&["info", "-a", a, "--json"]));
    assert_eq!((info["bitmap"]["chunk_bytes"].as_u64(), info["bitmap"]["regions"].as_u64()), (Some(65536), Some(112)), "{info}");
    assert_eq!(json(&ok(&["status", "-a", a, "--json"]))[0]["bitmap"]["dirty_regions"], 1);
    let got = served_until_resynced(t.path(), a);
    assert!(got.contains("resync done: 16 regions checked, 1 repaired; write-intent bitmap: 16 of 1792 stripes were marked (1 of 112 regions)"), "{got}");
    let info = json(&ok(&["info", "-a", a, "--json"]));
    assert_eq!((info["state"].as_str(), info["bitmap"]["dirty_regions"].as_u64()), (Some("clean"), Some(0)), "{info}");
    // (A scrub that finds a mismatch says so in its exit status.)
    let o = mosaic(&["scrub", "-a", a, "--json"]);
    let s = json(&String::from_utf8_lossy(&o.stdout));
    assert_eq!(s["mismatched_stripes"], serde_json::json!([100]), "{s}");
}

/// A journal given to an array that had none, after an unclean
/// shutdown: the stripes the crash may have torn (the bitmap's regions)
/// are resynced first, since the new journal knows nothing of them, and
/// the bitmap goes (the journal closes the write hole itself).
#[test]
fn a_journal_added_after_a_crash_resyncs_first_and_replaces_the_bitmap() {
    let t = tempfile::tempdir().unwrap();
    let arr = t.path().join("arr");
    let a = arr.to_str().unwrap();
    crashed_with_a_bitmap(&arr, &[3]);
    let j = t.path().join("j.img");
    let out = ok(&["replace-journal", "-a", a, "--journal", j.to_str().unwrap(), "--journal-size", "8M"]);
    assert!(out.contains("the stripes an unclean shutdown may have torn were resynced"), "{out}");
    let info = json(&ok(&["info", "-a", a, "--json"]));
    assert!(info["bitmap"].is_null() && info["journal"].is_string() && info["state"] == "clean", "{info}");
    let s = json(&ok(&["scrub", "-a", a, "--json"]));
    assert_eq!(s["mismatched"], 0, "{s}");
}

/// mdadm's default: an array of 100 GB or more without a journal gets a
/// bitmap (sparse member files: only headers are written); with a
/// journal it gets none.
#[test]
fn arrays_of_100_gb_and_more_without_a_journal_get_a_bitmap_by_default() {
    let t = tempfile::tempdir().unwrap();
    let big = t.path().join("big");
    ok(&["create", "-a", big.to_str().unwrap(), "--level", "raid5", "--members", "4", "--member-size", "34G", "--no-journal"]);
    let info = json(&ok(&["info", "-a", big.to_str().unwrap(), "--json"]));
    assert!(info["capacity"].as_u64().unwrap() >= 100_000_000_000, "{info}");
    assert_eq!(info["bitmap"]["chunk_bytes"], 64 << 20, "{info}");
    let journaled = t.path().join("journaled");
    ok(&["create", "-a", journaled.to_str().unwrap(), "--level", "raid5", "--members", "4", "--member-size", "34G"]);
    assert!(json(&ok(&["info", "-a", journaled.to_str().unwrap(), "--json"]))["bitmap"].is_null());
}

/// `mosaic bitmap` adds and removes a bitmap offline; create refuses one
/// where it cannot serve.
#[test]
fn a_bitmap_is_added_and_removed_offline_and_refused_where_it_has_no_use() {
    let t = tempfile::tempdir().unwrap();
    let a = t.path().join("arr");
    let a = a.to_str().unwrap();
    let e = fails(&["create", "-a", a, "--level", "raid5", "--members", "4", "--member-size", "8M", "--bitmap", "internal"]);
    assert!(e.contains("for arrays without a journal"), "{e}");
    let e = fails(&["create", "-a", a, "--level", "raid0", "--members", "2", "--member-size", "8M", "--no-journal", "--bitmap", "internal"]);
    assert!(e.contains("raid0 has no code columns"), "{e}");
    let e = fails(&["create", "-a", a, "--level", "tier", "--fast", "raid1:2", "--slow", "raid5:4", "--member-size", "8M", "--bitmap", "internal"]);
    assert!(e.contains("--bitmap internal is for fixed-level arrays"), "{e}");
    let e = fails(&["create", "-a", a, "--level", "raid5", "--members", "4", "--member-size", "8M", "--no-journal", "--bitmap-chunk", "1K"]);
    assert!(e.contains("--bitmap-chunk 1024 is smaller than a block (4096 bytes)"), "{e}");
    assert!(!t.path().join("arr").exists(), "refused before anything was written");
    let journaled = t.path().join("journaled");
    ok(&["create", "-a", journaled.to_str().unwrap(), "--level", "raid5", "--members", "4", "--member-size", "8M"]);
    let e = fails(&["bitmap", "-a", journaled.to_str().unwrap(), "internal"]);
    assert!(e.contains("has a write-ahead journal") && e.contains("takes no write-intent bitmap"), "{e}");
    ok(&["create", "-a", a, "--level", "raid6", "--members", "5", "--member-size", "8M", "--no-journal"]);
    assert!(json(&ok(&["info", "-a", a, "--json"]))["bitmap"].is_null(), "small arrays get none by default, as mdadm's");
    let out = json(&ok(&["bitmap", "-a", a, "internal", "--bitmap-chunk", "1M", "--json"]));
    assert_eq!(out["bitmap"]["chunk_bytes"], 1 << 20, "{out}");
    assert!(ok(&["info", "-a", a]).contains("internal, 1.0 MiB a bit, 0 of 7 regions dirty"));
    let grown = t.path().join("grown.img");
    let e = fails(&["grow", "-a", a, "--add", grown.to_str().unwrap()]);
    assert!(e.contains("write-intent bitmap: remove it first (mosaic bitmap -a ARRAY none)"), "{e}");
    let srv = Serve::start(a, &["--quiet"]);
    let e = fails(&["bitmap", "-a", a, "none"]);
    assert!(e.contains("is served: stop its server first"), "{e}");
    let (code, lines) = srv.stop();
    assert_eq!(code, 0, "{lines:#?}");
    ok(&["bitmap", "-a", a, "none"]);
    assert!(json(&ok(&["info", "-a", a, "--json"]))["bitmap"].is_null());
}

/// md's re-add from the command line: a failed member's own device put
/// back in its slot is rebuilt only where writes came while it was out,
/// and reads right without another member.
#[test]
fn a_failed_members_own_device_put_back_is_re_added() {
    let t = tempfile::tempdir().unwrap();
    let arr = t.path().join("arr");
    let a = arr.to_str().unwrap();
    ok(&["create", "-a", a, "--level", "raid5", "--members", "4", "--member-size", "16M", "--no-journal", "--bitmap", "internal", "--bitmap-chunk", "1M"]);
    let data: Vec<u8> = (0..4u32 << 20).map(|i| (i.wrapping_mul(2654435761) >> 13) as u8).collect();
    let file = t.path().join("data");
    std::fs::write(&file, &data).unwrap();
    let f = file.to_str().unwrap();
    ok(&["write", "-a", a, "--offset", "0", "--input", f]);
    ok(&["fail", "-a", a, "--member", "2"]);
    ok(&["write", "-a", a, "--offset", "8M", "--input", f]);
    let st = mosaic(&["status", "-a", a]);
    assert!(String::from_utf8_lossy(&st.stdout).contains("re-addable: put its device back"), "{st:?}");
    assert_eq!(json(&String::from_utf8_lossy(&mosaic(&["status", "-a", a, "--json"]).stdout))[0]["members"][2]["readd"], true);
    let out = ok(&["replace", "-a", a, "--member", "2", "--drive", arr.join("member-02.img").to_str().unwrap()]);
    // 4 MiB at 8M: stripes 42..64 of 192 KiB, in bitmap regions 2 and 3
    // (16 stripes of 64 KiB units a bit): 32 stripes rebuilt.
    assert!(out.contains("2.0 MiB written") && out.contains("re-added: 208 of 240 stripes passed over"), "{out}");
    ok(&["fail", "-a", a, "--member", "0"]);
    for at in ["0", "8M"] {
        let back = t.path().join("back");
        ok(&["read", "-a", a, "--offset", at, "--length", "4M", "--output", back.to_str().unwrap()]);
        assert!(std::fs::read(&back).unwrap() == data, "at {at}");
    }
}

/// The same re-add through a running server: the server let go of the
/// failed member's file (it held it locked, so `replace` said "in use by
/// another mosaic process", though status advised exactly that command).
#[test]
fn a_served_arrays_failed_member_is_re_added_with_its_own_device() {
    let t = tempfile::tempdir().unwrap();
    let arr = t.path().join("arr");
    let a = arr.to_str().unwrap();
    ok(&["create", "-a", a, "--level", "raid5", "--members", "4", "--member-size", "16M", "--no-journal", "--bitmap", "internal", "--bitmap-chunk", "1M"]);
    let data: Vec<u8> = (0..1u32 << 20).map(|i| (i.wrapping_mul(2654435761) >> 11) as u8).collect();
    let file = t.path().join("data");
    std::fs::write(&file, &data).unwrap();
    let f = file.to_str().unwrap();
    let srv = Serve::start(a, &["--quiet"]);
    ok(&["fail", "-a", a, "--member", "1"]);
    // Written through the server while member 1 is out (offset 0).
    let copy = Command::new("nbdcopy").args([f, &format!("nbd://127.0.0.1:{}/mosaic", srv.port)]).status().expect("nbdcopy");
    assert!(copy.success());
    let out = ok(&["replace", "-a", a, "--member", "1", "--drive", arr.join("member-01.img").to_str().unwrap()]);
    assert!(out.contains("re-added: "), "{out}");
    assert!(ok(&["status", "-a", a]).contains("HEALTHY"));
    let (code, _) = srv.stop();
    assert_eq!(code, 0);
    ok(&["fail", "-a", a, "--member", "0"]);
    let back = t.path().join("back");
    ok(&["read", "-a", a, "--offset", "0", "--length", "1M", "--output", back.to_str().unwrap()]);
    assert!(std::fs::read(&back).unwrap() == data, "read back with member 0 out");
}

/// A member failed while the server is still resyncing an array without
/// a journal after an unclean shutdown: its event says the member's
/// blocks, read from code, may be wrong.
#[test]
fn a_member_failed_before_the_resync_ends_is_an_event_that_names_the_risk() {
    let t = tempfile::tempdir().unwrap();
    let arr = t.path().join("arr");
    let a = arr.to_str().unwrap();
    dirty_without_a_journal(a, "raid6", "5");
    let (log, cmd) = event_log(t.path(), "events.log");
    // 64 KiB/s: the resync of 21 MiB is far from done when member 1 fails.
    let srv = Serve::start(a, &["--quiet", "--on-event", &cmd, "--maint-rate", "64K"]);
    let events = || std::fs::read_to_string(&log).unwrap_or_default();
    wait_for(&log, "resync-start", &srv);
    ok(&["fail", "-a", a, "--member", "1"]);
    wait_for(&log, "member-failed ", &srv);
    let failed = events().lines().find(|l| l.starts_with("member-failed ")).unwrap().to_string();
    assert!(failed.contains("not yet resynced after an unclean shutdown") && failed.contains("may be wrong"), "{failed}");
    let (code, lines) = srv.stop();
    assert_eq!(code, 0, "{lines:#?}");
    // The stop interrupted the resync: degraded, and still unsynced.
    let o = mosaic(&["status", "-a", a, "--json"]);
    assert_eq!(o.status.code(), Some(4), "degraded");
    let st = json(&String::from_utf8_lossy(&o.stdout));
    assert_eq!(st[0]["resync_needed"], true, "{st}");
    assert!(events().lines().any(|l| l.starts_with("resync-end resync stopped with the server: ")), "{}", events());
}

/// The inner arrays of a tier and of a remapped array without journals,
/// left dirty by a killed server, are resynced by the next server too
/// (status says so before, and not after).
#[test]
fn a_server_resyncs_the_inner_arrays_of_tier_and_remapped_arrays() {
    let t = tempfile::tempdir().unwrap();
    let kinds: [(&str, &[&str]); 2] = [
        ("tier", &["--level", "tier", "--fast", "raid1:2", "--slow", "raid5:3", "--fast-size", "8M", "--slow-size", "16M"]),
        ("remap", &["--level", "remap", "--inner", "raid5:4", "--member-size", "24M"]),
    ];
    for (name, args) in kinds {
        let arr = t.path().join(name);
        let a = arr.to_str().unwrap();
        let mut c = vec!["create", "-a", a, "--no-journal"];
        c.extend_from_slice(args);
        ok(&c);
        killed_after_a_write(a);
        assert_eq!(json(&ok(&["status", "-a", a, "--json"]))[0]["resync_needed"], true, "{name}");
        let (log, cmd) = event_log(t.path(), &format!("{name}.events"));
        let srv = Serve::start(a, &["--quiet", "--on-event", &cmd]);
        wait_for(&log, "resync-end resync done: ", &srv);
        let (code, lines) = srv.stop();
        assert_eq!(code, 0, "{name}: {lines:#?}");
        assert_eq!(json(&ok(&["status", "-a", a, "--json"]))[0]["resync_needed"], false, "{name}");
    }
}

/// A server stopped while it resyncs does not finish the resync (on a
/// large array that would hold the stop for hours): it stops at once, the
/// array stays unsynced, and the next server goes on from where it
/// stopped (md's `resync_offset`; the array has no bitmap).
#[test]
fn a_stopping_server_interrupts_its_resync_and_the_next_one_goes_on() {
    let t = tempfile::tempdir().unwrap();
    let arr = t.path().join("arr");
    let a = arr.to_str().unwrap();
    dirty_without_a_journal(a, "raid5", "4");
    let (log, cmd) = event_log(t.path(), "events.log");
    // 64 KiB/s: 21 MiB would take minutes.
    let srv = Serve::start(a, &["--quiet", "--on-event", &cmd, "--maint-rate", "64K"]);
    wait_for(&log, "resync-start", &srv);
    std::thread::sleep(std::time::Duration::from_millis(1500));
    let (code, lines) = srv.stop();
    assert_eq!(code, 0, "{lines:#?}");
    let got = std::fs::read_to_string(&log).unwrap();
    let end = got.lines().find(|l| l.starts_with("resync-end resync stopped with the server: ")).unwrap_or_else(|| panic!("{got}"));
    // "... : N of T regions checked, ...; the next server goes on from stripe N"
    let words: Vec<&str> = end.split([' ', ',', ';']).collect();
    let n: u64 = words[words.iter().position(|w| *w == "server:").unwrap() + 1].parse().unwrap();
    let total: u64 = words[words.iter().position(|w| *w == "of").unwrap() + 1].parse().unwrap();
    assert!(n > 0 && n < total && end.ends_with(&format!("the next server goes on from stripe {n}")), "{end}");
    let st = json(&ok(&["status", "-a", a, "--json"]));
    assert_eq!((&st[0]["resync_needed"], &st[0]["resync_from"]), (&serde_json::json!(true), &serde_json::json!(n)), "{st}");
    assert!(ok(&["status", "-a", a]).contains(&format!("resync verified the stripes before {n} already")));
    let (log, cmd) = event_log(t.path(), "again.log");
    let srv = Serve::start(a, &["--quiet", "--on-event", &cmd]);
    wait_for(&log, "resync-end resync done: ", &srv);
    let (code, lines) = srv.stop();
    assert_eq!(code, 0, "{lines:#?}");
    let got = std::fs::read_to_string(&log).unwrap();
    assert!(got.contains(&format!("resync done: {} regions checked", total - n)), "{got}");
    assert_eq!(json(&ok(&["status", "-a", a, "--json"]))[0]["resync_needed"], false);
}
