//! The hybrid tier array: a fast inner array (e.g. raid1 over SSDs) and a
//! slow one (e.g. raid6 over HDDs), placed and moved between by
//! `mosaic_tier::policy::TierPolicy`, every program run by the one
//! executor.
//!
//! ```text
//!   DIR/fast/   a complete mosaic array (member files + journal.img)
//!   DIR/slow/   a complete mosaic array (member files + journal.img)
//!
//!   each inner array's logical space:
//!   0          128 KiB                 data_offset (1 MiB; slow: rounded up to a full stripe)
//!   ├ tier label ┼── (reserved) ───────┼── tier data: the policy's offset 0 ...
//!     two slots of the one label format (mosaic_format::label), kind "tier":
//!     array UUID = the tier's, member 0 = fast / 1 = slow, member UUID =
//!     that inner array's UUID, policy blob = TierBlob (config, geometry,
//!     data offsets)
//!
//!   requests ─> Mutex<TierPolicy>::submit ─> Staged { fg, bg }
//!                 └─ each program run to completion before the next is
//!                    planned (the policy applies its state at plan time)
//!   Executor (base 0) ─ member 0: Shifted(ArrayMember(fast), fast offset)
//!                     └ member 1: Shifted(ArrayMember(slow), slow offset)
//!   a program fails ─> the policy is dropped and recovered from FAST's
//!                      map region (always right by its phase order), or,
//!                      when that would lose placements of completed
//!                      writes, the tier stops (below)
//! ```
//!
//! **Tier, not cache**: the capacity is the slow tier's (less the
//! policy's compaction reserve); the fast tier holds the map and the
//! blocks written or promoted lately.  Writes are acknowledged once they
//! are on the fast array (through its journal), never from memory; their
//! new placements reach the map on FAST with the next flush (as every
//! volume's writes are durable after a flush; `mosaic_tier`'s
//! `commit.rs`), idle time or movement.
//!
//! **A failed program.**  The policy applies a program's changes when it
//! plans it, so a program that fails part-way (an inner array lost more
//! members than it tolerates, a journal device failed) leaves the policy
//! not matching the members; it is dropped and read back from the map
//! on FAST.  That map names only committed placements: when writes
//! completed since the last commit (or a commit that failed) placed
//! blocks the map does not name yet, the map read back would serve their
//! older bytes while the tier went on as if nothing happened.  The tier
//! stops instead, as a cache volume or a DVS array with a failed destage
//! does: every request, flush and close fails, naming the way back
//! (close and open again, which recovers from the map as after a crash:
//! writes completed before the last flush are there, later ones read as
//! written or as before), and `status` shows it failed.  A failed
//! program when nothing was placed since the last commit (a movement:
//! every movement commits first) loses nothing: the map read back is
//! exact and the tier serves on.
//!
//! **Identity and freshness** go through the one rule
//! ([`mosaic_format::fresh`]): both labels must carry the same tier UUID,
//! the inner array under each must be the one the label names, and
//! every writable open bumps both labels' event counter in two rounds, so
//! an old copy of one inner array put back is stale and refused.
//!
//! **Blocks**: both inner arrays have the tier's block; the policy writes
//! its map as whole blocks.
//!
//! **Slow data offset**: the slow array's tier data starts on a full
//! stripe boundary (1 MiB rounded up to the stripe's data bytes), so the
//! policy's whole-segment demotions are full-stripe writes for any layout
//! (raid5:4 with 64 KiB units has 192 KiB stripes).  The executor has one
//! base for all members, so each member adds its own offset ([`Shifted`]).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, TryLockError};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use mosaic_array::maint::RebuildOptions;
use mosaic_array::nested::ArrayMember;
use mosaic_array::spec::ArraySpec;
use mosaic_array::{Array, RebuildReport, ScrubReport};
use mosaic_core::{DeviceIo, Frontend, Health, HotReport, MemberState, Program};
use mosaic_dev::Member;
use mosaic_exec::{Client, Executor};

