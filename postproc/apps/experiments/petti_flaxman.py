"""Petti & Flaxman (2020): accuracy and empirical privacy loss of TopDown on 1940-style data.

Synthetic 1940-style persons and units (``hierarchy.synth``), the E2E budget split, geometric
noise and the E2E spec (``tot`` invariant at nation and state, units data at the ED), TopDown at
every ε of a grid with several seeds — the full run uses the paper's grid ε ∈ {0.25, 0.5, 0.75,
1, 2, 4, 6, 8} and its 4 seeds; what a given run used is stated in its outputs. For the total
count (TC, query ``total``) and the stratified count (SC, ``va_hisp_race``) of every level:

* MAE (median absolute error, the mean over seeds) and EPL (improved estimator, errors of all
  seeds pooled: the seeds are independent draws of the same mechanism on the same data; the
  published estimator beside it);
* the error distribution of ED totals with its EPL(x) curve;
* the MAE-vs-EPL trade-off of TopDown against simple random samples (SRS) of 5 %–95 % of persons
  weighted ``1/f``, and the SRS fraction each ε matches — jointly on error and EPL (the paper's
  Table 1; rule in :mod:`postproc.apps.experiments._matching`), and on the error alone;
* the bias of county and ED totals by homogeneity index (:func:`postproc.evaluation.metrics.
  homogeneity_index`; the authors' definition by default, ``homogeneity="zero_cells"`` for the
  paper text's; the table has both);
* at one ε, TopDown against the raw measurements and the other post-processors of the same
  measurements (clipping, closed-form least squares) and bottom-up at the same ε
  (:func:`postproc.evaluation.evaluate.reference_results`, evaluated);
* our numbers beside the paper's (``paper_comparison.csv``;
  :mod:`postproc.apps.experiments._papers`).

The nation and state totals are invariant, so their errors are all zero and their EPL undefined
(reported as such). The ε of the E2E budget is the *total* over four levels and three queries.

SC is evaluated over three sets of cells, all stated in the outputs:

* ``va_hisp_race``: all 24 cells of every unit. Most are empty; TopDown (nonnegative) and SRS put
  most of those at exactly 0, so the pooled errors have a spike at 0 whose log ratio
  ``log f(0)/f(±1)`` dominates the EPL — it measures sparsity, not the mechanism.
* ``va_hisp_race>0``: the cells whose exact count is positive (closer to exchangeable).
* ``va_hisp_race:authors``: the cells with a person in the exact *or* the DP data — what the
  authors' tallies of person records compare (a cell nobody is in, in either file, is never
  listed). For SRS it is the same set as ``>0`` (a sample has nobody the data lack), so the SRS
  rows are copied from there.

SRS estimates live on a lattice of spacing ``1/f``; the improved estimator's bins are widened to
at least ``1/f`` for them (otherwise it measures the lattice). SC's median absolute error over all
cells or over ``>0`` is 0 or a few persons (small cells), so those two are compared with SRS on the
mean absolute error; TC and ``va_hisp_race:authors`` on the MAE, as the paper does.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from hierarchy.budget import Budget
from hierarchy.histograms import Hierarchy
from hierarchy.measurement import measure
from hierarchy.queries import Query, Workload, e2e_workload, total
from hierarchy.randomness import Randomness
from hierarchy.schema import E2E_1940
from hierarchy.tabulation import tabulate
from invariants.spec import Spec
from postproc.apps.experiments import _papers as paper
from postproc.apps.experiments._common import (
    E2E_LEVELS,
    Output,
    describe_grid,
    describe_units,
    synthetic_truth,
)
from postproc.apps.experiments._figures_petti_flaxman import (
    figure_bias,
    figure_comparison,
    figure_distribution,
    figure_levels,
    figure_tradeoff,
)
from postproc.apps.experiments._matching import match_srs
from postproc.errors import PostprocError
from postproc.evaluation.epl import default_bandwidth, improved_epl, published_epl
from postproc.evaluation.metrics import (
    HOMOGENEITY_DEFINITIONS,
    bias_by_homogeneity,
    error_metrics,
    homogeneity_index,
)
from postproc.methods.baselines import srs

NAME = "petti_flaxman"
TITLE = "Petti & Flaxman (2020): TopDown error and empirical privacy loss on 1940-style data"

LEVELS = E2E_LEVELS
QUERIES = {"total": "TC (total)", "va_hisp_race": "SC (va_hisp_race, all cells)",
           "va_hisp_race>0": "SC (va_hisp_race, cells with exact > 0)",
           "va_hisp_race:authors": "SC (va_hisp_race, cells with a person in exact or DP)"}
#: The error measure each query is compared on (SC's median |error| over all cells is 0 or 1).
MEASURE = {"total": "mae", "va_hisp_race": "mean_abs", "va_hisp_race>0": "mean_abs",
           "va_hisp_race:authors": "mae"}
#: The statistics the study publishes as invariants: the nation's and the states' totals, the
#: EDs' units by type.
PUBLISH = {"tot": tuple(LEVELS[:2]), "gqhh": tuple(LEVELS[-1:])}
#: Levels whose bias by homogeneity index is tabulated.
BIAS_LEVELS = ("county", "enum_dist")

FULL = {"persons": 20_000_000, "data_seed": 1940, "states": None, "seeds": [1, 2, 3, 4],
        "epsilons": [0.25, 0.5, 0.75, 1.0, 2.0, 4.0, 6.0, 8.0], "show_epsilon": 1.0,
        "srs_fractions": [round(0.05 * k, 2) for k in range(1, 20)], "n_boot": 100,
        "compare_epsilon": 1.0, "homogeneity": "authors", "executor": "serial",
        "workers": None, "data": None, "composition": "default"}
#: Three county-rich states of a 3-million-person nation: 3 states, 13 counties (3–6 per
#: state), 313 EDs (3–52 per county), 303,561 persons.
QUICK = {"persons": 3_000_000, "data_seed": 1940, "states": 3, "seeds": [1, 2],
         "epsilons": [0.5, 2.0], "show_epsilon": 2.0, "srs_fractions": [0.1, 0.5, 0.9],
         "n_boot": 20, "compare_epsilon": 2.0, "homogeneity": "authors", "executor": "serial",
         "workers": None, "data": None, "composition": "default"}


def _selected(answers: np.ndarray, exact: np.ndarray, query: str) -> np.ndarray | None:
    """Which answers a query pools (``None``: all of them)."""
    if query.endswith(">0"):
        return exact > 0
    if query.endswith(":authors"):
        return (exact > 0) | (answers > 0)
    return None


def _query_errors(answers: np.ndarray, exact: np.ndarray,
                  query: str) -> tuple[np.ndarray, np.ndarray]:
    """Errors of one query pooled over units and cells, and the exact counts of those cells."""
    error = (answers - exact).astype(np.float64)
    mask = _selected(answers, exact, query)
    if mask is None:
        return error.ravel(), exact.astype(np.float64).ravel()
    return error[mask], exact[mask].astype(np.float64)


def _summarise(errors: dict, exact: dict, units: dict, n_boot: int, rnd: Randomness,
               lattice: dict | None = None) -> tuple[list, dict]:
    """Rows of metrics per (key, level, query) and the pooled EPL estimates.

    ``errors[key]`` and ``exact[key]`` are lists (one array per seed) of the errors and the exact
    counts of the same cells. ``lattice`` maps a key to the spacing of its errors (SRS: ``1/f``);
    the estimator's bins are at least that wide.
    """
    rows, estimates = [], {}
    for i, (key, per_seed) in enumerate(errors.items()):
        *label, level, query = key
        maes = [float(np.median(np.abs(e))) if e.size else float("nan") for e in per_seed]
        pooled = np.concatenate(per_seed)
        values = np.concatenate(exact[key])
        metrics = error_metrics(pooled + values, values)
        options: dict[str, Any] = {"n_boot": n_boot, "rng": rnd.child(i)}
        spacing = (lattice or {}).get(key)
        if spacing and pooled.size > 1 and np.ptp(pooled) > 0:
            options["bandwidth"] = max(default_bandwidth(pooled), spacing)
        estimate = improved_epl(pooled, **options)
        estimates[key] = estimate
        rows.append({"key": tuple(label), "level": level, "query": query,
                     "units": units[level], "n": pooled.size,
                     "mae": float(np.mean(maes)), "mae_sd": float(np.std(maes, ddof=1))
                     if len(maes) > 1 else float("nan"),
                     "mean_abs": metrics["mean_abs"], "rmse": metrics["rmse"],
                     "p95_abs": metrics["p95_abs"], "epl": estimate.epl,
                     "epl_ci_low": estimate.ci_low, "epl_ci_high": estimate.ci_high,
                     "epl_kind": estimate.kind,
                     "epl_bandwidth": estimate.parameters.get("bandwidth"),
                     "epl_reason": estimate.reason, "epl_published": published_epl(pooled).epl,
                     "exact_median": metrics["exact_median"],
                     "exact_p95": metrics["exact_p95"]})
    return rows, estimates


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

    Raises
    ------
    PostprocError
        An unknown homogeneity definition.

    Examples
    --------
    TopDown at ε = 1 with one seed on two states, no comparison with the other
    post-processors (``compare_epsilon`` is not among the ε run):

    >>> import tempfile
    >>> out = Output(tempfile.mkdtemp(), NAME, TITLE, log=lambda m: None)
    >>> result = run(out, quick=True, persons=1_000_000, states=2, seeds=[1], epsilons=[1.0],
    ...              show_epsilon=1.0, compare_epsilon=9.0, n_boot=0, srs_fractions=[0.5])
    >>> result["headline"]["mae county/total@1"], result["headline"]["mae enum_dist/total@1"]
    (36.0, 21.5)
    >>> [t["file"] for t in out.tables]
    ['topdown_metrics.csv', 'srs_metrics.csv', 'closest_srs.csv', 'bias_by_homogeneity.csv',
    'paper_comparison.csv']
    >>> run(out, quick=True, homogeneity="entropy")
    Traceback (most recent call last):
    ...
    postproc.errors.PostprocError: homogeneity must be one of authors, zero_cells, not 'entropy'
    """
    params = {**(QUICK if quick else FULL), **overrides}
    if params["homogeneity"] not in HOMOGENEITY_DEFINITIONS:
        raise PostprocError(f"homogeneity must be one of {', '.join(HOMOGENEITY_DEFINITIONS)}, "
                            f"not {params['homogeneity']!r}")
    setting = _setting(params)
    out.log(f"{NAME}: {int(setting.truth.counts[0].sum()):,} persons; units {setting.units}")
    runs = _run_topdown(out, setting, params)
    rnd = Randomness.simulation(int(params["data_seed"]))
    topdown_table, estimates = _topdown_metrics(out, setting, runs, params, rnd.child(1))
    srs_table = _srs(out, setting.truth, setting.queries, setting.exact, setting.units, params,
                     rnd.child(2))
    closest = _closest_srs(out, topdown_table, srs_table)
    bias = _bias_table(out, setting.exact, runs.totals)
    _paper_comparison_table(out, topdown_table, closest, bias, params["homogeneity"])
    _figures(out, params, runs, estimates, topdown_table, srs_table, closest, bias)
    if runs.compared is not None:
        _comparison(out, setting.truth, *runs.compared, float(params["compare_epsilon"]),
                    int(params["n_boot"]))
    headline = _headline(topdown_table, closest, bias, params["homogeneity"])
    headline["topdown_seconds_mean"] = float(np.mean(runs.seconds))
    return {"parameters": {**params, "units": setting.units}, "headline": headline,
            "ran": _ran(params, setting, runs),
            "notes": ["nation and state totals are invariant (E2E spec): their errors are 0 and "
                      "their EPL is undefined."]}


