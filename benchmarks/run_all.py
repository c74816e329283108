"""Every performance figure of the product in one markdown report (issue 7).

Run ``python benchmarks/run_all.py [--out FILE]`` on a quiet machine for the real figures, or
``python benchmarks/run_all.py --quick`` (everything at ≤ 2M persons, a few minutes) to check
that it works. ``--help`` lists the options (sizes, executor, sections to skip).

Sections, each in its own child process(es) so that none inherits another's memory:

1. **Tabulation vs the bincount floor** — :func:`foundation.run_tabulation` at
   ``--tab-persons`` (default 132.2M): ``tabulate`` time over one ``np.bincount`` of the
   precomputed key of the same records, and its peak memory over the input columns.
2. **Generic CVXPY path vs engine** — :func:`topdown_engine.run` at ``--engine-persons``
   (default 1M, every parent problem): summed fit times of both paths, ratio, objective check.
3. **Executors** — :func:`bench_executors.run` at ``--exec-persons`` (default 10M): TopDown with
   serial, process pool and Dask (2 workers each), median of ``--exec-repeats`` runs.
4. **Scaling curve** — :func:`full_run.run` (the whole ``postproc run``) at each of ``--sizes``
   (default 1M, 10M, 30M, 132.2M) with ``--executor``: wall time and phases vs persons, the slope
   of ``log time`` on ``log persons`` (1 = linear), and a figure (``--figure``, default
   ``benchmarks/scaling.png``).
5. **Fit and rounding per level, and peak memory** — from the largest run of section 4.

The first table summarizes the headline figures against the issues' targets; nothing asserts
them. Medians of repeats throughout; every ratio is against a baseline measured in the same run.
The load average is recorded before and after each section: on a busy machine the timings are
upper bounds.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import foundation  # noqa: E402
import full_run  # noqa: E402
import topdown_engine  # noqa: E402

import _common as common  # noqa: E402

SECTIONS = ("tabulation", "engine", "executors", "scaling")
DEFAULT_FIGURE = common.BENCH_DIR / "scaling.png"
QUICK_FIGURE = common.BENCH_DIR / "scaling-quick.png"  # never overwrites the real figure
FULL = {"tab_persons": 132_200_000, "engine_persons": 1_000_000, "engine_max_parents": None,
        "engine_repeats": 3, "exec_persons": 10_000_000, "exec_repeats": 3,
        "sizes": [1_000_000, 10_000_000, 30_000_000, 132_200_000], "tab_repeats": 3}
QUICK = {"tab_persons": 1_000_000, "engine_persons": 1_000_000, "engine_max_parents": 8,
         "engine_repeats": 1, "exec_persons": 200_000, "exec_repeats": 1,
         "sizes": [250_000, 500_000, 1_000_000, 2_000_000], "tab_repeats": 3}


def _section(name: str, function, log) -> dict[str, Any]:
    log(f"[run_all] section {name} ...")
    before = common.load_average()
    out = function()
    return {"result": out, "load_before": before, "load_after": common.load_average()}


def run(*, quick: bool = False, tab_persons: int | None = None,
        engine_persons: int | None = None, engine_max_parents: int | None = None,
        engine_repeats: int | None = None, exec_persons: int | None = None,
        exec_repeats: int | None = None, sizes: list[int] | None = None,
        executor: str = "serial", workers: int | None = None, repeats: int = 1,
        sections: tuple[str, ...] = SECTIONS, workdir: str | None = None,
        keep: bool = False, figure: str | Path | None = "default",
        log=lambda msg: print(msg, file=sys.stderr)) -> dict[str, Any]:
    """Run the selected sections and return every figure (see the module docstring).

    Options left as None take the full-scale defaults, or the ``quick`` ones. ``figure``:
    a PNG path, None for no figure, or ``"default"``: ``benchmarks/scaling.png``
    (``benchmarks/scaling-quick.png`` when ``quick``).
    """
    if figure == "default":
        figure = QUICK_FIGURE if quick else DEFAULT_FIGURE
    preset = dict(QUICK if quick else FULL)
    given = {"tab_persons": tab_persons, "engine_persons": engine_persons,
             "engine_repeats": engine_repeats, "exec_persons": exec_persons,
             "exec_repeats": exec_repeats, "sizes": sizes}
    preset.update({k: v for k, v in given.items() if v is not None})
    if engine_max_parents is not None:
        preset["engine_max_parents"] = engine_max_parents
    context = common.context_start()
    temporary = workdir is None
    base = Path(tempfile.mkdtemp(prefix="dapp-run-all-") if temporary else workdir)
    base.mkdir(parents=True, exist_ok=True)
    out: dict[str, Any] = {"quick": quick, "settings": {**preset, "executor": executor,
                                                        "workers": workers,
                                                        "repeats": repeats}}
    try:
        if "tabulation" in sections:
            out["tabulation"] = _section("tabulation", lambda: foundation.run_tabulation(
                preset["tab_persons"], repeats=preset["tab_repeats"], workdir=str(base)), log)
        if "engine" in sections:
            out["engine"] = _section("engine", lambda: common.run_python(
                "topdown_engine", "run",
                {"persons": preset["engine_persons"], "repeats": preset["engine_repeats"],
                 "max_parents": preset["engine_max_parents"]})["result"], log)
        if "executors" in sections:
            out["executors"] = _section("executors", lambda: common.run_python(
                "bench_executors", "run",
                {"persons": preset["exec_persons"], "repeats": preset["exec_repeats"],
                 "workers": 2})["result"], log)
        if "scaling" in sections:
            runs = []
            for size in sorted(preset["sizes"]):
                runs.append(_section(f"scaling {size:,}", lambda size=size: full_run.run(
                    size, executor=executor, workers=workers, repeats=repeats,
                    workdir=str(base), keep=keep), log))
            out["scaling"] = {"runs": runs, "fit": scaling_fit(
                [r["result"] for r in runs])}
            if figure:
                out["scaling"]["figure"] = str(plot_scaling(out["scaling"], figure,
                                                            quick=quick))
    finally:
        if temporary and not keep:
            shutil.rmtree(base, ignore_errors=True)
    out["context"] = common.context_end(context)
    return out


# -- scaling -----------------------------------------------------------------------------------

def _pipeline_seconds(r: dict[str, Any]) -> float:
    return sum(r["median"]["phases"][k] for k in full_run.PHASES)


SERIES = {  # name → figure of one full_run result
    "total wall": lambda r: r["median"]["wall_seconds"],
    "pipeline (phases)": _pipeline_seconds,
    "read + tabulate": lambda r: r["median"]["phases"]["read_tabulate"],
    "TopDown": lambda r: r["median"]["phases"]["topdown"],
}


def _slope(x: list[float], y: list[float]) -> float:
    import numpy as np

    pts = [(a, b) for a, b in zip(x, y) if a > 0 and b > 0]
    if len(pts) < 2:
        return float("nan")
    lx, ly = np.log([p[0] for p in pts]), np.log([p[1] for p in pts])
    return float(np.polyfit(lx, ly, 1)[0])


def scaling_fit(results: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """Least-squares slope of log(seconds) on log(persons) per series, over all sizes and over
    the two largest (1 = linear growth)."""
    persons = [r["persons"] for r in results]
    out = {}
    for name, get in SERIES.items():
        y = [get(r) for r in results]
        out[name] = {"slope": _slope(persons, y), "top_slope": _slope(persons[-2:], y[-2:])}
    return out


def plot_scaling(scaling: dict[str, Any], path: str | Path, *, quick: bool = False) -> Path:
    """Log-log figure of time vs persons with a slope-1 reference line."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    results = [r["result"] for r in scaling["runs"]]
    persons = [r["persons"] for r in results]
    fig, ax = plt.subplots(figsize=(10, 4.8))
    for (name, get), marker in zip(SERIES.items(), "osD^"):
        y = [get(r) for r in results]
        slope = scaling["fit"][name]["slope"]
        ax.plot(persons, y, marker=marker, label=f"{name} (slope {slope:.2f})")
    top = SERIES["total wall"](results[-1])
    ref = [top * p / persons[-1] for p in persons]
    ax.plot(persons, ref, "k:", linewidth=1, label="linear (slope 1) through the largest run")
    if persons[-1] >= 100_000_000:  # the target is for the full 132M run
        ax.axhline(full_run.ISSUE7_SECONDS, color="grey", linestyle="--", linewidth=0.8,
                   label="5 min (issue 7 target for the full run)")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("persons")
    ax.set_ylabel("seconds (median)")
    first = results[0]
    exe = first["executor"] + (f", {first['workers']} workers" if first["workers"] else "")
    ax.set_title(("QUICK SMOKE RUN — " if quick else "")
                 + f"postproc run (E2E, 4 levels), executor {exe}", fontsize=10)
    ax.grid(True, which="both", linewidth=0.3)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


