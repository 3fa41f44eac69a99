//! Every fuzz body, run over (a) a few thousand seeded pseudo-random
//! inputs of varied lengths, some starting with the bytes that get past
//! the first checks (a frame's magic, a selector byte), and (b) valid
//! inputs made by the real encoders, with every single-bit flip of their
//! first bytes and every truncation.  The bodies' own assertions must
//! hold on all of them; the valid inputs are also decoded here, directly,
//! so a test cannot pass by decoding nothing.  Deterministic: a failure
//! names the seed and the mutation.

use std::panic::{catch_unwind, AssertUnwindSafe};

mod bitmap;
mod block_map;
mod dvs_meta;
mod dvs_paths;
mod handshake;
mod journal;
mod mapped_policies;
mod psk_keys;
mod request;
mod superblock;
mod trace;
mod zoned_header;

/// A fuzz body.
type Body = fn(&[u8]);

/// SplitMix64: a small deterministic generator.
pub(crate) struct Rng(u64);

impl Rng {
    pub(crate) fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    pub(crate) fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A number in `0..n` (`n` > 0).
    pub(crate) fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    pub(crate) fn bytes(&mut self, len: usize) -> Vec<u8> {
        (0..len).map(|_| self.next() as u8).collect()
    }
}

/// Run `body` on `input`; when it panics, panic again naming the input
/// (`what` says where it came from).
pub(crate) fn run(body: Body, what: &dyn Fn() -> String, input: &[u8]) {
    if catch_unwind(AssertUnwindSafe(|| body(input))).is_err() {
        let head: Vec<String> = input.iter().take(48).map(|b| format!("{b:02x}")).collect();
        panic!("the body panicked on {} ({} bytes: {}{})", what(), input.len(), head.join(""), if input.len() > 48 { "..." } else { "" });
    }
}

/// `n` pseudo-random inputs from `seed`: lengths spread over `0..=max`
/// (most short), half of them starting with one of `prefixes` (when
/// given) so that they get past magic numbers and selector bytes.
pub(crate) fn random_inputs(body: Body, seed: u64, n: usize, max: usize, prefixes: &[&[u8]]) {
    let mut rng = Rng::new(seed);
    for i in 0..n {
        let len = match rng.below(4) {
            0 => rng.below(33),
            1 => rng.below(257),
            2 => rng.below(1025),
            _ => rng.below(max + 1),
        };
        let mut b = rng.bytes(len);
        if !prefixes.is_empty() && rng.below(2) == 0 {
            let p = prefixes[rng.below(prefixes.len())];
            let k = p.len().min(b.len());
            b[..k].copy_from_slice(&p[..k]);
        }
        run(body, &|| format!("random input {i} of seed {seed:#x}"), &b);
    }
}

/// `body` on `valid`, on `valid` with each single bit of its first
/// `flip_bytes` bytes flipped, and on every truncation of it to fewer
/// than `cut_to` bytes (every truncation when `cut_to` ≥ its length).
pub(crate) fn mutations(body: Body, name: &str, valid: &[u8], flip_bytes: usize, cut_to: usize) {
    run(body, &|| format!("{name} as made"), valid);
    let mut b = valid.to_vec();
    for i in 0..flip_bytes.min(b.len()) {
        for bit in 0..8 {
            b[i] ^= 1 << bit;
            run(body, &|| format!("{name} with bit {bit} of byte {i} flipped"), &b);
            b[i] ^= 1 << bit;
        }
    }
    for len in 0..cut_to.min(valid.len()) {
        run(body, &|| format!("{name} cut to {len} bytes"), &valid[..len]);
    }
}

/// The payload of the frame at the start of `b` (no checks: the test's
/// own view of the format, to frame a changed payload anew).
pub(crate) fn payload(b: &[u8]) -> &[u8] {
    let len = u32::from_le_bytes(b[16..20].try_into().unwrap()) as usize;
    &b[mosaic_format::frame::HEADER_LEN..mosaic_format::frame::HEADER_LEN + len]
}

