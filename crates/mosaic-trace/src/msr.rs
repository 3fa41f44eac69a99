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
//!
//! A line has 6 or 7 fields: an 8th is an error.

use crate::field::{commas, err, io, is_digits, is_header, mul, no_more, show, text, u64_field, FieldError, Line};
use crate::{Op, Request};

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
    let _response = f.next();
    no_more(f, 7)?;
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
    // Past the size: the response time or nothing, never looked at; a
    // further field is for `general` to report.
    if rest.iter().skip(1).any(|&c| c == b',') {
        return None;
    }
    let size = digits(size)?;
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

/// The common line at the start of `buf` (the reader's buffer) in one
/// pass: the request, its disk and the bytes the line takes with its
/// `\n`, as [`parse`] reads the line when it is an I/O.  None when the
/// line is anything else, does not end in `buf` or ends within 8 bytes
/// of its end; the reader then finds the line's end and parses it.
#[inline(always)]
pub(crate) fn plain_line(buf: &[u8]) -> Option<(Request, &[u8], usize)> {
    let (ticks, b',', rest) = number8(buf)? else { return None };
    let (_host, rest) = field8(rest)?;
    let (disk, rest) = disk8(rest)?;
    let (op, rest) = read_write_comma(rest)?;
    let (offset, b',', rest) = number8(rest)? else { return None };
    let (len, rest) = match number8(rest)? {
        (len, b'\n', rest) => (len, rest),
        (len, b',', rest) => (len, rest.get(last_field8(rest)? + 1..)?),
        _ => return None,
    };
    // A zero length or an extent past 2^64 is for `io` to report.
    offset.checked_add(len)?;
    let req = Request { time_ns: ticks.checked_mul(100)?, op, offset, len };
    (len != 0).then_some((req, disk, buf.len() - rest.len()))
}

const ONES: u64 = 0x0101_0101_0101_0101;
const HIGH: u64 = 0x8080_8080_8080_8080;
const POW10: [u64; 9] = [1, 10, 100, 1_000, 10_000, 100_000, 1_000_000, 10_000_000, 100_000_000];

/// The first 8 bytes of `b` as a little-endian word.
#[inline(always)]
fn load8(b: &[u8]) -> Option<u64> {
    Some(u64::from_le_bytes(*b.first_chunk::<8>()?))
}

/// The ASCII digits leading the word `w` (the first in its low byte), up
/// to eight: how many, and their value.
#[inline(always)]
fn digits8(w: u64) -> (usize, u64) {
    let x = w ^ (ONES * b'0' as u64);
    // A byte of x over 9 sets its flag bit (a carry out of it only
    // reaches the bytes after it).
    let non = (x | x.wrapping_add(ONES * 0x76)) & HIGH;
    let n = (non.trailing_zeros() / 8) as usize;
    if n == 0 {
        return (0, 0);
    }
    // The digits to the top bytes, zeros before them; then pairs, fours,
    // eights of digits (no lane overflows).
    let x = x << (64 - 8 * n);
    let x = (x.wrapping_mul(10).wrapping_add(x >> 8)) & 0x00FF_00FF_00FF_00FF;
    let x = (x.wrapping_mul(100).wrapping_add(x >> 16)) & 0x0000_FFFF_0000_FFFF;
    let x = (x.wrapping_mul(10_000).wrapping_add(x >> 32)) & 0xFFFF_FFFF;
    (n, x)
}

/// 1 to 19 digits leading `b`, eight at a time: the number, the byte
/// after the digits and the rest of `b` after that byte.
#[inline(always)]
fn number8(b: &[u8]) -> Option<(u64, u8, &[u8])> {
    let w = load8(b)?;
    let (n, v) = digits8(w);
    if n < 8 {
        return (n > 0).then_some((v, (w >> (8 * n)) as u8, b.get(n + 1..)?));
    }
    more_digits8(v, &b[8..])
}

/// [`number8`] past its first 8 digits `v`: 0 to 11 more leading `b`.
#[inline(always)]
fn more_digits8(v: u64, b: &[u8]) -> Option<(u64, u8, &[u8])> {
    let w = load8(b)?;
    let (n, x) = digits8(w);
    let v = v.wrapping_mul(POW10[n]).wrapping_add(x);
    if n < 8 {
        return Some((v, (w >> (8 * n)) as u8, b.get(n + 1..)?));
    }
    let w = load8(&b[8..])?;
    let (n, x) = digits8(w);
    // 20 digits and more may not fit.
    if n > 3 {
        return None;
    }
    Some((v.wrapping_mul(POW10[n]).wrapping_add(x), (w >> (8 * n)) as u8, b.get(9 + n..)?))
}

