//! DVS metadata decoders never panic: random bytes, and valid encodings
//! with bytes flipped or cut short (with their checksums left wrong, and
//! made right again by framing the damaged payload anew, so the parsers
//! behind the frame are reached), give `Ok` or a clear error.  What
//! decodes is applied to tables, as recovery does.

use proptest::prelude::*;

use mosaic_core::MemberState;
use mosaic_dvs::meta::{self, decode_checkpoint, decode_journal, decode_record, encode_checkpoint, encode_journal, label_config, MetaLayout, Record};
use mosaic_dvs::tables::Tables;
use mosaic_dvs::{DvsConfig, Geo};
use mosaic_format::frame::{self, HEADER_LEN, KIND_DVS_CHECKPOINT, KIND_JOURNAL_RECORD, KIND_DVS_LOG, KIND_LABEL};
use mosaic_format::Label;
use uuid::Uuid;

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

/// The (kind, seq, payload) of the frame at the start of `b`, read
/// without checks (the test's own view of the format).
fn unframe(b: &[u8]) -> (u16, u64, Vec<u8>) {
    let len = u32::from_le_bytes(b[16..20].try_into().unwrap()) as usize;
    (u16::from_le_bytes([b[6], b[7]]), u64::from_le_bytes(b[8..16].try_into().unwrap()), b[HEADER_LEN..HEADER_LEN + len].to_vec())
}

/// Damage the payload of the frame `b` and frame it anew (a good
/// checksum over bad contents), or damage the frame itself.
fn damage(b: &[u8], flips: &[(usize, u8)], sealed: bool) -> Vec<u8> {
    if !sealed {
        let mut b = b.to_vec();
        flip(&mut b, flips);
        return b;
    }
    let (kind, seq, mut p) = unframe(b);
    flip(&mut p, flips);
    frame::encode(kind, seq, &p)
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
    if let Some((_, r, len)) = decode_record(b, &g) {
        assert!(len <= b.len());
        let _ = r.apply(&mut Tables::new(g.clone()));
        let _ = r.apply(&mut busy_tables());
    }
}

/// What open does with a label's bytes: decode, take the configuration,
/// lay out the metadata.
fn decode_label(b: &[u8]) {
    if let Ok(l) = Label::decode(b) {
        if let Ok(cfg) = label_config(&l) {
            if let Ok(g) = Geo::new(cfg) {
                let _ = MetaLayout::new(&g);
            }
        }
    }
}

fn a_label(cfg: DvsConfig) -> Label {
    let ids: Vec<Uuid> = (0..cfg.members.max(1)).map(|i| Uuid::from_u128(i as u128 + 1)).collect();
    meta::label(&meta::DvsPolicy { config: cfg.clone(), failed: vec![0], spares: vec![Uuid::from_u128(7)], role: String::new(), last_scrub: Some(mosaic_format::scrub::ScrubRecord { end: 1_800_000_000, millis: 1234, stripes: 16, mismatched: 1, unverified: 2, repaired: true, interrupted: false }), replaced: vec![], hot: Some(meta::HotRecord { member: 0, old: Uuid::from_u128(1), new: Uuid::from_u128(8), copied: 2 }), lost: vec![mosaic_format::lost::LostRange { offset: 4096, len: 4096 }] }, Uuid::from_u128(99), &ids, 0, 3, 5)
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
    // Frames of the wrong kind are not taken for another.
    let j = encode_journal(5, 4096, &[1, 2, 3]);
    assert!(decode_record(&j, &g).is_none() && decode_journal(&records()[0]).is_none());
    assert!(decode_checkpoint(&j, &g).unwrap().is_none());
    // A label whose policy is not a DVS configuration.
    let mut l = a_label(g.cfg.clone());
    l.policy = serde_json::json!([1, 2]);
    assert!(label_config(&l).is_err());
    // Conventional zones whose size overflows: a geometry error.
    let mut cfg = g.cfg.clone();
    cfg.zone_size = 1 << 62;
    cfg.chunk = 1 << 40;
    cfg.zones = 64;
    cfg.conventional = 8;
    let big = Geo::new(cfg).unwrap();
    let e = MetaLayout::new(&big).unwrap_err().to_string();
    assert_eq!(e, format!("bad DVS geometry: 8 conventional zones of {} bytes overflow", 1u64 << 62));
    // Conventional zones too small for the labels: a clear error.
    let e = MetaLayout::new(&g).unwrap_err().to_string();
    assert!(e.contains("the member labels take 131072 bytes"), "{e}");
}

proptest! {
    #[test]
    fn random_bytes_never_panic(b in proptest::collection::vec(any::<u8>(), 0..1200), kind in 0u8..5) {
        let b = match kind {
            0 => frame::encode(KIND_DVS_LOG, 1, &b),
            1 => frame::encode(KIND_JOURNAL_RECORD, 1, &b),
            2 => frame::encode(KIND_DVS_CHECKPOINT, 1, &b),
            3 => frame::encode(KIND_LABEL, 1, &b),
            _ => b,
        };
        decode_and_apply(&b);
        let _ = decode_journal(&b);
        let _ = decode_checkpoint(&b, &geo());
        decode_label(&b);
    }

    #[test]
    fn damaged_log_records_never_panic(
        which in 0usize..4,
        flips in proptest::collection::vec((any::<usize>(), any::<u8>()), 1..6),
        cut in any::<usize>(),
        sealed in any::<bool>(),
    ) {
        let r = damage(&records()[which], &flips, sealed);
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
        let e = damage(&encode_journal(5, 4096, &data), &flips, sealed);
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
        let c = damage(&encode_checkpoint(&busy_tables(), 9), &flips, sealed);
        let _ = decode_checkpoint(&c, &g);
        let _ = decode_checkpoint(&c[..cut % (c.len() + 1)], &g);
    }

    #[test]
    fn damaged_labels_never_panic(
        flips in proptest::collection::vec((0usize..400, any::<u8>()), 1..6),
        cut in 0usize..4097,
        sealed in any::<bool>(),
        fields in proptest::array::uniform8(any::<u64>()),
    ) {
        let mut cfg = geo().cfg;
        // Random geometry fields, as a damaged (but checksummed) label may carry.
        (cfg.chunk, cfg.zone_size, cfg.zones, cfg.conventional, cfg.block, cfg.spare, cfg.op_pct, cfg.cache_chunks) =
            (fields[0] >> (fields[0] % 64), fields[1] >> (fields[1] % 64), fields[2] >> (fields[2] % 64), fields[3] >> (fields[3] % 64),
             fields[4] >> (fields[4] % 64), fields[5] >> (fields[5] % 64), fields[6] % 200, fields[7] >> (fields[7] % 64));
        let b = a_label(cfg).encode().unwrap();
        decode_label(&b);
        let b = damage(&b, &flips, sealed);
        decode_label(&b);
        decode_label(&b[..cut.min(b.len())]);
    }
}
