//! The control channel of a running `mosaic serve`: a unix socket per
//! served array, owner-only, through which `info`, `status`, `fail`,
//! `replace`, `rebuild`, `scrub [--repair]`, `grow`, `add`, `remove`,
//! `flush` and `stop` act on
//! the live array (as mdadm acts on a running md device).  Without a
//! server they act directly, so the user types the same command either
//! way.  Rebuild and scrub run while clients keep reading and writing
//! (they lock one region at a time) and yield to them through
//! `serve --maint-rate`; `status` shows their progress, rate and ETA.
//!
//! ```text
//!   /run/mosaic/ (root), $XDG_RUNTIME_DIR (or /tmp)/mosaic-UID/ (others)   mode 0700
//!       ARRAY-UUID.sock                      mode 0600, peers of the same uid (or root) only
//!       ARRAY-UUID.lock                      mode 0600, flock held by the socket's server
//!
//!   client ── one JSON line {"cmd":"fail","member":1} ──▶ serve's control thread
//!          ◀── one JSON line {"ok":true,"body":...} or {"ok":false,"error":"..."}
//!
//!   the array is found by what is on its disks: -a SPEC -> guard::identify
//!   -> the array UUID -> its sockets; no socket (or a dead one): act directly
//!
//!   a copy of an array (cp -a) has its UUID but other files, and is its own
//!   array: the client first asks {"cmd":"holds","dev":D,"ino":I} with the
//!   file (or nested directory) that named the UUID, and a server answers
//!   for the array only when that is one of its members or their directory.
//!   A copy served beside its original listens on ARRAY-UUID.N.sock.  The
//!   request itself names the file too ("of"): a server that took the
//!   socket over in between answers "other" and does nothing.  A socket
//!   whose server is stopping (it resets the connection) is passed over:
//!   the next socket of the UUID is tried.
//!
//!   a server claims slot N by taking the lock ARRAY-UUID[.N].lock (flock,
//!   without waiting, held for its life; the file is never removed): only
//!   the holder removes a dead server's socket file and binds there, so
//!   two servers of copies started at once cannot both find a slot free,
//!   and one cannot remove the other's live socket.  A locked slot is
//!   passed over (its server is starting or stopping) unless its server
//!   answers that it holds this array (then serving is refused).
//! ```

use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::io::AsRawFd;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use anyhow::{anyhow, bail, Context, Result};
use serde::{Deserialize, Serialize};

use mosaic_core::MemberState;

use crate::events::{self, Event};
use mosaic_volume::{guard, Volume};

/// A request on the control channel.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(tag = "cmd", rename_all = "lowercase")]
pub enum Request {
    Info,
    Status,
    Fail { member: usize },
    Replace {
        member: usize,
        /// None: the first hot spare (`replace --hot` only).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        drive: Option<PathBuf>,
        force: bool,
        /// The host label of the new drive (its failure domain).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        host: Option<String>,
        /// A working member copied onto the drive (`replace --hot`).
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        hot: bool,
    },
    Rebuild,
    Scrub { repair: bool },
    /// End the scrub in progress (ZFS's `zpool scrub -s`).
    CancelScrub,
    Flush,
    Stop,
    /// Add members and restripe (no drives: resume a grow).
    Grow { drives: Vec<PathBuf>, force: bool, backup_file: Option<PathBuf> },
    /// Take more of each member (`grow --size`; `None`: all the smallest
    /// member holds).
    GrowSize { size: Option<u64> },
    /// Change the level where no data moves (`grow --level`), adding
    /// these drives (whose rebuild follows) or keeping the first `keep`
    /// members.
    Takeover { level: String, drives: Vec<PathBuf>, force: bool, keep: Option<usize> },
    /// Make exactly these mirror members write-mostly.
    WriteMostly { members: Vec<usize> },
    /// Add hot spares: all of them, or none when one is refused.
    AddSpare { drives: Vec<PathBuf>, force: bool },
    /// Remove hot spares: all of them, or none when one is not a spare.
    RemoveSpare { drives: Vec<PathBuf> },
    /// Whether this server's array is the one whose member (or nested
    /// array's directory) is the file `dev`/`ino`: a copy of an array has
    /// its UUID but other files.
    Holds { dev: u64, ino: u64 },
}

/// Rebuild or scrub in progress, for `status`.
#[derive(Debug, Clone, Serialize)]
pub struct Maint {
    pub what: &'static str,
    pub done_bytes: u64,
    pub total_bytes: u64,
    pub mib_per_s: f64,
    pub eta_s: f64,
    #[serde(skip)]
    started: std::time::Instant,
}

/// Client requests a server has served, for `status` (rates come from
/// two samples: `status --watch`, or one sample and the server's age).
#[derive(Debug)]
pub struct ClientStats {
    reads: AtomicU64,
    writes: AtomicU64,
    read_bytes: AtomicU64,
    write_bytes: AtomicU64,
    started: std::time::Instant,
}

impl Default for ClientStats {
    fn default() -> ClientStats {
        let z = || AtomicU64::new(0);
        ClientStats { reads: z(), writes: z(), read_bytes: z(), write_bytes: z(), started: std::time::Instant::now() }
    }
}

impl ClientStats {
    /// One request served.
    pub fn count(&self, op: mosaic_trace::Op, len: u64) {
        let (n, b) = match op {
            mosaic_trace::Op::Read => (&self.reads, &self.read_bytes),
            mosaic_trace::Op::Write => (&self.writes, &self.write_bytes),
        };
        n.fetch_add(1, Ordering::Relaxed);
        b.fetch_add(len, Ordering::Relaxed);
    }

    fn json(&self) -> serde_json::Value {
        let g = |a: &AtomicU64| a.load(Ordering::Relaxed);
        serde_json::json!({
            "reads": g(&self.reads), "writes": g(&self.writes),
            "read_bytes": g(&self.read_bytes), "write_bytes": g(&self.write_bytes),
            "seconds": self.started.elapsed().as_secs_f64(),
        })
    }
}

/// What the control threads share.
struct Shared {
    vol: Arc<dyn Volume>,
    stop: Arc<AtomicBool>,
    /// Bytes per second rebuild and scrub may go at (0: unlimited).
    rate: u64,
    /// Failed remote members that answer again are re-added by themselves.
    re_add: bool,
    /// Members failed by request (`mosaic fail`) while served: kept out,
    /// never re-added by themselves, until a `replace` of their slot (as
    /// md keeps a device failed with `--fail`).
    failed_by_request: std::sync::Mutex<std::collections::BTreeSet<usize>>,
    /// Check every stripe when the last scrub ended this long ago.
    scrub_every: Option<Duration>,
    maint: std::sync::Mutex<Option<Maint>>,
    events: Arc<crate::events::Events>,
    clients: Arc<ClientStats>,
    /// The file that named the array's UUID in the served `-a` spec.
    named_by: Option<(u64, u64)>,
}

/// The answer: `body` on success, `error` otherwise.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Response {
    pub ok: bool,
    #[serde(default)]
    pub error: Option<String>,
    #[serde(default)]
    pub body: serde_json::Value,
    /// The request named the array by a file ([`OF`]) this server does
    /// not hold: it serves another copy, and did nothing.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub other: bool,
}

impl Response {
    fn refused(error: String) -> Response {
        Response { ok: false, error: Some(error), body: serde_json::Value::Null, other: false }
    }
}

/// The key of a request line that names the array by the device and
/// inode of a file ([`served_as`]): a server that does not hold that file
/// answers [`Response::other`] instead of acting, so a request sent to a
/// socket that changed hands since its server answered
/// [`Request::Holds`] never reaches another copy.  Older servers ignore
/// the key.
const OF: &str = "of";

/// A request line: `req`, naming the array by the file `of` when given.
fn request_line(req: &Request, of: Option<(u64, u64)>) -> Result<String> {
    let mut v = serde_json::to_value(req)?;
    if let (Some(id), Some(m)) = (of, v.as_object_mut()) {
        m.insert(OF.into(), serde_json::json!(id));
    }
    let mut line = serde_json::to_string(&v)?;
    line.push('\n');
    Ok(line)
}

/// A request line read by a server: the request and the file that names
/// its array, if the client gave one.
fn parse_request(line: &str) -> Result<(Request, Option<(u64, u64)>), serde_json::Error> {
    let mut v: serde_json::Value = serde_json::from_str(line)?;
    let of = match v.as_object_mut().and_then(|m| m.remove(OF)) {
        Some(id) => Some(serde_json::from_value(id)?),
        None => None,
    };
    Ok((serde_json::from_value(v)?, of))
}

