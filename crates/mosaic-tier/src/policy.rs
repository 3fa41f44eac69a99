//! The hybrid tier's placement policy, sans-I/O: client requests, idle
//! time and movement between the tiers become [`mosaic_core::Program`]s.
//!
//! A tier array has two members, each an inner mosaic array seen as one
//! device.  Offsets in programs are byte offsets into those arrays'
//! usable space (the caller adds a base):
//!
//! ```text
//!   FAST (member 0): [ label | ckpt slot 0 | ckpt slot 1 | delta log ][ fast data: extents ]
//!                    0                                       map_bytes   block b at map_bytes + b*block
//!   SLOW (member 1): [ segment 0 | segment 1 | ... ]   segment = one full slow stripe
//! ```
//!
//! **Tier, not cache.**  Every logical block lives in exactly one place:
//! on FAST, on SLOW, or nowhere (reads give zeros).  Writes land on FAST
//! (in place when the block is there already); demotion moves the coldest
//! blocks to SLOW in whole segments, so the slow array only ever does
//! full-stripe writes; promotion moves blocks read often back.
//!
//! **Phase order of every program that moves data:**
//!
//! ```text
//!   data reads -> data writes -> Flush (data members) -> map write on FAST -> Flush FAST
//! ```
//!
//! The map write is a delta frame of the ledger in FAST's map region (or
//! a checkpoint when the log is full).  The map names a new place only
//! after the data there is durable, and a place is freed (reusable) only
//! after the map stopped naming it, so a crash anywhere leaves the map
//! pointing at good data: [`TierPolicy::recover`] is always right.
//!
//! **Plan-time state.**  The policy applies its state changes when it
//! plans a program (as the simulator needs).  The caller runs each
//! program to completion before planning the next (the real volume
//! serialises), so no program is planned against data not yet written.
//! If a real program fails, the caller drops the policy and recovers from
//! the map.

mod commit;
mod config;
mod demote;
mod discard;
mod layout;
mod mapstore;
mod program;
mod promote;
mod read;
mod recover;
mod segments;
mod state;
mod write;

use std::collections::VecDeque;

use mosaic_core::{Frontend, Health, PlanError, Program, Staged};

pub use config::{PolicyConfig, TierGeometry};
pub use layout::TierLayout;

use state::Core;

/// Member index of the fast tier (an inner array, e.g. raid1 over SSDs).
pub const FAST: usize = 0;
/// Member index of the slow tier (an inner array, e.g. raid6 over HDDs).
pub const SLOW: usize = 1;

/// The tier's state, for `info` and for callers deciding what to do.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub enum TierState {
    /// Both tiers healthy, room on FAST.
    Normal,
    /// A write needed new fast space and demotion could not make any
    /// (slow tier offline or paused, nothing demotable): such writes
    /// fail until something changes.
    FastFull,
    /// The slow tier is offline: reads of slow blocks fail, no movement.
    SlowOffline,
    /// A tier is degraded: movement is paused.
    Paused,
}

/// Health of one tier as the policy sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TierHealth {
    /// In service, full redundancy.
    Ok,
    /// In service with reduced redundancy (a member failed or rebuilding).
    Degraded,
    /// Not in service.
    Offline,
}

