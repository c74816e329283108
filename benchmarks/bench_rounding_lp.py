"""HiGHS on TopDown's rounding LPs, with and without its presolve, level by level.

Run from the repository root::

    python benchmarks/bench_rounding_lp.py [--persons 10000000] [--repeats 3]
        [--workdir DIR] [--out benchmarks/pl94/rounding_lp_10m.md] [--json ...]

The node problems are captured as in ``bench_clarabel_kkt.py`` (the same ``--workdir`` reuses
its ``nodes.pkl`` when it was captured at the same ``--persons``); each captured node is solved
once (fit and production rounding) and every rounding LP it posed is kept. Then, ``--repeats``
times and in turn, HiGHS solves every kept LP with its presolve (HiGHS's default) and without
(``solve_lp``'s default since this benchmark), each in a fresh process. Reported per level:
the median milliseconds per LP, the ratio, whether both solutions were integral vertices with
the same objective, and how many solutions differ (equal objectives: ties between optimal
vertices, which either way the rounding may take).
Nothing is asserted; see ``benchmarks/README.md`` on quiet machines.
"""

from __future__ import annotations

import pickle
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_clarabel_kkt import PARENTS, captured  # noqa: E402

from _common import (  # noqa: E402
    context_end,
    context_start,
    describe_context,
    emit,
    markdown_table,
    run_python,
    synthetic_parser,
    workdir_of,
)

VARIANTS = {"presolve": True, "no presolve": False}


def collect(nodes: str, level: str) -> dict[str, Any]:
    """Solve every captured node of ``level``; pickle the rounding LPs it posed."""
    import numpy as np

    import postproc.methods.topdown.node as node

    tasks = pickle.loads(Path(nodes).read_bytes())[level]
    lps = []
    solve = node.solve_lp

    def record(lp, **kwargs):
        lps.append(lp)
        return solve(lp, **kwargs)

    node.solve_lp = record
    try:
        for task in tasks:
            node.solve_node(task, chain=("clarabel",))
    finally:
        node.solve_lp = solve
    lps = [lp for lp in lps if lp.integer is None]
    path = Path(f"{nodes}.{level}.lps")
    path.write_bytes(pickle.dumps(lps))
    return {"path": str(path), "lps": len(lps),
            "columns": float(np.mean([lp.c.size for lp in lps])) if lps else 0.0}


def solve_all(path: str, presolve: bool, keep: bool = False) -> dict[str, Any]:
    """Solve every kept LP; seconds, and with ``keep`` the solutions pickled beside ``path``."""
    from postproc.infra.solvers import solve_lp

    lps = pickle.loads(Path(path).read_bytes())
    t0 = time.perf_counter()
    solutions = [solve_lp(lp, presolve=presolve) for lp in lps]
    seconds = time.perf_counter() - t0
    if keep:
        Path(f"{path}.{presolve}").write_bytes(pickle.dumps(
            [(s.status.value, s.x, s.objective) for s in solutions]))
    return {"seconds": seconds}


def agreement(path: str) -> dict[str, Any]:
    """Both variants' solutions: all optimal integral vertices, objectives, differences."""
    import numpy as np

    a, b = (pickle.loads(Path(f"{path}.{v}").read_bytes()) for v in (True, False))
    ok = all(s == "optimal" and np.all(np.abs(x - np.round(x)) <= 1e-6)
             for s, x, _ in a + b)
    gap = max((abs(fa - fb) / max(1.0, abs(fa)) for (_, _, fa), (_, _, fb) in zip(a, b)),
              default=0.0)
    differ = sum(not np.array_equal(np.round(xa), np.round(xb))
                 for (_, xa, _), (_, xb, _) in zip(a, b))
    return {"integral_optima": bool(ok), "max_relative_objective_gap": gap,
            "solutions_differ": differ}


def main(argv: list[str] | None = None) -> int:
    parser = synthetic_parser(__doc__.splitlines()[0])
    args = parser.parse_args(argv)
    workdir = workdir_of(args, "bench_rounding_lp_")
    context = context_start()
    made = captured(args.persons, workdir, list(PARENTS))   # every level, at this size
    nodes, levels = Path(made["path"]), list(made["nodes"])

    results, rows = {}, []
    for level in levels:
        kept = run_python("bench_rounding_lp", "collect",
                          {"nodes": str(nodes), "level": level})["result"]
        seconds: dict[str, list[float]] = {v: [] for v in VARIANTS}
        for repeat in range(args.repeats):
            for name, presolve in VARIANTS.items():
                r = run_python("bench_rounding_lp", "solve_all",
                               {"path": kept["path"], "presolve": presolve,
                                "keep": repeat == 0})["result"]
                seconds[name].append(r["seconds"])
        same = run_python("bench_rounding_lp", "agreement", {"path": kept["path"]})["result"]
        ms = {v: 1000 * statistics.median(s) / max(1, kept["lps"]) for v, s in seconds.items()}
        results[level] = {**kept, "ms_per_lp": ms, **same}
        rows.append([f"{PARENTS[level]} → {level}", kept["lps"], f"{kept['columns']:,.0f}",
                     f"{ms['presolve']:.2f}", f"{ms['no presolve']:.2f}",
                     f"{ms['presolve'] / ms['no presolve']:.2f}",
                     "yes" if same["integral_optima"] else "NO",
                     f"{same['max_relative_objective_gap']:.1e}",
                     same["solutions_differ"]])
        print(f"{level} done", file=sys.stderr, flush=True)
    context = context_end(context)
    text = ["# HiGHS on TopDown's rounding LPs, with and without presolve", "",
            f"`python benchmarks/bench_rounding_lp.py --persons {args.persons} "
            f"--repeats {args.repeats}`", "", describe_context(context), "",
            f"{args.persons:,} synthetic persons; the rounding LPs of the nodes "
            "`bench_clarabel_kkt.py` captures. Milliseconds per LP: the median over "
            f"{args.repeats} repeats, each variant in a fresh process. \"Integral optima\": "
            "every solution of both variants optimal and integral (the LPs are totally "
            "unimodular); the objective gap is relative; \"differ\" counts LPs whose two "
            "optimal vertices are not the same (ties).", "",
            markdown_table(["node (parent → children)", "LPs", "mean columns",
                            "presolve ms", "no presolve ms", "speed-up", "integral optima",
                            "max objective gap", "differ"], rows)]
    emit("\n".join(text) + "\n", {"persons": args.persons, "levels": results,
                                  "context": context},
         out=args.out, json_path=args.json_path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
