//! The SMR baselines (Segment RAID-5, Sblock RAID-5) on the one real
//! executor: bytes read back equal a reference model, and a request
//! sequence at queue depth 1 issues the same per-member device operations
//! and zone resets on emulated zoned files as in the simulator.

use std::sync::Arc;

use mosaic_core::{DeviceIo, Health, OpCounts, Phase};
use mosaic_dev::zoned::ZonedFile;
use mosaic_drives::{DriveModel, Zoned, ZonedParams};
use mosaic_dvs::baseline::{build_frontend, SchemeSpec};
use mosaic_dvs::{RealBaseline, ZonedMember};
use mosaic_sim::{Mode, SimConfig, Simulator};
use mosaic_trace::{Op, Request};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

const N: usize = 4;
const ZONE: u64 = 64 << 10;
const ZONES: u64 = 14;
const CONV: u64 = 1;
const CHUNK: u64 = 4096;

/// Segment RAID-5 takes 512-byte blocks; Sblock RAID-5 writes whole pages.
fn block(scheme: &str) -> u64 {
    if scheme == "sblock-raid5" {
        4096
    } else {
        512
    }
}

/// A scratch directory, in RAM when the machine has /dev/shm.
fn scratch() -> tempfile::TempDir {
    match std::fs::metadata("/dev/shm") {
        Ok(m) if m.is_dir() => tempfile::tempdir_in("/dev/shm").unwrap_or_else(|_| tempfile::tempdir().unwrap()),
        _ => tempfile::tempdir().unwrap(),
    }
}

fn real(scheme: &str, dir: &std::path::Path) -> RealBaseline {
    let devs: Vec<Arc<dyn ZonedMember>> = (0..N).map(|i| Arc::new(ZonedFile::create(&dir.join(format!("m{i}")), ZONE, ZONES, CONV).unwrap()) as Arc<dyn ZonedMember>).collect();
    RealBaseline::create(scheme, devs, CHUNK, block(scheme)).unwrap()
}

#[derive(Debug, Clone, Copy)]
enum Step {
    Write(u64, u64),
    Read(u64, u64),
}

/// A seeded mix of block-aligned reads and writes of 1..=24 blocks in the
/// first `cap` bytes of the array, two thirds of them in an eighth of that
/// (overwrites: segment rewrites, log cleaning; a half-full log keeps
/// cleaning cheap enough for most tests).
fn workload(seed: u64, count: usize, cap: u64, blk: u64) -> Vec<Step> {
    workload_in(seed, count, cap / 2, blk)
}

fn workload_in(seed: u64, count: usize, cap: u64, blk: u64) -> Vec<Step> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    (0..count)
        .map(|_| {
            let len = rng.gen_range(1..=24u64) * blk;
            let span = if rng.gen_range(0..3) < 2 { cap / 8 } else { cap };
            let off = rng.gen_range(0..=(span - len) / blk) * blk;
            if rng.gen_range(0..100) < 65 {
                Step::Write(off, len)
            } else {
                Step::Read(off, len)
            }
        })
        .collect()
}

/// Run `steps` with random bytes on a fresh `scheme`, checking every read
/// and at the end the whole array against a reference model; the runner.
fn check_bytes(scheme: &str, steps: &[Step], dir: &std::path::Path) -> RealBaseline {
    let mut a = real(scheme, dir);
    let cap = a.capacity();
    let mut model = vec![0u8; cap as usize];
    let mut rng = ChaCha8Rng::seed_from_u64(1);
    for (i, s) in steps.iter().enumerate() {
        match *s {
            Step::Write(off, len) => {
                let mut d = vec![0u8; len as usize];
                rng.fill(&mut d[..]);
                a.write(off, &d).unwrap_or_else(|e| panic!("{scheme} step {i} write {off}+{len}: {e}"));
                model[off as usize..(off + len) as usize].copy_from_slice(&d);
            }
            Step::Read(off, len) => {
                let mut d = vec![0xa5u8; len as usize];
                a.read(off, &mut d).unwrap();
                assert!(d == model[off as usize..(off + len) as usize], "{scheme} step {i}: read {off}+{len} differs from the reference");
            }
        }
    }
    let mut all = vec![0x5au8; cap as usize];
    a.read(0, &mut all).unwrap();
    assert!(all == model, "{scheme}: the whole array differs from the reference");
    a
}

