use mosaic_nbd::proto::MAX_PAYLOAD;
use mosaic_nbd::{check, parse_request, Command, Limits};

/// Fuzz the NBD request parser and checks: never panic, whatever parses
/// re-encodes to the same header bytes, and a data command the checks accept
/// has a non-zero length inside the export.
pub fn request(data: &[u8]) {
    if let Ok(r) = parse_request(data) {
        assert_eq!(&r.encode()[..], &data[..28]);
        for unaligned_ok in [false, true] {
            let l = Limits { size: 1 << 30, min_block: 4096, max_payload: MAX_PAYLOAD, read_only: false, unaligned_ok, structured: true, block_status: true, fast_zero: false };
            if check(&r, &l).is_ok() && matches!(r.cmd, Command::Read | Command::Write | Command::Trim | Command::WriteZeroes) {
                assert!(r.length > 0, "zero-length {:?} accepted", r.cmd);
                assert!(r.offset + r.length as u64 <= l.size, "{:?} past the end accepted", r.cmd);
            }
        }
    }
}
