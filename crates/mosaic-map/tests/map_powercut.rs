//! Power cuts on the map's metadata device.
//!
//! Random commits (remaps, unmaps, zone pointers; one to four updates each)
//! run on a metadata device whose writes stop persisting after a seeded
//! budget.  The log is tiny, so checkpoints roll it over and alternate
//! slots during every run.  After reopening from what reached the device
//! the map must equal the state after the last acknowledged commit, or
//! that plus the commit in flight, exactly; and the reopened map must go on
//! committing and reopen again to the model.

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use mosaic_dev::{MemMember, Member, PowerCut};
use mosaic_map::{BlockMap, Geometry, MapState, Placement, Update};

const GEO: Geometry = Geometry { unit: 4096, slot_bytes: 4096, log_bytes: 2048 };

fn random_update(rng: &mut ChaCha8Rng) -> Update {
    let logical = rng.gen_range(0..48);
    let offset = rng.gen_range(0..1024u64) * 4096;
    match rng.gen_range(0..10) {
        0..=3 => Update::Map { logical, placement: Placement::Member { member: rng.gen_range(0..4), offset } },
        4 => Update::Map { logical, placement: Placement::Tier { tier: rng.gen_range(0..2), offset } },
        5 | 6 => Update::Map { logical, placement: Placement::Zone { member: 1, zone: rng.gen_range(0..8), offset } },
        7 | 8 => Update::Unmap { logical },
        _ => Update::ZoneWp { member: 1, zone: rng.gen_range(0..8), wp: offset },
    }
}

fn apply(s: &MapState, ups: &[Update]) -> MapState {
    let mut s = s.clone();
    ups.iter().for_each(|u| s.apply(u));
    s
}

/// One run: (checkpoints taken before the cut, commits acknowledged).
fn run(seed: u64) -> (u64, u64) {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mem = Arc::new(MemMember::new("meta", 1 << 16));
    let budget = Arc::new(AtomicI64::new(i64::MAX));
    let dev: Arc<dyn Member> = Arc::new(PowerCut::new(mem.clone(), budget.clone()));
    let map = BlockMap::format(dev, GEO).unwrap();
    budget.store(rng.gen_range(1..120), Ordering::SeqCst);
    let (mut acked, mut in_flight, mut n) = (MapState::default(), None, 0);
    for _ in 0..200 {
        let ups: Vec<Update> = (0..rng.gen_range(1..=4)).map(|_| random_update(&mut rng)).collect();
        let next = apply(&acked, &ups);
        map.commit(&ups).unwrap();
        assert_eq!(map.snapshot(), next, "in memory, a commit applies exactly its updates");
        if budget.load(Ordering::SeqCst) <= 0 {
            in_flight = Some(next);
            break;
        }
        acked = next;
        n += 1;
    }
    let checkpoints = map.stats().checkpoints;
    drop(map);

    let map = BlockMap::open(mem.clone()).unwrap();
    let got = map.snapshot();
    assert!(got == acked || Some(&got) == in_flight.as_ref(), "seed {seed}: reopened map is neither the acknowledged state nor that plus the commit in flight");
    // Go on from the recovered state: the torn tail is overwritten and
    // nothing stale comes back.
    let mut model = got;
    for _ in 0..12 {
        let ups = [random_update(&mut rng), random_update(&mut rng)];
        model = apply(&model, &ups);
        map.commit(&ups).unwrap();
    }
    drop(map);
    assert_eq!(BlockMap::open(mem).unwrap().snapshot(), model, "seed {seed}: commits after recovery");
    (checkpoints, n)
}

#[test]
fn map_survives_power_cuts_at_every_point() {
    let (mut cut_after_checkpoint, mut acked) = (0, 0);
    for seed in 0..400 {
        let (c, n) = run(seed);
        cut_after_checkpoint += (c > 2) as u64;
        acked += n;
    }
    assert!(cut_after_checkpoint > 200, "checkpoints must happen during most runs: {cut_after_checkpoint}");
    assert!(acked > 5000, "runs must acknowledge commits before the cut: {acked}");
}

/// Thread `t`'s share of a state: its own extents (`t * 1000 ..`).
fn share(s: &MapState, t: u64) -> Vec<(u64, Placement)> {
    s.extents.range(t * 1000..(t + 1) * 1000).map(|(&l, &p)| (l, p)).collect()
}

/// Group commit under a power cut: four threads commit to their own
/// extents on a slow-flushing device, so frames carry several callers'
/// commits.  After the cut, each thread's share of the map is its last
/// acknowledged state or that plus its commit in flight.
#[test]
fn grouped_commits_survive_power_cuts() {
    struct SlowFlush(Arc<dyn Member>);
    impl Member for SlowFlush {
        fn describe(&self) -> String {
            self.0.describe()
        }
        fn size(&self) -> u64 {
            self.0.size()
        }
        fn read_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<()> {
            self.0.read_at(buf, offset)
        }
        fn write_at(&self, buf: &[u8], offset: u64) -> std::io::Result<()> {
            self.0.write_at(buf, offset)
        }
        fn flush(&self) -> std::io::Result<()> {
            std::thread::sleep(std::time::Duration::from_micros(300));
            Ok(())
        }
    }
    let mut grouped = 0;
    for seed in 0..40u64 {
        let mem = Arc::new(MemMember::new("meta", 1 << 16));
        let budget = Arc::new(AtomicI64::new(i64::MAX));
        let dev: Arc<dyn Member> = Arc::new(SlowFlush(Arc::new(PowerCut::new(mem.clone(), budget.clone()))));
        let map = BlockMap::format(dev, GEO).unwrap();
        budget.store(ChaCha8Rng::seed_from_u64(seed).gen_range(5..60), Ordering::SeqCst);
        let outcomes: Vec<(MapState, Option<MapState>)> = std::thread::scope(|s| {
            let threads: Vec<_> = (0..4u64)
                .map(|t| {
                    let (map, budget) = (&map, &budget);
                    s.spawn(move || {
                        let mut rng = ChaCha8Rng::seed_from_u64(seed * 10 + t);
                        let mut acked = MapState::default();
                        loop {
                            let logical = t * 1000 + rng.gen_range(0..12);
                            let ups = if rng.gen_bool(0.2) {
                                vec![Update::Unmap { logical }]
                            } else {
                                let placement = Placement::Member { member: t as u32, offset: rng.gen_range(0..64) * 4096 };
                                vec![Update::Map { logical, placement }, Update::Map { logical: logical + 500, placement }]
                            };
                            let next = apply(&acked, &ups);
                            map.commit(&ups).unwrap();
                            if budget.load(Ordering::SeqCst) <= 0 {
                                return (acked, Some(next));
                            }
                            acked = next;
                        }
                    })
                })
                .collect();
            threads.into_iter().map(|h| h.join().unwrap()).collect()
        });
        let st = map.stats();
        grouped += st.commits - st.frames;
        drop(map);
        let got = BlockMap::open(mem).unwrap().snapshot();
        for (t, (acked, in_flight)) in outcomes.iter().enumerate() {
            let t = t as u64;
            let mine = share(&got, t);
            let ok = mine == share(acked, t) || in_flight.as_ref().is_some_and(|f| mine == share(f, t));
            assert!(ok, "seed {seed}: thread {t} lost an acknowledged commit or kept half of one");
        }
    }
    assert!(grouped > 40, "commits must have been grouped into shared frames: {grouped}");
}
