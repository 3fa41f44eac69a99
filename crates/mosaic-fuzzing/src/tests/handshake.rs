use std::io::Cursor;

use mosaic_nbd::handshake::{self as nbd, Outcome, Session, TlsStage};
use mosaic_nbd::proto::*;
use mosaic_nbd::ExportInfo;

use super::{mutations, random_inputs};
use crate::handshake;
use crate::handshake::Duplex;

/// The body's export.
fn export() -> ExportInfo {
    ExportInfo { name: "fuzz".into(), description: "a fuzzed export".into(), size: 1 << 30, tflags: 1, min_block: 512, pref_block: 4096, max_block: 32 << 20 }
}

/// A client's side of a handshake (what the server reads): its flags,
/// then each option with its data.
fn client(cflags: u32, opts: &[(u32, Vec<u8>)]) -> Vec<u8> {
    let mut v = cflags.to_be_bytes().to_vec();
    for (opt, data) in opts {
        v.extend_from_slice(&IHAVEOPT.to_be_bytes());
        v.extend_from_slice(&opt.to_be_bytes());
        v.extend_from_slice(&(data.len() as u32).to_be_bytes());
        v.extend_from_slice(data);
    }
    v
}

/// Bytes of a string with its length before it (`len` bytes, big-endian).
fn sized(s: &str, len: usize) -> Vec<u8> {
    let mut v = (s.len() as u64).to_be_bytes()[8 - len..].to_vec();
    v.extend_from_slice(s.as_bytes());
    v
}

/// NBD_OPT_INFO / GO data: export name, requested infos.
fn info(name: &str, infos: &[u16]) -> Vec<u8> {
    let mut v = sized(name, 4);
    v.extend_from_slice(&(infos.len() as u16).to_be_bytes());
    infos.iter().for_each(|i| v.extend_from_slice(&i.to_be_bytes()));
    v
}

/// A meta context option's data: export name, queries.
fn meta(name: &str, queries: &[&str]) -> Vec<u8> {
    let mut v = sized(name, 4);
    v.extend_from_slice(&(queries.len() as u32).to_be_bytes());
    queries.iter().for_each(|q| v.extend(sized(q, 4)));
    v
}

/// Real exchanges as clients make them, and how each ends.
fn exchanges() -> Vec<(&'static str, Vec<u8>, Outcome)> {
    let both = FLAG_C_FIXED_NEWSTYLE | FLAG_C_NO_ZEROES;
    vec![
        (
            "qemu-like: structured replies, base:allocation, INFO, GO",
            client(both, &[
                (OPT_STRUCTURED_REPLY, vec![]),
                (OPT_LIST_META_CONTEXT, meta("fuzz", &["base:"])),
                (OPT_SET_META_CONTEXT, meta("fuzz", &[META_BASE_ALLOCATION])),
                (OPT_INFO, info("fuzz", &[INFO_NAME, INFO_DESCRIPTION, INFO_BLOCK_SIZE])),
                (OPT_GO, info("", &[])),
            ]),
            Outcome::Transmission(Session { structured: true, base_allocation: true, extended: false }),
        ),
        (
            "qemu 8.2+/libnbd 1.18+: extended headers, base:allocation, GO",
            client(both, &[
                (OPT_EXTENDED_HEADERS, vec![]),
                (OPT_STRUCTURED_REPLY, vec![]),
                (OPT_SET_META_CONTEXT, meta("fuzz", &[META_BASE_ALLOCATION])),
                (OPT_GO, info("", &[INFO_BLOCK_SIZE])),
            ]),
            Outcome::Transmission(Session { structured: true, base_allocation: true, extended: true }),
        ),
        (
            "a list, refused options, then GO",
            client(both, &[(OPT_LIST, vec![]), (OPT_STARTTLS, vec![]), (99, vec![1, 2, 3]), (OPT_GO, info("fuzz", &[INFO_EXPORT]))]),
            Outcome::Transmission(Session::default()),
        ),
        ("old-style EXPORT_NAME with zeroes", client(FLAG_C_FIXED_NEWSTYLE, &[(OPT_EXPORT_NAME, b"fuzz".to_vec())]), Outcome::Transmission(Session::default())),
        ("EXPORT_NAME without zeroes", client(both, &[(OPT_STRUCTURED_REPLY, vec![]), (OPT_EXPORT_NAME, vec![])]), Outcome::Transmission(Session { structured: true, ..Session::default() })),
        ("an abort", client(both, &[(OPT_LIST, vec![]), (OPT_ABORT, vec![])]), Outcome::Aborted),
    ]
}

