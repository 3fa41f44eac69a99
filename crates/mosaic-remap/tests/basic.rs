//! A fresh array is the inner array's own striping; bad requests, configs,
//! geometries and targets are errors with clear messages.

use crate::support;

use mosaic_core::{Dir, Frontend, Geometry, Health, Level, MemberState, PlanError};
use mosaic_remap::{RemapConfig, RemapError, RemapGeometry, RemapPolicy};
use support::*;

#[test]
fn fresh_policy_is_the_inner_raid0_striping() {
    let cfg = small_cfg();
    let g = geo(&cfg, 4, 16);
    let mut r = Rig::new(cfg.clone(), g);
    let lay = r.pol.layout().clone();
    assert_eq!((lay.ncols(), lay.slots, lay.spare, lay.data_slots, lay.capacity_units), (4, 16, 2, 14, 56));
    assert_eq!(r.capacity(), 56 * cfg.unit);
    let cap = r.capacity();
    let data = pattern(1, 0, cap);
    let st = r.pol.submit(true, 0, cap, 0, &health()).unwrap();
    assert_eq!(st.fg.len(), 1);
    let p = &st.fg[0];
    assert_eq!(p.locks, (0..56).collect::<Vec<u64>>());
    assert_eq!(ops_on(p, 0), vec![(Dir::Write, lay.map_bytes, cap)], "units at home are one inner request");
    r.run(&st.fg[0].clone(), mosaic_exec::Client::In(&data));
    let inner = r.mems[0].snapshot();
    for l in 0..56u64 {
        let off = lay.map_bytes + l * cfg.unit;
        assert_eq!(r.pol.placement(l), Some(((l % 4) as usize, off)), "unit {l}: drive l % 4, in the inner order");
        assert_eq!(&inner[off as usize..(off + cfg.unit) as usize], &data[(l * cfg.unit) as usize..((l + 1) * cfg.unit) as usize], "unit {l}");
    }
    assert_bytes(&r.read(0, cap).unwrap(), &data, "all units");
    assert_eq!(r.pol.placement(56), None);
}

/// Over raid5, a unit's column is the drive the inner layout puts it
/// on: parity drives hold no slot, and every drive gets spare slots.
#[test]
fn over_raid5_columns_are_the_drives_and_skip_parity() {
    let cfg = small_cfg();
    let g = geo_level(&cfg, Level::Raid5, 4, 16);
    let inner = g.inner.clone();
    let mut r = Rig::new(cfg.clone(), g);
    let lay = r.pol.layout().clone();
    assert_eq!((lay.ncols(), lay.period, lay.slots), (4, 4, 12), "3 data units per drive in 4 stripes");
    assert_eq!(lay.spare_stripes, 4);
    assert_eq!(lay.capacity_units, 12 * 3);
    for l in 0..lay.capacity_units {
        let (c, off) = r.pol.placement(l).unwrap();
        let q = lay.map_stripes * 3 + l;
        assert_eq!(off, lay.map_bytes + l * cfg.unit, "unit {l}: at home");
        assert_eq!(lay.columns[c], inner.member_of(q / 3, (q % 3) as usize), "unit {l}: its drive");
        assert_eq!(lay.home_unit(c, lay.slot_at(off).unwrap().1), Some(l));
    }
    // Spare slots of every column are data units of the last stripes.
    for c in 0..4 {
        for j in lay.data_slots..lay.slots {
            let off = lay.slot_offset(c, j);
            assert_eq!(lay.slot_at(off), Some((c, j)));
            assert!(off >= lay.map_bytes + lay.capacity_bytes(), "column {c} slot {j}");
            let s = off / lay.stripe_data;
            assert_eq!(inner.member_of(s, ((off % lay.stripe_data) / cfg.unit) as usize), lay.columns[c]);
        }
    }
    r.pol.set_target(vec![(0, 1), (1, 2), (5, 0)]).unwrap();
    let model = fill(&mut r, 3);
    r.idle(10);
    assert_eq!((r.pol.placement(0).unwrap().0, r.pol.placement(1).unwrap().0, r.pol.placement(5).unwrap().0), (1, 2, 0));
    placements_consistent(&r.pol);
    let cap = r.capacity();
    assert_bytes(&r.read(0, cap).unwrap(), model.get(0, cap), "all bytes");
}

