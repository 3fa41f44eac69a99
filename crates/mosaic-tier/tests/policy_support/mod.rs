//! A tier policy run by the real executor on two RAM members, and a
//! reference byte model to check it against.

#![allow(dead_code)]

use std::sync::atomic::AtomicI64;
use std::sync::Arc;

use mosaic_core::{Dir, Frontend, Health, PlanError, Program};
use mosaic_dev::{MemMember, Member, PowerCut};
use mosaic_exec::{Client, Executor};
use mosaic_tier::{PolicyConfig, TierGeometry, TierPolicy, FAST, SLOW};

pub const KIB: u64 = 1024;
pub const BLOCK: u64 = 4096;

/// 4 KiB blocks, 16 KiB and 64 KiB extents (V = 4), 64 KiB erase blocks.
pub fn small_cfg() -> PolicyConfig {
    PolicyConfig {
        sections: vec![(16 * KIB, 0.5), (64 * KIB, 0.5)],
        erase_block: 64 * KIB,
        threshold_v: 4,
        ..PolicyConfig::default()
    }
}

/// Map region + `fast_data` bytes of fast data; `segments` slow
/// segments of `stripe` bytes.
pub fn geo(cfg: &PolicyConfig, fast_data: u64, segments: u64, stripe: u64) -> TierGeometry {
    let mut g = TierGeometry { fast_bytes: 1 << 40, slow_bytes: segments * stripe, slow_stripe: stripe };
    let map = TierPolicy::map_bytes(cfg, &g);
    assert!(map > 0, "geometry {g:?} invalid");
    g.fast_bytes = map + fast_data;
    g
}

/// The tier on two RAM members; programs run by the one executor.
pub struct Rig {
    pub fast: Arc<MemMember>,
    pub slow: Arc<MemMember>,
    pub exec: Executor,
    pub pol: TierPolicy,
    pub cfg: PolicyConfig,
    pub geo: TierGeometry,
    pub now: u64,
    /// Every program run, in order.
    pub log: Vec<Program>,
}

pub fn health() -> Health {
    Health::all_active(2)
}

impl Rig {
    pub fn new(cfg: PolicyConfig, geo: TierGeometry) -> Rig {
        let fast = Arc::new(MemMember::new("fast", geo.fast_bytes));
        let slow = Arc::new(MemMember::new("slow", geo.slow_bytes));
        let exec = Executor::new(vec![Some(fast.clone() as Arc<dyn Member>), Some(slow.clone() as Arc<dyn Member>)], 0);
        let (pol, p) = TierPolicy::format(cfg.clone(), geo).unwrap();
        let rig = Rig { fast, slow, exec, pol, cfg, geo, now: 1_000_000_000, log: Vec::new() };
        rig.exec.run(&p, Client::None, None).unwrap();
        rig
    }

    /// A rig over members holding `fast` and `slow`, the policy
    /// recovered from FAST's map region.
    pub fn from_bytes(cfg: PolicyConfig, geo: TierGeometry, fast_bytes: Vec<u8>, slow_bytes: Vec<u8>, now: u64) -> Rig {
        let fast = Arc::new(MemMember::new("fast", geo.fast_bytes));
        let slow = Arc::new(MemMember::new("slow", geo.slow_bytes));
        fast.restore(fast_bytes);
        slow.restore(slow_bytes);
        let exec = Executor::new(vec![Some(fast.clone() as Arc<dyn Member>), Some(slow.clone() as Arc<dyn Member>)], 0);
        let map = TierPolicy::map_bytes(&cfg, &geo) as usize;
        let pol = TierPolicy::recover(cfg.clone(), geo, &fast.snapshot()[..map]).unwrap();
        Rig { fast, slow, exec, pol, cfg, geo, now, log: Vec::new() }
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
        for p in &st.bg {
            self.run(p, Client::None);
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

    /// One idle call: the programs it gave, run.
    pub fn idle_once(&mut self) -> usize {
        self.now += 200_000_000;
        let ps = self.pol.idle(self.now, &health()).unwrap();
        for p in &ps {
            self.run(p, Client::None);
        }
        ps.len()
    }

    /// Idle calls until one gives nothing (at most `max`); programs run.
    pub fn idle(&mut self, max: usize) -> usize {
        let mut n = 0;
        for _ in 0..max {
            let k = self.idle_once();
            if k == 0 {
                break;
            }
            n += k;
        }
        n
    }

    /// The map region of FAST as it is on the member.
    pub fn meta(&self) -> Vec<u8> {
        let n = TierPolicy::map_bytes(&self.cfg, &self.geo) as usize;
        self.fast.snapshot()[..n].to_vec()
    }

    /// A client flush: the programs it gave, run.
    pub fn flush(&mut self) {
        let ps = self.pol.flush(self.now, &health()).unwrap();
        for p in &ps {
            self.run(p, Client::None);
        }
    }

    /// A clean restart: flush, drop the policy and recover it from
    /// FAST's map region.
    pub fn recover(&mut self) {
        self.flush();
        self.crash();
    }

    /// A crash: drop the policy (and its dirty placements) and recover it
    /// from FAST's map region as it is.
    pub fn crash(&mut self) {
        self.pol = TierPolicy::recover(self.cfg.clone(), self.geo, &self.meta()).unwrap();
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

/// Run `p` with writes cut after `budget` device writes (power cut).
pub fn run_cut(fast: &Arc<MemMember>, slow: &Arc<MemMember>, p: &Program, client: Client<'_>, budget: i64) {
    let b = Arc::new(AtomicI64::new(budget));
    let m0: Arc<dyn Member> = Arc::new(PowerCut::new(fast.clone(), b.clone()));
    let m1: Arc<dyn Member> = Arc::new(PowerCut::new(slow.clone(), b));
    let ex = Executor::new(vec![Some(m0), Some(m1)], 0);
    ex.run(p, client, None).unwrap();
}

/// Each logical block on FAST owns one live fast block, each on SLOW one
/// live slow block; live fast space within what is allocated.
pub fn accounting_holds(r: &Rig) {
    let st = r.pol.stats();
    assert_eq!(st.blocks_fast, st.fast_live, "{st:?}");
    assert_eq!(st.blocks_slow, st.slow_live, "{st:?}");
    assert!(st.fast_live <= st.fast_allocated && st.fast_allocated <= st.fast_blocks, "{st:?}");
}

/// Device writes in `p`.
pub fn write_ops(p: &Program) -> usize {
    p.io().filter(|(d, _)| *d == Dir::Write).map(|(_, ios)| ios.len()).sum()
}

pub const MEMBERS: [usize; 2] = [FAST, SLOW];
