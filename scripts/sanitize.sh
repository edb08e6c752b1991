#!/usr/bin/env bash
# Runs scripts/sanitize_cases.py under each compute-sanitizer tool, one process per group of cases
# (a group is an environment, the TORCH_GEMM_WGMMA_* overrides being read once per process, and
# its cases: every CUDA kernel on edge-tile shapes and all layouts, and named cases each aimed at
# one path of a kernel and checked against the plan), restricted to our kernels (every one is in
# namespace torch_gemm: kns=torch_gemm matches the repack and row-sum kernels too, which gemm_ did
# not), and fails on any report or any case that no longer reaches its path. The tools run side by
# side, each through the groups in turn. Logs go under $OUT (or ./sanitize_out), one per tool and
# group, and $OUT/report.txt gathers the commit, the GPU, each tool's result per group and every
# path run: benchmarks/results/<gpu>-sanitize.txt is that file. Needs a built extension and a GPU.
# TOOLS="memcheck racecheck" runs a subset, SANITIZE_GROUPS="default wgmma_stream_k" some groups
# (sanitize_cases.py --list-groups names them); SANITIZE_KERNELS=wgmma_sm90,mma_sm80 (read by
# sanitize_cases.py) runs only those kernels. --check-bulk-copy and --check-warpgroup-mma make the
# tools check TMA copies and wgmma operands too (compute-sanitizer 2025.3 leaves them out by
# default). initcheck does not count TMA stores as writes: scripts/initcheck_probe.sh flags only
# its TMA-store variants, so under initcheck alone wgmma_sm90's C leaves from registers
# (sanitize_cases.py's TOOL_ENV: TORCH_GEMM_WGMMA_STORE=registers), every other part of the kernel
# checked; and the partial sums' flags are zeroed before the launch (TORCH_GEMM_WGMMA_FLAGS=zeroed),
# where initcheck would count the loads waiting on them as uninitialized reads.
# Known: racecheck reports a race on every handoff through shared memory that an mbarrier (or a
# named barrier's bar.arrive) orders, though the PTX memory model orders it (reproduced by
# scripts/racecheck_probe.cu); wgmma_sm90's bias row is such a handoff, so under racecheck
# sanitize_cases.py leaves out that kernel's bias cases (memcheck and synccheck run them).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/sanitize_out}
mkdir -p "$OUT"
PY=${PYTHON:-python3}
groups=${SANITIZE_GROUPS:-$($PY scripts/sanitize_cases.py --list-groups)} || { echo "sanitize: cannot list the groups"; exit 2; }
tools=${TOOLS:-memcheck racecheck initcheck synccheck}

run_tool() {
  local tool=$1 group log rc summary unreached start
  for group in $groups; do
    log="$OUT/sanitize-$tool-$group.log"
    start=$(date +%s)
    # The tool wraps the very process that launches the kernels: no child processes to follow.
    SANITIZE_TOOL="$tool" compute-sanitizer --tool "$tool" --kernel-name kns=torch_gemm --error-exitcode 9 \
      --check-bulk-copy yes --check-warpgroup-mma yes \
      $PY scripts/sanitize_cases.py --group "$group" >"$log" 2>&1
    rc=$?
    summary=$(grep -E "ERROR SUMMARY|RACECHECK SUMMARY" "$log" | tail -1)
    unreached=$(grep -c "^NOT REACHED" "$log")
    echo "sanitize $tool $group: exit $rc; ${summary:-no summary line}; $unreached case(s) off their path ($(( $(date +%s) - start )) s)"
  done >"$OUT/summary-$tool.txt"
}

pids=()
for tool in $tools; do run_tool "$tool" & pids+=($!); done
status=0
for pid in "${pids[@]}"; do wait "$pid" || status=1; done

# Every tool must have reported on every group, each with exit 0 and no case off its path: a
# tool that died, or a group it never reached, is not clean.
for tool in $tools; do
  cat "$OUT/summary-$tool.txt" 2>/dev/null
  for group in $groups; do
    line=$(grep "^sanitize $tool $group: " "$OUT/summary-$tool.txt" 2>/dev/null)
    case "$line" in
      *": exit 0; "*"; 0 case(s) off their path"*) ;;
      "") status=1; echo "sanitize $tool $group: NO RESULT (the tool stopped before this group)" |
            tee -a "$OUT/summary-$tool.txt" ;;
      *) status=1; tail -20 "$OUT/sanitize-$tool-$group.log" ;;
    esac
  done
done
verdict="sanitize: CLEAN"
[ "$status" -eq 0 ] || verdict="sanitize: REPORTS FOUND"

{
  echo "compute-sanitizer report, written by scripts/sanitize.sh (scripts/sanitize_cases.py under each tool,"
  echo "--kernel-name kns=torch_gemm --check-bulk-copy yes --check-warpgroup-mma yes)"
  # SANITIZE_COMMIT names the commit whose tree ran where the checkout's git cannot (a copy of a
  # working tree on another machine).
  dirty=""
  git diff --quiet HEAD -- csrc torch_gemm scripts setup.py 2>/dev/null || dirty=" + uncommitted changes"
  echo "commit ${SANITIZE_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)$dirty}, $(date -u +%F)"
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1
  compute-sanitizer --version 2>/dev/null | tail -1
  $PY -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda)" 2>/dev/null
  echo
  for tool in $tools; do cat "$OUT/summary-$tool.txt" 2>/dev/null; done
  echo "$verdict"
  # What ran, from memcheck's log where it ran (every tool runs the same cases but for what the
  # lines under it say each tool left out), else the first tool's.
  what_log=${tools%% *}
  case " $tools " in *" memcheck "*) what_log=memcheck ;; esac
  for group in $groups; do
    echo
    echo "== group $group: what ran (from the $what_log log)"
    grep -E "^sanitize_cases: (sweep|\[)" "$OUT/sanitize-$what_log-$group.log" 2>/dev/null
    for tool in $tools; do
      grep -E "left out of|from registers under|planned otherwise|^NOT REACHED|^WRONG" \
        "$OUT/sanitize-$tool-$group.log" 2>/dev/null | sed "s/^/  $tool: /"
    done
  done
} >"$OUT/report.txt"
echo "$verdict (report: $OUT/report.txt)"
exit $status
