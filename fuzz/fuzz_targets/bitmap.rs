//! Fuzz the write-intent bitmap's block decoder (a mosaic_format frame of
//! kind KIND_BITMAP): never panic, and a block that decodes encodes back
//! to the same bytes.  Half the inputs are framed with a good checksum.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| mosaic_fuzzing::bitmap(data));
