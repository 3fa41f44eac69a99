//! `mosaic serve`: export an array of any kind over NBD (crate
//! `mosaic-nbd`) to real clients (qemu, nbdcopy, nbdfuse, fio, the
//! kernel's nbd-client).
//!
//! ```text
//!   client ──NBD──▶ mosaic_nbd::serve ──Export──▶ VolumeExport ──▶ Arc<dyn Volume>
//!                                                  │ sub-block requests:      (fixed, cached, DVS)
//!                                                  │ read-modify-write
//!                                                  ├ --monitor: ring of recent requests
//!                                                  │   (mosaic_adapt::monitor, lock-free)
//!                                                  └ --record: MSR trace line
//!   idle thread: Volume::idle_work in steps (DVS: garbage collection)
//!   watch thread: members failed after I/O errors, logged with a timestamp
//!   SIGINT/SIGTERM ─▶ stop accepting, drain, stop both threads, flush, close
//! ```
//!
//! The log goes through `tracing` (`--log-format`, `--log-level`: see
//! `logging`); events of the array through `events`.  `serve --config
//! FILE` serves every array a TOML file lists, one child `mosaic serve`
//! each (`serve_config`).
//!
//! Clients cannot kill the server: SIGPIPE is ignored here (and the server
//! sends with MSG_NOSIGNAL), connections are limited (`--max-connections`,
//! refused visibly) and must finish their handshake in time
//! (`--handshake-timeout`), and payload memory is bounded across all
//! connections (`mosaic_nbd::ServerConfig::max_buffered_bytes`).

use std::fs::File;
use std::io::{self, BufWriter};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{bail, Context, Result};
use clap::Args;

use mosaic_adapt::monitor::Ring;
use mosaic_array::spec::ArraySpec;
use mosaic_array::{Array, CreateOptions};
use mosaic_core::{CacheConfig, CachePolicy, Level};
use mosaic_nbd::{Export, Extent, Listener, ServerConfig};
use mosaic_trace::{Op, Request, TraceWriter};
use mosaic_volume::{Volume, VolumeError};

use crate::util::{human, seconds, size};

/// Where `--demo` keeps its array.
const DEMO_DIR: &str = "mosaic-data";

/// `serve --tls`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum TlsArg {
    Off,
    On,
    Require,
}

/// The server's TLS from `--tls`, `--tls-certificates` or `--tls-psk`,
/// and `--tls-verify-peer`: certificates or keys loaded now, so a bad
/// file stops the server before it listens.
fn tls(a: &ServeArgs) -> Result<Option<mosaic_nbd::Tls>> {
    if a.tls_psk.is_some() && a.tls_verify_peer {
        bail!("--tls-verify-peer is for certificates: with --tls-psk every client proves its key already");
    }
    let given = a.tls_certificates.is_some() || a.tls_psk.is_some();
    let mode = match (a.tls, given) {
        (Some(TlsArg::Off), true) => bail!("--tls off with --tls-certificates or --tls-psk: leave one out"),
        (Some(TlsArg::Off), false) | (None, false) => {
            if a.tls_verify_peer {
                bail!("--tls-verify-peer needs TLS: give --tls-certificates DIR");
            }
            return Ok(None);
        }
        (Some(TlsArg::On | TlsArg::Require), false) => bail!("--tls needs --tls-certificates DIR (server-cert.pem, server-key.pem) or --tls-psk FILE"),
        (Some(TlsArg::On), true) => mosaic_nbd::TlsMode::On,
        (Some(TlsArg::Require) | None, true) => mosaic_nbd::TlsMode::Require,
    };
    let t = match (a.tls_certificates.as_deref(), a.tls_psk.as_deref()) {
        (Some(dir), None) => mosaic_nbd::Tls::load(dir, mode, a.tls_verify_peer).map_err(|e| anyhow::anyhow!("--tls-certificates: {e}"))?,
        (None, Some(file)) => mosaic_nbd::Tls::load_psk(file, mode).map_err(|e| anyhow::anyhow!("--tls-psk: {e}"))?,
        _ => bail!("--tls-certificates and --tls-psk: give one"),
    };
    Ok(Some(t))
}

/// `serve --re-add`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ReAdd {
    Auto,
    Manual,
}

