//! A tier array through the CLI: `create --level tier`, then the same
//! write / read / info / fail / replace / rebuild / scrub / serve as every
//! kind, bytes checked; create's refusals.

use std::fs;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::time::Duration;

use mosaic_nbd::proto::*;
use mosaic_nbd::{Command, Request};

use crate::common;
use common::serve::Serve;
use common::{fails, json, mosaic, ok};

fn data(len: usize, seed: u32) -> Vec<u8> {
    (0..len as u32).map(|i| (i.wrapping_mul(2246822519).wrapping_add(seed) >> 11) as u8).collect()
}

fn read_back(spec: &str, off: &str, len: usize, out: &Path) -> Vec<u8> {
    ok(&["read", "-a", spec, "--offset", off, "--length", &len.to_string(), "--output", out.to_str().unwrap()]);
    fs::read(out).unwrap()
}

/// raid1 over 2 x 16 MiB fast, raid6 over 6 x 16 MiB slow; `extra` options.
fn create(dir: &str, extra: &[&str]) -> String {
    let mut args = vec![
        "create", "-a", dir, "--level", "tier", "--fast", "raid1:2", "--slow", "raid6:6", "--fast-size", "16M", "--slow-size", "16M",
        "--stripe-unit", "64K", "--journal-size", "4M", "--json",
    ];
    args.extend_from_slice(extra);
    ok(&args)
}

fn state(info: &serde_json::Value, m: usize) -> String {
    info["volume"]["members"][m]["state"]["state"].as_str().unwrap().to_string()
}

#[test]
fn a_tier_through_the_array_commands() {
    let t = tempfile::tempdir().unwrap();
    let a = t.path().join("tier");
    let ad = a.to_str().unwrap();
    let c = json(&create(ad, &["--tier-extents", "64K,256K", "--tier-v", "8"]));
    assert_eq!(c["kind"], "tier", "{c}");
    assert!(a.join("fast/journal.img").exists() && a.join("slow/member-05.img").exists());

    let bytes = data(700 << 10, 3);
    let input = t.path().join("in.bin");
    fs::write(&input, &bytes).unwrap();
    // An unaligned offset: the edges are read, modified and written back.
    let w = json(&ok(&["write", "-a", ad, "--offset", "70000", "--input", input.to_str().unwrap(), "--json"]));
    assert!(w["device_writes"].as_u64().unwrap() > 0, "{w}");
    let out = t.path().join("out.bin");
    assert!(read_back(ad, "70000", bytes.len(), &out) == bytes, "read differs");

    let info = json(&ok(&["info", "-a", ad, "--json"]));
    assert_eq!(info["kind"], "tier");
    assert_eq!(info["volume"]["level"], "tier");
    assert_eq!(info["volume"]["members"].as_array().unwrap().len(), 8, "2 fast + 6 slow members");
    assert_eq!(info["fast"]["level"], "raid1");
    assert_eq!(info["slow"]["level"], "raid6");
    assert!(info["stats"]["blocks_fast"].as_u64().unwrap() > 0, "{info}");
    let human = ok(&["info", "-a", ad]);
    assert!(human.contains("fragmentation") && human.contains("raid6 over 6 members") && human.contains("Normal"), "{human}");

    ok(&["fail", "-a", ad, "--member", "0"]);
    let info = json(&ok(&["info", "-a", ad, "--json"]));
    assert_eq!(state(&info, 0), "failed", "{info}");
    assert_eq!(info["volume"]["degraded"], true);
    assert!(read_back(ad, "70000", bytes.len(), &out) == bytes, "read with a fast member failed differs");
    // A slow member too (raid6 tolerates two).
    ok(&["fail", "-a", ad, "--member", "4"]);
    assert!(read_back(ad, "70000", bytes.len(), &out) == bytes, "read with a slow member failed differs");
    let e = fails(&["fail", "-a", ad, "--member", "1"]);
    assert!(e.contains("data would be lost"), "{e}");

    let r = ok(&["replace", "-a", ad, "--member", "0", "--drive", t.path().join("new-fast.img").to_str().unwrap()]);
    assert!(r.contains("rebuilt member(s) [0]"), "{r}");
    let r = ok(&["replace", "-a", ad, "--member", "4", "--drive", t.path().join("new-slow.img").to_str().unwrap()]);
    assert!(r.contains("rebuilt member(s) [4]"), "{r}");
    let info = json(&ok(&["info", "-a", ad, "--json"]));
    assert_eq!(info["volume"]["degraded"], false, "{info}");
    assert!(read_back(ad, "70000", bytes.len(), &out) == bytes, "read after rebuild differs");
    let s = ok(&["scrub", "-a", ad]);
    assert!(s.contains("all consistent"), "{s}");
    // The replaced members' old files stay in the inner directories: the
    // arrays recorded replacing them, so they are passed over unsaid.
    let o = mosaic(&["rebuild", "-a", ad]);
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success() && e.contains("error: nothing to rebuild") && !e.contains("before that member was replaced"), "{e}");
}

