//! DVS arrays (log-structured, on zoned member files) as volumes.
//!
//! Everything DVS-specific of the volume interface lives here:
//!
//! ```text
//!   requests ──> Mutex<DvsArray> ──> read / write / flush
//!   writes   ──> commit::Commits: concurrent writes share one journal
//!                write and flush per member (group commit); the destages
//!                they trigger run on the array's destager thread, so the
//!                lock is released once the journal record is durable
//!   idle_work: no request for `idle_after` ──> try_lock ──> one gc_step
//!              (a request waits at most for the step in progress)
//!   fail:      DvsArray::fail (recorded in the metadata of the others)
//!   replace:   a failed member only; files::replace_with_file (creates
//!              the zoned file); the drive stays where the user put it: in
//!              a directory array its path is recorded (files::record_paths,
//!              DIR/dvs-paths.json) before the replace, so a stopped
//!              rebuild finds it, and the old DIR/dvs-{idx}.zoned is kept
//!              aside as NAME.replaced (the directory no longer offers it)
//!   rebuild:   DvsArray::rebuild (SSG by SSG, resumable)
//!   spares:    add_spare: the zoned file (created when missing) gets a
//!              spare label; in a directory array its path is recorded.
//!              take_spare: DvsArray::take_spare (a replace), then the
//!              spare's file serves the failed member as replace's drive.
//!              remove_spare: DvsArray::remove_spare (labels drop it, its
//!              label erased), its lock let go, its path no longer
//!              recorded; a spare file the directory names (moved in by
//!              an older mosaic) is set aside as DIR/dvs-spare-ID.zoned.removed
//!   scrub:     DvsArray::scrub_start/step/finish, SSG by SSG with the lock
//!              released between steps; repair re-stripes (zones cannot be
//!              rewritten in place); findings by extent "SSG l row r ..."
//! ```

use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard, TryLockError};
use std::time::Duration;

use mosaic_array::maint::RebuildOptions;
use mosaic_array::{RebuildReport, ScrubReport};
use mosaic_core::{HotReport, MemberState};
use mosaic_dev::zoned::ZonedFile;
use mosaic_dev::DeviceLock;
use mosaic_dvs::{files, DvsArray, ZonedMember};

use crate::{human, IoCounters, Result, Volume, VolumeError, VolumeInfo, VolumeMember};

mod commit;
#[cfg(test)]
mod tests;

/// How long a DVS volume must see no request before a background GC step.
pub const DEFAULT_IDLE: Duration = Duration::from_millis(500);

/// A DVS array behind the volume interface.
pub struct DvsVolume {
    arr: Mutex<DvsArray>,
    /// The array's directory (`-a DIR`), None for a comma list.
    dir: Option<PathBuf>,
    /// The file of each member found at open (or put in by replace).
    paths: Mutex<Vec<Option<PathBuf>>>,
    writable: bool,
    capacity: u64,
    block: u64,
    chunk: u64,
    idle: crate::IdleClock,
    /// The array lock on every member file (exclusive: even a read-only
    /// open writes a checkpoint).
    locks: Mutex<Vec<DeviceLock>>,
    /// The file of each hot spare, by its UUID.
    spare_paths: Mutex<Vec<(uuid::Uuid, PathBuf)>>,
    /// The array's UUID (a directory array's recorded paths name it).
    uuid: uuid::Uuid,
    /// What the open found of the paths a directory array records.
    path_warnings: Vec<String>,
    /// Held while the paths are recorded: the last record written is
    /// of the latest state.
    recording: Mutex<()>,
    /// The array's geometry: requests are checked before they queue.
    geo: mosaic_dvs::Geo,
    commits: commit::Commits,
    /// The write cache's block buffers, which a writer of one block fills
    /// before it queues.
    blocks: mosaic_dvs::BlockPool,
    /// Ends the scrub in progress before its next SSG.
    scrub_interrupt: std::sync::atomic::AtomicBool,
    /// The drive of the hot replace in progress (`info` names it).
    hot_drive: Mutex<Option<PathBuf>>,
}

fn same_file(a: &Path, b: &Path) -> bool {
    matches!((a.canonicalize(), b.canonicalize()), (Ok(x), Ok(y)) if x == y)
}

