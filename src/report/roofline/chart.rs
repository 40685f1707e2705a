//! The roofline chart: attainable GFLOP/s against arithmetic intensity (FLOP per byte), both
//! axes logarithmic. Ceilings are flat lines, roofs slanted ones (GB/s × FLOP/byte = GFLOP/s,
//! a 45° line on log–log axes), the sweep's points squares, ridge points circles and the
//! user's kernels diamonds. Several runs share one chart: the first run's lines are drawn
//! bolder, the others' thinner and their labels start with the run's name.
//!
//! The picture is built in order: the frame (title, grid with log ticks, axis titles), then each
//! run's lines clipped to the plot, then the labels and the legend below the plot.

use std::fmt::Write;

use crate::report::cells::escape;
use crate::report::charts::PALETTE;
use crate::result::roofline::{LEVELS, Model, TOLERANCE, level_rank, percent};
use crate::units::{format_size_approx, format_value};

/// The picture's width, and the plot's edges inside it, in pixels.
const W: f64 = 1000.0;
const LEFT: f64 = 90.0;
const RIGHT: f64 = 670.0;
const TOP: f64 = 50.0;
const BOTTOM: f64 = 560.0;

/// A log10 axis from `lo` to `hi` onto pixels `a` to `b`.
struct LogScale {
    lo: f64,
    hi: f64,
    a: f64,
    b: f64,
}

impl LogScale {
    /// An axis a little wider than `lo`..`hi`, at least one decade long.
    fn new(lo: f64, hi: f64, a: f64, b: f64) -> LogScale {
        let (lo, hi) = (lo / 1.6, (hi * 1.6).max(lo * 10.0));
        LogScale { lo, hi, a, b }
    }

    fn map(&self, v: f64) -> f64 {
        let t = (v.log10() - self.lo.log10()) / (self.hi.log10() - self.lo.log10());
        self.a + t * (self.b - self.a)
    }

    /// The powers of ten on the axis.
    fn ticks(&self) -> Vec<f64> {
        let (lo, hi) = (
            self.lo.log10().ceil() as i32,
            self.hi.log10().floor() as i32,
        );
        (lo..=hi).map(|e| 10f64.powi(e)).collect()
    }
}

/// A tick's label: "100", "0.01".
fn tick_text(v: f64) -> String {
    if v >= 1.0 {
        format!("{v:.0}")
    } else {
        let s = format!("{v:.6}");
        s.trim_end_matches('0').to_string()
    }
}

/// Dash patterns of the traffic kinds: read solid, triad dashed, copy dotted.
fn traffic_dash(traffic: &str) -> &'static str {
    match traffic {
        "read" => "",
        "triad" => r#" stroke-dasharray="8 4""#,
        _ => r#" stroke-dasharray="2 3""#,
    }
}

/// `v` within `lo..=hi`; unlike `f64::clamp`, a NaN (from a hand-edited document) lands on
/// `lo` rather than passing through.
fn clip(v: f64, lo: f64, hi: f64) -> f64 {
    v.max(lo).min(hi)
}

/// Labels placed top-down at `y` with at least `gap` pixels between them.
fn spread(mut ys: Vec<(usize, f64)>, gap: f64, lo: f64, hi: f64) -> Vec<(usize, f64)> {
    ys.sort_by(|a, b| a.1.total_cmp(&b.1));
    let mut last = f64::NEG_INFINITY;
    for (_, y) in ys.iter_mut() {
        *y = y.max(last + gap).max(lo);
        last = *y;
    }
    // Pushed past the bottom: shift the tail back up.
    let mut next = f64::INFINITY;
    for (_, y) in ys.iter_mut().rev() {
        *y = y.min(next - gap).min(hi);
        next = *y;
    }
    ys
}

/// The plot's axes, fitted to everything drawn, and the picture's height.
struct PlotFrame {
    x: LogScale,
    y: LogScale,
    height: f64,
}

