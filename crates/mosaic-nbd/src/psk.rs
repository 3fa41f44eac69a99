//! TLS with pre-shared keys, as nbdkit's `--tls-psk=FILE` and qemu-nbd's
//! `tls-creds-psk`: no certificates, each client proves it holds the key
//! of the username it names.
//!
//! The keys file is GnuTLS's `psktool` format, which nbdkit, qemu and
//! libnbd (`tls-psk-file=FILE`) read:
//!
//! ```text
//!   alice:0123456789abcdef0123456789abcdef   one `username:key in hex` a line
//!   bob:...                                  (blank lines are skipped)
//! ```
//!
//! rustls, which serves certificates ([`crate::tls`]), has no external
//! pre-shared keys (rustls issue 174), so this side runs on OpenSSL (the
//! system's libssl).  It runs without I/O of its own, as rustls does:
//! ciphertext goes in and out through [`MemIo`], so
//! [`crate::tls::TlsStream`] drives both engines with the same loops and
//! the same socket code.
//!
//! ```text
//!   socket ─recv─▶ feed ─▶ MemIo.inbox ─▶ OpenSSL ─▶ read_plain ─▶ caller
//!   caller ─▶ write_plain ─▶ OpenSSL ─▶ MemIo.outbox ─▶ write_tls ─sendmsg─▶ socket
//! ```

use std::fmt;
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};

use openssl::ex_data::Index;
use openssl::ssl::{ErrorCode, Ssl, SslContext, SslContextBuilder, SslMethod, SslOptions, SslStream, SslVersion};

/// OpenSSL's bounds (`PSK_MAX_IDENTITY_LEN` and, conservatively,
/// the 1.x `PSK_MAX_PSK_LEN`): longer ones could not be offered.
const MAX_USERNAME: usize = 128;
const MAX_KEY: usize = 256;

/// The usernames and keys of a keys file, in the file's order.
#[derive(Clone)]
pub struct PskKeys {
    keys: Vec<(String, Vec<u8>)>,
}

impl fmt::Debug for PskKeys {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The keys themselves never go to a log.
        f.debug_struct("PskKeys").field("users", &self.users().collect::<Vec<_>>()).finish()
    }
}

fn unhex(s: &str) -> Option<Vec<u8>> {
    if s.is_empty() || s.len() % 2 != 0 || !s.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).ok()).collect()
}

impl PskKeys {
    /// Parse a keys file's text.  Every problem is an error naming its
    /// line: no colon, an empty or overlong username, a key that is not
    /// hex, is empty or overlong, a username given twice, or no key at all.
    pub fn parse(text: &str) -> Result<PskKeys, String> {
        let mut keys: Vec<(String, Vec<u8>)> = Vec::new();
        for (i, raw) in text.lines().enumerate() {
            let n = i + 1;
            let line = raw.trim_end_matches('\r');
            if line.trim().is_empty() {
                continue;
            }
            let Some((user, hex)) = line.split_once(':') else {
                return Err(format!("line {n}: expected username:key (the key in hex)"));
            };
            if user.is_empty() || user.len() > MAX_USERNAME {
                return Err(format!("line {n}: the username must be 1 to {MAX_USERNAME} bytes"));
            }
            let Some(key) = unhex(hex.trim()) else {
                return Err(format!("line {n}: the key of {user:?} is not an even number of hex digits"));
            };
            if key.len() > MAX_KEY {
                return Err(format!("line {n}: the key of {user:?} is {} bytes, more than {MAX_KEY}", key.len()));
            }
            if keys.iter().any(|(u, _)| u == user) {
                return Err(format!("line {n}: username {user:?} is given twice"));
            }
            keys.push((user.to_string(), key));
        }
        if keys.is_empty() {
            return Err("no username:key line in it".into());
        }
        Ok(PskKeys { keys })
    }

    /// The usernames, in the file's order.
    pub fn users(&self) -> impl Iterator<Item = &str> {
        self.keys.iter().map(|(u, _)| u.as_str())
    }

