//! The one journal record format: typed entries in a frame.
//!
//! Every journal of mosaic writes its records this way: the array's
//! write-ahead journal (a ring on its own device, `mosaic_array::journal`)
//! and DVS's write-cache journal (in the conventional zones of every
//! member).  A record holds device writes, logical writes (client writes a
//! cache holds) and resync marks; a journal never learns a policy's
//! protocol through special member ids.
//!
//! ```text
//!   record: frame { "MOSF" | ver | kind 0x0101 | seq | len | crc32c | payload [len] } 0 pad to 512
//!   payload:
//!     ┌ count u32 ┬ table crc32c u32 ┬ count × entry (24 bytes) ────────┬ bytes ──────────┐
//!     │           │ (count + entries)│ tag u32 | member u32 | at u64 |  │ of the device   │
//!     │           │                  │ len u64                          │ and logical     │
//!     │           │                  │                                  │ writes, in entry│
//!     └───────────┴──────────────────┴──────────────────────────────────┴ order ──────────┘
//!   entries ([`Entry`]):
//!     1 device write   member, at = member offset, len bytes
//!     2 logical write  at = logical offset, len bytes
//!     3 resync         at = stripe row whose code replay recomputes from its data, len 0
//!     4 device copy    member, at = member offset, len bytes written; its bytes in the
//!                      payload are 16, not len: seq u64 | logical offset u64, naming
//!                      the logical write (entry 2) of record `seq` of the same log
//!                      that holds the len bytes (a cache volume's destage of pages
//!                      journaled already: the bytes are not logged twice)
//! ```
//!
//! The entry table comes first and carries its own crc32c, so where a
//! damaged record wrote is known whenever its table survived
//! ([`decode_entry_table`]).  Every length is checked before use.
//! Entry 4 came with version 2 of the array journal's header (a journal
//! that may hold it says so, so older code refuses it rather than taking
//! its records for damage); records without it read as before.

use crate::frame::{self, KIND_JOURNAL_RECORD};

/// Bytes of a record's payload before its entries: the entry count and
/// the entry table's own checksum.
pub const TABLE_HEAD: usize = 8;
/// Bytes of one entry of the table.
pub const ENTRY: usize = 24;
const TAG_DEVICE: u32 = 1;
const TAG_LOGICAL: u32 = 2;
const TAG_RESYNC: u32 = 3;
const TAG_COPY: u32 = 4;
/// Bytes a device-copy entry carries in the payload: the record's
/// sequence number and the logical offset its bytes come from.
pub const COPY_BYTES: usize = 16;

/// One entry of a journal record.  `B` is its bytes: `Vec<u8>` as read,
/// `&[u8]` to append, `u64` (their count) for an [`Extent`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Entry<B = Vec<u8>> {
    /// Bytes for member `member` at `offset` (from the data offset).
    Device { member: usize, offset: u64, data: B },
    /// A client write at array offset `offset` that a cache volume
    /// acknowledged and holds in cache.
    Logical { offset: u64, data: B },
    /// Stripe row `row`'s code on the members may disagree with its data
    /// (its parity is cached): replay recomputes it from the data.
    Resync { row: u64 },
    /// `len` bytes for member `member` at `offset`: those the logical
    /// write of record `seq` of the same log holds at array offset `from`
    /// (the journal resolves it into a [`Entry::Device`] when it reads
    /// the log).
    Copy { member: usize, offset: u64, len: u64, seq: u64, from: u64 },
}

/// Where an entry writes, without its bytes (`data` is their count).
pub type Extent = Entry<u64>;


impl<B> Entry<B> {
    /// The same entry with its bytes mapped through `f`.
    pub fn map<C>(&self, f: impl FnOnce(&B) -> C) -> Entry<C> {
        match self {
            Entry::Device { member, offset, data } => Entry::Device { member: *member, offset: *offset, data: f(data) },
            Entry::Logical { offset, data } => Entry::Logical { offset: *offset, data: f(data) },
            Entry::Resync { row } => Entry::Resync { row: *row },
            Entry::Copy { member, offset, len, seq, from } => Entry::Copy { member: *member, offset: *offset, len: *len, seq: *seq, from: *from },
        }
    }