#[test]
fn create_refuses_bad_tiers_and_other_arrays_files() {
    let t = tempfile::tempdir().unwrap();
    let a = t.path().join("tier");
    let ad = a.to_str().unwrap();
    let base = ["create", "-a", ad, "--level", "tier", "--fast", "raid1:2", "--slow", "raid5:3"];
    let with = |extra: &[&'static str]| base.iter().copied().chain(extra.iter().copied()).collect::<Vec<&str>>();
    let e = fails(&with(&["--fast-size", "64M", "--slow-size", "8M"]));
    assert!(e.contains("larger than the slow tier"), "{e}");
    let e = fails(&["create", "-a", ad, "--level", "tier", "--fast", "raid1:2", "--member-size", "8M"]);
    assert!(e.contains("--slow"), "{e}");
    let e = fails(&["create", "-a", ad, "--level", "tier", "--fast", "raid6", "--slow", "raid5:3", "--member-size", "8M"]);
    assert!(e.contains("bad inner array \"raid6\""), "{e}");
    let e = fails(&["create", "-a", ad, "--level", "raid5", "--members", "3", "--member-size", "8M", "--fast", "raid1:2"]);
    assert!(e.contains("--level tier"), "{e}");
    assert!(!a.exists(), "a refused create left files");

    // Over another array's directory, and over an existing tier.
    ok(&["create", "-a", a.join("slow").to_str().unwrap(), "--level", "raid5", "--members", "3", "--member-size", "4M"]);
    let e = fails(&with(&["--fast-size", "4M", "--slow-size", "8M"]));
    assert!(e.contains("use --force"), "{e}");
    assert!(!a.join("fast").exists(), "a refused create left files");
    ok(&with(&["--fast-size", "4M", "--slow-size", "8M", "--force"]));
    let e = fails(&with(&["--fast-size", "4M", "--slow-size", "8M"]));
    assert!(e.contains("use --force"), "{e}");
    assert_eq!(json(&ok(&["info", "-a", ad, "--json"]))["kind"], "tier", "the refused create damaged the tier");
    // Another kind of array over the tier's directory: refused too.
    let e = fails(&["create", "-a", ad, "--level", "raid5", "--members", "3", "--member-size", "4M"]);
    assert!(e.contains("use --force"), "{e}");
    assert_eq!(json(&ok(&["info", "-a", ad, "--json"]))["kind"], "tier", "the refused create damaged the tier");
}

// ------------------------------------------------------------- over NBD

fn be32(b: &[u8]) -> u32 {
    u32::from_be_bytes(b[..4].try_into().unwrap())
}

/// A raw NBD client: fixed newstyle, NBD_OPT_GO, simple replies.
struct Nbd(TcpStream);

impl Nbd {
    fn open(port: u16) -> Nbd {
        let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        let mut g = [0u8; 18];
        s.read_exact(&mut g).unwrap();
        assert_eq!(&g[..8], &NBDMAGIC.to_be_bytes());
        s.write_all(&(FLAG_C_FIXED_NEWSTYLE | FLAG_C_NO_ZEROES).to_be_bytes()).unwrap();
        let mut o = IHAVEOPT.to_be_bytes().to_vec();
        o.extend_from_slice(&OPT_GO.to_be_bytes());
        o.extend_from_slice(&6u32.to_be_bytes());
        o.extend_from_slice(&[0, 0, 0, 0, 0, 0]);
        s.write_all(&o).unwrap();
        loop {
            let mut h = [0u8; 20];
            s.read_exact(&mut h).unwrap();
            let mut d = vec![0u8; be32(&h[16..]) as usize];
            s.read_exact(&mut d).unwrap();
            match be32(&h[12..]) {
                REP_ACK => return Nbd(s),
                REP_INFO => {}
                t => panic!("GO answered with {t:#x}: {}", String::from_utf8_lossy(&d)),
            }
        }
    }

    fn cmd(&mut self, cmd: Command, offset: u64, length: u32, payload: &[u8]) -> u32 {
        let mut v = Request { flags: 0, cmd, cookie: 7, offset, length: length as u64 }.encode().to_vec();
        v.extend_from_slice(payload);
        self.0.write_all(&v).unwrap();
        let mut h = [0u8; 16];
        self.0.read_exact(&mut h).unwrap();
        assert_eq!(be32(&h), SIMPLE_REPLY_MAGIC);
        assert_eq!(u64::from_be_bytes(h[8..].try_into().unwrap()), 7);
        be32(&h[4..])
    }

    /// NBD_CMD_DISC has no reply.
    fn disconnect(mut self) {
        let v = Request { flags: 0, cmd: Command::Disc, cookie: 8, offset: 0, length: 0 }.encode();
        self.0.write_all(&v).unwrap();
    }

    fn read(&mut self, offset: u64, len: u32) -> Vec<u8> {
        assert_eq!(self.cmd(Command::Read, offset, len, &[]), 0, "READ at {offset}");
        let mut b = vec![0u8; len as usize];
        self.0.read_exact(&mut b).unwrap();
        b
    }
}

#[test]
fn serve_exports_a_tier_and_demotes_while_idle() {
    let t = tempfile::tempdir().unwrap();
    let a = t.path().join("tier");
    let ad = a.to_str().unwrap();
    // Demote as soon as anything is on the fast tier.
    create(ad, &["--tier-high-water", "0.01", "--tier-low-water", "0"]);
    let s = Serve::start(ad, &[]);
    let mut c = Nbd::open(s.port);
    let mut want = vec![0u8; 4 << 20];
    for i in 0..24u32 {
        let off = ((i as usize * 389) % 960) * 4096;
        let d = data(16 << 10, i);
        assert_eq!(c.cmd(Command::Write, off as u64, d.len() as u32, &d), 0);
        want[off..off + d.len()].copy_from_slice(&d);
    }
    assert_eq!(c.cmd(Command::Flush, 0, 0, &[]), 0);
    assert!(c.read(0, 4 << 20) == want, "read over NBD differs");
    // Idle: the serve's idle thread demotes.
    std::thread::sleep(Duration::from_millis(1500));
    assert!(c.read(0, 4 << 20) == want, "read over NBD after idle demotion differs");
    c.disconnect();
    let (code, log) = s.stop();
    assert_eq!(code, 0, "{log:?}");
    let info = json(&ok(&["info", "-a", ad, "--json"]));
    assert!(info["stats"]["blocks_slow"].as_u64().unwrap() > 0, "the idle thread demoted nothing: {info}");
    let out = t.path().join("out.bin");
    assert!(read_back(ad, "0", 4 << 20, &out) == want, "read after serve differs");
    // A TRIM, unaligned at both ends: the whole blocks inside it leave the
    // map (slow and fast ones alike) and read as zeros, then and after a
    // restart; the bytes around them stay.
    let s = Serve::start(ad, &[]);
    let mut c = Nbd::open(s.port);
    assert_eq!(c.cmd(Command::Trim, 1000, (2 << 20) - 1000, &[]), 0);
    want[4096..2 << 20].fill(0);
    assert!(c.read(0, 4 << 20) == want, "read over NBD after the trim differs");
    c.disconnect();
    assert_eq!(s.stop().0, 0);
    let mapped = |i: &serde_json::Value| i["stats"]["blocks_fast"].as_u64().unwrap() + i["stats"]["blocks_slow"].as_u64().unwrap();
    let left = json(&ok(&["info", "-a", ad, "--json"]));
    assert!(mapped(&left) < mapped(&info), "the trimmed blocks left the map: {left}");
    assert!(read_back(ad, "0", 4 << 20, &out) == want, "read after the trim and a restart differs");
}

/// Zeroing over NBD (qemu-io `write -z`): allowed to unmap (no NO_HOLE),
/// a tier drops the blocks from its map instead of filling its fast tier
/// with zeros, and says it can zero fast; with NO_HOLE it writes them.
#[test]
fn a_zeroing_that_may_unmap_drops_tier_blocks() {
    let t = tempfile::tempdir().unwrap();
    let a = t.path().join("tier");
    let ad = a.to_str().unwrap();
    create(ad, &[]);
    let s = Serve::start(ad, &[]);
    let uri = format!("nbd://127.0.0.1:{}", s.port);
    common::qemu_io(&uri, &["write -P 0x5a 0 2M", "flush", "write -z -u 0 1M", "write -z 1M 512K", "read -P 0 0 1536K", "read -P 0x5a 1536K 512K"]);
    // A fast zero that may unmap is taken; one that must not is refused
    // at once (qemu-io's write -z -n: FAST_ZERO).
    common::qemu_io(&uri, &["write -z -u -n 2M 1M"]);
    let o = std::process::Command::new("qemu-io").args(["-f", "raw", &uri, "-c", "write -z -n 3M 64K"]).output().unwrap();
    let err = String::from_utf8_lossy(&o.stdout).to_string() + &String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("not supported"), "a fast zero with NO_HOLE: {err}");
    assert_eq!(s.stop().0, 0);
    let info = json(&ok(&["info", "-a", ad, "--json"]));
    let mapped = info["stats"]["blocks_fast"].as_u64().unwrap() + info["stats"]["blocks_slow"].as_u64().unwrap();
    assert_eq!(mapped, (1 << 20) / 4096, "the 512 KiB of zeros written and the 512 KiB of data: {info}");
}

