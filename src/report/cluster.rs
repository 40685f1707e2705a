//! The cluster section of the HTML report (`peakbench cluster run`'s document): the hosts with
//! their flags and failures, the inventory fields that differ, a heat map per metric of the
//! network matrix (hosts on both axes) and the collectives' bus bandwidth against message size.

use std::fmt::Write;

use super::cells::escape;
use crate::result::{Cluster, Matrix, Report};

/// Appends the cluster section of `report`, if it is a cluster run's.
pub(super) fn section(out: &mut String, report: &Report) {
    let Some(cluster) = &report.cluster else {
        return;
    };
    let _ = writeln!(
        out,
        "<h2 id=\"cluster\">Cluster: {} hosts, {} ranks (phase {})</h2>",
        cluster.hosts.len(),
        cluster.ranks,
        escape(&cluster.phase)
    );
    job_and_plan(out, cluster);
    hosts(out, cluster);
    differences(out, cluster);
    for group in &cluster.shared_machines {
        let _ = writeln!(
            out,
            "<p class=\"shared-machine\">One machine (boot id {}): {}.</p>",
            escape(&group.boot_id),
            escape(&group.hosts.join(", "))
        );
    }
    for matrix in &cluster.matrices {
        heat_map(out, matrix, cluster.threshold);
        if let Some(left_out) = &matrix.not_compared {
            let _ = writeln!(
                out,
                "<p>Not compared: the links of {}: {}.</p>",
                escape(&left_out.hosts.join(", ")),
                escape(&left_out.why)
            );
        }
        for h in &matrix.slow_hosts {
            let _ = writeln!(
                out,
                "<p>Slow host: {} ({} of its {} links flagged: the host, not the links).</p>",
                escape(&h.host),
                h.slow_links,
                h.links
            );
        }
    }
    collectives(out, report);
    references(out, cluster);
}

/// The batch job the run was in, and how the network matrix chose its pairs.
fn job_and_plan(out: &mut String, cluster: &Cluster) {
    if let Some(job) = &cluster.job {
        let mut line = format!(
            "Batch job: {} job {}",
            escape(&job.scheduler),
            escape(&job.id)
        );
        if let Some(name) = &job.name {
            let _ = write!(line, " ({})", escape(name));
        }
        if let Some(partition) = &job.partition {
            let _ = write!(line, ", partition {}", escape(partition));
        }
        // Up to 8 nodes by name; more as the scheduler wrote the list (`node-[000-099]`).
        let n = job.nodes.len();
        match &job.nodelist {
            Some(list) if n > 8 => {
                let _ = write!(line, ", {n} nodes: {}", escape(list));
            }
            _ if n > 0 => {
                let _ = write!(line, ", {n} nodes: {}", escape(&job.nodes.join(", ")));
            }
            Some(list) => {
                let _ = write!(line, ", nodes {}", escape(list));
            }
            None => {}
        }
        let _ = writeln!(out, "<p class=\"cluster-job\">{line}.</p>");
    }
    if let Some(plan) = &cluster.matrix_plan {
        let _ = writeln!(
            out,
            "<p class=\"matrix-plan\">Network matrix: {} ({}), {} rounds, {} pairs, seed {}; \
             MPI curves kept for {}.</p>",
            escape(&plan.plan),
            escape(&plan.chosen),
            plan.rounds,
            plan.pairs,
            plan.seed,
            escape(&plan.curves)
        );
    }
}

