//! A running `mosaic serve` for CLI tests: started on an ephemeral port,
//! its stderr collected, stopped with SIGTERM.

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
        let mut child = Process::new(env!("CARGO_BIN_EXE_mosaic"))
            .args(["serve", "-a", array, "--listen", "127.0.0.1:0"])
            .args(extra)
            .stderr(Stdio::piped())
            .spawn()
            .expect("run mosaic serve");
        let log = Arc::new(Mutex::new(Vec::new()));
        let (log2, err) = (log.clone(), child.stderr.take().unwrap());
        std::thread::spawn(move || {
            for line in BufReader::new(err).lines().map_while(Result::ok) {
                log2.lock().unwrap().push(line);
            }
        });
        let t = Instant::now();
        loop {
            let port = log.lock().unwrap().iter().find_map(|l| {
                let rest = l.strip_prefix("mosaic serve: listening on nbd://127.0.0.1:")?;
                rest.split('/').next()?.parse::<u16>().ok()
            });
            if let Some(port) = port {
                return Serve { child, port, log };
            }
            assert!(child.try_wait().unwrap().is_none(), "serve exited: {:?}", log.lock().unwrap());
            assert!(t.elapsed() < Duration::from_secs(30), "serve did not start: {:?}", log.lock().unwrap());
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn alive(&mut self) -> bool {
        self.child.try_wait().unwrap().is_none()
    }

    pub fn lines(&self) -> Vec<String> {
        self.log.lock().unwrap().clone()
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

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

