//! Hot replace of a DVS member (md's `--replace`): a working member's
//! zones are copied onto a new zoned drive while the member stays in
//! service, so the array keeps all its redundancy during the copy (a plain
//! replace fails the member first and rebuilds it from the others).
//!
//! ```text
//!   slot m during the copy: ZonedTwin { old, new, conv, copied }
//!     reads, write pointers ──────────────────────────────> old
//!     writes and zone resets in zones already copied ─────> old, then new
//!       (the label area excepted: old only, until the switch)
//!     writes and zone resets in zones not yet copied ─────> old
//!
//!   start:  zone geometry checked; new's label area zeroed, its written
//!           zones reset (it is never taken for a member if we stop)
//!   step:   the array settled (no destage or GC program in flight, and
//!           none starts: the caller holds the array): first the
//!           conventional zones past the labels (checkpoints, log,
//!           journal), then sequential zones one by one: new's zone reset,
//!           old's [zone start, write pointer) copied, and the zone counts
//!           as copied (every later append and reset reaches both)
//!   switch: settled; new flushed; slot m = new with a new member UUID,
//!           old's listed as replaced; two label rounds
//! ```
//!
//! A zoned drive takes appends only at its write pointer, so the twin
//! cannot mirror a zone before it holds what the old drive holds up to
//! its write pointer: hence zone by zone, the copy and the switch of each
//! zone done with nothing in flight.
//!
//! The twin is a device under slot m, as a dm mirror would be: the plans
//! and the executor do not know it is there.
//!
//! Crash safety: until the first label round of the switch, no label on
//! any drive names the new one as a member (its label area is zeroed at
//! the start, and says `replacement` once paused): an open after a crash
//! uses the old drive, which took every write.  From the first label
//! round on, the labels name the new drive in slot m and list the old
//! drive's identity as replaced (passed over at open whatever its event
//! counter); the new drive holds what the old one does: the copy did the
//! zones, and it took every write to a zone copied.
//!
//! Pause and resume (md keeps a replacement's `recovery_offset`):
//!
//! ```text
//!   pause:  settled; new flushed and labelled `replacement` (neither a
//!           member nor a spare); the labels record the copy (HotRecord:
//!           slot, both UUIDs, zones copied); the twin stays, so the new
//!           drive takes every write to the zones copied until the array
//!           closes
//!   open:   record + slot still on the old drive + the new drive found by
//!           its label ──> twin back in the slot before anything is
//!           written, the copy paused at the lowest of the recorded zone
//!           and the first zone whose write pointers differ on the two
//!           drives (a crash may cut a mirrored append or reset between
//!           them); the conventional zones are copied again
//!           otherwise ──> the session's label rounds drop the record
//!   ended:  (switched, abandoned, a member failed) a record the labels
//!           hold is dropped by a label round before anything else is
//!           written, and the new drive's label erased
//! ```
//!
//! A copy cut off before it paused starts over when asked again.
//!
//! Failures: the new drive failing stops the copy (the member stays on
//! the old drive, the twin is taken out, and the caller hears why); the
//! old drive failing is the member's failure, as without a copy.  Bytes
//! of a sequential zone the old drive cannot read are decoded from the
//! other members' columns and copied so (md's replace rebuilds them);
//! the conventional zones' metadata has no such code, and a read error
//! there stops the copy.

use std::io;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use mosaic_core::{Dir, MemberState};
use mosaic_dev::FirstError;
use mosaic_format::fresh::Found;
use mosaic_format::label::{Label, LABEL_AREA};
use uuid::Uuid;

use super::{as_member, check_member, counted_label, DvsArray, Given, ZonedMember};
use crate::meta::{self, label_bytes, label_offset, HotRecord};
use crate::DvsError;

/// The copy moves at most this many bytes at a time.
const COPY_CHUNK: u64 = 1 << 20;

/// Slot m's device during a hot replace: the old drive, mirrored onto the
/// new one in the zones already copied.
pub(crate) struct ZonedTwin {
    old: Arc<dyn ZonedMember>,
    new: Arc<dyn ZonedMember>,
    /// The conventional zones (labels excepted) hold on the new drive
    /// what they hold on the old.
    conv: AtomicBool,
    /// So do the sequential zones below this one.
    copied: AtomicU64,
    /// Zones below this are conventional.
    conventional: u64,
    /// The new drive's first error: no more mirroring, the copy stops.
    broken: FirstError,
}

