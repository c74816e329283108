"""Calibration to published totals only where they are consistent; the others reported.

A published total can disagree with the estimate it is meant to calibrate for reasons that have
nothing to do with the noise: the state total was published for boundaries that changed before
the county totals were (so it is not the sum of its counties'), or it counts another universe.
Calibrating to such a total moves every cell of the unit by the disagreement. Clark & Dajani
(2019) calibrated their 1960 weighted tabulation to the published state totals where these were
consistent and reported the geographies that were not (as the toolkit's issue describes the
paper; its text is not available to us). The rule here is ours:

**A unit of ``level`` is consistent** when

1. its total is published (a finite number ≥ 0; NaN means not published);
2. the noisy sum ``S`` of its bottom-level cells is positive, and the ratio of the published
   total ``T`` to it lies in ``[1/(1 + band), 1 + band]`` (default ``band = 0.1``): a
   calibration factor further from 1 means the total does not describe the same persons as the
   estimate (noise and sampling error of a unit of any size move ``S`` far less);
3. where the totals of *all* its children (the level below) are published, ``T`` equals their
   sum within ``tolerance`` (default 0: exactly). Where some child's total is not published,
   this check is not made.

Only the published totals and the noisy values are read, never the confidential data: the rule
is post-processing, costs no privacy, and the report may be published beside the estimates.
A consistent unit's bottom-level cells are scaled by ``T/S`` (``proportional``, the default: the
noise keeps its sign, no clipping) or shifted by ``(T − S)/cells`` (``additive``); the cells of an
inconsistent unit are left as they were. The levels above are re-summed.

Examples
--------
>>> from hierarchy.geography import Geography
>>> from hierarchy.queries import Workload, detailed
>>> from hierarchy.schema import Attribute, Schema
>>> from postproc.methods.baselines.reconcile import sums_from_bottom
>>> schema = Schema((Attribute("sex", ("male", "female")),))
>>> geo = Geography(("nation", "state", "county"), (["US"], ["A", "B"], ["A1", "A2", "B1"]),
...                 ([-1], [0, 0], [0, 0, 1]))
>>> bottom = np.array([[10.0, 12.0], [5.0, 3.0], [20.0, 21.0]])
>>> raw = Result("bottom_up", schema, geo, Workload((detailed(schema),)),
...              sums_from_bottom(geo, bottom))
>>> county_totals = [21.0, 9.0, 41.0]
>>> calibrated, report = calibrate_consistent(raw, "state", [30.0, 44.0],
...                                           published_below=county_totals)
>>> calibrated.histograms[1].sum(axis=1).tolist()      # A calibrated, B left as it was
[30.0, 41.0]
>>> print(report.loc[1, "reason"])
published total 44 differs from 41, the sum of its 1 county totals (by +3)
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from hierarchy.errors import HierarchyError
from postproc.errors import PostprocError
from postproc.methods.baselines.reconcile import sums_from_bottom
from postproc.result import Result

__all__ = ["check_consistency", "calibrate_consistent", "CALIBRATION_METHODS"]

#: How a consistent unit's cells are moved to its published total.
CALIBRATION_METHODS = ("proportional", "additive")


def check_consistency(estimate: Result, level: str, published: Any, *,
                      published_below: Any = None, band: float = 0.1,
                      tolerance: float = 0.0) -> pd.DataFrame:
    """Which units of ``level`` may be calibrated to their published totals, and why not (the
    module's rule).

    Parameters
    ----------
    estimate : Result
        Every level's histograms (only the bottom level's are read).
    level : str
        The level whose totals are published.
    published : array_like, shape (units of ``level``,)
        The published totals; NaN where none is published.
    published_below : array_like, shape (units of the level below,), optional
        The published totals of the level below (NaN where none is).
    band : float
        The largest relative departure of ``T/S`` from 1 (``math.inf``: no check but ``S > 0``).
    tolerance : float
        The largest ``|T − Σ children's published totals|``.

    Returns
    -------
    pandas.DataFrame
        One row per unit: ``geocode``, ``published``, ``noisy_sum``, ``ratio``,
        ``children``, ``children_published``, ``children_sum`` and ``difference`` (NaN unless
        every child's total is published), ``consistent`` and ``reason`` (empty when
        consistent; reasons joined by ``"; "``).

    Raises
    ------
    PostprocError
        Totals of the wrong length, negative or infinite; an unknown level, totals below the
        bottom level, a negative band or tolerance, or a partial estimate.

    Examples
    --------
    >>> from hierarchy.geography import Geography
    >>> from hierarchy.queries import Workload, detailed
    >>> from hierarchy.schema import Attribute, Schema
    >>> from postproc.methods.baselines.reconcile import sums_from_bottom
    >>> schema = Schema((Attribute("sex", ("male", "female")),))
    >>> geo = Geography(("nation", "state"), (["US"], ["A", "B", "C"]), ([-1], [0, 0, 0]))
    >>> raw = Result("bottom_up", schema, geo, Workload((detailed(schema),)),
    ...              sums_from_bottom(geo, np.array([[50.0, 50.0], [-3.0, 1.0], [40, 40]])))
    >>> report = check_consistency(raw, "state", [104.0, 5.0, math.nan])
    >>> report[["geocode", "ratio", "consistent"]].values.tolist()
    [['A', 1.04, True], ['B', nan, False], ['C', nan, False]]
    >>> report["reason"].tolist()[1:]
    ['noisy sum -2 is not positive: no calibration factor', 'no published total']
    """
    geo, li, owner, bottom = _setting(estimate, level)
    band, tolerance = _nonnegative(band, "band"), _nonnegative(tolerance, "tolerance")
    totals = _totals(published, geo.n_units(li), f"published totals of {geo.levels[li]!r}")
    sums = np.bincount(owner, weights=bottom.sum(axis=1), minlength=totals.size)
    children = np.zeros(totals.size, dtype=np.int64)
    children_published = np.zeros(totals.size, dtype=np.int64)
    children_sum = np.full(totals.size, np.nan)
    below = None
    if published_below is not None:
        if li == geo.depth - 1:
            raise PostprocError(f"level {geo.levels[li]!r} is the bottom level: it has no "
                                f"totals below it")
        below = geo.levels[li + 1]
        lower = _totals(published_below, geo.n_units(li + 1), f"published totals of {below!r}")
        parent = geo.parents[li + 1]
        children = np.bincount(parent, minlength=totals.size)
        children_published = np.bincount(parent, weights=np.isfinite(lower),
                                          minlength=totals.size).astype(np.int64)
        full = children_published == children
        summed = np.bincount(parent, weights=np.nan_to_num(lower), minlength=totals.size)
        children_sum = np.where(full & (children > 0), summed, np.nan)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(sums > 0, totals / sums, np.nan)
    difference = totals - children_sum
    reasons = [_reasons(t, s, r, k, d, band, tolerance, below)
               for t, s, r, k, d in zip(totals, sums, ratio, children, difference)]
    return pd.DataFrame({"geocode": np.asarray(geo.geocodes[li]).astype(str), "published": totals,
                         "noisy_sum": sums, "ratio": ratio, "children": children,
                         "children_published": children_published,
                         "children_sum": children_sum, "difference": difference,
                         "consistent": [not r for r in reasons],
                         "reason": ["; ".join(r) for r in reasons]})


def _reasons(total: float, noisy: float, ratio: float, children: int, difference: float,
             band: float, tolerance: float, below: str | None) -> list[str]:
    """Why one unit is not consistent (empty: it is)."""
    if not math.isfinite(total):
        return ["no published total"]
    out = []
    if not noisy > 0:
        out.append(f"noisy sum {noisy:,.6g} is not positive: no calibration factor")
    elif not (1 / (1 + band) <= ratio <= 1 + band):
        out.append(f"published/noisy ratio {ratio:.4g} outside [{1 / (1 + band):.4g}, "
                   f"{1 + band:.4g}]")
    if math.isfinite(difference) and abs(difference) > tolerance:
        out.append(f"published total {total:,.6g} differs from {total - difference:,.6g}, the "
                   f"sum of its {children} {below} totals (by {difference:+,.6g})")
    return out


def calibrate_consistent(estimate: Result, level: str, published: Any, *,
                         published_below: Any = None, band: float = 0.1,
                         tolerance: float = 0.0, method: str = "proportional"
                         ) -> tuple[Result, pd.DataFrame]:
    """Calibrate the bottom-level cells of every consistent unit of ``level`` to its published
    total; leave the others as they are and report them (the module's rule).

    Parameters
    ----------
    estimate, level, published, published_below, band, tolerance
        As :func:`check_consistency`.
    method : {'proportional', 'additive'}
        Scale a consistent unit's cells by ``T/S``, or shift each by ``(T − S)/cells``.

    Returns
    -------
    (Result, pandas.DataFrame)
        ``estimate.method + "+calibrated_consistent"``, float64, consistent, with the published
        totals at the consistent units (up to float rounding) and the raw cells elsewhere;
        ``provenance["calibration"]`` names the rule and the units left out, with their reasons.
        The report is :func:`check_consistency`'s.

    Raises
    ------
    PostprocError
        As :func:`check_consistency`, or an unknown method.

    Examples
    --------
    >>> from hierarchy.geography import Geography
    >>> from hierarchy.queries import Workload, detailed
    >>> from hierarchy.schema import Attribute, Schema
    >>> from postproc.methods.baselines.reconcile import sums_from_bottom
    >>> schema = Schema((Attribute("sex", ("male", "female")),))
    >>> geo = Geography(("nation", "state"), (["US"], ["A", "B"]), ([-1], [0, 0]))
    >>> raw = Result("bottom_up", schema, geo, Workload((detailed(schema),)),
    ...              sums_from_bottom(geo, np.array([[50.0, 50.0], [10.0, 10.0]])))
    >>> cal, report = calibrate_consistent(raw, "state", [110.0, 40.0])
    >>> cal.histograms[1].tolist(), report["consistent"].tolist()
    ([[55.0, 55.0], [10.0, 10.0]], [True, False])
    >>> cal.provenance["calibration"]["not_calibrated"]
    {'B': 'published/noisy ratio 2 outside [0.9091, 1.1]'}
    """
    if method not in CALIBRATION_METHODS:
        raise PostprocError(f"calibration method must be one of {list(CALIBRATION_METHODS)}, "
                            f"not {method!r}")
    report = check_consistency(estimate, level, published, published_below=published_below,
                               band=band, tolerance=tolerance)
    geo, li, owner, bottom = _setting(estimate, level)
    ok = report["consistent"].to_numpy()
    totals = report["published"].to_numpy()
    sums = report["noisy_sum"].to_numpy()
    moved = ok[owner]
    if method == "proportional":
        factor = np.where(ok, totals / np.where(ok, sums, 1.0), 1.0)
        bottom = bottom * factor[owner][:, None]
    else:
        cells = np.bincount(owner, minlength=ok.size) * bottom.shape[1]
        shift = np.where(ok, (totals - sums) / np.maximum(cells, 1), 0.0)
        bottom = bottom + np.where(moved, shift[owner], 0.0)[:, None]
    left_out = report[~report["consistent"]]
    calibration = {"to": geo.levels[li], "method": method, "band": band,
                   "tolerance": tolerance, "calibrated": int(ok.sum()),
                   "not_calibrated": dict(zip(left_out["geocode"], left_out["reason"]))}
    return (Result(f"{estimate.method}+calibrated_consistent", estimate.schema, geo,
                   estimate.workload, sums_from_bottom(geo, bottom),
                   {**estimate.provenance, "calibration": calibration}), report)


def _setting(estimate: Result, level: str):
    """The geography, the level's index, every bottom unit's owner at that level and the bottom
    level's cells (float64)."""
    if not isinstance(estimate, Result):
        raise PostprocError(f"calibration needs a Result, not {type(estimate).__name__}")
    geo = estimate.geography
    if len(estimate.histograms) != geo.depth:
        raise PostprocError("calibration needs every level of the estimate, down to the bottom")
    try:
        li = geo.level_index(level)
    except HierarchyError:
        raise PostprocError(f"unknown level {level!r}; levels are {list(geo.levels)}") from None
    owner = np.arange(geo.n_units(-1))
    for lv in range(geo.depth - 1, li, -1):
        owner = geo.parents[lv][owner]
    return geo, li, owner, np.asarray(estimate.histograms[-1], dtype=np.float64)


def _totals(values: Any, size: int, what: str) -> np.ndarray:
    totals = np.asarray(values, dtype=np.float64).ravel()
    if totals.size != size:
        raise PostprocError(f"{totals.size} {what} for {size} units")
    if np.any(np.isinf(totals)) or np.any(totals < 0):
        raise PostprocError(f"{what} must be finite and ≥ 0 (NaN: not published)")
    return totals


def _nonnegative(value: Any, what: str) -> float:
    try:
        value = float(value)
    except (TypeError, ValueError):
        value = math.nan
    if not value >= 0:
        raise PostprocError(f"{what} must be a number ≥ 0")
    return value