impl DvsVolume {
    /// Open the DVS array of `spec` (`DIR` or a comma list of zoned
    /// files).  Opening writes a fresh metadata checkpoint even when
    /// `writable` is false; a read-only volume refuses writes and does no
    /// background work.
    pub fn open(spec: &str, writable: bool) -> Result<DvsVolume> {
        let mut devs: Vec<std::sync::Arc<dyn ZonedMember>> = Vec::new();
        let mut given = Vec::new();
        let mut locks = Vec::new();
        let found = files::devices(spec)?;
        for p in found.paths {
            // As files::open_spec: a file that cannot be opened is a missing member.
            let Ok(z) = ZonedFile::open(&p) else { continue };
            locks.push(DeviceLock::acquire(&p, true).map_err(|e| VolumeError::Usage(e.to_string()))?);
            devs.push(std::sync::Arc::new(z));
            given.push(p);
        }
        let mut arr = DvsArray::open(devs)?;
        // A read-only open decodes what a member cannot read, and writes nothing.
        arr.set_read_correction(writable);
        // The file serving each member, as the labels assigned them.
        let paths = arr.sources().iter().map(|s| s.and_then(|i| given.get(i).cloned())).collect();
        let spare_paths = arr.spares().iter().filter_map(|s| Some((s.uuid, given.get(s.source?)?.clone()))).collect();
        // The drive of a paused hot replace the open resumed.
        let hot_drive = arr.hot_source().and_then(|i| given.get(i).cloned());
        let dir = (!spec.contains(',') && Path::new(spec).is_dir()).then(|| PathBuf::from(spec));
        Ok(DvsVolume {
            uuid: arr.info().uuid,
            path_warnings: found.warnings,
            recording: Mutex::new(()),
            capacity: arr.capacity(),
            block: arr.geo().block,
            chunk: arr.geo().chunk,
            geo: arr.geo().clone(),
            commits: commit::Commits::new(),
            blocks: arr.block_pool(),
            scrub_interrupt: std::sync::atomic::AtomicBool::new(false),
            hot_drive: Mutex::new(hot_drive),
            arr: Mutex::new(arr),
            dir,
            paths: Mutex::new(paths),
            writable,
            idle: crate::IdleClock::new(DEFAULT_IDLE),
            locks: Mutex::new(locks),
            spare_paths: Mutex::new(spare_paths),
        })
    }

    fn lock(&self) -> MutexGuard<'_, DvsArray> {
        self.arr.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn touch(&self) {
        self.idle.touch();
    }

    /// Run a request: it counts as activity (no GC until the volume has
    /// been idle again).
    fn io<T>(&self, f: impl FnOnce(&mut DvsArray) -> Result<T, mosaic_dvs::DvsError>) -> Result<T> {
        self.touch();
        let r = f(&mut self.lock());
        self.touch();
        Ok(r?)
    }

    fn member_path(&self, m: usize) -> Option<PathBuf> {
        let known = self.paths.lock().unwrap_or_else(|e| e.into_inner()).get(m).cloned().flatten();
        known.or_else(|| self.dir.as_ref().map(|d| d.join(format!("dvs-{m}.zoned"))))
    }

    /// Hold the array lock on `drive`, unless this volume holds it already
    /// (a failed member's own file, put back): a second lock of this
    /// process on it would fail as if another process held it.
    fn hold(&self, drive: &Path) -> Result<()> {
        let mut locks = self.locks.lock().unwrap_or_else(|e| e.into_inner());
        if locks.iter().any(|l| l.is_of(drive)) {
            return Ok(());
        }
        locks.push(DeviceLock::acquire(drive, true).map_err(|e| VolumeError::Usage(e.to_string()))?);
        Ok(())
    }

    /// Refuse `drive` when it is a member of this array other than `idx`.
    fn not_a_member(&self, drive: &Path, idx: Option<usize>, n: usize) -> Result<()> {
        for m in (0..n).filter(|&m| Some(m) != idx) {
            if self.member_path(m).is_some_and(|p| same_file(&p, drive)) {
                return Err(VolumeError::Usage(format!("{} is member {m} of this array", drive.display())));
            }
        }
        Ok(())
    }

