//! mosaic-volume: one interface over every kind of real array.
//!
//! ```text
//!   mosaic info/write/read/fail/replace/rebuild/scrub     mosaic serve (NBD)
//!                         │                                     │
//!                         └──────────────┬──────────────────────┘
//!                                        ▼
//!                     open(spec) / open_cached(spec) -> Box<dyn Volume>
//!                                        │
//!        ┌─────────────────────┬─────────┴──────────┬──────────────────────┐
//!        ▼                     ▼                    ▼                      ▼
//!   mosaic_array::Array   CachedVolume         DvsVolume (DvsArray)   TierVolume (fast +
//!   kind "fixed"          kind "cached"        kind "dvs"             slow inner arrays)
//!                                                                     kind "tier"
//!   RemapVolume (units of an inner array re-placed on its drives), kind "remap"
//! ```
//!
//! [`open`] decides the kind from what is on the members: a directory
//! with an `inner/` array is a [`RemapVolume`] (its remap label decides
//! whether the inner array is its own), one with `fast/` and `slow/` inner arrays is a [`TierVolume`] (its tier
//! labels decide whether they belong together), DVS superblocks on zoned
//! member files make a [`DvsVolume`], anything else is assembled
//! by [`mosaic_array::Array::open`] (nested CBRO check drive arrays
//! included).  Every method takes `&self`, so one volume serves many
//! threads (`Arc<dyn Volume>`).

mod dvs;
mod fixed;
pub mod guard;
mod nest;
pub mod remap;
pub mod replay;
pub mod scan;
pub mod tier;

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Serialize;

pub use mosaic_array::grow::{GrowOptions, GrowReport};
pub use mosaic_array::GrowSizeReport;
use mosaic_array::maint::RebuildOptions;
use mosaic_array::spec::ArraySpec;
use mosaic_array::{Array, ArrayError, CacheVolume, RebuildReport, ScrubReport};
use mosaic_core::{CacheConfig, DeviceIo, HotReport, MemberState, OpCounts};
use mosaic_dvs::DvsError;

pub use dvs::{DvsVolume, DEFAULT_IDLE};
pub use fixed::CachedVolume;
pub use remap::{RemapCreate, RemapVolume};
pub use tier::{tier_geometry, InnerSpec, TierCreate, TierVolume};

