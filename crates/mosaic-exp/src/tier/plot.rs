//! SVG plots of the tier experiments: one line per scheme (or allocator).

use std::path::Path;

use mosaic_sim::plot::{Axis, BarSeries, Figure, Panel, Plot};

use super::{Results, TierEvalError};

/// Named series of `(x, y)` points, in first-seen order.
pub type Series = Vec<(String, Vec<(f64, f64)>)>;

fn err(e: String) -> TierEvalError {
    TierEvalError::Other(e)
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

/// One line (colour and marker) per series, on axes `x` and `y`.
pub fn lines(path: &Path, title: &str, x: Axis, y: Axis, series: &Series) -> Result<(), TierEvalError> {
    let series = series.iter().enumerate().map(|(i, (name, pts))| mosaic_sim::plot::Series::line(i, name.clone(), pts.iter().copied())).collect();
    Figure::new(title, vec![Panel { title: String::new(), y, plot: Plot::Lines { x, series } }], 1, (900, 520)).write(path).map_err(err)
}

/// One bar (colour and marker) per `(label, value)` on axis `y`.
pub fn bars(path: &Path, title: &str, xdesc: &str, y: Axis, bars: &[(String, f64)]) -> Result<(), TierEvalError> {
    let series = bars.iter().enumerate().map(|(i, (name, v))| BarSeries::new(i, name.clone(), vec![Some(*v)])).collect();
    let plot = Plot::Bars { xdesc: String::new(), groups: vec![xdesc.to_string()], series };
    Figure::new(title, vec![Panel { title: String::new(), y, plot }], 1, (900, 520)).write(path).map_err(err)
}

impl Results {
    /// The SVG files [`Results::plot`] writes.
    pub const PLOTS: [&'static str; 4] = ["tier-space.svg", "tier-iozone.svg", "tier-postmark.svg", "tier-trace.svg"];

    /// Write the plots into `dir`; the paths written.
    pub fn plot(&self, dir: &Path) -> Result<Vec<std::path::PathBuf>, TierEvalError> {
        std::fs::create_dir_all(dir)?;
        let files: Vec<std::path::PathBuf> = Self::PLOTS.iter().map(|f| dir.join(f)).collect();
        let n = self.space.first().map(|r| r.files).unwrap_or(0);
        let space = group(self.space.iter().filter(|r| r.files == n).flat_map(|r| r.samples.iter().map(move |&(i, f)| (r.case.clone(), i as f64, f))));
        let y = Axis::linear("fast tier: live / allocated").from_zero().at_most(1.0);
        lines(&files[0], &format!("Fast-tier space utilisation, Postmark-like, {n} files"), Axis::linear("file-system events").integer().from_zero(), y, &space)?;
        let mib: Vec<f64> = self.config.iozone_sizes.iter().map(|&b| (b >> 20) as f64).collect();
        let io = group(self.iozone.iter().map(|r| (r.run.scheme.clone(), (r.file_size >> 20) as f64, r.run.mib_per_s)));
        lines(&files[1], "IOzone-like write bandwidth, 8 KiB records", Axis::log("file size (MiB)").ticks(mib), Axis::linear("write bandwidth (MiB/s)").from_zero(), &io)?;
        let nfiles: Vec<f64> = self.config.postmark_files.iter().map(|&f| f as f64).collect();
        let pm = group(self.postmark.iter().map(|r| (r.run.scheme.clone(), r.files as f64, r.tx_per_s)));
        lines(&files[2], "Postmark-like transaction rate", Axis::log("files").ticks(nfiles), Axis::linear("transactions/s").from_zero(), &pm)?;
        let tr: Vec<(String, f64)> = self.trace.iter().map(|r| (r.scheme.clone(), r.open.mean_ms)).collect();
        bars(&files[3], "CloudPhysics trace: mean response time", "CloudPhysics trace (first requests)", Axis::log("mean response time (ms)"), &tr)?;
        Ok(files)
    }
}
