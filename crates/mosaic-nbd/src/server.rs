//! The accept loop: one thread per connection (handshake, then the reader of
//! [`crate::conn`]), one worker pool for all of them, clean shutdown.
//!
//! ```text
//!   serve(listener, export, config, stop)
//!     loop until stop:                       stop set (SIGINT/SIGTERM, tests)
//!       try_accept ─▶ spawn conn thread          │
//!       (poll(2), 20 ms at most)                 ▼
//!       full (max_connections)? ─▶ refuse     shutdown(READ) on every socket
//!         thread: NBD_REP_ERR_POLICY "server busy: …" (at most
//!         MAX_REFUSING at once, the rest closed silently)
//!   conn thread: handshake (one deadline) ─▶ transmission
//!                                            readers see EOF, drain in-flight,
//!                                            reply, close; serve() joins them
//!                                            and returns the totals; the
//!                                            caller then flushes and closes.
//! ```

use std::collections::HashMap;
use std::io::{self, BufReader};
use std::net::Shutdown;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use crate::conn::Budget;
use crate::export::Export;
use crate::handshake::{after_tls, handshake_tls, refuse, Deadline, ExportInfo, HandshakeError, Outcome, Session, TlsStage};
use crate::tls::{Tls, TlsMode};
use crate::pool::{Pool, Queue};
use crate::proto::*;
use crate::stream::{Listener, Stream};

/// Server settings.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// Export name ("" from a client always selects it too).
    pub name: String,
    pub description: String,
    pub read_only: bool,
    /// Worker threads shared by all connections.
    pub workers: usize,
    /// Most connections at once (in handshake or transmission); a client
    /// beyond it is refused visibly ("server busy").
    pub max_connections: usize,
    /// Per connection: most requests and payload bytes in flight (the
    /// bytes a share of `max_buffered_bytes`, so one slow client cannot
    /// hold the others up).
    pub max_inflight: usize,
    pub max_inflight_bytes: u64,
    /// All connections together: most READ/WRITE payload bytes held in
    /// memory; a request waits for room rather than allocating.
    pub max_buffered_bytes: u64,
    /// A client must finish the whole handshake within this time.
    pub handshake_timeout: Duration,
    /// In transmission, a WRITE payload of which nothing arrives for this
    /// long, or a reply of which the client reads nothing for this long,
    /// closes that connection (progress, not a whole request, within it:
    /// a slow link carries on; an idle connection between requests stays
    /// open).  Once the server stops, replies still being sent get this
    /// long at most.
    pub io_timeout: Duration,
    /// Log connections as they come and go (`tracing` info events: the
    /// program installs a subscriber to see them).  Trouble (a connection
    /// closed for a protocol error or a timeout, a failed request) is
    /// logged as a warning either way.
    pub log: bool,
    /// TLS offered or required (`NBD_OPT_STARTTLS`), with the server's
    /// certificate; `None`: plain text only.
    pub tls: Option<Tls>,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            name: String::new(),
            description: String::new(),
            read_only: false,
            workers: 8,
            max_connections: 64,
            max_inflight: 128,
            max_inflight_bytes: MAX_PAYLOAD as u64,
            max_buffered_bytes: 256 << 20,
            handshake_timeout: Duration::from_secs(10),
            io_timeout: Duration::from_secs(30),
            log: true,
            tls: None,
        }
    }
}

/// Totals when the server stops.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ServeStats {
    pub connections: u64,
    /// Clients turned away because `max_connections` were open.
    pub refused: u64,
    pub requests: u64,
    pub errors: u64,
    /// Most replies queued at once on one connection (waiting for the
    /// socket): a client that reads no replies holds up to `max_inflight`
    /// of them (and an inline export's few held back), then is no longer
    /// read until they are sent.
    pub max_queued_replies: usize,
    /// Most bytes of the server's buffer budget (`max_buffered_bytes`)
    /// held at once: READ and WRITE payloads and BLOCK_STATUS replies.
    pub max_buffered: u64,
}

