//! A persistent, crash-safe block map: logical extent -> [`Placement`].
//!
//! Modelled on ZFS's indirect mapping (a table from old to new locations,
//! kept whole in memory, persisted as a checkpoint plus appended changes)
//! and md's superblock discipline (two slots written alternately, the
//! newest valid one wins).  The metadata device holds:
//!
//! ```text
//!  0        512                512+S               512+2S                    512+2S+L
//!  +--------+------------------+-------------------+-------------------------+
//!  | label  | checkpoint slot 0| checkpoint slot 1 | delta log: frames ...   |
//!  +--------+------------------+-------------------+-------------------------+
//!   written   one checkpoint frame each, written     DELTA frames, seq c+1,
//!   once at   alternately; the valid one with the   c+2, ... after checkpoint
//!   format    highest seq c wins                    c, appended, one per commit
//! ```
//!
//! Every box is a [`crate::frame`]: the label (kind `KIND_MAP_LABEL`) gives
//! the unit size and the sizes S and L; the slots and the log are a
//! [`crate::ledger`] (checkpoint parts of kind `KIND_MAP_CHECKPOINT`,
//! deltas of kind `KIND_MAP_DELTA`) whose bodies are records of 32 bytes
//! each:
//!
//! ```text
//!  0    1     2     3     4        8       12      16          24          32
//!  +----+-----+-----+-----+--------+-------+-------+-----------+-----------+
//!  | op |ptag | tier| 0   | member | zone  |   0   |  logical  |  offset   |
//!  +----+-----+-----+-----+--------+-------+-------+-----------+-----------+
//!  op:   1 map logical -> placement    2 unmap logical
//!        3 zone write pointer >= offset (allocator record)   4 zone reset
//!  ptag: 1 Member{member,offset}  2 Tier{tier,offset}  3 Zone{member,zone,offset}
//!  payload = count u32 | 0 u32 | count records
//! ```
//!
//! Protocol.  A commit encodes its updates as one DELTA frame with the next
//! seq, writes it at the log's end, flushes, and only then applies it in
//! memory: it is durable when `commit` returns.  Commits that arrive while
//! a frame is being written wait and then go out together, in one frame
//! and one flush (group commit).  When the frame does not
//! fit, a checkpoint of the whole map goes to the older slot first (write,
//! flush) and the log restarts at its beginning; frames left there from
//! the previous round have smaller seqs, so replay never takes them.
//! `open` loads the newest valid checkpoint and replays the log from its
//! start while each frame is valid, a DELTA, and carries the next seq.
//! After a failed device write the map refuses further commits (its
//! on-disk end is unknown until it is reopened).

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::io;
use std::sync::Arc;

use mosaic_dev::Member;
use parking_lot::{Condvar, Mutex, MutexGuard, RwLock};
use thiserror::Error;

use crate::frame::{self, FrameError, KIND_MAP_CHECKPOINT, KIND_MAP_DELTA, KIND_MAP_LABEL, SECTOR};
use crate::ledger::{self, Ledger, LedgerError, LedgerLayout, LedgerWrite};

/// Where a logical extent lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Placement {
    /// Not mapped: reads return zeros.
    Unmapped,
    /// Byte `offset` of array member `member`.
    Member { member: u32, offset: u64 },
    /// Byte `offset` of storage tier `tier` (e.g. 0 = SSD, 1 = HDD).
    Tier { tier: u8, offset: u64 },
    /// Byte `offset` inside zone `zone` of member `member`.
    Zone { member: u32, zone: u32, offset: u64 },
}

/// One change to the map.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Update {
    /// Map `logical` to `placement` (`Unmapped` removes it).
    Map { logical: u64, placement: Placement },
    /// Remove `logical`.
    Unmap { logical: u64 },
    /// Allocator record: zone's write pointer is at least `wp`.
    ZoneWp { member: u32, zone: u32, wp: u64 },
    /// Allocator record: the zone was reset (write pointer 0).
    ZoneReset { member: u32, zone: u32 },
}