// ------------------------------------- writes larger than the fast tier

/// The audit's tier: raid1 over 2 x 8 MiB fast (5.5 MiB of fast data),
/// raid5 over 3 x 16 MiB slow; `extra` options.
fn create_small(dir: &str, extra: &[&str]) {
    let mut args = vec!["create", "-a", dir, "--level", "tier", "--fast", "raid1:2", "--slow", "raid5:3", "--fast-size", "8M", "--slow-size", "16M"];
    args.extend_from_slice(extra);
    ok(&args);
}

#[test]
fn a_tier_takes_writes_larger_than_its_fast_tier_from_write_and_over_nbd() {
    let t = tempfile::tempdir().unwrap();
    let a = t.path().join("tier");
    let ad = a.to_str().unwrap();
    create_small(ad, &[]);
    let fast = json(&ok(&["info", "-a", ad, "--json"]))["stats"]["fast_blocks"].as_u64().unwrap();
    assert!(fast * 4096 < 6 << 20, "the fast tier holds {fast} blocks");
    let mut want = vec![0u8; 14 << 20];
    let six = data(6 << 20, 11);
    let input = t.path().join("six.bin");
    fs::write(&input, &six).unwrap();
    ok(&["write", "-a", ad, "--offset", "0", "--input", input.to_str().unwrap()]);
    want[..six.len()].copy_from_slice(&six);
    let out = t.path().join("out.bin");
    assert!(read_back(ad, "0", six.len(), &out) == six, "6 MiB read back differs");

    // An NBD client's 8 MiB write (the server takes up to 32 MiB), over
    // the end of the first.
    let s = Serve::start(ad, &[]);
    let mut c = Nbd::open(s.port);
    let eight = data(8 << 20, 12);
    assert_eq!(c.cmd(Command::Write, 5 << 20, eight.len() as u32, &eight), 0, "8 MiB NBD write");
    want[5 << 20..13 << 20].copy_from_slice(&eight);
    assert!(c.read(0, want.len() as u32) == want, "read over NBD differs");
    c.disconnect();
    let (code, log) = s.stop();
    assert_eq!(code, 0, "{log:?}");
    assert!(read_back(ad, "0", want.len(), &out) == want, "read after serve differs");
    let info = json(&ok(&["info", "-a", ad, "--json"]));
    assert!(info["stats"]["blocks_slow"].as_u64().unwrap() > 0, "{info}");
}

