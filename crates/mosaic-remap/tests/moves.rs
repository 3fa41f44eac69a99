//! Moves: a target carried out batch by batch, blocked moves waiting for
//! room, every move program in the protocol's order, and a recovered
//! policy that reads everything back from the same places.

use crate::support;

use std::collections::BTreeSet;

use mosaic_core::{Dir, Phase, Program, Role};
use mosaic_remap::RemapPolicy;
use support::*;

/// Check `p` against the protocol given the places before (`before`)
/// and after (`after`) it was planned: reads of the old places, writes
/// of the new ones, flush of the inner array, the map, flush.
fn check_protocol(p: &Program, before: &RemapPolicy, after: &RemapPolicy, unit: u64) {
    assert_eq!(shape(p), vec!["read", "write", "flush", "write", "flush"], "{p:#?}");
    let units = &p.locks;
    let expand = |ph: &Phase| -> BTreeSet<(usize, u64)> {
        let ops = match ph {
            Phase::Read(ops) | Phase::Write { ops, .. } => ops,
            _ => unreachable!(),
        };
        ops.iter().flat_map(|io| (0..io.op.len / unit).map(move |k| (io.op.member, io.op.offset + k * unit))).collect()
    };
    let old: BTreeSet<_> = units.iter().map(|&l| (0, before.placement(l).unwrap().1)).collect();
    let new: BTreeSet<_> = units.iter().map(|&l| (0, after.placement(l).unwrap().1)).collect();
    assert_eq!(expand(&p.phases[0]), old, "reads of the old places");
    assert_eq!(expand(&p.phases[1]), new, "writes of the new places");
    let Phase::Flush(flushed) = &p.phases[2] else { unreachable!() };
    assert_eq!(flushed, &vec![0]);
    let Phase::Write { ops, .. } = &p.phases[3] else { unreachable!() };
    assert_eq!(ops.len(), 1);
    assert_eq!((ops[0].op.member, ops[0].op.role), (0, Role::Meta));
    assert!(ops[0].op.offset + ops[0].op.len <= before.layout().map_bytes, "the map write stays in the map region");
    assert_eq!(p.phases[4], Phase::Flush(vec![0]));
    assert!(old.is_disjoint(&new), "a batch never lands where it reads");
}

/// A clone of the policy's placements, as a policy recovered from the map.
fn snapshot(r: &Rig) -> RemapPolicy {
    RemapPolicy::recover(r.cfg.clone(), r.geo.clone(), &r.region()).unwrap()
}

#[test]
fn a_target_is_carried_out_with_blocked_moves_waiting_for_room() {
    let cfg = small_cfg(); // batches of 4
    let g = geo(&cfg, 4, 16); // 2 spare slots per member
    let mut r = Rig::new(cfg.clone(), g);
    let model = fill(&mut r, 9);
    // Four units onto member 1 (two spare slots), then two away from it.
    let target = vec![(0, 1), (2, 1), (3, 1), (4, 1), (1, 0), (5, 2)];
    assert_eq!(r.pol.set_target(target.clone()).unwrap(), 6);
    let mut programs = 0;
    while let Some(p) = {
        let before = snapshot(&r);
        let p = r.plan_idle();
        p.map(|p| (p, before))
    } {
        let (p, before) = p;
        r.run(&p, mosaic_exec::Client::None);
        check_protocol(&p, &before, &snapshot(&r), cfg.unit);
        if programs == 0 {
            assert_eq!(r.pol.stats().moves_blocked, 2, "units 3 and 4 wait for member 1 to have room");
            assert_eq!(p.locks, vec![0, 1, 2, 5]);
        }
        programs += 1;
    }
    assert_eq!(programs, 2);
    assert_eq!(r.pol.pending_moves(), 0);
    for (l, m) in target {
        assert_eq!(r.pol.placement(l).unwrap().0, m, "unit {l}");
    }
    let st = r.pol.stats();
    assert_eq!((st.moves, st.move_programs, st.bytes_moved, st.moved_units), (6, 2, 6 * cfg.unit, 6));
    placements_consistent(&r.pol);
    let cap = r.capacity();
    assert_bytes(&r.read(0, cap).unwrap(), model.get(0, cap), "all bytes");
    // Recovered: same placements, same bytes.
    let before = r.pol.moved().clone();
    r.recover();
    assert_eq!(r.pol.moved(), &before);
    placements_consistent(&r.pol);
    assert_bytes(&r.read(0, cap).unwrap(), model.get(0, cap), "all bytes");
}

#[test]
fn blocked_moves_make_idle_quiet_until_room_appears() {
    let cfg = small_cfg();
    let g = geo(&cfg, 4, 16);
    let mut r = Rig::new(cfg, g);
    let mut model = fill(&mut r, 4);
    r.pol.set_target(vec![(0, 1), (2, 1), (3, 1)]).unwrap();
    assert_eq!(r.idle(10), 1);
    assert_eq!(r.pol.pending_moves(), 1);
    assert!(r.plan_idle().is_none(), "no busy loop");
    assert!(r.plan_idle().is_none());
    assert_eq!(r.pol.stats().moves_blocked, 1);
    // Client writes go where units are now.
    let d = pattern(77, 0, 3 * 4096);
    r.write(0, &d).unwrap();
    model.write(0, &d);
    // Unit 5 leaves member 1: unit 3 can go.
    r.pol.set_target(vec![(3, 1), (5, 0)]).unwrap();
    assert_eq!(r.idle(10), 2, "unit 5 first (unit 3 blocked), then unit 3");
    assert_eq!(r.pol.placement(3).unwrap().0, 1);
    let cap = r.capacity();
    assert_bytes(&r.read(0, cap).unwrap(), model.get(0, cap), "all bytes");
    placements_consistent(&r.pol);
}

