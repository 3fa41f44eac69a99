//! `replace --hot` (md's `--replace`): a working member copied onto a new
//! drive, offline and through a server, cut off by a crash, and refused
//! where it does not apply.

use crate::common::{self, fails, json, mosaic, ok};

/// Bytes that differ from block to block.
fn data(len: usize, seed: u32) -> Vec<u8> {
    (0..len as u32).map(|i| (i.wrapping_add(seed).wrapping_mul(2654435761) >> 13) as u8).collect()
}

/// An array at `t`/arr of `members` 8 MiB members at `level`, holding
/// `len` bytes of [`data`] `seed` written at `offset`: its path and them.
fn filled(t: &std::path::Path, level: &str, members: &str, len: usize, seed: u32, offset: &str) -> (String, Vec<u8>) {
    let a = t.join("arr").to_str().unwrap().to_string();
    ok(&["create", "-a", &a, "--level", level, "--members", members, "--member-size", "8M"]);
    let bytes = data(len, seed);
    let file = t.join("data");
    std::fs::write(&file, &bytes).unwrap();
    ok(&["write", "-a", &a, "--offset", offset, "--input", file.to_str().unwrap()]);
    (a, bytes)
}

fn read_back(a: &str, off: &str, len: usize, t: &std::path::Path) -> Vec<u8> {
    let out = t.join("back");
    ok(&["read", "-a", a, "--offset", off, "--length", &len.to_string(), "--output", out.to_str().unwrap()]);
    std::fs::read(out).unwrap()
}

/// Offline: the new drive takes member 1's slot with its bytes (read back
/// with member 0 failed, so member 1's columns come from the new drive),
/// and the scan names the old file a former member.
#[test]
fn replace_hot_copies_a_working_member_onto_a_new_drive() {
    let t = tempfile::tempdir().unwrap();
    let (a, bytes) = filled(t.path(), "raid5", "3", 4 << 20, 1, "1M");
    let a = a.as_str();
    let e = fails(&["replace", "-a", a, "--member", "1", "--drive", t.path().join("x.img").to_str().unwrap()]);
    assert!(e.contains("or a working one with replace --hot"), "{e}");
    let new = t.path().join("new-1.img");
    let out = ok(&["replace", "-a", a, "--member", "1", "--drive", new.to_str().unwrap(), "--hot"]);
    assert!(out.contains("hot-replaced member 1 onto") && out.contains("7.0 MiB copied"), "{out}");
    let info = json(&ok(&["info", "-a", a, "--json"]));
    assert_eq!(info["degraded"], false, "{info}");
    assert!(info["member_list"].to_string().contains("new-1.img"), "{info}");
    ok(&["fail", "-a", a, "--member", "0"]);
    assert!(read_back(a, "1M", 4 << 20, t.path()) == bytes, "wrong bytes with member 0 out");
    let scan = ok(&["assemble", "--scan", t.path().to_str().unwrap()]);
    assert!(scan.contains("former member (replaced; not used):") && scan.contains("member-01.img"), "{scan}");
}

/// A hot replace killed mid-copy leaves the array as it was and the new
/// drive blank: asked again, without --force, it runs to the end.
#[test]
fn a_hot_replace_killed_mid_copy_leaves_the_array_and_starts_over() {
    let t = tempfile::tempdir().unwrap();
    let (a, bytes) = filled(t.path(), "raid6", "4", 6 << 20, 2, "0");
    let a = a.as_str();
    let new = t.path().join("new-2.img");
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_mosaic"))
        .args(["replace", "-a", a, "--member", "2", "--drive", new.to_str().unwrap(), "--hot"])
        .env("MOSAIC_FAULT_ABORT_REBUILD_AFTER", "20")
        .output()
        .unwrap();
    assert!(!o.status.success(), "the copy was to be killed");
    let info = json(&ok(&["info", "-a", a, "--json"]));
    assert_eq!(info["degraded"], false, "{info}");
    assert!(!info["member_list"].to_string().contains("new-2.img"), "{info}");
    let id = mosaic(&["assemble", "--scan", new.to_str().unwrap()]);
    assert!(!String::from_utf8_lossy(&id.stdout).contains("array "), "the killed copy's drive is no array's member");
    ok(&["replace", "-a", a, "--member", "2", "--drive", new.to_str().unwrap(), "--hot"]);
    ok(&["fail", "-a", a, "--member", "0"]);
    ok(&["fail", "-a", a, "--member", "1"]);
    assert!(read_back(a, "0", 6 << 20, t.path()) == bytes, "wrong bytes with members 0 and 1 out");
}

