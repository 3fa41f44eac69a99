//! Movement controls: promotion after n hits and never for long
//! sequential streams, the watermarks, the per-round share, the bytes/s
//! budget, the pause while degraded, and the full / offline states.

use crate::policy_support;

use mosaic_core::{Dir, Frontend};
use mosaic_tier::{PolicyConfig, TierHealth, TierState, FAST, SLOW};
use policy_support::*;

const STRIPE: u64 = 64 * KIB;
/// 512 KiB of fast data = 128 blocks; 64 segments of 64 KiB.
const FAST_DATA: u64 = 512 * KIB;

fn rig(cfg: PolicyConfig) -> Rig {
    let g = geo(&cfg, FAST_DATA, 64, STRIPE);
    Rig::new(cfg, g)
}

fn fill(r: &Rig) -> f64 {
    let st = r.pol.stats();
    st.fast_allocated as f64 / st.fast_blocks as f64
}

/// Write `blocks` blocks from block 0 in 64 KiB requests and flush; the model.
fn write_seq(r: &mut Rig, blocks: u64) -> Model {
    let mut m = Model::new(r.capacity());
    let mut b = 0;
    while b < blocks {
        let n = (blocks - b).min(16);
        let d = pattern(b, b * BLOCK, n * BLOCK);
        r.write(b * BLOCK, &d).unwrap();
        m.write(b * BLOCK, &d);
        b += n;
    }
    // Flushed: the idle steps that follow are movement, not the commit.
    r.flush();
    m
}

/// Bytes written to SLOW by `ps`.
fn slow_written(ps: &[mosaic_core::Program]) -> u64 {
    ps.iter().flat_map(|p| ops_on(p, SLOW)).filter(|o| o.0 == Dir::Write).map(|o| o.2).sum()
}

#[test]
fn idle_demotes_from_above_high_to_the_low_watermark_then_stops() {
    let mut r = rig(PolicyConfig { round_share: 1.0, ..small_cfg() });
    let m = write_seq(&mut r, 120);
    assert!(fill(&r) > 0.8, "fill {}", fill(&r));
    assert_eq!(r.pol.stats().demote_batches, 0, "no demotion while it fits");
    let before = r.log.len();
    let n = r.idle(100);
    assert!(n > 0);
    assert!(fill(&r) <= 0.6, "fill {}", fill(&r));
    // Not much below: the last batch is at most the need, in segments.
    assert!(fill(&r) > 0.6 - STRIPE as f64 / FAST_DATA as f64 - 1e-9, "fill {}", fill(&r));
    assert_eq!(r.idle_once(), 0, "below the low watermark: nothing to do");
    let moved = slow_written(&r.log[before..]);
    assert_eq!(moved, r.pol.stats().demoted_bytes, "whole segments of fast blocks only, no padding");
    // The oldest blocks went first (LRU): block 0 is on SLOW, block 119 on FAST.
    assert_eq!(r.pol.placement(0).unwrap().0, SLOW);
    assert_eq!(r.pol.placement(119).unwrap().0, FAST);
    assert_eq!(r.read(0, 120 * BLOCK).unwrap(), m.get(0, 120 * BLOCK));
}

#[test]
fn a_round_moves_at_most_its_share_and_the_next_request_starts_a_new_round() {
    // A quarter of 512 KiB: two segments per round.
    let mut r = rig(PolicyConfig { round_share: 0.25, ..small_cfg() });
    write_seq(&mut r, 124);
    let before = r.log.len();
    r.idle(100);
    assert_eq!(slow_written(&r.log[before..]), 128 * KIB);
    assert!(fill(&r) > 0.6, "the round ended before the low watermark");
    assert_eq!(r.idle_once(), 0);
    r.read(0, BLOCK).unwrap();
    let before = r.log.len();
    r.idle(100);
    let moved = slow_written(&r.log[before..]);
    assert!(moved > 0 && moved <= 128 * KIB, "{moved}");
}

