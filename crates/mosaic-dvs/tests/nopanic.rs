//! DVS metadata decoders never panic: random bytes, and valid encodings
//! with bytes flipped or cut short (with their checksums left wrong, and
//! made right again so the parsers behind them are reached), give `Ok` or
//! a clear error.  What decodes is applied to tables, as recovery does.

use proptest::prelude::*;

use mosaic_core::MemberState;
use mosaic_dvs::meta::{decode_checkpoint, decode_journal, decode_record, encode_checkpoint, encode_journal, peek_record, MetaLayout, Record, Superblock};
use mosaic_dvs::tables::Tables;
use mosaic_dvs::{DvsConfig, Geo};

fn geo() -> Geo {
    Geo::new(DvsConfig::new(4, 1, 4096, 8 * 4096, 8, 1)).unwrap()
}

/// Tables with stripes in two SSGs, as a running array has them.
fn busy_tables() -> Tables {
    let mut t = Tables::new(geo());
    let h = vec![true; 4];
    for lsn in [1, 4] {
        let rows = t.layout(lsn, &[0, 1, 2, 3, 4, 7], &h).unwrap();
        t.commit(lsn, &rows).unwrap();
    }
    t
}

/// One log record of every kind, framed.
fn records() -> Vec<Vec<u8>> {
    let t = busy_tables();
    let rows = t.layout(2, &[5, 6, 9], &[true; 4]).unwrap();
    let spare = t.spares().next().unwrap();
    vec![
        Record::Append { lsn: 2, rows: rows.clone() }.encode(11),
        Record::Compact { lsn: 1, phys: spare, rows }.encode(12),
        Record::JournalReset { from: 1 << 40 }.encode(13),
        Record::Member { m: 2, state: MemberState::Rebuilding { done: 3 } }.encode(14),
    ]
}

/// Make the frame checksum right again after `b` was changed (magic of
/// `magic` bytes, then seq u64, len u32, crc u32, payload).
fn reseal(b: &mut [u8], magic: usize) {
    let h = magic + 16;
    if b.len() < h {
        return;
    }
    let len = u32::from_le_bytes(b[magic + 8..magic + 12].try_into().unwrap()) as usize;
    let Some(payload) = b.get(h..h.saturating_add(len)) else { return };
    let mut c = b[magic..magic + 12].to_vec();
    c.extend_from_slice(payload);
    let crc = crc32c::crc32c(&c);
    b[magic + 12..h].copy_from_slice(&crc.to_le_bytes());
}

/// Flip bytes of `b` (positions taken modulo its length).
fn flip(b: &mut [u8], flips: &[(usize, u8)]) {
    if b.is_empty() {
        return;
    }
    let n = b.len();
    for &(at, x) in flips {
        b[at % n] ^= x;
    }
}

/// Decode a log record and, if it decodes, apply it as recovery does.
fn decode_and_apply(b: &[u8]) {
    let g = geo();
    let _ = peek_record(b);
    if let Some((_, r, len)) = decode_record(b, &g) {
        assert!(len <= b.len());
        let _ = r.apply(&mut Tables::new(g.clone()));
        let _ = r.apply(&mut busy_tables());
    }
}

#[test]
fn valid_encodings_decode_and_resealed_damage_is_refused() {
    let g = geo();
    for r in records() {
        let (_, rec, len) = decode_record(&r, &g).unwrap();
        assert_eq!(len, r.len());
        rec.apply(&mut busy_tables()).unwrap();
    }
    // A stripe naming member 200 of 4, with a good checksum: refused by apply.
    let bad = Record::Append { lsn: 2, rows: vec![mosaic_dvs::tables::Stripe { lcns: vec![1], members: vec![200, 1], idx: vec![0, 0] }] };
    let (_, rec, _) = decode_record(&bad.encode(3), &g).unwrap();
    let e = rec.apply(&mut Tables::new(g.clone())).unwrap_err().to_string();
    assert!(e.contains("member 200"), "{e}");
    // A superblock claiming a length beyond its block.
    let mut sb = Superblock { config: g.cfg.clone(), uuid: 1, member: 0 }.encode();
    sb[12..16].copy_from_slice(&u32::MAX.to_le_bytes());
    assert!(Superblock::decode(&sb).unwrap_err().to_string().contains("superblock length out of range"));
    // Conventional zones whose size overflows: a geometry error.
    let mut cfg = g.cfg.clone();
    cfg.zone_size = 1 << 62;
    cfg.chunk = 1 << 40;
    cfg.zones = 64;
    cfg.conventional = 8;
    let big = Geo::new(cfg).unwrap();
    let e = MetaLayout::new(&big).unwrap_err().to_string();
    assert_eq!(e, format!("bad DVS geometry: 8 conventional zones of {} bytes overflow", 1u64 << 62));
}