/// The whole map as it stands: extents and the zone write pointers.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MapState {
    pub extents: BTreeMap<u64, Placement>,
    pub zone_wps: BTreeMap<(u32, u32), u64>,
}

impl MapState {
    /// Apply one update.
    pub fn apply(&mut self, u: &Update) {
        match *u {
            Update::Map { logical, placement: Placement::Unmapped } | Update::Unmap { logical } => {
                self.extents.remove(&logical);
            }
            Update::Map { logical, placement } => {
                self.extents.insert(logical, placement);
            }
            Update::ZoneWp { member, zone, wp } => {
                let w = self.zone_wps.entry((member, zone)).or_insert(0);
                *w = (*w).max(wp);
            }
            Update::ZoneReset { member, zone } => {
                self.zone_wps.insert((member, zone), 0);
            }
        }
    }

    /// The state as the records of a checkpoint.
    fn records(&self) -> Vec<Update> {
        let maps = self.extents.iter().map(|(&logical, &placement)| Update::Map { logical, placement });
        let wps = self.zone_wps.iter().map(|(&(member, zone), &wp)| Update::ZoneWp { member, zone, wp });
        maps.chain(wps).collect()
    }
}

/// What went wrong with the map.
#[derive(Debug, Error)]
pub enum MapError {
    #[error("metadata device I/O: {0}")]
    Io(#[from] io::Error),
    #[error("metadata frame: {0}")]
    Frame(#[from] FrameError),
    #[error("corrupt map metadata: {0}")]
    Corrupt(String),
    #[error("no valid map label (not formatted?)")]
    NoLabel,
    #[error("no valid checkpoint in either slot")]
    NoCheckpoint,
    #[error("checkpoint of {need} bytes does not fit its {have}-byte slot")]
    CheckpointTooLarge { need: usize, have: u64 },
    #[error("commit of {0} bytes larger than the whole log")]
    CommitTooLarge(usize),
    #[error("geometry does not fit the device: {0}")]
    Geometry(String),
    #[error("an earlier metadata write failed; reopen the map")]
    Poisoned,
}

impl MapError {
    /// The same error again, for every caller of a failed group commit.
    fn duplicate(&self) -> MapError {
        match self {
            MapError::Io(e) => MapError::Io(io::Error::new(e.kind(), e.to_string())),
            MapError::Frame(e) => MapError::Frame(e.clone()),
            MapError::Corrupt(s) => MapError::Corrupt(s.clone()),
            MapError::NoLabel => MapError::NoLabel,
            MapError::NoCheckpoint => MapError::NoCheckpoint,
            MapError::CheckpointTooLarge { need, have } => MapError::CheckpointTooLarge { need: *need, have: *have },
            MapError::CommitTooLarge(n) => MapError::CommitTooLarge(*n),
            MapError::Geometry(s) => MapError::Geometry(s.clone()),
            MapError::Poisoned => MapError::Poisoned,
        }
    }
}

/// Sizes fixed at format, kept in the label.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Geometry {
    /// Bytes of one logical unit (the map's granularity).
    pub unit: u64,
    /// Bytes of each checkpoint slot (S).
    pub slot_bytes: u64,
    /// Bytes of the delta log (L).
    pub log_bytes: u64,
}

impl Geometry {
    /// Checkpoint slots big enough for `max_records` records (mapped
    /// extents plus zones with a write pointer), and a log of `log_bytes`.
    pub fn sized_for(unit: u64, max_records: u64, log_bytes: u64) -> Geometry {
        let payload = max_records.saturating_mul(RECORD as u64).saturating_add(8);
        let slot_bytes = ledger::checkpoint_len(payload.min(usize::MAX as u64) as usize);
        Geometry { unit, slot_bytes, log_bytes: log_bytes.div_ceil(SECTOR as u64) * SECTOR as u64 }
    }