/// The field leading `b` up to its comma, eight bytes at a time, and the
/// rest after the comma; None when the line ends first.
#[inline(always)]
fn field8(b: &[u8]) -> Option<(&[u8], &[u8])> {
    match field_end8(b)? {
        (end, b',') => Some((&b[..end], &b[end + 1..])),
        _ => None,
    }
}

/// The index of the first comma or newline in `b` and which it is, eight
/// bytes at a time; None within 8 bytes of the end of `b`.
#[inline(always)]
fn field_end8(b: &[u8]) -> Option<(usize, u8)> {
    let mut at = 0;
    loop {
        let w = load8(b.get(at..)?)?;
        let (c, n) = (w ^ (ONES * b',' as u64), w ^ (ONES * b'\n' as u64));
        // The lowest flag is the first comma or newline (see find_newline).
        let hit = ((c.wrapping_sub(ONES) & !c) | (n.wrapping_sub(ONES) & !n)) & HIGH;
        if hit != 0 {
            let end = at + (hit.trailing_zeros() / 8) as usize;
            return Some((end, b[end]));
        }
        at += 8;
    }
}

/// The index of the `\n` ending the line's last field, leading `b`, eight
/// bytes at a time; None at a comma first (a further field) or within 8
/// bytes of the end of `b`.
#[inline(always)]
fn last_field8(b: &[u8]) -> Option<usize> {
    let (end, _) = field_end8(b)?;
    (b[end] == b'\n').then_some(end)
}

/// The disk number field leading `b` (non-empty, not padded) and the rest
/// after its comma.
#[inline(always)]
fn disk8(b: &[u8]) -> Option<(&[u8], &[u8])> {
    let (disk, rest) = match b {
        // One character, the usual.
        [c, b',', rest @ ..] if *c != b',' => (&b[..1], rest),
        _ => field8(b)?,
    };
    match disk {
        [first, .., last] | [first @ last] if !first.is_ascii_whitespace() && !last.is_ascii_whitespace() => Some((disk, rest)),
        _ => None,
    }
}

