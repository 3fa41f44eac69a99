//! Metadata persistence: a superblock, a checkpoint of the tables and a log
//! of table changes, in the conventional zones of every member (mirrored).
//!
//! ```text
//!   conventional zones of each member:
//!   [ superblock 4K | checkpoint slot A (S) | checkpoint slot B (S) | log ............ ]
//!
//!   superblock : "MOSAICDV" | crc32c | len | JSON { config, uuid, member }
//!   checkpoint : "DVSCKPT2" | seq | len | crc32c | journal_from | member states | GTT | per SSG: wp[], SIT rows
//!   log record : "DVLR"     | seq | len | crc32c | Append{lsn, rows} | Compact{lsn, phys, rows}
//!                                               | JournalReset{from} | Member{m, state}
//! ```
//!
//! The AMT is not stored: replaying an SSG's SIT rows in order rebuilds
//! it (a later row's chunk supersedes an earlier one), with the valid
//! counts and the slot owners.  A job's log record is written only after
//! its chunks are on the drives and flushed, and a write is acknowledged
//! only after its record is flushed on every working member, so recovery
//! = newest valid checkpoint + the unbroken run of records after it
//! (sequence numbers consecutive, checksums good).  When the log area is
//! full the tables are checkpointed into the other slot and the log starts
//! over; older records have smaller sequence numbers, so replay stops at
//! them.
//!
//! Every decoder here ([`Superblock::decode`], [`decode_record`],
//! [`peek_record`], [`decode_journal`], [`decode_checkpoint`]) checks each
//! length, count and index it reads against the buffer and the geometry
//! before use, and answers a clear error (or `None`) for bad bytes, never a
//! panic; `tests/nopanic.rs` and the `dvs_meta` fuzz target hold them to it.

use serde::{Deserialize, Serialize};

use crate::addr::{DvsConfig, Geo};
use crate::tables::{Stripe, Tables, NONE};
use crate::DvsError;
use mosaic_core::MemberState;

pub const SB_LEN: u64 = 4096;
const SB_MAGIC: &[u8; 8] = b"MOSAICDV";
const CK_MAGIC: &[u8; 8] = b"DVSCKPT2";
const LR_MAGIC: &[u8; 4] = b"DVLR";

/// Superblock contents.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Superblock {
    pub config: DvsConfig,
    pub uuid: u64,
    pub member: usize,
}

impl Superblock {
    pub fn encode(&self) -> Vec<u8> {
        let j = serde_json::to_vec(self).expect("superblock serialises");
        let mut v = Vec::with_capacity(SB_LEN as usize);
        v.extend_from_slice(SB_MAGIC);
        v.extend_from_slice(&crc32c::crc32c(&j).to_le_bytes());
        v.extend_from_slice(&(j.len() as u32).to_le_bytes());
        v.extend_from_slice(&j);
        v.resize(SB_LEN as usize, 0);
        v
    }
    pub fn decode(b: &[u8]) -> Result<Superblock, DvsError> {
        if b.len() < 16 || &b[..8] != SB_MAGIC {
            return Err(DvsError::Corrupt("no DVS superblock (not a DVS member)".into()));
        }
        let crc = u32::from_le_bytes(b[8..12].try_into().unwrap());
        let len = u32::from_le_bytes(b[12..16].try_into().unwrap()) as usize;
        let j = 16usize.checked_add(len).and_then(|end| b.get(16..end)).ok_or_else(|| DvsError::Corrupt("superblock length out of range".into()))?;
        if crc32c::crc32c(j) != crc {
            return Err(DvsError::Corrupt("superblock checksum mismatch".into()));
        }
        serde_json::from_slice(j).map_err(|e| DvsError::Corrupt(format!("superblock: {e}")))
    }
}

/// Where things live in the metadata area.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MetaLayout {
    pub slot: u64,
    pub log_start: u64,
    pub log_end: u64,
    /// The write-cache journal (empty when write-through).
    pub journal_start: u64,
    pub journal_end: u64,
}

