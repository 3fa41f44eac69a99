//! Hot replace (md's `--replace`): a working member's contents are copied
//! onto a new drive while the member stays in service, so the array keeps
//! all its redundancy during the copy (a plain replace fails the member
//! first and rebuilds it from the others).
//!
//! ```text
//!   slot N during the copy: Twin { old, new }
//!     reads ───────────────────────────────> old
//!     writes past the labels (data, bitmap) ─> old, then new
//!     label writes ──────────────────────────> old; new once switched
//!
//!   copy:   stripe by stripe, under the stripe's lock (which every
//!           client write takes too): N's units of the stripe, old → new
//!   switch: new flushed; label writes go to new; the two label rounds
//!           give slot N new's identity (old's goes to `replaced`);
//!           slot N = new, and old is let go.
//! ```
//!
//! The Twin is a device under slot N, as a dm mirror would be: the plans
//! and the executor do not know it is there.
//!
//! Crash safety:
//! - The new drive's label slots are zeroed before the copy: a crash during
//!   it leaves a blank drive, never a member.  Slot N is the old drive on
//!   every label, and it took every write.
//! - From the first label round on, the labels name the new drive in slot N
//!   and list the old drive's identity as replaced: the old drive is passed
//!   over by identity, whatever its event counter.  The new drive took
//!   every write the old one did since the copy began, and the copy did
//!   the rest, so it holds what the old one holds.
//! - A hot replace stopped cleanly (a server stopping, a signal) pauses
//!   (md keeps a replacement's `recovery_offset` the same way): what it
//!   copied is flushed, the new drive gets a label of role `replacement`
//!   (never a member's, never a spare's), the labels record the copy
//!   ([`HotCopy`]: the slot, both identities, the stripes copied), and the
//!   twin stays in the slot, so the new drive takes every write until the
//!   array closes.  Asked again, or at the next writable open, the copy
//!   resumes where it stopped:
//!
//!   ```text
//!     stop ──> flush new, label it `replacement`, labels: hot = {slot, old, new, copied}
//!          ──> twin stays: writes reach both drives ──> close (clean)
//!     open (writable) ──> closed cleanly since, slot still on `old`, new drive
//!          found with that label? ── yes: twin back in the slot, resume at `copied`
//!                                  └─ no (a crash: the new drive may have missed a
//!                                     write): record dropped, the copy starts over
//!   ```
//!
//!   A server resumes it by itself.  Naming another drive, or another
//!   slot, abandons the paused copy (its drive goes back to the spares
//!   when it came from them).
//! - A hot replace cut off by a crash starts over when asked again.
//!
//! Failures:
//! - The new drive fails: the copy stops, the member stays on the old one.
//! - The old drive fails: it is failed as any member is, and the report
//!   says so (`rebuild_needed`): the caller puts the new drive in by a plain
//!   replace, and a rebuild fills it.

use std::io;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

use uuid::Uuid;

use mosaic_core::{HotReport, Layout, MemberState};
use mosaic_dev::{Device, FirstError, Member};
use mosaic_format::label::LABEL_AREA;

use crate::array::Array;
use crate::assemble::{Found, Place};
use crate::maint::RebuildOptions;
use crate::superblock::{HotCopy, MemberRole, Superblock, DATA_OFFSET};
use crate::ArrayError;

/// The copy moves at most this many bytes at a time.
const COPY_CHUNK: u64 = 1 << 20;

/// Slot N's device during a hot replace.
pub(crate) struct Twin {
    old: Arc<dyn Member>,
    new: Arc<dyn Member>,
    /// Label writes (and reads) go to `new` once set.
    switched: AtomicBool,
    /// The new drive's first error: it takes no more writes, and the copy
    /// stops with it.
    new_error: FirstError,
}

impl Twin {
    fn new(old: Arc<dyn Member>, new: Arc<dyn Member>) -> Twin {
        Twin { old, new, switched: AtomicBool::new(false), new_error: FirstError::default() }
    }

