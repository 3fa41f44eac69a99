//! Remote members: arrays whose members are NBD exports of other servers
//! (nbdkit's file plugin and qemu-nbd on unix sockets, another `mosaic
//! serve` over TCP; nothing leaves the machine), named by NBD URIs
//! wherever a member path is accepted.  Served arrays of remotes under
//! fio with verify: two servers killed mid-run, one restarted empty and
//! rebuilt onto, a remote that hangs (nbdkit's delay filter) failed after
//! the time, a slow one reported, failure domains refused at create.

use crate::common;
use common::fio::{fio, passed, status, wait_status};
use common::serve::Serve;
use common::{fails, json, mosaic, ok};

use std::path::{Path, PathBuf};
use std::process::Child;
use std::time::{Duration, Instant};

/// One export: a server (nbdkit or qemu-nbd) serving a raw file.
struct Export {
    child: Option<Child>,
    file: PathBuf,
    sock: PathBuf,
}

impl Export {
    /// qemu-nbd serving a new file of `size` bytes.
    fn start(dir: &Path, name: &str, size: u64) -> Export {
        let (file, sock) = Export::new_file(dir, name, size);
        let child = mosaic_dev::testing::qemu_nbd(&file, &sock, 4);
        Export { child: Some(child), file, sock }
    }
    /// nbdkit's file plugin serving a new file of `size` bytes.
    fn nbdkit(dir: &Path, name: &str, size: u64) -> Export {
        let (file, sock) = Export::new_file(dir, name, size);
        let child = mosaic_dev::testing::nbdkit(&file, &sock, &[], &[]);
        Export { child: Some(child), file, sock }
    }
    fn new_file(dir: &Path, name: &str, size: u64) -> (PathBuf, PathBuf) {
        let file = dir.join(format!("{name}.img"));
        std::fs::File::create(&file).unwrap().set_len(size).unwrap();
        (file, dir.join(format!("{name}.sock")))
    }
    /// Serve the same file again on the same socket with nbdkit `filters`
    /// and their parameters.
    fn restart(&mut self, filters: &[&str], params: &[&str]) {
        self.kill();
        self.child = Some(mosaic_dev::testing::nbdkit(&self.file, &self.sock, filters, params));
    }
    fn uri(&self) -> String {
        format!("nbd+unix:///m?socket={}", self.sock.display())
    }
    /// The server dies (as a machine that goes away).
    fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
        let _ = std::fs::remove_file(&self.sock);
    }
}

