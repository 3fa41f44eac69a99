//! The server against a hand-written client over real loopback sockets:
//! handshake, every command, bad input, concurrency, shutdown.

mod client;

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use client::*;
use mosaic_nbd::proto::*;
use mosaic_nbd::{serve, Command, Listener, MemExport, ServerConfig};

const SIZE: usize = 4 << 20;

/// `Export` methods that a test export passes on, as they are, to the
/// `MemExport` in its field `$inner`.
macro_rules! passes_on {
    ($inner:tt: $($m:ident),*) => { $( passes_on!(@ $inner $m); )* };
    (@ $inner:tt size) => { fn size(&self) -> u64 { self.$inner.size() } };
    (@ $inner:tt block_size) => { fn block_size(&self) -> u64 { self.$inner.block_size() } };
    (@ $inner:tt preferred_block) => { fn preferred_block(&self) -> u64 { self.$inner.preferred_block() } };
    (@ $inner:tt read) => { fn read(&self, off: u64, buf: &mut [u8]) -> std::io::Result<()> { self.$inner.read(off, buf) } };
    (@ $inner:tt write) => { fn write(&self, off: u64, data: &[u8]) -> std::io::Result<()> { self.$inner.write(off, data) } };
    (@ $inner:tt flush) => { fn flush(&self) -> std::io::Result<()> { self.$inner.flush() } };
    (@ $inner:tt trim) => { fn trim(&self, off: u64, len: u64) -> std::io::Result<()> { self.$inner.trim(off, len) } };
}

fn mem() -> Arc<MemExport> {
    Arc::new(MemExport::new(SIZE, 4096))
}

#[test]
fn go_advertises_size_flags_and_block_sizes() {
    let srv = Server::start(mem(), cfg());
    let mut c = Client::greet(connect(srv.addr), FLAG_C_FIXED_NEWSTYLE | FLAG_C_NO_ZEROES);
    c.info_or_go(OPT_INFO, "test").unwrap();
    assert_eq!(c.size, SIZE as u64);
    c.info_or_go(OPT_GO, "test").unwrap();
    assert_eq!(c.size, SIZE as u64);
    for f in [TFLAG_HAS_FLAGS, TFLAG_SEND_FLUSH, TFLAG_SEND_FUA, TFLAG_SEND_TRIM, TFLAG_SEND_WRITE_ZEROES, TFLAG_CAN_MULTI_CONN] {
        assert_eq!(c.tflags & f, f, "flag {f:#x}");
    }
    assert_eq!(c.tflags & TFLAG_READ_ONLY, 0);
    assert_eq!(c.block, Some((4096, 4096, MAX_PAYLOAD)));
    assert_eq!(c.write(0, &pattern(1, 4096)), 0);
    assert_eq!(c.read(0, 4096).unwrap(), pattern(1, 4096));
}

#[test]
fn list_unknown_options_and_abort() {
    let srv = Server::start(mem(), cfg());
    let mut c = Client::greet(connect(srv.addr), FLAG_C_FIXED_NEWSTYLE);
    c.send_opt(OPT_LIST, &[]);
    let r = c.opt_reply();
    assert_eq!(r.ty, REP_SERVER);
    assert_eq!(u32b(&r.data) as usize, 4);
    assert_eq!(&r.data[4..], b"test");
    assert_eq!(c.opt_reply().ty, REP_ACK);
    c.send_opt(OPT_LIST, b"junk");
    assert_eq!(c.opt_reply().ty, REP_ERR_INVALID);
    c.send_opt(OPT_STRUCTURED_REPLY, b"x");
    assert_eq!(c.opt_reply().ty, REP_ERR_INVALID);
    c.send_opt(99, b"whatever");
    assert_eq!(c.opt_reply().ty, REP_ERR_UNSUP);
    // An option longer than the server reads is read past and refused,
    // the connection going on (the spec: options are skipped by length).
    for opt in [99, OPT_LIST_META_CONTEXT] {
        c.send_opt(opt, &vec![7u8; 100 << 10]);
        let r = c.opt_reply();
        assert_eq!(r.ty, REP_ERR_TOO_BIG, "{}", String::from_utf8_lossy(&r.data));
        assert_eq!(String::from_utf8_lossy(&r.data), "an option of 102400 bytes is more than the 65536 this server reads");
    }
    assert_eq!(c.info_or_go(OPT_INFO, "nope"), Err(REP_ERR_UNKNOWN));
    c.send_opt(OPT_GO, &[0, 0, 0, 9, 1]); // name length past the payload
    assert_eq!(c.opt_reply().ty, REP_ERR_INVALID);
    c.send_opt(OPT_ABORT, &[]);
    assert_eq!(c.opt_reply().ty, REP_ACK);
    let mut b = [0u8; 1];
    assert_eq!(c.s.read(&mut b).unwrap(), 0, "server closes after abort");
}

#[test]
fn export_name_with_and_without_zeroes() {
    let srv = Server::start(mem(), cfg());
    for (flags, tail) in [(FLAG_C_FIXED_NEWSTYLE, 124usize), (FLAG_C_FIXED_NEWSTYLE | FLAG_C_NO_ZEROES, 0)] {
        let mut c = Client::greet(connect(srv.addr), flags);
        c.send_opt(OPT_EXPORT_NAME, b"test");
        let mut b = vec![0u8; 10 + tail];
        c.s.read_exact(&mut b).unwrap();
        assert_eq!(u64b(&b), SIZE as u64);
        assert!(b[10..].iter().all(|&x| x == 0));
        assert_eq!(c.write(4096, &pattern(2, 8192)), 0);
        assert_eq!(c.read(4096, 8192).unwrap(), pattern(2, 8192));
    }
    // An unknown name closes that connection.
    let mut c = Client::greet(connect(srv.addr), FLAG_C_FIXED_NEWSTYLE);
    c.send_opt(OPT_EXPORT_NAME, b"other");
    let mut b = [0u8; 1];
    assert_eq!(c.s.read(&mut b).unwrap(), 0);
}

#[test]
fn every_command() {
    let ex = mem();
    let srv = Server::start(ex.clone(), cfg());
    let mut c = open(srv.addr);
    let data = pattern(3, 64 << 10);
    assert_eq!(c.write(8192, &data), 0);
    assert_eq!(c.read(8192, data.len() as u32).unwrap(), data);
    assert_eq!(ex.snapshot(8192, data.len()), data);
    let f0 = ex.flushes();
    assert_eq!(c.cmd(Command::Flush, 0, 0, 0, &[]), 0);
    assert_eq!(ex.flushes(), f0 + 1);
    assert_eq!(c.cmd(Command::Write, CMD_FLAG_FUA, 0, 4096, &pattern(4, 4096)), 0);
    assert_eq!(ex.flushes(), f0 + 2, "FUA write flushes before its reply");
    assert_eq!(c.cmd(Command::WriteZeroes, 0, 8192 + 4096, 8192, &[]), 0);
    let back = c.read(8192, data.len() as u32).unwrap();
    assert_eq!(&back[..4096], &data[..4096]);
    assert!(back[4096..12288].iter().all(|&x| x == 0));
    assert_eq!(&back[12288..], &data[12288..]);
    assert_eq!(c.cmd(Command::WriteZeroes, CMD_FLAG_NO_HOLE | CMD_FLAG_FUA, 0, 4096, &[]), 0);
    assert_eq!(ex.flushes(), f0 + 3);
    assert_eq!(c.cmd(Command::Trim, 0, 0, 1 << 20, &[]), 0);
    // The largest payload works.
    let big = pattern(5, MAX_PAYLOAD as usize);
    let ex2 = Arc::new(MemExport::new(MAX_PAYLOAD as usize, 4096));
    let srv2 = Server::start(ex2.clone(), cfg());
    let mut c2 = open(srv2.addr);
    assert_eq!(c2.write(0, &big), 0);
    assert_eq!(c2.read(0, MAX_PAYLOAD).unwrap(), big);
    c.send(Command::Disc, 0, 9, 0, 0, &[]);
    let mut b = [0u8; 1];
    assert_eq!(c.s.read(&mut b).unwrap(), 0, "closed after DISC");
}

#[test]
fn bad_requests_get_errors_and_the_connection_survives() {
    let ex = mem();
    let srv = Server::start(ex.clone(), cfg());
    let mut c = open(srv.addr);
    let end = SIZE as u64;
    assert_eq!(c.read(end, 4096), Err(EINVAL), "read past the end");
    assert_eq!(c.read(end - 4096, 8192), Err(EINVAL), "read straddling the end");
    assert_eq!(c.write(end, &[7u8; 4096]), ENOSPC, "write past the end");
    assert_eq!(c.cmd(Command::WriteZeroes, 0, end - 4096, 8192, &[]), ENOSPC);
    assert_eq!(c.cmd(Command::Trim, 0, end, 4096, &[]), ENOSPC);
    assert_eq!(c.read(u64::MAX - 4095, 4096), Err(EINVAL), "offset overflow");
    assert_eq!(c.read(512, 4096), Err(EINVAL), "misaligned offset");
    assert_eq!(c.write(0, &[1u8; 1000]), EINVAL, "misaligned length");
    assert_eq!(c.read(0, MAX_PAYLOAD + 4096), Err(EINVAL), "oversized read");
    assert_eq!(c.cmd(Command::Unknown(42), 0, 0, 4096, &[]), EINVAL, "unknown command");
    assert_eq!(c.cmd(Command::Read, 1 << 12, 0, 4096, &[]), EINVAL, "unknown flag");
    assert_eq!(c.cmd(Command::Write, CMD_FLAG_NO_HOLE, 0, 4096, &[0u8; 4096]), EINVAL, "NO_HOLE on WRITE");
    // An oversized WRITE: its payload is drained, the stream stays in sync.
    let huge = vec![0x5au8; MAX_PAYLOAD as usize + 4096];
    assert_eq!(c.write(0, &huge), EINVAL, "oversized write");
    assert_eq!(ex.writes(), 0, "nothing was written");
    assert_eq!(c.write(0, &pattern(6, 4096)), 0);
    assert_eq!(c.read(0, 4096).unwrap(), pattern(6, 4096));
}

