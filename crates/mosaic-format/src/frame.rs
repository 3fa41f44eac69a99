//! The one crc32c frame codec of the project.
//!
//! Every piece of metadata that mosaic writes to a device is framed the
//! same way: member labels (the one superblock format, [`crate::label`]),
//! journal records (the array's write-ahead journal and DVS's write
//! cache), DVS's checkpoints and metadata log, write-intent bitmap blocks,
//! the block map's label, checkpoints and delta log, and the header of an
//! emulated zoned drive.  So one decoder, with one set of no-panic tests
//! and one fuzz target, guards every on-disk structure.
//!
//! ```text
//!  0       4     6     8             16      20      24               24+len   k*512
//!  +-------+-----+-----+-------------+-------+-------+----------------+---------+
//!  | magic | ver | kind|     seq     |  len  | crc   | payload [len]  | 0 pad   |
//!  +-------+-----+-----+-------------+-------+-------+----------------+---------+
//!    u32     u16   u16      u64        u32     u32
//!  all little-endian; magic = b"MOSF"; crc = crc32c(bytes 0..20 ++ payload)
//! ```
//!
//! A frame is padded with zeros to a multiple of [`SECTOR`] bytes, so frames
//! can be appended sector by sector and a torn frame never damages the one
//! before it.  `kind` says what the payload is (each user owns a range, see
//! the `KIND_*` constants); `seq` is the writer's sequence number, which
//! logs use to find their end (the first invalid frame or sequence gap).
//!
//! Decoding checks every length before it is used and never panics: a
//! buffer of zeros is "no frame here" (`Ok(None)`, the end of a log), any
//! other damage is a [`FrameError`].

use thiserror::Error;

/// Frames are padded to, and aligned on, this many bytes.
pub const SECTOR: usize = 512;
/// Bytes of the fixed header.
pub const HEADER_LEN: usize = 24;
/// The largest payload a frame may carry (64 MiB).
pub const MAX_PAYLOAD: usize = 64 << 20;
/// The frame format's version.
pub const VERSION: u16 = 1;
const MAGIC: [u8; 4] = *b"MOSF";

/// Kinds 0x0001..=0x00ff: the block map (this crate).
pub const KIND_MAP_LABEL: u16 = 0x0001;
/// A block-map checkpoint.
pub const KIND_MAP_CHECKPOINT: u16 = 0x0002;
/// A block-map delta-log record group.
pub const KIND_MAP_DELTA: u16 = 0x0003;
/// Kinds 0x0100..=0x01ff: the array journal's header.
pub const KIND_JOURNAL_HEADER: u16 = 0x0100;
/// A journal record of any kind of array (typed entries: device writes,
/// logical writes and resync marks; [`crate::journal`]).
pub const KIND_JOURNAL_RECORD: u16 = 0x0101;
/// Kinds 0x0200..=0x02ff: member labels ([`crate::label`]).
pub const KIND_LABEL: u16 = 0x0200;
/// Kinds 0x0300..=0x03ff: DVS metadata: a checkpoint of the tables.
pub const KIND_DVS_CHECKPOINT: u16 = 0x0300;
/// A DVS metadata-log record.
pub const KIND_DVS_LOG: u16 = 0x0301;
/// Kinds 0x0400..=0x04ff: emulated devices: a zoned drive file's header.
pub const KIND_ZONED_HEADER: u16 = 0x0400;
/// Kinds 0x0500..=0x05ff: the write-intent bitmap ([`crate::bitmap`]):
/// one block of it.
pub const KIND_BITMAP: u16 = 0x0500;
/// The magic every frame starts with (so tools can recognise frames).
pub const FRAME_MAGIC: [u8; 4] = MAGIC;

/// One decoded frame.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Frame {
    pub kind: u16,
    pub seq: u64,
    pub payload: Vec<u8>,
}

/// What is wrong with bytes that should hold a frame.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub enum FrameError {
    #[error("frame truncated: need {need} bytes, have {have}")]
    Truncated { need: usize, have: usize },
    #[error("bad frame magic")]
    BadMagic,
    #[error("unsupported frame version {0}")]
    BadVersion(u16),
    #[error("frame payload of {0} bytes exceeds the limit")]
    TooLong(u64),
    #[error("frame checksum mismatch")]
    BadCrc,
}