@dataclass(frozen=True)
class _Setting:
    """The data and what is compared on them: the truth, the E2E workload and spec, the
    statistics published, the units per level, the queries compared (by name: TC and the
    three cell sets of SC) and their exact answers per (level, query name)."""

    truth: Hierarchy
    workload: Workload
    spec: Spec
    publish: dict[str, tuple[str, ...]]
    units: dict[str, int]
    queries: dict[str, Query]
    exact: dict[tuple[str, str], np.ndarray]


def _setting(params: dict[str, Any]) -> _Setting:
    """The truth of ``params`` — synthetic, or the E2E files in ``params["data"]`` — and what is
    measured and compared on it."""
    truth, spec = _truth(params)
    workload = e2e_workload(E2E_1940)
    queries = {"total": total(E2E_1940), "va_hisp_race": workload["va_hisp_race"],
               "va_hisp_race>0": workload["va_hisp_race"],
               "va_hisp_race:authors": workload["va_hisp_race"]}
    exact = {(lv, q): query.answer(truth.counts[li]) for li, lv in enumerate(LEVELS)
             for q, query in queries.items()}
    return _Setting(truth, workload, spec, PUBLISH,
                    {lv: truth.geography.n_units(lv) for lv in LEVELS}, queries, exact)


def _truth(params: dict[str, Any]) -> tuple[Hierarchy, Spec]:
    """The exact hierarchy and the E2E spec: the synthetic data of ``params`` with
    :meth:`Spec.e2e`, or, with ``params["data"]``, the directory's ``persons.parquet`` and
    ``units.parquet`` (``postproc ipums1940`` writes them from an IPUMS USA 1940 extract) with
    the E2E spec less its structural zeros of hhgq 1 and 5 — real 1940 data have prisons and
    college dormitories (``docs/data.md``, "Real data")."""
    if params.get("data") is None:
        return synthetic_truth(params), Spec.e2e(LEVELS)
    directory = Path(params["data"])
    missing = [n for n in ("persons.parquet", "units.parquet") if not (directory / n).is_file()]
    if missing:
        raise PostprocError(f"data {str(directory)!r} has no {' or '.join(missing)}: give the "
                            "directory `postproc ipums1940 DDI --out DIR` wrote (or "
                            "`postproc synth1940`)")
    truth = tabulate(directory / "persons.parquet", schema=E2E_1940, levels=LEVELS,
                     units=directory / "units.parquet")
    spec = Spec.e2e(LEVELS)
    return truth, replace(spec, constraints=tuple(c for c in spec.constraints
                                                 if c.name != "structural_zeros"))


