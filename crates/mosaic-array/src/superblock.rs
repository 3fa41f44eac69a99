//! The fixed array's superblock, on disk the one member label of
//! [`mosaic_format::label`] of kind `"fixed"`.
//!
//! Every member starts with a 1 MiB header; stripe data begins at
//! [`DATA_OFFSET`].  The label's two 64 KiB slots take the first 128 KiB
//! and are written alternately (slot = events mod 2), so a torn write of
//! one slot leaves the other intact; only the 4 KiB blocks a label needs
//! are written and read (one block up to a few dozen members; `rs:K+M`
//! with K+M = 255 needs a few):
//!
//! ```text
//!   member byte 0          64 KiB         128 KiB          960 KiB      1 MiB
//!   ├── slot 0 ────────────┼── slot 1 ─────┼── (reserved) ───┼── bitmap ─┼── stripe data ...
//!
//!   slot: frame { "MOSF" | ver | kind 0x0200 (label) | seq = events | len | crc32c
//!                 | JSON label { kind: "fixed", array_uuid, member_uuid, member_index,
//!                                members, events, member_uuids[], created,
//!                                policy: FixedPolicy { format_version, role, geometry,
//!                                  member_data_size, data_offset, state, member_states[],
//!                                  member_paths[], journal?, home?, reshape?,
//!                                  spares[], member_hosts[], lost[], bitmap?, left[],
//!                                  resync_from?, last_scrub?, owner?, replaced[],
//!                                  hot? } } }
//! ```
//!
//! The label carries what every kind of array shares (identity, event
//! counter, the identity expected in each slot); the policy blob carries
//! what only a fixed layout needs.  [`Superblock`] is the two joined, the
//! type the rest of the crate works with.  The copy with the highest event
//! counter among all members is authoritative for the array's view of
//! member states.
//!
//! **Event counters decide freshness**, by the one rule of
//! [`mosaic_format::fresh`]: every update is written in two rounds, each
//! bumping `events` and reaching every member in service before the next
//! starts ([`crate::Array`] does this), and no data is written between the
//! rounds, so a member two or more events behind missed writes: it is
//! *stale*, and is never used until rebuilt.

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use mosaic_core::{Geometry, MemberState};
use mosaic_dev::Member;
use mosaic_format::label::{self, Label, LabelError, LABEL_AREA};
pub use mosaic_format::scrub::ScrubRecord;

use crate::ArrayError;

pub use mosaic_format::label::SLOT_SIZE;

/// The label kind of a fixed-layout array's members.
pub const KIND: &str = "fixed";
/// The version of the fixed kind's policy blob.
pub const FORMAT_VERSION: u32 = 3;
/// The version written while a grow is in progress, so that a mosaic
/// that does not know grows refuses the array rather than misread it.
pub const GROWING_VERSION: u32 = 4;
/// The versions written while the array has lost data (see
/// [`Superblock::lost`]), without and with a grow in progress: a mosaic
/// that does not know lost ranges refuses the array rather than serve
/// wrong bytes as good.
pub const LOSSY_VERSION: u32 = 5;
pub const LOSSY_GROWING_VERSION: u32 = 6;
/// The versions written while the array has a write-intent bitmap (see
/// [`Superblock::bitmap`]), without and with lost data: a mosaic that
/// does not know the bitmap would write without marking it, and one that
/// does would then trust the stale marks after a crash.  (A grow is
/// refused while the array has a bitmap.)
pub const BITMAP_VERSION: u32 = 7;
pub const LOSSY_BITMAP_VERSION: u32 = 8;
/// The most lost ranges a superblock lists; past that, neighbours merge
/// (more bytes read as lost, never fewer).
pub use mosaic_format::lost::MAX_LOST;
/// The most replaced member UUIDs a superblock keeps
/// ([`Superblock::replaced`]); older ones are forgotten.
pub const MAX_REPLACED: usize = 32;
pub const DATA_OFFSET: u64 = 1 << 20;
const _: () = assert!(mosaic_format::label::LABEL_AREA <= DATA_OFFSET);