#[test]
fn a_remap_unit_below_the_stripe_unit_splits_its_slots() {
    let cfg = small_cfg();
    let inner = Geometry::new(Level::Raid0, 3, 16 * KIB, 4096, 64 * 16 * KIB).unwrap();
    let mut r = Rig::new(cfg.clone(), RemapGeometry::new(inner));
    let lay = r.pol.layout().clone();
    // Units 4k..4k+3 share one stripe unit, on drive (k % 3).
    for l in 0..24u64 {
        let (c, off) = r.pol.placement(l).unwrap();
        assert_eq!(off, lay.map_bytes + l * cfg.unit);
        assert_eq!(c as u64, (lay.map_bytes / (16 * KIB) + l / 4) % 3, "unit {l}");
    }
    let model = fill(&mut r, 4);
    r.pol.set_target(vec![(0, 2), (1, 2)]).unwrap();
    r.idle(4);
    placements_consistent(&r.pol);
    let cap = r.capacity();
    assert_bytes(&r.read(0, cap).unwrap(), model.get(0, cap), "all bytes");
}

#[test]
fn sub_unit_requests_touch_only_their_blocks() {
    let cfg = RemapConfig { unit: 16 * KIB, block: 4 * KIB, ..small_cfg() };
    let g = geo(&cfg, 3, 8);
    let mut r = Rig::new(cfg.clone(), g);
    let map = r.pol.layout().map_bytes;
    // Blocks 3..6: the last block of unit 0 and the first two of unit 1.
    let st = r.pol.submit(false, 3 * 4096, 3 * 4096, 0, &health()).unwrap();
    let p = &st.fg[0];
    assert_eq!(p.locks, vec![0, 1]);
    assert_eq!(ops_on(p, 0), vec![(Dir::Read, map + 3 * 4096, 3 * 4096)]);
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
    let h = health();
    assert!(matches!(r.pol.submit(false, 100, 4096, 0, &h), Err(PlanError::Unaligned { .. })));
    assert!(matches!(r.pol.submit(false, 0, 100, 0, &h), Err(PlanError::Unaligned { .. })));
    assert!(matches!(r.pol.submit(true, 0, 0, 0, &h), Err(PlanError::Invalid(_))));
    assert!(matches!(r.pol.submit(true, cap - 4096, 8192, 0, &h), Err(PlanError::OutOfRange { .. })));
    assert!(matches!(r.pol.submit(true, u64::MAX - 4095, 4096, 0, &h), Err(PlanError::OutOfRange { .. })));
    let mut offline = Health::all_active(1);
    offline.states[0] = MemberState::Failed;
    let e = r.pol.submit(false, 0, 4 * 4096, 0, &offline).unwrap_err().to_string();
    assert!(e.contains("offline"), "{e}");
    // A degraded inner array pauses movement; requests go on.
    r.pol.set_target(vec![(0, 1)]).unwrap();
    r.pol.set_degraded(true);
    assert!(r.pol.idle(0, &h).unwrap().is_empty());
    assert!(r.pol.idle(0, &offline).unwrap().is_empty());
    assert_eq!(r.pol.stats().paused, 2);
    assert!(r.pol.submit(false, 0, 4096, 0, &h).is_ok());
    r.pol.set_degraded(false);
    assert_eq!(r.pol.idle(0, &h).unwrap().len(), 1);
}

