"""One verifier of a post-processed hierarchy's promises, in exact integer arithmetic.

Every post-processor declares what it promises — integer counts, consistency (children sum to
their parent in every cell), nonnegativity, the spec's invariants and constraints — and
:func:`verify_histograms` checks exactly those on any histograms, level by level. The registry of
post-processors (:mod:`postproc.methods`) calls it on every result, so a promise broken by any
method raises instead of passing silently.

Examples
--------
>>> import numpy as np
>>> from hierarchy.geography import Geography
>>> from hierarchy.schema import Schema, Attribute
>>> from invariants.spec import Spec
>>> schema = Schema((Attribute("sex", ("m", "f")),))
>>> geo = Geography(("nation", "state"), (np.array(["US"]), np.array(["A", "B"])),
...                 (np.array([-1]), np.array([0, 0])))
>>> hists = (np.array([[3, 4]]), np.array([[1, 4], [2, 1]]))
>>> for problem in verify_histograms(hists, Spec(), schema, geo, {}, consistent=True):
...     print(problem)
state units of nation 'US' sum to 5 in cell 1 (sex=f), the parent has 4
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np

from hierarchy.geography import Geography
from hierarchy.schema import Schema
from invariants.compile import compile_spec, violations
from invariants.errors import SpecError
from invariants.spec import Spec
from invariants.sums import sum_violations

__all__ = ["verify_histograms", "consistency_violations"]


def consistency_violations(geography: Geography, li: int, hist: np.ndarray,
                           parent_hist: np.ndarray, schema: Schema | None = None, *,
                           allowed: Mapping[str, Sequence[int]] | None = None,
                           limit: int = 5) -> list[str]:
    """Cells where the units of level ``li`` do not sum to their parent (exact for integers).

    ``allowed`` maps a parent's geocode to the cells in which a failsafe was allowed (and
    reported) to break consistency.

    Parameters
    ----------
    geography : Geography
    li : int
        The level of ``hist`` (≥ 1); its parents are level ``li - 1``.
    hist, parent_hist : arrays (units × cells)
        Histograms of level ``li`` and of level ``li - 1``. Integers are compared exactly,
        anything else to 1e-6 relative.
    schema : Schema, optional
        Names the cells in the messages.
    allowed : mapping parent geocode → cells, optional
    limit : int, optional
        At most this many messages (default 5).

    Returns
    -------
    list of str
        Empty when every parent equals the sum of its children.

    Examples
    --------
    >>> from hierarchy.schema import Attribute
    >>> schema = Schema((Attribute("tenure", ("owned", "rented")),))
    >>> geo, _ = Geography.from_columns(["nation", "county", "tract"],
    ...                                 [[["A", "A", "B"], ["A1", "A2", "B1"]]])
    >>> county = np.array([[5, 2], [1, 3]])
    >>> tract = np.array([[2, 1], [3, 2], [1, 3]])
    >>> consistency_violations(geo, 2, tract, county, schema)
    ["tract units of county 'A' sum to 3 in cell 1 (tenure=rented), the parent has 2"]
    >>> consistency_violations(geo, 2, tract, county, allowed={"A": [1]})
    []
    """
    summed = geography.aggregate(np.asarray(hist), li, li - 1)
    if summed.dtype.kind in "iu" and np.asarray(parent_hist).dtype.kind in "iu":
        bad_mask = (summed.astype(np.int64) - np.asarray(parent_hist).astype(np.int64)) != 0
    else:
        scale = np.maximum(1.0, np.abs(parent_hist))
        bad_mask = np.abs(summed - parent_hist) > 1e-6 * scale
    if allowed:
        rows = geography.index_of(li - 1, list(allowed))
        for row, cells in zip(rows, allowed.values()):
            bad_mask[row, list(cells)] = False
    bad = np.argwhere(bad_mask)
    out = []
    for p, j in bad[:limit]:
        cell = f" ({_cell(schema, j)})" if schema is not None else ""
        out.append(f"{geography.levels[li]} units of {geography.levels[li - 1]} "
                   f"{geography.geocodes[li - 1][p]!r} sum to {_num(summed[p, j])} in cell "
                   f"{j}{cell}, the parent has {_num(parent_hist[p, j])}")
    return out


def verify_histograms(histograms: Sequence[np.ndarray], spec: Spec | None, schema: Schema,
                      geography: Geography, published: Mapping[str, Mapping[str, Any]], *,
                      integer: bool = False, consistent: bool = False,
                      nonnegative: bool = False, invariants: bool = False,
                      allowed: Mapping[str, Mapping[str, Sequence[int]]] | None = None,
                      limit: int = 10, equalities: bool = False) -> list[str]:
    """Every broken promise of ``histograms`` (root first), as messages naming unit and cell.

    Parameters
    ----------
    histograms : sequence of arrays (units × cells), root first
    spec : Spec or None
        The invariants and constraints (checked when ``invariants``).
    schema, geography
    published : mapping level → (statistic → array)
        The exact published statistics (``NoisyHierarchy.invariants``).
    integer, consistent, nonnegative, invariants : bool
        The promises to check: integer dtype; children sum to their parent in every cell (exact
        for integers, to 1e-6 relative otherwise); no negative cell; every invariant and
        constraint of ``spec`` (integer results only: exact arithmetic).
    equalities : bool
        Only the spec's equalities — rows whose bounds are equal, cells fixed at 0 — to 10⁻⁶ of
        the count (real-valued results, e.g. generalized least squares).
    allowed : mapping level → (parent geocode → cells), optional
        Where a failsafe relaxed (and reported) consistency between a parent and its children
        of ``level``.

    Returns
    -------
    list of str
        Empty when every promise holds; at most ``limit`` messages.

    Raises
    ------
    SpecError
        ``invariants`` asked of fractional histograms, or the spec does not compile.

    Examples
    --------
    Three levels of a one-attribute schema, with the county totals invariant:

    >>> from hierarchy.schema import Attribute
    >>> from invariants.spec import Invariant
    >>> schema = Schema((Attribute("tenure", ("owned", "rented")),))
    >>> geo, _ = Geography.from_columns(["nation", "county", "tract"],
    ...                                 [[["A", "A", "B"], ["A1", "A2", "B1"]]])
    >>> spec = Spec([Invariant("tot", ["nation", "county"])])
    >>> published = {"nation": {"tot": np.array([11])}, "county": {"tot": np.array([7, 4])}}
    >>> promises = dict(integer=True, consistent=True, nonnegative=True, invariants=True)
    >>> good = (np.array([[6, 5]]), np.array([[6, 1], [0, 4]]),
    ...         np.array([[3, 1], [3, 0], [0, 4]]))
    >>> verify_histograms(good, spec, schema, geo, published, **promises)
    []
    >>> bad = good[:2] + (np.array([[3, 1], [3, 0], [-1, 4]]),)
    >>> for problem in verify_histograms(bad, spec, schema, geo, published, **promises):
    ...     print(problem)
    tract 'B1': cell 0 (tenure=owned) is negative (-1); 1 negative cells
    tract units of county 'B' sum to -1 in cell 0 (tenure=owned), the parent has 0
    tract 'B1': cell 0 is negative (-1)
    >>> verify_histograms(good[:2] + (good[2] * 1.0,), spec, schema, geo, published,
    ...                   integer=True)
    ['tract: counts are float64, not integers']
    >>> real = (np.array([[6.5, 4.5]]), np.array([[5.5, 1.5], [1.0, 3.0]]),
    ...         np.array([[3.0, 1.0], [2.5, 0.5], [1.0, 3.0]]))
    >>> verify_histograms(real, spec, schema, geo, published, equalities=True)
    []
    >>> verify_histograms(real[:1] + (real[1] + 0.1,) + real[2:], spec, schema, geo, published,
    ...                   equalities=True)[0]
    "county 'A': tot: total is 7.2, held at 7"
    """
    out: list[str] = []
    compiled = None
    if invariants:
        if not all(np.asarray(h).dtype.kind in "iu" for h in histograms):
            raise SpecError("invariants are verified in exact integer arithmetic: the "
                            "histograms must be integers")
    if invariants or equalities:
        compiled = compile_spec(spec or Spec(), schema, geography, published)
    for li, hist in enumerate(histograms):
        hist = np.asarray(hist)
        level = geography.levels[li]
        if integer and hist.dtype.kind not in "iu":
            out.append(f"{level}: counts are {hist.dtype}, not integers")
        if nonnegative and (hist < 0).any():
            u, j = np.argwhere(hist < 0)[0]
            out.append(f"{level} {geography.geocodes[li][u]!r}: cell {j} ({_cell(schema, j)}) is "
                       f"negative ({_num(hist[u, j])}); {int((hist < 0).sum())} negative cells")
        if consistent and li > 0:
            out += consistency_violations(geography, li, hist, np.asarray(histograms[li - 1]),
                                          schema, allowed=(allowed or {}).get(level))
        if compiled is not None and invariants:
            out += violations(compiled[level], hist, limit=limit)
            out += sum_violations(compiled[level].sums, hist, limit=limit)
        elif compiled is not None:
            out += equality_violations(compiled[level], hist, geography.geocodes[li])
            out += sum_violations(compiled[level].sums, hist, limit=limit, tolerance=1e-6)
    return out[:limit]


def equality_violations(lc: Any, hist: np.ndarray, codes: Sequence[Any], *,
                        limit: int = 5) -> list[str]:
    """Units of a level whose real histograms break an equality of ``lc`` (a row whose bounds
    are equal, or a cell fixed at 0) by more than 10⁻⁶ of the count.

    Examples
    --------
    See :func:`verify_histograms`.
    """
    hist = np.asarray(hist, dtype=np.float64)
    lower, upper = np.asarray(lc.lower, float), np.asarray(lc.upper, float)
    held = np.isfinite(lower) & (lower == upper)
    got = np.asarray((lc.matrix @ hist.T).T, dtype=np.float64) if lc.matrix.shape[0] else \
        np.zeros(lower.shape)
    bad = held & (np.abs(got - lower) > 1e-6 * np.maximum(1.0, np.abs(lower)))
    out = [f"{lc.level} {codes[u]!r}: {lc.labels[r]} is {_num(got[u, r])}, held at "
           f"{_num(lower[u, r])}" for u, r in np.argwhere(bad)[:limit]]
    zero = np.asarray(lc.zero, bool) & (np.abs(hist) > 1e-6)
    out += [f"{lc.level} {codes[u]!r}: cell {j} is {_num(hist[u, j])}, fixed at 0 by the spec"
            for u, j in np.argwhere(zero)[:limit]]
    return out


def _cell(schema: Schema, j: int) -> str:
    codes = np.unravel_index(int(j), schema.shape)
    return ", ".join(f"{a.name}={a.labels[c]}" for a, c in zip(schema.attributes, codes))


def _num(value: Any) -> str:
    value = value.item() if hasattr(value, "item") else value
    return str(int(value)) if float(value).is_integer() else f"{float(value):.6g}"
