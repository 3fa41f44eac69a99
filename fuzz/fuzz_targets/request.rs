//! Fuzz the NBD request parser and checks: never panic, and whatever parses
//! re-encodes to the same header bytes.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mosaic_nbd::proto::MAX_PAYLOAD;
use mosaic_nbd::{check, parse_request, Limits};

fuzz_target!(|data: &[u8]| {
    if let Ok(r) = parse_request(data) {
        assert_eq!(&r.encode()[..], &data[..28]);
        for unaligned_ok in [false, true] {
            let l = Limits { size: 1 << 30, min_block: 4096, max_payload: MAX_PAYLOAD, read_only: false, unaligned_ok };
            let _ = check(&r, &l);
        }
    }
});
