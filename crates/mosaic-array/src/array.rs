//! An assembled array: member devices, superblocks, health and journal,
//! with a fixed layout's programs run by the one executor (`mosaic-exec`).
//!
//! ```text
//!   read/write(offset, bytes)
//!     │  health snapshot ──> Layout::{read,write}_program ──> Program
//!     │  Executor::submit: lock the program's stripes, reads, the
//!     │    computation (data: GF(2^8) combinations), journal, writes
//!     └─ an op fails ──> Request::failed: the member is marked failed in
//!                        every superblock, plan again with the new health
//! ```
//!
//! With a journal (see [`crate::journal`]) every write's device operations
//! are made durable in the journal before the members are written, which
//! closes the write hole; open replays what a crash left there.
//!
//! Retrying a whole write after a member failed part-way is safe: the new
//! plan reads back whatever reached the surviving members and recomputes
//! code from it (RMW sees a zero delta for data already written; degraded
//! writes decode and re-encode).

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use parking_lot::{Mutex, RwLock, RwLockReadGuard};
use serde::Serialize;
use uuid::Uuid;

use mosaic_core::{FixedLayout, Geometry, Health, Layout, Level, Mark, MemberState, OpCounts, Phase, Program};
use mosaic_exec::{Client, DevWrite, ExecError, Executor, Failure, Held, JournalHook, Planner};
use mosaic_dev::{Device, FileMember, Member};
use mosaic_format::fresh;

use crate::assemble::{assemble, canonical, relativize, Assembly, Found, Place};
use crate::bitmap::WriteIntent;
use crate::journal::{Entry, Journal, ReplayReport};
use crate::spec::ArraySpec;
use crate::superblock::{ArrayState, MemberRole, Superblock, DATA_OFFSET};
use crate::ArrayError;

/// Options for creating an array.
#[derive(Debug, Clone)]
pub struct CreateOptions {
    pub level: Level,
    /// Member count (implied by `rs:K+M`).
    pub members: Option<usize>,
    /// Size of each member file to create (directory specs).
    pub member_size: Option<u64>,
    pub unit: u64,
    pub block: u64,
    /// Overwrite members that already carry a mosaic superblock.
    pub force: bool,
    /// Skip the initial parity sync of existing devices.
    pub assume_clean: bool,
}

/// The journal file of an array created in a directory.
pub const JOURNAL_FILE: &str = "journal.img";

/// At most how often a flush after writes updates the superblocks, so a
/// member copied before then is stale ([`Array::flush`]).
pub const EPOCH: Duration = Duration::from_secs(5);

/// Whether a writable open may start a dirty, degraded array that has no
/// journal ([`refuse_dirty_degraded`]): md's `start_dirty_degraded`, a
/// setting of the process as md's is of the kernel (`mosaic
/// --start-dirty-degraded`).
static START_DIRTY_DEGRADED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Let writable opens start dirty, degraded arrays without a journal (see
/// [`refuse_dirty_degraded`]).
pub fn set_start_dirty_degraded(yes: bool) {
    START_DIRTY_DEGRADED.store(yes, std::sync::atomic::Ordering::Relaxed);
}

/// Whether [`set_start_dirty_degraded`] allowed it.
pub fn start_dirty_degraded() -> bool {
    START_DIRTY_DEGRADED.load(std::sync::atomic::Ordering::Relaxed)
}

/// The members out of service of an array without a journal whose
/// missing blocks come from code (none: mirrors, no code, a journal).
/// A member that holds code alone (raid4's parity member, a CBRO check
/// drive) is not one: no data block is computed for it, and its own
/// blocks are rebuilt from the data, which is what the crash left.
fn out_behind_code(sb: &Superblock) -> Vec<usize> {
    let g = &sb.geometry;
    let coded = g.m > 0 && g.level != Level::Raid1;
    if sb.journal.is_some() || !coded {
        return Vec::new();
    }
    let code_only = |i: usize| matches!(g.level, Level::Raid4 | Level::Cbro { .. }) && i >= g.k;
    (0..sb.member_states.len()).filter(|&i| !matches!(sb.member_states[i], MemberState::Active) && !code_only(i)).collect()
}

/// md's rule for raid4/5/6 ("cannot start dirty degraded array"): an
/// array without a journal that was not shut down cleanly may have
/// stripes whose code disagrees with their data (writes cut off by the
/// crash: the write hole), and while it is degraded the missing members'
/// blocks can only come from that code, so a writable open (which serves,
/// rebuilds and writes them) is refused unless the user accepts it.
/// Read-only opens go on, with a warning, to copy data off.  Mirrors are
/// exempt: a mirror's copy is the data itself, old or new.
fn refuse_dirty_degraded(sb: &Superblock) -> Result<(), ArrayError> {
    let out = if sb.state == ArrayState::Dirty { out_behind_code(sb) } else { Vec::new() };
    if out.is_empty() {
        return Ok(());
    }
    Err(ArrayError::Usage(format!(
        "array {} was not shut down cleanly, has no write-ahead journal, and is degraded (member(s) {out:?} not in service): \
         a stripe being written at the crash may have code that disagrees with its data, so the blocks of the missing member(s), \
         read or rebuilt from that code, may be wrong without any error. Read-only commands work (copy the data off first); \
         to start it anyway give --start-dirty-degraded (md's start_dirty_degraded), replace the member(s), then scrub --repair",
        sb.array_uuid
    )))
}

/// Per-member I/O counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct MemberCounters {
    pub reads: u64,
    pub read_bytes: u64,
    pub writes: u64,
    pub write_bytes: u64,
    pub errors: u64,
}

/// One member in [`ArrayInfo`].
#[derive(Debug, Clone, Serialize)]
pub struct MemberInfo {
    pub index: usize,
    pub path: String,
    pub uuid: Uuid,
    pub state: MemberState,
    pub present: bool,
    /// Failed reads and writes since open (or the counters' reset; a
    /// write error fails the member, a read error is corrected where the
    /// other members can rebuild the bytes, see [`crate::correct`]).
    pub read_errors: u64,
    pub write_errors: u64,
    /// Columns a scrub found wrong on it since open.
    pub checksum_errors: u64,
    /// Of its read errors, those rebuilt from the other members and
    /// written back, leaving it in service ([`crate::correct`]).
    pub corrected_reads: u64,
    /// Its failure domain (see [`crate::domain`]): its host label, its
    /// URI's host, or "local".
    pub host: String,
    /// How a remote member's requests have been answering (None for a
    /// local device, or one not open).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub remote: Option<mosaic_dev::nbd::Latency>,
    /// Failed while active, with a write-intent bitmap: its own device,
    /// put back in its slot, is rebuilt only where writes came since it
    /// left (md's re-add; [`Array::replace_with`]).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub readd: bool,
    /// The drive a hot replace is copying it onto.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub replacing: Option<String>,
    /// Read only when no other copy serves (md's `--write-mostly`).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub write_mostly: bool,
    /// A member that is an array of its own (a CBRO check drive array):
    /// its members out of service ([`mosaic_dev::Member::inner_out`]).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub inner_out: Vec<String>,
}

/// What `mosaic info` shows.
#[derive(Debug, Clone, Serialize)]
pub struct ArrayInfo {
    pub uuid: Uuid,
    pub level: String,
    pub members: usize,
    pub data_columns: usize,
    pub code_columns: usize,
    /// The most columns one stripe has lost to members not in service
    /// ([`Geometry::columns_out`]): more than `code_columns` and data is
    /// out of reach.
    pub columns_out: usize,
    pub stripe_unit: u64,
    pub block_size: u64,
    pub stripes: u64,
    pub capacity: u64,
    pub member_data_size: u64,
    pub data_offset: u64,
    pub events: u64,
    pub state: ArrayState,
    pub degraded: bool,
    pub member_list: Vec<MemberInfo>,
    /// The write-ahead journal, if any, and what its replay at open did.
    pub journal: Option<String>,
    pub journal_replayed: Option<ReplayReport>,
    /// Bytes of the journal ring in use and its size.
    pub journal_fill: Option<JournalFill>,
    /// Why the journal cannot be used: its device failed while the array
    /// was open (writes are refused until it is opened again), or a
    /// read-only open could not open or read it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub journal_failed: Option<String>,
    /// Hot spares present (their paths).
    pub spares: Vec<String>,
    /// A grow in progress: new stripes restriped and their total.
    pub grow: Option<GrowProgress>,
    /// Logical ranges whose data a crash lost (see [`crate::lost`]).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub lost: Vec<crate::LostRange>,
    /// Not shut down cleanly, without a journal, and not resynced since:
    /// code may disagree with data where the crash cut writes off, until a
    /// repairing scrub ([`Array::needs_resync`]).
    pub resync_needed: bool,
    /// With a resync needed and no bitmap: the stripes below this were
    /// verified by a resync already, and the next one starts here.
    #[serde(skip_serializing_if = "is_zero")]
    pub resync_from: u64,
    /// The last scrub's result, when one was recorded.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_scrub: Option<crate::ScrubRecord>,
    /// The array this one is part of ([`crate::superblock::Owner`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub owner: Option<crate::superblock::Owner>,
    /// When the array was created, seconds since the Unix epoch.
    pub created: u64,
    /// The write-intent bitmap, when the array has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bitmap: Option<BitmapStatus>,
    /// Member UUIDs this array replaced: a device carrying one is its
    /// former member ([`crate::superblock::Superblock::replaced`]).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub replaced: Vec<Uuid>,
    /// A hot replace paused, to resume where it stopped
    /// ([`crate::superblock::HotCopy`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hot_paused: Option<crate::superblock::HotCopy>,
}

/// The write-intent bitmap in [`ArrayInfo`]: each member's bytes a bit
/// covers, the bits, and how many are set now (what a crash now would
/// resync).
#[derive(Debug, Clone, Copy, Serialize)]
pub struct BitmapStatus {
    pub chunk_bytes: u64,
    pub regions: u64,
    pub dirty_regions: u64,
}

/// How full the journal ring is, in [`ArrayInfo`].
#[derive(Debug, Clone, Copy, Serialize)]
pub struct JournalFill {
    pub used: u64,
    pub capacity: u64,
}

/// A grow's progress in [`ArrayInfo`].
#[derive(Debug, Clone, Serialize)]
pub struct GrowProgress {
    pub from_members: usize,
    pub done_stripes: u64,
    pub total_stripes: u64,
}