    /// In a directory array, record where every member and spare is
    /// (and `extra`, a drive about to become one), so the next open finds
    /// those the directory does not name ([`files::record_paths`]).
    fn record(&self, extra: Option<&Path>) -> Result<()> {
        let Some(dir) = &self.dir else { return Ok(()) };
        let _one = self.recording.lock().unwrap_or_else(|e| e.into_inner());
        let mut devices: Vec<PathBuf> = self.paths.lock().unwrap_or_else(|e| e.into_inner()).iter().flatten().cloned().collect();
        devices.extend(self.spare_paths.lock().unwrap_or_else(|e| e.into_inner()).iter().map(|s| s.1.clone()));
        devices.extend(self.hot_drive.lock().unwrap_or_else(|e| e.into_inner()).clone());
        devices.extend(extra.map(Path::to_path_buf));
        Ok(files::record_paths(dir, self.uuid, &devices)?)
    }

    /// Whether `path` is the file of a member (other than `idx`) or a spare.
    fn in_use(&self, path: &Path, idx: usize) -> bool {
        let members = self.paths.lock().unwrap_or_else(|e| e.into_inner()).iter().enumerate().any(|(m, p)| m != idx && p.as_deref().is_some_and(|p| same_file(p, path)));
        members || self.spare_paths.lock().unwrap_or_else(|e| e.into_inner()).iter().any(|s| same_file(&s.1, path))
    }

    /// `drive` (where the user put it) now serves member `idx`: recorded,
    /// and in a directory array the member's old file
    /// `DIR/dvs-{idx}.zoned`, failed, is kept aside as NAME.replaced so
    /// the directory no longer offers it.
    fn adopt(&self, idx: usize, drive: &Path) -> Result<()> {
        self.paths.lock().unwrap_or_else(|e| e.into_inner())[idx] = Some(drive.to_path_buf());
        let recorded = self.record(None);
        recorded.map_err(|e| VolumeError::Usage(format!("member {idx} is now {}, but {e}: name it in -a (a list of the members' files) until this is put right", drive.display())))?;
        let Some(dir) = &self.dir else { return Ok(()) };
        let old = dir.join(format!("dvs-{idx}.zoned"));
        if !old.exists() || same_file(&old, drive) || self.in_use(&old, idx) {
            return Ok(());
        }
        let aside = dir.join(format!("dvs-{idx}.zoned.replaced"));
        std::fs::rename(&old, &aside).map_err(|e| VolumeError::Io { what: format!("member {idx} is now {}, but keeping its old file {} aside as {} failed", drive.display(), old.display(), aside.display()), err: e })
    }

    fn spare_list(&self) -> Vec<String> {
        self.spare_paths.lock().unwrap_or_else(|e| e.into_inner()).iter().map(|s| s.1.display().to_string()).collect()
    }

    /// Open (or create) `drive` with the array's zone geometry, hold it,
    /// and start the hot replace of member `idx` onto it.  A drive created
    /// here is removed again when the start fails.
    fn hot_start(&self, idx: usize, drive: &Path) -> Result<()> {
        self.check_slot(idx)?;
        self.not_a_member(drive, None, self.geo.n)?;
        if self.spare_paths.lock().unwrap_or_else(|e| e.into_inner()).iter().any(|s| same_file(&s.1, drive)) {
            return Err(VolumeError::Usage(format!("{} is a hot spare of this array: replace --hot without --drive takes the first spare", drive.display())));
        }
        let created = !drive.exists();
        if !created {
            self.hold(drive)?;
        }
        let mut a = self.lock();
        let started = files::open_or_create(&a, drive).and_then(|z| a.hot_start(idx, std::sync::Arc::new(z)));
        drop(a);
        if let Err(e) = started {
            if created {
                let _ = std::fs::remove_file(drive);
            }
            return Err(e.into());
        }
        *self.hot_drive.lock().unwrap_or_else(|e| e.into_inner()) = Some(drive.to_path_buf());
        if created {
            self.hold(drive)?;
        }
        Ok(())
    }