/// `body` on the frame `valid` with each single bit of the first
/// `flip_bytes` bytes of its payload flipped and the frame sealed anew
/// (a good checksum over changed contents, so the parsers behind the
/// frame see the change).
pub(crate) fn resealed_flips(body: Body, name: &str, valid: &[u8], flip_bytes: usize) {
    let f = mosaic_format::frame::decode(valid).expect("a frame").expect("not blank");
    let mut p = f.payload.clone();
    for i in 0..flip_bytes.min(p.len()) {
        for bit in 0..8 {
            p[i] ^= 1 << bit;
            let b = mosaic_format::frame::encode(f.kind, f.seq, &p);
            run(body, &|| format!("{name} with bit {bit} of payload byte {i} flipped, resealed"), &b);
            p[i] ^= 1 << bit;
        }
    }
}

/// The bytes every frame starts with (magic, version), then a kind.
pub(crate) fn frame_prefix(kind: u16) -> Vec<u8> {
    let mut p = mosaic_format::frame::FRAME_MAGIC.to_vec();
    p.extend_from_slice(&mosaic_format::frame::VERSION.to_le_bytes());
    p.extend_from_slice(&kind.to_le_bytes());
    p
}

/// Sanity of the harness itself: a body that panics on some input is
/// caught by each driver (else every test here could pass vacuously).
#[test]
fn the_drivers_catch_a_panicking_body() {
    fn picky(b: &[u8]) {
        assert!(b.len() != 7, "seven");
    }
    fn flip_picky(b: &[u8]) {
        assert!(b != [1, 2, 3, 5], "a flipped bit");
    }
    fn payload_picky(b: &[u8]) {
        let f = mosaic_format::frame::decode(b).unwrap().unwrap();
        assert!(f.payload != b"ab", "a resealed flip");
    }
    let caught = |f: &dyn Fn()| catch_unwind(AssertUnwindSafe(f)).is_err();
    assert!(caught(&|| random_inputs(picky, 1, 2000, 64, &[])));
    assert!(caught(&|| mutations(picky, "x", &[0; 10], 0, 10)), "a truncation");
    assert!(caught(&|| mutations(flip_picky, "x", &[1, 2, 3, 4], 4, 0)));
    assert!(!caught(&|| mutations(flip_picky, "x", &[1, 2, 3, 4], 3, 0)), "only the first bytes are flipped");
    let f = mosaic_format::frame::encode(9, 1, b"ac");
    assert!(caught(&|| resealed_flips(payload_picky, "x", &f, 2)));
}

/// Not a test: writes each target's valid inputs as its seed corpus,
/// `$MOSAIC_FUZZ_CORPUS/TARGET/seed-N`, for `cargo fuzz run TARGET
/// $MOSAIC_FUZZ_CORPUS/TARGET` (a fuzzer starting from nothing rarely
/// gets a checksum right).  `MOSAIC_FUZZ_CORPUS=DIR cargo test -p
/// mosaic-fuzzing -- --ignored seed_corpora`.
#[test]
#[ignore = "writes files: the fuzzers' seed corpora"]
fn seed_corpora() {
    let dir = std::path::PathBuf::from(std::env::var_os("MOSAIC_FUZZ_CORPUS").expect("MOSAIC_FUZZ_CORPUS: the directory to write the corpora into"));
    let targets: [(&str, fn() -> Vec<Vec<u8>>); 12] = [
        ("bitmap", bitmap::corpus),
        ("block_map", block_map::corpus),
        ("dvs_meta", dvs_meta::corpus),
        ("dvs_paths", dvs_paths::corpus),
        ("handshake", handshake::corpus),
        ("journal", journal::corpus),
        ("mapped_policies", mapped_policies::corpus),
        ("psk_keys", psk_keys::corpus),
        ("request", request::corpus),
        ("superblock", superblock::corpus),
        ("trace", trace::corpus),
        ("zoned_header", zoned_header::corpus),
    ];
    for (name, corpus) in targets {
        let d = dir.join(name);
        std::fs::create_dir_all(&d).unwrap();
        for (i, b) in corpus().iter().enumerate() {
            std::fs::write(d.join(format!("seed-{i}")), b).unwrap();
        }
    }
}