#[test]
fn bad_configs_and_geometries_are_errors() {
    let inner = |level: Level, n: usize, unit: u64, bytes: u64| RemapGeometry::new(Geometry::new(level, n, unit, 4096, bytes).unwrap());
    let g = inner(Level::Raid0, 4, 64 * KIB, 64 << 20);
    let bad = |cfg: RemapConfig, g: &RemapGeometry, want: &str| {
        let e = RemapPolicy::format(cfg, g.clone()).err().unwrap_or_else(|| panic!("an error mentioning {want}")).to_string();
        assert!(e.contains(want), "{e} should mention {want}");
    };
    let d = RemapConfig::default;
    bad(RemapConfig { unit: 3000, ..d() }, &g, "unit 3000");
    bad(RemapConfig { unit: 2048, block: 512, ..d() }, &g, "unit 2048");
    bad(RemapConfig { block: 3000, ..d() }, &g, "block 3000");
    bad(RemapConfig { unit: 4096, block: 8192, ..d() }, &g, "block 8192");
    bad(RemapConfig { unit: 128 * KIB, ..d() }, &g, "divide the inner stripe unit");
    bad(RemapConfig { spare_share: 0.0, ..d() }, &g, "spare_share");
    bad(RemapConfig { spare_share: 0.6, ..d() }, &g, "spare_share");
    bad(RemapConfig { spare_share: f64::NAN, ..d() }, &g, "spare_share");
    bad(RemapConfig { batch_units: 0, ..d() }, &g, "batch_units");
    bad(RemapConfig { batch_units: 1 << 20, ..d() }, &g, "staging");
    bad(RemapConfig { map_bytes: 4096, ..d() }, &g, "map_bytes 4096 is not a multiple");
    bad(RemapConfig { map_bytes: 64 << 10, ..d() }, &g, "map_bytes 65536 below");
    let mut one = g.clone();
    one.inner.members = 1;
    bad(d(), &one, "1 members");
    bad(d(), &inner(Level::Raid1, 2, 64 * KIB, 64 << 20), "raid1");
    bad(d(), &inner(Level::Raid0, 4, 64 * KIB, 128 << 10), "none for data");
    let mut huge = g.clone();
    huge.inner.stripes = u64::MAX / 2;
    bad(d(), &huge, "overflow");
    assert_eq!(RemapPolicy::map_bytes(&RemapConfig { unit: 3000, ..d() }, &g), 0);
    assert!(RemapPolicy::format(d(), g.clone()).is_ok());
    // raid4: the parity drive holds no data and is no column.
    let (p4, _) = RemapPolicy::format(d(), inner(Level::Raid4, 4, 64 * KIB, 64 << 20)).unwrap();
    assert_eq!(p4.layout().columns, vec![0, 1, 2]);
}

#[test]
fn bad_targets_are_errors_and_done_moves_are_skipped() {
    let cfg = small_cfg();
    let g = geo(&cfg, 4, 16);
    let mut r = Rig::new(cfg, g);
    let t = |pol: &mut RemapPolicy, v: Vec<(u64, usize)>| pol.set_target(v).map_err(|e| e.to_string());
    assert!(t(&mut r.pol, vec![(56, 0)]).unwrap_err().contains("unit 56 is beyond"));
    assert!(t(&mut r.pol, vec![(3, 4)]).unwrap_err().contains("column 4"));
    assert!(t(&mut r.pol, vec![(3, 1), (3, 2)]).unwrap_err().contains("unit 3 is named twice"));
    assert!(matches!(r.pol.set_target(vec![(56, 0)]), Err(RemapError::Target(_))));
    // Unit 5 is on column 1 already.
    assert_eq!(t(&mut r.pol, vec![(5, 1), (6, 0)]), Ok(1));
    assert_eq!(r.pol.pending_moves(), 1);
}

#[test]
fn frontend_facts() {
    let cfg = small_cfg();
    let g = geo(&cfg, 4, 16);
    let mut r = Rig::new(cfg.clone(), g);
    assert_eq!((r.pol.members(), r.pol.block_size(), r.pol.idle_after_ns()), (1, 4096, Some(cfg.idle_after_ns)));
    let d = r.pol.describe();
    assert!(d.contains("4 columns") && d.contains("16 slots") && d.contains("raid0"), "{d}");
    let stats = Frontend::stats(&r.pol);
    assert!(stats.iter().any(|(k, v)| k == "units" && *v == 56.0), "{stats:?}");
    assert!(r.pol.flush(0, &health()).unwrap().is_empty());
}
