"""The workload scripts/sanitize.sh runs under compute-sanitizer, in groups: each group an
environment (the TORCH_GEMM_WGMMA_* overrides, read once per process) and its cases, run by
`sanitize_cases.py --group NAME` in a process of its own; `--list-groups` names them.

The default group runs every CUDA kernel of the build on shapes with edge tiles, in every dtype it
takes and in transposed/offset layouts, plus one linear_tiled with a bias per kernel and dtype and,
for kernels that fuse mm_tiled_row_sum's row sums, that op on every shape. Besides that sweep, each
group holds NAMED cases: the path inside a kernel that a case is meant to reach (a tile, a split,
stream-K, a repack, C's store, the row sums, decode_sm80's token tiles and K split) and why its
shape selects it. Each case states what the plan must say for it (wgmma_sm90's sm90_plan, the
auto rule and decode's token tiles), which tests/test_sanitize_cases.py checks on the CPU for a
132-SM H100/H200 and this script checks again on the GPU before running it, so that a change of
heuristics cannot silently leave a path unchecked. A kernel that multiplies float32 in TF32 runs
its float32 cases with TF32 allowed (and a TF32 tolerance). SANITIZE_KERNELS=wgmma_sm90,mma_sm80
restricts every group to those kernels.

Inputs are made on the CPU and copied to the GPU, and results are checked on the CPU against
float64: the sanitizers instrument only our kernels (--kernel-name kns=torch_gemm), so memory
written by torch's own kernels would look uninitialized to initcheck, while host copies are
tracked."""

import argparse
import os
import sys
from dataclasses import dataclass, field
from typing import Optional

import torch

import torch_gemm
from torch_gemm.ops import DTYPE_BY_NAME

SHAPES = [(1, 1, 1), (7, 5, 3), (33, 65, 17), (129, 257, 31), (128, 128, 8), (255, 129, 130), (16, 4, 513)]
# The tensor-core kernels also run these in the sweep's four layouts: C rows 16-byte aligned with
# edge tiles in M, N and K, K long enough for the stage rings to wrap. The named cases below say
# which wgmma_sm90 path each shape reaches.
TENSOR_CORE_SHAPES = [(200, 264, 72), (250, 4264, 2050), (1250, 4400, 320), (1800, 3840, 320)]
TENSOR_CORE_KERNELS = ("wgmma_sm90", "wgmma_sm90_3xtf32", "mma_sm80")
# Kernels whose bias reaches the consumers through an mbarrier-ordered shared-memory row, which
# racecheck reports as a race although it is ordered (scripts/racecheck_probe.cu shows the same on
# a minimal kernel); sanitize.sh names the tool in SANITIZE_TOOL.
RACECHECK_BLIND_TO_BIAS = ("wgmma_sm90", "wgmma_sm90_3xtf32")
# The device the named cases' shapes are chosen for: an H100's or H200's multiprocessors.
PLAN_SM_COUNT = 132
# The overrides the launcher reads, and sm90_plan's argument for each.
OVERRIDE_ARGS = {
    "TORCH_GEMM_WGMMA_SHAPE": "shape",
    "TORCH_GEMM_WGMMA_CLUSTER": "cluster",
    "TORCH_GEMM_WGMMA_STREAM_K": "stream_k",
    "TORCH_GEMM_WGMMA_MAX_CLUSTERS": "max_clusters",
    "TORCH_GEMM_WGMMA_STORE": "store",
    "TORCH_GEMM_WGMMA_TF32_PLAN": "tf32_plan",
}
# What a tool changes in every group's environment. initcheck does not count a TMA store
# (cp.async.bulk.tensor from shared memory) as a write, so it calls every element C received that
# way never written, though the values are right and memcheck is clean
# (scripts/initcheck_probe.cu: its TMA-store variant is flagged, the same box stored by st.global
# after wgmma's fences is not). Under initcheck alone C therefore leaves wgmma_sm90 from
# registers; everything else in the kernel stays checked, and the other tools run the TMA store.
# Likewise initcheck counts the loads that wait on a partial sum's flag before its writer sets it
# (the flags carry a launch tag and need no memset) as uninitialized reads: under initcheck the
# launcher zeroes them first, which the plan does not see.
TOOL_ENV = {"initcheck": {"TORCH_GEMM_WGMMA_STORE": "registers", "TORCH_GEMM_WGMMA_FLAGS": "zeroed"}}


@dataclass(frozen=True)
class Case:
    """One call aimed at one path. op: "mm" (mm_tiled), "linear" (linear_tiled(a, bᵀ, bias)),
    "row_sum" (mm_tiled_row_sum) or "bmm" (bmm_tiled, `batch` products). a_k_major / b_k_major:
    stride 1 along K; offset: elements before each operand's data (1 leaves it 2 or 4 bytes off
    the 16 bytes TMA needs). expect: the plan's fields for this call (wgmma_sm90: sm90_plan's
    keys; multistage: multistage_plan's; decode_sm80: "token_tiles" and "splits_k", and against
    an N-major B "cluster")."""

    path: str
    why: str
    kernel: str
    M: int
    N: int
    K: int
    dtype: str = "bfloat16"
    op: str = "mm"
    batch: int = 1
    a_k_major: bool = True
    b_k_major: bool = True
    offset: int = 0
    expect: dict = field(default_factory=dict)


@dataclass(frozen=True)
class Group:
    """Cases that run in one process under `env`; sweep: the default group's run of every
    kernel over SHAPES."""

    name: str
    env: dict
    cases: tuple
    sweep: bool = False


