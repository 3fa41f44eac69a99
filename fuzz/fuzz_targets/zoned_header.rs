//! Fuzz the header decoder of emulated zoned drives: never panic, and a
//! header that decodes describes zones whose write pointers lie in them.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mosaic_dev::zoned::decode_header;

fuzz_target!(|data: &[u8]| {
    if let Ok(h) = decode_header(data) {
        assert!(h.file_len().is_some());
        for (z, wp) in h.write_pointers.iter().enumerate() {
            let start = z as u64 * h.zone_size;
            assert!(*wp >= start && *wp <= start + h.zone_size);
        }
    }
});
