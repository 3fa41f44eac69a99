//! SVG plots.  Every plot mosaic writes is a [`Figure`]: panels of lines or
//! grouped bars drawn by the one renderer here, so all of them share
//!
//! * the palette [`COLORS`] and the markers [`MARKERS`] (series `i` gets
//!   [`style`]`(i)`: a colour and a marker of its own; the paper's values
//!   are [`PAPER_MARKER`]s with a black edge);
//! * a legend above every panel, outside the plotting area, so it never
//!   covers data;
//! * tick labels chosen here: integers on count and index axes
//!   ([`Axis::integer`]), at most as many decimals as the step needs,
//!   10k / 1M for large round numbers ([`number`]);
//! * log axes that do not hide zeros: a value of 0 is drawn on its own
//!   tick, labelled "0", a gap below the smallest decade;
//! * axes from zero where asked ([`Axis::from_zero`]), capped where the
//!   quantity is ([`Axis::at_most`]: a fraction at 1, a busy time at 100%).
//!
//! [`write_svg`] is replay's figure: response-time CDFs and per-device
//! utilisation, one series per compared layout.

use std::f64::consts::{FRAC_PI_2, FRAC_PI_4, PI, TAU};
use std::path::Path;

use plotters::coord::ranged1d::{DefaultFormatting, KeyPointHint, Ranged};
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use crate::SimReport;

/// The colour type of [`COLORS`] and [`Style`], for users of this module
/// that do not depend on plotters.
pub use plotters::style::RGBColor;

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

/// A marker shape, drawn at a series' points and in its legend entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Marker {
    Circle,
    Square,
    TriangleUp,
    Diamond,
    TriangleDown,
    Cross,
    Plus,
    Hexagon,
    Star,
}

/// The markers of series 0, 1, ... (beside [`COLORS`]).
pub const MARKERS: [Marker; 8] = [Marker::Circle, Marker::Square, Marker::TriangleUp, Marker::Diamond, Marker::TriangleDown, Marker::Cross, Marker::Plus, Marker::Hexagon];

/// The marker of a paper's values (drawn with a black edge).
pub const PAPER_MARKER: Marker = Marker::Star;

impl Marker {
    /// The outline of the marker of radius `r` around (0, 0), in pixels
    /// (y down).
    pub fn outline(self, r: f64) -> Vec<(f64, f64)> {
        let ring = |n: usize, rot: f64, rad: &dyn Fn(usize) -> f64| -> Vec<(f64, f64)> {
            (0..n).map(|i| (rot + i as f64 * TAU / n as f64, rad(i))).map(|(a, d)| (d * a.cos(), -d * a.sin())).collect()
        };
        let plus = |rot: f64| {
            let w = r * 0.4;
            let p = [(-w, -r), (w, -r), (w, -w), (r, -w), (r, w), (w, w), (w, r), (-w, r), (-w, w), (-r, w), (-r, -w), (-w, -w)];
            p.iter().map(|&(x, y)| (x * rot.cos() - y * rot.sin(), x * rot.sin() + y * rot.cos())).collect()
        };
        match self {
            Marker::Circle => ring(20, 0.0, &|_| r),
            Marker::Square => ring(4, FRAC_PI_4, &|_| r * 1.2),
            Marker::TriangleUp => ring(3, FRAC_PI_2, &|_| r * 1.35),
            Marker::TriangleDown => ring(3, -FRAC_PI_2, &|_| r * 1.35),
            Marker::Diamond => ring(4, FRAC_PI_2, &|_| r * 1.35),
            Marker::Hexagon => ring(6, 0.0, &|_| r * 1.1),
            Marker::Star => ring(10, FRAC_PI_2, &|i| if i % 2 == 0 { r * 1.5 } else { r * 0.65 }),
            Marker::Plus => plus(0.0),
            Marker::Cross => plus(PI / 4.0),
        }
    }
}

/// A series' colour and marker.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Style {
    pub color: RGBColor,
    pub marker: Marker,
}

/// The style of series `i`: [`COLORS`]`[i]` and [`MARKERS`]`[i]`.
pub fn style(i: usize) -> Style {
    Style { color: COLORS[i % COLORS.len()], marker: MARKERS[i % MARKERS.len()] }
}

/// A tick label: `v` with no more decimals than it needs (up to 4),
/// round thousands and millions as 10k and 1M.
pub fn number(v: f64) -> String {
    if v == 0.0 || !v.is_finite() {
        return if v.is_finite() { "0".into() } else { format!("{v}") };
    }
    let exact = |x: f64| (x - x.round()).abs() < 1e-6 * x.abs().max(1.0);
    let a = v.abs();
    if a >= 1e6 && exact(v / 1e5) {
        return format!("{}M", number(v / 1e6));
    }
    if a >= 1e4 && exact(v / 1e3) {
        return format!("{}k", number(v / 1e3));
    }
    let d = (0..4).find(|&d| exact(v * 10f64.powi(d))).unwrap_or(4) as usize;
    format!("{v:.d$}")
}

