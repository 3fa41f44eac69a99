//! Writes larger than the fast tier, and larger than its free space: one
//! request placed in parts, each landing on FAST and moved on by the
//! next part's foreground demotion; every byte read back, after a clean
//! restart too, SLOW written in whole aligned segments only.

use crate::policy_support;

use mosaic_core::{Buf, Dir};
use mosaic_tier::{PolicyConfig, TierHealth, SLOW};
use policy_support::*;

const STRIPE: u64 = 64 * KIB;
/// 512 KiB of fast data = 128 blocks; 64 segments of 64 KiB.
const FAST_DATA: u64 = 512 * KIB;

fn rig(cfg: PolicyConfig) -> Rig {
    let g = geo(&cfg, FAST_DATA, 64, STRIPE);
    Rig::new(cfg, g)
}

/// Write `data` at block `b` and into the model.
fn put(r: &mut Rig, m: &mut Model, b: u64, data: &[u8]) {
    r.write(b * BLOCK, data).unwrap();
    m.write(b * BLOCK, data);
}

/// Every write to SLOW in the programs run so far is whole aligned
/// segments (no partial-stripe write).
fn slow_writes_whole_segments(r: &Rig) {
    for (dir, off, len) in r.log.iter().flat_map(|p| ops_on(p, SLOW)) {
        if dir == Dir::Write {
            assert!(off % STRIPE == 0 && len % STRIPE == 0, "a slow write of {len} bytes at {off}");
        }
    }
}

#[test]
fn a_write_three_times_the_fast_tier_over_other_data_reads_back_and_after_a_restart() {
    let mut r = rig(small_cfg());
    let mut m = Model::new(r.capacity());
    // 96 of the 128 fast blocks hold other data: the write is larger than
    // the free space as well as the whole tier.
    for b in (600..696).step_by(16) {
        put(&mut r, &mut m, b, &pattern(b, b * BLOCK, 16 * BLOCK));
    }
    let big = pattern(7, 0, 384 * BLOCK);
    put(&mut r, &mut m, 5, &big);
    let st = r.pol.stats();
    assert!(st.foreground_demotions > 0 && st.blocks_slow > 0, "{st:?}");
    assert_eq!(st.absorbed_writes, 7, "one request counts once");
    let p = r.log.last().unwrap();
    let inputs: Vec<(usize, usize)> = p.bufs.iter().filter_map(|b| if let Buf::Input { off, len } = b { Some((*off, *len)) } else { None }).collect();
    assert!(inputs.len() >= 3, "parts of at most half the tier: {inputs:?}");
    assert_eq!(inputs.iter().map(|i| i.1).sum::<usize>(), big.len(), "each client byte written once: {inputs:?}");
    accounting_holds(&r);
    slow_writes_whole_segments(&r);
    let cap = r.capacity();
    assert_eq!(r.read(0, cap).unwrap(), m.get(0, cap), "read back");
    r.recover();
    accounting_holds(&r);
    assert_eq!(r.read(0, cap).unwrap(), m.get(0, cap), "read back after a clean restart");
    // Overwriting it, partly in place and partly over slow blocks, works too.
    put(&mut r, &mut m, 40, &pattern(8, 0, 300 * BLOCK));
    r.recover();
    assert_eq!(r.read(0, cap).unwrap(), m.get(0, cap), "the overwrite read back after a restart");
    slow_writes_whole_segments(&r);
}

#[test]
fn a_write_over_fast_blocks_sealed_in_their_own_extents_is_placed_in_smaller_parts() {
    // Fixed extents: a one-block write seals a whole extent.  Twenty of
    // them, five blocks apart, fill FAST: sixteen 4-block extents, then
    // four 16-block ones.  The 64-block write over the first thirteen
    // needs a new extent for each 4-block gap, and demoting the seven
    // blocks outside it frees seven extents, not thirteen: as one part
    // it finds FAST full, halved it fits, and the second half demotes
    // the first.
    let mut r = rig(PolicyConfig { fixed_extents: true, ..small_cfg() });
    let mut m = Model::new(r.capacity());
    for b in (0..100).step_by(5) {
        put(&mut r, &mut m, b, &pattern(b, 0, BLOCK));
    }
    let st = r.pol.stats();
    assert_eq!((st.fast_allocated, st.fast_live), (128, 20), "FAST full of sealed extents: {st:?}");
    put(&mut r, &mut m, 0, &pattern(9, 0, 64 * BLOCK));
    assert!(r.pol.stats().foreground_demotions > 0);
    let cap = r.capacity();
    assert_eq!(r.read(0, cap).unwrap(), m.get(0, cap), "read back");
    r.recover();
    assert_eq!(r.read(0, cap).unwrap(), m.get(0, cap), "read back after a clean restart");
    accounting_holds(&r);
}

#[test]
fn without_movement_a_write_larger_than_the_fast_tier_is_refused_whole() {
    let mut r = rig(small_cfg());
    let mut m = Model::new(r.capacity());
    put(&mut r, &mut m, 300, &pattern(1, 0, 8 * BLOCK));
    r.flush();
    r.pol.set_health(TierHealth::Ok, TierHealth::Degraded);
    let e = r.write(0, &pattern(2, 0, 200 * BLOCK)).unwrap_err().to_string();
    assert!(e.contains("larger than the fast tier (128 blocks)") && e.contains("degraded"), "{e}");
    // Nothing of it was placed, nothing waits to run.
    let cap = r.capacity();
    assert_eq!(r.read(0, cap).unwrap(), m.get(0, cap));
    assert_eq!(r.pol.dirty_placements(), 0);
    // One that fits FAST as it is still lands.
    put(&mut r, &mut m, 0, &pattern(3, 0, 100 * BLOCK));
    r.pol.set_health(TierHealth::Ok, TierHealth::Ok);
    r.recover();
    assert_eq!(r.read(0, cap).unwrap(), m.get(0, cap));
}
