"""Clark & Dajani (2019), weighted data: the 1960 long-form special tabulation, synthetically.

The 1960 census asked its long-form items of a 25 % sample and published weighted estimates;
Clark & Dajani's example of weighted data is a special tabulation of sex × group quarters for
every county. Here (``docs/experiments.md``): synthetic persons in counties within states
(:func:`hierarchy.synth.longform1960.synthesize_long_form_1960`), a Poisson sample at rate 0.25
whose weights are 3–6 (mean 4), the weighted tabulation with a public cap on the weights
(:func:`hierarchy.weighted.tabulate_weighted`), and Clark & Dajani's bottom-up mechanism on it:
two-sided geometric noise with the whole budget on every county cell, ``z = ε/Δ`` with ``Δ`` the
cap (adding or removing one person changes one cell by their weight), states and nation as sums
(:func:`hierarchy.weighted.measure_weighted`).

The errors of county, state and national answers (totals and the 6 cells) are measured against
the **weighted truth** (the noise alone) and against the **full count** (noise and sampling error
together), with the sampling error alone beside them. The estimates are then calibrated to the
published state totals (the full-count totals) **where those are consistent** — the calibration
factor near 1 and the state total the sum of its published county totals
(:func:`postproc.methods.baselines.consistency.calibrate_consistent`) — and the states that are
not are reported, not calibrated. A few pairs of states are made inconsistent on purpose: a
boundary change moved persons between them after the county totals were fixed, so each
published state total is no longer the sum of its counties'. Calibrating them anyway (the third
method, ``calibrated everywhere``) shows what reporting them avoids.

The mechanism runs on the sample: its ε is amplified by the sampling
(:func:`hierarchy.accounting.amplify_poisson`, ``amplification.csv``) — for a person-level
Poisson sample, as drawn here; the 1960 sample was of housing units, for which the person-level
bound does not follow (``docs/accounting.md``).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from hierarchy.accounting import amplify_poisson
from hierarchy.histograms import Hierarchy
from hierarchy.randomness import Randomness
from hierarchy.synth.longform1960 import LONG_FORM_1960, synthesize_long_form_1960
from hierarchy.tabulation import tabulate
from hierarchy.weighted import WeightedHierarchy, measure_weighted, tabulate_weighted
from postproc.apps.experiments._common import (
    Output,
    describe_grid,
    describe_units,
    new_figure,
    plain_log_axis,
)
from postproc.errors import PostprocError
from postproc.evaluation.metrics import error_metrics
from postproc.methods.baselines.consistency import calibrate_consistent
from postproc.methods.baselines.reconcile import bottom_up_sums

NAME = "clark_dajani_1960"
TITLE = "Clark & Dajani (2019): weighted data, the 1960 long-form special tabulation"

LEVELS = ["nation", "state", "county"]
FULL = {"persons": 20_000_000, "states": 49, "counties": 3_100, "data_seed": 1960,
        "rate": 0.25, "cap": 6, "seeds": [1, 2, 3, 4],
        "epsilons": [0.1, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0], "boundary_pairs": 3,
        "boundary_share": 0.05, "band": 0.1}
#: Six states of 48 counties: two made inconsistent by a boundary change, four consistent.
QUICK = {"persons": 400_000, "states": 6, "counties": 48, "data_seed": 1960, "rate": 0.25,
         "cap": 6, "seeds": [1, 2], "epsilons": [0.5, 4.0], "boundary_pairs": 1,
         "boundary_share": 0.05, "band": 0.1}
METHODS = {"bottom_up": ("raw (bottom-up sums)", "#1f77b4", "-"),
           "bottom_up+calibrated": ("calibrated where consistent", "#2ca02c", "--"),
           "bottom_up+calibrated_everywhere": ("calibrated everywhere", "#d62728", ":")}
QUERIES = {"total": "total", "cells": "sex × group quarters"}


def check_parameters(params: dict[str, Any]) -> dict[str, Any]:
    """``params`` with the values this analysis reads checked (those given).

    Parameters
    ----------
    params : dict
        Overrides of :data:`FULL` / :data:`QUICK`.

    Returns
    -------
    dict
        A copy; ``cap``, ``rate``, ``band`` and ``boundary_share`` as floats.

    Raises
    ------
    PostprocError
        A cap that is not a positive finite number, a rate outside (0, 1], a negative band,
        a boundary share outside [0, 1) or a negative number of boundary pairs.

    Examples
    --------
    >>> check_parameters({"cap": 5, "seeds": [1]})
    {'cap': 5.0, 'seeds': [1]}
    >>> check_parameters({"rate": 2})
    Traceback (most recent call last):
    ...
    postproc.errors.PostprocError: rate must be a number in (0, 1], not 2
    """
    rules = {"cap": (lambda v: 0 < v < math.inf, "a positive, finite number"),
             "rate": (lambda v: 0 < v <= 1, "a number in (0, 1]"),
             "band": (lambda v: v >= 0, "a number ≥ 0"),
             "boundary_share": (lambda v: 0 <= v < 1, "a number in [0, 1)")}
    out = dict(params)
    for key, (ok, what) in rules.items():
        if key in out:
            value = out[key]
            number = isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(
                value, (bool, np.bool_))
            if not number or not ok(float(value)):
                raise PostprocError(f"{key} must be {what}, not {value!r}")
            out[key] = float(value)
    pairs = out.get("boundary_pairs", 0)
    if isinstance(pairs, bool) or not isinstance(pairs, (int, np.integer)) or pairs < 0:
        raise PostprocError(f"boundary_pairs must be an integer ≥ 0, not {pairs!r}")
    return out


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
        ``parameters``, ``headline``, ``ran`` and ``notes``.

    Raises
    ------
    PostprocError
        A bad parameter, or more boundary pairs than the states make.

    Examples
    --------
    >>> import tempfile
    >>> out = Output(tempfile.mkdtemp(), NAME, TITLE, log=lambda m: None)
    >>> result = run(out, quick=True, persons=100_000, seeds=[1], epsilons=[1.0])
    >>> result["headline"]["inconsistent states"]
    ['01', '02']
    >>> result["headline"]["inconsistent states left as they were"]
    True
    >>> [t["file"] for t in out.tables][:3]
    ['published_totals.csv', 'weights.csv', 'sample_error.csv']
    """
    params = check_parameters({**(QUICK if quick else FULL), **overrides})
    if 2 * params["boundary_pairs"] > params["states"]:
        raise PostprocError(f"{params['boundary_pairs']} boundary pairs need "
                            f"{2 * params['boundary_pairs']} states, not {params['states']}")
    data = synthesize_long_form_1960(params["persons"], states=params["states"],
                                     counties=params["counties"], seed=params["data_seed"],
                                     rate=params["rate"])
    full = tabulate(data.persons, schema=LONG_FORM_1960, levels=LEVELS)
    weighted = tabulate_weighted(data.sample, schema=LONG_FORM_1960, levels=LEVELS,
                                 weight="wt", cap=params["cap"], geography=full.geography)
    state_published, county_published = _published(out, full, params)
    _weights_table(out, data.sample, params["cap"], weighted)
    sample = _sample_error(out, full, weighted)
    rows, reports = _runs(out, full, weighted, state_published, county_published, params)
    table = _error_table(out, pd.DataFrame(rows), params)
    inconsistent = _inconsistent_table(out, reports)
    amplified = _amplification(out, params)
    _figure(out, table, sample, params)
    units = {lv: full.geography.n_units(lv) for lv in LEVELS}
    ran = (f"Bottom-up geometric noise on the weighted county cells (sex × group quarters) at "
           f"ε ∈ {describe_grid(params['epsilons'])} with seeds "
           f"{', '.join(str(s) for s in params['seeds'])}, Δ = cap = {params['cap']:g}, on a "
           f"{params['rate']:g} sample ({data.sample.num_rows:,} records) of "
           f"{data.persons.num_rows:,} synthetic persons ({describe_units(units)}); "
           f"{2 * params['boundary_pairs']} states made inconsistent by boundary changes.")
    headline = _headline(table, sample, inconsistent, reports, weighted, amplified)
    notes = ["Clark & Dajani's text is not available to us: the tabulation, the calibration and "
             "the consistency rule follow the toolkit's issue's description of the paper, and "
             "the data are synthetic (no 1960 figures).",
             "The sample is person-level Poisson; the 1960 sample was of housing units, a "
             "cluster sample of persons, for which the amplified ε does not follow.",
             "Each weight is drawn for its own record; weights adjusted on the sample itself "
             "would change with other records, which the sensitivity Δ = cap does not cover."]
    return {"parameters": {**params, "units": units, "sample_records": data.sample.num_rows},
            "headline": headline, "ran": ran, "notes": notes}


