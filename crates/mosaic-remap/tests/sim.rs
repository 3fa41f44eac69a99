//! The same policy in the simulator: a few hundred generated requests
//! replayed on drive models, with moves in the idle gaps.  Every program
//! the simulator got is then run by the real executor on RAM members in
//! the same order: the device operation counts of the simulator's
//! report (on the inner array, a nested drive of four models), of the
//! programs and of the member agree, and every read returns the model's
//! bytes.

use crate::support;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use mosaic_core::{Dir, FixedLayout, Frontend, Health, Level, PlanError, Program, Staged};
use mosaic_dev::{MemMember, Member};
use mosaic_exec::{Client, Executor};
use mosaic_remap::{RemapConfig, RemapPolicy};
use mosaic_sim::nested::ArrayDrive;
use mosaic_sim::{Mode, SimConfig, Simulator};
use mosaic_trace::{Op, Request};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use support::*;

/// What a recorded program was handed out for.
#[derive(Clone, Copy, Debug)]
enum Why {
    Write { offset: u64, len: u64 },
    Read { offset: u64, len: u64 },
    Idle,
}

/// The policy, recording every program it hands out, in order.
struct Recorder {
    pol: RemapPolicy,
    log: Vec<(Program, Why)>,
}

impl Frontend for Recorder {
    fn describe(&self) -> String {
        self.pol.describe()
    }
    fn capacity(&self) -> u64 {
        self.pol.capacity()
    }
    fn block_size(&self) -> u64 {
        self.pol.block_size()
    }
    fn members(&self) -> usize {
        self.pol.members()
    }
    fn submit(&mut self, write: bool, offset: u64, len: u64, now_ns: u64, h: &Health) -> Result<Staged, PlanError> {
        let st = self.pol.submit(write, offset, len, now_ns, h)?;
        let why = if write { Why::Write { offset, len } } else { Why::Read { offset, len } };
        assert!(st.bg.is_empty());
        self.log.extend(st.fg.iter().map(|p| (p.clone(), why)));
        Ok(st)
    }
    fn idle_after_ns(&self) -> Option<u64> {
        self.pol.idle_after_ns()
    }
    fn idle(&mut self, now_ns: u64, h: &Health) -> Result<Vec<Program>, PlanError> {
        let ps = self.pol.idle(now_ns, h)?;
        self.log.extend(ps.iter().map(|p| (p.clone(), Why::Idle)));
        Ok(ps)
    }
    fn stats(&self) -> Vec<(String, f64)> {
        Frontend::stats(&self.pol)
    }
}

/// A RAM member that counts its reads and writes.
struct Counting {
    inner: Arc<MemMember>,
    reads: AtomicU64,
    writes: AtomicU64,
}

impl Member for Counting {
    fn describe(&self) -> String {
        self.inner.describe()
    }
    fn size(&self) -> u64 {
        self.inner.size()
    }
    fn read_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<()> {
        self.reads.fetch_add(1, Ordering::Relaxed);
        self.inner.read_at(buf, offset)
    }
    fn write_at(&self, buf: &[u8], offset: u64) -> std::io::Result<()> {
        self.writes.fetch_add(1, Ordering::Relaxed);
        self.inner.write_at(buf, offset)
    }
    fn flush(&self) -> std::io::Result<()> {
        self.inner.flush()
    }
    fn is_memory(&self) -> bool {
        true
    }
}

/// `count` requests of 1..8 blocks, 2 ms apart, 40% writes.
fn requests(cap: u64, count: usize) -> Vec<Request> {
    let mut rng = ChaCha8Rng::seed_from_u64(7);
    let blocks = cap / 4096;
    (0..count)
        .map(|i| {
            let b = rng.gen_range(0..blocks);
            let n = rng.gen_range(1..=8u64).min(blocks - b);
            let op = if rng.gen_bool(0.4) { Op::Write } else { Op::Read };
            Request { time_ns: i as u64 * 2_000_000, op, offset: b * 4096, len: n * 4096 }
        })
        .collect()
}

/// Per member (reads, writes) of `ps`.
fn program_counts(ps: &[(Program, Why)], n: usize) -> Vec<(u64, u64)> {
    let mut c = vec![(0, 0); n];
    for (p, _) in ps {
        for (d, ios) in p.io() {
            for io in ios {
                match d {
                    Dir::Read => c[io.op.member].0 += 1,
                    Dir::Write => c[io.op.member].1 += 1,
                }
            }
        }
    }
    c
}

