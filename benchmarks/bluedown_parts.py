"""BlueDown in parts beside TopDown in parts on the same data: time and memory, 2 workers.

Run from the repository root::

    python benchmarks/bluedown_parts.py [--persons 1000000,10000000] [--repeats 3]
        [--methods topdown,bluedown] [--part-blocks 20000] [--workdir DIR]
        [--out benchmarks/gls/bluedown_parts.md] [--json benchmarks/gls/bluedown_parts.json]

For every size: the synthetic 2020-style data of ``bench_pl94_parts.py`` (seed 2020; kept in
``--workdir`` and reused), then the production configuration
(:func:`postproc.apps.runs.demo.demo_config`, ``pl94_2020``, simulation mode, measurement seed
2020) run in parts by each method in turn — TopDown (:func:`~postproc.apps.runs.parts.
run_in_parts`, with its production fit passes) and BlueDown (``gls_in_parts(...,
method="bluedown")``, the same options less the fit passes) — ``--repeats`` times, the methods
alternating (A B A B …, so that a slow spell of the machine falls on both), each in a fresh
interpreter whose process tree's resident memory is sampled every 0.2 s. Reported: the
median seconds of each method and their ratio per repeat (BlueDown / TopDown, the median of
the ratios), the seconds per step, the peak memory, and the cells where the two methods'
block-level histograms differ. Nothing is asserted: the script measures and reports.
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


def method_run(directory: str, method: str, part_blocks: int) -> dict[str, Any]:
    """``method`` in parts on the data in ``directory`` into ``directory/<method>``."""
    import shutil
    import time

    from postproc.apps.runs.demo import demo_config
    from postproc.apps.runs.parts import run_in_parts
    from postproc.apps.runs.parts_gls import gls_in_parts

    out = Path(directory) / method
    if out.exists():
        shutil.rmtree(out)
    config = demo_config(directory, preset="pl94_2020", seed=2020, executor="process")
    log = lambda line: print(line, file=sys.stderr, flush=True)  # noqa: E731
    t = time.perf_counter()
    if method == "topdown":
        done = run_in_parts(config, out, part_blocks=part_blocks, log=log)
        parts, persons = done.parts, done.persons
    else:
        done = gls_in_parts(config, out, part_blocks=part_blocks, method=method, log=log)
        parts, persons = done.parts, done.persons
    seconds = time.perf_counter() - t
    steps = {k: v for k, v in done.timings.items() if isinstance(v, (int, float))}
    return {"seconds": seconds, "parts": parts, "persons": persons, "steps": steps}


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
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--methods", default=",".join(METHODS))
    parser.add_argument("--part-blocks", type=int, default=20_000)
    parser.add_argument("--workdir", default=None)
    parser.add_argument("--out", default=None)
    parser.add_argument("--json", dest="json_path", default=None)
    args = parser.parse_args(argv)
    methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    unknown = sorted(set(methods) - set(METHODS))
    if unknown:
        parser.error(f"--methods: unknown {unknown}; choose from {list(METHODS)}")
    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="bluedown_parts_"))
    context = context_start()
    rows, step_lines, results = [], [], []
    for n in args.persons:
        directory = workdir / f"p{n}"
        directory.mkdir(parents=True, exist_ok=True)
        made = run_python("bench_pl94_parts", "synthesize",
                          {"persons": n, "directory": str(directory)})["result"]
        runs: dict[str, list[dict[str, Any]]] = {m: [] for m in methods}
        for _ in range(args.repeats):
            for m in methods:
                run = run_python("bluedown_parts", "method_run",
                                 {"directory": str(directory), "method": m,
                                  "part_blocks": args.part_blocks})
                runs[m].append({**run["result"], "process": run["process"]})
        entry: dict[str, Any] = {"persons": n, "blocks": made["blocks"], "runs": runs}
        if set(methods) == set(METHODS):
            entry["ratios"] = [b["seconds"] / t["seconds"]
                               for t, b in zip(runs["topdown"], runs["bluedown"])]
            entry["block_differences"] = differing_cells(str(directory), "block")
        results.append(entry)
        for m in methods:
            seconds = [r["seconds"] for r in runs[m]]
            peak = max(r["process"]["tree_peak_rss_bytes"] or 0 for r in runs[m])
            ratio = (f"{statistics.median(entry['ratios']):.2f}"
                     if "ratios" in entry and m == "bluedown" else "")
            rows.append([f"{n:,}", f"{made['blocks']:,}", m, f"{runs[m][0]['parts']:,}",
                         f"{statistics.median(seconds):.1f}",
                         " / ".join(f"{s:.0f}" for s in seconds), ratio, fmt_bytes(peak)])
            last = runs[m][-1]
            step_lines.append(
                f"- {n:,} persons, {m}: " + "; ".join(
                    f"{k} {v:.1f} s" for k, v in last["steps"].items() if k != "total")
                + "; peaks: " + "; ".join(
                    f"{ph['ended_by'][:50]} {fmt_bytes(ph['tree_peak_rss_bytes'])}"
                    for ph in last["process"].get("phase_peaks", [])))
    context = context_end(context)
    text = "\n".join([
        "# BlueDown in parts beside TopDown in parts", "",
        f"`python benchmarks/bluedown_parts.py --persons "
        f"{','.join(str(n) for n in args.persons)} --repeats {args.repeats} --methods "
        f"{','.join(methods)} --part-blocks {args.part_blocks}`", "",
        describe_context(context), "",
        "Seconds of the whole run (tabulate, measure, solve, write), the median over the "
        "repeats and each repeat; the ratio BlueDown / TopDown is the median of the ratios of "
        "the paired repeats. Peak = the largest sampled sum of resident memory over the "
        "process and its workers.", "",
        markdown_table(["persons", "blocks", "method", "parts", "median s", "repeats s",
                        "BlueDown / TopDown", "peak"], rows), "",
        "Steps of the last repeat (seconds) and the peak memory of each step (the largest "
        "sample between the log line before it and the one that ends it):", "", *step_lines,
        "", *(f"- {r['persons']:,} persons: the block-level histograms differ in "
              f"{r['block_differences']['cells']:,} cells (sum of absolute differences "
              f"{r['block_differences']['abs']:,})" for r in results
              if "block_differences" in r)])
    emit(text, {"context": context, "runs": results}, out=args.out, json_path=args.json_path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