/// The labels of a linear axis's ticks `values`: the same decimals and
/// unit on all of them (0, 0.5, 1.0; 0, 5k, 10k).
pub fn tick_labels(values: &[f64]) -> Vec<String> {
    let exact = |x: f64| (x - x.round()).abs() < 1e-6 * x.abs().max(1.0);
    let big = values.iter().fold(0.0f64, |m, v| m.max(v.abs()));
    let (unit, suffix) = match big {
        b if b >= 1e6 && values.iter().all(|v| exact(v / 1e5)) => (1e6, "M"),
        b if b >= 1e4 && values.iter().all(|v| exact(v / 1e2)) => (1e3, "k"),
        _ => (1.0, ""),
    };
    let d = (0..4).find(|&d| values.iter().all(|v| exact(v / unit * 10f64.powi(d)))).unwrap_or(4) as usize;
    values
        .iter()
        .map(|&v| match v / unit {
            x if x.abs() < 1e-9 => "0".to_string(),
            x => format!("{x:.d$}{suffix}"),
        })
        .collect()
}

/// An axis: its description and how it is scaled.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Axis {
    pub desc: String,
    /// Log10 (0 and below drawn on a "0" tick under the smallest decade).
    pub log: bool,
    /// A count or an index: integer ticks only.
    pub integer: bool,
    /// Include 0 (a bar's or a fraction's axis).
    pub from_zero: bool,
    /// The axis ends here at most (1 for a fraction, 100 for a percentage).
    pub max: Option<f64>,
    /// The ticks (data values), when the data has natural ones.
    pub ticks: Option<Vec<f64>>,
}

impl Axis {
    pub fn linear(desc: impl Into<String>) -> Axis {
        Axis { desc: desc.into(), ..Axis::default() }
    }
    pub fn log(desc: impl Into<String>) -> Axis {
        Axis { desc: desc.into(), log: true, ..Axis::default() }
    }
    pub fn integer(mut self) -> Axis {
        self.integer = true;
        self
    }
    pub fn from_zero(mut self) -> Axis {
        self.from_zero = true;
        self
    }
    pub fn at_most(mut self, max: f64) -> Axis {
        self.max = Some(max);
        self
    }
    pub fn ticks(mut self, ticks: Vec<f64>) -> Axis {
        self.ticks = Some(ticks);
        self
    }
    /// Log when `values` span more than about a decade and a half (their
    /// largest over their smallest positive one above 30), else linear from 0.
    pub fn log_when_wide(mut self, values: impl IntoIterator<Item = f64>) -> Axis {
        let (lo, hi) = values.into_iter().filter(|v| v.is_finite() && *v > 0.0).fold((f64::MAX, 0.0f64), |(l, h), v| (l.min(v), h.max(v)));
        self.log = hi > 30.0 * lo;
        self.from_zero = !self.log;
        self
    }
}

/// An axis fitted to its data, in drawing units (log10 on a log axis).
#[derive(Clone, Debug, PartialEq)]
pub struct Scale {
    pub log: bool,
    pub lo: f64,
    pub hi: f64,
    /// Where 0 is drawn on a log axis that has zeros.
    pub zero: Option<f64>,
    /// Tick positions (drawing units) and labels.
    pub ticks: Vec<(f64, String)>,
}

fn nice_step(raw: f64, integer: bool) -> f64 {
    let raw = if raw > 0.0 && raw.is_finite() { raw } else { 1.0 };
    let mag = 10f64.powf(raw.log10().floor());
    let f = raw / mag;
    let m = [1.0, 2.0, 2.5, 5.0, 10.0].into_iter().find(|&m| f <= m * (1.0 + 1e-9)).unwrap_or(10.0);
    let step = m * mag;
    if !integer || step >= 1.0 && step.fract() == 0.0 {
        return step;
    }
    if step < 1.0 {
        1.0
    } else {
        (m * 2.0).min(10.0) * mag // 2.5 -> 5
    }
}

impl Scale {
    /// Fit `ax` to `vals` (non-finite ones ignored) with about `n` ticks.
    pub fn new(ax: &Axis, vals: impl IntoIterator<Item = f64>, n: usize) -> Scale {
        let vals: Vec<f64> = vals.into_iter().filter(|v| v.is_finite()).collect();
        let n = n.max(2);
        if ax.log {
            let pos: Vec<f64> = vals.iter().copied().filter(|&v| v > 0.0).collect();
            if !pos.is_empty() {
                return Scale::logarithmic(ax, &pos, pos.len() < vals.len(), n);
            }
        }
        Scale::linear(ax, &vals, n)
    }

    fn linear(ax: &Axis, vals: &[f64], n: usize) -> Scale {
        let (mut lo, mut hi) = vals.iter().fold((f64::MAX, f64::MIN), |(l, h), &v| (l.min(v), h.max(v)));
        if lo > hi {
            (lo, hi) = (0.0, ax.max.unwrap_or(1.0));
        }
        if ax.from_zero {
            (lo, hi) = (lo.min(0.0), hi.max(0.0));
        }
        if hi - lo < 1e-12 {
            if lo == 0.0 {
                hi = ax.max.unwrap_or(1.0).min(1.0);
            } else {
                let d = lo.abs() * 0.1;
                (lo, hi) = (lo - d, hi + d);
            }
        }
        if let Some(t) = &ax.ticks {
            let ticks = t.iter().copied().zip(tick_labels(t)).collect();
            let (tl, th) = t.iter().fold((lo, hi), |(l, h), &v| (l.min(v), h.max(v)));
            return Scale { log: false, lo: tl, hi: th, zero: None, ticks };
        }
        let step = nice_step((hi - lo) / n as f64, ax.integer);
        let a = (lo / step + 1e-9).floor() * step;
        let mut b = (hi / step - 1e-9).ceil() * step;
        if let Some(m) = ax.max {
            if b > m && hi <= m {
                b = m;
            }
        }
        let (k0, k1) = ((a / step).round() as i64, (b / step + 1e-9).floor() as i64);
        let vals: Vec<f64> = (k0..=k1).map(|k| k as f64 * step).collect();
        let ticks = vals.iter().copied().zip(tick_labels(&vals)).collect();
        Scale { log: false, lo: a, hi: b, zero: None, ticks }
    }

