//! Transmission requests: the pure parser and the per-export checks.
//!
//! ```text
//!  0        4        6        8                16               24       28       32
//!  +--------+--------+--------+----------------+----------------+--------+
//!  | magic  | flags  | type   | cookie         | offset         | length |      compact
//!  | 25609513 u16    | u16    | u64 (opaque)   | u64            | u32    |
//!  +--------+--------+--------+----------------+----------------+--------+--------+
//!  | 21e41c71 u16    | u16    | u64            | u64            | length u64      | extended
//!  +--------+--------+--------+----------------+----------------+-----------------+
//!       followed by `length` payload bytes for WRITE (and, extended, for a
//!       command flagged PAYLOAD_LEN)
//! ```
//!
//! A session uses one form throughout: extended once the client asked
//! `NBD_OPT_EXTENDED_HEADERS`, which lets TRIM, WRITE_ZEROES and
//! BLOCK_STATUS cover more than 4 GiB at once.  [`parse_request_as`] only
//! decodes the header and fails only when it cannot (too short, wrong
//! magic for the session's form): the connection is then out of sync and
//! must close.  Everything else — unknown commands, bad flags, zero lengths,
//! ranges, alignment, sizes — is judged by [`check`], whose error is answered with an NBD
//! error reply while the connection stays up (the spec: a request past the
//! maximum block size gets EINVAL, "rather than initiating a hard
//! disconnect").

use crate::proto::*;

/// A transmission command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Command {
    Read,
    Write,
    Disc,
    Flush,
    Trim,
    /// A hint that a range will be read soon.
    Cache,
    WriteZeroes,
    /// The `base:allocation` state of a range (structured reply only).
    BlockStatus,
    /// Any other type value (answered with EINVAL).
    Unknown(u16),
}

impl Command {
    pub fn from_wire(t: u16) -> Command {
        match t {
            CMD_READ => Command::Read,
            CMD_WRITE => Command::Write,
            CMD_DISC => Command::Disc,
            CMD_FLUSH => Command::Flush,
            CMD_TRIM => Command::Trim,
            CMD_CACHE => Command::Cache,
            CMD_WRITE_ZEROES => Command::WriteZeroes,
            CMD_BLOCK_STATUS => Command::BlockStatus,
            t => Command::Unknown(t),
        }
    }

    pub fn to_wire(self) -> u16 {
        match self {
            Command::Read => CMD_READ,
            Command::Write => CMD_WRITE,
            Command::Disc => CMD_DISC,
            Command::Flush => CMD_FLUSH,
            Command::Trim => CMD_TRIM,
            Command::Cache => CMD_CACHE,
            Command::WriteZeroes => CMD_WRITE_ZEROES,
            Command::BlockStatus => CMD_BLOCK_STATUS,
            Command::Unknown(t) => t,
        }
    }
}

/// A decoded request header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Request {
    pub flags: u16,
    pub cmd: Command,
    pub cookie: u64,
    pub offset: u64,
    /// 32 bits on the wire in compact headers, 64 in extended ones.
    pub length: u64,
}

impl Request {
    /// Bytes of payload that follow this header on the wire: a WRITE's,
    /// and in an `extended` session those of any command flagged
    /// PAYLOAD_LEN (refused, but read past so the stream stays in step).
    pub fn payload_len(&self, extended: bool) -> u64 {
        if self.cmd == Command::Write || (extended && self.flags & CMD_FLAG_PAYLOAD_LEN != 0) {
            self.length
        } else {
            0
        }
    }

    pub fn fua(&self) -> bool {
        self.flags & CMD_FLAG_FUA != 0
    }

