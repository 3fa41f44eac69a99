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
//!   header: "MOSAICJL" | version u32 | array uuid | size u64 | checkpoint seq u64 | crc32c
//!   record: "MJRECORD" | seq u64 | ops u32 | payload u64 | crc32c
//!           | ops x (member u32, offset u64, len u32) | payload (op bytes, in op order)
//!           padded to 512 bytes; the crc covers header fields, op table and payload
//! ```
//!
//! Open replays, in order, every valid record from the header's checkpoint
//! sequence on (each must carry the next sequence number; the first that
//! does not, or fails its checksum, ends the log), writing its ops to the
//! members that are in service, flushes the members, and moves the
//! checkpoint past them.  Replaying a record twice is harmless: it writes
//! the same bytes to the same places.  After replay every stripe a crash
//! interrupted holds the new data and matching code, so scrub is clean and a
//! later member failure rebuilds every block correctly.
//!
//! When the ring is full the journal *checkpoints*: it waits until every
//! write in flight has reached the members, flushes them, and starts over
//! at the front with the checkpoint sequence moved on.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;
use uuid::Uuid;

use mosaic_dev::Member;

use crate::ArrayError;

const MAGIC: &[u8; 8] = b"MOSAICJL";
const REC_MAGIC: &[u8; 8] = b"MJRECORD";
const VERSION: u32 = 1;
/// The header block; records start after it.
pub const HEADER_BYTES: u64 = 4096;
const REC_HEADER: usize = 32;
const OP_ENTRY: usize = 16;
const ALIGN: u64 = 512;
/// The smallest journal that makes sense.
pub const MIN_JOURNAL: u64 = 1 << 20;

/// `member` of a record op that is a *logical* write (a write the cache
/// volume acknowledged and holds in cache): `offset` is the array offset.
pub const LOGICAL: usize = u32::MAX as usize;
/// `member` of a record op that marks a row whose code on the members is
/// stale because its parity is cached: `offset` is the stripe.
pub const PARITY_ROW: usize = u32::MAX as usize - 1;

/// Records to replay, with their sequence numbers, in order.
pub type Records = Vec<(u64, Vec<JournalOp>)>;

/// One device write in a record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JournalOp {
    pub member: usize,
    pub offset: u64,
    pub data: Vec<u8>,
}

struct Ring {
    /// Next byte to append at.
    tail: u64,
    /// Sequence number of the next record.
    next_seq: u64,
    /// Sequence of the first record in the ring (the checkpoint).
    checkpoint: u64,
}

/// A journal device attached to an array.
pub struct Journal {
    dev: Arc<dyn Member>,
    uuid: Uuid,
    ring: Mutex<Ring>,
    /// Serialises fdatasync; records up to `durable` are on stable storage.
    sync: Mutex<()>,
    durable: AtomicU64,
    appended: AtomicU64,
    /// Counters for tests and `info`.
    pub records: AtomicU64,
    pub syncs: AtomicU64,
    pub checkpoints: AtomicU64,
}

/// What replay found.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct ReplayReport {
    pub records: u64,
    pub ops: u64,
    pub bytes: u64,
}

fn header_bytes(array: Uuid, size: u64, checkpoint: u64) -> Vec<u8> {
    let mut b = vec![0u8; HEADER_BYTES as usize];
    b[0..8].copy_from_slice(MAGIC);
    b[8..12].copy_from_slice(&VERSION.to_le_bytes());
    b[12..28].copy_from_slice(array.as_bytes());
    b[28..36].copy_from_slice(&size.to_le_bytes());
    b[36..44].copy_from_slice(&checkpoint.to_le_bytes());
    let crc = crc32c::crc32c(&b[0..44]);
    b[44..48].copy_from_slice(&crc.to_le_bytes());
    b
}

/// Encode one record (padded to [`ALIGN`]).
pub fn encode_record(seq: u64, ops: &[(usize, u64, &[u8])]) -> Vec<u8> {
    let payload: usize = ops.iter().map(|o| o.2.len()).sum();
    let raw = REC_HEADER + ops.len() * OP_ENTRY + payload;
    let mut b = Vec::with_capacity(raw.next_multiple_of(ALIGN as usize));
    b.extend_from_slice(REC_MAGIC);
    b.extend_from_slice(&seq.to_le_bytes());
    b.extend_from_slice(&(ops.len() as u32).to_le_bytes());
    b.extend_from_slice(&(payload as u64).to_le_bytes());
    b.extend_from_slice(&[0u8; 4]); // crc, filled below
    for (m, off, d) in ops {
        b.extend_from_slice(&(*m as u32).to_le_bytes());
        b.extend_from_slice(&off.to_le_bytes());
        b.extend_from_slice(&(d.len() as u32).to_le_bytes());
    }
    for (_, _, d) in ops {
        b.extend_from_slice(d);
    }
    let crc = crc32c::crc32c_append(crc32c::crc32c(&b[0..28]), &b[REC_HEADER..]);
    b[28..32].copy_from_slice(&crc.to_le_bytes());
    b.resize(raw.next_multiple_of(ALIGN as usize), 0);
    b
}

