//! Remote members: an export of an NBD server (nbdkit, qemu-nbd, another
//! `mosaic serve`) named by an NBD URI, reached through libnbd, the
//! maintained NBD client library (its URI grammar, TLS, structured replies
//! and block-size negotiation come with it).
//!
//! ```text
//!   nbd://host[:port]/export     TCP
//!   nbds://host[:port]/export    TCP with TLS
//!   nbd+unix:///export?socket=PATH
//!
//!   connect ──> size, flags, block sizes ──> more connections when the
//!   server advertises multi-conn (a flush on any one then covers the
//!   writes of all, by the NBD spec), else one
//!   read/write ──> split at the server's largest request ──> a free
//!   connection (concurrent requests use different connections)
//!   flush ──> NBD_CMD_FLUSH on one connection (when the server can flush)
//! ```
//!
//! libnbd is found at build time (`build.rs`); without it, opening a
//! remote member is an error that says how to get it.

use std::io;

use crate::Member;

/// Connections to one export, at most: when the server allows several.
const MAX_CONNS: usize = 4;
/// The largest request sent, whatever the server allows (libnbd's own
/// limit is 64 MiB).
const MAX_REQUEST: u64 = 32 << 20;

/// Whether `s` names a remote member (an NBD URI) rather than a path.
pub fn is_uri(s: &str) -> bool {
    ["nbd://", "nbds://", "nbd+unix://", "nbds+unix://"].iter().any(|p| s.starts_with(p))
}

/// An NBD export as a member device.
pub struct NbdMember {
    uri: String,
    size: u64,
    #[cfg(mosaic_libnbd)]
    conns: Vec<parking_lot::Mutex<ffi::Handle>>,
    #[cfg(mosaic_libnbd)]
    next: std::sync::atomic::AtomicUsize,
    can_flush: bool,
    read_only: bool,
    max_request: u64,
}

impl std::fmt::Debug for NbdMember {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NbdMember").field("uri", &self.uri).field("size", &self.size).finish()
    }
}

impl NbdMember {
    /// Connect to the export `uri` names.
    #[cfg(mosaic_libnbd)]
    pub fn connect(uri: &str) -> io::Result<NbdMember> {
        let first = ffi::Handle::connect(uri)?;
        let size = first.size()?;
        let (can_flush, read_only, multi) = (first.flag(ffi::nbd_can_flush)?, first.flag(ffi::nbd_is_read_only)?, first.flag(ffi::nbd_can_multi_conn)?);
        let max_request = first.max_block().filter(|&m| m > 0).map_or(MAX_REQUEST, |m| m.min(MAX_REQUEST));
        let mut conns = vec![parking_lot::Mutex::new(first)];
        // More connections only where the server keeps them consistent;
        // one that fails to connect is simply not used.
        while multi && conns.len() < MAX_CONNS {
            match ffi::Handle::connect(uri) {
                Ok(h) => conns.push(parking_lot::Mutex::new(h)),
                Err(_) => break,
            }
        }
        Ok(NbdMember { uri: uri.to_string(), size, conns, next: Default::default(), can_flush, read_only, max_request })
    }

    #[cfg(not(mosaic_libnbd))]
    pub fn connect(uri: &str) -> io::Result<NbdMember> {
        Err(io::Error::new(io::ErrorKind::Unsupported, format!("{uri}: this mosaic was built without libnbd, so it cannot reach remote members; install libnbd-dev and rebuild")))
    }

    /// Connections open to the export.
    pub fn connections(&self) -> usize {
        #[cfg(mosaic_libnbd)]
        return self.conns.len();
        #[cfg(not(mosaic_libnbd))]
        0
    }

    /// Run `f` on each piece of `[offset, offset + len)` no larger than the
    /// server takes, each on a free connection.
    #[cfg(mosaic_libnbd)]
    fn pieces(&self, offset: u64, len: usize, mut f: impl FnMut(&ffi::Handle, u64, std::ops::Range<usize>) -> io::Result<()>) -> io::Result<()> {
        crate::range_check(&self.uri, self.size, offset, len)?;
        let mut done = 0usize;
        while done < len {
            let n = (len - done).min(self.max_request as usize);
            let h = self.free();
            f(&h, offset + done as u64, done..done + n).map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", self.uri)))?;
            done += n;
        }
        Ok(())
    }

    /// A connection no other thread is using, or the next one in turn.
    #[cfg(mosaic_libnbd)]
    fn free(&self) -> parking_lot::MutexGuard<'_, ffi::Handle> {
        let start = self.next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let n = self.conns.len();
        (0..n).find_map(|i| self.conns[(start + i) % n].try_lock()).unwrap_or_else(|| self.conns[start % n].lock())
    }
}