/// An assembled array.
pub struct Array {
    /// Geometry and layout (swapped whole when a grow moves on; see
    /// [`crate::grow`]).
    /// Loaded by every request (no lock word or reference count written).
    shape: arc_swap::ArcSwap<Shape>,
    /// Held (shared) by every client request while it plans and runs; a
    /// grow's restripe step takes it exclusively.
    pub(crate) gate: mosaic_exec::Gate,
    /// The one executor: members, range locks, I/O threads, counters.
    pub(crate) exec: Executor,
    health: RwLock<Health>,
    sb: Mutex<Superblock>,
    /// I/O errors per member since open.
    errors: Mutex<Vec<u64>>,
    /// Columns a scrub found wrong on each member since open.
    checksum_errors: Mutex<Vec<u64>>,
    /// Read errors corrected on each member ([`crate::correct`]), by slot.
    pub(crate) corrected: Mutex<std::collections::HashMap<usize, crate::correct::Corrected>>,
    /// Whether read errors are corrected at all (off under a cache volume).
    pub(crate) correct_reads: std::sync::atomic::AtomicBool,
    writable: bool,
    closed: Mutex<bool>,
    /// Members failed automatically since open, with the error.
    auto_failed: Mutex<Vec<(usize, String)>>,
    /// The member a hot replace is copying, and onto what ([`crate::hot`]).
    pub(crate) hot: Mutex<Option<(usize, String)>>,
    /// A hot replace paused by a clean stop, its twin in the slot
    /// ([`crate::hot`]).
    pub(crate) paused: Mutex<Option<crate::hot::Paused>>,
    /// The superblocks said dirty at open: the last writer did not close.
    opened_dirty: bool,
    /// Opened dirty without a journal (nothing replayed): code may
    /// disagree with data where the crash cut writes off, so the array
    /// stays dirty on disk, however it is closed, until a full repairing
    /// scrub ([`Array::mark_resynced`]).
    pub(crate) unsynced: std::sync::atomic::AtomicBool,
    /// Ends the scrub in progress before its next stripe
    /// ([`Array::interrupt_scrub`]).
    pub(crate) scrub_interrupt: std::sync::atomic::AtomicBool,
    /// Unsynced without a bitmap: the stripes below this were verified by
    /// a resync, this open's or one a stop cut off
    /// ([`Superblock::resync_from`]), so a resync starts here.
    pub(crate) resync_done: std::sync::atomic::AtomicU64,
    /// Set (and recorded on disk) by the first write after open.
    dirty: std::sync::atomic::AtomicBool,
    dirty_lock: Mutex<()>,
    /// The first superblock update of this open started a new session
    /// ([`Array::write_superblocks_with`]).
    session_started: std::sync::atomic::AtomicBool,
    /// Writes came since the last epoch ([`Array::flush`]).
    wrote: std::sync::atomic::AtomicBool,
    /// When the superblocks were last updated, and how long a flush after
    /// writes waits since then before it updates them again (an epoch).
    last_update: Mutex<Instant>,
    epoch_ns: std::sync::atomic::AtomicU64,
    journal: Option<Journal>,
    /// Whether a full journal ring may checkpoint by itself (a cache
    /// volume turns this off and checkpoints after destaging its cache).
    auto_checkpoint: std::sync::atomic::AtomicBool,
    /// Held (shared) by writes from their journal append until their member
    /// writes finish; a journal checkpoint takes it exclusively.
    inflight: RwLock<()>,
    replayed: Option<ReplayReport>,
    /// Read-only opens: journal records a crash left (not applied).
    journal_pending: usize,
    /// Read-only opens: why the journal the superblock names could not be
    /// used (missing, unreadable), in [`ArrayInfo::journal_failed`].
    journal_unusable: Option<String>,
    /// What assembly found wrong (devices not used, and why).
    pub(crate) open_warnings: Vec<String>,
    /// Hot spares present, in the order of the superblock's list.
    pub(crate) spares: Mutex<Vec<(Arc<dyn Member>, crate::superblock::Spare)>>,
    /// Whether the superblock lists lost ranges (see [`crate::lost`]):
    /// reads look there only then.
    pub(crate) any_lost: std::sync::atomic::AtomicBool,
    /// The write-intent bitmap ([`crate::bitmap`]), when the array has one.
    pub(crate) bitmap: RwLock<Option<Arc<WriteIntent>>>,
}

/// The file, device or NBD export at `path`, a file created with `size`
/// bytes when missing, locked for writing (a new member, spare or journal).
pub(crate) fn open_or_create(path: &Path, size: u64) -> Result<Device, ArrayError> {
    let m = Device::open_or_create(path, size).map_err(|e| if path.exists() { ArrayError::BadMember(e.to_string()) } else { ArrayError::Io(e.to_string()) })?;
    for_writing(m, path)
}

/// The existing file, device or NBD export at `path`, locked for writing
/// (a replacement drive).
pub(crate) fn open_for_writing(path: &Path) -> Result<Device, ArrayError> {
    for_writing(Device::open(path).map_err(|e| ArrayError::BadMember(e.to_string()))?, path)
}

/// `m` locked for writing, when it takes writes (a remote may be exported
/// read-only: the array would start with it failed).
fn for_writing(m: Device, path: &Path) -> Result<Device, ArrayError> {
    m.lock(true).map_err(|e| ArrayError::Usage(e.to_string()))?;
    if m.read_only() {
        return Err(ArrayError::BadMember(format!("{}: the server exports it read-only; a member, spare or journal takes writes", path.display())));
    }
    Ok(m)
}

/// Now, in seconds since the Unix epoch (superblock times).
pub fn now_secs() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0)
}

/// The members not fully in service (failed, missing or rebuilding).
fn out_of_service(h: &Health) -> Vec<usize> {
    h.states.iter().enumerate().filter(|(_, s)| !matches!(s, MemberState::Active)).map(|(i, _)| i).collect()
}

/// Why a read-only open has no journal when none was given (assembled
/// from members alone, or the superblock names none).
const NOT_GIVEN: &str = "not given";
/// Why a writable open has no journal: [`Array::replace_journal`] gives it one.
const REPLACING: &str = "being replaced";

/// What [`Array::replace_journal`] did.
#[derive(Debug, Clone, Serialize)]
pub struct JournalReplaced {
    /// The journal the superblock named before.
    pub old: Option<String>,
    /// Whether it could still be read (then it was replayed and emptied).
    pub old_usable: bool,
    /// Whether stripes were resynced after an unclean shutdown: every
    /// stripe when the old journal was unreadable; without a journal
    /// before, what a crash may have torn (the regions a write-intent
    /// bitmap marks, else every stripe).
    pub resynced: bool,
}

impl Array {
    // ---------------------------------------------------------------- create

    /// Create a new array and open it for writing.
    pub fn create(spec: &ArraySpec, o: &CreateOptions) -> Result<Array, ArrayError> {
        Self::create_journaled(spec, o, None)
    }

    /// Create an array with a write-ahead journal on `journal`: a file
    /// (created with the given size when absent) or a device.
    pub fn create_journaled(spec: &ArraySpec, o: &CreateOptions, journal: Option<(&Path, u64)>) -> Result<Array, ArrayError> {
        let n = match (o.members, o.level.implied_members()) {
            (Some(n), Some(imp)) if n != imp => {
                return Err(ArrayError::Usage(format!("wrong member count: {} needs {imp} members, --members says {n}", o.level)))
            }
            (Some(n), _) => n,
            (None, Some(imp)) => imp,
            (None, None) => match spec {
                ArraySpec::Paths(p) => p.len(),
                ArraySpec::Dir(_) => return Err(ArrayError::Usage("--members is required when creating member files in a directory".into())),
            },
        };
        // Validate the geometry shape before touching any file.
        o.level.columns(n)?;
        if let Some((p, size)) = journal.filter(|(p, _)| !p.to_str().is_some_and(mosaic_dev::nbd::is_uri)) {
            if let ArraySpec::Paths(paths) = spec {
                if paths.iter().any(|m| canonical(m) == canonical(p)) {
                    return Err(ArrayError::Usage(format!("{} is named as a member and as the journal: the journal needs a device of its own", p.display())));
                }
            }
            let size = std::fs::metadata(p).map_or(size, |m| if m.is_file() { m.len() } else { size });
            if let Some(why) = crate::journal::too_small_for(size, n, o.unit) {
                return Err(ArrayError::Usage(format!("{}: {why}", p.display())));
            }
        }
        let mut members: Vec<(Arc<dyn Member>, String)> = Vec::new();
        let mut fresh = false;
        match spec {
            ArraySpec::Dir(dir) => {
                let size = o.member_size.ok_or_else(|| ArrayError::Usage("--member-size is required when creating member files".into()))?;
                let min = DATA_OFFSET + o.unit;
                if size < min {
                    return Err(ArrayError::Usage(format!(
                        "member size {size} is too small: each member needs at least {min} bytes (1 MiB header + one stripe unit)"
                    )));
                }
                Geometry::new(o.level, n, o.unit, o.block, size - DATA_OFFSET)?;
                std::fs::create_dir_all(dir).map_err(|e| ArrayError::Usage(format!("{}: {e}", dir.display())))?;
                for i in 0..n {
                    let p = ArraySpec::member_file(dir, i);
                    if p.exists() && !o.force {
                        return Err(ArrayError::Usage(format!("{} already exists; use --force to overwrite it", p.display())));
                    }
                }
                for i in 0..n {
                    let p = ArraySpec::member_file(dir, i);
                    if p.exists() {
                        // --force: only if no other process has it open.
                        FileMember::open(&p).and_then(|m| m.lock(true)).map_err(|e| ArrayError::Usage(e.to_string()))?;
                    }
                    let m = FileMember::create(&p, size).map_err(|e| ArrayError::Io(e.to_string()))?;
                    m.lock(true).map_err(|e| ArrayError::Usage(e.to_string()))?;
                    members.push((Arc::new(m), p.display().to_string()));
                }
                fresh = true;
            }
            ArraySpec::Paths(paths) => {
                if paths.len() != n {
                    return Err(ArrayError::Usage(format!("wrong member count: {} needs {n} members, {} paths given", o.level, paths.len())));
                }
                for p in paths {
                    let m = open_for_writing(p)?;
                    if !o.force {
                        if let Ok(sb) = Superblock::read_from(&m) {
                            return Err(ArrayError::Usage(format!(
                                "{} already belongs to array {}; use --force to overwrite it",
                                p.display(),
                                sb.array_uuid
                            )));
                        }
                    }
                    members.push((Arc::new(m), p.display().to_string()));
                }
            }
        }
        let journal = match journal {
            None => None,
            Some((p, size)) => {
                let dev = open_or_create(p, size)?;
                let name = std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
                Some((Arc::new(dev) as Arc<dyn Member>, name.display().to_string()))
            }
        };
        let arr = Self::create_with_journal(members, o, fresh, journal)?;
        if let ArraySpec::Dir(dir) = spec {
            arr.set_home(dir)?;
        }
        Ok(arr)
    }

    /// Record `dir` as the directory the array lives in: paths inside it
    /// are stored relative to it from now on (see [`crate::assemble`]).
    pub(crate) fn set_home(&self, dir: &Path) -> Result<(), ArrayError> {
        let home = canonical(dir).display().to_string();
        self.write_superblocks(|s| s.home = Some(home))
    }

    /// Create an array on already-open members (RAM members for tests and
    /// benchmarks).  `fresh` members are known to be zero-filled, so no
    /// initial parity sync is needed.
    pub fn create_on(members: Vec<(Arc<dyn Member>, String)>, o: &CreateOptions, fresh: bool) -> Result<Array, ArrayError> {
        Self::create_with_journal(members, o, fresh, None)
    }

