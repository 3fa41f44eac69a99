//! Power cuts at every device write of a client write (one larger than
//! the fast tier too) and its flush, a demotion (with compaction), a
//! promotion, and unflushed writes followed by movement: recovery from
//! FAST's map bytes always gives every flushed byte back, each unflushed
//! block old or new, and the accounting stays whole.

use crate::policy_support;

use mosaic_core::{Frontend, Program};
use mosaic_exec::Client;
use mosaic_tier::{PolicyConfig, TierGeometry, FAST, SLOW};
use policy_support::*;

const STRIPE: u64 = 64 * KIB;

/// The members' bytes and the model at a point in time.
struct Base {
    cfg: PolicyConfig,
    geo: TierGeometry,
    fast: Vec<u8>,
    slow: Vec<u8>,
    model: Model,
    now: u64,
}

impl Base {
    fn of(r: &Rig, model: &Model) -> Base {
        Base { cfg: r.cfg.clone(), geo: r.geo, fast: r.fast.snapshot(), slow: r.slow.snapshot(), model: Model(model.0.clone()), now: r.now }
    }
    fn rig(&self) -> Rig {
        Rig::from_bytes(self.cfg.clone(), self.geo, self.fast.clone(), self.slow.clone(), self.now)
    }
}

/// 256 KiB of fast data, 24 segments: `pct`% of the volume written three
/// times over in strided 12 KiB writes, so slow segments are sparse.
fn setup(pct: u64) -> (Rig, Model) {
    setup_with(pct, PolicyConfig { round_share: 1.0, ..small_cfg() })
}

fn setup_with(pct: u64, cfg: PolicyConfig) -> (Rig, Model) {
    let g = geo(&cfg, 256 * KIB, 24, STRIPE);
    let mut r = Rig::new(cfg, g);
    let mut m = Model::new(r.capacity());
    let used = r.capacity() * pct / 100 / BLOCK;
    for round in 0..3u64 {
        for b in (round..used - 3).step_by(5) {
            let d = pattern(round * 1000 + b, b * BLOCK, 3 * BLOCK);
            r.write(b * BLOCK, &d).unwrap();
            m.write(b * BLOCK, &d);
        }
    }
    r.flush();
    (r, m)
}

/// The write of `data` at `off` and the flush after it, as one program
/// (what "acknowledged and flushed" runs).
fn write_and_flush(r: &mut Rig, off: u64, data: &[u8]) -> Program {
    r.now += 1_000_000;
    let st = r.pol.submit(true, off, data.len() as u64, r.now, &health()).unwrap();
    assert_eq!(st.fg.len(), 1);
    let mut p = st.fg[0].clone();
    for f in r.pol.flush(r.now, &health()).unwrap() {
        p.append(f);
    }
    p
}

/// Cut power at every device write of the program `act` plans; after
/// each cut, recover and check every block: acknowledged bytes (the
/// model) everywhere, except `maybe` blocks (the program's own client
/// write: old or new until the program completes, new after).
/// What an action planned: the program, and the client write it carries.
type Planned = (Program, Option<(u64, Vec<u8>)>);

fn cut_everywhere(base: &Base, act: &dyn Fn(&mut Rig) -> Planned) -> usize {
    let writes = write_ops(&act(&mut base.rig()).0);
    assert!(writes >= 2, "a program with data and map writes");
    cut_at_every_write(base, act)
}

/// [`cut_everywhere`] of a program of any size (a map write alone).
fn cut_at_every_write(base: &Base, act: &dyn Fn(&mut Rig) -> Planned) -> usize {
    let (p, _) = act(&mut base.rig());
    let writes = write_ops(&p);
    for cut in 0..=writes as i64 {
        let mut r = base.rig();
        let (p2, data) = act(&mut r);
        assert_eq!(p2, p, "the same state plans the same program");
        let client = match &data {
            Some((_, d)) => Client::In(d),
            None => Client::None,
        };
        run_cut(&r.fast, &r.slow, &p2, client, cut);
        let mut after = Rig::from_bytes(base.cfg.clone(), base.geo, r.fast.snapshot(), r.slow.snapshot(), r.now);
        accounting_holds(&after);
        check(&mut after, &base.model, data.as_ref(), cut == writes as i64, cut);
        // The recovered tier keeps working: more writes, idle, all there.
        let mut m = Model(base.model.0.clone());
        if let (Some((off, d)), true) = (&data, cut == writes as i64) {
            m.write(*off, d);
        }
        if let Some((off, d)) = &data {
            // Whatever the cut left, rewrite the range so the model is exact.
            after.write(*off, d).unwrap();
            m.write(*off, d);
        }
        for i in 0..40u64 {
            let b = (i * 37) % (after.capacity() / BLOCK - 2);
            let d = pattern(7000 + i, b * BLOCK, 2 * BLOCK);
            after.write(b * BLOCK, &d).unwrap();
            m.write(b * BLOCK, &d);
        }
        after.idle(20);
        accounting_holds(&after);
        let cap = after.capacity();
        assert_eq!(after.read(0, cap).unwrap(), m.get(0, cap), "cut {cut}: after more work");
    }
    writes
}