impl Drop for Export {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Write `mib` MiB of a pattern to array `a` and check that it reads back;
/// the data and the file reads go to.
fn write_and_read_back(dir: &Path, a: &str, mib: u32) -> (Vec<u8>, PathBuf) {
    let data: Vec<u8> = (0..(mib << 20)).map(|i| (i.wrapping_mul(2654435761) >> 9) as u8).collect();
    let input = dir.join("data");
    std::fs::write(&input, &data).unwrap();
    ok(&["write", "-a", a, "--offset", "0", "--input", input.to_str().unwrap()]);
    let out = dir.join("back");
    assert!(read_back(a, data.len(), &out) == data);
    (data, out)
}

fn read_back(a: &str, len: usize, out: &Path) -> Vec<u8> {
    ok(&["read", "-a", a, "--offset", "0", "--length", &len.to_string(), "--output", out.to_str().unwrap()]);
    std::fs::read(out).unwrap()
}

#[test]
fn raid6_over_six_remote_exports_loses_two_and_rebuilds_onto_a_new_one() {
    let t = tempfile::tempdir().unwrap();
    let mut ex: Vec<Export> = (0..7).map(|i| Export::start(t.path(), &format!("e{i}"), 64 << 20)).collect();
    let uris: Vec<String> = ex.iter().map(Export::uri).collect();
    let spec = |idx: &[usize]| idx.iter().map(|&i| uris[i].as_str()).collect::<Vec<_>>().join(",");
    let a = spec(&[0, 1, 2, 3, 4, 5]);
    let journal = t.path().join("journal.img");
    ok(&["create", "-a", &a, "--level", "raid6", "--stripe-unit", "64K", "--journal", journal.to_str().unwrap()]);
    let (data, out) = write_and_read_back(t.path(), &a, 12);
    // The members' bytes are on the exports: member 0 carries a superblock.
    let e = fails(&["create", "-a", &spec(&[0, 6]), "--level", "raid1"]);
    assert!(e.contains("is member 0 of array") && e.contains("--force"), "{e}");
    // Two servers go away: the array reads degraded, and says which.
    ex[1].kill();
    ex[4].kill();
    let o = common::mosaic(&["status", "-a", &a]);
    assert_eq!(o.status.code(), Some(4), "degraded is exit status 4");
    let s = String::from_utf8_lossy(&o.stdout);
    assert!(s.contains("DEGRADED") && s.matches("(missing)").count() == 2, "{s}");
    assert!(read_back(&a, data.len(), &out) == data, "degraded read");
    // A new, empty export takes member 1's place and is rebuilt.
    ok(&["replace", "-a", &a, "--member", "1", "--drive", &uris[6]]);
    let b = spec(&[0, 6, 2, 3, 5]);
    let scrub = ok(&["scrub", "-a", &b]);
    assert!(scrub.contains("0 stripes with mismatched"), "{scrub}");
    assert!(read_back(&b, data.len(), &out) == data, "after the rebuild");
    // A URI that reaches nothing is a clear error, not a hang.
    let gone = format!("nbd+unix:///m?socket={}", t.path().join("nothing.sock").display());
    let e = fails(&["examine", &gone]);
    assert!(e.contains("nothing.sock"), "{e}");
    assert_eq!(e.matches(&gone).count(), 1, "the URI named once: {e}");
}

/// Member `i`'s object in a status.
fn member(s: &serde_json::Value, i: usize) -> &serde_json::Value {
    &s["members"][i]
}

fn state(s: &serde_json::Value, i: usize) -> &str {
    member(s, i)["state"]["state"].as_str().unwrap_or("?")
}

#[test]
fn raid6_over_six_nbdkit_exports_under_fio_verify_loses_two_and_rebuilds_online() {
    let t = tempfile::tempdir().unwrap();
    let mut ex: Vec<Export> = (0..6).map(|i| Export::nbdkit(t.path(), &format!("e{i}"), 64 << 20)).collect();
    let a = ex.iter().map(Export::uri).collect::<Vec<_>>().join(",");
    let journal = t.path().join("journal.img");
    let create = |hosts: &str| common::mosaic(&["create", "-a", &a, "--level", "raid6", "--stripe-unit", "64K", "--journal", journal.to_str().unwrap(), "--hosts", hosts]);
    // Failure domains: three members on one host is more than raid6 survives.
    let e = String::from_utf8_lossy(&create("a,a,a,b,c,c").stderr).to_string();
    assert!(e.contains("host a holds 3 members") && e.contains("survives the loss of 2") && e.contains("--force"), "{e}");
    assert!(create("a,a,b,b,c,c").status.success());
    let info = common::json(&ok(&["info", "-a", &a, "--json"]));
    let hosts: Vec<&str> = (0..6).map(|i| info["member_list"][i]["host"].as_str().unwrap()).collect();
    assert_eq!(hosts, ["a", "a", "b", "b", "c", "c"], "{info}");
    let srv = Serve::start(&a, &["--quiet", "--remote-timeout", "4"]);
    // fio writes 24 MiB at random and verifies it while two servers die.
    let job = fio(t.path(), srv.port, "remote", &["--rw=randwrite", "--size=24M", "--rate_iops=2500"]).spawn().unwrap();
    std::thread::sleep(Duration::from_millis(1200));
    ex[1].kill();
    ex[4].kill();
    passed(job, "randwrite + verify while two remotes die");
    let (code, s) = status(&a);
    assert_eq!((code, s["health"].as_str()), (4, Some("degraded")), "{s}");
    assert_eq!((state(&s, 1), state(&s, 4)), ("failed", "failed"), "{s}");
    assert_eq!(s["failed_while_open"].as_array().map(Vec::len), Some(2), "{s}");
    assert!(member(&s, 0)["remote"]["requests"].as_u64().unwrap() > 100, "a live remote's requests are counted: {s}");
    // Member 1's server comes back as an empty export; a drive on host b
    // would put three members there.
    std::fs::File::create(&ex[1].file).unwrap().set_len(64 << 20).unwrap();
    ex[1].restart(&[], &[]);
    let uri1 = ex[1].uri();
    let e = fails(&["replace", "-a", &a, "--member", "1", "--drive", &uri1, "--host", "b"]);
    assert!(e.contains("host b holds 3 members"), "{e}");
    ok(&["replace", "-a", &a, "--member", "1", "--drive", &uri1, "--host", "a"]);
    let s = wait_status(&a, 120, "member 1 rebuilt over the network", |s| state(s, 1) == "active" && s["maintenance"].is_null());
    assert_eq!(member(&s, 1)["host"].as_str(), Some("a"), "{s}");
    passed(fio(t.path(), srv.port, "remote", &["--rw=randwrite", "--size=24M", "--verify_only"]).spawn().unwrap(), "verify after the rebuild");
    let scrub = ok(&["scrub", "-a", &a]);
    assert!(scrub.contains("0 stripes with mismatched"), "{scrub}");
    let (code, _) = srv.stop();
    assert_eq!(code, 0);
    // Member 4's server comes back with its old bytes: it is behind by
    // event counters, so it stays failed until rebuilt, never read.
    ex[4].restart(&[], &[]);
    let (code, s) = status(&a);
    assert_eq!((code, state(&s, 4)), (4, "failed"), "a stale remote is not reused: {s}");
    ok(&["replace", "-a", &a, "--member", "4", "--drive", &ex[4].uri(), "--host", "c"]);
    let (code, s) = status(&a);
    assert_eq!((code, s["health"].as_str()), (0, Some("healthy")), "{s}");
    assert!(ok(&["scrub", "-a", &a]).contains("all consistent"));
}

#[test]
fn a_slow_remote_is_reported_and_a_hung_one_is_failed_after_the_time() {
    let t = tempfile::tempdir().unwrap();
    let mut ex: Vec<Export> = (0..2).map(|i| Export::nbdkit(t.path(), &format!("e{i}"), 32 << 20)).collect();
    let a = ex.iter().map(Export::uri).collect::<Vec<_>>().join(",");
    ok(&["create", "-a", &a, "--level", "raid1", "--journal", t.path().join("j.img").to_str().unwrap()]);
    // Member 1 answers, but every write takes 150 ms (nbdkit's delay filter).
    ex[1].restart(&["--filter=delay"], &["delay-write=150ms"]);
    let srv = Serve::start(&a, &["--quiet", "--remote-timeout", "3", "--remote-slow-ms", "100"]);
    passed(fio(t.path(), srv.port, "slow", &["--rw=write", "--bs=64k", "--size=1M"]).spawn().unwrap(), "writes to a slow remote");
    let (code, s) = status(&a);
    assert_eq!((code, s["slow_remotes"].clone()), (0, serde_json::json!([1])), "{s}");
    let l = &member(&s, 1)["remote"];
    assert!(l["slow"] == true && l["recent_write_ms"].as_f64().unwrap() > 100.0 && l["slow_requests"].as_u64().unwrap() >= 16, "{s}");
    assert!(member(&s, 0)["remote"]["slow"] == false, "{s}");
    let text = String::from_utf8_lossy(&common::mosaic(&["status", "-a", &a]).stdout).to_string();
    assert!(text.lines().any(|l| l.contains("remote 1 on host local") && l.ends_with("SLOW")), "{text}");
    // Now member 1's server hangs: requests are never answered.  After the
    // remote time it is failed, and the array keeps serving from member 0.
    ex[1].restart(&["--filter=delay"], &["delay-write=120", "delay-read=120"]);
    let t0 = Instant::now();
    passed(fio(t.path(), srv.port, "hang", &["--rw=randwrite", "--bs=64k", "--size=2M", "--offset=4M"]).spawn().unwrap(), "writes while a remote hangs");
    assert!(t0.elapsed() < Duration::from_secs(60), "{:?}", t0.elapsed());
    let (code, s) = status(&a);
    assert_eq!((code, state(&s, 1)), (4, "failed"), "{s}");
    let why = s["failed_while_open"][0][1].as_str().unwrap_or("");
    assert!(why.contains("no answer for 3.0 s"), "{s}");
    // A failed member gets no more I/O, flushes included: writes and
    // their flushes do not wait for it, nor count errors on it.
    let errors = member(&s, 1)["errors"].clone();
    passed(fio(t.path(), srv.port, "after", &["--rw=randwrite", "--bs=64k", "--size=1M", "--offset=8M", "--fsync=4"]).spawn().unwrap(), "writes and flushes after the failure");
    assert_eq!(member(&status(&a).1, 1)["errors"], errors);
    passed(fio(t.path(), srv.port, "slow", &["--rw=write", "--bs=64k", "--size=1M", "--verify_only"]).spawn().unwrap(), "the first bytes, degraded");
    // A new export in the slot: the errors counted are its own from now on.
    assert!(errors["write"].as_u64().unwrap_or(0) > 0, "{s}");
    let new = Export::nbdkit(t.path(), "e2", 32 << 20);
    ok(&["replace", "-a", &a, "--member", "1", "--drive", &new.uri()]);
    let s = wait_status(&a, 30, "member 1 rebuilt", |s| state(s, 1) == "active");
    assert_eq!(member(&s, 1)["errors"], serde_json::json!({ "read": 0, "write": 0, "checksum": 0, "corrected": 0 }), "{s}");
    let (code, _) = srv.stop();
    assert_eq!(code, 0);
}

#[test]
fn a_member_on_another_mosaic_serve_nests_over_the_network() {
    let t = tempfile::tempdir().unwrap();
    let inner = t.path().join("inner");
    ok(&["create", "-a", inner.to_str().unwrap(), "--level", "raid1", "--members", "2", "--member-size", "40M"]);
    let isrv = Serve::start(inner.to_str().unwrap(), &["--quiet"]);
    let remote = format!("nbd://127.0.0.1:{}/mosaic", isrv.port);
    let files: Vec<PathBuf> = (0..2).map(|i| t.path().join(format!("f{i}.img"))).collect();
    for f in &files {
        std::fs::File::create(f).unwrap().set_len(40 << 20).unwrap();
    }
    let a = format!("{remote},{},{}", files[0].display(), files[1].display());
    ok(&["create", "-a", &a, "--level", "raid5", "--stripe-unit", "64K", "--no-journal"]);
    let (data, out) = write_and_read_back(t.path(), &a, 8);
    // The outer array's member 0 is the inner array: its writes went
    // through the inner server to both of its mirrors.
    let (_, s) = status(inner.to_str().unwrap());
    assert!(s["clients"]["writes"].as_u64().unwrap() > 0 && s["device_writes"].as_u64().unwrap() > 0, "{s}");
    let info = common::json(&ok(&["info", "-a", &a, "--json"]));
    assert_eq!(info["member_list"][0]["path"].as_str(), Some(remote.as_str()), "{info}");
    // The inner server goes away: the outer array reads degraded.
    let (code, _) = isrv.stop();
    assert_eq!(code, 0);
    assert!(read_back(&a, data.len(), &out) == data, "degraded read without the nested member");
}

#[test]
fn members_on_named_hosts_are_placed_by_failure_domain() {
    // Refused before anything is contacted: the hosts here do not exist.
    let four = "nbd://store-a/d0,nbd://store-a:10810/d1,nbd://store-b/d0,nbd://store-c/d0";
    let e = fails(&["create", "-a", four, "--level", "raid5"]);
    assert!(e.contains("host store-a holds 2 members") && e.contains("[0, 1]") && e.contains("raid5 survives the loss of 1"), "{e}");
    // A label overrides the URI's host; labels are checked.
    let e = fails(&["create", "-a", four, "--level", "raid5", "--hosts", "a,b,c"]);
    assert!(e.contains("3 hosts for 4 members"), "{e}");
    let e = fails(&["create", "-a", four, "--level", "raid5", "--hosts", "a,b,c,d e"]);
    assert!(e.contains("not a host name"), "{e}");
    let e = fails(&["create", "-a", "m0.img,m1.img,m2.img", "--level", "dvs", "--zoned", "--hosts", "a,b,c"]);
    assert!(e.contains("--hosts is for fixed-layout arrays"), "{e}");
    // Local files and one remote host: this machine holds two of three.
    let t = tempfile::tempdir().unwrap();
    let f: Vec<String> = (0..2).map(|i| t.path().join(format!("m{i}.img")).display().to_string()).collect();
    let e = fails(&["create", "-a", &format!("{},{},nbd://store-b/d0", f[0], f[1]), "--level", "raid5", "--member-size", "8M"]);
    assert!(e.contains("host local holds 2 members"), "{e}");
    // Labels on a directory array's member files are checked too; a tier
    // takes none.
    let dir = t.path().join("d");
    let e = fails(&["create", "-a", dir.to_str().unwrap(), "--level", "raid5", "--members", "3", "--member-size", "8M", "--hosts", "a,a,b"]);
    assert!(e.contains("host a holds 2 members"), "{e}");
    assert!(!dir.join("member-00.img").exists(), "nothing was made");
    ok(&["create", "-a", dir.to_str().unwrap(), "--level", "raid5", "--members", "3", "--member-size", "8M", "--hosts", "a,b,c"]);
    let info = common::json(&ok(&["info", "-a", dir.to_str().unwrap(), "--json"]));
    assert_eq!(info["member_list"][2]["host"].as_str(), Some("c"), "{info}");
    // A replacement's host is a plain name, and may not crowd a host.
    let new = t.path().join("new.img");
    let e = fails(&["replace", "-a", dir.to_str().unwrap(), "--member", "0", "--drive", new.to_str().unwrap(), "--host", "x y"]);
    assert!(e.contains("\"x y\" is not a host name"), "{e}");
    let e = fails(&["replace", "-a", dir.to_str().unwrap(), "--member", "0", "--drive", new.to_str().unwrap(), "--host", "b"]);
    assert!(e.contains("host b holds 2 members"), "{e}");
    let e = fails(&["--remote-slow-ms", "0", "status", "-a", dir.to_str().unwrap()]);
    assert!(e.contains("\"0\" is not a positive number of milliseconds"), "{e}");
    let e = fails(&["create", "-a", t.path().join("t").to_str().unwrap(), "--level", "tier", "--fast", "raid1:2", "--slow", "raid5:3", "--member-size", "8M", "--hosts", "a,b,c,d,e"]);
    assert!(e.contains("--hosts is for fixed-layout arrays"), "{e}");
}

/// A tier's inner arrays open by directory; a member replaced by a remote
/// is found again through its superblock hint.
#[test]
fn a_tier_member_on_a_remote_is_found_again_at_open() {
    let t = tempfile::tempdir().unwrap();
    let tier = t.path().join("t");
    let a = tier.to_str().unwrap();
    ok(&["create", "-a", a, "--level", "tier", "--fast", "raid1:2", "--slow", "raid5:3", "--fast-size", "16M", "--slow-size", "32M"]);
    let (data, out) = write_and_read_back(t.path(), a, 6);
    let ex = Export::nbdkit(t.path(), "r", 40 << 20);
    ok(&["fail", "-a", a, "--member", "3"]);
    ok(&["replace", "-a", a, "--member", "3", "--drive", &ex.uri()]);
    let (code, s) = status(a);
    assert_eq!((code, member(&s, 3)["path"].as_str()), (0, Some(ex.uri().as_str())), "{s}");
    assert!(member(&s, 3)["remote"]["requests"].as_u64().unwrap() > 0, "{s}");
    assert!(read_back(a, data.len(), &out) == data);
    assert!(ok(&["scrub", "-a", a]).contains("all consistent"));
}

/// The journal and a hot spare are remote too: a member fails, the spare
/// on another export takes its place and is rebuilt online.
#[test]
fn a_remote_journal_and_a_remote_hot_spare_take_over_online() {
    let t = tempfile::tempdir().unwrap();
    let ex: Vec<Export> = (0..5).map(|i| Export::nbdkit(t.path(), &format!("e{i}"), 32 << 20)).collect();
    let a = ex[..3].iter().map(Export::uri).collect::<Vec<_>>().join(",");
    ok(&["create", "-a", &a, "--level", "raid5", "--journal", &ex[3].uri(), "--spare", &ex[4].uri()]);
    let srv = Serve::start(&a, &["--quiet"]);
    let (_, s) = status(&a);
    assert_eq!(s["spares"], serde_json::json!([ex[4].uri()]), "{s}");
    passed(fio(t.path(), srv.port, "j", &["--rw=randwrite", "--size=8M"]).spawn().unwrap(), "writes through a remote journal");
    ok(&["fail", "-a", &a, "--member", "1"]);
    let s = wait_status(&a, 60, "the remote spare rebuilt", |s| s["health"] == "healthy" && s["maintenance"].is_null());
    assert_eq!(member(&s, 1)["path"].as_str(), Some(ex[4].uri().as_str()), "{s}");
    passed(fio(t.path(), srv.port, "j", &["--rw=randwrite", "--size=8M", "--verify_only"]).spawn().unwrap(), "after the takeover");
    let (code, _) = srv.stop();
    assert_eq!(code, 0);
    let b = format!("{},{},{}", ex[0].uri(), ex[4].uri(), ex[2].uri());
    assert!(ok(&["scrub", "-a", &b]).contains("all consistent"));
}

/// `add --spare`, `remove --spare` and `grow --add` take NBD URIs as they
/// are (they were made into paths under the current directory before).
#[test]
fn add_remove_and_grow_take_remote_exports() {
    let t = tempfile::tempdir().unwrap();
    let ex: Vec<Export> = (0..2).map(|i| Export::nbdkit(t.path(), &format!("e{i}"), 24 << 20)).collect();
    let arr = t.path().join("a");
    let a = arr.to_str().unwrap();
    ok(&["create", "-a", a, "--level", "raid5", "--members", "3", "--member-size", "16M"]);
    let (data, out) = write_and_read_back(t.path(), a, 8);
    ok(&["add", "-a", a, "--spare", &ex[0].uri()]);
    assert_eq!(status(a).1["spares"], serde_json::json!([ex[0].uri()]));
    let r = json(&ok(&["remove", "-a", a, "--spare", &ex[0].uri(), "--json"]));
    assert_eq!(r["status"]["spares"], serde_json::json!([]), "{r}");
    assert!(String::from_utf8_lossy(&mosaic(&["examine", &ex[0].uri()]).stderr).contains("nothing of mosaic's"), "its label is erased");
    ok(&["grow", "-a", a, "--add", &ex[1].uri()]);
    let (_, s) = status(a);
    assert_eq!((s["members"].as_array().map(Vec::len), member(&s, 3)["path"].as_str()), (Some(4), Some(ex[1].uri().as_str())), "{s}");
    assert!(read_back(a, data.len(), &out) == data);
}

/// A remote member's server goes away while the array is served: the
/// member is failed; its server comes back with the same file, and the
/// array's server re-adds it by itself (md's re-add, `serve --re-add
/// auto`), rebuilding only the bitmap regions written while it was out.
/// `--re-add manual` leaves it failed.
#[test]
fn a_remote_member_that_comes_back_is_re_added_by_the_server() {
    let t = tempfile::tempdir().unwrap();
    let mut ex: Vec<Export> = (0..4).map(|i| Export::nbdkit(t.path(), &format!("e{i}"), 32 << 20)).collect();
    let a = ex.iter().map(Export::uri).collect::<Vec<_>>().join(",");
    ok(&["create", "-a", &a, "--level", "raid5", "--no-journal", "--bitmap", "internal", "--bitmap-chunk", "1M"]);
    let (log, cmd) = common::serve::event_log(t.path(), "events.log");
    let srv = Serve::start(&a, &["--quiet", "--remote-timeout", "2", "--re-add", "manual"]);
    passed(fio(t.path(), srv.port, "first", &["--rw=write", "--bs=64k", "--size=4M"]).spawn().unwrap(), "the first write");
    ex[2].kill();
    passed(fio(t.path(), srv.port, "second", &["--rw=write", "--bs=64k", "--size=2M", "--offset=40M"]).spawn().unwrap(), "a write with member 2 gone");
    let s = wait_status(&a, 30, "member 2 failed", |s| state(s, 2) == "failed");
    assert_eq!(member(&s, 2)["readd"], true, "{s}");
    ex[2].restart(&[], &[]);
    // Manual: still failed a while after its server is back.
    std::thread::sleep(Duration::from_secs(5));
    assert_eq!(state(&status(&a).1, 2), "failed");
    let (code, _) = srv.stop();
    assert_eq!(code, 0);
    // Auto (the default): re-added by the next server, which found it
    // stale at its open.
    let srv = Serve::start(&a, &["--quiet", "--remote-timeout", "2", "--on-event", &cmd]);
    wait_status(&a, 30, "member 2 re-added and rebuilt", |s| s["health"] == "healthy");
    // And while it serves: member 1's server goes and comes back.
    ex[1].kill();
    passed(fio(t.path(), srv.port, "third", &["--rw=write", "--bs=64k", "--size=1M", "--offset=20M"]).spawn().unwrap(), "a write with member 1 gone");
    wait_status(&a, 30, "member 1 failed", |s| state(s, 1) == "failed");
    ex[1].restart(&[], &[]);
    wait_status(&a, 30, "member 1 re-added and rebuilt", |s| s["health"] == "healthy");
    ok(&["fail", "-a", &a, "--member", "3"]);
    passed(fio(t.path(), srv.port, "third", &["--rw=write", "--bs=64k", "--size=1M", "--offset=20M", "--verify_only"]).spawn().unwrap(), "the bytes written while member 1 was out");
    // Failed by request: kept out, though its server answers (as md keeps
    // a device failed with --fail), until a replace puts it back.
    std::thread::sleep(Duration::from_secs(5));
    assert_eq!(state(&status(&a).1, 3), "failed");
    ok(&["replace", "-a", &a, "--member", "3", "--drive", &ex[3].uri(), "--force"]);
    let got = std::fs::read_to_string(&log).unwrap();
    assert!(got.contains("re-add member 2 (") && got.contains("answers again with the session it left in"), "{got}");
    // 2 MiB at 40M of a 3-data-column array: 1 MiB bitmap regions of each
    // member, so at most two regions rebuilt; the rest passed over.
    let end = got.lines().find(|l| l.starts_with("rebuild-end")).unwrap_or_else(|| panic!("{got}"));
    assert!(end.contains("members [2] rebuilt") && end.contains("stripes passed over"), "{end}");
    // Member 0 out: member 2's bytes are read, both writes verify.
    ok(&["fail", "-a", &a, "--member", "0"]);
    passed(fio(t.path(), srv.port, "first", &["--rw=write", "--bs=64k", "--size=4M", "--verify_only"]).spawn().unwrap(), "the first bytes");
    passed(fio(t.path(), srv.port, "second", &["--rw=write", "--bs=64k", "--size=2M", "--offset=40M", "--verify_only"]).spawn().unwrap(), "the bytes written while it was out");
    let (code, _) = srv.stop();
    assert_eq!(code, 0);
}

#[test]
fn libnbd_is_loaded_for_the_first_remote_member_only() {
    let t = tempfile::tempdir().unwrap();
    let local = t.path().join("local");
    let a = local.to_str().unwrap();
    ok(&["create", "-a", a, "--level", "raid5", "--members", "3", "--member-size", "8M"]);
    // A server of local members never maps libnbd (nor GnuTLS, libxml2
    // and ICU, which it brings).
    let srv = Serve::start(a, &[]);
    let maps = std::fs::read_to_string(format!("/proc/{}/maps", srv.child.id())).unwrap();
    assert!(!maps.contains("libnbd"), "libnbd mapped by a server of local members");
    let (code, _) = srv.stop();
    assert_eq!(code, 0);
    // A server of remote members maps it when the first one connects,
    // and starts at once: it no longer reads the first member's label
    // again over a connection qemu-nbd makes wait for a free slot (that
    // start took 60 s, past the helper's 30).
    let ex: Vec<Export> = (0..3).map(|i| Export::start(t.path(), &format!("e{i}"), 16 << 20)).collect();
    let r = ex.iter().map(Export::uri).collect::<Vec<_>>().join(",");
    ok(&["create", "-a", &r, "--level", "raid5"]);
    let srv = Serve::start(&r, &[]);
    let maps = std::fs::read_to_string(format!("/proc/{}/maps", srv.child.id())).unwrap();
    assert!(maps.contains("libnbd.so"), "libnbd not mapped by a server of remote members");
    srv.stop();
    // A library that cannot be loaded: local arrays are unaffected, and a
    // remote member is a clear error that says what to install.
    let without = |args: &[&str]| {
        std::process::Command::new(env!("CARGO_BIN_EXE_mosaic")).args(args).env("MOSAIC_LIBNBD", t.path().join("no-libnbd.so")).output().unwrap()
    };
    let input = t.path().join("in.bin");
    std::fs::write(&input, common::pattern(64 << 10, 7)).unwrap();
    let o = without(&["write", "-a", a, "--offset", "0", "--input", input.to_str().unwrap()]);
    assert!(o.status.success(), "{}", common::stderr(&o));
    let o = without(&["status", "-a", &r]);
    let e = common::stderr(&o);
    assert!(!o.status.success() && e.contains("cannot load libnbd") && e.contains("no-libnbd.so") && e.contains("libnbd0") && e.contains(&ex[0].uri()), "{e}");
    assert!(!e.contains("panicked"), "{e}");
}

/// A remote member whose server answers EIO for a few unreadable sectors,
/// until they are written (a disk's pending sectors, as nbdkit's eval
/// plugin over a raw file: `bad` lists the ranges, one "start end" a
/// line; a write covering one whole clears it).
struct BadSectors {
    child: Child,
    file: PathBuf,
    bad: PathBuf,
    sock: PathBuf,
}

impl BadSectors {
    fn start(dir: &Path, size: u64) -> BadSectors {
        let (file, bad, sock) = (dir.join("bad.img"), dir.join("bad.list"), dir.join("bad.sock"));
        std::fs::File::create(&file).unwrap().set_len(size).unwrap();
        std::fs::write(&bad, "").unwrap();
        let (f, b) = (file.display(), bad.display());
        let pread = format!(
            r#"while read a z; do if [ "$4" -lt "$z" ] && [ $(($4 + $3)) -gt "$a" ]; then echo "EIO unreadable sector at $a" >&2; exit 1; fi; done < {b}
               dd if={f} skip=$4 count=$3 iflag=count_bytes,skip_bytes status=none"#
        );
        let pwrite = format!(
            r#"while read a z; do if [ "$4" -gt "$a" ] || [ $(($4 + $3)) -lt "$z" ]; then echo "$a $z"; fi; done < {b} > {b}.new; mv {b}.new {b}
               dd of={f} seek=$4 conv=notrunc oflag=seek_bytes status=none"#
        );
        let mut c = std::process::Command::new("nbdkit");
        c.args(["--foreground", "--exportname=m", "-U"]).arg(&sock).arg("eval");
        c.arg(format!("get_size=stat -Lc %s {f}")).arg(format!("pread={pread}")).arg(format!("pwrite={pwrite}"));
        c.args(["can_flush=exit 0", "flush=exit 0"]);
        let _ = std::fs::remove_file(&sock);
        let child = c.stdout(std::process::Stdio::null()).stderr(std::process::Stdio::null()).spawn().expect("nbdkit");
        let t0 = Instant::now();
        while !sock.exists() && t0.elapsed() < Duration::from_secs(20) {
            std::thread::sleep(Duration::from_millis(20));
        }
        BadSectors { child, file, bad, sock }
    }
    fn uri(&self) -> String {
        format!("nbd+unix:///m?socket={}", self.sock.display())
    }
    /// Device bytes `at..at + len` unreadable from now on.
    fn spoil(&self, at: u64, len: u64) {
        let mut l = std::fs::read_to_string(&self.bad).unwrap();
        l += &format!("{at} {}\n", at + len);
        std::fs::write(&self.bad, l).unwrap();
    }
    fn left(&self) -> String {
        std::fs::read_to_string(&self.bad).unwrap()
    }
}

impl Drop for BadSectors {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_file(&self.file);
    }
}

