//! The control channel of a running `mosaic serve`: `info`, `status`,
//! `fail`, `flush` and `stop` act on the live array through it while a
//! client keeps its bytes; without a server (or after one was killed
//! with SIGKILL) the same commands act on the disks.

use crate::common;
use common::serve::{event_log, wait_for};
use common::{json, mosaic, ok};

use std::os::unix::fs::PermissionsExt;
use std::time::{Duration, Instant};

#[test]
fn info_status_fail_flush_and_stop_act_on_a_served_array() {
    let t = tempfile::tempdir().unwrap();
    let arr = t.path().join("arr");
    let a = arr.to_str().unwrap();
    ok(&["create", "-a", a, "--level", "raid5", "--members", "4", "--member-size", "16M"]);
    let uuid = json(&ok(&["info", "-a", a, "--json"]))["uuid"].as_str().unwrap().to_string();
    let srv = common::serve::Serve::start(a, &["--quiet"]);
    let lines = srv.lines();
    let sock = common::serve::message(&lines, "mosaic serve: control socket ").expect("the control socket is named");
    let sock = sock.trim_start_matches("mosaic serve: control socket ").to_string();
    assert!(sock.contains(&uuid), "{sock}");
    assert_eq!(std::fs::metadata(&sock).unwrap().permissions().mode() & 0o777, 0o600, "owner only");
    // info and status through the server (the array is locked by it).
    assert_eq!(json(&ok(&["info", "-a", a, "--json"]))["uuid"], uuid.as_str());
    let st = mosaic(&["status", "-a", a, "--json"]);
    assert_eq!(st.status.code(), Some(0));
    let st = json(&String::from_utf8_lossy(&st.stdout));
    assert_eq!((st[0]["served"].as_bool(), st[0]["health"].as_str()), (Some(true), Some("healthy")), "{st}");
    // A client writes; a member fails online; the client reads its bytes back degraded.
    let uri = format!("nbd://127.0.0.1:{}/mosaic", srv.port);
    let io = |cmds: &[&str]| common::qemu_io(&uri, cmds);
    io(&["write -P 0x5a 0 4M"]);
    let f = json(&ok(&["fail", "-a", a, "--member", "2", "--json"]));
    assert_eq!((f["failed"].as_u64(), f["served"].as_bool(), f["status"]["health"].as_str()), (Some(2), Some(true), Some("degraded")), "{f}");
    assert_eq!(f["status"]["members"][2]["state"]["state"], "failed", "{f}");
    let st = mosaic(&["status", "-a", a, "--json"]);
    assert_eq!(st.status.code(), Some(4), "degraded: exit 4");
    let st = json(&String::from_utf8_lossy(&st.stdout));
    assert_eq!(st[0]["health"], "degraded");
    assert_eq!(st[0]["members"][2]["state"]["state"], "failed", "{st}");
    io(&["read -P 0x5a 0 4M"]);
    // Replace and rebuild online, then scrub online: the client's bytes stay.
    let new = t.path().join("new-2.img");
    let out = ok(&["replace", "-a", a, "--member", "2", "--drive", new.to_str().unwrap()]);
    assert!(out.contains("rebuilt member(s) [2]"), "{out}");
    let st = mosaic(&["status", "-a", a, "--json"]);
    assert_eq!(st.status.code(), Some(0), "healthy again");
    io(&["write -P 0x33 4M 1M", "read -P 0x5a 0 4M", "read -P 0x33 4M 1M"]);
    let out = ok(&["scrub", "-a", a]);
    assert!(out.contains("all consistent"), "{out}");
    let rep = json(&ok(&["scrub", "-a", a, "--repair", "--json"]));
    assert_eq!(rep["mismatched"], 0, "{rep}");
    assert!(ok(&["flush", "-a", a]).contains("flushed"));
    let f = json(&ok(&["flush", "-a", a, "--json"]));
    assert_eq!((f["flushed"].as_bool(), f["served"].as_bool()), (Some(true), Some(true)), "{f}");
    // Every array this user serves, without -a.
    let all = json(&String::from_utf8_lossy(&mosaic(&["status", "--json"]).stdout));
    assert!(all.as_array().unwrap().iter().any(|b| b["uuid"] == uuid.as_str()), "{all}");
    // stop: the server drains, flushes and exits 0; its socket is gone.
    assert!(ok(&["stop", "-a", a]).contains("stopping"));
    let mut srv = srv;
    srv.wait_exit("the server");
    assert!(!std::path::Path::new(&sock).exists());
    // Without a server the same commands act on the disks.
    let st = json(&String::from_utf8_lossy(&mosaic(&["status", "-a", a, "--json"]).stdout));
    assert_eq!((st[0]["served"].as_bool(), st[0]["health"].as_str()), (Some(false), Some("healthy")), "rebuilt online: {st}");
    let e = common::fails(&["stop", "-a", a]);
    assert!(e.contains("no mosaic serve answers"), "{e}");
    let f = json(&ok(&["flush", "-a", a, "--json"]));
    assert_eq!((f["flushed"].as_bool(), f["served"].as_bool()), (Some(true), Some(false)), "{f}");
}

