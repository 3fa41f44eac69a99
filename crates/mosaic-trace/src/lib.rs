//! mosaic-trace: streaming readers for public block I/O trace formats.
//!
//! [`open`] a file (gzip and zstd are recognised by their magic bytes),
//! name the format or let it be detected from the first lines, and iterate
//! [`Request`]s in constant memory.  Timestamps come out relative to the
//! first request, in nanoseconds, multiplied by the time scale.
//!
//! A malformed line is an error naming the file, the line number and the
//! field, unless `skip_bad` is set (then it is counted).

mod formats;
mod stats;
mod writer;

use std::collections::VecDeque;
use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::path::Path;

use serde::Serialize;

pub use formats::Format;
use formats::Line;
pub use stats::{stats, TraceStats};
pub use writer::TraceWriter;

/// Read or write.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Op {
    Read,
    Write,
}

/// One block request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Request {
    /// Arrival, ns after the first request (scaled).
    pub time_ns: u64,
    pub op: Op,
    /// Byte offset.
    pub offset: u64,
    /// Bytes.
    pub len: u64,
}

/// How to read a trace.
#[derive(Debug, Clone)]
pub struct TraceOptions {
    /// None: detect from the first lines.
    pub format: Option<Format>,
    /// Keep only requests of this ASU / disk number / device / volume / file.
    pub device: Option<String>,
    /// Stop after this many requests.
    pub first: Option<u64>,
    /// Multiply timestamps by this.
    pub time_scale: f64,
    /// Count and skip malformed lines instead of failing.
    pub skip_bad: bool,
}

impl Default for TraceOptions {
    fn default() -> Self {
        TraceOptions { format: None, device: None, first: None, time_scale: 1.0, skip_bad: false }
    }
}

/// Trace errors.
#[derive(Debug, thiserror::Error)]
pub enum TraceError {
    #[error("{file}:{line}: field '{field}': {message}")]
    Parse { file: String, line: u64, field: String, message: String },
    #[error("{file}: {message}")]
    Io { file: String, message: String },
    #[error("{file}: cannot detect the trace format from its first lines (tried spc, msr, blkparse, cloudphysics, fio2, fio3, alibaba, tencent); name it with --format")]
    Detect { file: String },
    #[error("{0}")]
    Options(String),
}

/// A streaming trace reader.
pub struct TraceReader {
    name: String,
    format: Format,
    src: Box<dyn BufRead>,
    /// Lines read ahead for detection, replayed first.
    ahead: VecDeque<String>,
    line: String,
    line_no: u64,
    opts: TraceOptions,
    blk_action: u8,
    base_time: Option<u64>,
    emitted: u64,
    skipped_bad: u64,
    skipped_ops: u64,
    filtered: u64,
    done: bool,
    /// CloudPhysics: one second's requests, spread evenly on release.
    second: VecDeque<Request>,
    second_pending: Option<Request>,
    /// An error found while gathering a second, reported after it.
    done_err: Option<TraceError>,
}

fn io_err(file: &str, e: impl std::fmt::Display) -> TraceError {
    TraceError::Io { file: file.to_string(), message: e.to_string() }
}

/// Wrap `r` in a decompressor if its first bytes are gzip or zstd magic.
fn decompress(name: &str, r: Box<dyn BufRead>) -> Result<Box<dyn BufRead>, TraceError> {
    let mut r = r;
    let head = r.fill_buf().map_err(|e| io_err(name, e))?;
    if head.starts_with(&[0x1f, 0x8b]) {
        return Ok(Box::new(BufReader::with_capacity(1 << 16, flate2::read::MultiGzDecoder::new(r))));
    }
    if head.starts_with(&[0x28, 0xb5, 0x2f, 0xfd]) {
        let d = zstd::stream::read::Decoder::with_buffer(r).map_err(|e| io_err(name, e))?;
        return Ok(Box::new(BufReader::with_capacity(1 << 16, d)));
    }
    Ok(r)
}

