//! TLS for NBD connections (`NBD_OPT_STARTTLS`), as nbdkit's `--tls`,
//! with certificates (rustls) or with pre-shared keys (`--tls-psk`,
//! OpenSSL: [`crate::psk`]).
//!
//! The certificates live in one directory, named as nbdkit and libnbd
//! name them:
//!
//! ```text
//!   DIR/server-cert.pem   the server's certificate (chain), PEM
//!   DIR/server-key.pem    its private key (PKCS#8, PKCS#1 or SEC1), PEM
//!   DIR/ca-cert.pem       with verify_peer: the CA that signs client
//!                         certificates (libnbd sends DIR/client-cert.pem)
//! ```
//!
//! The handshake ([`crate::handshake`]) answers `NBD_OPT_STARTTLS`; the
//! TLS handshake then runs on the socket, and the connection goes on as a
//! [`Stream::Tls`]: the rest of the option haggling, then transmission,
//! read and written by the same code as a plain socket, rustls encrypting
//! and decrypting in place on the reader's and the replier's threads (see
//! [`TlsStream`]).
//!
//! ```text
//!   client ══ TLS over TCP or a unix socket ══▶ TlsStream (a Session, one lock)
//!                                                 ├─ reader thread: recv, decrypt
//!                                                 └─ replier: encrypt, sendmsg
//! ```
//!
//! A first version moved the bytes through a pump thread and a socket
//! pair: two more copies and two more wake-ups a request, which put
//! nbdcopy's reads through TLS at 0.63x nbdkit's.

use std::fmt;
use std::io::{self, Read, Write};
use std::net::Shutdown;
use std::sync::Mutex;
use std::time::{Duration, Instant};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::WebPkiClientVerifier;
use rustls::{RootCertStore, ServerConfig, ServerConnection};

use crate::psk::{PskServer, PskSession};
use crate::stream::Stream;

/// Whether clients may, or must, use TLS (nbdkit's `--tls=on|require`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TlsMode {
    /// Offered: a client may start TLS or stay in plain text.
    On,
    /// Required: before STARTTLS every option but ABORT is refused
    /// (`NBD_REP_ERR_TLS_REQD`), and `NBD_OPT_EXPORT_NAME` closes.
    Require,
}

/// A loaded TLS setup: the mode and what proves the server (and, with
/// pre-shared keys or `verify_peer`, its clients).
#[derive(Clone)]
pub struct Tls {
    pub mode: TlsMode,
    /// Client certificates are asked for and checked against
    /// `ca-cert.pem` (nbdkit's `--tls-verify-peer`).
    pub verify_peer: bool,
    engine: Engine,
}

/// Certificates from a directory, served by rustls; or a keys file,
/// served by OpenSSL.
#[derive(Clone)]
enum Engine {
    Certificates { dir: PathBuf, config: Arc<ServerConfig> },
    Psk(PskServer),
}

impl fmt::Debug for Tls {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Tls").field("mode", &self.mode).field("verify_peer", &self.verify_peer).field("credentials", &self.describe()).finish()
    }
}

/// rustls on *ring*: it builds with the C compiler alone (aws-lc-rs wants
/// cmake and minutes of build), and its classical key exchanges are the
/// ones GnuTLS clients (libnbd, qemu) offer; rustls 0.23.48 deprecates it
/// for lacking post-quantum groups.
#[allow(deprecated)]
pub fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// Every certificate of a PEM file, or a clear error naming it.
fn certs(path: &Path) -> Result<Vec<CertificateDer<'static>>, String> {
    let all = CertificateDer::pem_file_iter(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let certs = all.collect::<Result<Vec<_>, _>>().map_err(|e| format!("{}: {e}", path.display()))?;
    if certs.is_empty() {
        return Err(format!("{}: no PEM certificate in it", path.display()));
    }
    Ok(certs)
}

