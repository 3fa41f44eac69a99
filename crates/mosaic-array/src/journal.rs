//! The write-ahead journal: how mosaic closes the RAID write hole.
//!
//! A stripe write changes several members (data units and code units), and
//! no drive can change them atomically.  A crash part-way leaves code that
//! disagrees with the data; if a member then fails, the blocks rebuilt from
//! that code are wrong, although nobody was writing them: the *write hole*.
//!
//! Like md's raid5-cache in write-through mode, mosaic first writes every
//! device operation of a write — the new data units *and* the new code units,
//! exactly as the planner computed them — as one checksummed record to a
//! journal device, makes it durable, and only then writes the members:
//!
//! ```text
//!   Array::write ─ plan ─ reads ─ compute ─┬─ journal: append record, fdatasync (group commit)
//!                                          └─ members: write data + code units ─ ack
//!
//!   journal device (a file or a fast device):
//!   0        4 KiB                                                    size
//!   ├ header ┼ record seq=c ┼ record c+1 ┼ ... ┼ (older, superseded) ┤
//!
//!   header: frame { kind 0x0100 | seq = checkpoint | version u32 (3; 1, 2 are read too) | array uuid | size u64
//!                   | session uuid (version 3) }
//!   record: frame { "MOSF" | ver | kind 0x0101 | seq | len | crc32c | payload [len] } 0 pad to 512
//!   payload:
//!     ┌ count u32 ┬ table crc32c u32 ┬ count × entry (24 bytes) ────────┬ bytes ──────────┐
//!     │           │ (count + entries)│ tag u32 | member u32 | at u64 |  │ of the device   │
//!     │           │                  │ len u64                          │ and logical     │
//!     │           │                  │                                  │ writes, in entry│
//!     └───────────┴──────────────────┴──────────────────────────────────┴ order ──────────┘
//!   entries ([`Entry`]):
//!     1 device write   member, at = member offset, len bytes
//!     2 logical write  at = array offset, len bytes (a client write a cache volume holds)
//!     3 resync         at = stripe row whose code replay recomputes from its data, len 0
//!     4 device copy    member, at = member offset, len bytes written; 16 bytes in the
//!                      payload: the seq and array offset of a logical write (entry 2)
//!                      of an earlier record since the checkpoint that holds the bytes
//! ```
//!
//! Records and the header are frames of the one codec
//! ([`mosaic_format::frame`]); the frame's crc32c covers a record's header
//! fields and its whole payload.  The entry table comes first in the
//! payload and carries its own crc32c, so where a damaged record wrote is
//! known whenever its table survived, even if its bytes did not: the
//! table is trusted when its checksum holds and its lengths add up to the
//! payload length in the frame header ([`decode_entry_table`], which reads
//! the frame header's length and sequence fields without checking the
//! frame's magic or checksum).
//!
//! Open replays, in order, every valid record from the header's checkpoint
//! sequence on (each must carry the next sequence number; the first that
//! does not, or fails its checksum, ends the log), writing its device
//! writes to the members that are in service, flushes the members, and
//! moves the checkpoint past them.  Replaying a record twice is harmless:
//! it writes the same bytes to the same places.  After replay every stripe
//! a crash interrupted holds the new data and matching code, so scrub is
//! clean and a later member failure rebuilds every block correctly.
//! Resync entries and logical writes are the cache volume's
//! ([`crate::cached`]): replay recomputes the code of the rows they name
//! and then applies the logical writes in order.  A cache volume destaging
//! a page whose bytes a logical write since the checkpoint holds logs a
//! *copy* instead of the bytes again; open resolves every copy into the
//! device write it stands for, so replay applies the same bytes as if the
//! record had carried them.  A copy whose source is not among the valid
//! records (damage) makes its own record damaged, its places known.
//! Copies came with header version 2: older code refuses such a journal
//! instead of taking its records for damage; version 1 journals still
//! open.
//!
//! Version 3 names the session of the array that writes the journal (its
//! members' [`mosaic_format::label::Label::session`]), set durably when a
//! writable open starts its session and before it appends a record.  An
//! array opens a journal only when its members carry that session or the
//! one before it: two copies of an array that share an external journal
//! (`cp -r A B; mv A C`: neither is then the other's copy by its path)
//! never replay each other's records.  The first to write takes the
//! journal; the other is refused it.
//!
//! A record that fails its checks is not always the end: when valid records
//! with later sequence numbers follow it (found by scanning on, 512 bytes
//! at a time, until a valid record of an older generation or the end of the
//! ring), the record was *damaged*, and the members may already hold what
//! the later records wrote.  Replay then applies the valid records on both
//! sides of it, but never an older record over a place the damaged record
//! wrote ([`JournalLog::replayable`]): where its entry table is still
//! readable those places are clipped out of older entries; where it is not,
//! older records are held back whole.  A record that fails its checks where
//! the log ends but still carries the sequence number expected there is the
//! *tail*: torn by the crash (never acknowledged: older records must be
//! applied whole, as always) or damaged; it is reported too.  The
//! [`ReplayReport`] names the damaged, held-back and tail records with the
//! stripes they touched, and [`ReplayReport::warning`] tells the user to
//! scrub them.
//!
//! Every length, offset and count read from the device is checked against
//! the buffer and the device before use; [`decode_header`],
//! [`decode_record`] and [`decode_entry_table`] are the parsers `open`
//! uses, public so that they can be fuzzed.
//!
//! When the ring is full the journal *checkpoints*: it waits until every
//! write in flight has reached the members, flushes them, and starts over
//! at the front with the checkpoint sequence moved on.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use parking_lot::Mutex;
use uuid::Uuid;

use mosaic_core::{Geometry, Level};
use mosaic_dev::Member;
use mosaic_format::frame::{self, FrameError, KIND_JOURNAL_HEADER};
use mosaic_format::journal::{frame_seq, is_record_header, le32, le64, record_payload_len, record_raw_len, ENTRY, TABLE_HEAD};
pub use mosaic_format::journal::{decode_entry_table, decode_record, encode_record, encode_record_unsealed, Entry, Extent};

use crate::ArrayError;

/// The version of the header's payload.  Version 3 headers name the
/// session of the array that writes the journal
/// ([`mosaic_format::label::Label::session`]); version 2 journals may hold
/// copy entries ([`Entry::Copy`]); version 1 journals (which cannot) are
/// read as before.
const VERSION: u32 = 3;
/// The oldest header version this code reads.
const OLDEST_VERSION: u32 = 1;
/// The header block; records start after it.
pub const HEADER_BYTES: u64 = 4096;
/// Bytes of the header's payload: version, array UUID, size, session
/// (versions 1 and 2 end before the session).
const HEADER_PAYLOAD: usize = 44;
const OLD_HEADER_PAYLOAD: usize = 28;
/// Records are frames, padded to and aligned on this many bytes.
const ALIGN: u64 = frame::SECTOR as u64;
/// Records to replay, with their sequence numbers, in order.
pub type Records = Vec<(u64, Vec<Entry>)>;

/// The smallest journal that makes sense.
pub const MIN_JOURNAL: u64 = 1 << 20;
/// The largest checkpoint sequence a header may carry (records then have
/// room for 2^63 more numbers).
const MAX_SEQ: u64 = u64::MAX / 2;
/// Bytes read at a time when scanning past a damaged record.
const SCAN_CHUNK: u64 = 1 << 20;
/// Stripes a warning lists of one record before it only counts them.
const LISTED_STRIPES: usize = 16;

struct Ring {
    /// Next byte to append at.
    tail: u64,
    /// Sequence number of the next record.
    next_seq: u64,
    /// Sequence of the first record in the ring (the checkpoint).
    checkpoint: u64,
    /// Bytes of the ring in use had every copy entry carried its bytes.
    expanded: u64,
    /// The session of the array writing the journal, as its header says.
    session: Uuid,
}

/// A journal device attached to an array.
pub struct Journal {
    dev: Arc<dyn Member>,
    /// The device's size, read once: every append checks the ring's end,
    /// and asking a RAM member takes its lock, the line every append to it
    /// writes.
    size: u64,
    uuid: Uuid,
    ring: Mutex<Ring>,
    /// Serialises fdatasync; records up to `durable` are on stable storage.
    sync: Mutex<()>,
    durable: AtomicU64,
    appended: AtomicU64,
    /// The first error of the journal device, sticky ([`Journal::failed`]).
    failed: OnceLock<String>,
    /// Counters for tests and `info`.
    pub records: AtomicU64,
    pub syncs: AtomicU64,
    pub checkpoints: AtomicU64,
}