/// Read errors over NBD, end to end: a raid5 of four files and a remote
/// whose server answers EIO at a few sectors.  A read meeting one (in a
/// data unit) gets the right bytes and the sector is written again over
/// NBD; a scrub meeting one (in a parity unit) says it rebuilt it and
/// finds every stripe consistent; the member stays in service.
#[test]
fn unreadable_sectors_on_a_remote_member_are_rebuilt_over_nbd() {
    let t = tempfile::tempdir().unwrap();
    let remote = BadSectors::start(t.path(), 16 << 20);
    let local: Vec<String> = (0..4).map(|i| t.path().join(format!("m{i}.img")).display().to_string()).collect();
    for m in &local {
        std::fs::File::create(m).unwrap().set_len(16 << 20).unwrap();
    }
    let a = format!("{},{}", local.join(","), remote.uri());
    ok(&["create", "-a", &a, "--level", "raid5", "--stripe-unit", "64K", "--force"]);
    let (data, out) = write_and_read_back(t.path(), &a, 1);
    // raid5 of five rotates parity: member 4 holds stripe 0's parity and
    // a data unit of stripe 1.
    let base = mosaic_array::DATA_OFFSET;
    remote.spoil(base + (64 << 10) + 8192, 4096);
    assert!(read_back(&a, data.len(), &out) == data, "the read got the rebuilt bytes");
    assert_eq!(remote.left(), "", "the sector was written again over NBD");
    remote.spoil(base + 4096, 4096);
    let scrub = ok(&["scrub", "-a", &a]);
    assert!(scrub.contains("0 stripes with mismatched parity") && scrub.contains("1 unreadable member range(s) rebuilt"), "{scrub}");
    assert_eq!(remote.left(), "");
    let s = json(&String::from_utf8_lossy(&mosaic(&["status", "-a", &a, "--json"]).stdout));
    assert_eq!(state(&s[0], 4), "active", "{s}");
    assert!(read_back(&a, data.len(), &out) == data);
}