/// Clean/dirty shutdown state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ArrayState {
    /// Closed cleanly: code units agree with data.
    Clean,
    /// Open for writing, or not closed cleanly.
    Dirty,
}

/// What a member is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MemberRole {
    /// Holds stripe units (data and code rotate over members).
    Stripe,
    /// A hot spare: holds nothing until it takes a failed member's place
    /// (its label names the array; `member_index` means nothing).
    Spare,
    /// The new drive of a hot replace cut off by a clean stop: it holds
    /// slot `member_index`'s units of the stripes [`HotCopy::copied`]
    /// says, and the array resumes the copy onto it
    /// ([`crate::hot`]).  Never a member, never a spare.
    Replacement,
}

/// A grow in progress (see [`crate::grow`]): the geometry being left,
/// and how many stripes of the new geometry hold their data already.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Reshape {
    pub from: Geometry,
    /// Stripes `0..pos` of the new geometry are restriped and durable.
    pub pos: u64,
    /// The first stripes' data, saved on the new members before stripe 0
    /// is rewritten, with its CRC-32C: a crash in there restores from it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backup_crc: Option<u32>,
    /// A file outside the array holding that data too (`grow
    /// --backup-file`), where the old members' reserved bytes are too
    /// small for a second copy; removed when the grow ends.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backup_file: Option<String>,
}

/// A hot replace cut off by a clean stop (a server stopping, a signal):
/// the copy resumes at the next writable open, where it stopped, when
/// that open finds the array closed cleanly since (every write went to
/// both drives until then) and the new drive with its
/// [`MemberRole::Replacement`] label.  Any other writable open drops it
/// (the copy starts over when asked again).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HotCopy {
    /// The slot being copied, and the identity of its old drive.
    pub member: usize,
    pub old: Uuid,
    /// The identity on the new drive's label.
    pub uuid: Uuid,
    /// The new drive's last known path (a hint).
    pub path: String,
    /// Stripes `0..copied` are on the new drive (flushed).
    pub copied: u64,
    /// The new drive was a hot spare: one given back as a spare if the
    /// copy does not end with it in the slot.
    #[serde(default)]
    pub spare: bool,
}

/// A hot spare the array may take when a member fails.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Spare {
    pub uuid: Uuid,
    /// Last known path (a hint, as member paths are).
    pub path: String,
}