/// Counters and space figures of the tier.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct TierStats {
    /// Fast data blocks in total.
    pub fast_blocks: u64,
    /// Fast blocks holding live data.
    pub fast_live: u64,
    /// Fast blocks in extents in use (live + dead + skipped + open tails).
    pub fast_allocated: u64,
    /// The fragmentation metric: live / allocated on FAST (1.0 when empty).
    pub fast_live_fraction: f64,
    /// Logical blocks mapped to FAST.
    pub blocks_fast: u64,
    /// Logical blocks mapped to SLOW.
    pub blocks_slow: u64,
    /// Live blocks counted by the segment table.
    pub slow_live: u64,
    /// Segments with no live block.
    pub segments_free: u64,
    /// Segments holding live blocks.
    pub segments_used: u64,
    /// Segments kept free for compaction.
    pub segments_reserve: u64,
    /// Bytes moved FAST -> SLOW.
    pub demoted_bytes: u64,
    /// Demotion programs.
    pub demote_batches: u64,
    /// Bytes moved SLOW -> FAST.
    pub promoted_bytes: u64,
    /// Promotion programs.
    pub promote_batches: u64,
    /// Segments emptied by compaction.
    pub compactions: u64,
    /// Bytes rewritten inside SLOW by compaction.
    pub compacted_bytes: u64,
    /// Logical blocks discarded by clients (their places freed).
    pub discarded_blocks: u64,
    /// Partial-stripe writes the slow array would have done for the
    /// absorbed client writes.
    pub slow_rmw_avoided: u64,
    /// Client write requests absorbed by FAST.
    pub absorbed_writes: u64,
    /// Client writes placed in place (block already on FAST).
    pub inplace_blocks: u64,
    /// Bytes of map deltas and checkpoints written.
    pub map_bytes_written: u64,
    /// Map checkpoints written (log full or a delta too large).
    pub map_checkpoints: u64,
    /// Commits of client placements (flush, idle, a full batch, before a move).
    pub map_commits: u64,
    /// Logical blocks placed in memory, not yet in a durable map frame.
    pub map_dirty: u64,
    /// Demotions planned inside a client write (fast tier full).
    pub foreground_demotions: u64,
    /// The current state.
    pub state: Option<TierState>,
}

/// What is wrong with a configuration, a geometry or the map on FAST.
#[derive(Debug, thiserror::Error)]
pub enum PolicyError {
    /// The configuration is invalid.
    #[error("bad tier policy config: {0}")]
    Config(String),
    /// The geometry cannot hold a tier with this configuration.
    #[error("bad tier geometry: {0}")]
    Geometry(String),
    /// The fast-tier allocator refused its configuration.
    #[error("fast-tier allocator: {0}")]
    Alloc(#[from] crate::rehypar::TierError),
    /// The map region on FAST is not a valid tier map.
    #[error("corrupt tier map: {0}")]
    Corrupt(String),
    /// The map does not fit its region.
    #[error("tier map: {0}")]
    Map(String),
}

/// The tier policy: map, fast allocator, segment table, movement.
pub struct TierPolicy {
    core: Core,
    /// Programs planned (their state applied) but not yet handed out:
    /// they go first, before anything planned later.
    pending: VecDeque<Program>,
    /// Client requests seen (the request clock).
    ticks: u64,
}

impl TierPolicy {
    /// A fresh tier and the program that writes its empty map on FAST.
    pub fn format(cfg: PolicyConfig, geo: TierGeometry) -> Result<(TierPolicy, Program), PolicyError> {
        let (core, p) = Core::format(cfg, geo)?;
        Ok((TierPolicy { core, pending: VecDeque::new(), ticks: 0 }, p))
    }

    /// Rebuild from FAST's map region: `meta` = bytes `[0, map_bytes)` of FAST.
    pub fn recover(cfg: PolicyConfig, geo: TierGeometry, meta: &[u8]) -> Result<TierPolicy, PolicyError> {
        let core = recover::recover(cfg, geo, meta)?;
        Ok(TierPolicy { core, pending: VecDeque::new(), ticks: 0 })
    }

    /// Bytes of FAST's map region (what `recover` needs to be given); 0
    /// when the configuration or geometry is invalid.
    pub fn map_bytes(cfg: &PolicyConfig, geo: &TierGeometry) -> u64 {
        TierLayout::new(cfg, geo).map(|l| l.map_bytes).unwrap_or(0)
    }

    /// The derived layout (map region, sections, segments, capacity).
    pub fn layout(&self) -> &TierLayout {
        &self.core.lay
    }

    /// Set each tier's health: movement pauses while either is not Ok;
    /// SLOW offline fails reads of slow blocks.
    pub fn set_health(&mut self, fast: TierHealth, slow: TierHealth) {
        self.core.health = (fast, slow);
    }