/// Errors of volume operations.  Each message says what was wrong.
#[derive(Debug, thiserror::Error)]
pub enum VolumeError {
    /// From a fixed-geometry (or cached) array.
    #[error(transparent)]
    Array(#[from] ArrayError),
    /// From a DVS array.
    #[error(transparent)]
    Dvs(#[from] DvsError),
    /// From a tier array's policy or one of its programs.
    #[error("tier: {0}")]
    Tier(String),
    /// The request does not fit the volume (bad member, nothing to do,
    /// not supported by this kind).
    #[error("{0}")]
    Usage(String),
    /// A file operation of the volume itself (e.g. moving a new drive
    /// into place) failed.  The error is shown, not chained as a source:
    /// `{:#}` would print it twice.
    #[error("{what}: {err}")]
    Io { what: String, err: std::io::Error },
    /// A member device's own error, which names the device already (an
    /// NBD member's names its URI).
    #[error("{0}")]
    Device(std::io::Error),
}

pub type Result<T, E = VolumeError> = std::result::Result<T, E>;

/// One member in [`VolumeInfo`].
#[derive(Debug, Clone, Serialize)]
pub struct VolumeMember {
    pub index: usize,
    pub state: MemberState,
    /// Whether its device is open.
    pub present: bool,
    /// Its file or device (where it is expected, when it is not present).
    pub path: String,
    /// Member UUID, for kinds that give members one.
    pub uuid: Option<String>,
    /// Errors seen since open, for kinds that count them.
    pub errors: MemberErrors,
    /// Its failure domain: the host that holds it, or "local"
    /// (`mosaic_array::domain`).
    pub host: String,
    /// How a remote member's requests have been answering (None for a
    /// local device).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub remote: Option<mosaic_dev::nbd::Latency>,
    /// Its own device, put back, is rebuilt only where writes came since
    /// it left (a write-intent bitmap's re-add).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub readd: bool,
    /// The drive a hot replace is copying it onto (`replace --hot`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub replacing: Option<String>,
    /// A mirror member read only when no other copy serves (md's
    /// `--write-mostly`).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub write_mostly: bool,
    /// A member that is an array of its own (a CBRO check drive array):
    /// its members out of service, one line each.  Any makes the array
    /// degraded, as a member of its own out would.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub inner_out: Vec<String>,
}

/// Errors of one member since the volume was opened.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct MemberErrors {
    /// Failed reads and writes (a member fails at its first write error;
    /// a fixed array corrects read errors from the other members, see
    /// `mosaic_array::correct`).
    pub read: u64,
    pub write: u64,
    /// Columns a scrub found wrong on the member.
    pub checksum: u64,
    /// Of the read errors, those corrected: rebuilt from the other
    /// members and written back, the member kept in service.
    pub corrected: u64,
}

/// What every kind of volume reports, plus the kind's own info.
#[derive(Debug, Clone, Serialize)]
pub struct VolumeInfo {
    /// `fixed`, `cached`, `dvs` or `tier` (a hybrid of a fast and a slow
    /// inner array; its members are the inner arrays' members, fast first).
    pub kind: String,
    /// The level as `mosaic create --level` names it (`raid6`, `dvs`, ...).
    pub level: String,
    pub uuid: String,
    pub capacity: u64,
    pub block_size: u64,
    /// Stripe unit (DVS: the chunk).
    pub stripe_unit: u64,
    /// How many regions rebuild and scrub walk (fixed: stripes; DVS: SSGs).
    pub regions: u64,
    pub members: Vec<VolumeMember>,
    pub degraded: bool,
    /// Where the write-ahead journal lives, if there is one.
    pub journal: Option<String>,
    /// Labelled lines for a human summary (`mosaic info`), in order.
    #[serde(skip)]
    pub summary: Vec<(String, String)>,
    /// The kind's own info struct, serialized
    /// (`mosaic_array::ArrayInfo`, `mosaic_dvs::array::ArrayInfo`).
    pub detail: serde_json::Value,
}

/// Device operations since the volume was opened (or its counters reset).
#[derive(Debug, Clone, Default, Serialize)]
pub struct IoCounters {
    pub device_reads: u64,
    pub device_writes: u64,
    /// Operations by kind and stripe methods, where the kind plans them
    /// with `mosaic_core` (fixed and cached arrays).
    pub ops: Option<OpCounts>,
    /// Per member, by index: what a replay compares with the simulator.
    pub members: Vec<DeviceIo>,
}

/// A real array of any kind.
///
/// Offsets and lengths of `read`/`write` are bytes and must be multiples
/// of [`Volume::block_size`] within [`Volume::capacity`]; a bad request is
/// an error, never a panic.
pub trait Volume: Send + Sync {
    /// Logical bytes.
    fn capacity(&self) -> u64;
    /// Logical block: the alignment of every request.
    fn block_size(&self) -> u64;
    /// The request size that suits the layout best (what NBD advertises).
    fn preferred_block(&self) -> u64;
    /// Whether a request completes in microseconds without waiting on a
    /// drive, a network or a background task (every device is RAM or on a
    /// RAM file system): the NBD server then serves small requests on the
    /// connection's reader, without a hand-off to a worker.
    fn in_memory(&self) -> bool {
        false
    }

