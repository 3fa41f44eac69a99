//! Tencent CBS (cloud block storage) traces.
//!
//! ```text
//! timestamp,offset,size,iotype,volume_id
//! 1538323200,12345,8,1,1283
//! ```
//!
//! * timestamp: seconds (decimals accepted);
//! * offset, size: 512-byte sectors;
//! * iotype: `0` = read, `1` = write;
//! * volume_id: the device filter.
//!
//! A line has exactly these 5 fields: a 6th is an error.

use crate::field::{commas, err, io, is_decimal, is_digits, is_header, mul, no_more, secs_field, show, text, u64_field, FieldError, Line};
use crate::Op;

pub(crate) const HEADER: &[&str] = &["timestamp", "offset", "size", "iotype", "volume_id"];
pub(crate) const SHAPE: &str = "tencent: 5 numeric comma fields `seconds,sector,sectors,0|1,volume`";

pub(crate) fn parse(line: &[u8]) -> Result<Line<'_>, FieldError> {
    if is_header(line, HEADER) {
        return Ok(Line::Skip);
    }
    let mut f = commas(line);
    let time_ns = secs_field("timestamp", f.next())?;
    let offset = u64_field("offset", f.next())?;
    let size = u64_field("size", f.next())?;
    let ty = text("iotype", f.next())?;
    let op = match ty {
        b"0" => Op::Read,
        b"1" => Op::Write,
        _ => return Err(err("iotype", format!("expected 0 (read) or 1 (write), got {}", show(ty)))),
    };
    let vol = text("volume_id", f.next())?;
    no_more(f, 5)?;
    io(time_ns, op, mul("offset", offset, 512)?, mul("size", size, 512)?, Some(vol), "size")
}

/// Five numbers, the 4th `0`/`1`.  A timestamp too large for seconds
/// (milliseconds?) still counts: the trace is then read as Tencent and
/// its first line says what is wrong, where a looser shape would take it.
pub(crate) fn shape(line: &[u8]) -> bool {
    let mut f = commas(line);
    f.next().is_some_and(|t| is_decimal(t) || is_digits(t))
        && f.next().is_some_and(is_digits)
        && f.next().is_some_and(is_digits)
        && f.next().is_some_and(|t| t == b"0" || t == b"1")
        && f.next().is_some_and(is_digits)
}