#[test]
fn read_only_refuses_writes() {
    let srv = Server::start(mem(), ServerConfig { read_only: true, ..cfg() });
    let mut c = open(srv.addr);
    assert_eq!(c.tflags & TFLAG_READ_ONLY, TFLAG_READ_ONLY);
    // Nothing offered that writes (as nbdkit's read-only exports).
    for f in [TFLAG_SEND_FUA, TFLAG_SEND_TRIM, TFLAG_SEND_WRITE_ZEROES, TFLAG_SEND_FAST_ZERO] {
        assert_eq!(c.tflags & f, 0, "flag {f:#x}");
    }
    assert_eq!(c.write(0, &[1u8; 4096]), EPERM);
    assert_eq!(c.cmd(Command::Trim, 0, 0, 4096, &[]), EPERM);
    assert_eq!(c.cmd(Command::WriteZeroes, 0, 0, 4096, &[]), EPERM);
    assert_eq!(c.read(0, 4096).unwrap(), vec![0u8; 4096]);
    assert_eq!(c.cmd(Command::Flush, 0, 0, 0, &[]), 0);
}

#[test]
fn unaligned_export_accepts_sub_block_requests() {
    let ex = Arc::new(MemExport::new(SIZE, 4096).with_unaligned());
    let srv = Server::start(ex.clone(), cfg());
    let mut c = open(srv.addr);
    assert_eq!(c.write(100, &pattern(7, 1000)), 0);
    assert_eq!(c.read(100, 1000).unwrap(), pattern(7, 1000));
    assert_eq!(ex.snapshot(100, 1000), pattern(7, 1000));
}

#[test]
fn garbage_closes_only_that_connection() {
    let srv = Server::start(mem(), cfg());
    let mut good = open(srv.addr);
    assert_eq!(good.write(0, &pattern(8, 4096)), 0);
    // Garbage instead of an option.
    let mut g = Client::greet(connect(srv.addr), FLAG_C_FIXED_NEWSTYLE);
    g.s.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
    let mut b = [0u8; 64];
    assert_eq!(g.s.read(&mut b).unwrap(), 0, "garbage handshake closes");
    // Unknown client flags.
    let g = Client::greet(connect(srv.addr), 0xffff_0000);
    let mut s = g.s;
    assert_eq!(s.read(&mut b).unwrap(), 0);
    // A huge option length.
    let mut g = Client::greet(connect(srv.addr), FLAG_C_FIXED_NEWSTYLE);
    let mut v = IHAVEOPT.to_be_bytes().to_vec();
    v.extend_from_slice(&OPT_GO.to_be_bytes());
    v.extend_from_slice(&u32::MAX.to_be_bytes());
    g.s.write_all(&v).unwrap();
    assert_eq!(g.s.read(&mut b).unwrap(), 0);
    // Bad request magic after GO.
    let mut bad = open(srv.addr);
    bad.s.write_all(&[0xffu8; 28]).unwrap();
    assert_eq!(bad.s.read(&mut b).unwrap(), 0, "bad request magic closes");
    // Raw random bytes from the first byte on.
    let mut raw = connect(srv.addr);
    let mut greet = [0u8; 18];
    raw.read_exact(&mut greet).unwrap();
    raw.write_all(&pattern(9, 4096)).unwrap();
    let _ = raw.read(&mut b);
    // The first connection and new ones keep working.
    assert_eq!(good.read(0, 4096).unwrap(), pattern(8, 4096));
    let mut again = open(srv.addr);
    assert_eq!(again.read(0, 4096).unwrap(), pattern(8, 4096));
}

#[test]
fn handshake_timeout_closes_silent_clients() {
    let srv = Server::start(mem(), ServerConfig { handshake_timeout: Duration::from_millis(200), ..cfg() });
    let mut s = connect(srv.addr);
    let mut greet = [0u8; 18];
    s.read_exact(&mut greet).unwrap();
    let t = std::time::Instant::now();
    let mut b = [0u8; 1];
    assert_eq!(s.read(&mut b).unwrap(), 0);
    assert!(t.elapsed() < Duration::from_secs(5));
    let mut c = open(srv.addr);
    assert_eq!(c.read(0, 4096).unwrap(), vec![0u8; 4096]);
}

#[test]
fn many_requests_in_flight() {
    let ex = mem();
    let srv = Server::start(ex.clone(), cfg());
    let mut c = open(srv.addr);
    let n = 256u64;
    // Pipeline every write without reading a reply.
    let mut w = c.s.try_clone().unwrap();
    let writer = std::thread::spawn(move || {
        for i in 0..n {
            let r = mosaic_nbd::Request { flags: 0, cmd: Command::Write, cookie: i, offset: i * 8192, length: 8192 };
            w.write_all(&r.encode()).unwrap();
            w.write_all(&pattern(100 + i, 8192)).unwrap();
        }
    });
    let mut seen = vec![false; n as usize];
    for _ in 0..n {
        let (cookie, err) = c.reply();
        assert_eq!(err, 0);
        assert!(!seen[cookie as usize], "one reply per cookie");
        seen[cookie as usize] = true;
    }
    writer.join().unwrap();
    // Pipeline every read; replies may come in any order.
    for i in 0..n {
        c.send(Command::Read, 0, 1000 + i, i * 8192, 8192, &[]);
    }
    for _ in 0..n {
        let (cookie, err) = c.reply();
        assert_eq!(err, 0);
        let i = cookie - 1000;
        let mut b = vec![0u8; 8192];
        c.s.read_exact(&mut b).unwrap();
        assert_eq!(b, pattern(100 + i, 8192), "read {i}");
    }
}

/// An inline export (the reader serves, replies of a buffered burst held
/// back and sent together): one burst of writes, a rejected request, reads
/// and DISC sent in a single write gets every reply, the read data, and
/// then the close — no reply is left held back when the reader stops.
#[test]
fn inline_export_answers_a_whole_burst_before_disc() {
    let ex = Arc::new(MemExport::new(SIZE, 4096).with_inline());
    let srv = Server::start(ex.clone(), cfg());
    let mut c = open(srv.addr);
    let n = 100u64;
    let mut burst = Vec::new();
    for i in 0..n {
        let r = mosaic_nbd::Request { flags: 0, cmd: Command::Write, cookie: i, offset: i * 4096, length: 4096 };
        burst.extend_from_slice(&r.encode());
        burst.extend_from_slice(&pattern(300 + i, 4096));
    }
    let bad = mosaic_nbd::Request { flags: 0, cmd: Command::Read, cookie: 999, offset: SIZE as u64, length: 4096 };
    burst.extend_from_slice(&bad.encode());
    for i in 0..n {
        let r = mosaic_nbd::Request { flags: 0, cmd: Command::Read, cookie: 1000 + i, offset: i * 4096, length: 4096 };
        burst.extend_from_slice(&r.encode());
    }
    let disc = mosaic_nbd::Request { flags: 0, cmd: Command::Disc, cookie: 5000, offset: 0, length: 0 };
    burst.extend_from_slice(&disc.encode());
    // From a thread: the replies must be read while the burst is sent.
    let mut w = c.s.try_clone().unwrap();
    let writer = std::thread::spawn(move || w.write_all(&burst).unwrap());
    // The reader serves in order: all writes are answered before the
    // reads, which therefore see the written data.
    let mut seen = vec![false; 2 * n as usize];
    for k in 0..2 * n + 1 {
        let (cookie, err) = c.reply();
        if cookie == 999 {
            assert_eq!(err, EINVAL, "the request past the end is rejected");
            continue;
        }
        assert_eq!(err, 0, "reply {k} (cookie {cookie})");
        if cookie < n {
            assert!(!seen[cookie as usize]);
            seen[cookie as usize] = true;
            continue;
        }
        let i = cookie - 1000;
        assert!(!seen[(n + i) as usize]);
        seen[(n + i) as usize] = true;
        let mut b = vec![0u8; 4096];
        c.s.read_exact(&mut b).unwrap();
        assert_eq!(b, pattern(300 + i, 4096), "read {i}");
    }
    assert!(seen.iter().all(|&x| x));
    writer.join().unwrap();
    let mut b = [0u8; 1];
    assert_eq!(c.s.read(&mut b).unwrap(), 0, "closed after DISC");
    assert_eq!(ex.writes(), n);
    let stats = srv.stop();
    assert_eq!(stats.errors, 1);
}

