//! SVG plots of `mosaic eval adapt` ([`crate::adapt`]): the test half's
//! response time and parallel depth, static vs adaptive, against the
//! initial layout's skew alpha (one panel per array), and the migration
//! cost vs the gain per correlation threshold beside the paper's Table 2.
//!
//! Every plot is a [`Figure`] of [`mosaic_sim::plot`]: named series of
//! points, optionally tagged, on linear or log axes.

use std::path::{Path, PathBuf};

use mosaic_sim::plot::{Axis, Figure, Panel, Plot, Series};

use crate::adapt::{cost_vs_gain, paper, Results, Row, Section};

/// The files [`write_plots`] writes.
pub const PLOTS: [&str; 3] = ["adapt-response.svg", "adapt-cost-gain.svg", "adapt-depth.svg"];

/// A line panel.
fn chart(title: String, x: Axis, y: Axis, series: Vec<Series>) -> Panel {
    Panel { title, y, plot: Plot::Lines { x, series } }
}

/// `panels` stacked under `caption` in one SVG at `path`.
fn write(path: &Path, caption: &str, panels: Vec<Panel>) -> Result<PathBuf, String> {
    Figure::new(caption, panels, 1, (1100, 420)).write(path)?;
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
        Series::line(0, format!("{tag} static"), units.iter().map(|&(a, m)| (a, m.0))),
        Series::line(1, format!("{tag} adaptive{on}"), units.iter().map(|&(a, m)| (a, m.1))),
    ];
    if let Some(g) = &s.grouping {
        out.push(Series::line(2, format!("{tag} adaptive (groups)"), at(&g.rows).into_iter().map(|(a, m)| (a, m.1))));
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
fn alpha_charts(r: &Results, y: Axis, metric: fn(&Row) -> (f64, f64), title: impl Fn(&str, &Section, u64) -> String) -> Vec<Panel> {
    let t = first_threshold(r);
    let x = Axis::linear("alpha (initial disk popularity skew)");
    sections(r).into_iter().map(|(tag, s)| chart(title(tag, s, t), x.clone(), y.clone(), per_alpha(tag, s, t, metric))).collect()
}

fn response(r: &Results) -> Vec<Panel> {
    let y = Axis::linear("mean overall response time (ms)");
    alpha_charts(r, y, |x| (x.static_ms.all, x.adaptive_ms.all), |tag, s, t| format!("{tag}: {} x {}, threshold {t}\n{}", s.drives, s.drive, gain_note(s, t)))
}

fn depth(r: &Results) -> Vec<Panel> {
    alpha_charts(r, Axis::linear("mean parallel depth (most units on one drive)").from_zero(), |x| (x.test_static.mean_depth, x.test_adaptive.mean_depth), |tag, s, t| {
        format!("{tag}: {} x {} (threshold {t}), test half", s.drives, s.drive)
    })
}

/// Cost vs gain per threshold of some rows, each point tagged "t=N".
fn cost_series(s: Series, pts: impl Iterator<Item = (u64, f64, f64)>) -> Series {
    let (pts, tags): (Vec<(f64, f64)>, Vec<String>) = pts.map(|(t, mb, g)| ((mb, g * 100.0), format!("t={t}"))).unzip();
    Series { points: pts, ..s }.tagged(tags)
}

fn cost_gain(r: &Results) -> Panel {
    let mut series = Vec::new();
    for (tag, s) in sections(r) {
        let on = if s.grouping.is_some() { " units" } else { "" };
        series.push(cost_series(Series::line(series.len(), format!("{tag}{on} (mosaic)"), []), cost_vs_gain(&s.rows).into_iter()));
        if let Some(g) = &s.grouping {
            series.push(cost_series(Series::line(series.len(), format!("{tag} groups (mosaic)"), []), cost_vs_gain(&g.rows).into_iter()));
        }
    }
    series.push(cost_series(Series::paper(series.len(), "paper Table 2 (AFA)", []), paper::TABLE2.into_iter()));
    let (x, y) = (Axis::log("migration cost (MB moved)"), Axis::linear("overall response time gain (%)"));
    chart("per correlation threshold t, mean over alpha".into(), x, y, series)
}

/// Write [`PLOTS`] into `dir` (created if need be); the paths written.
pub fn write_plots(dir: &Path, r: &Results) -> Result<Vec<PathBuf>, String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("plot directory {}: {e}", dir.display()))?;
    Ok(vec![
        write(&dir.join(PLOTS[0]), &format!("Adaptive layout on {}: test-half response time vs alpha", r.trace), response(r))?,
        write(&dir.join(PLOTS[1]), &format!("Adaptive layout on {}: migration cost vs gain", r.trace), vec![cost_gain(r)])?,
        write(&dir.join(PLOTS[2]), &format!("Adaptive layout on {}: test-half mean parallel depth vs alpha", r.trace), depth(r))?,
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
}