/// Longest request line the server reads.
const MAX_LINE: u64 = 64 << 10;
/// Longest answer line a client reads.
const MAX_ANSWER: u64 = 64 << 20;

/// The directory of this user's control sockets ([`mosaic_dev::runtime_dir`]).
pub use mosaic_dev::runtime_dir;

/// How many servers of arrays with one UUID (an array and its copies) can
/// run side by side.
const SLOTS: usize = 8;

/// Control socket `slot` of arrays with UUID `uuid`: UUID.sock, then
/// UUID.N.sock.
pub fn socket_path(uuid: &str, slot: usize) -> PathBuf {
    slot_file(&runtime_dir(), uuid, slot, "sock")
}

/// The socket (`ext` "sock") or the lock ("lock") of slot `slot` of
/// arrays with UUID `uuid` in `dir`.
fn slot_file(dir: &Path, uuid: &str, slot: usize, ext: &str) -> PathBuf {
    match slot {
        0 => dir.join(format!("{uuid}.{ext}")),
        n => dir.join(format!("{uuid}.{n}.{ext}")),
    }
}

/// The UUID of the array `spec` names, read from its disks (a directory,
/// or the first member of a comma list); None when it names none.
pub fn array_uuid(spec: &str) -> Option<String> {
    identify(spec).map(|x| x.0)
}

/// What the server of `spec`, whose volume is the array `uuid`, is found
/// by, from one look at its disks: the UUID [`array_uuid`] gives clients
/// that name it by the same spec, and the device and inode of the file
/// that names it there (a client naming that file finds this server).  A
/// spec that starts with an NBD URI is not read again: its first member
/// carries the array `uuid` (a client reads that label over the network),
/// and another connection from the server itself would wait on a remote
/// that takes few clients (qemu-nbd takes one unless told more) until the
/// remote's time ran out.
pub fn served_as(spec: &str, uuid: &str) -> (String, Option<(u64, u64)>) {
    if spec.split(',').next().is_some_and(|f| mosaic_dev::nbd::is_uri(f.trim())) {
        return (uuid.to_string(), None);
    }
    match identify(spec) {
        Some((key, at)) => (key, file_id(&at)),
        None => (uuid.to_string(), None),
    }
}

/// The UUID `spec` names and the file that says so (for a directory, the
/// first entry in it that carries something: a member file, a journal, or
/// a nested array's directory).  In a list, the first entry that names an
/// array: a member that is gone (a remote whose server is down) leaves
/// the others to find the array's server by.
fn identify(spec: &str) -> Option<(String, PathBuf)> {
    spec.split(',').map(str::trim).filter(|p| !p.is_empty()).find_map(|first| {
        let what = guard::identify(Path::new(first)).ok()?;
        let at = match &what {
            guard::Carries::Dir { entry, .. } => PathBuf::from(entry),
            _ => PathBuf::from(first),
        };
        Some((what.array()?.to_string(), at))
    })
}

/// The device and inode of `path` (None for an NBD URI or a path that is
/// gone).
fn file_id(path: &Path) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(path).ok().map(|m| (m.dev(), m.ino()))
}

/// Whether the served array is the one the file `id` names: the file that
/// named it in the served spec, or a member, the journal or a members'
/// directory (a client may name the array by another spec).
fn holds(sh: &Shared, id: (u64, u64)) -> bool {
    if sh.named_by == Some(id) {
        return true;
    }
    let info = sh.vol.info();
    let paths = info.members.iter().map(|m| m.path.clone()).chain(info.journal.clone());
    paths.into_iter().any(|p| {
        let p = Path::new(&p);
        [Some(p), p.parent()].into_iter().flatten().any(|q| file_id(q) == Some(id))
    })
}

/// A server's answer to [`Request::Holds`] about the file `id`: None
/// when none answers there, or its server is stopping (it closed the
/// connection without an answer).  A server that does not know the
/// question (an older mosaic) is taken to hold the array, as before the
/// question existed.
fn answers_holds(path: &Path, (dev, ino): (u64, u64)) -> Result<Option<bool>> {
    match exchange(path, &Request::Holds { dev, ino }, None)? {
        Exchange::Nobody | Exchange::Gone(_) => Ok(None),
        Exchange::Answered(r) if r.ok => Ok(Some(r.body["holds"].as_bool().unwrap_or(true))),
        Exchange::Answered(r) if r.error.as_deref().is_some_and(|e| e.contains("bad request")) => Ok(Some(true)),
        Exchange::Answered(r) => Err(refusal(r)),
    }
}
/// How long `info` and `status` wait for a server's answer, in
/// milliseconds (`--server-timeout`).
static SERVER_TIMEOUT_MS: AtomicU64 = AtomicU64::new(20_000);

/// Set how long `info` and `status` wait for a running server's answer.
pub fn set_server_timeout(d: Duration) {
    SERVER_TIMEOUT_MS.store(d.as_millis().clamp(1, u64::MAX as u128) as u64, Ordering::Relaxed);
}

fn server_timeout() -> Duration {
    Duration::from_millis(SERVER_TIMEOUT_MS.load(Ordering::Relaxed))
}

/// Ask the server holding `spec`'s array, if one runs: None when no
/// server answers (act directly then).  Each socket of the array's UUID
/// is tried in turn: a server that serves another copy, or is stopping
/// (it resets the connection), is passed over for the next.  Without a
/// local file to compare (a remote first member), the first server of
/// the UUID is taken.  A server that does not answer in time is named
/// when no other holds the array (it may be the array's own).
pub fn ask(spec: &str, req: &Request) -> Result<Option<serde_json::Value>> {
    let Some((uuid, at)) = identify(spec) else { return Ok(None) };
    let id = file_id(&at);
    let mut unanswered = None;
    for path in (0..SLOTS).map(|slot| socket_path(&uuid, slot)).filter(|p| p.exists()) {
        if !id.is_none_or(|id| holds_here(&path, id, &mut unanswered)) {
            continue;
        }
        // The request names the file too: a server that took the socket
        // over since it answered refuses it ([`OF`]).
        match exchange(&path, req, id)? {
            Exchange::Nobody => {}
            Exchange::Answered(r) if r.other => {}
            Exchange::Answered(r) => return body_of(r).map(Some),
            // It held the array and went away during the request, which
            // it may have done: said, never sent elsewhere.
            Exchange::Gone(why) => bail!(why),
        }
    }
    unanswered.map_or(Ok(None), Err)
}

/// Whether the server at `path` holds the array the file `id` names; the
/// first error of a server that did not answer is kept in `unanswered`.
fn holds_here(path: &Path, id: (u64, u64), unanswered: &mut Option<anyhow::Error>) -> bool {
    match answers_holds(path, id) {
        Ok(holds) => holds == Some(true),
        Err(e) => {
            unanswered.get_or_insert(e);
            false
        }
    }
}

/// Ask the server listening at `path`: None when none answers.
pub fn ask_socket(path: &Path, req: &Request) -> Result<Option<serde_json::Value>> {
    match exchange(path, req, None)? {
        Exchange::Nobody => Ok(None),
        Exchange::Gone(why) => Err(anyhow!(why)),
        Exchange::Answered(r) => body_of(r).map(Some),
    }
}

/// The body of an answer, or the server's error.
fn body_of(r: Response) -> Result<serde_json::Value> {
    if r.ok {
        Ok(r.body)
    } else {
        Err(refusal(r))
    }
}

fn refusal(r: Response) -> anyhow::Error {
    anyhow!("{}", r.error.unwrap_or_else(|| "the server refused".into()))
}

/// How one request on a control socket went.
enum Exchange {
    /// No server listens there.
    Nobody,
    /// The server reset or closed the connection without an answer: it
    /// is stopping (or died).  Why, for a message.
    Gone(String),
    Answered(Response),
}

