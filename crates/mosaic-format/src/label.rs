//! The one member label: the superblock format of every kind of array.
//!
//! Every member of every kind (a fixed layout's member, a DVS zoned
//! member, later a tier's or an adaptive layout's) starts with two label
//! slots.  A label is a [`crate::frame`] of kind [`KIND_LABEL`] whose
//! sequence number is the event counter and whose payload is JSON: the
//! fields every kind shares (identity, event counter, the identity
//! expected in each slot) plus a *policy blob*, the kind's own JSON.
//!
//! ```text
//!   member byte 0          64 KiB          128 KiB
//!   ├── slot 0 ────────────┼── slot 1 ──────┼── (the kind's own space) ...
//!
//!   slot: frame { magic "MOSF" | ver | kind 0x0200 | seq = events | len | crc32c
//!                 | JSON { kind, array_uuid, member_uuid, member_index, members,
//!                          events, member_uuids[], created, policy { ... },
//!                          session, prev_session } }
//!         padded with zeros to whole 4 KiB blocks
//! ```
//!
//! Slots are written alternately (slot = events mod 2), so a torn write of
//! one leaves the other; the newest valid slot wins.  Only the 4 KiB
//! blocks a label needs are read and written.  Freshness between members
//! is decided by the event counter, by one rule for every kind
//! ([`crate::fresh`]).

use std::io;

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::frame::{self, FrameError, KIND_LABEL};

/// Bytes reserved for each of the two slots.
pub const SLOT_SIZE: u64 = 64 << 10;
/// Bytes at the start of a member that belong to the labels.
pub const LABEL_AREA: u64 = 2 * SLOT_SIZE;
/// Slots are read and written in blocks of this size.
pub const SLOT_BLOCK: usize = 4096;

/// One member's label.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Label {
    /// The kind of array: `"fixed"`, `"dvs"`, ...
    pub kind: String,
    pub array_uuid: Uuid,
    /// This member's own identity (changes when a slot is replaced).
    pub member_uuid: Uuid,
    pub member_index: usize,
    pub members: usize,
    /// The event counter: bumped by every update of the array's state.
    pub events: u64,
    /// The identity expected in each slot, by index.
    pub member_uuids: Vec<Uuid>,
    /// Creation time, seconds since the Unix epoch.
    pub created: u64,
    /// What the kind needs beyond the shared fields.
    pub policy: serde_json::Value,
    /// The writable open whose writes this member carries: a new random
    /// value at the first label update of every writable open, so two
    /// copies of one array opened apart never share one ([`crate::fresh`]).
    /// Nil in labels written before sessions existed.
    #[serde(default, skip_serializing_if = "Uuid::is_nil")]
    pub session: Uuid,
    /// The session before `session` (a member that missed only the update
    /// starting `session`, in a crash, still carries this one).
    #[serde(default, skip_serializing_if = "Uuid::is_nil")]
    pub prev_session: Uuid,
}

/// Why a slot (or a member's pair of slots) holds no usable label.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LabelError {
    /// Blank, or not a frame at all: nothing of mosaic's is here.
    #[error("no label")]
    None,
    #[error("corrupt label: {0}")]
    Corrupt(String),
}

impl From<FrameError> for LabelError {
    fn from(e: FrameError) -> LabelError {
        match e {
            FrameError::BadMagic => LabelError::None,
            e => LabelError::Corrupt(e.to_string()),
        }
    }
}

impl Label {
    /// The slot this label is written to.
    pub fn slot(&self) -> u64 {
        self.events % 2
    }

    /// Encode into one slot's bytes: whole 4 KiB blocks, at most a slot.
    pub fn encode(&self) -> Result<Vec<u8>, LabelError> {
        let json = serde_json::to_vec(self).map_err(|e| LabelError::Corrupt(format!("encoding: {e}")))?;
        if frame::encoded_len(json.len()) as u64 > SLOT_SIZE {
            return Err(LabelError::Corrupt(format!(
                "a label of {} bytes does not fit a {SLOT_SIZE}-byte slot (too many members?)",
                json.len()
            )));
        }
        let mut b = frame::encode(KIND_LABEL, self.events, &json);
        b.resize(b.len().next_multiple_of(SLOT_BLOCK), 0);
        Ok(b)
    }

