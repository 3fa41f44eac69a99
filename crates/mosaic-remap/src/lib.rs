//! mosaic-remap: the remapped array policy of the adaptive data layout,
//! sans-I/O (the paper: `shared/papers/adaptive-parallel-storage-layout.txt`).
//!
//! The adaptive layout re-places logical units on drives so that units
//! a workload reads together sit on different drives and are served in
//! parallel.  This crate is the array that carries such a plan out: a
//! map from logical units to the data units of an inner fixed array
//! (raid0 as in the paper; raid4/5/6 and rs beyond it), where units
//! start at the inner array's own striping and move, in the idle time,
//! to the drive (column) a target names.  The analysis that picks the
//! target is `mosaic-adapt`.
//!
//! ```text
//!   the executor's one member = the inner array's logical space (it keeps
//!   its own parity, journal, degraded reads, rebuild and scrub):
//!   [ map region | home units (the inner striping) | spare units ]
//!
//!   client request ──> submit ──> one program: each unit where it is now (in place)
//!   set_target ──> queue ──> idle ──> one move program per call:
//!        Read [old] -> Write [new] -> Flush -> map delta -> Flush
//! ```
//!
//! See `layout.rs` for the geometry.  The real volume runs the programs
//! on the inner `Array` (shifted past its label space); the simulator
//! runs them on a `mosaic_sim::nested::ArrayDrive` of the same layout.
//!
//! **Plan-time state.**  As the tier policy, this one applies its state
//! changes when it plans a program (the simulator needs that).  The
//! caller runs each program to completion before planning the next (the
//! real volume serialises), so no program is planned against data not
//! yet written: a slot a move frees is reused only by a later program.
//! If a real program fails, the caller drops the policy and recovers it
//! from the map region.
//!
//! Health: requests fail only when the inner array is offline; movement
//! pauses while it is degraded (the caller says so, [`RemapPolicy::set_degraded`]).

#![warn(missing_docs)]

mod config;
mod io;
pub mod layout;
mod mapstore;
mod migrate;
mod places;
mod recover;

use std::collections::{BTreeMap, VecDeque};

use mosaic_core::{Buf, DevOp, Frontend, Health, Io, Method, Phase, PlanError, Program, Ref, Role, Staged};
use mosaic_map::blocklog::{pad, BlockLedger};

pub use config::{RemapConfig, RemapGeometry, MAX_MEMBERS, MAX_STAGING};
pub use layout::RemapLayout;
pub use migrate::MAP_MEMBER;

use mosaic_map::moves::Budget;
use places::Places;

/// What is wrong with a configuration, a geometry, a target or the map.
#[derive(Debug, thiserror::Error)]
pub enum RemapError {
    /// The configuration is invalid.
    #[error("bad remap config: {0}")]
    Config(String),
    /// The geometry cannot hold a remapped array with this configuration.
    #[error("bad remap geometry: {0}")]
    Geometry(String),
    /// The map region is not a valid remap map.
    #[error("corrupt remap map: {0}")]
    Corrupt(String),
    /// A target names a unit or member that does not exist, or a unit twice.
    #[error("bad remap target: {0}")]
    Target(String),
    /// The map does not fit its region.
    #[error("remap map: {0}")]
    Map(String),
}

/// Counters and placement figures.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct RemapStats {
    /// Logical units of the array.
    pub units: u64,
    /// Units with a map record (moved at least once).
    pub moved_units: u64,
    /// Free slots over all columns.
    pub free_slots: u64,
    /// Moves queued by the last target and not yet planned.
    pub pending_moves: u64,
    /// Queued moves whose target member had no free slot at the last scan.
    pub moves_blocked: u64,
    /// Times a queued move was passed over for want of a free slot.
    pub blocked_skips: u64,
    /// Moves planned.
    pub moves: u64,
    /// Move programs planned.
    pub move_programs: u64,
    /// Bytes of unit data moved.
    pub bytes_moved: u64,
    /// Bytes of map deltas and checkpoints written (format included).
    pub map_bytes_written: u64,
    /// Map checkpoints written (format included).
    pub map_checkpoints: u64,
    /// Idle calls that found movement paused (a member not Active).
    pub paused: u64,
}