/// One writer per array of remote members on this machine: while a
/// server holds them, another process's write is refused (NBD has no
/// locks: each export's lock is a file in the runtime directory, named by
/// its URI); the server is found by any member that answers; once it
/// stops, the write goes through.
#[test]
fn one_writer_per_array_of_remote_members() {
    let t = tempfile::tempdir().unwrap();
    let mut ex: Vec<Export> = (0..3).map(|i| Export::nbdkit(t.path(), &format!("e{i}"), 16 << 20)).collect();
    let a = ex.iter().map(Export::uri).collect::<Vec<_>>().join(",");
    ok(&["create", "-a", &a, "--level", "raid5", "--journal", t.path().join("j.img").to_str().unwrap()]);
    let input = t.path().join("in.bin");
    std::fs::write(&input, vec![0x42u8; 64 << 10]).unwrap();
    let mut srv = Serve::start(&a, &["--quiet", "--remote-timeout", "2"]);
    let e = fails(&["write", "-a", &a, "--offset", "0", "--input", input.to_str().unwrap()]);
    assert!(e.contains("in use by another mosaic process") && e.contains("the array is served by `mosaic serve`"), "{e}");
    // Each export is held: a list naming one member first is refused too.
    let reordered = [ex[1].uri(), ex[0].uri(), ex[2].uri()].join(",");
    assert!(fails(&["write", "-a", &reordered, "--offset", "0", "--input", input.to_str().unwrap()]).contains("in use by another mosaic process"));
    // The first member's server gone: the array's own server is still
    // found by the next member, and stops when asked.
    ex[0].kill();
    let (_, s) = status(&a);
    assert_eq!(s["served"], true, "{s}");
    assert!(ok(&["stop", "-a", &a]).contains("stopping"));
    srv.wait_exit("the server asked to stop");
    ex[0].restart(&[], &[]);
    ok(&["write", "-a", &a, "--offset", "0", "--input", input.to_str().unwrap()]);
    let out = t.path().join("out.bin");
    assert!(read_back(&a, 64 << 10, &out) == vec![0x42u8; 64 << 10]);
}