fn check(r: &mut Rig, model: &Model, data: Option<&(u64, Vec<u8>)>, done: bool, cut: i64) {
    let cap = r.capacity();
    let got = r.read(0, cap).unwrap();
    let bs = BLOCK as usize;
    for (i, (g, w)) in got.chunks(bs).zip(model.0.chunks(bs)).enumerate() {
        let off = (i * bs) as u64;
        match data {
            Some((o, d)) if off >= *o && off < o + d.len() as u64 => {
                let new = &d[(off - o) as usize..(off - o) as usize + bs];
                if done {
                    assert_eq!(g, new, "cut {cut}: acknowledged write, block {i}");
                } else {
                    assert!(g == new || g == w, "cut {cut}: block {i} is neither old nor new");
                }
            }
            _ => assert_eq!(g, w, "cut {cut}: block {i}"),
        }
    }
}

#[test]
fn power_cut_during_a_write_with_new_placements_and_foreground_demotion() {
    let (r, m) = setup(60);
    let base = Base::of(&r, &m);
    // 40 blocks, most not on FAST: new placements, and FAST (64 blocks,
    // nearly full) must demote first.
    let off = 100 * BLOCK;
    let data = pattern(4242, off, 40 * BLOCK);
    let act = |r: &mut Rig| (write_and_flush(r, off, &data), Some((off, data.clone())));
    let (p, _) = act(&mut base.rig());
    assert!(ops_on(&p, SLOW).iter().any(|o| o.0 == mosaic_core::Dir::Write), "the write demoted first");
    let n = cut_everywhere(&base, &act);
    assert!(n >= 4, "{n} device writes");
}

#[test]
fn power_cut_during_a_write_larger_than_the_fast_tier() {
    let (r, m) = setup(60);
    let base = Base::of(&r, &m);
    // 160 blocks through a fast tier of 64: parts of 32, each part's
    // foreground demotion moving other data and the earlier parts on.
    let off = 30 * BLOCK;
    let data = pattern(4343, off, 160 * BLOCK);
    let act = |r: &mut Rig| (write_and_flush(r, off, &data), Some((off, data.clone())));
    let (p, _) = act(&mut base.rig());
    let parts = p.bufs.iter().filter(|b| matches!(b, mosaic_core::Buf::Input { .. })).count();
    assert_eq!(parts, 5, "160 blocks in parts of 32");
    let n = cut_everywhere(&base, &act);
    assert!(n >= 10, "{n} device writes");
}

#[test]
fn power_cut_during_a_demotion_with_compaction() {
    let (r, m) = setup(95);
    let st = r.pol.stats();
    assert!(st.segments_free < st.segments_reserve, "{st:?}");
    let base = Base::of(&r, &m);
    let act = |r: &mut Rig| {
        r.now += 1_000_000_000;
        let ps = r.pol.idle(r.now, &health()).unwrap();
        assert_eq!(ps.len(), 1, "one demotion step");
        (ps[0].clone(), None)
    };
    let (p, _) = act(&mut base.rig());
    let slow = ops_on(&p, SLOW);
    assert!(slow.iter().any(|o| o.0 == mosaic_core::Dir::Read), "compaction reads a victim: {slow:?}");
    assert!(slow.iter().filter(|o| o.0 == mosaic_core::Dir::Write).all(|o| o.1 % STRIPE == 0 && o.2 == STRIPE));
    cut_everywhere(&base, &act);
}

#[test]
fn power_cut_during_a_promotion() {
    let (r, m) = setup(60);
    let base = Base::of(&r, &m);
    let lb = (0..r.capacity() / BLOCK).find(|&b| r.pol.placement(b).map(|p| p.0) == Some(SLOW)).unwrap();
    let act = move |r: &mut Rig| {
        // Hits are not persistent: read twice on the recovered tier.
        r.read(lb * BLOCK, BLOCK).unwrap();
        r.read(lb * BLOCK, BLOCK).unwrap();
        loop {
            r.now += 1_000_000_000;
            let ps = r.pol.idle(r.now, &health()).unwrap();
            assert_eq!(ps.len(), 1, "idle work until the promotion");
            let p = ps[0].clone();
            let promotes = ops_on(&p, SLOW).iter().all(|o| o.0 == mosaic_core::Dir::Read) && ops_on(&p, FAST).iter().any(|o| o.0 == mosaic_core::Dir::Write);
            if promotes {
                return (p, None);
            }
            // A demotion first: run it for real, it is part of the setup.
            r.exec.run(&p, Client::None, None).unwrap();
        }
    };
    cut_everywhere(&base, &act);
}

