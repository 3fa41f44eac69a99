//! The layout interface.
//!
//! One trait for both kinds of layout:
//!
//! * **fixed geometry** (RAID-0/1/4/5/6, `rs:K+M`, later CBRO): a logical
//!   address maps to members by arithmetic alone;
//! * **mapped geometry** (DVS, and later tiering and remapping) does not
//!   implement this trait: it keeps its tables (on the `mosaic-map` kit),
//!   plans programs as a `mosaic_exec::Planner`, and commits or aborts what
//!   it reserved when the executor reports the program's fate.
//!
//! Planning maps a request onto stripes ([`Plan`]); lowering turns that
//! into a [`Program`] whose computation is data, which the one executor
//! runs and the simulator times.  Maintenance work
//! (rebuild, scrub) walks *regions*: stripes for fixed geometries, stripe
//! groups for mapped ones.

use crate::compute::{ScrubOutcome, StripeMath};
use crate::geometry::Geometry;
use crate::health::Health;
use crate::plan::{Plan, StripePlan};
use crate::program::Program;
use crate::planner::{StripePlanner, WritePolicy};
use crate::PlanError;

/// A layout: plans requests and maintenance, and does the stripe math.
pub trait Layout: Send + Sync {
    /// Human-readable description, e.g. `raid5 4+1 unit 64K`.
    fn describe(&self) -> String;
    /// Logical capacity in bytes.
    fn capacity(&self) -> u64;
    /// Logical block size in bytes; requests must be multiples of it.
    fn block_size(&self) -> u64;
    /// Member count.
    fn members(&self) -> usize;

    fn plan_read(&self, offset: u64, len: u64, h: &Health) -> Result<Plan, PlanError>;
    fn plan_write(&self, offset: u64, len: u64, h: &Health) -> Result<Plan, PlanError>;

    /// The program of a read: its output is the client's buffer.
    fn read_program(&self, offset: u64, len: u64, h: &Health) -> Result<Program, PlanError>;
    /// The program of a write: its input is the client's bytes.
    fn write_program(&self, offset: u64, len: u64, h: &Health) -> Result<Program, PlanError>;
    /// The device phases of the read or write program, without its
    /// computation (the simulator's view: computation takes no virtual
    /// time).  The same transfers, phase by phase, as the full program.
    fn io_program(&self, write: bool, offset: u64, len: u64, h: &Health) -> Result<Program, PlanError>;
    /// The program of rebuild plans (no range locks: the caller holds
    /// them; no stripe methods: maintenance is not counted as requests).
    fn rebuild_program(&self, sps: &[StripePlan]) -> Result<Program, PlanError>;
    /// The program reading what scrub verifies, kept for
    /// [`Layout::scrub_check`] (no range locks: the caller holds them).
    fn scrub_program(&self, sps: &[StripePlan]) -> Program;


    /// Number of maintenance regions.
    fn regions(&self) -> u64;
    /// Plans that rebuild `targets` (member indices) in `region`.
    fn plan_rebuild(&self, region: u64, targets: &[usize], h: &Health) -> Result<Vec<StripePlan>, PlanError>;
    /// Plans that read `region` for verification.
    fn plan_scrub(&self, region: u64, h: &Health) -> Result<Vec<StripePlan>, PlanError>;
    fn scrub_check(&self, sp: &StripePlan, reads: &[Vec<u8>]) -> Result<ScrubOutcome, PlanError>;
    /// The write op that repairs column `col` of a scrubbed stripe plan.
    fn repair_op(&self, sp: &StripePlan, col: usize) -> crate::DevOp;
}

/// Maintenance works on at most this many bytes of a unit at a time, so a
/// 64 MiB unit does not need 64 MiB buffers per column.
pub const MAINT_CHUNK: u64 = 1 << 20;

thread_local! {
    /// [`FixedLayout::io_program`]'s reused plan.
    static SCRATCH_PLAN: std::cell::RefCell<Plan> = const { std::cell::RefCell::new(Plan { stripes: Vec::new() }) };
}

/// `p` with its contiguous same-member transfers merged.
fn merged(mut p: Program) -> Program {
    crate::merge::merge_contiguous(&mut p);
    p
}

/// RAID-0/1/4/5/6 and `rs:K+M`.
#[derive(Debug)]
pub struct FixedLayout {
    pub planner: StripePlanner,
    pub math: StripeMath,
}

impl FixedLayout {
    pub fn new(geo: Geometry) -> Result<FixedLayout, PlanError> {
        Ok(FixedLayout { math: StripeMath::new(geo.clone())?, planner: StripePlanner::new(geo) })
    }

    pub fn with_policy(mut self, policy: WritePolicy) -> FixedLayout {
        self.planner.policy = policy;
        self
    }

    /// Read the mirror members `members` only when no other copy is
    /// available (md's `--write-mostly`); refused for a layout that is no
    /// mirror, or a member it does not have.
    pub fn with_write_mostly(mut self, members: &[usize]) -> Result<FixedLayout, PlanError> {
        if members.is_empty() {
            self.planner.write_mostly.clear();
            return Ok(self);
        }
        let g = &self.planner.geo;
        if !g.is_mirror() {
            return Err(PlanError::Invalid(format!("write-mostly members are for mirrors (raid1), not {}: every member of {} holds data reads need", g.level, g.level)));
        }
        if let Some(m) = members.iter().find(|&&m| m >= g.members) {
            return Err(PlanError::Invalid(format!("write-mostly member {m}: the array has members 0 to {}", g.members - 1)));
        }
        let mut w = vec![false; g.members];
        members.iter().for_each(|&m| w[m] = true);
        if w.iter().all(|&x| x) {
            return Err(PlanError::Invalid(format!("every member of the mirror would be write-mostly: at least one must take its reads (members {members:?} of {})", g.members)));
        }
        self.planner.write_mostly = w;
        Ok(self)
    }

