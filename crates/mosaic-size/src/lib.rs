//! Byte sizes: the one grammar every size mosaic reads follows (command-line
//! flags, tier and range specs), and the one way it prints a size for a
//! person.  Units come from the `bytesize` crate; this module fixes the
//! choices that crate leaves open.
//!
//! # Grammar
//!
//! ```text
//! SIZE   = NUMBER [spaces] [UNIT]
//! NUMBER = DIGITS [ "." DIGITS ]
//! UNIT   = "B" | PREFIX [ "B" | "i" | "iB" ]        (any case)
//! PREFIX = "K" | "M" | "G" | "T" | "P" | "E"
//! ```
//!
//! * Every unit is binary (IEC): `K` = `KB` = `KiB` = 1024 bytes, `M` =
//!   1024 K, and so on up to `E`.  A bare number is bytes.  (`bytesize`
//!   itself reads `K` and `KB` as 1000; storage sizes here are always
//!   binary, so the suffix is mapped to its IEC unit before it is looked up.)
//! * Case does not matter: `64k`, `64K`, `64kib` and `64 KiB` are the same.
//! * A fraction is allowed when it comes to a whole number of bytes:
//!   `1.5G` and `0.5K` are fine, `0.3K` (307.2 bytes) is refused.
//! * Sizes are 64-bit: anything above 2^64 - 1 bytes (16 EiB) is refused,
//!   never wrapped or clamped.
//! * Examples: `4096`, `512B`, `64K`, `64KiB`, `1.5G`, `2 T`.
//!
//! # Printing
//!
//! [`human`] prints the largest binary unit with one decimal (`64.0 KiB`,
//! `1.5 GiB`) and sizes below 1 KiB in bytes (`512 B`).  [`short`] prints
//! the exact compact form that [`parse`] reads back (`64K`, `1M`, `1536`),
//! for labels such as table rows and scheme names.

use std::fmt;

/// The grammar in one line, for help texts.
pub const GRAMMAR: &str = "a number of bytes with an optional binary unit, any case: 4096, 512B, 64K (= 64KiB = 65536), 1.5G; K, M, G, T, P, E are powers of 1024";

use bytesize::{ByteSize, Unit};

/// Why a size was refused (the message names the input and the rule).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SizeError {
    input: String,
    reason: Reason,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Reason {
    Empty,
    Negative,
    NotANumber,
    UnknownUnit(String),
    NotWhole,
    TooLarge,
}

impl fmt::Display for SizeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = &self.input;
        match &self.reason {
            Reason::Empty => write!(f, "empty size: give a number of bytes with an optional unit, e.g. 4096, 64K, 1.5G"),
            Reason::Negative => write!(f, "bad size {s:?}: a size cannot be negative"),
            Reason::NotANumber => write!(f, "bad size {s:?}: expected a number of bytes with an optional unit (B, K, M, G, T, P, E), e.g. 4096, 64K, 1.5G"),
            Reason::UnknownUnit(u) => write!(f, "bad size {s:?}: unknown unit {u:?} (use B, K, M, G, T, P or E, optionally followed by B or iB; all are binary, K = 1024)"),
            Reason::NotWhole => write!(f, "bad size {s:?}: not a whole number of bytes"),
            Reason::TooLarge => write!(f, "size {s:?} is too large: at most 16 EiB - 1 byte (2^64 - 1) is allowed"),
        }
    }
}

impl std::error::Error for SizeError {}

/// Parse a size in the grammar of the module documentation.
pub fn parse(s: &str) -> Result<u64, SizeError> {
    let err = |reason| SizeError { input: s.to_string(), reason };
    let t = s.trim();
    if t.is_empty() {
        return Err(err(Reason::Empty));
    }
    if t.starts_with('-') {
        return Err(err(Reason::Negative));
    }
    let end = t.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(t.len());
    let (num, unit) = (&t[..end], t[end..].trim_start());
    let (int, frac) = num.split_once('.').unwrap_or((num, ""));
    if int.is_empty() || (num.contains('.') && frac.is_empty()) || frac.contains('.') {
        return Err(err(Reason::NotANumber));
    }
    let factor = unit_factor(unit).ok_or_else(|| err(Reason::UnknownUnit(unit.to_string())))?;
    let frac = frac.trim_end_matches('0');
    // Exact arithmetic: value = (int . frac) * factor, refused unless whole.
    let scale = u32::try_from(frac.len()).ok().and_then(|n| 10u128.checked_pow(n)).ok_or_else(|| err(Reason::NotWhole))?;
    let int: u128 = int.parse().map_err(|_| err(Reason::TooLarge))?;
    let frac: u128 = if frac.is_empty() { 0 } else { frac.parse().map_err(|_| err(Reason::NotWhole))? };
    let scaled = int.checked_mul(scale).and_then(|v| v.checked_add(frac)).and_then(|v| v.checked_mul(u128::from(factor))).ok_or_else(|| err(Reason::TooLarge))?;
    if scaled % scale != 0 {
        return Err(err(Reason::NotWhole));
    }
    u64::try_from(scaled / scale).map_err(|_| err(Reason::TooLarge))
}

