use mosaic_dev::zoned::decode_header;
use mosaic_format::frame::{encode, KIND_ZONED_HEADER};

/// Fuzz the header decoder of emulated zoned drives (a mosaic_format frame
/// of kind KIND_ZONED_HEADER): never panic, and a header that decodes
/// describes zones whose write pointers lie in them.  Half the inputs are
/// framed with a good checksum, so the field checks behind it are reached.
pub fn zoned_header(data: &[u8]) {
    let framed = encode(KIND_ZONED_HEADER, 0, data.get(1..).unwrap_or_default());
    let input: &[u8] = if data.first().is_some_and(|b| b & 1 == 1) { &framed } else { data };
    if let Ok(h) = decode_header(input) {
        assert!(h.file_len().is_some());
        for (z, wp) in h.write_pointers.iter().enumerate() {
            let start = z as u64 * h.zone_size;
            assert!(*wp >= start && *wp <= start + h.zone_size);
        }
    }
}