/// Bytes a frame with a payload of `payload_len` bytes takes on disk.
pub fn encoded_len(payload_len: usize) -> usize {
    (HEADER_LEN + payload_len).div_ceil(SECTOR) * SECTOR
}

/// Frame `payload` as `kind` number `seq`, padded to whole sectors.
/// The caller keeps payloads within [`MAX_PAYLOAD`] (decoders reject
/// longer ones).
pub fn encode(kind: u16, seq: u64, payload: &[u8]) -> Vec<u8> {
    encode_parts(kind, seq, &[payload])
}

/// [`encode`] of the payload that is `parts` one after another, copied
/// once, straight into the frame.
pub fn encode_parts(kind: u16, seq: u64, parts: &[&[u8]]) -> Vec<u8> {
    let mut u = encode_unsealed(kind, &[], parts);
    u.seal(seq);
    u.to_vec()
}

/// The crc32c of `b`, as a frame's checksum takes it: what a writer
/// passes to [`Unsealed::summed`].
pub fn checksum(b: &[u8]) -> u32 {
    crc32c::crc32c(b)
}

/// The crc32c (reflected) polynomial.
const POLY: u32 = 0x82f6_3b78;

/// `a * b mod POLY` over GF(2), bit-reflected (zlib's `multmodp`).
const fn mul_mod(a: u32, mut b: u32) -> u32 {
    if a == 0 {
        return 0;
    }
    let mut m = 1u32 << 31;
    let mut p = 0;
    loop {
        if a & m != 0 {
            p ^= b;
            if a & (m - 1) == 0 {
                return p;
            }
        }
        m >>= 1;
        b = if b & 1 != 0 { (b >> 1) ^ POLY } else { b >> 1 };
    }
}

/// `x^(2^k) mod POLY` for k = 0..32 (zlib's `x2n_table`).
const X2N: [u32; 32] = {
    let mut t = [0u32; 32];
    let mut p = 1u32 << 30; // x^1
    t[0] = p;
    let mut k = 1;
    while k < 32 {
        p = mul_mod(p, p);
        t[k] = p;
        k += 1;
    }
    t
};

/// The crc32c of `a ++ b` from `crc(a)`, `crc(b)` and `b`'s length: one
/// multiplication a set bit of the length (a 4 KiB payload: one), so a
/// checksum a writer took beforehand joins a frame's for a few dozen
/// instructions instead of a pass over the bytes.  (The crc32c crate's
/// own `crc32c_combine` squares 32 x 32 matrices, some microseconds.)
pub fn combine(crc_a: u32, crc_b: u32, len_b: u64) -> u32 {
    // x^(8 len_b) mod POLY: shift crc_a past len_b zero bytes.
    let (mut n, mut k, mut op) = (len_b, 3usize, 1u32 << 31);
    while n != 0 {
        if n & 1 != 0 {
            op = mul_mod(X2N[k & 31], op);
        }
        n >>= 1;
        k += 1;
    }
    mul_mod(op, crc_a) ^ crc_b
}

/// Zeros for a frame's padding.
static PADDING: [u8; SECTOR] = [0; SECTOR];

/// A frame whose sequence number (and so checksum) is not yet set, with
/// its payload borrowed where it lies.  A log that numbers its frames under
/// a lock builds the frame before taking it and only seals it inside, then
/// writes [`Unsealed::pieces`] as they are: a journal record's bytes are
/// never copied into a frame buffer first.
pub struct Unsealed<'a> {
    /// The frame header, then the payload's first, owned part.
    head: Vec<u8>,
    /// The rest of the payload: borrowed, or small pieces copied into
    /// `inline`.
    parts: Vec<Part<'a>>,
    inline: Vec<u8>,
    payload_len: usize,
}

/// A piece of an [`Unsealed`] frame's payload after its owned head.
enum Part<'a> {
    /// Bytes where they lie, with their checksum when the caller took it
    /// already ([`Unsealed::summed`]).
    Borrowed(&'a [u8], Option<u32>),
    /// A range of the frame's `inline` bytes.
    Inline(usize, usize),
}

/// Frame as `kind` the payload that is `owned` and then `parts`, all but
/// the sequence number: see [`Unsealed::seal`].
pub fn encode_unsealed<'a>(kind: u16, owned: &[u8], parts: &[&'a [u8]]) -> Unsealed<'a> {
    let mut u = Unsealed::new(kind, owned);
    u.parts.reserve(parts.len());
    parts.iter().for_each(|p| u.push(p));
    u
}