#[derive(Args)]
pub struct ServeArgs {
    /// The array: a directory of member files or a comma list of members
    #[arg(short = 'a', long = "array", required_unless_present_any = ["demo", "config"])]
    pub array: Option<String>,
    /// Serve every array a TOML file lists (one `[[serve]]` table each, its
    /// keys serve's options: docs/SERVICE.md), one child server per array;
    /// SIGTERM/SIGINT stop them all
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Serve a default raid5 array in ./mosaic-data (created on first use)
    #[arg(long, conflicts_with = "array")]
    pub demo: bool,
    /// TCP address to listen on (port 0 picks a free port; only the printed
    /// URI tells it) [default: 127.0.0.1:10809].  A server started by socket
    /// activation (LISTEN_PID and LISTEN_FDS: systemd's .socket units,
    /// nbdcopy's `[ mosaic serve ... ]`) serves on the sockets passed to it
    /// instead, and refuses --listen, --socket, --run and --config
    #[arg(long)]
    pub listen: Option<String>,
    /// Listen on a unix socket instead of TCP
    #[arg(long, conflicts_with = "listen")]
    pub socket: Option<PathBuf>,
    /// Export name (clients asking for the default name "" get it too)
    #[arg(long, default_value = "mosaic")]
    pub export: String,
    /// Refuse writes
    #[arg(long)]
    pub read_only: bool,
    /// TLS for clients, as nbdkit's --tls: off; on (offered, plain clients
    /// served too); require (every option but STARTTLS refused until TLS
    /// is up).  Default: require with --tls-certificates, else off
    #[arg(long, value_enum)]
    pub tls: Option<TlsArg>,
    /// The directory of the server's certificate: server-cert.pem,
    /// server-key.pem, and ca-cert.pem for --tls-verify-peer (nbdkit's
    /// and libnbd's names)
    #[arg(long, value_name = "DIR")]
    pub tls_certificates: Option<PathBuf>,
    /// TLS with pre-shared keys instead of certificates, as nbdkit's
    /// --tls-psk: FILE holds one username:hexkey a line (psktool's
    /// format); clients name a username and prove its key (libnbd:
    /// nbds://USER@HOST/EXPORT?tls-psk-file=FILE)
    #[arg(long, value_name = "FILE")]
    pub tls_psk: Option<PathBuf>,
    /// Serve only clients that present a certificate signed by
    /// ca-cert.pem (libnbd sends client-cert.pem from its
    /// tls-certificates directory), as nbdkit's --tls-verify-peer
    #[arg(long)]
    pub tls_verify_peer: bool,
    /// Append every read and write served to FILE as an MSR Cambridge trace (`mosaic replay --trace FILE`)
    #[arg(long)]
    pub record: Option<PathBuf>,
    /// Keep the newest N requests served in memory, for the adaptive
    /// layout's monitoring (32 bytes each, N rounded up to a power of two;
    /// 0 turns it off).  The default, 1 Mi requests in 32 MiB, holds about
    /// 10 s of this server's peak 4 KiB rate (~100k IOPS), so a job taking
    /// snapshots every few seconds loses nothing, and days of a typical
    /// enterprise volume (the paper's traces: ~3 million requests a week)
    #[arg(long, default_value_t = DEFAULT_MONITOR, value_parser = clap::value_parser!(u64).range(0..=mosaic_adapt::monitor::MAX_CAPACITY))]
    pub monitor: u64,
    /// Remapped arrays: every SECS seconds, plan from the requests the
    /// monitor ring saw since the last round and move units while clients
    /// keep going (as `mosaic adapt`)
    #[arg(long, value_parser = seconds)]
    pub adapt_every: Option<Duration>,
    /// --adapt-every: correlation threshold
    #[arg(long, default_value_t = 1)]
    pub adapt_threshold: u64,
    /// --adapt-every: migration budget in bytes per second (0: unlimited)
    #[arg(long, value_parser = size, default_value = "32M")]
    pub adapt_rate: u64,
    /// --adapt-every: most bytes moved per round, BYTES or PERCENT% of the capacity
    #[arg(long)]
    pub adapt_max_move: Option<String>,
    /// --adapt-every: rounds that saw fewer requests plan nothing
    #[arg(long, default_value_t = 1000)]
    pub adapt_min_requests: usize,
    /// Rebuild and scrub asked for through the control channel (`mosaic
    /// replace/rebuild/scrub -a` while served) go at most this many bytes
    /// per second, so client I/O keeps its share (0: unlimited)
    #[arg(long, value_parser = size, default_value = "128M")]
    pub maint_rate: u64,
    /// A failed remote member (an NBD URI) whose device answers again
    /// with the session it left in is put back by itself and only what
    /// was written meanwhile rebuilt (md's re-add; needs a write-intent
    /// bitmap): auto, or manual (`mosaic replace` with its URI).  A member
    /// failed with `mosaic fail` stays out until replaced
    /// (`mosaic replace` with its URI puts it back)
    #[arg(long, value_enum, default_value = "auto")]
    pub re_add: ReAdd,
    /// Check every stripe (a scrub without --repair, at --maint-rate)
    /// whenever the last scrub, or the array's creation, is this long ago:
    /// 30d, 12h, 90m or seconds, as a cron job runs md's checkarray
    /// (every kind of array: its labels keep the last scrub's result; a
    /// tier's is due when either side's is)
    #[arg(long, value_parser = crate::util::interval)]
    pub scrub_every: Option<Duration>,
    /// Run CMD (through sh -c) for every event of the array: member
    /// failure, rebuild start and end, scrub end and findings, warnings at
    /// open (stale member, journal replay); the event is in its
    /// environment (MOSAIC_EVENT, MOSAIC_ARRAY, MOSAIC_MEMBER, MOSAIC_DETAIL, MOSAIC_TIME)
    #[arg(long)]
    pub on_event: Option<String>,
    /// Let --record or --pidfile overwrite a file that carries another
    /// array's member or journal
    #[arg(long)]
    pub force: bool,
    /// Advertise this minimum block size (a power of two no larger than the
    /// array's block; default 512, or the array's block if smaller).
    /// Requests smaller than the array's block are read-modify-written, so
    /// strict clients (nbdfuse, whose libnbd refuses requests below the
    /// advertised minimum) can carry filesystems that write 1 KiB pieces
    #[arg(long, value_parser = size)]
    pub min_block: Option<u64>,
    /// Most client connections at once (handshaking or served); one more is
    /// refused with a "server busy" error the client can show
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u64).range(1..=4096))]
    pub max_connections: u64,
    /// Seconds a client has to finish its whole handshake (fractions allowed)
    #[arg(long, default_value = "10", value_parser = seconds)]
    pub handshake_timeout: Duration,
    /// Seconds a served client may make no progress: send nothing of a
    /// WRITE's payload, or read nothing of a reply, before its connection
    /// is closed (a slow client that keeps going is served however long a
    /// request takes); also how long a stop waits for clients' replies
    #[arg(long, default_value = "30", value_parser = seconds)]
    pub io_timeout: Duration,
    /// Worker threads serving requests (the array runs member I/O on its own
    /// pool; more workers mostly add context switches on small machines)
    /// [default: 4; 32 when a member is remote: each request then waits
    /// on the network; one a core when every member and the journal are
    /// in RAM: each request is then pure CPU]
    #[arg(long)]
    pub workers: Option<usize>,
    /// Do not log connections as they come and go (a connection closed
    /// for a protocol error or a timeout, and a failed request, are still
    /// logged as warnings)
    #[arg(long)]
    pub quiet: bool,
    /// Run CMD (through sh -c) once the server listens, its address in the
    /// environment ($uri, $nbd, $port or $unixsocket, $exportname), as
    /// nbdkit's --run: when CMD exits the server stops, flushes and closes
    /// the array, and exits with CMD's status
    #[arg(long, value_name = "CMD")]
    pub run: Option<String>,
    /// Write the server's process id to FILE once it listens (as nbdkit's
    /// --pidfile)
    #[arg(long, value_name = "FILE")]
    pub pidfile: Option<PathBuf>,
    /// Stop (clients drained, the array flushed and closed) when the
    /// process that started this one exits, as nbdkit's --exit-with-parent
    #[arg(long)]
    pub exit_with_parent: bool,
    /// Small-write cache in front of the array: none, fpc, ppc or ppc+data
    /// (write-back through the array's journal, write-through without one)
    #[arg(long)]
    pub cache: Option<String>,
    /// Size of each cache structure (write cache, parity cache, old-data buffer)
    #[arg(long, value_parser = size, default_value = "2M")]
    pub cache_size: u64,
}

/// `serve`'s command with `--config` conflicting with every other option
/// of serve (the file gives them, per array; the global log flags stay).
pub fn config_alone(serve: clap::Command) -> clap::Command {
    let others: Vec<clap::Id> = serve.get_arguments().filter(|a| !a.is_global_set() && a.get_id() != "config").map(|a| a.get_id().clone()).collect();
    serve.mut_arg("config", |c| c.conflicts_with_all(others))
}

/// `--monitor`'s default ring capacity in requests (see there).
const DEFAULT_MONITOR: u64 = 1 << 20;

/// The advertised minimum block when `--min-block` is not given: 512 (what
/// portable clients align to) or the volume's block if that is smaller.
const DEFAULT_MIN_BLOCK: u64 = 512;