@dataclass(frozen=True)
class _TopDownRuns:
    """TopDown at every ε and seed: per (ε, level, query name) the errors and the exact counts
    of the same cells, one array per seed; per (ε, level) of :data:`BIAS_LEVELS` the units'
    totals, one array per seed; each run's seconds; and the (measurements, result, seed)
    compared with the other post-processors (``None`` when ``compare_epsilon`` is not run)."""

    errors: dict[tuple, list[np.ndarray]]
    cells: dict[tuple, list[np.ndarray]]
    totals: dict[tuple, list[np.ndarray]]
    seconds: list[float]
    compared: tuple | None


def _run_topdown(out: Output, setting: _Setting, params: dict[str, Any]) -> _TopDownRuns:
    """Measure and run TopDown at every ε and seed (ε's k-th stream of each seed), keeping the
    errors of every level and query compared."""
    from postproc.infra.executors import get_executor

    truth, spec = setting.truth, setting.spec
    runs = _TopDownRuns({}, {}, {}, [], None)
    compared = None
    with get_executor(params["executor"], workers=params["workers"]) as executor:
        for ei, epsilon in enumerate(params["epsilons"]):
            for seed in params["seeds"]:
                noisy, result = measure_topdown(truth, epsilon, seed, stream=ei, spec=spec,
                                                executor=executor)
                runs.seconds.append(result.provenance["timings"]["total"])
                _keep_errors(runs, setting, float(epsilon), result.histograms)
                if float(epsilon) == float(params["compare_epsilon"]) and compared is None:
                    compared = (noisy, result, int(seed))
            out.log(f"  ε = {epsilon:g}: TopDown × {len(params['seeds'])} "
                    f"({np.mean(runs.seconds[-len(params['seeds']):]):.1f} s each)")
    return replace(runs, compared=compared)