    /// The device a label read or write at `[offset, offset + len)` goes
    /// to, if it lies among the label slots.
    fn label_device(&self, offset: u64, len: usize) -> Option<&dyn Member> {
        (offset + len as u64 <= LABEL_AREA).then(|| if self.switched.load(Ordering::Acquire) { self.new.as_ref() } else { self.old.as_ref() })
    }

    fn new_failed(&self) -> Option<String> {
        self.new_error.get()
    }

    /// Write to the old drive, then (while it works) to the new one.
    fn both(&self, offset: u64, len: usize, w: impl Fn(&dyn Member) -> io::Result<()>) -> io::Result<()> {
        if let Some(d) = self.label_device(offset, len) {
            return w(d);
        }
        w(self.old.as_ref())?;
        self.on_new(|| w(self.new.as_ref()));
        Ok(())
    }

    /// Run `f` on the new drive unless it failed before; keep its error.
    fn on_new(&self, f: impl FnOnce() -> io::Result<()>) {
        self.new_error.run(|| self.new.describe(), f);
    }

    /// Copy `[offset, offset + len)` from the old drive to the new one:
    /// Err only for the old drive's error (the new one's is kept).
    fn copy(&self, offset: u64, len: u64, buf: &mut Vec<u8>) -> io::Result<()> {
        let mut at = offset;
        while at < offset + len && !self.new_error.is_set() {
            let n = COPY_CHUNK.min(offset + len - at) as usize;
            match self.old.view(at, n) {
                Some(v) => self.on_new(|| self.new.write_at(v, at)),
                None => {
                    buf.resize(n, 0);
                    self.old.read_at(buf, at)?;
                    self.on_new(|| self.new.write_at(buf, at));
                }
            }
            at += n as u64;
        }
        Ok(())
    }
}

impl Member for Twin {
    fn describe(&self) -> String {
        format!("{} (being replaced by {})", self.old.describe(), self.new.describe())
    }
    fn size(&self) -> u64 {
        self.old.size()
    }
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        self.label_device(offset, buf.len()).unwrap_or(self.old.as_ref()).read_at(buf, offset)
    }
    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        self.both(offset, buf.len(), |d| d.write_at(buf, offset))
    }
    fn write_parts_at(&self, parts: &[&[u8]], offset: u64) -> io::Result<()> {
        let len = parts.iter().map(|p| p.len()).sum();
        self.both(offset, len, |d| d.write_parts_at(parts, offset))
    }
    fn write_durable(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        self.both(offset, buf.len(), |d| d.write_durable(buf, offset))
    }
    fn flush(&self) -> io::Result<()> {
        self.old.flush()?;
        self.on_new(|| self.new.flush());
        Ok(())
    }
    fn view(&self, offset: u64, len: usize) -> Option<&[u8]> {
        match self.label_device(offset, len) {
            Some(_) => None,
            None => self.old.view(offset, len),
        }
    }
    fn prefetch_write(&self, offset: u64, len: usize) {
        self.old.prefetch_write(offset, len)
    }
    fn is_memory(&self) -> bool {
        self.old.is_memory() && self.new.is_memory()
    }
    fn cheap_flush(&self) -> bool {
        self.old.cheap_flush() && self.new.cheap_flush()
    }
    fn is_remote(&self) -> bool {
        self.old.is_remote() || self.new.is_remote()
    }
    fn inner_out(&self) -> Vec<String> {
        self.old.inner_out()
    }
    fn remote_latency(&self) -> Option<mosaic_dev::nbd::Latency> {
        self.old.remote_latency()
    }
}

/// A hot replace paused by a clean stop, its twin still in the slot (every
/// write goes to both drives until the array closes): resumed by the next
/// hot replace of the slot in this process, or, recorded in the labels
/// ([`HotCopy`]), at the next writable open ([`Array::attach_hot`]).
pub(crate) struct Paused {
    twin: Arc<Twin>,
    rec: HotCopy,
}

