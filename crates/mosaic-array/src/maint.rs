//! Maintenance: replace a member, rebuild it with checkpoints, scrub.
//!
//! Rebuild walks the layout's regions (stripes) in order.  The replacement's
//! state is `Rebuilding { done }`: regions below `done` are valid on it and
//! in service, the rest are reconstructed.  Every [`CHECKPOINT_EVERY`] the
//! new member is flushed and `done` is written to every superblock, so a
//! killed rebuild resumes from the last checkpoint; regions rebuilt after it
//! are simply rebuilt again, which is idempotent.  A rebuild stopped by a
//! failure the layout cannot absorb checkpoints where it stopped: the
//! stripes below stay whole, also when the array is opened again (see
//! `assemble`).
//!
//! A member failing during a rebuild's or a scrub's region is failed and
//! the region planned again without it while the layout has what the
//! region needs; only a failure beyond the redundancy stops them.

use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use mosaic_core::{Buf, Io, Layout, MemberState, Phase, Program, Ref, ScrubAt, ScrubFinding};
use mosaic_exec::Client;
use mosaic_dev::{Device, Member};

use crate::array::Array;
use crate::superblock::{Superblock, DATA_OFFSET};
use crate::ArrayError;

/// How often the rebuild position is written to the superblocks: after this
/// much time or this many regions, whichever comes first.
pub const CHECKPOINT_EVERY: Duration = Duration::from_millis(500);
pub const CHECKPOINT_REGIONS: u64 = 256;

pub use mosaic_core::{RebuildReport, ScrubReport};

/// Whether `former`, a device's superblock, is that of the device that
/// left slot `idx` of the array `sb` describes while active, with the
/// session it carried then (a copy written apart has a session of its
/// own; see `Superblock::left`).
fn left_from(sb: &Superblock, idx: usize, former: &Superblock) -> bool {
    let left = sb.left.get(idx).copied().unwrap_or_default();
    former.array_uuid == sb.array_uuid && former.member_index == idx && former.member_uuid == sb.member_uuids[idx] && !left.is_nil() && former.session == left
}

/// What a scrub records of the stripes it verified, as a resync.
#[derive(Clone, Copy)]
enum Resync<'a> {
    /// Nothing (a scrub asked for).
    No,
    /// Without a bitmap: how far it verified in order
    /// ([`Array::checkpoint_resync`]).
    InOrder,
    /// Each bitmap region it verified whole is cleared.
    Bitmap(&'a crate::bitmap::WriteIntent),
}

/// How a rebuild may be stopped before its end.
#[derive(Debug, Clone, Default)]
pub struct RebuildOptions {
    /// For tests: stop abruptly after a number of regions, as a killed
    /// process would (no checkpoint, no cleanup).
    pub abort_after_regions: Option<u64>,
    /// Once set (a server stopping), the rebuild checkpoints and returns
    /// paused; the next rebuild resumes there (md's `recovery_offset`).
    pub stop: Option<Arc<std::sync::atomic::AtomicBool>>,
}

impl RebuildOptions {
    /// Whether a stop was asked (`stop` set).
    pub fn stop_asked(&self) -> bool {
        self.stop.as_ref().is_some_and(|f| f.load(Ordering::Relaxed))
    }

    /// For tests: end the process as a kill would (no checkpoint, no
    /// cleanup) once `done` regions reach `abort_after_regions`.
    pub fn abort_when(&self, done: u64) {
        if self.abort_after_regions.is_some_and(|n| done >= n) {
            std::process::abort();
        }
    }
}

impl Array {
    /// Rebuild and scrub walk one layout: refused while a grow has two.
    pub(crate) fn not_growing(&self, what: &str) -> Result<(), ArrayError> {
        match self.grow_pending() {
            Some((done, total)) => Err(ArrayError::Usage(format!(
                "a grow is in progress ({done} of {total} stripes restriped): finish it before a {what} (mosaic grow -a ARRAY)"
            ))),
            None => Ok(()),
        }
    }

