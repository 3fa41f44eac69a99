//! [`TraceReader`]: the streaming iterator over a trace's requests.

use std::collections::VecDeque;
use std::io::{self, BufRead, BufReader};
use std::mem;

use crate::compress::{Compression, Source};
use crate::field::{err, FieldError, Line};
use crate::{alibaba, blkparse, cloudphysics, detect, fio, io_err, msr, spc, tencent, Format, Request, TraceError, TraceOptions};

/// Lines longer than this are malformed (and not buffered).
const MAX_LINE: usize = 1 << 20;
/// Lines read ahead for detection, at most.
const MAX_SAMPLE_LINES: usize = 256;
/// CloudPhysics: requests of one second buffered for spreading, at most.
const MAX_SECOND: usize = 1 << 20;
/// The reader's buffer: lines wholly in it are handled in place.
const BUF_SIZE: usize = 1 << 16;

enum ReadLine {
    Line,
    TooLong,
    Eof,
}

/// Read one line (without its `\n`) into `buf`; a line over [`MAX_LINE`]
/// bytes is consumed but not kept.
fn read_line(src: &mut dyn BufRead, buf: &mut Vec<u8>) -> io::Result<ReadLine> {
    buf.clear();
    let mut too_long = false;
    let mut any = false;
    loop {
        let avail = match src.fill_buf() {
            Ok(b) => b,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if avail.is_empty() {
            return Ok(if too_long {
                ReadLine::TooLong
            } else if any {
                ReadLine::Line
            } else {
                ReadLine::Eof
            });
        }
        any = true;
        let (chunk, used, done) = match find_newline(avail) {
            Some(i) => (&avail[..i], i + 1, true),
            None => (avail, avail.len(), false),
        };
        if !too_long {
            if buf.len() + chunk.len() > MAX_LINE {
                too_long = true;
                buf.clear();
            } else {
                buf.extend_from_slice(chunk);
            }
        }
        src.consume(used);
        if done {
            return Ok(if too_long { ReadLine::TooLong } else { ReadLine::Line });
        }
    }
}

/// The index of the first `\n` in `b`, eight bytes at a time.
#[inline]
fn find_newline(b: &[u8]) -> Option<usize> {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    let mut words = b.chunks_exact(8);
    let mut at = 0;
    for w in words.by_ref() {
        let x = u64::from_le_bytes([w[0], w[1], w[2], w[3], w[4], w[5], w[6], w[7]]) ^ (ONES * b'\n' as u64);
        // The lowest byte of x that is zero sets the lowest flag bit
        // (a borrow may set flags above it, never below).
        let zero = x.wrapping_sub(ONES) & !x & HIGH;
        if zero != 0 {
            return Some(at + zero.trailing_zeros() as usize / 8);
        }
        at += 8;
    }
    words.remainder().iter().position(|&c| c == b'\n').map(|i| at + i)
}

/// `e`, met reading line `line`.
#[cold]
pub(crate) fn in_line(e: io::Error, line: u64) -> io::Error {
    io::Error::new(e.kind(), format!("line {line}: {e}"))
}

/// Does a blkparse trace have any Q event (before its summary)?  An
/// error names the line it was met in when `compressed`.
pub(crate) fn blkparse_has_q(src: &mut dyn BufRead, compressed: bool) -> io::Result<bool> {
    let mut buf = Vec::new();
    let mut line = 0;
    loop {
        line += 1;
        let read = read_line(src, &mut buf).map_err(|e| if compressed { in_line(e, line) } else { e });
        match read? {
            ReadLine::Eof => return Ok(false),
            ReadLine::TooLong => {}
            ReadLine::Line => match blkparse::parse(crate::field::trim(&buf)) {
                blkparse::Event::Io { action: b'Q', .. } => return Ok(true),
                blkparse::Event::Plain(Line::End) => return Ok(false),
                _ => {}
            },
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum BlkMode {
    Q,
    D,
    /// No Q event seen yet (from_reader): D events are held in `pending`.
    Undecided,
}

/// A D event held back while the blkparse mode is undecided.
enum Pending {
    /// The request and its line.
    Req(Request, u64),
    Other,
    Filtered,
    Bad(TraceError),
}

enum Step {
    Continue,
    Return(Option<Result<Request, TraceError>>),
}

/// A streaming trace reader: an iterator of requests, in file order.
///
/// * Times are relative to the first returned request (which is at 0; an
///   earlier timestamp later in the file clamps to 0 and is counted,
///   [`clamped`](Self::clamped)), multiplied by the time scale.  A scaled
///   time past `u64::MAX` ns is an error naming the request's line.
/// * The iterator ends after the first error (unless `skip_bad`).
/// * Memory is constant: a 64 KiB read buffer and one line buffer, reused.
///   Two bounded exceptions:
///   - **CloudPhysics**: the clock resolution is one second and many
///     requests share a timestamp, so the reader buffers the requests of one
///     second and spreads them evenly within it: request *i* of *n* in second
///     *t* is at *t + i/n* s.  The look-ahead is one second's requests (at
///     most 2^20; a larger group is spread in chunks of that size).
///   - **blkparse through [`crate::from_reader`]**: D events before the first
///     Q event are held back until the Q-or-D decision (see there).
pub struct TraceReader {
    h: Handler,
    compression: Compression,
    /// The source, buffered here: a line wholly in this buffer is handled
    /// where it is, with no call through the source.
    src: BufReader<Source>,
    /// Lines read ahead for detection (`None`: too long), replayed first.
    ahead: VecDeque<Option<Vec<u8>>>,
    buf: Vec<u8>,
    done: bool,
    first: Option<u64>,
    time_scale: f64,
    base: Option<u64>,
    emitted: u64,
    /// Requests before the first request's time, returned at 0.
    clamped: u64,
    /// CloudPhysics: one second's requests, with their lines.
    second: VecDeque<(Request, u64)>,
    held: Option<(Request, u64)>,
    held_err: Option<TraceError>,
    /// MSR lines read by [`msr_line`](Self::msr_line).
    #[cfg(test)]
    in_one_pass: u64,
}

/// What handling a line reads and counts: all of the reader but its
/// source, so that a line is handled where it lies, in the source's buffer.
struct Handler {
    name: String,
    format: Format,
    line_no: u64,
    eof: bool,
    device: Option<Vec<u8>>,
    skip_bad: bool,
    blk: BlkMode,
    pending: VecDeque<Pending>,
    fio_clock: u64,
    skipped_bad: u64,
    skipped_ops: u64,
    filtered: u64,
    /// Longer requests are malformed ([`TraceReader::set_max_len`]).
    max_len: u64,
}

impl TraceReader {
    pub(crate) fn new(name: String, src: Source, compression: Compression, opts: &TraceOptions) -> Result<TraceReader, TraceError> {
        if !(opts.time_scale.is_finite() && opts.time_scale > 0.0) {
            return Err(TraceError::Options(format!("time scale must be a finite number > 0, got {}", opts.time_scale)));
        }
        let device = opts.device.as_ref().map(|d| d.trim().as_bytes().to_vec());
        let h = Handler {
            name,
            format: opts.format.unwrap_or(Format::Msr),
            line_no: 0,
            eof: false,
            device,
            skip_bad: opts.skip_bad,
            blk: BlkMode::Undecided,
            pending: VecDeque::new(),
            fio_clock: 0,
            skipped_bad: 0,
            skipped_ops: 0,
            filtered: 0,
            max_len: u64::MAX,
        };
        let mut r = TraceReader {
            h,
            compression,
            src: BufReader::with_capacity(BUF_SIZE, src),
            ahead: VecDeque::new(),
            buf: Vec::with_capacity(256),
            done: false,
            first: opts.first,
            time_scale: opts.time_scale,
            base: None,
            emitted: 0,
            clamped: 0,
            second: VecDeque::new(),
            held: None,
            held_err: None,
            #[cfg(test)]
            in_one_pass: 0,
        };
        if opts.format.is_none() {
            r.h.format = r.detect()?;
        }
        if r.h.device.is_some() && r.h.format == Format::CloudPhysics {
            return Err(TraceError::Options(format!("{}: the cloudphysics format has no device field to filter on", r.h.name)));
        }
        Ok(r)
    }

    /// An error reading the source at `line`: for a compressed stream,
    /// which says where in its data it broke, the line too.
    #[cold]
    fn read_error(&self, e: io::Error, line: u64) -> TraceError {
        match self.compression {
            Compression::None => io_err(&self.h.name, e),
            _ => io_err(&self.h.name, in_line(e, line)),
        }
    }

    /// Read the first lines into `ahead` and detect the format.
    fn detect(&mut self) -> Result<Format, TraceError> {
        let mut content = 0;
        while content < detect::SAMPLE_LINES && self.ahead.len() < MAX_SAMPLE_LINES {
            let read = read_line(&mut self.src, &mut self.buf).map_err(|e| self.read_error(e, self.ahead.len() as u64 + 1));
            match read? {
                ReadLine::Eof => break,
                ReadLine::TooLong => self.ahead.push_back(None),
                ReadLine::Line => {
                    if detect::content(&self.buf).is_some() {
                        content += 1;
                    }
                    self.ahead.push_back(Some(mem::take(&mut self.buf)));
                }
            }
        }
        let lines: Vec<&[u8]> = self.ahead.iter().map(|l| l.as_deref().unwrap_or_default()).collect();
        detect::detect(&lines).map_err(|reason| TraceError::Detect { file: self.h.name.clone(), reason, tried: detect::tried() })
    }

    pub(crate) fn set_blkparse_action(&mut self, action: u8) {
        self.h.blk = if action == b'Q' { BlkMode::Q } else { BlkMode::D };
    }

    /// The trace's format (given or detected).
    pub fn format(&self) -> Format {
        self.h.format
    }
    /// The name used in errors (the path for [`crate::open`]).
    pub fn name(&self) -> &str {
        &self.h.name
    }
    /// How the file was compressed.
    pub fn compression(&self) -> Compression {
        self.compression
    }
    /// Malformed lines skipped (with `skip_bad`).
    pub fn skipped_bad(&self) -> u64 {
        self.h.skipped_bad
    }
    /// Valid lines whose op is neither a read nor a write (other SCSI
    /// opcodes, flush, discard, trim, sync, zero-length transfers).
    pub fn skipped_ops(&self) -> u64 {
        self.h.skipped_ops
    }
    /// Requests (and other ops) dropped by the device filter.
    pub fn filtered(&self) -> u64 {
        self.h.filtered
    }
    /// Lines read so far.
    pub fn lines_read(&self) -> u64 {
        self.h.line_no
    }
    /// Requests whose timestamp is earlier than the first request's,
    /// returned at time 0 (out-of-order timestamps): a reader that
    /// replays by time should say so when this is not 0.
    pub fn clamped(&self) -> u64 {
        self.clamped
    }
    /// Treat a request longer than `bytes` as a malformed line: an error
    /// naming the line, or with `skip_bad` a line skipped and counted in
    /// [`skipped_bad`](Self::skipped_bad).  For readers that cannot plan
    /// longer requests (the simulator's 1 GiB); no limit by default.
    pub fn set_max_len(&mut self, bytes: u64) {
        self.h.max_len = bytes;
    }

    /// The next line into `self.buf`; false at the end.
    fn next_line(&mut self) -> Result<Result<bool, FieldError>, TraceError> {
        let r = if let Some(l) = self.ahead.pop_front() {
            match l {
                Some(l) => {
                    self.buf = l;
                    ReadLine::Line
                }
                None => ReadLine::TooLong,
            }
        } else {
            read_line(&mut self.src, &mut self.buf).map_err(|e| self.read_error(e, self.h.line_no + 1))?
        };
        match r {
            ReadLine::Eof => Ok(Ok(false)),
            ReadLine::Line => {
                self.h.line_no += 1;
                Ok(Ok(true))
            }
            ReadLine::TooLong => {
                self.h.line_no += 1;
                Ok(Err(err("line", format!("longer than {MAX_LINE} bytes"))))
            }
        }
    }

    /// A request as returned: its time relative to the first request's
    /// (an earlier one clamped to 0 and counted), scaled; counted.  `line`
    /// is the request's, for the error of a scaled time past u64.
    #[inline(always)]
    fn emit(&mut self, mut req: Request, line: u64) -> Result<Request, TraceError> {
        let base = *self.base.get_or_insert(req.time_ns);
        let rel = match req.time_ns.checked_sub(base) {
            Some(rel) => rel,
            None => {
                self.clamped += 1;
                0
            }
        };
        req.time_ns = if self.time_scale == 1.0 { rel } else { self.scaled(rel, line)? };
        self.emitted += 1;
        Ok(req)
    }

    /// `rel` ns times the time scale; an error naming `line` past u64.
    fn scaled(&self, rel: u64, line: u64) -> Result<u64, TraceError> {
        let t = (rel as f64 * self.time_scale).round();
        // 2^64: the first f64 a u64 cannot hold.
        if t < 18_446_744_073_709_551_616.0 {
            return Ok(t as u64);
        }
        let message = format!("{rel} ns after the first request times the time scale {} is past u64::MAX ns", self.time_scale);
        Err(TraceError::Parse { file: self.h.name.clone(), line, field: self.h.format.time_field().to_string(), message })
    }

    /// [`emit`](Self::emit), the iterator ending at its error.
    #[inline(always)]
    fn emit_or_end(&mut self, req: Request, line: u64) -> Option<Result<Request, TraceError>> {
        let r = self.emit(req, line);
        self.done |= r.is_err();
        Some(r)
    }

    /// The next request the general way (absolute time, unscaled), with
    /// its line.
    #[inline(never)]
    fn general_next(&mut self) -> Option<Result<(Request, u64), TraceError>> {
        if self.h.format == Format::CloudPhysics {
            self.spread_next()
        } else {
            self.raw_next()
        }
    }

    /// The next request straight from the file (absolute time, unscaled),
    /// with its line.
    fn raw_next(&mut self) -> Option<Result<(Request, u64), TraceError>> {
        loop {
            if self.h.blk == BlkMode::D {
                if let Some(p) = self.h.pending.pop_front() {
                    match p {
                        Pending::Req(r, line) => return Some(Ok((r, line))),
                        Pending::Other => self.h.skipped_ops += 1,
                        Pending::Filtered => self.h.filtered += 1,
                        Pending::Bad(e) => {
                            if !self.h.skip_bad {
                                return Some(Err(e));
                            }
                            self.h.skipped_bad += 1;
                        }
                    }
                    continue;
                }
            }
            if self.h.eof {
                return None;
            }
            if self.ahead.is_empty() {
                match self.line_in_place() {
                    Some(Step::Return(r)) => return self.numbered(r),
                    Some(Step::Continue) => continue,
                    None => {}
                }
            }
            if let Step::Return(r) = self.line_copied() {
                return self.numbered(r);
            }
        }
    }

    /// A request just read, with its line (the last read).
    #[inline(always)]
    fn numbered(&self, r: Option<Result<Request, TraceError>>) -> Option<Result<(Request, u64), TraceError>> {
        r.map(|x| x.map(|req| (req, self.h.line_no)))
    }

    /// The next line handled where it is, in the source's buffer, when
    /// the buffer holds all of it (the common case: no copy); None, with
    /// nothing read, when it does not (a line across two fills, the end
    /// of the file): [`line_copied`](Self::line_copied) then reads it.
    fn line_in_place(&mut self) -> Option<Step> {
        if self.src.buffer().is_empty() {
            match self.src.fill_buf() {
                Ok(_) => {}
                // Tried again.
                Err(e) if e.kind() == io::ErrorKind::Interrupted => return Some(Step::Continue),
                Err(e) => {
                    self.h.eof = true;
                    return Some(Step::Return(Some(Err(self.read_error(e, self.h.line_no + 1)))));
                }
            }
        }
        let avail = self.src.buffer();
        let i = find_newline(avail).filter(|&i| i <= MAX_LINE)?;
        self.h.line_no += 1;
        let step = self.h.handle(&avail[..i]);
        self.src.consume(i + 1);
        Some(step)
    }

    /// MSR: the next request when its line is in the common form
    /// ([`msr::plain_line`]) and wholly in the buffer, read in place in
    /// one pass; None, with nothing read, at any other line (or a line
    /// that would not be read from the buffer: replayed, after the end).
    #[inline(always)]
    fn msr_next(&mut self) -> Option<Request> {
        match self.msr_line()? {
            (req, true) => Some(req),
            (_, false) => self.msr_next_wanted(),
        }
    }

    /// [`msr_next`](Self::msr_next) past lines of other disks.
    #[inline(never)]
    #[cold]
    fn msr_next_wanted(&mut self) -> Option<Request> {
        loop {
            if let (req, true) = self.msr_line()? {
                return Some(req);
            }
        }
    }

    /// An MSR line in the common form, read and counted in place: its
    /// request and whether its disk is wanted (if not, it is counted as
    /// filtered).
    #[inline(always)]
    fn msr_line(&mut self) -> Option<(Request, bool)> {
        if !self.ahead.is_empty() || self.h.eof {
            return None;
        }
        let (req, disk, used) = msr::plain_line(self.src.buffer())?;
        // Left to the general path: overlong lines, requests over max_len.
        if used > MAX_LINE + 1 || req.len > self.h.max_len {
            return None;
        }
        let wanted = self.h.wanted(Some(disk));
        self.h.line_no += 1;
        self.src.consume(used);
        #[cfg(test)]
        {
            self.in_one_pass += 1;
        }
        if !wanted {
            self.h.filtered += 1;
        }
        Some((req, wanted))
    }

    /// The next line copied out of the source (or replayed from `ahead`).
    #[inline(never)]
    fn line_copied(&mut self) -> Step {
        match self.next_line() {
            Ok(Ok(false)) => {
                self.h.end_of_events();
                Step::Continue
            }
            Ok(Ok(true)) => self.h.handle(&self.buf),
            Ok(Err(e)) => self.h.bad(e),
            Err(e) => {
                self.h.eof = true;
                Step::Return(Some(Err(e)))
            }
        }
    }

    /// CloudPhysics: the next request with the requests of each second
    /// spread evenly over that second.
    fn spread_next(&mut self) -> Option<Result<(Request, u64), TraceError>> {
        if let Some(r) = self.second.pop_front() {
            return Some(Ok(r));
        }
        if let Some(e) = self.held_err.take() {
            return Some(Err(e));
        }
        let first = match self.held.take() {
            Some(r) => r,
            None => match self.raw_next()? {
                Ok(r) => r,
                Err(e) => return Some(Err(e)),
            },
        };
        self.second.push_back(first);
        while self.second.len() < MAX_SECOND {
            match self.raw_next() {
                Some(Ok(r)) if r.0.time_ns == first.0.time_ns => self.second.push_back(r),
                Some(Ok(r)) => {
                    self.held = Some(r);
                    break;
                }
                Some(Err(e)) => {
                    // Reported after this second's requests.
                    self.held_err = Some(e);
                    break;
                }
                None => break,
            }
        }
        let n = self.second.len() as u128;
        for (i, (r, _)) in self.second.iter_mut().enumerate() {
            r.time_ns = r.time_ns.saturating_add((1_000_000_000u128 * i as u128 / n) as u64);
        }
        self.second.pop_front().map(Ok)
    }
}

impl Handler {
    fn parse_error(&self, e: FieldError) -> TraceError {
        TraceError::Parse { file: self.name.clone(), line: self.line_no, field: e.field.to_string(), message: e.message }
    }

    fn wanted(&self, device: Option<&[u8]>) -> bool {
        match &self.device {
            None => true,
            Some(want) => device == Some(want.as_slice()),
        }
    }

    fn end_of_events(&mut self) {
        self.eof = true;
        if self.blk == BlkMode::Undecided {
            self.blk = BlkMode::D;
        }
    }

    fn bad(&mut self, e: FieldError) -> Step {
        if self.skip_bad {
            self.skipped_bad += 1;
            Step::Continue
        } else {
            Step::Return(Some(Err(self.parse_error(e))))
        }
    }

    /// A D event's request held back: with its line, or its error when it
    /// is longer than `max_len`.
    fn pending(&self, req: Request) -> Pending {
        if req.len > self.max_len {
            Pending::Bad(self.parse_error(self.too_long(&req)))
        } else {
            Pending::Req(req, self.line_no)
        }
    }

    /// The error of a request longer than `max_len`.
    #[cold]
    fn too_long(&self, req: &Request) -> FieldError {
        let op = if req.op == crate::Op::Write { "write" } else { "read" };
        let message = format!(
            "a {op} of {} bytes at offset {}: larger than the {} bytes planned as one request (damaged sizes in the trace?)",
            req.len, req.offset, self.max_len
        );
        err(self.format.len_field(), message)
    }

    #[inline(always)]
    fn handle(&mut self, raw: &[u8]) -> Step {
        let line = if self.line_no == 1 { raw.strip_prefix(b"\xef\xbb\xbf").unwrap_or(raw) } else { raw };
        let line = crate::field::trim(line);
        if line.is_empty() || line[0] == b'#' {
            return Step::Continue;
        }
        let parsed = match self.format {
            Format::Spc => spc::parse(line),
            Format::Msr => msr::parse(line),
            Format::Alibaba => alibaba::parse(line),
            Format::Tencent => tencent::parse(line),
            Format::CloudPhysics => cloudphysics::parse(line),
            Format::FioV2 => fio::parse(line, false),
            Format::FioV3 => fio::parse(line, true),
            Format::Blkparse => match blkparse::parse(line) {
                blkparse::Event::Plain(l) => Ok(l),
                blkparse::Event::Truncated(e) => Err(e),
                blkparse::Event::Io { action, line: parsed } => match (self.blk, action) {
                    (BlkMode::Q, b'Q') | (BlkMode::D, b'D') => parsed,
                    (BlkMode::Undecided, b'Q') => {
                        self.blk = BlkMode::Q;
                        self.pending.clear();
                        parsed
                    }
                    (BlkMode::Undecided, _) => {
                        let p = match parsed {
                            Ok(Line::Io { req, device }) if self.wanted(device) => Some(self.pending(req)),
                            Ok(Line::Io { .. }) => Some(Pending::Filtered),
                            Ok(Line::Other { device }) => Some(if self.wanted(device) { Pending::Other } else { Pending::Filtered }),
                            Ok(_) => None,
                            Err(e) => Some(Pending::Bad(self.parse_error(e))),
                        };
                        self.pending.extend(p);
                        return Step::Continue;
                    }
                    _ => Ok(Line::Skip),
                },
            },
        };
        match parsed {
            Ok(Line::Io { mut req, device }) => {
                if !self.wanted(device) {
                    self.filtered += 1;
                    return Step::Continue;
                }
                if req.len > self.max_len {
                    return self.bad(self.too_long(&req));
                }
                if self.format == Format::FioV2 {
                    req.time_ns = self.fio_clock;
                }
                Step::Return(Some(Ok(req)))
            }
            Ok(Line::Other { device }) => {
                if self.wanted(device) {
                    self.skipped_ops += 1;
                } else {
                    self.filtered += 1;
                }
                Step::Continue
            }
            Ok(Line::Skip) => Step::Continue,
            Ok(Line::Clock { time_ns }) => {
                self.fio_clock = self.fio_clock.max(time_ns);
                Step::Continue
            }
            Ok(Line::End) => {
                self.end_of_events();
                Step::Continue
            }
            Err(e) => self.bad(e),
        }
    }
}

impl Iterator for TraceReader {
    type Item = Result<Request, TraceError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done || self.first.is_some_and(|n| self.emitted >= n) {
            return None;
        }
        if self.h.format == Format::Msr {
            if let Some(req) = self.msr_next() {
                return self.emit_or_end(req, self.h.line_no);
            }
        }
        match self.general_next() {
            Some(Ok((req, line))) => self.emit_or_end(req, line),
            Some(Err(e)) => {
                self.done = true;
                Some(Err(e))
            }
            None => {
                self.done = true;
                None
            }
        }
    }
}

impl std::iter::FusedIterator for TraceReader {}

impl std::fmt::Debug for TraceReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TraceReader")
            .field("name", &self.h.name)
            .field("format", &self.h.format)
            .field("compression", &self.compression)
            .field("line", &self.h.line_no)
            .field("emitted", &self.emitted)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use std::io::{self, Read};

    use super::find_newline;
    use crate::{Format, TraceOptions};

    /// A source that gives at most `step` bytes a read, is interrupted
    /// before every other read and, with `fail_at`, fails for good there.
    struct Trickle {
        data: Vec<u8>,
        at: usize,
        step: usize,
        fail_at: Option<usize>,
        interrupt: bool,
    }

    impl Read for Trickle {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            self.interrupt = !self.interrupt;
            if self.interrupt {
                return Err(io::ErrorKind::Interrupted.into());
            }
            let end = self.fail_at.map_or(self.data.len(), |f| f.min(self.data.len()));
            if self.at == end && self.fail_at.is_some() {
                return Err(io::Error::other("broken"));
            }
            let n = buf.len().min(self.step).min(end - self.at);
            buf[..n].copy_from_slice(&self.data[self.at..self.at + n]);
            self.at += n;
            Ok(n)
        }
    }

    /// A read of `text` in fills of at most `step` bytes: every item, the
    /// lines read, bad lines skipped, other ops and lines filtered, and
    /// the lines read in one pass.
    type Reading = (Vec<String>, [u64; 4], u64);

    fn read(text: &[u8], step: usize, fail_at: Option<usize>, opts: &TraceOptions) -> Result<Reading, String> {
        let src = Trickle { data: text.to_vec(), at: 0, step, fail_at, interrupt: false };
        let mut r = crate::from_reader("t", io::BufReader::with_capacity(step, src), opts).map_err(|e| e.to_string())?;
        let items = r.by_ref().map(|x| x.map_or_else(|e| e.to_string(), |req| format!("{req:?}"))).collect();
        Ok((items, [r.lines_read(), r.skipped_bad(), r.skipped_ops(), r.filtered()], r.in_one_pass))
    }

    /// Lines are read the same whether the reader's buffer holds them
    /// whole (handled in place) or they cross its fills (copied out):
    /// the same requests, errors, line numbers and counters, with the
    /// format given or detected, bad lines skipped or not.
    #[test]
    fn lines_read_the_same_in_place_and_across_fills() {
        let mut text = b"\xef\xbb\xbfTimestamp,Hostname,DiskNumber,Type,Offset,Size,ResponseTime\r\n".to_vec();
        for i in 0..40u64 {
            text.extend_from_slice(format!("{},h{},{},{},{},{},7\n", 1000 + i * 37, i % 3, i % 2, ["Read", "Write"][i as usize % 2], i * 4096, 512 << (i % 4)).as_bytes());
            match i % 10 {
                3 => text.extend_from_slice(b"\n# a comment\r\n   \n"),
                5 => text.extend_from_slice(b"1,h,0,Trim,1,2\n"),
                7 => text.extend_from_slice(format!("128166372003061629,wdev,0,Write,{},4096,1125\r\n", "9".repeat(70)).as_bytes()),
                _ => {}
            }
        }
        text.extend_from_slice(b"99999,h,0,Read,0,4096");
        for format in [None, Some(Format::Msr)] {
            for skip_bad in [false, true] {
                let opts = TraceOptions { format, skip_bad, ..Default::default() };
                let (items, counts, _) = read(&text, 1 << 16, None, &opts).unwrap();
                assert_eq!(items.len(), if skip_bad { 41 } else { 7 }, "{items:?}");
                for step in [1, 2, 7, 8, 9, 16, 33, 64, 100, 8192] {
                    let (i, c, _) = read(&text, step, None, &opts).unwrap();
                    assert_eq!((&i, c), (&items, counts), "fills of {step}, {format:?}, skip_bad {skip_bad}");
                }
            }
        }
    }

    /// MSR lines of every kind, those the one pass reads and those it
    /// leaves to the general path: a header, comments, blank lines, CRLF,
    /// other ops, bad lines, numbers of 1 to 20 digits and a last line
    /// without its newline.
    fn msr_text() -> Vec<u8> {
        let mut text = b"\xef\xbb\xbfTimestamp,Hostname,DiskNumber,Type,Offset,Size,ResponseTime\r\n".to_vec();
        for i in 0..150u64 {
            let line = match i % 16 {
                0..=2 => format!("{},bench,{},Write,{},4096,0", i * 10, i % 2, (i * 7919 % 1000) << 27),
                3 => format!("{},wdev,1,Read,{},{},1125", 128166372003061629 + i * 37, i * 512, 512 << (i % 5)),
                4 => format!("{},a-host-name-of-{i},{},wRiTe,{},65536,7\r", 1 + i, i % 3, i << 40),
                5 => "\n# a comment\r\n   \n1,h,0,Trim,1,2".to_string(),
                6 => format!("{i},h,0,Read,{i},0,1"),
                7 => format!("128166372003061629,wdev,0,Write,{},4096,1125\r", "9".repeat(70)),
                8 => format!("{i},h,1,Read,{},8\r", 1234567890123456789 + i),
                9 => format!("0000000000000000000{},h,0,Read,1,2", i % 10),
                10 => format!("{i},h,0,Read,18446744073709551615,{}", 1 + i % 2),
                11 => format!("{i},h, 1 ,Read,{i},4096"),
                12 => format!("{i},h,0,Read,{i},4096 "),
                13 => format!("184467440737095517,h,0,Read,{i},4096"),
                14 => format!("{},,12,READ,{},{},", 12345678 + i, 1234567890123456 + i, 1 + i),
                _ => format!("{i},h,0,Read,{i},12345678901234567890"),
            };
            text.extend_from_slice(line.as_bytes());
            text.push(b'\n');
        }
        text.extend_from_slice(b"99999,h,0,Read,0,4096");
        text
    }

    /// MSR lines read in one pass where the buffer holds them give what
    /// line-by-line reading gives (fills of one byte: never in one pass):
    /// fills of 1 to 8192 bytes and 64 KiB, the format given or detected,
    /// bad lines skipped or not, with a request limit and device filters.
    #[test]
    fn msr_lines_in_one_pass_read_as_line_by_line() {
        let text = msr_text();
        let mut steps: Vec<usize> = (2..=512).chain((513..=8192).step_by(61)).collect();
        steps.extend([4095, 4096, 4097, 8191, 8192, 1 << 16]);
        for format in [None, Some(Format::Msr)] {
            for skip_bad in [false, true] {
                for first in [None, Some(40)] {
                    for device in [None, Some("1"), Some(" 0 ")] {
                        let opts = TraceOptions { format, skip_bad, first, device: device.map(String::from), ..Default::default() };
                        let (items, counts, fast) = read(&text, 1, None, &opts).unwrap();
                        assert_eq!(fast, 0);
                        assert!(items.len() > 2, "{items:?}");
                        for &step in &steps {
                            let (i, c, fast) = read(&text, step, None, &opts).unwrap();
                            assert_eq!((&i, c), (&items, counts), "fills of {step}, {opts:?}");
                            if step == 1 << 16 && (skip_bad || format.is_some()) {
                                assert!(fast > 0, "{opts:?}");
                            }
                        }
                    }
                }
            }
        }
        // In one pass: all but CRLF without a response time, padding, 20
        // digits, other ops, bad lines, the last line, and the first
        // request after a line the general path skips (it reads on).
        let opts = TraceOptions { format: Some(Format::Msr), skip_bad: true, ..Default::default() };
        let (items, counts, fast) = read(&text, 1 << 16, None, &opts).unwrap();
        assert_eq!((items.len(), counts, fast), (105, [182, 37, 9, 0], 49), "{items:?}");
    }

    /// An I/O error ends the requests where line-by-line reading ends
    /// them: after the last whole line before it.
    #[test]
    fn io_errors_end_msr_lines_read_in_one_pass_as_line_by_line() {
        let text = msr_text();
        let opts = TraceOptions { format: Some(Format::Msr), skip_bad: true, ..Default::default() };
        for fail_at in (4..text.len()).step_by(7).chain([text.len() - 1]) {
            let whole = text[..fail_at].iter().rposition(|&c| c == b'\n').map_or(0, |i| i + 1);
            let (mut items, counts, _) = read(&text[..whole], 1, None, &opts).unwrap();
            items.push("t: broken".to_string());
            for step in [1, 3, 64, 1 << 16] {
                let (i, c, _) = read(&text, step, Some(fail_at), &opts).unwrap();
                assert_eq!((&i, c), (&items, counts), "fails at {fail_at}, fills of {step}");
            }
        }
    }

    #[test]
    fn find_newline_matches_a_plain_search() {
        let mut line = b"0,bench,0,Write,4096,4096,0\n1,\x8a\x0a\xff".to_vec();
        line.extend_from_slice(&[0x0b, 0x09, 0x8a, 0x00, 0x80, 0x0a, 0x7f]);
        for start in 0..line.len() {
            for end in start..=line.len() {
                let b = &line[start..end];
                assert_eq!(find_newline(b), b.iter().position(|&c| c == b'\n'), "{start}..{end}");
            }
        }
        assert_eq!(find_newline(&[0x0b; 20]), None);
        assert_eq!(find_newline(&[0x8a; 20]), None);
    }
}
