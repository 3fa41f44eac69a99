//! Format auto-detection from the first lines of a trace.
//!
//! 1. A header decides: `fio version 2|3 iolog`, or a CSV header naming the
//!    first two fields of a format (`version,time,...` is CloudPhysics,
//!    `ASU,LBA,...` SPC, `Timestamp,Hostname,...` MSR, `device_id,opcode,...`
//!    Alibaba, `timestamp,offset,...` Tencent).
//! 2. Otherwise each candidate scores the sample lines (up to 20 non-blank,
//!    non-comment lines, cut at a blkparse summary) by shape:
//!    * blkparse: `maj,min cpu seq seconds pid action`;
//!    * MSR: 6+ fields, 4th `Read`/`Write`;
//!    * SPC: 5+ fields, 4th `r`/`w`;
//!    * Alibaba: 5 fields, 2nd `R`/`W`;
//!    * Tencent: 5 numeric fields, 4th `0`/`1`;
//!    * CloudPhysics: 5 fields, 3rd a hex opcode.
//!
//!    The best score wins if at least half of the lines match; ties go to
//!    the more specific shape in the order above (a Tencent line also fits
//!    the looser CloudPhysics shape, not the other way round unless a
//!    CloudPhysics size is 0 or 1 byte).

use crate::field::{is_header, trim};
use crate::{alibaba, blkparse, cloudphysics, fio, msr, spc, tencent, Format};

/// Lines sampled for detection.
pub(crate) const SAMPLE_LINES: usize = 20;

const HEADERS: [(Format, &[&str]); 5] = [
    (Format::CloudPhysics, cloudphysics::HEADER),
    (Format::Spc, spc::HEADER),
    (Format::Msr, msr::HEADER),
    (Format::Alibaba, alibaba::HEADER),
    (Format::Tencent, tencent::HEADER),
];

type Shape = fn(&[u8]) -> bool;

const SHAPES: [(Format, Shape); 6] = [
    (Format::Blkparse, blkparse::shape),
    (Format::Msr, msr::shape),
    (Format::Spc, spc::shape),
    (Format::Alibaba, alibaba::shape),
    (Format::Tencent, tencent::shape),
    (Format::CloudPhysics, cloudphysics::shape),
];

/// A non-blank, non-comment line (BOM and whitespace trimmed)?
pub(crate) fn content(line: &[u8]) -> Option<&[u8]> {
    let l = trim(line.strip_prefix(b"\xef\xbb\xbf").unwrap_or(line));
    (!l.is_empty() && l[0] != b'#').then_some(l)
}

/// Detect the format of `lines` (the start of a trace), or say why not.
pub(crate) fn detect<L: AsRef<[u8]>>(lines: &[L]) -> Result<Format, String> {
    let body: Vec<&[u8]> = lines.iter().filter_map(|l| content(l.as_ref())).collect();
    let Some(&first) = body.first() else {
        return Err("no data lines".into());
    };
    match fio::header_version(first) {
        Some(2) => return Ok(Format::FioV2),
        Some(3) => return Ok(Format::FioV3),
        _ => {}
    }
    if let Some((f, _)) = HEADERS.iter().find(|(_, h)| is_header(first, h)) {
        return Ok(*f);
    }
    let sample: Vec<&[u8]> = body.iter().copied().take_while(|l| !blkparse::ends_events(l)).take(SAMPLE_LINES).collect();
    if sample.is_empty() {
        return Err("no data lines before the blkparse summary".into());
    }
    let mut best: Option<(Format, usize)> = None;
    for (f, shape) in SHAPES {
        let n = sample.iter().filter(|l| shape(l)).count();
        if n > 0 && best.is_none_or(|b| n > b.1) {
            best = Some((f, n));
        }
    }
    match best {
        Some((f, n)) if 2 * n >= sample.len() => Ok(f),
        Some((f, n)) => Err(format!("only {n} of the first {} lines look like {f}; first line {}", sample.len(), crate::field::show(first))),
        None => Err(format!("first line {}", crate::field::show(first))),
    }
}

/// The shapes tried, for the error message.
pub(crate) fn tried() -> String {
    let mut v: Vec<&str> = vec![Format::FioV2.describe(), Format::FioV3.describe()];
    v.extend(SHAPES.iter().map(|(f, _)| f.describe()));
    v.join("; ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(text: &str) -> Result<Format, String> {
        let lines: Vec<&str> = text.lines().collect();
        detect(&lines)
    }

    #[test]
    fn shapes() {
        assert_eq!(d("0,20941264,8192,W,0.551706\n1,20939840,8192,r,0.554041"), Ok(Format::Spc));
        assert_eq!(d("0,303567,3584,w,0.000000,extra,cols"), Ok(Format::Spc));
        assert_eq!(d("128166372003061629,wdev,0,Write,3872768,4096,1125"), Ok(Format::Msr));
        assert_eq!(d("  8,0    3        1     0.000000000  1234  Q  WS 1000 + 8 [kworker]"), Ok(Format::Blkparse));
        assert_eq!(d("1,5633898,2a,512,42932745\n1,5633898,28,4096,1"), Ok(Format::CloudPhysics));
        assert_eq!(d("version,time,op,size,lbn\n"), Ok(Format::CloudPhysics));
        assert_eq!(d("\n# comment\nfio version 2 iolog\n/dev/sdb add"), Ok(Format::FioV2));
        assert_eq!(d("fio version 3 iolog"), Ok(Format::FioV3));
        assert_eq!(d("3,W,1024,4096,1577808000000000"), Ok(Format::Alibaba));
        assert_eq!(d("1538323200,12345,8,1,1283\n1538323201,64,16,0,1283"), Ok(Format::Tencent));
        assert_eq!(d("\u{feff}Timestamp,Hostname,DiskNumber,Type,Offset,Size,ResponseTime\n"), Ok(Format::Msr));
        assert_eq!(d("timestamp,offset,size,iotype,volume_id"), Ok(Format::Tencent));
        assert!(d("hello world\nfoo").unwrap_err().contains("hello world"));
        assert!(d("").is_err());
        // A CloudPhysics trace with a few zero-size (non-I/O) commands is
        // still CloudPhysics: the hex opcodes outvote the 0/1 size look-alikes.
        assert_eq!(d("1,5,35,0,0\n1,5,2a,512,8\n1,5,28,4096,16"), Ok(Format::CloudPhysics));
    }
}