    fn logarithmic(ax: &Axis, pos: &[f64], zeros: bool, n: usize) -> Scale {
        let (pmin, pmax) = pos.iter().fold((f64::MAX, f64::MIN), |(l, h), &v| (l.min(v), h.max(v)));
        let (l0, l1) = (pmin.log10(), pmax.log10());
        let pad = ((l1 - l0) * 0.06).max(0.08);
        let (mut lo, mut hi) = (l0 - pad, l1 + pad);
        let mut vals: Vec<f64> = match &ax.ticks {
            Some(t) => t.iter().copied().filter(|&v| v > 0.0).collect(),
            None => Vec::new(),
        };
        if vals.is_empty() {
            let candidates = |lo: f64, hi: f64, ms: &[f64]| -> Vec<f64> {
                let mut c = Vec::new();
                for e in (lo.floor() as i32)..=(hi.ceil() as i32) {
                    for &m in ms {
                        let v = m * 10f64.powi(e);
                        if v.log10() >= lo - 1e-9 && v.log10() <= hi + 1e-9 {
                            c.push(v);
                        }
                    }
                }
                c
            };
            // The densest of these mantissas that fits n ticks.
            let sets: [&[f64]; 5] = [&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0], &[1.0, 2.0, 3.0, 5.0], &[1.0, 2.0, 5.0], &[1.0, 3.0], &[1.0]];
            vals = sets.iter().map(|ms| candidates(lo, hi, ms)).find(|c| c.len() <= n).unwrap_or_default();
            if vals.is_empty() {
                let decades = candidates(lo, hi, &[1.0]);
                let every = decades.len().div_ceil(n).max(1);
                vals = decades.into_iter().step_by(every).collect();
            }
            if vals.len() < 2 {
                (lo, hi) = (lo.min(l0.floor()), hi.max(l1.ceil()).max(l0.floor() + 1.0));
                vals = candidates(lo, hi, &[1.0]);
            }
        } else {
            let (tl, th) = vals.iter().fold((lo, hi), |(l, h), &v| (l.min(v.log10()), h.max(v.log10())));
            (lo, hi) = (tl.min(lo), th.max(hi));
        }
        let mut ticks: Vec<(f64, String)> = vals.iter().map(|&v| (v.log10(), number(v))).collect();
        let zero = zeros.then(|| {
            let z = lo - ((hi - lo) * 0.1).max(0.25);
            lo = z - (hi - z) * 0.03;
            ticks.insert(0, (z, "0".into()));
            z
        });
        Scale { log: true, lo, hi, zero, ticks }
    }

    /// The range widened by `f` of it at both ends, so that markers and
    /// lines at the ends stay clear of the axes.
    fn padded(mut self, f: f64) -> Scale {
        let d = (self.hi - self.lo) * f;
        (self.lo, self.hi) = (self.lo - d, self.hi + d);
        self
    }

    /// One more tick on a linear axis whose highest value `top` would run
    /// into the frame (not past the axis's cap `max`): a bar's headroom.
    fn headroom(mut self, top: f64, max: Option<f64>) -> Scale {
        let n = self.ticks.len();
        if self.log || n < 2 || self.hi - top >= 0.04 * (self.hi - self.lo) {
            return self;
        }
        let next = self.ticks[n - 1].0 + (self.ticks[n - 1].0 - self.ticks[n - 2].0);
        if max.is_some_and(|m| next > m) {
            return self;
        }
        let vals: Vec<f64> = self.ticks.iter().map(|t| t.0).chain([next]).collect();
        self.ticks = vals.iter().copied().zip(tick_labels(&vals)).collect();
        self.hi = self.hi.max(next);
        self
    }

    /// A data value in drawing units; None when it cannot be drawn.
    pub fn to(&self, v: f64) -> Option<f64> {
        if !v.is_finite() {
            return None;
        }
        if !self.log {
            return Some(v);
        }
        if v > 0.0 {
            Some(v.log10())
        } else {
            Some(self.zero.unwrap_or(self.lo))
        }
    }

    /// Where bars start: 0 on a linear axis (within the range), the
    /// bottom of a log axis.
    pub fn base(&self) -> f64 {
        if self.log {
            self.lo
        } else {
            0f64.clamp(self.lo, self.hi)
        }
    }

    /// The label of the tick at `c` (drawing units).
    pub fn label(&self, c: f64) -> String {
        let eps = (self.hi - self.lo).abs() * 1e-6;
        self.ticks.iter().find(|t| (t.0 - c).abs() <= eps).map(|t| t.1.clone()).unwrap_or_default()
    }

    /// The coordinate plotters draws on: this range, these ticks.
    fn coord(&self) -> Ticked {
        Ticked { lo: self.lo, hi: self.hi, ticks: self.ticks.iter().map(|t| t.0).collect() }
    }
}