/// One member's superblock.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Superblock {
    pub format_version: u32,
    pub array_uuid: Uuid,
    /// This member's own identity (changes when a slot is replaced).
    pub member_uuid: Uuid,
    pub member_index: usize,
    pub role: MemberRole,
    pub geometry: Geometry,
    /// Bytes of this member used for stripe data (from `data_offset`).
    pub member_data_size: u64,
    pub data_offset: u64,
    pub events: u64,
    pub state: ArrayState,
    /// The array's view of every member, by index.
    pub member_states: Vec<MemberState>,
    /// The identity expected in each slot.
    pub member_uuids: Vec<Uuid>,
    /// Last known path of each member (a hint for assembly).
    pub member_paths: Vec<String>,
    /// Creation time, seconds since the Unix epoch.
    pub created: u64,
    /// The write-ahead journal's last known path, when the array has one
    /// (see [`crate::journal`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub journal: Option<String>,
    /// The canonical directory a directory array was created in (see
    /// [`crate::assemble`]): paths inside it are stored relative to it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub home: Option<String>,
    /// A grow in progress.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reshape: Option<Reshape>,
    /// Hot spares.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub spares: Vec<Spare>,
    /// Each member's host label (its failure domain; see
    /// [`crate::domain`]), "" where it has none; empty when none has.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub member_hosts: Vec<String>,
    /// Logical byte ranges whose data is lost (a member failed
    /// while a cache held their stripes' code, in a crash or as a
    /// write-through cache volume stopped): reads of them fail until
    /// they are written whole again.  Sorted, disjoint, at most
    /// [`MAX_LOST`].
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub lost: Vec<LostRange>,
    /// The writable open these writes belong to, and the one before
    /// ([`mosaic_format::label::Label::session`]).
    #[serde(default, skip_serializing_if = "Uuid::is_nil")]
    pub session: Uuid,
    #[serde(default, skip_serializing_if = "Uuid::is_nil")]
    pub prev_session: Uuid,
    /// The write-intent bitmap, when the array has one (see
    /// [`crate::bitmap`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bitmap: Option<BitmapInfo>,
    /// With a write-intent bitmap: for each member that failed while
    /// active, or was absent altogether at an open after being active,
    /// the session its own superblock was last written in (nil for the
    /// others; empty when none): the device that comes back with that
    /// session is the one that left, not a copy written apart, so the
    /// bitmap says what it missed (md's re-add,
    /// [`crate::Array::replace_with`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub left: Vec<Uuid>,
    /// Without a write-intent bitmap, after an unclean shutdown: the
    /// stripes below this were verified by a resync that a stop cut off
    /// (md's `resync_offset`), so the next resync starts here.  Zero
    /// while writes are in progress (a crash may then tear any stripe)
    /// and once the array is clean.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub resync_from: u64,
    /// The last scrub asked for (a writable open's), as ZFS keeps its
    /// scan's result: when it ended and what it found.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_scrub: Option<ScrubRecord>,
    /// The array this one is a part of (a tier's side, a remapped
    /// array's inner array): opened on its own only to read, or with
    /// `--force` (its bytes are the owner's structures).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<Owner>,
    /// The member UUIDs replaced in this array (most recent last, at most
    /// [`MAX_REPLACED`]): a device carrying one is a former member of
    /// this array, not a copy's member (a copy that replaced a member
    /// gave it a UUID this array never had).  Its file left in the
    /// array's directory is passed over without a warning, and it may be
    /// taken back as a hot spare.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub replaced: Vec<Uuid>,
    /// A hot replace to resume ([`HotCopy`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hot: Option<HotCopy>,
    /// Mirror members read only when no other copy serves (md's
    /// `--write-mostly`), by slot, in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub write_mostly: Vec<usize>,
}

/// Member `i` is failed on the record of the fixed array's label `l`
/// (the one freshness rule's `failed`, [`mosaic_format::fresh::Kind`]).
pub fn failed_on_record(l: &Label, i: usize) -> bool {
    Superblock::from_label(l.clone()).is_ok_and(|sb| matches!(sb.member_states.get(i), Some(MemberState::Failed)))
}

/// Whether the fixed array of the label `l` can be served from the
/// member slots `filled`: the columns of a stripe out (unfilled, or
/// failed on record) are within what its code tolerates (the one rule's
/// `serves`).
pub fn serves_from(l: &Label, filled: &[bool]) -> bool {
    let Ok(sb) = Superblock::from_label(l.clone()) else { return false };
    let g = &sb.geometry;
    let out: Vec<usize> = (0..g.members).filter(|&i| !filled.get(i).copied().unwrap_or(false) || matches!(sb.member_states[i], MemberState::Failed)).collect();
    g.columns_out(&out) <= g.m
}

/// The array an inner array belongs to ([`Superblock::owner`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Owner {
    /// What this array is to it: "the fast side of a tier", ...
    pub role: String,
    pub uuid: Uuid,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// An array's write-intent bitmap: one bit for every `chunk` stripes,
/// in the last [`mosaic_format::bitmap::AREA`] bytes of each member's
/// header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct BitmapInfo {
    pub chunk: u64,
}

pub use mosaic_format::lost::LostRange;