    /// Whether the advertised maximum block size bounds this request's
    /// length: READ, WRITE and CACHE (as qemu-nbd bounds them).  The
    /// spec's "Block size constraints" name WRITE_ZEROES too, but its later
    /// wording lets a client ask a zeroing "effect length larger than the
    /// maximum payload size" (the server "SHOULD NOT disconnect, but MAY"
    /// fail it), and clients that never learn the maximum (the kernel's
    /// zero-outs) send them: WRITE_ZEROES, TRIM and BLOCK_STATUS move no
    /// payload and cost no buffer, so they are served, as qemu-nbd and
    /// nbdkit serve them.
    pub fn max_block_bounds(&self) -> bool {
        matches!(self.cmd, Command::Read | Command::Write | Command::Cache)
    }

    /// Encode as a compact header (used by tests, clients and the
    /// fuzzer's round trip); a length past 32 bits is cut to its low bits.
    pub fn encode(&self) -> [u8; REQUEST_LEN] {
        let mut b = [0u8; REQUEST_LEN];
        b.copy_from_slice(&self.encode_as(false)[..REQUEST_LEN]);
        b
    }

    /// Encode as an extended header.
    pub fn encode_extended(&self) -> [u8; EXTENDED_REQUEST_LEN] {
        self.encode_as(true)
    }

    /// The header's bytes, the first [`REQUEST_LEN`] of them when compact.
    fn encode_as(&self, extended: bool) -> [u8; EXTENDED_REQUEST_LEN] {
        let mut b = [0u8; EXTENDED_REQUEST_LEN];
        b[0..4].copy_from_slice(&if extended { EXTENDED_REQUEST_MAGIC } else { REQUEST_MAGIC }.to_be_bytes());
        b[4..6].copy_from_slice(&self.flags.to_be_bytes());
        b[6..8].copy_from_slice(&self.cmd.to_wire().to_be_bytes());
        b[8..16].copy_from_slice(&self.cookie.to_be_bytes());
        b[16..24].copy_from_slice(&self.offset.to_be_bytes());
        if extended {
            b[24..32].copy_from_slice(&self.length.to_be_bytes());
        } else {
            b[24..28].copy_from_slice(&(self.length as u32).to_be_bytes());
        }
        b
    }
}

/// The size of a request header in a session with or without extended
/// headers.
pub fn header_len(extended: bool) -> usize {
    if extended {
        EXTENDED_REQUEST_LEN
    } else {
        REQUEST_LEN
    }
}

/// Why a header could not be decoded (the stream is out of sync).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ParseError {
    /// Fewer bytes than the header's size (28, or 32 extended).
    Short(usize),
    /// The first four bytes are not the session's request magic (a
    /// compact header in an extended session, or the other way round,
    /// is one).
    BadMagic(u32),
}

impl std::fmt::Display for ParseError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ParseError::Short(n) => write!(f, "request header too short: {n} bytes"),
            ParseError::BadMagic(m) if *m == EXTENDED_REQUEST_MAGIC => write!(f, "an extended request header on a session that did not negotiate extended headers"),
            ParseError::BadMagic(m) => write!(f, "bad request magic {m:#010x} (want {REQUEST_MAGIC:#010x}, or {EXTENDED_REQUEST_MAGIC:#010x} with extended headers)"),
        }
    }
}

impl std::error::Error for ParseError {}

fn be_u16(b: &[u8]) -> u16 {
    u16::from_be_bytes([b[0], b[1]])
}
fn be_u32(b: &[u8]) -> u32 {
    u32::from_be_bytes([b[0], b[1], b[2], b[3]])
}
fn be_u64(b: &[u8]) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[..8]);
    u64::from_be_bytes(a)
}

/// Decode one compact request header from the first 28 bytes of `b`
/// (extra bytes are ignored).  Pure: no I/O, no allocation, never panics.
pub fn parse_request(b: &[u8]) -> Result<Request, ParseError> {
    parse_request_as(b, false)
}