/// A linear coordinate whose ticks (and grid lines) are exactly ours.
struct Ticked {
    lo: f64,
    hi: f64,
    ticks: Vec<f64>,
}

impl Ranged for Ticked {
    type FormatOption = DefaultFormatting;
    type ValueType = f64;

    fn map(&self, v: &f64, limit: (i32, i32)) -> i32 {
        let f = if self.hi > self.lo { (v - self.lo) / (self.hi - self.lo) } else { 0.5 };
        limit.0 + (f * (limit.1 - limit.0) as f64).round() as i32
    }

    fn key_points<H: KeyPointHint>(&self, hint: H) -> Vec<f64> {
        if hint.weight().allow_light_points() {
            Vec::new()
        } else {
            self.ticks.clone()
        }
    }

    fn range(&self) -> std::ops::Range<f64> {
        self.lo..self.hi
    }
}

/// One line (or, with `line` false, a paper's values: [`PAPER_MARKER`]s
/// in the series' colour, edged black, no line).
#[derive(Clone, Debug)]
pub struct Series {
    pub name: String,
    pub points: Vec<(f64, f64)>,
    /// Text drawn beside each point (may be shorter than `points`).
    pub tags: Vec<String>,
    pub style: Style,
    pub line: bool,
}

impl Series {
    /// A line with markers in the style of series `i`.
    pub fn line(i: usize, name: impl Into<String>, points: impl IntoIterator<Item = (f64, f64)>) -> Series {
        Series { name: name.into(), points: points.into_iter().collect(), tags: Vec::new(), style: style(i), line: true }
    }
    /// Markers only, black-edged: values quoted from a paper.
    pub fn paper(i: usize, name: impl Into<String>, points: impl IntoIterator<Item = (f64, f64)>) -> Series {
        Series { line: false, ..Series::line(i, name, points) }
    }
    pub fn tagged(mut self, tags: Vec<String>) -> Series {
        self.tags = tags;
        self
    }
}

/// One bar per group; None where the series has no value.  `paper`
/// (per group, may be empty) is drawn as a [`PAPER_MARKER`] beside the bar.
#[derive(Clone, Debug)]
pub struct BarSeries {
    pub name: String,
    pub values: Vec<Option<f64>>,
    pub paper: Vec<Option<f64>>,
    pub style: Style,
}

impl BarSeries {
    pub fn new(i: usize, name: impl Into<String>, values: Vec<Option<f64>>) -> BarSeries {
        BarSeries { name: name.into(), values, paper: Vec::new(), style: style(i) }
    }
    pub fn with_paper(mut self, paper: Vec<Option<f64>>) -> BarSeries {
        self.paper = paper;
        self
    }
}

/// What a panel shows.
#[derive(Clone, Debug)]
pub enum Plot {
    Lines { x: Axis, series: Vec<Series> },
    /// Groups along x (labelled), one bar per series in each.
    Bars { xdesc: String, groups: Vec<String>, series: Vec<BarSeries> },
}

/// One chart with its title, its y axis and its legend.
#[derive(Clone, Debug)]
pub struct Panel {
    /// Wrapped to the panel's width; `\n` starts a new line.
    pub title: String,
    pub y: Axis,
    pub plot: Plot,
}

/// Panels in a grid under a title: one SVG.
#[derive(Clone, Debug)]
pub struct Figure {
    pub title: String,
    pub panels: Vec<Panel>,
    pub cols: usize,
    /// Pixels of each panel.
    pub panel: (u32, u32),
}

// Font sizes as plotters takes them (the SVG says size / 1.24 px).
const TITLE: f64 = 21.0;
const PANEL_TITLE: f64 = 17.0;
const LEGEND: f64 = 15.0;
const TICK: f64 = 15.0;
const DESC: f64 = 16.0;

/// About how wide `s` is in pixels at plotters font `size` (DejaVu Sans:
/// 0.6 em a character on average, at size / 1.24 px).
fn text_width(s: &str, size: f64) -> f64 {
    s.chars().count() as f64 * size * 0.6 / 1.24
}

fn line_height(size: f64) -> i32 {
    (size * 1.25 / 1.24 + 3.0).round() as i32
}

/// `text` in lines no wider than `width` pixels, broken at spaces and at `\n`.
fn wrap(text: &str, size: f64, width: f64) -> Vec<String> {
    let mut out = Vec::new();
    for para in text.split('\n') {
        let mut line = String::new();
        for w in para.split(' ') {
            if !line.is_empty() && text_width(&format!("{line} {w}"), size) > width {
                out.push(std::mem::take(&mut line));
            }
            if !line.is_empty() {
                line.push(' ');
            }
            line.push_str(w);
        }
        out.push(line);
    }
    out
}

fn err<E: std::fmt::Display>(e: E) -> String {
    format!("plot: {e}")
}

type Area<'a> = DrawingArea<SVGBackend<'a>, Shift>;

fn font(size: f64) -> TextStyle<'static> {
    TextStyle::from(("sans-serif", size).into_font()).color(&BLACK)
}

fn centred(size: f64) -> TextStyle<'static> {
    font(size).pos(Pos::new(HPos::Center, VPos::Top))
}

