//! MSR Cambridge traces (SNIA IOTTA).
//!
//! ```text
//! Timestamp,Hostname,DiskNumber,Type,Offset,Size,ResponseTime
//! 128166372003061629,wdev,0,Write,3872768,4096,1125
//! ```
//!
//! * Timestamp: Windows FILETIME, 100 ns ticks;
//! * DiskNumber: the device filter;
//! * Type: `Read` or `Write`, any case;
//! * Offset, Size: bytes;
//! * ResponseTime: 100 ns ticks, ignored (and optional).

use crate::field::{commas, err, io, is_digits, is_header, mul, show, text, u64_field, FieldError, Line};
use crate::Op;

pub(crate) const HEADER: &[&str] = &["timestamp", "hostname", "disknumber", "type", "offset", "size", "responsetime"];
pub(crate) const SHAPE: &str = "msr: 6-7 comma fields `ticks,host,disk,Read|Write,offset,size[,resp]`";

#[inline]
fn read_write(b: &[u8]) -> Option<Op> {
    if b.eq_ignore_ascii_case(b"write") {
        Some(Op::Write)
    } else if b.eq_ignore_ascii_case(b"read") {
        Some(Op::Read)
    } else {
        None
    }
}

pub(crate) fn parse(line: &[u8]) -> Result<Line<'_>, FieldError> {
    if is_header(line, HEADER) {
        return Ok(Line::Skip);
    }
    let mut f = commas(line);
    let ticks = u64_field("Timestamp", f.next())?;
    let _host = f.next().ok_or_else(|| err("Hostname", "missing"))?;
    let disk = text("DiskNumber", f.next())?;
    let ty = text("Type", f.next())?;
    let op = read_write(ty).ok_or_else(|| err("Type", format!("expected Read or Write, got {}", show(ty))))?;
    let offset = u64_field("Offset", f.next())?;
    let size = u64_field("Size", f.next())?;
    io(mul("Timestamp", ticks, 100)?, op, offset, size, Some(disk), "Size")
}

pub(crate) fn shape(line: &[u8]) -> bool {
    let mut f = commas(line);
    f.next().is_some_and(is_digits)
        && f.next().is_some()
        && f.next().is_some_and(is_digits)
        && f.next().is_some_and(|t| read_write(t).is_some())
        && f.next().is_some_and(is_digits)
        && f.next().is_some_and(is_digits)
}
