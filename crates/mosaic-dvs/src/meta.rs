//! Metadata persistence: the member labels, a checkpoint of the tables and
//! a log of table changes, in the conventional zones of every member
//! (mirrored).  Every record is a [`mosaic_format::frame`]; the label is
//! the one member label of every kind of array ([`mosaic_format::label`]).
//!
//! ```text
//!   conventional zones of each member:
//!   [ labels 128K | checkpoint slot A (S) | checkpoint slot B (S) | log .......... | journal ...... ]
//!     slot 0, 1     frames of one checkpoint   frames, back to back   frames (write cache only)
//!   the journal is the last `journal_bytes` (when set: sized to hold the write cache),
//!   else half of what the checkpoints leave
//!
//!   every frame: "MOSF" | ver | kind | seq u64 | len | crc32c | payload | zeros to 512 bytes
//!
//!   label      : kind 0x0200, seq = events: JSON { kind "dvs", array_uuid, member_uuid,
//!                member_index, members, events, member_uuids[], created,
//!                policy { config: DvsConfig, failed: [members failed on record] } }
//!   checkpoint : kind 0x0300, seq: part u32 | parts u32 | a piece of the body
//!                journal_from | member states | GTT | per SSG: wp[], SIT rows
//!   log record : kind 0x0301, seq: Append{lsn, rows} | Compact{lsn, phys, rows}
//!                                | JournalReset{from} | Member{m, state}
//!   journal    : the one journal record (kind 0x0101, seq = jseq) of one
//!                logical write entry (mosaic_format::journal)
//! ```
//!
//! The checkpoint slots and the log are a ledger of the mapped-layout kit
//! ([`mosaic_map::ledger`]): the kit decides where each checkpoint and
//! log record goes, frames them, and recovers the newest checkpoint plus
//! its unbroken run of records; DVS supplies the bodies (its tables) and
//! writes what the ledger answers on every metadata member, as programs
//! on the one executor.
//!
//! The AMT is not stored: replaying an SSG's SIT rows in order rebuilds
//! it (a later row's chunk supersedes an earlier one), with the valid
//! counts and the slot owners.  A job's log record is written only after
//! its chunks are on the drives and flushed, and a write is acknowledged
//! only after its record is flushed on every working member, so recovery
//! = newest valid checkpoint + the unbroken run of records after it
//! (frame sequence numbers consecutive, checksums good).  When the log
//! area is full the tables are checkpointed into the other slot and the
//! log starts over; older records have smaller sequence numbers, so replay
//! stops at them.  Every checkpoint takes a sequence number of its own, so
//! the parts of two checkpoints never mix: a checkpoint is valid only
//! when all its parts are, in order, with its sequence number.
//!
//! Labels carry the event counter of the one freshness rule
//! ([`mosaic_format::fresh`]): it is bumped in two rounds over every
//! member in service whenever member states change (see
//! [`MetaState::bump_events`]), so a member that was out of the array
//! when that happened is stale.  Each label write is padded to
//! [`MetaLayout::label_len`], the length of the widest label of the
//! geometry, so the simulator's twin issues writes of the same size.
//!
//! Every decoder here ([`label_config`], [`decode_record`],
//! [`decode_journal`], [`decode_checkpoint`]) checks each length, count
//! and index it reads against the buffer and the geometry before use, and
//! answers a clear error (or `None`) for bad bytes, never a panic;
//! `tests/nopanic.rs` and the `dvs_meta` fuzz target hold them to it.

use mosaic_format::frame::{self, KIND_DVS_CHECKPOINT, KIND_DVS_LOG};
use std::collections::{BTreeMap, VecDeque};
use mosaic_format::journal::{self, Entry};
use mosaic_map::ledger::{self, Ledger, LedgerLayout};
use mosaic_format::label::{Label, LABEL_AREA, SLOT_SIZE};
use mosaic_format::lost::LostRange;
use mosaic_format::scrub::ScrubRecord;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::addr::{DvsConfig, Geo};
use crate::tables::{Stripe, Tables, NONE};
use crate::DvsError;
use mosaic_core::MemberState;

/// The kind of array in a DVS member's label.
pub const LABEL_KIND: &str = "dvs";
/// The largest write piece one journal record carries.
const MAX_JOURNAL_PIECE: u64 = 16 << 20;
/// Segments per lane of a ring journal, at most (each holds at least
/// four one-block records).
const MAX_JOURNAL_SEGS: u64 = 16;
/// A ring is retired early once fewer than 1/`RING_LOW_DIV` of its
/// segments are free ([`MetaState::ring_low`]), keeping at least
/// 1/`RING_RESERVE_DIV` free ([`MetaState::ring_reserve`]).
const RING_LOW_DIV: u64 = 4;
const RING_RESERVE_DIV: u64 = 8;

/// The role a hot spare's label names (as fixed arrays' superblocks do).
pub const ROLE_SPARE: &str = "spare";
/// The role in the label of a paused hot replace's new drive: neither a
/// member nor a spare.
pub const ROLE_REPLACEMENT: &str = "replacement";

/// A hot replace paused by a clean stop, as every member's label records
/// it: the slot, the old drive's and the new drive's member UUIDs, and
/// the zones copied.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct HotRecord {
    pub member: usize,
    pub old: Uuid,
    pub new: Uuid,
    pub copied: u64,
}
/// At most this many hot spares per array: labels have one length.
pub const MAX_SPARES: usize = 4;

/// The most replaced member UUIDs a DVS label keeps; older ones are
/// forgotten.
pub const MAX_REPLACED: usize = 4;

/// What a DVS label carries beyond the shared fields (its policy blob).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DvsPolicy {
    pub config: DvsConfig,
    /// Members failed on record when the labels were written: their
    /// devices are not used until replaced (`skip` of the one rule).
    #[serde(default)]
    pub failed: Vec<usize>,
    /// The array's hot spares, by the member UUID of each spare's label.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub spares: Vec<Uuid>,
    /// [`ROLE_SPARE`] in a hot spare's own label; empty in a member's.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub role: String,
    /// The last scrub a writable open was asked for (none in a spare's
    /// label): ZFS's scan result, as a fixed array's superblock keeps it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_scrub: Option<ScrubRecord>,
    /// The member UUIDs replaced in this array, most recent last (at most
    /// [`MAX_REPLACED`]; none in a spare's label): a device carrying one
    /// is a former member, passed over at open without a word and taken
    /// back as a spare, as a fixed array's superblock lists them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub replaced: Vec<Uuid>,
    /// The hot replace paused in this array (none in a spare's label).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hot: Option<HotRecord>,
    /// Logical bytes no member can give back (a source a rebuild could
    /// not read where the code spared no column): reads of them fail
    /// until they are written again ([`mosaic_format::lost`]; none in a
    /// spare's label).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub lost: Vec<LostRange>,
}