impl MetaLayout {
    pub fn new(geo: &Geo) -> Result<MetaLayout, DvsError> {
        // The configuration comes from a superblock: check before multiplying.
        let Some(area) = geo.cfg.conventional.checked_mul(geo.cfg.zone_size) else {
            return Err(DvsError::Geometry(format!("{} conventional zones of {} bytes overflow", geo.cfg.conventional, geo.cfg.zone_size)));
        };
        if area < SB_LEN + 3 * 4096 {
            return Err(DvsError::Geometry(format!("{} conventional bytes per member cannot hold DVS metadata (need at least one conventional zone of 16 KiB)", area)));
        }
        let slot = (area - SB_LEN) / 4 / 4096 * 4096;
        let need = checkpoint_bound(geo);
        if need > slot {
            return Err(DvsError::Geometry(format!("a checkpoint may need {need} bytes but the conventional zones leave {slot} per slot: use more conventional zones or larger chunks")));
        }
        let log_start = SB_LEN + 2 * slot;
        if geo.cfg.cache_chunks == 0 {
            return Ok(MetaLayout { slot, log_start, log_end: area, journal_start: area, journal_end: area });
        }
        // Log and journal share what the checkpoints leave, half each.
        let mid = log_start + (area - log_start) / 2 / 4096 * 4096;
        if mid - log_start < 4096 {
            return Err(DvsError::Geometry("no room for a write-cache journal: use more conventional zones".into()));
        }
        Ok(MetaLayout { slot, log_start, log_end: mid, journal_start: mid, journal_end: area })
    }
    pub fn slot_offset(&self, i: u64) -> u64 {
        SB_LEN + (i % 2) * self.slot
    }
}

/// Largest checkpoint of a geometry (saturating: a geometry too large for
/// any metadata area gives `u64::MAX`).
pub fn checkpoint_bound(geo: &Geo) -> u64 {
    let (n, ssgs) = (geo.n as u64, geo.ssgs as u64);
    let per_ssg = (geo.seg_chunks as u64).saturating_mul(n).saturating_mul(10).saturating_add(8 + 4 * n);
    ssgs.saturating_mul(per_ssg).saturating_add(32 + 9 * n + 4 * ssgs)
}

// ---------------------------------------------------------------- encoding

struct W(Vec<u8>);

impl W {
    fn u8(&mut self, v: u8) {
        self.0.push(v)
    }
    fn u32(&mut self, v: u32) {
        self.0.extend_from_slice(&v.to_le_bytes())
    }
    fn state(&mut self, s: &MemberState) {
        let (kind, done) = match s {
            MemberState::Active => (0, 0),
            MemberState::Failed => (1, 0),
            MemberState::Rebuilding { done } => (2, *done),
        };
        self.u8(kind);
        self.u32(done as u32);
        self.u32((done >> 32) as u32);
    }
    fn stripes(&mut self, rows: &[Stripe]) {
        self.u32(rows.len() as u32);
        for s in rows {
            self.u8(s.lcns.len() as u8);
            self.u8(s.members.len() as u8);
            for (&m, &i) in s.members.iter().zip(&s.idx) {
                self.u8(m);
                self.u32(i);
            }
            for &l in &s.lcns {
                self.u32(l);
            }
        }
    }
}

struct R<'a>(&'a [u8], usize);

impl R<'_> {
    fn take(&mut self, n: usize) -> Result<&[u8], DvsError> {
        let s = self.0.get(self.1..self.1 + n).ok_or_else(|| DvsError::Corrupt("metadata record truncated".into()))?;
        self.1 += n;
        Ok(s)
    }
    fn u8(&mut self) -> Result<u8, DvsError> {
        Ok(self.take(1)?[0])
    }
    fn u32(&mut self) -> Result<u32, DvsError> {
        Ok(u32::from_le_bytes(self.take(4)?.try_into().unwrap()))
    }
    fn state(&mut self) -> Result<MemberState, DvsError> {
        let kind = self.u8()?;
        let done = self.u32()? as u64 | (self.u32()? as u64) << 32;
        match kind {
            0 => Ok(MemberState::Active),
            1 => Ok(MemberState::Failed),
            2 => Ok(MemberState::Rebuilding { done }),
            k => Err(DvsError::Corrupt(format!("unknown member state {k}"))),
        }
    }
    fn stripes(&mut self, geo: &Geo) -> Result<Vec<Stripe>, DvsError> {
        let n = self.u32()? as usize;
        if n > geo.seg_chunks as usize * geo.n {
            return Err(DvsError::Corrupt(format!("{n} stripes in one SSG record")));
        }
        let mut out = Vec::with_capacity(n);
        for _ in 0..n {
            let w = self.u8()? as usize;
            let cols = self.u8()? as usize;
            if w == 0 || w > geo.data || cols != w + geo.k {
                return Err(DvsError::Corrupt(format!("stripe of width {w} with {cols} columns")));
            }
            let mut members = Vec::with_capacity(cols);
            let mut idx = Vec::with_capacity(cols);
            for _ in 0..cols {
                members.push(self.u8()?);
                idx.push(self.u32()?);
            }
            let lcns = (0..w).map(|_| self.u32()).collect::<Result<Vec<_>, _>>()?;
            out.push(Stripe { lcns, members, idx });
        }
        Ok(out)
    }
}

