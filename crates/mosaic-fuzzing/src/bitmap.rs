use mosaic_format::bitmap::{decode_block, encode_block, BlockRead, BITS_BYTES};
use mosaic_format::frame::{encode, HEADER_LEN, KIND_BITMAP};
use uuid::Uuid;

/// The array, chunk and block index the body decodes for.
pub(crate) const UUID: Uuid = Uuid::from_u128(0x6d6f_7361_6963);
pub(crate) const CHUNK: u64 = 16;
pub(crate) const INDEX: usize = 2;

/// Fuzz the write-intent bitmap's block decoder: never panic; a block
/// that decodes is this array's block `INDEX` of `CHUNK` stripes a bit,
/// and encodes back to the same bytes.  Half the inputs are framed as
/// block `INDEX` with a good checksum, so the field checks are reached.
pub fn bitmap(data: &[u8]) {
    let framed = encode(KIND_BITMAP, INDEX as u64, data.get(1..).unwrap_or_default());
    let input: &[u8] = if data.first().is_some_and(|b| b & 1 == 1) { &framed } else { data };
    match decode_block(input, UUID, CHUNK, INDEX) {
        BlockRead::Bits(bits) => {
            let again = encode_block(UUID, CHUNK, INDEX, &bits);
            let n = HEADER_LEN + 32 + BITS_BYTES;
            assert_eq!(&again[..n], &input[..n], "a decoded block encodes back to its bytes");
        }
        BlockRead::Unusable(why) => assert!(!why.is_empty()),
    }
}