    /// Decode one slot's bytes.  Never panics: every length is checked.
    pub fn decode(buf: &[u8]) -> Result<Label, LabelError> {
        let f = frame::decode(buf)?.ok_or(LabelError::None)?;
        if f.kind != KIND_LABEL {
            return Err(LabelError::None);
        }
        let l: Label = serde_json::from_slice(&f.payload).map_err(|e| LabelError::Corrupt(format!("bad payload: {e}")))?;
        if l.events != f.seq {
            return Err(LabelError::Corrupt("event counter disagrees with the frame".into()));
        }
        l.validate().map_err(LabelError::Corrupt)?;
        Ok(l)
    }

    fn validate(&self) -> Result<(), String> {
        if self.kind.is_empty() {
            return Err("no kind".into());
        }
        if self.members == 0 || self.member_index >= self.members || self.member_uuids.len() != self.members {
            return Err(format!("member index {} or identities disagree with the member count {}", self.member_index, self.members));
        }
        Ok(())
    }

    /// The policy blob as the kind's own type.
    pub fn policy<T: serde::de::DeserializeOwned>(&self) -> Result<T, LabelError> {
        serde_json::from_value(self.policy.clone()).map_err(|e| LabelError::Corrupt(format!("{} policy: {e}", self.kind)))
    }
}

/// Read one slot: its first block, and the rest its frame header asks for.
fn read_slot(read: &mut dyn FnMut(&mut [u8], u64) -> io::Result<()>, slot: u64) -> io::Result<Vec<u8>> {
    let mut buf = vec![0u8; SLOT_BLOCK];
    read(&mut buf, slot * SLOT_SIZE)?;
    if let Ok(Some(len)) = frame::frame_len(&buf) {
        let want = (len as u64).min(SLOT_SIZE) as usize;
        let want = want.next_multiple_of(SLOT_BLOCK);
        if want > SLOT_BLOCK {
            buf.resize(want, 0);
            read(&mut buf[SLOT_BLOCK..], slot * SLOT_SIZE + SLOT_BLOCK as u64)?;
        }
    }
    Ok(buf)
}

/// The newest valid label of a device of `size` bytes, read through
/// `read(buf, offset)`.  `Err(LabelError::None)` when neither slot holds
/// anything of mosaic's; `Corrupt` names what is wrong with each slot.
pub fn read_label(size: u64, read: &mut dyn FnMut(&mut [u8], u64) -> io::Result<()>) -> io::Result<Result<Label, LabelError>> {
    if size < LABEL_AREA {
        return Ok(Err(LabelError::Corrupt(format!("too small ({size} bytes) to hold a label"))));
    }
    let mut best: Option<Label> = None;
    let mut why = Vec::new();
    for slot in 0..2 {
        match Label::decode(&read_slot(read, slot)?) {
            Ok(l) if best.as_ref().is_none_or(|b| l.events > b.events) => best = Some(l),
            Ok(_) | Err(LabelError::None) => {}
            Err(LabelError::Corrupt(s)) => why.push(format!("slot {slot}: {s}")),
        }
    }
    Ok(match best {
        Some(l) => Ok(l),
        None if why.is_empty() => Err(LabelError::None),
        None => Err(LabelError::Corrupt(why.join("; "))),
    })
}

/// Erase a device's label: a zeroed block over the start of each slot,
/// written through `write(buf, offset)`.  Both frames lose their magic, so
/// [`read_label`] finds nothing of mosaic's and [`has_label`] is false:
/// the device is free for any array again.  What a slot held past its
/// first block is left; nothing reads it without a frame header.
pub fn erase(write: &mut dyn FnMut(&[u8], u64) -> io::Result<()>) -> io::Result<()> {
    let zero = [0u8; SLOT_BLOCK];
    for slot in 0..2 {
        write(&zero, slot * SLOT_SIZE)?;
    }
    Ok(())
}

/// Remember `old` as the most recent member identity an array replaced,
/// in `replaced` (oldest first), keeping at most `max`: the list both
/// kinds of label carry, so a former member is known by identity.
pub fn note_replaced(replaced: &mut Vec<Uuid>, old: Uuid, max: usize) {
    replaced.retain(|u| *u != old);
    replaced.push(old);
    let over = replaced.len().saturating_sub(max);
    replaced.drain(..over);
}

