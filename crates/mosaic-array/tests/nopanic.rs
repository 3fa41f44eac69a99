//! The fixed-array decoders never panic: the superblock (a member label of
//! `mosaic_format` with the fixed kind's policy blob), the journal header
//! and journal records with their entry tables (alone and as
//! `Journal::open` reads them from a device), on random bytes and on valid
//! encodings with bytes flipped or cut short — with checksums left wrong,
//! and made right again so that the checks behind them are reached.  `Ok`
//! or a clear error, always.

use std::sync::Arc;

use proptest::prelude::*;
use uuid::Uuid;

use mosaic_array::journal::{decode_entry_table, decode_header, decode_record, encode_header, encode_record, Entry, Journal, HEADER_BYTES, MIN_JOURNAL};
use mosaic_array::{Array, CreateOptions, Superblock, DATA_OFFSET};
use mosaic_dev::{MemMember, Member};

/// A valid superblock of a small raid6 array.
fn superblock() -> Superblock {
    let mems = (0..6).map(|i| (Arc::new(MemMember::new(format!("m{i}"), DATA_OFFSET + (64 << 10))) as Arc<dyn Member>, format!("m{i}"))).collect();
    let o = CreateOptions { level: "raid6".parse().unwrap(), members: Some(6), member_size: None, unit: 4096, block: 4096, force: true, assume_clean: true };
    Array::create_on(mems, &o, true).unwrap().superblock()
}

/// Make a frame's checksum right again (it covers the first 20 bytes and
/// the payload whose length they give, as much of it as `b` holds).
fn reseal_frame(b: &mut [u8]) {
    if b.len() < 24 {
        return;
    }
    let len = (u32::from_le_bytes(b[16..20].try_into().unwrap()) as usize).min(b.len() - 24);
    let crc = crc32c::crc32c_append(crc32c::crc32c(&b[0..20]), &b[24..24 + len]);
    b[20..24].copy_from_slice(&crc.to_le_bytes());
}

/// Make a journal record's checksums right again: its entry table's (for
/// the entry count it claims, when the table fits `b`) and its frame's.
fn reseal_record(b: &mut [u8]) {
    if b.len() >= 32 {
        let count = u32::from_le_bytes(b[24..28].try_into().unwrap()) as u64;
        let end = 32 + count * 24;
        if end <= b.len() as u64 {
            let crc = crc32c::crc32c_append(crc32c::crc32c(&b[24..28]), &b[32..end as usize]);
            b[28..32].copy_from_slice(&crc.to_le_bytes());
        }
    }
    reseal_frame(b);
}