#[test]
fn tier_replays_with_writes_larger_than_the_fast_tier_do_the_same_operations_real_and_simulated() {
    let t = tempfile::tempdir().unwrap();
    let tr = t.path().join("t.csv");
    let sizes = [65536u64, 1 << 20, 6 << 20, 8 << 20];
    common::msr_trace(&tr, &common::TraceSpec { seed: 0x5eed_7153, requests: 40, span: 24 << 20, write_pct: 70, sizes: &sizes, hot: None });
    let a = t.path().join("tier");
    let ad = a.to_str().unwrap();
    create_small(ad, &["--stripe-unit", "64K", "--tier-request-clock", "1000000"]);
    let trs = tr.to_str().unwrap();
    let real = json(&ok(&["replay", "--trace", trs, "--on", ad, "--queue-depth", "1", "--json"]));
    let simulated = json(&ok(&[
        "replay", "--trace", trs, "--layout", "tier", "--stripe-unit", "64K", "--block-size", "4096", "--mode", "closed", "--queue-depth", "1", "--json",
        "--fast", "raid1:2", "--slow", "raid5:3", "--fast-size", "8M", "--slow-size", "16M", "--tier-request-clock", "1000000",
        "--device", "0-1=ssd:samsung-830-128g", "--device", "2-4=hdd:seagate-st91000640ss",
    ]));
    assert_eq!(real["requests"], 40);
    assert_eq!(real["wrapped"], 0, "the trace must fit the real array");
    let policy = |k: &str| simulated["policy"].as_array().unwrap().iter().find(|p| p[0] == k).map(|p| p[1].as_f64().unwrap()).unwrap();
    assert!(policy("foreground_demotions") > 0.0, "{}", simulated["policy"]);
    assert_eq!(common::device_counts(&real), common::device_counts(&simulated), "per-member counts differ (real, then simulated)");
}

