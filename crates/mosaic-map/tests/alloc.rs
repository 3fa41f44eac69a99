//! Allocators under random allocate / commit / abort / free sequences tied
//! to a map on a metadata device that loses power at a seeded point.
//!
//! Invariants checked after every step: no reservation overlaps space that
//! is owned or reserved; free + reclaimable = capacity - owned - reserved.
//! After the cut and a reopen, the allocator rebuilt from the map finds no
//! doubly owned space, and free + reclaimable = capacity - what the map
//! references (nothing leaked, aborted reservations included).  Without a
//! cut, the allocator as it ran equals the one rebuilt from the map.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use mosaic_dev::{MemMember, Member, PowerCut};
use mosaic_map::{Allocator, BlockMap, ExtentAllocator, Geometry, MapState, Placement, Pool, Reservation, Update, ZoneAllocator};

const UNIT: u64 = 1024;
const GEO: Geometry = Geometry { unit: UNIT, slot_bytes: 8192, log_bytes: 4096 };

/// (space, start, end) of a placement `UNIT` long: space tells members,
/// tiers and zones apart.
fn span(p: Placement) -> ((u8, u32, u32), u64, u64) {
    match p {
        Placement::Member { member, offset } => ((1, member, 0), offset, offset + UNIT),
        Placement::Tier { tier, offset } => ((2, tier as u32, 0), offset, offset + UNIT),
        Placement::Zone { member, zone, offset } => ((3, member, zone), offset, offset + UNIT),
        Placement::Unmapped => panic!("unmapped placement handed out"),
    }
}

fn overlaps(a: Placement, b: Placement) -> bool {
    let ((sa, a0, a1), (sb, b0, b1)) = (span(a), span(b));
    sa == sb && a0 < b1 && b0 < a1
}

struct Run<A> {
    map: BlockMap,
    alloc: A,
    owned: BTreeMap<u64, Placement>,
    reserved: Vec<Reservation>,
    budget: Arc<AtomicI64>,
}

impl<A: Allocator> Run<A> {
    fn check_accounting(&self) {
        let used = (self.owned.len() + self.reserved.len()) as u64 * UNIT;
        assert_eq!(self.alloc.free_bytes() + self.alloc.reclaimable_bytes(), self.alloc.capacity() - used);
    }

    /// One random step; false once a map commit ran into the power cut.
    fn step(&mut self, rng: &mut ChaCha8Rng, reclaim: &impl Fn(&mut A) -> Vec<Update>) -> bool {
        let mut ups = Vec::new();
        match rng.gen_range(0..10) {
            0..=3 => {
                if let Some(r) = self.alloc.allocate(UNIT) {
                    let clash = self.owned.values().copied().chain(self.reserved.iter().map(|r| r.placement())).find(|&p| overlaps(p, r.placement()));
                    assert_eq!(clash, None, "{:?} handed out twice", r.placement());
                    self.reserved.push(r);
                }
            }
            4 | 5 if !self.reserved.is_empty() => {
                let r = self.reserved.swap_remove(rng.gen_range(0..self.reserved.len()));
                let logical = (0..).find(|l| !self.owned.contains_key(l)).unwrap();
                ups.push(Update::Map { logical, placement: r.placement() });
                ups.extend(self.alloc.commit_records(&r));
                self.map.commit(&ups).unwrap();
                self.owned.insert(logical, r.placement());
                self.alloc.commit(r).unwrap();
            }
            6 if !self.reserved.is_empty() => {
                let r = self.reserved.swap_remove(rng.gen_range(0..self.reserved.len()));
                self.alloc.abort(r).unwrap();
            }
            7 | 8 if !self.owned.is_empty() => {
                let logical = *self.owned.keys().nth(rng.gen_range(0..self.owned.len())).unwrap();
                ups.push(Update::Unmap { logical });
                self.map.commit(&ups).unwrap();
                let p = self.owned.remove(&logical).unwrap();
                self.alloc.free(p, UNIT).unwrap();
                assert!(self.alloc.free(p, UNIT).is_err(), "a double free of {p:?} must be refused");
            }
            _ => {
                ups = reclaim(&mut self.alloc);
                if !ups.is_empty() {
                    self.map.commit(&ups).unwrap();
                }
            }
        }
        self.check_accounting();
        ups.is_empty() || self.budget.load(Ordering::SeqCst) > 0
    }
}

