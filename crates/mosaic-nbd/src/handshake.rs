//! The fixed-newstyle handshake (option haggling) up to transmission.
//!
//! ```text
//!   server                                  client
//!   ──────                                  ──────
//!   NBDMAGIC IHAVEOPT flags(u16) ─────────▶
//!                                ◀───────── client flags (u32)
//!   ┌─ option loop (at most MAX_OPTIONS) ───────────────────────────┐
//!   │                            ◀───────── IHAVEOPT opt len data    │
//!   │  GO / INFO:   REP_INFO(export: size, tflags)                  │
//!   │               REP_INFO(block size: min, preferred, max)       │
//!   │               [REP_INFO(name)]  REP_ACK ─▶  GO: transmission  │
//!   │  LIST:        REP_SERVER(name) REP_ACK                        │
//!   │  STRUCTURED_REPLY: REP_ACK (READ answers with chunks from now) │
//!   │               (after EXTENDED_HEADERS: ERR_EXT_HEADER_REQD)    │
//!   │  EXTENDED_HEADERS: REP_ACK (32-byte requests with 64-bit       │
//!   │               lengths, every reply an extended chunk; implies  │
//!   │               STRUCTURED_REPLY; EXPORT_NAME then closes)      │
//!   │  LIST_META_CONTEXT / SET_META_CONTEXT:                        │
//!   │               REP_META_CONTEXT(base:allocation) REP_ACK       │
//!   │               (SET needs STRUCTURED_REPLY first)              │
//!   │  EXPORT_NAME: size(u64) tflags(u16) [124 zeroes] ─▶ transmission
//!   │  ABORT:       REP_ACK, close                                  │
//!   │  STARTTLS:    REP_ACK ─▶ TLS handshake (crate::tls), then the  │
//!   │               loop again on the secured stream, fresh state   │
//!   │               (no TLS: ERR_POLICY; TLS required: every other  │
//!   │               option ERR_TLS_REQD, EXPORT_NAME closes)        │
//!   │  other:       REP_ERR_UNSUP                                   │
//!   └────────────────────────────────────────────────────────────────┘
//! ```
//!
//! What was agreed travels into transmission as a [`Session`]: whether
//! replies may be structured, whether headers are extended, and whether
//! `base:allocation` was selected (so BLOCK_STATUS is allowed).
//!
//! An option longer than [`MAX_OPTION_LEN`] (up to [`MAX_SKIPPED_OPTION`])
//! is read past and answered `NBD_REP_ERR_TOO_BIG`, as the spec lets a
//! server skip an option by its length.  Anything that breaks framing
//! (wrong magic, unknown client flags, a longer option, an over-long
//! `NBD_OPT_EXPORT_NAME`, which has no error reply) is a
//! [`HandshakeError::Garbage`]:
//! the caller logs it and closes that connection only.  [`Deadline`] bounds
//! the whole handshake in time, and [`refuse`] turns a client away visibly
//! when the server is full.

use std::io::{self, Read, Write};
use std::time::{Duration, Instant};

use crate::proto::*;
use crate::stream::Stream;

/// A socket whose reads and writes must all finish by one instant: a
/// client that trickles a byte now and then cannot hold a connection slot
/// longer than the handshake time limit.
pub struct Deadline {
    s: Stream,
    end: Instant,
    limit: Duration,
}

impl Deadline {
    pub fn new(s: Stream, limit: Duration) -> Deadline {
        Deadline { s, end: Instant::now() + limit, limit }
    }

    /// Time left, with the socket's timeouts set to it; an error once none is.
    fn arm(&self) -> io::Result<()> {
        let left = self.end.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(io::Error::new(io::ErrorKind::TimedOut, format!("handshake not finished within {:?}", self.limit)));
        }
        self.s.set_read_timeout(Some(left))?;
        self.s.set_write_timeout(Some(left))
    }

    /// A socket timeout is reported as the time limit, not as EAGAIN.
    fn name(&self, e: io::Error) -> io::Error {
        match e.kind() {
            io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => {
                io::Error::new(io::ErrorKind::TimedOut, format!("handshake not finished within {:?}", self.limit))
            }
            _ => e,
        }
    }
}