    /// Refuse `path` when it is a working member of this array (other than
    /// `except`): said plainly, before its lock says "in use".
    pub(crate) fn not_a_member(&self, path: &Path, except: Option<usize>) -> Result<(), ArrayError> {
        let (sb, h) = (self.superblock(), self.health());
        let working = |i: usize| Some(i) != except && !matches!(h.states.get(i), Some(MemberState::Failed));
        match sb.member_paths.iter().enumerate().find(|(i, p)| working(*i) && crate::spare::names_same(p, path)) {
            Some((i, _)) => Err(ArrayError::Usage(format!("{} is member {i} of this array", path.display()))),
            None => Ok(()),
        }
    }

    /// Put a new device in place of failed member `idx` (rebuild follows).
    pub fn replace(&self, idx: usize, path: &Path) -> Result<(), ArrayError> {
        self.not_a_member(path, Some(idx))?;
        // The failed member's own device put back (md's re-add, of a
        // served array too): this array still holds it, locked, though it
        // uses it no more; let it go, so it can be opened and locked anew.
        let failed = matches!(self.health().states.get(idx), Some(MemberState::Failed));
        if failed && self.superblock().member_paths.get(idx).is_some_and(|p| crate::spare::names_same(p, path)) {
            self.set_member(idx, None);
        }
        let m = crate::array::open_for_writing(path)?;
        self.replace_with(idx, Arc::new(m), &crate::assemble::hint_of(path))
    }

    /// Whether the device at `path` is failed member `idx`'s own, back
    /// with the session it left in, so a replace by it is md's re-add
    /// (the write-intent bitmap says what it missed).  False when it
    /// cannot be read (a remote not answering yet).
    pub fn readdable(&self, idx: usize, path: &Path) -> bool {
        let sb = self.superblock();
        if sb.bitmap.is_none() || !matches!(self.health().states.get(idx), Some(MemberState::Failed)) {
            return false;
        }
        let Ok(m) = Device::open(path) else { return false };
        Superblock::read_from(&m).is_ok_and(|o| left_from(&sb, idx, &o))
    }

    /// [`Array::replace`] with an already-open member.
    pub fn replace_with(&self, idx: usize, m: Arc<dyn Member>, path: &str) -> Result<(), ArrayError> {
        self.not_growing("replace")?;
        let n = self.geometry().members;
        if idx >= n {
            return Err(ArrayError::Usage(format!("no member {idx}: the array has members 0..{}", n - 1)));
        }
        let state = self.health().states[idx];
        if !matches!(state, MemberState::Failed) {
            return Err(ArrayError::Usage(format!(
                "member {idx} is {}; only a failed member can be replaced (mosaic fail first), or a working one with replace --hot",
                if matches!(state, MemberState::Active) { "active" } else { "already being rebuilt" }
            )));
        }
        let sb = self.superblock();
        let need = DATA_OFFSET + sb.geometry.member_bytes(idx);
        if m.size() < need {
            return Err(ArrayError::BadMember(format!("{path}: replacement too small: {} bytes, the array needs {need}", m.size())));
        }
        let former = Superblock::read_from(m.as_ref()).ok();
        if let Some(other) = &former {
            if other.array_uuid == sb.array_uuid && self.health().states.get(other.member_index).is_some_and(|s| !matches!(s, MemberState::Failed)) && other.member_uuid == sb.member_uuids[other.member_index] {
                return Err(ArrayError::Usage(format!("{path} is member {} of this array already", other.member_index)));
            }
        }
        // md's re-add: the very device that left this slot while active
        // comes back, with the session it carried then (a copy written
        // apart has a session of its own; see `Superblock::left`); the
        // bitmap marks every region written since it left, so the
        // rebuild passes over the others.
        let readd = former.is_some_and(|o| left_from(&sb, idx, &o));
        // Records from before the member failed may name its slot: replayed
        // after a crash, they would write their old bytes over what the
        // rebuild put on the new device.  Empty the journal first (a cache
        // volume, whose journal holds writes not yet destaged, does so
        // itself: `CacheVolume::quiesced`).
        if self.auto_checkpoint() {
            self.journal_checkpoint()?;
        }
        // The new device carries the bitmap before it takes writes.
        if let Some(b) = self.bitmap() {
            b.write_all_to(m.as_ref()).map_err(|e| ArrayError::Io(format!("{path}: writing the write-intent bitmap: {e}")))?;
            b.set_readd(idx, readd);
        }
        self.set_member(idx, Some(m));
        self.set_health(idx, MemberState::Rebuilding { done: 0 });
        self.write_superblocks(|s| s.new_device(idx, path))
    }