impl RemapStats {
    /// Every counter as (name, value), for reports.
    pub fn pairs(&self) -> Vec<(String, f64)> {
        let Ok(serde_json::Value::Object(m)) = serde_json::to_value(self) else { return vec![] };
        m.into_iter().filter_map(|(k, v)| v.as_f64().map(|x| (k, x))).collect()
    }
}

/// The remapped raid0 array's policy: placements, queue, movement.
pub struct RemapPolicy {
    cfg: RemapConfig,
    geo: RemapGeometry,
    lay: RemapLayout,
    places: Places,
    log: BlockLedger,
    queue: VecDeque<(u64, usize)>,
    bucket: Budget,
    st: RemapStats,
    degraded: bool,
}

impl RemapPolicy {
    /// A fresh array (every unit at home) and the program that writes
    /// its empty map region: the log and checkpoint slot 1's first
    /// block zeroed (no frame of an earlier array on the member can be
    /// replayed), then the label and checkpoint 1.
    pub fn format(cfg: RemapConfig, geo: RemapGeometry) -> Result<(RemapPolicy, Program), RemapError> {
        let lay = RemapLayout::new(&cfg, &geo)?;
        let log = BlockLedger::fresh(lay.ledger(), lay.block);
        let places = Places::fresh(&lay);
        let mut pol = RemapPolicy::assemble(cfg, geo, lay, places, log);
        let p = pol.format_program()?;
        Ok((pol, p))
    }

    /// The format program (see [`RemapPolicy::format`]).
    fn format_program(&mut self) -> Result<Program, RemapError> {
        let (l, block) = (self.lay.ledger(), self.lay.block);
        let mut p = Program { methods: vec![Method::Direct], ..Program::default() };
        let zeros = p.buf(Buf::Scratch((l.log_end - l.log_start).max(block) as usize));
        let op = |offset: u64, len: u64| DevOp { member: MAP_MEMBER, offset, len, role: Role::Meta, col: 0 };
        let z = |offset: u64, len: u64| Io::new(op(offset, len), Ref::new(zeros, 0));
        p.phases.push(Phase::write(vec![z(l.slots[1], block), z(l.log_start, l.log_end - l.log_start)]));
        let label = p.buf(Buf::Bytes(pad(mapstore::LABEL.encode(&mapstore::label_fields(&self.lay, &self.geo)), block).into()));
        p.phases.push(Phase::write(vec![Io::new(op(0, block), Ref::new(label, 0))]));
        let ck = self.log.checkpoint(&[]).map_err(RemapError::Map)?;
        mosaic_map::moves::push_map(&mut p, MAP_MEMBER, ck);
        Ok(p)
    }

    /// Rebuild from the map region: `region` = its bytes
    /// `[0, map_bytes)` (more is fine).  The queue starts empty.
    pub fn recover(cfg: RemapConfig, geo: RemapGeometry, region: &[u8]) -> Result<RemapPolicy, RemapError> {
        let (lay, places, log) = recover::recover(&cfg, &geo, region)?;
        Ok(RemapPolicy::assemble(cfg, geo, lay, places, log))
    }

    fn assemble(cfg: RemapConfig, geo: RemapGeometry, lay: RemapLayout, places: Places, log: BlockLedger) -> RemapPolicy {
        RemapPolicy { cfg, geo, lay, places, log, queue: VecDeque::new(), bucket: Budget::default(), st: RemapStats::default(), degraded: false }
    }

    /// Whether the inner array is degraded: movement pauses while it is.
    pub fn set_degraded(&mut self, degraded: bool) {
        self.degraded = degraded;
    }

    /// Set the migration budget in bytes per second (0: unlimited),
    /// replacing the configured one.
    pub fn set_budget(&mut self, bytes_per_s: u64) {
        self.cfg.budget_bytes_per_s = bytes_per_s;
    }

