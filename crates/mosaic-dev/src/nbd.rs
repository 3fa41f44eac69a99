//! Remote members: an export of an NBD server (nbdkit, qemu-nbd, another
//! `mosaic serve`) named by an NBD URI, reached through libnbd, the
//! maintained NBD client library (its URI grammar, TLS, structured replies
//! and block-size negotiation come with it).
//!
//! ```text
//!   nbd://host[:port]/export     TCP
//!   nbds://host[:port]/export    TCP with TLS
//!   nbd+unix:///export?socket=PATH
//!   nbds://h/e?tls-certificates=DIR   TLS with DIR's ca-cert.pem (and
//!                                client-cert.pem, client-key.pem for a
//!                                server that checks clients), as libnbd
//!                                reads it; or tls-psk-file=FILE
//!
//!   connect ──> size, flags, block sizes ──> more connections when the
//!   server advertises multi-conn (a flush on any one then covers the
//!   writes of all, by the NBD spec), else one
//!   read/write ──> split at the server's largest request ──> a free
//!   connection (concurrent requests use different connections)
//!   flush ──> NBD_CMD_FLUSH on one connection (when the server can flush)
//!
//!   a request not answered, or a connection gone ──> reconnect with
//!   backoff (50 ms doubling to 2 s) and send it again, until the
//!   remote's time (`set_timeout`, 30 s by default) is spent; then the
//!   error goes up and the array fails the member like a local one
//!   a flush after a reconnect ──> an error: writes the old connection
//!   took may be lost with it, so the member must be failed and rebuilt
//!   a reconnect ──> the export's label read first: not this member's
//!   (another array's disk, a blank one, an old copy of this one behind
//!   the same URI) ──> the member refuses every request from then on,
//!   so the array fails it and nothing is read from or written to that
//!   export ([`Seen`])
//! ```
//!
//! libnbd is found at build time (`build.rs`); without it, opening a
//! remote member is an error that says how to get it.
// Without libnbd only the error path is compiled in.
#![cfg_attr(not(mosaic_libnbd), allow(dead_code))]

use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;
#[cfg(mosaic_libnbd)]
use std::time::Instant;

use crate::Member;

/// The remote's time of members connected from now on (ms);
/// [`set_default_timeout`].
static DEFAULT_TIMEOUT_MS: AtomicU64 = AtomicU64::new(30_000);

fn millis(t: Duration) -> u64 {
    t.as_millis().clamp(1, u64::MAX as u128) as u64
}

/// How long a request to a remote member may take, reconnects and retries
/// included, before the error goes up and the member is failed: for the
/// members connected from now on (`mosaic --remote-timeout`).
pub fn set_default_timeout(t: Duration) {
    DEFAULT_TIMEOUT_MS.store(millis(t), Ordering::Relaxed);
}

/// A request slower than this (ms) counts as slow ([`set_slow_threshold`]).
static SLOW_MS: AtomicU64 = AtomicU64::new(200);

/// The latency above which a remote's request counts as slow, and a
/// remote whose recent requests average above it is reported slow
/// (`mosaic --remote-slow-ms`).
pub fn set_slow_threshold(t: Duration) {
    SLOW_MS.store(millis(t), Ordering::Relaxed);
}

/// How a remote member's requests have been answering: what `status`
/// shows, and whether it calls the remote slow.
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize)]
pub struct Latency {
    /// Requests answered (reads, writes and flushes; a split request
    /// counts once).
    pub requests: u64,
    /// The mean of recent reads, of recent writes and of recent flushes
    /// (each an exponentially weighted average over about the last 16),
    /// ms.  Apart: a fast flush must not halve slow writes' mean.
    pub recent_read_ms: f64,
    pub recent_write_ms: f64,
    pub recent_flush_ms: f64,
    /// The slowest request since connecting, ms.
    pub max_ms: f64,
    /// Requests slower than the threshold.
    pub slow_requests: u64,
    /// The threshold, ms.
    pub threshold_ms: f64,
    /// Whether recent reads, writes or flushes average above the threshold.
    pub slow: bool,
}

/// What a request of a remote was, for its latency ([`LatencyMeter`]).
#[derive(Debug, Clone, Copy)]
enum Op {
    Read,
    Write,
    Flush,
}

/// Latency counters of one remote, updated by every request.
#[derive(Default)]
struct LatencyMeter {
    requests: AtomicU64,
    /// Weighted means, microseconds (weight 1/16 for each new request):
    /// reads, writes, flushes ([`Op`]).
    recent_us: [AtomicU64; 3],
    max_us: AtomicU64,
    slow: AtomicU64,
}

impl LatencyMeter {
    fn record(&self, op: Op, took: Duration) {
        let us = took.as_micros().min(u64::MAX as u128) as u64;
        self.requests.fetch_add(1, Ordering::Relaxed);
        // Racing updates may lose one sample; the mean stays a mean.
        let mean = &self.recent_us[op as usize];
        let old = mean.load(Ordering::Relaxed);
        mean.store(if old == 0 { us } else { old - old / 16 + us / 16 }, Ordering::Relaxed);
        self.max_us.fetch_max(us, Ordering::Relaxed);
        if us > SLOW_MS.load(Ordering::Relaxed) * 1000 {
            self.slow.fetch_add(1, Ordering::Relaxed);
        }
    }

    fn read(&self) -> Latency {
        let ms = |a: &AtomicU64| a.load(Ordering::Relaxed) as f64 / 1000.0;
        let threshold_ms = SLOW_MS.load(Ordering::Relaxed) as f64;
        let (r, w, f) = (ms(&self.recent_us[0]), ms(&self.recent_us[1]), ms(&self.recent_us[2]));
        Latency {
            requests: self.requests.load(Ordering::Relaxed),
            recent_read_ms: r,
            recent_write_ms: w,
            recent_flush_ms: f,
            max_ms: ms(&self.max_us),
            slow_requests: self.slow.load(Ordering::Relaxed),
            threshold_ms,
            slow: r.max(w).max(f) > threshold_ms,
        }
    }
}