impl Journal {
    /// Format `dev` as an empty journal of `array`.
    pub fn format(dev: Arc<dyn Member>, array: Uuid) -> Result<Journal, ArrayError> {
        let size = dev.size();
        if size < MIN_JOURNAL {
            return Err(ArrayError::BadMember(format!(
                "{}: journal too small: {size} bytes, needs at least {MIN_JOURNAL}",
                dev.describe()
            )));
        }
        let j = Journal::new(dev, array, 1, HEADER_BYTES);
        j.write_header(1)?;
        Ok(j)
    }

    fn new(dev: Arc<dyn Member>, uuid: Uuid, checkpoint: u64, tail: u64) -> Journal {
        Journal {
            dev,
            uuid,
            ring: Mutex::new(Ring { tail, next_seq: checkpoint, checkpoint }),
            sync: Mutex::new(()),
            durable: AtomicU64::new(checkpoint.saturating_sub(1)),
            appended: AtomicU64::new(checkpoint.saturating_sub(1)),
            records: AtomicU64::new(0),
            syncs: AtomicU64::new(0),
            checkpoints: AtomicU64::new(0),
        }
    }

    /// Whether `dev` starts with a journal header.
    pub fn is_journal(dev: &dyn Member) -> bool {
        let mut m = [0u8; 8];
        dev.size() >= MIN_JOURNAL && dev.read_at(&mut m, 0).is_ok() && &m == MAGIC
    }

    pub fn describe(&self) -> String {
        self.dev.describe()
    }

    fn write_header(&self, checkpoint: u64) -> Result<(), ArrayError> {
        let b = header_bytes(self.uuid, self.dev.size(), checkpoint);
        self.dev
            .write_at(&b, 0)
            .and_then(|_| self.dev.flush())
            .map_err(|e| ArrayError::Io(format!("{}: writing journal header: {e}", self.dev.describe())))
    }

    /// Open the journal of `array` on `dev` and read the records that must
    /// be replayed (in order).  The caller applies them, then calls
    /// [`Journal::replayed`].
    pub fn open(dev: Arc<dyn Member>, array: Uuid) -> Result<(Journal, Records), ArrayError> {
        let who = dev.describe();
        if dev.size() < MIN_JOURNAL {
            return Err(ArrayError::BadMember(format!("{who}: journal too small: {} bytes", dev.size())));
        }
        let mut h = vec![0u8; HEADER_BYTES as usize];
        dev.read_at(&mut h, 0).map_err(|e| ArrayError::Io(format!("{who}: reading journal header: {e}")))?;
        if &h[0..8] != MAGIC {
            return Err(ArrayError::BadMember(format!("{who}: not a mosaic journal (no header)")));
        }
        let crc = u32::from_le_bytes(h[44..48].try_into().unwrap());
        if crc32c::crc32c(&h[0..44]) != crc {
            return Err(ArrayError::BadMember(format!("{who}: corrupt journal header (checksum mismatch)")));
        }
        let version = u32::from_le_bytes(h[8..12].try_into().unwrap());
        if version != VERSION {
            return Err(ArrayError::BadMember(format!("{who}: unsupported journal version {version}")));
        }
        let owner = Uuid::from_slice(&h[12..28]).map_err(|e| ArrayError::BadMember(format!("{who}: {e}")))?;
        if owner != array {
            return Err(ArrayError::Usage(format!("{who}: the journal belongs to array {owner}, not {array}")));
        }
        let size = u64::from_le_bytes(h[28..36].try_into().unwrap());
        if size != dev.size() {
            return Err(ArrayError::BadMember(format!("{who}: journal was formatted for {size} bytes but the device has {}", dev.size())));
        }
        let checkpoint = u64::from_le_bytes(h[36..44].try_into().unwrap());
        let mut recs = Vec::new();
        let mut at = HEADER_BYTES;
        let mut seq = checkpoint;
        while let Some((ops, len)) = Self::read_record(dev.as_ref(), at, seq)? {
            recs.push((seq, ops));
            at += len;
            seq += 1;
        }
        let j = Journal::new(dev, array, checkpoint, HEADER_BYTES);
        {
            let mut r = j.ring.lock();
            r.tail = at;
            r.next_seq = seq;
        }
        j.durable.store(seq - 1, Ordering::Release);
        j.appended.store(seq - 1, Ordering::Release);
        Ok((j, recs))
    }

