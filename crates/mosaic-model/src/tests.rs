use super::*;

const KIB: f64 = 1024.0;

fn hdd() -> HddSimple {
    HddSimple::seagate_st91000640ss()
}

/// The HDD hidden behind the generic adapter: forces the numeric paths.
fn hdd_generic() -> impl DriveTiming {
    let h = hdd();
    FnTiming { read: move |b: u64| h.read_ns(b), write: move |b: u64| h.write_ns(b) }
}

/// Asserts `x` bytes is `kib` KiB to 0.01 KiB (i.e. rounds to it).
fn assert_kib(x: f64, kib: f64, what: &str) {
    assert!((x / KIB - kib).abs() < 0.005, "{what}: got {:.4} KiB, want {kib:.2} KiB", x / KIB);
}

fn rel(a: f64, b: f64) -> f64 {
    (a - b).abs() / b.abs().max(1e-300)
}

// ---------------------------------------------------------------- required values

#[test]
fn r_tpos_of_the_paper_drive() {
    assert!((hdd().r_tpos() / KIB - 447.96).abs() < 1e-9);
}

#[test]
fn required_crossovers_closed_form() {
    let rt = hdd().r_tpos();
    // Ineq. 18 with d2 = n - k (FSW).
    assert_kib(crossover_rmw_rcw(9, 1, 1, 8, rt), 779.06, "n=9 k=1 RMW d=1 vs FSW");
    assert_kib(crossover_rmw_rcw(10, 2, 1, 8, rt), 377.23, "n=10 k=2 RMW d=1 vs FSW");
    assert_kib(crossover_rmw_rcw(10, 1, 1, 9, rt), 930.38, "n=10 k=1 RMW d=1 vs FSW");
    // The d = 2 window for n = 10, k = 1: Ineq. 14 (d1=1, d2=2), Ineq. 18 (d1=2, d2=9).
    assert_kib(crossover_rmw_rmw(1, 1, 2, rt), 895.92, "n=10 k=1 RMW d=1 vs RMW d=2");
    assert_kib(crossover_rmw_rcw(10, 1, 2, 9, rt), 948.62, "n=10 k=1 RMW d=2 vs FSW");
    // The same from the generic affine form.
    let c = |n, k, a: (Method, usize), b| crossover_hdd(n, k, &hdd(), a, b).unwrap().unwrap();
    assert_kib(c(9, 1, (Method::Rmw, 1), (Method::Fsw, 8)), 779.06, "affine 779");
    assert_kib(c(10, 2, (Method::Rmw, 1), (Method::Fsw, 8)), 377.23, "affine 377");
    assert_kib(c(10, 1, (Method::Rmw, 1), (Method::Fsw, 9)), 930.38, "affine 930");
    assert_kib(c(10, 1, (Method::Rmw, 1), (Method::Rmw, 2)), 895.92, "affine 896");
    assert_kib(c(10, 1, (Method::Rmw, 2), (Method::Fsw, 9)), 948.62, "affine 949");
}

#[test]
fn required_crossovers_from_the_throughput_functions() {
    // Root of the throughput difference, numerically, through the generic
    // drive adapter: the closed forms are consequences of the throughput
    // definitions, not separately asserted constants.
    let g = hdd_generic();
    let (lo, hi) = (512.0, 1e12);
    let x = |n, k, a, b| crossover_numeric(n, k, &g, a, b, lo, hi).unwrap().unwrap();
    assert_kib(x(9, 1, (Method::Rmw, 1), (Method::Fsw, 8)), 779.06, "numeric 779");
    assert_kib(x(10, 2, (Method::Rmw, 1), (Method::Fsw, 8)), 377.23, "numeric 377");
    assert_kib(x(10, 1, (Method::Rmw, 1), (Method::Fsw, 9)), 930.38, "numeric 930");
    assert_kib(x(10, 1, (Method::Rmw, 1), (Method::Rmw, 2)), 895.92, "numeric 896");
    assert_kib(x(10, 1, (Method::Rmw, 2), (Method::Fsw, 9)), 948.62, "numeric 949");
    // And they agree with the closed forms to 1e-9.
    let rt = hdd().r_tpos();
    assert!(rel(x(10, 1, (Method::Rmw, 1), (Method::Fsw, 9)), crossover_rmw_rcw(10, 1, 1, 9, rt)) < 1e-9);
    assert!(rel(x(10, 1, (Method::Rmw, 1), (Method::Rmw, 2)), crossover_rmw_rmw(1, 1, 2, rt)) < 1e-9);
}

