"""Clarabel's two KKT factorizations (qdldl, faer) on TopDown's 2020-style nodes, level by level.

Run from the repository root::

    python benchmarks/bench_clarabel_kkt.py [--persons 10000000] [--repeats 3]
        [--levels county,tract,block_group,block] [--workdir DIR]
        [--out benchmarks/pl94/clarabel_kkt_10m.md] [--json ...]

The data are synthesized (``postproc synth2020``, seed 2020; reused from ``--workdir`` when
already there) and run in parts (`postproc run --parts`, serial executor) until the first part's
block level: the node problems of every level are captured as TopDown builds them — with
``--levels state`` the nation's node (children: states), every state
node (children: counties), the 15 largest county nodes (children: tracts) and 15 more at random,
and 40 tract and 80 block-group nodes of the first part (children: block groups, blocks) — and
pickled. Then, ``--repeats`` times and in turn, each variant fits every captured node (all its
least-squares passes, ``clarabel`` alone, one thread):

* **qdldl** — Clarabel's simplicial LDLᵀ;
* **faer** — its supernodal LDLᵀ (Clarabel 0.11's default);
* **chosen** — what :func:`postproc.infra.solvers.clarabel_linear_solver` picks per problem.

With ``--per-problem``, every pass of every node is instead fitted once with each and listed
(its variables, variables per child, constraint entries per variable, the two times and the
rule's pick), with the levels' sums under qdldl, faer, the rule and the better of the two.

Reported per level: the median over repeats of the summed fit seconds, the ratio of each to
qdldl measured in the same run, the iterations, and the largest difference between the qdldl and
faer fits (the rounding then decides integers). A capture of the same size and levels in
``--workdir`` is reused (``nodes.json``). Nothing is asserted; see
``benchmarks/README.md`` on quiet machines.
"""

from __future__ import annotations

import json
import pickle
import random
import statistics
import sys
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
    synthetic_parser,
    workdir_of,
)

METHODS = ("qdldl", "faer", "chosen")
PARENTS = {"state": "nation", "county": "state", "tract": "county", "block_group": "tract",
           "block": "block group"}
#: the levels captured by default: the nation's single node (its 51 states) only on request
LEVELS = ("county", "tract", "block_group", "block")


class _Captured(Exception):
    pass


def capture(persons: int, directory: str, levels: list[str] | None = None) -> dict[str, Any]:
    """Synthesize (or reuse) the data and capture node tasks of ``levels`` (children's
    levels; default :data:`LEVELS`); pickle them to ``directory/nodes.pkl``,
    and what was captured (persons, blocks, nodes per level) to ``directory/nodes.json``."""
    import shutil

    from bench_pl94_parts import synthesize

    from postproc.apps.runs.demo import demo_config
    from postproc.apps.runs.parts import run_in_parts
    from postproc.methods.topdown.plan import RunPlan

    made = synthesize(persons, directory)
    wanted = set(levels or LEVELS)
    pick = random.Random(2020)
    captured: dict[str, list] = {}
    build = RunPlan.tasks

    def level_tasks(plan, li, hists):
        tasks = build(plan, li, hists)
        level = tasks[0].level if tasks else ""
        if level not in wanted or level in captured:
            return tasks
        if level == "county":
            captured[level] = list(tasks)
        elif level == "tract":
            largest = sorted(tasks, key=lambda t: -t.k)[:15]
            rest = [t for t in tasks if t not in largest]
            captured[level] = largest + pick.sample(rest, min(15, len(rest)))
        else:
            captured[level] = pick.sample(list(tasks), min(40 if level == "block_group" else 80,
                                                           len(tasks)))
        if set(captured) == wanted:
            raise _Captured
        return tasks

    out = Path(directory) / "capture_run"
    if out.exists():
        shutil.rmtree(out)
    RunPlan.tasks = level_tasks
    try:
        run_in_parts(demo_config(directory, preset="pl94_2020", seed=2020, executor="serial"),
                     out, part_blocks=20_000, log=lambda line: None)
    except _Captured:
        pass
    finally:
        RunPlan.tasks = build
        shutil.rmtree(out, ignore_errors=True)
    path = Path(directory) / "nodes.pkl"
    path.write_bytes(pickle.dumps(captured))
    made = {"persons": persons, "blocks": made["blocks"], "path": str(path),
            "nodes": {level: len(tasks) for level, tasks in captured.items()}}
    (Path(directory) / "nodes.json").write_text(json.dumps(made))
    return made


def captured(persons: int, workdir: Path, levels: list[str]) -> dict[str, Any]:
    """What :func:`capture` wrote to ``workdir`` (``nodes.json``) when it captured exactly
    ``levels`` at ``persons``; otherwise a new capture, in a fresh interpreter."""
    nodes, made = workdir / "nodes.pkl", workdir / "nodes.json"
    found = json.loads(made.read_text()) if made.exists() and nodes.exists() else {}
    if found.get("persons") == persons and set(found.get("nodes", ())) == set(levels):
        return found
    return run_python("bench_clarabel_kkt", "capture",
                      {"persons": persons, "directory": str(workdir),
                       "levels": list(levels)})["result"]