/// `Read` or `Write` (any case) and its comma leading `b`; the rest after
/// the comma.
#[inline(always)]
fn read_write_comma(b: &[u8]) -> Option<(Op, &[u8])> {
    if let Some(rest) = b.strip_prefix(b"Write,") {
        return Some((Op::Write, rest));
    }
    if let Some(rest) = b.strip_prefix(b"Read,") {
        return Some((Op::Read, rest));
    }
    let (ty, rest) = field8(b)?;
    Some((read_write(ty)?, rest))
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
            b"1,h,12,READ,0,512,3,4",
            b"1,h,12,READ,0,512,,",
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

    /// What the one pass makes of the line leading `buf`, checked against
    /// `parse` of that line: the same request and disk, or nothing.
    fn one_pass(buf: &[u8]) -> bool {
        let Some((req, disk, used)) = plain_line(buf) else { return false };
        let end = buf.iter().position(|&c| c == b'\n').expect("a whole line");
        assert_eq!(used, end + 1, "{}", String::from_utf8_lossy(buf));
        assert!(buf[0].is_ascii_digit(), "no BOM, blank, comment or padding before");
        let line = crate::field::trim(&buf[..end]);
        assert_eq!(parse(line), Ok(Line::Io { req, device: Some(disk) }), "{}", String::from_utf8_lossy(buf));
        true
    }

    /// The one pass over the reader's buffer reads a line as `parse`
    /// reads it, or leaves it: each field's variants (digits 1 to 20,
    /// 8 and 16 digits, bytes next to the digits and above 0x7f, padding,
    /// CR, newlines inside fields) one at a time and in random lines,
    /// followed by another line, by newlines or by nothing.
    #[test]
    fn one_pass_lines_read_as_parse_reads_them() {
        let ticks: &[&[u8]] = &[b"0", b"7", b"1234567", b"12345678", b"123456789", b"1234567890123456", b"12345678901234567", b"128166372003061629", b"184467440737095516", b"184467440737095517", b"1234567890123456789", b"00000000000000000001", b"", b"12x", b"1/2", b"1:2", b"\xb0", b" 1", b"1 ", b"1\n2", b"\xff1"];
        let hosts: &[&[u8]] = &[b"bench", b"", b"h", b"wdev", b"a-long-host-name-17", b"a b", b"h\r", b"h\n", b"\xef\xbb\xbf"];
        let disks: &[&[u8]] = &[b"0", b"12", b"", b" 0", b"0 ", b"\t", b"x", b"\xff", b"\n", b"0\n", b"1234567890"];
        let types: &[&[u8]] = &[b"Write", b"Read", b"write", b"READ", b"wRiTe", b"Wr", b"Trim", b"Writex", b"", b"Write ", b"Rea\nd"];
        let offsets: &[&[u8]] = &[b"107183718400", b"0", b"12345678", b"1234567890123456", b"18446744073709551615", b"18446744073709551614", b"9999999999999999999", b"", b"12x", b"1 2", b"1\n"];
        let sizes: &[&[u8]] = &[b"4096", b"0", b"1", b"12345678", b"123456789", b"1234567890123456789", b"12345678901234567890", b"", b"4096 ", b"40x", b"4096\r", b" 4096"];
        let tails: &[&[u8]] = &[b"", b",0", b",1125", b",", b",1125\r", b"\r", b" ", b",x,y", b",\xff", b",a-long-response-time-field"];
        let after: &[&[u8]] = &[b"\n1,h,0,Read,1,2\n", b"\n", b"\n\n\n\n\n\n\n\n\n", b"", b"12345678"];
        let fields = [ticks, hosts, disks, types, offsets, sizes, tails];
        let line = |pick: [usize; 7]| {
            let mut l = Vec::new();
            for (f, (&i, v)) in pick.iter().zip(fields).enumerate() {
                if f > 0 && f < 6 {
                    l.push(b',');
                }
                l.extend_from_slice(v[i]);
            }
            l
        };
        let mut read = 0;
        let mut check = |pick: [usize; 7]| {
            for a in after {
                let mut buf = line(pick);
                buf.extend_from_slice(a);
                if one_pass(&buf) {
                    read += 1;
                }
                if !buf.contains(&b'\n') {
                    assert_eq!(plain_line(&buf), None);
                }
            }
        };
        for f in 0..fields.len() {
            for i in 0..fields[f].len() {
                let mut pick = [0; 7];
                pick[f] = i;
                check(pick);
            }
        }
        let mut x: u64 = 1;
        for _ in 0..20_000 {
            let mut pick = [0; 7];
            for (p, v) in pick.iter_mut().zip(fields) {
                x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                *p = if x >> 62 == 0 { (x >> 33) as usize % v.len() } else { 0 };
            }
            check(pick);
        }
        assert!(read > 10_000, "{read}");
        for l in [&b"128166372003061629,wdev,0,Write,3872768,4096,1125\n1,h,0,Read,1,2\n"[..], b"0,bench,0,Write,4096,4096,0\n1234567", b"1,h,12,READ,0,512,\n        "] {
            assert!(one_pass(l), "{}", String::from_utf8_lossy(l));
        }
    }

    /// Eight digits at a time: how many lead a word and their value,
    /// whatever byte follows them.
    #[test]
    fn eight_digits_at_a_time() {
        for n in 0..=8 {
            for next in 0..=255u8 {
                if next.is_ascii_digit() {
                    continue;
                }
                let mut w = *b"98765432";
                w[..n].copy_from_slice(&b"90817263"[..n]);
                if n < 8 {
                    w[n] = next;
                }
                let want = (n, if n == 0 { 0 } else { std::str::from_utf8(&w[..n]).unwrap().parse().unwrap() });
                assert_eq!(digits8(u64::from_le_bytes(w)), want, "{w:?}");
            }
        }
        for n in 1..=22 {
            let digits: Vec<u8> = (0..n).map(|i| b"9081726354"[i % 10]).collect();
            let mut b = digits.clone();
            b.extend_from_slice(b",123456789");
            let want = std::str::from_utf8(&digits).unwrap().parse::<u64>().ok().filter(|_| n < 20);
            assert_eq!(number8(&b).map(|(v, c, rest)| (v, c, rest.len())), want.map(|v| (v, b',', 9)), "{n} digits");
        }
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
            ("128166372003061629,wdev,0,Write,3872768,4096,1125,junk", "t:2: field 'line': more than 7 fields (extra \"junk\")"),
            ("128166372003061629,wdev,0,Write,3872768,4096,1125,", "t:2: field 'line': more than 7 fields (extra \"\")"),
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
