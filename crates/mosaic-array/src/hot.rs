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
//! - A hot replace cut off (a crash, a server stopping) starts over when
//!   asked again.
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

use parking_lot::Mutex;

use mosaic_core::{HotReport, Layout, MemberState};
use mosaic_dev::{Device, Member};
use mosaic_format::label::LABEL_AREA;

use crate::array::Array;
use crate::maint::RebuildOptions;
use crate::superblock::DATA_OFFSET;
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
    new_error: Mutex<Option<String>>,
}

impl Twin {
    fn new(old: Arc<dyn Member>, new: Arc<dyn Member>) -> Twin {
        Twin { old, new, switched: AtomicBool::new(false), new_error: Mutex::new(None) }
    }

    /// The device a label read or write at `[offset, offset + len)` goes
    /// to, if it lies among the label slots.
    fn label_device(&self, offset: u64, len: usize) -> Option<&dyn Member> {
        (offset + len as u64 <= LABEL_AREA).then(|| if self.switched.load(Ordering::Acquire) { self.new.as_ref() } else { self.old.as_ref() })
    }

    fn new_failed(&self) -> Option<String> {
        self.new_error.lock().clone()
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
        if self.new_error.lock().is_some() {
            return;
        }
        if let Err(e) = f() {
            self.new_error.lock().get_or_insert_with(|| format!("{}: {e}", self.new.describe()));
        }
    }

    /// Copy `[offset, offset + len)` from the old drive to the new one:
    /// Err only for the old drive's error (the new one's is kept).
    fn copy(&self, offset: u64, len: u64, buf: &mut Vec<u8>) -> io::Result<()> {
        let mut at = offset;
        while at < offset + len && self.new_error.lock().is_none() {
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
    fn remote_latency(&self) -> Option<mosaic_dev::nbd::Latency> {
        self.old.remote_latency()
    }
}

impl Array {
    /// Copy working member `idx` onto the drive at `path`, which then
    /// takes its place (md's `--replace`); see the module's notes.
    pub fn replace_hot(&self, idx: usize, path: &Path, progress: &dyn Fn(u64, u64), opts: RebuildOptions) -> Result<HotReport, ArrayError> {
        self.not_a_member(path, None)?;
        let m = Device::open(path).map_err(|e| ArrayError::BadMember(e.to_string()))?;
        m.lock(true).map_err(|e| ArrayError::Usage(e.to_string()))?;
        self.replace_hot_with(idx, Arc::new(m), &crate::assemble::hint_of(path), progress, opts)
    }

    /// [`Array::replace_hot`] onto the first hot spare (md's `--replace`
    /// without `--with`).  The spare leaves the array's list first; a copy
    /// that does not end with it in the slot (stopped, the drive failing,
    /// the old drive failing) gives it back as a spare, so that a
    /// failed old drive is then replaced by [`Array::take_spare`].
    pub fn replace_hot_from_spare(&self, idx: usize, progress: &dyn Fn(u64, u64), opts: RebuildOptions) -> Result<HotReport, ArrayError> {
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
        let r = self.replace_hot_with(idx, m.clone(), &spare.path, progress, opts);
        if matches!(&r, Ok(rep) if !rep.stopped && !rep.rebuild_needed) {
            return r;
        }
        // Its label was cleared for the copy: a new spare label.
        match (r, self.add_spare_with(m, &spare.path)) {
            (r, Ok(())) => r,
            (Ok(_), Err(e)) => Err(ArrayError::Io(format!("{}: giving it back as a hot spare: {e}", spare.path))),
            (Err(e), Err(e2)) => Err(ArrayError::Io(format!("{e}; giving {} back as a hot spare failed too: {e2}", spare.path))),
        }
    }

    /// [`Array::replace_hot`] with an already-open drive.
    pub fn replace_hot_with(&self, idx: usize, new: Arc<dyn Member>, path: &str, progress: &dyn Fn(u64, u64), opts: RebuildOptions) -> Result<HotReport, ArrayError> {
        let old = self.hot_ready(idx, new.as_ref(), path)?;
        // Blank first: a crash during the copy leaves no member on it.
        let blank = vec![0u8; LABEL_AREA as usize];
        new.write_at(&blank, 0).and_then(|()| new.flush()).map_err(|e| ArrayError::Io(format!("{path}: clearing its label: {e}")))?;
        let twin = Arc::new(Twin::new(old.clone(), new.clone()));
        let lent: Arc<dyn Member> = twin.clone();
        if !self.swap_member(idx, &old, lent.clone()) {
            return Err(ArrayError::Usage(format!("member {idx} changed drives meanwhile: ask again")));
        }
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
        let copied = self.hot_copy(idx, &twin, progress, &opts);
        let report = |bytes: u64, stopped: bool, rebuild_needed: bool| {
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
            }
        };
        match copied {
            Copied::All(bytes) => {
                twin.on_new(|| new.flush());
                if let Some(e) = twin.new_failed() {
                    give_back(old.clone());
                    return Err(new_failed(idx, &e, old.as_ref()));
                }
                // From here the labels may name the new drive: after an
                // error the twin stays (both drives take every write).
                self.hot_switch(idx, &twin, path)?;
                give_back(new);
                // Its label write failing fails the slot (the labels say so).
                if !matches!(self.health().states[idx], MemberState::Active) {
                    return Err(ArrayError::Io(format!("the new drive {path} failed as it took member {idx}'s place: the member is failed; replace it")));
                }
                Ok(report(bytes, false, false))
            }
            Copied::Stopped(bytes) => {
                give_back(old);
                Ok(report(bytes, true, false))
            }
            Copied::NewFailed(e) => {
                give_back(old.clone());
                Err(new_failed(idx, &e, old.as_ref()))
            }
            Copied::OldFailed(bytes) => {
                // Failed as any member is; the caller puts the new drive in
                // by a plain replace (a cache volume empties its cache first).
                give_back(old);
                if self.geometry().m == 0 {
                    return Err(ArrayError::Io(format!("member {idx} failed during its hot replace, and {} has no redundancy", self.geometry().level)));
                }
                Ok(report(bytes, false, true))
            }
        }
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

    /// Copy member `idx`'s units, stripe by stripe, from the old drive to
    /// the new one.
    fn hot_copy(&self, idx: usize, twin: &Twin, progress: &dyn Fn(u64, u64), opts: &RebuildOptions) -> Copied {
        let g = self.geometry();
        let total = self.layout().regions();
        let (mut bytes, mut buf) = (0u64, Vec::new());
        for stripe in 0..total {
            opts.abort_when(stripe);
            if opts.stop_asked() {
                return Copied::Stopped(bytes);
            }
            if !matches!(self.health().states[idx], MemberState::Active) {
                return Copied::OldFailed(bytes);
            }
            if let Some(col) = g.column_of(stripe, idx) {
                let at = DATA_OFFSET + g.offset_of(stripe, col);
                let copied = {
                    let _g = self.lock_stripes(std::iter::once(stripe));
                    twin.copy(at, g.unit, &mut buf)
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

/// How a hot replace's copy ended.
enum Copied {
    /// Every stripe copied: bytes.
    All(u64),
    /// Asked to stop.
    Stopped(u64),
    /// The new drive failed: why.
    NewFailed(String),
    /// The old drive failed (and is failed).
    OldFailed(u64),
}
