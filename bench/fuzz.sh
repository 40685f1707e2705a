#!/usr/bin/env bash
# A fuzzing campaign over every target of fuzz/, one after another, each niced (the machine is
# shared), each until it has run EXECS inputs or SECONDS_PER seconds, whichever comes first. Prints,
# per target: executions, coverage (libFuzzer's `cov` edges and `ft` features), corpus size, and
# findings (crash-/timeout-/oom- files in fuzz/artifacts/).
#
#   bench/fuzz.sh                      # 10^7 executions per target, at most 2 h each
#   EXECS=100000 SECONDS_PER=60 bench/fuzz.sh options config   # a short run of two targets
#   MINIMIZE=1 bench/fuzz.sh           # then minimise each corpus into fuzz/corpus/<target>
#   SANITIZER=none bench/fuzz.sh       # no AddressSanitizer: 2-3 x the executions per second.
#                                      # The targets are safe Rust, so a panic (the finding that
#                                      # matters here) is caught either way; ASan adds the check
#                                      # of the few unsafe blocks they reach (the ioctls are not).
#   TRACE_COMPARES=0 bench/fuzz.sh document   # no comparison tracing: about 3 x the executions
#                                      # per second of `document` (its profile was 40 % in
#                                      # libFuzzer's cmp hooks), guided by edges alone; for a
#                                      # corpus that already holds the keys and values the
#                                      # comparisons would have found.
#
# Needs the nightly toolchain and cargo-fuzz (`cargo install cargo-fuzz`). The working corpus
# grows in fuzz/corpus-work/<target> (not committed), seeded from fuzz/corpus/<target> (the
# committed, minimised one); every finding must become a case in tests/fuzz_props.rs.
set -euo pipefail
cd "$(dirname "$0")/../fuzz"
EXECS=${EXECS:-10000000}
SECONDS_PER=${SECONDS_PER:-7200}
SANITIZER=${SANITIZER:-address}
BUILD_FLAGS=(-O -s "$SANITIZER")
if [ "${TRACE_COMPARES:-1}" = 0 ]; then
    BUILD_FLAGS+=(--no-trace-compares)
fi
TARGETS=("$@")
if [ ${#TARGETS[@]} -eq 0 ]; then
    TARGETS=(options config control_line udp_datagram document baseline)
fi
echo "machine: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) CPUs; load: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "start: $(date -u +%FT%TZ); build: ${BUILD_FLAGS[*]}"
nice -n 19 cargo +nightly fuzz build "${BUILD_FLAGS[@]}"
printf '%-14s %12s %8s %8s %8s %9s %s\n' target execs cov ft corpus seconds findings
for t in "${TARGETS[@]}"; do
    mkdir -p "corpus-work/$t" "corpus/$t" "artifacts/$t"
    if [ "$t" = document ]; then
        cp ../tests/fixtures/*.json "corpus-work/$t/" # full documents, too big to commit twice
    fi
    log="corpus-work/$t.log"
    start=$(date +%s)
    # -timeout: an input running over 10 s is a hang; -rss_limit_mb: one over 2 GiB an OOM.
    nice -n 19 cargo +nightly fuzz run "${BUILD_FLAGS[@]}" "$t" "corpus-work/$t" "corpus/$t" -- \
        -runs="$EXECS" -max_total_time="$SECONDS_PER" -timeout=10 -rss_limit_mb=2048 \
        -max_len=65536 -print_final_stats=1 >"$log" 2>&1 || true
    secs=$(( $(date +%s) - start ))
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
    last=$(grep -E '^#[0-9]+' "$log" | tail -1 || true)
    cov=$(sed -n 's/.* cov: \([0-9]*\).*/\1/p' <<<"$last")
    ft=$(sed -n 's/.* ft: \([0-9]*\).*/\1/p' <<<"$last")
    corpus=$(find "corpus-work/$t" -type f | wc -l)
    findings=$(find "artifacts/$t" -type f \( -name 'crash-*' -o -name 'timeout-*' -o -name 'oom-*' -o -name 'leak-*' \) | wc -l)
    printf '%-14s %12s %8s %8s %8s %9s %s\n' "$t" "${execs:-?}" "${cov:-?}" "${ft:-?}" "$corpus" "$secs" "$findings"
    if [ "${MINIMIZE:-0}" = 1 ]; then
        # The smallest corpus with the same coverage, merged into the committed one.
        nice -n 19 cargo +nightly fuzz cmin "${BUILD_FLAGS[@]}" "$t" "corpus-work/$t" >/dev/null 2>&1 || true
        cp corpus-work/"$t"/* "corpus/$t/" 2>/dev/null || true
        echo "  fuzz/corpus/$t: $(du -sh "corpus/$t" | cut -f1) (keep the committed corpus to a few hundred KB)"
    fi
done
echo "end: $(date -u +%FT%TZ); load: $(cut -d' ' -f1-3 /proc/loadavg)"
