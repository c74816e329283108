"""TopDown, BlueDown, GLS and the raw noisy cells on the same measurements: error of every
workload query at every level, EPL, time and memory (issue 37, item 5).

Rerun from the repository root (``docs/gls_compare.md`` reads the results; about 20 and 13
minutes on 2 cores)::

    python benchmarks/gls_compare.py --preset pl94_2020 --persons 1M --seeds 4 --probe \\
        --workdir /var/tmp/gls-pl94 --json benchmarks/gls/pl94_2020_1m.json
    python benchmarks/gls_compare.py --preset e2e_1940 --persons 1M --seeds 4 --epsilon 1 \\
        --check --probe --workdir /var/tmp/gls-e2e --json benchmarks/gls/e2e_1940_1m.json
    python benchmarks/gls_compare.py --from-json benchmarks/gls/pl94_2020_1m.json \\
        benchmarks/gls/e2e_1940_1m.json --out benchmarks/gls/results_2026-12-06.md \\
        --figure-dir benchmarks/gls

One population is synthesized with a fixed data seed (``--data-seed``; ``postproc demo``'s
files, in ``--workdir`` and reused there) and tabulated with the preset's configuration
(``postproc.apps.runs.demo.demo_config``): ``pl94_2020`` is the 2020 production budget,
discrete Gaussian noise and spec, with TopDown's production fit passes, pass tolerance and
rounder; ``e2e_1940`` the E2E configuration at ``--epsilon`` (geometric noise, ``Spec.e2e``).
For each of ``--seeds`` measurement seeds (``--first-seed`` on), the data are measured **once**
and every method runs on those measurements:

* ``topdown`` — with the spec and the configuration's TopDown options;
* ``bluedown`` — with the spec and the same options less the fit passes (it fits one
  pseudo-measurement per child); on the 2,016 cells of PL94 it refuses, and the refusal is
  recorded as it is;
* ``gls`` — the GLS of the measurements alone, without the spec (until 2026-12-06 this was
  "as ``compare_methods`` runs it", which was the same thing; the registry now gives ``gls``
  the spec, so ``compare_methods`` runs what is here ``gls+eq`` — the 3M run of
  ``benchmarks/gls/pl94_2020_3m_5states.json`` was made in between and its ``gls`` is
  ``gls+eq``);
* ``gls+eq`` — ``gls`` given the spec: its equalities (invariant totals, structural zeros)
  imposed, the estimate BlueDown starts from; real-valued, may be negative;
* ``noisy`` — every level's noisy detailed cells as measured.

Each method's result is evaluated against the truth as ``compare_methods`` evaluates it
(``postproc.evaluation.evaluate.evaluate``: ``total`` and every workload query at every level,
the improved EPL with the same random streams); ``--check`` also runs ``compare_methods`` itself
on the first seed and stops if any number differs. A method's wall and CPU time (this process:
a process pool's workers are not in the CPU time) and the peak resident memory of this process
while it ran (``VmHWM`` reset before the call) are recorded. ``--probe`` measures ``gls`` alone
in a fresh interpreter (first seed): the memory before it, its peak, the share of its cells
below 0, and ``/usr/bin/time -v``'s maximum for the whole process. The report gives the mean
over seeds with the standard deviation across seeds; ``--json`` keeps every per-seed number,
and ``--from-json`` renders one report (and a figure per preset) from several runs without
running anything; ``--probe-again JSON`` runs the probe alone again for a recorded run (its
``--workdir`` must still hold the data).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
import zlib
from fractions import Fraction
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import (  # noqa: E402
    context_end,
    context_start,
    describe_context,
    fmt_bytes,
    json_default,
    markdown_table,
    memory_status,
    parse_count,
    reset_peak_rss,
    run_python,
)

PRESETS = ("pl94_2020", "e2e_1940")
METHODS = ("topdown", "bluedown", "gls", "gls+eq", "noisy")
#: What each compared method keeps, in words.
KEEPS = {"topdown": "integer, nonnegative, the spec's invariants and constraints",
         "bluedown": "integer, nonnegative, the spec's invariants and constraints",
         "gls": "nothing (real; run without the spec)",
         "gls+eq": "the spec's equalities only (real, may be negative)",
         "noisy": "nothing (the noisy detailed cells of each level)"}
DATA_SEED = 2020
FIRST_SEED = 1000
#: Stream of the EPL intervals, as compare_methods derives it.
EPL_STREAM = zlib.crc32(b"epl")
#: The name whose EPL stream a compared method uses: ``gls+eq`` is what ``compare_methods``
#: runs as ``gls`` (same stream, so ``--check`` compares them); ``gls`` here is without the spec.
EPL_NAMES = {"gls+eq": "gls", "gls": "gls without the spec"}
#: The figure draws a mean |error| below this (0: held invariant, or exact) at this value.
FLOOR = 1e-3


# -- one run ----------------------------------------------------------------------------------

def prepare(preset: str, persons: int, workdir: Path, data_seed: int, epsilon: float,
            states: list[str] | None = None):
    """The preset's configuration on ``workdir/data`` (synthesized unless already there with
    the same preset, persons, seed and states)."""
    from postproc.apps.runs.demo import demo_config

    data, made = workdir / "data", {"preset": preset, "persons": persons, "seed": data_seed}
    if states:
        if preset != "pl94_2020":
            raise SystemExit("--states: only the pl94_2020 preset synthesizes chosen states")
        made["states"] = list(states)
    marker = data / "gls_compare.json"
    if not (marker.exists() and json.loads(marker.read_text()) == made):
        if preset == "pl94_2020":
            from hierarchy.synth.census2020 import synthesize_2020

            synthesize_2020(persons, seed=data_seed, states=states, out=data, overwrite=True)
        else:
            from hierarchy.synth import write_synthetic_1940

            write_synthetic_1940(data, persons, seed=data_seed)
        marker.write_text(json.dumps(made))
    if preset == "pl94_2020":
        return demo_config(workdir, preset=preset, seed=data_seed)
    return demo_config(workdir, preset=preset, epsilon=epsilon, seed=data_seed)


def method_call(name: str, config, executor) -> tuple[str, Any, dict[str, Any]]:
    """The registered method, the spec it is given and its options, for ``name``."""
    from postproc.apps.runs.pipeline import method_options
    from postproc.methods.registry import method_spec

    if name == "gls+eq":
        return "gls", config.spec, {}
    if name == "gls":
        return "gls", None, {}
    options: dict[str, Any] = {}
    if name in ("topdown", "bluedown"):
        options = {**method_options(config, "topdown"), "executor": executor}
        if name == "bluedown":
            options = {k: v for k, v in options.items() if k not in ("passes", "pass_tolerance")}
    return name, method_spec(name, config.spec), options


def run_method(name: str, noisy, truth, config, seed: int, executor) -> dict[str, Any]:
    """Run one method on ``noisy`` and evaluate it as ``compare_methods`` does."""
    from hierarchy.randomness import as_randomness
    from postproc.errors import PostprocError
    from postproc.evaluation.compare import constrained
    from postproc.evaluation.evaluate import evaluate
    from postproc.methods import postprocess
    from postproc.methods.registry import method_rng

    registered, spec, options = method_call(name, config, executor)
    rnd = as_randomness(seed)
    reset_peak_rss()
    rss_start = memory_status()["rss"]
    c0, t0 = time.process_time(), time.perf_counter()
    try:
        result = postprocess(noisy, registered, spec, rng=method_rng(rnd, registered),
                             **options)
    except PostprocError as exc:
        return {"status": "refused", "error": f"{type(exc).__name__}: {exc}"}
    seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
    peak = memory_status()["peak"]
    t0 = time.perf_counter()
    table = evaluate(result, truth, epl_options=None, spec=spec,
                     rng=rnd.child(EPL_STREAM, zlib.crc32(EPL_NAMES.get(name, name).encode())))
    rows = table.rename(columns={"epl_ci_low": "epl_low", "epl_ci_high": "epl_high",
                                 "epl_reason": "epl_note"})
    rows = rows[["level", "query", "n", "mae", "mean_abs", "rmse", "epl", "epl_low",
                 "epl_high", "epl_kind", "epl_note"]].assign(
        epl_note=lambda t: t["epl_note"].fillna("").astype(str))
    return {"status": "ok", "seconds": seconds, "cpu_seconds": cpu, "rss_start": rss_start,
            "peak_rss": peak, "evaluate_seconds": time.perf_counter() - t0,
            "constrained": constrained(registered, config.spec) or spec is not None,
            "details": {k: v for k, v in (result.provenance.details or {}).items()
                        if isinstance(v, (str, int, float))},
            "rows": rows.to_dict(orient="records")}


def check_against_compare(noisy, truth, config, seed: int, executor,
                          runs: dict[str, dict[str, Any]]) -> list[str]:
    """``compare_methods`` on the same measurements: its numbers must equal ours. Returns the
    methods checked; raises ``SystemExit`` naming the first difference."""
    import math

    from postproc.evaluation.compare import compare_methods

    ours_as = {"gls": "gls+eq"}          # compare_methods gives gls the spec: our gls+eq
    names = [m for m in runs if m != "gls" and runs[m]["status"] == "ok"]
    names = ["gls" if m == "gls+eq" else m for m in names]
    options = {m: method_call(m, config, executor)[2] for m in names}
    table = compare_methods(noisy, truth, names, config.spec, rng=seed,
                            options={m: o for m, o in options.items() if o})
    for row in table.to_dict(orient="records"):
        ours = next(r for r in runs[ours_as.get(row["method"], row["method"])]["rows"]
                    if r["level"] == row["level"] and r["query"] == row["query"])
        for key in ("n", "mae", "mean_abs", "rmse", "epl", "epl_low", "epl_high", "epl_kind"):
            a, b = ours[key], row[key]
            same = (a == b or (isinstance(a, float) and isinstance(b, float)
                               and (math.isnan(a) and math.isnan(b) or math.isclose(a, b))))
            if not same:
                raise SystemExit(f"--check: {row['method']} {row['level']} {row['query']} "
                                 f"{key}: ours {a!r}, compare_methods {b!r}")
    return [ours_as.get(m, m) for m in names]


def gls_probe(preset: str, persons: int, workdir: str, data_seed: int, epsilon: float,
              seed: int, states: list[str] | None = None) -> dict[str, Any]:
    """In a fresh interpreter (``run_python``): tabulate, measure with ``seed``, then run
    ``gls`` without and with the spec; the memory before each call, its peak, and per level
    the share of cells below 0 and the lowest cell."""
    from hierarchy.measurement import measure
    from postproc.apps.runs.pipeline import load_truth
    from postproc.methods import postprocess

    config = prepare(preset, persons, Path(workdir), data_seed, epsilon, states)
    truth = load_truth(config)
    noisy = measure(truth, config.workload, config.budget, config.mechanism, seed,
                    publish=config.publish(), spec=config.spec)
    out = {}
    for name, spec in (("gls", None), ("gls+eq", config.spec)):
        reset_peak_rss()
        before = memory_status()["rss"]
        t0 = time.perf_counter()
        result = postprocess(noisy, "gls", spec)
        out[name] = {"rss_before": before, "peak_rss": memory_status()["peak"],
                     "seconds": time.perf_counter() - t0,
                     "below_zero": {lv: float((h < 0).mean()) for lv, h in
                                    zip(result.levels, result.histograms)},
                     "lowest": {lv: float(h.min()) for lv, h in
                                zip(result.levels, result.histograms)}}
        del result
    return out


def run_probe(a: dict[str, Any], workdir: Path) -> dict[str, Any]:
    """:func:`gls_probe` in a fresh interpreter, for the run whose arguments are ``a``."""
    started = context_start()["date"]
    return {"date": started, **run_python("gls_compare", "gls_probe", {
        "preset": a["preset"], "persons": a["persons"], "workdir": str(workdir),
        "data_seed": a["data_seed"], "epsilon": a["epsilon"], "seed": a["first_seed"],
        "states": a.get("states")})}


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Every seed, every method; the JSON-ready record of the run."""
    from hierarchy.measurement import measure
    from postproc.apps.runs.pipeline import load_truth
    from postproc.infra.executors import get_executor

    context = context_start()
    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="gls_compare_"))
    config = prepare(args.preset, args.persons, workdir, args.data_seed, args.epsilon,
                     args.states)
    t0 = time.perf_counter()
    truth = load_truth(config)
    load_seconds = time.perf_counter() - t0
    executor = (get_executor("process", workers=args.workers) if args.workers > 1
                else get_executor("serial"))
    seeds, checked = [], []
    try:
        for i in range(args.seeds):
            seed = args.first_seed + i
            t0 = time.perf_counter()
            noisy = measure(truth, config.workload, config.budget, config.mechanism, seed,
                            publish=config.publish(), spec=config.spec)
            runs = {"measure_seconds": time.perf_counter() - t0}
            for name in args.methods:
                runs[name] = run_method(name, noisy, truth, config, seed, executor)
                done = runs[name]
                print(f"seed {seed}: {name} "
                      + (f"{done['seconds']:.1f} s, evaluated in "
                         f"{done['evaluate_seconds']:.1f} s" if done["status"] == "ok"
                         else done["error"]), file=sys.stderr, flush=True)
            if args.check and i == 0:
                checked = check_against_compare(
                    noisy, truth, config, seed, executor,
                    {m: runs[m] for m in args.methods})
            seeds.append({"seed": seed, **runs})
            del noisy
    finally:
        executor.close()
    probe = run_probe(vars(args), workdir) if args.probe else None
    units = {lv: truth.geography.n_units(lv) for lv in truth.levels}
    return {"args": {k: v for k, v in vars(args).items()
                     if k not in ("from_json", "probe_again")} | {"workdir": str(workdir)},
            "context": context_end(context), "levels": list(truth.levels), "units": units,
            "cells": truth.schema.size, "persons": int(truth.counts[0].sum()),
            "load_seconds": load_seconds,
            "budget": str(config.budget.total), "budget_kind": config.budget.kind,
            "mechanism": type(config.mechanism).__name__,
            "workload": list(config.workload.names), "checked": checked,
            "seeds": seeds, "probe": probe}