def _published(out: Output, full: Hierarchy, params: dict[str, Any]
               ) -> tuple[np.ndarray, np.ndarray]:
    """The published totals: every county's and state's full count, except that in each
    boundary pair (states 1 and 2, 3 and 4, …) ``boundary_share`` of the smaller state's
    persons moved from the second to the first after the county totals were fixed."""
    counties = full.totals("county").astype(np.float64)
    states = full.totals("state").astype(np.float64)
    published = states.copy()
    moved = np.zeros(states.size)
    for k in range(int(params["boundary_pairs"])):
        a, b = 2 * k, 2 * k + 1
        shift = round(params["boundary_share"] * min(states[a], states[b]))
        moved[a], moved[b] = shift, -shift
    published += moved
    geo = full.geography
    county_sum = np.bincount(geo.parents[2], weights=counties, minlength=states.size)
    frame = pd.DataFrame({"state": np.asarray(geo.geocodes[1]).astype(str),
                          "full_count": states, "published": published,
                          "boundary_change": moved, "counties": np.bincount(geo.parents[2]),
                          "counties_published_sum": county_sum})
    out.table("published_totals", frame,
              "The published totals the estimates are calibrated to: each state's full count "
              "(the census's 100 % count), except in the boundary pairs, where "
              f"{params['boundary_share']:.0%} of the smaller state's persons moved from the "
              "second state to the first after the county totals were fixed (boundary_change): "
              "their published totals are no longer the sums of their counties' "
              "(counties_published_sum, the full-count county totals).")
    return published, counties


