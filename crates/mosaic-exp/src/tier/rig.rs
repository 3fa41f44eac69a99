//! The drives and the schemes, replayed in virtual time.
//!
//! ```text
//!   all-ssd    raid1 over 2 SSD models (the whole volume on flash)
//!   all-hdd    raid6 over `hdds` HDD models
//!   lru-cache  LruCache { member 0: FAST = ArrayDrive(raid1, 2 SSDs),
//!                         member 1: SLOW = ArrayDrive(raid6, HDDs) }
//!   tier-*     TierPolicy over the same two members
//! ```
//!
//! The cache and the tier get the same FAST and SLOW arrays: the SSDs cut
//! to `fast_cap` bytes each, the HDDs to `slow_cap`; the cache holds as
//! many blocks as FAST does.  all-ssd gets whole SSDs (it must hold the
//! whole volume; the SSD model's timing does not depend on capacity),
//! all-hdd the same HDDs as SLOW.  Every scheme sees its arrays the same
//! way, as [`ArrayDrive`]s (all-ssd and all-hdd are a one-member
//! pass-through over one), so queueing is modelled alike and device
//! counts are per inner array for all.  Inner arrays use 512-byte blocks
//! so any block size of the workload maps onto them.

use mosaic_core::{FixedLayout, Frontend, Geometry, Layout, Level};
use mosaic_drives::{preset, DriveModel};
use mosaic_sim::nested::ArrayDrive;
use mosaic_sim::{Mode, SimConfig, SimReport, Simulator};
use mosaic_trace::Request;
use serde::Serialize;

use super::lru::LruCache;
use super::TierEvalError;

/// The modelled hardware.
#[derive(Debug, Clone, Serialize)]
pub struct Rig {
    /// SSD preset.
    pub ssd: String,
    /// HDD preset.
    pub hdd: String,
    /// HDDs in the slow raid6.
    pub hdds: usize,
    /// Stripe unit of both inner arrays.
    pub chunk: u64,
    /// Bytes of each SSD the tier and the cache use.
    pub fast_cap: u64,
    /// Bytes of each HDD.
    pub slow_cap: u64,
    /// Logical block of the cache and the tier.
    pub block: u64,
}

impl Default for Rig {
    fn default() -> Self {
        Rig { ssd: "ssd:samsung-830-128g".into(), hdd: "hdd:generic-7200".into(), hdds: 6, chunk: 64 << 10, fast_cap: 2 << 30, slow_cap: 16 << 30, block: 4096 }
    }
}

/// A scheme under test.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Scheme {
    AllSsd,
    AllHdd,
    Lru,
    /// The tier with one extent size (bytes) and the paper's threshold V
    /// (in its 1 KB blocks; the tier gets the same bytes in its own blocks,
    /// see [`super::tierfe::threshold_blocks`]).
    Tier { extent: u64, v: u64 },
}

impl Scheme {
    pub fn name(&self) -> String {
        match self {
            Scheme::AllSsd => "all-ssd".into(),
            Scheme::AllHdd => "all-hdd".into(),
            Scheme::Lru => "lru-cache".into(),
            Scheme::Tier { extent, v } => format!("tier {}K V={v}", extent >> 10),
        }
    }
}

/// One replay's figures.
#[derive(Debug, Clone, Serialize)]
pub struct RunRow {
    pub scheme: String,
    pub workload: String,
    pub requests: u64,
    pub duration_s: f64,
    pub mib_per_s: f64,
    pub iops: f64,
    pub mean_ms: f64,
    pub read_mean_ms: f64,
    pub write_mean_ms: f64,
    pub device_reads: u64,
    pub device_writes: u64,
    /// Bytes written to each member (all-ssd/all-hdd: to each drive).
    pub member_write_bytes: Vec<u64>,
    pub wrapped: u64,
    pub policy: Vec<(String, f64)>,
}

impl RunRow {
    fn of(scheme: &Scheme, workload: &str, r: &SimReport) -> RunRow {
        let n = (r.read_latency.count + r.write_latency.count).max(1) as f64;
        let mean = (r.read_latency.mean_us * r.read_latency.count as f64 + r.write_latency.mean_us * r.write_latency.count as f64) / n / 1e3;
        RunRow {
            scheme: scheme.name(),
            workload: workload.to_string(),
            requests: r.requests,
            duration_s: r.duration_s,
            mib_per_s: r.mib_per_s,
            iops: r.iops,
            mean_ms: mean,
            read_mean_ms: r.read_latency.mean_us / 1e3,
            write_mean_ms: r.write_latency.mean_us / 1e3,
            device_reads: r.devices.iter().map(|d| d.reads).sum(),
            device_writes: r.devices.iter().map(|d| d.writes).sum(),
            member_write_bytes: r.devices.iter().map(|d| d.write_bytes).collect(),
            wrapped: r.wrapped,
            policy: r.policy.clone(),
        }
    }
}

fn drives(spec: &str, n: usize, cap: Option<u64>) -> Result<Vec<Box<dyn DriveModel>>, TierEvalError> {
    let cfg = preset(spec).map_err(|e| TierEvalError::Other(format!("drive preset {spec}: {e}")))?;
    Ok((0..n).map(|_| cfg.build(cap)).collect())
}

