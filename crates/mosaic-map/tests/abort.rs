//! Plans that fail part-way: a data member fails while an extent is being
//! placed or moved (the reservation is aborted and the request re-planned
//! elsewhere: nothing leaks, nothing is handed out twice), and the
//! metadata device fails during a remap (the map refuses further commits;
//! a reopen recovers a consistent map and allocator).

use std::sync::Arc;

use mosaic_dev::{FaultyMember, MemMember, Member};
use mosaic_map::{BlockMap, ExtentAllocator, Geometry, MapError, MappedVolume, MemberStore, Placement, Pool, VolumeError};

const UNIT: u64 = 512;
const GEO: Geometry = Geometry { unit: UNIT, slot_bytes: 4096, log_bytes: 4096 };

fn alloc() -> Box<ExtentAllocator> {
    Box::new(ExtentAllocator::new(&(0..3).map(|m| (Pool::Member(m), 16 * UNIT)).collect::<Vec<_>>()))
}

fn store(members: Vec<Arc<dyn Member>>) -> Arc<MemberStore> {
    Arc::new(MemberStore { members, tiers: Vec::new(), zone_bytes: 0 })
}

fn pattern(l: u64) -> Vec<u8> {
    (0..UNIT).map(|i| (i as u8).wrapping_mul(31) ^ l as u8).collect()
}

fn read(vol: &MappedVolume, l: u64) -> Vec<u8> {
    let mut b = vec![0u8; UNIT as usize];
    vol.read(l, &mut b).unwrap();
    b
}

#[test]
fn member_failure_mid_plan_is_aborted_and_replanned() {
    let mems: Vec<Arc<MemMember>> = (0..3).map(|i| Arc::new(MemMember::new(format!("d{i}"), 16 * UNIT))).collect();
    let faulty = Arc::new(FaultyMember::new(mems[1].clone()));
    let members: Vec<Arc<dyn Member>> = vec![mems[0].clone(), faulty.clone(), mems[2].clone()];
    let meta = Arc::new(MemMember::new("meta", 1 << 16));
    let vol = MappedVolume::open(BlockMap::format(meta.clone(), GEO).unwrap(), alloc(), store(members)).unwrap();
    vol.write(0, &pattern(0)).unwrap();
    assert_eq!(vol.map().get(0), Placement::Member { member: 0, offset: 0 });
    faulty.break_now();

    // A move onto the failed member: the copy fails, the reservation is
    // aborted, L still maps to A with its bytes.
    let free = vol.space().0;
    assert!(matches!(vol.migrate(0, Some(Pool::Member(1))), Err(VolumeError::Io(_))));
    assert_eq!(vol.space().0, free, "the aborted reservation came back");
    assert_eq!(vol.map().get(0), Placement::Member { member: 0, offset: 0 });
    assert_eq!(read(&vol, 0), pattern(0));
    // Re-planned elsewhere, it moves.
    let moved = vol.migrate(0, Some(Pool::Member(2))).unwrap();
    assert_eq!(moved, Some((Placement::Member { member: 0, offset: 0 }, Placement::Member { member: 2, offset: 0 })));
    assert_eq!(read(&vol, 0), pattern(0));
    assert_eq!(vol.space().0, free, "A freed, B taken");

    // New extents: the allocator turns to member 1 now and then; each
    // failure aborts and the retry goes to the next member.
    let mut failures = 0;
    for l in 1..12 {
        while let Err(e) = vol.write(l, &pattern(l)) {
            assert!(matches!(e, VolumeError::Io(_)), "{e}");
            failures += 1;
        }
    }
    assert!(failures >= 3, "the failed member must have been tried: {failures}");
    assert_eq!(vol.stats().aborted, failures + 1);
    let (free, _, cap) = vol.space();
    assert_eq!(free, cap - 12 * UNIT, "nothing leaked by the aborted plans");
    let state = vol.map().snapshot();
    assert!(state.extents.values().all(|p| !matches!(p, Placement::Member { member: 1, .. })));
    drop(vol);

    // Reopened on the healthy members: same map, same bytes, same space.
    let members: Vec<Arc<dyn Member>> = mems.iter().map(|m| m.clone() as Arc<dyn Member>).collect();
    let vol = MappedVolume::open(BlockMap::open(meta).unwrap(), alloc(), store(members)).unwrap();
    assert_eq!(vol.map().snapshot(), state);
    assert_eq!(vol.space().0, free);
    for l in 0..12 {
        assert_eq!(read(&vol, l), pattern(l), "extent {l}");
    }
}

#[test]
fn metadata_failure_poisons_the_map_and_a_reopen_recovers() {
    let mems: Vec<Arc<MemMember>> = (0..3).map(|i| Arc::new(MemMember::new(format!("d{i}"), 16 * UNIT))).collect();
    let members = || mems.iter().map(|m| m.clone() as Arc<dyn Member>).collect::<Vec<_>>();
    let meta = Arc::new(MemMember::new("meta", 1 << 16));
    let faulty = Arc::new(FaultyMember::new(meta.clone()));
    let vol = MappedVolume::open(BlockMap::format(faulty.clone(), GEO).unwrap(), alloc(), store(members())).unwrap();
    for l in 0..4 {
        vol.write(l, &pattern(l)).unwrap();
    }
    let before = vol.map().snapshot();
    let free = vol.space().0;
    faulty.break_now();
    assert!(matches!(vol.migrate(2, None), Err(VolumeError::Map(MapError::Io(_)))));
    assert_eq!(vol.space().0, free - UNIT, "outcome unknown: old and new place both stay owned");
    assert!(matches!(vol.map().commit(&[]), Err(MapError::Poisoned)));
    assert!(matches!(vol.write(9, &pattern(9)), Err(VolumeError::Map(MapError::Poisoned))));
    assert_eq!(vol.space().0, free - UNIT, "a commit refused before any write aborts its reservation");
    drop(vol);

    let vol = MappedVolume::open(BlockMap::open(meta).unwrap(), alloc(), store(members())).unwrap();
    assert_eq!(vol.map().snapshot(), before);
    assert_eq!(vol.space().0, free, "the place the failed move took is free again");
    for l in 0..4 {
        assert_eq!(read(&vol, l), pattern(l));
    }
}