    /// [`Array::create_on`] with a write-ahead journal device.
    pub fn create_with_journal(
        members: Vec<(Arc<dyn Member>, String)>,
        o: &CreateOptions,
        fresh: bool,
        journal: Option<(Arc<dyn Member>, String)>,
    ) -> Result<Array, ArrayError> {
        let n = members.len();
        o.level.columns(n)?;
        let min_size = members.iter().map(|(m, _)| m.size()).min().unwrap_or(0);
        for (m, path) in &members {
            if m.size() < DATA_OFFSET + o.unit {
                return Err(ArrayError::BadMember(format!(
                    "{path}: member too small: {} bytes, needs at least {} (1 MiB header + one stripe unit)",
                    m.size(),
                    DATA_OFFSET + o.unit
                )));
            }
        }
        let geo = match o.level {
            // CBRO: data drives set the capacity; each check drive array
            // (w members, raid0) must hold one data drive's units.
            Level::Cbro { n: d, w, .. } => {
                let (d, w) = (d as usize, w as u64);
                let data_min = members[..d].iter().map(|(m, _)| m.size()).min().unwrap_or(0) - DATA_OFFSET;
                let geo = Geometry::new(o.level, n, o.unit, o.block, data_min)?;
                for (i, (m, path)) in members.iter().enumerate().skip(d) {
                    let need = DATA_OFFSET + geo.member_bytes(i);
                    if m.size() < need {
                        return Err(ArrayError::BadMember(format!(
                            "{path}: check drive array member too small: {} bytes, needs {need} so that each CDA ({w} member(s)) holds the {} bytes used on each data drive",
                            m.size(),
                            geo.member_data_bytes()
                        )));
                    }
                }
                geo
            }
            _ => Geometry::new(o.level, n, o.unit, o.block, min_size - DATA_OFFSET)?,
        };
        let sb = Superblock {
            format_version: crate::superblock::FORMAT_VERSION,
            array_uuid: Uuid::new_v4(),
            member_uuid: Uuid::nil(),
            member_index: 0,
            role: MemberRole::Stripe,
            member_data_size: geo.member_data_bytes(),
            data_offset: DATA_OFFSET,
            geometry: geo.clone(),
            events: 1,
            state: ArrayState::Clean,
            member_states: vec![MemberState::Active; n],
            member_uuids: (0..n).map(|_| Uuid::new_v4()).collect(),
            member_paths: members.iter().map(|(_, p)| p.clone()).collect(),
            created: now_secs(),
            journal: journal.as_ref().map(|(_, p)| p.clone()),
            home: None,
            reshape: None,
            spares: Vec::new(),
            member_hosts: Vec::new(),
            lost: Vec::new(),
            session: Uuid::new_v4(),
            prev_session: Uuid::nil(),
            bitmap: None,
            left: Vec::new(),
            resync_from: 0,
            last_scrub: None,
            owner: None,
            replaced: Vec::new(),
            hot: None,
            write_mostly: Vec::new(),
        };
        let journal = match journal {
            Some((dev, _)) => Some(Journal::format(dev, sb.array_uuid, sb.session)?),
            None => None,
        };
        let mems: Vec<Option<Arc<dyn Member>>> = members.into_iter().map(|(m, _)| Some(m)).collect();
        let arr = Array::assemble(geo, mems, sb, true, journal)?;
        arr.write_superblocks(|_| {})?;
        if !fresh && !o.assume_clean && arr.geometry().m > 0 {
            // Existing devices hold arbitrary bytes: make code agree with them.
            arr.scrub(true, &|_, _| {})?;
        }
        Ok(arr)
    }

    // ------------------------------------------------------------------ open

    /// Assemble an array from its members' superblocks.
    pub fn open(spec: &ArraySpec, writable: bool) -> Result<Array, ArrayError> {
        let arr = Self::open_once(spec, writable)?;
        let journaled = arr.sb.lock().journal.is_some();
        let torn = journaled && (arr.journal_pending > 0 || arr.opened_dirty);
        if writable || !(torn || arr.shape().copy.is_some()) {
            return Ok(arr);
        }
        // A read-only open of an array whose journal holds records a crash
        // left, or whose grow was cut off in its critical section: recover
        // first (as a read-only ext4 mount replays its journal), so readers
        // never see a torn stripe.
        drop(arr);
        // Best effort: without write access (or the journal) the reader gets
        // the members as they are, and `opened_dirty` says so.
        let Ok(w) = Self::open_once(spec, true) else { return Self::open_once(spec, false) };
        let replayed = w.replayed.clone();
        w.close()?;
        drop(w);
        let mut arr = Self::open_once(spec, false)?;
        arr.open_warnings.extend(replayed.as_ref().and_then(ReplayReport::warning));
        arr.replayed = replayed;
        Ok(arr)
    }

    fn open_once(spec: &ArraySpec, writable: bool) -> Result<Array, ArrayError> {
        Self::open_once_with(spec, writable, false)
    }

    /// Give the array `dev` (named `hint`) as its write-ahead journal, in
    /// place of the one its superblock names (or of none), as md's
    /// `--add-journal`.  The array must not be open elsewhere.
    ///
    /// When the old journal can still be read, opening replays it and
    /// closing empties it first.  When it cannot and the array was not
    /// shut down cleanly, the records a crash left are gone: refused
    /// without `force`; with it, every stripe's code is made to agree with
    /// its data (a repairing scrub), and writes a write-back cache volume
    /// held only in that journal are lost.
    pub fn replace_journal(spec: &ArraySpec, dev: Arc<dyn Member>, hint: String, force: bool) -> Result<JournalReplaced, ArrayError> {
        let old_usable = match Self::open_once(spec, true) {
            Ok(arr) => {
                arr.close()?;
                true
            }
            Err(_) => false,
        };
        let mut arr = Self::open_once_with(spec, true, true)?;
        let old = arr.sb.lock().journal.clone();
        let dirty = arr.opened_dirty;
        if dirty && !old_usable && !force {
            return Err(ArrayError::Usage(format!(
                "array {} was not shut down cleanly and its journal {} cannot be read: the records a crash left in it are gone; \
                 use --force to attach the new journal and resync every stripe (a write-back cache's writes held only in the old journal are lost)",
                arr.sb.lock().array_uuid,
                old.as_deref().unwrap_or("(none)")
            )));
        }
        // Without a journal before, stripes of an array not shut down
        // cleanly may disagree where the crash cut writes off, and the
        // new journal knows nothing of them: resync them first (with a
        // bitmap, the regions it marks).
        let unsynced = dirty && old_usable && old.is_none() && arr.geometry().m > 0;
        if unsynced {
            arr.resync(&|_, _| {})?;
        }
        let sb = arr.superblock();
        arr.journal = Some(Journal::format(dev, sb.array_uuid, sb.session)?);
        // The journal closes the write hole itself: a bitmap goes.
        arr.write_superblocks(|s| {
            s.journal = Some(hint);
            s.bitmap = None;
            s.left.clear();
        })?;
        *arr.bitmap.get_mut() = None;
        arr.journal_unusable = None;
        let resynced = dirty && !old_usable;
        if resynced {
            arr.scrub(true, &|_, _| {})?;
        }
        let resynced = resynced || unsynced;
        arr.close()?;
        Ok(JournalReplaced { old, old_usable, resynced })
    }

    /// [`Array::open_once`]; `replacing`: writable without the journal the
    /// superblock names, which [`Array::replace_journal`] replaces.
    fn open_once_with(spec: &ArraySpec, writable: bool, replacing: bool) -> Result<Array, ArrayError> {
        let paths = spec.member_paths()?;
        let mut found = Vec::new();
        let mut rejected = Vec::new();
        let mut listed_journal: Option<Arc<dyn Member>> = None;
        for p in &paths {
            let m = match Device::open(p) {
                Ok(m) => m,
                Err(e) => {
                    rejected.push(format!("{e}; not used"));
                    continue;
                }
            };
            m.lock(writable).map_err(|e| ArrayError::Usage(e.to_string()))?;
            match Superblock::read_from(&m) {
                Ok(sb) => found.push(Found { m: Arc::new(m), sb, path: p.display().to_string() }),
                // The journal may be named among the members.
                Err(e) if Journal::is_journal(&m) => {
                    if listed_journal.replace(Arc::new(m)).is_some() {
                        return Err(ArrayError::Usage(format!("two journals given: {} is the second ({e})", p.display())));
                    }
                }
                Err(e) => rejected.push(format!("{e}; not used")),
            }
        }
        let mut place = Place::of(spec);
        let newest = crate::assemble::chosen(&found);
        if let Some(sb) = &newest {
            place.detect_copy(sb);
        }
        let journal = match (newest.and_then(|sb| sb.journal), listed_journal) {
            _ if replacing => Err(REPLACING.to_string()),
            (None, _) => Err(NOT_GIVEN.to_string()),
            (Some(_), Some(listed)) => Ok(listed),
            (Some(hint), None) => Self::open_journal_hint(&hint, &place, writable)?,
        };
        Self::assemble_found(found, rejected, place, (writable, start_dirty_degraded()), matches!(spec, ArraySpec::Dir(_)), journal)
    }

    /// A read-only open without the journal its superblock names: why,
    /// in `info` and in a warning (which says what reads may miss).
    fn journal_cannot_be_used(&mut self, why: String) {
        let path = self.sb.lock().journal.clone().unwrap_or_default();
        let dirty = if self.opened_dirty {
            "; the array was not shut down cleanly, so reads may show old bytes of acknowledged writes the journal holds until it is replayed"
        } else {
            ""
        };
        self.open_warnings.push(format!(
            "the write-ahead journal {path} cannot be used ({why}): the array is open read-only from its members as they are{dirty}; writing needs the journal"
        ));
        self.journal_unusable = Some(why);
    }

    /// Open the journal a superblock names (a hint, resolved by `place`).
    /// Read-only, a journal that cannot be used is no error: why, instead.
    fn open_journal_hint(hint: &str, place: &Place, writable: bool) -> Result<Result<Arc<dyn Member>, String>, ArrayError> {
        let Some(p) = place.resolve(hint) else {
            if writable {
                return Err(ArrayError::BadMember(format!("the array's write-ahead journal cannot be used: {}", place.refusal(hint))));
            }
            return Ok(Err(place.refusal(hint)));
        };
        match Device::open(Path::new(&p)).and_then(|m| m.lock(writable).map(|_| m)) {
            Ok(m) => Ok(Ok(Arc::new(m) as Arc<dyn Member>)),
            Err(e) if writable => Err(ArrayError::BadMember(format!("the array's write-ahead journal cannot be opened: {e}"))),
            Err(e) => Ok(Err(e.to_string())),
        }
    }

    /// Open the journal on `dev` when it is this array's: its header names
    /// the session the members carry, or the one before (the members
    /// started a session the header did not get), or none (written before
    /// sessions).  Otherwise another copy of the array wrote it last.
    fn open_own_journal(dev: Arc<dyn Member>, sb: &Superblock) -> Result<(Journal, crate::journal::JournalLog), ArrayError> {
        let (j, log) = Journal::open(dev, sb.array_uuid)?;
        let s = j.session();
        if s.is_nil() || s == sb.session || s == sb.prev_session {
            return Ok((j, log));
        }
        Err(ArrayError::BadMember(format!(
            "{}: the journal was last written by another copy of array {} (session {}; these members are at session {}): \
             its records are that copy's writes; give this array a journal of its own with `mosaic replace-journal`",
            j.describe(),
            sb.array_uuid,
            fresh::short_session(s),
            fresh::short_session(sb.session)
        )))
    }

    /// Assemble from already-opened members (tests, benchmarks, RAM arrays).
    pub fn open_members(members: Vec<Arc<dyn Member>>, writable: bool) -> Result<Array, ArrayError> {
        Self::open_members_with_journal(members, writable, None)
    }

    /// [`Array::open_members`] with the array's journal device.
    pub fn open_members_with_journal(members: Vec<Arc<dyn Member>>, writable: bool, journal: Option<Arc<dyn Member>>) -> Result<Array, ArrayError> {
        Self::open_members_with(members, writable, journal, start_dirty_degraded())
    }

    /// [`Array::open_members_with_journal`], saying whether a dirty,
    /// degraded array without a journal may open for writing
    /// ([`refuse_dirty_degraded`]) for this open alone.
    pub fn open_members_with(members: Vec<Arc<dyn Member>>, writable: bool, journal: Option<Arc<dyn Member>>, dirty_degraded: bool) -> Result<Array, ArrayError> {
        let mut found = Vec::new();
        let mut rejected = Vec::new();
        for m in members {
            match Superblock::read_from(m.as_ref()) {
                Ok(sb) => found.push(Found { path: m.describe(), m, sb }),
                Err(e) => rejected.push(format!("{e}; not used")),
            }
        }
        Self::assemble_found(found, rejected, Place::default(), (writable, dirty_degraded), false, journal.ok_or_else(|| NOT_GIVEN.to_string()))
    }

