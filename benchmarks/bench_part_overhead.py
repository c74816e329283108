"""One part of a run in parts, timed step by step: what a part costs besides its node problems.

Run from the repository root::

    python benchmarks/bench_part_overhead.py [--persons 10000000] [--part 3] [--repeats 3]
        [--baseline WORKTREE] [--workdir DIR] [--out benchmarks/pl94/part_overhead_....md]
        [--json ...]

The data are synthesized (``postproc synth2020``, seed 2020; reused from ``--workdir``). Each
repeat, in a fresh interpreter, reads the parts of the demo's ``pl94_2020`` configuration in
one pass (20,000 blocks per part), tabulates part ``--part`` as ``run_in_parts`` does, then
solves it as a worker does (``_SolvePart``: load its counts, exact answers, compile, measure,
TopDown below the tracts, write its files), with the split level's histograms taken from the
data (a part's problem is the same whatever its parents' histograms). The steps are timed by
wrapping the functions ``_SolvePart`` calls; "node problems" is the sum of the node statistics'
seconds, "overhead" the rest of the solve. With ``--baseline`` (a git worktree of another
commit: ``git worktree add /tmp/base <commit>``) that commit's code runs the same part in the
same repeats, alternating. Reported: medians. Nothing is asserted; see
``benchmarks/README.md`` on quiet machines.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
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
    short_commit,
    synthetic_parser,
    workdir_of,
)

#: The functions of a run in parts (postproc.apps.runs.parts and parts_tabulate, where each
#: is called from) and of TopDown's run module that are timed.
PART_STEPS = ("_tabulate_part", "_save_counts", "_load_counts", "_level_answers",
              "compile_spec", "_measure_part", "topdown", "level_table", "write_parquet")
#: (where, name) of the TopDown steps timed: building a level's node tasks, checking the level.
TOPDOWN_STEPS = (("plan", "RunPlan.tasks"), ("run", "verify_level"))


def part_steps(directory: str, part: int) -> dict[str, Any]:
    """Tabulate and solve part ``part`` of ``directory/data``; seconds per step."""
    import collections
    import functools
    import itertools
    import time

    import postproc.apps.runs.parts as P
    import postproc.apps.runs.parts_tabulate as T
    import postproc.methods.topdown.plan as Plan
    import postproc.methods.topdown.run as R
    from postproc.apps.runs.demo import demo_config

    seconds: dict[str, float] = collections.defaultdict(float)

    def timed(module, name, label):
        f = getattr(module, name)

        @functools.wraps(f)
        def wrapper(*args, **kwargs):
            t = time.perf_counter()
            try:
                return f(*args, **kwargs)
            finally:
                seconds[label] += time.perf_counter() - t
        setattr(module, name, wrapper)

    for name in PART_STEPS:         # the step's name in each module that calls it
        for module in (P, T):
            if hasattr(module, name):
                timed(module, name, name)
    for where, name in TOPDOWN_STEPS:
        owner = R if where == "run" else Plan.RunPlan
        timed(owner, name.rpartition(".")[2], f"topdown: {name}")
    config = demo_config(directory, preset="pl94_2020", seed=2020)
    geo, s = P._check(config, "tract", 20_000)
    plan = P.plan_parts(geo, s, 20_000)
    k, geography, persons, units = next(itertools.islice(
        P._parts_in_one_pass(config, geo, s, plan), part, None))
    with tempfile.TemporaryDirectory() as cache:
        publish = config.publish()
        t = time.perf_counter()
        _, tracts, *_ = P._TabulatePart(config, Path(cache), publish, geo.levels[s + 1:])(
            (k, geography, persons, units))
        tabulate = time.perf_counter() - t
        tabulate_steps = dict(seconds)
        seconds.clear()
        out = Path(cache) / "out"
        out.mkdir()
        solver = P._SolvePart(config, geo.levels, s, publish, {}, out, Path(cache))
        t = time.perf_counter()
        _, node_stats = solver(P._PartTask(k, geography, tracts))
        solve = time.perf_counter() - t
    return {"blocks": geography.n_units(-1), "persons": persons.num_rows,
            "tabulate": tabulate, "tabulate_steps": tabulate_steps, "solve": solve,
            "nodes": float(node_stats["seconds"].sum()), "solve_steps": dict(seconds)}


def _row(name: str, runs: list[dict[str, Any]]) -> dict[str, float]:
    med = {key: statistics.median(r[key] for r in runs) for key in ("tabulate", "solve", "nodes")}
    med["overhead"] = statistics.median(r["solve"] - r["nodes"] for r in runs)
    steps = sorted({step for r in runs for step in r["solve_steps"]})
    med.update({step: statistics.median(r["solve_steps"].get(step, 0.0) for r in runs)
                for step in steps})
    return med


def main(argv: list[str] | None = None) -> int:
    parser = synthetic_parser(__doc__.splitlines()[0])
    parser.add_argument("--part", type=int, default=3)
    parser.add_argument("--baseline", default=None,
                        help="a worktree of another commit, run on the same part too")
    args = parser.parse_args(argv)
    workdir = workdir_of(args, "bench_part_overhead_")
    run_python("bench_pl94_parts", "synthesize",
               {"persons": args.persons, "directory": str(workdir)})
    trees = {"this checkout": None}
    if args.baseline:
        commit = short_commit(args.baseline)
        trees[f"baseline {commit}"] = args.baseline
    context = context_start()
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in trees}
    for _ in range(args.repeats):
        for name, tree in trees.items():
            runs[name].append(run_python("bench_part_overhead", "part_steps",
                                         {"directory": str(workdir), "part": args.part},
                                         cwd=tree)["result"])
    context = context_end(context)
    med = {name: _row(name, r) for name, r in runs.items()}
    first = runs["this checkout"][0]
    keys = ["tabulate", "solve", "nodes", "overhead"] + sorted(
        {k for m in med.values() for k in m} - {"tabulate", "solve", "nodes", "overhead"})
    labels = {"tabulate": "tabulate the part", "solve": "solve the part (all)",
              "nodes": "  node problems (node statistics)", "overhead": "  everything else"}
    rows = [[labels.get(k, f"    {k}")] + [f"{med[name].get(k, 0.0):.2f}" for name in trees]
            for k in keys]
    text = ["# One part of a run in parts, step by step", "",
            f"`python benchmarks/bench_part_overhead.py --persons {args.persons} "
            f"--part {args.part} --repeats {args.repeats}"
            f"{' --baseline WORKTREE' if args.baseline else ''}`", "",
            describe_context(context), "",
            f"Part {args.part} of {args.persons:,} synthetic persons: {first['blocks']:,} "
            f"blocks, {first['persons']:,} persons. Seconds, medians of {args.repeats} "
            "repeats (each in a fresh interpreter, the trees alternating). The steps under "
            "\"everything else\" are the functions the solve calls, timed whole (TopDown's "
            "include its node problems: \"topdown\" minus \"node problems\" is TopDown's own "
            "overhead).", "",
            markdown_table(["step"] + list(trees), rows)]
    emit("\n".join(text) + "\n", {"persons": args.persons, "part": args.part, "runs": runs,
                                  "medians": med, "context": context},
         out=args.out, json_path=args.json_path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
