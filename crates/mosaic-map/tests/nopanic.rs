//! The decoders never panic on bad bytes, and damage never decodes to a
//! different frame or map.

use std::sync::Arc;

use proptest::prelude::*;

use mosaic_dev::{MemMember, Member};
use mosaic_map::frame::{self, KIND_MAP_DELTA};
use mosaic_map::map::{decode_checkpoint, decode_records, encode_records};
use mosaic_map::{BlockMap, Geometry, Placement, Update};

fn sample_updates(n: u64) -> Vec<Update> {
    (0..n)
        .map(|i| match i % 4 {
            0 => Update::Map { logical: i, placement: Placement::Member { member: 2, offset: i * 512 } },
            1 => Update::Map { logical: i, placement: Placement::Tier { tier: 1, offset: i } },
            2 => Update::Map { logical: i, placement: Placement::Zone { member: 1, zone: 3, offset: i } },
            _ => Update::ZoneWp { member: 0, zone: i as u32, wp: i },
        })
        .collect()
}

const GEO: Geometry = Geometry { unit: 4096, slot_bytes: 2048, log_bytes: 2048 };

/// A formatted map with a checkpoint and a few log frames, as bytes.
fn formatted() -> (Vec<u8>, Vec<(u64, Placement)>) {
    let mem = Arc::new(MemMember::new("meta", 8192));
    let map = BlockMap::format(mem.clone(), GEO).unwrap();
    map.commit(&sample_updates(6)).unwrap();
    map.checkpoint().unwrap();
    map.commit(&[Update::Unmap { logical: 0 }]).unwrap();
    let entries = map.snapshot().extents.into_iter().collect();
    (mem.snapshot(), entries)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn frame_decode_never_panics_on_random_bytes(b in proptest::collection::vec(any::<u8>(), 0..2048)) {
        let _ = frame::decode(&b);
        let _ = frame::frame_len(&b);
    }

    #[test]
    fn a_flipped_bit_never_yields_a_different_frame(
        payload in proptest::collection::vec(any::<u8>(), 0..700),
        seq in any::<u64>(),
        bit in any::<usize>(),
    ) {
        let good = frame::encode(KIND_MAP_DELTA, seq, &payload);
        let mut bad = good.clone();
        let bit = bit % (bad.len() * 8);
        bad[bit / 8] ^= 1 << (bit % 8);
        match frame::decode(&bad) {
            Ok(Some(f)) => {
                // Only padding (not covered by the crc) may change unnoticed.
                prop_assert!(bit / 8 >= frame::HEADER_LEN + payload.len());
                prop_assert_eq!(f, frame::decode(&good).unwrap().unwrap());
            }
            Ok(None) => prop_assert!(false, "a damaged frame read as blank"),
            Err(_) => {}
        }
    }

    #[test]
    fn ledger_recovery_never_panics_on_random_or_damaged_bytes(
        noise in proptest::collection::vec(any::<u8>(), 0..3000),
        at in any::<usize>(),
        bit in any::<usize>(),
    ) {
        use mosaic_map::ledger::{Ledger, LedgerLayout};
        let l = LedgerLayout { slots: [512, 2560], slot_bytes: 2048, log_start: 4608, log_end: 6656, checkpoint_kind: 2, delta_kind: 3 };
        let (mut dev, _) = formatted();
        let at = 512 + at % (dev.len() - 512);
        let n = noise.len().min(dev.len() - at);
        dev[at..at + n].copy_from_slice(&noise[..n]);
        let bit = bit % (dev.len() * 8);
        dev[bit / 8] ^= 1 << (bit % 8);
        let r = Ledger::recover(l, [&dev[512..2560], &dev[2560..4608]], &dev[4608..6656], |b| decode_checkpoint(b).ok(), |s, p| {
            decode_records(p).map(|u| u.iter().for_each(|u| s.apply(u))).is_ok()
        });
        if let Some((ledger, _, _)) = r {
            prop_assert!(ledger.pos >= l.log_start && ledger.pos <= l.log_end);
        }
    }

    #[test]
    fn record_and_checkpoint_decoders_never_panic(b in proptest::collection::vec(any::<u8>(), 0..600)) {
        let _ = decode_records(&b);
        let _ = decode_checkpoint(&b);
    }

    #[test]
    fn flipped_checkpoint_payload_never_panics(n in 0u64..12, bit in any::<usize>()) {
        let mut p = encode_records(&sample_updates(n));
        let bit = bit % (p.len() * 8);
        p[bit / 8] ^= 1 << (bit % 8);
        let _ = decode_checkpoint(&p);
        let _ = decode_records(&p);
    }

    #[test]
    fn open_never_panics_on_damaged_metadata(flips in proptest::collection::vec((0usize..8192, 0u8..8), 1..6)) {
        let (mut bytes, _) = formatted();
        for (at, bit) in flips {
            bytes[at] ^= 1 << bit;
        }
        let mem = Arc::new(MemMember::new("meta", 8192));
        mem.restore(bytes);
        if let Ok(map) = BlockMap::open(mem as Arc<dyn Member>) {
            // Whatever survived is a state the map really held: a valid
            // checkpoint plus a valid prefix of its log.
            let got: Vec<u64> = map.snapshot().extents.keys().copied().collect();
            prop_assert!(got == vec![1, 2, 4, 5] || got == vec![0, 1, 2, 4, 5] || got.is_empty());
        }
    }

    #[test]
    fn open_never_panics_on_random_metadata(b in proptest::collection::vec(any::<u8>(), 8192)) {
        let mem = Arc::new(MemMember::new("meta", 8192));
        mem.restore(b);
        let _ = BlockMap::open(mem as Arc<dyn Member>);
    }
}

#[test]
fn the_undamaged_sample_opens_to_its_state() {
    let (bytes, entries) = formatted();
    let mem = Arc::new(MemMember::new("meta", 8192));
    mem.restore(bytes);
    let map = BlockMap::open(mem).unwrap();
    assert_eq!(map.snapshot().extents.into_iter().collect::<Vec<_>>(), entries);
    assert_eq!(entries.iter().map(|e| e.0).collect::<Vec<_>>(), vec![1, 2, 4, 5]);
}