    /// Where the entry writes bytes: (member, or `None` for the array's
    /// logical space; offset).  `None` for a resync mark.
    pub fn target(&self) -> Option<(Option<usize>, u64)> {
        match self {
            Entry::Device { member, offset, .. } | Entry::Copy { member, offset, .. } => Some((Some(*member), *offset)),
            Entry::Logical { offset, .. } => Some((None, *offset)),
            Entry::Resync { .. } => None,
        }
    }
}

impl<B: AsRef<[u8]>> Entry<B> {
    /// The bytes the entry carries (none for a resync mark or a copy,
    /// whose bytes another record carries).
    pub fn bytes(&self) -> &[u8] {
        match self {
            Entry::Device { data, .. } | Entry::Logical { data, .. } => data.as_ref(),
            Entry::Resync { .. } | Entry::Copy { .. } => &[],
        }
    }

    /// Where the entry writes (a copy: the device write it stands for).
    pub fn extent(&self) -> Extent {
        match *self {
            Entry::Copy { member, offset, len, .. } => Entry::Device { member, offset, data: len },
            _ => self.map(|d| d.as_ref().len() as u64),
        }
    }

    /// Bytes of the record's payload the entry's data takes.
    fn payload_len(&self) -> usize {
        match self {
            Entry::Copy { .. } => COPY_BYTES,
            _ => self.bytes().len(),
        }
    }
}