/// Send `req` (naming the array by the file `of`, when given) to the
/// server at `path` and read its answer.  Errors: the server did not
/// answer in time, or its answer is not one.
fn exchange(path: &Path, req: &Request, of: Option<(u64, u64)>) -> Result<Exchange> {
    let Ok(mut s) = UnixStream::connect(path) else { return Ok(Exchange::Nobody) };
    // Rebuild and scrub answer when done: no read timeout.  Info and status
    // answer at once from a healthy server; one that does not is named
    // instead of hanging the command.
    if matches!(req, Request::Info | Request::Status | Request::Holds { .. }) {
        s.set_read_timeout(Some(server_timeout())).context("the control channel")?;
    }
    let gone = |e: &dyn std::fmt::Display| Exchange::Gone(format!("the server at {} closed its control channel without an answer (it is stopping?): {e}", path.display()));
    if let Err(e) = s.write_all(request_line(req, of)?.as_bytes()) {
        return if going_away(&e) { Ok(gone(&e)) } else { Err(anyhow!("the control channel {}: {e}", path.display())) };
    }
    // Answers can be long (a scrub's every finding): read up to 64 MiB.
    let mut answer = String::new();
    match BufReader::new(std::io::Read::take(s, MAX_ANSWER)).read_line(&mut answer) {
        Ok(0) => return Ok(gone(&"no answer")),
        Ok(_) => {}
        Err(e) if going_away(&e) => return Ok(gone(&e)),
        Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {
            bail!("the server at {} did not answer within {:.1} s (--server-timeout)", path.display(), server_timeout().as_secs_f64())
        }
        Err(e) => bail!("the control channel {}: {e}", path.display()),
    }
    let r: Response = serde_json::from_str(&answer).map_err(|e| anyhow!("the server sent a bad answer ({e}): {answer:?}"))?;
    Ok(Exchange::Answered(r))
}

/// Whether `e` says the server went away: it reset the connection (its
/// listener closed with the connection still waiting) or closed it.
fn going_away(e: &std::io::Error) -> bool {
    use std::io::ErrorKind::*;
    matches!(e.kind(), ConnectionReset | ConnectionAborted | BrokenPipe | UnexpectedEof)
}

/// The running control thread; dropping it does not stop it (set `stop`).
pub struct Server {
    pub path: PathBuf,
    /// The device and inode of the socket file this server bound.
    bound: Option<(u64, u64)>,
    /// The lock of its slot ([`claim`]), held until the socket is removed.
    _lock: std::fs::File,
    handle: JoinHandle<()>,
    supervisor: JoinHandle<()>,
    /// A clone of the listener, shut down to wake the accept loop's poll.
    wake: UnixListener,
}

impl Server {
    /// Wait for the thread (after `stop` was set) and remove the socket,
    /// unless another server bound its name since this one's listener
    /// closed; then give up the slot's lock.
    pub fn finish(self) {
        // Woken rather than waited out: the accept loop's poll returns on
        // the shut-down listener (and its accept finds nothing), the
        // supervisor is unparked.
        // SAFETY: shutdown of a socket this server owns (the clone).
        unsafe { libc::shutdown(std::os::fd::AsRawFd::as_raw_fd(&self.wake), libc::SHUT_RDWR) };
        self.supervisor.thread().unpark();
        let _ = self.handle.join();
        let _ = self.supervisor.join();
        if file_id(&self.path) == self.bound {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

/// What the server's maintenance does by itself, and how fast.
#[derive(Debug, Clone, Copy)]
pub struct Policy {
    /// Rebuild and scrub go at most this many bytes/s (0: unlimited).
    pub rate: u64,
    /// Failed remote members that answer again are re-added ([`supervise`]).
    pub re_add: bool,
    /// A scrub (a check) runs when the last one ended this long ago.
    pub scrub_every: Option<Duration>,
}

/// Listen for array `uuid` and answer until `stop` is set; `Stop`
/// requests set it; maintenance as `policy` says.  `named_by` is the
/// file that named the UUID in the served spec ([`served_as`]).  Refuses
/// when another server answers for the array.
#[allow(clippy::too_many_arguments)]
pub fn serve(vol: Arc<dyn Volume>, uuid: &str, named_by: Option<(u64, u64)>, stop: Arc<AtomicBool>, policy: Policy, events: Arc<crate::events::Events>, clients: Arc<ClientStats>) -> Result<Server> {
    let dir = runtime_dir();
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).with_context(|| format!("securing {}", dir.display()))?;
    let mine = named_by.or_else(|| vol.info().members.iter().find_map(|m| file_id(Path::new(&m.path))));
    let Claim { path, listener: l, lock } = claim(&dir, uuid, mine)?;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600))?;
    let bound = file_id(&path);
    l.set_nonblocking(true)?;
    let Policy { rate, re_add, scrub_every } = policy;
    let shared = Arc::new(Shared { vol, stop, rate, re_add, failed_by_request: Default::default(), scrub_every, maint: std::sync::Mutex::new(None), events, clients, named_by });
    let sup = shared.clone();
    let wake = l.try_clone()?;
    let supervisor = std::thread::spawn(move || supervise(sup));
    let handle = std::thread::spawn(move || accept_loop(l, shared));
    Ok(Server { path, bound, _lock: lock, handle, supervisor, wake })
}

/// A control socket slot this server holds ([`claim`]).
struct Claim {
    path: PathBuf,
    listener: UnixListener,
    /// The slot's lock, held while the server lives.
    lock: std::fs::File,
}

/// Bind the first free control socket of `uuid` in `dir`: a slot whose
/// server serves a copy of the array (not holding `mine`, a file of this
/// one) is passed over; one whose server holds it is an error.
fn claim(dir: &Path, uuid: &str, mine: Option<(u64, u64)>) -> Result<Claim> {
    for slot in 0..SLOTS {
        if let Some(c) = claim_slot(dir, uuid, slot, mine)? {
            return Ok(c);
        }
    }
    bail!("{SLOTS} servers answer for arrays with UUID {uuid} (an array and its copies): stop one first")
}

/// Slot `slot` of `uuid`, or None when another server has it.  Its lock
/// (`UUID[.N].lock`, never removed) is taken without waiting and held
/// for the server's life, so only its holder removes a socket file there
/// and binds: the check that nobody answers, the removal of a dead
/// server's socket and the bind are one step for every other server
/// that claims slots this way.  A locked slot is another server's, being
/// claimed or stopping.  A socket that answers in a slot whose lock is
/// free is an older mosaic's, which takes no lock: one stopping (it
/// resets the connection) is taken over, as then.
fn claim_slot(dir: &Path, uuid: &str, slot: usize, mine: Option<(u64, u64)>) -> Result<Option<Claim>> {
    use std::os::unix::fs::OpenOptionsExt;
    let (path, lock_path) = (slot_file(dir, uuid, slot, "sock"), slot_file(dir, uuid, slot, "lock"));
    let lock = std::fs::OpenOptions::new().write(true).create(true).truncate(false).mode(0o600).open(&lock_path).with_context(|| format!("opening {}", lock_path.display()))?;
    let locked = match lock.try_lock() {
        Ok(()) => true,
        Err(std::fs::TryLockError::WouldBlock) => false,
        Err(std::fs::TryLockError::Error(e)) => return Err(e).with_context(|| format!("locking {}", lock_path.display())),
    };
    let holds = match mine {
        Some(id) => answers_holds(&path, id)?,
        None => UnixStream::connect(&path).is_ok().then_some(true),
    };
    match (holds, locked) {
        (Some(true), _) => bail!("{}: another server answers for array {uuid}", path.display()),
        (Some(false), _) | (None, false) => Ok(None),
        (None, true) => {
            let _ = std::fs::remove_file(&path); // a socket left by a server that died
            let listener = UnixListener::bind(&path).with_context(|| format!("binding {}", path.display()))?;
            Ok(Some(Claim { path, listener, lock }))
        }
    }
}