/// Bytes per `unit` (empty: 1), every prefix binary; None when unknown.
fn unit_factor(unit: &str) -> Option<u64> {
    if unit.is_empty() {
        return Some(1);
    }
    let lower = unit.to_ascii_lowercase();
    let iec = if lower == "b" {
        "B"
    } else {
        let mut chars = lower.chars();
        let prefix = chars.next()?;
        if !matches!(chars.as_str(), "" | "b" | "i" | "ib") {
            return None;
        }
        match prefix {
            'k' => "KiB",
            'm' => "MiB",
            'g' => "GiB",
            't' => "TiB",
            'p' => "PiB",
            'e' => "EiB",
            _ => return None,
        }
    };
    let unit: Unit = iec.parse().ok()?;
    Some(unit * 1u64)
}

/// A size for a person: `512 B`, `64.0 KiB`, `1.5 GiB` (binary units, one
/// decimal).
pub fn human(bytes: u64) -> String {
    ByteSize(bytes).display().iec().to_string()
}

/// The exact compact form [`parse`] reads back: the largest binary unit
/// that divides `bytes` (`64K`, `3M`, `1G`), else plain bytes (`1536` is
/// `1.5K`, printed as `1536`).
pub fn short(bytes: u64) -> String {
    const UNITS: [(&str, u32); 6] = [("E", 60), ("P", 50), ("T", 40), ("G", 30), ("M", 20), ("K", 10)];
    for (suffix, shift) in UNITS {
        // `%` rather than `is_multiple_of`: the workspace's rust-version is 1.80.
        #[allow(clippy::manual_is_multiple_of)]
        if bytes != 0 && bytes % (1u64 << shift) == 0 {
            return format!("{}{suffix}", bytes >> shift);
        }
    }
    bytes.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_grammar() {
        for (s, v) in [
            ("4096", 4096),
            ("0", 0),
            ("512B", 512),
            ("512 b", 512),
            ("12K", 12288),
            ("896k", 896 << 10),
            ("64KiB", 64 << 10),
            ("64kb", 64 << 10),
            ("64 Ki", 64 << 10),
            ("64M", 64 << 20),
            (" 2 G ", 2 << 30),
            ("1G", 1 << 30),
            ("2T", 2 << 40),
            ("1P", 1 << 50),
            ("15E", 15 << 60),
            ("1.5M", 3 << 19),
            ("1.5G", 3 << 29),
            ("0.5K", 512),
            ("1.25k", 1280),
            ("007K", 7 << 10),
            ("3.0", 3),
        ] {
            assert_eq!(parse(s), Ok(v), "{s}");
        }
    }

    #[test]
    fn clear_refusals() {
        let e = |s: &str| parse(s).unwrap_err().to_string();
        assert!(e("").contains("empty size"), "{}", e(""));
        assert!(e("12Q").contains("unknown unit \"Q\""), "{}", e("12Q"));
        assert!(e("12Kx").contains("unknown unit"), "{}", e("12Kx"));
        assert!(e("8s").contains("unknown unit \"s\""), "{}", e("8s"));
        assert!(e("x").contains("expected a number"), "{}", e("x"));
        assert!(e("K").contains("expected a number"), "{}", e("K"));
        assert!(e(".5K").contains("expected a number"), "{}", e(".5K"));
        assert!(e("5.K").contains("expected a number"), "{}", e("5.K"));
        assert!(e("1.2.3K").contains("expected a number"), "{}", e("1.2.3K"));
        assert!(e("-5K").contains("negative"), "{}", e("-5K"));
        assert!(e("0.3K").contains("whole number of bytes"), "{}", e("0.3K"));
        assert!(e("1.5").contains("whole number of bytes"), "{}", e("1.5"));
        assert!(e("99999999999T").contains("too large"), "{}", e("99999999999T"));
        assert!(e("16E").contains("too large"), "{}", e("16E"));
        assert!(e("18446744073709551616").contains("too large"));
        assert!(e("999999999999999999999999999999999999999999K").contains("too large"));
        assert_eq!(parse("18446744073709551615"), Ok(u64::MAX));
        assert_eq!(parse("1.500000000000000000000000000000000000000000K"), Ok(1536));
        assert!(e("1.00000000000000000000000000000000000000001K").contains("whole number"));
    }

    #[test]
    fn printing() {
        assert_eq!(human(0), "0 B");
        assert_eq!(human(512), "512 B");
        assert_eq!(human(1023), "1023 B");
        assert_eq!(human(1024), "1.0 KiB");
        assert_eq!(human(64 << 10), "64.0 KiB");
        assert_eq!(human(1536), "1.5 KiB");
        assert_eq!(human(9 << 20), "9.0 MiB");
        assert_eq!(human(3 << 29), "1.5 GiB");
        assert_eq!(human(2 << 40), "2.0 TiB");
        assert_eq!(short(0), "0");
        assert_eq!(short(512), "512");
        assert_eq!(short(1536), "1536");
        assert_eq!(short(64 << 10), "64K");
        assert_eq!(short(3 << 20), "3M");
        assert_eq!(short(1 << 30), "1G");
        assert_eq!(short(u64::MAX), u64::MAX.to_string());
    }

    #[test]
    fn short_reads_back() {
        let mut x = 1u64;
        for i in 0..2000u64 {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let v = (x >> (i % 64)) << (i % 41);
            assert_eq!(parse(&short(v)), Ok(v), "{v}");
        }
    }
}
