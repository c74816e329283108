"""BLAS threads in the process pool's workers: one thread per core in every worker (numpy's
default, what the pool did before) against the cores shared out
(:func:`postproc.infra.executor_base.worker_blas_threads`: one each with two workers on two
cores).

Run from the repository root::

    python benchmarks/bench_worker_threads.py [--persons 10000000] [--repeats 3]
        [--workdir DIR] [--out benchmarks/gls/worker_threads.md]
        [--json benchmarks/gls/worker_threads.json]

Two measurements, A/B interleaved (default first, then shared out, in every round), medians
over the rounds:

1. **The product**: two workers at once, each computing ``(units·62 × 4) @ (4 × 4)`` products
   of the size a part's bottom group makes on the 2020 workload (930,000 rows; what
   :func:`postproc.methods.gls.information.times` does in ``level_information`` and
   ``_level_means``) 20 times; the wall seconds until both are done.
2. **gls in parts** on the synthetic 2020-style data of ``bench_pl94_parts.py`` (seed 2020,
   kept in ``--workdir`` and reused), two worker processes, as ``gls_parts.py`` runs it: the
   run's seconds and the GLS's own (the run less tabulating and measuring).

Nothing is asserted: the script measures and reports.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import (  # noqa: E402
    context_end,
    context_start,
    describe_context,
    emit,
    markdown_table,
    run_python,
)

VARIANTS = ("one thread per core in every worker", "cores shared out")


def _products(_: int) -> float:
    import numpy as np

    from postproc.methods.gls.information import times

    rng = np.random.default_rng(0)
    a = rng.standard_normal((930_000, 4))
    m = rng.standard_normal((4, 4))
    t = time.perf_counter()
    for _ in range(20):
        times(a, m)
    return time.perf_counter() - t


def _share(shared: bool) -> None:
    """Process pools made from now on in this interpreter: their workers' BLAS threads shared
    out (the toolkit's default) or left at numpy's (a thread per core in every worker)."""
    import postproc.infra.executors as executors

    if not shared:
        executors.worker_blas_threads = lambda workers, cores=None: None


def products(shared: bool) -> dict[str, Any]:
    """Both workers' products at once: wall seconds, and each worker's own."""
    from postproc.infra.executors import ProcessExecutor

    _share(shared)
    with ProcessExecutor(workers=2) as ex:
        list(ex.map(_blas_warm, range(2)))
        t = time.perf_counter()
        own = list(ex.map(_products, range(2)))
        return {"wall": time.perf_counter() - t, "workers": own}


def _blas_warm(_: int) -> int:
    import numpy as np

    return int((np.ones((64, 64)) @ np.ones((64, 64)))[0, 0])


def gls(directory: str, shared: bool) -> dict[str, Any]:
    """``gls_parts.gls_run`` with the workers' BLAS threads shared out or not."""
    import gls_parts

    _share(shared)
    r = gls_parts.gls_run(directory, 20_000, "process")
    return {"seconds": r["seconds"], "gls": gls_parts.gls_seconds(r["timings"]),
            "timings": r["timings"]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--persons", type=int, default=10_000_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--workdir", default=None)
    parser.add_argument("--out", default=None)
    parser.add_argument("--json", dest="json_path", default=None)
    args = parser.parse_args(argv)
    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="worker_threads_"))
    directory = workdir / f"p{args.persons}"
    directory.mkdir(parents=True, exist_ok=True)
    run_python("bench_pl94_parts", "synthesize", {"persons": args.persons,
                                                  "directory": str(directory)})
    context = context_start()
    runs: dict[str, list[dict[str, Any]]] = {"products": [], "gls": []}
    for _ in range(args.repeats):
        for shared in (False, True):
            p = run_python("bench_worker_threads", "products", {"shared": shared})
            runs["products"].append({"shared": shared, **p["result"]})
            g = run_python("bench_worker_threads", "gls", {"directory": str(directory),
                                                           "shared": shared})
            runs["gls"].append({"shared": shared, **g["result"],
                                "peak": g["process"]["tree_peak_rss_bytes"]})
    context = context_end(context)

    def med(kind: str, key: str, shared: bool) -> float:
        return statistics.median(r[key] for r in runs[kind] if r["shared"] == shared)

    rows = []
    for kind, key, what in (("products", "wall", "two workers' products, wall s"),
                            ("gls", "seconds", f"gls in parts, {args.persons:,} persons: "
                                               "run s"),
                            ("gls", "gls", "… the GLS's own s")):
        a, b = med(kind, key, False), med(kind, key, True)
        rows.append([what, f"{a:.2f}", f"{b:.2f}", f"{a / b:.2f}"])
    text = "\n".join([
        "# BLAS threads in the process pool's workers", "",
        f"`python benchmarks/bench_worker_threads.py --persons {args.persons} "
        f"--repeats {args.repeats}`", "",
        describe_context(context), "",
        f"Medians of {args.repeats} interleaved rounds; ratio = default / shared out.", "",
        markdown_table(["", VARIANTS[0], VARIANTS[1], "ratio"], rows)])
    emit(text, {"context": context, "persons": args.persons, "runs": runs}, out=args.out,
         json_path=args.json_path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