impl ZonedTwin {
    /// A twin whose sequential zones below `copied` hold what the old
    /// drive's do (the conventional zones are copied first).
    fn new(old: Arc<dyn ZonedMember>, new: Arc<dyn ZonedMember>, copied: u64) -> ZonedTwin {
        let conventional = old.conventional_zones();
        ZonedTwin { old, new, conv: AtomicBool::new(false), copied: AtomicU64::new(copied.max(conventional)), conventional, broken: FirstError::default() }
    }

    /// Zones copied: the conventional ones (once copied), and the
    /// sequential ones below `copied`.
    fn done(&self) -> u64 {
        let conv = if self.conv.load(Ordering::Acquire) { self.conventional } else { 0 };
        conv + self.copied.load(Ordering::Acquire) - self.conventional
    }

    fn broken(&self) -> Option<String> {
        self.broken.get()
    }

    /// Whether an operation at byte `offset` reaches the new drive too.
    fn mirrors(&self, offset: u64) -> bool {
        let z = self.old.zone_size();
        let zone = offset.checked_div(z).unwrap_or(u64::MAX);
        let copied = if zone < self.conventional { offset >= LABEL_AREA && self.conv.load(Ordering::Acquire) } else { zone < self.copied.load(Ordering::Acquire) };
        copied && !self.broken.is_set()
    }

    /// Run `op` on the new drive unless it failed before: an error stops
    /// the mirroring (the old drive took the operation: the member is
    /// whole).
    fn mirrored(&self, op: impl FnOnce(&dyn ZonedMember) -> io::Result<()>) {
        self.broken.run(|| self.new.describe(), || op(self.new.as_ref()));
    }
}

impl ZonedMember for ZonedTwin {
    fn describe(&self) -> String {
        self.old.describe()
    }
    fn size(&self) -> u64 {
        self.old.size()
    }
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        self.old.read_at(buf, offset)
    }
    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        self.old.write_at(buf, offset)?;
        if self.mirrors(offset) {
            self.mirrored(|d| d.write_at(buf, offset));
        }
        Ok(())
    }
    fn write_parts_at(&self, parts: &[&[u8]], offset: u64) -> io::Result<()> {
        self.old.write_parts_at(parts, offset)?;
        if self.mirrors(offset) {
            self.mirrored(|d| d.write_parts_at(parts, offset));
        }
        Ok(())
    }
    fn flush(&self) -> io::Result<()> {
        self.old.flush()?;
        if self.done() > 0 {
            self.mirrored(|d| d.flush());
        }
        Ok(())
    }
    fn reset_zone(&self, zone: u64) -> io::Result<()> {
        self.old.reset_zone(zone)?;
        if self.mirrors(zone * self.old.zone_size()) {
            self.mirrored(|d| d.reset_zone(zone));
        }
        Ok(())
    }
    fn write_pointer(&self, zone: u64) -> Option<u64> {
        self.old.write_pointer(zone)
    }
    fn zone_size(&self) -> u64 {
        self.old.zone_size()
    }
    fn zone_count(&self) -> u64 {
        self.old.zone_count()
    }
    fn conventional_zones(&self) -> u64 {
        self.old.conventional_zones()
    }
    fn cheap_flush(&self) -> bool {
        self.old.cheap_flush() && self.new.cheap_flush()
    }
    fn view(&self, offset: u64, len: usize) -> Option<&[u8]> {
        self.old.view(offset, len)
    }
}

impl Hot {
    pub(super) fn member(&self) -> usize {
        self.m
    }

    /// The drive being replaced.
    pub(super) fn old_drive(&self) -> Arc<dyn ZonedMember> {
        self.twin.old.clone()
    }
}

/// A hot replace in progress.
pub(super) struct Hot {
    m: usize,
    twin: Arc<ZonedTwin>,
    bytes: u64,
    /// The member UUID the new drive takes (in its label while paused).
    new_uuid: Uuid,
    /// Paused by a clean stop: the labels record it ([`HotRecord`]).
    paused: bool,
    /// The labels may record it (paused once, or resumed at open): it
    /// ends with a label round that drops the record.
    recorded: bool,
    /// Resumed at open from a pause, at this many zones copied.
    resumed_from: Option<u64>,
    /// The new drive's place in the devices given to open, when it was
    /// found there.
    source: Option<usize>,
}