/// A log record: one job's table changes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Record {
    Append { lsn: u32, rows: Vec<Stripe> },
    Compact { lsn: u32, phys: u32, rows: Vec<Stripe> },
    /// The write cache was destaged whole: journal records before `from`
    /// are dead.
    JournalReset { from: u64 },
    /// Member `m` changed state (failed, replaced, rebuilt up to an SSG).
    Member { m: u8, state: MemberState },
}

impl Record {
    /// The record that makes a job's table changes durable.
    pub fn of_job(job: &crate::engine::Job) -> Record {
        match job.old_phys {
            Some(_) => Record::Compact { lsn: job.lsn, phys: job.phys, rows: job.stripes.clone() },
            None => Record::Append { lsn: job.lsn, rows: job.stripes.clone() },
        }
    }

    pub fn apply(&self, t: &mut Tables) -> Result<(), DvsError> {
        match self {
            Record::Append { lsn, rows } => {
                check_lsn(t, *lsn)?;
                t.commit(*lsn, rows)
            }
            Record::Compact { lsn, phys, rows } => {
                check_lsn(t, *lsn)?;
                t.switch(*lsn, *phys)?;
                t.commit(*lsn, rows)
            }
            Record::JournalReset { from } => {
                t.journal_from = *from;
                Ok(())
            }
            Record::Member { m, state } => {
                let slot = t.member_state.get_mut(*m as usize).ok_or_else(|| DvsError::Corrupt(format!("record for member {m} of {}", t.geo.n)))?;
                *slot = *state;
                Ok(())
            }
        }
    }

    /// Framed bytes with sequence number `seq`.
    pub fn encode(&self, seq: u64) -> Vec<u8> {
        let mut p = W(Vec::new());
        match self {
            Record::Append { lsn, rows } => {
                p.u8(1);
                p.u32(*lsn);
                p.stripes(rows);
            }
            Record::Compact { lsn, phys, rows } => {
                p.u8(2);
                p.u32(*lsn);
                p.u32(*phys);
                p.stripes(rows);
            }
            Record::JournalReset { from } => {
                p.u8(3);
                p.u32(*from as u32);
                p.u32((*from >> 32) as u32);
            }
            Record::Member { m, state } => {
                p.u8(4);
                p.u8(*m);
                p.state(state);
            }
        }
        frame(LR_MAGIC, seq, &p.0)
    }

    fn decode(payload: &[u8], geo: &Geo) -> Result<Record, DvsError> {
        let mut r = R(payload, 0);
        match r.u8()? {
            1 => Ok(Record::Append { lsn: r.u32()?, rows: r.stripes(geo)? }),
            2 => Ok(Record::Compact { lsn: r.u32()?, phys: r.u32()?, rows: r.stripes(geo)? }),
            3 => Ok(Record::JournalReset { from: r.u32()? as u64 | (r.u32()? as u64) << 32 }),
            4 => Ok(Record::Member { m: r.u8()?, state: r.state()? }),
            k => Err(DvsError::Corrupt(format!("unknown log record kind {k}"))),
        }
    }
}

fn check_lsn(t: &Tables, lsn: u32) -> Result<(), DvsError> {
    if lsn >= t.geo.ssgs {
        return Err(DvsError::Corrupt(format!("record for SSG {lsn} of {}", t.geo.ssgs)));
    }
    Ok(())
}

/// magic | seq u64 | len u32 | crc u32 (of seq, len, payload) | payload
fn frame(magic: &[u8], seq: u64, payload: &[u8]) -> Vec<u8> {
    let mut v = Vec::with_capacity(magic.len() + 16 + payload.len());
    v.extend_from_slice(magic);
    v.extend_from_slice(&seq.to_le_bytes());
    v.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    let mut c = seq.to_le_bytes().to_vec();
    c.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    c.extend_from_slice(payload);
    v.extend_from_slice(&crc32c::crc32c(&c).to_le_bytes());
    v.extend_from_slice(payload);
    v
}