/// A frame header of `kind` over `b`'s first 24 bytes (magic, version).
fn frame_head(b: &mut [u8], kind: u16) {
    if b.len() >= 8 {
        b[..4].copy_from_slice(b"MOSF");
        b[4..6].copy_from_slice(&1u16.to_le_bytes());
        b[6..8].copy_from_slice(&kind.to_le_bytes());
    }
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
    let j = Journal::format(dev.clone() as Arc<dyn Member>, id, Uuid::nil()).unwrap();
    let mut starts = Vec::new();
    for i in 0..5u8 {
        starts.push(HEADER_BYTES + j.used());
        let d = vec![i; 1000 + 700 * i as usize];
        let entries = [
            Entry::Device { member: i as usize, offset: 4096 * i as u64, data: &d[..] },
            Entry::Device { member: 5, offset: 0, data: &d[..100] },
            Entry::Resync { row: i as u64 },
            Entry::Logical { offset: 512, data: &d[..200] },
        ];
        j.try_append(&entries).unwrap().unwrap();
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

/// Lost ranges round-trip, raise the version on disk (so an older mosaic
/// refuses the array), and bad lists are clear errors.
#[test]
fn superblock_lost_ranges_round_trip_and_are_checked() {
    use mosaic_array::superblock::{LOSSY_GROWING_VERSION, LOSSY_VERSION};
    use mosaic_array::LostRange;
    let mut sb = superblock();
    sb.lost = vec![LostRange { offset: 0, len: 4096 }, LostRange { offset: 16384, len: 8192 }];
    let enc = sb.encode().unwrap();
    assert_eq!(Superblock::decode(&enc).unwrap().lost, sb.lost);
    let label = mosaic_format::label::Label::decode(&enc).unwrap();
    assert_eq!(label.policy["format_version"], LOSSY_VERSION);
    sb.reshape = Some(mosaic_array::superblock::Reshape { from: sb.geometry.clone(), pos: 0, backup_crc: None, backup_file: None });
    let label = mosaic_format::label::Label::decode(&sb.encode().unwrap()).unwrap();
    assert_eq!(label.policy["format_version"], LOSSY_GROWING_VERSION);
    sb.reshape = None;
    let cap = sb.geometry.capacity();
    for (bad, why) in [
        (vec![LostRange { offset: 0, len: 0 }], "empty"),
        (vec![LostRange { offset: 8192, len: 4096 }, LostRange { offset: 0, len: 4096 }], "out of order"),
        (vec![LostRange { offset: 0, len: 4096 }, LostRange { offset: 4096, len: 4096 }], "touching"),
        (vec![LostRange { offset: cap - 4096, len: 8192 }], "past the capacity"),
        (vec![LostRange { offset: u64::MAX, len: 2 }], "overflow"),
    ] {
        sb.lost = bad;
        let e = Superblock::decode(&sb.encode().unwrap()).unwrap_err();
        assert!(format!("{e:?}").contains("lost range"), "{why}: {e:?}");
    }
    // A version that does not say what the label holds is refused: lost
    // ranges under the plain version, or the lossy version without any.
    for (lost, v) in [(true, 3), (false, LOSSY_VERSION)] {
        sb.lost = if lost { vec![LostRange { offset: 0, len: 4096 }] } else { Vec::new() };
        let mut label = mosaic_format::label::Label::decode(&sb.encode().unwrap()).unwrap();
        label.policy["format_version"] = v.into();
        let e = Superblock::decode(&label.encode().unwrap()).unwrap_err();
        assert!(format!("{e:?}").contains("unsupported format version"), "{e:?}");
    }
}

/// A paused hot replace's record round-trips, and one naming a member or
/// a stripe the array does not have is a clear error.
#[test]
fn superblock_paused_hot_replace_round_trips_and_is_checked() {
    use mosaic_array::superblock::{HotCopy, MemberRole};
    let mut sb = superblock();
    let rec = HotCopy { member: 5, old: sb.member_uuids[5], uuid: Uuid::new_v4(), path: "/d/new.img".into(), copied: sb.geometry.stripes, spare: true };
    sb.hot = Some(rec.clone());
    sb.role = MemberRole::Replacement;
    let back = Superblock::decode(&sb.encode().unwrap()).unwrap();
    assert_eq!((back.hot, back.role), (Some(rec.clone()), MemberRole::Replacement));
    for (bad, why) in [(HotCopy { member: 6, ..rec.clone() }, "member"), (HotCopy { copied: sb.geometry.stripes + 1, ..rec.clone() }, "stripe")] {
        sb.hot = Some(bad);
        let e = Superblock::decode(&sb.encode().unwrap()).unwrap_err();
        assert!(format!("{e:?}").contains("a hot replace of member"), "{why}: {e:?}");
    }
}

/// Write-mostly slots round-trip on a mirror; on a layout that is no
/// mirror, out of range, out of order or naming every slot they are a
/// clear error.
#[test]
fn superblock_write_mostly_round_trips_and_is_checked() {
    let mems = (0..3).map(|i| (Arc::new(MemMember::new(format!("m{i}"), DATA_OFFSET + (64 << 10))) as Arc<dyn Member>, format!("m{i}"))).collect();
    let o = CreateOptions { level: "raid1".parse().unwrap(), members: Some(3), member_size: None, unit: 4096, block: 4096, force: true, assume_clean: true };
    let mut sb = Array::create_on(mems, &o, true).unwrap().superblock();
    sb.write_mostly = vec![0, 2];
    assert_eq!(Superblock::decode(&sb.encode().unwrap()).unwrap().write_mostly, [0, 2]);
    for bad in [vec![3], vec![2, 0], vec![1, 1], vec![0, 1, 2]] {
        sb.write_mostly = bad.clone();
        let e = Superblock::decode(&sb.encode().unwrap()).unwrap_err();
        assert!(format!("{e:?}").contains("write-mostly members"), "{bad:?}: {e:?}");
    }
    let mut r6 = superblock();
    r6.write_mostly = vec![1];
    assert!(format!("{:?}", Superblock::decode(&r6.encode().unwrap()).unwrap_err()).contains("write-mostly members [1]"));
}

/// Adding merges what touches and never lists more than `MAX_LOST`
/// ranges (ranges only grow); writing clears whole units only.
#[test]
fn lost_lists_merge_and_clear_by_whole_units() {
    use mosaic_array::superblock::{lost_with, lost_without, MAX_LOST};
    use mosaic_array::LostRange;
    let r = |offset: u64, len: u64| LostRange { offset, len };
    assert_eq!(lost_with(&[r(0, 4096)], &[r(4096, 4096), r(16384, 4096), r(12288, 0)]), vec![r(0, 8192), r(16384, 4096)]);
    let many: Vec<LostRange> = (0..MAX_LOST as u64 + 10).map(|i| r(i * 3 * 4096 + (i % 2) * 4096, 4096)).collect();
    let l = lost_with(&[], &many);
    assert_eq!(l.len(), MAX_LOST);
    for m in &many {
        assert!(l.iter().any(|x| x.offset <= m.offset && x.end() >= m.end()), "{m:?} dropped");
    }
    let l = vec![r(0, 16384), r(32768, 4096)];
    // A write of 1000..9192 covers the unit 4096..8192 only.
    assert_eq!(lost_without(&l, 1000, 9192, 4096), vec![r(0, 4096), r(8192, 8192), r(32768, 4096)]);
    assert_eq!(lost_without(&l, 0, 40960, 4096), vec![]);
    assert_eq!(lost_without(&l, 100, 4000, 4096), l);
}

#[test]
fn resealed_nonsense_is_a_clear_error() {
    // A record whose entry claims more bytes than its payload holds,
    // checksums made right.
    let mut r = encode_record(3, &[Entry::Device { member: 1, offset: 0, data: &[9u8; 600] }]);
    r[48..56].copy_from_slice(&5000u64.to_le_bytes());
    reseal_record(&mut r);
    assert_eq!(decode_record(&r).unwrap_err(), "journal record entry table disagrees with its payload length");
    assert_eq!(decode_entry_table(&r), None);
    // An entry of an unknown type.
    let mut r = encode_record(3, &[Entry::Resync { row: 2 }]);
    r[32] = 9;
    reseal_record(&mut r);
    assert!(decode_record(&r).unwrap_err().contains("unknown type 9"));
    // A journal header naming a checkpoint at the end of the sequence space.
    let (dev, id, _) = journal_with_records();
    let h = encode_header(id, dev.size(), u64::MAX, Uuid::nil());
    dev.write_at(&h, 0).unwrap();
    let e = Journal::open(dev.clone(), id).err().unwrap().to_string();
    assert!(e.ends_with(&format!("corrupt journal header (impossible checkpoint sequence {})", u64::MAX)), "{e}");
    assert_eq!(decode_header(&h).unwrap_err(), format!("corrupt journal header (impossible checkpoint sequence {})", u64::MAX));
}

proptest! {
    #[test]
    fn superblock_random_bytes_never_panic(b in proptest::collection::vec(any::<u8>(), 0..600), magic in any::<bool>()) {
        let mut b = b;
        if magic {
            frame_head(&mut b, 0x0200);
            reseal_frame(&mut b);
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
            reseal_frame(&mut b);
        }
        let _ = Superblock::decode(&b);
        let _ = Superblock::decode(&b[..cut % (b.len() + 1)]);
    }

    #[test]
    fn journal_headers_never_panic(
        b in proptest::collection::vec(any::<u8>(), 0..64),
        flips in proptest::collection::vec((0usize..52, any::<u8>()), 1..4),
        cut in 0usize..53,
        sealed in any::<bool>(),
    ) {
        let mut b = b;
        let _ = decode_header(&b);
        frame_head(&mut b, 0x0100);
        reseal_frame(&mut b);
        let _ = decode_header(&b);
        let (dev, _, _) = journal_with_records();
        let mut h = vec![0u8; 52];
        dev.read_at(&mut h, 0).unwrap();
        flip(&mut h, &flips);
        if sealed {
            reseal_frame(&mut h);
        }
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
        frame_head(&mut rnd, 0x0101);
        reseal_record(&mut rnd);
        let _ = decode_record(&rnd);
        let _ = decode_entry_table(&rnd);
        let entries = [
            Entry::Device { member: 0, offset: 4096, data: &[1u8; 700][..] },
            Entry::Device { member: 3, offset: 0, data: &[2u8; 300][..] },
            Entry::Resync { row: 5 },
            Entry::Logical { offset: 8192, data: &[3u8; 100][..] },
        ];
        let mut r = encode_record(4, &entries);
        flip(&mut r, &flips);
        if sealed {
            reseal_record(&mut r);
        }
        for b in [&r[..], &r[..cut % (r.len() + 1)]] {
            if let Ok((_, es, len)) = decode_record(b) {
                prop_assert!(len as usize >= es.iter().map(|e| e.bytes().len()).sum::<usize>());
            }
            if let Some(es) = decode_entry_table(b) {
                prop_assert!(es.len() <= b.len() / 24, "{} entries from {} bytes", es.len(), b.len());
            }
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
                dev.write_at(&r, starts[rec]).unwrap();
            }
        }
        if let Ok((_, log)) = Journal::open(dev.clone(), id) {
            prop_assert!(log.len() <= 5, "{} records from 5", log.len());
            let (apply, held) = log.replayable();
            prop_assert!(apply.len() + held.len() == log.records.len());
        }
    }
}
