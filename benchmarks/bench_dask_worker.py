"""The same TopDown nodes solved in a process-pool worker and in Dask workers, with and without
the worker settings :class:`postproc.infra.dask_executor.DaskExecutor` gives its local cluster.

Run from the repository root::

    python benchmarks/bench_dask_worker.py [--persons 10000000] [--repeats 3] [--workdir DIR]
        [--out benchmarks/pl94/dask_worker_malloc.md] [--json ...]

The block-level nodes (80 block-group nodes) are captured as in ``bench_clarabel_kkt.py``
(synthetic data, seed 2020; reused from ``--workdir``). Then, ``--repeats`` times and in turn,
one worker of each kind solves every captured node twice (two tasks, one after the other):

* **process** — a :class:`~postproc.infra.executors.ProcessExecutor` worker;
* **dask, Dask's defaults** — a one-worker ``DaskExecutor`` whose local cluster keeps Dask's
  worker settings (``MALLOC_TRIM_THRESHOLD_=65536``, the statistical profiler on);
* **dask, ours** — the same with ``local_worker_config()`` (the allocator left alone, no
  profiler, numpy's huge-page advice off): what ``executor="dask"`` runs.

Reported: the median over repeats and tasks of the wall seconds inside the task and of the
worker process's CPU seconds, and each Dask variant's ratio to the process worker in the same
run. Every variant starts without ``MALLOC_TRIM_THRESHOLD_`` in its parent's environment (Dask's
nanny writes it into the environment of the process that starts the cluster). Nothing is
asserted; see ``benchmarks/README.md`` on quiet machines.
"""

from __future__ import annotations

import os
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_clarabel_kkt import captured  # noqa: E402

from _common import (  # noqa: E402
    context_end,
    context_start,
    describe_context,
    emit,
    markdown_table,
    synthetic_parser,
    workdir_of,
)

VARIANTS = ("process", "dask, Dask's defaults", "dask, ours")


def solve_block_nodes(path: str) -> tuple[float, float]:
    """Solve every captured block-level node: (wall seconds, process CPU seconds)."""
    import pickle
    import time

    from postproc.methods.topdown.node import solve_node

    tasks = pickle.loads(Path(path).read_bytes())["block"]
    wall, cpu = time.perf_counter(), time.process_time()
    for task in tasks:
        solve_node(task)
    return time.perf_counter() - wall, time.process_time() - cpu


def run_variant(variant: str, path: str) -> list[tuple[float, float]]:
    """Two tasks of :func:`solve_block_nodes` on one fresh worker of ``variant``."""
    import postproc.infra.dask_executor as dask_executor
    from postproc.infra.executors import ProcessExecutor

    os.environ.pop("MALLOC_TRIM_THRESHOLD_", None)
    if variant == "process":
        with ProcessExecutor(workers=1) as ex:
            return list(ex.map(solve_block_nodes, [path, path]))
    ours = dask_executor.local_worker_config
    if variant == "dask, Dask's defaults":
        dask_executor.local_worker_config = dict
    try:
        with dask_executor.DaskExecutor(workers=1) as ex:
            return list(ex.map(solve_block_nodes, [path, path]))
    finally:
        dask_executor.local_worker_config = ours


def main(argv: list[str] | None = None) -> int:
    parser = synthetic_parser(__doc__.splitlines()[0])
    args = parser.parse_args(argv)
    workdir = workdir_of(args, "bench_dask_worker_")
    made = captured(args.persons, workdir, ["block"])
    context = context_start()
    runs: dict[str, list[tuple[float, float]]] = {v: [] for v in VARIANTS}
    for repeat in range(args.repeats):
        for variant in VARIANTS:
            runs[variant] += run_variant(variant, made["path"])
            print(f"repeat {repeat + 1}: {variant} done", file=sys.stderr, flush=True)
    context = context_end(context)
    wall = {v: statistics.median(w for w, _ in runs[v]) for v in VARIANTS}
    cpu = {v: statistics.median(c for _, c in runs[v]) for v in VARIANTS}
    rows = [[v, f"{wall[v]:.2f}", f"{cpu[v]:.2f}", f"{wall[v] / wall['process']:.2f}",
             ", ".join(f"{w:.2f}" for w, _ in runs[v])] for v in VARIANTS]
    text = ["# TopDown's block-level nodes in a process-pool worker and in Dask workers", "",
            f"`python benchmarks/bench_dask_worker.py --persons {args.persons} "
            f"--repeats {args.repeats}`", "", describe_context(context), "",
            f"{made['nodes']['block']} block-group nodes (children: blocks) captured from "
            f"{args.persons:,} synthetic persons, solved by one worker, twice per repeat. "
            "Seconds: the median over repeats and tasks, wall time inside the task and the "
            "worker process's CPU time (every thread); the ratio is to the process-pool "
            "worker in the same run.", "",
            markdown_table(["worker", "wall s", "CPU s", "wall / process", "every task (wall s)"],
                           rows)]
    emit("\n".join(text) + "\n", {"persons": args.persons, "nodes": made["nodes"],
                                  "runs": runs, "wall": wall, "cpu": cpu, "context": context},
         out=args.out, json_path=args.json_path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
