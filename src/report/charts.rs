//! Inline SVG charts, drawn in Rust: no script, no network, readable when printed.
//!
//! Two kinds: a line chart (x and y axes, each linear or logarithmic, with ticks, units, a
//! legend and optional vertical markers such as cache sizes) and a horizontal bar chart for
//! efficiencies. Every data point is also drawn as a circle, so a line of one point shows.

use std::fmt::Write;

use crate::units::{format_size_approx, format_value};

/// How an axis maps values.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scale {
    Linear,
    /// Base-2 logarithmic, for sizes in bytes (ticks at powers of two).
    Log2,
    /// Base-10 logarithmic, for values spanning decades.
    Log10,
}

/// How tick values are written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ticks {
    Number,
    Bytes,
}

/// One line of a chart.
#[derive(Clone, Debug)]
pub struct Series {
    pub name: String,
    pub points: Vec<(f64, f64)>,
}

/// A vertical line at `x` with a label (e.g. a cache size).
#[derive(Clone, Debug)]
pub struct Marker {
    pub x: f64,
    pub label: String,
}

#[derive(Clone, Debug)]
pub struct LineChart {
    pub title: String,
    pub x_label: String,
    pub y_label: String,
    pub x_scale: Scale,
    pub y_scale: Scale,
    pub x_ticks: Ticks,
    /// Start the y axis at zero (linear scale only).
    pub y_from_zero: bool,
    pub series: Vec<Series>,
    pub markers: Vec<Marker>,
}

const PALETTE: [&str; 8] = [
    "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf",
];
const WIDTH: f64 = 760.0;
const PLOT_LEFT: f64 = 80.0;
const PLOT_RIGHT: f64 = 720.0;
const PLOT_TOP: f64 = 40.0;
const PLOT_BOTTOM: f64 = 300.0;
const LEGEND_LINE: f64 = 18.0;

/// Escapes text for HTML and SVG content and attribute values.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            _ => out.push(c),
        }
    }
    out
}

struct Axis {
    scale: Scale,
    lo: f64,
    hi: f64,
    from: f64,
    to: f64,
}

impl Axis {
    fn new(
        scale: Scale,
        values: impl Iterator<Item = f64>,
        from_zero: bool,
        px: (f64, f64),
    ) -> Axis {
        let (mut lo, mut hi) = values.fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), v| {
            (lo.min(v), hi.max(v))
        });
        if !lo.is_finite() {
            (lo, hi) = (1.0, 2.0);
        }
        match scale {
            Scale::Linear => {
                if from_zero && lo > 0.0 {
                    lo = 0.0;
                }
                if hi <= lo {
                    let pad = if lo == 0.0 { 1.0 } else { lo.abs() * 0.1 };
                    (lo, hi) = (lo - pad, hi + pad);
                    if from_zero && lo < 0.0 && hi > 0.0 {
                        lo = 0.0;
                    }
                } else {
                    let step = nice_step(hi - lo);
                    lo = (lo / step).floor() * step;
                    hi = (hi / step).ceil() * step;
                }
            }
            Scale::Log2 | Scale::Log10 => {
                let base = if scale == Scale::Log2 { 2f64 } else { 10f64 };
                lo = base.powf(lo.log(base).floor());
                hi = base.powf(hi.log(base).ceil());
                if hi <= lo {
                    hi = lo * base;
                }
            }
        }
        Axis {
            scale,
            lo,
            hi,
            from: px.0,
            to: px.1,
        }
    }

    fn map(&self, v: f64) -> f64 {
        let f = match self.scale {
            Scale::Linear => (v - self.lo) / (self.hi - self.lo),
            Scale::Log2 | Scale::Log10 => (v.ln() - self.lo.ln()) / (self.hi.ln() - self.lo.ln()),
        };
        self.from + f * (self.to - self.from)
    }

    fn ticks(&self) -> Vec<f64> {
        match self.scale {
            Scale::Linear => {
                let step = nice_step(self.hi - self.lo);
                let mut ticks = Vec::new();
                let mut t = (self.lo / step).ceil() * step;
                while t <= self.hi + step * 1e-9 {
                    ticks.push(if t.abs() < step * 1e-9 { 0.0 } else { t });
                    t += step;
                }
                ticks
            }
            Scale::Log2 | Scale::Log10 => {
                let base = if self.scale == Scale::Log2 {
                    2f64
                } else {
                    10f64
                };
                let first = self.lo.log(base).round() as i32;
                let last = self.hi.log(base).round() as i32;
                let every = ((last - first) / 10 + 1).max(1);
                (first..=last)
                    .filter(|e| (e - first) % every == 0)
                    .map(|e| base.powi(e))
                    .collect()
            }
        }
    }

    fn contains(&self, v: f64) -> bool {
        v.is_finite() && (self.scale == Scale::Linear || v > 0.0)
    }
}

