//! Helpers for tests of policies on RAM members: a byte pattern distinct
//! per (tag, offset), and the reference model of a volume's bytes.

/// A byte pattern for a write: distinct per (tag, offset).
pub fn pattern(tag: u64, off: u64, len: u64) -> Vec<u8> {
    (0..len).map(|i| (((off + i) / 7) ^ tag.wrapping_mul(131) ^ (i % 251)) as u8).collect()
}

/// The reference model: the bytes a volume must hold.
pub struct Model(pub Vec<u8>);

impl Model {
    /// `cap` bytes of zeros (a fresh volume).
    pub fn new(cap: u64) -> Model {
        Model(vec![0; cap as usize])
    }
    pub fn write(&mut self, off: u64, data: &[u8]) {
        self.0[off as usize..off as usize + data.len()].copy_from_slice(data);
    }
    pub fn get(&self, off: u64, len: u64) -> &[u8] {
        &self.0[off as usize..(off + len) as usize]
    }
}

/// qemu-nbd serving the raw file `file` as export `m` on the unix socket
/// `sock` for up to `shared` clients (tests of remote members; Debian's
/// qemu-utils, which scripts/test.sh installs).  Returns once the socket
/// exists; kill the child to take the export away.
pub fn qemu_nbd(file: &std::path::Path, sock: &std::path::Path, shared: u32) -> std::process::Child {
    let mut c = std::process::Command::new("qemu-nbd");
    c.args(["-f", "raw", "-x", "m", "--persistent", "--cache=writeback", &format!("--shared={shared}"), "-k"]).arg(sock).arg(file);
    start_server(c, sock, "qemu-nbd (Debian's qemu-utils; scripts/test.sh installs it)")
}

/// nbdkit's file plugin serving `file` on the unix socket `sock`, with
/// `extra` arguments after the file (filters go first: pass
/// `["--filter=delay", ...]` in `filters`, their parameters in `extra`,
/// e.g. `delay-write=120ms`).  Debian's nbdkit, which scripts/test.sh
/// installs.  Returns once the socket exists; kill the child to take the
/// export away.
pub fn nbdkit(file: &std::path::Path, sock: &std::path::Path, filters: &[&str], extra: &[&str]) -> std::process::Child {
    let _ = std::fs::remove_file(sock);
    let mut c = std::process::Command::new("nbdkit");
    c.args(["--foreground", "--exportname=m", "-U"]).arg(sock).args(filters).arg("file").arg(file).args(extra);
    start_server(c, sock, "nbdkit (Debian's nbdkit; scripts/test.sh installs it)")
}

/// Start an NBD server quietly and wait (at most 20 s) for its socket.
fn start_server(mut c: std::process::Command, sock: &std::path::Path, what: &str) -> std::process::Child {
    let child = c.stdout(std::process::Stdio::null()).stderr(std::process::Stdio::null()).spawn().expect(what);
    let t0 = std::time::Instant::now();
    while !sock.exists() && t0.elapsed() < std::time::Duration::from_secs(20) {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert!(sock.exists(), "{what} did not start on {}", sock.display());
    child
}
