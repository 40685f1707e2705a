//! The core-to-core matrix (`peakbench mem c2c`) as text, as an SVG heat map (`--svg` and the
//! HTML report) and as a section of the HTML report: CPUs in the order of the groups the
//! matrix shows, each group outlined, the kernel's claims beside them.

use std::fmt::Write;

use super::cells::escape;
use super::cluster::short;
use crate::result::{BenchResult, Report};
use crate::sysinfo::c2c::{C2cMatrix, Level};
use crate::sysinfo::format_cpu_list;

/// The matrix a `mem c2c` result carries (its `c2c` parameter), if any.
pub(crate) fn matrix_of(result: &BenchResult) -> Option<C2cMatrix> {
    let stored = result.params.other.get("c2c")?;
    serde_json::from_value(stored.clone()).ok()
}

/// Most CPUs the text grid shows; a larger matrix is summarised.
const TEXT_GRID_MAX: usize = 32;

/// The matrix in text: the grid (in group order), the groups, the kernel's claims beside them.
pub(crate) fn lines(m: &C2cMatrix) -> Vec<String> {
    let mut lines = vec![format!(
        "core-to-core round trip ({} mode), ns, {} CPUs, {} pairs measured{}:",
        m.mode,
        m.cpus.len(),
        m.pairs.len(),
        if m.pairs.iter().any(|p| p.reference_ns.is_some()) {
            " (core-to-core-latency × 2 in brackets)"
        } else {
            ""
        }
    )];
    let order = m.display_order();
    if order.len() <= TEXT_GRID_MAX {
        lines.push(
            std::iter::once(format!("{:>5}", "CPU"))
                .chain(order.iter().map(|c| format!("{c:>8}")))
                .collect::<String>(),
        );
        for &a in &order {
            let mut row = format!("{a:>5}");
            for &b in &order {
                let _ = write!(row, "{:>8}", cell_text(m, a, b));
            }
            lines.push(row);
        }
        for p in m.pairs.iter().filter(|p| p.reference_ns.is_some()) {
            let r = p.reference_ns.unwrap_or_default();
            lines.push(format!(
                "  CPU {} ↔ {}: {} ns, core-to-core-latency {} ns ({:+.1} %)",
                p.cpus[0],
                p.cpus[1],
                short(p.median_ns),
                short(r),
                (p.median_ns / r - 1.0) * 100.0
            ));
        }
    }
    if let Some(how) = &m.sampled {
        lines.push(format!("sampled: {how}"));
    }
    lines.extend(inferred_lines(&m.inferred));
    lines.extend(
        m.kernel
            .compare(&m.inferred)
            .into_iter()
            .map(|l| format!("  {l}")),
    );
    if let Some(cores) = &m.measured_cores {
        lines.push(format!(
            "  cores from the matrix: {} ({}); every all-thread peak counts them",
            cores.cores, cores.detail
        ));
    }
    lines
}

/// The cell of (a, b) in the text grid: its median, "-" on the diagonal, "." unmeasured.
fn cell_text(m: &C2cMatrix, a: usize, b: usize) -> String {
    if a == b {
        return "-".into();
    }
    value(m, a, b).map_or(".".into(), short)
}

fn value(m: &C2cMatrix, a: usize, b: usize) -> Option<f64> {
    let key = [a.min(b), a.max(b)];
    m.pairs.iter().find(|p| p.cpus == key).map(|p| p.median_ns)
}

/// The groups inferred, a line per level, or why there are none.
pub(crate) fn inferred_lines(levels: &[Level]) -> Vec<String> {
    if levels.is_empty() {
        return vec![
            "inferred: no groups: no set of CPUs whose mutual round trips are under 1/1.5 of \
             the rest (a uniform matrix)"
                .into(),
        ];
    }
    levels
        .iter()
        .map(|l| {
            format!(
                "inferred: {} × {} ({}): inside ≤ {} ns, between ≥ {} ns",
                l.groups.len(),
                l.name,
                l.groups
                    .iter()
                    .map(|g| format_cpu_list(g))
                    .collect::<Vec<_>>()
                    .join(" "),
                short(l.within_max_ns),
                short(l.between_min_ns)
            )
        })
        .collect()
}

