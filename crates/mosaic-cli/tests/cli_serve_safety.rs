//! `mosaic serve` against clients that misbehave, over real sockets: a
//! client vanishing with replies pending (SIGPIPE), idle connections beyond
//! the limit, writers that stall after a 32 MiB header (memory), a member
//! that fails while serving, and sub-block requests under the default
//! block-size negotiation.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use mosaic_nbd::proto::*;
use mosaic_nbd::{Command, Request};

use crate::common;
use common::serve::Serve;
use common::{fails, ok};

/// Make a raid5 array of four 16 MiB member files with a 16 KiB stripe unit.
fn raid5(dir: &Path) -> String {
    let d = dir.to_str().unwrap().to_string();
    ok(&["create", "-a", &d, "--level", "raid5", "--members", "4", "--member-size", "16M", "--stripe-unit", "16K"]);
    d
}

/// A raw NBD client: greeting, NBD_OPT_GO, simple requests.
struct Nbd {
    s: TcpStream,
    /// (minimum, preferred, maximum) from NBD_INFO_BLOCK_SIZE.
    block: (u32, u32, u32),
}

fn connect(port: u16) -> TcpStream {
    let s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    s
}

fn be32(b: &[u8]) -> u32 {
    u32::from_be_bytes(b[..4].try_into().unwrap())
}

/// Read the greeting and send the client flags.
fn greet(s: &mut TcpStream) {
    let mut g = [0u8; 18];
    s.read_exact(&mut g).unwrap();
    assert_eq!(&g[..8], &NBDMAGIC.to_be_bytes());
    s.write_all(&(FLAG_C_FIXED_NEWSTYLE | FLAG_C_NO_ZEROES).to_be_bytes()).unwrap();
}

/// Send NBD_OPT_GO for the default export asking for block sizes.
fn send_go(s: &mut TcpStream) {
    let mut o = IHAVEOPT.to_be_bytes().to_vec();
    o.extend_from_slice(&OPT_GO.to_be_bytes());
    o.extend_from_slice(&8u32.to_be_bytes());
    o.extend_from_slice(&[0, 0, 0, 0, 0, 1]);
    o.extend_from_slice(&INFO_BLOCK_SIZE.to_be_bytes());
    s.write_all(&o).unwrap();
}

/// One option reply: (type, data).
fn opt_reply(s: &mut TcpStream) -> (u32, Vec<u8>) {
    let mut h = [0u8; 20];
    s.read_exact(&mut h).unwrap();
    assert_eq!(&h[..8], &REPLY_MAGIC.to_be_bytes());
    let mut d = vec![0u8; be32(&h[16..]) as usize];
    s.read_exact(&mut d).unwrap();
    (be32(&h[12..]), d)
}

impl Nbd {
    /// Connect and negotiate with GO.
    fn open(port: u16) -> Nbd {
        let mut s = connect(port);
        greet(&mut s);
        send_go(&mut s);
        let mut block = (0, 0, 0);
        loop {
            let (ty, d) = opt_reply(&mut s);
            match ty {
                REP_ACK => return Nbd { s, block },
                REP_INFO if d[..2] == INFO_BLOCK_SIZE.to_be_bytes() => block = (be32(&d[2..]), be32(&d[6..]), be32(&d[10..])),
                REP_INFO => {}
                t => panic!("GO answered with {t:#x}: {}", String::from_utf8_lossy(&d)),
            }
        }
    }

    fn send(&mut self, cmd: Command, cookie: u64, offset: u64, length: u32, payload: &[u8]) {
        let mut v = Request { flags: 0, cmd, cookie, offset, length: length as u64 }.encode().to_vec();
        v.extend_from_slice(payload);
        self.s.write_all(&v).unwrap();
    }

    /// One simple reply: (cookie, error).
    fn reply(&mut self) -> (u64, u32) {
        let mut h = [0u8; 16];
        self.s.read_exact(&mut h).unwrap();
        assert_eq!(be32(&h), SIMPLE_REPLY_MAGIC);
        (u64::from_be_bytes(h[8..].try_into().unwrap()), be32(&h[4..]))
    }