/// Open a trace file.
pub fn open(path: &Path, opts: &TraceOptions) -> Result<TraceReader, TraceError> {
    let name = path.display().to_string();
    let f = File::open(path).map_err(|e| io_err(&name, e))?;
    let r = decompress(&name, Box::new(BufReader::with_capacity(1 << 16, f)))?;
    let mut tr = TraceReader::new(name.clone(), r, opts)?;
    if tr.format == Format::Blkparse {
        // Q events if the trace has any, else D: scan it once.
        let f = File::open(path).map_err(|e| io_err(&name, e))?;
        let mut scan = decompress(&name, Box::new(BufReader::with_capacity(1 << 16, f)))?;
        tr.blk_action = if has_q_events(&mut scan) { b'Q' } else { b'D' };
    }
    Ok(tr)
}

/// Read a trace from any reader (tests).  blkparse input is buffered whole
/// to decide between Q and D events.
pub fn from_reader(name: &str, r: impl Read + 'static, opts: &TraceOptions) -> Result<TraceReader, TraceError> {
    let r = decompress(name, Box::new(BufReader::new(r)))?;
    let mut tr = TraceReader::new(name.to_string(), r, opts)?;
    if tr.format == Format::Blkparse {
        let mut all = Vec::new();
        tr.src.read_to_end(&mut all).map_err(|e| io_err(name, e))?;
        let ahead: String = tr.ahead.iter().map(|l| l.as_str()).collect();
        let mut text = ahead.into_bytes();
        text.extend_from_slice(&all);
        tr.blk_action = if has_q_events(&mut &text[..]) { b'Q' } else { b'D' };
        tr.ahead.clear();
        tr.src = Box::new(std::io::Cursor::new(text));
    }
    Ok(tr)
}

fn has_q_events(r: &mut dyn BufRead) -> bool {
    let mut line = String::new();
    while r.read_line(&mut line).unwrap_or(0) > 0 {
        if matches!(formats::parse(Format::Blkparse, &line, b'Q'), Ok(Line::Req { .. }) | Ok(Line::OtherOp)) {
            return true;
        }
        if matches!(formats::parse(Format::Blkparse, &line, b'Q'), Ok(Line::End)) {
            return false;
        }
        line.clear();
    }
    false
}

impl TraceReader {
    fn new(name: String, mut src: Box<dyn BufRead>, opts: &TraceOptions) -> Result<TraceReader, TraceError> {
        if !(opts.time_scale.is_finite() && opts.time_scale >= 0.0) {
            return Err(TraceError::Options(format!("time scale must be a non-negative number, got {}", opts.time_scale)));
        }
        let mut ahead = VecDeque::new();
        let format = match opts.format {
            Some(f) => f,
            None => {
                let mut sample = Vec::new();
                for _ in 0..32 {
                    let mut l = String::new();
                    if src.read_line(&mut l).map_err(|e| io_err(&name, e))? == 0 {
                        break;
                    }
                    sample.push(l);
                }
                let f = formats::detect(&sample).ok_or_else(|| TraceError::Detect { file: name.clone() })?;
                ahead.extend(sample);
                f
            }
        };
        if opts.device.is_some() && format == Format::CloudPhysics {
            return Err(TraceError::Options("the cloudphysics format has no device field to filter on".into()));
        }
        Ok(TraceReader {
            name,
            format,
            src,
            ahead,
            line: String::new(),
            line_no: 0,
            opts: opts.clone(),
            blk_action: b'Q',
            base_time: None,
            emitted: 0,
            skipped_bad: 0,
            skipped_ops: 0,
            filtered: 0,
            done: false,
            second: VecDeque::new(),
            second_pending: None,
            done_err: None,
        })
    }