impl Tls {
    /// Load `dir/server-cert.pem`, `dir/server-key.pem` and, when
    /// `verify_peer`, `dir/ca-cert.pem`.  Every problem (a missing file, no
    /// certificate in it, a key that does not match) is an error that
    /// names the file.
    pub fn load(dir: &Path, mode: TlsMode, verify_peer: bool) -> Result<Tls, String> {
        let chain = certs(&dir.join("server-cert.pem"))?;
        let key_path = dir.join("server-key.pem");
        let key = PrivateKeyDer::from_pem_file(&key_path).map_err(|e| format!("{}: {e}", key_path.display()))?;
        let builder = ServerConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .map_err(|e| format!("TLS: {e}"))?;
        let builder = if verify_peer {
            let ca = dir.join("ca-cert.pem");
            let mut roots = RootCertStore::empty();
            for c in certs(&ca)? {
                roots.add(c).map_err(|e| format!("{}: {e}", ca.display()))?;
            }
            let v = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider())
                .build()
                .map_err(|e| format!("{}: {e}", ca.display()))?;
            builder.with_client_cert_verifier(v)
        } else {
            builder.with_no_client_auth()
        };
        let config = builder
            .with_single_cert(chain, key)
            .map_err(|e| format!("{} and {}: {e}", dir.join("server-cert.pem").display(), key_path.display()))?;
        Ok(Tls { mode, verify_peer, engine: Engine::Certificates { dir: dir.to_path_buf(), config: Arc::new(config) } })
    }

    /// Load a keys file of usernames and pre-shared keys (GnuTLS's
    /// `psktool` format, nbdkit's `--tls-psk`); an error names the file
    /// and the line.  Every client proves a key, so there is no
    /// `verify_peer` to ask for.
    pub fn load_psk(file: &Path, mode: TlsMode) -> Result<Tls, String> {
        Ok(Tls { mode, verify_peer: false, engine: Engine::Psk(PskServer::load(file)?) })
    }

    /// What the server's TLS rests on, for a log line.
    pub fn describe(&self) -> String {
        match &self.engine {
            Engine::Certificates { dir, .. } => format!("the certificates in {}", dir.display()),
            Engine::Psk(p) => format!("the pre-shared keys in {} ({} usernames)", p.file.display(), p.keys.users().count()),
        }
    }

    /// The URI clients of this server use, from the plain one: with TLS
    /// required, the `nbds` scheme and this certificate directory (libnbd
    /// checks the server against its `ca-cert.pem`, and sends its
    /// `client-cert.pem` when peers are verified), or the keys file and
    /// its first username; as a local client such as `serve --run` would
    /// connect.  With TLS offered, the plain URI.
    pub fn client_uri(&self, plain: &str) -> String {
        if self.mode != TlsMode::Require {
            return plain.to_string();
        }
        let (scheme, rest) = plain.split_once("://").unwrap_or(("nbd", plain));
        let scheme = scheme.replacen("nbd", "nbds", 1);
        let (rest, param) = match &self.engine {
            Engine::Certificates { dir, .. } => (rest.to_string(), format!("tls-certificates={}", dir.display())),
            Engine::Psk(p) => {
                let user = p.keys.users().next().unwrap_or_default();
                (format!("{}@{rest}", uri_escape(user)), format!("tls-psk-file={}", p.file.display()))
            }
        };
        let sep = if rest.contains('?') { '&' } else { '?' };
        format!("{scheme}://{rest}{sep}{param}")
    }

    /// Run the TLS handshake on `sock` (whose timeouts the caller set:
    /// the NBD handshake's deadline; `plain` is the same socket), then
    /// return the stream that carries the connection from now on.
    pub fn start<S: Read + Write>(&self, sock: &mut S, plain: Stream) -> io::Result<Stream> {
        let hs = |e: io::Error| io::Error::new(e.kind(), format!("TLS handshake: {e}"));
        let mut session = match &self.engine {
            Engine::Certificates { config, .. } => {
                let mut conn = ServerConnection::new(config.clone()).map_err(io::Error::other)?;
                // `TlsStream::write_bufs` bounds what is queued itself (a
                // piece at a time); rustls's own limit would cut a piece
                // short.
                conn.set_buffer_limit(None);
                while conn.is_handshaking() {
                    conn.complete_io(sock).map_err(hs)?;
                }
                Session::Certificates(conn)
            }
            Engine::Psk(p) => {
                let mut s = p.session()?;
                let mut buf = vec![0; 16 << 10];
                while !s.handshake().map_err(hs)? {
                    while s.wants_write() {
                        s.write_tls(sock).map_err(hs)?;
                    }
                    match sock.read(&mut buf).map_err(hs)? {
                        0 => s.feed_eof(),
                        n => _ = s.feed(&buf[..n]),
                    }
                }
                tracing::debug!("TLS: PSK username {:?} proved its key ({})", s.username().unwrap_or_default(), s.cipher());
                Session::Psk(Box::new(s))
            }
        };
        // The handshake's last flight may still be buffered.
        while session.wants_write() {
            session.write_tls(sock)?;
        }
        TlsStream::new(session, plain).map(|t| Stream::Tls(Arc::new(t)))
    }
}

