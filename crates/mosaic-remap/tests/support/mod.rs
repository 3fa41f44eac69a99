//! A remap policy run by the real executor on N RAM members, and a
//! reference byte model to check it against.

#![allow(dead_code)]

use std::sync::atomic::AtomicI64;
use std::sync::Arc;

use mosaic_core::{Dir, Frontend, Health, Phase, PlanError, Program};
use mosaic_dev::{MemMember, Member, PowerCut};
use mosaic_exec::{Client, Executor};
use mosaic_remap::{RemapConfig, RemapGeometry, RemapPolicy};

pub const KIB: u64 = 1024;

/// 4 KiB units and blocks, batches of 4.
pub fn small_cfg() -> RemapConfig {
    RemapConfig { unit: 4 * KIB, block: 4 * KIB, batch_units: 4, ..RemapConfig::default() }
}

/// `members` members with `slots` unit slots each after the map region.
pub fn geo(cfg: &RemapConfig, members: usize, slots: u64) -> RemapGeometry {
    let start = if cfg.map_bytes == 0 { 1 << 30 } else { cfg.map_bytes + slots * cfg.unit };
    let mut g = RemapGeometry { members, member_bytes: start };
    // The map region depends (a little) on the member size: settle it.
    for _ in 0..10 {
        let map = RemapPolicy::map_bytes(cfg, &g);
        assert!(map > 0, "geometry {g:?} invalid");
        if g.member_bytes == map + slots * cfg.unit {
            return g;
        }
        g.member_bytes = map + slots * cfg.unit;
    }
    panic!("map region does not settle for {g:?}")
}

pub fn health(n: usize) -> Health {
    Health::all_active(n)
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
        let mems: Vec<_> = (0..geo.members).map(|i| Arc::new(MemMember::new(format!("m{i}"), geo.member_bytes))).collect();
        let exec = executor(&mems);
        let (pol, p) = RemapPolicy::format(cfg.clone(), geo).unwrap();
        exec.run(&p, Client::None, None).unwrap();
        Rig { mems, exec, pol, cfg, geo, now: 1_000_000_000, log: vec![p] }
    }

    /// A rig over members holding `bytes`, the policy recovered from
    /// member 0's map region.
    pub fn from_bytes(cfg: RemapConfig, geo: RemapGeometry, bytes: Vec<Vec<u8>>, now: u64) -> Rig {
        let mems: Vec<_> = bytes
            .into_iter()
            .enumerate()
            .map(|(i, b)| {
                let m = Arc::new(MemMember::new(format!("m{i}"), geo.member_bytes));
                m.restore(b);
                m
            })
            .collect();
        let exec = executor(&mems);
        let map = RemapPolicy::map_bytes(&cfg, &geo) as usize;
        let pol = RemapPolicy::recover(cfg.clone(), geo, &mems[0].snapshot()[..map]).unwrap();
        Rig { mems, exec, pol, cfg, geo, now, log: Vec::new() }
    }

    pub fn n(&self) -> usize {
        self.geo.members
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
        let st = self.pol.submit(true, off, data.len() as u64, self.now, &health(self.n()))?;
        for p in &st.fg {
            self.run(p, Client::In(data));
        }
        Ok(())
    }

    /// Read `len` bytes at `off`.
    pub fn read(&mut self, off: u64, len: u64) -> Result<Vec<u8>, PlanError> {
        self.now += 1_000_000;
        let st = self.pol.submit(false, off, len, self.now, &health(self.n()))?;
        let mut buf = vec![0xAAu8; len as usize];
        for p in &st.fg {
            self.run(p, Client::Out(&mut buf));
        }
        Ok(buf)
    }

    /// The next idle program, planned but not run.
    pub fn plan_idle(&mut self) -> Option<Program> {
        self.now += 200_000_000;
        let mut ps = self.pol.idle(self.now, &health(self.n())).unwrap();
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

    /// Member 0's map region as it is on the member.
    pub fn region(&self) -> Vec<u8> {
        let n = RemapPolicy::map_bytes(&self.cfg, &self.geo) as usize;
        self.mems[0].snapshot()[..n].to_vec()
    }

    /// Every member's bytes.
    pub fn snapshots(&self) -> Vec<Vec<u8>> {
        self.mems.iter().map(|m| m.snapshot()).collect()
    }

    /// Drop the policy and recover it from member 0's map region.
    pub fn recover(&mut self) {
        self.pol = RemapPolicy::recover(self.cfg.clone(), self.geo, &self.region()).unwrap();
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

/// Every unit's place: distinct slots, each a slot of the layout.
pub fn placements_consistent(pol: &RemapPolicy) {
    let lay = pol.layout();
    let mut seen = std::collections::BTreeSet::new();
    for l in 0..lay.capacity_units {
        let (m, off) = pol.placement(l).unwrap();
        assert!(m < lay.members && off >= lay.map_bytes && (off - lay.map_bytes) % lay.unit == 0, "unit {l} at {m}/{off}");
        assert!((off - lay.map_bytes) / lay.unit < lay.slots, "unit {l} beyond the slots");
        assert!(seen.insert((m, off)), "unit {l}: slot {m}/{off} held twice");
    }
    let st = pol.stats();
    assert_eq!(st.free_slots, lay.members as u64 * lay.slots - lay.capacity_units, "{st:?}");
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