    /// `writable`: for writing, and whether a dirty degraded array without
    /// a journal may be ([`refuse_dirty_degraded`]).
    fn assemble_found(
        found: Vec<Found>,
        rejected: Vec<String>,
        place: Place,
        (writable, dirty_degraded): (bool, bool),
        use_hints: bool,
        journal_dev: Result<Arc<dyn Member>, String>,
    ) -> Result<Array, ArrayError> {
        let (spares, found): (Vec<Found>, Vec<Found>) = found.into_iter().partition(|f| f.sb.role == MemberRole::Spare);
        let (replacements, found): (Vec<Found>, Vec<Found>) = found.into_iter().partition(|f| f.sb.role == MemberRole::Replacement);
        let Assembly { mut sb, slots, warnings, states_changed } = assemble(found, rejected, &place, writable, use_hints)?;
        if writable && !dirty_degraded {
            refuse_dirty_degraded(&sb)?;
        }
        // Spares are found where their hints say even when the members were
        // listed (as the journal is): a list that leaves them out must not
        // drop them from the array.
        let spares = crate::spare::attach(&mut sb, spares, &place, writable);
        if sb.home.is_none() || place.copy_of.is_none() && place.dir_spec && !Path::new(sb.home.as_deref().unwrap_or("")).exists() {
            // Moved (its old home is gone) or never had one: it lives here now.
            sb.home = place.base.as_ref().filter(|_| place.dir_spec).map(|b| b.display().to_string());
        }
        let geo = sb.geometry.clone();
        let mut log = crate::journal::JournalLog::default();
        let mut pending = 0;
        let mut unusable = None;
        let journal = match (&sb.journal, journal_dev) {
            (Some(_), Ok(dev)) if writable => {
                let (j, found) = Self::open_own_journal(dev, &sb)?;
                log = found;
                Some(j)
            }
            (None, Ok(dev)) => {
                return Err(ArrayError::Usage(format!("{}: array {} has no journal", dev.describe(), sb.array_uuid)));
            }
            (Some(p), Err(why)) if writable && why != REPLACING => {
                return Err(ArrayError::BadMember(format!("array {} needs its write-ahead journal ({p}) to open for writing", sb.array_uuid)));
            }
            (Some(_), Ok(dev)) => {
                // Read-only: only look whether a crash left records.
                match Self::open_own_journal(dev, &sb) {
                    Ok((_, r)) => pending = r.len(),
                    Err(e) => unusable = Some(e.to_string()),
                }
                None
            }
            (Some(_), Err(why)) => {
                unusable = Some(why);
                None
            }
            (None, Err(_)) => None,
        };
        let mut arr = Array::assemble(geo, slots, sb, writable, journal)?;
        *arr.spares.lock() = spares;
        arr.record_assembly(warnings, states_changed)?;
        arr.opened_dirty = arr.sb.lock().state == ArrayState::Dirty;
        let was_dirty = arr.opened_dirty;
        arr.journal_pending = pending;
        // Not given (assembled from members without it): worth a word only
        // when it may hold what a crash left.
        if let Some(why) = unusable.filter(|w| w != REPLACING && (w != NOT_GIVEN || arr.opened_dirty)) {
            arr.journal_cannot_be_used(why);
        }
        if arr.journal.is_some() {
            let rep = arr.replay(log)?;
            // Every write went through the journal, so after its replay every
            // stripe's code agrees with its data: no resync is needed.
            if arr.opened_dirty {
                arr.write_superblocks(|s| s.state = ArrayState::Clean)?;
            }
            arr.opened_dirty = false;
            // Damaged records: the user must hear which stripes to scrub.
            arr.open_warnings.extend(rep.warning());
            arr.replayed = Some(rep);
        }
        // (A journaled array opened read-only is replayed at its next
        // writable open; an array without code has nothing to resync.)
        *arr.unsynced.get_mut() = arr.opened_dirty && arr.sb.lock().journal.is_none() && arr.geometry().m > 0;
        if *arr.unsynced.get_mut() && arr.sb.lock().bitmap.is_none() {
            *arr.resync_done.get_mut() = arr.sb.lock().resync_from;
        }
        arr.load_bitmap();
        // After the replay: the journal's records name the old layout.
        if let Some(w) = arr.settle_critical_section() {
            arr.open_warnings.push(w);
        }
        arr.attach_hot(replacements, &place, was_dirty);
        Ok(arr)
    }

    /// Apply journal records to the members in service, flush them, and
    /// start an empty log.  A record older than a damaged one never writes
    /// where the damaged one wrote ([`crate::journal::JournalLog::plan`]);
    /// the report names the damaged, held-back and tail records with their
    /// stripes.
    fn replay(&self, log: crate::journal::JournalLog) -> Result<ReplayReport, ArrayError> {
        let (records, mut rep) = log.plan(&self.geometry());
        let h = self.health();
        let mut logical: Vec<(u64, &[u8])> = Vec::new();
        let mut rows: std::collections::BTreeSet<u64> = Default::default();
        for (_, entries) in &records {
            rep.records += 1;
            for e in entries {
                match e {
                    Entry::Logical { offset, data } => {
                        logical.push((*offset, data));
                        let s = self.geometry().stripe_data_bytes();
                        rows.extend(offset / s..offset.saturating_add(data.len() as u64).div_ceil(s));
                    }
                    Entry::Resync { row } => {
                        rows.insert(*row);
                    }
                    // The journal resolved every copy it read into a device write.
                    Entry::Copy { seq, .. } => return Err(ArrayError::BadMember(format!("journal copy entry of record {seq} unresolved"))),
                    Entry::Device { member, offset, data } => {
                        if *member >= self.geometry().members || matches!(h.states[*member], MemberState::Failed) {
                            continue;
                        }
                        self.replay_device(*member, *offset, data)?;
                        rep.ops += 1;
                        rep.bytes += data.len() as u64;
                    }
                }
            }
        }
        if !records.is_empty() {
            self.flush_replayed()?;
        }
        // Rows whose parity was cached, and rows the cached writes touch,
        // get code recomputed from their data; then the cached writes go
        // to the members in order.  A crash in here replays the same
        // records again to the same end.  Rows past the whole stripes (a
        // rebuild stopped by a second failure) cannot be read, nor resynced.
        let whole = self.geometry().whole_stripes(&h.states);
        for &row in rows.iter().filter(|&&r| r < whole) {
            self.scrub_region(row, true)?;
        }
        rep.lost = crate::lost::lost_units(&self.geometry(), &h, &records);
        self.record_lost(&rep.lost)?;
        for (off, data) in &logical {
            self.check_range(*off, data.len() as u64)?;
            self.write_stripes(*off, data, false)?;
            rep.ops += 1;
            rep.bytes += data.len() as u64;
        }
        if let Some(j) = &self.journal {
            if !records.is_empty() {
                self.flush_replayed()?;
            }
            j.replayed()?;
        }
        Ok(rep)
    }

    /// Write one device entry of a replayed record to its member.
    fn replay_device(&self, member: usize, offset: u64, data: &[u8]) -> Result<(), ArrayError> {
        let Some(m) = self.member(member) else { return Ok(()) };
        let end = offset.checked_add(data.len() as u64).and_then(|e| e.checked_add(DATA_OFFSET));
        if end.is_none_or(|e| e > m.size()) {
            return Err(ArrayError::BadMember(format!("journal record writes {} bytes at {offset} beyond member {member}", data.len())));
        }
        m.write_at(data, DATA_OFFSET + offset).map_err(|e| ArrayError::Io(format!("journal replay to member {member}: {e}")))
    }

    /// Make a write's device operations (and the policy's marks) durable in
    /// the journal, as one record, before they reach the members.  A write
    /// that `copies` names (its bytes are a logical record's since the
    /// last checkpoint) is logged as a copy of them, not with its bytes
    /// again.  A `rider` not yet logged goes in the same record.  The
    /// guard keeps a checkpoint from starting until the caller's member
    /// writes are done.
    fn journal_append(&self, writes: &[DevWrite<'_>], marks: &[Mark], how: Logged<'_>) -> Result<Option<RwLockReadGuard<'_, ()>>, ArrayError> {
        let Some(j) = &self.journal else { return Ok(None) };
        let rider = how.rider.filter(|r| r.seq.get().is_none());
        loop {
            let g = self.inflight.read();
            let since = j.checkpoint_seq();
            let mut entries = journal_entries_of(writes, marks, how.copies, since);
            entries.extend(rider.map(|r| Entry::Logical { offset: r.offset, data: r.data }));
            let expanded = (how.steps.len() > 1).then(|| expanded_by_step(writes, marks, how.copies, rider, how.steps, since));
            if let Some(seq) = j.try_append_as(&entries, expanded)? {
                j.sync_to(seq)?;
                if let Some(r) = rider {
                    let _ = r.seq.set(seq);
                }
                return Ok(Some(g));
            }
            drop(g);
            if !self.auto_checkpoint.load(std::sync::atomic::Ordering::Acquire) {
                return Err(ArrayError::Io(format!("journal {} is full; the cache volume checkpoints it", j.describe())));
            }
            // Ring full: wait for every write in flight, flush, start over.
            self.journal_checkpoint()?;
        }
    }

    /// Wait for every write in flight, flush the members, and start the
    /// journal over.
    pub(crate) fn journal_checkpoint(&self) -> Result<(), ArrayError> {
        let Some(j) = &self.journal else { return Ok(()) };
        let _x = self.inflight.write();
        self.flush()?;
        j.checkpoint()
    }

    /// Journal a record of entries that are not member writes (a cache
    /// volume's logical writes) and make it durable; its sequence number
    /// (0 without a journal).
    pub(crate) fn journal_entries(&self, entries: &[Entry<&[u8]>]) -> Result<u64, ArrayError> {
        let Some(j) = &self.journal else { return Ok(0) };
        match j.try_append(entries)? {
            Some(seq) => j.sync_to(seq).map(|_| seq),
            None => Err(ArrayError::Io(format!("journal {} is full; the cache volume checkpoints it", j.describe()))),
        }
    }

    /// Whether a full journal ring checkpoints by itself (false under a
    /// cache volume, which checkpoints it).
    pub(crate) fn auto_checkpoint(&self) -> bool {
        self.auto_checkpoint.load(std::sync::atomic::Ordering::Acquire)
    }

    pub(crate) fn set_auto_checkpoint(&self, on: bool) {
        self.auto_checkpoint.store(on, std::sync::atomic::Ordering::Release);
    }

    /// Whether every member in service and the journal are RAM or files
    /// on a RAM file system: a request is copies that complete in
    /// microseconds, never a wait on a drive or a network.
    pub fn in_memory(&self) -> bool {
        self.exec.all_cheap() && self.journal.as_ref().map_or(true, Journal::cheap)
    }

    /// The journal, if the array has one.
    pub fn journal(&self) -> Option<&Journal> {
        self.journal.as_ref()
    }

    fn assemble(geo: Geometry, members: Vec<Option<Arc<dyn Member>>>, sb: Superblock, writable: bool, journal: Option<Journal>) -> Result<Array, ArrayError> {
        let shape = Shape::of(geo.clone(), sb.reshape.as_ref(), &sb.write_mostly)?;
        let health = Health { states: sb.member_states.clone() };
        let n = geo.members;
        let any_lost = std::sync::atomic::AtomicBool::new(!sb.lost.is_empty());
        Ok(Array {
            shape: arc_swap::ArcSwap::from_pointee(shape),
            gate: mosaic_exec::Gate::default(),
            exec: Executor::new(members, DATA_OFFSET),
            health: RwLock::new(health),
            sb: Mutex::new(sb),
            errors: Mutex::new(vec![0; n]),
            checksum_errors: Mutex::new(vec![0; n]),
            corrected: Mutex::new(Default::default()),
            correct_reads: std::sync::atomic::AtomicBool::new(true),
            writable,
            dirty: std::sync::atomic::AtomicBool::new(false),
            dirty_lock: Mutex::new(()),
            session_started: std::sync::atomic::AtomicBool::new(false),
            wrote: std::sync::atomic::AtomicBool::new(false),
            last_update: Mutex::new(Instant::now()),
            epoch_ns: std::sync::atomic::AtomicU64::new(EPOCH.as_nanos() as u64),
            closed: Mutex::new(false),
            auto_failed: Mutex::new(Vec::new()),
            hot: Mutex::new(None),
            paused: Mutex::new(None),
            opened_dirty: false,
            unsynced: std::sync::atomic::AtomicBool::new(false),
            scrub_interrupt: std::sync::atomic::AtomicBool::new(false),
            resync_done: std::sync::atomic::AtomicU64::new(0),
            journal,
            auto_checkpoint: std::sync::atomic::AtomicBool::new(true),
            inflight: RwLock::new(()),
            replayed: None,
            journal_pending: 0,
            journal_unusable: None,
            open_warnings: Vec::new(),
            spares: Mutex::new(Vec::new()),
            any_lost,
            bitmap: RwLock::new(None),
        })
    }

