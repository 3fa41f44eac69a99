//! Parity planning for fixed geometries.
//!
//! For each stripe a write touches, the planner decides how to keep the code
//! columns current, choosing whichever needs the fewest device reads:
//!
//! ```text
//!   k = 4 data columns, m = 1 code column, request writes d = 1 unit (D1'):
//!
//!        D0   D1   D2   D3   P
//!   RMW       r         .    r     read old D1 and old P        (d + m reads)
//!             P' = P + c1·(D1 + D1')
//!   RCW  r         r    r         read the untouched D0 D2 D3   (k - d reads)
//!             P' = c0·D0 + c1·D1' + c2·D2 + c3·D3
//!   FSW  (every data column written whole)                     (0 reads)
//! ```
//!
//! Writes that cover only part of a unit are planned per *interval*: the
//! in-unit byte ranges between the start and end points of the touched
//! ranges.  Within one interval the set of touched columns is fixed, so RMW
//! reads old data and old code over it, and RCW reads the untouched columns
//! over it.  Adjacent intervals on one member coalesce into one operation;
//! the method with fewer operations wins (ties: fewer bytes, then RCW, as md
//! does).  A stripe with a failed data member is written degraded: all
//! surviving columns are read over the touched span, the missing ones
//! decoded, and all code re-encoded.

use crate::geometry::{ColRange, Geometry, Level};
use crate::health::Health;
use crate::plan::{DevOp, Method, Plan, Role, StripePlan};
use crate::program::Program;
use crate::PlanError;

/// Which parity method partial-stripe writes use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum WritePolicy {
    /// Fewest reads (the default).
    #[default]
    Auto,
    /// Always read-modify-write (for experiments).
    ForceRmw,
    /// Always reconstruct-write (for experiments).
    ForceRcw,
}

/// Plans requests on a fixed geometry.
#[derive(Debug, Clone)]
pub struct StripePlanner {
    pub geo: Geometry,
    pub policy: WritePolicy,
    /// Mirror members read only when no other copy is available (md's
    /// `--write-mostly`: the slow side of a mirror of mixed drives), by
    /// member index; empty: none.
    pub write_mostly: Vec<bool>,
}

impl StripePlanner {
    pub fn new(geo: Geometry) -> StripePlanner {
        StripePlanner { geo, policy: WritePolicy::Auto, write_mostly: Vec::new() }
    }

    /// Whether member `m` is read only when no other copy is available.
    fn write_mostly(&self, m: usize) -> bool {
        self.write_mostly.get(m).copied().unwrap_or(false)
    }

    /// Check a logical request against capacity and alignment.
    pub fn check(&self, offset: u64, len: u64) -> Result<(), PlanError> {
        PlanError::check_request(offset, len, self.geo.block, self.geo.capacity())
    }

    fn op(&self, stripe: u64, col: usize, start: u64, end: u64) -> DevOp {
        DevOp {
            member: self.geo.member_of(stripe, col),
            offset: self.geo.offset_of(stripe, col) + start,
            len: end - start,
            role: if col < self.geo.k { Role::Data } else { Role::Code },
            col,
        }
    }

    /// Whether every member is active, so every column is available.
    fn all_active(&self, h: &Health) -> bool {
        h.states.len() >= self.geo.members && !h.is_degraded()
    }

    fn avail(&self, h: &Health, stripe: u64, col: usize) -> bool {
        h.available(self.geo.member_of(stripe, col), stripe)
    }

    fn failed_cols(&self, h: &Health, stripe: u64) -> Result<Vec<usize>, PlanError> {
        let g = &self.geo;
        let failed: Vec<usize> = (0..g.k + g.m).filter(|&c| !self.avail(h, stripe, c)).collect();
        let tolerable = g.m;
        if failed.len() > tolerable {
            return Err(PlanError::TooManyFailures {
                stripe,
                failed: failed.iter().map(|&c| g.member_of(stripe, c)).collect(),
                tolerable,
            });
        }
        Ok(failed)
    }

    /// Plan a logical read.
    pub fn plan_read(&self, offset: u64, len: u64, h: &Health) -> Result<Plan, PlanError> {
        let mut plan = Plan::default();
        self.plan_read_into(offset, len, h, &mut plan)?;
        Ok(plan)
    }