/// One seeded run; `cut`: whether the power fails part-way.
fn run<A: Allocator>(seed: u64, cut: bool, mk: impl Fn() -> A, reclaim: impl Fn(&mut A) -> Vec<Update>) -> (A, A) {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mem = Arc::new(MemMember::new("meta", 1 << 16));
    let budget = Arc::new(AtomicI64::new(i64::MAX));
    let dev: Arc<dyn Member> = Arc::new(PowerCut::new(mem.clone(), budget.clone()));
    let map = BlockMap::format(dev, GEO).unwrap();
    let mut r = Run { map, alloc: mk(), owned: BTreeMap::new(), reserved: Vec::new(), budget: budget.clone() };
    budget.store(if cut { rng.gen_range(1..150) } else { i64::MAX }, Ordering::SeqCst);
    let mut in_flight = None;
    for _ in 0..600 {
        let before = r.map.snapshot();
        if !r.step(&mut rng, &reclaim) {
            in_flight = Some(r.map.snapshot().extents);
            r.map = BlockMap::open(mem.clone()).unwrap();
            assert!(r.map.snapshot().extents == before.extents || Some(&r.map.snapshot().extents) == in_flight.as_ref());
            break;
        }
    }
    for res in std::mem::take(&mut r.reserved) {
        r.alloc.abort(res).unwrap();
    }
    let state: MapState = BlockMap::open(mem).unwrap().snapshot();
    if in_flight.is_none() {
        assert_eq!(state.extents, r.owned, "seed {seed}: the map holds every committed extent");
    }
    let mut fresh = mk();
    fresh.rebuild(&state, UNIT).unwrap_or_else(|e| panic!("seed {seed}: rebuild: {e}"));
    let referenced = state.extents.len() as u64 * UNIT;
    assert_eq!(fresh.free_bytes() + fresh.reclaimable_bytes(), fresh.capacity() - referenced, "seed {seed}: leak");
    (r.alloc, fresh)
}

fn extents() -> ExtentAllocator {
    ExtentAllocator::new(&[(Pool::Member(0), 16 * UNIT), (Pool::Member(1), 16 * UNIT), (Pool::Tier(0), 8 * UNIT)])
}

fn zones() -> ZoneAllocator {
    ZoneAllocator::new(&(0..8).map(|z| (z % 2, z, 6 * UNIT)).collect::<Vec<_>>())
}

#[test]
fn extent_allocator_never_overlaps_and_never_leaks() {
    for seed in 0..150 {
        let (ran, rebuilt) = run(seed, false, extents, |_| Vec::new());
        assert_eq!(ran.free_extents(), rebuilt.free_extents(), "seed {seed}: as run vs rebuilt from the map");
        run(seed, true, extents, |_| Vec::new());
    }
}

#[test]
fn zone_allocator_never_overlaps_and_never_leaks() {
    for seed in 0..150 {
        let (ran, rebuilt) = run(seed, false, zones, |a| a.reclaim());
        for ((k, z), (k2, z2)) in ran.zones().into_iter().zip(rebuilt.zones()) {
            assert_eq!((k, z.live, z.pending), (k2, z2.live, 0), "seed {seed}: live bytes as run vs rebuilt");
            assert!(z2.wp <= z.wp, "seed {seed}: zone {k:?} write pointer rebuilt past the one in memory");
        }
        run(seed, true, zones, |a| a.reclaim());
    }
}

#[test]
fn rebuild_reports_doubly_owned_space() {
    let mut s = MapState::default();
    s.extents.insert(1, Placement::Member { member: 0, offset: 0 });
    s.extents.insert(2, Placement::Member { member: 0, offset: UNIT / 2 });
    assert!(extents().rebuild(&s, UNIT).is_err());
    s.extents.insert(2, Placement::Member { member: 7, offset: 0 });
    assert!(extents().rebuild(&s, UNIT).is_err(), "a member the allocator does not manage");
    let mut z = MapState::default();
    z.extents.insert(1, Placement::Zone { member: 0, zone: 0, offset: 0 });
    z.extents.insert(2, Placement::Zone { member: 0, zone: 0, offset: 512 });
    assert!(zones().rebuild(&z, UNIT).is_err());
    z.extents.insert(2, Placement::Zone { member: 0, zone: 0, offset: 1024 });
    let mut a = zones();
    a.rebuild(&z, UNIT).unwrap();
    assert_eq!(a.zones()[0].1.wp, 2048, "write pointer covers every reference");
}
