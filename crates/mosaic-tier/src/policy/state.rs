//! The policy's whole state and its bookkeeping: the map, the fast
//! allocator with per-extent recency, the segment table, health, the
//! movement controls and the counters.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use mosaic_core::{Buf, DevOp, Health, Io, MemberState, Method, Phase, Program, Ref, Role};
use mosaic_map::blocklog::BlockLedger;
use mosaic_map::moves::Budget;

use super::layout::TierLayout;
use super::mapstore::{self, Loc, MapStore};
use super::promote::Hits;
use super::segments::Segments;
use super::{commit, demote, program, promote, PolicyConfig, PolicyError, TierGeometry, TierHealth, TierState, TierStats, FAST};
use crate::rehypar::{FastTierAllocator, FixedExtent, ReHypar};
use crate::run::{Coalescer, RunConfig};

/// The fast allocator the policy holds.
pub type Alloc = Box<dyn FastTierAllocator + Send + Sync>;

/// Movement controls: the bytes/s bucket and the per-round share.
#[derive(Clone, Debug, Default)]
pub struct Movement {
    /// Demoting until fill is at or below the low watermark.
    pub demoting: bool,
    /// Bytes moved since the last client request (this idle round).
    pub round_moved: u64,
    /// The bytes/s budget (the kit's).
    pub budget: Budget,
}

/// Everything the policy knows.
pub struct Core {
    pub cfg: PolicyConfig,
    pub geo: TierGeometry,
    pub lay: TierLayout,
    pub map: MapStore,
    pub alloc: Alloc,
    pub segs: Segments,
    /// Fast block -> logical block.
    pub fast_owner: HashMap<u64, u64>,
    /// Extent (its first fast block) -> last access.
    pub ext_time: HashMap<u64, u64>,
    /// (last access, extent) in LRU order.
    pub lru: BTreeSet<(u64, u64)>,
    /// Extent -> its live fast blocks.
    pub ext_live: HashMap<u64, BTreeSet<u64>>,
    pub coalescer: Coalescer,
    pub run_open: bool,
    pub last_ns: u64,
    pub hits: Hits,
    /// Health set by the caller, and as the last `Health` said.
    pub health: (TierHealth, TierHealth),
    pub observed: (TierHealth, TierHealth),
    pub fast_full: bool,
    pub mv: Movement,
    pub st: TierStats,
}

impl Core {
    /// An empty tier over `lay`, with `ledger` positioned.
    pub fn empty(cfg: PolicyConfig, geo: TierGeometry, lay: TierLayout, log: BlockLedger) -> Result<Core, PolicyError> {
        let tc = lay.tier_config(&cfg);
        let alloc: Alloc = if cfg.fixed_extents { Box::new(FixedExtent::new(&tc)?) } else { Box::new(ReHypar::new(&tc)?) };
        let coalescer = Coalescer::new(RunConfig { window_ns: cfg.window_ns, max_run_blocks: None }).map_err(|e| PolicyError::Config(e.to_string()))?;
        let segs = Segments::new(lay.segments, lay.seg_blocks);
        let map = MapStore { locs: BTreeMap::new(), dirty: BTreeSet::new(), log };
        let hits = Hits::new(&cfg, &lay);
        Ok(Core {
            cfg,
            geo,
            lay,
            map,
            alloc,
            segs,
            fast_owner: HashMap::new(),
            ext_time: HashMap::new(),
            lru: BTreeSet::new(),
            ext_live: HashMap::new(),
            coalescer,
            run_open: false,
            last_ns: 0,
            hits,
            health: (TierHealth::Ok, TierHealth::Ok),
            observed: (TierHealth::Ok, TierHealth::Ok),
            fast_full: false,
            mv: Movement::default(),
            st: TierStats::default(),
        })
    }