/// Whether `head` (the first bytes of a device, at least [`LABEL_AREA`]
/// when it has them) carries a label in either slot, valid or damaged.
pub fn has_label(head: &[u8]) -> bool {
    [0, SLOT_SIZE as usize].iter().any(|&o| head.get(o..o + frame::HEADER_LEN).and_then(frame::peek_kind) == Some(KIND_LABEL))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn label(events: u64) -> Label {
        Label {
            kind: "fixed".into(),
            array_uuid: Uuid::from_u128(1),
            member_uuid: Uuid::from_u128(2),
            member_index: 1,
            members: 3,
            events,
            member_uuids: vec![Uuid::from_u128(9), Uuid::from_u128(2), Uuid::from_u128(8)],
            created: 7,
            policy: serde_json::json!({ "unit": 65536 }),
            session: Uuid::from_u128(5),
            prev_session: Uuid::nil(),
        }
    }

    fn dev() -> Vec<u8> {
        vec![0u8; LABEL_AREA as usize + 4096]
    }

    fn put(d: &mut [u8], l: &Label) {
        let b = l.encode().unwrap();
        let at = (l.slot() * SLOT_SIZE) as usize;
        d[at..at + b.len()].copy_from_slice(&b);
    }

    fn read(d: &[u8]) -> Result<Label, LabelError> {
        read_label(d.len() as u64, &mut |buf: &mut [u8], off| {
            buf.copy_from_slice(&d[off as usize..off as usize + buf.len()]);
            Ok(())
        })
        .unwrap()
    }

    #[test]
    fn the_newest_valid_slot_wins_and_a_torn_one_is_survived() {
        let mut d = dev();
        assert_eq!(read(&d), Err(LabelError::None));
        put(&mut d, &label(4));
        put(&mut d, &label(5));
        assert!(has_label(&d));
        assert_eq!(read(&d).unwrap().events, 5);
        d[SLOT_SIZE as usize + 100] ^= 1; // slot 1 (events 5) torn
        assert_eq!(read(&d).unwrap().events, 4);
        d[100] ^= 1; // both torn
        assert!(matches!(read(&d), Err(LabelError::Corrupt(_))));
        assert_eq!(label(6).policy::<serde_json::Value>().unwrap()["unit"], 65536);
    }

    #[test]
    fn an_erased_label_is_gone_from_both_slots() {
        let mut d = dev();
        let mut l = label(1);
        l.members = 255;
        l.member_index = 0;
        l.member_uuids = (0..255).map(Uuid::from_u128).collect();
        put(&mut d, &l);
        put(&mut d, &label(2));
        assert!(has_label(&d));
        erase(&mut |b: &[u8], off| {
            d[off as usize..off as usize + b.len()].copy_from_slice(b);
            Ok(())
        })
        .unwrap();
        assert!(!has_label(&d));
        assert_eq!(read(&d), Err(LabelError::None));
        // Only the slots' first blocks were written: the rest of a long label stays.
        assert!(d[SLOT_SIZE as usize + SLOT_BLOCK..2 * SLOT_SIZE as usize].iter().any(|&b| b != 0));
    }

    #[test]
    fn inconsistent_labels_are_refused() {
        let mut l = label(2);
        l.member_index = 3;
        assert!(matches!(Label::decode(&l.encode().unwrap()), Err(LabelError::Corrupt(_))));
        let mut l = label(2);
        l.member_uuids.pop();
        assert!(matches!(Label::decode(&l.encode().unwrap()), Err(LabelError::Corrupt(_))));
        let b = frame::encode(KIND_LABEL, 3, &serde_json::to_vec(&label(2)).unwrap());
        assert!(matches!(Label::decode(&b), Err(LabelError::Corrupt(_))));
        let b = frame::encode(frame::KIND_MAP_LABEL, 2, &serde_json::to_vec(&label(2)).unwrap());
        assert_eq!(Label::decode(&b), Err(LabelError::None));
    }

    #[test]
    fn a_large_label_spans_blocks_and_a_too_large_one_is_an_error() {
        let mut l = label(1);
        l.members = 255;
        l.member_index = 0;
        l.member_uuids = (0..255).map(Uuid::from_u128).collect();
        let b = l.encode().unwrap();
        assert!(b.len() > SLOT_BLOCK && b.len() % SLOT_BLOCK == 0);
        let mut d = dev();
        put(&mut d, &l);
        assert_eq!(read(&d).unwrap(), l);
        l.policy = serde_json::json!({ "pad": "x".repeat(SLOT_SIZE as usize) });
        assert!(l.encode().is_err());
    }
}