/// A libnbd-like client of a server that requires TLS: a LIST refused in
/// plain text, STARTTLS, then (on the secured stream) structured replies
/// and GO.
fn tls_exchange() -> Vec<u8> {
    let both = FLAG_C_FIXED_NEWSTYLE | FLAG_C_NO_ZEROES;
    client(both, &[(OPT_LIST, vec![]), (OPT_STARTTLS, vec![]), (OPT_STRUCTURED_REPLY, vec![]), (OPT_GO, info("fuzz", &[]))])
}

/// The seed corpus of the cargo-fuzz target: each exchange, answered and
/// refused; the TLS exchange with TLS offered and required.
pub(super) fn corpus() -> Vec<Vec<u8>> {
    let mut all: Vec<Vec<u8>> = exchanges().into_iter().flat_map(|(_, c, _)| [0u8, 1].map(|first| [&[first][..], &c].concat())).collect();
    all.extend([2u8, 4].map(|first| [&[first][..], &tls_exchange()].concat()));
    all
}

#[test]
fn starttls_is_acknowledged_only_with_tls_and_required_tls_refuses_the_rest() {
    let c = tls_exchange();
    for (stage, list_reply) in [(TlsStage::Offered, REP_SERVER), (TlsStage::Required, REP_ERR_TLS_REQD)] {
        let mut s = Duplex { input: Cursor::new(&c[..]), output: Vec::new() };
        assert_eq!(nbd::handshake_tls(&mut s, &export(), stage).unwrap(), Outcome::StartTls { no_zeroes: true }, "{stage:?}");
        let r = &s.output[18..];
        assert_eq!(u32::from_be_bytes(r[12..16].try_into().unwrap()), list_reply, "{stage:?}: LIST");
        let last = &s.output[s.output.len() - 20..];
        assert_eq!((u32::from_be_bytes(last[8..12].try_into().unwrap()), u32::from_be_bytes(last[12..16].try_into().unwrap())), (OPT_STARTTLS, REP_ACK));
        // Structured replies asked for after STARTTLS hold.
        assert_eq!(nbd::after_tls(&mut s, &export(), true).unwrap(), Outcome::Transmission(Session { structured: true, ..Session::default() }));
        assert_eq!(s.input.position() as usize, c.len());
    }
    // Without TLS: refused by policy, and the GO goes through in plain text.
    let mut s = Duplex { input: Cursor::new(&c[..]), output: Vec::new() };
    assert_eq!(nbd::handshake_tls(&mut s, &export(), TlsStage::Off).unwrap(), Outcome::Transmission(Session { structured: true, ..Session::default() }));
    assert!(s.output.windows(4).any(|w| w == REP_ERR_POLICY.to_be_bytes()));
    // Once secured, STARTTLS again is invalid.
    let again = client(0, &[(OPT_STARTTLS, vec![]), (OPT_ABORT, vec![])]);
    let mut s = Duplex { input: Cursor::new(&again[4..]), output: Vec::new() };
    assert_eq!(nbd::after_tls(&mut s, &export(), false).unwrap(), Outcome::Aborted);
    assert_eq!(u32::from_be_bytes(s.output[12..16].try_into().unwrap()), REP_ERR_INVALID);
}

#[test]
fn tls_exchanges_damaged() {
    for first in [2u8, 4] {
        let b = [&[first][..], &tls_exchange()].concat();
        mutations(handshake, "tls", &b, b.len(), b.len());
    }
}

#[test]
fn random_bytes() {
    let opt = client(0, &[(OPT_GO, vec![])]);
    random_inputs(handshake, 0x4a, 4000, 2048, &[&[0, 0, 0, 0, 3], &[0, 0, 0, 0, 1], &opt, &[1, 0, 0, 0, 3]]);
}

#[test]
fn valid_inputs_decode() {
    for (name, c, want) in exchanges() {
        let mut s = Duplex { input: Cursor::new(&c[..]), output: Vec::new() };
        assert_eq!(nbd::handshake(&mut s, &export()).unwrap(), want, "{name}");
        assert_eq!(s.input.position() as usize, c.len(), "{name}: the server read every option");
        // Refused: every option answered with an error (or its ACK).
        let mut s = Duplex { input: Cursor::new(&c[..]), output: Vec::new() };
        nbd::refuse(&mut s, "full").unwrap();
        assert!(s.output.len() >= 18);
    }
}