    /// A fresh tier and the program writing its empty map: the log and
    /// the second slot zeroed (no frame of an earlier tier on this
    /// device can be replayed), then the label and checkpoint 1.
    pub fn format(cfg: PolicyConfig, geo: TierGeometry) -> Result<(Core, Program), PolicyError> {
        let lay = TierLayout::new(&cfg, &geo)?;
        let log = BlockLedger::fresh(lay.ledger(), lay.block);
        let mut core = Core::empty(cfg, geo, lay, log)?;
        let l = core.lay.ledger();
        let mut p = program::new(Method::Direct);
        let zeros = p.buf(Buf::Scratch((l.log_end - l.log_start).max(l.slot_bytes) as usize));
        let z = |offset: u64, len: u64| Io::new(DevOp { member: FAST, offset, len, role: Role::Meta, col: 0 }, Ref::new(zeros, 0));
        let block = core.lay.block;
        p.phases.push(Phase::write(vec![z(l.slots[1], block), z(l.log_start, l.log_end - l.log_start)]));
        let label = p.buf(Buf::Bytes(mosaic_map::blocklog::pad(mapstore::LABEL.encode(&mapstore::label_fields(&core.lay, &geo)), block).into()));
        let ck = core.map.checkpoint(&core.lay).map_err(PolicyError::Map)?;
        let label_op = DevOp { member: FAST, offset: 0, len: block, role: Role::Meta, col: 0 };
        p.phases.push(Phase::write(vec![Io::new(label_op, Ref::new(label, 0))]));
        mosaic_map::moves::push_map(&mut p, FAST, ck);
        Ok((core, p))
    }

    pub fn describe(&self) -> String {
        let l = &self.lay;
        let alloc = if self.cfg.fixed_extents { "fixed extents" } else { "ReHypar" };
        format!(
            "tier: fast {} MiB data ({alloc}, {} sections, map {} KiB), slow {} segments of {} KiB ({} reserved), {} MiB logical",
            l.fast_data_bytes() >> 20,
            l.sections.len(),
            l.map_bytes >> 10,
            l.segments,
            (l.seg_blocks * l.block) >> 10,
            l.reserve,
            l.capacity_bytes() >> 20
        )
    }

    /// Take the member states of `h` into account (failed = offline,
    /// rebuilding = degraded).
    pub fn observe(&mut self, h: &Health) {
        let of = |i: usize| match h.states.get(i) {
            Some(MemberState::Failed) => TierHealth::Offline,
            Some(MemberState::Rebuilding { .. }) => TierHealth::Degraded,
            _ => TierHealth::Ok,
        };
        self.observed = (of(FAST), of(super::SLOW));
    }

    /// The worse of the set and the observed health of each tier.
    pub fn effective(&self) -> (TierHealth, TierHealth) {
        let worse = |a: TierHealth, b: TierHealth| if rank(a) >= rank(b) { a } else { b };
        (worse(self.health.0, self.observed.0), worse(self.health.1, self.observed.1))
    }

    /// Whether blocks may move between the tiers now.
    pub fn can_move(&self) -> bool {
        self.effective() == (TierHealth::Ok, TierHealth::Ok)
    }

    /// The state (see [`TierState`]; offline first, then full, then paused).
    pub fn state(&self) -> TierState {
        let (f, s) = self.effective();
        if s == TierHealth::Offline {
            TierState::SlowOffline
        } else if self.fast_full {
            TierState::FastFull
        } else if f != TierHealth::Ok || s != TierHealth::Ok {
            TierState::Paused
        } else {
            TierState::Normal
        }
    }

    /// A new idle round starts with each client request.
    pub fn round_reset(&mut self) {
        self.mv.round_moved = 0;
    }

    /// Where `lb` lives as (member, byte offset).
    pub fn placement(&self, lb: u64) -> Option<(usize, u64)> {
        match self.map.locs.get(&lb)? {
            Loc::Fast(fb) => Some((FAST, self.lay.fast_offset(*fb))),
            Loc::Slow(sb) => Some((super::SLOW, self.lay.slow_offset(*sb))),
        }
    }

    /// The first fast block of the extent holding `fb`.
    pub fn extent_of(&self, fb: u64) -> u64 {
        let mut base = 0;
        for s in &self.lay.sections {
            let blocks = s.capacity_bytes / self.lay.block;
            let eb = s.extent_bytes / self.lay.block;
            if fb < base + blocks {
                return base + (fb - base) / eb * eb;
            }
            base += blocks;
        }
        fb
    }

    /// Note an access to fast block `fb` at `now`.
    pub fn touch(&mut self, fb: u64, now: u64) {
        let ext = self.extent_of(fb);
        if let Some(old) = self.ext_time.insert(ext, now) {
            self.lru.remove(&(old, ext));
        }
        self.lru.insert((now, ext));
    }

