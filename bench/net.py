#!/usr/bin/env python3
"""peakbench net against iperf3 (throughput) and sockperf ping-pong (round-trip time) on loopback.

Each round runs every case once with `--reference`: peakbench measures with its loopback
server (a child process), then runs the standard tool with the same protocol, message size, streams and duration
(its server started on a free loopback port and stopped after). Rounds interleave the two tools
in time; the script prints the median of each, the ratio of the medians against the case's
target, peakbench's CV, and for UDP the loss each reported.

    apt-get install -y iperf3 sockperf   # reference tools
    cargo build --release
    python3 bench/net.py --rounds 5 --duration 3

The machine is shared and noisy: compare medians of alternating runs, never absolute figures.
sockperf's smallest message is 14 B (its header), so the 1 B case is compared with sockperf at 14 B.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from pair import ci_note, paired_text  # noqa: E402
PEAKBENCH = os.environ.get("PEAKBENCH", os.path.join(HERE, "..", "target", "release", "peakbench"))

# (label, peakbench args, direction of the target ("info": none), target ratio)
CASES = [
    # The default spins on loopback (the threads fit the CPUs); its target is >= 1.10 x iperf3.
    ("tcp 128KiB x1", ["--proto", "tcp", "--mode", "throughput", "--msg", "128KiB", "--streams", "1"], "higher", 1.10),
    # The same stream with the receiver sleeping on an empty socket, as iperf3's does: the
    # like-for-like figure beside the default (a spinning receiver where the threads fit the
    # CPUs), in both directions (-R: this side receives, the loopback server sends). Target:
    # at least 0.97 x iperf3.
    ("tcp 128KiB x1 sleep", ["--proto", "tcp", "--mode", "throughput", "--msg", "128KiB", "--streams", "1",
                             "--receiver-wait", "sleep"], "higher", 0.97),
    ("tcp 128KiB x1 sleep -R", ["--proto", "tcp", "--mode", "throughput", "--msg", "128KiB", "--streams", "1",
                                "--receiver-wait", "sleep", "--reverse"], "higher", 0.97),
    ("tcp 128KiB x2", ["--proto", "tcp", "--mode", "throughput", "--msg", "128KiB", "--streams", "2"], "higher", 1.00),
    ("udp 1470B", ["--proto", "udp", "--mode", "throughput", "--msg", "1470"], "higher", 1.00),
    ("udp 64KB", ["--proto", "udp", "--mode", "throughput", "--msg", "64000"], "higher", 1.00),
    ("tcp rtt 1B", ["--proto", "tcp", "--mode", "latency", "--msg", "1"], "lower", 1.03),
    ("tcp rtt 64B", ["--proto", "tcp", "--mode", "latency", "--msg", "64"], "lower", 1.03),
    ("udp rtt 1B", ["--proto", "udp", "--mode", "latency", "--msg", "1"], "lower", 1.03),
    ("udp rtt 64B", ["--proto", "udp", "--mode", "latency", "--msg", "64"], "lower", 1.03),
]


def run_case(args, duration, omit):
    cmd = [PEAKBENCH, "net", "--json", "--no-history", "--reference", "-r", "1", "--duration", f"{duration}s",
           "--omit", f"{omit}s", "--warmup", "200ms"] + args
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=duration * 4 + 120)
    if out.returncode != 0:
        sys.exit(f"peakbench failed: {' '.join(cmd)}\n{out.stderr}")
    result = json.loads(out.stdout)["results"][0]
    extra = {e["metric"]: e["value"] for e in result.get("extra", [])}
    ref = result.get("reference") or {}
    return result["value"], ref.get("value"), extra.get("loss"), ref.get("note"), result["unit"], waited(result, extra)


def waited(result, extra):
    """Which end received a TCP test and whether it slept or spun, with its wake-ups per MB."""
    other = result["params"].get("other", {})
    if "receiver_spun" not in other:
        return ""
    end = "client" if other.get("reverse") else "server"
    how = "spun" if other["receiver_spun"] else "slept"
    woke = extra.get("receiver_wakeups")
    return f"receiver ({end}) {how}" + (f", {woke:.1f} wake-ups/MB" if woke is not None else "")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--duration", type=int, default=3, help="seconds per run (whole seconds, as iperf3 takes)")
    parser.add_argument("--omit", type=int, default=1, help="seconds omitted at the start of throughput runs")
    parser.add_argument("--only", help="run only cases whose label contains this text")
    opts = parser.parse_args()
    if not os.path.exists(PEAKBENCH):
        sys.exit("build first: cargo build --release")
    cases = [c for c in CASES if not opts.only or opts.only in c[0]]
    values = {c[0]: ([], [], [], []) for c in cases}
    units, waits = {}, {}
    for r in range(opts.rounds):
        for label, args, _, _ in cases:
            ours, theirs, loss, note, unit, wait = run_case(args, opts.duration, opts.omit)
            units[label] = unit
            waits.setdefault(label, []).append(wait)
            v = values[label]
            v[0].append(ours)
            if theirs is not None:
                v[1].append(theirs)
            if loss is not None:
                v[2].append(loss)
            if note:
                v[3].append(note)
            print(f"round {r + 1} {label:>22}: peakbench {ours:10.2f} {unit}, reference {theirs} {wait}",
                  file=sys.stderr)
    print(f"{'case':>22} {'peakbench':>12} {'cv':>6} {'reference':>12} {'ratio':>7} {'target':>10}  note")
    failures = 0
    for label, _, direction, target in cases:
        ours, theirs, loss, notes = values[label]
        m_ours = statistics.median(ours)
        cv = statistics.stdev(ours) / statistics.mean(ours) if len(ours) > 1 else float("nan")
        if not theirs:
            print(f"{label:>22} {m_ours:12.2f} {cv:6.1%} {'-':>12} {'-':>7}  {notes[-1] if notes else ''}")
            continue
        m_theirs = statistics.median(theirs)
        ratio = m_ours / m_theirs
        if direction == "info":
            ok, want, verdict = True, "-", "  "
        else:
            ok = ratio >= target if direction == "higher" else ratio <= target
            want = f"{'>=' if direction == 'higher' else '<='} {target:.2f}"
            verdict = "ok" if ok else "MISS"
        failures += not ok
        extra = f"peakbench loss {statistics.median(loss):.1f} %; " if loss else ""
        extra += notes[-1] if notes else ""
        # Which end received and how it waited, in the last round (the server decides `auto`).
        if waits[label][-1]:
            extra = f"{waits[label][-1]}; {extra}"
        # The rounds' own ratios (the two runs of a round are adjacent in time).
        paired = [o / t for o, t in zip(ours, theirs)] if len(ours) == len(theirs) else []
        spread = f"paired {paired_text(paired)}" if paired else ""
        print(f"{label:>22} {m_ours:12.2f} {cv:6.1%} {m_theirs:12.2f} {ratio:7.3f} {want:>7} {verdict}  "
              f"{spread}; {units[label]}; {extra}")
    targeted = sum(c[2] != "info" for c in cases)
    print(f"{targeted - failures} of {targeted} cases meet the target (medians of {opts.rounds} rounds)")
    print(f"[paired]: {ci_note(opts.rounds)}")


if __name__ == "__main__":
    main()