    fn cmd(&mut self, cmd: Command, offset: u64, length: u32, payload: &[u8]) -> u32 {
        self.send(cmd, 9, offset, length, payload);
        let (cookie, err) = self.reply();
        assert_eq!(cookie, 9);
        err
    }

    fn write(&mut self, offset: u64, data: &[u8]) -> u32 {
        self.cmd(Command::Write, offset, data.len() as u32, data)
    }

    fn read(&mut self, offset: u64, len: u32) -> Vec<u8> {
        self.send(Command::Read, 8, offset, len, &[]);
        assert_eq!(self.reply(), (8, 0), "READ at {offset} len {len}");
        let mut b = vec![0u8; len as usize];
        self.s.read_exact(&mut b).unwrap();
        b
    }
}

fn pattern(seed: u8, len: usize) -> Vec<u8> {
    (0..len).map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed) ^ (i >> 9) as u8).collect()
}

/// The message in the log that starts with `prefix` (lines are timestamp,
/// level, message, fields).
fn line<'a>(log: &'a [String], prefix: &str) -> &'a str {
    common::serve::message(log, prefix).unwrap_or_else(|| panic!("no message starting {prefix:?} in {log:#?}"))
}

fn assert_clean_stop(code: i32, log: &[String]) {
    assert_eq!(code, 0, "exit code; log: {log:#?}");
    let last = log.last().map(|l| std::slice::from_ref(l)).unwrap_or_default();
    assert_eq!(common::serve::message(last, "mosaic serve: "), Some("mosaic serve: array flushed and closed clean"), "{log:#?}");
}

#[test]
fn clients_vanishing_with_large_reads_pending_do_not_kill_the_server() {
    let t = tempfile::tempdir().unwrap();
    let arr = raid5(&t.path().join("arr"));
    let mut srv = Serve::start(&arr, &["--quiet"]);
    let mut c = Nbd::open(srv.port);
    assert_eq!(c.write(0, &pattern(1, 1 << 20)), 0);
    for round in 0..20 {
        let mut v = Nbd::open(srv.port);
        for i in 0..8u64 {
            v.send(Command::Read, i, 0, 4 << 20, &[]);
        }
        drop(v);
        if round % 5 == 4 {
            std::thread::sleep(Duration::from_millis(100));
            assert!(srv.alive(), "serve died in round {round}: {:?}", srv.lines());
        }
    }
    std::thread::sleep(Duration::from_millis(300));
    assert!(srv.alive(), "serve died: {:?}", srv.lines());
    assert_eq!(c.read(0, 1 << 20), pattern(1, 1 << 20), "the old client is still served");
    let mut n = Nbd::open(srv.port);
    assert_eq!(n.read(0, 1 << 20), pattern(1, 1 << 20), "a new client is served");
    drop((c, n));
    let (code, log) = srv.stop();
    assert_clean_stop(code, &log);
    assert!(line(&log, "mosaic serve: stopping: 22 connections, ").contains(" 0 errors, 0 member(s) failed while serving"), "{log:#?}");
}

#[test]
fn idle_connections_beyond_the_limit_get_a_visible_refusal_then_time_out() {
    let t = tempfile::tempdir().unwrap();
    let arr = raid5(&t.path().join("arr"));
    let srv = Serve::start(&arr, &["--max-connections", "4", "--handshake-timeout", "2"]);
    let started = Instant::now();
    // Six connections that never handshake: four fill the slots.
    let idle: Vec<TcpStream> = (0..6)
        .map(|_| {
            let mut s = connect(srv.port);
            let mut g = [0u8; 18];
            s.read_exact(&mut g).unwrap();
            s
        })
        .collect();
    std::thread::sleep(Duration::from_millis(200));
    let mut c = connect(srv.port);
    greet(&mut c);
    send_go(&mut c);
    let (ty, msg) = opt_reply(&mut c);
    assert_eq!(ty, REP_ERR_POLICY);
    assert_eq!(String::from_utf8_lossy(&msg), "server busy: 4 connections (the limit); try again later");
    assert!(started.elapsed() < Duration::from_secs(2), "refusal came only after {:?}", started.elapsed());
    // After the handshake time limit the idle ones are gone...
    for mut s in idle {
        let mut b = [0u8; 1];
        assert!(matches!(s.read(&mut b), Ok(0) | Err(_)), "an idle connection was kept");
    }
    assert!(started.elapsed() < Duration::from_secs(8), "idle connections dropped only after {:?}", started.elapsed());
    // ...and a new client is served.
    std::thread::sleep(Duration::from_millis(200));
    let mut n = Nbd::open(srv.port);
    assert_eq!(n.write(4096, &pattern(2, 4096)), 0);
    assert_eq!(n.read(4096, 4096), pattern(2, 4096));
    drop(n);
    let (code, log) = srv.stop();
    assert_clean_stop(code, &log);
    assert!(
        log.iter().any(|l| l.contains(" WARN mosaic-nbd: refusing connection from 127.0.0.1:")
            && l.ends_with(": server busy: 4 connections (the limit); try again later")),
        "{log:#?}"
    );
    assert!(log.iter().any(|l| l.contains("handshake not finished within 2s; closing this connection")), "{log:#?}");
    assert!(line(&log, "mosaic serve: stopping: ").starts_with("mosaic serve: stopping: 5 connections (3 refused: server busy), "), "{log:#?}");
}