/// Through a server: the client's bytes stay readable, the events name
/// the hot replace, and the new drive serves member 2's columns.
#[test]
fn a_served_array_hot_replaces_a_member_while_a_client_reads_it() {
    let t = tempfile::tempdir().unwrap();
    let arr = t.path().join("arr");
    let a = arr.to_str().unwrap();
    ok(&["create", "-a", a, "--level", "raid5", "--members", "3", "--member-size", "16M"]);
    // Paced, so the copy is seen in progress.
    let srv = common::serve::Serve::start(a, &["--quiet", "--maint-rate", "8M"]);
    let uri = format!("nbd://127.0.0.1:{}/mosaic", srv.port);
    let io = |cmds: &[&str]| common::qemu_io(&uri, cmds);
    io(&["write -P 0x6b 0 8M"]);
    let new = t.path().join("new-2.img");
    let replace = {
        let (a, new) = (a.to_string(), new.clone());
        std::thread::spawn(move || json(&ok(&["replace", "-a", &a, "--member", "2", "--drive", new.to_str().unwrap(), "--hot", "--json"])))
    };
    std::thread::sleep(std::time::Duration::from_millis(700));
    let st = json(&String::from_utf8_lossy(&mosaic(&["status", "-a", a, "--json"]).stdout));
    assert_eq!(st[0]["maintenance"]["what"], "hot replace", "{st}");
    assert_eq!(st[0]["members"][2]["replacing"].as_str(), Some(new.to_str().unwrap()), "{st}");
    let text = String::from_utf8_lossy(&mosaic(&["status", "-a", a]).stdout).into_owned();
    assert!(text.contains(&format!("(hot replace onto {})", new.display())), "{text}");
    let r = replace.join().unwrap();
    assert_eq!((r["member"].as_u64(), r["bytes_copied"].as_u64()), (Some(2), Some(15 << 20)), "{r}");
    io(&["read -P 0x6b 0 8M", "write -P 0x6c 4M 1M"]);
    let st = json(&String::from_utf8_lossy(&mosaic(&["status", "-a", a, "--json"]).stdout));
    assert_eq!(st[0]["health"], "healthy", "{st}");
    assert!(st[0]["members"][2]["replacing"].is_null(), "{st}");
    let kinds: Vec<String> = st[0]["events"].as_array().unwrap().iter().map(|e| e["kind"].as_str().unwrap_or_default().to_string()).collect();
    assert!(kinds.contains(&"replace-start".to_string()) && kinds.contains(&"replace-end".to_string()), "{kinds:?}");
    ok(&["fail", "-a", a, "--member", "0"]);
    io(&["read -P 0x6b 0 4M", "read -P 0x6c 4M 1M", "read -P 0x6b 5M 3M"]);
    let (code, _) = srv.stop();
    assert_eq!(code, 0);
}

/// A served DVS array: the copy runs as the server's maintenance while a
/// client writes and reads, and the new drive serves the member after it.
#[test]
fn a_served_dvs_array_hot_replaces_a_member_while_a_client_writes() {
    let t = tempfile::tempdir().unwrap();
    let d = t.path().join("dvs");
    let ds = d.to_str().unwrap();
    ok(&["create", "-a", ds, "--level", "dvs", "--members", "3", "--member-size", "32M", "--zoned", "--stripe-unit", "64K", "--zone-size", "8M"]);
    // Paced, so the copy is seen in progress.
    let srv = common::serve::Serve::start(ds, &["--quiet", "--maint-rate", "4M"]);
    let uri = format!("nbd://127.0.0.1:{}/mosaic", srv.port);
    let io = |cmds: &[&str]| common::qemu_io(&uri, cmds);
    io(&["write -P 0x6b 0 4M"]);
    let new = t.path().join("new-1.zoned");
    let replace = {
        let (ds, new) = (ds.to_string(), new.clone());
        std::thread::spawn(move || json(&ok(&["replace", "-a", &ds, "--member", "1", "--drive", new.to_str().unwrap(), "--hot", "--json"])))
    };
    std::thread::sleep(std::time::Duration::from_millis(700));
    let st = json(&String::from_utf8_lossy(&mosaic(&["status", "-a", ds, "--json"]).stdout));
    assert_eq!(st[0]["maintenance"]["what"], "hot replace", "{st}");
    assert_eq!(st[0]["members"][1]["replacing"].as_str(), Some(new.to_str().unwrap()), "{st}");
    io(&["write -P 0x6c 1M 1M", "read -P 0x6b 0 1M", "read -P 0x6c 1M 1M"]);
    let r = replace.join().unwrap();
    assert_eq!((r["member"].as_u64(), r["drive"].as_str()), (Some(1), new.to_str()), "{r}");
    io(&["read -P 0x6b 0 1M", "read -P 0x6c 1M 1M", "read -P 0x6b 2M 2M"]);
    let st = json(&String::from_utf8_lossy(&mosaic(&["status", "-a", ds, "--json"]).stdout));
    assert_eq!(st[0]["health"], "healthy", "{st}");
    assert_eq!(st[0]["members"][1]["path"].as_str(), new.to_str(), "{st}");
    // Member 1's chunks now come from the new drive alone.
    ok(&["fail", "-a", ds, "--member", "0"]);
    io(&["read -P 0x6b 0 1M", "read -P 0x6c 1M 1M", "read -P 0x6b 2M 2M"]);
    let (code, _) = srv.stop();
    assert_eq!(code, 0);
}

