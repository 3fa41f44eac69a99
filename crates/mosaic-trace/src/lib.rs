//! mosaic-trace: streaming, constant-memory readers for public block I/O
//! trace formats.
//!
//! [`open`] a file (gzip and zstd are recognised by their magic bytes), name
//! the [`Format`] or let it be detected from the first lines, and iterate
//! [`Request`]s.  Timestamps come out relative to the first returned
//! request, in nanoseconds, multiplied by [`TraceOptions::time_scale`].
//!
//! ```no_run
//! use mosaic_trace::{open, TraceOptions};
//! let reader = open("trace.csv.gz".as_ref(), &TraceOptions::default())?;
//! println!("{}", reader.format());
//! for req in reader {
//!     let req = req?;
//!     println!("{} {:?} {} {}", req.time_ns, req.op, req.offset, req.len);
//! }
//! # Ok::<(), mosaic_trace::TraceError>(())
//! ```
//!
//! A malformed line is an error naming the file, the line and the field
//! (`trace.csv:17: field 'Size': invalid number "12x"`), unless
//! [`TraceOptions::skip_bad`] is set; then it is counted
//! ([`TraceReader::skipped_bad`]).  No input makes a parser panic.
//!
//! Supported formats, one module each: SPC/UMass, MSR Cambridge, blkparse
//! text, libCacheSim/CloudPhysics, fio iolog v2 and v3, Alibaba, Tencent CBS
//! (see [`Format`]).  [`stats()`] summarises a trace; [`TraceWriter`] writes
//! MSR-format traces that read back unchanged.

mod alibaba;
mod blkparse;
mod cloudphysics;
mod compress;
mod detect;
mod field;
mod fio;
mod format;
mod msr;
mod reader;
mod spc;
mod stats;
mod tencent;
mod writer;

use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::Path;

use serde::Serialize;

pub use compress::Compression;
pub use format::{Format, UnknownFormat};
pub use reader::TraceReader;
pub use stats::{stats, SizeBucket, TraceStats};
pub use writer::{write_msr, TraceWriter};

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
    /// Bytes (never 0; `offset + len` never overflows).
    pub len: u64,
}

/// How to read a trace.
#[derive(Debug, Clone)]
pub struct TraceOptions {
    /// `None`: detect from the first lines.
    pub format: Option<Format>,
    /// Keep only requests of this ASU (spc) / disk number (msr) / device
    /// `maj,min` (blkparse) / device id (alibaba) / volume id (tencent) /
    /// file name (fio).  CloudPhysics traces have no such field.
    pub device: Option<String>,
    /// Stop after this many requests.
    pub first: Option<u64>,
    /// Multiply (relative) timestamps by this; 0.5 replays twice as fast.
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
    /// A malformed line: file, 1-based line number, field, what is wrong.
    #[error("{file}:{line}: field '{field}': {message}")]
    Parse { file: String, line: u64, field: String, message: String },
    /// The I/O error is part of the message (not a separate source), so
    /// error chains print it once.
    #[error("{file}: {error}")]
    Io { file: String, error: std::io::Error },
    #[error("{file}: cannot detect the trace format ({reason}); tried {tried}; name the format explicitly")]
    Detect { file: String, reason: String, tried: String },
    /// Invalid [`TraceOptions`].
    #[error("{0}")]
    Options(String),
}

pub(crate) fn io_err(file: &str, source: std::io::Error) -> TraceError {
    TraceError::Io { file: file.to_string(), error: source }
}

/// Refuse what is not a regular file before opening it: opening a FIFO
/// waits for a writer, and a character device (`/dev/null`, a terminal)
/// reads as an empty or endless trace.
fn check_kind(path: &Path, name: &str) -> Result<(), TraceError> {
    use std::os::unix::fs::FileTypeExt;
    let ft = std::fs::metadata(path).map_err(|e| io_err(name, e))?.file_type();
    let what = if ft.is_char_device() || ft.is_fifo() {
        "a character device/FIFO, not a trace file"
    } else if ft.is_dir() {
        "a directory, not a trace file"
    } else if ft.is_socket() {
        "a socket, not a trace file"
    } else {
        return Ok(());
    };
    Err(io_err(name, std::io::Error::new(std::io::ErrorKind::InvalidInput, what)))
}

fn open_source(path: &Path, name: &str) -> Result<(Compression, compress::Source), TraceError> {
    open_counted(path, name, Box::new(|_| {}))
}

/// [`open_source`], calling `progress` with the bytes of the file read so far.
fn open_counted(path: &Path, name: &str, progress: Box<dyn Fn(u64) + Send>) -> Result<(Compression, compress::Source), TraceError> {
    check_kind(path, name)?;
    let f = File::open(path).map_err(|e| io_err(name, e))?;
    let counted = Counted { inner: f, done: 0, progress };
    compress::decompress(Box::new(BufReader::with_capacity(1 << 16, counted))).map_err(|e| io_err(name, e))
}

/// A reader that reports how many bytes it has read.
struct Counted<R> {
    inner: R,
    done: u64,
    progress: Box<dyn Fn(u64) + Send>,
}

impl<R: std::io::Read> std::io::Read for Counted<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.done += n as u64;
        (self.progress)(self.done);
        Ok(n)
    }
}

/// Open a trace file (plain, gzip or zstd).
///
/// A blkparse trace is pre-scanned up to its first Q event to choose
/// between Q and D events, so reading stays constant-memory.
pub fn open(path: &Path, opts: &TraceOptions) -> Result<TraceReader, TraceError> {
    open_with_progress(path, opts, |_| {})
}

/// [`open`], calling `progress` with the bytes of the file read so far
/// (of the compressed file when it is compressed), for a progress bar
/// over the file's size.
pub fn open_with_progress(path: &Path, opts: &TraceOptions, progress: impl Fn(u64) + Send + 'static) -> Result<TraceReader, TraceError> {
    let name = path.display().to_string();
    let (compression, src) = open_counted(path, &name, Box::new(progress))?;
    let mut r = TraceReader::new(name.clone(), src, compression, opts)?;
    if r.format() == Format::Blkparse {
        let (_, mut scan) = open_source(path, &name)?;
        let q = reader::blkparse_has_q(&mut scan, compression != Compression::None).map_err(|e| io_err(&name, e))?;
        r.set_blkparse_action(if q { b'Q' } else { b'D' });
    }
    Ok(r)
}

/// Read a trace from any buffered reader (plain, gzip or zstd); `name`
/// labels errors.
///
/// A blkparse trace is decided lazily: D events met before the first Q
/// event are held back (as 32-byte requests) until a Q event shows up
/// (then they are dropped) or the events end (then they are returned).
/// Memory is constant for traces with Q events and proportional to the
/// request count for D-only traces; use [`open`] for large D-only files.
pub fn from_reader(name: &str, r: impl BufRead + Send + 'static, opts: &TraceOptions) -> Result<TraceReader, TraceError> {
    let (compression, src) = compress::decompress(Box::new(r)).map_err(|e| io_err(name, e))?;
    TraceReader::new(name.to_string(), src, compression, opts)
}

#[cfg(test)]
mod tests {
    #[test]
    fn reader_and_errors_are_send() {
        fn send<T: Send>() {}
        fn send_sync<T: Send + Sync + std::error::Error + 'static>() {}
        send::<crate::TraceReader>();
        send_sync::<crate::TraceError>();
    }
}
