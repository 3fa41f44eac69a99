//! The project's central invariant for DVS: a replay at queue depth 1 gives
//! identical per-member operation counts and bytes on a real array
//! (`DvsArray` on emulated zoned files) and in the simulator (the plans of
//! `DvsFrontend`, counted the way `mosaic-sim` counts them) — data, parity,
//! fill reads, garbage collection, metadata log records, checkpoints and
//! the write-cache journal included.

use std::path::Path;
use std::sync::Arc;

use mosaic_core::{DeviceIo, Frontend, Health, MemberState, Program, Role};
use mosaic_dev::zoned::ZonedFile;
use mosaic_dvs::array::ZonedMember;
use mosaic_dvs::meta::MetaLayout;
use mosaic_drives::{DriveModel, Zoned, ZonedParams};
use mosaic_dvs::baseline::{build_frontend, SchemeSpec};
use mosaic_dvs::{DvsArray, DvsConfig, DvsFrontend, DvsStats, Geo};
use mosaic_sim::{Mode, SimConfig, Simulator};
use mosaic_trace::{Op, Request};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

const N: usize = 5;
const CHUNK: u64 = 4096;
const ZONE: u64 = 16 * CHUNK;
const ZONES: u64 = 26;

/// A scratch directory, in RAM when the machine has /dev/shm.
fn scratch() -> tempfile::TempDir {
    match std::fs::metadata("/dev/shm") {
        Ok(m) if m.is_dir() => tempfile::tempdir_in("/dev/shm").unwrap_or_else(|_| tempfile::tempdir().unwrap()),
        _ => tempfile::tempdir().unwrap(),
    }
}

/// A 4+1 array; with a write cache of `cache` chunks (and room for its
/// journal).  The first two conventional zones hold the member labels.
fn cfg(cache: u64) -> DvsConfig {
    let conv = if cache > 0 { 6 } else { 4 };
    DvsConfig { cache_chunks: cache, ..DvsConfig::new(N, 1, CHUNK, ZONE, ZONES, conv) }
}

fn members(dir: &Path, c: &DvsConfig) -> Vec<Arc<dyn ZonedMember>> {
    (0..N).map(|i| Arc::new(ZonedFile::create(&dir.join(format!("m{i}")), c.zone_size, c.zones, c.conventional).unwrap()) as Arc<dyn ZonedMember>).collect()
}

/// One step of the workload.
#[derive(Debug, Clone, Copy)]
enum Step {
    Write(u64, u64),
    Read(u64, u64),
    /// The drives are idle: GC steps until there is nothing worth collecting.
    Idle,
    /// Member fails (recorded in the metadata of the others).
    Fail(usize),
}

/// A seeded mix of 4 KiB..256 KiB reads and writes (512-byte aligned, so
/// partial chunks need fill reads), with an idle period every 40 requests.
fn workload(seed: u64, count: usize, cap: u64) -> Vec<Step> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut out = Vec::new();
    for i in 0..count {
        let len = rng.gen_range(8..=512u64) * 512;
        let off = rng.gen_range(0..=(cap - len) / 512) * 512;
        out.push(if rng.gen_range(0..100) < 65 { Step::Write(off, len) } else { Step::Read(off, len) });
        if i % 40 == 39 {
            out.push(Step::Idle);
        }
    }
    out
}

/// Most GC steps one idle period runs (both sides stop at the same one).
const MAX_IDLE_STEPS: usize = 1000;

/// The real array: per-member operations and policy counters.
fn run_real(c: &DvsConfig, steps: &[Step]) -> (Vec<DeviceIo>, DvsStats) {
    let dir = scratch();
    let mut a = DvsArray::create(members(dir.path(), c), c.clone()).unwrap();
    a.reset_io();
    assert_eq!(a.member_io(), vec![DeviceIo::default(); N], "reset_io starts over");
    drive_real(&mut a, steps);
    (a.member_io(), a.stats().clone())
}

