//! One client connection in transmission: a reader thread that parses
//! requests, a shared worker pool that serves them, replies under a mutex.
//!
//! ```text
//!   socket ──▶ reader thread (this module)                 worker pool
//!              read 28-byte header ── parse_request ──┐
//!                bad magic ─▶ log, close              │
//!              check() ── error ─▶ [drain payload]    │
//!                          error reply ───────────────┼──▶ replier ─▶ socket
//!              budget.acquire(len)  (bounds memory)   │     (mutex)
//!              read WRITE payload                     │
//!              pool.submit(job) ───────────────────────┴─▶ export.read/write/…
//!                                                          [FUA: export.flush]
//!                                                          reply, budget.release
//!   DISC / EOF / shutdown: stop reading, wait for the budget to drain
//!   (every in-flight request replied), close.
//! ```

use std::io::{self, BufReader, Read};
use std::net::Shutdown;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Condvar, Mutex};

use crate::proto::*;
use crate::request::{check, parse_request, Command, Limits, ParseError, Request};
use crate::server::Shared;
use crate::stream::Stream;

/// Bounds the requests (count, bytes) a connection has in flight.
pub(crate) struct Budget {
    used: Mutex<(usize, u64)>,
    cv: Condvar,
    max_count: usize,
    max_bytes: u64,
}