    /// Fast block `fb` now holds `lb` (allocated already).
    pub fn fast_add(&mut self, fb: u64, lb: u64, now: u64) {
        self.fast_owner.insert(fb, lb);
        let ext = self.extent_of(fb);
        self.ext_live.entry(ext).or_default().insert(fb);
        self.touch(fb, now);
    }

    /// Fast block `fb` no longer holds live data: freed in the allocator,
    /// dropped from recency when its extent has no live block left.
    pub fn fast_remove(&mut self, fb: u64) -> Result<(), String> {
        self.fast_owner.remove(&fb);
        let ext = self.extent_of(fb);
        if let Some(set) = self.ext_live.get_mut(&ext) {
            set.remove(&fb);
            if set.is_empty() {
                self.ext_live.remove(&ext);
                if let Some(t) = self.ext_time.remove(&ext) {
                    self.lru.remove(&(t, ext));
                }
            }
        }
        self.alloc.free(fb, 1).map_err(|e| e.to_string())
    }

    /// Fast data fill: allocated / total.
    pub fn fill(&self) -> f64 {
        let s = self.alloc.stats();
        if s.total == 0 {
            return 1.0;
        }
        s.allocated as f64 / s.total as f64
    }

    /// Bytes of one segment.
    pub fn seg_bytes(&self) -> u64 {
        self.lay.seg_blocks * self.lay.block
    }

    /// Bytes idle movement may move now: the round's rest (at least one
    /// segment per round) and the bucket's credit.
    pub fn allowance(&mut self, now: u64) -> u64 {
        let round_cap = ((self.lay.fast_data_bytes() as f64 * self.cfg.round_share) as u64).max(self.seg_bytes());
        let seg = self.seg_bytes();
        round_cap.saturating_sub(self.mv.round_moved).min(self.mv.budget.allowance(now, self.cfg.budget_bytes_per_s, seg))
    }

    /// Charge `bytes` of idle movement.
    pub fn charge(&mut self, bytes: u64) {
        self.mv.round_moved += bytes;
        self.mv.budget.charge(bytes);
    }

    /// Counters and space figures.
    pub fn stats(&self) -> TierStats {
        let s = self.alloc.stats();
        let blocks_fast = self.map.locs.values().filter(|l| matches!(l, Loc::Fast(_))).count() as u64;
        TierStats {
            fast_blocks: s.total,
            fast_live: s.live,
            fast_allocated: s.allocated,
            fast_live_fraction: s.live_fraction(),
            blocks_fast,
            blocks_slow: self.map.locs.len() as u64 - blocks_fast,
            slow_live: self.segs.live_total(),
            segments_free: self.segs.free_count(),
            segments_used: self.segs.used_count(),
            segments_reserve: self.lay.reserve,
            map_bytes_written: self.map.log.bytes_written,
            map_checkpoints: self.map.log.checkpoints,
            map_dirty: self.map.dirty.len() as u64,
            state: Some(self.state()),
            ..self.st.clone()
        }
    }
}

fn rank(h: TierHealth) -> u8 {
    match h {
        TierHealth::Ok => 0,
        TierHealth::Degraded => 1,
        TierHealth::Offline => 2,
    }
}

impl TierStats {
    /// Every numeric counter as (name, value), for reports.
    pub fn pairs(&self) -> Vec<(String, f64)> {
        let Ok(serde_json::Value::Object(m)) = serde_json::to_value(self) else { return vec![] };
        m.into_iter().filter_map(|(k, v)| v.as_f64().map(|x| (k, x))).collect()
    }
}

/// One step of idle work: commit dirty placements; then demote while
/// fill is above the watermarks,
/// else promote a hot group; nothing while movement is paused, the round
/// or the budget is spent, or there is nothing to do.
pub fn idle_step(core: &mut Core, now: u64) -> Result<Option<Program>, mosaic_core::PlanError> {
    core.alloc.expire(now);
    // Idle time commits the map first (as a file system's commit
    // interval), and movement never starts with dirty placements.
    if let Some(p) = commit::commit(core)? {
        return Ok(Some(p));
    }
    if !core.can_move() {
        return Ok(None);
    }
    let fill = core.fill();
    if fill > core.cfg.high_water {
        core.mv.demoting = true;
    }
    if core.mv.demoting && fill <= core.cfg.low_water {
        core.mv.demoting = false;
    }
    let allowance = core.allowance(now);
    if core.mv.demoting {
        return demote::idle_batch(core, now, allowance);
    }
    promote::idle_promote(core, now, allowance)
}
