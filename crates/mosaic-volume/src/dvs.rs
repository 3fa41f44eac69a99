//! DVS arrays (log-structured, on zoned member files) as volumes.
//!
//! Everything DVS-specific of the volume interface lives here:
//!
//! ```text
//!   requests ──> Mutex<DvsArray> ──> read / write / flush
//!   idle_work: no request for `idle_after` ──> try_lock ──> one gc_step
//!              (a request waits at most for the step in progress)
//!   fail:      DvsArray::fail (recorded in the metadata of the others)
//!   replace:   a failed member only; files::replace_with_file (creates
//!              the zoned file); in a directory array the drive becomes
//!              DIR/dvs-{idx}.zoned at once, so a stopped rebuild finds it
//!   rebuild:   DvsArray::rebuild (SSG by SSG, resumable)
//!   scrub:     DvsArray::scrub_with; repair re-stripes (zones cannot be
//!              rewritten in place); findings by extent "SSG l row r ..."
//! ```

use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard, TryLockError};
use std::time::Duration;

use mosaic_array::maint::RebuildOptions;
use mosaic_array::{RebuildReport, ScrubReport};
use mosaic_core::MemberState;
use mosaic_dev::zoned::ZonedFile;
use mosaic_dev::DeviceLock;
use mosaic_dvs::{files, DvsArray, ZonedMember};

use crate::{human, IoCounters, Result, Volume, VolumeError, VolumeInfo, VolumeMember};

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
        for p in files::member_paths(spec)? {
            // As files::open_spec: a file that cannot be opened is a missing member.
            let Ok(z) = ZonedFile::open(&p) else { continue };
            locks.push(DeviceLock::acquire(&p, true).map_err(|e| VolumeError::Usage(e.to_string()))?);
            devs.push(std::sync::Arc::new(z));
            given.push(p);
        }
        let arr = DvsArray::open(devs)?;
        // The file serving each member, as the labels assigned them.
        let paths = arr.sources().iter().map(|s| s.and_then(|i| given.get(i).cloned())).collect();
        let dir = (!spec.contains(',') && Path::new(spec).is_dir()).then(|| PathBuf::from(spec));
        Ok(DvsVolume {
            capacity: arr.capacity(),
            block: arr.geo().block,
            chunk: arr.geo().chunk,
            arr: Mutex::new(arr),
            dir,
            paths: Mutex::new(paths),
            writable,
            idle: crate::IdleClock::new(DEFAULT_IDLE),
            locks: Mutex::new(locks),
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

    fn check_writable(&self, what: &str) -> Result<()> {
        if self.writable {
            Ok(())
        } else {
            Err(VolumeError::Usage(format!("{what} needs the array open for writing")))
        }
    }
}

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
    fn write(&self, off: u64, data: &[u8]) -> Result<()> {
        self.check_writable("writing")?;
        self.io(|a| a.write(off, data))
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
                errors: Default::default(),
            })
            .collect();
        let degraded = i.member_list.iter().any(|m| !matches!(m.state, MemberState::Active));
        let summary = vec![
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
            ("state".into(), if degraded { format!("degraded: member(s) {:?} failed, missing, stale or rebuilding", i.failed) } else { "ok".into() }),
        ];
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
            detail: serde_json::to_value(&i).unwrap_or(serde_json::Value::Null),
        }
    }

    /// What the open found: devices not used and why (another array's, a
    /// replaced member, a stale one, an older copy), members missing.
    fn warnings(&self) -> Vec<String> {
        self.lock().warnings().to_vec()
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

    fn fail_member(&self, idx: usize) -> Result<()> {
        Ok(self.lock().fail(idx)?)
    }

    fn replace(&self, idx: usize, drive: &Path) -> Result<()> {
        self.check_writable("replace")?;
        let mut a = self.lock();
        let n = a.geo().n;
        if idx >= n {
            return Err(VolumeError::Usage(format!("no member {idx}: the array has members 0..{}", n - 1)));
        }
        for m in (0..n).filter(|&m| m != idx) {
            if self.member_path(m).is_some_and(|p| same_file(&p, drive)) {
                return Err(VolumeError::Usage(format!("{} is member {m} of this array", drive.display())));
            }
        }
        let created = !drive.exists();
        if !created {
            let lock = DeviceLock::acquire(drive, true).map_err(|e| VolumeError::Usage(e.to_string()))?;
            self.locks.lock().unwrap_or_else(|e| e.into_inner()).push(lock);
        }
        if let Err(e) = files::replace_with_file(&mut a, idx, drive) {
            if created {
                let _ = std::fs::remove_file(drive);
            }
            return Err(e.into());
        }
        if created {
            let lock = DeviceLock::acquire(drive, true).map_err(|e| VolumeError::Usage(e.to_string()))?;
            self.locks.lock().unwrap_or_else(|e| e.into_inner()).push(lock);
        }
        drop(a);
        // A directory array finds its members by name: the new drive
        // takes member idx's file name, the old file is kept aside.
        let mut new_path = drive.to_path_buf();
        if let Some(dir) = &self.dir {
            let slot = dir.join(format!("dvs-{idx}.zoned"));
            if !same_file(drive, &slot) {
                let moved = |e: io::Error, what: String| VolumeError::Io {
                    what: format!("member {idx} is now {}, but {what} failed (do it before the array is next opened)", drive.display()),
                    source: e,
                };
                if slot.exists() {
                    let aside = dir.join(format!("dvs-{idx}.zoned.replaced"));
                    std::fs::rename(&slot, &aside).map_err(|e| moved(e, format!("moving {} to {}", slot.display(), aside.display())))?;
                }
                std::fs::rename(drive, &slot).map_err(|e| moved(e, format!("moving it to {}", slot.display())))?;
                new_path = slot;
            }
        }
        self.paths.lock().unwrap_or_else(|e| e.into_inner())[idx] = Some(new_path);
        Ok(())
    }

    fn rebuild(&self, progress: &dyn Fn(u64, u64), opts: RebuildOptions) -> Result<RebuildReport> {
        self.check_writable("rebuild")?;
        let mut a = self.lock();
        if a.rebuild_pending().is_none() {
            let failed: Vec<usize> = (0..a.geo().n).filter(|&m| matches!(a.state(m), MemberState::Failed)).collect();
            return Err(VolumeError::Usage(if failed.is_empty() {
                "nothing to rebuild: no member of this dvs array is being rebuilt".into()
            } else {
                format!("nothing to rebuild: member(s) {failed:?} are failed or missing; give each a new drive with mosaic replace --member M --drive PATH")
            }));
        }
        Ok(a.rebuild(progress, opts.abort_after_regions)?)
    }

    fn scrub(&self, repair: bool, progress: &dyn Fn(u64, u64)) -> Result<ScrubReport> {
        if repair {
            self.check_writable("scrub --repair")?;
        }
        // Findings by extent (SSG, SIT row); repair re-stripes.
        self.io(|a| a.scrub_with(repair, progress))
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
