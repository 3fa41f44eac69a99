//! blkparse default text output (`blkparse -i TRACE`).
//!
//! ```text
//!   8,0    3        1     0.000000000  1234  Q  WS 1000 + 8 [kworker]
//!   8,0    3        2     0.000001000  1234  G  WS 1000 + 8 [kworker]
//!   8,0    3        3     0.000002000  1234  D  WS 1000 + 8 [kworker]
//!   8,0    1        0     0.000900000     0  m   N cfq4321 slice expired
//! CPU0 (8,0):
//!  Reads Queued:           1,        8KiB  Writes Queued:           1,        4KiB
//! ```
//!
//! Fields: device `major,minor` (the device filter, e.g. `8,0`), cpu,
//! sequence number, time in seconds, pid, action, RWBS, `sector + count`,
//! `[process]`.  Offset = sector * 512, length = count * 512.
//!
//! * Requests are taken from Q (queued) events.  A trace without any Q event
//!   (e.g. one recorded with `-a issue`) is read from its D (issued) events.
//!   [`crate::open`] decides by pre-scanning the file up to its first Q
//!   event; [`crate::from_reader`] decides lazily (see [`crate::TraceReader`]).
//! * RWBS containing D (discard) or N (no data), or neither R nor W (a pure
//!   flush `F`), is a skipped op; otherwise W means write, R means read
//!   (modifiers S, A, M, F, E... are ignored).  A zero-length transfer (the
//!   empty pre-flush `FWS 0 + 0`) and SCSI pass-through requests
//!   (`R 36 (12 00 ..)`) are skipped ops too.
//! * Other actions (C, G, I, M, P, U, X, A, B, T, S, m...) and lines that do
//!   not start with `major,minor` are ignored; the summary section (from
//!   `CPU0 (8,0):` or `Total (8,0):`) ends the trace.
//! * A line that starts with `major,minor` is an event: one cut short
//!   before its action (`8,0 3 1 0.000000000`) is an error, as is a Q or D
//!   event cut before its `sector + count`.  What follows the count (the
//!   `[process]`, free text) is not checked.

use crate::field::{err, io, is_decimal, is_digits, mul, secs_field, text, u64_field, words, FieldError, Line};
use crate::Op;

pub(crate) const SHAPE: &str = "blkparse: `maj,min cpu seq seconds pid action ...`";

/// A blkparse line.
pub(crate) enum Event<'a> {
    /// Not an event (or a summary start: `Line::End`).
    Plain(Line<'a>),
    /// A Q or D event, with its parse.
    Io { action: u8, line: Result<Line<'a>, FieldError> },
    /// An event line cut short before its action.
    Truncated(FieldError),
}

/// The fields every event has before its action's own.
const PREFIX: [&str; 4] = ["cpu", "sequence", "time", "pid"];

fn is_dev(b: &[u8]) -> bool {
    match b.iter().position(|&c| c == b',') {
        Some(i) => is_digits(&b[..i]) && is_digits(&b[i + 1..]),
        None => false,
    }
}

/// `CPU3 (8,0):` or `Total (8,0):`.
fn is_summary(line: &[u8]) -> bool {
    let mut w = words(line);
    let first = w.next().unwrap_or_default();
    let second = w.next().unwrap_or_default();
    let head = first == b"Total" || (first.len() > 3 && first.starts_with(b"CPU") && is_digits(&first[3..]));
    head && second.starts_with(b"(")
}

pub(crate) fn parse(line: &[u8]) -> Event<'_> {
    let mut w = words(line);
    let dev = match w.next() {
        Some(d) if is_dev(d) => d,
        _ => return Event::Plain(if is_summary(line) { Line::End } else { Line::Skip }),
    };
    let mut prefix = [None; 4];
    for p in &mut prefix {
        *p = w.next();
    }
    let action = match w.next() {
        Some([a @ (b'Q' | b'D')]) => *a,
        Some(_) => return Event::Plain(Line::Skip),
        None => return truncated(&prefix),
    };
    Event::Io { action, line: parse_io(dev, prefix[2], w) }
}

/// An event line that ends before its action: the first field missing.
#[cold]
fn truncated(prefix: &[Option<&[u8]>; 4]) -> Event<'static> {
    let field = PREFIX.iter().zip(prefix).find(|(_, f)| f.is_none()).map_or("action", |(name, _)| *name);
    Event::Truncated(err(field, "missing: the event line is cut short"))
}

fn parse_io<'a>(dev: &'a [u8], time: Option<&[u8]>, mut w: crate::field::Words<'_>) -> Result<Line<'a>, FieldError> {
    let time_ns = secs_field("time", time)?;
    let rwbs = text("RWBS", w.next())?;
    let has = |c: u8| rwbs.contains(&c);
    let op = if has(b'D') || has(b'N') {
        return Ok(Line::Other { device: Some(dev) });
    } else if has(b'W') {
        Op::Write
    } else if has(b'R') {
        Op::Read
    } else {
        return Ok(Line::Other { device: Some(dev) });
    };
    let sector = u64_field("sector", w.next())?;
    match w.next() {
        Some(b"+") => {}
        Some(p) if p.starts_with(b"(") => return Ok(Line::Other { device: Some(dev) }),
        _ => return Err(err("count", "expected `+ COUNT` after the sector")),
    }
    let count = u64_field("count", w.next())?;
    io(time_ns, op, mul("sector", sector, 512)?, mul("count", count, 512)?, Some(dev), "count")
}

pub(crate) fn shape(line: &[u8]) -> bool {
    let mut w = words(line);
    w.next().is_some_and(is_dev)
        && w.next().is_some_and(is_digits)
        && w.next().is_some_and(is_digits)
        && w.next().is_some_and(is_decimal)
        && w.next().is_some_and(is_digits)
        && w.next().is_some_and(|a| !a.is_empty() && a.len() <= 2 && a.iter().all(u8::is_ascii_alphabetic))
}

/// Is this line the start of the summary section?
pub(crate) fn ends_events(line: &[u8]) -> bool {
    is_summary(line)
}
