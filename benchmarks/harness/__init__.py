"""The benchmarks' shared harness: what every script in benchmarks/ times the same way, checks
the same way and records the same way, so that a script is only its sweep, its table and its
command line. docs/benchmarks.md describes the method and the records.

    timing   CUDA-event timing with the L2 flushed, callables interleaved rep by rep; the CPU's
             perf_counter timer; host time per call; input-set rotation
    gate     the float64 correctness gate: references, relative errors, tolerances
    records  record metadata, git state, merging and writing JSON/CSV, where records go
    peaks    the GPU peak table, the measured copy bandwidth, FLOP and byte counts
    device   device names and file names, the build's kernels, torch's known-slow paths
    dtypes   the dtype names of the records and TF32 mode
    cli      command-line pieces shared by the scripts (lists, timing budget, --out/--record)
    table    fixed-width tables and their legends
    plots    matplotlib set-up and axis helpers

The scripts run as ``python benchmarks/<script>.py``, so benchmarks/ is their ``sys.path[0]``
and ``import harness`` finds this package; the tests reach it through pytest's ``pythonpath``
(pyproject.toml). ``records`` and ``table`` import no torch, so benchmarks/report.py runs
without it.
"""
