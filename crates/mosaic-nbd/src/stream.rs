//! TCP and unix-domain sockets, plain or through TLS, behind one type, so
//! the server is written once.

use std::io::{self, IoSlice, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream, ToSocketAddrs};
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::fs::FileTypeExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::tls::TlsStream;

/// A connected client socket: TCP, unix, or either through TLS once the
/// client started it (`crate::tls`).
#[derive(Debug)]
pub enum Stream {
    Tcp(TcpStream),
    Unix(UnixStream),
    /// Shared by the connection's reader and replier, as a socket's
    /// clones share it.
    Tls(Arc<TlsStream>),
}

impl Stream {
    pub fn try_clone(&self) -> io::Result<Stream> {
        Ok(match self {
            Stream::Tcp(s) => Stream::Tcp(s.try_clone()?),
            Stream::Unix(s) => Stream::Unix(s.try_clone()?),
            Stream::Tls(t) => Stream::Tls(t.clone()),
        })
    }

    pub fn shutdown(&self, how: Shutdown) -> io::Result<()> {
        match self {
            Stream::Tcp(s) => s.shutdown(how),
            Stream::Unix(s) => s.shutdown(how),
            Stream::Tls(t) => t.shutdown(how),
        }
    }

    pub fn set_read_timeout(&self, t: Option<Duration>) -> io::Result<()> {
        match self {
            Stream::Tcp(s) => s.set_read_timeout(t),
            Stream::Unix(s) => s.set_read_timeout(t),
            Stream::Tls(s) => Ok(s.set_read_timeout(t)),
        }
    }

    pub fn set_write_timeout(&self, t: Option<Duration>) -> io::Result<()> {
        match self {
            Stream::Tcp(s) => s.set_write_timeout(t),
            Stream::Unix(s) => s.set_write_timeout(t),
            Stream::Tls(s) => Ok(s.set_write_timeout(t)),
        }
    }

    pub(crate) fn fd(&self) -> RawFd {
        match self {
            Stream::Tcp(s) => s.as_raw_fd(),
            Stream::Unix(s) => s.as_raw_fd(),
            Stream::Tls(t) => t.fd(),
        }
    }

    /// Replies are small and latency-bound: no Nagle delay on TCP.
    pub fn set_nodelay(&self) -> io::Result<()> {
        match self {
            Stream::Tcp(s) => s.set_nodelay(true),
            Stream::Unix(_) => Ok(()),
            Stream::Tls(t) => t.socket().set_nodelay(),
        }
    }