#[test]
fn valid_inputs_damaged() {
    for (name, c, _) in exchanges() {
        for first in [0u8, 1] {
            // The first byte chooses handshake (even) or refuse (odd).
            let b = [&[first][..], &c].concat();
            mutations(handshake, name, &b, b.len(), b.len());
        }
    }
}

/// The option replies of a handshake's output (after the 18-byte
/// greeting): (option, reply type, data) of each.
fn replies(out: &[u8]) -> Vec<(u32, u32, Vec<u8>)> {
    let mut v = Vec::new();
    let mut r = &out[18..];
    while r.len() >= 20 {
        let len = u32::from_be_bytes(r[16..20].try_into().unwrap()) as usize;
        let data = r[20..(20 + len).min(r.len())].to_vec();
        v.push((u32::from_be_bytes(r[8..12].try_into().unwrap()), u32::from_be_bytes(r[12..16].try_into().unwrap()), data));
        r = &r[(20 + len).min(r.len())..];
    }
    v
}

/// Extended headers: acknowledged once (again: invalid; with data:
/// invalid), structured replies after them answered ERR_EXT_HEADER_REQD
/// (the session stays extended), and NBD_OPT_EXPORT_NAME after them, which
/// has no way to refuse, closes the connection.
#[test]
fn extended_headers_are_negotiated_once_and_rule_out_export_name() {
    let both = FLAG_C_FIXED_NEWSTYLE | FLAG_C_NO_ZEROES;
    let c = client(both, &[
        (OPT_EXTENDED_HEADERS, vec![1]),
        (OPT_EXTENDED_HEADERS, vec![]),
        (OPT_EXTENDED_HEADERS, vec![]),
        (OPT_STRUCTURED_REPLY, vec![]),
        (OPT_GO, info("fuzz", &[])),
    ]);
    let mut s = Duplex { input: Cursor::new(&c[..]), output: Vec::new() };
    assert_eq!(nbd::handshake(&mut s, &export()).unwrap(), Outcome::Transmission(Session { structured: true, extended: true, base_allocation: false }));
    let r = replies(&s.output);
    let kinds: Vec<(u32, u32)> = r.iter().map(|x| (x.0, x.1)).collect();
    assert_eq!(&kinds[..4], &[(OPT_EXTENDED_HEADERS, REP_ERR_INVALID), (OPT_EXTENDED_HEADERS, REP_ACK), (OPT_EXTENDED_HEADERS, REP_ERR_INVALID), (OPT_STRUCTURED_REPLY, REP_ERR_EXT_HEADER_REQD)]);
    assert_eq!(kinds.last(), Some(&(OPT_GO, REP_ACK)));
    let says = |i: usize| String::from_utf8_lossy(&r[i].2).into_owned();
    assert!(says(0).contains("NBD_OPT_EXTENDED_HEADERS takes no data"), "{}", says(0));
    assert!(says(2).contains("extended headers are already negotiated") && says(3).contains("extended headers are already negotiated"), "{} / {}", says(2), says(3));
    // The GO's export info advertises DF (replies are structured).
    let export_info = r.iter().find(|x| x.1 == REP_INFO && x.2[..2] == INFO_EXPORT.to_be_bytes()).expect("NBD_INFO_EXPORT");
    assert_ne!(u16::from_be_bytes([export_info.2[10], export_info.2[11]]) & TFLAG_SEND_DF, 0);
    let c = client(both, &[(OPT_EXTENDED_HEADERS, vec![]), (OPT_EXPORT_NAME, b"fuzz".to_vec())]);
    let mut s = Duplex { input: Cursor::new(&c[..]), output: Vec::new() };
    let e = nbd::handshake(&mut s, &export()).unwrap_err();
    assert!(e.to_string().contains("NBD_OPT_EXPORT_NAME after NBD_OPT_EXTENDED_HEADERS"), "{e}");
    // Structured replies first, then extended headers: both taken.
    let c = client(both, &[(OPT_STRUCTURED_REPLY, vec![]), (OPT_EXTENDED_HEADERS, vec![]), (OPT_GO, info("", &[]))]);
    let mut s = Duplex { input: Cursor::new(&c[..]), output: Vec::new() };
    assert_eq!(nbd::handshake(&mut s, &export()).unwrap(), Outcome::Transmission(Session { structured: true, extended: true, base_allocation: false }));
}
