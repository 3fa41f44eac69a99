//! A remap policy run by the real executor on one RAM member standing
//! for the inner array's logical space, and a reference byte model to
//! check it against.

#![allow(dead_code)]

use std::sync::atomic::AtomicI64;
use std::sync::Arc;

use mosaic_core::{Dir, Frontend, Geometry, Health, Level, Phase, PlanError, Program};
use mosaic_dev::{MemMember, Member, PowerCut};
use mosaic_exec::{Client, Executor};
use mosaic_remap::{RemapConfig, RemapGeometry, RemapPolicy};

pub const KIB: u64 = 1024;

/// 4 KiB units and blocks, batches of 4.
pub fn small_cfg() -> RemapConfig {
    RemapConfig { unit: 4 * KIB, block: 4 * KIB, batch_units: 4, ..RemapConfig::default() }
}

/// A raid0 inner array of `drives` drives (stripe unit = the remap
/// unit) with `slots` unit slots per drive after the map region.
pub fn geo(cfg: &RemapConfig, drives: usize, slots: u64) -> RemapGeometry {
    geo_level(cfg, Level::Raid0, drives, slots)
}

/// An inner array of `level` over `drives` drives whose stripes after
/// the map region number `stripes` (whole periods).
pub fn geo_level(cfg: &RemapConfig, level: Level, drives: usize, stripes: u64) -> RemapGeometry {
    let inner = |stripes: u64| RemapGeometry::new(Geometry::new(level, drives, cfg.unit, cfg.block.max(512), stripes * cfg.unit).unwrap());
    // The map region depends (a little) on the inner size: settle it.
    let mut extra = 1;
    for _ in 0..40 {
        let g = inner(stripes + extra);
        match RemapPolicy::format(cfg.clone(), g.clone()) {
            Ok((p, _)) if p.layout().map_stripes == extra => return g,
            Ok((p, _)) => extra = p.layout().map_stripes,
            Err(_) => extra *= 2,
        }
    }
    panic!("map region does not settle for {level} over {drives} drives, {stripes} stripes")
}

/// The inner array (member 0) healthy.
pub fn health() -> Health {
    Health::all_active(1)
}

/// The policy on RAM members; programs run by the one executor.
pub struct Rig {
    pub mems: Vec<Arc<MemMember>>,
    pub exec: Executor,
    pub pol: RemapPolicy,
    pub cfg: RemapConfig,
    pub geo: RemapGeometry,
    pub now: u64,
    /// Every program run, in order.
    pub log: Vec<Program>,
}

fn executor(mems: &[Arc<MemMember>]) -> Executor {
    Executor::new(mems.iter().map(|m| Some(m.clone() as Arc<dyn Member>)).collect(), 0)
}

impl Rig {
    pub fn new(cfg: RemapConfig, geo: RemapGeometry) -> Rig {
        let mems = vec![Arc::new(MemMember::new(String::from("inner"), geo.inner.capacity()))];
        let exec = executor(&mems);
        let (pol, p) = RemapPolicy::format(cfg.clone(), geo.clone()).unwrap();
        exec.run(&p, Client::None, None).unwrap();
        Rig { mems, exec, pol, cfg, geo, now: 1_000_000_000, log: vec![p] }
    }

    /// A rig over a member holding `bytes`, the policy recovered from
    /// its map region.
    pub fn from_bytes(cfg: RemapConfig, geo: RemapGeometry, bytes: Vec<Vec<u8>>, now: u64) -> Rig {
        let mems: Vec<_> = bytes
            .into_iter()
            .enumerate()
            .map(|(i, b)| {
                let m = Arc::new(MemMember::new(format!("m{i}"), geo.inner.capacity()));
                m.restore(b);
                m
            })
            .collect();
        let exec = executor(&mems);
        let map = RemapPolicy::map_bytes(&cfg, &geo) as usize;
        let pol = RemapPolicy::recover(cfg.clone(), geo.clone(), &mems[0].snapshot()[..map]).unwrap();
        Rig { mems, exec, pol, cfg, geo, now, log: Vec::new() }
    }

    /// Columns (drives holding data).
    pub fn cols(&self) -> usize {
        self.pol.layout().ncols()
    }

    /// Run one program and remember it.
    pub fn run(&mut self, p: &Program, client: Client<'_>) {
        p.validate().unwrap();
        self.exec.run(p, client, None).unwrap();
        self.log.push(p.clone());
    }

    /// Write `data` at byte `off`; the error when the policy refuses.
    pub fn write(&mut self, off: u64, data: &[u8]) -> Result<(), PlanError> {
        self.now += 1_000_000;
        let st = self.pol.submit(true, off, data.len() as u64, self.now, &health())?;
        for p in &st.fg {
            self.run(p, Client::In(data));
        }
        Ok(())
    }