# -- the report --------------------------------------------------------------------------------

def fmt(x: float) -> str:
    """A number for the tables: thousands separators above 100, 3 decimals below 1."""
    if x != x:
        return "n/a"
    if x == 0:
        return "0"
    if abs(x) >= 100:
        return f"{x:,.0f}"
    if abs(x) >= 1:
        return f"{x:.2f}"
    if abs(x) >= FLOOR:
        return f"{x:.3f}"
    return f"{x:.0e}"


def spread(values: list[float]) -> str:
    """``mean ± sd`` over seeds (the standard deviation across seeds)."""
    if len(values) < 2:
        return fmt(values[0]) if values else ""
    return f"{fmt(statistics.mean(values))} ± {fmt(statistics.stdev(values))}"


def collect(record: dict[str, Any], column: str) -> dict[tuple[str, str, str], list[float]]:
    """(method, query, level) → the column's value per seed."""
    out: dict[tuple[str, str, str], list[float]] = {}
    for seed in record["seeds"]:
        for method in record["args"]["methods"]:
            if seed[method]["status"] != "ok":
                continue
            for row in seed[method]["rows"]:
                out.setdefault((method, row["query"], row["level"]), []).append(row[column])
    return out


def ok_methods(record: dict[str, Any]) -> list[str]:
    return [m for m in record["args"]["methods"]
            if all(s[m]["status"] == "ok" for s in record["seeds"])]


