"""The result type of baselines on the hierarchy data model: real-valued histograms per level."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

import numpy as np

from hierarchy.geography import Geography
from hierarchy.queries import Query, Workload, parse_query
from hierarchy.schema import Schema
from postproc.errors import PostprocError

__all__ = ["Estimate", "resolve_query"]


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
    PostprocError
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
    postproc.errors.PostprocError: unknown query 'vhr': not in the workload [...] and not an ...
    """
    if isinstance(query, Query):
        return query
    if workload is not None and query in workload:
        return workload[query]
    from hierarchy.errors import HierarchyError
    try:
        return parse_query(query, schema, name=query)
    except HierarchyError as exc:
        names = list(workload.names) if workload is not None else []
        raise PostprocError(f"unknown query {query!r}: not in the workload {names} and not an "
                            f"expression ({exc})") from None


@dataclass(frozen=True, eq=False)
class Estimate:
    """Histograms of every unit of every level, as a baseline post-processor leaves them.

    Unlike a :class:`~postproc.topdown.TopDownResult` the counts may be fractional, negative, or
    inconsistent between levels: which of these hold is the point of each baseline.

    Parameters
    ----------
    method : str
        What made it (``"hay"``, ``"clip"``, ``"bottom_up"``, ``"srs f=0.25"``, …).
    schema, geography, workload
        The data model the histograms refer to.
    histograms : tuple of arrays
        ``histograms[l]`` has shape (units of level ``l``, ``schema.size``), root first.
    provenance : dict
        JSON-ready description of how it was made (budget, randomness, options).

    Raises
    ------
    PostprocError
        Wrong number of levels or wrong shapes, or non-finite counts.

    Examples
    --------
    >>> from hierarchy.schema import E2E_1940
    >>> from hierarchy.queries import e2e_workload
    >>> from hierarchy.geography import Geography
    >>> geo = Geography(("nation",), (np.array(["0"]),), (np.array([-1]),))
    >>> est = Estimate("example", E2E_1940, geo, e2e_workload(E2E_1940), (np.ones((1, 192)),))
    >>> est.answers("nation", "total")
    array([[192.]])
    >>> est.answers("nation", "va_hisp_race").shape
    (1, 24)
    """

    method: str
    schema: Schema
    geography: Geography
    workload: Workload
    histograms: tuple[np.ndarray, ...]
    provenance: Mapping[str, Any] = field(default_factory=dict, repr=False)

    def __post_init__(self):
        hists = tuple(np.asarray(h) for h in self.histograms)
        if len(hists) != self.geography.depth:
            raise PostprocError(f"{self.method}: {len(hists)} histogram arrays for the "
                                f"{self.geography.depth} levels {list(self.geography.levels)}")
        for level, h in zip(self.geography.levels, hists):
            want = (self.geography.n_units(level), self.schema.size)
            if h.shape != want:
                raise PostprocError(f"{self.method}: level {level!r} histograms have shape "
                                    f"{h.shape}, expected {want}")
            if h.dtype.kind not in "iuf" or (h.dtype.kind == "f" and not np.isfinite(h).all()):
                raise PostprocError(f"{self.method}: level {level!r} histograms must be finite "
                                    f"numbers")
        object.__setattr__(self, "histograms", hists)
        object.__setattr__(self, "provenance", dict(self.provenance))

    @property
    def levels(self) -> tuple[str, ...]:
        """Level names, root first."""
        return self.geography.levels

    def level_histograms(self, level: str | int) -> np.ndarray:
        """Histograms of one level, shape (units, cells)."""
        return self.histograms[self.geography.level_index(level)]

    def answers(self, level: str | int, query: str | Query) -> np.ndarray:
        """Answers of a workload query, a query expression or a Query, shape (units, answers)."""
        q = resolve_query(query, self.schema, self.workload)
        return q.answer(self.level_histograms(level))

    def __repr__(self) -> str:
        sizes = ", ".join(f"{lv}={h.shape[0]}" for lv, h in zip(self.levels, self.histograms))
        return f"Estimate({self.method!r}; {sizes})"
