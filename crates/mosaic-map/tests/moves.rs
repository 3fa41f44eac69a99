//! The migration protocol as programs: the phase order, merged
//! transfers, and, run by the one executor on RAM members with a power
//! cut at every device write, a map that names the new place only once
//! the data there is complete.

use std::sync::atomic::AtomicI64;
use std::sync::Arc;

use mosaic_core::{Dir, Method, Phase};
use mosaic_dev::{MemMember, Member, PowerCut};
use mosaic_exec::{Client, Executor};
use mosaic_map::moves::{self, Move};
use mosaic_map::LedgerWrite;

const K: u64 = 4096;
const MAP_AT: u64 = 1 << 20;

fn frame() -> LedgerWrite {
    LedgerWrite { offset: MAP_AT, bytes: vec![0x5a; K as usize] }
}

/// Old place: member 0 at 0..8K; new place: member 1 at 64K (two
/// block-sized pieces each side); the map on member 0.
fn a_move() -> mosaic_core::Program {
    let mut m = Move::new(vec![7], Method::Direct, 2 * K as usize);
    m.read(0, 0, K, 0);
    m.read(0, K, K, K as usize);
    m.write(1, 64 * K, K, 0);
    m.write(1, 65 * K, K, K as usize);
    m.remap(0, frame())
}

#[test]
fn a_move_copies_flushes_the_new_place_then_remaps() {
    let p = a_move();
    p.validate().unwrap();
    assert_eq!(p.locks, vec![7]);
    let shape: Vec<String> = p
        .phases
        .iter()
        .map(|ph| match ph {
            Phase::Read(ios) => format!("read {:?}", ios.iter().map(|i| (i.op.member, i.op.offset, i.op.len)).collect::<Vec<_>>()),
            Phase::Write { ops, .. } => format!("write {:?}", ops.iter().map(|i| (i.op.member, i.op.offset, i.op.len)).collect::<Vec<_>>()),
            Phase::Flush(ms) => format!("flush {ms:?}"),
            _ => "other".into(),
        })
        .collect();
    assert_eq!(
        shape,
        vec![
            "read [(0, 0, 8192)]".to_string(),
            "write [(1, 262144, 8192)]".into(),
            "flush [1]".into(),
            format!("write [(0, {MAP_AT}, 4096)]"),
            "flush [0]".into(),
        ],
        "merged transfers, in the protocol's order"
    );
    let c = moves::commit(vec![7], Method::Direct, &[1], 0, frame());
    assert!(matches!(c.phases.as_slice(), [Phase::Flush(d), Phase::Write { .. }, Phase::Flush(m)] if d == &vec![1] && m == &vec![0]));
    assert_eq!(c.io().filter(|(d, _)| *d == Dir::Read).count(), 0);
}

#[test]
fn a_power_cut_anywhere_never_leaves_the_map_naming_incomplete_data() {
    let data: Vec<u8> = (0..2 * K).map(|i| (i % 251) as u8).collect();
    let p = a_move();
    let writes: usize = p.io().filter(|(d, _)| *d == Dir::Write).map(|(_, ios)| ios.len()).sum();
    for cut in 0..=writes as i64 {
        let m0 = Arc::new(MemMember::new("m0", 2 << 20));
        let m1 = Arc::new(MemMember::new("m1", 2 << 20));
        m0.write_at(&data, 0).unwrap();
        let budget = Arc::new(AtomicI64::new(cut));
        let cut0: Arc<dyn Member> = Arc::new(PowerCut::new(m0.clone(), budget.clone()));
        let cut1: Arc<dyn Member> = Arc::new(PowerCut::new(m1.clone(), budget));
        Executor::new(vec![Some(cut0), Some(cut1)], 0).run(&p, Client::None, None).unwrap();
        let mut map = vec![0u8; K as usize];
        m0.read_at(&mut map, MAP_AT).unwrap();
        let mut new = vec![0u8; 2 * K as usize];
        m1.read_at(&mut new, 64 * K).unwrap();
        let mut old = vec![0u8; 2 * K as usize];
        m0.read_at(&mut old, 0).unwrap();
        assert_eq!(old, data, "cut {cut}: the old place is never written");
        if map == frame().bytes {
            assert_eq!(new, data, "cut {cut}: the map names the new place before its data is there");
        } else {
            assert_eq!(map, vec![0u8; K as usize], "cut {cut}: a torn map frame");
        }
    }
}