#[test]
fn power_cut_during_a_write_whose_map_write_is_a_checkpoint() {
    // The smallest map region: two full checkpoints and a one-block
    // log, so most map writes are checkpoints into the other slot.
    let probe = PolicyConfig { round_share: 1.0, ..small_cfg() };
    let g = geo(&probe, 256 * KIB, 24, STRIPE);
    let (pol, _) = mosaic_tier::TierPolicy::format(probe.clone(), g).unwrap();
    let slot = pol.layout().slot_bytes;
    // commit_blocks 0: every placing write commits by itself.
    let cfg = PolicyConfig { map_bytes: BLOCK + 2 * slot + BLOCK, commit_blocks: 0, ..probe };
    let (r, m) = setup_with(60, cfg);
    let l = r.pol.layout().ledger();
    assert_eq!(l.log_end - l.log_start, BLOCK, "{l:?}");
    assert!(r.pol.stats().map_checkpoints > 10);
    let base = Base::of(&r, &m);
    let off = 7 * BLOCK;
    let data = pattern(77, off, 6 * BLOCK);
    // Small writes (of the bytes their blocks hold already, so the model
    // stays exact) to blocks not on FAST fill the log, one sector of delta
    // each, until it has no room; the next write's map write is then a
    // checkpoint.
    let act = |r: &mut Rig| {
        let mut lb = 200;
        while r.pol.log_room() > 0 {
            lb += 1;
            if r.pol.placement(lb).is_some_and(|(m, _)| m == FAST) {
                continue;
            }
            let same = base.model.get(lb * BLOCK, BLOCK).to_vec();
            r.now += 1_000_000;
            let st = r.pol.submit(true, lb * BLOCK, BLOCK, r.now, &health()).unwrap();
            r.exec.run(&st.fg[0], Client::In(&same), None).unwrap();
            for f in r.pol.flush(r.now, &health()).unwrap() {
                r.exec.run(&f, Client::None, None).unwrap();
            }
        }
        (write_and_flush(r, off, &data), Some((off, data.clone())))
    };
    let (p, _) = act(&mut base.rig());
    let meta_at: Vec<u64> = ops_on(&p, FAST).iter().filter(|o| o.0 == mosaic_core::Dir::Write && o.1 < l.log_end).map(|o| o.1).collect();
    assert!(meta_at.iter().any(|o| l.slots.contains(o)), "a checkpoint write: {meta_at:?} slots {:?}", l.slots);
    cut_everywhere(&base, &act);
}

/// `n` consecutive logical blocks that all live on SLOW.
fn slow_run(r: &Rig, n: u64) -> u64 {
    let blocks = r.capacity() / BLOCK;
    (0..blocks - n).find(|&b| (b..b + n).all(|x| r.pol.placement(x).map(|p| p.0) == Some(SLOW))).expect("a run of slow blocks")
}

#[test]
fn power_cut_after_unflushed_writes_and_the_movement_that_commits_them() {
    // Writes over slow blocks without a flush supersede them (held, not
    // free); the idle work after commits them first, then demotes with
    // compaction into free segments.  A cut anywhere leaves each written
    // block old or new, and every other block as flushed.
    let (r, m) = setup(95);
    let base = Base::of(&r, &m);
    let lb = slow_run(&r, 6);
    let off = lb * BLOCK;
    let data = pattern(5151, off, 6 * BLOCK);
    let act = |r: &mut Rig| {
        r.now += 1_000_000;
        let st = r.pol.submit(true, off, data.len() as u64, r.now, &health()).unwrap();
        let mut p = st.fg[0].clone();
        assert!(write_ops(&p) >= 1 && ops_on(&p, SLOW).is_empty(), "the write only writes FAST data");
        loop {
            r.now += 1_000_000_000;
            let ps = r.pol.idle(r.now, &health()).unwrap();
            assert_eq!(ps.len(), 1, "an idle step");
            let moves = ops_on(&ps[0], SLOW).iter().any(|o| o.0 == mosaic_core::Dir::Write);
            p.append(ps[0].clone());
            if moves {
                return (p, Some((off, data.clone())));
            }
        }
    };
    let (p, _) = act(&mut base.rig());
    // The map write that commits the write comes before any slow write.
    let l = base.rig().pol.layout().ledger();
    let writes: Vec<(usize, u64)> = p.io().filter(|(d, _)| *d == mosaic_core::Dir::Write).flat_map(|(_, ios)| ios.iter().map(|io| (io.op.member, io.op.offset))).collect();
    let first_map = writes.iter().position(|&(m, o)| m == FAST && o < l.log_end).expect("a map write");
    let first_slow = writes.iter().position(|&(m, _)| m == SLOW).expect("a slow write");
    assert!(first_map < first_slow, "commit before movement: {writes:?}");
    cut_everywhere(&base, &act);
}

