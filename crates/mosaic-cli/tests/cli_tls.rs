//! `serve --tls`: an array served through TLS to libnbd's clients (nbdcopy,
//! nbdinfo), plain clients refused or served by mode, client certificates
//! checked, bad TLS options refused before the server listens; and remote
//! members reached through TLS (nbdkit `--tls=require`).

use crate::common;
use common::serve::Serve;
use common::{fails, mosaic, ok, pattern};

use std::path::Path;
use std::process::{Command, Output};

const MIB: usize = 1 << 20;

fn run(prog: &str, args: &[&str]) -> Output {
    Command::new(prog).args(args).output().unwrap_or_else(|e| panic!("{prog}: {e} (libnbd-bin)"))
}

fn succeeds(prog: &str, args: &[&str]) {
    let o = run(prog, args);
    assert!(o.status.success(), "{prog} {args:?}: {}", String::from_utf8_lossy(&o.stderr));
}

/// The URI the server logged it listens on.
fn uri(srv: &Serve) -> String {
    let lines = srv.lines();
    let l = lines.iter().find_map(|l| l.split_once("listening on ").map(|(_, u)| u.split(' ').next().unwrap().to_string()));
    l.expect("a listening line")
}

fn certs(dir: &Path) -> String {
    mosaic_nbd::tls::test_certs(dir, &["localhost", "127.0.0.1"]).unwrap();
    dir.display().to_string()
}

/// `len` bytes of a pattern copied by nbdcopy into the export at `to`,
/// then the export at `from` copied out and its start compared.
fn copy_through(dir: &Path, to: &str, from: &str, len: usize, what: &str) -> Vec<u8> {
    let data = pattern(len, 7);
    let (src, back) = (dir.join("src"), dir.join("back"));
    std::fs::write(&src, &data).unwrap();
    succeeds("nbdcopy", &[src.to_str().unwrap(), to]);
    succeeds("nbdcopy", &[from, back.to_str().unwrap()]);
    assert!(std::fs::read(&back).unwrap()[..data.len()] == data[..], "{what}");
    data
}

#[test]
fn an_array_served_through_tls_takes_and_gives_bytes_and_refuses_plain_clients() {
    let t = tempfile::tempdir().unwrap();
    let a = t.path().join("a");
    let a = a.to_str().unwrap();
    ok(&["create", "-a", a, "--level", "raid5", "--members", "5", "--member-size", "8M"]);
    let pki = certs(&t.path().join("pki"));
    let srv = Serve::start(a, &["--tls-certificates", &pki]);
    let u = uri(&srv);
    assert!(u.starts_with(&format!("nbds://127.0.0.1:{}/mosaic?tls-certificates=", srv.port)), "{u}");
    assert!(srv.lines().iter().any(|l| l.contains("TLS required with")), "{:?}", srv.lines());
    let data = copy_through(t.path(), &u, &u, 3 * MIB, "bytes back through TLS");
    let info = run("nbdinfo", &[&u]);
    assert!(String::from_utf8_lossy(&info.stdout).contains("with TLS"), "{}", String::from_utf8_lossy(&info.stdout));
    let plain = run("nbdinfo", &[&format!("nbd://127.0.0.1:{}/mosaic", srv.port)]);
    assert!(!plain.status.success(), "a plain client is refused");
    let (code, _) = srv.stop();
    assert_eq!(code, 0);
    // The bytes are the array's: read back without a server.
    let out = t.path().join("direct");
    ok(&["read", "-a", a, "--offset", "0", "--length", &data.len().to_string(), "--output", out.to_str().unwrap()]);
    assert!(std::fs::read(&out).unwrap() == data);
}

#[test]
fn tls_on_serves_both_and_verify_peer_wants_the_cas_client_certificate() {
    let t = tempfile::tempdir().unwrap();
    let a = t.path().join("a");
    let a = a.to_str().unwrap();
    ok(&["create", "-a", a, "--level", "raid1", "--members", "2", "--member-size", "4M"]);
    let pki = certs(&t.path().join("pki"));
    let srv = Serve::start(a, &["--tls", "on", "--tls-certificates", &pki]);
    let plain = format!("nbd://127.0.0.1:{}/mosaic", srv.port);
    assert_eq!(uri(&srv), plain, "TLS offered: the plain URI");
    succeeds("nbdinfo", &[&plain]);
    succeeds("nbdinfo", &[&format!("nbds://127.0.0.1:{}/mosaic?tls-certificates={pki}", srv.port)]);
    srv.stop();
    // Client certificates checked: libnbd sends client-cert.pem from its
    // directory; a directory with only the CA has none to send.
    let srv = Serve::start(a, &["--tls-certificates", &pki, "--tls-verify-peer"]);
    assert!(srv.lines().iter().any(|l| l.contains("client certificates checked")));
    succeeds("nbdinfo", &[&uri(&srv)]);
    let ca_only = t.path().join("ca-only");
    std::fs::create_dir(&ca_only).unwrap();
    std::fs::copy(t.path().join("pki/ca-cert.pem"), ca_only.join("ca-cert.pem")).unwrap();
    let o = run("nbdinfo", &[&format!("nbds://127.0.0.1:{}/mosaic?tls-certificates={}", srv.port, ca_only.display())]);
    assert!(!o.status.success(), "no client certificate: refused");
    srv.stop();
}

