//! DVS as a [`mosaic_core::Frontend`]: jobs become plans of device ops,
//! the same operations the real executor ([`crate::DvsArray`]) issues.
//!
//! ```text
//!   Job { fills, stripes, resets }
//!     ├─ Plan 1 (reads):  fills ─ direct reads merged into runs (contiguous slots of one
//!     │                   member in one zone), a reconstruction reads its stripe's other columns
//!     └─ Plan 2 (writes): stripe columns sorted by (member, slot), contiguous slots merged
//!                         into one op ─ the job's log record (or a checkpoint when the log is
//!                         full) on every working member (Role::Meta) ─ the zone resets of a
//!                         GC's old segment
//!   cached array (journal): every write piece is first a journal record on every working
//!                         member (Role::Meta); a full journal destages the whole cache first
//! ```
//!
//! The real executor is the reference: [`read_runs`] and [`merge_writes`]
//! are the merging rules both sides use, and [`MetaState`] decides every
//! metadata write for both, so a replay at queue depth 1 issues the same
//! operations, member by member, on a real array and in the simulator
//! (`tests/same_ops.rs`).  Flushes are not operations.
//!
//! A job's reads and writes are two plans started together, so every
//! zone write enters its drive's FIFO queue in the order the tables
//! assigned write pointers (a plan with a read phase would hold its writes
//! back and let a later job's appends overtake them — a write-pointer
//! violation).  The price is that a job's writes on one drive may start
//! before its reads on *another* drive finish; on each drive, reads still
//! precede writes.  The same ordering rule holds for the baselines.

use mosaic_core::{DevOp, Frontend, Health, Method, Plan, PlanError, Program, Role, Staged, StripePlan};

/// Plans a request waits for, and background plans.
type Stage = (Vec<Plan>, Vec<Plan>);

use crate::addr::{DvsConfig, Geo};
use crate::array::array_params;
use crate::backlog::Backlog;
use crate::engine::{ChunkRead, Dvs, DvsParams, Job, ReadSrc, Src};
use crate::meta::{journal_record_len, MetaLayout, MetaState, Record};
use crate::tables::Tables;
use crate::DvsError;

/// How long a real DVS volume waits without requests before a GC step
/// (`mosaic_volume`'s default); the idle time of [`DvsFrontend::for_array`].
pub const REAL_IDLE_NS: u64 = 500_000_000;

impl From<DvsError> for PlanError {
    fn from(e: DvsError) -> PlanError {
        match e {
            DvsError::Plan(p) => p,
            other => PlanError::Invalid(other.to_string()),
        }
    }
}

/// Device reads of one chunk read, unmerged.
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

/// One device read serving direct chunk reads: `parts` are (index into
/// the chunk reads, byte offset of its bytes in the run).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadRun {
    pub member: usize,
    pub offset: u64,
    pub len: u64,
    pub parts: Vec<(usize, u64)>,
}

/// The direct reads among `reads` merged into device reads: sorted by
/// (member, offset), contiguous reads of one member within one zone
/// become one run.  Both executors read exactly these runs.
pub fn read_runs(geo: &Geo, reads: &[&ChunkRead]) -> Vec<ReadRun> {
    let mut d: Vec<(usize, u64, u64, usize)> = reads
        .iter()
        .enumerate()
        .filter_map(|(i, r)| match r.src {
            Src::Direct { member, offset } => Some((member, offset, r.b - r.a, i)),
            Src::Recon { .. } => None,
        })
        .collect();
    d.sort_by_key(|x| (x.0, x.1));
    let mut out: Vec<ReadRun> = Vec::new();
    for (member, offset, len, i) in d {
        if let Some(l) = out.last_mut() {
            if l.member == member && l.offset + l.len == offset && offset % geo.cfg.zone_size != 0 {
                l.parts.push((i, l.len));
                l.len += len;
                continue;
            }
        }
        out.push(ReadRun { member, offset, len, parts: vec![(i, 0)] });
    }
    out
}

/// The device reads of `reads` as the real executor issues them: the
/// direct runs of [`read_runs`], then each reconstruction's column reads.
pub fn read_ops(geo: &Geo, healthy: &[bool], reads: &[&ChunkRead]) -> Vec<DevOp> {
    let mut ops: Vec<DevOp> = read_runs(geo, reads).into_iter().map(|r| DevOp { member: r.member, offset: r.offset, len: r.len, role: Role::Data, col: 0 }).collect();
    for r in reads.iter().filter(|r| matches!(r.src, Src::Recon { .. })) {
        ops.extend(chunk_read_ops(geo, healthy, r));
    }
    ops
}