# -- report ------------------------------------------------------------------------------------

def _loads(section: dict[str, Any]) -> str:
    return (f"load average {common.fmt_load(section['load_before'])} before, "
            f"{common.fmt_load(section['load_after'])} after")


def summary_table(out: dict[str, Any]) -> str:
    rows = []
    tab = out.get("tabulation")
    if tab:
        t = tab["result"]
        p, fl = t["phases"]["tabulate"], t["phases"]["floor"]
        rows.append([f"tabulation time, {t['persons']:,} persons",
                     common.fmt_seconds(p["seconds"]),
                     f"one `np.bincount` {common.fmt_seconds(fl['seconds'])}",
                     common.fmt_ratio(p["ratio_to_floor"]), "≤ 2×",
                     common.verdict(p["ratio_to_floor"] <= foundation.TABULATE_RATIO_TARGET)])
        rows.append(["tabulation peak memory (inputs + rise)",
                     common.fmt_bytes(p["input_bytes"] + p["peak_rise_bytes"]),
                     f"input columns {common.fmt_bytes(p['input_bytes'])}",
                     common.fmt_ratio(p["memory_ratio"]), "≤ 3×",
                     common.verdict(p["memory_ratio"] <= foundation.MEMORY_RATIO_TARGET)])
    eng = out.get("engine")
    if eng:
        o = eng["result"]["overall"]
        rows.append([(f"generic CVXPY path vs engine fit, {eng['result']['persons']:,} persons, "
                      f"{o['compared']:,} parents"), common.fmt_seconds(o["engine_seconds"]),
                     f"generic {common.fmt_seconds(o['generic_seconds'])}",
                     common.fmt_ratio(o["ratio"]), "≥ 20×",
                     common.verdict(o["ratio"] >= topdown_engine.RATIO_TARGET)])
        rows.append(["largest relative objective difference, engine vs generic",
                     f"{o['max_objective_diff']:.1e}", "—", "—", "≤ 1e-6",
                     common.verdict(o["max_objective_diff"] <= topdown_engine.OBJECTIVE_TARGET)])
    exe = out.get("executors")
    if exe:
        e = exe["result"]
        serial = e["executors"]["serial"]["seconds"]
        for name in ("process", "dask"):
            f = e["executors"][name]
            rows.append([f"TopDown with {name} ({f['workers']} workers), {e['persons']:,} persons",
                         common.fmt_seconds(f["seconds"]),
                         f"serial {common.fmt_seconds(serial)}", common.fmt_ratio(f["ratio"]),
                         "—", "—"])
    sc = out.get("scaling")
    if sc:
        big = sc["runs"][-1]["result"]
        m = big["median"]
        rows.append([f"full `postproc run`, {big['persons']:,} persons ({big['executor']})",
                     common.fmt_seconds(m["wall_seconds"]), "—", "—", "≤ 5 min (< 15 min)",
                     common.verdict(m["wall_seconds"] <= full_run.ISSUE7_SECONDS) + " ("
                     + common.verdict(m["wall_seconds"] < full_run.ISSUE3_SECONDS) + ")"])
        for label, key in (("largest process", "max_rss_bytes"),
                           ("sum over process tree", "tree_peak_rss_bytes")):
            v = m[key]
            rows.append([f"peak memory of that run ({label})", common.fmt_bytes(v), "—", "—",
                         "≤ 12 GiB",
                         common.verdict(v <= full_run.ISSUE7_MEMORY) if v else "n/a"])
        f = sc["fit"]["total wall"]
        sizes = ", ".join(f"{r['result']['persons']:,}" for r in sc["runs"])
        rows.append([f"scaling: slope of log(wall) on log(persons) over {sizes}",
                     f"{f['slope']:.2f} (two largest sizes: {f['top_slope']:.2f})",
                     "1 = linear", "—", "near-linear", "see the scaling section"])
    return common.markdown_table(["measurement", "figure", "baseline (same run)", "ratio",
                                  "target", "meets target"], rows, "lrrrrr")


