//! SPC / UMass traces (Financial1, Financial2, WebSearch1-3).
//!
//! ```text
//! ASU,LBA,Size,Opcode,Timestamp
//! 0,20941264,8192,W,0.551706
//! 1,20939840,8192,r,0.554041
//! ```
//!
//! * ASU: application storage unit, the device filter;
//! * LBA: 512-byte sectors (offset = LBA * 512);
//! * Size: bytes;
//! * Opcode: `r` or `w`, any case;
//! * Timestamp: seconds, decimal.
//!
//! Extra trailing fields are allowed and ignored: some published SPC files
//! carry further columns (`0,303567,3584,w,0.000000,extra,cols`), so the
//! field count is not fixed.

use crate::field::{commas, io, is_decimal, is_digits, is_header, mul, rw_letter, secs_field, show, text, u64_field, err, FieldError, Line};

pub(crate) const HEADER: &[&str] = &["asu", "lba", "size", "opcode", "timestamp"];
pub(crate) const SHAPE: &str = "spc: 5+ comma fields `ASU,LBA,Size,r|w,seconds`";

pub(crate) fn parse(line: &[u8]) -> Result<Line<'_>, FieldError> {
    if is_header(line, HEADER) {
        return Ok(Line::Skip);
    }
    let mut f = commas(line);
    let asu = text("ASU", f.next())?;
    let lba = u64_field("LBA", f.next())?;
    let size = u64_field("Size", f.next())?;
    let opcode = text("Opcode", f.next())?;
    let op = rw_letter(opcode).ok_or_else(|| err("Opcode", format!("expected r or w, got {}", show(opcode))))?;
    let time_ns = secs_field("Timestamp", f.next())?;
    io(time_ns, op, mul("LBA", lba, 512)?, size, Some(asu), "Size")
}

pub(crate) fn shape(line: &[u8]) -> bool {
    let mut f = commas(line);
    f.next().is_some_and(is_digits)
        && f.next().is_some_and(is_digits)
        && f.next().is_some_and(is_digits)
        && f.next().is_some_and(|o| rw_letter(o).is_some())
        && f.next().is_some_and(is_decimal)
}