#[test]
fn required_d2_window_n10_k1() {
    for (name, iv) in [
        ("exact", win_intervals(10, 1, &hdd(), 4.0 * KIB, 4096.0 * KIB).unwrap()),
        ("numeric", win_intervals(10, 1, &hdd_generic(), 4.0 * KIB, 4096.0 * KIB).unwrap()),
    ] {
        let v: Vec<(Method, usize)> = iv.iter().map(|i| (i.method, i.d)).collect();
        assert_eq!(v, vec![(Method::Rmw, 1), (Method::Rmw, 2), (Method::Fsw, 9)], "{name}: {iv:?}");
        assert_eq!(iv[0].from_bytes, 4.0 * KIB);
        assert_kib(iv[0].to_bytes, 895.92, name);
        assert_kib(iv[1].from_bytes, 895.92, name);
        assert_kib(iv[1].to_bytes, 948.62, name);
        assert_kib(iv[2].from_bytes, 948.62, name);
        assert_eq!(iv[2].to_bytes, 4096.0 * KIB);
    }
}

#[test]
fn win_intervals_of_the_other_arrays() {
    let one = |n, k| win_intervals(n, k, &hdd(), 4.0 * KIB, 4096.0 * KIB).unwrap();
    // n = 9, k = 1: RMW d=1 hands over straight to FSW at 779.06 KiB.
    let iv = one(9, 1);
    assert_eq!(iv.iter().map(|i| (i.method, i.d)).collect::<Vec<_>>(), vec![(Method::Rmw, 1), (Method::Fsw, 8)]);
    assert_kib(iv[0].to_bytes, 779.06, "n=9");
    // n = 10, k = 2: at 377.23 KiB.
    let iv = one(10, 2);
    assert_eq!(iv.iter().map(|i| (i.method, i.d)).collect::<Vec<_>>(), vec![(Method::Rmw, 1), (Method::Fsw, 8)]);
    assert_kib(iv[0].to_bytes, 377.23, "n=10 k=2");
    // n = 16, k = 2 (Fig. 3): RMW d=2 is best between 448 KiB and 1254 KiB.
    let iv = one(16, 2);
    assert_eq!(iv.iter().map(|i| (i.method, i.d)).collect::<Vec<_>>(), vec![(Method::Rmw, 1), (Method::Rmw, 2), (Method::Fsw, 14)]);
    assert_kib(iv[1].from_bytes, 447.96, "n=16 k=2 from");
    assert_kib(iv[1].to_bytes, 1254.29, "n=16 k=2 to");
    // A single point.
    let iv = win_intervals(9, 1, &hdd(), 256.0 * KIB, 256.0 * KIB).unwrap();
    assert_eq!(iv.len(), 1);
    assert_eq!((iv[0].method, iv[0].d), (Method::Rmw, 1));
    assert!(win_intervals(9, 1, &hdd(), 0.0, 1.0).is_err());
    assert!(win_intervals(9, 1, &hdd(), 2.0, 1.0).is_err());
}

#[test]
fn exact_and_numeric_intervals_agree_across_shapes() {
    // Every shape n = 3..20, k = 1..3, two drives: same winners, boundaries
    // to 1e-9 relative.
    let drives = [hdd(), HddSimple { t_pos_s: 0.0121, rate_bytes_per_s: 210e6 }];
    for h in drives {
        let g = FnTiming { read: move |b: u64| h.read_ns(b), write: move |b: u64| h.write_ns(b) };
        for n in 3..=20 {
            for k in 1..=3.min(n - 1) {
                let e = win_intervals(n, k, &h, 512.0, 64.0 * 1048576.0).unwrap();
                let x = win_intervals(n, k, &g, 512.0, 64.0 * 1048576.0).unwrap();
                assert_eq!(e.len(), x.len(), "n={n} k={k}: {e:?} vs {x:?}");
                for (a, b) in e.iter().zip(&x) {
                    assert_eq!((a.method, a.d), (b.method, b.d), "n={n} k={k}");
                    assert!(rel(a.to_bytes, b.to_bytes) < 1e-9, "n={n} k={k}: {a:?} vs {b:?}");
                }
                // Contiguous, and each interval's winner is the direct winner at its middle.
                let arr = Array::new(n, k).unwrap();
                for w in e.windows(2) {
                    assert_eq!(w[0].to_bytes, w[1].from_bytes);
                }
                for i in &e {
                    let mid = (i.from_bytes * i.to_bytes).sqrt();
                    let (d, m, _) = arr.winner(&h, mid);
                    assert_eq!((m, d), (i.method, i.d), "n={n} k={k} at {mid}");
                }
            }
        }
    }
}

