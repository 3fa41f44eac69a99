//! Allocation-free helpers shared by the line parsers: field splitting,
//! number parsing and the per-line result type.
//!
//! Parsers work on raw bytes (a trace line need not be valid UTF-8); only the
//! error path allocates.

use crate::{Op, Request};

/// What one line holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Line<'a> {
    /// A read or write.  `req.time_ns` is absolute, as the trace counts it.
    Io { req: Request, device: Option<&'a [u8]> },
    /// A valid request that is neither a read nor a write (flush, trim,
    /// other SCSI opcodes, zero-length transfers...).
    Other { device: Option<&'a [u8]> },
    /// Header, comment, blank, or an event kind that is not replayed.
    Skip,
    /// End of the request section (blkparse summary): stop reading.
    End,
    /// fio v2 `wait`: requests after this line are at `time_ns`.
    Clock { time_ns: u64 },
}

/// A field that did not parse.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FieldError {
    pub field: &'static str,
    pub message: String,
}

pub(crate) fn err(field: &'static str, message: impl Into<String>) -> FieldError {
    FieldError { field, message: message.into() }
}

/// A field's text for an error message: lossy UTF-8, quoted, at most 40 chars.
pub(crate) fn show(b: &[u8]) -> String {
    let s = String::from_utf8_lossy(b);
    let mut out: String = s.chars().take(40).collect();
    if s.chars().count() > 40 {
        out.push('…');
    }
    format!("{out:?}")
}

pub(crate) fn trim(mut b: &[u8]) -> &[u8] {
    while let [first, rest @ ..] = b {
        if first.is_ascii_whitespace() {
            b = rest;
        } else {
            break;
        }
    }
    while let [rest @ .., last] = b {
        if last.is_ascii_whitespace() {
            b = rest;
        } else {
            break;
        }
    }
    b
}

/// Comma-separated fields, each trimmed of surrounding whitespace.
pub(crate) struct Commas<'a> {
    rest: Option<&'a [u8]>,
}

pub(crate) fn commas(line: &[u8]) -> Commas<'_> {
    Commas { rest: Some(line) }
}

impl<'a> Iterator for Commas<'a> {
    type Item = &'a [u8];
    #[inline]
    fn next(&mut self) -> Option<&'a [u8]> {
        let rest = self.rest?;
        match rest.iter().position(|&c| c == b',') {
            Some(i) => {
                self.rest = Some(&rest[i + 1..]);
                Some(trim(&rest[..i]))
            }
            None => {
                self.rest = None;
                Some(trim(rest))
            }
        }
    }
}

/// Whitespace-separated words.
pub(crate) struct Words<'a> {
    rest: &'a [u8],
}

pub(crate) fn words(line: &[u8]) -> Words<'_> {
    Words { rest: line }
}

impl<'a> Iterator for Words<'a> {
    type Item = &'a [u8];
    #[inline]
    fn next(&mut self) -> Option<&'a [u8]> {
        let start = self.rest.iter().position(|c| !c.is_ascii_whitespace())?;
        let rest = &self.rest[start..];
        let end = rest.iter().position(|c| c.is_ascii_whitespace()).unwrap_or(rest.len());
        self.rest = &rest[end..];
        Some(&rest[..end])
    }
}

/// A present, non-empty field.
#[inline]
pub(crate) fn text<'a>(field: &'static str, f: Option<&'a [u8]>) -> Result<&'a [u8], FieldError> {
    match f {
        Some(b) if !b.is_empty() => Ok(b),
        Some(_) => Err(err(field, "empty")),
        None => Err(err(field, "missing")),
    }
}

/// Decimal digits only, into a u64.
#[inline]
pub(crate) fn parse_u64(b: &[u8]) -> Option<u64> {
    if b.is_empty() || b.len() > 20 {
        return None;
    }
    let mut v: u64 = 0;
    if b.len() < 20 {
        // 19 digits cannot overflow.
        for &c in b {
            let d = c.wrapping_sub(b'0');
            if d > 9 {
                return None;
            }
            v = v * 10 + d as u64;
        }
        return Some(v);
    }
    for &c in b {
        let d = c.wrapping_sub(b'0');
        if d > 9 {
            return None;
        }
        v = v.checked_mul(10)?.checked_add(d as u64)?;
    }
    Some(v)
}

