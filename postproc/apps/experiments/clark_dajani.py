"""Clark & Dajani (2019): error of the bottom-up mechanism against ε.

Bottom-up: two-sided geometric noise with the whole budget (``z = ε/Δ``) on every detailed cell
of every ED of synthetic 1940-style data; every county, state and national count is a sum of
noisy ED cells. ``Δ`` is the parameter ``sensitivity``: 1 by default — the paper's neighbours
add or delete one person, which changes one cell by 1 — or 2 for the E2E "change one record"
neighbours (one cell −1, another +1), whose noise is twice as wide at the same ε. For each ε and
seed, the L1 error (mean absolute error per answer) and L2 error (root mean squared error per
answer) of the total, ``va_hisp_race`` and ``detailed`` answers of every level — raw, and calibrated
to the published state totals either additively (least squares: every cell of a state shifted
equally) or proportionally (cells clipped at 0, then scaled). The raw errors have a closed form — an
answer summing ``m`` noisy cells has variance ``m·σ²`` — which the L2 figure overlays as a check.
The share of answers within ±k of the truth (k ∈ {0, 1, 5, 10}) is in the tables beside L1 and L2,
with its exact expectation for the raw mechanism (the law of a sum of ``m`` geometric draws), and
the paper's curve for choosing ε — L1 and the shares against ε, one line per level — is the
figure ``tradeoff`` (:mod:`postproc.evaluation.tradeoff`).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from hierarchy.histograms import Hierarchy
from hierarchy.mechanisms import get_mechanism
from hierarchy.queries import detailed, e2e_workload, total
from hierarchy.randomness import Randomness
from hierarchy.schema import E2E_1940
from postproc.apps.experiments._common import (
    E2E_LEVELS,
    Output,
    describe_grid,
    describe_units,
    merge_coinciding,
    new_figure,
    plain_log_axis,
    synthetic_truth,
)
from postproc.errors import PostprocError
from postproc.evaluation.metrics import error_metrics
from postproc.evaluation.tradeoff import DEFAULT_WITHIN, accuracy, expected_accuracy
from postproc.evaluation.tradeoff_outputs import plot_tradeoff
from postproc.gate import label_table
from postproc.methods.baselines import bottom_up, calibrate_to_totals

NAME = "clark_dajani"
TITLE = "Clark & Dajani (2019): bottom-up L1 and L2 error against ε"

LEVELS = E2E_LEVELS
FULL = {"persons": 20_000_000, "data_seed": 1940, "states": None, "seeds": [1, 2],
        "epsilons": [0.1, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0], "sensitivity": 1.0}
#: Three county-rich states of a 3-million-person nation (3 states, 13 counties, 313 EDs): several
#: units per parent at every level (``synthetic_truth``).
QUICK = {"persons": 3_000_000, "data_seed": 1940, "states": 3, "seeds": [1, 2],
         "epsilons": [0.5, 4.0], "sensitivity": 1.0}
COLORS = {"nation": "#555555", "state": "#2ca02c", "county": "#1f77b4", "enum_dist": "#d62728"}


def check_sensitivity(value: Any) -> float:
    """The sensitivity ``Δ`` of the noisy cells, checked: a positive, finite number.

    Parameters
    ----------
    value : int or float

    Returns
    -------
    float

    Raises
    ------
    PostprocError
        A value that is not a positive, finite number (booleans and strings included).

    Examples
    --------
    >>> check_sensitivity(2)
    2.0
    >>> check_sensitivity(0)
    Traceback (most recent call last):
    ...
    postproc.errors.PostprocError: sensitivity must be a positive, finite number (1: add or
    delete a person, the paper's neighbours; 2: change one person's record), not 0
    """
    ok = isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(
        value, (bool, np.bool_))
    if not ok or not (math.isfinite(value) and value > 0):
        raise PostprocError(f"sensitivity must be a positive, finite number (1: add or delete a "
                            f"person, the paper's neighbours; 2: change one person's record), "
                            f"not {value!r}")
    return float(value)


def check_parameters(params: dict[str, Any]) -> dict[str, Any]:
    """``params`` with its ``sensitivity`` checked (:func:`check_sensitivity`), if it has one.

    :func:`~postproc.apps.experiments.run_experiment` calls it before creating the output
    directory, so a bad value leaves nothing behind.

    Parameters
    ----------
    params : dict
        Experiment parameters (overrides of :data:`FULL` / :data:`QUICK`).

    Returns
    -------
    dict
        A copy, ``sensitivity`` as a float.

    Raises
    ------
    PostprocError
        A sensitivity that is not a positive, finite number.

    Examples
    --------
    >>> check_parameters({"sensitivity": 2, "seeds": [1]})
    {'sensitivity': 2.0, 'seeds': [1]}
    """
    if "sensitivity" not in params:
        return dict(params)
    return {**params, "sensitivity": check_sensitivity(params["sensitivity"])}


def run(out: Output, *, quick: bool = False, **overrides: Any) -> dict[str, Any]:
    """Run the analysis into ``out``; return the parameters and headline numbers.

    Parameters
    ----------
    out : Output
    quick : bool
        The small, fast variant (CI).
    **overrides
        Any parameter of :data:`FULL` / :data:`QUICK`; ``sensitivity`` is ``Δ`` of the noisy
        cells (default 1, :func:`check_sensitivity`).

    Returns
    -------
    dict
        ``parameters`` and ``headline`` (L1 errors of county and ED answers, and how far the
        observed L2 errors are from their closed form).

    Raises
    ------
    PostprocError
        A sensitivity that is not a positive, finite number.

    Examples
    --------
    One ε and one seed on two states (3 counties, 156 EDs):

    >>> import tempfile
    >>> out = Output(tempfile.mkdtemp(), NAME, TITLE, log=lambda m: None)
    >>> result = run(out, quick=True, persons=1_000_000, states=2, seeds=[1], epsilons=[1.0])
    >>> {k: round(v, 1) for k, v in result["headline"].items() if k.startswith("l1")}
    {'l1 county/total@1': 50.3, 'l1 county/va_hisp_race@1': 20.0,
     'l1 enum_dist/total@1': 14.7, 'l1 enum_dist/va_hisp_race@1': 3.0}
    >>> [t["file"] for t in out.tables]
    ['bottom_up_errors.csv', 'bottom_up_errors_by_seed.csv']
    """
    params = check_parameters({**(QUICK if quick else FULL), **overrides})
    sensitivity = params["sensitivity"]
    truth = synthetic_truth(params)
    per_seed = pd.DataFrame(_error_rows(out, truth, params))
    table = _error_table(out, per_seed, params)
    _figures(out, table, sensitivity)
    units = {lv: truth.geography.n_units(lv) for lv in LEVELS}
    ran = (f"Bottom-up at ε ∈ {describe_grid(params['epsilons'])} with seeds "
           f"{', '.join(str(s) for s in params['seeds'])} (sensitivity Δ = "
           f"{sensitivity:g}, noise z = ε/Δ) on {int(truth.counts[0].sum()):,} synthetic persons "
           f"({describe_units(units)}).")
    return {"parameters": {**params, "units": units}, "headline": _headline(table), "ran": ran}


def _error_rows(out: Output, truth: Hierarchy, params: dict[str, Any]) -> list[dict[str, Any]]:
    """Bottom-up, raw and calibrated to the state totals, at every ε and seed: one row of
    errors per method, ε, seed, level and query, with the raw mechanism's exact expected
    RMSE."""
    sensitivity = params["sensitivity"]
    workload = e2e_workload(E2E_1940)
    queries = {"total": total(E2E_1940), "va_hisp_race": workload["va_hisp_race"],
               "detailed": detailed(E2E_1940)}
    geo = truth.geography
    # cells summed by each answer: bottom-level units below each unit × cells per answer
    below = [np.bincount(_ancestor(geo, li), minlength=geo.n_units(li)) for li in range(4)]
    rows, expected = [], {}
    bottom = geo.levels[-1]
    for epsilon in params["epsilons"]:
        for seed in params["seeds"]:
            rnd = Randomness.simulation(int(seed)).child(int(round(1000 * float(epsilon))))
            raw = bottom_up(truth, float(epsilon), rnd, sensitivity=sensitivity,
                            workload=workload)
            # the mechanism's own parameter and variance, as the measurement recorded them
            measured = raw.provenance["noisy"]["parameters"][bottom]["detailed"]
            z, variance = float(measured["z"]), float(measured["variance"])
            variants = [("bottom_up", raw)] + [
                (f"bottom_up+{how}", calibrate_to_totals(raw, "state", truth.totals("state"),
                                                         method=how))
                for how in ("additive", "proportional")]
            for method, est in variants:
                for li, level in enumerate(LEVELS):
                    for qname, query in queries.items():
                        exact = query.answer(truth.counts[li])
                        dp = query.answer(est.histograms[li])
                        m = error_metrics(dp, exact)
                        cells = below[li] * (E2E_1940.size // query.n_answers)
                        key = (method, float(epsilon), level, qname)
                        if method == "bottom_up" and key not in expected:   # the exact law
                            expected[key] = _expected_shares(z, cells, exact.shape[1])
                        rows.append({"method": method, "epsilon": float(epsilon),
                                     "sensitivity": sensitivity, "z": z,
                                     "seed": int(seed), "level": level, "query": qname,
                                     "answers": exact.size, "l1": m["mean_abs"],
                                     "l2": m["rmse"], "mae": m["mae"],
                                     "l1_total": m["mean_abs"] * exact.size,
                                     "l2_total": m["rmse"] * np.sqrt(exact.size),
                                     "rmse_theory": float(np.sqrt(variance * cells.mean()))
                                     if method == "bottom_up" else float("nan"),
                                     **_shares(dp - exact),
                                     **expected.get(key, _expected_shares(None))})
        out.log(f"{NAME}: ε = {epsilon:g} done")
    return rows


def _shares(errors: np.ndarray) -> dict[str, float]:
    """The shares of answers within ±k of the truth, k in :data:`DEFAULT_WITHIN`."""
    return {k: v for k, v in accuracy(errors, within=DEFAULT_WITHIN).items()
            if k.startswith("within_")}


def _expected_shares(z: float | None, cells: np.ndarray | None = None,
                     answers: int = 1) -> dict[str, float]:
    """The raw mechanism's exact expected L1 and shares within ±k, for answers that sum
    ``cells`` noisy cells (one entry per unit, ``answers`` answers each); NaN without ``z``."""
    if z is None:
        return {"l1_theory": float("nan"),
                **{f"expected_within_{k}": float("nan") for k in DEFAULT_WITHIN}}
    law = expected_accuracy(get_mechanism("geometric"), z, np.repeat(cells, answers),
                            within=DEFAULT_WITHIN)
    return {"l1_theory": law["expected_l1"],
            **{k: v for k, v in law.items() if k.startswith("expected_within_")}}


def _error_table(out: Output, per_seed: pd.DataFrame, params: dict[str, Any]) -> pd.DataFrame:
    """The errors, mean over the seeds (``bottom_up_errors.csv``), and per seed
    (``bottom_up_errors_by_seed.csv``)."""
    sensitivity = params["sensitivity"]
    table = (per_seed.groupby(["method", "epsilon", "level", "query"], sort=False)
             .agg(sensitivity=("sensitivity", "first"), z=("z", "first"),
                  answers=("answers", "first"), l1=("l1", "mean"), l1_sd=("l1", "std"),
                  l2=("l2", "mean"), l2_sd=("l2", "std"), mae=("mae", "mean"),
                  l1_total=("l1_total", "mean"), l2_total=("l2_total", "mean"),
                  rmse_theory=("rmse_theory", "first"),
                  **{f"within_{k}": (f"within_{k}", "mean") for k in DEFAULT_WITHIN},
                  l1_theory=("l1_theory", "first"),
                  **{f"expected_within_{k}": (f"expected_within_{k}", "first")
                     for k in DEFAULT_WITHIN}).reset_index())
    out.table("bottom_up_errors", table,
              f"Bottom-up errors per ε, level and query, mean over {len(params['seeds'])} "
              f"seeds, noise z = ε/Δ with sensitivity Δ = {sensitivity:g} (columns sensitivity "
              f"and z: the mechanism's parameter as the measurement recorded it): L1 = mean "
              f"absolute error per answer, L2 = root mean squared error per "
              f"answer (and their sums over answers, l1_total and l2_total = √Σe²); "
              f"rmse_theory is the exact expected RMSE of the raw mechanism. The calibrated "
              f"variants hit the published state totals: additive (every cell of a state "
              f"shifted equally, least squares) or proportional (clipped at 0, then scaled). "
              f"within_k is the share of answers within ±k of the truth; l1_theory and "
              f"expected_within_k the raw mechanism's exact expectations (from the law of a "
              f"sum of m geometric draws).")
    out.table("bottom_up_errors_by_seed", per_seed, "The same, one row per seed.")
    return table


def _figures(out: Output, table: pd.DataFrame, sensitivity: float) -> None:
    """L1 and L2 errors against ε per level and query, and the calibrations' L1 errors."""
    _figure(out, table, "l1", "L1 error: mean |DP − exact| per answer", "l1_vs_epsilon",
            "Bottom-up L1 error (mean absolute error per answer) against ε for the total, "
            f"va_hisp_race and detailed answers of every level (log-log), noise z = ε/Δ with "
            f"Δ = {sensitivity:g}. Errors fall as 1/ε while the noise is wide, faster once "
            f"z > 1 (the geometric's mass piles up at 0), and grow as the square root of the "
            f"number of noisy ED cells an answer sums.")
    _figure(out, table, "l2", "L2 error: RMSE per answer", "l2_vs_epsilon",
            "Bottom-up L2 error (RMSE per answer) against ε, with the exact expected RMSE "
            "(√(m·Var), m noisy cells per answer) as dotted lines: the simulation sits on them.",
            theory=True)
    _figure_calibration(out, table)
    _figure_tradeoff(out, table, sensitivity)