/// A raid5 in DIR/arr and its copy (`cp -a`) in DIR/copy: their paths.
fn array_and_copy(dir: &std::path::Path) -> (String, String) {
    let (a, c) = (dir.join("arr").display().to_string(), dir.join("copy").display().to_string());
    ok(&["create", "-a", &a, "--level", "raid5", "--members", "4", "--member-size", "8M"]);
    assert!(std::process::Command::new("cp").args(["-a", &a, &c]).status().unwrap().success());
    (a, c)
}

/// A copy of an array (`cp -a`) has its UUID but is its own array:
/// commands on the copy never reach the original's server, and the copy
/// can be served beside it, each server answering for its own files.
#[test]
fn a_copy_of_a_served_array_is_its_own_array() {
    let t = tempfile::tempdir().unwrap();
    let (a, c) = &array_and_copy(t.path());
    let (a, c) = (a.as_str(), c.as_str());
    let mut srv = common::serve::Serve::start(a, &["--quiet"]);
    // status exits 4 for a degraded array: its JSON is what counts here.
    let status = |x: &str| json(&String::from_utf8_lossy(&mosaic(&["status", "-a", x, "--json"]).stdout));
    // The copy is not served: its commands act on its own disks.
    let st = status(c);
    assert_eq!(st[0]["served"], false, "{st}");
    let f = json(&ok(&["fail", "-a", c, "--member", "1", "--json"]));
    assert_eq!((f["served"].as_bool(), f["status"]["health"].as_str()), (Some(false), Some("degraded")), "{f}");
    let st = status(a);
    assert_eq!((st[0]["served"].as_bool(), st[0]["health"].as_str()), (Some(true), Some("healthy")), "the original's server was not asked: {st}");
    // Served beside the original: each server answers for its own array.
    let copy_srv = common::serve::Serve::start(c, &["--quiet"]);
    let lines = copy_srv.lines();
    let sock = common::serve::message(&lines, "mosaic serve: control socket ").expect("the control socket is named");
    assert!(sock.ends_with(".1.sock"), "{sock}");
    let st = status(c);
    assert_eq!((st[0]["served"].as_bool(), st[0]["health"].as_str()), (Some(true), Some("degraded")), "{st}");
    let st = status(a);
    assert_eq!((st[0]["served"].as_bool(), st[0]["health"].as_str()), (Some(true), Some("healthy")), "{st}");
    assert_eq!(json(&String::from_utf8_lossy(&mosaic(&["status", "--json"]).stdout)).as_array().unwrap().iter().filter(|s| s["uuid"] == st[0]["uuid"]).count(), 2, "both listed");
    ok(&["stop", "-a", c]);
    let mut copy_srv = copy_srv;
    copy_srv.wait_exit("the copy's server");
    assert!(srv.alive(), "stop -a COPY stopped the original's server");
    assert_eq!(status(a)[0]["served"], true);
    srv.stop();
}