/// A record that failed its checks although valid records with later
/// sequence numbers follow it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DamagedRecord {
    pub seq: u64,
    /// Where it wrote, when its entry table is still readable and agrees
    /// with its payload length and its place in the ring.
    pub entries: Option<Vec<Extent>>,
}

/// What [`Journal::open`] found from the checkpoint on.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct JournalLog {
    /// Valid records, in sequence order.
    pub records: Records,
    /// Damaged records between valid ones, in sequence order.
    pub damaged: Vec<DamagedRecord>,
    /// The record where the log ends, when it failed its checks although
    /// its header still carries the sequence number expected there:
    /// damaged, or torn by the crash (then it was never acknowledged).
    /// Nothing valid follows it, so older records are applied whole.
    pub tail: Option<DamagedRecord>,
}

impl JournalLog {
    /// Records found, valid or damaged.
    pub fn len(&self) -> usize {
        self.records.len() + self.damaged.len() + usize::from(self.tail.is_some())
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The records to apply, in order, each entry clipped so that it
    /// never writes a place that a later damaged record wrote; and the
    /// records held back whole because a later damaged record's places are
    /// unknown (with where they would have written, for the report).
    pub fn replayable(&self) -> (Records, Vec<(u64, Vec<Extent>)>) {
        let (mut apply, mut held) = (Vec::new(), Vec::new());
        for (seq, entries) in &self.records {
            let later: Vec<&DamagedRecord> = self.damaged.iter().filter(|d| d.seq > *seq).collect();
            if later.iter().any(|d| d.entries.is_none()) {
                held.push((*seq, entries.iter().map(Entry::extent).collect()));
                continue;
            }
            let guard: Vec<Extent> = later.iter().flat_map(|d| d.entries.iter().flatten().copied()).collect();
            apply.push((*seq, entries.iter().flat_map(|e| clip(e, &guard)).collect()));
        }
        (apply, held)
    }

    /// What replay applies to an array of geometry `geo`: the records of
    /// [`JournalLog::replayable`] (after forgetting entry tables that name
    /// places outside the array: they are damaged too), and a report that
    /// names the damaged, held-back and tail records with their stripes.
    pub fn plan(mut self, geo: &Geometry) -> (Records, ReplayReport) {
        for d in self.damaged.iter_mut().chain(self.tail.as_mut()) {
            if d.entries.as_ref().is_some_and(|es| !es.iter().all(|e| inside(geo, e))) {
                d.entries = None;
            }
        }
        let named = |seq: u64, es: Option<&Vec<Extent>>| RecordStripes {
            seq,
            stripes: es.map(|es| es.iter().flat_map(|e| stripes_of(geo, e)).collect::<std::collections::BTreeSet<u64>>().into_iter().collect()),
        };
        let (records, held) = self.replayable();
        let rep = ReplayReport {
            damaged: self.damaged.iter().map(|d| named(d.seq, d.entries.as_ref())).collect(),
            held_back: held.iter().map(|(seq, es)| named(*seq, Some(es))).collect(),
            tail: self.tail.as_ref().map(|t| named(t.seq, t.entries.as_ref())),
            ..ReplayReport::default()
        };
        (records, rep)
    }
}

/// Turn every copy entry of the valid records into the device write it
/// stands for, with the bytes of the logical write it names (in an
/// earlier record of the log).  A record with a copy that cannot be
/// resolved (the record it names is damaged, or holds no such bytes) is
/// damaged itself, its places known: replay skips it and keeps older
/// records off them, as for any damaged record.
fn resolve_copies(log: &mut JournalLog) {
    let mut i = 0;
    while i < log.records.len() {
        let (earlier, rest) = log.records.split_at_mut(i);
        let rec = &mut rest[0];
        let mut ok = true;
        for e in rec.1.iter_mut() {
            if let Entry::Copy { member, offset, len, seq, from } = *e {
                match copied(earlier, seq, from, len) {
                    Some(data) => *e = Entry::Device { member, offset, data },
                    None => ok = false,
                }
            }
        }
        if ok {
            i += 1;
            continue;
        }
        let (seq, es) = log.records.remove(i);
        let at = log.damaged.partition_point(|d| d.seq < seq);
        log.damaged.insert(at, DamagedRecord { seq, entries: Some(es.iter().map(Entry::extent).collect()) });
    }
}

/// The `len` bytes at logical offset `from` that a logical write of
/// record `seq` among `records` holds.
fn copied(records: &[(u64, Vec<Entry>)], seq: u64, from: u64, len: u64) -> Option<Vec<u8>> {
    let r = records.binary_search_by_key(&seq, |r| r.0).ok()?;
    records[r].1.iter().find_map(|e| match e {
        Entry::Logical { offset, data } if from >= *offset && (from - offset).checked_add(len).is_some_and(|end| end <= data.len() as u64) => {
            let s = (from - offset) as usize;
            Some(data[s..s + len as usize].to_vec())
        }
        _ => None,
    })
}

/// Whether `e` names a place inside an array of geometry `geo`.
fn inside(geo: &Geometry, e: &Extent) -> bool {
    match *e {
        Entry::Device { member, offset, data } | Entry::Copy { member, offset, len: data, .. } => {
            member < geo.members && offset.checked_add(data).is_some_and(|end| end <= geo.member_bytes(member))
        }
        Entry::Logical { offset, data } => offset.checked_add(data).is_some_and(|end| end <= geo.capacity()),
        Entry::Resync { row } => row < geo.stripes,
    }
}

/// The pieces of `e` outside every extent of `guard` in the same space
/// (the same member, or the logical space); resync marks are kept whole:
/// they only make code agree with data.
fn clip(e: &Entry, guard: &[Extent]) -> Vec<Entry> {
    let Some((space, start)) = e.target() else { return vec![e.clone()] };
    let data = e.bytes();
    let end = start.saturating_add(data.len() as u64);
    let mut cuts: Vec<(u64, u64)> = guard
        .iter()
        .filter_map(|g| g.target().filter(|t| t.0 == space).map(|t| (t.1, t.1.saturating_add(g.len()))))
        .filter(|&(a, b)| a < end && b > start)
        .collect();
    if cuts.is_empty() {
        return vec![e.clone()];
    }
    cuts.sort_unstable();
    let piece = |a: u64, b: u64| {
        let bytes = data[(a - start) as usize..(b - start) as usize].to_vec();
        match space {
            Some(member) => Entry::Device { member, offset: a, data: bytes },
            None => Entry::Logical { offset: a, data: bytes },
        }
    };
    let (mut out, mut pos) = (Vec::new(), start);
    for (a, b) in cuts {
        if a > pos {
            out.push(piece(pos, a));
        }
        pos = pos.max(b);
    }
    if pos < end {
        out.push(piece(pos, end));
    }
    out
}

/// The stripes (scrub regions) of `geo` that an entry touches; none for
/// places outside the array.
pub fn stripes_of(geo: &Geometry, e: &Extent) -> Vec<u64> {
    let top = geo.stripes.saturating_sub(1);
    let span = |off: u64, len: u64, per: u64| {
        let last = off.saturating_add(len.max(1) - 1);
        (off / per..=(last / per).min(top)).collect::<Vec<u64>>()
    };
    match *e {
        Entry::Resync { row } => [row].into_iter().filter(|&s| s < geo.stripes).collect(),
        Entry::Logical { offset, data } => span(offset, data, geo.stripe_data_bytes().max(1)),
        Entry::Copy { member, offset, len, .. } => stripes_of(geo, &Entry::Device { member, offset, data: len }),
        Entry::Device { member: m, offset, data } if m < geo.members => match geo.level {
            // A CDA member of cbro holds one unit per `w` stripes.
            Level::Cbro { w, .. } if m >= geo.k => {
                let (w, idx) = (w.max(1) as u64, ((m - geo.k) % w.max(1) as usize) as u64);
                span(offset, data, geo.unit.max(1)).into_iter().map(|u| u.saturating_mul(w).saturating_add(idx)).filter(|&s| s < geo.stripes).collect()
            }
            _ => span(offset, data, geo.unit.max(1)),
        },
        Entry::Device { .. } => Vec::new(),
    }
}

/// What replay found.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct ReplayReport {
    pub records: u64,
    pub ops: u64,
    pub bytes: u64,
    /// Damaged records that valid later records followed: skipped.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub damaged: Vec<RecordStripes>,
    /// The record where the log ended, damaged or torn by the crash: not
    /// replayed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tail: Option<RecordStripes>,
    /// Valid records not replayed because a later damaged record, whose
    /// places are unknown, may have written over them.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub held_back: Vec<RecordStripes>,
    /// Data the crash took with a member: units on a member missing at
    /// replay, in stripes whose code a cache held (so the code on the
    /// drives was stale and cannot rebuild them).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub lost: Vec<LostUnit>,
}

