//! The control channel of a running `mosaic serve`: a unix socket per
//! served array, owner-only, through which `info`, `status`, `fail`,
//! `flush` and `stop` act on the live array (as mdadm acts on a running
//! md device).  Without a server they act directly, so the user types
//! the same command either way.
//!
//! ```text
//!   $XDG_RUNTIME_DIR (or /tmp)/mosaic-UID/   mode 0700
//!       ARRAY-UUID.sock                      mode 0600, peers of the same uid (or root) only
//!
//!   client ── one JSON line {"cmd":"fail","member":1} ──▶ serve's control thread
//!          ◀── one JSON line {"ok":true,"body":...} or {"ok":false,"error":"..."}
//!
//!   the array is found by what is on its disks: -a SPEC -> guard::identify
//!   -> the array UUID -> its socket; no socket (or a dead one): act directly
//! ```

use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::io::AsRawFd;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use anyhow::{anyhow, bail, Context, Result};
use serde::{Deserialize, Serialize};

use mosaic_core::MemberState;
use mosaic_volume::{guard, Volume};

/// A request on the control channel.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(tag = "cmd", rename_all = "lowercase")]
pub enum Request {
    Info,
    Status,
    Fail { member: usize },
    Flush,
    Stop,
}

/// The answer: `body` on success, `error` otherwise.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Response {
    pub ok: bool,
    #[serde(default)]
    pub error: Option<String>,
    #[serde(default)]
    pub body: serde_json::Value,
}

/// Longest request line read.
const MAX_LINE: u64 = 64 << 10;

/// The directory of this user's control sockets.
fn runtime_dir() -> PathBuf {
    let base = std::env::var_os("XDG_RUNTIME_DIR").map(PathBuf::from).filter(|p| p.is_dir()).unwrap_or_else(std::env::temp_dir);
    // SAFETY: getuid has no preconditions.
    base.join(format!("mosaic-{}", unsafe { libc::getuid() }))
}

/// The control socket of array `uuid`.
pub fn socket_path(uuid: &str) -> PathBuf {
    runtime_dir().join(format!("{uuid}.sock"))
}

/// The UUID of the array `spec` names, read from its disks (a directory,
/// or the first member of a comma list); None when it names none.
pub fn array_uuid(spec: &str) -> Option<String> {
    let first = spec.split(',').next()?.trim();
    let what = guard::identify(Path::new(first)).ok()?;
    what.array().map(str::to_string)
}

/// Ask the server holding `spec`'s array, if one runs: None when no
/// server answers (act directly then).
pub fn ask(spec: &str, req: &Request) -> Result<Option<serde_json::Value>> {
    let Some(uuid) = array_uuid(spec) else { return Ok(None) };
    ask_socket(&socket_path(&uuid), req)
}

/// Ask the server listening at `path`: None when none answers.
pub fn ask_socket(path: &Path, req: &Request) -> Result<Option<serde_json::Value>> {
    let Ok(mut s) = UnixStream::connect(path) else { return Ok(None) };
    s.set_read_timeout(Some(Duration::from_secs(600)))?;
    let mut line = serde_json::to_string(req)?;
    line.push('\n');
    s.write_all(line.as_bytes()).context("the control channel")?;
    let mut answer = String::new();
    BufReader::new(s.take_reader()).read_line(&mut answer).context("the control channel")?;
    let r: Response = serde_json::from_str(&answer).map_err(|e| anyhow!("the server sent a bad answer ({e}): {answer:?}"))?;
    if !r.ok {
        bail!("{}", r.error.unwrap_or_else(|| "the server refused".into()));
    }
    Ok(Some(r.body))
}

trait TakeReader {
    fn take_reader(self) -> std::io::Take<UnixStream>;
}

impl TakeReader for UnixStream {
    fn take_reader(self) -> std::io::Take<UnixStream> {
        std::io::Read::take(self, MAX_LINE)
    }
}

/// The running control thread; dropping it does not stop it (set `stop`).
pub struct Server {
    pub path: PathBuf,
    handle: JoinHandle<()>,
}

