//! TLS with pre-shared keys (`Tls::load_psk`, nbdkit's `--tls-psk`): an
//! OpenSSL client at TLS 1.2 and 1.3 writes and reads through it, wrong
//! keys and unknown usernames lose their connection only, an offering
//! server still serves plain clients, and libnbd's GnuTLS client
//! (nbdinfo, nbdcopy) copies bytes through it.

mod client;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::Command as Proc;
use std::sync::Arc;

use client::*;
use mosaic_nbd::proto::*;
use mosaic_nbd::{Command, MemExport, ServerConfig, Tls, TlsMode};
use openssl::ssl::{SslConnector, SslMethod, SslStream, SslVersion};

const SIZE: usize = 4 << 20;
const ALICE: &str = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff";
const BOB: &str = "0f1e2d3c4b5a69788796a5b4c3d2e1f0";

fn keys(dir: &Path) -> PathBuf {
    let f = dir.join("keys.psk");
    std::fs::write(&f, format!("alice:{ALICE}\nbob:{BOB}\n")).unwrap();
    f
}

fn psk_cfg(file: &Path, mode: TlsMode) -> ServerConfig {
    ServerConfig { tls: Some(Tls::load_psk(file, mode).unwrap()), log: true, ..cfg() }
}

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect()
}

fn greet(srv: &Server) -> Client<TcpStream> {
    let _ = tracing_subscriber::fmt().with_test_writer().try_init();
    Client::greet(connect(srv.addr), FLAG_C_FIXED_NEWSTYLE | FLAG_C_NO_ZEROES)
}

/// STARTTLS, then an OpenSSL client's handshake as `user` with `key` at
/// `version`: an error when the server refuses it.
fn starttls(mut c: Client<TcpStream>, user: &str, key: &str, version: SslVersion) -> Result<Client<SslStream<TcpStream>>, String> {
    c.send_opt(OPT_STARTTLS, &[]);
    let r = c.opt_reply();
    assert_eq!((r.opt, r.ty), (OPT_STARTTLS, REP_ACK), "{}", String::from_utf8_lossy(&r.data));
    let mut b = SslConnector::builder(SslMethod::tls_client()).unwrap();
    b.set_min_proto_version(Some(version)).unwrap();
    b.set_max_proto_version(Some(version)).unwrap();
    // ChaCha20 first, as GnuTLS clients offer it with a PSK.
    b.set_ciphersuites("TLS_CHACHA20_POLY1305_SHA256:TLS_AES_128_GCM_SHA256").unwrap();
    b.set_cipher_list("ECDHE-PSK-CHACHA20-POLY1305:PSK-AES128-GCM-SHA256").unwrap();
    let (user, key) = (user.as_bytes().to_vec(), unhex(key));
    b.set_psk_client_callback(move |_ssl, _hint, id, psk| {
        id[..user.len()].copy_from_slice(&user);
        id[user.len()] = 0;
        psk[..key.len()].copy_from_slice(&key);
        Ok(key.len())
    });
    let mut conf = b.build().configure().unwrap();
    conf.set_verify_hostname(false);
    conf.set_use_server_name_indication(false);
    let s = conf.connect("localhost", c.s).map_err(|e| e.to_string())?;
    Ok(Client { s, size: 0, tflags: 0, block: None, extended: false })
}

#[test]
fn an_openssl_client_with_a_pre_shared_key_writes_and_reads_at_tls_1_2_and_1_3() {
    let d = tempfile::tempdir().unwrap();
    let f = keys(d.path());
    for (version, name) in [(SslVersion::TLS1_2, "TLSv1.2"), (SslVersion::TLS1_3, "TLSv1.3")] {
        let srv = Server::start(Arc::new(MemExport::new(SIZE, 4096)), psk_cfg(&f, TlsMode::Require));
        let mut c = greet(&srv);
        c.send_opt(OPT_GO, &Client::<TcpStream>::info_payload("test", &[]));
        assert_eq!(c.opt_reply().ty, REP_ERR_TLS_REQD, "plain text first");
        let mut c = starttls(c, "bob", BOB, version).unwrap();
        assert_eq!(c.s.ssl().version_str(), name);
        if version == SslVersion::TLS1_3 {
            let cipher = c.s.ssl().current_cipher().unwrap().name();
            assert_eq!(cipher, "TLS_AES_128_GCM_SHA256", "the server's order of ciphers wins");
        }
        c.info_or_go(OPT_GO, "test").unwrap();
        assert_eq!(c.size, SIZE as u64);
        // Small requests pipelined, then the whole export in one request
        // each way (many records, more than a send piece).
        c.pipelined_then_whole(SIZE);
        c.send(Command::Disc, 0, 0, 0, 0, &[]);
        let mut b = [0u8; 1];
        assert_eq!(c.s.read(&mut b).unwrap_or(0), 0, "closed after DISC");
        let st = srv.stop();
        assert_eq!((st.connections, st.errors), (1, 0), "{name}");
    }
}