/// An export served read-only cannot be a member, spare, replacement or
/// journal: refused at once, naming it, with nothing created or written
/// (the array would start with it failed).
#[test]
fn a_read_only_export_is_refused_where_writes_go() {
    let t = tempfile::tempdir().unwrap();
    let mut ex: Vec<Export> = (0..4).map(|i| Export::nbdkit(t.path(), &format!("e{i}"), 16 << 20)).collect();
    ex[2].restart(&["-r"], &[]);
    let j = t.path().join("j.img");
    let a = ex[..3].iter().map(Export::uri).collect::<Vec<_>>().join(",");
    let e = fails(&["create", "-a", &a, "--level", "raid5", "--journal", j.to_str().unwrap()]);
    assert!(e.contains(&ex[2].uri()) && e.contains("exports it read-only"), "{e}");
    assert!(!j.exists());
    assert!(std::fs::read(&ex[0].file).unwrap().iter().all(|&b| b == 0), "a member was written");
    ex[2].restart(&[], &[]);
    ok(&["create", "-a", &a, "--level", "raid5", "--journal", j.to_str().unwrap()]);
    ex[3].restart(&["-r"], &[]);
    let e = fails(&["add", "-a", &a, "--spare", &ex[3].uri()]);
    assert!(e.contains("exports it read-only"), "{e}");
    ok(&["fail", "-a", &a, "--member", "1"]);
    let e = fails(&["replace", "-a", &a, "--member", "1", "--drive", &ex[3].uri()]);
    assert!(e.contains("exports it read-only"), "{e}");
}