    /// [`plan_read`](StripePlanner::plan_read) into `plan`, reusing its
    /// vectors (a replay plans millions of requests).
    pub fn plan_read_into(&self, offset: u64, len: u64, h: &Health, plan: &mut Plan) -> Result<(), PlanError> {
        self.check(offset, len)?;
        self.plan_into(offset, len, plan, Method::Read, |sp, cols| self.fill_stripe_read(cols, h, sp))
    }

    /// One stripe plan per stripe of `[offset, offset + len)` in `plan`,
    /// each reset to `method` with its touched columns, then `fill`ed.
    fn plan_into(
        &self,
        offset: u64,
        len: u64,
        plan: &mut Plan,
        method: Method,
        mut fill: impl FnMut(&mut StripePlan, &[ColRange]) -> Result<(), PlanError>,
    ) -> Result<(), PlanError> {
        let mut n = 0;
        for (stripe, lo, hi) in self.geo.stripes_of(offset, len) {
            if n == plan.stripes.len() {
                plan.stripes.push(StripePlan { stripe, method, touched: vec![], reads: vec![], writes: vec![], span: (0, 0), missing: vec![] });
            }
            let sp = &mut plan.stripes[n];
            n += 1;
            sp.stripe = stripe;
            sp.method = method;
            sp.span = (0, 0);
            sp.reads.clear();
            sp.writes.clear();
            sp.missing.clear();
            let mut cols = std::mem::take(&mut sp.touched);
            self.geo.cols_into(stripe, lo, hi, offset, &mut cols);
            let filled = fill(sp, &cols);
            sp.touched = cols;
            filled?;
        }
        plan.stripes.truncate(n);
        Ok(())
    }

    fn fill_stripe_read(&self, cols: &[ColRange], h: &Health, sp: &mut StripePlan) -> Result<(), PlanError> {
        let g = &self.geo;
        let s = sp.stripe;
        // Every member active (the common case): nothing to look up.
        let healthy = self.all_active(h);
        let avail = |c: usize| healthy || self.avail(h, s, c);
        if g.is_mirror() {
            // Spread reads over the copies; take the first available one,
            // a write-mostly one only when no other is.
            let n = g.k + g.m;
            let first = (s % n as u64) as usize;
            let order = || (0..n).map(|i| (first + i) % n).filter(|&c| avail(c));
            let col = order()
                .find(|&c| !self.write_mostly(g.member_of(s, c)))
                .or_else(|| order().next())
                .ok_or_else(|| self.failed_cols(h, s).err().unwrap_or(PlanError::Invalid("no copy".into())))?;
            for c in cols {
                let mut op = self.op(s, col, c.start, c.end);
                op.role = Role::Data;
                sp.reads.push(op);
            }
            return Ok(());
        }
        let mut missing = Vec::new();
        for c in cols {
            if avail(c.col) {
                sp.reads.push(self.op(s, c.col, c.start, c.end));
            } else {
                missing.push(*c);
            }
        }
        if missing.is_empty() {
            return Ok(());
        }
        self.failed_cols(h, s)?;
        let lo = missing.iter().map(|c| c.start).min().unwrap();
        let hi = missing.iter().map(|c| c.end).max().unwrap();
        // k survivors, data columns first.
        let survivors: Vec<usize> = (0..g.k + g.m).filter(|&c| avail(c)).take(g.k).collect();
        for &c in &survivors {
            sp.reads.push(self.op(s, c, lo, hi));
        }
        sp.method = Method::DegradedRead;
        sp.span = (lo, hi);
        sp.missing.extend(missing.iter().map(|c| c.col));
        Ok(())
    }

    /// Plan a logical write.
    pub fn plan_write(&self, offset: u64, len: u64, h: &Health) -> Result<Plan, PlanError> {
        let mut plan = Plan::default();
        self.plan_write_into(offset, len, h, &mut plan)?;
        Ok(plan)
    }

    /// [`plan_write`](StripePlanner::plan_write) into `plan`, reusing its
    /// vectors.
    pub fn plan_write_into(&self, offset: u64, len: u64, h: &Health, plan: &mut Plan) -> Result<(), PlanError> {
        self.check(offset, len)?;
        if self.one_column_write(offset, len, h, plan) {
            return Ok(());
        }
        self.plan_into(offset, len, plan, Method::Direct, |sp, cols| self.fill_stripe_write(cols, h, sp))
    }