/// Connections to one export, at most: when the server allows several.
const MAX_CONNS: usize = 4;
/// The largest request sent, whatever the server allows (libnbd's own
/// limit is 64 MiB).
const MAX_REQUEST: u64 = 32 << 20;

/// Whether `s` names a remote member (an NBD URI) rather than a path.
pub fn is_uri(s: &str) -> bool {
    ["nbd://", "nbds://", "nbd+unix://", "nbds+unix://"].iter().any(|p| s.starts_with(p))
}

/// A device name that means the same from any directory: a relative path
/// made absolute (symlinks kept: a /dev/disk/by-id name outlives
/// /dev/sdX), an NBD URI as it is.
pub fn absolute(path: &Path) -> PathBuf {
    match path.to_str() {
        Some(s) if is_uri(s) => path.to_path_buf(),
        _ => std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf()),
    }
}

/// The canonical form of a path that may not exist yet (its parent's,
/// with its name): one file however it is spelled.
pub fn canonical(p: &Path) -> PathBuf {
    if let Ok(c) = p.canonicalize() {
        return c;
    }
    match (p.parent(), p.file_name()) {
        (Some(dir), Some(name)) if !dir.as_os_str().is_empty() => canonical(dir).join(name),
        _ => std::env::current_dir().map(|d| d.join(p)).unwrap_or_else(|_| p.to_path_buf()),
    }
}

/// The label a member's export carried at connect, or was last written
/// with through it: what a reconnect must find there again (the same
/// array and member identity, no older than one update behind: a label
/// write the lost connection took may be lost with it).
#[derive(Debug, Clone, Copy, PartialEq)]
struct Seen {
    array: uuid::Uuid,
    member: uuid::Uuid,
    events: u64,
}

impl Seen {
    fn of(l: &mosaic_format::label::Label) -> Seen {
        Seen { array: l.array_uuid, member: l.member_uuid, events: l.events }
    }

    /// Why the label `found` on a reconnected export is not this member's.
    fn differs(&self, found: Result<Seen, String>) -> Option<String> {
        match found {
            Err(why) => Some(format!("it carries no label of this member ({why})")),
            Ok(f) if f.array != self.array || f.member != self.member => {
                Some(format!("it carries the label of member {} of array {}, not of member {} of array {}", f.member, f.array, self.member, self.array))
            }
            Ok(f) if f.events + 1 < self.events => Some(format!("its label is at event {}, this member's at {}: an older copy of it", f.events, self.events)),
            Ok(_) => None,
        }
    }
}

/// FNV-1a, 64 bits: a stable name for a URI's lock file (the same in
/// every mosaic binary, unlike the standard library's hasher).
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| (h ^ b as u64).wrapping_mul(0x0000_0100_0000_01b3))
}

/// An NBD export as a member device.
pub struct NbdMember {
    uri: String,
    size: u64,
    /// Each connection; None after it died, until the next request
    /// reconnects.
    #[cfg(mosaic_libnbd)]
    conns: Vec<parking_lot::Mutex<Option<ffi::Handle>>>,
    /// A connection was lost since the last flush: writes it took may be
    /// lost with it.
    reconnected: AtomicBool,
    /// The remote's time, ms ([`NbdMember::set_timeout`]).
    timeout_ms: AtomicU64,
    #[cfg(mosaic_libnbd)]
    next: std::sync::atomic::AtomicUsize,
    can_flush: bool,
    /// The server honours FUA (force unit access) on a write.
    can_fua: bool,
    read_only: bool,
    max_request: u64,
    latency: LatencyMeter,
    /// The member's label as last seen ([`Seen`]); None for an export
    /// without one (a new drive before its first label).
    seen: parking_lot::Mutex<Option<Seen>>,
    /// Set when a reconnect found another export behind the URI: why.
    /// Every request fails from then on.
    foreign: parking_lot::Mutex<Option<String>>,
    /// The lock this process holds on the export ([`NbdMember::lock`]).
    lock: parking_lot::Mutex<Option<std::fs::File>>,
}

impl std::fmt::Debug for NbdMember {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NbdMember").field("uri", &self.uri).field("size", &self.size).finish()
    }
}

impl NbdMember {
    /// Connect to the export `uri` names, with the default remote time.
    pub fn connect(uri: &str) -> io::Result<NbdMember> {
        Self::connect_within(uri, Duration::from_millis(DEFAULT_TIMEOUT_MS.load(Ordering::Relaxed)))
    }

    /// Connect, giving each connection and then each request `timeout`.
    #[cfg(mosaic_libnbd)]
    pub fn connect_within(uri: &str, timeout: Duration) -> io::Result<NbdMember> {
        let deadline = || Instant::now() + timeout;
        let first = ffi::Handle::connect(uri, deadline())?;
        let size = first.size()?;
        let (can_flush, read_only, multi) = (first.flag(|a| a.nbd_can_flush)?, first.flag(|a| a.nbd_is_read_only)?, first.flag(|a| a.nbd_can_multi_conn)?);
        let can_fua = first.flag(|a| a.nbd_can_fua)?;
        let max_request = first.max_block().filter(|&m| m > 0).map_or(MAX_REQUEST, |m| m.min(MAX_REQUEST));
        let seen = Self::label_on(&first, size, deadline())?.ok();
        let mut conns = vec![parking_lot::Mutex::new(Some(first))];
        // More connections only where the server keeps them consistent;
        // one that fails to connect is simply not used.
        while multi && conns.len() < MAX_CONNS {
            match ffi::Handle::connect(uri, deadline()) {
                Ok(h) => conns.push(parking_lot::Mutex::new(Some(h))),
                Err(_) => break,
            }
        }
        Ok(NbdMember {
            uri: uri.to_string(),
            size,
            conns,
            reconnected: AtomicBool::new(false),
            timeout_ms: AtomicU64::new(millis(timeout)),
            next: Default::default(),
            can_flush,
            can_fua,
            read_only,
            max_request,
            latency: LatencyMeter::default(),
            seen: parking_lot::Mutex::new(seen),
            foreign: parking_lot::Mutex::new(None),
            lock: parking_lot::Mutex::new(None),
        })
    }

