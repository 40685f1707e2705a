#!/usr/bin/env bash
# Reads this machine into a fixture folder the way ../shared/machines/README.md describes, so
# the tests can replay it (tests/machines.rs): /proc, lscpu, raw CPUID, the sysfs cache folders,
# an independent clock reading (bench/clock.c) and, where the CPU has AVX-512, the clock under
# 512-bit FMAs (bench/licence.c), and peakbench's own sysinfo, CPU, latency, core-to-core and
# quick runs.
#
#     bench/read-machine.sh DIR [PEAKBENCH]
#
# Each step is bounded by `timeout` and may fail on its own (a sandbox without sysfs caches,
# without io_uring for the quick run's disk cases): what it could read is kept, and
# `stderr.txt` holds what each step printed on stderr, and which step failed; `steps.txt` holds
# each step's wall time and exit status. The short steps run first, so that a machine lent for
# minutes gives them even if the long ones are cut. Where gcc is missing, CLOCKCHECK and
# LICENCECHECK name prebuilt bench/clock.c and bench/licence.c; READ_MACHINE_QUICK=0 leaves out
# the quick run.
set -u
out=${1:?usage: bench/read-machine.sh DIR [PEAKBENCH]}
pb=${2:-target/release/peakbench}
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out"
: >"$out/stderr.txt"
: >"$out/steps.txt"
step() { # step FILE TIMEOUT COMMAND...: COMMAND's stdout into FILE, its stderr and failure into stderr.txt
    local file=$1 limit=$2 start status=0
    shift 2
    start=$(date +%s.%N)
    timeout "$limit" "$@" >"$out/$file" 2>>"$out/stderr.txt" || status=$?
    [ "$status" = 0 ] || echo "$file: '$*' exited $status" >>"$out/stderr.txt"
    echo "$file $(awk "BEGIN { printf \"%.1f\", $(date +%s.%N) - $start }") s, exit $status" >>"$out/steps.txt"
}
cat /proc/cpuinfo >"$out/cpuinfo.txt"
cat /proc/meminfo >"$out/meminfo.txt"
step lscpu.json 20 lscpu -J
if command -v cpuid >/dev/null; then step cpuid-raw.txt 60 cpuid -r; fi
for index in /sys/devices/system/cpu/cpu0/cache/index*; do
    [ -d "$index" ] || continue
    mkdir -p "$out/sys/cpu0-cache/$(basename "$index")"
    for f in level type size shared_cpu_list coherency_line_size ways_of_associativity number_of_sets; do
        cat "$index/$f" >"$out/sys/cpu0-cache/$(basename "$index")/$f" 2>/dev/null
    done
done
{
    uname -r
    grep PRETTY_NAME /etc/os-release
    nproc
    date -u +%F
} >"$out/os.txt"
clock=$(mktemp)
if gcc -O2 -o "$clock" "$here/clock.c" 2>/dev/null || cp "${CLOCKCHECK:-/nonexistent}" "$clock" 2>/dev/null; then
    step clock-independent.txt 30 "$clock"
fi
rm -f "$clock"
if grep -qw avx512f /proc/cpuinfo &&
    { gcc -O2 -mavx512f -o "$clock" "$here/licence.c" 2>/dev/null || cp "${LICENCECHECK:-/nonexistent}" "$clock" 2>/dev/null; }; then
    step clock-licence.txt 60 "$clock"
fi
rm -f "$clock"
n=$(nproc)
step peakbench-sysinfo.json 60 "$pb" sysinfo --json
# The core-to-core matrix (about 10 s at any size: the budget is split between the pairs).
step peakbench-mem-c2c.json 120 "$pb" mem c2c --json --no-history
step peakbench-mem-latency.json 120 "$pb" mem latency --json --no-history
step peakbench-cpu-all.json 300 "$pb" cpu --precision i8,i16,i32,i64,f16,bf16,f32,f64 --isa all \
    --fma both --threads "1,$n" --duration 300ms -r 3 --json --no-history
if [ "${READ_MACHINE_QUICK:-1}" != 0 ]; then
    step peakbench-quick.json 180 "$pb" run --preset quick --json --no-history
fi