    /// Members being rebuilt and the lowest rebuilt position.
    pub fn rebuild_pending(&self) -> Option<(Vec<usize>, u64)> {
        let h = self.health();
        let t: Vec<(usize, u64)> = h
            .states
            .iter()
            .enumerate()
            .filter_map(|(i, s)| match s {
                MemberState::Rebuilding { done } => Some((i, *done)),
                _ => None,
            })
            .collect();
        if t.is_empty() {
            None
        } else {
            Some((t.iter().map(|x| x.0).collect(), t.iter().map(|x| x.1).min().unwrap()))
        }
    }

    /// Rebuild every member in `Rebuilding` state, resuming from its
    /// checkpoint.  `progress(done, total)` is called per region.
    pub fn rebuild(&self, progress: &dyn Fn(u64, u64), opts: RebuildOptions) -> Result<RebuildReport, ArrayError> {
        self.not_growing("rebuild")?;
        let t0 = Instant::now();
        let Some((targets, start)) = self.rebuild_pending() else {
            return Err(ArrayError::Usage("nothing to rebuild: no member is being rebuilt (use mosaic replace)".into()));
        };
        let total = self.layout().regions();
        let mut last_ckpt = Instant::now();
        let mut written = 0u64;
        let mut since_start = 0u64;
        let mut skipped = 0u64;
        let mut lost_bytes = 0u64;
        let report = |written: u64, skipped: u64, lost_bytes: u64, paused: bool| {
            let secs = t0.elapsed().as_secs_f64();
            RebuildReport {
                members: targets.clone(),
                regions: total,
                resumed_from: start,
                bytes_written: written,
                seconds: secs,
                mib_per_s: written as f64 / (1 << 20) as f64 / secs.max(1e-9),
                skipped_regions: skipped,
                paused,
                lost_bytes,
            }
        };
        for region in start..total {
            opts.abort_when(since_start);
            if opts.stop_asked() {
                // What was rebuilt stays rebuilt: the next rebuild starts here.
                self.checkpoint(&targets)?;
                return Ok(report(written, skipped, lost_bytes, true));
            }
            let _g = self.lock_stripes(std::iter::once(region));
            let bytes = match self.rebuild_region(region, &targets) {
                Ok(Some((bytes, lost))) => {
                    lost_bytes += lost;
                    bytes
                }
                Ok(None) => continue,
                Err(e) => return Err(self.rebuild_stopped(region, &targets, e)),
            };
            progress(region + 1, total);
            if bytes == 0 {
                // Passed over (a re-added member held it): only time
                // checkpoints.
                skipped += 1;
                if last_ckpt.elapsed() >= CHECKPOINT_EVERY {
                    self.checkpoint(&targets)?;
                    last_ckpt = Instant::now();
                }
                continue;
            }
            written += bytes;
            since_start += 1;
            if last_ckpt.elapsed() >= CHECKPOINT_EVERY || since_start % CHECKPOINT_REGIONS == 0 {
                self.checkpoint(&targets)?;
                last_ckpt = Instant::now();
            }
        }
        // Only a target rebuilt to the end is in service: one failed (or
        // failed and replaced again) while the rebuild ran is not.
        let h = self.health();
        let (done, lost): (Vec<usize>, Vec<usize>) = targets.iter().partition(|&&t| matches!(h.states[t], MemberState::Rebuilding { done } if done >= total));
        for &t in &done {
            if let Some(m) = self.member(t) {
                m.flush().map_err(|e| ArrayError::Io(format!("{}: {e}", m.describe())))?;
            }
            self.set_health(t, MemberState::Active);
            if let Some(b) = self.bitmap() {
                b.set_readd(t, false);
            }
        }
        self.write_superblocks(|_| {})?;
        if !lost.is_empty() {
            return Err(ArrayError::Io(format!(
                "rebuild: member(s) {lost:?} failed (or were replaced again) while being rebuilt and are not in service; replace them and rebuild again"
            )));
        }
        Ok(report(written, skipped, lost_bytes, false))
    }