/// `--reference`: the standard tools over the same ranks beside peakbench's figures.
fn references(out: &mut String, cluster: &Cluster) {
    if cluster.references.is_empty() {
        return;
    }
    out.push_str(
        "<h3>Standard tools over the same ranks</h3>\n<table class=\"cluster-references\">\
         <tr><th>figure</th><th>peakbench</th><th>tool</th><th>tool's value</th>\
         <th>peakbench / tool</th><th>command or why none</th></tr>\n",
    );
    for r in &cluster.references {
        let tool = &r.reference;
        let value = |v: Option<f64>| v.map_or("—".into(), |v| format!("{} {}", short(v), r.unit));
        let why = match (&tool.value, &tool.note) {
            (None, Some(note)) => format!("{}<br>{}", escape(note), escape(&tool.command)),
            (Some(_), Some(note)) => format!("{}<br>{}", escape(&tool.command), escape(note)),
            _ => escape(&tool.command),
        };
        let _ = writeln!(
            out,
            "<tr><td>{}</td><td class=\"n\">{}</td><td>{}</td><td class=\"n\">{}</td>\
             <td class=\"n\">{}</td><td>{why}</td></tr>",
            escape(&r.metric),
            escape(&value(r.value)),
            escape(&tool.tool),
            escape(&value(tool.value)),
            tool.ratio.map_or("—".into(), |x| format!("{x:.3}")),
        );
    }
    out.push_str("</table>\n");
}

fn hosts(out: &mut String, cluster: &Cluster) {
    let _ = writeln!(
        out,
        "<h3>Hosts</h3>\n<table class=\"cluster-hosts\"><tr><th>host</th><th>ranks</th>\
         <th>flag (below {:.2} × the median)</th><th>failures</th></tr>",
        cluster.threshold
    );
    for host in &cluster.hosts {
        let flag = cluster
            .flagged
            .iter()
            .find(|f| f.host == host.name)
            .map(|f| {
                format!(
                    "slow: {:.2} × in {}",
                    f.worst_ratio,
                    escape(&f.cases.join(", "))
                )
            })
            .unwrap_or_default();
        let failures: Vec<String> = cluster
            .failures
            .iter()
            .filter(|f| f.host == host.name)
            .map(|f| format!("{}: {}", escape(&f.case), escape(&f.why)))
            .collect();
        let ranks: Vec<String> = host.ranks.iter().map(|r| r.to_string()).collect();
        let _ = writeln!(
            out,
            "<tr><td>{}</td><td>{}</td><td class=\"flag\">{flag}</td><td>{}</td></tr>",
            escape(&host.name),
            ranks.join(", "),
            failures.join("<br>")
        );
    }
    out.push_str("</table>\n");
    let unknown: Vec<String> = cluster
        .failures
        .iter()
        .filter(|f| !cluster.hosts.iter().any(|h| h.name == f.host))
        .map(|f| format!("{}: {}", escape(&f.case), escape(&f.why)))
        .collect();
    if !unknown.is_empty() {
        let _ = writeln!(
            out,
            "<p>Failures of no known host: {}</p>",
            unknown.join("; ")
        );
    }
}

fn differences(out: &mut String, cluster: &Cluster) {
    out.push_str("<h3>Inventory differences</h3>\n");
    if cluster.differences.is_empty() {
        out.push_str("<p>Every host has the same CPU, memory, kernel and clocks.</p>\n");
        return;
    }
    out.push_str("<table class=\"cluster-differences\"><tr><th>field</th><th>values</th></tr>\n");
    for d in &cluster.differences {
        let values: Vec<String> = d
            .values
            .iter()
            .map(|(h, v)| format!("{}: {}", escape(h), escape(v)))
            .collect();
        let _ = writeln!(
            out,
            "<tr><td>{}</td><td>{}</td></tr>",
            escape(&d.field),
            values.join("<br>")
        );
    }
    out.push_str("</table>\n");
}

/// A cell's colour from its performance relative to the median link (1 or above: green, the
/// threshold or below: red, in between: amber).
fn colour(ratio: f64, threshold: f64) -> &'static str {
    if ratio >= 0.97 {
        "#9fd89f"
    } else if ratio >= threshold {
        "#f3d27a"
    } else {
        "#ee8f8f"
    }
}