    /// The key of `identity`, the username a client sent.
    fn key(&self, identity: &[u8]) -> Option<&[u8]> {
        self.keys.iter().find(|(u, _)| u.as_bytes() == identity).map(|(_, k)| k.as_slice())
    }
}

/// A loaded keys file and the OpenSSL server context that serves it.
#[derive(Clone)]
pub struct PskServer {
    pub file: PathBuf,
    pub keys: PskKeys,
    ctx: SslContext,
    /// Where the key callback leaves the username a client offered.
    offered: Index<Ssl, Offered>,
}

impl fmt::Debug for PskServer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PskServer").field("file", &self.file).field("keys", &self.keys).finish()
    }
}

impl PskServer {
    /// Read and check `file`; an error names it (and the line).
    pub fn load(file: &Path) -> Result<PskServer, String> {
        let text = std::fs::read_to_string(file).map_err(|e| format!("{}: {e}", file.display()))?;
        let keys = PskKeys::parse(&text).map_err(|e| format!("{}: {e}", file.display()))?;
        let offered = Ssl::new_ex_index().map_err(|e| format!("TLS (OpenSSL): {e}"))?;
        let ctx = context(keys.clone(), offered).map_err(|e| format!("TLS (OpenSSL): {e}"))?;
        Ok(PskServer { file: file.to_path_buf(), keys, ctx, offered })
    }

    /// A session for one connection, its handshake not yet run.
    pub(crate) fn session(&self) -> io::Result<PskSession> {
        let ssl = Ssl::new(&self.ctx).map_err(io::Error::other)?;
        let io = MemIo { inbox: Vec::new(), taken: 0, outbox: Vec::new(), eof: false };
        Ok(PskSession { s: SslStream::new(ssl, io).map_err(io::Error::other)?, offered: self.offered })
    }
}

/// The username a client offered, and whether the keys file has it.
struct Offered {
    username: String,
    known: bool,
}

/// TLS 1.2 and 1.3; in 1.2 only the key-exchange suites that use a PSK
/// (ECDHE-PSK first: forward secrecy), with AEAD or SHA-2 MACs.  No
/// session tickets: a client proves its key on every connection.
///
/// The server's order of ciphers wins, AES-GCM first: a PSK's hash is
/// SHA-256, which leaves GnuTLS clients (libnbd, qemu) offering
/// ChaCha20-Poly1305 ahead of AES-128-GCM, and with AES instructions,
/// which x86 servers have, AES-GCM moves 2.4 times the bytes a second
/// (nbdcopy through this server: `scripts/bench-tls.sh` with
/// `BENCH_TLS=psk`).
fn context(keys: PskKeys, offered: Index<Ssl, Offered>) -> Result<SslContext, openssl::error::ErrorStack> {
    let mut b = SslContextBuilder::new(SslMethod::tls_server())?;
    b.set_min_proto_version(Some(SslVersion::TLS1_2))?;
    b.set_ciphersuites("TLS_AES_128_GCM_SHA256:TLS_CHACHA20_POLY1305_SHA256")?;
    b.set_cipher_list("ECDHE-PSK-AES128-CBC-SHA256:ECDHE-PSK-CHACHA20-POLY1305:ECDHE-PSK-AES256-CBC-SHA384:PSK-AES128-GCM-SHA256:PSK-AES256-GCM-SHA384:PSK-CHACHA20-POLY1305")?;
    b.set_options(SslOptions::NO_TICKET | SslOptions::NO_RENEGOTIATION | SslOptions::CIPHER_SERVER_PREFERENCE);
    b.set_num_tickets(0)?;
    b.set_psk_server_callback(move |ssl, identity, out| {
        let username = identity.map(String::from_utf8_lossy).unwrap_or_default().into_owned();
        let key = identity.and_then(|id| keys.key(id)).filter(|k| k.len() <= out.len());
        ssl.set_ex_data(offered, Offered { username, known: key.is_some() });
        match key {
            Some(k) => {
                out[..k.len()].copy_from_slice(k);
                Ok(k.len())
            }
            // Zero bytes: OpenSSL goes on without a key and the handshake
            // fails (TLS 1.3: for want of a certificate).
            None => Ok(0),
        }
    });
    Ok(b.build())
}

