//! The write-intent bitmap's on-disk blocks (md's internal bitmap).
//!
//! An array without a journal marks a region of stripes in the bitmap,
//! durably on every member, before its first write to the region, and
//! clears the mark lazily once the region has been quiet and flushed.
//! After a crash only the marked regions can hold stripes whose code
//! disagrees with their data, so the resync reads those alone.
//!
//! The bitmap lives at the end of each member's reserved header, the same
//! bytes on every member, in [`BLOCKS`] blocks of [`BLOCK`] bytes; a block
//! is one frame ([`crate::frame`], kind [`crate::frame::KIND_BITMAP`],
//! `seq` = block index) padded to the block:
//!
//! ```text
//!   member byte 0      128 KiB                    960 KiB      1 MiB
//!   ├── label slots ───┼── (reserved: a grow's copy) ┼── bitmap ──┼── stripe data
//!
//!   block i: frame { kind 0x0500 | seq = i | payload:
//!                    array_uuid [16] | chunk u64 (stripes a bit) |
//!                    first bit u64 (= i * BITS_PER_BLOCK) | bits [4032] }
//! ```
//!
//! Blocks are written in place without a second slot: a torn block fails
//! its checksum and is read as every bit set (the resync reads more,
//! never less), and a bit is only ever needed once its block was flushed
//! on every member, so a copy that is whole on any member in service is
//! good enough for that member ([`decode_block`] says which).

use uuid::Uuid;

use crate::frame::{self, KIND_BITMAP};

/// Bytes of one bitmap block on disk.
pub const BLOCK: usize = 4096;
/// Blocks the bitmap may take.
pub const BLOCKS: usize = 16;
/// The bytes the bitmap takes at the end of a member's header.
pub const AREA: u64 = (BLOCK * BLOCKS) as u64;
/// Bytes of bits in one block.
pub const BITS_BYTES: usize = 4032;
/// Bits (regions) one block holds.
pub const BITS_PER_BLOCK: u64 = 8 * BITS_BYTES as u64;
/// The most regions a bitmap has: a larger array takes larger regions.
pub const MAX_BITS: u64 = BLOCKS as u64 * BITS_PER_BLOCK;

const HEAD: usize = 16 + 8 + 8;
const _: () = assert!(frame::HEADER_LEN + HEAD + BITS_BYTES <= BLOCK);

/// Blocks a bitmap of `bits` regions uses.
pub fn blocks_for(bits: u64) -> usize {
    bits.div_ceil(BITS_PER_BLOCK) as usize
}

/// Block `index` of the bitmap of array `uuid` with `chunk` stripes a bit:
/// `bits` ([`BITS_BYTES`] bytes, bit `j` of byte `b` is region
/// `index * BITS_PER_BLOCK + 8 b + j`), framed and padded to [`BLOCK`].
pub fn encode_block(uuid: Uuid, chunk: u64, index: usize, bits: &[u8; BITS_BYTES]) -> Vec<u8> {
    let mut head = [0u8; HEAD];
    head[..16].copy_from_slice(uuid.as_bytes());
    head[16..24].copy_from_slice(&chunk.to_le_bytes());
    head[24..32].copy_from_slice(&(index as u64 * BITS_PER_BLOCK).to_le_bytes());
    let mut b = frame::encode_parts(KIND_BITMAP, index as u64, &[&head, bits]);
    b.resize(BLOCK, 0);
    b
}

/// What one member's copy of a block holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BlockRead {
    /// A whole copy of the block this bitmap expects: its bits.
    Bits(Box<[u8; BITS_BYTES]>),
    /// Nothing usable: blank, torn, damaged, or another array's or
    /// another bitmap's block (the reason, for a log line).
    Unusable(String),
}

/// Decode one member's copy of block `index` of the bitmap of array
/// `uuid` with `chunk` stripes a bit.  Never panics.
pub fn decode_block(buf: &[u8], uuid: Uuid, chunk: u64, index: usize) -> BlockRead {
    let f = match frame::decode(buf) {
        Ok(Some(f)) => f,
        Ok(None) => return BlockRead::Unusable("blank".into()),
        Err(e) => return BlockRead::Unusable(e.to_string()),
    };
    let p = &f.payload;
    if f.kind != KIND_BITMAP || f.seq != index as u64 || p.len() != HEAD + BITS_BYTES {
        return BlockRead::Unusable(format!("not bitmap block {index}"));
    }
    let word = |at: usize| u64::from_le_bytes(p[at..at + 8].try_into().unwrap_or([0xff; 8]));
    if p[..16] != uuid.as_bytes()[..] {
        return BlockRead::Unusable("another array's bitmap".into());
    }
    if word(16) != chunk || word(24) != index as u64 * BITS_PER_BLOCK {
        return BlockRead::Unusable(format!("a bitmap of another chunk ({} stripes a bit)", word(16)));
    }
    let mut bits = Box::new([0u8; BITS_BYTES]);
    bits.copy_from_slice(&p[HEAD..]);
    BlockRead::Bits(bits)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_block_round_trips_and_names_what_is_wrong_with_another() {
        let u = Uuid::from_u128(7);
        let mut bits = [0u8; BITS_BYTES];
        bits[0] = 0b101;
        bits[BITS_BYTES - 1] = 0x80;
        let b = encode_block(u, 16, 3, &bits);
        assert_eq!(b.len(), BLOCK);
        assert_eq!(decode_block(&b, u, 16, 3), BlockRead::Bits(Box::new(bits)));
        let unusable = |r: BlockRead| matches!(r, BlockRead::Unusable(_));
        assert!(unusable(decode_block(&b, Uuid::from_u128(8), 16, 3)), "another array");
        assert!(unusable(decode_block(&b, u, 32, 3)), "another chunk");
        assert!(unusable(decode_block(&b, u, 16, 2)), "another block");
        assert!(unusable(decode_block(&[0; BLOCK], u, 16, 3)), "blank");
        for at in [0, 9, 30, 100, 4000] {
            let mut torn = b.clone();
            torn[at] ^= 1;
            assert!(unusable(decode_block(&torn, u, 16, 3)), "bit flipped at {at}");
        }
        for len in [0, 10, 24, 100, frame::HEADER_LEN + HEAD + BITS_BYTES - 1] {
            assert!(unusable(decode_block(&b[..len], u, 16, 3)), "cut at {len}");
        }
    }

    #[test]
    fn sizes_fit_the_area() {
        assert_eq!(blocks_for(1), 1);
        assert_eq!(blocks_for(BITS_PER_BLOCK), 1);
        assert_eq!(blocks_for(BITS_PER_BLOCK + 1), 2);
        assert_eq!(blocks_for(MAX_BITS), BLOCKS);
    }
}