/// One metric of the matrix as a grid of cells: row = from (client), column = to (server).
fn heat_map(out: &mut String, matrix: &Matrix, threshold: f64) {
    let Some(grid) = matrix.grid() else {
        return flagged_links(out, matrix, threshold);
    };
    let n = matrix.hosts.len();
    let (cell, left, top) = (64.0, 120.0, 110.0);
    let width = left + cell * n as f64 + 10.0;
    let height = top + cell * n as f64 + 10.0;
    let _ = writeln!(
        out,
        "<h3>{m} ({u})</h3>\n<p>Rows: from (client); columns: to (server). Median link {med}; \
         cells below {threshold:.2} × the median in red. {c}</p>\n<svg class=\"heat-map\" \
         xmlns=\"http://www.w3.org/2000/svg\" width=\"{width}\" height=\"{height}\" \
         role=\"img\" aria-label=\"{m}\">",
        m = escape(&matrix.metric),
        u = escape(&matrix.unit),
        med = matrix.median.map_or("unknown".into(), |m| format!(
            "{} {}",
            short(m),
            escape(&matrix.unit)
        )),
        c = escape(&matrix.counting),
    );
    for (i, host) in matrix.hosts.iter().enumerate() {
        let _ = writeln!(
            out,
            "<text x=\"{x}\" y=\"{y}\" text-anchor=\"end\" font-size=\"11\">{h}</text>\
             <text x=\"{cx}\" y=\"{ty}\" font-size=\"11\" transform=\"rotate(-40 {cx} {ty})\">{h}</text>",
            x = left - 6.0,
            y = top + cell * i as f64 + cell / 2.0 + 4.0,
            cx = left + cell * i as f64 + cell / 2.0,
            ty = top - 8.0,
            h = escape(host)
        );
    }
    // A validated document has a row and a column per host (result::validate); the cells
    // are still taken with their hosts by zipping, never by index.
    for (i, (row, from)) in grid.iter().zip(&matrix.hosts).enumerate() {
        for (j, (value, to)) in row.iter().zip(&matrix.hosts).enumerate() {
            let at = (left + cell * j as f64, top + cell * i as f64, cell);
            heat_cell(
                out,
                matrix,
                (from.as_str(), to.as_str()),
                *value,
                at,
                threshold,
            );
        }
    }
    out.push_str("</svg>\n");
}

/// One cell of the heat map: the link `from` → `to` at `(x, y)`, `cell` wide; grey where the
/// link was not measured or not compared, else coloured by its ratio to the median.
fn heat_cell(
    out: &mut String,
    matrix: &Matrix,
    (from, to): (&str, &str),
    value: Option<f64>,
    (x, y, cell): (f64, f64, f64),
    threshold: f64,
) {
    let Some(v) = value else {
        let _ = writeln!(
            out,
            "<rect x=\"{x}\" y=\"{y}\" width=\"{cell}\" height=\"{cell}\" fill=\"#eee\" stroke=\"#fff\"/>"
        );
        return;
    };
    let left_out = matrix
        .not_compared
        .as_ref()
        .is_some_and(|n| n.hosts.iter().any(|h| h == from || h == to));
    let (fill, note) = if left_out {
        ("#ddd".to_string(), "not compared: one machine".to_string())
    } else {
        let ratio = match matrix.median {
            Some(m) if m > 0.0 && v > 0.0 => {
                if matrix.higher_is_better {
                    v / m
                } else {
                    m / v
                }
            }
            _ => 1.0,
        };
        (
            colour(ratio, threshold).to_string(),
            format!("{ratio:.2} × the median"),
        )
    };
    let _ = writeln!(
        out,
        "<rect x=\"{x}\" y=\"{y}\" width=\"{cell}\" height=\"{cell}\" fill=\"{fill}\" \
         stroke=\"#fff\"><title>{from} → {to}: {v:.4} {u} ({note})</title></rect>\
         <text x=\"{tx}\" y=\"{ty}\" text-anchor=\"middle\" font-size=\"11\">{short}</text>",
        from = escape(from),
        to = escape(to),
        u = escape(&matrix.unit),
        tx = x + cell / 2.0,
        ty = y + cell / 2.0 + 4.0,
        short = short(v),
    );
}

/// The most flagged links a matrix too large for a grid lists.
const LISTED_LINKS: usize = 200;