/// A CBRO array with a nested check drive array is named by its own UUID
/// whether `-a` gives its directory or a list of its members, so both
/// reach its server (the directory's nested array no longer speaks for it).
#[test]
fn a_served_cbro_array_is_reached_by_its_directory_or_its_members() {
    let t = tempfile::tempdir().unwrap();
    let c = t.path().join("c");
    let a = c.to_str().unwrap();
    ok(&["create", "-a", a, "--level", "cbro:4+1,cda=raid5:3", "--member-size", "16M"]);
    let uuid = json(&ok(&["info", "-a", a, "--json"]))["uuid"].as_str().unwrap().to_string();
    let srv = common::serve::Serve::start(a, &["--quiet"]);
    let list: Vec<String> = (0..4).map(|i| c.join(format!("member-0{i}.img")).display().to_string()).collect();
    for spec in [a.to_string(), list.join(",")] {
        let st = json(&ok(&["status", "-a", &spec, "--json"]));
        assert_eq!((st[0]["served"].as_bool(), st[0]["uuid"].as_str()), (Some(true), Some(uuid.as_str())), "{spec}: {st}");
    }
    srv.stop();
}

#[test]
fn a_killed_servers_socket_is_not_trusted() {
    let t = tempfile::tempdir().unwrap();
    let arr = t.path().join("arr");
    let a = arr.to_str().unwrap();
    ok(&["create", "-a", a, "--level", "raid1", "--members", "2", "--member-size", "8M"]);
    let mut srv = common::serve::Serve::start(a, &["--quiet"]);
    srv.child.kill().unwrap();
    srv.child.wait().unwrap();
    // The socket file is left behind; nobody answers: act directly.
    assert!(ok(&["info", "-a", a]).contains("raid1"));
    let f = json(&ok(&["fail", "-a", a, "--member", "1", "--json"]));
    assert_eq!((f["failed"].as_u64(), f["served"].as_bool(), f["status"]["health"].as_str()), (Some(1), Some(false), Some("degraded")), "on the disks: {f}");
    // A new server takes the socket over.
    let mut srv = common::serve::Serve::start(a, &["--quiet"]);
    let st = mosaic(&["status", "-a", a, "--json"]);
    assert_eq!(st.status.code(), Some(4));
    assert_eq!(json(&String::from_utf8_lossy(&st.stdout))[0]["served"], true);
    let s = json(&ok(&["stop", "-a", a, "--json"]));
    assert_eq!((s["stopping"].as_bool(), s["served"].as_bool()), (Some(true), Some(true)), "{s}");
    srv.wait_exit("the server");
    assert_eq!(srv.child.wait().unwrap().code(), Some(0), "stopped cleanly");
}

/// Rebuild and scrub through the server keep to `--maint-rate`, and
/// `status` shows the one in progress with its rate.
#[test]
fn online_maintenance_keeps_to_the_rate_and_shows_in_status() {
    let t = tempfile::tempdir().unwrap();
    let arr = t.path().join("arr");
    let a = arr.to_str().unwrap().to_string();
    ok(&["create", "-a", &a, "--level", "raid5", "--members", "3", "--member-size", "24M"]);
    let srv = common::serve::Serve::start(&a, &["--quiet", "--maint-rate", "16M"]);
    let a2 = a.clone();
    let scrub = std::thread::spawn(move || {
        let t0 = Instant::now();
        let out = ok(&["scrub", "-a", &a2]);
        (t0.elapsed(), out)
    });
    std::thread::sleep(Duration::from_millis(700));
    let st = json(&String::from_utf8_lossy(&mosaic(&["status", "-a", &a, "--json"]).stdout));
    let m = &st[0]["maintenance"];
    assert_eq!(m["what"], "scrub", "{st}");
    assert!(m["done_bytes"].as_u64().unwrap() > 0 && m["mib_per_s"].as_f64().unwrap() < 24.0, "{m}");
    // Another maintenance at the same time is refused, naming the running one.
    let e = common::fails(&["scrub", "-a", &a]);
    assert!(e.contains("a scrub is running"), "{e}");
    let (took, out) = scrub.join().unwrap();
    assert!(out.contains("all consistent"), "{out}");
    // About 44 MiB at 16 MiB/s: the limit held (not a few tens of ms).
    assert!(took > Duration::from_secs(2), "{took:?}");
    let (code, _) = srv.stop();
    assert_eq!(code, 0);
}

