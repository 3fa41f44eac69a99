//! A fresh array is ordinary raid0 striping; bad requests, configs,
//! geometries and targets are errors with clear messages.

mod support;

use mosaic_core::{Dir, Frontend, Health, MemberState, Phase, PlanError};
use mosaic_remap::{RemapConfig, RemapError, RemapGeometry, RemapPolicy};
use support::*;

#[test]
fn fresh_policy_places_unit_l_on_member_l_mod_n_slot_l_div_n() {
    let cfg = small_cfg();
    let g = geo(&cfg, 4, 16);
    let mut r = Rig::new(cfg.clone(), g);
    let lay = r.pol.layout().clone();
    assert_eq!((lay.slots, lay.spare, lay.data_slots, lay.capacity_units), (16, 2, 14, 56));
    assert_eq!(r.capacity(), 56 * cfg.unit);
    let cap = r.capacity();
    let data = pattern(1, 0, cap);
    let st = r.pol.submit(true, 0, cap, 0, &health(4)).unwrap();
    assert_eq!(st.fg.len(), 1);
    let p = &st.fg[0];
    assert_eq!(p.locks, (0..56).collect::<Vec<u64>>());
    let Phase::Write { ops, .. } = &p.phases[0] else { panic!("a write phase") };
    assert_eq!(ops.len(), 56, "striped units never run on: one op each");
    for io in ops {
        let l = io.at.off as u64 / cfg.unit;
        assert_eq!((io.op.member, io.op.offset, io.op.len), ((l % 4) as usize, lay.map_bytes + (l / 4) * cfg.unit, cfg.unit), "unit {l}");
    }
    r.run(&st.fg[0].clone(), mosaic_exec::Client::In(&data));
    for l in 0..56u64 {
        let m = r.mems[(l % 4) as usize].snapshot();
        let off = (lay.map_bytes + (l / 4) * cfg.unit) as usize;
        assert_eq!(&m[off..off + cfg.unit as usize], &data[(l * cfg.unit) as usize..((l + 1) * cfg.unit) as usize], "unit {l}");
        assert_eq!(r.pol.placement(l), Some(((l % 4) as usize, off as u64)));
    }
    assert_bytes(&r.read(0, cap).unwrap(), &data, "all units");
    assert_eq!(r.pol.placement(56), None);
}

#[test]
fn sub_unit_requests_touch_only_their_blocks() {
    let cfg = RemapConfig { unit: 16 * KIB, block: 4 * KIB, ..small_cfg() };
    let g = geo(&cfg, 3, 8);
    let mut r = Rig::new(cfg.clone(), g);
    let map = r.pol.layout().map_bytes;
    // Blocks 3..6: the last block of unit 0 and the first two of unit 1.
    let st = r.pol.submit(false, 3 * 4096, 3 * 4096, 0, &health(3)).unwrap();
    let p = &st.fg[0];
    assert_eq!(p.locks, vec![0, 1]);
    assert_eq!(ops_on(p, 0), vec![(Dir::Read, map + 3 * 4096, 4096)]);
    assert_eq!(ops_on(p, 1), vec![(Dir::Read, map, 2 * 4096)]);
    let d = pattern(3, 0, 5 * 4096);
    r.write(4096, &d).unwrap();
    assert_eq!(r.read(4096, 5 * 4096).unwrap(), d);
    assert_eq!(r.read(0, 4096).unwrap(), vec![0; 4096]);
}

#[test]
fn bad_requests_are_errors() {
    let cfg = small_cfg();
    let g = geo(&cfg, 4, 16);
    let mut r = Rig::new(cfg, g);
    let cap = r.capacity();
    let h = health(4);
    assert!(matches!(r.pol.submit(false, 100, 4096, 0, &h), Err(PlanError::Unaligned { .. })));
    assert!(matches!(r.pol.submit(false, 0, 100, 0, &h), Err(PlanError::Unaligned { .. })));
    assert!(matches!(r.pol.submit(true, 0, 0, 0, &h), Err(PlanError::Invalid(_))));
    assert!(matches!(r.pol.submit(true, cap - 4096, 8192, 0, &h), Err(PlanError::OutOfRange { .. })));
    assert!(matches!(r.pol.submit(true, u64::MAX - 4095, 4096, 0, &h), Err(PlanError::OutOfRange { .. })));
    let mut failed = Health::all_active(4);
    failed.states[2] = MemberState::Failed;
    let e = r.pol.submit(false, 0, 4 * 4096, 0, &failed).unwrap_err().to_string();
    assert!(e.contains("unit 2") && e.contains("member 2") && e.contains("no redundancy"), "{e}");
    // Units on the other members still work.
    assert!(r.pol.submit(false, 0, 2 * 4096, 0, &failed).is_ok());
    // A failed member pauses movement.
    r.pol.set_target(vec![(0, 1)]).unwrap();
    assert!(r.pol.idle(0, &failed).unwrap().is_empty());
    assert_eq!(r.pol.stats().paused, 1);
    assert_eq!(r.pol.idle(0, &h).unwrap().len(), 1);
}