/// A stripe unit of a missing member that replay could not rebuild.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct LostUnit {
    pub stripe: u64,
    pub member: usize,
    /// Its logical byte range.
    pub offset: u64,
    pub len: u64,
}

/// A journal record a [`ReplayReport`] names, with the stripes it touched
/// (`None`: unknown, its entry table is unreadable).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct RecordStripes {
    pub seq: u64,
    pub stripes: Option<Vec<u64>>,
}

impl RecordStripes {
    /// "7 (stripes 3, 12)", "9 (stripes unknown)".
    fn describe(&self) -> String {
        match &self.stripes {
            None => format!("{} (stripes unknown)", self.seq),
            Some(s) if s.len() > LISTED_STRIPES => {
                let head: Vec<String> = s[..LISTED_STRIPES].iter().map(u64::to_string).collect();
                format!("{} (stripes {}, ... {} in all)", self.seq, head.join(", "), s.len())
            }
            Some(s) => {
                let all: Vec<String> = s.iter().map(u64::to_string).collect();
                format!("{} (stripe{} {})", self.seq, if s.len() == 1 { "" } else { "s" }, all.join(", "))
            }
        }
    }
}

/// "record 7 (stripe 3)" or "records 7 (...), 9 (...)".
fn name_records(rs: &[RecordStripes]) -> String {
    let list: Vec<String> = rs.iter().map(RecordStripes::describe).collect();
    format!("record{} {}", if rs.len() == 1 { "" } else { "s" }, list.join(", "))
}

impl ReplayReport {
    /// What the user must hear about this replay: `None` unless damaged
    /// records were found.
    pub fn warning(&self) -> Option<String> {
        let mut parts = Vec::new();
        if !self.damaged.is_empty() {
            let one = self.damaged.len() == 1;
            let (is, them, they, its) = if one { ("is", "it", "it was", "its") } else { ("are", "them", "they were", "their") };
            parts.push(format!(
                "journal {} {is} damaged: the valid records after {them} were replayed and {they} skipped, so {its} stripes may hold older data and code that disagrees with it",
                name_records(&self.damaged)
            ));
        }
        if !self.held_back.is_empty() {
            let were = if self.held_back.len() == 1 { "was" } else { "were" };
            parts.push(format!("{} before a damaged record of unknown extent {were} not replayed either", name_records(&self.held_back)));
        }
        if let Some(t) = &self.tail {
            parts.push(format!(
                "journal {} at the end of the log is damaged or was torn by the crash, so it was not replayed and its stripes may hold the data from before it",
                name_records(std::slice::from_ref(t))
            ));
        }
        let scrub = (!parts.is_empty()).then(|| parts.join("; ") + "; run `mosaic scrub` to check them (`mosaic scrub --repair` rewrites their code)");
        let lost = self.lost_warning();
        match (scrub, lost) {
            (None, None) => None,
            (a, b) => Some(a.into_iter().chain(b).collect::<Vec<_>>().join("; ")),
        }
    }

    /// "the data of member 3 at logical bytes ... is lost: ...".
    fn lost_warning(&self) -> Option<String> {
        if self.lost.is_empty() {
            return None;
        }
        let ranges: Vec<String> = self.lost.iter().take(LISTED_STRIPES).map(|u| format!("{}..{} (stripe {}, member {})", u.offset, u.offset + u.len, u.stripe, u.member)).collect();
        let more = if self.lost.len() > LISTED_STRIPES { format!(", ... {} in all", self.lost.len()) } else { String::new() };
        Some(format!(
            "a cache held the code of stripes whose member is missing, so the code on the drives was stale when the array stopped and their data there cannot be rebuilt: logical bytes {}{more} are lost: reads of them fail until they are written again (restore them from a backup)",
            ranges.join(", ")
        ))
    }
}

/// Encode a journal header block: a frame of kind
/// [`KIND_JOURNAL_HEADER`] whose sequence number is the checkpoint,
/// padded to [`HEADER_BYTES`].
pub fn encode_header(array: Uuid, size: u64, checkpoint: u64, session: Uuid) -> Vec<u8> {
    let mut p = Vec::with_capacity(HEADER_PAYLOAD);
    p.extend_from_slice(&VERSION.to_le_bytes());
    p.extend_from_slice(array.as_bytes());
    p.extend_from_slice(&size.to_le_bytes());
    p.extend_from_slice(session.as_bytes());
    let mut b = frame::encode(KIND_JOURNAL_HEADER, checkpoint, &p);
    b.resize(HEADER_BYTES as usize, 0);
    b
}

/// The fields of a journal header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JournalHeader {
    pub array: Uuid,
    pub size: u64,
    pub checkpoint: u64,
    /// The session of the array that wrote the header last (nil before
    /// version 3).
    pub session: Uuid,
}

/// Decode a journal header block (what [`Journal::open`] reads; public
/// for fuzzing and for tools that identify a journal).
pub fn decode_header(h: &[u8]) -> Result<JournalHeader, String> {
    let f = match frame::decode(h) {
        Ok(Some(f)) if f.kind == KIND_JOURNAL_HEADER => f,
        Ok(_) | Err(FrameError::BadMagic) => return Err("not a mosaic journal (no header)".into()),
        Err(FrameError::BadCrc) => return Err("corrupt journal header (checksum mismatch)".into()),
        Err(e) => return Err(format!("corrupt journal header ({e})")),
    };
    let p = &f.payload;
    if p.len() < 4 {
        return Err(format!("corrupt journal header ({} payload bytes)", p.len()));
    }
    let version = le32(p, 0);
    if !(OLDEST_VERSION..=VERSION).contains(&version) {
        return Err(format!("unsupported journal version {version}"));
    }
    let want = if version < 3 { OLD_HEADER_PAYLOAD } else { HEADER_PAYLOAD };
    if p.len() != want {
        return Err(format!("corrupt journal header ({} payload bytes, not {want})", p.len()));
    }
    let array = Uuid::from_bytes(std::array::from_fn(|i| p[4 + i]));
    // Sequence numbers start at 1 and grow by one a record: a checkpoint
    // of 0, or one so large that they would run out, is damage.
    let checkpoint = f.seq;
    if checkpoint == 0 || checkpoint > MAX_SEQ {
        return Err(format!("corrupt journal header (impossible checkpoint sequence {checkpoint})"));
    }
    let session = if version < 3 { Uuid::nil() } else { Uuid::from_bytes(std::array::from_fn(|i| p[28 + i])) };
    Ok(JournalHeader { array, size: le64(p, 20), checkpoint, session })
}

/// Read journal bytes at `at`, naming the device when that fails.
fn jread(dev: &dyn Member, buf: &mut [u8], at: u64) -> Result<(), ArrayError> {
    dev.read_at(buf, at).map_err(|e| ArrayError::Io(format!("{}: reading journal: {e}", dev.describe())))
}

/// Why a journal of `size` bytes cannot serve an array of `members`
/// columns of `unit` bytes, if it cannot: it must hold the record of one
/// full-stripe write (every column's unit), or that write is refused.
pub fn too_small_for(size: u64, members: usize, unit: u64) -> Option<String> {
    if size < MIN_JOURNAL {
        return Some(format!("journal too small: {size} bytes, needs at least {MIN_JOURNAL}"));
    }
    let payload = (TABLE_HEAD + members * ENTRY) as u64 + members as u64 * unit;
    let need = HEADER_BYTES + frame::encoded_len(payload.min(usize::MAX as u64) as usize) as u64;
    if payload > frame::MAX_PAYLOAD as u64 {
        return Some(format!(
            "a full-stripe write ({members} columns of {unit} bytes) needs a journal record of {payload} bytes, more than a record may hold ({} MiB): use a smaller stripe unit",
            frame::MAX_PAYLOAD >> 20
        ));
    }
    (size < need).then(|| format!("a journal of {size} bytes cannot hold the record of one full-stripe write ({members} columns of {unit} bytes): it needs at least {need} bytes"))
}

impl Journal {
    /// Format `dev` as an empty journal of `array`, written by `session`.
    pub fn format(dev: Arc<dyn Member>, array: Uuid, session: Uuid) -> Result<Journal, ArrayError> {
        let size = dev.size();
        if size < MIN_JOURNAL {
            return Err(ArrayError::BadMember(format!(
                "{}: journal too small: {size} bytes, needs at least {MIN_JOURNAL}",
                dev.describe()
            )));
        }
        let j = Journal::new(dev, array, 1, HEADER_BYTES, session);
        j.write_header(1, session)?;
        Ok(j)
    }