    /// Rebuild `region` onto the targets still being rebuilt there: the
    /// bytes written and the logical bytes lost (a source's unreadable
    /// blocks nothing else could rebuild, [`crate::correct`]), None when
    /// no target is.  A member failing on the way is failed and the
    /// region planned again without it, as a client's request is, while
    /// the layout still has what the region needs.
    fn rebuild_region(&self, region: u64, targets: &[usize]) -> Result<Option<(u64, u64)>, ArrayError> {
        let mut attempt = 0;
        loop {
            attempt += 1;
            let h = self.health();
            let now: Vec<usize> = targets.iter().copied().filter(|&t| matches!(h.states[t], MemberState::Rebuilding { done } if done <= region)).collect();
            if now.is_empty() {
                return Ok(None);
            }
            // A re-added member holds what no write changed since it left
            // (the caller holds the stripe's lock, so no write is between
            // this look at the bitmap and `done` moving past the stripe).
            let b = self.bitmap();
            let (held, now): (Vec<usize>, Vec<usize>) = now.into_iter().partition(|&t| b.as_ref().is_some_and(|b| b.readd(t) && !b.marks(region)));
            for &t in &held {
                self.set_health(t, MemberState::Rebuilding { done: region + 1 });
            }
            if now.is_empty() {
                return Ok(Some((0, 0)));
            }
            let sps = self.layout().plan_rebuild(region, &now, &h)?;
            let p = self.layout().rebuild_program(&sps)?;
            // The caller holds the stripe's lock.
            match self.run_correcting(&p, &format!("rebuild of region {region}")) {
                Ok(ran) => {
                    for &t in &now {
                        self.set_health(t, MemberState::Rebuilding { done: region + 1 });
                    }
                    return Ok(Some((sps.iter().flat_map(|sp| &sp.writes).map(|w| w.len).sum(), ran.lost_bytes())));
                }
                // Planned again only when the error failed a member.
                Err(e) if attempt > self.geometry().members || self.health() == h => return Err(e),
                Err(_) => {}
            }
        }
    }

    /// A rebuild stopped at `region` by `e` (a failure the layout cannot
    /// absorb): record how far the targets still being rebuilt are (a
    /// checkpoint), so that the stripes they made whole stay whole when
    /// the array is opened again, as they are while it is open; the error
    /// says where it stopped.
    fn rebuild_stopped(&self, region: u64, targets: &[usize], e: ArrayError) -> ArrayError {
        let total = self.layout().regions();
        let h = self.health();
        let kept: Vec<usize> = targets.iter().copied().filter(|&t| matches!(h.states[t], MemberState::Rebuilding { .. })).collect();
        let said = if kept.is_empty() || !self.is_writable() {
            String::new()
        } else {
            match self.checkpoint(targets) {
                Ok(()) => format!("; member(s) {kept:?} stay in service below stripe {region} (recorded), a rebuild goes on from there"),
                Err(c) => format!("; how far member(s) {kept:?} were rebuilt could not be recorded ({c})"),
            }
        };
        ArrayError::Io(format!("rebuild stopped at stripe {region} of {total}: {e}{said}"))
    }

    fn checkpoint(&self, targets: &[usize]) -> Result<(), ArrayError> {
        // A target failed (or replaced again) meanwhile is not in service:
        // nothing of it to make durable.
        let h = self.health();
        for &t in targets.iter().filter(|&&t| matches!(h.states[t], MemberState::Rebuilding { .. })) {
            if let Some(m) = self.member(t) {
                m.flush().map_err(|e| ArrayError::Io(format!("{}: {e}", m.describe())))?;
            }
        }
        self.write_superblocks_with(true, |_| {})
    }