use crate::nest::{Data, Shifted};
use mosaic_format::label::Label;
use mosaic_tier::policy::{PolicyConfig, TierGeometry, TierHealth, TierPolicy, TierState, TierStats, FAST, SLOW};

use crate::{IoCounters, Result, Volume, VolumeError, VolumeInfo};

mod create;
mod info;
mod labels;
mod maint;
#[cfg(test)]
pub(crate) mod tests;

pub(crate) use create::create_inner;
pub use create::{geometry as tier_geometry, InnerSpec, TierCreate};
use create::{geometry, precheck};
use crate::nest::write_label;
use labels::{check_labels, label_of};
use maint::{merge_rebuild, merge_scrub};

/// The label kind of a tier's inner arrays.
pub const KIND: &str = "tier";
/// Bytes at the start of each inner array kept for the tier label.
pub const LABEL_SPACE: u64 = 1 << 20;
/// Subdirectory of the fast inner array.
pub const FAST_DIR: &str = "fast";
/// Subdirectory of the slow inner array.
pub const SLOW_DIR: &str = "slow";
const SIDES: [&str; 2] = ["fast", "slow"];

/// The tier label's policy blob.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TierBlob {
    pub config: PolicyConfig,
    pub geometry: TierGeometry,
    /// The inner arrays' UUIDs, fast then slow.
    pub inner: [Uuid; 2],
    /// Where tier data starts on each inner array (logical bytes).
    pub data_offset: [u64; 2],
}

/// Whether `spec` names a tier array: a directory with `fast/` or `slow/`
/// (the open names the one missing).
pub fn is_tier(spec: &str) -> bool {
    let d = Path::new(spec.trim());
    !spec.contains(',') && (d.join(FAST_DIR).is_dir() || d.join(SLOW_DIR).is_dir())
}

pub(crate) fn policy_err(e: impl std::fmt::Display) -> VolumeError {
    VolumeError::Tier(e.to_string())
}


/// A tier array behind the volume interface.
pub struct TierVolume {
    dir: PathBuf,
    /// The inner arrays, fast then slow (also the executor's members).
    inner: [Arc<Array>; 2],
    exec: Executor,
    /// None only after a failed program whose map could not be read
    /// back, or once the tier stopped.
    policy: Mutex<Option<TierPolicy>>,
    /// Why the tier stopped serving, once a failed program would have
    /// lost placements of completed writes ([`TierVolume::run`]).
    stopped: OnceLock<String>,
    blob: TierBlob,
    uuid: Uuid,
    created: u64,
    events: AtomicU64,
    writable: bool,
    /// Set by `close`: dropping then flushes nothing again.
    closed: AtomicBool,
    capacity: u64,
    start: Instant,
    idle: crate::IdleClock,
    warnings: Vec<String>,
}

impl TierVolume {
    /// Create a tier in `dir` (`dir/fast`, `dir/slow`) and open it for
    /// writing.  Refuses another array's files without `force`.
    pub fn create(dir: &Path, c: &TierCreate) -> Result<TierVolume> {
        let cfg = PolicyConfig { block: c.block, ..c.config.clone() };
        precheck(dir, c, &cfg)?;
        let fast = create_inner(&dir.join(FAST_DIR), &c.fast, c.unit, c.block, c.force, c.journal_size)?;
        let slow = create_inner(&dir.join(SLOW_DIR), &c.slow, c.unit, c.block, c.force, c.journal_size)?;
        let (geo, data_offset) = geometry(fast.capacity(), slow.capacity(), slow.geometry().stripe_data_bytes())?;
        let (policy, format) = TierPolicy::format(cfg.clone(), geo).map_err(policy_err)?;
        let blob = TierBlob { config: cfg, geometry: geo, inner: [fast.info().uuid, slow.info().uuid], data_offset };
        let uuid = Uuid::new_v4();
        // Each side knows it is one: opened alone it is only read.
        for (arr, role) in [(&fast, "the fast side of a tier"), (&slow, "the slow side of a tier")] {
            arr.set_owner(mosaic_array::superblock::Owner { role: role.into(), uuid })?;
        }
        let vol = TierVolume::assemble(dir, [fast, slow], uuid, mosaic_array::now_secs(), 0, blob, policy, true, Vec::new());
        // The empty map first, then the labels: a labelled tier has a map.
        vol.exec.run(&format, Client::None, None).map_err(policy_err)?;
        vol.flush()?;
        vol.write_labels(1)?;
        Ok(vol)
    }