    /// The write-mostly members, in order.
    pub fn write_mostly(&self) -> Vec<usize> {
        self.planner.write_mostly.iter().enumerate().filter(|(_, &w)| w).map(|(m, _)| m).collect()
    }

    pub fn geometry(&self) -> &Geometry {
        &self.planner.geo
    }

    fn chunks(&self) -> impl Iterator<Item = (u64, u64)> {
        let u = self.planner.geo.unit;
        (0..u.div_ceil(MAINT_CHUNK)).map(move |i| (i * MAINT_CHUNK, ((i + 1) * MAINT_CHUNK).min(u)))
    }
}

impl Layout for FixedLayout {
    fn describe(&self) -> String {
        let g = &self.planner.geo;
        let unit = if g.unit % (1 << 20) == 0 { format!("{}M", g.unit >> 20) } else if g.unit % 1024 == 0 { format!("{}K", g.unit >> 10) } else { format!("{}B", g.unit) };
        format!("{} {}+{} {unit}", g.level, g.k, g.m)
    }
    fn capacity(&self) -> u64 {
        self.planner.geo.capacity()
    }
    fn block_size(&self) -> u64 {
        self.planner.geo.block
    }
    fn members(&self) -> usize {
        self.planner.geo.members
    }
    fn plan_read(&self, offset: u64, len: u64, h: &Health) -> Result<Plan, PlanError> {
        self.planner.plan_read(offset, len, h)
    }
    fn plan_write(&self, offset: u64, len: u64, h: &Health) -> Result<Plan, PlanError> {
        self.planner.plan_write(offset, len, h)
    }
    // Requests' programs have their contiguous transfers on one member
    // merged (`merge`), here, where the real array and the simulator
    // both take them, so the two keep issuing the same operations.
    fn read_program(&self, offset: u64, len: u64, h: &Health) -> Result<Program, PlanError> {
        Ok(merged(self.math.read_program(&self.planner.plan_read(offset, len, h)?)?))
    }
    fn write_program(&self, offset: u64, len: u64, h: &Health) -> Result<Program, PlanError> {
        Ok(merged(self.math.write_program(&self.planner.plan_write(offset, len, h)?, len as usize)?))
    }
    fn io_program(&self, write: bool, offset: u64, len: u64, h: &Health) -> Result<Program, PlanError> {
        // A fixed layout's plans carry their device operations in the
        // order the lowering issues them, so the device phases come
        // straight from the plan (the lowering test holds them equal).
        // The plan is scratch, kept per thread so its vectors are reused
        // (a replay plans millions of requests).  The common small write
        // (inside one column, every member active) needs no plan at all.
        if write {
            if let Some(p) = self.planner.one_column_program(offset, len, h)? {
                return Ok(p);
            }
        }
        let run = |plan: &mut Plan| -> Result<Program, PlanError> {
            if write {
                self.planner.plan_write_into(offset, len, h, plan)?;
            } else {
                self.planner.plan_read_into(offset, len, h, plan)?;
            }
            Ok(merged(Program::io_only(plan)))
        };
        SCRATCH_PLAN.with(|cell| match cell.try_borrow_mut() {
            Ok(mut plan) => {
                let p = run(&mut plan);
                if plan.stripes.capacity() > 64 {
                    // Keep no large request's vectors.
                    *plan = Plan::default();
                }
                p
            }
            // Planned from inside a plan (not done today): a fresh one.
            Err(_) => run(&mut Plan::default()),
        })
    }
    fn rebuild_program(&self, sps: &[StripePlan]) -> Result<Program, PlanError> {
        let mut p = self.math.rebuild_program(sps)?;
        p.locks.clear();
        p.methods.clear();
        Ok(p)
    }
    fn scrub_program(&self, sps: &[StripePlan]) -> Program {
        let mut p = self.math.scrub_program(sps);
        p.locks.clear();
        p.methods.clear();
        p
    }
    fn regions(&self) -> u64 {
        self.planner.geo.stripes
    }
    fn plan_rebuild(&self, region: u64, targets: &[usize], h: &Health) -> Result<Vec<StripePlan>, PlanError> {
        self.chunks().map(|(lo, hi)| self.planner.plan_rebuild(region, lo, hi, targets, h)).collect()
    }
    fn plan_scrub(&self, region: u64, h: &Health) -> Result<Vec<StripePlan>, PlanError> {
        self.chunks().map(|(lo, hi)| self.planner.plan_scrub(region, lo, hi, h)).collect()
    }
    fn scrub_check(&self, sp: &StripePlan, reads: &[Vec<u8>]) -> Result<ScrubOutcome, PlanError> {
        self.math.scrub_check(sp, reads)
    }
    fn repair_op(&self, sp: &StripePlan, col: usize) -> crate::DevOp {
        self.planner.column_op(sp.stripe, col, sp.span.0, sp.span.1)
    }
}