def measure_topdown(truth: Hierarchy, epsilon: float, seed: int, *, stream: int, spec: Spec,
                    executor: Any = "serial") -> tuple[Any, Any]:
    """One of the study's runs: ``truth`` measured with the E2E workload, budget split and
    geometric noise at ``epsilon``, publishing :data:`PUBLISH`, on the stream
    ``Randomness.simulation(seed).child(stream)`` (the study uses ε's position in its grid), then
    TopDown under ``spec``. Returns the measurements and TopDown's result.

    Examples
    --------
    >>> from postproc.apps.experiments._common import synthetic_truth
    >>> truth = synthetic_truth({**QUICK, "persons": 300_000, "states": 2})
    >>> noisy, result = measure_topdown(truth, 1.0, 1, stream=3, spec=Spec.e2e(LEVELS))
    >>> [h.shape[0] for h in result.histograms] == [truth.geography.n_units(lv) for lv in LEVELS]
    True
    >>> bool((result.histograms[1].sum(axis=1) == truth.counts[1].sum(axis=1)).all())  # invariant
    True
    """
    from postproc.methods.topdown import topdown

    noisy = measure(truth, e2e_workload(E2E_1940), Budget.e2e(epsilon, LEVELS), "geometric",
                    rng=Randomness.simulation(int(seed)).child(stream), publish=PUBLISH,
                    spec=spec)
    return noisy, topdown(noisy, spec, executor=executor)


