use std::io::Write;

use mosaic_trace::{from_reader, Format, Op, Request, TraceOptions, TraceWriter};

use super::{mutations, random_inputs};
use crate::trace;

/// Valid lines of `f`, and the requests they hold.
fn text(f: Format) -> (Vec<u8>, usize) {
    let (t, n): (&str, usize) = match f {
        Format::Spc => ("0,20941264,8192,W,0.551706\n1,20939840,8192,r,0.554041\n0,20939808,4096,R,0.556079\n", 3),
        Format::Msr => {
            // The one trace writer mosaic has (what `serve --record` writes).
            let mut w = TraceWriter::new(Vec::new(), "fuzz").with_disk(2).with_base_ticks(128_166_372_003_061_629);
            for (i, (op, offset, len)) in [(Op::Write, 4096, 8192), (Op::Read, 0, 512), (Op::Write, 1 << 40, 65536)].into_iter().enumerate() {
                w.write(&Request { time_ns: i as u64 * 15_000, op, offset, len }, 10_000).unwrap();
            }
            return (w.into_inner(), 3);
        }
        Format::Blkparse => (
            "  8,0    3        1     0.000000000  1234  A  WS 1000 + 8 <- (8,1) 0\n\
             \x20 8,0    3        2     0.000000500  1234  Q  WS 1000 + 8 [kworker/3:1]\n\
             \x20 8,0    3        3     0.000001000  1234  G  WS 1000 + 8 [kworker/3:1]\n\
             \x20 8,0    3        4     0.000001500  1234  D  WS 1000 + 8 [kworker/3:1]\n\
             \x20 8,0    3        5     0.000100000  1234  C  WS 1000 + 8 [0]\n\
             \x20 8,0    1        6     0.000200000  4321  Q   R 2000 + 16 [fio]\n",
            2,
        ),
        Format::CloudPhysics => ("version,time,op,size,lbn\n1,100,2a,4096,8\n1,100,28,512,16\n1,101,8a,8192,24\n", 3),
        Format::FioV2 => ("fio version 2 iolog\n/dev/sdb add\n/dev/sdb open\n/dev/sdb write 4096 8192\n/dev/sdb read 0 4096\n/dev/sdb close\n", 2),
        Format::FioV3 => ("fio version 3 iolog\n0 /dev/nbd0 add\n1 /dev/nbd0 open\n5000 /dev/nbd0 write 1048576 65536\n12000 /dev/nbd0 read 0 4096\n13000 /dev/nbd0 close\n", 2),
        Format::Alibaba => ("3,W,1024,4096,1577808000000000\n3,R,8192,512,1577808000000250\n7,w,0,4096,1577808000001000\n", 3),
        Format::Tencent => ("1538323200,12345,8,1,1283\n1538323201,64,16,0,1283\n1538323201,0,8,1,1500\n", 3),
    };
    (t.as_bytes().to_vec(), n)
}

fn gzip(b: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    e.write_all(b).unwrap();
    e.finish().unwrap()
}

fn zstd(b: &[u8]) -> Vec<u8> {
    zstd::encode_all(b, 3).unwrap()
}

/// The first byte that selects `f` (`None`: detection).
fn select(f: Option<Format>) -> u8 {
    f.map_or(8, |f| Format::ALL.iter().position(|&g| g == f).unwrap() as u8)
}

/// The seed corpus of the cargo-fuzz target: every format's lines, named
/// and detected, plain and compressed.
pub(super) fn corpus() -> Vec<Vec<u8>> {
    let mut v = Vec::new();
    for f in Format::ALL {
        let (t, _) = text(f);
        for format in [Some(f), None] {
            v.push([&[select(format)][..], &t].concat());
        }
        for z in [gzip(&t), zstd(&t)] {
            v.push([&[select(Some(f))][..], &z].concat());
        }
    }
    v
}

#[test]
fn random_bytes() {
    let (gz, zst) = (gzip(b"0,1,512,W,0.5\n"), zstd(b"3,W,1024,4096,15\n"));
    let (gz, zst) = ([&[0u8][..], &gz[..2]].concat(), [&[6u8][..], &zst[..4]].concat());
    random_inputs(trace, 0x7c, 3000, 2048, &[&[0], &[1], &[2], &[3], &[4], &[5], &[6], &[7], &[8], &[0x80], &gz, &zst]);
}

#[test]
fn valid_inputs_decode() {
    for f in Format::ALL {
        let (t, n) = text(f);
        for (how, b) in [("plain", t.clone()), ("gzip", gzip(&t)), ("zstd", zstd(&t))] {
            for format in [Some(f), None] {
                let r = from_reader("t", std::io::Cursor::new(b.clone()), &TraceOptions { format, ..Default::default() }).unwrap_or_else(|e| panic!("{f} {how}: {e}"));
                assert_eq!(r.format(), f, "{how}, format {format:?}");
                let got: Vec<_> = r.collect::<Result<_, _>>().unwrap_or_else(|e| panic!("{f} {how}: {e}"));
                assert_eq!(got.len(), n, "{f} {how}");
                assert!(got.iter().all(|q| q.len > 0));
            }
        }
    }
}

#[test]
fn valid_inputs_damaged() {
    for f in Format::ALL {
        let (t, _) = text(f);
        for format in [Some(f), None] {
            for skip_bad in [0, 0x80] {
                let b = [&[select(format) | skip_bad][..], &t].concat();
                mutations(trace, &format!("{f} lines (format {format:?}, skip {skip_bad:#x})"), &b, 64, b.len());
            }
        }
        for (how, z) in [("gzip", gzip(&t)), ("zstd", zstd(&t))] {
            let b = [&[select(Some(f))][..], &z].concat();
            mutations(trace, &format!("{f} lines, {how}"), &b, 64, b.len());
        }
    }
}
