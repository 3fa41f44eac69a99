//! The zone header decoder never panics: random bytes, and valid headers
//! with bytes flipped or cut short, give `Ok` or a clear error.

use proptest::prelude::*;

use mosaic_dev::zoned::{decode_header, ZonedFile, HEADER};
use mosaic_format::frame::{self, HEADER_LEN, KIND_ZONED_HEADER};

/// A valid header block of a drive of `zones` zones of 64 KiB.
fn valid_header(zones: u64, conventional: u64) -> Vec<u8> {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("z");
    ZonedFile::create(&p, 64 << 10, zones, conventional).unwrap();
    std::fs::read(&p).unwrap()[..HEADER as usize].to_vec()
}

/// Frame `payload` as a header block, so the field checks behind the
/// frame's checksum are reached.
fn sealed(payload: &[u8]) -> Vec<u8> {
    let mut h = frame::encode(KIND_ZONED_HEADER, 0, payload);
    h.resize(h.len().max(HEADER as usize), 0);
    h
}

/// The payload of a header block (what the frame carries).
fn payload(h: &[u8]) -> Vec<u8> {
    let len = u32::from_le_bytes(h[16..20].try_into().unwrap()) as usize;
    h[HEADER_LEN..HEADER_LEN + len].to_vec()
}

#[test]
fn a_valid_header_decodes_and_damage_is_named() {
    let h = valid_header(6, 2);
    let hd = decode_header(&h).unwrap();
    assert_eq!((hd.zone_size, hd.zones, hd.conventional, hd.write_pointers[3]), (64 << 10, 6, 2, 3 * (64 << 10)));
    assert_eq!(decode_header(&h[..30]).unwrap_err(), "zone header truncated (30 bytes)");
    assert_eq!(decode_header(&[0u8; 4096]).unwrap_err(), "not an emulated zoned drive (no zone header)");
    let mut bad = h.clone();
    bad[HEADER_LEN + 3] ^= 1;
    assert_eq!(decode_header(&bad).unwrap_err(), "corrupt zone header (checksum mismatch)");
    let mut big = payload(&h);
    big[0..8].copy_from_slice(&u64::MAX.to_le_bytes());
    assert_eq!(decode_header(&sealed(&big)).unwrap_err(), format!("corrupt zone header (6 zones of {} bytes overflow)", u64::MAX));
    let mut wp = payload(&h);
    wp[24 + 9 * 4..24 + 9 * 4 + 8].copy_from_slice(&u64::MAX.to_le_bytes());
    assert_eq!(decode_header(&sealed(&wp)).unwrap_err(), "zone 4: corrupt write pointer or condition");
    let mut short = payload(&h);
    short.pop();
    assert_eq!(decode_header(&sealed(&short)).unwrap_err(), "corrupt zone header (impossible geometry)");
    assert_eq!(decode_header(&sealed(&[1, 2, 3])).unwrap_err(), "corrupt zone header (a payload of 3 bytes)");
    let other = frame::encode(frame::KIND_DVS_LOG, 0, &payload(&h));
    assert_eq!(decode_header(&other).unwrap_err(), "not an emulated zoned drive (no zone header)");
}

proptest! {
    #[test]
    fn random_bytes_never_panic(b in proptest::collection::vec(any::<u8>(), 0..4200), framed in any::<bool>()) {
        let b = if framed { sealed(&b) } else { b };
        let _ = decode_header(&b);
    }

    #[test]
    fn damaged_headers_never_panic(
        zones in 1u64..40,
        flips in proptest::collection::vec((0usize..4096, any::<u8>()), 1..8),
        cut in 0usize..4097,
        reseal in any::<bool>(),
    ) {
        let h = valid_header(zones, zones / 2);
        let mut h = if reseal { payload(&h) } else { h };
        for (at, x) in flips {
            let n = h.len();
            h[at % n] ^= x;
        }
        if reseal {
            h = sealed(&h);
        }
        let _ = decode_header(&h);
        let _ = decode_header(&h[..cut.min(h.len())]);
    }
}