def _keep_errors(runs: _TopDownRuns, setting: _Setting, epsilon: float,
                 histograms: list[np.ndarray]) -> None:
    """One run's errors and exact counts of every level and query compared, and its units'
    totals at the levels whose bias is tabulated."""
    for li, lv in enumerate(LEVELS):
        for q, query in setting.queries.items():
            e, x = _query_errors(query.answer(histograms[li]), setting.exact[(lv, q)], q)
            runs.errors.setdefault((epsilon, lv, q), []).append(e)
            runs.cells.setdefault((epsilon, lv, q), []).append(x)
        if lv in BIAS_LEVELS:
            runs.totals.setdefault((epsilon, lv), []).append(histograms[li].sum(1))


def _topdown_metrics(out: Output, setting: _Setting, runs: _TopDownRuns, params: dict[str, Any],
                     rnd: Randomness) -> tuple[pd.DataFrame, dict]:
    """TopDown's metrics per ε, level and query (``topdown_metrics.csv``) and the pooled EPL
    estimates."""
    rows, estimates = _summarise(runs.errors, runs.cells, setting.units, int(params["n_boot"]),
                                 rnd)
    topdown_table = pd.DataFrame(rows)
    topdown_table.insert(0, "epsilon", [k[0] for k in topdown_table.pop("key")])
    out.table("topdown_metrics", topdown_table,
              f"TopDown per ε, level and query: MAE (median absolute error, mean over "
              f"{len(params['seeds'])} seeds, with its sd), mean absolute error, RMSE, 95th "
              f"percentile of |error|, and EPL (improved estimator on the errors of all seeds "
              f"pooled, 95% interval, bin width epl_bandwidth counts; inf = not a "
              f"number: epl_kind says whether epl_ci_low bounds it from below, epl_reason "
              f"why) with the published estimator's value for comparison; the "
              f"median and 95th percentile of the exact counts of the same cells. "
              f"va_hisp_race>0 pools the cells whose exact count is positive; "
              f"va_hisp_race:authors the cells with a person in the exact or the TopDown data "
              f"(the paper's).")
    return topdown_table, estimates


def _closest_srs(out: Output, topdown_table: pd.DataFrame,
                 srs_table: pd.DataFrame) -> pd.DataFrame:
    """The SRS fraction TopDown matches at every ε, level and query (``closest_srs.csv``)."""
    closest = match_srs(topdown_table, srs_table, measure=MEASURE)
    out.table("closest_srs", closest,
              "For each ε, level, query and EPL estimator: the SRS fraction TopDown matches. "
              "joint_*: nearest point of the SRS curve on the log-log plot of error against "
              "EPL (distance √(Δlog EPL² + Δlog error²); the grid fraction, the fraction "
              "interpolated along the curve, the distance, and the SRS error and EPL at the "
              "grid fraction; empty where an EPL is undefined). error_*: matched on the error "
              "alone (matched_on: MAE for TC and va_hisp_race:authors, mean |error| for the "
              "other SC sets), nearest grid point and the fraction interpolated linearly in log "
              "error (empty when TopDown is outside the SRS range).")
    return closest


def _bias_table(out: Output, exact: dict, totals: dict) -> pd.DataFrame:
    """The bias of unit totals by homogeneity index (``bias_by_homogeneity.csv``)."""
    bias = _bias(exact, totals)
    out.table("bias_by_homogeneity", bias,
              "Bias (mean DP − exact) of county and ED totals by homogeneity index, seeds "
              "pooled, with its standard error, under both definitions: authors (24 − the "
              "number of votingage × hispanic × race level combinations of the levels present "
              "in the unit, as the authors' code computes it) and zero_cells (the number of "
              "empty cells of the unit's exact 24-cell va_hisp_race table, the paper's text).")
    return bias