#[test]
fn bad_tls_options_are_refused_before_the_server_listens() {
    let t = tempfile::tempdir().unwrap();
    let a = t.path().join("a");
    let a = a.to_str().unwrap();
    ok(&["create", "-a", a, "--level", "raid1", "--members", "2", "--member-size", "4M"]);
    let serve = |extra: &[&str]| {
        let mut args = vec!["serve", "-a", a, "--listen", "127.0.0.1:0"];
        args.extend_from_slice(extra);
        fails(&args)
    };
    let e = serve(&["--tls", "require"]);
    assert!(e.contains("--tls needs --tls-certificates"), "{e}");
    let e = serve(&["--tls-verify-peer"]);
    assert!(e.contains("--tls-verify-peer needs TLS"), "{e}");
    let empty = t.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    let e = serve(&["--tls-certificates", empty.to_str().unwrap()]);
    assert!(e.contains("server-cert.pem") && !e.contains("listening"), "{e}");
    let pki = certs(&t.path().join("pki"));
    let e = serve(&["--tls", "off", "--tls-certificates", &pki]);
    assert!(e.contains("leave one out"), "{e}");
    std::fs::write(t.path().join("pki/server-key.pem"), "-----BEGIN PRIVATE KEY-----\nnot base64!\n-----END PRIVATE KEY-----\n").unwrap();
    let e = serve(&["--tls-certificates", &pki]);
    assert!(e.contains("server-key.pem"), "{e}");
    // Pre-shared keys: alone, and a keys file read before listening.
    let keys = psk_file(&t.path().join("keys.psk"));
    let e = serve(&["--tls-psk", &keys, "--tls-certificates", &pki]);
    assert!(e.contains("--tls-certificates and --tls-psk: give one"), "{e}");
    let e = serve(&["--tls-psk", &keys, "--tls-verify-peer"]);
    assert!(e.contains("--tls-verify-peer is for certificates"), "{e}");
    let e = serve(&["--tls", "off", "--tls-psk", &keys]);
    assert!(e.contains("leave one out"), "{e}");
    let bad = t.path().join("bad.psk");
    std::fs::write(&bad, "alice:0011\nbob:xyz\n").unwrap();
    let e = serve(&["--tls-psk", bad.to_str().unwrap()]);
    assert!(e.contains("--tls-psk: ") && e.contains("bad.psk: line 2: the key of \"bob\" is not") && !e.contains("listening"), "{e}");
    let e = serve(&["--tls-psk", t.path().join("absent.psk").to_str().unwrap()]);
    assert!(e.contains("absent.psk"), "{e}");
    // The array is untouched and opens clean.
    let o = mosaic(&["status", "-a", a]);
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stdout));
}

#[test]
fn members_on_servers_that_require_tls_are_reached_through_it() {
    let t = tempfile::tempdir().unwrap();
    let pki = certs(&t.path().join("pki"));
    let (a, kids) = nbdkit_members(t.path(), &format!("--tls-certificates={pki}"), |sock| format!("nbds+unix:///m?socket={sock}&tls-certificates={pki}"));
    // Without the certificates the member cannot be reached: a clear error.
    let plain = format!("nbd+unix:///m?socket={}", t.path().join("m0.sock").display());
    let e = fails(&["examine", &plain]);
    assert!(e.contains("m0.sock"), "{e}");
    ok(&["create", "-a", &a, "--level", "raid5", "--stripe-unit", "64K"]);
    write_and_read_back(t.path(), &a, 2 * MIB, "through three TLS members");
    let scrub = ok(&["scrub", "-a", &a]);
    assert!(scrub.contains("0 stripes with mismatched"), "{scrub}");
    stop(kids);
}

/// A keys file as psktool writes it: `alice` and `bob`, random keys.
fn psk_file(path: &Path) -> String {
    let hex = |seed: u32| pattern(32, seed).iter().map(|b| format!("{b:02x}")).collect::<String>();
    std::fs::write(path, format!("alice:{}\nbob:{}\n", hex(1), hex(2))).unwrap();
    path.display().to_string()
}

