//! Transparent gzip / zstd decompression, chosen by magic bytes (never by
//! file extension): gzip `1f 8b`, zstd `28 b5 2f fd`.  Concatenated gzip
//! members and zstd frames are read through.  A damaged or cut stream's
//! error says how far it got: `gzip stream broken at byte N of its
//! decompressed data` (the reader adds the line).

use std::io::{self, BufRead, BufReader, Cursor, Read};

/// What the stream starts with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compression {
    None,
    Gzip,
    Zstd,
}

const GZIP: &[u8] = &[0x1f, 0x8b];
const ZSTD: &[u8] = &[0x28, 0xb5, 0x2f, 0xfd];
/// Compressions not read, named rather than parsed as text.
const UNSUPPORTED: &[(&[u8], &str)] = &[(b"BZh", "bzip2"), (&[0xfd, 0x37, 0x7a, 0x58], "xz"), (&[0x04, 0x22, 0x4d, 0x18], "lz4")];

/// An error naming the compression `head` starts with, when it is one
/// this reader does not read.
fn unsupported(head: &[u8]) -> io::Result<()> {
    match UNSUPPORTED.iter().find(|(m, _)| head.starts_with(m)) {
        Some((_, name)) => Err(io::Error::new(io::ErrorKind::InvalidData, format!("{name}-compressed: only gzip and zstd are read (decompress it first, or recompress with gzip or zstd)"))),
        None => Ok(()),
    }
}

pub(crate) type Source = Box<dyn BufRead + Send>;

impl Compression {
    fn name(self) -> &'static str {
        match self {
            Compression::None => "plain",
            Compression::Gzip => "gzip",
            Compression::Zstd => "zstd",
        }
    }
}

/// A decoder that counts the bytes it gives, so that its errors say where
/// in the decompressed data the stream broke.
struct Positioned<R> {
    inner: R,
    kind: Compression,
    at: u64,
}

impl<R: Read> Read for Positioned<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self.inner.read(buf) {
            Ok(n) => {
                self.at += n as u64;
                Ok(n)
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => Err(e),
            Err(e) => Err(io::Error::new(e.kind(), format!("{} stream broken at byte {} of its decompressed data: {e}", self.kind.name(), self.at))),
        }
    }
}

fn positioned(inner: impl Read + Send + 'static, kind: Compression) -> Source {
    Box::new(BufReader::with_capacity(1 << 16, Positioned { inner, kind, at: 0 }))
}

fn sniff(head: &[u8]) -> Compression {
    if head.starts_with(GZIP) {
        Compression::Gzip
    } else if head.starts_with(ZSTD) {
        Compression::Zstd
    } else {
        Compression::None
    }
}

/// Wrap `r` in a decoder if it starts with gzip or zstd magic.
pub(crate) fn decompress(mut r: Source) -> io::Result<(Compression, Source)> {
    let head = loop {
        match r.fill_buf() {
            Ok(b) => break b,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        }
    };
    let (kind, r): (Compression, Source) = if head.len() >= ZSTD.len() || head.is_empty() {
        unsupported(head)?;
        (sniff(head), r)
    } else {
        // A short first read (a pipe): gather four bytes, then put them back.
        let mut first = Vec::with_capacity(ZSTD.len());
        while first.len() < ZSTD.len() {
            let b = match r.fill_buf() {
                Ok(b) => b,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            if b.is_empty() {
                break;
            }
            let n = b.len().min(ZSTD.len() - first.len());
            first.extend_from_slice(&b[..n]);
            r.consume(n);
        }
        unsupported(&first)?;
        (sniff(&first), Box::new(Cursor::new(first).chain(r)))
    };
    Ok(match kind {
        Compression::None => (kind, r),
        Compression::Gzip => (kind, positioned(flate2::bufread::MultiGzDecoder::new(r), kind)),
        Compression::Zstd => (kind, positioned(zstd::stream::read::Decoder::with_buffer(r)?, kind)),
    })
}