/// `d` since the Unix epoch as an RFC 3339 UTC timestamp with milliseconds
/// (calendar fields from the C library's gmtime_r).
pub(crate) fn rfc3339(d: Duration) -> String {
    let t = d.as_secs() as libc::time_t;
    // SAFETY: an all-zero tm is valid; gmtime_r only writes into it.
    let mut tm: libc::tm = unsafe { std::mem::zeroed() };
    // SAFETY: both pointers are valid for the call.
    if unsafe { libc::gmtime_r(&t, &mut tm) }.is_null() {
        return format!("@{}", d.as_secs());
    }
    format!(
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}Z",
        tm.tm_year + 1900,
        tm.tm_mon + 1,
        tm.tm_mday,
        tm.tm_hour,
        tm.tm_min,
        tm.tm_sec,
        d.subsec_millis()
    )
}

/// Now as an RFC 3339 UTC timestamp.
pub(crate) fn now_rfc3339() -> String {
    rfc3339(SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default())
}

/// Windows FILETIME (100 ns ticks since 1601) of now, for MSR timestamps.
fn filetime_now() -> u64 {
    let d = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
    (d.as_secs() + 11_644_473_600) * 10_000_000 + d.subsec_nanos() as u64 / 100
}

/// Appends served requests as an MSR trace with real timestamps.
struct Recorder {
    out: Mutex<TraceWriter<BufWriter<File>>>,
}

impl Recorder {
    fn create(path: &PathBuf) -> Result<Recorder> {
        let f = File::create(path).with_context(|| format!("creating {}", path.display()))?;
        let w = TraceWriter::new(BufWriter::new(f), "mosaic-serve").with_base_ticks(filetime_now());
        Ok(Recorder { out: Mutex::new(w) })
    }

    /// One request that arrived `time_ns` after the server started and
    /// took `resp_ns`.
    fn record(&self, op: Op, offset: u64, len: u64, time_ns: u64, resp_ns: u64) {
        if len == 0 {
            return;
        }
        let mut w = self.out.lock().unwrap_or_else(|e| e.into_inner());
        if let Err(e) = w.write(&Request { time_ns, op, offset, len }, resp_ns) {
            tracing::warn!("mosaic serve: --record: {e}");
        }
    }

    fn finish(&self) -> io::Result<u64> {
        let mut w = self.out.lock().unwrap_or_else(|e| e.into_inner());
        w.flush()?;
        Ok(w.written())
    }
}

/// A volume as an NBD export.
struct VolumeExport {
    vol: Arc<dyn Volume>,
    /// The volume's block: requests aligned to it go straight through.
    block: u64,
    /// The advertised minimum block (at most `block`).
    min_block: u64,
    preferred: u64,
    /// Sub-block writes read-modify-write whole blocks: they hold this
    /// exclusively, aligned writes share it, so no write is lost.
    rmw: RwLock<()>,
    recorder: Option<Recorder>,
    monitor: Option<Arc<Ring>>,
    /// Time stamps (ring and trace) count from here: the server's start.
    start: Instant,
    /// Requests served, for `mosaic status`.
    stats: Arc<crate::control::ClientStats>,
}

fn io_err(e: VolumeError) -> io::Error {
    io::Error::other(e.to_string())
}

impl VolumeExport {
    fn new(vol: Arc<dyn Volume>, min_block: Option<u64>, recorder: Option<Recorder>, monitor: Option<Arc<Ring>>) -> Result<VolumeExport> {
        let block = vol.block_size();
        let min_block = min_block.unwrap_or(DEFAULT_MIN_BLOCK.min(block));
        if !min_block.is_power_of_two() || min_block > block {
            bail!("--min-block must be a power of two no larger than the array's block ({block})");
        }
        let (preferred, rmw, start) = (vol.preferred_block(), RwLock::new(()), Instant::now());
        let stats = Arc::new(crate::control::ClientStats::default());
        Ok(VolumeExport { block, min_block, preferred, vol, rmw, recorder, monitor, start, stats })
    }

    /// The `--monitor` ring, for a periodic job to take snapshots of.
    pub(crate) fn monitor(&self) -> Option<Arc<Ring>> {
        self.monitor.clone()
    }

    /// A request arriving: into the `--monitor` ring.  Its arrival time,
    /// for [`served`](Self::served).
    fn arrived(&self, op: Op, off: u64, len: u64) -> Instant {
        let t = Instant::now();
        if let Some(ring) = &self.monitor {
            ring.push(op, off, len, t.duration_since(self.start).as_nanos() as u64);
        }
        t
    }

    /// A request served (successfully or not): into the `--record` trace.
    fn served(&self, op: Op, off: u64, len: u64, arrived: Instant) {
        self.stats.count(op, len);
        if let Some(rec) = &self.recorder {
            rec.record(op, off, len, arrived.duration_since(self.start).as_nanos() as u64, arrived.elapsed().as_nanos() as u64);
        }
    }

    // `%` rather than `is_multiple_of`: the workspace's rust-version is 1.80.
    #[allow(clippy::manual_is_multiple_of)]
    fn aligned(&self, off: u64, len: u64) -> bool {
        off % self.block == 0 && len % self.block == 0
    }

    /// The whole blocks covering `[off, off+len)`.
    fn cover(&self, off: u64, len: u64) -> (u64, u64) {
        let start = off - off % self.block;
        let end = (off + len).div_ceil(self.block) * self.block;
        (start, end - start)
    }

    /// The whole blocks inside `off..off + len`: (start, end), empty when
    /// end <= start.
    fn inside(&self, off: u64, len: u64) -> (u64, u64) {
        (off.div_ceil(self.block) * self.block, (off + len) / self.block * self.block)
    }

    fn read_inner(&self, off: u64, buf: &mut [u8]) -> io::Result<()> {
        if self.aligned(off, buf.len() as u64) {
            return self.vol.read(off, buf).map_err(io_err);
        }
        let (s, l) = self.cover(off, buf.len() as u64);
        let mut tmp = vec![0u8; l as usize];
        self.vol.read(s, &mut tmp).map_err(io_err)?;
        let k = (off - s) as usize;
        buf.copy_from_slice(&tmp[k..k + buf.len()]);
        Ok(())
    }

    fn write_inner(&self, off: u64, data: &[u8]) -> io::Result<()> {
        if self.aligned(off, data.len() as u64) {
            let _g = self.rmw.read().unwrap_or_else(|e| e.into_inner());
            return self.vol.write(off, data).map_err(io_err);
        }
        let _g = self.rmw.write().unwrap_or_else(|e| e.into_inner());
        let (s, l) = self.cover(off, data.len() as u64);
        let mut tmp = vec![0u8; l as usize];
        self.vol.read(s, &mut tmp).map_err(io_err)?;
        let k = (off - s) as usize;
        tmp[k..k + data.len()].copy_from_slice(data);
        self.vol.write(s, &tmp).map_err(io_err)
    }
}