impl Superblock {
    /// Give slot `idx` a new member identity (a replacement), keeping the
    /// old one in [`Superblock::replaced`].
    pub fn retire(&mut self, idx: usize) {
        let old = std::mem::replace(&mut self.member_uuids[idx], Uuid::new_v4());
        label::note_replaced(&mut self.replaced, old, MAX_REPLACED);
    }

    /// Slot `idx` on a new device at `path` (a replace, hot or not): a new
    /// identity ([`Superblock::retire`]), its path, and nothing of the old
    /// device's (the session it left with, its host label).
    pub fn new_device(&mut self, idx: usize, path: &str) {
        if self.hot.as_ref().is_some_and(|h| h.member == idx) {
            self.hot = None;
        }
        self.retire(idx);
        self.member_paths[idx] = path.to_string();
        if let Some(l) = self.left.get_mut(idx) {
            *l = Uuid::nil();
        }
        if let Some(h) = self.member_hosts.get_mut(idx) {
            h.clear();
        }
    }

    pub fn degraded(&self) -> bool {
        self.member_states.iter().any(|s| !matches!(s, MemberState::Active))
    }

    /// The label this superblock is on disk.
    pub fn to_label(&self) -> Result<Label, ArrayError> {
        let p = FixedPolicy {
            // A grow in progress is a format older versions cannot read.
            format_version: disk_version(self.reshape.is_some(), !self.lost.is_empty(), self.bitmap.is_some()),
            role: self.role,
            geometry: self.geometry.clone(),
            member_data_size: self.member_data_size,
            data_offset: self.data_offset,
            state: self.state,
            member_states: self.member_states.clone(),
            member_paths: self.member_paths.clone(),
            journal: self.journal.clone(),
            home: self.home.clone(),
            reshape: self.reshape.clone(),
            spares: self.spares.clone(),
            member_hosts: self.member_hosts.clone(),
            lost: self.lost.clone(),
            bitmap: self.bitmap,
            left: self.left.clone(),
            resync_from: self.resync_from,
            last_scrub: self.last_scrub,
            owner: self.owner.clone(),
            replaced: self.replaced.clone(),
            hot: self.hot.clone(),
            write_mostly: self.write_mostly.clone(),
        };
        let policy = serde_json::to_value(p).map_err(|e| ArrayError::Format(format!("encoding superblock: {e}")))?;
        Ok(Label {
            kind: KIND.into(),
            array_uuid: self.array_uuid,
            member_uuid: self.member_uuid,
            member_index: self.member_index,
            members: self.member_uuids.len(),
            events: self.events,
            member_uuids: self.member_uuids.clone(),
            created: self.created,
            policy,
            session: self.session,
            prev_session: self.prev_session,
        })
    }

    /// The superblock a valid label of kind `"fixed"` carries.
    pub fn from_label(l: Label) -> Result<Superblock, String> {
        if l.kind != KIND {
            return Err(format!("a {} array's label, not a fixed array's", l.kind));
        }
        let p: FixedPolicy = l.policy().map_err(|e| e.to_string())?;
        let mut sb = Superblock {
            format_version: p.format_version,
            array_uuid: l.array_uuid,
            member_uuid: l.member_uuid,
            member_index: l.member_index,
            role: p.role,
            geometry: p.geometry,
            member_data_size: p.member_data_size,
            data_offset: p.data_offset,
            events: l.events,
            state: p.state,
            member_states: p.member_states,
            member_uuids: l.member_uuids,
            member_paths: p.member_paths,
            created: l.created,
            journal: p.journal,
            home: p.home,
            reshape: p.reshape,
            spares: p.spares,
            member_hosts: p.member_hosts,
            lost: p.lost,
            session: l.session,
            prev_session: l.prev_session,
            bitmap: p.bitmap,
            left: p.left,
            resync_from: p.resync_from,
            last_scrub: p.last_scrub,
            owner: p.owner,
            replaced: p.replaced,
            hot: p.hot,
            write_mostly: p.write_mostly,
        };
        sb.validate()?;
        // In memory the version is the array's; a grow's or lost ranges'
        // is on disk only.
        sb.format_version = FORMAT_VERSION;
        Ok(sb)
    }

