#!/usr/bin/env bash
# bench_models' whole grid (issue 28's record) on every GPU of this machine at once: one shard a
# GPU, each in its own process and output directory, then the shards merged into one record with
# the summary by token band, whether it holds the whole grid, and the heatmap. Logs and records go
# under $OUT (or ./models_out). Needs a built extension and a GPU.
#
#   bash scripts/models_sweep.sh                       # SHARDS = the GPUs: the whole grid in one go
#   SHARDS=8 FIRST=1 bash scripts/models_sweep.sh      # shards 1..G of 8 on G GPUs; FIRST=G+1 later
#   MODELS_ARGS="--dtypes bfloat16" bash scripts/models_sweep.sh
#   python benchmarks/bench_models.py --merge DIR*/…-models.json --out DIR   # shards of several calls
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/models_out}
mkdir -p "$OUT"
PY=${PYTHON:-python3}
gpus=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | wc -l)
[ "$gpus" -ge 1 ] || { echo "models_sweep: no GPU"; exit 2; }
SHARDS=${SHARDS:-$gpus}
FIRST=${FIRST:-1}
start=$(date +%s)
pids=()
for ((gpu = 0; gpu < gpus; gpu++)); do
  shard=$((FIRST + gpu))
  [ "$shard" -le "$SHARDS" ] || break
  # shellcheck disable=SC2086
  CUDA_VISIBLE_DEVICES=$gpu $PY benchmarks/bench_models.py --shard "$shard/$SHARDS" --no-plot \
    --out "$OUT/shard$shard" ${MODELS_ARGS:-} >"$OUT/shard$shard.log" 2>&1 &
  pids+=($!)
done
status=0
for pid in "${pids[@]}"; do wait "$pid" || status=1; done
echo "models_sweep: ${#pids[@]} shard(s) of $SHARDS from $FIRST in $(( $(date +%s) - start )) s"
[ "$status" -eq 0 ] || { tail -5 "$OUT"/shard*.log; echo "models_sweep: a shard failed"; exit 1; }
$PY benchmarks/bench_models.py --merge "$OUT"/shard*/*-models.json --out "$OUT" | tee "$OUT/summary.txt"