fn accept_loop(l: UnixListener, sh: Arc<Shared>) {
    let mut conns: Vec<JoinHandle<()>> = Vec::new();
    while !sh.stop.load(Ordering::Relaxed) {
        match l.accept() {
            Ok((s, _)) => {
                // One thread per connection: a long scrub does not hold up `status`.
                let sh = sh.clone();
                conns.push(std::thread::spawn(move || {
                    let _ = s.set_nonblocking(false);
                    let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
                    if let Err(e) = answer(s, &sh) {
                        tracing::warn!("mosaic serve: control: {e}");
                    }
                }));
                conns.retain(|h| !h.is_finished());
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => mosaic_nbd::stream::wait_readable(&[std::os::fd::AsRawFd::as_raw_fd(&l)], Duration::from_millis(50)),
            Err(e) => {
                tracing::warn!("mosaic serve: control: {e}");
                std::thread::sleep(Duration::from_millis(200));
            }
        }
    }
    // Closed before the answers in progress end: a client finds no one
    // here at once (and tries a copy's socket) instead of waiting.
    drop(l);
    for h in conns {
        let _ = h.join();
    }
}

/// One connection: check the peer, read one request, answer it (a
/// request naming the array by a file this server does not hold is
/// answered [`Response::other`], not run).
fn answer(mut s: UnixStream, sh: &Shared) -> Result<()> {
    let r = match peer_allowed(&s) {
        Err(e) => Response::refused(e.to_string()),
        Ok(()) => {
            let mut line = String::new();
            BufReader::new(std::io::Read::take(s.try_clone()?, MAX_LINE)).read_line(&mut line)?;
            match parse_request(&line) {
                Ok((_, Some(id))) if !holds(sh, id) => Response { other: true, ..Response::refused("this server serves another copy of the array than the one the request names; nothing was done".into()) },
                Ok((req, _)) => run(sh, &req),
                Err(e) => Response::refused(format!("bad request: {e}")),
            }
        }
    };
    let mut out = serde_json::to_string(&r)?;
    out.push('\n');
    s.write_all(out.as_bytes())?;
    Ok(())
}

/// Only this user (or root) may act on the array.
fn peer_allowed(s: &UnixStream) -> Result<()> {
    let mut cred = libc::ucred { pid: 0, uid: 0, gid: 0 };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: cred and len are valid for the call and sized for SO_PEERCRED.
    let rc = unsafe { libc::getsockopt(s.as_raw_fd(), libc::SOL_SOCKET, libc::SO_PEERCRED, &mut cred as *mut _ as *mut libc::c_void, &mut len) };
    if rc != 0 {
        bail!("cannot tell who is asking: {}", std::io::Error::last_os_error());
    }
    // SAFETY: getuid has no preconditions.
    let me = unsafe { libc::getuid() };
    if cred.uid != me && cred.uid != 0 {
        bail!("uid {} may not control an array served by uid {me}", cred.uid);
    }
    Ok(())
}

fn run(sh: &Shared, req: &Request) -> Response {
    let vol = sh.vol.as_ref();
    let r: Result<serde_json::Value> = match req {
        Request::Info => info_body(vol),
        Request::Status => {
            // The guard dropped before status reads the volume: a rebuild
            // holds the volume's lock while it updates its progress.
            let maint = sh.maint.lock().unwrap_or_else(|e| e.into_inner()).clone();
            let mut b = status_with(vol, true, maint);
            b["clients"] = sh.clients.json();
            b["events"] = serde_json::to_value(sh.events.recent()).unwrap_or_default();
            Ok(b)
        }
        Request::Fail { member } => vol.fail_member(*member).map(|_| {
            sh.failed_by_request.lock().unwrap_or_else(|e| e.into_inner()).insert(*member);
            let after = after_failure(&vol.info());
            sh.events.emit(Event { kind: events::MEMBER_FAILED, member: Some(*member), detail: format!("member {member} failed by request (mosaic fail){after}") });
            serde_json::json!({ "failed": member })
        }).map_err(Into::into),
        Request::Replace { member, drive: Some(drive), force, host, hot: false } => replace(sh, *member, drive, *force, host.as_deref()),
        Request::Replace { drive: None, hot: false, .. } => Err(anyhow!("--drive is needed (only replace --hot takes a hot spare without one)")),
        Request::Replace { member, drive, force, host, hot: true } => replace_hot(sh, *member, drive.as_deref(), *force, host.as_deref()),
        Request::Rebuild => maintain(sh, "rebuild", |tick| rebuild_body(sh, tick, "rebuild started")),
        Request::Scrub { repair } => maintain(sh, "scrub", |tick| scrub_body(sh, *repair, tick)),
        Request::CancelScrub => match sh.maint.lock().unwrap_or_else(|e| e.into_inner()).as_ref() {
            Some(m) if m.what == "scrub" => {
                vol.interrupt_scrub();
                Ok(serde_json::json!({ "cancelled": "scrub" }))
            }
            Some(m) => Err(anyhow!("no scrub is running (a {} is)", m.what)),
            None => Err(anyhow!("no scrub is running")),
        },
        Request::Grow { drives, force, backup_file } => grow(sh, drives, *force, backup_file.as_deref()),
        Request::GrowSize { size } => maintain(sh, "grow", |tick| grow_size_body(sh, *size, tick)),
        Request::Takeover { level, drives, force, keep } => takeover(sh, level, drives, *force, *keep),
        Request::WriteMostly { members } => vol.set_write_mostly(members).map(|_| crate::cmd_mostly::outcome(&crate::cmd_mostly::now(vol), true)).map_err(Into::into),
        Request::AddSpare { drives, force } => crate::cmd_grow::add_spares(vol, drives, *force).map(|_| {
            for d in drives {
                sh.events.emit(Event { kind: events::SPARE_ADDED, member: None, detail: format!("{} added as a hot spare", d.display()) });
            }
            serde_json::json!({ "spares": drives })
        }),
        Request::RemoveSpare { drives } => crate::cmd_grow::remove_spares(vol, drives).map(|now| {
            for d in drives {
                sh.events.emit(Event { kind: events::SPARE_REMOVED, member: None, detail: format!("{} removed as a hot spare (label erased)", d.display()) });
            }
            serde_json::json!({ "spares": drives, "now": now })
        }),
        Request::Holds { dev, ino } => Ok(serde_json::json!({ "holds": holds(sh, (*dev, *ino)) })),
        Request::Flush => vol.flush().map(|_| serde_json::json!({ "flushed": true })).map_err(Into::into),
        Request::Stop => {
            sh.stop.store(true, Ordering::Relaxed);
            Ok(serde_json::json!({ "stopping": true }))
        }
    };
    match r {
        Ok(body) => Response { ok: true, error: None, body, other: false },
        Err(e) => Response::refused(crate::exit::error_text(&e)),
    }
}

fn replace(sh: &Shared, member: usize, drive: &Path, force: bool, host: Option<&str>) -> Result<serde_json::Value> {
    let vol = sh.vol.as_ref();
    crate::cmd_array::check_new_drive(vol, member, Some(drive), host, force)?;
    vol.replace(member, drive)?;
    sh.failed_by_request.lock().unwrap_or_else(|e| e.into_inner()).remove(&member);
    if let Some(h) = host {
        vol.set_member_host(member, h)?;
    }
    maintain(sh, "rebuild", |tick| rebuild_body(sh, tick, &format!("rebuild of member {member} started")))
}

/// `replace --hot`: the copy runs as the server's maintenance (one at a
/// time, paced, shown by status); a rebuild follows when the old drive
/// failed on the way.
fn replace_hot(sh: &Shared, member: usize, drive: Option<&Path>, force: bool, host: Option<&str>) -> Result<serde_json::Value> {
    let vol = sh.vol.as_ref();
    crate::cmd_array::check_new_drive(vol, member, drive, host, force)?;
    let onto = drive.map_or("the first hot spare".to_string(), |d| d.display().to_string());
    let onto = match vol.hot_paused() {
        Some((m, d)) if m == member && drive.is_none_or(|x| mosaic_array::spare::names_same(&d, x)) => format!("{d} (resumed where it paused)"),
        _ => onto,
    };
    hot_body(sh, member, drive, host, &onto)
}

/// The hot replace of `member` paused when the server last stopped,
/// resumed by the supervisor onto its drive.
fn replace_hot_resume(sh: &Shared, member: usize, drive: &str) -> Result<serde_json::Value> {
    hot_body(sh, member, Some(Path::new(drive)), None, &format!("{drive} (resumed where it paused)"))
}

/// The copy of a hot replace as the server's maintenance (and the
/// rebuild that follows when the old drive failed on the way).
fn hot_body(sh: &Shared, member: usize, drive: Option<&Path>, host: Option<&str>, onto: &str) -> Result<serde_json::Value> {
    let vol = sh.vol.as_ref();
    maintain(sh, "hot replace", |tick| {
        sh.events.emit(Event { kind: events::REPLACE_START, member: Some(member), detail: format!("hot replace of member {member} onto {onto} started") });
        let opts = mosaic_array::maint::RebuildOptions { stop: Some(sh.stop.clone()), ..Default::default() };
        let rep = vol.replace_hot(member, drive, tick, opts);
        let detail = match &rep {
            Ok(r) => crate::cmd_array::hot_text(r).trim_end().to_string(),
            Err(e) => format!("hot replace of member {member} failed: {e}"),
        };
        sh.events.emit(Event { kind: events::REPLACE_END, member: Some(member), detail });
        let rep = rep?;
        if let (Some(h), false) = (host, rep.stopped) {
            vol.set_member_host(member, h)?;
        }
        if rep.rebuild_needed {
            let b = rebuild_body(sh, tick, &format!("rebuild of member {member} started (its old drive failed during the hot replace)"))?;
            return Ok(serde_json::json!({ "json": { "hot_replace": rep, "rebuild": b["json"] }, "text": format!("{}{}", crate::cmd_array::hot_text(&rep), b["text"].as_str().unwrap_or_default()), "code": b["code"] }));
        }
        let code = if rep.stopped { crate::exit::DEGRADED } else { crate::exit::OK };
        Ok(serde_json::json!({ "json": rep, "text": crate::cmd_array::hot_text(&rep), "code": code }))
    })
}

fn grow(sh: &Shared, drives: &[PathBuf], force: bool, backup_file: Option<&Path>) -> Result<serde_json::Value> {
    let vol = sh.vol.as_ref();
    for d in drives {
        crate::cmd_array::check_drive(vol, d, force)?;
    }
    // Started inside the maintenance slot: the supervisor, which goes on
    // with a pending grow by itself, cannot take it between the start and
    // this request's walk (the request then said "a grow is running").
    maintain(sh, "grow", |tick| {
        if !drives.is_empty() {
            vol.grow_start(drives, backup_file)?;
        }
        grow_body(sh, tick)
    })
}

fn grow_body(sh: &Shared, tick: &dyn Fn(u64, u64)) -> Result<serde_json::Value> {
    sh.events.emit(Event { kind: events::GROW_START, member: None, detail: "grow: restriping started".into() });
    let opts = mosaic_volume::GrowOptions { abort_after_stripes: crate::cmd_grow::fault_abort(), stop: Some(sh.stop.clone()) };
    let rep = sh.vol.grow_continue(tick, opts);
    let detail = match &rep {
        Ok(r) if r.paused => format!("grow paused at a checkpoint (the server stops); it resumes when the array is served again or with mosaic grow"),
        Ok(r) => format!("grow done: {} members, {} bytes, in {:.1} s", r.members, r.capacity, r.seconds),
        Err(e) => format!("grow stopped: {e}"),
    };
    sh.events.emit(Event { kind: events::GROW_END, member: None, detail });
    let rep = rep?;
    Ok(serde_json::json!({ "json": rep, "text": crate::cmd_grow::grow_text(&rep), "code": 0 }))
}

/// `grow --level` while served: the superblocks under the clients, then
/// (members added) their rebuild as the server's maintenance.
fn takeover(sh: &Shared, level: &str, drives: &[PathBuf], force: bool, keep: Option<usize>) -> Result<serde_json::Value> {
    let vol = sh.vol.as_ref();
    let level: mosaic_core::Level = level.parse()?;
    for d in drives {
        crate::cmd_array::check_drive(vol, d, force)?;
    }
    maintain(sh, "level change", |tick| {
        let rep = vol.takeover(level, drives, keep)?;
        sh.events.emit(Event { kind: events::GROW_END, member: None, detail: crate::cmd_grow::takeover_text(&rep).trim_end().to_string() });
        if vol.grow_pending().is_some() {
            // A mirror made raid5 with new drives: the grow onto them.
            let g = grow_body(sh, tick)?;
            let text = format!("{}{}", crate::cmd_grow::takeover_text(&rep), g["text"].as_str().unwrap_or_default());
            return Ok(serde_json::json!({ "json": { "takeover": rep, "grow": g["json"] }, "text": text, "code": g["code"] }));
        }
        if rep.rebuild.is_empty() {
            return Ok(serde_json::json!({ "json": { "takeover": rep }, "text": crate::cmd_grow::takeover_text(&rep), "code": 0 }));
        }
        let b = rebuild_body(sh, tick, &format!("rebuild of member(s) {:?} added by the level change", rep.rebuild))?;
        let text = format!("{}{}", crate::cmd_grow::takeover_text(&rep), b["text"].as_str().unwrap_or_default());
        Ok(serde_json::json!({ "json": { "takeover": rep, "rebuild": b["json"] }, "text": text, "code": b["code"] }))
    })
}

/// `grow --size` while served: the new stripes written with zeros under
/// the clients, then the new capacity, which new connections see.
fn grow_size_body(sh: &Shared, size: Option<u64>, tick: &dyn Fn(u64, u64)) -> Result<serde_json::Value> {
    sh.events.emit(Event { kind: events::GROW_START, member: None, detail: "grow --size: writing the new stripes".into() });
    let rep = sh.vol.grow_size(size, tick);
    let detail = match &rep {
        Ok(r) => format!("grow --size done: {} bytes a member, capacity {} bytes, in {:.1} s", r.member_data_size, r.capacity, r.seconds),
        Err(e) => format!("grow --size stopped: {e}"),
    };
    sh.events.emit(Event { kind: events::GROW_END, member: None, detail });
    let rep = rep?;
    Ok(serde_json::json!({ "json": rep, "text": crate::cmd_grow::grow_size_text(&rep), "code": 0 }))
}

/// What the server does by itself: resume a grow it finds in progress,
/// resync an array without a journal that was not shut down cleanly,
/// resume a rebuild it finds in progress, put a hot spare in place of a
/// failed member, then rebuild it online, and re-add a failed remote
/// member that answers again with the session it left in (md's re-add,
/// as mdadm's incremental assembly does under `POLICY action=re-add`).
fn supervise(sh: Arc<Shared>) {
    let mut grow_tried = false;
    // A hot replace paused when the server stopped resumes where it was.
    let mut hot_tried = false;
    let mut resync_failed = false;
    // A rebuild found in progress (a server stopped during it) resumes,
    // as md's recovery does at assembly.
    let mut resume_tried = false;
    // A spare took a member's place and its rebuild has not run to the end.
    let mut spare_rebuild = false;
    let back = sh.re_add.then(|| probe_remotes(sh.clone()));
    let mut scrub_checked = std::time::Instant::now() - Duration::from_secs(60);
    while !sh.stop.load(Ordering::Relaxed) {
        let idle = sh.maint.lock().unwrap_or_else(|e| e.into_inner()).is_none();
        if idle && !grow_tried && sh.vol.grow_pending().is_some() {
            grow_tried = true;
            if let Err(e) = maintain(&sh, "grow", |tick| grow_body(&sh, tick)) {
                tracing::warn!("mosaic serve: grow: {}", crate::exit::error_text(&e));
            }
            continue;
        }
        if idle && !hot_tried {
            hot_tried = true;
            if let Some((m, drive)) = sh.vol.hot_paused() {
                if let Err(e) = replace_hot_resume(&sh, m, &drive) {
                    tracing::warn!("mosaic serve: resuming the hot replace: {}", crate::exit::error_text(&e));
                }
                continue;
            }
        }
        if idle && !resync_failed && sh.vol.needs_resync() {
            if let Err(e) = maintain(&sh, "resync", |tick| resync_body(&sh, tick)) {
                resync_failed = true;
                tracing::warn!("mosaic serve: resync: {}", crate::exit::error_text(&e));
            }
            continue;
        }
        if idle && !resume_tried {
            resume_tried = true;
            if let Some(ms) = rebuilding(&sh.vol.info()) {
                if let Err(e) = maintain(&sh, "rebuild", |tick| rebuild_body(&sh, tick, &format!("rebuild of member(s) {ms:?} resumed where it stopped"))) {
                    tracing::warn!("mosaic serve: resuming the rebuild: {}", crate::exit::error_text(&e));
                }
                continue;
            }
        }
        if idle && !spare_rebuild {
            match sh.vol.take_spare() {
                Ok(Some(m)) => {
                    let path = sh.vol.info().members.get(m).map(|x| x.path.clone()).unwrap_or_default();
                    sh.events.emit(Event { kind: events::SPARE_TAKEOVER, member: Some(m), detail: format!("hot spare {path} takes the place of failed member {m}; rebuilding it") });
                    spare_rebuild = true;
                }
                Ok(None) => {}
                Err(e) => tracing::warn!("mosaic serve: taking a hot spare: {e:#}"),
            }
        }
        // Looked at once a second: `info` reads the superblock.
        if let Some(every) = sh.scrub_every.filter(|_| idle && !spare_rebuild && scrub_checked.elapsed() >= Duration::from_secs(1)) {
            scrub_checked = std::time::Instant::now();
            if scrub_due(&sh.vol.info(), every) {
                sh.events.emit(Event { kind: events::SCRUB_START, member: None, detail: format!("scrub started: the last one ended {} s or more ago (--scrub-every)", every.as_secs()) });
                if let Err(e) = maintain(&sh, "scrub", |tick| scrub_body(&sh, false, tick)) {
                    tracing::warn!("mosaic serve: the scheduled scrub: {}", crate::exit::error_text(&e));
                    // Not again at once: in ten minutes.
                    scrub_checked = std::time::Instant::now() + Duration::from_secs(600);
                }
                continue;
            }
        }
        if let Some((m, path)) = back.as_ref().filter(|_| idle && !spare_rebuild).and_then(|rx| rx.try_recv().ok()) {
            re_add(&sh, m, &path);
            continue;
        }
        if idle && spare_rebuild {
            // Tried until it runs (another maintenance may have started
            // meanwhile, or a rebuild asked for may have done it).
            match maintain(&sh, "rebuild", |tick| rebuild_body(&sh, tick, "rebuild onto the hot spare started")) {
                Ok(_) => spare_rebuild = false,
                Err(e) if e.to_string().contains("nothing to rebuild") => spare_rebuild = false,
                Err(e) => {
                    tracing::warn!("mosaic serve: rebuild onto the spare: {}", crate::exit::error_text(&e));
                    std::thread::sleep(Duration::from_secs(1));
                }
            }
            continue;
        }
        // Unparked at the stop ([`Server::finish`]).
        std::thread::park_timeout(Duration::from_millis(100));
    }
}

/// How often failed remote members are asked whether they are back.
const PROBE_EVERY: Duration = Duration::from_secs(2);

/// A thread that looks, every [`PROBE_EVERY`], for failed remote members
/// whose device answers again with the session it left in, and sends
/// each (a send waits until the supervisor, idle, takes it; it asks
/// again before acting).  A remote that does not answer may take its
/// connect timeout: the supervisor does not wait for it, nor does a
/// stopping server.
fn probe_remotes(sh: Arc<Shared>) -> std::sync::mpsc::Receiver<(usize, String)> {
    let (tx, rx) = std::sync::mpsc::sync_channel(0);
    std::thread::spawn(move || {
        let kept_out = |m: usize| sh.failed_by_request.lock().unwrap_or_else(|e| e.into_inner()).contains(&m);
        let failed_remote = |m: &mosaic_volume::VolumeMember| m.readd && matches!(m.state, mosaic_core::MemberState::Failed) && mosaic_dev::nbd::is_uri(&m.path) && !kept_out(m.index);
        while !sh.stop.load(Ordering::Relaxed) {
            std::thread::sleep(PROBE_EVERY);
            for m in sh.vol.info().members.iter().filter(|m| failed_remote(m)) {
                if sh.vol.readdable(m.index, Path::new(&m.path)) && tx.send((m.index, m.path.clone())).is_err() {
                    return;
                }
            }
        }
    });
    rx
}

/// Put remote member `m`, back at `path`, in its slot again and rebuild
/// what it missed.
fn re_add(sh: &Shared, m: usize, path: &str) {
    // Asked again: the member may have been replaced, or failed by
    // request, meanwhile.
    if !sh.vol.readdable(m, Path::new(path)) || sh.failed_by_request.lock().unwrap_or_else(|e| e.into_inner()).contains(&m) {
        return;
    }
    sh.events.emit(Event { kind: events::RE_ADD, member: Some(m), detail: format!("member {m} ({path}) answers again with the session it left in: re-added, rebuilding what was written while it was out") });
    if let Err(e) = replace(sh, m, Path::new(path), false, None) {
        tracing::warn!("mosaic serve: re-adding member {m}: {}", crate::exit::error_text(&e));
    }
}

/// The members being rebuilt, when any is.
fn rebuilding(info: &mosaic_volume::VolumeInfo) -> Option<Vec<usize>> {
    let ms: Vec<usize> = info.members.iter().filter(|m| matches!(m.state, mosaic_core::MemberState::Rebuilding { .. })).map(|m| m.index).collect();
    (!ms.is_empty()).then_some(ms)
}

/// md's resync after an unclean shutdown: a repairing scrub (of the
/// regions the write-intent bitmap marks, when there is one), which
/// records the array clean when it verified every stripe it scrubbed.  (A member
/// failing on the way leaves it unclean; it runs again once every member
/// is back in service.  A stopping server interrupts it.)
fn resync_body(sh: &Shared, tick: &dyn Fn(u64, u64)) -> Result<serde_json::Value> {
    sh.events.emit(Event { kind: events::RESYNC_START, member: None, detail: "resync started: the array was not shut down cleanly and has no journal".into() });
    // Unlike a rebuild or scrub asked for, a stopping server does not
    // finish it: the array stays unsynced, and the next server resyncs.
    let rep = sh.vol.resync(&ends_on_stop(sh, tick));
    let detail = match &rep {
        Ok(r) if !r.interrupted => {
            let bitmap: String = r.notes.iter().filter(|n| n.contains("write-intent bitmap")).map(|n| format!("; {n}")).collect();
            let unverified = if r.unverified_stripes > 0 { format!(", {} not verified (a member out)", r.unverified_stripes) } else { String::new() };
            format!("resync done: {} regions checked, {} repaired{unverified}{bitmap}", r.stripes_checked, r.mismatched)
        }
        Ok(r) => {
            let detail = sh.vol.info().detail;
            let from = ["/resync_from", "/inner/resync_from"].iter().find_map(|p| detail.pointer(p).and_then(|v| v.as_u64()));
            let next = match (["/bitmap", "/inner/bitmap"].iter().find_map(|p| detail.pointer(p)), from) {
                (Some(_), _) => "the next server goes on with the regions the write-intent bitmap still marks".to_string(),
                (None, Some(from)) => format!("the next server goes on from stripe {from}"),
                (None, None) => "the next server resyncs the array again".to_string(),
            };
            format!("resync stopped with the server: {} of {} regions checked, {} repaired; {next}", r.stripes_checked, r.stripes_checked + r.unverified_stripes, r.mismatched)
        }
        Err(e) => format!("resync stopped: {e}"),
    };
    sh.events.emit(Event { kind: events::RESYNC_END, member: None, detail });
    Ok(serde_json::to_value(rep?)?)
}

/// `tick`, and a stopping server's end of the scrub or resync in
/// progress before its next stripe.
fn ends_on_stop<'a>(sh: &'a Shared, tick: &'a dyn Fn(u64, u64)) -> impl Fn(u64, u64) + 'a {
    move |d, t| {
        tick(d, t);
        if sh.stop.load(Ordering::Relaxed) {
            sh.vol.interrupt_scrub();
        }
    }
}

/// A scrub; a stopping server, or `scrub --cancel`, ends it before its
/// next stripe.
fn scrub_body(sh: &Shared, repair: bool, tick: &dyn Fn(u64, u64)) -> Result<serde_json::Value> {
    let rep = sh.vol.scrub(repair, &ends_on_stop(sh, tick))?;
    for f in &rep.findings {
        sh.events.emit(Event { kind: events::SCRUB_FINDING, member: None, detail: format!("scrub: {}", f.detail) });
    }
    let detail = format!(
        "scrub {}: {} regions checked, {} mismatched{}",
        if rep.interrupted { "stopped before its end (cancelled, or the server stops)" } else { "done" },
        rep.stripes_checked,
        rep.mismatched,
        if repair { " (repaired)" } else { "" }
    );
    sh.events.emit(Event { kind: events::SCRUB_END, member: None, detail });
    let text = crate::cmd_array::scrub_text(&rep, repair);
    Ok(serde_json::json!({ "json": rep, "text": text, "code": crate::cmd_array::scrub_code(&rep, repair) }))
}

/// Whether `--scrub-every` asks for a scrub now: the array is whole and
/// the last scrub (or, never scrubbed, the array's creation) ended at
/// least `every` ago; of a tier, its side scrubbed longest ago.
fn scrub_due(info: &mosaic_volume::VolumeInfo, every: Duration) -> bool {
    let at = |p: String| info.detail.pointer(&p).and_then(|v| v.as_u64());
    let last = ["", "/inner", "/fast", "/slow"].iter().filter_map(|p| at(format!("{p}/last_scrub/end")).or_else(|| at(format!("{p}/created")))).min();
    let whole = info.members.iter().all(|m| matches!(m.state, mosaic_core::MemberState::Active));
    // raid0 keeps nothing a scrub could check.
    whole && info.level != "raid0" && last.is_some_and(|t| mosaic_array::now_secs().saturating_sub(t) >= every.as_secs())
}

/// A rebuild (`why` starts its event's detail); a stopping server pauses
/// it at a checkpoint, and the next server resumes it.
fn rebuild_body(sh: &Shared, tick: &dyn Fn(u64, u64), why: &str) -> Result<serde_json::Value> {
    sh.events.emit(Event { kind: events::REBUILD_START, member: None, detail: why.into() });
    let opts = mosaic_array::maint::RebuildOptions { stop: Some(sh.stop.clone()), ..Default::default() };
    let rep = sh.vol.rebuild(tick, opts);
    let detail = match &rep {
        Ok(r) if r.paused => format!(
            "rebuild of members {:?} paused at a checkpoint (the server stops), {} bytes written in {:.1} s; the next server resumes it",
            r.members, r.bytes_written, r.seconds
        ),
        Ok(r) => format!(
            "members {:?} rebuilt: {} bytes in {:.1} s{}{}",
            r.members,
            r.bytes_written,
            r.seconds,
            if r.skipped_regions > 0 { format!("; re-added: {} of {} stripes passed over (no write came to them while it was out)", r.skipped_regions, r.regions) } else { String::new() },
            if r.lost_bytes > 0 { format!("; {} bytes could not be rebuilt and are recorded lost", r.lost_bytes) } else { String::new() }
        ),
        Err(e) => format!("rebuild failed: {e}"),
    };
    sh.events.emit(Event { kind: events::REBUILD_END, member: None, detail });
    let rep = rep?;
    let code = if rep.paused { crate::exit::DEGRADED } else { crate::exit::OK };
    Ok(serde_json::json!({ "json": rep, "text": crate::cmd_array::rebuild_text(&rep), "code": code }))
}

/// Run one rebuild or scrub (one at a time): its progress kept for
/// `status`, its pace held to the rate between regions.
fn maintain(sh: &Shared, what: &'static str, f: impl FnOnce(&dyn Fn(u64, u64)) -> Result<serde_json::Value>) -> Result<serde_json::Value> {
    let info = sh.vol.info();
    let capacity = info.capacity;
    {
        let mut m = sh.maint.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(busy) = m.as_ref() {
            bail!("a {} is running ({} of {} bytes)", busy.what, busy.done_bytes, busy.total_bytes);
        }
        let started = std::time::Instant::now();
        *m = Some(Maint { what, done_bytes: 0, total_bytes: info.capacity, mib_per_s: 0.0, eta_s: 0.0, started });
    }
    let tick = |done: u64, total: u64| {
        // Bytes in proportion to the work's own units (stripes, regions,
        // a DVS array's live stripes), so every kind goes at the rate.
        let d = (capacity as u128 * done.min(total) as u128).checked_div(total as u128).unwrap_or(0) as u64;
        let t = capacity;
        let started = {
            let mut g = sh.maint.lock().unwrap_or_else(|e| e.into_inner());
            let Some(m) = g.as_mut() else { return };
            let secs = m.started.elapsed().as_secs_f64().max(1e-9);
            m.done_bytes = d;
            m.total_bytes = t;
            m.mib_per_s = d as f64 / secs / 1048576.0;
            m.eta_s = if d > 0 { secs * (t.saturating_sub(d)) as f64 / d as f64 } else { 0.0 };
            m.started
        };
        // A stopping server does not wait: the work ends at its next step.
        if sh.rate > 0 && !sh.stop.load(Ordering::Relaxed) {
            let due = Duration::from_secs_f64(d as f64 / sh.rate as f64);
            if let Some(wait) = due.checked_sub(started.elapsed()) {
                std::thread::sleep(wait);
            }
        }
    };
    let r = f(&tick);
    *sh.maint.lock().unwrap_or_else(|e| e.into_inner()) = None;
    r
}

/// Print a remote rebuild's or scrub's answer; its exit status.
pub fn print_remote(body: &serde_json::Value, json: bool) -> Result<i32> {
    if json {
        crate::util::print_json(&body["json"])?;
    } else {
        print!("{}", body["text"].as_str().unwrap_or_default());
    }
    Ok(body["code"].as_i64().unwrap_or(0) as i32)
}

/// What `info` prints: the JSON and the human text.
pub fn info_body(vol: &dyn Volume) -> Result<serde_json::Value> {
    let info = vol.info();
    Ok(serde_json::json!({ "json": crate::cmd_array::info_json(&info)?, "text": crate::cmd_array::info_text(&info) }))
}

/// The health of an array: healthy, degraded or failed.
#[derive(Debug, Clone, Copy, Serialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Health {
    Healthy,
    Degraded,
    Failed,
}

