use std::sync::Arc;

use mosaic_core::{Frontend, Health, Program};
use mosaic_dev::{MemMember, Member};
use mosaic_exec::{Client, Executor};
use mosaic_format::frame::{self, FRAME_MAGIC, SECTOR};
use mosaic_remap::RemapPolicy;
use mosaic_tier::TierPolicy;

use super::{random_inputs, run};
use crate::mapped_policies;
use crate::mapped_policies::{remap_cfg, tier_cfg, REMAP, TIER};

/// The formatted regions the body XORs its input onto (made by its first
/// call): the tier's, the remapped array's.
fn regions() -> (&'static [u8], &'static [u8]) {
    mapped_policies(&[]);
    (TIER.get().unwrap(), REMAP.get().unwrap())
}

/// `a` XOR `b` (as long as the longer), trailing zeros dropped: the input
/// that makes the body see `b` where it formatted `a`.
fn mask(a: &[u8], b: &[u8]) -> Vec<u8> {
    let mut m: Vec<u8> = (0..a.len().max(b.len())).map(|i| a.get(i).unwrap_or(&0) ^ b.get(i).unwrap_or(&0)).collect();
    while m.last() == Some(&0) {
        m.pop();
    }
    m
}

/// Run `ps` on `exec`, the client's bytes (for writes) `data`.
fn run_all(exec: &Executor, ps: &[Program], data: &[u8]) {
    for p in ps {
        exec.run(p, if data.is_empty() { Client::None } else { Client::In(data) }, None).unwrap();
    }
}

/// The tier's map region after writes, migrations and a flush.
fn used_tier() -> Vec<u8> {
    let (cfg, geo) = tier_cfg();
    let (fast, slow) = (Arc::new(MemMember::new("fast", geo.fast_bytes)), Arc::new(MemMember::new("slow", geo.slow_bytes)));
    let exec = Executor::new(vec![Some(fast.clone() as Arc<dyn Member>), Some(slow as Arc<dyn Member>)], 0);
    let (mut pol, p) = TierPolicy::format(cfg.clone(), geo).unwrap();
    exec.run(&p, Client::None, None).unwrap();
    let (h, mut now) = (Health::all_active(2), 1_000_000_000);
    for (i, off) in [0u64, 4096, 65536, 20 << 12, 4096, 0, 40 << 12].into_iter().enumerate() {
        now += 1_000_000;
        let data = vec![i as u8 + 1; 16 << 10];
        let st = pol.submit(true, off, data.len() as u64, now, &h).unwrap();
        run_all(&exec, &st.fg, &data);
        run_all(&exec, &st.bg, &[]);
    }
    for _ in 0..8 {
        now += 200_000_000;
        run_all(&exec, &pol.idle(now, &h).unwrap(), &[]);
    }
    run_all(&exec, &pol.flush(now, &h).unwrap(), &[]);
    fast.snapshot()[..TierPolicy::map_bytes(&cfg, &geo) as usize].to_vec()
}

/// Units the remapped array moves, and where to.
const MOVES: [(u64, usize); 3] = [(0, 1), (1, 2), (5, 0)];

/// The remapped array's map region after writes and the moves.
fn used_remap() -> Vec<u8> {
    let (cfg, geo) = remap_cfg();
    let m = Arc::new(MemMember::new("inner", geo.inner.capacity()));
    let exec = Executor::new(vec![Some(m.clone() as Arc<dyn Member>)], 0);
    let (mut pol, p) = RemapPolicy::format(cfg.clone(), geo.clone()).unwrap();
    exec.run(&p, Client::None, None).unwrap();
    pol.set_budget(0);
    let (h, mut now) = (Health::all_active(1), 1_000_000_000);
    for u in 0..8u64 {
        now += 1_000_000;
        let data = vec![u as u8 + 1; 4096];
        run_all(&exec, &pol.submit(true, u * 4096, 4096, now, &h).unwrap().fg, &data);
    }
    assert_eq!(pol.set_target(MOVES.to_vec()).unwrap(), 3);
    for _ in 0..16 {
        now += 200_000_000;
        run_all(&exec, &pol.idle(now, &h).unwrap(), &[]);
    }
    assert_eq!(pol.pending_moves(), 0);
    m.snapshot()[..RemapPolicy::map_bytes(&cfg, &geo) as usize].to_vec()
}