/// Draw marker `m` of radius `r` at pixel `at` on `root`.
fn marker(root: &Area, at: (i32, i32), m: Marker, r: f64, fill: ShapeStyle, edge: ShapeStyle) -> Result<(), String> {
    let pts: Vec<(i32, i32)> = m.outline(r).into_iter().map(|(x, y)| (at.0 + x.round() as i32, at.1 + y.round() as i32)).collect();
    root.draw(&Polygon::new(pts.clone(), fill)).map_err(err)?;
    let mut closed = pts;
    closed.push(closed[0]);
    root.draw(&PathElement::new(closed, edge)).map_err(err)
}

/// How a series is sampled in a legend.
#[derive(Clone, Copy)]
enum Sample {
    Line(Style),
    Bar(Style),
    /// A paper's values: filled with the series' colour, or white.
    Paper(RGBColor),
}

fn legend_entries(p: &Panel) -> Vec<(String, Sample)> {
    match &p.plot {
        Plot::Lines { series, .. } => series.iter().map(|s| (s.name.clone(), if s.line { Sample::Line(s.style) } else { Sample::Paper(s.style.color) })).collect(),
        Plot::Bars { series, .. } => {
            let mut e: Vec<(String, Sample)> = series.iter().map(|s| (s.name.clone(), Sample::Bar(s.style))).collect();
            if series.iter().any(|s| s.paper.iter().any(|v| v.is_some())) {
                e.push(("paper".into(), Sample::Paper(WHITE)));
            }
            e
        }
    }
}

const SAMPLE_W: i32 = 30;

/// The legend of `p` in rows centred in `width` from `top`; the height used.
fn legend(root: &Area, p: &Panel, x0: i32, width: i32, top: i32) -> Result<i32, String> {
    let entries = legend_entries(p);
    let gap = 18;
    let w_of = |name: &str| SAMPLE_W + 6 + text_width(name, LEGEND).ceil() as i32;
    let mut rows: Vec<Vec<&(String, Sample)>> = vec![Vec::new()];
    let mut used = 0;
    for e in &entries {
        let w = w_of(&e.0);
        let row = rows.last_mut().expect("a row");
        if !row.is_empty() && used + gap + w > width {
            rows.push(Vec::new());
            used = 0;
        }
        let row = rows.last_mut().expect("a row");
        used += if row.is_empty() { w } else { gap + w };
        row.push(e);
    }
    let lh = line_height(LEGEND) + 2;
    for (ri, row) in rows.iter().enumerate() {
        let total: i32 = row.iter().map(|e| w_of(&e.0)).sum::<i32>() + gap * (row.len() as i32 - 1).max(0);
        let mut x = x0 + (width - total).max(0) / 2;
        let y = top + ri as i32 * lh + lh / 2;
        for (name, sample) in row.iter().map(|e| (&e.0, e.1)) {
            let mid = (x + SAMPLE_W / 2, y);
            match sample {
                Sample::Line(s) => {
                    root.draw(&PathElement::new(vec![(x, y), (x + SAMPLE_W, y)], s.color.stroke_width(2))).map_err(err)?;
                    marker(root, mid, s.marker, 4.5, s.color.filled(), WHITE.stroke_width(1))?;
                }
                Sample::Bar(s) => {
                    root.draw(&Rectangle::new([(x + 4, y - 8), (x + SAMPLE_W - 4, y + 8)], s.color.filled())).map_err(err)?;
                    marker(root, mid, s.marker, 3.5, WHITE.filled(), WHITE.stroke_width(1))?;
                }
                Sample::Paper(c) => marker(root, mid, PAPER_MARKER, 4.5, c.filled(), BLACK.stroke_width(1))?,
            }
            root.draw_text(name, &font(LEGEND).pos(Pos::new(HPos::Left, VPos::Center)), (x + SAMPLE_W + 6, y)).map_err(err)?;
            x += w_of(name) + gap;
        }
    }
    Ok(rows.len() as i32 * lh)
}

/// Every y value a panel draws (bars start at 0).
fn y_values(p: &Panel) -> Vec<f64> {
    match &p.plot {
        Plot::Lines { series, .. } => series.iter().flat_map(|s| s.points.iter().map(|q| q.1)).collect(),
        Plot::Bars { series, .. } => series.iter().flat_map(|s| s.values.iter().chain(&s.paper).flatten().copied()).collect(),
    }
}