impl Array {
    /// Copy working member `idx` onto the drive at `path`, which then
    /// takes its place (md's `--replace`); see the module's notes.  A
    /// paused copy of `idx` onto that drive resumes where it stopped.
    pub fn replace_hot(&self, idx: usize, path: &Path, progress: &dyn Fn(u64, u64), opts: RebuildOptions) -> Result<HotReport, ArrayError> {
        if let Some(p) = self.paused_for(idx, Some(path))? {
            return self.hot_resume(idx, p, progress, opts);
        }
        self.not_a_member(path, None)?;
        let m = crate::array::open_for_writing(path)?;
        self.replace_hot_with(idx, Arc::new(m), &crate::assemble::hint_of(path), progress, opts)
    }

    /// [`Array::replace_hot`] onto the first hot spare (md's `--replace`
    /// without `--with`), or onto the drive of a paused copy of `idx`
    /// (which resumes).  The spare leaves the array's list first; a copy
    /// that does not end with it in the slot (the drive failing, the old
    /// drive failing; not a pause) gives it back as a spare, so that a
    /// failed old drive is then replaced by [`Array::take_spare`].
    pub fn replace_hot_from_spare(&self, idx: usize, progress: &dyn Fn(u64, u64), opts: RebuildOptions) -> Result<HotReport, ArrayError> {
        if let Some(p) = self.paused_for(idx, None)? {
            return self.hot_resume(idx, p, progress, opts);
        }
        self.hot_ready_slot(idx)?;
        let (m, spare) = {
            let mut s = self.spares.lock();
            if s.is_empty() {
                return Err(ArrayError::Usage(format!("the array has no hot spare to copy member {idx} onto: name a drive, or add a spare first (mosaic add --spare)")));
            }
            s.remove(0)
        };
        if let Err(e) = self.write_superblocks(|s| s.spares.retain(|x| x.uuid != spare.uuid)) {
            self.spares.lock().insert(0, (m, spare));
            return Err(e);
        }
        let r = self.hot_run(idx, Start::Fresh(m.clone()), &spare.path, true, progress, opts);
        self.spare_back_unless_placed(r, m, &spare.path)
    }

    /// A hot replace that began on a spare has ended: unless its drive took
    /// the slot or waits paused in it, it becomes a spare again (its label
    /// was cleared for the copy: a new spare label).
    fn spare_back_unless_placed(&self, r: Result<HotReport, ArrayError>, m: Arc<dyn Member>, path: &str) -> Result<HotReport, ArrayError> {
        if matches!(&r, Ok(rep) if rep.paused_at.is_some() || !rep.stopped && !rep.rebuild_needed) {
            return r;
        }
        match (r, self.add_spare_with(m, path)) {
            (r, Ok(())) => r,
            (Ok(_), Err(e)) => Err(ArrayError::Io(format!("{path}: giving it back as a hot spare: {e}"))),
            (Err(e), Err(e2)) => Err(ArrayError::Io(format!("{e}; giving {path} back as a hot spare failed too: {e2}"))),
        }
    }

    /// [`Array::replace_hot`] with an already-open drive.
    pub fn replace_hot_with(&self, idx: usize, new: Arc<dyn Member>, path: &str, progress: &dyn Fn(u64, u64), opts: RebuildOptions) -> Result<HotReport, ArrayError> {
        if self.paused.lock().is_some() {
            self.abandon_paused()?;
        }
        self.hot_run(idx, Start::Fresh(new), path, false, progress, opts)
    }

    /// The paused copy to resume for a hot replace of `idx` onto `path`
    /// (any drive when `None`).  A paused copy of another slot or onto
    /// another drive is abandoned first: one hot replace at a time.
    fn paused_for(&self, idx: usize, path: Option<&Path>) -> Result<Option<Paused>, ArrayError> {
        let mine = {
            let p = self.paused.lock();
            match p.as_ref() {
                None => return Ok(None),
                Some(p) => p.rec.member == idx && path.is_none_or(|d| crate::spare::names_same(&p.rec.path, d)),
            }
        };
        if !mine {
            self.abandon_paused()?;
            return Ok(None);
        }
        Ok(self.paused.lock().take())
    }

