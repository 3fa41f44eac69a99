use super::*;

const KIB: f64 = 1024.0;

fn hdd() -> HddSimple {
    HddSimple::seagate_st91000640ss()
}

#[test]
fn paper_crossovers_closed_form() {
    let rt = hdd().r_tpos();
    assert!((rt / KIB - 447.96).abs() < 1e-9);
    let c = |n, k, d1, d2| crossover_rmw_rcw(n, k, d1, d2, rt) / KIB;
    assert!((c(9, 1, 1, 8) - 779.06).abs() < 0.005, "{}", c(9, 1, 1, 8));
    assert!((c(10, 2, 1, 8) - 377.23).abs() < 0.005, "{}", c(10, 2, 1, 8));
    assert!((c(10, 1, 1, 9) - 930.38).abs() < 0.005, "{}", c(10, 1, 1, 9));
    assert!((crossover_rmw_rmw(1, 1, 2, rt) / KIB - 895.92).abs() < 0.005);
    assert!((c(10, 1, 2, 9) - 948.62).abs() < 0.005, "{}", c(10, 1, 2, 9));
}

#[test]
fn numeric_model_reproduces_the_crossovers() {
    // The throughput functions, not just the closed forms, cross there.
    let d = hdd();
    let sizes = parse_size_range("4K:4M").unwrap();
    let r = model_report(9, 1, &d, &sizes).unwrap();
    let c1 = r.rmw_vs_fsw.iter().find(|c| c.d == 1).unwrap();
    assert!((c1.beats_fsw_below_bytes / KIB - 779.06).abs() < 0.01, "{}", c1.beats_fsw_below_bytes / KIB);
    let r = model_report(10, 2, &d, &sizes).unwrap();
    let c1 = r.rmw_vs_fsw.iter().find(|c| c.d == 1).unwrap();
    assert!((c1.beats_fsw_below_bytes / KIB - 377.23).abs() < 0.01);
    // n = 10, k = 1: RMW d=1 up to 895.92, RMW d=2 to 948.62, then FSW.
    let a = Array::new(10, 1).unwrap();
    let iv = report::win_intervals(&a, &d, 64.0 * KIB, 2048.0 * KIB);
    let mid: Vec<(usize, Method, f64, f64)> = iv.iter().map(|i| (i.d, i.method, i.from_bytes / KIB, i.to_bytes / KIB)).collect();
    assert_eq!(mid.len(), 3, "{mid:?}");
    assert_eq!((mid[0].0, mid[0].1), (1, Method::Rmw));
    assert!((mid[0].3 - 895.92).abs() < 0.01, "{mid:?}");
    assert_eq!((mid[1].0, mid[1].1), (2, Method::Rmw));
    assert!((mid[1].3 - 948.62).abs() < 0.01, "{mid:?}");
    assert_eq!((mid[2].0, mid[2].1), (9, Method::Fsw));
    let c1 = model_report(10, 1, &d, &sizes).unwrap().rmw_vs_fsw[0].beats_fsw_below_bytes / KIB;
    assert!((c1 - 930.38).abs() < 0.01, "{c1}");
}

#[test]
fn paper_measured_winners() {
    let d = hdd();
    let r5 = Array::new(9, 1).unwrap();
    let r6 = Array::new(10, 2).unwrap();
    // Among d in {1, 2, 4, 8} with whole units.
    let best = |a: &Array, s: f64| {
        [1usize, 2, 4, 8].iter().map(|&dd| (dd, a.throughput_auto(&d, s, dd))).fold((0, 0.0), |b, c| if c.1 > b.1 { c } else { b }).0
    };
    assert_eq!(best(&r5, 256.0 * KIB), 1);
    assert_eq!(best(&r5, 512.0 * KIB), 1);
    assert_eq!(best(&r5, 1024.0 * KIB), 8);
    assert_eq!(best(&r6, 256.0 * KIB), 1);
    assert_eq!(best(&r6, 512.0 * KIB), 8);
    assert_eq!(best(&r6, 1024.0 * KIB), 8);
    assert_eq!(r5.method(4), Method::Rcw);
    assert_eq!(r5.method(3), Method::Rmw);
    assert_eq!(r6.method(2), Method::Rmw);
    assert_eq!(r6.method(3), Method::Rcw);
}