    pub fn format(&self) -> Format {
        self.format
    }
    pub fn name(&self) -> &str {
        &self.name
    }
    /// Malformed lines skipped (with `skip_bad`).
    pub fn skipped_bad(&self) -> u64 {
        self.skipped_bad
    }
    /// Valid requests that are neither reads nor writes.
    pub fn skipped_ops(&self) -> u64 {
        self.skipped_ops
    }
    /// Requests dropped by the device filter.
    pub fn filtered(&self) -> u64 {
        self.filtered
    }

    fn next_line(&mut self) -> Result<bool, TraceError> {
        self.line.clear();
        if let Some(l) = self.ahead.pop_front() {
            self.line = l;
        } else if self.src.read_line(&mut self.line).map_err(|e| io_err(&self.name, e))? == 0 {
            return Ok(false);
        }
        self.line_no += 1;
        Ok(true)
    }

    fn scale(&mut self, t: u64) -> u64 {
        let base = *self.base_time.get_or_insert(t);
        (t.saturating_sub(base) as f64 * self.opts.time_scale) as u64
    }

    /// The next request straight from the file (unscaled absolute time).
    fn raw_next(&mut self) -> Option<Result<Request, TraceError>> {
        loop {
            match self.next_line() {
                Ok(true) => {}
                Ok(false) => return None,
                Err(e) => return Some(Err(e)),
            }
            match formats::parse(self.format, &self.line, self.blk_action) {
                Ok(Line::Req { time_ns, op, offset, len, device }) => {
                    if let Some(want) = &self.opts.device {
                        if device != Some(want.as_str()) {
                            self.filtered += 1;
                            continue;
                        }
                    }
                    return Some(Ok(Request { time_ns, op, offset, len }));
                }
                Ok(Line::OtherOp) => self.skipped_ops += 1,
                Ok(Line::Skip) => {}
                Ok(Line::End) => return None,
                Err(e) => {
                    if self.opts.skip_bad {
                        self.skipped_bad += 1;
                        continue;
                    }
                    return Some(Err(TraceError::Parse { file: self.name.clone(), line: self.line_no, field: e.field.to_string(), message: e.message }));
                }
            }
        }
    }

    /// CloudPhysics: gather one second's requests and spread them evenly
    /// over that second (request i of n at t + i/n s).
    fn next_spread(&mut self) -> Option<Result<Request, TraceError>> {
        if let Some(r) = self.second.pop_front() {
            return Some(Ok(r));
        }
        let first = match self.second_pending.take() {
            Some(r) => r,
            None => match self.raw_next()? {
                Ok(r) => r,
                Err(e) => return Some(Err(e)),
            },
        };
        let mut group = vec![first];
        loop {
            match self.raw_next() {
                Some(Ok(r)) if r.time_ns == first.time_ns => group.push(r),
                Some(Ok(r)) => {
                    self.second_pending = Some(r);
                    break;
                }
                Some(Err(e)) => {
                    self.second.extend(Self::spread(group));
                    // Report the error after this second's requests.
                    return match self.second.pop_front() {
                        Some(r) => {
                            self.done_err = Some(e);
                            Some(Ok(r))
                        }
                        None => Some(Err(e)),
                    };
                }
                None => break,
            }
        }
        self.second.extend(Self::spread(group));
        self.second.pop_front().map(Ok)
    }

    fn spread(group: Vec<Request>) -> Vec<Request> {
        let n = group.len() as u64;
        group.into_iter().enumerate().map(|(i, mut r)| {
            r.time_ns += 1_000_000_000 * i as u64 / n;
            r
        }).collect()
    }
}

impl Iterator for TraceReader {
    type Item = Result<Request, TraceError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done || self.opts.first.is_some_and(|n| self.emitted >= n) {
            return None;
        }
        if self.second.is_empty() {
            if let Some(e) = self.done_err.take() {
                self.done = true;
                return Some(Err(e));
            }
        }
        let r = if self.format == Format::CloudPhysics { self.next_spread() } else { self.raw_next() };
        match r {
            Some(Ok(mut req)) => {
                req.time_ns = self.scale(req.time_ns);
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