    /// Start the hot replace of member `idx` onto the first hot spare,
    /// which is no spare from then on; its file.
    fn hot_start_from_spare(&self, idx: usize) -> Result<PathBuf> {
        let mut a = self.lock();
        let Some(uuid) = a.hot_start_from_spare(idx)? else {
            return Err(VolumeError::Usage(format!("no hot spare to copy member {idx} onto: add one with mosaic add --spare, or name the new drive with --drive")));
        };
        drop(a);
        let mut spares = self.spare_paths.lock().unwrap_or_else(|e| e.into_inner());
        let at = spares.iter().position(|s| s.0 == uuid).ok_or_else(|| VolumeError::Usage(format!("hot spare {uuid} has no file on record")))?;
        let path = spares.remove(at).1;
        drop(spares);
        *self.hot_drive.lock().unwrap_or_else(|e| e.into_inner()) = Some(path.clone());
        Ok(path)
    }

    /// `drive`, taken from the spares by a hot replace that stopped, a
    /// hot spare again (its file is held already).
    fn give_back_spare(&self, drive: &Path) -> Result<()> {
        let z = ZonedFile::open(drive).map_err(mosaic_dvs::DvsError::from)?;
        let uuid = self.lock().add_spare(std::sync::Arc::new(z))?;
        self.spare_paths.lock().unwrap_or_else(|e| e.into_inner()).push((uuid, drive.to_path_buf()));
        Ok(())
    }

    /// The hot replace is over (switched or ended): its drive is no
    /// longer one the next open must find as such.
    fn hot_ended(&self) {
        *self.hot_drive.lock().unwrap_or_else(|e| e.into_inner()) = None;
    }

    /// Whether `idx` names a member slot of the array.
    fn check_slot(&self, idx: usize) -> Result<()> {
        match idx < self.geo.n {
            true => Ok(()),
            false => Err(VolumeError::Usage(format!("no member {idx}: the array has members 0..{}", self.geo.n - 1))),
        }
    }

    fn check_writable(&self, what: &str) -> Result<()> {
        if self.writable {
            Ok(())
        } else {
            Err(VolumeError::Usage(format!("{what} needs the array open for writing")))
        }
    }
}

/// About the most logical bytes one discard step looks at under the
/// array lock (whole chunks of it; a chunk a step in tests, so their
/// discards cross windows).
#[cfg(not(test))]
const DISCARD_WINDOW: u64 = 1 << 30;
#[cfg(test)]
const DISCARD_WINDOW: u64 = 1;

impl Volume for DvsVolume {
    fn capacity(&self) -> u64 {
        self.capacity
    }
    fn block_size(&self) -> u64 {
        self.block
    }
    fn preferred_block(&self) -> u64 {
        // The largest power of two dividing the chunk.
        1 << self.chunk.trailing_zeros().min(16)
    }
    fn read(&self, off: u64, buf: &mut [u8]) -> Result<()> {
        self.io(|a| a.read(off, buf))
    }
    fn allocation(&self, off: u64, len: u64) -> Result<Vec<(u64, bool)>> {
        self.io(|a| a.holes(off, len))
    }
    fn write(&self, off: u64, data: &[u8]) -> Result<()> {
        self.check_writable("writing")?;
        // A bad request fails alone, never the group it would join.
        self.geo.check(off, data.len() as u64)?;
        self.touch();
        let r = self.commits.write(off, data, &|o, d| self.blocks.block_for(o, d), &|group| self.lock().write_prepared(group));
        self.touch();
        Ok(r?)
    }
    /// Chunk by chunk in windows of [`DISCARD_WINDOW`], the lock let go
    /// between them: a discard of the whole array (`mkfs`, `blkdiscard`)
    /// holds no client off for long.
    fn discard(&self, off: u64, len: u64) -> Result<()> {
        self.check_writable("discarding")?;
        self.geo.check(off, len)?;
        let (end, step) = (off + len, (DISCARD_WINDOW / self.chunk).max(1) * self.chunk);
        let mut at = off;
        while at < end {
            // Window ends on chunk boundaries: no chunk is cut between two.
            let next = end.min((at / self.chunk * self.chunk).saturating_add(step));
            self.io(|a| a.discard(at, next - at))?;
            at = next;
        }
        Ok(())
    }
    fn flush(&self) -> Result<()> {
        if !self.writable {
            return Ok(());
        }
        self.io(|a| a.flush())
    }
    fn close(&self) -> Result<()> {
        self.flush()
    }