def fit_all(path: str, level: str, method: str, keep: bool = False) -> dict[str, Any]:
    """Fit every captured node of ``level`` with ``method``: seconds, iterations, what
    ``chosen`` picked per problem; with ``keep``, the fits are pickled beside ``path``."""
    import postproc.infra.solvers.backends as backends
    from postproc.methods.topdown.node import fit_passes
    from postproc.methods.topdown.rows import Layout

    tasks = pickle.loads(Path(path).read_bytes())[level]
    chosen = backends.clarabel_linear_solver
    picks: dict[str, int] = {}

    def pick(qp):
        name = chosen(qp) if method == "chosen" else method
        picks[name] = picks.get(name, 0) + 1
        return name

    backends.clarabel_linear_solver = pick
    try:
        seconds, iterations, fits, variables = 0.0, 0, [], 0
        for task in tasks:
            t0 = time.perf_counter()
            x, stats, _ = fit_passes(task, Layout.of(task), ("clarabel",))
            seconds += time.perf_counter() - t0
            iterations += stats["iterations"]
            variables = max(variables, stats.get("variables", 0))
            fits.append(x)
    finally:
        backends.clarabel_linear_solver = chosen
    if keep:
        Path(f"{path}.{level}.{method}").write_bytes(pickle.dumps(fits))
    return {"seconds": seconds, "iterations": iterations, "largest": variables,
            "children": max(t.k for t in tasks), "picks": picks}


def difference(path: str, level: str) -> float:
    """The largest difference between the qdldl and faer fits of ``level`` (persons)."""
    import numpy as np

    a, b = (pickle.loads(Path(f"{path}.{level}.{m}").read_bytes()) for m in ("qdldl", "faer"))
    return max((float(np.max(np.abs(x - y))) for x, y in zip(a, b)
                if x is not None and y is not None and x.size), default=0.0)


def time_problems(path: str, level: str) -> list[dict[str, Any]]:
    """Every least-squares pass of every captured node of ``level``, fitted with qdldl and with
    faer in turn (one thread, process CPU seconds of the Clarabel call): per problem, its
    node, children, variables (with auxiliaries and group sums), constraint entries, the two
    times and iterations, and what :func:`clarabel_linear_solver` picks."""
    import postproc.infra.solvers.backends as backends
    from postproc.methods.topdown.node import fit_passes
    from postproc.methods.topdown.rows import Layout

    tasks = pickle.loads(Path(path).read_bytes())[level]
    solve, chosen = backends.QP_BACKENDS["clarabel"], backends.clarabel_linear_solver
    method = {"now": "qdldl"}
    found: list[dict[str, Any]] = []

    def timed(qp):
        t0 = time.process_time()
        sol = solve(qp)
        found.append({"method": method["now"], "seconds": time.process_time() - t0,
                      "iterations": sol.iterations, "variables": qp.n,
                      "entries": int(qp.A.nnz), "pick": chosen(qp)})
        return sol

    backends.QP_BACKENDS["clarabel"] = timed
    backends.clarabel_linear_solver = lambda _qp: method["now"]
    try:
        fit_passes(tasks[0], Layout.of(tasks[0]), ("clarabel",))      # imports, caches
        found.clear()
        problems = []
        for i, task in enumerate(tasks):
            runs = {}
            for name in ("qdldl", "faer"):
                method["now"], start = name, len(found)
                fit_passes(task, Layout.of(task), ("clarabel",))
                runs[name] = found[start:]
            for a, b in zip(runs["qdldl"], runs["faer"]):
                problems.append({"node": i, "children": task.k, "variables": a["variables"],
                                 "entries": a["entries"], "pick": a["pick"],
                                 "qdldl": a["seconds"], "faer": b["seconds"],
                                 "iterations": [a["iterations"], b["iterations"]]})
    finally:
        backends.QP_BACKENDS["clarabel"], backends.clarabel_linear_solver = solve, chosen
    return problems