/// Run `steps` on a real array.
fn drive_real(a: &mut DvsArray, steps: &[Step]) {
    let mut rng = ChaCha8Rng::seed_from_u64(99);
    for s in steps {
        match *s {
            Step::Write(off, len) => {
                let mut d = vec![0u8; len as usize];
                rng.fill(&mut d[..]);
                a.write(off, &d).unwrap();
            }
            Step::Read(off, len) => {
                let mut d = vec![0u8; len as usize];
                a.read(off, &mut d).unwrap();
            }
            Step::Fail(m) => a.fail(m).unwrap(),
            Step::Idle => {
                for _ in 0..MAX_IDLE_STEPS {
                    if !a.gc_step().unwrap() {
                        break;
                    }
                }
            }
        }
    }
}

/// Count a plan's operations as `mosaic-sim` does: read-phase ops are
/// reads, write-phase ops writes, zone resets neither.
fn count(io: &mut [DeviceIo], meta: &mut Vec<(u64, u64)>, programs: &[Program]) {
    for p in programs {
        for (dir, ios) in p.io() {
            for op in ios.iter().map(|i| i.op) {
                io[op.member].add(dir, op.len);
                if op.role == Role::Meta {
                    meta.push((op.offset, op.len));
                }
            }
        }
    }
}

/// The simulator side at queue depth 1: every foreground and background
/// plan of each request, and on idle `Frontend::idle` until it has nothing
/// more (as `mosaic-sim` calls it again after each step finishes).
/// Returns per-member operations, policy counters and the metadata writes
/// (offset, length) seen.
fn run_sim(c: &DvsConfig, steps: &[Step]) -> (Vec<DeviceIo>, DvsStats, Vec<(u64, u64)>) {
    drive_sim(&mut DvsFrontend::for_array(c).unwrap(), steps)
}

/// Run `steps` through a front end (see [`run_sim`]).
fn drive_sim(fe: &mut DvsFrontend, steps: &[Step]) -> (Vec<DeviceIo>, DvsStats, Vec<(u64, u64)>) {
    let mut h = Health::all_active(N);
    let mut io = vec![DeviceIo::default(); N];
    let mut meta = Vec::new();
    let mut now = 0u64;
    for s in steps {
        now += 1_000_000;
        match *s {
            Step::Write(off, len) | Step::Read(off, len) => {
                let st = fe.submit(matches!(s, Step::Write(..)), off, len, now, &h).unwrap();
                count(&mut io, &mut meta, &st.fg);
                count(&mut io, &mut meta, &st.bg);
            }
            // As the simulator's health: the front end records it at the next call.
            Step::Fail(m) => h.states[m] = MemberState::Failed,
            Step::Idle => {
                for _ in 0..MAX_IDLE_STEPS {
                    let p = fe.idle(now, &h).unwrap();
                    if p.is_empty() {
                        break;
                    }
                    count(&mut io, &mut meta, &p);
                }
            }
        }
    }
    (io, fe.dvs.stats.clone(), meta)
}

/// Runs both sides and checks them equal, member by member.
fn same_ops(cache: u64, seed: u64, count: usize, failed: Option<usize>) {
    same_ops_on(cfg(cache), seed, count, failed);
}

/// A cached array whose journal is a ring retired piecewise.
fn cfg_ring(cache: u64) -> DvsConfig {
    DvsConfig { journal_ring: true, ..cfg(cache) }
}

/// The real array's and the simulator's per-member operations, policy
/// counters, and (the simulator's) metadata writes for `steps`.
fn run_both(c: &DvsConfig, steps: &[Step]) -> (Vec<DeviceIo>, DvsStats, Vec<DeviceIo>, DvsStats, Vec<(u64, u64)>) {
    let (real, rstats) = run_real(c, steps);
    let (sim, sstats, meta) = run_sim(c, steps);
    (real, rstats, sim, sstats, meta)
}

