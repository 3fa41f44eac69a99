//! TLS (`NBD_OPT_STARTTLS`): the option rules of the spec's forced and
//! selective modes, a rustls client's bytes through the pump, client
//! certificates, and libnbd's own TLS client (nbdinfo, nbdcopy) against
//! the server.

mod client;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::Command as Proc;
use std::sync::Arc;

use client::*;
use mosaic_nbd::proto::*;
use mosaic_nbd::tls::{provider, test_certs};
use mosaic_nbd::{Command, MemExport, ServerConfig, Tls, TlsMode};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use rustls::{ClientConfig, ClientConnection, RootCertStore, StreamOwned};

const SIZE: usize = 4 << 20;

type TlsClient = Client<StreamOwned<ClientConnection, TcpStream>>;

fn certs() -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    test_certs(d.path(), &["localhost"]).unwrap();
    d
}

fn tls_cfg(dir: &Path, mode: TlsMode, verify_peer: bool) -> ServerConfig {
    ServerConfig { tls: Some(Tls::load(dir, mode, verify_peer).unwrap()), log: true, ..cfg() }
}

fn mem() -> Arc<MemExport> {
    Arc::new(MemExport::new(SIZE, 4096))
}

/// A rustls client trusting `ca`'s `ca-cert.pem`, presenting `cert`'s
/// client certificate when given.
fn client_config(ca: &Path, cert: Option<&Path>) -> Arc<ClientConfig> {
    let mut roots = RootCertStore::empty();
    for c in CertificateDer::pem_file_iter(ca.join("ca-cert.pem")).unwrap() {
        roots.add(c.unwrap()).unwrap();
    }
    let b = ClientConfig::builder_with_provider(provider()).with_safe_default_protocol_versions().unwrap().with_root_certificates(roots);
    Arc::new(match cert {
        Some(d) => {
            let chain = CertificateDer::pem_file_iter(d.join("client-cert.pem")).unwrap().map(Result::unwrap).collect();
            b.with_client_auth_cert(chain, PrivateKeyDer::from_pem_file(d.join("client-key.pem")).unwrap()).unwrap()
        }
        None => b.with_no_client_auth(),
    })
}

/// STARTTLS acknowledged, then the TLS handshake run to its end (an
/// error when the server refuses the client).
fn starttls(mut c: Client<TcpStream>, cfg: Arc<ClientConfig>) -> std::io::Result<TlsClient> {
    c.send_opt(OPT_STARTTLS, &[]);
    let r = c.opt_reply();
    assert_eq!((r.opt, r.ty), (OPT_STARTTLS, REP_ACK), "{}", String::from_utf8_lossy(&r.data));
    let conn = ClientConnection::new(cfg, ServerName::try_from("localhost").unwrap()).unwrap();
    let mut s = StreamOwned::new(conn, c.s);
    while s.conn.is_handshaking() {
        s.conn.complete_io(&mut s.sock)?;
    }
    // TLS 1.3: a refused client certificate is only told with the first
    // record the server answers.
    Ok(Client { s, size: 0, tflags: 0, block: None, extended: false })
}

fn greet(srv: &Server) -> Client<TcpStream> {
    let _ = tracing_subscriber::fmt().with_test_writer().try_init();
    Client::greet(connect(srv.addr), FLAG_C_FIXED_NEWSTYLE | FLAG_C_NO_ZEROES)
}

#[test]
fn a_server_that_requires_tls_refuses_options_in_plain_text_then_serves_through_it() {
    let d = certs();
    let srv = Server::start(mem(), tls_cfg(d.path(), TlsMode::Require, false));
    let mut c = greet(&srv);
    for (opt, data) in [(OPT_LIST, vec![]), (OPT_STRUCTURED_REPLY, vec![]), (OPT_INFO, Client::<TcpStream>::info_payload("test", &[])), (OPT_GO, Client::<TcpStream>::info_payload("test", &[])), (99, vec![1])] {
        c.send_opt(opt, &data);
        let r = c.opt_reply();
        assert_eq!((r.opt, r.ty), (opt, REP_ERR_TLS_REQD), "option {opt}");
        assert!(String::from_utf8_lossy(&r.data).contains("requires TLS"));
    }
    c.send_opt(OPT_STARTTLS, b"x");
    assert_eq!(c.opt_reply().ty, REP_ERR_INVALID, "STARTTLS takes no data");
    let mut c = starttls(c, client_config(d.path(), None)).unwrap();
    c.info_or_go(OPT_INFO, "test").unwrap();
    assert_eq!(c.size, SIZE as u64);
    c.send_opt(OPT_STARTTLS, &[]);
    assert_eq!(c.opt_reply().ty, REP_ERR_INVALID, "a second STARTTLS");
    c.info_or_go(OPT_GO, "test").unwrap();
    // Bytes both ways through the pump: small requests pipelined, then
    // requests of the export's whole size.
    c.pipelined_then_whole(SIZE);
    c.send(Command::Disc, 0, 0, 0, 0, &[]);
    let mut b = [0u8; 1];
    assert_eq!(c.s.read(&mut b).unwrap_or(0), 0, "closed after DISC");
    let st = srv.stop();
    assert_eq!((st.connections, st.errors), (1, 0));
}