    fn info(&self) -> VolumeInfo {
        let a = self.lock();
        let i = a.info();
        let c = &i.config;
        let members = i
            .member_list
            .iter()
            .map(|m| VolumeMember {
                index: m.index,
                state: m.state,
                present: m.present,
                path: self.member_path(m.index).map(|p| p.display().to_string()).unwrap_or_default(),
                uuid: Some(m.uuid.to_string()),
                errors: crate::MemberErrors { read: m.read_errors, corrected: m.corrected_reads, ..Default::default() },
                host: mosaic_array::domain::LOCAL.into(),
                remote: None,
                readd: false,
                replacing: i.hot_replace.filter(|h| h.member == m.index).and_then(|_| self.hot_drive.lock().unwrap_or_else(|e| e.into_inner()).as_ref().map(|p| p.display().to_string())),
                write_mostly: false,
                inner_out: Vec::new(),
            })
            .collect();
        let degraded = i.member_list.iter().any(|m| !matches!(m.state, MemberState::Active));
        let spares = self.spare_list();
        let mut detail = serde_json::to_value(&i).unwrap_or(serde_json::Value::Null);
        // Spares by path, as fixed arrays report them.
        detail["spares"] = serde_json::json!(spares);
        // Why it refuses every request, once an operation failed.
        detail["stopped"] = serde_json::json!(a.stopped());
        // Logical bytes no member can give back, as fixed arrays list them.
        detail["lost"] = serde_json::json!(a.lost());
        let mut summary = vec![
            ("array".to_string(), format!("{} (a dvs array on {} zoned members, event counter {})", i.uuid, c.members, i.events)),
            ("level".into(), format!("dvs ({} data + {} parity chunks per full stripe)", c.members - c.parity, c.parity)),
            ("chunk".into(), format!("{} ({} bytes), block {} bytes", human(c.chunk), c.chunk, c.block)),
            ("capacity".into(), format!("{} ({} bytes), {} valid chunks", human(i.capacity), i.capacity, i.valid_chunks)),
            ("SSGs".into(), format!("{} ({} in use), {} logical chunks each", i.ssgs, i.live_ssgs, i.logical_chunks_per_ssg)),
            ("zones".into(), format!("{} of {} per member ({} conventional, for metadata)", c.zones, human(c.zone_size), c.conventional)),
            (
                "cache".into(),
                if c.cache_chunks > 0 {
                    format!("{} write cache, journalled in the conventional zones", human(c.cache_chunks * c.chunk))
                } else {
                    "none (write-through)".into()
                },
            ),
            ("spares".into(), if spares.is_empty() { "none".into() } else { spares.join(", ") }),
        ];
        if let Some(r) = &i.last_scrub {
            summary.push(("last scrub".into(), r.line(mosaic_array::now_secs())));
        }
        if let Some(h) = &i.hot_replace {
            let onto = self.hot_drive.lock().unwrap_or_else(|e| e.into_inner()).as_ref().map_or_else(|| "a new drive".to_string(), |p| p.display().to_string());
            let at = if h.paused { "paused at" } else { "at" };
            summary.push(("hot replace".into(), format!("member {} onto {onto} ({at} zone {} of {})", h.member, h.done, h.total)));
        }
        summary.extend(crate::lost_line(a.lost(), "a member could not read them while no other could rebuild them"));
        summary.extend([
            ("state".into(), if degraded { format!("degraded: member(s) {:?} failed, missing, stale or rebuilding", i.failed) } else { "ok".into() }),
        ]);
        VolumeInfo {
            kind: "dvs".into(),
            level: if c.parity == 1 { "dvs".into() } else { format!("dvs:{}", c.parity) },
            uuid: i.uuid.to_string(),
            capacity: i.capacity,
            block_size: c.block,
            stripe_unit: c.chunk,
            regions: i.ssgs as u64,
            members,
            degraded,
            journal: (c.cache_chunks > 0).then(|| "conventional zones of every member".to_string()),
            summary,
            detail,
        }
    }

    /// What the open found: devices not used and why (another array's, a
    /// replaced member, a stale one, an older copy), members missing.
    fn warnings(&self) -> Vec<String> {
        self.path_warnings.iter().cloned().chain(self.lock().warnings().iter().cloned()).collect()
    }

