//! The fixed-array decoders never panic: the superblock, the journal header
//! and journal records (alone and as `Journal::open` reads them from a
//! device), on random bytes and on valid encodings with bytes flipped or
//! cut short — with checksums left wrong, and made right again so that
//! the checks behind them are reached.  `Ok` or a clear error, always.

use std::sync::Arc;

use proptest::prelude::*;
use uuid::Uuid;

use mosaic_array::journal::{decode_header, decode_op_table, decode_record, encode_record, Journal, HEADER_BYTES, MIN_JOURNAL};
use mosaic_array::{Array, CreateOptions, Superblock, DATA_OFFSET};
use mosaic_dev::{MemMember, Member};

/// A valid superblock of a small raid6 array.
fn superblock() -> Superblock {
    let mems = (0..6).map(|i| (Arc::new(MemMember::new(format!("m{i}"), DATA_OFFSET + (64 << 10))) as Arc<dyn Member>, format!("m{i}"))).collect();
    let o = CreateOptions { level: "raid6".parse().unwrap(), members: Some(6), member_size: None, unit: 4096, block: 4096, force: true, assume_clean: true };
    Array::create_on(mems, &o, true).unwrap().superblock()
}

/// Make a superblock slot's checksum right again (it covers the first 16
/// bytes and the payload whose length they give).
fn reseal_superblock(b: &mut [u8]) {
    if b.len() < 20 {
        return;
    }
    let len = (u32::from_le_bytes(b[12..16].try_into().unwrap()) as usize).min(b.len() - 20);
    let crc = crc32c::crc32c_append(crc32c::crc32c(&b[0..16]), &b[20..20 + len]);
    b[16..20].copy_from_slice(&crc.to_le_bytes());
}

/// Make a journal record's checksum right again for the lengths its
/// header claims (when they fit `b`).
fn reseal_record(b: &mut [u8]) {
    if b.len() < 32 {
        return;
    }
    let nops = u32::from_le_bytes(b[16..20].try_into().unwrap()) as u64;
    let payload = u64::from_le_bytes(b[20..28].try_into().unwrap());
    let raw = 32 + nops * 16;
    let Some(raw) = raw.checked_add(payload).filter(|&r| r <= b.len() as u64) else { return };
    let crc = crc32c::crc32c_append(crc32c::crc32c(&b[0..28]), &b[32..raw as usize]);
    b[28..32].copy_from_slice(&crc.to_le_bytes());
}

fn flip(b: &mut [u8], flips: &[(usize, u8)]) {
    let n = b.len();
    if n > 0 {
        for &(at, x) in flips {
            b[at % n] ^= x;
        }
    }
}

/// A journal device with a few records, and where they start.
fn journal_with_records() -> (Arc<MemMember>, Uuid, Vec<u64>) {
    let dev = Arc::new(MemMember::new("j", MIN_JOURNAL));
    let id = Uuid::from_u128(7);
    let j = Journal::format(dev.clone() as Arc<dyn Member>, id).unwrap();
    let mut starts = Vec::new();
    for i in 0..5u8 {
        starts.push(HEADER_BYTES + j.used());
        let d = vec![i; 1000 + 700 * i as usize];
        j.try_append(&[(i as usize, 4096 * i as u64, &d), (5, 0, &d[..100])]).unwrap().unwrap();
    }
    j.sync_to(5).unwrap();
    (dev, id, starts)
}

/// `Superblock::validate` checks `stripes * unit` for overflow.
#[test]
fn superblock_geometry_overflow_is_a_clear_error() {
    // A superblock whose geometry claims more bytes than a u64 holds.
    let mut sb = superblock();
    sb.geometry.stripes = u64::MAX / 2;
    let e = Superblock::decode(&sb.encode().unwrap()).unwrap_err();
    assert!(format!("{e:?}").contains("geometry"), "{e:?}");
}

#[test]
fn resealed_nonsense_is_a_clear_error() {
    // A record whose op table overruns its payload, checksum made right.
    let mut r = encode_record(3, &[(1, 0, &[9u8; 600])]);
    r[44..48].copy_from_slice(&5000u32.to_le_bytes());
    reseal_record(&mut r);
    assert_eq!(decode_record(&r).unwrap_err(), "journal record op table disagrees with its payload length");
    assert_eq!(decode_op_table(&r), None);
    // A journal header naming a checkpoint at the end of the sequence space.
    let (dev, id, _) = journal_with_records();
    let mut h = vec![0u8; 48];
    dev.read_at(&mut h, 0).unwrap();
    h[36..44].copy_from_slice(&u64::MAX.to_le_bytes());
    let crc = crc32c::crc32c(&h[0..44]);
    h[44..48].copy_from_slice(&crc.to_le_bytes());
    dev.write_at(&h, 0).unwrap();
    let e = Journal::open(dev.clone(), id).err().unwrap().to_string();
    assert!(e.ends_with(&format!("corrupt journal header (impossible checkpoint sequence {})", u64::MAX)), "{e}");
    assert_eq!(decode_header(&h).unwrap_err(), format!("corrupt journal header (impossible checkpoint sequence {})", u64::MAX));
}