/// State shared by the accept loop, connections and workers.
pub(crate) struct Shared {
    pub(crate) export: Arc<dyn Export>,
    /// What handshakes tell clients, but the size: see [`Shared::info_now`].
    pub(crate) info: ExportInfo,
    pub(crate) read_only: bool,
    pub(crate) max_inflight: usize,
    pub(crate) max_inflight_bytes: u64,
    /// Payload bytes held by every connection together.
    pub(crate) buffers: Budget,
    /// Payload buffers kept for reuse.
    pub(crate) bufs: crate::bufs::Bufs,
    pub(crate) io_timeout: Duration,
    pub(crate) requests: AtomicU64,
    pub(crate) errors: AtomicU64,
    /// See [`ServeStats::max_queued_replies`].
    pub(crate) max_queued: AtomicUsize,
    /// Connections in transmission whose readers have requests (not idle
    /// for a whole `io_timeout`): see `conn::Transmitting`.
    pub(crate) transmitting: AtomicUsize,
    /// The machine's cores, read at start.
    pub(crate) cores: usize,
    jobs: Arc<Queue>,
    stop: Arc<AtomicBool>,
    /// When the accept loop saw `stop` (replies get `io_timeout` from it).
    stopped_at: OnceLock<Instant>,
    log: bool,
    tls: Option<Tls>,
}

impl Shared {
    pub(crate) fn submit(&self, job: impl FnOnce() + Send + 'static) {
        self.jobs.submit(Box::new(job));
    }

    pub(crate) fn stopping(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }

    /// When the server stopped, once it has.
    pub(crate) fn stopped_at(&self) -> Option<Instant> {
        self.stopped_at.get().copied()
    }

    /// The export as a new handshake describes it: its size read now, as
    /// the export behind it may have grown since the server started.  One
    /// connection takes it once, so INFO and GO on it agree (the spec
    /// wants the same answer to both) and its transmission keeps the size
    /// its client was told.
    fn info_now(&self) -> ExportInfo {
        ExportInfo { size: self.export.size(), ..self.info.clone() }
    }

    /// Log trouble with a connection (a warning): always, as a quiet
    /// server (`log: false`) still says why it closed a connection or
    /// failed a request, or nothing would tell a user why a client lost
    /// its connection.
    pub(crate) fn log(&self, msg: &str) {
        tracing::warn!("mosaic-nbd: {msg}");
    }

    /// Log a connection's comings and goings, unless logging is off.
    pub(crate) fn log_info(&self, msg: &str) {
        if self.log {
            tracing::info!("mosaic-nbd: {msg}");
        }
    }
}

/// Largest power of two dividing `v` (and at most `cap`), at least 1.
fn pow2_divisor(v: u64, cap: u64) -> u64 {
    if v == 0 {
        return 1;
    }
    (1u64 << v.trailing_zeros()).min(cap)
}

/// The handshake's view of an export under a configuration.
pub fn export_info(export: &dyn Export, cfg: &ServerConfig) -> ExportInfo {
    let min = pow2_divisor(export.block_size(), 64 << 10);
    let pref = pow2_divisor(export.preferred_block(), MAX_PAYLOAD as u64).max(min);
    // FAST_ZERO: a client asking for a fast zero gets ENOTSUP at once when
    // the export cannot zero faster than it writes (qemu-img and nbdcopy
    // then skip pre-zeroing instead of writing the device twice).
    let mut tflags = TFLAG_HAS_FLAGS | TFLAG_SEND_FLUSH | TFLAG_SEND_CACHE;
    // Safe: Export::flush makes the completed writes of every connection
    // durable (it flushes the whole export, not a per-connection cache).
    tflags |= TFLAG_CAN_MULTI_CONN;
    // A read-only export offers no way to write (as nbdkit's): a client
    // asking anyway still gets EPERM.
    tflags |= match cfg.read_only {
        true => TFLAG_READ_ONLY,
        false => TFLAG_SEND_FUA | TFLAG_SEND_TRIM | TFLAG_SEND_WRITE_ZEROES | TFLAG_SEND_FAST_ZERO,
    };
    ExportInfo {
        name: cfg.name.clone(),
        description: cfg.description.clone(),
        size: export.size(),
        tflags,
        min_block: min as u32,
        pref_block: pref as u32,
        max_block: MAX_PAYLOAD,
    }
}

