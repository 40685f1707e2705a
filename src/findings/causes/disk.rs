//! Disk: the cgroup's I/O throttle on the device under the test file, the page cache, the
//! device's queue and what the device is.
//!
//! A throttle of `bps` bytes/s bounds a throughput at `bps / 10⁶` MB/s and an IOPS figure at
//! `bps / block`; one of `iops` bounds IOPS at itself and throughput at `iops × block / 10⁶`.
//! The one that reads the result's unit gives its bound; it holds the figure when the figure
//! is within [0.85, 1.10] of it.

use super::{Candidate, Scene};
use crate::evidence::IoThrottle;
use crate::result::{Evidence, Subsystem};

/// A figure within this band of a throttle's bound is held by it.
const HELD: [f64; 2] = [0.85, 1.10];

pub fn causes(s: &Scene, out: &mut Vec<Candidate>) {
    if s.r.subsystem != Subsystem::Disk {
        return;
    }
    throttle(s, out);
    page_cache(s, out);
    device(s, out);
}

/// Which directions an op moves: (reads, writes).
fn directions(op: &str) -> (bool, bool) {
    let mixed = op.contains("rw") || op.contains("mix");
    (mixed || op.contains("read"), mixed || op.contains("write"))
}

fn throttle(s: &Scene, out: &mut Vec<Candidate>) {
    let Some(device) = s.case.device.as_ref() else {
        return;
    };
    let Some(throttle) = s.run.io_throttle(&device.value) else {
        return;
    };
    let (reads, writes) = directions(&s.r.op);
    let block = s.r.params.block_bytes.unwrap_or(0) as f64;
    let fields: [(&str, bool, bool, Option<u64>); 4] = [
        ("read_bps", reads, true, throttle.read_bps),
        ("read_iops", reads, false, throttle.read_iops),
        ("write_bps", writes, true, throttle.write_bps),
        ("write_iops", writes, false, throttle.write_iops),
    ];
    for (field, applies, bytes, limit) in fields {
        let (true, Some(limit)) = (applies, limit) else {
            continue;
        };
        let limit = limit as f64;
        let bound = match (s.r.unit.as_str(), bytes) {
            ("MB/s", true) => Some(limit / 1e6),
            ("MB/s", false) if block > 0.0 => Some(limit * block / 1e6),
            ("IOPS", false) => Some(limit),
            ("IOPS", true) if block > 0.0 => Some(limit / block),
            _ => None,
        };
        let held = bound.is_some_and(|b| s.r.value >= HELD[0] * b && s.r.value <= HELD[1] * b);
        if !held {
            continue;
        }
        out.push(candidate(
            throttle,
            field,
            bytes,
            limit,
            bound,
            &device.source,
        ));
    }
}

fn candidate(
    throttle: &IoThrottle,
    field: &str,
    bytes: bool,
    limit: f64,
    bound: Option<f64>,
    device_source: &str,
) -> Candidate {
    let name = throttle.name.as_deref().unwrap_or(&throttle.device);
    let (value, unit, shown) = if bytes {
        (
            limit / 1e6,
            "MB/s",
            format!("{:.2} MB/s ({:.2} MiB/s)", limit / 1e6, limit / 1048576.0),
        )
    } else {
        (limit, "IOPS", format!("{limit:.0} IOPS"))
    };
    let mut c = Candidate::new(
        "io-throttle",
        format!(
            "the cgroup throttles {} on {name} ({}) to {shown}: the figure is the throttle's, \
             not the device's",
            if field.starts_with("read") {
                "reads"
            } else {
                "writes"
            },
            throttle.device
        ),
        vec![
            Evidence::new(
                throttle.source.clone(),
                format!("{} {field} {limit:.0}", throttle.device),
            ),
            Evidence::new(device_source.to_string(), throttle.device.clone()),
        ],
        "run outside the cgroup or lift the throttle (blkio.throttle.*_device, io.max)",
    )
    .value(value, unit);
    c.cause.bound = bound;
    c.binds = true;
    c
}

fn page_cache(s: &Scene, out: &mut Vec<Candidate>) {
    if s.r.params.direct != Some(false) {
        return;
    }
    let mut c = Candidate::new(
        "page-cache",
        "buffered I/O: reads may be served from the page cache and writes land in it, not on \
         the device"
            .to_string(),
        vec![Evidence::new("the case's parameters", "direct = false")],
        "use --direct (O_DIRECT) for the device's figures",
    );
    c.inflates = true;
    c.noisy = true;
    out.push(c);
}

fn device(s: &Scene, out: &mut Vec<Candidate>) {
    let Some(device) = s.case.device.as_ref() else {
        return;
    };
    let Some(queue) = s.run.block_device(&device.value) else {
        return;
    };
    let source = format!("/sys/block/{}/queue", queue.name);
    let depth = s.r.params.queue_depth.unwrap_or(1) as u64 * s.r.params.threads.unwrap_or(1) as u64;
    if let Some(requests) = queue.nr_requests.filter(|n| depth > *n) {
        let mut c = Candidate::new(
            "queue-depth",
            format!(
                "{depth} I/Os in flight asked of a queue that holds {requests} (nr_requests): \
                 the rest wait in the block layer"
            ),
            vec![Evidence::new(
                format!("{source}/nr_requests"),
                requests.to_string(),
            )],
            "ask for a queue depth within nr_requests, or raise it",
        )
        .value(requests as f64, "requests");
        c.slows = true;
        out.push(c);
    }
    if let Some(kind) = queue
        .kind
        .as_deref()
        .filter(|k| matches!(*k, "virtio" | "loop" | "device-mapper" | "nbd" | "md"))
    {
        let mut c = Candidate::new(
            "virtual-disk",
            format!(
                "{} is a {kind} device: its speed is that of what stands behind it (the host's \
                 storage, a file, other devices), not a rating of its own",
                queue.name
            ),
            vec![Evidence::new(
                format!("/sys/block/{}", queue.name),
                kind.to_string(),
            )],
            "rate it with --disk-mbps/--disk-iops from what backs it, or test the device \
             underneath",
        );
        c.slows = true;
        c.structural = true;
        out.push(c);
    }
    if queue.rotational == Some(true) && queue.kind.as_deref() != Some("virtio") {
        let mut c = Candidate::new(
            "rotational",
            format!(
                "{} is a rotating disk: every random I/O waits for a seek",
                queue.name
            ),
            vec![Evidence::new(format!("{source}/rotational"), "1")],
            "expect a few hundred random IOPS; rate it with --disk-iops",
        );
        c.slows = true;
        c.structural = true;
        out.push(c);
    }
}