fn layout(level: Level, members: usize, unit: u64, block: u64, member_bytes: u64) -> Result<FixedLayout, TierEvalError> {
    Ok(FixedLayout::new(Geometry::new(level, members, unit, block, member_bytes)?)?)
}

impl Rig {
    /// The fast inner array's layout (raid1 over 2 SSDs of `fast_cap`).
    pub fn fast_layout(&self, cap: u64) -> Result<FixedLayout, TierEvalError> {
        layout(Level::Raid1, 2, self.chunk, 512, cap)
    }

    /// The slow inner array's layout (raid6 over the HDDs).
    pub fn slow_layout(&self) -> Result<FixedLayout, TierEvalError> {
        layout(Level::Raid6, self.hdds, self.chunk, 512, self.slow_cap)
    }

    /// FAST and SLOW as two drive models, for the cache and the tier.
    pub fn members(&self) -> Result<Vec<Box<dyn DriveModel>>, TierEvalError> {
        let fast = ArrayDrive::new(self.fast_layout(self.fast_cap)?, drives(&self.ssd, 2, Some(self.fast_cap))?).map_err(TierEvalError::Other)?;
        let slow = ArrayDrive::new(self.slow_layout()?, drives(&self.hdd, self.hdds, Some(self.slow_cap))?).map_err(TierEvalError::Other)?;
        Ok(vec![Box::new(fast), Box::new(slow)])
    }

    /// Usable bytes of FAST and SLOW, and SLOW's full-stripe data bytes.
    pub fn member_bytes(&self) -> Result<(u64, u64, u64), TierEvalError> {
        let s = self.slow_layout()?;
        Ok((self.fast_layout(self.fast_cap)?.capacity(), s.capacity(), s.geometry().stripe_data_bytes()))
    }

    /// The LRU cache with as many blocks as FAST holds.
    pub fn lru(&self) -> Result<LruCache, TierEvalError> {
        let (fast, slow, _) = self.member_bytes()?;
        Ok(LruCache::new(self.block, fast / self.block, slow)?)
    }

    /// Replay `reqs` on `scheme`.
    pub fn run(&self, scheme: &Scheme, workload: &str, reqs: &[Request], mode: Mode) -> Result<RunRow, TierEvalError> {
        Ok(self.run_report(scheme, workload, reqs, mode, false)?.0)
    }

    /// Replay `reqs` on `scheme`; the row and the simulator's report
    /// (with per-request latencies when `keep_latencies`).
    pub fn run_report(&self, scheme: &Scheme, workload: &str, reqs: &[Request], mode: Mode, keep_latencies: bool) -> Result<(RunRow, SimReport), TierEvalError> {
        let cfg = SimConfig { mode, failed: vec![], keep_latencies };
        let ctx = |e: mosaic_sim::SimError| TierEvalError::Other(format!("{} on {workload}: {e}", scheme.name()));
        let rep = match scheme {
            Scheme::AllSsd => {
                let inner = self.fast_layout(drives(&self.ssd, 1, None)?[0].capacity())?;
                self.run_single(ArrayDrive::new(inner, drives(&self.ssd, 2, None)?).map_err(TierEvalError::Other)?, cfg, reqs).map_err(ctx)?
            }
            Scheme::AllHdd => {
                let inner = self.slow_layout()?;
                self.run_single(ArrayDrive::new(inner, drives(&self.hdd, self.hdds, Some(self.slow_cap))?).map_err(TierEvalError::Other)?, cfg, reqs).map_err(ctx)?
            }
            Scheme::Lru => self.run_frontend(Box::new(self.lru()?), cfg, reqs).map_err(ctx)?,
            Scheme::Tier { extent, v } => {
                let fe = super::tierfe::frontend(self, *extent, *v)?;
                self.run_frontend(fe, cfg, reqs).map_err(ctx)?
            }
        };
        Ok((RunRow::of(scheme, workload, &rep), rep))
    }

    /// Replay on one inner array alone: a one-member pass-through layout.
    fn run_single(&self, a: ArrayDrive, cfg: SimConfig, reqs: &[Request]) -> Result<SimReport, mosaic_sim::SimError> {
        // The workload's block, as the cache and the tier use: requests
        // are widened to it alike.
        let outer = layout(Level::Raid0, 1, self.chunk, self.block, a.capacity()).map_err(|e| mosaic_sim::SimError::Config(e.to_string()))?;
        let sim = Simulator::new(&outer, vec![Box::new(a)], cfg)?;
        sim.run(reqs.iter().map(|r| Ok::<_, std::convert::Infallible>(*r)))
    }

    /// Replay through a two-member front end on FAST and SLOW.
    pub fn run_frontend(&self, fe: Box<dyn Frontend>, cfg: SimConfig, reqs: &[Request]) -> Result<SimReport, mosaic_sim::SimError> {
        let members = self.members().map_err(|e| mosaic_sim::SimError::Config(e.to_string()))?;
        Simulator::with_frontend(fe, members, cfg)?.run(reqs.iter().map(|r| Ok::<_, std::convert::Infallible>(*r)))
    }
}