    /// recv(2) without blocking (`MSG_DONTWAIT`): `WouldBlock` when
    /// nothing is there.  Plain sockets only.
    pub(crate) fn recv_now(&self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            // SAFETY: `buf` is valid for `buf.len()` bytes; the fd is owned by self.
            match sent(unsafe { libc::recv(self.fd(), buf.as_mut_ptr().cast(), buf.len(), libc::MSG_DONTWAIT) }) {
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                r => return r,
            }
        }
    }

    /// sendmsg(2) without blocking: `WouldBlock` when the socket has no
    /// room.  Plain sockets only.
    pub(crate) fn send_now(&self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
        self.sendmsg(bufs, libc::MSG_DONTWAIT)
    }

    /// Write every buffer in order (a batch of reply headers and data) with
    /// one `sendmsg` each time the socket takes them all, more when it
    /// takes part.
    pub fn write_all_bufs(&mut self, bufs: &[&[u8]]) -> io::Result<()> {
        if let Stream::Tls(t) = self {
            return t.write_bufs(bufs, None);
        }
        self.send_bufs(bufs, |s, iov| s.write_vectored(iov))
    }

    /// [`Stream::write_all_bufs`] against a clock: before each `sendmsg`,
    /// `deadline()` says by when the socket must take more, else the call
    /// fails with
    /// `TimedOut`.  The socket is written without blocking and waited on
    /// with poll(2) for the time left: a socket timeout (SO_SNDTIMEO)
    /// bounds each `sendmsg` alone, so a reader taking a little now and
    /// then could stretch a reply without end.
    /// `deadline` is asked only when the socket has no room (a send that
    /// goes through at once reads no clock).
    pub fn write_all_bufs_until(&mut self, bufs: &[&[u8]], mut deadline: impl FnMut() -> Instant) -> io::Result<()> {
        if let Stream::Tls(t) = self {
            return t.write_bufs(bufs, Some(&mut deadline));
        }
        self.send_bufs(bufs, |s, iov| s.send_until(iov, &mut deadline))
    }

    /// The loop of both: `send` gets the buffers left (the first one cut
    /// where the last send stopped).
    fn send_bufs(&mut self, bufs: &[&[u8]], mut send: impl FnMut(&mut Self, &[IoSlice<'_>]) -> io::Result<usize>) -> io::Result<()> {
        // The first unsent buffer and how much of it is sent.
        let (mut i, mut off) = (0usize, 0usize);
        while i < bufs.len() {
            if off == bufs[i].len() {
                (i, off) = (i + 1, 0);
                continue;
            }
            let rest = bufs[i + 1..].iter().take(MAX_IOV - 1).map(|b| IoSlice::new(b));
            let iov: Vec<IoSlice<'_>> = std::iter::once(IoSlice::new(&bufs[i][off..])).chain(rest).collect();
            let mut n = match send(self, &iov) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            while n > 0 {
                let left = bufs[i].len() - off;
                if n < left {
                    off += n;
                    break;
                }
                n -= left;
                (i, off) = (i + 1, 0);
            }
        }
        Ok(())
    }

    /// One `sendmsg` that waits for room in the socket until `end()` at
    /// most (asked once, when the socket first has no room).
    fn send_until(&mut self, iov: &[IoSlice<'_>], end: impl FnOnce() -> Instant) -> io::Result<usize> {
        let mut end = Some(end);
        let mut at = None;
        loop {
            match self.sendmsg(iov, libc::MSG_DONTWAIT) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                done => return done,
            }
            let end = *at.get_or_insert_with(|| end.take().expect("asked once")());
            let left = end.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(io::Error::new(io::ErrorKind::TimedOut, "the peer took no more bytes in time"));
            }
            let mut p = libc::pollfd { fd: self.fd(), events: libc::POLLOUT, revents: 0 };
            // Rounded up: a wake-up a little early would only poll again.
            let ms = (left + Duration::from_micros(999)).as_millis().min(i32::MAX as u128) as libc::c_int;
            // SAFETY: one valid pollfd; the fd is owned by self.
            if unsafe { libc::poll(&mut p, 1, ms) } < 0 {
                let e = io::Error::last_os_error();
                if e.kind() != io::ErrorKind::Interrupted {
                    return Err(e);
                }
            }
            // Ready (or an error or hang-up, which the next sendmsg reports),
            // or out of time (checked above).
        }
    }

    /// sendmsg(2) of `bufs` with `MSG_NOSIGNAL` and `flags`.
    fn sendmsg(&self, bufs: &[IoSlice<'_>], flags: libc::c_int) -> io::Result<usize> {
        // SAFETY: an all-zero msghdr is valid (no name, no control data).
        let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
        // IoSlice is ABI-compatible with iovec on unix; sendmsg only reads them.
        msg.msg_iov = bufs.as_ptr() as *mut libc::iovec;
        msg.msg_iovlen = bufs.len().min(libc::UIO_MAXIOV as usize) as _;
        // SAFETY: msg points at `bufs`, which outlive the call.
        sent(unsafe { libc::sendmsg(self.fd(), &msg, libc::MSG_NOSIGNAL | flags) })
    }
}

/// Buffers per `sendmsg` at most (Linux's UIO_MAXIOV is 1024).
const MAX_IOV: usize = 1024;

impl Read for Stream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Stream::Tcp(s) => s.read(buf),
            Stream::Unix(s) => s.read(buf),
            Stream::Tls(t) => t.read(buf),
        }
    }
}