WIDE = {"tile": (128, 256), "consumers": 2, "split_k": 1}
DEFAULT_CASES = (
    Case("wgmma 128x256 pairs", "225 tiles of 128x256 (15x15): several rounds, so pairs share B, "
         "and a persistent block stores several tiles through its box ring",
         "wgmma_sm90", 1800, 3840, 320, expect={**WIDE, "cluster": 2, "stream_k": False}),
    Case("wgmma 128x256 single", "tf32: 8x10 = 80 tiles of 128x256 fill one short wave, where a "
         "pair's start costs more than sharing B saves",
         "wgmma_sm90", 1024, 2560, 256, dtype="float32", expect={**WIDE, "cluster": 1}),
    Case("wgmma tf32 128x256 in equal shares", "tf32, 500x2500: 4x10 = 40 tiles of 128x256 would "
         "leave half the SMs idle, so every turn is dealt out as k-tiles, its 122 k-tiles in 3 "
         "equal shares on 120 of the 132 blocks, partials in the workspace",
         "wgmma_sm90", 500, 2500, 3900, dtype="float32",
         expect={**WIDE, "cluster": 1, "stream_k": True, "grid": 120}),
    Case("wgmma 64x256", "mm_tiled_row_sum takes no 128-column tiles: 4 tiles of 128x256 are "
         "fewer than half the SMs, so 64-row tiles",
         "wgmma_sm90", 200, 264, 72, op="row_sum", a_k_major=False,
         expect={"tile": (64, 256), "consumers": 1, "split_k": 1}),
    Case("wgmma 64x128 pairs in equal shares", "250x1000: 4 rows of 64x128 tiles the plan would "
         "split, with 129 k-tiles (the last ragged): paired, their 16 pair turns dealt out in 4 "
         "equal shares on 128 blocks, partials in the workspace; edge tiles in M and N, C rows of "
         "1000 elements",
         "wgmma_sm90", 250, 1000, 8200,
         expect={"tile": (64, 128), "consumers": 1, "cluster": 2, "stream_k": True, "grid": 128}),
    Case("wgmma 128x128 one row in equal shares", "100x5000: one row of 40 tiles of 128x128 "
         "(unpaired) with 90 k-tiles (the last ragged), every turn dealt out in 3 equal shares on "
         "120 blocks, partials in the workspace; edge tiles in M and N, C rows of 5000 elements",
         "wgmma_sm90", 100, 5000, 5700,
         expect={"tile": (128, 128), "consumers": 2, "cluster": 1, "stream_k": True, "grid": 120}),
    Case("wgmma 64x128 unsplit", "4 tiles of 64x128 with 15 k-tiles: too short a K to split",
         "wgmma_sm90", 64, 512, 960, expect={"tile": (64, 128), "split_k": 1}),
    Case("wgmma 64x128 split 2", "8 tiles of 64x128, 16 k-tiles: 2 slices of 8",
         "wgmma_sm90", 64, 1024, 1024, expect={"tile": (64, 128), "split_k": 2}),
    Case("wgmma 64x128 split 4", "2 tiles of 64x128, 32 k-tiles: 4 slices of 8",
         "wgmma_sm90", 64, 256, 2048, expect={"tile": (64, 128), "split_k": 4}),
    Case("wgmma 64x128 split 8", "8 tiles of 64x128, 128 k-tiles: 8 slices of 16 (a cluster of "
         "8; the plan groups no 16-bit tiles over clusters)",
         "wgmma_sm90", 64, 1024, 8192, expect={"tile": (64, 128), "split_k": 8, "split_groups": 1}),
    Case("wgmma 64x64 pairs", "5 rows of 64 against 1088 columns: 85 tiles of 64x64 (102 blocks "
         "in pairs) fill more than half of the SMs, where 45 of 64x128 would split in 2; the last "
         "pair's second block past M, a prime K of 32 k-tiles, B N-major (one 64-column box "
         "multicast by one block of a pair)",
         "wgmma_sm90", 300, 1088, 2039, b_k_major=False, expect={"tile": (64, 64), "cluster": 2}),
    Case("wgmma 64x64 one row", "33 rows against 2001 columns: one row of 32 tiles of 64x64, "
         "unpaired and whole, where 16 of 64x128 would split K in 4; an edge tile in N, C rows of "
         "2001 elements (stored from registers), a K of 32 k-tiles, the last ragged",
         "wgmma_sm90", 33, 2001, 2000, expect={"tile": (64, 64), "cluster": 1, "split_k": 1}),
    Case("wgmma 128x128 split 4", "100 rows against 3000 columns, K = 12289 (193 k-tiles): 24 "
         "tiles of 128x128 in 4 slices of K (two consumers, a cluster of 4) in place of 48 of "
         "64x128 in 2; edge tiles in M and N, A and B repacked (rows of 24578 bytes)",
         "wgmma_sm90", 100, 3000, 12289,
         expect={"tile": (128, 128), "consumers": 2, "split_k": 4}),
    Case("wgmma 64x256 one row", "16 rows: 112 tiles of 128x256 would be half empty rows, and 224 "
         "of 64x128 not fit in one wave",
         "wgmma_sm90", 16, 28672, 512, expect={"tile": (64, 256), "consumers": 1, "split_k": 1}),
    Case("wgmma 128x128 pairs", "9x44 = 396 tiles of 128x128 take fewer rounds than 9x22 of "
         "128x256 cost (9x30 of 128x192 would take 3)",
         "wgmma_sm90", 1152, 5632, 320,
         expect={"tile": (128, 128), "consumers": 2, "cluster": 2, "split_k": 1}),
    Case("wgmma 128x192 pairs", "8x14 = 112 tiles of 128x192 fill one round where 8x10 of "
         "128x256 leave 52 SMs idle; 32 k-tiles, so pairs share B",
         "wgmma_sm90", 1024, 2560, 2048,
         expect={"tile": (128, 192), "consumers": 2, "cluster": 2, "split_k": 1}),
    Case("wgmma 128x192 pairs N-major", "the same with B row-major (N-major): the pair multicasts "
         "its three 64-column boxes, two from one block and one from the other; edge tiles in M "
         "and N",
         "wgmma_sm90", 1000, 2504, 2048, b_k_major=False,
         expect={"tile": (128, 192), "consumers": 2, "cluster": 2, "split_k": 1}),
    Case("wgmma slim 128x80", "4x32 = 128 tiles of 128x80 fill one round where 4x20 of 128x128 "
         "leave 52 SMs idle; both operands K-major, C stored from registers, a bias row of 80 "
         "columns; 16 k-tiles, one short wave, single blocks",
         "wgmma_sm90", 512, 2560, 1024, op="linear",
         expect={"tile": (128, 80), "consumers": 2, "cluster": 1, "split_k": 1}),
    Case("wgmma slim 128x96", "6x19 = 114 tiles of 128x96 fill one round where 6x15 of 128x128 "
         "leave 42 SMs idle; edge tiles in M and N, a prime K (A and B repacked K-major)",
         "wgmma_sm90", 700, 1800, 1031,
         expect={"tile": (128, 96), "consumers": 2, "cluster": 1, "split_k": 1}),
    Case("wgmma slim 128x160", "8x16 = 128 tiles of 128x160 fill one round where 8x14 of 128x192 "
         "leave 20 SMs idle; edge tiles in M and N (155 columns in the last), 81 k-tiles, pairs",
         "wgmma_sm90", 1000, 2555, 5128, op="linear",
         expect={"tile": (128, 160), "consumers": 2, "cluster": 2, "split_k": 1}),
    Case("wgmma repack odd leading dimension", "K = 2050 bf16: A's and B's rows are 4100 bytes, "
         "not a multiple of the 16 TMA needs, so both are copied into the workspace first",
         "wgmma_sm90", 250, 4264, 2050,
         expect={"a": {"k_major": True, "repack": True}, "b": {"k_major": True, "repack": True}}),
    Case("wgmma repack misaligned", "A and B one element past a 16-byte boundary: TMA cannot "
         "read them in place",
         "wgmma_sm90", 200, 264, 72, offset=1,
         expect={"a": {"k_major": True, "repack": True}, "b": {"k_major": True, "repack": True}}),
    Case("wgmma operands MN-major", "A column-major and B row-major (both stride 1 along M/N): "
         "TMA reads them in place, the wgmmas transposed",
         "wgmma_sm90", 200, 264, 72, a_k_major=False, b_k_major=False,
         expect={"a": {"k_major": False, "repack": False}, "b": {"k_major": False, "repack": False}}),
    Case("wgmma store registers", "N = 263: C's rows (526 bytes) are not 16-byte aligned, so no "
         "TMA store",
         "wgmma_sm90", 200, 263, 72, expect={"store": "registers"}),
    Case("wgmma store tma", "N = 264: C's rows are 528 bytes, 16-byte aligned",
         "wgmma_sm90", 200, 264, 72, expect={"store": "tma", "transposed": False}),
    Case("wgmma tf32 transposed", "float32 with B row-major (N-major), which the tf32 wgmma "
         "cannot read: Cᵀ = Bᵀ·Aᵀ runs instead, C filled by transposed TMA boxes",
         "wgmma_sm90", 1800, 3840, 320, dtype="float32", b_k_major=False,
         expect={"transposed": True, "store": "tma_transposed"}),
    Case("wgmma tf32 64x128 pairs", "float32 with both operands K-major, read by the tf32 wgmma as "
         "they are, on the 16-bit tile rules: 4 rows of 64x128 tiles, paired, A's fragments "
         "through registers", "wgmma_sm90", 200, 264, 72, dtype="float32",
         expect={"transposed": False, "store": "tma", "tile": (64, 128), "cluster": 2}),
    Case("wgmma tf32 64x128 split 8", "tf32, one tile of 64x128 with 65 k-tiles: 8 slices (the last "
         "short), 16 owned columns a block, from registers",
         "wgmma_sm90", 33, 100, 2050, dtype="float32",
         expect={"tile": (64, 128), "split_k": 8, "store": "registers"}),
    Case("wgmma tf32 64x128 pairs dealt", "tf32, 8 rows of 64x128 tiles the 16-bit rules would "
         "split, paired with every turn dealt out as k-tiles (129 a turn), partials in the "
         "workspace", "wgmma_sm90", 500, 264, 4099, dtype="float32",
         expect={"tile": (64, 128), "cluster": 2, "stream_k": True}),
    Case("wgmma tf32 128x128 pairs dealt", "tf32, 2 rows of 128x128 tiles with a long K (129 "
         "k-tiles), paired, every turn dealt out", "wgmma_sm90", 200, 2000, 4099, dtype="float32",
         expect={"tile": (128, 128), "cluster": 2, "stream_k": True}),
    Case("wgmma tf32 128x128 split 4", "tf32, one row of 24 tiles of 128x128 with 257 k-tiles: 4 "
         "slices a tile (two consumers, a cluster of 4), one box a block",
         "wgmma_sm90", 100, 3000, 8200, dtype="float32",
         expect={"tile": (128, 128), "split_k": 4}),
    Case("wgmma tf32 128x128 split 2", "tf32, 2 rows of 18 tiles of 128x128 with 66 k-tiles, each "
         "split in 2 (the 72 of 64x128 would run whole in one wave of pairs); edges in M, N and K",
         "wgmma_sm90", 200, 2200, 2100, dtype="float32", expect={"tile": (128, 128), "split_k": 2}),
    Case("wgmma 128x128 split 2 two rows", "2 rows of 18 tiles of 128x128 with 66 k-tiles, each "
         "split in 2; edges in M, N and K", "wgmma_sm90", 250, 2200, 4200,
         expect={"tile": (128, 128), "split_k": 2, "cluster": 1}),
    Case("wgmma tf32 64x128 split 8 in 2 clusters", "tf32, 2 tiles of 64x128 with 141 k-tiles: 8 "
         "slices in each of 2 clusters a tile, the clusters' sums through the workspace",
         "wgmma_sm90", 40, 200, 4500, dtype="float32",
         expect={"tile": (64, 128), "split_k": 8, "split_groups": 2}),
    Case("wgmma tf32 128x128 single", "tf32, 4x24 = 96 tiles of 128x128 in one short wave, single "
         "blocks", "wgmma_sm90", 500, 3000, 72, dtype="float32",
         expect={"tile": (128, 128), "cluster": 1}),
    Case("wgmma tf32 64x64 pairs", "tf32, 8 rows of 64x64 tiles (9 columns, the last part-full), "
         "paired, 12 stages of 16 KB", "wgmma_sm90", 500, 520, 72, dtype="float32",
         expect={"tile": (64, 64), "cluster": 2}),
    Case("wgmma tf32 split 8 transposed", "tf32 with an N-major B: the transposed product's 4 "
         "tiles split in 8 over 2 clusters, whose 32 owned columns are narrower than a transposed "
         "box: from registers", "wgmma_sm90", 128, 256, 8192, dtype="float32", b_k_major=False,
         expect={"transposed": True, "tile": (64, 256), "split_k": 8, "split_groups": 2}),
    Case("wgmma tf32 split 4 transposed", "tf32 with an N-major B: the transposed product's 16 "
         "tiles split in 4, each block storing its two transposed boxes",
         "wgmma_sm90", 256, 1024, 4096, dtype="float32", b_k_major=False,
         expect={"transposed": True, "tile": (64, 256), "split_k": 4}),
    Case("wgmma bias", "linear_tiled with a bias: the bias row through shared memory in the "
         "epilogue, on paired 128x256 tiles",
         "wgmma_sm90", 1800, 3840, 320, op="linear", expect={**WIDE, "cluster": 2}),
    Case("wgmma row sums fused", "bf16 with 15 tile columns (>= 8): the producer's idle warps "
         "sum A's rows",
         "wgmma_sm90", 1800, 3840, 320, op="row_sum", expect={"row_sum": "fused"}),
    Case("wgmma row sums separate", "2 tile columns (< 8): row_sum_slices_kernel before the product",
         "wgmma_sm90", 200, 264, 72, op="row_sum", a_k_major=False, expect={"row_sum": "separate"}),
    Case("wgmma row sums separate tf32", "float32 never fuses the row sums",
         "wgmma_sm90", 1250, 4400, 320, dtype="float32", op="row_sum", expect={"row_sum": "separate"}),
    Case("wgmma batched", "bmm_tiled, 3 products: 120 tiles of 128x128 over the batch fit one "
         "wave, where 240 of 64x128 would not",
         "wgmma_sm90", 600, 1000, 200, op="bmm", batch=3, expect={"tile": (128, 128)}),
    Case("3xtf32 promoted 128x128 pairs", "float32 split into TF32 parts, 3K = 960 (30 k-tiles: "
         "three promotion groups of 8 and a partial one): 15x30 = 450 tiles of 128x128, several "
         "rounds, so pairs share B",
         "wgmma_sm90_3xtf32", 1800, 3840, 320, dtype="float32",
         expect={"tile": (128, 128), "consumers": 2, "cluster": 2, "transposed": False}),
    Case("3xtf32 promoted 128x128 single", "8x10 = 80 tiles of 128x128 fill one short wave, where "
         "a pair's start costs more than sharing B saves",
         "wgmma_sm90_3xtf32", 1024, 1280, 256, dtype="float32",
         expect={"tile": (128, 128), "consumers": 2, "cluster": 1}),
    Case("3xtf32 promoted 64x128 pairs", "2x3 = 6 tiles of 128x128 would leave most SMs idle: "
         "64-row tiles, one consumer, four tile rows paired",
         "wgmma_sm90_3xtf32", 200, 264, 72, dtype="float32",
         expect={"tile": (64, 128), "consumers": 1, "cluster": 2, "store": "tma"}),
    Case("3xtf32 promoted 64x128 single", "33 rows: one tile row of 64, nothing to pair",
         "wgmma_sm90_3xtf32", 33, 264, 72, dtype="float32",
         expect={"tile": (64, 128), "consumers": 1, "cluster": 1}),
    Case("3xtf32 store registers", "263 columns: C's rows are not 16-byte aligned, so C leaves "
         "from registers",
         "wgmma_sm90_3xtf32", 200, 263, 72, dtype="float32", expect={"store": "registers"}),
    Case("3xtf32 operands MN-major", "the split pass reads A and B column by column (its "
         "transposing path) into the same K-major rows, read in place",
         "wgmma_sm90_3xtf32", 200, 264, 72, dtype="float32", a_k_major=False, b_k_major=False,
         expect={"a": {"k_major": True, "repack": False}, "b": {"k_major": True, "repack": False}}),
    Case("3xtf32 bias", "linear_tiled: the bias starts the promoted tiles' sums",
         "wgmma_sm90_3xtf32", 200, 264, 72, dtype="float32", op="linear", expect={"tile": (64, 128)}),
    Case("3xtf32 batched", "bmm_tiled, 3 products: 5x8x3 = 120 tiles of 128x128 in one short wave",
         "wgmma_sm90_3xtf32", 600, 1000, 200, dtype="float32", op="bmm", batch=3,
         expect={"tile": (128, 128), "cluster": 1}),
    Case("3xtf32 chunks of K", "10 tiles of 64x128: K cut into 4 chunks run as a batch, the last "
         "shorter (1160 of 5000), their partial sums added with the bias by one more kernel",
         "wgmma_sm90_3xtf32", 300, 200, 5000, dtype="float32", op="linear", expect={"chunks": 4}),
    Case("3xtf32 chunks of K MN-major", "the transposing split per chunk; 130 columns, not whole "
         "16-byte vectors, so the chunks' sum reads them one by one",
         "wgmma_sm90_3xtf32", 129, 130, 4099, dtype="float32", a_k_major=False, b_k_major=False,
         expect={"chunks": 4}),
    Case("decode 1 token tile unsplit", "4 rows: one 8-token tile; 264 blocks of 16 columns, more "
         "than a quarter of the SMs, stream the weight with K whole (auto takes decode_sm80)",
         "decode_sm80", 4, 4224, 1024, expect={"token_tiles": 1, "splits_k": False}),
    Case("decode 1 token tile split", "4 rows against a 256x8192 weight: 16 blocks, at most a "
         "quarter of the SMs, of 16 KB rows, so K splits across blocks and a second kernel adds the sums",
         "decode_sm80", 4, 256, 8192, expect={"token_tiles": 1, "splits_k": True}),
    Case("decode 2 token tiles unsplit", "12 rows: two 8-token tiles; 264 blocks fill the slots",
         "decode_sm80", 12, 4224, 1024, expect={"token_tiles": 2, "splits_k": False}),
    Case("decode 2 token tiles split", "16 rows against a 512x8192 weight: 32 blocks fill an "
         "eighth of the 264 slots, so K splits (two token tiles split by the rounds alone)",
         "decode_sm80", 16, 512, 8192, expect={"token_tiles": 2, "splits_k": True}),
    Case("decode 4 token tiles", "24 rows (kernel= only: auto stops at 16): four 8-token tiles",
         "decode_sm80", 24, 1024, 1024, expect={"token_tiles": 4}),
    Case("decode 8 token tiles", "40 rows: eight 8-token tiles, two passes' worth",
         "decode_sm80", 40, 1024, 1024, expect={"token_tiles": 8}),
    Case("decode tf32 split", "float32 as tf32, 1 row against a 2048x8192 weight: 128 blocks, K "
         "split across blocks in 16-element chunks",
         "decode_sm80", 1, 2048, 8192, dtype="float32", expect={"token_tiles": 1}),
    Case("decode tf32 4 token tiles", "float32 as tf32, 24 rows: four 8-token tiles, one warp a "
         "column group; 1000 columns end in a part group, K = 1028 in a part chunk",
         "decode_sm80", 24, 1000, 1028, dtype="float32", expect={"token_tiles": 4}),
    Case("decode tf32 8 token tiles", "float32 as tf32, 40 rows: eight 8-token tiles, K = 1028 "
         "ends in a part chunk of one vector a lane",
         "decode_sm80", 40, 1024, 1028, dtype="float32", expect={"token_tiles": 8}),
    Case("decode N-major cluster of 4", "8 rows against an N-major 4096x2048 weight (dx): 32 "
         "blocks of 64 columns, K split in a cluster of 4 (128 blocks, one an SM), the sums "
         "through distributed shared memory (auto takes decode_sm80)",
         "decode_sm80", 8, 2048, 4096, b_k_major=False,
         expect={"auto": "decode_sm80", "token_tiles": 1, "cluster": 4}),
    Case("decode N-major edges", "13 rows (two token tiles) against an N-major 1000x520 weight: "
         "9 blocks, the last with 8 of its 64 columns; K = 1000 ends inside a 32-row chunk, split "
         "in 2 (kernel= only: auto takes wgmma for K under 1024)",
         "decode_sm80", 13, 520, 1000, b_k_major=False,
         expect={"auto": "wgmma_sm90", "token_tiles": 2, "cluster": 2}),
    Case("gemv", "1 row against a small weight (N·K < 2^24): auto's gemv",
         "gemv", 1, 1000, 1000, expect={"auto": "gemv"}),
    Case("gemv streamed two rows", "float32, 2 rows with a bias: each lane's 8 vectors of B and A's "
         "loaded before the multiply, K's 250 vectors a part-empty last batch",
         "gemv", 2, 1000, 1000, dtype="float32", op="linear", expect={"auto": "gemv"}),
    Case("gemv streamed split", "float32, 1 row against 64 long columns: each column split over 8 "
         "warps (the fewest waves times batches), their sums meeting in shared memory",
         "gemv", 1, 64, 16384, dtype="float32", expect={"auto": "gemv"}),
    Case("gemv float32 rows", "float32, 3 rows with a bias: one group of 4 rows (the fourth reads "
         "row 0 and is not stored), B streamed, A's vectors from L1 inside the multiply",
         "gemv", 3, 1000, 1000, dtype="float32", op="linear", expect={"auto": "gemv"}),
    Case("gemv float32 row groups", "float32, 13 rows: two groups of 8 (the second 5 full) over "
         "the grid's y, 1001 columns (the last block's warps partly past N), K = 1028 (kernel= "
         "only: auto takes multistage past 8 rows)",
         "gemv", 13, 1001, 1028, dtype="float32"),
    Case("gemv float32 four columns", "float32, 13 rows against K = 5636: two groups of 8 rows, "
         "each warp 4 columns of 1001 (the last group's 3 past N read column n0 and are not "
         "stored) (kernel= only: auto takes multistage past 8 rows)",
         "gemv", 13, 1001, 5636, dtype="float32"),
    Case("multistage split-K", "float32, 100 rows: 8 small tiles (the second row of them part "
         "empty) and 512 k-tiles, split 8 ways",
         "multistage", 100, 256, 4096, dtype="float32", expect={"tile": (64, 64), "split_k": 8}),
    Case("multistage narrow split-K", "float32 linear with a bias, 33 rows: 12 narrow 32x128 tiles "
         "(the second row of them 1 row full, the last column of them 60 of 128) and 257 k-tiles "
         "of 16 (K ends inside the last), split 16 ways, the bias added by the reduction",
         "multistage", 33, 700, 4100, dtype="float32", op="linear", expect={"tile": (32, 128), "split_k": 16}),
    Case("multistage narrow", "float32, 5 rows against 3001 columns and K = 100: 24 narrow tiles "
         "of 5 rows, K whole (7 k-tiles, the last part full)",
         "multistage", 5, 3001, 100, dtype="float32", expect={"tile": (32, 128), "split_k": 1}),
    Case("multistage large split-K", "float32 linear with a bias, 300 rows: 30 large tiles (the "
         "last row and column of them part empty) and 125 k-tiles, split 4 ways, the bias added "
         "by the reduction",
         "multistage", 300, 2500, 2000, dtype="float32", op="linear",
         expect={"tile": (128, 256), "split_k": 4}),
)
GROUPS = (
    Group("default", {}, DEFAULT_CASES, sweep=True),
    Group("wgmma_tf32_own", {"TORCH_GEMM_WGMMA_TF32_PLAN": "own"}, (
        Case("wgmma tf32 64x256 pairs", "tf32's own rules: 4 rows of 64x256 tiles, paired",
             "wgmma_sm90", 200, 264, 72, dtype="float32",
             expect={"transposed": False, "store": "tma", "tile": (64, 256), "cluster": 2}),
        Case("wgmma tf32 split 8", "tf32, 8 tiles of 64x256 with 256 k-tiles: each split in 8 slices "
             "(a cluster of 8), partials added through distributed shared memory, one box a block",
             "wgmma_sm90", 64, 2048, 8192, dtype="float32",
             expect={"tile": (64, 256), "split_k": 8, "split_groups": 1}),
        Case("wgmma tf32 split 8 in 4 clusters", "tf32 linear with a bias, 2 tiles of 64x256 with 256 "
             "k-tiles: 32 slices of 8 over 4 clusters of 8 a tile, each cluster's sums through "
             "distributed shared memory, then the clusters' through the workspace, added by the last; "
             "the bias enters with the first cluster's first slice",
             "wgmma_sm90", 128, 256, 8192, dtype="float32", op="linear",
             expect={"tile": (64, 256), "split_k": 8, "split_groups": 4}),
        Case("wgmma tf32 split 2 bias", "tf32 linear with a bias, 64 tiles of 64x256 split in 2: the "
             "bias enters with the first slice",
             "wgmma_sm90", 1000, 1000, 1000, dtype="float32", op="linear",
             expect={"tile": (64, 256), "split_k": 2}),
    )),
    Group("wgmma_tf32_sixteen_bit", {"TORCH_GEMM_WGMMA_TF32_PLAN": "sixteen_bit"}, (
        Case("wgmma tf32 128x128 pairs dealt transposed", "tf32 with an N-major B under the 16-bit "
             "rules (TORCH_GEMM_WGMMA_TF32_PLAN=sixteen_bit): the transposed product's 2000 rows "
             "of Bᵀ, read MN-major through permuted register loads, on 128x128 pairs with every "
             "turn dealt out; C filled by transposed TMA boxes",
             "wgmma_sm90", 2000, 200, 4099, dtype="float32", b_k_major=False,
             expect={"transposed": True, "tile": (128, 128), "cluster": 2, "stream_k": True,
                     "store": "tma_transposed"}),
        Case("wgmma tf32 64x64 transposed", "the same on 64x64 pairs, two transposed boxes a tile",
             "wgmma_sm90", 520, 500, 72, dtype="float32", b_k_major=False,
             expect={"transposed": True, "tile": (64, 64), "cluster": 2, "store": "tma_transposed"}),
        Case("wgmma tf32 128x128 split 4 MN-major A", "tf32 with A MN-major (through permuted "
             "register loads) on 128x128 tiles split in 4, one box a block",
             "wgmma_sm90", 100, 3000, 8200, dtype="float32", a_k_major=False,
             expect={"transposed": False, "tile": (128, 128), "split_k": 4, "store": "tma"}),
    )),
    Group("wgmma_tf32_mid", {"TORCH_GEMM_WGMMA_SHAPE": "2x1x192"}, (
        Case("wgmma tf32 128x192 pairs", "TORCH_GEMM_WGMMA_SHAPE=2x1x192 in tf32: 15x20 tiles of "
             "128x192 (paired), C through a ring of one box a consumer, six rounds a tile",
             "wgmma_sm90", 1800, 3840, 320, dtype="float32",
             expect={"tile": (128, 192), "cluster": 2, "store": "tma", "transposed": False}),
        Case("wgmma tf32 128x192 transposed", "the same with an N-major B: the transposed product, "
             "whose C leaves from registers (a transposed column of boxes needs two)",
             "wgmma_sm90", 1024, 1000, 2048, dtype="float32", b_k_major=False,
             expect={"tile": (128, 192), "transposed": True, "store": "registers"}),
    )),
    Group("wgmma_tf32_slim_160", {"TORCH_GEMM_WGMMA_SHAPE": "2x1x160"}, (
        Case("wgmma tf32 slim 128x160", "TORCH_GEMM_WGMMA_SHAPE=2x1x160 in tf32, both operands "
             "K-major: 2x27 tiles of 128x160 (the last part-full), paired, C from registers",
             "wgmma_sm90", 250, 4264, 2050, dtype="float32",
             expect={"tile": (128, 160), "cluster": 2, "store": "registers"}),
    )),
    Group("wgmma_split_2x2", {"TORCH_GEMM_WGMMA_SHAPE": "2x2"}, (
        Case("wgmma 128x256 split 2", "TORCH_GEMM_WGMMA_SHAPE=2x2 forces 128x256 tiles in 2 slices "
             "of K, reduced through the pair's distributed shared memory (the plan no longer picks it)",
             "wgmma_sm90", 1800, 3840, 320, expect={**WIDE, "split_k": 2}),
        Case("wgmma 128x256 split 2 edges", "the same on edge tiles in M, N and K",
             "wgmma_sm90", 250, 520, 200, expect={**WIDE, "split_k": 2}),
    )),
    Group("wgmma_medium_split_2", {"TORCH_GEMM_WGMMA_SHAPE": "2x2x128"}, (
        Case("wgmma 128x128 split 2", "TORCH_GEMM_WGMMA_SHAPE=2x2x128 forces 128x128 tiles in 2 "
             "slices of K, each block owning one 64-column box; edge tiles in M, N and K",
             "wgmma_sm90", 250, 520, 1000, expect={"tile": (128, 128), "split_k": 2}),
    )),
    Group("wgmma_split_groups", {"TORCH_GEMM_WGMMA_SHAPE": "1x8x128x4"}, (
        Case("wgmma 64x128 split 8 in 4 clusters", "TORCH_GEMM_WGMMA_SHAPE=1x8x128x4: 1 tile of "
             "64x128, 131 k-tiles in 32 slices over 4 clusters of 8 (the last slices empty), the "
             "clusters' sums through the workspace (the plan keeps 16-bit tiles in one cluster)",
             "wgmma_sm90", 50, 100, 8383,
             expect={"tile": (64, 128), "split_k": 8, "split_groups": 4}),
    )),
    Group("wgmma_stream_k_all", {"TORCH_GEMM_WGMMA_STREAM_K": "3"}, (
        Case("wgmma 64x128 stream-K every tile", "TORCH_GEMM_WGMMA_STREAM_K=3: one row of 32 tiles "
             "of 64x128 (32 rows), which the plan splits in 2, dealt out whole as k-tiles, about 15 "
             "a block, partials in the workspace; B row-major (N-major), as a dx against a weight",
             "wgmma_sm90", 32, 4096, 4096, b_k_major=False,
             expect={"tile": (64, 128), "split_k": 1, "stream_k": True}),
    )),
    Group("wgmma_stream_k_all_tf32", {"TORCH_GEMM_WGMMA_STREAM_K": "3", "TORCH_GEMM_WGMMA_TF32_PLAN": "own"}, (
        Case("wgmma tf32 64x256 stream-K every tile", "TORCH_GEMM_WGMMA_STREAM_K=3 in tf32 under its "
             "own rules: one row of 8 tiles of 64x256 (16 rows against a weight) in 128 k-tiles "
             "each, dealt out as k-tiles over every SM, partials in the workspace",
             "wgmma_sm90", 16, 2048, 4096, dtype="float32",
             expect={"tile": (64, 256), "consumers": 1, "cluster": 1, "stream_k": True}),
    )),
    Group("wgmma_stream_k_all_wide", {"TORCH_GEMM_WGMMA_SHAPE": "2x1", "TORCH_GEMM_WGMMA_STREAM_K": "3"}, (
        Case("wgmma 128x256 stream-K every tile", "TORCH_GEMM_WGMMA_SHAPE=2x1 and STREAM_K=3: 2x8 "
             "tiles of 128x256 in 8 pair turns of 64 k-tiles, all dealt out as k-tiles to the "
             "resident pairs, partials in the workspace",
             "wgmma_sm90", 256, 2048, 4096, expect={**WIDE, "cluster": 2, "stream_k": True}),
        Case("wgmma tf32 128x256 stream-K every tile", "the same in tf32, A MN-major (through "
             "registers): 16 tiles of 128 k-tiles, single blocks (tf32 pairs no short wave), "
             "dealt out to every SM",
             "wgmma_sm90", 256, 2048, 4096, dtype="float32", a_k_major=False,
             expect={**WIDE, "cluster": 1, "stream_k": True}),
    )),
    Group("wgmma_stream_k_all_medium", {"TORCH_GEMM_WGMMA_SHAPE": "2x1x128", "TORCH_GEMM_WGMMA_STREAM_K": "3"}, (
        Case("wgmma 128x128 stream-K every tile", "TORCH_GEMM_WGMMA_SHAPE=2x1x128 and STREAM_K=3: 2x16 "
             "tiles of 128x128 in 16 pair turns of 64 k-tiles, all dealt out as k-tiles to the "
             "resident pairs, partials in the workspace",
             "wgmma_sm90", 256, 2048, 4096, expect={"tile": (128, 128), "consumers": 2, "cluster": 2,
                                                   "stream_k": True}),
    )),
    Group("wgmma_stream_k_all_paired_small", {"TORCH_GEMM_WGMMA_SHAPE": "1x1x128", "TORCH_GEMM_WGMMA_STREAM_K": "3"}, (
        Case("wgmma 64x128 paired stream-K every tile", "TORCH_GEMM_WGMMA_SHAPE=1x1x128 and STREAM_K=3: "
             "5 rows of 64x128 tiles (the last pair's second block past M) in 24 pair turns of 65 "
             "k-tiles, each dealt out in 2 equal shares, partials in the workspace; C rows of 1001 "
             "elements, stored from registers",
             "wgmma_sm90", 300, 1001, 4099, expect={"tile": (64, 128), "consumers": 1, "cluster": 2,
                                                    "stream_k": True}),
    )),
    Group("wgmma_stream_k", {"TORCH_GEMM_WGMMA_SHAPE": "2x1", "TORCH_GEMM_WGMMA_MAX_CLUSTERS": "16"}, (
        Case("wgmma stream-K", "225 tiles of 128x256 in 113 pair turns over 16 resident clusters: "
             "the last 8 turns are dealt out as k-tiles, partial sums meeting in the workspace",
             "wgmma_sm90", 1800, 3840, 320, expect={**WIDE, "cluster": 2, "stream_k": True}),
        Case("wgmma tf32 stream-K", "the same in tf32 (10 k-tiles of 32 floats a turn)",
             "wgmma_sm90", 1800, 3840, 320, dtype="float32",
             expect={**WIDE, "cluster": 2, "stream_k": True}),
    )),
)
# The paths the list must reach: removing the last case of one fails tests/test_sanitize_cases.py.
REQUIRED_PATHS = tuple(case.path for group in GROUPS for case in group.cases)


