"""Short auxiliaries substituted or kept, node by node, on the same captured 2020-style nodes.

Run from the repository root::

    python benchmarks/bench_substitution.py [--persons 10000000]
        [--levels tract,block_group,block] [--repeats 7] [--largest-children N]
        [--workdir DIR] [--out benchmarks/pl94/....md] [--json ...]

The node problems are captured as in ``bench_clarabel_kkt.py`` (synthetic data, seed 2020;
reused from ``--workdir`` when a capture of the same size and levels is there). One
interpreter solves every captured node with :func:`postproc.methods.topdown.node.solve_node`
``--repeats`` times with :data:`~postproc.methods.topdown.node.SUBSTITUTE_ENTRIES` at its
default and at 0 (no substitution), the two in turn node by node, the first alternating — a
paired comparison on the same node moments apart, so the machine's drift between runs
(5–13 % here) cancels. Reported per level and per band of the node's size (variables of the
plain fit): the sums over nodes of the median process CPU seconds, and their ratio, and
whether the integer histograms are the same. ``--largest-children N`` leaves out nodes of more
than N children (the largest county → tract nodes take seconds each). Nothing is asserted.
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

from bench_clarabel_kkt import PARENTS, captured  # noqa: E402

from _common import context_end, context_start, describe_context, emit, markdown_table  # noqa: E402

BANDS = ((0, 100), (100, 200), (200, 400), (400, 800), (800, 1600), (1600, None))


def paired(nodes: str, level: str, repeats: int, largest: int | None) -> list[dict[str, Any]]:
    """Per node: children, variables, median CPU seconds with and without substitution,
    whether the histograms agree."""
    import numpy as np

    import postproc.methods.topdown.node as node
    from postproc.methods.topdown.fit import Fit

    default = node.SUBSTITUTE_ENTRIES
    tasks = [t for t in pickle.loads(Path(nodes).read_bytes())[level]
             if largest is None or t.k <= largest]
    node.solve_node(tasks[0])                               # imports, caches
    out = []
    try:
        for task in tasks:
            cpu: dict[int, list[float]] = {default: [], 0: []}
            hist: dict[int, Any] = {}
            for r in range(repeats):
                for entries in ((default, 0) if r % 2 == 0 else (0, default)):
                    node.SUBSTITUTE_ENTRIES = entries
                    t0 = time.process_time()
                    result = node.solve_node(task)
                    cpu[entries].append(time.process_time() - t0)
                    hist[entries] = result.histograms
            out.append({"children": task.k,
                        "variables": Fit.build(task).variables,
                        "plain": statistics.median(cpu[0]),
                        "substituted": statistics.median(cpu[default]),
                        "same": bool(np.array_equal(hist[0], hist[default]))})
    finally:
        node.SUBSTITUTE_ENTRIES = default
    return out


def _row(label: str, nodes: list[dict[str, Any]]) -> list[Any]:
    plain = sum(n["plain"] for n in nodes)
    sub = sum(n["substituted"] for n in nodes)
    return [label, len(nodes), f"{plain:.3f}", f"{sub:.3f}", f"{sub / plain:.3f}",
            f"{sum(n['same'] for n in nodes)}/{len(nodes)}"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--persons", type=int, default=10_000_000)
    parser.add_argument("--levels", default="tract,block_group,block")
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--largest-children", type=int, default=None)
    parser.add_argument("--workdir", default=None)
    parser.add_argument("--out", default=None)
    parser.add_argument("--json", dest="json_path", default=None)
    args = parser.parse_args(argv)
    levels = args.levels.split(",")
    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="bench_substitution_"))
    workdir.mkdir(parents=True, exist_ok=True)
    context = context_start()
    made = captured(args.persons, workdir, levels)
    results, rows = {}, []
    for level in levels:
        nodes = paired(made["path"], level, args.repeats, args.largest_children)
        results[level] = nodes
        rows.append(_row(f"**{PARENTS[level]} → {level}**", nodes))
        for lo, hi in BANDS:
            band = [n for n in nodes if n["variables"] >= lo and (hi is None or
                                                                  n["variables"] < hi)]
            if band:
                rows.append(_row(f"{lo:,}–{hi - 1:,} variables" if hi else f"≥ {lo:,} variables",
                                 band))
        print(f"{level} done", file=sys.stderr, flush=True)
    context = context_end(context)
    text = ["# Short auxiliaries substituted or kept, on the same nodes", "",
            f"`python benchmarks/bench_substitution.py --persons {args.persons} --levels "
            f"{args.levels} --repeats {args.repeats}"
            + (f" --largest-children {args.largest_children}" if args.largest_children else "")
            + "`", "", describe_context(context), "",
            f"{args.persons:,} synthetic persons ({made['blocks']:,} blocks); the captured "
            + (f"nodes of at most {args.largest_children} children" if args.largest_children
               else "nodes")
            + f". CPU: per node the median over "
            f"{args.repeats} solves (fit, rounding, verification) of the process CPU seconds, "
            "substituted and plain in turn in one interpreter, summed over the nodes of the "
            "level or band (the plain fit's variables); same: nodes whose integer histograms "
            "agree.", "",
            markdown_table(["nodes", "count", "plain CPU s", "substituted CPU s", "ratio",
                            "same"], rows)]
    emit("\n".join(text) + "\n", {"persons": args.persons, "blocks": made["blocks"],
                                  "levels": results, "context": context},
         out=args.out, json_path=args.json_path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