    fn read(&self, off: u64, buf: &mut [u8]) -> Result<()>;
    fn write(&self, off: u64, data: &[u8]) -> Result<()>;
    /// Runs of `[off, off+len)` in order from `off`, each `(bytes, hole)`:
    /// a hole was never written and reads as zeros (NBD's
    /// `base:allocation`, so `nbdcopy` and `qemu-img convert` skip it).
    /// Runs may cover less than `len`, never more.  The default, all
    /// written, is always true; mapped layouts that know better say so.
    fn allocation(&self, _off: u64, len: u64) -> Result<Vec<(u64, bool)>> {
        Ok(vec![(len, false)])
    }
    /// A client's discard (NBD's TRIM, a guest's `fstrim`): the bytes of
    /// `[off, off+len)` are no longer wanted, and a client may assume
    /// nothing of them until it writes them again.  A hint: the default
    /// keeps the bytes (as md's raid4/5/6 do); mapped layouts stop keeping
    /// what they can, so their GC or their fast tier no longer carries it.
    /// Never a way to write zeros.
    fn discard(&self, _off: u64, _len: u64) -> Result<()> {
        Ok(())
    }
    /// Whether [`Volume::discard`] leaves the whole blocks of its range
    /// reading zeros, as durably as a write, once it returns (a tier: one
    /// map write).  Then a client's zeroing that allows holes (NBD's
    /// WRITE_ZEROES without NO_HOLE) is a discard, not a write of zeros.
    fn discard_zeroes(&self) -> bool {
        false
    }
    /// Make every completed write durable.
    fn flush(&self) -> Result<()>;
    /// Write what a write-back cache holds to the members (its dirty pages
    /// and cached parity), as a replay that counts all the work a policy
    /// defers ends; nothing for a volume without one.
    fn destage(&self) -> Result<()> {
        Ok(())
    }
    /// Flush what is pending and leave the volume clean on its members.
    fn close(&self) -> Result<()>;

    fn info(&self) -> VolumeInfo;
    fn io_counters(&self) -> IoCounters;
    /// Start the device-operation counters over from zero.
    fn reset_counters(&self);
    /// Members failed automatically after I/O errors since open, with the error.
    fn auto_failed(&self) -> Vec<(usize, String)> {
        Vec::new()
    }
    /// What the open found that a user should hear about (e.g. an unclean
    /// shutdown).
    fn warnings(&self) -> Vec<String> {
        Vec::new()
    }

    /// Take member `idx` out of service, recorded on the other members so
    /// it outlives this open (the member stays failed until replaced).
    /// Refused when more members would be failed than the level tolerates.
    fn fail_member(&self, idx: usize) -> Result<()>;
    /// Put the drive at `drive` (created with the right size and kind when
    /// missing) in place of member `idx`; [`Volume::rebuild`] follows.
    fn replace(&self, idx: usize, drive: &Path) -> Result<()>;
    /// Copy working member `idx` onto the drive at `drive` (created with
    /// the member's size when missing; None: the first hot spare), which
    /// then takes its place; the member stays in service throughout, so
    /// the array keeps its redundancy (md's `--replace`).  When the old
    /// drive fails during the copy, the new one is put in by
    /// [`Volume::replace`] (a spare by [`Volume::take_spare`]) instead
    /// (`rebuild_needed`), and [`Volume::rebuild`] follows.
    fn replace_hot(&self, idx: usize, drive: Option<&Path>, progress: &dyn Fn(u64, u64), opts: RebuildOptions) -> Result<HotReport> {
        let _ = (idx, drive, progress, opts);
        Err(VolumeError::Usage(format!(
            "a {} array has no hot replace (it is for fixed-layout arrays, raid0..6, rs and cbro, for dvs arrays, and for the arrays tiers, caches and remapped volumes are made of): fail the member, then replace it",
            self.info().kind
        )))
    }
    /// Label member `idx` with the host that holds it: its failure domain
    /// (`mosaic_array::domain`), recorded on the members.
    fn set_member_host(&self, idx: usize, host: &str) -> Result<()> {
        let _ = (idx, host);
        Err(VolumeError::Usage("host labels are for fixed-layout arrays (raid0..6, rs, cbro)".into()))
    }
    /// Rebuild replaced members; `progress(done, total)` per region.
    fn rebuild(&self, progress: &dyn Fn(u64, u64), opts: RebuildOptions) -> Result<RebuildReport>;
    /// Verify every stripe's code (and repair mismatches with `repair`:
    /// fixed layouts rewrite the code units in place, DVS re-stripes).
    fn scrub(&self, repair: bool, progress: &dyn Fn(u64, u64)) -> Result<ScrubReport>;

