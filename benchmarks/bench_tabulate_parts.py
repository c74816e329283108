"""A run in parts' first step — read and tabulate every part — serially and on a process pool.

Run from the repository root::

    python benchmarks/bench_tabulate_parts.py [--persons 10000000] [--workers 2] [--repeats 3]
        [--baseline WORKTREE] [--workdir DIR] [--out benchmarks/pl94/parts_tabulate_....md]
        [--json ...]

The data are synthesized (``postproc synth2020``, seed 2020; reused from ``--workdir``). Each
repeat, in turn and each in a fresh interpreter, runs the step as ``run_in_parts`` does (one
pass over the files, 20,000 blocks per part): with the serial executor, and with a process pool
of ``--workers`` workers tabulating the parts as the main process reads them
(``Executor.map_window``), the pool's start-up included; with ``--baseline`` (a git worktree
of another commit: ``git worktree add /tmp/base <commit>``), that commit's code on the process
pool as well, in the same repeats. Reported: the median seconds, the ratios measured in the
same run, and whether every run gives the same digest of the parts' counts.
Nothing is asserted; see ``benchmarks/README.md`` on quiet machines.
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


def tabulate_step(directory: str, executor: str, workers: int) -> dict[str, Any]:
    """The first step of a run in parts on ``directory/data``: seconds, parts, persons, digest."""
    import time

    import postproc.apps.runs.parts as P
    from postproc.apps.runs.demo import demo_config
    from postproc.infra.executors import get_executor

    config = demo_config(directory, preset="pl94_2020", seed=2020, executor=executor)
    geo, s = P._check(config, "tract", 20_000)
    plan = P.plan_parts(geo, s, 20_000)
    with tempfile.TemporaryDirectory() as cache:
        t0 = time.perf_counter()
        with get_executor(executor, workers=workers) as ex:
            tabulate = P._TabulatePart(config, Path(cache), config.publish(),
                                       geo.levels[s + 1:])
            persons, *_, digest = P._tabulate_parts(
                ex, tabulate, P._parts_in_one_pass(config, geo, s, plan), len(plan), False)
        seconds = time.perf_counter() - t0
    return {"seconds": seconds, "parts": len(plan), "persons": persons, "digest": digest}


def main(argv: list[str] | None = None) -> int:
    parser = synthetic_parser(__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--baseline", default=None,
                        help="a worktree of another commit, run on the process pool too")
    args = parser.parse_args(argv)
    workdir = workdir_of(args, "bench_tabulate_parts_")
    run_python("bench_pl94_parts", "synthesize",
               {"persons": args.persons, "directory": str(workdir)})
    context = context_start()
    # name → (executor, worktree or None for this checkout)
    setups = {"serial": ("serial", None), "process": ("process", None)}
    if args.baseline:
        setups["baseline"] = ("process", args.baseline)
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in setups}
    for _ in range(args.repeats):
        for name, (executor, tree) in setups.items():
            runs[name].append(run_python(
                "bench_tabulate_parts", "tabulate_step",
                {"directory": str(workdir), "executor": executor,
                 "workers": args.workers}, cwd=tree)["result"])
    context = context_end(context)
    sec = {e: statistics.median(r["seconds"] for r in runs[e]) for e in runs}
    same = len({r["digest"] for rs in runs.values() for r in rs}) == 1
    first = runs["serial"][0]
    rows = [["serial", f"{sec['serial']:.1f}", "1.00",
             ", ".join(f"{r['seconds']:.1f}" for r in runs["serial"])],
            [f"process pool, {args.workers} workers", f"{sec['process']:.1f}",
             f"{sec['process'] / sec['serial']:.2f}",
             ", ".join(f"{r['seconds']:.1f}" for r in runs["process"])]]
    baseline = ""
    if args.baseline:
        commit = short_commit(args.baseline)
        baseline = (f" Baseline: commit {commit} on the same process pool; this run's pool "
                    f"takes {sec['process'] / sec['baseline']:.2f} × its time.")
        rows.append([f"process pool, {args.workers} workers, baseline {commit}",
                     f"{sec['baseline']:.1f}", f"{sec['baseline'] / sec['serial']:.2f}",
                     ", ".join(f"{r['seconds']:.1f}" for r in runs["baseline"])])
    text = ["# A run in parts: reading and tabulating the parts", "",
            f"`python benchmarks/bench_tabulate_parts.py --persons {args.persons} "
            f"--workers {args.workers} --repeats {args.repeats}"
            f"{' --baseline WORKTREE' if args.baseline else ''}`", "",
            describe_context(context), "",
            f"{first['persons']:,} synthetic persons in {first['parts']} parts of at most "
            "20,000 blocks, read in one pass by the main process. Seconds: the median over "
            "repeats (each in a fresh interpreter, the pool's start-up included); the ratio is "
            f"to the serial run in the same run. Same digest of the parts' counts in every "
            f"run: {'yes' if same else 'NO'}.{baseline}", "",
            markdown_table(["executor", "seconds", "ratio", "every repeat (s)"], rows)]
    emit("\n".join(text) + "\n", {"persons": args.persons, "workers": args.workers,
                                  "runs": runs, "seconds": sec, "same_digest": same,
                                  "context": context},
         out=args.out, json_path=args.json_path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
