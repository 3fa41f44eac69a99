//! Map records on a ledger in whole blocks: every write is block-aligned
//! and whole, recovery gives the map back with the ledger where it was
//! (the next write identical to what the running ledger would write),
//! and a full log turns into a checkpoint.

use mosaic_map::blocklog::BlockLedger;
use mosaic_map::frame::{KIND_MAP_CHECKPOINT, KIND_MAP_DELTA};
use mosaic_map::{LedgerLayout, LedgerWrite, Placement, Update};

const B: u64 = 4096;

fn layout(log_blocks: u64) -> LedgerLayout {
    LedgerLayout { slots: [B, 5 * B], slot_bytes: 4 * B, log_start: 9 * B, log_end: (9 + log_blocks) * B, checkpoint_kind: KIND_MAP_CHECKPOINT, delta_kind: KIND_MAP_DELTA }
}

fn rec(l: u64, off: u64) -> Update {
    Update::Map { logical: l, placement: Placement::Member { member: (l % 3) as u32, offset: off } }
}

fn apply(region: &mut [u8], w: &LedgerWrite) {
    assert_eq!(w.offset % B, 0, "block-aligned");
    assert_eq!(w.bytes.len() as u64 % B, 0, "whole blocks");
    region[w.offset as usize..w.offset as usize + w.bytes.len()].copy_from_slice(&w.bytes);
}

#[test]
fn deltas_in_whole_blocks_recover_with_the_ledger_where_it_was() {
    let lay = layout(4);
    let mut region = vec![0u8; (lay.log_end) as usize];
    let mut log = BlockLedger::fresh(lay, B);
    let mut map = std::collections::BTreeMap::new();
    apply(&mut region, &log.checkpoint(&[]).unwrap());
    for i in 0..40u64 {
        let ups = vec![rec(i, i * B), rec(i + 1000, i * 2 * B)];
        for u in &ups {
            if let Update::Map { logical, placement } = u {
                map.insert(*logical, *placement);
            }
        }
        let all: Vec<Update> = map.iter().map(|(&l, &p)| Update::Map { logical: l, placement: p }).collect();
        apply(&mut region, &log.persist(&ups, || all).unwrap());
    }
    assert!(log.checkpoints >= 2, "the log filled and rolled over to a checkpoint");
    let (mut back, state) = BlockLedger::recover(lay, B, &region).expect("recovers");
    assert_eq!(state.extents, map);
    // The next write is the same from the running and the recovered ledger.
    let next = vec![rec(7, 77 * B)];
    assert_eq!(back.persist(&next, Vec::new).unwrap(), log.persist(&next, Vec::new).unwrap());
}

#[test]
fn a_full_log_checkpoints_and_short_or_blank_regions_do_not_recover() {
    let lay = layout(1);
    let mut log = BlockLedger::fresh(lay, B);
    let many: Vec<Update> = (0..200).map(|l| rec(l, l * B)).collect();
    // 200 records do not fit a one-block log: a checkpoint of `all` instead.
    let w = log.persist(&many, || many.clone()).unwrap();
    assert!(lay.slots.contains(&w.offset), "{}", w.offset);
    assert_eq!(log.checkpoints, 1);
    assert!(BlockLedger::recover(lay, B, &vec![0u8; lay.log_end as usize]).is_none(), "blank");
    assert!(BlockLedger::recover(lay, B, &[0u8; 100]).is_none(), "short");
}
