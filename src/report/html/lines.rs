//! The grouping of a chart's results into lines: one line per combination of the settings that
//! vary among them (and of the op, the run and the host where those vary), named by what tells
//! it apart; and the time unit that keeps a chart's axis readable.

use std::collections::{BTreeMap, BTreeSet};

use super::{Item, Measure};
use crate::report::cells::{describe_other, describe_params};
use crate::result::{ParamRole, Params, param_role};

/// One point of a line: x, our value, the tool's, the peak.
#[derive(Clone, Copy)]
pub(super) struct Point {
    pub(super) x: f64,
    pub(super) y: f64,
    pub(super) reference: Option<f64>,
    pub(super) peak: Option<f64>,
}

#[derive(Clone)]
pub(super) struct Line {
    pub(super) name: String,
    pub(super) run: usize,
    pub(super) op: String,
    pub(super) points: Vec<Point>,
    /// Indices in the group of the results drawn as this line's points.
    pub(super) members: Vec<usize>,
}

impl Line {
    /// Whether the line spans the axis: two points at different x (its points are sorted by x).
    /// Points at one x only say nothing against that axis.
    pub(super) fn spans(&self) -> bool {
        match (self.points.first(), self.points.last()) {
            (Some(a), Some(b)) => a.x != b.x,
            _ => false,
        }
    }
}

/// What varies among a group's results besides their parameters: each splits and names lines.
#[derive(Clone, Copy)]
struct Varying {
    run: bool,
    /// A cluster run's node-local case measured on several hosts: a line per host.
    host: bool,
    op: bool,
}

/// Splits `group` into lines: one per combination of the settings that vary in it (the op
/// and the run when they vary too), the axis left out. A derived parameter joins the key only
/// where the settings alone would put two points of a line at the same x; bookkeeping never does.
pub(super) fn lines(group: &[(&Item, Measure, f64)], axis: &str) -> Vec<Line> {
    let Some((model, _, _)) = group.first() else {
        return Vec::new();
    };
    let varying = Varying {
        run: group.iter().any(|(i, _, _)| i.run != model.run),
        host: group
            .iter()
            .any(|(i, _, _)| i.result.host != model.result.host),
        op: group.iter().any(|(i, _, _)| i.result.op != model.result.op),
    };
    let settings = varying_params(group, axis, ParamRole::Setting);
    let first = split(group, &settings, varying);
    let crowded = first
        .iter()
        .any(|l| l.points.windows(2).any(|w| w[0].x == w[1].x));
    if !crowded {
        return first;
    }
    let mut keys = settings;
    keys.extend(varying_params(group, axis, ParamRole::Derived));
    split(group, &keys, varying)
}

/// The parameters of `role` that vary in `group`, the axis left out, in the order of their
/// names.
fn varying_params(group: &[(&Item, Measure, f64)], axis: &str, role: ParamRole) -> Vec<String> {
    // A parameter varies when it takes two values among the results of the ops that have it:
    // a result of another op without it does not make it vary, but a case of the same op
    // without it does (UDP unlimited beside UDP at one offered rate are two lines).
    let varies = |key: &str| {
        let ops: BTreeSet<&str> = group
            .iter()
            .filter(|(i, _, _)| i.flat.contains_key(key))
            .map(|(i, _, _)| i.result.op.as_str())
            .collect();
        let mut values = group
            .iter()
            .filter(|(i, _, _)| ops.contains(i.result.op.as_str()))
            .map(|(i, _, _)| i.flat.get(key));
        let first = values.next();
        values.any(|v| Some(v) != first)
    };
    let keys: BTreeSet<&String> = group.iter().flat_map(|(i, _, _)| i.flat.keys()).collect();
    keys.iter()
        .filter(|k| k.as_str() != axis && param_role(k) == role && varies(k))
        .map(|k| k.to_string())
        .collect()
}