#[test]
fn paper_measured_winners() {
    // Sect. 6.3.1, Fig. 9: among d in {1, 2, 4, 8} with whole units
    // (u = s/d), and also among all d.
    let h = hdd();
    let r5 = Array::new(9, 1).unwrap();
    let r6 = Array::new(10, 2).unwrap();
    let best_of = |a: &Array, s: f64| [1usize, 2, 4, 8].into_iter().map(|d| (d, a.throughput_auto(&h, s, d))).fold((0, 0.0), |b, c| if c.1 > b.1 { c } else { b }).0;
    for (a, s, want) in [(&r5, 256.0, 1), (&r5, 512.0, 1), (&r5, 1024.0, 8), (&r6, 256.0, 1), (&r6, 512.0, 8), (&r6, 1024.0, 8)] {
        assert_eq!(best_of(a, s * KIB), want, "n={} s={s}K", a.n);
        let w = winner(a.n, a.k, &h, s * KIB).unwrap();
        assert_eq!(w.d, want, "n={} s={s}K all d", a.n);
        assert_eq!(w.method, if want == 8 { Method::Fsw } else { Method::Rmw });
        assert_eq!(w.throughput_bytes_per_s, a.throughput_auto(&h, s * KIB, want));
    }
    // d = 1, 2 are RMW and d = 4 RCW in both arrays (Sect. 6.3.1).
    for a in [r5, r6] {
        assert_eq!([a.method(1), a.method(2), a.method(4), a.method(8)], [Method::Rmw, Method::Rmw, Method::Rcw, Method::Fsw]);
    }
    // RMW up to d = ceil((n-2k)/2) - 1: 3 for RAID-5 n=9, 2 for RAID-6 n=10.
    assert_eq!((r5.method(3), r5.method(4)), (Method::Rmw, Method::Rcw));
    assert_eq!((r6.method(2), r6.method(3)), (Method::Rmw, Method::Rcw));
}

// ---------------------------------------------------------------- equations

#[test]
fn speedups_match_the_equations() {
    // HDD (α = 1): RMW d·n/(2(d+k)), RCW d, FSW n-k (Eq. 9, 10, 6).
    let a = Array::new(9, 1).unwrap();
    assert_eq!(speedup_rmw(9, 1, 1, 1.0), 9.0 / 4.0);
    assert_eq!(a.speedup(1, Method::Rmw, 1.0), 9.0 / 4.0);
    for d in 4..8 {
        assert!((speedup_rcw(9, 1, d, 1.0) - d as f64).abs() < 1e-12);
        assert!((a.speedup(d, Method::Rcw, 1.0) - d as f64).abs() < 1e-12);
    }
    assert_eq!(speedup_fsw(9, 1), 8.0);
    assert!((a.speedup(8, Method::Fsw, 0.3) - 8.0).abs() < 1e-12);
    // FSW is RCW with d = n - k (remark under Eq. 6).
    assert!((speedup_rcw(9, 1, 8, 0.37) - 8.0).abs() < 1e-12);
    // General α (Eq. 4, 5).
    assert!((speedup_rmw(10, 2, 3, 0.25) - 30.0 / (1.25 * 5.0)).abs() < 1e-12);
    assert!((a.speedup(2, Method::Rmw, 0.25) - 18.0 / (1.25 * 3.0)).abs() < 1e-12);
    assert!((speedup_rcw(10, 2, 5, 0.25) - 50.0 / (0.25 * 3.0 + 7.0)).abs() < 1e-12);
    // Eq. 7/8: RMW beats RCW iff d < (n - 2k)/2, for any α.
    for n in 4..20 {
        for k in 1..3.min(n - 1) {
            let a = Array::new(n, k).unwrap();
            for d in 1..a.data() {
                for al in [0.1, 1.0, 3.0] {
                    let rmw_better = speedup_rmw(n, k, d, al) > speedup_rcw(n, k, d, al);
                    assert_eq!(rmw_better, 2 * d + 2 * k < n, "n={n} k={k} d={d} α={al}");
                    assert_eq!(rmw_better, a.method(d) == Method::Rmw);
                }
            }
        }
    }
}