impl DvsPolicy {
    pub fn is_spare(&self) -> bool {
        self.role == ROLE_SPARE
    }
    pub fn is_replacement(&self) -> bool {
        self.role == ROLE_REPLACEMENT
    }
}

/// The label of member `index` of a DVS array: `policy` names the
/// members failed on record and the hot spares.
pub fn label(policy: &DvsPolicy, array_uuid: Uuid, member_uuids: &[Uuid], index: usize, events: u64, created: u64) -> Label {
    Label {
        kind: LABEL_KIND.into(),
        array_uuid,
        member_uuid: member_uuids.get(index).copied().unwrap_or_default(),
        member_index: index,
        members: member_uuids.len(),
        events,
        member_uuids: member_uuids.to_vec(),
        created,
        policy: serde_json::to_value(policy).unwrap_or_default(),
        session: Uuid::nil(),
        prev_session: Uuid::nil(),
    }
}

/// The label of hot spare `uuid` of the array `member` (any member's
/// label) names: the array's identity, role spare, no member index of
/// its own (the index field is 0 and means nothing).
pub fn spare_label(member: &Label, cfg: &DvsConfig, uuid: Uuid, events: u64) -> Label {
    let policy = DvsPolicy { config: cfg.clone(), failed: vec![], spares: vec![], role: ROLE_SPARE.into(), last_scrub: None, replaced: vec![], hot: None, lost: vec![] };
    Label { member_uuid: uuid, member_index: 0, ..label(&policy, member.array_uuid, &member.member_uuids, 0, events, member.created) }
}

/// The label of a paused hot replace's new drive `uuid`, for slot
/// `index` of the array `member` (any member's label) names: role
/// replacement, so it is never taken for a member or a spare.
pub fn replacement_label(member: &Label, cfg: &DvsConfig, uuid: Uuid, index: usize, events: u64) -> Label {
    let policy = DvsPolicy { config: cfg.clone(), failed: vec![], spares: vec![], role: ROLE_REPLACEMENT.into(), last_scrub: None, replaced: vec![], hot: None, lost: vec![] };
    Label { member_uuid: uuid, ..label(&policy, member.array_uuid, &member.member_uuids, index, events, member.created) }
}

/// The policy blob of a DVS label, checked against the shared fields.
pub fn label_policy(l: &Label) -> Result<DvsPolicy, DvsError> {
    if l.kind != LABEL_KIND {
        return Err(DvsError::Corrupt(format!("a member of a {} array, not a DVS array", l.kind)));
    }
    let p: DvsPolicy = l.policy().map_err(|e| DvsError::Corrupt(e.to_string()))?;
    if p.config.members != l.members || p.failed.iter().any(|&m| m >= l.members) {
        return Err(DvsError::Corrupt(format!("label of {} members carries a configuration of {} (failed {:?})", l.members, p.config.members, p.failed)));
    }
    if p.spares.len() > MAX_SPARES || !(p.role.is_empty() || p.is_spare() || p.is_replacement()) {
        return Err(DvsError::Corrupt(format!("label lists {} hot spares (at most {MAX_SPARES}) with role {:?}", p.spares.len(), p.role)));
    }
    if p.replaced.len() > MAX_REPLACED {
        return Err(DvsError::Corrupt(format!("label lists {} replaced members, at most {MAX_REPLACED}", p.replaced.len())));
    }
    if !p.lost.is_empty() {
        let capacity = Geo::new(p.config.clone())?.capacity();
        mosaic_format::lost::check(&p.lost, capacity).map_err(|e| DvsError::Corrupt(format!("label: {e}")))?;
    }
    if let Some(h) = p.hot.filter(|h| h.member >= l.members || h.copied > p.config.zones) {
        return Err(DvsError::Corrupt(format!("label records a paused hot replace of member {} at zone {}; the array has {} members of {} zones", h.member, h.copied, l.members, p.config.zones)));
    }
    Ok(p)
}

/// The configuration a DVS label carries.
pub fn label_config(l: &Label) -> Result<DvsConfig, DvsError> {
    Ok(label_policy(l)?.config)
}

/// Bytes of every label write of an array of `cfg`: the encoding of its
/// widest label (every number at its most digits), so all label writes,
/// real and simulated, have one length.
pub fn label_write_len(cfg: &DvsConfig) -> Result<u64, DvsError> {
    let ids = vec![Uuid::nil(); cfg.members.max(1)];
    let policy = DvsPolicy {
        config: cfg.clone(),
        failed: (0..ids.len()).collect(),
        spares: vec![Uuid::nil(); MAX_SPARES],
        role: if ROLE_SPARE.len() > ROLE_REPLACEMENT.len() { ROLE_SPARE } else { ROLE_REPLACEMENT }.into(),
        last_scrub: Some(ScrubRecord::WIDEST),
        replaced: vec![Uuid::nil(); MAX_REPLACED],
        hot: Some(HotRecord { member: ids.len() - 1, old: Uuid::nil(), new: Uuid::nil(), copied: u64::MAX }),
        lost: vec![LostRange { offset: u64::MAX, len: u64::MAX }; mosaic_format::lost::MAX_LOST],
    };
    let widest = label(&policy, Uuid::nil(), &ids, ids.len() - 1, u64::MAX, u64::MAX);
    Ok(widest.encode().map_err(|e| DvsError::Geometry(e.to_string()))?.len() as u64)
}

/// Label `l` as written: encoded and padded to `len` bytes.
pub fn label_bytes(l: &Label, len: u64) -> Result<Vec<u8>, DvsError> {
    let mut b = l.encode().map_err(|e| DvsError::Other(e.to_string()))?;
    if b.len() as u64 > len {
        return Err(DvsError::Other(format!("a label of {} bytes is longer than the {len} reserved", b.len())));
    }
    b.resize(len as usize, 0);
    Ok(b)
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
    /// Bytes of every label write ([`label_write_len`]).
    pub label_len: u64,
    /// Segments per journal lane of a ring journal (`journal_ring`; 0:
    /// the journal is retired whole).
    pub jsegs: u64,
}

impl MetaLayout {
    pub fn new(geo: &Geo) -> Result<MetaLayout, DvsError> {
        let mut ml = MetaLayout::areas(geo)?;
        let lane = ml.journal_end - ml.journal_start;
        if geo.cfg.journal_ring && lane > 0 {
            ml.jsegs = (lane / journal_record_len(geo.block).saturating_mul(4)).clamp(1, MAX_JOURNAL_SEGS);
        }
        Ok(ml)
    }

