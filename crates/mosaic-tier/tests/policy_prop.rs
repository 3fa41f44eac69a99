//! Random writes, reads, flushes, idle time and crashes against a
//! reference byte model: everything reads back across demotions,
//! compactions, promotions and clean recovery; after a crash every block
//! holds its flushed value or one written since; and the accounting
//! holds (no block owned twice).

use crate::policy_support;

use std::collections::HashMap;

use proptest::prelude::*;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use mosaic_tier::PolicyConfig;
use policy_support::*;

const STRIPE: u64 = 64 * KIB;

/// 256 KiB of fast data, 24 segments of 64 KiB (2 reserved); idle
/// rounds may move `share` of the fast tier, and demotion runs between
/// the watermarks `(low, high)`.
fn rig(water: (f64, f64), share: f64, fixed: bool) -> Rig {
    let cfg = PolicyConfig { round_share: share, low_water: water.0, high_water: water.1, fixed_extents: fixed, ..small_cfg() };
    let g = geo(&cfg, 256 * KIB, 24, STRIPE);
    Rig::new(cfg, g)
}

#[derive(Debug, Clone)]
enum Op {
    Write(u64, u64),
    Read(u64, u64),
    Idle(usize),
    Recover,
    Flush,
    Crash,
}

fn op(cap_blocks: u64) -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (0..cap_blocks, 1u64..24).prop_map(move |(b, n)| Op::Write(b.min(cap_blocks - n), n)),
        3 => (0..cap_blocks, 1u64..40).prop_map(move |(b, n)| Op::Read(b.min(cap_blocks - n), n)),
        1 => (1usize..6).prop_map(Op::Idle),
        1 => Just(Op::Recover),
        1 => Just(Op::Flush),
        1 => Just(Op::Crash),
    ]
}

fn run_ops(ops: &[Op], fixed: bool) {
    let mut r = rig((0.3, 0.6), 0.5, fixed);
    let mut m = Model::new(r.capacity());
    // Per block written since the last flush: every value it has had
    // since (the flushed one first).
    let mut since: HashMap<u64, Vec<Vec<u8>>> = HashMap::new();
    let bs = BLOCK as usize;
    for (i, o) in ops.iter().enumerate() {
        match *o {
            Op::Write(b, n) => {
                let d = pattern(i as u64, b * BLOCK, n * BLOCK);
                for (k, new) in d.chunks(bs).enumerate() {
                    let lb = b + k as u64;
                    since.entry(lb).or_insert_with(|| vec![m.get(lb * BLOCK, BLOCK).to_vec()]).push(new.to_vec());
                }
                r.write(b * BLOCK, &d).unwrap();
                m.write(b * BLOCK, &d);
            }
            Op::Read(b, n) => assert_eq!(r.read(b * BLOCK, n * BLOCK).unwrap(), m.get(b * BLOCK, n * BLOCK), "op {i}: {o:?}"),
            Op::Idle(k) => {
                r.idle(k);
            }
            Op::Recover | Op::Flush => {
                if matches!(o, Op::Recover) {
                    r.recover();
                } else {
                    r.flush();
                }
                since.clear();
            }
            Op::Crash => {
                r.crash();
                let got = r.read(0, r.capacity()).unwrap();
                for (lb, g) in got.chunks(bs).enumerate() {
                    match since.get(&(lb as u64)) {
                        Some(vals) => assert!(vals.iter().any(|v| v == g), "op {i}: block {lb} holds a value never written since the flush"),
                        None => assert_eq!(g, m.get(lb as u64 * BLOCK, BLOCK), "op {i}: flushed block {lb}"),
                    }
                }
                // The model follows what survived; that is durable now
                // only once flushed, so the candidates stay.
                m.write(0, &got);
                for (lb, vals) in since.iter_mut() {
                    vals.push(got[*lb as usize * bs..][..bs].to_vec());
                }
            }
        }
        accounting_holds(&r);
    }
    let cap = r.capacity();
    assert_eq!(r.read(0, cap).unwrap(), m.get(0, cap));
    r.recover();
    accounting_holds(&r);
    assert_eq!(r.read(0, cap).unwrap(), m.get(0, cap));
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 32, ..ProptestConfig::default() })]
    #[test]
    fn random_io_reads_back(ops in proptest::collection::vec(op(22 * 16), 1..300), fixed in any::<bool>()) {
        run_ops(&ops, fixed);
    }
}

/// Fill 60% of the volume, then overwrite and re-read it at random with
/// idle time between: compaction, demotion and promotion all happen, and
/// the bytes stay right.
#[test]
fn churn_compacts_demotes_and_promotes() {
    let mut r = rig((0.25, 0.5), 1.0, false);
    let cap = r.capacity();
    let mut m = Model::new(cap);
    let used = cap / STRIPE * 6 / 10 * STRIPE;
    for off in (0..used).step_by(STRIPE as usize) {
        let d = pattern(off, off, STRIPE);
        r.write(off, &d).unwrap();
        m.write(off, &d);
    }
    let mut rng = ChaCha8Rng::seed_from_u64(7);
    let blocks = used / BLOCK;
    for i in 0..1500u64 {
        let b = rng.gen_range(0..blocks - 4);
        let n = rng.gen_range(1..=4);
        if rng.gen_bool(0.5) {
            let d = pattern(i + 1000, b * BLOCK, n * BLOCK);
            r.write(b * BLOCK, &d).unwrap();
            m.write(b * BLOCK, &d);
        } else {
            assert_eq!(r.read(b * BLOCK, n * BLOCK).unwrap(), m.get(b * BLOCK, n * BLOCK));
        }
        if i % 50 == 0 {
            r.idle(8);
        }
        accounting_holds(&r);
    }
    let st = r.pol.stats();
    assert!(st.compactions > 0, "{st:?}");
    assert!(st.promote_batches > 0, "{st:?}");
    assert!(st.demote_batches > 0, "{st:?}");
    assert_eq!(r.read(0, cap).unwrap(), m.get(0, cap));
    r.recover();
    assert_eq!(r.read(0, cap).unwrap(), m.get(0, cap));
}
