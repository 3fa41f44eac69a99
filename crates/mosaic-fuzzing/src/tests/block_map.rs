use mosaic_map::frame::{self, KIND_MAP_CHECKPOINT, KIND_MAP_DELTA};
use mosaic_map::map::{decode_checkpoint, decode_records, encode_records};
use mosaic_map::{Placement, Update};

use super::{frame_prefix, mutations, random_inputs, resealed_flips};
use crate::block_map;

/// One update of every kind and placement (a delta).
fn delta() -> Vec<Update> {
    vec![
        Update::Map { logical: 0, placement: Placement::Member { member: 2, offset: 1 << 30 } },
        Update::Map { logical: 4096, placement: Placement::Tier { tier: 1, offset: 8192 } },
        Update::Map { logical: 8192, placement: Placement::Zone { member: 1, zone: 7, offset: 65536 } },
        Update::Map { logical: 12288, placement: Placement::Unmapped },
        Update::Unmap { logical: 4096 },
        Update::ZoneWp { member: 1, zone: 7, wp: 1 << 20 },
        Update::ZoneReset { member: 0, zone: 3 },
    ]
}

/// What a checkpoint holds: each extent and zone once, no removals.
fn state() -> Vec<Update> {
    vec![
        Update::Map { logical: 0, placement: Placement::Member { member: 2, offset: 1 << 30 } },
        Update::Map { logical: 8192, placement: Placement::Zone { member: 1, zone: 7, offset: 65536 } },
        Update::ZoneWp { member: 1, zone: 7, wp: 1 << 20 },
        Update::ZoneWp { member: 0, zone: 3, wp: 0 },
    ]
}

fn seeds() -> Vec<(&'static str, Vec<u8>)> {
    vec![
        ("a delta's records", encode_records(&delta())),
        ("a checkpoint's records", encode_records(&state())),
        ("a delta frame", frame::encode(KIND_MAP_DELTA, 12, &encode_records(&delta()))),
        ("a checkpoint frame", frame::encode(KIND_MAP_CHECKPOINT, 11, &encode_records(&state()))),
        ("no records", encode_records(&[])),
    ]
}

/// The seed corpus of the cargo-fuzz target.
pub(super) fn corpus() -> Vec<Vec<u8>> {
    seeds().into_iter().map(|(_, b)| b).collect()
}

#[test]
fn random_bytes() {
    random_inputs(block_map, 0xb1, 4000, 4096, &[&frame_prefix(KIND_MAP_DELTA), &[1, 0, 0, 0, 0, 0, 0, 0], &[2, 0, 0, 0, 0, 0, 0, 0]]);
}

#[test]
fn valid_inputs_decode() {
    let s = seeds();
    // Mapping to nowhere is encoded as what it is, a removal.
    let mut want = delta();
    want[3] = Update::Unmap { logical: 12288 };
    assert_eq!(decode_records(&s[0].1).unwrap(), want);
    assert!(decode_checkpoint(&s[0].1).is_err(), "a delta with removals is no checkpoint");
    let ck = decode_checkpoint(&s[1].1).unwrap();
    assert_eq!((ck.extents.len(), ck.zone_wps[&(1, 7)]), (2, 1 << 20));
    let f = frame::decode(&s[2].1).unwrap().unwrap();
    assert_eq!((f.kind, f.seq, decode_records(&f.payload).unwrap()), (KIND_MAP_DELTA, 12, want));
    assert_eq!(decode_checkpoint(&frame::decode(&s[3].1).unwrap().unwrap().payload).unwrap(), ck);
    assert_eq!(decode_records(&s[4].1).unwrap(), vec![]);
}

#[test]
fn valid_inputs_damaged() {
    for (name, b) in seeds() {
        // Records: every bit; frames: the header and the first records.
        mutations(block_map, name, &b, 256, b.len() + 1);
    }
    for (name, b) in &seeds()[2..4] {
        resealed_flips(block_map, name, b, 256);
    }
}