    fn areas(geo: &Geo) -> Result<MetaLayout, DvsError> {
        // The configuration comes from a label: check before multiplying.
        let Some(area) = geo.cfg.conventional.checked_mul(geo.cfg.zone_size) else {
            return Err(DvsError::Geometry(format!("{} conventional zones of {} bytes overflow", geo.cfg.conventional, geo.cfg.zone_size)));
        };
        let least = LABEL_AREA + 3 * 4096;
        if area < least {
            return Err(DvsError::Geometry(format!(
                "{area} conventional bytes per member cannot hold DVS metadata: the member labels take {LABEL_AREA} bytes, checkpoints and the log more \
                 (need at least {least} bytes of conventional zones: use more conventional zones or larger zones)"
            )));
        }
        let label_len = label_write_len(&geo.cfg)?;
        let jbytes = if geo.cfg.cache_chunks == 0 { 0 } else { geo.cfg.journal_bytes.div_ceil(4096).saturating_mul(4096) };
        if jbytes > 0 && jbytes < journal_record_len(geo.block).saturating_mul(2) {
            return Err(DvsError::Geometry(format!("a journal of {jbytes} bytes holds fewer than two records of one {}-byte block", geo.block)));
        }
        if jbytes > 0 && jbytes.saturating_add(least) > area {
            return Err(DvsError::Geometry(format!("a journal of {jbytes} bytes leaves too little of the {area} conventional bytes for the labels, checkpoints and log: use more conventional zones")));
        }
        let rest = area - jbytes;
        let slot = (rest - LABEL_AREA) / 4 / 4096 * 4096;
        let need = checkpoint_bound(geo);
        if need > slot {
            return Err(DvsError::Geometry(format!("a checkpoint may need {need} bytes but the conventional zones leave {slot} per slot: use more conventional zones or larger chunks")));
        }
        let log_start = LABEL_AREA + 2 * slot;
        if jbytes > 0 {
            return Ok(MetaLayout { slot, log_start, log_end: rest, journal_start: rest, journal_end: area, label_len, jsegs: 0 });
        }
        if geo.cfg.cache_chunks == 0 {
            return Ok(MetaLayout { slot, log_start, log_end: area, journal_start: area, journal_end: area, label_len, jsegs: 0 });
        }
        // Log and journal share what the checkpoints leave, half each.
        let mid = log_start + (area - log_start) / 2 / 4096 * 4096;
        if mid - log_start < 4096 {
            return Err(DvsError::Geometry("no room for a write-cache journal: use more conventional zones".into()));
        }
        Ok(MetaLayout { slot, log_start, log_end: mid, journal_start: mid, journal_end: area, label_len, jsegs: 0 })
    }
    pub fn slot_offset(&self, i: u64) -> u64 {
        LABEL_AREA + (i % 2) * self.slot
    }
    /// Where the ledger of checkpoints and log records lives.
    pub fn ledger(&self) -> LedgerLayout {
        LedgerLayout {
            slots: [self.slot_offset(0), self.slot_offset(1)],
            slot_bytes: self.slot,
            log_start: self.log_start,
            log_end: self.log_end,
            checkpoint_kind: KIND_DVS_CHECKPOINT,
            delta_kind: KIND_DVS_LOG,
        }
    }
    /// Largest write piece one journal record holds (the real array and
    /// its twin split writes alike).
    pub fn journal_piece(&self, block: u64) -> u64 {
        let b = block.max(1);
        let piece = ((self.journal_end - self.journal_start) / 4).min(MAX_JOURNAL_PIECE) / b * b;
        if self.jsegs == 0 {
            return piece;
        }
        // A ring's record fits one segment.
        let room = self.seg_len().saturating_sub(journal_record_len(0)) / b * b;
        piece.min(room)
    }
    /// Bytes of one segment of a ring journal (0 without one).
    pub fn seg_len(&self) -> u64 {
        (self.journal_end - self.journal_start).checked_div(self.jsegs).unwrap_or(0) / 4096 * 4096
    }
}

/// The label slot written at event counter `events`.
pub fn label_offset(events: u64) -> u64 {
    (events % 2) * SLOT_SIZE
}