#[cfg(mosaic_libnbd)]
impl Member for NbdMember {
    fn describe(&self) -> String {
        self.uri.clone()
    }
    fn size(&self) -> u64 {
        self.size
    }
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        self.pieces(offset, buf.len(), |h, off, r| h.pread(&mut buf[r], off))
    }
    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        if self.read_only {
            return Err(io::Error::new(io::ErrorKind::PermissionDenied, format!("{}: the server exports it read-only", self.uri)));
        }
        self.pieces(offset, buf.len(), |h, off, r| h.pwrite(&buf[r], off))
    }
    /// With multi-conn, a flush on one connection covers every
    /// connection's completed writes (NBD spec); a server that cannot
    /// flush writes through.
    fn flush(&self) -> io::Result<()> {
        if !self.can_flush {
            return Ok(());
        }
        self.free().flush().map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", self.uri)))
    }
}

#[cfg(not(mosaic_libnbd))]
impl Member for NbdMember {
    fn describe(&self) -> String {
        self.uri.clone()
    }
    fn size(&self) -> u64 {
        self.size
    }
    fn read_at(&self, _buf: &mut [u8], _offset: u64) -> io::Result<()> {
        Err(io::Error::from(io::ErrorKind::Unsupported))
    }
    fn write_at(&self, _buf: &[u8], _offset: u64) -> io::Result<()> {
        Err(io::Error::from(io::ErrorKind::Unsupported))
    }
    fn flush(&self) -> io::Result<()> {
        Err(io::Error::from(io::ErrorKind::Unsupported))
    }
}

/// The few libnbd calls used, declared here (only the shared library is
/// needed at build time).
#[cfg(mosaic_libnbd)]
mod ffi {
    use std::ffi::{c_char, c_int, c_void, CStr, CString};
    use std::io;

    #[repr(C)]
    pub struct NbdHandle {
        _private: [u8; 0],
    }

    /// `nbd_get_block_size`'s size type for the largest request.
    const LIBNBD_SIZE_MAXIMUM: c_int = 2;

    extern "C" {
        fn nbd_create() -> *mut NbdHandle;
        fn nbd_close(h: *mut NbdHandle);
        fn nbd_connect_uri(h: *mut NbdHandle, uri: *const c_char) -> c_int;
        fn nbd_get_size(h: *mut NbdHandle) -> i64;
        fn nbd_get_block_size(h: *mut NbdHandle, size_type: c_int) -> i64;
        fn nbd_pread(h: *mut NbdHandle, buf: *mut c_void, count: usize, offset: u64, flags: u32) -> c_int;
        fn nbd_pwrite(h: *mut NbdHandle, buf: *const c_void, count: usize, offset: u64, flags: u32) -> c_int;
        fn nbd_flush(h: *mut NbdHandle, flags: u32) -> c_int;
        fn nbd_get_error() -> *const c_char;
        fn nbd_get_errno() -> c_int;
        pub fn nbd_can_flush(h: *mut NbdHandle) -> c_int;
        pub fn nbd_can_multi_conn(h: *mut NbdHandle) -> c_int;
        pub fn nbd_is_read_only(h: *mut NbdHandle) -> c_int;
    }

    /// The calling thread's last libnbd error.
    fn last_error() -> io::Error {
        // SAFETY: libnbd keeps the error per thread; the string is valid
        // until the next libnbd call on this thread, and copied at once.
        let msg = unsafe {
            let p = nbd_get_error();
            if p.is_null() {
                "unknown libnbd error".to_string()
            } else {
                CStr::from_ptr(p).to_string_lossy().into_owned()
            }
        };
        // SAFETY: no arguments; reads the thread's saved errno.
        let errno = unsafe { nbd_get_errno() };
        let kind = if errno > 0 { io::Error::from_raw_os_error(errno).kind() } else { io::ErrorKind::Other };
        io::Error::new(kind, msg)
    }

    fn check(r: c_int) -> io::Result<()> {
        if r == -1 {
            Err(last_error())
        } else {
            Ok(())
        }
    }

    /// One connected libnbd handle.
    pub struct Handle(*mut NbdHandle);

    // SAFETY: libnbd handles are thread-safe (every call takes the
    // handle's own lock); the pointer is owned here and closed once.
    unsafe impl Send for Handle {}
    unsafe impl Sync for Handle {}

    impl Drop for Handle {
        fn drop(&mut self) {
            // SAFETY: created by nbd_create, closed only here.
            unsafe { nbd_close(self.0) }
        }
    }