def _paper_comparison_table(out: Output, topdown_table: pd.DataFrame, closest: pd.DataFrame,
                            bias: pd.DataFrame, definition: str) -> None:
    """Our numbers beside the paper's (``paper_comparison.csv``)."""
    comparison = _paper_comparison(topdown_table, closest, bias, definition)
    out.table("paper_comparison", comparison,
              f"Our numbers beside {paper.PAPER} (the full 1940 census, 4 seeds; source "
              f"column: file and commit of the authors' repository): TC and SC MAE, EPL "
              f"(published estimator, as theirs), bias by homogeneity index (authors' "
              f"definition), and SRS matches (srs_match_*: their row is our joint rule applied "
              f"to their own TopDown and SRS numbers; table_1: the paper's Table 1, county SC). "
              f"ratio = ours / paper.")


def _figures(out: Output, params: dict[str, Any], runs: _TopDownRuns, estimates: dict,
             topdown_table: pd.DataFrame, srs_table: pd.DataFrame, closest: pd.DataFrame,
             bias: pd.DataFrame) -> None:
    """The figures: error and EPL per level, the ED totals' error distribution at
    ``show_epsilon``, the trade-off against SRS, and the bias by homogeneity index."""
    figure_levels(out, topdown_table, params["epsilons"], QUERIES, MEASURE, LEVELS)
    show = float(params["show_epsilon"])
    key = (show, "enum_dist", "total")
    if key in runs.errors:
        figure_distribution(out, np.concatenate(runs.errors[key]), estimates[key], show)
    figure_tradeoff(out, topdown_table, srs_table, closest, QUERIES, MEASURE)
    figure_bias(out, bias, params["homogeneity"])


def _ran(params: dict[str, Any], setting: _Setting, runs: _TopDownRuns) -> str:
    """What the run did, in one sentence for the outputs."""
    persons = int(setting.truth.counts[0].sum())
    return (f"TopDown at ε ∈ {describe_grid(params['epsilons'])} with seeds "
            f"{', '.join(str(s) for s in params['seeds'])} on {persons:,} synthetic persons "
            f"({describe_units(setting.units)}); simple random samples of "
            f"{', '.join(f'{100 * f:g} %' for f in params['srs_fractions'])} of persons; "
            + (f"the post-processors compared at ε = {params['compare_epsilon']:g}; "
               if runs.compared is not None else "no comparison of post-processors "
               f"(compare_epsilon {params['compare_epsilon']:g} is not among the ε run); ")
            + f"EPL intervals from {params['n_boot']} bootstrap draws; homogeneity index: "
            f"{params['homogeneity']} definition.")


def _srs(out: Output, truth, queries: dict, exact: dict, units: dict, params: dict,
         rnd: Randomness) -> pd.DataFrame:
    """Simple random samples at every fraction and seed, summarised like TopDown."""
    srs_errors: dict[tuple, list[np.ndarray]] = {}
    srs_cells: dict[tuple, list[np.ndarray]] = {}
    lattice: dict[tuple, float] = {}
    for fi, fraction in enumerate(params["srs_fractions"]):
        for seed in params["seeds"]:
            est = srs(truth, float(fraction), rng=Randomness.simulation(int(seed)).child(100, fi))
            for li, lv in enumerate(LEVELS[1:], start=1):
                for q, query in queries.items():
                    if q.endswith(":authors"):
                        continue                         # the same cells as >0 (see above)
                    key = (float(fraction), lv, q)
                    e, x = _query_errors(query.answer(est.histograms[li]), exact[(lv, q)], q)
                    srs_errors.setdefault(key, []).append(e)
                    srs_cells.setdefault(key, []).append(x)
                    lattice[key] = 1.0 / float(fraction)
    out.log(f"  SRS at {len(params['srs_fractions'])} fractions × {len(params['seeds'])} seeds")
    rows, _ = _summarise(srs_errors, srs_cells, units, int(params["n_boot"]), rnd, lattice)
    table = pd.DataFrame(rows)
    table.insert(0, "fraction", [k[0] for k in table.pop("key")])
    authors = table[table["query"] == "va_hisp_race>0"].assign(query="va_hisp_race:authors")
    table = pd.concat([table, authors], ignore_index=True)
    out.table("srs_metrics", table,
              "Simple random samples of persons (without replacement, weighted 1/f) per "
              "fraction, level and query: the same metrics as TopDown's; the EPL bins are at "
              "least 1/f wide (SRS errors lie on a lattice of that spacing). For SRS the "
              "va_hisp_race:authors cells are the va_hisp_race>0 cells (rows copied).")
    return table