/// One line per combination of the values of `keys` (and of the op, the run, the percentile
/// and, where it varies, the host), its points sorted by x.
fn split(group: &[(&Item, Measure, f64)], keys: &[String], varying: Varying) -> Vec<Line> {
    // The lines in the order of their first point, found by key: a chart of 2,000 hosts has a
    // line per host, and a search of the lines for every point took 6 of a report's 13 s.
    let mut lines: Vec<Line> = Vec::new();
    let mut by_key: std::collections::HashMap<Vec<String>, usize> =
        std::collections::HashMap::new();
    for (index, (item, measure, x)) in group.iter().enumerate() {
        let mut key: Vec<String> = keys
            .iter()
            .map(|k| item.flat.get(k).map(|v| v.to_string()).unwrap_or_default())
            .collect();
        key.extend([
            item.result.op.clone(),
            item.run.to_string(),
            measure.stat.to_string(),
        ]);
        if varying.host {
            key.push(item.result.host.clone());
        }
        let point = Point {
            x: *x,
            y: measure.value,
            reference: measure.reference,
            peak: measure.peak,
        };
        let at = *by_key.entry(key).or_insert_with(|| {
            lines.push(Line {
                name: line_name(item, measure, keys, varying),
                run: item.run,
                op: item.result.op.clone(),
                points: Vec::new(),
                members: Vec::new(),
            });
            lines.len() - 1
        });
        lines[at].points.push(point);
        lines[at].members.push(index);
    }
    for line in &mut lines {
        line.points.sort_by(|a, b| a.x.total_cmp(&b.x));
    }
    lines
}

/// The name of the line of `item`'s `measure`: the run, the host and the op where they vary,
/// the values of `keys`, the percentile; the op alone when that leaves nothing.
fn line_name(item: &Item, measure: &Measure, keys: &[String], varying: Varying) -> String {
    let shown: BTreeMap<String, serde_json::Value> = keys
        .iter()
        .filter_map(|k| item.flat.get(k).map(|v| (k.clone(), v.clone())))
        .collect();
    let mut name = Vec::new();
    if varying.run {
        name.push(format!("run {}", item.run + 1));
    }
    if varying.host {
        name.push(item.result.host.clone());
    }
    if varying.op {
        name.push(item.result.op.clone());
    }
    name.push(describe_swept(&shown));
    name.push(measure.stat.to_string());
    name.retain(|n| !n.is_empty());
    if name.is_empty() {
        item.result.op.clone()
    } else {
        name.join(" ")
    }
}

/// The name of a line from the parameters that tell it apart, e.g. "f64 avx512 fma" or "2T".
fn describe_swept(shown: &BTreeMap<String, serde_json::Value>) -> String {
    let params = Params::from_flat(shown);
    let mut parts = vec![describe_params(&params)];
    parts.extend(describe_other(&params));
    parts.retain(|p| !p.is_empty());
    parts.join(" ")
}

/// Times in nanoseconds in the unit that keeps the axis readable: µs from 10 µs, ms from 10 ms
/// (a disk latency of 100 ms read as 100000000 ns). Other units are left as they are.
pub(super) fn readable_time(mut lines: Vec<Line>, unit: String) -> (Vec<Line>, String) {
    if unit != "ns" {
        return (lines, unit);
    }
    let most = lines
        .iter()
        .flat_map(|l| l.points.iter().flat_map(|p| [Some(p.y), p.reference]))
        .flatten()
        .fold(0f64, f64::max);
    let (factor, unit) = if most >= 1e7 {
        (1e-6, "ms")
    } else if most >= 1e4 {
        (1e-3, "µs")
    } else {
        return (lines, unit);
    };
    for point in lines.iter_mut().flat_map(|l| l.points.iter_mut()) {
        point.y *= factor;
        point.reference = point.reference.map(|v| v * factor);
        point.peak = point.peak.map(|v| v * factor);
    }
    (lines, unit.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn latencies_of_milliseconds_are_drawn_in_milliseconds() {
        let point = |y| Point {
            x: 1.0,
            y,
            reference: None,
            peak: None,
        };
        let line = Line {
            name: "randread p99".into(),
            run: 0,
            op: "randread".into(),
            points: vec![point(50_000.0), point(30_000_000.0)],
            members: vec![0, 1],
        };
        let (lines, unit) = readable_time(vec![line.clone()], "ns".into());
        assert_eq!(unit, "ms");
        assert_eq!(lines[0].points[1].y, 30.0);
        let (_, unit) = readable_time(vec![line.clone()], "GB/s".into());
        assert_eq!(unit, "GB/s");
        let small = Line {
            points: vec![point(80.0)],
            ..line
        };
        assert_eq!(readable_time(vec![small], "ns".into()).1, "ns");
    }
}
