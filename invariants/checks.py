"""Exact checks of integer histograms against a compiled level.

* :func:`violations` — every broken promise of a result, naming the unit;
* :func:`check_violations` — the same, raised as a :class:`~invariants.errors.SpecError`;
* :func:`data_violations` — what confidential histograms break, without their values.

They read a :class:`~invariants.compiled.LevelConstraints` and nothing else of
:mod:`invariants` but its error; :mod:`invariants.compile` re-exports them (and its
:func:`~invariants.compile.check_data` uses :func:`_broken`).
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from hierarchy.queries import sparse_copy
from invariants.compiled import LevelConstraints
from invariants.errors import SpecError

__all__ = ["violations", "check_violations", "data_violations"]


def violations(lc: LevelConstraints, histograms: np.ndarray, units: slice | np.ndarray
               | None = None, *, limit: int = 10, sparse: sp.spmatrix | None = None
               ) -> list[str]:
    """Every broken promise of integer ``histograms`` (units × cells), in exact integer
    arithmetic: negative cells, nonzero zero-cells, rows outside their bounds.

    Parameters
    ----------
    lc : LevelConstraints
    histograms : int array, shape (units, cells)
        Histograms of the units ``units`` selects, in that order.
    units : slice or int array, optional
        Which units of the level the rows of ``histograms`` are (default: all of them).
    limit : int, optional
        At most this many messages (default 10).
    sparse : scipy.sparse matrix, optional
        ``histograms``' :func:`~hierarchy.queries.sparse_copy`, when the caller has one (made
        here otherwise, when the histograms are mostly empty). The cells are then checked
        where they are not 0 — the only cells that can be negative or break a zero — rather
        than over units × cells (a part's blocks: 40M cells, 1 % of them nonzero).

    Returns
    -------
    list of str
        One message per broken promise, naming the unit; empty when every promise holds.

    Raises
    ------
    SpecError
        If ``histograms`` are not integers.

    Examples
    --------
    >>> from hierarchy.geography import Geography
    >>> from invariants.compile import compile_spec
    >>> from invariants.spec import Spec
    >>> from hierarchy.schema import Attribute, Schema
    >>> from invariants.spec import Constraint, Invariant
    >>> schema = Schema((Attribute("sex", ("male", "female")),
    ...                  Attribute("age", ("child", "adult"))))
    >>> geo, _ = Geography.from_columns(["nation", "state"], [[["01", "02"]]])
    >>> spec = Spec([Invariant("tot", "state")],
    ...             [Constraint("adults", "state", "linear", "marginal(age)", [1], ">=", 1)])
    >>> lc = compile_spec(spec, schema, geo, {"state": {"tot": [3, 4]}})["state"]
    >>> violations(lc, np.array([[1, 1, 0, 1], [1, 1, 1, 1]]))
    []
    >>> for problem in violations(lc, np.array([[1, 1, 0, 0], [3, 0, 1, 0]])):
    ...     print(problem)
    state '01': tot: total = 2, must be == 3
    state '02': adults: adult = 0, must be >= 1
    >>> violations(lc, np.array([[3, 0, 1, 0]]), units=[1])
    ["state '02': adults: adult = 0, must be >= 1"]
    >>> violations(lc, np.ones((2, 4)))
    Traceback (most recent call last):
    ...
    invariants.errors.SpecError: verification needs integer histograms
    """
    x = np.asarray(histograms)
    if x.dtype.kind not in "iu":
        raise SpecError("verification needs integer histograms")
    x = x.astype(np.int64, copy=False)
    units = slice(None) if units is None else units
    codes = lc.geocodes[units]
    if sparse is None:
        sparse = sparse_copy(x)
    if sparse is None:
        lower, upper, zero = lc.rows_of(units)
        neg = np.argwhere(x < 0)
        nz = np.argwhere(zero & (x != 0))
    else:       # the nonzero cells, in the row-major order of argwhere
        sparse = sp.csr_matrix(sparse)
        sparse.sum_duplicates()
        lower, upper = lc.lower[units], lc.upper[units]
        rows = np.repeat(np.arange(sparse.shape[0]), np.diff(sparse.indptr))
        cells, data = sparse.indices, sparse.data
        forced = lc.zero_patterns[lc.zero_index[units][rows], cells] & (data != 0)
        neg = np.column_stack([rows[data < 0], cells[data < 0]])
        nz = np.column_stack([rows[forced], cells[forced]])
    out: list[str] = []
    for u, j in neg[:limit]:
        out.append(f"{lc.level} {codes[u]!r}: cell {j} is negative ({x[u, j]})")
    for u, j in nz[:limit]:
        out.append(f"{lc.level} {codes[u]!r}: cell {j} must be 0, is {x[u, j]}")
    if lc.n_rows:
        # exact either way (int64 × int64); a mostly empty level (a part's blocks) is
        # multiplied from a sparse copy, the transposed dense product copying every cell
        vals = (lc.matrix @ x.T).T if sparse is None else (sparse @ lc.matrix.T).toarray()
        # Finite bounds are integral; compare in int64 where finite.
        lo_bad = np.isfinite(lower) & (vals < np.where(np.isfinite(lower), lower, 0).astype(
            np.int64))
        hi_bad = np.isfinite(upper) & (vals > np.where(np.isfinite(upper), upper, 0).astype(
            np.int64))
        for u, r in np.argwhere(lo_bad | hi_bad)[:limit]:
            if lower[u, r] == upper[u, r]:
                need = f"must be == {int(lower[u, r])}"
            elif lo_bad[u, r]:
                need = f"must be >= {int(lower[u, r])}"
            else:
                need = f"must be <= {int(upper[u, r])}"
            name, _, what = lc.labels[r].partition(": ")
            out.append(f"{lc.level} {codes[u]!r}: {name}: {what} = {int(vals[u, r])}, {need}")
    return out[:limit]


def data_violations(lc: LevelConstraints, histograms: np.ndarray) -> list[str]:
    """What of the spec confidential ``histograms`` (units × cells) break, without their values.

    One line per broken requirement: the constraint's name, how many units break it and one
    example unit — never a count, so the message can be shown where the data may not be.

    Examples
    --------
    >>> from invariants.compile import compile_spec
    >>> from hierarchy.schema import E2E_1940
    >>> from hierarchy.geography import Geography
    >>> from invariants.spec import Spec
    >>> geo, _ = Geography.from_columns(["nation", "state"], [[["01", "02"]]])
    >>> spec = Spec.from_dict({"constraint": [{"name": "no_adults", "type": "structural_zero",
    ...                        "query": "marginal(votingage)", "levels": "all"}]})
    >>> lc = compile_spec(spec, E2E_1940, geo, {})["state"]
    >>> x = np.zeros((2, 192), np.int64); x[1, 191] = 7
    >>> data_violations(lc, x)
    ["no_adults: 1 of 2 state units break it, e.g. '02'"]
    """
    return [_broken_line(lc, name, units) for name, units in _broken(lc, histograms).items()]


def _broken_line(lc: LevelConstraints, name: str, units: np.ndarray) -> str:
    """``"name: k of n level units break it, e.g. 'code'"``: how many units (a boolean per unit)
    break a requirement, and the first of them."""
    return (f"{name}: {int(units.sum()):,} of {units.size:,} {lc.level} units break it, e.g. "
            f"{str(lc.geocodes[np.flatnonzero(units)[0]])!r}")


def _broken(lc: LevelConstraints, histograms: np.ndarray) -> dict[str, np.ndarray]:
    """Requirement name → which units (a boolean per unit) break it."""
    x = np.asarray(histograms, dtype=np.int64)
    lower, upper, _ = lc.rows_of(slice(None))
    broken: dict[str, np.ndarray] = {}
    neg = (x < 0).any(axis=1)
    if neg.any():
        broken["negative counts"] = neg
    if lc.n_rows:
        sparse = sparse_copy(x)     # a mostly empty level: the transposed product copies it
        vals = (np.asarray((sparse @ lc.matrix.T).todense()) if sparse is not None
                else (lc.matrix @ x.T).T)
        bad = (np.isfinite(lower) & (vals < np.where(np.isfinite(lower), lower, 0))) | (
            np.isfinite(upper) & (vals > np.where(np.isfinite(upper), upper, 0)))
        for r in np.flatnonzero(bad.any(axis=0)):
            name = lc.labels[r].partition(": ")[0]
            broken[name] = broken.get(name, np.zeros(x.shape[0], bool)) | bad[:, r]
    # zero cells are rows bounded above by 0, so a nonzero one is reported by its row's name
    return broken



def check_violations(lc: LevelConstraints, histograms: np.ndarray,
                     units: slice | np.ndarray | None = None) -> None:
    """Raise :class:`SpecError` listing violations, if any (see :func:`violations`).

    Examples
    --------
    One unit (a single-level geography) with an exact total of 5 persons:

    >>> from hierarchy.geography import Geography
    >>> from invariants.compile import compile_spec
    >>> from invariants.spec import Spec
    >>> from hierarchy.schema import Attribute, Schema
    >>> from invariants.spec import Invariant
    >>> schema = Schema((Attribute("sex", ("male", "female")), Attribute("age", ("0-17", "18+"))))
    >>> geo = Geography(("nation",), (["US"],), ([-1],))
    >>> lc = compile_spec(Spec([Invariant("tot")]), schema, geo, {"nation": {"tot": [5]}})["nation"]
    >>> check_violations(lc, np.array([[1, 2, 1, 1]]))      # silent when every promise holds
    >>> check_violations(lc, np.array([[1, 2, 1, 0]]))
    Traceback (most recent call last):
    ...
    invariants.errors.SpecError: result violates its constraints:
      nation 'US': tot: total = 4, must be == 5
    """
    found = violations(lc, histograms, units)
    if found:
        raise SpecError("result violates its constraints:\n  " + "\n  ".join(found))