#[test]
fn random_writes_read_back_the_reference_on_both_schemes() {
    for scheme in ["segment-raid5", "sblock-raid5"] {
        let dir = scratch();
        let cap = real(scheme, dir.path()).capacity();
        let a = check_bytes(scheme, &workload(21, 1500, cap, block(scheme)), dir.path());
        let resets: u64 = a.zone_resets().iter().sum();
        assert!(resets > 10, "{scheme}: overwrites reset zones (segment rewrites / log cleaning): {resets}");
        let ops = a.ops();
        assert!(ops.data_reads > 0 && ops.stripes_rmw + ops.stripes_rcw > 0, "{scheme}: partial stripes read old bytes: {ops:?}");
    }
}

#[test]
fn a_full_sblock_log_cleans_inside_requests_and_keeps_the_bytes() {
    // Over the whole array the log runs full: a request's own cleaning
    // moves pages that it (or a later stripe of it) then reads, so their
    // bytes must come from where the request put them, not from the drive.
    let dir = scratch();
    let scheme = "sblock-raid5";
    let cap = real(scheme, dir.path()).capacity();
    let a = check_bytes(scheme, &workload_in(21, 700, cap, block(scheme)), dir.path());
    let ops = a.ops();
    assert!(ops.zone_resets > 20 * 700 / 10, "the log cleaned many zones: {ops:?}");
}

#[test]
fn misaligned_or_unsupported_requests_are_errors() {
    let dir = scratch();
    let mut a = real("sblock-raid5", dir.path());
    assert!(a.write(512, &[1u8; 4096]).is_err(), "not block-aligned");
    assert!(a.write(a.capacity(), &[1u8; 4096]).is_err(), "beyond the capacity");
    let devs: Vec<Arc<dyn ZonedMember>> = (0..N).map(|i| Arc::new(ZonedFile::create(&dir.path().join(format!("x{i}")), ZONE, ZONES, CONV).unwrap()) as Arc<dyn ZonedMember>).collect();
    let e = RealBaseline::create("sblock-raid5", devs.clone(), CHUNK, 512).err().expect("sub-page blocks refused");
    assert!(e.to_string().contains("whole 4 KiB pages"), "{e}");
    assert!(RealBaseline::create("raid5", devs, CHUNK, 512).is_err());
}

#[test]
fn open_files_starts_on_empty_zones() {
    // The maps live in memory: a runner opened on used files resets their
    // sequential zones and starts empty (reads give zeros), then works.
    let dir = scratch();
    let paths: Vec<std::path::PathBuf> = (0..N).map(|i| dir.path().join(format!("m{i}"))).collect();
    let refs: Vec<&std::path::Path> = paths.iter().map(|p| p.as_path()).collect();
    {
        let mut a = real("segment-raid5", dir.path());
        a.write(0, &[7u8; 16384]).unwrap();
        a.flush().unwrap();
    }
    let used: u64 = paths.iter().map(|p| ZonedFile::open(p).unwrap().write_pointer(CONV).unwrap() - CONV * ZONE).sum();
    assert!(used > 0, "the first runner wrote the first sequential zones");
    let mut a = RealBaseline::open_files("segment-raid5", &refs, CHUNK, 512).unwrap();
    let mut d = vec![1u8; 16384];
    a.read(0, &mut d).unwrap();
    assert!(d.iter().all(|&b| b == 0), "a new runner starts empty");
    a.write(4096, &[9u8; 8192]).unwrap();
    a.read(0, &mut d).unwrap();
    assert!(d[..4096].iter().chain(&d[12288..]).all(|&b| b == 0) && d[4096..12288].iter().all(|&b| b == 9));
    assert_eq!(a.zone_resets(), vec![0; N], "the resets at opening are not counted");
}

/// SMR drive models shaped like the real members.
fn smr() -> Vec<Box<dyn DriveModel>> {
    let p = ZonedParams { capacity: ZONE * ZONES, zone_size: ZONE, conventional_zones: CONV, t_pos_ms: 5.0, rate_kib_s: 89_592.0 };
    (0..N).map(|_| Box::new(Zoned::new("smr", p.clone())) as Box<dyn DriveModel>).collect()
}

