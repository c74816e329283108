"""BlueDown in parts beside TopDown in parts on the same data: time and memory, 2 workers.

Run from the repository root::

    python benchmarks/bluedown_parts.py [--persons 1000000,10000000] [--seeds 2020,2021,2022]
        [--methods topdown,bluedown] [--accuracy] [--part-blocks 20000] [--workdir DIR]
        [--out benchmarks/gls/bluedown_parts.md] [--json benchmarks/gls/bluedown_parts.json]

For every size: the synthetic 2020-style data of ``bench_pl94_parts.py`` (seed 2020; kept in
``--workdir`` and reused), then the production configuration
(:func:`postproc.apps.runs.demo.demo_config`, ``pl94_2020``, simulation mode) measured with each
of ``--seeds`` and run in parts by each method in turn — TopDown (:func:`~postproc.apps.runs.parts.
run_in_parts`, with its production fit passes) and BlueDown (``gls_in_parts(...,
method="bluedown")``, the same options less the fit passes) — the methods alternating (A B A
B …, so that a slow spell of the machine falls on both), each in a fresh interpreter whose
process tree's resident memory is sampled every 0.2 s. Reported: the median seconds of each
method and their ratio per seed (BlueDown / TopDown, the median of the ratios), the seconds
per step, the peak memory, the cells where the two methods' block-level histograms differ,
and with ``--accuracy`` the mean absolute error of every query at every level against the
truth (the mean over the seeds). Nothing is asserted: the script measures and reports.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import (  # noqa: E402
    context_end,
    context_start,
    count_list,
    describe_context,
    emit,
    fmt_bytes,
    markdown_table,
    run_python,
)

METHODS = ("topdown", "bluedown")


def method_run(directory: str, method: str, part_blocks: int, seed: int = 2020
               ) -> dict[str, Any]:
    """``method`` in parts on the data in ``directory``, measured with ``seed``, into
    ``directory/<method>``."""
    import shutil
    import time

    from postproc.apps.runs.demo import demo_config
    from postproc.apps.runs.parts import run_in_parts
    from postproc.apps.runs.parts_gls import gls_in_parts

    out = Path(directory) / method
    if out.exists():
        shutil.rmtree(out)
    config = demo_config(directory, preset="pl94_2020", seed=seed, executor="process")
    log = lambda line: print(line, file=sys.stderr, flush=True)  # noqa: E731
    t = time.perf_counter()
    if method == "topdown":
        done = run_in_parts(config, out, part_blocks=part_blocks, log=log)
    else:
        done = gls_in_parts(config, out, part_blocks=part_blocks, method=method, log=log)
    seconds = time.perf_counter() - t
    steps = {k: v for k, v in done.timings.items() if isinstance(v, (int, float))}
    return {"seconds": seconds, "parts": done.parts, "persons": done.persons, "steps": steps}


def accuracy(directory: str, methods: list[str]) -> dict[str, Any]:
    """Mean absolute error of every workload query at every level, per method (the runs in
    ``directory/<method>``), against the data's truth."""
    import numpy as np

    from postproc.apps.runs.demo import demo_config
    from postproc.apps.runs.inputs import load_truth
    from postproc.result import Result

    config = demo_config(directory, preset="pl94_2020", seed=0, executor="serial")
    truth = load_truth(config)
    out: dict[str, Any] = {}
    for method in methods:
        got = Result.read(Path(directory) / method)
        table: dict[str, dict[str, float]] = {}
        for li, level in enumerate(truth.geography.levels):
            exact, post = truth.counts[li], got.histograms[li]
            table[level] = {q.name: float(np.abs(np.asarray(q.answer(post), np.float64)
                                                 - q.answer(exact)).mean())
                            for q in config.workload}
        out[method] = table
    return out