#[test]
fn throughput_is_speedup_times_drive_throughput() {
    // HDD: the generic throughput is Eq. 12 exactly.
    let h = hdd();
    let a = Array::new(10, 1).unwrap();
    for s in [4.0 * KIB, 100.0 * KIB, 930.0 * KIB, 3333.0 * KIB] {
        for d in 1..=9 {
            let m = a.method(d);
            let t = a.throughput(&h, s, d, m);
            let cf = throughput_hdd_closed_form(10, 1, &h, s, d, m);
            assert!(rel(t, cf) < 1e-12, "s={s} d={d}: {t} vs {cf}");
            let lam = hdd_lambda(s / d as f64, 0.005, 89_592.0 * 1024.0);
            assert!(rel(t, a.speedup(d, m, 1.0) * lam) < 1e-12);
            assert!(rel(throughput_array(10, 1, &h, s, d, m).unwrap(), t) < 1e-15);
        }
    }
    // An SSD-like drive with α != 1: λ_array = S(α(x)) · λ_rw(x) (Eq. 3).
    let ssd = FnTiming { read: |b: u64| 80_000.0 + b as f64 * 3.0, write: |b: u64| 300_000.0 + b as f64 * 5.0 };
    let a = Array::new(9, 1).unwrap();
    for (s, d) in [(64u64 << 10, 1usize), (256 << 10, 2), (1 << 20, 4), (1 << 20, 8)] {
        let x = s / d as u64;
        let m = a.method(d);
        let al = alpha(&ssd, x);
        let lam_rw = x as f64 / (ssd.write_ns(x) / 1e9);
        assert!(rel(a.throughput(&ssd, s as f64, d, m), a.speedup(d, m, al) * lam_rw) < 1e-12);
    }
    assert!(throughput_array(9, 1, &h, 1e5, 8, Method::Rmw).is_err());
    assert!(throughput_array(9, 1, &h, 1e5, 3, Method::Fsw).is_err());
    assert!(throughput_array(9, 1, &h, 1e5, 0, Method::Rmw).is_err());
}

#[test]
fn rcw_prefers_more_units_and_fsw_beats_every_rcw() {
    // Ineq. 16 on the HDD.
    let h = hdd();
    let a = Array::new(10, 1).unwrap();
    for s in [8.0 * KIB, 512.0 * KIB, 8192.0 * KIB] {
        let mut last = 0.0;
        for d in 4..=9 {
            let t = a.throughput_auto(&h, s, d);
            assert!(t > last);
            last = t;
        }
    }
}

#[test]
fn fewest_reads_and_fastest_agree_for_whole_units() {
    let h = hdd();
    let ssd = FnTiming { read: |b: u64| 90_000.0 + b as f64, write: |b: u64| 400_000.0 + b as f64 * 2.0 };
    for n in 4..14 {
        let a = Array::new(n, 1).unwrap();
        for d in 1..=a.data() {
            for s in [8192.0, 1e6] {
                // Ties (d + k = n - k - d) are equally fast; both rules say RCW.
                assert_eq!(a.fastest_method(&h, s, d), a.method(d), "n={n} d={d}");
                assert_eq!(a.method_by(Choice::Fastest, &ssd, s, d), a.method(d), "n={n} d={d}");
            }
        }
    }
    // The tie: n = 8, k = 1, d = 3 reads 4 blocks either way -> RCW.
    assert_eq!(Array::new(8, 1).unwrap().method(3), Method::Rcw);
}

#[test]
fn alpha_follows_the_paper() {
    assert_eq!(alpha(&hdd(), 4096), 1.0);
    // α = λ_rw / λ_rr = t_read / t_write: slow writes give α < 1.
    let ssd = FnTiming { read: |_b: u64| 100.0, write: |_b: u64| 400.0 };
    assert_eq!(alpha(&ssd, 8192), 0.25);
    assert_eq!(alpha_by_size(&ssd, &[4096, 8192]), vec![(4096, 0.25), (8192, 0.25)]);
}

