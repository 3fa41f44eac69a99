//! SVG plots of `mosaic eval adapt` ([`crate::adapt`]): the test half's
//! response time and parallel depth, static vs adaptive, against the
//! initial layout's skew alpha (one panel per array), and the migration
//! cost vs the gain per correlation threshold beside the paper's Table 2.
//!
//! Every plot goes through one helper, [`line_chart`], fed with
//! [`Chart`]s: named series of points, optionally tagged, on linear or
//! log10 axes.

use std::path::{Path, PathBuf};

use plotters::coord::Shift;
use plotters::prelude::*;

use crate::adapt::{cost_vs_gain, paper, Results, Row, Section};

/// The files [`write_plots`] writes.
pub const PLOTS: [&str; 3] = ["adapt-response.svg", "adapt-cost-gain.svg", "adapt-depth.svg"];

use mosaic_sim::plot::COLORS;

/// The smallest value a log axis shows (values below are drawn there).
const LOG_FLOOR: f64 = 1e-3;

fn err<E: std::fmt::Display>(e: E) -> String {
    format!("plot: {e}")
}

/// One line: points in data units, each optionally tagged (drawn beside it).
struct Series {
    name: String,
    pts: Vec<(f64, f64)>,
    tags: Vec<String>,
}

impl Series {
    fn new(name: String, pts: impl Iterator<Item = (f64, f64)>) -> Series {
        Series { name, pts: pts.collect(), tags: Vec::new() }
    }
}

/// An axis: its description and whether it is log10.
#[derive(Clone, Copy)]
struct Axis {
    desc: &'static str,
    log: bool,
}

/// A linear axis.
fn lin(desc: &'static str) -> Axis {
    Axis { desc, log: false }
}

impl Axis {
    /// A data value in drawing units (log10 on a log axis).
    fn to(self, v: f64) -> f64 {
        if self.log {
            v.max(LOG_FLOOR).log10()
        } else {
            v
        }
    }

    /// A tick label of a drawing-unit value on an axis spanning `span`
    /// drawing units: a log axis shows the value, a linear one as many
    /// decimals as its ticks (about ten) need.
    fn label(self, v: f64, span: f64) -> String {
        if self.log {
            let x = 10f64.powf(v);
            return match x {
                x if x >= 100.0 => format!("{x:.0}"),
                x if x >= 1.0 => format!("{x:.1}"),
                _ => format!("{x:.3}"),
            };
        }
        let prec = (-(span / 10.0).log10().floor()).clamp(0.0, 6.0) as usize;
        format!("{v:.prec$}")
    }

    /// The drawing-unit range covering `vals`, padded; (0, 1) when empty.
    fn range(self, vals: impl Iterator<Item = f64>) -> std::ops::Range<f64> {
        let (lo, hi) = vals.map(|v| self.to(v)).fold((f64::MAX, f64::MIN), |(l, h), v| (l.min(v), h.max(v)));
        if lo > hi {
            return 0.0..1.0;
        }
        let pad = if hi > lo { (hi - lo) * 0.08 } else { lo.abs().max(1.0) * 0.1 };
        (lo - pad)..(hi + pad)
    }
}

/// One panel.
struct Chart {
    title: String,
    x: Axis,
    y: Axis,
    series: Vec<Series>,
    legend: SeriesLabelPosition,
}