/// A URI's userinfo: unreserved characters kept, the rest %-escaped.
fn uri_escape(s: &str) -> String {
    s.bytes()
        .map(|b| if b.is_ascii_alphanumeric() || b"-._~".contains(&b) { (b as char).to_string() } else { format!("%{b:02X}") })
        .collect()
}

/// One connection's TLS state, whichever engine runs it: rustls's
/// `ServerConnection` and [`crate::psk`]'s OpenSSL session, both fed and
/// drained of ciphertext by [`TlsStream`] alike.
enum Session {
    Certificates(ServerConnection),
    Psk(Box<PskSession>),
}

impl Session {
    /// Plaintext decrypted: `WouldBlock` when there is none yet, `Ok(0)`
    /// after close_notify, `UnexpectedEof` when the socket ended without.
    fn read_plain(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Session::Certificates(c) => c.reader().read(buf),
            Session::Psk(p) => p.read_plain(buf),
        }
    }

    /// Ciphertext from the socket (an empty slice: EOF); the bytes taken.
    fn read_tls(&mut self, ct: &[u8]) -> io::Result<usize> {
        match self {
            Session::Certificates(c) => c.read_tls(&mut &ct[..]),
            Session::Psk(p) if ct.is_empty() => {
                p.feed_eof();
                Ok(0)
            }
            Session::Psk(p) => Ok(p.feed(ct)),
        }
    }

    /// Decrypt what was fed (OpenSSL does it as it is read).
    fn process(&mut self) -> Result<(), String> {
        match self {
            Session::Certificates(c) => c.process_new_packets().map(|_| ()).map_err(|e| e.to_string()),
            Session::Psk(_) => Ok(()),
        }
    }

    fn wants_write(&self) -> bool {
        match self {
            Session::Certificates(c) => c.wants_write(),
            Session::Psk(p) => p.wants_write(),
        }
    }

    /// Queued records through `w`: the bytes it took.
    fn write_tls(&mut self, w: &mut dyn Write) -> io::Result<usize> {
        match self {
            Session::Certificates(c) => c.write_tls(w),
            Session::Psk(p) => p.write_tls(w),
        }
    }

    /// Plaintext encrypted into queued records.
    fn write_plain(&mut self, p: &[u8]) -> io::Result<()> {
        match self {
            Session::Certificates(c) => c.writer().write_all(p),
            Session::Psk(s) => s.write_plain(p),
        }
    }

    fn close_notify(&mut self) {
        match self {
            Session::Certificates(c) => c.send_close_notify(),
            Session::Psk(p) => p.close_notify(),
        }
    }
}

/// Ciphertext read from the socket per system call at most (rustls takes
/// it 4 KiB at a time from this buffer, not from the socket).
const RAW_BUFFER: usize = 256 << 10;

/// Plaintext encrypted per step of a send: records of it stay in the
/// CPU's cache until the socket has copied them.
const SEND_PIECE: usize = 64 << 10;