    /// Resume paused copy `p` of slot `idx` where it stopped.
    fn hot_resume(&self, idx: usize, p: Paused, progress: &dyn Fn(u64, u64), opts: RebuildOptions) -> Result<HotReport, ArrayError> {
        let (spare, path, new) = (p.rec.spare, p.rec.path.clone(), p.twin.new.clone());
        let r = self.hot_run(idx, Start::Paused(p), &path, spare, progress, opts);
        if !spare {
            return r;
        }
        self.spare_back_unless_placed(r, new, &path)
    }

    /// Give up the paused copy: its slot back on the old drive alone, the
    /// labels no longer naming it (and its drive a spare again when it was
    /// one).
    pub(crate) fn abandon_paused(&self) -> Result<(), ArrayError> {
        let Some(p) = self.paused.lock().take() else { return Ok(()) };
        let lent: Arc<dyn Member> = p.twin.clone();
        self.swap_member(p.rec.member, &lent, p.twin.old.clone());
        self.forget_hot()?;
        if p.rec.spare {
            self.add_spare_with(p.twin.new.clone(), &p.rec.path)?;
        }
        Ok(())
    }

    /// Set up the copy (a new drive blanked and twinned with the old one,
    /// or a paused twin), run it, and end it as the module says.
    fn hot_run(&self, idx: usize, start: Start, path: &str, spare: bool, progress: &dyn Fn(u64, u64), opts: RebuildOptions) -> Result<HotReport, ArrayError> {
        let (twin, from) = match start {
            Start::Fresh(new) => (self.hot_twin(idx, new, path)?, 0),
            Start::Paused(p) => {
                if let Err(e) = self.hot_ready_slot(idx) {
                    *self.paused.lock() = Some(p);
                    return Err(e);
                }
                (p.twin, p.rec.copied)
            }
        };
        let (old, new) = (twin.old.clone(), twin.new.clone());
        let lent: Arc<dyn Member> = twin.clone();
        // Slot `idx` back to `to`, unless someone put another device there
        // meanwhile (a hot spare in the place of the failed old drive).
        let give_back = |to: Arc<dyn Member>| {
            self.swap_member(idx, &lent, to);
        };
        *self.hot.lock() = Some((idx, path.to_string()));
        let _shown = Shown(self);
        // The bitmap area is mirrored from here on: write it whole now
        // (under the bitmap's lock, so no mark falls between).
        if let Some(b) = self.bitmap() {
            twin.on_new(|| b.write_all_to(new.as_ref()));
        }
        let t0 = Instant::now();
        let copied = self.hot_copy(idx, &twin, from, progress, &opts);
        let report = |bytes: u64, stopped: bool, rebuild_needed: bool, paused_at: Option<u64>| {
            let seconds = t0.elapsed().as_secs_f64();
            HotReport {
                member: idx,
                drive: path.to_string(),
                regions: self.layout().regions(),
                bytes_copied: bytes,
                seconds,
                mib_per_s: bytes as f64 / (1 << 20) as f64 / seconds.max(1e-9),
                stopped,
                rebuild_needed,
                resumed_from: (from > 0).then_some(from),
                paused_at,
            }
        };
        match copied {
            Copied::All(bytes) => {
                twin.on_new(|| new.flush());
                if let Some(e) = twin.new_failed() {
                    give_back(old.clone());
                    self.forget_hot()?;
                    return Err(new_failed(idx, &e, old.as_ref()));
                }
                // From here the labels may name the new drive: after an
                // error the twin stays (both drives take every write).
                // (`new_device` drops a paused copy's record too.)
                self.hot_switch(idx, &twin, path)?;
                give_back(new);
                // Its label write failing fails the slot (the labels say so).
                if !matches!(self.health().states[idx], MemberState::Active) {
                    return Err(ArrayError::Io(format!("the new drive {path} failed as it took member {idx}'s place: the member is failed; replace it")));
                }
                Ok(report(bytes, false, false, None))
            }
            Copied::Stopped(bytes, at) => match self.hot_pause(idx, &twin, path, at, spare) {
                Ok(rec) => {
                    *self.paused.lock() = Some(Paused { twin: twin.clone(), rec });
                    Ok(report(bytes, true, false, Some(at)))
                }
                Err(e) => {
                    give_back(old.clone());
                    self.forget_hot()?;
                    Err(ArrayError::Io(format!("the hot replace of member {idx} stopped at stripe {at} and could not pause there ({e}): member {idx} stays in service on {}, and the copy starts over when asked again", old.describe())))
                }
            },
            Copied::NewFailed(e) => {
                give_back(old.clone());
                self.forget_hot()?;
                Err(new_failed(idx, &e, old.as_ref()))
            }
            Copied::OldFailed(bytes) => {
                // Failed as any member is; the caller puts the new drive in
                // by a plain replace (a cache volume empties its cache first).
                give_back(old);
                self.forget_hot()?;
                if self.geometry().m == 0 {
                    return Err(ArrayError::Io(format!("member {idx} failed during its hot replace, and {} has no redundancy", self.geometry().level)));
                }
                Ok(report(bytes, false, true, None))
            }
        }
    }

