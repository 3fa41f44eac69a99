//! One line parser per trace format.  Each turns a line into a [`Line`]
//! without allocating; errors name the field.

use std::fmt;
use std::str::FromStr;

use serde::Serialize;

use crate::Op;

/// Trace formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Format {
    /// SPC / UMass: `ASU,LBA,Size,Opcode,Timestamp` (LBA in 512-byte
    /// sectors, size in bytes, opcode r/w, seconds), e.g. `0,20941264,8192,W,0.551706`.
    Spc,
    /// MSR Cambridge: `Timestamp,Hostname,DiskNumber,Type,Offset,Size,ResponseTime`
    /// (FILETIME 100 ns ticks, bytes), e.g. `128166372003061629,wdev,0,Write,3872768,4096,1125`.
    Msr,
    /// blkparse default text: `8,0 3 1 0.000000000 1234 Q WS 1000 + 8 [kworker]`.
    Blkparse,
    /// libCacheSim / CloudPhysics: `version,time,op,size,lbn` (seconds, SCSI
    /// opcode in hex, bytes, 512-byte sectors), e.g. `1,5633898,2a,512,42932745`.
    CloudPhysics,
    /// fio iolog v2: `filename action offset length`.
    FioV2,
    /// fio iolog v3: `timestamp_ms filename action offset length`.
    FioV3,
    /// Alibaba block traces: `device_id,opcode,offset,length,timestamp` (R/W, bytes, µs).
    Alibaba,
    /// Tencent CBS: `timestamp,offset,size,iotype,volume_id` (s, sectors, 0 = read / 1 = write).
    Tencent,
}

impl Format {
    pub const ALL: [Format; 8] =
        [Format::Spc, Format::Msr, Format::Blkparse, Format::CloudPhysics, Format::FioV2, Format::FioV3, Format::Alibaba, Format::Tencent];

    pub fn name(&self) -> &'static str {
        match self {
            Format::Spc => "spc",
            Format::Msr => "msr",
            Format::Blkparse => "blkparse",
            Format::CloudPhysics => "cloudphysics",
            Format::FioV2 => "fio2",
            Format::FioV3 => "fio3",
            Format::Alibaba => "alibaba",
            Format::Tencent => "tencent",
        }
    }
}