def operands(case: Case) -> tuple:
    """The case's A and B (and a bias for "linear") on the CPU, as views of storages with
    `offset` elements in front, in the layouts the case names."""
    dtype, off = getattr(torch, case.dtype), case.offset
    M, N, K, batch = case.M, case.N, case.K, case.batch

    def view(rows: int, cols: int, rows_contiguous: bool) -> torch.Tensor:
        base = torch.randn(batch * rows * cols + off).to(dtype)
        strides = (1, rows) if rows_contiguous else (cols, 1)
        if case.op == "bmm":
            return base.as_strided((batch, rows, cols), (rows * cols, *strides), off)
        return base.as_strided((rows, cols), strides, off)

    a = view(M, K, rows_contiguous=not case.a_k_major)
    b = view(K, N, rows_contiguous=case.b_k_major)
    bias = torch.randn(N).to(dtype) if case.op == "linear" else None
    return a, b, bias


def on_gpu(t: Optional[torch.Tensor]) -> Optional[torch.Tensor]:
    """The same view of a copy of t's storage on the GPU (same strides and offset)."""
    if t is None:
        return None
    base = torch.empty(0, dtype=t.dtype).set_(t.untyped_storage())
    return base.cuda().as_strided(t.shape, t.stride(), t.storage_offset())