/// The TLS state and the ciphertext read but not yet given to it.
struct Inner {
    conn: Session,
    raw: Vec<u8>,
    at: usize,
    len: usize,
    /// The socket said EOF (or was shut for reading) and rustls was told.
    eof: bool,
}

/// One TLS connection as a stream: the reader and the replier of
/// [`crate::conn`] share it (both hold an `Arc`), each taking the lock
/// only to hand bytes to or take them from rustls, never while waiting
/// for the socket (received and sent with `MSG_DONTWAIT`, polled outside
/// the lock).
///
/// ```text
///   read:  plaintext rustls holds ─▶ caller; none: ciphertext staged
///          (RAW_BUFFER, one recv) ─▶ rustls ─▶ decrypt; none staged:
///          recv; nothing there: unlock, poll(POLLIN) for the read timeout
///   write: the buffers, SEND_PIECE at a time ─▶ rustls (encrypted in
///          order) ─▶ sendmsg as the socket takes it, then the next
///          piece; full: unlock, poll(POLLOUT) until the deadline
/// ```
///
/// Records go out in the order rustls queued them whichever thread sends
/// them (the queue is taken under the lock), so a reply and the key update
/// a client asked for never interleave wrongly.
pub struct TlsStream {
    inner: Mutex<Inner>,
    sock: Stream,
    read_timeout: Mutex<Option<Duration>>,
    write_timeout: Mutex<Option<Duration>>,
}

impl fmt::Debug for TlsStream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TlsStream").field("sock", &self.sock).finish()
    }
}

/// The socket had nothing to give, or no room.
fn again(e: &io::Error) -> bool {
    e.kind() == io::ErrorKind::WouldBlock
}

/// The socket written without blocking (`MSG_DONTWAIT`), whatever its
/// mode: rustls's `write_tls` sends its queued records through it.
struct NoWait<'a>(&'a Stream);