/// Where the frames of `region` start.
fn frames(region: &[u8]) -> Vec<usize> {
    (0..region.len()).step_by(SECTOR).filter(|&at| region[at..].starts_with(&FRAME_MAGIC) && frame::frame_len(&region[at..]).is_ok()).collect()
}

/// The body on `mask` (an input), on it with each single bit flipped of
/// the first `flip` bytes of each frame of `region` (what the body sees),
/// and on it cut (the region's tail left as formatted) inside the first
/// `flip` bytes of each frame and at each sector boundary.
fn damaged(name: &str, mask: &[u8], region: &[u8], flip: usize) {
    let body = mapped_policies;
    run(body, &|| name.to_string(), mask);
    for f in frames(region) {
        let mut m = mask.to_vec();
        m.resize(m.len().max(f + flip), 0);
        for i in f..f + flip {
            for bit in 0..8 {
                m[i] ^= 1 << bit;
                run(body, &|| format!("{name} with bit {bit} of byte {i} flipped"), &m);
                m[i] ^= 1 << bit;
            }
        }
        for len in f..(f + flip).min(mask.len()) {
            run(body, &|| format!("{name} cut to {len} bytes"), &mask[..len]);
        }
    }
    for len in (0..mask.len()).step_by(SECTOR) {
        run(body, &|| format!("{name} cut to {len} bytes"), &mask[..len]);
    }
}

/// The seed corpus of the cargo-fuzz target: the masks that make the body
/// see the used regions.
pub(super) fn corpus() -> Vec<Vec<u8>> {
    let (tier, remap) = regions();
    vec![mask(tier, &used_tier()), mask(remap, &used_remap())]
}

#[test]
fn random_bytes() {
    // Mostly short: XORed onto the start of the regions, where the
    // labels are.
    random_inputs(mapped_policies, 0x3a, 2000, 8192, &[]);
}

#[test]
fn valid_inputs_decode() {
    let ((tc, tg), (rc, rg)) = (tier_cfg(), remap_cfg());
    let (tier, remap) = regions();
    assert!(!frames(tier).is_empty() && !frames(remap).is_empty());
    let t = TierPolicy::recover(tc.clone(), tg, tier).unwrap();
    assert!(t.capacity() > 0);
    let r = RemapPolicy::recover(rc.clone(), rg.clone(), remap).unwrap();
    assert!(r.moved().is_empty());
    // What the body makes of the masks: the regions after use.
    let (ut, ur) = (used_tier(), used_remap());
    assert_ne!(ut, tier, "the tier's map changed");
    let back = mapped_policies::xored(tier, &mask(tier, &ut));
    assert_eq!(back, ut);
    TierPolicy::recover(tc, tg, &back).unwrap();
    let back = mapped_policies::xored(remap, &mask(remap, &ur));
    assert_eq!(back, ur);
    let r = RemapPolicy::recover(rc, rg, &back).unwrap();
    assert_eq!(r.moved().keys().copied().collect::<Vec<_>>(), MOVES.map(|m| m.0), "the moves are recovered");
    for (u, c) in MOVES {
        assert_eq!(r.placement(u).unwrap().0, c);
    }
}

#[test]
fn valid_inputs_damaged() {
    let (tier, remap) = regions();
    damaged("the formatted regions", &[], tier, 64);
    let ut = used_tier();
    damaged("the used tier", &mask(tier, &ut), &ut, 32);
    let ur = used_remap();
    damaged("the used remapped array", &mask(remap, &ur), &ur, 32);
}
