//! DVS as a [`mosaic_core::Frontend`]: every request becomes the very
//! [`Program`]s the real array ([`crate::DvsArray`]) runs, lowered by
//! [`crate::program`] in counting mode (lengths instead of bytes).
//!
//! ```text
//!   write ─> [health change: log record, two label rounds]  [journal full: destage all, retire the journal]
//!            [journal record]  fg jobs ...          ─ one program, phases in sequence
//!            bg jobs                                ─ one program each
//!   read  ─> chunk reads (runs, reconstructions)   ─ one program
//!   idle  ─> [health change: log record, labels]  GC job    ─ one program
//! ```
//!
//! [`MetaState`] decides every metadata write for both sides, so a replay
//! at queue depth 1 issues the same operations, member by member, on a
//! real array and in the simulator (`tests/same_ops.rs`); flushes are
//! timed but are not counted as operations.  A request's foreground work
//! is one program whose phases run strictly in order, as the real array
//! runs it, so its appends reach each zone in the order the tables
//! assigned write pointers.

use mosaic_core::{DevOp, Frontend, Health, PlanError, Program, Role, Staged};
use mosaic_ec::Code;

/// The program a request waits for, and background programs.
type Stage = (Program, Vec<Program>);

use crate::addr::{DvsConfig, Geo};
use crate::array::array_params;
use crate::backlog::Backlog;
use crate::engine::{ChunkRead, Dvs, DvsParams, Job, ReadSrc};
use crate::meta::{journal_record_len, MetaLayout, MetaState, Record};
use crate::program::{meta, Lower, Meta, Payload};
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
    /// The array's code (decode coefficients of reconstructions).
    code: Option<Code>,
}

impl DvsFrontend {
    pub fn new(geo: Geo, p: DvsParams) -> DvsFrontend {
        DvsFrontend::with(Dvs::new(geo, p), false, None, false)
    }

    fn with(dvs: Dvs, meta_log: bool, meta: Option<MetaState>, journal: bool) -> DvsFrontend {
        let code = Code::new(dvs.geo.data, dvs.geo.k).ok();
        DvsFrontend { dvs, meta_log, meta, journal, backlog: Backlog::none(), code }
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
        let meta = MetaState::created(ml, Tables::new(geo.clone()))?.0;
        Ok(DvsFrontend::with(Dvs::new(geo, p), true, Some(meta), cfg.cache_chunks > 0))
    }