impl Read for Deadline {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.arm()?;
        self.s.read(buf).map_err(|e| self.name(e))
    }
}

impl Write for Deadline {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.arm()?;
        self.s.write(buf).map_err(|e| self.name(e))
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// At most this many options per connection before it is closed.
pub const MAX_OPTIONS: usize = 256;

/// What the handshake tells a client about the export.
#[derive(Debug, Clone)]
pub struct ExportInfo {
    pub name: String,
    pub description: String,
    pub size: u64,
    pub tflags: u16,
    pub min_block: u32,
    pub pref_block: u32,
    pub max_block: u32,
}

impl ExportInfo {
    /// Whether a client's export name selects this export ("" is the default).
    pub fn matches(&self, name: &[u8]) -> bool {
        name.is_empty() || name == self.name.as_bytes()
    }
}

/// What a client negotiated for transmission.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Session {
    /// NBD_OPT_STRUCTURED_REPLY was acknowledged: READ replies (and every
    /// error) are structured reply chunks.
    pub structured: bool,
    /// `base:allocation` is selected: NBD_CMD_BLOCK_STATUS is answered.
    pub base_allocation: bool,
    /// NBD_OPT_EXTENDED_HEADERS was acknowledged: requests have 64-bit
    /// lengths and every reply is an extended chunk (it implies
    /// `structured`).
    pub extended: bool,
}

impl Session {
    /// How replies are framed, for the log: "extended headers",
    /// "structured replies" or "simple replies".
    pub fn describe(&self) -> &'static str {
        match (self.extended, self.structured) {
            (true, _) => "extended headers",
            (false, true) => "structured replies",
            (false, false) => "simple replies",
        }
    }

    /// The transmission flags a client of this session is told: DF only
    /// once replies are structured (the spec's MUST).
    pub fn tflags(&self, e: &ExportInfo) -> u16 {
        if self.structured {
            e.tflags | TFLAG_SEND_DF
        } else {
            e.tflags
        }
    }
}

/// How a handshake ended without error.
#[derive(Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Transmission begins, with what was negotiated.
    Transmission(Session),
    /// The client sent NBD_OPT_ABORT (or closed during haggling).
    Aborted,
    /// NBD_OPT_STARTTLS was acknowledged: the caller runs the TLS
    /// handshake, then [`after_tls`] with `no_zeroes` on the secured
    /// stream.  Nothing negotiated before carries over.
    StartTls { no_zeroes: bool },
}

/// Where TLS stands in a handshake.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TlsStage {
    /// The server has no TLS: STARTTLS is refused (`NBD_REP_ERR_POLICY`).
    Off,
    /// Offered: STARTTLS is accepted, plain text is served too.
    Offered,
    /// Required: every option but STARTTLS and ABORT is refused with
    /// `NBD_REP_ERR_TLS_REQD`; `NBD_OPT_EXPORT_NAME` (which has no error
    /// reply) closes the connection.
    Required,
    /// The stream is secured: a second STARTTLS is `NBD_REP_ERR_INVALID`.
    Started,
}

#[derive(Debug)]
pub enum HandshakeError {
    Io(io::Error),
    /// The client broke the protocol; close the connection.
    Garbage(String),
}

impl std::fmt::Display for HandshakeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            HandshakeError::Io(e) => write!(f, "i/o error during handshake: {e}"),
            HandshakeError::Garbage(s) => write!(f, "garbage handshake: {s}"),
        }
    }
}

impl From<io::Error> for HandshakeError {
    fn from(e: io::Error) -> Self {
        HandshakeError::Io(e)
    }
}

fn read_u32<S: Read>(s: &mut S) -> io::Result<u32> {
    let mut b = [0u8; 4];
    s.read_exact(&mut b)?;
    Ok(u32::from_be_bytes(b))
}

fn read_u64<S: Read>(s: &mut S) -> io::Result<u64> {
    let mut b = [0u8; 8];
    s.read_exact(&mut b)?;
    Ok(u64::from_be_bytes(b))
}