def query_table(record: dict[str, Any], cell, queries: list[str] | None = None) -> str:
    """One row per query and method, one column per level; ``cell(method, query, level)``."""
    levels, rows = record["levels"], []
    for query in queries or all_queries(record):
        for i, method in enumerate(ok_methods(record)):
            rows.append([f"`{query}`" if i == 0 else "", method]
                        + [cell(method, query, lv) for lv in levels])
    return markdown_table(["query", "method", *levels], rows, "ll" + "r" * len(levels))


def all_queries(record: dict[str, Any]) -> list[str]:
    """``total`` and the workload's queries (once each: PL94's workload has a total)."""
    return list(dict.fromkeys(["total", *record["workload"]]))


def epl_cell(values: list[dict[str, Any]]) -> str:
    """The EPL over seeds: the median estimate and its range where every seed gave one, else
    what the seeds gave (``∞ held``: held invariant; ``≥ x``: a lower bound; ``undef.``)."""
    kinds = [v["epl_kind"] for v in values]
    if all(k == "estimate" for k in kinds):
        est = sorted(v["epl"] for v in values)
        return (f"{fmt(statistics.median(est))} [{fmt(est[0])}, {fmt(est[-1])}]"
                if len(est) > 1 else fmt(est[0]))
    parts = []
    for kind in dict.fromkeys(kinds):
        these = [v for v in values if v["epl_kind"] == kind]
        if kind == "estimate":
            text = fmt(statistics.median(v["epl"] for v in these))
        elif kind == "bound":
            text = "≥ " + fmt(min(v["epl_low"] for v in these))
        else:
            text = {"unbounded": "∞ held", "undefined": "undef."}.get(kind, kind)
        parts.append(text + (f" ({len(these)}/{len(values)})" if len(values) > 1 else ""))
    return "; ".join(parts)