/// A fresh array with a target moving every third unit to the next
/// column, replayed on an inner array of four `spec` drives.
fn replay(spec: &str, cfg: &RemapConfig, g: &mosaic_remap::RemapGeometry, reqs: &[Request]) -> (Recorder, Program, mosaic_sim::SimReport) {
    let (pol, format) = RemapPolicy::format(cfg.clone(), g.clone()).unwrap();
    let mut rec = Recorder { pol, log: Vec::new() };
    let units = rec.pol.layout().capacity_units;
    rec.pol.set_target((0..units).filter(|l| l % 3 == 0).map(|l| (l, ((l + 1) % 4) as usize)).collect()).unwrap();
    let drive = mosaic_drives::preset(spec).unwrap();
    let drives = (0..4).map(|_| drive.build(Some(g.inner.member_data_bytes()))).collect();
    let inner = ArrayDrive::new(FixedLayout::new(g.inner.clone()).unwrap(), drives).unwrap();
    let models: Vec<Box<dyn mosaic_drives::DriveModel>> = vec![Box::new(inner)];
    let sim_cfg = SimConfig { mode: Mode::Open { time_scale: 1.0 }, ..SimConfig::default() };
    let sim = Simulator::with_frontend(Box::new(&mut rec), models, sim_cfg).unwrap();
    let report = sim.run(reqs.iter().map(|r| Ok::<_, std::convert::Infallible>(*r))).unwrap();
    (rec, format, report)
}

#[test]
fn simulator_and_executor_see_the_same_device_operations() {
    let cfg = RemapConfig { unit: 16 * KIB, block: 4 * KIB, batch_units: 4, idle_after_ns: 100_000, ..RemapConfig::default() };
    for (level, spec) in [(Level::Raid0, "ram:default"), (Level::Raid0, "ssd:generic-sata"), (Level::Raid5, "ssd:generic-sata")] {
        let g = geo_level(&cfg, level, 4, 24);
        let cap = RemapPolicy::format(cfg.clone(), g.clone()).unwrap().0.capacity();
        let reqs = requests(cap, 300);
        let (rec, format, report) = replay(spec, &cfg, &g, &reqs);
        assert_eq!(report.requests, 300, "{spec}");
        let st = rec.pol.stats();
        assert!(st.moves > 0 && st.move_programs > 0, "{spec}: moves ran in the idle gaps: {st:?}");
        let want = program_counts(&rec.log, 1);
        let got: Vec<(u64, u64)> = report.devices.iter().map(|d| (d.reads, d.writes)).collect();
        assert_eq!(got, want, "{spec}: simulator vs programs");
        assert!(report.policy.iter().any(|(k, v)| k == "moves" && *v == st.moves as f64), "{spec}: {:?}", report.policy);
        assert_eq!(execute(&format, &rec.log, g.inner.capacity(), cap), want, "{spec}: executor vs programs");
    }
}

/// Run the format program and then `log` in order on a counting RAM
/// member (the inner space); every read checked against a model of the
/// writes.  The counts of the logged programs.
fn execute(format: &Program, log: &[(Program, Why)], member_bytes: u64, cap: u64) -> Vec<(u64, u64)> {
    let mems = vec![Arc::new(Counting { inner: Arc::new(MemMember::new(String::from("inner"), member_bytes)), reads: AtomicU64::new(0), writes: AtomicU64::new(0) })];
    let exec = Executor::new(mems.iter().map(|m| Some(m.clone() as Arc<dyn Member>)).collect(), 0);
    exec.run(format, Client::None, None).unwrap();
    for m in &mems {
        m.reads.store(0, Ordering::Relaxed);
        m.writes.store(0, Ordering::Relaxed);
    }
    let mut model = Model::new(cap);
    for (i, (p, why)) in log.iter().enumerate() {
        match *why {
            Why::Write { offset, len } => {
                let d = pattern(i as u64, offset, len);
                exec.run(p, Client::In(&d), None).unwrap();
                model.write(offset, &d);
            }
            Why::Read { offset, len } => {
                let mut b = vec![0u8; len as usize];
                exec.run(p, Client::Out(&mut b), None).unwrap();
                assert_eq!(b, model.get(offset, len), "program {i}: read at {offset}");
            }
            Why::Idle => {
                exec.run(p, Client::None, None).unwrap();
            }
        }
    }
    mems.iter().map(|m| (m.reads.load(Ordering::Relaxed), m.writes.load(Ordering::Relaxed))).collect()
}