/// A matrix of more hosts than a grid can show ([`Matrix::DENSE_MAX_HOSTS`]): its measured
/// links counted, and its flagged links listed, the slowest first.
fn flagged_links(out: &mut String, matrix: &Matrix, threshold: f64) {
    let index: std::collections::HashMap<&str, usize> = matrix
        .hosts
        .iter()
        .enumerate()
        .map(|(i, h)| (h.as_str(), i))
        .collect();
    let values: std::collections::HashMap<(usize, usize), f64> =
        matrix.measured().map(|(i, j, v)| ((i, j), v)).collect();
    let relative = |v: f64| match matrix.median {
        Some(m) if m > 0.0 && v > 0.0 => {
            if matrix.higher_is_better {
                v / m
            } else {
                m / v
            }
        }
        _ => 1.0,
    };
    let mut rows: Vec<(&str, &str, Option<f64>)> = matrix
        .flagged
        .iter()
        .map(|[from, to]| {
            let v = index
                .get(from.as_str())
                .zip(index.get(to.as_str()))
                .and_then(|(&i, &j)| values.get(&(i, j)).copied());
            (from.as_str(), to.as_str(), v)
        })
        .collect();
    rows.sort_by(|a, b| {
        let r = |v: Option<f64>| v.map_or(f64::INFINITY, relative);
        r(a.2).total_cmp(&r(b.2))
    });
    let _ = writeln!(
        out,
        "<h3>{m} ({u})</h3>\n<p>{n} hosts, {links} links measured: too many hosts for a grid. \
         Median link {med}; {flagged} links below {threshold:.2} × the median{shown}. {c}</p>",
        m = escape(&matrix.metric),
        u = escape(&matrix.unit),
        n = matrix.hosts.len(),
        links = values.len(),
        med = matrix.median.map_or("unknown".into(), |m| format!(
            "{} {}",
            short(m),
            escape(&matrix.unit)
        )),
        flagged = rows.len(),
        shown = if rows.len() > LISTED_LINKS {
            format!(", the {LISTED_LINKS} slowest listed")
        } else {
            String::new()
        },
        c = escape(&matrix.counting),
    );
    if rows.is_empty() {
        return;
    }
    out.push_str("<table class=\"flagged-links\"><tr><th>from</th><th>to</th><th>value</th><th>× the median</th></tr>\n");
    for (from, to, v) in rows.iter().take(LISTED_LINKS) {
        let _ = writeln!(
            out,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            escape(from),
            escape(to),
            v.map_or("—".into(), |v| format!(
                "{} {}",
                short(v),
                escape(&matrix.unit)
            )),
            v.map_or("—".into(), |v| format!("{:.2}", relative(v))),
        );
    }
    out.push_str("</table>\n");
}

/// A value in at most 4 significant digits.
pub(super) fn short(v: f64) -> String {
    if v >= 1000.0 {
        format!("{v:.0}")
    } else if v >= 100.0 {
        format!("{v:.1}")
    } else if v >= 1.0 {
        format!("{v:.2}")
    } else {
        format!("{v:.3}")
    }
}