/// `status`'s body: state, members, device counters, failures seen.
pub fn status(vol: &dyn Volume, served: bool) -> serde_json::Value {
    status_with(vol, served, None)
}

/// The code columns of a fixed array (or of a cached one's inner array):
/// how many members it survives losing.  None for other kinds.
pub(crate) fn code_columns(info: &mosaic_volume::VolumeInfo) -> Option<u64> {
    ["/code_columns", "/inner/code_columns"].iter().find_map(|p| info.detail.pointer(p).and_then(|v| v.as_u64()))
}

/// The array's health, and why it stopped serving if it has.  Members
/// out beyond the code columns: it cannot serve.  A cache volume, or a DVS
/// array, that stopped after a destage failed part-way, or a tier that
/// stopped after a program failed part-way, serves nothing until the
/// array is opened again, whatever its members.
fn health_of(info: &mosaic_volume::VolumeInfo) -> (Health, Option<String>) {
    let out = info.members.iter().filter(|m| !matches!(m.state, MemberState::Active) || !m.present).count();
    let stopped = ["/cache/stopped", "/stopped"].iter().find_map(|p| info.detail.pointer(p).and_then(|v| v.as_str())).map(str::to_string);
    let journal_failed = journal_failed(info).is_some();
    // Columns a stripe lost (two members of one CBRO check drive array
    // lose one), where the array says; else one a member.
    let columns = ["/columns_out", "/inner/columns_out"].iter().find_map(|p| info.detail.pointer(p).and_then(|v| v.as_u64())).unwrap_or(out as u64);
    let inner_out = info.members.iter().any(|m| !m.inner_out.is_empty());
    let health = match (out, code_columns(info)) {
        _ if stopped.is_some() => Health::Failed,
        (0, _) if journal_failed || inner_out => Health::Degraded,
        (0, _) => Health::Healthy,
        (_, Some(m)) if columns > m => Health::Failed,
        _ => Health::Degraded,
    };
    (health, stopped)
}