/// `serve --on-event CMD`: the program gets every event in its
/// environment: a member failed, the rebuild's start and end, the scrub's end.
#[test]
fn on_event_runs_a_program_for_each_event() {
    let t = tempfile::tempdir().unwrap();
    let arr = t.path().join("arr");
    let a = arr.to_str().unwrap();
    ok(&["create", "-a", a, "--level", "raid5", "--members", "3", "--member-size", "8M"]);
    let log = t.path().join("events.log");
    let cmd = format!("echo \"$MOSAIC_EVENT ${{MOSAIC_MEMBER:--}} $MOSAIC_ARRAY\" >> {}", log.display());
    let srv = common::serve::Serve::start(a, &["--quiet", "--on-event", &cmd]);
    ok(&["fail", "-a", a, "--member", "1"]);
    ok(&["replace", "-a", a, "--member", "1", "--drive", t.path().join("new.img").to_str().unwrap()]);
    ok(&["scrub", "-a", a]);
    let uuid = json(&ok(&["status", "-a", a, "--json"]))[0]["uuid"].as_str().unwrap().to_string();
    let (code, lines) = srv.stop();
    assert_eq!(code, 0);
    assert!(lines.iter().any(|l| l.contains("member 1 failed by request")), "{lines:?}");
    let got = std::fs::read_to_string(&log).unwrap();
    let kinds: Vec<&str> = got.lines().map(|l| l.split(' ').next().unwrap()).collect();
    assert_eq!(kinds, ["member-failed", "rebuild-start", "rebuild-end", "scrub-end"], "{got}");
    assert!(got.lines().next().unwrap() == format!("member-failed 1 {uuid}"), "{got}");
}

/// Nested kinds are reached through the control channel too: a remapped
/// array (its socket named by its inner array's UUID, as `-a DIR` finds it).
#[test]
fn a_served_remapped_array_answers_status_and_info() {
    let t = tempfile::tempdir().unwrap();
    let arr = t.path().join("r");
    let a = arr.to_str().unwrap();
    ok(&["create", "-a", a, "--level", "remap", "--inner", "raid5:3", "--member-size", "16M", "--journal-size", "4M"]);
    let srv = common::serve::Serve::start(a, &["--quiet"]);
    let st = json(&ok(&["status", "-a", a, "--json"]));
    assert_eq!((st[0]["served"].as_bool(), st[0]["kind"].as_str()), (Some(true), Some("remap")), "{st}");
    assert!(ok(&["info", "-a", a]).contains("Remapped"));
    let (code, _) = srv.stop();
    assert_eq!(code, 0);
}

/// `serve --adapt-every` is for remapped arrays: on another kind it is
/// refused with the reason, before any client is served.
#[test]
fn adapt_every_on_a_fixed_array_is_refused() {
    let t = tempfile::tempdir().unwrap();
    let arr = t.path().join("arr");
    let a = arr.to_str().unwrap();
    ok(&["create", "-a", a, "--level", "raid5", "--members", "3", "--member-size", "8M"]);
    let o = mosaic(&["serve", "-a", a, "--socket", t.path().join("s.sock").to_str().unwrap(), "--adapt-every", "1"]);
    assert!(!o.status.success());
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(e.contains("--adapt-every is for remapped arrays"), "{e}");
}

