//! TLS for NBD connections (`NBD_OPT_STARTTLS`), as nbdkit's `--tls`.
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
//! TLS handshake then runs on the socket, and the connection goes on
//! through a *pump*: one thread that holds the TLS state and moves bytes
//! between the client's socket and one end of a socket pair, whose other
//! end is the plain [`Stream`] the rest of the server reads and writes as
//! if no TLS were there.  Everything after STARTTLS (the rest of the
//! option haggling, then transmission) goes through it.
//!
//! ```text
//!   client ══ TLS over TCP ══▶ pump thread ◀── unix socket pair ──▶ reader / replier
//!                              (rustls: decrypt ▶, ◀ encrypt)        (conn.rs, unchanged)
//!
//!   client closes, or the server stops (shutdown(READ) on the TCP socket):
//!     pump shuts the pair's write side ─▶ the reader sees EOF, in-flight
//!     replies still go out ─▶ the connection closes its end ─▶ pump sends
//!     close_notify and closes the TCP socket.
//! ```
//!
//! Flow control: the pump reads the client only when rustls holds no
//! undelivered plaintext and the pair has taken what was decrypted, and
//! reads the server side only when the encrypted output has gone out, so
//! a client that stops reading stops the replier (whose own `io_timeout`
//! then closes the connection), as on a plain socket.

use std::fmt;
use std::io::{self, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::WebPkiClientVerifier;
use rustls::{RootCertStore, ServerConfig, ServerConnection};

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

/// A loaded TLS setup: the mode and the server's rustls configuration.
#[derive(Clone)]
pub struct Tls {
    pub mode: TlsMode,
    /// Client certificates are asked for and checked against
    /// `ca-cert.pem` (nbdkit's `--tls-verify-peer`).
    pub verify_peer: bool,
    pub dir: PathBuf,
    config: Arc<ServerConfig>,
}

impl fmt::Debug for Tls {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Tls").field("mode", &self.mode).field("verify_peer", &self.verify_peer).field("dir", &self.dir).finish()
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
        Ok(Tls { mode, verify_peer, dir: dir.to_path_buf(), config: Arc::new(config) })
    }

    /// The URI clients of this server use, from the plain one: with TLS
    /// required, the `nbds` scheme and this certificate directory (libnbd
    /// checks the server against its `ca-cert.pem`, and sends its
    /// `client-cert.pem` when peers are verified), as a local client such
    /// as `serve --run` would connect; with TLS offered, the plain URI.
    pub fn client_uri(&self, plain: &str) -> String {
        if self.mode != TlsMode::Require {
            return plain.to_string();
        }
        let s = plain.replacen("nbd://", "nbds://", 1).replacen("nbd+unix://", "nbds+unix://", 1);
        let sep = if s.contains('?') { '&' } else { '?' };
        format!("{s}{sep}tls-certificates={}", self.dir.display())
    }

    /// Run the TLS handshake on `sock` (whose timeouts the caller set:
    /// the NBD handshake's deadline), then start the pump; the stream
    /// returned carries the connection's plain text from now on.
    pub fn start<S: Read + Write>(&self, sock: &mut S, tcp: Stream, name: String) -> io::Result<Stream> {
        let mut conn = ServerConnection::new(self.config.clone()).map_err(io::Error::other)?;
        // The pump bounds what it hands rustls itself (see `Pump::encrypt`).
        conn.set_buffer_limit(None);
        while conn.is_handshaking() {
            conn.complete_io(sock).map_err(|e| io::Error::new(e.kind(), format!("TLS handshake: {e}")))?;
        }
        // The handshake's last flight may still be buffered.
        while conn.wants_write() {
            conn.write_tls(sock)?;
        }
        let (ours, theirs) = UnixStream::pair()?;
        for s in [&ours, &theirs] {
            s.set_read_timeout(None)?;
            s.set_write_timeout(None)?;
        }
        tcp.set_read_timeout(None)?;
        tcp.set_write_timeout(None)?;
        std::thread::Builder::new().name(name).spawn(move || Pump::new(conn, tcp, Stream::Unix(ours)).run())?;
        Ok(Stream::Unix(theirs))
    }
}

/// Bytes moved per step each way at most.
const CHUNK: usize = 256 << 10;

/// One TLS connection's pump (see the module notes).
struct Pump {
    tls: ServerConnection,
    net: Stream,
    /// The socket pair's end the pump holds (sends with MSG_NOSIGNAL).
    app: Stream,
    /// Decrypted bytes the pair has not yet taken.
    to_app: Vec<u8>,
    at: usize,
    /// The client sent close_notify or closed: no more reads from it.
    net_done: bool,
    /// The server side closed its end: nothing more to encrypt.
    app_done: bool,
    buf: Vec<u8>,
}

impl Pump {
    fn new(tls: ServerConnection, net: Stream, app: Stream) -> Pump {
        Pump { tls, net, app, to_app: Vec::new(), at: 0, net_done: false, app_done: false, buf: vec![0; CHUNK] }
    }