    /// Encode into one slot's bytes (whole 4 KiB blocks, at most a slot).
    pub fn encode(&self) -> Result<Vec<u8>, ArrayError> {
        self.to_label()?.encode().map_err(|e| ArrayError::Format(format!("superblock: {e}")))
    }

    /// Decode one slot.  Never panics: every length is checked.
    pub fn decode(buf: &[u8]) -> Result<Superblock, LabelError> {
        Superblock::from_label(Label::decode(buf)?).map_err(LabelError::Corrupt)
    }

    /// Internal consistency of a decoded superblock.
    fn validate(&self) -> Result<(), String> {
        let v = self.format_version;
        if v != disk_version(self.reshape.is_some(), !self.lost.is_empty(), self.bitmap.is_some()) {
            return Err(format!("unsupported format version {v}"));
        }
        let g = &self.geometry;
        let n = g.members;
        let bytes = g.stripes.checked_mul(g.unit).ok_or("geometry fields overflow (stripes x stripe unit)")?;
        let rebuilt = Geometry::new(g.level, n, g.unit, g.block, bytes).map_err(|e| e.to_string())?;
        if &rebuilt != g {
            return Err("geometry fields disagree with each other".into());
        }
        if self.member_index >= n || self.member_states.len() != n || self.member_uuids.len() != n || self.member_paths.len() != n {
            return Err(format!("member tables do not match the member count {n}"));
        }
        if self.replaced.len() > MAX_REPLACED {
            return Err(format!("{} replaced member UUIDs listed, at most {MAX_REPLACED}", self.replaced.len()));
        }
        if !self.left.is_empty() && self.left.len() != n {
            return Err(format!("the sessions members left in do not match the member count {n}"));
        }
        if !self.member_hosts.is_empty() && (self.member_hosts.len() != n || self.member_hosts.iter().any(|h| !h.is_empty() && !crate::domain::valid_label(h))) {
            return Err(format!("host labels do not match the member count {n} or are not host names"));
        }
        if self.member_data_size != g.member_data_bytes() || self.data_offset != DATA_OFFSET {
            return Err("member data size or offset disagree with the geometry".into());
        }
        check_lost(&self.lost, g.stripes.saturating_mul(g.stripe_data_bytes()))?;
        if let Some(b) = &self.bitmap {
            if b.chunk == 0 || g.stripes.div_ceil(b.chunk) > mosaic_format::bitmap::MAX_BITS || self.journal.is_some() || self.reshape.is_some() {
                return Err(format!("a write-intent bitmap of {} stripes a bit does not fit the array (or it has a journal or a grow)", b.chunk));
            }
        }
        if let Some(h) = &self.hot {
            if h.member >= n || h.copied > g.stripes {
                return Err(format!("a hot replace of member {} copied to stripe {}: the array has {n} members and {} stripes", h.member, h.copied, g.stripes));
            }
        }
        if !self.write_mostly.is_empty() && (!g.is_mirror() || self.write_mostly.len() >= n || self.write_mostly.windows(2).any(|w| w[0] >= w[1]) || self.write_mostly.iter().any(|&m| m >= n)) {
            return Err(format!("write-mostly members {:?}: a mirror's slots, in order, not all of its {n}", self.write_mostly));
        }
        if self.resync_from > g.stripes {
            return Err(format!("a resync checkpoint at stripe {} past the array's {} stripes", self.resync_from, g.stripes));
        }
        if let Some(r) = &self.reshape {
            let f = &r.from;
            let fb = f.stripes.checked_mul(f.unit).ok_or("grow geometry fields overflow")?;
            let rebuilt = Geometry::new(f.level, f.members, f.unit, f.block, fb).map_err(|e| format!("grow: {e}"))?;
            if &rebuilt != f || f.members >= n || f.unit != g.unit || f.block != g.block || f.stripes != g.stripes || f.m != g.m || r.pos > g.stripes {
                return Err("the grow in progress disagrees with the geometry".into());
            }
        }
        Ok(())
    }

