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
//!    * CloudPhysics: 5 fields, 1st the version `1`, 3rd a one-byte hex
//!      opcode.
//!
//!    The best score wins if at least half of the lines match; ties go to
//!    the shape earlier in the order above.  Tencent and CloudPhysics lines
//!    are all numbers, but a Tencent line starts with its (Unix) time, never
//!    the CloudPhysics version 1, so they fit both shapes only in a Tencent
//!    trace whose times start at 1 s (the tie goes to Tencent: it fits
//!    every Tencent line) or a CloudPhysics command of 0 or 1 byte whose
//!    opcode has no hex letter (`1,5,35,0,0`; CloudPhysics wins as soon as
//!    its sample holds more lines with sizes or opcodes Tencent cannot
//!    have, such as any read or write).

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

    /// Tencent lines as a CBS trace has them, `n` of them from `seed`,
    /// the times from `t0` on in units of `tick` seconds.
    fn tencent(n: usize, seed: u64, t0: u64, tick: u64) -> String {
        let mut x = seed;
        let mut next = |m: u64| {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (x >> 33) % m
        };
        let mut t = t0;
        let mut out = String::new();
        for _ in 0..n {
            t += next(2) * tick;
            let size = [1, 8, 8, 16, 32, 64, 128, 256, 1024, 2048][next(10) as usize];
            out += &format!("{t},{},{size},{},{}\n", next(1 << 31), next(2), 1 + next(20_000));
        }
        out
    }

    /// No Tencent line fits the CloudPhysics shape, so detection does not
    /// lean on the order of ties: a Tencent line starts with its time,
    /// never the CloudPhysics version 1.
    #[test]
    fn tencent_lines_are_not_cloudphysics_shaped() {
        for seed in 0..50 {
            for l in tencent(20, seed, 1538323200, 1).lines() {
                assert!(tencent::shape(l.as_bytes()), "{l}");
                assert!(!cloudphysics::shape(l.as_bytes()), "{l}");
            }
        }
        for l in ["1538323200,12345,8,1,1283", "1538323201,64,16,0,1283", "1538323201,0,8,1,1500", "1538323200,7,12,0,7"] {
            assert!(!cloudphysics::shape(l.as_bytes()), "{l}");
        }
    }

    /// Tencent samples detect as Tencent: Unix times, times rebased to 0
    /// or 1, and times too large for seconds (milliseconds: read as
    /// Tencent, whose first line then says what is wrong, rather than as
    /// CloudPhysics garbage of 1-byte READ(6)s).
    #[test]
    fn tencent_samples_detect_as_tencent() {
        for seed in 0..50 {
            for (t0, tick) in [(1538323200, 1), (0, 1), (1, 0), (1538323200000, 1), (1538323200000, 1000)] {
                let text = tencent(1 + seed as usize % 20, seed, t0, tick);
                assert_eq!(d(&text), Ok(Format::Tencent), "{text}");
            }
        }
        assert_eq!(d("1538323200000,12345,8,1,1283\n1538323200250,64,16,0,1283\n1538323201000,0,8,1,1500"), Ok(Format::Tencent));
    }

    /// CloudPhysics samples stay CloudPhysics: non-I/O commands (35
    /// SYNCHRONIZE CACHE and 00 TEST UNIT READY of 0 bytes, 12 INQUIRY),
    /// any case, `0x`, and the start of the real trace without its header.
    #[test]
    fn cloudphysics_samples_detect_as_cloudphysics() {
        let samples = [
            "1,5633898,2a,512,42932745\n1,5633898,2a,512,42932746\n1,5633898,2a,6656,40409911\n1,5633899,28,4096,1234",
            "1,100,35,0,0\n1,100,00,0,0\n1,100,12,36,0\n1,101,28,4096,8\n1,101,2A,4096,16",
            "1,100,35,0,0\n1,100,35,0,0\n1,101,28,4096,8",
            "1,100,0x28,512,8\n1,100,0x2a,512,8\n1,100,35,0,0",
            "1,100,88,4096,8\n1,100,8a,4096,8\n1,100,a8,512,1\n1,100,aa,512,2\n1,100,08,512,3\n1,100,0a,512,4",
        ];
        for text in samples {
            assert_eq!(d(text), Ok(Format::CloudPhysics), "{text}");
        }
        // Not the CloudPhysics shape: another version, a two-byte opcode.
        assert!(!cloudphysics::shape(b"2,100,2a,512,8"));
        assert!(!cloudphysics::shape(b"1,100,12a,512,8"));
    }
}