    /// The label on the export `h` is connected to, or why it has none;
    /// an error when the export could not be read (no answer, a dead
    /// connection): that says nothing of whose export it is.
    #[cfg(mosaic_libnbd)]
    fn label_on(h: &ffi::Handle, size: u64, deadline: Instant) -> io::Result<Result<Seen, String>> {
        Ok(mosaic_format::label::read_label(size, &mut |buf, off| h.pread(buf, off, deadline))?.map(|l| Seen::of(&l)).map_err(|e| e.to_string()))
    }

    /// A new connection's export is this member's: the same size, and the
    /// label last seen (when there was one).  Otherwise the member is
    /// foreign from now on.  An export that cannot be read is an error of
    /// the connection (tried again), not a verdict.
    #[cfg(mosaic_libnbd)]
    fn check_reconnected(&self, h: &ffi::Handle, deadline: Instant) -> io::Result<()> {
        let size = h.size()?;
        let seen = *self.seen.lock();
        let why = if size != self.size {
            Some(format!("its size is {size} bytes, this member's {}", self.size))
        } else {
            match seen {
                Some(s) => s.differs(Self::label_on(h, size, deadline)?),
                None => None,
            }
        };
        match why {
            None => Ok(()),
            Some(why) => {
                self.foreign.lock().get_or_insert(why);
                self.refuse_if_foreign()
            }
        }
    }

    /// An error for every request once a reconnect found another export.
    fn refuse_if_foreign(&self) -> io::Result<()> {
        match self.foreign.lock().as_ref() {
            None => Ok(()),
            Some(why) => Err(io::Error::other(format!("{}: reconnected to an export that is not this member: {why}; it is neither read nor written again", self.uri))),
        }
    }

    /// After a write through this member: when it wrote a label slot with
    /// a label, that is the label a reconnect must find.
    fn note_label(&self, buf: &[u8], offset: u64) {
        use mosaic_format::label::{Label, LABEL_AREA, SLOT_SIZE};
        if offset < LABEL_AREA && offset % SLOT_SIZE == 0 {
            if let Ok(l) = Label::decode(buf) {
                let mut seen = self.seen.lock();
                if seen.is_none_or(|s| s.array != l.array_uuid || s.member != l.member_uuid || s.events < l.events) {
                    *seen = Some(Seen::of(&l));
                }
            }
        }
    }

    #[cfg(not(mosaic_libnbd))]
    pub fn connect_within(uri: &str, _timeout: Duration) -> io::Result<NbdMember> {
        Err(io::Error::new(io::ErrorKind::Unsupported, format!("{uri}: this mosaic was built without libnbd, so it cannot reach remote members; install libnbd-dev and rebuild")))
    }

    /// The lock every kind of array takes on every device it opens
    /// ([`crate::lock_file`]), for an export: NBD has no locks, so it is
    /// a lock file in this user's runtime directory named by the URI.  Two
    /// mosaic processes on this machine then never write one export at
    /// once (one writer per array); a process on another machine is not
    /// seen, and the same export under another URI (another host name for
    /// the server) is another lock.
    pub fn lock(&self, exclusive: bool) -> io::Result<()> {
        let dir = crate::runtime_dir().join("remote-locks");
        std::fs::create_dir_all(&dir).map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", dir.display())))?;
        let path = dir.join(format!("{:016x}.lock", fnv1a(self.uri.as_bytes())));
        let file = std::fs::OpenOptions::new().create(true).truncate(false).write(true).open(&path).map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", path.display())))?;
        crate::lock_file(&file, Path::new(&self.uri), exclusive)?;
        // The URI inside, for whoever looks at the directory.
        use std::os::unix::fs::FileExt;
        let _ = file.write_all_at(self.uri.as_bytes(), 0);
        *self.lock.lock() = Some(file);
        Ok(())
    }

    /// Whether the server exports it read-only.
    pub fn read_only(&self) -> bool {
        self.read_only
    }

    /// How long a request may take, reconnects and retries included.
    pub fn set_timeout(&self, t: Duration) {
        self.timeout_ms.store(millis(t), Ordering::Relaxed);
    }

    fn timeout(&self) -> Duration {
        Duration::from_millis(self.timeout_ms.load(Ordering::Relaxed))
    }

    /// How its requests have been answering.
    pub fn latency(&self) -> Latency {
        self.latency.read()
    }

    /// Time `f`, one read (or write or flush), into the latency counters.
    fn timed<T>(&self, op: Op, f: impl FnOnce() -> io::Result<T>) -> io::Result<T> {
        let t0 = std::time::Instant::now();
        let r = f();
        self.latency.record(op, t0.elapsed());
        r
    }

    /// Connections open to the export.
    pub fn connections(&self) -> usize {
        #[cfg(mosaic_libnbd)]
        return self.conns.len();
        #[cfg(not(mosaic_libnbd))]
        0
    }

    /// Run `f` on each piece of `[offset, offset + len)` no larger than the
    /// server takes, each on a free connection.
    #[cfg(mosaic_libnbd)]
    fn pieces(&self, offset: u64, len: usize, mut f: impl FnMut(&ffi::Handle, u64, std::ops::Range<usize>, Instant) -> io::Result<()>) -> io::Result<()> {
        crate::range_check(&self.uri, self.size, offset, len)?;
        let mut done = 0usize;
        while done < len {
            let n = (len - done).min(self.max_request as usize);
            self.with_retry(|h, deadline| f(h, offset + done as u64, done..done + n, deadline))?;
            done += n;
        }
        Ok(())
    }