#[test]
fn an_array_served_with_pre_shared_keys_takes_and_gives_bytes() {
    let t = tempfile::tempdir().unwrap();
    let a = t.path().join("a");
    let a = a.to_str().unwrap();
    ok(&["create", "-a", a, "--level", "raid5", "--members", "3", "--member-size", "4M"]);
    let keys = psk_file(&t.path().join("keys.psk"));
    let srv = Serve::start(a, &["--tls-psk", &keys]);
    let u = uri(&srv);
    assert_eq!(u, format!("nbds://alice@127.0.0.1:{}/mosaic?tls-psk-file={keys}", srv.port));
    assert!(srv.lines().iter().any(|l| l.contains("TLS required with the pre-shared keys in") && l.contains("(2 usernames)")), "{:?}", srv.lines());
    let data = copy_through(t.path(), &u, &u.replace("alice@", "bob@"), 2 * MIB, "bytes back through TLS, as another username");
    let wrong = t.path().join("wrong.psk");
    std::fs::write(&wrong, "alice:00112233\n").unwrap();
    assert!(!run("nbdinfo", &[&u.replace(&keys, wrong.to_str().unwrap())]).status.success(), "a wrong key is refused");
    srv.wait_line("TLS handshake: TLS, as PSK username \"alice\": ");
    assert!(!run("nbdinfo", &[&format!("nbd://127.0.0.1:{}/mosaic", srv.port)]).status.success(), "a plain client is refused");
    // qemu's own client, its keys in DIR/keys.psk.
    let qemu = |dir: &Path, user: &str, cmds: &[&str]| {
        let creds = format!("tls-creds-psk,id=tls0,endpoint=client,dir={},username={user}", dir.display());
        let opts = format!("driver=nbd,host=127.0.0.1,port={},export=mosaic,tls-creds=tls0", srv.port);
        let mut args = vec!["--object".to_string(), creds, "--image-opts".into(), opts];
        for c in cmds {
            args.extend(["-c".to_string(), c.to_string()]);
        }
        let o = Command::new("qemu-io").args(&args).output().expect("run qemu-io (qemu-utils)");
        (o.status.success(), format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr)))
    };
    let (fine, out) = qemu(t.path(), "bob", &["write -P 0x5a 4M 1M", "read -P 0x5a 4M 1M"]);
    assert!(fine && out.contains("read 1048576/1048576") && !out.contains("Pattern verification failed"), "{out}");
    // A username the server's keys lack, with a key of its own.
    let other = t.path().join("carol");
    std::fs::create_dir(&other).unwrap();
    psk_file(&other.join("keys.psk"));
    std::fs::write(other.join("keys.psk"), std::fs::read_to_string(other.join("keys.psk")).unwrap().replace("alice:", "carol:")).unwrap();
    let (fine, out) = qemu(&other, "carol", &["read 0 4k"]);
    assert!(!fine, "a username the keys lack: {out}");
    srv.wait_line("PSK username \"carol\" is not in the keys file");
    srv.stop();
    // `--run` hands its command the URI with a username and the keys.
    let out = t.path().join("run-out");
    let cmd = format!("nbdcopy \"$uri\" {}", out.display());
    let o = mosaic(&["serve", "-a", a, "--listen", "127.0.0.1:0", "--quiet", "--tls-psk", &keys, "--run", &cmd]);
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(std::fs::read(&out).unwrap()[..data.len()] == data[..], "--run's client read through TLS");
}

#[test]
fn members_on_servers_with_pre_shared_keys_are_reached_through_them() {
    let t = tempfile::tempdir().unwrap();
    let keys = psk_file(&t.path().join("keys.psk"));
    let (a, kids) = nbdkit_members(t.path(), &format!("--tls-psk={keys}"), |sock| format!("nbds+unix://bob@/m?socket={sock}&tls-psk-file={keys}"));
    ok(&["create", "-a", &a, "--level", "raid5", "--stripe-unit", "64K"]);
    write_and_read_back(t.path(), &a, MIB, "through three members with pre-shared keys");
    stop(kids);
}

/// Three 8 MiB members, each a file nbdkit serves on a unix socket with
/// `--tls=require` and `tls`; the array's comma list, by `uri(socket)`.
fn nbdkit_members(dir: &Path, tls: &str, uri: impl Fn(&str) -> String) -> (String, Vec<std::process::Child>) {
    let (mut kids, mut uris) = (Vec::new(), Vec::new());
    for i in 0..3 {
        let (file, sock) = (dir.join(format!("m{i}.img")), dir.join(format!("m{i}.sock")));
        std::fs::File::create(&file).unwrap().set_len(8 << 20).unwrap();
        kids.push(mosaic_dev::testing::nbdkit(&file, &sock, &["--tls=require", tls], &[]));
        uris.push(uri(&sock.display().to_string()));
    }
    (uris.join(","), kids)
}

/// `len` bytes written to array `a` from the start and read back.
fn write_and_read_back(dir: &Path, a: &str, len: usize, what: &str) {
    let data = pattern(len, 3);
    let (src, back) = (dir.join("src"), dir.join("back"));
    std::fs::write(&src, &data).unwrap();
    ok(&["write", "-a", a, "--offset", "0", "--input", src.to_str().unwrap()]);
    ok(&["read", "-a", a, "--offset", "0", "--length", &data.len().to_string(), "--output", back.to_str().unwrap()]);
    assert!(std::fs::read(&back).unwrap() == data, "{what}");
}

fn stop(kids: Vec<std::process::Child>) {
    for mut k in kids {
        let _ = k.kill();
        let _ = k.wait();
    }
}
