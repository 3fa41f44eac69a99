//! The accept loop: one thread per connection (handshake, then the reader of
//! [`crate::conn`]), one worker pool for all of them, clean shutdown.
//!
//! ```text
//!   serve(listener, export, config, stop)
//!     loop until stop:                       stop set (SIGINT/SIGTERM, tests)
//!       try_accept ─▶ spawn conn thread          │
//!       (poll every 20 ms)                       ▼
//!   conn thread: handshake ─▶ transmission    shutdown(READ) on every socket
//!                                            readers see EOF, drain in-flight,
//!                                            reply, close; serve() joins them
//!                                            and returns the totals; the
//!                                            caller then flushes and closes.
//! ```

use std::collections::HashMap;
use std::io;
use std::net::Shutdown;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::Sender;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::export::Export;
use crate::handshake::{handshake, ExportInfo, Outcome};
use crate::pool::{Job, Pool};
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
    /// Most connections served at once; more are closed at accept.
    pub max_connections: usize,
    /// Per connection: most requests and payload bytes in flight.
    pub max_inflight: usize,
    pub max_inflight_bytes: u64,
    /// A client must finish each handshake read within this time.
    pub handshake_timeout: Duration,
    /// Print connection and error lines on stderr.
    pub log: bool,
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
            max_inflight_bytes: 128 << 20,
            handshake_timeout: Duration::from_secs(10),
            log: true,
        }
    }
}

/// Totals when the server stops.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ServeStats {
    pub connections: u64,
    pub requests: u64,
    pub errors: u64,
}

/// State shared by the accept loop, connections and workers.
pub(crate) struct Shared {
    pub(crate) export: Arc<dyn Export>,
    pub(crate) info: ExportInfo,
    pub(crate) read_only: bool,
    pub(crate) max_inflight: usize,
    pub(crate) max_inflight_bytes: u64,
    pub(crate) requests: AtomicU64,
    pub(crate) errors: AtomicU64,
    jobs: Mutex<Sender<Job>>,
    stop: Arc<AtomicBool>,
    log: bool,
}

impl Shared {
    pub(crate) fn submit(&self, job: impl FnOnce() + Send + 'static) {
        let _ = self.jobs.lock().unwrap_or_else(|e| e.into_inner()).send(Box::new(job));
    }

    pub(crate) fn stopping(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }

    pub(crate) fn log(&self, msg: &str) {
        if self.log {
            eprintln!("mosaic-nbd: {msg}");
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
    let mut tflags = TFLAG_HAS_FLAGS | TFLAG_SEND_FLUSH | TFLAG_SEND_FUA | TFLAG_SEND_TRIM | TFLAG_SEND_WRITE_ZEROES;
    // Safe: Export::flush makes the completed writes of every connection
    // durable (it flushes the whole export, not a per-connection cache).
    tflags |= TFLAG_CAN_MULTI_CONN;
    if cfg.read_only {
        tflags |= TFLAG_READ_ONLY;
    }
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

fn connection(sh: Arc<Shared>, id: u64, stream: Stream, peer: String, timeout: Duration) {
    let _ = stream.set_nodelay();
    let _ = stream.set_read_timeout(Some(timeout));
    let mut hs = match stream.try_clone() {
        Ok(s) => s,
        Err(e) => {
            sh.log(&format!("conn {id} from {peer}: {e}"));
            return;
        }
    };
    match handshake(&mut hs, &sh.info) {
        Ok(Outcome::Transmission) => {
            let _ = stream.set_read_timeout(None);
            sh.log(&format!("conn {id} from {peer}: transmission"));
            crate::conn::transmission(&sh, id, stream);
            sh.log(&format!("conn {id} from {peer}: closed"));
        }
        Ok(Outcome::Aborted) => {}
        Err(e) => {
            if !sh.stopping() {
                sh.log(&format!("conn {id} from {peer}: {e}; closing this connection"));
            }
            let _ = stream.shutdown(Shutdown::Both);
        }
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
        requests: AtomicU64::new(0),
        errors: AtomicU64::new(0),
        jobs: Mutex::new(pool.sender()),
        stop: stop.clone(),
        log: cfg.log,
    });
    let live: Arc<Mutex<HashMap<u64, Stream>>> = Arc::new(Mutex::new(HashMap::new()));
    let mut threads: Vec<std::thread::JoinHandle<()>> = Vec::new();
    let mut next_id = 0u64;
    while !stop.load(Ordering::Relaxed) {
        threads.retain(|t| !t.is_finished());
        let (stream, peer) = match listener.try_accept() {
            Ok(Some(c)) => c,
            Ok(None) => {
                std::thread::sleep(Duration::from_millis(20));
                continue;
            }
            Err(e) => {
                sh.log(&format!("accept: {e}"));
                std::thread::sleep(Duration::from_millis(100));
                continue;
            }
        };
        if threads.len() >= cfg.max_connections {
            sh.log(&format!("refusing connection from {peer}: {} connections already", threads.len()));
            let _ = stream.shutdown(Shutdown::Both);
            continue;
        }
        next_id += 1;
        let id = next_id;
        if let Ok(c) = stream.try_clone() {
            live.lock().unwrap_or_else(|e| e.into_inner()).insert(id, c);
        }
        let (sh2, live2, timeout) = (sh.clone(), live.clone(), cfg.handshake_timeout);
        let t = std::thread::Builder::new().name(format!("nbd-conn-{id}")).spawn(move || {
            connection(sh2, id, stream, peer, timeout);
            live2.lock().unwrap_or_else(|e| e.into_inner()).remove(&id);
        })?;
        threads.push(t);
    }
    // Stop: no more requests are read; in-flight ones are answered.
    for s in live.lock().unwrap_or_else(|e| e.into_inner()).values() {
        let _ = s.shutdown(Shutdown::Read);
    }
    for t in threads {
        let _ = t.join();
    }
    let stats = ServeStats {
        connections: next_id,
        requests: sh.requests.load(Ordering::Relaxed),
        errors: sh.errors.load(Ordering::Relaxed),
    };
    drop(sh);
    drop(pool);
    Ok(stats)
}