    /// Run `op` on a free connection (reconnecting a dead one); when the
    /// connection dies or the remote does not answer, reconnect with
    /// backoff and run it again, until the remote's time is spent.
    #[cfg(mosaic_libnbd)]
    fn with_retry(&self, mut op: impl FnMut(&ffi::Handle, Instant) -> io::Result<()>) -> io::Result<()> {
        self.refuse_if_foreign()?;
        let deadline = Instant::now() + self.timeout();
        let mut backoff = Duration::from_millis(50);
        loop {
            let mut slot = self.free();
            let r = match slot.as_ref() {
                Some(h) => op(h, deadline),
                // Nothing goes to a new connection before its export is
                // known to be this member (one not read is dropped and
                // tried again, as a dead one).
                None => match ffi::Handle::connect(&self.uri, deadline).and_then(|h| self.check_reconnected(&h, deadline).map(|()| h)) {
                    Ok(h) => op(slot.insert(h), deadline),
                    Err(e) => {
                        self.refuse_if_foreign()?;
                        Err(e)
                    }
                },
            };
            let err = match r {
                Ok(()) => return Ok(()),
                Err(e) => e,
            };
            // A command the server answered with an error is final; a dead
            // connection or no answer is dropped (closing it abandons the
            // request in flight) and retried.
            if slot.as_ref().is_some_and(|h| h.alive()) && err.kind() != io::ErrorKind::TimedOut {
                return Err(io::Error::new(err.kind(), format!("{}: {err}", self.uri)));
            }
            if slot.take().is_some() {
                self.reconnected.store(true, Ordering::Relaxed);
            }
            drop(slot);
            let now = Instant::now();
            if now >= deadline {
                return Err(io::Error::new(io::ErrorKind::TimedOut, format!("{}: no answer for {:.1} s ({err})", self.uri, self.timeout().as_secs_f64())));
            }
            std::thread::sleep(backoff.min(deadline - now));
            backoff = (backoff * 2).min(Duration::from_secs(2));
        }
    }

    /// Write `buf` at `offset` in pieces, with FUA on each when `fua`.
    #[cfg(mosaic_libnbd)]
    fn write_pieces(&self, buf: &[u8], offset: u64, fua: bool) -> io::Result<()> {
        if self.read_only {
            return Err(io::Error::new(io::ErrorKind::PermissionDenied, format!("{}: the server exports it read-only", self.uri)));
        }
        self.timed(Op::Write, || self.pieces(offset, buf.len(), |h, off, r, deadline| h.pwrite(&buf[r], off, fua, deadline)))?;
        self.note_label(buf, offset);
        Ok(())
    }

    /// After a durability point: an error when a connection was lost since
    /// the last one (writes it took may be lost with it).
    #[cfg(mosaic_libnbd)]
    fn no_lost_writes(&self) -> io::Result<()> {
        if self.reconnected.swap(false, Ordering::Relaxed) {
            return Err(io::Error::new(io::ErrorKind::BrokenPipe, format!("{}: a connection was lost since the last flush, and writes it took may be lost with it", self.uri)));
        }
        Ok(())
    }

    /// A connection no other thread is using, or the next one in turn.
    #[cfg(mosaic_libnbd)]
    fn free(&self) -> parking_lot::MutexGuard<'_, Option<ffi::Handle>> {
        let start = self.next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let n = self.conns.len();
        (0..n).find_map(|i| self.conns[(start + i) % n].try_lock()).unwrap_or_else(|| self.conns[start % n].lock())
    }
}

#[cfg(mosaic_libnbd)]
impl Member for NbdMember {
    fn describe(&self) -> String {
        self.uri.clone()
    }
    fn size(&self) -> u64 {
        self.size
    }
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        self.timed(Op::Read, || self.pieces(offset, buf.len(), |h, off, r, deadline| h.pread(&mut buf[r], off, deadline)))
    }
    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        self.write_pieces(buf, offset, false)
    }
    /// With FUA where the server advertises it: the one write is durable
    /// when answered, with no flush of everything else.
    fn write_durable(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        if !self.can_fua {
            self.write_at(buf, offset)?;
            return self.flush();
        }
        self.write_pieces(buf, offset, true)?;
        self.no_lost_writes()
    }
    /// With multi-conn, a flush on one connection covers every
    /// connection's completed writes (NBD spec); a server that cannot
    /// flush writes through.
    fn flush(&self) -> io::Result<()> {
        if self.can_flush {
            self.timed(Op::Flush, || self.with_retry(|h, deadline| h.flush(deadline)))?;
        }
        self.no_lost_writes()
    }
    fn remote_latency(&self) -> Option<Latency> {
        Some(self.latency())
    }
}

#[cfg(not(mosaic_libnbd))]
impl Member for NbdMember {
    fn describe(&self) -> String {
        self.uri.clone()
    }
    fn size(&self) -> u64 {
        self.size
    }
    fn read_at(&self, _buf: &mut [u8], _offset: u64) -> io::Result<()> {
        Err(io::Error::from(io::ErrorKind::Unsupported))
    }
    fn write_at(&self, _buf: &[u8], _offset: u64) -> io::Result<()> {
        Err(io::Error::from(io::ErrorKind::Unsupported))
    }
    fn flush(&self) -> io::Result<()> {
        Err(io::Error::from(io::ErrorKind::Unsupported))
    }
}

/// The few libnbd calls used, declared here and resolved from the shared
/// library when the first remote member connects (see [`ffi::api`]).
#[cfg(mosaic_libnbd)]
mod ffi {
    use std::ffi::{c_char, c_int, c_void, CStr, CString};
    use std::io;
    use std::sync::OnceLock;
    use std::time::Instant;