    fn io_counters(&self) -> IoCounters {
        // Every member operation: data, parity, GC, metadata log,
        // checkpoints and the cache journal.
        let members = self.lock().member_io();
        IoCounters {
            device_reads: members.iter().map(|m| m.reads).sum(),
            device_writes: members.iter().map(|m| m.writes).sum(),
            ops: None,
            members,
        }
    }
    fn reset_counters(&self) {
        self.lock().reset_io()
    }
    fn auto_failed(&self) -> Vec<(usize, String)> {
        self.lock().auto_failed().to_vec()
    }

    fn fail_member(&self, idx: usize) -> Result<()> {
        let mut a = self.lock();
        let r = a.fail(idx);
        // A member failing ends a hot replace.
        if a.hot_progress().is_none() {
            self.hot_ended();
        }
        Ok(r?)
    }

    fn replace(&self, idx: usize, drive: &Path) -> Result<()> {
        self.check_writable("replace")?;
        let mut a = self.lock();
        self.check_slot(idx)?;
        self.not_a_member(drive, Some(idx), self.geo.n)?;
        let created = !drive.exists();
        if !created {
            self.hold(drive)?;
        }
        // Recorded first: an open after a crash in the replace finds it.
        self.record(Some(drive))?;
        let replaced = files::replace_with_file(&mut a, idx, drive);
        // Putting a failed member back ends a hot replace.
        if a.hot_progress().is_none() {
            self.hot_ended();
        }
        if let Err(e) = replaced {
            if created {
                let _ = std::fs::remove_file(drive);
            }
            let _ = self.record(None);
            return Err(e.into());
        }
        if created {
            self.hold(drive)?;
        }
        drop(a);
        self.adopt(idx, drive)
    }

    fn check_spare(&self, drive: &Path) -> Result<()> {
        self.check_writable("adding a spare")?;
        let a = self.lock();
        self.not_a_member(drive, None, a.geo().n)?;
        if drive.exists() {
            a.check_spare(&ZonedFile::open(drive).map_err(mosaic_dvs::DvsError::from)?)?;
        }
        Ok(())
    }

    fn add_spare(&self, drive: &Path) -> Result<()> {
        self.check_writable("adding a spare")?;
        let mut a = self.lock();
        self.not_a_member(drive, None, a.geo().n)?;
        let created = !drive.exists();
        if !created {
            self.hold(drive)?;
        }
        // Recorded first: an open after a crash in the add finds it.
        self.record(Some(drive))?;
        let added = files::open_or_create(&a, drive).map_err(VolumeError::from).and_then(|z| Ok(a.add_spare(std::sync::Arc::new(z))?));
        let uuid = match added {
            Ok(u) => u,
            Err(e) => {
                if created {
                    let _ = std::fs::remove_file(drive);
                }
                let _ = self.record(None);
                return Err(e);
            }
        };
        if created {
            self.hold(drive)?;
        }
        drop(a);
        self.spare_paths.lock().unwrap_or_else(|e| e.into_inner()).push((uuid, drive.to_path_buf()));
        Ok(())
    }

    fn remove_spare(&self, drive: &Path) -> Result<PathBuf> {
        self.check_writable("removing a spare")?;
        let (uuid, path) = {
            let sp = self.spare_paths.lock().unwrap_or_else(|e| e.into_inner());
            let found = sp.iter().find(|s| mosaic_array::spare::names_same(&s.1.to_string_lossy(), drive)).cloned();
            found.ok_or_else(|| VolumeError::Usage(mosaic_array::spare::not_a_spare(drive, sp.iter().map(|s| s.1.display().to_string()))))?
        };
        drop(self.lock().remove_spare(uuid)?);
        self.spare_paths.lock().unwrap_or_else(|e| e.into_inner()).retain(|s| s.0 != uuid);
        self.locks.lock().unwrap_or_else(|e| e.into_inner()).retain(|l| !l.is_of(&path));
        self.record(None).map_err(|e| VolumeError::Usage(format!("the spare is removed and its label erased, but {e}")))?;
        // The directory offers every dvs-*.zoned file at open: one it
        // names (moved in by an older mosaic) is set aside.
        let Some(dir) = self.dir.as_ref().filter(|d| files::named_by_dir(d, &path)) else { return Ok(path) };
        let aside = dir.join(format!("{}.removed", path.file_name().unwrap_or_default().to_string_lossy()));
        std::fs::rename(&path, &aside).map_err(|e| VolumeError::Io { what: format!("the spare is removed and its label erased, but moving {} to {} failed", path.display(), aside.display()), err: e })?;
        Ok(aside)
    }

