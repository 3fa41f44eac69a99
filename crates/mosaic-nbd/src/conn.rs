//! One client connection in transmission: a reader thread that parses
//! requests, a shared worker pool that serves them, replies under a mutex.
//!
//! ```text
//!   socket ──▶ reader thread (this module)                 worker pool
//!              read 28-byte header ── parse_request ──┐
//!                bad magic ─▶ log, close              │
//!              check() ── error ─▶ [drain payload]    │
//!                          error reply ───────────────┼──▶ replier ─▶ socket
//!              budget.acquire(len)  (this connection) │     (mutex; a failed
//!              WRITE: wait for its first payload byte │      send closes the
//!              buffers.acquire(len) (all connections) │      connection)
//!              read WRITE payload as it arrives       │
//!              pool.submit(job) ───────────────────────┴─▶ export.read/write/…
//!                                                          [FUA: export.flush]
//!                                                          reply, release both
//!   DISC / EOF / shutdown: stop reading, wait for the budget to drain
//!   (every in-flight request replied), close.
//! ```
//!
//! Memory: a payload is only allocated once the global budget has room for
//! it, and a WRITE's budget is only taken once its payload starts arriving
//! (a client that sends headers and stalls holds nothing); the buffer is
//! filled as bytes arrive.  The socket has `io_timeout` as its read and
//! write timeout: a payload or reply that stalls that long closes the
//! connection, while waiting for the next request header never times out.

use std::io::{self, BufRead, BufReader, Read};
use std::net::Shutdown;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use crate::proto::*;
use crate::request::{check, parse_request, Command, Limits, ParseError, Request};
use crate::server::Shared;
use crate::stream::Stream;

/// Bytes of request stream buffered per connection: enough to take many
/// small pipelined requests per read, small enough that idle connections
/// cost little.
const READ_BUFFER: usize = 64 << 10;

/// The buffered request reader of a new connection.  Made on the accept
/// thread, so every connection's buffer comes from one allocator heap:
/// made on each connection's own thread, each buffer opened a fresh
/// per-thread arena region that transparent huge pages made 2 MiB resident.
pub(crate) fn request_reader(stream: &Stream) -> io::Result<BufReader<Stream>> {
    Ok(BufReader::with_capacity(READ_BUFFER, stream.try_clone()?))
}

/// What a [`Budget`] has handed out, and how many threads wait for it.
#[derive(Default)]
struct Used {
    count: usize,
    bytes: u64,
    waiting: usize,
}

/// Bounds the requests (count, bytes) in flight: of one connection, or
/// (bytes only) of all of them.
pub(crate) struct Budget {
    used: Mutex<Used>,
    cv: Condvar,
    max_count: usize,
    max_bytes: u64,
}

