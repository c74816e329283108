"""Time TopDown on synthetic 1940-style data with each executor: serial, process pool, Dask.

Run ``python benchmarks/bench_executors.py [persons] [repeats] [batch_children]``. It synthesizes
``persons`` persons (seed 1), tabulates and measures them once (E2E budget at ε = 1, geometric
mechanism), then for each executor

* starts it (the process pool with 2 workers; Dask as a 2-worker ``LocalCluster`` on loopback,
  one thread per worker) and warms it up with a TopDown run on 20,000 persons, so that worker
  start-up and imports are counted once, in the ``start-up`` column, and not in the runs;
* times ``repeats`` runs of ``topdown(noisy, Spec.e2e(levels), executor=...)`` and reports the
  median, and its ratio to the serial median (below 1 is faster);
* checks that every level's histograms equal the serial executor's.

The figures depend on the machine and on whatever else it runs; the table header says how many
CPUs it has and the load average when the benchmark started.
"""

from __future__ import annotations

import os
import platform
import statistics
import sys
import time
from typing import Any

import numpy as np

from hierarchy.budget import Budget
from hierarchy.measurement import measure
from hierarchy.queries import e2e_workload
from hierarchy.schema import E2E_1940
from hierarchy.synth import synthesize_1940
from hierarchy.tabulation import tabulate
from invariants.spec import Spec
from postproc.infra.executors import get_executor
from postproc.methods.topdown import topdown

LEVELS = ["nation", "state", "county", "enum_dist"]
EXECUTORS = ("serial", "process", "dask")


def _noisy(persons: int):
    data = synthesize_1940(persons, seed=1)
    truth = tabulate(data.persons, schema=E2E_1940, levels=LEVELS, units=data.units)
    return measure(truth, e2e_workload(E2E_1940), Budget.e2e(1, LEVELS), "geometric", rng=3,
                   publish={"tot": LEVELS[:2], "gqhh": LEVELS[-1:]})


def run(persons: int = 1_000_000, repeats: int = 3, *, workers: int = 2,
        batch_children: int = 512) -> dict[str, Any]:
    """Median seconds of TopDown with each executor on ``persons`` synthetic persons.

    Parameters
    ----------
    persons : int, optional
        Synthetic persons (seed 1).
    repeats : int, optional
        Timed runs per executor; the median is reported.
    workers : int, optional
        Workers of the process pool and of the Dask cluster.
    batch_children : int, optional
        Children per work item (``topdown``'s default).

    Returns
    -------
    dict
        ``persons, repeats, workers, batch_children, units`` (per level), ``machine``,
        ``load`` (1-minute load average at the start) and ``executors``:
        ``{name: {"seconds": median, "runs": [...], "startup": seconds, "ratio": vs serial}}``.

    Raises
    ------
    AssertionError
        An executor's histograms differ from the serial executor's (a bug, not a timing).

    Examples
    --------
    >>> result = run(persons=20_000, repeats=1)      # starts a pool and a cluster: ~10-20 s
    >>> sorted(result["executors"])
    ['dask', 'process', 'serial']
    >>> result["executors"]["serial"]["ratio"]
    1.0
    """
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    t0 = time.perf_counter()
    noisy = _noisy(persons)
    prepare = time.perf_counter() - t0
    warmup = _noisy(20_000)
    spec = Spec.e2e(LEVELS)
    reference: list[np.ndarray] | None = None
    out: dict[str, dict[str, Any]] = {}
    for name in EXECUTORS:
        t0 = time.perf_counter()
        ex = get_executor(name, workers=workers)
        try:
            topdown(warmup, spec, executor=ex, batch_children=batch_children)
            startup = time.perf_counter() - t0
            runs = []
            for _ in range(repeats):
                t0 = time.perf_counter()
                result = topdown(noisy, spec, executor=ex, batch_children=batch_children)
                runs.append(time.perf_counter() - t0)
        finally:
            ex.close()
        if reference is None:
            reference = list(result.histograms)
        for level, a, b in zip(LEVELS, reference, result.histograms):
            assert np.array_equal(a, b), f"{name} differs from serial at {level}"
        out[name] = {"seconds": statistics.median(runs), "runs": runs, "startup": startup,
                     "workers": 1 if name == "serial" else workers}
    for figures in out.values():
        figures["ratio"] = figures["seconds"] / out["serial"]["seconds"]
    return {"persons": persons, "repeats": repeats, "workers": workers,
            "batch_children": batch_children, "prepare_seconds": prepare,
            "units": {lv: noisy.geography.n_units(lv) for lv in LEVELS},
            "machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs",
            "load": load, "executors": out}


def table(result: dict[str, Any]) -> str:
    """The result of :func:`run` as a markdown table (one row per executor)."""
    lines = ["| executor | workers | median s | ratio vs serial | runs (s) | start-up s |",
             "|---|---:|---:|---:|---|---:|"]
    for name, f in result["executors"].items():
        runs = ", ".join(f"{s:.2f}" for s in f["runs"])
        lines.append(f"| {name} | {f['workers']} | {f['seconds']:.2f} | {f['ratio']:.2f} | "
                     f"{runs} | {f['startup']:.2f} |")
    return "\n".join(lines)


if __name__ == "__main__":
    persons = int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000
    repeats = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    batch_children = int(sys.argv[3]) if len(sys.argv) > 3 else 512
    result = run(persons, repeats, batch_children=batch_children)
    units = ", ".join(f"{lv} {n:,}" for lv, n in result["units"].items())
    print(f"TopDown (E2E spec) on {result['persons']:,} synthetic persons ({units}); "
          f"batch_children {result['batch_children']}; median of {result['repeats']} runs; "
          f"{result['machine']}, load average {result['load']:.1f} at start; synthesize + "
          f"tabulate + measure {result['prepare_seconds']:.1f} s (not in the table)\n")
    print(table(result))
