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
    if let Some(l) = plain(line) {
        return Ok(l);
    }
    if is_header(line, HEADER) {
        return Ok(Line::Skip);
    }
    general(line)
}

/// A line field by field, with an error that names the bad field.
fn general(line: &[u8]) -> Result<Line<'_>, FieldError> {
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

/// The common line in one pass: digits, no spaces around fields, nothing
/// out of range.  None when the line is anything else; [`parse`] then
/// takes it field by field (and names what is wrong).
#[inline]
fn plain(line: &[u8]) -> Option<Line<'_>> {
    let (ticks, rest) = number(line)?;
    let (_host, rest) = word(rest)?;
    let (disk, rest) = word(rest)?;
    let (ty, rest) = word(rest)?;
    let op = read_write(ty)?;
    let (offset, rest) = number(rest)?;
    let (size, rest) = match rest.iter().position(|&c| c == b',') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, &rest[..0]),
    };
    // Past the size: the response time or nothing, never looked at.
    let (size, _) = (digits(size)?, rest);
    if disk.is_empty() || disk[0].is_ascii_whitespace() || disk[disk.len() - 1].is_ascii_whitespace() {
        return None;
    }
    io(ticks.checked_mul(100)?, op, offset, size, Some(disk), "Size").ok()
}

/// A field of 1 to 19 digits and its comma; the rest of the line.
#[inline]
fn number(b: &[u8]) -> Option<(u64, &[u8])> {
    let (mut v, mut i) = (0u64, 0);
    while let Some(&c) = b.get(i) {
        let d = c.wrapping_sub(b'0');
        if d > 9 {
            break;
        }
        v = v.wrapping_mul(10).wrapping_add(d as u64);
        i += 1;
    }
    // 1 to 19 digits cannot overflow (checked after the fact).
    (i > 0 && i < 20 && b.get(i) == Some(&b',')).then(|| (v, &b[i + 1..]))
}

/// 1 to 19 digits, the whole of `b`.
#[inline]
fn digits(b: &[u8]) -> Option<u64> {
    if b.is_empty() || b.len() > 19 {
        return None;
    }
    b.iter().try_fold(0u64, |v, &c| c.is_ascii_digit().then(|| v * 10 + (c - b'0') as u64))
}

/// A field up to its comma (as is, untrimmed); the rest after the comma.
#[inline]
fn word(b: &[u8]) -> Option<(&[u8], &[u8])> {
    let i = b.iter().position(|&c| c == b',')?;
    Some((&b[..i], &b[i + 1..]))
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The one-pass reading of a line is the field-by-field one.
    #[test]
    fn plain_lines_read_as_the_general_parser_reads_them() {
        let lines: &[&[u8]] = &[
            b"128166372003061629,wdev,0,Write,3872768,4096,1125",
            b"128166372003061629,wdev,0,Read,3872768,4096",
            b"0,bench,0,write,4096,4096,0",
            b"1,h,12,READ,0,512,",
            b"1,,1,Read,0,512",
            b"9999999999999999999,h,0,Read,1,2,3",
            b"184467440737095517,h,0,Read,1,2,3",
            b"1,h,0,Read,18446744073709551615,1",
            b"1,h,0,Read,1,0",
            b"1,h, 0,Read,1,2",
            b"1,h,0 ,Read,1,2",
            b"1,h,0, Read,1,2",
            b"1,h,0,Read, 1,2",
            b"1,h,0,Read,1,2 ",
            b"1,h,,Read,1,2",
            b"1,h,0,Trim,1,2",
            b"12x,h,0,Read,1,2",
            b",h,0,Read,1,2",
            b"1,h,0,Read,1",
            b"1,h,0,Read,1,",
            b"1,h,0,Read",
            b"12345678901234567890,h,0,Read,1,2",
            b"Timestamp,Hostname,DiskNumber,Type,Offset,Size,ResponseTime",
        ];
        for &l in lines {
            let general = general(l);
            if let Some(fast) = plain(l) {
                assert_eq!(Ok(fast), general, "{}", String::from_utf8_lossy(l));
            }
            // Whatever the one pass leaves, parse() still reads the general way.
            if !is_header(l, HEADER) {
                assert_eq!(parse(l), general, "{}", String::from_utf8_lossy(l));
            }
        }
        assert!(plain(b"128166372003061629,wdev,0,Write,3872768,4096,1125").is_some());
        assert!(plain(b"1,h,0 ,Read,1,2").is_none());
    }

    /// Malformed lines as long as real ones (the one-pass reading
    /// declines them) still name the line and the field.
    #[test]
    fn malformed_long_lines_keep_their_errors() {
        let good = "128166372003061629,wdev,0,Write,3872768,4096,1125\n";
        let cases = [
            ("128166372003061629,wdev,0,Write,387x768,4096,1125", "t:2: field 'Offset': invalid number \"387x768\""),
            ("1281663720030616x9,wdev,0,Write,3872768,4096,1125", "t:2: field 'Timestamp': invalid number \"1281663720030616x9\""),
            ("128166372003061629,wdev,0,Write,3872768,40:6,1125", "t:2: field 'Size': invalid number \"40:6\""),
            ("128166372003061629,wdev,0,Wrxte,3872768,4096,1125", "t:2: field 'Type': expected Read or Write, got \"Wrxte\""),
            ("128166372003061629,wdev,0,Write,3872768", "t:2: field 'Size': missing"),
            ("128166372003061629000,wdev,0,Write,3872768,4096,1125", "t:2: field 'Timestamp': number too large \"128166372003061629000\""),
        ];
        for (line, want) in cases {
            let text = format!("{good}{line}\n{good}");
            let opts = crate::TraceOptions { format: Some(crate::Format::Msr), ..Default::default() };
            let mut r = crate::from_reader("t", std::io::Cursor::new(text.into_bytes()), &opts).unwrap();
            assert!(r.next().unwrap().is_ok());
            let got = r.next().unwrap().map_err(|e| e.to_string());
            assert_eq!(got, Err(want.to_string()), "{line}");
        }
    }
}