impl Server {
    /// Wait for the thread (after `stop` was set) and remove the socket.
    pub fn finish(self) {
        let _ = self.handle.join();
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Listen for array `uuid` and answer until `stop` is set; `Stop`
/// requests set it.  Refuses when another server answers there.
pub fn serve(vol: Arc<dyn Volume>, uuid: &str, stop: Arc<AtomicBool>) -> Result<Server> {
    let dir = runtime_dir();
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).with_context(|| format!("securing {}", dir.display()))?;
    let path = socket_path(uuid);
    if UnixStream::connect(&path).is_ok() {
        bail!("{}: another server answers for array {uuid}", path.display());
    }
    let _ = std::fs::remove_file(&path); // a socket left by a server that died
    let l = UnixListener::bind(&path).with_context(|| format!("binding {}", path.display()))?;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600))?;
    l.set_nonblocking(true)?;
    let handle = std::thread::spawn(move || accept_loop(l, vol.as_ref(), &stop));
    Ok(Server { path, handle })
}

fn accept_loop(l: UnixListener, vol: &dyn Volume, stop: &AtomicBool) {
    while !stop.load(Ordering::Relaxed) {
        match l.accept() {
            Ok((s, _)) => {
                let _ = s.set_nonblocking(false);
                let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
                if let Err(e) = answer(s, vol, stop) {
                    eprintln!("mosaic serve: control: {e}");
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => std::thread::sleep(Duration::from_millis(50)),
            Err(e) => {
                eprintln!("mosaic serve: control: {e}");
                std::thread::sleep(Duration::from_millis(200));
            }
        }
    }
}

/// One connection: check the peer, read one request, answer it.
fn answer(mut s: UnixStream, vol: &dyn Volume, stop: &AtomicBool) -> Result<()> {
    let r = match peer_allowed(&s) {
        Err(e) => Response { ok: false, error: Some(e.to_string()), body: serde_json::Value::Null },
        Ok(()) => {
            let mut line = String::new();
            BufReader::new(s.try_clone()?.take_reader()).read_line(&mut line)?;
            match serde_json::from_str::<Request>(&line) {
                Ok(req) => run(vol, &req, stop),
                Err(e) => Response { ok: false, error: Some(format!("bad request: {e}")), body: serde_json::Value::Null },
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

fn run(vol: &dyn Volume, req: &Request, stop: &AtomicBool) -> Response {
    let r: Result<serde_json::Value> = match req {
        Request::Info => info_body(vol),
        Request::Status => Ok(status(vol, true)),
        Request::Fail { member } => vol.fail_member(*member).map(|_| serde_json::json!({ "failed": member })).map_err(Into::into),
        Request::Flush => vol.flush().map(|_| serde_json::json!({ "flushed": true })).map_err(Into::into),
        Request::Stop => {
            stop.store(true, Ordering::Relaxed);
            Ok(serde_json::json!({ "stopping": true }))
        }
    };
    match r {
        Ok(body) => Response { ok: true, error: None, body },
        Err(e) => Response { ok: false, error: Some(format!("{e:#}")), body: serde_json::Value::Null },
    }
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
    let info = vol.info();
    let out = info.members.iter().filter(|m| !matches!(m.state, MemberState::Active) || !m.present).count();
    // Members out beyond the code columns: the array cannot serve.
    let code = ["/code_columns", "/inner/code_columns"].iter().find_map(|p| info.detail.pointer(p).and_then(|v| v.as_u64()));
    let health = match (out, code) {
        (0, _) => Health::Healthy,
        (n, Some(m)) if n as u64 > m => Health::Failed,
        _ => Health::Degraded,
    };
    let io = vol.io_counters();
    serde_json::json!({
        "uuid": info.uuid,
        "kind": info.kind,
        "level": info.level,
        "served": served,
        "health": health,
        "capacity": info.capacity,
        "members": info.members,
        "device_reads": io.device_reads,
        "device_writes": io.device_writes,
        "failed_while_open": vol.auto_failed(),
    })
}
