//! Power cuts at every device write of move programs (deltas and
//! checkpoints): after recovery every unit reads its bytes, and the
//! recovered policy keeps working.  Damaged map bytes never panic.

use crate::support;

use mosaic_exec::Client;
use mosaic_remap::{RemapConfig, RemapGeometry, RemapPolicy};
use support::*;

/// A config whose log holds one block: checkpoints every few batches.
fn tight_cfg(members: usize, slots: u64) -> (RemapConfig, RemapGeometry) {
    let mut cfg = small_cfg();
    let lay = RemapPolicy::format(cfg.clone(), geo(&cfg, members, slots)).unwrap().0.layout().clone();
    cfg.map_bytes = (2 * lay.block + 2 * lay.ckpt_bytes).div_ceil(cfg.unit) * cfg.unit;
    let g = geo(&cfg, members, slots);
    (cfg, g)
}

/// The moves of round `k`: a third of the units, each to another column.
fn target(units: u64, n: usize, k: u64) -> Vec<(u64, usize)> {
    (0..units).filter(|l| (l * 7 + k) % 3 == 0).map(|l| (l, ((l + k + 1) % n as u64) as usize)).collect()
}

/// More work on a recovered policy: writes, a new target, idle, all read back.
fn keeps_working(r: &mut Rig, model: &mut Model, k: u64) {
    let cap = r.capacity();
    for i in 0..8u64 {
        let off = (i * 5 + k) * 4096 % (cap - 8192);
        let d = pattern(900 + k * 10 + i, off, 8192);
        r.write(off, &d).unwrap();
        model.write(off, &d);
    }
    let units = r.pol.layout().capacity_units;
    r.pol.set_target(target(units, r.cols(), k + 1)).unwrap();
    r.idle(1000);
    placements_consistent(&r.pol);
    assert_bytes(&r.read(0, cap).unwrap(), model.get(0, cap), "after more work");
}

#[test]
fn power_cut_at_every_write_of_every_move_program() {
    let (cfg, g) = tight_cfg(4, 12);
    let mut r = Rig::new(cfg.clone(), g.clone());
    let model = fill(&mut r, 21);
    let lay = r.pol.layout().clone();
    let (mut batches, mut cuts, mut checkpoints) = (0, 0, 0);
    for round in 0..8 {
        let t = target(lay.capacity_units, 4, round);
        r.pol.set_target(t.clone()).unwrap();
        loop {
            let base = r.snapshots();
            let Some(p) = r.plan_idle() else { break };
            let map_write = p.io().last().map(|(_, ios)| ios[0].op.offset).unwrap_or(0);
            checkpoints += (map_write < lay.block + 2 * lay.ckpt_bytes) as u32;
            let planned = r.pol.moved().clone();
            let writes = write_ops(&p);
            assert!(writes >= 2, "data and map writes");
            for cut in 0..=writes as i64 {
                // The same state, recovered from the bytes, plans the same program.
                let mut c = Rig::from_bytes(cfg.clone(), g.clone(), base.clone(), r.now);
                c.pol.set_target(t.clone()).unwrap();
                let p2 = c.plan_idle().expect("the same move");
                assert_eq!(p2, p, "batch {batches}: recovery gives the same plan");
                run_cut(&c.mems, &p2, Client::None, cut);
                let mut after = Rig::from_bytes(cfg.clone(), g.clone(), c.snapshots(), c.now);
                placements_consistent(&after.pol);
                if cut == writes as i64 {
                    assert_eq!(after.pol.moved(), &planned, "a finished move is durable");
                }
                let cap = after.capacity();
                assert_bytes(&after.read(0, cap).unwrap(), model.get(0, cap), "batch {batches} cut {cut}");
                if cut % 3 == 0 || cut == writes as i64 {
                    keeps_working(&mut after, &mut Model(model.0.clone()), batches);
                }
                cuts += 1;
            }
            r.run(&p, Client::None);
            batches += 1;
        }
    }
    eprintln!("{batches} batches, {cuts} cuts, {checkpoints} checkpoints");
    assert!(batches >= 12 && cuts > 60, "{batches} batches, {cuts} cuts");
    assert!(checkpoints >= 1, "a cut batch wrote a checkpoint ({batches} batches)");
    assert!(r.log.iter().skip(1).any(|p| p.phases.len() == 5), "move programs ran");
    assert_eq!(r.pol.pending_moves(), 0);
}

