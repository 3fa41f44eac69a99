//! DVS as a [`mosaic_core::Frontend`]: jobs become plans of device ops.
//!
//! ```text
//!   Job { fills, stripes, resets }
//!     ├─ Plan 1 (reads):  fills  ─ one read per chunk, or the other columns of its stripe (degraded)
//!     └─ Plan 2 (writes): stripe columns sorted by (member, slot), contiguous slots of one role
//!                         merged into one op  ─ then the zone resets of a GC's old segment
//! ```
//!
//! A job's reads and writes are two plans started together, so every
//! zone write enters its drive's FIFO queue in the order the tables
//! assigned write pointers (a plan with a read phase would hold its writes
//! back and let a later job's appends overtake them — a write-pointer
//! violation).  The price is that a job's writes on one drive may start
//! before its reads on *another* drive finish; on each drive, reads still
//! precede writes.  The same ordering rule holds for the baselines.

use mosaic_core::{DevOp, Frontend, Health, Method, Plan, PlanError, Role, Staged, StripePlan};

use crate::addr::Geo;
use crate::backlog::Backlog;
use crate::engine::{ChunkRead, Dvs, DvsParams, Job, ReadSrc, Src};
use crate::DvsError;

impl From<DvsError> for PlanError {
    fn from(e: DvsError) -> PlanError {
        match e {
            DvsError::Plan(p) => p,
            other => PlanError::Invalid(other.to_string()),
        }
    }
}

/// Device reads of one chunk read.
pub fn chunk_read_ops(geo: &Geo, healthy: &[bool], r: &ChunkRead) -> Vec<DevOp> {
    match &r.src {
        Src::Direct { member, offset } => vec![DevOp { member: *member, offset: *offset, len: r.b - r.a, role: Role::Data, col: 0 }],
        Src::Recon { phys, stripe, col } => stripe
            .members
            .iter()
            .enumerate()
            .filter(|&(c, &m)| c != *col && healthy[m as usize])
            .map(|(c, &m)| DevOp {
                member: m as usize,
                offset: geo.slot_offset(*phys, stripe.idx[c]) + r.a,
                len: r.b - r.a,
                role: if c < stripe.width() { Role::Data } else { Role::Code },
                col: c,
            })
            .collect(),
    }
}

fn stripe_plan(stripe: u64, method: Method, reads: Vec<DevOp>, writes: Vec<DevOp>) -> StripePlan {
    StripePlan { stripe, method, touched: vec![], reads, writes, span: (0, 0), missing: vec![] }
}

/// Sort by (member, offset) and merge contiguous ops of one role.
pub fn coalesce(mut ops: Vec<DevOp>) -> Vec<DevOp> {
    ops.sort_by_key(|o| (o.member, o.offset));
    let mut out: Vec<DevOp> = Vec::with_capacity(ops.len());
    for o in ops {
        if let Some(l) = out.last_mut() {
            if l.member == o.member && l.role == o.role && l.offset + l.len == o.offset && o.role != Role::ZoneReset {
                l.len += o.len;
                continue;
            }
        }
        out.push(o);
    }
    out
}

/// Merge reads of one member whose gap is at most `gap` bytes: reading
/// over a little garbage costs less than positioning again (a GC reads a
/// segment in one sweep).
pub fn merge_gaps(ops: Vec<DevOp>, gap: u64) -> Vec<DevOp> {
    let mut out: Vec<DevOp> = Vec::new();
    for o in coalesce(ops) {
        if let Some(l) = out.last_mut() {
            if l.member == o.member && o.offset >= l.offset + l.len && o.offset - (l.offset + l.len) <= gap {
                l.len = o.offset + o.len - l.offset;
                continue;
            }
        }
        out.push(o);
    }
    out
}

/// The plans of one job: reads (if any), then writes and resets.
pub fn job_plans(geo: &Geo, healthy: &[bool], job: &Job) -> Vec<Plan> {
    let mut plans = Vec::new();
    let reads: Vec<DevOp> = job.fills.iter().flat_map(|f| chunk_read_ops(geo, healthy, f)).collect();
    if !reads.is_empty() {
        let degraded = job.fills.iter().any(|f| matches!(f.src, Src::Recon { .. }));
        let m = if degraded { Method::DegradedRead } else { Method::Read };
        plans.push(Plan { stripes: vec![stripe_plan(job.lsn as u64, m, merge_gaps(reads, 8 * geo.chunk), vec![])] });
    }
    let mut writes = Vec::new();
    for st in &job.stripes {
        for (c, (&m, &idx)) in st.members.iter().zip(&st.idx).enumerate() {
            if !healthy[m as usize] {
                continue;
            }
            let role = if c < st.width() { Role::Data } else { Role::Code };
            writes.push(DevOp { member: m as usize, offset: geo.slot_offset(job.phys, idx), len: geo.chunk, role, col: c });
        }
    }
    let mut writes = coalesce(writes);
    for &(m, zone) in &job.resets {
        writes.push(DevOp { member: m, offset: zone * geo.cfg.zone_size, len: 0, role: Role::ZoneReset, col: 0 });
    }
    if !writes.is_empty() {
        plans.push(Plan { stripes: vec![stripe_plan(job.lsn as u64, Method::Fsw, vec![], writes)] });
    }
    plans
}