    /// The common small write, decided in one pass: inside one column of
    /// one stripe, every member active, a parity (not mirror, not cbro)
    /// geometry.  None for any other write (the general path plans it).
    fn one_column(&self, offset: u64, len: u64, h: &Health) -> Option<OneColumn<'_>> {
        let g = &self.geo;
        if g.m == 0 || g.is_mirror() || matches!(g.level, Level::Cbro { .. }) || !self.all_active(h) {
            return None;
        }
        let sd = g.stripe_data_bytes();
        let stripe = offset / sd;
        let in_stripe = offset - stripe * sd;
        let col = (in_stripe / g.unit) as usize;
        let start = in_stripe - col as u64 * g.unit;
        let end = start + len;
        if end > g.unit {
            return None;
        }
        // RMW reads 1 + m ranges of `len` bytes, RCW k - 1: the fewer
        // operations win, and equal counts are equal bytes (a tie: RCW).
        let method = if g.k == 1 && start == 0 && end == g.unit {
            Method::Fsw
        } else if match self.policy {
            WritePolicy::ForceRmw => true,
            WritePolicy::ForceRcw => false,
            WritePolicy::Auto => 1 + g.m < g.k - 1,
        } {
            Method::Rmw
        } else {
            Method::Rcw
        };
        Some(OneColumn { place: Placer::new(g, stripe), stripe, col, start, end, method })
    }

    /// [`one_column`](Self::one_column)'s write into `plan`, as
    /// [`plan_into`](Self::plan_into) with
    /// [`fill_stripe_write`](Self::fill_stripe_write) plans it (a test
    /// holds them equal); false (and `plan` untouched) for any other write.
    fn one_column_write(&self, offset: u64, len: u64, h: &Health, plan: &mut Plan) -> bool {
        let Some(w) = self.one_column(offset, len, h) else { return false };
        if plan.stripes.is_empty() {
            plan.stripes.push(StripePlan { stripe: w.stripe, method: w.method, touched: vec![], reads: vec![], writes: vec![], span: (0, 0), missing: vec![] });
        }
        plan.stripes.truncate(1);
        let sp = &mut plan.stripes[0];
        sp.stripe = w.stripe;
        sp.method = w.method;
        sp.span = (0, 0);
        sp.missing.clear();
        sp.touched.clear();
        sp.touched.push(ColRange { col: w.col, start: w.start, end: w.end, buf_off: 0 });
        sp.reads.clear();
        sp.reads.extend((0..w.n_reads()).map(|i| w.read(i)));
        sp.writes.clear();
        sp.writes.extend((0..w.n_writes()).map(|i| w.write(i)));
        true
    }

    /// The simulator's program of a logical write (`Program::io_only` of
    /// its plan, contiguous transfers merged) built straight from the
    /// planner for the common small write (see
    /// [`one_column`](Self::one_column); its transfers are on distinct
    /// members, so nothing merges), None for any other write.  The
    /// request is checked first, as [`plan_write`](Self::plan_write) does.
    pub fn one_column_program(&self, offset: u64, len: u64, h: &Health) -> Result<Option<Program>, PlanError> {
        self.check(offset, len)?;
        Ok(self.one_column(offset, len, h).map(|w| Program::one_stripe_io(w.stripe, w.method, (w.n_reads(), |i| w.read(i)), (w.n_writes(), |i| w.write(i)))))
    }

    /// The method, reads and writes of `sp` for a write of `cols`.
    fn fill_stripe_write(&self, cols: &[ColRange], h: &Health, sp: &mut StripePlan) -> Result<(), PlanError> {
        let g = &self.geo;
        let s = sp.stripe;
        // Every member active (the common case): nothing to look up.
        let healthy = self.all_active(h);
        let avail = |c: usize| healthy || self.avail(h, s, c);
        let failed = if healthy { Vec::new() } else { self.failed_cols(h, s)? };
        if g.m == 0 {
            for c in cols {
                sp.writes.push(self.op(s, c.col, c.start, c.end));
            }
            return Ok(());
        }
        if g.is_mirror() {
            sp.method = Method::Mirror;
            for c in cols {
                for copy in 0..g.k + g.m {
                    if avail(copy) {
                        sp.writes.push(self.op(s, copy, c.start, c.end));
                    }
                }
            }
            return Ok(());
        }
        // Data writes are the same for every method (skipping failed members).
        sp.writes.reserve(cols.len() + g.m);
        for c in cols {
            if avail(c.col) {
                sp.writes.push(self.op(s, c.col, c.start, c.end));
            }
        }
        // The available code columns, as an iterator: planning a small
        // write allocates as little as it can (replays plan millions).
        let code_cols = || (g.k..g.k + g.m).filter(move |&c| avail(c));

        if failed.iter().any(|&c| c < g.k) {
            // Degraded: read every survivor over the touched span.
            let lo = cols.iter().map(|c| c.start).min().unwrap();
            let hi = cols.iter().map(|c| c.end).max().unwrap();
            for c in 0..g.k + g.m {
                if avail(c) {
                    sp.reads.push(self.op(s, c, lo, hi));
                }
            }
            for c in code_cols() {
                sp.writes.push(self.op(s, c, lo, hi));
            }
            sp.method = Method::DegradedWrite;
            sp.span = (lo, hi);
            sp.missing.extend(failed.into_iter().filter(|&c| c < g.k));
            return Ok(());
        }

        let full = cols.len() == g.k && cols.iter().all(|c| c.start == 0 && c.end == g.unit);
        if full {
            for c in code_cols() {
                sp.writes.push(self.op(s, c, 0, g.unit));
            }
            sp.method = Method::Fsw;
            return Ok(());
        }

        // Intervals over which the touched column set is constant, and
        // the code ranges: touched intervals, adjacent ones merged (one
        // touched column, the common small write: both its one range,
        // without allocating).
        let one;
        let (many_ivs, many_code);
        let (ivs, code_ranges): (&[(u64, u64)], &[(u64, u64)]) = match cols {
            [c] => {
                one = [(c.start, c.end)];
                (&one, &one)
            }
            _ => {
                many_ivs = intervals(cols);
                many_code = merge(many_ivs.iter().copied());
                (&many_ivs, &many_code)
            }
        };

        // RMW reads the written data, then every available code column
        // over the code ranges: its cost, counted without building them.
        let n_code = code_cols().count();
        let rmw_cost = || {
            let data: u64 = cols.iter().map(|c| c.end - c.start).sum();
            let code: u64 = code_ranges.iter().map(|&(a, b)| b - a).sum();
            (cols.len() + n_code * code_ranges.len(), data + n_code as u64 * code)
        };
        // RCW's reads as (column, start, end).
        let rcw_reads = || {
            (0..g.k).flat_map(|j| merge(ivs.iter().filter(|iv| !touches(cols, j, iv)).copied()).into_iter().map(move |(a, b)| (j, a, b)))
        };
        // RCW's cost without building its ranges: per untouched stretch of
        // each column, one op (adjacent intervals merge).
        let rcw_cost = || {
            if let [(a, b)] = *ivs {
                // One interval: one op for each column not covering it
                // (the columns of `cols` are distinct).
                let n = g.k - cols.iter().filter(|c| c.start <= a && b <= c.end).count();
                return (n, n as u64 * (b - a));
            }
            let (mut n, mut bytes) = (0usize, 0u64);
            for j in 0..g.k {
                let mut last_end = None;
                for iv in ivs.iter().filter(|iv| !touches(cols, j, iv)) {
                    if last_end != Some(iv.0) {
                        n += 1;
                    }
                    bytes += iv.1 - iv.0;
                    last_end = Some(iv.1);
                }
            }
            (n, bytes)
        };
        let use_rmw = match self.policy {
            WritePolicy::ForceRmw => true,
            WritePolicy::ForceRcw => false,
            WritePolicy::Auto => rmw_cost() < rcw_cost(),
        };
        if use_rmw {
            sp.method = Method::Rmw;
            sp.reads.reserve(cols.len() + n_code * code_ranges.len());
            for c in cols {
                sp.reads.push(self.op(s, c.col, c.start, c.end));
            }
            for c in code_cols() {
                for &(a, b) in code_ranges {
                    sp.reads.push(self.op(s, c, a, b));
                }
            }
        } else {
            sp.method = Method::Rcw;
            sp.reads.extend(rcw_reads().map(|(c, a, b)| self.op(s, c, a, b)));
        }
        for c in code_cols() {
            for &(a, b) in code_ranges {
                sp.writes.push(self.op(s, c, a, b));
            }
        }
        Ok(())
    }

    /// Plan the reconstruction of `targets` (members) for stripe `stripe`,
    /// over in-unit bytes `[lo, hi)`.  `h` must mark the targets unavailable.
    pub fn plan_rebuild(
        &self,
        stripe: u64,
        lo: u64,
        hi: u64,
        targets: &[usize],
        h: &Health,
    ) -> Result<StripePlan, PlanError> {
        let g = &self.geo;
        let failed = self.failed_cols(h, stripe)?;
        let target_cols: Vec<usize> = targets.iter().filter_map(|&m| g.column_of(stripe, m)).collect();
        let mut sp = StripePlan {
            stripe,
            method: Method::Rebuild,
            touched: vec![],
            reads: vec![],
            writes: vec![],
            span: (lo, hi),
            missing: failed.clone(),
        };
        if target_cols.is_empty() {
            return Ok(sp); // no target holds a unit of this stripe
        }
        let n_read = if g.is_mirror() { 1 } else { g.k };
        for c in (0..g.k + g.m).filter(|&c| self.avail(h, stripe, c)).take(n_read) {
            sp.reads.push(self.op(stripe, c, lo, hi));
        }
        if g.m == 0 {
            return Err(PlanError::TooManyFailures {
                stripe,
                failed: targets.to_vec(),
                tolerable: 0,
            });
        }
        for &c in &target_cols {
            sp.writes.push(self.op(stripe, c, lo, hi));
        }
        Ok(sp)
    }

    /// Plan a scrub of stripe `stripe` over in-unit bytes `[lo, hi)`: read
    /// every available column.  Repairs are planned by the caller from the
    /// result (see [`crate::compute::scrub_check`]).
    pub fn plan_scrub(&self, stripe: u64, lo: u64, hi: u64, h: &Health) -> Result<StripePlan, PlanError> {
        let g = &self.geo;
        let failed = self.failed_cols(h, stripe)?;
        let mut sp = StripePlan {
            stripe,
            method: Method::Scrub,
            touched: vec![],
            reads: vec![],
            writes: vec![],
            span: (lo, hi),
            missing: failed,
        };
        for c in 0..g.k + g.m {
            if self.avail(h, stripe, c) {
                sp.reads.push(self.op(stripe, c, lo, hi));
            }
        }
        Ok(sp)
    }

    /// The op that writes column `col` of `stripe` over `[lo, hi)` (scrub repair).
    pub fn column_op(&self, stripe: u64, col: usize, lo: u64, hi: u64) -> DevOp {
        self.op(stripe, col, lo, hi)
    }

    pub fn level(&self) -> Level {
        self.geo.level
    }
}