/// A server stopped while it rebuilds or scrubs does not finish them
/// first (hours on large drives): the rebuild pauses at a checkpoint and
/// the next server resumes it by itself, as md's recovery does at
/// assembly; the scrub ends before its next stripe and says so.  The
/// commands that asked exit 4.
#[test]
fn a_stopping_server_pauses_its_rebuild_and_scrub_and_the_next_resumes_the_rebuild() {
    let t = tempfile::tempdir().unwrap();
    let arr = t.path().join("arr");
    let a = arr.to_str().unwrap().to_string();
    ok(&["create", "-a", &a, "--level", "raid5", "--members", "3", "--member-size", "24M"]);
    let data: Vec<u8> = (0..8u32 << 20).map(|i| (i.wrapping_mul(2654435761) >> 11) as u8).collect();
    let file = t.path().join("data");
    std::fs::write(&file, &data).unwrap();
    ok(&["write", "-a", &a, "--offset", "4M", "--input", file.to_str().unwrap()]);
    // 2 MiB/s: the rebuild of 24 MiB would take about 12 s.
    let srv = common::serve::Serve::start(&a, &["--quiet", "--maint-rate", "2M"]);
    ok(&["fail", "-a", &a, "--member", "1"]);
    let (a2, new) = (a.clone(), t.path().join("new.img"));
    let replace = std::thread::spawn(move || mosaic(&["replace", "-a", &a2, "--member", "1", "--drive", new.to_str().unwrap()]));
    std::thread::sleep(Duration::from_millis(1500));
    // A cancel is for a scrub, not the rebuild running.
    let e = common::fails(&["scrub", "-a", &a, "--cancel"]);
    assert!(e.contains("no scrub is running (a rebuild is)"), "{e}");
    let t0 = Instant::now();
    let (code, lines) = srv.stop();
    assert_eq!(code, 0, "{lines:#?}");
    assert!(t0.elapsed() < Duration::from_secs(5), "the stop waited {:?} for the rebuild", t0.elapsed());
    let out = replace.join().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(4), "{out:?}");
    assert!(text.contains("paused the rebuild of member(s) [1]") && text.contains("resumes where it paused"), "{text}");
    let st = json(&String::from_utf8_lossy(&mosaic(&["status", "-a", &a, "--json"]).stdout));
    let done = st[0]["members"][1]["state"]["done"].as_u64().unwrap_or_else(|| panic!("{st}"));
    assert_eq!(st[0]["members"][1]["state"]["state"], "rebuilding", "{st}");
    assert!(done > 0, "{st}");
    // The next server resumes it where the checkpoint says.
    let (log, cmd) = event_log(t.path(), "events.log");
    let srv = common::serve::Serve::start(&a, &["--quiet", "--on-event", &cmd]);
    wait_for(&log, "rebuild-end", &srv);
    let got = std::fs::read_to_string(&log).unwrap();
    assert!(got.contains("rebuild-start rebuild of member(s) [1] resumed where it stopped") && got.contains("rebuild-end members [1] rebuilt"), "{got}");
    // Scrub, paused by a stop the same way (at 1 MiB/s it would take 48 s).
    let (code, _) = srv.stop();
    assert_eq!(code, 0);
    let srv = common::serve::Serve::start(&a, &["--quiet", "--maint-rate", "1M"]);
    let a2 = a.clone();
    let scrub = std::thread::spawn(move || mosaic(&["scrub", "-a", &a2]));
    std::thread::sleep(Duration::from_millis(1000));
    let (code, _) = srv.stop();
    assert_eq!(code, 0);
    let out = scrub.join().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(4), "{out:?}");
    assert!(text.contains("the scrub was stopped before its end"), "{text}");
    // Whole again, with every byte: member 0 failed, 1 is read.
    assert_eq!(json(&ok(&["status", "-a", &a, "--json"]))[0]["health"], "healthy");
    ok(&["fail", "-a", &a, "--member", "0"]);
    let back = t.path().join("back");
    ok(&["read", "-a", &a, "--offset", "4M", "--length", "8M", "--output", back.to_str().unwrap()]);
    assert!(std::fs::read(&back).unwrap() == data);
}