    /// The record at `at` if it is valid and carries `seq`.
    fn read_record(dev: &dyn Member, at: u64, seq: u64) -> Result<Option<(Vec<JournalOp>, u64)>, ArrayError> {
        let size = dev.size();
        if at + REC_HEADER as u64 > size {
            return Ok(None);
        }
        let io = |e: std::io::Error| ArrayError::Io(format!("{}: reading journal: {e}", dev.describe()));
        let mut h = [0u8; REC_HEADER];
        dev.read_at(&mut h, at).map_err(io)?;
        if &h[0..8] != REC_MAGIC || u64::from_le_bytes(h[8..16].try_into().unwrap()) != seq {
            return Ok(None);
        }
        let nops = u32::from_le_bytes(h[16..20].try_into().unwrap()) as u64;
        let payload = u64::from_le_bytes(h[20..28].try_into().unwrap());
        let raw = (REC_HEADER as u64).checked_add(nops.saturating_mul(OP_ENTRY as u64)).and_then(|x| x.checked_add(payload));
        let Some(raw) = raw.filter(|&r| at + r <= size) else { return Ok(None) };
        let mut body = vec![0u8; (raw - REC_HEADER as u64) as usize];
        dev.read_at(&mut body, at + REC_HEADER as u64).map_err(io)?;
        let want = u32::from_le_bytes(h[28..32].try_into().unwrap());
        if crc32c::crc32c_append(crc32c::crc32c(&h[0..28]), &body) != want {
            return Ok(None);
        }
        let mut ops = Vec::with_capacity(nops as usize);
        let mut p = nops as usize * OP_ENTRY;
        for i in 0..nops as usize {
            let e = &body[i * OP_ENTRY..(i + 1) * OP_ENTRY];
            let member = u32::from_le_bytes(e[0..4].try_into().unwrap()) as usize;
            let offset = u64::from_le_bytes(e[4..12].try_into().unwrap());
            let len = u32::from_le_bytes(e[12..16].try_into().unwrap()) as usize;
            if p + len > body.len() {
                return Ok(None);
            }
            ops.push(JournalOp { member, offset, data: body[p..p + len].to_vec() });
            p += len;
        }
        Ok(Some((ops, raw.next_multiple_of(ALIGN))))
    }

    /// After the caller applied the replayed records and flushed the
    /// members: start an empty log after them.
    pub fn replayed(&self) -> Result<(), ArrayError> {
        let mut r = self.ring.lock();
        let cp = r.next_seq;
        self.write_header(cp)?;
        r.checkpoint = cp;
        r.tail = HEADER_BYTES;
        Ok(())
    }

    /// Bytes a record of these ops takes.
    pub fn record_len(ops: &[(usize, u64, &[u8])]) -> u64 {
        let raw = REC_HEADER + ops.len() * OP_ENTRY + ops.iter().map(|o| o.2.len()).sum::<usize>();
        (raw as u64).next_multiple_of(ALIGN)
    }

    /// Largest record the ring holds.
    pub fn capacity(&self) -> u64 {
        self.dev.size() - HEADER_BYTES
    }

    /// Whether a record of `ops` fits before the end of the ring now.
    pub fn try_append_fits(&self, ops: &[(usize, u64, &[u8])]) -> bool {
        self.ring.lock().tail + Self::record_len(ops) <= self.dev.size()
    }

    /// Append a record if it fits before the end of the ring; `Ok(None)`
    /// when the ring must checkpoint first.  Not yet durable: see
    /// [`Journal::sync_to`].
    pub fn try_append(&self, ops: &[(usize, u64, &[u8])]) -> Result<Option<u64>, ArrayError> {
        let len = Self::record_len(ops);
        if len > self.capacity() {
            return Err(ArrayError::Usage(format!(
                "a write needs a {len}-byte journal record but the journal {} holds {} bytes; use a larger journal",
                self.dev.describe(),
                self.capacity()
            )));
        }
        let mut r = self.ring.lock();
        if r.tail + len > self.dev.size() {
            return Ok(None);
        }
        let seq = r.next_seq;
        let rec = encode_record(seq, ops);
        self.dev.write_at(&rec, r.tail).map_err(|e| ArrayError::Io(format!("{}: writing journal: {e}", self.dev.describe())))?;
        r.tail += len;
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
        let upto = self.appended.load(Ordering::Acquire);
        self.dev.flush().map_err(|e| ArrayError::Io(format!("{}: syncing journal: {e}", self.dev.describe())))?;
        self.syncs.fetch_add(1, Ordering::Relaxed);
        self.durable.fetch_max(upto, Ordering::AcqRel);
        Ok(())
    }