#[test]
fn export_name_before_starttls_closes_a_server_that_requires_tls() {
    let d = certs();
    let srv = Server::start(mem(), tls_cfg(d.path(), TlsMode::Require, false));
    let mut c = greet(&srv);
    c.send_opt(OPT_EXPORT_NAME, b"test");
    let mut b = [0u8; 8];
    assert_eq!(c.s.read(&mut b).unwrap_or(0), 0, "no export, no size: the connection closes");
}

#[test]
fn an_offering_server_serves_plain_clients_and_forgets_plain_text_state_at_starttls() {
    let d = certs();
    let srv = Server::start(mem(), tls_cfg(d.path(), TlsMode::On, false));
    // Plain text, as before.
    let mut c = greet(&srv);
    c.info_or_go(OPT_GO, "test").unwrap();
    assert_eq!(c.write(4096, &pattern(5, 4096)), 0);
    // Structured replies agreed in plain text do not hold after STARTTLS
    // (nbdkit's CVE-2021-3716): DF is not advertised, READ answers simply.
    let mut c = greet(&srv);
    c.send_opt(OPT_STRUCTURED_REPLY, &[]);
    assert_eq!(c.opt_reply().ty, REP_ACK);
    let mut c = starttls(c, client_config(d.path(), None)).unwrap();
    c.info_or_go(OPT_GO, "test").unwrap();
    assert_eq!(c.tflags & TFLAG_SEND_DF, 0);
    c.send(Command::Read, 0, 7, 4096, 4096, &[]);
    assert_eq!(c.any_reply(), AnyReply::Simple { err: 0, cookie: 7 });
    let mut back = vec![0u8; 4096];
    c.s.read_exact(&mut back).unwrap();
    assert_eq!(back, pattern(5, 4096), "the plain client's write, read through TLS");
}

/// Extended headers agreed in plain text do not hold after STARTTLS
/// (compact requests, simple replies), and agreed after it they frame
/// every request and reply through TLS: the bytes written read back, and
/// a 6 GiB TRIM past the export's end is one 32-byte request refused by
/// one extended ERROR chunk (ENOSPC, as any write past the end).  A
/// server that requires TLS refuses them in plain text.
#[test]
fn extended_headers_are_agreed_afresh_after_starttls_and_framed_through_tls() {
    let d = certs();
    let srv = Server::start(mem(), tls_cfg(d.path(), TlsMode::On, false));
    let mut c = greet(&srv);
    c.send_opt(OPT_EXTENDED_HEADERS, &[]);
    assert_eq!(c.opt_reply().ty, REP_ACK);
    let mut c = starttls(c, client_config(d.path(), None)).unwrap();
    c.info_or_go(OPT_GO, "test").unwrap();
    assert_eq!(c.write(8192, &pattern(8, 4096)), 0, "a compact request, a simple reply");
    let mut c = starttls(greet(&srv), client_config(d.path(), None)).unwrap();
    c.send_opt(OPT_EXTENDED_HEADERS, &[]);
    assert_eq!(c.opt_reply().ty, REP_ACK);
    c.info_or_go(OPT_GO, "test").unwrap();
    c.extended = true;
    c.send64(Command::Write, CMD_FLAG_PAYLOAD_LEN, 1, 4096, 4096, &pattern(9, 4096));
    assert_eq!(c.ext_reply().error(), 0);
    c.send64(Command::Read, 0, 2, 4096, 8192, &[]);
    let r = c.ext_reply();
    assert_eq!((r.ty, r.cookie, r.offset), (REPLY_TYPE_OFFSET_DATA, 2, 4096));
    assert_eq!([&r.payload[8..4104], &r.payload[4104..]], [&pattern(9, 4096)[..], &pattern(8, 4096)[..]]);
    c.send64(Command::Trim, 0, 3, 0, 6 << 30, &[]);
    let r = c.ext_reply();
    assert_eq!((r.ty, r.cookie, r.error()), (REPLY_TYPE_ERROR, 3, ENOSPC));

    let srv = Server::start(mem(), tls_cfg(d.path(), TlsMode::Require, false));
    let mut c = greet(&srv);
    c.send_opt(OPT_EXTENDED_HEADERS, &[]);
    assert_eq!(c.opt_reply().ty, REP_ERR_TLS_REQD);
}

#[test]
fn a_server_without_tls_refuses_starttls_by_policy() {
    let srv = Server::start(mem(), cfg());
    let mut c = greet(&srv);
    c.send_opt(OPT_STARTTLS, &[]);
    let r = c.opt_reply();
    assert_eq!(r.ty, REP_ERR_POLICY);
    assert!(String::from_utf8_lossy(&r.data).contains("--tls"));
    c.info_or_go(OPT_GO, "test").unwrap();
}