def plan(case: Case, env: dict, sm_count: int = PLAN_SM_COUNT) -> dict:
    """What the plans say about the case on a GPU of sm_count SMs under env: sm90_plan's answer
    for wgmma_sm90; for the other kernels the kernel auto picks, with multistage's plan, or
    decode's token tiles and whether decode_sm80 splits K (auto leaves such decode calls to
    wgmma_sm90 on sm_90), or against an N-major B its cluster."""
    a, b, bias = operands(case)
    if case.kernel == "wgmma_sm90_3xtf32":
        # explain's plan of the TF32 product over the split operands (overrides from os.environ:
        # the 3xTF32 cases are the default group's).
        meta = [t.to("meta") if t is not None else None for t in (a, b, bias)]
        return torch_gemm.explain(meta[0], meta[1], kernel=case.kernel, bias=meta[2], sm=90,
                                  sm_count=sm_count, allow_tf32=False)["plan"]
    if case.kernel == "wgmma_sm90":
        base = 256  # a 16-byte-aligned allocation; the offset decides the alignment
        overrides = {arg: env[var] for var, arg in OVERRIDE_ARGS.items() if var in env}
        return torch_gemm._C.sm90_plan(
            case.M, case.N, case.K, sm_count=sm_count, batch=case.batch, dtype=case.dtype,
            a_strides=list(a.stride()), b_strides=list(b.stride()),
            a_address=base + a.storage_offset() * a.element_size(),
            b_address=base + b.storage_offset() * b.element_size(),
            bias=case.op == "linear", row_sum=case.op == "row_sum", **overrides)
    answer = {"auto": torch_gemm._C.auto_kernel(
        case.M, case.N, case.K, dtype=case.dtype, sm=90, sm_count=sm_count,
        b_stride_k=b.stride(-2), allow_tf32=False)["kernel"]}
    if case.kernel == "multistage":
        answer.update(torch_gemm._C.multistage_plan(case.M, case.N, case.K, sm_count=sm_count, batch=case.batch))
    if case.kernel == "decode_sm80":
        # decode_plan.cpp: one 8-token tile up to 8 rows, 2 up to 16, 4 up to 32, else 8.
        answer["token_tiles"] = next(t for t in (1, 2, 4, 8) if case.M <= 8 * t or t == 8)
        if case.M <= 16 and case.dtype != "float32" and case.b_k_major:  # auto's 16-bit decode rule reads the split
            answer["splits_k"] = answer["auto"] == "wgmma_sm90"
        n_major = torch_gemm._C.decode_n_major_plan(
            case.M, case.N, case.K, dtype=case.dtype, sm_count=sm_count, batch=case.batch,
            cluster=env.get("TORCH_GEMM_DECODE_CLUSTER"),
            a_strides=list(a.stride()), b_strides=list(b.stride()))
        if n_major is not None:
            answer["cluster"] = n_major["cluster"]
    return answer


