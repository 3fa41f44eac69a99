use mosaic_nbd::proto::{CMD_FLAG_DF, CMD_FLAG_FAST_ZERO, CMD_FLAG_FUA, CMD_FLAG_NO_HOLE, CMD_FLAG_PAYLOAD_LEN, CMD_FLAG_REQ_ONE, EXTENDED_REQUEST_MAGIC, MAX_PAYLOAD, REQUEST_MAGIC};
use mosaic_nbd::request::parse_request_as;
use mosaic_nbd::{check, parse_request, Command, Limits, Request};

use super::{mutations, random_inputs};
use crate::request;

/// Valid requests of every command, inside the body's export of 1 GiB.
fn valid() -> Vec<Request> {
    let r = |cmd, flags, offset, length| Request { flags, cmd, cookie: 0x0123_4567_89ab_cdef, offset, length };
    vec![
        r(Command::Read, 0, 0, 4096),
        r(Command::Read, CMD_FLAG_DF, 1 << 20, 65536),
        r(Command::Write, CMD_FLAG_FUA, (1 << 30) - 4096, 4096),
        r(Command::Trim, 0, 8192, 1 << 20),
        r(Command::WriteZeroes, CMD_FLAG_NO_HOLE | CMD_FLAG_FAST_ZERO, 0, 1 << 29),
        r(Command::Cache, 0, 4096, 4096),
        r(Command::BlockStatus, CMD_FLAG_REQ_ONE, 0, 1 << 30),
        r(Command::Flush, 0, 0, 0),
        r(Command::Disc, 0, 0, 0),
    ]
}

/// Valid requests of an extended session: 64-bit lengths, PAYLOAD_LEN
/// on a WRITE.
fn valid_extended() -> Vec<Request> {
    let r = |cmd, flags, offset, length| Request { flags, cmd, cookie: 0x0123_4567_89ab_cdef, offset, length };
    let mut v = valid();
    v.push(r(Command::Write, CMD_FLAG_PAYLOAD_LEN | CMD_FLAG_FUA, 4096, 4096));
    v.push(r(Command::WriteZeroes, 0, 0, 1 << 30));
    v
}

/// The seed corpus of the cargo-fuzz target.
pub(super) fn corpus() -> Vec<Vec<u8>> {
    let compact = valid().into_iter().map(|r| r.encode().to_vec());
    compact.chain(valid_extended().iter().map(|r| r.encode_extended().to_vec())).collect()
}

#[test]
fn random_bytes() {
    random_inputs(request, 0x4e, 4000, 64, &[&REQUEST_MAGIC.to_be_bytes(), &EXTENDED_REQUEST_MAGIC.to_be_bytes()]);
}

#[test]
fn valid_inputs_decode() {
    let l = Limits { size: 1 << 30, min_block: 4096, max_payload: MAX_PAYLOAD, read_only: false, unaligned_ok: false, structured: true, extended: false, block_status: true, fast_zero: true, fast_zero_hole: true };
    for r in valid() {
        let b = r.encode();
        assert_eq!(parse_request(&b), Ok(r));
        assert_eq!(check(&r, &l), Ok(()), "{r:?}");
    }
    let x = Limits { extended: true, ..l };
    for r in valid_extended() {
        assert_eq!(parse_request_as(&r.encode_extended(), true), Ok(r));
        assert_eq!(check(&r, &x), Ok(()), "{r:?}");
    }
}

#[test]
fn valid_inputs_damaged() {
    for r in valid() {
        let name = format!("{:?}", r.cmd);
        mutations(request, &name, &r.encode(), 28, 28);
        // A write's header with payload bytes after it.
        let with_payload = [&r.encode()[..], &[0x5a; 8]].concat();
        mutations(request, &name, &with_payload, 28, 0);
    }
    for r in valid_extended() {
        mutations(request, &format!("extended {:?}", r.cmd), &r.encode_extended(), 32, 32);
    }
}