def _figure_tradeoff(out: Output, table: pd.DataFrame, sensitivity: float) -> None:
    """The curve for choosing ε (:func:`postproc.evaluation.tradeoff_outputs.plot_tradeoff`):
    L1 and the shares within ±k of the raw mechanism, exact expectations dotted."""
    raw = table[table["method"] == "bottom_up"]
    curve = raw.assign(expected_l1=raw["l1_theory"],
                       expected_l2=raw["rmse_theory"])
    fig = plot_tradeoff(label_table(curve, "simulation"),
                        title="bottom-up (noisy ED cells and their sums)")
    out.figure("tradeoff", fig,
               "The paper's curve for choosing ε: the bottom-up mechanism's L1 error (mean "
               "absolute error per answer) and the share of answers within ±k of the truth "
               f"(k = {', '.join(str(k) for k in DEFAULT_WITHIN)}) against ε, one line per "
               f"level, for the total, va_hisp_race and detailed answers (noise z = ε/Δ, "
               f"Δ = {sensitivity:g}); dotted: the exact expectations from the law of a sum of "
               "m geometric draws. Small units reach the tolerances long before large ones: "
               "an answer's error grows with the square root of the cells it sums.")


def _headline(table: pd.DataFrame) -> dict[str, Any]:
    """The raw mechanism's L1 errors of county and ED totals and va_hisp_race answers, and how
    far its L2 errors are from their closed form at each level."""
    raw = table[table["method"] == "bottom_up"]
    headline = {f"l1 {r.level}/{r.query}@{r.epsilon:g}": r.l1 for r in raw.itertuples()
                if r.query in ("total", "va_hisp_race") and r.level in ("county", "enum_dist")}
    check = raw.dropna(subset=["rmse_theory"])
    for level in LEVELS:                    # a level's answers × seeds set the sampling noise
        part = check[check["level"] == level]
        headline[f"max |L2 / exact expected RMSE − 1| at {level}"] = float(
            np.max(np.abs(part["l2"] / part["rmse_theory"] - 1)))
    return headline