/// Why the array's write-ahead journal cannot be used (it failed while
/// open, or could not be opened): the array serves reads and refuses
/// writes.
fn journal_failed(info: &mosaic_volume::VolumeInfo) -> Option<String> {
    ["/journal_failed", "/inner/journal_failed"].iter().find_map(|p| info.detail.pointer(p).and_then(|v| v.as_str())).map(str::to_string)
}

/// The hot spares `info` lists, wherever its kind keeps them (an inner
/// array's, a tier's two sides).
pub(crate) fn spare_list(info: &mosaic_volume::VolumeInfo) -> Vec<serde_json::Value> {
    ["/spares", "/inner/spares", "/fast/spares", "/slow/spares"]
        .iter()
        .filter_map(|p| info.detail.pointer(p).and_then(|v| v.as_array()).cloned())
        .flatten()
        .collect()
}

/// Whether the volume (or an inner array of a remapped or tier one) was
/// not shut down cleanly without a journal and is not yet resynced.
pub(crate) fn resync_needed(info: &mosaic_volume::VolumeInfo) -> bool {
    ["/resync_needed", "/inner/resync_needed", "/fast/resync_needed", "/slow/resync_needed"].iter().any(|p| info.detail.pointer(p) == Some(&serde_json::Value::Bool(true)))
}

