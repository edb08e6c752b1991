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
rm -f "$OUT"/logs/*.log "$OUT/progress.txt" "$OUT/failed.txt" "$OUT/collect.txt"
PY=${PYTHON:-python3}
gpus=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | wc -l)
[ "$gpus" -ge 1 ] || { echo "gpu_tests: no GPU"; exit 2; }
WORKERS=${WORKERS:-2}
CHUNKS=${CHUNKS:-64}
DEADLINE=${DEADLINE:-100000}
[ "$CHUNKS" -ge 1 ] && [ "$CHUNKS" -le 999 ] || { echo "gpu_tests: CHUNKS must be 1 to 999"; exit 2; }
start=$(date +%s)
left() { echo $(( DEADLINE - ($(date +%s) - start) )); }
# pytest's last line: counts of outcomes, or "no tests ran".
SUMMARY='^(=+ )?([0-9]+ (passed|failed|skipped|errors?|xfailed|xpassed|deselected)|no tests ran)'

# A file that fails to import fails the run here, rather than vanish from the ids.
queue=$(mktemp -d)
# shellcheck disable=SC2086
$PY -m pytest ${TEST_FILES:-tests} --collect-only -q -p no:cacheprovider >"$OUT/collect.txt" 2>&1
collected=$?
if [ "$collected" -ne 0 ] || grep -q '^ERROR ' "$OUT/collect.txt"; then
  grep -E '^(ERROR|E ) ' "$OUT/collect.txt" | head -20
  echo "gpu_tests: collection failed (exit $collected; $OUT/collect.txt)"
  exit 1
fi
# test_distributed apart: it needs the GPUs together, not one each.
grep '^tests/.*::' "$OUT/collect.txt" | grep -v '^tests/test_distributed.py' >"$queue/ids"
distributed=$(grep -c '^tests/test_distributed.py::' "$OUT/collect.txt")
ids=$(wc -l <"$queue/ids")
# Chunk c holds every CHUNKS-th id from c: the slow parametrizations of one test spread out.
for ((c = 0; c < CHUNKS; c++)); do
  awk -v c="$c" -v n="$CHUNKS" 'NR % n == c' "$queue/ids" >"$queue/$(printf c%03d "$c")"
done
find "$queue" -name 'c[0-9][0-9][0-9]' -empty -delete

# A worker claims a chunk by renaming it (atomic: one worker gets it) and runs it on its GPU.
worker() {
  local gpu=$1 name=$2 chunk rc
  for chunk in "$queue"/c[0-9][0-9][0-9]; do
    [ "$(left)" -ge 30 ] || break
    mv "$chunk" "$chunk.$name" 2>/dev/null || continue
    mapfile -t tests <"$chunk.$name"
    # shellcheck disable=SC2086
    CUDA_VISIBLE_DEVICES=$gpu timeout "$(left)" $PY -m pytest "${tests[@]}" -q -p no:cacheprovider \
      ${PYTEST_ARGS:-} >"$OUT/logs/$(basename "$chunk").log" 2>&1
    rc=$?
    echo "$(basename "$chunk") gpu $gpu exit $rc at $(( $(date +%s) - start )) s" >>"$OUT/progress.txt"
  done
}

pids=()
if [ "$distributed" -gt 0 ]; then
  if [ "$(left)" -ge 30 ]; then
    timeout "$(left)" $PY -m pytest tests/test_distributed.py -q -p no:cacheprovider \
      >"$OUT/logs/distributed.log" 2>&1 &
    pids+=($!)
  else
    echo "gpu_tests: no time left for test_distributed" >"$OUT/logs/distributed.log"
  fi
fi
for ((gpu = 0; gpu < gpus; gpu++)); do
  for ((w = 0; w < WORKERS; w++)); do
    worker "$gpu" "g${gpu}w$w" &
    pids+=($!)
  done
done
for pid in "${pids[@]}"; do wait "$pid"; done

unrun=$(find "$queue" -name 'c[0-9][0-9][0-9]' | wc -l)
logs=("$OUT"/logs/*.log)
totals="none"
if [ -e "${logs[0]}" ]; then
  totals=$(cat "${logs[@]}" | grep -E "$SUMMARY" | $PY -c "
import re, sys, collections
total = collections.Counter()
for line in sys.stdin:
    for n, kind in re.findall(r'(\d+) (passed|failed|skipped|errors?|xfailed|xpassed)', line):
        total['error' if kind.startswith('error') else kind] += int(n)
print(', '.join(f'{n} {k}' for k, n in sorted(total.items())) or 'none')")
fi
grep -hE '^(FAILED|ERROR) ' "$OUT"/logs/*.log 2>/dev/null | cut -c1-300 | sort -u >"$OUT/failed.txt"
failed=$(wc -l <"$OUT/failed.txt")
# A run cut off by the deadline, or killed, ends without pytest's summary line; pytest exits 1 on
# a failure (listed above), other codes on errors of its own.
cut=$(grep -L -E "$SUMMARY" "$OUT"/logs/*.log 2>/dev/null | wc -l)
odd=$(grep -cvE ' exit (0|1|5) ' "$OUT/progress.txt" 2>/dev/null)
echo "gpu_tests: $ids tests in $CHUNKS chunks on $gpus GPU(s), $WORKERS worker(s) each," \
  "$distributed in test_distributed; $(( $(date +%s) - start )) s"
echo "gpu_tests: $totals; $unrun chunk(s) not started, $cut log(s) without a summary," \
  "${odd:-0} chunk(s) with another exit"
cat "$OUT/failed.txt"
rm -rf "$queue"
[ "$failed" -eq 0 ] && [ "$unrun" -eq 0 ] && [ "$cut" -eq 0 ] && [ "${odd:-0}" -eq 0 ] &&
  [ -e "${logs[0]}" ]