/// Zone resets per member of the simulator's programs for `steps`.
fn sim_resets(scheme: &str, steps: &[Step]) -> Vec<u64> {
    let spec = SchemeSpec { chunk: CHUNK, block: block(scheme), cache_chunks: 0, parity: 1 };
    let mut fe = build_frontend(scheme, &smr(), &spec).unwrap();
    let h = Health::all_active(N);
    let mut out = vec![0u64; N];
    for (i, s) in steps.iter().enumerate() {
        let st = match *s {
            Step::Write(o, l) => fe.submit(true, o, l, i as u64, &h),
            Step::Read(o, l) => fe.submit(false, o, l, i as u64, &h),
        }
        .unwrap();
        for p in st.fg.iter().chain(&st.bg) {
            for ph in &p.phases {
                if let Phase::Reset(ops) = ph {
                    ops.iter().for_each(|o| out[o.member] += 1);
                }
            }
        }
    }
    out
}

/// mosaic-sim, closed loop at queue depth 1: per-member operations and
/// the report's operation counts.
fn simulate(scheme: &str, steps: &[Step]) -> (Vec<DeviceIo>, OpCounts) {
    let spec = SchemeSpec { chunk: CHUNK, block: block(scheme), cache_chunks: 0, parity: 1 };
    let fe = build_frontend(scheme, &smr(), &spec).unwrap();
    let reqs: Vec<Result<Request, std::convert::Infallible>> = steps
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let (op, offset, len) = match *s {
                Step::Write(o, l) => (Op::Write, o, l),
                Step::Read(o, l) => (Op::Read, o, l),
            };
            Ok(Request { time_ns: i as u64, op, offset, len })
        })
        .collect();
    let sc = SimConfig { mode: Mode::Closed { queue_depth: 1 }, failed: vec![], keep_latencies: false };
    let rep = Simulator::with_frontend(fe, smr(), sc).unwrap().run(reqs.into_iter()).unwrap();
    assert_eq!((rep.realigned, rep.wrapped), (0, 0), "every request fit");
    let devs = rep.devices.iter().map(|d| DeviceIo { reads: d.reads, writes: d.writes, read_bytes: d.read_bytes, write_bytes: d.write_bytes }).collect();
    (devs, rep.ops)
}

#[test]
fn a_real_run_issues_the_simulators_operations() {
    // Sblock twice: a half-full log, and a full one (cleaning inside requests).
    for (scheme, full) in [("segment-raid5", false), ("sblock-raid5", false), ("sblock-raid5", true)] {
        let dir = scratch();
        let mut a = real(scheme, dir.path());
        let steps = if full { workload_in(5, 500, a.capacity(), block(scheme)) } else { workload(5, 1200, a.capacity(), block(scheme)) };
        let mut rng = ChaCha8Rng::seed_from_u64(2);
        for s in &steps {
            match *s {
                Step::Write(off, len) => {
                    let mut d = vec![0u8; len as usize];
                    rng.fill(&mut d[..]);
                    a.write(off, &d).unwrap();
                }
                Step::Read(off, len) => a.read(off, &mut vec![0u8; len as usize]).unwrap(),
            }
        }
        let (sim, ops) = simulate(scheme, &steps);
        eprintln!("{scheme}: real {:?}\n  sim {sim:?}\n  ops {ops:?}", a.member_io());
        assert!(ops.zone_resets > 10 && ops.data_reads > 0 && ops.code_writes > 0, "{scheme}: {ops:?}");
        assert_eq!(a.ops(), ops, "{scheme}: operations by role, zone resets and stripes by method");
        let real_io = a.member_io();
        for m in 0..N {
            assert!(real_io[m].reads > 0 && real_io[m].writes > 0, "{scheme}: member {m} used");
            assert_eq!(real_io[m], sim[m], "{scheme}: member {m}: real vs simulated reads and writes");
        }
        let resets = a.zone_resets();
        assert_eq!(resets.iter().sum::<u64>(), ops.zone_resets);
        assert_eq!(resets, sim_resets(scheme, &steps), "{scheme}: zone resets per member");
    }
}
