#!/usr/bin/env python3
"""peakbench cpu against likwid-bench's peakflops kernels, OpenBLAS's DGEMM and hpcc's HPL.

Alternates the tools round by round with the same threads (and the same n for the solve), then
prints the median of each, the ratio of the medians, peakbench's CV, and its efficiency against
the peak at the clock the cores actually ran at (measured by peakbench's add-chain probe).

    apt-get install -y likwid hpcc openmpi-bin libopenblas0-pthread   # reference tools (optional)
    cargo build --release
    python3 bench/cpu.py --rounds 5 --threads 2 --n 10000

The machine is shared and noisy: compare medians of alternating runs, never absolute figures.
hpcc's HPL speed depends on the BLAS Debian links it with: libblas3 (reference, slow) or
OpenBLAS (libopenblas0-pthread), whose kernels follow the CPU it detects; set
OPENBLAS_CORETYPE (e.g. SkylakeX) to force its AVX-512 kernels on a CPU it does not know.
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

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pair import ci_note, paired_text  # noqa: E402
from hpcc import input_file  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
PEAKBENCH = os.environ.get("PEAKBENCH", os.path.join(HERE, "..", "target", "release", "peakbench"))



def run(cmd, cwd=None, timeout=1800):
    done = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed: {done.stderr.strip()[-500:]}")
    return done.stdout


def widest_isa():
    """The widest vector ISA this CPU has, as peakbench's inventory reports it."""
    doc = json.loads(run([PEAKBENCH, "sysinfo", "--json"]))
    return doc["peaks"]["cpu"]["isas"][-1]


def peakbench_flops(precision, isa, threads):
    doc = json.loads(run([PEAKBENCH, "cpu", "-p", precision, "--isa", isa, "--fma", "yes",
                          "-t", str(threads), "-d", "1s", "-r", "3", "--json", "--no-history"]))
    result = doc["results"][0]
    factors = doc["peaks"]["cpu"]["factors"]
    row = next(r for r in doc["peaks"]["cpu"]["table"]
               if r["precision"] == precision and r["isa"] == isa and r["fma"])
    ghz = factors["measured_ghz"]["value"]
    cores = min(threads, factors["cores"]["value"])
    peak_measured_clock = cores * ghz * row["per_cycle_per_core"] if ghz else None
    return result["value"], result["stats"]["cv"], peak_measured_clock, ghz


def likwid_flops(precision, isa, threads):
    width = {"avx512": "avx512", "avx2": "avx"}[isa]
    kernel = f"peakflops_{width}_fma" if precision == "f64" else f"peakflops_sp_{width}_fma"
    # 32 kB per thread stays in L1, as likwid's documentation suggests for peakflops.
    out = run(["likwid-bench", "-t", kernel, "-W", f"N:{32 * threads}kB:{threads}"])
    return float(re.search(r"MFlops/s:\s+([\d.]+)", out).group(1)) / 1000.0


def peakbench_linpack(n, threads):
    doc = json.loads(run([PEAKBENCH, "cpu", "linpack", "-n", str(n), "-t", str(threads),
                          "-r", "1", "--json", "--no-history"]))
    return doc["results"][0]["value"]


def hpcc_linpack(n, threads):
    with tempfile.TemporaryDirectory() as tmp:
        p, q = (1, threads) if threads > 1 else (1, 1)
        with open(os.path.join(tmp, "hpccinf.txt"), "w") as f:
            f.write(input_file(n, nb=192, p=p, q=q))
        env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
        cmd = ["mpirun", "--allow-run-as-root", "--oversubscribe", "-np", str(p * q), "hpcc"]
        subprocess.run(cmd, cwd=tmp, capture_output=True, text=True, timeout=3600, env=env)
        text = open(os.path.join(tmp, "hpccoutf.txt")).read()
        return float(re.search(r"HPL_Tflops=([\d.eE+-]+)", text).group(1)) * 1000.0


def summary(label, ours, theirs, unit, extra=""):
    mo, mt = statistics.median(ours), statistics.median(theirs)
    paired = paired_text([o / t for o, t in zip(ours, theirs)])
    print(f"{label:<34} peakbench {mo:9.1f} {unit}  reference {mt:9.1f} {unit}  "
          f"ratio {mo / mt:5.2f}  paired {paired}{extra}")


def peakbench_gemm(n, threads):
    """One round: peakbench's DGEMM and, right after it in the same run, the reference
    peakbench itself ran (OpenBLAS cblas_dgemm); the command comes from the JSON."""
    doc = json.loads(run([PEAKBENCH, "cpu", "gemm", "-n", str(n), "-t", str(threads),
                          "-r", "3", "--reference", "--json", "--no-history"]))
    r = doc["results"][0]
    ref = r.get("reference") or {}
    return r["value"], ref.get("value"), ref.get("command", ""), r["params"]["other"].get("library")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--n", type=int, default=10000, help="order of the Linpack/HPL solve")
    ap.add_argument("--gemm-n", type=int, default=4000, help="order of the DGEMM comparison")
    ap.add_argument("--skip-linpack", action="store_true")
    args = ap.parse_args()
    if not os.path.exists(PEAKBENCH):
        sys.exit("build first: cargo build --release")

    isa = widest_isa()
    if isa not in ("avx512", "avx2"):
        print(f"the widest ISA here is {isa}: likwid-bench has no FMA peakflops kernel for it")
    elif shutil.which("likwid-bench"):
        for precision in ("f64", "f32"):
            ours, theirs, cvs, eff = [], [], [], []
            for _ in range(args.rounds):
                value, cv, peak, _ = peakbench_flops(precision, isa, args.threads)
                ours.append(value)
                cvs.append(cv or 0.0)
                if peak:
                    eff.append(value / peak)
                theirs.append(likwid_flops(precision, isa, args.threads))
            extra = f"  CV {statistics.median(cvs) * 100:.1f} %"
            if eff:
                extra += f"  of peak at measured clock {statistics.median(eff) * 100:.1f} %"
            summary(f"{precision} {isa} fma {args.threads}T vs likwid", ours, theirs,
                    "GFLOP/s", extra)
    else:
        print("likwid-bench not installed (apt-get install likwid): peakflops comparison skipped")

    for threads in sorted({1, args.threads}):
        ours, theirs, command, library = [], [], "", ""
        for _ in range(args.rounds):
            value, reference, command, library = peakbench_gemm(args.gemm_n, threads)
            if reference:
                ours.append(value)
                theirs.append(reference)
        if theirs:
            summary(f"gemm n={args.gemm_n} {threads}T vs cblas_dgemm", ours, theirs, "GFLOP/s",
                    f"  ({library}; reference: {command})")
        else:
            print(f"gemm: no reference value ({command or 'OpenBLAS not installed'})")
    print(f"[paired]: {ci_note(args.rounds)}")

    if args.skip_linpack:
        return
    if shutil.which("hpcc") and shutil.which("mpirun"):
        ours, theirs = [], []
        for _ in range(args.rounds):
            ours.append(peakbench_linpack(args.n, args.threads))
            theirs.append(hpcc_linpack(args.n, args.threads))
        summary(f"linpack n={args.n} {args.threads}T vs hpcc HPL", ours, theirs, "GFLOP/s")
    else:
        print("hpcc or mpirun not installed (apt-get install hpcc openmpi-bin): HPL comparison skipped")


if __name__ == "__main__":
    main()
