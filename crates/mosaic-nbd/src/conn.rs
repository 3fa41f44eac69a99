//! One client connection in transmission: a reader thread that parses
//! requests, a shared worker pool that serves them (or the reader itself,
//! for an inline export), replies batched by whichever thread sends.
//!
//! Replies are simple unless the client negotiated structured replies.
//! Then a READ is answered by one OFFSET_DATA chunk (never fragmented, so
//! DF always holds), BLOCK_STATUS by one BLOCK_STATUS chunk, and every
//! error by an ERROR chunk carrying the reason; other successes stay
//! simple replies, as the spec allows.  With extended headers, requests
//! are 32 bytes with 64-bit lengths and every reply is an extended chunk
//! (32-byte header: magic, flags, type, cookie, the request's offset, a
//! 64-bit payload length): a payload-less success is a NONE chunk, and
//! BLOCK_STATUS answers with 64-bit descriptors (BLOCK_STATUS_EXT).
//!
//! ```text
//!   socket ──▶ reader thread (this module)                 worker pool
//!              read 28-byte header ── parse_request ──┐
//!                bad magic ─▶ log, close              │
//!              check() ── error ─▶ [drain payload]    │
//!                budget.acquire(0), error reply ──────┼──▶ replier ─▶ socket
//!              budget.acquire(len)  (this connection) │     (queue; the first
//!              WRITE: wait for its first payload byte │      thread to find no
//!              buffers.acquire(len) (all connections) │      sender sends the
//!              read WRITE payload as it arrives       │      whole queue in one
//!              inline export, <= 64 KiB (or any size  │      sendmsg; a failed
//!                once readers >= cores): serve here,  │      send closes the
//!                hold the reply while the next        │      connection, as
//!                request is buffered ─────────────────┼──▶   does a reply not
//!                                                     │      read in time)
//!              else pool.submit(job) ─────────────────┴─▶ export.read/write/…
//!                                                          [FUA: export.flush]
//!                                                          reply; sent, it
//!                                                          releases both budgets
//!   DISC / EOF / shutdown: stop reading, send held replies, wait for the
//!   budget to drain (every in-flight request replied), close.
//! ```
//!
//! Why inline: on a file in the page cache a 4 KiB request takes a few
//! microseconds, and handing it to a worker (a futex wake-up, a context
//! switch, another when the worker sleeps again) cost more than serving it:
//! perf under 4 KiB random writes put a fifth of the server's time in futex
//! calls.  Served on the reader, a burst read in one `recv` is answered in
//! one `sendmsg`.  A large request goes to a worker while the machine has
//! a core with no reader on it, where its copy overlaps the next receive;
//! once the readers of connections with requests are as many as the
//! cores, the reader serves it too, on the core that received its payload
//! (see [`inline`]).
//!
//! Memory: a payload is only allocated once the global budget has room for
//! it, and a WRITE's budget is only taken once its payload starts arriving
//! (a client that sends headers and stalls holds nothing); the buffer is
//! filled as bytes arrive.  A client must make progress, as nbdkit's and
//! TCP's own timeouts ask, not finish in a set time: a WRITE payload of
//! which no byte arrives for `io_timeout` (the socket's read timeout), or
//! a reply of which the socket takes no byte for `io_timeout`, closes the
//! connection, while waiting for the next request header never times out;
//! a slow link or a client paused for less than `io_timeout` carries on
//! however long its requests take (a send that goes through at once reads
//! no clock).  Once the server stops, no payload or reply gets past
//! `io_timeout` after the stop, so shutdown waits no longer for a client.
//! A slow client cannot hold up the others: one connection holds at most
//! `max_inflight_bytes` (by default one largest request) of the server's
//! buffer budget, a fraction of it.
//!
//! Rejected requests hold a slot of the connection's request budget until
//! their reply is sent, like any other: a client flooding bad requests
//! while it reads no replies is stopped being read at `max_inflight`
//! queued replies, instead of queueing replies without bound.

