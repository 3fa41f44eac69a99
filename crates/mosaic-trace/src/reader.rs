//! [`TraceReader`]: the streaming iterator over a trace's requests.

use std::collections::VecDeque;
use std::io::{self, BufRead};
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

/// Does a blkparse trace have any Q event (before its summary)?
pub(crate) fn blkparse_has_q(src: &mut dyn BufRead) -> io::Result<bool> {
    let mut buf = Vec::new();
    loop {
        match read_line(src, &mut buf)? {
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
    Req(Request),
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
///   earlier timestamp later in the file clamps to 0), multiplied by the
///   time scale.
/// * The iterator ends after the first error (unless `skip_bad`).
/// * Memory is constant: one line buffer, reused.  Two bounded exceptions:
///   - **CloudPhysics**: the clock resolution is one second and many
///     requests share a timestamp, so the reader buffers the requests of one
///     second and spreads them evenly within it: request *i* of *n* in second
///     *t* is at *t + i/n* s.  The look-ahead is one second's requests (at
///     most 2^20; a larger group is spread in chunks of that size).
///   - **blkparse through [`crate::from_reader`]**: D events before the first
///     Q event are held back until the Q-or-D decision (see there).
pub struct TraceReader {
    name: String,
    format: Format,
    compression: Compression,
    src: Source,
    /// Lines read ahead for detection (`None`: too long), replayed first.
    ahead: VecDeque<Option<Vec<u8>>>,
    buf: Vec<u8>,
    line_no: u64,
    eof: bool,
    done: bool,
    device: Option<Vec<u8>>,
    first: Option<u64>,
    time_scale: f64,
    skip_bad: bool,
    blk: BlkMode,
    pending: VecDeque<Pending>,
    fio_clock: u64,
    base: Option<u64>,
    emitted: u64,
    skipped_bad: u64,
    skipped_ops: u64,
    filtered: u64,
    second: VecDeque<Request>,
    held: Option<Request>,
    held_err: Option<TraceError>,
}

impl TraceReader {
    pub(crate) fn new(name: String, src: Source, compression: Compression, opts: &TraceOptions) -> Result<TraceReader, TraceError> {
        if !(opts.time_scale.is_finite() && opts.time_scale >= 0.0) {
            return Err(TraceError::Options(format!("time scale must be a finite number >= 0, got {}", opts.time_scale)));
        }
        let device = opts.device.as_ref().map(|d| d.trim().as_bytes().to_vec());
        let mut r = TraceReader {
            name,
            format: opts.format.unwrap_or(Format::Msr),
            compression,
            src,
            ahead: VecDeque::new(),
            buf: Vec::with_capacity(256),
            line_no: 0,
            eof: false,
            done: false,
            device,
            first: opts.first,
            time_scale: opts.time_scale,
            skip_bad: opts.skip_bad,
            blk: BlkMode::Undecided,
            pending: VecDeque::new(),
            fio_clock: 0,
            base: None,
            emitted: 0,
            skipped_bad: 0,
            skipped_ops: 0,
            filtered: 0,
            second: VecDeque::new(),
            held: None,
            held_err: None,
        };
        if opts.format.is_none() {
            r.format = r.detect()?;
        }
        if r.device.is_some() && r.format == Format::CloudPhysics {
            return Err(TraceError::Options(format!("{}: the cloudphysics format has no device field to filter on", r.name)));
        }
        Ok(r)
    }

    /// Read the first lines into `ahead` and detect the format.
    fn detect(&mut self) -> Result<Format, TraceError> {
        let mut content = 0;
        while content < detect::SAMPLE_LINES && self.ahead.len() < MAX_SAMPLE_LINES {
            match read_line(&mut *self.src, &mut self.buf).map_err(|e| io_err(&self.name, e))? {
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
        detect::detect(&lines).map_err(|reason| TraceError::Detect { file: self.name.clone(), reason, tried: detect::tried() })
    }

    pub(crate) fn set_blkparse_action(&mut self, action: u8) {
        self.blk = if action == b'Q' { BlkMode::Q } else { BlkMode::D };
    }

    /// The trace's format (given or detected).
    pub fn format(&self) -> Format {
        self.format
    }
    /// The name used in errors (the path for [`crate::open`]).
    pub fn name(&self) -> &str {
        &self.name
    }
    /// How the file was compressed.
    pub fn compression(&self) -> Compression {
        self.compression
    }
    /// Malformed lines skipped (with `skip_bad`).
    pub fn skipped_bad(&self) -> u64 {
        self.skipped_bad
    }
    /// Valid lines whose op is neither a read nor a write (other SCSI
    /// opcodes, flush, discard, trim, sync, zero-length transfers).
    pub fn skipped_ops(&self) -> u64 {
        self.skipped_ops
    }
    /// Requests (and other ops) dropped by the device filter.
    pub fn filtered(&self) -> u64 {
        self.filtered
    }
    /// Lines read so far.
    pub fn lines_read(&self) -> u64 {
        self.line_no
    }

    fn parse_error(&self, e: FieldError) -> TraceError {
        TraceError::Parse { file: self.name.clone(), line: self.line_no, field: e.field.to_string(), message: e.message }
    }

    fn wanted(&self, device: Option<&[u8]>) -> bool {
        match &self.device {
            None => true,
            Some(want) => device == Some(want.as_slice()),
        }
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
            read_line(&mut *self.src, &mut self.buf).map_err(|e| io_err(&self.name, e))?
        };
        match r {
            ReadLine::Eof => Ok(Ok(false)),
            ReadLine::Line => {
                self.line_no += 1;
                Ok(Ok(true))
            }
            ReadLine::TooLong => {
                self.line_no += 1;
                Ok(Err(err("line", format!("longer than {MAX_LINE} bytes"))))
            }
        }
    }

    /// The next request straight from the file (absolute time, unscaled).
    fn raw_next(&mut self) -> Option<Result<Request, TraceError>> {
        loop {
            if self.blk == BlkMode::D {
                if let Some(p) = self.pending.pop_front() {
                    match p {
                        Pending::Req(r) => return Some(Ok(r)),
                        Pending::Other => self.skipped_ops += 1,
                        Pending::Filtered => self.filtered += 1,
                        Pending::Bad(e) => {
                            if !self.skip_bad {
                                return Some(Err(e));
                            }
                            self.skipped_bad += 1;
                        }
                    }
                    continue;
                }
            }
            if self.eof {
                return None;
            }
            if self.ahead.is_empty() {
                match self.line_in_place() {
                    Some(Step::Return(r)) => return r,
                    Some(Step::Continue) => continue,
                    None => {}
                }
            }
            let got = match self.next_line() {
                Ok(g) => g,
                Err(e) => {
                    self.eof = true;
                    return Some(Err(e));
                }
            };
            let step = match got {
                Ok(false) => {
                    self.end_of_events();
                    Step::Continue
                }
                Ok(true) => {
                    let buf = mem::take(&mut self.buf);
                    let step = self.handle(&buf);
                    self.buf = buf;
                    step
                }
                Err(e) => self.bad(e),
            };
            if let Step::Return(r) = step {
                return r;
            }
        }
    }

    /// The next line handled where it is, in the source's buffer, when
    /// the buffer holds all of it (the common case: no copy); None, with
    /// nothing read, when it does not (a line across two fills, the end
    /// of the file): [`next_line`](Self::next_line) then reads it.
    fn line_in_place(&mut self) -> Option<Step> {
        // Out of `self` while `handle` borrows it (an empty reader does
        // not allocate).
        let mut src = mem::replace(&mut self.src, Box::new(io::empty()));
        let step = match src.fill_buf() {
            Ok(avail) => match find_newline(avail) {
                Some(i) if i <= MAX_LINE => {
                    self.line_no += 1;
                    let step = self.handle(&avail[..i]);
                    src.consume(i + 1);
                    Some(step)
                }
                _ => None,
            },
            // read_line retries.
            Err(e) if e.kind() == io::ErrorKind::Interrupted => None,
            Err(e) => {
                self.eof = true;
                Some(Step::Return(Some(Err(io_err(&self.name, e)))))
            }
        };
        self.src = src;
        step
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
                blkparse::Event::Io { action, line: parsed } => match (self.blk, action) {
                    (BlkMode::Q, b'Q') | (BlkMode::D, b'D') => parsed,
                    (BlkMode::Undecided, b'Q') => {
                        self.blk = BlkMode::Q;
                        self.pending.clear();
                        parsed
                    }
                    (BlkMode::Undecided, _) => {
                        let p = match parsed {
                            Ok(Line::Io { req, device }) if self.wanted(device) => Some(Pending::Req(req)),
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

    /// CloudPhysics: the next request with the requests of each second
    /// spread evenly over that second.
    fn spread_next(&mut self) -> Option<Result<Request, TraceError>> {
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
                Some(Ok(r)) if r.time_ns == first.time_ns => self.second.push_back(r),
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
        for (i, r) in self.second.iter_mut().enumerate() {
            r.time_ns = r.time_ns.saturating_add((1_000_000_000u128 * i as u128 / n) as u64);
        }
        self.second.pop_front().map(Ok)
    }
}

impl Iterator for TraceReader {
    type Item = Result<Request, TraceError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done || self.first.is_some_and(|n| self.emitted >= n) {
            return None;
        }
        let r = if self.format == Format::CloudPhysics { self.spread_next() } else { self.raw_next() };
        match r {
            Some(Ok(mut req)) => {
                let base = *self.base.get_or_insert(req.time_ns);
                let rel = req.time_ns.saturating_sub(base);
                req.time_ns = if self.time_scale == 1.0 { rel } else { (rel as f64 * self.time_scale).round() as u64 };
                self.emitted += 1;
                Some(Ok(req))
            }
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
            .field("name", &self.name)
            .field("format", &self.format)
            .field("compression", &self.compression)
            .field("line", &self.line_no)
            .field("emitted", &self.emitted)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::find_newline;

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
        let read = |cap: usize, format: Option<crate::Format>, skip_bad: bool| {
            let opts = crate::TraceOptions { format, skip_bad, ..Default::default() };
            let src = std::io::BufReader::with_capacity(cap, std::io::Cursor::new(text.clone()));
            let mut r = crate::from_reader("t", src, &opts).map_err(|e| e.to_string())?;
            let items: Vec<String> = r.by_ref().map(|x| format!("{x:?}")).collect();
            Ok::<_, String>((items, r.lines_read(), r.skipped_bad(), r.skipped_ops(), r.filtered()))
        };
        for format in [None, Some(crate::Format::Msr)] {
            for skip_bad in [false, true] {
                let whole = read(1 << 16, format, skip_bad);
                let (items, ..) = whole.clone().unwrap();
                assert_eq!(items.len(), if skip_bad { 41 } else { 7 }, "{items:?}");
                for cap in [1, 2, 7, 8, 9, 16, 33, 64, 100, 8192] {
                    assert_eq!(read(cap, format, skip_bad), whole, "capacity {cap}, {format:?}, skip_bad {skip_bad}");
                }
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
