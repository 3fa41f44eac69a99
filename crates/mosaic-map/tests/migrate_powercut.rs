//! The migration protocol under concurrent client writes and power cuts.
//!
//! A client thread writes random extents with random bytes while a
//! migrator thread moves random extents (and, on zones, reclaims empty
//! ones); the metadata device and every data member share one budget of
//! device writes, spent at a seeded point.  After reopening from what
//! reached the devices: the allocator rebuilt from the map finds no doubly
//! owned space and no leak, every extent reads back its last acknowledged
//! bytes (or, for the one write in flight, those), and the volume goes on
//! working: a full rewrite and a round of moves read back exactly.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::{Arc, Barrier};

use parking_lot::Mutex;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use mosaic_dev::{MemMember, Member, PowerCut};
use mosaic_map::{Allocator, BlockMap, ExtentAllocator, Geometry, MappedVolume, MemberStore, Placement, Pool, VolumeError, ZoneAllocator};

const UNIT: u64 = 512;
const EXTENTS: u64 = 24;
const MEMBERS: u32 = 3;
const ZONE: u64 = 8 * UNIT;
const MEMBER_BYTES: u64 = 8 * ZONE;
const TIER_BYTES: u64 = 8 * UNIT;
const SEEDS: u64 = 150;
const GEO: Geometry = Geometry { unit: UNIT, slot_bytes: 4096, log_bytes: 4096 };

struct Rig {
    meta: Arc<MemMember>,
    data: Vec<Arc<MemMember>>,
    /// A fast tier (used by the extent allocator only).
    tier: Arc<MemMember>,
}

impl Rig {
    fn new() -> Rig {
        let data = (0..MEMBERS).map(|i| Arc::new(MemMember::new(format!("d{i}"), MEMBER_BYTES))).collect();
        Rig { meta: Arc::new(MemMember::new("meta", 1 << 16)), data, tier: Arc::new(MemMember::new("ssd", TIER_BYTES)) }
    }

    /// The store over the data members, each through `wrap`.
    fn store(&self, wrap: &dyn Fn(Arc<MemMember>) -> Arc<dyn Member>) -> Arc<MemberStore> {
        let members = self.data.iter().map(|m| wrap(m.clone())).collect();
        Arc::new(MemberStore { members, tiers: vec![wrap(self.tier.clone())], zone_bytes: ZONE })
    }
}

/// What the client knows: acknowledged bytes, and the write in flight.
#[derive(Default)]
struct Model {
    acked: BTreeMap<u64, Vec<u8>>,
    in_flight: Option<(u64, Vec<u8>)>,
}

fn bytes(rng: &mut ChaCha8Rng) -> Vec<u8> {
    (0..UNIT).map(|_| rng.gen()).collect()
}

/// Client writes until the power is gone; a write is acknowledged only if
/// the budget still had room after it (all its device writes persisted).
fn client(vol: &MappedVolume, budget: &AtomicI64, model: &Mutex<Model>, seed: u64, start: &Barrier) -> u64 {
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0xc11e47);
    start.wait();
    for n in 0..400 {
        let (l, d) = (rng.gen_range(0..EXTENTS), bytes(&mut rng));
        model.lock().in_flight = Some((l, d.clone()));
        write_retrying(vol, l, &d);
        if budget.load(Ordering::SeqCst) <= 0 {
            return n;
        }
        let mut m = model.lock();
        m.in_flight = None;
        m.acked.insert(l, d);
        drop(m);
        std::thread::yield_now(); // interleave with the migrator
    }
    400
}

/// A write; on zones it waits while the cleaner frees space.  The wait
/// is bounded by time, not by tries: on a loaded machine the cleaner's
/// thread may not run for a long while (CI saw 10,000 yields pass).
fn write_retrying(vol: &MappedVolume, l: u64, d: &[u8]) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while std::time::Instant::now() < deadline {
        match vol.write(l, d) {
            Err(VolumeError::NoSpace(_)) => std::thread::sleep(std::time::Duration::from_micros(200)),
            r => return r.unwrap(),
        }
    }
    panic!("no space for extent {l} within 60 s");
}

/// On zones, when space runs low: one cleaning pass.
fn clean(vol: &MappedVolume) {
    if vol.space().0 <= 4 * ZONE {
        match vol.clean() {
            Ok(_) | Err(VolumeError::NoSpace(_)) => {}
            Err(e) => panic!("{e}"),
        }
    }
}

/// Moves random extents (to a chosen member or, with extents, promoted to
/// the fast tier, half the time) until the power is gone; on zones, cleans
/// and reclaims space as well.
fn migrator(vol: &MappedVolume, budget: &AtomicI64, seed: u64, zoned: bool, start: &Barrier, done: &AtomicBool) -> u64 {
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x316);
    let mut moved = 0;
    start.wait();
    while budget.load(Ordering::SeqCst) > 0 && !done.load(Ordering::SeqCst) {
        let to = match rng.gen_range(0..6) {
            0 | 1 => Some(Pool::Member(rng.gen_range(0..MEMBERS))),
            2 if !zoned => Some(Pool::Tier(0)),
            _ => None,
        };
        match vol.migrate(rng.gen_range(0..EXTENTS), to) {
            Ok(Some((from, to))) => {
                assert_ne!(from, to);
                moved += 1;
            }
            Ok(None) | Err(VolumeError::NoSpace(_)) => {}
            Err(e) => panic!("seed {seed}: {e}"),
        }
        if zoned {
            clean(vol);
        }
        std::thread::yield_now();
    }
    moved
}