/// Decode one request header of a session with or without extended
/// headers from the first [`header_len`] bytes of `b` (extra bytes are
/// ignored).  Pure: no I/O, no allocation, never panics.
pub fn parse_request_as(b: &[u8], extended: bool) -> Result<Request, ParseError> {
    if b.len() < header_len(extended) {
        return Err(ParseError::Short(b.len()));
    }
    let magic = be_u32(&b[0..4]);
    if magic != if extended { EXTENDED_REQUEST_MAGIC } else { REQUEST_MAGIC } {
        return Err(ParseError::BadMagic(magic));
    }
    Ok(Request {
        flags: be_u16(&b[4..6]),
        cmd: Command::from_wire(be_u16(&b[6..8])),
        cookie: be_u64(&b[8..16]),
        offset: be_u64(&b[16..24]),
        length: if extended { be_u64(&b[24..32]) } else { be_u32(&b[24..28]) as u64 },
    })
}

/// What the checks need to know about the export and the session.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub size: u64,
    /// Advertised minimum block size; offsets and lengths must be multiples
    /// of it unless `unaligned_ok`.
    pub min_block: u64,
    /// The advertised maximum block size: the longest READ, WRITE or
    /// CACHE (see [`Request::max_block_bounds`]).
    pub max_payload: u32,
    pub read_only: bool,
    pub unaligned_ok: bool,
    /// Structured replies were negotiated (READ may carry DF).
    pub structured: bool,
    /// Extended headers were negotiated (WRITE may carry PAYLOAD_LEN).
    pub extended: bool,
    /// `base:allocation` was selected (BLOCK_STATUS is allowed).
    pub block_status: bool,
    /// The export zeroes fast (else WRITE_ZEROES with FAST_ZERO and
    /// NO_HOLE: ENOTSUP).
    pub fast_zero: bool,
    /// The export zeroes fast where it may leave a hole (else
    /// WRITE_ZEROES with FAST_ZERO and without NO_HOLE: ENOTSUP).
    pub fast_zero_hole: bool,
}

