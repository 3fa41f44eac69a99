//! gzip and zstd are recognised by magic bytes, whatever the file name.

use crate::common;

use std::io::{BufRead, BufReader, Read, Write};

use common::*;
use mosaic_trace::{from_reader, open, Compression, Format, Request, TraceOptions};

fn gzip(data: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    e.write_all(data).unwrap();
    e.finish().unwrap()
}

fn plain(name: &str) -> Vec<Request> {
    read_all(name, &TraceOptions::default()).1
}

#[test]
fn files_by_magic_not_extension() {
    let dir = tempfile::tempdir().unwrap();
    for name in ["msr.csv", "blkparse.txt", "blkparse-donly.txt", "cloudphysics.csv", "fio3.log"] {
        let raw = std::fs::read(fixture(name)).unwrap();
        let want = plain(name);
        let gz = dir.path().join(format!("{name}.zst")); // misleading names
        std::fs::write(&gz, gzip(&raw)).unwrap();
        let zs = dir.path().join(format!("{name}.gz"));
        std::fs::write(&zs, zstd::encode_all(&raw[..], 3).unwrap()).unwrap();
        for (p, c) in [(gz, Compression::Gzip), (zs, Compression::Zstd)] {
            let r = open(&p, &TraceOptions::default()).unwrap();
            assert_eq!(r.compression(), c);
            assert_ne!(r.format(), Format::Spc);
            assert_eq!(r.map(|x| x.unwrap()).collect::<Vec<_>>(), want, "{name} {c:?}");
        }
    }
}

#[test]
fn concatenated_members_and_frames() {
    let raw = std::fs::read(fixture("msr.csv")).unwrap();
    let (a, b) = raw.split_at(60);
    let mut gz = gzip(a);
    gz.extend(gzip(b));
    let mut zs = zstd::encode_all(a, 1).unwrap();
    zs.extend(zstd::encode_all(b, 1).unwrap());
    for data in [gz, zs] {
        let r = from_reader("cat", std::io::Cursor::new(data), &TraceOptions::default()).unwrap();
        assert_eq!(r.map(|x| x.unwrap()).collect::<Vec<_>>(), plain("msr.csv"));
    }
}

/// A reader that returns one byte per read, like a slow pipe.
struct Trickle(std::io::Cursor<Vec<u8>>);

impl Read for Trickle {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = buf.len().min(1);
        self.0.read(&mut buf[..n])
    }
}

#[test]
fn magic_split_across_reads() {
    let raw = std::fs::read(fixture("tencent.csv")).unwrap();
    for (data, c) in [(zstd::encode_all(&raw[..], 3).unwrap(), Compression::Zstd), (gzip(&raw), Compression::Gzip), (raw.clone(), Compression::None)] {
        let src: Box<dyn BufRead + Send> = Box::new(BufReader::with_capacity(1, Trickle(std::io::Cursor::new(data))));
        let r = from_reader("pipe", src, &TraceOptions::default()).unwrap();
        assert_eq!(r.compression(), c);
        assert_eq!(r.map(|x| x.unwrap()).collect::<Vec<_>>(), plain("tencent.csv"));
    }
}

/// `open_with_progress` reports the bytes of the file read, compressed or
/// not, and ends at the file's size; the requests are those of `open`.
#[test]
fn progress_counts_the_file_bytes() {
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::Arc;
    let dir = tempfile::tempdir().unwrap();
    let raw = std::fs::read(fixture("msr.csv")).unwrap();
    let gz = dir.path().join("msr.csv.gz");
    std::fs::write(&gz, gzip(&raw)).unwrap();
    for p in [fixture("msr.csv"), gz] {
        let seen = Arc::new(AtomicU64::new(0));
        let s = seen.clone();
        let r = mosaic_trace::open_with_progress(&p, &TraceOptions::default(), move |n| s.store(n, Ordering::Relaxed)).unwrap();
        assert_eq!(r.map(|x| x.unwrap()).collect::<Vec<_>>(), plain("msr.csv"));
        assert_eq!(seen.load(Ordering::Relaxed), std::fs::metadata(&p).unwrap().len(), "{}", p.display());
    }
}