fn allocator(zoned: bool) -> Box<dyn Allocator> {
    if zoned {
        let zones: Vec<(u32, u32, u64)> = (0..MEMBERS).flat_map(|m| (0..8).map(move |z| (m, z, ZONE))).collect();
        Box::new(ZoneAllocator::new(&zones))
    } else {
        let mut pools: Vec<(Pool, u64)> = (0..MEMBERS).map(|m| (Pool::Member(m), MEMBER_BYTES)).collect();
        pools.push((Pool::Tier(0), TIER_BYTES));
        Box::new(ExtentAllocator::new(&pools))
    }
}

/// Every extent reads back what the model allows; returns the bytes read.
fn verify(vol: &MappedVolume, model: &Model, seed: u64) -> BTreeMap<u64, Vec<u8>> {
    let mut seen = BTreeMap::new();
    for l in 0..EXTENTS {
        let mut got = vec![0u8; UNIT as usize];
        vol.read(l, &mut got).unwrap();
        let acked = model.acked.get(&l).cloned().unwrap_or_else(|| vec![0u8; UNIT as usize]);
        let flying = model.in_flight.as_ref().filter(|(fl, _)| *fl == l).map(|(_, d)| d);
        assert!(got == acked || Some(&got) == flying, "seed {seed}: extent {l} lost its acknowledged bytes");
        seen.insert(l, got);
    }
    seen
}

/// Space accounting after a rebuild: nothing leaked, nothing doubly owned.
fn check_space(vol: &MappedVolume, seed: u64) {
    let (free, reclaimable, capacity) = vol.space();
    let referenced = vol.map().snapshot().extents.len() as u64 * UNIT;
    assert_eq!(free + reclaimable, capacity - referenced, "seed {seed}: leaked space");
}

/// One seeded run: (client writes acknowledged, migrations done, extents
/// on the fast tier after the crash).
fn run(seed: u64, zoned: bool) -> (u64, u64, usize) {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let rig = Rig::new();
    let budget = Arc::new(AtomicI64::new(i64::MAX));
    let cut = |m: Arc<MemMember>| Arc::new(PowerCut::new(m, budget.clone())) as Arc<dyn Member>;
    let map = BlockMap::format(cut(rig.meta.clone()), GEO).unwrap();
    let vol = MappedVolume::open(map, allocator(zoned), rig.store(&cut)).unwrap();
    let model = Mutex::new(Model::default());
    // Half the extents start written, so moves have work from the start.
    for l in (0..EXTENTS).step_by(2) {
        let d = bytes(&mut rng);
        vol.write(l, &d).unwrap();
        model.lock().acked.insert(l, d);
    }
    budget.store(rng.gen_range(10..1000), Ordering::SeqCst);
    let (start, done) = (Barrier::new(2), AtomicBool::new(false));
    let (writes, moves) = std::thread::scope(|s| {
        let m = s.spawn(|| migrator(&vol, &budget, seed, zoned, &start, &done));
        let w = client(&vol, &budget, &model, seed, &start);
        done.store(true, Ordering::SeqCst);
        (w, m.join().unwrap())
    });
    drop(vol); // the crash: nothing more reaches the devices

    let plain = |m: Arc<MemMember>| m as Arc<dyn Member>;
    let map = BlockMap::open(rig.meta.clone()).unwrap();
    let vol = MappedVolume::open(map, allocator(zoned), rig.store(&plain)).unwrap_or_else(|e| panic!("seed {seed}: {e}"));
    check_space(&vol, seed);
    let on_tier = vol.map().snapshot().extents.values().filter(|p| matches!(p, Placement::Tier { .. })).count();
    let mut model = model.into_inner();
    let seen = verify(&vol, &model, seed);
    // Settle the in-flight write to what it became, then keep going.
    model.in_flight = None;
    model.acked = seen;
    for l in 0..EXTENTS {
        if zoned {
            clean(&vol);
        }
        let d = bytes(&mut rng);
        vol.write(l, &d).unwrap();
        model.acked.insert(l, d);
        vol.migrate((l * 7) % EXTENTS, None).unwrap();
    }
    verify(&vol, &model, seed);
    check_space(&vol, seed);
    (writes, moves, on_tier)
}

fn many(zoned: bool) {
    let (mut writes, mut moves, mut both, mut tiered) = (0, 0, 0, 0);
    for seed in 0..SEEDS {
        let (w, m, t) = run(seed, zoned);
        tiered += t;
        writes += w;
        moves += m;
        both += (w > 0 && m > 0) as u64;
    }
    assert!(writes > 300 && moves > 300, "the runs must write and move before the cut: {writes} writes, {moves} moves");
    assert!(both > SEEDS / 2, "most cuts must land while both threads were working: {both}");
    assert_eq!(tiered > SEEDS as usize, !zoned, "promotions to the fast tier must survive the cuts: {tiered}");
}

#[test]
fn migration_under_client_writes_survives_power_cuts_extents() {
    many(false);
}

#[test]
fn migration_under_client_writes_survives_power_cuts_zones() {
    many(true);
}
