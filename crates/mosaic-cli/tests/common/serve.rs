//! A running `mosaic serve` for CLI tests: started on an ephemeral port,
//! its stderr collected, stopped with SIGTERM.
//!
//! The server logs through `tracing`: a line is a timestamp, a level, the
//! message ("mosaic serve: listening on ...") and fields (`array=UUID`),
//! or with `--log-format json` one JSON object; tests look for messages
//! within lines.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command as Process, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A running `mosaic serve` and every line it has written to stderr.
pub struct Serve {
    pub child: Child,
    pub port: u16,
    pub log: Arc<Mutex<Vec<String>>>,
}

impl Serve {
    /// Start `mosaic serve -a ARRAY --listen 127.0.0.1:0 EXTRA...` and wait
    /// (at most 30 s) for its "listening on" line.
    pub fn start(array: &str, extra: &[&str]) -> Serve {
        let args: Vec<&str> = ["serve", "-a", array, "--listen", "127.0.0.1:0"].iter().chain(extra).copied().collect();
        Serve::spawn(&args, 1)
    }

    /// Start `mosaic ARGS...` and wait (at most 30 s) until `servers`
    /// "listening on" lines are logged; `port` is the first one's.
    pub fn spawn(args: &[&str], servers: usize) -> Serve {
        let mut cmd = Process::new(env!("CARGO_BIN_EXE_mosaic"));
        cmd.args(args);
        Serve::spawn_command(cmd, servers)
    }

    /// [`Serve::spawn`] of a command made ready by the caller (its
    /// environment, its file descriptors).
    pub fn spawn_command(mut cmd: Process, servers: usize) -> Serve {
        let mut child = cmd.stderr(Stdio::piped()).spawn().expect("run mosaic serve");
        let log = Arc::new(Mutex::new(Vec::new()));
        let (log2, err) = (log.clone(), child.stderr.take().unwrap());
        std::thread::spawn(move || {
            for line in BufReader::new(err).lines().map_while(Result::ok) {
                log2.lock().unwrap().push(line);
            }
        });
        let t = Instant::now();
        loop {
            let up = listening(&log.lock().unwrap());
            if up.len() >= servers {
                return Serve { child, port: up[0].0, log };
            }
            assert!(child.try_wait().unwrap().is_none(), "serve exited: {:?}", log.lock().unwrap());
            if t.elapsed() > Duration::from_secs(30) {
                // Not left running (it holds the test's output open).
                let _ = child.kill();
                let _ = child.wait();
                panic!("serve did not start: {:?}", log.lock().unwrap());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn alive(&mut self) -> bool {
        self.child.try_wait().unwrap().is_none()
    }

    /// Wait (at most 30 s) for the server to exit by itself; `what` names it.
    pub fn wait_exit(&mut self, what: &str) {
        let t0 = Instant::now();
        while self.alive() {
            assert!(t0.elapsed() < Duration::from_secs(30), "{what} did not stop");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The ports and export names of the servers listening (TCP), in order.
    pub fn listening(&self) -> Vec<(u16, String)> {
        listening(&self.lines())
    }

    pub fn lines(&self) -> Vec<String> {
        self.log.lock().unwrap().clone()
    }

    /// Wait (at most 30 s) for a logged line that holds `what`.
    pub fn wait_line(&self, what: &str) {
        let t0 = Instant::now();
        while !self.lines().iter().any(|l| l.contains(what)) {
            assert!(t0.elapsed() < Duration::from_secs(30), "no line with {what:?}: {:?}", self.lines());
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Resident memory of the server in bytes (VmRSS of /proc/PID/status).
    pub fn rss(&self) -> u64 {
        let st = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).unwrap();
        let kb = st.lines().find_map(|l| l.strip_prefix("VmRSS:")).expect("VmRSS line");
        kb.trim().trim_end_matches("kB").trim().parse::<u64>().unwrap() * 1024
    }

    /// SIGTERM, wait (at most 60 s); the exit code and every log line.
    pub fn stop(mut self) -> (i32, Vec<String>) {
        // SAFETY: signalling our own child process.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let t = Instant::now();
        let status = loop {
            if let Some(s) = self.child.try_wait().unwrap() {
                break s;
            }
            assert!(t.elapsed() < Duration::from_secs(60), "serve did not stop: {:?}", self.lines());
            std::thread::sleep(Duration::from_millis(20));
        };
        // The reader thread ends at EOF; give it a moment to take the last lines.
        std::thread::sleep(Duration::from_millis(200));
        (status.code().unwrap_or(-1), self.lines())
    }
}

/// The message of the first line that has `prefix` (in a text line, or
/// the message of a JSON one), from `prefix` to the end of the message
/// (the fields after it left off).
pub fn message<'a>(lines: &'a [String], prefix: &str) -> Option<&'a str> {
    lines.iter().find_map(|l| {
        let rest = &l[l.find(prefix)?..];
        // Text: the server's fields follow the message as ` key=value`;
        // JSON: the message ends at its quote.
        let end = if l.starts_with('{') {
            rest.find('"')
        } else {
            [" kind=", " array=", " member=", " pid=", " config="].iter().filter_map(|f| rest.find(f)).min()
        };
        Some(&rest[..end.unwrap_or(rest.len())])
    })
}

/// The (port, export) of every "listening on nbd://127.0.0.1:PORT/EXPORT" line.
pub fn listening(lines: &[String]) -> Vec<(u16, String)> {
    lines
        .iter()
        .filter_map(|l| {
            // nbd://, or nbds:// when TLS is required (with a username
            // for pre-shared keys: nbds://alice@127.0.0.1:...).
            let rest = l.split_once("mosaic serve: listening on nbd")?.1;
            let rest = rest.strip_prefix("s").unwrap_or(rest).strip_prefix("://")?;
            let rest = rest.split_once('@').filter(|(user, _)| !user.contains('/')).map_or(rest, |(_, r)| r);
            let rest = rest.strip_prefix("127.0.0.1:")?;
            let (port, export) = rest.split_once('/')?;
            let export = export.split([' ', '"']).next()?;
            Some((port.parse().ok()?, export.to_string()))
        })
        .collect()
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A file in `dir` named `name` and the --on-event program that adds
/// each event to it as a line: its kind, then its detail.
pub fn event_log(dir: &std::path::Path, name: &str) -> (std::path::PathBuf, String) {
    let log = dir.join(name);
    let cmd = format!("echo \"$MOSAIC_EVENT $MOSAIC_DETAIL\" >> {}", log.display());
    (log, cmd)
}

/// Wait (at most 30 s) until the event log holds `what`.
pub fn wait_for(log: &std::path::Path, what: &str, srv: &Serve) {
    let t0 = Instant::now();
    while !std::fs::read_to_string(log).unwrap_or_default().contains(what) {
        assert!(t0.elapsed() < Duration::from_secs(30), "no {what:?} event: {:?}", srv.lines());
        std::thread::sleep(Duration::from_millis(20));
    }
}