    /// Open the tier in `dir`: both inner arrays, their labels (one tier,
    /// fresh), the map from the fast tier.  A writable open bumps the
    /// labels' event counter.
    pub fn open(dir: &Path, writable: bool) -> Result<TierVolume> {
        let dirs = [dir.join(FAST_DIR), dir.join(SLOW_DIR)];
        let open = |side: usize| {
            Array::open(&ArraySpec::Dir(dirs[side].clone()), writable)
                .map_err(|e| VolumeError::Usage(format!("the {} tier {}: {e}", SIDES[side], dirs[side].display())))
        };
        let (fast, slow) = (open(FAST)?, open(SLOW)?);
        let labels = [label_of(&dirs[FAST], &fast)?, label_of(&dirs[SLOW], &slow)?];
        let auth = check_labels(&dirs, [fast.info().uuid, slow.info().uuid], labels)?;
        let blob: TierBlob = auth.policy().map_err(|e| VolumeError::Usage(format!("tier {}: {e}", auth.array_uuid)))?;
        let mut warnings = Vec::new();
        for (side, arr) in [&fast, &slow].into_iter().enumerate() {
            warnings.extend(Volume::warnings(arr).into_iter().map(|w| format!("{} tier: {w}", SIDES[side])));
        }
        let policy = load_policy(&fast, &blob)?;
        let vol = TierVolume::assemble(dir, [fast, slow], auth.array_uuid, auth.created, auth.events, blob, policy, writable, warnings);
        if writable {
            vol.write_labels(auth.events + 1)?;
            vol.write_labels(auth.events + 2)?;
        }
        Ok(vol)
    }

    #[allow(clippy::too_many_arguments)]
    fn assemble(
        dir: &Path,
        arrays: [Array; 2],
        uuid: Uuid,
        created: u64,
        events: u64,
        blob: TierBlob,
        mut policy: TierPolicy,
        writable: bool,
        warnings: Vec<String>,
    ) -> TierVolume {
        let [fast, slow] = arrays.map(Arc::new);
        let member = |side: usize, arr: &Arc<Array>| {
            let name = dir.join(SIDES[side]);
            let name = std::fs::canonicalize(&name).unwrap_or(name).display().to_string();
            let m = Shifted { inner: ArrayMember::new(arr.clone(), name), base: blob.data_offset[side] };
            Some(Arc::new(m) as Arc<dyn Member>)
        };
        let exec = Executor::new(vec![member(FAST, &fast), member(SLOW, &slow)], 0);
        let inner = [fast, slow];
        let (fh, sh) = (tier_health(&inner[FAST]), tier_health(&inner[SLOW]));
        policy.set_health(fh, sh);
        TierVolume {
            dir: dir.to_path_buf(),
            exec,
            capacity: policy.capacity(),
            idle: crate::IdleClock::new(Duration::from_nanos(policy.idle_after_ns().unwrap_or(DEFAULT_IDLE_NS))),
            policy: Mutex::new(Some(policy)),
            stopped: OnceLock::new(),
            blob,
            uuid,
            created,
            events: AtomicU64::new(events),
            writable,
            closed: AtomicBool::new(false),
            start: Instant::now(),
            inner,
            warnings,
        }
    }

    /// The tier's UUID.
    pub fn uuid(&self) -> Uuid {
        self.uuid
    }

    /// The policy's counters (None when the map could not be read back).
    pub fn stats(&self) -> Option<TierStats> {
        self.lock().as_ref().map(TierPolicy::stats)
    }

    /// The tier's state (None when the map could not be read back).
    pub fn state(&self) -> Option<TierState> {
        self.lock().as_ref().map(TierPolicy::state)
    }