use std::io::{self, BufRead, BufReader, Read};
use std::net::Shutdown;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use crate::export::Extent;
use crate::handshake::Session;
use crate::proto::*;
use crate::request::{check, header_len, parse_request_as, Command, Limits, ParseError, Request};
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
    /// Most bytes held at once.
    peak: u64,
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
        g.peak = g.peak.max(g.bytes);
        true
    }

    /// Most bytes that were held at once.
    pub(crate) fn peak(&self) -> u64 {
        self.lock().peak
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

/// The longest reply header: an extended chunk's, with a READ's offset or
/// BLOCK_STATUS_EXT's context id and count.
const HEADER_MAX: usize = EXTENDED_REPLY_LEN + 8;

/// A reply waiting to be sent, and the budget it holds until then (so a
/// client that stops reading cannot make the server hold unbounded replies).
struct Pending {
    header: [u8; HEADER_MAX],
    header_len: u8,
    data: Vec<u8>,
    held: u64,
}

/// What a request came to: its reply payload (READ bytes, BLOCK_STATUS
/// descriptors, nothing), or an NBD error value and why.
pub(crate) type Outcome = Result<Vec<u8>, (u32, String)>;

/// Longest error message sent in an ERROR chunk (the spec's string limit).
const MESSAGE_MAX: usize = 4096;

/// The header of `req`'s reply and the payload that follows it.
fn frame(session: &Session, req: &Request, out: Outcome) -> ([u8; HEADER_MAX], usize, Vec<u8>) {
    let mut h = [0u8; HEADER_MAX];
    if !session.structured {
        let (err, data) = match out {
            Ok(data) => (0, data),
            Err((err, _)) => (err, Vec::new()),
        };
        h[0..4].copy_from_slice(&SIMPLE_REPLY_MAGIC.to_be_bytes());
        h[4..8].copy_from_slice(&err.to_be_bytes());
        h[8..16].copy_from_slice(&req.cookie.to_be_bytes());
        return (h, SIMPLE_REPLY_LEN, data);
    }
    // (type, the chunk's own fields after the header, payload)
    let x = session.extended;
    let (ty, extra, data): (u16, Vec<u8>, Vec<u8>) = match out {
        Err((err, why)) => {
            let mut why = why.into_bytes();
            why.truncate(MESSAGE_MAX);
            while std::str::from_utf8(&why).is_err() {
                why.pop();
            }
            let mut extra = err.to_be_bytes().to_vec();
            extra.extend_from_slice(&(why.len() as u16).to_be_bytes());
            (REPLY_TYPE_ERROR, extra, why)
        }
        Ok(data) if req.cmd == Command::Read => (REPLY_TYPE_OFFSET_DATA, req.offset.to_be_bytes().to_vec(), data),
        Ok(data) if req.cmd == Command::BlockStatus && x => {
            let mut extra = META_BASE_ALLOCATION_ID.to_be_bytes().to_vec();
            extra.extend_from_slice(&((data.len() / EXT_DESCRIPTOR) as u32).to_be_bytes());
            (REPLY_TYPE_BLOCK_STATUS_EXT, extra, data)
        }
        Ok(data) if req.cmd == Command::BlockStatus => (REPLY_TYPE_BLOCK_STATUS, META_BASE_ALLOCATION_ID.to_be_bytes().to_vec(), data),
        Ok(_) => (REPLY_TYPE_NONE, Vec::new(), Vec::new()),
    };
    if ty == REPLY_TYPE_NONE && !x {
        // A success with no payload: a simple reply is shorter (extended
        // headers allow no simple reply).
        return frame(&Session::default(), req, Ok(Vec::new()));
    }
    let magic = if x { EXTENDED_REPLY_MAGIC } else { STRUCTURED_REPLY_MAGIC };
    h[0..4].copy_from_slice(&magic.to_be_bytes());
    h[4..6].copy_from_slice(&REPLY_FLAG_DONE.to_be_bytes());
    h[6..8].copy_from_slice(&ty.to_be_bytes());
    h[8..16].copy_from_slice(&req.cookie.to_be_bytes());
    let len = (extra.len() + data.len()) as u64;
    let at = if x {
        h[16..24].copy_from_slice(&req.offset.to_be_bytes());
        h[24..32].copy_from_slice(&len.to_be_bytes());
        EXTENDED_REPLY_LEN
    } else {
        h[16..20].copy_from_slice(&(len as u32).to_be_bytes());
        STRUCTURED_REPLY_LEN
    };
    // An error's fields (4 + 2 bytes) fit in the header buffer, as do a
    // READ's offset and BLOCK_STATUS's context id (and count).
    h[at..at + extra.len()].copy_from_slice(&extra);
    (h, at + extra.len(), data)
}

/// Bytes of one BLOCK_STATUS descriptor: 32-bit length and flags, or
/// 64-bit ones with extended headers.
const DESCRIPTOR: usize = 8;
const EXT_DESCRIPTOR: usize = 16;

/// Most descriptors in one BLOCK_STATUS reply; a client asks again for
/// the rest of its range (the spec lets a reply cover less than asked).
const MAX_EXTENTS: usize = 1 << 16;

/// Most descriptors the reply to BLOCK_STATUS `r` may hold: one with
/// REQ_ONE, else one a minimum block of its range (and the two partial
/// ones at its ends), at most [`MAX_EXTENTS`].  Its bytes (8 a
/// descriptor) are taken from the budgets as a READ's payload is, so
/// replies queued for a client that does not read them stay bounded; a
/// reply never holds more (the spec lets it cover less than asked).
fn status_runs(r: &Request, min_block: u64) -> usize {
    if r.flags & CMD_FLAG_REQ_ONE != 0 {
        return 1;
    }
    r.length.div_ceil(min_block.max(1)).saturating_add(2).min(MAX_EXTENTS as u64) as usize
}

/// The descriptors (length, flags) of a BLOCK_STATUS reply for a request
/// of `len` bytes: runs of equal flags merged, empty ones dropped, cut at
/// `len`, at most `max` of them (1 for REQ_ONE); `wide`: 64-bit fields
/// (extended headers), else 32-bit ones (`len` then fits 32 bits, as its
/// request's did).  An export that reports nothing is answered with one
/// allocated extent (always a true answer).
fn descriptors(extents: &[Extent], len: u64, max: usize, wide: bool) -> Vec<u8> {
    let mut runs: Vec<(u64, u32)> = Vec::new();
    let mut left = len;
    for e in extents {
        let n = e.len.min(left);
        if n == 0 {
            continue;
        }
        let full = runs.len() >= max;
        match runs.last_mut() {
            Some(last) if last.1 == e.flags => last.0 += n,
            _ if full => break,
            _ => runs.push((n, e.flags)),
        }
        left -= n;
    }
    if runs.is_empty() {
        runs.push((len, 0));
    }
    let mut out = Vec::with_capacity(runs.len() * if wide { EXT_DESCRIPTOR } else { DESCRIPTOR });
    for (n, f) in runs {
        if wide {
            out.extend_from_slice(&n.to_be_bytes());
            out.extend_from_slice(&(f as u64).to_be_bytes());
        } else {
            out.extend_from_slice(&(n as u32).to_be_bytes());
            out.extend_from_slice(&f.to_be_bytes());
        }
    }
    out
}

#[derive(Default)]
struct Outbox {
    queue: Vec<Pending>,
    /// Payload bytes of the replies held back by an inline reader.
    held_bytes: usize,
    /// A thread is sending (it sends whatever is queued before it stops).
    sending: bool,
    /// Most replies queued at once (see `ServeStats::max_queued_replies`).
    peak: usize,
}

/// Replies of one connection, batched: a thread with a reply to send
/// queues it; if no thread is sending, it becomes the sender and sends
/// everything queued, its own and the ones queued while it sent, with one
/// `sendmsg` per batch.  Replies never interleave and nobody waits on a
/// lock while another thread writes to the socket.
pub(crate) struct Replier {
    /// The connection's number, for the log.
    id: u64,
    out: Mutex<Stream>,
    outbox: Mutex<Outbox>,
    /// A send failed (client gone, or a reply not read within `io_timeout`).
    dead: AtomicBool,
    /// What the handshake agreed: how replies are framed.
    session: Session,
    /// Where a sent reply's `held` bytes go back: this connection's budget
    /// and the server's buffer budget.
    budget: Arc<Budget>,
    sh: Arc<Shared>,
}

/// Largest request an inline export's reader serves itself while the
/// machine has cores to spare (see [`inline`]).  A larger one's copy
/// dwarfs the hand-off, and on a worker it overlaps with the reader
/// receiving the next payload; on a machine loaded by other processes the
/// reader alone also got one thread's share of the CPU (1 MiB writes all
/// served inline: 0.38 of nbdkit in that bench).
const INLINE_MAX: u64 = 64 << 10;

/// Whether the reader serves a request of `len` bytes itself.  Small ones
/// always (on an inline export); large ones once the readers of
/// connections with requests ([`Transmitting`]) are as many as the cores:
/// every core then has a reader to run, so a worker adds no parallelism,
/// only a hand-off and a copy from a payload received on another core.
/// (Two fio jobs of 1 MiB writes on two cores, served file: a median of
/// 4,153 MiB/s served by the readers against 3,206 by the workers over 19
/// rounds; at one job the workers stay ahead.)
fn inline(sh: &Shared, len: u64) -> bool {
    sh.export.serve_inline() && (len <= INLINE_MAX || sh.transmitting.load(Ordering::Relaxed) >= sh.cores)
}

/// Counts a connection's reader in [`Shared::transmitting`] while it has
/// requests: from the start of transmission, and again from each request
/// after a wait of a whole `io_timeout` with none (an idle client holds no
/// core, so it must not keep the others' large requests off the workers).
struct Transmitting<'a> {
    sh: &'a Shared,
    counted: std::cell::Cell<bool>,
}