#[test]
fn bad_configs_and_geometries_are_errors() {
    let g = RemapGeometry { members: 4, member_bytes: 64 << 20 };
    let bad = |cfg: RemapConfig, g: RemapGeometry, want: &str| {
        let e = RemapPolicy::format(cfg, g).err().expect("an error").to_string();
        assert!(e.contains(want), "{e} should mention {want}");
    };
    let d = RemapConfig::default;
    bad(RemapConfig { unit: 3000, ..d() }, g, "unit 3000");
    bad(RemapConfig { unit: 2048, block: 512, ..d() }, g, "unit 2048");
    bad(RemapConfig { block: 3000, ..d() }, g, "block 3000");
    bad(RemapConfig { unit: 4096, block: 8192, ..d() }, g, "block 8192");
    bad(RemapConfig { spare_share: 0.0, ..d() }, g, "spare_share");
    bad(RemapConfig { spare_share: 0.6, ..d() }, g, "spare_share");
    bad(RemapConfig { spare_share: f64::NAN, ..d() }, g, "spare_share");
    bad(RemapConfig { batch_units: 0, ..d() }, g, "batch_units");
    bad(RemapConfig { batch_units: 1 << 20, ..d() }, g, "staging");
    bad(RemapConfig { map_bytes: 4096, ..d() }, g, "map_bytes 4096 is not a multiple");
    bad(RemapConfig { map_bytes: 64 << 10, ..d() }, g, "map_bytes 65536 below");
    bad(d(), RemapGeometry { members: 1, ..g }, "1 members");
    bad(d(), RemapGeometry { member_bytes: 0, ..g }, "0 bytes");
    bad(d(), RemapGeometry { member_bytes: 192 << 10, ..g }, "no data slot");
    bad(d(), RemapGeometry { members: 4, member_bytes: u64::MAX }, "overflow");
    assert_eq!(RemapPolicy::map_bytes(&RemapConfig { unit: 3000, ..d() }, &g), 0);
    assert!(RemapPolicy::format(d(), g).is_ok());
}

#[test]
fn bad_targets_are_errors_and_done_moves_are_skipped() {
    let cfg = small_cfg();
    let g = geo(&cfg, 4, 16);
    let mut r = Rig::new(cfg, g);
    let t = |pol: &mut RemapPolicy, v: Vec<(u64, usize)>| pol.set_target(v).map_err(|e| e.to_string());
    assert!(t(&mut r.pol, vec![(56, 0)]).unwrap_err().contains("unit 56 is beyond"));
    assert!(t(&mut r.pol, vec![(3, 4)]).unwrap_err().contains("member 4"));
    assert!(t(&mut r.pol, vec![(3, 1), (3, 2)]).unwrap_err().contains("unit 3 is named twice"));
    assert!(matches!(r.pol.set_target(vec![(56, 0)]), Err(RemapError::Target(_))));
    // Unit 5 is on member 1 already.
    assert_eq!(t(&mut r.pol, vec![(5, 1), (6, 0)]), Ok(1));
    assert_eq!(r.pol.pending_moves(), 1);
}

#[test]
fn frontend_facts() {
    let cfg = small_cfg();
    let g = geo(&cfg, 4, 16);
    let mut r = Rig::new(cfg.clone(), g);
    assert_eq!((r.pol.members(), r.pol.block_size(), r.pol.idle_after_ns()), (4, 4096, Some(cfg.idle_after_ns)));
    let d = r.pol.describe();
    assert!(d.contains("4 members") && d.contains("16 slots"), "{d}");
    let stats = Frontend::stats(&r.pol);
    assert!(stats.iter().any(|(k, v)| k == "units" && *v == 56.0), "{stats:?}");
    assert!(r.pol.flush(0, &health(4)).unwrap().is_empty());
}
