//! Fuzz the decoder of a DVS directory array's device paths file
//! (`dvs-paths.json`): never panic; what decodes keeps the limits, and
//! re-encoded as the writer writes it decodes to the same.  After a first
//! byte 1 the rest is a list of paths made into a well-formed file, so
//! the checks behind the JSON parser are reached.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| mosaic_fuzzing::dvs_paths(data));