    /// Read both slots of a member and return the newest valid copy.
    pub fn read_from(m: &dyn Member) -> Result<Superblock, ArrayError> {
        let who = m.describe();
        if m.size() < LABEL_AREA {
            return Err(ArrayError::BadMember(format!("{who}: too small ({} bytes) to hold a superblock", m.size())));
        }
        let read = label::read_label(m.size(), &mut |buf, off| m.read_at(buf, off));
        let label = read.map_err(|e| ArrayError::Io(format!("{who}: reading superblock: {e}")))?;
        let bad = |why: String| ArrayError::BadMember(format!("{who}: corrupt superblock: {why}"));
        match label {
            Ok(l) => Superblock::from_label(l).map_err(bad),
            Err(LabelError::None) if old_format(m) => {
                Err(ArrayError::BadMember(format!("{who}: a member of an array of an older mosaic format, which this version does not open")))
            }
            Err(LabelError::None) => Err(ArrayError::BadMember(format!("{who}: no mosaic superblock (not a member of any array)"))),
            Err(LabelError::Corrupt(why)) => Err(bad(why)),
        }
    }

    /// Write this superblock to its slot (events mod 2) of `m`.
    pub fn write_to(&self, m: &dyn Member) -> Result<(), ArrayError> {
        let buf = self.encode()?;
        let slot = self.events % 2;
        m.write_at(&buf, slot * SLOT_SIZE)
            .and_then(|_| m.flush())
            .map_err(|e| ArrayError::Io(format!("{}: writing superblock: {e}", m.describe())))
    }
}

/// Whether `m` starts with the superblock magic of a format before the
/// one member label (pre-release; not opened, but named as such).
fn old_format(m: &dyn Member) -> bool {
    let mut b = [0u8; 8];
    m.read_at(&mut b, 0).is_ok() && &b == b"MOSAICSB"
}

/// What the label's policy blob holds for a fixed array: everything of
/// [`Superblock`] that is not a shared label field.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct FixedPolicy {
    format_version: u32,
    role: MemberRole,
    geometry: Geometry,
    member_data_size: u64,
    data_offset: u64,
    state: ArrayState,
    member_states: Vec<MemberState>,
    member_paths: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    journal: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    home: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    reshape: Option<Reshape>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    spares: Vec<Spare>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    member_hosts: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    lost: Vec<LostRange>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    bitmap: Option<BitmapInfo>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    left: Vec<Uuid>,
    #[serde(default, skip_serializing_if = "is_zero")]
    resync_from: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    last_scrub: Option<ScrubRecord>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    owner: Option<Owner>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    replaced: Vec<Uuid>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    hot: Option<HotCopy>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    write_mostly: Vec<usize>,
}

/// The format version on disk: what a reader must know to use the array.
fn disk_version(growing: bool, lossy: bool, bitmap: bool) -> u32 {
    match (growing, lossy, bitmap) {
        (false, false, false) => FORMAT_VERSION,
        (true, false, false) => GROWING_VERSION,
        (false, true, false) => LOSSY_VERSION,
        (true, true, false) => LOSSY_GROWING_VERSION,
        (_, false, true) => BITMAP_VERSION,
        (_, true, true) => LOSSY_BITMAP_VERSION,
    }
}

/// Lost ranges must be non-empty, sorted, apart and inside `capacity`.
fn check_lost(lost: &[LostRange], capacity: u64) -> Result<(), String> {
    mosaic_format::lost::check(lost, capacity)
}

pub use mosaic_format::lost::{with as lost_with, without as lost_without};