impl<'a> Transmitting<'a> {
    fn new(sh: &'a Shared) -> Self {
        let t = Transmitting { sh, counted: std::cell::Cell::new(false) };
        t.set(true);
        t
    }

    fn set(&self, on: bool) {
        if self.counted.replace(on) != on {
            if on {
                self.sh.transmitting.fetch_add(1, Ordering::Relaxed);
            } else {
                self.sh.transmitting.fetch_sub(1, Ordering::Relaxed);
            }
        }
    }
}

impl Drop for Transmitting<'_> {
    fn drop(&mut self) {
        self.set(false);
    }
}

/// Replies per batch at most (each one or two buffers).
const BATCH: usize = 256;
/// Replies an inline reader holds back at most, and their payload bytes.
const HOLD: usize = 64;
const HOLD_BYTES: usize = 1 << 20;

impl Replier {
    fn new(sh: &Arc<Shared>, id: u64, out: Stream, budget: Arc<Budget>, session: Session) -> Replier {
        Replier { id, out: Mutex::new(out), outbox: Mutex::new(Outbox::default()), dead: AtomicBool::new(false), session, budget, sh: sh.clone() }
    }

    fn outbox(&self) -> std::sync::MutexGuard<'_, Outbox> {
        self.outbox.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Send the reply to `req`; `held` bytes of both budgets (taken for
    /// this request by the reader; [`HOLDS_SLOT`]: only a slot of the
    /// connection's) are given back once it is sent or dropped.  A client
    /// that went away is not an error here: the first failed send shuts
    /// the socket down (the reader sees EOF and the connection ends) and
    /// later replies are dropped.
    pub(crate) fn reply(&self, req: &Request, out: Outcome, held: u64) {
        self.push(req, out, held, true);
    }

    /// Queue a reply and send the queue, unless another thread is sending
    /// or `send` is false: an inline reader holds a reply back while the
    /// next request is already buffered (at most [`HOLD`] replies and
    /// [`HOLD_BYTES`], whose budget goes back at once so the reader cannot
    /// wait for room its own held replies take).
    fn push(&self, req: &Request, out: Outcome, held: u64, send: bool) {
        let (header, header_len, data) = frame(&self.session, req, out);
        let header_len = header_len as u8;
        let mut ob = self.outbox();
        if !send && !ob.sending && ob.queue.len() < HOLD && ob.held_bytes + data.len() <= HOLD_BYTES {
            ob.held_bytes += data.len();
            ob.queue.push(Pending { header, header_len, data, held: HOLDS_NOTHING });
            ob.peak = ob.peak.max(ob.queue.len());
            drop(ob);
            self.release(held);
            return;
        }
        ob.queue.push(Pending { header, header_len, data, held });
        ob.peak = ob.peak.max(ob.queue.len());
        self.drain(ob);
    }

    /// Most replies that were queued at once on this connection.
    fn peak(&self) -> usize {
        self.outbox().peak
    }

    /// Send the replies held back, if any.
    pub(crate) fn flush(&self) {
        let ob = self.outbox();
        if !ob.queue.is_empty() {
            self.drain(ob);
        }
    }

    /// Become the sender, unless a thread already is, and send the queue
    /// until it stays empty.
    fn drain<'a>(&'a self, mut ob: std::sync::MutexGuard<'a, Outbox>) {
        if ob.sending {
            return;
        }
        ob.sending = true;
        let mut batch = Vec::new();
        loop {
            std::mem::swap(&mut batch, &mut ob.queue);
            ob.held_bytes = 0;
            drop(ob);
            for chunk in batch.chunks(BATCH) {
                self.send(chunk);
            }
            for p in batch.drain(..) {
                self.release(p.held);
                self.sh.bufs.give(p.data);
            }
            ob = self.outbox();
            if ob.queue.is_empty() {
                ob.sending = false;
                return;
            }
        }
    }