/// Encode one option reply.
pub fn option_reply(opt: u32, ty: u32, data: &[u8]) -> Vec<u8> {
    let mut v = Vec::with_capacity(20 + data.len());
    v.extend_from_slice(&REPLY_MAGIC.to_be_bytes());
    v.extend_from_slice(&opt.to_be_bytes());
    v.extend_from_slice(&ty.to_be_bytes());
    v.extend_from_slice(&(data.len() as u32).to_be_bytes());
    v.extend_from_slice(data);
    v
}

/// Parsed NBD_OPT_INFO / NBD_OPT_GO payload: export name and requested infos.
fn parse_info_request(d: &[u8]) -> Option<(&[u8], Vec<u16>)> {
    let nlen = u32::from_be_bytes(d.get(0..4)?.try_into().ok()?) as usize;
    let name = d.get(4..4usize.checked_add(nlen)?)?;
    let rest = &d[4 + nlen..];
    let n = u16::from_be_bytes(rest.get(0..2)?.try_into().ok()?) as usize;
    let reqs = rest.get(2..)?;
    if reqs.len() != n * 2 {
        return None;
    }
    Some((name, reqs.chunks_exact(2).map(|c| u16::from_be_bytes([c[0], c[1]])).collect()))
}

fn info_replies(opt: u32, e: &ExportInfo, session: &Session, wanted: &[u16]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut d = Vec::with_capacity(12);
    d.extend_from_slice(&INFO_EXPORT.to_be_bytes());
    d.extend_from_slice(&e.size.to_be_bytes());
    d.extend_from_slice(&session.tflags(e).to_be_bytes());
    out.extend(option_reply(opt, REP_INFO, &d));
    // Block sizes go out whether asked or not (the spec allows it), so
    // every client learns the alignment the array needs.
    let mut d = Vec::with_capacity(14);
    d.extend_from_slice(&INFO_BLOCK_SIZE.to_be_bytes());
    for v in [e.min_block, e.pref_block, e.max_block] {
        d.extend_from_slice(&v.to_be_bytes());
    }
    out.extend(option_reply(opt, REP_INFO, &d));
    if wanted.contains(&INFO_NAME) {
        let mut d = INFO_NAME.to_be_bytes().to_vec();
        d.extend_from_slice(e.name.as_bytes());
        out.extend(option_reply(opt, REP_INFO, &d));
    }
    if wanted.contains(&INFO_DESCRIPTION) && !e.description.is_empty() {
        let mut d = INFO_DESCRIPTION.to_be_bytes().to_vec();
        d.extend_from_slice(e.description.as_bytes());
        out.extend(option_reply(opt, REP_INFO, &d));
    }
    out.extend(option_reply(opt, REP_ACK, &[]));
    out
}

/// A parsed NBD_OPT_LIST_META_CONTEXT / NBD_OPT_SET_META_CONTEXT payload:
/// the export name and the queries.
fn parse_meta_request(d: &[u8]) -> Option<(&[u8], Vec<&[u8]>)> {
    fn take<'a>(d: &mut &'a [u8], n: usize) -> Option<&'a [u8]> {
        let (head, rest) = (d.get(..n)?, d.get(n..)?);
        *d = rest;
        Some(head)
    }
    fn len(d: &mut &[u8]) -> Option<usize> {
        Some(u32::from_be_bytes(take(d, 4)?.try_into().ok()?) as usize)
    }
    let mut d = d;
    let n = len(&mut d)?;
    let name = take(&mut d, n)?;
    let count = len(&mut d)?;
    // Each query takes at least its 4-byte length: a count the payload
    // cannot hold is malformed (and allocates nothing).
    if count > d.len() / 4 {
        return None;
    }
    let mut queries = Vec::with_capacity(count);
    for _ in 0..count {
        let n = len(&mut d)?;
        queries.push(take(&mut d, n)?);
    }
    d.is_empty().then_some((name, queries))
}

/// Whether a query selects `base:allocation`: its exact name, or (when
/// only listing) the whole `base:` namespace.  An empty LIST asks for all.
fn selects_base_allocation(opt: u32, queries: &[&[u8]]) -> bool {
    let listing = opt == OPT_LIST_META_CONTEXT;
    (listing && queries.is_empty()) || queries.iter().any(|q| *q == META_BASE_ALLOCATION.as_bytes() || (listing && *q == b"base:"))
}