fn draw_panel(root: &Area, area: &Area, p: &Panel) -> Result<(), String> {
    let w = area.dim_in_pixel().0;
    let (ax, ay) = (area.get_pixel_range().0.start, area.get_pixel_range().1.start);
    let mut top = 6;
    for l in wrap(&p.title, PANEL_TITLE, w as f64 - 16.0).into_iter().filter(|l| !l.is_empty()) {
        area.draw_text(&l, &centred(PANEL_TITLE), (w as i32 / 2, top)).map_err(err)?;
        top += line_height(PANEL_TITLE);
    }
    top += 2;
    top += legend(root, p, ax + 8, w as i32 - 16, ay + top)? + 4;
    let body = area.margin(top, 0, 0, 0);
    let (bw, bh) = body.dim_in_pixel();
    let ys = Scale::new(&p.y, y_values(p), (bh as usize / 60).clamp(3, 8));
    let (xs, ys, xdesc, group_names) = match &p.plot {
        Plot::Lines { x, series } => {
            let xs = Scale::new(x, series.iter().flat_map(|s| s.points.iter().map(|q| q.0)), (bw as usize / 110).clamp(3, 10));
            (xs.padded(0.03), ys.padded(0.03), desc(x), Vec::new())
        }
        Plot::Bars { xdesc, groups, .. } => {
            let ticks = groups.iter().enumerate().map(|(i, g)| (i as f64 + 0.5, g.clone())).collect();
            let top = y_values(p).into_iter().filter(|v| v.is_finite()).fold(f64::MIN, f64::max);
            (Scale { log: false, lo: 0.0, hi: groups.len().max(1) as f64, zero: None, ticks }, ys.headroom(top, p.y.max), xdesc.clone(), groups.clone())
        }
    };
    let ydesc = desc(&p.y);
    let ylab = ys.ticks.iter().map(|t| text_width(&t.1, TICK)).fold(0.0, f64::max).ceil() as i32 + 12 + line_height(DESC);
    let plot_w = bw as f64 - ylab as f64 - 20.0;
    // Group labels shrink to fit their slot.
    let xfont = group_names.iter().map(|g| TICK.min(TICK * (plot_w / group_names.len() as f64 - 8.0) / text_width(g, TICK).max(1.0))).fold(TICK, f64::min).max(9.0);
    let ydesc_font = DESC.min(DESC * (bh as f64 - 60.0) / text_width(&ydesc, DESC).max(1.0)).max(10.0);
    let mut ch = ChartBuilder::on(&body)
        .margin_top(8)
        .margin_right(20)
        .margin_left(4)
        .x_label_area_size(line_height(TICK) + line_height(DESC) + 10)
        .y_label_area_size(ylab)
        .build_cartesian_2d(xs.coord(), ys.coord())
        .map_err(err)?;
    let (fx, fy) = (|v: &f64| xs.label(*v), |v: &f64| ys.label(*v));
    let mut mesh = ch.configure_mesh();
    mesh.x_desc(xdesc)
        .y_desc(ydesc)
        .x_label_formatter(&fx)
        .y_label_formatter(&fy)
        .x_label_style(("sans-serif", xfont))
        .y_label_style(("sans-serif", TICK))
        .axis_desc_style(("sans-serif", ydesc_font.min(DESC)))
        .bold_line_style(BLACK.mix(0.12))
        .light_line_style(TRANSPARENT);
    if matches!(p.plot, Plot::Bars { .. }) {
        mesh.disable_x_mesh();
    }
    mesh.draw().map_err(err)?;
    let px = |x: f64, y: f64| ch.backend_coord(&(x, y));
    let any = match &p.plot {
        Plot::Lines { series, .. } => lines(root, series, &xs, &ys, &px)?,
        Plot::Bars { series, groups, .. } => bars(root, series, groups.len(), &ys, &px)?,
    };
    if !any {
        let (xr, yr) = ch.plotting_area().get_pixel_range();
        root.draw_text("no data", &font(DESC).pos(Pos::new(HPos::Center, VPos::Center)), ((xr.start + xr.end) / 2, (yr.start + yr.end) / 2)).map_err(err)?;
    }
    Ok(())
}

/// The axis description, saying so when the scale is log:
/// "time (ms)" becomes "time (ms, log scale)".
fn desc(a: &Axis) -> String {
    match (a.log, a.desc.strip_suffix(')')) {
        (false, _) => a.desc.clone(),
        (true, Some(d)) => format!("{d}, log scale)"),
        (true, None) => format!("{} (log scale)", a.desc),
    }
}

/// Markers on at most about a dozen points of a long line, staggered
/// between series so they do not sit on each other.
fn marked(n: usize, series: usize, of: usize) -> impl Fn(usize) -> bool {
    let step = n.div_ceil(12).max(1);
    let offset = step * series / of.max(1);
    move |i| step == 1 || i % step == offset || i + 1 == n
}

fn lines(root: &Area, series: &[Series], xs: &Scale, ys: &Scale, px: &dyn Fn(f64, f64) -> (i32, i32)) -> Result<bool, String> {
    let mut any = false;
    for (si, s) in series.iter().enumerate() {
        let pts: Vec<(usize, (i32, i32))> = s.points.iter().enumerate().filter_map(|(i, &(x, y))| Some((i, px(xs.to(x)?, ys.to(y)?)))).collect();
        any |= !pts.is_empty();
        let c = s.style.color;
        if s.line && pts.len() > 1 {
            root.draw(&PathElement::new(pts.iter().map(|p| p.1).collect::<Vec<_>>(), c.stroke_width(2))).map_err(err)?;
        }
        let show = marked(pts.len(), si, series.len());
        // Earlier series get larger markers: where series coincide, each
        // still shows around the ones drawn over it.
        let r = 3.8 + 0.7 * (series.len() - 1 - si).min(3) as f64;
        for (k, &(_, at)) in pts.iter().enumerate() {
            if !s.line {
                marker(root, at, PAPER_MARKER, 5.0, c.filled(), BLACK.stroke_width(1))?;
            } else if show(k) {
                marker(root, at, s.style.marker, r, c.filled(), c.stroke_width(1))?;
            }
        }
        // Tags above the points of every other series, below the rest's:
        // series that meet do not write over each other.
        let (v, dy) = if si % 2 == 0 { (VPos::Bottom, -5) } else { (VPos::Top, 5) };
        for (tag, at) in pts.iter().filter_map(|&(i, at)| Some((s.tags.get(i)?, at))) {
            root.draw_text(tag, &font(LEGEND - 1.0).color(&c).pos(Pos::new(HPos::Left, v)), (at.0 + 7, at.1 + dy)).map_err(err)?;
        }
    }
    Ok(any)
}

