//! SVG plots of the tier experiments: one line per scheme (or allocator).

use std::path::Path;

use plotters::prelude::*;

use super::{Results, TierEvalError};

use mosaic_sim::plot::COLORS;

type Series = Vec<(String, Vec<(f64, f64)>)>;

fn err<E: std::fmt::Display>(e: E) -> TierEvalError {
    TierEvalError::Other(format!("plot: {e}"))
}

/// Group `(series, x, y)` points into series, first-seen order.
fn group(points: impl Iterator<Item = (String, f64, f64)>) -> Series {
    let mut out: Series = Vec::new();
    for (name, x, y) in points {
        match out.iter_mut().find(|s| s.0 == name) {
            Some(s) => s.1.push((x, y)),
            None => out.push((name, vec![(x, y)])),
        }
    }
    out
}

/// Lines with markers; x on a log scale when `log_x`.
fn lines(path: &Path, title: &str, xdesc: &str, ydesc: &str, series: &Series, log_x: bool) -> Result<(), TierEvalError> {
    let pts = series.iter().flat_map(|s| s.1.iter());
    let (mut x0, mut x1, mut y1) = (f64::MAX, f64::MIN, 0.0f64);
    for &(x, y) in pts {
        x0 = x0.min(x);
        x1 = x1.max(x);
        y1 = y1.max(y);
    }
    if x0 > x1 {
        return Ok(());
    }
    let (x0, x1) = if log_x { (x0 / 1.5, x1 * 1.5) } else { (x0, x1.max(x0 + 1.0)) };
    let root = SVGBackend::new(path, (900, 500)).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    let mut b = ChartBuilder::on(&root);
    b.caption(title, ("sans-serif", 18)).margin(10).x_label_area_size(40).y_label_area_size(70);
    let y = 0.0..(y1 * 1.1).max(1e-9);
    if log_x {
        let mut c = b.build_cartesian_2d((x0..x1).log_scale(), y).map_err(err)?;
        c.configure_mesh().x_desc(xdesc).y_desc(ydesc).draw().map_err(err)?;
        draw(&mut c, series)?;
        c.configure_series_labels().background_style(WHITE.mix(0.8)).border_style(BLACK).position(SeriesLabelPosition::UpperLeft).draw().map_err(err)?;
    } else {
        let mut c = b.build_cartesian_2d(x0..x1, y).map_err(err)?;
        c.configure_mesh().x_desc(xdesc).y_desc(ydesc).draw().map_err(err)?;
        draw(&mut c, series)?;
        c.configure_series_labels().background_style(WHITE.mix(0.8)).border_style(BLACK).position(SeriesLabelPosition::UpperRight).draw().map_err(err)?;
    }
    root.present().map_err(err)
}

fn draw<'a, X, DB>(c: &mut ChartContext<'a, DB, Cartesian2d<X, plotters::coord::types::RangedCoordf64>>, series: &Series) -> Result<(), TierEvalError>
where
    X: Ranged<ValueType = f64>,
    DB: DrawingBackend + 'a,
{
    for (i, (name, pts)) in series.iter().enumerate() {
        let col = COLORS[i % COLORS.len()];
        c.draw_series(LineSeries::new(pts.clone(), col.stroke_width(2)))
            .map_err(err)?
            .label(name.clone())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], col.stroke_width(2)));
        c.draw_series(pts.iter().map(|&p| Circle::new(p, 3, col.filled()))).map_err(err)?;
    }
    Ok(())
}

/// One bar per `(label, value)`, log y.
fn bars(path: &Path, title: &str, ydesc: &str, bars: &[(String, f64)]) -> Result<(), TierEvalError> {
    let pos: Vec<f64> = bars.iter().map(|b| b.1).filter(|&v| v > 0.0).collect();
    if pos.is_empty() {
        return Ok(());
    }
    let lo = pos.iter().copied().fold(f64::MAX, f64::min) / 2.0;
    let hi = pos.iter().copied().fold(0.0, f64::max) * 2.0;
    let root = SVGBackend::new(path, (900, 500)).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    let mut c = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 18))
        .margin(10)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d(0.0..bars.len() as f64, (lo..hi).log_scale())
        .map_err(err)?;
    let names: Vec<String> = bars.iter().map(|b| b.0.clone()).collect();
    c.configure_mesh()
        .disable_x_mesh()
        .x_labels(bars.len() * 2 + 1)
        .x_label_formatter(&|x| {
            let i = x.floor() as usize;
            if (x - i as f64 - 0.5).abs() < 0.01 { names.get(i).cloned().unwrap_or_default() } else { String::new() }
        })
        .y_desc(ydesc)
        .draw()
        .map_err(err)?;
    c.draw_series(bars.iter().enumerate().map(|(i, b)| Rectangle::new([(i as f64 + 0.15, lo), (i as f64 + 0.85, b.1.max(lo))], COLORS[i % COLORS.len()].filled())))
        .map_err(err)?;
    root.present().map_err(err)
}

impl Results {
    /// The SVG files [`Results::plot`] writes.
    pub const PLOTS: [&'static str; 4] = ["tier-space.svg", "tier-iozone.svg", "tier-postmark.svg", "tier-trace.svg"];

    /// Write the plots into `dir`.
    pub fn plot(&self, dir: &Path) -> Result<(), TierEvalError> {
        std::fs::create_dir_all(dir)?;
        let files = self.space.first().map(|r| r.files).unwrap_or(0);
        let space = group(self.space.iter().filter(|r| r.files == files).flat_map(|r| r.samples.iter().map(move |&(i, f)| (r.case.clone(), i as f64, f))));
        lines(&dir.join(Self::PLOTS[0]), &format!("fast-tier live/allocated, Postmark-like, {files} files"), "file-system events", "live / allocated", &space, false)?;
        let io = group(self.iozone.iter().map(|r| (r.run.scheme.clone(), (r.file_size >> 20) as f64, r.run.mib_per_s)));
        lines(&dir.join(Self::PLOTS[1]), "IOzone-like write bandwidth, 8 KiB records", "file size (MiB)", "MiB/s", &io, true)?;
        let pm = group(self.postmark.iter().map(|r| (r.run.scheme.clone(), r.files as f64, r.tx_per_s)));
        lines(&dir.join(Self::PLOTS[2]), "Postmark-like transaction rate", "files", "transactions/s", &pm, true)?;
        let tr: Vec<(String, f64)> = self.trace.iter().map(|r| (r.scheme.clone(), r.open.mean_ms)).collect();
        bars(&dir.join(Self::PLOTS[3]), "CloudPhysics trace: mean response time (ms, log)", "mean ms", &tr)
    }
}
