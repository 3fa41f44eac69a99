//! DVS and the baselines in the replay engine on zoned SMR models, which
//! refuse any write off a zone's write pointer (the run then fails).

use mosaic_core::{DevOp, Frontend, Health, Method, Plan, PlanError, Role, Staged, StripePlan};
use mosaic_drives::{DriveModel, Zoned, ZonedParams};
use mosaic_dvs::baseline::{build_frontend, SchemeSpec};
use mosaic_dvs::{DvsConfig, DvsFrontend, DvsParams, Geo};
use mosaic_sim::{Mode, Pattern, SimConfig, Simulator, Synthetic};

fn smr(n: usize, zone: u64, zones: u64, conv: u64) -> Vec<Box<dyn DriveModel>> {
    (0..n).map(|_| Box::new(Zoned::new("smr", ZonedParams { capacity: zone * zones, zone_size: zone, conventional_zones: conv, t_pos_ms: 5.0, rate_kib_s: 89_592.0 })) as Box<dyn DriveModel>).collect()
}

fn cfg() -> SimConfig {
    SimConfig { mode: Mode::Open { time_scale: 1.0 }, failed: vec![], keep_latencies: false }
}

fn policy(rep: &mosaic_sim::SimReport, key: &str) -> f64 {
    rep.policy.iter().find(|p| p.0 == key).map(|p| p.1).unwrap_or_else(|| panic!("no {key} in {:?}", rep.policy))
}

#[test]
fn dvs_fills_a_small_array_with_gc_and_never_violates_a_write_pointer() {
    // 5 drives of 24 zones of 256 KiB (4 chunks of 64 KiB per segment).
    let zone = 256 << 10;
    let geo = Geo::new(DvsConfig::new(5, 1, 64 << 10, zone, 24, 1)).unwrap();
    let cap = geo.capacity();
    for (cache, idle) in [(0usize, None), (16, Some(20_000_000u64))] {
        let mut p = DvsParams::cached(cache);
        p.idle_ns = idle;
        let mut fe = DvsFrontend::new(geo.clone(), p);
        fe.meta_log = cache > 0;
        let w = Synthetic { pattern: Pattern::RandWrite, size: 16 << 10, count: 4000, footprint: cap, seed: 3, interval_ns: 30_000_000 };
        let rep = Simulator::with_frontend(Box::new(fe), smr(5, zone, 24, 1), cfg()).unwrap().run(w.requests()).unwrap();
        assert_eq!(rep.requests, 4000);
        assert!(policy(&rep, "foreground gc") + policy(&rep, "background gc") > 10.0, "{:?}", rep.policy);
        assert!(rep.ops.zone_resets > 0);
        assert!(policy(&rep, "partial stripes") > 0.0);
        if idle.is_some() {
            assert!(policy(&rep, "background gc") > 0.0, "{:?}", rep.policy);
            // Metadata log writes to the conventional zone, timed too.
            assert!(rep.ops.meta_writes > 0);
        } else {
            assert_eq!(rep.ops.meta_writes, 0);
        }
    }
}

#[test]
fn every_scheme_replays_on_smr_models() {
    let models = || smr(5, 1 << 20, 64, 1);
    let spec = SchemeSpec { chunk: 64 << 10, block: 512, cache_chunks: 64, parity: 1 };
    for name in ["dvs", "dvs2", "segment-raid5", "sblock-raid5"] {
        eprintln!("scheme {name}");
        let fe = build_frontend(name, &models(), &spec).unwrap();
        let cap = fe.capacity();
        let w = Synthetic { pattern: Pattern::Mixed { read_pct: 30 }, size: 8 << 10, count: 3000, footprint: cap / 2, seed: 9, interval_ns: 5_000_000 };
        let rep = Simulator::with_frontend(fe, models(), cfg()).unwrap().run(w.requests()).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(rep.requests, 3000, "{name}");
        assert!(rep.device_writes > 0, "{name}");
    }
    // Segment RAID-5 rewrites segments: it resets zones; raid5 refuses zoned-only schemes' inputs gracefully.
    let hdd: Vec<Box<dyn DriveModel>> = (0..5).map(|_| mosaic_drives::preset("hdd:seagate-st91000640ss").unwrap().build(Some(1 << 30))).collect();
    assert!(build_frontend("dvs", &hdd, &spec).is_err());
    assert!(build_frontend("nope", &hdd, &spec).is_err());
    assert!(build_frontend("raid5", &hdd, &spec).is_ok());
}

/// A front end that appends twice at the same offset: the SMR model must
/// refuse it, so the checks above can fail.
struct BadAppender;

impl Frontend for BadAppender {
    fn describe(&self) -> String {
        "bad".into()
    }
    fn capacity(&self) -> u64 {
        1 << 20
    }
    fn block_size(&self) -> u64 {
        512
    }
    fn members(&self) -> usize {
        1
    }
    fn submit(&mut self, _w: bool, _o: u64, _l: u64, _n: u64, _h: &Health) -> Result<Staged, PlanError> {
        let op = DevOp { member: 0, offset: 1 << 20, len: 4096, role: Role::Data, col: 0 };
        Ok(Staged::foreground(mosaic_core::Program::io_only(&Plan { stripes: vec![StripePlan { stripe: 0, method: Method::Fsw, touched: vec![], reads: vec![], writes: vec![op], span: (0, 0), missing: vec![] }] })))
    }
}

#[test]
fn the_smr_model_refuses_writes_off_the_write_pointer() {
    let w = Synthetic { pattern: Pattern::RandWrite, size: 4096, count: 2, footprint: 1 << 20, seed: 1, interval_ns: 1000 };
    let e = Simulator::with_frontend(Box::new(BadAppender), smr(1, 1 << 20, 4, 1), cfg()).unwrap().run(w.requests()).unwrap_err();
    assert!(e.to_string().contains("write pointer"), "{e}");
}

#[test]
fn degraded_replay_never_touches_the_failed_member() {
    let zone = 256 << 10;
    let geo = Geo::new(DvsConfig::new(5, 2, 64 << 10, zone, 24, 1)).unwrap();
    let cap = geo.capacity();
    let mut p = DvsParams::cached(16);
    p.idle_ns = Some(20_000_000);
    let mut fe = DvsFrontend::new(geo, p);
    fe.meta_log = true;
    let w = Synthetic { pattern: Pattern::Mixed { read_pct: 40 }, size: 16 << 10, count: 3000, footprint: cap, seed: 4, interval_ns: 30_000_000 };
    let c = SimConfig { failed: vec![2, 4], ..cfg() };
    let rep = Simulator::with_frontend(Box::new(fe), smr(5, zone, 24, 1), c).unwrap().run(w.requests()).unwrap();
    for d in [2, 4] {
        assert_eq!((rep.devices[d].reads, rep.devices[d].writes), (0, 0), "failed member {d} was used");
    }
    // Failed from the start, the members only ever get (unwritten) parity
    // columns, so every data chunk is read directly.
    assert_eq!(rep.ops.stripes_degraded, 0);
    assert!(rep.devices[0].writes > 0 && rep.ops.meta_writes > 0);
    assert!(policy(&rep, "foreground gc") + policy(&rep, "background gc") > 0.0);
}