fn bars(root: &Area, series: &[BarSeries], groups: usize, ys: &Scale, px: &dyn Fn(f64, f64) -> (i32, i32)) -> Result<bool, String> {
    let slot = 0.8 / series.len().max(1) as f64;
    let paper = series.iter().any(|s| s.paper.iter().any(|v| v.is_some()));
    let base = ys.base();
    let mut any = false;
    for (si, s) in series.iter().enumerate() {
        for g in 0..groups {
            let x0 = g as f64 + 0.1 + si as f64 * slot;
            let bar_w = if paper { slot * 0.62 } else { slot * 0.9 };
            if let Some(c) = s.values.get(g).copied().flatten().and_then(|v| ys.to(v)) {
                any = true;
                let (l, b) = px(x0, base);
                let (r, mut t) = px(x0 + bar_w, c);
                // A zero still shows: a bar two pixels high.
                t = t.min(b - 2);
                root.draw(&Rectangle::new([(l, t), (r.max(l + 1), b)], s.style.color.filled())).map_err(err)?;
                if r - l >= 11 && b - t >= 18 {
                    marker(root, ((l + r) / 2, t + 9), s.style.marker, 3.5, WHITE.filled(), WHITE.stroke_width(1))?;
                }
            }
            if let Some(c) = s.paper.get(g).copied().flatten().and_then(|v| ys.to(v)) {
                let at = px(x0 + slot * 0.8, c);
                marker(root, at, PAPER_MARKER, 4.5, s.style.color.filled(), BLACK.stroke_width(1))?;
            }
        }
    }
    Ok(any)
}

impl Figure {
    /// A figure of `panels`, `cols` a row, each panel `panel` pixels.
    pub fn new(title: impl Into<String>, panels: Vec<Panel>, cols: usize, panel: (u32, u32)) -> Figure {
        Figure { title: title.into(), panels, cols: cols.max(1), panel }
    }

    fn title_lines(&self) -> Vec<String> {
        let w = self.panel.0 as f64 * self.cols.min(self.panels.len().max(1)) as f64;
        wrap(&self.title, TITLE, w - 20.0)
    }

    /// The SVG's size in pixels.
    pub fn size(&self) -> (u32, u32) {
        let cols = self.cols.min(self.panels.len().max(1));
        let rows = self.panels.len().div_ceil(cols).max(1);
        let title = self.title_lines().len() as u32 * line_height(TITLE) as u32 + 10;
        (self.panel.0 * cols as u32, title + self.panel.1 * rows as u32)
    }