def _ancestor(geo, level_index: int) -> np.ndarray:
    """The unit of ``level_index`` above every bottom-level unit."""
    owner = np.arange(geo.n_units(-1))
    for li in range(geo.depth - 1, level_index, -1):
        owner = geo.parents[li][owner]
    return owner


def _figure(out: Output, table: pd.DataFrame, value: str, ylabel: str, name: str, caption: str,
            theory: bool = False) -> None:
    raw = table[table["method"] == "bottom_up"]
    queries = list(dict.fromkeys(raw["query"]))
    fig, axes = new_figure(len(queries), 1, width=4.6, height=4.2, sharey=False)
    for ax, query in zip(axes[0], queries):
        part = raw[raw["query"] == query]
        rows = {level: part[part["level"] == level].sort_values("epsilon") for level in LEVELS}
        # at small sizes a level can repeat the one above (one county per state): one line
        series = merge_coinciding({lv: (r["epsilon"].to_numpy(), r[value].to_numpy())
                                   for lv, r in rows.items()})
        for label, (x, y) in series.items():
            level = label.split(" = ")[0]
            ax.plot(x, y, marker="o", ms=4, color=COLORS[level], label=label)
            if theory:
                ax.plot(x, rows[level]["rmse_theory"], ls=":", lw=1.5, color=COLORS[level])
        plain_log_axis(ax, "both", ticks=sorted(part["epsilon"].unique()))
        ax.grid(True, which="both", alpha=0.3)
        ax.set_xlabel("privacy budget ε (all on the ED cells)")
        ax.set_ylabel(ylabel)
        ax.set_title(f"{query}")
        ax.legend(fontsize=8, title="level" + (" (dotted: exact)" if theory else ""),
                  title_fontsize=8)
    out.figure(name, fig, caption)


