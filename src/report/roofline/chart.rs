//! The roofline chart: attainable GFLOP/s against arithmetic intensity (FLOP per byte), both
//! axes logarithmic.

use std::fmt::Write;

use crate::report::charts::{PALETTE, escape};
use crate::result::roofline::{
    Ceiling, LEVELS, Model, Roof, SweepPoint, TOLERANCE, level_rank, percent,
};
use crate::units::{format_size_approx, format_value};

const W: f64 = 1000.0;
const LEFT: f64 = 90.0;
const RIGHT: f64 = 670.0;
const TOP: f64 = 50.0;
const BOTTOM: f64 = 560.0;

/// A log10 axis from `lo` to `hi` onto pixels `a` to `b`.
struct Log {
    lo: f64,
    hi: f64,
    a: f64,
    b: f64,
}

impl Log {
    /// An axis a little wider than `lo`..`hi`, at least one decade long.
    fn new(lo: f64, hi: f64, a: f64, b: f64) -> Log {
        let (lo, hi) = (lo / 1.6, (hi * 1.6).max(lo * 10.0));
        Log { lo, hi, a, b }
    }

    fn map(&self, v: f64) -> f64 {
        let t = (v.log10() - self.lo.log10()) / (self.hi.log10() - self.lo.log10());
        self.a + t * (self.b - self.a)
    }

    fn ticks(&self) -> Vec<f64> {
        let (lo, hi) = (
            self.lo.log10().ceil() as i32,
            self.hi.log10().floor() as i32,
        );
        (lo..=hi).map(|e| 10f64.powi(e)).collect()
    }
}

fn tick_text(v: f64) -> String {
    if v >= 1.0 {
        format!("{v:.0}")
    } else {
        let s = format!("{v:.6}");
        s.trim_end_matches('0').to_string()
    }
}

/// Dash patterns of the traffic kinds, and of further runs.
fn traffic_dash(traffic: &str) -> &'static str {
    match traffic {
        "read" => "",
        "triad" => r#" stroke-dasharray="8 4""#,
        _ => r#" stroke-dasharray="2 3""#,
    }
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