#[test]
fn superseded_slow_blocks_keep_their_data_until_the_commit() {
    let (mut r, m) = setup(60);
    // Every live block of one slow segment.
    let lb = slow_run(&r, 1);
    let seg = r.pol.placement(lb).unwrap().1 / STRIPE;
    let blocks: Vec<u64> = (0..r.capacity() / BLOCK).filter(|&b| r.pol.placement(b).is_some_and(|(t, o)| t == SLOW && o / STRIPE == seg)).collect();
    let st0 = r.pol.stats();
    for &b in &blocks {
        r.write(b * BLOCK, &pattern(808, b * BLOCK, BLOCK)).unwrap();
    }
    let st1 = r.pol.stats();
    assert_eq!(st1.map_dirty, blocks.len() as u64);
    assert_eq!(st1.segments_free, st0.segments_free + 1, "the segment is free in memory");
    assert_eq!(st1.map_bytes_written, st0.map_bytes_written, "no map write before the flush");
    // A crash now: the durable map still names the slow blocks, intact.
    let mut c = Rig::from_bytes(r.cfg.clone(), r.geo, r.fast.snapshot(), r.slow.snapshot(), r.now);
    for &b in &blocks {
        assert_eq!(c.read(b * BLOCK, BLOCK).unwrap(), m.get(b * BLOCK, BLOCK), "block {b}: the flushed data");
    }
    accounting_holds(&c);
    // Idle work commits before any movement (the free segment may be its
    // target): its first program writes the map and nothing on SLOW.
    r.now += 1_000_000_000;
    let ps = r.pol.idle(r.now, &health()).unwrap();
    assert_eq!(ps.len(), 1);
    let end = mosaic_tier::TierPolicy::map_bytes(&r.cfg, &r.geo);
    assert!(ops_on(&ps[0], SLOW).is_empty() && ops_on(&ps[0], FAST).iter().all(|o| o.1 < end), "{:?}", ops_on(&ps[0], FAST));
    r.run(&ps[0], Client::None);
    // Committed: a crash keeps the new data.
    let st2 = r.pol.stats();
    assert_eq!((st2.map_dirty, st2.map_commits), (0, st1.map_commits + 1));
    r.crash();
    accounting_holds(&r);
    for &b in &blocks {
        assert_eq!(r.read(b * BLOCK, BLOCK).unwrap(), pattern(808, b * BLOCK, BLOCK), "block {b}: flushed");
    }
}

/// A discard's map write cut at every device write: the discarded blocks
/// read their old bytes or zeros, all of them zeros once it is done; every
/// other block keeps its bytes, and the tier recovered from the cut reuses
/// the freed places with everything intact.
#[test]
fn power_cut_during_a_discard() {
    let (r, m) = setup(60);
    let base = Base::of(&r, &m);
    // From the first block on one tier to the first on the other.
    let first = |tier: usize| (0..r.capacity() / BLOCK).find(|&b| r.pol.placement(b).map(|p| p.0) == Some(tier)).unwrap();
    let (a, b) = (first(FAST).min(first(SLOW)), first(FAST).max(first(SLOW)));
    let (off, len) = (a * BLOCK, (b + 1 - a) * BLOCK);
    let zeros = vec![0u8; len as usize];
    let act = |r: &mut Rig| (r.pol.discard(off, len, &health()).unwrap().expect("mapped blocks to discard"), Some((off, zeros.clone())));
    let (p, _) = act(&mut base.rig());
    assert!(ops_on(&p, SLOW).is_empty(), "a discard moves no data");
    assert!(ops_on(&p, FAST).iter().all(|o| o.1 < r.pol.layout().map_bytes), "it writes the map only");
    assert_eq!(cut_at_every_write(&base, &act), 1, "one map write");
}