/// Largest checkpoint of a geometry on disk, its frames included
/// (saturating: a geometry too large for any metadata area gives `u64::MAX`).
pub fn checkpoint_bound(geo: &Geo) -> u64 {
    let (n, ssgs) = (geo.n as u64, geo.ssgs as u64);
    let per_ssg = (geo.seg_chunks as u64).saturating_mul(n).saturating_mul(10).saturating_add(8 + 4 * n);
    let body = ssgs.saturating_mul(per_ssg).saturating_add(32 + 9 * n + 4 * ssgs);
    ledger::checkpoint_len(body.min(usize::MAX as u64 / 2) as usize)
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

    /// The record's payload (what its frame carries).
    pub fn payload(&self) -> Vec<u8> {
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
        p.0
    }

    /// The record as a frame with sequence number `seq`.
    pub fn encode(&self, seq: u64) -> Vec<u8> {
        frame::encode(KIND_DVS_LOG, seq, &self.payload())
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

/// Decode a complete log record frame at the start of `b`: (seq, record,
/// bytes it takes).
pub fn decode_record(b: &[u8], geo: &Geo) -> Option<(u64, Record, usize)> {
    let (f, len) = frame::decode_kind(b, KIND_DVS_LOG)?;
    Record::decode(&f.payload, geo).ok().map(|r| (f.seq, r, len))
}

/// Journal lanes of an array of `n` members with `k` parity: one per
/// whole group of k + 1 members.
pub fn journal_lanes(n: usize, k: usize) -> usize {
    (n / (k + 1)).max(1)
}

/// The members that take the records of journal lane `lane`: members
/// lane(k+1) .. lane(k+1)+k of `meta_members` (every record survives k
/// failures; with one of them failed, k - 1, like a degraded stripe).  The
/// real array and its replay twin choose alike.
pub fn journal_members(meta_members: impl IntoIterator<Item = usize>, k: usize, lane: usize) -> Vec<usize> {
    meta_members.into_iter().filter(|&m| m / (k + 1) == lane).collect()
}

/// A journal record: one acknowledged write held in the write cache, in
/// the one journal record format ([`mosaic_format::journal`]): a logical
/// write entry.
pub fn encode_journal(jseq: u64, offset: u64, data: &[u8]) -> Vec<u8> {
    journal::encode_record(jseq, &[Entry::Logical { offset, data }])
}

/// [`encode_journal`] appended to `out` (a buffer kept for reuse); `sum`
/// is `data`'s checksum when its writer took it ([`frame::checksum`]).
pub fn encode_journal_into(out: &mut Vec<u8>, jseq: u64, offset: u64, data: &[u8], sum: Option<u32>) {
    let mut u = journal::encode_record_unsealed(&[Entry::Logical { offset, data }]);
    if let Some(sum) = sum {
        u.summed(data, sum);
    }
    u.seal(jseq);
    out.reserve(u.len());
    for p in u.pieces() {
        out.extend_from_slice(p);
    }
}

/// Parse a journal record at the start of `b`: (jseq, offset, data, bytes
/// it takes).  `None` unless it is a valid record of one logical write.
pub fn decode_journal(b: &[u8]) -> Option<(u64, u64, Vec<u8>, usize)> {
    let (seq, mut entries, len) = journal::decode_record(b).ok()?;
    match (entries.pop(), entries.is_empty()) {
        (Some(Entry::Logical { offset, data }), true) => Some((seq, offset, data, len as usize)),
        _ => None,
    }
}

/// Length of the journal record of `data_len` bytes (what [`encode_journal`] makes).
pub fn journal_record_len(data_len: u64) -> u64 {
    let payload = ((journal::TABLE_HEAD + journal::ENTRY) as u64).saturating_add(data_len);
    (frame::HEADER_LEN as u64).saturating_add(payload).div_ceil(frame::SECTOR as u64) * frame::SECTOR as u64
}

/// The tables as a checkpoint with sequence number `seq` (at least 1),
/// framed as the ledger frames it: a slot's bytes (for tests and tools).
pub fn encode_checkpoint(t: &Tables, seq: u64) -> Vec<u8> {
    let layout = LedgerLayout { slots: [0, 0], slot_bytes: u64::MAX, log_start: 0, log_end: 0, checkpoint_kind: KIND_DVS_CHECKPOINT, delta_kind: KIND_DVS_LOG };
    let mut l = Ledger { seq: seq.saturating_sub(1), ..Ledger::fresh(layout) };
    l.checkpoint(&checkpoint_body(t)).map(|w| w.bytes).unwrap_or_default()
}

fn ledger_err(e: ledger::LedgerError) -> DvsError {
    DvsError::Geometry(e.to_string())
}

/// The body of a checkpoint of `t`.
fn checkpoint_body(t: &Tables) -> Vec<u8> {
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
        let Some(s) = t.get(l) else { continue };
        p.u32(l);
        for &w in &s.wp {
            p.u32(w);
        }
        p.stripes(&s.sit);
    }
    p.u32(NONE);
    p.0
}

/// Parse a checkpoint: (seq, tables); `Ok(None)` when `b` holds no valid
/// checkpoint, an error when a valid one disagrees with the geometry.
pub fn decode_checkpoint(b: &[u8], geo: &Geo) -> Result<Option<(u64, Tables)>, DvsError> {
    let Some((seq, body)) = ledger::read_checkpoint(b, KIND_DVS_CHECKPOINT) else { return Ok(None) };
    decode_checkpoint_body(&body, geo).map(|t| Some((seq, t)))
}

/// The tables a checkpoint body holds; an error when it disagrees with
/// the geometry.
pub fn decode_checkpoint_body(body: &[u8], geo: &Geo) -> Result<Tables, DvsError> {
    let mut r = R(body, 0);
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
    Ok(t)
}

/// Recover the tables from the bytes of both checkpoint slots and of the
/// log of one member: the ledger positioned after the last record, the
/// tables.  `Ok(None)` when neither slot holds a checkpoint; an error
/// when a checkpoint or record that passed its checksum disagrees with
/// the geometry (a bug or a foreign writer, not a torn write).
pub fn recover(ml: &MetaLayout, geo: &Geo, slots: [&[u8]; 2], log: &[u8]) -> Result<Option<(Ledger, Tables)>, DvsError> {
    let mut err = None;
    let load = |b: &[u8]| decode_checkpoint_body(b, geo).map_err(|e| err = Some(e)).ok();
    let mut bad = None;
    let apply = |t: &mut Tables, p: &[u8]| match Record::decode(p, geo) {
        Ok(rec) => rec.apply(t).map_err(|e| bad = Some(e)).is_ok(),
        Err(_) => false,
    };
    let r = Ledger::recover(ml.ledger(), slots, log, load, apply);
    if let Some(e) = err.or(bad) {
        return Err(e);
    }
    Ok(r.map(|(l, t, _)| (l, t)))
}

/// One metadata write: `bytes` at byte `offset` of the conventional zones,
/// issued to every metadata member.
pub use mosaic_map::ledger::LedgerWrite as MetaWrite;

/// A ring's retirement ([`MetaState::retire`]): its log record, and the
/// segments it frees (not to be written before the record is durable).
#[derive(Debug, Clone)]
pub struct Retired {
    pub write: MetaWrite,
    pub segs: Vec<u64>,
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
    /// Where the next checkpoint and log record go.
    pub ledger: Ledger,
    /// Journal: next record position and sequence number.  The journal
    /// has `lanes` lanes, lane l the journal area of members l(k+1) ..
    /// l(k+1)+k; records fill lane 0, then lane 1, ...; `jpos` is a
    /// position in the lanes laid end to end (`journal_start` + lane x
    /// the journal's length + offset in it).
    pub jpos: u64,
    pub jseq: u64,
    pub lanes: u64,
    /// A ring journal's segments in use, oldest first: (segment, sequence
    /// number of the record at its start).  The oldest one's is the
    /// logged `journal_from`.
    pub segs: VecDeque<(u64, u64)>,
    /// A ring journal's SSGs holding cached blocks: the oldest record
    /// written to each since it was last destaged.
    pub live: BTreeMap<u32, u64>,
    /// The event counter of the labels ([`MetaState::bump_events`]).
    pub events: u64,
}

impl MetaState {
    /// State with the ledger at `ledger` (as recovered): an empty
    /// journal, its records from `jseq`.
    pub fn new(ml: MetaLayout, durable: Tables, ledger: Ledger, jseq: u64) -> MetaState {
        let lanes = journal_lanes(durable.geo.n, durable.geo.k) as u64;
        let segs = if ml.jsegs > 0 { VecDeque::from([(0, jseq)]) } else { VecDeque::new() };
        MetaState { ml, durable, ledger, jpos: ml.journal_start, jseq, lanes, segs, live: BTreeMap::new(), events: 0 }
    }

    /// The state of a newly created array holding `durable`, and the
    /// first checkpoint's write (the simulator's twin starts here too).
    pub fn created(ml: MetaLayout, durable: Tables) -> Result<(MetaState, MetaWrite), DvsError> {
        let mut st = MetaState::new(ml, durable, Ledger::fresh(ml.ledger()), 0);
        let w = st.checkpoint()?;
        Ok((st, w))
    }

    /// The sequence number of the last record (or checkpoint).
    pub fn seq(&self) -> u64 {
        self.ledger.seq
    }

    /// One round of a label update: the event counter one up, and the
    /// offset of the slot its labels go to.  Member states change in two
    /// rounds (each reaching every member in service before the next),
    /// so a member out of service meanwhile ends up two events behind:
    /// stale, by the one freshness rule.
    pub fn bump_events(&mut self) -> (u64, u64) {
        self.events += 1;
        (label_offset(self.events), self.events)
    }

    /// Apply `rec` to the durable tables; the write that makes it durable:
    /// the record at the end of the log, or a checkpoint when the log is full.
    pub fn log(&mut self, rec: &Record) -> Result<MetaWrite, DvsError> {
        rec.apply(&mut self.durable)?;
        match self.ledger.delta(&rec.payload()) {
            Ok(Some(w)) => Ok(w),
            // Full, or too large for any log: the tables are checkpointed.
            Ok(None) | Err(_) => self.checkpoint(),
        }
    }

    /// A checkpoint of the durable tables into the other slot, with a
    /// sequence number of its own; the log starts over.
    pub fn checkpoint(&mut self) -> Result<MetaWrite, DvsError> {
        self.ledger.checkpoint(&checkpoint_body(&self.durable)).map_err(ledger_err)
    }

    /// Bytes of one journal lane (the journal area of a member).
    pub fn lane_len(&self) -> u64 {
        self.ml.journal_end - self.ml.journal_start
    }

    /// Where a journal record of `len` bytes goes after the last one (a
    /// position in the lanes laid end to end; the next lane, or a ring's
    /// next segment, when the rest of this one is too short), or None
    /// when the journal is full.
    pub fn journal_place(&self, len: u64) -> Option<u64> {
        if self.ml.jsegs > 0 {
            return self.ring_place(len, 0);
        }
        let (l, v) = (self.lane_len(), self.jpos - self.ml.journal_start);
        if l == 0 || len > l {
            return None;
        }
        let v = if v % l + len <= l { v } else { (v / l + 1) * l };
        (v + len <= self.lanes.max(1) * l).then_some(v)
    }

    /// Segments of a ring journal, over all lanes.
    pub fn nsegs(&self) -> u64 {
        self.ml.jsegs * self.lanes.max(1)
    }

    /// Where segment `s` of a ring starts (a position in the lanes laid
    /// end to end).
    pub fn seg_start(&self, s: u64) -> u64 {
        let j = self.ml.jsegs.max(1);
        (s / j) * self.lane_len() + (s % j) * self.ml.seg_len()
    }

    /// The ring segment holding position `v`.
    pub fn seg_of(&self, v: u64) -> u64 {
        let (l, j) = (self.lane_len().max(1), self.ml.jsegs.max(1));
        (v / l) * j + ((v % l) / self.ml.seg_len().max(1)).min(j - 1)
    }

    /// [`MetaState::journal_place`] of a ring once its `retired` oldest
    /// segments are retired.
    fn ring_place(&self, len: u64, retired: usize) -> Option<u64> {
        let &(head, _) = self.segs.back()?;
        let (v, seg) = (self.jpos - self.ml.journal_start, self.ml.seg_len());
        if len > seg {
            return None;
        }
        if v + len <= self.seg_start(head) + seg {
            return Some(v);
        }
        let next = (head + 1) % self.nsegs().max(1);
        let front = self.segs.get(retired).map_or(head, |x| x.0);
        let used = self.segs.len() - retired.min(self.segs.len() - 1);
        (next != front && (used as u64) < self.nsegs()).then(|| self.seg_start(next))
    }

    /// Whether the journal is a ring retired piecewise.
    pub fn ring(&self) -> bool {
        self.ml.jsegs > 0
    }

    /// A ring: record `seq` carries `len` bytes at logical byte `offset`,
    /// so the SSGs it touches hold live records from `seq` on.
    pub fn note_write(&mut self, seq: u64, offset: u64, len: u64) {
        if !self.ring() {
            return;
        }
        for (key, ..) in self.durable.geo.pieces(offset, len) {
            self.live.entry(key.0).or_insert(seq);
        }
    }

    /// A ring: forget the SSGs the write cache no longer holds (their
    /// records are dead).
    pub fn prune(&mut self, cache: &crate::cache::SsgCache) {
        if !self.live.is_empty() {
            self.live.retain(|&l, _| cache.len_of(l) > 0);
        }
    }

    /// The oldest live record of a ring (the next one when none is).
    fn live_tail(&self) -> u64 {
        self.live.values().copied().min().unwrap_or(self.jseq)
    }

    /// How many of a ring's oldest segments hold only dead records.
    fn retirable(&self) -> usize {
        let tail = self.live_tail();
        (1..self.segs.len()).take_while(|&i| self.segs[i].1 <= tail).count()
    }

    /// Free segments of a ring below which it is retired early, at the
    /// next record that opens a segment (a quarter of its segments; none
    /// for a ring of fewer than four): the retirement's log record then
    /// runs in the background, behind the destages it depends on, while
    /// the writer fills the segments still free.  With
    /// [`MetaState::ring_reserve`], the one rule the real array and its
    /// replay twin share.
    pub fn ring_low(&self) -> u64 {
        if self.ring() {
            self.nsegs() / RING_LOW_DIV
        } else {
            0
        }
    }

    /// Free segments a ring's retirement keeps, destaging the SSG holding
    /// the oldest live record when retiring alone does not (an eighth
    /// of its segments, at least enough for the record): the journal is
    /// never full when such a destage is planned, so the writer goes on
    /// while it and the retirement run.  The segments a retirement frees
    /// are written only once it is durable, behind every program queued
    /// before it (a GC of a whole segment takes milliseconds): the
    /// reserve is the writer's head start.  With a sixteenth (2 of 32
    /// segments) the writer of `mosaic bench dvs` caught up with queued
    /// retirements and spent nearly half its time waiting for them (a quarter
    /// of the waits over 0.5 ms); an eighth costs 0.2% more device
    /// operations (earlier destages) and cuts that waiting by more than
    /// half (`docs/PERFORMANCE.md`, DVS eighth round).
    pub fn ring_reserve(&self) -> u64 {
        if self.ring() {
            self.nsegs() / RING_RESERVE_DIV
        } else {
            0
        }
    }

    /// Segments of a ring not in use once its `retired` oldest are.
    fn free_segs(&self, retired: usize) -> u64 {
        let used = self.segs.len() - retired.min(self.segs.len().saturating_sub(1));
        self.nsegs().saturating_sub(used as u64)
    }

    /// Whether room must be made before a journal record of `len` bytes
    /// ([`MetaState::room_jobs`], [`MetaState::retire`]): it does not
    /// fit, or it opens a segment of a ring with fewer than
    /// [`MetaState::ring_low`] segments free.
    pub fn needs_room(&self, len: u64) -> bool {
        match self.journal_place(len) {
            None => true,
            Some(v) => self.free_segs(0) < self.ring_low() && self.segs.back().is_some_and(|x| x.0 != self.seg_of(v)),
        }
    }

    /// A ring that needs room ([`MetaState::needs_room`]): destage the
    /// SSG holding the oldest live record until retiring the segments
    /// left dead makes room for a record of `len` bytes and leaves at
    /// least [`MetaState::ring_reserve`] segments free; the destage jobs, in
    /// order (run them, then log [`MetaState::retire`]).  The real array
    /// and its replay twin choose alike.
    pub fn room_jobs(&mut self, dvs: &mut crate::engine::Dvs, len: u64) -> Result<Vec<crate::engine::Job>, DvsError> {
        let mut jobs = Vec::new();
        loop {
            self.prune(&dvs.cache);
            let r = self.retirable();
            if self.ring_place(len, r).is_some() && self.free_segs(r) >= self.ring_reserve() {
                return Ok(jobs);
            }
            let Some((&lsn, _)) = self.live.iter().min_by_key(|x| (*x.1, *x.0)) else { return Ok(jobs) };
            jobs.push(dvs.destage(lsn)?);
        }
    }

    /// Retire a ring's oldest segments that hold only dead records: the
    /// log record naming the first live one and the segments it frees
    /// (None when none is dead).  Log it before the freed segments are
    /// written again.
    pub fn retire(&mut self) -> Result<Option<Retired>, DvsError> {
        let n = self.retirable();
        if n == 0 {
            return Ok(None);
        }
        let segs = self.segs.drain(..n).map(|x| x.0).collect();
        let from = self.segs.front().map_or(self.jseq, |x| x.1);
        let write = self.log(&Record::JournalReset { from })?;
        Ok(Some(Retired { write, segs }))
    }

    /// Whether a journal record of `len` bytes fits after the last one.
    pub fn journal_fits(&self, len: u64) -> bool {
        self.journal_place(len).is_some()
    }

    /// The lane of a position [`MetaState::journal_place`] answered.
    pub fn lane_of(&self, v: u64) -> usize {
        (v / self.lane_len().max(1)) as usize
    }

    /// Take room for a journal record of `len` bytes: its sequence
    /// number, its offset in the metadata area and its lane (check
    /// [`MetaState::journal_fits`] first).
    pub fn take_journal(&mut self, len: u64) -> (u64, u64, usize) {
        let v = self.journal_place(len).unwrap_or(self.jpos - self.ml.journal_start);
        let s = self.seg_of(v);
        if self.ring() && self.segs.back().map(|x| x.0) != Some(s) {
            self.segs.push_back((s, self.jseq));
        }
        self.jpos = self.ml.journal_start + v + len;
        self.jseq += 1;
        (self.jseq - 1, self.ml.journal_start + v % self.lane_len().max(1), self.lane_of(v))
    }

    /// The whole write cache was destaged: log that the journal is empty
    /// and start it over.
    pub fn journal_reset(&mut self) -> Result<MetaWrite, DvsError> {
        let w = self.log(&Record::JournalReset { from: self.jseq })?;
        self.jpos = self.ml.journal_start;
        self.live.clear();
        self.segs.clear();
        if self.ring() {
            self.segs.push_back((0, self.jseq));
        }
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
    fn a_sized_journal_takes_the_end_of_the_conventional_zones() {
        let c = DvsConfig { cache_chunks: 8, ..DvsConfig::new(4, 1, 4096, 8 * 4096, 16, 6) };
        let area = 6 * 8 * 4096;
        let ml = MetaLayout::new(&Geo::new(DvsConfig { journal_bytes: 20_000, ..c.clone() }).unwrap()).unwrap();
        assert_eq!((ml.journal_start, ml.journal_end, ml.log_end), (area - 20_480, area, area - 20_480));
        assert!(ml.log_start < ml.log_end);
        let old = MetaLayout::new(&Geo::new(c.clone()).unwrap()).unwrap();
        assert_eq!(old.journal_end - old.journal_start, (area - old.log_start) / 2 / 4096 * 4096);
        for bad in [area, area - 4096, u64::MAX] {
            assert!(MetaLayout::new(&Geo::new(DvsConfig { journal_bytes: bad, ..c.clone() }).unwrap()).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_ring_journal_reuses_segments_whose_records_are_dead() {
        let c = DvsConfig { cache_chunks: 8, journal_ring: true, ..DvsConfig::new(4, 1, 4096, 8 * 4096, 16, 6) };
        let g = Geo::new(c).unwrap();
        let ml = MetaLayout::new(&g).unwrap();
        assert!(ml.jsegs > 1, "{ml:?}");
        let mut st = MetaState::created(ml, Tables::new(g.clone())).unwrap().0;
        let len = journal_record_len(512);
        let mut n = 0;
        while st.journal_fits(len) {
            let (seq, ..) = st.take_journal(len);
            st.note_write(seq, 0, 512);
            n += 1;
        }
        assert_eq!(st.segs.len() as u64, st.nsegs(), "every segment holds records");
        assert!(st.retire().unwrap().is_none(), "record 0 (SSG 0) is live: nothing retires");
        st.live.clear(); // SSG 0 destaged
        let r = st.retire().unwrap().unwrap();
        assert_eq!(r.segs, (0..st.nsegs() - 1).collect::<Vec<_>>(), "the segments freed, oldest first");
        let w = r.write;
        assert_eq!(st.segs.len(), 1, "all but the newest segment retired");
        assert_eq!(st.durable.journal_from, st.segs[0].1);
        assert_eq!(w.bytes, Record::JournalReset { from: st.segs[0].1 }.encode(st.seq()));
        assert_eq!(st.take_journal(len), (n, ml.journal_start, 0), "the ring wraps to the first segment");
        assert_eq!(st.segs.len(), 2);
    }

    /// The early rule: a record that opens a segment of a ring with fewer
    /// than a quarter of its segments free needs room, a record inside
    /// its segment does not; retiring the dead segments then leaves the
    /// ring below the mark no more.
    #[test]
    fn a_ring_is_retired_early_at_a_segment_opening() {
        let c = DvsConfig { cache_chunks: 8, journal_ring: true, ..DvsConfig::new(4, 1, 4096, 8 * 4096, 16, 6) };
        let g = Geo::new(c).unwrap();
        let mut st = MetaState::created(MetaLayout::new(&g).unwrap(), Tables::new(g.clone())).unwrap().0;
        let len = journal_record_len(512);
        assert!(st.nsegs() >= 8 && st.ring_low() == st.nsegs() / 4, "{}", st.nsegs());
        let mut opened_low = false;
        while st.journal_fits(len) {
            let opens = st.journal_place(len).is_some_and(|v| st.segs.back().map(|x| x.0) != Some(st.seg_of(v)));
            let low = st.free_segs(0) < st.ring_low();
            assert_eq!(st.needs_room(len), opens && low, "at record {}", st.jseq);
            if opens && low {
                opened_low = true;
                break;
            }
            let (seq, ..) = st.take_journal(len);
            st.note_write(seq, 0, 512);
        }
        assert!(opened_low, "the ring reached its mark before it was full");
        st.live.clear(); // SSG 0 destaged: every record is dead
        assert!(st.retire().unwrap().is_some());
        assert!(!st.needs_room(len) && st.free_segs(0) >= st.ring_low());
    }

    /// The reserve, the writer's head start on a retirement (see
    /// [`MetaState::ring_reserve`]): random one-block writes through an
    /// SSG cache, every fourth to one hot block (its SSG stays cached,
    /// so its oldest record stays live until a destage is forced), room
    /// made as the array makes it; every time room is
    /// made at least an eighth of the ring is left free, and the whole
    /// journal never has to be retired.
    #[test]
    fn making_room_leaves_an_eighth_of_a_ring_free() {
        use crate::engine::{Dvs, DvsParams};
        let c = DvsConfig { cache_chunks: 64, journal_ring: true, journal_bytes: 48 * 4096 * 9 / 8, ..DvsConfig::new(4, 1, 4096, 8 * 4096, 96, 40) };
        let g = Geo::new(c).unwrap();
        let mut st = MetaState::created(MetaLayout::new(&g).unwrap(), Tables::new(g.clone())).unwrap().0;
        let mut dvs = Dvs::new(g.clone(), DvsParams::cached(64));
        assert!(st.nsegs() >= 16 && st.ring_reserve() == st.nsegs() / 8, "{}", st.nsegs());
        let (blocks, len) = (g.capacity() / 4096, journal_record_len(4096));
        let (mut x, mut made, mut forced) = (7u64, 0, 0);
        for i in 0..4000 {
            if st.needs_room(len) {
                let jobs = st.room_jobs(&mut dvs, len).unwrap();
                st.retire().unwrap();
                made += 1;
                forced += jobs.len();
                assert!(st.journal_fits(len), "room made without retiring the whole journal");
                assert!(st.free_segs(0) >= st.ring_reserve(), "{} free of {} after {} destages", st.free_segs(0), st.nsegs(), jobs.len());
            }
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let off = if i % 4 == 0 { 0 } else { (x >> 33) % blocks * 4096 };
            let (seq, ..) = st.take_journal(len);
            let (fg, bg) = dvs.write(off, 4096, 0).unwrap();
            if !fg.is_empty() || !bg.is_empty() {
                st.prune(&dvs.cache);
            }
            st.note_write(seq, off, 4096);
        }
        assert!(made > 10 && forced > 10, "room was made {made} times, {forced} destages forced");
    }

    #[test]
    fn meta_state_places_records_checkpoints_and_journal_records() {
        // 6 conventional zones of 32 KiB: the labels, then 64 KiB for the rest.
        let g = Geo::new(DvsConfig { cache_chunks: 8, ..DvsConfig::new(4, 1, 4096, 8 * 4096, 16, 6) }).unwrap();
        let ml = MetaLayout::new(&g).unwrap();
        let (mut st, ck) = MetaState::created(ml, Tables::new(g.clone())).unwrap();
        assert_eq!((ck.offset, st.seq(), st.ledger.slot), (ml.slot_offset(0), 1, 0));
        // Records follow each other in the log, sequence numbers one up.
        let rec = Record::JournalReset { from: 3 };
        let w1 = st.log(&rec).unwrap();
        assert_eq!((w1.offset, w1.bytes.clone()), (ml.log_start, rec.encode(2)));
        let w2 = st.log(&rec).unwrap();
        assert_eq!(w2.offset, ml.log_start + w1.bytes.len() as u64);
        assert_eq!(st.durable.journal_from, 3);
        assert_eq!(w1.bytes.len(), 512, "frames are padded to whole sectors");
        // A full log: the record becomes a checkpoint into the other slot,
        // with a sequence number of its own.
        st.ledger.pos = ml.log_end - 1;
        let w3 = st.log(&rec).unwrap();
        assert_eq!((w3.offset, st.seq(), st.ledger.slot, st.ledger.pos), (ml.slot_offset(1), 4, 1, ml.log_start));
        assert_eq!(w3.bytes, encode_checkpoint(&st.durable, 4));
        assert!(w3.bytes.len() as u64 <= checkpoint_bound(&g));
        assert_eq!(st.checkpoint().unwrap().offset, ml.slot_offset(0));
        assert_eq!(st.seq(), 5);
        // Label rounds alternate the two label slots.
        assert_eq!(st.bump_events(), (SLOT_SIZE, 1));
        assert_eq!(st.bump_events(), (0, 2));
        // Journal records: lengths as encoded, until the journal is full.
        let len = journal_record_len(1000);
        assert_eq!(len, encode_journal(0, 0, &[0u8; 1000]).len() as u64);
        // Encoded into a kept buffer: appended, the same bytes.
        let mut kept = vec![7u8; 3];
        encode_journal_into(&mut kept, 5, 4096, &[1u8; 1000], None);
        assert_eq!(kept[..3], [7, 7, 7]);
        assert_eq!(kept[3..], encode_journal(5, 4096, &[1u8; 1000])[..]);
        assert_eq!(decode_journal(&kept[3..]).map(|(q, o, d, n)| (q, o, d.len(), n as u64)), Some((5, 4096, 1000, len)));
        assert_eq!(st.take_journal(len), (0, ml.journal_start, 0));
        assert_eq!(st.take_journal(len), (1, ml.journal_start + len, 0));
        // 4 members, k = 1: two lanes; a record that does not fit the
        // rest of lane 0 starts lane 1, at the same offsets.
        st.jpos = ml.journal_end - len + 1;
        assert_eq!(st.take_journal(len), (2, ml.journal_start, 1));
        assert_eq!(journal_members(0..4, 1, 1), vec![2, 3]);
        st.jpos = ml.journal_end + st.lane_len() - len + 1;
        assert!(!st.journal_fits(len));
        let w4 = st.journal_reset().unwrap();
        assert_eq!((st.jpos, st.durable.journal_from), (ml.journal_start, 3));
        assert_eq!(w4.bytes, Record::JournalReset { from: 3 }.encode(st.seq()));
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
        // Any flipped byte of the frame is caught (the padding after it is
        // not covered).
        assert_eq!(e.len() % 512, 0);
        for i in [0, 5, 13, 20, 24 + r2.payload().len() - 1] {
            let mut bad = e.clone();
            bad[i] ^= 0x40;
            assert!(decode_record(&bad, &g).is_none(), "byte {i}");
        }
        let mut bad = ck.clone();
        bad[30] ^= 1;
        assert!(decode_checkpoint(&bad, &g).unwrap().is_none());
        assert!(decode_record(&e[..e.len() - 1], &g).is_none(), "a torn frame");
    }

    #[test]
    fn a_checkpoint_of_many_parts_is_valid_only_whole() {
        let g = geo();
        let mut t = Tables::new(g.clone());
        t.journal_from = 77;
        // A small body is one part.
        let ck = encode_checkpoint(&t, 3);
        assert_eq!(ck.len(), 512);
        let (seq, back) = decode_checkpoint(&ck, &g).unwrap().unwrap();
        assert_eq!((seq, back.journal_from), (3, 77));
        // Hand-made parts: the body split in three.
        let body = checkpoint_body(&t);
        let parts = |seqs: [u64; 3]| -> Vec<u8> {
            let cut = [0, body.len() / 3, 2 * body.len() / 3, body.len()];
            (0..3usize)
                .flat_map(|i| {
                    let mut p = (i as u32).to_le_bytes().to_vec();
                    p.extend_from_slice(&3u32.to_le_bytes());
                    p.extend_from_slice(&body[cut[i]..cut[i + 1]]);
                    frame::encode(KIND_DVS_CHECKPOINT, seqs[i], &p)
                })
                .collect()
        };
        let (seq, back) = decode_checkpoint(&parts([9, 9, 9]), &g).unwrap().unwrap();
        assert_eq!((seq, back.journal_from, back.gtt.clone()), (9, 77, t.gtt.clone()));
        assert!(decode_checkpoint(&parts([9, 8, 9]), &g).unwrap().is_none(), "parts of two checkpoints");
        let whole = parts([9, 9, 9]);
        assert!(decode_checkpoint(&whole[..whole.len() - 512], &g).unwrap().is_none(), "a torn checkpoint");
    }

    #[test]
    fn labels_carry_the_config_and_have_one_length() {
        let g = geo();
        let ids: Vec<Uuid> = (0..4).map(|_| Uuid::new_v4()).collect();
        let spares: Vec<Uuid> = (0..MAX_SPARES).map(|_| Uuid::new_v4()).collect();
        let policy = DvsPolicy { config: g.cfg.clone(), failed: vec![1], spares: spares.clone(), role: String::new(), last_scrub: Some(ScrubRecord { end: 1_800_000_000, millis: 1234, stripes: 16, mismatched: 1, unverified: 2, repaired: true, interrupted: false }), replaced: vec![Uuid::from_u128(5)], hot: None, lost: vec![] };
        let l = label(&policy, Uuid::new_v4(), &ids, 2, 7, 1_700_000_000);
        let len = label_write_len(&g.cfg).unwrap();
        let b = label_bytes(&l, len).unwrap();
        assert_eq!(b.len() as u64, len);
        let back = Label::decode(&b).unwrap();
        assert_eq!(back, l);
        assert_eq!(label_policy(&back).unwrap(), policy);
        // A spare's label: the array's identity, role spare, its own UUID.
        let sp = spare_label(&l, &g.cfg, spares[0], 9);
        let back = Label::decode(&label_bytes(&sp, len).unwrap()).unwrap();
        let p = label_policy(&back).unwrap();
        assert!(p.is_spare() && p.spares.is_empty());
        assert_eq!((back.array_uuid, back.member_uuid, back.events), (l.array_uuid, spares[0], 9));
        // Too many spares, or a role of no meaning, is a damaged label.
        let mut more = policy.clone();
        more.spares.push(Uuid::new_v4());
        assert!(label_policy(&label(&more, l.array_uuid, &ids, 0, 1, 1)).unwrap_err().to_string().contains("hot spares"));
        let odd = DvsPolicy { role: "leader".into(), ..policy.clone() };
        assert!(label_policy(&label(&odd, l.array_uuid, &ids, 0, 1, 1)).is_err());
        // The most replaced members a label lists fit its one length; more is damage.
        let full = DvsPolicy { replaced: (0..MAX_REPLACED).map(|_| Uuid::new_v4()).collect(), ..policy.clone() };
        assert_eq!(label_bytes(&label(&full, l.array_uuid, &ids, 3, u64::MAX, u64::MAX), len).unwrap().len() as u64, len);
        let over = DvsPolicy { replaced: (0..=MAX_REPLACED).map(|_| Uuid::new_v4()).collect(), ..policy.clone() };
        assert!(label_policy(&label(&over, l.array_uuid, &ids, 0, 1, 1)).unwrap_err().to_string().contains("replaced members"));
        // The most lost ranges fit too, kept as they were; ranges out of
        // order or past the capacity are damage.
        let cap = g.capacity();
        let most: Vec<LostRange> = (0..mosaic_format::lost::MAX_LOST as u64).map(|i| LostRange { offset: cap - 2 * (i + 1) * 512, len: 512 }).rev().collect();
        let lossy = DvsPolicy { lost: most.clone(), ..full.clone() };
        let b = label_bytes(&label(&lossy, l.array_uuid, &ids, 3, u64::MAX, u64::MAX), len).unwrap();
        assert_eq!(label_policy(&Label::decode(&b).unwrap()).unwrap().lost, most);
        for bad in [vec![LostRange { offset: cap - 512, len: 1024 }], vec![LostRange { offset: 4096, len: 512 }, LostRange { offset: 0, len: 512 }], vec![LostRange { offset: 0, len: 0 }]] {
            let e = label_policy(&label(&DvsPolicy { lost: bad, ..policy.clone() }, l.array_uuid, &ids, 0, 1, 1)).unwrap_err().to_string();
            assert!(e.contains("lost range"), "{e}");
        }
        let mut other = back.clone();
        other.kind = "fixed".into();
        assert!(label_config(&other).unwrap_err().to_string().contains("not a DVS array"));
        other.kind = LABEL_KIND.into();
        other.policy = serde_json::json!({ "chunk": "big" });
        assert!(label_config(&other).is_err());
        assert_eq!(label_offset(7), SLOT_SIZE);
        // A paused hot replace: recorded in full at the one length, the
        // new drive's label of role replacement; a record out of the
        // array's range is damage.
        let rec = HotRecord { member: 3, old: ids[3], new: Uuid::new_v4(), copied: g.cfg.zones };
        let paused = DvsPolicy { hot: Some(rec), ..full.clone() };
        let b = label_bytes(&label(&paused, l.array_uuid, &ids, 3, u64::MAX, u64::MAX), len).unwrap();
        assert_eq!(label_policy(&Label::decode(&b).unwrap()).unwrap().hot, Some(rec));
        let r = replacement_label(&l, &g.cfg, rec.new, 3, 9);
        let back = Label::decode(&label_bytes(&r, len).unwrap()).unwrap();
        let p = label_policy(&back).unwrap();
        assert!(p.is_replacement() && !p.is_spare());
        assert_eq!((back.member_uuid, back.member_index), (rec.new, 3));
        for bad in [HotRecord { member: 4, ..rec }, HotRecord { copied: g.cfg.zones + 1, ..rec }] {
            let e = label_policy(&label(&DvsPolicy { hot: Some(bad), ..policy.clone() }, l.array_uuid, &ids, 0, 1, 1)).unwrap_err().to_string();
            assert!(e.contains("paused hot replace"), "{e}");
        }
    }
}