    /// Bytes of metadata device this geometry uses (label, slots, log).
    pub fn device_bytes(&self) -> u64 {
        self.end().unwrap_or(u64::MAX)
    }

    fn slot_offset(&self, slot: usize) -> u64 {
        SECTOR as u64 + slot as u64 * self.slot_bytes
    }
    fn log_offset(&self) -> u64 {
        SECTOR as u64 + 2 * self.slot_bytes
    }
    /// Where the ledger of checkpoints and deltas lives.
    fn ledger(&self) -> LedgerLayout {
        LedgerLayout {
            slots: [self.slot_offset(0), self.slot_offset(1)],
            slot_bytes: self.slot_bytes,
            log_start: self.log_offset(),
            log_end: self.log_offset() + self.log_bytes,
            checkpoint_kind: KIND_MAP_CHECKPOINT,
            delta_kind: KIND_MAP_DELTA,
        }
    }
    fn end(&self) -> Option<u64> {
        self.slot_bytes.checked_mul(2)?.checked_add(self.log_bytes)?.checked_add(SECTOR as u64)
    }
    fn encode(&self) -> Vec<u8> {
        [self.unit, self.slot_bytes, self.log_bytes].iter().flat_map(|v| v.to_le_bytes()).collect()
    }
    /// Decode and sanity-check a label payload against a device size.
    fn decode(p: &[u8], dev_size: u64) -> Result<Geometry, MapError> {
        let [unit, slot_bytes, log_bytes] = le_u64s::<3>(p).ok_or(MapError::Corrupt("label length".into()))?;
        let g = Geometry { unit, slot_bytes, log_bytes };
        g.check(dev_size)?;
        Ok(g)
    }
    #[allow(clippy::manual_is_multiple_of)] // is_multiple_of needs Rust 1.87; MSRV is 1.80
    fn check(&self, dev_size: u64) -> Result<(), MapError> {
        let sector = SECTOR as u64;
        let aligned = self.slot_bytes % sector == 0 && self.log_bytes % sector == 0;
        if self.unit == 0 || self.slot_bytes < sector || self.log_bytes < sector || !aligned {
            return Err(MapError::Geometry(format!("{self:?}: sizes must be non-zero multiples of {SECTOR}")));
        }
        match self.end() {
            Some(end) if end <= dev_size => Ok(()),
            _ => Err(MapError::Geometry(format!("{self:?} needs more than the device's {dev_size} bytes"))),
        }
    }
}

/// `N` little-endian u64s filling `p` exactly.
fn le_u64s<const N: usize>(p: &[u8]) -> Option<[u64; N]> {
    if p.len() != 8 * N {
        return None;
    }
    let mut out = [0u64; N];
    for (i, c) in p.chunks_exact(8).enumerate() {
        out[i] = u64::from_le_bytes(c.try_into().ok()?);
    }
    Some(out)
}

const RECORD: usize = 32;

/// Encode updates as a record payload (see the module picture).
pub fn encode_records(updates: &[Update]) -> Vec<u8> {
    let mut v = Vec::with_capacity(8 + updates.len() * RECORD);
    v.extend_from_slice(&(updates.len() as u32).to_le_bytes());
    v.extend_from_slice(&0u32.to_le_bytes());
    for u in updates {
        v.extend_from_slice(&encode_record(u));
    }
    v
}

fn encode_record(u: &Update) -> [u8; RECORD] {
    let (op, p, logical, zwp) = match *u {
        Update::Map { logical, placement: Placement::Unmapped } | Update::Unmap { logical } => (2, None, logical, None),
        Update::Map { logical, placement } => (1, Some(placement), logical, None),
        Update::ZoneWp { member, zone, wp } => (3, None, 0, Some((member, zone, wp))),
        Update::ZoneReset { member, zone } => (4, None, 0, Some((member, zone, 0))),
    };
    let (ptag, tier, member, zone, offset) = match (p, zwp) {
        (Some(Placement::Member { member, offset }), _) => (1, 0, member, 0, offset),
        (Some(Placement::Tier { tier, offset }), _) => (2, tier, 0, 0, offset),
        (Some(Placement::Zone { member, zone, offset }), _) => (3, 0, member, zone, offset),
        (_, Some((member, zone, wp))) => (0, 0, member, zone, wp),
        _ => (0, 0, 0, 0, 0),
    };
    let mut r = [0u8; RECORD];
    r[0] = op;
    r[1] = ptag;
    r[2] = tier;
    r[4..8].copy_from_slice(&member.to_le_bytes());
    r[8..12].copy_from_slice(&zone.to_le_bytes());
    r[16..24].copy_from_slice(&logical.to_le_bytes());
    r[24..32].copy_from_slice(&offset.to_le_bytes());
    r
}

/// Decode a record payload; every length and field is checked.
pub fn decode_records(p: &[u8]) -> Result<Vec<Update>, MapError> {
    let bad = |m: &str| MapError::Corrupt(m.to_string());
    let head = p.get(..8).ok_or_else(|| bad("record payload shorter than its count"))?;
    let count = u32::from_le_bytes([head[0], head[1], head[2], head[3]]) as usize;
    let body = &p[8..];
    if head[4..8] != [0; 4] || count.checked_mul(RECORD) != Some(body.len()) {
        return Err(bad("record count does not match the payload"));
    }
    body.chunks_exact(RECORD).map(decode_record).collect()
}

fn decode_record(r: &[u8]) -> Result<Update, MapError> {
    let u32at = |i: usize| u32::from_le_bytes([r[i], r[i + 1], r[i + 2], r[i + 3]]);
    let u64at = |i: usize| u64::from_le_bytes([r[i], r[i + 1], r[i + 2], r[i + 3], r[i + 4], r[i + 5], r[i + 6], r[i + 7]]);
    let (op, ptag, tier, member, zone, logical, offset) = (r[0], r[1], r[2], u32at(4), u32at(8), u64at(16), u64at(24));
    let reserved_zero = r[3] == 0 && u32at(12) == 0;
    let placement = match (ptag, tier, member, zone) {
        (1, 0, member, 0) => Some(Placement::Member { member, offset }),
        (2, tier, 0, 0) => Some(Placement::Tier { tier, offset }),
        (3, 0, member, zone) => Some(Placement::Zone { member, zone, offset }),
        _ => None,
    };
    let plain = ptag == 0 && tier == 0;
    let u = match op {
        1 => placement.map(|placement| Update::Map { logical, placement }),
        2 if plain && member == 0 && zone == 0 && offset == 0 => Some(Update::Unmap { logical }),
        3 if plain && logical == 0 => Some(Update::ZoneWp { member, zone, wp: offset }),
        4 if plain && logical == 0 && offset == 0 => Some(Update::ZoneReset { member, zone }),
        _ => None,
    };
    match u {
        Some(u) if reserved_zero => Ok(u),
        _ => Err(MapError::Corrupt(format!("bad map record (op {op}, placement tag {ptag})"))),
    }
}

/// Decode a checkpoint payload into the state it holds: only map and
/// zone-pointer records, each logical extent and each zone at most once.
pub fn decode_checkpoint(p: &[u8]) -> Result<MapState, MapError> {
    let mut s = MapState::default();
    for u in decode_records(p)? {
        let fresh = match u {
            Update::Map { logical, placement } => s.extents.insert(logical, placement).is_none(),
            Update::ZoneWp { member, zone, wp } => s.zone_wps.insert((member, zone), wp).is_none(),
            _ => false,
        };
        if !fresh {
            return Err(MapError::Corrupt(format!("checkpoint record {u:?} repeated or not allowed")));
        }
    }
    Ok(s)
}

/// Read the frame at `off`, reading no further than `end`.
fn read_frame(dev: &dyn Member, off: u64, end: u64) -> Result<Option<frame::Frame>, MapError> {
    if off + SECTOR as u64 > end {
        return Ok(None);
    }
    let mut head = vec![0u8; SECTOR];
    dev.read_at(&mut head, off)?;
    let Some(len) = frame::frame_len(&head)? else { return Ok(None) };
    if off + len as u64 > end {
        return Err(FrameError::Truncated { need: len, have: (end - off) as usize }.into());
    }
    let mut buf = head;
    buf.resize(len, 0);
    dev.read_at(&mut buf[SECTOR..], off + SECTOR as u64)?;
    Ok(frame::decode(&buf)?)
}

fn map_err(e: LedgerError) -> MapError {
    match e {
        LedgerError::CheckpointTooLarge { need, have } => MapError::CheckpointTooLarge { need: need as usize, have },
        LedgerError::DeltaTooLarge(n) => MapError::CommitTooLarge(n as usize),
    }
}

/// Counters, for tests and `info`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MapStats {
    /// `commit` calls that succeeded or failed.
    pub commits: u64,
    /// Delta frames written (fewer than commits when they were grouped).
    pub frames: u64,
    pub checkpoints: u64,
    /// Delta frames replayed by the `open` that made this map.
    pub replayed: u64,
}

