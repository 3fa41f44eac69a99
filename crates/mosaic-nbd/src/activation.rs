//! Socket activation: listening sockets handed over by the process that
//! starts the server, as systemd does for a `.socket` unit and libnbd
//! does for `nbdcopy [ CMD ARGS ]` (`sd_listen_fds`' protocol, which
//! nbdkit and qemu-nbd take too).
//!
//! ```text
//!   manager: socket, bind, listen ─▶ fork ─▶ exec the server, with
//!            fds 3 .. 3+N-1 open      LISTEN_PID = the server's pid
//!                                     LISTEN_FDS = N  (LISTEN_FDNAMES)
//! ```
//!
//! Variables naming another process were inherited from an activated
//! parent: they are not this server's, and it binds its own socket.
//! Variables naming this process are removed once read, so no hook or
//! child takes them, and each fd must be a listening stream socket, TCP
//! or unix; it becomes close-on-exec and non-blocking.  Anything else is
//! an error that names the variable or the fd: a server never serves on
//! a socket it was not meant to have.

use std::io;
use std::mem::{size_of, MaybeUninit};
use std::net::TcpListener;
use std::ops::Range;
use std::os::fd::{FromRawFd, RawFd};
use std::os::unix::net::UnixListener;

use crate::stream::{Listener, Sock};

/// The first passed fd (after stdin, stdout and stderr).
pub const FIRST_FD: RawFd = 3;

/// More sockets than this in `LISTEN_FDS` is a malformed variable.
const MAX_FDS: usize = 1024;

/// The variables of the protocol, all removed once taken.
const VARS: [&str; 3] = ["LISTEN_PID", "LISTEN_FDS", "LISTEN_FDNAMES"];

/// The fds passed to process `me` by the values of `LISTEN_PID` and
/// `LISTEN_FDS`: `None` unless both are set and the pid is `me`.
pub fn passed_fds(pid: Option<&str>, fds: Option<&str>, me: u32) -> io::Result<Option<Range<RawFd>>> {
    let (Some(pid), Some(fds)) = (pid, fds) else {
        return Ok(None);
    };
    match pid.trim().parse::<u32>() {
        Ok(p) if p == me => {}
        Ok(_) => return Ok(None),
        Err(_) => return Err(invalid(format!("LISTEN_PID={pid:?} is not a process id"))),
    }
    match fds.trim().parse::<usize>() {
        Ok(0) => Err(invalid("LISTEN_FDS=0: the service manager passed no socket".into())),
        Ok(n) if n <= MAX_FDS => Ok(Some(FIRST_FD..FIRST_FD + n as RawFd)),
        Ok(n) => Err(invalid(format!("LISTEN_FDS={n}: more than {MAX_FDS} sockets"))),
        Err(_) => Err(invalid(format!("LISTEN_FDS={fds:?} is not a number of sockets"))),
    }
}

/// The sockets passed to this process, if it was socket-activated, as one
/// [`Listener`] (see the module's doc).  Reads and removes the
/// environment variables: call it before any thread starts.
pub fn take() -> io::Result<Option<Listener>> {
    let (pid, fds) = (std::env::var("LISTEN_PID").ok(), std::env::var("LISTEN_FDS").ok());
    let Some(range) = passed_fds(pid.as_deref(), fds.as_deref(), std::process::id())? else {
        return Ok(None);
    };
    for v in VARS {
        std::env::remove_var(v);
    }
    // Every fd is checked before any is owned, so an error leaves them all
    // as they were.
    let families = range.clone().map(check).collect::<io::Result<Vec<_>>>()?;
    let socks = range.zip(families).map(|(fd, f)| own(fd, f)).collect::<io::Result<Vec<Sock>>>()?;
    Ok(Some(Listener::of(socks, None)))
}

