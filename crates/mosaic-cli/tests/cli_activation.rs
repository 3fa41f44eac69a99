//! Socket activation (`LISTEN_PID`, `LISTEN_FDS`): `mosaic serve` started
//! by libnbd's `nbdcopy [ CMD ]` as nbdkit and qemu-nbd are, and by a
//! service manager that passes a TCP and a unix socket at once; bad
//! variables, bad fds and conflicting options refused before the array
//! is opened.

use crate::common;
use common::serve::Serve;
use common::{ok, pattern, stderr};

use std::net::TcpListener;
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::net::UnixListener;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::Command;

/// `mosaic ARGS` as a service manager starts it: `fds` at 3, 4, ...,
/// `LISTEN_PID` its own pid (`sh` execs it) and `LISTEN_FDS` = `count`.
fn activated(fds: &[RawFd], count: &str, args: &[&str]) -> Command {
    let mut c = Command::new("sh");
    c.arg("-c").arg("export LISTEN_PID=$$; exec \"$0\" \"$@\"").arg(env!("CARGO_BIN_EXE_mosaic")).args(args).env("LISTEN_FDS", count);
    let fds = fds.to_vec();
    // SAFETY: between fork and exec only fcntl and dup2 run (both
    // async-signal-safe), on fds the test holds open.
    unsafe {
        c.pre_exec(move || {
            // Out of the way first (close-on-exec copies), so no target
            // fd overwrites a source not yet moved.
            let mut high = Vec::new();
            for &fd in &fds {
                let h = libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 100);
                if h < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                high.push(h);
            }
            for (i, &h) in high.iter().enumerate() {
                if libc::dup2(h, 3 + i as RawFd) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
            }
            Ok(())
        });
    }
    c
}

/// A member file's bytes, to show an array was not opened (a writable
/// open writes every member's label).
fn member(arr: &Path) -> Vec<u8> {
    std::fs::read(arr.join("member-00.img")).unwrap()
}

/// nbdcopy with a `[ CMD ARGS ]` source or destination runs the server
/// itself: a unix socket on fd 3, SIGTERM when the copy is done.  The
/// server flushes and closes the array each time, and the bytes written
/// through one server come back through the next and offline.
#[test]
fn nbdcopy_starts_the_server_by_socket_activation_and_the_bytes_come_back() {
    let t = tempfile::tempdir().unwrap();
    let arr = t.path().join("arr");
    let a = arr.to_str().unwrap();
    ok(&["create", "-a", a, "--level", "raid5", "--members", "4", "--member-size", "8M"]);
    let (input, out) = (t.path().join("in.bin"), t.path().join("out.bin"));
    let data = pattern(3 << 20, 7);
    std::fs::write(&input, &data).unwrap();
    let server = [env!("CARGO_BIN_EXE_mosaic"), "serve", "-a", a, "--quiet"];
    let w = Command::new("nbdcopy").arg("--").arg(&input).arg("[").args(server).arg("]").output().unwrap();
    let err = stderr(&w);
    assert!(w.status.success(), "{err}");
    assert!(err.contains("mosaic serve: socket activation: fd 3: unix /"), "{err}");
    assert!(err.contains("array flushed and closed clean"), "SIGTERM from libnbd stops it cleanly: {err}");
    let r = Command::new("nbdcopy").arg("--").arg("[").args(server).arg("]").arg(&out).output().unwrap();
    assert!(r.status.success(), "{}", stderr(&r));
    let back = std::fs::read(&out).unwrap();
    assert_eq!(back.len() as u64, common::json(&ok(&["info", "-a", a, "--json"]))["capacity"].as_u64().unwrap(), "the whole array copied");
    assert!(back[..data.len()] == data[..], "written through one activated server, read through another");
    let offline = t.path().join("offline.bin");
    ok(&["read", "-a", a, "--offset", "0", "--length", "3M", "--output", offline.to_str().unwrap()]);
    assert!(std::fs::read(&offline).unwrap() == data, "and read offline");
}

