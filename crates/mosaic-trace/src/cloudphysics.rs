//! libCacheSim / CloudPhysics VSCSI block traces.
//!
//! ```text
//! version,time,op,size,lbn
//! 1,5633898,2a,512,42932745
//! ```
//!
//! * version: always 1 (the format's only version; any other is an error);
//! * time: seconds (integer: the clock resolution is one second);
//! * op: SCSI opcode in hex, one byte.  Reads: 28 READ(10), 88 READ(16),
//!   and also 08 READ(6), a8 READ(12); writes: 2a WRITE(10), 8a WRITE(16),
//!   and also 0a WRITE(6), aa WRITE(12).  Any other opcode (35 SYNCHRONIZE
//!   CACHE, 12 INQUIRY...) is a skipped op; a value over `ff` is an error;
//! * size: bytes;
//! * lbn: 512-byte sectors.
//!
//! A line has exactly these 5 fields: a 6th is an error.  The format has
//! no device field.  Because many requests share a
//! one-second timestamp, [`crate::TraceReader`] spreads the requests of each
//! second evenly within it (see there).

use crate::field::{commas, err, io, is_decimal, is_digits, is_header, mul, no_more, parse_hex, secs_field, show, text, u64_field, FieldError, Line};
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
    let version = text("version", f.next())?;
    if version != b"1" {
        return Err(err("version", format!("expected 1 (the format's only version), got {}", show(version))));
    }
    let time_ns = secs_field("time", f.next())?;
    let opcode = text("op", f.next())?;
    let code = opcode_field(opcode)?;
    let size = u64_field("size", f.next())?;
    let lbn = u64_field("lbn", f.next())?;
    no_more(f, 5)?;
    match scsi_op(code) {
        Some(op) => io(time_ns, op, mul("lbn", lbn, 512)?, size, None, "size"),
        None => Ok(Line::Other { device: None }),
    }
}

/// A one-byte SCSI opcode in hex (optional `0x`).
fn opcode_field(opcode: &[u8]) -> Result<u64, FieldError> {
    match parse_hex(opcode) {
        Some(code) if code <= 0xff => Ok(code),
        Some(_) => Err(err("op", format!("not a SCSI opcode (one byte, hex) {}", show(opcode)))),
        None => Err(err("op", format!("invalid SCSI opcode (hex) {}", show(opcode)))),
    }
}

/// `1,seconds,opcode,bytes,sectors`: the version 1 and a one-byte opcode
/// keep other 5-number formats out (a Tencent line starts with its Unix
/// time, never 1).
pub(crate) fn shape(line: &[u8]) -> bool {
    let mut f = commas(line);
    f.next().is_some_and(|v| v == b"1")
        && f.next().is_some_and(is_decimal)
        && f.next().is_some_and(|o| o.len() <= 4 && parse_hex(o).is_some_and(|c| c <= 0xff))
        && f.next().is_some_and(is_digits)
        && f.next().is_some_and(is_digits)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_opcode_and_field_count() {
        let e = |l: &[u8]| parse(l).unwrap_err();
        assert_eq!(e(b"2,5,2a,512,8"), err("version", "expected 1 (the format's only version), got \"2\""));
        assert_eq!(e(b"1538323200,12345,8,1,1283"), err("version", "expected 1 (the format's only version), got \"1538323200\""));
        assert_eq!(e(b"1,5,12a,512,8"), err("op", "not a SCSI opcode (one byte, hex) \"12a\""));
        assert_eq!(e(b"1,5,2a,512,8,junk"), err("line", "more than 5 fields (extra \"junk\")"));
        assert_eq!(e(b"1,5,2a,512,8,"), err("line", "more than 5 fields (extra \"\")"));
        assert!(matches!(parse(b"1,5,0x2A,512,8"), Ok(Line::Io { .. })));
        assert_eq!(parse(b"1,5,35,0,0"), Ok(Line::Other { device: None }));
        assert_eq!(parse(b"1,5,ff,0,0"), Ok(Line::Other { device: None }));
    }
}