/// The replies to a meta context option, and whether `base:allocation`
/// is now selected (for SET; LIST changes nothing).
fn meta_replies(opt: u32, data: &[u8], e: &ExportInfo, session: &Session) -> (Vec<u8>, bool) {
    // A SET replaces the selection even when it fails (the spec); a LIST
    // changes nothing.
    let kept = opt != OPT_SET_META_CONTEXT && session.base_allocation;
    let Some((name, queries)) = parse_meta_request(data) else {
        return (option_reply(opt, REP_ERR_INVALID, b"malformed meta context payload"), kept);
    };
    if opt == OPT_SET_META_CONTEXT && !session.structured {
        return (option_reply(opt, REP_ERR_INVALID, b"NBD_OPT_SET_META_CONTEXT needs NBD_OPT_STRUCTURED_REPLY first"), kept);
    }
    if name.len() > MAX_NAME_LEN || queries.iter().any(|q| q.len() > MAX_NAME_LEN) {
        return (option_reply(opt, REP_ERR_TOO_BIG, b"export name or query too long"), kept);
    }
    if !e.matches(name) {
        return (option_reply(opt, REP_ERR_UNKNOWN, b"no such export"), kept);
    }
    let selected = selects_base_allocation(opt, &queries);
    let mut out = Vec::new();
    if selected {
        // The spec: a LIST reply's id is reserved and SHOULD be zero.
        let id = if opt == OPT_SET_META_CONTEXT { META_BASE_ALLOCATION_ID } else { 0 };
        let mut d = id.to_be_bytes().to_vec();
        d.extend_from_slice(META_BASE_ALLOCATION.as_bytes());
        out.extend(option_reply(opt, REP_META_CONTEXT, &d));
    }
    out.extend(option_reply(opt, REP_ACK, &[]));
    (out, if opt == OPT_SET_META_CONTEXT { selected } else { kept })
}

/// Send the greeting and read the client's flags; whether it asked for no
/// zeroes after NBD_OPT_EXPORT_NAME.
fn greet<S: Read + Write>(s: &mut S) -> Result<bool, HandshakeError> {
    let mut hello = Vec::with_capacity(18);
    hello.extend_from_slice(&NBDMAGIC.to_be_bytes());
    hello.extend_from_slice(&IHAVEOPT.to_be_bytes());
    hello.extend_from_slice(&(FLAG_FIXED_NEWSTYLE | FLAG_NO_ZEROES).to_be_bytes());
    s.write_all(&hello)?;
    s.flush()?;
    let cflags = read_u32(s)?;
    if cflags & !(FLAG_C_FIXED_NEWSTYLE | FLAG_C_NO_ZEROES) != 0 {
        return Err(HandshakeError::Garbage(format!("unknown client flags {cflags:#x}")));
    }
    Ok(cflags & FLAG_C_NO_ZEROES != 0)
}

/// Most bytes of an over-long option read past (and discarded) to answer
/// it with an error rather than close the connection.
pub const MAX_SKIPPED_OPTION: u32 = 16 << 20;

/// Read one option (number and data; `Err(len)` for one longer than
/// [`MAX_OPTION_LEN`], read past); `None` when the client closed.
fn read_option<S: Read>(s: &mut S) -> Result<Option<(u32, Result<Vec<u8>, u32>)>, HandshakeError> {
    let magic = match read_u64(s) {
        Ok(m) => m,
        Err(err) if err.kind() == io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(err) => return Err(err.into()),
    };
    if magic != IHAVEOPT {
        return Err(HandshakeError::Garbage(format!("bad option magic {magic:#018x}")));
    }
    let opt = read_u32(s)?;
    let len = read_u32(s)?;
    if len > MAX_OPTION_LEN {
        if len > MAX_SKIPPED_OPTION || opt == OPT_EXPORT_NAME {
            return Err(HandshakeError::Garbage(format!("option {opt} claims {len} bytes (limit {MAX_OPTION_LEN})")));
        }
        io::copy(&mut s.take(len as u64), &mut io::sink())?;
        return Ok(Some((opt, Err(len))));
    }
    let mut data = vec![0u8; len as usize];
    s.read_exact(&mut data)?;
    Ok(Some((opt, Ok(data))))
}

