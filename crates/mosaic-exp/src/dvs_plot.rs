//! SVG plots of the experiments.

use std::path::Path;

use plotters::prelude::*;

use crate::dvs::{Row, SCHEMES};

use mosaic_sim::plot::COLORS;

fn err<E: std::fmt::Display>(e: E) -> String {
    format!("plot: {e}")
}

fn color(scheme: &str) -> RGBColor {
    COLORS[SCHEMES.iter().position(|s| *s == scheme).unwrap_or(0) % COLORS.len()]
}

fn yrange(rows: &[Row]) -> (f64, f64) {
    let lo = rows.iter().map(|r| r.mean_ms).filter(|&x| x > 0.0).fold(f64::MAX, f64::min);
    let hi = rows.iter().map(|r| r.mean_ms).fold(0.0, f64::max);
    let lo = if lo == f64::MAX { 0.01 } else { lo * 0.5 };
    (lo.max(1e-3), (hi * 2.0).max(lo * 10.0))
}

/// Grouped bars: one group per workload, one bar per scheme, log y.
pub fn bars(path: &Path, title: &str, rows: &[Row]) -> Result<(), String> {
    let mut wls: Vec<String> = Vec::new();
    for r in rows {
        if !wls.contains(&r.workload) {
            wls.push(r.workload.clone());
        }
    }
    let root = SVGBackend::new(path, (1000, 500)).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    let (lo, hi) = yrange(rows);
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 18))
        .margin(10)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(0.0..wls.len() as f64, (lo..hi).log_scale())
        .map_err(err)?;
    let names = wls.clone();
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(wls.len() * 2 + 1)
        .x_label_formatter(&|x| {
            let i = x.floor() as usize;
            if (x - i as f64 - 0.5).abs() < 0.01 { names.get(i).cloned().unwrap_or_default() } else { String::new() }
        })
        .y_desc("ms")
        .draw()
        .map_err(err)?;
    let w = 0.8 / SCHEMES.len() as f64;
    for (si, s) in SCHEMES.iter().enumerate() {
        let c = color(s);
        let bars: Vec<_> = rows
            .iter()
            .filter(|r| r.scheme == *s)
            .filter_map(|r| {
                let g = wls.iter().position(|x| *x == r.workload)? as f64;
                let x0 = g + 0.1 + si as f64 * w;
                Some(Rectangle::new([(x0, lo), (x0 + w, r.mean_ms.max(lo))], c.filled()))
            })
            .collect();
        chart.draw_series(bars).map_err(err)?.label(*s).legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 15, y + 5)], c.filled()));
    }
    chart.configure_series_labels().background_style(WHITE.mix(0.8)).border_style(BLACK).position(SeriesLabelPosition::UpperRight).draw().map_err(err)?;
    root.present().map_err(err)
}

/// One line per scheme: mean response time over `x(row)`, log y.
pub fn lines(path: &Path, title: &str, rows: &[Row], x: impl Fn(&Row) -> f64) -> Result<(), String> {
    let root = SVGBackend::new(path, (900, 500)).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    let (lo, hi) = yrange(rows);
    let xmax = rows.iter().map(&x).fold(0.0, f64::max) * 1.05;
    let xmin = rows.iter().map(&x).fold(f64::MAX, f64::min).min(xmax) * 0.95;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 18))
        .margin(10)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(xmin..xmax.max(xmin + 1.0), (lo..hi).log_scale())
        .map_err(err)?;
    chart.configure_mesh().y_desc("mean response time (ms)").draw().map_err(err)?;
    for s in SCHEMES {
        let pts: Vec<(f64, f64)> = rows.iter().filter(|r| r.scheme == s).map(|r| (x(r), r.mean_ms.max(lo))).collect();
        if pts.is_empty() {
            continue;
        }
        let c = color(s);
        chart.draw_series(LineSeries::new(pts.clone(), c.stroke_width(2))).map_err(err)?.label(s).legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], c.stroke_width(2)));
        chart.draw_series(pts.into_iter().map(|p| Circle::new(p, 3, c.filled()))).map_err(err)?;
    }
    chart.configure_series_labels().background_style(WHITE.mix(0.8)).border_style(BLACK).position(SeriesLabelPosition::UpperRight).draw().map_err(err)?;
    root.present().map_err(err)
}