    impl Handle {
        pub fn connect(uri: &str) -> io::Result<Handle> {
            let c = CString::new(uri).map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, format!("{uri:?}: a NUL byte in the URI")))?;
            // SAFETY: nbd_create has no preconditions; NULL means failure.
            let h = unsafe { nbd_create() };
            if h.is_null() {
                return Err(last_error());
            }
            let h = Handle(h);
            // SAFETY: a fresh handle and a NUL-terminated string.
            check(unsafe { nbd_connect_uri(h.0, c.as_ptr()) }).map_err(|e| io::Error::new(e.kind(), format!("{uri}: {e}")))?;
            Ok(h)
        }
        pub fn size(&self) -> io::Result<u64> {
            // SAFETY: a connected handle.
            let s = unsafe { nbd_get_size(self.0) };
            u64::try_from(s).map_err(|_| last_error())
        }
        /// The server's largest request, when it says.
        pub fn max_block(&self) -> Option<u64> {
            // SAFETY: a connected handle.
            u64::try_from(unsafe { nbd_get_block_size(self.0, LIBNBD_SIZE_MAXIMUM) }).ok()
        }
        pub fn flag(&self, f: unsafe extern "C" fn(*mut NbdHandle) -> c_int) -> io::Result<bool> {
            // SAFETY: a connected handle; the flag getters take only it.
            let r = unsafe { f(self.0) };
            if r == -1 {
                Err(last_error())
            } else {
                Ok(r == 1)
            }
        }
        pub fn pread(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
            // SAFETY: buf is valid for buf.len() bytes of writes.
            check(unsafe { nbd_pread(self.0, buf.as_mut_ptr().cast(), buf.len(), offset, 0) })
        }
        pub fn pwrite(&self, buf: &[u8], offset: u64) -> io::Result<()> {
            // SAFETY: buf is valid for buf.len() bytes of reads.
            check(unsafe { nbd_pwrite(self.0, buf.as_ptr().cast(), buf.len(), offset, 0) })
        }
        pub fn flush(&self) -> io::Result<()> {
            // SAFETY: a connected handle.
            check(unsafe { nbd_flush(self.0, 0) })
        }
    }
}

#[cfg(all(test, mosaic_libnbd))]
mod tests {
    use super::*;
    use std::process::{Child, Command, Stdio};
    use std::time::{Duration, Instant};

    /// qemu-nbd serving `file` on a unix socket, for `shared` clients.
    struct Server(Child);

    impl Drop for Server {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }

    fn serve(file: &std::path::Path, sock: &std::path::Path, shared: u32) -> Server {
        let child = Command::new("qemu-nbd")
            .args(["-f", "raw", "-x", "m", "--persistent", "--cache=writeback", &format!("--shared={shared}"), "-k"])
            .arg(sock)
            .arg(file)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("qemu-nbd (Debian's qemu-utils; scripts/test.sh installs it)");
        let t0 = Instant::now();
        while !sock.exists() && t0.elapsed() < Duration::from_secs(20) {
            std::thread::sleep(Duration::from_millis(20));
        }
        Server(child)
    }

    #[test]
    fn uris_are_told_from_paths() {
        assert!(is_uri("nbd://h/e") && is_uri("nbds://h:1/e") && is_uri("nbd+unix:///e?socket=/s"));
        assert!(!is_uri("/tmp/nbd://x") && !is_uri("member-00.img") && !is_uri("nbd:/x"));
    }

    #[test]
    fn an_export_reads_back_what_was_written_across_split_requests() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("m.img");
        std::fs::write(&file, vec![0u8; 48 << 20]).unwrap();
        let sock = dir.path().join("s.sock");
        let _srv = serve(&file, &sock, 4);
        let uri = format!("nbd+unix:///m?socket={}", sock.display());
        let m = NbdMember::connect(&uri).unwrap();
        assert_eq!(m.size(), 48 << 20);
        assert_eq!(m.describe(), uri);
        assert_eq!(m.connections(), MAX_CONNS, "qemu-nbd --shared=4 advertises multi-conn");
        // Larger than one request: split, and the pieces land in order.
        let data: Vec<u8> = (0..(40u32 << 20)).map(|i| (i.wrapping_mul(2654435761) >> 11) as u8).collect();
        m.write_at(&data, 4096).unwrap();
        m.flush().unwrap();
        let mut back = vec![0u8; data.len()];
        m.read_at(&mut back, 4096).unwrap();
        assert!(back == data);
        // Concurrent requests from several threads, on several connections.
        let m = std::sync::Arc::new(m);
        let ts: Vec<_> = (0..4u8)
            .map(|t| {
                let m = m.clone();
                std::thread::spawn(move || {
                    for i in 0..64u64 {
                        let off = (t as u64 * 64 + i) * 8192;
                        m.write_at(&[t ^ i as u8; 8192], off).unwrap();
                        let mut b = [0u8; 8192];
                        m.read_at(&mut b, off).unwrap();
                        assert!(b.iter().all(|&x| x == t ^ i as u8));
                    }
                })
            })
            .collect();
        ts.into_iter().for_each(|t| t.join().unwrap());
        m.flush().unwrap();
        // The bytes are on the server's file.
        let f = std::fs::read(&file).unwrap();
        assert_eq!(f[8192 * 65], 1 ^ 1);
        assert_eq!(&f[(64 * 4) * 8192 + 4096..][..1 << 20], &data[(64 * 4) * 8192..][..1 << 20]);
        // Out of range and a server that is gone are clear errors.
        let e = m.read_at(&mut [0u8; 8], 48 << 20).unwrap_err().to_string();
        assert!(e.contains("beyond device size"), "{e}");
        let e = NbdMember::connect(&format!("nbd+unix:///m?socket={}", dir.path().join("none.sock").display())).unwrap_err().to_string();
        assert!(e.contains("none.sock"), "{e}");
    }
}