/// A step of 1, 2 or 5 × 10^k giving about five intervals over `span`.
fn nice_step(span: f64) -> f64 {
    let raw = span / 5.0;
    let magnitude = 10f64.powf(raw.log10().floor());
    [1.0, 2.0, 5.0, 10.0]
        .into_iter()
        .map(|m| m * magnitude)
        .find(|s| *s >= raw)
        .unwrap_or(10.0 * magnitude)
}

fn tick_label(value: f64, ticks: Ticks) -> String {
    match ticks {
        Ticks::Bytes => format_size_approx(value.round() as u64),
        Ticks::Number if value.fract() == 0.0 && value.abs() < 1e15 => format!("{value:.0}"),
        Ticks::Number => format_value(value),
    }
}

fn svg_open(out: &mut String, height: f64, title: &str, kind: &str) {
    let _ = write!(
        out,
        r#"<svg class="chart" data-kind="{kind}" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {height}" width="{WIDTH}" height="{height}" role="img" aria-label="{t}"><title>{t}</title><text x="{x}" y="22" text-anchor="middle" class="title">{t}</text>"#,
        t = escape(title),
        x = WIDTH / 2.0,
    );
}

/// The chart as an `<svg>` element.
pub fn line_chart(chart: &LineChart) -> String {
    let x = Axis::new(
        chart.x_scale,
        chart
            .series
            .iter()
            .flat_map(|s| s.points.iter().map(|p| p.0))
            .chain(chart.markers.iter().map(|m| m.x))
            .filter(|v| v.is_finite() && (chart.x_scale == Scale::Linear || *v > 0.0)),
        false,
        (PLOT_LEFT, PLOT_RIGHT),
    );
    let y = Axis::new(
        chart.y_scale,
        chart
            .series
            .iter()
            .flat_map(|s| s.points.iter().map(|p| p.1))
            .filter(|v| v.is_finite() && (chart.y_scale == Scale::Linear || *v > 0.0)),
        chart.y_from_zero,
        (PLOT_BOTTOM, PLOT_TOP),
    );
    let height = PLOT_BOTTOM + 50.0 + LEGEND_LINE * chart.series.len() as f64 + 10.0;
    let mut out = String::new();
    svg_open(&mut out, height, &chart.title, "line");
    // Grid and ticks.
    for t in x.ticks() {
        let px = x.map(t);
        let _ = write!(
            out,
            r##"<line x1="{px:.1}" y1="{PLOT_TOP}" x2="{px:.1}" y2="{PLOT_BOTTOM}" stroke="#e4e4e4"/><text x="{px:.1}" y="{ty}" text-anchor="middle" class="tick">{l}</text>"##,
            ty = PLOT_BOTTOM + 16.0,
            l = escape(&tick_label(t, chart.x_ticks)),
        );
    }
    for t in y.ticks() {
        let py = y.map(t);
        let _ = write!(
            out,
            r##"<line x1="{PLOT_LEFT}" y1="{py:.1}" x2="{PLOT_RIGHT}" y2="{py:.1}" stroke="#e4e4e4"/><text x="{tx}" y="{ty:.1}" text-anchor="end" class="tick">{l}</text>"##,
            tx = PLOT_LEFT - 6.0,
            ty = py + 4.0,
            l = escape(&tick_label(t, Ticks::Number)),
        );
    }
    let scale_note = |s: Scale| match s {
        Scale::Linear => "",
        Scale::Log2 => " (log₂ scale)",
        Scale::Log10 => " (log scale)",
    };
    let _ = write!(
        out,
        r##"<rect x="{PLOT_LEFT}" y="{PLOT_TOP}" width="{w}" height="{h}" fill="none" stroke="#444"/><text x="{cx}" y="{xl}" text-anchor="middle" class="axis">{xt}</text><text x="16" y="{cy}" text-anchor="middle" transform="rotate(-90 16 {cy})" class="axis">{yt}</text>"##,
        w = PLOT_RIGHT - PLOT_LEFT,
        h = PLOT_BOTTOM - PLOT_TOP,
        cx = (PLOT_LEFT + PLOT_RIGHT) / 2.0,
        xl = PLOT_BOTTOM + 36.0,
        cy = (PLOT_TOP + PLOT_BOTTOM) / 2.0,
        xt = escape(&format!("{}{}", chart.x_label, scale_note(chart.x_scale))),
        yt = escape(&format!("{}{}", chart.y_label, scale_note(chart.y_scale))),
    );
    for (i, marker) in chart.markers.iter().enumerate() {
        if !x.contains(marker.x) {
            continue;
        }
        let px = x.map(marker.x);
        let _ = write!(
            out,
            r##"<line class="marker" x1="{px:.1}" y1="{PLOT_TOP}" x2="{px:.1}" y2="{PLOT_BOTTOM}" stroke="#888" stroke-dasharray="4 3"/><text x="{tx:.1}" y="{ty}" class="marker-label">{l}</text>"##,
            tx = px + 3.0,
            ty = PLOT_TOP + 12.0 + 12.0 * (i % 4) as f64,
            l = escape(&marker.label),
        );
    }
    for (i, series) in chart.series.iter().enumerate() {
        let color = PALETTE[i % PALETTE.len()];
        let points: Vec<(f64, f64)> = series
            .points
            .iter()
            .filter(|(px, py)| x.contains(*px) && y.contains(*py))
            .map(|(px, py)| (x.map(*px), y.map(*py)))
            .collect();
        if points.len() > 1 {
            let list: Vec<String> = points
                .iter()
                .map(|(a, b)| format!("{a:.1},{b:.1}"))
                .collect();
            let _ = write!(
                out,
                r#"<polyline class="series" points="{}" fill="none" stroke="{color}" stroke-width="2"/>"#,
                list.join(" ")
            );
        }
        for (a, b) in &points {
            let _ = write!(
                out,
                r#"<circle class="point" cx="{a:.1}" cy="{b:.1}" r="3" fill="{color}"/>"#
            );
        }
        let ly = PLOT_BOTTOM + 56.0 + LEGEND_LINE * i as f64;
        let _ = write!(
            out,
            r#"<line x1="{PLOT_LEFT}" y1="{l:.1}" x2="{x2}" y2="{l:.1}" stroke="{color}" stroke-width="3"/><text x="{tx}" y="{ly:.1}" class="legend">{name}</text>"#,
            l = ly - 4.0,
            x2 = PLOT_LEFT + 24.0,
            tx = PLOT_LEFT + 30.0,
            name = escape(&series.name),
        );
    }
    out.push_str("</svg>");
    out
}

