//! The on-disk superblock.
//!
//! Every member starts with a 1 MiB header; stripe data begins at
//! [`DATA_OFFSET`].  The superblock lives in two 64 KiB slots at the start
//! of the header and is written alternately (slot = events mod 2), so a torn
//! write of one slot leaves the other intact.  Only the 4 KiB blocks a
//! superblock needs are written and read (one block up to a few dozen
//! members; `rs:K+M` with K+M = 255 needs about five):
//!
//! ```text
//!   member byte 0          64 KiB         128 KiB              1 MiB
//!   ├── slot 0 ────────────┼── slot 1 ─────┼── (reserved) ────────┼── stripe data ...
//!
//!   slot: "MOSAICSB" | version u32 | payload length u32 | crc32c u32 | JSON payload
//!         (crc32c covers the first 16 bytes and the payload)
//! ```
//!
//! The payload is JSON so it stays readable and can grow fields; the frame
//! around it is fixed.  The copy with the highest event counter among all
//! members is authoritative for the array's view of member states.
//!
//! **Event counters decide freshness** (as md's do).  Every update is
//! written in two rounds, each bumping `events` and reaching every member
//! in service before the next starts ([`crate::Array`] does this), and no
//! data is written between the rounds.  So a crash during an update leaves
//! members at most one event apart, while a member that missed data
//! writes (it was out of the array, or its file was swapped for an old
//! copy) is at least two events behind: it is *stale*, and is never used
//! until rebuilt.

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use mosaic_core::{Geometry, MemberState};
use mosaic_dev::Member;

use crate::ArrayError;

pub const MAGIC: &[u8; 8] = b"MOSAICSB";
/// Version 2: 64 KiB slots (version 1 had 4 KiB slots; its slot 0 still reads).
pub const FORMAT_VERSION: u32 = 2;
/// Space reserved for each of the two copies.
pub const SLOT_SIZE: u64 = 64 << 10;
/// Slots are read and written in blocks of this size.
const SLOT_BLOCK: usize = 4096;
/// A member whose event counter is more than this behind the array's is
/// stale (see the module doc).
pub const EVENT_MARGIN: u64 = 1;
pub const DATA_OFFSET: u64 = 1 << 20;
const HEADER: usize = 20;

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
}

impl Superblock {
    pub fn degraded(&self) -> bool {
        self.member_states.iter().any(|s| !matches!(s, MemberState::Active))
    }

    /// Encode into one slot's bytes (whole 4 KiB blocks, at most a slot).
    pub fn encode(&self) -> Result<Vec<u8>, ArrayError> {
        let payload = serde_json::to_vec(self).map_err(|e| ArrayError::Format(format!("encoding superblock: {e}")))?;
        if payload.len() + HEADER > SLOT_SIZE as usize {
            return Err(ArrayError::Format(format!(
                "superblock of {} bytes does not fit a {SLOT_SIZE}-byte slot (too many members?)",
                payload.len()
            )));
        }
        let mut buf = vec![0u8; (payload.len() + HEADER).next_multiple_of(SLOT_BLOCK)];
        buf[0..8].copy_from_slice(MAGIC);
        buf[8..12].copy_from_slice(&FORMAT_VERSION.to_le_bytes());
        buf[12..16].copy_from_slice(&(payload.len() as u32).to_le_bytes());
        let crc = crc32c::crc32c_append(crc32c::crc32c(&buf[0..16]), &payload);
        buf[16..20].copy_from_slice(&crc.to_le_bytes());
        buf[HEADER..HEADER + payload.len()].copy_from_slice(&payload);
        Ok(buf)
    }

    /// Decode one slot.
    pub fn decode(buf: &[u8]) -> Result<Superblock, SlotError> {
        if buf.len() < HEADER || &buf[0..8] != MAGIC {
            return Err(SlotError::NoMagic);
        }
        let version = u32::from_le_bytes(buf[8..12].try_into().unwrap());
        if version != FORMAT_VERSION && version != 1 {
            return Err(SlotError::Corrupt(format!("unsupported format version {version}")));
        }
        let len = u32::from_le_bytes(buf[12..16].try_into().unwrap()) as usize;
        if HEADER + len > buf.len() {
            return Err(SlotError::Corrupt(format!("payload length {len} exceeds the slot")));
        }
        let want = u32::from_le_bytes(buf[16..20].try_into().unwrap());
        let payload = &buf[HEADER..HEADER + len];
        let got = crc32c::crc32c_append(crc32c::crc32c(&buf[0..16]), payload);
        if got != want {
            return Err(SlotError::Corrupt(format!("checksum mismatch (stored {want:08x}, computed {got:08x})")));
        }
        let sb: Superblock =
            serde_json::from_slice(payload).map_err(|e| SlotError::Corrupt(format!("bad payload: {e}")))?;
        sb.validate().map_err(SlotError::Corrupt)?;
        Ok(sb)
    }

    /// Internal consistency of a decoded superblock.
    fn validate(&self) -> Result<(), String> {
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
        if self.member_data_size != g.member_data_bytes() || self.data_offset != DATA_OFFSET {
            return Err("member data size or offset disagree with the geometry".into());
        }
        Ok(())
    }

    /// Read one slot: its first block, and the rest its header asks for.
    fn read_slot(m: &dyn Member, slot: u64) -> std::io::Result<Vec<u8>> {
        let mut buf = vec![0u8; SLOT_BLOCK];
        m.read_at(&mut buf, slot * SLOT_SIZE)?;
        if &buf[0..8] == MAGIC {
            let len = u32::from_le_bytes(buf[12..16].try_into().unwrap()) as usize;
            let want = (len.saturating_add(HEADER)).min(SLOT_SIZE as usize).next_multiple_of(SLOT_BLOCK);
            if want > SLOT_BLOCK {
                buf.resize(want, 0);
                m.read_at(&mut buf[SLOT_BLOCK..], slot * SLOT_SIZE + SLOT_BLOCK as u64)?;
            }
        }
        Ok(buf)
    }

    /// Read both slots of a member and return the newest valid copy.
    pub fn read_from(m: &dyn Member) -> Result<Superblock, ArrayError> {
        let who = m.describe();
        if m.size() < 2 * SLOT_SIZE {
            return Err(ArrayError::BadMember(format!("{who}: too small ({} bytes) to hold a superblock", m.size())));
        }
        let mut best: Option<Superblock> = None;
        let mut errs = Vec::new();
        for slot in 0..2 {
            let buf = Self::read_slot(m, slot).map_err(|e| ArrayError::Io(format!("{who}: reading superblock: {e}")))?;
            match Superblock::decode(&buf) {
                Ok(sb) => {
                    if best.as_ref().is_none_or(|b| sb.events > b.events) {
                        best = Some(sb);
                    }
                }
                Err(e) => errs.push(e),
            }
        }
        match best {
            Some(sb) => Ok(sb),
            None if errs.iter().all(|e| matches!(e, SlotError::NoMagic)) => {
                Err(ArrayError::BadMember(format!("{who}: no mosaic superblock (not a member of any array)")))
            }
            None => {
                let why: Vec<String> = errs
                    .iter()
                    .filter_map(|e| match e {
                        SlotError::Corrupt(s) => Some(s.clone()),
                        SlotError::NoMagic => None,
                    })
                    .collect();
                Err(ArrayError::BadMember(format!("{who}: corrupt superblock: {}", why.join("; "))))
            }
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

/// Why one slot could not be used.
#[derive(Debug)]
pub enum SlotError {
    NoMagic,
    Corrupt(String),
}
