//! Fuzz the one member label format and the frame codec under it, and the
//! fixed array's superblock on top: never panic; whatever decodes
//! re-encodes and decodes to the same value.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| mosaic_fuzzing::superblock(data));