/// The roofline chart of one or several runs (`report A B` overlays them; the n-th run's lines
/// are drawn thinner and its labels prefixed with its name).
pub fn svg(models: &[(String, &Model)]) -> String {
    let drawn = |m: &Model| -> (Vec<Ceiling>, Vec<Roof>) {
        (
            m.ceilings
                .iter()
                .filter(|c| c.threads == m.threads)
                .cloned()
                .collect(),
            m.roofs
                .iter()
                .filter(|r| r.threads == m.threads)
                .cloned()
                .collect(),
        )
    };
    let mut xs: Vec<f64> = vec![1.0 / 8.0, 128.0];
    let mut ys: Vec<f64> = Vec::new();
    for (_, m) in models {
        let (ceilings, roofs) = drawn(m);
        xs.extend(m.sweep.iter().map(|p| p.intensity));
        xs.extend(m.points.iter().map(|p| p.intensity));
        ys.extend(ceilings.iter().map(|c| c.gflops));
        ys.extend(m.sweep.iter().map(|p| p.gflops));
        ys.extend(m.points.iter().map(|p| p.gflops));
        ys.extend(roofs.iter().map(|r| r.gbps / 8.0));
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
    let x = Log::new(x_lo, x_hi, LEFT, RIGHT);
    let y = Log::new(y_lo, y_hi, BOTTOM, TOP);
    // The roofs' legend (a row per level and run), then the notes.
    let legend_rows = models.len() * (LEVELS.len() + 1) + 3;
    let height = BOTTOM + 70.0 + 17.0 * legend_rows as f64;
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
    let mut out = String::new();
    let _ = write!(
        out,
        r#"<svg class="chart roofline" data-kind="roofline" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {W} {height}" width="{W}" height="{height}" role="img" aria-label="{t}" font-family="sans-serif" font-size="12"><title>{t}</title><rect width="{W}" height="{height}" fill="white"/><text x="{cx}" y="26" text-anchor="middle" font-size="16" font-weight="600">{t}</text>"#,
        t = escape(&title),
        cx = (LEFT + RIGHT) / 2.0
    );
    for t in x.ticks() {
        let px = x.map(t);
        let _ = write!(
            out,
            r##"<line x1="{px:.1}" y1="{TOP}" x2="{px:.1}" y2="{BOTTOM}" stroke="#e6e6e6"/><text x="{px:.1}" y="{ty}" text-anchor="middle" fill="#444">{l}</text>"##,
            ty = BOTTOM + 16.0,
            l = tick_text(t)
        );
    }
    for t in y.ticks() {
        let py = y.map(t);
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
    // Lines are clipped to the plot; labels are not.
    let _ = write!(
        out,
        r#"<defs><clipPath id="roofline-plot"><rect x="{LEFT}" y="{TOP}" width="{w}" height="{h}"/></clipPath></defs><g clip-path="url(#roofline-plot)">"#,
        w = RIGHT - LEFT,
        h = BOTTOM - TOP
    );
    let clip = |v: f64, lo: f64, hi: f64| v.max(lo).min(hi);
    let mut right_labels: Vec<(String, String, f64)> = Vec::new();
    // (label, colour, traffic, legend row: run and level)
    let mut roof_labels: Vec<(String, String, String, usize)> = Vec::new();
    for (run, (name, m)) in models.iter().enumerate() {
        let prefix = if models.len() > 1 {
            format!("{name}: ")
        } else {
            String::new()
        };
        let width = if run == 0 { 2.0 } else { 1.2 };
        let opacity = if run == 0 { 1.0 } else { 0.75 };
        let (ceilings, roofs) = drawn(m);
        let top = m.top_ceiling().map(|c| c.gflops);
        let fastest = roofs.iter().map(|r| r.gbps).fold(0.0, f64::max);
        // Ceilings: from where the fastest roof meets them to the right edge.
        let top_name = m.top_ceiling().map(|c| c.name.clone());
        for c in &ceilings {
            let color = "#333";
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
                "{prefix}{} {} GFLOP/s{}",
                c.name,
                format_value(c.gflops),
                c.peak_gflops
                    .map(|p| format!(" (peak {})", format_value(p)))
                    .unwrap_or_default()
            );
            let _ = write!(
                out,
                r#"<g class="ceiling" data-name="{n}" data-gflops="{v}"><line x1="{x1:.1}" y1="{py:.1}" x2="{x2:.1}" y2="{py:.1}" stroke="{color}" stroke-width="{sw}" opacity="{opacity}"{dash}/></g>"#,
                n = escape(&c.name),
                v = c.gflops,
                sw = width * 0.75
            );
            right_labels.push((label, color.to_string(), py));
        }
        // Roofs: from the left edge to where they meet the top ceiling.
        for r in &roofs {
            let color = PALETTE[level_rank(&r.level) % PALETTE.len()];
            let end = top.map_or(x.hi, |t| t / r.gbps).min(x.hi);
            let (px1, py1) = (x.map(x.lo), y.map(r.gbps * x.lo));
            let (px2, py2) = (x.map(end), y.map(r.gbps * end));
            let label = format!(
                "{prefix}{} {} GB/s ({} set)",
                r.name(),
                format_value(r.gbps),
                format_size_approx(r.working_set_bytes)
            );
            let _ = write!(
                out,
                r#"<g class="roof" data-name="{n}" data-gbps="{v}"><line x1="{px1:.1}" y1="{py1:.1}" x2="{px2:.1}" y2="{py2:.1}" stroke="{color}" stroke-width="{width}" opacity="{opacity}"{dash}/></g>"#,
                n = escape(&r.name()),
                v = r.gbps,
                dash = traffic_dash(&r.traffic)
            );
            // Labelled in the legend under the plot, by level (row) and traffic (column).
            roof_labels.push((
                label,
                color.to_string(),
                r.traffic.clone(),
                run * LEVELS.len() + level_rank(&r.level),
            ));
        }
        // Ridge points of each roof with the top ceiling.
        if let Some(t) = m.top_ceiling() {
            for ridge in m
                .ridges
                .iter()
                .filter(|g| g.threads == m.threads && g.ceiling == t.name)
            {
                let (px, py) = (x.map(ridge.intensity), y.map(ridge.gflops));
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
        // The sweep: one line of points per level.
        for level in LEVELS {
            let mut points: Vec<&SweepPoint> = m
                .sweep
                .iter()
                .filter(|p| p.level == level && p.threads == m.threads)
                .collect();
            if points.is_empty() {
                continue;
            }
            points.sort_by(|a, b| a.intensity.total_cmp(&b.intensity));
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
                    r#"<rect x="{a:.1}" y="{b:.1}" width="6" height="6" fill="{color}" opacity="{opacity}"><title>{level} sweep: {f} FLOP/element, {i} FLOP/B, {g} GFLOP/s</title></rect>"#,
                    a = x.map(p.intensity) - 3.0,
                    b = y.map(p.gflops) - 3.0,
                    f = p.flop_per_element,
                    i = format_value(p.intensity),
                    g = format_value(p.gflops)
                );
            }
            out.push_str("</g>");
        }
        // The user's points.
        for p in &m.points {
            let (px, py) = (x.map(p.intensity), y.map(p.gflops));
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
                    "{prefix}{} {} GFLOP/s: {} of the {}",
                    p.name,
                    format_value(p.gflops),
                    percent(p.fraction),
                    p.bound_by
                ))
            );
        }
    }
    out.push_str("</g>");
    // Ceiling labels right of the plot, roof labels inside its left edge.
    let placed = spread(
        right_labels
            .iter()
            .enumerate()
            .map(|(i, l)| (i, l.2 + 4.0))
            .collect(),
        13.0,
        TOP,
        BOTTOM + 40.0,
    );
    for (i, py) in placed {
        let (label, color, _) = &right_labels[i];
        let _ = write!(
            out,
            r#"<text class="ceiling-label" x="{tx}" y="{py:.1}" fill="{color}">{l}</text>"#,
            tx = RIGHT + 6.0,
            l = escape(label)
        );
    }
    // The roofs' legend: a row per level (and run), a column per traffic kind, each entry a
    // sample of the line and its label.
    let mut rows: Vec<usize> = roof_labels.iter().map(|l| l.3).collect();
    rows.sort_unstable();
    rows.dedup();
    for (label, color, traffic, row) in &roof_labels {
        let r = rows.iter().position(|x| x == row).unwrap_or(0);
        let c = ["read", "triad", "copy"]
            .iter()
            .position(|t| t == traffic)
            .unwrap_or(2);
        let (lx, ly) = (LEFT + 300.0 * c as f64, BOTTOM + 62.0 + 17.0 * r as f64);
        let _ = write!(
            out,
            r#"<line x1="{lx}" y1="{a:.1}" x2="{b}" y2="{a:.1}" stroke="{color}" stroke-width="2"{dash}/><text class="roof-label" x="{tx}" y="{ly:.1}" fill="{color}">{l}</text>"#,
            a = ly - 4.0,
            b = lx + 28.0,
            tx = lx + 34.0,
            dash = traffic_dash(traffic),
            l = escape(label)
        );
    }
    let roof_rows = rows.len();
    // What the lines mean.
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
        let checks = m.checks.iter().filter(|c| c.threads == m.threads);
        let (good, all) = checks.fold((0, 0), |(g, a), c| (g + usize::from(c.agrees), a + 1));
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
    out.push_str("</svg>");
    out
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
