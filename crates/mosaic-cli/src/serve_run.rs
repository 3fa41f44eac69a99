//! `mosaic serve --run CMD`, nbdkit's captive mode: once the server
//! listens, `sh -c CMD` runs with the server's address in its environment
//! (nbdkit's names), and when it exits the server stops as on SIGTERM
//! (clients drained, the array flushed and closed) and exits with the
//! command's status.  A server stopped first (a signal, `mosaic stop`)
//! sends the command SIGTERM and waits for it.  And `--pidfile` and
//! `--exit-with-parent`, as nbdkit's.

use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::Path;
use std::process::{Command, ExitStatus};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use anyhow::{Context, Result};
use mosaic_nbd::stream::Listener;

/// The command running against the server.
pub struct Captive {
    pid: i32,
    waiter: JoinHandle<std::io::Result<ExitStatus>>,
}

/// The URI a local client connects with: the listener's, through TLS
/// with the server's certificate directory when TLS is required.
pub fn client_uri(listener: &Listener, export: &str, tls: Option<&mosaic_nbd::Tls>) -> String {
    let plain = listener.uri(export);
    tls.map_or_else(|| plain.clone(), |t| t.client_uri(&plain))
}

/// What `CMD` finds in its environment, as nbdkit's `--run` sets it:
/// `uri` (and its older name `nbd`; `nbds` and the certificate directory
/// when TLS is required), `exportname`, and `port` (TCP) or `unixsocket`.
pub fn environment(listener: &Listener, export: &str, tls: Option<&mosaic_nbd::Tls>) -> Vec<(&'static str, String)> {
    let uri = client_uri(listener, export, tls);
    let mut env = vec![("uri", uri.clone()), ("nbd", uri), ("exportname", export.to_string())];
    match (listener.port(), listener.socket_path()) {
        (Some(port), _) => env.push(("port", port.to_string())),
        (None, Some(p)) => env.push(("unixsocket", p.display().to_string())),
        (None, None) => {}
    }
    env
}

/// Start `sh -c cmd` (its own process group, so a stopping server can
/// signal all it started); `stop` is set when it exits.
pub fn start(cmd: &str, listener: &Listener, export: &str, tls: Option<&mosaic_nbd::Tls>, stop: Arc<AtomicBool>) -> Result<Captive> {
    let mut child = Command::new("sh").arg("-c").arg(cmd).envs(environment(listener, export, tls)).process_group(0).spawn().with_context(|| format!("--run: starting sh -c {cmd:?}"))?;
    let pid = child.id() as i32;
    let waiter = std::thread::spawn(move || {
        let st = child.wait();
        stop.store(true, Ordering::Relaxed);
        st
    });
    Ok(Captive { pid, waiter })
}

impl Captive {
    /// After the server stopped: the command's exit status as the
    /// server's (its code, or 128 + the signal that ended it), once it
    /// has ended (sent SIGTERM if it still runs: the server stopped first).
    pub fn finish(self) -> Result<i32> {
        if !self.waiter.is_finished() {
            tracing::info!("mosaic serve: stopping the --run command (process group {})", self.pid);
            // SAFETY: signalling the process group of our own child.
            unsafe { libc::kill(-self.pid, libc::SIGTERM) };
        }
        let st = self.waiter.join().map_err(|_| anyhow::anyhow!("the --run waiter panicked"))?.context("--run: waiting for the command")?;
        Ok(exit_code(st))
    }
}

/// A shell's idea of an exit status: the code, or 128 + the signal.
fn exit_code(st: ExitStatus) -> i32 {
    st.code().unwrap_or_else(|| 128 + st.signal().unwrap_or(0))
}

/// `--exit-with-parent`: SIGTERM (a clean stop) when the parent exits;
/// a parent gone between the two calls here sets `stop` at once.
pub fn exit_with_parent(stop: &AtomicBool) {
    // SAFETY: prctl with PR_SET_PDEATHSIG and a signal number; getppid has
    // no preconditions.
    let parent_gone = unsafe {
        let before = libc::getppid();
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM);
        libc::getppid() != before
    };
    if parent_gone {
        stop.store(true, Ordering::Relaxed);
    }
}

/// `--pidfile FILE`: this process's id and a newline, written once the
/// server listens (as nbdkit's), through a temporary file renamed over
/// `path` so a reader never sees it half written.
pub fn write_pidfile(path: &Path) -> Result<()> {
    let tmp = path.with_extension(format!("tmp.{}", std::process::id()));
    std::fs::write(&tmp, format!("{}\n", std::process::id())).with_context(|| format!("--pidfile: writing {}", tmp.display()))?;
    std::fs::rename(&tmp, path).with_context(|| format!("--pidfile: renaming {} to {}", tmp.display(), path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_command_sees_nbdkits_variables_and_its_exit_stops_the_server() {
        let l = Listener::bind_tcp("127.0.0.1:0").unwrap();
        let port = l.port().unwrap();
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("env");
        let stop = Arc::new(AtomicBool::new(false));
        let c = start(&format!("echo \"$uri|$nbd|$port|$exportname|${{unixsocket-none}}\" > {}; exit 3", out.display()), &l, "x", None, stop.clone()).unwrap();
        let t0 = std::time::Instant::now();
        while !stop.load(Ordering::Relaxed) {
            assert!(t0.elapsed() < std::time::Duration::from_secs(10), "the command's exit did not stop the server");
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        assert_eq!(c.finish().unwrap(), 3, "the command's status");
        let uri = format!("nbd://127.0.0.1:{port}/x");
        assert_eq!(std::fs::read_to_string(&out).unwrap(), format!("{uri}|{uri}|{port}|x|none\n"));
    }

    #[test]
    fn a_command_still_running_when_the_server_stops_is_terminated() {
        let sock = tempfile::tempdir().unwrap();
        let l = Listener::bind_unix(&sock.path().join("s")).unwrap();
        let env = environment(&l, "", None);
        assert!(env.contains(&("unixsocket", sock.path().join("s").display().to_string())), "{env:?}");
        assert!(!env.iter().any(|(k, _)| *k == "port"));
        let stop = Arc::new(AtomicBool::new(false));
        let c = start("sleep 30", &l, "", None, stop.clone()).unwrap();
        let t0 = std::time::Instant::now();
        assert_eq!(c.finish().unwrap(), 128 + libc::SIGTERM);
        assert!(t0.elapsed() < std::time::Duration::from_secs(10));
    }

    #[test]
    fn a_pidfile_holds_this_process() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("serve.pid");
        write_pidfile(&p).unwrap();
        assert_eq!(std::fs::read_to_string(&p).unwrap(), format!("{}\n", std::process::id()));
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1, "no temporary file left");
        assert!(write_pidfile(&dir.path().join("no/such/dir/pid")).unwrap_err().to_string().contains("--pidfile"));
    }
}