    /// Verify every stripe's code units; with `repair`, rewrite what is
    /// wrong: the located column where two redundant columns locate it,
    /// otherwise the code units, recomputed from the data.
    /// Recorded in the superblocks when the array is open for writing
    /// ([`Superblock::last_scrub`]).
    /// An array without redundancy (raid0) has nothing to check: its
    /// report says so and nothing is read or recorded (md refuses a check
    /// of raid0).
    pub fn scrub(&self, repair: bool, progress: &dyn Fn(u64, u64)) -> Result<ScrubReport, ArrayError> {
        if self.geometry().m == 0 {
            let note = format!("{} keeps no redundancy: there is nothing a scrub can check", self.geometry().level);
            return Ok(ScrubReport { repaired: repair, notes: vec![note], ..ScrubReport::default() });
        }
        let mut rep = self.scrub_over(repair, &[0..self.layout().regions()], Resync::No, progress)?;
        if self.is_writable() {
            let rec = rep.kept(crate::now_secs());
            if let Err(e) = self.write_superblocks(|s| s.last_scrub = Some(rec)) {
                rep.notes.push(format!("its result could not be recorded in the superblocks: {e}"));
            }
        }
        Ok(rep)
    }

    /// md's resync after an unclean shutdown: a repairing scrub of the
    /// regions the write-intent bitmap marks ([`crate::bitmap`]), or of
    /// every stripe without one.  Either way the array is recorded clean
    /// when every stripe it scrubbed was verified.  With a bitmap, each
    /// region's bit is cleared once its stripes are repaired and flushed
    /// (unless a client wrote there meanwhile), so a resync cut off by a
    /// stop goes on at the next open where this one stopped, as md's.
    /// Without one, the stripes verified in order are recorded from time
    /// to time while no client has written, and at the close
    /// ([`Superblock::resync_from`], md's `resync_offset`): the next
    /// resync starts there.
    pub fn resync(&self, progress: &dyn Fn(u64, u64)) -> Result<ScrubReport, ArrayError> {
        let Some(b) = self.bitmap() else {
            let total = self.layout().regions();
            // (An array in sync has no position to record.)
            let (from, how) = match self.unsynced.load(Ordering::Acquire) {
                true => (self.resync_done.load(Ordering::Acquire).min(total), Resync::InOrder),
                false => (0, Resync::No),
            };
            let mut rep = self.scrub_over(true, &[from..total], how, progress)?;
            if from > 0 {
                rep.notes.push(format!("resumed at stripe {from} of {total}: a resync a stop cut off had verified the stripes before it"));
            }
            return Ok(rep);
        };
        // Counted before: the resync clears what it finishes.
        let (ranges, marked) = (b.dirty_stripes(), b.dirty());
        let mut rep = self.scrub_over(true, &ranges, Resync::Bitmap(&b), progress)?;
        let n: u64 = ranges.iter().map(|r| r.end - r.start).sum();
        rep.notes.push(format!("write-intent bitmap: {n} of {} stripes were marked ({marked} of {} regions)", self.layout().regions(), b.regions()));
        Ok(rep)
    }