    /// The inner arrays, fast then slow.
    pub fn inner(&self) -> [&Array; 2] {
        [&self.inner[FAST], &self.inner[SLOW]]
    }

    /// Where logical block `lb` lives now: FAST or SLOW and the byte
    /// offset in that inner array's tier data.
    pub fn placement(&self, lb: u64) -> Option<(usize, u64)> {
        self.lock().as_ref().and_then(|p| p.placement(lb))
    }

    fn label(&self, side: usize, events: u64) -> Result<Label> {
        Ok(Label {
            kind: KIND.into(),
            array_uuid: self.uuid,
            member_uuid: self.blob.inner[side],
            member_index: side,
            members: 2,
            events,
            member_uuids: self.blob.inner.to_vec(),
            created: self.created,
            policy: serde_json::to_value(&self.blob).map_err(policy_err)?,
            session: Uuid::nil(),
            prev_session: Uuid::nil(),
        })
    }

    /// One round of a label update: both labels at `events`.
    fn write_labels(&self, events: u64) -> Result<()> {
        for side in [FAST, SLOW] {
            write_label(&self.inner[side], &self.label(side, events)?)?;
        }
        self.events.store(events, Ordering::Relaxed);
        Ok(())
    }

    fn lock(&self) -> MutexGuard<'_, Option<TierPolicy>> {
        self.policy.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn touch(&self) {
        self.idle.touch();
    }

    fn now_ns(&self) -> u64 {
        self.start.elapsed().as_nanos().min(u64::MAX as u128) as u64
    }

    /// The outer members' states as the policy reads them: an inner
    /// array that lost more members than it tolerates is failed.
    fn health(&self) -> Health {
        let st = |side: usize| match tier_health(&self.inner[side]) {
            TierHealth::Offline => MemberState::Failed,
            _ => MemberState::Active,
        };
        Health { states: vec![st(FAST), st(SLOW)] }
    }

    /// Tell the policy how the inner arrays are.
    fn sync_health(&self, p: &mut TierPolicy) {
        p.set_health(tier_health(&self.inner[FAST]), tier_health(&self.inner[SLOW]));
    }

    fn refresh_health(&self) {
        if let Some(p) = self.lock().as_mut() {
            self.sync_health(p);
        }
    }

    /// Why the tier stopped serving, if it has (see the module docs).
    pub fn stopped(&self) -> Option<&str> {
        self.stopped.get().map(String::as_str)
    }

    /// An error once the tier has stopped: why, and the way back.
    fn live(&self) -> Result<()> {
        let Some(why) = self.stopped.get() else { return Ok(()) };
        Err(VolumeError::Tier(format!(
            "the tier has stopped ({why}): placements of completed writes were not yet in the map on the fast tier, so the map read back would serve their older bytes; close the array and open it again, which recovers it as after a crash (writes completed before the last flush are there, later ones read as written or as before)"
        )))
    }

    /// Run one program of a batch planned when `dirty_before` blocks had
    /// placements no durable map frame named.  When it fails, drop the
    /// policy and recover it from the map on FAST, or stop the tier if
    /// that would lose placements of completed writes: some were dirty
    /// before the batch (still dirty, or in a commit that may not have
    /// landed) or are now.  A failed program without device writes (a
    /// read) changed nothing on the members: the policy stays, with its
    /// dirty placements.
    fn run(&self, slot: &mut Option<TierPolicy>, p: &Program, client: Client<'_>, dirty_before: u64) -> Result<()> {
        let Err(e) = self.exec.run(p, client, None) else { return Ok(()) };
        if p.io().all(|(dir, _)| dir == mosaic_core::Dir::Read) {
            if let Some(pol) = slot.as_mut() {
                self.sync_health(pol);
            }
            return Err(VolumeError::Tier(format!("tier read failed: {e}")));
        }
        let dirty = slot.take().map_or(0, |pol| pol.dirty_placements());
        let what = format!("tier program failed: {e}");
        if dirty_before > 0 || dirty > 0 {
            let _ = self.stopped.set(what);
            return self.live();
        }
        match load_policy(&self.inner[FAST], &self.blob) {
            Ok(mut pol) => {
                self.sync_health(&mut pol);
                *slot = Some(pol);
                Err(VolumeError::Tier(format!("{what} (the tier map was read back from the fast tier)")))
            }
            Err(e2) => Err(VolumeError::Tier(format!("{what}; the tier map could not be read back either ({e2}): reopen the array"))),
        }
    }