proptest! {
    #[test]
    fn random_bytes_never_panic(b in proptest::collection::vec(any::<u8>(), 0..600), kind in 0u8..4) {
        let mut b = b;
        let magic: &[u8] = [&b"DVLR"[..], b"DVJR", b"DVSCKPT2", b"MOSAICDV"][kind as usize];
        if b.len() >= magic.len() {
            b[..magic.len()].copy_from_slice(magic);
        }
        if kind < 3 {
            reseal(&mut b, magic.len());
        }
        decode_and_apply(&b);
        let _ = decode_journal(&b);
        let _ = decode_checkpoint(&b, &geo());
        let _ = Superblock::decode(&b);
    }

    #[test]
    fn damaged_log_records_never_panic(
        which in 0usize..4,
        flips in proptest::collection::vec((any::<usize>(), any::<u8>()), 1..6),
        cut in any::<usize>(),
        sealed in any::<bool>(),
    ) {
        let mut r = records()[which].clone();
        flip(&mut r, &flips);
        if sealed {
            reseal(&mut r, 4);
        }
        decode_and_apply(&r);
        decode_and_apply(&r[..cut % (r.len() + 1)]);
    }

    #[test]
    fn damaged_journal_entries_never_panic(
        data in proptest::collection::vec(any::<u8>(), 0..64),
        flips in proptest::collection::vec((any::<usize>(), any::<u8>()), 1..6),
        cut in any::<usize>(),
        sealed in any::<bool>(),
    ) {
        let mut e = encode_journal(5, 4096, &data);
        flip(&mut e, &flips);
        if sealed {
            reseal(&mut e, 4);
        }
        if let Some((_, _, d, len)) = decode_journal(&e) {
            prop_assert!(len <= e.len() && d.len() < len);
        }
        let _ = decode_journal(&e[..cut % (e.len() + 1)]);
    }

    #[test]
    fn damaged_checkpoints_never_panic(
        flips in proptest::collection::vec((any::<usize>(), any::<u8>()), 1..6),
        cut in any::<usize>(),
        sealed in any::<bool>(),
    ) {
        let g = geo();
        let mut c = encode_checkpoint(&busy_tables(), 9);
        flip(&mut c, &flips);
        if sealed {
            reseal(&mut c, 8);
        }
        let _ = decode_checkpoint(&c, &g);
        let _ = decode_checkpoint(&c[..cut % (c.len() + 1)], &g);
    }

    #[test]
    fn damaged_superblocks_never_panic(
        flips in proptest::collection::vec((0usize..400, any::<u8>()), 1..6),
        cut in 0usize..4097,
        sealed in any::<bool>(),
        fields in proptest::array::uniform8(any::<u64>()),
    ) {
        let mut cfg = geo().cfg;
        // Random geometry fields, as a damaged (but checksummed) superblock may carry.
        (cfg.chunk, cfg.zone_size, cfg.zones, cfg.conventional, cfg.block, cfg.spare, cfg.op_pct, cfg.cache_chunks) =
            (fields[0] >> (fields[0] % 64), fields[1] >> (fields[1] % 64), fields[2] >> (fields[2] % 64), fields[3] >> (fields[3] % 64),
             fields[4] >> (fields[4] % 64), fields[5] >> (fields[5] % 64), fields[6] % 200, fields[7] >> (fields[7] % 64));
        let mut b = Superblock { config: cfg, uuid: 7, member: 1 }.encode();
        flip(&mut b, &flips);
        if sealed && b.len() >= 16 {
            let len = (u32::from_le_bytes(b[12..16].try_into().unwrap()) as usize).min(b.len() - 16);
            let crc = crc32c::crc32c(&b[16..16 + len]);
            b[8..12].copy_from_slice(&crc.to_le_bytes());
        }
        for b in [&b[..], &b[..cut]] {
            if let Ok(sb) = Superblock::decode(b) {
                // What open does next with a decoded superblock.
                if let Ok(g) = Geo::new(sb.config) {
                    let _ = MetaLayout::new(&g);
                }
            }
        }
    }
}
