//! A chart's lines as SVG: our values solid (a line style per run where several share the
//! chart), the standard tool's dashed in the line's colour, the theoretical peak as one
//! labelled horizontal line or, where it changes along the axis, dotted per line; and, where
//! the lines have peaks, the efficiency chart beside the value chart.

use std::collections::BTreeSet;

use super::lines::{Line, Point};
use crate::report::charts::{HLine, LineChart, Scale, Series, Stroke, Ticks, line_chart};
use crate::units::format_value;

/// A chart of lines, as the choice of charts names it.
pub(super) struct Chart {
    pub(super) title: String,
    pub(super) x_label: &'static str,
    pub(super) x_ticks: Ticks,
    pub(super) y_label: String,
    /// The unit of the values, for the peak's label.
    pub(super) unit: String,
    /// The standard tools whose values the lines carry, for the legend's note.
    pub(super) tools: String,
    /// How many runs share the chart: more than one draws each run in its own line style.
    pub(super) runs: usize,
}

/// The scale of an axis of counts or sizes: logarithmic when they span a factor of 8 or more.
fn x_scale_for(ticks: Ticks, lines: &[Line]) -> Scale {
    let xs = lines.iter().flat_map(|l| l.points.iter().map(|p| p.x));
    let (lo, hi) = xs.fold((f64::INFINITY, 0f64), |(lo, hi), v| (lo.min(v), hi.max(v)));
    match ticks {
        Ticks::Bytes => Scale::Log2,
        Ticks::Count if lo > 0.0 && hi / lo >= 8.0 => Scale::Log2,
        Ticks::Number | Ticks::BitRate if lo > 0.0 && hi / lo >= 100.0 => Scale::Log10,
        _ => Scale::Linear,
    }
}

/// Log scale when positive values span more than a factor of 20.
fn y_scale_for(series: &[Series]) -> Scale {
    let values = series.iter().flat_map(|s| s.points.iter().map(|p| p.1));
    let (lo, hi) = values.fold((f64::INFINITY, 0f64), |(lo, hi), v| (lo.min(v), hi.max(v)));
    if lo > 0.0 && hi / lo > 20.0 {
        Scale::Log10
    } else {
        Scale::Linear
    }
}

/// The value chart of `lines` and, where they have peaks, the efficiency chart beside it.
pub(super) fn draw(chart: &Chart, lines: &[Line]) -> Vec<String> {
    let x_scale = x_scale_for(chart.x_ticks, lines);
    let peaks: BTreeSet<u64> = lines
        .iter()
        .flat_map(|l| l.points.iter().filter_map(|p| p.peak.map(f64::to_bits)))
        .collect();
    let one_peak = (peaks.len() == 1).then(|| f64::from_bits(*peaks.first().unwrap()));
    let series = value_series(chart, lines, one_peak);
    let mut notes = Vec::new();
    if series.iter().any(|s| s.stroke == Stroke::Dashed) {
        notes.push(format!(
            "dashed, same colour: {}, the standard tool, on the same cases",
            chart.tools
        ));
    }
    if series.iter().any(|s| s.stroke == Stroke::Dotted) {
        notes.push("dotted, same colour: the theoretical peak of the line's cases".into());
    }
    let hlines = one_peak
        .map(|v| {
            vec![HLine {
                y: v,
                label: format!("theoretical peak {} {}", format_value(v), chart.unit),
            }]
        })
        .unwrap_or_default();
    let y_scale = y_scale_for(&series);
    let mut svgs = vec![line_chart(&LineChart {
        x_scale,
        y_scale,
        x_ticks: chart.x_ticks,
        hlines,
        notes,
        ..LineChart::new(
            chart.title.clone(),
            chart.x_label.into(),
            chart.y_label.clone(),
            series,
        )
    })];
    if !peaks.is_empty() {
        svgs.push(efficiency_chart(chart, x_scale, lines));
    }
    svgs
}

/// The solid stroke of a line of ours: a pattern per run where several runs share the chart.
fn stroke_of(line: &Line, runs: usize) -> Stroke {
    if runs > 1 {
        Stroke::Run(line.run)
    } else {
        Stroke::Solid
    }
}

/// Each line's values, with the tool's values dashed beside it and, unless the chart has
/// `one_peak` for all its lines, its peaks dotted.
fn value_series(chart: &Chart, lines: &[Line], one_peak: Option<f64>) -> Vec<Series> {
    let mut series = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        series.push(Series {
            stroke: stroke_of(line, chart.runs),
            ..Series::line(
                line.name.clone(),
                line.points.iter().map(|p| (p.x, p.y)).collect(),
                i,
            )
        });
        let reference: Vec<(f64, f64)> = line
            .points
            .iter()
            .filter_map(|p| p.reference.map(|r| (p.x, r)))
            .collect();
        if !reference.is_empty() {
            series.push(Series {
                name: format!("{} ({})", line.name, chart.tools),
                points: reference,
                style: i,
                stroke: Stroke::Dashed,
                legend: false,
            });
        }
        if one_peak.is_none() {
            let peak: Vec<(f64, f64)> = line
                .points
                .iter()
                .filter_map(|p| p.peak.map(|v| (p.x, v)))
                .collect();
            if !peak.is_empty() {
                series.push(Series {
                    name: format!("{} theoretical peak", line.name),
                    points: peak,
                    style: i,
                    stroke: Stroke::Dotted,
                    legend: false,
                });
            }
        }
    }
    series
}

/// Each line's values as a percentage of its points' peaks, the tool's dashed beside them,
/// against the same x axis as the value chart.
fn efficiency_chart(chart: &Chart, x_scale: Scale, lines: &[Line]) -> String {
    let mut series = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let of = |v: Option<f64>, p: &Point| Some((p.x, 100.0 * v? / p.peak.filter(|p| *p > 0.0)?));
        let ours: Vec<(f64, f64)> = line
            .points
            .iter()
            .filter_map(|p| of(Some(p.y), p))
            .collect();
        if ours.is_empty() {
            continue;
        }
        series.push(Series {
            stroke: stroke_of(line, chart.runs),
            ..Series::line(line.name.clone(), ours, i)
        });
        let theirs: Vec<(f64, f64)> = line
            .points
            .iter()
            .filter_map(|p| of(p.reference, p))
            .collect();
        if !theirs.is_empty() {
            series.push(Series {
                name: format!("{} ({})", line.name, chart.tools),
                points: theirs,
                style: i,
                stroke: Stroke::Dashed,
                legend: false,
            });
        }
    }
    let mut notes = Vec::new();
    if series.iter().any(|s| s.stroke == Stroke::Dashed) {
        notes.push(format!(
            "dashed, same colour: the efficiency of {} on the same cases",
            chart.tools
        ));
    }
    line_chart(&LineChart {
        x_scale,
        x_ticks: chart.x_ticks,
        hlines: vec![HLine {
            y: 100.0,
            label: "theoretical peak".into(),
        }],
        notes,
        ..LineChart::new(
            format!("{}: efficiency against the theoretical peak", chart.title),
            chart.x_label.into(),
            "efficiency (% of the theoretical peak)".into(),
            series,
        )
    })
}