impl fmt::Display for Format {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Format {
    type Err = String;
    fn from_str(s: &str) -> Result<Format, String> {
        Format::ALL.iter().copied().find(|f| f.name() == s.to_ascii_lowercase()).ok_or_else(|| {
            let names: Vec<&str> = Format::ALL.iter().map(|f| f.name()).collect();
            format!("unknown trace format {s:?}; known: auto, {}", names.join(", "))
        })
    }
}

/// What one line holds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Line<'a> {
    /// A request: time in ns (absolute, as the trace counts it).
    Req { time_ns: u64, op: Op, offset: u64, len: u64, device: Option<&'a str> },
    /// A valid request that is neither a read nor a write (flush, trim...).
    OtherOp,
    /// Header, comment, blank, or an event kind we do not replay.
    Skip,
    /// End of the event section (blkparse summary).
    End,
}

/// A field that did not parse.
#[derive(Debug, Clone, PartialEq)]
pub struct FieldError {
    pub field: &'static str,
    pub message: String,
}

fn err(field: &'static str, message: impl Into<String>) -> FieldError {
    FieldError { field, message: message.into() }
}

fn num<T: FromStr>(field: &'static str, s: Option<&str>) -> Result<T, FieldError> {
    let s = s.ok_or_else(|| err(field, "missing"))?.trim();
    s.parse().map_err(|_| err(field, format!("invalid number {s:?}")))
}

fn text<'a>(field: &'static str, s: Option<&'a str>) -> Result<&'a str, FieldError> {
    s.map(str::trim).ok_or_else(|| err(field, "missing"))
}

fn secs_to_ns(field: &'static str, s: Option<&str>) -> Result<u64, FieldError> {
    let v: f64 = num(field, s)?;
    if !(v.is_finite() && v >= 0.0) {
        return Err(err(field, format!("invalid time {v}")));
    }
    Ok((v * 1e9).round() as u64)
}

fn mul(field: &'static str, a: u64, b: u64) -> Result<u64, FieldError> {
    a.checked_mul(b).ok_or_else(|| err(field, "value too large"))
}

fn is_header(line: &str, first: &str) -> bool {
    let t = line.trim_start().as_bytes();
    t.len() >= first.len() && t[..first.len()].eq_ignore_ascii_case(first.as_bytes())
}

pub fn parse<'a>(fmt: Format, line: &'a str, blk_action: u8) -> Result<Line<'a>, FieldError> {
    let t = line.trim();
    if t.is_empty() || t.starts_with('#') {
        return Ok(Line::Skip);
    }
    match fmt {
        Format::Spc => {
            if is_header(t, "asu") {
                return Ok(Line::Skip);
            }
            let mut f = t.split(',');
            let asu = text("ASU", f.next())?;
            let lba: u64 = num("LBA", f.next())?;
            let size: u64 = num("Size", f.next())?;
            let op = match text("Opcode", f.next())? {
                "r" | "R" => Op::Read,
                "w" | "W" => Op::Write,
                o => return Err(err("Opcode", format!("expected r or w, got {o:?}"))),
            };
            let time_ns = secs_to_ns("Timestamp", f.next())?;
            Ok(Line::Req { time_ns, op, offset: mul("LBA", lba, 512)?, len: size, device: Some(asu) })
        }
        Format::Msr => {
            if is_header(t, "timestamp") {
                return Ok(Line::Skip);
            }
            let mut f = t.split(',');
            let ticks: u64 = num("Timestamp", f.next())?;
            let _host = text("Hostname", f.next())?;
            let disk = text("DiskNumber", f.next())?;
            let op = match text("Type", f.next())?.to_ascii_lowercase().as_str() {
                "read" => Op::Read,
                "write" => Op::Write,
                o => return Err(err("Type", format!("expected Read or Write, got {o:?}"))),
            };
            let offset: u64 = num("Offset", f.next())?;
            let len: u64 = num("Size", f.next())?;
            Ok(Line::Req { time_ns: mul("Timestamp", ticks, 100)?, op, offset, len, device: Some(disk) })
        }
        Format::Blkparse => {
            if t.starts_with("CPU") || t.starts_with("Total") {
                return Ok(Line::End);
            }
            let mut f = t.split_whitespace();
            let dev = f.next().unwrap_or("");
            if !dev.contains(',') {
                return Ok(Line::Skip);
            }
            let _cpu = f.next();
            let _seq = f.next();
            let time_ns = secs_to_ns("time", f.next())?;
            let _pid = f.next();
            let action = text("action", f.next())?;
            if action.len() != 1 || action.as_bytes()[0] != blk_action {
                return Ok(Line::Skip);
            }
            let rwbs = text("RWBS", f.next())?;
            let op = if rwbs.contains('D') || rwbs.contains('N') {
                return Ok(Line::OtherOp);
            } else if rwbs.contains('W') {
                Op::Write
            } else if rwbs.contains('R') {
                Op::Read
            } else {
                return Ok(Line::OtherOp);
            };
            let sector: u64 = num("sector", f.next())?;
            if f.next() != Some("+") {
                return Err(err("count", "expected '+ COUNT' after the sector"));
            }
            let count: u64 = num("count", f.next())?;
            if count == 0 {
                return Ok(Line::OtherOp);
            }
            Ok(Line::Req { time_ns, op, offset: mul("sector", sector, 512)?, len: mul("count", count, 512)?, device: Some(dev) })
        }
        Format::CloudPhysics => {
            if is_header(t, "version") {
                return Ok(Line::Skip);
            }
            let mut f = t.split(',');
            let _v = text("version", f.next())?;
            let time: u64 = num("time", f.next())?;
            let opcode = text("op", f.next())?;
            let op = match u8::from_str_radix(opcode, 16) {
                Ok(0x28 | 0x88) => Some(Op::Read),
                Ok(0x2a | 0x8a) => Some(Op::Write),
                Ok(_) => None,
                Err(_) => return Err(err("op", format!("invalid SCSI opcode {opcode:?}"))),
            };
            let size: u64 = num("size", f.next())?;
            let lbn: u64 = num("lbn", f.next())?;
            match op {
                Some(op) => Ok(Line::Req { time_ns: mul("time", time, 1_000_000_000)?, op, offset: mul("lbn", lbn, 512)?, len: size, device: None }),
                None => Ok(Line::OtherOp),
            }
        }
        Format::FioV2 | Format::FioV3 => {
            if t.starts_with("fio version") {
                return Ok(Line::Skip);
            }
            let mut f = t.split_whitespace();
            let time_ns = if fmt == Format::FioV3 { mul("timestamp", num::<u64>("timestamp", f.next())?, 1_000_000)? } else { 0 };
            let file = text("filename", f.next())?;
            let action = text("action", f.next())?;
            let op = match action {
                "read" => Op::Read,
                "write" => Op::Write,
                "trim" | "sync" | "datasync" => return Ok(Line::OtherOp),
                "open" | "close" | "add" | "wait" => return Ok(Line::Skip),
                a => return Err(err("action", format!("unknown fio action {a:?}"))),
            };
            let offset: u64 = num("offset", f.next())?;
            let len: u64 = num("length", f.next())?;
            Ok(Line::Req { time_ns, op, offset, len, device: Some(file) })
        }
        Format::Alibaba => {
            if is_header(t, "device_id") {
                return Ok(Line::Skip);
            }
            let mut f = t.split(',');
            let dev = text("device_id", f.next())?;
            let op = match text("opcode", f.next())? {
                "R" | "r" => Op::Read,
                "W" | "w" => Op::Write,
                o => return Err(err("opcode", format!("expected R or W, got {o:?}"))),
            };
            let offset: u64 = num("offset", f.next())?;
            let len: u64 = num("length", f.next())?;
            let us: u64 = num("timestamp", f.next())?;
            Ok(Line::Req { time_ns: mul("timestamp", us, 1000)?, op, offset, len, device: Some(dev) })
        }
        Format::Tencent => {
            if is_header(t, "timestamp") {
                return Ok(Line::Skip);
            }
            let mut f = t.split(',');
            let secs: u64 = num("timestamp", f.next())?;
            let offset: u64 = num("offset", f.next())?;
            let size: u64 = num("size", f.next())?;
            let op = match text("iotype", f.next())? {
                "0" => Op::Read,
                "1" => Op::Write,
                o => return Err(err("iotype", format!("expected 0 (read) or 1 (write), got {o:?}"))),
            };
            let vol = text("volume_id", f.next())?;
            Ok(Line::Req {
                time_ns: mul("timestamp", secs, 1_000_000_000)?,
                op,
                offset: mul("offset", offset, 512)?,
                len: mul("size", size, 512)?,
                device: Some(vol),
            })
        }
    }
}