/// [`same_ops`] on an array of `c`.
fn same_ops_on(c: DvsConfig, seed: u64, count: usize, failed: Option<usize>) {
    let cache = c.cache_chunks;
    let geo = Geo::new(c.clone()).unwrap();
    let mut steps = workload(seed, count, geo.capacity());
    let half = steps.len() / 2;
    let mut before = DeviceIo::default();
    if let Some(m) = failed {
        // Half way: the member has data by then, so reads reconstruct.
        steps.insert(half, Step::Fail(m));
        before = run_real(&c, &steps[..half]).0[m];
    }
    let (real, rstats, sim, sstats, meta) = run_both(&c, &steps);
    eprintln!("cache {cache}: real {real:?}\n         sim  {sim:?}\n stats {rstats:?}");
    assert_eq!(sstats, rstats, "the same jobs on both sides");
    assert!(rstats.fg_gc > 0 && rstats.bg_gc > 0 && rstats.gc_moved > 0, "GC ran, foreground and on idle: {rstats:?}");
    assert!(rstats.fills > 0, "partial chunks were filled: {rstats:?}");
    // Metadata: log records, at least one checkpoint (the log filled up),
    // and with a cache the journal.
    let ml = MetaLayout::new(&geo).unwrap();
    assert!(meta.iter().any(|&(o, _)| o >= ml.log_start && o < ml.log_end), "log records");
    assert!(meta.iter().any(|&(o, _)| o == ml.slot_offset(0) || o == ml.slot_offset(1)), "a checkpoint");
    assert_eq!(meta.iter().any(|&(o, _)| o >= ml.journal_start && o < ml.journal_end), cache > 0, "journal records iff cached");
    assert_eq!(rstats.degraded_reads > 0, failed.is_some(), "reconstructions iff degraded: {rstats:?}");
    for m in 0..N {
        if Some(m) == failed {
            assert_eq!(real[m], before, "failed member {m} untouched after it failed");
        } else {
            assert!(real[m].reads > 0 && real[m].writes > 0, "member {m} used: {:?}", real[m]);
        }
        assert_eq!(sim[m], real[m], "member {m}: simulated vs real operations");
    }
}

#[test]
fn write_through_replay_issues_the_real_arrays_operations() {
    same_ops(0, 7, 400, None);
}

#[test]
fn cached_replay_issues_the_real_arrays_operations() {
    same_ops(32, 11, 400, None);
}

#[test]
fn ring_journal_replay_issues_the_real_arrays_operations() {
    // The journal (a few dozen records) wraps many times: the oldest
    // live records' SSGs are destaged and dead segments retired alike.
    let ml = MetaLayout::new(&Geo::new(cfg_ring(32)).unwrap()).unwrap();
    assert!(ml.jsegs > 1, "a ring of segments: {ml:?}");
    same_ops_on(cfg_ring(32), 11, 400, None);
    same_ops_on(cfg_ring(32), 12, 300, Some(1));
}

#[test]
fn fused_destages_replay_as_the_real_arrays_operations() {
    // 64 KiB chunks and 2 MiB zones on /dev/shm: a destage computes over
    // a MiB of parity, so the real executor runs it fused with its
    // appends (`mosaic_exec::fusable`), writes in pieces; the counted
    // operations are still the simulator's.
    let c = DvsConfig { cache_chunks: 64, ..DvsConfig::new(N, 1, 64 << 10, 2 << 20, 14, 6) };
    let steps = workload(13, 2000, Geo::new(c.clone()).unwrap().capacity());
    let (real, rstats, sim, sstats, _) = run_both(&c, &steps);
    assert!(rstats.destages > 50 && rstats.fg_gc + rstats.bg_gc > 0, "destages and GC ran: {rstats:?}");
    assert_eq!(sstats, rstats, "the same jobs on both sides");
    assert_eq!(sim, real, "simulated vs real operations, member by member");
}

#[test]
fn degraded_replay_issues_the_real_arrays_operations() {
    // Member 2 fails half way (a log record on the others), then reads and
    // fills reconstruct through the SIT and new stripes skip it.
    same_ops(0, 5, 300, Some(2));
    same_ops(32, 6, 300, Some(2));
}

