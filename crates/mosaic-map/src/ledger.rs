//! The ledger: a checkpoint plus a delta log, crc-framed — how every
//! mapped layout keeps its tables durable.
//!
//! The block map keeps its extents in one; DVS keeps its tables (GTT, SIT,
//! member states, journal position) in one, mirrored on every metadata
//! member.  The ledger only does positions, framing and recovery: it
//! answers the writes to make ([`LedgerWrite`]) and the owner issues them
//! (the map on its device, DVS as programs on the one executor, so the
//! simulator sees the same operations).
//!
//! ```text
//!   slot 0 at slots[0]      slot 1 at slots[1]      log_start                    log_end
//!   ├ checkpoint c (parts) ┤├ checkpoint c' ...    ┤├ delta c+1 | delta c+2 | ... ┤
//!
//!   checkpoint part: frame { kind = checkpoint kind, seq = c,
//!                            payload = part u32 | parts u32 | body bytes }
//!   delta:           frame { kind = delta kind, seq = c+1, c+2, ..., payload = the owner's }
//! ```
//!
//! A checkpoint goes to the slot not holding the newest one, with the next
//! sequence number, and the log starts over at its beginning: frames left
//! there from the previous round have smaller sequence numbers, so replay
//! never takes them.  A body larger than one frame's payload is split into
//! parts, all with the checkpoint's sequence number.  Recovery = the valid
//! checkpoint with the highest sequence number whose body the owner
//! accepts, then the unbroken run of deltas that carry the next sequence
//! numbers.  Every length is checked; bad bytes end a run, never panic.

use crate::frame::{self, MAX_PAYLOAD, SECTOR};

/// Where a ledger lives: byte offsets on its device (or on each mirror).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LedgerLayout {
    pub slots: [u64; 2],
    pub slot_bytes: u64,
    pub log_start: u64,
    pub log_end: u64,
    /// Frame kinds of checkpoint parts and deltas.
    pub checkpoint_kind: u16,
    pub delta_kind: u16,
}

/// One write the owner must make durable: `bytes` at `offset`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LedgerWrite {
    pub offset: u64,
    pub bytes: Vec<u8>,
}

/// Bytes of a checkpoint part's header (part index, part count).
pub const PART_HEADER: usize = 8;
const PART_BODY: usize = MAX_PAYLOAD - PART_HEADER;

/// Bytes a checkpoint with a body of `body` bytes takes in its slot.
pub fn checkpoint_len(body: usize) -> u64 {
    let parts = body.div_ceil(PART_BODY).max(1);
    let last = body - (parts - 1) * PART_BODY;
    ((parts - 1) * frame::encoded_len(MAX_PAYLOAD) + frame::encoded_len(PART_HEADER + last)) as u64
}

/// Bytes a delta with a payload of `payload` bytes takes in the log.
pub fn delta_len(payload: usize) -> u64 {
    frame::encoded_len(payload) as u64
}

/// Positions: where the next delta and checkpoint go.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Ledger {
    pub layout: LedgerLayout,
    /// The sequence number of the last frame written (checkpoint or delta).
    pub seq: u64,
    /// Where the next delta goes.
    pub pos: u64,
    /// The slot holding the newest checkpoint.
    pub slot: usize,
}

/// What the owner asked for does not fit.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum LedgerError {
    #[error("checkpoint of {need} bytes does not fit its {have}-byte slot")]
    CheckpointTooLarge { need: u64, have: u64 },
    #[error("a delta of {0} bytes is larger than the whole log")]
    DeltaTooLarge(u64),
}

impl Ledger {
    /// A ledger about to write its first checkpoint (seq 1, slot 0).
    pub fn fresh(layout: LedgerLayout) -> Ledger {
        Ledger { layout, seq: 0, pos: layout.log_start, slot: 1 }
    }

    /// Whether a delta of `payload` bytes fits after the last one.
    pub fn fits(&self, payload: usize) -> bool {
        payload <= MAX_PAYLOAD && self.pos.saturating_add(delta_len(payload)) <= self.layout.log_end
    }