def _weights_table(out: Output, sample: Any, cap: float, weighted: WeightedHierarchy) -> None:
    values, counts = np.unique(np.asarray(sample.column("wt").to_numpy(), dtype=np.float64),
                               return_counts=True)
    frame = pd.DataFrame({"weight": values, "records": counts,
                          "share": counts / counts.sum(),
                          "clipped_to_cap": values > cap})
    out.table("weights", frame,
              f"The sample's weights and how many records carry each; the cap {cap:g} bounds a "
              f"weight (weights above it are clipped to it: {weighted.clipped:,} records here) "
              f"and is the sensitivity Δ of the weighted cells. This table and the clipping "
              f"count are computed from the data: a simulation may show them, a real release "
              f"keeps them under confidential/.")


def _sample_error(out: Output, full: Hierarchy, weighted: WeightedHierarchy) -> pd.DataFrame:
    """The error of the weighted truth against the full count: the sampling error alone."""
    rows = []
    for li, level in enumerate(LEVELS):
        for query in QUERIES:
            m = error_metrics(_answers(weighted.sums[li], query),
                              _answers(full.counts[li], query))
            rows.append({"level": level, "query": query, "answers": m["n"],
                         "l1": m["mean_abs"], "l2": m["rmse"]})
    frame = pd.DataFrame(rows)
    out.table("sample_error", frame,
              "The sampling error alone: the weighted (exact, noiseless) tabulation of the "
              "sample against the full count, L1 = mean |error| per answer and L2 = RMSE per "
              "answer. No ε removes it: it is the floor of the errors against the full count.")
    return frame


def _answers(histograms: np.ndarray, query: str) -> np.ndarray:
    return histograms.sum(axis=1, keepdims=True) if query == "total" else histograms


def _runs(out: Output, full: Hierarchy, weighted: WeightedHierarchy, state_published: np.ndarray,
          county_published: np.ndarray, params: dict[str, Any]):
    """Every ε and seed: noise, the three methods and their errors against both truths; the
    consistency report of every state."""
    geo = full.geography
    cells_below = [np.bincount(_ancestor(geo, li), minlength=geo.n_units(li)) for li in range(3)]
    rows, reports = [], []
    for epsilon in params["epsilons"]:
        for seed in params["seeds"]:
            rnd = Randomness.simulation(int(seed)).child(int(round(1000 * float(epsilon))))
            noisy = measure_weighted(weighted, float(epsilon), rnd, mechanism="geometric")
            parameters = noisy.provenance["parameters"][LEVELS[-1]]["detailed"]
            raw = bottom_up_sums(noisy)
            calibrated, report = calibrate_consistent(
                raw, "state", state_published, published_below=county_published,
                band=params["band"])
            everywhere, _ = calibrate_consistent(raw, "state", state_published, band=math.inf)
            untouched = ~report["consistent"].to_numpy()
            reports.append(report.assign(
                epsilon=float(epsilon), seed=int(seed),
                left_as_raw=bool(np.array_equal(calibrated.histograms[1][untouched],
                                                raw.histograms[1][untouched])),
                calibrated_total=calibrated.histograms[1].sum(axis=1)))
            for method, est in (("bottom_up", raw), ("bottom_up+calibrated", calibrated),
                                ("bottom_up+calibrated_everywhere", everywhere)):
                rows += _error_rows(method, est, full, weighted, float(epsilon), int(seed),
                                    parameters, cells_below)
        out.log(f"{NAME}: ε = {epsilon:g} done")
    return rows, reports