    // ------------------------------------------------------------ metadata

    /// Update the superblock template and write it to every present,
    /// non-failed member, in two rounds: each bumps the event counter and
    /// reaches every member before the next starts, so a crash part-way
    /// leaves members at most one event apart, while a member that missed
    /// an update (and so possibly data) is two or more behind: stale.
    pub(crate) fn write_superblocks(&self, f: impl FnOnce(&mut Superblock)) -> Result<(), ArrayError> {
        self.write_superblocks_with(false, f)
    }

    /// [`Array::write_superblocks`]; `advance_rebuild`: record how far each
    /// member being rebuilt is in service now.  Only a rebuild checkpoint
    /// does, after flushing those members: any other superblock write
    /// keeps the position recorded last, so a crash never leaves a
    /// position past units the replacement had not made durable.
    pub(crate) fn write_superblocks_with(&self, advance_rebuild: bool, f: impl FnOnce(&mut Superblock)) -> Result<(), ArrayError> {
        let mut sb = self.sb.lock();
        f(&mut sb);
        // What members in service carry: the session of the last update.
        let carried = sb.session;
        let new_session = !self.session_started.swap(true, std::sync::atomic::Ordering::AcqRel);
        if new_session {
            sb.prev_session = sb.session;
            sb.session = Uuid::new_v4();
        }
        let now = self.health.read().states.clone();
        let recorded = std::mem::take(&mut sb.member_states);
        if sb.bitmap.is_some() {
            note_left(&mut sb.left, &recorded, &now, carried);
        } else {
            // Only a bitmap says what a member that left missed.
            sb.left.clear();
        }
        sb.member_states = now
            .iter()
            .enumerate()
            .map(|(i, s)| match (s, recorded.get(i)) {
                (MemberState::Rebuilding { .. }, _) if advance_rebuild => *s,
                (MemberState::Rebuilding { done }, Some(MemberState::Rebuilding { done: was })) => MemberState::Rebuilding { done: (*done).min(*was) },
                (MemberState::Rebuilding { .. }, _) => MemberState::Rebuilding { done: 0 },
                _ => *s,
            })
            .collect();
        for round in 0..2 {
            loop {
                sb.events += 1;
                let Err((i, e)) = self.write_superblock_round(&sb) else { break };
                // A member whose superblock cannot be written is failed and
                // the round written again: the members after it would
                // otherwise fall behind it and be judged stale.
                self.note_failed(i, &e.to_string());
                sb.member_states[i] = MemberState::Failed;
                // It left while active, carrying the last update's session
                // (this one's, when the first round reached it).
                if sb.bitmap.is_some() && matches!(now[i], MemberState::Active) {
                    sb.left.resize(now.len(), Uuid::nil());
                    sb.left[i] = if round == 0 { carried } else { sb.session };
                }
                if self.columns_out() > self.geometry().m {
                    return Err(e);
                }
            }
        }
        *self.last_update.lock() = Instant::now();
        match &self.journal {
            // After the members carry the session, before it appends.
            Some(j) if new_session => j.set_session(sb.session),
            _ => Ok(()),
        }
    }

    /// Write `sb` to every present, non-failed member (paths inside the
    /// array's home stored relative to it).
    /// The member whose write failed, with the error.
    fn write_superblock_round(&self, sb: &Superblock) -> Result<(), (usize, ArrayError)> {
        let home = sb.home.as_deref();
        let mut disk = sb.clone();
        disk.member_paths = sb.member_paths.iter().map(|p| relativize(p, home)).collect();
        disk.journal = sb.journal.as_deref().map(|p| relativize(p, home));
        // Last member first: a grow's new members carry the new geometry
        // before any old member names them (a crash in between leaves
        // an array that assembles, in the old geometry or the new).
        for i in (0..sb.member_uuids.len()).rev() {
            let Some(m) = self.exec.member(i) else { continue };
            if matches!(sb.member_states[i], MemberState::Failed) {
                continue;
            }
            disk.member_index = i;
            disk.member_uuid = sb.member_uuids[i];
            disk.write_to(m.as_ref()).map_err(|e| (i, e))?;
        }
        Ok(())
    }

    /// Keep what assembly found, and record newly failed (missing or
    /// stale) members on the others so they stay failed.
    fn record_assembly(&mut self, warnings: Vec<String>, states_changed: bool) -> Result<(), ArrayError> {
        self.open_warnings = warnings;
        if self.writable && states_changed {
            self.write_superblocks(|_| {})?;
        }
        Ok(())
    }

    /// What the open found wrong: devices not used, and why.
    pub fn open_warnings(&self) -> &[String] {
        &self.open_warnings
    }

    /// The geometry (during a grow: the one being grown to).
    pub fn geometry(&self) -> Geometry {
        self.shape.load().layout.planner.geo.clone()
    }

    /// The layout (during a grow: the one being grown to).
    pub fn layout(&self) -> Arc<FixedLayout> {
        self.shape.load().layout.clone()
    }

    /// The shape now (held while a request runs; a grow step that
    /// replaces it holds the gate, so no request runs on the old one).
    pub(crate) fn shape(&self) -> arc_swap::Guard<Arc<Shape>> {
        self.shape.load()
    }

    pub(crate) fn set_shape(&self, s: Shape) {
        self.shape.store(Arc::new(s));
        self.exec.bump();
    }

    /// Logical bytes clients may use (during a grow: the old capacity).
    pub fn capacity(&self) -> u64 {
        self.shape().capacity()
    }

    /// A number that moves whenever a member's state changes (the
    /// executor's epoch): cheaper to compare than two [`Array::health`]s.
    pub(crate) fn health_epoch(&self) -> u64 {
        self.exec.epoch()
    }

    pub fn health(&self) -> Health {
        self.health.read().clone()
    }

    pub fn superblock(&self) -> Superblock {
        self.sb.lock().clone()
    }

    /// The logical ranges whose data is lost (see [`crate::lost`]),
    /// without copying the rest of the superblock.
    pub fn lost(&self) -> Vec<crate::LostRange> {
        self.sb.lock().lost.clone()
    }

    /// Device-operation counters since open: totals and per member.
    pub fn counters(&self) -> (OpCounts, Vec<MemberCounters>) {
        let c = self.exec.counters();
        let errors = self.errors.lock();
        let members = c
            .members
            .iter()
            .zip(errors.iter())
            .map(|(d, &errors)| MemberCounters { reads: d.reads, read_bytes: d.read_bytes, writes: d.writes, write_bytes: d.write_bytes, errors })
            .collect();
        (c.ops, members)
    }

    pub fn reset_counters(&self) {
        self.exec.reset_counters();
        self.errors.lock().fill(0);
    }

    /// Members failed automatically after I/O errors since open.
    pub fn auto_failed(&self) -> Vec<(usize, String)> {
        self.auto_failed.lock().clone()
    }

    pub fn info(&self) -> ArrayInfo {
        let errs = self.exec.counters().errors;
        let sb = self.sb.lock().clone();
        let h = self.health.read();
        ArrayInfo {
            uuid: sb.array_uuid,
            level: self.geometry().level.to_string(),
            members: self.geometry().members,
            data_columns: self.geometry().k,
            code_columns: self.geometry().m,
            columns_out: self.geometry().columns_out(&out_of_service(&h)),
            stripe_unit: self.geometry().unit,
            block_size: self.geometry().block,
            stripes: self.geometry().stripes,
            capacity: self.capacity(),
            member_data_size: sb.member_data_size,
            data_offset: sb.data_offset,
            events: sb.events,
            state: sb.state,
            degraded: h.is_degraded(),
            member_list: (0..self.geometry().members)
                .map(|i| MemberInfo {
                    index: i,
                    path: sb.member_paths[i].clone(),
                    uuid: sb.member_uuids[i],
                    state: h.states[i],
                    present: self.exec.member(i).is_some(),
                    read_errors: errs.get(i).map_or(0, |e| e[0]),
                    write_errors: errs.get(i).map_or(0, |e| e[1]),
                    checksum_errors: self.checksum_errors.lock().get(i).copied().unwrap_or(0),
                    corrected_reads: self.corrected_reads(i),
                    host: crate::domain::domain_of(&sb.member_paths[i], sb.member_hosts.get(i).map(String::as_str)),
                    remote: self.exec.member(i).and_then(|m| m.remote_latency()),
                    // (`left` is kept only with a bitmap.)
                    readd: matches!(h.states[i], MemberState::Failed) && sb.left.get(i).is_some_and(|l| !l.is_nil()),
                    replacing: self.hot.lock().as_ref().filter(|h| h.0 == i).map(|h| h.1.clone()).or_else(|| {
                        let paused = sb.hot.as_ref().filter(|h| h.member == i);
                        paused.map(|h| format!("{} (paused at stripe {} of {})", h.path, h.copied, self.layout().regions()))
                    }),
                    write_mostly: sb.write_mostly.contains(&i),
                    inner_out: self.exec.member(i).map(|m| m.inner_out()).unwrap_or_default(),
                })
                .collect(),
            journal: sb.journal.clone(),
            journal_replayed: self.replayed.clone(),
            journal_fill: self.journal.as_ref().map(|j| JournalFill { used: j.used(), capacity: j.capacity() }),
            journal_failed: self.journal.as_ref().and_then(|j| j.failed().map(str::to_string)).or_else(|| self.journal_unusable.clone()),
            spares: self.spare_paths(),
            grow: sb.reshape.as_ref().map(|r| GrowProgress { from_members: r.from.members, done_stripes: r.pos, total_stripes: r.from.stripes }),
            lost: sb.lost.clone(),
            resync_needed: self.unsynced.load(std::sync::atomic::Ordering::Acquire),
            resync_from: if self.unsynced.load(std::sync::atomic::Ordering::Acquire) && self.bitmap().is_none() { self.resync_done.load(std::sync::atomic::Ordering::Acquire) } else { 0 },
            last_scrub: sb.last_scrub,
            owner: sb.owner.clone(),
            created: sb.created,
            replaced: sb.replaced.clone(),
            hot_paused: sb.hot.clone(),
            bitmap: self.bitmap().map(|b| BitmapStatus { chunk_bytes: b.chunk() * self.geometry().unit, regions: b.regions(), dirty_regions: b.dirty() }),
        }
    }

    /// The array this one is part of, as its superblocks record it.
    pub fn owner(&self) -> Option<crate::superblock::Owner> {
        self.sb.lock().owner.clone()
    }

    /// Record in every superblock that this array is part of `owner` (a
    /// tier's side, a remapped array's inner array): opened on its own it
    /// is then refused for writing without `--force`.
    pub fn set_owner(&self, owner: crate::superblock::Owner) -> Result<(), ArrayError> {
        self.write_superblocks(|s| s.owner = Some(owner.clone()))
    }

    // --------------------------------------------------------------- health

