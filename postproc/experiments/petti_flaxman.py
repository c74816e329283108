"""Petti & Flaxman (2020): accuracy and empirical privacy loss of TopDown on 1940-style data.

Synthetic 1940-style persons and units (``hierarchy.synth``), the E2E budget split, geometric
noise and the E2E spec (``tot`` invariant at nation and state, units data at the ED), TopDown at
every ε ∈ {0.25, 0.5, 0.75, 1, 2, 4, 8} with several seeds. For the total count (TC, query
``total``) and the stratified count (SC, ``va_hisp_race``) of every level:

* MAE (median absolute error, the mean over seeds) and EPL (improved estimator, errors of all
  seeds pooled: the seeds are independent draws of the same mechanism on the same data);
* the error distribution of ED totals with its EPL(x) curve;
* the MAE-vs-EPL trade-off of TopDown against simple random samples (SRS) of 5 %–95 % of persons
  weighted ``1/f``, and the SRS fraction whose MAE is closest to each ε's;
* the bias of ED totals by homogeneity index (number of empty cells of an ED's exact 24-cell
  ``va_hisp_race`` table);
* at one ε, TopDown against the raw measurements and the other post-processors of the same
  measurements (clipping, closed-form least squares) and bottom-up at the same ε
  (:func:`postproc.evaluate.compare_postprocessors`).

The nation and state totals are invariant, so their errors are all zero and their EPL undefined
(reported as such). The ε of the E2E budget is the *total* over four levels and three queries.

Two choices beyond the papers, both stated in the outputs:

* SC is also evaluated over the cells whose exact count is positive (``va_hisp_race>0``). Most of
  an ED's 24 cells are empty; TopDown (nonnegative) and SRS put most of those at exactly 0, so the
  pooled SC errors have a spike at 0 whose log ratio ``log f(0)/f(±1)`` dominates the EPL — it
  measures sparsity, not the mechanism. The positive cells are closer to exchangeable.
* SRS estimates live on a lattice of spacing ``1/f``; the improved estimator's kernel is widened to
  at least ``1/f`` for them (otherwise it measures the lattice: log ratios between lattice points
  and the gaps between them). SC's median absolute error is 0 or 1 (empty cells again), so SC is
  compared with SRS on the mean absolute error; TC on the MAE.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from hierarchy.budget import Budget
from hierarchy.measure import measure
from hierarchy.queries import e2e_workload, total
from hierarchy.randomness import Randomness
from hierarchy.schema import E2E_1940
from invariants.spec import Spec
from postproc.baselines import srs
from postproc.epl import default_bandwidth, improved_epl, published_epl
from postproc.experiments._common import (E2E_LEVELS, Output, epsilon_color, legend_if_any,
                                          method_style, new_figure, plain_log_axis,
                                          synthetic_truth)
from postproc.metrics import bias_by_homogeneity, error_metrics, homogeneity_index

NAME = "petti_flaxman"
TITLE = "Petti & Flaxman (2020): TopDown error and empirical privacy loss on 1940-style data"

LEVELS = E2E_LEVELS
QUERIES = {"total": "TC (total)", "va_hisp_race": "SC (va_hisp_race, all cells)",
           "va_hisp_race>0": "SC (va_hisp_race, cells with exact > 0)"}
#: The error measure each query is compared on (SC's median |error| is 0 or 1: empty cells).
MEASURE = {"total": "mae", "va_hisp_race": "mean_abs", "va_hisp_race>0": "mean_abs"}
MEASURE_LABEL = {"mae": "MAE (median |error|), persons", "mean_abs": "mean |error|, persons"}

FULL = {"persons": 20_000_000, "data_seed": 1940, "seeds": [1, 2],
        "epsilons": [0.25, 0.5, 0.75, 1.0, 2.0, 4.0, 8.0], "show_epsilon": 1.0,
        "srs_fractions": [round(0.05 * k, 2) for k in range(1, 20)], "n_boot": 100,
        "compare_epsilon": 1.0, "executor": "serial", "workers": None}
QUICK = {"persons": 100_000, "data_seed": 1940, "seeds": [1, 2], "epsilons": [0.5, 2.0],
         "show_epsilon": 2.0, "srs_fractions": [0.1, 0.5, 0.9], "n_boot": 20,
         "compare_epsilon": 2.0, "executor": "serial", "workers": None}


def _summarise(errors: dict, exact: dict, n_boot: int, rnd: Randomness,
               lattice: dict | None = None) -> tuple[list, dict]:
    """Rows of metrics per (key, level, query) and the pooled EPL estimates.

    ``lattice`` maps a key to the spacing of its errors (SRS: ``1/f``); the kernel is at least
    that wide.
    """
    rows, estimates = [], {}
    for i, (key, per_seed) in enumerate(errors.items()):
        *label, level, query = key
        maes = [error_metrics(e, np.zeros_like(e))["mae"] for e in per_seed]
        pooled = np.concatenate(per_seed)
        metrics = error_metrics(pooled, np.zeros_like(pooled))
        options: dict[str, Any] = {"n_boot": n_boot, "rng": rnd.child(i)}
        spacing = (lattice or {}).get(key)
        if spacing and pooled.size > 1 and np.ptp(pooled) > 0:
            options["bandwidth"] = max(default_bandwidth(pooled), spacing)
        estimate = improved_epl(pooled, **options)
        estimates[key] = estimate
        rows.append({"key": tuple(label), "level": level, "query": query,
                     "units": exact[(level, "total")].shape[0], "n": pooled.size,
                     "mae": float(np.mean(maes)), "mae_sd": float(np.std(maes, ddof=1))
                     if len(maes) > 1 else float("nan"),
                     "mean_abs": metrics["mean_abs"], "rmse": metrics["rmse"],
                     "p95_abs": metrics["p95_abs"], "epl": estimate.epl,
                     "epl_ci_low": estimate.ci_low, "epl_ci_high": estimate.ci_high,
                     "epl_bandwidth": estimate.parameters.get("bandwidth"),
                     "epl_reason": estimate.reason, "epl_published": published_epl(pooled).epl,
                     "exact_median": float(np.median(exact[(level, query)]))})
    return rows, estimates


def _query_errors(answers: np.ndarray, exact: np.ndarray, query: str) -> np.ndarray:
    """Errors of one query, pooled over units and cells (``>0``: cells with a positive count)."""
    error = (answers - exact).astype(np.float64)
    if query.endswith(">0"):
        return error[exact > 0]
    return error.ravel()


def run(out: Output, *, quick: bool = False, **overrides: Any) -> dict[str, Any]:
    """Run the analysis into ``out``; return the parameters and headline numbers.

    Parameters
    ----------
    out : Output
    quick : bool
        The small, fast variant (CI).
    **overrides
        Any parameter of :data:`FULL` / :data:`QUICK`.

    Returns
    -------
    dict
    """
    from postproc.executors import get_executor
    from postproc.topdown import topdown

    params = {**(QUICK if quick else FULL), **overrides}
    truth = synthetic_truth(params)
    workload = e2e_workload(E2E_1940)
    spec = Spec.e2e(LEVELS)
    publish = {"tot": LEVELS[:2], "gqhh": LEVELS[-1:]}
    units = {lv: truth.geography.n_units(lv) for lv in LEVELS}
    out.log(f"{NAME}: {params['persons']:,} persons; units {units}")
    queries = {"total": total(E2E_1940), "va_hisp_race": workload["va_hisp_race"],
               "va_hisp_race>0": workload["va_hisp_race"]}
    exact = {(lv, q): query.answer(truth.counts[li]) for li, lv in enumerate(LEVELS)
             for q, query in queries.items()}
    errors: dict[tuple, list[np.ndarray]] = {}
    ed_totals: dict[float, list[np.ndarray]] = {}
    seconds = []
    compared = None
    with get_executor(params["executor"], workers=params["workers"]) as executor:
        for ei, epsilon in enumerate(params["epsilons"]):
            for seed in params["seeds"]:
                rnd = Randomness.simulation(int(seed)).child(ei)
                noisy = measure(truth, workload, Budget.e2e(epsilon, LEVELS), "geometric",
                                rng=rnd, publish=publish)
                result = topdown(noisy, spec, executor=executor)
                seconds.append(result.provenance["timings"]["total"])
                for li, lv in enumerate(LEVELS):
                    for q, query in queries.items():
                        e = _query_errors(query.answer(result.histograms[li]), exact[(lv, q)], q)
                        errors.setdefault((float(epsilon), lv, q), []).append(e)
                ed_totals.setdefault(float(epsilon), []).append(result.histograms[-1].sum(1))
                if float(epsilon) == float(params["compare_epsilon"]) and compared is None:
                    compared = (noisy, result, int(seed))
            out.log(f"  ε = {epsilon:g}: TopDown × {len(params['seeds'])} "
                    f"({np.mean(seconds[-len(params['seeds']):]):.1f} s each)")
    rnd = Randomness.simulation(int(params["data_seed"]))
    rows, estimates = _summarise(errors, exact, int(params["n_boot"]), rnd.child(1))
    topdown_table = pd.DataFrame(rows)
    topdown_table.insert(0, "epsilon", [k[0] for k in topdown_table.pop("key")])
    out.table("topdown_metrics", topdown_table,
              f"TopDown per ε, level and query: MAE (median absolute error, mean over "
              f"{len(params['seeds'])} seeds, with its sd), mean absolute error, RMSE, 95th "
              f"percentile of |error|, and EPL (improved estimator on the errors of all seeds "
              f"pooled, 95% bootstrap interval, kernel sd epl_bandwidth; inf = undefined, "
              f"epl_reason says why) with the published estimator's value for comparison. "
              f"va_hisp_race>0 pools only the cells whose exact count is positive.")
    # simple random samples
    srs_errors: dict[tuple, list[np.ndarray]] = {}
    lattice: dict[tuple, float] = {}
    for fi, fraction in enumerate(params["srs_fractions"]):
        for seed in params["seeds"]:
            est = srs(truth, float(fraction), rng=Randomness.simulation(int(seed)).child(100, fi))
            for li, lv in enumerate(LEVELS[1:], start=1):
                for q, query in queries.items():
                    e = _query_errors(query.answer(est.histograms[li]), exact[(lv, q)], q)
                    srs_errors.setdefault((float(fraction), lv, q), []).append(e)
                    lattice[(float(fraction), lv, q)] = 1.0 / float(fraction)
    out.log(f"  SRS at {len(params['srs_fractions'])} fractions × {len(params['seeds'])} seeds")
    rows, _ = _summarise(srs_errors, exact, int(params["n_boot"]), rnd.child(2), lattice)
    srs_table = pd.DataFrame(rows)
    srs_table.insert(0, "fraction", [k[0] for k in srs_table.pop("key")])
    out.table("srs_metrics", srs_table,
              "Simple random samples of persons (without replacement, weighted 1/f) per "
              "fraction, level and query: the same metrics as TopDown's; the EPL kernel is at "
              "least 1/f wide (SRS errors lie on a lattice of that spacing).")
    closest = _closest_srs(topdown_table, srs_table)
    out.table("closest_srs", closest,
              "For each ε, level and query: the SRS fraction whose error is closest to "
              "TopDown's (matched_on: MAE for TC, mean |error| for SC) — the grid point, and "
              "the fraction interpolated linearly in log error (empty when TopDown is outside "
              "the SRS range: better than 95 % or worse than 5 %) — with the SRS's error and "
              "EPL at the grid point.")
    bias = _bias(truth, ed_totals, exact)
    out.table("bias_by_homogeneity", bias,
              "Bias (mean DP − exact) of ED totals by homogeneity index (number of zero cells "
              "of the ED's exact 24-cell va_hisp_race table), seeds pooled, with its standard "
              "error.")
    _figure_levels(out, topdown_table, params["epsilons"])
    show = float(params["show_epsilon"])
    key = (show, "enum_dist", "total")
    if key in errors:
        _figure_distribution(out, np.concatenate(errors[key]), estimates[key], show)
    _figure_tradeoff(out, topdown_table, srs_table)
    _figure_bias(out, bias)
    if compared is not None:
        _comparison(out, truth, *compared, float(params["compare_epsilon"]),
                    int(params["n_boot"]))
    headline = _headline(topdown_table, closest, bias)
    headline["topdown_seconds_mean"] = float(np.mean(seconds))
    return {"parameters": {**params, "units": units}, "headline": headline,
            "notes": ["nation and state totals are invariant (E2E spec): their errors are 0 and "
                      "their EPL is undefined."]}


def _comparison(out: Output, truth, noisy, result, seed: int, epsilon: float,
                n_boot: int) -> None:
    from postproc.evaluate import compare_postprocessors

    table = compare_postprocessors(noisy, truth, topdown=result, rng=seed,
                                   queries=["total", "va_hisp_race", "detailed"],
                                   epl_options={"n_boot": n_boot})
    out.table("comparison", table,
              f"At ε = {epsilon:g} (seed {seed}): the raw measurements, nonnegative clipping of "
              f"the detailed measurements, closed-form least squares (Hay et al., generalised; "
              f"with and without clipping), TopDown, and bottom-up with the same total ε (its "
              f"own measurement; raw and calibrated additively to the published state totals), "
              f"each against the truth per level and query: error metrics and EPL.")
    methods = list(dict.fromkeys(table["method"]))
    panels = [("county", "total"), ("enum_dist", "total"), ("enum_dist", "va_hisp_race")]
    fig, axes = new_figure(len(panels), 1, width=4.4, height=4.0)
    for ax, (level, query) in zip(axes[0], panels):
        part = table[(table["level"] == level) & (table["query"] == query)]
        part = part.set_index("method").reindex(methods)
        values = part["mean_abs"].to_numpy()
        shown = np.where(values > 1e-6, values, np.nan)        # 0 up to float rounding: no bar
        ax.bar(range(len(methods)), shown, color=[method_style(m)["color"] for m in methods])
        ax.set_yscale("log")
        floor = np.nanmin(shown) / 3 if np.isfinite(shown).any() else 0.1
        ax.set_ylim(bottom=floor)
        ax.set_xticks(range(len(methods)), methods, rotation=40, ha="right", fontsize=8)
        ax.set_ylabel("mean |error|, persons (log scale)")
        ax.set_title(f"{level}: {query}", fontsize=10)
        ax.grid(True, axis="y", which="both", alpha=0.3)
        for i, value in enumerate(values):
            ax.annotate(f"{value:.3g}" if value > 1e-6 else "0 (exact)",
                        (i, value if value > 1e-6 else floor), ha="center", va="bottom",
                        fontsize=7, textcoords="offset points", xytext=(0, 2))
    out.figure("comparison", fig,
               f"Mean absolute error of each post-processor of the same ε = {epsilon:g} "
               f"measurements (bottom-up: its own measurement at the same ε), log scale. "
               f"Clipping the noisy detailed cells inflates every empty cell, so its totals are "
               f"far off; least squares is consistent but leaves negative cells; TopDown is "
               f"consistent, nonnegative and holds the invariants.")


def _closest_srs(topdown_table: pd.DataFrame, srs_table: pd.DataFrame) -> pd.DataFrame:
    rows = []
    for _, row in topdown_table.iterrows():
        measure = MEASURE[row["query"]]
        grid = srs_table[(srs_table["level"] == row["level"])
                         & (srs_table["query"] == row["query"])].sort_values("fraction")
        if grid.empty or not row[measure] > 0:
            continue
        values = np.maximum(grid[measure].to_numpy(), 1e-9)
        best = grid.iloc[int(np.argmin(np.abs(np.log(values) - np.log(row[measure]))))]
        decreasing, fractions = values[::-1], grid["fraction"].to_numpy()[::-1]
        inside = bool(decreasing.min() <= row[measure] <= decreasing.max())
        interpolated = float(np.interp(np.log(row[measure]), np.log(decreasing), fractions)) \
            if inside else float("nan")
        rows.append({"epsilon": row["epsilon"], "level": row["level"], "query": row["query"],
                     "matched_on": measure, "topdown_error": row[measure],
                     "topdown_epl": row["epl"], "closest_fraction": best["fraction"],
                     "interpolated_fraction": interpolated, "srs_error": best[measure],
                     "srs_epl": best["epl"], "within_srs_range": inside})
    return pd.DataFrame(rows)


def _bias(truth, ed_totals: dict, exact: dict) -> pd.DataFrame:
    index = homogeneity_index(exact[("enum_dist", "va_hisp_race")])
    exact_total = exact[("enum_dist", "total")].ravel()
    frames = []
    for epsilon, runs in ed_totals.items():
        dp = np.concatenate(runs)
        table = bias_by_homogeneity(dp, np.tile(exact_total, len(runs)),
                                    np.tile(index, len(runs)))
        table.insert(0, "epsilon", epsilon)
        frames.append(table)
    return pd.concat(frames, ignore_index=True)


def _headline(topdown_table: pd.DataFrame, closest: pd.DataFrame, bias: pd.DataFrame) -> dict:
    out: dict[str, Any] = {}
    for _, r in topdown_table.iterrows():
        if r["level"] in ("county", "enum_dist") and r["query"] in ("total", "va_hisp_race>0"):
            tag = f"{r['level']}/{r['query']}@{r['epsilon']:g}"
            out[f"{MEASURE[r['query']]} {tag}"] = r[MEASURE[r["query"]]]
            out[f"epl {tag}"] = r["epl"]
    for _, r in closest.iterrows():
        if r["level"] == "enum_dist" and r["query"] == "total":
            out[f"closest SRS fraction enum_dist/total@{r['epsilon']:g}"] = (
                r["interpolated_fraction"] if r["within_srs_range"] else
                f">{r['closest_fraction']:g}" if r["closest_fraction"] > 0.5 else
                f"<{r['closest_fraction']:g}")
    for epsilon, part in bias.groupby("epsilon"):
        lo, hi = part.iloc[0], part.iloc[-1]
        out[f"bias enum_dist total@{epsilon:g}: index {int(lo['homogeneity_index'])} / "
            f"{int(hi['homogeneity_index'])}"] = f"{lo['bias']:.1f} / {hi['bias']:.1f}"
    return out


def _whiskers(rows: pd.DataFrame) -> list[np.ndarray]:
    """Error bars of EPL intervals on a log axis: a lower end at 0 is drawn at a tenth."""
    epl = rows["epl"].to_numpy()
    low = np.maximum(np.nan_to_num(rows["epl_ci_low"].to_numpy(), nan=np.inf), epl / 10)
    low = np.minimum(low, epl)
    high = np.maximum(np.nan_to_num(rows["epl_ci_high"].to_numpy(), nan=-np.inf), epl)
    return [np.maximum(epl - low, 0), high - epl]


def _level_colors():
    return {"state": "#2ca02c", "county": "#1f77b4", "enum_dist": "#d62728", "nation": "#555555"}


def _figure_levels(out: Output, table: pd.DataFrame, epsilons) -> None:
    fig, axes = new_figure(3, 2, width=4.6, height=4.0)
    colors = _level_colors()
    for col, (query, label) in enumerate(QUERIES.items()):
        measure = MEASURE[query]
        part = table[table["query"] == query]
        err_ax, epl_ax = axes[0, col], axes[1, col]
        epl_ax.plot(epsilons, epsilons, color="black", ls="--", lw=1, label="EPL = ε")
        for level in LEVELS[1:]:
            rows = part[part["level"] == level].sort_values("epsilon")
            style = {"color": colors[level], "marker": "o", "ms": 4, "capsize": 2}
            positive = rows[rows[measure] > 0]
            if not positive.empty:
                spread = positive["mae_sd"].fillna(0) if measure == "mae" else None
                err_ax.errorbar(positive["epsilon"], positive[measure], yerr=spread,
                                label=level, **style)
            finite = rows[np.isfinite(rows["epl"])]
            if not finite.empty:
                epl_ax.errorbar(finite["epsilon"], finite["epl"], yerr=_whiskers(finite),
                                label=level, **style)
        for ax in (err_ax, epl_ax):
            plain_log_axis(ax, "both", ticks=epsilons)
            ax.grid(True, which="both", alpha=0.3)
            ax.set_xlabel("total privacy budget ε (E2E split)")
            legend_if_any(ax, fontsize=8)
        err_ax.set_ylabel(MEASURE_LABEL[measure])
        err_ax.set_title(label, fontsize=10)
        epl_ax.set_ylabel("EPL (improved estimator)")
    out.figure("mae_epl_by_level", fig,
               "TopDown's error (top: MAE with its sd over seeds for the totals, mean |error| "
               "for va_hisp_race) and EPL (bottom, 95% bootstrap intervals) against ε, per "
               "level. Nation and state totals are invariant (no error, EPL undefined) and not "
               "drawn; neither are undefined EPLs (too few, too spread errors: county totals "
               "at small ε; intervals reaching 0 are cut at a tenth of the estimate). Over all "
               "cells, va_hisp_race's EPL is dominated by the spike of exact zeros in empty "
               "cells; over the cells with people it is far lower.")


def _figure_distribution(out: Output, errors: np.ndarray, estimate, epsilon: float) -> None:
    fig, axes = new_figure(1, 2, width=7.0, height=3.4, sharex=True)
    hist_ax, curve_ax = axes[0, 0], axes[1, 0]
    reach = np.percentile(np.abs(errors), 99.5)
    edges = np.arange(-np.ceil(reach) - 0.5, np.ceil(reach) + 1.0, 1.0)
    counts, edges = np.histogram(errors, bins=edges)
    centers = (edges[:-1] + edges[1:]) / 2
    hist_ax.step(centers, np.where(counts > 0, counts, np.nan), where="mid", color="#d62728")
    hist_ax.set_yscale("log")
    hist_ax.set_ylabel("EDs (log scale)")
    hist_ax.set_title(f"TopDown errors of ED totals at ε = {epsilon:g} (seeds pooled, "
                      f"n = {errors.size:,})")
    hist_ax.grid(True, alpha=0.3)
    if estimate.x.size:
        curve_ax.plot(estimate.x, estimate.epl_x, color="#d62728", marker="o", ms=2, lw=1,
                      label=f"EPL(x); EPL = max |EPL(x)| = {estimate.epl:.3f}")
    curve_ax.axhline(estimate.epl if np.isfinite(estimate.epl) else 0, color="#d62728", lw=0.8,
                     ls=":")
    curve_ax.axhline(0, color="black", lw=0.6)
    curve_ax.set_xlabel("error x (DP − exact) of an ED total, persons")
    curve_ax.set_ylabel("EPL(x) = log f(x)/f(x+1)")
    curve_ax.grid(True, alpha=0.3)
    curve_ax.legend(fontsize=8, loc="upper left")
    out.figure("error_distribution", fig,
               f"Distribution of the errors of ED total counts at ε = {epsilon:g} (top, log "
               f"scale) and the log ratio of neighbouring error densities where the improved "
               f"estimator can resolve it (bottom); the EPL is its largest absolute value.")


def _figure_tradeoff(out: Output, topdown_table: pd.DataFrame, srs_table: pd.DataFrame) -> None:
    queries = ["total", "va_hisp_race>0"]
    fig, axes = new_figure(len(queries), 2, width=5.6, height=4.4)
    for row, level in enumerate(["county", "enum_dist"]):
        for col, query in enumerate(queries):
            ax, measure = axes[row, col], MEASURE[query]
            both = pd.concat([t[(t["level"] == level) & (t["query"] == query)]
                              for t in (topdown_table, srs_table)])
            # the improved estimator where it is defined for most points; else the published
            column = "epl" if np.isfinite(both["epl"]).mean() >= 0.5 else "epl_published"
            for name, table, key, fmt in (("topdown", topdown_table, "epsilon", "ε={:g}"),
                                          ("srs", srs_table, "fraction", "{:.0%}")):
                part = table[(table["level"] == level) & (table["query"] == query)
                             & np.isfinite(table[column]) & (table[measure] > 0)]
                part = part.sort_values(key).assign(epl=lambda f: f[column])
                if part.empty:
                    continue
                style = method_style(name)
                ax.plot(part["epl"], part[measure], lw=1.3, ms=4, **style,
                        label="TopDown (ε)" if name == "topdown" else "SRS (sampling fraction)")
                step = 1 if name == "topdown" else 3
                for _, r in part.iloc[::step].iterrows():
                    ax.annotate(fmt.format(r[key]), (r["epl"], r[measure]), fontsize=7,
                                textcoords="offset points",
                                xytext=(5, 4) if name == "topdown" else (-6, -11),
                                color=style["color"])
            plain_log_axis(ax, "both")
            ax.grid(True, which="both", alpha=0.3)
            ax.set_xlabel("EPL (improved estimator)" if column == "epl" else
                          "EPL (published estimator: the improved one is undefined here)")
            ax.set_ylabel(MEASURE_LABEL[measure])
            ax.set_title(f"{level}: {QUERIES[query]}", fontsize=10)
            legend_if_any(ax, fontsize=8)
    out.figure("tradeoff", fig,
               "Error against empirical privacy loss: TopDown over ε (red) and simple random "
               "samples over the sampling fraction (grey), for county and ED totals (left) and "
               "va_hisp_race counts of cells with people (right). Down and left is better. "
               "A panel whose improved EPL is undefined for most points (county totals: 936 "
               "errors spread over hundreds of persons never reach the estimator's density "
               "floor) uses the published estimator instead, as its x label says.")


def _figure_bias(out: Output, bias: pd.DataFrame) -> None:
    fig, axes = new_figure(1, 2, width=7.0, height=3.2, sharex=True,
                           gridspec_kw={"height_ratios": [3, 1]})
    ax, count_ax = axes[0, 0], axes[1, 0]
    epsilons = sorted(bias["epsilon"].unique())
    for i, epsilon in enumerate(epsilons):
        part = bias[bias["epsilon"] == epsilon]
        color = epsilon_color(i, len(epsilons))
        offset = (i - (len(epsilons) - 1) / 2) * 0.08
        ax.errorbar(part["homogeneity_index"] + offset, part["bias"],
                    yerr=1.96 * part["se"].fillna(0), color=color, marker="o", ms=3, lw=1,
                    capsize=1.5, label=f"ε = {epsilon:g}")
    ax.axhline(0, color="black", lw=0.8)
    ax.set_ylabel("bias of ED total\n(mean DP − exact), persons")
    ax.set_title("Bias of ED totals by homogeneity index (bars: 95% intervals)")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7, ncol=4)
    first = bias[bias["epsilon"] == epsilons[0]]
    count_ax.bar(first["homogeneity_index"], first["n"], color="#999999")
    count_ax.set_yscale("log")
    count_ax.set_ylabel("EDs × seeds")
    count_ax.set_xlabel("homogeneity index (zero cells of the exact 24-cell va_hisp_race table)")
    count_ax.grid(True, alpha=0.3)
    out.figure("bias_by_homogeneity", fig,
               "Mean error of ED totals by homogeneity index for each ε (top; bars: 95% "
               "intervals) and how many ED results each index has (bottom, log scale). Diverse "
               "EDs (few empty cells) are undercounted, the more so the smaller ε; homogeneous "
               "EDs (many empty cells, the majority) are overcounted slightly. Nonnegativity "
               "raises empty cells, and with state totals invariant the excess comes out of "
               "the populated cells.")