/// A TCP and a unix socket passed together: one array served on both,
/// through a member failure; the variables are not passed on to the
/// server's hooks, and the unix socket's file is left to its manager.
#[test]
fn passed_tcp_and_unix_sockets_serve_one_array_and_hooks_do_not_inherit_the_variables() {
    let t = tempfile::tempdir().unwrap();
    let arr = t.path().join("arr");
    let a = arr.to_str().unwrap();
    ok(&["create", "-a", a, "--level", "raid5", "--members", "4", "--member-size", "8M"]);
    let tcp = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = tcp.local_addr().unwrap().port();
    let path = t.path().join("passed.sock");
    let unix = UnixListener::bind(&path).unwrap();
    let hook = t.path().join("hook.env");
    let on_event = format!("echo \"$MOSAIC_EVENT pid=${{LISTEN_PID:-none}} fds=${{LISTEN_FDS:-none}}\" >> {}", hook.display());
    let cmd = activated(&[tcp.as_raw_fd(), unix.as_raw_fd()], "2", &["serve", "-a", a, "--quiet", "--on-event", &on_event]);
    let srv = Serve::spawn_command(cmd, 1);
    assert_eq!(srv.port, port, "the first passed socket is the one logged");
    srv.wait_line(&format!("socket activation: fd 3: TCP 127.0.0.1:{port}, fd 4: unix {}", path.display()));
    let (input, out) = (t.path().join("in.bin"), t.path().join("out.bin"));
    let data = pattern(2 << 20, 11);
    std::fs::write(&input, &data).unwrap();
    let w = Command::new("nbdcopy").arg(&input).arg(format!("nbd://127.0.0.1:{port}/")).output().unwrap();
    assert!(w.status.success(), "{}", stderr(&w));
    assert!(ok(&["fail", "-a", a, "--member", "1"]).contains("marked failed"));
    let r = Command::new("nbdcopy").arg(format!("nbd+unix:///?socket={}", path.display())).arg(&out).output().unwrap();
    assert!(r.status.success(), "{}", stderr(&r));
    assert!(std::fs::read(&out).unwrap()[..data.len()] == data[..], "written over TCP, read degraded over the unix socket");
    let (code, lines) = srv.stop();
    assert_eq!(code, 0, "{lines:?}");
    assert!(lines.iter().any(|l| l.contains("array flushed and closed clean")), "{lines:?}");
    let heard = std::fs::read_to_string(&hook).unwrap();
    assert!(heard.lines().any(|l| l == "member-failed pid=none fds=none"), "the hook ran without LISTEN_*: {heard}");
    assert!(path.exists(), "a passed socket's file is its manager's");
}

/// Refused before the array is opened (its members' bytes unchanged):
/// a passed fd that is not a listening socket, malformed variables, and
/// an option naming another socket, a command or a config file.  Variables naming
/// another process are an activated parent's: the server binds its own.
#[test]
fn bad_activation_is_refused_before_the_array_is_opened() {
    let t = tempfile::tempdir().unwrap();
    let arr = t.path().join("arr");
    let a = arr.to_str().unwrap();
    ok(&["create", "-a", a, "--level", "raid5", "--members", "4", "--member-size", "8M"]);
    let before = member(&arr);
    let file = std::fs::File::create(t.path().join("not-a-socket")).unwrap();
    let tcp = TcpListener::bind("127.0.0.1:0").unwrap();
    let refused = |fds: &[RawFd], count: &str, extra: &[&str], why: &str| {
        let args: Vec<&str> = ["serve", "-a", a, "--quiet"].iter().chain(extra).copied().collect();
        let o = activated(fds, count, &args).output().unwrap();
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(1), "{err}");
        assert!(err.contains(why), "{why:?} in {err}");
        assert!(member(&arr) == before, "the array was not opened: {err}");
    };
    refused(&[file.as_raw_fd()], "1", &[], "socket activation: fd 3 is not a socket");
    refused(&[tcp.as_raw_fd(), file.as_raw_fd()], "2", &[], "socket activation: fd 4 is not a socket");
    refused(&[tcp.as_raw_fd()], "2", &[], "socket activation: fd 4 is not open");
    refused(&[tcp.as_raw_fd()], "zero", &[], "LISTEN_FDS=\"zero\" is not a number of sockets");
    refused(&[tcp.as_raw_fd()], "0", &[], "LISTEN_FDS=0: the service manager passed no socket");
    let port = tcp.local_addr().unwrap().port();
    let serving = format!("serves on the sockets passed to it (fd 3: TCP 127.0.0.1:{port})");
    refused(&[tcp.as_raw_fd()], "1", &["--listen", "127.0.0.1:0"], &format!("--listen: this server was started by socket activation (LISTEN_PID, LISTEN_FDS) and {serving}"));
    refused(&[tcp.as_raw_fd()], "1", &["--run", "true"], &format!("--run: this server was started by socket activation (LISTEN_PID, LISTEN_FDS) and {serving}"));
    let sock = t.path().join("own.sock");
    refused(&[tcp.as_raw_fd()], "1", &["--socket", sock.to_str().unwrap()], &format!("--socket: this server was started by socket activation (LISTEN_PID, LISTEN_FDS) and {serving}"));
    assert!(!sock.exists(), "no socket of its own bound");
    // A config file's servers would each want the passed sockets.
    let config = t.path().join("mosaic.toml");
    std::fs::write(&config, format!("[[serve]]\narray = \"{a}\"\n")).unwrap();
    let o = activated(&[tcp.as_raw_fd()], "1", &["serve", "--config", config.to_str().unwrap()]).output().unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stderr(&o).contains(&format!("--config: this server was started by socket activation (LISTEN_PID, LISTEN_FDS) and {serving}")), "{}", stderr(&o));
    assert!(member(&arr) == before, "the array was not opened");
    // LISTEN_PID names another process: not this server's sockets.
    let mut other = Command::new(env!("CARGO_BIN_EXE_mosaic"));
    other.args(["serve", "-a", a, "--quiet", "--listen", "127.0.0.1:0"]).env("LISTEN_PID", "1").env("LISTEN_FDS", "1");
    let srv = Serve::spawn_command(other, 1);
    assert_ne!(srv.port, port, "bound a port of its own");
    let (code, lines) = srv.stop();
    assert_eq!(code, 0, "{lines:?}");
    assert!(!lines.iter().any(|l| l.contains("socket activation")), "{lines:?}");
}