impl Write for NoWait<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.send_now(&[io::IoSlice::new(buf)])
    }
    fn write_vectored(&mut self, bufs: &[io::IoSlice<'_>]) -> io::Result<usize> {
        self.0.send_now(bufs)
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl TlsStream {
    fn new(conn: Session, sock: Stream) -> io::Result<TlsStream> {
        sock.set_read_timeout(None)?;
        sock.set_write_timeout(None)?;
        let inner = Inner { conn, raw: vec![0; RAW_BUFFER], at: 0, len: 0, eof: false };
        Ok(TlsStream { inner: Mutex::new(inner), sock, read_timeout: Mutex::new(None), write_timeout: Mutex::new(None) })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(crate) fn fd(&self) -> std::os::fd::RawFd {
        self.sock.fd()
    }

    pub(crate) fn socket(&self) -> &Stream {
        &self.sock
    }

    pub(crate) fn set_read_timeout(&self, t: Option<Duration>) {
        *self.read_timeout.lock().unwrap_or_else(|e| e.into_inner()) = t;
    }

    pub(crate) fn set_write_timeout(&self, t: Option<Duration>) {
        *self.write_timeout.lock().unwrap_or_else(|e| e.into_inner()) = t;
    }

    /// Read plaintext: what rustls holds, else decrypt what is staged,
    /// else one `recv`; block (the lock released) only when none of them
    /// gives a byte.  `Ok(0)` at the end (close_notify, or the client
    /// closed: NBD requests are framed, so a cut stream shows as a short
    /// request, never as forged data); a read timeout is `WouldBlock`, as
    /// a socket's SO_RCVTIMEO.
    pub(crate) fn read(&self, buf: &mut [u8]) -> io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        let timeout = *self.read_timeout.lock().unwrap_or_else(|e| e.into_inner());
        let end = timeout.map(|t| Instant::now() + t);
        loop {
            if let Some(n) = self.read_some(buf)? {
                return Ok(n);
            }
            let left = end.map(|e| e.saturating_duration_since(Instant::now()));
            if left.is_some_and(|l| l.is_zero()) {
                return Err(io::ErrorKind::WouldBlock.into());
            }
            self.wait(libc::POLLIN, left)?;
        }
    }

    /// One pass of [`TlsStream::read`] under the lock: `None` when the
    /// socket has nothing yet.
    fn read_some(&self, buf: &mut [u8]) -> io::Result<Option<usize>> {
        let mut g = self.lock();
        let Inner { conn, raw, at, len, eof } = &mut *g;
        let mut n = 0;
        loop {
            match conn.read_plain(&mut buf[n..]) {
                Ok(0) => return Ok(Some(n)),
                Ok(k) => n += k,
                Err(e) if again(&e) => {}
                Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(Some(n)),
                Err(e) => {
                    // The alert queued goes out if the socket takes it.
                    let _ = Self::send_queued(conn, &self.sock);
                    return Err(e);
                }
            }
            if n == buf.len() {
                return Ok(Some(n));
            }
            if *at < *len {
                *at += conn.read_tls(&raw[*at..*len])?;
            } else if n > 0 {
                return Ok(Some(n));
            } else if *eof {
                // rustls knows: its reader said so above; not reached.
                return Ok(Some(0));
            } else {
                match self.sock.recv_now(raw) {
                    Ok(0) => {
                        *eof = true;
                        conn.read_tls(&[])?;
                    }
                    Ok(k) => (*at, *len) = (0, k),
                    Err(e) if again(&e) => return Ok(None),
                    Err(e) => return Err(e),
                }
            }
            if let Err(e) = conn.process() {
                // The alert rustls queued goes out if the socket takes it.
                let _ = Self::send_queued(conn, &self.sock);
                return Err(io::Error::new(io::ErrorKind::InvalidData, format!("TLS: {e}")));
            }
            // A key update the client asked for: sent when the socket
            // takes it, else with the next reply.
            Self::send_queued(conn, &self.sock)?;
        }
    }

    /// Send what rustls has queued, as much as the socket takes now; true
    /// when nothing is left.
    fn send_queued(conn: &mut Session, sock: &Stream) -> io::Result<bool> {
        while conn.wants_write() {
            match conn.write_tls(&mut NoWait(sock)) {
                Ok(_) => {}
                Err(e) if again(&e) => return Ok(false),
                Err(e) => return Err(e),
            }
        }
        Ok(true)
    }

    /// Encrypt `bufs` in order and send them, a piece at a time (so what
    /// is encrypted is still in the CPU's cache when the socket copies
    /// it); when the socket has no room, wait (the lock released) until
    /// `deadline()` (asked once), or without one the write timeout; then
    /// `TimedOut`.
    pub(crate) fn write_bufs(&self, bufs: &[&[u8]], deadline: Option<&mut dyn FnMut() -> Instant>) -> io::Result<()> {
        let mut deadline = deadline;
        let mut end: Option<Option<Instant>> = None;
        let (mut i, mut off) = (0, 0);
        loop {
            let sent = {
                let mut g = self.lock();
                // More plaintext in once the last piece has gone out.
                if !g.conn.wants_write() {
                    let mut room = SEND_PIECE;
                    while room > 0 && i < bufs.len() {
                        let n = (bufs[i].len() - off).min(room);
                        g.conn.write_plain(&bufs[i][off..off + n])?;
                        (room, off) = (room - n, off + n);
                        if off == bufs[i].len() {
                            (i, off) = (i + 1, 0);
                        }
                    }
                }
                Self::send_queued(&mut g.conn, &self.sock)?
            };
            if sent && i == bufs.len() {
                return Ok(());
            }
            if sent {
                continue;
            }
            let end = *end.get_or_insert_with(|| match deadline.as_mut() {
                Some(d) => Some(d()),
                None => self.write_timeout.lock().unwrap_or_else(|e| e.into_inner()).map(|t| Instant::now() + t),
            });
            let left = end.map(|e| e.saturating_duration_since(Instant::now()));
            if left.is_some_and(|l| l.is_zero()) {
                return Err(io::Error::new(io::ErrorKind::TimedOut, "the peer took no more bytes in time"));
            }
            self.wait(libc::POLLOUT, left)?;
        }
    }

    /// Shut the connection: for writing, close_notify first (if the socket
    /// takes it now).
    pub(crate) fn shutdown(&self, how: Shutdown) -> io::Result<()> {
        if how != Shutdown::Read {
            let mut g = self.lock();
            g.conn.close_notify();
            let _ = Self::send_queued(&mut g.conn, &self.sock);
        }
        self.sock.shutdown(how)
    }

    /// poll(2) the socket for `events`, at most `left` (none: no limit).
    fn wait(&self, events: libc::c_short, left: Option<Duration>) -> io::Result<()> {
        let mut p = libc::pollfd { fd: self.sock.fd(), events, revents: 0 };
        // Rounded up: a wake-up a little early would only poll again.
        let ms = left.map_or(-1, |l| (l + Duration::from_micros(999)).as_millis().min(i32::MAX as u128) as libc::c_int);
        // SAFETY: one valid pollfd on a descriptor owned by self.
        if unsafe { libc::poll(&mut p, 1, ms) } < 0 {
            let e = io::Error::last_os_error();
            if e.kind() != io::ErrorKind::Interrupted {
                return Err(e);
            }
        }
        Ok(())
    }
}

/// Write a fresh CA and a server and a client certificate signed by it
/// into `dir`, named as [`Tls::load`] and libnbd read them (`ca-cert.pem`,
/// `server-cert.pem`, `server-key.pem`, `client-cert.pem`,
/// `client-key.pem`): one directory serves as both the server's and a
/// client's.  The server certificate names `hosts` (`localhost` for
/// tests).  For tests and trials, as `certtool` would make them.
pub fn test_certs(dir: &Path, hosts: &[&str]) -> Result<(), String> {
    use rcgen::{BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose as Eku, IsCa, KeyPair, KeyUsagePurpose};
    let err = |e: rcgen::Error| format!("making test certificates: {e}");
    let ca_key = KeyPair::generate().map_err(err)?;
    let mut ca = CertificateParams::new(Vec::<String>::new()).map_err(err)?;
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign, KeyUsagePurpose::DigitalSignature];
    ca.distinguished_name.push(DnType::CommonName, "mosaic test CA");
    let ca = ca.self_signed(&ca_key).map_err(err)?;
    let mut files = vec![("ca-cert.pem", ca.pem())];
    for (who, names, eku) in [("server", hosts.iter().map(|h| h.to_string()).collect(), Eku::ServerAuth), ("client", vec![], Eku::ClientAuth)] {
        let key = KeyPair::generate().map_err(err)?;
        let mut p = CertificateParams::new(names).map_err(err)?;
        p.distinguished_name.push(DnType::CommonName, format!("mosaic test {who}"));
        p.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        p.extended_key_usages = vec![eku];
        let cert = p.signed_by(&key, &ca, &ca_key).map_err(err)?;
        files.push((if who == "server" { "server-cert.pem" } else { "client-cert.pem" }, cert.pem()));
        files.push((if who == "server" { "server-key.pem" } else { "client-key.pem" }, key.serialize_pem()));
    }
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    for (name, pem) in files {
        let p = dir.join(name);
        std::fs::write(&p, pem).map_err(|e| format!("{}: {e}", p.display()))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_required_tls_client_uri_names_the_scheme_and_the_certificates() {
        let d = tempfile::tempdir().unwrap();
        test_certs(d.path(), &["localhost"]).unwrap();
        let t = Tls::load(d.path(), TlsMode::Require, false).unwrap();
        let dir = d.path().display();
        assert_eq!(t.client_uri("nbd://127.0.0.1:5/x"), format!("nbds://127.0.0.1:5/x?tls-certificates={dir}"));
        assert_eq!(t.client_uri("nbd+unix:///x?socket=/s"), format!("nbds+unix:///x?socket=/s&tls-certificates={dir}"));
        let t = Tls::load(d.path(), TlsMode::On, false).unwrap();
        assert_eq!(t.client_uri("nbd://127.0.0.1:5/x"), "nbd://127.0.0.1:5/x", "offered: plain clients too");
    }
}