    /// Blocks placed in memory whose places no durable map frame names
    /// yet (written since the last commit).
    pub fn dirty_placements(&self) -> u64 {
        self.core.map.dirty.len() as u64
    }

    /// The tier's state.
    pub fn state(&self) -> TierState {
        self.core.state()
    }

    /// Counters and space figures.
    pub fn stats(&self) -> TierStats {
        self.core.stats()
    }

    /// The geometry given at format/recover.
    pub fn geometry(&self) -> TierGeometry {
        self.core.geo
    }

    /// The configuration.
    pub fn config(&self) -> &PolicyConfig {
        &self.core.cfg
    }

    /// Where logical block `lb` lives: `(FAST or SLOW, byte offset on
    /// that member)`, `None` when unmapped.
    pub fn placement(&self, lb: u64) -> Option<(usize, u64)> {
        self.core.placement(lb)
    }

    /// A client's discard of `[offset, offset + len)` (whole blocks):
    /// the program that drops its mapped blocks from the map, freeing
    /// their places (see `discard.rs`), behind any program planned
    /// earlier; `None` when nothing is to be done.
    pub fn discard(&mut self, offset: u64, len: u64, h: &Health) -> Result<Option<Program>, PlanError> {
        self.core.observe(h);
        Ok(discard::plan(&mut self.core, offset, len)?.map(|p| self.with_pending(p)))
    }

    /// Bytes left in the map's delta log: a map change whose delta frame
    /// is larger goes out as a checkpoint of the whole map instead.
    pub fn log_room(&self) -> u64 {
        self.core.map.log.log_room()
    }

    /// The policy's time: the caller's clock, or with
    /// [`PolicyConfig::request_clock_ns`] a clock that advances by that
    /// step per client request, so a replay decides the same on drive
    /// models and on real members, whatever either's speed.
    fn clock(&mut self, now_ns: u64, request: bool) -> u64 {
        match self.core.cfg.request_clock_ns {
            0 => now_ns,
            step => {
                self.ticks += request as u64;
                self.ticks * step
            }
        }
    }

    /// Put programs planned earlier in front of `p` (one program, run in
    /// order), or hand `p` out alone.
    fn with_pending(&mut self, p: Program) -> Program {
        let mut all = std::mem::take(&mut self.pending);
        all.push_back(p);
        program::chain_all(all.into_iter().collect())
    }
}

impl Frontend for TierPolicy {
    fn describe(&self) -> String {
        self.core.describe()
    }
    fn capacity(&self) -> u64 {
        self.core.lay.capacity_bytes()
    }
    fn block_size(&self) -> u64 {
        self.core.cfg.block
    }
    fn members(&self) -> usize {
        2
    }
    fn submit(&mut self, write: bool, offset: u64, len: u64, now_ns: u64, h: &Health) -> Result<Staged, PlanError> {
        let now_ns = self.clock(now_ns, true);
        self.core.observe(h);
        self.core.round_reset();
        let p = if write {
            let (p, demotions) = write::plan(&mut self.core, offset, len, now_ns);
            self.pending.extend(demotions);
            p?
        } else {
            read::plan(&mut self.core, offset, len, now_ns)?
        };
        Ok(Staged::foreground(self.with_pending(p)))
    }
    fn idle_after_ns(&self) -> Option<u64> {
        Some(self.core.cfg.idle_after_ns)
    }
    fn idle(&mut self, now_ns: u64, h: &Health) -> Result<Vec<Program>, PlanError> {
        let now_ns = self.clock(now_ns, false);
        self.core.observe(h);
        if let Some(p) = self.pending.pop_front() {
            return Ok(vec![p]);
        }
        Ok(state::idle_step(&mut self.core, now_ns)?.into_iter().collect())
    }
    fn flush(&mut self, _now_ns: u64, h: &Health) -> Result<Vec<Program>, PlanError> {
        self.core.observe(h);
        let p = commit::flush(&mut self.core)?;
        Ok(vec![self.with_pending(p)])
    }
    fn stats(&self) -> Vec<(String, f64)> {
        self.core.stats().pairs()
    }
}