/// Parse a frame at the start of `b`: (seq, payload, total length).
fn unframe<'a>(magic: &[u8], b: &'a [u8]) -> Option<(u64, &'a [u8], usize)> {
    let h = magic.len();
    if b.len() < h + 16 || &b[..h] != magic {
        return None;
    }
    let seq = u64::from_le_bytes(b[h..h + 8].try_into().unwrap());
    let len = u32::from_le_bytes(b[h + 8..h + 12].try_into().unwrap()) as usize;
    let crc = u32::from_le_bytes(b[h + 12..h + 16].try_into().unwrap());
    let payload = b.get(h + 16..(h + 16).checked_add(len)?)?;
    let mut c = b[h..h + 12].to_vec();
    c.extend_from_slice(payload);
    (crc32c::crc32c(&c) == crc).then_some((seq, payload, h + 16 + len))
}

/// Length of a frame header before its payload, for reading.
pub fn record_header_len() -> usize {
    LR_MAGIC.len() + 16
}

/// Parse the header of a log record: (seq, payload length), if the magic matches.
pub fn peek_record(b: &[u8]) -> Option<(u64, usize)> {
    if b.len() < record_header_len() || &b[..4] != LR_MAGIC {
        return None;
    }
    Some((u64::from_le_bytes(b[4..12].try_into().unwrap()), u32::from_le_bytes(b[12..16].try_into().unwrap()) as usize))
}

/// Decode a complete log record frame.
pub fn decode_record(b: &[u8], geo: &Geo) -> Option<(u64, Record, usize)> {
    let (seq, payload, len) = unframe(LR_MAGIC, b)?;
    Record::decode(payload, geo).ok().map(|r| (seq, r, len))
}

const JR_MAGIC: &[u8; 4] = b"DVJR";

/// A journal record: one acknowledged write held in the write cache.
pub fn encode_journal(jseq: u64, offset: u64, data: &[u8]) -> Vec<u8> {
    let mut p = offset.to_le_bytes().to_vec();
    p.extend_from_slice(data);
    frame(JR_MAGIC, jseq, &p)
}

/// Parse a journal record at the start of `b`: (jseq, offset, data, length).
pub fn decode_journal(b: &[u8]) -> Option<(u64, u64, &[u8], usize)> {
    let (seq, payload, len) = unframe(JR_MAGIC, b)?;
    let off = u64::from_le_bytes(payload.get(..8)?.try_into().ok()?);
    Some((seq, off, &payload[8..], len))
}

/// The tables as a checkpoint frame.
pub fn encode_checkpoint(t: &Tables, seq: u64) -> Vec<u8> {
    let mut p = W(Vec::new());
    p.u32(t.journal_from as u32);
    p.u32((t.journal_from >> 32) as u32);
    for s in &t.member_state {
        p.state(s);
    }
    for &g in &t.gtt {
        p.u32(g);
    }
    let mut live = t.live.clone();
    live.sort_unstable();
    for l in live {
        let s = t.get(l).unwrap();
        p.u32(l);
        for &w in &s.wp {
            p.u32(w);
        }
        p.stripes(&s.sit);
    }
    p.u32(NONE);
    frame(CK_MAGIC, seq, &p.0)
}

/// Parse a checkpoint frame: (seq, tables).
pub fn decode_checkpoint(b: &[u8], geo: &Geo) -> Result<Option<(u64, Tables)>, DvsError> {
    let Some((seq, payload, _)) = unframe(CK_MAGIC, b) else { return Ok(None) };
    let mut r = R(payload, 0);
    let mut t = Tables::new(geo.clone());
    t.journal_from = r.u32()? as u64 | (r.u32()? as u64) << 32;
    for m in 0..geo.n {
        t.member_state[m] = r.state()?;
    }
    let mut owners = vec![NONE; geo.phys as usize];
    for lsn in 0..geo.ssgs {
        let p = r.u32()?;
        if p >= geo.phys || owners[p as usize] != NONE {
            return Err(DvsError::Corrupt(format!("GTT entry {lsn} -> segment {p} is out of range or shared")));
        }
        owners[p as usize] = lsn;
        t.gtt[lsn as usize] = p;
    }
    t.phys_owner = owners;
    loop {
        let lsn = r.u32()?;
        if lsn == NONE {
            break;
        }
        check_lsn(&t, lsn)?;
        let wp = (0..geo.n).map(|_| r.u32()).collect::<Result<Vec<_>, _>>()?;
        let rows = r.stripes(geo)?;
        t.commit(lsn, &rows)?;
        let s = t.get_mut(lsn);
        for (m, &w) in wp.iter().enumerate() {
            if w > geo.seg_chunks || w < s.wp[m] {
                return Err(DvsError::Corrupt(format!("SSG {lsn}: write pointer {w} of member {m} is inconsistent")));
            }
            s.wp[m] = w;
        }
    }
    Ok(Some((seq, t)))
}