/// Guess the format from the first lines.
pub fn detect(lines: &[String]) -> Option<Format> {
    let body: Vec<&str> = lines.iter().map(|l| l.trim()).filter(|l| !l.is_empty() && !l.starts_with('#')).collect();
    let first = *body.first()?;
    let lower = first.to_ascii_lowercase();
    if lower.starts_with("fio version 2") {
        return Some(Format::FioV2);
    }
    if lower.starts_with("fio version 3") {
        return Some(Format::FioV3);
    }
    if lower.starts_with("version,time,op,size,lbn") {
        return Some(Format::CloudPhysics);
    }
    // blkparse: event lines `maj,min cpu seq time pid action ...` before the summary.
    let events: Vec<&str> = body.iter().copied().take_while(|l| !l.starts_with("CPU") && !l.starts_with("Total")).take(20).collect();
    let blk = events
        .iter()
        .filter(|l| {
            let mut f = l.split_whitespace();
            let dev_ok = f.next().is_some_and(|d| d.split_once(',').is_some_and(|(a, b)| a.parse::<u32>().is_ok() && b.parse::<u32>().is_ok()));
            let action = f.nth(4).and_then(|a| a.bytes().next()).unwrap_or(0);
            dev_ok && parse(Format::Blkparse, l, action).is_ok()
        })
        .count();
    if !events.is_empty() && blk * 2 > events.len() {
        return Some(Format::Blkparse);
    }
    // Score each format by how many sample lines parse as requests.
    let sample: Vec<&str> = body.iter().copied().take(20).collect();
    let mut best: Option<(Format, usize)> = None;
    for f in [Format::Msr, Format::Spc, Format::Alibaba, Format::Tencent, Format::CloudPhysics] {
        let ok = sample.iter().filter(|l| matches!(parse(f, l, 0), Ok(Line::Req { .. }) | Ok(Line::OtherOp))).count();
        if ok > 0 && best.is_none_or(|b| ok > b.1) {
            best = Some((f, ok));
        }
    }
    best.filter(|b| b.1 * 2 >= sample.len()).map(|b| b.0)
}
