//! Fuzz the header decoder of emulated zoned drives (a mosaic_format frame
//! of kind KIND_ZONED_HEADER): never panic, and a header that decodes
//! describes zones whose write pointers lie in them.  Half the inputs are
//! framed with a good checksum, so the field checks behind it are reached.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| mosaic_fuzzing::zoned_header(data));
