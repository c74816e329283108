"""Gong & Meng's γ: what conditioning a mechanism on invariants costs in privacy, exactly for
small tables (docs/conditional_sampling.md, "What conditioning costs: γ").

Gong & Meng (2020, "Congenial differential privacy under mandated disclosure", Theorem 2.1): if
``M`` is ε-differentially private and ``M*(x)`` is ``M(x)`` conditioned on ``M(x) ∈ S*`` (the
outputs the invariants allow), then for invariant-conforming datasets ``x, x′`` at distance
``k`` there is a ``γ ∈ [−1, 1]`` with ``P(M*(x) ∈ B) ≤ exp((1 + γ) k ε) P(M*(x′) ∈ B)``; ``γ = 1``
always holds. The smallest such γ is what :func:`conditional_gamma` computes: with ``L(y | x)``
the log-probability of output ``y`` under ``M*(x)``,

    γ = max over conforming pairs at the nearest distance k, and outputs y, of
        |L(y | x) − L(y | x′)| / (k ε)  −  1,

relative to the mechanism's *nominal* ε (the budget it was calibrated to), as the paper's
examples are: no invariants, γ = 0; a query the invariants pin down (the paper's rounding
example), γ = −1; a two-bin histogram with its total invariant and noise calibrated to the
histogram's sensitivity 2, γ = −1/2 (nearest conforming neighbours are at distance 2, and
moving one person costs ε). For pure-DP double-geometric (two-sided geometric) noise the
maximum over all outputs is attained, and for a count table whose invariants bound every cell
the conforming tables and the outputs are finite: :func:`table_gamma` enumerates them and is
exact; beyond :data:`MAX_TABLES` tables (or with a cell no invariant bounds) it returns the
theorem's bound γ = 1 and says so.

Examples
--------
The paper's Example 4.1 in counts: a two-cell table with its total invariant, noise calibrated to
the histogram's sensitivity 2, outputs on the whole line ``y₁ + y₂ = 6``:

>>> table_gamma([[1, 1]], [6], epsilon=1.0, sensitivity=2, outputs="integers").gamma
-0.5

With outputs kept nonnegative (as ``postproc mis`` releases) the ends of the line cost more: the
normalizing constant then depends on the data (x = (0, 6) has fewer outputs near it):

>>> round(table_gamma([[1, 1]], [6], epsilon=1.0, sensitivity=2).gamma, 3)
-0.396
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np
from scipy.special import logsumexp

from postproc.errors import PostprocError

__all__ = ["Gamma", "conditional_gamma", "table_gamma", "gamma_of_table", "conforming_tables",
           "MAX_TABLES", "MAX_VISITS"]

#: Most conforming tables :func:`table_gamma` enumerates (its matrices are tables × tables).
MAX_TABLES = 3000
#: Most partial tables :func:`conforming_tables` visits before it gives up (invariants whose
#: solutions are sparse make a depth-first search long before it finds ``limit`` of them);
#: about 25 s on one core.
MAX_VISITS = 2_000_000


@dataclass(frozen=True)
class Gamma:
    """γ of a conditioned mechanism, and how it was obtained.

    Attributes
    ----------
    gamma : float
        In [−1, 1].
    method : {'exact', 'bound'}
    epsilon, sensitivity : float, int
        The mechanism's nominal budget and the sensitivity its noise was calibrated to
        (double-geometric parameter ``z = ε / sensitivity`` per released count).
    distance : int or None
        ``k``, the distance of the nearest conforming pairs (None for a bound).
    pairs : int
        How many conforming pairs are at that distance.
    tables : int or None
        How many conforming datasets were enumerated.
    reason : str

    Examples
    --------
    >>> Gamma(1.0, "bound", 1.0, 1, None, 0, None, "too many tables").to_dict()["gamma"]
    1.0
    """

    gamma: float
    method: str
    epsilon: float
    sensitivity: int
    distance: int | None
    pairs: int
    tables: int | None
    reason: str

    def to_dict(self) -> dict[str, Any]:
        return {"gamma": self.gamma, "method": self.method, "epsilon": self.epsilon,
                "sensitivity": self.sensitivity, "distance": self.distance,
                "pairs": self.pairs, "tables": self.tables, "reason": self.reason}


def _check(epsilon: Any, sensitivity: Any) -> tuple[float, int]:
    ok = isinstance(epsilon, (int, float, np.integer, np.floating)) and not isinstance(
        epsilon, bool) and np.isfinite(epsilon) and epsilon > 0
    if not ok:
        raise PostprocError(f"epsilon must be a positive, finite number, not {epsilon!r}")
    if isinstance(sensitivity, bool) or not isinstance(sensitivity, (int, np.integer)) \
            or sensitivity < 1:
        raise PostprocError(f"sensitivity must be a positive whole number (1: add or remove a "
                            f"person; 2: change a person's record), not {sensitivity!r}")
    return float(epsilon), int(sensitivity)


def conditional_gamma(distance: Any, released: Any, outputs: Any, *, epsilon: Any,
                      sensitivity: Any = 1) -> Gamma:
    """The exact γ of double-geometric noise conditioned on a finite set of outputs.

    Parameters
    ----------
    distance : int array (m, m)
        ``d(x, x′)`` between the ``m`` invariant-conforming datasets (add or remove one person:
        1; moving one between cells: 2).
    released : int array (m, r)
        The query ``s(x)`` of each dataset, the counts the mechanism adds noise to.
    outputs : int array (K, r)
        ``S*``: every output the invariants allow.
    epsilon : float
        The mechanism's nominal ε: ``M`` is ε-DP, its noise ``z = ε / sensitivity``.
    sensitivity : int
        The sensitivity the noise was calibrated to.

    Returns
    -------
    Gamma
        ``method='exact'``. With fewer than two conforming datasets there is no pair to tell
        apart: γ = −1, vacuously (Gong & Meng's "neighbourhood structure destroyed").

    Raises
    ------
    PostprocError
        Bad shapes, ε or sensitivity.

    Examples
    --------
    Gong & Meng's rounding example: the released count ⌈t/10⌉ of data whose total t lies in
    41..50 is 5 whatever t is, so the conditioned mechanism tells no neighbours apart:

    >>> t = np.arange(41, 51)
    >>> gamma = conditional_gamma(np.abs(t[:, None] - t[None, :]), -(-t[:, None] // 10),
    ...                           [[5]], epsilon=1.0)
    >>> gamma.gamma, gamma.distance, gamma.pairs
    (-1.0, 1, 9)
    """
    epsilon, sensitivity = _check(epsilon, sensitivity)
    d = np.asarray(distance, dtype=np.int64)
    s = np.atleast_2d(np.asarray(released, dtype=np.int64))
    y = np.atleast_2d(np.asarray(outputs, dtype=np.int64))
    m = s.shape[0]
    if d.shape != (m, m) or y.shape[1] != s.shape[1] or y.shape[0] == 0:
        raise PostprocError(f"distance must be {m} × {m} and outputs have {s.shape[1]} counts "
                            f"each; got {d.shape} and {y.shape}")
    if m < 2:
        return Gamma(-1.0, "exact", epsilon, sensitivity, None, 0, m,
                     "one conforming dataset: no neighbouring pair to tell apart (vacuous)")
    z = epsilon / sensitivity
    to_output = np.zeros((m, y.shape[0]))
    for j in range(s.shape[1]):                   # ‖y − s(x)‖₁, one released count at a time
        to_output += np.abs(y[None, :, j] - s[:, None, j])
    log_p = -z * to_output
    log_p -= logsumexp(log_p, axis=1, keepdims=True)          # conditioned on S*
    off = d + np.diag(np.full(m, np.iinfo(np.int64).max))
    k = int(off.min())
    if k < 1:
        raise PostprocError("two conforming datasets are at distance 0: list each dataset once")
    i, j = np.nonzero(np.triu(off == k))
    loss = float(np.max(np.abs(log_p[i] - log_p[j])))
    gamma = float(np.clip(loss / (k * epsilon) - 1.0, -1.0, 1.0))
    return Gamma(round(gamma, 12), "exact", epsilon, sensitivity, k, int(i.size), m,
                 f"largest log ratio {loss:.6g} over {i.size:,} conforming pairs at distance "
                 f"{k} and {y.shape[0]:,} outputs")


def conforming_tables(A: Any, a: Any, *, lower: Any = None, upper: Any = None,
                      limit: int = MAX_TABLES, max_visits: int = MAX_VISITS) -> np.ndarray | None:
    """Every integer table ``x`` with ``A x = a`` and ``lower ≤ x ≤ upper`` (default: nonnegative,
    each cell at most what the nonnegative invariant rows allow), or None when a cell is bounded
    by nothing (infinitely many tables), there are more than ``limit``, or the search visits more
    than ``max_visits`` partial tables.

    Examples
    --------
    >>> conforming_tables([[1, 1, 1]], [2]).tolist()
    [[0, 0, 2], [0, 1, 1], [0, 2, 0], [1, 0, 1], [1, 1, 0], [2, 0, 0]]
    >>> conforming_tables([[1, 1, 0]], [2]) is None                # the third cell is free
    True
    >>> conforming_tables([[1, 1]], [0], lower=[-1, -1], upper=[1, 1]).tolist()
    [[-1, 1], [0, 0], [1, -1]]
    """
    A = np.asarray(A, dtype=np.int64)
    a = np.asarray(a, dtype=np.int64)
    cells = A.shape[1]
    free = np.iinfo(np.int64).max
    low = np.zeros(cells, np.int64) if lower is None else np.asarray(lower, np.int64)
    if upper is None:
        high = np.full(cells, free)
        for row, value in zip(A, a):
            if np.all(row >= 0):
                hit = row > 0
                high[hit] = np.minimum(high[hit], value // row[hit])
    else:
        high = np.asarray(upper, np.int64)
    if np.any(high == free):
        return None
    found: list[list[int]] = []
    partial = A @ low
    bounded = np.all(A >= 0, axis=1) & (lower is None)
    visits = [0]

    def search(j: int, x: list[int]) -> bool:
        visits[0] += 1
        if visits[0] > max_visits:              # a search this long is not a small table
            return False
        if j == cells:
            if np.array_equal(partial, a):
                found.append(list(x))
            return len(found) <= limit
        for v in range(int(low[j]), int(high[j]) + 1):
            step = A[:, j] * (v - low[j])
            partial[:] += step
            if np.all(partial[bounded] <= a[bounded]) and not search(j + 1, x + [v]):
                partial[:] -= step
                return False
            partial[:] -= step
        return True

    if not search(0, []):
        return None
    return np.asarray(found, dtype=np.int64).reshape(-1, cells)


def table_gamma(A: Any, a: Any, *, epsilon: Any, sensitivity: Any = 1,
                outputs: str = "nonnegative", limit: int = MAX_TABLES,
                max_visits: int = MAX_VISITS) -> Gamma:
    """γ of per-cell double-geometric noise on a count table conditioned on its invariants
    ``A x = a``: exact by enumeration, else the bound γ = 1.

    The datasets are the nonnegative integer tables with the invariants' values (a table is its
    data's sufficient statistic; adding a person is distance 1, moving one between cells 2);
    the outputs ``S*`` are those tables too (``outputs='nonnegative'``, as ``postproc mis``
    releases), or every integer table with the invariants' values (``'integers'``: the
    unconstrained noise conditioned on the invariants alone, Gong & Meng's Example 4.1; outputs
    more than ``40/z`` beyond the datasets, whose probabilities are below ``e^-40`` of the
    largest, are left out). So γ depends only on the invariants' published values, never on the
    table beyond them.

    Parameters
    ----------
    A : int array (rows, cells)
    a : int array (rows,)
        The invariants (:func:`postproc.methods.sampling.table.invariant_rows`).
    epsilon : float
        The per-cell budget (noise ``z = ε / sensitivity``).
    sensitivity : int
        1 (add or remove a person) or the sensitivity the budget was calibrated to (2 in Gong &
        Meng's Example 4.1).
    outputs : {'nonnegative', 'integers'}
    limit : int
        Most conforming tables (and outputs) to enumerate.
    max_visits : int
        Most partial tables the enumeration visits (:func:`conforming_tables`).

    Returns
    -------
    Gamma

    Examples
    --------
    Gong & Meng's Example 4.1: two bins, their total invariant, noise calibrated to the
    histogram's sensitivity 2:

    >>> table_gamma([[1, 1]], [6], epsilon=1.0, sensitivity=2, outputs="integers").gamma
    -0.5
    >>> table_gamma([[1, 1]], [6], epsilon=1.0, outputs="integers").gamma   # z = ε per cell
    0.0
    >>> round(table_gamma([[1, 1]], [6], epsilon=1.0, sensitivity=2).gamma, 3)   # y ≥ 0 too
    -0.396
    >>> table_gamma([[1, 1, 0]], [6], epsilon=1.0).method
    'bound'
    """
    epsilon, sensitivity = _check(epsilon, sensitivity)
    if outputs not in ("nonnegative", "integers"):
        raise PostprocError(f"outputs must be 'nonnegative' or 'integers', not {outputs!r}")
    tables = conforming_tables(A, a, limit=limit, max_visits=max_visits)
    if tables is None:
        return Gamma(1.0, "bound", epsilon, sensitivity, None, 0, None,
                     f"the conforming tables are infinitely many (a cell no invariant bounds), "
                     f"more than {limit:,}, or not found within {max_visits:,} partial tables: "
                     "Gong & Meng's Theorem 2.1 bound γ = 1 (valid always)")
    if tables.shape[0] == 0:
        raise PostprocError("no nonnegative integer table satisfies the invariants")
    released = tables
    if outputs == "integers":
        reach = int(np.ceil(40 * sensitivity / epsilon))
        released = conforming_tables(A, a, lower=tables.min(axis=0) - reach,
                                     upper=tables.max(axis=0) + reach, limit=limit,
                                     max_visits=max_visits)
        if released is None:
            return Gamma(1.0, "bound", epsilon, sensitivity, None, 0, int(tables.shape[0]),
                         f"more than {limit:,} outputs to enumerate: Gong & Meng's Theorem 2.1 "
                         "bound γ = 1 (valid always)")
    distance = np.abs(tables[:, None, :] - tables[None, :, :]).sum(axis=2)
    return conditional_gamma(distance, tables, released, epsilon=epsilon,
                             sensitivity=sensitivity)


def gamma_of_table(table: Any, invariants: Sequence[str], *, epsilon: Any,
                   sensitivity: Any = 1, outputs: str = "nonnegative",
                   limit: int = MAX_TABLES, max_visits: int = MAX_VISITS) -> Gamma:
    """:func:`table_gamma` for a :class:`~postproc.methods.sampling.count_table.CountTable`
    and invariant expressions (as ``postproc mis`` takes them).

    Examples
    --------
    >>> import pandas as pd
    >>> from hierarchy.schema import Attribute, Schema
    >>> from postproc.methods.sampling.count_table import CountTable
    >>> keys = pd.DataFrame({"bin": ["0", "1"]})
    >>> t = CountTable(keys, np.array([2, 4]), Schema((Attribute("bin", ("0", "1")),)),
    ...                np.arange(2))
    >>> gamma_of_table(t, ["total"], epsilon=1.0, sensitivity=2, outputs="integers").gamma
    -0.5
    """
    from postproc.methods.sampling.table import invariant_rows

    A, a, _ = invariant_rows(table, list(invariants))
    return table_gamma(A, a, epsilon=epsilon, sensitivity=sensitivity, outputs=outputs,
                       limit=limit, max_visits=max_visits)