/// Draw `c` on `area`: lines with markers, tags beside the points, a legend.
fn line_chart(area: &DrawingArea<SVGBackend<'_>, Shift>, c: &Chart) -> Result<(), String> {
    let finite = |p: &&(f64, f64)| p.0.is_finite() && p.1.is_finite();
    let all = || c.series.iter().flat_map(|s| s.pts.iter().filter(finite));
    let (xr, yr) = (c.x.range(all().map(|p| p.0)), c.y.range(all().map(|p| p.1)));
    let (sx, sy) = (xr.end - xr.start, yr.end - yr.start);
    let mut ch = ChartBuilder::on(area)
        .caption(&c.title, ("sans-serif", 15))
        .margin(10)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(xr, yr)
        .map_err(err)?;
    let (fx, fy) = (|v: &f64| c.x.label(*v, sx), |v: &f64| c.y.label(*v, sy));
    ch.configure_mesh().x_desc(c.x.desc).y_desc(c.y.desc).x_label_formatter(&fx).y_label_formatter(&fy).draw().map_err(err)?;
    for (i, s) in c.series.iter().enumerate() {
        let col = COLORS[i % COLORS.len()];
        let pts: Vec<(f64, f64)> = s.pts.iter().filter(finite).map(|&(x, y)| (c.x.to(x), c.y.to(y))).collect();
        ch.draw_series(LineSeries::new(pts.clone(), col.stroke_width(2)))
            .map_err(err)?
            .label(s.name.as_str())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], col.stroke_width(2)));
        ch.draw_series(pts.iter().map(|&p| Circle::new(p, 4, col.filled()))).map_err(err)?;
        let tagged = s.pts.iter().zip(&s.tags).filter(|(p, _)| finite(p)).map(|(&(x, y), t)| (c.x.to(x), c.y.to(y), t));
        ch.draw_series(tagged.map(|(x, y, t)| Text::new(t.clone(), (x, y), ("sans-serif", 12).into_font().color(&col)))).map_err(err)?;
    }
    ch.configure_series_labels().background_style(WHITE.mix(0.8)).border_style(BLACK).position(c.legend.clone()).draw().map_err(err)
}

/// `charts` stacked under `caption` in one SVG at `path`.
fn write(path: &Path, caption: &str, charts: &[Chart]) -> Result<PathBuf, String> {
    let n = charts.len().max(1);
    let root = SVGBackend::new(path, (1100, 40 + 380 * n as u32)).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    let body = root.titled(caption, ("sans-serif", 18)).map_err(err)?;
    for (area, c) in body.split_evenly((n, 1)).iter().zip(charts) {
        line_chart(area, c)?;
    }
    root.present().map_err(|e| format!("plot {}: {e}", path.display()))?;
    Ok(path.to_path_buf())
}

/// The arrays evaluated, named.
fn sections(r: &Results) -> Vec<(&'static str, &Section)> {
    [("SSD", &r.ssd), ("HDD", &r.hdd)].into_iter().filter_map(|(n, s)| s.as_ref().map(|s| (n, s))).collect()
}

/// The smallest threshold run (the paper's per-alpha figures use 1).
fn first_threshold(r: &Results) -> u64 {
    r.config.thresholds.iter().copied().min().unwrap_or(1)
}

/// Static and adaptive series of `metric` against alpha at threshold `t`:
/// on units, and on groups when the array was planned on groups too.
fn per_alpha(tag: &str, s: &Section, t: u64, metric: fn(&Row) -> (f64, f64)) -> Vec<Series> {
    let at = |rows: &[Row]| rows.iter().filter(|r| r.threshold == t).map(|r| (r.alpha, metric(r))).collect::<Vec<_>>();
    let units = at(&s.rows);
    let on = if s.grouping.is_some() { " (units)" } else { "" };
    let mut out = vec![
        Series::new(format!("{tag} static"), units.iter().map(|&(a, m)| (a, m.0))),
        Series::new(format!("{tag} adaptive{on}"), units.iter().map(|&(a, m)| (a, m.1))),
    ];
    if let Some(g) = &s.grouping {
        out.push(Series::new(format!("{tag} adaptive (groups)"), at(&g.rows).into_iter().map(|(a, m)| (a, m.1))));
    }
    out
}

/// mosaic's mean overall gain at threshold `t` over the alphas, as "+x%".
fn mean_gain(rows: &[Row], t: u64) -> String {
    cost_vs_gain(rows).into_iter().find(|c| c.0 == t).map(|c| format!("{:+.0}%", c.2 * 100.0)).unwrap_or_else(|| "-".into())
}