/// A cell's fill: light yellow for the fastest pair, through orange to dark red for the
/// slowest, on a log scale (a sibling and a socket apart differ tenfold).
fn fill(ns: f64, (lo, hi): (f64, f64)) -> String {
    let t = if hi > lo {
        ((ns / lo).ln() / (hi / lo).ln()).clamp(0.0, 1.0)
    } else {
        0.0
    };
    format!("hsl({:.0},85%,{:.0}%)", 55.0 - 55.0 * t, 85.0 - 45.0 * t)
}

/// Outline colours (with their names for the legend) and widths, finest level first.
const OUTLINES: [(&str, &str, f64); 3] = [
    ("#1f5fbf", "blue", 1.5),
    ("#117733", "green", 2.5),
    ("#000", "black", 3.5),
];

/// The heat map as a standalone SVG document.
pub(crate) fn svg(m: &C2cMatrix, host: &str) -> String {
    let order = m.display_order();
    let n = order.len();
    let cell = (640.0 / n as f64).clamp(4.0, 44.0);
    let (left, top) = (48.0, 56.0);
    let size = cell * n as f64;
    let values: Vec<f64> = m.pairs.iter().map(|p| p.median_ns).collect();
    let lo = values.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = values.iter().copied().fold(0.0, f64::max);
    let mut out = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"c2c\" width=\"{w}\" height=\"{h}\" \
         role=\"img\" aria-label=\"core-to-core round trip\" font-family=\"sans-serif\">\n\
         <text x=\"{left}\" y=\"18\" font-size=\"13\">Core-to-core round trip, ns ({mode}), {host}: \
         {lo} to {hi} ns</text>\n",
        // Wide enough for the title and the legend, however few the CPUs.
        w = (left + size + 20.0).max(620.0),
        h = top + size + 40.0,
        mode = m.mode,
        host = escape(host),
        lo = short(lo.min(hi)),
        hi = short(hi),
    );
    let label = cell >= 14.0;
    for (i, &cpu) in order.iter().enumerate() {
        if label {
            let _ = writeln!(
                out,
                "<text x=\"{x}\" y=\"{y}\" font-size=\"10\" text-anchor=\"end\">{cpu}</text>\
                 <text x=\"{cx}\" y=\"{ty}\" font-size=\"10\" text-anchor=\"middle\">{cpu}</text>",
                x = left - 4.0,
                y = top + cell * i as f64 + cell / 2.0 + 3.0,
                cx = left + cell * i as f64 + cell / 2.0,
                ty = top - 6.0,
            );
        }
    }
    for (i, &a) in order.iter().enumerate() {
        for (j, &b) in order.iter().enumerate() {
            heat_cell(
                &mut out,
                m,
                (a, b),
                (left + cell * j as f64, top + cell * i as f64, cell),
                (lo, hi),
            );
        }
    }
    outline_groups(&mut out, m, &order, (left, top, cell));
    let _ = writeln!(
        out,
        "<text x=\"{left}\" y=\"{y}\" font-size=\"11\">rows and columns: CPUs in the order of the \
         groups inferred; outlines: {}</text>\n</svg>",
        legend(&m.inferred),
        y = top + size + 24.0,
    );
    out
}

/// One cell: coloured by its median, its value written where it fits, a tooltip naming it.
fn heat_cell(
    out: &mut String,
    m: &C2cMatrix,
    (a, b): (usize, usize),
    (x, y, cell): (f64, f64, f64),
    range: (f64, f64),
) {
    let Some(ns) = (a != b).then(|| value(m, a, b)).flatten() else {
        let _ = writeln!(
            out,
            "<rect x=\"{x:.1}\" y=\"{y:.1}\" width=\"{cell:.1}\" height=\"{cell:.1}\" fill=\"{}\"/>",
            if a == b { "#bbb" } else { "#eee" }
        );
        return;
    };
    let _ = write!(
        out,
        "<rect x=\"{x:.1}\" y=\"{y:.1}\" width=\"{cell:.1}\" height=\"{cell:.1}\" fill=\"{}\" \
         stroke=\"#fff\" stroke-width=\"0.5\"><title>CPU {a} ↔ CPU {b}: {} ns</title></rect>",
        fill(ns, range),
        short(ns)
    );
    if cell >= 30.0 {
        let _ = write!(
            out,
            "<text x=\"{:.1}\" y=\"{:.1}\" font-size=\"9\" text-anchor=\"middle\">{}</text>",
            x + cell / 2.0,
            y + cell / 2.0 + 3.0,
            short(ns)
        );
    }
    out.push('\n');
}