impl Export for VolumeExport {
    fn size(&self) -> u64 {
        // Live: a grown array shows its new size to new connections.
        self.vol.capacity()
    }
    fn block_size(&self) -> u64 {
        self.min_block
    }
    fn preferred_block(&self) -> u64 {
        self.preferred
    }
    fn unaligned_ok(&self) -> bool {
        true
    }
    fn serve_inline(&self) -> bool {
        self.vol.in_memory()
    }
    fn read(&self, off: u64, buf: &mut [u8]) -> io::Result<()> {
        let t = self.arrived(Op::Read, off, buf.len() as u64);
        let r = self.read_inner(off, buf);
        self.served(Op::Read, off, buf.len() as u64, t);
        r
    }
    fn write(&self, off: u64, data: &[u8]) -> io::Result<()> {
        let t = self.arrived(Op::Write, off, data.len() as u64);
        let r = self.write_inner(off, data);
        self.served(Op::Write, off, data.len() as u64, t);
        r
    }
    fn flush(&self) -> io::Result<()> {
        self.vol.flush().map_err(io_err)
    }
    /// The whole blocks inside the range are the volume's to drop
    /// ([`Volume::discard`]: a hint that fixed arrays keep their bytes at).
    fn trim(&self, off: u64, len: u64) -> io::Result<()> {
        let (s, e) = self.inside(off, len);
        if e > s {
            self.vol.discard(s, e - s).map_err(io_err)?;
        }
        Ok(())
    }
    fn write_zeroes(&self, off: u64, len: u64) -> io::Result<()> {
        let t = self.arrived(Op::Write, off, len);
        mosaic_nbd::export::zero_fill(off, len, (4u64 << 20).max(self.preferred), |o, z| self.write_inner(o, z))?;
        self.served(Op::Write, off, len, t);
        Ok(())
    }
    /// A volume whose discard leaves zeros for good (a tier) drops the
    /// whole blocks and writes zeros over the parts of blocks at the ends;
    /// any other writes zeros.  Counted and recorded as a write either way
    /// (a replay of the recording writes the zeros).
    fn zero_as_hole(&self, off: u64, len: u64) -> io::Result<()> {
        if !self.vol.discard_zeroes() {
            return self.write_zeroes(off, len);
        }
        let (s, e) = self.inside(off, len);
        if e <= s {
            return self.write_zeroes(off, len);
        }
        let t = self.arrived(Op::Write, off, len);
        let chunk = (4u64 << 20).max(self.preferred);
        mosaic_nbd::export::zero_fill(off, s - off, chunk, |o, z| self.write_inner(o, z))?;
        self.vol.discard(s, e - s).map_err(io_err)?;
        mosaic_nbd::export::zero_fill(e, off + len - e, chunk, |o, z| self.write_inner(o, z))?;
        self.served(Op::Write, off, len, t);
        Ok(())
    }
    fn fast_zero_as_hole(&self) -> bool {
        self.vol.discard_zeroes()
    }
    /// The volume's holes (never written: DVS, tier) for `base:allocation`,
    /// over the whole blocks covering the request and at most
    /// [`ALLOCATION_MAX`] of them (the client asks again for the rest).
    fn extents(&self, off: u64, len: u64) -> io::Result<Vec<Extent>> {
        let (s, l) = self.cover(off, len);
        let l = l.min(ALLOCATION_MAX - ALLOCATION_MAX % self.block);
        let runs = self.vol.allocation(s, l).map_err(io_err)?;
        Ok(clip(&runs, off - s, len))
    }
}

/// Most bytes one BLOCK_STATUS request looks up (a tier array looks up
/// each block in its map, under the policy's lock).
const ALLOCATION_MAX: u64 = 256 << 20;

/// `runs` (bytes, hole) without their first `skip` bytes and cut at `len`.
fn clip(runs: &[(u64, bool)], mut skip: u64, len: u64) -> Vec<Extent> {
    let mut left = len;
    let mut out = Vec::new();
    for &(n, hole) in runs {
        let dropped = n.min(skip);
        skip -= dropped;
        let n = (n - dropped).min(left);
        if n > 0 {
            out.push(if hole { Extent::hole(n) } else { Extent::data(n) });
            left -= n;
        }
    }
    out
}

/// Create the demo array the first time; its spec.
fn demo_array() -> Result<String> {
    let dir = PathBuf::from(DEMO_DIR);
    if ArraySpec::member_file(&dir, 0).exists() {
        tracing::info!("mosaic serve: reusing the demo array in ./{DEMO_DIR}");
        return Ok(DEMO_DIR.into());
    }
    // With a write-ahead journal, like `mosaic create` on a directory, and
    // its guard: nothing of another array in the directory is written over.
    let journal = dir.join(mosaic_array::array::JOURNAL_FILE);
    for p in [dir.as_path(), journal.as_path()] {
        crate::util::check_output(p, false)
            .map_err(|e| anyhow::anyhow!("mosaic serve without -a creates its demo array in ./{DEMO_DIR}, but {e}; move it away, or serve that array with -a"))?;
    }
    std::fs::create_dir_all(&dir).with_context(|| format!("creating ./{DEMO_DIR}"))?;
    let opts =
        CreateOptions { level: Level::Raid5, members: Some(5), member_size: Some(256 << 20), unit: 64 << 10, block: 4096, force: false, assume_clean: false };
    let arr = Array::create_journaled(&ArraySpec::Dir(dir), &opts, Some((journal.as_path(), 64 << 20)))?;
    arr.close()?;
    tracing::info!("mosaic serve: created a raid5 demo array of 5 x 256 MiB members (and a 64 MiB journal) in ./{DEMO_DIR}");
    Ok(DEMO_DIR.into())
}

/// Worker threads when `--workers` is not given.  A request to a remote
/// member waits on the network, so many are in flight (32).  On an array
/// in RAM a request that reaches a worker (one too large to serve on the
/// connection's reader) is pure CPU: more workers than `cores` only
/// preempt each other, and one preempted while it holds a lock (the
/// journal's ring, a stripe) holds up the rest (1 MiB writes at queue
/// depth 8 through `mosaic serve` on 2 cores, alternated: 4 workers
/// ~1,100 MiB/s, 2 workers ~1,220: medians of 12).  Otherwise 4,
/// so requests overlap their waits on the drives.
fn default_workers(remote: bool, in_memory: bool, cores: usize) -> usize {
    match (remote, in_memory) {
        (true, _) => 32,
        (false, true) => cores.max(1),
        (false, false) => 4,
    }
}

/// CPU cores this process may run on.
fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

impl ServeArgs {
    /// `--listen`, or its default.
    pub fn listen_addr(&self) -> &str {
        self.listen.as_deref().unwrap_or(DEFAULT_LISTEN)
    }
}

/// `--listen`'s default.
const DEFAULT_LISTEN: &str = "127.0.0.1:10809";

