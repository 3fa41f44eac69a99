//! Fuzz the NBD request parser and checks: never panic, whatever parses
//! re-encodes to the same header bytes, and a data command the checks accept
//! has a non-zero length inside the export.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| mosaic_fuzzing::request(data));