    #[repr(C)]
    pub struct NbdHandle {
        _private: [u8; 0],
    }

    /// libnbd's `nbd_completion_callback`, passed empty
    /// (`LIBNBD_NULL_COMPLETION`): completion is polled instead.
    #[repr(C)]
    pub struct Completion {
        callback: Option<unsafe extern "C" fn(*mut c_void, *mut c_int) -> c_int>,
        user_data: *mut c_void,
        free: Option<unsafe extern "C" fn(*mut c_void)>,
    }

    const NO_COMPLETION: Completion = Completion { callback: None, user_data: std::ptr::null_mut(), free: None };

    /// `nbd_get_block_size`'s size type for the largest request.
    const LIBNBD_SIZE_MAXIMUM: c_int = 2;

    /// The library loaded, unless `MOSAIC_LIBNBD` names another file.
    const SONAME: &str = "libnbd.so.0";

    /// One of the `nbd_can_*` / `nbd_is_*` getters.
    pub type FlagFn = unsafe extern "C" fn(*mut NbdHandle) -> c_int;

    /// `Api`: a field per function, its pointer from the library.
    macro_rules! libnbd {
        ($($name:ident($($arg:ident: $ty:ty),*) -> $ret:ty;)*) => {
            pub struct Api {
                _lib: libloading::Library,
                $(pub $name: unsafe extern "C" fn($($ty),*) -> $ret,)*
            }

            impl Api {
                fn load(file: &std::ffi::OsStr) -> Result<Api, libloading::Error> {
                    // SAFETY: loading runs libnbd's initialisers (and its
                    // libraries'), which ask nothing of the caller.
                    let lib = unsafe { libloading::Library::new(file)? };
                    // SAFETY: each symbol is libnbd's function of that name,
                    // whose C signature (libnbd.h) is the one declared.
                    $(let $name = unsafe { *lib.get::<unsafe extern "C" fn($($ty),*) -> $ret>(concat!(stringify!($name), "\0").as_bytes())? };)*
                    Ok(Api { _lib: lib, $($name,)* })
                }
            }
        };
    }

    libnbd! {
        nbd_create() -> *mut NbdHandle;
        nbd_close(h: *mut NbdHandle) -> ();
        nbd_aio_connect_uri(h: *mut NbdHandle, uri: *const c_char) -> c_int;
        nbd_set_uri_allow_local_file(h: *mut NbdHandle, allow: bool) -> c_int;
        nbd_aio_is_dead(h: *mut NbdHandle) -> c_int;
        nbd_aio_is_closed(h: *mut NbdHandle) -> c_int;
        nbd_get_size(h: *mut NbdHandle) -> i64;
        nbd_get_block_size(h: *mut NbdHandle, size_type: c_int) -> i64;
        nbd_aio_pread(h: *mut NbdHandle, buf: *mut c_void, count: usize, offset: u64, cb: Completion, flags: u32) -> i64;
        nbd_aio_pwrite(h: *mut NbdHandle, buf: *const c_void, count: usize, offset: u64, cb: Completion, flags: u32) -> i64;
        nbd_aio_flush(h: *mut NbdHandle, cb: Completion, flags: u32) -> i64;
        nbd_aio_command_completed(h: *mut NbdHandle, cookie: u64) -> c_int;
        nbd_poll(h: *mut NbdHandle, timeout_ms: c_int) -> c_int;
        nbd_aio_is_ready(h: *mut NbdHandle) -> c_int;
        nbd_aio_is_processing(h: *mut NbdHandle) -> c_int;
        nbd_get_error() -> *const c_char;
        nbd_get_errno() -> c_int;
        nbd_can_flush(h: *mut NbdHandle) -> c_int;
        nbd_can_fua(h: *mut NbdHandle) -> c_int;
        nbd_can_multi_conn(h: *mut NbdHandle) -> c_int;
        nbd_is_read_only(h: *mut NbdHandle) -> c_int;
    }

    static API: OnceLock<Result<Api, String>> = OnceLock::new();