/// Where a hot replace's copy is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct HotProgress {
    pub member: usize,
    /// Zones copied, of `total` (every zone of the drive).
    pub done: u64,
    pub total: u64,
    /// Bytes copied so far.
    pub bytes: u64,
    /// Paused: the labels record it, the copy waits to be resumed.
    pub paused: bool,
    /// Resumed at open from a pause, at this many zones copied.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resumed_from: Option<u64>,
}

impl DvsArray {
    /// Start copying active member `m` onto `dev`, which mirrors from now
    /// on the writes to the zones copied.  [`DvsArray::hot_step`] copies,
    /// [`DvsArray::hot_switch`] puts `dev` in the slot.
    pub fn hot_start(&mut self, m: usize, dev: Arc<dyn ZonedMember>) -> Result<(), DvsError> {
        self.hot_ready(m)?;
        check_member(&self.geo.cfg, m, dev.as_ref())?;
        let (l, io) = counted_label(dev.as_ref());
        self.side_io.lock().unwrap_or_else(|e| e.into_inner())[m].add(Dir::Read, io.read_bytes);
        if let Ok(Ok(l)) = l {
            let i = l.member_index;
            if l.array_uuid == self.label.array_uuid && self.label.member_uuids.get(i) == Some(&l.member_uuid) && !matches!(self.state(i), MemberState::Failed) {
                return Err(DvsError::Other(format!("{} is member {i} of this array", dev.describe())));
            }
            if self.spares.iter().any(|s| s.uuid == l.member_uuid) {
                return Err(DvsError::Other(format!("{} is a hot spare of this array: remove it from the spares first", dev.describe())));
            }
        }
        blank(&self.geo.cfg, dev.as_ref()).map_err(|e| DvsError::Other(format!("clearing the new drive {}: {e}", dev.describe())))?;
        let old = self.members[m].clone().ok_or_else(|| DvsError::Other(format!("member {m} has no device")))?;
        let twin = Arc::new(ZonedTwin::new(old, dev, 0));
        let as_zoned: Arc<dyn ZonedMember> = twin.clone();
        self.exec.set_member(m, Some(as_member(&as_zoned)));
        self.seat(m, as_zoned);
        self.hot = Some(Hot { m, twin, bytes: 0, new_uuid: Uuid::new_v4(), paused: false, recorded: false, resumed_from: None, source: None });
        Ok(())
    }

    /// Whether member `m` can be hot-replaced now (the array settled).
    fn hot_ready(&mut self, m: usize) -> Result<(), DvsError> {
        self.check_ok()?;
        self.settle()?;
        if let Some(h) = &self.hot {
            return Err(DvsError::Other(format!("member {} is being hot-replaced already", h.m)));
        }
        self.check_slot(m)?;
        if !matches!(self.state(m), MemberState::Active) || self.members[m].is_none() {
            return Err(DvsError::Other(format!("member {m} is not in service: a hot replace copies a working member (replace a failed one, then rebuild)")));
        }
        Ok(())
    }

    /// [`DvsArray::hot_start`] onto the first hot spare (md's `--replace`
    /// without `--with`): the labels stop listing it first, so it is no
    /// spare from then on, whatever becomes of the copy.  The spare's
    /// UUID, or None when there is no spare.
    pub fn hot_start_from_spare(&mut self, m: usize) -> Result<Option<Uuid>, DvsError> {
        self.hot_ready(m)?;
        if self.spares.is_empty() {
            return Ok(None);
        }
        let s = self.spares.remove(0);
        let r = self.label_rounds();
        self.poison(r)?;
        self.hot_start(m, s.dev.clone())?;
        Ok(Some(s.uuid))
    }

    /// The hot replace in progress: its member and where its copy is.
    pub fn hot_progress(&self) -> Option<HotProgress> {
        self.hot.as_ref().map(|h| HotProgress { member: h.m, done: h.twin.done(), total: self.geo.cfg.zones, bytes: h.bytes, paused: h.paused, resumed_from: h.resumed_from })
    }