/// Commits waiting for a leader to write them (tickets in order).
#[derive(Default)]
struct Queue {
    waiting: VecDeque<(u64, Vec<Update>)>,
    next_ticket: u64,
    /// Every ticket up to this one has been written (or has failed).
    done: u64,
    failed: HashMap<u64, MapError>,
    leading: bool,
    commits: u64,
}

/// Where the next writes go.
struct Log {
    ledger: Ledger,
    poisoned: bool,
    stats: MapStats,
}

/// The persistent block map.
pub struct BlockMap {
    dev: Arc<dyn Member>,
    geo: Geometry,
    log: Mutex<Log>,
    state: RwLock<MapState>,
    queue: Mutex<Queue>,
    wake: Condvar,
}

impl BlockMap {
    /// Write a fresh, empty map on `dev`: the label, then checkpoint 1.
    pub fn format(dev: Arc<dyn Member>, geo: Geometry) -> Result<BlockMap, MapError> {
        geo.check(dev.size())?;
        dev.write_at(&frame::encode(KIND_MAP_LABEL, 0, &geo.encode()), 0)?;
        let log = Log { ledger: Ledger::fresh(geo.ledger()), poisoned: false, stats: MapStats::default() };
        let map = Self::assemble(dev, geo, log, MapState::default());
        map.checkpoint_locked(&mut map.log.lock())?;
        Ok(map)
    }