    fn release(&self, held: u64) {
        match held {
            HOLDS_NOTHING => {}
            HOLDS_SLOT => self.budget.release(0),
            bytes => {
                self.sh.buffers.release(bytes);
                self.budget.release(bytes);
            }
        }
    }

    /// One batch in as few `sendmsg` calls as the socket takes, the socket
    /// taking some of it within `io_timeout` of each refusal (see
    /// [`reply_deadlines`]).
    fn send(&self, batch: &[Pending]) {
        if self.dead.load(Ordering::Relaxed) {
            return;
        }
        let mut bufs: Vec<&[u8]> = Vec::with_capacity(batch.len() * 2);
        for p in batch {
            bufs.push(&p.header[..p.header_len as usize]);
            if !p.data.is_empty() {
                bufs.push(&p.data);
            }
        }
        let mut s = self.out.lock().unwrap_or_else(|e| e.into_inner());
        let deadline = reply_deadlines(self.sh.io_timeout, || self.sh.stopped_at());
        if let Err(e) = s.write_all_bufs_until(&bufs, deadline) {
            self.dead.store(true, Ordering::Relaxed);
            let _ = s.shutdown(Shutdown::Both);
            if e.kind() == io::ErrorKind::TimedOut {
                self.sh.log(&format!("conn {}: the client read nothing of its replies for {:?}; closing this connection", self.id, self.sh.io_timeout));
            }
        }
    }
}

/// Why a request was rejected, for the ERROR chunk a structured client
/// gets (and shows its user).
fn rejected(req: &Request, err: u32) -> String {
    let what = match err {
        EPERM => "the export is read-only",
        ENOSPC => "the range ends past the end of the export",
        ENOTSUP => "this export cannot zero faster than it writes",
        _ => "invalid request (command, flags, length, alignment or range)",
    };
    format!("{:?} at {} len {}: {what}", req.cmd, req.offset, req.length)
}

/// `held` of a reply that holds no budget (one an inline reader held back).
const HOLDS_NOTHING: u64 = u64::MAX;
/// `held` of a reply that holds a slot of the connection's budget but no
/// bytes and nothing of the server's buffer budget (a rejected request's).
const HOLDS_SLOT: u64 = u64::MAX - 1;