    /// A client request: plan, then run every program to completion.
    fn request(&self, write: bool, off: u64, mut data: Data<'_>) -> Result<()> {
        if write && !self.writable {
            return Err(VolumeError::Usage("writing needs the array open for writing".into()));
        }
        self.touch();
        let mut g = self.lock();
        self.live()?;
        let r = self.request_locked(&mut g, write, off, &mut data);
        drop(g);
        self.touch();
        r
    }

    fn request_locked(&self, g: &mut Option<TierPolicy>, write: bool, off: u64, data: &mut Data<'_>) -> Result<()> {
        let pol = g.as_mut().ok_or_else(map_lost)?;
        self.sync_health(pol);
        let dirty = pol.dirty_placements();
        let staged = pol.submit(write, off, data.len(), self.now_ns(), &self.health()).map_err(policy_err)?;
        for p in &staged.fg {
            self.run(g, p, data.client(), dirty)?;
        }
        for p in &staged.bg {
            self.run(g, p, Client::None, dirty)?;
        }
        Ok(())
    }

    /// Flattened member `i`: its inner array and index there.
    fn locate(&self, i: usize) -> Result<(usize, usize)> {
        let nf = self.inner[FAST].geometry().members;
        let ns = self.inner[SLOW].geometry().members;
        match i {
            i if i < nf => Ok((FAST, i)),
            i if i < nf + ns => Ok((SLOW, i - nf)),
            _ => Err(VolumeError::Usage(format!(
                "no member {i}: the tier has members 0..{} (fast 0..{}, slow {}..{})",
                nf + ns - 1,
                nf - 1,
                nf,
                nf + ns - 1
            ))),
        }
    }

    /// `off..off + len` must be whole blocks within the capacity.
    fn check_blocks(&self, what: &str, off: u64, len: u64) -> Result<()> {
        let block = self.blob.config.block;
        if off % block != 0 || len % block != 0 || off.checked_add(len).map_or(true, |end| end > self.capacity) {
            return Err(VolumeError::Usage(format!("{what} of {len} bytes at {off}: not whole {block}-byte blocks within the capacity")));
        }
        Ok(())
    }

    fn check_writable(&self, what: &str) -> Result<()> {
        if self.writable {
            Ok(())
        } else {
            Err(VolumeError::Usage(format!("{what} needs the array open for writing")))
        }
    }
}

/// A volume dropped without `close` still commits its dirty placements
/// (best effort, as closing a file would); only a crash loses them.
impl Drop for TierVolume {
    fn drop(&mut self) {
        if self.writable && !self.closed.load(Ordering::Relaxed) {
            let _ = Volume::flush(self);
        }
    }
}

/// Default idle time before movement when the policy names none.
const DEFAULT_IDLE_NS: u64 = 100_000_000;

/// A tier spare's side and path: it is named `fast:PATH` or `slow:PATH`.
fn spare_side(drive: &Path) -> Result<(usize, PathBuf)> {
    let d = drive.to_string_lossy();
    match (d.strip_prefix("fast:"), d.strip_prefix("slow:")) {
        (Some(p), _) => Ok((FAST, PathBuf::from(p))),
        (_, Some(p)) => Ok((SLOW, PathBuf::from(p))),
        _ => Err(VolumeError::Usage(format!("a tier array's spare stands in for a fast or a slow drive: name it fast:{d} or slow:{d}"))),
    }
}

fn map_lost() -> VolumeError {
    VolumeError::Tier("the tier map could not be read back after a failed program: reopen the array".into())
}

/// An inner array's health as the policy sees it.
fn tier_health(arr: &Array) -> TierHealth {
    if arr.columns_out() > arr.geometry().m {
        TierHealth::Offline
    } else if arr.health().is_degraded() {
        TierHealth::Degraded
    } else {
        TierHealth::Ok
    }
}