    /// A new copy of `idx` onto `new`: the drive blanked, then twinned
    /// with the old one in the slot.
    fn hot_twin(&self, idx: usize, new: Arc<dyn Member>, path: &str) -> Result<Arc<Twin>, ArrayError> {
        let old = self.hot_ready(idx, new.as_ref(), path)?;
        // Blank first: a crash during the copy leaves no member on it.
        let blank = vec![0u8; LABEL_AREA as usize];
        new.write_at(&blank, 0).and_then(|()| new.flush()).map_err(|e| ArrayError::Io(format!("{path}: clearing its label: {e}")))?;
        let twin = Arc::new(Twin::new(old.clone(), new));
        let lent: Arc<dyn Member> = twin.clone();
        if !self.swap_member(idx, &old, lent) {
            return Err(ArrayError::Usage(format!("member {idx} changed drives meanwhile: ask again")));
        }
        Ok(twin)
    }

    /// The copy stopped at stripe `at` (a clean stop): make what it copied
    /// durable, label the new drive as this copy's, and record the copy in
    /// the labels.  The twin stays in the slot, so the new drive takes
    /// every write until the array closes and the copy resumes at `at`.
    fn hot_pause(&self, idx: usize, twin: &Twin, path: &str, at: u64, spare: bool) -> Result<HotCopy, ArrayError> {
        twin.on_new(|| twin.new.flush());
        if let Some(e) = twin.new_failed() {
            return Err(ArrayError::Io(e));
        }
        let mut label = self.superblock();
        let rec = HotCopy { member: idx, old: label.member_uuids[idx], uuid: Uuid::new_v4(), path: path.to_string(), copied: at, spare };
        label.role = MemberRole::Replacement;
        label.member_index = idx;
        label.member_uuid = rec.uuid;
        label.hot = Some(rec.clone());
        // Both slots, so the label outlives any later write of one.
        for ev in [label.events, label.events + 1] {
            Superblock { events: ev, ..label.clone() }.write_to(twin.new.as_ref())?;
        }
        self.write_superblocks(|s| s.hot = Some(rec.clone()))?;
        Ok(rec)
    }

    /// Whether member `idx` may be hot-replaced by `new`: its device.
    fn hot_ready(&self, idx: usize, new: &dyn Member, path: &str) -> Result<Arc<dyn Member>, ArrayError> {
        self.hot_ready_slot(idx)?;
        let need = DATA_OFFSET + self.geometry().member_bytes(idx);
        if new.size() < need {
            return Err(ArrayError::BadMember(format!("{path}: replacement too small: {} bytes, the array needs {need}", new.size())));
        }
        self.member(idx).ok_or_else(|| ArrayError::Usage(format!("member {idx} has no device open")))
    }