/// A write inside one column of one stripe (see
/// [`StripePlanner::one_column`]) and how it is made.
struct OneColumn<'a> {
    place: Placer<'a>,
    stripe: u64,
    col: usize,
    start: u64,
    end: u64,
    /// Rmw, Rcw or (k = 1, a whole unit) Fsw.
    method: Method,
}

impl OneColumn<'_> {
    /// How many reads: RMW the data and each code column, RCW every
    /// other data column, FSW none.
    fn n_reads(&self) -> usize {
        let g = self.place.g;
        match self.method {
            Method::Rmw => 1 + g.m,
            Method::Rcw => g.k - 1,
            _ => 0,
        }
    }

    /// Read `i` (of [`n_reads`](Self::n_reads)), in the general path's
    /// order: RMW the data, then the code columns; RCW the other data
    /// columns in column order.
    #[inline]
    fn read(&self, i: usize) -> DevOp {
        let col = match self.method {
            Method::Rmw if i == 0 => self.col,
            Method::Rmw => self.place.g.k + i - 1,
            _ if i < self.col => i,
            _ => i + 1,
        };
        self.place.op(col, self.start, self.end)
    }

    fn n_writes(&self) -> usize {
        1 + self.place.g.m
    }

    /// Write `i`: the data, then each code column over the same range.
    #[inline]
    fn write(&self, i: usize) -> DevOp {
        let col = if i == 0 { self.col } else { self.place.g.k + i - 1 };
        self.place.op(col, self.start, self.end)
    }
}