#[test]
fn damaged_map_bytes_never_panic() {
    let (cfg, g) = tight_cfg(3, 10);
    let mut r = Rig::new(cfg.clone(), g.clone());
    fill(&mut r, 3);
    let units = r.pol.layout().capacity_units;
    for k in 0..3 {
        r.pol.set_target(target(units, 3, k)).unwrap();
        r.idle(100);
    }
    let region = r.region();
    let lay = r.pol.layout().clone();
    let (mut refused, mut accepted) = (0, 0);
    let mut try_region = |b: &[u8]| match RemapPolicy::recover(cfg.clone(), g.clone(), b) {
        Ok(p) => {
            placements_consistent(&p);
            accepted += 1;
        }
        Err(e) => {
            assert!(!e.to_string().is_empty());
            refused += 1;
        }
    };
    let used = (lay.block + 2 * lay.ckpt_bytes + lay.log_bytes) as usize;
    for pos in (0..used).step_by(7) {
        for flip in [0x01u8, 0x80, 0xff] {
            let mut b = region.clone();
            b[pos] ^= flip;
            try_region(&b);
        }
    }
    try_region(&region[..region.len() / 2]);
    try_region(&[]);
    try_region(&vec![0xA5; region.len()]);
    try_region(&vec![0; region.len()]);
    assert!(refused > 0 && accepted > 0, "refused {refused}, accepted {accepted}");
    // Another configuration or geometry refuses the label, naming the field.
    let e = RemapPolicy::recover(RemapConfig { spare_share: 0.4, ..cfg.clone() }, g.clone(), &region).err().unwrap().to_string();
    assert!(e.contains("spare"), "{e}");
    let mut g2 = g.clone();
    g2.inner.level = mosaic_core::Level::Raid5;
    g2.inner.k -= 1;
    g2.inner.m += 1;
    let e = RemapPolicy::recover(cfg.clone(), g2, &region).err().unwrap().to_string();
    assert!(e.contains("data_columns"), "{e}");
}

#[test]
fn forged_records_are_refused_naming_the_unit() {
    use mosaic_map::blocklog::BlockLedger;
    use mosaic_map::map::{Placement, Update};
    let (cfg, g) = tight_cfg(3, 10);
    let r = Rig::new(cfg.clone(), g.clone());
    let lay = r.pol.layout().clone();
    let region = r.region();
    let forge = |ups: Vec<Update>| {
        let mut b = region.clone();
        let mut log = BlockLedger::fresh(lay.ledger(), lay.block);
        let w = log.checkpoint(&ups).unwrap();
        b[w.offset as usize..w.offset as usize + w.bytes.len()].copy_from_slice(&w.bytes);
        RemapPolicy::recover(cfg.clone(), g.clone(), &b).err().map(|e| e.to_string()).unwrap_or_default()
    };
    let at = |member: u32, slot: u64| Placement::Member { member, offset: lay.slot_offset(member.min(2) as usize, slot) };
    let m = |logical: u64, placement: Placement| Update::Map { logical, placement };
    let cap = lay.capacity_units;
    assert!(forge(vec![m(cap, at(0, lay.slots - 1))]).contains(&format!("unit {cap}: beyond")));
    assert!(forge(vec![m(1, at(3, lay.slots - 1))]).contains("unit 1: column 3"));
    let wrong_column = Placement::Member { member: 1, offset: lay.slot_offset(0, lay.slots - 1) };
    assert!(forge(vec![m(1, wrong_column)]).contains("unit 1: offset"));
    assert!(forge(vec![m(1, Placement::Member { member: 0, offset: lay.map_bytes + 100 })]).contains("unit 1: offset"));
    assert!(forge(vec![m(1, at(0, lay.slots))]).contains("unit 1: offset"));
    assert!(forge(vec![m(1, Placement::Tier { tier: 0, offset: 0 })]).contains("unit 1: placement"));
    assert!(forge(vec![m(1, at(0, lay.slots - 1)), m(2, at(0, lay.slots - 1))]).contains("units 1 and 2 both"));
    // Unit 1 in unit 0's home, unit 0 never moved.
    assert!(forge(vec![m(1, at(0, 0))]).contains("home of unit 0"));
    // ... but fine when unit 0 moved away.
    assert_eq!(forge(vec![m(1, at(0, 0)), m(0, at(1, lay.slots - 1))]), "");
}