/// Refused clients answered at once; more are closed without a word (a
/// flood of connections must not become a flood of threads).
const MAX_REFUSING: usize = 16;
/// A refused client gets at most this long to read its refusal.
const REFUSE_TIME: Duration = Duration::from_secs(5);

fn connection(sh: Arc<Shared>, id: u64, stream: Stream, rd: BufReader<Stream>, peer: String, timeout: Duration) {
    let _ = stream.set_nodelay();
    let info = sh.info_now();
    match negotiate(&sh, &stream, &info, timeout) {
        Ok(Some((secured, session))) => {
            sh.log_info(&format!("conn {id} from {peer}: transmission ({})", session.describe()));
            let (stream, rd) = secured.unwrap_or((stream, rd));
            crate::conn::transmission(&sh, id, stream, rd, session, info.size);
            sh.log_info(&format!("conn {id} from {peer}: closed"));
        }
        Ok(None) => {}
        Err(e) => {
            if !sh.stopping() {
                sh.log(&format!("conn {id} from {peer}: {e}; closing this connection"));
            }
            let _ = stream.shutdown(Shutdown::Both);
        }
    }
}

/// A TLS stream transmission runs on instead of the socket, with its
/// request reader.
type Secured = (Stream, BufReader<Stream>);

/// The handshake, through TLS when the client starts it: the session,
/// and the TLS stream when there is one (else transmission runs on the
/// socket); `None` when the client aborted.  One deadline covers both
/// halves and the TLS handshake between them.
fn negotiate(sh: &Shared, stream: &Stream, info: &ExportInfo, timeout: Duration) -> Result<Option<(Option<Secured>, Session)>, HandshakeError> {
    let end = Instant::now() + timeout;
    let mut hs = Deadline::new(stream.try_clone()?, timeout);
    let stage = match &sh.tls {
        None => TlsStage::Off,
        Some(t) if t.mode == TlsMode::Require => TlsStage::Required,
        Some(_) => TlsStage::Offered,
    };
    match handshake_tls(&mut hs, info, stage)? {
        Outcome::Transmission(session) => Ok(Some((None, session))),
        Outcome::Aborted => Ok(None),
        Outcome::StartTls { no_zeroes } => {
            // STARTTLS is acknowledged only with TLS set up.
            let Some(tls) = sh.tls.as_ref() else { return Err(HandshakeError::Garbage("STARTTLS without TLS".into())) };
            let secured = tls.start(&mut hs, stream.try_clone()?)?;
            let mut hs = Deadline::new(secured.try_clone()?, end.saturating_duration_since(Instant::now()));
            match after_tls(&mut hs, info, no_zeroes)? {
                Outcome::Transmission(session) => {
                    let rd = crate::conn::request_reader(&secured)?;
                    Ok(Some((Some((secured, rd)), session)))
                }
                _ => Ok(None),
            }
        }
    }
}

/// Turn away a client of a full server on a thread of its own (at most
/// [`MAX_REFUSING`] at once): it reads "server busy" as an option error.
fn refuse_busy(sh: &Shared, refusing: &Arc<AtomicUsize>, stream: Stream, peer: String, open: usize, timeout: Duration) {
    let why = format!("server busy: {open} connections (the limit); try again later");
    sh.log(&format!("refusing connection from {peer}: {why}"));
    if refusing.fetch_add(1, Ordering::AcqRel) >= MAX_REFUSING {
        refusing.fetch_sub(1, Ordering::AcqRel);
        let _ = stream.shutdown(Shutdown::Both);
        return;
    }
    let refusing = refusing.clone();
    let spawned = std::thread::Builder::new().name("nbd-refuse".into()).spawn(move || {
        let mut s = Deadline::new(stream, timeout.min(REFUSE_TIME));
        let _ = refuse(&mut s, &why);
        refusing.fetch_sub(1, Ordering::AcqRel);
    });
    if spawned.is_err() {
        sh.log("cannot start a thread to refuse a connection");
    }
}