/// How a member failure leaves the array, for its event: serving
/// degraded (with the risk of an unsynced array), or failed when too
/// many members are out to serve at all.
pub(crate) fn after_failure(info: &mosaic_volume::VolumeInfo) -> String {
    match health_of(info).0 {
        Health::Failed => "; too many members are out: the array has FAILED and serves no I/O".to_string(),
        _ => format!("; serving degraded{}", unsynced_risk(info)),
    }
}

/// What a member failure means for an array [`resync_needed`]: said in
/// its event.
pub(crate) fn unsynced_risk(info: &mosaic_volume::VolumeInfo) -> &'static str {
    if resync_needed(info) {
        "; the array was not yet resynced after an unclean shutdown (no journal), so the member's blocks, read from code, may be wrong where the crash cut writes off"
    } else {
        ""
    }
}

/// `status` with the rebuild or scrub in progress.
fn status_with(vol: &dyn Volume, served: bool, maint: Option<Maint>) -> serde_json::Value {
    let info = vol.info();
    let (health, stopped) = health_of(&info);
    let io = vol.io_counters();
    let fill = ["/journal_fill", "/inner/journal_fill"].iter().find_map(|p| info.detail.pointer(p).cloned());
    let spares = spare_list(&info);
    let grow = info.detail.pointer("/grow").cloned();
    let bitmap = ["/bitmap", "/inner/bitmap"].iter().find_map(|p| info.detail.pointer(p).cloned());
    let resync = resync_needed(&info);
    let resync_from = ["/resync_from", "/inner/resync_from"].iter().find_map(|p| info.detail.pointer(p).cloned());
    let last_scrub = ["/last_scrub", "/inner/last_scrub"].iter().find_map(|p| info.detail.pointer(p).cloned());
    // A tier's sides keep one each.
    let side_scrubs = (info.kind == "tier").then(|| serde_json::json!({ "fast": info.detail.pointer("/fast/last_scrub"), "slow": info.detail.pointer("/slow/last_scrub") }));
    let slow: Vec<usize> = info.members.iter().filter(|m| m.remote.is_some_and(|l| l.slow)).map(|m| m.index).collect();
    serde_json::json!({
        "uuid": info.uuid,
        "kind": info.kind,
        "level": info.level,
        "served": served,
        "health": health,
        "stopped": stopped,
        "capacity": info.capacity,
        "members": info.members,
        "slow_remotes": slow,
        "device_reads": io.device_reads,
        "device_writes": io.device_writes,
        "failed_while_open": vol.auto_failed(),
        "maintenance": maint,
        "journal": fill,
        "journal_failed": journal_failed(&info),
        "spares": spares,
        "grow": grow,
        "bitmap": bitmap,
        "resync_needed": resync,
        "resync_from": resync_from,
        "last_scrub": last_scrub,
        "tier_last_scrub": side_scrubs,
        "clients": null,
        "events": [],
    })
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use mosaic_array::{Array, CacheVolume, CreateOptions};
    use mosaic_core::{CacheConfig, CachePolicy, Level};
    use mosaic_dev::{FaultyMember, MemMember, Member};
    use mosaic_volume::{CachedVolume, Volume};

    /// A cache volume stopped by a member failing mid-destage is FAILED in
    /// `status`, with the reason, though its members alone would make it
    /// only degraded; its warnings and info say why, and requests, scrub
    /// and close are refused.
    #[test]
    fn a_stopped_cache_volume_is_failed_in_status() {
        let faulty: Vec<Arc<FaultyMember>> = (0..5).map(|i| Arc::new(FaultyMember::new(Arc::new(MemMember::new(format!("m{i}"), 4 << 20))))).collect();
        let o = CreateOptions { level: Level::Raid5, members: Some(5), member_size: None, unit: 4096, block: 4096, force: true, assume_clean: true };
        let members = faulty.iter().enumerate().map(|(i, f)| (f.clone() as Arc<dyn Member>, format!("m{i}"))).collect();
        let journal: Arc<dyn Member> = Arc::new(MemMember::new("journal", 16 << 20));
        let arr = Array::create_with_journal(members, &o, true, Some((journal, "journal".into()))).unwrap();
        let cfg = CacheConfig::uniform(CachePolicy::Fpc, 16 << 10);
        let v = CachedVolume::new(CacheVolume::new(arr, cfg).unwrap(), cfg);
        v.write(0, &[7u8; 4096]).unwrap();
        assert_eq!(super::status(&v, true)["health"], "healthy");
        faulty[1].break_after(0);
        assert!((0..64u64).any(|i| v.write(i * 3 * 4096, &[i as u8; 4096]).is_err()), "a destage hit the failed member");
        let s = super::status(&v, true);
        assert_eq!(s["health"], "failed", "{s}");
        assert!(s["stopped"].as_str().is_some_and(|w| w.contains("injected I/O error")), "{s}");
        let w = v.warnings();
        assert!(w.iter().any(|w| w.contains("the cache volume has stopped") && w.contains("open it again")), "{w:?}");
        assert!(v.info().detail["cache"]["stopped"].is_string());
        let mut b = vec![0u8; 4096];
        assert!(v.read(0, &mut b).is_err() && v.scrub(false, &|_, _| {}).is_err() && v.close().is_err());

        // A DVS array (and a tier) says it stopped at the top of its info.
        let mut i = v.info();
        i.detail = serde_json::json!({ "stopped": "a destage failed: power cut" });
        assert!(matches!(super::health_of(&i), (super::Health::Failed, Some(w)) if w.contains("power cut")));
        i.detail = serde_json::json!({ "stopped": null });
        assert!(matches!(super::health_of(&i), (super::Health::Healthy | super::Health::Degraded, None)));
    }

    /// A request naming its array's file reads back whole, and a server
    /// that reads requests as they were (an older mosaic) takes the same
    /// line, the file left out; a bad file is a bad request.
    #[test]
    fn a_request_names_its_arrays_file_and_older_servers_take_it() {
        use super::{parse_request, request_line, Request};
        for req in [Request::Stop, Request::Fail { member: 2 }] {
            let line = request_line(&req, Some((7, 9))).unwrap();
            assert_eq!(parse_request(&line).unwrap(), (req.clone(), Some((7, 9))), "{line}");
            assert_eq!(serde_json::from_str::<Request>(&line).unwrap(), req, "as an older server reads {line}");
            assert_eq!(parse_request(&request_line(&req, None).unwrap()).unwrap(), (req, None));
        }
        assert!(parse_request(r#"{"cmd":"stop","of":"here"}"#).is_err());
    }

    /// Two servers of copies of one array started at the same instant get
    /// a control socket each: neither removes the other's live socket and
    /// binds over it, and each socket reaches its own server.
    #[test]
    fn servers_of_copies_started_together_get_a_socket_each() {
        use std::sync::atomic::{AtomicBool, Ordering};
        use std::sync::Barrier;
        let dir = tempfile::tempdir().unwrap();
        for round in 0..300u64 {
            let (barrier, stop) = (Arc::new(Barrier::new(2)), Arc::new(AtomicBool::new(false)));
            let claimants: Vec<_> = (0..2u64)
                .map(|who| {
                    let (dir, barrier, stop) = (dir.path().to_path_buf(), barrier.clone(), stop.clone());
                    std::thread::spawn(move || {
                        barrier.wait();
                        let c = super::claim(&dir, "u", Some((round, who)))?;
                        Ok::<_, anyhow::Error>((c.path.clone(), answer_as_copy(c, who, stop)))
                    })
                })
                .collect();
            let got: Vec<_> = claimants.into_iter().map(|h| h.join().unwrap()).collect();
            let asked: Vec<_> = got.iter().map(|g| g.as_ref().ok().map(|(p, _)| super::ask_socket(p, &super::Request::Status).ok().flatten())).collect();
            stop.store(true, Ordering::Relaxed);
            let mut paths = Vec::new();
            for g in got {
                let (path, h) = g.unwrap_or_else(|e| panic!("round {round}: {e:#}"));
                h.join().unwrap();
                paths.push(path);
            }
            assert_ne!(paths[0], paths[1], "round {round}");
            for (who, a) in asked.iter().enumerate() {
                assert_eq!(a.as_ref().and_then(|b| b.as_ref()).map(|b| b["who"].clone()), Some(serde_json::json!(who)), "round {round}: {} reaches its own server", paths[who].display());
            }
            for p in &paths {
                std::fs::remove_file(p).unwrap();
            }
        }
    }

    /// Answer every request on `c`'s socket as the server of another copy
    /// of the array, `who`, until `stop` is set; then give the slot up.
    fn answer_as_copy(c: super::Claim, who: u64, stop: Arc<std::sync::atomic::AtomicBool>) -> std::thread::JoinHandle<()> {
        use std::io::{BufRead, Write};
        c.listener.set_nonblocking(true).unwrap();
        std::thread::spawn(move || {
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let Ok((s, _)) = c.listener.accept() else {
                    std::thread::sleep(std::time::Duration::from_millis(1));
                    continue;
                };
                s.set_nonblocking(false).unwrap();
                let mut line = String::new();
                let _ = std::io::BufReader::new(&s).read_line(&mut line);
                let _ = (&s).write_all(format!("{{\"ok\":true,\"body\":{{\"holds\":false,\"who\":{who}}}}}\n").as_bytes());
            }
        })
    }
}