    /// Whether member `idx` may be hot-replaced at all.
    fn hot_ready_slot(&self, idx: usize) -> Result<(), ArrayError> {
        self.check_writable()?;
        self.not_growing("replace")?;
        let n = self.geometry().members;
        if idx >= n {
            return Err(ArrayError::Usage(format!("no member {idx}: the array has members 0..{}", n - 1)));
        }
        match self.health().states[idx] {
            MemberState::Active => {}
            MemberState::Failed => return Err(ArrayError::Usage(format!("member {idx} is failed: replace it without --hot (a rebuild then fills the new drive)"))),
            MemberState::Rebuilding { .. } => return Err(ArrayError::Usage(format!("member {idx} is being rebuilt: finish the rebuild first (mosaic rebuild)"))),
        }
        if let Some((t, _)) = self.rebuild_pending() {
            return Err(ArrayError::Usage(format!("member(s) {t:?} are being rebuilt: finish the rebuild first (mosaic rebuild)")));
        }
        Ok(())
    }

    /// Copy member `idx`'s units, stripe by stripe from `from`, from the
    /// old drive to the new one.
    fn hot_copy(&self, idx: usize, twin: &Twin, from: u64, progress: &dyn Fn(u64, u64), opts: &RebuildOptions) -> Copied {
        let g = self.geometry();
        let total = self.layout().regions();
        let (mut bytes, mut buf) = (0u64, Vec::new());
        for stripe in from..total {
            opts.abort_when(stripe);
            if opts.stop_asked() {
                return Copied::Stopped(bytes, stripe);
            }
            if !matches!(self.health().states[idx], MemberState::Active) {
                return Copied::OldFailed(bytes);
            }
            if let Some(col) = g.column_of(stripe, idx) {
                let at = DATA_OFFSET + g.offset_of(stripe, col);
                let copied = {
                    let _g = self.lock_stripes(std::iter::once(stripe));
                    match twin.copy(at, g.unit, &mut buf) {
                        Err(e) if self.corrected_in_place(idx, stripe, col, &e) => twin.copy(at, g.unit, &mut buf),
                        r => r,
                    }
                };
                if let Err(e) = copied {
                    self.fail_on_error(idx, &e);
                    return Copied::OldFailed(bytes);
                }
                bytes += g.unit;
            }
            if let Some(e) = twin.new_failed() {
                return Copied::NewFailed(e);
            }
            progress(stripe + 1, total);
        }
        Copied::All(bytes)
    }

    /// The copy is whole and durable: the labels give slot `idx` to the
    /// new drive (the caller then puts it in the slot in the twin's place).
    fn hot_switch(&self, idx: usize, twin: &Twin, path: &str) -> Result<(), ArrayError> {
        twin.switched.store(true, Ordering::Release);
        self.write_superblocks(|s| s.new_device(idx, path))
    }
}

impl Array {
    /// At a writable open: the hot replace the labels record as paused
    /// ([`HotCopy`]) gets its twin back in the slot, to resume where it
    /// stopped, when the array was closed cleanly since (so the new drive
    /// took every write the old one did) and the new drive is here with
    /// the copy's label; otherwise the record is dropped (the copy starts
    /// over when asked again).  Either way `open_warnings` says so.  A
    /// read-only open writes nothing, so the record stays.
    pub(crate) fn attach_hot(&mut self, found: Vec<Found>, place: &Place, was_dirty: bool) {
        let Some(rec) = self.superblock().hot.filter(|_| self.is_writable()) else { return };
        let total = self.layout().regions();
        let attached = self.hot_drive(&rec, found, place, was_dirty).and_then(|new| {
            let old = self.member(rec.member).ok_or("its slot has no drive open")?;
            let twin = Arc::new(Twin::new(old.clone(), new));
            let lent: Arc<dyn Member> = twin.clone();
            if !self.swap_member(rec.member, &old, lent) {
                return Err("its slot changed drives".to_string());
            }
            *self.paused.lock() = Some(Paused { twin, rec: rec.clone() });
            Ok(())
        });
        let (m, p) = (rec.member, &rec.path);
        let w = match attached {
            Ok(()) => format!("the hot replace of member {m} onto {p} resumes at stripe {} of {total} (mosaic replace --hot {m}; a server resumes it by itself)", rec.copied),
            Err(why) => match self.forget_hot() {
                Ok(()) => format!("the hot replace of member {m} onto {p} cannot resume ({why}): it starts over when asked again"),
                Err(e) => format!("the hot replace of member {m} onto {p} cannot resume ({why}), and dropping its record failed: {e}"),
            },
        };
        self.open_warnings.push(w);
    }