def _comparison(out: Output, truth, noisy, result, seed: int, epsilon: float,
                n_boot: int) -> None:
    from hierarchy.randomness import as_randomness
    from postproc.evaluation.evaluate import evaluate, reference_results
    from postproc.gate import label_table, randomness_of

    rnd = as_randomness(seed)       # the reference results' draws, then the EPL intervals'
    made = reference_results(noisy, truth, results={"topdown": result}, rng=rnd)
    table = label_table(evaluate(made, truth, rng=rnd.child(1),
                                 queries=["total", "va_hisp_race", "detailed"],
                                 epl_options={"n_boot": n_boot}), randomness_of(noisy))
    out.table("comparison", table,
              f"At ε = {epsilon:g} (seed {seed}): the raw measurements, nonnegative clipping of "
              f"the detailed measurements, closed-form least squares (Hay et al., generalised; "
              f"with and without clipping), TopDown, and bottom-up with the same total ε (its "
              f"own measurement; raw and calibrated additively to the published state totals), "
              f"each against the truth per level and query: error metrics and EPL.")
    figure_comparison(out, table, epsilon)


def _bias(exact: dict, totals: dict) -> pd.DataFrame:
    """Bias of unit totals by homogeneity index, per level, definition and ε."""
    frames = []
    for (epsilon, level), runs in totals.items():
        exact_total = exact[(level, "total")].ravel()
        for definition in HOMOGENEITY_DEFINITIONS:
            index = homogeneity_index(exact[(level, "va_hisp_race")], definition=definition)
            table = bias_by_homogeneity(np.concatenate(runs), np.tile(exact_total, len(runs)),
                                        np.tile(index, len(runs)))
            table.insert(0, "epsilon", epsilon)
            table.insert(0, "definition", definition)
            table.insert(0, "level", level)
            frames.append(table)
    return pd.concat(frames, ignore_index=True)


def _paper_comparison(topdown_table: pd.DataFrame, closest: pd.DataFrame, bias: pd.DataFrame,
                      definition: str) -> pd.DataFrame:
    """Our numbers beside the paper's, one row per quantity, level, ε (and index)."""
    rows = []

    def add(quantity, level, epsilon, ours, reference, source, index=None):
        rows.append({"quantity": quantity, "level": level, "epsilon": epsilon,
                     "homogeneity_index": index, "ours": ours, "paper": reference,
                     "ratio": ours / reference if reference else float("nan"),
                     "source": source})

    metrics = topdown_table.set_index(["epsilon", "level", "query"])
    for (quantity, query, column, table, source) in (
            ("tc_mae", "total", "mae", paper.TC_MAE, "mae"),
            ("sc_mae", "va_hisp_race:authors", "mae", paper.SC_MAE, "mae"),
            ("tc_epl_published", "total", "epl_published", paper.TC_EPL, "epl"),
            ("sc_epl_published", "va_hisp_race:authors", "epl_published", paper.SC_EPL, "epl")):
        for level, values in table.items():
            for epsilon, reference in values.items():
                if (epsilon, level, query) in metrics.index:
                    add(quantity, level, epsilon, float(metrics.loc[(epsilon, level, query),
                                                                    column]),
                        reference, paper.SOURCES[source])
    ours_bias = bias[bias["definition"] == definition].set_index(
        ["level", "epsilon", "homogeneity_index"])["bias"]
    for level, by_epsilon in paper.BIAS.items():
        for epsilon, by_index in by_epsilon.items():
            for index, reference in by_index.items():
                if (level, epsilon, index) in ours_bias.index:
                    add("tc_bias", level, epsilon, float(ours_bias.loc[(level, epsilon, index)]),
                        reference, paper.SOURCES["bias"] + f"; ours: {definition} index", index)
    derived = match_srs(*_paper_tables(), measure={"total": "mae", "sc": "mae"})
    derived = derived[derived["epl_estimator"] == "published"].set_index(
        ["epsilon", "level", "query"])
    ours = closest[closest["epl_estimator"] == "published"].set_index(
        ["epsilon", "level", "query"])
    for query, theirs in (("total", "total"), ("va_hisp_race:authors", "sc")):
        for (epsilon, level, _), row in derived.xs(theirs, level="query",
                                                   drop_level=False).iterrows():
            if (epsilon, level, query) in ours.index:
                mine = ours.loc[(epsilon, level, query)]
                for rule in ("joint", "error"):
                    add(f"srs_match_{rule}_{'tc' if theirs == 'total' else 'sc'}", level,
                        epsilon, float(mine[f"{rule}_fraction"]),
                        float(row[f"{rule}_fraction"]),
                        "derived: our rule on " + paper.SOURCES["srs"] + " and "
                        + paper.SOURCES["mae"] + ", " + paper.SOURCES["epl"])
    for (level, _), matches in paper.TABLE_1.items():
        for epsilon, fraction in matches.items():
            if (epsilon, level, "va_hisp_race:authors") in ours.index:
                mine = ours.loc[(epsilon, level, "va_hisp_race:authors")]
                add("srs_match_joint_sc_table_1", level, epsilon,
                    float(mine["joint_fraction"]), fraction, paper.SOURCES["table_1"])
    return pd.DataFrame(rows)