    /// Bytes of the map region (what `recover` needs); 0 when the
    /// configuration or geometry is invalid.
    pub fn map_bytes(cfg: &RemapConfig, geo: &RemapGeometry) -> u64 {
        RemapLayout::new(cfg, geo).map(|l| l.map_bytes).unwrap_or(0)
    }

    /// The derived layout.
    pub fn layout(&self) -> &RemapLayout {
        &self.lay
    }

    /// The configuration.
    pub fn config(&self) -> &RemapConfig {
        &self.cfg
    }

    /// The geometry.
    pub fn geometry(&self) -> &RemapGeometry {
        &self.geo
    }

    /// Where unit `l` lives now: (column, inner byte offset); `None`
    /// beyond the capacity.  `layout().columns[column]` is its drive.
    pub fn placement(&self, l: u64) -> Option<(usize, u64)> {
        (l < self.lay.capacity_units).then(|| {
            let (c, s) = self.places.of(&self.lay, l);
            (c, self.lay.slot_offset(c, s))
        })
    }

    /// Every moved unit's place: unit -> (column, slot).
    pub fn moved(&self) -> &BTreeMap<u64, (usize, u64)> {
        &self.places.moved
    }

    /// Queue the moves of a target layout, (unit, column) in the given
    /// order (the caller orders them by benefit over cost).  Replaces any
    /// earlier queue; units already on their target column are left out.  The number of
    /// moves queued.
    pub fn set_target(&mut self, target: Vec<(u64, usize)>) -> Result<usize, RemapError> {
        self.queue = migrate::queue(&self.lay, &self.places, target)?;
        self.st.moves_blocked = 0;
        Ok(self.queue.len())
    }

    /// Units each column holds now (home units not moved away, plus
    /// units moved in).
    pub fn column_fill(&self) -> Vec<u64> {
        (0..self.lay.ncols()).map(|c| self.lay.slots - self.places.free_in(c)).collect()
    }

    /// Moves queued and not yet planned.
    pub fn pending_moves(&self) -> usize {
        self.queue.len()
    }

    /// Counters and placement figures.
    pub fn stats(&self) -> RemapStats {
        RemapStats {
            units: self.lay.capacity_units,
            moved_units: self.places.moved.len() as u64,
            free_slots: self.places.free_count(),
            pending_moves: self.queue.len() as u64,
            map_bytes_written: self.log.bytes_written,
            map_checkpoints: self.log.checkpoints,
            ..self.st.clone()
        }
    }
}

impl Frontend for RemapPolicy {
    fn describe(&self) -> String {
        let l = &self.lay;
        format!(
            "remap over {}: {} columns x {} slots of {} KiB ({} data, {} spare each), map {} KiB, {} MiB logical, {} units moved",
            self.geo.inner.level,
            l.ncols(),
            l.slots,
            l.unit >> 10,
            l.data_slots,
            l.spare,
            l.map_bytes >> 10,
            l.capacity_bytes() >> 20,
            self.places.moved.len()
        )
    }
    fn capacity(&self) -> u64 {
        self.lay.capacity_bytes()
    }
    fn block_size(&self) -> u64 {
        self.lay.block
    }
    fn members(&self) -> usize {
        1
    }
    fn submit(&mut self, write: bool, offset: u64, len: u64, _now_ns: u64, h: &Health) -> Result<Staged, PlanError> {
        io::plan(&self.lay, &self.places, write, offset, len, h).map(Staged::foreground)
    }
    fn idle_after_ns(&self) -> Option<u64> {
        Some(self.cfg.idle_after_ns)
    }
    fn idle(&mut self, now_ns: u64, h: &Health) -> Result<Vec<Program>, PlanError> {
        Ok(migrate::step(self, now_ns, h)?.into_iter().collect())
    }
    fn stats(&self) -> Vec<(String, f64)> {
        RemapPolicy::stats(self).pairs()
    }
}