#[test]
fn writers_stalling_after_a_32_mib_header_do_not_raise_memory() {
    let t = tempfile::tempdir().unwrap();
    let arr = raid5(&t.path().join("arr"));
    let srv = Serve::start(&arr, &["--quiet"]);
    // Warm up: the fast path's buffers exist before the baseline.
    let mut c = Nbd::open(srv.port);
    for i in 0..64u64 {
        assert_eq!(c.write(i * 65536, &pattern(i as u8, 65536)), 0);
    }
    assert_eq!(c.read(0, 1 << 20).len(), 1 << 20);
    std::thread::sleep(Duration::from_millis(300));
    let before = srv.rss();
    let mut stalled = Vec::new();
    for _ in 0..40 {
        let mut w = Nbd::open(srv.port);
        w.send(Command::Write, 1, 0, 32 << 20, &[]);
        stalled.push(w);
    }
    std::thread::sleep(Duration::from_secs(1));
    let after = srv.rss();
    assert!(after < before + (48 << 20), "RSS rose from {} MiB to {} MiB with 40 stalled writers", before >> 20, after >> 20);
    // Served while they stall, and after they are gone.
    assert_eq!(c.write(4 << 20, &pattern(3, 4096)), 0);
    assert_eq!(c.read(4 << 20, 4096), pattern(3, 4096));
    drop(stalled);
    let mut n = Nbd::open(srv.port);
    assert_eq!(n.read(4 << 20, 4096), pattern(3, 4096));
    assert_eq!(n.read(65536, 65536), pattern(1, 65536));
    drop((c, n));
    let (code, log) = srv.stop();
    assert_clean_stop(code, &log);
}

/// Serve `arr`, write and flush 2 MiB, then cut `member` short past its
/// first 4 KiB (its reads fail): the reads are still right, the failure
/// is logged once as it happens.  The server's exit code and log.
fn cut_a_member_while_serving(arr: &str, member: &Path) -> (i32, Vec<String>) {
    let srv = Serve::start(arr, &[]);
    let mut c = Nbd::open(srv.port);
    let data = pattern(4, 2 << 20);
    assert_eq!(c.write(0, &data), 0);
    assert_eq!(c.cmd(Command::Flush, 0, 0, &[]), 0);
    std::fs::OpenOptions::new().write(true).open(member).unwrap().set_len(4096).unwrap();
    assert_eq!(c.read(0, 2 << 20), data, "degraded reads are still correct");
    assert_eq!(c.read(0, 2 << 20), data, "and again, with the member failed");
    std::thread::sleep(Duration::from_millis(500));
    let failed: Vec<String> = srv.lines().into_iter().filter(|l| l.contains("failed while serving:")).collect();
    assert_eq!(failed.len(), 1, "logged as it happened, once: {:#?}", srv.lines());
    drop(c);
    srv.stop()
}