    /// libnbd, loaded at the first call: a process that opens no remote
    /// member never maps it, nor what it brings (GnuTLS, libxml2, ICU:
    /// a quarter of a socket-activated `mosaic serve`'s start, when the
    /// binary linked it).  `MOSAIC_LIBNBD` names another file to load.
    pub fn api() -> io::Result<&'static Api> {
        let api = API.get_or_init(|| {
            let file = std::env::var_os("MOSAIC_LIBNBD").filter(|f| !f.is_empty()).unwrap_or_else(|| SONAME.into());
            Api::load(&file).map_err(|e| format!("cannot load libnbd, the NBD client library remote members need ({e}); install it (Debian: libnbd0) or name it in MOSAIC_LIBNBD"))
        });
        api.as_ref().map_err(|e| io::Error::new(io::ErrorKind::Unsupported, e.clone()))
    }

    /// The calling thread's last libnbd error.
    fn last_error(api: &Api) -> io::Error {
        // SAFETY: libnbd keeps the error per thread; the string is valid
        // until the next libnbd call on this thread, and copied at once.
        let msg = unsafe {
            let p = (api.nbd_get_error)();
            if p.is_null() {
                "unknown libnbd error".to_string()
            } else {
                CStr::from_ptr(p).to_string_lossy().into_owned()
            }
        };
        // SAFETY: no arguments; reads the thread's saved errno.
        let errno = unsafe { (api.nbd_get_errno)() };
        let kind = if errno > 0 { io::Error::from_raw_os_error(errno).kind() } else { io::ErrorKind::Other };
        io::Error::new(kind, msg)
    }

    fn check(api: &Api, r: c_int) -> io::Result<()> {
        if r == -1 {
            Err(last_error(api))
        } else {
            Ok(())
        }
    }

    /// One connected libnbd handle.
    pub struct Handle(*mut NbdHandle, &'static Api);

    // SAFETY: libnbd handles are thread-safe (every call takes the
    // handle's own lock); the pointer is owned here and closed once.
    unsafe impl Send for Handle {}
    unsafe impl Sync for Handle {}

    impl Drop for Handle {
        fn drop(&mut self) {
            // SAFETY: created by nbd_create, closed only here.
            unsafe { (self.1.nbd_close)(self.0) }
        }
    }

    impl Handle {
        /// Connect and finish the handshake by `deadline` (a server that
        /// accepts and never answers, e.g. one at its client limit, times
        /// out).
        pub fn connect(uri: &str, deadline: Instant) -> io::Result<Handle> {
            let c = CString::new(uri).map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, format!("{uri:?}: a NUL byte in the URI")))?;
            let named = |e: io::Error| io::Error::new(e.kind(), format!("{uri}: {e}"));
            let api = api().map_err(named)?;
            // SAFETY: nbd_create has no preconditions; NULL means failure.
            let h = unsafe { (api.nbd_create)() };
            if h.is_null() {
                return Err(named(last_error(api)));
            }
            let h = Handle(h, api);
            // The URI is the administrator's (a member's path), so it may
            // name local files: `tls-certificates=DIR` and `tls-psk-file`,
            // as nbdinfo and nbdcopy allow.
            // SAFETY: a fresh handle, not yet connecting.
            check(api, unsafe { (api.nbd_set_uri_allow_local_file)(h.0, true) }).map_err(named)?;
            // SAFETY: a fresh handle and a NUL-terminated string.
            check(api, unsafe { (api.nbd_aio_connect_uri)(h.0, c.as_ptr()) }).map_err(named)?;
            loop {
                // SAFETY: a handle; the state queries take only it.
                let (ready, gone) = unsafe { ((api.nbd_aio_is_ready)(h.0) == 1, (api.nbd_aio_is_dead)(h.0) == 1 || (api.nbd_aio_is_closed)(h.0) == 1) };
                if ready {
                    return Ok(h);
                }
                if gone {
                    return Err(named(last_error(api)));
                }
                let left = deadline.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    return Err(named(io::Error::new(io::ErrorKind::TimedOut, "the server did not finish the handshake in time")));
                }
                // SAFETY: a handle; polls its socket for at most the time left.
                if unsafe { (api.nbd_poll)(h.0, left.as_millis().clamp(1, 1000) as c_int) } == -1 {
                    return Err(named(last_error(api)));
                }
            }
        }
        pub fn size(&self) -> io::Result<u64> {
            // SAFETY: a connected handle.
            let s = unsafe { (self.1.nbd_get_size)(self.0) };
            u64::try_from(s).map_err(|_| last_error(self.1))
        }
        /// The server's largest request, when it says.
        pub fn max_block(&self) -> Option<u64> {
            // SAFETY: a connected handle.
            u64::try_from(unsafe { (self.1.nbd_get_block_size)(self.0, LIBNBD_SIZE_MAXIMUM) }).ok()
        }
        /// One of the `nbd_can_*` / `nbd_is_*` flags, chosen from the API.
        pub fn flag(&self, which: fn(&Api) -> FlagFn) -> io::Result<bool> {
            // SAFETY: a connected handle; the flag getters take only it.
            let r = unsafe { which(self.1)(self.0) };
            if r == -1 {
                Err(last_error(self.1))
            } else {
                Ok(r == 1)
            }
        }
        /// Whether the connection can still carry commands.
        pub fn alive(&self) -> bool {
            // SAFETY: a handle; the state queries take only it.
            unsafe { (self.1.nbd_aio_is_ready)(self.0) == 1 || (self.1.nbd_aio_is_processing)(self.0) == 1 }
        }
        // The requests are issued asynchronously and polled until
        // `deadline`: a remote that does not answer times out (the caller
        // then closes this handle, so libnbd never touches the buffer after
        // the call returns).
        pub fn pread(&self, buf: &mut [u8], offset: u64, deadline: Instant) -> io::Result<()> {
            // SAFETY: buf is valid for buf.len() bytes of writes until the
            // command completes or the handle is closed (see above).
            let c = unsafe { (self.1.nbd_aio_pread)(self.0, buf.as_mut_ptr().cast(), buf.len(), offset, NO_COMPLETION, 0) };
            self.wait(c, deadline)
        }
        /// Write; with `fua`, the server answers once this write is
        /// durable (LIBNBD_CMD_FLAG_FUA).
        pub fn pwrite(&self, buf: &[u8], offset: u64, fua: bool, deadline: Instant) -> io::Result<()> {
            // SAFETY: as pread, for reads of buf.
            let c = unsafe { (self.1.nbd_aio_pwrite)(self.0, buf.as_ptr().cast(), buf.len(), offset, NO_COMPLETION, fua as u32) };
            self.wait(c, deadline)
        }
        pub fn flush(&self, deadline: Instant) -> io::Result<()> {
            // SAFETY: a connected handle.
            let c = unsafe { (self.1.nbd_aio_flush)(self.0, NO_COMPLETION, 0) };
            self.wait(c, deadline)
        }
        /// Poll until command `cookie` completes or `deadline` passes.
        fn wait(&self, cookie: i64, deadline: Instant) -> io::Result<()> {
            let cookie = u64::try_from(cookie).map_err(|_| last_error(self.1))?;
            loop {
                // SAFETY: a handle and a cookie it issued.
                match unsafe { (self.1.nbd_aio_command_completed)(self.0, cookie) } {
                    1 => return Ok(()),
                    0 => {}
                    _ => return Err(last_error(self.1)),
                }
                let left = deadline.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    return Err(io::Error::new(io::ErrorKind::TimedOut, "the server did not answer in time"));
                }
                let ms = left.as_millis().clamp(1, 1000) as c_int;
                // SAFETY: a handle; polls its socket for at most ms.
                if unsafe { (self.1.nbd_poll)(self.0, ms) } == -1 {
                    return Err(last_error(self.1));
                }
            }
        }
    }
}

