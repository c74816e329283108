"""The 2020-style run in parts (:func:`postproc.apps.runs.parts.run_in_parts`): time and memory
as the data grow, and the run of the whole at the sizes where it still fits.

Run from the repository root::

    python benchmarks/bench_pl94_parts.py [--persons 1000000,10000000] [--whole-up-to 1000000]
        [--part-blocks 20000] [--executor process] [--answers active,all] [--release]
        [--group-children N | level=N,...] [--workdir DIR]
        [--out benchmarks/pl94/parts.md] [--json benchmarks/pl94/parts.json]
        [--figure benchmarks/pl94/parts.png]
    python benchmarks/bench_pl94_parts.py --from-json benchmarks/pl94/parts.json \
        --figure benchmarks/pl94/parts.png      # redraw the figure only

For every size: synthetic data (:func:`hierarchy.synth.census2020.synthesize_2020`, seed 2020;
kept in ``--workdir`` and reused), then the production configuration
(:func:`postproc.apps.runs.demo.demo_config`, ``pl94_2020``) run in parts, in a fresh
interpreter whose process tree's resident memory is sampled every 0.2 s (the peak is the sum
over the main process and its workers). Up to ``--whole-up-to`` persons the same data are also
run whole, as ``postproc run`` does (tabulate every level, ``measure`` with streams keyed by
tract, ``topdown``), in another fresh interpreter, and the two runs' histograms are compared
level by level. ``--group-children N`` gives TopDown that option (parents of more than N
children solved in two stages, :mod:`postproc.methods.topdown.groups`); ``--group-children
county=64,tract=64`` only to the parents of those levels' units. The JSON output holds
the run's whole error table (mean |error| per level and query, raw and TopDown). Nothing is
asserted: the script measures and reports.
"""

from __future__ import annotations

import argparse
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


def group_sizes(text: str) -> int | dict[str, int]:
    """``--group-children``: ``64``, or ``county=64,tract=64`` (those levels only)."""
    if "=" not in text:
        return int(text)
    sizes = {}
    for item in text.split(","):
        level, _, size = item.partition("=")
        sizes[level.strip()] = int(size)
    return sizes


def group_sizes_text(sizes: int | dict[str, int]) -> str:
    """:func:`group_sizes` back to the command line's form."""
    if isinstance(sizes, dict):
        return ",".join(f"{level}={size}" for level, size in sizes.items())
    return str(sizes)


def synthesize(persons: int, directory: str) -> dict[str, Any]:
    """The synthetic data of ``persons`` in ``directory`` (reused when already there)."""
    import json

    from hierarchy.synth.census2020 import synthesize_2020

    manifest = Path(directory) / "data" / "manifest.json"
    if manifest.exists():
        made = json.loads(manifest.read_text())
        if made.get("arguments", {}).get("persons") == persons:
            return {**made, "reused": True}
    return synthesize_2020(persons, seed=2020, out=Path(directory) / "data", overwrite=True)


def release_config(directory: str, executor: str) -> Any:
    """The demo's configuration in release mode: the exact sampler, the secure source."""
    from postproc.apps.runs.config import load_config
    from postproc.apps.runs.demo import demo_config

    text = demo_config(directory, preset="pl94_2020", seed=2020, executor=executor).to_toml()
    text = text.replace("exact = false", "exact = true").replace(
        'mode = "simulation"\nseed = 2020', 'mode = "release"')
    path = Path(directory) / "release.toml"
    path.write_text(text)
    return load_config(path)


def parts_run(directory: str, part_blocks: int, executor: str, all_answers: bool = False,
              release: bool = False, group_children: int | dict[str, int] | None = None
              ) -> dict[str, Any]:
    """Run the configuration in parts into ``directory/parts`` (in release mode: no error
    table, and the noisy measurements saved under ``noisy/``)."""
    import shutil
    from dataclasses import replace

    from postproc.apps.runs.demo import demo_config
    from postproc.apps.runs.parts import run_in_parts

    out = Path(directory) / "parts"
    if out.exists():
        shutil.rmtree(out)
    config = (release_config(directory, executor) if release else
              demo_config(directory, preset="pl94_2020", seed=2020, executor=executor))
    if group_children:
        config = replace(config, method_options={**config.method_options,
                                                 "group_children": group_children})
    t = time.perf_counter()
    done = run_in_parts(config, out, part_blocks=part_blocks, all_answers=all_answers,
                        log=lambda line: print(line, file=sys.stderr, flush=True))
    seconds = time.perf_counter() - t
    totals, table = {}, {}
    if done.errors is not None:
        for row in done.errors.itertuples():
            table.setdefault(row.level, {})[row.query] = {"raw": float(row.measured_mean_abs),
                                                         "topdown": float(row.topdown_mean_abs)}
        errors = done.errors.set_index(["level", "query"])
        totals = {lv: {"raw": float(errors.loc[(lv, "total"), "measured_mean_abs"]),
                       "topdown": float(errors.loc[(lv, "total"), "topdown_mean_abs"])}
                  for lv in ("tract", "block_group") if (lv, "total") in errors.index}
    noisy = out / "noisy"
    stored = sum(p.stat().st_size for p in noisy.rglob("*") if p.is_file()) \
        if noisy.exists() else 0
    return {"seconds": seconds, "parts": done.parts, "persons": done.persons,
            "timings": done.timings, "total_mae": totals, "errors": table,
            "noisy_bytes": stored}


