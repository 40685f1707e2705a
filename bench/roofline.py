#!/usr/bin/env python3
"""peakbench roofline against peakbench cpu, peakbench mem and likwid-bench: the targets of issue #35.

Each round runs, one after the other so that they alternate:
  1. `peakbench roofline --json` (its wall time is the "under 3 minutes" target when no
     --roofline-args are given);
  2. for every compute ceiling, the `peakbench cpu` command recorded in its `same_as` (the same
     kernel, precision, ISA, FMA, threads and duration);
  3. for every bandwidth roof, the `peakbench mem` command in its `same_as` (the same op,
     working set, block and threads);
  4. likwid-bench's widest triad (`stream_avx512_fma`, else `stream_avx_fma`) on the DRAM
     working set at each thread count (likwid's -w sizes all streams of all threads together,
     as peakbench's --size does; both count 24 B per element, no write-allocate).
Then prints, per figure, the median over the rounds of each side and the ratio of the medians,
against the targets (and the compute ceilings again per GHz of the clock each side measured
right after it, the host's clock drift taken out):
  ceilings / cpu        within ±2 %
  roofs / mem           within ±5 %
  DRAM triad / likwid   ≥ 0.98
  sweep plateaus / the ceiling or roof they meet (the roofline's own self-check)   within ±5 %
  roofline wall time    < 180 s

    apt-get install -y likwid          # optional: the likwid comparison is skipped without it
    cargo build --release
    python3 bench/roofline.py --rounds 3
    python3 bench/roofline.py --rounds 1 --roofline-args "--levels L1 --flops 1,64 -d 50ms"  # smoke

The machine is shared and noisy: read medians of alternating runs on a quiet machine, never a
single figure; pass --pin to pin every peakbench side's threads as likwid-bench pins its own.
"""

import argparse
import json
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
PEAKBENCH = os.environ.get("PEAKBENCH", os.path.join(HERE, "..", "target", "release", "peakbench"))


def run(cmd, timeout=900):
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed: {done.stderr.strip()[-500:]}")
    return done.stdout


def peakbench_json(words, extra):
    argv = [PEAKBENCH] + words + extra + ["--json", "--no-history"]
    return json.loads(run(argv))


def same_as(result, extra):
    """The result of the standalone command a roofline result records."""
    words = shlex.split(result["params"]["other"]["same_as"])[1:]
    doc = peakbench_json(words, extra)
    # `cpu --isa avx512 -p bf16` measures the dot product and the AMX tile: take the result
    # of the same kernel, not the first.
    p = result["params"]
    same = [r for r in doc["results"]
            if all(r["params"].get(k) == p.get(k) for k in ("precision", "isa", "fma", "threads"))]
    return (same or doc["results"])[0]


def per_ghz(result):
    """A compute result's value over the clock measured right after it (its clock_after
    extra), GFLOP/s per GHz; None where it has none."""
    after = [e["value"] for e in result.get("extra") or [] if e["metric"] == "clock_after"]
    return result["value"] / after[0] if after and after[0] > 0 else None


def likwid_triad(kernel, threads, size):
    out = run(["likwid-bench", "-t", kernel, "-w", f"S0:{size // 1000}kB:{threads}"])
    for line in out.splitlines():
        if line.startswith("MByte/s:"):
            return float(line.split()[1]) / 1000.0
    raise RuntimeError(f"no MByte/s in likwid-bench's output: {out[-300:]}")


def key(result):
    o = result["params"]["other"]
    p = result["params"]
    if result["op"] == "compute":
        return ("ceiling", p.get("precision"), p.get("isa"), p.get("fma"), o.get("form"), p["threads"])
    return ("roof", o["level"], o["traffic"], p["threads"])


def name(k):
    if k[0] == "ceiling":
        _, prec, isa, fma, form, t = k
        tail = form or ("fma" if fma else "no-fma" if fma is not None else "")
        return f"ceiling {prec} {isa} {tail} {t}T"
    if k[0] == "roof":
        return f"roof {k[1]} {k[2]} {k[3]}T"
    return " ".join(str(x) for x in k)