    /// Each member's failure domain ([`crate::domain`]).
    pub fn domains(&self) -> Vec<String> {
        let sb = self.sb.lock();
        sb.member_paths.iter().enumerate().map(|(i, p)| crate::domain::domain_of(p, sb.member_hosts.get(i).map(String::as_str))).collect()
    }

    /// Label member `idx` with the host that holds it (its failure
    /// domain), and record it on disk.
    pub fn set_member_host(&self, idx: usize, host: &str) -> Result<(), ArrayError> {
        let n = self.geometry().members;
        if idx >= n || !crate::domain::valid_label(host) {
            return Err(ArrayError::Usage(format!("cannot label member {idx} of 0..{} with host {host:?}", n.saturating_sub(1))));
        }
        self.write_superblocks(|s| {
            s.member_hosts.resize(n, String::new());
            s.member_hosts[idx] = host.to_string();
        })
    }

    /// The most columns one stripe has lost to members not in service
    /// ([`Geometry::columns_out`]): more than the code columns and some
    /// data cannot be read.
    pub fn columns_out(&self) -> usize {
        self.geometry().columns_out(&out_of_service(&self.health()))
    }

    /// Mark a member failed (command or I/O error) and record it on disk.
    pub fn fail_member(&self, idx: usize) -> Result<(), ArrayError> {
        if idx >= self.geometry().members {
            return Err(ArrayError::Usage(format!("no member {idx}: the array has members 0..{}", self.geometry().members - 1)));
        }
        {
            let h = self.health.read();
            if matches!(h.states[idx], MemberState::Failed) {
                return Err(ArrayError::Usage(format!("member {idx} is already failed")));
            }
            let mut out = out_of_service(&h);
            let failed = out.len();
            if !out.contains(&idx) {
                out.push(idx);
            }
            let rebuilding = matches!(h.states[idx], MemberState::Rebuilding { .. });
            if !rebuilding && self.geometry().columns_out(&out) > self.geometry().m {
                return Err(ArrayError::Usage(format!(
                    "refusing to fail member {idx}: {failed} member(s) already failed and {} tolerates {}; data would be lost",
                    self.geometry().level, self.geometry().m
                )));
            }
        }
        self.set_failed(idx);
        self.write_superblocks(|_| {})
    }

    fn set_failed(&self, idx: usize) {
        self.set_health(idx, MemberState::Failed);
    }

    /// After an I/O error: fail the member (best effort on disk).
    pub(crate) fn fail_on_error(&self, idx: usize, err: &std::io::Error) {
        if self.note_failed(idx, &err.to_string()) {
            let _ = self.write_superblocks(|_| {});
        }
    }

    /// Fail member `idx` after an I/O error, in memory (the caller records
    /// it on disk): false if it had failed already.
    fn note_failed(&self, idx: usize, err: &str) -> bool {
        {
            let mut h = self.health.write();
            if matches!(h.states[idx], MemberState::Failed) {
                return false;
            }
            h.states[idx] = MemberState::Failed;
        }
        self.exec.bump();
        self.errors.lock()[idx] += 1;
        self.auto_failed.lock().push((idx, err.to_string()));
        true
    }

    /// Change a member's state; programs planned before are planned again.
    pub(crate) fn set_health(&self, idx: usize, st: MemberState) {
        self.health.write().states[idx] = st;
        self.exec.bump();
    }

    /// Add an active member after the last (a grow; the geometry follows).
    pub(crate) fn push_member(&self, m: Arc<dyn Member>) {
        self.exec.add_member(m);
        self.health.write().states.push(MemberState::Active);
        self.errors.lock().push(0);
        self.checksum_errors.lock().push(0);
    }

    /// Take the last member away (a level change that drops it; the
    /// geometry follows): its device.
    pub(crate) fn pop_member(&self) -> Option<Arc<dyn Member>> {
        let m = self.exec.remove_last_member();
        let n = self.exec.width();
        self.health.write().states.truncate(n);
        self.errors.lock().truncate(n);
        self.checksum_errors.lock().truncate(n);
        m
    }

    /// A scrub found member `m`'s column wrong.
    pub(crate) fn note_checksum_error(&self, m: usize) {
        if let Some(c) = self.checksum_errors.lock().get_mut(m) {
            *c += 1;
        }
    }

    /// Plan and run one request on `layout` (a grow's copy: no gate, no
    /// journal).
    pub(crate) fn submit_on(&self, layout: &FixedLayout, offset: u64, data: Client<'_>, len: u64, write: bool) -> Result<(), ArrayError> {
        let mut r = Request { arr: self, layout, offset, len, write };
        self.exec.submit(&mut r, data, None)
    }

    pub(crate) fn set_member(&self, idx: usize, m: Option<Arc<dyn Member>>) {
        let new = m.is_some();
        self.exec.set_member(idx, m);
        self.forget_corrected(idx);
        if new {
            self.new_device_counts(idx);
        }
    }

    /// [`mosaic_exec::Executor::swap_member`].
    pub(crate) fn swap_member(&self, idx: usize, expected: &Arc<dyn Member>, m: Arc<dyn Member>) -> bool {
        let swapped = self.exec.swap_member(idx, expected, m);
        if swapped {
            self.forget_corrected(idx);
            self.new_device_counts(idx);
        }
        swapped
    }

    /// A new device in slot `idx`: the errors `status` counts for the slot
    /// are its own from now on, not those of the device it replaced.
    fn new_device_counts(&self, idx: usize) {
        self.exec.forget_errors(idx);
        if let Some(c) = self.checksum_errors.lock().get_mut(idx) {
            *c = 0;
        }
    }

    /// The members whose devices hold more than the array uses of them
    /// (the array takes as much of each as its smallest holds): index, path
    /// and bytes unused, for those beyond 1 % of the device (mdadm warns
    /// the same at create).
    pub fn larger_members(&self) -> Vec<(usize, String, u64)> {
        let (g, sb) = (self.geometry(), self.superblock());
        (0..g.members)
            .filter_map(|i| {
                let size = self.member(i)?.size();
                let spare = size.saturating_sub(DATA_OFFSET + g.member_bytes(i));
                (spare > size / 100).then(|| (i, sb.member_paths[i].clone(), spare))
            })
            .collect()
    }

    pub(crate) fn member(&self, idx: usize) -> Option<Arc<dyn Member>> {
        self.exec.member(idx)
    }

    // ------------------------------------------------------------- executor

    /// Fail every member that returned an error.
    fn absorb(&self, failures: &[Failure]) {
        for f in failures {
            if f.member < self.geometry().members {
                self.fail_on_error(f.member, &f.error);
            }
        }
    }

    /// Run one program (maintenance, cache steps): its range locks, if
    /// any, are taken by the executor; `journaled` write phases go through
    /// the journal.  A member error fails the member; the error names
    /// `what`.
    pub(crate) fn run_program(&self, p: &Program, client: Client<'_>, what: &str) -> Result<Vec<Vec<u8>>, ArrayError> {
        self.run_program_logged(p, client, Logged::default(), what)
    }

    /// Buffers a program kept, back to the executor's scratch pool.
    pub(crate) fn give_back(&self, kept: Vec<Vec<u8>>) {
        self.exec.give_back(kept);
    }

    /// [`Array::run_program`] with its journal records written as `how`
    /// says (a cache volume's destage: copies, its write's logical entry,
    /// steps run beside each other).
    pub(crate) fn run_program_logged(&self, p: &Program, client: Client<'_>, how: Logged<'_>, what: &str) -> Result<Vec<Vec<u8>>, ArrayError> {
        let hook = ArrayJournal(self, how, self.bitmap());
        let journal: Option<&dyn JournalHook> = if hook.logs() { Some(&hook) } else { None };
        self.exec.run(p, client, journal).map_err(|e| match e {
            // The journal's own error says what failed; no member did.
            ExecError::Journal(m) => ArrayError::Io(m),
            e => {
                if let ExecError::Device(f) = &e {
                    self.absorb(f);
                }
                ArrayError::Io(format!("{what}: {e}"))
            }
        })
    }

    /// Record on disk, once, that writes are in progress (and, for the
    /// next epoch, that writes came).
    pub(crate) fn mark_dirty(&self) -> Result<(), ArrayError> {
        use std::sync::atomic::Ordering;
        if !self.wrote.load(Ordering::Relaxed) {
            self.wrote.store(true, Ordering::Relaxed);
        }
        if self.dirty.load(Ordering::Acquire) {
            return Ok(());
        }
        let _g = self.dirty_lock.lock();
        if !self.dirty.load(Ordering::Acquire) {
            // A crash may now tear any stripe: a resync's checkpoint no
            // longer holds (md writes `resync_offset` 0 while active).
            self.write_superblocks(|s| {
                s.state = ArrayState::Dirty;
                s.resync_from = 0;
            })?;
            self.dirty.store(true, Ordering::Release);
        }
        Ok(())
    }

    /// After a full repairing scrub the code agrees with the data: the
    /// array is no longer unsynced, and with no writes since open it is
    /// recorded clean (else its close records it so).
    pub(crate) fn mark_resynced(&self) -> Result<(), ArrayError> {
        use std::sync::atomic::Ordering;
        let _g = self.dirty_lock.lock();
        self.unsynced.store(false, Ordering::Release);
        if !self.dirty.load(Ordering::Acquire) && self.sb.lock().state == ArrayState::Dirty {
            self.write_superblocks(|s| {
                s.state = ArrayState::Clean;
                s.resync_from = 0;
            })?;
        }
        Ok(())
    }

    /// Record on the superblocks how far the resyncs of this open have
    /// verified ([`Superblock::resync_from`]; without a bitmap), the
    /// members flushed first so the repairs below it are durable.  Once
    /// writes came since open, only at the close (`closing`), when every
    /// write is on the members: a crash before may tear any stripe.
    pub(crate) fn checkpoint_resync(&self, closing: bool) -> Result<(), ArrayError> {
        use std::sync::atomic::Ordering;
        if self.bitmap().is_some() {
            return Ok(());
        }
        let _g = self.dirty_lock.lock();
        let pos = self.resync_done.load(Ordering::Acquire);
        if (self.dirty.load(Ordering::Acquire) && !closing) || pos == self.sb.lock().resync_from {
            return Ok(());
        }
        self.flush_members();
        self.write_superblocks(|s| s.resync_from = pos)
    }