/// The ciphertext OpenSSL reads (fed from the socket) and writes (sent
/// to it): reads find `WouldBlock` when the inbox is empty, `Ok(0)` once
/// the socket said EOF.
pub(crate) struct MemIo {
    inbox: Vec<u8>,
    taken: usize,
    outbox: Vec<u8>,
    eof: bool,
}

impl Read for MemIo {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let left = &self.inbox[self.taken..];
        if left.is_empty() {
            return if self.eof { Ok(0) } else { Err(io::ErrorKind::WouldBlock.into()) };
        }
        let n = left.len().min(buf.len());
        buf[..n].copy_from_slice(&left[..n]);
        self.taken += n;
        if self.taken == self.inbox.len() {
            self.inbox.clear();
            self.taken = 0;
        }
        Ok(n)
    }
}

impl Write for MemIo {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.outbox.extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// One connection's OpenSSL session, driven as a rustls
/// `ServerConnection` is (see [`crate::tls`]'s `Session`).
pub(crate) struct PskSession {
    s: SslStream<MemIo>,
    offered: Index<Ssl, Offered>,
}

/// An OpenSSL failure as the I/O error the stream reports.
fn failed(e: openssl::ssl::Error) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, format!("TLS: {e}"))
}

impl PskSession {
    /// One step of the handshake on what has been fed: `Ok(true)` when
    /// it is done, `Ok(false)` when it needs more ciphertext (send what
    /// [`PskSession::wants_write`] holds first).
    pub(crate) fn handshake(&mut self) -> io::Result<bool> {
        match self.s.accept() {
            Ok(()) => Ok(true),
            Err(e) if e.code() == ErrorCode::WANT_READ && !self.s.get_ref().eof => Ok(false),
            Err(e) if self.s.get_ref().eof => Err(io::Error::new(io::ErrorKind::UnexpectedEof, format!("the client closed ({e})"))),
            Err(e) => match self.s.ssl().ex_data(self.offered) {
                Some(o) if !o.known => Err(io::Error::new(io::ErrorKind::PermissionDenied, format!("PSK username {:?} is not in the keys file", o.username))),
                Some(o) => Err(io::Error::new(io::ErrorKind::InvalidData, format!("TLS, as PSK username {:?}: {e}", o.username))),
                None => Err(failed(e)),
            },
        }
    }

    /// Plaintext decrypted from what has been fed: `WouldBlock` when it
    /// needs more, `Ok(0)` after the client's close_notify,
    /// `UnexpectedEof` when the socket ended without one.
    pub(crate) fn read_plain(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self.s.ssl_read(buf) {
            Ok(n) => Ok(n),
            Err(e) if e.code() == ErrorCode::ZERO_RETURN => Ok(0),
            Err(e) if e.code() == ErrorCode::WANT_READ && !self.s.get_ref().eof => Err(io::ErrorKind::WouldBlock.into()),
            Err(_) if self.s.get_ref().eof => Err(io::ErrorKind::UnexpectedEof.into()),
            Err(e) => Err(failed(e)),
        }
    }

    /// Ciphertext from the socket; all of it is taken.
    pub(crate) fn feed(&mut self, ct: &[u8]) -> usize {
        self.s.get_mut().inbox.extend_from_slice(ct);
        ct.len()
    }

    /// The socket said EOF.
    pub(crate) fn feed_eof(&mut self) {
        self.s.get_mut().eof = true;
    }

    pub(crate) fn wants_write(&self) -> bool {
        !self.s.get_ref().outbox.is_empty()
    }

    /// Send queued records through `w` (one write): the bytes it took.
    pub(crate) fn write_tls(&mut self, w: &mut dyn Write) -> io::Result<usize> {
        let out = &mut self.s.get_mut().outbox;
        let n = w.write(out)?;
        out.drain(..n);
        Ok(n)
    }