def _error_rows(method: str, est: Any, full: Hierarchy, weighted: WeightedHierarchy,
                epsilon: float, seed: int, parameters: dict[str, Any],
                cells_below: list[np.ndarray]) -> list[dict[str, Any]]:
    rows = []
    for li, level in enumerate(LEVELS):
        for query in QUERIES:
            dp = _answers(np.asarray(est.histograms[li], dtype=np.float64), query)
            cells = cells_below[li] * (LONG_FORM_1960.size if query == "total" else 1)
            for against, truth in (("weighted", weighted.sums[li]),
                                   ("full_count", full.counts[li])):
                m = error_metrics(dp, _answers(truth, query))
                theory = (math.sqrt(parameters["variance"] * cells.mean())
                          if method == "bottom_up" and against == "weighted" else math.nan)
                rows.append({"method": method, "epsilon": epsilon, "seed": seed,
                             "sensitivity": parameters["sensitivity"], "z": parameters["z"],
                             "level": level, "query": query, "against": against,
                             "answers": m["n"], "l1": m["mean_abs"], "l2": m["rmse"],
                             "rmse_theory": theory})
    return rows


def _ancestor(geo: Any, level_index: int) -> np.ndarray:
    owner = np.arange(geo.n_units(-1))
    for li in range(geo.depth - 1, level_index, -1):
        owner = geo.parents[li][owner]
    return owner


def _error_table(out: Output, per_seed: pd.DataFrame, params: dict[str, Any]) -> pd.DataFrame:
    keys = ["method", "epsilon", "level", "query", "against"]
    table = (per_seed.groupby(keys, sort=False)
             .agg(sensitivity=("sensitivity", "first"), z=("z", "first"),
                  answers=("answers", "first"), l1=("l1", "mean"), l1_sd=("l1", "std"),
                  l2=("l2", lambda v: float(np.sqrt(np.mean(np.square(v))))),
                  rmse_theory=("rmse_theory", "first")).reset_index())
    out.table("weighted_errors", table,
              f"Errors of the county, state and national answers (total, and the 6 sex × group "
              f"quarters cells) per ε, over {len(params['seeds'])} seeds: L1 = mean |error| per "
              f"answer (mean over seeds), L2 = RMSE per answer (root of the mean over seeds of "
              f"the squared RMSE). against = weighted: the noise alone (the weighted truth is "
              f"the sample's exact tabulation); against = full_count: noise and sampling error "
              f"together. Noise: two-sided geometric on every county cell, z = ε/Δ, Δ = the cap "
              f"{params['cap']:g}; rmse_theory is the raw noise's exact RMSE √(m·Var), m county "
              f"cells per answer. Methods: raw bottom-up sums; calibrated (proportionally) to "
              f"the published state totals where consistent, the others left raw; and "
              f"calibrated everywhere, inconsistent states included.")
    out.table("weighted_errors_by_seed", per_seed, "The same, one row per seed.")
    return table


def _inconsistent_table(out: Output, reports: list[pd.DataFrame]) -> pd.DataFrame:
    every = pd.concat(reports, ignore_index=True)
    bad = every[~every["consistent"]]
    frame = bad[["epsilon", "seed", "geocode", "published", "noisy_sum", "ratio",
                 "children_sum", "difference", "left_as_raw", "reason"]].rename(
        columns={"geocode": "state", "children_sum": "counties_published_sum"})
    out.table("inconsistent_states", frame,
              "The states not calibrated, at every ε and seed, and why: a state is consistent "
              "when its published total is published, the noisy sum of its county cells is "
              "positive with published/noisy within [1/(1 + band), 1 + band], and its "
              "published total equals the sum of its counties' published totals. "
              "left_as_raw: its cells are exactly the raw bottom-up ones. The rule reads "
              "published totals and noisy values only, so this table may be published.")
    return every


def _amplification(out: Output, params: dict[str, Any]) -> dict[float, float]:
    rate = params["rate"]
    amplified = {float(e): amplify_poisson(float(e), rate=rate)[0] for e in params["epsilons"]}
    out.table("amplification", pd.DataFrame({"epsilon": list(amplified),
                                             "sample_rate": rate,
                                             "amplified_epsilon": list(amplified.values())}),
              f"The mechanism's ε on the sample and its loss amplified by the sampling, "
              f"log(1 + q(e^ε − 1)) with q = {rate:g} (hierarchy.accounting.amplify_poisson), "
              f"for a person-level Poisson sample kept secret, as drawn here. The 1960 sample "
              f"was of housing units: a cluster sample of persons, for which this bound does "
              f"not follow; account it with households as the units (docs/accounting.md).")
    return amplified


