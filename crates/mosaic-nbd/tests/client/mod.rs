//! A minimal hand-written NBD client and server fixture for the tests.
#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use mosaic_nbd::proto::*;
use mosaic_nbd::{serve, Command, Export, Listener, Request, ServeStats, ServerConfig};

pub struct Server {
    pub addr: SocketAddr,
    stop: Arc<AtomicBool>,
    handle: Option<JoinHandle<ServeStats>>,
}

impl Server {
    pub fn start(export: Arc<dyn Export>, cfg: ServerConfig) -> Server {
        let l = Listener::bind_tcp("127.0.0.1:0").unwrap();
        let port = l.port().unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let s2 = stop.clone();
        let handle = std::thread::spawn(move || serve(&l, export, &cfg, s2).unwrap());
        Server { addr: SocketAddr::from(([127, 0, 0, 1], port)), stop, handle: Some(handle) }
    }

    pub fn stop(mut self) -> ServeStats {
        self.stop.store(true, Ordering::Relaxed);
        self.handle.take().unwrap().join().unwrap()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

pub fn cfg() -> ServerConfig {
    ServerConfig { name: "test".into(), log: false, ..ServerConfig::default() }
}

pub struct OptReply {
    pub opt: u32,
    pub ty: u32,
    pub data: Vec<u8>,
}

pub struct Client<S: Read + Write> {
    pub s: S,
    pub size: u64,
    pub tflags: u16,
    pub block: Option<(u32, u32, u32)>,
    /// Extended headers were negotiated: requests go out as 32-byte
    /// headers.
    pub extended: bool,
}

pub fn connect(addr: SocketAddr) -> TcpStream {
    let s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    s
}

pub fn u16b(b: &[u8]) -> u16 {
    u16::from_be_bytes([b[0], b[1]])
}
pub fn u32b(b: &[u8]) -> u32 {
    u32::from_be_bytes(b[..4].try_into().unwrap())
}
pub fn u64b(b: &[u8]) -> u64 {
    u64::from_be_bytes(b[..8].try_into().unwrap())
}

impl<S: Read + Write> Client<S> {
    /// Read the greeting and send client flags.
    pub fn greet(mut s: S, cflags: u32) -> Client<S> {
        let mut g = [0u8; 18];
        s.read_exact(&mut g).unwrap();
        assert_eq!(u64b(&g[0..]), NBDMAGIC);
        assert_eq!(u64b(&g[8..]), IHAVEOPT);
        assert_eq!(u16b(&g[16..]) & FLAG_FIXED_NEWSTYLE, FLAG_FIXED_NEWSTYLE);
        s.write_all(&cflags.to_be_bytes()).unwrap();
        Client { s, size: 0, tflags: 0, block: None, extended: false }
    }

    pub fn send_opt(&mut self, opt: u32, data: &[u8]) {
        let mut v = IHAVEOPT.to_be_bytes().to_vec();
        v.extend_from_slice(&opt.to_be_bytes());
        v.extend_from_slice(&(data.len() as u32).to_be_bytes());
        v.extend_from_slice(data);
        self.s.write_all(&v).unwrap();
    }

    pub fn opt_reply(&mut self) -> OptReply {
        let mut h = [0u8; 20];
        self.s.read_exact(&mut h).unwrap();
        assert_eq!(u64b(&h), REPLY_MAGIC);
        let mut data = vec![0u8; u32b(&h[16..]) as usize];
        self.s.read_exact(&mut data).unwrap();
        OptReply { opt: u32b(&h[8..]), ty: u32b(&h[12..]), data }
    }

    pub fn info_payload(name: &str, infos: &[u16]) -> Vec<u8> {
        let mut d = (name.len() as u32).to_be_bytes().to_vec();
        d.extend_from_slice(name.as_bytes());
        d.extend_from_slice(&(infos.len() as u16).to_be_bytes());
        for i in infos {
            d.extend_from_slice(&i.to_be_bytes());
        }
        d
    }

    /// Send INFO or GO and collect replies up to ACK; Err(reply type) on error.
    pub fn info_or_go(&mut self, opt: u32, name: &str) -> Result<(), u32> {
        self.send_opt(opt, &Self::info_payload(name, &[INFO_BLOCK_SIZE, INFO_NAME]));
        loop {
            let r = self.opt_reply();
            assert_eq!(r.opt, opt);
            match r.ty {
                REP_ACK => return Ok(()),
                REP_INFO => match u16b(&r.data) {
                    INFO_EXPORT => {
                        assert_eq!(r.data.len(), 12);
                        self.size = u64b(&r.data[2..]);
                        self.tflags = u16b(&r.data[10..]);
                    }
                    INFO_BLOCK_SIZE => {
                        assert_eq!(r.data.len(), 14);
                        self.block = Some((u32b(&r.data[2..]), u32b(&r.data[6..]), u32b(&r.data[10..])));
                    }
                    _ => {}
                },
                t => return Err(t),
            }
        }
    }

    pub fn send(&mut self, cmd: Command, flags: u16, cookie: u64, offset: u64, length: u32, payload: &[u8]) {
        self.send64(cmd, flags, cookie, offset, length as u64, payload);
    }

    /// Send a request in the session's header form (a length past 32
    /// bits needs extended headers).
    pub fn send64(&mut self, cmd: Command, flags: u16, cookie: u64, offset: u64, length: u64, payload: &[u8]) {
        let r = Request { flags, cmd, cookie, offset, length };
        let mut v = if self.extended { r.encode_extended().to_vec() } else { r.encode().to_vec() };
        v.extend_from_slice(payload);
        self.s.write_all(&v).unwrap();
    }

    /// Read one extended reply chunk (its payload whole).
    pub fn ext_reply(&mut self) -> ExtReply {
        let mut h = [0u8; 32];
        self.s.read_exact(&mut h).unwrap();
        assert_eq!(u32b(&h), EXTENDED_REPLY_MAGIC, "an extended reply chunk");
        let mut payload = vec![0u8; u64b(&h[24..]) as usize];
        self.s.read_exact(&mut payload).unwrap();
        ExtReply { flags: u16b(&h[4..]), ty: u16b(&h[6..]), cookie: u64b(&h[8..]), offset: u64b(&h[16..]), payload }
    }

    /// Read one simple reply header: (cookie, error).
    pub fn reply(&mut self) -> (u64, u32) {
        let mut h = [0u8; 16];
        self.s.read_exact(&mut h).unwrap();
        assert_eq!(u32b(&h), SIMPLE_REPLY_MAGIC);
        (u64b(&h[8..]), u32b(&h[4..]))
    }

    pub fn read(&mut self, offset: u64, len: u32) -> Result<Vec<u8>, u32> {
        self.send(Command::Read, 0, 1, offset, len, &[]);
        let (c, e) = self.reply();
        assert_eq!(c, 1);
        if e != 0 {
            return Err(e);
        }
        let mut b = vec![0u8; len as usize];
        self.s.read_exact(&mut b).unwrap();
        Ok(b)
    }

    pub fn cmd(&mut self, cmd: Command, flags: u16, offset: u64, len: u32, payload: &[u8]) -> u32 {
        self.send(cmd, flags, 2, offset, len, payload);
        let (c, e) = self.reply();
        assert_eq!(c, 2);
        e
    }

    /// 64 writes of 4 KiB sent before any reply is read, each read back;
    /// then one write of `size` bytes from offset 0 and one read of them.
    pub fn pipelined_then_whole(&mut self, size: usize) {
        for i in 0..64u64 {
            self.send(Command::Write, 0, i, i * 4096, 4096, &pattern(i, 4096));
        }
        let mut done: Vec<u64> = (0..64).map(|_| self.reply()).map(|(cookie, err)| {
            assert_eq!(err, 0);
            cookie
        }).collect();
        done.sort();
        assert_eq!(done, (0..64).collect::<Vec<_>>());
        for i in 0..64u64 {
            assert_eq!(self.read(i * 4096, 4096).unwrap(), pattern(i, 4096), "block {i}");
        }
        let big = pattern(99, size);
        assert_eq!(self.write(0, &big), 0);
        assert!(self.read(0, size as u32).unwrap() == big, "{size} bytes read back whole");
    }

    pub fn write(&mut self, offset: u64, data: &[u8]) -> u32 {
        self.cmd(Command::Write, 0, offset, data.len() as u32, data)
    }

    /// Read one reply of either kind (a structured chunk's payload read whole).
    pub fn any_reply(&mut self) -> AnyReply {
        let mut m = [0u8; 4];
        self.s.read_exact(&mut m).unwrap();
        match u32b(&m) {
            SIMPLE_REPLY_MAGIC => {
                let mut h = [0u8; 12];
                self.s.read_exact(&mut h).unwrap();
                AnyReply::Simple { err: u32b(&h), cookie: u64b(&h[4..]) }
            }
            STRUCTURED_REPLY_MAGIC => {
                let mut h = [0u8; 16];
                self.s.read_exact(&mut h).unwrap();
                let mut payload = vec![0u8; u32b(&h[12..]) as usize];
                self.s.read_exact(&mut payload).unwrap();
                AnyReply::Chunk { flags: u16b(&h), ty: u16b(&h[2..]), cookie: u64b(&h[4..]), payload }
            }
            m => panic!("bad reply magic {m:#x}"),
        }
    }

    /// Send a meta context option with one export name and queries.
    pub fn meta(&mut self, opt: u32, name: &str, queries: &[&str]) -> Vec<OptReply> {
        let mut d = (name.len() as u32).to_be_bytes().to_vec();
        d.extend_from_slice(name.as_bytes());
        d.extend_from_slice(&(queries.len() as u32).to_be_bytes());
        for q in queries {
            d.extend_from_slice(&(q.len() as u32).to_be_bytes());
            d.extend_from_slice(q.as_bytes());
        }
        self.send_opt(opt, &d);
        let mut out = Vec::new();
        loop {
            let r = self.opt_reply();
            assert_eq!(r.opt, opt);
            let last = r.ty != REP_META_CONTEXT;
            out.push(r);
            if last {
                return out;
            }
        }
    }
}

/// One extended reply chunk.
#[derive(Debug, PartialEq, Eq)]
pub struct ExtReply {
    pub flags: u16,
    pub ty: u16,
    pub cookie: u64,
    /// The offset of the request it answers.
    pub offset: u64,
    pub payload: Vec<u8>,
}

impl ExtReply {
    /// The NBD error of an ERROR chunk, 0 for any other.
    pub fn error(&self) -> u32 {
        if self.ty == REPLY_TYPE_ERROR {
            u32b(&self.payload)
        } else {
            0
        }
    }
}

/// A reply as it came: simple, or one structured chunk.
#[derive(Debug, PartialEq, Eq)]
pub enum AnyReply {
    Simple { err: u32, cookie: u64 },
    Chunk { flags: u16, ty: u16, cookie: u64, payload: Vec<u8> },
}

/// Connect, negotiate with GO, ready for transmission.
pub fn open(addr: SocketAddr) -> Client<TcpStream> {
    let mut c = Client::greet(connect(addr), FLAG_C_FIXED_NEWSTYLE | FLAG_C_NO_ZEROES);
    c.info_or_go(OPT_GO, "").unwrap();
    c
}

/// Deterministic test pattern.
pub fn pattern(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

/// Whether libnbd's tools (nbdinfo, nbdcopy: Debian's libnbd-bin) are
/// here; when not, says the test is skipped.
pub fn libnbd_tools() -> bool {
    let here = std::process::Command::new("nbdcopy").arg("--version").output().is_ok();
    if !here {
        eprintln!("skipped: no nbdcopy (libnbd-bin)");
    }
    here
}

/// Through libnbd's tools at `uri`: nbdinfo sees an export of `size`
/// bytes, and nbdcopy writes `pattern(seed, size)` from a file in `dir`
/// and reads it back into another, byte for byte (`what` names the case).
pub fn libnbd_copies(uri: &str, dir: &std::path::Path, seed: u64, size: usize, what: &str) {
    let run = |args: &[&str], tool: &str| std::process::Command::new(tool).args(args).output().unwrap();
    let out = run(&["--json", uri], "nbdinfo");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let info = String::from_utf8_lossy(&out.stdout);
    assert!(info.contains(&format!("\"export-size\": {size}")), "{info}");
    let (src, back) = (dir.join("src.img"), dir.join("back.img"));
    let data = pattern(seed, size);
    std::fs::write(&src, &data).unwrap();
    for (a, b) in [(src.to_str().unwrap(), uri), (uri, back.to_str().unwrap())] {
        let o = run(&[a, b], "nbdcopy");
        assert!(o.status.success(), "nbdcopy {a} {b}: {}", String::from_utf8_lossy(&o.stderr));
    }
    assert!(std::fs::read(&back).unwrap() == data, "{what}: bytes read back");
}