/// Read FAST's map region and recover the policy from it.
fn load_policy(fast: &Array, blob: &TierBlob) -> Result<TierPolicy> {
    let n = TierPolicy::map_bytes(&blob.config, &blob.geometry);
    let end = blob.data_offset[FAST].checked_add(n).filter(|&e| n > 0 && e <= fast.capacity());
    if end.is_none() {
        return Err(VolumeError::Tier(format!(
            "the tier's configuration and geometry give no map region that fits the fast tier ({} bytes)",
            fast.capacity()
        )));
    }
    let mut meta = vec![0u8; n as usize];
    fast.read(blob.data_offset[FAST], &mut meta)?;
    TierPolicy::recover(blob.config.clone(), blob.geometry, &meta).map_err(policy_err)
}

/// Most logical bytes one discard step drops under the policy's lock
/// (whole blocks: every block size divides it).
const DISCARD_WINDOW: u64 = 1 << 30;

impl Volume for TierVolume {
    fn info(&self) -> VolumeInfo {
        self.volume_info()
    }
    fn capacity(&self) -> u64 {
        self.capacity
    }
    fn block_size(&self) -> u64 {
        self.blob.config.block
    }
    fn preferred_block(&self) -> u64 {
        // The largest power of two dividing the smallest extent (one
        // write run fills an extent), at most 64 KiB.
        let e = self.blob.config.sections.iter().map(|s| s.0).min().unwrap_or(self.blob.config.block);
        (1u64 << e.trailing_zeros().min(16)).max(self.blob.config.block)
    }
    fn read(&self, off: u64, buf: &mut [u8]) -> Result<()> {
        self.request(false, off, Data::Out(buf))
    }
    fn write(&self, off: u64, data: &[u8]) -> Result<()> {
        self.request(true, off, Data::In(data))
    }
    /// A block with no placement in the map was never written: its
    /// reads are zeros.
    fn allocation(&self, off: u64, len: u64) -> Result<Vec<(u64, bool)>> {
        let block = self.blob.config.block;
        self.check_blocks("allocation", off, len)?;
        let g = self.lock();
        self.live()?;
        let pol = g.as_ref().ok_or_else(map_lost)?;
        Ok((off / block..(off + len) / block).map(|lb| (block, pol.placement(lb).is_none())).collect())
    }
    /// The mapped blocks of the range leave the map and free their places
    /// (`mosaic_tier`'s `discard.rs`: one map write), in windows of at
    /// most [`DISCARD_WINDOW`] under the lock.
    fn discard(&self, off: u64, len: u64) -> Result<()> {
        self.check_writable("discarding")?;
        let block = self.blob.config.block;
        self.check_blocks("discard", off, len)?;
        let end = off + len;
        let mut at = off;
        while at < end {
            let n = (end - at).min(DISCARD_WINDOW.max(block));
            self.touch();
            let mut g = self.lock();
            self.live()?;
            let pol = g.as_mut().ok_or_else(map_lost)?;
            self.sync_health(pol);
            let dirty = pol.dirty_placements();
            if let Some(p) = pol.discard(at, n, &self.health()).map_err(policy_err)? {
                self.run(&mut g, &p, Client::None, dirty)?;
            }
            drop(g);
            at += n;
        }
        self.touch();
        Ok(())
    }
    /// The discard's map write is flushed before it returns, and the
    /// blocks it drops read as zeros.
    fn discard_zeroes(&self) -> bool {
        true
    }
    /// The policy's flush (FAST's data, then the map's dirty placements),
    /// then both inner arrays.
    fn flush(&self) -> Result<()> {
        if self.writable {
            let mut g = self.lock();
            self.live()?;
            let pol = g.as_mut().ok_or_else(map_lost)?;
            self.sync_health(pol);
            let dirty = pol.dirty_placements();
            for p in pol.flush(self.now_ns(), &self.health()).map_err(policy_err)? {
                self.run(&mut g, &p, Client::None, dirty)?;
            }
        }
        for a in &self.inner {
            a.flush()?;
        }
        Ok(())
    }
    /// Closing flushes (the map's dirty placements), then closes the
    /// inner arrays.
    fn close(&self) -> Result<()> {
        if self.writable {
            self.flush()?;
        }
        self.closed.store(true, Ordering::Relaxed);
        for a in &self.inner {
            a.close()?;
        }
        Ok(())
    }