impl PlotFrame {
    /// Axes that hold every run's drawn ceilings, roofs (from 1/8 FLOP/byte), sweep points and
    /// user points, with room for the legend under the plot.
    fn fit(models: &[(String, &Model)]) -> PlotFrame {
        let mut xs: Vec<f64> = vec![1.0 / 8.0, 128.0];
        let mut ys: Vec<f64> = Vec::new();
        for (_, m) in models {
            xs.extend(m.sweep.iter().map(|p| p.intensity));
            xs.extend(m.points.iter().map(|p| p.intensity));
            ys.extend(m.drawn_ceilings().map(|c| c.gflops));
            ys.extend(m.sweep.iter().map(|p| p.gflops));
            ys.extend(m.points.iter().map(|p| p.gflops));
            ys.extend(m.drawn_roofs().map(|r| r.gbps / 8.0));
        }
        let ok = |v: &f64| v.is_finite() && *v > 0.0;
        let x_lo = xs.iter().copied().filter(ok).fold(f64::INFINITY, f64::min);
        let x_hi = xs.iter().copied().filter(ok).fold(0.0, f64::max);
        let y_lo = ys.iter().copied().filter(ok).fold(f64::INFINITY, f64::min);
        let y_hi = ys.iter().copied().filter(ok).fold(0.0, f64::max);
        let (y_lo, y_hi) = if y_hi > 0.0 {
            (y_lo, y_hi * 1.5)
        } else {
            (1.0, 10.0)
        };
        // The roofs' legend (a row per level and run), then the notes.
        let legend_rows = models.len() * (LEVELS.len() + 1) + 3;
        PlotFrame {
            x: LogScale::new(x_lo, x_hi, LEFT, RIGHT),
            y: LogScale::new(y_lo, y_hi, BOTTOM, TOP),
            height: BOTTOM + 70.0 + 17.0 * legend_rows as f64,
        }
    }
}

/// How one run's lines are drawn.
struct Run<'a> {
    model: &'a Model,
    /// Its place among the runs: the legend has a row per run and level.
    index: usize,
    /// "run 3 (host): " before its labels when several runs share the chart.
    prefix: String,
    width: f64,
    opacity: f64,
}

impl Run<'_> {
    fn of<'a>(index: usize, name: &str, model: &'a Model, runs: usize) -> Run<'a> {
        Run {
            model,
            index,
            prefix: if runs > 1 {
                format!("{name}: ")
            } else {
                String::new()
            },
            width: if index == 0 { 2.0 } else { 1.2 },
            opacity: if index == 0 { 1.0 } else { 0.75 },
        }
    }
}

/// A roof's entry in the legend.
struct RoofLabel {
    text: String,
    color: &'static str,
    traffic: String,
    /// Run and level: the legend's row.
    row: usize,
}