#[test]
fn verify_peer_takes_only_clients_whose_certificate_the_ca_signed() {
    let (d, other) = (certs(), certs());
    let srv = Server::start(mem(), tls_cfg(d.path(), TlsMode::Require, true));
    let go = |cert: Option<&Path>| -> Result<(), String> {
        let mut c = starttls(greet(&srv), client_config(d.path(), cert)).map_err(|e| e.to_string())?;
        c.send_opt(OPT_GO, &Client::<TcpStream>::info_payload("test", &[]));
        let mut h = [0u8; 20];
        c.s.read_exact(&mut h).map_err(|e| e.to_string())
    };
    go(Some(d.path())).unwrap();
    let e = go(None).unwrap_err();
    assert!(e.contains("CertificateRequired") || e.contains("certificate"), "{e}");
    // Another CA of the same name: the server finds the signature bad and
    // ends the handshake with an alert.
    let e = go(Some(other.path())).unwrap_err();
    assert!(e.contains("alert"), "{e}");
    let st = srv.stop();
    assert_eq!(st.connections, 3);
}

#[test]
fn a_client_that_fails_the_tls_handshake_loses_its_connection_only() {
    let d = certs();
    let srv = Server::start(mem(), tls_cfg(d.path(), TlsMode::Require, false));
    let mut c = greet(&srv);
    c.send_opt(OPT_STARTTLS, &[]);
    assert_eq!(c.opt_reply().ty, REP_ACK);
    c.s.write_all(b"this is not a TLS ClientHello at all, just bytes\n").unwrap();
    let mut b = [0u8; 64];
    // The server may answer an alert, then closes.
    while c.s.read(&mut b).unwrap_or(0) > 0 {}
    // Another client is served.
    let mut c = starttls(greet(&srv), client_config(d.path(), None)).unwrap();
    c.info_or_go(OPT_GO, "test").unwrap();
    assert_eq!(c.write(0, &pattern(3, 4096)), 0);
}

#[test]
fn stopping_the_server_ends_tls_connections_after_their_replies() {
    let d = certs();
    let srv = Server::start(mem(), tls_cfg(d.path(), TlsMode::Require, false));
    let mut c = starttls(greet(&srv), client_config(d.path(), None)).unwrap();
    c.info_or_go(OPT_GO, "test").unwrap();
    for i in 0..16u64 {
        c.send(Command::Write, 0, i, i * 4096, 4096, &pattern(i, 4096));
    }
    for _ in 0..16 {
        assert_eq!(c.reply().1, 0);
    }
    let st = srv.stop();
    assert_eq!((st.connections, st.requests), (1, 16));
    let mut b = [0u8; 1];
    assert_eq!(c.s.read(&mut b).unwrap_or(0), 0, "the client sees the end");
}

#[test]
fn certificate_problems_are_errors_that_name_the_file() {
    let d = tempfile::tempdir().unwrap();
    let e = Tls::load(d.path(), TlsMode::Require, false).unwrap_err();
    assert!(e.contains("server-cert.pem"), "{e}");
    test_certs(d.path(), &["localhost"]).unwrap();
    std::fs::write(d.path().join("server-key.pem"), "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n").unwrap();
    let e = Tls::load(d.path(), TlsMode::Require, false).unwrap_err();
    assert!(e.contains("server-key.pem"), "{e}");
    // A key of another certificate.
    let other = certs();
    std::fs::copy(other.path().join("server-key.pem"), d.path().join("server-key.pem")).unwrap();
    let e = Tls::load(d.path(), TlsMode::Require, false).unwrap_err();
    assert!(e.contains("server-key.pem"), "{e}");
    std::fs::write(d.path().join("server-cert.pem"), "not pem\n").unwrap();
    let e = Tls::load(d.path(), TlsMode::Require, false).unwrap_err();
    assert!(e.contains("server-cert.pem") && e.contains("no PEM certificate"), "{e}");
    std::fs::remove_file(d.path().join("ca-cert.pem")).unwrap();
    test_certs(other.path(), &["localhost"]).unwrap();
    let e = Tls::load(other.path().join("nope").as_path(), TlsMode::Require, true).unwrap_err();
    assert!(e.contains("nope/server-cert.pem"), "{e}");
}

/// libnbd's TLS client (GnuTLS): nbdinfo sees the export, nbdcopy writes
/// a file through TLS and reads it back, with and without client
/// certificates checked; a plain URI is refused.
#[test]
fn libnbd_clients_copy_bytes_through_tls() {
    if !libnbd_tools() {
        return;
    }
    let d = certs();
    for verify in [false, true] {
        let srv = Server::start(mem(), tls_cfg(d.path(), TlsMode::Require, verify));
        let uri = format!("nbds://localhost:{}/test?tls-certificates={}", srv.addr.port(), d.path().display());
        libnbd_copies(&uri, d.path(), 11, SIZE, &format!("verify_peer {verify}"));
        let plain = format!("nbd://localhost:{}/test", srv.addr.port());
        // libnbd 1.14 names NBD_REP_ERR_TLS_REQD "Operation not supported".
        let out = Proc::new("nbdinfo").arg(&plain).output().unwrap();
        assert!(!out.status.success(), "a plain client is refused");
        assert!(String::from_utf8_lossy(&out.stderr).contains("opt_go"), "{}", String::from_utf8_lossy(&out.stderr));
        let st = srv.stop();
        assert_eq!(st.errors, 0);
    }
}
