"""Simulation study of the improved and direct EPL estimators: bias, coverage, numbers and bounds.

Run ``python benchmarks/bench_epl_study.py [--seeds 100] [--out benchmarks/epl_study]``; it
writes ``epl_study.json`` (every estimate) and ``epl_study.md`` (the tables of ``docs/epl.md``)
into ``--out``, and prints the tables. ``--quick`` runs a small subset.

Cases. Errors of the two-sided geometric mechanism, ``z ∈ {0.02, 0.05, 0.1, 0.5, 1, 2, 5,
10}``, and of the discrete Gaussian, ``σ ∈ {1, 5, 20, 50}``, drawn with ``hierarchy.mechanisms``
(``sample_two_sided_geometric``, ``sample_discrete_gaussian``) from
``Randomness.simulation(seed)``.

* improved: ``n ∈ {1,000, 2,000, 5,000, 20,000, 200,000, 2,000,000}`` errors. Each seed draws
  2,000,000 errors once and the smaller ``n`` are its first ``n`` (the cases of one seed are
  dependent; the seeds of one case are independent, which is what bias and coverage need).
* direct: ``R ∈ {500, 5,000, 50,000}`` runs on ``D`` (outputs ``10 + noise``) and on ``D′``
  (``11 + noise``, one person more), drawn the same way (first ``R`` of 50,000).

Estimand. The exact EPL over the window each result reports (``parameters["window"]``),
computed from the pmf: ``max |log p(x) − log p(x+1)|`` over the pairs in the window for the
improved estimator, ``max |log p(k − 10) − log p(k − 11)|`` over the window for the direct one.
For the geometric mechanism it is ``z`` whatever the window; for the discrete Gaussian
``(2 max(|lo|, hi) − 1)/(2σ²)`` for the window ``[lo, hi]`` (improved; shifted by 10.5 for direct).

Per case: the share of results that are a number (an estimate with its interval), a one-sided
lower bound, or undefined; over the numbers the mean relative error ``θ̂/θ − 1`` (bias) with its
standard error, the root mean square relative error, the coverage of the 95 % interval, the
fraction of estimates inside their own interval and the median relative half-width; over the
bounds the share that hold (``bound ≤ θ``). Every result uses the estimators' defaults
(``n_boot = 1000`` draws, ``level = 0.95``, ``reach = 95``, ``precision`` 0.25 for the
improved estimator and 0.1 for the direct one).
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import sys
import time
from pathlib import Path

import numpy as np

from hierarchy.mechanisms import (
    discrete_gaussian_logpmf,
    sample_discrete_gaussian,
    sample_two_sided_geometric,
    two_sided_geometric_logpmf,
)
from hierarchy.randomness import Randomness
from postproc.evaluation.epl import direct_epl, improved_epl

GEOMETRIC = (0.02, 0.05, 0.1, 0.5, 1.0, 2.0, 5.0, 10.0)
GAUSSIAN = (1.0, 5.0, 20.0, 50.0)
SIZES = (1_000, 2_000, 5_000, 20_000, 200_000, 2_000_000)
RUNS = (500, 5_000, 50_000)
CENTRE = 10              # the unit's exact count on D; D′ has one person more


def families(geometric=GEOMETRIC, gaussian=GAUSSIAN):
    """``(name, parameter, sampler(size, rnd), log pmf)`` of every noise distribution."""
    out = []
    for z in geometric:
        out.append(("geometric", z, lambda size, rnd, z=z: sample_two_sided_geometric(z, size, rnd),
                    lambda k, z=z: two_sided_geometric_logpmf(k, z)))
    for sigma in gaussian:
        out.append(("discrete Gaussian", sigma,
                    lambda size, rnd, s=sigma: sample_discrete_gaussian(s * s, size, rnd),
                    lambda k, s=sigma: discrete_gaussian_logpmf(k, s * s)))
    return out


def improved_estimand(log_pmf, window) -> float:
    """``max |log p(x) − log p(x+1)|`` over the pairs of ``window`` (integer errors)."""
    x = np.arange(int(window[0]), int(window[1]))
    return float(np.max(np.abs(log_pmf(x) - log_pmf(x + 1))))


def direct_estimand(log_pmf, window) -> float:
    """``max |log P_D[X = k] − log P_D′[X = k]|`` over the outputs ``k`` of ``window``."""
    k = np.arange(int(window[0]), int(window[1]) + 1)
    return float(np.max(np.abs(log_pmf(k - CENTRE) - log_pmf(k - CENTRE - 1))))


def _finite(value):
    return float(value) if math.isfinite(value) else None


def _record(result, estimand, **case):
    return {**case, "kind": result.kind, "epl": _finite(result.epl),
            "ci_low": _finite(result.ci_low), "ci_high": _finite(result.ci_high),
            "estimand": estimand, "window": result.parameters.get("window"),
            "reason": result.reason}


def run(seeds: int = 50, sizes=SIZES, runs=RUNS, geometric=GEOMETRIC, gaussian=GAUSSIAN,
        log=print) -> list[dict]:
    """Every estimate of the study, one dict each (see the module docstring)."""
    records = []
    sizes, runs = tuple(sizes), tuple(runs)
    for f, (family, parameter, sample, log_pmf) in enumerate(families(geometric, gaussian)):
        started = time.perf_counter()
        for seed in range(seeds):
            base = 1_000_000 * (f + 1) + seed
            errors = sample(max(sizes), Randomness.simulation(base)) if sizes else None
            for n in sizes:
                result = improved_epl(errors[:n], rng=base)
                window = result.parameters.get("window")
                estimand = improved_estimand(log_pmf, window) if window else None
                records.append(_record(result, estimand, estimator="improved", family=family,
                                       parameter=parameter, size=n, seed=seed))
            if runs:
                on_d = CENTRE + sample(max(runs), Randomness.simulation(base + 500_000))
                on_neighbour = CENTRE + 1 + sample(max(runs), Randomness.simulation(base + 700_000))
                for r in runs:
                    result = direct_epl(on_d[:r], on_neighbour[:r], rng=base)
                    window = result.parameters.get("window")
                    estimand = direct_estimand(log_pmf, window) if window else None
                    records.append(_record(result, estimand, estimator="direct", family=family,
                                           parameter=parameter, size=r, seed=seed))
        log(f"{family} {parameter:g}: {seeds} seeds in {time.perf_counter() - started:.0f} s")
    return records


def summarise(records: list[dict]) -> list[dict]:
    """One row per (estimator, family, parameter, size)."""
    groups: dict[tuple, list[dict]] = {}
    for r in records:
        groups.setdefault((r["estimator"], r["family"], r["parameter"], r["size"]), []).append(r)
    rows = []
    for (estimator, family, parameter, size), group in groups.items():
        numbers = [r for r in group if r["kind"] == "estimate"]
        bounds = [r for r in group if r["kind"] == "bound"]
        row = {"estimator": estimator, "family": family, "parameter": parameter, "size": size,
               "seeds": len(group), "numbers": len(numbers) / len(group),
               "bounds": len(bounds) / len(group),
               "undefined": 1 - (len(numbers) + len(bounds)) / len(group),
               "estimand": float(np.mean([r["estimand"] for r in group
                                          if r["estimand"] is not None] or [math.nan]))}
        if numbers:
            relative = np.array([r["epl"] / r["estimand"] - 1 for r in numbers])
            row["bias"] = float(relative.mean())
            row["bias_se"] = float(relative.std(ddof=1) / math.sqrt(relative.size)) \
                if relative.size > 1 else math.nan
            row["rmse"] = float(np.sqrt(np.mean(relative ** 2)))
            intervals = [r for r in numbers if r["ci_low"] is not None]
            if intervals:
                row["coverage"] = float(np.mean([r["ci_low"] <= r["estimand"] <= r["ci_high"]
                                                 for r in intervals]))
                row["inside"] = float(np.mean([r["ci_low"] <= r["epl"] <= r["ci_high"]
                                               for r in intervals]))
                row["half_width"] = float(np.median([(r["ci_high"] - r["ci_low"]) / 2
                                                     / r["estimand"] for r in intervals]))
        if bounds:
            row["bounds_hold"] = float(np.mean([r["ci_low"] <= r["estimand"] for r in bounds]))
        rows.append(row)
    return rows


def _cell(value, fmt):
    return "—" if value is None or (isinstance(value, float) and math.isnan(value)) \
        else format(value, fmt)


def _percent(row, key, fmt=".0f"):
    return _cell(100 * row[key], fmt) + " %" if key in row else "—"


def tables(rows: list[dict]) -> str:
    """Markdown tables, one per estimator."""
    out = []
    for estimator, size_name in (("improved", "n"), ("direct", "R")):
        part = [r for r in rows if r["estimator"] == estimator]
        if not part:
            continue
        out.append(f"**{estimator}**\n")
        out.append(f"| noise | {size_name} | EPL (estimand) | number | bound | undefined | "
                   f"bias (± se) | rmse | coverage | inside | half-width | bounds hold |")
        out.append("|---|---|---|---|---|---|---|---|---|---|---|---|")
        for r in part:
            noise = (f"geometric z = {r['parameter']:g}" if r["family"] == "geometric"
                     else f"discrete Gaussian σ = {r['parameter']:g}")
            bias = (f"{100 * r['bias']:+.1f} % (± {100 * r['bias_se']:.1f})"
                    if "bias" in r and not math.isnan(r.get("bias_se", math.nan))
                    else _cell(100 * r["bias"], "+.1f") + " %" if "bias" in r else "—")
            out.append(
                f"| {noise} | {r['size']:,} | {_cell(r['estimand'], '.4g')} | "
                f"{_percent(r, 'numbers')} | {_percent(r, 'bounds')} | "
                f"{_percent(r, 'undefined')} | {bias} | {_percent(r, 'rmse', '.1f')} | "
                f"{_percent(r, 'coverage')} | {_percent(r, 'inside')} | "
                f"{_percent(r, 'half_width', '.1f')} | {_percent(r, 'bounds_hold')} |")
        with_intervals = [r for r in part if "coverage" in r]
        covered = sum(round(r["coverage"] * r["seeds"] * r["numbers"]) for r in with_intervals)
        reported = sum(round(r["seeds"] * r["numbers"]) for r in with_intervals)
        if reported:
            out.append(f"\nPooled over the cases: {covered} of {reported} intervals cover "
                       f"({100 * covered / reported:.1f} %); every estimate lies inside its "
                       f"interval: {all(r.get('inside', 1) == 1 for r in part)}.")
        bounded = sum(round(r["seeds"] * r["bounds"]) for r in part)
        if bounded:
            held = sum(round(r["bounds_hold"] * r["seeds"] * r["bounds"]) for r in part
                       if "bounds_hold" in r)
            failed = bounded - held
            total = sum(r["seeds"] for r in part if r["bounds"] > 0)
            out.append(f"{held} of {bounded} one-sided bounds hold ({100 * held / bounded:.1f} "
                       f"%); over every result of the cases that gave a bound, {failed} of "
                       f"{total} bounds lie above the estimand ({100 * failed / total:.1f} %).")
        out.append("")
    return "\n".join(out)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, default=100)
    parser.add_argument("--out", default="benchmarks/epl_study")
    parser.add_argument("--quick", action="store_true",
                        help="geometric z = 0.05 and 1 only, n = 200,000, R = 50,000")
    parser.add_argument("--only", choices=("improved", "direct"),
                        help="run one estimator's cases; with --keep, the other's records come "
                             "from an earlier study's epl_study.json")
    parser.add_argument("--keep", metavar="JSON",
                        help="an earlier epl_study.json whose records of the estimator not "
                             "run (--only) are kept in the tables")
    args = parser.parse_args(argv)
    if args.keep and not args.only:
        parser.error("--keep needs --only (which estimator to run again)")
    options = {}
    if args.quick:
        options = dict(sizes=(200_000,), runs=(50_000,), geometric=(0.05, 1.0), gaussian=())
    if args.only == "improved":
        options["runs"] = ()
    elif args.only == "direct":
        options["sizes"] = ()
    started = time.perf_counter()
    records = run(args.seeds, **options, log=lambda m: print(m, file=sys.stderr, flush=True))
    seconds = time.perf_counter() - started
    if args.keep:
        kept = json.loads(Path(args.keep).read_text())["records"]
        records = [r for r in kept if r["estimator"] != args.only] + records
    rows = summarise(records)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    meta = {"seeds": args.seeds, "seconds": round(seconds, 1), "python": platform.python_version(),
            "numpy": np.__version__, "command": "python benchmarks/bench_epl_study.py "
            + " ".join(argv if argv is not None else sys.argv[1:])}
    (out / "epl_study.json").write_text(json.dumps({"meta": meta, "summary": rows,
                                                    "records": records}))
    text = tables(rows) + f"\n{args.seeds} seeds per case; {seconds / 60:.1f} minutes.\n"
    (out / "epl_study.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