    /// Open the map on `dev`: newest valid checkpoint, then the log.
    pub fn open(dev: Arc<dyn Member>) -> Result<BlockMap, MapError> {
        let label = read_frame(&*dev, 0, SECTOR as u64).ok().flatten();
        let label = label.filter(|f| f.kind == KIND_MAP_LABEL).ok_or(MapError::NoLabel)?;
        let geo = Geometry::decode(&label.payload, dev.size())?;
        let l = geo.ledger();
        let read = |off: u64, len: u64| -> Result<Vec<u8>, MapError> {
            let mut b = vec![0u8; len as usize];
            dev.read_at(&mut b, off)?;
            Ok(b)
        };
        let (s0, s1) = (read(l.slots[0], l.slot_bytes)?, read(l.slots[1], l.slot_bytes)?);
        let log = read(l.log_start, l.log_end - l.log_start)?;
        let apply = |s: &mut MapState, p: &[u8]| decode_records(p).map(|ups| ups.iter().for_each(|u| s.apply(u))).is_ok();
        let (ledger, state, replayed) = Ledger::recover(l, [&s0, &s1], &log, |b| decode_checkpoint(b).ok(), apply).ok_or(MapError::NoCheckpoint)?;
        let stats = MapStats { replayed, ..MapStats::default() };
        Ok(Self::assemble(dev, geo, Log { ledger, poisoned: false, stats }, state))
    }

