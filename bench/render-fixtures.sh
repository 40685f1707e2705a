#!/usr/bin/env bash
# Renders every saved results document and machine of tests/fixtures/ through every output a
# reader sees (the text table, JSON, Markdown, the HTML report with its charts and roofline,
# `explain`, and `sysinfo` replayed from a machine's files), one file each, into OUTDIR. Each
# document is imported alone into a history of its own, so that what is rendered is the
# document itself, not which other fixtures count as its past.
#
# A change that must not move a byte of output (a refactor of the exporters) is checked by
# rendering with the binary before and after it and comparing the two folders:
#
#   bench/render-fixtures.sh /tmp/before/peakbench /tmp/r-before
#   bench/render-fixtures.sh target/release/peakbench /tmp/r-after
#   diff -r /tmp/r-before /tmp/r-after && echo identical
#
# The history it imports into is a temporary database, never the user's.
set -euo pipefail
bin=$(realpath "${1:?usage: bench/render-fixtures.sh PEAKBENCH OUTDIR}")
out=${2:?usage: bench/render-fixtures.sh PEAKBENCH OUTDIR}
cd "$(dirname "$0")/.."
mkdir -p "$out"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export NO_COLOR=1 COLUMNS=100

docs=(tests/fixtures/*.json tests/fixtures/machines/*/peakbench-*.json)
for doc in "${docs[@]}"; do
    case "$doc" in */peakbench-sysinfo.json) continue ;; esac
    name=$(echo "${doc#tests/fixtures/}" | tr '/' '_')
    name=${name%.json}
    export PEAKBENCH_DB="$work/$name.db"
    "$bin" import "$doc" >/dev/null 2>&1
    "$bin" show latest >"$out/$name.txt" 2>&1 || true
    "$bin" show latest --json >"$out/$name.json" 2>&1 || true
    "$bin" explain latest >"$out/$name.explain.txt" 2>&1 || true
    # The time the judging took is the one figure that differs between two renders.
    "$bin" explain latest --json 2>&1 | grep -v '"judged_in_s"' >"$out/$name.explain.json" || true
    "$bin" report latest --html "$out/$name.html" --markdown "$out/$name.md" >/dev/null 2>&1 || true
done
for machine in tests/fixtures/machines/*/; do
    name=$(basename "$machine")
    "$bin" sysinfo --sysroot "$machine" >"$out/$name.sysinfo.txt" 2>&1 || true
    "$bin" sysinfo --sysroot "$machine" --json >"$out/$name.sysinfo.json" 2>&1 || true
done
echo "rendered ${#docs[@]} documents into $out" >&2
