"""The 2020-style TopDown on each executor: serial, a process pool, a Dask LocalCluster.

Run from the repository root::

    python benchmarks/bench_pl94_executors.py [--persons 200000] [--repeats 3] [--workers 2]
        [--workdir DIR] [--out benchmarks/pl94/executors.md] [--json ...]

The measurements are made once (:func:`bench_pl94_engine.prepare`: the ``postproc demo --preset
pl94_2020`` configuration). Each executor is started once and warmed up with one TopDown run
(worker start-up and imports are not in the timings), then the executors run ``--repeats``
times in turn with the production fit and rounder passes. Reported: the median seconds, the
ratio to the process pool measured in the same run (the issue's target: Dask within 15 % of
it), and whether every level's histograms equal the serial run's. Nothing is asserted.
"""

from __future__ import annotations

import argparse
import pickle
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_pl94_engine import prepare  # noqa: E402

from _common import context_end, context_start, describe_context, emit, markdown_table  # noqa: E402

EXECUTORS = ("serial", "process", "dask")


def main(argv=None) -> int:
    import numpy as np

    from postproc.infra.executors import get_executor
    from postproc.methods.topdown import topdown

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--persons", type=int, default=200_000)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--workdir", default=None)
    p.add_argument("--out", default=None)
    p.add_argument("--json", default=None)
    args = p.parse_args(argv)
    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="bench_pl94_executors_"))
    workdir.mkdir(parents=True, exist_ok=True)
    context = context_start()
    prepared = prepare(args.persons, str(workdir))
    with open(prepared["path"], "rb") as f:
        saved = pickle.load(f)
    options = {"passes": saved["passes"], "round_passes": saved["round_passes"],
               **saved.get("options", {})}
    pools = {name: get_executor(name, workers=args.workers) for name in EXECUTORS}
    seconds: dict[str, list[float]] = {name: [] for name in EXECUTORS}
    startup: dict[str, float] = {}
    hists: dict[str, Any] = {}
    try:
        for name, pool in pools.items():
            t = time.perf_counter()
            hists[name] = topdown(saved["noisy"], saved["spec"], executor=pool,
                                  **options).histograms
            startup[name] = time.perf_counter() - t
        for r in range(args.repeats):
            for name, pool in pools.items():
                t = time.perf_counter()
                topdown(saved["noisy"], saved["spec"], executor=pool, **options)
                seconds[name].append(time.perf_counter() - t)
                print(f"repeat {r + 1}: {name}: {seconds[name][-1]:.1f} s", file=sys.stderr)
    finally:
        for pool in pools.values():
            pool.close()
    context = context_end(context)
    med = {name: statistics.median(v) for name, v in seconds.items()}
    same = {name: all(np.array_equal(a, b) for a, b in zip(hists[name], hists["serial"]))
            for name in EXECUTORS}
    rows = [[name, f"{startup[name]:.1f}", f"{med[name]:.2f}",
             " ".join(f"{s:.2f}" for s in seconds[name]),
             f"{med[name] / med['process']:.3f}", str(same[name])] for name in EXECUTORS]
    text = "\n".join([
        "# The 2020-style TopDown on each executor", "",
        f"Command: `python benchmarks/bench_pl94_executors.py --persons {args.persons} "
        f"--repeats {args.repeats} --workers {args.workers}`", "",
        describe_context(context), "",
        f"{args.persons:,} synthetic persons, the `postproc demo --preset pl94_2020` "
        f"configuration; {args.workers} workers (Dask: a LocalCluster on loopback). The first "
        "run of each executor (start-up, imports) is not timed with the others.", "",
        markdown_table(["executor", "first run s", "median s", "runs s",
                        "÷ process pool", "histograms = serial"], rows), ""])
    emit(text, {"args": vars(args), "seconds": seconds, "startup": startup, "same": same,
                "context": context}, out=args.out, json_path=args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