#[test]
fn fractional_sizes_interpolate() {
    let d = FnTiming { read: |b: u64| b as f64 * 10.0, write: |b: u64| if b < 10 { 0.0 } else { 100.0 } };
    assert_eq!(d.read_ns_f64(4.25), 42.5);
    assert_eq!(d.read_ns_f64(7.0), 70.0);
    assert_eq!(d.write_ns_f64(9.5), 50.0);
    let h = hdd();
    assert_eq!(h.read_ns_f64(1000.5), (0.005 + 1000.5 / h.rate_bytes_per_s) * 1e9);
    assert!(d.hdd_params().is_none() && h.hdd_params().is_some());
    // Through references and boxes too.
    let b: Box<dyn DriveTiming> = Box::new(h);
    assert!(b.hdd_params().is_some());
    let r: &HddSimple = &h;
    assert!(DriveTiming::hdd_params(&r).is_some());
}

#[test]
fn bad_shapes() {
    assert!(Array::new(3, 3).unwrap_err().to_string().contains("n > k"));
    assert!(Array::new(5, 0).is_err());
    assert!(Array::new(0, 0).is_err());
    assert!(Array::new(2, 1).is_ok());
    assert!(model_report(3, 3, &hdd(), &[4096]).unwrap_err().to_string().contains("n > k"));
}

// ---------------------------------------------------------------- report

#[test]
fn report_for_the_cli() {
    let sizes = parse_size_range("4K:4M").unwrap();
    let r = model_report(9, 1, &hdd(), &sizes).unwrap();
    assert!(r.closed_form);
    assert_eq!(r.rows.len(), 11);
    assert_eq!(r.rows[0].by_d.len(), 8);
    assert_kib(r.rmw_vs_fsw[0].beats_fsw_below_bytes, 779.06, "report n=9");
    assert!(rel(r.rmw_vs_fsw[0].numeric_bytes, r.rmw_vs_fsw[0].beats_fsw_below_bytes) < 1e-9);
    // RMW d = 2, 3 never beat FSW... they do, below smaller sizes.
    assert_eq!(r.rmw_vs_fsw.iter().map(|c| c.d).collect::<Vec<_>>(), vec![1, 2, 3]);
    for c in &r.rmw_vs_fsw {
        assert!(rel(c.numeric_bytes, c.beats_fsw_below_bytes) < 1e-9, "{c:?}");
    }
    for c in &r.rmw_vs_rmw {
        assert!(rel(c.numeric_bytes, c.below_bytes) < 1e-9, "{c:?}");
    }
    let row = |kib: u64| r.rows.iter().find(|x| x.size == kib * 1024).unwrap();
    assert_eq!((row(256).winner, row(256).winner_d), (Method::Rmw, 1));
    assert_eq!((row(512).winner, row(512).winner_d), (Method::Rmw, 1));
    assert_eq!((row(1024).winner, row(1024).winner_d), (Method::Fsw, 8));
    let p = &row(256).by_d[0];
    assert!(rel(p.iops * 262144.0, p.throughput_bytes_per_s) < 1e-12);
    assert!((p.speedup - 9.0 / 4.0).abs() < 1e-12);

    let text = model_report(10, 2, &hdd(), &sizes).unwrap().to_string();
    assert!(text.contains("377.23 KiB"), "{text}");
    let r = model_report(10, 1, &hdd(), &sizes).unwrap();
    let text = r.to_string();
    for s in ["895.92 KiB", "948.62 KiB", "930.38 KiB", "RMW d=2", "FSW d=9"] {
        assert!(text.contains(s), "{s} missing:\n{text}");
    }
    assert_kib(r.rmw_vs_fsw[0].beats_fsw_below_bytes, 930.38, "report n=10 k=1");
    assert_kib(r.rmw_vs_rmw[0].below_bytes, 895.92, "report n=10 k=1 rmw");
    assert!(model_report(9, 1, &hdd(), &[]).is_err());
    assert!(model_report(9, 1, &hdd(), &[0]).is_err());
    // No RMW at all: n = 4, k = 1.
    let text = model_report(4, 1, &hdd(), &sizes).unwrap().to_string();
    assert!(text.contains("no RMW"), "{text}");
    fn ser<T: serde::Serialize>(_: &T) {}
    ser(&r);
}