def render_record(record: dict[str, Any], figure: str | None) -> str:
    """The markdown section of one run."""
    a, levels = record["args"], record["levels"]
    seeds = record["seeds"]
    methods = ok_methods(record)
    mean_abs, mae = collect(record, "mean_abs"), collect(record, "mae")
    rows_by = {(m, r["query"], r["level"]): [] for m in methods for s in seeds
               for r in s[m]["rows"]}
    for s in seeds:
        for m in methods:
            for r in s[m]["rows"]:
                rows_by[(m, r["query"], r["level"])].append(r)
    command = (f"python benchmarks/gls_compare.py --preset {a['preset']} --persons "
               f"{a['persons']} --seeds {a['seeds']} --workers {a['workers']}"
               + (f" --epsilon {a['epsilon']:g}" if a["preset"] == "e2e_1940" else "")
               + (f" --states {','.join(a['states'])}" if a.get("states") else "")
               + (" --check" if a["check"] else "") + (" --probe" if a["probe"] else ""))
    units = ", ".join(f"{lv} {record['units'][lv]:,}" for lv in levels)
    budget = (f"ρ = {record['budget']} ≈ {float(Fraction(record['budget'])):.4f} (zCDP), "
              "the production split" if
              a["preset"] == "pl94_2020" else f"ε = {a['epsilon']:g}, the E2E split")
    where = f" of {', '.join(a['states'])}" if a.get("states") else ""
    lines = [f"## `{a['preset']}`: {record['persons']:,} persons{where}, {len(seeds)} "
             "measurement seeds", "", f"Command: `{command}`", "",
             describe_context(record["context"]), "",
             f"- data: one synthetic population (data seed {a['data_seed']}), {record['cells']:,} "
             f"cells per histogram; units: {units}",
             f"- measurements: {record['mechanism']}, {budget}; seeds "
             f"{seeds[0]['seed']} … {seeds[-1]['seed']}, each measured once "
             f"(mean {statistics.mean(s['measure_seconds'] for s in seeds):.1f} s) and every "
             "method run on it",
             f"- TopDown and BlueDown solve parents with {a['workers']} worker process(es)"
             + ("; TopDown with the production fit passes, pass tolerance and rounder"
                if a["preset"] == "pl94_2020" else "; TopDown with the E2E defaults "
                "(one fit pass, cells rounding)")]
    if record["checked"]:
        lines.append(f"- `--check`: `compare_methods` on seed {seeds[0]['seed']} gave the "
                     f"same n, MAE, mean |error|, RMSE and EPL for {', '.join(record['checked'])}")
    refused = [m for m in a["methods"] if m not in methods]
    for m in refused:
        errors = dict.fromkeys(s[m].get("error", "") for s in seeds)
        lines.append(f"- **{m} refused** (every seed): `{' / '.join(errors)}`")
    lines += ["", "### Methods: what they keep, time, memory", "",
              "Wall seconds of the method's call (mean ± sd over seeds); CPU seconds of this "
              "process (a worker pool's are not counted); peak resident memory of this process "
              "while the method ran (it holds the truth and the measurements too), and its "
              "resident memory when the call began.", ""]
    trows = []
    for m in methods:
        runs = [s[m] for s in seeds]
        trows.append([m, KEEPS[m], spread([r["seconds"] for r in runs]),
                      spread([r["cpu_seconds"] for r in runs]),
                      fmt_bytes(max(r["peak_rss"] for r in runs)),
                      fmt_bytes(max(r["rss_start"] for r in runs))])
    lines += [markdown_table(["method", "keeps", "seconds", "CPU s", "peak RSS",
                              "RSS at start"], trows, "llrrrr"), ""]
    probe = record.get("probe")
    if probe:
        res = probe["result"]
        lines += [f"GLS alone in a fresh interpreter (`--probe`, {probe.get('date', 'same run')}"
                  f"; truth tabulated and measured with seed {seeds[0]['seed']} first): "
                  + "; ".join(
                      f"`{k}` {v['seconds']:.1f} s, resident {fmt_bytes(v['rss_before'])} before "
                      f"the call, peak {fmt_bytes(v['peak_rss'])} during it "
                      f"(+{fmt_bytes(v['peak_rss'] - v['rss_before'])})" for k, v in res.items())
                  + f"; whole process peak (`/usr/bin/time -v`) "
                  f"{fmt_bytes(probe['process'].get('max_rss_bytes'))}.", ""]
        if all("below_zero" in v for v in res.values()):
            lines += ["The GLS estimate is real and may be negative: share of its cells below 0 "
                      "(and its lowest cell) per level, same run.", "",
                      markdown_table(["method", *levels], [
                          [k] + [f"{v['below_zero'][lv]:.1%} ({fmt(v['lowest'][lv])})"
                                 for lv in levels] for k, v in res.items()]), ""]
    lines += ["### Mean |error| by level (mean ± sd over seeds)", "",
              "Mean over the level's units and answers of |estimate − truth|, per query; "
              "`total` is each unit's population.", "",
              query_table(record, lambda m, q, lv: spread(mean_abs[(m, q, lv)])), ""]
    if "topdown" in methods:
        lines += ["### Paired against TopDown (same measurements)", "",
                  "Mean |error| divided by TopDown's (means over seeds), and in how many seeds "
                  "the method's mean |error| was below TopDown's; `=` where both are 0.", "",
                  query_table(record, lambda m, q, lv: paired(mean_abs, m, q, lv)), ""]
    lines += ["### The toolkit's MAE: median |error| by level (mean over seeds)", "",
              "`compare_methods`' `mae` column is the **median** absolute error over the "
              "level's units and answers; with sparse integer cells it is often 0.", "",
              query_table(record, lambda m, q, lv: fmt(statistics.mean(mae[(m, q, lv)]))), "",
              "### Empirical privacy loss (improved estimator) by level", "",
              "Per method, query and level: the median EPL over seeds [min, max] where every "
              "seed gave an estimate; otherwise what the seeds gave (`≥ x`: the errors only "
              "bound it below; `∞ held`: every error 0 where the spec holds the query "
              "invariant; `undef.`: a single error; counts of seeds in parentheses). "
              "Constrained methods: topdown, bluedown (and gls+eq keeps the equalities).", "",
              query_table(record, lambda m, q, lv: epl_cell(rows_by[(m, q, lv)])), ""]
    if figure:
        lines += [f"![mean |error| by level, log scale]({Path(figure).name})", ""]
    return "\n".join(lines)