    fn assemble(dev: Arc<dyn Member>, geo: Geometry, log: Log, state: MapState) -> BlockMap {
        let queue = Queue { next_ticket: 1, ..Queue::default() };
        BlockMap { dev, geo, log: Mutex::new(log), state: RwLock::new(state), queue: Mutex::new(queue), wake: Condvar::new() }
    }

    /// Make `updates` durable, then apply them; all-or-nothing.  Callers
    /// that commit at the same time share one frame and one flush (group
    /// commit): the first becomes the leader and writes everyone waiting.
    pub fn commit(&self, updates: &[Update]) -> Result<(), MapError> {
        let payload = 8 + updates.len().saturating_mul(RECORD);
        if frame::encoded_len(payload) as u64 > self.geo.log_bytes || payload > frame::MAX_PAYLOAD {
            return Err(MapError::CommitTooLarge(payload));
        }
        let mut q = self.queue.lock();
        let ticket = q.next_ticket;
        q.next_ticket += 1;
        q.waiting.push_back((ticket, updates.to_vec()));
        loop {
            if q.done >= ticket {
                return q.failed.remove(&ticket).map_or(Ok(()), Err);
            }
            if q.leading {
                self.wake.wait(&mut q);
            } else {
                self.lead(&mut q);
            }
        }
    }

    /// As leader: write the waiting commits that fit one frame, as one.
    fn lead(&self, q: &mut MutexGuard<'_, Queue>) {
        q.leading = true;
        let mut group: Vec<(u64, Vec<Update>)> = Vec::new();
        let mut records = 0;
        while let Some((_, u)) = q.waiting.front() {
            let fits = frame::encoded_len(8 + (records + u.len()) * RECORD) as u64 <= self.geo.log_bytes;
            if !group.is_empty() && !fits {
                break;
            }
            records += u.len();
            group.extend(q.waiting.pop_front());
        }
        let all: Vec<Update> = group.iter().flat_map(|(_, u)| u.iter().copied()).collect();
        let r = MutexGuard::unlocked(q, || self.write_frame(&all));
        if let Err(e) = r {
            for (t, _) in &group {
                q.failed.insert(*t, e.duplicate());
            }
        }
        q.done = group.last().map_or(q.done, |g| g.0);
        q.commits += group.len() as u64;
        q.leading = false;
        self.wake.notify_all();
    }

    /// One DELTA frame of `updates` at the log's end (checkpointing first
    /// when it does not fit), flushed, then applied in memory.
    fn write_frame(&self, updates: &[Update]) -> Result<(), MapError> {
        let mut log = self.log.lock();
        if log.poisoned {
            return Err(MapError::Poisoned);
        }
        let payload = encode_records(updates);
        let w = match log.ledger.delta(&payload).map_err(map_err)? {
            Some(w) => w,
            None => {
                self.checkpoint_locked(&mut log)?;
                log.ledger.delta(&payload).map_err(map_err)?.ok_or(MapError::CommitTooLarge(payload.len()))?
            }
        };
        self.durable_write(&mut log, &w)?;
        let mut state = self.state.write();
        updates.iter().for_each(|u| state.apply(u));
        log.stats.frames += 1;
        Ok(())
    }

    /// Write and flush, poisoning the map on failure.
    fn durable_write(&self, log: &mut Log, w: &LedgerWrite) -> Result<(), MapError> {
        let r = self.dev.write_at(&w.bytes, w.offset).and_then(|_| self.dev.flush());
        log.poisoned |= r.is_err();
        Ok(r?)
    }

    /// Take a checkpoint now (the log restarts empty).
    pub fn checkpoint(&self) -> Result<(), MapError> {
        let mut log = self.log.lock();
        if log.poisoned {
            return Err(MapError::Poisoned);
        }
        self.checkpoint_locked(&mut log)
    }

