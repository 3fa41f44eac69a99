//! Writing requests as an MSR Cambridge trace, which [`crate::open`] reads
//! back unchanged (used to record served workloads for replay).
//!
//! ```text
//! 0,mosaic,0,Write,4096,8192,10
//! 15000,mosaic,0,Read,0,512,10
//! ```
//!
//! Timestamps are FILETIME ticks (100 ns) counted from `base_ticks` (0 by
//! default; readers normalise to the first request anyway), so times round
//! trip exactly when they are multiples of 100 ns.

use std::io::Write;

use crate::{Op, Request};

/// Writes `Timestamp,Hostname,DiskNumber,Type,Offset,Size,ResponseTime`
/// lines.  Wrap the output in a `BufWriter` for files.
pub struct TraceWriter<W: Write> {
    out: W,
    host: String,
    disk: u32,
    base_ticks: u64,
    written: u64,
}

impl<W: Write> TraceWriter<W> {
    /// `host` goes in the Hostname column (commas and whitespace become `_`).
    pub fn new(out: W, host: &str) -> TraceWriter<W> {
        let host: String = host.chars().map(|c| if c == ',' || c.is_whitespace() { '_' } else { c }).collect();
        let host = if host.is_empty() { "mosaic".to_string() } else { host };
        TraceWriter { out, host, disk: 0, base_ticks: 0, written: 0 }
    }

    /// The DiskNumber column (the device filter when reading back).
    pub fn with_disk(mut self, disk: u32) -> Self {
        self.disk = disk;
        self
    }

    /// Add this many 100 ns ticks to every timestamp (e.g. a real
    /// FILETIME for the start of the recording).
    pub fn with_base_ticks(mut self, ticks: u64) -> Self {
        self.base_ticks = ticks;
        self
    }

    /// Append one request; `response_ns` is recorded in 100 ns ticks.
    pub fn write(&mut self, r: &Request, response_ns: u64) -> std::io::Result<()> {
        let ty = match r.op {
            Op::Read => "Read",
            Op::Write => "Write",
        };
        writeln!(
            self.out,
            "{},{},{},{},{},{},{}",
            self.base_ticks.saturating_add(r.time_ns / 100),
            self.host,
            self.disk,
            ty,
            r.offset,
            r.len,
            response_ns / 100
        )?;
        self.written += 1;
        Ok(())
    }

    /// Requests written so far.
    pub fn written(&self) -> u64 {
        self.written
    }

    pub fn flush(&mut self) -> std::io::Result<()> {
        self.out.flush()
    }

    pub fn into_inner(self) -> W {
        self.out
    }
}

/// Write `reqs` as an MSR trace (host `mosaic`, disk 0, response time 0).
pub fn write_msr<'a, W: Write>(out: W, reqs: impl IntoIterator<Item = &'a Request>) -> std::io::Result<W> {
    let mut w = TraceWriter::new(out, "mosaic");
    for r in reqs {
        w.write(r, 0)?;
    }
    w.flush()?;
    Ok(w.into_inner())
}