#[test]
fn ssd_like_drive_prefers_fsw_everywhere() {
    // Sect. 4.2: throughput insensitive to size (t = x / B) -> the speedup
    // decides, and FSW has the largest; numeric paths.
    let ssd = FnTiming { read: |b: u64| b as f64 / 0.5, write: |b: u64| b as f64 / 0.25 };
    let r = model_report(9, 1, &ssd, &parse_size_range("8K:1M").unwrap()).unwrap();
    assert!(!r.closed_form);
    assert!(r.rows.iter().all(|x| x.winner == Method::Fsw && (x.alpha - 0.5).abs() < 1e-12));
    assert_eq!(r.win_intervals.len(), 1);
    assert_eq!(r.win_intervals[0].method, Method::Fsw);
    // RMW never beats FSW here.
    assert!(r.rmw_vs_fsw.iter().all(|c| c.beats_fsw_below_bytes == 0.0));
    assert!(r.to_string().contains("never"));
    // RMW with more units is better (constant throughput per byte).
    assert!(r.rmw_vs_rmw.iter().all(|c| c.below_bytes == 0.0));
    assert_eq!(crossover_sizes(9, 1, &ssd, (Method::Fsw, 8), (Method::Rmw, 1), 512.0, 1e9).unwrap(), Beats::Always);
    assert_eq!(crossover_numeric(9, 1, &ssd, (Method::Rmw, 1), (Method::Fsw, 8), 512.0, 1e9).unwrap(), None);
}

#[test]
fn size_ranges() {
    assert_eq!(parse_size_range("4K:32K").unwrap(), vec![4096, 8192, 16384, 32768]);
    let v = parse_size_range("4K:4M").unwrap();
    assert_eq!((v.len(), v[0], v[10]), (11, 4096, 4 << 20));
    assert_eq!(parse_size_range("3K:20K").unwrap(), vec![4096, 8192, 16384]);
    assert_eq!(parse_size_range("4K:16K:4K").unwrap(), vec![4096, 8192, 12288, 16384]);
    assert_eq!(parse_size_range("512:1KiB").unwrap(), vec![512, 1024]);
    assert_eq!(parse_size_range("1.5M:2M:0.5M").unwrap(), vec![3 << 19, 2 << 20]);
    assert_eq!(parse_size_range(" 2 G : 4g ").unwrap(), vec![2 << 30, 4 << 30]);
    for bad in ["4K", "8K:4K", "xK:4K", "4K:4M:0", "0:4K", "4K:4Q", "1:2:3:4", "5K:7K", "0.3K:1K", ":4K"] {
        let e = parse_size_range(bad).unwrap_err().to_string();
        assert!(!e.is_empty(), "{bad}");
    }
    assert!(parse_size_range("4K").unwrap_err().to_string().contains("MIN:MAX"));
    assert!(parse_size_range("512:100000000:1").unwrap_err().to_string().contains("STEP"));
    // Below a sector is no block request: `--sizes 1:1` printed rows of 0.00 KiB.
    assert!(parse_size_range("1:1").unwrap_err().to_string().contains("512-byte sector"));
    assert!(parse_size_range("511:4K").unwrap_err().to_string().contains("512-byte sector"));
}

// ---------------------------------------------------------------- advisor

#[test]
fn default_candidate_units() {
    let c = default_candidates(4096);
    assert_eq!(c.len(), 11);
    assert_eq!((c[0], c[10]), (4096, 4 << 20));
    assert!(c.windows(2).all(|w| w[1] == 2 * w[0]));
    assert_eq!(default_candidates(512)[0], 4096);
    assert_eq!(default_candidates(16384)[0], 16384);
    assert_eq!(default_candidates(3000), vec![3000]);
}

#[test]
fn advisor_reduces_to_the_model_for_whole_units() {
    // One size s = d·u, candidate u: the advisor's throughput is the
    // model's λ_array(s, d) (u- and stripe-aligned whole units).
    let h = hdd();
    let a = Array::new(9, 1).unwrap();
    for u in [16u64 << 10, 64 << 10, 256 << 10] {
        for d in 1..=8u64 {
            let adv = advise(&[(d * u, 10)], 9, 1, &h, &[u]).unwrap();
            let m = a.throughput_auto(&h, (d * u) as f64, d as usize);
            assert!(rel(adv.per_candidate[0].throughput_bytes_per_s, m) < 1e-12, "u={u} d={d}");
            // Array time per request = s / throughput.
            assert!(rel(adv.per_candidate[0].mean_service_ms / 1e3, (d * u) as f64 / m) < 1e-12);
        }
    }
    // Several full stripes plus a remainder: 2 FSWs + RMW of 1 unit.
    let u = 64u64 << 10;
    let (t, counts) = write_cost(9, 1, &h, 17 * u, u, Choice::FewestReads).unwrap();
    assert_eq!(counts, [1, 0, 2]);
    let want = (2.0 * 9.0 * h.write_ns(u) + 2.0 * (h.read_ns(u) + h.write_ns(u))) / 9.0;
    assert!(rel(t, want) < 1e-12, "{t} vs {want}");
}