/// DVS-RAID in the replay engine.
pub struct DvsFrontend {
    pub dvs: Dvs,
    /// Also time a metadata log write per job (a 4 KiB write to a
    /// conventional zone, rotating over the members).  Off by default: the
    /// paper keeps the tables in the SSD cache and destages them rarely.
    pub meta_log: bool,
    meta_seq: u64,
    pub backlog: Backlog,
}

impl DvsFrontend {
    pub fn new(geo: Geo, p: DvsParams) -> DvsFrontend {
        DvsFrontend { dvs: Dvs::new(geo, p), meta_log: false, meta_seq: 0, backlog: Backlog::none() }
    }

    /// Hold background-destaged cache space until the drives are estimated
    /// to have written it (see [`crate::backlog`]).
    pub fn with_backlog(mut self, models: &[Box<dyn mosaic_drives::DriveModel>]) -> DvsFrontend {
        self.backlog = Backlog::new(models);
        self
    }

    fn plans(&mut self, jobs: &[Job]) -> Vec<Plan> {
        let mut out = Vec::new();
        for j in jobs {
            out.extend(job_plans(&self.dvs.geo, &self.dvs.healthy, j));
            let g = &self.dvs.geo;
            if self.meta_log && g.cfg.conventional > 0 {
                let mut m = (self.meta_seq % g.n as u64) as usize;
                while !self.dvs.healthy[m] {
                    m = (m + 1) % g.n;
                }
                let slots = g.cfg.conventional * g.cfg.zone_size / 4096;
                let off = (self.meta_seq / g.n as u64 % slots) * 4096;
                self.meta_seq += 1;
                out.push(Plan { stripes: vec![stripe_plan(j.lsn as u64, Method::Direct, vec![], vec![DevOp { member: m, offset: off, len: 4096, role: Role::Meta, col: 0 }])] });
            }
        }
        out
    }
}

impl Frontend for DvsFrontend {
    fn describe(&self) -> String {
        let g = &self.dvs.geo;
        format!("dvs {}+{} chunk {}K seg {}K cache {} chunks", g.data, g.k, g.chunk >> 10, g.cfg.zone_size >> 10, self.dvs.p.cache.chunks)
    }
    fn capacity(&self) -> u64 {
        self.dvs.geo.capacity()
    }
    fn block_size(&self) -> u64 {
        self.dvs.geo.block
    }
    fn members(&self) -> usize {
        self.dvs.geo.n
    }
    fn submit(&mut self, write: bool, offset: u64, len: u64, now_ns: u64, h: &Health) -> Result<Staged, PlanError> {
        self.dvs.set_health(h);
        if write {
            self.dvs.held = self.backlog.held(now_ns);
            let (fg, bg) = self.dvs.write(offset, len, now_ns)?;
            let fg = self.plans(&fg);
            self.backlog.add(&fg, now_ns, 0);
            let mut bgp = Vec::new();
            for j in &bg {
                let p = self.plans(std::slice::from_ref(j));
                self.backlog.add(&p, now_ns, j.chunks.len());
                bgp.extend(p);
            }
            return Ok(Staged { fg, bg: bgp });
        }
        let pieces = self.dvs.read(offset, len, now_ns)?;
        let mut reads = Vec::new();
        let mut degraded = false;
        for p in &pieces {
            if let ReadSrc::Disk(r) = &p.src {
                degraded |= matches!(r.src, Src::Recon { .. });
                reads.extend(chunk_read_ops(&self.dvs.geo, &self.dvs.healthy, r));
            }
        }
        let fg = if reads.is_empty() {
            vec![]
        } else {
            let m = if degraded { Method::DegradedRead } else { Method::Read };
            vec![Plan { stripes: vec![stripe_plan(offset, m, coalesce(reads), vec![])] }]
        };
        self.backlog.add(&fg, now_ns, 0);
        Ok(Staged { fg, bg: vec![] })
    }
    fn idle_after_ns(&self) -> Option<u64> {
        self.dvs.p.idle_ns
    }
    fn idle(&mut self, now_ns: u64, h: &Health) -> Result<Vec<Plan>, PlanError> {
        self.dvs.set_health(h);
        let jobs: Vec<Job> = self.dvs.idle()?.into_iter().collect();
        let p = self.plans(&jobs);
        self.backlog.add(&p, now_ns, 0);
        Ok(p)
    }
    fn stats(&self) -> Vec<(String, f64)> {
        let s = &self.dvs.stats;
        vec![
            ("write chunks".into(), s.write_chunks as f64),
            ("write hits".into(), s.write_hits as f64),
            ("read chunks".into(), s.read_chunks as f64),
            ("read hits".into(), s.read_hits as f64),
            ("destages".into(), s.destages as f64),
            ("destaged chunks".into(), s.destaged_chunks as f64),
            ("full stripes".into(), s.full_stripes as f64),
            ("partial stripes".into(), s.partial_stripes as f64),
            ("fill reads".into(), s.fills as f64),
            ("foreground gc".into(), s.fg_gc as f64),
            ("background gc".into(), s.bg_gc as f64),
            ("gc moved chunks".into(), s.gc_moved as f64),
        ]
    }
}