    /// The next delta: `None` when it does not fit (checkpoint first);
    /// an error when it could never fit.
    pub fn delta(&mut self, payload: &[u8]) -> Result<Option<LedgerWrite>, LedgerError> {
        if payload.len() > MAX_PAYLOAD || delta_len(payload.len()) > self.layout.log_end - self.layout.log_start {
            return Err(LedgerError::DeltaTooLarge(payload.len() as u64));
        }
        if !self.fits(payload.len()) {
            return Ok(None);
        }
        self.seq += 1;
        let bytes = frame::encode(self.layout.delta_kind, self.seq, payload);
        let offset = self.pos;
        self.pos += bytes.len() as u64;
        Ok(Some(LedgerWrite { offset, bytes }))
    }

    /// A checkpoint of `body` into the other slot; the log starts over.
    pub fn checkpoint(&mut self, body: &[u8]) -> Result<LedgerWrite, LedgerError> {
        let need = checkpoint_len(body.len());
        if need > self.layout.slot_bytes {
            return Err(LedgerError::CheckpointTooLarge { need, have: self.layout.slot_bytes });
        }
        self.seq += 1;
        self.slot = 1 - self.slot;
        self.pos = self.layout.log_start;
        let chunks: Vec<&[u8]> = if body.is_empty() { vec![&[]] } else { body.chunks(PART_BODY).collect() };
        let mut bytes = Vec::with_capacity(need as usize);
        for (i, c) in chunks.iter().enumerate() {
            let mut p = Vec::with_capacity(PART_HEADER + c.len());
            p.extend_from_slice(&(i as u32).to_le_bytes());
            p.extend_from_slice(&(chunks.len() as u32).to_le_bytes());
            p.extend_from_slice(c);
            bytes.extend_from_slice(&frame::encode(self.layout.checkpoint_kind, self.seq, &p));
        }
        Ok(LedgerWrite { offset: self.layout.slots[self.slot], bytes })
    }

    /// Recover from the bytes of both slots and of the log: the newest
    /// checkpoint whose body `load` accepts, then every delta in sequence
    /// `apply` accepts.  Returns the ledger positioned after the last
    /// delta, the state, and the number of deltas applied; `None` when no
    /// slot holds a checkpoint `load` accepts.
    pub fn recover<S>(
        layout: LedgerLayout,
        slots: [&[u8]; 2],
        log: &[u8],
        mut load: impl FnMut(&[u8]) -> Option<S>,
        mut apply: impl FnMut(&mut S, &[u8]) -> bool,
    ) -> Option<(Ledger, S, u64)> {
        let mut best: Option<(usize, u64, S)> = None;
        for (slot, b) in slots.iter().enumerate() {
            let Some((seq, body)) = read_checkpoint(b, layout.checkpoint_kind) else { continue };
            if best.as_ref().is_some_and(|b| b.1 >= seq) {
                continue;
            }
            if let Some(s) = load(&body) {
                best = Some((slot, seq, s));
            }
        }
        let (slot, mut seq, mut state) = best?;
        let (mut at, mut n) = (0usize, 0u64);
        while let Some((f, len)) = frame::decode_kind(log.get(at..).unwrap_or(&[]), layout.delta_kind) {
            if Some(f.seq) != seq.checked_add(1) || !apply(&mut state, &f.payload) {
                break;
            }
            seq = f.seq;
            at += len;
            n += 1;
        }
        Some((Ledger { layout, seq, pos: layout.log_start + at as u64, slot }, state, n))
    }
}