/// Options a refused client may send before it is disconnected.
const REFUSE_OPTIONS: usize = 8;

/// Turn a client away visibly (the server is full): greet it, then answer
/// each option with `NBD_REP_ERR_POLICY` carrying `why` (the spec's way for
/// a server to refuse: "error inbound options until the client gets the
/// hint"; nbdinfo and qemu print the message).  `NBD_OPT_ABORT` gets its
/// ACK; `NBD_OPT_EXPORT_NAME` cannot be answered with an error, so it, and
/// a client that keeps trying, get a hard disconnect.
pub fn refuse<S: Read + Write>(s: &mut S, why: &str) -> Result<(), HandshakeError> {
    greet(s)?;
    for _ in 0..REFUSE_OPTIONS {
        let Some((opt, _)) = read_option(s)? else { return Ok(()) };
        match opt {
            OPT_EXPORT_NAME => return Ok(()),
            OPT_ABORT => {
                let _ = s.write_all(&option_reply(opt, REP_ACK, &[])).and_then(|_| s.flush());
                return Ok(());
            }
            _ => {
                s.write_all(&option_reply(opt, REP_ERR_POLICY, why.as_bytes()))?;
                s.flush()?;
            }
        }
    }
    Ok(())
}

/// Run the server side of the handshake on `s` (a server without TLS).
pub fn handshake<S: Read + Write>(s: &mut S, e: &ExportInfo) -> Result<Outcome, HandshakeError> {
    handshake_tls(s, e, TlsStage::Off)
}

/// Run the server side of the handshake on `s`, TLS at `tls` (`Off`,
/// `Offered` or `Required`).
pub fn handshake_tls<S: Read + Write>(s: &mut S, e: &ExportInfo, tls: TlsStage) -> Result<Outcome, HandshakeError> {
    let no_zeroes = greet(s)?;
    haggle(s, e, no_zeroes, tls)
}

/// The option haggling that goes on once TLS is up, on the secured
/// stream, from a fresh [`Session`] (the spec: nothing negotiated in plain
/// text holds; nbdkit's CVE-2021-3716 kept structured replies across).
pub fn after_tls<S: Read + Write>(s: &mut S, e: &ExportInfo, no_zeroes: bool) -> Result<Outcome, HandshakeError> {
    haggle(s, e, no_zeroes, TlsStage::Started)
}

/// The reply to an option a server that requires TLS gets in plain text,
/// if it refuses it (`None`: ABORT and STARTTLS go on as usual).
fn tls_required(opt: u32) -> Option<Result<Vec<u8>, HandshakeError>> {
    match opt {
        OPT_ABORT | OPT_STARTTLS => None,
        OPT_EXPORT_NAME => Some(Err(HandshakeError::Garbage("NBD_OPT_EXPORT_NAME before STARTTLS on a server that requires TLS".into()))),
        _ => Some(Ok(option_reply(opt, REP_ERR_TLS_REQD, b"this server requires TLS: start it first (NBD_OPT_STARTTLS)"))),
    }
}