    /// Start over at the front.  The caller guarantees that every record
    /// appended so far has reached the members and that they are flushed.
    pub fn checkpoint(&self) -> Result<(), ArrayError> {
        let mut r = self.ring.lock();
        let cp = r.next_seq;
        self.write_header(cp)?;
        r.checkpoint = cp;
        r.tail = HEADER_BYTES;
        self.durable.fetch_max(cp - 1, Ordering::AcqRel);
        self.checkpoints.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    /// Bytes of the ring in use.
    pub fn used(&self) -> u64 {
        self.ring.lock().tail - HEADER_BYTES
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

    #[test]
    fn records_round_trip_and_end_at_the_first_bad_one() {
        let dev: Arc<dyn Member> = Arc::new(MemMember::new("j", 2 << 20));
        let id = Uuid::new_v4();
        let j = Journal::format(dev.clone(), id).unwrap();
        let a = vec![1u8; 4096];
        let b = vec![2u8; 1000];
        let s1 = j.try_append(&[(0, 4096, &a), (3, 0, &b)]).unwrap().unwrap();
        let s2 = j.try_append(&[(1, 8192, &b)]).unwrap().unwrap();
        assert_eq!((s1, s2), (1, 2));
        j.sync_to(s2).unwrap();
        let (_, recs) = Journal::open(dev.clone(), id).unwrap();
        assert_eq!(recs.len(), 2);
        assert_eq!(recs[0].1, vec![JournalOp { member: 0, offset: 4096, data: a.clone() }, JournalOp { member: 3, offset: 0, data: b.clone() }]);
        assert_eq!(recs[1].1[0].offset, 8192);
        // A torn second record ends the log after the first.
        let at = HEADER_BYTES + Journal::record_len(&[(0, 4096, &a), (3, 0, &b)]);
        let mut byte = [0u8];
        dev.read_at(&mut byte, at + 40).unwrap();
        dev.write_at(&[byte[0] ^ 0xff], at + 40).unwrap();
        let (j2, recs) = Journal::open(dev.clone(), id).unwrap();
        assert_eq!(recs.len(), 1);
        // After replay the log starts empty with the sequence moved on.
        j2.replayed().unwrap();
        let (j3, recs) = Journal::open(dev.clone(), id).unwrap();
        assert!(recs.is_empty());
        assert_eq!(j3.try_append(&[(0, 0, &b)]).unwrap(), Some(2));
    }

    #[test]
    fn full_ring_asks_for_a_checkpoint_and_wrong_journals_are_refused() {
        let dev: Arc<dyn Member> = Arc::new(MemMember::new("j", 1 << 20));
        let id = Uuid::new_v4();
        let j = Journal::format(dev.clone(), id).unwrap();
        let big = vec![7u8; 300 << 10];
        assert!(j.try_append(&[(0, 0, &big)]).unwrap().is_some());
        assert!(j.try_append(&[(0, 0, &big)]).unwrap().is_some());
        assert!(j.try_append(&[(0, 0, &big)]).unwrap().is_some());
        assert_eq!(j.try_append(&[(0, 0, &big)]).unwrap(), None, "ring full");
        j.checkpoint().unwrap();
        assert_eq!(j.try_append(&[(0, 0, &big)]).unwrap(), Some(4));
        let huge = vec![0u8; 2 << 20];
        let e = j.try_append(&[(0, 0, &huge)]).unwrap_err().to_string();
        assert!(e.contains("use a larger journal"), "{e}");
        let e = Journal::open(dev.clone(), Uuid::new_v4()).err().unwrap().to_string();
        assert!(e.contains("belongs to array"), "{e}");
        dev.write_at(&[0u8; 8], 0).unwrap();
        let e = Journal::open(dev.clone(), id).err().unwrap().to_string();
        assert!(e.contains("not a mosaic journal"), "{e}");
        let small: Arc<dyn Member> = Arc::new(MemMember::new("s", 4096));
        assert!(Journal::format(small, id).err().unwrap().to_string().contains("journal too small"));
    }
}