/// The result of a send(2)-like call: the count, or the errno as an error.
fn sent(n: isize) -> io::Result<usize> {
    if n < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(n as usize)
    }
}

/// Writes go through send(2)/sendmsg(2) with `MSG_NOSIGNAL`: a client that
/// disconnects while a reply is pending is an `EPIPE` error for that
/// connection, never a SIGPIPE that would kill the whole process (whatever
/// the process's SIGPIPE disposition).
impl Write for Stream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if let Stream::Tls(t) = self {
            return t.write_bufs(&[buf], None).map(|()| buf.len());
        }
        // SAFETY: `buf` is valid for `buf.len()` bytes; the fd is owned by self.
        sent(unsafe { libc::send(self.fd(), buf.as_ptr().cast(), buf.len(), libc::MSG_NOSIGNAL) })
    }
    fn write_vectored(&mut self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
        if let Stream::Tls(t) = self {
            let all: Vec<&[u8]> = bufs.iter().map(|b| &**b).collect();
            return t.write_bufs(&all, None).map(|()| all.iter().map(|b| b.len()).sum());
        }
        self.sendmsg(bufs, 0)
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// The sockets a server accepts clients on: one it bound (TCP, or a unix
/// socket whose file it removes when done), or those a service manager
/// passed it ([`crate::activation`]), which take turns.
#[derive(Debug)]
pub struct Listener {
    socks: Vec<Sock>,
    /// The unix socket file this server made, removed on drop; a passed
    /// socket's file is its manager's.
    made: Option<PathBuf>,
    /// The socket `try_accept` looks at first.
    next: AtomicUsize,
}

/// One listening socket.
#[derive(Debug)]
pub(crate) enum Sock {
    Tcp(TcpListener),
    /// Its path, when it has one (a passed socket may be unnamed).
    Unix(UnixListener, Option<PathBuf>),
}

impl Sock {
    fn fd(&self) -> RawFd {
        match self {
            Sock::Tcp(l) => l.as_raw_fd(),
            Sock::Unix(l, _) => l.as_raw_fd(),
        }
    }

    /// What a log line calls it.
    fn describe(&self) -> String {
        match self {
            Sock::Tcp(l) => l.local_addr().map_or_else(|_| "TCP".into(), |a| format!("TCP {a}")),
            Sock::Unix(_, Some(p)) => format!("unix {}", p.display()),
            Sock::Unix(_, None) => "unix (unnamed)".into(),
        }
    }
}

impl Listener {
    pub fn bind_tcp(addr: impl ToSocketAddrs) -> io::Result<Listener> {
        let l = TcpListener::bind(addr)?;
        l.set_nonblocking(true)?;
        Ok(Listener::of(vec![Sock::Tcp(l)], None))
    }

    /// Bind a unix socket; a stale socket file left by a killed server is
    /// replaced, any other existing file is an error.
    pub fn bind_unix(path: &Path) -> io::Result<Listener> {
        if let Ok(m) = std::fs::symlink_metadata(path) {
            if m.file_type().is_socket() {
                std::fs::remove_file(path)?;
            } else {
                return Err(io::Error::new(io::ErrorKind::AlreadyExists, format!("{} exists and is not a socket", path.display())));
            }
        }
        let l = UnixListener::bind(path)?;
        l.set_nonblocking(true)?;
        Ok(Listener::of(vec![Sock::Unix(l, Some(path.to_path_buf()))], Some(path.to_path_buf())))
    }

    /// Sockets already listening and non-blocking; `made`: the socket file
    /// to remove on drop.
    pub(crate) fn of(socks: Vec<Sock>, made: Option<PathBuf>) -> Listener {
        assert!(!socks.is_empty(), "a listener has a socket");
        Listener { socks, made, next: AtomicUsize::new(0) }
    }

    /// The NBD URI clients connect to (the first socket's).
    pub fn uri(&self, export: &str) -> String {
        match &self.socks[0] {
            Sock::Tcp(l) => match l.local_addr() {
                Ok(a) => format!("nbd://{a}/{export}"),
                Err(_) => "nbd://?".into(),
            },
            Sock::Unix(_, Some(p)) => format!("nbd+unix:///{export}?socket={}", p.display()),
            Sock::Unix(_, None) => format!("nbd+unix:///{export} (an unnamed socket)"),
        }
    }

    /// Every socket with its file descriptor, for a log line: "fd 3: TCP
    /// 127.0.0.1:10809, fd 4: unix /run/x.sock".
    pub fn describe(&self) -> String {
        self.socks.iter().map(|s| format!("fd {}: {}", s.fd(), s.describe())).collect::<Vec<_>>().join(", ")
    }

    /// The first socket's path, if it is a unix socket.
    pub fn socket_path(&self) -> Option<&std::path::Path> {
        match &self.socks[0] {
            Sock::Unix(_, p) => p.as_deref(),
            Sock::Tcp(_) => None,
        }
    }

    /// The first socket's TCP port, if it is a TCP socket.
    pub fn port(&self) -> Option<u16> {
        match &self.socks[0] {
            Sock::Tcp(l) => l.local_addr().ok().map(|a| a.port()),
            Sock::Unix(..) => None,
        }
    }

    /// Accept one pending connection without blocking, from the sockets in
    /// turn.
    pub fn try_accept(&self) -> io::Result<Option<(Stream, String)>> {
        let n = self.socks.len();
        let first = self.next.load(Ordering::Relaxed) % n;
        for i in (first..n).chain(0..first) {
            if let Some(c) = accept(&self.socks[i])? {
                self.next.store(i + 1, Ordering::Relaxed);
                return Ok(Some(c));
            }
        }
        Ok(None)
    }
}

impl Listener {
    /// Block until a socket has a connection to accept or `timeout` has
    /// passed: the accept loop's wait ([`wait_readable`]).
    pub fn wait(&self, timeout: Duration) {
        wait_readable(&self.socks.iter().map(Sock::fd).collect::<Vec<_>>(), timeout);
    }
}

/// Block until one of `fds` is readable (a listening socket: has a
/// connection to accept) or `timeout` has passed (or a signal came), so an
/// accept loop takes a client as it connects and still looks at its stop
/// flag that often.
pub fn wait_readable(fds: &[RawFd], timeout: Duration) {
    let mut p: Vec<libc::pollfd> = fds.iter().map(|&fd| libc::pollfd { fd, events: libc::POLLIN, revents: 0 }).collect();
    let ms = timeout.as_millis().min(i32::MAX as u128) as libc::c_int;
    // SAFETY: `p` is a live array of `p.len()` pollfds.
    unsafe { libc::poll(p.as_mut_ptr(), p.len() as libc::nfds_t, ms) };
}

/// Accept one pending connection on `sock` without blocking.
fn accept(sock: &Sock) -> io::Result<Option<(Stream, String)>> {
    // Accepted sockets inherit non-blocking mode on some systems.
    let r = match sock {
        Sock::Tcp(l) => l.accept().and_then(|(s, a)| s.set_nonblocking(false).map(|()| (Stream::Tcp(s), a.to_string()))),
        Sock::Unix(l, p) => l.accept().and_then(|(s, _)| {
            let peer = p.as_ref().map_or_else(|| format!("unix fd {}", l.as_raw_fd()), |p| p.display().to_string());
            s.set_nonblocking(false).map(|()| (Stream::Unix(s), peer))
        }),
    };
    match r {
        Ok(c) => Ok(Some(c)),
        Err(e) if e.kind() == io::ErrorKind::WouldBlock || e.kind() == io::ErrorKind::Interrupted => Ok(None),
        Err(e) => Err(e),
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        if let Some(p) = &self.made {
            let _ = std::fs::remove_file(p);
        }
    }
}
