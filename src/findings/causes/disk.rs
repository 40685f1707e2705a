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

pub(super) fn causes(s: &Scene, out: &mut Vec<Candidate>) {
    if s.r.subsystem != Subsystem::Disk {
        return;
    }
    throttle(s, out);
    page_cache(s, out);
    device(s, out);
    link(s, out);
    write_cache(s, out);
    scheduler(s, out);
}

/// A PCIe link's payload rate in MB/s: `speed` (`8.0 GT/s PCIe`) per lane, 8b/10b coded up to
/// 5 GT/s and 128b/130b from 8 GT/s on (PCIe 3.0–5.0), times the lanes.
fn pcie_mbs(speed: &str, width: u32) -> Option<f64> {
    let gts: f64 = speed.split_whitespace().next()?.parse().ok()?;
    let coding = if gts < 8.0 { 8.0 / 10.0 } else { 128.0 / 130.0 };
    (gts > 0.0 && width > 0).then(|| gts * coding / 8.0 * 1e3 * f64::from(width))
}

/// An NVMe drive whose PCIe link trained narrower or slower than it can run.
fn link(s: &Scene, out: &mut Vec<Candidate>) {
    let Some(device) = s.case.device.as_ref() else {
        return;
    };
    let Some(queue) = s.run.block_device(&device.value) else {
        return;
    };
    let Some(link) = queue.link.as_ref() else {
        return;
    };
    let (Some(now), Some(max)) = (
        pcie_mbs(&link.current_speed, link.current_width),
        pcie_mbs(&link.max_speed, link.max_width),
    ) else {
        return;
    };
    if now >= max * 0.99 {
        return;
    }
    let mut c = Candidate::new(
        "pcie-link",
        format!(
            "{}'s PCIe link runs at x{} {} of its x{} {}: at most {:.0} of {:.0} MB/s",
            queue.name,
            link.current_width,
            link.current_speed,
            link.max_width,
            link.max_speed,
            now,
            max
        ),
        vec![Evidence::new(
            format!(
                "the PCI device of /sys/block/{}: current_link_width, current_link_speed",
                queue.name
            ),
            format!("x{} {}", link.current_width, link.current_speed),
        )],
        "seat the drive in a slot with its full lane count and generation (or check the BIOS's \
         link settings)",
    )
    .value(f64::from(link.current_width), "lanes");
    if s.r.unit == "MB/s" {
        c.cause.bound = Some(now);
    }
    c.slows = true;
    c.structural = true;
    out.push(c);
}

/// A device that writes through its cache: each write waits for the medium.
fn write_cache(s: &Scene, out: &mut Vec<Candidate>) {
    let (_, writes) = directions(&s.r.op);
    let Some(device) = s.case.device.as_ref() else {
        return;
    };
    let Some(queue) = s.run.block_device(&device.value) else {
        return;
    };
    if !writes || queue.write_cache.as_deref() != Some("write through") {
        return;
    }
    let mut c = Candidate::new(
        "write-cache",
        format!(
            "{} writes through its cache: every write waits until the medium has it",
            queue.name
        ),
        vec![Evidence::new(
            format!("/sys/block/{}/queue/write_cache", queue.name),
            "write through",
        )],
        "expect writes at the medium's speed; a drive with a power-protected cache reports \
         'write back'",
    );
    c.slows = true;
    c.structural = true;
    out.push(c);
}

/// An I/O scheduler in front of a solid-state device, for small random I/O at depth: each
/// request pays the scheduler's sorting and locking, which a flash device does not need.
fn scheduler(s: &Scene, out: &mut Vec<Candidate>) {
    let Some(device) = s.case.device.as_ref() else {
        return;
    };
    let Some(queue) = s.run.block_device(&device.value) else {
        return;
    };
    let small = s.r.params.block_bytes.is_some_and(|b| b <= 16 << 10);
    let random = s.r.op.contains("rand");
    let depth = s.r.params.queue_depth.unwrap_or(1) as usize * s.r.params.threads.unwrap_or(1);
    let Some(scheduler) = queue.scheduler.as_deref().filter(|s| *s != "none") else {
        return;
    };
    if queue.rotational == Some(true) || !small || !random || depth < 8 {
        return;
    }
    let mut c = Candidate::new(
        "scheduler",
        format!(
            "{} sends its requests through the {scheduler} scheduler: small random I/O at a \
             depth of {depth} pays its sorting and locking on every request",
            queue.name
        ),
        vec![Evidence::new(
            format!("/sys/block/{}/queue/scheduler", queue.name),
            scheduler.to_string(),
        )],
        "echo none > /sys/block/DEV/queue/scheduler for a solid-state device",
    );
    c.slows = true;
    c.structural = true;
    out.push(c);
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
