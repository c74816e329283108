"""``gls`` in parts at national scale (:func:`postproc.apps.runs.parts_gls.gls_in_parts`): time
and memory from 1M persons to the 331M-person nation, 2 worker processes.

Run from the repository root::

    python benchmarks/gls_parts.py [--persons 1000000,10000000,33000000,331000000]
        [--part-blocks 20000] [--executor process] [--workdir DIR]
        [--out benchmarks/gls/parts.md] [--json benchmarks/gls/parts.json]
        [--figure benchmarks/gls/parts.png]
    python benchmarks/gls_parts.py --from-json benchmarks/gls/parts.json \
        --figure benchmarks/gls/parts.png           # redraw the figure only

For every size: the synthetic 2020-style data of ``bench_pl94_parts.py`` (seed 2020; kept in
``--workdir`` and reused), then the production configuration
(:func:`postproc.apps.runs.demo.demo_config`, ``pl94_2020``, simulation mode) run through
``gls_in_parts`` in a fresh interpreter whose process tree's resident memory is sampled every
0.2 s (the peak is the sum over the main process and its workers). Written: every level's
total, with intervals at the tract level and above. Reported: seconds per step (tabulating and
measuring the top; measuring the parts and solving them upward — the part of that spent
measuring and the part spent in the GLS, summed over the workers; the top; the downward pass;
the join), peak memory (of the whole run, and of each step), and the GLS's own seconds (the
run's wall time less tabulating and measuring, with the measuring share of the upward step
taken in proportion to its worker seconds). Nothing is asserted: the script measures and reports.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
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

MEASURE = "upward: measure (summed over workers)"
SOLVE = "upward: gls (summed over workers)"


def gls_run(directory: str, part_blocks: int, executor: str) -> dict[str, Any]:
    """``gls_in_parts`` on the data in ``directory`` into ``directory/gls``."""
    import shutil

    from postproc.apps.runs.demo import demo_config
    from postproc.apps.runs.parts_gls import gls_in_parts

    out = Path(directory) / "gls"
    if out.exists():
        shutil.rmtree(out)
    config = demo_config(directory, preset="pl94_2020", seed=2020, executor=executor)
    t = time.perf_counter()
    done = gls_in_parts(config, out, part_blocks=part_blocks,
                        log=lambda line: print(line, file=sys.stderr, flush=True))
    seconds = time.perf_counter() - t
    sizes = {p.name: p.stat().st_size for p in out.glob("*.parquet")}
    return {"seconds": seconds, "parts": done.parts, "persons": done.persons,
            "timings": done.timings, "bytes": sizes}


def gls_seconds(timings: dict[str, float]) -> float:
    """The run's wall seconds less tabulating and measuring (the measuring share of the upward
    step in proportion to the workers' seconds)."""
    measure, solve = timings.get(MEASURE, 0.0), timings.get(SOLVE, 0.0)
    share = measure / (measure + solve) if measure + solve else 0.0
    return timings["total"] - timings["tabulate and measure the top"] - share * timings["upward"]