impl<'a> Unsealed<'a> {
    /// A frame of `kind` whose payload starts with `owned`; more follows
    /// with [`Unsealed::push`] and [`Unsealed::push_copy`].
    pub fn new(kind: u16, owned: &[u8]) -> Unsealed<'a> {
        let mut head = Vec::with_capacity(HEADER_LEN + owned.len());
        head.extend_from_slice(&MAGIC);
        head.extend_from_slice(&VERSION.to_le_bytes());
        head.extend_from_slice(&kind.to_le_bytes());
        head.extend_from_slice(&[0u8; 8]); // seq, set by seal
        head.extend_from_slice(&[0u8; 4]); // payload length, set by seal
        head.extend_from_slice(&[0u8; 4]); // crc, set by seal
        head.extend_from_slice(owned);
        Unsealed { head, parts: Vec::new(), inline: Vec::new(), payload_len: owned.len() }
    }

    /// Add `p` to the payload where it lies (not copied).
    pub fn push(&mut self, p: &'a [u8]) {
        if !p.is_empty() {
            self.parts.push(Part::Borrowed(p, None));
            self.payload_len += p.len();
        }
    }

    /// Add a copy of `p` to the payload (for small pieces made on the
    /// spot, such as a journal copy entry's 16 bytes).
    pub fn push_copy(&mut self, p: &[u8]) {
        let at = self.inline.len();
        self.inline.extend_from_slice(p);
        self.parts.push(Part::Inline(at, self.inline.len()));
        self.payload_len += p.len();
    }

    fn part(&self, p: &Part<'a>) -> &[u8] {
        match *p {
            Part::Borrowed(b, _) => b,
            Part::Inline(a, b) => &self.inline[a..b],
        }
    }

    /// Say that the borrowed part that is exactly `p` (the same bytes in
    /// the same place, pushed with [`Unsealed::push`]) has the checksum
    /// `crc` ([`checksum`]), taken by its writer beforehand: the seal then
    /// joins it ([`combine`]) instead of reading the part.  A `p` that is
    /// no part changes nothing.
    pub fn summed(&mut self, p: &[u8], crc: u32) {
        for part in &mut self.parts {
            if let Part::Borrowed(b, sum) = part {
                if std::ptr::eq(*b, p) {
                    debug_assert_eq!(crc, checksum(p));
                    *sum = Some(crc);
                }
            }
        }
    }

    /// Number the frame `seq`.  The checksum is one pass of the crc32c
    /// instruction over the frame, but for parts whose checksum a writer
    /// took beforehand ([`Unsealed::summed`]), which are joined to it.
    pub fn seal(&mut self, seq: u64) {
        debug_assert!(self.payload_len <= MAX_PAYLOAD);
        self.head[8..16].copy_from_slice(&seq.to_le_bytes());
        self.head[16..20].copy_from_slice(&(self.payload_len as u32).to_le_bytes());
        let mut crc = crc32c::crc32c_append(crc32c::crc32c(&self.head[0..20]), &self.head[HEADER_LEN..]);
        for p in &self.parts {
            crc = match *p {
                Part::Borrowed(b, Some(sum)) => combine(crc, sum, b.len() as u64),
                _ => crc32c::crc32c_append(crc, self.part(p)),
            };
        }
        self.head[20..24].copy_from_slice(&crc.to_le_bytes());
    }

    /// Bytes the frame takes on disk.
    pub fn len(&self) -> usize {
        encoded_len(self.payload_len)
    }

    /// Never true: a frame has at least its header.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// The frame's bytes in order: header and owned part, the borrowed
    /// parts, zero padding to whole sectors.
    pub fn pieces(&self) -> Vec<&[u8]> {
        let pad = self.len() - HEADER_LEN - self.payload_len;
        let mut v = Vec::with_capacity(self.parts.len() + 2);
        v.push(self.head.as_slice());
        v.extend(self.parts.iter().map(|p| self.part(p)).filter(|p| !p.is_empty()));
        if pad > 0 {
            v.push(&PADDING[..pad]);
        }
        v
    }

    /// The frame as one buffer.
    pub fn to_vec(&self) -> Vec<u8> {
        let mut b = Vec::with_capacity(self.len());
        for p in self.pieces() {
            b.extend_from_slice(p);
        }
        b
    }
}