#[test]
fn units_move_back_home_and_freed_home_slots_are_reused() {
    let cfg = small_cfg();
    let g = geo(&cfg, 2, 6); // 1 spare per member
    let mut r = Rig::new(cfg, g);
    let model = fill(&mut r, 5);
    let home0 = r.pol.placement(0).unwrap();
    r.pol.set_target(vec![(0, 1)]).unwrap();
    assert_eq!(r.idle(5), 1);
    // Unit 1 takes unit 0's old home (the lowest free slot of member 0).
    r.pol.set_target(vec![(1, 0)]).unwrap();
    assert_eq!(r.idle(5), 1);
    assert_eq!(r.pol.placement(1).unwrap(), home0);
    r.pol.set_target(vec![(0, 0), (1, 1)]).unwrap();
    r.idle(5);
    assert_eq!(r.pol.placement(0).unwrap().0, 0);
    assert_eq!(r.pol.placement(1).unwrap().0, 1);
    placements_consistent(&r.pol);
    let cap = r.capacity();
    assert_bytes(&r.read(0, cap).unwrap(), model.get(0, cap), "all bytes");
    r.recover();
    placements_consistent(&r.pol);
    assert_bytes(&r.read(0, cap).unwrap(), model.get(0, cap), "all bytes");
}

#[test]
fn many_batches_fill_the_log_and_checkpoint_and_recover() {
    let mut cfg = small_cfg();
    let g = geo(&cfg, 4, 32);
    // The smallest map region: one log block, so checkpoints come often.
    let lay = RemapPolicy::format(cfg.clone(), g.clone()).unwrap().0.layout().clone();
    cfg.map_bytes = (2 * lay.block + 2 * lay.ckpt_bytes).div_ceil(cfg.unit) * cfg.unit;
    let g = geo(&cfg, 4, 32);
    let mut r = Rig::new(cfg.clone(), g);
    let lay = r.pol.layout().clone();
    assert!(lay.log_bytes < lay.stripe_data + lay.block, "{lay:?}");
    let model = fill(&mut r, 11);
    let units = r.pol.layout().capacity_units;
    for round in 0..6u64 {
        let t: Vec<(u64, usize)> = (0..units).filter(|l| (l + round) % 3 == 0).map(|l| (l, ((l + round + 1) % 4) as usize)).collect();
        r.pol.set_target(t).unwrap();
        r.idle(1000);
        placements_consistent(&r.pol);
        let moved = r.pol.moved().clone();
        r.recover();
        assert_eq!(r.pol.moved(), &moved, "round {round}");
    }
    assert!(r.pol.stats().map_checkpoints == 0, "a recovered policy counts afresh");
    let cap = r.capacity();
    assert_bytes(&r.read(0, cap).unwrap(), model.get(0, cap), "all bytes");
    let checkpoints =
        r.log.iter().filter(|p| p.io().any(|(d, ios)| d == Dir::Write && ios.iter().any(|io| io.op.role == Role::Meta && io.op.offset < lay.block + 2 * lay.ckpt_bytes && io.op.offset >= lay.block)));
    assert!(checkpoints.count() >= 2, "the small log forced checkpoints");
}

#[test]
fn the_budget_limits_bytes_moved_per_second() {
    let cfg = mosaic_remap::RemapConfig { budget_bytes_per_s: 2 * 4096, ..small_cfg() };
    let g = geo(&cfg, 4, 16);
    let mut r = Rig::new(cfg, g);
    let model = fill(&mut r, 8);
    r.pol.set_target(vec![(0, 1), (2, 3), (3, 0), (4, 2), (6, 0), (7, 2)]).unwrap();
    let p = r.plan_idle().expect("a full bucket: two units");
    assert_eq!(p.locks.len(), 2);
    r.run(&p, mosaic_exec::Client::None);
    assert!(r.plan_idle().is_none(), "0.2 s later the bucket holds less than a unit");
    r.now += 1_000_000_000;
    let p = r.plan_idle().expect("refilled");
    assert_eq!(p.locks.len(), 2);
    r.run(&p, mosaic_exec::Client::None);
    assert_eq!(r.pol.pending_moves(), 2);
    assert_eq!(r.pol.stats().bytes_moved, 4 * 4096);
    let cap = r.capacity();
    assert_bytes(&r.read(0, cap).unwrap(), model.get(0, cap), "all bytes");
}

#[test]
fn movement_pauses_while_the_inner_array_is_degraded() {
    let cfg = small_cfg();
    let g = geo(&cfg, 4, 16);
    let mut r = Rig::new(cfg, g);
    let model = fill(&mut r, 6);
    r.pol.set_target(vec![(0, 1)]).unwrap();
    r.pol.set_degraded(true);
    assert!(r.plan_idle().is_none());
    assert_eq!((r.pol.pending_moves(), r.pol.stats().paused), (1, 1));
    // Requests go on meanwhile.
    assert_bytes(&r.read(0, 8192).unwrap(), model.get(0, 8192), "a degraded read");
    r.pol.set_degraded(false);
    assert_eq!(r.idle(4), 1);
    assert_eq!(r.pol.placement(0).unwrap().0, 1);
}