    /// The replay twin of a real array as it stands: its policy state
    /// (tables, write cache, member health) and metadata positions, so a
    /// replay from here issues what the array would (see
    /// `DvsArray::replay_twin`).
    pub fn from_state(dvs: Dvs, meta: MetaState, journal: bool) -> DvsFrontend {
        let mut dvs = dvs;
        dvs.p.idle_ns = Some(REAL_IDLE_NS);
        // Only the real array's destager reads fills again another way.
        dvs.alternates = false;
        DvsFrontend::with(dvs, true, Some(meta), journal)
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
            self.meta = Some(MetaState::created(ml, Tables::new(self.dvs.geo.clone()))?.0);
        }
        Ok(self.meta.as_mut())
    }

    /// A metadata write of `len` bytes at `offset` on every working member.
    fn meta_of(&self, offset: u64, len: usize) -> Meta {
        Meta { offset, payload: Payload::Len(len), members: (0..self.dvs.geo.n).filter(|&m| self.dvs.healthy[m]).collect() }
    }

    fn lower(&self) -> Result<Lower<'_>, DvsError> {
        let code = self.code.as_ref().ok_or_else(|| DvsError::Geometry(format!("no {}+{} code", self.dvs.geo.data, self.dvs.geo.k)))?;
        Ok(Lower { geo: &self.dvs.geo, code, healthy: &self.dvs.healthy })
    }

    /// The programs of `jobs`, each with its log record, in sequence.
    fn jobs(&mut self, jobs: &[Job]) -> Result<Program, DvsError> {
        let mut p = Program::default();
        let chunk = self.dvs.geo.chunk as usize;
        for j in jobs {
            let w = match self.meta_state()? {
                Some(st) => Some(st.log(&Record::of_job(j))?),
                None => None,
            };
            let m = w.map(|w| self.meta_of(w.offset, w.bytes.len()));
            p.append(self.lower()?.job(j, &mut |_, _| Ok(Payload::Len(chunk)), &self.dvs.healthy, m, &j.resets)?);
        }
        Ok(p)
    }

    /// Take the members' health.  With `meta_log`, each member newly
    /// failed is recorded in the metadata as the real array's `fail` does
    /// (one log record, then the labels' event counter bumped in two
    /// rounds), on the members still working after this update (members
    /// that fail together are gone together).  A failed member
    /// coming back is not modelled (a real array rebuilds it).
    fn take_health(&mut self, h: &Health) -> Result<Program, DvsError> {
        let before = self.dvs.healthy.clone();
        self.dvs.set_health(h);
        let mut out = Program::default();
        let failed: Vec<usize> = (0..before.len()).filter(|&m| before[m] && !self.dvs.healthy[m]).collect();
        for m in failed {
            let w = match self.meta_state()? {
                Some(st) => st.log(&Record::Member { m: m as u8, state: mosaic_core::MemberState::Failed })?,
                None => break,
            };
            out.append(meta(self.meta_of(w.offset, w.bytes.len())));
            for _ in 0..2 {
                let Some(st) = self.meta.as_mut() else { break };
                let ((offset, _), len) = (st.bump_events(), st.ml.label_len);
                out.append(meta(self.meta_of(offset, len as usize)));
            }
        }
        Ok(out)
    }

    /// Destage the whole cache and retire the journal (a full journal).
    fn flush_all(&mut self) -> Result<Program, DvsError> {
        let jobs = self.dvs.flush()?;
        let mut out = self.jobs(&jobs)?;
        if let Some(st) = self.meta_state()? {
            let w = st.journal_reset()?;
            out.append(meta(self.meta_of(w.offset, w.bytes.len())));
        }
        Ok(out)
    }

    /// Room in the journal for a record of `rl` bytes, as the real array
    /// makes it: a ring's oldest live records destaged and its dead
    /// segments retired (early: [`MetaState::needs_room`]); else (or when
    /// not enough) the whole cache.  The real array runs the jobs and the
    /// retirement's record in the background; the operations are these.
    fn journal_room(&mut self, rl: u64) -> Result<Program, DvsError> {
        let mut pre = Program::default();
        let Some(st) = self.meta.as_mut() else { return Ok(pre) };
        if !st.needs_room(rl) {
            return Ok(pre);
        }
        if st.ring() {
            let jobs = st.room_jobs(&mut self.dvs, rl)?;
            pre.append(self.jobs(&jobs)?);
            if let Some(r) = self.meta.as_mut().map(|st| st.retire()).transpose()?.flatten() {
                pre.append(meta(self.meta_of(r.write.offset, r.write.bytes.len())));
            }
        }
        if !self.meta.as_ref().is_some_and(|st| st.journal_fits(rl)) {
            pre.append(self.flush_all()?);
        }
        Ok(pre)
    }

    /// Largest write piece one journal record holds (the real array's rule).
    fn journal_piece(&self, ml: &MetaLayout) -> u64 {
        let b = self.dvs.geo.block;
        ml.journal_piece(b).max(b)
    }

    /// A write: with a journal, piece by piece (journal record, then the
    /// cache and the jobs it causes); otherwise straight into the policy.
    fn write(&mut self, offset: u64, len: u64, now_ns: u64) -> Result<Stage, DvsError> {
        self.dvs.geo.check(offset, len)?;
        let ml = match (&self.meta, self.journal && self.meta_log) {
            (Some(st), true) => st.ml,
            _ => {
                let (fg, bg) = self.dvs.write(offset, len, now_ns)?;
                return self.staged(&fg, &bg, now_ns, Program::default());
            }
        };
        let max = self.journal_piece(&ml);
        let (mut fg, mut bg) = (Program::default(), Vec::new());
        let mut pos = 0;
        while pos < len {
            let n = (len - pos).min(max);
            let rl = journal_record_len(n);
            let mut pre = self.journal_room(rl)?;
            let mut seq = None;
            if let Some(st) = self.meta.as_mut() {
                let (s, at, lane) = st.take_journal(rl);
                seq = Some(s);
                let mut m = self.meta_of(at, rl as usize);
                m.members = crate::meta::journal_members(m.members, self.dvs.geo.k, lane);
                pre.append(meta(m));
            }
            let (f, b) = self.dvs.write(offset + pos, n, now_ns)?;
            if let (Some(st), Some(s)) = (self.meta.as_mut(), seq) {
                st.prune(&self.dvs.cache);
                st.note_write(s, offset + pos, n);
            }
            let s = self.staged(&f, &b, now_ns, pre)?;
            fg.append(s.0);
            bg.extend(s.1);
            pos += n;
        }
        Ok((fg, bg))
    }

    /// The program the write waits for (`pre`, then the jobs `fg`) and one
    /// per background destage in `bg` (its chunks held by the backlog
    /// estimate).
    fn staged(&mut self, fg: &[Job], bg: &[Job], now_ns: u64, mut pre: Program) -> Result<Stage, DvsError> {
        pre.append(self.jobs(fg)?);
        self.backlog.add(std::slice::from_ref(&pre), now_ns, 0);
        let mut bgp = Vec::new();
        for j in bg {
            let p = self.jobs(std::slice::from_ref(j))?;
            self.backlog.add(std::slice::from_ref(&p), now_ns, j.chunks.len());
            bgp.push(p);
        }
        Ok((pre, bgp))
    }

    /// A read: the device reads of the pieces not in cache.
    fn read(&mut self, offset: u64, len: u64, now_ns: u64) -> Result<Stage, DvsError> {
        let pieces = self.dvs.read(offset, len, now_ns)?;
        let reads: Vec<&ChunkRead> = pieces.iter().filter_map(|p| if let ReadSrc::Disk(r) = &p.src { Some(r) } else { None }).collect();
        let (mut p, _) = self.lower()?.read(&reads)?;
        p.locks.push(offset);
        self.backlog.add(std::slice::from_ref(&p), now_ns, 0);
        Ok((p, vec![]))
    }
}