/// `serve --scrub-every`: a server checks every stripe by itself when the
/// last scrub (here: the array's creation) is that long ago, and the
/// result is kept for `status` and `info`; `scrub --cancel` ends a
/// running scrub, whose command exits 4.
#[test]
fn a_server_scrubs_on_schedule_and_a_scrub_can_be_cancelled() {
    let t = tempfile::tempdir().unwrap();
    let arr = t.path().join("arr");
    let a = arr.to_str().unwrap().to_string();
    ok(&["create", "-a", &a, "--level", "raid5", "--members", "3", "--member-size", "24M"]);
    let e = common::fails(&["scrub", "-a", &a, "--cancel"]);
    assert!(e.contains("no server runs"), "{e}");
    let (log, cmd) = event_log(t.path(), "events.log");
    let srv = common::serve::Serve::start(&a, &["--quiet", "--scrub-every", "1s", "--on-event", &cmd]);
    wait_for(&log, "scrub-end", &srv);
    let got = std::fs::read_to_string(&log).unwrap();
    assert!(got.starts_with("scrub-start scrub started: the last one ended 1 s or more ago") && got.contains("scrub-end scrub done: "), "{got}");
    let st = json(&ok(&["status", "-a", &a, "--json"]));
    let r = &st[0]["last_scrub"];
    assert!(r["stripes"].as_u64().unwrap() > 0 && r["mismatched"] == 0 && r["interrupted"] == false, "{st}");
    assert!(ok(&["status", "-a", &a]).contains("  last scrub: "));
    let (code, _) = srv.stop();
    assert_eq!(code, 0);
    assert!(ok(&["info", "-a", &a]).contains("last scrub"), "kept on disk");
    // Cancelled: at 1 MiB/s the scrub of 46 MiB would take a while.
    let srv = common::serve::Serve::start(&a, &["--quiet", "--maint-rate", "1M"]);
    let e = common::fails(&["scrub", "-a", &a, "--cancel"]);
    assert!(e.contains("no scrub is running"), "{e}");
    let a2 = a.clone();
    let scrub = std::thread::spawn(move || mosaic(&["scrub", "-a", &a2]));
    let t0 = Instant::now();
    while json(&ok(&["status", "-a", &a, "--json"]))[0]["maintenance"]["what"] != "scrub" {
        assert!(t0.elapsed() < Duration::from_secs(10));
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(500));
    assert!(ok(&["scrub", "-a", &a, "--cancel"]).contains("was asked to end"));
    let out = scrub.join().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(4), "{out:?}");
    assert!(text.contains("scrub: stopped after ") && text.contains("stopped before its end"), "{text}");
    assert!(ok(&["status", "-a", &a]).contains("stopped before its end"));
    let (code, _) = srv.stop();
    assert_eq!(code, 0);
}

/// `--scrub-every` on a DVS array: due from the array's creation, and its
/// labels keep the result, which `status` and `info` say.
#[test]
fn a_dvs_array_is_scrubbed_on_schedule_and_keeps_the_result() {
    let t = tempfile::tempdir().unwrap();
    let arr = t.path().join("dvs");
    let a = arr.to_str().unwrap();
    ok(&["create", "-a", a, "--level", "dvs", "--members", "3", "--member-size", "8M", "--zoned", "--stripe-unit", "64K", "--zone-size", "1M"]);
    let input = t.path().join("data");
    std::fs::write(&input, vec![0xab; 600 << 10]).unwrap();
    ok(&["write", "-a", a, "--offset", "0", "--input", input.to_str().unwrap()]);
    let (log, cmd) = event_log(t.path(), "events.log");
    // Never scrubbed: due once the array is a second old.
    let srv = common::serve::Serve::start(a, &["--quiet", "--scrub-every", "1s", "--on-event", &cmd]);
    wait_for(&log, "scrub-end scrub done", &srv);
    let st = json(&ok(&["status", "-a", a, "--json"]));
    let r = &st[0]["last_scrub"];
    assert!(r["stripes"].as_u64().unwrap() > 0 && r["mismatched"] == 0 && r["interrupted"] == false, "{st}");
    assert!(ok(&["status", "-a", a]).contains("  last scrub: "));
    let (code, _) = srv.stop();
    assert_eq!(code, 0);
    assert!(ok(&["info", "-a", a]).contains("last scrub"), "kept on disk");
    assert!(json(&ok(&["info", "-a", a, "--json"]))["last_scrub"]["stripes"] == r["stripes"]);
}

/// A served DVS array's scrub goes at `--maint-rate` of its capacity, as
/// a fixed array's does (its progress counts stripes, not SSGs: paced
/// as SSGs, it went 13 times slower than the rate).
#[test]
fn a_served_dvs_scrub_goes_at_the_maintenance_rate() {
    let t = tempfile::tempdir().unwrap();
    let arr = t.path().join("dvs");
    let a = arr.to_str().unwrap();
    ok(&["create", "-a", a, "--level", "dvs", "--members", "3", "--member-size", "16M", "--zoned", "--stripe-unit", "64K", "--zone-size", "1M"]);
    let input = t.path().join("data");
    std::fs::write(&input, vec![0xcd; 4 << 20]).unwrap();
    ok(&["write", "-a", a, "--offset", "0", "--input", input.to_str().unwrap()]);
    let cap = json(&ok(&["info", "-a", a, "--json"]))["capacity"].as_u64().unwrap();
    let srv = common::serve::Serve::start(a, &["--quiet", "--maint-rate", "8M"]);
    let t0 = Instant::now();
    ok(&["scrub", "-a", a]);
    let took = t0.elapsed().as_secs_f64();
    let (code, _) = srv.stop();
    assert_eq!(code, 0);
    let want = cap as f64 / (8 << 20) as f64;
    assert!(took > 0.5 * want && took < 2.0 * want + 2.0, "a scrub of {cap} bytes at 8 MiB/s took {took:.1} s (about {want:.1} s expected)");
}

