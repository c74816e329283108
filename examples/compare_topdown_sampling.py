"""TopDown against top-down conditional sampling on synthetic 1940-style data: error and EPL.

Synthesize persons (default 100,000), tabulate nation → state → county → ED, measure the E2E
workload with the E2E budget (geometric noise) and the E2E invariants (total at nation and state;
housing units at the ED), then post-process the same noisy hierarchy three ways:

* ``topdown`` — :func:`postproc.methods.topdown.topdown` (least squares, then L1 rounding);
* ``sampled`` — :func:`postproc.methods.sampling.sample_topdown` with the detailed measurements only
  (the conditional mechanism of docs/conditional_sampling.md);
* ``sampled_all`` — the same sampler with every measured query in the law (``queries='all'``).

For every level and for the total count, the 24-cell ``va_hisp_race`` table and the detailed
cells the table gives the median absolute error (MAE), the mean absolute error, the RMSE and the
empirical privacy loss of the per-level errors (improved estimator, :func:`postproc.evaluation.epl
.estimate_epl`): a number, a lower bound ``≥ b`` when the errors pin the loss down only from
below, ``unbounded`` for a total the spec holds invariant (exact answers), ``undefined`` otherwise
(``comparison.csv`` says why in ``epl_note``).

Run::

    python examples/compare_topdown_sampling.py --out compare-out [--persons 100000]
        [--epsilon 1] [--seed 1940] [--sweeps 100] [--json]
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

from hierarchy.budget import Budget
from hierarchy.measurement import measure
from hierarchy.queries import e2e_workload
from hierarchy.schema import E2E_1940
from hierarchy.synth import synthesize_1940
from hierarchy.tabulation import tabulate
from invariants.spec import Spec
from postproc.evaluation.epl import epl_text, estimate_epl
from postproc.evaluation.metrics import error_metrics
from postproc.methods.sampling import sample_topdown
from postproc.methods.topdown import topdown

LEVELS = ["nation", "state", "county", "enum_dist"]
QUERIES = ("total", "va_hisp_race", "detailed")


def answers(hist: np.ndarray, query: str, workload) -> np.ndarray:
    if query == "total":
        return hist.sum(axis=1, keepdims=True)
    return workload[query].answer(hist)


def epl_of(errors: np.ndarray, seed: int, invariant: bool) -> dict:
    """The EPL columns of one row: the estimate (None unless a number), its lower end, its kind
    and its text; a total held invariant with every error 0 is unbounded (exact answers)."""
    errors = errors.ravel().astype(float)
    if invariant and not np.any(errors):
        return {"epl": None, "epl_low": None, "epl_kind": "unbounded", "epl_text": "unbounded",
                "epl_n": int(errors.size), "epl_note": "held invariant: every error is 0"}
    result = estimate_epl(errors, method="improved", n_boot=0, rng=seed)
    value, low = float(result.epl), float(result.ci_low)
    return {"epl": value if math.isfinite(value) else None,
            "epl_low": low if math.isfinite(low) else None, "epl_kind": result.kind,
            "epl_text": epl_text(value, low, float(result.ci_high)),
            "epl_n": int(result.n), "epl_note": result.reason or ""}


def comparison_table(truth, results: dict, workload, seed: int, spec: Spec) -> pd.DataFrame:
    rows = []
    for li, level in enumerate(LEVELS):
        held = {inv.name for inv in spec.invariants if level in spec.levels_of(inv, LEVELS)}
        exact_hist = truth.counts[li]
        for query in QUERIES:
            exact = answers(exact_hist, query, workload)
            for method, result in results.items():
                dp = answers(result.histograms[li], query, workload)
                m = error_metrics(dp, exact)
                rows.append({"level": level, "query": query, "method": method,
                             "units": int(exact.shape[0]), "mae": m["mae"],
                             "mean_abs": m["mean_abs"], "rmse": m["rmse"],
                             **epl_of(dp - exact, seed, query == "total" and "tot" in held)})
    return pd.DataFrame(rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default="compare-topdown-sampling-out")
    parser.add_argument("--persons", type=int, default=100_000)
    parser.add_argument("--epsilon", type=float, default=1.0, help="total ε (E2E split)")
    parser.add_argument("--seed", type=int, default=1940)
    parser.add_argument("--sweeps", type=int, default=100, help="sampler sweeps per level")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    data = synthesize_1940(args.persons, seed=args.seed)
    truth = tabulate(data.persons, schema=E2E_1940, levels=LEVELS, units=data.units)
    workload = e2e_workload(E2E_1940)
    spec = Spec.e2e(LEVELS)           # the data are checked against it before measuring
    noisy = measure(truth, workload, Budget.e2e(args.epsilon, LEVELS), "geometric",
                    rng=args.seed + 1, spec=spec)
    timings = {"setup": time.perf_counter() - t0}
    results = {}
    t0 = time.perf_counter()
    results["topdown"] = topdown(noisy, spec)
    timings["topdown"] = time.perf_counter() - t0
    for name, queries in (("sampled", "detailed"), ("sampled_all", "all")):
        t0 = time.perf_counter()
        results[name] = sample_topdown(noisy, spec, rng=args.seed + 2, sweeps=args.sweeps,
                                       queries=queries)
        timings[name] = time.perf_counter() - t0
    table = comparison_table(truth, results, workload, args.seed, spec)
    table.to_csv(out / "comparison.csv", index=False)
    wide = table.pivot_table(index=["level", "query"], columns="method",
                             values=["mae", "mean_abs", "rmse"], sort=False)
    wide.columns = [f"{m} {stat}" for stat, m in wide.columns]
    order = [f"{m} {s}" for s in ("mae", "mean_abs", "rmse") for m in results]
    wide = wide[[c for c in order if c in wide.columns]]
    epl = table.pivot(index=["level", "query"], columns="method", values="epl_text")
    for m in results:
        wide[f"{m} epl"] = epl.loc[wide.index, m]
    wide.to_csv(out / "comparison_wide.csv")
    acceptance = {k: v.provenance["sampler"]["acceptance"] for k, v in results.items()
                  if k != "topdown"}
    summary = {"persons": args.persons, "units": {lv: truth.geography.n_units(lv)
                                                  for lv in LEVELS},
               "epsilon": args.epsilon, "seed": args.seed, "sweeps": args.sweeps,
               "timings_seconds": timings, "sampler_acceptance": acceptance,
               "randomness": noisy.provenance["randomness"]["label"],
               "table": table.to_dict("records")}
    (out / "summary.json").write_text(json.dumps(summary, indent=2, default=float))
    if args.json:
        print(json.dumps(summary, indent=2, default=float))
        return 0
    print(noisy.provenance["randomness"]["label"])
    print(f"{args.persons:,} persons; units per level "
          f"{[truth.geography.n_units(lv) for lv in LEVELS]}; ε = {args.epsilon:g}; "
          f"seconds: " + ", ".join(f"{k} {v:.1f}" for k, v in timings.items()))
    print("(MAE = median absolute error; EPL = improved estimator: a number, '≥ b' a lower "
          "bound, 'unbounded' for exact invariant totals)")
    print(wide.to_string(float_format=lambda v: f"{v:.2f}", na_rep=""))
    print("comparison.csv says why an EPL is not a number (epl_note).")
    print(f"\noutputs in {out}/")
    return 0


if __name__ == "__main__":
    sys.exit(main())