fn haggle<S: Read + Write>(s: &mut S, e: &ExportInfo, no_zeroes: bool, tls: TlsStage) -> Result<Outcome, HandshakeError> {
    let mut session = Session::default();
    for _ in 0..MAX_OPTIONS {
        let Some((opt, data)) = read_option(s)? else { return Ok(Outcome::Aborted) };
        let data = match data {
            Ok(d) => d,
            Err(n) => {
                s.write_all(&option_reply(opt, REP_ERR_TOO_BIG, format!("an option of {n} bytes is more than the {MAX_OPTION_LEN} this server reads").as_bytes()))?;
                s.flush()?;
                continue;
            }
        };
        let len = data.len();
        if tls == TlsStage::Required {
            if let Some(refusal) = tls_required(opt) {
                s.write_all(&refusal?)?;
                s.flush()?;
                continue;
            }
        }
        let reply = match opt {
            // EXPORT_NAME has no error reply, and its reply cannot say
            // whether the extended headers took (qemu-nbd closes too).
            OPT_EXPORT_NAME if session.extended => {
                return Err(HandshakeError::Garbage("NBD_OPT_EXPORT_NAME after NBD_OPT_EXTENDED_HEADERS (use NBD_OPT_GO)".into()));
            }
            OPT_EXPORT_NAME => {
                if !e.matches(&data) {
                    return Err(HandshakeError::Garbage(format!(
                        "NBD_OPT_EXPORT_NAME for unknown export {:?}",
                        String::from_utf8_lossy(&data)
                    )));
                }
                let mut v = Vec::with_capacity(10 + 124);
                v.extend_from_slice(&e.size.to_be_bytes());
                v.extend_from_slice(&session.tflags(e).to_be_bytes());
                if !no_zeroes {
                    v.extend_from_slice(&[0u8; 124]);
                }
                s.write_all(&v)?;
                s.flush()?;
                return Ok(Outcome::Transmission(session));
            }
            OPT_ABORT => {
                // Best effort: the client may already have gone.
                let _ = s.write_all(&option_reply(opt, REP_ACK, &[])).and_then(|_| s.flush());
                return Ok(Outcome::Aborted);
            }
            OPT_LIST => {
                if len != 0 {
                    option_reply(opt, REP_ERR_INVALID, b"NBD_OPT_LIST takes no data")
                } else {
                    let mut d = (e.name.len() as u32).to_be_bytes().to_vec();
                    d.extend_from_slice(e.name.as_bytes());
                    let mut v = option_reply(opt, REP_SERVER, &d);
                    v.extend(option_reply(opt, REP_ACK, &[]));
                    v
                }
            }
            OPT_INFO | OPT_GO => match parse_info_request(&data) {
                None => option_reply(opt, REP_ERR_INVALID, b"malformed NBD_OPT_INFO/GO payload"),
                Some((name, _)) if name.len() > MAX_NAME_LEN => option_reply(opt, REP_ERR_TOO_BIG, b"export name too long"),
                Some((name, _)) if !e.matches(name) => option_reply(opt, REP_ERR_UNKNOWN, b"no such export"),
                Some((_, wanted)) => {
                    s.write_all(&info_replies(opt, e, &session, &wanted))?;
                    s.flush()?;
                    if opt == OPT_GO {
                        return Ok(Outcome::Transmission(session));
                    }
                    continue;
                }
            },
            OPT_STRUCTURED_REPLY if len != 0 => option_reply(opt, REP_ERR_INVALID, b"NBD_OPT_STRUCTURED_REPLY takes no data"),
            OPT_STRUCTURED_REPLY if session.extended => option_reply(opt, REP_ERR_EXT_HEADER_REQD, b"extended headers are already negotiated"),
            OPT_STRUCTURED_REPLY => {
                session.structured = true;
                option_reply(opt, REP_ACK, &[])
            }
            OPT_EXTENDED_HEADERS if len != 0 => option_reply(opt, REP_ERR_INVALID, b"NBD_OPT_EXTENDED_HEADERS takes no data"),
            OPT_EXTENDED_HEADERS if session.extended => option_reply(opt, REP_ERR_INVALID, b"extended headers are already negotiated"),
            OPT_EXTENDED_HEADERS => {
                session.extended = true;
                session.structured = true;
                option_reply(opt, REP_ACK, &[])
            }
            OPT_LIST_META_CONTEXT | OPT_SET_META_CONTEXT => {
                let (reply, selected) = meta_replies(opt, &data, e, &session);
                session.base_allocation = selected;
                reply
            }
            OPT_STARTTLS => match tls {
                TlsStage::Off => option_reply(opt, REP_ERR_POLICY, b"this server has no TLS (serve it with --tls)"),
                TlsStage::Started => option_reply(opt, REP_ERR_INVALID, b"TLS is already on"),
                _ if len != 0 => option_reply(opt, REP_ERR_INVALID, b"NBD_OPT_STARTTLS takes no data"),
                _ => {
                    s.write_all(&option_reply(opt, REP_ACK, &[]))?;
                    s.flush()?;
                    return Ok(Outcome::StartTls { no_zeroes });
                }
            },
            _ => option_reply(opt, REP_ERR_UNSUP, b"option not supported"),
        };
        s.write_all(&reply)?;
        s.flush()?;
    }
    Err(HandshakeError::Garbage(format!("more than {MAX_OPTIONS} options")))
}