    /// Copy up to `zones` more zones (the conventional ones count as one
    /// step).  An error of the new drive ends the hot replace (the member
    /// stays on its old drive); one of the old drive is returned as it is,
    /// the copy left where it was.
    pub fn hot_step(&mut self, zones: u64) -> Result<HotProgress, DvsError> {
        self.check_ok()?;
        self.settle()?;
        let Some(h) = &mut self.hot else { return Err(DvsError::Other("no hot replace is in progress".into())) };
        h.paused = false;
        let (m, twin) = (h.m, h.twin.clone());
        let cfg = self.geo.cfg.clone();
        for _ in 0..zones.max(1) {
            self.new_drive_ok(&twin)?;
            if !twin.conv.load(Ordering::Acquire) {
                self.copy(m, &twin, (LABEL_AREA, cfg.conventional * cfg.zone_size))?;
                twin.conv.store(true, Ordering::Release);
                continue;
            }
            let at = twin.copied.load(Ordering::Acquire);
            if at >= cfg.zones {
                break;
            }
            let start = at * cfg.zone_size;
            if twin.new.write_pointer(at) != Some(start) {
                self.new_result(&twin, |d| d.reset_zone(at))?;
            }
            self.copy(m, &twin, (start, twin.old.write_pointer(at).unwrap_or(start)))?;
            twin.copied.store(at + 1, Ordering::Release);
        }
        self.new_drive_ok(&twin)?;
        Ok(self.hot_progress().expect("a hot replace is in progress"))
    }

    /// Copy bytes `from..to` of the old drive onto the new one (straight
    /// from its mapping when it lends its bytes, as the fixed twin does).
    fn copy(&mut self, m: usize, twin: &ZonedTwin, (from, to): (u64, u64)) -> Result<(), DvsError> {
        let mut buf = Vec::new();
        let mut at = from;
        while at < to {
            let len = (to - at).min(COPY_CHUNK) as usize;
            let bytes = match twin.old.view(at, len) {
                Some(v) => v,
                None => {
                    buf.resize(len, 0);
                    if let Err(e) = twin.old.read_at(&mut buf, at) {
                        // Sectors the old drive cannot read: decoded from
                        // the other members (md's replace rebuilds them);
                        // a drive that reads not even its label is dead.
                        let decoded = mosaic_exec::corrected::unreadable_here(&e) && mosaic_exec::corrected::reads_its_label(|b, at| twin.old.read_at(b, at)) && self.decode_slots(m, at, &mut buf)?;
                        if !decoded {
                            return Err(DvsError::Other(format!("member {m}'s drive {}: reading byte {at} for the hot replace: {e}", twin.old.describe())));
                        }
                    }
                    &buf
                }
            };
            self.new_result(twin, |d| d.write_at(bytes, at))?;
            let mut io = self.side_io.lock().unwrap_or_else(|e| e.into_inner());
            io[m].add(Dir::Read, len as u64);
            drop(io);
            if let Some(h) = &mut self.hot {
                h.bytes += len as u64;
            }
            at += len as u64;
        }
        Ok(())
    }

    /// Operation `op` of the new drive: an error ends the hot replace.
    fn new_result(&mut self, twin: &ZonedTwin, op: impl FnOnce(&dyn ZonedMember) -> io::Result<()>) -> Result<(), DvsError> {
        twin.mirrored(op);
        self.new_drive_ok(twin)
    }

    /// Whether the new drive took everything so far; if not, the hot
    /// replace ends and the error says why.
    fn new_drive_ok(&mut self, twin: &ZonedTwin) -> Result<(), DvsError> {
        let Some(why) = twin.broken() else { return Ok(()) };
        let m = self.hot.as_ref().map_or(0, |h| h.m);
        self.hot_abandon();
        Err(DvsError::Other(format!("the hot replace of member {m} stopped: the new drive failed ({why}); the member stays on its old drive")))
    }

    /// Every zone copied: the new drive takes slot `m` (a new member UUID,
    /// the old one's listed as replaced; two label rounds).  The new
    /// member's UUID.
    pub fn hot_switch(&mut self) -> Result<Uuid, DvsError> {
        self.check_ok()?;
        self.settle()?;
        let Some(h) = &self.hot else { return Err(DvsError::Other("no hot replace is in progress".into())) };
        let (m, twin, new_uuid) = (h.m, h.twin.clone(), h.new_uuid);
        if twin.done() < self.geo.cfg.zones {
            return Err(DvsError::Other(format!("the hot replace of member {m} has not copied every zone yet")));
        }
        self.new_result(&twin, |d| d.flush())?;
        let mut identity = self.label.clone();
        let former = std::mem::replace(&mut identity.member_uuids[m], new_uuid);
        self.hot = None;
        // A new device: its read errors count from nothing.
        self.read_errors[m] = Default::default();
        self.exec.set_member(m, Some(as_member(&twin.new)));
        self.seat(m, twin.new.clone());
        self.sources[m] = None;
        self.label = identity;
        mosaic_format::label::note_replaced(&mut self.replaced, former, crate::meta::MAX_REPLACED);
        let r = self.label_rounds();
        self.poison(r)?;
        Ok(new_uuid)
    }