/// The sequence number and body of the checkpoint at the start of `b` (a
/// slot's bytes):
/// every part valid, in order, with one sequence number.
pub fn read_checkpoint(b: &[u8], kind: u16) -> Option<(u64, Vec<u8>)> {
    let (mut pos, mut part, mut parts) = (0usize, 0u32, 1u32);
    let mut seq = None;
    let mut body = Vec::new();
    // Each part takes at least a sector, so this ends within `b`.
    while part < parts {
        let (f, len) = frame::decode_kind(b.get(pos..)?, kind)?;
        let i = u32::from_le_bytes(f.payload.get(0..4)?.try_into().ok()?);
        let n = u32::from_le_bytes(f.payload.get(4..8)?.try_into().ok()?);
        if i != part || n == 0 || (part > 0 && n != parts) || seq.is_some_and(|s| s != f.seq) {
            return None;
        }
        (parts, seq) = (n, Some(f.seq));
        body.extend_from_slice(f.payload.get(PART_HEADER..)?);
        pos += len;
        part += 1;
    }
    debug_assert!(pos % SECTOR == 0);
    Some((seq?, body))
}

#[cfg(test)]
mod tests {
    use super::*;

    const L: LedgerLayout = LedgerLayout { slots: [0, 4096], slot_bytes: 4096, log_start: 8192, log_end: 8192 + 2048, checkpoint_kind: 0x77, delta_kind: 0x78 };

    /// A device image the writes land on.
    fn put(dev: &mut [u8], w: &LedgerWrite) {
        dev[w.offset as usize..w.offset as usize + w.bytes.len()].copy_from_slice(&w.bytes);
    }

    fn recover(dev: &[u8]) -> Option<(Ledger, Vec<u8>, u64)> {
        let slot = |i: usize| &dev[L.slots[i] as usize..(L.slots[i] + L.slot_bytes) as usize];
        Ledger::recover(L, [slot(0), slot(1)], &dev[L.log_start as usize..L.log_end as usize], |b| Some(b.to_vec()), |s, d| {
            s.extend_from_slice(d);
            true
        })
    }

    #[test]
    fn checkpoints_alternate_deltas_follow_and_recovery_finds_the_end() {
        let mut dev = vec![0u8; 16384];
        let mut l = Ledger::fresh(L);
        put(&mut dev, &l.checkpoint(b"A").unwrap());
        assert_eq!((l.seq, l.slot), (1, 0));
        for d in [b"b", b"c", b"d", b"e"] {
            put(&mut dev, &l.delta(d).unwrap().unwrap());
        }
        assert!(l.delta(&[0u8; 1000]).unwrap().is_none(), "the 2 KiB log is full");
        let (r, s, n) = recover(&dev).unwrap();
        assert_eq!((s.as_slice(), n), (&b"Abcde"[..], 4));
        assert_eq!(r, l);
        put(&mut dev, &l.checkpoint(b"Z").unwrap());
        assert_eq!((l.seq, l.slot, l.pos), (6, 1, L.log_start));
        // The old round's deltas are in the log still: older seqs, not taken.
        let (r, s, n) = recover(&dev).unwrap();
        assert_eq!((s.as_slice(), n, r.seq), (&b"Z"[..], 0, 6));
        put(&mut dev, &l.delta(b"y").unwrap().unwrap());
        // A torn newest checkpoint: the older one and what follows it in
        // the log, in sequence, up to where this round overwrote it.
        dev[4096 + 30] ^= 1;
        let (_, s, _) = recover(&dev).unwrap();
        assert_eq!(s, b"A");
        dev[30] ^= 1;
        assert!(recover(&dev).is_none());
    }

    #[test]
    fn too_large_is_an_error_and_empty_bodies_work() {
        let mut l = Ledger::fresh(L);
        assert!(matches!(l.checkpoint(&[0u8; 4096]), Err(LedgerError::CheckpointTooLarge { .. })));
        assert!(matches!(l.delta(&[0u8; 4096]), Err(LedgerError::DeltaTooLarge(_))));
        let mut dev = vec![0u8; 16384];
        put(&mut dev, &l.checkpoint(&[]).unwrap());
        assert_eq!(recover(&dev).unwrap().1, b"");
        assert_eq!(checkpoint_len(0), 512);
        assert_eq!(checkpoint_len(512 - 24 - 8), 512);
        assert_eq!(checkpoint_len(512 - 24 - 8 + 1), 1024);
    }
}