    /// Lock the ranges of `stripes` (maintenance holds a region while it
    /// plans and runs programs without locks of their own).
    pub(crate) fn lock_stripes(&self, stripes: impl Iterator<Item = u64>) -> Vec<parking_lot::MutexGuard<'_, ()>> {
        self.exec.lock(stripes)
    }

    pub(crate) fn check_writable(&self) -> Result<(), ArrayError> {
        if self.writable {
            Ok(())
        } else {
            Err(ArrayError::Usage("array is open read-only".into()))
        }
    }

    /// A request's range must be whole blocks within the capacity.
    pub(crate) fn check_range(&self, offset: u64, len: u64) -> Result<(), ArrayError> {
        let sh = self.shape();
        sh.layout.planner.check(offset, len)?;
        if offset.checked_add(len).map_or(true, |e| e > sh.capacity()) {
            return Err(ArrayError::Usage(format!("request {offset}+{len} ends past the capacity {} (a grow is in progress)", sh.capacity())));
        }
        Ok(())
    }

    /// Read `buf.len()` bytes at logical `offset`.
    pub fn read(&self, offset: u64, buf: &mut [u8]) -> Result<(), ArrayError> {
        self.check_not_lost(offset, buf.len() as u64)?;
        let _g = self.gate.read();
        self.read_in(&self.shape(), offset, buf)
    }

    /// [`Array::read`] through the layouts of `sh`, without the gate.
    pub(crate) fn read_in(&self, sh: &Shape, offset: u64, buf: &mut [u8]) -> Result<(), ArrayError> {
        let n = sh.in_copy(offset, buf.len() as u64) as usize;
        let (head, buf) = buf.split_at_mut(n);
        if n > 0 {
            let copy = sh.copy.as_deref().expect("in_copy is 0 without a copy");
            let copy = copy.as_ref().map_err(|e| ArrayError::Io(format!("bytes 0..{} cannot be read: {e}", sh.copy_len())))?;
            head.copy_from_slice(&copy[offset as usize..offset as usize + n]);
        }
        let offset = offset + n as u64;
        for (layout, off, at) in sh.split(offset, buf.len() as u64) {
            let part = &mut buf[at.clone()];
            let mut r = Request { arr: self, layout, offset: off, len: part.len() as u64, write: false };
            self.exec.submit(&mut r, Client::Out(part), None)?;
        }
        Ok(())
    }

    /// Write `data` at logical `offset`.
    pub fn write(&self, offset: u64, data: &[u8]) -> Result<(), ArrayError> {
        self.check_writable()?;
        let len = data.len() as u64;
        self.check_range(offset, len)?;
        self.mark_dirty()?;
        let Some(j) = &self.journal else {
            self.write_stripes(offset, data, true)?;
            return self.written_whole(offset, len);
        };
        // A journal record holds whole stripes and at most a quarter of the
        // ring, so a large write goes in pieces of whole stripes (each piece
        // is atomic; a block device promises no more).
        let per_stripe = (self.geometry().k + self.geometry().m) as u64 * self.geometry().unit + 4096;
        let stripes = (j.capacity() / 4 / per_stripe).max(1);
        let piece = stripes * self.geometry().stripe_data_bytes();
        if len <= piece {
            self.write_stripes(offset, data, true)?;
            return self.written_whole(offset, len);
        }
        let mut at = offset;
        while at < offset + len {
            let end = ((at / piece + 1) * piece).min(offset + len);
            self.write_stripes(at, &data[(at - offset) as usize..(end - offset) as usize], true)?;
            at = end;
        }
        self.written_whole(offset, len)
    }

    /// Plan, read, compute and write; `journaled` is false only for the
    /// replay of cached writes (their rows were just resynced).
    fn write_stripes(&self, offset: u64, data: &[u8], journaled: bool) -> Result<(), ArrayError> {
        let _g = self.gate.read();
        self.write_in(&self.shape(), offset, data, journaled)
    }

    /// [`Array::write_stripes`] through the layouts of `sh`, without the gate.
    pub(crate) fn write_in(&self, sh: &Shape, offset: u64, data: &[u8], journaled: bool) -> Result<(), ArrayError> {
        let hook = ArrayJournal(self, Logged::default(), self.bitmap());
        let journal: Option<&dyn JournalHook> = if journaled && hook.logs() { Some(&hook) } else { None };
        if sh.in_copy(offset, data.len() as u64) > 0 {
            return Err(ArrayError::Io(format!(
                "bytes 0..{} cannot be written: a grow was cut off while rewriting them, and only its saved copy holds them until the grow goes on (mosaic grow -a ARRAY)",
                sh.copy_len()
            )));
        }
        for (layout, off, at) in sh.split(offset, data.len() as u64) {
            let part = &data[at];
            let mut r = Request { arr: self, layout, offset: off, len: part.len() as u64, write: true };
            self.exec.submit(&mut r, Client::In(part), journal)?;
        }
        Ok(())
    }

    /// Make every completed write durable on every member.
    pub fn flush(&self) -> Result<(), ArrayError> {
        self.flush_members();
        self.within_redundancy()?;
        if let Some(b) = self.bitmap().filter(|_| self.writable) {
            let every = Duration::from_nanos(self.epoch_ns.load(std::sync::atomic::Ordering::Relaxed));
            b.sweep(self, every, self.bitmap_held());
        }
        self.epoch()
    }

    /// After writes, at most once an [`EPOCH`], a flush ends with an empty
    /// superblock update (two rounds, two events) once the data is
    /// durable: a copy of a member taken before it is then behind by two
    /// events, stale, and never read.  So a member restored from a
    /// snapshot taken within a session that then crashed (same session)
    /// is caught unless the snapshot is younger than the last epoch, as
    /// md's clean/dirty transitions narrow the same window.  The writes
    /// go to the members directly, outside the executor's counters.
    fn epoch(&self) -> Result<(), ArrayError> {
        use std::sync::atomic::Ordering;
        if !self.writable || !self.wrote.load(Ordering::Relaxed) {
            return Ok(());
        }
        let every = Duration::from_nanos(self.epoch_ns.load(Ordering::Relaxed));
        if self.last_update.lock().elapsed() < every {
            return Ok(());
        }
        self.wrote.store(false, Ordering::Relaxed);
        self.write_superblocks(|_| {})
    }

    /// How long a flush after writes waits since the last superblock
    /// update before it updates them again ([`EPOCH`] unless set; tests
    /// shorten it).
    pub fn set_epoch(&self, every: Duration) {
        self.epoch_ns.store(every.as_nanos().min(u64::MAX as u128) as u64, std::sync::atomic::Ordering::Relaxed);
    }

    /// No stripe has more columns out than the code tolerates (else
    /// bytes the array held are out of reach: a flush says so).
    fn within_redundancy(&self) -> Result<(), ArrayError> {
        let out = out_of_service(&self.health());
        if self.geometry().columns_out(&out) > self.geometry().m {
            return Err(ArrayError::Io(format!(
                "flush: members {out:?} are out (failed, missing or not yet rebuilt), {} columns of a stripe, more than the {} {} tolerates",
                self.geometry().columns_out(&out),
                self.geometry().m,
                self.geometry().level
            )));
        }
        Ok(())
    }

    /// Flush every member present and not failed; one whose flush fails is
    /// failed.
    pub(crate) fn flush_members(&self) {
        // A failed member gets no I/O, flushes included: it takes no writes,
        // and a dead remote one would hold every flush for its whole time.
        let present: Vec<usize> = {
            let h = self.health.read();
            (0..self.geometry().members).filter(|&i| self.exec.member(i).is_some() && !matches!(h.states.get(i), Some(MemberState::Failed))).collect()
        };
        let p = Program { phases: vec![Phase::Flush(present)], ..Default::default() };
        if let Err(ExecError::Device(f)) = self.exec.run(&p, Client::None, None) {
            self.absorb(&f);
        }
    }

    /// The flush of a journal replay: what the records wrote is on the
    /// members in service.  Stripes a rebuild stopped by a second failure
    /// left out of reach (see `assemble`) do not stop it, as they do not
    /// stop the open; only no whole stripe at all does.
    fn flush_replayed(&self) -> Result<(), ArrayError> {
        self.flush_members();
        if self.geometry().whole_stripes(&self.health().states) == 0 {
            return self.within_redundancy();
        }
        Ok(())
    }

    /// Flush and mark the array clean.
    pub fn close(&self) -> Result<(), ArrayError> {
        let mut closed = self.closed.lock();
        if *closed {
            return Ok(());
        }
        *closed = true;
        if self.writable {
            self.settle_paused()?;
        }
        if self.writable && self.dirty.load(std::sync::atomic::Ordering::Acquire) {
            self.flush()?;
            // Everything is on the members: a clean array leaves its
            // journal empty, so the next open has nothing to replay.
            if let Some(j) = &self.journal {
                if let Some(cause) = j.failed() {
                    // Left dirty: the next open replays what the ring holds.
                    return Err(ArrayError::Io(format!(
                        "closed without a checkpoint: the write-ahead journal {} failed ({cause}); open the array again once the journal device works (the open replays the journal)",
                        j.describe()
                    )));
                }
                j.checkpoint()?;
            }
            // Opened unsynced and not resynced since: it stays dirty.
            if !self.unsynced.load(std::sync::atomic::Ordering::Acquire) {
                self.write_superblocks(|s| {
                    s.state = ArrayState::Clean;
                    s.resync_from = 0;
                })?;
            }
        }
        // Still unsynced: what a resync verified stays verified (every
        // write is on the members now), so the next one starts there.
        if self.writable && self.unsynced.load(std::sync::atomic::Ordering::Acquire) {
            self.checkpoint_resync(true)?;
        }
        // Clean, whole and flushed: no region needs a resync.
        if let Some(b) = self.bitmap().filter(|b| self.writable && b.dirty() > 0 && !self.bitmap_held()) {
            b.clear_all(self)?;
        }
        Ok(())
    }

    /// Never close: what the journal holds stays there for the next open
    /// to replay (a cache volume whose destage failed).
    pub(crate) fn abandon(&self) {
        *self.closed.lock() = true;
    }

    /// Whether the array was not closed cleanly before this open.
    pub fn opened_dirty(&self) -> bool {
        self.opened_dirty
    }

    /// End the scrub in progress before its next stripe: its report
    /// counts the stripes left as unverified (so a resync is not recorded
    /// done).  A scrub started later runs whole.
    pub fn interrupt_scrub(&self) {
        self.scrub_interrupt.store(true, std::sync::atomic::Ordering::Relaxed);
    }

    /// Opened dirty without a journal and not resynced since, open for
    /// writing with every member in service: a repairing scrub
    /// ([`Array::scrub`]) would make code agree with data and record the
    /// array clean, as md resyncs an array after an unclean shutdown.
    pub fn needs_resync(&self) -> bool {
        self.writable && self.unsynced.load(std::sync::atomic::Ordering::Acquire) && self.health().states.iter().all(|s| matches!(s, MemberState::Active))
    }

    /// Opened dirty without a journal, not resynced since, and degraded:
    /// the members out of service, whose blocks come from code that may
    /// disagree with the data where the crash cut writes off (see
    /// [`refuse_dirty_degraded`]).  Empty otherwise.
    pub fn unsynced_degraded(&self) -> Vec<usize> {
        if !self.unsynced.load(std::sync::atomic::Ordering::Acquire) {
            return Vec::new();
        }
        out_behind_code(&self.sb.lock())
    }

    pub fn is_writable(&self) -> bool {
        self.writable
    }
}

impl Drop for Array {
    fn drop(&mut self) {
        let _ = self.close();
    }
}

/// An array's layout, and during a grow the layout the rows past the
/// restripe position still have (see [`crate::grow`]).
pub(crate) struct Shape {
    pub layout: Arc<FixedLayout>,
    pub reshape: Option<(Arc<FixedLayout>, u64)>,
    /// A grow cut off in its critical section and not finished at open
    /// (read-only, or the finish failed): the saved copy of the first
    /// stripes' bytes, which neither layout holds whole, or why it cannot
    /// be read (see [`crate::grow`]).
    pub copy: Option<Arc<Result<Vec<u8>, String>>>,
}

impl Shape {
    /// The shape of `geo` (during a grow, from `reshape`'s), reading the
    /// mirror members `write_mostly` only when no other copy serves.
    pub(crate) fn of(geo: Geometry, reshape: Option<&crate::superblock::Reshape>, write_mostly: &[usize]) -> Result<Shape, ArrayError> {
        let layout = Arc::new(FixedLayout::new(geo)?.with_write_mostly(write_mostly)?);
        let reshape = match reshape {
            None => None,
            Some(r) => Some((Arc::new(FixedLayout::new(r.from.clone())?), r.pos)),
        };
        Ok(Shape { layout, reshape, copy: None })
    }

    /// Bytes at the start of `offset..offset+len` that the critical
    /// section's copy holds (0 without one).
    fn in_copy(&self, offset: u64, len: u64) -> u64 {
        match &self.copy {
            None => 0,
            Some(c) => {
                let n = c.as_ref().as_ref().map_or_else(|_| self.copy_len(), |v| v.len() as u64);
                n.saturating_sub(offset).min(len)
            }
        }
    }