def scaling_table(sc: dict[str, Any]) -> str:
    rows = []
    for section in sc["runs"]:
        r = section["result"]
        m = r["median"]
        ph = m["phases"]
        rows.append([f"{r['persons']:,}", f"{m['wall_seconds']:.2f}",
                     f"{_pipeline_seconds(r):.2f}", f"{ph['read_tabulate']:.2f}",
                     f"{ph['measure']:.2f}", f"{ph['topdown']:.2f}", f"{ph['write']:.2f}",
                     f"{r['persons'] / m['wall_seconds'] / 1e6:.2f}M",
                     common.fmt_bytes(m["max_rss_bytes"]),
                     common.fmt_bytes(m["tree_peak_rss_bytes"]),
                     common.fmt_load(section["load_before"]),
                     common.fmt_load(section["load_after"])])
    fit = sc["fit"]
    rows.append(["**slope (all sizes)**"] + [f"{fit[k]['slope']:.2f}" for k in
                                             ("total wall", "pipeline (phases)",
                                              "read + tabulate")]
                + ["", f"{fit['TopDown']['slope']:.2f}"] + [""] * 6)
    rows.append(["**slope (two largest)**"] + [f"{fit[k]['top_slope']:.2f}" for k in
                                               ("total wall", "pipeline (phases)",
                                                "read + tabulate")]
                + ["", f"{fit['TopDown']['top_slope']:.2f}"] + [""] * 6)
    return common.markdown_table(
        ["persons", "total wall s", "pipeline s", "read + tabulate s", "measure s",
         "TopDown s", "write s", "persons/s (wall)", "peak RSS (largest process)",
         "peak RSS (tree sum)", "load before", "load after"], rows)


