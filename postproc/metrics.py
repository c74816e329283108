"""Error metrics of post-processed counts (SPEC §7), as dicts and tidy DataFrames.

For the errors ``e = DP − exact`` of one level and one query (all units, all cells pooled):

========================  =====================================================================
``n``                     number of errors
``mae``                   **median** absolute error (the census convention, not the mean)
``mean_abs``              mean absolute error (L1)
``mse``                   mean squared error (L2)
``rmse``                  root mean squared error
``p95_abs``, ``max_abs``  95th percentile and maximum of ``|e|``
``exact_median``,         median and 95th percentile of the exact counts, for scale
``exact_p95``
========================  =====================================================================

Percentiles are numpy's default (linear interpolation). The *homogeneity index* of a unit is the
number of zero cells in its exact ``va_hisp_race`` table (24 cells in the E2E schema, so 0–23);
:func:`bias_by_homogeneity` gives the mean error of the unit totals per index.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np
import pandas as pd

from postproc.errors import PostprocError

__all__ = ["METRICS", "error_metrics", "error_table", "homogeneity_index",
           "bias_by_homogeneity"]

METRICS = ("n", "mae", "mean_abs", "mse", "rmse", "p95_abs", "max_abs", "exact_median",
           "exact_p95")


def _numeric(values: Any, what: str) -> np.ndarray:
    try:
        array = np.asarray(values, dtype=float)
    except (TypeError, ValueError) as exc:
        raise PostprocError(f"{what} must be numbers: {exc}") from None
    bad = ~np.isfinite(array)
    if bad.any():
        index = tuple(int(i) for i in np.argwhere(bad)[0])
        raise PostprocError(f"{what} must be finite; entry {index} is {array[index]}")
    return array


def _pair(dp: Any, exact: Any, what: str) -> tuple[np.ndarray, np.ndarray]:
    dp = _numeric(dp, f"DP counts{what}")
    exact = _numeric(exact, f"exact counts{what}")
    if dp.shape != exact.shape:
        raise PostprocError(f"DP counts{what} have shape {dp.shape} but exact counts "
                            f"{exact.shape}; pass one answer per unit and cell in both")
    return dp.ravel(), exact.ravel()


def error_metrics(dp: Any, exact: Any) -> dict[str, float]:
    """The SPEC §7 error metrics of ``DP − exact`` (all entries pooled).

    Parameters
    ----------
    dp, exact : array_like
        Post-processed and exact counts of the same units and cells (same shape).

    Returns
    -------
    dict
        Keys :data:`METRICS`; ``n`` is an int, the rest floats (``nan`` when ``n = 0``).

    Raises
    ------
    PostprocError
        Different shapes, non-numeric or non-finite entries.

    Examples
    --------
    >>> m = error_metrics([3, 5, 10, 0], [1, 5, 6, 1])      # errors 2, 0, 4, -1
    >>> m["n"], m["mae"], m["mean_abs"], m["mse"], m["max_abs"]
    (4, 1.5, 1.75, 5.25, 4.0)
    >>> round(m["rmse"], 4), round(m["p95_abs"], 2), m["exact_median"]
    (2.2913, 3.7, 3.0)
    """
    dp, exact = _pair(dp, exact, "")
    if dp.size == 0:
        return {"n": 0, **{name: float("nan") for name in METRICS[1:]}}
    error = dp - exact
    absolute = np.abs(error)
    mse = float(np.mean(error * error))
    p95_abs = np.percentile(absolute, 95)
    exact_median, exact_p95 = np.percentile(exact, [50, 95])
    return {"n": int(error.size), "mae": float(np.median(absolute)),
            "mean_abs": float(np.mean(absolute)), "mse": mse, "rmse": float(np.sqrt(mse)),
            "p95_abs": float(p95_abs), "max_abs": float(np.max(absolute)),
            "exact_median": float(exact_median), "exact_p95": float(exact_p95)}


def error_table(records: Iterable[tuple] | Mapping[Any, tuple], *,
                by: tuple[str, ...] = ("level", "query")) -> pd.DataFrame:
    """A tidy table of :func:`error_metrics`, one row per group (by default per level and query).

    Parameters
    ----------
    records : iterable of tuples, or mapping
        Each record is ``(*labels, dp, exact)`` with one label per name in ``by``, e.g.
        ``("county", "total", dp, exact)``; or a mapping ``{labels: (dp, exact)}`` (``labels`` a
        tuple, or a single label when ``by`` has one name).
    by : tuple of str
        Names of the label columns.

    Returns
    -------
    pandas.DataFrame
        Columns ``by`` then :data:`METRICS`, rows in the order of ``records``.

    Raises
    ------
    PostprocError
        A record of the wrong length, repeated labels, or bad counts (the message names the
        record's labels).

    Examples
    --------
    >>> table = error_table([("state", "total", [10, 12], [11, 12]),
    ...                      ("county", "total", [3, 5, 10, 0], [1, 5, 6, 1])])
    >>> table[["level", "query", "n", "mae", "mean_abs"]]
        level  query  n  mae  mean_abs
    0   state  total  2  0.5      0.50
    1  county  total  4  1.5      1.75
    """
    by = (by,) if isinstance(by, str) else tuple(by)
    if isinstance(records, Mapping):
        records = [(*(labels if isinstance(labels, tuple) else (labels,)), *pair)
                   for labels, pair in records.items()]
    rows, seen = [], set()
    for position, record in enumerate(records):
        record = tuple(record)
        if len(record) != len(by) + 2:
            raise PostprocError(f"record {position} has {len(record)} items; expected "
                                f"{len(by)} labels ({', '.join(by)}) then the DP and exact counts")
        labels = record[:len(by)]
        if labels in seen:
            raise PostprocError(f"labels {labels} appear twice; give each group one record")
        seen.add(labels)
        what = " of " + ", ".join(f"{name}={label!r}" for name, label in zip(by, labels))
        dp, exact = _pair(record[-2], record[-1], what)
        rows.append({**dict(zip(by, labels)), **error_metrics(dp, exact)})
    return pd.DataFrame(rows, columns=[*by, *METRICS])


def homogeneity_index(exact_tables: Any) -> np.ndarray:
    """The number of zero cells in each unit's exact table.

    Parameters
    ----------
    exact_tables : array_like, shape (n_units, n_cells)
        Exact counts per unit, e.g. the 24 cells of ``va_hisp_race`` (index 0–23; a unit with
        all 24 cells zero, index 24, has no persons).

    Returns
    -------
    numpy.ndarray of int64, shape (n_units,)

    Raises
    ------
    PostprocError
        Not a 2-D table of finite numbers.

    Examples
    --------
    >>> homogeneity_index([[0, 3, 0, 1], [2, 2, 2, 2], [0, 0, 0, 7]])
    array([2, 0, 3])
    """
    tables = _numeric(exact_tables, "exact tables")
    if tables.ndim != 2:
        raise PostprocError(f"exact tables must be 2-D (units × cells), not shape {tables.shape}")
    return np.count_nonzero(tables == 0, axis=1).astype(np.int64)


def bias_by_homogeneity(dp_total: Any, exact_total: Any, homogeneity: Any) -> pd.DataFrame:
    """Mean error ``DP − exact`` of unit totals for each homogeneity index, with its standard error.

    Parameters
    ----------
    dp_total, exact_total : array_like, shape (n_units,)
        Post-processed and exact total count of each unit.
    homogeneity : array_like of int, shape (n_units,)
        Each unit's :func:`homogeneity_index`.

    Returns
    -------
    pandas.DataFrame
        Columns ``homogeneity_index`` (each index present, ascending), ``n`` (units), ``bias``
        (mean error) and ``se`` (sample sd / √n; ``nan`` for a single unit).

    Raises
    ------
    PostprocError
        Lengths differ, or an index is negative or not an integer.

    Examples
    --------
    >>> bias_by_homogeneity([10, 12, 5, 9], [11, 10, 5, 8], [0, 0, 3, 3])
       homogeneity_index  n  bias        se
    0                  0  2   0.5  1.500000
    1                  3  2   0.5  0.500000
    """
    dp, exact = _pair(dp_total, exact_total, " (unit totals)")
    index = _numeric(homogeneity, "homogeneity indices").ravel()
    if index.size != dp.size:
        raise PostprocError(f"{index.size} homogeneity indices for {dp.size} units; pass one "
                            f"per unit")
    if index.size and (index.min() < 0 or not np.array_equal(index, np.rint(index))):
        raise PostprocError("homogeneity indices must be non-negative integers (zero-cell counts)")
    index = index.astype(np.int64)
    error = dp - exact
    count = np.bincount(index)
    with np.errstate(invalid="ignore"):              # indices no unit has: 0 / 0, dropped below
        mean = np.bincount(index, error) / count
    deviation = error - mean[index]
    squares = np.bincount(index, deviation * deviation)
    present = np.flatnonzero(count)
    n = count[present]
    se = np.full(present.size, np.nan)
    several = n > 1
    se[several] = np.sqrt(squares[present][several] / (n[several] - 1) / n[several])
    return pd.DataFrame({"homogeneity_index": present, "n": n, "bias": mean[present], "se": se})