impl Extent {
    /// Bytes the entry writes.
    pub fn len(&self) -> u64 {
        match self {
            Entry::Device { data, .. } | Entry::Logical { data, .. } => *data,
            Entry::Copy { len, .. } => *len,
            Entry::Resync { .. } => 0,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Little-endian u32 at `o` of `b` (callers check the length).
pub fn le32(b: &[u8], o: usize) -> u32 {
    u32::from_le_bytes([b[o], b[o + 1], b[o + 2], b[o + 3]])
}

/// Little-endian u64 at `o` of `b` (callers check the length).
pub fn le64(b: &[u8], o: usize) -> u64 {
    u64::from_le_bytes(std::array::from_fn(|i| b[o + i]))
}

/// The sequence number in a frame header (callers check the length).
pub fn frame_seq(h: &[u8]) -> u64 {
    le64(h, 8)
}

/// Whether `h` starts like a journal record: the frame magic and kind.
pub fn is_record_header(h: &[u8]) -> bool {
    h.len() >= frame::HEADER_LEN && frame::peek_kind(h) == Some(KIND_JOURNAL_RECORD)
}

/// Unpadded bytes of the record whose frame header is `h`, from the
/// payload length it claims (magic and checksum not checked), if that
/// length is one a frame may have.
pub fn record_raw_len(h: &[u8]) -> Option<u64> {
    let h = h.get(..frame::HEADER_LEN)?;
    let len = le32(h, 16) as usize;
    (len <= frame::MAX_PAYLOAD).then_some((frame::HEADER_LEN + len) as u64)
}

/// The entry table at the start of a record's `payload`, whose full
/// length is `payload_len` (`payload` may hold only the table): its own
/// checksum must hold and its lengths must add up to `payload_len`.
/// Each entry's extent (a copy's: the device write it stands for) and
/// whether it is a copy.
fn parse_table(payload: &[u8], payload_len: u64) -> Result<Vec<(Extent, bool)>, String> {
    let Some(head) = payload.get(..TABLE_HEAD) else { return Err("journal record entry table truncated".into()) };
    let count = le32(head, 0) as u64;
    let table_len = TABLE_HEAD as u64 + count * ENTRY as u64;
    if table_len > payload_len {
        return Err("journal record entry table exceeds its payload".into());
    }
    let Some(table) = payload.get(TABLE_HEAD..table_len as usize) else { return Err("journal record entry table truncated".into()) };
    if crc32c::crc32c_append(crc32c::crc32c(&head[0..4]), table) != le32(head, 4) {
        return Err("journal record entry table checksum mismatch".into());
    }
    let mut sum = table_len;
    let mut out = Vec::with_capacity(count as usize);
    for e in table.chunks_exact(ENTRY) {
        let (tag, member, at, len) = (le32(e, 0), le32(e, 4) as usize, le64(e, 8), le64(e, 16));
        let (e, carried) = match (tag, len) {
            (TAG_DEVICE, _) => (Entry::Device { member, offset: at, data: len }, len),
            (TAG_LOGICAL, _) => (Entry::Logical { offset: at, data: len }, len),
            (TAG_RESYNC, 0) => (Entry::Resync { row: at }, 0),
            (TAG_COPY, _) => (Entry::Device { member, offset: at, data: len }, COPY_BYTES as u64),
            _ => return Err(format!("journal record entry of unknown type {tag} (or a resync entry with bytes)")),
        };
        out.push((e, tag == TAG_COPY));
        sum = sum.checked_add(carried).ok_or("journal record entry lengths overflow")?;
    }
    if sum != payload_len {
        return Err("journal record entry table disagrees with its payload length".into());
    }
    Ok(out)
}

/// The entry table of the record at the start of `b`, best effort: `b`
/// needs the frame header and the table, not the entries' bytes, and
/// neither the frame's magic nor its checksum is checked (the table has
/// its own checksum).  `None` unless the table's checksum holds and its
/// lengths add up to the payload length the frame header claims.  Replay
/// uses it to learn where a damaged record wrote; public for fuzzing.
pub fn decode_entry_table(b: &[u8]) -> Option<Vec<Extent>> {
    let raw = record_raw_len(b)?;
    let t = parse_table(b.get(frame::HEADER_LEN..)?, raw - frame::HEADER_LEN as u64).ok()?;
    Some(t.into_iter().map(|(e, _)| e).collect())
}

/// Decode the record at the start of `b`: its sequence number, entries
/// and padded length.  Every length is checked against `b` before use.
/// What journals read records with; public for fuzzing.
pub fn decode_record(b: &[u8]) -> Result<(u64, Vec<Entry>, u64), String> {
    let f = frame::decode(b).map_err(|e| format!("no valid journal record here ({e})"))?;
    let f = f.ok_or("no journal record here (blank)")?;
    if f.kind != KIND_JOURNAL_RECORD {
        return Err(format!("no journal record here (a frame of kind {:#06x})", f.kind));
    }
    let table = parse_table(&f.payload, f.payload.len() as u64)?;
    let mut p = TABLE_HEAD + table.len() * ENTRY;
    let mut entries = Vec::with_capacity(table.len());
    for (e, copy) in table {
        // The table adds up to the payload, so every entry's bytes are in it.
        let n = if copy { COPY_BYTES } else { e.len() as usize };
        let data = f.payload.get(p..p + n).ok_or("journal record entry beyond its payload")?;
        entries.push(match e {
            Entry::Device { member, offset, data: len } if copy => Entry::Copy { member, offset, len, seq: le64(data, 0), from: le64(data, 8) },
            _ => e.map(|_| data.to_vec()),
        });
        p += n;
    }
    Ok((f.seq, entries, frame::encoded_len(f.payload.len()) as u64))
}

/// Bytes of the payload of a record of `entries`.
pub fn record_payload_len(entries: &[Entry<&[u8]>]) -> usize {
    TABLE_HEAD + entries.len() * ENTRY + entries.iter().map(Entry::payload_len).sum::<usize>()
}

/// One entry of the table, as stored.
fn entry_bytes(e: &Extent) -> [u8; ENTRY] {
    let (tag, member, at) = match *e {
        Entry::Device { member, offset, .. } => (TAG_DEVICE, member as u32, offset),
        Entry::Logical { offset, .. } => (TAG_LOGICAL, 0, offset),
        Entry::Resync { row } => (TAG_RESYNC, 0, row),
        Entry::Copy { member, offset, .. } => (TAG_COPY, member as u32, offset),
    };
    let mut b = [0u8; ENTRY];
    b[0..4].copy_from_slice(&tag.to_le_bytes());
    b[4..8].copy_from_slice(&member.to_le_bytes());
    b[8..16].copy_from_slice(&at.to_le_bytes());
    b[16..24].copy_from_slice(&e.len().to_le_bytes());
    b
}

/// Encode one record: a frame padded to whole sectors.  The caller keeps
/// the payload within [`frame::MAX_PAYLOAD`] (decoders refuse larger ones).
pub fn encode_record(seq: u64, entries: &[Entry<&[u8]>]) -> Vec<u8> {
    let mut u = encode_record_unsealed(entries);
    u.seal(seq);
    u.to_vec()
}

/// [`encode_record`] but for the sequence number, so a log can build the
/// record before it takes the lock that numbers it; the entries' bytes
/// stay where they are (see [`frame::Unsealed::pieces`]).
pub fn encode_record_unsealed<'a>(entries: &[Entry<&'a [u8]>]) -> frame::Unsealed<'a> {
    let mut table = Vec::with_capacity(TABLE_HEAD + entries.len() * ENTRY);
    table.extend_from_slice(&(entries.len() as u32).to_le_bytes());
    table.extend_from_slice(&[0u8; 4]); // the table's crc, filled below
    for e in entries {
        // A copy's table entry is its own (its extent is the device write).
        let x = match *e {
            Entry::Copy { member, offset, len, seq, from } => Entry::Copy { member, offset, len, seq, from },
            _ => e.extent(),
        };
        table.extend_from_slice(&entry_bytes(&x));
    }
    let crc = crc32c::crc32c_append(crc32c::crc32c(&table[0..4]), &table[TABLE_HEAD..]);
    table[4..8].copy_from_slice(&crc.to_le_bytes());
    // Payloads stay where they lie; a copy's 16 bytes are made here.
    let mut u = frame::Unsealed::new(KIND_JOURNAL_RECORD, &table);
    for e in entries {
        match *e {
            Entry::Device { data, .. } | Entry::Logical { data, .. } => u.push(data),
            Entry::Copy { seq, from, .. } => u.push_copy(&copy_bytes(seq, from)),
            Entry::Resync { .. } => {}
        }
    }
    u
}