fn stripe_plan(stripe: u64, method: Method, reads: Vec<DevOp>, writes: Vec<DevOp>) -> StripePlan {
    StripePlan { stripe, method, touched: vec![], reads, writes, span: (0, 0), missing: vec![] }
}

/// Sort by (member, offset) and merge contiguous ops of one role (the
/// baselines' rule).
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

/// A job's appends as the real executor issues them: sorted by (member,
/// offset), contiguous slots of one member merged into one write whatever
/// they hold (data and parity alike; the merged op keeps the first one's
/// role).  A job's appends all lie in one segment.
pub fn merge_writes(mut ops: Vec<DevOp>) -> Vec<DevOp> {
    ops.sort_by_key(|o| (o.member, o.offset));
    let mut out: Vec<DevOp> = Vec::with_capacity(ops.len());
    for o in ops {
        if let Some(l) = out.last_mut() {
            if l.member == o.member && l.offset + l.len == o.offset {
                l.len += o.len;
                continue;
            }
        }
        out.push(o);
    }
    out
}

/// A metadata write of `len` bytes at `offset` on every working member.
pub fn meta_ops(healthy: &[bool], offset: u64, len: u64) -> Vec<DevOp> {
    (0..healthy.len()).filter(|&m| healthy[m]).map(|m| DevOp { member: m, offset, len, role: Role::Meta, col: 0 }).collect()
}