/// Whether `fd` is a listening stream socket of TCP or a unix socket: its
/// address family.
pub fn check(fd: RawFd) -> io::Result<libc::c_int> {
    let at = |what: &str| invalid(format!("socket activation: fd {fd} {what}"));
    // SAFETY: fcntl reads an fd's flags; no memory is passed.
    if unsafe { libc::fcntl(fd, libc::F_GETFD) } < 0 {
        return Err(at("is not open"));
    }
    let ty = sockopt(fd, libc::SO_TYPE).map_err(|e| if e.raw_os_error() == Some(libc::ENOTSOCK) { at("is not a socket") } else { e })?;
    if ty != libc::SOCK_STREAM {
        return Err(at("is not a stream socket (TCP or unix)"));
    }
    if sockopt(fd, libc::SO_ACCEPTCONN)? == 0 {
        return Err(at("is a socket that does not listen"));
    }
    match family(fd)? {
        f @ (libc::AF_UNIX | libc::AF_INET | libc::AF_INET6) => Ok(f),
        f => Err(at(&format!("is a socket of address family {f}, not TCP or unix"))),
    }
}

/// Own the passed socket `fd`, which [`check`] found of family `f`:
/// close-on-exec, non-blocking.
fn own(fd: RawFd, f: libc::c_int) -> io::Result<Sock> {
    // SAFETY: fcntl sets an fd's flags; no memory is passed.
    if unsafe { libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC) } < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` is open, a listening stream socket of this family, and
    // was passed to this process to own: nothing else in it closes it.
    let sock = unsafe {
        match f {
            libc::AF_UNIX => {
                let l = UnixListener::from_raw_fd(fd);
                let path = l.local_addr().ok().and_then(|a| a.as_pathname().map(|p| p.to_path_buf()));
                Sock::Unix(l, path)
            }
            _ => Sock::Tcp(TcpListener::from_raw_fd(fd)),
        }
    };
    match &sock {
        Sock::Tcp(l) => l.set_nonblocking(true)?,
        Sock::Unix(l, _) => l.set_nonblocking(true)?,
    }
    Ok(sock)
}

/// An integer socket option of level `SOL_SOCKET`.
fn sockopt(fd: RawFd, name: libc::c_int) -> io::Result<libc::c_int> {
    let mut v: libc::c_int = 0;
    let mut len = size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: `v` and `len` are live and sized for the option's int.
    let r = unsafe { libc::getsockopt(fd, libc::SOL_SOCKET, name, (&mut v as *mut libc::c_int).cast(), &mut len) };
    match r {
        0 => Ok(v),
        _ => Err(io::Error::last_os_error()),
    }
}

/// The address family of socket `fd`'s local address.
fn family(fd: RawFd) -> io::Result<libc::c_int> {
    let mut a = MaybeUninit::<libc::sockaddr_storage>::zeroed();
    let mut len = size_of::<libc::sockaddr_storage>() as libc::socklen_t;
    // SAFETY: `a` is a zeroed sockaddr_storage and `len` its size.
    let r = unsafe { libc::getsockname(fd, a.as_mut_ptr().cast(), &mut len) };
    match r {
        // SAFETY: zeroed, then written by getsockname.
        0 => Ok(unsafe { a.assume_init() }.ss_family as libc::c_int),
        _ => Err(io::Error::last_os_error()),
    }
}

fn invalid(msg: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, msg)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;
    use std::net::{TcpStream, UdpSocket};
    use std::os::fd::{AsRawFd, IntoRawFd};
    use std::os::unix::net::UnixStream;
    use std::time::{Duration, Instant};

    #[test]
    fn the_variables_pass_fds_only_to_the_process_they_name() {
        assert_eq!(passed_fds(None, None, 7).unwrap(), None);
        assert_eq!(passed_fds(Some("7"), None, 7).unwrap(), None);
        assert_eq!(passed_fds(None, Some("1"), 7).unwrap(), None);
        assert_eq!(passed_fds(Some("8"), Some("1"), 7).unwrap(), None, "an activated parent's variables");
        assert_eq!(passed_fds(Some("7"), Some("1"), 7).unwrap(), Some(3..4));
        assert_eq!(passed_fds(Some("7"), Some("2"), 7).unwrap(), Some(3..5));
        assert_eq!(passed_fds(Some("7"), Some("1024"), 7).unwrap(), Some(3..1027));
    }

    #[test]
    fn malformed_variables_are_errors_that_name_them() {
        let err = |pid: &str, fds: &str| passed_fds(Some(pid), Some(fds), 7).unwrap_err().to_string();
        assert_eq!(err("x7", "1"), "LISTEN_PID=\"x7\" is not a process id");
        assert_eq!(err("-1", "1"), "LISTEN_PID=\"-1\" is not a process id");
        assert_eq!(err("7", "0"), "LISTEN_FDS=0: the service manager passed no socket");
        assert_eq!(err("7", "two"), "LISTEN_FDS=\"two\" is not a number of sockets");
        assert_eq!(err("7", "-2"), "LISTEN_FDS=\"-2\" is not a number of sockets");
        assert_eq!(err("7", "1025"), "LISTEN_FDS=1025: more than 1024 sockets");
    }

    /// Close `fd`, which a test made and did not hand to a listener.
    fn close(fd: RawFd) {
        // SAFETY: the test owns `fd` and uses it no more.
        unsafe { libc::close(fd) };
    }

    #[test]
    fn only_listening_stream_sockets_are_taken() {
        let err = |fd: RawFd| check(fd).unwrap_err().to_string();
        assert_eq!(err(i32::MAX), format!("socket activation: fd {} is not open", i32::MAX));
        let file = tempfile::tempfile().unwrap();
        assert_eq!(err(file.as_raw_fd()), format!("socket activation: fd {} is not a socket", file.as_raw_fd()));
        let udp = UdpSocket::bind("127.0.0.1:0").unwrap();
        assert_eq!(err(udp.as_raw_fd()), format!("socket activation: fd {} is not a stream socket (TCP or unix)", udp.as_raw_fd()));
        let (a, _b) = UnixStream::pair().unwrap();
        assert_eq!(err(a.as_raw_fd()), format!("socket activation: fd {} is a socket that does not listen", a.as_raw_fd()));
        // SAFETY: a socket call; its fd is closed below.
        let bare = unsafe { libc::socket(libc::AF_INET, libc::SOCK_STREAM, 0) };
        assert!(bare >= 0);
        assert_eq!(err(bare), format!("socket activation: fd {bare} is a socket that does not listen"));
        close(bare);
        let tcp = TcpListener::bind("127.0.0.1:0").unwrap();
        assert_eq!(check(tcp.as_raw_fd()).unwrap(), libc::AF_INET);
    }

    /// Accept on `l` until a client arrives (at most 10 s).
    fn accept(l: &Listener) -> String {
        let t = Instant::now();
        loop {
            if let Some((_, peer)) = l.try_accept().unwrap() {
                return peer;
            }
            assert!(t.elapsed() < Duration::from_secs(10), "no client accepted");
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    #[test]
    fn passed_tcp_and_unix_sockets_serve_together_and_their_file_stays() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("passed.sock");
        let tcp = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = tcp.local_addr().unwrap().port();
        let unix = UnixListener::bind(&path).unwrap();
        let (t, u) = (tcp.into_raw_fd(), unix.into_raw_fd());
        let l = Listener::of(vec![own(t, check(t).unwrap()).unwrap(), own(u, check(u).unwrap()).unwrap()], None);
        // SAFETY: reads the flags of an fd the listener owns.
        assert_eq!(unsafe { libc::fcntl(t, libc::F_GETFD) } & libc::FD_CLOEXEC, libc::FD_CLOEXEC, "not left to children");
        assert_eq!(l.uri("x"), format!("nbd://127.0.0.1:{port}/x"));
        assert_eq!(l.describe(), format!("fd {t}: TCP 127.0.0.1:{port}, fd {u}: unix {}", path.display()));
        assert_eq!(l.try_accept().unwrap().map(|c| c.1), None, "non-blocking: nothing pending");
        let mut c1 = UnixStream::connect(&path).unwrap();
        // The accept loop's wait ends when a client connects, not at its timeout.
        let t0 = Instant::now();
        l.wait(Duration::from_secs(60));
        assert!(t0.elapsed() < Duration::from_secs(30), "woken by the connection");
        assert_eq!(l.try_accept().unwrap().map(|c| c.1), Some(path.display().to_string()));
        let _c2 = TcpStream::connect(("127.0.0.1", port)).unwrap();
        assert!(accept(&l).starts_with("127.0.0.1:"));
        drop(l);
        assert!(path.exists(), "a passed socket's file is its manager's");
        let mut b = [0u8; 1];
        c1.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        assert_eq!(c1.read(&mut b).unwrap(), 0, "the accepted stream was dropped: EOF");
    }
}