/// `--scrub-every` on a tier: both inner arrays are scrubbed, and each
/// keeps its result.
#[test]
fn a_tier_is_scrubbed_on_schedule() {
    let t = tempfile::tempdir().unwrap();
    let arr = t.path().join("tier");
    let a = arr.to_str().unwrap();
    ok(&["create", "-a", a, "--level", "tier", "--fast", "raid1:2", "--slow", "raid5:3", "--fast-size", "8M", "--slow-size", "16M"]);
    let (log, cmd) = event_log(t.path(), "events.log");
    let srv = common::serve::Serve::start(a, &["--quiet", "--scrub-every", "1s", "--on-event", &cmd]);
    wait_for(&log, "scrub-end scrub done", &srv);
    let (code, _) = srv.stop();
    assert_eq!(code, 0);
    let info = json(&ok(&["info", "-a", a, "--json"]));
    let st = json(&ok(&["status", "-a", a, "--json"]));
    for side in ["fast", "slow"] {
        let r = &info[side]["last_scrub"];
        assert!(r["stripes"].as_u64().unwrap_or(0) > 0 && r["mismatched"] == 0, "{side}: {info}");
        assert_eq!(&st[0]["tier_last_scrub"][side], r, "{st}");
    }
    let text = ok(&["status", "-a", a]);
    assert!(text.contains("  last scrub (fast tier): ") && text.contains("  last scrub (slow tier): "), "{text}");
    let text = ok(&["info", "-a", a]);
    assert!(text.lines().any(|l| l.starts_with("last scrub") && l.contains("fast: ") && l.contains("; slow: ")), "{text}");
}

/// An array too few of whose members are there cannot be opened: its
/// `status` says FAILED and exits 5 (not an error, exit 1), in text and
/// JSON, naming the members its labels list and those missing.
#[test]
fn status_of_an_array_that_cannot_be_assembled_is_failed() {
    let t = tempfile::tempdir().unwrap();
    let arr = t.path().join("a");
    let a = arr.to_str().unwrap();
    ok(&["create", "-a", a, "--level", "raid5", "--members", "4", "--member-size", "16M"]);
    let gone = t.path().join("gone");
    std::fs::create_dir(&gone).unwrap();
    for m in ["member-01.img", "member-02.img"] {
        std::fs::rename(arr.join(m), gone.join(m)).unwrap();
    }
    let o = mosaic(&["status", "-a", a]);
    let text = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(5), "{o:?}");
    assert!(text.contains("FAILED") && text.contains("cannot be opened: ") && text.contains("members [1, 2] are missing"), "{text}");
    let o = mosaic(&["status", "-a", a, "--json"]);
    assert_eq!(o.status.code(), Some(5), "{o:?}");
    let j = json(&String::from_utf8_lossy(&o.stdout));
    assert_eq!(j[0]["health"], "failed");
    let present: Vec<bool> = j[0]["members"].as_array().unwrap().iter().map(|m| m["present"].as_bool().unwrap()).collect();
    assert_eq!(present, [true, false, false, true]);
    // Not an array at all stays an error.
    let e = common::fails(&["status", "-a", gone.join("nothing").to_str().unwrap()]);
    assert!(e.contains("no array at"), "{e}");
}

