//! libCacheSim / CloudPhysics VSCSI block traces.
//!
//! ```text
//! version,time,op,size,lbn
//! 1,5633898,2a,512,42932745
//! ```
//!
//! * version: always 1;
//! * time: seconds (integer: the clock resolution is one second);
//! * op: SCSI opcode in hex.  Reads: 28 READ(10), 88 READ(16), and also
//!   08 READ(6), a8 READ(12); writes: 2a WRITE(10), 8a WRITE(16), and also
//!   0a WRITE(6), aa WRITE(12).  Anything else (35 SYNCHRONIZE CACHE, 12
//!   INQUIRY...) is a skipped op;
//! * size: bytes;
//! * lbn: 512-byte sectors.
//!
//! The format has no device field.  Because many requests share a
//! one-second timestamp, [`crate::TraceReader`] spreads the requests of each
//! second evenly within it (see there).

use crate::field::{commas, err, io, is_decimal, is_digits, is_header, mul, parse_hex, secs_field, show, text, u64_field, FieldError, Line};
use crate::Op;

pub(crate) const HEADER: &[&str] = &["version", "time", "op", "size", "lbn"];
pub(crate) const SHAPE: &str = "cloudphysics: header `version,time,op,size,lbn` or 5 comma fields `1,seconds,hex-opcode,bytes,sector`";

/// The SCSI opcode's direction, if it is a read or write.
pub(crate) fn scsi_op(code: u64) -> Option<Op> {
    match code {
        0x08 | 0x28 | 0x88 | 0xa8 => Some(Op::Read),
        0x0a | 0x2a | 0x8a | 0xaa => Some(Op::Write),
        _ => None,
    }
}

pub(crate) fn parse(line: &[u8]) -> Result<Line<'_>, FieldError> {
    if is_header(line, HEADER) {
        return Ok(Line::Skip);
    }
    let mut f = commas(line);
    let _version = text("version", f.next())?;
    let time_ns = secs_field("time", f.next())?;
    let opcode = text("op", f.next())?;
    let code = parse_hex(opcode).ok_or_else(|| err("op", format!("invalid SCSI opcode (hex) {}", show(opcode))))?;
    let size = u64_field("size", f.next())?;
    let lbn = u64_field("lbn", f.next())?;
    match scsi_op(code) {
        Some(op) => io(time_ns, op, mul("lbn", lbn, 512)?, size, None, "size"),
        None => Ok(Line::Other { device: None }),
    }
}

pub(crate) fn shape(line: &[u8]) -> bool {
    let mut f = commas(line);
    f.next().is_some_and(is_digits)
        && f.next().is_some_and(is_decimal)
        && f.next().is_some_and(|o| o.len() <= 4 && parse_hex(o).is_some())
        && f.next().is_some_and(is_digits)
        && f.next().is_some_and(is_digits)
}