    /// Add members at `drives` (files created with the members' size when
    /// missing) and start restriping onto them; [`Volume::grow_continue`]
    /// does the restripe.  `backup_file`: where the critical section's
    /// data is saved too (see `mosaic_array::Array::grow_start_with`).
    fn grow_start(&self, _drives: &[std::path::PathBuf], _backup_file: Option<&Path>) -> Result<()> {
        Err(VolumeError::Usage(format!("a {} array cannot grow: grow works on fixed raid0, raid4, raid5, raid6 and rs arrays", self.info().kind)))
    }
    /// Not shut down cleanly, without a journal, and not resynced since:
    /// a repairing [`Volume::scrub`] now (every member in service, open
    /// for writing) makes code agree with data again, as md's resync.
    fn needs_resync(&self) -> bool {
        false
    }
    /// That resync: a repairing [`Volume::scrub`] of what a crash may
    /// have left with code and data apart (with a write-intent bitmap,
    /// only the regions it marks).
    fn resync(&self, progress: &dyn Fn(u64, u64)) -> Result<ScrubReport> {
        self.scrub(true, progress)
    }
    /// End the scrub in progress before its next stripe (its report counts
    /// the rest as unverified).
    fn interrupt_scrub(&self) {}
    /// Whether `drive` is failed member `idx`'s own device, back with the
    /// session it left in: replacing it by itself is md's re-add (only
    /// what was written meanwhile is rebuilt).  False for kinds without
    /// a write-intent bitmap.
    fn readdable(&self, _idx: usize, _drive: &Path) -> bool {
        false
    }
    /// The grow in progress: stripes restriped and their total.
    fn grow_pending(&self) -> Option<(u64, u64)> {
        None
    }
    /// A hot replace paused by a clean stop, to resume where it stopped
    /// ([`Volume::replace_hot`] of the member, with its drive or none):
    /// the member and the drive.
    fn hot_paused(&self) -> Option<(usize, String)> {
        None
    }
    /// Restripe until the grow is done (resuming where it stopped);
    /// `progress(done, total)` in stripes.
    fn grow_continue(&self, _progress: &dyn Fn(u64, u64), _opts: GrowOptions) -> Result<GrowReport> {
        Err(VolumeError::Usage("no grow is in progress".into()))
    }
    /// Take more of each member for stripes (md's `--grow --size`): `size`
    /// bytes a member, or (`None`) all the smallest one holds; the new
    /// stripes are written with zeros first (`progress(done, total)` in
    /// stripes), then the superblocks record the size.
    /// Change the level where no data moves (md's takeover, `grow
    /// --level`: see `mosaic_array::takeover`), adding `drives` (a
    /// missing file is created at the members' size), whose rebuild
    /// ([`Volume::rebuild`]) follows, or keeping the first `keep` members
    /// (raid4 to raid0 keeps all but its parity member unasked).
    fn takeover(&self, _level: mosaic_core::Level, _drives: &[PathBuf], _keep: Option<usize>) -> Result<mosaic_array::takeover::TakeoverReport> {
        Err(VolumeError::Usage(format!("a {} array cannot change its level: grow --level works on fixed raid0, raid1 and raid5 arrays without a cache", self.info().kind)))
    }
    fn grow_size(&self, _size: Option<u64>, _progress: &dyn Fn(u64, u64)) -> Result<GrowSizeReport> {
        Err(VolumeError::Usage(format!("a {} array cannot grow in size: grow --size works on fixed raid0, raid1, raid4, raid5, raid6 and rs arrays", self.info().kind)))
    }
    /// Make exactly `members` of a mirror write-mostly (md's
    /// `--write-mostly`: read only when no other copy serves); none when
    /// empty.
    fn set_write_mostly(&self, _members: &[usize]) -> Result<()> {
        Err(VolumeError::Usage(format!("a {} array has no write-mostly members: they are for fixed raid1 (mirror) arrays", self.info().kind)))
    }
    /// Whether [`Volume::add_spare`] would take `drive`, checked without
    /// writing anything: a command adding several spares checks them all
    /// before it adds the first, so a refused one leaves none added.
    fn check_spare(&self, _drive: &Path) -> Result<()> {
        Err(VolumeError::Usage(format!("a {} array takes no hot spares (fixed arrays do)", self.info().kind)))
    }
    /// Add the device at `drive` (created when missing) as a hot spare.
    fn add_spare(&self, drive: &Path) -> Result<()> {
        self.check_spare(drive)
    }
    /// Remove the hot spare at `drive`: the array stops listing it and its
    /// label is erased, so the device is free for any array again.  Where
    /// its file is now (a spare file a DVS directory names is set aside as
    /// NAME.removed, so the directory no longer offers it).
    fn remove_spare(&self, drive: &Path) -> Result<PathBuf> {
        Err(VolumeError::Usage(format!("{} is not a hot spare: a {} array takes no hot spares", drive.display(), self.info().kind)))
    }
    /// Put a hot spare in place of a failed member; which member, if any.
    fn take_spare(&self) -> Result<Option<usize>> {
        Ok(None)
    }