def whole_run(directory: str, executor: str, all_answers: bool = False,
              group_children: int | dict[str, int] | None = None) -> dict[str, Any]:
    """The same configuration run whole (the measurement a run in parts draws:
    :func:`postproc.apps.runs.parts.whole_measurement`), into ``directory/whole``."""
    import shutil

    from postproc.apps.runs.demo import demo_config
    from postproc.apps.runs.parts import whole_measurement
    from postproc.apps.runs.pipeline import load_truth, method_options
    from postproc.methods.topdown import topdown

    out = Path(directory) / "whole"
    if out.exists():
        shutil.rmtree(out)
    config = demo_config(directory, preset="pl94_2020", seed=2020, executor=executor)
    t = time.perf_counter()
    truth = load_truth(config)
    noisy = whole_measurement(config, truth, all_answers=all_answers)
    result = topdown(noisy, config.spec, **{**method_options(config, "topdown"),
                                            "group_children": group_children})
    seconds = time.perf_counter() - t
    result.write(out)
    return {"seconds": seconds, "levels": result.provenance["timings"]["levels"]}


def compare(directory: str) -> dict[str, bool]:
    """Whether the whole run's and the parts run's histograms are equal, level by level
    (:func:`same_histograms.same_level`)."""
    from same_histograms import same_level

    from hierarchy.presets.pl94 import LEVELS

    d = Path(directory)
    return {lv: same_level(d / "whole", d / "parts", lv) for lv in LEVELS}


