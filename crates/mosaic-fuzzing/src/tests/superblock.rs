use std::sync::Arc;

use mosaic_array::superblock::{LostRange, Spare};
use mosaic_array::{Array, CreateOptions, Superblock, DATA_OFFSET};
use mosaic_core::MemberState;
use mosaic_dev::{MemMember, Member};
use mosaic_format::frame::{self, HEADER_LEN, KIND_LABEL, KIND_MAP_DELTA};
use mosaic_format::label::Label;
use uuid::Uuid;

use super::{frame_prefix, mutations, random_inputs, resealed_flips};
use crate::superblock;

/// The superblock of member 0 of a new raid6 array of 6 members.
fn created() -> Superblock {
    let mems = (0..6).map(|i| (Arc::new(MemMember::new(format!("m{i}"), DATA_OFFSET + (64 << 10))) as Arc<dyn Member>, format!("m{i}"))).collect();
    let o = CreateOptions { level: "raid6".parse().unwrap(), members: Some(6), member_size: None, unit: 4096, block: 4096, force: true, assume_clean: true };
    Array::create_on(mems, &o, true).unwrap().superblock()
}

/// The same array degraded, with lost data, hosts, a journal and a spare
/// (the optional fields, and the disk version lost ranges take).
fn eventful() -> Superblock {
    let mut sb = created();
    sb.member_states[2] = MemberState::Failed;
    sb.lost = vec![LostRange { offset: 4096, len: 8192 }];
    sb.member_hosts = (0..6).map(|i| format!("host{}", i % 3)).collect();
    sb.journal = Some("/j".into());
    sb.spares = vec![Spare { uuid: Uuid::from_u128(99), path: "/s".into() }];
    sb.events = 41;
    sb.session = Uuid::from_u128(5);
    sb.last_scrub = Some(mosaic_array::ScrubRecord { end: 1_800_000_000, millis: 1234, stripes: 16, mismatched: 1, unverified: 2, repaired: true, interrupted: true });
    sb
}

/// A new array with a write-intent bitmap, lost data and a member that
/// left (the bitmap's disk version; a bitmap excludes a journal).
fn with_bitmap() -> Superblock {
    let mut sb = created();
    sb.bitmap = Some(mosaic_array::superblock::BitmapInfo { chunk: 4 });
    sb.lost = vec![LostRange { offset: 0, len: 4096 }];
    sb.member_states[1] = MemberState::Failed;
    sb.left = (0..6).map(|i| if i == 1 { Uuid::from_u128(7) } else { Uuid::nil() }).collect();
    sb
}

/// An unclean array without a bitmap whose resync a stop cut off.
fn resync_cut_off() -> Superblock {
    let mut sb = created();
    sb.state = mosaic_array::ArrayState::Dirty;
    sb.resync_from = 9;
    sb
}

/// The valid inputs: two superblocks, a DVS member's label (a label, not
/// a superblock) and a frame of another kind.
fn seeds() -> Vec<(&'static str, Vec<u8>)> {
    let dvs = mosaic_dvs::meta::label(
        &mosaic_dvs::meta::DvsPolicy { config: mosaic_dvs::DvsConfig::new(4, 1, 4096, 8 * 4096, 8, 1), failed: vec![1], spares: vec![], role: String::new(), last_scrub: None, replaced: vec![], hot: None, lost: vec![] },
        Uuid::from_u128(1),
        &[Uuid::from_u128(2), Uuid::from_u128(3), Uuid::from_u128(4), Uuid::from_u128(5)],
        2,
        7,
        1_700_000_000,
    );
    vec![
        ("a new array's superblock", created().encode().unwrap()),
        ("an eventful superblock", eventful().encode().unwrap()),
        ("a superblock with a bitmap", with_bitmap().encode().unwrap()),
        ("a resync's checkpoint", resync_cut_off().encode().unwrap()),
        ("a DVS label", dvs.encode().unwrap()),
        ("a map delta frame", frame::encode(KIND_MAP_DELTA, 3, &[7; 100])),
    ]
}

/// The seed corpus of the cargo-fuzz target.
pub(super) fn corpus() -> Vec<Vec<u8>> {
    seeds().into_iter().map(|(_, b)| b).collect()
}

#[test]
fn random_bytes() {
    random_inputs(superblock, 0x5b, 4000, 8192, &[&frame_prefix(KIND_LABEL), &frame_prefix(KIND_MAP_DELTA)]);
}

#[test]
fn valid_inputs_decode() {
    for sb in [created(), eventful(), with_bitmap(), resync_cut_off()] {
        let b = sb.encode().unwrap();
        assert_eq!(Superblock::decode(&b).unwrap(), sb);
        assert_eq!(Label::decode(&b).unwrap(), sb.to_label().unwrap());
    }
    let s = seeds();
    assert_eq!(Label::decode(&s[4].1).unwrap().kind, "dvs");
    assert!(Superblock::decode(&s[4].1).is_err(), "a DVS label is no superblock");
    assert_eq!(frame::decode(&s[5].1).unwrap().unwrap().payload, [7; 100]);
    // A checkpoint past the array's stripes is refused.
    let mut past = resync_cut_off();
    past.resync_from = past.geometry.stripes + 1;
    assert!(format!("{:?}", Superblock::decode(&past.encode().unwrap()).unwrap_err()).contains("resync checkpoint"));
}

#[test]
fn valid_inputs_damaged() {
    for (name, b) in seeds() {
        let end = HEADER_LEN + super::payload(&b).len();
        mutations(superblock, name, &b, 64, end + 1);
        resealed_flips(superblock, name, &b, 256);
    }
}