/// The deadline of each `sendmsg` of a batch of replies, asked when the
/// socket has no room: `limit` from then (the client must take some of it
/// within `limit`: progress, not a whole reply, so a slow reader keeps its
/// connection), and never past `limit` after the server stopped
/// (`stopped` says when, once it has).
fn reply_deadlines<'a>(limit: Duration, stopped: impl Fn() -> Option<Instant> + 'a) -> impl FnMut() -> Instant + 'a {
    move || {
        let due = Instant::now() + limit;
        match stopped() {
            Some(at) => due.min(at + limit),
            None => due,
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
/// not an error (timeouts just poll `stopping`, and stop counting the
/// `reader` until a request comes).  False at EOF, on an error or when the
/// server stops.
fn await_request<R: Read>(rd: &mut BufReader<R>, sh: &Shared, id: u64, reader: &Transmitting) -> bool {
    loop {
        match rd.fill_buf() {
            Ok(b) => {
                reader.set(true);
                return !b.is_empty();
            }
            Err(e) if timed_out(&e) || e.kind() == io::ErrorKind::Interrupted => {
                if timed_out(&e) {
                    reader.set(false);
                }
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

/// Read a WRITE payload of `len` bytes into a kept buffer, or else into a
/// new one grown as bytes arrive (a client that stops part-way has not
/// made the server touch the rest).
fn read_payload<R: Read>(rd: &mut R, len: usize, kept: Option<Vec<u8>>) -> io::Result<Vec<u8>> {
    if let Some(mut v) = kept {
        rd.read_exact(&mut v)?;
        return Ok(v);
    }
    let mut v = Vec::with_capacity(len);
    rd.take(len as u64).read_to_end(&mut v)?;
    if v.len() < len {
        return Err(io::Error::new(io::ErrorKind::UnexpectedEof, format!("{} of {len} bytes before EOF", v.len())));
    }
    Ok(v)
}

/// A WRITE payload's reader: each read from the socket waits at most
/// `io_timeout` for a byte (the socket's read timeout), however long the
/// whole payload takes; once the server stops, none starts past
/// `io_timeout` after the stop (bytes already buffered read no clock).
struct Until<'a, R> {
    rd: &'a mut BufReader<R>,
    sh: &'a Shared,
}

impl<R: Read> Read for Until<'_, R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.rd.buffer().is_empty() && self.sh.stopped_at().is_some_and(|at| Instant::now() > at + self.sh.io_timeout) {
            return Err(io::ErrorKind::TimedOut.into());
        }
        self.rd.read(buf)
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

/// Serve one request (on a worker, or inline on the reader) and queue its
/// reply, sent at once if `send`; the reply gives back the `held` budget.
fn serve(sh: &Shared, r: &Request, payload: Vec<u8>, rep: &Replier, held: u64, send: bool) {
    let ex = &sh.export;
    let res: io::Result<Vec<u8>> = match r.cmd {
        Command::Cache => ex.cache(r.offset, r.length).map(|_| Vec::new()),
        Command::BlockStatus => {
            ex.extents(r.offset, r.length).map(|e| descriptors(&e, r.length, status_runs(r, sh.info.min_block as u64), rep.session.extended))
        }
        Command::Read => {
            let mut buf = sh.bufs.take_or_new(r.length as usize);
            ex.read(r.offset, &mut buf).map(|_| buf)
        }
        Command::Write => {
            let r = ex.write(r.offset, &payload).map(|_| Vec::new());
            sh.bufs.give(payload);
            r
        }
        Command::Trim => ex.trim(r.offset, r.length).map(|_| Vec::new()),
        Command::WriteZeroes if r.flags & CMD_FLAG_NO_HOLE == 0 => ex.zero_as_hole(r.offset, r.length).map(|_| Vec::new()),
        Command::WriteZeroes => ex.write_zeroes(r.offset, r.length).map(|_| Vec::new()),
        Command::Flush => ex.flush().map(|_| Vec::new()),
        Command::Disc | Command::Unknown(_) => Ok(Vec::new()),
    };
    // FUA: the data must be durable before the reply.
    let res = match res {
        Ok(v) if r.fua() && matches!(r.cmd, Command::Write | Command::Trim | Command::WriteZeroes) => ex.flush().map(|_| v),
        other => other,
    };
    match res {
        Ok(data) => rep.push(r, Ok(data), held, send),
        Err(e) => {
            sh.errors.fetch_add(1, Ordering::Relaxed);
            sh.log(&format!("{:?} at {} len {} failed: {e}", r.cmd, r.offset, r.length));
            rep.push(r, Err((errno_of(&e), e.to_string())), held, send);
        }
    }
}

/// [`serve`], where an export that panics costs that request (EIO), not the
/// thread or the connection.
fn serve_guarded(sh: &Shared, id: u64, req: &Request, payload: Vec<u8>, rep: &Replier, held: u64, send: bool) {
    let served = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| serve(sh, req, payload, rep, held, send)));
    if served.is_err() {
        sh.errors.fetch_add(1, Ordering::Relaxed);
        sh.log(&format!("conn {id}: export panicked serving {:?} at {}", req.cmd, req.offset));
        rep.push(req, Err((EIO, "the export panicked".into())), held, send);
    }
}

/// Whether `buf` (what the reader has buffered) holds a whole next request,
/// header and payload, so reading it cannot block.
fn next_buffered(buf: &[u8], extended: bool) -> bool {
    let n = header_len(extended);
    match parse_request_as(&buf[..buf.len().min(n)], extended) {
        Ok(r) => (buf.len() - n) as u64 >= r.payload_len(extended),
        Err(_) => false,
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
    let mut until = Until { rd, sh };
    read_payload(&mut until, req.length as usize, sh.bufs.take(req.length as usize)).map_err(|e| {
        let e = if timed_out(&e) { format!("nothing of it for {:?}", sh.io_timeout) } else { e.to_string() };
        sh.log(&format!("conn {id}: short WRITE payload ({e}); closing"));
        sh.buffers.release(bytes);
    })
}

/// Run transmission on an already-negotiated connection until DISC, EOF,
/// a framing error or shutdown; returns after every reply is sent.
/// `size` is the export size this client was told in its handshake: the
/// export may have grown since, but this connection keeps what it agreed.
pub(crate) fn transmission(sh: &Arc<Shared>, id: u64, stream: Stream, mut rd: BufReader<Stream>, session: Session, size: u64) {
    let out = match stream.try_clone() {
        Ok(s) => s,
        Err(e) => {
            sh.log(&format!("conn {id}: cannot clone socket: {e}"));
            return;
        }
    };
    // Every read may stall at most this long; replies have deadlines of
    // their own (see the module doc).
    let _ = stream.set_read_timeout(Some(sh.io_timeout.max(Duration::from_millis(1))));
    let budget = Arc::new(Budget::new(sh.max_inflight, sh.max_inflight_bytes));
    let rep = Arc::new(Replier::new(sh, id, out, budget.clone(), session));
    let extended = session.extended;
    let limits = Limits {
        size,
        min_block: sh.info.min_block as u64,
        max_payload: MAX_PAYLOAD,
        read_only: sh.read_only,
        unaligned_ok: sh.export.unaligned_ok(),
        structured: session.structured,
        extended,
        block_status: session.base_allocation,
        fast_zero: sh.export.fast_zero(),
        fast_zero_hole: sh.export.fast_zero_as_hole(),
    };
    let reader = Transmitting::new(sh);
    let mut buf = [0u8; EXTENDED_REQUEST_LEN];
    let hdr = &mut buf[..header_len(extended)];
    // Rejected requests logged one by one up to LOGGED_REJECTS, then only
    // counted (a client sending bad requests in a loop cannot flood the
    // log); the count goes out when the connection ends.
    let mut rejects = 0u64;
    loop {
        if !await_request(&mut rd, sh, id, &reader) {
            break;
        }
        if let Err(e) = rd.read_exact(hdr) {
            if e.kind() != io::ErrorKind::UnexpectedEof && !sh.stopping() {
                sh.log(&format!("conn {id}: read error in a request header: {e}; closing"));
            }
            break;
        }
        let req = match parse_request_as(hdr, extended) {
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
            rejects += 1;
            if rejects <= LOGGED_REJECTS {
                sh.log(&format!(
                    "conn {id}: rejected {:?} offset {} length {} flags {:#x}: error {err}{}",
                    req.cmd,
                    req.offset,
                    req.length,
                    req.flags,
                    if rejects == LOGGED_REJECTS { " (further rejections are counted, not logged)" } else { "" }
                ));
            }
            // A payload past what a compact header can announce is not
            // read through (an extended one's may claim 2^64 bytes).
            let skip = req.payload_len(extended);
            if skip > u32::MAX as u64 {
                sh.log(&format!("conn {id}: a payload of {skip} bytes announced; closing this connection"));
                break;
            }
            if drain(&mut rd, skip).is_err() {
                break;
            }
            // Its reply holds a slot until sent: a client sending bad
            // requests faster than it reads replies waits here.
            if !budget.acquire(0, &|| sh.stopping()) {
                break;
            }
            rep.reply(&req, Err((err, rejected(&req, err))), HOLDS_SLOT);
            continue;
        }
        let bytes = match req.cmd {
            Command::Read | Command::Write => req.length,
            Command::BlockStatus => (if extended { EXT_DESCRIPTOR } else { DESCRIPTOR } * status_runs(&req, limits.min_block)) as u64,
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
        if inline(sh, req.length) {
            // Replies wait while the next request is already buffered: a
            // burst's replies go out in one send, and nothing is held back
            // while the reader blocks.
            let more = next_buffered(rd.buffer(), extended);
            serve_guarded(sh, id, &req, payload, &rep, bytes, !more);
            continue;
        }
        let (sh2, rep2) = (sh.clone(), rep.clone());
        sh.submit(move || serve_guarded(&sh2, id, &req, payload, &rep2, bytes, true));
    }
    rep.flush();
    budget.wait_idle();
    sh.max_queued.fetch_max(rep.peak(), Ordering::Relaxed);
    let _ = rd.get_ref().shutdown(Shutdown::Both);
    if rejects > LOGGED_REJECTS {
        sh.log(&format!("conn {id}: {} more requests rejected (not logged one by one)", rejects - LOGGED_REJECTS));
    }
}

/// Rejected requests of one connection logged one line each.
const LOGGED_REJECTS: u64 = 16;

#[cfg(test)]
mod tests {
    use super::*;

    fn decode(b: &[u8]) -> Vec<(u32, u32)> {
        b.chunks(8).map(|d| (u32::from_be_bytes(d[..4].try_into().unwrap()), u32::from_be_bytes(d[4..].try_into().unwrap()))).collect()
    }

    #[test]
    fn descriptors_merge_runs_cut_at_the_request_and_never_come_back_empty() {
        let e = [Extent::hole(4096), Extent::hole(4096), Extent::data(0), Extent::data(8192), Extent::zero(1 << 20)];
        assert_eq!(decode(&descriptors(&e, 1 << 20, MAX_EXTENTS, false)), [(8192, STATE_HOLE | STATE_ZERO), (8192, 0), ((1 << 20) - 16384, STATE_ZERO)]);
        assert_eq!(decode(&descriptors(&e, 12288, MAX_EXTENTS, false)), [(8192, STATE_HOLE | STATE_ZERO), (4096, 0)]);
        assert_eq!(decode(&descriptors(&e, 1 << 20, 1, false)), [(8192, STATE_HOLE | STATE_ZERO)]);
        assert_eq!(decode(&descriptors(&[], 4096, MAX_EXTENTS, false)), [(4096, 0)], "nothing reported: allocated");
        // Fewer extents than asked is allowed: the client asks again.
        assert_eq!(decode(&descriptors(&e[..2], 1 << 20, MAX_EXTENTS, false)), [(8192, STATE_HOLE | STATE_ZERO)]);
        // At most MAX_EXTENTS descriptors, however finely the export splits.
        let alternating: Vec<Extent> = (0..MAX_EXTENTS + 10).map(|i| if i % 2 == 0 { Extent::hole(512) } else { Extent::data(512) }).collect();
        let d = decode(&descriptors(&alternating, u32::MAX as u64, MAX_EXTENTS, false));
        assert_eq!(d.len(), MAX_EXTENTS);
        assert!(d.iter().all(|&(n, _)| n == 512));
        // A reply never holds more than its request reserved.
        assert_eq!(decode(&descriptors(&alternating, u32::MAX as u64, 3, false)).len(), 3);
    }

    /// With extended headers a descriptor is two 64-bit fields, and a run
    /// may be longer than 4 GiB.
    #[test]
    fn wide_descriptors_carry_runs_past_four_gib() {
        let e = [Extent::data(4096), Extent::zero(6 << 30), Extent::zero(1 << 30)];
        let b = descriptors(&e, 5 << 30, MAX_EXTENTS, true);
        let d: Vec<(u64, u64)> = b.chunks(16).map(|d| (u64::from_be_bytes(d[..8].try_into().unwrap()), u64::from_be_bytes(d[8..].try_into().unwrap()))).collect();
        assert_eq!(d, [(4096, 0), ((5 << 30) - 4096, STATE_ZERO as u64)]);
    }

    /// What a BLOCK_STATUS reply reserves: one descriptor with REQ_ONE,
    /// else one a minimum block and two partial ones, at most MAX_EXTENTS.
    #[test]
    fn a_status_reply_reserves_its_most_descriptors() {
        let r = |flags, length: u32| Request { flags, cmd: Command::BlockStatus, cookie: 1, offset: 0, length: length as u64 };
        assert_eq!(status_runs(&r(CMD_FLAG_REQ_ONE, u32::MAX), 4096), 1);
        assert_eq!(status_runs(&r(0, 4096), 4096), 3);
        assert_eq!(status_runs(&r(0, 1 << 20), 4096), 258);
        assert_eq!(status_runs(&r(0, u32::MAX), 4096), MAX_EXTENTS);
        assert_eq!(status_runs(&r(0, 1 << 20), 1), MAX_EXTENTS);
    }

    #[test]
    fn each_refusal_gets_a_deadline_from_now_and_none_outlives_the_stop() {
        let limit = Duration::from_secs(10);
        let mut d = reply_deadlines(limit, || None);
        let first = d();
        std::thread::sleep(Duration::from_millis(2));
        assert!(d() > first, "progress: a later refusal gets its own deadline");
        // Stopped: no deadline past `limit` after the stop.
        let at = Instant::now();
        std::thread::sleep(Duration::from_millis(2));
        let mut d = reply_deadlines(limit, || Some(at));
        assert_eq!(d(), at + limit);
        assert_eq!(d(), at + limit);
    }

    #[test]
    fn frames_of_both_kinds() {
        let req = Request { flags: 0, cmd: Command::Read, cookie: 0x0102, offset: 8192, length: 4 };
        let (h, n, data) = frame(&Session::default(), &req, Ok(vec![1, 2, 3, 4]));
        assert_eq!((n, &h[..4], &h[8..16], data.as_slice()), (SIMPLE_REPLY_LEN, &SIMPLE_REPLY_MAGIC.to_be_bytes()[..], &0x0102u64.to_be_bytes()[..], &[1u8, 2, 3, 4][..]));
        let (_, _, data) = frame(&Session::default(), &req, Err((EIO, "why".into())));
        assert!(data.is_empty(), "a simple error reply has no payload");
        let s = Session { structured: true, ..Session::default() };
        let (h, n, data) = frame(&s, &req, Ok(vec![9; 4]));
        assert_eq!(n, 28);
        assert_eq!(&h[..4], &STRUCTURED_REPLY_MAGIC.to_be_bytes());
        assert_eq!(u16::from_be_bytes([h[4], h[5]]), REPLY_FLAG_DONE);
        assert_eq!(u16::from_be_bytes([h[6], h[7]]), REPLY_TYPE_OFFSET_DATA);
        assert_eq!(u32::from_be_bytes(h[16..20].try_into().unwrap()), 12, "offset and data");
        assert_eq!(u64::from_be_bytes(h[20..28].try_into().unwrap()), 8192);
        assert_eq!(data, [9; 4]);
        // An error message is cut to the spec's limit on a character boundary.
        let (h, n, data) = frame(&s, &req, Err((EIO, "é".repeat(3000))));
        assert_eq!((n, u16::from_be_bytes([h[6], h[7]])), (26, REPLY_TYPE_ERROR));
        assert_eq!(data.len(), 4096);
        assert_eq!(u16::from_be_bytes([h[24], h[25]]) as usize, data.len());
        assert_eq!(u32::from_be_bytes(h[16..20].try_into().unwrap()) as usize, 6 + data.len());
        let write = Request { cmd: Command::Write, ..req };
        assert_eq!(frame(&s, &write, Ok(Vec::new())).1, SIMPLE_REPLY_LEN, "a payload-less success stays simple");
    }

    /// Extended headers: every reply is an extended chunk (32-byte header
    /// with the request's offset and a 64-bit length), a payload-less
    /// success a NONE chunk, BLOCK_STATUS a BLOCK_STATUS_EXT chunk with a
    /// descriptor count.
    #[test]
    fn extended_frames() {
        let x = Session { structured: true, extended: true, base_allocation: true };
        let be16 = |h: &[u8], at: usize| u16::from_be_bytes([h[at], h[at + 1]]);
        let be64 = |h: &[u8], at: usize| u64::from_be_bytes(h[at..at + 8].try_into().unwrap());
        let read = Request { flags: 0, cmd: Command::Read, cookie: 0x0102, offset: 1 << 33, length: 4 };
        let (h, n, data) = frame(&x, &read, Ok(vec![7; 4]));
        assert_eq!((n, &h[..4]), (EXTENDED_REPLY_LEN + 8, &EXTENDED_REPLY_MAGIC.to_be_bytes()[..]));
        assert_eq!((be16(&h, 4), be16(&h, 6), be64(&h, 8), be64(&h, 16), be64(&h, 24)), (REPLY_FLAG_DONE, REPLY_TYPE_OFFSET_DATA, 0x0102, 1 << 33, 12));
        assert_eq!((be64(&h, 32), data), (1 << 33, vec![7; 4]));
        let zeroes = Request { cmd: Command::WriteZeroes, length: 6 << 30, ..read };
        let (h, n, data) = frame(&x, &zeroes, Ok(Vec::new()));
        assert_eq!((n, be16(&h, 6), be64(&h, 24), data.len()), (EXTENDED_REPLY_LEN, REPLY_TYPE_NONE, 0, 0), "a NONE chunk, not a simple reply");
        let (h, n, data) = frame(&x, &zeroes, Err((ENOSPC, "full".into())));
        assert_eq!((n, be16(&h, 6), be64(&h, 24)), (EXTENDED_REPLY_LEN + 6, REPLY_TYPE_ERROR, 6 + 4));
        assert_eq!((u32::from_be_bytes(h[32..36].try_into().unwrap()), be16(&h, 36), &data[..]), (ENOSPC, 4, &b"full"[..]));
        let status = Request { cmd: Command::BlockStatus, ..zeroes };
        let d = descriptors(&[Extent::zero(6 << 30)], 6 << 30, 3, true);
        let (h, n, data) = frame(&x, &status, Ok(d.clone()));
        assert_eq!((n, be16(&h, 6), be64(&h, 24)), (EXTENDED_REPLY_LEN + 8, REPLY_TYPE_BLOCK_STATUS_EXT, 8 + 16));
        assert_eq!((u32::from_be_bytes(h[32..36].try_into().unwrap()), u32::from_be_bytes(h[36..40].try_into().unwrap())), (META_BASE_ALLOCATION_ID, 1));
        assert_eq!(data, d);
    }
}