/// Horizontal bars of fractions (e.g. efficiencies), drawn as percentages.
pub fn bar_chart(title: &str, x_label: &str, bars: &[(String, f64)]) -> String {
    const LABEL_RIGHT: f64 = 330.0;
    const BAR: f64 = 20.0;
    let top = 40.0;
    let bottom = top + BAR * bars.len() as f64;
    let max = bars.iter().map(|b| b.1).fold(1.0f64, f64::max);
    let x = Axis::new(
        Scale::Linear,
        [0.0, max].into_iter(),
        true,
        (LABEL_RIGHT, PLOT_RIGHT),
    );
    let mut out = String::new();
    svg_open(&mut out, bottom + 50.0, title, "bar");
    for t in x.ticks() {
        let px = x.map(t);
        let _ = write!(
            out,
            r##"<line x1="{px:.1}" y1="{top}" x2="{px:.1}" y2="{bottom}" stroke="#e4e4e4"/><text x="{px:.1}" y="{ty}" text-anchor="middle" class="tick">{l}%</text>"##,
            ty = bottom + 16.0,
            l = format_value(t * 100.0),
        );
    }
    for (i, (label, value)) in bars.iter().enumerate() {
        let y = top + BAR * i as f64;
        let width = (x.map(value.max(0.0)) - LABEL_RIGHT).max(0.5);
        let _ = write!(
            out,
            r##"<text x="{lx}" y="{ty:.1}" text-anchor="end" class="legend">{l}</text><rect class="bar" x="{LABEL_RIGHT}" y="{ry:.1}" width="{width:.1}" height="{h}" fill="{c}"/><text x="{vx:.1}" y="{ty:.1}" class="tick">{v:.1}%</text>"##,
            lx = LABEL_RIGHT - 6.0,
            ty = y + BAR * 0.7,
            l = escape(label),
            ry = y + 2.0,
            h = BAR - 4.0,
            c = PALETTE[0],
            vx = LABEL_RIGHT + width + 4.0,
            v = value * 100.0,
        );
    }
    let px = x.map(1.0);
    let _ = write!(
        out,
        r##"<line x1="{px:.1}" y1="{t}" x2="{px:.1}" y2="{bottom}" stroke="#d62728" stroke-dasharray="4 3"/><text x="{cx}" y="{xl}" text-anchor="middle" class="axis">{xt}</text>"##,
        t = top - 6.0,
        cx = (LABEL_RIGHT + PLOT_RIGHT) / 2.0,
        xl = bottom + 36.0,
        xt = escape(x_label),
    );
    out.push_str("</svg>");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steps_are_one_two_five() {
        assert_eq!(nice_step(10.0), 2.0);
        assert_eq!(nice_step(0.9), 0.2);
        assert_eq!(nice_step(240.0), 50.0);
    }

    #[test]
    fn log_axes_tick_at_powers() {
        let axis = Axis::new(Scale::Log2, [3000.0, 70e6].into_iter(), false, (0.0, 1.0));
        let ticks = axis.ticks();
        assert_eq!(ticks[0], 2048.0);
        assert!(ticks.iter().all(|t| t.log2().fract() == 0.0));
        assert!(*ticks.last().unwrap() >= 70e6);
        assert!((axis.map(2048.0) - 0.0).abs() < 1e-9);
    }

    #[test]
    fn text_is_escaped_and_every_point_drawn() {
        let chart = LineChart {
            title: "a <b> & \"c\"".into(),
            x_label: "threads".into(),
            y_label: "GB/s".into(),
            x_scale: Scale::Linear,
            y_scale: Scale::Linear,
            x_ticks: Ticks::Number,
            y_from_zero: true,
            series: vec![Series {
                name: "<script>".into(),
                points: vec![(1.0, 5.0), (2.0, 9.0), (4.0, 12.0)],
            }],
            markers: Vec::new(),
        };
        let svg = line_chart(&chart);
        assert!(!svg.contains("<script>") && !svg.contains("<b>"));
        assert!(svg.contains("&lt;script&gt;"));
        assert_eq!(svg.matches("<circle").count(), 3);
        assert_eq!(svg.matches("<polyline").count(), 1);
    }
}
