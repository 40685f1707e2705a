//! Inline SVG charts, drawn in Rust: no script, no network, readable when printed.
//!
//! A line chart: x and y axes, each linear or logarithmic, with ticks, units, a legend, optional
//! vertical markers such as cache sizes, labelled horizontal lines such as a peak, and a shaded
//! band such as a spread. Every data point is also drawn as a marker, so a line of one point
//! shows. Sixteen colours and four marker shapes keep sixteen lines apart; a series may be
//! dashed (the standard tool's values beside ours, in the same colour) or dotted (a peak that
//! changes along the x axis).

use std::fmt::Write;

use super::cells::escape;
use crate::units::{format_bitrate, format_size_approx, format_value};

/// How an axis maps values.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Scale {
    Linear,
    /// Base-2 logarithmic, for sizes in bytes (ticks at powers of two).
    Log2,
    /// Base-10 logarithmic, for values spanning decades.
    Log10,
}

/// How tick values are written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Ticks {
    Number,
    /// Whole numbers only (threads, streams, queue depth).
    Count,
    Bytes,
    /// Bits per second with their decimal unit (100 Mbit/s).
    BitRate,
}

/// How a series is stroked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Stroke {
    Solid,
    /// The standard tool's values, beside the solid line of the same colour.
    Dashed,
    /// A theoretical peak that changes along the x axis.
    Dotted,
    /// A further run drawn on the same chart (the n-th pattern).
    Run(usize),
}

/// One line of a chart.
#[derive(Clone, Debug)]
pub(crate) struct Series {
    pub name: String,
    pub points: Vec<(f64, f64)>,
    /// Index into the palette and marker shapes: a companion series (the tool's, the peak)
    /// shares its line's.
    pub style: usize,
    pub stroke: Stroke,
    /// Whether the series has its own legend entry (companions are explained once).
    pub legend: bool,
}

impl Series {
    /// A solid line with its own legend entry.
    pub(crate) fn line(name: String, points: Vec<(f64, f64)>, style: usize) -> Series {
        Series {
            name,
            points,
            style,
            stroke: Stroke::Solid,
            legend: true,
        }
    }
}

/// A labelled horizontal line (e.g. a theoretical peak or a median).
#[derive(Clone, Debug)]
pub(crate) struct HLine {
    pub y: f64,
    pub label: String,
}

/// A vertical line at `x` with a label (e.g. a cache size).
#[derive(Clone, Debug)]
pub(crate) struct Marker {
    pub x: f64,
    pub label: String,
}

#[derive(Clone, Debug)]
pub(crate) struct LineChart {
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
    pub hlines: Vec<HLine>,
    /// A shaded band between two y values, with its label (e.g. the interquartile range).
    pub band: Option<(f64, f64, String)>,
    /// Lines of text under the legend (what dashed and dotted lines mean).
    pub notes: Vec<String>,
}

impl LineChart {
    /// A chart with no markers, horizontal lines, band or notes.
    pub(crate) fn new(
        title: String,
        x_label: String,
        y_label: String,
        series: Vec<Series>,
    ) -> Self {
        LineChart {
            title,
            x_label,
            y_label,
            x_scale: Scale::Linear,
            y_scale: Scale::Linear,
            x_ticks: Ticks::Number,
            y_from_zero: true,
            series,
            markers: Vec::new(),
            hlines: Vec::new(),
            band: None,
            notes: Vec::new(),
        }
    }
}

/// Sixteen colours that stay apart on white (and from each other when printed in grey, with
/// the marker shapes).
pub(crate) const PALETTE: [&str; 16] = [
    "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf",
    "#7f7f7f", "#bcbd22", "#393b79", "#ad494a", "#637939", "#8c6d31", "#7b4173", "#00a087",
];

/// The colour and marker shape (0 circle, 1 square, 2 triangle, 3 diamond) of style `i`: the
/// colour alone tells sixteen apart, the shape changes with it and again past sixteen.
pub(crate) fn style_of(i: usize) -> (&'static str, usize) {
    (PALETTE[i % PALETTE.len()], (i + i / PALETTE.len()) % 4)
}

