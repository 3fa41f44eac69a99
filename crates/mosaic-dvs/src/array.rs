//! The real array: DVS on zoned member devices, storing real bytes.
//!
//! It runs the jobs of the same [`Dvs`] state machine the simulator runs,
//! one at a time, in the order they were made, each lowered into a
//! program by [`crate::program`] (the lowering the simulator's front end
//! uses) and run by one `mosaic_exec::Executor`, which also counts every
//! member's reads and writes (metadata, journal, open, rebuild and scrub
//! run as programs too):
//!
//! ```text
//!   job:  fills (old chunks; reconstruct via the SIT when a member failed)
//!     ──> chunk bytes = cached blocks over old bytes ──> parity per stripe (mosaic-ec,
//!         RS(N, k) with the absent data columns of a narrow stripe taken as zeros)
//!     ──> appends at each member's write pointer ──> flush members
//!     ──> log record on every working member, flush   (the write is acknowledged here)
//!     ──> zone resets of a GC's old segment
//! ```
//!
//! Writes are acknowledged once durable: with `cache_chunks = 0`
//! write-through (destaged before the call returns); otherwise appended to
//! a journal in the conventional zones of k + 1 members and held (as
//! blocks) in the block-counted write cache, destaged by the cache policy,
//! and replayed into the cache on open.  Destage and GC programs run on
//! the array's background thread (`array/destager.rs`), in plan order: a
//! journalled write does not wait for the destage it triggers.
//! Destaging the whole cache retires the journal (a log
//! record names the first live journal record); a ring journal
//! (`journal_ring`) is retired piecewise instead, early (before it is
//! full, [`MetaState::needs_room`]): the SSG holding its oldest live
//! record is destaged when needed, the retirement's log record queued
//! behind it on the destager, and the segments left dead are reused
//! once that record is durable.
//!
//! On open:
//!
//! ```text
//!   labels of the devices given (any order)
//!     ──> mosaic_format::fresh: pick_array, assemble       (the one freshness rule)
//!           another array's device, a replaced member, a stale member (event
//!           counter two behind), an older copy, wrong DVS config or zone
//!           geometry ──> not used, named in warnings()
//!     ──> the newest checkpoint with the longest unbroken log (members in slots)
//!     ──> the drives' write pointers:
//!           a member holding less than the tables say ──> stale (DVS's own
//!             evidence), failed, named in warnings()
//!           slots a crash appended but never logged ──> garbage
//!           spare segments a crash left written ──> reset
//!     ──> a fresh checkpoint on every member in service; the log restarts
//!     ──> a new session: the labels' event counter bumped in two rounds,
//!         with the member states found (missing, stale)
//! ```
//!
//! A member not used is recorded failed and never read (only its label
//! was).  The event counter goes up in two rounds over every member in
//! service whenever member states change: `fail`, `replace`, a rebuild
//! done, and every open, which starts a session (the labels name a new
//! one, so two copies of the array written apart are told apart by the
//! one freshness rule) and records the member states it found.  The labels also list
//! the members failed on record, so their devices are skipped quietly at
//! later opens (the one rule's `skip`): a stale device is named by the
//! open that finds it, not at every open after.
//!
//! Maintenance (see the crate README): `fail` records a member failed;
//! `replace` puts a new device in as `Rebuilding { done: 0 }`; `rebuild`
//! fills it SSG by SSG, logging its position, so it resumes after a stop;
//! `scrub_with` (or `scrub_start`/`scrub_step`/`scrub_finish`, SSG by SSG)
//! checks every stripe that still protects data, locates a
//! wrong column when k >= 2, and repairs by re-striping.

use std::collections::{BTreeMap, HashMap};
use std::io;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use mosaic_core::{DeviceIo, Dir, MemberState, Program, RebuildReport, ScrubAt, ScrubFinding, ScrubReport};
use mosaic_dev::zoned::{ZoneCond, ZonedFile};
use mosaic_dev::Member;
use mosaic_ec::Code;
use mosaic_exec::{Client, ExecError, Executor};

use crate::addr::{ChunkKey, DvsConfig, Geo};
use crate::engine::{Dvs, DvsParams, Job, ReadSrc};
use mosaic_format::fresh::{self, Assembled, Found};
use mosaic_map::ledger::Ledger;
use mosaic_format::label::{read_label, Label, LabelError, SLOT_SIZE};
use mosaic_format::scrub::ScrubRecord;
use uuid::Uuid;

use crate::meta::{self, decode_journal, journal_record_len, label_bytes, label_config, label_offset, MetaLayout, MetaState, MetaWrite, Record};
use crate::program::{self, Lower, Meta, Payload};
use crate::tables::{Stripe, Tables};
use crate::DvsError;

mod correct;
mod destager;
mod failing;
mod held;
mod hot;
mod lost;
mod spare;
use destager::Destager;
use failing::failures_error;
pub use held::BlockPool;
pub use hot::HotProgress;
use held::{Held, Lent};
use mosaic_core::cache::KeyMap;
pub use spare::SpareInfo;

/// A write for [`DvsArray::write_prepared`], with what its writer did
/// for it beforehand, on its own core.
#[derive(Debug, Clone)]
pub struct Prepared<'a> {
    /// Logical byte offset.
    pub offset: u64,
    /// The bytes.
    pub data: &'a [u8],
    /// The bytes' checksum ([`mosaic_format::frame::checksum`]), when taken.
    pub sum: Option<u32>,
    /// The same bytes already in a cache block buffer, when `data` is one
    /// whole block ([`BlockPool::block_for`]): the cache holds it, no copy.
    pub block: Option<Arc<[u8]>>,
}

impl<'a> Prepared<'a> {
    /// A write with nothing done beforehand.
    pub fn bare(offset: u64, data: &'a [u8]) -> Prepared<'a> {
        Prepared { offset, data, sum: None, block: None }
    }
}

/// A decoded journal record: (seq, offset, data, bytes it takes).
type JournalRec = (u64, u64, Vec<u8>, usize);

/// A host-managed zoned member device.
pub trait ZonedMember: Send + Sync {
    fn describe(&self) -> String;
    fn size(&self) -> u64;
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()>;
    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()>;
    /// See [`mosaic_dev::Member::write_parts_at`] (a log append).
    fn write_parts_at(&self, parts: &[&[u8]], offset: u64) -> io::Result<()> {
        match parts {
            [one] => self.write_at(one, offset),
            _ => self.write_at(&parts.concat(), offset),
        }
    }
    fn flush(&self) -> io::Result<()>;
    fn reset_zone(&self, zone: u64) -> io::Result<()>;
    /// Write pointer (byte offset) of a sequential zone.
    fn write_pointer(&self, zone: u64) -> Option<u64>;
    fn zone_size(&self) -> u64;
    fn zone_count(&self) -> u64;
    fn conventional_zones(&self) -> u64;
    /// See [`mosaic_dev::Member::cheap_flush`].
    fn cheap_flush(&self) -> bool {
        false
    }
    /// See [`mosaic_dev::Member::view`]: the bytes a read would copy,
    /// lent in place (none by default).
    fn view(&self, _offset: u64, _len: usize) -> Option<&[u8]> {
        None
    }
    /// See [`mosaic_dev::Member::write_in_place`] (none by default).
    fn write_in_place(&self, _offset: u64, _len: u64, _fill: &mut dyn FnMut(&mut [u8]) -> io::Result<()>) -> Option<io::Result<()>> {
        None
    }
}

impl ZonedMember for ZonedFile {
    fn describe(&self) -> String {
        Member::describe(self)
    }
    fn size(&self) -> u64 {
        Member::size(self)
    }
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        Member::read_at(self, buf, offset)
    }
    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        Member::write_at(self, buf, offset)
    }
    fn write_parts_at(&self, parts: &[&[u8]], offset: u64) -> io::Result<()> {
        Member::write_parts_at(self, parts, offset)
    }
    fn flush(&self) -> io::Result<()> {
        Member::flush(self)
    }
    fn reset_zone(&self, zone: u64) -> io::Result<()> {
        ZonedFile::reset_zone(self, zone)
    }
    fn write_pointer(&self, zone: u64) -> Option<u64> {
        ZonedFile::write_pointer(self, zone)
    }
    fn zone_size(&self) -> u64 {
        ZonedFile::zone_size(self)
    }
    fn zone_count(&self) -> u64 {
        ZonedFile::zone_count(self)
    }
    fn conventional_zones(&self) -> u64 {
        self.report_zones().iter().filter(|z| z.cond == ZoneCond::Conventional).count() as u64
    }
    fn cheap_flush(&self) -> bool {
        Member::cheap_flush(self)
    }
    fn view(&self, offset: u64, len: usize) -> Option<&[u8]> {
        Member::view(self, offset, len)
    }
    fn write_in_place(&self, offset: u64, len: u64, fill: &mut dyn FnMut(&mut [u8]) -> io::Result<()>) -> Option<io::Result<()>> {
        Member::write_in_place(self, offset, len, fill)
    }
}

/// A power cut for tests: operations on the wrapped members (all sharing
/// one budget) succeed until the budget is spent; from then on every
/// operation fails and nothing reaches the device, like a machine that
/// lost power.  Writes the device itself refuses (off the write pointer)
/// are counted in `refusals`.  With `unflushed`, the cut also tears every
/// write not yet flushed: its first sector goes back to what it was (the
/// device persisted the write's sectors out of order).  With `cheap`,
/// it says its flushes are free when the wrapped member's are, so the
/// executor fuses a destage's parity with its appends
/// (`mosaic_exec::fusable`), each piece of a write then an operation on
/// the budget; it never lends its bytes.  With `in_place` too, it takes
/// writes in place when the wrapped member does, each one operation on
/// the budget (spent before anything is written).
pub struct PowerCut {
    pub inner: Arc<dyn ZonedMember>,
    pub budget: Arc<AtomicI64>,
    pub refusals: Arc<AtomicU64>,
    pub unflushed: Option<Arc<Unflushed>>,
    pub cheap: bool,
    pub in_place: bool,
}

/// The writes of a set of [`PowerCut`] members not yet flushed, each
/// with its first sector as it was before; `torn`: how many the cut tore.
#[derive(Default)]
pub struct Unflushed {
    writes: std::sync::Mutex<Vec<(Arc<dyn ZonedMember>, u64, Vec<u8>)>>,
    pub torn: AtomicU64,
}

impl PowerCut {
    /// A member on a budget shared with others, tearing nothing.
    pub fn new(inner: Arc<dyn ZonedMember>, budget: Arc<AtomicI64>, refusals: Arc<AtomicU64>) -> PowerCut {
        PowerCut { inner, budget, refusals, unflushed: None, cheap: false, in_place: false }
    }
    fn tick(&self) -> io::Result<()> {
        match self.budget.fetch_sub(1, Ordering::SeqCst) {
            b if b > 0 => Ok(()),
            b => {
                if b == 0 {
                    self.tear();
                }
                Err(io::Error::other("power cut"))
            }
        }
    }
    fn count<T>(&self, r: io::Result<T>) -> io::Result<T> {
        if r.is_err() {
            self.refusals.fetch_add(1, Ordering::SeqCst);
        }
        r
    }
    /// The power went: every write not flushed loses its first sector,
    /// latest first (where the device lets it: not an append).
    fn tear(&self) {
        let Some(u) = &self.unflushed else { return };
        let writes = std::mem::take(&mut *u.writes.lock().unwrap_or_else(|e| e.into_inner()));
        for (m, offset, old) in writes.into_iter().rev() {
            if m.write_at(&old, offset).is_ok() {
                u.torn.fetch_add(1, Ordering::SeqCst);
            }
        }
    }
    /// Before a write at `offset`: keep its first sector as it is.
    fn note(&self, offset: u64) {
        let Some(u) = &self.unflushed else { return };
        let mut old = vec![0u8; mosaic_format::frame::SECTOR];
        if self.inner.read_at(&mut old, offset).is_ok() {
            u.writes.lock().unwrap_or_else(|e| e.into_inner()).push((self.inner.clone(), offset, old));
        }
    }
    /// After a flush: this member's writes are durable.
    fn flushed(&self) {
        let Some(u) = &self.unflushed else { return };
        u.writes.lock().unwrap_or_else(|e| e.into_inner()).retain(|(m, ..)| !Arc::ptr_eq(m, &self.inner));
    }
}

