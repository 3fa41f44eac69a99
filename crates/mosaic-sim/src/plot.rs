//! SVG plots of replay results: response-time CDFs and per-device
//! utilisation, one series per compared layout.

use std::path::Path;

use plotters::prelude::*;

use crate::SimReport;

/// The one palette of mosaic's plots (matplotlib's "tab10" order).
pub const COLORS: [RGBColor; 8] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
];

fn err<E: std::fmt::Display>(e: E) -> String {
    format!("plot: {e}")
}

/// Points of an empirical CDF (x in ms), thinned to at most `max` points.
fn cdf(sorted_ns: &[u64], max: usize) -> Vec<(f64, f64)> {
    let n = sorted_ns.len();
    if n == 0 {
        return vec![];
    }
    let step = n.div_ceil(max).max(1);
    let mut pts: Vec<(f64, f64)> = (0..n).step_by(step).map(|i| (sorted_ns[i] as f64 / 1e6, (i + 1) as f64 / n as f64)).collect();
    pts.push((sorted_ns[n - 1] as f64 / 1e6, 1.0));
    pts
}

/// Write an SVG with a latency CDF (left) and device utilisation (right).
/// Reports must have been run with `keep_latencies`.
pub fn write_svg(path: &Path, title: &str, reports: &[SimReport]) -> Result<(), String> {
    let root = SVGBackend::new(path, (1200, 480)).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    let root = root.titled(title, ("sans-serif", 20)).map_err(err)?;
    let (left, right) = root.split_horizontally(640);

    // Latency CDF, log-scaled x.
    let all: Vec<u64> = reports.iter().flat_map(|r| r.read_latencies_ns.iter().chain(&r.write_latencies_ns).copied()).collect();
    let lo = all.iter().copied().filter(|&x| x > 0).min().unwrap_or(1_000) as f64 / 1e6;
    let hi = all.iter().copied().max().unwrap_or(1_000_000) as f64 / 1e6;
    let (lo, hi) = (lo.max(1e-4) * 0.9, (hi * 1.1).max(lo * 10.0));
    let mut chart = ChartBuilder::on(&left)
        .caption("response time CDF", ("sans-serif", 16))
        .margin(10)
        .x_label_area_size(40)
        .y_label_area_size(50)
        .build_cartesian_2d((lo..hi).log_scale(), 0.0..1.0)
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_desc("response time (ms)")
        .y_desc("fraction of requests")
        .x_labels(6)
        .x_label_formatter(&|x| if *x >= 10.0 { format!("{x:.0}") } else { format!("{x:.2}") })
        .draw()
        .map_err(err)?;
    for (i, r) in reports.iter().enumerate() {
        let c = COLORS[i % COLORS.len()];
        for (kind, data, dashed) in [("writes", &r.write_latencies_ns, false), ("reads", &r.read_latencies_ns, true)] {
            let mut sorted = data.clone();
            sorted.sort_unstable();
            let pts = cdf(&sorted, 400);
            if pts.is_empty() {
                continue;
            }
            let label = format!("{} {kind}", r.layout);
            let style = if dashed { c.mix(0.5).stroke_width(2) } else { c.stroke_width(2) };
            chart
                .draw_series(LineSeries::new(pts.into_iter().map(|(x, y)| (x.max(lo), y)), style))
                .map_err(err)?
                .label(label)
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], c.stroke_width(2)));
        }
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .position(SeriesLabelPosition::LowerRight)
        .draw()
        .map_err(err)?;

    // Utilisation per device, grouped by report.
    let devs = reports.iter().map(|r| r.devices.len()).max().unwrap_or(1).max(1);
    let groups = reports.len().max(1);
    let mut chart = ChartBuilder::on(&right)
        .caption("device utilisation", ("sans-serif", 16))
        .margin(10)
        .x_label_area_size(40)
        .y_label_area_size(50)
        .build_cartesian_2d(0.0..devs as f64, 0.0..1.05)
        .map_err(err)?;
    chart.configure_mesh().x_desc("device").y_desc("busy fraction").disable_x_mesh().draw().map_err(err)?;
    let w = 0.8 / groups as f64;
    for (gi, r) in reports.iter().enumerate() {
        let c = COLORS[gi % COLORS.len()];
        chart
            .draw_series(r.devices.iter().enumerate().map(|(d, s)| {
                let x0 = d as f64 + 0.1 + gi as f64 * w;
                Rectangle::new([(x0, 0.0), (x0 + w, s.utilisation.min(1.05))], c.filled())
            }))
            .map_err(err)?;
    }
    root.present().map_err(err)?;
    Ok(())
}
