//! Every kind of plot mosaic writes, drawn from small synthetic inputs,
//! rendered to PNG by `rsvg-convert` (Debian's librsvg2-bin, which
//! scripts/test.sh installs) and looked at: the PNG has the size the SVG
//! declares, is not blank, and shows the colour of every series it plots.
//! The PNGs stay in target/<profile>/plot-png for a person to look at.

use std::fs::File;
use std::io::BufReader;
use std::path::{Path, PathBuf};
use std::process::Command;

use mosaic_sim::plot::{RGBColor, COLORS};

/// Where the SVGs and PNGs go: target/<profile>/plot-png.
fn out_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("the test binary's path");
    // target/<profile>/deps/mosaic-HASH
    let dir = exe.parent().and_then(Path::parent).expect("target/<profile>").join("plot-png");
    std::fs::create_dir_all(&dir).expect("the plot-png directory");
    dir
}

/// A decoded image, RGB over white.
struct Image {
    width: u32,
    height: u32,
    pixels: Vec<[u8; 3]>,
}

fn decode(path: &Path) -> Image {
    let file = File::open(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut reader = png::Decoder::new(BufReader::new(file)).read_info().unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut buf = vec![0; reader.output_buffer_size().expect("a buffer size")];
    let info = reader.next_frame(&mut buf).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    assert_eq!(info.bit_depth, png::BitDepth::Eight, "{}", path.display());
    let channels = match info.color_type {
        png::ColorType::Rgb => 3,
        png::ColorType::Rgba => 4,
        other => panic!("{}: colour type {other:?}", path.display()),
    };
    let over_white = |c: u8, a: u8| ((c as u32 * a as u32 + 255 * (255 - a as u32)) / 255) as u8;
    let pixels = buf[..info.buffer_size()]
        .chunks_exact(channels)
        .map(|p| {
            let a = if channels == 4 { p[3] } else { 255 };
            [over_white(p[0], a), over_white(p[1], a), over_white(p[2], a)]
        })
        .collect();
    Image { width: info.width, height: info.height, pixels }
}

/// The width and height an SVG declares.
fn svg_size(svg: &str) -> (u32, u32) {
    let attr = |name: &str| -> u32 {
        let at = svg.find(&format!(" {name}=\"")).unwrap_or_else(|| panic!("no {name} in the SVG")) + name.len() + 3;
        svg[at..].split('"').next().and_then(|v| v.parse().ok()).unwrap_or_else(|| panic!("bad {name}"))
    };
    (attr("width"), attr("height"))
}

/// Render `svg` to PNG beside it, check it and return the PNG's path:
/// the declared size, ink on at least 2% of it, and at least 30 pixels of
/// each of `colors` (anti-aliasing blends edges, fills keep the colour).
fn check(svg: &Path, colors: &[RGBColor]) -> PathBuf {
    let text = std::fs::read_to_string(svg).unwrap_or_else(|e| panic!("{}: {e}", svg.display()));
    let (w, h) = svg_size(&text);
    let png = svg.with_extension("png");
    let status = Command::new("rsvg-convert")
        .arg("--output")
        .arg(&png)
        .arg(svg)
        .status()
        .unwrap_or_else(|e| panic!("rsvg-convert: {e} (Debian package librsvg2-bin; scripts/test.sh installs it)"));
    assert!(status.success(), "rsvg-convert {} failed", svg.display());
    println!("rendered {}", png.display());
    let img = decode(&png);
    assert_eq!((img.width, img.height), (w, h), "{}: size", png.display());
    let ink = img.pixels.iter().filter(|p| p.iter().any(|&c| c < 240)).count();
    assert!(ink * 50 > img.pixels.len(), "{}: blank ({ink} of {} pixels inked)", png.display(), img.pixels.len());
    for c in colors {
        let near = |p: &&[u8; 3]| p.iter().zip([c.0, c.1, c.2]).all(|(&a, b)| a.abs_diff(b) <= 8);
        let n = img.pixels.iter().filter(near).count();
        assert!(n >= 30, "{}: colour {c:?} in {n} pixels only", png.display());
    }
    png
}

fn svg(name: &str) -> PathBuf {
    out_dir().join(name)
}

#[test]
fn replay_plot_renders_with_every_layouts_colour() {
    use mosaic_sim::{DeviceStats, SimReport};
    let reports: Vec<SimReport> = ["raid5 5+1", "raid6 4+2", "rs:3+3"]
        .iter()
        .enumerate()
        .map(|(i, name)| SimReport {
            layout: name.to_string(),
            // Some writes answered at once (0 ns): the log axis keeps them.
            write_latencies_ns: (0..500u64).map(|k| if k < 5 { 0 } else { 40_000 + k * k * 150 * (i as u64 + 1) }).collect(),
            read_latencies_ns: (0..300u64).map(|k| 80_000 + k * 7_000 * (i as u64 + 1)).collect(),
            devices: (0..6).map(|d| DeviceStats { index: d, utilisation: 0.15 + 0.12 * d as f64 + 0.05 * i as f64, ..Default::default() }).collect(),
            ..Default::default()
        })
        .collect();
    let p = svg("replay.svg");
    mosaic_sim::plot::write_svg(&p, "synthetic mixed:50, 2000 requests", &reports).unwrap();
    check(&p, &COLORS[..3]);
}

#[test]
fn dvs_plots_render_with_every_schemes_colour() {
    use mosaic_exp::dvs::{Row, SCHEMES};
    let row = |s: usize, workload: &str, cache_pct: u32, zone_kib: u64, mean_ms: f64| Row {
        scheme: SCHEMES[s].into(),
        workload: workload.into(),
        cache_pct,
        zone_kib,
        mean_ms,
        p99_ms: mean_ms * 3.0,
        read_mean_ms: mean_ms,
        write_mean_ms: mean_ms,
        device_reads: 1,
        device_writes: 1,
        zone_resets: 0,
        idle_resets: 0,
        requests: 100,
        offered_iops: 50.0,
        sat_iops: None,
    };
    let mut overall = Vec::new();
    for (w, wl) in ["cloudphysics", "randwrite", "seqwrite", "readheavy"].iter().enumerate() {
        for s in 0..SCHEMES.len() {
            // A scheme that answers from its cache: 0 ms, kept on the log axis.
            let ms = if w == 3 && s == 1 { 0.0 } else { 0.4 * (s + 1) as f64 * 4f64.powi(w as i32) };
            overall.push(row(s, wl, 10, 4096, ms));
        }
    }
    let p = svg("dvs-overall.svg");
    mosaic_exp::dvs_plot::bars(&p, "DVS: mean response time per workload, cache 10% of the working set", &overall).unwrap();
    check(&p, &COLORS[..SCHEMES.len()]);
    let cache: Vec<_> = [5u32, 10, 20, 30, 40, 50].iter().flat_map(|&c| (0..SCHEMES.len()).map(move |s| row(s, "randwrite", c, 4096, 30.0 * (s + 1) as f64 / c as f64))).collect();
    let p = svg("dvs-cache.svg");
    let x = mosaic_sim::plot::Axis::linear("cache size (% of the working set)").ticks(vec![5.0, 10.0, 20.0, 30.0, 40.0, 50.0]);
    mosaic_exp::dvs_plot::lines(&p, "DVS: mean response time vs cache size", x, &cache, |r| r.cache_pct as f64).unwrap();
    check(&p, &COLORS[..SCHEMES.len()]);
}

#[test]
fn adapt_plots_render_with_mosaics_and_the_papers_colours() {
    use mosaic_exp::adapt::{planted, run_requests, AdaptEvalConfig, Array};
    let cfg = AdaptEvalConfig { drives: 4, hdd_drives: 4, arrays: vec![Array::Ssd, Array::Hdd], alphas: vec![0.0, 0.5, 1.0], thresholds: vec![1, 5], threads: vec![1], ..AdaptEvalConfig::default() };
    let r = run_requests("a planted trace".into(), &planted(&cfg, 20, 10, 3), &cfg).unwrap();
    let files = mosaic_exp::adapt_plot::write_plots(&out_dir(), &r).unwrap();
    // Static, adaptive on units and on groups (the HDD panel); mosaic's
    // SSD, HDD units and HDD groups cost vs gain and the paper's Table 2.
    for (f, n) in files.iter().zip([3, 4, 3]) {
        check(f, &COLORS[..n]);
    }
}

#[test]
fn tier_plots_render_with_every_schemes_colour() {
    use mosaic_exp::tier::plot::{bars, lines};
    use mosaic_sim::plot::Axis;
    let schemes = ["tier-64K", "tier-256K", "all-ssd", "all-hdd", "lru-cache"];
    let io: Vec<(String, Vec<(f64, f64)>)> = schemes.iter().enumerate().map(|(i, s)| (s.to_string(), [1.0, 16.0, 256.0].iter().map(|&m| (m, 80.0 * (i + 1) as f64 + m / 4.0)).collect())).collect();
    let p = svg("tier-iozone.svg");
    lines(&p, "IOzone-like write bandwidth, 8 KiB records", Axis::log("file size (MiB)").ticks(vec![1.0, 16.0, 256.0]), Axis::linear("write bandwidth (MiB/s)").from_zero(), &io).unwrap();
    check(&p, &COLORS[..schemes.len()]);
    let space: Vec<(String, Vec<(f64, f64)>)> = ["rehypar 64K V=8", "fixed 64K"].iter().enumerate().map(|(i, s)| (s.to_string(), (0..50).map(|k| (k as f64 * 800.0, 0.9 - 0.2 * i as f64 - 0.002 * k as f64)).collect())).collect();
    let p = svg("tier-space.svg");
    lines(&p, "Fast-tier space utilisation, Postmark-like, 1000 files", Axis::linear("file-system events").integer().from_zero(), Axis::linear("fast tier: live / allocated").from_zero().at_most(1.0), &space).unwrap();
    check(&p, &COLORS[..2]);
    let tr: Vec<(String, f64)> = schemes.iter().enumerate().map(|(i, s)| (s.to_string(), 0.05 * 5f64.powi(i as i32))).collect();
    let p = svg("tier-trace.svg");
    bars(&p, "CloudPhysics trace: mean response time", "CloudPhysics trace (first requests)", Axis::log("mean response time (ms)"), &tr).unwrap();
    check(&p, &COLORS[..schemes.len()]);
}

#[test]
fn ppc_plots_render_every_experiment_with_every_policys_colour() {
    use crate::eval_ppc::{figures, PpcOut, PpcPoint, PLOTS};
    use mosaic_core::CachePolicy;
    let pts = |workload: &str, width: usize, scale: f64| -> Vec<PpcPoint> {
        CachePolicy::ALL
            .iter()
            .enumerate()
            .map(|(i, p)| PpcPoint {
                workload: workload.into(),
                width,
                policy: p.name().into(),
                writes: 4000,
                parity_reads_per_write: scale * (1.4 - 0.3 * i as f64),
                parity_writes_per_write: scale * (0.7 - 0.1 * i as f64),
                paper_reads_per_write: None,
                paper_writes_per_write: None,
                paper_perf: None,
                device_ops: 12000 - 1500 * i as u64,
                device_work_ms: 900.0 - 100.0 * i as f64,
                busiest_drive_ms: 200.0 - 20.0 * i as f64,
                duration_s: 2.0 / (1.0 + 0.25 * i as f64) / (1.0 + 0.1 * (width - 4) as f64),
                destage_s: 0.01,
                iops: 2000.0,
                write_mean_us: 80.0 * scale / (i + 1) as f64,
                write_p99_us: 900.0 * scale / (i + 1) as f64,
                perf_vs_none: 1.0 + 0.25 * i as f64,
                perf_vs_raid5: 1.1 + 0.3 * i as f64,
                work_vs_raid5: 1.0 + 0.2 * i as f64,
                cache: Default::default(),
            })
            .collect()
    };
    let out = PpcOut {
        postmark: pts("postmark-like", 4, 1.0),
        iozone: pts("iozone-like", 4, 0.4),
        recorded: vec![],
        width_workload: "postmark-like".into(),
        width_sweep: (4..=7).flat_map(|k| pts("postmark-like", k, 1.0 - 0.05 * (k - 4) as f64)).collect(),
        trace: pts("cloudphysics trace", 4, 0.7),
        randwrite_4k: pts("4K random writes", 4, 1.2),
        trace_note: None,
    };
    let figs = figures("ssd:samsung-830-128g", &out);
    assert_eq!(figs.len(), PLOTS.len());
    for (f, name) in figs.iter().zip(PLOTS) {
        let p = svg(name);
        f.write(&p).unwrap();
        check(&p, &COLORS[..CachePolicy::ALL.len()]);
        let text = std::fs::read_to_string(&p).unwrap();
        assert!(text.contains("ppc+data (proposed)") && text.contains("none (RAID-5)"), "{name}: policies not named");
        if name != "ppc-latency.svg" {
            assert!(text.lines().any(|l| l.trim() == "paper"), "{name}: no paper entry in the legend");
        }
    }
}

#[test]
fn cbro_plot_renders_with_every_configurations_colour() {
    use crate::cmd_eval::{plot_points, Point};
    let configs = ["raid5 x16 HDD", "raid6 x16 HDD", "cbro:16+1 SSD CDA", "cbro:16+2 SSD CDAs", "cbro:16+1 HDD CDA", "cbro:16+1 raid5:4 SSD CDA"];
    let points: Vec<Point> = [4u64, 8, 16, 64, 256, 1024]
        .iter()
        .flat_map(|&kib| configs.iter().enumerate().map(move |(i, c)| Point { config: c.to_string(), size: kib << 10, iops: 200.0 * (i + 1) as f64, mib_per_s: (kib as f64).sqrt() * (i + 1) as f64 * 3.0 }))
        .collect();
    let p = svg("cbro.svg");
    plot_points(&p, "CBRO: random single-unit writes, 16 data drives", &points).unwrap();
    check(&p, &COLORS[..configs.len()]);
}
