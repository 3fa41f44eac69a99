//! Hot replace of a DVS member (md's `--replace`): a working member's
//! zones are copied onto a new zoned drive while the member stays in
//! service, so the array keeps all its redundancy during the copy (a plain
//! replace fails the member first and rebuilds it from the others).
//!
//! ```text
//!   slot m during the copy: ZonedTwin { old, new, copied }
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
//! any drive names the new one, and its own label area is zeroed: an open
//! after a crash uses the old drive, which took every write.  From the
//! first label round on, the labels name the new drive in slot m and list
//! the old drive's identity as replaced (passed over at open whatever its
//! event counter); the new drive holds what the old one does: the copy
//! did the zones, and it took every write to a zone copied.  A copy cut
//! off (a crash, a stop, the array closed) starts over when asked again.
//!
//! Failures: the new drive failing stops the copy (the member stays on
//! the old drive, the twin is taken out, and the caller hears why); the
//! old drive failing is the member's failure, as without a copy.

use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use mosaic_core::{Dir, MemberState};
use mosaic_format::label::LABEL_AREA;
use uuid::Uuid;

use super::{as_member, check_member, counted_label, DvsArray, ZonedMember};
use crate::DvsError;

/// The copy moves at most this many bytes at a time.
const COPY_CHUNK: u64 = 1 << 20;

/// Slot m's device during a hot replace: the old drive, mirrored onto the
/// new one in the zones already copied.
pub(crate) struct ZonedTwin {
    old: Arc<dyn ZonedMember>,
    new: Arc<dyn ZonedMember>,
    /// Zones `0..copied` hold on the new drive what they hold on the old.
    copied: AtomicU64,
    /// The new drive's first error: no more mirroring, the copy stops.
    broken: Mutex<Option<String>>,
}

impl ZonedTwin {
    fn new(old: Arc<dyn ZonedMember>, new: Arc<dyn ZonedMember>) -> ZonedTwin {
        ZonedTwin { old, new, copied: AtomicU64::new(0), broken: Mutex::new(None) }
    }