#[test]
fn a_member_failing_while_serving_is_logged_with_a_timestamp_and_counted() {
    let t = tempfile::tempdir().unwrap();
    let dir = t.path().join("arr");
    let arr = raid5(&dir);
    let member: PathBuf = dir.join("member-01.img");
    let (code, log) = cut_a_member_while_serving(&arr, &member);
    // 2026-01-02T03:04:05.678Z  WARN mosaic serve: member 1 (PATH) failed while serving: ERROR; serving degraded kind=member-failed array=UUID member=1
    let l = log.iter().find(|l| l.contains("failed while serving:")).unwrap();
    let ts = &l[..24];
    let b = ts.as_bytes();
    assert!(
        b[4] == b'-' && b[7] == b'-' && b[10] == b'T' && b[13] == b':' && b[16] == b':' && b[19] == b'.' && b[23] == b'Z',
        "not an RFC 3339 UTC timestamp: {ts}"
    );
    assert!(ts.chars().filter(|c| c.is_ascii_digit()).count() == 17, "{ts}");
    assert!(l[24..].starts_with("  WARN mosaic serve: "), "a warning: {l}");
    let rest = line(&log, "mosaic serve: member 1 (");
    let want = format!("mosaic serve: member 1 ({}) failed while serving: ", member.display());
    assert!(rest.starts_with(&want), "{rest:?} should start with {want:?}");
    assert!(rest.ends_with("; serving degraded") && rest.len() > want.len() + "; serving degraded".len(), "no error text: {rest}");
    assert!(l.ends_with(" member=1") && l.contains(" kind=member-failed array="), "the event's fields: {l}");
    assert!(line(&log, "mosaic serve: stopping: ").contains(", 1 member(s) failed while serving; flushing"), "{log:#?}");
    assert_eq!(code, 0, "{log:#?}");
}

/// A DVS member failing while serving (its file cut short: its reads
/// fail) is logged and counted as a fixed array's is, and reads go on
/// degraded.
#[test]
fn a_dvs_member_failing_while_serving_is_logged_and_counted() {
    let t = tempfile::tempdir().unwrap();
    let dir = t.path().join("dvs");
    let a = dir.to_str().unwrap();
    ok(&["create", "-a", a, "--level", "dvs", "--members", "3", "--member-size", "8M", "--zoned", "--stripe-unit", "64K", "--zone-size", "1M"]);
    let member: PathBuf = dir.join("dvs-1.zoned");
    let (code, log) = cut_a_member_while_serving(a, &member);
    let rest = line(&log, "mosaic serve: member 1 (");
    assert!(rest.starts_with(&format!("mosaic serve: member 1 ({}) failed while serving: ", member.display())), "{rest}");
    assert!(line(&log, "mosaic serve: stopping: ").contains(", 1 member(s) failed while serving; flushing"), "{log:#?}");
    assert_eq!(code, 0, "{log:#?}");
}

/// Two members of a raid5 lost while serving: the events say the array
/// failed, not "serving degraded" (which the second event said).
#[test]
fn members_failing_beyond_the_code_say_the_array_failed() {
    let t = tempfile::tempdir().unwrap();
    let dir = t.path().join("arr");
    let arr = raid5(&dir);
    let srv = Serve::start(&arr, &["--quiet"]);
    let mut c = Nbd::open(srv.port);
    assert_eq!(c.write(0, &pattern(5, 1 << 20)), 0);
    assert_eq!(c.cmd(Command::Flush, 0, 0, &[]), 0);
    for m in ["member-01.img", "member-02.img"] {
        std::fs::OpenOptions::new().write(true).open(dir.join(m)).unwrap().set_len(4096).unwrap();
    }
    c.send(Command::Read, 8, 0, 1 << 20, &[]);
    let (cookie, err) = c.reply();
    assert!(cookie == 8 && err != 0, "the read fails: {err}");
    std::thread::sleep(Duration::from_millis(500));
    drop(c);
    let (_, log) = srv.stop();
    let failed: Vec<&String> = log.iter().filter(|l| l.contains("failed while serving:")).collect();
    assert!(!failed.is_empty(), "{log:#?}");
    let last = failed.last().unwrap();
    assert!(last.contains("too many members are out: the array has FAILED and serves no I/O") && !last.contains("serving degraded"), "{last}");
    // A failed request is logged under --quiet too.
    assert!(log.iter().any(|l| l.contains("Read at 0 len") && l.contains("failed")), "{log:#?}");
}

