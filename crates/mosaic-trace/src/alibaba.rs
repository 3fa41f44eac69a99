//! Alibaba cloud block traces (2020).
//!
//! ```text
//! device_id,opcode,offset,length,timestamp
//! 3,W,1024,4096,1577808000000000
//! ```
//!
//! * device_id: the device filter;
//! * opcode: `R` or `W`, any case;
//! * offset, length: bytes;
//! * timestamp: microseconds.
//!
//! A line has exactly these 5 fields: a 6th is an error.

use crate::field::{commas, err, io, is_digits, is_header, mul, no_more, rw_letter, show, text, u64_field, FieldError, Line};

pub(crate) const HEADER: &[&str] = &["device_id", "opcode", "offset", "length", "timestamp"];
pub(crate) const SHAPE: &str = "alibaba: 5 comma fields `device,R|W,offset,length,microseconds`";

pub(crate) fn parse(line: &[u8]) -> Result<Line<'_>, FieldError> {
    if is_header(line, HEADER) {
        return Ok(Line::Skip);
    }
    let mut f = commas(line);
    let dev = text("device_id", f.next())?;
    let opcode = text("opcode", f.next())?;
    let op = rw_letter(opcode).ok_or_else(|| err("opcode", format!("expected R or W, got {}", show(opcode))))?;
    let offset = u64_field("offset", f.next())?;
    let len = u64_field("length", f.next())?;
    let us = u64_field("timestamp", f.next())?;
    no_more(f, 5)?;
    io(mul("timestamp", us, 1000)?, op, offset, len, Some(dev), "length")
}

pub(crate) fn shape(line: &[u8]) -> bool {
    let mut f = commas(line);
    f.next().is_some_and(|d| !d.is_empty())
        && f.next().is_some_and(|o| rw_letter(o).is_some())
        && f.next().is_some_and(is_digits)
        && f.next().is_some_and(is_digits)
        && f.next().is_some_and(is_digits)
}