def mismatches(case: Case, answer: dict, env: Optional[dict] = None) -> list:
    """The expected fields the plan's answer disagrees on, as 'key: expected X, planned Y'."""
    wrong = []
    for key, want in expected(case, env or {}).items():
        got = answer.get(key)
        if isinstance(want, dict) and isinstance(got, dict):
            got = {k: got.get(k) for k in want}
        if isinstance(got, list):
            got = tuple(got)
        if got != want:
            wrong.append(f"{key}: expected {want}, planned {got}")
    return wrong


def tolerance(dtype: torch.dtype, tf32: bool) -> float:
    if dtype in (torch.float32, torch.float64):
        return 1e-2 if tf32 else 1e-5
    return 2e-2


def check(name: str, what: str, out: torch.Tensor, ref: torch.Tensor, tol: float) -> int:
    err = ((out.double() - ref).norm() / ref.norm().clamp_min(1e-30)).item()
    if err < tol:
        return 0
    print(f"WRONG {name} {what}: {err:.2e}")
    return 1


def tool_env(group_env: dict) -> dict:
    """The group's environment with the overrides of the tool named in SANITIZE_TOOL."""
    return {**group_env, **TOOL_ENV.get(os.environ.get("SANITIZE_TOOL", ""), {})}


def expected(case: Case, env: dict) -> dict:
    """The case's expected plan under env: C's store from registers where env forces it."""
    if env.get("TORCH_GEMM_WGMMA_STORE") == "registers" and case.expect.get("store", "registers") != "registers":
        return {**case.expect, "store": "registers"}
    return case.expect


