//! SVG plots of the DVS experiments, drawn by [`mosaic_sim::plot`]: one
//! colour and marker per scheme, the same in every plot.

use std::path::Path;

use mosaic_sim::plot::{style, Axis, BarSeries, Figure, Panel, Plot, Series};

use crate::dvs::{Row, SCHEMES};

/// The series index of `scheme` (its colour and marker).
fn index(scheme: &str) -> usize {
    SCHEMES.iter().position(|s| *s == scheme).unwrap_or(SCHEMES.len())
}

/// Grouped bars: one group per workload, one bar per scheme, log y.
pub fn bars(path: &Path, title: &str, rows: &[Row]) -> Result<(), String> {
    let mut wls: Vec<String> = Vec::new();
    for r in rows {
        if !wls.contains(&r.workload) {
            wls.push(r.workload.clone());
        }
    }
    let series = SCHEMES
        .iter()
        .filter(|s| rows.iter().any(|r| r.scheme == **s))
        .map(|s| {
            // A saturated scheme's mean only measures the run length: no bar.
            let v = wls.iter().map(|w| rows.iter().find(|r| r.scheme == *s && r.workload == *w && !r.saturated()).map(|r| r.mean_ms)).collect();
            BarSeries { style: style(index(s)), ..BarSeries::new(0, *s, v) }
        })
        .collect();
    let panel = Panel { title: String::new(), y: Axis::log("mean response time (ms)"), plot: Plot::Bars { xdesc: "workload".into(), groups: wls, series } };
    Figure::new(title, vec![panel], 1, (1000, 520)).write(path)
}

/// One line per scheme: mean response time over `x(row)` (on `x_axis`), log y.
pub fn lines(path: &Path, title: &str, x_axis: Axis, rows: &[Row], x: impl Fn(&Row) -> f64) -> Result<(), String> {
    let series = SCHEMES
        .iter()
        .filter(|s| rows.iter().any(|r| r.scheme == **s))
        .map(|s| Series { style: style(index(s)), ..Series::line(0, *s, rows.iter().filter(|r| r.scheme == *s).map(|r| (x(r), r.mean_ms))) })
        .collect();
    let panel = Panel { title: String::new(), y: Axis::log("mean response time (ms)"), plot: Plot::Lines { x: x_axis, series } };
    Figure::new(title, vec![panel], 1, (900, 520)).write(path)
}