    fn run(mut self) {
        let r = self.pump();
        // Either way the client's socket closes: after close_notify when the
        // server side ended, at once on an error.
        if r.is_ok() {
            self.tls.send_close_notify();
            let _ = self.flush_net_blocking();
        }
        let _ = self.net.shutdown(std::net::Shutdown::Both);
        let _ = self.app.shutdown(std::net::Shutdown::Both);
    }

    /// Move bytes until the server side has closed its end (Ok) or either
    /// socket or the TLS session fails (Err).
    fn pump(&mut self) -> io::Result<()> {
        set_nonblocking(&self.net, true)?;
        set_nonblocking(&self.app, true)?;
        loop {
            if !self.net_done && self.pending() == 0 && self.tls.wants_read() {
                self.decrypt()?;
            }
            self.deliver()?;
            if !self.app_done && !self.tls.wants_write() {
                self.encrypt()?;
            }
            self.send_net()?;
            if self.app_done && !self.tls.wants_write() {
                return Ok(());
            }
            self.wait()?;
        }
    }

    fn pending(&self) -> usize {
        self.to_app.len() - self.at
    }

    /// Hand decrypted bytes to the server side, as much as it takes.
    fn deliver(&mut self) -> io::Result<()> {
        loop {
            if self.pending() == 0 {
                self.to_app.clear();
                self.at = 0;
                match self.tls.reader().read(&mut self.buf) {
                    Ok(0) => return self.end_of_input(),
                    Ok(n) => self.to_app.extend_from_slice(&self.buf[..n]),
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
                    // The client closed without close_notify: the same as EOF
                    // for a reader (a truncation it cannot use to forge data:
                    // NBD requests are framed).
                    Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return self.end_of_input(),
                    Err(e) => return Err(e),
                }
            }
            match self.app.write(&self.to_app[self.at..]) {
                Ok(n) => self.at += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
                Err(e) => return Err(e),
            }
        }
    }

    /// No more input from the client: the server side's reader sees EOF.
    fn end_of_input(&mut self) -> io::Result<()> {
        self.net_done = true;
        let _ = self.app.shutdown(std::net::Shutdown::Write);
        Ok(())
    }

    /// Read what the server side wrote and hand it to rustls.
    fn encrypt(&mut self) -> io::Result<()> {
        match self.app.read(&mut self.buf) {
            Ok(0) => self.app_done = true,
            Ok(n) => self.tls.writer().write_all(&self.buf[..n])?,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            Err(e) => return Err(e),
        }
        Ok(())
    }

    /// Send what rustls has encrypted, as much as the socket takes.
    fn send_net(&mut self) -> io::Result<()> {
        while self.tls.wants_write() {
            match self.tls.write_tls(&mut self.net) {
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// Read from the client and decrypt; a TLS error goes out as an alert.
    fn decrypt(&mut self) -> io::Result<()> {
        match self.tls.read_tls(&mut self.net) {
            Ok(0) => return self.end_of_input(),
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
            Err(e) => return Err(e),
        }
        if let Err(e) = self.tls.process_new_packets() {
            let _ = self.flush_net_blocking();
            return Err(io::Error::new(io::ErrorKind::InvalidData, format!("TLS: {e}")));
        }
        Ok(())
    }

    /// Sleep until one of the moves above can make progress.
    fn wait(&mut self) -> io::Result<()> {
        let mut net = 0;
        if self.tls.wants_write() {
            net |= libc::POLLOUT;
        }
        if !self.net_done && self.pending() == 0 && self.tls.wants_read() {
            net |= libc::POLLIN;
        }
        let mut app = 0;
        if self.pending() > 0 {
            app |= libc::POLLOUT;
        }
        if !self.app_done && !self.tls.wants_write() {
            app |= libc::POLLIN;
        }
        let mut fds = [
            libc::pollfd { fd: self.net.fd(), events: net, revents: 0 },
            libc::pollfd { fd: self.app.fd(), events: app, revents: 0 },
        ];
        // SAFETY: two valid pollfds on descriptors owned by self.
        if unsafe { libc::poll(fds.as_mut_ptr(), 2, -1) } < 0 {
            let e = io::Error::last_os_error();
            if e.kind() != io::ErrorKind::Interrupted {
                return Err(e);
            }
        }
        // Reported whatever was asked: the client can take nothing more
        // (reset, or closed both ways), so nothing the server side still
        // sends can reach it.
        if fds[0].revents & (libc::POLLHUP | libc::POLLERR) != 0 && net & libc::POLLOUT == 0 {
            return Err(io::Error::new(io::ErrorKind::BrokenPipe, "the client closed the connection"));
        }
        Ok(())
    }

    /// The last encrypted bytes (an alert, close_notify), blocking briefly.
    fn flush_net_blocking(&mut self) -> io::Result<()> {
        set_nonblocking(&self.net, false)?;
        self.net.set_write_timeout(Some(std::time::Duration::from_secs(1)))?;
        while self.tls.wants_write() {
            self.tls.write_tls(&mut self.net)?;
        }
        Ok(())
    }
}

fn set_nonblocking(s: &Stream, on: bool) -> io::Result<()> {
    match s {
        Stream::Tcp(t) => t.set_nonblocking(on),
        Stream::Unix(u) => u.set_nonblocking(on),
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
