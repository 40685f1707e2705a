#!/usr/bin/env python3
"""Where a QD 1 random read's time goes after the disk interrupt, peakbench against fio.

For each round, runs the same random 4 KiB QD 1 O_DIRECT io_uring job with fio and with
peakbench (alternating which goes first) under kernel tracing, and measures one step per I/O:
from the end of the block softirq that completes the request and wakes the waiting thread
(`irq:softirq_exit`, vec=4) to that thread posting the completion (`io_uring:io_uring_complete`).
No user code runs in that step. On this project's VM it takes either about 8.5 us or about
12.5 us, in streaks of tens to hundreds of milliseconds; the script prints, per run, the median,
the share of I/Os in the fast streak (5 to 10.5 us), which is where fio and peakbench differed
at QD 1, and which tasks were woken by their sleep timers on the CPU the I/O thread ran on: the
fast streaks go with some task (fio's main thread, peakbench's coordinator, or another process)
waking every 10 ms or so on that CPU.

Needs root (tracefs at /sys/kernel/tracing, mounted if it is not) and fio. The test file is
created with --keep in a temp dir under --dir and removed at the end.

    cargo build --release
    python3 bench/wakeup.py --rounds 8 --duration 1 --dir /var/tmp
"""

import argparse
import collections
import glob
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
PEAKBENCH = os.environ.get("PEAKBENCH", os.path.join(HERE, "..", "target", "release", "peakbench"))
TRACING = "/sys/kernel/tracing"
EVENTS = ["irq/softirq_exit", "io_uring/io_uring_complete", "timer/hrtimer_expire_entry",
          "sched/sched_wakeup"]


def write(name, value):
    with open(os.path.join(TRACING, name), "w") as f:
        f.write(value)


def tsc_ticks_per_us():
    """The trace clock is the TSC: calibrate it against CLOCK_MONOTONIC with two trace markers
    written 0.5 s apart (each marker's own latency is microseconds, 10^-5 of the span)."""
    write("tracing_on", "0")
    write("trace", "")
    write("trace_clock", "x86-tsc")
    write("tracing_on", "1")
    marks = []
    with open(os.path.join(TRACING, "trace_marker"), "w") as marker:
        for i in range(2):
            marks.append(time.monotonic_ns())
            marker.write(f"peakbench-calibration {i}\n")
            marker.flush()
            time.sleep(0.5)
    write("tracing_on", "0")
    with open(os.path.join(TRACING, "trace")) as f:
        stamps = [int(m) for m in re.findall(r"\s(\d+): tracing_mark_write: peakbench-calibration", f.read())]
    write("trace", "")
    if len(stamps) != 2:
        sys.exit("could not calibrate the x86-tsc trace clock (trace markers missing)")
    return (stamps[1] - stamps[0]) / ((marks[1] - marks[0]) / 1000)


def traced(cmd):
    """Runs cmd with the two events traced and returns the trace text."""
    write("tracing_on", "0")
    write("trace", "")
    write("buffer_size_kb", "32768")
    write("trace_clock", "x86-tsc")
    for e in EVENTS:
        write(f"events/{e}/enable", "1")
    write("tracing_on", "1")
    try:
        subprocess.run(cmd, capture_output=True, check=True, timeout=120)
    finally:
        write("tracing_on", "0")
        for e in EVENTS:
            write(f"events/{e}/enable", "0")
    with open(os.path.join(TRACING, "trace")) as f:
        text = f.read()
    write("trace", "")
    return text


def wake_steps(text, ticks_per_us):
    """Microseconds from each block softirq's end to the next io_uring completion."""
    steps, last = [], None
    for line in text.splitlines():
        if line.startswith("#"):
            continue
        m = re.search(r"\s(\d+): (softirq_exit: vec=4|io_uring_complete)", line)
        if not m:
            continue
        if m.group(2).startswith("softirq"):
            last = int(m.group(1))
        elif last is not None:
            steps.append((int(m.group(1)) - last) / ticks_per_us)
            last = None
    return steps


def timer_wakers(text):
    """Tasks woken by their own sleep timer on the CPU that ran the I/O completions, with how
    often: a task doing so every few ms there is what the fast streaks go with."""
    cpus = collections.Counter(re.findall(r"\[(\d+)\][^\n]*io_uring_complete", text))
    if not cpus:
        return "-"
    (io_cpu, _), = cpus.most_common(1)
    # the timer's expiry and, on the next line and the same CPU, the wake-up it causes
    woken = re.findall(r"\[(\d+)\][^\n]*hrtimer_expire_entry:[^\n]*function=hrtimer_wakeup[^\n]*\n"
                       r"[^\n]*\[\1\][^\n]*sched_wakeup: comm=(\S+)", text)
    counts = collections.Counter(comm for cpu, comm in woken if cpu == io_cpu)
    return ", ".join(f"{comm} {n}" for comm, n in counts.most_common()) or "-"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--duration", type=float, default=1, help="seconds per run")
    parser.add_argument("--dir", default="/var/tmp", help="disk-backed directory for the test file")
    args = parser.parse_args()
    if os.geteuid() != 0:
        sys.exit("needs root, for tracefs")
    if not shutil.which("fio"):
        sys.exit("fio is not installed: apt-get install fio")
    if not os.path.exists(os.path.join(TRACING, "trace")):
        subprocess.run(["mount", "-t", "tracefs", "nodev", TRACING], check=True)
    ticks = tsc_ticks_per_us()
    base = tempfile.mkdtemp(prefix="peakbench-wakeup-", dir=args.dir)
    try:
        ours = [PEAKBENCH, "disk", "--dir", base, "--size", "1GiB", "--keep", "--op", "randread",
                "-b", "4KiB", "--qd", "1", "-t", "1", "-d", f"{args.duration}s", "--ramp", "0.2s",
                "-r", "1", "--json", "--no-history"]
        subprocess.run(ours, capture_output=True, check=True)  # creates and fills the file
        (path,) = glob.glob(os.path.join(base, "peakbench-*.tmp"))
        with open(path, "rb") as f:  # the file's header says where its data starts
            data_offset = int(re.search(rb"data_offset=(\d+)", f.read(4096)).group(1))
        fio = ["fio", "--name=wakeup", f"--filename={path}", "--rw=randread", "--bs=4096",
               "--iodepth=1", "--ioengine=io_uring", "--direct=1", f"--offset={data_offset}",
               f"--size={1 << 30}", "--norandommap", "--randrepeat=0", "--thread",
               "--time_based", f"--runtime={int(args.duration * 1000)}ms", "--ramp_time=200ms",
               "--output-format=json"]
        share = {"fio": [], "peakbench": []}
        print(f"{'round':>5} {'tool':>10} {'I/Os':>7} {'median us':>10} {'fast share':>11}  "
              "timer wake-ups on the I/O CPU")
        for r in range(args.rounds):
            order = [("fio", fio), ("peakbench", ours)]
            for name, cmd in order if r % 2 == 0 else order[::-1]:
                text = traced(cmd)
                steps = wake_steps(text, ticks)
                fast = sum(1 for s in steps if 5 < s < 10.5) / len(steps)
                share[name].append(fast)
                print(f"{r:5d} {name:>10} {len(steps):7d} {statistics.median(steps):10.2f} "
                      f"{fast:11.2f}  {timer_wakers(text)}", flush=True)
        for name, values in share.items():
            print(f"{name}: median fast share {statistics.median(values):.2f} "
                  f"(mean {statistics.mean(values):.2f}) over {len(values)} runs")
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