    fn checkpoint_locked(&self, log: &mut Log) -> Result<(), MapError> {
        let payload = encode_records(&self.state.read().records());
        let mut ledger = log.ledger.clone();
        let w = ledger.checkpoint(&payload).map_err(map_err)?;
        log.ledger = ledger;
        self.durable_write(log, &w)?;
        log.stats.checkpoints += 1;
        Ok(())
    }

    /// Where `logical` lives now.
    pub fn get(&self, logical: u64) -> Placement {
        self.state.read().extents.get(&logical).copied().unwrap_or(Placement::Unmapped)
    }

    /// A copy of the whole state.
    pub fn snapshot(&self) -> MapState {
        self.state.read().clone()
    }

    /// The sizes the label gives.
    pub fn geometry(&self) -> Geometry {
        self.geo
    }

    /// Commits, frames and checkpoints so far.
    pub fn stats(&self) -> MapStats {
        MapStats { commits: self.queue.lock().commits, ..self.log.lock().stats }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mosaic_dev::MemMember;

    const GEO: Geometry = Geometry { unit: 4096, slot_bytes: 8192, log_bytes: 4096 };

    fn dev() -> Arc<MemMember> {
        Arc::new(MemMember::new("meta", 64 << 10))
    }

    fn m(logical: u64, offset: u64) -> Update {
        Update::Map { logical, placement: Placement::Member { member: (logical % 3) as u32, offset } }
    }

    #[test]
    fn every_update_kind_round_trips_through_records() {
        let ups = vec![
            m(5, 4096),
            Update::Map { logical: 6, placement: Placement::Tier { tier: 1, offset: 8192 } },
            Update::Map { logical: 7, placement: Placement::Zone { member: 2, zone: 9, offset: 512 } },
            Update::Unmap { logical: 5 },
            Update::ZoneWp { member: 2, zone: 9, wp: 1024 },
            Update::ZoneReset { member: 1, zone: 3 },
        ];
        assert_eq!(decode_records(&encode_records(&ups)).unwrap(), ups);
    }

    #[test]
    fn commits_survive_reopen_and_checkpoints_roll_the_log() {
        let d = dev();
        let map = BlockMap::format(d.clone(), GEO).unwrap();
        // Each commit is one 512-byte frame; the 4 KiB log holds 8.
        for i in 0..20 {
            map.commit(&[m(i, i * 4096)]).unwrap();
        }
        map.commit(&[Update::Unmap { logical: 3 }, Update::ZoneWp { member: 0, zone: 1, wp: 77 }]).unwrap();
        assert_eq!(map.stats().checkpoints, 3, "format + two log roll-overs");
        let want = map.snapshot();
        assert_eq!(want.extents.len(), 19);
        let again = BlockMap::open(d).unwrap();
        assert_eq!(again.snapshot(), want);
        assert_eq!(again.get(3), Placement::Unmapped);
        assert_eq!(again.get(4), Placement::Member { member: 1, offset: 4 * 4096 });
        assert_eq!(again.stats().replayed, 5);
    }

    #[test]
    fn torn_newest_checkpoint_falls_back_to_the_older_slot_and_its_log() {
        let d = dev();
        let map = BlockMap::format(d.clone(), GEO).unwrap();
        map.commit(&[m(1, 0)]).unwrap();
        let before = d.snapshot();
        map.checkpoint().unwrap(); // slot 1, seq 3; the log restarts
        map.commit(&[m(2, 4096)]).unwrap();
        // Tear the newest checkpoint: the older one plus its log is what
        // the device held before it, so put the old log back too.
        let mut bytes = d.snapshot();
        let slot1 = GEO.slot_offset(1) as usize;
        bytes[slot1 + 30] ^= 0xff;
        let log = GEO.log_offset() as usize;
        bytes[log..log + 4096].copy_from_slice(&before[log..log + 4096]);
        d.restore(bytes);
        let again = BlockMap::open(d).unwrap();
        assert_eq!(again.get(1), Placement::Member { member: 1, offset: 0 });
        assert_eq!(again.get(2), Placement::Unmapped);
    }

    #[test]
    fn replay_stops_at_a_damaged_frame_or_a_sequence_gap() {
        let d = dev();
        let map = BlockMap::format(d.clone(), GEO).unwrap();
        for i in 0..4 {
            map.commit(&[m(i, i)]).unwrap();
        }
        let log = GEO.log_offset();
        d.corrupt(log + 2 * 512 + 40, 1); // third frame's payload
        let again = BlockMap::open(d.clone()).unwrap();
        assert_eq!(again.snapshot().extents.keys().copied().collect::<Vec<_>>(), vec![0, 1]);
        // A stale frame from an older round (smaller seq) is a gap too.
        again.commit(&[m(9, 9)]).unwrap();
        let mut stale = frame::encode(KIND_MAP_DELTA, 1, &encode_records(&[m(50, 0)]));
        stale.truncate(512);
        d.write_at(&stale, log + 3 * 512).unwrap();
        let third = BlockMap::open(d).unwrap();
        assert_eq!(third.snapshot().extents.keys().copied().collect::<Vec<_>>(), vec![0, 1, 9]);
    }

    /// A member whose flush takes a while, so concurrent commits pile up.
    struct Slow(Arc<MemMember>);

    impl Member for Slow {
        fn describe(&self) -> String {
            self.0.describe()
        }
        fn size(&self) -> u64 {
            self.0.size()
        }
        fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
            self.0.read_at(buf, offset)
        }
        fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
            self.0.write_at(buf, offset)
        }
        fn flush(&self) -> io::Result<()> {
            std::thread::sleep(std::time::Duration::from_millis(2));
            Ok(())
        }
    }

    #[test]
    fn concurrent_commits_share_frames_and_all_survive() {
        let d = dev();
        let geo = Geometry { unit: 4096, slot_bytes: 8192, log_bytes: 8192 };
        let map = BlockMap::format(Arc::new(Slow(d.clone())), geo).unwrap();
        std::thread::scope(|s| {
            for t in 0..6u64 {
                let map = &map;
                s.spawn(move || (0..20).for_each(|i| map.commit(&[m(t * 100 + i, i)]).unwrap()));
            }
        });
        let st = map.stats();
        assert_eq!((st.commits, map.snapshot().extents.len()), (120, 120));
        assert!(st.frames < 100, "concurrent commits must share frames: {} frames", st.frames);
        assert_eq!(BlockMap::open(d).unwrap().snapshot(), map.snapshot());
    }

    #[test]
    fn oversized_checkpoints_and_bad_geometry_are_errors() {
        let d = dev();
        assert!(matches!(BlockMap::format(d.clone(), Geometry { unit: 0, ..GEO }), Err(MapError::Geometry(_))));
        let big = Geometry { unit: 1, slot_bytes: 1 << 20, log_bytes: 512 };
        assert!(matches!(BlockMap::format(d.clone(), big), Err(MapError::Geometry(_))));
        let tight = Geometry::sized_for(1, 14, 1000);
        assert_eq!(tight, Geometry { unit: 1, slot_bytes: 512, log_bytes: 1024 });
        assert_eq!(Geometry::sized_for(1, 15, 1024).slot_bytes, 1024);
        assert_eq!(tight.device_bytes(), 512 + 2 * 512 + 1024);
        let map = BlockMap::format(d.clone(), tight).unwrap();
        // 14 records fit a 512-byte slot: frame header 24 + part header 8
        // + count 8 + 14 * 32 = 488.
        let ups: Vec<Update> = (0..14).map(|i| m(i, i)).collect();
        map.commit(&ups).unwrap();
        map.commit(&[m(100, 1)]).unwrap();
        assert!(matches!(map.commit(&[m(101, 1)]), Err(MapError::CheckpointTooLarge { .. })));
        assert!(matches!(BlockMap::open(Arc::new(MemMember::new("blank", 1 << 16))), Err(MapError::NoLabel)));
    }
}