    fn new(dev: Arc<dyn Member>, uuid: Uuid, checkpoint: u64, tail: u64, session: Uuid) -> Journal {
        Journal {
            size: dev.size(),
            dev,
            uuid,
            ring: Mutex::new(Ring { tail, next_seq: checkpoint, checkpoint, expanded: tail - HEADER_BYTES, session }),
            sync: Mutex::new(()),
            durable: AtomicU64::new(checkpoint.saturating_sub(1)),
            appended: AtomicU64::new(checkpoint.saturating_sub(1)),
            failed: OnceLock::new(),
            records: AtomicU64::new(0),
            syncs: AtomicU64::new(0),
            checkpoints: AtomicU64::new(0),
        }
    }

    /// Whether `dev` starts with a journal header.
    pub fn is_journal(dev: &dyn Member) -> bool {
        let mut h = [0u8; frame::HEADER_LEN];
        dev.size() >= MIN_JOURNAL && dev.read_at(&mut h, 0).is_ok() && frame::peek_kind(&h) == Some(KIND_JOURNAL_HEADER)
    }

    pub fn describe(&self) -> String {
        self.dev.describe()
    }

    fn write_header(&self, checkpoint: u64, session: Uuid) -> Result<(), ArrayError> {
        self.refuse()?;
        let b = encode_header(self.uuid, self.size, checkpoint, session);
        // Only the header itself must be durable: the records before a
        // checkpoint need not be (FUA on a remote journal).
        self.dev.write_durable(&b, 0).map_err(|e| self.fail(format!("writing journal header: {e}")))
    }

    /// Why the journal device failed, if it has: once a record, a sync or
    /// a header fails, the journal refuses every append, sync and
    /// checkpoint until the array is opened again.
    ///
    /// Refusing is what keeps replay exact.  A record whose write or sync
    /// failed may still be on the device, and its write never reached the
    /// members.  Were a later write to the same stripe journaled, its code
    /// would be computed without the failed one, and a replay of both would
    /// leave the stripe's code wrong.  A header whose write landed but
    /// whose flush failed names a checkpoint the ring in memory has not
    /// taken, so records appended after it would never be replayed.  With
    /// nothing appended after the failure, each record left is one whose
    /// stripe no later record touches: replaying it applies that write
    /// whole, which a failed write may be.
    pub fn failed(&self) -> Option<&str> {
        self.failed.get().map(String::as_str)
    }

    /// Record `cause` (if it is the first failure) and give the error.
    fn fail(&self, cause: String) -> ArrayError {
        let _ = self.failed.set(cause);
        self.refused()
    }

    /// The error of a journal that failed.
    fn refused(&self) -> ArrayError {
        let cause = self.failed().unwrap_or("");
        ArrayError::Io(format!(
            "the write-ahead journal {} failed ({cause}): the array refuses writes, so nothing is written without write-hole protection; \
             reads still work; close the array and open it again once the journal device works (the open replays the journal)",
            self.dev.describe()
        ))
    }

    /// The journal's error if it failed.
    fn refuse(&self) -> Result<(), ArrayError> {
        match self.failed.get() {
            Some(_) => Err(self.refused()),
            None => Ok(()),
        }
    }

    /// Open the journal of `array` on `dev` and read the records that must
    /// be replayed (in order), and the damaged records between them.  The
    /// caller applies them (see [`JournalLog::replayable`]), then calls
    /// [`Journal::replayed`].
    pub fn open(dev: Arc<dyn Member>, array: Uuid) -> Result<(Journal, JournalLog), ArrayError> {
        let who = dev.describe();
        if dev.size() < MIN_JOURNAL {
            return Err(ArrayError::BadMember(format!("{who}: journal too small: {} bytes", dev.size())));
        }
        let mut h = vec![0u8; HEADER_BYTES as usize];
        dev.read_at(&mut h, 0).map_err(|e| ArrayError::Io(format!("{who}: reading journal header: {e}")))?;
        let hd = decode_header(&h).map_err(|e| ArrayError::BadMember(format!("{who}: {e}")))?;
        if hd.array != array {
            return Err(ArrayError::Usage(format!("{who}: the journal belongs to array {}, not {array}", hd.array)));
        }
        if hd.size != dev.size() {
            return Err(ArrayError::BadMember(format!("{who}: journal was formatted for {} bytes but the device has {}", hd.size, dev.size())));
        }
        let (log, tail, next) = Self::read_log(dev.as_ref(), hd.checkpoint)?;
        let j = Journal::new(dev, array, hd.checkpoint, HEADER_BYTES, hd.session);
        {
            let mut r = j.ring.lock();
            r.tail = tail;
            r.expanded = tail - HEADER_BYTES;
            r.next_seq = next;
        }
        j.durable.store(next.saturating_sub(1), Ordering::Release);
        j.appended.store(next.saturating_sub(1), Ordering::Release);
        Ok((j, log))
    }

    /// Read the log from `checkpoint` on: every valid record, and the
    /// damaged records that valid later records follow.  Returns the log,
    /// where it ends, and the next sequence number (past every record
    /// found, so new records never reuse one).
    fn read_log(dev: &dyn Member, checkpoint: u64) -> Result<(JournalLog, u64, u64), ArrayError> {
        let mut log = JournalLog::default();
        let (mut at, mut seq) = (HEADER_BYTES, checkpoint);
        loop {
            if let Some((_, entries, len)) = Self::read_record(dev, at, Some(seq))? {
                log.records.push((seq, entries));
                let next = seq.checked_add(1).ok_or_else(|| ArrayError::BadMember(format!("{}: journal sequence number {seq} cannot advance", dev.describe())))?;
                // `read_record` checked that the record ends inside the device.
                (at, seq) = (at + len, next);
                continue;
            }
            let Some((next_at, next_seq)) = Self::find_later(dev, at, seq)? else {
                log.tail = Self::tail_at(dev, at, seq)?;
                if log.tail.is_some() {
                    // Its sequence number is taken: new records go past it.
                    seq = seq.saturating_add(1);
                }
                break;
            };
            let entries = if next_seq - seq == 1 { Self::damaged_entries(dev, at, next_at)? } else { None };
            log.damaged.push(DamagedRecord { seq, entries });
            log.damaged.extend((seq + 1..next_seq).map(|s| DamagedRecord { seq: s, entries: None }));
            (at, seq) = (next_at, next_seq);
        }
        resolve_copies(&mut log);
        Ok((log, at, seq))
    }

    /// The frame header at `at`, when one fits before the end of the device.
    fn record_header(dev: &dyn Member, at: u64) -> Result<Option<[u8; frame::HEADER_LEN]>, ArrayError> {
        if at.checked_add(frame::HEADER_LEN as u64).is_none_or(|e| e > dev.size()) {
            return Ok(None);
        }
        let mut h = [0u8; frame::HEADER_LEN];
        jread(dev, &mut h, at)?;
        Ok(Some(h))
    }

    /// The record at `at` (its sequence, entries and padded length) if it
    /// is valid, lies inside the device, and carries `want` (when given).
    fn read_record(dev: &dyn Member, at: u64, want: Option<u64>) -> Result<Option<(u64, Vec<Entry>, u64)>, ArrayError> {
        let Some(h) = Self::record_header(dev, at)? else { return Ok(None) };
        if !is_record_header(&h) || want.is_some_and(|w| frame_seq(&h) != w) {
            return Ok(None);
        }
        let raw = record_raw_len(&h).filter(|&r| at.checked_add(r).is_some_and(|e| e <= dev.size()));
        let Some(raw) = raw.and_then(|r| usize::try_from(r).ok()) else { return Ok(None) };
        let mut b = vec![0u8; raw];
        jread(dev, &mut b, at)?;
        Ok(decode_record(&b).ok())
    }

    /// The sequence number of the record at `at`, if it is valid.
    fn valid_seq_at(dev: &dyn Member, at: u64) -> Result<Option<u64>, ArrayError> {
        Ok(Self::read_record(dev, at, None)?.map(|r| r.0))
    }