#[test]
fn advisor_partial_units_follow_the_planner() {
    let h = hdd();
    let u = 64u64 << 10;
    // n = 6, k = 1: 4 whole units + 16 KiB fill all 5 columns, the last
    // partly -> RCW reading the 48 KiB tail (1 read) beats RMW (6 reads).
    let (t, c) = write_cost(6, 1, &h, 4 * u + (16 << 10), u, Choice::FewestReads).unwrap();
    assert_eq!(c, [0, 1, 0]);
    let want = (h.read_ns(48 << 10) + 4.0 * h.write_ns(u) + h.write_ns(16 << 10) + h.write_ns(u)) / 6.0;
    assert!(rel(t, want) < 1e-12);
    // One partial unit behaves as a whole unit of its size.
    let (t, c) = write_cost(9, 1, &h, 20_000, u, Choice::FewestReads).unwrap();
    assert_eq!(c, [1, 0, 0]);
    assert!(rel(t, 4.0 * h.read_ns(20_000) / 9.0) < 1e-12);
    // Equal reads (ops and bytes): RCW, as md.  n = 5, k = 1, 96 KiB on
    // 64 KiB units: RMW 3 ops 160 KiB, RCW 2 + tail = 3 ops 160 KiB.
    assert_eq!(write_cost(5, 1, &h, 96 << 10, u, Choice::FewestReads).unwrap().1, [0, 1, 0]);
    // Fewest reads and fastest differ when small reads are very slow.
    let sub = FnTiming { read: |b: u64| if b < 4096 { 1e8 } else { 1e6 }, write: |_b: u64| 1e6 };
    let s = u + 512;
    assert_eq!(write_cost(9, 1, &sub, s, u, Choice::FewestReads).unwrap().1, [1, 0, 0]);
    assert_eq!(write_cost(9, 1, &sub, s, u, Choice::Fastest).unwrap().1, [0, 1, 0]);
    let adv = advise(&[(s, 1)], 9, 1, &sub, &[u]).unwrap();
    assert!(adv.per_candidate[0].fastest_throughput_bytes_per_s > 5.0 * adv.per_candidate[0].throughput_bytes_per_s);
    assert_eq!(advise_with(&[(s, 1)], 9, 1, &sub, &[u], Choice::Fastest).unwrap().choice, Choice::Fastest);
    assert!(write_cost(9, 1, &h, 0, u, Choice::FewestReads).is_err());
}

#[test]
fn advisor_picks_rmw_units_for_small_writes_and_stripes_for_large() {
    let h = hdd();
    let c = default_candidates(4096);
    // 64 KiB writes: RMW with one unit for every u >= 64 KiB (all equal);
    // the tie goes to the largest unit.
    let small = advise(&[(64 << 10, 100)], 9, 1, &h, &c).unwrap();
    assert_eq!(small.best_unit, 4 << 20, "{small}");
    let top: Vec<f64> = small.per_candidate.iter().filter(|x| x.unit >= 64 << 10).map(|x| x.throughput_bytes_per_s).collect();
    assert!(top.windows(2).all(|w| w[0] == w[1]));
    assert!(small.per_candidate.iter().filter(|x| x.unit < 64 << 10).all(|x| x.throughput_bytes_per_s < top[0]));
    // 256 KiB (below 779 KiB): RMW d = 1 again.
    assert!(advise(&[(256 << 10, 1)], 9, 1, &h, &c).unwrap().best_unit >= 256 << 10);
    // 4 MiB writes (above 779 KiB): whole stripes of the largest unit,
    // 512 KiB x 8 data units.
    let large = advise(&[(4 << 20, 100)], 9, 1, &h, &c).unwrap();
    assert_eq!(large.best_unit, 512 << 10, "{large}");
    let best = large.per_candidate.iter().find(|x| x.unit == 512 << 10).unwrap();
    assert_eq!(best.fsw_share, 1.0);
    // A mix: every u >= 64 KiB serves the small writes alike, so the one
    // large write decides (FSW with 512 KiB units).
    let mix = advise(&[(64 << 10, 1000), (4 << 20, 1)], 9, 1, &h, &c).unwrap();
    assert_eq!(mix.best_unit, 512 << 10);
    assert!(mix.rationale.contains("512.0 KiB"), "{}", mix.rationale);
    // ... and 1 MiB writes (above 779 KiB) want 8 units of 128 KiB.
    assert_eq!(advise(&[(64 << 10, 1000), (1 << 20, 10)], 9, 1, &h, &c).unwrap().best_unit, 128 << 10);
    assert_eq!(mix.table().len(), 11);
    assert!(mix.to_string().contains("<- best"));
    // Errors.
    assert!(advise(&[], 9, 1, &h, &c).is_err());
    assert!(advise(&[(4096, 0)], 9, 1, &h, &c).is_err());
    assert!(advise(&[(4096, 1)], 9, 9, &h, &c).is_err());
    assert!(advise(&[(4096, 1)], 9, 1, &h, &[]).is_err());
    assert!(advise(&[(4096, 1)], 9, 1, &h, &[0]).is_err());
}