fn marker_svg(out: &mut String, shape: usize, x: f64, y: f64, color: &str, class: &str) {
    let _ = match shape {
        0 => write!(
            out,
            r#"<circle class="{class}" cx="{x:.1}" cy="{y:.1}" r="3.2" fill="{color}"/>"#
        ),
        1 => write!(
            out,
            r#"<rect class="{class}" x="{a:.1}" y="{b:.1}" width="6" height="6" fill="{color}"/>"#,
            a = x - 3.0,
            b = y - 3.0
        ),
        2 => write!(
            out,
            r#"<path class="{class}" d="M{x:.1} {a:.1}L{b:.1} {c:.1}L{d:.1} {c:.1}Z" fill="{color}"/>"#,
            a = y - 4.0,
            b = x + 4.0,
            c = y + 3.0,
            d = x - 4.0
        ),
        _ => write!(
            out,
            r#"<path class="{class}" d="M{x:.1} {a:.1}L{b:.1} {y:.1}L{x:.1} {c:.1}L{d:.1} {y:.1}Z" fill="{color}"/>"#,
            a = y - 4.5,
            b = x + 4.5,
            c = y + 4.5,
            d = x - 4.5
        ),
    };
}

fn dash(stroke: Stroke) -> &'static str {
    match stroke {
        Stroke::Solid | Stroke::Run(0) => "",
        Stroke::Dashed => r#" stroke-dasharray="7 4""#,
        Stroke::Dotted => r#" stroke-dasharray="2 3""#,
        Stroke::Run(n) => [
            r#" stroke-dasharray="12 3 2 3""#,
            r#" stroke-dasharray="1 2""#,
            r#" stroke-dasharray="12 6""#,
        ][(n - 1) % 3],
    }
}
const WIDTH: f64 = 760.0;
const PLOT_LEFT: f64 = 80.0;
const PLOT_RIGHT: f64 = 720.0;
const PLOT_TOP: f64 = 40.0;
const PLOT_BOTTOM: f64 = 300.0;
const LEGEND_LINE: f64 = 18.0;

struct ChartAxis {
    scale: Scale,
    lo: f64,
    hi: f64,
    from: f64,
    to: f64,
}

impl ChartAxis {
    fn new(
        scale: Scale,
        values: impl Iterator<Item = f64>,
        from_zero: bool,
        px: (f64, f64),
    ) -> ChartAxis {
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
        ChartAxis {
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

    /// At most `MAX_TICKS` ticks, whatever the range: an imported document can hold any finite
    /// values, and a step below the spacing of the floats at the range (values near 1e17 a few
    /// units apart) or a range of 10^±300 once made an endless loop here.
    fn ticks(&self, whole: bool) -> Vec<f64> {
        let mut ticks: Vec<f64> = Vec::new();
        match self.scale {
            Scale::Linear => {
                let mut step = nice_step(self.hi - self.lo);
                if whole {
                    step = step.max(1.0).round();
                }
                if !(step.is_finite() && step > 0.0) {
                    return [self.lo, self.hi]
                        .into_iter()
                        .filter(|v| v.is_finite())
                        .collect();
                }
                let first = (self.lo / step).ceil();
                for i in 0..MAX_TICKS {
                    let t = (first + i as f64) * step;
                    if t.is_nan() || t > self.hi + step * 1e-9 {
                        break;
                    }
                    let t = if t.abs() < step * 1e-9 { 0.0 } else { t };
                    if ticks.last() != Some(&t) {
                        ticks.push(t);
                    }
                }
            }
            Scale::Log2 | Scale::Log10 => {
                let base = if self.scale == Scale::Log2 {
                    2f64
                } else {
                    10f64
                };
                // Exponents of finite positive floats lie within ±1075 (base 2).
                let exponent = |v: f64| v.log(base).round().clamp(-1100.0, 1100.0) as i64;
                let (first, last) = (exponent(self.lo), exponent(self.hi));
                let every = ((last - first) / 10 + 1).max(1);
                let mut e = first;
                while e <= last && ticks.len() < MAX_TICKS {
                    ticks.push(base.powi(e as i32));
                    e += every;
                }
            }
        }
        ticks
    }

    fn contains(&self, v: f64) -> bool {
        v.is_finite() && (self.scale == Scale::Linear || v > 0.0)
    }
}

/// The most ticks an axis draws.
const MAX_TICKS: usize = 50;

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
        Ticks::Count => format!("{value:.0}"),
        Ticks::Number if value.fract() == 0.0 && value.abs() < 1e15 => format!("{value:.0}"),
        // Below 0.001 three decimals would print 0.000: as many decimals as the value needs.
        Ticks::Number if value != 0.0 && value.abs() < 1e-3 => {
            let decimals = (-value.abs().log10()).ceil() as usize + 1;
            let text = format!("{value:.decimals$}");
            text.trim_end_matches('0').to_string()
        }
        Ticks::Number => format_value(value),
        Ticks::BitRate => format_bitrate(value),
    }
}