impl ZonedMember for PowerCut {
    fn describe(&self) -> String {
        self.inner.describe()
    }
    fn size(&self) -> u64 {
        self.inner.size()
    }
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        self.tick()?;
        self.inner.read_at(buf, offset)
    }
    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        self.tick()?;
        self.note(offset);
        let r = self.inner.write_at(buf, offset);
        self.count(r)
    }
    fn write_parts_at(&self, parts: &[&[u8]], offset: u64) -> io::Result<()> {
        self.tick()?;
        self.note(offset);
        let r = self.inner.write_parts_at(parts, offset);
        self.count(r)
    }
    fn flush(&self) -> io::Result<()> {
        self.tick()?;
        self.inner.flush()?;
        self.flushed();
        Ok(())
    }
    fn reset_zone(&self, zone: u64) -> io::Result<()> {
        self.tick()?;
        let r = self.inner.reset_zone(zone);
        self.count(r)
    }
    fn write_pointer(&self, zone: u64) -> Option<u64> {
        self.inner.write_pointer(zone)
    }
    fn zone_size(&self) -> u64 {
        self.inner.zone_size()
    }
    fn zone_count(&self) -> u64 {
        self.inner.zone_count()
    }
    fn conventional_zones(&self) -> u64 {
        self.inner.conventional_zones()
    }
    fn cheap_flush(&self) -> bool {
        self.cheap && self.inner.cheap_flush()
    }
    fn write_in_place(&self, offset: u64, len: u64, fill: &mut dyn FnMut(&mut [u8]) -> io::Result<()>) -> Option<io::Result<()>> {
        if !self.in_place {
            return None;
        }
        if let Err(e) = self.tick() {
            return Some(Err(e));
        }
        self.note(offset);
        // Only the device's own refusal counts, not the caller's fill
        // failing (another member of the same pass refusing).
        let mut filled = None;
        let r = self.inner.write_in_place(offset, len, &mut |m| {
            let r = fill(m);
            filled = Some(r.is_ok());
            r
        })?;
        Some(if filled.is_some() { r } else { self.count(r) })
    }
}

/// A zoned member as a member of the executor, which names a zone by its
/// first byte.
struct AsMember(Arc<dyn ZonedMember>);

impl Member for AsMember {
    fn describe(&self) -> String {
        self.0.describe()
    }
    fn size(&self) -> u64 {
        self.0.size()
    }
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        self.0.read_at(buf, offset)
    }
    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        self.0.write_at(buf, offset)
    }
    fn write_parts_at(&self, parts: &[&[u8]], offset: u64) -> io::Result<()> {
        self.0.write_parts_at(parts, offset)
    }
    fn flush(&self) -> io::Result<()> {
        self.0.flush()
    }
    fn cheap_flush(&self) -> bool {
        self.0.cheap_flush()
    }
    fn view(&self, offset: u64, len: usize) -> Option<&[u8]> {
        self.0.view(offset, len)
    }
    fn write_in_place(&self, offset: u64, len: u64, fill: &mut dyn FnMut(&mut [u8]) -> io::Result<()>) -> Option<io::Result<()>> {
        self.0.write_in_place(offset, len, fill)
    }
    fn reset_zone(&self, offset: u64) -> io::Result<()> {
        let z = self.0.zone_size();
        if z == 0 || offset % z != 0 {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, format!("zone reset at byte {offset}: not a zone start (zones of {z} bytes)")));
        }
        self.0.reset_zone(offset / z)
    }
}

fn as_member(d: &Arc<dyn ZonedMember>) -> Arc<dyn Member> {
    Arc::new(AsMember(d.clone()))
}

/// The executor of an array on `members`.
fn executor(members: &[Option<Arc<dyn ZonedMember>>]) -> Arc<Executor> {
    Arc::new(Executor::new(members.iter().map(|m| m.as_ref().map(as_member)).collect(), 0))
}

/// Run `p` on `exec`: its kept buffers, or the members' errors as one.
fn run_on(exec: &Executor, p: &Program) -> Result<Vec<Vec<u8>>, DvsError> {
    run_with(exec, p, Client::None)
}

/// [`run_on`] with the client buffer `client` (its `Buf::Input`s).
fn run_with(exec: &Executor, p: &Program, client: Client<'_>) -> Result<Vec<Vec<u8>>, DvsError> {
    exec.run(p, client, None).map_err(exec_error)
}

/// The executor's error as the array's: members' errors as one I/O error
/// of the first one's kind.
fn exec_error(e: ExecError) -> DvsError {
    match e {
        ExecError::Device(f) => failures_error(&f),
        other => DvsError::Other(other.to_string()),
    }
}

/// Read `len` bytes at `offset` of member `m`.
fn read_one(exec: &Executor, m: usize, offset: u64, len: u64) -> Result<Vec<u8>, DvsError> {
    run_on(exec, &program::reads(&[(m, offset, len)]))?.pop().ok_or_else(|| DvsError::Other("a read returned nothing".into()))
}

/// Whether a read of `members` can fail: a member that lends its bytes
/// from a mapping is read from memory, never with EIO, so with every
/// member mapped, jobs need no other sources for their fills
/// ([`Dvs::alternates`], array/correct.rs).
fn reads_can_fail(members: &[Option<Arc<dyn ZonedMember>>]) -> bool {
    members.iter().flatten().any(|d| d.view(0, 1).is_none())
}

/// The sequential zones of `d` holding data, as (member, zone's first byte).
fn written_zones(cfg: &DvsConfig, m: usize, d: &dyn ZonedMember) -> Vec<(usize, u64)> {
    (cfg.conventional..cfg.zones).filter(|&z| d.write_pointer(z).is_some_and(|wp| wp > z * cfg.zone_size)).map(|z| (m, z * cfg.zone_size)).collect()
}

/// What `info` reports.
#[derive(Debug, Clone, serde::Serialize)]
pub struct ArrayInfo {
    pub uuid: Uuid,
    /// The labels' event counter.
    pub events: u64,
    pub config: DvsConfig,
    pub capacity: u64,
    pub ssgs: u32,
    pub logical_chunks_per_ssg: u32,
    pub failed: Vec<usize>,
    pub member_list: Vec<MemberInfo>,
    pub live_ssgs: usize,
    pub valid_chunks: u64,
    pub log_seq: u64,
    /// The hot spares present.
    pub spares: Vec<SpareInfo>,
    /// Creation time, seconds since the Unix epoch.
    pub created: u64,
    /// The last scrub a writable open was asked for ([`DvsArray::record_scrub`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_scrub: Option<ScrubRecord>,
    /// Member UUIDs this array replaced: a device carrying one is its
    /// former member.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub replaced: Vec<Uuid>,
    /// The hot replace in progress: its member and its copy's progress.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hot_replace: Option<HotProgress>,
}

/// A scrub run in steps: [`DvsArray::scrub_start`], then
/// [`DvsArray::scrub_step`] until it says none is left (or the caller
/// stops early), then [`DvsArray::scrub_finish`].
#[derive(Debug)]
pub struct ScrubCursor {
    live: Vec<u32>,
    next: usize,
    /// Stripes looked at, of the live SSGs' `total`.
    pub done: u64,
    pub total: u64,
    located: usize,
    rep: ScrubReport,
    repair: bool,
    t0: std::time::Instant,
}

/// What one [`DvsArray::rebuild_step`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RebuildStep {
    pub members: Vec<usize>,
    /// The SSG the step started at, and the position after it.
    pub from: u64,
    pub done: u64,
    pub total: u64,
    pub bytes_written: u64,
    /// Bytes the step recorded lost (a source it could not read where
    /// the code spared no column, array/lost.rs).
    pub lost_bytes: u64,
}

/// A DVS array on zoned members.
pub struct DvsArray {
    geo: Geo,
    ml: MetaLayout,
    /// The array's identity: its UUID, each member's, creation time (the
    /// authoritative label at open; its event counter is `meta.events`).
    label: Label,
    /// The last scrub's record, which every label write carries.
    last_scrub: Option<ScrubRecord>,
    /// Member UUIDs replaced, which every label write carries
    /// ([`meta::DvsPolicy::replaced`]).
    replaced: Vec<Uuid>,
    /// Logical bytes lost, which every label write carries
    /// ([`meta::DvsPolicy::lost`], array/lost.rs).
    lost: Vec<mosaic_format::lost::LostRange>,
    members: Vec<Option<Arc<dyn ZonedMember>>>,
    /// For each member, which of the devices given to open serves it.
    sources: Vec<Option<usize>>,
    /// What open found worth telling a user: devices not used and why,
    /// members found stale or missing.
    warnings: Vec<String>,
    dvs: Dvs,
    /// Bytes of cached chunks: whole chunks (moved to the programs that
    /// destage them, no copy) or just their cached blocks.
    bytes: KeyMap<ChunkKey, Held>,
    /// Block buffers lent to destages, reused once they are done.
    lent: Lent,
    code: Code,
    /// Log, checkpoint and journal positions and the durable tables.
    meta: MetaState,
    poisoned: Option<String>,
    /// Whether what stopped it can be mended ([`failing`]: members whose
    /// writes failed are failed, bytes nothing can read set aside, and
    /// the array goes on).
    stop: failing::Stop,
    /// Members failed automatically since open, and why.
    auto_failed: Vec<(usize, String)>,
    /// The kind of job running (still set after it failed part-way).
    current: Option<crate::engine::JobKind>,
    /// Runs every program on the members; counts their reads and writes.
    exec: Arc<Executor>,
    /// Runs destage and GC programs off the writer's path, one at a time.
    destager: Destager,
    /// For each ring journal segment freed by a retirement that may still
    /// be queued, the destager's ticket of that retirement (0: free).
    freeing: Vec<u64>,
    /// The journal records of the write being journalled, encoded here
    /// (the buffer kept from one write to the next: no allocation each).
    jbuf: Vec<u8>,
    /// Reads issued outside the executor: labels read to learn a
    /// device's member index (open, replace).
    side_io: Mutex<Vec<DeviceIo>>,
    /// Hot spares present, in the order the labels list them.
    spares: Vec<spare::SpareDev>,
    /// The hot replace in progress (its twin in the member's slot).
    hot: Option<hot::Hot>,
    /// Stripes a rebuild could not fully decode, written again once it
    /// is done ([`lost`]).
    lossy_stripes: Vec<(u32, u32, Stripe, usize)>,
    /// Each member slot's read errors ([`correct`]).
    read_errors: Vec<correct::ReadErrors>,
    /// Whether a chunk a member could not read is written again (a
    /// writable open) or only decoded ([`DvsArray::set_read_correction`]).
    rewrite_unreadable: bool,
}

/// What [`DvsArray::io_counters`] reports.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct IoCounts {
    pub reads: u64,
    pub writes: u64,
    pub read_bytes: u64,
    pub write_bytes: u64,
}

/// One member in [`ArrayInfo`].
#[derive(Debug, Clone, serde::Serialize)]
pub struct MemberInfo {
    pub index: usize,
    /// The identity the labels expect in this slot.
    pub uuid: Uuid,
    pub state: MemberState,
    pub present: bool,
    pub describe: String,
    /// Reads the member failed since open; of them, those decoded from
    /// the others and written again ([`correct`]).
    pub read_errors: u64,
    pub corrected_reads: u64,
}


/// A DVS scrub finding: SSG `lsn`, SIT row `row`, and the member found
/// holding the wrong column (k >= 2) if any.
fn scrub_finding(lsn: u32, row: usize, member: Option<usize>) -> ScrubFinding {
    let at = ScrubAt::Extent { group: lsn as u64, row: row as u64 };
    let detail = match member {
        Some(m) => format!("{at}: parity mismatch; member {m} holds the wrong column"),
        None => format!("{at}: parity mismatch; the wrong column cannot be located with one redundant column"),
    };
    ScrubFinding { at, member, detail }
}

/// The policy of a real array: write-through, or a block-granular write
/// cache of `cache_chunks` chunks' worth of blocks (no read cache: reads
/// overlay the cached bytes).  A small write holds one block of the
/// budget; the cache destages only when full (the SSG holding the most
/// blocks, whole) or when the journal is full (everything), so a chunk
/// rewritten by a destage carries every block written to it meanwhile.
/// Reference counts never halve (a real array has no policy clock), so
/// the policy's decisions do not depend on time: a replay front end with
/// these parameters makes the same jobs whatever its clock says.
pub fn array_params(cfg: &DvsConfig) -> DvsParams {
    let mut p = if cfg.cache_chunks == 0 {
        DvsParams::write_through()
    } else {
        let mut p = DvsParams::cached(cfg.cache_chunks as usize);
        let per_chunk = (cfg.chunk / cfg.block.max(1)).max(1) as usize;
        p.cache = crate::cache::CacheParams::blocks((cfg.cache_chunks as usize).saturating_mul(per_chunk));
        p.max_batch = usize::MAX;
        p.read_cache_chunks = 0;
        p.idle_ns = None;
        p
    };
    p.cache.halve_ns = 0;
    p
}