/// Each group of each level as a square on the diagonal, where its CPUs sit side by side.
fn outline_groups(
    out: &mut String,
    m: &C2cMatrix,
    order: &[usize],
    (left, top, cell): (f64, f64, f64),
) {
    for (level, &(colour, _, width)) in m.inferred.iter().zip(OUTLINES.iter().cycle()) {
        for group in &level.groups {
            let mut at: Vec<usize> = group
                .iter()
                .filter_map(|c| order.iter().position(|o| o == c))
                .collect();
            at.sort_unstable();
            let (Some(&first), Some(&last)) = (at.first(), at.last()) else {
                continue;
            };
            if last - first + 1 != at.len() {
                continue; // not side by side: no square to draw
            }
            let _ = writeln!(
                out,
                "<rect x=\"{x:.1}\" y=\"{y:.1}\" width=\"{s:.1}\" height=\"{s:.1}\" fill=\"none\" \
                 stroke=\"{colour}\" stroke-width=\"{width}\"><title>{name}: CPUs {cpus}</title></rect>",
                x = left + cell * first as f64,
                y = top + cell * first as f64,
                s = cell * at.len() as f64,
                name = escape(&level.name),
                cpus = format_cpu_list(group),
            );
        }
    }
}

fn legend(levels: &[Level]) -> String {
    if levels.is_empty() {
        return "none (no groups inferred)".into();
    }
    levels
        .iter()
        .zip(OUTLINES.iter().cycle())
        .map(|(l, (_, colour, _))| format!("{colour} {}", escape(&l.name)))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The core-to-core section of the HTML report: each run's matrix as a heat map and in text.
pub(crate) fn html_section(out: &mut String, runs: &[(i64, &Report)]) {
    for (id, report) in runs {
        for result in &report.results {
            let Some(m) = matrix_of(result) else {
                continue;
            };
            let _ = writeln!(
                out,
                "<h3>Core-to-core latency (run {id}, {})</h3>\n<figure>{}</figure>\n<pre>{}</pre>",
                escape(&result.host),
                svg(&m, &result.host),
                escape(&lines(&m).join("\n"))
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sysinfo::c2c::{C2cMode, KernelTopology, PairCell, infer};

    /// 8 CPUs, 4 cores × 2 threads with CPU i and i + 4 on one core.
    fn hidden_siblings() -> C2cMatrix {
        let mut pairs = Vec::new();
        for a in 0..8usize {
            for b in a + 1..8 {
                let ns = if a % 4 == b % 4 { 16.0 } else { 60.0 };
                pairs.push(PairCell {
                    cpus: [a, b],
                    median_ns: ns,
                    repetitions_ns: vec![ns; 3],
                    reference_ns: None,
                });
            }
        }
        let mut m = C2cMatrix {
            mode: C2cMode::Cas,
            cpus: (0..8).collect(),
            pairs,
            sampled: None,
            inferred: Vec::new(),
            kernel: KernelTopology::default(),
            measured_cores: None,
        };
        m.inferred = infer(&m.medians());
        m
    }

    #[test]
    fn the_heat_map_orders_cpus_by_group_and_outlines_each_group() {
        let m = hidden_siblings();
        let svg = svg(&m, "<host>");
        assert!(svg.starts_with("<svg xmlns=\"http://www.w3.org/2000/svg\""));
        assert!(svg.contains("&lt;host&gt;") && !svg.contains("<host>"));
        assert_eq!(svg.matches("<title>SMT siblings: CPUs").count(), 4, "{svg}");
        assert!(svg.contains("CPU 0 ↔ CPU 4: 16.00 ns"));
        let text = lines(&m);
        assert_eq!(
            text[1].split_whitespace().collect::<Vec<_>>()[1..4],
            ["0", "4", "1"]
        );
        assert!(
            text.iter()
                .any(|l| l.starts_with("inferred: 4 × SMT siblings (0,4 1,5 2,6 3,7)")),
            "{text:?}"
        );
        assert!(
            text.iter()
                .any(|l| l.contains("the matrix shows siblings the kernel does not")),
            "{text:?}"
        );
    }
}
