//! fio iolog traces, versions 2 and 3 (`write_iolog=` / `read_iolog=`).
//!
//! Version 2 has no timestamps:
//!
//! ```text
//! fio version 2 iolog
//! /dev/sdb add
//! /dev/sdb open
//! /dev/sdb write 4096 8192
//! /dev/sdb wait 250
//! /dev/sdb read 0 4096
//! /dev/sdb close
//! ```
//!
//! Version 3 starts every line with a timestamp relative to the start of
//! the run:
//!
//! ```text
//! fio version 3 iolog
//! 0 /dev/nbd0 add
//! 1 /dev/nbd0 open
//! 5000 /dev/nbd0 write 1048576 65536
//! ```
//!
//! * actions `read`, `write` become requests; `trim`, `sync`, `datasync`
//!   are skipped ops; `add`, `open`, `close` (and `unlink`) are skipped;
//! * offset and length are bytes; the file name is the device filter;
//! * version 3 timestamps are **microseconds**: fio writes them with
//!   `utime_since_now()` and replays them as microsecond delays (its own
//!   `iolog.c`), whatever some write-ups say;
//! * version 2 requests are at time 0 (the replay engine runs them
//!   closed-loop), except that a `wait N` action — fio's "wait until N ms
//!   after the start" — moves the clock of the requests after it to N ms;
//! * a `read`, `write` or (v2) `wait` line has a fixed number of words: a
//!   word after the length (after N of `wait`) is an error.

use crate::field::{err, mul, no_more, show, text, u64_field, words, FieldError, Line};
use crate::Op;

pub(crate) const SHAPE_V2: &str = "fio2: first line `fio version 2 iolog`";
pub(crate) const SHAPE_V3: &str = "fio3: first line `fio version 3 iolog`";

/// `fio version N iolog` (any case).
pub(crate) fn header_version(line: &[u8]) -> Option<u8> {
    let mut w = words(line);
    let fio = w.next()?.eq_ignore_ascii_case(b"fio") && w.next()?.eq_ignore_ascii_case(b"version");
    let v = w.next()?;
    (fio && w.next().is_some_and(|x| x.eq_ignore_ascii_case(b"iolog"))).then_some(())?;
    match v {
        b"2" => Some(2),
        b"3" => Some(3),
        _ => None,
    }
}

/// One line; `v3` selects the timestamped layout.  A v2 `wait` returns
/// [`Line::Clock`].
pub(crate) fn parse(line: &[u8], v3: bool) -> Result<Line<'_>, FieldError> {
    if line.first().is_some_and(|c| c.eq_ignore_ascii_case(&b'f')) && header_version(line).is_some() {
        return Ok(Line::Skip);
    }
    let mut w = words(line);
    let time_ns = if v3 { mul("timestamp", u64_field("timestamp", w.next())?, 1000)? } else { 0 };
    let file = text("filename", w.next())?;
    let action = text("action", w.next())?;
    let op = match action {
        b"read" => Op::Read,
        b"write" => Op::Write,
        b"trim" | b"sync" | b"datasync" => return Ok(Line::Other { device: Some(file) }),
        b"add" | b"open" | b"close" | b"unlink" => return Ok(Line::Skip),
        // fio ignores `wait` in version 3 logs (the timestamps pace them).
        b"wait" if v3 => return Ok(Line::Skip),
        b"wait" => {
            let ms = u64_field("offset", w.next())?;
            no_more(w, 3)?;
            return Ok(Line::Clock { time_ns: mul("offset", ms, 1_000_000)? });
        }
        _ => return Err(err("action", format!("unknown fio action {}", show(action)))),
    };
    let offset = u64_field("offset", w.next())?;
    let len = u64_field("length", w.next())?;
    no_more(w, if v3 { 5 } else { 4 })?;
    crate::field::io(time_ns, op, offset, len, Some(file), "length")
}