/// Whether a member in `state` holds the data of SSG `lsn` (and so takes
/// its appends): active members hold every SSG, a member being rebuilt
/// those below its rebuild position, a failed member none.
fn holds(state: &MemberState, lsn: u32) -> bool {
    match state {
        MemberState::Active => true,
        MemberState::Rebuilding { done } => (lsn as u64) < *done,
        MemberState::Failed => false,
    }
}

fn check_member(cfg: &DvsConfig, i: usize, d: &dyn ZonedMember) -> Result<(), DvsError> {
    check_zones(cfg, &format!("member {i}"), d)
}

/// Whether `d` (`what`: how to name it) has the zone geometry of `cfg`.
fn check_zones(cfg: &DvsConfig, what: &str, d: &dyn ZonedMember) -> Result<(), DvsError> {
    if d.zone_size() != cfg.zone_size || d.zone_count() != cfg.zones || d.conventional_zones() != cfg.conventional {
        return Err(DvsError::Geometry(format!(
            "{what} ({}): {} zones of {} bytes with {} conventional; the array needs {} zones of {} bytes with {} conventional",
            d.describe(),
            d.zone_count(),
            d.zone_size(),
            d.conventional_zones(),
            cfg.zones,
            cfg.zone_size,
            cfg.conventional
        )));
    }
    Ok(())
}

/// Now, in seconds since the Unix epoch (label times).
fn now_secs() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

/// The label of member `m` of the array `identity` names, at `events`,
/// with the members `failed` on record, the hot `spares` and the last
/// scrub's record, in `identity`'s session.
fn member_label(identity: &Label, policy: &meta::DvsPolicy, m: usize, events: u64) -> Label {
    let l = meta::label(policy, identity.array_uuid, &identity.member_uuids, m, events, identity.created);
    Label { session: identity.session, prev_session: identity.prev_session, ..l }
}

/// A device given to open: its place in the list, and its label reads.
struct Given {
    at: usize,
    dev: Arc<dyn ZonedMember>,
    io: DeviceIo,
}

/// The label of `d` (read through the one label format), and the reads
/// it took.
fn counted_label(d: &dyn ZonedMember) -> (io::Result<Result<Label, LabelError>>, DeviceIo) {
    let mut io = DeviceIo::default();
    let l = read_label(d.size(), &mut |buf: &mut [u8], off| {
        io.add(Dir::Read, buf.len() as u64);
        d.read_at(buf, off)
    });
    (l, io)
}

/// The DVS labels of `devs`; a device without one is named in `warnings`.
fn dvs_labels(devs: Vec<Arc<dyn ZonedMember>>, warnings: &mut Vec<String>) -> Vec<Found<Given>> {
    let mut found = Vec::new();
    for (at, dev) in devs.into_iter().enumerate() {
        let name = dev.describe();
        let (l, io) = counted_label(dev.as_ref());
        match l {
            Ok(Ok(label)) if label.kind == meta::LABEL_KIND => found.push(Found { label, name, dev: Given { at, dev, io } }),
            Ok(Ok(l)) => warnings.push(format!("{name}: a member of a {} array, not of a DVS array; not used", l.kind)),
            Ok(Err(LabelError::None)) => warnings.push(format!("{name}: no label (not a DVS member); not used")),
            Ok(Err(LabelError::Corrupt(e))) => warnings.push(format!("{name}: damaged label ({e}); not used")),
            Err(e) => warnings.push(format!("{name}: cannot read its label: {e}; not used")),
        }
    }
    found
}

/// DVS's own reasons a device cannot serve as the member its label names:
/// another DVS configuration, or zones unlike the array's.
fn unusable(f: &Found<Given>, auth: &Label) -> Option<String> {
    let cfg = label_config(auth).ok()?;
    if label_config(&f.label).ok().as_ref() != Some(&cfg) {
        return Some(format!("{}: its DVS configuration differs from the array's; not used", f.name));
    }
    check_member(&cfg, f.label.member_index, f.dev.dev.as_ref()).err().map(|e| format!("{}: {e}; not used", f.name))
}

/// Member `i` is failed on the record of the DVS label `l` (the one
/// freshness rule's `failed`, [`mosaic_format::fresh::Kind`]).
/// Whether `f` is a member this array replaced (the authoritative label
/// `auth` lists it): passed over at open without a word.
fn former_member<T>(f: &Found<T>, auth: &Label) -> bool {
    meta::label_policy(auth).is_ok_and(|p| p.replaced.contains(&f.label.member_uuid))
}

pub fn failed_on_record(l: &Label, i: usize) -> bool {
    meta::label_policy(l).is_ok_and(|p| p.failed.contains(&i))
}

/// Whether the DVS array of the label `l` can be served from the slots
/// `filled` (those failed on record do not count): its parity covers the
/// rest (the one rule's `serves`).
pub fn serves(l: &Label, filled: &[bool]) -> bool {
    let Ok(p) = meta::label_policy(l) else { return false };
    let present = (0..p.config.members).filter(|i| filled.get(*i).copied().unwrap_or(false) && !p.failed.contains(i)).count();
    present + p.config.parity >= p.config.members
}

impl DvsArray {
    /// Create an array on `members` (erasing them).
    pub fn create(members: Vec<Arc<dyn ZonedMember>>, cfg: DvsConfig) -> Result<DvsArray, DvsError> {
        if members.len() != cfg.members {
            return Err(DvsError::Geometry(format!("{} member devices given for a {}-member array", members.len(), cfg.members)));
        }
        let geo = Geo::new(cfg.clone())?;
        let ml = MetaLayout::new(&geo)?;
        for (i, d) in members.iter().enumerate() {
            check_member(&cfg, i, d.as_ref())?;
        }
        let member_uuids: Vec<Uuid> = (0..cfg.members).map(|_| Uuid::new_v4()).collect();
        let created = now_secs();
        let policy = meta::DvsPolicy { config: cfg.clone(), failed: vec![], spares: vec![], role: String::new(), last_scrub: None, replaced: vec![], hot: None, lost: vec![] };
        let label = Label { session: Uuid::new_v4(), ..meta::label(&policy, Uuid::new_v4(), &member_uuids, 0, 0, created) };
        let tables = Tables::new(geo.clone());
        let (meta, ck) = MetaState::created(ml, tables.clone())?;
        let ck = ck.bytes;
        let exec = executor(&members.iter().cloned().map(Some).collect::<Vec<_>>());
        let ids: Vec<usize> = (0..members.len()).collect();
        let resets: Vec<(usize, u64)> = members.iter().enumerate().flat_map(|(i, d)| written_zones(&cfg, i, d.as_ref())).collect();
        // Label slot 1 is cleared: an older label there must not win.
        let slots = ids
            .iter()
            .flat_map(|&i| [(i, ml.slot_offset(1), vec![0u8; ml.slot as usize]), (i, ml.slot_offset(0), ck.clone()), (i, SLOT_SIZE, vec![0u8; ml.label_len as usize])])
            .collect();
        let labels = ids.iter().map(|&i| Ok((i, label_offset(0), label_bytes(&member_label(&label, &policy, i, 0), ml.label_len)?))).collect::<Result<_, DvsError>>()?;
        run_on(&exec, &program::format(&resets, &ids, (ml.log_start, ml.journal_end), slots, labels))?;
        let code = Code::new(geo.data, geo.k).map_err(|e| DvsError::Geometry(e.to_string()))?;
        Ok(DvsArray {
            // Jobs carry their fills' other sources where a read can fail (array/correct.rs).
            dvs: Dvs { alternates: reads_can_fail(&members.iter().cloned().map(Some).collect::<Vec<_>>()), ..Dvs::with_tables(tables.clone(), array_params(&cfg)) },
            meta,
            ml,
            label,
            last_scrub: None,
            replaced: Vec::new(),
            lost: Vec::new(),
            sources: (0..members.len()).map(Some).collect(),
            warnings: Vec::new(),
            members: members.into_iter().map(Some).collect(),
            bytes: KeyMap::default(),
            lent: Lent::default(),
            destager: Destager::for_array(exec.clone(), geo.clone(), code.clone()),
            freeing: Vec::new(),
            jbuf: Vec::new(),
            code,
            poisoned: None,
            stop: Default::default(),
            auto_failed: Vec::new(),
            current: None,
            exec,
            side_io: Mutex::new(vec![DeviceIo::default(); cfg.members]),
            spares: Vec::new(),
            hot: None,
            read_errors: vec![Default::default(); cfg.members],
            lossy_stripes: Vec::new(),
            rewrite_unreadable: true,
            geo,
        })
    }