fn svg_open(out: &mut String, height: f64, title: &str) {
    let _ = write!(
        out,
        r#"<svg class="chart" data-kind="line" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {height}" width="{WIDTH}" height="{height}" role="img" aria-label="{t}"><title>{t}</title><text x="{x}" y="22" text-anchor="middle" class="title">{t}</text>"#,
        t = escape(title),
        x = WIDTH / 2.0,
    );
}

/// The chart as an `<svg>` element. Each series is a `<g class="series">` carrying its name and
/// its number of points (`data-name`, `data-points`), so a test can count what was drawn.
pub(crate) fn line_chart(chart: &LineChart) -> String {
    let x = ChartAxis::new(
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
    let y = ChartAxis::new(
        chart.y_scale,
        chart
            .series
            .iter()
            .flat_map(|s| s.points.iter().map(|p| p.1))
            .chain(chart.hlines.iter().map(|h| h.y))
            .chain(chart.band.iter().flat_map(|b| [b.0, b.1]))
            .filter(|v| v.is_finite() && (chart.y_scale == Scale::Linear || *v > 0.0)),
        chart.y_from_zero,
        (PLOT_BOTTOM, PLOT_TOP),
    );
    let entries: Vec<&Series> = chart.series.iter().filter(|s| s.legend).collect();
    let columns = if entries.len() > 8 { 2 } else { 1 };
    let legend_rows = entries.len().div_ceil(columns) + chart.notes.len();
    let height = PLOT_BOTTOM + 50.0 + LEGEND_LINE * legend_rows as f64 + 10.0;
    let mut out = String::new();
    svg_open(&mut out, height, &chart.title);
    grid(&mut out, &x, &y, chart.x_ticks);
    frame(&mut out, chart);
    marks(&mut out, &x, &y, chart);
    for series in &chart.series {
        series_svg(&mut out, &x, &y, series);
    }
    legend(&mut out, &entries, columns, &chart.notes);
    out.push_str("</svg>");
    out
}

/// The grid lines and tick labels of both axes.
fn grid(out: &mut String, x: &ChartAxis, y: &ChartAxis, x_ticks: Ticks) {
    for t in x.ticks(x_ticks == Ticks::Count) {
        let px = x.map(t);
        let _ = write!(
            out,
            r##"<line x1="{px:.1}" y1="{PLOT_TOP}" x2="{px:.1}" y2="{PLOT_BOTTOM}" stroke="#e4e4e4"/><text x="{px:.1}" y="{ty}" text-anchor="middle" class="tick">{l}</text>"##,
            ty = PLOT_BOTTOM + 16.0,
            l = escape(&tick_label(t, x_ticks)),
        );
    }
    for t in y.ticks(false) {
        let py = y.map(t);
        let _ = write!(
            out,
            r##"<line x1="{PLOT_LEFT}" y1="{py:.1}" x2="{PLOT_RIGHT}" y2="{py:.1}" stroke="#e4e4e4"/><text x="{tx}" y="{ty:.1}" text-anchor="end" class="tick">{l}</text>"##,
            tx = PLOT_LEFT - 6.0,
            ty = py + 4.0,
            l = escape(&tick_label(t, Ticks::Number)),
        );
    }
}

/// An axis label with its scale where the scale is logarithmic: "working set (bytes, log₂
/// scale)".
fn with_scale(label: &str, scale: Scale) -> String {
    let note = match scale {
        Scale::Linear => return label.to_string(),
        Scale::Log2 => ", log₂ scale",
        Scale::Log10 => ", log scale",
    };
    match label.strip_suffix(')') {
        Some(open) => format!("{open}{note})"),
        None => format!("{label} ({})", &note[2..]),
    }
}

/// The plot's frame and the labels of both axes.
fn frame(out: &mut String, chart: &LineChart) {
    let _ = write!(
        out,
        r##"<rect x="{PLOT_LEFT}" y="{PLOT_TOP}" width="{w}" height="{h}" fill="none" stroke="#444"/><text x="{cx}" y="{xl}" text-anchor="middle" class="axis">{xt}</text><text x="16" y="{cy}" text-anchor="middle" transform="rotate(-90 16 {cy})" class="axis">{yt}</text>"##,
        w = PLOT_RIGHT - PLOT_LEFT,
        h = PLOT_BOTTOM - PLOT_TOP,
        cx = (PLOT_LEFT + PLOT_RIGHT) / 2.0,
        xl = PLOT_BOTTOM + 36.0,
        cy = (PLOT_TOP + PLOT_BOTTOM) / 2.0,
        xt = escape(&with_scale(&chart.x_label, chart.x_scale)),
        yt = escape(&with_scale(&chart.y_label, chart.y_scale)),
    );
}

/// What is drawn behind the series: the band, the vertical markers and the horizontal lines,
/// each labelled, those outside an axis left out.
fn marks(out: &mut String, x: &ChartAxis, y: &ChartAxis, chart: &LineChart) {
    if let Some((lo, hi, label)) = &chart.band
        && y.contains(*lo)
        && y.contains(*hi)
    {
        let (top, bottom) = (y.map(*hi), y.map(*lo));
        let _ = write!(
            out,
            r##"<rect class="band" x="{PLOT_LEFT}" y="{top:.1}" width="{w}" height="{h:.1}" fill="#1f77b4" fill-opacity="0.12"/><text x="{tx}" y="{ty:.1}" text-anchor="end" class="marker-label">{l}</text>"##,
            w = PLOT_RIGHT - PLOT_LEFT,
            h = (bottom - top).max(0.5),
            tx = PLOT_RIGHT - 4.0,
            ty = bottom - 3.0,
            l = escape(label),
        );
    }
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
    for hline in &chart.hlines {
        if !y.contains(hline.y) {
            continue;
        }
        let py = y.map(hline.y);
        let _ = write!(
            out,
            r##"<line class="hline" x1="{PLOT_LEFT}" y1="{py:.1}" x2="{PLOT_RIGHT}" y2="{py:.1}" stroke="#333" stroke-width="1.5" stroke-dasharray="2 3"/><text x="{tx}" y="{ty:.1}" class="marker-label">{l}</text>"##,
            tx = PLOT_LEFT + 4.0,
            ty = py - 4.0,
            l = escape(&hline.label),
        );
    }
}

/// One series: its polyline and a marker at each point (none for a dotted peak), the points
/// outside an axis left out.
fn series_svg(out: &mut String, x: &ChartAxis, y: &ChartAxis, series: &Series) {
    let (color, shape) = style_of(series.style);
    let points: Vec<(f64, f64)> = series
        .points
        .iter()
        .filter(|(px, py)| x.contains(*px) && y.contains(*py))
        .map(|(px, py)| (x.map(*px), y.map(*py)))
        .collect();
    let class = match series.stroke {
        Stroke::Dashed => "series reference",
        Stroke::Dotted => "series peak",
        Stroke::Solid | Stroke::Run(_) => "series",
    };
    let _ = write!(
        out,
        r#"<g class="{class}" data-name="{n}" data-points="{c}">"#,
        n = escape(&series.name),
        c = points.len()
    );
    if points.len() > 1 {
        let list: Vec<String> = points
            .iter()
            .map(|(a, b)| format!("{a:.1},{b:.1}"))
            .collect();
        let width = if series.stroke == Stroke::Dotted {
            1.5
        } else {
            2.0
        };
        let _ = write!(
            out,
            r#"<polyline points="{}" fill="none" stroke="{color}" stroke-width="{width}"{}/>"#,
            list.join(" "),
            dash(series.stroke)
        );
    }
    if series.stroke != Stroke::Dotted {
        let class = if series.stroke == Stroke::Dashed {
            "reference-point"
        } else {
            "point"
        };
        for (a, b) in &points {
            marker_svg(out, shape, *a, *b, color, class);
        }
    }
    out.push_str("</g>");
}

/// The legend under the plot, in `columns` columns, then the notes.
fn legend(out: &mut String, entries: &[&Series], columns: usize, notes: &[String]) {
    let rows = entries.len().div_ceil(columns);
    let column_width = (PLOT_RIGHT - PLOT_LEFT) / columns as f64;
    for (i, series) in entries.iter().enumerate() {
        let (color, shape) = style_of(series.style);
        let lx = PLOT_LEFT + column_width * (i / rows) as f64;
        let ly = PLOT_BOTTOM + 56.0 + LEGEND_LINE * (i % rows) as f64;
        let _ = write!(
            out,
            r#"<line x1="{lx}" y1="{l:.1}" x2="{x2}" y2="{l:.1}" stroke="{color}" stroke-width="3"{d}/>"#,
            l = ly - 4.0,
            x2 = lx + 24.0,
            d = dash(series.stroke),
        );
        marker_svg(out, shape, lx + 12.0, ly - 4.0, color, "legend-marker");
        let _ = write!(
            out,
            r#"<text x="{tx}" y="{ly:.1}" class="legend">{name}</text>"#,
            tx = lx + 30.0,
            name = escape(&series.name),
        );
    }
    for (i, note) in notes.iter().enumerate() {
        let _ = write!(
            out,
            r#"<text x="{PLOT_LEFT}" y="{ly:.1}" class="note">{n}</text>"#,
            ly = PLOT_BOTTOM + 56.0 + LEGEND_LINE * (rows + i) as f64,
            n = escape(note),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_ticks_keep_their_digits() {
        assert_eq!(tick_label(1e-4, Ticks::Number), "0.0001");
        assert_eq!(tick_label(2.5e-4, Ticks::Number), "0.00025");
        assert_eq!(tick_label(0.01, Ticks::Number), "0.010");
        assert_eq!(tick_label(100e6, Ticks::BitRate), "100 Mbit/s");
    }

    #[test]
    fn steps_are_one_two_five() {
        assert_eq!(nice_step(10.0), 2.0);
        assert_eq!(nice_step(0.9), 0.2);
        assert_eq!(nice_step(240.0), 50.0);
    }

    #[test]
    fn log_axes_tick_at_powers() {
        let axis = ChartAxis::new(Scale::Log2, [3000.0, 70e6].into_iter(), false, (0.0, 1.0));
        let ticks = axis.ticks(false);
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
            series: vec![Series::line(
                "<script>".into(),
                vec![(1.0, 5.0), (2.0, 9.0), (4.0, 12.0)],
                0,
            )],
            markers: Vec::new(),
            hlines: Vec::new(),
            band: None,
            notes: Vec::new(),
        };
        let svg = line_chart(&chart);
        assert!(!svg.contains("<script>") && !svg.contains("<b>"));
        assert!(svg.contains("&lt;script&gt;"));
        assert_eq!(svg.matches("class=\"point\"").count(), 3);
        assert_eq!(svg.matches("<polyline").count(), 1);
        assert!(svg.contains("data-points=\"3\""));
    }

    #[test]
    fn sixteen_lines_have_sixteen_colours_and_count_axes_whole_ticks() {
        let styles: Vec<(&str, usize)> = (0..16).map(style_of).collect();
        for (i, a) in styles.iter().enumerate() {
            assert!(styles[i + 1..].iter().all(|b| b.0 != a.0), "{i}");
        }
        assert_ne!(style_of(0), style_of(16));
        let axis = ChartAxis::new(Scale::Linear, [1.0, 2.0].into_iter(), false, (0.0, 1.0));
        assert_eq!(axis.ticks(true), vec![1.0, 2.0]);
    }

    #[test]
    fn absurd_ranges_have_a_bounded_number_of_ticks() {
        let px = (0.0, 100.0);
        // A step of 5 below the spacing of floats near 1e17 (16) never moved the tick.
        let near = ChartAxis::new(Scale::Linear, [1e17, 1e17 + 16.0].into_iter(), false, px);
        let ticks = near.ticks(false);
        assert!(!ticks.is_empty() && ticks.len() <= MAX_TICKS, "{ticks:?}");
        let wide = ChartAxis::new(Scale::Linear, [-1e308, 1e308].into_iter(), false, px);
        assert!(wide.ticks(false).len() <= MAX_TICKS);
        for scale in [Scale::Log2, Scale::Log10] {
            let axis = ChartAxis::new(
                scale,
                [f64::MIN_POSITIVE / 1e10, 1e308].into_iter(),
                false,
                px,
            );
            let ticks = axis.ticks(false);
            assert!(!ticks.is_empty() && ticks.len() <= MAX_TICKS, "{ticks:?}");
        }
    }
}