    /// After the record expected at `at` with sequence `seq` failed its
    /// checks: the place and sequence of the first valid record further on
    /// that carries a later sequence number, or `None` when the log ends at
    /// `at` (a valid record of an older generation, or the end of the
    /// ring, comes first).  Each record takes at least [`ALIGN`] bytes, so
    /// a record `d` numbers on must lie at least `d` blocks on.
    fn find_later(dev: &dyn Member, at: u64, seq: u64) -> Result<Option<(u64, u64)>, ArrayError> {
        let later = |pos: u64, s: u64| s > seq && s - seq <= (pos - at) / ALIGN;
        match Self::valid_seq_at(dev, at)? {
            Some(s) if s <= seq => return Ok(None),
            _ => {}
        }
        // Where the failed record's header says it ends, if the next
        // record is there.
        if let Some(h) = Self::record_header(dev, at)? {
            let end = record_raw_len(&h).and_then(|r| r.checked_next_multiple_of(ALIGN)).and_then(|r| at.checked_add(r));
            if let Some(end) = end.filter(|&e| e > at) {
                if let Some(s) = Self::valid_seq_at(dev, end)? {
                    if Some(s) == seq.checked_add(1) {
                        return Ok(Some((end, s)));
                    }
                }
            }
        }
        let size = dev.size();
        let mut buf = Vec::new();
        let mut p = at + ALIGN;
        let scanning = |e: &std::io::Error| ArrayError::Io(format!("{}: scanning journal: {e}", dev.describe()));
        while p.checked_add(frame::HEADER_LEN as u64).is_some_and(|e| e <= size) {
            // A hole reads as zeros and holds no record header: go on at the
            // first record position past it (a journal never wrapped is
            // mostly hole, on a sparse file).
            let data = dev.next_data(p).map_err(|e| scanning(&e))?;
            if data > p {
                match (data - at).checked_next_multiple_of(ALIGN).and_then(|d| at.checked_add(d)) {
                    Some(q) => p = q,
                    None => break,
                }
                continue;
            }
            let n = SCAN_CHUNK.min(size - p) as usize;
            // A mapped journal is looked at in place: a record header
            // every ALIGN bytes is all the scan reads.
            let chunk = match dev.view(p, n) {
                Some(v) => v,
                None => {
                    buf.resize(n.max(buf.len()), 0);
                    dev.read_at(&mut buf[..n], p).map_err(|e| scanning(&e))?;
                    &buf[..n]
                }
            };
            for off in (0..n).step_by(ALIGN as usize) {
                if !chunk.get(off..).is_some_and(is_record_header) {
                    continue;
                }
                let pos = p + off as u64;
                match Self::valid_seq_at(dev, pos)? {
                    Some(s) if later(pos, s) => return Ok(Some((pos, s))),
                    Some(s) if s <= seq => return Ok(None),
                    _ => {}
                }
            }
            p += n as u64;
        }
        Ok(None)
    }

    /// The record at `at` that ends the log, if its header carries `seq`,
    /// with where it wrote when its length fits the device and its entry
    /// table is readable.
    fn tail_at(dev: &dyn Member, at: u64, seq: u64) -> Result<Option<DamagedRecord>, ArrayError> {
        let Some(h) = Self::record_header(dev, at)? else { return Ok(None) };
        if frame_seq(&h) != seq {
            return Ok(None);
        }
        let fits = record_raw_len(&h).and_then(|r| at.checked_add(r)).is_some_and(|e| e <= dev.size());
        let entries = if fits { Self::read_table(dev, at, &h)? } else { None };
        Ok(Some(DamagedRecord { seq, entries }))
    }

    /// Where the damaged record at `at` wrote, if its entry table is
    /// readable and its length puts its end exactly at `next`, where the
    /// next valid record starts.
    fn damaged_entries(dev: &dyn Member, at: u64, next: u64) -> Result<Option<Vec<Extent>>, ArrayError> {
        let Some(h) = Self::record_header(dev, at)? else { return Ok(None) };
        let fits = record_raw_len(&h).and_then(|r| r.checked_next_multiple_of(ALIGN)) == Some(next - at);
        if !fits {
            return Ok(None);
        }
        Self::read_table(dev, at, &h)
    }

    /// The entry table of the record at `at` whose frame header is `h`
    /// (the caller checked that the record lies inside the device), best
    /// effort ([`decode_entry_table`]).
    fn read_table(dev: &dyn Member, at: u64, h: &[u8]) -> Result<Option<Vec<Extent>>, ArrayError> {
        let Some(raw) = record_raw_len(h) else { return Ok(None) };
        let mut head = [0u8; frame::HEADER_LEN + TABLE_HEAD];
        if raw < head.len() as u64 {
            return Ok(None);
        }
        jread(dev, &mut head, at)?;
        let need = head.len() as u64 + le32(&head, frame::HEADER_LEN) as u64 * ENTRY as u64;
        if need > raw {
            return Ok(None);
        }
        let mut b = vec![0u8; need as usize];
        jread(dev, &mut b, at)?;
        Ok(decode_entry_table(&b))
    }

    /// After the caller applied the replayed records and flushed the
    /// members: start an empty log after them.
    pub fn replayed(&self) -> Result<(), ArrayError> {
        let mut r = self.ring.lock();
        let cp = r.next_seq;
        self.write_header(cp, r.session)?;
        r.checkpoint = cp;
        r.tail = HEADER_BYTES;
        r.expanded = 0;
        Ok(())
    }

    /// Bytes a record of these entries takes.
    pub fn record_len(entries: &[Entry<&[u8]>]) -> u64 {
        frame::encoded_len(record_payload_len(entries)) as u64
    }

    /// Bytes a record of these entries, `payload` bytes of payload, would
    /// take had each copy entry carried the bytes it stands for, and had
    /// logical writes riding with other entries (a cache volume's write
    /// with the destage it set off: [`crate::array::Rider`]) taken a
    /// record of their own.  A cache volume checkpoints by this measure,
    /// so neither copies nor riders move its checkpoints (or the destages
    /// those force).
    pub(crate) fn expanded_len(entries: &[Entry<&[u8]>]) -> u64 {
        Self::expanded_len_of(entries, record_payload_len(entries))
    }

    /// [`Journal::expanded_len`] of entries whose payload is `payload`
    /// bytes.
    fn expanded_len_of(entries: &[Entry<&[u8]>], payload: usize) -> u64 {
        // Bytes the copies stand for beyond their own; logical entries
        // and their bytes.
        let (mut copied, mut n, mut logical) = (0usize, 0usize, 0usize);
        for e in entries {
            match e {
                Entry::Copy { len, .. } => copied += (*len as usize).saturating_sub(mosaic_format::journal::COPY_BYTES),
                Entry::Logical { data, .. } => (n, logical) = (n + 1, logical + data.len()),
                _ => {}
            }
        }
        if n == 0 || n == entries.len() {
            return frame::encoded_len(payload.saturating_add(copied)) as u64;
        }
        let riding = TABLE_HEAD + n * ENTRY + logical;
        let rest = (payload + TABLE_HEAD).saturating_sub(riding).saturating_add(copied);
        (frame::encoded_len(rest) + frame::encoded_len(riding)) as u64
    }

    /// Largest record the ring holds.
    pub fn capacity(&self) -> u64 {
        self.size - HEADER_BYTES
    }

    /// Whether a record of `entries` fits before the end of the ring now.
    pub fn try_append_fits(&self, entries: &[Entry<&[u8]>]) -> bool {
        self.ring.lock().tail + Self::record_len(entries) <= self.size
    }

    /// Append a record if it fits before the end of the ring; `Ok(None)`
    /// when the ring must checkpoint first.  Not yet durable: see
    /// [`Journal::sync_to`].
    pub fn try_append(&self, entries: &[Entry<&[u8]>]) -> Result<Option<u64>, ArrayError> {
        self.try_append_as(entries, None)
    }

    /// [`Journal::try_append`], the record counted toward
    /// [`Journal::used_expanded`] as `expanded` bytes when given (the
    /// records it stands for), else by [`Journal::expanded_len`].
    pub(crate) fn try_append_as(&self, entries: &[Entry<&[u8]>], expanded: Option<u64>) -> Result<Option<u64>, ArrayError> {
        let payload = record_payload_len(entries);
        let len = frame::encoded_len(payload) as u64;
        if len > self.capacity() || payload > frame::MAX_PAYLOAD {
            return Err(ArrayError::Usage(format!(
                "a write needs a {len}-byte journal record but the journal {} holds {} bytes (and a record at most {} MiB); use a larger journal or smaller writes",
                self.dev.describe(),
                self.capacity(),
                frame::MAX_PAYLOAD >> 20
            )));
        }
        // The record's header and entry table are built before the ring
        // lock, which every journaled write takes in turn; inside, only the
        // sequence number and checksum are set and the record written,
        // its bytes taken from where they lie.
        let mut rec = encode_record_unsealed(entries);
        let expanded = expanded.unwrap_or_else(|| Self::expanded_len_of(entries, payload));
        let mut r = self.ring.lock();
        self.refuse()?;
        if r.tail + len > self.size {
            return Ok(None);
        }
        let seq = r.next_seq;
        rec.seal(seq);
        self.dev.write_parts_at(&rec.pieces(), r.tail).map_err(|e| self.fail(format!("writing journal: {e}")))?;
        r.tail += len;
        r.expanded += expanded;
        r.next_seq += 1;
        self.appended.fetch_max(seq, Ordering::AcqRel);
        self.records.fetch_add(1, Ordering::Relaxed);
        Ok(Some(seq))
    }