    fn take_spare(&self) -> Result<Option<usize>> {
        if !self.writable {
            return Ok(None);
        }
        let Some((idx, uuid)) = self.lock().take_spare()? else { return Ok(None) };
        let path = {
            let mut sp = self.spare_paths.lock().unwrap_or_else(|e| e.into_inner());
            let at = sp.iter().position(|s| s.0 == uuid);
            at.map(|i| sp.remove(i).1)
        };
        if let Some(p) = path {
            self.adopt(idx, &p)?;
        }
        Ok(Some(idx))
    }

    /// SSG by SSG, the array's lock released between steps: clients are
    /// served while it runs, and `progress` (which may sleep to hold a
    /// rate) runs without the lock.
    /// The copy zone by zone, the lock taken for each (client writes are
    /// served between); then the switch.  The new drive's path is
    /// recorded (an open after a crash in the switch finds the drive the
    /// labels then name).  Stopped (a signal, a server stopping), a copy
    /// onto a named drive pauses, resumed when asked again or by the next
    /// open that finds the drive; one onto a spare gives the spare back.
    /// Cut off before it paused, it starts over.
    fn replace_hot(&self, idx: usize, drive: Option<&Path>, progress: &dyn Fn(u64, u64), opts: RebuildOptions) -> Result<HotReport> {
        self.check_writable("a hot replace")?;
        let t0 = std::time::Instant::now();
        // A paused copy resumes when asked for its slot with its drive or
        // none; asked for anything else, it ends first.
        let paused = self.hot_paused();
        let resume = paused.as_ref().is_some_and(|(m, p)| *m == idx && drive.is_none_or(|d| same_file(Path::new(p), d)));
        if paused.is_some() && !resume {
            self.lock().hot_abandon();
            self.hot_ended();
        }
        let (drive, from_spare, resumed_from) = match (paused.filter(|_| resume), drive) {
            (Some((_, p)), _) => (PathBuf::from(p), false, self.lock().hot_progress().map(|p| p.done)),
            (None, Some(d)) => {
                self.hot_start(idx, d)?;
                (d.to_path_buf(), false, None)
            }
            (None, None) => (self.hot_start_from_spare(idx)?, true, None),
        };
        let drive = drive.as_path();
        let mut steps = 0;
        let (p, stopped) = loop {
            let step = self.lock().hot_step(1);
            let s = match step {
                Ok(s) => s,
                Err(e) => {
                    // The new drive failed (the copy ended), or the old one.
                    if self.lock().hot_progress().is_none() {
                        self.hot_ended();
                    }
                    return Err(e.into());
                }
            };
            steps += 1;
            progress(s.done, s.total);
            if s.done == s.total {
                break (s, false);
            }
            if opts.abort_after_regions.is_some_and(|n| steps >= n) {
                return Err(VolumeError::Usage(format!("hot replace stopped after {steps} steps (as asked); it starts over when asked again")));
            }
            if opts.stop_asked() {
                if from_spare {
                    // A spare it took is a spare again (a new label).
                    self.lock().hot_abandon();
                    self.hot_ended();
                    self.give_back_spare(drive)?;
                    let _ = self.record(None);
                    break (s, true);
                }
                // Paused: recorded where the next open looks first.
                self.record(None)?;
                let p = self.lock().hot_pause()?;
                break (p, true);
            }
        };
        if !stopped {
            self.record(None)?;
            let switched = self.lock().hot_switch();
            self.hot_ended();
            if let Err(e) = switched {
                let _ = self.record(None);
                return Err(e.into());
            }
            self.adopt(idx, drive)?;
        }
        let seconds = t0.elapsed().as_secs_f64();
        Ok(HotReport {
            member: idx,
            drive: drive.display().to_string(),
            regions: p.total,
            bytes_copied: p.bytes,
            seconds,
            mib_per_s: p.bytes as f64 / (1 << 20) as f64 / seconds.max(1e-9),
            stopped,
            paused_at: p.paused.then_some(p.done),
            resumed_from,
            rebuild_needed: false,
        })
    }