    /// Encrypt `p` into queued records.
    pub(crate) fn write_plain(&mut self, p: &[u8]) -> io::Result<()> {
        let mut at = 0;
        while at < p.len() {
            at += self.s.ssl_write(&p[at..]).map_err(failed)?;
        }
        Ok(())
    }

    /// Queue close_notify.
    pub(crate) fn close_notify(&mut self) {
        let _ = self.s.shutdown();
    }

    /// The protocol and cipher agreed, once the handshake is done.
    pub(crate) fn cipher(&self) -> String {
        let ssl = self.s.ssl();
        format!("{} {}", ssl.version_str(), ssl.current_cipher().map_or("none", |c| c.name()))
    }

    /// The username the client proved, once the handshake is done.
    pub(crate) fn username(&self) -> Option<&str> {
        self.s.ssl().ex_data(self.offered).filter(|o| o.known).map(|o| o.username.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_keys_file_is_read_as_psktool_writes_it() {
        let k = PskKeys::parse("alice:00112233445566778899aabbccddeeff\n\nbob:DEADbeef\r\n").unwrap();
        assert_eq!(k.users().collect::<Vec<_>>(), ["alice", "bob"]);
        assert_eq!(k.key(b"alice").unwrap(), &[0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88, 0x99, 0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0xff]);
        assert_eq!(k.key(b"bob").unwrap(), &[0xde, 0xad, 0xbe, 0xef]);
        assert!(k.key(b"carol").is_none() && k.key(b"alic").is_none());
        assert!(!format!("{k:?}").contains("dead"), "the keys stay out of logs");
    }

    #[test]
    fn a_bad_keys_file_is_an_error_naming_its_line() {
        let cases = [
            ("alice:0011\nbob\n", "line 2: expected username:key"),
            ("alice:0011\n:0011\n", "line 2: the username must be"),
            ("alice:00112\n", "line 1: the key of \"alice\" is not an even number of hex digits"),
            ("alice:zz\n", "line 1: the key of \"alice\" is not"),
            ("alice:+f\n", "line 1: the key of \"alice\" is not"),
            ("alice:\n", "line 1: the key of \"alice\" is not"),
            ("\nalice:00\nalice:11\n", "line 3: username \"alice\" is given twice"),
            ("", "no username:key line"),
            ("\n  \n", "no username:key line"),
            ("café:0\u{e9}\n", "line 1: the key of \"café\" is not"),
        ];
        for (text, want) in cases {
            let e = PskKeys::parse(text).unwrap_err();
            assert!(e.starts_with(want), "{text:?}: {e}");
        }
        let long = format!("a:{}\n", "00".repeat(MAX_KEY + 1));
        assert!(PskKeys::parse(&long).unwrap_err().contains("more than 256"));
        let name = format!("{}:00\n", "u".repeat(MAX_USERNAME + 1));
        assert!(PskKeys::parse(&name).unwrap_err().contains("username must be 1 to 128"));
    }

    proptest::proptest! {
        /// Any text is a set of keys or an error, never a panic; a parsed
        /// set gives back each line's key.
        #[test]
        fn any_text_parses_or_is_refused(text in "[a-z:0-9A-F\\n\\r é+-]{0,200}") {
            if let Ok(k) = PskKeys::parse(&text) {
                for line in text.lines().filter(|l| !l.trim().is_empty()) {
                    let (user, hex) = line.trim_end_matches('\r').split_once(':').unwrap();
                    proptest::prop_assert_eq!(k.key(user.as_bytes()).map(<[u8]>::to_vec), unhex(hex.trim()));
                }
            }
        }
    }

    #[test]
    fn a_missing_keys_file_is_an_error_naming_it() {
        let e = PskServer::load(Path::new("/nonexistent/keys.psk")).unwrap_err();
        assert!(e.starts_with("/nonexistent/keys.psk: "), "{e}");
    }
}