/// The collectives' bus bandwidth against message size (log2 axis), a line per operation.
fn collectives(out: &mut String, report: &Report) {
    let curves: Vec<(String, Vec<(f64, f64)>)> = report
        .results
        .iter()
        .filter(|r| r.op.starts_with("mpi-all"))
        .filter_map(|r| {
            let curve = r.params.other.get("curve")?.as_array()?;
            let points: Vec<(f64, f64)> = curve
                .iter()
                .filter_map(|p| Some((p["bytes"].as_f64()?, p["busbw_gbs"].as_f64()?)))
                .filter(|(b, w)| *b > 0.0 && w.is_finite() && *w >= 0.0)
                .collect();
            (!points.is_empty()).then(|| (r.op.trim_start_matches("mpi-").to_string(), points))
        })
        .collect();
    if curves.is_empty() {
        return;
    }
    let (width, height, left, right, top, bottom) = (760.0, 340.0, 70.0, 600.0, 20.0, 290.0);
    let all = curves.iter().flat_map(|(_, p)| p.iter());
    let (mut x0, mut x1, mut y1) = (f64::MAX, f64::MIN, 0.0f64);
    for &(b, w) in all {
        x0 = x0.min(b.log2());
        x1 = x1.max(b.log2());
        y1 = y1.max(w);
    }
    let x1 = if x1 > x0 { x1 } else { x0 + 1.0 };
    let y1 = if y1 > 0.0 { y1 * 1.05 } else { 1.0 };
    let sx = |b: f64| left + (b.log2() - x0) / (x1 - x0) * (right - left);
    let sy = |w: f64| bottom - w / y1 * (bottom - top);
    let _ = writeln!(
        out,
        "<h3>Collectives: bus bandwidth against message size</h3>\n<p>busbw = algbw × \
         2(n − 1)/n (allreduce) or (n − 1)/n (allgather, alltoall), nccl-tests' definition; \
         1 GB = 10^9 B.</p>\n<svg class=\"collectives\" xmlns=\"http://www.w3.org/2000/svg\" \
         width=\"{width}\" height=\"{height}\" role=\"img\" aria-label=\"bus bandwidth\">\
         <line x1=\"{left}\" y1=\"{bottom}\" x2=\"{right}\" y2=\"{bottom}\" stroke=\"#333\"/>\
         <line x1=\"{left}\" y1=\"{top}\" x2=\"{left}\" y2=\"{bottom}\" stroke=\"#333\"/>\
         <text x=\"{mid}\" y=\"{lx}\" text-anchor=\"middle\" font-size=\"12\">message size, bytes (log₂)</text>\
         <text x=\"14\" y=\"{my}\" font-size=\"12\" transform=\"rotate(-90 14 {my})\" text-anchor=\"middle\">bus bandwidth, GB/s</text>\
         <text x=\"{tl}\" y=\"{ty}\" text-anchor=\"end\" font-size=\"11\">{y1:.3}</text>\
         <text x=\"{tl}\" y=\"{bottom}\" text-anchor=\"end\" font-size=\"11\">0</text>\
         <text x=\"{left}\" y=\"{bx}\" font-size=\"11\">{b0}</text>\
         <text x=\"{right}\" y=\"{bx}\" text-anchor=\"end\" font-size=\"11\">{b1}</text>",
        mid = (left + right) / 2.0,
        lx = bottom + 34.0,
        bx = bottom + 16.0,
        my = (top + bottom) / 2.0,
        tl = left - 4.0,
        ty = top + 4.0,
        b0 = crate::units::format_size(2f64.powf(x0) as u64),
        b1 = crate::units::format_size(2f64.powf(x1) as u64),
    );
    let colours = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd"];
    for (k, (op, points)) in curves.iter().enumerate() {
        let colour = colours[k % colours.len()];
        let path: Vec<String> = points
            .iter()
            .map(|&(b, w)| format!("{:.1},{:.1}", sx(b), sy(w)))
            .collect();
        let _ = writeln!(
            out,
            "<polyline fill=\"none\" stroke=\"{colour}\" stroke-width=\"2\" points=\"{}\"/>\
             <text x=\"{x}\" y=\"{y}\" font-size=\"12\" fill=\"{colour}\">{op}</text>",
            path.join(" "),
            x = right + 12.0,
            y = top + 16.0 * (k as f64 + 1.0),
            op = escape(op)
        );
    }
    out.push_str("</svg>\n");
}

#[cfg(test)]
mod tests {
    use super::*;

    fn matrix(n: usize) -> Matrix {
        let hosts: Vec<String> = (0..n).map(|h| format!("h{h}")).collect();
        let links = (0..n).flat_map(|i| {
            let j = (i + 1) % n;
            [(i, j, if i == 3 { 2.0 } else { 9.0 }), (j, i, 9.0)]
        });
        let (values, cells) = Matrix::store(n, links);
        Matrix {
            metric: "TCP throughput".into(),
            unit: "Gb/s".into(),
            higher_is_better: true,
            counting: "payload".into(),
            hosts,
            values,
            cells,
            median: Some(9.0),
            flagged: vec![["h3".into(), "h4".into()]],
            peak: None,
            op: "tcp-throughput".into(),
            not_compared: None,
            loosened: None,
            slow_hosts: Vec::new(),
        }
    }