#[test]
fn the_default_negotiation_lets_clients_write_512_byte_pieces() {
    let t = tempfile::tempdir().unwrap();
    let arr = raid5(&t.path().join("arr"));
    let srv = Serve::start(&arr, &["--quiet"]);
    let mut c = Nbd::open(srv.port);
    assert_eq!(c.block, (512, 16384, MAX_PAYLOAD), "advertised block sizes");
    assert_eq!(c.write(0, &pattern(5, 8192)), 0);
    // An ext4-like 1 KiB superblock write and a lone 512-byte sector.
    assert_eq!(c.write(1024, &pattern(6, 1024)), 0);
    assert_eq!(c.write(4096 + 1536, &pattern(7, 512)), 0);
    let mut want = pattern(5, 8192);
    want[1024..2048].copy_from_slice(&pattern(6, 1024));
    want[5632..6144].copy_from_slice(&pattern(7, 512));
    assert_eq!(c.read(0, 8192), want);
    assert_eq!(c.read(1536, 512), &want[1536..2048], "an unaligned 512-byte read");
    // Zero-length requests are refused and the connection goes on.
    assert_eq!(c.cmd(Command::Write, 512, 0, &[]), EINVAL);
    assert_eq!(c.cmd(Command::Read, 512, 0, &[]), EINVAL);
    assert_eq!(c.read(0, 8192), want);
    drop(c);
    let (code, log) = srv.stop();
    assert_clean_stop(code, &log);
}

/// `--io-timeout`: a client that stops part-way through a WRITE payload
/// is cut off once nothing arrived for that long, its WRITE never done;
/// others are served meanwhile and after.
#[test]
fn a_client_stalled_in_a_payload_is_cut_off_after_the_io_timeout() {
    let t = tempfile::tempdir().unwrap();
    let arr = raid5(&t.path().join("arr"));
    let srv = Serve::start(&arr, &["--quiet", "--io-timeout", "0.5"]);
    let mut stalled = Nbd::open(srv.port);
    stalled.send(Command::Write, 3, 0, 65536, &pattern(1, 4096));
    let t0 = std::time::Instant::now();
    let mut b = [0u8; 1];
    assert!(matches!(stalled.s.read(&mut b), Ok(0) | Err(_)), "the stalled connection was closed");
    let took = t0.elapsed();
    assert!(took >= Duration::from_millis(400) && took < Duration::from_secs(5), "closed after {took:?}");
    let mut c = Nbd::open(srv.port);
    assert_eq!(c.read(0, 4096), vec![0u8; 4096], "the stalled WRITE was never done");
    drop(c);
    let (code, log) = srv.stop();
    assert_clean_stop(code, &log);
    // --quiet hides connections coming and going, not why one was cut off.
    assert!(log.iter().any(|l| l.contains("conn 1: short WRITE payload (nothing of it for 500ms); closing")), "a quiet server says why it closed: {log:?}");
    assert!(!log.iter().any(|l| l.contains(": transmission")), "a quiet server logs no connection: {log:?}");
    let e = fails(&["serve", "-a", &arr, "--io-timeout", "0"]);
    assert!(e.contains("\"0\": give a positive number of seconds"), "{e}");
}

#[test]
fn bad_limits_are_refused_with_a_clear_error() {
    let t = tempfile::tempdir().unwrap();
    let arr = raid5(&t.path().join("arr"));
    let e = fails(&["serve", "-a", &arr, "--handshake-timeout", "soon"]);
    assert!(e.contains("invalid value 'soon' for '--handshake-timeout <HANDSHAKE_TIMEOUT>': \"soon\" is not a number of seconds"), "{e}");
    let e = fails(&["serve", "-a", &arr, "--handshake-timeout", "0"]);
    assert!(e.contains("\"0\": give a positive number of seconds"), "{e}");
    let e = fails(&["serve", "-a", &arr, "--max-connections", "0"]);
    assert!(e.contains("invalid value '0' for '--max-connections <MAX_CONNECTIONS>': 0 is not in 1..=4096"), "{e}");
    let e = fails(&["serve", "-a", &arr, "--min-block", "8K", "--listen", "127.0.0.1:0"]);
    assert!(e.contains("--min-block must be a power of two no larger than the array's block (4096)"), "{e}");
}