#[inline]
pub(crate) fn u64_field(field: &'static str, f: Option<&[u8]>) -> Result<u64, FieldError> {
    let b = text(field, f)?;
    parse_u64(b).ok_or_else(|| bad_number(field, b))
}

fn bad_number(field: &'static str, b: &[u8]) -> FieldError {
    if !b.is_empty() && b.iter().all(u8::is_ascii_digit) {
        err(field, format!("number too large {}", show(b)))
    } else {
        err(field, format!("invalid number {}", show(b)))
    }
}

/// Hexadecimal digits (optional `0x`), into a u64.
pub(crate) fn parse_hex(b: &[u8]) -> Option<u64> {
    let b = b.strip_prefix(b"0x").or_else(|| b.strip_prefix(b"0X")).unwrap_or(b);
    if b.is_empty() || b.len() > 16 {
        return None;
    }
    let mut v: u64 = 0;
    for &c in b {
        let d = (c as char).to_digit(16)?;
        v = (v << 4) | d as u64;
    }
    Some(v)
}

/// Seconds as a decimal (`12`, `0.551706`, `.5`, `1.5e-3`) into whole
/// nanoseconds.  Plain decimals are converted exactly (digits past the
/// ninth decimal place are dropped); exponent notation goes through f64.
pub(crate) fn parse_secs(b: &[u8]) -> Option<u64> {
    let (int, frac) = match b.iter().position(|&c| c == b'.') {
        Some(i) => (&b[..i], &b[i + 1..]),
        None => (b, &b[..0]),
    };
    let digits = |s: &[u8]| s.iter().all(u8::is_ascii_digit);
    if (int.is_empty() && frac.is_empty()) || !digits(int) || !digits(frac) {
        return parse_secs_float(b);
    }
    let whole = if int.is_empty() { 0 } else { parse_u64(int)? };
    let mut ns: u64 = 0;
    for i in 0..9 {
        ns = ns * 10 + frac.get(i).map_or(0, |c| (c - b'0') as u64);
    }
    whole.checked_mul(1_000_000_000)?.checked_add(ns)
}

fn parse_secs_float(b: &[u8]) -> Option<u64> {
    let s = std::str::from_utf8(b).ok()?;
    if !s.bytes().any(|c| c == b'e' || c == b'E') {
        return None;
    }
    let v: f64 = s.parse().ok()?;
    let ns = v * 1e9;
    (ns.is_finite() && ns >= 0.0 && ns < u64::MAX as f64).then(|| ns.round() as u64)
}

pub(crate) fn secs_field(field: &'static str, f: Option<&[u8]>) -> Result<u64, FieldError> {
    let b = text(field, f)?;
    parse_secs(b).ok_or_else(|| {
        if b.first() == Some(&b'-') {
            err(field, format!("negative time {}", show(b)))
        } else if is_plain_decimal(b) {
            err(field, format!("time too large {} (seconds past 2^64 ns; not seconds?)", show(b)))
        } else {
            err(field, format!("invalid time in seconds {}", show(b)))
        }
    })
}

/// Digits with at most one `.` among them (what [`parse_secs`] only
/// refuses when it is too large).
fn is_plain_decimal(b: &[u8]) -> bool {
    b.iter().any(u8::is_ascii_digit) && b.iter().all(|&c| c.is_ascii_digit() || c == b'.') && b.iter().filter(|&&c| c == b'.').count() <= 1
}

/// The end of a line of at most `max` fields: a further field (even an
/// empty one, after a trailing comma) is an error.
pub(crate) fn no_more<'a>(mut rest: impl Iterator<Item = &'a [u8]>, max: usize) -> Result<(), FieldError> {
    match rest.next() {
        None => Ok(()),
        Some(x) => Err(err("line", format!("more than {max} fields (extra {})", show(x)))),
    }
}

#[inline]
pub(crate) fn mul(field: &'static str, a: u64, b: u64) -> Result<u64, FieldError> {
    a.checked_mul(b).ok_or_else(|| err(field, format!("value too large ({a} x {b} overflows)")))
}