def racecheck_skips_bias(name: str) -> bool:
    return name in RACECHECK_BLIND_TO_BIAS and os.environ.get("SANITIZE_TOOL") == "racecheck"


def run_sweep_cases(name: str, dtype: torch.dtype, shapes: list, tol: float) -> int:
    """Every shape in the four layouts through mm_tiled, then the last shape through linear_tiled
    with a bias (added by the kernel); returns the number of wrong results."""
    bad = 0
    for M, N, K in shapes:
        for a_t, b_t, offset in ((False, False, 0), (True, False, 0), (False, True, 1), (True, True, 1)):
            a_base = torch.randn((K, M + offset) if a_t else (M, K + offset)).to(dtype)
            b_base = torch.randn((N, K + offset) if b_t else (K, N + offset)).to(dtype)
            a_cpu = a_base[:, offset:].t() if a_t else a_base[:, offset:]
            b_cpu = b_base[:, offset:].t() if b_t else b_base[:, offset:]
            a_gpu, b_gpu = a_base.cuda(), b_base.cuda()
            a = a_gpu[:, offset:].t() if a_t else a_gpu[:, offset:]
            b = b_gpu[:, offset:].t() if b_t else b_gpu[:, offset:]
            out = torch_gemm.mm_tiled(a, b, kernel=name).cpu()
            ref = a_cpu.double() @ b_cpu.double()
            bad += check(name, f"{dtype} {(M, N, K)} a_t={a_t} b_t={b_t}", out, ref, tol)
    if racecheck_skips_bias(name):
        print(f"sanitize_cases: {name} {dtype} linear + bias left out of racecheck "
              "(its bias row's mbarrier handoff, scripts/racecheck_probe.cu)")
        return bad
    M, N, K = shapes[-1]
    x, w, bias = torch.randn(M, K).to(dtype), torch.randn(N, K).to(dtype), torch.randn(N).to(dtype)
    out = torch_gemm.linear_tiled(x.cuda(), w.cuda(), bias.cuda(), kernel=name).cpu()
    ref = x.double() @ w.double().t() + bias.double()
    return bad + check(name, f"{dtype} linear {(M, N, K)} + bias", out, ref, tol)