    /// Read `len` bytes at `off`.
    pub fn read(&mut self, off: u64, len: u64) -> Result<Vec<u8>, PlanError> {
        self.now += 1_000_000;
        let st = self.pol.submit(false, off, len, self.now, &health())?;
        let mut buf = vec![0xAAu8; len as usize];
        for p in &st.fg {
            self.run(p, Client::Out(&mut buf));
        }
        Ok(buf)
    }

    /// The next idle program, planned but not run.
    pub fn plan_idle(&mut self) -> Option<Program> {
        self.now += 200_000_000;
        let mut ps = self.pol.idle(self.now, &health()).unwrap();
        assert!(ps.len() <= 1, "one program per idle call");
        ps.pop()
    }

    /// Idle calls until one gives nothing (at most `max`); programs run.
    pub fn idle(&mut self, max: usize) -> usize {
        let mut n = 0;
        while n < max {
            let Some(p) = self.plan_idle() else { break };
            self.run(&p, Client::None);
            n += 1;
        }
        n
    }

    /// The map region as it is on the member.
    pub fn region(&self) -> Vec<u8> {
        let n = RemapPolicy::map_bytes(&self.cfg, &self.geo) as usize;
        self.mems[0].snapshot()[..n].to_vec()
    }

    /// Every member's bytes.
    pub fn snapshots(&self) -> Vec<Vec<u8>> {
        self.mems.iter().map(|m| m.snapshot()).collect()
    }

    /// Drop the policy and recover it from the map region.
    pub fn recover(&mut self) {
        self.pol = RemapPolicy::recover(self.cfg.clone(), self.geo.clone(), &self.region()).unwrap();
    }

    pub fn capacity(&self) -> u64 {
        self.pol.capacity()
    }
}

/// Device ops of `p` on `member`: (direction, offset, len).
pub fn ops_on(p: &Program, member: usize) -> Vec<(Dir, u64, u64)> {
    p.ops_on(member)
}

pub use mosaic_dev::testing::{pattern, Model};

/// Fill the whole volume with a pattern; the model of it.
pub fn fill(r: &mut Rig, tag: u64) -> Model {
    let cap = r.capacity();
    let mut m = Model::new(cap);
    let d = pattern(tag, 0, cap);
    r.write(0, &d).unwrap();
    m.write(0, &d);
    m
}

/// Run `p` on `mems` with writes cut after `budget` device writes.
pub fn run_cut(mems: &[Arc<MemMember>], p: &Program, client: Client<'_>, budget: i64) {
    let b = Arc::new(AtomicI64::new(budget));
    let cut: Vec<Option<Arc<dyn Member>>> = mems.iter().map(|m| Some(Arc::new(PowerCut::new(m.clone(), b.clone())) as Arc<dyn Member>)).collect();
    Executor::new(cut, 0).run(p, client, None).unwrap();
}

/// Device writes in `p`.
pub fn write_ops(p: &Program) -> usize {
    p.io().filter(|(d, _)| *d == Dir::Write).map(|(_, ios)| ios.len()).sum()
}

/// The phase kinds of `p`, for protocol checks.
pub fn shape(p: &Program) -> Vec<&'static str> {
    p.phases
        .iter()
        .map(|ph| match ph {
            Phase::Read(_) => "read",
            Phase::Write { .. } => "write",
            Phase::Compute(_) => "compute",
            Phase::Flush(_) => "flush",
            Phase::Reset(_) => "reset",
        })
        .collect()
}

/// Every unit's place: distinct slots, each a slot of its column.
pub fn placements_consistent(pol: &RemapPolicy) {
    let lay = pol.layout();
    let mut seen = std::collections::BTreeSet::new();
    for l in 0..lay.capacity_units {
        let (c, off) = pol.placement(l).unwrap();
        let (c2, j) = lay.slot_at(off).unwrap_or_else(|| panic!("unit {l} at {off}: not a slot"));
        assert!(c == c2 && j < lay.slots, "unit {l} at column {c}, offset {off}: slot ({c2}, {j})");
        assert!(seen.insert(off), "unit {l}: inner offset {off} held twice");
    }
    let st = pol.stats();
    assert_eq!(st.free_slots, lay.ncols() as u64 * lay.slots - lay.capacity_units, "{st:?}");
}

/// `got == want`, reported by the first differing byte (not megabytes of
/// numbers).
#[track_caller]
pub fn assert_bytes(got: &[u8], want: &[u8], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: lengths");
    if let Some(i) = got.iter().zip(want).position(|(a, b)| a != b) {
        panic!("{what}: first difference at byte {i} (block {}): got {} want {}", i / 4096, got[i], want[i]);
    }
}