def line(label, ours, theirs, target, ok):
    mo, mt = statistics.median(ours), statistics.median(theirs)
    ratio = mo / mt if mt else float("nan")
    verdict = "ok" if ok(ratio) else "MISSES"
    print(f"{label:<38} roofline {mo:9.2f}  other {mt:9.2f}  ratio {ratio:6.3f}  "
          f"target {target:<10} {verdict}", flush=True)
    return ok(ratio)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--pin", action="store_true", help="pin every peakbench side's threads")
    ap.add_argument("--roofline-args", default="", help="extra flags for roofline (a smoke test)")
    args = ap.parse_args()
    if not os.path.exists(PEAKBENCH):
        sys.exit("build first: cargo build --release")
    extra = ["--pin"] if args.pin else []
    roofline_extra = shlex.split(args.roofline_args) + extra
    isas = json.loads(run([PEAKBENCH, "sysinfo", "--json"]))["peaks"]["cpu"]["isas"]
    triad = "stream_avx512_fma" if "avx512" in isas else "stream_avx_fma"
    have_likwid = shutil.which("likwid-bench") is not None

    ours, theirs, walls = {}, {}, []
    # Compute ceilings per GHz of the clock measured right after each side: this host's boost
    # clock moves from minute to minute, and the two sides run minutes apart.
    clocked = {}
    checks = {}
    for round_ in range(args.rounds):
        print(f"round {round_ + 1}/{args.rounds}", file=sys.stderr, flush=True)
        start = time.monotonic()
        doc = peakbench_json(["roofline"], roofline_extra)
        walls.append(time.monotonic() - start)
        results = [r for r in doc["results"] if r["subsystem"] == "roofline"]
        for r in results:
            if r["op"] in ("compute", "bandwidth"):
                k = key(r)
                other = same_as(r, extra)
                ours.setdefault(k, []).append(r["value"])
                theirs.setdefault(k, []).append(other["value"])
                if k[0] == "ceiling" and per_ghz(r) and per_ghz(other):
                    clocked.setdefault(k, ([], []))
                    clocked[k][0].append(per_ghz(r))
                    clocked[k][1].append(per_ghz(other))
        model = next(r for r in results if r["op"] == "model")["params"]["other"]["roofline"]
        for c in model["checks"]:
            checks.setdefault((c["level"], c["plateau"], c["against"], c["threads"]), []).append(
                (c["sweep"], c["ceiling"]))
        if have_likwid:
            for r in results:
                o = r["params"]["other"]
                if r["op"] == "bandwidth" and o["level"] == "DRAM" and o["traffic"] == "triad":
                    k = ("likwid", triad, r["params"]["threads"])
                    ours.setdefault(k, []).append(r["value"])
                    theirs.setdefault(k, []).append(
                        likwid_triad(triad, r["params"]["threads"], r["params"]["working_set_bytes"]))

    met = True
    print("\n# compute ceilings against peakbench cpu (GFLOP/s)")
    for k in sorted((k for k in ours if k[0] == "ceiling"), key=str):
        met &= line(name(k), ours[k], theirs[k], "±2 %", lambda x: abs(x - 1) <= 0.02)
    if clocked:
        print("\n# the same, each side over the clock measured right after it (GFLOP/s per GHz;"
              " not the target's figure: what is left when the clock's drift is taken out)")
        for k in sorted(clocked, key=str):
            line(name(k) + " /GHz", clocked[k][0], clocked[k][1], "±2 %",
                 lambda x: abs(x - 1) <= 0.02)
    print("\n# bandwidth roofs against peakbench mem (GB/s)")
    for k in sorted((k for k in ours if k[0] == "roof"), key=str):
        met &= line(name(k), ours[k], theirs[k], "±5 %", lambda x: abs(x - 1) <= 0.05)
    print(f"\n# DRAM triad against likwid-bench {triad} (GB/s)")
    if not have_likwid:
        print("likwid-bench not installed (apt-get install likwid): skipped")
    for k in sorted((k for k in ours if k[0] == "likwid"), key=str):
        met &= line(f"DRAM triad {k[2]}T", ours[k], theirs[k], ">= 0.98", lambda x: x >= 0.98)
    print("\n# the sweep's plateaus against the ceiling or roof they meet (self-check)")
    for (level, plateau, against, t), pairs in sorted(checks.items(), key=str):
        met &= line(f"{level} {plateau} vs {against} {t}T", [p[0] for p in pairs],
                    [p[1] for p in pairs], "±5 %", lambda x: abs(x - 1) <= 0.05)
    wall = statistics.median(walls)
    ok = wall < 180 or bool(args.roofline_args)
    print(f"\nroofline wall time: median {wall:.1f} s over {len(walls)} runs "
          f"(target < 180 s with defaults) {'ok' if ok else 'MISSES'}")
    print(f"load average at the end: {os.getloadavg()[0]:.2f}")
    sys.exit(0 if met and ok else 1)


if __name__ == "__main__":
    main()