/// The kind of the frame whose header starts `h`, when `h` starts with
/// the frame magic (nothing else is checked: for recognising frames).
pub fn peek_kind(h: &[u8]) -> Option<u16> {
    let h = h.get(..8).filter(|h| h[0..4] == MAGIC)?;
    Some(u16::from_le_bytes([h[6], h[7]]))
}

/// The valid frame of `kind` at the start of `b`, with the bytes it takes
/// on disk (padding included, all inside `b`); `None` for blank space,
/// damage, a torn frame or another kind.
pub fn decode_kind(b: &[u8], kind: u16) -> Option<(Frame, usize)> {
    let len = frame_len(b).ok()??;
    let f = decode(b.get(..len)?).ok()??;
    (f.kind == kind).then_some((f, len))
}

/// From the first [`HEADER_LEN`] bytes of a frame, the bytes the whole
/// frame takes on disk (padding included), so a reader knows how much more
/// to read.  `Ok(None)` for a blank (all-zero) header.
pub fn frame_len(header: &[u8]) -> Result<Option<usize>, FrameError> {
    let h = header.get(..HEADER_LEN).ok_or(FrameError::Truncated { need: HEADER_LEN, have: header.len() })?;
    if h.iter().all(|&b| b == 0) {
        return Ok(None);
    }
    if h[0..4] != MAGIC {
        return Err(FrameError::BadMagic);
    }
    let version = u16::from_le_bytes([h[4], h[5]]);
    if version != VERSION {
        return Err(FrameError::BadVersion(version));
    }
    let len = u32::from_le_bytes([h[16], h[17], h[18], h[19]]) as usize;
    if len > MAX_PAYLOAD {
        return Err(FrameError::TooLong(len as u64));
    }
    Ok(Some(encoded_len(len)))
}