/// Array `a` served with its maintenance paced (4 MiB/s) and an event
/// log in `t`, 8 MiB of 0x5e written through it, `replace --hot` of
/// `member` onto `new` started, and the server stopped `ms` after the
/// copy began: the event log and the hook command that writes it.
fn hot_replace_stopped_mid_copy(t: &std::path::Path, a: &str, member: usize, new: &std::path::Path, ms: u64) -> (std::path::PathBuf, String) {
    use common::serve::{event_log, wait_for, Serve};
    let (log, cmd) = event_log(t, "events.log");
    let srv = Serve::start(a, &["--quiet", "--maint-rate", "4M", "--on-event", &cmd]);
    let uri = format!("nbd://127.0.0.1:{}/mosaic", srv.port);
    common::qemu_io(&uri, &["write -P 0x5e 0 8M"]);
    let replace = {
        let (a, new) = (a.to_string(), new.to_path_buf());
        std::thread::spawn(move || mosaic(&["replace", "-a", &a, "--member", &member.to_string(), "--drive", new.to_str().unwrap(), "--hot", "--json"]))
    };
    wait_for(&log, "replace-start", &srv);
    std::thread::sleep(std::time::Duration::from_millis(ms));
    let (code, _) = srv.stop();
    assert_eq!(code, 0);
    let _ = replace.join();
    (log, cmd)
}

/// A served DVS array's hot replace, stopped with the server mid-copy,
/// pauses (the labels record it, the new drive is labelled
/// `replacement`), and the server started again resumes it by itself.
#[test]
fn a_dvs_hot_replace_paused_by_a_server_stop_resumes_when_served_again() {
    use common::serve::{wait_for, Serve};
    let t = tempfile::tempdir().unwrap();
    let d = t.path().join("dvs");
    let ds = d.to_str().unwrap();
    ok(&["create", "-a", ds, "--level", "dvs", "--members", "3", "--member-size", "32M", "--zoned", "--stripe-unit", "64K", "--zone-size", "4M"]);
    let new = t.path().join("new-1.zoned");
    let (log, cmd) = hot_replace_stopped_mid_copy(t.path(), ds, 1, &new, 1500);
    let info = json(&ok(&["info", "-a", ds, "--json"]));
    let h = &info["hot_replace"];
    assert!(h["paused"] == true && h["member"] == 1, "{info}");
    let (at, total) = (h["done"].as_u64().unwrap(), h["total"].as_u64().unwrap());
    assert!(at < total, "{info}");
    let text = ok(&["info", "-a", ds]);
    assert!(text.contains(&format!("member 1 onto {} (paused at zone {at} of {total})", new.display())), "{text}");
    let ex = ok(&["examine", new.to_str().unwrap()]);
    assert!(ex.contains("the new drive of a paused hot replace of member 1 of array"), "{ex}");

    let srv = Serve::start(ds, &["--quiet", "--on-event", &cmd]);
    let uri = format!("nbd://127.0.0.1:{}/mosaic", srv.port);
    wait_for(&log, "hot-replaced member 1", &srv);
    common::qemu_io(&uri, &["read -P 0x5e 0 8M", "write -P 0x5f 6M 2M"]);
    let events = std::fs::read_to_string(&log).unwrap();
    assert!(events.contains("(resumed where it paused) started"), "{events}");
    let (code, _) = srv.stop();
    assert_eq!(code, 0);
    let info = json(&ok(&["info", "-a", ds, "--json"]));
    assert!(info["hot_replace"].is_null() && info["volume"]["members"][1]["path"].as_str() == new.to_str(), "{info}");
    ok(&["fail", "-a", ds, "--member", "0"]);
    let mut want = vec![0x5eu8; 8 << 20];
    want[6 << 20..].fill(0x5f);
    assert!(read_back(ds, "0", 8 << 20, t.path()) == want, "wrong bytes with member 0 out");
}

