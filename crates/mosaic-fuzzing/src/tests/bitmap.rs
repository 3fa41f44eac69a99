use mosaic_format::bitmap::{decode_block, encode_block, BlockRead, BITS_BYTES};
use mosaic_format::frame::{HEADER_LEN, KIND_BITMAP};

use super::{frame_prefix, mutations, payload, random_inputs, resealed_flips};
use crate::bitmap;
use crate::bitmap::{CHUNK, INDEX, UUID};

/// Blocks of the body's bitmap: empty, a few bits, every bit.
fn blocks() -> Vec<(&'static str, Vec<u8>)> {
    let mut some = [0u8; BITS_BYTES];
    some[0] = 0b1001;
    some[700] = 0x40;
    [("an empty block", [0u8; BITS_BYTES]), ("a block with three bits", some), ("a full block", [0xffu8; BITS_BYTES])]
        .map(|(name, bits)| (name, encode_block(UUID, CHUNK, INDEX, &bits)))
        .to_vec()
}

/// The body frames what follows an odd first byte: each block's payload
/// behind `1`.
fn seeds() -> Vec<(&'static str, Vec<u8>)> {
    blocks().into_iter().map(|(name, b)| (name, [&[1u8][..], payload(&b)].concat())).collect()
}

/// The seed corpus: the blocks, and the payloads the body frames.
pub(super) fn corpus() -> Vec<Vec<u8>> {
    blocks().into_iter().chain(seeds()).map(|(_, b)| b).collect()
}

#[test]
fn random_bytes() {
    random_inputs(bitmap, 0x2b, 4000, 4200, &[&[1], &frame_prefix(KIND_BITMAP)]);
}

#[test]
fn valid_inputs_decode() {
    for (name, b) in blocks() {
        assert!(matches!(decode_block(&b, UUID, CHUNK, INDEX), BlockRead::Bits(_)), "{name}");
    }
    let BlockRead::Bits(bits) = decode_block(&blocks()[1].1, UUID, CHUNK, INDEX) else { unreachable!() };
    assert_eq!((bits[0], bits[700], bits[1]), (0b1001, 0x40, 0));
}

#[test]
fn valid_inputs_damaged() {
    for (name, b) in blocks() {
        mutations(bitmap, name, &b, HEADER_LEN + 40, HEADER_LEN + 32 + BITS_BYTES);
        resealed_flips(bitmap, name, &b, 40);
    }
    for (name, b) in seeds() {
        mutations(bitmap, name, &b, 40, 40);
    }
}