/// The labels gathered while drawing the lines, placed after the plot.
#[derive(Default)]
struct Labels {
    /// A ceiling's label, colour and height, right of the plot.
    ceilings: Vec<(String, &'static str, f64)>,
    roofs: Vec<RoofLabel>,
}

/// The roofline chart of one or several runs (`report A B` overlays them; the n-th run's lines
/// are drawn thinner and its labels prefixed with its name).
pub(crate) fn svg(models: &[(String, &Model)]) -> String {
    let frame = PlotFrame::fit(models);
    let mut out = String::new();
    open(&mut out, models, frame.height);
    grid(&mut out, &frame);
    // Lines are clipped to the plot; labels are not.
    let _ = write!(
        out,
        r#"<defs><clipPath id="roofline-plot"><rect x="{LEFT}" y="{TOP}" width="{w}" height="{h}"/></clipPath></defs><g clip-path="url(#roofline-plot)">"#,
        w = RIGHT - LEFT,
        h = BOTTOM - TOP
    );
    let mut labels = Labels::default();
    for (index, (name, m)) in models.iter().enumerate() {
        let run = Run::of(index, name, m, models.len());
        ceilings(&mut out, &frame, &run, &mut labels);
        roofs(&mut out, &frame, &run, &mut labels);
        ridge_markers(&mut out, &frame, m);
        sweep_points(&mut out, &frame, &run);
        user_points(&mut out, &frame, &run);
    }
    out.push_str("</g>");
    ceiling_labels(&mut out, &labels);
    let roof_rows = roof_legend(&mut out, &labels);
    notes(&mut out, models, roof_rows);
    out.push_str("</svg>");
    out
}

/// The `<svg>` element, a white background and the title.
fn open(out: &mut String, models: &[(String, &Model)], height: f64) {
    let title = match models {
        [(name, m)] => format!("Roofline of {name} ({} threads)", m.threads),
        _ => format!(
            "Rooflines of {}",
            models
                .iter()
                .map(|(n, m)| format!("{n} ({} threads)", m.threads))
                .collect::<Vec<_>>()
                .join(" and ")
        ),
    };
    let _ = write!(
        out,
        r#"<svg class="chart roofline" data-kind="roofline" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {W} {height}" width="{W}" height="{height}" role="img" aria-label="{t}" font-family="sans-serif" font-size="12"><title>{t}</title><rect width="{W}" height="{height}" fill="white"/><text x="{cx}" y="26" text-anchor="middle" font-size="16" font-weight="600">{t}</text>"#,
        t = escape(&title),
        cx = (LEFT + RIGHT) / 2.0
    );
}

/// A grid line and label at each power of ten of both axes, the plot's border and the axes'
/// titles.
fn grid(out: &mut String, frame: &PlotFrame) {
    for t in frame.x.ticks() {
        let px = frame.x.map(t);
        let _ = write!(
            out,
            r##"<line x1="{px:.1}" y1="{TOP}" x2="{px:.1}" y2="{BOTTOM}" stroke="#e6e6e6"/><text x="{px:.1}" y="{ty}" text-anchor="middle" fill="#444">{l}</text>"##,
            ty = BOTTOM + 16.0,
            l = tick_text(t)
        );
    }
    for t in frame.y.ticks() {
        let py = frame.y.map(t);
        let _ = write!(
            out,
            r##"<line x1="{LEFT}" y1="{py:.1}" x2="{RIGHT}" y2="{py:.1}" stroke="#e6e6e6"/><text x="{tx}" y="{ty:.1}" text-anchor="end" fill="#444">{l}</text>"##,
            tx = LEFT - 6.0,
            ty = py + 4.0,
            l = tick_text(t)
        );
    }
    let _ = write!(
        out,
        r##"<rect x="{LEFT}" y="{TOP}" width="{w}" height="{h}" fill="none" stroke="#888"/><text x="{cx}" y="{xy}" text-anchor="middle" font-size="13">arithmetic intensity (FLOP/byte, log scale)</text><text transform="translate(22 {cy}) rotate(-90)" text-anchor="middle" font-size="13">attainable GFLOP/s (10^9 FLOP/s, log scale)</text>"##,
        w = RIGHT - LEFT,
        h = BOTTOM - TOP,
        cx = (LEFT + RIGHT) / 2.0,
        xy = BOTTOM + 36.0,
        cy = (TOP + BOTTOM) / 2.0
    );
}

/// The run's ceilings: each from where the fastest roof meets it to the right edge, the top
/// one solid, the others dashed; labelled right of the plot.
fn ceilings(out: &mut String, frame: &PlotFrame, run: &Run, labels: &mut Labels) {
    let (x, y, m) = (&frame.x, &frame.y, run.model);
    let fastest = m.drawn_roofs().map(|r| r.gbps).fold(0.0, f64::max);
    let top_name = m.top_ceiling().map(|c| c.name.clone());
    let color = "#333";
    for c in m.drawn_ceilings() {
        let from = if fastest > 0.0 {
            c.gflops / fastest
        } else {
            x.lo
        };
        let (x1, x2, py) = (clip(x.map(from), LEFT, RIGHT), RIGHT, y.map(c.gflops));
        let dash = if Some(&c.name) == top_name.as_ref() {
            ""
        } else {
            r#" stroke-dasharray="6 3""#
        };
        let label = format!(
            "{}{} {} GFLOP/s{}",
            run.prefix,
            c.name,
            format_value(c.gflops),
            c.peak_gflops
                .map(|p| format!(" (peak {})", format_value(p)))
                .unwrap_or_default()
        );
        let _ = write!(
            out,
            r#"<g class="ceiling" data-name="{n}" data-gflops="{v}"><line x1="{x1:.1}" y1="{py:.1}" x2="{x2:.1}" y2="{py:.1}" stroke="{color}" stroke-width="{sw}" opacity="{o}"{dash}/></g>"#,
            n = escape(&c.name),
            v = c.gflops,
            sw = run.width * 0.75,
            o = run.opacity
        );
        labels.ceilings.push((label, color, py));
    }
}

/// The run's roofs: each from the left edge to where it meets the top ceiling, coloured by
/// level and dashed by traffic; labelled in the legend under the plot.
fn roofs(out: &mut String, frame: &PlotFrame, run: &Run, labels: &mut Labels) {
    let (x, y, m) = (&frame.x, &frame.y, run.model);
    let top = m.top_ceiling().map(|c| c.gflops);
    for r in m.drawn_roofs() {
        let color = PALETTE[level_rank(&r.level) % PALETTE.len()];
        let end = top.map_or(x.hi, |t| t / r.gbps).min(x.hi);
        let (px1, py1) = (x.map(x.lo), y.map(r.gbps * x.lo));
        let (px2, py2) = (x.map(end), y.map(r.gbps * end));
        let _ = write!(
            out,
            r#"<g class="roof" data-name="{n}" data-gbps="{v}"><line x1="{px1:.1}" y1="{py1:.1}" x2="{px2:.1}" y2="{py2:.1}" stroke="{color}" stroke-width="{w}" opacity="{o}"{dash}/></g>"#,
            n = escape(&r.name()),
            v = r.gbps,
            w = run.width,
            o = run.opacity,
            dash = traffic_dash(&r.traffic)
        );
        labels.roofs.push(RoofLabel {
            text: format!(
                "{}{} {} GB/s ({} set)",
                run.prefix,
                r.name(),
                format_value(r.gbps),
                format_size_approx(r.working_set_bytes)
            ),
            color,
            traffic: r.traffic.clone(),
            row: run.index * LEVELS.len() + level_rank(&r.level),
        });
    }
}

/// A circle at each ridge point of the top ceiling.
fn ridge_markers(out: &mut String, frame: &PlotFrame, m: &Model) {
    let Some(top) = m.top_ceiling() else {
        return;
    };
    for ridge in m.ridges_with(top) {
        let (px, py) = (frame.x.map(ridge.intensity), frame.y.map(ridge.gflops));
        let _ = write!(
            out,
            r##"<g class="ridge" data-roof="{r}" data-intensity="{i}"><circle cx="{px:.1}" cy="{py:.1}" r="4" fill="white" stroke="#000" stroke-width="1.5"/><title>ridge {r} × {c}: {iv} FLOP/B</title></g>"##,
            r = escape(&ridge.roof),
            c = escape(&ridge.ceiling),
            i = ridge.intensity,
            iv = format_value(ridge.intensity)
        );
    }
}

/// The sweep: per level, a line through its points by intensity and a square at each.
fn sweep_points(out: &mut String, frame: &PlotFrame, run: &Run) {
    let (x, y) = (&frame.x, &frame.y);
    for level in LEVELS {
        let points = run.model.sweep_line(level);
        if points.is_empty() {
            continue;
        }
        let color = PALETTE[level_rank(level) % PALETTE.len()];
        let path: Vec<String> = points
            .iter()
            .map(|p| format!("{:.1},{:.1}", x.map(p.intensity), y.map(p.gflops)))
            .collect();
        let _ = write!(
            out,
            r#"<g class="sweep" data-level="{level}" data-points="{n}"><polyline points="{pts}" fill="none" stroke="{color}" stroke-width="1" opacity="0.6"/>"#,
            n = points.len(),
            pts = path.join(" ")
        );
        for p in &points {
            let _ = write!(
                out,
                r#"<rect x="{a:.1}" y="{b:.1}" width="6" height="6" fill="{color}" opacity="{o}"><title>{level} sweep: {f} FLOP/element, {i} FLOP/B, {g} GFLOP/s</title></rect>"#,
                a = x.map(p.intensity) - 3.0,
                b = y.map(p.gflops) - 3.0,
                o = run.opacity,
                f = p.flop_per_element,
                i = format_value(p.intensity),
                g = format_value(p.gflops)
            );
        }
        out.push_str("</g>");
    }
}

/// A diamond at each of the user's points, labelled with what bounds it.
fn user_points(out: &mut String, frame: &PlotFrame, run: &Run) {
    for p in &run.model.points {
        let (px, py) = (frame.x.map(p.intensity), frame.y.map(p.gflops));
        let _ = write!(
            out,
            r##"<g class="point" data-name="{n}"><path d="M{px:.1} {a:.1}L{b:.1} {py:.1}L{px:.1} {c:.1}L{d:.1} {py:.1}Z" fill="#000"/><text x="{tx:.1}" y="{ty:.1}" font-size="11">{l}</text></g>"##,
            n = escape(&p.name),
            a = py - 6.0,
            b = px + 6.0,
            c = py + 6.0,
            d = px - 6.0,
            tx = px + 8.0,
            ty = py - 6.0,
            l = escape(&format!(
                "{}{} {} GFLOP/s: {} of the {}",
                run.prefix,
                p.name,
                format_value(p.gflops),
                percent(p.fraction),
                p.bound_by
            ))
        );
    }
}

/// The ceilings' labels right of the plot, each at its line's height, moved apart where they
/// would overlap.
fn ceiling_labels(out: &mut String, labels: &Labels) {
    let placed = spread(
        labels
            .ceilings
            .iter()
            .enumerate()
            .map(|(i, l)| (i, l.2 + 4.0))
            .collect(),
        13.0,
        TOP,
        BOTTOM + 40.0,
    );
    for (i, py) in placed {
        let (label, color, _) = &labels.ceilings[i];
        let _ = write!(
            out,
            r#"<text class="ceiling-label" x="{tx}" y="{py:.1}" fill="{color}">{l}</text>"#,
            tx = RIGHT + 6.0,
            l = escape(label)
        );
    }
}

/// The roofs' legend under the plot: a row per level (and run), a column per traffic kind, each
/// entry a sample of the line and its label. Returns the number of rows.
fn roof_legend(out: &mut String, labels: &Labels) -> usize {
    let mut rows: Vec<usize> = labels.roofs.iter().map(|l| l.row).collect();
    rows.sort_unstable();
    rows.dedup();
    for label in &labels.roofs {
        let r = rows.iter().position(|x| *x == label.row).unwrap_or(0);
        let c = ["read", "triad", "copy"]
            .iter()
            .position(|t| *t == label.traffic)
            .unwrap_or(2);
        let (lx, ly) = (LEFT + 300.0 * c as f64, BOTTOM + 62.0 + 17.0 * r as f64);
        let _ = write!(
            out,
            r#"<line x1="{lx}" y1="{a:.1}" x2="{b}" y2="{a:.1}" stroke="{color}" stroke-width="2"{dash}/><text class="roof-label" x="{tx}" y="{ly:.1}" fill="{color}">{l}</text>"#,
            a = ly - 4.0,
            b = lx + 28.0,
            tx = lx + 34.0,
            color = label.color,
            dash = traffic_dash(&label.traffic),
            l = escape(&label.text)
        );
    }
    rows.len()
}

/// Under the legend: what the lines and marks mean, then each run's self-check in one line.
fn notes(out: &mut String, models: &[(String, &Model)], roof_rows: usize) {
    let mut ly = BOTTOM + 66.0 + 17.0 * roof_rows as f64;
    let legend = [
        "flat lines: compute ceilings (solid: the top f64 one); slanted: bandwidth roofs, \
         colour = level, solid = read, dashed = triad, dotted = copy (application bytes)",
        "squares: the intensity sweep (read-only FMA chains) at each level's working set; \
         circles: ridge points with the top ceiling; diamonds: your --point kernels",
    ];
    for line in legend {
        let _ = write!(
            out,
            r##"<text x="{LEFT}" y="{ly:.1}" font-size="11" fill="#555">{}</text>"##,
            escape(line)
        );
        ly += 16.0;
    }
    for (name, m) in models {
        let (good, all) = m.checks_agreeing();
        let _ = write!(
            out,
            r##"<text x="{LEFT}" y="{ly:.1}" font-size="11" fill="#555">{}</text>"##,
            escape(&format!(
                "{name}: self-check {good} of {all} sweep plateaus within ±{:.0} % of their roof or ceiling; {} warning(s)",
                TOLERANCE * 100.0,
                m.warnings.len()
            ))
        );
        ly += 16.0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::result::roofline::example;

    #[test]
    fn the_chart_has_every_ceiling_and_roof_labelled() {
        let m = example();
        let svg = svg(&[("run 1".into(), &m)]);
        assert_eq!(svg.matches("class=\"ceiling\"").count(), 1);
        assert_eq!(svg.matches("class=\"roof\"").count(), 3);
        assert!(svg.contains("f64 avx2 fma 100 GFLOP/s (peak 110)"));
        assert!(svg.contains("DRAM triad 24.0 GB/s"));
        assert!(svg.contains("class=\"point\" data-name=\"dense\""));
    }
}