def _headline(table: pd.DataFrame, sample: pd.DataFrame, every: pd.DataFrame,
              reports: list[pd.DataFrame], weighted: WeightedHierarchy,
              amplified: dict[float, float]) -> dict[str, Any]:
    head: dict[str, Any] = {}
    full = table[table["against"] == "full_count"]
    for r in full[full["query"] == "total"].itertuples():
        if r.level in ("state", "county") and r.method != "bottom_up+calibrated_everywhere":
            head[f"l1 {r.level}/total vs full count, {r.method}@{r.epsilon:g}"] = r.l1
    for r in sample[sample["query"] == "total"].itertuples():
        if r.level in ("state", "county"):
            head[f"sampling error alone: l1 {r.level}/total"] = r.l1
    bad = every[~every["consistent"]]
    head["inconsistent states"] = sorted(set(bad["geocode"]))
    head["inconsistent states left as they were"] = bool(bad["left_as_raw"].all())
    good = every[every["consistent"]]
    head["max |calibrated − published| at consistent states"] = float(
        np.max(np.abs(good["calibrated_total"] - good["published"]).to_numpy(), initial=0.0))
    raw = table[(table["method"] == "bottom_up") & (table["against"] == "weighted")
                & (table["level"] == "county")]
    head["max |L2 / exact RMSE − 1| at counties (noise alone)"] = float(
        np.max(np.abs(raw["l2"] / raw["rmse_theory"] - 1)))
    head["weights clipped at the cap"] = weighted.clipped
    for epsilon, value in amplified.items():
        head[f"amplified ε (person-level Poisson)@{epsilon:g}"] = value
    return head


def _figure(out: Output, table: pd.DataFrame, sample: pd.DataFrame,
            params: dict[str, Any]) -> None:
    """L1 against ε per level (state, county) and query: every method against the full count,
    the raw noise alone against the weighted truth, and the sampling error alone."""
    fig, axes = new_figure(2, 2, width=5.2, height=4.2)
    epsilons = sorted(table["epsilon"].unique())
    for row, level in enumerate(["state", "county"]):
        for col, query in enumerate(QUERIES):
            ax = axes[row][col]
            part = table[(table["level"] == level) & (table["query"] == query)]
            for method, (label, color, style) in METHODS.items():
                rows = part[(part["method"] == method)
                            & (part["against"] == "full_count")].sort_values("epsilon")
                ax.plot(rows["epsilon"], rows["l1"].where(rows["l1"] > 1e-6), ls=style,
                        marker="o", ms=4, color=color, label=f"{label} vs full count")
            noise = part[(part["method"] == "bottom_up")
                         & (part["against"] == "weighted")].sort_values("epsilon")
            ax.plot(noise["epsilon"], noise["l1"].where(noise["l1"] > 1e-6), ls="-", lw=1,
                    marker="s", ms=3, color="#7f7f7f", label="raw vs weighted truth (noise)")
            floor = sample[(sample["level"] == level) & (sample["query"] == query)]["l1"]
            ax.axhline(float(floor.iloc[0]), color="black", ls="--", lw=1,
                       label="sampling error alone")
            plain_log_axis(ax, "both", ticks=epsilons)
            ax.grid(True, which="both", alpha=0.3)
            ax.set_xlabel("privacy budget ε (all on the county cells)")
            ax.set_ylabel("L1 error: mean |error| per answer")
            ax.set_title(f"{level}: {QUERIES[query]}", fontsize=10)
            if row == 0 and col == 0:
                ax.legend(fontsize=7)
    out.figure("weighted_errors", fig,
               f"L1 error (mean |error| per answer, log-log) against ε of state and county "
               f"answers of the weighted 1960-style tabulation (Δ = cap = {params['cap']:g}): "
               f"raw bottom-up sums, calibrated to the published state totals where consistent, "
               f"and calibrated everywhere, against the full count; the raw noise alone against "
               f"the weighted truth (grey); the sampling error alone (dashed). Against the full "
               f"count the error falls with ε only to the sampling error. Calibration where "
               f"consistent makes consistent states' totals exact; calibrating the inconsistent "
               f"states too moves them by their boundary change.")