/// Where it does not apply, the refusal says why: a failed member (a
/// plain replace is the way).
#[test]
fn replace_hot_refuses_a_failed_member() {
    let t = tempfile::tempdir().unwrap();
    let arr = t.path().join("arr");
    let a = arr.to_str().unwrap();
    ok(&["create", "-a", a, "--level", "raid5", "--members", "3", "--member-size", "8M"]);
    ok(&["fail", "-a", a, "--member", "2"]);
    let e = fails(&["replace", "-a", a, "--member", "2", "--drive", t.path().join("y.img").to_str().unwrap(), "--hot"]);
    assert!(e.contains("member 2 is failed: replace it without --hot"), "{e}");
    assert!(!t.path().join("y.img").exists(), "the refused drive file was left behind");
}

/// A DVS array's member copied zone by zone onto a new zoned file, then
/// onto its first hot spare: the bytes read back with another member
/// failed (so the copied member's chunks come from the new drive), and
/// the old file is set aside as a replaced member.
#[test]
fn replace_hot_copies_a_dvs_member_onto_a_new_zoned_drive_and_onto_a_spare() {
    let t = tempfile::tempdir().unwrap();
    let d = t.path().join("dvs");
    let ds = d.to_str().unwrap();
    ok(&["create", "-a", ds, "--level", "dvs", "--members", "3", "--member-size", "32M", "--zoned", "--stripe-unit", "64K", "--zone-size", "8M"]);
    let bytes = data(3 << 20, 9);
    let file = t.path().join("data");
    std::fs::write(&file, &bytes).unwrap();
    ok(&["write", "-a", ds, "--offset", "64K", "--input", file.to_str().unwrap()]);
    let new = t.path().join("new.zoned");
    let r = json(&ok(&["replace", "-a", ds, "--member", "1", "--drive", new.to_str().unwrap(), "--hot", "--json"]));
    assert_eq!((r["member"].as_u64(), r["drive"].as_str()), (Some(1), new.to_str()), "{r}");
    assert!(r["bytes_copied"].as_u64().unwrap() > 1 << 20, "{r}");
    assert!(d.join("dvs-1.zoned.replaced").exists(), "the old file set aside");
    let info = json(&ok(&["info", "-a", ds, "--json"]));
    assert_eq!(info["volume"]["members"][1]["path"].as_str(), new.to_str(), "{info}");
    ok(&["fail", "-a", ds, "--member", "0"]);
    assert!(read_back(ds, "64K", bytes.len(), t.path()) == bytes, "the copied member's bytes");
    ok(&["replace", "-a", ds, "--member", "0", "--drive", t.path().join("m0.zoned").to_str().unwrap()]);
    // Onto the first spare, without --drive.
    let spare = t.path().join("spare.zoned");
    ok(&["add", "-a", ds, "--spare", spare.to_str().unwrap()]);
    let r = json(&ok(&["replace", "-a", ds, "--member", "2", "--hot", "--json"]));
    assert_eq!(r["drive"].as_str(), spare.to_str(), "{r}");
    let info = json(&ok(&["info", "-a", ds, "--json"]));
    assert_eq!(info["volume"]["members"][2]["path"].as_str(), spare.to_str(), "{info}");
    assert!(info["spares"].as_array().unwrap().is_empty(), "{info}");
    ok(&["fail", "-a", ds, "--member", "1"]);
    assert!(read_back(ds, "64K", bytes.len(), t.path()) == bytes, "the bytes, member 2 from the former spare");
    let e = fails(&["replace", "-a", ds, "--member", "0", "--hot"]);
    assert!(e.contains("no hot spare to copy member 0 onto"), "{e}");
}

