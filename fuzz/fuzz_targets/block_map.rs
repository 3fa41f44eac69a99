//! Fuzz the mapped-layout kit's decoders (the frame codec, delta records,
//! checkpoints): never panic, and a frame that decodes re-encodes to the
//! same bytes.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| mosaic_fuzzing::block_map(data));