    /// Open an array from its members in any order; missing members are
    /// `None` (failed) or simply absent.
    pub fn open(devs: Vec<Arc<dyn ZonedMember>>) -> Result<DvsArray, DvsError> {
        if devs.is_empty() {
            return Err(DvsError::Other("no member devices given".into()));
        }
        let mut warnings = Vec::new();
        let found = dvs_labels(devs, &mut warnings);
        // Hot spares are set aside before the one freshness rule: they
        // hold no data, so they can never be stale.
        let (spares, found): (Vec<_>, Vec<_>) = found.into_iter().partition(|f| meta::label_policy(&f.label).is_ok_and(|p| p.is_spare()));
        // So are a paused hot replace's new drives (role replacement).
        let (replacements, found): (Vec<_>, Vec<_>) = found.into_iter().partition(|f| meta::label_policy(&f.label).is_ok_and(|p| p.is_replacement()));
        let found = fresh::pick_array(found, &mut warnings).map_err(DvsError::Other)?;
        // Members failed on record (as the authoritative label says) are
        // not used until replaced: the one rule's `failed`.
        let kind = fresh::Kind { failed: &failed_on_record, own: &unusable, serves: &serves, retired: &former_member };
        let Assembled { auth, slots, mut warnings } = fresh::assemble(found, warnings, &kind).map_err(DvsError::Other)?;
        let policy = meta::label_policy(&auth)?;
        let (failed, cfg) = (policy.failed.clone(), policy.config.clone());
        let geo = Geo::new(cfg.clone())?;
        let ml = MetaLayout::new(&geo)?;
        let spares = spare::attach(spares, &auth, &mut warnings);
        let mut members: Vec<Option<Arc<dyn ZonedMember>>> = vec![None; cfg.members];
        let mut side_io = vec![DeviceIo::default(); cfg.members];
        let mut sources = vec![None; cfg.members];
        for (i, slot) in slots.into_iter().enumerate() {
            let Some((_, d)) = slot else { continue };
            side_io[i] = d.io; // the label read above
            sources[i] = Some(d.at);
            members[i] = Some(d.dev);
        }
        // A paused hot replace's twin goes in before anything is written.
        let hot = hot::attach(replacements, &auth, &mut members, &mut warnings);
        let exec = executor(&members);
        let present = members.iter().filter(|m| m.is_some()).count();
        if present + cfg.parity < cfg.members {
            let mut whys = warnings.clone();
            whys.extend(failed.iter().map(|m| format!("member {m} is failed on record until replaced")));
            let why = if whys.is_empty() { String::new() } else { format!(" ({})", whys.join("; ")) };
            return Err(DvsError::Other(format!("only {present} of {} members present; at most {} may be missing{why}", cfg.members, cfg.parity)));
        }
        // The newest checkpoint with the longest log, over all members.
        let mut best: Option<(Ledger, Tables)> = None;
        for i in (0..cfg.members).filter(|&i| members[i].is_some()) {
            // Every member keeps the metadata: a copy one cannot read is
            // passed over (the next checkpoint writes it again).
            let read = run_on(&exec, &program::reads(&[(i, ml.slot_offset(0), ml.slot), (i, ml.slot_offset(1), ml.slot)])).and_then(|slots| Ok((slots, read_one(&exec, i, ml.log_start, ml.log_end - ml.log_start)?)));
            let (slots, log) = match read {
                Ok(x) => x,
                Err(e) => {
                    warnings.push(format!("member {i}: its copy of the metadata cannot be read ({e}); the other members' are used"));
                    continue;
                }
            };
            let Some((ledger, t)) = meta::recover(&ml, &geo, [&slots[0], &slots[1]], &log)? else { continue };
            if best.as_ref().is_none_or(|b| ledger.seq > b.0.seq) {
                best = Some((ledger, t));
            }
        }
        let (ledger, mut tables) = best.ok_or_else(|| DvsError::Corrupt("no valid checkpoint on any member".into()))?;
        // Member states: what the metadata records, then what the drives
        // say.  A missing member fails; a member holding less than the
        // tables say in a zone it should hold missed writes: stale, failed.
        // Failures found here are recorded by the checkpoint below, so a
        // member that fails once stays failed until it is replaced.
        let mut states = tables.member_state.clone();
        for (m, st) in states.iter_mut().enumerate() {
            if members[m].is_none() && !matches!(st, MemberState::Failed) {
                warnings.push(format!("member {m}: no usable device; it is failed until `mosaic replace --member {m} --drive PATH` rebuilds it"));
                *st = MemberState::Failed;
            }
        }
        for lsn in 0..geo.ssgs {
            let zone = geo.zone_of(tables.gtt[lsn as usize]);
            for (m, d) in members.iter().enumerate() {
                let Some(d) = d.as_ref().filter(|_| holds(&states[m], lsn)) else { continue };
                let wp = d.write_pointer(zone).unwrap_or(0);
                let dev = (wp.saturating_sub(zone * geo.cfg.zone_size)).div_ceil(geo.chunk) as u32;
                if dev < tables.get(lsn).map(|s| s.wp[m]).unwrap_or(0) {
                    warnings.push(format!(
                        "{}: member {m} is stale (it holds less of SSG {lsn} than the metadata records): it missed writes, so it is failed and never read; \
                         `mosaic replace --member {m} --drive PATH` rebuilds it",
                        d.describe()
                    ));
                    states[m] = MemberState::Failed;
                }
            }
        }
        let out = states.iter().filter(|s| !matches!(s, MemberState::Active)).count();
        if out > cfg.parity {
            return Err(DvsError::Corrupt(format!("{out} members are failed, missing, being rebuilt or hold less than the metadata records; at most {} may", cfg.parity)));
        }
        // Slots a crash appended but never logged become garbage.
        for lsn in 0..geo.ssgs {
            let p = tables.gtt[lsn as usize];
            let zone = geo.zone_of(p);
            for (m, d) in members.iter().enumerate() {
                let Some(d) = d.as_ref().filter(|_| holds(&states[m], lsn)) else { continue };
                let wp = d.write_pointer(zone).ok_or_else(|| DvsError::Corrupt(format!("member {m}: zone {zone} is not sequential")))?;
                let dev = (wp - zone * geo.cfg.zone_size).div_ceil(geo.chunk) as u32;
                let have = tables.get(lsn).map(|s| s.wp[m]).unwrap_or(0);
                if dev > have {
                    tables.get_mut(lsn).wp[m] = dev;
                }
            }
        }
        // Spare segments a crash left written are reset.
        let mut resets = Vec::new();
        for p in tables.spares() {
            let zone = geo.zone_of(p);
            for (m, d) in members.iter().enumerate() {
                let Some(d) = d.as_ref().filter(|_| !matches!(states[m], MemberState::Failed)) else { continue };
                if d.write_pointer(zone).is_some_and(|wp| wp > zone * geo.cfg.zone_size) {
                    resets.push((m, zone * geo.cfg.zone_size));
                }
            }
        }
        if !resets.is_empty() {
            run_on(&exec, &program::format(&resets, &[], (0, 0), vec![], vec![]))?;
        }
        tables.member_state = states.clone();
        let code = Code::new(geo.data, geo.k).map_err(|e| DvsError::Geometry(e.to_string()))?;
        let mut dvs = Dvs::with_tables(tables.clone(), array_params(&cfg));
        dvs.alternates = reads_can_fail(&members);
        dvs.healthy = states.iter().map(|s| matches!(s, MemberState::Active)).collect();
        let jseq = tables.journal_from;
        let mut meta = MetaState::new(ml, tables, ledger, jseq);
        meta.events = auth.events;
        let mut a = DvsArray {
            dvs,
            meta,
            ml,
            last_scrub: policy.last_scrub,
            replaced: policy.replaced,
            lost: policy.lost,
            label: auth,
            sources,
            warnings,
            members,
            bytes: KeyMap::default(),
            lent: Lent::default(),
            destager: Destager::for_array(exec.clone(), geo.clone(), code.clone()),
            freeing: Vec::new(),
            jbuf: Vec::new(),
            code,
            poisoned: None,
            stop: Default::default(),
            auto_failed: Vec::new(),
            current: None,
            exec,
            side_io: Mutex::new(side_io),
            spares,
            hot,
            read_errors: vec![Default::default(); cfg.members],
            lossy_stripes: Vec::new(),
            rewrite_unreadable: true,
            geo,
        };
        // The slot out of service: the paused copy is dropped (the labels
        // stop recording it at the session's label rounds below).
        if a.hot.as_ref().is_some_and(|h| !matches!(a.state(h.member()), MemberState::Active)) {
            a.warnings.push("the paused hot replace was dropped: its member is out of service".into());
            a.hot_forget();
        }
        a.checkpoint()?;
        a.start_session()?;
        a.replay_journal()?;
        Ok(a)
    }

    /// Every open starts a session ([`mosaic_format::fresh`]): the labels,
    /// in two rounds, name a new one (and the one before), so members of
    /// two copies of the array written apart are never taken for one
    /// array's, though their event counters agree.  The same rounds record
    /// the member states the open found.
    fn start_session(&mut self) -> Result<(), DvsError> {
        self.label.prev_session = self.label.session;
        self.label.session = Uuid::new_v4();
        self.label_rounds()
    }

    /// Bump the event counter in two rounds, each writing the label of
    /// every member in service (and flushing it) before the next starts:
    /// a member out of service is then two events behind, stale.
    fn label_rounds(&mut self) -> Result<(), DvsError> {
        let members = self.meta_members();
        let policy = self.policy(self.failed_on_record());
        for _ in 0..2 {
            let (offset, events) = self.meta.bump_events();
            let writes = members.iter().map(|&m| Ok((m, offset, label_bytes(&member_label(&self.label, &policy, m, events), self.ml.label_len)?))).collect::<Result<Vec<_>, DvsError>>()?;
            self.run(&program::format(&[], &members, (0, 0), writes, vec![]))?;
        }
        Ok(())
    }

    /// What a member's label carries beside the identities, with members
    /// `failed` failed on record.
    fn policy(&self, failed: Vec<usize>) -> meta::DvsPolicy {
        meta::DvsPolicy { config: self.geo.cfg.clone(), failed, spares: self.spare_uuids(), role: String::new(), last_scrub: self.last_scrub, replaced: self.replaced.clone(), hot: self.hot_record(), lost: self.lost.clone() }
    }

    /// The members the metadata records failed.
    fn failed_on_record(&self) -> Vec<usize> {
        (0..self.geo.n).filter(|&m| matches!(self.state(m), MemberState::Failed)).collect()
    }