#[test]
fn the_bytes_per_second_budget_spaces_batches_out() {
    let mut r = rig(PolicyConfig { round_share: 1.0, budget_bytes_per_s: STRIPE, ..small_cfg() });
    write_seq(&mut r, 124);
    // The bucket starts with one second (one segment) of credit.
    assert_eq!(r.idle_once(), 1);
    assert_eq!(r.idle_once(), 0, "0.2 s later: a fifth of a segment");
    r.now += 1_000_000_000;
    assert_eq!(r.idle_once(), 1, "a second later: one more segment");
    assert_eq!(r.pol.stats().demote_batches, 2);
    assert_eq!(r.pol.stats().demoted_bytes, 2 * STRIPE);
}

#[test]
fn movement_pauses_while_a_tier_is_degraded() {
    let mut r = rig(PolicyConfig { round_share: 1.0, ..small_cfg() });
    write_seq(&mut r, 120);
    r.pol.set_health(TierHealth::Degraded, TierHealth::Ok);
    assert_eq!(r.pol.state(), TierState::Paused);
    assert_eq!(r.idle_once(), 0);
    r.pol.set_health(TierHealth::Ok, TierHealth::Degraded);
    assert_eq!(r.idle_once(), 0);
    // A member state in the Health passed in counts too.
    r.pol.set_health(TierHealth::Ok, TierHealth::Ok);
    let mut h = health();
    h.states[SLOW] = mosaic_core::MemberState::Rebuilding { done: 0 };
    assert!(r.pol.idle(r.now, &h).unwrap().is_empty());
    assert_eq!(r.pol.state(), TierState::Paused);
    assert!(r.idle_once() > 0, "healthy again: demotion runs");
    assert_eq!(r.pol.state(), TierState::Normal);
}

#[test]
fn fast_full_with_demotion_impossible_is_a_state_and_a_clear_error() {
    let mut r = rig(small_cfg());
    r.pol.set_health(TierHealth::Ok, TierHealth::Degraded);
    let m = write_seq(&mut r, 128);
    let e = r.write(200 * BLOCK, &pattern(9, 0, BLOCK)).unwrap_err().to_string();
    assert!(e.contains("fast tier full") && e.contains("paused"), "{e}");
    assert_eq!(r.pol.state(), TierState::FastFull);
    assert_eq!(r.idle_once(), 0, "no busy loop: idle has nothing");
    // In-place overwrites need no new space and still work.
    r.write(5 * BLOCK, &pattern(5, 0, BLOCK)).unwrap();
    // Slow offline: the same error names it, and reads of slow blocks fail.
    r.pol.set_health(TierHealth::Ok, TierHealth::Offline);
    let e = r.write(200 * BLOCK, &pattern(9, 0, BLOCK)).unwrap_err().to_string();
    assert!(e.contains("slow tier is offline"), "{e}");
    assert_eq!(r.pol.state(), TierState::SlowOffline);
    // Healthy again: the write demotes in the foreground and succeeds.
    r.pol.set_health(TierHealth::Ok, TierHealth::Ok);
    r.write(200 * BLOCK, &pattern(9, 0, BLOCK)).unwrap();
    assert_eq!(r.pol.state(), TierState::Normal);
    assert!(r.pol.stats().foreground_demotions > 0);
    let slow_block = (0..128).find(|&b| r.pol.placement(b).unwrap().0 == SLOW).unwrap();
    r.pol.set_health(TierHealth::Ok, TierHealth::Offline);
    let e = r.read(slow_block * BLOCK, BLOCK).unwrap_err().to_string();
    assert!(e.contains("slow tier offline"), "{e}");
    r.pol.set_health(TierHealth::Ok, TierHealth::Ok);
    assert_eq!(r.read(slow_block * BLOCK, BLOCK).unwrap(), m.get(slow_block * BLOCK, BLOCK));
}

