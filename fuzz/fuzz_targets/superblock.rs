//! Fuzz the fixed-array superblock decoder: never panic, and whatever
//! decodes re-encodes and decodes to the same superblock.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mosaic_array::Superblock;

fuzz_target!(|data: &[u8]| {
    if let Ok(sb) = Superblock::decode(data) {
        let again = Superblock::decode(&sb.encode().expect("a decoded superblock encodes")).expect("and decodes again");
        assert_eq!(again, sb);
    }
});