/// [`StripePlanner::op`] for the columns of one stripe of a parity
/// geometry other than cbro, with the stripe's rotation worked out once.
struct Placer<'a> {
    g: &'a Geometry,
    /// The first code column's member (see [`Geometry::member_of`]).
    c0: usize,
    offset: u64,
    rotates: bool,
}

impl<'a> Placer<'a> {
    fn new(g: &'a Geometry, stripe: u64) -> Placer<'a> {
        let rotates = matches!(g.level, Level::Raid5 | Level::Raid6 | Level::Rs { .. });
        let c0 = if rotates { g.members - 1 - (stripe % g.members as u64) as usize } else { 0 };
        Placer { g, c0, offset: stripe * g.unit, rotates }
    }

    #[inline]
    fn op(&self, col: usize, start: u64, end: u64) -> DevOp {
        let g = self.g;
        let member = if !self.rotates {
            col
        } else {
            let at = if col >= g.k { self.c0 + (col - g.k) } else { self.c0 + g.m + col };
            if at >= g.members {
                at - g.members
            } else {
                at
            }
        };
        DevOp { member, offset: self.offset + start, len: end - start, role: if col < g.k { Role::Data } else { Role::Code }, col }
    }
}

/// Elementary intervals `[a, b)` of in-unit offsets, between the touched
/// ranges' start and end points; within one, the set of touching columns
/// is fixed ([`touches`]); intervals no column touches are left out.
pub(crate) fn intervals(cols: &[ColRange]) -> Vec<(u64, u64)> {
    if let [c] = cols {
        return vec![(c.start, c.end)];
    }
    let mut pts: Vec<u64> = cols.iter().flat_map(|c| [c.start, c.end]).collect();
    pts.sort_unstable();
    pts.dedup();
    pts.windows(2).map(|w| (w[0], w[1])).filter(|&(a, b)| cols.iter().any(|c| c.start <= a && b <= c.end)).collect()
}

/// Whether the write of `cols` covers column `col` over interval `iv`
/// (one of [`intervals`]: a column covers it whole or not at all).
fn touches(cols: &[ColRange], col: usize, iv: &(u64, u64)) -> bool {
    cols.iter().any(|c| c.col == col && c.start <= iv.0 && iv.1 <= c.end)
}

/// Merge sorted ranges that touch.
pub(crate) fn merge(ranges: impl Iterator<Item = (u64, u64)>) -> Vec<(u64, u64)> {
    let mut out: Vec<(u64, u64)> = Vec::new();
    for (a, b) in ranges {
        match out.last_mut() {
            Some(last) if last.1 == a => last.1 = b,
            _ => out.push((a, b)),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::health::MemberState;

    fn planner(level: &str, n: usize, unit: u64) -> StripePlanner {
        StripePlanner::new(Geometry::new(level.parse().unwrap(), n, unit, 4096, unit * 64).unwrap())
    }

    /// The members a read of every stripe of `p` reads, with health `h`.
    fn read_members(p: &StripePlanner, h: &Health) -> Vec<usize> {
        let g = &p.geo;
        let plan = p.plan_read(0, g.capacity(), h).unwrap();
        plan.stripes.iter().flat_map(|sp| sp.reads.iter().map(|op| op.member)).collect()
    }

    /// md's `--write-mostly`: a mirror reads the other copies, and a
    /// write-mostly member only for stripes no other copy serves; its
    /// writes are the same.
    #[test]
    fn a_write_mostly_mirror_member_is_read_only_when_no_other_copy_is() {
        let mut p = planner("raid1", 3, 4096);
        let h = Health::all_active(3);
        let spread = read_members(&p, &h);
        assert_eq!((0..3).map(|m| spread.iter().filter(|&&x| x == m).count()).collect::<Vec<_>>(), [22, 21, 21], "reads spread over the copies");
        p.write_mostly = vec![false, true, false];
        let got = read_members(&p, &h);
        assert!(!got.contains(&1) && got.len() == 64, "{got:?}");
        let c = p.plan_write(0, 4096, &h).unwrap().counts();
        assert_eq!(c.data_writes + c.code_writes, 3, "every copy is written");
        let mut one = h.clone();
        one.states[0] = MemberState::Failed;
        assert!(read_members(&p, &one).iter().all(|&m| m == 2), "member 2 serves, not the write-mostly 1");
        one.states[2] = MemberState::Rebuilding { done: 10 };
        let got = read_members(&p, &one);
        assert_eq!(got, (0..64).map(|s| if s < 10 { 2 } else { 1 }).collect::<Vec<_>>(), "the write-mostly copy serves what no other can");
    }

    #[test]
    fn aligned_single_unit_write_on_raid5_is_rmw_with_two_reads() {
        let p = planner("raid5", 5, 4096);
        let plan = p.plan_write(0, 4096, &Health::all_active(5)).unwrap();
        let c = plan.counts();
        assert_eq!(plan.stripes[0].method, Method::Rmw);
        assert_eq!((c.data_reads, c.code_reads), (1, 1));
        assert_eq!((c.data_writes, c.code_writes), (1, 1));
    }

    #[test]
    fn fewest_reads_decides_rmw_or_rcw() {
        // k = 8, m = 1: d + m vs k - d.
        let p = planner("raid5", 9, 4096);
        let h = Health::all_active(9);
        for d in 1..8u64 {
            let plan = p.plan_write(0, d * 4096, &h).unwrap();
            let c = plan.counts();
            let reads = c.data_reads + c.code_reads;
            let rmw = d + 1;
            let rcw = 8 - d;
            assert_eq!(reads, rmw.min(rcw), "d={d}");
            let expect = if rmw < rcw { Method::Rmw } else { Method::Rcw };
            assert_eq!(plan.stripes[0].method, expect, "d={d}");
        }
        let plan = p.plan_write(0, 8 * 4096, &h).unwrap();
        assert_eq!(plan.stripes[0].method, Method::Fsw);
        assert_eq!(plan.counts().device_reads(), 0);
        assert_eq!(plan.counts().device_writes(), 9);
    }

    #[test]
    fn raid6_rmw_reads_d_plus_two() {
        let p = planner("raid6", 10, 8192);
        let plan = p.plan_write(8192, 8192, &Health::all_active(10)).unwrap();
        let c = plan.counts();
        assert_eq!(plan.stripes[0].method, Method::Rmw);
        assert_eq!((c.data_reads, c.code_reads, c.code_writes), (1, 2, 2));
    }

    #[test]
    fn sub_unit_write_spanning_two_columns() {
        // unit 16K; write 8K..24K touches col 0 [8K,16K) and col 1 [0,8K).
        let p = planner("raid5", 5, 16384);
        let plan = p.plan_write(8192, 16384, &Health::all_active(5)).unwrap();
        let sp = &plan.stripes[0];
        assert_eq!(sp.touched.len(), 2);
        // Code ranges [0,8K) and [8K,16K) are adjacent: one merged code write.
        let code_writes: Vec<_> = sp.writes.iter().filter(|o| o.role == Role::Code).collect();
        assert_eq!(code_writes.len(), 1);
        assert_eq!(code_writes[0].len, 16384);
    }

    #[test]
    fn degraded_write_reads_survivors() {
        let p = planner("raid5", 5, 4096);
        let mut h = Health::all_active(5);
        // stripe 0: D0 on member 0.
        h.states[0] = MemberState::Failed;
        let plan = p.plan_write(0, 4096, &h).unwrap();
        let sp = &plan.stripes[0];
        assert_eq!(sp.method, Method::DegradedWrite);
        assert_eq!(sp.reads.len(), 4);
        assert!(sp.writes.iter().all(|o| o.member != 0));
        assert_eq!(sp.writes.len(), 1); // only parity
    }

    #[test]
    fn too_many_failures_is_an_error() {
        let p = planner("raid5", 5, 4096);
        let mut h = Health::all_active(5);
        h.states[0] = MemberState::Failed;
        h.states[1] = MemberState::Failed;
        let e = p.plan_read(0, 4096, &h).unwrap_err();
        assert!(matches!(e, PlanError::TooManyFailures { .. }), "{e}");
        let e = p.plan_write(0, 4096, &h).unwrap_err();
        assert!(e.to_string().contains("failed"), "{e}");
    }

    /// A program asked for a misaligned write: the request's error.
    fn p_err() -> Result<Option<Program>, PlanError> {
        planner("raid5", 5, 4096).one_column_program(100, 4096, &Health::all_active(5))
    }

    /// The general path of [`StripePlanner::plan_write_into`], without
    /// the one-column shortcut.
    fn general_write(p: &StripePlanner, offset: u64, len: u64, h: &Health) -> Plan {
        let mut plan = Plan::default();
        p.check(offset, len).unwrap();
        p.plan_into(offset, len, &mut plan, Method::Direct, |sp, cols| p.fill_stripe_write(cols, h, sp)).unwrap();
        plan
    }

    /// The one-column shortcut plans what the general path plans, on
    /// every parity level, small and large k, every policy, writes at
    /// every block of a stripe and of every length up to past a unit,
    /// into a plan left dirty by a larger one; and declines what it does
    /// not handle (so those plans are the general path's by construction).
    #[test]
    fn one_column_writes_plan_as_the_general_path() {
        let levels = ["raid4:3", "raid4:5", "raid5:2", "raid5:3", "raid5:5", "raid5:9", "raid6:4", "raid6:7", "rs:1+1", "rs:3+2", "rs:6+3", "rs:2+4", "raid0:4", "raid1:3", "cbro:3+1,cda=raid0:2"];
        let (mut shortcuts, mut programs) = (0, 0);
        for spec in levels {
            let (level, n) = match spec.rsplit_once(':') {
                Some((l, n)) if !l.contains(':') && !l.starts_with("rs") && !l.starts_with("cbro") => (l.parse().unwrap(), n.parse().unwrap()),
                _ => {
                    let l: Level = spec.parse().unwrap();
                    (l, l.implied_members().unwrap())
                }
            };
            for unit in [512u64, 2048, 4096] {
                let g = Geometry::new(level, n, unit, 512, unit * 40).unwrap();
                for policy in [WritePolicy::Auto, WritePolicy::ForceRmw, WritePolicy::ForceRcw] {
                    let p = StripePlanner { geo: g.clone(), policy, write_mostly: Vec::new() };
                    let h = Health::all_active(n);
                    let sd = g.stripe_data_bytes();
                    for offset in (0..3 * sd).step_by(512) {
                        for len in (512..=unit + 1024).step_by(512) {
                            if offset + len > g.capacity() {
                                continue;
                            }
                            let mut dirty = Plan::default();
                            p.plan_write_into(0, (3 * sd).min(g.capacity()), &h, &mut dirty).unwrap();
                            let mut fast = dirty.clone();
                            shortcuts += p.one_column_write(offset, len, &h, &mut fast) as u32;
                            p.plan_write_into(offset, len, &h, &mut dirty).unwrap();
                            let general = general_write(&p, offset, len, &h);
                            assert_eq!(dirty, general, "{spec} unit {unit} {policy:?} {offset}+{len}");
                            // The program built without a plan is the
                            // plan's, as the simulator's layouts build it;
                            // the pool of recycled programs holds every
                            // shape made before.
                            let mut want = Program::io_only(&general);
                            crate::merge::merge_contiguous(&mut want);
                            match p.one_column_program(offset, len, &h).unwrap() {
                                Some(got) => {
                                    assert_eq!(got, want, "{spec} unit {unit} {policy:?} {offset}+{len}");
                                    programs += 1;
                                    got.recycle();
                                }
                                None => assert!(!p.one_column_write(offset, len, &h, &mut Plan::default())),
                            }
                            want.recycle();
                        }
                    }
                }
            }
        }
        assert!(shortcuts > 10_000, "the shortcut was taken {shortcuts} times");
        assert_eq!(programs, shortcuts);
        assert!(matches!(p_err(), Err(PlanError::Unaligned { .. })));
        // Not with a member down (the general path plans degraded writes).
        let p = planner("raid5", 5, 4096);
        let mut h = Health::all_active(5);
        h.states[2] = MemberState::Failed;
        assert!(!p.one_column_write(0, 4096, &h, &mut Plan::default()));
        assert!(p.one_column_write(0, 4096, &Health::all_active(5), &mut Plan::default()));
        assert!(!p.one_column_write(4096, 8192, &Health::all_active(5), &mut Plan::default()));
    }

    #[test]
    fn requests_are_checked() {
        let p = planner("raid5", 5, 4096);
        let h = Health::all_active(5);
        assert!(matches!(p.plan_read(100, 4096, &h), Err(PlanError::Unaligned { .. })));
        let cap = p.geo.capacity();
        assert!(matches!(p.plan_write(cap, 4096, &h), Err(PlanError::OutOfRange { .. })));
        assert!(matches!(p.plan_write(u64::MAX - 4095, 4096, &h), Err(PlanError::Unaligned { .. }) | Err(PlanError::OutOfRange { .. })));
        assert!(p.plan_write(0, 0, &h).is_err());
    }
}
