//! Writing requests as an MSR Cambridge trace, which [`crate::open`] reads
//! back (used to record served workloads for replay).

use std::io::Write;

use crate::{Op, Request};

/// Writes `Timestamp,Hostname,DiskNumber,Type,Offset,Size,ResponseTime`
/// lines; timestamps are FILETIME ticks (100 ns) from zero.
pub struct TraceWriter<W: Write> {
    out: W,
    host: String,
}

impl<W: Write> TraceWriter<W> {
    pub fn new(out: W, host: &str) -> TraceWriter<W> {
        TraceWriter { out, host: host.replace(',', "_") }
    }

    /// Append one request; `response_ns` is recorded in 100 ns ticks.
    pub fn write(&mut self, r: &Request, response_ns: u64) -> std::io::Result<()> {
        let ty = match r.op {
            Op::Read => "Read",
            Op::Write => "Write",
        };
        writeln!(self.out, "{},{},0,{},{},{},{}", r.time_ns / 100, self.host, ty, r.offset, r.len, response_ns / 100)
    }

    pub fn flush(&mut self) -> std::io::Result<()> {
        self.out.flush()
    }

    pub fn into_inner(self) -> W {
        self.out
    }
}
