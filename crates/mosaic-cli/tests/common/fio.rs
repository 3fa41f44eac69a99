//! fio over NBD against a served array, verifying every block, and
//! `status --json` polling: shared by the tests of a served array.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// fio over NBD on `port`: `args` after the common ones.  Verify state
/// files stay out of the way (`--verify_state_save=0`).
pub fn fio(dir: &Path, port: u16, name: &str, args: &[&str]) -> Command {
    let mut c = Command::new("fio");
    c.current_dir(dir)
        .args(["--name", name, "--ioengine=nbd", "--verify_state_save=0", "--verify=crc32c", "--bs=4k", "--iodepth=8"])
        .arg(format!("--uri=nbd://127.0.0.1:{port}/mosaic"))
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    c
}

/// Wait for a background fio; panic with its output unless it passed.
pub fn passed(c: Child, what: &str) {
    let o = c.wait_with_output().unwrap();
    let (out, err) = (String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    assert!(o.status.success() && !out.contains("verify:") && !err.contains("verify"), "{what}: fio failed\n{out}\n{err}");
}

/// `status -a A --json`: its exit code and the array's object.
pub fn status(a: &str) -> (i32, serde_json::Value) {
    let o = super::mosaic(&["status", "-a", a, "--json"]);
    let v = super::json(&String::from_utf8_lossy(&o.stdout));
    (o.status.code().unwrap_or(-1), v[0].clone())
}

/// Poll `status` until `done` holds (at most `secs`); the last status.
pub fn wait_status(a: &str, secs: u64, what: &str, done: impl Fn(&serde_json::Value) -> bool) -> serde_json::Value {
    let t = Instant::now();
    loop {
        let (_, s) = status(a);
        if done(&s) {
            return s;
        }
        assert!(t.elapsed() < Duration::from_secs(secs), "{what}: not reached in {secs} s: {s}");
        std::thread::sleep(Duration::from_millis(100));
    }
}
