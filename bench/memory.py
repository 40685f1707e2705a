#!/usr/bin/env python3
"""peakbench mem against likwid-bench (STREAM copy and triad, load and sum) and an independent C chase.

Alternates the tools round by round with the same threads and the same working set (likwid's
`-w S0:SIZE:THREADS` sizes all streams of all threads together, as peakbench's --size does),
peakbench's threads pinned (--pin) as likwid-bench pins its own, then prints the median of each, the ratio of the medians and peakbench's CV. Both count bytes
the STREAM way: bytes the kernel reads plus bytes it writes, no write-allocate, decimal units.

The latency side compiles bench/chase.c (a random single-cycle chase of 64-byte lines, written
separately from peakbench's) with gcc and compares ns per load at the same working set and
page size, and reports peakbench's L1 latency in cycles at its measured clock.

    apt-get install -y likwid gcc      # reference tools (optional: skipped with a reason)
    cargo build --release
    python3 bench/memory.py --rounds 5 --size 1GiB --latency-size 1GiB
    python3 bench/memory.py --rounds 5 --size 32KiB,512KiB,6MiB --ops read,copy,stream-copy,stream-triad

The machine is shared and noisy: compare medians of alternating runs, never absolute figures.
"""

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
PEAKBENCH = os.environ.get("PEAKBENCH", os.path.join(HERE, "..", "target", "release", "peakbench"))

# peakbench op -> likwid-bench kernel (same counting: loads + stores, 8 B each), at the widest
# vector width the CPU has, as peakbench's memory kernels use it.
LIKWID = {
    "avx512": {"stream-copy": "copy_avx512", "copy": "copy_avx512",
               "stream-triad": "stream_avx512_fma", "read": "load_avx512"},
    "avx2": {"stream-copy": "copy_avx", "copy": "copy_avx", "stream-triad": "stream_avx_fma",
             "read": "load_avx"},
}
# likwid-bench's kernel that, like peakbench's read, uses every byte it loads (a sum): `load`
# discards what it loads, so on a core where a load and an add issue together slower than loads
# alone it reads higher than any kernel that proves its bytes were read.
USES_EVERY_BYTE = {"avx512": "sum_avx512", "avx2": "sum_avx"}


def run(cmd, timeout=600):
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed: {done.stderr.strip()[-500:]}")
    return done.stdout


def size_bytes(text):
    units = {"KIB": 1 << 10, "MIB": 1 << 20, "GIB": 1 << 30, "KB": 10**3, "MB": 10**6, "GB": 10**9}
    m = re.fullmatch(r"(\d+)\s*([KMG]I?B)?", text.strip().upper())
    if not m:
        sys.exit(f"bad size {text}: use e.g. 1GiB")
    return int(m.group(1)) * units.get(m.group(2) or "", 1)


def peakbench_mem(op, threads, size):
    doc = json.loads(run([PEAKBENCH, "mem", "--op", op, "-t", str(threads), "--size", str(size),
                          "-r", "3", "--pin", "--json", "--no-history"]))
    r = doc["results"][0]
    return (r["value"], r["stats"]["cv"] or 0.0, r["params"]["working_set_bytes"],
            r["params"]["other"].get("cache_level") or "memory", r.get("efficiency"))


def likwid(kernel, threads, size):
    out = run(["likwid-bench", "-t", kernel, "-w", f"S0:{size // 1000}kB:{threads}"])
    return float(re.search(r"MByte/s:\s+([\d.]+)", out).group(1)) / 1000.0


def peakbench_latency(size):
    doc = json.loads(run([PEAKBENCH, "mem", "latency", "--sizes", str(size), "-d", "300ms",
                          "-r", "3", "--json", "--no-history"]))
    r = doc["results"][0]
    cycles = next((e["value"] for e in r["extra"] if e["unit"] == "cycles"), None)
    return r["value"], cycles, r["stats"]["cv"] or 0.0


def summary(label, ours, theirs, unit, extra=""):
    mo, mt = statistics.median(ours), statistics.median(theirs)
    spread = f"  peakbench {min(ours):.1f}…{max(ours):.1f}, reference {min(theirs):.1f}…{max(theirs):.1f}"
    print(f"{label:<30} peakbench {mo:8.2f} {unit}  reference {mt:8.2f} {unit}  "
          f"ratio {mo / mt:5.2f}{extra}{spread}", flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--threads", default=f"1,{os.cpu_count()}")
    ap.add_argument("--size", default="1GiB",
                    help="bandwidth working sets, all threads together (a list: e.g. "
                         "32KiB,512KiB,6MiB,1GiB for L1, L2, L3 and memory)")
    ap.add_argument("--latency-size", default="1GiB")
    ap.add_argument("--ops", default="stream-copy,stream-triad,read")
    args = ap.parse_args()
    if not os.path.exists(PEAKBENCH):
        sys.exit("build first: cargo build --release")
    sizes = [size_bytes(s) for s in args.size.split(",")]
    threads = sorted({int(t) for t in args.threads.split(",")})

    isas = json.loads(run([PEAKBENCH, "sysinfo", "--json"]))["peaks"]["cpu"]["isas"]
    width = "avx512" if "avx512" in isas else "avx2"
    kernels = LIKWID[width]
    if shutil.which("likwid-bench"):
        for size in sizes:
            for op in args.ops.split(","):
                for t in threads:
                    ours, theirs, sums, cvs, effs = [], [], [], [], []
                    level = "?"
                    for _ in range(args.rounds):
                        value, cv, ws, level, eff = peakbench_mem(op, t, size)
                        ours.append(value)
                        cvs.append(cv)
                        if eff:
                            effs.append(eff)
                        theirs.append(likwid(kernels[op], t, ws))
                        if op == "read":
                            sums.append(likwid(USES_EVERY_BYTE[width], t, ws))
                    share = f"  {statistics.median(effs):.2f} of peak" if effs else ""
                    summary(f"{level} {op} {t}T vs likwid {kernels[op]}", ours, theirs, "GB/s",
                            f"  CV {statistics.median(cvs) * 100:.1f} %{share}")
                    if sums:
                        summary(f"{level} {op} {t}T vs likwid {USES_EVERY_BYTE[width]}", ours,
                                sums, "GB/s")
    else:
        print("likwid-bench not installed (apt-get install likwid): bandwidth comparison skipped")

    gcc = shutil.which("gcc") or shutil.which("cc")
    if not gcc:
        print("no C compiler (apt-get install gcc): latency comparison skipped")
        return
    with tempfile.TemporaryDirectory() as tmp:
        chase = os.path.join(tmp, "chase")
        run([gcc, "-O2", "-o", chase, os.path.join(HERE, "chase.c")])
        lsize = size_bytes(args.latency_size)
        ours, theirs, l1 = [], [], []
        for _ in range(args.rounds):
            ns, _, _ = peakbench_latency(lsize)
            ours.append(ns)
            theirs.append(float(run([chase, str(lsize), "1.0"]).strip()))
            ns1, cycles, _ = peakbench_latency(4096)
            if cycles:
                l1.append(cycles)
        summary(f"latency {args.latency_size} vs bench/chase.c", ours, theirs, "ns")
        if l1:
            print(f"L1 latency (4 KiB): median {statistics.median(l1):.2f} cycles at the measured "
                  f"clock, {min(l1):.2f}…{max(l1):.2f} over {len(l1)} rounds")


if __name__ == "__main__":
    main()
