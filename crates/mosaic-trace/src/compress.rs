//! Transparent gzip / zstd decompression, chosen by magic bytes (never by
//! file extension): gzip `1f 8b`, zstd `28 b5 2f fd`.  Concatenated gzip
//! members and zstd frames are read through.

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

pub(crate) type Source = Box<dyn BufRead + Send>;

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
        (sniff(&first), Box::new(Cursor::new(first).chain(r)))
    };
    Ok(match kind {
        Compression::None => (kind, r),
        Compression::Gzip => (kind, Box::new(BufReader::with_capacity(1 << 16, flate2::bufread::MultiGzDecoder::new(r)))),
        Compression::Zstd => (kind, Box::new(BufReader::with_capacity(1 << 16, zstd::stream::read::Decoder::with_buffer(r)?))),
    })
}
