#!/usr/bin/env bash
# Builds scripts/initcheck_probe.cu and runs each variant in its own process under compute-sanitizer
# initcheck, with sanitize.sh's options, once with its kernel-name filter (kns=initcheck_probe) and
# once without: prints which variants initcheck flags, to find the feature of wgmma_sm90 behind its
# "never written" outputs. Logs go under $OUT (or ./sanitize_out). Needs an sm_90 GPU.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/sanitize_out}
mkdir -p "$OUT"
probe="$OUT/initcheck_probe"
nvcc -std=c++17 -O3 -lineinfo -gencode=arch=compute_90a,code=sm_90a scripts/initcheck_probe.cu -o "$probe" -lcuda ||
  { echo "initcheck_probe: build failed"; exit 2; }
for variant in a b c d e f g h; do
  for filter in filtered unfiltered; do
    log="$OUT/initcheck_probe-$variant-$filter.log"
    extra=()
    [ "$filter" = filtered ] && extra=(--kernel-name kns=initcheck_probe)
    compute-sanitizer --tool initcheck "${extra[@]}" --error-exitcode 9 \
      --check-bulk-copy yes --check-warpgroup-mma yes "$probe" "$variant" >"$log" 2>&1
    rc=$?
    what=$(grep -m1 "^variant" "$log")
    values=$(grep -m1 "values" "$log" | sed 's/^ *//')
    summary=$(grep "ERROR SUMMARY" "$log" | tail -1)
    verdict=CLEAN
    [ "$rc" -eq 9 ] && verdict=FLAGGED
    [ "$rc" -ne 0 ] && [ "$rc" -ne 9 ] && verdict="FAILED (exit $rc)"
    echo "$verdict [$filter] ${what:-variant $variant}; ${values:-no values}; ${summary:-no summary}"
  done
done