/// Length of the journal record of `data_len` bytes (what [`encode_journal`] makes).
pub fn journal_record_len(data_len: u64) -> u64 {
    JR_MAGIC.len() as u64 + 16 + 8 + data_len
}

/// One metadata write: `bytes` at byte `offset` of the conventional zones,
/// issued to every metadata member.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetaWrite {
    pub offset: u64,
    pub bytes: Vec<u8>,
}

/// The metadata positions of an array and the tables its log and
/// checkpoints hold: where the next log record, checkpoint and journal
/// record go.  The real executor writes what this answers on every
/// metadata member; the replay front end times the same writes, so the
/// two issue the same operations by construction.
#[derive(Debug, Clone)]
pub struct MetaState {
    pub ml: MetaLayout,
    /// What the log and checkpoints hold.
    pub durable: Tables,
    /// Sequence number of the last record (or checkpoint).
    pub seq: u64,
    pub log_pos: u64,
    /// Slot of the newest checkpoint.
    pub ck_slot: u64,
    /// Journal: next record offset and sequence number.
    pub jpos: u64,
    pub jseq: u64,
}

impl MetaState {
    /// State after a checkpoint of `durable` with sequence `seq` in slot
    /// `ck_slot`: empty log and journal, journal records from `jseq`.
    pub fn new(ml: MetaLayout, durable: Tables, seq: u64, ck_slot: u64, jseq: u64) -> MetaState {
        MetaState { ml, durable, seq, log_pos: ml.log_start, ck_slot, jpos: ml.journal_start, jseq }
    }

    /// Apply `rec` to the durable tables; the write that makes it durable:
    /// the record at the end of the log, or a checkpoint when the log is full.
    pub fn log(&mut self, rec: &Record) -> Result<MetaWrite, DvsError> {
        rec.apply(&mut self.durable)?;
        let seq = self.seq + 1;
        let bytes = rec.encode(seq);
        self.seq = seq;
        if self.log_pos + bytes.len() as u64 > self.ml.log_end {
            return Ok(self.checkpoint());
        }
        let offset = self.log_pos;
        self.log_pos += bytes.len() as u64;
        Ok(MetaWrite { offset, bytes })
    }

    /// A checkpoint of the durable tables into the other slot; the log
    /// starts over.
    pub fn checkpoint(&mut self) -> MetaWrite {
        let bytes = encode_checkpoint(&self.durable, self.seq);
        let slot = (self.ck_slot + 1) % 2;
        self.ck_slot = slot;
        self.log_pos = self.ml.log_start;
        MetaWrite { offset: self.ml.slot_offset(slot), bytes }
    }

    /// Whether a journal record of `len` bytes fits after the last one.
    pub fn journal_fits(&self, len: u64) -> bool {
        self.jpos + len <= self.ml.journal_end
    }

    /// Take room for a journal record of `len` bytes: its sequence number
    /// and offset (check [`MetaState::journal_fits`] first).
    pub fn take_journal(&mut self, len: u64) -> (u64, u64) {
        let at = (self.jseq, self.jpos);
        self.jpos += len;
        self.jseq += 1;
        at
    }