/// mosaic's and the paper's overall gains of one array, for a panel title.
fn gain_note(s: &Section, t: u64) -> String {
    let pc = |x: f64| format!("{:+.0}%", x * 100.0);
    match &s.grouping {
        None => format!("gain (mean over alpha): mosaic {}, paper (AFA) {}", mean_gain(&s.rows, t), pc(paper::AFA_GAIN.2)),
        Some(g) => format!(
            "gain (mean over alpha): mosaic {} units / {} groups, paper (HSA) ~{} / {}",
            mean_gain(&s.rows, t),
            mean_gain(&g.rows, t),
            pc(paper::HSA_GAIN.2 - paper::HSA_GROUPING_EXTRA.2),
            pc(paper::HSA_GAIN.2)
        ),
    }
}

/// One panel per array of `metric` against alpha.
fn alpha_charts(r: &Results, ydesc: &'static str, metric: fn(&Row) -> (f64, f64), title: impl Fn(&str, &Section, u64) -> String) -> Vec<Chart> {
    let t = first_threshold(r);
    let x = lin("alpha (initial disk popularity skew)");
    sections(r).into_iter().map(|(tag, s)| Chart { title: title(tag, s, t), x, y: lin(ydesc), series: per_alpha(tag, s, t, metric), legend: SeriesLabelPosition::UpperLeft }).collect()
}

fn response(r: &Results) -> Vec<Chart> {
    alpha_charts(r, "mean overall response time (ms)", |x| (x.static_ms.all, x.adaptive_ms.all), |tag, s, t| {
        format!("{tag}: {} x {}, threshold {t}; {}", s.drives, s.drive, gain_note(s, t))
    })
}

fn depth(r: &Results) -> Vec<Chart> {
    alpha_charts(r, "mean parallel depth", |x| (x.test_static.mean_depth, x.test_adaptive.mean_depth), |tag, s, t| {
        format!("{tag}: {} x {} (threshold {t}), test half", s.drives, s.drive)
    })
}

/// Cost vs gain per threshold of some rows, each point tagged "t=N".
fn cost_series(name: String, pts: impl Iterator<Item = (u64, f64, f64)>) -> Series {
    let (mut s, mut tags) = (Series::new(name, std::iter::empty()), Vec::new());
    for (t, mb, g) in pts {
        s.pts.push((mb, g * 100.0));
        tags.push(format!(" t={t}"));
    }
    s.tags = tags;
    s
}

fn cost_gain(r: &Results) -> Chart {
    let mut series = Vec::new();
    for (tag, s) in sections(r) {
        let on = if s.grouping.is_some() { " units" } else { "" };
        series.push(cost_series(format!("{tag}{on} (mosaic)"), cost_vs_gain(&s.rows).into_iter()));
        if let Some(g) = &s.grouping {
            series.push(cost_series(format!("{tag} groups (mosaic)"), cost_vs_gain(&g.rows).into_iter()));
        }
    }
    series.push(cost_series("paper Table 2 (AFA)".into(), paper::TABLE2.into_iter()));
    Chart {
        title: "per correlation threshold t, mean over alpha (MB on a log axis)".into(),
        x: Axis { desc: "migration cost (MB moved)", log: true },
        y: lin("overall response time gain (%)"),
        series,
        legend: SeriesLabelPosition::UpperLeft,
    }
}