/// Serve `export` on `listener` until `stop` becomes true; then stop
/// accepting, let every connection finish its in-flight requests, and
/// return.  Flushing and closing the export is the caller's job.
pub fn serve(listener: &Listener, export: Arc<dyn Export>, cfg: &ServerConfig, stop: Arc<AtomicBool>) -> io::Result<ServeStats> {
    let pool = Pool::new(cfg.workers);
    let info = export_info(export.as_ref(), cfg);
    let sh = Arc::new(Shared {
        export,
        info,
        read_only: cfg.read_only,
        max_inflight: cfg.max_inflight.max(1),
        max_inflight_bytes: cfg.max_inflight_bytes.max(MAX_PAYLOAD as u64),
        buffers: Budget::new(usize::MAX, cfg.max_buffered_bytes.max(MAX_PAYLOAD as u64)),
        bufs: Default::default(),
        io_timeout: cfg.io_timeout,
        requests: AtomicU64::new(0),
        errors: AtomicU64::new(0),
        max_queued: AtomicUsize::new(0),
        transmitting: AtomicUsize::new(0),
        cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
        jobs: pool.queue(),
        stop: stop.clone(),
        stopped_at: OnceLock::new(),
        log: cfg.log,
        tls: cfg.tls.clone(),
    });
    let live: Arc<Mutex<HashMap<u64, Stream>>> = Arc::new(Mutex::new(HashMap::new()));
    let mut threads: Vec<std::thread::JoinHandle<()>> = Vec::new();
    let mut next_id = 0u64;
    let mut refused = 0u64;
    let refusing = Arc::new(AtomicUsize::new(0));
    while !stop.load(Ordering::Relaxed) {
        threads.retain(|t| !t.is_finished());
        let (stream, peer) = match listener.try_accept() {
            Ok(Some(c)) => c,
            Ok(None) => {
                listener.wait(Duration::from_millis(20));
                continue;
            }
            Err(e) => {
                sh.log(&format!("accept: {e}"));
                std::thread::sleep(Duration::from_millis(100));
                continue;
            }
        };
        if threads.len() >= cfg.max_connections.max(1) {
            refused += 1;
            refuse_busy(&sh, &refusing, stream, peer, threads.len(), cfg.handshake_timeout);
            continue;
        }
        next_id += 1;
        let id = next_id;
        if let Ok(c) = stream.try_clone() {
            live.lock().unwrap_or_else(|e| e.into_inner()).insert(id, c);
        }
        let rd = match crate::conn::request_reader(&stream) {
            Ok(rd) => rd,
            Err(e) => {
                sh.log(&format!("conn {id} from {peer}: {e}"));
                continue;
            }
        };
        let (sh2, live2, timeout) = (sh.clone(), live.clone(), cfg.handshake_timeout);
        let t = std::thread::Builder::new().name(format!("nbd-conn-{id}")).spawn(move || {
            connection(sh2, id, stream, rd, peer, timeout);
            live2.lock().unwrap_or_else(|e| e.into_inner()).remove(&id);
        })?;
        threads.push(t);
    }
    // Stop: no more requests are read; in-flight ones are answered, each
    // reply within io_timeout from now.
    let _ = sh.stopped_at.set(Instant::now());
    for s in live.lock().unwrap_or_else(|e| e.into_inner()).values() {
        let _ = s.shutdown(Shutdown::Read);
    }
    for t in threads {
        let _ = t.join();
    }
    let stats = ServeStats {
        connections: next_id,
        refused,
        requests: sh.requests.load(Ordering::Relaxed),
        errors: sh.errors.load(Ordering::Relaxed),
        max_queued_replies: sh.max_queued.load(Ordering::Relaxed),
        max_buffered: sh.buffers.peak(),
    };
    drop(sh);
    drop(pool);
    Ok(stats)
}