def _figure_calibration(out: Output, table: pd.DataFrame) -> None:
    fig, axes = new_figure(2, 1, width=5.4, height=4.4)
    styles = {"bottom_up": ("-", "raw"), "bottom_up+additive": ("--", "additive"),
              "bottom_up+proportional": (":", "clip + scale")}
    for ax, query in zip(axes[0], ["total", "va_hisp_race"]):
        for level in LEVELS[2:]:
            for method, (ls, name) in styles.items():
                rows = table[(table["method"] == method) & (table["query"] == query)
                             & (table["level"] == level)].sort_values("epsilon")
                # a calibrated level that is the calibration level itself (one county per
                # state) is exact: float dust, not a point on a log axis
                l1 = rows["l1"].where(rows["l1"] > 1e-6)
                exact = bool(len(rows)) and l1.isna().all()
                ax.plot(rows["epsilon"], l1, ls=ls, marker="o", ms=3, lw=1.4,
                        color=COLORS[level],
                        label=f"{level}, {name}" + (": 0 (exact)" if exact else ""))
        plain_log_axis(ax, "both", ticks=sorted(table["epsilon"].unique()))
        ax.grid(True, which="both", alpha=0.3)
        ax.set_xlabel("privacy budget ε")
        ax.set_ylabel("L1 error: mean |DP − exact| per answer")
        ax.set_title(f"{query}: calibration to published state totals", fontsize=10)
        ax.legend(fontsize=7, ncol=2)
    out.figure("calibration", fig,
               "Bottom-up L1 error of county and ED answers: raw (solid), calibrated to the "
               "published state totals additively (dashed; least squares, every cell of a "
               "state shifted equally) and by clipping at 0 then scaling (dotted). The additive "
               "shift is spread over so many cells that it barely moves county and ED errors; "
               "clipping inflates the many "
               "empty cells and the scaling takes that excess out of the populated ones, so "
               "clip-and-scale is far worse at small ε, above all for va_hisp_race.")