/// The plans of one job: reads (if any), then writes, the metadata writes
/// `meta` (the job's log record) and resets.
pub fn job_plans(geo: &Geo, healthy: &[bool], job: &Job, meta: Vec<DevOp>) -> Vec<Plan> {
    let mut plans = Vec::new();
    let fills: Vec<&ChunkRead> = job.fills.iter().collect();
    let reads = read_ops(geo, healthy, &fills);
    if !reads.is_empty() {
        let degraded = job.fills.iter().any(|f| matches!(f.src, Src::Recon { .. }));
        let m = if degraded { Method::DegradedRead } else { Method::Read };
        plans.push(Plan { stripes: vec![stripe_plan(job.lsn as u64, m, reads, vec![])] });
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
    let mut writes = merge_writes(writes);
    writes.extend(meta);
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
    /// Also plan the metadata writes the real executor makes: each job's
    /// log record (a checkpoint when the log is full) on every working
    /// member's conventional zones.  Off by default: the paper keeps the
    /// tables in the SSD cache and destages them rarely.
    pub meta_log: bool,
    meta: Option<MetaState>,
    /// Journal every write before it enters the cache, as a real array
    /// with a write cache does ([`DvsFrontend::for_array`]).
    journal: bool,
    pub backlog: Backlog,
}

impl DvsFrontend {
    pub fn new(geo: Geo, p: DvsParams) -> DvsFrontend {
        DvsFrontend { dvs: Dvs::new(geo, p), meta_log: false, meta: None, journal: false, backlog: Backlog::none() }
    }

    /// The replay twin of a freshly created real array of `cfg`: the real
    /// array's policy ([`array_params`]), its metadata log, checkpoints and
    /// write-cache journal, no backlog estimate, and a GC step after
    /// [`REAL_IDLE_NS`] without requests.
    pub fn for_array(cfg: &DvsConfig) -> Result<DvsFrontend, DvsError> {
        let geo = Geo::new(cfg.clone())?;
        let ml = MetaLayout::new(&geo)?;
        let mut p = array_params(cfg);
        p.idle_ns = Some(REAL_IDLE_NS);
        let meta = MetaState::new(ml, Tables::new(geo.clone()), 0, 0, 0);
        Ok(DvsFrontend { dvs: Dvs::new(geo, p), meta_log: true, meta: Some(meta), journal: cfg.cache_chunks > 0, backlog: Backlog::none() })
    }

    /// The replay twin of a real array as it stands: its policy state
    /// (tables, write cache, member health) and metadata positions, so a
    /// replay from here issues what the array would (see
    /// `DvsArray::replay_twin`).
    pub fn from_state(dvs: Dvs, meta: MetaState, journal: bool) -> DvsFrontend {
        let mut dvs = dvs;
        dvs.p.idle_ns = Some(REAL_IDLE_NS);
        DvsFrontend { dvs, meta_log: true, meta: Some(meta), journal, backlog: Backlog::none() }
    }

    /// Hold background-destaged cache space until the drives are estimated
    /// to have written it (see [`crate::backlog`]).
    pub fn with_backlog(mut self, models: &[Box<dyn mosaic_drives::DriveModel>]) -> DvsFrontend {
        self.backlog = Backlog::new(models);
        self
    }

    /// The metadata state, made on first use (an empty array's) when
    /// `meta_log` is on.
    fn meta_state(&mut self) -> Result<Option<&mut MetaState>, DvsError> {
        if !self.meta_log {
            return Ok(None);
        }
        if self.meta.is_none() {
            let ml = MetaLayout::new(&self.dvs.geo)?;
            self.meta = Some(MetaState::new(ml, Tables::new(self.dvs.geo.clone()), 0, 0, 0));
        }
        Ok(self.meta.as_mut())
    }

    /// The plans of `jobs`, each with its log record.
    fn plans(&mut self, jobs: &[Job]) -> Result<Vec<Plan>, DvsError> {
        let mut out = Vec::new();
        for j in jobs {
            let w = match self.meta_state()? {
                Some(st) => Some(st.log(&Record::of_job(j))?),
                None => None,
            };
            let meta = w.map(|w| meta_ops(&self.dvs.healthy, w.offset, w.bytes.len() as u64)).unwrap_or_default();
            out.extend(job_plans(&self.dvs.geo, &self.dvs.healthy, j, meta));
        }
        Ok(out)
    }

    /// Take the members' health.  With `meta_log`, each member newly
    /// failed is recorded in the metadata as the real array's `fail` does
    /// (one log record), on the members still working after this update
    /// (members that fail together are gone together); returns those
    /// plans.  A failed member coming back is not modelled (a real array
    /// rebuilds it).
    fn take_health(&mut self, h: &Health) -> Result<Vec<Plan>, DvsError> {
        let before = self.dvs.healthy.clone();
        self.dvs.set_health(h);
        let mut out = Vec::new();
        let failed: Vec<usize> = (0..before.len()).filter(|&m| before[m] && !self.dvs.healthy[m]).collect();
        for m in failed {
            let w = match self.meta_state()? {
                Some(st) => st.log(&Record::Member { m: m as u8, state: mosaic_core::MemberState::Failed })?,
                None => break,
            };
            out.push(self.meta_plan(w.offset, w.bytes.len() as u64));
        }
        Ok(out)
    }

    /// One plan of metadata writes: `len` bytes at `offset` on every working member.
    fn meta_plan(&self, offset: u64, len: u64) -> Plan {
        Plan { stripes: vec![stripe_plan(offset, Method::Direct, vec![], meta_ops(&self.dvs.healthy, offset, len))] }
    }

    /// Destage the whole cache and retire the journal (a full journal).
    fn flush_plans(&mut self) -> Result<Vec<Plan>, DvsError> {
        let jobs = self.dvs.flush()?;
        let mut out = self.plans(&jobs)?;
        if let Some(st) = self.meta_state()? {
            let w = st.journal_reset()?;
            out.push(self.meta_plan(w.offset, w.bytes.len() as u64));
        }
        Ok(out)
    }

    /// Largest write piece one journal record holds (the real array's rule).
    fn journal_piece(&self, ml: &MetaLayout) -> u64 {
        let b = self.dvs.geo.block;
        ((ml.journal_end - ml.journal_start) / 4 / b * b).max(b)
    }

    /// A write: with a journal, piece by piece (journal record, then the
    /// cache and the jobs it causes); otherwise straight into the policy.
    fn write(&mut self, offset: u64, len: u64, now_ns: u64) -> Result<Stage, DvsError> {
        self.dvs.geo.check(offset, len)?;
        let ml = match (&self.meta, self.journal && self.meta_log) {
            (Some(st), true) => st.ml,
            _ => {
                let (fg, bg) = self.dvs.write(offset, len, now_ns)?;
                return self.staged(&fg, &bg, now_ns, vec![]);
            }
        };
        let max = self.journal_piece(&ml);
        let (mut fg, mut bg) = (Vec::new(), Vec::new());
        let mut pos = 0;
        while pos < len {
            let n = (len - pos).min(max);
            let rl = journal_record_len(n);
            let mut pre = Vec::new();
            if !self.meta.as_ref().is_some_and(|st| st.journal_fits(rl)) {
                pre.extend(self.flush_plans()?);
            }
            if let Some(st) = self.meta.as_mut() {
                let (_, at) = st.take_journal(rl);
                pre.push(self.meta_plan(at, rl));
            }
            let (f, b) = self.dvs.write(offset + pos, n, now_ns)?;
            let s = self.staged(&f, &b, now_ns, pre)?;
            fg.extend(s.0);
            bg.extend(s.1);
            pos += n;
        }
        Ok((fg, bg))
    }

    /// Plans of the jobs a write made: `fg` the write waits for, `bg`
    /// background destages (their chunks held by the backlog estimate).
    fn staged(&mut self, fg: &[Job], bg: &[Job], now_ns: u64, mut pre: Vec<Plan>) -> Result<Stage, DvsError> {
        pre.extend(self.plans(fg)?);
        self.backlog.add(&pre, now_ns, 0);
        let mut bgp = Vec::new();
        for j in bg {
            let p = self.plans(std::slice::from_ref(j))?;
            self.backlog.add(&p, now_ns, j.chunks.len());
            bgp.extend(p);
        }
        Ok((pre, bgp))
    }

    /// A read: the device reads of the pieces not in cache.
    fn read(&mut self, offset: u64, len: u64, now_ns: u64) -> Result<Stage, DvsError> {
        let pieces = self.dvs.read(offset, len, now_ns)?;
        let reads: Vec<&ChunkRead> = pieces.iter().filter_map(|p| if let ReadSrc::Disk(r) = &p.src { Some(r) } else { None }).collect();
        let degraded = reads.iter().any(|r| matches!(r.src, Src::Recon { .. }));
        let ops = read_ops(&self.dvs.geo, &self.dvs.healthy, &reads);
        let fg = if ops.is_empty() {
            vec![]
        } else {
            let m = if degraded { Method::DegradedRead } else { Method::Read };
            vec![Plan { stripes: vec![stripe_plan(offset, m, ops, vec![])] }]
        };
        self.backlog.add(&fg, now_ns, 0);
        Ok((fg, vec![]))
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
        let pre = self.take_health(h)?;
        let mut st = if write {
            self.dvs.held = self.backlog.held(now_ns);
            self.write(offset, len, now_ns)?
        } else {
            self.read(offset, len, now_ns)?
        };
        if !pre.is_empty() {
            st.0.splice(0..0, pre);
        }
        Ok(Staged::io_only(&st.0, &st.1))
    }
    fn idle_after_ns(&self) -> Option<u64> {
        self.dvs.p.idle_ns
    }
    fn idle(&mut self, now_ns: u64, h: &Health) -> Result<Vec<Program>, PlanError> {
        let mut p = self.take_health(h)?;
        let jobs: Vec<Job> = self.dvs.idle()?.into_iter().collect();
        p.extend(self.plans(&jobs)?);
        self.backlog.add(&p, now_ns, 0);
        Ok(p.iter().map(Program::io_only).collect())
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::addr::DvsConfig;

    fn direct(member: usize, offset: u64, a: u64, b: u64) -> ChunkRead {
        ChunkRead { key: (0, 0), a, b, src: Src::Direct { member, offset: offset + a } }
    }

    #[test]
    fn read_runs_merge_contiguous_reads_of_one_member_in_one_zone() {
        let g = Geo::new(DvsConfig::new(5, 1, 4096, 4 * 4096, 8, 1)).unwrap();
        let z = g.cfg.zone_size;
        // Member 1: slots 1, 2 (contiguous), 3 from byte 512 (a gap);
        // member 2: the last slot of one zone and the first of the next.
        let r = [direct(1, z + 8192, 0, 4096), direct(1, z + 4096, 0, 4096), direct(1, z + 12288, 512, 4096), direct(2, 2 * z - 4096, 0, 4096), direct(2, 2 * z, 0, 4096)];
        let refs: Vec<&ChunkRead> = r.iter().collect();
        let run = |member, offset, len, parts: Vec<(usize, u64)>| ReadRun { member, offset, len, parts };
        assert_eq!(
            read_runs(&g, &refs),
            vec![
                run(1, z + 4096, 8192, vec![(1, 0), (0, 4096)]),
                run(1, z + 12288 + 512, 3584, vec![(2, 0)]),
                run(2, 2 * z - 4096, 4096, vec![(3, 0)]),
                run(2, 2 * z, 4096, vec![(4, 0)]),
            ]
        );
        assert_eq!(read_ops(&g, &[true; 5], &refs).len(), 4);
    }

    #[test]
    fn writes_merge_across_roles_like_the_real_executor() {
        let op = |member, offset, role| DevOp { member, offset, len: 4096, role, col: 0 };
        let w = merge_writes(vec![op(0, 8192, Role::Code), op(0, 4096, Role::Data), op(1, 4096, Role::Data), op(0, 16384, Role::Data)]);
        let got: Vec<(usize, u64, u64)> = w.iter().map(|o| (o.member, o.offset, o.len)).collect();
        assert_eq!(got, vec![(0, 4096, 8192), (0, 16384, 4096), (1, 4096, 4096)]);
    }
}