/// A stand-in for another server on a control socket: each connection is
/// answered by `reply` (given the request line), or without it closed
/// unread (as a stopping server's listener resets it), until the
/// returned flag is set.
fn stand_in(path: &std::path::Path, reply: Option<fn(&str) -> String>) -> (std::sync::Arc<std::sync::atomic::AtomicBool>, std::thread::JoinHandle<()>) {
    use std::io::{BufRead, Write};
    let l = std::os::unix::net::UnixListener::bind(path).unwrap();
    l.set_nonblocking(true).unwrap();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flag = stop.clone();
    let h = std::thread::spawn(move || {
        while !flag.load(std::sync::atomic::Ordering::Relaxed) {
            let Ok((s, _)) = l.accept() else {
                std::thread::sleep(Duration::from_millis(10));
                continue;
            };
            let Some(reply) = reply else { continue };
            s.set_nonblocking(false).unwrap();
            let mut line = String::new();
            let _ = std::io::BufReader::new(&s).read_line(&mut line);
            let _ = (&s).write_all(format!("{}\n", reply(&line)).as_bytes());
        }
    });
    (stop, h)
}

/// One request line to the control socket at `path`; the answer.
fn raw_request(path: &str, line: &str) -> serde_json::Value {
    use std::io::{BufRead, Write};
    let mut s = std::os::unix::net::UnixStream::connect(path).unwrap();
    s.write_all(format!("{line}\n").as_bytes()).unwrap();
    let mut answer = String::new();
    std::io::BufReader::new(&s).read_line(&mut answer).unwrap();
    json(&answer)
}

/// With an array and its copy served side by side, a command on the copy
/// reaches the copy's own server whatever answers on the original's
/// socket: a server that is stopping (it resets the connection), or one
/// that took the socket over between the client's question and its
/// request (it says it holds the array, then refuses the request as
/// another copy's), is passed over for the next socket.  A server asked
/// by a request that names another copy's file does nothing.
#[test]
fn a_command_on_a_copy_reaches_its_own_server_while_the_original_stops() {
    let t = tempfile::tempdir().unwrap();
    let (a, c) = &array_and_copy(t.path());
    let (a, c) = (a.as_str(), c.as_str());
    let sock_of = |s: &common::serve::Serve| common::serve::message(&s.lines(), "mosaic serve: control socket ").unwrap().trim_start_matches("mosaic serve: control socket ").to_string();
    let mut srv = common::serve::Serve::start(a, &["--quiet"]);
    let copy_srv = common::serve::Serve::start(c, &["--quiet"]);
    let (sock, copy_sock) = (sock_of(&srv), sock_of(&copy_srv));
    assert!(copy_sock.ends_with(".1.sock") && sock.ends_with(&format!("{}.sock", json(&ok(&["info", "-a", c, "--json"]))["uuid"].as_str().unwrap())), "{sock} {copy_sock}");
    ok(&["stop", "-a", a]);
    srv.wait_exit("the original's server");
    let served = |what: &str| {
        let o = mosaic(&["status", "-a", c, "--json"]);
        let st: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap_or_default();
        assert_eq!((o.status.code(), st[0]["served"].as_bool()), (Some(0), Some(true)), "{what}: {st} {}", String::from_utf8_lossy(&o.stderr));
    };
    // A stopping server on the original's socket: it resets every connection.
    let (stop, h) = stand_in(std::path::Path::new(&sock), None);
    served("past a server that resets");
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    h.join().unwrap();
    std::fs::remove_file(&sock).unwrap();
    // A server that holds "the array" but is another copy's by the time
    // the request comes.
    let (stop, h) = stand_in(
        std::path::Path::new(&sock),
        Some(|line| if line.contains("\"holds\"") { r#"{"ok":true,"body":{"holds":true}}"#.into() } else { r#"{"ok":false,"error":"another copy","other":true}"#.into() }),
    );
    served("past a server that took the socket over");
    // The copy's server does nothing for a request naming another file.
    let r = raw_request(&copy_sock, r#"{"cmd":"stop","of":[0,0]}"#);
    assert_eq!((r["ok"].as_bool(), r["other"].as_bool()), (Some(false), Some(true)), "{r}");
    let mut copy_srv = copy_srv;
    std::thread::sleep(Duration::from_millis(300));
    assert!(copy_srv.alive(), "a stop naming another copy's file stopped the server");
    let s = json(&ok(&["stop", "-a", c, "--json"]));
    assert_eq!((s["stopping"].as_bool(), s["served"].as_bool()), (Some(true), Some(true)), "{s}");
    copy_srv.wait_exit("the copy's server");
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    h.join().unwrap();
    let _ = std::fs::remove_file(&sock);
}