#[test]
fn several_connections_at_once() {
    let ex = mem();
    let srv = Server::start(ex.clone(), cfg());
    let addr = srv.addr;
    let threads: Vec<_> = (0..6u64)
        .map(|t| {
            std::thread::spawn(move || {
                let mut c = open(addr);
                for j in 0..20u64 {
                    let off = (t * 20 + j) * 16384;
                    assert_eq!(c.write(off, &pattern(t * 1000 + j, 16384)), 0);
                }
                assert_eq!(c.cmd(Command::Flush, 0, 0, 0, &[]), 0);
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    // Another connection sees every connection's writes.
    let mut c = open(addr);
    for t in 0..6u64 {
        for j in 0..20u64 {
            let off = (t * 20 + j) * 16384;
            assert_eq!(c.read(off, 16384).unwrap(), pattern(t * 1000 + j, 16384));
        }
    }
    let stats = srv.stop();
    assert_eq!(stats.connections, 7);
    assert_eq!(stats.errors, 0);
}

#[test]
fn unix_socket() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("nbd.sock");
    let l = Listener::bind_unix(&path).unwrap();
    assert!(l.uri("x").starts_with("nbd+unix:///x?socket="));
    let stop = Arc::new(AtomicBool::new(false));
    let s2 = stop.clone();
    let h = std::thread::spawn(move || serve(&l, mem(), &cfg(), s2).unwrap());
    let s = UnixStream::connect(&path).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let mut c = Client::greet(s, FLAG_C_FIXED_NEWSTYLE | FLAG_C_NO_ZEROES);
    c.info_or_go(OPT_GO, "").unwrap();
    c.write(4096, &pattern(10, 4096));
    assert_eq!(c.read(4096, 4096).unwrap(), pattern(10, 4096));
    stop.store(true, Ordering::Relaxed);
    let stats = h.join().unwrap();
    assert_eq!(stats.connections, 1);
    assert!(!path.exists(), "socket file removed at stop");
}

#[test]
fn stop_drains_in_flight_requests() {
    let ex = mem();
    let srv = Server::start(ex.clone(), cfg());
    let mut c = open(srv.addr);
    let n = 64u64;
    for i in 0..n {
        c.send(Command::Write, 0, i, i * 4096, 4096, &pattern(200 + i, 4096));
    }
    // Wait for the first reply so the requests are being served, then stop.
    let mut got = vec![c.reply()];
    let stopper = std::thread::spawn(move || srv.stop());
    while got.len() < n as usize {
        got.push(c.reply());
    }
    assert!(got.iter().all(|&(_, e)| e == 0));
    let stats = stopper.join().unwrap();
    assert_eq!(stats.requests, n);
    for i in 0..n {
        assert_eq!(ex.snapshot((i * 4096) as usize, 4096), pattern(200 + i, 4096));
    }
    let mut b = [0u8; 1];
    assert_eq!(c.s.read(&mut b).unwrap(), 0, "closed after stop");
}

/// Fails (with an error or a panic) on chosen offsets.
struct Faulty(MemExport);

impl mosaic_nbd::Export for Faulty {
    passes_on!(0: size, block_size, preferred_block, flush, trim);
    fn read(&self, off: u64, buf: &mut [u8]) -> std::io::Result<()> {
        match off {
            65536 => Err(std::io::Error::from_raw_os_error(5)),
            131072 => panic!("export bug"),
            _ => self.0.read(off, buf),
        }
    }
    fn write(&self, off: u64, data: &[u8]) -> std::io::Result<()> {
        if off == 65536 {
            return Err(std::io::Error::from_raw_os_error(28));
        }
        self.0.write(off, data)
    }
}

#[test]
fn export_errors_and_panics_become_error_replies() {
    let srv = Server::start(Arc::new(Faulty(MemExport::new(SIZE, 4096))), cfg());
    let mut c = open(srv.addr);
    assert_eq!(c.read(65536, 4096), Err(EIO));
    assert_eq!(c.write(65536, &[1u8; 4096]), ENOSPC);
    assert_eq!(c.read(131072, 4096), Err(EIO), "a panic is answered with EIO");
    // Default write_zeroes goes through write().
    assert_eq!(c.cmd(Command::WriteZeroes, 0, 65536, 4096, &[]), ENOSPC);
    assert_eq!(c.write(0, &pattern(11, 4096)), 0);
    assert_eq!(c.read(0, 4096).unwrap(), pattern(11, 4096));
    let stats = srv.stop();
    assert_eq!(stats.errors, 4);
}

#[test]
fn zero_length_requests_get_einval_and_the_connection_goes_on() {
    let ex = mem();
    let srv = Server::start(ex.clone(), cfg());
    let mut c = open(srv.addr);
    assert_eq!(c.write(4096, &pattern(12, 4096)), 0);
    assert_eq!(c.read(4096, 0), Err(EINVAL), "zero-length READ");
    assert_eq!(c.write(4096, &[]), EINVAL, "zero-length WRITE");
    assert_eq!(c.cmd(Command::WriteZeroes, 0, 4096, 0, &[]), EINVAL, "zero-length WRITE_ZEROES");
    assert_eq!(c.cmd(Command::Trim, 0, 4096, 0, &[]), EINVAL, "zero-length TRIM");
    assert_eq!(ex.writes(), 1, "only the real write reached the export");
    assert_eq!(c.read(4096, 4096).unwrap(), pattern(12, 4096), "the connection still serves");
    assert_eq!(srv.stop().errors, 4);
}

/// Read the greeting of a connection that then never says anything.
fn idle_connection(addr: std::net::SocketAddr) -> std::net::TcpStream {
    let mut s = connect(addr);
    let mut greet = [0u8; 18];
    s.read_exact(&mut greet).unwrap();
    s
}

#[test]
fn a_full_server_refuses_visibly_and_frees_slots_at_the_handshake_deadline() {
    let cfg = ServerConfig { max_connections: 3, handshake_timeout: Duration::from_millis(1500), ..cfg() };
    let srv = Server::start(mem(), cfg);
    let idle: Vec<_> = (0..3).map(|_| idle_connection(srv.addr)).collect();
    std::thread::sleep(Duration::from_millis(100));
    // One more: greeted, and each option answered with the reason.
    let mut c = Client::greet(connect(srv.addr), FLAG_C_FIXED_NEWSTYLE | FLAG_C_NO_ZEROES);
    c.send_opt(OPT_GO, &Client::<std::net::TcpStream>::info_payload("", &[]));
    let r = c.opt_reply();
    assert_eq!((r.opt, r.ty), (OPT_GO, REP_ERR_POLICY));
    assert_eq!(String::from_utf8_lossy(&r.data), "server busy: 3 connections (the limit); try again later");
    c.send_opt(OPT_LIST, &[]);
    assert_eq!(c.opt_reply().ty, REP_ERR_POLICY);
    c.send_opt(OPT_ABORT, &[]);
    assert_eq!(c.opt_reply().ty, REP_ACK);
    // The idle ones are dropped at the deadline, then a client is served.
    for mut s in idle {
        let mut b = [0u8; 1];
        assert_eq!(s.read(&mut b).unwrap(), 0, "idle connection dropped");
    }
    std::thread::sleep(Duration::from_millis(100));
    let mut ok = open(srv.addr);
    assert_eq!(ok.read(0, 4096).unwrap(), vec![0u8; 4096]);
    let stats = srv.stop();
    assert_eq!(stats.refused, 1);
    assert_eq!(stats.connections, 4);
}

#[test]
fn a_client_trickling_its_handshake_is_cut_off_at_the_deadline() {
    let srv = Server::start(mem(), ServerConfig { handshake_timeout: Duration::from_millis(800), ..cfg() });
    let mut s = idle_connection(srv.addr);
    let t = std::time::Instant::now();
    // One byte every 200 ms: each read is quick, the whole never ends.
    let mut closed = false;
    for b in IHAVEOPT.to_be_bytes().iter().cycle().take(40) {
        std::thread::sleep(Duration::from_millis(200));
        if s.write_all(&[*b]).is_err() {
            closed = true;
            break;
        }
        if t.elapsed() > Duration::from_millis(1500) {
            let mut x = [0u8; 1];
            closed = matches!(s.read(&mut x), Ok(0) | Err(_));
            break;
        }
    }
    assert!(closed, "the trickling client was still connected after {:?}", t.elapsed());
    assert!(t.elapsed() < Duration::from_secs(5));
}

#[test]
fn clients_vanishing_with_replies_pending_do_not_hurt_the_server() {
    let ex = Arc::new(MemExport::new(32 << 20, 4096));
    let srv = Server::start(ex.clone(), cfg());
    let mut c = open(srv.addr);
    assert_eq!(c.write(0, &pattern(13, 1 << 20)), 0);
    for _ in 0..10 {
        let mut v = open(srv.addr);
        for i in 0..8u64 {
            v.send(Command::Read, 0, i, 0, 4 << 20, &[]);
        }
        drop(v);
    }
    assert_eq!(c.read(0, 1 << 20).unwrap(), pattern(13, 1 << 20));
    let mut d = open(srv.addr);
    assert_eq!(d.read(0, 1 << 20).unwrap(), pattern(13, 1 << 20));
    let stats = srv.stop();
    assert_eq!(stats.connections, 12);
}

#[test]
fn stalled_write_headers_hold_no_memory_budget() {
    // The global budget is one maximum payload: if a WRITE header without
    // its payload held budget, nobody else could write.
    let cfg = ServerConfig { max_buffered_bytes: MAX_PAYLOAD as u64, io_timeout: Duration::from_millis(1500), ..cfg() };
    let ex = Arc::new(MemExport::new(MAX_PAYLOAD as usize, 4096));
    let srv = Server::start(ex.clone(), cfg);
    let mut stalled: Vec<_> = (0..4).map(|_| open(srv.addr)).collect();
    for s in &mut stalled {
        s.send(Command::Write, 0, 77, 0, MAX_PAYLOAD, &[]);
    }
    std::thread::sleep(Duration::from_millis(200));
    let mut c = open(srv.addr);
    let t = std::time::Instant::now();
    assert_eq!(c.write(8192, &pattern(14, 4096)), 0);
    assert_eq!(c.read(8192, 4096).unwrap(), pattern(14, 4096));
    assert!(t.elapsed() < Duration::from_secs(1), "served only after {:?}", t.elapsed());
    // A payload that never comes closes that connection after io_timeout.
    for mut s in stalled {
        let mut b = [0u8; 1];
        assert_eq!(s.s.read(&mut b).unwrap(), 0, "stalled writer dropped");
    }
    assert_eq!(ex.writes(), 1);
}

/// A WRITE payload that keeps arriving, however slowly, is served: the
/// timeout asks for progress, not a whole payload within it (a client on
/// a slow link is not a broken one).  Meanwhile another client's large
/// write goes through: one connection holds only its share of the
/// buffer budget.
#[test]
fn a_slowly_sent_write_payload_is_served_and_holds_up_no_other_client() {
    let cfg = ServerConfig { max_buffered_bytes: 2 * MAX_PAYLOAD as u64, io_timeout: Duration::from_millis(400), ..cfg() };
    let ex = Arc::new(MemExport::new(MAX_PAYLOAD as usize, 4096));
    let srv = Server::start(ex.clone(), cfg);
    let mut slow = open(srv.addr);
    const LEN: usize = 1 << 20;
    slow.send(Command::Write, 0, 5, 4096, LEN as u32, &[]);
    let mut w = slow.s.try_clone().unwrap();
    // 64 KiB every 100 ms: 1.6 s for the payload, four times the timeout.
    let trickler = std::thread::spawn(move || {
        for chunk in pattern(9, LEN).chunks(64 << 10) {
            w.write_all(chunk).unwrap();
            std::thread::sleep(Duration::from_millis(100));
        }
    });
    std::thread::sleep(Duration::from_millis(300));
    let mut c = open(srv.addr);
    let t = std::time::Instant::now();
    assert_eq!(c.write(8 << 20, &pattern(16, MAX_PAYLOAD as usize / 2)), 0);
    assert!(t.elapsed() < Duration::from_secs(1), "the other client waited {:?}", t.elapsed());
    trickler.join().unwrap();
    assert_eq!(slow.reply(), (5, 0), "the slowly sent WRITE succeeded");
    assert_eq!(c.read(4096, LEN as u32).unwrap(), pattern(9, LEN));
    assert_eq!(c.read(8 << 20, 4096).unwrap(), pattern(16, 4096));
}

/// A client that queues more large READs than the buffer budget holds and
/// reads none of their replies holds up no other client: its connection
/// takes at most one largest request of the budget.
#[test]
fn a_client_that_reads_no_replies_holds_up_no_other_client() {
    let cfg = ServerConfig { io_timeout: Duration::from_secs(20), ..cfg() };
    let srv = Server::start(Arc::new(MemExport::new(MAX_PAYLOAD as usize, 4096)), cfg);
    let mut hog = open(srv.addr);
    for i in 0..12 {
        hog.send(Command::Read, 0, i, 0, MAX_PAYLOAD, &[]);
    }
    std::thread::sleep(Duration::from_millis(300));
    let mut c = open(srv.addr);
    let t = std::time::Instant::now();
    assert_eq!(c.write(0, &pattern(3, 4096)), 0);
    assert_eq!(c.read(0, 4096).unwrap(), pattern(3, 4096));
    assert!(t.elapsed() < Duration::from_secs(2), "the other client waited {:?}", t.elapsed());
    drop(hog);
    srv.stop();
}

#[test]
fn a_client_that_stops_reading_replies_is_dropped_and_others_go_on() {
    let cfg = ServerConfig { io_timeout: Duration::from_millis(500), ..cfg() };
    let ex = Arc::new(MemExport::new(32 << 20, 4096));
    let srv = Server::start(ex.clone(), cfg);
    let mut hog = open(srv.addr);
    // 256 MiB of replies that are never read: far beyond socket buffers.
    for i in 0..64u64 {
        hog.send(Command::Read, 0, i, 0, 4 << 20, &[]);
    }
    std::thread::sleep(Duration::from_millis(1500));
    let mut c = open(srv.addr);
    let t = std::time::Instant::now();
    assert_eq!(c.write(0, &pattern(15, 4096)), 0);
    assert_eq!(c.read(0, 4096).unwrap(), pattern(15, 4096));
    assert!(t.elapsed() < Duration::from_secs(2), "served only after {:?}", t.elapsed());
    // The hog's socket was shut down: reading it ends (after what was sent).
    hog.s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut sink = vec![0u8; 1 << 20];
    let mut total = 0u64;
    loop {
        match hog.s.read(&mut sink) {
            Ok(0) => break,
            Ok(n) => total += n as u64,
            Err(e) => panic!("hog not closed: {e} after {total} bytes"),
        }
    }
    assert!(total < 256 << 20, "all {total} bytes were sent");
    srv.stop();
}

/// Negotiate structured replies (and `base:allocation` when `meta`), GO.
fn structured(addr: std::net::SocketAddr, meta: bool) -> Client<std::net::TcpStream> {
    negotiate(addr, OPT_STRUCTURED_REPLY, meta)
}

/// Negotiate extended headers (and `base:allocation` when `meta`: they
/// imply structured replies), GO; requests go out extended from then on.
fn extended(addr: std::net::SocketAddr, meta: bool) -> Client<std::net::TcpStream> {
    let mut c = negotiate(addr, OPT_EXTENDED_HEADERS, meta);
    c.extended = true;
    c
}

/// Ask `framing` (structured replies or extended headers), then
/// `base:allocation` when `meta`, then GO: DF is advertised either way.
fn negotiate(addr: std::net::SocketAddr, framing: u32, meta: bool) -> Client<std::net::TcpStream> {
    let mut c = Client::greet(connect(addr), FLAG_C_FIXED_NEWSTYLE | FLAG_C_NO_ZEROES);
    c.send_opt(framing, &[]);
    assert_eq!(c.opt_reply().ty, REP_ACK);
    if meta {
        let r = c.meta(OPT_SET_META_CONTEXT, "", &["base:allocation"]);
        assert_eq!(r.len(), 2);
        assert_eq!((r[0].ty, u32b(&r[0].data)), (REP_META_CONTEXT, META_BASE_ALLOCATION_ID));
        assert_eq!(&r[0].data[4..], b"base:allocation");
        assert_eq!(r[1].ty, REP_ACK);
    }
    c.info_or_go(OPT_GO, "test").unwrap();
    assert_ne!(c.tflags & TFLAG_SEND_DF, 0);
    c
}

/// (length, flags) pairs of a BLOCK_STATUS chunk for `base:allocation`.
fn descriptors(reply: AnyReply, cookie: u64) -> Vec<(u32, u32)> {
    match reply {
        AnyReply::Chunk { flags, ty, cookie: c, payload } => {
            assert_eq!((flags, ty, c), (REPLY_FLAG_DONE, REPLY_TYPE_BLOCK_STATUS, cookie));
            assert_eq!(u32b(&payload), META_BASE_ALLOCATION_ID);
            payload[4..].chunks(8).map(|d| (u32b(d), u32b(&d[4..]))).collect()
        }
        other => panic!("not a block status chunk: {other:?}"),
    }
}

/// The error value and message of an ERROR chunk.
fn error_chunk(reply: AnyReply, cookie: u64) -> (u32, String) {
    match reply {
        AnyReply::Chunk { flags, ty, cookie: c, payload } => {
            assert_eq!((flags, ty, c), (REPLY_FLAG_DONE, REPLY_TYPE_ERROR, cookie));
            let n = u16b(&payload[4..]) as usize;
            assert_eq!(payload.len(), 6 + n, "the message fills the chunk");
            (u32b(&payload), String::from_utf8(payload[6..].to_vec()).unwrap())
        }
        other => panic!("not an error chunk: {other:?}"),
    }
}

#[test]
fn meta_contexts_are_listed_and_set_only_on_structured_sessions() {
    let srv = Server::start(mem(), cfg());
    let mut c = Client::greet(connect(srv.addr), FLAG_C_FIXED_NEWSTYLE | FLAG_C_NO_ZEROES);
    // Listing needs nothing first; every form names base:allocation, id 0.
    for q in [&[][..], &["base:"][..], &["base:allocation", "x-other:thing"][..]] {
        let r = c.meta(OPT_LIST_META_CONTEXT, "test", q);
        assert_eq!(r.len(), 2, "{q:?}");
        assert_eq!((r[0].ty, u32b(&r[0].data), &r[0].data[4..]), (REP_META_CONTEXT, 0, &b"base:allocation"[..]));
        assert_eq!(r[1].ty, REP_ACK);
    }
    let r = c.meta(OPT_LIST_META_CONTEXT, "test", &["x-other:"]);
    assert_eq!(r.iter().map(|r| r.ty).collect::<Vec<_>>(), [REP_ACK], "an unknown namespace selects nothing");
    // Setting one needs structured replies first.
    assert_eq!(c.meta(OPT_SET_META_CONTEXT, "test", &["base:allocation"])[0].ty, REP_ERR_INVALID);
    c.send_opt(OPT_STRUCTURED_REPLY, &[]);
    assert_eq!(c.opt_reply().ty, REP_ACK);
    assert_eq!(c.meta(OPT_SET_META_CONTEXT, "nope", &["base:allocation"])[0].ty, REP_ERR_UNKNOWN);
    c.send_opt(OPT_SET_META_CONTEXT, &[0, 0, 0, 0, 0, 0, 0, 9]); // 9 queries in no bytes
    assert_eq!(c.opt_reply().ty, REP_ERR_INVALID);
    // "base:" lists but does not select; a later SET replaces an earlier one.
    let r = c.meta(OPT_SET_META_CONTEXT, "test", &["base:"]);
    assert_eq!(r.iter().map(|r| r.ty).collect::<Vec<_>>(), [REP_ACK]);
    c.info_or_go(OPT_GO, "test").unwrap();
    for f in [TFLAG_SEND_DF, TFLAG_SEND_CACHE, TFLAG_SEND_FAST_ZERO] {
        assert_eq!(c.tflags & f, f, "flag {f:#x}");
    }
    // Nothing selected: BLOCK_STATUS is refused, as an ERROR chunk.
    c.send(Command::BlockStatus, 0, 5, 0, 4096, &[]);
    assert_eq!(error_chunk(c.any_reply(), 5).0, EINVAL);

    // A client without structured replies is never told DF.
    let plain = open(srv.addr);
    assert_eq!(plain.tflags & TFLAG_SEND_DF, 0);

    // A SET that fails still replaces the selection (the spec: "including
    // when this command fails"): base:allocation set, then a SET on an
    // unknown export, and BLOCK_STATUS is refused.
    let mut c = Client::greet(connect(srv.addr), FLAG_C_FIXED_NEWSTYLE | FLAG_C_NO_ZEROES);
    c.send_opt(OPT_STRUCTURED_REPLY, &[]);
    assert_eq!(c.opt_reply().ty, REP_ACK);
    assert_eq!(c.meta(OPT_SET_META_CONTEXT, "test", &["base:allocation"]).last().map(|r| r.ty), Some(REP_ACK));
    assert_eq!(c.meta(OPT_SET_META_CONTEXT, "nope", &["base:allocation"])[0].ty, REP_ERR_UNKNOWN);
    c.info_or_go(OPT_GO, "test").unwrap();
    c.send(Command::BlockStatus, 0, 6, 0, 4096, &[]);
    assert_eq!(error_chunk(c.any_reply(), 6).0, EINVAL, "the failed SET left nothing selected");
}

#[test]
fn structured_reads_block_status_cache_and_errors() {
    let srv = Server::start(mem(), cfg());
    let mut c = structured(srv.addr, true);
    // Blocks: 0 zero, 1 data, 2-3 zero, 4 data.
    assert_eq!(c.write(4096, &pattern(7, 4096)), 0);
    assert_eq!(c.write(4 * 4096, &pattern(8, 4096)), 0);

    for flags in [0, CMD_FLAG_DF] {
        c.send(Command::Read, flags, 11, 4096, 8192, &[]);
        match c.any_reply() {
            AnyReply::Chunk { flags, ty, cookie, payload } => {
                assert_eq!((flags, ty, cookie), (REPLY_FLAG_DONE, REPLY_TYPE_OFFSET_DATA, 11));
                assert_eq!(u64b(&payload), 4096, "the chunk's offset");
                assert_eq!(&payload[8..4104], &pattern(7, 4096)[..]);
                assert!(payload[4104..].iter().all(|&b| b == 0));
            }
            other => panic!("{other:?}"),
        }
    }

    c.send(Command::BlockStatus, 0, 12, 0, 6 * 4096, &[]);
    assert_eq!(descriptors(c.any_reply(), 12), [(4096, STATE_ZERO), (4096, 0), (8192, STATE_ZERO), (4096, 0), (4096, STATE_ZERO)]);
    c.send(Command::BlockStatus, CMD_FLAG_REQ_ONE, 13, 2 * 4096, 4 * 4096, &[]);
    assert_eq!(descriptors(c.any_reply(), 13), [(8192, STATE_ZERO)]);
    // Far larger than a payload may be, and cut at the end of the range.
    c.send(Command::BlockStatus, 0, 14, 4 * 4096, (SIZE - 4 * 4096) as u32, &[]);
    assert_eq!(descriptors(c.any_reply(), 14), [(4096, 0), ((SIZE - 5 * 4096) as u32, STATE_ZERO)]);

    // CACHE is a hint: success, as a simple reply (the spec allows it).
    c.send(Command::Cache, 0, 15, 0, 4096, &[]);
    assert_eq!(c.any_reply(), AnyReply::Simple { err: 0, cookie: 15 });
    // A fast zero on an export that zeroes fast is done.
    c.send(Command::WriteZeroes, CMD_FLAG_FAST_ZERO, 16, 4096, 4096, &[]);
    assert_eq!(c.any_reply(), AnyReply::Simple { err: 0, cookie: 16 });
    c.send(Command::BlockStatus, CMD_FLAG_REQ_ONE, 17, 0, 4 * 4096, &[]);
    assert_eq!(descriptors(c.any_reply(), 17), [(4 * 4096, STATE_ZERO)]);

    // Errors are ERROR chunks with a reason, READ's early ones included.
    c.send(Command::Read, 0, 18, SIZE as u64, 4096, &[]);
    let (err, why) = error_chunk(c.any_reply(), 18);
    assert_eq!(err, EINVAL);
    assert!(why.contains("Read at 4194304 len 4096"), "{why}");
    c.send(Command::Write, CMD_FLAG_DF, 19, 0, 4096, &pattern(1, 4096));
    assert_eq!(error_chunk(c.any_reply(), 19).0, EINVAL, "DF is READ's flag");
    c.send(Command::Write, 0, 20, SIZE as u64, 4096, &pattern(1, 4096));
    assert_eq!(error_chunk(c.any_reply(), 20).0, ENOSPC);
    // The connection goes on.
    assert_eq!(c.write(0, &pattern(9, 4096)), 0);
    c.send(Command::Read, 0, 21, 0, 4096, &[]);
    assert!(matches!(c.any_reply(), AnyReply::Chunk { ty: REPLY_TYPE_OFFSET_DATA, .. }));
}

/// An export that zeroes no faster than it writes, and fails its reads.
struct SlowZeroes(MemExport);

impl mosaic_nbd::Export for SlowZeroes {
    passes_on!(0: size, block_size, preferred_block, write, flush, trim);
    fn read(&self, _off: u64, _buf: &mut [u8]) -> std::io::Result<()> {
        Err(std::io::Error::other("member 3 is gone"))
    }
}

#[test]
fn a_slow_zeroing_export_refuses_fast_zeroes_and_its_errors_carry_their_reason() {
    let ex = Arc::new(SlowZeroes(MemExport::new(SIZE, 4096)));
    let srv = Server::start(ex.clone(), cfg());
    let mut c = structured(srv.addr, true);
    assert_eq!(c.write(0, &pattern(3, 4096)), 0);
    c.send(Command::WriteZeroes, CMD_FLAG_FAST_ZERO, 1, 0, 4096, &[]);
    assert_eq!(error_chunk(c.any_reply(), 1).0, ENOTSUP);
    assert_eq!(ex.0.snapshot(0, 4096), pattern(3, 4096), "nothing was zeroed");
    c.send(Command::WriteZeroes, 0, 2, 0, 4096, &[]);
    assert_eq!(c.any_reply(), AnyReply::Simple { err: 0, cookie: 2 });
    assert_eq!(ex.0.snapshot(0, 4096), vec![0u8; 4096]);
    // The default allocation answer: everything allocated.
    c.send(Command::BlockStatus, 0, 3, 0, 8192, &[]);
    assert_eq!(descriptors(c.any_reply(), 3), [(8192, 0)]);
    c.send(Command::Read, 0, 4, 0, 4096, &[]);
    let (err, why) = error_chunk(c.any_reply(), 4);
    assert_eq!(err, EIO);
    assert_eq!(why, "member 3 is gone");
}

/// An export that zeroes fast only where it may leave a hole (a map that
/// unmaps): it counts which way each zeroing came.
struct HoleZeroes(MemExport, std::sync::Mutex<Vec<&'static str>>);

impl mosaic_nbd::Export for HoleZeroes {
    passes_on!(0: size, block_size, preferred_block, read, write, flush, trim);
    fn write_zeroes(&self, off: u64, len: u64) -> std::io::Result<()> {
        self.1.lock().unwrap().push("zeroes");
        self.0.write_zeroes(off, len)
    }
    fn zero_as_hole(&self, off: u64, len: u64) -> std::io::Result<()> {
        self.1.lock().unwrap().push("hole");
        self.0.write_zeroes(off, len)
    }
    fn fast_zero_as_hole(&self) -> bool {
        true
    }
}

/// WRITE_ZEROES without NO_HOLE may leave a hole (`zero_as_hole`), with
/// it must write (`write_zeroes`); FAST_ZERO goes ahead only where the
/// export is fast: here without NO_HOLE, and ENOTSUP with it.
#[test]
fn zeroes_that_may_leave_a_hole_take_the_exports_hole_path() {
    let ex = Arc::new(HoleZeroes(MemExport::new(SIZE, 4096), Default::default()));
    let srv = Server::start(ex.clone(), cfg());
    let mut c = structured(srv.addr, true);
    assert_eq!(c.write(0, &pattern(5, 16384)), 0);
    c.send(Command::WriteZeroes, 0, 1, 0, 4096, &[]);
    assert_eq!(c.any_reply(), AnyReply::Simple { err: 0, cookie: 1 });
    c.send(Command::WriteZeroes, CMD_FLAG_NO_HOLE, 2, 4096, 4096, &[]);
    assert_eq!(c.any_reply(), AnyReply::Simple { err: 0, cookie: 2 });
    c.send(Command::WriteZeroes, CMD_FLAG_FAST_ZERO, 3, 8192, 4096, &[]);
    assert_eq!(c.any_reply(), AnyReply::Simple { err: 0, cookie: 3 });
    c.send(Command::WriteZeroes, CMD_FLAG_FAST_ZERO | CMD_FLAG_NO_HOLE, 4, 12288, 4096, &[]);
    assert_eq!(error_chunk(c.any_reply(), 4).0, ENOTSUP);
    assert_eq!(*ex.1.lock().unwrap(), ["hole", "zeroes", "hole"]);
    let mut want = vec![0u8; 12288];
    want.extend_from_slice(&pattern(5, 16384)[12288..]);
    assert_eq!(ex.0.snapshot(0, 16384), want, "the refused fast zero zeroed nothing");
}

/// A client sending bad requests in a loop cannot flood the log: each
/// connection logs its first rejections one line each, then only counts
/// them, and says how many when it ends.
#[test]
fn rejected_requests_are_logged_a_few_then_counted() {
    #[derive(Clone, Default)]
    struct Sink(Arc<std::sync::Mutex<Vec<u8>>>);
    impl Write for Sink {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let sink = Sink::default();
    let s2 = sink.clone();
    let sub = tracing_subscriber::fmt().with_writer(move || s2.clone()).with_ansi(false).finish();
    // The server logs from its own threads: the one global subscriber (no
    // other test here logs).
    tracing::subscriber::set_global_default(sub).unwrap();
    let srv = Server::start(mem(), ServerConfig { log: true, ..cfg() });
    let mut c = open(srv.addr);
    // Past the end at a recognisable offset: EINVAL, 200 times.
    const AT: u64 = 0x1234_5000_0000;
    for i in 0..200 {
        c.send(Command::Read, 0, i, AT, 4096, &[]);
        assert_eq!(c.reply(), (i, EINVAL));
    }
    c.send(Command::Disc, 0, 0, 0, 0, &[]);
    drop(c);
    srv.stop();
    let log = String::from_utf8(sink.0.lock().unwrap().clone()).unwrap();
    let lines = log.lines().filter(|l| l.contains(&format!("offset {AT} "))).count();
    assert_eq!(lines, 16, "{log}");
    assert!(log.contains("184 more requests rejected"), "{log}");
}

/// An export whose size changes while it is served (an array grown
/// online): the bytes behind it are all there from the start, `size()`
/// says how many are exported now.
struct Growing {
    mem: MemExport,
    size: std::sync::atomic::AtomicU64,
}

impl Growing {
    fn new(size: u64, max: usize) -> Growing {
        Growing { mem: MemExport::new(max, 4096), size: size.into() }
    }
    fn grow(&self, size: u64) {
        self.size.store(size, Ordering::Relaxed);
    }
}

impl mosaic_nbd::Export for Growing {
    passes_on!(mem: block_size, preferred_block, read, write, flush, trim);
    fn size(&self) -> u64 {
        self.size.load(Ordering::Relaxed)
    }
}

/// Online grow: every handshake after it (INFO, GO, EXPORT_NAME) reports
/// the new size and its connection may use the new bytes; a connection
/// made before it keeps the size it negotiated.
#[test]
fn new_connections_see_the_size_of_a_grown_export() {
    let half = (SIZE / 2) as u64;
    let ex = Arc::new(Growing::new(half, SIZE));
    let srv = Server::start(ex.clone(), cfg());
    let mut old = open(srv.addr);
    assert_eq!(old.size, half);
    ex.grow(SIZE as u64);
    let mut c = Client::greet(connect(srv.addr), FLAG_C_FIXED_NEWSTYLE | FLAG_C_NO_ZEROES);
    c.info_or_go(OPT_INFO, "test").unwrap();
    assert_eq!(c.size, SIZE as u64, "NBD_OPT_INFO after the grow");
    c.info_or_go(OPT_GO, "test").unwrap();
    assert_eq!(c.size, SIZE as u64, "NBD_OPT_GO after the grow");
    assert_eq!(c.write(half, &pattern(40, 4096)), 0, "the grown range is served");
    assert_eq!(c.read(half, 4096).unwrap(), pattern(40, 4096));
    let mut e = Client::greet(connect(srv.addr), FLAG_C_FIXED_NEWSTYLE | FLAG_C_NO_ZEROES);
    e.send_opt(OPT_EXPORT_NAME, b"test");
    let mut b = [0u8; 10];
    e.s.read_exact(&mut b).unwrap();
    assert_eq!(u64b(&b), SIZE as u64, "NBD_OPT_EXPORT_NAME after the grow");
    // The old connection keeps its size: past it is refused as before.
    assert_eq!(old.read(half, 4096), Err(EINVAL));
    assert_eq!(old.write(half, &pattern(41, 4096)), ENOSPC);
    assert_eq!(old.read(half - 4096, 4096).unwrap(), vec![0u8; 4096]);
}

/// The spec ("Block size constraints"): a client MUST NOT send READ,
/// WRITE, CACHE or WRITE_ZEROES (unless FAST_ZERO) longer than the
/// advertised maximum block size, and the server SHOULD answer EINVAL
/// (without disconnecting).  TRIM, BLOCK_STATUS and a FAST_ZERO
/// WRITE_ZEROES are not bounded by it.
#[test]
fn an_oversized_cache_gets_einval_but_zeroes_and_trims_of_any_length_are_served() {
    let ex = Arc::new(Big::alternating());
    let srv = Server::start(ex.clone(), cfg());
    let mut c = open(srv.addr);
    assert_eq!(c.block.map(|b| b.2), Some(MAX_PAYLOAD));
    let over = MAX_PAYLOAD + 4096;
    assert_eq!(c.cmd(Command::Cache, 0, 0, over, &[]), EINVAL, "CACHE past the maximum");
    assert_eq!(ex.count("cache"), 0, "it did not reach the export");
    assert_eq!(c.cmd(Command::Cache, 0, 0, MAX_PAYLOAD, &[]), 0, "the maximum itself");
    let huge = u32::MAX - 4095;
    assert_eq!(c.cmd(Command::WriteZeroes, 0, 0, over, &[]), 0, "a zeroing moves no payload");
    assert_eq!(c.cmd(Command::WriteZeroes, CMD_FLAG_NO_HOLE, 0, huge, &[]), 0);
    assert_eq!(c.cmd(Command::WriteZeroes, CMD_FLAG_FAST_ZERO, 0, huge, &[]), 0);
    assert_eq!(c.cmd(Command::Trim, 0, 0, huge, &[]), 0, "TRIM is not bounded");
    assert_eq!((ex.count("zeroes"), ex.count("cache"), ex.count("trim")), (3, 1, 1));
    assert_eq!(c.read(0, 4096).unwrap(), vec![0u8; 4096], "the connection goes on");
    // A structured client gets the EINVAL as an error chunk.
    let mut s = structured(srv.addr, false);
    s.send(Command::Cache, 0, 9, 0, over, &[]);
    assert_eq!(error_chunk(s.any_reply(), 9).0, EINVAL);
}

/// Read `s` `chunk` bytes every `every` until `slow` has passed, then as
/// fast as it comes, until EOF or `want` bytes: the bytes received.
fn trickle_then_drain(s: &mut std::net::TcpStream, chunk: usize, every: Duration, slow: Duration, want: u64) -> u64 {
    let t = std::time::Instant::now();
    let mut buf = vec![0u8; chunk.max(1 << 20)];
    let mut total = 0u64;
    let mut fast = false;
    while total < want {
        if !fast && t.elapsed() >= slow {
            fast = true;
        }
        if !fast {
            std::thread::sleep(every);
        }
        // A whole chunk each time when slow (a read may return less).
        let n = if fast { buf.len() } else { chunk };
        let mut got = 0;
        while got < n && total < want {
            match s.read(&mut buf[got..n]) {
                Ok(0) => return total,
                Ok(k) => (got, total) = (got + k, total + k as u64),
                // The server shut the socket down with data unread: a reset.
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return total,
                Err(e) => panic!("after {total} bytes: {e}"),
            }
            if fast {
                break;
            }
        }
    }
    total
}

/// A 32 MiB READ's simple reply: header and data.
const WHOLE: u64 = SIMPLE_REPLY_LEN as u64 + MAX_PAYLOAD as u64;

/// The reply timeout asks for progress, not a whole reply: a client that
/// keeps reading, though too slowly to take a 32 MiB READ reply within
/// the 200 ms timeout, gets all of it; another client is served meanwhile.
/// One that stops reading is cut off (`a_client_that_stops_reading_...`).
#[test]
fn a_reply_read_slowly_but_steadily_is_sent_whole() {
    let cfg = ServerConfig { io_timeout: Duration::from_millis(200), ..cfg() };
    let ex = Arc::new(MemExport::new(MAX_PAYLOAD as usize, 4096));
    let srv = Server::start(ex.clone(), cfg);
    let mut slow = open(srv.addr);
    slow.send(Command::Read, 0, 1, 0, MAX_PAYLOAD, &[]);
    // 2 MiB every 100 ms for 1.5 s, then the rest at once: every send
    // makes progress well within 200 ms, the whole reply takes longer.
    let mut s = slow.s.try_clone().unwrap();
    let reader = std::thread::spawn(move || trickle_then_drain(&mut s, 2 << 20, Duration::from_millis(100), Duration::from_millis(1500), WHOLE));
    std::thread::sleep(Duration::from_millis(400));
    let mut c = open(srv.addr);
    assert_eq!(c.write(0, &pattern(42, 4096)), 0);
    assert_eq!(c.read(0, 4096).unwrap(), pattern(42, 4096));
    let total = reader.join().unwrap();
    assert_eq!(total, WHOLE, "the whole reply was sent");
    assert_eq!(srv.stop().connections, 2);
}

/// Stopping the server waits for a reply being sent at most the reply
/// timeout, however steadily its client keeps reading.
#[test]
fn a_stop_waits_for_a_slow_reader_no_longer_than_the_reply_timeout() {
    let cfg = ServerConfig { io_timeout: Duration::from_millis(500), ..cfg() };
    let srv = Server::start(Arc::new(MemExport::new(MAX_PAYLOAD as usize, 4096)), cfg);
    let mut slow = open(srv.addr);
    slow.send(Command::Read, 0, 1, 0, MAX_PAYLOAD, &[]);
    // 512 KiB every 100 ms: the reply would take over 6 s.
    let mut s = slow.s.try_clone().unwrap();
    let reader = std::thread::spawn(move || trickle_then_drain(&mut s, 512 << 10, Duration::from_millis(100), Duration::from_secs(5), WHOLE));
    std::thread::sleep(Duration::from_millis(100));
    let t = std::time::Instant::now();
    srv.stop();
    let took = t.elapsed();
    let total = reader.join().unwrap();
    assert!(took < Duration::from_millis(2500), "stop took {took:?}");
    assert!(total < WHOLE, "the whole reply ({total} bytes) was sent");
}

/// A client that floods bad requests while it reads no replies (a worker
/// is blocked sending it a 32 MiB READ): the server stops reading it at
/// `max_inflight` queued replies rather than queueing one per request, and
/// once the client reads, every reply comes, in order.
#[test]
fn a_flood_of_bad_requests_queues_at_most_max_inflight_replies() {
    let cfg = ServerConfig { max_inflight: 16, io_timeout: Duration::from_secs(10), ..cfg() };
    let srv = Server::start(Arc::new(MemExport::new(MAX_PAYLOAD as usize, 4096)), cfg);
    let mut c = open(srv.addr);
    c.send(Command::Read, 0, 0, 0, MAX_PAYLOAD, &[]);
    const N: u64 = 20_000;
    let mut burst = Vec::new();
    for i in 1..=N {
        // Past the end: EINVAL.
        let r = mosaic_nbd::Request { flags: 0, cmd: Command::Read, cookie: i, offset: MAX_PAYLOAD as u64, length: 4096 };
        burst.extend_from_slice(&r.encode());
    }
    // From a thread: once the server stops reading, this write blocks.
    let mut w = c.s.try_clone().unwrap();
    let writer = std::thread::spawn(move || w.write_all(&burst).unwrap());
    // Time for the server to take all the requests it will while nothing
    // is read.
    std::thread::sleep(Duration::from_millis(500));
    let (mut next, mut data) = (1, None);
    while next <= N || data.is_none() {
        match c.reply() {
            (0, err) => {
                assert_eq!(err, 0);
                let mut b = vec![0u8; MAX_PAYLOAD as usize];
                c.s.read_exact(&mut b).unwrap();
                data = Some(b);
            }
            got => {
                assert_eq!(got, (next, EINVAL), "the rejections are answered in order");
                next += 1;
            }
        }
    }
    writer.join().unwrap();
    assert!(data.unwrap().iter().all(|&b| b == 0));
    c.send(Command::Disc, 0, 0, 0, 0, &[]);
    drop(c);
    let stats = srv.stop();
    assert_eq!(stats.errors, N);
    assert!(stats.max_queued_replies <= 16, "{} replies were queued at once", stats.max_queued_replies);
}

/// Cap the kernel's receive buffer of `s` (else autotuning may grow it to
/// tens of MiB on loopback, far more than a test's pace can drain in time).
fn small_receive_buffer(s: &std::net::TcpStream, bytes: libc::c_int) {
    use std::os::fd::AsRawFd;
    // SAFETY: a valid socket and a c_int option value of the right size.
    let r = unsafe {
        libc::setsockopt(s.as_raw_fd(), libc::SOL_SOCKET, libc::SO_RCVBUF, (&bytes as *const libc::c_int).cast(), std::mem::size_of::<libc::c_int>() as libc::socklen_t)
    };
    assert_eq!(r, 0, "setsockopt SO_RCVBUF");
}

/// Stopping gives a connection's replies one reply timeout from the stop
/// in all, even when its client reads each reply in time: 64 MiB of READ
/// replies read at 10 MiB/s (each within 2 s of its first send; all of
/// them would take 6.4 s) are cut off 2 s after the stop.
#[test]
fn a_stop_gives_queued_replies_one_reply_timeout_in_all() {
    let cfg = ServerConfig { io_timeout: Duration::from_secs(2), ..cfg() };
    let srv = Server::start(Arc::new(MemExport::new(1 << 20, 4096)), cfg);
    let mut c = open(srv.addr);
    small_receive_buffer(&c.s, 1 << 20);
    const N: u64 = 64;
    for i in 0..N {
        c.send(Command::Read, 0, i, 0, 1 << 20, &[]);
    }
    let whole = N * (SIMPLE_REPLY_LEN as u64 + (1 << 20));
    let mut s = c.s.try_clone().unwrap();
    let reader = std::thread::spawn(move || trickle_then_drain(&mut s, 1 << 20, Duration::from_millis(100), Duration::from_secs(30), whole));
    std::thread::sleep(Duration::from_millis(300));
    let t = std::time::Instant::now();
    srv.stop();
    let took = t.elapsed();
    let total = reader.join().unwrap();
    assert!(total < whole, "all {N} replies were sent");
    assert!(took < Duration::from_secs(4), "stop took {took:?}");
}

/// BLOCK_STATUS replies are held in the server's buffer budget while
/// they wait to be sent, as READ payloads are (one descriptor a block of
/// the range, at most 65,536: 512 KiB), so a client that asks and does
/// not read cannot make the server queue replies without bound.
#[test]
fn block_status_replies_count_in_the_buffer_budget() {
    let srv = Server::start(Arc::new(Big::alternating()), cfg());
    let mut c = structured(srv.addr, true);
    for i in 0..4u64 {
        c.send(Command::BlockStatus, 0, 10 + i, 0, 32 << 20, &[]);
    }
    // Replies to requests in flight together may come in any order.
    let mut replies: Vec<AnyReply> = (0..4).map(|_| c.any_reply()).collect();
    replies.sort_by_key(|r| match r {
        AnyReply::Chunk { cookie, .. } => *cookie,
        other => panic!("not a chunk: {other:?}"),
    });
    for (i, r) in (0..4u64).zip(replies) {
        let d = descriptors(r, 10 + i);
        assert_eq!(d.len(), 8192, "one descriptor a block");
        assert!(d.iter().enumerate().all(|(k, &(n, f))| n == 4096 && (f == 0) == (k % 2 == 1)));
    }
    c.send(Command::BlockStatus, CMD_FLAG_REQ_ONE, 20, 4096, 1 << 20, &[]);
    assert_eq!(descriptors(c.any_reply(), 20), [(4096, 0)]);
    let stats = srv.stop();
    assert!(stats.max_buffered >= 8 * 8192, "the replies were held in the budget: at most {} bytes", stats.max_buffered);
    assert!(stats.max_buffered <= 4 * 8 * 8194 + 8, "{}", stats.max_buffered);
}

/// A 1 TiB export that keeps its first 4 MiB in memory (the rest reads
/// zeroes and takes writes without keeping them), records every TRIM,
/// WRITE_ZEROES and CACHE as it reaches it, and reports its extents
/// through `extents`.
struct Big {
    head: MemExport,
    calls: std::sync::Mutex<Vec<(&'static str, u64, u64)>>,
    extents: fn(u64, u64) -> Vec<mosaic_nbd::Extent>,
}

impl Big {
    /// Every other 4 KiB block a hole: a BLOCK_STATUS reply of one
    /// descriptor a block.
    fn alternating() -> Big {
        Big::new(|off, len| {
            let block = |b: u64| if b % 2 == 0 { mosaic_nbd::Extent::hole(4096) } else { mosaic_nbd::Extent::data(4096) };
            (off / 4096..(off + len).div_ceil(4096)).map(block).collect()
        })
    }
    /// The first MiB allocated, the rest zero.
    fn data_then_zeroes() -> Big {
        Big::new(|off, len| {
            let data_end = (1u64 << 20).clamp(off, off + len);
            let data = (data_end > off).then(|| mosaic_nbd::Extent::data(data_end - off));
            let zero = (off + len > data_end).then(|| mosaic_nbd::Extent::zero(off + len - data_end));
            data.into_iter().chain(zero).collect()
        })
    }
    fn new(extents: fn(u64, u64) -> Vec<mosaic_nbd::Extent>) -> Big {
        Big { head: MemExport::new(SIZE, 4096), calls: Default::default(), extents }
    }
    fn record(&self, what: &'static str, off: u64, len: u64) -> std::io::Result<()> {
        self.calls.lock().unwrap().push((what, off, len));
        Ok(())
    }
    /// How many calls of a kind reached the export.
    fn count(&self, what: &str) -> usize {
        self.calls.lock().unwrap().iter().filter(|c| c.0 == what).count()
    }
}

impl mosaic_nbd::Export for Big {
    fn size(&self) -> u64 {
        1 << 40
    }
    fn block_size(&self) -> u64 {
        4096
    }
    fn preferred_block(&self) -> u64 {
        4096
    }
    fn read(&self, off: u64, buf: &mut [u8]) -> std::io::Result<()> {
        if off + buf.len() as u64 <= SIZE as u64 {
            return self.head.read(off, buf);
        }
        buf.fill(0);
        Ok(())
    }
    fn write(&self, off: u64, data: &[u8]) -> std::io::Result<()> {
        if off + data.len() as u64 <= SIZE as u64 {
            return self.head.write(off, data);
        }
        Ok(())
    }
    fn flush(&self) -> std::io::Result<()> {
        Ok(())
    }
    fn trim(&self, off: u64, len: u64) -> std::io::Result<()> {
        self.record("trim", off, len)
    }
    fn write_zeroes(&self, off: u64, len: u64) -> std::io::Result<()> {
        self.record("zeroes", off, len)
    }
    fn fast_zero(&self) -> bool {
        true
    }
    fn cache(&self, off: u64, len: u64) -> std::io::Result<()> {
        self.record("cache", off, len)
    }
    fn extents(&self, off: u64, len: u64) -> std::io::Result<Vec<mosaic_nbd::Extent>> {
        Ok((self.extents)(off, len))
    }
}

/// Extended headers (NBD_OPT_EXTENDED_HEADERS, as qemu 8.2+ and libnbd
/// 1.18+ ask): 32-byte requests with 64-bit lengths, so one TRIM,
/// WRITE_ZEROES or BLOCK_STATUS covers more than 4 GiB and reaches the
/// export as one call; every reply an extended chunk carrying the
/// request's offset; 64-bit BLOCK_STATUS descriptors; errors as ERROR
/// chunks; the bytes written read back.
#[test]
fn extended_headers_carry_64_bit_lengths_and_every_reply_is_an_extended_chunk() {
    let ex = Arc::new(Big::data_then_zeroes());
    let srv = Server::start(ex.clone(), cfg());
    let mut c = extended(srv.addr, true);
    let data = pattern(41, 8192);
    c.send64(Command::Write, CMD_FLAG_PAYLOAD_LEN | CMD_FLAG_FUA, 1, 4096, 8192, &data);
    let r = c.ext_reply();
    assert_eq!((r.flags, r.ty, r.cookie, r.offset, r.payload.len()), (REPLY_FLAG_DONE, REPLY_TYPE_NONE, 1, 4096, 0), "a success is a NONE chunk");
    // A WRITE without PAYLOAD_LEN is taken too (qemu-nbd takes it).
    c.send64(Command::Write, 0, 2, 12288, 4096, &data[..4096]);
    assert_eq!(c.ext_reply().error(), 0);
    c.send64(Command::Read, 0, 3, 4096, 12288, &[]);
    let r = c.ext_reply();
    assert_eq!((r.ty, r.cookie, r.offset, u64b(&r.payload)), (REPLY_TYPE_OFFSET_DATA, 3, 4096, 4096));
    assert_eq!(&r.payload[8..8 + 8192], &data[..]);
    assert_eq!(&r.payload[8 + 8192..], &data[..4096]);

    let six = 6u64 << 30;
    c.send64(Command::WriteZeroes, CMD_FLAG_NO_HOLE, 4, SIZE as u64, six, &[]);
    let r = c.ext_reply();
    assert_eq!((r.ty, r.cookie, r.offset, r.error()), (REPLY_TYPE_NONE, 4, SIZE as u64, 0));
    c.send64(Command::Trim, 0, 5, 8 << 30, 5 << 30, &[]);
    assert_eq!(c.ext_reply().error(), 0);
    c.send64(Command::Cache, 0, 6, 0, 1 << 20, &[]);
    assert_eq!(c.ext_reply().ty, REPLY_TYPE_NONE);
    assert_eq!(*ex.calls.lock().unwrap(), [("zeroes", SIZE as u64, six), ("trim", 8 << 30, 5 << 30), ("cache", 0, 1 << 20)], "each one call of its whole length");

    // BLOCK_STATUS over 6 GiB: 64-bit descriptors, one longer than 4 GiB.
    c.send64(Command::BlockStatus, 0, 7, 0, six, &[]);
    let r = c.ext_reply();
    assert_eq!((r.flags, r.ty, r.cookie, r.offset), (REPLY_FLAG_DONE, REPLY_TYPE_BLOCK_STATUS_EXT, 7, 0));
    assert_eq!((u32b(&r.payload), u32b(&r.payload[4..])), (META_BASE_ALLOCATION_ID, 2), "context id, descriptor count");
    let d: Vec<(u64, u64)> = r.payload[8..].chunks(16).map(|d| (u64b(d), u64b(&d[8..]))).collect();
    assert_eq!(d, [(1 << 20, 0), (six - (1 << 20), STATE_ZERO as u64)]);

    // Errors: ERROR chunks in extended headers, the connection goes on.
    c.send64(Command::Read, 0, 8, 1 << 40, 4096, &[]);
    let r = c.ext_reply();
    assert_eq!((r.ty, r.cookie, r.offset, r.error()), (REPLY_TYPE_ERROR, 8, 1 << 40, EINVAL));
    c.send64(Command::Read, 0, 9, 0, 1 << 33, &[]);
    assert_eq!(c.ext_reply().error(), EINVAL, "a READ past the maximum block size");
    c.send64(Command::WriteZeroes, 0, 10, (1 << 40) - 4096, 8192, &[]);
    assert_eq!(c.ext_reply().error(), ENOSPC);
    // A payload on BLOCK_STATUS is refused, and read past.
    c.send64(Command::BlockStatus, CMD_FLAG_PAYLOAD_LEN, 11, 0, 12, &[0, 0, 0, 0, 0, 0, 16, 0, 0, 0, 0, 1]);
    assert_eq!(c.ext_reply().error(), EINVAL);
    c.send64(Command::Read, 0, 12, 4096, 4096, &[]);
    let r = c.ext_reply();
    assert_eq!((r.cookie, &r.payload[8..]), (12, &data[..4096]), "in step after the refused payload");
    assert_eq!(ex.calls.lock().unwrap().len(), 3, "no refused request reached the export");

    // Compact headers in an extended session: out of step, closed (the
    // server reads 32 bytes: a compact header and 4 of the next).
    c.extended = false;
    c.send(Command::Read, 0, 13, 0, 4096, &[]);
    c.send(Command::Read, 0, 14, 0, 4096, &[]);
    let mut rest = Vec::new();
    assert_eq!(c.s.read_to_end(&mut rest).unwrap(), 0, "closed without a reply");

    // A payload of more than 4 GiB announced on a refused command is not
    // read through: that connection closes, others go on.
    let mut c = extended(srv.addr, false);
    c.send64(Command::Trim, CMD_FLAG_PAYLOAD_LEN, 15, 0, 1 << 40, &[]);
    let mut rest = Vec::new();
    assert_eq!(c.s.read_to_end(&mut rest).unwrap(), 0);
    let mut c = extended(srv.addr, false);
    c.send64(Command::Read, 0, 16, 4096, 4096, &[]);
    assert_eq!(&c.ext_reply().payload[8..], &data[..4096]);
}

/// Compact and extended sessions side by side on one server: each gets
/// its own framing (a plain client simple replies, a structured one
/// structured chunks, an extended one extended chunks) for the same bytes.
#[test]
fn compact_structured_and_extended_sessions_share_a_server() {
    let srv = Server::start(mem(), cfg());
    let mut x = extended(srv.addr, false);
    let mut s = structured(srv.addr, false);
    let mut p = open(srv.addr);
    let data = pattern(43, 4096);
    x.send64(Command::Write, CMD_FLAG_PAYLOAD_LEN, 1, 8192, 4096, &data);
    assert_eq!(x.ext_reply().error(), 0);
    assert_eq!(p.read(8192, 4096).unwrap(), data);
    s.send(Command::Read, 0, 2, 8192, 4096, &[]);
    match s.any_reply() {
        AnyReply::Chunk { ty, payload, .. } => assert_eq!((ty, &payload[8..]), (REPLY_TYPE_OFFSET_DATA, &data[..])),
        other => panic!("{other:?}"),
    }
    s.send(Command::Flush, 0, 3, 0, 0, &[]);
    assert_eq!(s.any_reply(), AnyReply::Simple { err: 0, cookie: 3 }, "a structured session's payload-less success stays simple");
    x.send64(Command::Flush, 0, 4, 0, 0, &[]);
    assert_eq!(x.ext_reply().ty, REPLY_TYPE_NONE, "an extended session's is a NONE chunk");
}

/// An inline RAM export that notes which thread served each request over
/// 64 KiB.
struct Where {
    mem: MemExport,
    large: std::sync::Mutex<Vec<String>>,
}

impl Where {
    fn note(&self, len: usize) {
        if len > 64 << 10 {
            let t = std::thread::current();
            self.large.lock().unwrap().push(t.name().unwrap_or("?").to_string());
        }
    }
    /// The thread names noted since the last call.
    fn taken(&self) -> Vec<String> {
        std::mem::take(&mut *self.large.lock().unwrap())
    }
}

impl mosaic_nbd::Export for Where {
    passes_on!(mem: size, block_size, preferred_block, flush, trim);
    fn serve_inline(&self) -> bool {
        true
    }
    fn read(&self, off: u64, buf: &mut [u8]) -> std::io::Result<()> {
        self.note(buf.len());
        self.mem.read(off, buf)
    }
    fn write(&self, off: u64, data: &[u8]) -> std::io::Result<()> {
        self.note(data.len());
        self.mem.write(off, data)
    }
}

#[test]
fn large_requests_go_to_the_readers_once_readers_fill_the_cores() {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let ex = Arc::new(Where { mem: MemExport::new(SIZE, 4096), large: Default::default() });
    let io_timeout = Duration::from_secs(1);
    let srv = Server::start(ex.clone(), ServerConfig { io_timeout, ..cfg() });
    let mib = 1 << 20;
    // Each connection writes and reads back its own MiB.
    let round = |cs: &mut [Client<std::net::TcpStream>], seed: u64| {
        for (i, c) in cs.iter_mut().enumerate() {
            let off = (i * mib % SIZE) as u64;
            assert_eq!(c.write(off, &pattern(seed + i as u64, mib)), 0);
            assert_eq!(c.read(off, mib as u32).unwrap(), pattern(seed + i as u64, mib));
        }
    };
    // A small request answered on each: every reader is in transmission.
    let ready = |cs: &mut [Client<std::net::TcpStream>]| {
        for c in cs.iter_mut() {
            assert_eq!(c.cmd(Command::Flush, 0, 0, 0, &[]), 0);
        }
    };
    let by = |names: &[String], prefix: &str| names.iter().all(|n| n.starts_with(prefix));

    // Fewer readers than cores: large requests go to the workers.  (On
    // a one-core machine there are none, and only the middle part holds.)
    let mut cs: Vec<_> = (0..cores - 1).map(|_| open(srv.addr)).collect();
    ready(&mut cs);
    round(&mut cs, 10);
    let names = ex.taken();
    assert_eq!(names.len(), 2 * (cores - 1));
    assert!(by(&names, "nbd-worker-"), "{names:?}");

    // As many readers as cores: each reader serves its own.
    cs.push(open(srv.addr));
    ready(&mut cs);
    round(&mut cs, 20);
    let names = ex.taken();
    assert_eq!(names.len(), 2 * cores);
    assert!(by(&names, "nbd-conn-"), "{names:?}");

    // One idle for longer than `io_timeout`: it stops counting, and the
    // others' large requests go to the workers again ...
    std::thread::sleep(io_timeout * 5 / 2);
    round(&mut cs[..cores - 1], 30);
    let names = ex.taken();
    assert_eq!(names.len(), 2 * (cores - 1));
    assert!(by(&names, "nbd-worker-"), "{names:?}");
    // ... until it has a request again.
    ready(&mut cs);
    round(&mut cs, 40);
    let names = ex.taken();
    assert_eq!(names.len(), 2 * cores);
    assert!(by(&names, "nbd-conn-"), "{names:?}");

    // One gone: back to the workers, once its reader has ended.
    let mut last = cs.pop().unwrap();
    last.send(Command::Disc, 0, 0, 0, 0, &[]);
    let mut b = [0u8; 1];
    assert_eq!(last.s.read(&mut b).unwrap(), 0, "closed after DISC");
    let t0 = std::time::Instant::now();
    loop {
        round(&mut cs, 50);
        let names = ex.taken();
        if by(&names, "nbd-worker-") || t0.elapsed() > Duration::from_secs(10) {
            assert!(by(&names, "nbd-worker-"), "{names:?}");
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(srv.stop().errors, 0);
}