/// `replace --hot` without `--drive` copies onto the first hot spare, as
/// md's `--replace` without `--with` does; a plain replace still needs a
/// drive.
#[test]
fn replace_hot_without_a_drive_takes_the_first_spare() {
    let t = tempfile::tempdir().unwrap();
    let (a, bytes) = filled(t.path(), "raid5", "3", 2 << 20, 3, "0");
    let a = a.as_str();
    let e = fails(&["replace", "-a", a, "--member", "2", "--hot"]);
    assert!(e.contains("no hot spare to copy member 2 onto"), "{e}");
    let e = fails(&["replace", "-a", a, "--member", "2"]);
    assert!(e.contains("--drive"), "{e}");
    let spare = t.path().join("spare.img");
    ok(&["add", "-a", a, "--spare", spare.to_str().unwrap()]);
    let r = json(&ok(&["replace", "-a", a, "--member", "2", "--hot", "--json"]));
    assert_eq!(r["drive"].as_str(), Some(spare.to_str().unwrap()), "{r}");
    let info = json(&ok(&["info", "-a", a, "--json"]));
    assert_eq!(info["spares"].as_array().map(Vec::len), Some(0), "{info}");
    assert!(info["member_list"].to_string().contains("spare.img"), "{info}");
    ok(&["fail", "-a", a, "--member", "0"]);
    assert!(read_back(a, "0", 2 << 20, t.path()) == bytes, "wrong bytes with member 0 out");
}

/// A server stopping mid-copy pauses its hot replace: offline, `info`
/// shows where; served again, the server resumes the copy by itself from
/// there (not from the start), and the new drive then serves member 2's
/// columns with every byte the client wrote, before and after the pause.
#[test]
fn a_hot_replace_paused_by_a_server_stop_resumes_when_served_again() {
    use common::serve::{wait_for, Serve};
    let t = tempfile::tempdir().unwrap();
    let arr = t.path().join("arr");
    let a = arr.to_str().unwrap();
    ok(&["create", "-a", a, "--level", "raid5", "--members", "3", "--member-size", "16M"]);
    let new = t.path().join("new-2.img");
    let (log, cmd) = hot_replace_stopped_mid_copy(t.path(), a, 2, &new, 800);
    let info = json(&ok(&["info", "-a", a, "--json"]));
    let at = info["hot_paused"]["copied"].as_u64().unwrap_or_else(|| panic!("no paused hot replace: {info}"));
    let regions = info["stripes"].as_u64().unwrap();
    assert!(at > 0 && at < regions, "paused at {at} of {regions}");
    assert_eq!(info["degraded"], false, "{info}");
    let text = ok(&["info", "-a", a]);
    assert!(text.contains(&format!("hot replace onto {} (paused at stripe {at} of {regions})", new.display())), "{text}");
    // Not a member, not a spare: the scan and examine say what it is.
    let scan = ok(&["assemble", "--scan", t.path().to_str().unwrap()]);
    assert!(scan.contains(&format!("paused hot replace onto {}", new.display())) && !scan.contains("former member"), "{scan}");
    let ex = ok(&["examine", new.to_str().unwrap()]);
    assert!(ex.contains("the new drive of a paused hot replace of member 2 of array"), "{ex}");

    let srv = Serve::start(a, &["--quiet", "--on-event", &cmd]);
    let uri = format!("nbd://127.0.0.1:{}/mosaic", srv.port);
    wait_for(&log, &format!("resumed at stripe {at}"), &srv);
    common::qemu_io(&uri, &["read -P 0x5e 0 8M", "write -P 0x5f 6M 2M"]);
    let events = std::fs::read_to_string(&log).unwrap();
    assert!(events.contains("(resumed where it paused) started"), "{events}");
    let (code, _) = srv.stop();
    assert_eq!(code, 0);
    let info = json(&ok(&["info", "-a", a, "--json"]));
    assert!(info["hot_paused"].is_null() && info["member_list"].to_string().contains("new-2.img"), "{info}");
    ok(&["fail", "-a", a, "--member", "0"]);
    let mut want = vec![0x5eu8; 8 << 20];
    want[6 << 20..].fill(0x5f);
    assert!(read_back(a, "0", 8 << 20, t.path()) == want, "wrong bytes with member 0 out");
}