/// A discard with the fast tier (which holds the map) offline fails,
/// naming why, and drops nothing; unaligned ranges are refused too.
#[test]
fn a_discard_with_the_fast_tier_offline_is_a_clear_error() {
    let mut r = rig(small_cfg());
    write_seq(&mut r, 8);
    r.pol.set_health(TierHealth::Offline, TierHealth::Ok);
    let e = r.pol.discard(0, 8 * BLOCK, &health()).unwrap_err().to_string();
    assert!(e.contains("fast tier offline") && e.contains("cannot drop"), "{e}");
    r.pol.set_health(TierHealth::Ok, TierHealth::Ok);
    assert!((0..8).all(|b| r.pol.placement(b).is_some()), "nothing left the map");
    let e = r.pol.discard(512, BLOCK, &health()).unwrap_err().to_string();
    assert!(e.contains("512"), "{e}");
    assert!(r.pol.discard(0, 8 * BLOCK, &health()).unwrap().is_some());
    assert!((0..8).all(|b| r.pol.placement(b).is_none()));
}

/// 3 MiB written through a 512 KiB fast tier: block 0's group is on SLOW.
fn mostly_slow() -> (Rig, Model) {
    let mut r = rig(PolicyConfig { round_share: 1.0, ..small_cfg() });
    let m = write_seq(&mut r, 768);
    r.idle(100);
    (r, m)
}

#[test]
fn promotion_after_n_hits() {
    let (mut r, m) = mostly_slow();
    let lb = 20; // group 5 (4-block groups: the 16 KiB extents)
    assert_eq!(r.pol.placement(lb).unwrap().0, SLOW);
    r.read(lb * BLOCK, BLOCK).unwrap();
    assert_eq!(r.idle(10), 0, "one hit: not yet");
    assert_eq!(r.pol.placement(lb).unwrap().0, SLOW);
    r.read(lb * BLOCK, BLOCK).unwrap();
    let before = r.log.len();
    assert_eq!(r.idle(10), 1);
    let p = &r.log[before];
    assert_eq!(r.pol.stats().promote_batches, 1);
    // The whole group came back: one SLOW read, one FAST write (merged).
    for b in 20..24 {
        assert_eq!(r.pol.placement(b).unwrap().0, FAST, "block {b}");
    }
    assert_eq!(ops_on(p, SLOW).len(), 1);
    assert_eq!(ops_on(p, SLOW)[0].0, Dir::Read);
    assert_eq!(r.pol.stats().promoted_bytes, 4 * BLOCK);
    assert_eq!(r.read(16 * BLOCK, 8 * BLOCK).unwrap(), m.get(16 * BLOCK, 8 * BLOCK));
    r.recover();
    assert_eq!(r.pol.placement(20).unwrap().0, FAST);
    assert_eq!(r.read(16 * BLOCK, 8 * BLOCK).unwrap(), m.get(16 * BLOCK, 8 * BLOCK));
}

#[test]
fn a_long_sequential_stream_is_never_promoted_a_short_one_is() {
    let (mut r, m) = mostly_slow();
    // Two passes over 2 MiB (> the 1 MiB cutoff) in 64 KiB reads.
    for _ in 0..2 {
        for i in 0..32 {
            let off = i * 64 * KIB;
            assert_eq!(r.read(off, 64 * KIB).unwrap(), m.get(off, 64 * KIB));
        }
    }
    assert_eq!(r.idle(50), 0, "nothing hot");
    assert_eq!(r.pol.stats().promote_batches, 0);
    // Two passes over 256 KiB: a short stream; its groups are hot.
    for _ in 0..2 {
        for i in 0..4 {
            r.read(i * 64 * KIB, 64 * KIB).unwrap();
        }
    }
    assert!(r.idle(50) > 0);
    assert!(r.pol.stats().promote_batches > 0);
    assert_eq!(r.read(0, 3 << 20).unwrap(), m.get(0, 3 << 20));
}