/// The sockets passed by socket activation, if this process was started
/// that way; an option that names another socket (or another server) is
/// an error then, as nbdkit's.  Call before any thread starts: the
/// variables are removed.
fn activation(a: &ServeArgs) -> Result<Option<Listener>> {
    let Some(passed) = mosaic_nbd::activation::take()? else {
        return Ok(None);
    };
    let given = [("--listen", a.listen.is_some()), ("--socket", a.socket.is_some()), ("--run", a.run.is_some()), ("--config", a.config.is_some())];
    if let Some((flag, _)) = given.iter().find(|g| g.1) {
        bail!("{flag}: this server was started by socket activation (LISTEN_PID, LISTEN_FDS) and serves on the sockets passed to it ({})", passed.describe());
    }
    Ok(Some(passed))
}

/// The sockets passed to the server, or the one it binds.
fn listener(a: &ServeArgs, passed: Option<Listener>) -> Result<Listener> {
    if let Some(l) = passed {
        tracing::info!("mosaic serve: socket activation: {}", l.describe());
        return Ok(l);
    }
    Ok(match &a.socket {
        Some(p) => Listener::bind_unix(p).with_context(|| format!("binding {}", p.display()))?,
        None => Listener::bind_tcp(a.listen_addr()).with_context(|| format!("listening on {}", a.listen_addr()))?,
    })
}

