"""peakbench mem c2c against core-to-core-latency, alternating rounds on the same CPUs.

    python3 bench/c2c.py [--rounds 3] [--cpus 0,1] [--mode cas] [--peakbench PATH]

Each round runs `peakbench mem c2c --json --no-history` and then `core-to-core-latency 1000 300
--csv -b 1|2 --cores LIST` (its half round trips × 2), and records every pair's figure from
both and peakbench's wall time for the whole matrix. It prints, per pair, the median over
rounds of each tool, their min–max, and the median of the rounds' ratios (peakbench / tool)
with its interval, then the matrix's wall time.
"""

import argparse
import json
import statistics
import subprocess
import time

from pair import paired_text


def peakbench(path, cpus, mode):
    start = time.monotonic()
    out = subprocess.run(
        [path, "mem", "c2c", "--json", "--no-history", "--mode", mode, "--cpus", cpus],
        check=True, capture_output=True, text=True).stdout
    wall = time.monotonic() - start
    m = json.loads(out)["results"][0]["params"]["other"]["c2c"]
    return {tuple(p["cpus"]): p["median_ns"] for p in m["pairs"]}, wall


def tool(cpus, mode):
    listed = [int(c) for c in cpus.split(",")]
    out = subprocess.run(
        ["core-to-core-latency", "1000", "300", "--csv", "-b", "1" if mode == "cas" else "2",
         "--cores", cpus], check=True, capture_output=True, text=True).stdout
    rows = [l for l in out.splitlines() if "," in l][-len(listed):]
    pairs = {}
    for i, row in enumerate(rows):
        for j, field in enumerate(row.split(",")[:i]):
            if field.strip():
                a, b = sorted((listed[i], listed[j]))
                pairs[(a, b)] = float(field) * 2
    return pairs


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--cpus", default="0,1")
    ap.add_argument("--mode", default="cas", choices=["cas", "store"])
    ap.add_argument("--peakbench", default="target/release/peakbench")
    args = ap.parse_args()
    ours, theirs, walls = [], [], []
    for r in range(args.rounds):
        pairs, wall = peakbench(args.peakbench, args.cpus, args.mode)
        ours.append(pairs)
        walls.append(wall)
        theirs.append(tool(args.cpus, args.mode))
        print(f"round {r + 1}: " + ", ".join(
            f"{a}-{b} {ours[-1][(a, b)]:.1f} / {theirs[-1].get((a, b), float('nan')):.1f} ns"
            for a, b in sorted(pairs)), flush=True)
    print(f"mode {args.mode}, CPUs {args.cpus}, {args.rounds} alternating rounds "
          "(round trip, ns; core-to-core-latency × 2)")
    for key in sorted(ours[0]):
        a = [o[key] for o in ours]
        b = [t[key] for t in theirs if key in t]
        ratios = [o[key] / t[key] for o, t in zip(ours, theirs) if key in t]
        print(f"  {key[0]}-{key[1]}: peakbench {statistics.median(a):.1f} ({min(a):.1f}–{max(a):.1f}), "
              f"core-to-core-latency {statistics.median(b):.1f} ({min(b):.1f}–{max(b):.1f}), "
              f"ratio {paired_text(ratios)}")
    print(f"peakbench matrix wall time: median {statistics.median(walls):.2f} s "
          f"({min(walls):.2f}–{max(walls):.2f}), process start to exit")


if __name__ == "__main__":
    main()