def paired(mean_abs, method: str, query: str, level: str) -> str:
    ours, top = mean_abs[(method, query, level)], mean_abs[("topdown", query, level)]
    if method == "topdown":
        return "1"
    below = sum(a < b for a, b in zip(ours, top))
    if statistics.mean(top) == 0:
        return "=" if statistics.mean(ours) == 0 else f"(TopDown 0) {below}/{len(top)}"
    return f"{statistics.mean(ours) / statistics.mean(top):.2f} ({below}/{len(top)})"


def write_figure(record: dict[str, Any], path: Path) -> Path:
    """Mean |error| by level, one panel per query, one line per method, log scale."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    mean_abs, levels = collect(record, "mean_abs"), record["levels"]
    queries = all_queries(record)
    cols = min(4, len(queries))
    rows = -(-len(queries) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(4.2 * cols, 3.4 * rows), squeeze=False,
                             sharex=True)
    styles = {"topdown": "-", "bluedown": "-", "gls": ":", "gls+eq": "--", "noisy": ":"}
    colors = dict(zip(METHODS, ("C0", "C1", "C2", "C3", "C4")))
    x = list(range(len(levels)))
    for ax, query in zip(axes.flat, queries):
        for m in ok_methods(record):
            vals = [mean_abs[(m, query, lv)] for lv in levels]
            means = [max(statistics.mean(v), FLOOR) for v in vals]
            low = [mean - max(min(v), FLOOR) for mean, v in zip(means, vals)]
            high = [max(max(v), FLOOR) - mean for mean, v in zip(means, vals)]
            ax.errorbar(x, means, yerr=[low, high], ls=styles[m], color=colors[m], marker="o",
                        ms=3, capsize=2, label=m)
        ax.set_yscale("log")
        ax.set_title(query, fontsize=9)
        ax.set_xticks(x, levels, rotation=30, fontsize=7)
        ax.tick_params(axis="y", labelsize=7)
    for ax in list(axes.flat)[len(queries):]:
        ax.axis("off")
    axes.flat[0].set_ylabel("mean |error|")
    axes.flat[0].legend(fontsize=7)
    a = record["args"]
    fig.suptitle(f"{a['preset']}, {record['persons']:,} persons: mean |error| by level, mean "
                 f"over {len(record['seeds'])} seeds (bars: min to max); values below {FLOOR:g} "
                 "drawn at it", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def report(records: list[dict[str, Any]], figure_dir: str | None) -> str:
    sections = []
    for record in records:
        figure = None
        if figure_dir:
            a = record["args"]
            figure = str(write_figure(record, Path(figure_dir) / (
                f"mae_{a['preset']}_{a['persons'] // 1_000_000 or a['persons']}"
                f"{'m' if a['persons'] >= 1_000_000 else ''}"
                f"{'_' + '_'.join(a['states']).lower() if a.get('states') else ''}.png")))
        sections.append(render_record(record, figure))
    return "\n".join(["# TopDown, BlueDown, GLS and the noisy cells on the same measurements",
                      "", "Made by `benchmarks/gls_compare.py` (its docstring says how to rerun "
                      "it); `docs/gls_compare.md` reads the numbers.", "", *sections])


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--preset", choices=PRESETS, default="e2e_1940")
    p.add_argument("--persons", type=parse_count, default=parse_count("1M"))
    p.add_argument("--seeds", type=int, default=4)
    p.add_argument("--first-seed", type=int, default=FIRST_SEED)
    p.add_argument("--data-seed", type=int, default=DATA_SEED)
    p.add_argument("--epsilon", type=float, default=1.0, help="e2e_1940's total ε")
    p.add_argument("--states", type=lambda t: [x.strip() for x in t.split(",") if x.strip()],
                   default=None, help="pl94_2020: synthesize only these states (postal or FIPS "
                   "codes), e.g. TX,GA,VA,KY,MO for many counties per state")
    p.add_argument("--methods", type=lambda t: [m.strip() for m in t.split(",") if m.strip()],
                   default=list(METHODS))
    p.add_argument("--workers", type=int, default=2,
                   help="processes solving TopDown's and BlueDown's parents (1: serial)")
    p.add_argument("--check", action="store_true",
                   help="on the first seed, check every number against compare_methods")
    p.add_argument("--probe", action="store_true",
                   help="measure gls alone in a fresh interpreter (first seed)")
    p.add_argument("--workdir", default=None, help="keep (and reuse) the data in DIR/data")
    p.add_argument("--from-json", nargs="+", default=None,
                   help="render the report of these runs' --json files; run nothing")
    p.add_argument("--probe-again", default=None, metavar="JSON",
                   help="run only --probe again for the run this --json file records (its "
                        "--workdir must still hold the data), and write the file back")
    p.add_argument("--figure-dir", default=None, help="write mae_<preset>_<size>.png here")
    p.add_argument("--out", default=None)
    p.add_argument("--json", default=None)
    args = p.parse_args(argv)
    unknown = sorted(set(args.methods) - set(METHODS))
    if unknown:
        p.error(f"unknown methods {unknown}; choose from {list(METHODS)}")
    if args.probe_again:
        record = json.loads(Path(args.probe_again).read_text())
        record["probe"] = run_probe(record["args"], Path(record["args"]["workdir"]))
        record["args"]["probe"] = True
        Path(args.probe_again).write_text(json.dumps(record, indent=1, default=json_default))
        records = [record]
    elif args.from_json:
        records = [json.loads(Path(f).read_text()) for f in args.from_json]
    else:
        records = [run(args)]
        if args.json:
            Path(args.json).write_text(json.dumps(records[0], indent=1, default=json_default))
    text = report(records, args.figure_dir)
    print(text)
    if args.out:
        Path(args.out).write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