    /// Per outer member (0 fast, 1 slow): what the tier's executor ran on
    /// each inner array; `info` details the inner members' own counters.
    fn io_counters(&self) -> IoCounters {
        let c = self.exec.counters();
        let members: Vec<DeviceIo> = c.members.clone();
        IoCounters {
            device_reads: members.iter().map(|m| m.reads).sum(),
            device_writes: members.iter().map(|m| m.writes).sum(),
            ops: Some(c.ops),
            members,
        }
    }
    fn reset_counters(&self) {
        self.exec.reset_counters();
        for a in &self.inner {
            a.reset_counters();
        }
    }
    fn auto_failed(&self) -> Vec<(usize, String)> {
        let nf = self.inner[FAST].geometry().members;
        let mut out = self.inner[FAST].auto_failed();
        out.extend(self.inner[SLOW].auto_failed().into_iter().map(|(m, e)| (m + nf, format!("slow tier: {e}"))));
        out
    }
    /// The inner arrays' warnings at open; once the tier has stopped,
    /// why and the way back.
    fn warnings(&self) -> Vec<String> {
        let mut w = self.warnings.clone();
        w.extend(self.live().err().map(|e| e.to_string()));
        w
    }

    fn fail_member(&self, idx: usize) -> Result<()> {
        let (side, m) = self.locate(idx)?;
        self.inner[side].fail_member(m)?;
        self.refresh_health();
        Ok(())
    }
    fn replace(&self, idx: usize, drive: &Path) -> Result<()> {
        self.check_writable("replace")?;
        let (side, m) = self.locate(idx)?;
        let r = Volume::replace(self.inner[side].as_ref(), m, drive);
        self.refresh_health();
        r
    }
    /// The side's array copies the member (its twin sits in the side's
    /// slot, under the tier's writes, which reach the side through it).
    fn replace_hot(&self, idx: usize, drive: Option<&Path>, progress: &dyn Fn(u64, u64), opts: RebuildOptions) -> Result<HotReport> {
        self.check_writable("replace")?;
        self.live()?;
        let (side, m) = self.locate(idx)?;
        let r = Volume::replace_hot(self.inner[side].as_ref(), m, drive, progress, opts);
        self.refresh_health();
        Ok(HotReport { member: idx, ..r? })
    }
    fn hot_paused(&self) -> Option<(usize, String)> {
        let nf = self.inner[FAST].geometry().members;
        [FAST, SLOW].into_iter().find_map(|side| Volume::hot_paused(self.inner[side].as_ref()).map(|(m, d)| (m + [0, nf][side], d)))
    }
    fn rebuild(&self, progress: &dyn Fn(u64, u64), opts: RebuildOptions) -> Result<RebuildReport> {
        self.check_writable("rebuild")?;
        let nf = self.inner[FAST].geometry().members;
        let total: u64 = self.inner.iter().map(|a| a.geometry().stripes).sum();
        let mut reps = Vec::new();
        let mut before = 0;
        for side in [FAST, SLOW] {
            let a = &self.inner[side];
            if a.rebuild_pending().is_some() {
                let r = a.rebuild(&|d, _| progress(before + d, total), opts.clone());
                self.refresh_health();
                let r = r?;
                let paused = r.paused;
                reps.push(([0, nf][side], r));
                if paused {
                    break;
                }
            }
            before += a.geometry().stripes;
        }
        if reps.is_empty() {
            return Err(VolumeError::Usage("nothing to rebuild: no member of either tier is being rebuilt (use mosaic replace)".into()));
        }
        Ok(merge_rebuild(reps))
    }
    fn check_spare(&self, drive: &Path) -> Result<()> {
        self.check_writable("add a spare")?;
        let (side, path) = spare_side(drive)?;
        Ok(self.inner[side].check_spare(&path)?)
    }
    /// A spare belongs to one tier: the drive is named `fast:PATH` or
    /// `slow:PATH`.
    fn add_spare(&self, drive: &Path) -> Result<()> {
        self.check_writable("add a spare")?;
        let (side, path) = spare_side(drive)?;
        Ok(self.inner[side].add_spare(&path)?)
    }
    /// The spare is found on either side; `fast:` or `slow:` before the
    /// path, as `add_spare` takes it, is accepted too.
    fn remove_spare(&self, drive: &Path) -> Result<PathBuf> {
        self.check_writable("remove a spare")?;
        let d = drive.to_string_lossy();
        let path = Path::new(d.strip_prefix("fast:").or_else(|| d.strip_prefix("slow:")).unwrap_or(&d));
        let side = [FAST, SLOW].into_iter().find(|&s| self.inner[s].spare_paths().iter().any(|p| mosaic_array::spare::names_same(p, path)));
        let listed = || [FAST, SLOW].into_iter().flat_map(|s| self.inner[s].spare_paths());
        let Some(side) = side else { return Err(VolumeError::Usage(mosaic_array::spare::not_a_spare(path, listed()))) };
        self.inner[side].remove_spare(path)?;
        Ok(path.to_path_buf())
    }
    fn take_spare(&self) -> Result<Option<usize>> {
        let nf = self.inner[FAST].geometry().members;
        for side in [FAST, SLOW] {
            if let Some(m) = self.inner[side].take_spare()? {
                self.refresh_health();
                return Ok(Some(m + [0, nf][side]));
            }
        }
        Ok(None)
    }
    /// Either inner array (the repairing scrub below scrubs both).
    fn needs_resync(&self) -> bool {
        self.writable && self.inner.iter().any(|a| a.needs_resync())
    }
    fn interrupt_scrub(&self) {
        self.inner.iter().for_each(|a| a.interrupt_scrub());
    }
    fn scrub(&self, repair: bool, progress: &dyn Fn(u64, u64)) -> Result<ScrubReport> {
        if repair {
            self.check_writable("scrub --repair")?;
        }
        let total: u64 = self.inner.iter().map(|a| a.geometry().stripes).sum();
        let fast_regions = self.inner[FAST].geometry().stripes;
        let f = self.inner[FAST].scrub(repair, &|d, _| progress(d, total))?;
        let s = self.inner[SLOW].scrub(repair, &|d, _| progress(fast_regions + d, total))?;
        Ok(merge_scrub(vec![(FAST, f), (SLOW, s)]))
    }
    /// Each tier that needs it resyncs (with its own bitmap, if any).
    fn resync(&self, progress: &dyn Fn(u64, u64)) -> Result<ScrubReport> {
        self.check_writable("resync")?;
        let mut reps = Vec::new();
        for (i, a) in self.inner.iter().enumerate().filter(|(_, a)| a.needs_resync()) {
            reps.push((i, a.resync(progress)?));
        }
        Ok(merge_scrub(reps))
    }

    /// One step of movement (demotion, promotion, compaction) once no
    /// request came for the idle time; requests wait at most for it.
    fn idle_work(&self) -> Result<bool> {
        if !self.writable {
            return Ok(false);
        }
        if !self.idle.due() {
            return Ok(false);
        }
        let mut g = match self.policy.try_lock() {
            Ok(g) => g,
            Err(TryLockError::WouldBlock) => return Ok(false),
            Err(TryLockError::Poisoned(e)) => e.into_inner(),
        };
        self.live()?;
        let pol = g.as_mut().ok_or_else(map_lost)?;
        self.sync_health(pol);
        let dirty = pol.dirty_placements();
        let ps = pol.idle(self.now_ns(), &self.health()).map_err(policy_err)?;
        for p in &ps {
            self.run(&mut g, p, Client::None, dirty)?;
        }
        Ok(!ps.is_empty())
    }
    fn set_idle_after(&self, after: Duration) {
        self.idle.set(after);
    }
}