proptest! {
    #[test]
    fn superblock_random_bytes_never_panic(b in proptest::collection::vec(any::<u8>(), 0..600), magic in any::<bool>()) {
        let mut b = b;
        if magic && b.len() >= 12 {
            b[..8].copy_from_slice(b"MOSAICSB");
            b[8..12].copy_from_slice(&2u32.to_le_bytes());
            reseal_superblock(&mut b);
        }
        let _ = Superblock::decode(&b);
    }

    #[test]
    fn damaged_superblocks_never_panic(
        flips in proptest::collection::vec((any::<usize>(), any::<u8>()), 1..6),
        cut in any::<usize>(),
        sealed in any::<bool>(),
    ) {
        let mut b = superblock().encode().unwrap();
        flip(&mut b[..200], &flips);
        if sealed {
            reseal_superblock(&mut b);
        }
        let _ = Superblock::decode(&b);
        let _ = Superblock::decode(&b[..cut % (b.len() + 1)]);
    }

    #[test]
    fn journal_headers_never_panic(
        b in proptest::collection::vec(any::<u8>(), 0..64),
        flips in proptest::collection::vec((0usize..48, any::<u8>()), 1..4),
        cut in 0usize..49,
    ) {
        let _ = decode_header(&b);
        let (dev, _, _) = journal_with_records();
        let mut h = vec![0u8; 48];
        dev.read_at(&mut h, 0).unwrap();
        flip(&mut h, &flips);
        let _ = decode_header(&h);
        let _ = decode_header(&h[..cut]);
    }

    #[test]
    fn journal_records_never_panic(
        b in proptest::collection::vec(any::<u8>(), 0..300),
        flips in proptest::collection::vec((any::<usize>(), any::<u8>()), 1..6),
        cut in any::<usize>(),
        sealed in any::<bool>(),
    ) {
        let mut rnd = b;
        if rnd.len() >= 8 {
            rnd[..8].copy_from_slice(b"MJRECORD");
            reseal_record(&mut rnd);
        }
        let _ = decode_record(&rnd);
        let _ = decode_op_table(&rnd);
        let mut r = encode_record(4, &[(0, 4096, &[1u8; 700]), (3, 0, &[2u8; 300])]);
        flip(&mut r, &flips);
        if sealed {
            reseal_record(&mut r);
        }
        for b in [&r[..], &r[..cut % (r.len() + 1)]] {
            if let Ok((_, ops, len)) = decode_record(b) {
                prop_assert!(len as usize >= ops.iter().map(|o| o.data.len()).sum::<usize>());
            }
            let _ = decode_op_table(b);
        }
    }

    /// Geometry fields that decode but disagree, checksum made right, as a
    /// damaged copy may carry (see `superblock_geometry_overflow_is_a_clear_error`).
    #[test]
    fn superblock_geometry_never_panics(stripes in any::<u64>(), unit in any::<u64>(), members in 0usize..300) {
        let mut sb = superblock();
        sb.geometry.stripes = stripes >> (stripes % 64);
        sb.geometry.unit = unit >> (unit % 64);
        sb.geometry.members = members;
        let _ = Superblock::decode(&sb.encode().unwrap());
    }

    /// `Journal::open` on a device whose records (and scan area) are
    /// damaged: every length it reads is checked against the device.
    #[test]
    fn damaged_journal_devices_never_panic(
        flips in proptest::collection::vec((0usize..5, 0u64..4000, any::<u8>()), 1..6),
        sealed in any::<bool>(),
    ) {
        let (dev, id, starts) = journal_with_records();
        for (rec, off, x) in flips {
            let at = starts[rec] + off;
            let mut b = [0u8];
            dev.read_at(&mut b, at).unwrap();
            dev.write_at(&[b[0] ^ x], at).unwrap();
            if sealed {
                let mut r = vec![0u8; 8192];
                dev.read_at(&mut r, starts[rec]).unwrap();
                reseal_record(&mut r);
                dev.write_at(&r[..32], starts[rec]).unwrap();
            }
        }
        if let Ok((_, log)) = Journal::open(dev.clone(), id) {
            prop_assert!(log.len() <= 5, "{} records from 5", log.len());
            let (apply, held) = log.replayable();
            prop_assert!(apply.len() + held.len() == log.records.len());
        }
    }
}