    /// The new drive of paused copy `rec`, if the copy can resume.
    fn hot_drive(&self, rec: &HotCopy, found: Vec<Found>, place: &Place, was_dirty: bool) -> Result<Arc<dyn Member>, String> {
        let sb = self.superblock();
        if was_dirty {
            return Err("the array was not closed cleanly after the copy stopped".into());
        }
        if sb.reshape.is_some() || sb.member_uuids.get(rec.member) != Some(&rec.old) || !matches!(self.health().states.get(rec.member), Some(MemberState::Active)) {
            return Err(format!("member {} is not in service on the drive it was copying from", rec.member));
        }
        let ours = |l: &Superblock| l.role == MemberRole::Replacement && l.array_uuid == sb.array_uuid && l.member_uuid == rec.uuid;
        if let Some(f) = found.into_iter().find(|f| ours(&f.sb)) {
            return Ok(f.m);
        }
        let path = place.resolve_own(&rec.path, sb.array_uuid, rec.uuid).ok_or("its drive is not here")?;
        let m = Device::open(Path::new(&path)).map_err(|e| e.to_string())?;
        m.lock(true).map_err(|e| e.to_string())?;
        match Superblock::read_from(&m) {
            Ok(l) if ours(&l) => Ok(Arc::new(m)),
            Ok(_) => Err(format!("{path} no longer carries the copy's label")),
            Err(e) => Err(e.to_string()),
        }
    }

    /// At close: a paused copy whose new drive failed, or whose slot is no
    /// longer its twin's, cannot resume: its record goes.
    pub(crate) fn settle_paused(&self) -> Result<(), ArrayError> {
        let mut paused = self.paused.lock();
        let gone = paused.as_ref().is_some_and(|p| {
            let lent: Arc<dyn Member> = p.twin.clone();
            p.twin.new_failed().is_some() || !self.member(p.rec.member).is_some_and(|m| Arc::ptr_eq(&m, &lent)) || !matches!(self.health().states[p.rec.member], MemberState::Active)
        });
        if gone {
            paused.take();
            drop(paused);
            self.forget_hot()?;
        }
        Ok(())
    }

    /// Drop the labels' record of a paused copy, if they have one (no
    /// label round otherwise).
    fn forget_hot(&self) -> Result<(), ArrayError> {
        if self.superblock().hot.is_none() {
            return Ok(());
        }
        self.write_superblocks(|s| s.hot = None)
    }

    /// The hot replace paused (recorded in the labels), if any, when this
    /// open can resume it (a read-only one cannot: `info` still shows it).
    pub fn hot_paused(&self) -> Option<HotCopy> {
        self.superblock().hot.filter(|_| self.is_writable())
    }
}

/// While alive, `info` shows the hot replace in progress.
struct Shown<'a>(&'a Array);

impl Drop for Shown<'_> {
    fn drop(&mut self) {
        *self.0.hot.lock() = None;
    }
}

fn new_failed(idx: usize, e: &str, old: &dyn Member) -> ArrayError {
    ArrayError::Io(format!("the new drive failed during the copy: {e}; member {idx} stays in service on {}", old.describe()))
}

/// What a hot replace starts from.
enum Start {
    /// A new drive.
    Fresh(Arc<dyn Member>),
    /// A paused copy.
    Paused(Paused),
}

/// How a hot replace's copy ended.
enum Copied {
    /// Every stripe copied: bytes.
    All(u64),
    /// Asked to stop: bytes, and the first stripe not copied.
    Stopped(u64, u64),
    /// The new drive failed: why.
    NewFailed(String),
    /// The old drive failed (and is failed).
    OldFailed(u64),
}