    /// Write the figure as an SVG at `path`.
    pub fn write(&self, path: &Path) -> Result<(), String> {
        let (w, h) = self.size();
        let root = SVGBackend::new(path, (w, h)).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let mut top = 6;
        for l in self.title_lines() {
            root.draw_text(&l, &centred(TITLE), (w as i32 / 2, top)).map_err(err)?;
            top += line_height(TITLE);
        }
        let title = self.title_lines().len() as i32 * line_height(TITLE) + 10;
        let body = root.margin(title, 0, 0, 0);
        let cols = self.cols.min(self.panels.len().max(1));
        let rows = self.panels.len().div_ceil(cols).max(1);
        for (area, p) in body.split_evenly((rows, cols)).iter().zip(&self.panels) {
            // Room between panels: a title is not read as the x axis above it.
            draw_panel(&root, &area.margin(6, 10, 4, 4), p)?;
        }
        root.present().map_err(|e| format!("plot {}: {e}", path.display()))
    }
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

/// The figure [`write_svg`] writes: a response-time CDF of the writes and
/// one of the reads (each when there are any) and the devices' busy time,
/// one series per report.
pub fn replay_figure(title: &str, reports: &[SimReport]) -> Figure {
    let mut panels = Vec::new();
    for (kind, of) in [("write", (|r: &SimReport| &r.write_latencies_ns) as fn(&SimReport) -> &Vec<u64>), ("read", |r: &SimReport| &r.read_latencies_ns)] {
        if reports.iter().all(|r| of(r).is_empty()) {
            continue;
        }
        let series = reports
            .iter()
            .enumerate()
            .map(|(i, r)| {
                let mut sorted = of(r).clone();
                sorted.sort_unstable();
                Series::line(i, r.layout.clone(), cdf(&sorted, 400))
            })
            .collect();
        panels.push(Panel {
            title: format!("{kind} response time CDF"),
            y: Axis::linear(format!("fraction of {kind}s")).from_zero().at_most(1.0),
            plot: Plot::Lines { x: Axis::log("response time (ms)"), series },
        });
    }
    let devs = reports.iter().map(|r| r.devices.len()).max().unwrap_or(0);
    let series = reports.iter().enumerate().map(|(i, r)| BarSeries::new(i, r.layout.clone(), (0..devs).map(|d| r.devices.get(d).map(|s| s.utilisation * 100.0)).collect())).collect();
    panels.push(Panel {
        title: "device utilisation".into(),
        y: Axis::linear("busy time (% of the replay)").from_zero().at_most(100.0),
        plot: Plot::Bars { xdesc: "device (member index)".into(), groups: (0..devs).map(|d| d.to_string()).collect(), series },
    });
    let n = panels.len();
    Figure::new(title, panels, n, (540, 480))
}

/// Write replay's figure ([`replay_figure`]) as an SVG at `path`.
/// Reports must have been run with `keep_latencies`.
pub fn write_svg(path: &Path, title: &str, reports: &[SimReport]) -> Result<(), String> {
    replay_figure(title, reports).write(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_have_the_decimals_they_need() {
        assert_eq!(number(0.0), "0");
        assert_eq!(number(3.0), "3");
        assert_eq!(number(0.25), "0.25");
        assert_eq!(number(0.1 + 0.2), "0.3");
        assert_eq!(number(0.001), "0.001");
        assert_eq!(number(1500.0), "1500");
        assert_eq!(number(40000.0), "40k");
        assert_eq!(number(2_500_000.0), "2.5M");
        assert_eq!(number(-2.0), "-2");
    }

    #[test]
    fn an_axis_labels_its_ticks_alike() {
        assert_eq!(tick_labels(&[0.0, 5000.0, 10000.0, 15000.0]), ["0", "5k", "10k", "15k"]);
        assert_eq!(tick_labels(&[0.0, 0.5, 1.0]), ["0", "0.5", "1.0"]);
        assert_eq!(tick_labels(&[0.0, 2.0, 4.0]), ["0", "2", "4"]);
        assert_eq!(tick_labels(&[0.0, 2500.0, 5000.0]), ["0", "2500", "5000"]);
        assert_eq!(tick_labels(&[0.0, 0.1 + 0.2, 0.6]), ["0", "0.3", "0.6"]);
    }

    #[test]
    fn integer_axes_tick_on_integers() {
        let s = Scale::new(&Axis::linear("").integer(), [0.0, 3.0], 8);
        assert!(s.ticks.iter().all(|t| t.0.fract() == 0.0 && !t.1.contains('.')), "{s:?}");
        let s = Scale::new(&Axis::linear("").integer(), [0.0, 7.0], 3);
        assert!(s.ticks.iter().all(|t| t.0.fract() == 0.0), "{s:?}");
    }

    #[test]
    fn axes_from_zero_and_capped() {
        let s = Scale::new(&Axis::linear("").from_zero().at_most(100.0), [40.0, 97.0], 5);
        assert_eq!((s.lo, s.hi), (0.0, 100.0));
        let s = Scale::new(&Axis::linear("").from_zero(), [0.3, 0.4], 5);
        assert_eq!(s.lo, 0.0);
        assert!(s.hi >= 0.4);
        // Ticks labelled with the decimals the step needs, no more.
        assert!(s.ticks.iter().all(|t| t.1.len() <= 4), "{s:?}");
    }

    #[test]
    fn log_only_when_the_values_span_decades() {
        assert!(Axis::linear("").log_when_wide([0.0, 2.0, 100.0]).log);
        let a = Axis::linear("").log_when_wide([300.0, 1200.0]);
        assert!(!a.log && a.from_zero);
        // A narrow log range gets denser ticks than its decades.
        assert!(Scale::new(&Axis::log(""), [300.0, 1200.0], 6).ticks.len() >= 3);
    }

    #[test]
    fn log_axes_keep_zeros_on_a_tick_of_their_own() {
        let s = Scale::new(&Axis::log(""), [0.0, 0.5, 40.0], 6);
        let z = s.zero.expect("a zero tick");
        assert_eq!(s.to(0.0), Some(z));
        assert!(z < 0.5f64.log10() && z > s.lo);
        assert_eq!(s.label(z), "0");
        assert_eq!(s.ticks[0].1, "0");
        assert!(s.ticks.iter().any(|t| t.1 == "10"), "{s:?}");
        // Without zeros no such tick.
        let s = Scale::new(&Axis::log(""), [0.5, 40.0], 6);
        assert!(s.zero.is_none() && s.ticks.iter().all(|t| t.1 != "0"));
        // All zero: a linear axis.
        assert!(!Scale::new(&Axis::log(""), [0.0, 0.0], 6).log);
        // A narrow range still gets two ticks.
        assert!(Scale::new(&Axis::log(""), [5.0, 5.1], 6).ticks.len() >= 2);
    }

    #[test]
    fn every_marker_is_distinct_and_closed_enough_to_fill() {
        for (i, a) in MARKERS.iter().enumerate() {
            assert!(a.outline(4.0).len() >= 3);
            assert!(MARKERS[i + 1..].iter().all(|b| b != a));
            assert_ne!(*a, PAPER_MARKER);
        }
    }

    #[test]
    fn titles_wrap_to_the_width() {
        let l = wrap("a long title that will not fit in a narrow panel\nsecond", PANEL_TITLE, 150.0);
        assert!(l.len() > 2 && l.last().unwrap() == "second");
        assert!(l.iter().all(|s| text_width(s, PANEL_TITLE) <= 150.0 || !s.contains(' ')));
    }
}