    /// The copy paused by a clean stop (in this process, or before the
    /// open, which put its twin back): its member and drive.
    fn hot_paused(&self) -> Option<(usize, String)> {
        // A read-only open cannot resume it (as a fixed array's says).
        if !self.writable {
            return None;
        }
        let p = self.lock().hot_progress().filter(|p| p.paused)?;
        let d = self.hot_drive.lock().unwrap_or_else(|e| e.into_inner()).clone()?;
        Some((p.member, d.display().to_string()))
    }

    fn rebuild(&self, progress: &dyn Fn(u64, u64), opts: RebuildOptions) -> Result<RebuildReport> {
        self.check_writable("rebuild")?;
        let t0 = std::time::Instant::now();
        let (mut written, mut lost) = (0, 0);
        let mut first: Option<mosaic_dvs::array::RebuildStep> = None;
        let mut paused = false;
        loop {
            let step = self.lock().rebuild_step(1)?;
            let Some(s) = step else { break };
            let start = first.get_or_insert_with(|| s.clone()).from;
            written += s.bytes_written;
            lost += s.lost_bytes;
            progress(s.done - start, s.total - start);
            if s.done == s.total {
                break;
            }
            if opts.abort_after_regions.is_some_and(|n| s.done - start >= n) {
                return Err(VolumeError::Usage(format!("rebuild stopped after {} SSGs (as asked); it resumes where it stopped", s.done - start)));
            }
            // Each step is durable: the next rebuild starts after it.
            if opts.stop_asked() {
                paused = true;
                break;
            }
        }
        let Some(f) = first else {
            let a = self.lock();
            let failed: Vec<usize> = (0..a.geo().n).filter(|&m| matches!(a.state(m), MemberState::Failed)).collect();
            return Err(VolumeError::Usage(if failed.is_empty() {
                "nothing to rebuild: no member of this dvs array is being rebuilt".into()
            } else {
                format!("nothing to rebuild: member(s) {failed:?} are failed or missing; give each a new drive with mosaic replace --member M --drive PATH")
            }));
        };
        let seconds = t0.elapsed().as_secs_f64();
        Ok(RebuildReport { members: f.members, regions: f.total - f.from, resumed_from: f.from, bytes_written: written, seconds, mib_per_s: written as f64 / (1 << 20) as f64 / seconds.max(1e-9), skipped_regions: 0, paused, lost_bytes: lost })
    }

    /// SSG by SSG, the array's lock released between steps (as the
    /// rebuild's): clients are served while it runs, and `progress` (which
    /// may sleep to hold a rate) runs without the lock.
    fn scrub(&self, repair: bool, progress: &dyn Fn(u64, u64)) -> Result<ScrubReport> {
        if repair {
            self.check_writable("scrub --repair")?;
        }
        self.scrub_interrupt.store(false, std::sync::atomic::Ordering::Relaxed);
        // Findings by extent (SSG, SIT row); repair re-stripes.
        let mut cur = self.io(|a| a.scrub_start(repair))?;
        while !self.scrub_interrupt.load(std::sync::atomic::Ordering::Relaxed) && self.io(|a| a.scrub_step(&mut cur))? {
            progress(cur.done, cur.total);
        }
        let mut rep = self.io(|a| a.scrub_finish(cur))?;
        // Kept in the labels when asked of a writable open (as a fixed
        // array's superblocks keep it); a read-only scrub leaves them.
        if self.writable {
            if let Err(e) = self.io(|a| a.record_scrub(&rep)) {
                rep.notes.push(format!("its result could not be recorded in the labels: {e}"));
            }
        }
        Ok(rep)
    }
    fn interrupt_scrub(&self) {
        self.scrub_interrupt.store(true, std::sync::atomic::Ordering::Relaxed);
    }

    fn idle_work(&self) -> Result<bool> {
        if !self.writable {
            return Ok(false);
        }
        if !self.idle.due() {
            return Ok(false);
        }
        let mut a = match self.arr.try_lock() {
            Ok(a) => a,
            Err(TryLockError::WouldBlock) => return Ok(false),
            Err(TryLockError::Poisoned(e)) => e.into_inner(),
        };
        Ok(a.gc_step()?)
    }

    fn set_idle_after(&self, after: Duration) {
        self.idle.set(after);
    }
}