/// SMR drive models with the geometry of the members of `c`.
fn smr(c: &DvsConfig) -> Vec<Box<dyn DriveModel>> {
    let p = ZonedParams { capacity: c.zone_size * c.zones, zone_size: c.zone_size, conventional_zones: c.conventional, t_pos_ms: 5.0, rate_kib_s: 89_592.0 };
    (0..N).map(|_| Box::new(Zoned::new("smr", p.clone())) as Box<dyn DriveModel>).collect()
}

#[test]
fn mosaic_sim_replay_of_the_cli_front_end_issues_the_real_arrays_operations() {
    // `mosaic replay --layout dvs` builds its front end with
    // `build_frontend` (no cache): on drives shaped like the real array's
    // members it is the real array's twin.  The simulator itself runs it,
    // closed loop at queue depth 1 (no idle periods: no idle GC).
    let c = cfg(0);
    let cap = Geo::new(c.clone()).unwrap().capacity();
    let steps: Vec<Step> = workload(3, 300, cap).into_iter().filter(|s| !matches!(s, Step::Idle)).collect();
    let (real, rstats) = run_real(&c, &steps);
    assert!(rstats.fg_gc > 0, "{rstats:?}");
    let spec = SchemeSpec { chunk: CHUNK, block: 512, cache_chunks: 0, parity: 1 };
    let fe = build_frontend("dvs", &smr(&c), &spec).unwrap();
    assert_eq!(fe.capacity(), cap);
    let reqs: Vec<Result<Request, std::convert::Infallible>> = steps
        .iter()
        .enumerate()
        .map(|(i, s)| match *s {
            Step::Write(offset, len) => Ok(Request { time_ns: i as u64, op: Op::Write, offset, len }),
            Step::Read(offset, len) => Ok(Request { time_ns: i as u64, op: Op::Read, offset, len }),
            _ => unreachable!("no idle or failure steps here"),
        })
        .collect();
    let sc = SimConfig { mode: Mode::Closed { queue_depth: 1 }, failed: vec![], keep_latencies: false };
    let rep = Simulator::with_frontend(fe, smr(&c), sc).unwrap().run(reqs.into_iter()).unwrap();
    assert!(rep.ops.meta_writes > 0 && rep.ops.zone_resets > 0);
    assert_eq!(rep.devices.len(), N);
    for (m, d) in rep.devices.iter().enumerate() {
        let sim = DeviceIo { reads: d.reads, writes: d.writes, read_bytes: d.read_bytes, write_bytes: d.write_bytes };
        assert_eq!(sim, real[m], "member {m}: mosaic-sim vs real operations");
    }
}

#[test]
fn the_twin_of_a_reopened_array_issues_its_operations() {
    // A real replay runs on an array that exists: opened, tables full,
    // log restarted by open's checkpoint, cache refilled from the journal.
    for (cache, ring) in [(0, false), (32, false), (32, true)] {
        let c = DvsConfig { journal_ring: ring, ..cfg(cache) };
        let cap = Geo::new(c.clone()).unwrap().capacity();
        let steps = workload(13, 300, cap);
        let (first, second) = steps.split_at(steps.len() / 2);
        let dir = scratch();
        drive_real(&mut DvsArray::create(members(dir.path(), &c), c.clone()).unwrap(), first);
        let devs: Vec<Arc<dyn ZonedMember>> = (0..N).map(|i| Arc::new(ZonedFile::open(&dir.path().join(format!("m{i}"))).unwrap()) as Arc<dyn ZonedMember>).collect();
        let mut a = DvsArray::open(devs).unwrap();
        assert!(a.member_io().iter().all(|d| d.reads > 0 && d.writes > 0), "open's own reads and checkpoint are counted");
        a.reset_io();
        let mut fe = a.replay_twin();
        let (sim, sstats, _) = drive_sim(&mut fe, second);
        drive_real(&mut a, second);
        assert!(a.stats().fg_gc > 0);
        assert_eq!(&sstats, a.stats(), "cache {cache}");
        assert_eq!(sim, a.member_io(), "cache {cache}: simulated vs real operations after a reopen");
    }
}