    /// [`Array::scrub`] of the stripes in `ranges` (sorted, apart),
    /// recording what a resync verified as `resync` says.
    fn scrub_over(&self, repair: bool, ranges: &[std::ops::Range<u64>], resync: Resync, progress: &dyn Fn(u64, u64)) -> Result<ScrubReport, ArrayError> {
        self.not_growing("scrub")?;
        if repair && !self.is_writable() {
            return Err(ArrayError::Usage("scrub --repair needs the array open for writing".into()));
        }
        let t0 = Instant::now();
        let total: u64 = ranges.iter().map(|r| r.end - r.start).sum();
        let mut rep = ScrubReport { stripes_checked: total, repaired: repair, ..ScrubReport::default() };
        let failed = |h: &mosaic_core::Health| (0..h.states.len()).filter(|&i| matches!(h.states[i], MemberState::Failed)).collect::<Vec<usize>>();
        let mut out = failed(&self.health());
        self.scrub_interrupt.store(false, std::sync::atomic::Ordering::Relaxed);
        let stripes = self.layout().regions();
        let mut region_ok = true;
        // In order: every stripe so far verified.
        let mut prefix = true;
        let mut last_ckpt = Instant::now();
        for (done, region) in ranges.iter().flat_map(|r| r.clone()).enumerate() {
            let done = done as u64;
            if self.scrub_interrupt.load(std::sync::atomic::Ordering::Relaxed) {
                // Not verified, so not recorded resynced either.
                rep.notes.push(format!("interrupted at stripe {region} ({done} of {total} scrubbed)"));
                rep.interrupted = true;
                rep.stripes_checked = done;
                rep.unverified_stripes += total - done;
                break;
            }
            let g = self.lock_stripes(std::iter::once(region));
            let r = self.scrub_region(region, repair).map_err(|e| ArrayError::Io(format!("scrub stopped at stripe {region} of {}: {e}", self.layout().regions())))?;
            drop(g);
            if r.members_failed {
                let now = failed(&self.health());
                let new: Vec<usize> = now.iter().copied().filter(|i| !out.contains(i)).collect();
                if !new.is_empty() {
                    rep.notes.push(format!("member(s) {new:?} failed during the scrub, at stripe {region}: it and the stripes after it were scrubbed without them"));
                }
                out = now;
            }
            rep.bytes_read += r.bytes;
            rep.unverified_stripes += r.unverified as u64;
            rep.read_errors_corrected += r.corrected;
            if r.lost > 0 {
                rep.notes.push(format!("stripe {region}: {} bytes of data could not be read, and the members out of the stripe held the only other way to them: recorded lost (mosaic info lists them)", r.lost));
            }
            match resync {
                Resync::No => {}
                Resync::InOrder => {
                    prefix &= !r.unverified;
                    if prefix {
                        self.resync_done.store(region + 1, Ordering::Release);
                    }
                    if last_ckpt.elapsed() >= CHECKPOINT_EVERY || (done + 1) % CHECKPOINT_REGIONS == 0 {
                        self.checkpoint_resync(false)?;
                        last_ckpt = Instant::now();
                    }
                }
                // Each bitmap region whose stripes were all verified is
                // flushed and its bit cleared.
                Resync::Bitmap(b) if (region + 1) % b.chunk() == 0 || region + 1 == stripes => {
                    region_ok &= !r.unverified;
                    let before = self.health();
                    self.flush_members();
                    // Not while a member is out: the bits also say what it
                    // missed (a re-add reads them).
                    let whole = before.states.iter().all(|s| matches!(s, MemberState::Active));
                    if region_ok && whole && self.health() == before {
                        b.clear_resynced(self, region / b.chunk());
                    }
                    region_ok = true;
                }
                Resync::Bitmap(_) => region_ok &= !r.unverified,
            }
            if let Some(f) = r.finding {
                if let Some(m) = f.member {
                    self.note_checksum_error(m);
                }
                rep.record(f);
            }
            progress(done + 1, total);
        }
        if repair {
            self.flush()?;
            if rep.unverified_stripes == 0 {
                self.mark_resynced()?;
            }
        }
        rep.seconds = t0.elapsed().as_secs_f64();
        Ok(rep)
    }

    /// Verify (and with `repair` rewrite) the code of one region; the
    /// caller holds its stripe lock.  A member failing on the way is
    /// failed and the region scrubbed again without it, as a rebuild's
    /// region is, while the layout still has what the region needs; what
    /// an earlier try found is kept (one finding per region, however many
    /// tries), the bytes read add up, and whether it could be verified is
    /// the last try's answer.
    pub(crate) fn scrub_region(&self, region: u64, repair: bool) -> Result<RegionScrub, ArrayError> {
        let mut out = RegionScrub::default();
        let mut attempt = 0;
        loop {
            attempt += 1;
            let h = self.health();
            out.unverified = false;
            match self.scrub_region_with(region, repair, &h, &mut out) {
                Ok(()) => return Ok(out),
                // Tried again only when the error failed a member.
                Err(e) if attempt > self.geometry().members || self.health() == h => return Err(e),
                Err(_) => out.members_failed = true,
            }
        }
    }