#[test]
fn speedups_match_equations() {
    let a = Array::new(9, 1).unwrap();
    // HDD: RMW d·n/(2(d+k)), RCW d, FSW d.
    assert!((a.speedup(1, Method::Rmw, 1.0) - 9.0 / 4.0).abs() < 1e-12);
    assert!((a.speedup(5, Method::Rcw, 1.0) - 5.0).abs() < 1e-12);
    assert!((a.speedup(8, Method::Fsw, 1.0) - 8.0).abs() < 1e-12);
    // SSD with α = 0.25: RMW = d n / ((α+1)(d+k)).
    assert!((a.speedup(2, Method::Rmw, 0.25) - 18.0 / (1.25 * 3.0)).abs() < 1e-12);
    // Throughput = S · λ_rw(s/d) for the HDD.
    let d = hdd();
    let s = 256.0 * KIB;
    let lam = |x: f64| x / (0.005 + x / d.rate_bytes_per_s);
    assert!((a.throughput(&d, s, 2, Method::Rmw) / (a.speedup(2, Method::Rmw, 1.0) * lam(s / 2.0)) - 1.0).abs() < 1e-6);
}

#[test]
fn cbro_model() {
    assert!((cbro_speedup_rmw(16, 1.0) - 8.0).abs() < 1e-12);
    assert!((cbro_gain(1, 1) - 2.0).abs() < 1e-12);
    assert!((cbro_gain(1, 2) - 3.0).abs() < 1e-12);
    let slow = hdd();
    let fast = FnTiming { read: |_b: u64| 100_000.0, write: |_b: u64| 100_000.0 };
    let ok = cbro_check(16, 4096, &slow, &fast, 1 << 40, 1 << 30);
    assert!(ok.performance_ok && ok.capacity_ok, "{}", ok.message);
    let bad = cbro_check(16, 4096, &slow, &slow, 1 << 20, 1 << 30);
    assert!(!bad.performance_ok && !bad.capacity_ok);
    assert!(bad.message.contains("bottleneck"), "{}", bad.message);
}

#[test]
fn advisor_prefers_rmw_units_for_small_writes_and_fsw_for_large() {
    let d = hdd();
    let c = default_candidates(4096);
    let small = advise(&[(64 * 1024, 100)], 9, 1, &d, &c).unwrap();
    assert!(small.best_unit >= 64 * 1024, "{:?}", small.best_unit);
    // 4 MiB writes at random sectors: spread them over (nearly) a whole
    // stripe rather than concentrating them (the 4 MiB unit is worst).
    let large = advise(&[(4 << 20, 100)], 9, 1, &d, &c).unwrap();
    assert!(large.best_unit <= 1 << 20, "{}", large.best_unit);
    let worst = large.per_candidate.iter().filter(|c| c.unit >= 64 << 10).min_by(|x, y| x.throughput_bytes_per_s.total_cmp(&y.throughput_bytes_per_s)).unwrap();
    assert!(worst.unit == 64 << 10 || worst.unit == 4 << 20, "{}", worst.unit);
    assert!(advise(&[], 9, 1, &d, &c).is_err());
    assert!(advise(&[(4096, 1)], 9, 9, &d, &c).is_err());
    assert_eq!(ssd_unit_rule(8192, 0.9), Some(8192));
    assert_eq!(ssd_unit_rule(8192, 0.1), None);
}

#[test]
fn size_ranges() {
    assert_eq!(parse_size_range("4K:32K").unwrap(), vec![4096, 8192, 16384, 32768]);
    assert!(parse_size_range("4K").is_err());
    assert!(parse_size_range("8K:4K").is_err());
    assert!(parse_size_range("xK:4K").is_err());
}