/// Run `idle_work` whenever it has something to do, until `stop`; the
/// number of steps run.
fn idle_thread(vol: Arc<dyn Volume>, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<Result<u64, VolumeError>> {
    std::thread::spawn(move || {
        let mut steps = 0;
        while !stop.load(Ordering::Relaxed) {
            if vol.idle_work()? {
                steps += 1;
            } else {
                // Unparked at the stop.
                std::thread::park_timeout(Duration::from_millis(50));
            }
        }
        Ok(steps)
    })
}

/// Log the members `vol` failed after I/O errors since the last call
/// (`seen` of them were logged before), each with a timestamp, its index,
/// path and error.
fn log_new_failures(vol: &dyn Volume, seen: &mut usize, events: &crate::events::Events) {
    let failed = vol.auto_failed();
    if failed.len() <= *seen {
        return;
    }
    let info = vol.info();
    for (idx, err) in &failed[*seen..] {
        let path = info.members.iter().find(|m| m.index == *idx).map_or("?", |m| m.path.as_str());
        let after = crate::control::after_failure(&info);
        let detail = format!("member {idx} ({path}) failed while serving: {err}{after}");
        events.emit(crate::events::Event { kind: crate::events::MEMBER_FAILED, member: Some(*idx), detail });
    }
    *seen = failed.len();
}

/// The events of the open: stale members, journal replays, other warnings.
fn open_events(vol: &dyn Volume, info: &mosaic_volume::VolumeInfo, events: &crate::events::Events) {
    use crate::events::{Event, JOURNAL_REPLAY, MEMBER_STALE, OPEN_WARNING};
    for w in vol.warnings() {
        let detail = format!("warning at open: {w}");
        let e = match mosaic_format::fresh::stale_member(&w) {
            // An inner array's member (of a tier, a check drive array) is
            // not this array's index: the detail says which it is.
            Some(s) => Event { kind: MEMBER_STALE, member: (!s.nested).then_some(s.member), detail },
            None => Event { kind: OPEN_WARNING, member: None, detail },
        };
        events.emit(e);
    }
    let mut replays = Vec::new();
    journal_replays(&info.detail, "", &mut replays);
    for (at, r) in replays {
        let n = |k: &str| r[k].as_u64().unwrap_or(0);
        let whose = if at.is_empty() { String::new() } else { format!(" ({at})") };
        let detail = format!("journal replayed at open{whose}: {} records, {} writes, {}", n("records"), n("ops"), human(n("bytes")));
        events.emit(Event { kind: JOURNAL_REPLAY, member: None, detail });
    }
}

/// The journal replays that wrote something, anywhere in a volume's info
/// detail (an array's own `journal_replayed`, a tier's or remapped array's
/// inner arrays'), each with where it was found.
fn journal_replays<'a>(v: &'a serde_json::Value, at: &str, out: &mut Vec<(String, &'a serde_json::Value)>) {
    let serde_json::Value::Object(m) = v else { return };
    for (k, x) in m {
        if k == "journal_replayed" {
            if x["records"].as_u64().is_some_and(|n| n > 0) {
                out.push((at.to_string(), x));
            }
        } else if x.is_object() {
            journal_replays(x, &if at.is_empty() { k.clone() } else { format!("{at}/{k}") }, out);
        }
    }
}

/// Watch for members failed while serving until `stop`, logging each as it
/// happens; the number failed in all.
fn watch_thread(vol: Arc<dyn Volume>, stop: Arc<AtomicBool>, events: Arc<crate::events::Events>) -> std::thread::JoinHandle<usize> {
    std::thread::spawn(move || {
        let mut seen = 0;
        while !stop.load(Ordering::Relaxed) {
            log_new_failures(vol.as_ref(), &mut seen, &events);
            // Unparked at the stop.
            std::thread::park_timeout(Duration::from_millis(100));
        }
        log_new_failures(vol.as_ref(), &mut seen, &events);
        seen
    })
}

pub fn run(a: ServeArgs) -> Result<i32> {
    // A client that disconnects while a reply is pending must not kill the
    // server: main() restores SIGPIPE's default (fatal) disposition for the
    // other commands; here a broken connection is that connection's error.
    // SAFETY: setting a signal disposition; no handler runs our code.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_IGN);
    }
    let passed = activation(&a)?;
    if let Some(file) = &a.config {
        return crate::serve_config::run(file);
    }
    // Signals first: a Ctrl-C during a long open still stops cleanly.
    let stop = mosaic_nbd::signals::stop_on_signals().context("installing signal handlers")?;
    if a.exit_with_parent {
        crate::serve_run::exit_with_parent(&stop);
    }
    // Certificates are read before the array is opened.
    let tls = tls(&a)?;
    if let Some(r) = &a.record {
        crate::util::check_output(r, a.force)?;
    }
    // A pid file goes over an array's member or journal only when forced.
    if let Some(p) = &a.pidfile {
        crate::util::check_output(p, a.force)?;
    }
    let spec = match (&a.array, a.demo) {
        (_, true) => demo_array()?,
        (Some(s), false) => s.clone(),
        (None, false) => bail!("give -a SPEC or --demo"),
    };
    if !a.read_only {
        mosaic_volume::refuse_part_of(&spec)?;
    }
    let vol: Arc<dyn Volume> = match &a.cache {
        None => mosaic_volume::open(&spec, !a.read_only)?.into(),
        Some(name) => {
            let cfg = CacheConfig::uniform(CachePolicy::parse(name)?, a.cache_size);
            let v = mosaic_volume::open_cached(&spec, !a.read_only, cfg)?;
            let write_back = v.info().detail["cache"]["write_back"] == true;
            tracing::info!(
                "mosaic serve: {} cache, {} per structure, {}",
                name,
                human(a.cache_size),
                if write_back { "write-back through the journal" } else { "write-through (no journal)" }
            );
            v.into()
        }
    };
    let vinfo = vol.info();
    let uuid = vinfo.uuid.as_str();
    // Warnings at open (stale members, ...) and journal replays are events.
    let events = Arc::new(crate::events::Events::new(uuid, a.on_event.clone()));
    open_events(vol.as_ref(), &vinfo, &events);
    let recorder = a.record.as_ref().map(Recorder::create).transpose()?;
    let monitor = (a.monitor > 0).then(|| Ring::new(a.monitor).map(Arc::new)).transpose().context("--monitor")?;
    let export = Arc::new(VolumeExport::new(vol.clone(), a.min_block, recorder, monitor)?);
    let listener = listener(&a, passed)?;
    let cfg = ServerConfig {
        name: a.export.clone(),
        description: format!("mosaic {} array, {} members", vinfo.level, vinfo.members.len()),
        read_only: a.read_only,
        workers: a.workers.unwrap_or_else(|| default_workers(vinfo.members.iter().any(|m| m.remote.is_some()), vol.in_memory(), cores())).max(1),
        max_connections: a.max_connections as usize,
        handshake_timeout: a.handshake_timeout,
        io_timeout: a.io_timeout,
        log: !a.quiet,
        tls,
        ..ServerConfig::default()
    };
    let info = mosaic_nbd::export_info(export.as_ref(), &cfg);
    tracing::info!(
        array = %uuid,
        "mosaic serve: {} {} array, {} ({} bytes), block {} preferred {} max {}{}",
        vinfo.level,
        human(vinfo.stripe_unit),
        human(info.size),
        info.size,
        info.min_block,
        info.pref_block,
        info.max_block,
        if a.read_only { ", read-only" } else { "" }
    );
    // Background work (DVS: garbage collection) while the volume is idle.
    let idle_stop = Arc::new(AtomicBool::new(false));
    let idle = idle_thread(vol.clone(), idle_stop.clone());
    let watch = watch_thread(vol.clone(), idle_stop.clone(), events.clone());
    let adapt = adapt_job(&a, &vol, export.monitor(), &idle_stop)?;
    // The control channel: info, status, fail, flush, stop on the live array.
    // Clients find the socket by the UUID on the disks `-a` names (for a
    // tier or remapped array, its first inner array's).
    let (key, named_by) = crate::control::served_as(&spec, &vinfo.uuid);
    let control = crate::control::serve(vol.clone(), &key, named_by, stop.clone(), crate::control::Policy { rate: a.maint_rate, re_add: a.re_add == ReAdd::Auto, scrub_every: a.scrub_every }, events.clone(), export.stats.clone())?;
    tracing::info!(array = %uuid, "mosaic serve: control socket {}", control.path.display());
    // Scripts and tests wait for this message (and read the port from it).
    let uri = crate::serve_run::client_uri(&listener, &a.export, cfg.tls.as_ref());
    if let Some(t) = &cfg.tls {
        tracing::info!(array = %uuid, "mosaic serve: TLS {} with {}{}", if t.mode == mosaic_nbd::TlsMode::Require { "required" } else { "offered" }, t.describe(), if t.verify_peer { ", client certificates checked" } else { "" });
    }
    tracing::info!(array = %uuid, "mosaic serve: listening on {uri}");
    if let Some(p) = &a.pidfile {
        crate::serve_run::write_pidfile(p)?;
    }
    let captive = a.run.as_deref().map(|c| crate::serve_run::start(c, &listener, &a.export, cfg.tls.as_ref(), stop.clone())).transpose()?;
    let served = mosaic_nbd::serve(&listener, export.clone(), &cfg, stop.clone());
    drop(listener);
    // The command ended (and stopped the server), or is stopped now.
    let code = captive.map(crate::serve_run::Captive::finish).transpose()?.unwrap_or(0);
    stop.store(true, Ordering::Relaxed);
    control.finish();
    idle_stop.store(true, Ordering::Relaxed);
    // Woken, not waited out: a stop takes as long as the flush, not the
    // threads' periods.
    for t in [idle.thread(), watch.thread()].into_iter().chain(adapt.as_ref().map(|j| j.thread())) {
        t.unpark();
    }
    let idle_result = idle.join().map_err(|_| anyhow::anyhow!("the idle-work thread panicked"))?;
    let failed = watch.join().map_err(|_| anyhow::anyhow!("the member-failure watch thread panicked"))?;
    if let Some(j) = adapt {
        let d = j.join().map_err(|_| anyhow::anyhow!("the adapt job panicked"))?.context("the adapt job")?;
        tracing::info!(array = %uuid, "mosaic serve: adapt: {} rounds, {} units moved ({}), {} requests not seen (ring overrun)", d.rounds, d.moves, human(d.bytes), d.lost);
    }
    let stats = served?;
    tracing::info!(
        array = %uuid,
        "mosaic serve: stopping: {} connections{}, {} requests, {} errors, {failed} member(s) failed while serving{}; flushing",
        stats.connections,
        if stats.refused > 0 { format!(" ({} refused: server busy)", stats.refused) } else { String::new() },
        stats.requests,
        stats.errors,
        match &idle_result {
            Ok(n) if *n > 0 => format!(", {n} background steps (garbage collection)"),
            _ => String::new(),
        }
    );
    if let Some(ring) = export.monitor() {
        tracing::info!(array = %uuid, "mosaic serve: monitored {} requests (the newest {} kept in memory)", ring.pushed(), ring.pushed().min(ring.capacity()));
        // A remapped array keeps them for `mosaic adapt` without --trace.
        if vol.as_remap().is_some() && !a.read_only && ring.pushed() > 0 {
            let dir = std::path::Path::new(a.array.as_deref().unwrap_or_default());
            match crate::serve_adapt::save_ring(dir, &ring) {
                Ok(n) => tracing::info!(array = %uuid, "mosaic serve: {n} monitored requests saved to {} (mosaic adapt reads them)", dir.join(crate::serve_adapt::MONITOR_FILE).display()),
                Err(e) => tracing::warn!(array = %uuid, "mosaic serve: could not save the monitored requests: {e}"),
            }
        }
    }
    if let Some(rec) = &export.recorder {
        let n = rec.finish().context("writing the --record trace")?;
        tracing::info!(array = %uuid, "mosaic serve: recorded {n} requests to {}", a.record.as_ref().map(|p| p.display().to_string()).unwrap_or_default());
    }
    vol.flush()?;
    vol.close()?;
    // Every event's program has run before the server exits.
    if let Ok(ev) = Arc::try_unwrap(events) {
        ev.finish();
    }
    idle_result.context("background work while idle")?;
    tracing::info!(array = %uuid, "mosaic serve: array flushed and closed clean");
    Ok(code)
}