/// `assemble --scan` takes NBD URIs (each looked at by its label, one that
/// does not answer named and missing), and `status` of an array of remote
/// members too few of which answer is the FAILED report (exit 5, JSON
/// too), as for a directory array, not a bare error.
#[test]
fn remote_members_are_scanned_and_a_failed_remote_array_has_a_status() {
    let t = tempfile::tempdir().unwrap();
    let mut ex: Vec<Export> = (0..4).map(|i| Export::nbdkit(t.path(), &format!("e{i}"), 16 << 20)).collect();
    let uris: Vec<String> = ex.iter().map(Export::uri).collect();
    let a = uris.join(",");
    ok(&["create", "-a", &a, "--level", "raid5", "--no-journal"]);
    let scan: Vec<&str> = ["assemble", "--scan"].into_iter().chain(uris.iter().map(String::as_str)).collect();
    let out = ok(&scan);
    assert!(out.contains("(fixed, raid5): 4 of 4 members") && out.contains(&format!("  -a {a}")), "{out}");
    ex[1].kill();
    ex[3].kill();
    let o = mosaic(&scan);
    let (out, err) = (String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    assert_eq!(o.status.code(), Some(4), "{out}{err}");
    assert!(out.contains("2 of 4 members, INCOMPLETE") && err.contains(&format!("{}: ", uris[1])) && err.contains("its label could not be read"), "{out}{err}");
    let o = mosaic(&["--remote-timeout", "2", "status", "-a", &a, "--json"]);
    assert_eq!(o.status.code(), Some(5), "{}", String::from_utf8_lossy(&o.stderr));
    let s = json(&String::from_utf8_lossy(&o.stdout));
    assert_eq!(s[0]["health"], "failed", "{s}");
    let text = String::from_utf8_lossy(&mosaic(&["--remote-timeout", "2", "status", "-a", &a]).stdout).into_owned();
    assert!(text.contains("FAILED") && text.contains("members [1, 3] are missing"), "{text}");
}