    fn broken(&self) -> Option<String> {
        self.broken.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Whether an operation at byte `offset` reaches the new drive too.
    fn mirrors(&self, offset: u64) -> bool {
        let z = self.old.zone_size();
        offset >= LABEL_AREA && z > 0 && offset / z < self.copied.load(Ordering::Acquire) && self.broken().is_none()
    }

    /// The new drive's operation `r`: an error stops the mirroring (the
    /// old drive took the operation: the member is whole).
    fn mirrored(&self, r: io::Result<()>) {
        if let Err(e) = r {
            self.broken.lock().unwrap_or_else(|e| e.into_inner()).get_or_insert_with(|| format!("{}: {e}", self.new.describe()));
        }
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
            self.mirrored(self.new.write_at(buf, offset));
        }
        Ok(())
    }
    fn write_parts_at(&self, parts: &[&[u8]], offset: u64) -> io::Result<()> {
        self.old.write_parts_at(parts, offset)?;
        if self.mirrors(offset) {
            self.mirrored(self.new.write_parts_at(parts, offset));
        }
        Ok(())
    }
    fn flush(&self) -> io::Result<()> {
        self.old.flush()?;
        if self.copied.load(Ordering::Acquire) > 0 && self.broken().is_none() {
            self.mirrored(self.new.flush());
        }
        Ok(())
    }
    fn reset_zone(&self, zone: u64) -> io::Result<()> {
        self.old.reset_zone(zone)?;
        if self.mirrors(zone * self.old.zone_size()) {
            self.mirrored(self.new.reset_zone(zone));
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

/// A hot replace in progress.
pub(super) struct Hot {
    m: usize,
    twin: Arc<ZonedTwin>,
    bytes: u64,
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
        let twin = Arc::new(ZonedTwin::new(old, dev));
        let as_zoned: Arc<dyn ZonedMember> = twin.clone();
        self.exec.set_member(m, Some(as_member(&as_zoned)));
        self.members[m] = Some(as_zoned);
        self.hot = Some(Hot { m, twin, bytes: 0 });
        Ok(())
    }

    /// Whether member `m` can be hot-replaced now (the array settled).
    fn hot_ready(&mut self, m: usize) -> Result<(), DvsError> {
        self.check_ok()?;
        self.settle()?;
        if let Some(h) = &self.hot {
            return Err(DvsError::Other(format!("member {} is being hot-replaced already", h.m)));
        }
        if m >= self.geo.n {
            return Err(DvsError::Other(format!("no member {m}: the array has members 0..{}", self.geo.n - 1)));
        }
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
        self.hot.as_ref().map(|h| HotProgress { member: h.m, done: h.twin.copied.load(Ordering::Acquire), total: self.geo.cfg.zones, bytes: h.bytes })
    }

    /// Copy up to `zones` more zones (the conventional ones count as one
    /// step).  An error of the new drive ends the hot replace (the member
    /// stays on its old drive); one of the old drive is returned as it is,
    /// the copy left where it was.
    pub fn hot_step(&mut self, zones: u64) -> Result<HotProgress, DvsError> {
        self.check_ok()?;
        self.settle()?;
        let Some(h) = &self.hot else { return Err(DvsError::Other("no hot replace is in progress".into())) };
        let (m, twin) = (h.m, h.twin.clone());
        let cfg = self.geo.cfg.clone();
        for _ in 0..zones.max(1) {
            self.new_drive_ok(&twin)?;
            let at = twin.copied.load(Ordering::Acquire);
            if at >= cfg.zones {
                break;
            }
            let (z, copy) = if at < cfg.conventional {
                (cfg.conventional, (LABEL_AREA, cfg.conventional * cfg.zone_size))
            } else {
                let start = at * cfg.zone_size;
                if twin.new.write_pointer(at) != Some(start) {
                    let r = twin.new.reset_zone(at);
                    self.new_result(&twin, r)?;
                }
                (at + 1, (start, twin.old.write_pointer(at).unwrap_or(start)))
            };
            self.copy(m, &twin, copy)?;
            twin.copied.store(z, Ordering::Release);
        }
        self.new_drive_ok(&twin)?;
        Ok(self.hot_progress().expect("a hot replace is in progress"))
    }

    /// Copy bytes `from..to` of the old drive onto the new one.
    fn copy(&mut self, m: usize, twin: &ZonedTwin, (from, to): (u64, u64)) -> Result<(), DvsError> {
        let mut buf = vec![0u8; COPY_CHUNK.min(to.saturating_sub(from)) as usize];
        let mut at = from;
        while at < to {
            let len = (to - at).min(COPY_CHUNK) as usize;
            twin.old.read_at(&mut buf[..len], at).map_err(|e| DvsError::Other(format!("member {m}'s drive {}: reading byte {at} for the hot replace: {e}", twin.old.describe())))?;
            let r = twin.new.write_at(&buf[..len], at);
            self.new_result(twin, r)?;
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

    /// An operation `r` of the new drive: an error ends the hot replace.
    fn new_result(&mut self, twin: &ZonedTwin, r: io::Result<()>) -> Result<(), DvsError> {
        twin.mirrored(r);
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
        let (m, twin) = (h.m, h.twin.clone());
        if twin.copied.load(Ordering::Acquire) < self.geo.cfg.zones {
            return Err(DvsError::Other(format!("the hot replace of member {m} has not copied every zone yet")));
        }
        let r = twin.new.flush();
        self.new_result(&twin, r)?;
        let mut identity = self.label.clone();
        let new_uuid = Uuid::new_v4();
        let former = std::mem::replace(&mut identity.member_uuids[m], new_uuid);
        self.hot = None;
        self.exec.set_member(m, Some(as_member(&twin.new)));
        self.members[m] = Some(twin.new.clone());
        self.sources[m] = None;
        self.label = identity;
        mosaic_format::label::note_replaced(&mut self.replaced, former, crate::meta::MAX_REPLACED);
        let r = self.label_rounds();
        self.poison(r)?;
        Ok(new_uuid)
    }

    /// End the hot replace in progress, if any: the old drive alone in
    /// its slot again.  The new drive keeps a zeroed label area: it is
    /// never taken for a member.
    pub fn hot_abandon(&mut self) {
        let Some(h) = self.hot.take() else { return };
        let _ = self.settle();
        let old = h.twin.old.clone();
        self.exec.set_member(h.m, Some(as_member(&old)));
        self.members[h.m] = Some(old);
    }
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