#[test]
fn ssd_page_rule() {
    assert_eq!(ssd_unit_rule(8192, 0.95), Some(8192));
    assert_eq!(ssd_unit_rule(8192, 0.9), Some(8192));
    assert_eq!(ssd_unit_rule(8192, 0.6), None);
    let a = ssd_advice(8192, 0.3);
    assert!(!a.page_rule_applies);
    assert_eq!(a.alternatives, vec![16384, 32768, 65536]);
    assert!(a.rationale.contains("30%"));
    let a = ssd_advice_with(8192, 0.6, 0.5);
    assert_eq!(a.unit, Some(8192));
    assert!(a.alternatives.is_empty());
    assert_eq!(ssd_unit_rule(0, 1.0), None);
}

// ---------------------------------------------------------------- CBRO

#[test]
fn cbro_model() {
    // Eq. 19: n / (α + 1); Eq. 20: (d + k)/d.
    assert_eq!(cbro_speedup_rmw(16, 1.0), 8.0);
    assert_eq!(cbro_speedup_rmw(9, 0.25), 9.0 / 1.25);
    assert_eq!(cbro_gain(1, 1), 2.0);
    assert_eq!(cbro_gain(1, 2), 3.0);
    assert_eq!(cbro_gain(2, 2), 2.0);
    // Eq. 20 is the ratio of Eq. 19 and Eq. 4.
    for (n, k, d, al) in [(9, 1, 1, 1.0), (16, 2, 3, 0.4)] {
        assert!(rel(cbro_speedup_rmw(n, al) / speedup_rmw(n, k, d, al), cbro_gain(d, k)) < 1e-12);
    }
    let h = hdd();
    let u = 4096;
    // CBRO throughput = S_CBRO · λ(u) on the HDD.
    assert!(rel(cbro_throughput_rmw(16, &h, u), cbro_speedup_rmw(16, 1.0) * h.lambda(u as f64)) < 1e-12);
    let fast = FnTiming { read: |_b: u64| 100_000.0, write: |_b: u64| 100_000.0 };
    let ok = cbro_check(16, u, &h, &fast, 1 << 40, 1 << 30);
    assert!(ok.performance_ok && ok.capacity_ok && ok.message.is_empty(), "{}", ok.message);
    // 16 data HDDs at ~10 ms per RMW issue ~1600/s; the CDA absorbs 5000/s.
    assert!((ok.cda_rmw_per_s - 5000.0).abs() < 1e-6);
    assert!(rel(ok.data_rmw_per_s, 16.0 / (2.0 * h.read_ns(u) / 1e9)) < 1e-12);
    assert!(ok.cda_headroom > 1.0);
    let bad = cbro_check(16, u, &h, &h, 1 << 20, 1 << 30);
    assert!(!bad.performance_ok && !bad.capacity_ok);
    assert!((bad.cda_headroom - 1.0 / 16.0).abs() < 1e-12);
    assert!(bad.message.contains("CDA will be the bottleneck"), "{}", bad.message);
    assert!(bad.message.contains("too small"), "{}", bad.message);
}

/// More drives than an array of mosaic has is refused before any work
/// (the model's work grows with n squared), and the largest is modelled.
#[test]
fn more_drives_than_an_array_has_are_refused() {
    let e = model_report(MAX_DRIVES + 1, 1, &hdd(), &[4096]).unwrap_err().to_string();
    assert!(e.contains("at most 255 drives"), "{e}");
    assert!(Array::new(100_000, 300).is_err());
    let r = model_report(MAX_DRIVES, 2, &hdd(), &[4096, 1 << 20]).unwrap();
    assert_eq!(r.rows.len(), 2);
}
