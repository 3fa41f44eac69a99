//! Fuzz the server side of the NBD handshake with whatever a client may
//! send: never panic, and everything the server sends after its greeting
//! is a sequence of well-formed option replies, ended (when transmission
//! begins through NBD_OPT_EXPORT_NAME) by the export's size and flags.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| mosaic_fuzzing::handshake(data));