def per_problem(args, made: dict[str, Any], context: dict[str, Any]) -> int:
    """``--per-problem``: :func:`time_problems` per level, a table of the problems that took
    at least ``--min-seconds`` either way and the levels' sums."""
    rows, sums, results = [], [], {}
    for level in made["nodes"]:
        problems = run_python("bench_clarabel_kkt", "time_problems",
                              {"path": made["path"], "level": level})["result"]
        results[level] = problems
        rule = sum(p[p["pick"]] for p in problems)
        best = sum(min(p["qdldl"], p["faer"]) for p in problems)
        q, f = (sum(p[m] for p in problems) for m in ("qdldl", "faer"))
        sums.append([f"{PARENTS[level]} → {level}", made["nodes"][level], len(problems),
                     f"{q:.2f}", f"{f:.2f}", f"{rule:.2f}", f"{best:.2f}"])
        for p in sorted(problems, key=lambda p: p["variables"]):
            if max(p["qdldl"], p["faer"]) >= args.min_seconds:
                rows.append([f"{PARENTS[level]} → {level}", p["node"], p["children"],
                             f"{p['variables']:,}", f"{p['variables'] / p['children']:,.0f}",
                             f"{p['entries'] / p['variables']:.2f}", f"{p['qdldl']:.2f}",
                             f"{p['faer']:.2f}", f"{p['faer'] / p['qdldl']:.2f}", p["pick"]])
        print(f"{level} done", file=sys.stderr, flush=True)
    context = context_end(context)
    text = ["# Clarabel's KKT factorizations on TopDown's nodes, problem by problem", "",
            f"`python benchmarks/bench_clarabel_kkt.py --per-problem --persons {args.persons} "
            f"--levels {args.levels} --min-seconds {args.min_seconds}`", "",
            describe_context(context), "",
            f"{args.persons:,} synthetic persons ({made['blocks']:,} blocks). Every "
            "least-squares pass of the captured nodes fitted by Clarabel with qdldl and with faer "
            "in turn, once, one thread; process CPU seconds of the solver call. \"rule\": "
            "`clarabel_linear_solver`'s pick per problem; \"best\": the faster of the two per "
            "problem.", "",
            markdown_table(["node (parent → children)", "nodes", "problems", "qdldl s", "faer s",
                            "rule s", "best s"], sums), "",
            f"Problems that took at least {args.min_seconds} s either way (variables include "
            "the auxiliaries and group sums; entries: of the constraint matrix):", "",
            markdown_table(["node (parent → children)", "node", "children", "variables",
                            "per child", "entries per variable", "qdldl s", "faer s",
                            "faer/qdldl", "rule"], rows)]
    emit("\n".join(text) + "\n", {"persons": args.persons, "blocks": made["blocks"],
                                  "problems": results, "context": context},
         out=args.out, json_path=args.json_path)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = synthetic_parser(__doc__.splitlines()[0])
    parser.add_argument("--levels", default=",".join(LEVELS),
                        help="children's levels whose nodes to capture (comma-separated)")
    parser.add_argument("--per-problem", action="store_true",
                        help="time every least-squares pass with each factorization once and "
                             "list them (instead of the levels' sums over --repeats)")
    parser.add_argument("--min-seconds", type=float, default=0.3,
                        help="with --per-problem: list the problems that took this long")
    args = parser.parse_args(argv)
    workdir = workdir_of(args, "bench_clarabel_kkt_")
    context = context_start()
    made = captured(args.persons, workdir, args.levels.split(","))
    if args.per_problem:
        return per_problem(args, made, context)
    results: dict[str, dict[str, Any]] = {}
    rows = []
    for level in made["nodes"]:
        runs: dict[str, list[dict[str, Any]]] = {m: [] for m in METHODS}
        for repeat in range(args.repeats):
            for method in METHODS:
                r = run_python("bench_clarabel_kkt", "fit_all",
                               {"path": made["path"], "level": level, "method": method,
                                "keep": repeat == 0})
                runs[method].append(r["result"])
        sec = {m: statistics.median(r["seconds"] for r in runs[m]) for m in METHODS}
        diff = run_python("bench_clarabel_kkt", "difference",
                          {"path": made["path"], "level": level})["result"]
        first = runs["chosen"][0]
        results[level] = {"nodes": made["nodes"][level], "seconds": sec,
                          "iterations": {m: runs[m][0]["iterations"] for m in METHODS},
                          "max_fit_difference": diff, "picks": first["picks"],
                          "largest_variables": first["largest"],
                          "most_children": first["children"]}
        rows.append([f"{PARENTS[level]} → {level}", made["nodes"][level],
                     f"{first['children']:,}", f"{first['largest']:,}",
                     f"{sec['qdldl']:.2f}", f"{sec['faer']:.2f}",
                     f"{sec['faer'] / sec['qdldl']:.2f}",
                     f"{sec['chosen']:.2f}", f"{sec['chosen'] / sec['qdldl']:.2f}",
                     ", ".join(f"{k} {v}" for k, v in sorted(first["picks"].items())),
                     f"{diff:.1e}"])
        print(f"{level} done", file=sys.stderr, flush=True)
    context = context_end(context)
    text = ["# Clarabel's KKT factorizations on TopDown's nodes", "",
            f"`python benchmarks/bench_clarabel_kkt.py --persons {args.persons} "
            f"--repeats {args.repeats} --levels {args.levels}`", "", describe_context(context), "",
            f"{args.persons:,} synthetic persons ({made['blocks']:,} blocks). Seconds: the "
            f"median over {args.repeats} repeats of the fits (every least-squares pass) of the "
            "captured nodes summed, one thread, in fresh processes; ratios to qdldl in the same "
            "run. \"chosen\" is `clarabel_linear_solver`'s pick per problem (counted over the "
            "nodes' full fits). The last column is the largest difference between the qdldl "
            "and faer fits, in persons.", "",
            markdown_table(["node (parent → children)", "nodes", "most children",
                            "largest (variables)", "qdldl s", "faer s", "faer/qdldl",
                            "chosen s", "chosen/qdldl", "chosen picks", "max |Δx|"], rows)]
    emit("\n".join(text) + "\n", {"persons": args.persons, "blocks": made["blocks"],
                                  "levels": results, "context": context},
         out=args.out, json_path=args.json_path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