#[test]
fn a_wrong_key_or_an_unknown_username_loses_its_connection_only() {
    let d = tempfile::tempdir().unwrap();
    let f = keys(d.path());
    let srv = Server::start(Arc::new(MemExport::new(SIZE, 4096)), psk_cfg(&f, TlsMode::Require));
    // Bytes that are no ClientHello, and a client gone mid-handshake.
    for garbage in [&b"this is not a TLS ClientHello at all, just bytes\n"[..], &[0x16, 0x03, 0x01, 0x40, 0x00, 0x01]] {
        let mut c = greet(&srv);
        c.send_opt(OPT_STARTTLS, &[]);
        assert_eq!(c.opt_reply().ty, REP_ACK);
        c.s.write_all(garbage).unwrap();
        c.s.shutdown(std::net::Shutdown::Write).unwrap();
        let mut b = [0u8; 64];
        // An alert at most, then the end.
        while c.s.read(&mut b).unwrap_or(0) > 0 {}
    }
    for version in [SslVersion::TLS1_2, SslVersion::TLS1_3] {
        // Alice's username with Bob's key, and a username the file lacks.
        for (user, key) in [("alice", BOB), ("carol", ALICE), ("", ALICE)] {
            // The server's alert ends the client's handshake (a PSK is
            // checked before the server's Finished in both versions).
            let e = starttls(greet(&srv), user, key, version).err();
            assert!(e.is_some(), "{user:?} with the wrong key at {version:?} is refused");
        }
        let mut c = starttls(greet(&srv), "alice", ALICE, version).unwrap();
        c.info_or_go(OPT_GO, "test").unwrap();
        assert_eq!(c.write(4096, &pattern(5, 4096)), 0);
        assert_eq!(c.read(4096, 4096).unwrap(), pattern(5, 4096));
    }
}

#[test]
fn an_offering_server_with_pre_shared_keys_serves_plain_clients_too() {
    let d = tempfile::tempdir().unwrap();
    let f = keys(d.path());
    let srv = Server::start(Arc::new(MemExport::new(SIZE, 4096)), psk_cfg(&f, TlsMode::On));
    let mut c = greet(&srv);
    c.info_or_go(OPT_GO, "test").unwrap();
    assert_eq!(c.write(0, &pattern(1, 4096)), 0);
    let mut t = starttls(greet(&srv), "alice", ALICE, SslVersion::TLS1_3).unwrap();
    t.info_or_go(OPT_GO, "test").unwrap();
    assert_eq!(t.read(0, 4096).unwrap(), pattern(1, 4096), "the plain client's write, read through TLS");
}

#[test]
fn keys_file_problems_are_errors_that_name_the_file_and_line() {
    let d = tempfile::tempdir().unwrap();
    let f = d.path().join("keys.psk");
    std::fs::write(&f, format!("alice:{ALICE}\nbob {BOB}\n")).unwrap();
    let e = Tls::load_psk(&f, TlsMode::Require).unwrap_err();
    assert!(e.contains("keys.psk: line 2: expected username:key"), "{e}");
    let e = Tls::load_psk(&d.path().join("absent.psk"), TlsMode::Require).unwrap_err();
    assert!(e.contains("absent.psk"), "{e}");
}

/// libnbd's TLS client (GnuTLS) with `tls-psk-file`: nbdinfo sees the
/// export, nbdcopy writes a file and reads it back as each username; a
/// wrong key and a plain URI are refused, and the server goes on.
#[test]
fn libnbd_clients_copy_bytes_with_pre_shared_keys() {
    if !libnbd_tools() {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let f = keys(d.path());
    let srv = Server::start(Arc::new(MemExport::new(SIZE, 4096)), psk_cfg(&f, TlsMode::Require));
    let port = srv.addr.port();
    let uri = |user: &str, file: &Path| format!("nbds://{user}@localhost:{port}/test?tls-psk-file={}", file.display());
    for (i, user) in ["alice", "bob"].into_iter().enumerate() {
        libnbd_copies(&uri(user, &f), d.path(), 20 + i as u64, SIZE, user);
    }
    let wrong = d.path().join("wrong.psk");
    std::fs::write(&wrong, format!("alice:{BOB}\n")).unwrap();
    let out = Proc::new("nbdinfo").arg(uri("alice", &wrong)).output().unwrap();
    assert!(!out.status.success(), "a wrong key is refused");
    let out = Proc::new("nbdinfo").arg(format!("nbd://localhost:{port}/test")).output().unwrap();
    assert!(!out.status.success(), "a plain client is refused");
    let out = Proc::new("nbdinfo").arg("--size").arg(uri("bob", &f)).output().unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), SIZE.to_string(), "served after the refusals");
}
