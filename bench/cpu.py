#!/usr/bin/env python3
"""peakbench cpu against likwid-bench's peakflops kernels, every BLAS present and hpcc's HPL.

Alternates the tools round by round with the same threads (and the same n for the solve), then
prints the median of each, the ratio of the medians, peakbench's CV, and its efficiency against
the peak at the clock the cores actually ran at (measured by peakbench's add-chain probe).

DGEMM and Linpack run with `--blas all`: every engine present (peakbench's built-in engine,
OpenBLAS, BLIS, MKL) in the same round, each with the fraction of peak its result states, then the
default (`auto`, the engine a probe picks) and hpcc's HPL, alternating round by round. The targets:
DGEMM n=4000 >= 0.85 of peak at 1 and all cores, Linpack n=10000 all cores >= 0.70 with CV < 3 %,
and the default never slower than the best engine present. `--gemm-precision f64,f32` measures SGEMM
the same way, against the f32 peak, and `--linpack-precision f64,f32` sgesv beside dgesv (hpcc's HPL
is f64 only).

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


def engines(subcommand, n, threads, reps, blas="all", precision=None):
    """One run of `cpu SUBCOMMAND --blas BLAS` (`-p PRECISION` when given):
    {engine: (GFLOP/s, fraction of peak, CV)}."""
    extra = ["-p", precision] if precision else []
    doc = json.loads(run([PEAKBENCH, "cpu", subcommand, "-n", str(n), "-t", str(threads),
                          "-r", str(reps), "--blas", blas, "--json", "--no-history"] + extra))
    out = {}
    for r in doc["results"]:
        other = r["params"]["other"]
        name = other.get("dense_engine", "?") if blas == "all" else f"auto→{other.get('dense_engine', '?')}"
        if other.get("dense_engine") == "builtin" and other.get("gemm_kernel"):
            # Which of peakbench's micro-kernels ran (avx512 16x12, avx2-fma 8x6, portable).
            name += f" ({other['gemm_kernel']})"
        out[name] = (r["value"], r.get("efficiency"), (r.get("stats") or {}).get("cv"))
    return out


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
    ap.add_argument("--gemm-precision", default="f64",
                    help="element types of the GEMM comparison, e.g. f64,f32")
    ap.add_argument("--linpack-precision", default="f64",
                    help="element types of the Linpack comparison, e.g. f64,f32 (hpcc: f64 only)")
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

    for precision in args.gemm_precision.split(","):
        for threads in sorted({1, args.threads}):
            table = {}
            for _ in range(args.rounds):
                for blas in ("all", "auto"):
                    rows = engines("gemm", args.gemm_n, threads, 3, blas, precision)
                    for name, row in rows.items():
                        table.setdefault(name, []).append(row)
            engine_table(f"gemm {precision} n={args.gemm_n} {threads}T", table)
    print(f"[paired]: {ci_note(args.rounds)}")

    if args.skip_linpack:
        return
    have_hpcc = shutil.which("hpcc") and shutil.which("mpirun")
    if not have_hpcc:
        print("hpcc or mpirun not installed (apt-get install hpcc openmpi-bin): HPL comparison skipped")
    for precision in args.linpack_precision.split(","):
        table, ours, theirs = {}, [], []
        for _ in range(args.rounds):
            for name, row in engines("linpack", args.n, args.threads, 1, "all", precision).items():
                table.setdefault(name, []).append(row)
            auto = engines("linpack", args.n, args.threads, 1, "auto", precision)
            for name, row in auto.items():
                table.setdefault(name, []).append(row)
            # HPL solves in f64 only.
            if have_hpcc and precision == "f64":
                theirs.append(hpcc_linpack(args.n, args.threads))
                ours.append(next(iter(auto.values()))[0])
        engine_table(f"linpack {precision} n={args.n} {args.threads}T", table)
        if theirs:
            summary(f"linpack n={args.n} {args.threads}T auto vs hpcc HPL", ours, theirs,
                    "GFLOP/s")


def engine_table(label, table):
    """Median GFLOP/s, fraction of peak and CV across rounds of each engine, and the default
    (auto) against the best engine present."""
    best = 0.0
    for name, rows in table.items():
        values = [r[0] for r in rows]
        effs = [r[1] for r in rows if r[1] is not None]
        med = statistics.median(values)
        cv = statistics.stdev(values) / statistics.mean(values) if len(values) > 1 else 0.0
        eff = f"{statistics.median(effs) * 100:5.1f} % of peak" if effs else "peak unknown"
        print(f"{label:<26} {name:<18} {med:9.1f} GFLOP/s  {eff}  CV across rounds {cv * 100:.1f} %"
              f"  ({len(values)} rounds)")
        if not name.startswith("auto"):
            best = max(best, med)
    autos = [rows for name, rows in table.items() if name.startswith("auto")]
    if autos and best > 0:
        auto = statistics.median([r[0] for rows in autos for r in rows])
        print(f"{label:<26} auto / best engine present: {auto / best:.2f}")


if __name__ == "__main__":
    main()