def run_row_sum_sweep(name: str, dtype: torch.dtype, shapes: list, tol: float) -> int:
    """mm_tiled_row_sum on every shape with a = gᵀ, as linear_tiled_weight_grad (linear's
    backward) runs it: the row sums the kernel writes besides C. Returns the number of wrong
    results."""
    bad = 0
    for M, N, K in shapes:
        g, b = torch.randn(K, M).to(dtype), torch.randn(K, N).to(dtype)
        out, row_sum = torch_gemm.mm_tiled_row_sum(g.cuda().t(), b.cuda(), kernel=name)
        bad += check(name, f"{dtype} row_sum product {(M, N, K)}", out.cpu(), g.double().t() @ b.double(), tol)
        bad += check(name, f"{dtype} row sums {(M, N, K)}", row_sum.cpu(), g.double().sum(0), tol)
    return bad


def run_sweep(rows: list) -> int:
    bad = 0
    for row in rows:
        name = row["name"]
        shapes = SHAPES + (TENSOR_CORE_SHAPES if name in TENSOR_CORE_KERNELS else [])
        for dtype in (DTYPE_BY_NAME[d] for d in row["dtypes"]):
            tf32 = bool(row.get("tf32")) and dtype == torch.float32
            torch.backends.cuda.matmul.allow_tf32 = tf32
            bad += run_sweep_cases(name, dtype, shapes, tolerance(dtype, tf32))
            if row["row_sum"]:
                bad += run_row_sum_sweep(name, dtype, shapes, tolerance(dtype, tf32))
            print(f"sanitize_cases: sweep {name} {str(dtype).removeprefix('torch.')}"
                  f"{' (tf32)' if tf32 else ''}: {len(shapes)} shapes x 4 layouts, linear + bias"
                  f"{', row sums' if row['row_sum'] else ''}")
    return bad