/// `replace --hot` on a tier: the side's array copies the member while it
/// stays in service (the tier's writes reach the new drive through the
/// side's slot), and the new drives then serve: read back with the fast
/// mirror's other member and two other slow members failed.
#[test]
fn a_tier_hot_replaces_a_fast_and_a_slow_member() {
    let t = tempfile::tempdir().unwrap();
    let a = t.path().join("tier");
    let ad = a.to_str().unwrap();
    create(ad, &[]);
    let bytes = data(900 << 10, 5);
    let input = t.path().join("in.bin");
    fs::write(&input, &bytes).unwrap();
    ok(&["write", "-a", ad, "--offset", "0", "--input", input.to_str().unwrap()]);
    let fast = t.path().join("hot-fast.img");
    let r = json(&ok(&["replace", "-a", ad, "--member", "1", "--drive", fast.to_str().unwrap(), "--hot", "--json"]));
    assert_eq!((r["member"].as_u64(), r["drive"].as_str()), (Some(1), fast.to_str()), "{r}");
    let slow = t.path().join("hot-slow.img");
    let r = ok(&["replace", "-a", ad, "--member", "5", "--drive", slow.to_str().unwrap(), "--hot"]);
    assert!(r.contains("hot-replaced member 5 onto"), "{r}");
    let info = json(&ok(&["info", "-a", ad, "--json"]));
    let paths = info["volume"]["members"].to_string();
    assert!(paths.contains("hot-fast.img") && paths.contains("hot-slow.img") && info["volume"]["degraded"] == false, "{info}");
    for m in ["0", "2", "3"] {
        ok(&["fail", "-a", ad, "--member", m]);
    }
    let out = t.path().join("out.bin");
    assert!(read_back(ad, "0", bytes.len(), &out) == bytes, "wrong bytes from the hot-replaced members");
}