def differing_cells(directory: str, level: str) -> dict[str, Any]:
    """Cells of ``level`` where the TopDown and BlueDown runs in ``directory`` differ, and the
    sum of their absolute differences."""
    import pandas as pd

    frames = []
    for method in METHODS:
        table = pd.read_parquet(Path(directory) / method / f"{level}.parquet")
        keys = [c for c in table.columns if c != "count"]
        frames.append(table.set_index(keys)["count"].rename(method))
    both = pd.concat(frames, axis=1).fillna(0)
    diff = (both["topdown"] - both["bluedown"]).abs()
    return {"cells": int((diff > 0).sum()), "abs": int(diff.sum())}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--persons", type=count_list, default=[1_000_000, 10_000_000])
    parser.add_argument("--seeds", default="2020,2021,2022",
                        help="measurement seeds, one paired repeat each (default 2020,2021,2022)")
    parser.add_argument("--methods", default=",".join(METHODS))
    parser.add_argument("--accuracy", action="store_true",
                        help="also the mean absolute error of every query at every level "
                             "against the truth (holds the whole truth in memory)")
    parser.add_argument("--part-blocks", type=int, default=20_000)
    parser.add_argument("--workdir", default=None)
    parser.add_argument("--out", default=None)
    parser.add_argument("--json", dest="json_path", default=None)
    args = parser.parse_args(argv)
    methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    seeds = [int(x) for x in args.seeds.split(",") if x.strip()]
    unknown = sorted(set(methods) - set(METHODS))
    if unknown:
        parser.error(f"--methods: unknown {unknown}; choose from {list(METHODS)}")
    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="bluedown_parts_"))
    context = context_start()
    rows, step_lines, results, accuracy_lines = [], [], [], []
    for n in args.persons:
        directory = workdir / f"p{n}"
        directory.mkdir(parents=True, exist_ok=True)
        made = run_python("bench_pl94_parts", "synthesize",
                          {"persons": n, "directory": str(directory)})["result"]
        runs: dict[str, list[dict[str, Any]]] = {m: [] for m in methods}
        entry: dict[str, Any] = {"persons": n, "blocks": made["blocks"], "seeds": seeds,
                                 "runs": runs, "accuracy": [], "block_differences": []}
        for seed in seeds:
            for m in methods:
                run = run_python("bluedown_parts", "method_run",
                                 {"directory": str(directory), "method": m, "seed": seed,
                                  "part_blocks": args.part_blocks})
                runs[m].append({**run["result"], "process": run["process"]})
            if args.accuracy:
                entry["accuracy"].append(run_python(
                    "bluedown_parts", "accuracy",
                    {"directory": str(directory), "methods": methods})["result"])
            if set(methods) == set(METHODS):
                entry["block_differences"].append(differing_cells(str(directory), "block"))
        if set(methods) == set(METHODS):
            entry["ratios"] = [b["seconds"] / t["seconds"]
                               for t, b in zip(runs["topdown"], runs["bluedown"])]
        results.append(entry)
        rows += _time_rows(entry, made, methods)
        step_lines += _step_lines(entry, methods)
        accuracy_lines += _accuracy_lines(entry, methods)
    context = context_end(context)
    text = "\n".join([
        "# BlueDown in parts beside TopDown in parts", "",
        f"`python benchmarks/bluedown_parts.py --persons "
        f"{','.join(str(n) for n in args.persons)} --seeds {args.seeds} --methods "
        f"{','.join(methods)} --part-blocks {args.part_blocks}"
        + (" --accuracy" if args.accuracy else "") + "`", "",
        describe_context(context), "",
        "Seconds of the whole run (tabulate, measure, solve, write), the median over the "
        "seeds and each seed's; the ratio BlueDown / TopDown is the median of the ratios of "
        "the paired runs. Peak = the largest sampled sum of resident memory over the "
        "process and its workers.", "",
        markdown_table(["persons", "blocks", "method", "parts", "median s", "each seed s",
                        "BlueDown / TopDown", "peak"], rows), "",
        "Steps of the last seed's run (seconds) and the peak memory of each step (the largest "
        "sample between the log line before it and the one that ends it):", "", *step_lines,
        "", *(f"- {r['persons']:,} persons: the block-level histograms differ in "
              + ", ".join(f"{d['cells']:,}" for d in r["block_differences"])
              + " cells (per seed)" for r in results if r["block_differences"]),
        *accuracy_lines])
    emit(text, {"context": context, "runs": results}, out=args.out, json_path=args.json_path)
    return 0


def _time_rows(entry: dict[str, Any], made: dict[str, Any], methods: list[str]) -> list[list[str]]:
    rows = []
    for m in methods:
        runs = entry["runs"][m]
        seconds = [r["seconds"] for r in runs]
        peak = max(r["process"]["tree_peak_rss_bytes"] or 0 for r in runs)
        ratio = (f"{statistics.median(entry['ratios']):.2f}"
                 if "ratios" in entry and m == "bluedown" else "")
        rows.append([f"{entry['persons']:,}", f"{made['blocks']:,}", m, f"{runs[0]['parts']:,}",
                     f"{statistics.median(seconds):.1f}", " / ".join(f"{x:.0f}" for x in seconds),
                     ratio, fmt_bytes(peak)])
    return rows


def _step_lines(entry: dict[str, Any], methods: list[str]) -> list[str]:
    out = []
    for m in methods:
        last = entry["runs"][m][-1]
        out.append(f"- {entry['persons']:,} persons, {m}: " + "; ".join(
            f"{k} {v:.1f} s" for k, v in last["steps"].items() if k != "total")
            + "; peaks: " + "; ".join(
            f"{ph['ended_by'][:50]} {fmt_bytes(ph['tree_peak_rss_bytes'])}"
            for ph in last["process"].get("phase_peaks", [])))
    return out


def _accuracy_lines(entry: dict[str, Any], methods: list[str]) -> list[str]:
    """Mean absolute error per level and query, the mean over the seeds, per method, and the
    ratio BlueDown / TopDown."""
    if not entry["accuracy"]:
        return []
    first = entry["accuracy"][0][methods[0]]
    rows = []
    for level, queries in first.items():
        for q in queries:
            means = {m: statistics.fmean(a[m][level][q] for a in entry["accuracy"])
                     for m in methods}
            ratio = (f"{means['bluedown'] / means['topdown']:.2f}"
                     if set(methods) == set(METHODS) and means["topdown"] > 0 else "")
            rows.append([level, q, *(f"{means[m]:.3f}" for m in methods), ratio])
    return ["", f"Mean absolute error against the truth, {entry['persons']:,} persons, the mean "
            f"over {len(entry['accuracy'])} measurement seed(s):", "",
            markdown_table(["level", "query", *methods, "BlueDown / TopDown"], rows)]


if __name__ == "__main__":
    sys.exit(main())
