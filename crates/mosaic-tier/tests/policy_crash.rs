//! Power cuts at every device write of a client write, a demotion (with
//! compaction) and a promotion: recovery from FAST's map bytes always
//! gives every acknowledged byte back, and the accounting stays whole.

mod policy_support;

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
    (r, m)
}

/// Cut power at every device write of the program `act` plans; after
/// each cut, recover and check every block: acknowledged bytes (the
/// model) everywhere, except `maybe` blocks (the program's own client
/// write: old or new until the program completes, new after).
/// What an action planned: the program, and the client write it carries.
type Planned = (Program, Option<(u64, Vec<u8>)>);

fn cut_everywhere(base: &Base, act: &dyn Fn(&mut Rig) -> Planned) -> usize {
    let (p, _) = act(&mut base.rig());
    let writes = write_ops(&p);
    assert!(writes >= 2, "a program with data and map writes");
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
    let act = |r: &mut Rig| {
        r.now += 1_000_000;
        let st = r.pol.submit(true, off, data.len() as u64, r.now, &health()).unwrap();
        assert_eq!(st.fg.len(), 1);
        (st.fg[0].clone(), Some((off, data.clone())))
    };
    let (p, _) = act(&mut base.rig());
    assert!(ops_on(&p, SLOW).iter().any(|o| o.0 == mosaic_core::Dir::Write), "the write demoted first");
    let n = cut_everywhere(&base, &act);
    assert!(n >= 4, "{n} device writes");
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
    let cfg = PolicyConfig { map_bytes: BLOCK + 2 * slot + BLOCK, ..probe };
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
        }
        r.now += 1_000_000;
        let st = r.pol.submit(true, off, data.len() as u64, r.now, &health()).unwrap();
        (st.fg[0].clone(), Some((off, data.clone())))
    };
    let (p, _) = act(&mut base.rig());
    let meta_at: Vec<u64> = ops_on(&p, FAST).iter().filter(|o| o.0 == mosaic_core::Dir::Write && o.1 < l.log_end).map(|o| o.1).collect();
    assert!(meta_at.iter().any(|o| l.slots.contains(o)), "a checkpoint write: {meta_at:?} slots {:?}", l.slots);
    cut_everywhere(&base, &act);
}