    /// End the hot replace in progress, if any: the old drive alone in
    /// its slot again.  The new drive's label area stays zeroed (a paused
    /// copy's: the labels drop the record, then its label is erased): it
    /// is never taken for a member.
    pub fn hot_abandon(&mut self) {
        let Some(h) = self.hot.take() else { return };
        let _ = self.settle();
        let old = h.twin.old.clone();
        self.exec.set_member(h.m, Some(as_member(&old)));
        self.seat(h.m, old);
        if h.recorded {
            // The record dropped first: the new drive takes no write from
            // now on, so no later open may resume onto it.
            let r = self.label_rounds();
            if self.poison(r).is_ok() {
                let _ = mosaic_format::label::erase(&mut |b, off| h.twin.new.write_at(b, off)).and_then(|_| h.twin.new.flush());
            }
        }
    }

    /// Pause the copy (a clean stop): the new drive flushed and labelled
    /// `replacement`, the labels record the copy ([`HotRecord`]), and the
    /// twin stays in the slot, so the new drive takes every write to the
    /// zones copied until the array closes.  [`DvsArray::hot_step`]
    /// resumes it; so does the next open that finds the new drive.
    pub fn hot_pause(&mut self) -> Result<HotProgress, DvsError> {
        self.check_ok()?;
        self.settle()?;
        let Some(h) = &self.hot else { return Err(DvsError::Other("no hot replace is in progress".into())) };
        let (m, twin, uuid) = (h.m, h.twin.clone(), h.new_uuid);
        let events = self.meta.events;
        let mut labelled = twin.new.flush();
        for ev in [events, events + 1] {
            let l = label_bytes(&meta::replacement_label(&self.label, &self.geo.cfg, uuid, m, ev), self.ml.label_len)?;
            labelled = labelled.and_then(|_| twin.new.write_at(&l, label_offset(ev)));
        }
        let labelled = labelled.and_then(|_| twin.new.flush());
        self.new_result(&twin, |_| labelled)?;
        if let Some(h) = &mut self.hot {
            (h.paused, h.recorded) = (true, true);
        }
        let r = self.label_rounds();
        self.poison(r)?;
        Ok(self.hot_progress().expect("a hot replace is in progress"))
    }

    /// The hot replace ended without a label round of its own (the next
    /// one drops its record).
    pub(super) fn hot_forget(&mut self) {
        if let Some(h) = &mut self.hot {
            h.recorded = false;
        }
        self.hot_abandon();
    }

    /// What the labels record of the hot replace in progress: a paused
    /// one, or one resumed at open (until it ends).
    pub(super) fn hot_record(&self) -> Option<HotRecord> {
        let h = self.hot.as_ref().filter(|h| h.recorded)?;
        Some(HotRecord { member: h.m, old: self.label.member_uuids[h.m], new: h.new_uuid, copied: h.twin.copied.load(Ordering::Acquire) })
    }

    /// The new drive's place in the devices given to open, for a copy
    /// resumed there.
    pub fn hot_source(&self) -> Option<usize> {
        self.hot.as_ref().and_then(|h| h.source)
    }
}

/// At open: the paused hot replace the authoritative label `auth`
/// records, resumed onto the drive with its `replacement` label among
/// `found` (the others are named in `warnings`), as a twin put in slot
/// `m` of `members` before anything is written.  The copy goes on at the
/// lowest of the recorded zone and the first sequential zone whose write
/// pointers differ on the two drives (a crash may have cut a mirrored
/// write or reset between them); the conventional zones are copied again.
pub(super) fn attach(found: Vec<Found<Given>>, auth: &Label, members: &mut [Option<Arc<dyn ZonedMember>>], warnings: &mut Vec<String>) -> Option<Hot> {
    let rec = meta::label_policy(auth).ok().and_then(|p| p.hot);
    let mut hot = None;
    for f in found {
        let ours = f.label.array_uuid == auth.array_uuid;
        let why = match rec {
            _ if !ours => format!("a paused hot replace's drive of another DVS array ({})", f.label.array_uuid),
            Some(r) if r.new == f.label.member_uuid && hot.is_none() => match resume(r, auth, &f.dev.dev, members) {
                Ok(h) => {
                    hot = Some(Hot { source: Some(f.dev.at), ..h });
                    continue;
                }
                Err(why) => format!("the paused hot replace of member {} onto it was dropped: {why}; it starts over when asked again", r.member),
            },
            _ => "a former hot replace's drive of this array (its labels no longer record the copy)".to_string(),
        };
        warnings.push(format!("{}: {why}", f.dev.dev.describe()));
    }
    if let (Some(r), None) = (rec, &hot) {
        if !warnings.iter().any(|w| w.contains("paused hot replace of member")) {
            warnings.push(format!("the paused hot replace of member {} was dropped: its new drive was not found; it starts over when asked again", r.member));
        }
    }
    hot
}

