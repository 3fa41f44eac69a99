//! Fuzz the reader of `serve --tls-psk`'s keys file (psktool's
//! `username:hexkey` lines): never panic, and what it takes is one
//! distinct username a line.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| mosaic_fuzzing::psk_keys(data));
