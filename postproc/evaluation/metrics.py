"""Error metrics of post-processed counts (docs/metrics.md), as dicts and tidy DataFrames.

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

Percentiles are numpy's default (linear interpolation).

The *homogeneity index* of a unit (Petti & Flaxman 2020) says how few of the 24 votingage ×
hispanic × cenrace groups live there; :func:`homogeneity_index` computes it from the unit's exact
``va_hisp_race`` table in one of two ways, and :func:`bias_by_homogeneity` gives the mean error of
the unit totals per index:

``"authors"`` (default; what the authors' public code computes)
    ``24 − n_va · n_hisp · n_race``, where ``n_a`` is the number of levels of attribute ``a``
    held by at least one person of the unit: 24 minus the size of the cross-product of the
    levels present, *attribute by attribute*.
``"zero_cells"`` (what the paper's text says)
    The number of empty cells of the 24: 24 minus the number of *combinations* present.

The combinations present are a subset of the cross-product of the levels present, so the first
never exceeds the second; they are equal exactly when the populated cells form a full
cross-product (a unit of white adults of both ethnicities: 2 cells, index 22 either way). They
differ when the groups do not cross: non-Hispanic white adults and Hispanic black children
occupy 2 cells (``zero_cells`` 22) but 2 × 2 × 2 level combinations (``authors`` 16).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np
import pandas as pd

from postproc.errors import PostprocError

__all__ = ["METRICS", "HOMOGENEITY_DEFINITIONS", "VA_HISP_RACE_SHAPE", "error_metrics",
           "error_table", "homogeneity_index", "bias_by_homogeneity"]

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
    """The error metrics of ``DP − exact`` (docs/metrics.md) (all entries pooled).

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


#: The definitions :func:`homogeneity_index` offers.
HOMOGENEITY_DEFINITIONS = ("authors", "zero_cells")

#: Attribute sizes of the E2E ``va_hisp_race`` table (votingage, hispanic, cenrace).
VA_HISP_RACE_SHAPE = (2, 2, 6)


def homogeneity_index(exact_tables: Any, *, definition: str = "authors",
                      shape: tuple[int, ...] = VA_HISP_RACE_SHAPE) -> np.ndarray:
    """The homogeneity index of each unit: how many of its table's cells its groups leave out.

    Parameters
    ----------
    exact_tables : array_like, shape (n_units, n_cells)
        Exact counts per unit of a table whose cells are the row-major cross-product of
        attributes of sizes ``shape`` (first attribute slowest), e.g. the 24 cells of
        ``va_hisp_race``.
    definition : {'authors', 'zero_cells'}
        ``"authors"`` (default): ``n_cells − Π_a n_a`` with ``n_a`` the number of levels of
        attribute ``a`` that at least one person of the unit has — what Petti & Flaxman's
        public code computes (``potential_cells − Π nunique``). ``"zero_cells"``: the number of
        empty cells — the paper's text. The first is never larger; they differ when the
        populated cells are not a full cross-product of the levels present (module docstring).
    shape : tuple of int
        Attribute sizes, product ``n_cells`` (default ``(2, 2, 6)``: votingage, hispanic,
        cenrace). Only ``"authors"`` uses it.

    Returns
    -------
    numpy.ndarray of int64, shape (n_units,)
        From 0 (every level of every attribute present) to ``n_cells − 1``; a unit with no
        persons has ``n_cells`` under both definitions.

    Raises
    ------
    PostprocError
        Not a 2-D table of finite numbers, an unknown definition, or a ``shape`` whose product
        is not the number of cells.

    Examples
    --------
    Non-Hispanic white adults and Hispanic black children (2 of 24 cells), then a unit of
    white adults of both ethnicities (2 cells forming a 1 × 2 × 1 cross-product):

    >>> units = np.zeros((2, 2, 2, 6))
    >>> units[0, 1, 0, 0] = 40; units[0, 0, 1, 1] = 7
    >>> units[1, 1, 0, 0] = 30; units[1, 1, 1, 0] = 5
    >>> homogeneity_index(units.reshape(2, 24))
    array([16, 22])
    >>> homogeneity_index(units.reshape(2, 24), definition="zero_cells")
    array([22, 22])
    >>> homogeneity_index([[0, 3, 0, 1], [2, 2, 2, 2]], definition="zero_cells")
    array([2, 0])
    """
    tables = _numeric(exact_tables, "exact tables")
    if tables.ndim != 2:
        raise PostprocError(f"exact tables must be 2-D (units × cells), not shape {tables.shape}")
    if definition not in HOMOGENEITY_DEFINITIONS:
        raise PostprocError(f"unknown homogeneity definition {definition!r}; use one of "
                            f"{', '.join(HOMOGENEITY_DEFINITIONS)}")
    cells = tables.shape[1]
    if definition == "zero_cells":
        return np.count_nonzero(tables == 0, axis=1).astype(np.int64)
    shape = tuple(int(size) for size in shape)
    if not shape or min(shape) < 1 or int(np.prod(shape)) != cells:
        raise PostprocError(f"the tables have {cells} cells but shape {shape} has "
                            f"{int(np.prod(shape)) if shape else 0}; pass the attribute sizes "
                            f"of the table as shape= (or definition='zero_cells')")
    present = tables.reshape(-1, *shape) > 0
    product = np.ones(tables.shape[0], dtype=np.int64)
    for axis in range(len(shape)):
        others = tuple(a + 1 for a in range(len(shape)) if a != axis)
        product *= np.count_nonzero(present.any(axis=others), axis=1)
    return (cells - product).astype(np.int64)


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
        raise PostprocError("homogeneity indices must be non-negative integers")
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