    /// What open found worth telling a user: devices not used and why
    /// (another array's, replaced, stale, an older copy, damaged),
    /// members missing or found stale.
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }

    /// For each member, the index (in the list given to [`DvsArray::open`]
    /// or [`DvsArray::create`]) of the device serving it, if any.
    pub fn sources(&self) -> &[Option<usize>] {
        &self.sources
    }

    /// Put the journal's live records back into the write cache (they may
    /// have been destaged already: writing them again is harmless).
    /// Records sit at the same offsets on every member of their lane; each
    /// is taken from a member of the lane its position is in that holds it
    /// whole (the sequence number tells it from an older record), in
    /// sequence, the next lane's start tried when the rest of a lane holds
    /// none, until one is found nowhere.  Another lane's member may hold a
    /// record of the very sequence number at the same offset of its own
    /// lane: taken from there, the position would be the wrong lane's, and
    /// the next records written over live ones.
    ///
    /// A record whole on fewer than all of its lane's members in service
    /// (a write torn by a member failing or the power going, never
    /// acknowledged) is replayed from the copies there are, and then made
    /// as safe as the rest: everything replayed is destaged and
    /// the journal starts over ([`DvsArray::restart_journal`]), so a later
    /// loss of the member holding the only copy cannot end a replay there
    /// and drop the acknowledged records after it.
    fn replay_journal(&mut self) -> Result<(), DvsError> {
        let l = self.meta.lane_len();
        if l == 0 {
            return Ok(());
        }
        let (k, lanes) = (self.geo.k, self.meta.lanes as usize);
        // The journal areas of each lane's members in service.
        let mut areas: Vec<Vec<Vec<u8>>> = vec![Vec::new(); lanes];
        // A lane member whose area cannot be read is passed over, its lane
        // read from the others (each record is on k + 1 members), and the
        // journal then starts over as for a record on too few of them.
        let mut unreadable = Vec::new();
        for m in self.meta_members().into_iter().filter(|m| m / (k + 1) < lanes) {
            match read_one(&self.exec, m, self.ml.journal_start, l) {
                Ok(a) => areas[m / (k + 1)].push(a),
                Err(e) => unreadable.push((m, e)),
            }
        }
        if let Some((m, e)) = unreadable.iter().find(|(m, _)| areas[m / (k + 1)].is_empty()) {
            return Err(DvsError::Other(format!("journal: no member of lane {} can be read (member {m}: {e}); its acknowledged writes are there", m / (k + 1))));
        }
        for (m, e) in &unreadable {
            self.warnings.push(format!("journal: member {m}'s copy cannot be read ({e}); its lane was read from the others"));
        }
        let short = std::cell::Cell::new(!unreadable.is_empty());
        let find = |v: u64, want: u64| {
            let on = areas.get((v / l) as usize)?;
            let mut copies = on.iter().filter_map(|j| decode_journal(j.get((v % l) as usize..)?).filter(|r| r.0 == want));
            let rec = copies.next()?;
            if 1 + copies.count() < on.len() {
                short.set(true);
            }
            Some(rec)
        };
        let recs = if self.meta.ring() { self.ring_records(&find) } else { self.lane_records(&find) };
        let short = short.get() && !recs.is_empty();
        let first = self.meta.jseq;
        for (i, (off, data)) in recs.into_iter().enumerate() {
            self.meta.jseq += 1;
            let r = self.cache_write(off, &data, Some(first + i as u64), None);
            self.poison(r)?;
        }
        let torn = areas.iter().flatten().filter_map(|a| highest_seq(a)).max().filter(|&last| last >= self.meta.jseq);
        if let Some(last) = torn {
            self.warnings.push(format!("journal: record {} is whole on no member; records {} to {last} after it dropped (a group torn by a crash, never acknowledged)", self.meta.jseq, self.meta.jseq + 1));
        } else if short {
            self.warnings.push("journal: a record was whole on fewer of its lane's members than are in service (a write torn by a failure or a crash); the records replayed were destaged and the journal started over".into());
        }
        if torn.is_some() || short {
            self.restart_journal(torn.map_or(self.meta.jseq, |last| last + 1))?;
        }
        Ok(())
    }

    /// Destage every replayed record and start the journal over at
    /// sequence number `next`.  Past a torn group (records whole past the
    /// ones replayed, up to `next - 1`: the power went while the group was
    /// written, the first record missing whole on every journal member,
    /// so none of it was acknowledged; rot of every copy of one record
    /// looks the same, and replay ends there either way, as ZFS's intent
    /// log ends at its first bad block) the next records would go where
    /// those lie, with their very sequence numbers, and a later replay
    /// would take the old ones for their successors, over acknowledged
    /// writes: so `next` is past them.
    fn restart_journal(&mut self, next: u64) -> Result<(), DvsError> {
        self.destage_all()?;
        self.meta.jseq = next;
        let w = self.meta.journal_reset()?;
        self.write_meta(w)
    }

    /// The live records of a journal retired whole: from the first lane's
    /// start, the next lane's start tried when the rest of a lane holds
    /// none.  Sets the next record's position.
    fn lane_records(&mut self, find: &dyn Fn(u64, u64) -> Option<JournalRec>) -> Vec<(u64, Vec<u8>)> {
        let l = self.meta.lane_len();
        let (mut v, mut recs) = (0u64, Vec::new());
        loop {
            let want = self.meta.jseq + recs.len() as u64;
            let next = (v / l + 1) * l;
            let (at, rec) = match find(v, want) {
                Some(r) => (v, r),
                None if v % l != 0 && next < self.meta.lanes * l => match find(next, want) {
                    Some(r) => (next, r),
                    None => break,
                },
                None => break,
            };
            v = at + rec.3 as u64;
            recs.push((rec.1, rec.2));
        }
        self.meta.jpos = self.ml.journal_start + v;
        recs
    }

    /// The live records of a ring journal: the first (`journal_from`) at
    /// the start of whichever segment holds it, then in sequence, the
    /// next segment's start tried when the rest of one holds none.  Sets
    /// the next record's position and the segments in use.
    fn ring_records(&mut self, find: &dyn Fn(u64, u64) -> Option<JournalRec>) -> Vec<(u64, Vec<u8>)> {
        let nsegs = self.meta.nsegs();
        let st = &mut self.meta;
        let first = (0..nsegs).find(|&s| find(st.seg_start(s), st.jseq).is_some());
        let Some(first) = first else {
            st.jpos = st.ml.journal_start;
            st.segs = [(0, st.jseq)].into();
            return Vec::new();
        };
        st.segs = [(first, st.jseq)].into();
        let (mut v, mut recs) = (st.seg_start(first), Vec::new());
        loop {
            let want = st.jseq + recs.len() as u64;
            let head = st.segs.back().map_or(first, |x| x.0);
            let next = (head + 1) % nsegs.max(1);
            let rec = match find(v, want) {
                Some(r) => r,
                None if next != first && v != st.seg_start(head) => match find(st.seg_start(next), want) {
                    Some(r) => {
                        v = st.seg_start(next);
                        r
                    }
                    None => break,
                },
                None => break,
            };
            let s = st.seg_of(v);
            if s != head {
                st.segs.push_back((s, want));
            }
            v += rec.3 as u64;
            recs.push((rec.1, rec.2));
        }
        st.jpos = st.ml.journal_start + v;
        recs
    }

    /// Segments of a ring journal holding records since the oldest live
    /// one (1 when retired whole; 0 without a ring).
    pub fn journal_segments(&self) -> usize {
        self.meta.segs.len()
    }

    /// The block buffers of the write cache, for writers to fill before
    /// they queue ([`Prepared::block`]); none for a write-through array.
    pub fn block_pool(&self) -> BlockPool {
        let cached = self.geo.cfg.cache_chunks > 0;
        BlockPool::new(self.lent.clone(), if cached { self.geo.block as usize } else { 0 })
    }

    pub fn geo(&self) -> &Geo {
        &self.geo
    }
    pub fn capacity(&self) -> u64 {
        self.geo.capacity()
    }
    pub fn tables(&self) -> &Tables {
        &self.dvs.tables
    }
    pub fn stats(&self) -> &crate::DvsStats {
        &self.dvs.stats
    }

    pub fn info(&self) -> ArrayInfo {
        let t = &self.dvs.tables;
        ArrayInfo {
            uuid: self.label.array_uuid,
            events: self.meta.events,
            config: self.geo.cfg.clone(),
            capacity: self.capacity(),
            ssgs: self.geo.ssgs,
            logical_chunks_per_ssg: self.geo.lchunks,
            failed: self.dvs.failed_members(),
            member_list: (0..self.geo.n).map(|m| MemberInfo { index: m, uuid: self.label.member_uuids[m], state: self.state(m), present: self.members[m].is_some(), describe: self.members[m].as_ref().map(|d| d.describe()).unwrap_or_default(), read_errors: self.read_errors(m).0, corrected_reads: self.read_errors(m).1 }).collect(),
            live_ssgs: t.live.len(),
            valid_chunks: t.live.iter().filter_map(|&l| t.get(l)).map(|s| s.valid as u64).sum(),
            log_seq: self.meta.seq(),
            spares: self.spares(),
            created: self.label.created,
            last_scrub: self.last_scrub,
            replaced: self.replaced.clone(),
            hot_replace: self.hot_progress(),
        }
    }

    /// Why the array stopped serving, if it has: an operation failed,
    /// inline or in the background (the program in flight not waited for).
    /// One stopped for what it can mend mends it and goes on at its next
    /// request ([`failing`]).
    pub fn stopped(&self) -> Option<String> {
        self.poisoned.clone().or_else(|| self.destager.failed())
    }

    /// Whether `m` names a member slot of this array.
    fn check_slot(&self, m: usize) -> Result<(), DvsError> {
        match m < self.geo.n {
            true => Ok(()),
            false => Err(DvsError::Other(format!("no member {m}: the array has members 0..{}", self.geo.n - 1))),
        }
    }

    /// At the start of a request: an array stopped for what it can mend
    /// (members' write errors, fills nothing can read) mends it and goes
    /// on ([`failing`]).
    fn check_ok(&mut self) -> Result<(), DvsError> {
        if self.stopped().is_none() || self.mend()? {
            return Ok(());
        }
        self.check_stopped()
    }

    /// Refuse work once an operation failed ([`DvsArray::stopped`]).
    fn check_stopped(&self) -> Result<(), DvsError> {
        match self.stopped() {
            Some(e) => Err(DvsError::Other(format!("the array stopped after an error ({e}); reopen it"))),
            None => Ok(()),
        }
    }

    /// Run `op`; when it stopped the array for what it can mend, mend it
    /// ([`failing`]) and run it again: a client's write or flush does not
    /// fail for a member's error, as md's do not.
    fn retried<T>(&mut self, mut op: impl FnMut(&mut DvsArray) -> Result<T, DvsError>) -> Result<T, DvsError> {
        // Each mend fails a member or sets bytes aside: a few at most.
        for _ in 0..self.geo.k + 2 {
            let r = op(self);
            if r.is_ok() || self.stopped().is_none() || !self.mend()? {
                return r;
            }
        }
        op(self)
    }

    /// Wait for the destage or GC program in flight; its error poisons
    /// the array.
    fn settle(&mut self) -> Result<(), DvsError> {
        let r = self.destager.wait();
        self.poison(r)
    }

    fn poison<T>(&mut self, r: Result<T, DvsError>) -> Result<T, DvsError> {
        if let Err(e) = &r {
            self.poisoned = Some(e.to_string());
            self.stop.note(e);
        }
        r
    }

    /// Write `data` at logical byte `offset`; durable when this returns
    /// (journalled, or destaged when write-through).
    pub fn write(&mut self, offset: u64, data: &[u8]) -> Result<(), DvsError> {
        self.write_inner(offset, data)?;
        self.written_whole(offset, data.len() as u64)
    }

    /// [`DvsArray::write`] of bytes the array itself puts back (a chunk
    /// written again elsewhere): lost bytes among them stay lost.
    fn write_inner(&mut self, offset: u64, data: &[u8]) -> Result<(), DvsError> {
        self.retried(|a| a.write_once(offset, data))
    }

    fn write_once(&mut self, offset: u64, data: &[u8]) -> Result<(), DvsError> {
        self.check_ok()?;
        self.take_destager_errors()?;
        self.geo.check(offset, data.len() as u64)?;
        if self.geo.cfg.cache_chunks == 0 {
            return self.cache_write(offset, data, None, None);
        }
        // Journal pieces small enough to fit the journal many times over.
        let max = self.ml.journal_piece(self.geo.block).max(self.geo.block) as usize;
        for (i, piece) in data.chunks(max).enumerate() {
            let off = offset + (i * max) as u64;
            // A group of one record (see `write_many`).
            let r = self.journal_group(&[Prepared::bare(off, piece)]);
            let (_, seq) = self.poison(r)?;
            self.cache_write(off, piece, Some(seq), None)?;
        }
        Ok(())
    }

    /// Write several requests, durable when this returns, sharing one
    /// journal write and one flush per journal member (group commit): the
    /// records of consecutive single-record requests go back to back in
    /// the journal as one write, then each request enters the write
    /// cache in order.  A request the journal splits into several pieces
    /// goes alone, as [`DvsArray::write`] does it; a group of one is
    /// exactly [`DvsArray::write`], so queue depth 1 (and the simulator's
    /// twin) sees the same device operations.  Write-through arrays
    /// have no journal to share: each request is destaged in turn.
    pub fn write_many(&mut self, writes: &[(u64, &[u8])]) -> Result<(), DvsError> {
        let bare: Vec<Prepared<'_>> = writes.iter().map(|&(offset, data)| Prepared::bare(offset, data)).collect();
        self.write_prepared(&bare)
    }

    /// [`DvsArray::write_many`] of writes their writers prepared
    /// beforehand, each on its own core ([`Prepared`]): a journal record
    /// joins a write's checksum to its header's
    /// ([`mosaic_format::frame::Unsealed::summed`]) instead of reading the
    /// bytes on the group's path, and the cache holds a block buffer
    /// filled by its writer instead of copying into one.  The records,
    /// the cached bytes and so the device operations are the same.
    pub fn write_prepared(&mut self, writes: &[Prepared<'_>]) -> Result<(), DvsError> {
        self.retried(|a| a.write_prepared_once(writes))?;
        if !self.lost.is_empty() {
            for w in writes {
                self.written_whole(w.offset, w.data.len() as u64)?;
            }
        }
        Ok(())
    }

    fn write_prepared_once(&mut self, writes: &[Prepared<'_>]) -> Result<(), DvsError> {
        self.check_ok()?;
        self.take_destager_errors()?;
        for w in writes {
            self.geo.check(w.offset, w.data.len() as u64)?;
        }
        let max = self.ml.journal_piece(self.geo.block).max(self.geo.block) as usize;
        let mut rest = writes;
        while let Some(w) = rest.first() {
            if self.geo.cfg.cache_chunks == 0 || w.data.is_empty() || w.data.len() > max {
                self.write_once(w.offset, w.data)?;
                rest = &rest[1..];
                continue;
            }
            let n = rest.iter().take_while(|w| !w.data.is_empty() && w.data.len() <= max).count();
            let r = self.journal_group(&rest[..n]);
            let (n, first) = self.poison(r)?;
            for (i, w) in rest[..n].iter().enumerate() {
                self.cache_write(w.offset, w.data, Some(first + i as u64), w.block.clone())?;
            }
            rest = &rest[n..];
        }
        Ok(())
    }

    /// The journal records of the first requests of `group` that fit
    /// (at least one; room is made first when not even that one fits,
    /// [`DvsArray::journal_room`]), written as one metadata write: how
    /// many, and the first one's sequence number.
    fn journal_group(&mut self, group: &[Prepared<'_>]) -> Result<(usize, u64), DvsError> {
        let first = journal_record_len(group[0].data.len() as u64);
        self.journal_room(first)?;
        let seq0 = self.meta.jseq;
        let mut bytes = std::mem::take(&mut self.jbuf);
        bytes.clear();
        let (mut at, mut lane, mut n, mut end) = (None, 0, 0, 0);
        for &Prepared { offset, data, sum, .. } in group {
            let len = journal_record_len(data.len() as u64);
            // A group is one write: it stops where a lane or a segment does.
            let place = self.meta.journal_place(len);
            if n > 0 && (place != Some(end) || place.map(|v| self.meta.lane_of(v)) != Some(lane) || place.is_some_and(|v| self.freeing_at(v))) {
                break;
            }
            if let Some(v) = place {
                self.await_segment(v)?;
            }
            let (jseq, off, l) = self.meta.take_journal(len);
            at.get_or_insert(off);
            lane = l;
            end = self.meta.jpos - self.ml.journal_start;
            meta::encode_journal_into(&mut bytes, jseq, offset, data, sum);
            n += 1;
        }
        let r = self.write_journal(at.unwrap_or(self.ml.journal_start), &bytes, lane);
        self.jbuf = bytes;
        r.map(|()| (n, seq0))
    }

    /// Write journal records `bytes` at `offset` to the members of journal lane `lane`
    /// (k + 1 of them, [`meta::journal_members`]; the log and checkpoints,
    /// which the open needs whole, stay on every member), each flushed.
    fn write_journal(&self, offset: u64, bytes: &[u8], lane: usize) -> Result<(), DvsError> {
        // Beside the program in flight: the journal area is no job's (a
        // metadata program takes no lock, [`program::meta`]).  Written
        // from its own buffer (no copy into a shared one).
        let members = meta::journal_members(self.meta_members(), self.geo.k, lane);
        let p = program::meta(Meta { offset, payload: Payload::Input(bytes.len()), members });
        run_with(&self.exec, &p, Client::In(bytes)).map(drop)
    }

    /// Make room in the journal for a record of `len` bytes: a ring's
    /// oldest live records destaged and their segments retired
    /// ([`MetaState::room_jobs`]); else (or when that is not enough) the
    /// whole cache destaged and the journal retired.
    fn journal_room(&mut self, len: u64) -> Result<(), DvsError> {
        if !self.meta.needs_room(len) {
            return Ok(());
        }
        if self.meta.ring() {
            let jobs = self.meta.room_jobs(&mut self.dvs, len)?;
            for j in jobs {
                self.run_job(j)?;
            }
            if let Some(r) = self.meta.retire()? {
                self.retire_behind(r)?;
            }
        }
        if !self.meta.journal_fits(len) {
            self.destage_all()?;
        }
        Ok(())
    }

    /// Log a ring's retirement behind the destages queued before it (it
    /// may name their records dead only once they are durable), without
    /// waiting: the segments it frees are not written until it is
    /// ([`DvsArray::await_segment`]).
    fn retire_behind(&mut self, r: meta::Retired) -> Result<(), DvsError> {
        let p = program::meta(Meta { offset: r.write.offset, payload: Payload::Bytes(r.write.bytes.into()), members: self.meta_members() });
        let ticket = self.destager.start(p, None)?;
        let n = self.meta.nsegs() as usize;
        self.freeing.resize(n, 0);
        for s in r.segs {
            if let Some(t) = self.freeing.get_mut(s as usize) {
                *t = ticket;
            }
        }
        Ok(())
    }

    /// Whether position `v` is in a segment a queued retirement frees.
    fn freeing_at(&self, v: u64) -> bool {
        self.freeing.get(self.meta.seg_of(v) as usize).is_some_and(|&t| t > 0)
    }

    /// Before a journal record goes to position `v`: when its segment
    /// was freed by a retirement still queued, wait for that one
    /// retirement (not for the destages queued after it).
    fn await_segment(&mut self, v: u64) -> Result<(), DvsError> {
        let s = self.meta.seg_of(v) as usize;
        match self.freeing.get(s).copied() {
            Some(t) if t > 0 => {
                self.freeing[s] = 0;
                let r = self.destager.wait_for(t);
                self.poison(r)
            }
            _ => Ok(()),
        }
    }

    /// Destage every cached chunk, then retire the journal.
    fn destage_all(&mut self) -> Result<(), DvsError> {
        let jobs = self.dvs.flush()?;
        for j in jobs {
            self.run_job(j)?;
        }
        if self.geo.cfg.cache_chunks > 0 {
            let w = self.meta.journal_reset()?;
            self.write_meta(w)?;
            // The queue is empty (`write_meta` waited): every retirement is durable.
            self.freeing.clear();
        }
        Ok(())
    }

    /// Into the write cache; run the destage and GC jobs that causes.
    /// `seq`: the journal record carrying it (a ring notes its SSGs live
    /// once the write is in the cache).
    fn cache_write(&mut self, offset: u64, data: &[u8], seq: Option<u64>, mut block: Option<Arc<[u8]>>) -> Result<(), DvsError> {
        let (c, blk) = (self.geo.chunk as usize, self.geo.block as usize);
        for (key, a, b, off) in self.geo.pieces(offset, data.len() as u64) {
            let piece = &data[off as usize..(off + b - a) as usize];
            let slot = self.bytes.get_mut(&key);
            // A writer's block buffer is held as it is when the piece is
            // one whole aligned block ([`BlockPool::block_for`]).
            let held = match block.take().filter(|o| o.len() == blk && piece.len() == blk && a as usize % blk == 0) {
                Some(owned) => {
                    debug_assert!(owned[..] == *piece, "a prepared block holds its write's bytes");
                    Held::put_block(slot, c, blk, a as usize, owned, &self.lent)
                }
                None => Held::put(slot, c, blk, a as usize, piece, &self.lent),
            };
            if let Some(h) = held {
                self.bytes.insert(key, h);
            }
        }
        let r = self.dvs.write(offset, data.len() as u64, 0);
        let (fg, bg) = self.poison(r)?;
        // Only a destage takes SSGs out of the cache (a ring notes live
        // records per SSG cached): without one there is nothing to prune.
        if !fg.is_empty() || !bg.is_empty() {
            self.meta.prune(&self.dvs.cache);
        }
        if let Some(seq) = seq {
            self.meta.note_write(seq, offset, data.len() as u64);
        }
        for j in fg.into_iter().chain(bg) {
            let r = self.run_job(j);
            self.poison(r)?;
        }
        if seq.is_none() {
            // Write-through: durable once its destage is.
            self.settle()?;
        }
        Ok(())
    }

    /// Read `buf.len()` bytes at logical byte `offset`.  A member read
    /// that fails is decoded from the others and the chunk written again
    /// ([`correct`]).
    pub fn read(&mut self, offset: u64, buf: &mut [u8]) -> Result<(), DvsError> {
        self.check_ok()?;
        self.check_not_lost(offset, buf.len() as u64)?;
        self.take_destager_errors()?;
        let mut pieces = self.dvs.read(offset, buf.len() as u64, 0)?;
        let got = self.read_pieces(&mut pieces)?;
        let mut at = got.at.iter();
        for p in &pieces {
            let out = &mut buf[p.buf_off as usize..(p.buf_off + p.b - p.a) as usize];
            match &p.src {
                ReadSrc::Cache | ReadSrc::Zero => out.fill(0),
                ReadSrc::Disk(cr) => {
                    let o = at.next().ok_or_else(|| DvsError::Other("a chunk read went missing".into()))?;
                    let src = got.bytes.get(o + (p.a - cr.a) as usize..o + (p.b - cr.a) as usize).ok_or_else(|| DvsError::Other("a chunk read came back short".into()))?;
                    out.copy_from_slice(src);
                }
            }
            self.overlay_cached(p.key, p.a, out);
        }
        // The client has its bytes whatever the rewrite meets: a write that
        // fails stops the array (as every write error does, `stopped` says
        // why); a chunk that cannot be read again whole stays where it is,
        // its member's read errors counted but not corrected.
        let _ = self.rewrite_unreadable(&got);
        Ok(())
    }

    /// Put the blocks the write cache holds of chunk `key` over `out`, the
    /// chunk's bytes from in-chunk byte `a` on.
    fn overlay_cached(&self, key: ChunkKey, a: u64, out: &mut [u8]) {
        let blk = self.geo.block as usize;
        if let (Some(bm), Some(held)) = (self.dvs.cache.get(key), self.bytes.get(&key)) {
            for i in (a as usize / blk)..((a as usize + out.len()) / blk) {
                if let Some(src) = held.block(i, blk).filter(|_| bm.get(i)) {
                    let o = i * blk - a as usize;
                    out[o..o + blk].copy_from_slice(src);
                }
            }
        }
    }

    /// Runs of `[offset, offset+len)` in order: bytes, and whether they
    /// were never written (they read as zeros).  See [`Dvs::holes`].
    pub fn holes(&self, offset: u64, len: u64) -> Result<Vec<(u64, bool)>, DvsError> {
        self.dvs.holes(offset, len)
    }

    /// A client's discard of `[offset, offset+len)` ([`Dvs::discard`]):
    /// the written chunks wholly inside it, none of their blocks cached,
    /// read as holes from now on and count as garbage, so the SSG's next
    /// GC leaves them behind instead of copying them.  Nothing is written:
    /// that GC's record is what makes a discard durable, and a reopen
    /// before it maps the chunks to their old bytes again, which a discard
    /// allows (NBD: a client may assume nothing of trimmed bytes until it
    /// writes them).  So a write of zeros is never a discard here.
    /// Returns the chunks unmapped.
    pub fn discard(&mut self, offset: u64, len: u64) -> Result<u64, DvsError> {
        self.check_ok()?;
        self.dvs.discard(offset, len)
    }

    /// Run `p` on the members, after the destage or GC program in flight.
    fn run(&self, p: &Program) -> Result<Vec<Vec<u8>>, DvsError> {
        self.destager.wait()?;
        run_on(&self.exec, p)
    }

    fn encode(&self, st: &Stripe, data: &HashMap<u32, Vec<u8>>) -> Result<Vec<Vec<u8>>, DvsError> {
        let c = self.geo.chunk as usize;
        let zero = vec![0u8; c];
        let mut shards: Vec<&[u8]> = Vec::with_capacity(self.geo.data);
        for j in 0..self.geo.data {
            shards.push(match st.lcns.get(j) {
                Some(l) => data.get(l).ok_or_else(|| DvsError::Other(format!("no bytes for chunk {l}")))?,
                None => &zero,
            });
        }
        let mut par = vec![vec![0u8; c]; self.geo.k];
        {
            let mut refs: Vec<&mut [u8]> = par.iter_mut().map(|v| v.as_mut_slice()).collect();
            self.code.encode(&shards, &mut refs).map_err(|e| DvsError::Other(e.to_string()))?;
        }
        Ok(par)
    }

    /// The kind of job that was running when an operation failed part-way.
    /// A destage or GC program in flight is waited for first.
    pub fn interrupted_job(&self) -> Option<crate::engine::JobKind> {
        let _ = self.destager.wait();
        self.destager.failed_kind().or_else(|| self.poisoned.as_ref().and(self.current))
    }

    /// Run a job (see [`crate::program`]): fills, merge, parity,
    /// appends, flush, its log record, zone resets.  Planned here (from
    /// the engine's state, never the drives', so the jobs before it may
    /// still be running), then handed to the destager, which runs the
    /// jobs in order: it may still be running when this returns
    /// ([`DvsArray::settle`] waits).  A degraded array waits for the jobs
    /// before it: its zone resets depend on the write pointers.
    fn run_job(&mut self, job: Job) -> Result<(), DvsError> {
        // Not `check_ok`: the request this job is part of is under way.
        self.check_stopped()?;
        if self.dvs.healthy.iter().any(|h| !h) {
            self.settle()?;
        }
        self.current = Some(job.kind);
        let writes_to: Vec<bool> = (0..self.geo.n).map(|m| self.writes_to(m, job.lsn)).collect();
        let resets = self.resets_of(&job);
        let w = self.meta.log(&Record::of_job(&job))?;
        let meta = Meta { offset: w.offset, payload: Payload::Bytes(w.bytes.into()), members: self.meta_members() };
        let lower = Lower { geo: &self.geo, code: &self.code, healthy: &self.dvs.healthy };
        let (bytes, lent) = (&mut self.bytes, &self.lent);
        let (c, blk) = (self.geo.chunk as usize, self.geo.block as usize);
        // A job that reads fills keeps what it was lowered from (the
        // payloads shared, not copied), to be lowered again should a fill
        // read fail (array/correct.rs).
        let keep = job.alt.iter().any(Option::is_some);
        let mut payloads = KeyMap::default();
        let mut cached = |lcn: u32, bm: &crate::cache::Bitmap| {
            let h = bytes.remove(&(job.lsn, lcn)).ok_or_else(|| DvsError::Other(format!("cached chunk {lcn} has no bytes")))?;
            let payload = h.into_payload(bm, c, blk);
            lent.lend(&payload);
            if keep {
                payloads.insert(lcn, payload.clone());
            }
            Ok(payload)
        };
        let p = lower.job(&job, &mut cached, &writes_to, Some(meta.clone()), &resets)?;
        self.current = None;
        let kind = job.kind;
        let again = keep.then(|| Box::new(correct::Relower { job, payloads, writes_to, meta: Some(meta), resets, healthy: self.dvs.healthy.clone() }));
        self.destager.start_job(p, Some(kind), again).map(drop)
    }

    /// The zone resets of a GC's old segment: on every member that holds
    /// the SSG (the engine lists the active ones; a member being rebuilt
    /// past this SSG holds it too).
    fn resets_of(&self, job: &Job) -> Vec<(usize, u64)> {
        let mut resets = job.resets.clone();
        if let Some(old) = job.old_phys {
            let zone = self.geo.zone_of(old);
            for m in 0..self.geo.n {
                let extra = !self.dvs.healthy[m] && self.writes_to(m, job.lsn);
                if extra && self.members[m].as_ref().is_some_and(|d| d.write_pointer(zone).is_some_and(|wp| wp > zone * self.geo.cfg.zone_size)) {
                    resets.push((m, zone));
                }
            }
        }
        resets
    }

    /// Members that keep the metadata (log, checkpoints, journal): every
    /// present member that is not failed, a member being rebuilt included
    /// (it gets a checkpoint when it is put in, and every record after).
    fn meta_members(&self) -> Vec<usize> {
        (0..self.geo.n).filter(|&m| !matches!(self.state(m), MemberState::Failed) && self.members[m].is_some()).collect()
    }

    /// `dev` serves slot `m` (the executor told apart): jobs carry their
    /// fills' other sources if a read of it can fail.
    fn seat(&mut self, m: usize, dev: Arc<dyn ZonedMember>) {
        self.members[m] = Some(dev);
        self.dvs.alternates = reads_can_fail(&self.members);
    }

    /// The recorded state of member `m`.
    pub fn state(&self, m: usize) -> MemberState {
        self.meta.durable.member_state[m]
    }

    /// Whether appends to SSG `lsn` go to member `m`.
    fn writes_to(&self, m: usize, lsn: u32) -> bool {
        self.members[m].is_some() && holds(&self.state(m), lsn)
    }

    /// Device operations on all members since open (or [`DvsArray::reset_io`]).
    pub fn io_counters(&self) -> IoCounts {
        self.member_io().iter().fold(IoCounts::default(), |t, m| IoCounts {
            reads: t.reads + m.reads,
            writes: t.writes + m.writes,
            read_bytes: t.read_bytes + m.read_bytes,
            write_bytes: t.write_bytes + m.write_bytes,
        })
    }

    /// A replay front end in this array's exact state (tables, write
    /// cache, member health, log/checkpoint/journal positions): replaying
    /// requests through it at queue depth 1 plans the operations this
    /// array would issue for them.  Members being rebuilt are not modelled.
    pub fn replay_twin(&self) -> crate::DvsFrontend {
        crate::DvsFrontend::from_state(self.dvs.clone(), self.meta.clone(), self.geo.cfg.cache_chunks > 0)
    }

    /// Every read and write issued to each member device since create or
    /// open (open's own label, checkpoint, log and journal reads and
    /// its checkpoint included) or [`DvsArray::reset_io`]: data, parity,
    /// fills, GC, metadata log records, checkpoints, the write-cache
    /// journal, rebuild and scrub.  Flushes and zone resets are not counted.
    /// Counted in one place, the executor that runs every program (a
    /// transfer counts once it completed), plus the label reads that
    /// find a device's member index before it is one.
    pub fn member_io(&self) -> Vec<DeviceIo> {
        // The program in flight counts once done (its error stays for the
        // next request).
        let _ = self.destager.wait();
        let side = self.side_io.lock().unwrap_or_else(|e| e.into_inner());
        let ran = self.exec.counters().members;
        side.iter().zip(ran).map(|(a, b)| DeviceIo { reads: a.reads + b.reads, writes: a.writes + b.writes, read_bytes: a.read_bytes + b.read_bytes, write_bytes: a.write_bytes + b.write_bytes }).collect()
    }

    /// Start [`DvsArray::member_io`] over from zero.
    pub fn reset_io(&self) {
        let _ = self.destager.wait();
        self.exec.reset_counters();
        self.side_io.lock().unwrap_or_else(|e| e.into_inner()).fill(DeviceIo::default());
    }

    /// Append a record to the log of every working member (checkpoint
    /// instead when the log is full).
    fn log(&mut self, rec: Record) -> Result<(), DvsError> {
        let w = self.meta.log(&rec)?;
        self.write_meta(w)
    }

    /// Write `w` to every metadata member, each flushed.
    fn write_meta(&self, w: MetaWrite) -> Result<(), DvsError> {
        self.run(&program::meta(Meta { offset: w.offset, payload: Payload::Bytes(w.bytes.into()), members: self.meta_members() })).map(drop)
    }

    /// Write the durable tables to the other checkpoint slot of every
    /// working member and restart the log.
    pub fn checkpoint(&mut self) -> Result<(), DvsError> {
        let w = self.meta.checkpoint()?;
        self.write_meta(w)
    }

    /// Mark member `m` failed (a command, or a member known bad) and record
    /// it in the metadata: it is never read or written again, and stays
    /// failed when the array is next opened even if its device is back,
    /// until it is replaced.  Refused when it would leave more members
    /// out than the parity tolerates.
    pub fn fail(&mut self, m: usize) -> Result<(), DvsError> {
        self.check_ok()?;
        self.settle()?;
        // A member leaving ends a hot replace (of it or of another).
        self.hot_abandon();
        self.check_slot(m)?;
        let st = self.state(m);
        if matches!(st, MemberState::Failed) {
            return Err(DvsError::Other(format!("member {m} is already failed")));
        }
        let out = (0..self.geo.n).filter(|&i| i != m && !matches!(self.state(i), MemberState::Active)).count();
        if matches!(st, MemberState::Active) && out + 1 > self.geo.k {
            return Err(DvsError::Other(format!("refusing to fail member {m}: {out} member(s) already out and k = {} tolerates {}; data would be lost", self.geo.k, self.geo.k)));
        }
        self.dvs.healthy[m] = false;
        let r = self.log(Record::Member { m: m as u8, state: MemberState::Failed });
        self.poison(r)?;
        let r = self.label_rounds();
        self.poison(r)
    }

    /// Put `dev` in place of failed member `m`: its zones are reset, its
    /// metadata area cleared, and it gets a label with a new member UUID
    /// and a checkpoint; the event counter then goes up two rounds.
    /// It is then `Rebuilding { done: 0 }`: [`DvsArray::rebuild`] fills it
    /// SSG by SSG and can be stopped and resumed; meanwhile it takes the
    /// appends of the SSGs already rebuilt.
    pub fn replace(&mut self, m: usize, dev: Arc<dyn ZonedMember>) -> Result<(), DvsError> {
        self.check_ok()?;
        self.settle()?;
        self.check_slot(m)?;
        match self.state(m) {
            MemberState::Failed => {}
            MemberState::Active => return Err(DvsError::Other(format!("member {m} is active; only a failed member can be replaced (mosaic fail first)"))),
            MemberState::Rebuilding { .. } => return Err(DvsError::Other(format!("member {m} is already being rebuilt (mosaic rebuild resumes it)"))),
        }
        check_member(&self.geo.cfg, m, dev.as_ref())?;
        let (l, io) = counted_label(dev.as_ref());
        self.side_io.lock().unwrap_or_else(|e| e.into_inner())[m].add(Dir::Read, io.read_bytes);
        if let Ok(Ok(l)) = l {
            let i = l.member_index;
            let ours = l.array_uuid == self.label.array_uuid && self.label.member_uuids.get(i) == Some(&l.member_uuid);
            if ours && i != m && !matches!(self.state(i), MemberState::Failed) {
                return Err(DvsError::Other(format!("{} is member {i} of this array already", dev.describe())));
            }
        }
        // A failed member put back first: a hot replace (running or
        // paused) ends.
        self.hot_abandon();
        // A new device: its read errors count from nothing.
        self.read_errors[m] = Default::default();
        // The device gets an identity of its own, and its metadata area is
        // cleared: old checkpoints and records (from an earlier life of
        // this device) must not be taken for this array's.
        let mut identity = self.label.clone();
        let former = std::mem::replace(&mut identity.member_uuids[m], Uuid::new_v4());
        let events = self.meta.events;
        let failed: Vec<usize> = self.failed_on_record().into_iter().filter(|&i| i != m).collect();
        let mut policy = self.policy(failed);
        mosaic_format::label::note_replaced(&mut policy.replaced, former, meta::MAX_REPLACED);
        let l = label_bytes(&member_label(&identity, &policy, m, events), self.ml.label_len)?;
        let p = program::format(&written_zones(&self.geo.cfg, m, dev.as_ref()), &[m], (0, self.ml.journal_end), vec![], vec![(m, label_offset(events), l)]);
        let old = self.exec.member(m);
        self.exec.set_member(m, Some(as_member(&dev)));
        if let Err(e) = self.run(&p) {
            self.exec.set_member(m, old);
            return Err(e);
        }
        self.label = identity;
        self.replaced = policy.replaced;
        self.seat(m, dev);
        self.sources[m] = None;
        Record::Member { m: m as u8, state: MemberState::Rebuilding { done: 0 } }.apply(&mut self.meta.durable)?;
        let r = self.checkpoint();
        self.poison(r)?;
        let r = self.label_rounds();
        self.poison(r)?;
        // Journal records written while `m` was out are on fewer than
        // k + 1 members, and the new device has none: destage them (the
        // stripes are rebuilt with the rest) and start the journal over.
        let r = if self.geo.cfg.cache_chunks > 0 { self.destage_all() } else { Ok(()) };
        self.poison(r)
    }

    /// Members being rebuilt and the lowest rebuild position (an LSN).
    pub fn rebuild_pending(&self) -> Option<(Vec<usize>, u64)> {
        let t: Vec<(usize, u64)> = (0..self.geo.n)
            .filter_map(|m| match self.state(m) {
                MemberState::Rebuilding { done } if self.members[m].is_some() => Some((m, done)),
                _ => None,
            })
            .collect();
        let start = t.iter().map(|x| x.1).min()?;
        Some((t.into_iter().map(|x| x.0).collect(), start))
    }

    /// Rebuild every member being rebuilt, SSG by SSG from its recorded
    /// position: each slot up to the SSG's write pointer for that member is
    /// reconstructed through the SIT (slots in no stripe, left by a crash,
    /// are written as zeros), after resetting the zone a stopped rebuild
    /// may have half written.  The position is logged after every SSG
    /// that held data (an SSG is a zone on every member, so the record is
    /// cheap beside it), so a stopped rebuild resumes at the SSG it was in.  `progress(done, total)` counts SSGs;
    /// `abort_after` stops abruptly after that many SSGs, as a killed
    /// process would (tests).
    pub fn rebuild(&mut self, progress: &dyn Fn(u64, u64), abort_after: Option<u64>) -> Result<RebuildReport, DvsError> {
        self.check_ok()?;
        self.settle()?;
        let t0 = std::time::Instant::now();
        let Some((targets, start)) = self.rebuild_pending() else {
            return Err(DvsError::Other("nothing to rebuild: no member is being rebuilt (use mosaic replace)".into()));
        };
        let lost_before = self.lost_bytes();
        let total = self.geo.ssgs as u64;
        let mut written = 0u64;
        for lsn in start..total {
            if abort_after.is_some_and(|a| lsn - start >= a) {
                self.poisoned = Some("rebuild stopped (fault injection)".into());
                return Err(DvsError::Other(format!("rebuild stopped after {} SSGs (fault injection)", lsn - start)));
            }
            let (w, wrote) = self.rebuild_lsn(&targets, lsn)?;
            written += w;
            progress(lsn + 1 - start, total - start);
            if wrote && lsn + 1 < total {
                self.log_rebuilt(&targets, lsn + 1)?;
            }
        }
        self.rebuild_done(&targets)?;
        let seconds = t0.elapsed().as_secs_f64();
        Ok(RebuildReport { members: targets, regions: total - start, resumed_from: start, bytes_written: written, seconds, mib_per_s: written as f64 / (1 << 20) as f64 / seconds.max(1e-9), skipped_regions: 0, paused: false, lost_bytes: self.lost_bytes() - lost_before })
    }

    /// Rebuild at most `ssgs` SSGs from the recorded position and log the
    /// new position (or, past the last SSG, make the members active): a
    /// rebuild in steps, so a served array can take client requests
    /// between them.  None when no member is being rebuilt.
    pub fn rebuild_step(&mut self, ssgs: u64) -> Result<Option<RebuildStep>, DvsError> {
        self.check_ok()?;
        self.settle()?;
        let Some((targets, start)) = self.rebuild_pending() else { return Ok(None) };
        let lost_before = self.lost_bytes();
        let total = self.geo.ssgs as u64;
        let end = start.saturating_add(ssgs.max(1)).min(total);
        let mut written = 0;
        for lsn in start..end {
            written += self.rebuild_lsn(&targets, lsn)?.0;
        }
        if end < total {
            self.log_rebuilt(&targets, end)?;
        } else {
            self.rebuild_done(&targets)?;
        }
        Ok(Some(RebuildStep { members: targets, from: start, done: end, total, bytes_written: written, lost_bytes: self.lost_bytes() - lost_before }))
    }

    /// Rebuild SSG `lsn` onto every member of `targets` that lacks it:
    /// the bytes written and whether any were.
    /// Bytes a source could not give back are recorded lost before the
    /// members are logged to hold the SSG ([`lost`]).
    fn rebuild_lsn(&mut self, targets: &[usize], lsn: u64) -> Result<(u64, bool), DvsError> {
        let mut written = 0;
        let mut wrote = false;
        for &m in targets {
            if !holds(&self.state(m), lsn as u32) && self.dvs.tables.get(lsn as u32).is_some() {
                let mut noted = Vec::new();
                let mut lossy = lost::Lossy::default();
                let r = self.rebuild_ssg(m, lsn as u32, &mut noted, &mut lossy);
                for s in noted {
                    self.read_errors[s].seen += 1;
                }
                written += self.poison(r)?;
                wrote = true;
                if !lossy.lost.is_empty() {
                    self.add_lost(&lossy.lost)?;
                }
                self.lossy_stripes.extend(lossy.stripes);
            }
        }
        Ok((written, wrote))
    }

    /// Record that the members of `targets` hold every SSG below `done`.
    fn log_rebuilt(&mut self, targets: &[usize], done: u64) -> Result<(), DvsError> {
        for &m in targets {
            if !holds(&self.state(m), (done - 1) as u32) {
                let r = self.log(Record::Member { m: m as u8, state: MemberState::Rebuilding { done } });
                self.poison(r)?;
            }
        }
        Ok(())
    }

    /// The members of `targets` are rebuilt: active, checkpointed, labelled.
    fn rebuild_done(&mut self, targets: &[usize]) -> Result<(), DvsError> {
        for &m in targets {
            self.dvs.healthy[m] = true;
            let r = self.log(Record::Member { m: m as u8, state: MemberState::Active });
            self.poison(r)?;
        }
        let r = self.checkpoint();
        self.poison(r)?;
        let r = self.label_rounds();
        self.poison(r)?;
        self.restripe_lossy();
        Ok(())
    }

    /// Rebuild SSG `lsn` onto member `m` (after resetting the zone a
    /// stopped rebuild may have half written), in writes of about 1 MiB,
    /// then flush; returns the bytes written.
    fn rebuild_ssg(&self, m: usize, lsn: u32, noted: &mut Vec<usize>, lossy: &mut lost::Lossy) -> Result<u64, DvsError> {
        let Some(s) = self.dvs.tables.get(lsn) else { return Ok(0) };
        let dev = self.members[m].clone().ok_or_else(|| DvsError::Other(format!("member {m} is missing")))?;
        let zone = self.geo.zone_of(s.phys);
        let mut prog = Program::default();
        if dev.write_pointer(zone).is_some_and(|wp| wp > zone * self.geo.cfg.zone_size) {
            prog.append(program::format(&[(m, zone * self.geo.cfg.zone_size)], &[], (0, 0), vec![], vec![]));
        }
        let per = (1u64 << 20).div_ceil(self.geo.chunk).max(1) as u32;
        let mut cols = Vec::with_capacity(per as usize);
        let mut first = 0;
        for idx in 0..s.wp[m] {
            cols.push(match s.owner[m].get(idx as usize) {
                Some(&row) if row != crate::tables::NONE => {
                    let st = s.sit.get(row as usize).ok_or_else(|| DvsError::Corrupt(format!("SSG {lsn}: slot {m}:{idx} owned by SIT row {row}, which does not exist")))?;
                    let col = st.col_of(m).ok_or_else(|| DvsError::Corrupt(format!("SSG {lsn}: slot {m}:{idx} owned by a stripe without member {m}")))?;
                    Some((st, col))
                }
                _ => None,
            });
            if cols.len() as u32 == per || idx + 1 == s.wp[m] {
                self.rebuild_run(std::mem::take(&mut prog), (lsn, s.phys, m, first), &cols, noted, lossy)?;
                first = idx + 1;
                cols.clear();
            }
        }
        prog.phases.push(mosaic_core::Phase::Flush(vec![m]));
        self.run(&prog)?;
        Ok(s.wp[m] as u64 * self.geo.chunk)
    }

    /// Verify every stripe that still protects data: recomputed parity
    /// must match.  With `repair`, the valid chunks of each mismatched
    /// stripe are written again through the normal path (zones cannot be
    /// rewritten in place, so repair re-stripes: a new stripe with fresh
    /// parity is appended and the bad one becomes garbage for GC).  For
    /// k >= 2 a single wrong column is located and corrected first.
    pub fn scrub_with(&mut self, repair: bool, progress: &dyn Fn(u64, u64)) -> Result<ScrubReport, DvsError> {
        let mut cur = self.scrub_start(repair)?;
        while self.scrub_step(&mut cur)? {
            progress(cur.done, cur.total);
        }
        self.scrub_finish(cur)
    }

    /// Start a scrub to be run in steps ([`DvsArray::scrub_step`]), the
    /// caller free to let requests in between: which SSGs are live now
    /// (an SSG garbage-collected meanwhile is passed over, one written
    /// meanwhile needs no check yet).
    pub fn scrub_start(&mut self, repair: bool) -> Result<ScrubCursor, DvsError> {
        self.check_ok()?;
        self.settle()?;
        if repair {
            // Cached writes are newer than the drives: destage them first,
            // so a rewrite never puts older bytes over them.
            let r = self.destage_all();
            self.poison(r)?;
        }
        let mut live = self.dvs.tables.live.clone();
        live.sort_unstable();
        let total: u64 = live.iter().filter_map(|&l| self.dvs.tables.get(l)).map(|s| s.sit.len() as u64).sum();
        let rep = ScrubReport { repaired: repair, ..Default::default() };
        Ok(ScrubCursor { live, next: 0, done: 0, total, located: 0, rep, repair, t0: std::time::Instant::now() })
    }

    /// Scrub the next SSG of `cur`: false when none is left.  A repair
    /// rewrites the SSG's mismatched stripes before the step ends, so no
    /// request between steps can be overwritten by older bytes.
    pub fn scrub_step(&mut self, cur: &mut ScrubCursor) -> Result<bool, DvsError> {
        let Some(&lsn) = cur.live.get(cur.next) else { return Ok(false) };
        cur.next += 1;
        self.check_ok()?;
        // Background destages of writes since the last step finished.
        self.settle()?;
        let c = self.geo.chunk as usize;
        // Chunks to write again: a repair's, and those a member could not read.
        // Each with its rank, the order written in: a chunk its member could
        // not read (0) before the others of its stripe (1), then a repair's
        // (2), so a GC one of the writes starts never reads a bad sector.
        let mut rewrite: BTreeMap<ChunkKey, (Vec<u8>, u8)> = BTreeMap::new();
        // The members of the columns they could not read, one a column.
        let mut unreadable_on: Vec<usize> = Vec::new();
        let t = &self.dvs.tables;
        // Collected since the cursor started: nothing of it to check.
        let Some(s) = t.get(lsn).filter(|_| t.live.contains(&lsn)) else { return Ok(true) };
        let (phys, sit) = (s.phys, s.sit.clone());
        for (row, st) in sit.iter().enumerate() {
            cur.done += 1;
            // A chunk discarded in memory only counts: the next open maps it here again.
            let valid: Vec<bool> = (0..st.width()).map(|col| self.holds_data(lsn, st, col)).collect();
            if !valid.iter().any(|v| *v) {
                cur.rep.skipped_stripes += 1;
                continue;
            }
            if st.members.iter().any(|&m| !self.dvs.healthy[m as usize]) {
                cur.rep.unverified_stripes += 1;
                continue;
            }
            let (mut cols, unreadable) = self.stripe_columns(phys, st)?;
            let rep = &mut cur.rep;
            rep.bytes_read += (c * (cols.len() - unreadable.len())) as u64;
            rep.stripes_checked += 1;
            // A column its member could not read, decoded: every valid chunk
            // of the stripe written again (as a client read's, `correct`).
            for &col in unreadable.iter().filter(|&&col| self.dvs.healthy[st.members[col] as usize]) {
                unreadable_on.push(st.members[col] as usize);
                for d in (0..st.width()).filter(|&d| valid[d]) {
                    let e = rewrite.entry((lsn, st.lcns[d])).or_insert_with(|| (cols[d].clone(), 1));
                    e.1 = e.1.min((d != col) as u8);
                }
            }
            if self.consistent(st, &cols)? {
                continue;
            }
            let bad = if self.geo.k >= 2 { self.locate(st, &cols)? } else { None };
            let member = bad.as_ref().map(|(col, _)| st.members[*col] as usize);
            if let Some((col, fixed)) = bad {
                cols[col] = fixed;
                cur.located += 1;
            }
            cur.rep.record(scrub_finding(lsn, row, member));
            if cur.repair {
                for col in (0..st.width()).filter(|&col| valid[col]) {
                    rewrite.entry((lsn, st.lcns[col])).or_insert((Vec::new(), 2)).0 = std::mem::take(&mut cols[col]);
                }
            }
        }
        let mut rewrite: Vec<(ChunkKey, (Vec<u8>, u8))> = rewrite.into_iter().collect();
        rewrite.sort_by_key(|r| r.1 .1);
        for (key, (mut bytes, rank)) in rewrite {
            if rank < 2 && !self.rewrite_unreadable {
                continue; // decoded for the check; a read-only open writes nothing
            }
            // Newer blocks in the cache stay (a check destages nothing first).
            self.overlay_cached(key, 0, &mut bytes);
            self.write_inner(self.geo.chunk_start(key), &bytes)?;
            cur.rep.rewritten_chunks += 1;
        }
        if self.rewrite_unreadable {
            for m in unreadable_on {
                self.count_corrected(m)?;
                cur.rep.read_errors_corrected += 1;
            }
        }
        Ok(true)
    }

    /// End a scrub: a repair's re-striped chunks destaged; a scrub ended
    /// before its last step counts the stripes left as unverified.
    pub fn scrub_finish(&mut self, cur: ScrubCursor) -> Result<ScrubReport, DvsError> {
        let mut rep = cur.rep;
        if cur.next < cur.live.len() {
            rep.interrupted = true;
            rep.unverified_stripes += cur.total - cur.done;
            rep.notes.push(format!("interrupted at SSG {} ({} of {} stripes scrubbed)", cur.live[cur.next], cur.done, cur.total));
        }
        if cur.repair {
            let r = self.destage_all();
            self.poison(r)?;
            if rep.mismatched > 0 {
                rep.notes.push(format!(
                    "{} valid chunks re-striped into new stripes with fresh parity ({} located wrong columns corrected first); the old stripes are garbage for GC",
                    rep.rewritten_chunks, cur.located
                ));
            }
        }
        rep.seconds = cur.t0.elapsed().as_secs_f64();
        Ok(rep)
    }

    /// Keep what a scrub found in every member's label (two label rounds,
    /// as every change of the array's state), so `status` and `info` say
    /// it and a server's `--scrub-every` knows when the next is due.
    pub fn record_scrub(&mut self, rep: &ScrubReport) -> Result<(), DvsError> {
        self.check_ok()?;
        self.last_scrub = Some(rep.kept(now_secs()));
        let r = self.label_rounds();
        self.poison(r)
    }

    /// Check only: the number of mismatched stripes.
    pub fn scrub(&mut self) -> Result<u64, DvsError> {
        Ok(self.scrub_with(false, &|_, _| {})?.mismatched)
    }

    /// Whether a stripe's parity columns match its data columns.
    fn consistent(&self, st: &Stripe, cols: &[Vec<u8>]) -> Result<bool, DvsError> {
        let data: HashMap<u32, Vec<u8>> = st.lcns.iter().zip(cols).map(|(&l, v)| (l, v.clone())).collect();
        let par = self.encode(st, &data)?;
        Ok(par.iter().zip(&cols[st.width()..]).all(|(a, b)| a == b))
    }

    /// The one column whose replacement by its reconstruction from the
    /// others makes the stripe consistent, with that reconstruction
    /// (`None` when no column or more than one does).
    fn locate(&self, st: &Stripe, cols: &[Vec<u8>]) -> Result<Option<(usize, Vec<u8>)>, DvsError> {
        let mut found = None;
        for cand in 0..cols.len() {
            let mut fixed = cols.to_vec();
            fixed[cand] = self.decode_column(st, cols, &[cand], cand)?;
            if self.consistent(st, &fixed)? {
                if found.is_some() {
                    return Ok(None);
                }
                found = Some((cand, std::mem::take(&mut fixed[cand])));
            }
        }
        Ok(found)
    }

    /// One background GC step (call when idle): compacts the SSG with the
    /// most reclaimable space, if any is worth it.  Returns whether it ran.
    pub fn gc_step(&mut self) -> Result<bool, DvsError> {
        self.check_ok()?;
        self.take_destager_errors()?;
        let r = self.dvs.idle();
        let Some(job) = self.poison(r)? else { return Ok(false) };
        let r = self.run_job(job);
        self.poison(r)?;
        Ok(true)
    }

    /// Destage the whole write cache (writes are durable before this, in
    /// the journal; afterwards the journal is empty).
    pub fn flush(&mut self) -> Result<(), DvsError> {
        self.retried(DvsArray::flush_once)
    }

    fn flush_once(&mut self) -> Result<(), DvsError> {
        self.check_ok()?;
        self.take_destager_errors()?;
        let r = self.destage_all();
        self.poison(r)?;
        self.settle()?;
        // Chunks its destages could not read leave stripe-mates to write
        // again, which go through the cache too.
        if self.take_destager_errors()? {
            let r = self.destage_all();
            self.poison(r)?;
            self.settle()?;
        }
        Ok(())
    }
}

/// The highest sequence number of a whole journal record in a journal
/// area (records start on sector boundaries).
fn highest_seq(area: &[u8]) -> Option<u64> {
    let (mut at, mut best) = (0, None);
    while at < area.len() {
        match decode_journal(&area[at..]) {
            Some((seq, _, _, len)) => {
                best = best.max(Some(seq));
                at += len.max(mosaic_format::frame::SECTOR);
            }
            None => at += mosaic_format::frame::SECTOR,
        }
    }
    best
}