def _paper_tables() -> tuple[pd.DataFrame, pd.DataFrame]:
    """The paper's TopDown and SRS numbers as tables :func:`match_srs` reads."""
    topdown, sampled = [], []
    for query, mae, epl in (("total", paper.TC_MAE, paper.TC_EPL),
                            ("sc", paper.SC_MAE, paper.SC_EPL)):
        for level in ("county", "enum_dist"):
            for epsilon in paper.EPSILONS:
                topdown.append({"epsilon": epsilon, "level": level, "query": query,
                                "mae": float(mae[level][epsilon]),
                                "epl": float(epl[level][epsilon]),
                                "epl_published": float(epl[level][epsilon])})
            for fraction in paper.SRS_FRACTIONS:
                value = paper.SRS_EPL[query][level][fraction]
                sampled.append({"fraction": fraction, "level": level, "query": query,
                                "mae": float(paper.SRS_MAE[query][level][fraction]),
                                "epl": value, "epl_published": value})
    return pd.DataFrame(topdown), pd.DataFrame(sampled)


def _headline(topdown_table: pd.DataFrame, closest: pd.DataFrame, bias: pd.DataFrame,
              definition: str) -> dict:
    out: dict[str, Any] = {}
    for _, r in topdown_table.iterrows():
        if r["level"] in ("county", "enum_dist") and r["query"] in ("total", "va_hisp_race>0"):
            tag = f"{r['level']}/{r['query']}@{r['epsilon']:g}"
            out[f"{MEASURE[r['query']]} {tag}"] = r[MEASURE[r["query"]]]
            out[f"epl {tag}"] = r["epl"]
    joint = closest[(closest["level"] == "enum_dist") & (closest["query"] == "total")]
    for _, r in joint.iterrows():
        if r["epl_estimator"] == "improved" and np.isfinite(r["joint_fraction"]):
            out[f"SRS fraction matching enum_dist/total@{r['epsilon']:g} (error and EPL)"] = \
                r["joint_interpolated_fraction"]
        if r["epl_estimator"] == "improved":
            out[f"SRS fraction matching enum_dist/total@{r['epsilon']:g} (error alone)"] = (
                r["error_interpolated_fraction"] if r["within_srs_range"] else
                f">{r['error_fraction']:g}" if r["error_fraction"] > 0.5 else
                f"<{r['error_fraction']:g}")
    chosen = bias[bias["definition"] == definition]
    for (level, epsilon), part in chosen.groupby(["level", "epsilon"]):
        lo, hi = part.iloc[0], part.iloc[-1]
        out[f"bias {level} total@{epsilon:g}: index {int(lo['homogeneity_index'])} / "
            f"{int(hi['homogeneity_index'])} ({definition})"] = \
            f"{lo['bias']:.1f} / {hi['bias']:.1f}"
    return out