/// The twin of record `r` in its slot of `members`, or why not.
fn resume(r: HotRecord, auth: &Label, new: &Arc<dyn ZonedMember>, members: &mut [Option<Arc<dyn ZonedMember>>]) -> Result<Hot, String> {
    let cfg = meta::label_config(auth).map_err(|e| e.to_string())?;
    if auth.member_uuids.get(r.member) != Some(&r.old) {
        return Err(format!("slot {} no longer holds the drive it copied", r.member));
    }
    let Some(old) = members.get(r.member).cloned().flatten() else { return Err(format!("member {}'s drive is missing", r.member)) };
    check_member(&cfg, r.member, new.as_ref()).map_err(|e| e.to_string())?;
    let mut at = r.copied.clamp(cfg.conventional, cfg.zones);
    if let Some(z) = (cfg.conventional..at).find(|&z| old.write_pointer(z) != new.write_pointer(z)) {
        at = z;
    }
    let twin = Arc::new(ZonedTwin::new(old, new.clone(), at));
    members[r.member] = Some(twin.clone());
    Ok(Hot { m: r.member, resumed_from: Some(twin.done()), twin, bytes: 0, new_uuid: r.new, paused: true, recorded: true, source: None })
}

/// Make `dev` a blank drive: its label area zeroed (flushed), its written
/// sequential zones reset.
fn blank(cfg: &crate::DvsConfig, dev: &dyn ZonedMember) -> io::Result<()> {
    dev.write_at(&vec![0u8; LABEL_AREA as usize], 0)?;
    dev.flush()?;
    for z in cfg.conventional..cfg.zones {
        if dev.write_pointer(z).is_some_and(|wp| wp > z * cfg.zone_size) {
            dev.reset_zone(z)?;
        }
    }
    dev.flush()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::meta::{label, DvsPolicy};
    use crate::DvsConfig;
    use mosaic_dev::zoned::ZonedFile;

    /// Labels whose paused copy names another drive than the one its
    /// slot holds (they disagree with themselves) resume nothing: the
    /// reason names the slot, and the slot keeps its drive.
    #[test]
    fn a_record_of_another_drive_than_its_slots_is_not_resumed() {
        let cfg = DvsConfig::new(5, 1, 4096, 8 * 4096, 16, 6);
        let ids: Vec<Uuid> = (0..5).map(|_| Uuid::new_v4()).collect();
        let rec = HotRecord { member: 2, old: Uuid::new_v4(), new: Uuid::new_v4(), copied: 8 };
        let policy = DvsPolicy { config: cfg.clone(), failed: vec![], spares: vec![], role: String::new(), last_scrub: None, replaced: vec![], hot: Some(rec), lost: vec![] };
        let auth = label(&policy, Uuid::new_v4(), &ids, 0, 3, 0);
        let dir = tempfile::tempdir().unwrap();
        let file = |name: &str| Arc::new(ZonedFile::create(&dir.path().join(name), cfg.zone_size, cfg.zones, cfg.conventional).unwrap()) as Arc<dyn ZonedMember>;
        let old = file("m2");
        let mut members: Vec<Option<Arc<dyn ZonedMember>>> = vec![None, None, Some(old.clone()), None, None];
        let e = resume(rec, &auth, &file("new"), &mut members).err().expect("not resumed");
        assert_eq!(e, "slot 2 no longer holds the drive it copied");
        assert!(members[2].as_ref().is_some_and(|m| Arc::ptr_eq(m, &old)), "the slot keeps its drive");
        // The slot's own drive recorded: the copy resumes in it, its
        // sequential zones 6 and 7 done (the conventional ones are copied
        // again).
        let rec = HotRecord { old: ids[2], ..rec };
        let h = resume(rec, &auth, &file("new2"), &mut members).expect("resumed");
        assert_eq!((h.m, h.resumed_from), (2, Some(2)));
        assert!(!members[2].as_ref().is_some_and(|m| Arc::ptr_eq(m, &old)), "the twin takes the slot");
    }
}