/// Judge a decoded request against the export: `Err(errno)` is sent back
/// as the reply's error (an NBD error value from [`crate::proto`]).
// `%` rather than `is_multiple_of`: the workspace's rust-version is 1.80.
#[allow(clippy::manual_is_multiple_of)]
pub fn check(r: &Request, l: &Limits) -> Result<(), u32> {
    let writes = match r.cmd {
        Command::Unknown(_) => return Err(EINVAL),
        Command::Disc => return Ok(()),
        // FLUSH has no range and no flag of its own (the spec: a flag not
        // defined for a command SHOULD get EINVAL), but FUA, which qemu
        // sets on its flushes, is harmless: the flush is durable anyway.
        Command::Flush => return if r.flags & !CMD_FLAG_FUA != 0 { Err(EINVAL) } else { Ok(()) },
        Command::Read | Command::Cache => false,
        Command::BlockStatus if !l.block_status => return Err(EINVAL),
        Command::BlockStatus => false,
        Command::Write | Command::Trim | Command::WriteZeroes => true,
    };
    let known = if l.extended { CMD_FLAGS_KNOWN | CMD_FLAG_PAYLOAD_LEN } else { CMD_FLAGS_KNOWN };
    if r.flags & !known != 0 {
        return Err(EINVAL);
    }
    // Each flag only where the spec defines it (a payload only with a
    // WRITE: this server takes no BLOCK_STATUS payload, and does not
    // advertise one).
    let only = |flag: u16, ok: bool| r.flags & flag == 0 || ok;
    if !only(CMD_FLAG_NO_HOLE | CMD_FLAG_FAST_ZERO, r.cmd == Command::WriteZeroes)
        || !only(CMD_FLAG_DF, r.cmd == Command::Read && l.structured)
        || !only(CMD_FLAG_REQ_ONE, r.cmd == Command::BlockStatus)
        || !only(CMD_FLAG_PAYLOAD_LEN, r.cmd == Command::Write)
    {
        return Err(EINVAL);
    }
    // The spec: a zero-length request is not sensible; the server SHOULD
    // answer EINVAL (and the connection goes on).
    if r.length == 0 {
        return Err(EINVAL);
    }
    if writes && l.read_only {
        return Err(EPERM);
    }
    if r.max_block_bounds() && r.length > l.max_payload as u64 {
        return Err(EINVAL);
    }
    let end = r.offset.checked_add(r.length).ok_or(EINVAL)?;
    if end > l.size {
        // The spec: ENOSPC for writes past the end, EINVAL otherwise.
        return Err(if writes { ENOSPC } else { EINVAL });
    }
    if !l.unaligned_ok && l.min_block > 1 && (r.offset % l.min_block != 0 || r.length % l.min_block != 0) {
        return Err(EINVAL);
    }
    // Last: the spec wants a fast failure only for a request that would
    // otherwise have been carried out.
    let fast = if r.flags & CMD_FLAG_NO_HOLE != 0 { l.fast_zero } else { l.fast_zero_hole };
    if r.flags & CMD_FLAG_FAST_ZERO != 0 && !fast {
        return Err(ENOTSUP);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn limits() -> Limits {
        Limits {
            size: 1 << 20,
            min_block: 4096,
            max_payload: MAX_PAYLOAD,
            read_only: false,
            unaligned_ok: false,
            structured: false,
            extended: false,
            block_status: false,
            fast_zero: false,
            fast_zero_hole: false,
        }
    }

    fn req(cmd: Command, offset: u64, length: u64) -> Request {
        Request { flags: 0, cmd, cookie: 7, offset, length }
    }

    #[test]
    fn round_trip() {
        let r = Request { flags: CMD_FLAG_FUA, cmd: Command::Write, cookie: 0xdead_beef_0102_0304, offset: 8192, length: 4096 };
        assert_eq!(parse_request(&r.encode()), Ok(r));
        assert_eq!(r.payload_len(false), 4096);
        assert!(r.fua());
    }

    #[test]
    fn bad_headers() {
        assert_eq!(parse_request(&[0u8; 27]), Err(ParseError::Short(27)));
        assert_eq!(parse_request(&[0u8; 28]), Err(ParseError::BadMagic(0)));
    }

    #[test]
    fn checks() {
        let l = limits();
        assert_eq!(check(&req(Command::Read, 0, 4096), &l), Ok(()));
        assert_eq!(check(&req(Command::Read, 1 << 20, 4096), &l), Err(EINVAL));
        assert_eq!(check(&req(Command::Write, 1 << 20, 4096), &l), Err(ENOSPC));
        assert_eq!(check(&req(Command::Write, u64::MAX - 10, 4096), &l), Err(EINVAL));
        assert_eq!(check(&req(Command::Write, 512, 4096), &l), Err(EINVAL));
        assert_eq!(check(&req(Command::Read, 0, MAX_PAYLOAD as u64 + 4096), &l), Err(EINVAL));
        assert_eq!(check(&req(Command::Unknown(99), 0, 0), &l), Err(EINVAL));
        assert_eq!(check(&req(Command::Flush, 0, 0), &l), Ok(()));
        let mut f = req(Command::Flush, 0, 0);
        f.flags = 1 << 12;
        assert_eq!(check(&f, &l), Err(EINVAL), "a flush with an unknown flag");
        for flag in [CMD_FLAG_NO_HOLE, CMD_FLAG_DF, CMD_FLAG_REQ_ONE, CMD_FLAG_FAST_ZERO] {
            f.flags = flag;
            assert_eq!(check(&f, &l), Err(EINVAL), "a flush with flag {flag:#x}, defined for other commands");
        }
        f.flags = CMD_FLAG_FUA;
        assert_eq!(check(&f, &l), Ok(()), "qemu's flush with FUA");
        for cmd in [Command::Read, Command::Write, Command::WriteZeroes, Command::Trim] {
            assert_eq!(check(&req(cmd, 4096, 0), &l), Err(EINVAL), "zero-length {cmd:?}");
        }
        let ro = Limits { read_only: true, ..l };
        assert_eq!(check(&req(Command::Write, 0, 4096), &ro), Err(EPERM));
        assert_eq!(check(&req(Command::Read, 0, 4096), &ro), Ok(()));
        let mut r = req(Command::Read, 0, 4096);
        r.flags = CMD_FLAG_NO_HOLE;
        assert_eq!(check(&r, &l), Err(EINVAL));
        r.flags = 1 << 9;
        assert_eq!(check(&r, &l), Err(EINVAL));
    }

    #[test]
    fn flags_and_commands_of_structured_sessions() {
        let l = limits();
        let flagged = |cmd, flags, length| Request { flags, cmd, cookie: 1, offset: 0, length };
        // DF: READ only, and only once replies are structured.
        assert_eq!(check(&flagged(Command::Read, CMD_FLAG_DF, 4096), &l), Err(EINVAL));
        let s = Limits { structured: true, ..l };
        assert_eq!(check(&flagged(Command::Read, CMD_FLAG_DF, 4096), &s), Ok(()));
        assert_eq!(check(&flagged(Command::Write, CMD_FLAG_DF, 4096), &s), Err(EINVAL));
        // BLOCK_STATUS: only with base:allocation selected; REQ_ONE is its
        // flag alone; its length is not bounded by the payload limit.
        assert_eq!(check(&flagged(Command::BlockStatus, 0, 4096), &s), Err(EINVAL));
        let b = Limits { block_status: true, size: 1 << 40, ..s };
        assert_eq!(check(&flagged(Command::BlockStatus, CMD_FLAG_REQ_ONE, 4096), &b), Ok(()));
        assert_eq!(check(&flagged(Command::BlockStatus, 0, u32::MAX as u64 - 4095), &b), Ok(()));
        assert_eq!(check(&flagged(Command::BlockStatus, 0, 512), &b), Err(EINVAL), "unaligned");
        assert_eq!(check(&flagged(Command::Read, CMD_FLAG_REQ_ONE, 4096), &b), Err(EINVAL));
        let ro = Limits { read_only: true, ..b };
        assert_eq!(check(&flagged(Command::BlockStatus, 0, 4096), &ro), Ok(()));
        assert_eq!(check(&flagged(Command::Cache, 0, 4096), &ro), Ok(()));
        assert_eq!(check(&flagged(Command::Cache, 0, 0), &ro), Err(EINVAL));
        // FAST_ZERO: ENOTSUP from an export that cannot, but only for a
        // request that is otherwise valid.
        assert_eq!(check(&flagged(Command::WriteZeroes, CMD_FLAG_FAST_ZERO, 4096), &l), Err(ENOTSUP));
        assert_eq!(check(&flagged(Command::WriteZeroes, CMD_FLAG_FAST_ZERO, 512), &l), Err(EINVAL));
        let fast = Limits { fast_zero: true, fast_zero_hole: true, ..l };
        assert_eq!(check(&flagged(Command::WriteZeroes, CMD_FLAG_FAST_ZERO, 4096), &fast), Ok(()));
        // Fast only where it may leave a hole (a map that unmaps): NO_HOLE
        // makes it slow.
        let holes = Limits { fast_zero_hole: true, ..l };
        assert_eq!(check(&flagged(Command::WriteZeroes, CMD_FLAG_FAST_ZERO, 4096), &holes), Ok(()));
        assert_eq!(check(&flagged(Command::WriteZeroes, CMD_FLAG_FAST_ZERO | CMD_FLAG_NO_HOLE, 4096), &holes), Err(ENOTSUP));
        assert_eq!(check(&flagged(Command::WriteZeroes, CMD_FLAG_FAST_ZERO | CMD_FLAG_NO_HOLE, 4096), &fast), Ok(()));
        assert_eq!(check(&flagged(Command::Trim, CMD_FLAG_FAST_ZERO, 4096), &fast), Err(EINVAL));
    }

    /// The maximum block size bounds READ, WRITE and CACHE (EINVAL), not
    /// WRITE_ZEROES, TRIM or BLOCK_STATUS.
    #[test]
    fn the_maximum_block_size_bounds_the_commands_that_move_payload() {
        let l = Limits { size: 1 << 40, block_status: true, structured: true, fast_zero: true, fast_zero_hole: true, ..limits() };
        let at = |cmd, flags, length| check(&Request { flags, cmd, cookie: 1, offset: 0, length }, &l);
        let over = MAX_PAYLOAD as u64 + 4096;
        for cmd in [Command::Read, Command::Write, Command::Cache] {
            assert_eq!(at(cmd, 0, MAX_PAYLOAD as u64), Ok(()), "{cmd:?} of the maximum");
            assert_eq!(at(cmd, 0, over), Err(EINVAL), "{cmd:?} past the maximum");
        }
        assert_eq!(at(Command::WriteZeroes, CMD_FLAG_NO_HOLE | CMD_FLAG_FUA, over), Ok(()));
        assert_eq!(at(Command::WriteZeroes, CMD_FLAG_FAST_ZERO, over), Ok(()));
        assert_eq!(at(Command::Trim, 0, over), Ok(()));
        assert_eq!(at(Command::BlockStatus, 0, over), Ok(()));
        // A fast zero the export cannot do fast: ENOTSUP whatever its length.
        let slow = Limits { fast_zero: false, fast_zero_hole: false, ..l };
        let r = Request { flags: CMD_FLAG_FAST_ZERO, cmd: Command::WriteZeroes, cookie: 1, offset: 0, length: u32::MAX as u64 - 4095 };
        assert_eq!(check(&r, &slow), Err(ENOTSUP));
        // Read-only comes first, as for any write.
        let ro = Limits { read_only: true, ..l };
        assert_eq!(check(&Request { flags: 0, cmd: Command::WriteZeroes, cookie: 1, offset: 0, length: over }, &ro), Err(EPERM));
    }

    /// Extended headers: 32 bytes with a 64-bit length, their own magic;
    /// a header of the other form is out of sync either way.
    #[test]
    fn extended_headers_round_trip_and_forms_do_not_mix() {
        let r = Request { flags: CMD_FLAG_FUA, cmd: Command::WriteZeroes, cookie: 9, offset: 1 << 40, length: 5 << 32 };
        let b = r.encode_extended();
        assert_eq!(&b[..4], &EXTENDED_REQUEST_MAGIC.to_be_bytes());
        assert_eq!(&b[24..], &(5u64 << 32).to_be_bytes());
        assert_eq!(parse_request_as(&b, true), Ok(r));
        assert_eq!(parse_request_as(&b[..31], true), Err(ParseError::Short(31)));
        assert_eq!(parse_request_as(&b, false), Err(ParseError::BadMagic(EXTENDED_REQUEST_MAGIC)));
        let compact = Request { length: 4096, ..r };
        assert_eq!(parse_request_as(&compact.encode(), false), Ok(compact));
        let mut padded = compact.encode().to_vec();
        padded.extend_from_slice(&[0; 4]);
        assert_eq!(parse_request_as(&padded, true), Err(ParseError::BadMagic(REQUEST_MAGIC)));
        assert!(ParseError::BadMagic(EXTENDED_REQUEST_MAGIC).to_string().contains("did not negotiate extended headers"));
    }

    /// PAYLOAD_LEN: known only in extended sessions, where it is allowed
    /// on WRITE alone; the payload it announces on another command is
    /// still read past (so the stream stays in step) before the EINVAL.
    /// A 64-bit length is judged like any other.
    #[test]
    fn payload_len_flag_and_long_effects_of_extended_sessions() {
        let l = Limits { size: 1 << 40, structured: true, block_status: true, fast_zero: true, fast_zero_hole: true, ..limits() };
        let x = Limits { extended: true, ..l };
        let w = Request { flags: CMD_FLAG_PAYLOAD_LEN, cmd: Command::Write, cookie: 1, offset: 0, length: 4096 };
        assert_eq!(check(&w, &l), Err(EINVAL), "PAYLOAD_LEN without extended headers");
        assert_eq!(check(&w, &x), Ok(()));
        assert_eq!((w.payload_len(true), w.payload_len(false)), (4096, 4096));
        let bs = Request { cmd: Command::BlockStatus, length: 12, ..w };
        assert_eq!(check(&bs, &x), Err(EINVAL), "a BLOCK_STATUS payload is not taken");
        assert_eq!((bs.payload_len(true), bs.payload_len(false)), (12, 0));
        let zeroes = Request { flags: CMD_FLAG_NO_HOLE, cmd: Command::WriteZeroes, cookie: 2, offset: 4096, length: 6 << 30 };
        assert_eq!(check(&zeroes, &x), Ok(()), "6 GiB of zeroes in one request");
        assert_eq!(zeroes.payload_len(true), 0);
        assert_eq!(check(&Request { length: 1 << 40, ..zeroes }, &x), Err(ENOSPC), "past the end");
        assert_eq!(check(&Request { cmd: Command::Trim, flags: 0, offset: u64::MAX - 4095, length: 8192, ..zeroes }, &x), Err(EINVAL), "offset + length overflows");
        assert_eq!(check(&Request { cmd: Command::Read, flags: 0, length: (MAX_PAYLOAD as u64) << 8, ..zeroes }, &x), Err(EINVAL), "a READ past the maximum block size");
        assert_eq!(check(&Request { cmd: Command::BlockStatus, flags: 0, offset: 0, length: 5 << 32, ..zeroes }, &x), Ok(()));
    }

    proptest! {
        /// Random bytes never panic either parser, and whatever parses
        /// re-encodes to the same header bytes.
        #[test]
        fn random_bytes_either_form(bytes in proptest::collection::vec(any::<u8>(), 0..64), extended: bool) {
            match parse_request_as(&bytes, extended) {
                Ok(r) => {
                    let enc = if extended { r.encode_extended().to_vec() } else { r.encode().to_vec() };
                    prop_assert_eq!(&enc[..], &bytes[..header_len(extended)]);
                    let _ = check(&r, &Limits { extended, ..limits() });
                }
                Err(ParseError::Short(n)) => prop_assert!(n < header_len(extended)),
                Err(ParseError::BadMagic(_)) => {}
            }
        }

        /// Random bytes never panic the parser or the checks, and whatever
        /// parses re-encodes to the same 28 bytes.
        #[test]
        fn random_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
            match parse_request(&bytes) {
                Ok(r) => {
                    prop_assert_eq!(&r.encode()[..], &bytes[..REQUEST_LEN]);
                    let _ = check(&r, &limits());
                }
                Err(ParseError::Short(n)) => prop_assert!(n < REQUEST_LEN),
                Err(ParseError::BadMagic(m)) => prop_assert_ne!(m, REQUEST_MAGIC),
            }
        }

        /// Headers with the right magic and random fields always parse.
        #[test]
        fn random_fields(flags: u16, ty: u16, cookie: u64, offset: u64, length: u32) {
            let r = Request { flags, cmd: Command::from_wire(ty), cookie, offset, length: length as u64 };
            let back = parse_request(&r.encode()).unwrap();
            prop_assert_eq!(back, r);
            let res = check(&back, &limits());
            if res.is_ok() && !matches!(r.cmd, Command::Disc | Command::Flush) {
                prop_assert!(length > 0);
                prop_assert!(offset + length as u64 <= 1 << 20);
                prop_assert_eq!(offset % 4096, 0);
            }
        }
    }
}
