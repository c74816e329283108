"""TopDown's node solver at two revisions, on the same captured 2020-style node problems.

Run from the repository root::

    python benchmarks/bench_node_revisions.py --base REV [--head HEAD] [--persons 10000000]
        [--levels tract,block_group,block] [--repeats 3] [--workdir DIR]
        [--out benchmarks/pl94/....md] [--json ...]

The node problems are captured as in ``bench_clarabel_kkt.py`` (synthetic data, seed 2020, run
in parts until the first part's block level; reused from ``--workdir`` when a capture of the
same size and levels is there). Each revision is checked out in a temporary ``git worktree``
and, ``--repeats`` times, the two in turn, a fresh interpreter in that worktree solves every
captured node with :func:`postproc.methods.topdown.node.solve_node` (fit, rounding,
verification; default solver chain). Reported per level: the median process CPU seconds, per
child, the head/base ratio measured in the same run, and how the outputs compare — nodes with
identical integer histograms, persons placed differently, the largest difference between the
fits and between the objectives. Nothing is asserted; see ``benchmarks/README.md`` on quiet
machines.
"""

from __future__ import annotations

import argparse
import pickle
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_clarabel_kkt import PARENTS, captured  # noqa: E402

from _common import (  # noqa: E402
    REPO_DIR,
    context_end,
    context_start,
    describe_context,
    emit,
    markdown_table,
    run_python,
)


def solve_all(nodes: str, level: str, keep: str | None = None) -> dict[str, Any]:
    """Solve every captured node of ``level`` with the ``postproc`` this interpreter imports;
    CPU seconds, children; with ``keep``, the histograms, fits and objectives pickled there."""
    import postproc
    from postproc.methods.topdown.node import solve_node

    tasks = pickle.loads(Path(nodes).read_bytes())[level]
    solve_node(tasks[0])                                    # imports, caches
    t0 = time.process_time()
    results = [solve_node(t, keep_continuous=keep is not None) for t in tasks]
    cpu = time.process_time() - t0
    if keep:
        Path(keep).write_bytes(pickle.dumps(
            [(r.histograms, r.continuous, r.stats["objective"]) for r in results]))
    return {"cpu": cpu, "nodes": len(tasks), "children": sum(t.k for t in tasks),
            "postproc": str(Path(postproc.__file__).resolve().parent.parent)}