impl Budget {
    pub(crate) fn new(max_count: usize, max_bytes: u64) -> Budget {
        Budget { used: Mutex::new((0, 0)), cv: Condvar::new(), max_count, max_bytes }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, (usize, u64)> {
        self.used.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Wait for room; a request larger than the whole budget runs alone.
    fn acquire(&self, bytes: u64) {
        let mut g = self.lock();
        while g.0 > 0 && (g.0 >= self.max_count || g.1 + bytes > self.max_bytes) {
            g = self.cv.wait(g).unwrap_or_else(|e| e.into_inner());
        }
        g.0 += 1;
        g.1 += bytes;
    }

    fn release(&self, bytes: u64) {
        let mut g = self.lock();
        g.0 -= 1;
        g.1 -= bytes;
        self.cv.notify_all();
    }

    fn wait_idle(&self) {
        let mut g = self.lock();
        while g.0 > 0 {
            g = self.cv.wait(g).unwrap_or_else(|e| e.into_inner());
        }
    }
}

/// Writes simple replies; one mutex keeps replies from interleaving.
pub(crate) struct Replier {
    out: Mutex<Stream>,
}

impl Replier {
    /// Send a simple reply.  A client that went away is not an error here:
    /// the reader notices the closed socket.
    pub(crate) fn reply(&self, cookie: u64, err: u32, data: &[u8]) {
        let mut h = [0u8; SIMPLE_REPLY_LEN];
        h[0..4].copy_from_slice(&SIMPLE_REPLY_MAGIC.to_be_bytes());
        h[4..8].copy_from_slice(&err.to_be_bytes());
        h[8..16].copy_from_slice(&cookie.to_be_bytes());
        let mut s = self.out.lock().unwrap_or_else(|e| e.into_inner());
        let _ = if err == 0 { s.write_all2(&h, data) } else { s.write_all2(&h, &[]) };
    }
}

/// Map an export's error to an NBD error value.
pub fn errno_of(e: &io::Error) -> u32 {
    match e.raw_os_error() {
        Some(1) => EPERM,
        Some(12) => ENOMEM,
        Some(22) => EINVAL,
        Some(28) => ENOSPC,
        Some(75) => EOVERFLOW,
        Some(95) => ENOTSUP,
        Some(108) => ESHUTDOWN,
        _ => EIO,
    }
}

/// Read and discard `n` payload bytes in bounded chunks.
fn drain<R: Read>(r: &mut R, mut n: u64) -> io::Result<()> {
    let mut buf = [0u8; 64 << 10];
    while n > 0 {
        let k = n.min(buf.len() as u64) as usize;
        r.read_exact(&mut buf[..k])?;
        n -= k as u64;
    }
    Ok(())
}

/// Serve one request on a worker thread and send its reply.
fn serve(sh: &Shared, r: &Request, payload: Vec<u8>, rep: &Replier) {
    let ex = &sh.export;
    let res: io::Result<Vec<u8>> = match r.cmd {
        Command::Read => {
            let mut buf = vec![0u8; r.length as usize];
            ex.read(r.offset, &mut buf).map(|_| buf)
        }
        Command::Write => ex.write(r.offset, &payload).map(|_| Vec::new()),
        Command::Trim => ex.trim(r.offset, r.length as u64).map(|_| Vec::new()),
        Command::WriteZeroes => ex.write_zeroes(r.offset, r.length as u64).map(|_| Vec::new()),
        Command::Flush => ex.flush().map(|_| Vec::new()),
        Command::Disc | Command::Unknown(_) => Ok(Vec::new()),
    };
    // FUA: the data must be durable before the reply.
    let res = match res {
        Ok(v) if r.fua() && matches!(r.cmd, Command::Write | Command::Trim | Command::WriteZeroes) => ex.flush().map(|_| v),
        other => other,
    };
    match res {
        Ok(data) => rep.reply(r.cookie, 0, &data),
        Err(e) => {
            sh.errors.fetch_add(1, Ordering::Relaxed);
            sh.log(&format!("{:?} at {} len {} failed: {e}", r.cmd, r.offset, r.length));
            rep.reply(r.cookie, errno_of(&e), &[]);
        }
    }
}

/// Run transmission on an already-negotiated connection until DISC, EOF,
/// a framing error or shutdown; returns after every reply is sent.
pub(crate) fn transmission(sh: &Arc<Shared>, id: u64, stream: Stream) {
    let out = match stream.try_clone() {
        Ok(s) => s,
        Err(e) => {
            sh.log(&format!("conn {id}: cannot clone socket: {e}"));
            return;
        }
    };
    let rep = Arc::new(Replier { out: Mutex::new(out) });
    let budget = Arc::new(Budget::new(sh.max_inflight, sh.max_inflight_bytes));
    let limits = Limits {
        size: sh.info.size,
        min_block: sh.info.min_block as u64,
        max_payload: MAX_PAYLOAD,
        read_only: sh.read_only,
        unaligned_ok: sh.export.unaligned_ok(),
    };
    let mut rd = BufReader::with_capacity(256 << 10, stream);
    let mut hdr = [0u8; REQUEST_LEN];
    loop {
        if let Err(e) = rd.read_exact(&mut hdr) {
            if e.kind() != io::ErrorKind::UnexpectedEof && !sh.stopping() {
                sh.log(&format!("conn {id}: read error: {e}; closing"));
            }
            break;
        }
        let req = match parse_request(&hdr) {
            Ok(r) => r,
            Err(e @ ParseError::BadMagic(_)) | Err(e @ ParseError::Short(_)) => {
                sh.log(&format!("conn {id}: {e}; closing this connection"));
                break;
            }
        };
        sh.requests.fetch_add(1, Ordering::Relaxed);
        if req.cmd == Command::Disc {
            break;
        }
        if let Err(err) = check(&req, &limits) {
            sh.errors.fetch_add(1, Ordering::Relaxed);
            sh.log(&format!(
                "conn {id}: rejected {:?} offset {} length {} flags {:#x}: error {err}",
                req.cmd, req.offset, req.length, req.flags
            ));
            if drain(&mut rd, req.payload_len() as u64).is_err() {
                break;
            }
            rep.reply(req.cookie, err, &[]);
            continue;
        }
        let bytes = match req.cmd {
            Command::Read | Command::Write => req.length as u64,
            _ => 0,
        };
        budget.acquire(bytes);
        let mut payload = Vec::new();
        if req.cmd == Command::Write {
            payload.resize(req.length as usize, 0);
            if let Err(e) = rd.read_exact(&mut payload) {
                sh.log(&format!("conn {id}: short WRITE payload: {e}; closing"));
                budget.release(bytes);
                break;
            }
        }
        let (sh2, rep2, b2) = (sh.clone(), rep.clone(), budget.clone());
        sh.submit(move || {
            // An export that panics costs that request (EIO), not the
            // worker thread or the connection.
            let served = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| serve(&sh2, &req, payload, &rep2)));
            if served.is_err() {
                sh2.errors.fetch_add(1, Ordering::Relaxed);
                sh2.log(&format!("conn {id}: export panicked serving {:?} at {}", req.cmd, req.offset));
                rep2.reply(req.cookie, EIO, &[]);
            }
            b2.release(bytes);
        });
    }
    budget.wait_idle();
    let _ = rd.get_ref().shutdown(Shutdown::Both);
}