impl Budget {
    pub(crate) fn new(max_count: usize, max_bytes: u64) -> Budget {
        Budget { used: Mutex::new(Used::default()), cv: Condvar::new(), max_count, max_bytes }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Used> {
        self.used.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Wait for room; a request larger than the whole budget runs alone.
    /// False (nothing taken) when `give_up` says so while waiting.
    pub(crate) fn acquire(&self, bytes: u64, give_up: &dyn Fn() -> bool) -> bool {
        let mut g = self.lock();
        while g.count > 0 && (g.count >= self.max_count || g.bytes + bytes > self.max_bytes) {
            if give_up() {
                return false;
            }
            g.waiting += 1;
            g = self.cv.wait_timeout(g, Duration::from_millis(100)).unwrap_or_else(|e| e.into_inner()).0;
            g.waiting -= 1;
        }
        g.count += 1;
        g.bytes += bytes;
        true
    }

    /// Give back what one `acquire` took; wakes waiters only if there are
    /// any (the common case costs no wake-up system call).
    pub(crate) fn release(&self, bytes: u64) {
        let mut g = self.lock();
        g.count -= 1;
        g.bytes -= bytes;
        if g.waiting > 0 {
            self.cv.notify_all();
        }
    }

    /// Wait until everything handed out has been given back.
    fn wait_idle(&self) {
        let mut g = self.lock();
        while g.count > 0 {
            g.waiting += 1;
            g = self.cv.wait(g).unwrap_or_else(|e| e.into_inner());
            g.waiting -= 1;
        }
    }
}

/// Writes simple replies; one mutex keeps replies from interleaving.
pub(crate) struct Replier {
    out: Mutex<Stream>,
    /// A send failed (client gone, or not reading for `io_timeout`).
    dead: AtomicBool,
}

impl Replier {
    /// Send a simple reply.  A client that went away is not an error here:
    /// the first failed send shuts the socket down (the reader sees EOF and
    /// the connection ends) and later replies are dropped.
    pub(crate) fn reply(&self, cookie: u64, err: u32, data: &[u8]) {
        if self.dead.load(Ordering::Relaxed) {
            return;
        }
        let mut h = [0u8; SIMPLE_REPLY_LEN];
        h[0..4].copy_from_slice(&SIMPLE_REPLY_MAGIC.to_be_bytes());
        h[4..8].copy_from_slice(&err.to_be_bytes());
        h[8..16].copy_from_slice(&cookie.to_be_bytes());
        let mut s = self.out.lock().unwrap_or_else(|e| e.into_inner());
        if self.dead.load(Ordering::Relaxed) {
            return;
        }
        let sent = if err == 0 { s.write_all2(&h, data) } else { s.write_all2(&h, &[]) };
        if sent.is_err() {
            self.dead.store(true, Ordering::Relaxed);
            let _ = s.shutdown(Shutdown::Both);
        }
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

/// Whether an error is a socket timeout (SO_RCVTIMEO/SO_SNDTIMEO expired).
fn timed_out(e: &io::Error) -> bool {
    matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut)
}

/// Wait for the next request header's first byte: an idle connection is
/// not an error (timeouts just poll `stopping`).  False at EOF, on an error
/// or when the server stops.
fn await_request<R: Read>(rd: &mut BufReader<R>, sh: &Shared, id: u64) -> bool {
    loop {
        match rd.fill_buf() {
            Ok(b) => return !b.is_empty(),
            Err(e) if timed_out(&e) || e.kind() == io::ErrorKind::Interrupted => {
                if sh.stopping() {
                    return false;
                }
            }
            Err(e) => {
                if !sh.stopping() {
                    sh.log(&format!("conn {id}: read error: {e}; closing"));
                }
                return false;
            }
        }
    }
}

/// Read a WRITE payload of `len` bytes, growing the buffer as bytes arrive
/// (a client that stops part-way has not made the server touch the rest).
fn read_payload<R: Read>(rd: &mut R, len: usize) -> io::Result<Vec<u8>> {
    let mut v = Vec::with_capacity(len);
    rd.take(len as u64).read_to_end(&mut v)?;
    if v.len() < len {
        return Err(io::Error::new(io::ErrorKind::UnexpectedEof, format!("{} of {len} bytes before EOF", v.len())));
    }
    Ok(v)
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

/// Take `bytes` of the global buffer budget for a request and, for a WRITE,
/// read its payload.  A WRITE takes its budget only once the first payload
/// byte is here, so headers without payloads hold nothing.  Err (nothing
/// held, reason logged) closes the connection.
fn admit<R: Read>(sh: &Shared, id: u64, rd: &mut BufReader<R>, req: &Request, bytes: u64) -> Result<Vec<u8>, ()> {
    if req.cmd == Command::Write {
        let why = match rd.fill_buf() {
            Ok([]) => Some("the client closed the connection".to_string()),
            Ok(_) => None,
            Err(e) if timed_out(&e) => Some(format!("nothing for {:?}", sh.io_timeout)),
            Err(e) => Some(e.to_string()),
        };
        if let Some(why) = why {
            sh.log(&format!("conn {id}: WRITE payload of {} bytes did not arrive ({why}); closing", req.length));
            return Err(());
        }
    }
    let stopping = || sh.stopping();
    if !sh.buffers.acquire(bytes, &stopping) {
        return Err(());
    }
    if req.cmd != Command::Write {
        return Ok(Vec::new());
    }
    read_payload(rd, req.length as usize).map_err(|e| {
        let e = if timed_out(&e) { format!("nothing for {:?}", sh.io_timeout) } else { e.to_string() };
        sh.log(&format!("conn {id}: short WRITE payload ({e}); closing"));
        sh.buffers.release(bytes);
    })
}

/// Run transmission on an already-negotiated connection until DISC, EOF,
/// a framing error or shutdown; returns after every reply is sent.
pub(crate) fn transmission(sh: &Arc<Shared>, id: u64, stream: Stream, mut rd: BufReader<Stream>) {
    let out = match stream.try_clone() {
        Ok(s) => s,
        Err(e) => {
            sh.log(&format!("conn {id}: cannot clone socket: {e}"));
            return;
        }
    };
    // Every read and send may stall at most this long (see the module doc).
    let _ = stream.set_read_timeout(Some(sh.io_timeout.max(Duration::from_millis(1))));
    let _ = stream.set_write_timeout(Some(sh.io_timeout.max(Duration::from_millis(1))));
    let rep = Arc::new(Replier { out: Mutex::new(out), dead: AtomicBool::new(false) });
    let budget = Arc::new(Budget::new(sh.max_inflight, sh.max_inflight_bytes));
    let limits = Limits {
        size: sh.info.size,
        min_block: sh.info.min_block as u64,
        max_payload: MAX_PAYLOAD,
        read_only: sh.read_only,
        unaligned_ok: sh.export.unaligned_ok(),
    };
    let mut hdr = [0u8; REQUEST_LEN];
    loop {
        if !await_request(&mut rd, sh, id) {
            break;
        }
        if let Err(e) = rd.read_exact(&mut hdr) {
            if e.kind() != io::ErrorKind::UnexpectedEof && !sh.stopping() {
                sh.log(&format!("conn {id}: read error in a request header: {e}; closing"));
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
        let stopping = || sh.stopping();
        if !budget.acquire(bytes, &stopping) {
            break;
        }
        let payload = match admit(sh, id, &mut rd, &req, bytes) {
            Ok(p) => p,
            Err(()) => {
                budget.release(bytes);
                break;
            }
        };
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
            sh2.buffers.release(bytes);
            b2.release(bytes);
        });
    }
    budget.wait_idle();
    let _ = rd.get_ref().shutdown(Shutdown::Both);
}
