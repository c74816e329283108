"""Intervals for the counts of a result that knows its covariance (``docs/gls.md``,
"Intervals").

A linear estimate ``x̂ = K y`` of the histograms from measurements ``y`` with known noise
covariance has an exact covariance ``K Cov(y) Kᵀ``; any linear query ``Q x`` of a unit then has
standard error ``sqrt(diag(Q Cov(x̂_u) Qᵀ))``. :func:`interval_frame` turns that into two-sided
normal intervals, ``estimate ± z·se``: the covariance is exact, the normal shape is the
approximation (the noise of each answer is discrete Gaussian or two-sided geometric; the
estimate sums many of them). It reads only the result and its covariance — never the
confidential data — so in release mode the intervals may be published with the counts.

A result carries a covariance when its method computes one (:func:`~postproc.methods.gls.gls`);
for any other method (TopDown among them) the intervals are approximate replicates:
:func:`postproc.methods.replicates.replicate_intervals`.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
from scipy.stats import norm

from hierarchy.frames import resolve_query
from postproc.errors import PostprocError

#: The type of the results these functions read (:class:`postproc.result.Result`, which imports
#: this module: named here, not imported).
Result = Any

__all__ = ["interval_frame", "group_interval_frame", "interval_table", "z_value"]


def z_value(interval: float) -> float:
    """The standard normal quantile of a two-sided ``interval`` (0.9 → 1.645).

    Examples
    --------
    >>> round(z_value(0.9), 4), round(z_value(0.95), 4)
    (1.6449, 1.96)
    >>> z_value(1.0)
    Traceback (most recent call last):
    ...
    postproc.errors.PostprocError: interval must be a probability strictly between 0 and 1 ...
    """
    if isinstance(interval, bool) or not isinstance(interval, (int, float)) or not (
            0.0 < float(interval) < 1.0):
        raise PostprocError(f"interval must be a probability strictly between 0 and 1 (e.g. "
                            f"0.9 for 90 % intervals), got {interval!r}")
    return float(norm.ppf(0.5 + float(interval) / 2.0))


def _uncertainty(result: Result) -> Any:
    if result.uncertainty is None:
        raise PostprocError(
            f"{result.method}: this result carries no covariance, so its counts have no exact "
            f"intervals; 'gls' results do. For {result.method} use approximate replicate "
            f"intervals: postproc.methods.replicates.replicate_intervals(result, noisy, "
            f"{result.method!r}, spec, level=...)")
    return result.uncertainty


def interval_frame(result: Result, level: str | int, query: Any = "total", *,
                   interval: float = 0.9) -> pd.DataFrame:
    """Estimates, standard errors and intervals of a query's answers for every unit of a level.

    Parameters
    ----------
    result : Result
        With :attr:`~postproc.result.Result.uncertainty` (a ``gls`` result).
    level : str or int
    query : str, Query, optional
        A workload query's name, a query expression (``"marginal(votingage)"``) or a Query;
        default the total.
    interval : float, optional
        Two-sided coverage (default 0.9).

    Returns
    -------
    pandas.DataFrame
        One row per unit and answer: the level's geocode, ``answer`` (its label), ``estimate``,
        ``se``, ``lower``, ``upper``; ``attrs`` record the method, query, interval and the
        measurements' randomness (``"simulation"`` or ``"release"``, and its label).

    Examples
    --------
    >>> from hierarchy import E2E_1940, Budget, e2e_workload, measure, synthesize_1940, tabulate
    >>> from postproc.methods.gls import gls
    >>> levels = ["nation", "state"]
    >>> truth = tabulate(synthesize_1940(2_000, seed=1).persons, schema=E2E_1940, levels=levels)
    >>> noisy = measure(truth, e2e_workload(E2E_1940), Budget.e2e(1, levels), rng=4)
    >>> frame = interval_frame(gls(noisy), "state", "hhgq", interval=0.9)
    >>> frame.shape, list(frame.columns), frame.attrs["randomness"]
    ((392, 6), ['state', 'answer', 'estimate', 'se', 'lower', 'upper'], 'simulation')
    >>> bool(np.allclose((frame.upper - frame.lower) / frame.se, 2 * z_value(0.9)))
    True
    """
    uncertainty = _uncertainty(result)
    z = z_value(interval)
    li = result.geography.level_index(level)
    name = result.geography.levels[li]
    q = resolve_query(query, result.schema, result.workload)
    estimate = q.answer(result.level_histograms(li)).astype(np.float64)
    se = np.sqrt(uncertainty.variances(li, q.matrix))
    frame = interval_table(name, result.geography.geocodes[li], q, estimate, se, z)
    frame.attrs.update({"method": result.method, "query": q.name, "interval": float(interval),
                        "randomness": result.randomness.get("mode", "unknown"),
                        "randomness_label": result.randomness.get("label", "")})
    return frame


def group_interval_frame(result: Result, level: str | int, query: Any = "total", *,
                         groups: Any, interval: float = 0.9) -> pd.DataFrame:
    """Estimates, standard errors and intervals of a query's answers summed over sets of units
    of a level (a region of counties, tracts of several counties): exact, the covariances
    between units included (``docs/gls.md``, "Intervals for sets of units").

    Parameters
    ----------
    result : Result
        With :attr:`~postproc.result.Result.uncertainty` (a ``gls`` result).
    level : str or int
    query : str, Query, optional
    groups : mapping or sequence
        Each unit's set: a mapping from the level's geocodes to set names (units not in it
        belong to none), or one name per unit of the level (None for none).
    interval : float, optional

    Returns
    -------
    pandas.DataFrame
        One row per set and answer: ``group``, ``answer``, ``estimate``, ``se``, ``lower``,
        ``upper``, ``units`` (how many units the set has).

    Examples
    --------
    >>> from hierarchy import E2E_1940, Budget, e2e_workload, measure, synthesize_1940, tabulate
    >>> from postproc.methods.gls import gls
    >>> levels = ["nation", "state"]
    >>> truth = tabulate(synthesize_1940(2_000, seed=1).persons, schema=E2E_1940, levels=levels)
    >>> result = gls(measure(truth, e2e_workload(E2E_1940), Budget.e2e(1, levels), rng=4))
    >>> codes = result.geography.geocodes[1]
    >>> frame = group_interval_frame(result, "state", "total",
    ...                              groups={codes[0]: "first two", codes[1]: "first two"})
    >>> frame[["group", "units"]].to_dict("list")
    {'group': ['first two'], 'units': [2]}
    >>> everything = group_interval_frame(result, "state", groups=["all"] * len(codes))
    >>> nation = interval_frame(result, "nation")
    >>> bool(np.isclose(everything.se[0], nation.se[0]))      # all states are the nation
    True
    """
    uncertainty = _uncertainty(result)
    if not hasattr(uncertainty, "sum_variances"):
        raise PostprocError(f"{result.method}: its covariance gives no sums over units")
    z = z_value(interval)
    li = result.geography.level_index(level)
    codes = np.asarray(result.geography.geocodes[li]).astype(str)
    labels = _group_labels(groups, codes, result.geography.levels[li])
    names = list(dict.fromkeys(lab for lab in labels if lab is not None))
    if not names:
        raise PostprocError("groups: no unit of the level is in a set")
    q = resolve_query(query, result.schema, result.workload)
    matrix = q.matrix.toarray() if hasattr(q.matrix, "toarray") else np.asarray(q.matrix)
    answers = q.answer(result.level_histograms(li)).astype(np.float64)
    member = np.array([names.index(lab) if lab is not None else -1 for lab in labels])
    units, cells = codes.size, matrix.shape[1]
    estimate = np.zeros((len(names), matrix.shape[0]))
    np.add.at(estimate, member[member >= 0], answers[member >= 0])
    variance = np.empty(estimate.size)
    per = max(1, int(2**24 // max(1, units * cells)))                 # functionals at a time
    for lo in range(0, estimate.size, per):
        js = np.arange(lo, min(lo + per, estimate.size))
        rows = np.zeros((units, js.size, cells))
        g, a = np.divmod(js, matrix.shape[0])
        for i in range(js.size):
            rows[member == g[i], i] = matrix[a[i]]
        variance[js] = uncertainty.sum_variances(li, rows)
    se = np.sqrt(variance).reshape(estimate.shape)
    frame = interval_table("group", names, q, estimate, se, z)
    frame["units"] = np.repeat(np.bincount(member[member >= 0], minlength=len(names)),
                               estimate.shape[1])
    frame.attrs.update({"method": result.method, "query": q.name, "interval": float(interval),
                        "level": result.geography.levels[li],
                        "randomness": result.randomness.get("mode", "unknown"),
                        "randomness_label": result.randomness.get("label", "")})
    return frame


def interval_table(column: str, keys: Any, query: Any, estimate: np.ndarray, se: np.ndarray,
                   z: float) -> pd.DataFrame:
    """The long table of a query's answers (``estimate`` and ``se``: keys × answers): the
    ``column`` of keys, ``answer`` (its label), ``estimate``, ``se``, ``lower``, ``upper``.

    Examples
    --------
    >>> from hierarchy.frames import resolve_query
    >>> from hierarchy.schema import Attribute, Schema
    >>> q = resolve_query("total", Schema((Attribute("sex", ("male", "female")),)))
    >>> table = interval_table("state", ["01"], q, np.array([[10.0]]), np.array([[2.0]]), 1.0)
    >>> table.columns.tolist(), table[["lower", "upper"]].to_numpy().tolist()
    (['state', 'answer', 'estimate', 'se', 'lower', 'upper'], [[8.0, 12.0]])
    """
    labels = [", ".join(lab) if lab else "total" for lab in query.answer_labels]
    units, answers = estimate.shape
    return pd.DataFrame({
        column: np.repeat(np.asarray(keys, dtype=object), answers),
        "answer": np.tile(np.asarray(labels, dtype=object), units),
        "estimate": estimate.ravel(), "se": se.ravel(),
        "lower": (estimate - z * se).ravel(), "upper": (estimate + z * se).ravel()})


def _group_labels(groups: Any, codes: np.ndarray, level: str) -> list[Any]:
    """Each unit's set name (None: none), from a mapping by geocode or one name per unit."""
    if isinstance(groups, pd.Series) or hasattr(groups, "items"):
        mapping = {str(k): v for k, v in groups.items()}
        unknown = sorted(set(mapping) - set(codes))
        if unknown:
            raise PostprocError(f"groups: {len(unknown)} geocode(s) not of the {level} level, "
                                f"e.g. {unknown[0]!r}")
        return [mapping.get(c) for c in codes]
    labels = list(groups)
    if len(labels) != codes.size:
        raise PostprocError(f"groups: {len(labels)} names for {codes.size} {level} units; give "
                            f"one per unit (None for none) or a mapping from geocode to name")
    return [None if lab is None or (isinstance(lab, float) and np.isnan(lab)) else lab
            for lab in labels]


def cell_errors(result: Result, li: int) -> np.ndarray:
    """The standard error of every cell of every unit of level ``li`` (units × cells), for
    :meth:`Result.to_frame(..., interval=) <postproc.result.Result.to_frame>`."""
    uncertainty = _uncertainty(result)
    return np.sqrt(uncertainty.variances(li, np.eye(result.schema.size)))
