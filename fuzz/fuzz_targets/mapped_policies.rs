//! Fuzz the map regions of the mapped policies (the hybrid tier's on its
//! fast array, the remapped array's at the start of its inner array): the input is XORed
//! onto a freshly formatted region, so the fuzzer starts from valid
//! labels, checkpoints and logs.  Recovery never panics; a recovered
//! policy plans reads over its whole capacity without panicking.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| mosaic_fuzzing::mapped_policies(data));