    /// One try of [`Array::scrub_region`] with health `h`, into `out`.
    fn scrub_region_with(&self, region: u64, repair: bool, h: &mosaic_core::Health, out: &mut RegionScrub) -> Result<(), ArrayError> {
        let sps = self.layout().plan_scrub(region, h)?;
        let ran = self.run_correcting(&self.layout().scrub_program(&sps), &format!("scrub of stripe {region}"))?;
        out.corrected += ran.corrected;
        out.lost += ran.lost_bytes();
        let kept = ran.kept;
        let all_reads = mosaic_core::lower::split_reads(&sps, kept.first().map_or(&[][..], |v| v.as_slice()));
        for (sp, reads) in sps.into_iter().zip(all_reads) {
            out.bytes += reads.iter().map(|r| r.len() as u64).sum::<u64>();
            let found = self.layout().scrub_check(&sp, &reads)?;
            if !found.verified {
                out.unverified = true;
                continue;
            }
            if found.bad_cols.is_empty() {
                continue;
            }
            // One finding per stripe: a located column wins over a
            // mismatch elsewhere in the stripe that could not be located.
            let f = self.finding(region, &found);
            if out.finding.as_ref().is_none_or(|o| o.member.is_none()) {
                out.finding = Some(f);
            }
            if repair && !found.repairs.is_empty() {
                let mut p = Program::default();
                let mut ops = Vec::new();
                for (&c, bytes) in found.bad_cols.iter().zip(&found.repairs) {
                    let b = p.buf(Buf::Bytes(bytes.as_slice().into()));
                    ops.push(Io::new(self.layout().repair_op(&sp, c), Ref::new(b, 0)));
                }
                p.phases.push(Phase::write(ops));
                self.run_program(&p, Client::None, &format!("scrub repair of stripe {region}"))?;
            }
        }
        Ok(())
    }

    /// A finding: which member holds the wrong column, or that it cannot
    /// be told.
    fn finding(&self, stripe: u64, f: &mosaic_core::ScrubOutcome) -> ScrubFinding {
        let g = self.geometry();
        let at = ScrubAt::Stripe { stripe };
        let what = |c: usize| if c < g.k { "data" } else { "code" };
        if f.located {
            let c = f.bad_cols[0];
            let m = g.member_of(stripe, c);
            return ScrubFinding { at, member: Some(m), detail: format!("{at}: member {m} holds the wrong {} column ({c}); repair rewrites it", what(c)) };
        }
        let cols: Vec<String> = f.bad_cols.iter().map(|c| c.to_string()).collect();
        let detail = if f.repairs.is_empty() {
            format!(
                "{at}: code column(s) {} disagree with the rest, and with a data column missing the wrong column cannot be told: not repaired \
                 (its bytes are uncertain; scrub it again once every member is in service)",
                cols.join(", ")
            )
        } else {
            format!(
                "{at}: code column(s) {} disagree with the data; with one redundant column the wrong column cannot be located, so repair rewrites the code from the data",
                cols.join(", ")
            )
        };
        ScrubFinding { at, member: None, detail }
    }
}

/// What scrubbing one region found.
#[derive(Debug, Default)]
pub(crate) struct RegionScrub {
    /// Too many members missing to verify (part of) it.
    pub unverified: bool,
    /// Its code disagrees with its data.
    pub finding: Option<ScrubFinding>,
    pub bytes: u64,
    /// A member failed while it was scrubbed (it was scrubbed again
    /// without it).
    pub members_failed: bool,
    /// Member reads that failed and were corrected ([`crate::correct`]).
    pub corrected: u64,
    /// Logical bytes set aside as lost: unreadable, and nothing else held
    /// them ([`crate::correct`]).
    pub lost: u64,
}