#[cfg(all(test, mosaic_libnbd))]
mod tests {
    use super::*;
    use std::process::{Child, Command};
    use std::time::{Duration, Instant};

    /// qemu-nbd serving `file` on a unix socket, for `shared` clients.
    struct Server(Child);

    impl Drop for Server {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }

    fn serve(file: &std::path::Path, sock: &std::path::Path, shared: u32) -> Server {
        Server(crate::testing::qemu_nbd(file, sock, shared))
    }

    fn signal(srv: &Server, sig: &str) {
        Command::new("kill").args([sig, &srv.0.id().to_string()]).status().unwrap();
    }

    /// A remote that stops answering times out and is reconnected when it
    /// answers again; the flush after that reports that writes may be
    /// lost.  A remote that restarts within the time is retried.
    #[test]
    fn a_silent_remote_times_out_and_a_restarted_one_is_retried() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("m.img");
        std::fs::write(&file, vec![7u8; 1 << 20]).unwrap();
        let sock = dir.path().join("s.sock");
        let srv = serve(&file, &sock, 1);
        let m = NbdMember::connect(&format!("nbd+unix:///m?socket={}", sock.display())).unwrap();
        m.set_timeout(Duration::from_millis(1500));
        signal(&srv, "-STOP");
        let t0 = Instant::now();
        let e = m.read_at(&mut [0u8; 4096], 0).unwrap_err();
        let took = t0.elapsed();
        assert_eq!(e.kind(), io::ErrorKind::TimedOut, "{e}");
        assert!(took >= Duration::from_millis(1400) && took < Duration::from_secs(10), "{took:?}");
        signal(&srv, "-CONT");
        let mut b = [0u8; 4096];
        m.read_at(&mut b, 0).unwrap();
        assert!(b.iter().all(|&x| x == 7));
        let e = m.flush().unwrap_err().to_string();
        assert!(e.contains("writes it took may be lost"), "{e}");
        m.flush().unwrap();
        // The server restarts (same file, same socket) within the time.
        m.set_timeout(Duration::from_secs(20));
        drop(srv);
        let _ = std::fs::remove_file(&sock);
        let f2 = file.clone();
        let s2 = sock.clone();
        let restart = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(300));
            serve(&f2, &s2, 1)
        });
        m.write_at(&[9u8; 4096], 8192).unwrap();
        let _srv2 = restart.join().unwrap();
        m.read_at(&mut b, 8192).unwrap();
        assert!(b.iter().all(|&x| x == 9));
    }

    fn label(array: u128, member: u128, events: u64) -> mosaic_format::label::Label {
        use uuid::Uuid;
        mosaic_format::label::Label {
            kind: "fixed".into(),
            array_uuid: Uuid::from_u128(array),
            member_uuid: Uuid::from_u128(member),
            member_index: 0,
            members: 3,
            events,
            member_uuids: vec![Uuid::from_u128(member), Uuid::from_u128(11), Uuid::from_u128(12)],
            created: 1,
            policy: Default::default(),
            session: Uuid::from_u128(3),
            prev_session: Uuid::nil(),
        }
    }

    /// A restart of the server behind a member's URI on another export
    /// (another array's disk, a blank one, an older copy of this one) is
    /// found at the reconnect, before anything is read or written there:
    /// every request fails from then on and the export is left as it was.
    /// The same export restarted (its label as last written) is used.
    #[test]
    fn a_reconnect_to_another_export_is_refused_and_never_written() {
        let dir = tempfile::tempdir().unwrap();
        let sock = dir.path().join("s.sock");
        let uri = format!("nbd+unix:///m?socket={}", sock.display());
        let file = |name: &str, l: Option<mosaic_format::label::Label>| {
            let p = dir.path().join(name);
            let mut b = vec![7u8; 1 << 20];
            if let Some(l) = l {
                let e = l.encode().unwrap();
                let at = (l.slot() * mosaic_format::label::SLOT_SIZE) as usize;
                b[at..at + e.len()].copy_from_slice(&e);
            }
            std::fs::write(&p, b).unwrap();
            p
        };
        let mine = file("mine.img", Some(label(1, 2, 10)));
        let others = [
            ("theirs.img", Some(label(5, 6, 40)), "the label of member"),
            ("blank.img", None, "no label of this member"),
            ("old.img", Some(label(1, 2, 9)), "an older copy of it"),
        ];
        let restart = |srv: &mut Option<Server>, f: &std::path::Path| {
            drop(srv.take());
            let _ = std::fs::remove_file(&sock);
            *srv = Some(serve(f, &sock, 1));
        };
        let mut srv = Some(serve(&mine, &sock, 1));
        let m = NbdMember::connect(&uri).unwrap();
        m.set_timeout(Duration::from_secs(20));
        // The label written through the member is the one a reconnect
        // must find (events 10 -> 12).
        let newer = label(1, 2, 12).encode().unwrap();
        m.write_at(&newer, 0).unwrap();
        m.flush().unwrap();
        restart(&mut srv, &mine);
        let mut b = [0u8; 4096];
        m.read_at(&mut b, 1 << 19).unwrap();
        assert!(b.iter().all(|&x| x == 7));
        drop(m); // (the test server takes one client at a time)
        for (name, l, why) in others {
            let mut l = l;
            if name == "old.img" {
                l = Some(label(1, 2, 10)); // two updates behind the label written
            }
            let other = file(name, l);
            let before = std::fs::read(&other).unwrap();
            let m = NbdMember::connect(&uri).unwrap();
            m.set_timeout(Duration::from_secs(20));
            m.write_at(&newer, 0).unwrap();
            restart(&mut srv, &other);
            let e = m.write_at(&[1u8; 4096], 1 << 19).unwrap_err().to_string();
            assert!(e.contains("not this member") && e.contains(why), "{name}: {e}");
            let e = m.read_at(&mut b, 0).unwrap_err().to_string();
            assert!(e.contains("not this member"), "{name}: {e}");
            assert!(m.flush().is_err(), "{name}");
            drop(srv.take());
            assert!(std::fs::read(&other).unwrap() == before, "{name}: the other export was written");
            drop(m);
            restart(&mut srv, &mine);
        }
    }

    /// A server that accepts the connection and never answers (as one at
    /// its client limit does) is an error after the time, not a hang.
    #[test]
    fn a_handshake_that_never_comes_times_out() {
        let dir = tempfile::tempdir().unwrap();
        let sock = dir.path().join("mute.sock");
        let _l = std::os::unix::net::UnixListener::bind(&sock).unwrap();
        let t0 = Instant::now();
        let e = NbdMember::connect_within(&format!("nbd+unix:///m?socket={}", sock.display()), Duration::from_millis(800)).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::TimedOut, "{e}");
        assert!(t0.elapsed() < Duration::from_secs(10));
        assert!(e.to_string().contains("handshake"), "{e}");
    }

    #[test]
    fn recent_reads_or_writes_above_the_threshold_make_a_remote_slow() {
        let m = LatencyMeter::default();
        let ms = Duration::from_millis;
        for _ in 0..32 {
            m.record(Op::Read, ms(1));
        }
        m.record(Op::Write, ms(400));
        let l = m.read();
        assert_eq!((l.requests, l.slow_requests, l.max_ms), (33, 1, 400.0));
        assert!(l.slow && l.recent_write_ms == 400.0 && l.recent_read_ms == 1.0, "{l:?}");
        // Fast writes bring the mean back under the threshold.
        for _ in 0..64 {
            m.record(Op::Write, ms(2));
        }
        let l = m.read();
        assert!(!l.slow && l.recent_write_ms < 10.0 && l.max_ms == 400.0, "{l:?}");
        // Slow writes between fast flushes (a disk that delays writes
        // only): the flushes do not dilute the writes' mean.
        for _ in 0..32 {
            m.record(Op::Write, ms(300));
            m.record(Op::Flush, ms(1));
        }
        let l = m.read();
        assert!(l.slow && l.recent_write_ms > 250.0 && l.recent_flush_ms < 10.0, "{l:?}");
    }

    #[test]
    fn uris_are_told_from_paths() {
        assert!(is_uri("nbd://h/e") && is_uri("nbds://h:1/e") && is_uri("nbd+unix:///e?socket=/s"));
        assert!(!is_uri("/tmp/nbd://x") && !is_uri("member-00.img") && !is_uri("nbd:/x"));
    }

    #[test]
    fn an_export_reads_back_what_was_written_across_split_requests() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("m.img");
        std::fs::write(&file, vec![0u8; 48 << 20]).unwrap();
        let sock = dir.path().join("s.sock");
        let _srv = serve(&file, &sock, 4);
        let uri = format!("nbd+unix:///m?socket={}", sock.display());
        let m = NbdMember::connect(&uri).unwrap();
        assert_eq!(m.size(), 48 << 20);
        assert_eq!(m.describe(), uri);
        assert_eq!(m.connections(), MAX_CONNS, "qemu-nbd --shared=4 advertises multi-conn");
        // Larger than one request: split, and the pieces land in order.
        let data: Vec<u8> = (0..(40u32 << 20)).map(|i| (i.wrapping_mul(2654435761) >> 11) as u8).collect();
        m.write_at(&data, 4096).unwrap();
        m.flush().unwrap();
        let mut back = vec![0u8; data.len()];
        m.read_at(&mut back, 4096).unwrap();
        assert!(back == data);
        // Concurrent requests from several threads, on several connections.
        let m = std::sync::Arc::new(m);
        let ts: Vec<_> = (0..4u8)
            .map(|t| {
                let m = m.clone();
                std::thread::spawn(move || {
                    for i in 0..64u64 {
                        let off = (t as u64 * 64 + i) * 8192;
                        m.write_at(&[t ^ i as u8; 8192], off).unwrap();
                        let mut b = [0u8; 8192];
                        m.read_at(&mut b, off).unwrap();
                        assert!(b.iter().all(|&x| x == t ^ i as u8));
                    }
                })
            })
            .collect();
        ts.into_iter().for_each(|t| t.join().unwrap());
        m.flush().unwrap();
        // The bytes are on the server's file.
        let f = std::fs::read(&file).unwrap();
        assert_eq!(f[8192 * 65], 1 ^ 1);
        assert_eq!(&f[(64 * 4) * 8192 + 4096..][..1 << 20], &data[(64 * 4) * 8192..][..1 << 20]);
        // A durable write with FUA (qemu-nbd advertises it): on the file
        // when answered, with no flush.
        assert!(m.can_fua, "qemu-nbd advertises FUA");
        m.write_durable(&[0x5a; 4096], 0).unwrap();
        assert!(std::fs::read(&file).unwrap()[..4096].iter().all(|&x| x == 0x5a));
        // Out of range and a server that is gone are clear errors.
        let e = m.read_at(&mut [0u8; 8], 48 << 20).unwrap_err().to_string();
        assert!(e.contains("beyond device size"), "{e}");
        let e = NbdMember::connect(&format!("nbd+unix:///m?socket={}", dir.path().join("none.sock").display())).unwrap_err().to_string();
        assert!(e.contains("none.sock"), "{e}");
    }
}