def compare(base: str, head: str) -> dict[str, Any]:
    """How the two revisions' outputs of one level differ."""
    import numpy as np

    a, b = (pickle.loads(Path(p).read_bytes()) for p in (base, head))
    fits = [float(np.max(np.abs(x[1] - y[1]))) for x, y in zip(a, b)
            if x[1] is not None and y[1] is not None and x[1].size]
    objectives = [abs(x[2] - y[2]) / max(1.0, abs(x[2])) for x, y in zip(a, b)
                  if np.isfinite(x[2]) and np.isfinite(y[2])]
    return {"identical": sum(bool(np.array_equal(x[0], y[0])) for x, y in zip(a, b)),
            "nodes": len(a),
            "moved": sum(int(np.abs(x[0] - y[0]).sum()) // 2 for x, y in zip(a, b)),
            "persons": sum(int(x[0].sum()) for x in a),
            "max_fit_difference": max(fits, default=0.0),
            "max_objective_difference": max(objectives, default=0.0)}


def _in_worktree(tree: Path, nodes: Path, level: str, keep: Path | None) -> dict[str, Any]:
    """:func:`solve_all` in a fresh interpreter importing the toolkit from ``tree``."""
    result = run_python("bench_node_revisions", "solve_all",
                        {"nodes": str(nodes), "level": level,
                         "keep": str(keep) if keep else None}, cwd=tree)["result"]
    if Path(result["postproc"]) != tree.resolve():
        raise RuntimeError(f"{tree} imported postproc from {result['postproc']}")
    return result


def _revision(rev: str) -> str:
    return subprocess.run(["git", "rev-parse", "--short", rev], cwd=REPO_DIR, check=True,
                          capture_output=True, text=True).stdout.strip()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", required=True, help="the revision to compare against")
    parser.add_argument("--head", default="HEAD")
    parser.add_argument("--persons", type=int, default=10_000_000)
    parser.add_argument("--levels", default="tract,block_group,block")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--workdir", default=None)
    parser.add_argument("--out", default=None)
    parser.add_argument("--json", dest="json_path", default=None)
    args = parser.parse_args(argv)
    levels = args.levels.split(",")
    revisions = {"base": _revision(args.base), "head": _revision(args.head)}
    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="bench_node_revisions_"))
    workdir.mkdir(parents=True, exist_ok=True)
    context = context_start()
    made = captured(args.persons, workdir, levels)
    nodes = Path(made["path"])
    trees = {name: workdir / f"tree_{name}" for name in revisions}
    results: dict[str, Any] = {}
    rows = []
    try:
        for name, rev in revisions.items():
            subprocess.run(["git", "worktree", "add", "--detach", "--force", str(trees[name]),
                            rev], cwd=REPO_DIR, check=True, capture_output=True)
        for level in levels:
            cpu: dict[str, list[float]] = {name: [] for name in revisions}
            for repeat in range(args.repeats):
                for name in revisions:
                    keep = workdir / f"{level}.{name}.pkl" if repeat == 0 else None
                    r = _in_worktree(trees[name], nodes, level, keep)
                    cpu[name].append(r["cpu"])
            same = run_python("bench_node_revisions", "compare",
                              {"base": str(workdir / f"{level}.base.pkl"),
                               "head": str(workdir / f"{level}.head.pkl")})["result"]
            sec = {name: statistics.median(v) for name, v in cpu.items()}
            per_child = {name: 1000 * s / r["children"] for name, s in sec.items()}
            results[level] = {"nodes": r["nodes"], "children": r["children"], "cpu": cpu,
                              "median_cpu": sec, "ms_per_child": per_child, **same}
            rows.append([f"{PARENTS[level]} → {level}", r["nodes"], f"{r['children']:,}",
                         f"{sec['base']:.2f}", f"{sec['head']:.2f}",
                         f"{sec['head'] / sec['base']:.2f}",
                         f"{per_child['base']:.3f}", f"{per_child['head']:.3f}",
                         f"{same['identical']}/{same['nodes']}",
                         f"{same['moved']:,} of {same['persons']:,}",
                         f"{same['max_fit_difference']:.1e}",
                         f"{same['max_objective_difference']:.1e}"])
            print(f"{level} done", file=sys.stderr, flush=True)
    finally:
        for tree in trees.values():
            subprocess.run(["git", "worktree", "remove", "--force", str(tree)], cwd=REPO_DIR,
                           capture_output=True)
    context = context_end(context)
    text = ["# TopDown's node solver at two revisions, same node problems", "",
            f"`python benchmarks/bench_node_revisions.py --base {revisions['base']} --head "
            f"{revisions['head']} --persons {args.persons} --levels {args.levels} "
            f"--repeats {args.repeats}`", "", describe_context(context), "",
            f"{args.persons:,} synthetic persons ({made['blocks']:,} blocks). CPU: the median "
            f"over {args.repeats} repeats of the process CPU seconds to solve (fit, round, "
            "verify) every captured node of the level, the revisions in turn, each in a fresh "
            "interpreter; head/base in the same run. Outputs: nodes whose integer histograms "
            "are identical, persons placed in another cell or child (half the summed absolute "
            "differences), the largest difference between the fits (persons) and between "
            "the objectives (relative).", "",
            markdown_table(["node (parent → children)", "nodes", "children", "base CPU s",
                            "head CPU s", "head/base", "base ms/child", "head ms/child",
                            "identical", "persons moved", "max |Δfit|", "max Δobjective"],
                           rows)]
    emit("\n".join(text) + "\n", {"persons": args.persons, "blocks": made["blocks"],
                                  "revisions": revisions, "levels": results,
                                  "context": context},
         out=args.out, json_path=args.json_path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