    /// Logical bytes of the critical section (its first stripes).
    fn copy_len(&self) -> u64 {
        match &self.reshape {
            Some((old, _)) => crate::grow::critical_bytes(&old.planner.geo, &self.layout.planner.geo),
            None => 0,
        }
    }

    /// Logical bytes: the old layout's while a grow runs.
    pub(crate) fn capacity(&self) -> u64 {
        match &self.reshape {
            Some((old, _)) => old.planner.geo.capacity(),
            None => self.layout.planner.geo.capacity(),
        }
    }

    /// Logical bytes below which the new layout holds the data.
    pub(crate) fn boundary(&self) -> u64 {
        match &self.reshape {
            Some((_, pos)) => (pos * self.layout.planner.geo.stripe_data_bytes()).min(self.capacity()),
            None => u64::MAX,
        }
    }

    /// `offset..offset+len` cut at the grow's boundary: each piece with
    /// its layout, its offset and its range in the caller's buffer.
    pub(crate) fn split(&self, offset: u64, len: u64) -> Vec<(&FixedLayout, u64, std::ops::Range<usize>)> {
        let Some((old, _)) = &self.reshape else { return vec![(&self.layout, offset, 0..len as usize)] };
        let end = offset.saturating_add(len);
        let b = self.boundary();
        let mut out = Vec::with_capacity(2);
        if offset < b {
            out.push((&*self.layout, offset, 0..(end.min(b) - offset) as usize));
        }
        if end > b {
            let from = offset.max(b);
            out.push((&**old, from, (from - offset) as usize..len as usize));
        }
        out
    }
}

/// One client request as the executor's planner: the layout's program
/// against the health of the moment; member failures recorded.
struct Request<'a> {
    arr: &'a Array,
    /// The layout this part of the request lives in (a grow has two).
    layout: &'a FixedLayout,
    offset: u64,
    len: u64,
    write: bool,
}

impl Planner for Request<'_> {
    type Error = ArrayError;
    fn plan(&mut self) -> Result<Program, ArrayError> {
        let mut h = self.arr.health();
        let l = self.layout;
        // The layout a grow leaves behind spans the old members only.
        h.states.truncate(l.planner.geo.members);
        Ok(if self.write { l.write_program(self.offset, self.len, &h)? } else { l.read_program(self.offset, self.len, &h)? })
    }
    fn failed(&mut self, f: &[Failure]) -> Result<(), ArrayError> {
        self.arr.absorb_request(self.layout, f, self.write)
    }
}

/// Record in `left` the session `carried` for each member that was
/// active at the last update (`recorded`: whole, not being rebuilt, whose
/// unrebuilt stripes hold nothing) and is failed `now`; `left` stays
/// empty while every entry is nil.
fn note_left(left: &mut Vec<Uuid>, recorded: &[MemberState], now: &[MemberState], carried: Uuid) {
    if !left.is_empty() {
        left.resize(now.len(), Uuid::nil());
    }
    for (i, s) in now.iter().enumerate() {
        let was_in = matches!(recorded.get(i), Some(MemberState::Active));
        if matches!(s, MemberState::Failed) && was_in {
            left.resize(now.len(), Uuid::nil());
            left[i] = carried;
        }
    }
    if left.iter().all(Uuid::is_nil) {
        left.clear();
    }
}

/// The array's journal as the executor's journal hook; without a
/// journal, its write-intent bitmap ([`crate::bitmap`]), when it has one.
struct ArrayJournal<'a>(&'a Array, Logged<'a>, Option<Arc<WriteIntent>>);

impl ArrayJournal<'_> {
    /// Whether journaled write phases go through this hook at all.
    fn logs(&self) -> bool {
        self.0.journal.is_some() || self.2.is_some()
    }
}

impl JournalHook for ArrayJournal<'_> {
    fn log<'a>(&'a self, writes: &[DevWrite<'_>], marks: &[Mark]) -> Result<Box<dyn Held + 'a>, String> {
        match (&self.0.journal, &self.2) {
            (None, Some(b)) => Ok(Box::new(b.start(self.0, writes).map_err(|e| e.to_string())?)),
            _ => Ok(Box::new(self.0.journal_append(writes, marks, self.1).map_err(|e| e.to_string())?)),
        }
    }
    fn writes_failed(&self, writes: &[DevWrite<'_>]) {
        if let (None, Some(b)) = (&self.0.journal, &self.2) {
            b.pin(writes);
        }
    }
}

/// How a program's journal records are written beyond its writes and
/// marks (a cache volume's destage; the default: nothing more).
#[derive(Clone, Copy, Default)]
pub(crate) struct Logged<'a> {
    /// Member writes whose bytes a logical record holds: logged as copies.
    pub copies: &'a [Copied],
    /// A write's logical entry, in the first record if none carried it yet.
    pub rider: Option<&'a Rider<'a>>,
    /// A program of steps run beside each other
    /// ([`mosaic_core::Program::run_beside`]): each step's write
    /// operations and marks, in order.  Their one record counts toward a
    /// cache volume's checkpoints as the records they would have taken
    /// one by one ([`Journal::used_expanded`]), so its checkpoints, and
    /// the destages they force, fall where they did.
    pub steps: &'a [(usize, usize)],
}

/// A cache volume's logical write that rides in the first journal record
/// the programs of its destage steps append, so that the write and the
/// destage it set off share a record and its sync; `seq` is that
/// record's sequence number once appended.
pub(crate) struct Rider<'a> {
    pub offset: u64,
    pub data: &'a [u8],
    pub seq: std::sync::OnceLock<u64>,
}

/// A member write whose bytes a logical journal record holds: member,
/// member offset, the record's sequence number, the logical offset.
pub(crate) type Copied = (usize, u64, u64, u64);

/// What one record of steps run beside each other counts toward a cache
/// volume's checkpoints: the records each step would have appended alone,
/// `rider` in the first ([`Logged::steps`]).
fn expanded_by_step(writes: &[DevWrite<'_>], marks: &[Mark], copies: &[Copied], rider: Option<&Rider<'_>>, steps: &[(usize, usize)], since: u64) -> u64 {
    let (mut w, mut m, mut total) = (0, 0, 0);
    for (i, &(nw, nm)) in steps.iter().enumerate() {
        let (ws, ms) = (writes.get(w..w + nw).unwrap_or(&[]), marks.get(m..m + nm).unwrap_or(&[]));
        let mut part = journal_entries_of(ws, ms, copies, since);
        part.extend(rider.filter(|_| i == 0).map(|r| Entry::Logical { offset: r.offset, data: r.data }));
        total += Journal::expanded_len(&part);
        (w, m) = (w + nw, m + nm);
    }
    total
}

/// The entries of a journaled write phase: the marks, then each write,
/// one entry per part (a merged write's pieces, at their own offsets:
/// replay writes them where the merged write would have), as a copy when
/// `copies` names the part and its record is not older than the journal's
/// checkpoint `since` (else with its bytes).
fn journal_entries_of<'b>(writes: &[DevWrite<'b>], marks: &[Mark], copies: &[Copied], since: u64) -> Vec<Entry<&'b [u8]>> {
    let resync = marks.iter().map(|m| match *m {
        Mark::Resync { row } => Entry::Resync { row },
    });
    let parts = writes.iter().flat_map(|&(op, parts)| {
        let mut at = op.offset;
        parts.iter().map(move |&b| {
            at += b.len() as u64;
            (op.member, at - b.len() as u64, b)
        })
    });
    let device = parts.map(|(m, off, b)| match copies.iter().find(|c| c.0 == m && c.1 == off && c.2 >= since) {
        Some(&(member, offset, seq, from)) => Entry::Copy { member, offset, len: b.len() as u64, seq, from },
        None => Entry::Device { member: m, offset: off, data: b },
    });
    resync.chain(device).collect()
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

#[cfg(test)]
mod tests {
    use super::*;
    use mosaic_core::{DevOp, Role};
    use mosaic_dev::MemMember;

    fn op(member: usize, offset: u64) -> DevOp {
        DevOp { member, offset, len: 4096, role: Role::Data, col: 0 }
    }

    /// A member that leaves while active is noted with the session it
    /// carries; one being rebuilt, or already out, is not; all nil is
    /// none.
    #[test]
    fn a_member_that_leaves_while_active_is_noted_with_its_session() {
        use MemberState::*;
        let (s1, s2) = (Uuid::from_u128(1), Uuid::from_u128(2));
        let mut left = Vec::new();
        note_left(&mut left, &[Active, Active, Rebuilding { done: 3 }], &[Active, Failed, Failed], s1);
        assert_eq!(left, [Uuid::nil(), s1, Uuid::nil()]);
        note_left(&mut left, &[Active, Failed, Failed], &[Failed, Failed, Failed], s2);
        assert_eq!(left, [s2, s1, Uuid::nil()], "member 1 keeps the session it left in");
        let mut none = Vec::new();
        note_left(&mut none, &[Failed, Rebuilding { done: 0 }], &[Failed, Failed], s1);
        assert!(none.is_empty());
    }

    /// One record of two steps run beside each other counts toward a
    /// cache volume's checkpoints exactly as the two records the steps
    /// append one by one (the rider in the first), though it takes less
    /// of the ring; one step counts as its record.
    #[test]
    fn steps_beside_each_other_count_as_their_records_apart() {
        let journal = || Journal::format(Arc::new(MemMember::new("j", 4 << 20)), Uuid::new_v4(), Uuid::nil()).unwrap();
        let (page, code, logical) = (vec![1u8; 4096], vec![2u8; 4096], vec![3u8; 4096]);
        let (p, c) = ([page.as_slice()], [code.as_slice()]);
        // Step A: a page (logged as a copy) and its row's code; step B:
        // another row's code and a resync mark.
        let writes: Vec<DevWrite<'_>> = vec![(op(0, 0), &p), (op(4, 0), &c), (op(3, 8192), &c)];
        let marks = [Mark::Resync { row: 2 }];
        let copies: [Copied; 1] = [(0, 0, 1, 0)];
        let rider = Rider { offset: 4096, data: &logical, seq: Default::default() };
        fn entries<'b>(w: &[DevWrite<'b>], m: &[Mark], copies: &[Copied], rider: Option<&'b Rider<'b>>) -> Vec<Entry<&'b [u8]>> {
            let mut e = journal_entries_of(w, m, copies, 0);
            e.extend(rider.map(|r| Entry::Logical { offset: r.offset, data: r.data }));
            e
        }

        let apart = journal();
        apart.try_append(&entries(&writes[..2], &[], &copies, Some(&rider))).unwrap().unwrap();
        apart.try_append(&entries(&writes[2..], &marks, &copies, None)).unwrap().unwrap();

        let beside = journal();
        let expanded = expanded_by_step(&writes, &marks, &copies, Some(&rider), &[(2, 0), (1, 1)], 0);
        beside.try_append_as(&entries(&writes, &marks, &copies, Some(&rider)), Some(expanded)).unwrap().unwrap();
        assert_eq!(beside.used_expanded(), apart.used_expanded());
        assert!(beside.used() < apart.used(), "one record header and table, not two");
        let counted_whole = journal();
        counted_whole.try_append(&entries(&writes, &marks, &copies, Some(&rider))).unwrap().unwrap();
        assert!(counted_whole.used_expanded() < apart.used_expanded(), "the split matters");

        let one = journal();
        one.try_append_as(&entries(&writes[..2], &[], &copies, Some(&rider)), Some(expanded_by_step(&writes[..2], &[], &copies, Some(&rider), &[(2, 0)], 0))).unwrap().unwrap();
        let alone = journal();
        alone.try_append(&entries(&writes[..2], &[], &copies, Some(&rider))).unwrap().unwrap();
        assert_eq!(one.used_expanded(), alone.used_expanded());
    }
}
