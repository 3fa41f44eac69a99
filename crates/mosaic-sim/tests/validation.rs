//! The simulator against the analytical model (Jeremic et al. 2015), and the
//! stripe-unit advisor against a brute-force replay sweep.

use mosaic_core::{FixedLayout, Geometry, Level};
use mosaic_drives::{preset, DriveModel};
use mosaic_model::{Array, HddSimple};
use mosaic_sim::{Mode, Pattern, SimConfig, Simulator, Synthetic};
use mosaic_trace::{Op, TraceOptions};

const KIB: u64 = 1024;

fn drives(n: usize) -> Vec<Box<dyn DriveModel>> {
    let c = preset("hdd:seagate-st91000640ss").unwrap();
    (0..n).map(|_| c.build(None)).collect()
}

/// Simulated random-write throughput (bytes/s) of aligned d-unit writes.
fn simulate(level: Level, n: usize, s: u64, d: u64, count: u64) -> f64 {
    let (k, _) = level.columns(n).unwrap();
    let u = s / d;
    let cap = drives(1)[0].capacity();
    let layout = FixedLayout::new(Geometry::new(level, n, u, 512, cap).unwrap()).unwrap();
    // The model predicts a saturated array: keep every drive's queue busy.
    let sim = Simulator::new(&layout, drives(n), SimConfig { mode: Mode::Closed { queue_depth: 256 }, ..Default::default() }).unwrap();
    let w = Synthetic { pattern: Pattern::AlignedUnits { d, unit: u, k: k as u64 }, size: s, count, footprint: 64 << 30, seed: 7, interval_ns: 0 };
    let r = sim.run(w.requests()).unwrap();
    assert_eq!(r.writes, count);
    r.write_bytes as f64 / r.duration_s
}

#[test]
fn simulator_matches_the_model_within_5_percent() {
    let hdd = HddSimple::seagate_st91000640ss();
    for (level, n, k) in [(Level::Raid5, 9usize, 1usize), (Level::Raid6, 10, 2)] {
        let model = Array::new(n, k).unwrap();
        for s in [256 * KIB, 512 * KIB, 1024 * KIB] {
            let mut sim_best = (0, 0.0);
            let mut model_best = (0, 0.0);
            for d in [1u64, 2, 4, 8] {
                let sim = simulate(level, n, s, d, 30000);
                let pred = model.throughput_auto(&hdd, s as f64, d as usize);
                let err = (sim - pred).abs() / pred;
                assert!(err < 0.05, "{level} n={n} s={}K d={d}: simulated {:.2} MiB/s, model {:.2} MiB/s ({:.1}% off)", s / KIB, sim / 1048576.0, pred / 1048576.0, err * 100.0);
                if sim > sim_best.1 {
                    sim_best = (d, sim);
                }
                if pred > model_best.1 {
                    model_best = (d, pred);
                }
            }
            // The paper's measured winners (Sect. 6.2.1, Fig. 9).
            let expect = match (n, s / KIB) {
                (9, 256) | (9, 512) | (10, 256) => 1,
                _ => 8,
            };
            assert_eq!(sim_best.0, expect, "{level} n={n} s={}K: simulated winner", s / KIB);
            assert_eq!(model_best.0, expect, "{level} n={n} s={}K: model winner", s / KIB);
        }
    }
}

#[test]
fn advisor_is_within_5_percent_of_a_brute_force_sweep() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/traces/cloudphysics-vscsi-part1.csv");
    if !path.exists() {
        eprintln!("skipping: {} not present", path.display());
        return;
    }
    let writes: Vec<mosaic_trace::Request> = mosaic_trace::open(&path, &TraceOptions::default())
        .unwrap()
        .map(|r| r.unwrap())
        .filter(|r| r.op == Op::Write)
        .collect();
    let mut sizes = std::collections::BTreeMap::new();
    for w in &writes {
        *sizes.entry(w.len).or_insert(0u64) += 1;
    }
    let sizes: Vec<(u64, u64)> = sizes.into_iter().collect();
    let cands = mosaic_model::default_candidates(4096);
    let est = mosaic_sim::advise::estimate_units(Level::Raid5, 9, 512, drives(1)[0].as_ref(), &writes, &cands, 64).unwrap();
    let chosen_unit = mosaic_sim::advise::best_unit(&est).unwrap();
    // The size-only model, for the record.
    let size_only = mosaic_model::advise(&sizes, 9, 1, &HddSimple::seagate_st91000640ss(), &cands).unwrap();
    eprintln!("size-only model picks {} KiB; placement-aware picks {} KiB", size_only.best_unit / KIB, chosen_unit / KIB);

    let cap = drives(1)[0].capacity();
    let mut sweep = Vec::new();
    for &u in &cands {
        let layout = FixedLayout::new(Geometry::new(Level::Raid5, 9, u, 512, cap).unwrap()).unwrap();
        let sim = Simulator::new(&layout, drives(9), SimConfig { mode: Mode::Closed { queue_depth: 64 }, ..Default::default() }).unwrap();
        let r = sim.run(writes.iter().map(|w| Ok::<_, std::convert::Infallible>(*w))).unwrap();
        sweep.push((u, r.write_bytes as f64 / r.duration_s));
    }
    let best = sweep.iter().cloned().fold((0, 0.0), |b, c| if c.1 > b.1 { c } else { b });
    let chosen = sweep.iter().find(|c| c.0 == chosen_unit).unwrap();
    assert!(
        chosen.1 >= 0.95 * best.1,
        "advisor chose {} KiB ({:.2} MiB/s), the sweep's best is {} KiB ({:.2} MiB/s); sweep {:?}",
        chosen_unit / KIB,
        chosen.1 / 1048576.0,
        best.0 / KIB,
        best.1 / 1048576.0,
        sweep.iter().map(|(u, t)| (u / KIB, (t / 1048576.0 * 100.0).round() / 100.0)).collect::<Vec<_>>()
    );
}