    /// Up to DENSE_MAX_HOSTS a grid of cells; above, the flagged links in a table, not a grid
    /// of N² cells (a grid of 1,000 hosts would be a million SVG elements).
    #[test]
    fn a_matrix_too_large_for_a_grid_lists_its_flagged_links() {
        let mut small = String::new();
        heat_map(&mut small, &matrix(Matrix::DENSE_MAX_HOSTS), 0.8);
        assert!(small.contains("<svg class=\"heat-map\""));
        let cells = small.matches("<rect ").count();
        assert_eq!(cells, Matrix::DENSE_MAX_HOSTS * Matrix::DENSE_MAX_HOSTS);
        let mut large = String::new();
        heat_map(&mut large, &matrix(1000), 0.8);
        assert!(!large.contains("<svg"), "{large}");
        assert!(large.contains("1000 hosts, 2000 links measured"), "{large}");
        assert!(large.contains("<td>h3</td><td>h4</td><td>2.00 Gb/s</td><td>0.22</td>"));
        assert!(large.len() < 2000, "{} bytes", large.len());
    }

    /// Each cell names its link, its value and its ratio to the median (red below the
    /// threshold); a link with a host left out of the comparison is grey and says why; an
    /// unmeasured link is an empty grey cell.
    #[test]
    fn each_heat_map_cell_names_its_link_and_how_it_compares() {
        let mut m = matrix(5);
        m.not_compared = Some(crate::result::NotCompared {
            hosts: vec!["h0".into()],
            why: "one machine".into(),
        });
        let mut out = String::new();
        heat_map(&mut out, &m, 0.8);
        let cell = |title: &str| {
            out.lines()
                .find(|l| l.contains(title))
                .unwrap_or_else(|| panic!("no cell {title} in {out}"))
                .to_string()
        };
        let low = cell("<title>h3 → h4: 2.0000 Gb/s (0.22 × the median)</title>");
        assert!(
            low.contains(&format!("fill=\"{}\"", colour(0.22, 0.8))),
            "{low}"
        );
        assert!(
            low.contains(">2.00</text>") || low.contains(">2</text>"),
            "{low}"
        );
        let ok = cell("<title>h1 → h2: 9.0000 Gb/s (1.00 × the median)</title>");
        assert!(ok.contains("fill=\"#9fd89f\""), "{ok}");
        let grey = cell("<title>h0 → h1: 9.0000 Gb/s (not compared: one machine)</title>");
        assert!(grey.contains("fill=\"#ddd\""), "{grey}");
        assert_eq!(out.matches("fill=\"#eee\"").count(), 25 - 10, "{out}");
    }

    /// The batch job and the matrix's plan are in the report, not only in the JSON; the
    /// scheduler's text is escaped.
    #[test]
    fn the_job_and_the_matrix_plan_are_shown() {
        let cluster = Cluster {
            job: Some(crate::result::BatchJob {
                scheduler: "slurm".into(),
                id: "4242".into(),
                name: Some("<b>bench</b>".into()),
                partition: Some("debug".into()),
                nodelist: Some("node-[1-2]".into()),
                nodes: vec!["node-1".into(), "node-2".into()],
                variables: Default::default(),
            }),
            matrix_plan: Some(crate::result::MatrixSchedule {
                plan: "sample:3".into(),
                chosen: "the default above 4 hosts".into(),
                rounds: 5,
                pairs: 24,
                seed: 7,
                curves: "the flagged links".into(),
            }),
            ..Cluster::default()
        };
        let mut out = String::new();
        job_and_plan(&mut out, &cluster);
        assert!(
            out.contains(
                "Batch job: slurm job 4242 (&lt;b&gt;bench&lt;/b&gt;), partition debug, 2 nodes: \
                 node-1, node-2."
            ),
            "{out}"
        );
        assert!(
            out.contains(
                "Network matrix: sample:3 (the default above 4 hosts), 5 rounds, 24 pairs"
            ),
            "{out}"
        );
        let mut many = cluster.clone();
        let job = many.job.as_mut().unwrap();
        job.nodelist = Some("node-[1-100]".into());
        job.nodes = (1..=100).map(|i| format!("node-{i}")).collect();
        let mut out = String::new();
        job_and_plan(&mut out, &many);
        assert!(
            out.contains("partition debug, 100 nodes: node-[1-100]."),
            "{out}"
        );
    }
}
