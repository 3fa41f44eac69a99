use mosaic_dev::zoned::{decode_header, ZoneCond, ZonedFile, HEADER, MAX_ZONES};
use mosaic_dev::Member;
use mosaic_format::frame::{self, HEADER_LEN, KIND_ZONED_HEADER};

use super::{frame_prefix, mutations, payload, random_inputs};
use crate::zoned_header;

/// The header block of a new zoned drive of `zones` zones of 64 KiB, the
/// first `conventional` conventional, after writes to `written` zones
/// (half a zone each, then a flush), and a zone finished.
fn header(zones: u64, conventional: u64, written: &[u64]) -> Vec<u8> {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("z");
    let z = ZonedFile::create(&p, 64 << 10, zones, conventional).unwrap();
    for &w in written {
        z.write_at(&[1; 32 << 10], w * (64 << 10)).unwrap();
    }
    z.finish_zone(zones - 1).unwrap();
    z.flush().unwrap();
    std::fs::read(&p).unwrap()[..HEADER as usize].to_vec()
}

/// The body frames what follows an odd first byte: a valid header's
/// payload behind `1`.  (A whole header block cannot go in unframed: it
/// starts with the magic `M`, which is odd.)
fn seeds() -> Vec<(&'static str, Vec<u8>)> {
    [
        ("a header of 6 zones, 2 conventional", header(6, 2, &[0, 3])),
        ("a header of 1 zone", header(1, 0, &[0])),
        ("a header of the most zones", header(MAX_ZONES, 3, &[3, 100])),
    ]
    .map(|(name, h)| (name, [&[1u8][..], payload(&h)].concat()))
    .to_vec()
}

/// The seed corpus of the cargo-fuzz target: the framed headers and the
/// payloads the body frames.
pub(super) fn corpus() -> Vec<Vec<u8>> {
    let mut v: Vec<Vec<u8>> = seeds().into_iter().map(|(_, b)| b).collect();
    v.push(header(6, 2, &[0, 3]));
    v
}

#[test]
fn random_bytes() {
    random_inputs(zoned_header, 0x20, 4000, 4200, &[&[1], &frame_prefix(KIND_ZONED_HEADER)]);
}

#[test]
fn valid_inputs_decode() {
    let h = header(6, 2, &[0, 3]);
    let hd = decode_header(&h).unwrap();
    assert_eq!((hd.zones, hd.conventional, hd.write_pointers[3]), (6, 2, (3 << 16) + (32 << 10)));
    assert_eq!((hd.conditions[1], hd.conditions[2], hd.conditions[5]), (ZoneCond::Conventional, ZoneCond::Empty, ZoneCond::Full));
    for (name, b) in seeds() {
        let framed = frame::encode(KIND_ZONED_HEADER, 0, &b[1..]);
        assert!(decode_header(&framed).is_ok(), "{name}");
    }
    assert_eq!(decode_header(&seeds()[2].1[..0]).unwrap_err(), "zone header truncated (0 bytes)");
}

#[test]
fn valid_inputs_damaged() {
    for (name, b) in seeds() {
        // Flips behind the body's good checksum: the geometry, every row
        // of the small headers.
        mutations(zoned_header, name, &b, 24 + 9 * 6 + 1, b.len());
    }
    let h = header(6, 2, &[0, 3]);
    mutations(zoned_header, "a header block", &h, 64, HEADER_LEN + 24 + 9 * 6 + 1);
}
