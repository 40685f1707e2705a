#!/usr/bin/env python3
"""peakbench disk against fio, identical jobs on the same file, side by side.

Even rounds run one peakbench case with --reference: peakbench measures, then fio runs the
identical job (same file and regions, block, jobs, queue depth, io_uring, O_DIRECT, ramp and
duration) right after it; odd rounds run that exact fio command first, then peakbench, so
neither tool always inherits caches the other warmed. The script prints the median and spread
(min..max) of each tool, the ratio of the medians, and the median of the rounds' own ratios with
a distribution-free confidence interval; for the IOPS cases, the same for p99 latency. The test
file is created once (--keep) in a temp dir and removed at the end. Then the users' matrix
(seqread, randread, rewrite x 8 B, 8 KB, 8 MB, 80 MB x 1, 2, 4, 8 threads) runs as one
command, briefly, to show that it does.

    apt-get install -y fio          # the reference tool
    cargo build --release
    python3 bench/disk.py --rounds 4 --duration 10 --dir /var/tmp --huge-pages 64

peakbench puts I/O buffers of 64 KiB and more on transparent huge pages; fio's land on 4 KiB
pages, and on a virtio disk (max_segments 254) a 1 MiB I/O of 256 scattered pages reaches the
disk split, which costs fio half its sequential throughput here. peakbench gives fio
--iomem=shmhuge when the system has reserved huge pages free (it never reserves them itself);
--huge-pages N reserves them for the run (root) and restores the old value at the end.

The machine is shared and noisy: compare medians of alternating runs, never absolute figures.
"""

import argparse
import json
import math
import os
import re
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from pair import ci_note, median_ci, paired_text  # noqa: E402
PEAKBENCH = os.environ.get("PEAKBENCH", os.path.join(HERE, "..", "target", "release", "peakbench"))

# (op, block, queue depth, headline): the cases compared with fio, each by its headline figure.
CASES = [
    ("seqread", "1MiB", 1, "MB/s"),
    ("seqread", "1MiB", 8, "MB/s"),
    ("seqwrite", "1MiB", 1, "MB/s"),
    ("seqwrite", "1MiB", 8, "MB/s"),
    ("randread", "4KiB", 1, "IOPS"),
    ("randread", "4KiB", 32, "IOPS"),
    ("randwrite", "4KiB", 32, "IOPS"),
]


def run(cmd, timeout=3600):
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed: {done.stderr.strip()[-500:]}")
    return done.stdout


def peakbench_case(directory, size, op, block, qd, duration, ramp, reference):
    cmd = [PEAKBENCH, "disk", "--dir", directory, "--size", size, "--keep",
           "--op", op, "-b", block, "--qd", str(qd), "-t", "1",
           "-d", f"{duration}s", "--ramp", f"{ramp}s", "-r", "1", "--json", "--no-history"]
    return json.loads(run(cmd + (["--reference"] if reference else [])))["results"][0]


def fio_value(command, unit):
    job = json.loads(run(shlex.split(command)))["jobs"][0]
    bw = sum(job[d]["bw_bytes"] for d in ("read", "write"))
    iops = sum(job[d]["iops"] for d in ("read", "write"))
    main = max(("read", "write"), key=lambda d: job[d]["total_ios"])
    p99 = job[main]["lat_ns"]["percentile"]["99.000000"]
    return (iops if unit == "IOPS" else bw / 1e6), p99


