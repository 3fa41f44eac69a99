//! Fuzz the trace readers (format detection, every text format,
//! decompression): never panic, and what they give keeps the promises of
//! `mosaic_trace::Request` (a length that is never 0, an end that never
//! overflows) and of `TraceError::Parse` (a line number inside the input).
//! The first byte chooses the format (or detection) and whether malformed
//! lines are skipped; the rest is the trace.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| mosaic_fuzzing::trace(data));
