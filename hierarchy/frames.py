"""The one reading protocol of histograms per level: answers of any query, tidy frames.

The truth (:class:`~hierarchy.histograms.Hierarchy`), the raw measurements
(:class:`~hierarchy.noisy.NoisyHierarchy`) and every post-processed result
(:class:`postproc.result.Result`) answer ``answers(level, query)`` for a workload query name, a
query expression (``"total"``, ``"marginal(sex)"``, ``"va * hisp"`` …) or a
:class:`~hierarchy.queries.Query`, and the histogram holders give ``to_frame(level, labels=True,
parents=True, zeros=False)``. The pieces they share live here.

Examples
--------
A query expression becomes a :class:`~hierarchy.queries.Query` that answers any histogram:

>>> import numpy as np
>>> from hierarchy.schema import E2E_1940
>>> q = resolve_query("marginal(votingage)", E2E_1940)
>>> q.answer_labels
[('under 18',), ('18+',)]
>>> q.answer(np.ones(E2E_1940.size, dtype=np.int64)).tolist()
[96, 96]
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from hierarchy.errors import HierarchyError
from hierarchy.geography import Geography
from hierarchy.queries import Query, Workload, parse_query
from hierarchy.schema import Schema

__all__ = ["resolve_query", "tidy_frame", "ancestors", "refinement"]


def resolve_query(query: str | Query, schema: Schema, workload: Workload | None = None) -> Query:
    """A :class:`~hierarchy.queries.Query` from a workload name or a query expression.

    Workload names come first (``va_hisp_race``, ``hhgq`` in the E2E workload); anything else is
    parsed as an expression (``total``, ``detailed``, ``marginal(cenrace)``, …) and named by it.

    Parameters
    ----------
    query : str or Query
    schema : Schema
    workload : Workload, optional

    Returns
    -------
    Query

    Raises
    ------
    HierarchyError
        Neither a workload name nor a valid expression.

    Examples
    --------
    >>> from hierarchy.schema import E2E_1940
    >>> from hierarchy.queries import e2e_workload
    >>> resolve_query("va_hisp_race", E2E_1940, e2e_workload(E2E_1940)).n_answers
    24
    >>> resolve_query("total", E2E_1940).name
    'total'
    >>> resolve_query("vhr", E2E_1940, e2e_workload(E2E_1940))
    Traceback (most recent call last):
    ...
    hierarchy.errors.HierarchyError: unknown query 'vhr': not in the workload [...] and not an ...
    """
    if isinstance(query, Query):
        return query
    if workload is not None and query in workload:
        return workload[query]
    try:
        return parse_query(query, schema, name=query)
    except HierarchyError as exc:
        names = list(workload.names) if workload is not None else []
        raise HierarchyError(f"unknown query {query!r}: not in the workload {names} and not an "
                             f"expression ({exc})") from None


def tidy_frame(schema: Schema, geography: Geography, li: int, hist: np.ndarray, *,
               labels: bool = True, parents: bool = True, zeros: bool = False) -> pd.DataFrame:
    """One level's (units × cells) histograms as a tidy DataFrame, one row per unit and cell.

    Parameters
    ----------
    schema : Schema
    geography : Geography
    li : int
        The level's index (root 0).
    hist : array, shape (units of the level, schema.size)
    labels : bool
        Attribute columns as categoricals of the schema's labels (else integer codes).
    parents : bool
        Geocode columns of every level above, root first.
    zeros : bool
        Keep the cells whose count is zero.

    Returns
    -------
    pandas.DataFrame
        Columns: the parent geocodes (if ``parents``), the level's geocode, one column per
        attribute, ``count``.

    Examples
    --------
    Two states, a one-attribute schema: by default zero cells are dropped and the parent
    geocodes come first.

    >>> import numpy as np
    >>> import pandas as pd
    >>> from hierarchy.schema import Schema, Attribute
    >>> from hierarchy.geography import Geography
    >>> schema = Schema((Attribute("sex", ("male", "female")),))
    >>> geo = Geography.from_frame(pd.DataFrame({"level": ["nation", "state", "state"],
    ...                                          "geocode": ["US", "A", "B"],
    ...                                          "parent": ["", "US", "US"]}), ["nation", "state"])
    >>> hist = np.array([[1, 4], [2, 0]])
    >>> tidy_frame(schema, geo, 1, hist)
      nation state     sex  count
    0     US     A    male      1
    1     US     A  female      4
    2     US     B    male      2

    Integer codes, no parent columns, every cell kept:

    >>> tidy_frame(schema, geo, 1, hist, labels=False, parents=False, zeros=True)
      state  sex  count
    0     A    0      1
    1     A    1      4
    2     B    0      2
    3     B    1      0
    """
    hist = np.asarray(hist)
    units, cells = (np.nonzero(hist) if not zeros else np.indices(hist.shape).reshape(2, -1))
    columns: dict[str, Any] = {}
    for lv, ix in ancestors(geography, li, units) if parents else []:
        columns[geography.levels[lv]] = geography.geocodes[lv].astype(str)[ix]
    columns[geography.levels[li]] = geography.geocodes[li].astype(str)[units]
    codes = np.unravel_index(cells, schema.shape)
    for attr, c in zip(schema.attributes, codes):
        columns[attr.name] = (pd.Categorical.from_codes(c, categories=list(attr.labels))
                              if labels else c.astype(np.int64))
    columns["count"] = hist[units, cells]
    return pd.DataFrame(columns)


def ancestors(geography: Geography, li: int, units: np.ndarray
              ) -> list[tuple[int, np.ndarray]]:
    """``(level index, unit indices)`` of the ancestors of ``units`` of level ``li``, root first.

    Examples
    --------
    >>> import numpy as np
    >>> import pandas as pd
    >>> from hierarchy.geography import Geography
    >>> geo = Geography.from_frame(pd.DataFrame({"level": ["nation", "state", "state"],
    ...                                          "geocode": ["US", "A", "B"],
    ...                                          "parent": ["", "US", "US"]}), ["nation", "state"])
    >>> [(lv, ix.tolist()) for lv, ix in ancestors(geo, 1, np.array([1, 0]))]
    [(0, [0, 0])]
    """
    out = []
    for lv in range(li, 0, -1):
        units = geography.parents[lv][units]
        out.append((lv - 1, units))
    return list(reversed(out))


def refinement(coarse: Query, fine: Query) -> np.ndarray | None:
    """``M`` (coarse answers × fine answers, 0/1) with ``Q_coarse = M Q_fine``, or None.

    A coarse query's answers are then sums of the fine query's: ``coarse = M @ fine``.

    Examples
    --------
    >>> from hierarchy.schema import E2E_1940
    >>> from hierarchy.queries import total, detailed, e2e_workload
    >>> M = refinement(total(E2E_1940), e2e_workload(E2E_1940)["va_hisp_race"])
    >>> M.shape, float(M.sum())
    ((1, 24), 24.0)
    >>> refinement(detailed(E2E_1940), total(E2E_1940)) is None
    True
    """
    qc = coarse.matrix.astype(np.float64).tocsr()
    qf = fine.matrix.astype(np.float64).tocsr()
    overlap = np.asarray((qc @ qf.T).todense())
    size = np.asarray(qf.sum(axis=1)).ravel()
    contained = (overlap == size[None, :]) & (size[None, :] > 0)
    mapping = contained.astype(np.float64)
    if abs(mapping @ qf - qc).sum() != 0:
        return None
    return mapping
