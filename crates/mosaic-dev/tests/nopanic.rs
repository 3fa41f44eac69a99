//! The zone header decoder never panics: random bytes, and valid headers
//! with bytes flipped or cut short, give `Ok` or a clear error.

use proptest::prelude::*;

use mosaic_dev::zoned::{decode_header, ZonedFile};

/// A valid header block of a drive of `zones` zones of 64 KiB.
fn valid_header(zones: u64, conventional: u64) -> Vec<u8> {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("z");
    ZonedFile::create(&p, 64 << 10, zones, conventional).unwrap();
    std::fs::read(&p).unwrap()[..4096].to_vec()
}

/// The checksum of a header whose fields were changed, made right again,
/// so the field checks behind it are reached.
fn reseal(h: &mut [u8]) {
    if h.len() < 28 {
        return;
    }
    let zones = u64::from_le_bytes(h[20..28].try_into().unwrap());
    if let Some(body) = zones.checked_mul(9).and_then(|b| b.checked_add(36)).filter(|&b| b + 4 <= h.len() as u64) {
        let body = body as usize;
        let crc = crc32c::crc32c(&h[..body]);
        h[body..body + 4].copy_from_slice(&crc.to_le_bytes());
    }
}

#[test]
fn a_valid_header_decodes_and_damage_is_named() {
    let h = valid_header(6, 2);
    let hd = decode_header(&h).unwrap();
    assert_eq!((hd.zone_size, hd.zones, hd.conventional, hd.write_pointers[3]), (64 << 10, 6, 2, 3 * (64 << 10)));
    assert_eq!(decode_header(&h[..30]).unwrap_err(), "zone header truncated (30 bytes)");
    let mut big = h.clone();
    big[12..20].copy_from_slice(&u64::MAX.to_le_bytes());
    reseal(&mut big);
    assert_eq!(decode_header(&big).unwrap_err(), format!("corrupt zone header (6 zones of {} bytes overflow)", u64::MAX));
    let mut wp = h.clone();
    wp[36 + 9 * 4..36 + 9 * 4 + 8].copy_from_slice(&u64::MAX.to_le_bytes());
    reseal(&mut wp);
    assert_eq!(decode_header(&wp).unwrap_err(), "zone 4: corrupt write pointer or condition");
}

proptest! {
    #[test]
    fn random_bytes_never_panic(mut b in proptest::collection::vec(any::<u8>(), 0..4200), magic in any::<bool>()) {
        if magic && b.len() >= 12 {
            b[..8].copy_from_slice(b"MOSAICZD");
            b[8..12].copy_from_slice(&1u32.to_le_bytes());
            reseal(&mut b);
        }
        let _ = decode_header(&b);
    }

    #[test]
    fn damaged_headers_never_panic(
        zones in 1u64..40,
        flips in proptest::collection::vec((0usize..4096, any::<u8>()), 1..8),
        cut in 0usize..4097,
        sealed in any::<bool>(),
    ) {
        let mut h = valid_header(zones, zones / 2);
        for (at, x) in flips {
            h[at] ^= x;
        }
        if sealed {
            reseal(&mut h);
        }
        let _ = decode_header(&h);
        let _ = decode_header(&h[..cut]);
    }
}