def figure(results: list[dict[str, Any]], path: str) -> None:
    """Seconds (the whole run and the GLS's own) and peak memory against persons, log-log,
    with the targets for the nation."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    persons = [r["persons"] for r in results]
    fig, (ax_time, ax_mem) = plt.subplots(1, 2, figsize=(11, 4.2))
    ax_time.plot(persons, [r["gls"]["timings"]["total"] for r in results], "o-",
                 label="the run (tabulate, measure, GLS, write)")
    ax_time.plot(persons, [gls_seconds(r["gls"]["timings"]) for r in results], "s-",
                 label="the GLS itself (the run less tabulating and measuring)")
    lo = results[0]
    ax_time.plot(persons, [lo["gls"]["timings"]["total"] * n / lo["persons"] for n in persons],
                 ":", color="grey", label="linear from the smallest run")
    ax_time.axhline(900, color="red", lw=0.8, ls="--", label="target for 331M: 15 min")
    ax_mem.plot(persons, [r["process"]["tree_peak_rss_bytes"] / 2**30 for r in results], "o-",
                label="peak resident memory (process tree)")
    ax_mem.axhline(16, color="red", lw=0.8, ls="--", label="target for 331M: 16 GiB")
    for ax, label in ((ax_time, "seconds"), (ax_mem, "GiB")):
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("persons")
        ax.set_ylabel(label)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    ax_time.set_title("gls in parts, 2 workers: time")
    ax_mem.set_title("memory")
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def _step_name(line: str) -> str:
    """A short name for the log line that ends a step."""
    line = line.strip()
    return (line[:60] + "…") if len(line) > 61 else line


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--persons", type=count_list, default=[1_000_000, 10_000_000])
    parser.add_argument("--part-blocks", type=int, default=20_000)
    parser.add_argument("--executor", default="process")
    parser.add_argument("--workdir", default=None)
    parser.add_argument("--out", default=None)
    parser.add_argument("--json", dest="json_path", default=None)
    parser.add_argument("--figure", default=None, help="also draw the figure to this PNG")
    parser.add_argument("--from-json", default=None,
                        help="draw --figure from this earlier JSON output; run nothing")
    args = parser.parse_args(argv)
    if args.from_json:
        if not args.figure:
            parser.error("--from-json needs --figure")
        figure(json.loads(Path(args.from_json).read_text())["runs"], args.figure)
        return 0
    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="gls_parts_"))
    context = context_start()
    rows, results = [], []
    for n in args.persons:
        directory = workdir / f"p{n}"
        directory.mkdir(parents=True, exist_ok=True)
        made = run_python("bench_pl94_parts", "synthesize",
                          {"persons": n, "directory": str(directory)})["result"]
        run = run_python("gls_parts", "gls_run", {"directory": str(directory),
                                                  "part_blocks": args.part_blocks,
                                                  "executor": args.executor})
        r, proc = run["result"], run["process"]
        results.append({"persons": n, "blocks": made["blocks"], "gls": r, "process": proc})
        tm = r["timings"]
        rows.append([f"{n:,}", f"{made['blocks']:,}", f"{r['parts']:,}",
                     f"{tm['tabulate and measure the top']:.1f}",
                     f"{tm['upward']:.1f} ({tm.get(MEASURE, 0):.0f} / {tm.get(SOLVE, 0):.0f})",
                     f"{tm['top']:.1f}", f"{tm['downward']:.1f}", f"{tm['join']:.1f}",
                     f"{tm['total']:.1f}", f"{gls_seconds(tm):.1f}",
                     fmt_bytes(proc["tree_peak_rss_bytes"]),
                     fmt_bytes(sum(r["bytes"].values()))])
    context = context_end(context)
    steps = [f"- {r['persons']:,} persons: " + "; ".join(
        f"{_step_name(ph['ended_by'])} {fmt_bytes(ph['tree_peak_rss_bytes'])}"
        for ph in r["process"].get("phase_peaks", [])) for r in results]
    text = "\n".join([
        "# gls in parts at national scale", "",
        f"`python benchmarks/gls_parts.py --persons {','.join(str(n) for n in args.persons)} "
        f"--part-blocks {args.part_blocks} --executor {args.executor}`", "",
        describe_context(context), "",
        "Seconds per step of `gls_in_parts` (upward: measure the parts and solve them upward, "
        "with the workers' seconds spent measuring / in the GLS; top: the GLS nation → tract "
        "with what the parts give it, and its intervals; downward: the parts' downward pass "
        "and their files; GLS: the run less tabulating and measuring). Peak = the largest "
        "sampled sum of resident memory over the process and its workers.", "",
        markdown_table(["persons", "blocks", "parts", "tabulate + measure top s", "upward s",
                        "top s", "downward s", "join s", "total s", "GLS s", "peak",
                        "written"], rows), "",
        "Peak resident memory (process tree) of each step: the largest sample between the "
        "log line before it and the one that ends it.", "", *steps])
    emit(text, {"context": context, "runs": results}, out=args.out, json_path=args.json_path)
    if args.figure:
        figure(results, args.figure)
    return 0


if __name__ == "__main__":
    sys.exit(main())