/// Write [`PLOTS`] into `dir` (created if need be); the paths written.
pub fn write_plots(dir: &Path, r: &Results) -> Result<Vec<PathBuf>, String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("plot directory {}: {e}", dir.display()))?;
    Ok(vec![
        write(&dir.join(PLOTS[0]), &format!("Adaptive layout on {}: test-half response time vs alpha", r.trace), &response(r))?,
        write(&dir.join(PLOTS[1]), &format!("Adaptive layout on {}: migration cost vs gain", r.trace), &[cost_gain(r)])?,
        write(&dir.join(PLOTS[2]), &format!("Adaptive layout on {}: test-half mean parallel depth vs alpha", r.trace), &depth(r))?,
    ])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::adapt::{planted, run_requests, AdaptEvalConfig, Array};

    fn read(p: &Path) -> String {
        std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
    }

    /// A planted trace on a 4-SSD array: every plot written, an SVG, with
    /// its series named.
    #[test]
    fn writes_the_three_svgs_with_their_series() {
        let cfg = AdaptEvalConfig { drives: 4, arrays: vec![Array::Ssd], alphas: vec![0.0, 0.5, 1.0], thresholds: vec![1, 5], threads: vec![1], ..AdaptEvalConfig::default() };
        let r = run_requests("planted".into(), &planted(&cfg, 20, 10, 3), &cfg).unwrap();
        let t = tempfile::tempdir().unwrap();
        let dir = t.path().join("plots");
        let files = write_plots(&dir, &r).unwrap();
        assert_eq!(files, PLOTS.iter().map(|p| dir.join(p)).collect::<Vec<_>>());
        let want: [&[&str]; 3] = [&["SSD static", "SSD adaptive", "paper (AFA) +53%"], &["SSD (mosaic)", "paper Table 2 (AFA)", "t=5"], &["SSD static", "SSD adaptive"]];
        for (f, names) in files.iter().zip(want) {
            let s = read(f);
            assert!(s.starts_with("<svg") || s.starts_with("<?xml"), "{}: not an SVG", f.display());
            assert!(s.trim_end().ends_with("</svg>"), "{}: unterminated", f.display());
            names.iter().for_each(|n| assert!(s.contains(n), "{}: no {n:?}", f.display()));
        }
    }

    /// An HDD section brings the grouped series; a missing SSD section none.
    #[test]
    fn the_hdd_array_has_unit_and_group_series() {
        let cfg = AdaptEvalConfig { drives: 4, hdd_drives: 4, arrays: vec![Array::Hdd], alphas: vec![0.0, 1.0], thresholds: vec![1], threads: vec![1], ..AdaptEvalConfig::default() };
        let r = run_requests("planted".into(), &planted(&cfg, 10, 6, 5), &cfg).unwrap();
        let t = tempfile::tempdir().unwrap();
        let files = write_plots(t.path(), &r).unwrap();
        let s = read(&files[0]);
        for n in ["HDD static", "HDD adaptive (units)", "HDD adaptive (groups)", "paper (HSA)"] {
            assert!(s.contains(n), "no {n:?}");
        }
        assert!(!s.contains("SSD static"));
        assert!(read(&files[1]).contains("HDD groups (mosaic)"));
    }

    #[test]
    fn an_unwritable_directory_is_an_error_not_a_panic() {
        let t = tempfile::tempdir().unwrap();
        let file = t.path().join("f");
        std::fs::write(&file, b"x").unwrap();
        let cfg = AdaptEvalConfig { drives: 2, arrays: vec![Array::Ssd], alphas: vec![0.0], thresholds: vec![1], threads: vec![1], ..AdaptEvalConfig::default() };
        let r = run_requests("planted".into(), &planted(&cfg, 4, 4, 1), &cfg).unwrap();
        assert!(write_plots(&file.join("sub"), &r).is_err());
    }

    #[test]
    fn log_axes_clamp_and_label_in_data_units() {
        let a = Axis { desc: "", log: true };
        assert_eq!(a.to(0.0), LOG_FLOOR.log10());
        assert_eq!(a.label(2.0, 3.0), "100");
        assert_eq!(lin("").label(1.25, 0.5), "1.25");
        assert_eq!(lin("").label(40000.0, 14000.0), "40000");
        assert_eq!(lin("").range(std::iter::empty()), 0.0..1.0);
        let r = lin("").range([5.0, 5.0].into_iter());
        assert!(r.start < 5.0 && r.end > 5.0);
    }
}