def run_named_case(case: Case, env: dict, tf32: bool) -> int:
    """Checks that the case still reaches its path on this GPU (where it has the SMs the shapes
    were chosen for), runs it and checks the result; returns 1 if either fails."""
    if case.op == "linear" and racecheck_skips_bias(case.kernel):
        print(f"sanitize_cases: [{case.path}] left out of racecheck (the bias row's mbarrier "
              "handoff, scripts/racecheck_probe.cu)")
        return 0
    sm_count = torch.cuda.get_device_properties(0).multi_processor_count
    wrong = mismatches(case, plan(case, env, sm_count), env)
    if expected(case, env) is not case.expect:
        print(f"sanitize_cases: [{case.path}] C stored from registers under "
              f"{os.environ.get('SANITIZE_TOOL')} (TOOL_ENV): its TMA store runs under the other tools")
    if wrong and sm_count == PLAN_SM_COUNT:
        print(f"NOT REACHED [{case.path}] {(case.M, case.N, case.K)}: {'; '.join(wrong)}")
        return 1
    if wrong:
        print(f"sanitize_cases: [{case.path}] planned otherwise on {sm_count} SMs (shapes chosen "
              f"for {PLAN_SM_COUNT}): {'; '.join(wrong)}")
    a, b, bias = operands(case)
    a_gpu, b_gpu, bias_gpu = on_gpu(a), on_gpu(b), on_gpu(bias)
    ref_a, ref_b = a.double(), b.double()
    if case.op == "linear":
        out = torch_gemm.linear_tiled(a_gpu, b_gpu.t(), bias_gpu, kernel=case.kernel).cpu()
        ref = ref_a @ ref_b + bias.double()
    elif case.op == "row_sum":
        out, row_sum = torch_gemm.mm_tiled_row_sum(a_gpu, b_gpu, kernel=case.kernel)
        tol = tolerance(getattr(torch, case.dtype), tf32)
        if check(case.kernel, f"[{case.path}] row sums", row_sum.cpu(), ref_a.sum(1), tol):
            return 1
        out, ref = out.cpu(), ref_a @ ref_b
    elif case.op == "bmm":
        out, ref = torch_gemm.bmm_tiled(a_gpu, b_gpu, kernel=case.kernel).cpu(), ref_a @ ref_b
    else:
        out, ref = torch_gemm.mm_tiled(a_gpu, b_gpu, kernel=case.kernel).cpu(), ref_a @ ref_b
    print(f"sanitize_cases: [{case.path}] {case.kernel} {case.op} {case.dtype} "
          f"{(case.batch, case.M, case.N, case.K)}: {case.why}")
    return check(case.kernel, f"[{case.path}]", out, ref, tolerance(getattr(torch, case.dtype), tf32))


def run_group(group: Group, only: list) -> int:
    env = tool_env(group.env)
    for var in OVERRIDE_ARGS:
        if os.environ.get(var) not in (None, env.get(var)):
            print(f"sanitize_cases: {var}={os.environ[var]} is set; group {group.name} runs with "
                  f"{env.get(var, 'it unset')} (unset it)")
            return 2
    # Before the first launch: the launcher reads the overrides once per process.
    os.environ.update(env)
    table = {row["name"]: row for row in torch_gemm.kernel_table() if row["device"] == "cuda"}
    unknown = sorted(set(only) - set(table))
    if unknown:
        print(f"sanitize_cases: SANITIZE_KERNELS names no CUDA kernel of this build: {unknown} "
              f"(there are {sorted(table)})")
        return 2
    major, minor = torch.cuda.get_device_capability()
    runnable = []
    for name, row in table.items():
        if only and name not in only:
            continue
        if row["min_sm"] > major * 10 + minor:
            print(f"sanitize_cases: {name} needs sm_{row['min_sm']}, skipped on sm_{major}{minor}")
            continue
        runnable.append(row)
    allowed = torch.backends.cuda.matmul.allow_tf32
    bad = 0
    try:
        if group.sweep:
            bad += run_sweep(runnable)
        names = {row["name"]: row for row in runnable}
        for case in group.cases:
            if case.kernel not in names:
                continue
            tf32 = bool(names[case.kernel].get("tf32")) and case.dtype == "float32"
            torch.backends.cuda.matmul.allow_tf32 = tf32
            bad += run_named_case(case, env, tf32)
    finally:
        torch.backends.cuda.matmul.allow_tf32 = allowed
    torch.cuda.synchronize()
    print(f"sanitize_cases: group {group.name}: {'all correct' if not bad else f'{bad} wrong'}")
    return 1 if bad else 0


def main(argv: list) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    what = parser.add_mutually_exclusive_group(required=True)
    what.add_argument("--list-groups", action="store_true", help="print the groups' names, one a line")
    what.add_argument("--group", choices=[g.name for g in GROUPS], help="run this group's cases")
    args = parser.parse_args(argv)
    if args.list_groups:
        for group in GROUPS:
            print(group.name)
        return 0
    only = [k for k in os.environ.get("SANITIZE_KERNELS", "").split(",") if k]
    return run_group(next(g for g in GROUPS if g.name == args.group), only)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