/// Decode the frame at the start of `buf` (which may hold more after it).
/// `Ok(None)`: blank space, no frame.  Padding is not checked (it is not
/// covered by the crc, so a flipped padding bit does not void a frame).
pub fn decode(buf: &[u8]) -> Result<Option<Frame>, FrameError> {
    if frame_len(buf)?.is_none() {
        return Ok(None);
    }
    let len = u32::from_le_bytes([buf[16], buf[17], buf[18], buf[19]]) as usize;
    let need = HEADER_LEN + len;
    let payload = buf.get(HEADER_LEN..need).ok_or(FrameError::Truncated { need, have: buf.len() })?;
    let want = u32::from_le_bytes([buf[20], buf[21], buf[22], buf[23]]);
    if crc32c::crc32c_append(crc32c::crc32c(&buf[0..20]), payload) != want {
        return Err(FrameError::BadCrc);
    }
    let kind = u16::from_le_bytes([buf[6], buf[7]]);
    let seq = u64::from_le_bytes(buf[8..16].try_into().map_err(|_| FrameError::BadMagic)?);
    Ok(Some(Frame { kind, seq, payload: payload.to_vec() }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_is_padded_and_exact() {
        let f = encode(KIND_MAP_DELTA, 42, b"hello");
        assert_eq!(f.len(), SECTOR);
        assert_eq!(frame_len(&f), Ok(Some(SECTOR)));
        let d = decode(&f).unwrap().unwrap();
        assert_eq!(d, Frame { kind: KIND_MAP_DELTA, seq: 42, payload: b"hello".to_vec() });
        assert_eq!(encode(1, 1, &[7u8; SECTOR - HEADER_LEN + 1]).len(), 2 * SECTOR);
    }

    /// A sealed frame is checksummed over its header and payload, for
    /// payloads of any length and in any number of parts.
    #[test]
    fn sealed_frames_are_the_frames_checksummed_whole() {
        for (parts, seq) in [(vec![], 0u64), (vec![&b"x"[..]], 1), (vec![&[7u8; 600][..], b"", &[1u8; 4096][..]], u64::MAX / 2)] {
            let f = encode_parts(KIND_JOURNAL_RECORD, seq, &parts);
            let payload: Vec<u8> = parts.concat();
            let whole = crc32c::crc32c_append(crc32c::crc32c(&f[0..20]), &payload);
            assert_eq!(f[20..24], whole.to_le_bytes());
            assert_eq!(f.len(), encoded_len(payload.len()));
            assert!(f[HEADER_LEN + payload.len()..].iter().all(|&b| b == 0), "padding is zeros");
            let back = decode(&f).unwrap().unwrap();
            assert_eq!((back.seq, back.payload), (seq, payload));
        }
    }

    #[test]
    fn damage_is_reported_not_accepted() {
        let f = encode(KIND_MAP_DELTA, 7, &[9u8; 100]);
        assert_eq!(decode(&[0u8; SECTOR]), Ok(None));
        assert!(matches!(decode(&f[..10]), Err(FrameError::Truncated { .. })));
        assert!(matches!(decode(&f[..HEADER_LEN + 50]), Err(FrameError::Truncated { .. })));
        let mut bad = f.clone();
        bad[HEADER_LEN + 3] ^= 1;
        assert_eq!(decode(&bad), Err(FrameError::BadCrc));
        let mut bad = f.clone();
        bad[9] ^= 1; // seq is covered too
        assert_eq!(decode(&bad), Err(FrameError::BadCrc));
        let mut bad = f.clone();
        bad[0] = b'X';
        assert_eq!(decode(&bad), Err(FrameError::BadMagic));
        let mut bad = f;
        bad[16..20].copy_from_slice(&u32::MAX.to_le_bytes());
        assert_eq!(decode(&bad), Err(FrameError::TooLong(u32::MAX as u64)));
    }

    proptest::proptest! {
        /// A checksum joined from its halves' is the whole's, at any split
        /// (empty halves, odd lengths, many set bits in the length).
        #[test]
        fn combine_joins_checksums_as_one_pass_would(bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..9000), cut in 0usize..9000) {
            let cut = cut.min(bytes.len());
            let (a, b) = bytes.split_at(cut);
            proptest::prop_assert_eq!(combine(checksum(a), checksum(b), b.len() as u64), checksum(&bytes));
        }

        /// A frame sealed with checksums its writer took beforehand is byte
        /// for byte the frame sealed by reading every part.
        #[test]
        fn a_frame_with_summed_parts_is_the_same_frame(parts in proptest::collection::vec(proptest::collection::vec(proptest::num::u8::ANY, 0..5000), 0..4), owned in proptest::collection::vec(proptest::num::u8::ANY, 0..40), summed in proptest::collection::vec(proptest::bool::ANY, 4), seq in proptest::num::u64::ANY) {
            let refs: Vec<&[u8]> = parts.iter().map(|p| p.as_slice()).collect();
            let mut plain = encode_unsealed(KIND_JOURNAL_RECORD, &owned, &refs);
            plain.seal(seq);
            let mut joined = encode_unsealed(KIND_JOURNAL_RECORD, &owned, &refs);
            for (p, _) in refs.iter().zip(&summed).filter(|x| *x.1) {
                joined.summed(p, checksum(p));
            }
            joined.seal(seq);
            proptest::prop_assert_eq!(joined.to_vec(), plain.to_vec());
            let back = decode(&joined.to_vec()).unwrap().unwrap();
            proptest::prop_assert_eq!(back.payload, [owned.clone(), parts.concat()].concat());
        }
    }

    /// A checksum said for bytes that are no part of the frame (equal
    /// bytes elsewhere) is ignored; one said for a part is what the seal
    /// uses (a wrong one, possible in a release build only, makes a frame
    /// that does not decode).
    #[test]
    fn a_checksum_for_bytes_not_in_the_frame_changes_nothing() {
        let (a, other) = (vec![1u8; 100], vec![1u8; 100]);
        let mut u = encode_unsealed(KIND_JOURNAL_RECORD, &[], &[&a]);
        u.summed(&other, 0xdead_beef);
        u.seal(3);
        assert_eq!(u.to_vec(), encode(KIND_JOURNAL_RECORD, 3, &a));
        if !cfg!(debug_assertions) {
            let mut u = encode_unsealed(KIND_JOURNAL_RECORD, &[], &[&a]);
            u.summed(&a, 0xdead_beef);
            u.seal(3);
            assert_eq!(decode(&u.to_vec()), Err(FrameError::BadCrc));
        }
    }
}