    /// Make every record up to `seq` durable (one fdatasync serves every
    /// writer waiting: group commit).
    pub fn sync_to(&self, seq: u64) -> Result<(), ArrayError> {
        if self.durable.load(Ordering::Acquire) >= seq {
            return Ok(());
        }
        let _g = self.sync.lock();
        if self.durable.load(Ordering::Acquire) >= seq {
            return Ok(());
        }
        self.refuse()?;
        let upto = self.appended.load(Ordering::Acquire);
        self.dev.flush().map_err(|e| self.fail(format!("syncing journal: {e}")))?;
        self.syncs.fetch_add(1, Ordering::Relaxed);
        self.durable.fetch_max(upto, Ordering::AcqRel);
        Ok(())
    }

    /// Start over at the front.  The caller guarantees that every record
    /// appended so far has reached the members and that they are flushed.
    pub fn checkpoint(&self) -> Result<(), ArrayError> {
        let mut r = self.ring.lock();
        let cp = r.next_seq;
        self.write_header(cp, r.session)?;
        r.checkpoint = cp;
        r.tail = HEADER_BYTES;
        r.expanded = 0;
        self.durable.fetch_max(cp.saturating_sub(1), Ordering::AcqRel);
        self.checkpoints.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    /// Whether its device is RAM or a file on a RAM file system.
    pub fn cheap(&self) -> bool {
        self.dev.cheap_flush()
    }

    /// The session its header names: the array's that wrote it last.
    pub fn session(&self) -> Uuid {
        self.ring.lock().session
    }

    /// Name `session` (the array's new one) in the header, durably, before
    /// the session appends a record: another copy of the array, whose
    /// members never carried it, then cannot take the journal for its own.
    pub fn set_session(&self, session: Uuid) -> Result<(), ArrayError> {
        let mut r = self.ring.lock();
        self.write_header(r.checkpoint, session)?;
        r.session = session;
        Ok(())
    }

    /// The sequence number of the first record since the last
    /// checkpoint: a copy entry may name this record or a later one.
    pub fn checkpoint_seq(&self) -> u64 {
        self.ring.lock().checkpoint
    }

    /// Bytes of the ring in use.
    pub fn used(&self) -> u64 {
        self.ring.lock().tail - HEADER_BYTES
    }

    /// Bytes of the ring in use had every copy entry since the checkpoint
    /// carried its bytes (a cache volume checkpoints by this measure, so
    /// copies change no device operation).
    pub fn used_expanded(&self) -> u64 {
        self.ring.lock().expanded
    }

    /// Records appended since the last checkpoint.
    pub fn pending(&self) -> u64 {
        let r = self.ring.lock();
        r.next_seq - r.checkpoint
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mosaic_dev::MemMember;

    fn put(member: usize, offset: u64, data: &[u8]) -> Entry<&[u8]> {
        Entry::Device { member, offset, data }
    }

    fn ext(member: usize, offset: u64, len: u64) -> Extent {
        Entry::Device { member, offset, data: len }
    }

    #[test]
    fn records_round_trip_and_end_at_the_first_bad_one() {
        let dev: Arc<dyn Member> = Arc::new(MemMember::new("j", 2 << 20));
        let id = Uuid::new_v4();
        let j = Journal::format(dev.clone(), id, Uuid::nil()).unwrap();
        let a = vec![1u8; 4096];
        let b = vec![2u8; 1000];
        let s1 = j.try_append(&[put(0, 4096, &a), put(3, 0, &b)]).unwrap().unwrap();
        let s2 = j.try_append(&[put(1, 8192, &b), Entry::Resync { row: 7 }, Entry::Logical { offset: 5, data: &a[..10] }]).unwrap().unwrap();
        assert_eq!((s1, s2), (1, 2));
        j.sync_to(s2).unwrap();
        let (_, log) = Journal::open(dev.clone(), id).unwrap();
        let recs = log.records;
        assert_eq!(recs.len(), 2);
        assert_eq!(recs[0].1, vec![Entry::Device { member: 0, offset: 4096, data: a.clone() }, Entry::Device { member: 3, offset: 0, data: b.clone() }]);
        assert_eq!(recs[1].1, vec![Entry::Device { member: 1, offset: 8192, data: b.clone() }, Entry::Resync { row: 7 }, Entry::Logical { offset: 5, data: a[..10].to_vec() }]);
        // A torn second record ends the log after the first.
        let at = HEADER_BYTES + Journal::record_len(&[put(0, 4096, &a), put(3, 0, &b)]);
        let mut byte = [0u8];
        dev.read_at(&mut byte, at + 200).unwrap();
        dev.write_at(&[byte[0] ^ 0xff], at + 200).unwrap();
        let (j2, log) = Journal::open(dev.clone(), id).unwrap();
        assert_eq!((log.records.len(), log.damaged.len()), (1, 0), "a torn last record is the end, not damage");
        let want = vec![ext(1, 8192, 1000), Entry::Resync { row: 7 }, Entry::Logical { offset: 5, data: 10 }];
        assert_eq!(log.tail, Some(DamagedRecord { seq: 2, entries: Some(want) }), "its entry table is still readable");
        // After replay the log starts empty with the sequence moved on.
        j2.replayed().unwrap();
        let (j3, log) = Journal::open(dev.clone(), id).unwrap();
        assert!(log.is_empty());
        assert_eq!(j3.try_append(&[put(0, 0, &b)]).unwrap(), Some(3), "past the torn record's number");
    }

    #[test]
    fn copies_resolve_to_the_bytes_of_the_logical_write_they_name() {
        let dev: Arc<dyn Member> = Arc::new(MemMember::new("j", 2 << 20));
        let id = Uuid::new_v4();
        let j = Journal::format(dev.clone(), id, Uuid::nil()).unwrap();
        let pages: Vec<u8> = (0..8192u32).map(|i| (i % 251) as u8).collect();
        let s1 = j.try_append(&[Entry::Logical { offset: 8192, data: &pages }]).unwrap().unwrap();
        let copy = |member, offset, seq, from| Entry::Copy { member, offset, len: 4096, seq, from };
        let destage = [Entry::Resync { row: 1 }, copy(2, 4096, s1, 12288)];
        assert_eq!(Journal::record_len(&destage), 512, "a copy carries 16 bytes, not the page");
        let s2 = j.try_append(&destage).unwrap().unwrap();
        // A copy of bytes no record of the log holds: its record is damaged.
        let s3 = j.try_append(&[copy(0, 0, s1, 16384)]).unwrap().unwrap();
        let s4 = j.try_append(&[copy(1, 0, s1 + 100, 8192)]).unwrap().unwrap();
        assert_eq!((j.used(), j.used_expanded()), (8192 + 512 + 3 * 512, 8192 + 512 + 3 * 4608), "bytes as written, and had copies carried theirs");
        j.sync_to(s4).unwrap();
        let (_, log) = Journal::open(dev.clone(), id).unwrap();
        let want = vec![Entry::Resync { row: 1 }, Entry::Device { member: 2, offset: 4096, data: pages[4096..].to_vec() }];
        assert_eq!(log.records.iter().map(|r| r.0).collect::<Vec<_>>(), vec![s1, s2]);
        assert_eq!(log.records[1].1, want, "the copy reads the logical record's second page");
        assert_eq!(log.damaged, vec![DamagedRecord { seq: s3, entries: Some(vec![ext(0, 0, 4096)]) }, DamagedRecord { seq: s4, entries: Some(vec![ext(1, 0, 4096)]) }]);
        // A version 1 journal (before copies) still opens and replays.
        let v1 = Journal::format(dev.clone(), id, Uuid::nil()).unwrap();
        let s = v1.try_append(&[put(3, 0, &pages[..512])]).unwrap().unwrap();
        v1.sync_to(s).unwrap();
        let mut p = Vec::new();
        p.extend_from_slice(&1u32.to_le_bytes());
        p.extend_from_slice(id.as_bytes());
        p.extend_from_slice(&dev.size().to_le_bytes());
        dev.write_at(&frame::encode(KIND_JOURNAL_HEADER, 1, &p), 0).unwrap();
        let (_, log) = Journal::open(dev.clone(), id).unwrap();
        assert_eq!(log.records, vec![(1, vec![Entry::Device { member: 3, offset: 0, data: pages[..512].to_vec() }])]);
        p[..4].copy_from_slice(&4u32.to_le_bytes());
        dev.write_at(&frame::encode(KIND_JOURNAL_HEADER, 1, &p), 0).unwrap();
        assert!(Journal::open(dev, id).err().unwrap().to_string().contains("unsupported journal version 4"));
    }

    #[test]
    fn full_ring_asks_for_a_checkpoint_and_wrong_journals_are_refused() {
        let dev: Arc<dyn Member> = Arc::new(MemMember::new("j", 1 << 20));
        let id = Uuid::new_v4();
        let j = Journal::format(dev.clone(), id, Uuid::nil()).unwrap();
        let big = vec![7u8; 300 << 10];
        assert!(j.try_append(&[put(0, 0, &big)]).unwrap().is_some());
        assert!(j.try_append(&[put(0, 0, &big)]).unwrap().is_some());
        assert!(j.try_append(&[put(0, 0, &big)]).unwrap().is_some());
        assert_eq!(j.try_append(&[put(0, 0, &big)]).unwrap(), None, "ring full");
        j.checkpoint().unwrap();
        assert_eq!(j.try_append(&[put(0, 0, &big)]).unwrap(), Some(4));
        let huge = vec![0u8; 2 << 20];
        let e = j.try_append(&[put(0, 0, &huge)]).unwrap_err().to_string();
        assert!(e.contains("use a larger journal"), "{e}");
        // A record's payload is at most one frame's, however large the journal.
        let roomy = Journal::format(Arc::new(MemMember::new("j2", 80 << 20)), id, Uuid::nil()).unwrap();
        let over = vec![0u8; frame::MAX_PAYLOAD];
        let e = roomy.try_append(&[put(0, 0, &over)]).unwrap_err().to_string();
        assert!(e.contains("a record at most 64 MiB") && e.contains("smaller writes"), "{e}");
        let e = Journal::open(dev.clone(), Uuid::new_v4()).err().unwrap().to_string();
        assert!(e.contains("belongs to array"), "{e}");
        dev.write_at(&[0u8; 8], 0).unwrap();
        let e = Journal::open(dev.clone(), id).err().unwrap().to_string();
        assert!(e.contains("not a mosaic journal"), "{e}");
        let small: Arc<dyn Member> = Arc::new(MemMember::new("s", 4096));
        assert!(Journal::format(small, id, Uuid::nil()).err().unwrap().to_string().contains("journal too small"));
    }

    /// Four records of one 4 KiB op each on member `i % 2`, offsets 0,
    /// 4096, 0, 4096, synced.  Returns the device, the array id and where
    /// each record starts.
    fn four(dev_size: u64) -> (Arc<dyn Member>, Uuid, Vec<u64>) {
        let dev: Arc<dyn Member> = Arc::new(MemMember::new("j", dev_size));
        let id = Uuid::new_v4();
        let j = Journal::format(dev.clone(), id, Uuid::nil()).unwrap();
        let mut at = vec![];
        for i in 0..4u8 {
            at.push(HEADER_BYTES + j.used());
            let d = vec![i + 1; 4096];
            let s = j.try_append(&[put(i as usize % 2, (i as u64 / 2) * 4096, &d)]).unwrap().unwrap();
            j.sync_to(s).unwrap();
        }
        (dev, id, at)
    }

    fn flip(dev: &Arc<dyn Member>, at: u64) {
        let mut b = [0u8];
        dev.read_at(&mut b, at).unwrap();
        dev.write_at(&[b[0] ^ 0x5a], at).unwrap();
    }

    #[test]
    fn a_damaged_record_with_valid_ones_after_it_is_reported_not_an_end() {
        // Payload damage: the entry table still says where it wrote.
        let (dev, id, at) = four(2 << 20);
        flip(&dev, at[1] + 100);
        let (j, log) = Journal::open(dev.clone(), id).unwrap();
        assert_eq!(log.records.iter().map(|r| r.0).collect::<Vec<_>>(), vec![1, 3, 4]);
        assert_eq!(log.damaged, vec![DamagedRecord { seq: 2, entries: Some(vec![ext(1, 0, 4096)]) }]);
        // New records continue after every record found.
        assert_eq!(j.try_append(&[put(0, 0, &[0u8; 512])]).unwrap(), Some(5));
        // Header damage (the frame magic): where it wrote is still known
        // from its entry table, which fits exactly up to the next record.
        let (dev, id, at) = four(2 << 20);
        flip(&dev, at[2]);
        let (_, log) = Journal::open(dev.clone(), id).unwrap();
        assert_eq!(log.damaged, vec![DamagedRecord { seq: 3, entries: Some(vec![ext(0, 4096, 4096)]) }]);
        // A wrong payload length in the frame header: unknown.
        let (dev, id, at) = four(2 << 20);
        flip(&dev, at[0] + 16);
        let (_, log) = Journal::open(dev.clone(), id).unwrap();
        assert_eq!(log.damaged, vec![DamagedRecord { seq: 1, entries: None }]);
        assert_eq!(log.records.len(), 3);
        // The last record damaged: the end of the log, damaged or torn.
        let (dev, id, at) = four(2 << 20);
        flip(&dev, at[3] + 100);
        let (_, log) = Journal::open(dev.clone(), id).unwrap();
        assert_eq!((log.records.len(), log.damaged.len()), (3, 0));
        assert_eq!(log.tail, Some(DamagedRecord { seq: 4, entries: Some(vec![ext(1, 4096, 4096)]) }));
        flip(&dev, at[3] + 16);
        let (_, log) = Journal::open(dev.clone(), id).unwrap();
        assert_eq!(log.tail, Some(DamagedRecord { seq: 4, entries: None }), "a bad payload length: where it wrote is unknown");
        // A damaged entry table (its own checksum fails): unknown.
        let (dev, id, at) = four(2 << 20);
        flip(&dev, at[1] + 40);
        let (_, log) = Journal::open(dev.clone(), id).unwrap();
        assert_eq!(log.damaged, vec![DamagedRecord { seq: 2, entries: None }]);
        // A torn record whose header never reached the journal: no tail.
        let (dev, id, at) = four(2 << 20);
        dev.write_at(&[0u8; 512], at[3]).unwrap();
        let (_, log) = Journal::open(dev.clone(), id).unwrap();
        assert_eq!((log.records.len(), log.damaged.len(), log.tail.is_none()), (3, 0, true));
    }

    /// A file member that counts the bytes read from it.
    struct Counted(mosaic_dev::FileMember, std::sync::atomic::AtomicU64);

    impl Member for Counted {
        fn describe(&self) -> String {
            self.0.describe()
        }
        fn size(&self) -> u64 {
            self.0.size()
        }
        fn read_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<()> {
            self.1.fetch_add(buf.len() as u64, Ordering::Relaxed);
            self.0.read_at(buf, offset)
        }
        fn write_at(&self, buf: &[u8], offset: u64) -> std::io::Result<()> {
            self.0.write_at(buf, offset)
        }
        fn flush(&self) -> std::io::Result<()> {
            self.0.flush()
        }
        fn next_data(&self, offset: u64) -> std::io::Result<u64> {
            self.0.next_data(offset)
        }
    }

    #[test]
    fn a_scan_skips_a_sparse_files_holes_and_finds_the_records_after_them() {
        const SIZE: u64 = 8 << 20;
        let mem: Arc<dyn Member> = Arc::new(MemMember::new("j", SIZE));
        let id = Uuid::new_v4();
        let j = Journal::format(mem.clone(), id, Uuid::nil()).unwrap();
        let mut at = vec![];
        for (i, len) in [(1u8, 2usize << 20), (2, 64 << 10), (3, 64 << 10)] {
            at.push(HEADER_BYTES + j.used());
            let s = j.try_append(&[put(0, 0, &vec![i; len])]).unwrap().unwrap();
            j.sync_to(s).unwrap();
        }
        let end = HEADER_BYTES + j.used();
        // A sparse copy: most of record 1's payload and everything past
        // the last record are holes.  Record 1's length is damaged too, so
        // record 2 is found by a scan, whose second chunk starts in the
        // hole.
        let hole = (at[0] + (64 << 10)).next_multiple_of(4096)..(at[1] - (64 << 10)) / 4096 * 4096;
        assert!(hole.contains(&(at[0] + ALIGN + SCAN_CHUNK)));
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("journal.img");
        let file = mosaic_dev::FileMember::create(&path, SIZE).unwrap();
        for r in [0..hole.start, hole.end..end] {
            let mut b = vec![0u8; (r.end - r.start) as usize];
            mem.read_at(&mut b, r.start).unwrap();
            file.write_at(&b, r.start).unwrap();
        }
        let dev: Arc<dyn Member> = Arc::new(file);
        flip(&dev, at[0] + 16);
        drop(dev);
        let dev = Arc::new(Counted(mosaic_dev::FileMember::open(&path).unwrap(), 0.into()));
        let skipped = dev.next_data(hole.start).unwrap();
        assert!([hole.start, hole.end].contains(&skipped), "a hole is skipped whole or not at all: {skipped}");
        assert_eq!(dev.next_data(hole.end).unwrap(), hole.end);
        let (_, log) = Journal::open(dev.clone(), id).unwrap();
        assert_eq!(log.records.iter().map(|r| r.0).collect::<Vec<_>>(), vec![2, 3]);
        assert_eq!((log.damaged, log.tail), (vec![DamagedRecord { seq: 1, entries: None }], None));
        let read = dev.1.load(Ordering::Relaxed);
        if skipped == hole.end {
            // Record 1 is read twice whole (4 MiB), then one chunk before
            // each hole (3 MiB): 5.2 MiB in all.  Reading every byte past
            // the damaged record and past the log's end reads 10.1 MiB.
            assert!(read < 6 << 20, "{read} bytes read");
            assert_eq!(dev.next_data(end.next_multiple_of(4096)).unwrap(), SIZE, "only holes follow");
        } else {
            eprintln!("the file system under {} reports no holes ({read} bytes read)", dir.path().display());
        }
    }

    #[test]
    fn older_records_never_write_where_a_damaged_one_wrote() {
        let op = |member, offset, len: usize, b: u8| Entry::Device { member, offset, data: vec![b; len] };
        let log = JournalLog {
            records: vec![(1, vec![op(0, 0, 8192, 1), op(1, 0, 4096, 1)]), (3, vec![op(0, 4096, 4096, 3)])],
            damaged: vec![DamagedRecord { seq: 2, entries: Some(vec![ext(0, 2048, 4096)]) }],
            tail: None,
        };
        let (apply, held) = log.replayable();
        assert!(held.is_empty());
        assert_eq!(apply[0], (1, vec![op(0, 0, 2048, 1), op(0, 6144, 2048, 1), op(1, 0, 4096, 1)]));
        assert_eq!(apply[1], (3, vec![op(0, 4096, 4096, 3)]), "a later record is applied whole");
        // Unknown places: everything older is held back.
        let log = JournalLog { damaged: vec![DamagedRecord { seq: 2, entries: None }], ..log };
        let (apply, held) = log.replayable();
        assert_eq!(apply.iter().map(|r| r.0).collect::<Vec<_>>(), vec![3]);
        assert_eq!(held, vec![(1, vec![ext(0, 0, 8192), ext(1, 0, 4096)])]);
    }

    #[test]
    fn warnings_name_records_and_stripes() {
        let r = ReplayReport { damaged: vec![RecordStripes { seq: 7, stripes: Some(vec![3, 12]) }], ..Default::default() };
        assert_eq!(
            r.warning().unwrap(),
            "journal record 7 (stripes 3, 12) is damaged: the valid records after it were replayed and it was skipped, so its stripes may hold older data and code that disagrees with it; run `mosaic scrub` to check them (`mosaic scrub --repair` rewrites their code)"
        );
        let r = ReplayReport {
            damaged: vec![RecordStripes { seq: 7, stripes: None }, RecordStripes { seq: 8, stripes: Some(vec![1]) }],
            held_back: vec![RecordStripes { seq: 6, stripes: Some(vec![4]) }],
            ..Default::default()
        };
        let w = r.warning().unwrap();
        assert!(w.starts_with("journal records 7 (stripes unknown), 8 (stripe 1) are damaged: the valid records after them were replayed and they were skipped"), "{w}");
        assert!(w.contains("; record 6 (stripe 4) before a damaged record of unknown extent was not replayed either; run `mosaic scrub`"), "{w}");
        let r = ReplayReport { tail: Some(RecordStripes { seq: 9, stripes: Some(vec![2]) }), ..Default::default() };
        assert_eq!(
            r.warning().unwrap(),
            "journal record 9 (stripe 2) at the end of the log is damaged or was torn by the crash, so it was not replayed and its stripes may hold the data from before it; run `mosaic scrub` to check them (`mosaic scrub --repair` rewrites their code)"
        );
        assert_eq!(ReplayReport::default().warning(), None);
    }

    #[test]
    fn decoders_check_every_length() {
        let rec = encode_record(9, &[put(2, 512, &[7u8; 600])]);
        let (seq, entries, len) = decode_record(&rec).unwrap();
        assert_eq!((seq, entries[0].extent(), len), (9, ext(2, 512, 600), 1024));
        assert!(decode_record(&rec[..40]).unwrap_err().contains("truncated"));
        // The table's lengths must add up to the payload: a longer entry,
        // table checksum and frame checksum made right, is refused.
        let mut long = rec[frame::HEADER_LEN..frame::HEADER_LEN + 632].to_vec();
        long[TABLE_HEAD + 16..TABLE_HEAD + 24].copy_from_slice(&u64::MAX.to_le_bytes());
        let crc = crc32c::crc32c_append(crc32c::crc32c(&long[0..4]), &long[TABLE_HEAD..TABLE_HEAD + ENTRY]);
        long[4..8].copy_from_slice(&crc.to_le_bytes());
        let bad = frame::encode(frame::KIND_JOURNAL_RECORD, 9, &long);
        assert_eq!(decode_record(&bad).unwrap_err(), "journal record entry lengths overflow");
        assert_eq!(decode_entry_table(&bad), None);
        assert_eq!(decode_entry_table(&rec[..frame::HEADER_LEN + TABLE_HEAD + ENTRY]), Some(vec![ext(2, 512, 600)]), "the table alone is enough");
        let h = encode_header(Uuid::nil(), 1 << 20, 5, Uuid::from_u128(77));
        assert_eq!(decode_header(&h).unwrap(), JournalHeader { array: Uuid::nil(), size: 1 << 20, checkpoint: 5, session: Uuid::from_u128(77) });
        assert!(decode_header(&h[..20]).unwrap_err().contains("truncated"));
        assert_eq!(decode_header(&rec).unwrap_err(), "not a mosaic journal (no header)");
    }

    #[test]
    fn stripes_of_entries() {
        let raid5 = Geometry::new(Level::Raid5, 5, 4096, 4096, 64 * 4096).unwrap();
        assert_eq!(stripes_of(&raid5, &ext(2, 4096, 8192)), vec![1, 2]);
        assert_eq!(stripes_of(&raid5, &Entry::Logical { offset: 16384, data: 1 }), vec![1], "4 data units of 4 KiB a stripe");
        assert_eq!(stripes_of(&raid5, &Entry::Resync { row: 7 }), vec![7]);
        assert_eq!(stripes_of(&raid5, &ext(9, 0, 4096)), Vec::<u64>::new(), "no member 9");
        assert_eq!(stripes_of(&raid5, &ext(0, u64::MAX - 1, 4096)), Vec::<u64>::new(), "beyond the array");
        // cbro:4+1,cda=raid0:2: CDA members 4 and 5 take turns by stripe.
        let cbro = Geometry::new(Level::Cbro { n: 4, k: 1, w: 2 }, 6, 4096, 4096, 64 * 4096).unwrap();
        assert_eq!(stripes_of(&cbro, &ext(5, 4096, 4096)), vec![3]);
        assert_eq!(stripes_of(&cbro, &ext(4, 0, 8192)), vec![0, 2]);
    }

    #[test]
    fn a_journal_too_small_for_a_full_stripe_says_why() {
        assert!(too_small_for(4096, 3, 4096).unwrap().contains("journal too small: 4096 bytes, needs at least 1048576"));
        assert!(too_small_for(1 << 20, 3, 1 << 20).unwrap().contains("cannot hold the record of one full-stripe write (3 columns of 1048576 bytes)"));
        assert!(too_small_for(1 << 30, 5, 32 << 20).unwrap().contains("more than a record may hold (64 MiB): use a smaller stripe unit"));
        assert_eq!(too_small_for(1 << 20, 3, 65536), None);
    }
}