/// The payload bytes of a copy entry: the record and logical offset its
/// bytes come from.
fn copy_bytes(seq: u64, from: u64) -> [u8; COPY_BYTES] {
    let mut b = [0u8; COPY_BYTES];
    b[..8].copy_from_slice(&seq.to_le_bytes());
    b[8..].copy_from_slice(&from.to_le_bytes());
    b
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_entry_kind_round_trips_and_the_table_alone_says_where() {
        let entries: [Entry<&[u8]>; 3] = [Entry::Device { member: 3, offset: 4096, data: b"abc" }, Entry::Logical { offset: 1 << 40, data: b"xy" }, Entry::Resync { row: 9 }];
        let rec = encode_record(7, &entries);
        assert_eq!(rec.len(), frame::encoded_len(record_payload_len(&entries)));
        let (seq, back, len) = decode_record(&rec).unwrap();
        assert_eq!((seq, len as usize), (7, rec.len()));
        assert_eq!(back, entries.iter().map(|e| e.map(|d| d.to_vec())).collect::<Vec<_>>());
        let mut bad = rec.clone();
        bad[frame::HEADER_LEN + TABLE_HEAD + 3 * ENTRY] ^= 1; // a data byte
        assert!(decode_record(&bad).is_err());
        assert_eq!(decode_entry_table(&bad), Some(entries.iter().map(|e| e.extent()).collect()));
        bad[frame::HEADER_LEN + TABLE_HEAD + 1] ^= 1; // the table
        assert_eq!(decode_entry_table(&bad), None);
    }

    /// A record as the format defines it, assembled the plain way.
    fn reference(seq: u64, entries: &[Entry<&[u8]>]) -> Vec<u8> {
        let count = (entries.len() as u32).to_le_bytes();
        let mut table = Vec::new();
        let mut bytes = Vec::new();
        for e in entries {
            let x = match *e {
                Entry::Copy { member, offset, len, seq, from } => Entry::Copy { member, offset, len, seq, from },
                _ => e.extent(),
            };
            table.extend_from_slice(&entry_bytes(&x));
            match *e {
                Entry::Copy { seq, from, .. } => [seq, from].iter().for_each(|v| bytes.extend_from_slice(&v.to_le_bytes())),
                _ => bytes.extend_from_slice(e.bytes()),
            }
        }
        let crc = crc32c::crc32c_append(crc32c::crc32c(&count), &table);
        let payload = [&count[..], &crc.to_le_bytes(), &table, &bytes].concat();
        frame::encode(KIND_JOURNAL_RECORD, seq, &payload)
    }

    #[test]
    fn records_are_the_bytes_the_format_defines_whichever_way_built() {
        let page = vec![0x5au8; 4096];
        let copy = |n: u64| Entry::Copy { member: n as usize % 5, offset: n * 4096, len: 4096, seq: 40 + n, from: n << 20 };
        let dev = |n: usize| Entry::Device { member: n % 5, offset: n as u64 * 512, data: &page[..100 + n] };
        let sets: Vec<Vec<Entry<&[u8]>>> = vec![
            vec![],
            vec![Entry::Logical { offset: 1 << 30, data: &page }],
            vec![Entry::Resync { row: 3 }, copy(1), copy(2)],
            vec![Entry::Resync { row: 3 }, copy(1), dev(2), dev(3)],
            vec![copy(1), Entry::Device { member: 0, offset: 0, data: &[] }, copy(2), dev(4)],
            vec![dev(1), copy(2)],
            (0..12).map(|n| if n % 3 == 0 { copy(n as u64) } else { dev(n) }).collect(),
            (0..8).map(copy).collect(),
            (0..9).map(dev).collect(),
        ];
        for es in &sets {
            assert_eq!(encode_record(7, es), reference(7, es), "{es:?}");
            let (_, back, _) = decode_record(&encode_record(7, es)).unwrap();
            assert_eq!(back.len(), es.len());
        }
    }

    #[test]
    fn a_copy_carries_its_source_not_its_bytes() {
        let entries: [Entry<&[u8]>; 2] = [Entry::Copy { member: 2, offset: 8192, len: 4096, seq: 41, from: 1 << 30 }, Entry::Device { member: 1, offset: 0, data: b"ab" }];
        let rec = encode_record(42, &entries);
        assert_eq!(record_payload_len(&entries), TABLE_HEAD + 2 * ENTRY + COPY_BYTES + 2);
        let (_, back, _) = decode_record(&rec).unwrap();
        assert_eq!(back, vec![Entry::Copy { member: 2, offset: 8192, len: 4096, seq: 41, from: 1 << 30 }, Entry::Device { member: 1, offset: 0, data: b"ab".to_vec() }]);
        // Its extent is the device write it stands for.
        let table = decode_entry_table(&rec).unwrap();
        assert_eq!(table, vec![Entry::Device { member: 2, offset: 8192, data: 4096 }, Entry::Device { member: 1, offset: 0, data: 2 }]);
        assert_eq!(table, back.iter().map(|e| e.extent()).collect::<Vec<_>>());
    }
}
