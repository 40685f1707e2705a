#!/usr/bin/env bash
# Runs every benchmark script of bench/ once, with its smallest settings, so that a change of
# peakbench's output that breaks one (bench/cluster.py died on KeyError: 'curve' for a phase
# before anyone noticed) fails here instead of in a measuring session. The figures printed mean
# nothing: one round, tiny sizes. Prints one line per script and "N passed, N failed, N skipped".
#
#     cargo build --release && bench/smoke.sh              # every script (about 5 minutes)
#     bench/smoke.sh hist cpu                              # only these (tests/bench.rs runs them)
#     PEAKBENCH_MPI=target-mpi/release/peakbench bench/smoke.sh cluster bigdoc slurm
#
# A script whose tool is missing (fio, iperf3, an MPI build of peakbench, Slurm) is skipped with
# the reason; a script that fails prints the end of its output. read-machine.sh and fuzz.sh are
# not run here: the first takes minutes by design, the second needs the nightly toolchain.
set -u
here=$(cd "$(dirname "$0")" && pwd)
export PEAKBENCH=${PEAKBENCH:-$here/../target/release/peakbench}
[ -x "$PEAKBENCH" ] || { echo "build first: cargo build --release" >&2; exit 2; }
scratch=$(mktemp -d /var/tmp/peakbench-smoke.XXXXXX)
trap 'rm -rf "$scratch"' EXIT
passed=0 failed=0 skipped=0

need() { # need TOOL...: the first missing one, or nothing
    for tool in "$@"; do command -v "$tool" >/dev/null || { echo "$tool"; return; }; done
}

smoke() { # smoke NAME MISSING COMMAND...
    local name=$1 missing=$2
    shift 2
    if [ -n "$missing" ]; then
        echo "skipped $name: $missing not installed"
        skipped=$((skipped + 1))
        return
    fi
    local start=$SECONDS rc=0
    timeout 600 "$@" >"$scratch/$name.log" 2>&1 || rc=$?
    # Exit 1 is a script's "a target was missed", which one round at smoke size may well be;
    # a traceback, a time-out or any other exit is a broken script.
    if [ "$rc" -le 1 ] && ! grep -q "^Traceback (most recent call last)" "$scratch/$name.log"; then
        echo "passed  $name ($((SECONDS - start)) s$([ "$rc" = 1 ] && echo ", a target missed"))"
        passed=$((passed + 1))
    else
        echo "FAILED  $name ($((SECONDS - start)) s, exit $rc): $*"
        tail -15 "$scratch/$name.log" | sed 's/^/    /'
        failed=$((failed + 1))
    fi
}

mpi=${PEAKBENCH_MPI:-}
mpi_missing=$([ -n "$mpi" ] && [ -x "$mpi" ] || echo "an MPI build of peakbench (PEAKBENCH_MPI)")
wanted=${*:-hist cpu memory disk net findings wakeup roofline hostile cluster bigdoc slurm}
for name in $wanted; do
    case $name in
    hist) smoke hist "" python3 "$here/hist.py" --rounds 1 --results 20 ;;
    cpu) smoke cpu "" python3 "$here/cpu.py" --rounds 1 --threads 1 --n 400 --gemm-n 200 ;;
    memory) smoke memory "$(need gcc)" python3 "$here/memory.py" --rounds 1 --threads 1 \
        --size 32MiB --latency-size 8MiB ;;
    disk) smoke disk "$(need fio)" python3 "$here/disk.py" --rounds 1 --duration 1 --ramp 0 \
        --size 64MiB --no-matrix --settle 0 --dir "$scratch" ;;
    net) smoke net "$(need iperf3)" python3 "$here/net.py" --rounds 1 --duration 1 --omit 0 ;;
    findings) smoke findings "" python3 "$here/findings.py" --runs 1 ;;
    wakeup) smoke wakeup "$(need fio)" python3 "$here/wakeup.py" --rounds 1 --duration 0.5 \
        --dir "$scratch" ;;
    roofline) smoke roofline "" python3 "$here/roofline.py" --rounds 1 \
        --roofline-args="--levels L1 --flops 1" ;;
    hostile) smoke hostile "" python3 "$here/hostile.py" --quick --runs 1 --duration 200ms ;;
    cluster) PEAKBENCH=$mpi smoke cluster "$mpi_missing" python3 "$here/cluster.py" --rounds 1 \
        --repetitions 1 --duration 1 --hpl-n 200 ;;
    bigdoc) PEAKBENCH=$mpi smoke bigdoc "$mpi_missing" python3 "$here/bigdoc.py" \
        --template-hosts 2 --hosts 10 ;;
    slurm) PEAKBENCH=$mpi smoke slurm "${mpi_missing:-$(need slurmctld)}" python3 "$here/slurm.py" \
        --rounds 1 --hosts 2 ;;
    *) echo "unknown script '$name'" >&2; exit 2 ;;
    esac
done
echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" = 0 ]