def figure(results: list[dict[str, Any]], path: str) -> None:
    """Seconds per step and peak memory against persons (log-log), with the run of the whole
    where it was measured."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    mode = results[0].get("answers", "active")      # one curve: the first mode measured
    results = [r for r in results if r.get("answers", "active") == mode]
    persons = [r["persons"] for r in results]
    fig, (ax_time, ax_mem) = plt.subplots(1, 2, figsize=(11, 4.2))
    for step, marker in (("tabulate", "v"), ("top", "s"), ("parts", "D"), ("total", "o")):
        ax_time.plot(persons, [r["parts"]["timings"][step] for r in results], marker=marker,
                     label=f"in parts: {step}")
    whole = [(r["persons"], r["whole"]) for r in results if "whole" in r]
    if whole:
        ax_time.plot([n for n, _ in whole], [w["result"]["seconds"] for _, w in whole], "k*",
                     markersize=12, label="run of the whole")
        ax_mem.plot([n for n, _ in whole],
                    [w["process"]["tree_peak_rss_bytes"] / 2**30 for _, w in whole], "k*",
                    markersize=12, label="run of the whole")
    ax_mem.plot(persons, [r["process"]["tree_peak_rss_bytes"] / 2**30 for r in results], "o-",
                label="in parts")
    ax_mem.plot(persons, [1.9 * n / 1e6 for n in persons], ":", color="grey",
                label="the whole, extrapolated: 1.9 GiB per million persons\n"
                      "(one process, measured to 2M: bench_pl94.py)")
    ax_time.axhline(3600, color="red", lw=0.8, ls="--", label="target for 331M persons: 1 hour")
    ax_mem.axhline(20, color="red", lw=0.8, ls="--", label="target for 331M persons: 20 GiB")
    from matplotlib.ticker import ScalarFormatter

    for ax, title, unit in ((ax_time, "Seconds per step", "seconds"),
                            (ax_mem, "Peak memory (process and workers)", "GiB")):
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("persons")
        ax.set_ylabel(unit)
        ax.set_title(title)
        ax.grid(True, which="both", alpha=0.3)
        ax.yaxis.set_major_formatter(ScalarFormatter())
        ax.legend(fontsize=8, loc="lower right" if ax is ax_time else "upper left")
    ax_mem.yaxis.set_minor_formatter(ScalarFormatter())   # one decade: label the minor ticks
    fig.suptitle("The 2020-style TopDown run in parts (production configuration, 2 workers)")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--persons", type=count_list, default=[1_000_000, 10_000_000])
    parser.add_argument("--whole-up-to", type=int, default=1_000_000)
    parser.add_argument("--part-blocks", type=int, default=20_000)
    parser.add_argument("--executor", default="process")
    parser.add_argument("--release", action="store_true",
                        help="release mode (the exact sampler; the measurements saved); no "
                             "error table, and no run of the whole")
    parser.add_argument("--answers", default="active",
                        help="active, all or active,all: draw only the answers that count an "
                             "active cell (the default of a run in parts), every answer, or "
                             "both one after the other (each size)")
    parser.add_argument("--group-children", type=group_sizes, default=None,
                        help="TopDown's group_children option: N, or level=N,… for the levels "
                             "named only, e.g. county=64,tract=64 (default: every parent "
                             "whole)")
    parser.add_argument("--workdir", default=None)
    parser.add_argument("--out", default=None)
    parser.add_argument("--json", dest="json_path", default=None)
    parser.add_argument("--figure", default=None, help="also draw the figure to this PNG")
    parser.add_argument("--from-json", default=None,
                        help="draw --figure from this earlier JSON output; run nothing")
    args = parser.parse_args(argv)
    if args.from_json:
        import json

        if not args.figure:
            parser.error("--from-json needs --figure")
        figure(json.loads(Path(args.from_json).read_text())["runs"], args.figure)
        return 0
    modes = args.answers.split(",")
    if not modes or any(m not in ("active", "all") for m in modes):
        parser.error("--answers takes active, all, or both separated by a comma")
    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="bench_pl94_parts_"))
    context = context_start()
    rows, whole_rows, results = [], [], []
    for n in args.persons:
        directory = workdir / f"p{n}"
        directory.mkdir(parents=True, exist_ok=True)
        made = run_python("bench_pl94_parts", "synthesize",
                          {"persons": n, "directory": str(directory)})["result"]
        for answers in modes:
            everything = answers == "all"
            parts = run_python("bench_pl94_parts", "parts_run",
                               {"directory": str(directory), "part_blocks": args.part_blocks,
                                "executor": args.executor, "all_answers": everything,
                                "release": args.release,
                                "group_children": args.group_children})
            r, proc = parts["result"], parts["process"]
            entry = {"persons": n, "blocks": made["blocks"], "answers": answers, "parts": r,
                     "process": proc}
            tm = r["timings"]
            rows.append([f"{n:,}", f"{made['blocks']:,}",
                         answers + (" (release)" if args.release else ""), f"{r['parts']:,}",
                         f"{tm['tabulate']:.1f}", f"{tm['top']:.1f}", f"{tm['parts']:.1f}",
                         f"{tm['join']:.1f}", f"{r['seconds']:.1f}",
                         f"{n / r['seconds']:,.0f}", fmt_bytes(proc["tree_peak_rss_bytes"]),
                         " / ".join(f"{v['topdown']:.2f} ({v['raw']:.2f})"
                                    for v in r["total_mae"].values()) or "–",
                         fmt_bytes(r["noisy_bytes"]) if r["noisy_bytes"] else "–"])
            if n <= args.whole_up_to and not args.release:
                whole = run_python("bench_pl94_parts", "whole_run",
                                   {"directory": str(directory), "executor": args.executor,
                                    "all_answers": everything,
                                    "group_children": args.group_children})
                same = run_python("bench_pl94_parts", "compare",
                                  {"directory": str(directory)})["result"]
                entry["whole"] = {**whole, "identical": same}
                whole_rows.append([f"{n:,}", answers, f"{whole['result']['seconds']:.1f}",
                                   fmt_bytes(whole["process"]["tree_peak_rss_bytes"]),
                                   f"{r['seconds']:.1f}",
                                   fmt_bytes(proc["tree_peak_rss_bytes"]),
                                   f"{r['seconds'] / whole['result']['seconds']:.2f}",
                                   "yes" if all(same.values()) else
                                   "NO: " + ", ".join(k for k, v in same.items() if not v)])
            results.append(entry)
        print(f"{n:,} persons done", file=sys.stderr, flush=True)
    context = context_end(context)
    text = ["# The 2020-style run in parts", "",
            f"`python benchmarks/bench_pl94_parts.py --persons "
            f"{','.join(str(n) for n in args.persons)} --whole-up-to {args.whole_up_to} "
            f"--part-blocks {args.part_blocks} --executor {args.executor} "
            f"--answers {args.answers}{' --release' if args.release else ''}"
            + (f" --group-children {group_sizes_text(args.group_children)}"
               if args.group_children else "")
            + "`", "",
            describe_context(context), "",
            "Seconds per step of `run_in_parts` (tabulate = read and tabulate every part for "
            "the top; top = measure and TopDown nation → tract; parts = read, measure and "
            "TopDown block group → block, part by part; join = the parts' files into one per "
            "level). Peak = the largest sampled sum of resident memory over the process and "
            "its workers. Answers: `active` draws only the answers that count an active "
            "cell (the default), `all` every answer; `(release)`: release mode, the exact "
            "sampler, the measurements saved before they are solved (noisy/ stored: their "
            "size on disk). Mean |error| of the totals, TopDown (raw measurement; simulation "
            "mode only):", "",
            markdown_table(["persons", "blocks", "answers", "parts", "tabulate s", "top s",
                            "parts s", "join s", "total s", "persons/s", "peak",
                            "tract / block group", "noisy/ stored"],
                           rows)]
    if whole_rows:
        text += ["", "Against the run of the whole (every level dense, as `postproc run`), same "
                 "data and seed, measurement keyed by tract:", "",
                 markdown_table(["persons", "answers", "whole s", "whole peak", "parts s",
                                 "parts peak",
                                 "parts / whole", "histograms identical"], whole_rows)]
    emit("\n".join(text), {"context": context, "runs": results}, out=args.out,
         json_path=args.json_path)
    if args.figure:
        figure(results, args.figure)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