/// The `--adapt-every` job, on a remapped array with the monitor on.
fn adapt_job(a: &ServeArgs, vol: &Arc<dyn Volume>, ring: Option<Arc<Ring>>, stop: &Arc<AtomicBool>) -> Result<Option<std::thread::JoinHandle<Result<crate::serve_adapt::Done>>>> {
    let Some(every) = a.adapt_every else { return Ok(None) };
    if vol.as_remap().is_none() {
        bail!("--adapt-every is for remapped arrays (mosaic create --level remap)");
    }
    let Some(ring) = ring else { bail!("--adapt-every learns from the monitor ring: drop --monitor 0") };
    if a.read_only {
        bail!("--adapt-every moves data: not with --read-only");
    }
    let max_move = a.adapt_max_move.as_deref().map(|s| crate::adapt_job::parse_max_move(s, vol.capacity())).transpose()?;
    let opts = crate::adapt_job::PlanOpts { threshold: a.adapt_threshold, window_ns: 1_000_000, max_units: 64, max_move, threads: 1 };
    let cfg = crate::serve_adapt::Every { every, opts, rate: a.adapt_rate, min_requests: a.adapt_min_requests };
    Ok(Some(crate::serve_adapt::spawn(vol.clone(), ring, cfg, stop.clone())))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::net::TcpStream;

    #[test]
    fn workers_default_to_one_a_core_in_ram_and_more_where_requests_wait() {
        assert_eq!(default_workers(false, true, 2), 2, "in RAM: one a core");
        assert_eq!(default_workers(false, true, 16), 16);
        assert_eq!(default_workers(false, true, 0), 1, "never none");
        assert_eq!(default_workers(false, false, 2), 4, "drives: requests overlap their waits");
        assert_eq!(default_workers(true, false, 2), 32, "remote members: many in flight");
        assert_eq!(default_workers(true, true, 2), 32);
    }

    #[test]
    fn allocation_runs_are_clipped_to_the_request_inside_its_blocks() {
        let runs = [(4096, true), (8192, false), (4096, true)];
        assert_eq!(clip(&runs, 0, 16384), [Extent::hole(4096), Extent::data(8192), Extent::hole(4096)]);
        // A request from byte 512 of the first block to byte 1024 of the last.
        assert_eq!(clip(&runs, 512, 4096 - 512 + 8192 + 1024), [Extent::hole(3584), Extent::data(8192), Extent::hole(1024)]);
        assert_eq!(clip(&runs, 4096 + 100, 200), [Extent::data(200)]);
        assert_eq!(clip(&runs, 0, 1 << 20), [Extent::hole(4096), Extent::data(8192), Extent::hole(4096)], "runs may cover less");
    }

    use mosaic_nbd::proto::*;
    use mosaic_nbd::Command;

    fn array(dir: &std::path::Path) -> Arc<dyn Volume> {
        let opts =
            CreateOptions { level: Level::Raid5, members: Some(4), member_size: Some(8 << 20), unit: 16 << 10, block: 4096, force: false, assume_clean: false };
        Arc::new(Array::create(&ArraySpec::Dir(dir.to_path_buf()), &opts).unwrap())
    }

    fn export(vol: &Arc<dyn Volume>, recorder: Option<Recorder>, ring: Option<Arc<Ring>>) -> Arc<VolumeExport> {
        Arc::new(VolumeExport::new(vol.clone(), None, recorder, ring).unwrap())
    }

    fn pattern(seed: u8, len: usize) -> Vec<u8> {
        (0..len).map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed)).collect()
    }

    #[test]
    fn timestamps_are_rfc3339_utc() {
        assert_eq!(rfc3339(Duration::from_millis(1_700_000_000_123)), "2023-11-14T22:13:20.123Z");
        assert_eq!(rfc3339(Duration::ZERO), "1970-01-01T00:00:00.000Z");
        let now = now_rfc3339();
        assert_eq!(now.len(), 24, "{now}");
        assert!(now.ends_with('Z') && now.as_bytes()[10] == b'T', "{now}");
    }

    #[test]
    fn seconds_parse_and_refuse_nonsense() {
        assert_eq!(seconds("10"), Ok(Duration::from_secs(10)));
        assert_eq!(seconds("0.25"), Ok(Duration::from_millis(250)));
        assert_eq!(seconds("x").unwrap_err(), "\"x\" is not a number of seconds");
        assert_eq!(seconds("0").unwrap_err(), "\"0\": give a positive number of seconds");
        assert_eq!(seconds("-1").unwrap_err(), "\"-1\": give a positive number of seconds");
    }

    #[test]
    fn the_default_minimum_block_is_512() {
        let dir = tempfile::tempdir().unwrap();
        let arr = array(dir.path());
        let ex = export(&arr, None, None);
        assert_eq!((ex.block_size(), ex.block), (512, 4096));
        let info = mosaic_nbd::export_info(ex.as_ref(), &ServerConfig::default());
        assert_eq!(info.min_block, 512);
        assert!(VolumeExport::new(arr.clone(), Some(8192), None, None).is_err());
        assert_eq!(VolumeExport::new(arr, Some(1), None, None).unwrap().block_size(), 1);
    }

    #[test]
    fn sub_block_requests_read_modify_write() {
        let dir = tempfile::tempdir().unwrap();
        let arr = array(dir.path());
        let ex = export(&arr, None, None);
        ex.write(0, &pattern(1, 16384)).unwrap();
        ex.write(1000, &pattern(2, 3000)).unwrap();
        let mut back = vec![0u8; 16384];
        ex.read(0, &mut back).unwrap();
        let mut want = pattern(1, 16384);
        want[1000..4000].copy_from_slice(&pattern(2, 3000));
        assert_eq!(back, want);
        let mut part = vec![0u8; 777];
        ex.read(4001, &mut part).unwrap();
        assert_eq!(part, &want[4001..4778]);
        ex.write_zeroes(512, 1024).unwrap();
        ex.read(0, &mut back).unwrap();
        want[512..1536].fill(0);
        assert_eq!(back, want);
        // Concurrent aligned and unaligned writes to disjoint bytes of the
        // same blocks lose nothing.
        std::thread::scope(|s| {
            for t in 0..4u64 {
                let ex = ex.clone();
                s.spawn(move || {
                    for i in 0..50u64 {
                        let off = 65536 + i * 4096 + t * 1024;
                        ex.write(off, &[t as u8 + 1; 1024]).unwrap();
                    }
                });
            }
        });
        let mut all = vec![0u8; 50 * 4096];
        ex.read(65536, &mut all).unwrap();
        for (i, b) in all.iter().enumerate() {
            assert_eq!(*b as usize, (i % 4096) / 1024 + 1, "byte {i}");
        }
    }

    #[test]
    fn a_dvs_volume_serves_sub_block_requests_and_collects_garbage_when_idle() {
        let dir = tempfile::tempdir().unwrap();
        let spec =
            mosaic_dvs::files::CreateSpec { members: 4, member_size: 16 << 20, chunk: 64 << 10, block: 4096, zone_size: 1 << 20, parity: 1, cache_chunks: 0 };
        drop(mosaic_dvs::files::create_in_dir(dir.path(), &spec, false).unwrap());
        let vol: Arc<dyn Volume> = mosaic_volume::open(dir.path().to_str().unwrap(), true).unwrap().into();
        vol.set_idle_after(Duration::from_millis(20));
        let ex = export(&vol, None, None);
        assert_eq!(ex.preferred_block(), 64 << 10);
        let stop = Arc::new(AtomicBool::new(false));
        let idle = idle_thread(vol.clone(), stop.clone());
        let mut want = vec![0u8; 256 << 10];
        for i in 0..40usize {
            let (off, len) = ((i * 7919) % (200 << 10), 1000 + i * 37);
            let p = pattern(i as u8, len);
            ex.write(off as u64, &p).unwrap();
            want[off..off + len].copy_from_slice(&p);
            if i % 10 == 0 {
                std::thread::sleep(Duration::from_millis(120));
            }
        }
        std::thread::sleep(Duration::from_millis(200));
        stop.store(true, Ordering::Relaxed);
        idle.join().unwrap().unwrap();
        let mut back = vec![0u8; want.len()];
        ex.read(0, &mut back).unwrap();
        assert!(back == want, "bytes differ");
        vol.flush().unwrap();
        vol.close().unwrap();
    }

    /// A hand-written client: GO, then simple requests.
    fn client(port: u16) -> TcpStream {
        let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
        s.set_read_timeout(Some(std::time::Duration::from_secs(20))).unwrap();
        let mut g = [0u8; 18];
        s.read_exact(&mut g).unwrap();
        s.write_all(&(FLAG_C_FIXED_NEWSTYLE | FLAG_C_NO_ZEROES).to_be_bytes()).unwrap();
        let mut o = IHAVEOPT.to_be_bytes().to_vec();
        o.extend_from_slice(&OPT_GO.to_be_bytes());
        o.extend_from_slice(&6u32.to_be_bytes());
        o.extend_from_slice(&[0, 0, 0, 0, 0, 0]);
        s.write_all(&o).unwrap();
        loop {
            let mut h = [0u8; 20];
            s.read_exact(&mut h).unwrap();
            let ty = u32::from_be_bytes(h[12..16].try_into().unwrap());
            let mut d = vec![0u8; u32::from_be_bytes(h[16..20].try_into().unwrap()) as usize];
            s.read_exact(&mut d).unwrap();
            if ty == REP_ACK {
                return s;
            }
            assert_eq!(ty, REP_INFO);
        }
    }

    fn request(s: &mut TcpStream, cmd: Command, offset: u64, length: u32, payload: &[u8]) -> (u32, Vec<u8>) {
        let r = mosaic_nbd::Request { flags: 0, cmd, cookie: 5, offset, length: length as u64 };
        s.write_all(&r.encode()).unwrap();
        s.write_all(payload).unwrap();
        let mut h = [0u8; 16];
        s.read_exact(&mut h).unwrap();
        let err = u32::from_be_bytes(h[4..8].try_into().unwrap());
        let mut data = Vec::new();
        if cmd == Command::Read && err == 0 {
            data.resize(length as usize, 0);
            s.read_exact(&mut data).unwrap();
        }
        (err, data)
    }

    #[test]
    fn serve_records_a_trace_that_reads_back() {
        let dir = tempfile::tempdir().unwrap();
        let arr = array(&dir.path().join("arr"));
        let trace = dir.path().join("served.csv");
        let ring = Arc::new(Ring::new(64).unwrap());
        let ex = export(&arr, Some(Recorder::create(&trace).unwrap()), Some(ring.clone()));
        let l = Listener::bind_tcp("127.0.0.1:0").unwrap();
        let port = l.port().unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let (ex2, stop2) = (ex.clone(), stop.clone());
        let h = std::thread::spawn(move || {
            let cfg = ServerConfig { log: false, ..ServerConfig::default() };
            mosaic_nbd::serve(&l, ex2, &cfg, stop2).unwrap()
        });
        let mut c = client(port);
        for i in 0..10u64 {
            assert_eq!(request(&mut c, Command::Write, i * 8192, 8192, &pattern(i as u8, 8192)).0, 0);
        }
        assert_eq!(request(&mut c, Command::Flush, 0, 0, &[]).0, 0);
        for i in 0..10u64 {
            let (err, data) = request(&mut c, Command::Read, i * 8192, 8192, &[]);
            assert_eq!(err, 0);
            assert_eq!(data, pattern(i as u8, 8192));
        }
        let (err, _) = request(&mut c, Command::Read, arr.capacity(), 4096, &[]);
        assert_eq!(err, EINVAL);
        stop.store(true, Ordering::Relaxed);
        let stats = h.join().unwrap();
        assert_eq!(stats.requests, 22);
        assert_eq!(ex.recorder.as_ref().unwrap().finish().unwrap(), 20);
        let st = mosaic_trace::stats(mosaic_trace::open(&trace, &mosaic_trace::TraceOptions::default()).unwrap()).unwrap();
        assert_eq!(st.requests, 20);
        assert_eq!(st.reads, 10);
        let ops: Vec<(Op, u64, u64)> = ring.snapshot().iter().map(|r| (r.op, r.offset, r.len)).collect();
        let want: Vec<(Op, u64, u64)> = [Op::Write, Op::Read].iter().flat_map(|&op| (0..10u64).map(move |i| (op, i * 8192, 8192))).collect();
        assert_eq!(ops, want);
    }

    #[test]
    fn requests_served_land_in_the_monitor_ring() {
        let dir = tempfile::tempdir().unwrap();
        let arr = array(dir.path());
        let ring = Arc::new(Ring::new(4).unwrap());
        let ex = export(&arr, None, Some(ring.clone()));
        assert!(Arc::ptr_eq(&ex.monitor().unwrap(), &ring));
        assert!(export(&arr, None, None).monitor().is_none());
        let began = Instant::now();
        ex.write(0, &pattern(1, 16384)).unwrap();
        ex.write(1000, &pattern(2, 3000)).unwrap();
        ex.read(4001, &mut [0u8; 777]).unwrap();
        ex.write_zeroes(512, 1024).unwrap();
        ex.read(0, &mut [0u8; 8192]).unwrap();
        let reqs = ring.snapshot();
        let ops: Vec<(Op, u64, u64)> = reqs.iter().map(|r| (r.op, r.offset, r.len)).collect();
        // The newest four of five: the ring holds 4.
        assert_eq!(ops, [(Op::Write, 1000, 3000), (Op::Read, 4001, 777), (Op::Write, 512, 1024), (Op::Read, 0, 8192)]);
        let times: Vec<u64> = reqs.iter().map(|r| r.time_ns).collect();
        assert!(times.windows(2).all(|w| w[0] <= w[1]), "{times:?}");
        assert!(times[3] <= ex.start.elapsed().as_nanos() as u64 && times[0] >= (began - ex.start).as_nanos() as u64, "{times:?}");
        assert_eq!((ring.pushed(), ring.take_since(0).lost), (5, 1));
    }
}