def report(out: dict[str, Any]) -> str:
    title = "# Benchmark report" + (" — QUICK SMOKE RUN (small sizes; not the targets' scale)"
                                    if out["quick"] else "")
    parts = [title, "", common.describe_context(out["context"]), "",
             ("Targets are the issues' (2, 3, 7), judged here, never asserted. Every ratio is "
              "against a baseline measured in the same run; times are medians of repeats."), "",
             "## Summary", "", summary_table(out), ""]
    tab = out.get("tabulation")
    if tab:
        t = tab["result"]
        parts += [(f"## Tabulation vs the bincount floor ({t['persons']:,} persons; "
                   f"{_loads(tab)})"), "",
                  ("Each phase in a fresh process; median of "
                   f"{t['repeats']} calls. The floor is one `np.bincount` of the precomputed "
                   "int64 key `leaf × 192 + cell` of the same records; memory is the peak rise "
                   "above the loaded inputs (see `benchmarks/foundation.py`)."), "",
                  foundation.tabulation_table(t), ""]
    sc = out.get("scaling")
    if sc:
        big = sc["runs"][-1]["result"]
        parts += [(f"## Fit and rounding per level ({big['persons']:,} persons, executor "
                   f"{big['executor']}; {_loads(sc['runs'][-1])})"), "",
                  ("Wall seconds per level from the run's manifest; fit and rounding are the "
                   "solvers' own seconds summed over the level's parents (over workers too "
                   "when parallel)."), "", full_run.level_table(big), "",
                  "Phases of that run:", "", full_run.phase_table(big), ""]
    eng = out.get("engine")
    if eng:
        e = eng["result"]
        sample = ("every parent problem" if e["max_parents"] is None else
                  f"≤ {e['max_parents']} parents per level (random sample)")
        parts += [(f"## Generic CVXPY path vs engine ({e['persons']:,} persons, {sample}; "
                   f"{_loads(eng)})"), "",
                  (f"Fit only (no rounding), median of {e['repeats']} interleaved runs per parent; "
                   "see `benchmarks/topdown_engine.py`."), "", topdown_engine.table(e), ""]
    exe = out.get("executors")
    if exe:
        import bench_executors

        e = exe["result"]
        units = ", ".join(f"{lv} {n:,}" for lv, n in e["units"].items())
        parts += [(f"## Serial vs process pool vs Dask ({e['persons']:,} persons: {units}; "
                   f"{_loads(exe)})"), "",
                  (f"`topdown()` only (data prepared once), median of {e['repeats']} runs after "
                   "a warm-up; start-up of the pool/cluster is its own column. Ratio below 1 is "
                   "faster than serial; every executor's histograms equal the serial ones."), "",
                  bench_executors.table(e), ""]
    if sc:
        fig = sc.get("figure")
        parts += ["## Scaling (whole `postproc run` vs persons)", "",
                  ("Slope of log(seconds) on log(persons), least squares: 1 is linear growth. "
                   "The total wall time includes a fixed start-up (interpreter, imports) and the "
                   "error table the CLI prints, which flatten the curve at small sizes; the "
                   "slope over the two largest sizes is the one that speaks for scale."), "",
                  scaling_table(sc), ""]
        if fig:
            shown = (Path(fig).resolve().relative_to(common.REPO_DIR)
                     if Path(fig).resolve().is_relative_to(common.REPO_DIR) else fig)
            parts += [f"Figure: `{shown}`", ""]
        parts += ["## Peak memory", "",
                  common.markdown_table(
                      ["run", "largest process (`/usr/bin/time -v`)",
                       "sum over the process tree (sampled)"],
                      [[f"`postproc run`, {r['result']['persons']:,} persons",
                        common.fmt_bytes(r["result"]["median"]["max_rss_bytes"]),
                        common.fmt_bytes(r["result"]["median"]["tree_peak_rss_bytes"])]
                       for r in sc["runs"]]), ""]
    return "\n".join(parts)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true",
                        help="everything at small sizes (≤ 2M persons) to check it works")
    parser.add_argument("--tab-persons", type=common.parse_count)
    parser.add_argument("--engine-persons", type=common.parse_count)
    parser.add_argument("--engine-max-parents", type=int)
    parser.add_argument("--engine-repeats", type=int)
    parser.add_argument("--exec-persons", type=common.parse_count)
    parser.add_argument("--exec-repeats", type=int)
    parser.add_argument("--sizes", type=common.count_list,
                        help="persons of the scaling runs, e.g. 1M,10M,30M,132.2M")
    parser.add_argument("--executor", choices=["serial", "process", "dask"], default="serial",
                        help="executor of the full runs (default serial)")
    parser.add_argument("--workers", type=int, help="workers of the full runs' executor")
    parser.add_argument("--repeats", type=int, default=1, help="full runs per size (default 1)")
    parser.add_argument("--skip", default="",
                        help=f"comma-separated sections to skip: {', '.join(SECTIONS)}")
    parser.add_argument("--workdir", help="directory for data and outputs (kept, so data are "
                                          "reused by a rerun; default: temporary, removed)")
    parser.add_argument("--keep", action="store_true", help="keep the full runs' outputs")
    parser.add_argument("--figure", default="default",
                        help="scaling figure (PNG; default benchmarks/scaling.png, with --quick "
                             "benchmarks/scaling-quick.png; '' for none)")
    parser.add_argument("--out", help="also write the markdown report to this file")
    parser.add_argument("--json", help="write every raw figure to this JSON file")
    args = parser.parse_args(argv)
    skip = {s.strip() for s in args.skip.split(",") if s.strip()}
    if skip - set(SECTIONS):
        parser.error(f"unknown sections {sorted(skip - set(SECTIONS))}; sections are "
                     f"{', '.join(SECTIONS)}")
    result = run(quick=args.quick, tab_persons=args.tab_persons,
                 engine_persons=args.engine_persons, engine_max_parents=args.engine_max_parents,
                 engine_repeats=args.engine_repeats, exec_persons=args.exec_persons,
                 exec_repeats=args.exec_repeats, sizes=args.sizes, executor=args.executor,
                 workers=args.workers, repeats=args.repeats,
                 sections=tuple(s for s in SECTIONS if s not in skip), workdir=args.workdir,
                 keep=args.keep, figure=args.figure or None)
    common.emit(report(result), result, out=args.out, json_path=args.json)
    return result


if __name__ == "__main__":
    main()