/// Build the line for a request: a zero-length transfer carries no data and
/// counts as another op; an extent past 2^64 bytes is an error.
#[inline]
pub(crate) fn io<'a>(time_ns: u64, op: Op, offset: u64, len: u64, device: Option<&'a [u8]>, len_field: &'static str) -> Result<Line<'a>, FieldError> {
    if len == 0 {
        return Ok(Line::Other { device });
    }
    if offset.checked_add(len).is_none() {
        return Err(err(len_field, format!("offset {offset} + length {len} overflows")));
    }
    Ok(Line::Io { req: Request { time_ns, op, offset, len }, device })
}

/// Does `line` start with the header `names` (comma-separated, any case)?
pub(crate) fn is_header(line: &[u8], names: &[&str]) -> bool {
    if !line.first().is_some_and(u8::is_ascii_alphabetic) {
        return false;
    }
    let mut f = commas(line);
    names.iter().take(2).all(|n| f.next().is_some_and(|x| x.eq_ignore_ascii_case(n.as_bytes())))
}

/// `r`/`R` or `w`/`W`.
#[inline]
pub(crate) fn rw_letter(b: &[u8]) -> Option<Op> {
    match b {
        b"r" | b"R" => Some(Op::Read),
        b"w" | b"W" => Some(Op::Write),
        _ => None,
    }
}

pub(crate) fn is_digits(b: &[u8]) -> bool {
    !b.is_empty() && b.iter().all(u8::is_ascii_digit)
}

pub(crate) fn is_decimal(b: &[u8]) -> bool {
    parse_secs(b).is_some()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers() {
        assert_eq!(parse_u64(b"0"), Some(0));
        assert_eq!(parse_u64(b"18446744073709551615"), Some(u64::MAX));
        assert_eq!(parse_u64(b"18446744073709551616"), None);
        assert_eq!(parse_u64(b"12x"), None);
        assert_eq!(parse_u64(b""), None);
        assert_eq!(parse_u64(b"-1"), None);
        assert_eq!(parse_hex(b"2a"), Some(0x2a));
        assert_eq!(parse_hex(b"0x8A"), Some(0x8a));
        assert_eq!(parse_hex(b"g"), None);
        assert_eq!(u64_field("size", Some(b"12x")).unwrap_err().message, "invalid number \"12x\"");
        assert_eq!(u64_field("size", None).unwrap_err().message, "missing");
    }

    #[test]
    fn seconds() {
        assert_eq!(parse_secs(b"0.551706"), Some(551_706_000));
        assert_eq!(parse_secs(b"12"), Some(12_000_000_000));
        assert_eq!(parse_secs(b"12."), Some(12_000_000_000));
        assert_eq!(parse_secs(b".5"), Some(500_000_000));
        assert_eq!(parse_secs(b"0.0000000019"), Some(1));
        assert_eq!(parse_secs(b"1.5e-3"), Some(1_500_000));
        assert_eq!(parse_secs(b"."), None);
        assert_eq!(parse_secs(b"-1"), None);
        assert_eq!(parse_secs(b"1e300"), None);
        assert_eq!(parse_secs(b"nan"), None);
        assert_eq!(parse_secs(b"99999999999999999999"), None);
        assert_eq!(secs_field("t", Some(b"1538323200000")).unwrap_err().message, "time too large \"1538323200000\" (seconds past 2^64 ns; not seconds?)");
        assert_eq!(secs_field("t", Some(b"1.2.3")).unwrap_err().message, "invalid time in seconds \"1.2.3\"");
        assert_eq!(secs_field("t", Some(b".")).unwrap_err().message, "invalid time in seconds \".\"");
    }

    #[test]
    fn splitting() {
        let v: Vec<&[u8]> = commas(b" a , b,,c ").collect();
        assert_eq!(v, vec![&b"a"[..], b"b", b"", b"c"]);
        let v: Vec<&[u8]> = words(b"  8,0  3 Q\tWS  ").collect();
        assert_eq!(v, vec![&b"8,0"[..], b"3", b"Q", b"WS"]);
        assert_eq!(trim(b" \t\r\n"), b"");
        assert_eq!(no_more(commas(b"a,b").skip(2), 2), Ok(()));
        assert_eq!(no_more(commas(b"a,b,").skip(2), 2).unwrap_err().message, "more than 2 fields (extra \"\")");
        assert_eq!(no_more(words(b"a b  c d").skip(2), 2).unwrap_err().message, "more than 2 fields (extra \"c\")");
    }
}