    /// One step of background work when the volume has been idle (DVS:
    /// garbage collection); whether a step ran.  Call it repeatedly from
    /// one thread; requests wait at most for the step in progress.
    fn idle_work(&self) -> Result<bool> {
        Ok(false)
    }
    /// How long the volume must see no request before [`Volume::idle_work`]
    /// does anything.
    fn set_idle_after(&self, _after: Duration) {}
    /// The remapped array behind this volume, for `mosaic adapt` and the
    /// periodic job in `serve`.
    fn as_remap(&self) -> Option<&RemapVolume> {
        None
    }
}

/// When a volume last saw a request, and how long it must see none
/// before its idle work (DVS garbage collection, tier movement) runs.
pub(crate) struct IdleClock {
    last_io: std::sync::Mutex<std::time::Instant>,
    after_ns: std::sync::atomic::AtomicU64,
}

impl IdleClock {
    pub(crate) fn new(after: Duration) -> IdleClock {
        let c = IdleClock { last_io: std::sync::Mutex::new(std::time::Instant::now()), after_ns: std::sync::atomic::AtomicU64::new(0) };
        c.set(after);
        c
    }
    /// A request came now.
    pub(crate) fn touch(&self) {
        *self.last_io.lock().unwrap_or_else(|e| e.into_inner()) = std::time::Instant::now();
    }
    /// Whether no request came for the idle time.
    pub(crate) fn due(&self) -> bool {
        let after = Duration::from_nanos(self.after_ns.load(std::sync::atomic::Ordering::Relaxed));
        self.last_io.lock().unwrap_or_else(|e| e.into_inner()).elapsed() >= after
    }
    pub(crate) fn set(&self, after: Duration) {
        self.after_ns.store(after.as_nanos().min(u64::MAX as u128) as u64, std::sync::atomic::Ordering::Relaxed);
    }
}

/// Open the array named by `spec` (a directory or a comma list of
/// members), whatever its kind.
pub fn open(spec: &str, writable: bool) -> Result<Box<dyn Volume>> {
    something_there(spec)?;
    if remap::is_remap(spec) {
        return Ok(Box::new(RemapVolume::open(Path::new(spec.trim()), writable)?));
    }
    if tier::is_tier(spec) {
        return Ok(Box::new(TierVolume::open(Path::new(spec.trim()), writable)?));
    }
    if mosaic_dvs::files::is_dvs(spec) {
        return Ok(Box::new(DvsVolume::open(spec, writable)?));
    }
    let spec = ArraySpec::parse(spec)?;
    Ok(Box::new(Array::open(&spec, writable)?))
}

/// Refuse to write client data to an array that is part of another (a
/// tier's side, a remapped array's inner array, a CBRO array's check
/// drive array: `Superblock::owner`), since its bytes are the owner's
/// structures: what `write`, `serve` and `replay --on` ask before they
/// open one.  Its labels are read (`scan`); maintenance of the inner
/// array itself (fail, replace, rebuild, scrub) stays allowed, as md lets
/// a nested array be managed.
pub fn refuse_part_of(spec: &str) -> Result<()> {
    // The owner's own directory holds the inner array: it is the owner.
    if remap::is_remap(spec) || tier::is_tier(spec) {
        return Ok(());
    }
    let local: Vec<std::path::PathBuf> = spec.split(',').map(str::trim).filter(|p| !p.is_empty() && !mosaic_dev::nbd::is_uri(p)).map(std::path::PathBuf::from).collect();
    if let Ok(found) = scan::scan(&local) {
        if let [f] = found.as_slice() {
            if let Some(o) = &f.part_of {
                return Err(VolumeError::Usage(format!(
                    "this array is {o}, whose own structures it holds: write through that array instead (assemble --scan finds it); this one takes no client data"
                )));
            }
        }
    }
    Ok(())
}

/// A spec of one path names something that exists: else there is no
/// array to find, and saying so beats "no member of any array found".
fn something_there(spec: &str) -> Result<()> {
    let one = spec.trim();
    if !one.is_empty() && !one.contains(',') && !mosaic_dev::nbd::is_uri(one) && std::fs::symlink_metadata(one).is_err_and(|e| e.kind() == std::io::ErrorKind::NotFound) {
        return Err(VolumeError::Usage(format!("no array at {one}: no such file or directory")));
    }
    Ok(())
}

/// Open a fixed-geometry array behind the small-write caches of `cfg`
/// (write-back through the array's journal, write-through without one).
pub fn open_cached(spec: &str, writable: bool, cfg: CacheConfig) -> Result<Box<dyn Volume>> {
    something_there(spec)?;
    if remap::is_remap(spec) {
        return Err(VolumeError::Usage("the small-write caches are for fixed-geometry arrays, not remapped ones".into()));
    }
    if tier::is_tier(spec) {
        return Err(VolumeError::Usage("the small-write caches are for fixed-geometry arrays; a tier array's fast tier takes its writes".into()));
    }
    if mosaic_dvs::files::is_dvs(spec) {
        return Err(VolumeError::Usage(
            "the small-write caches are for fixed-geometry arrays; a DVS array has its own write cache (mosaic create --level dvs --dvs-cache SIZE)".into(),
        ));
    }
    let arr = Array::open(&ArraySpec::parse(spec)?, writable)?;
    Ok(Box::new(CachedVolume::new(CacheVolume::new(arr, cfg)?, cfg)))
}

/// Human-readable binary size (for summaries; the CLI uses it too): the
/// one printer of [`mosaic_size`].
pub use mosaic_size::human;

#[cfg(test)]
mod tests;

/// The `lost` line of `mosaic info`: how much, and the first ranges,
/// with `why` such bytes are lost.
pub(crate) fn lost_line(lost: &[mosaic_format::lost::LostRange], why: &str) -> Option<(String, String)> {
    const LISTED: usize = 8;
    if lost.is_empty() {
        return None;
    }
    let bytes: u64 = lost.iter().map(|r| r.len).sum();
    let ranges: Vec<String> = lost.iter().take(LISTED).map(|r| format!("{}..{}", r.offset, r.end())).collect();
    let more = if lost.len() > LISTED { format!(", ... {} ranges in all", lost.len()) } else { String::new() };
    Some(("lost".into(), format!("{} in bytes {}{more}: {why}; reads fail until they are written again", human(bytes), ranges.join(", "))))
}
