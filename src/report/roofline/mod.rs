//! The roofline's model in words and in a picture: its lines of text (printed after
//! `peakbench roofline` and in the HTML report), its chart ([`svg`], for the HTML report and
//! `roofline --svg`) and its section of the HTML report. The model itself, and everything
//! computed from the results, is in [`crate::result::roofline`]; nothing here computes more
//! than where to draw.

mod chart;

use std::fmt::Write;

use crate::report::cells::escape;
use crate::result::Report;
use crate::result::roofline::{COUNTING, Model, TOLERANCE, model_of, percent};
use crate::units::{format_size_approx, format_value};

pub(crate) use chart::svg;

/// The model as lines of text, for the terminal.
pub(crate) fn lines(m: &Model) -> Vec<String> {
    let mut out = vec![format!("Roofline ({} threads drawn)", m.threads)];
    ceiling_lines(m, &mut out);
    roof_lines(m, &mut out);
    ridge_lines(m, &mut out);
    check_lines(m, &mut out);
    for p in &m.points {
        out.push(format!(
            "  {}: {} GFLOP/s at {} FLOP/B is bound by the {} ({} GFLOP/s there): {} of it",
            p.name,
            format_value(p.gflops),
            format_value(p.intensity),
            p.bound_by,
            format_value(p.attainable_gflops),
            percent(p.fraction)
        ));
    }
    for w in &m.warnings {
        out.push(format!("  warning: {w}"));
    }
    out
}

/// Every ceiling, with its share of the theoretical peak.
fn ceiling_lines(m: &Model, out: &mut Vec<String>) {
    out.push("  compute ceilings (GFLOP/s, 10^9 FLOP/s):".into());
    for c in &m.ceilings {
        out.push(format!(
            "    {:<22} {:>2} threads {:>9}   peak {}",
            c.name,
            c.threads,
            format_value(c.gflops),
            c.peak_gflops
                .map(|p| format!("{} ({} of it)", format_value(p), percent(c.gflops / p)))
                .unwrap_or_else(|| "unknown".into())
        ));
    }
}

/// Every roof, with both byte counts.
fn roof_lines(m: &Model, out: &mut Vec<String>) {
    out.push("  bandwidth roofs (GB/s, 10^9 B/s; application bytes / with write-allocate):".into());
    for r in &m.roofs {
        out.push(format!(
            "    {:<12} {:>2} threads {:>10} set {:>9} / {}",
            r.name(),
            r.threads,
            format_size_approx(r.working_set_bytes),
            format_value(r.gbps),
            format_value(r.gbps_write_allocate)
        ));
    }
}

/// The ridge points of the top ceiling at the drawn thread count (the others are in the JSON).
fn ridge_lines(m: &Model, out: &mut Vec<String>) {
    let Some(top) = m.top_ceiling() else {
        return;
    };
    out.push(format!(
        "  ridge points with {} at {} threads (FLOP/byte; application / with write-allocate):",
        top.name, m.threads
    ));
    for r in m.ridges_with(top) {
        out.push(format!(
            "    {:<12} {:>8} / {}",
            r.roof,
            format_value(r.intensity),
            format_value(r.intensity_write_allocate)
        ));
    }
    out.push(format!(
        "    ({} ridge points in all, every roof × every ceiling, in the JSON)",
        m.ridges.len()
    ));
}

/// The self-check: each sweep plateau against its roof or ceiling.
fn check_lines(m: &Model, out: &mut Vec<String>) {
    if m.checks.is_empty() {
        return;
    }
    out.push(format!(
        "  self-check: the sweep's plateaus against the ceilings (within ±{:.0} %):",
        TOLERANCE * 100.0
    ));
    for c in &m.checks {
        out.push(format!(
            "    {:<5} {:<9} {} vs {} {}: {} {}",
            c.level,
            c.plateau,
            format_value(c.sweep),
            c.against,
            format_value(c.ceiling),
            percent(c.ratio),
            if c.agrees { "agrees" } else { "DISAGREES" }
        ));
    }
}

/// The roofline section of the HTML report: the chart of every run that has one (overlaid),
/// the self-check and the warnings.
pub(crate) fn html_section(out: &mut String, runs: &[(i64, &Report)]) {
    let models: Vec<(String, Model)> = runs
        .iter()
        .filter_map(|(id, r)| model_of(r).map(|m| (format!("run {id} ({})", r.host.hostname), m)))
        .collect();
    if models.is_empty() {
        return;
    }
    let refs: Vec<(String, &Model)> = models.iter().map(|(n, m)| (n.clone(), m)).collect();
    let _ = writeln!(
        out,
        "<h3>The roofline</h3>\n<figure>{}</figure>",
        svg(&refs)
    );
    let _ = writeln!(out, "<p class=\"shared\">{}</p>", escape(COUNTING));
    for (name, m) in &models {
        let _ = writeln!(
            out,
            "<details><summary>{} in text</summary><pre>",
            escape(name)
        );
        for line in lines(m) {
            let _ = writeln!(out, "{}", escape(&line));
        }
        out.push_str("</pre></details>\n");
    }
}
