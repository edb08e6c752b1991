#!/usr/bin/env bash
# The whole test suite on every GPU of this machine at once, for a machine lent for one call of a
# few minutes, where one GPU would not finish it: the test ids dealt in chunks to WORKERS pytest
# processes a GPU that pull them from a queue, and tests/test_distributed.py (whose NCCL checks
# need two GPUs) in one process beside them, with every GPU visible. Needs a built extension.
# Logs under $OUT (or ./gpu_tests_out); the totals, the chunks left unrun and every failure last.
#
#   bash scripts/gpu_tests.sh                          # every GPU, two workers each, 64 chunks
#   WORKERS=1 CHUNKS=32 bash scripts/gpu_tests.sh
#   DEADLINE=540 bash scripts/gpu_tests.sh             # no chunk starts or runs past 540 s
#   TEST_FILES="tests/test_mm.py" bash scripts/gpu_tests.sh
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/gpu_tests_out}
mkdir -p "$OUT/logs"
PY=${PYTHON:-python3}
gpus=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | wc -l)
[ "$gpus" -ge 1 ] || { echo "gpu_tests: no GPU"; exit 2; }
WORKERS=${WORKERS:-2}
CHUNKS=${CHUNKS:-64}
DEADLINE=${DEADLINE:-100000}
start=$(date +%s)
left() { echo $(( DEADLINE - ($(date +%s) - start) )); }

# test_distributed apart: it needs the GPUs together, not one each.
queue=$(mktemp -d)
# shellcheck disable=SC2086
$PY -m pytest ${TEST_FILES:-tests} --collect-only -q -p no:cacheprovider 2>/dev/null |
  grep '^tests/.*::' | grep -v '^tests/test_distributed.py' >"$queue/ids"
ids=$(wc -l <"$queue/ids")
[ "$ids" -ge 1 ] || { echo "gpu_tests: no test collected"; exit 2; }
# Chunk c holds every CHUNKS-th id from c: the slow parametrizations of one test spread out.
for ((c = 0; c < CHUNKS; c++)); do
  awk -v c="$c" -v n="$CHUNKS" 'NR % n == c' "$queue/ids" >"$queue/$(printf c%03d "$c")"
done
find "$queue" -name 'c[0-9][0-9][0-9]' -empty -delete

# A worker claims a chunk by renaming it (atomic: one worker gets it) and runs it on its GPU.
worker() {
  local gpu=$1 name=$2 chunk
  for chunk in "$queue"/c[0-9][0-9][0-9]; do
    [ "$(left)" -ge 30 ] || break
    mv "$chunk" "$chunk.$name" 2>/dev/null || continue
    mapfile -t tests <"$chunk.$name"
    CUDA_VISIBLE_DEVICES=$gpu timeout "$(left)" $PY -m pytest "${tests[@]}" -q -p no:cacheprovider \
      ${PYTEST_ARGS:-} >"$OUT/logs/$(basename "$chunk").log" 2>&1
    echo "$(basename "$chunk") gpu $gpu exit $? at $(( $(date +%s) - start )) s" >>"$OUT/progress.txt"
  done
}

pids=()
distributed=""
if [ -z "${TEST_FILES:-}" ] || [[ " ${TEST_FILES} " == *test_distributed* ]]; then
  distributed=", and test_distributed"
  timeout "$(left)" $PY -m pytest tests/test_distributed.py -q -p no:cacheprovider \
    >"$OUT/logs/distributed.log" 2>&1 &
  pids+=($!)
fi
for ((gpu = 0; gpu < gpus; gpu++)); do
  for ((w = 0; w < WORKERS; w++)); do
    worker "$gpu" "g${gpu}w$w" &
    pids+=($!)
  done
done
status=0
for pid in "${pids[@]}"; do wait "$pid" || status=1; done

unrun=$(find "$queue" -name 'c[0-9][0-9][0-9]' | wc -l)
totals=$(cat "$OUT"/logs/*.log | grep -E '^(=+ )?[0-9]+ (passed|failed|skipped|error)' |
  $PY -c "
import re, sys, collections
total = collections.Counter()
for line in sys.stdin:
    for n, kind in re.findall(r'(\d+) (passed|failed|skipped|errors?|xfailed|xpassed)', line):
        total[kind.rstrip('s') if kind.startswith('error') else kind] += int(n)
print(', '.join(f'{n} {k}' for k, n in sorted(total.items())) or 'none')")
grep -hE '^(FAILED|ERROR) ' "$OUT"/logs/*.log | cut -c1-300 | sort -u >"$OUT/failed.txt"
failed=$(wc -l <"$OUT/failed.txt")
# A chunk cut off by the deadline ends without pytest's summary line.
cut=$(grep -L -E '^(=+ )?[0-9]+ (passed|failed|skipped|error)' "$OUT"/logs/*.log | wc -l)
echo "gpu_tests: $ids tests in $CHUNKS chunks on $gpus GPU(s), $WORKERS worker(s) each$distributed;" \
  "$(( $(date +%s) - start )) s"
echo "gpu_tests: $totals; $unrun chunk(s) not started, $cut log(s) without a summary"
cat "$OUT/failed.txt"
rm -rf "$queue"
[ "$status" -eq 0 ] && [ "$failed" -eq 0 ] && [ "$unrun" -eq 0 ] && [ "$cut" -eq 0 ]
