//! Fuzz the DVS metadata decoders: the member label (its DVS policy
//! blob, then the metadata layout open makes of it), log record (applied
//! to tables as recovery does), checkpoint (its parts), and write-cache
//! journal entry.  The first byte chooses whether the rest is framed with
//! a good checksum (so the parsers behind the frame are reached) and as
//! which kind.  Never panic.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| mosaic_fuzzing::dvs_meta(data));
