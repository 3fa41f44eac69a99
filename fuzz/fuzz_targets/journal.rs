//! Fuzz the write-ahead journal decoders: the header, a record, a damaged
//! record's entry table (read best-effort, without the frame's checksum),
//! and `Journal::open` reading a ring that holds the input (scanning past
//! damaged records).  Never panic; what decodes is consistent with the
//! bytes it came from.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| mosaic_fuzzing::journal(data));