/// Nothing to run: no program.
fn nonempty(p: Program) -> Vec<Program> {
    if p.phases.is_empty() {
        vec![]
    } else {
        vec![p]
    }
}

impl Frontend for DvsFrontend {
    fn describe(&self) -> String {
        let g = &self.dvs.geo;
        let unit = if self.dvs.p.cache.by_blocks { "blocks" } else { "chunks" };
        format!("dvs {}+{} chunk {}K seg {}K cache {} {unit}", g.data, g.k, g.chunk >> 10, g.cfg.zone_size >> 10, self.dvs.p.cache.capacity)
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
        let mut fg = self.take_health(h)?;
        let (p, bg) = if write {
            self.dvs.held = self.backlog.held(now_ns);
            self.write(offset, len, now_ns)?
        } else {
            self.read(offset, len, now_ns)?
        };
        fg.append(p);
        Ok(Staged { fg: nonempty(fg), bg })
    }
    fn idle_after_ns(&self) -> Option<u64> {
        self.dvs.p.idle_ns
    }
    fn idle(&mut self, now_ns: u64, h: &Health) -> Result<Vec<Program>, PlanError> {
        let mut p = self.take_health(h)?;
        let jobs: Vec<Job> = self.dvs.idle()?.into_iter().collect();
        p.append(self.jobs(&jobs)?);
        self.backlog.add(std::slice::from_ref(&p), now_ns, 0);
        Ok(nonempty(p))
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
            ("foreground gc resets".into(), s.fg_resets as f64),
            ("background gc resets".into(), s.bg_resets as f64),
            ("gc moved chunks".into(), s.gc_moved as f64),
        ]
    }
}