def one_round(index, directory, size, op, block, qd, duration, ramp, unit, command):
    """Even rounds: peakbench, then fio (its --reference run); odd rounds: fio first, then
    peakbench, so that neither tool always finds the host's caches warmed by the other."""
    if index % 2 == 0 or command is None:
        r = peakbench_case(directory, size, op, block, qd, duration, ramp, True)
        ref = r["reference"]
        if ref["value"] is None:
            raise RuntimeError(f"fio gave no value: {ref['note']}")
        fio_p99 = re.search(r"p99 (\d+) ns", ref["note"] or "")
        return (r["value"], ref["value"], r["latency_ns"]["p99"],
                float(fio_p99.group(1)) if fio_p99 else None, ref["command"])
    theirs, their_p99 = fio_value(command, unit)
    r = peakbench_case(directory, size, op, block, qd, duration, ramp, False)
    return r["value"], theirs, r["latency_ns"]["p99"], their_p99, command


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--duration", type=float, default=10, help="seconds per run (each tool)")
    parser.add_argument("--ramp", type=float, default=1)
    parser.add_argument("--size", default="1GiB")
    parser.add_argument("--dir", default="/var/tmp", help="disk-backed directory for the test file (never inside the repository)")
    parser.add_argument("--no-matrix", action="store_true")
    parser.add_argument("--huge-pages", type=int, default=0,
                        help="reserve this many 2 MiB huge pages (vm.nr_hugepages) for the run and "
                             "restore the old value after, so fio's 1 MiB buffers sit on huge pages "
                             "(--iomem=shmhuge) as peakbench's do; needs root; 0 leaves the system alone")
    parser.add_argument("--settle", type=float, default=3,
                        help="seconds of quiet (after a sync) before each round, so the host's write-back "
                             "of one round's writes does not land on the next")
    parser.add_argument("-v", "--verbose", action="store_true",
                        help="print each round's values to stderr as it ends")
    parser.add_argument("--only", help="run only cases whose label (e.g. 'randread 4KiB qd32') contains this text")
    args = parser.parse_args()
    if not shutil.which("fio"):
        sys.exit("fio is not installed: apt-get install fio")
    base = tempfile.mkdtemp(prefix="peakbench-bench-", dir=args.dir)
    nr_hugepages = "/proc/sys/vm/nr_hugepages"
    old_huge = None
    if args.huge_pages:
        with open(nr_hugepages) as f:
            old_huge = f.read().strip()
        with open(nr_hugepages, "w") as f:
            f.write(str(args.huge_pages))
        with open(nr_hugepages) as f:
            print(f"vm.nr_hugepages {old_huge} -> {f.read().strip()} for this run", flush=True)
    try:
        print(f"{'case':<22} {'peakbench':>10} {'spread':>17} {'fio':>10} {'spread':>17} "
              f"{'ratio':>6} {'paired [CI]':>17}  {'p99 ours/fio (us)':>20} {'p99 ratio':>9} "
              f"{'paired [CI]':>17}")
        commands = []
        for op, block, qd, unit in CASES:
            if args.only and args.only not in f"{op} {block} qd{qd}":
                continue
            ours, theirs, p99s, fio_p99s = [], [], [], []
            command = None
            for index in range(args.rounds):
                os.sync()
                time.sleep(args.settle)
                o, t, p, fp, command = one_round(index, base, args.size, op, block, qd,
                                                 args.duration, args.ramp, unit, command)
                ours.append(o)
                theirs.append(t)
                if args.verbose:
                    first = "peakbench" if index % 2 == 0 else "fio"
                    print(f"  round {index} ({first} first): peakbench {o:.0f}, fio {t:.0f}, "
                          f"ratio {o / t:.3f}, p99 {p / 1e3:.1f} / "
                          f"{fp / 1e3 if fp else float('nan'):.1f} us", file=sys.stderr, flush=True)
                if fp:
                    p99s.append(p)
                    fio_p99s.append(fp)
            commands.append(command)
            mo, mt = statistics.median(ours), statistics.median(theirs)
            # Each round's two runs are adjacent in time: their ratio cancels most of the
            # host's slow drift, so the median of the rounds' ratios is the steadier figure.
            paired = [o / t for o, t in zip(ours, theirs)]
            lat = ""
            if unit == "IOPS" and fio_p99s:
                po, pf = statistics.median(p99s), statistics.median(fio_p99s)
                lat = (f"{po / 1e3:9.1f} / {pf / 1e3:<9.1f} {po / pf:9.2f} "
                       f"{paired_text([o / t for o, t in zip(p99s, fio_p99s)])}")
            print(f"{op + ' ' + block + ' qd' + str(qd):<22} {mo:10.0f} "
                  f"{min(ours):8.0f}..{max(ours):<8.0f}{mt:10.0f} {min(theirs):8.0f}..{max(theirs):<8.0f}"
                  f"{mo / mt:6.2f} {paired_text(paired)}  {lat}   ({unit})", flush=True)
        print(f"\n[CI]: {ci_note(args.rounds)}")
        print("\nfio commands (as peakbench ran them):")
        for c in commands:
            print("  " + c)
        if not args.no_matrix:
            start = time.time()
            doc = json.loads(run([PEAKBENCH, "disk", "--dir", base, "--size", args.size, "--keep",
                                  "--op", "seqread,randread,rewrite", "-b", "8B,8KB,8MB,80MB",
                                  "-t", "1,2,4,8", "--buffered-if-unaligned",
                                  "-d", "300ms", "--ramp", "0", "-r", "1", "--json",
                                  "--no-history"]))
            print(f"\nusers' matrix: {len(doc['results'])} results in one command, "
                  f"{time.time() - start:.0f} s (8B and 8KB buffered, labelled)")
    finally:
        shutil.rmtree(base, ignore_errors=True)
        if old_huge is not None:
            with open(nr_hugepages, "w") as f:
                f.write(old_huge)


if __name__ == "__main__":
    main()
