use mosaic_nbd::proto::MAX_PAYLOAD;
use mosaic_nbd::request::{header_len, parse_request_as};
use mosaic_nbd::{check, Command, Limits, Request};

/// Fuzz the NBD request parser and checks, for compact headers and for
/// extended ones (the same bytes tried as both): never panic, whatever
/// parses re-encodes to the same header bytes, and a data command the
/// checks accept has a non-zero length inside the export.
pub fn request(data: &[u8]) {
    for extended in [false, true] {
        if let Ok(r) = parse_request_as(data, extended) {
            let enc = if extended { r.encode_extended().to_vec() } else { r.encode().to_vec() };
            assert_eq!(&enc[..], &data[..header_len(extended)]);
            accepted_requests_are_sane(&r, extended);
        }
    }
}

fn accepted_requests_are_sane(r: &Request, extended: bool) {
    for unaligned_ok in [false, true] {
        let l = Limits { size: 1 << 30, min_block: 4096, max_payload: MAX_PAYLOAD, read_only: false, unaligned_ok, structured: true, extended, block_status: true, fast_zero: false, fast_zero_hole: extended };
        if check(r, &l).is_ok() && matches!(r.cmd, Command::Read | Command::Write | Command::Trim | Command::WriteZeroes) {
            assert!(r.length > 0, "zero-length {:?} accepted", r.cmd);
            assert!(r.offset + r.length <= l.size, "{:?} past the end accepted", r.cmd);
            if r.cmd != Command::Write {
                assert_eq!(r.payload_len(extended), 0, "an accepted {:?} carries no payload", r.cmd);
            }
        }
    }
}