    /// The whole write cache was destaged: log that the journal is empty
    /// and start it over.
    pub fn journal_reset(&mut self) -> Result<MetaWrite, DvsError> {
        let w = self.log(&Record::JournalReset { from: self.jseq })?;
        self.jpos = self.ml.journal_start;
        Ok(w)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn geo() -> Geo {
        Geo::new(DvsConfig::new(4, 1, 4096, 8 * 4096, 8, 1)).unwrap()
    }

    #[test]
    fn meta_state_places_records_checkpoints_and_journal_records() {
        let g = Geo::new(DvsConfig { cache_chunks: 8, ..DvsConfig::new(4, 1, 4096, 8 * 4096, 8, 1) }).unwrap();
        let ml = MetaLayout::new(&g).unwrap();
        let mut st = MetaState::new(ml, Tables::new(g.clone()), 0, 0, 0);
        // Records follow each other in the log, sequence numbers one up.
        let rec = Record::JournalReset { from: 3 };
        let w1 = st.log(&rec).unwrap();
        assert_eq!((w1.offset, w1.bytes.clone()), (ml.log_start, rec.encode(1)));
        let w2 = st.log(&rec).unwrap();
        assert_eq!(w2.offset, ml.log_start + w1.bytes.len() as u64);
        assert_eq!(st.durable.journal_from, 3);
        // A full log: the record becomes a checkpoint into the other slot.
        st.log_pos = ml.log_end - 1;
        let w3 = st.log(&rec).unwrap();
        assert_eq!((w3.offset, st.seq, st.ck_slot, st.log_pos), (ml.slot_offset(1), 3, 1, ml.log_start));
        assert_eq!(w3.bytes, encode_checkpoint(&st.durable, 3));
        assert_eq!(st.checkpoint().offset, ml.slot_offset(0));
        // Journal records: lengths as encoded, until the journal is full.
        let len = journal_record_len(1000);
        assert_eq!(len, encode_journal(0, 0, &[0u8; 1000]).len() as u64);
        assert_eq!(st.take_journal(len), (0, ml.journal_start));
        assert_eq!(st.take_journal(len), (1, ml.journal_start + len));
        st.jpos = ml.journal_end - len + 1;
        assert!(!st.journal_fits(len));
        let w4 = st.journal_reset().unwrap();
        assert_eq!((st.jpos, st.durable.journal_from), (ml.journal_start, 2));
        assert_eq!(w4.bytes, Record::JournalReset { from: 2 }.encode(st.seq));
        assert!(st.journal_fits(len));
    }

    #[test]
    fn checkpoint_and_records_round_trip() {
        let g = geo();
        let mut t = Tables::new(g.clone());
        let h = vec![true; 4];
        let rows = t.layout(2, &[0, 1, 2, 3, 4], &h).unwrap();
        let r1 = Record::Append { lsn: 2, rows: rows.clone() };
        r1.apply(&mut t).unwrap();
        let rows2 = crate::tables::layout_on(&g, &mut [0; 4], 0, &[0, 1, 2, 3, 4], &h).unwrap();
        let spare = t.spares().next().unwrap();
        let r2 = Record::Compact { lsn: 2, phys: spare, rows: rows2 };
        let ck = encode_checkpoint(&t, 7);
        let (seq, t2) = decode_checkpoint(&ck, &g).unwrap().unwrap();
        assert_eq!(seq, 7);
        assert_eq!(t2.gtt, t.gtt);
        assert_eq!(t2.get(2), t.get(2));
        let e = r2.encode(8);
        let (s, back, len) = decode_record(&e, &g).unwrap();
        assert_eq!((s, len), (8, e.len()));
        assert_eq!(back, r2);
        back.apply(&mut t).unwrap();
        assert_eq!(t.gtt[2], spare);
        // Member states survive a record and a checkpoint.
        let r3 = Record::Member { m: 1, state: MemberState::Rebuilding { done: 1 << 33 } };
        let (_, back3, _) = decode_record(&r3.encode(9), &g).unwrap();
        assert_eq!(back3, r3);
        back3.apply(&mut t).unwrap();
        Record::Member { m: 3, state: MemberState::Failed }.apply(&mut t).unwrap();
        assert!(Record::Member { m: 4, state: MemberState::Failed }.apply(&mut t).is_err(), "4 members: no member 4");
        let (_, t3) = decode_checkpoint(&encode_checkpoint(&t, 10), &g).unwrap().unwrap();
        assert_eq!(t3.member_state, vec![MemberState::Active, MemberState::Rebuilding { done: 1 << 33 }, MemberState::Active, MemberState::Failed]);
        // Any flipped byte is caught.
        for i in [0, 5, 13, 20, e.len() - 1] {
            let mut bad = e.clone();
            bad[i] ^= 0x40;
            assert!(decode_record(&bad, &g).is_none(), "byte {i}");
        }
        let mut bad = ck.clone();
        bad[30] ^= 1;
        assert!(decode_checkpoint(&bad, &g).unwrap().is_none());
        let sb = Superblock { config: g.cfg.clone(), uuid: 5, member: 3 };
        assert_eq!(Superblock::decode(&sb.encode()).unwrap(), sb);
        let mut b = sb.encode();
        b[20] ^= 1;
        assert!(Superblock::decode(&b).is_err());
        assert!(Superblock::decode(&[0u8; 64]).is_err());
    }
}
