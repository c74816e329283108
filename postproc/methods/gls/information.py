"""The information of a level's own measurements, units grouped by a shared id, and the
signatures that decide which units share their matrices: the pieces every tree least-squares
fit of the toolkit builds on (:mod:`postproc.methods.gls.tree`,
:mod:`postproc.methods.baselines.least_squares`, :mod:`postproc.methods.baselines.reconcile`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np
import scipy.sparse as sp

from postproc.errors import PostprocError

__all__ = ["Term", "level_information", "unit_groups", "times", "distinct_rows",
           "SharedCovariances"]

#: Cells up to which a query's matrix is made dense for the products of a level (BLAS on a
#: dense matrix beats a sparse product at these sizes; the 2020 workload's split problems have
#: 32 cells).
DENSE_QUERY_CELLS = 512

#: Most numbers in the outer products of one query's answers (see ``_information``).
OUTER_NUMBERS = 2**21

#: One measured query of one level: ``(Q, values, weights)`` with ``Q`` (answers × cells),
#: ``values`` and ``weights`` (units × answers); weights are inverse variances.
Term = tuple[Any, np.ndarray, np.ndarray]


def times(a: np.ndarray, matrix: np.ndarray) -> np.ndarray:
    """``a @ matrix`` for a stack ``a`` (… × n) and an n × m matrix, as one 2-d product (numpy
    multiplies a 3-d stack by a matrix one small product per slice, many times slower).

    Examples
    --------
    >>> times(np.ones((2, 3, 2)), np.eye(2)[:, :1]).shape
    (2, 3, 1)
    """
    a = np.ascontiguousarray(a)
    rows = int(np.prod(a.shape[:-1]))
    return (a.reshape(rows, a.shape[-1]) @ matrix).reshape(*a.shape[:-1], matrix.shape[1])


def distinct_rows(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct rows of a float array and each row's index among them, exactly, without
    sorting the rows: rows are grouped by a random projection, then checked equal to their
    group's first row (a tie of the projection between unequal rows splits them).

    Examples
    --------
    >>> first, ids = distinct_rows(np.array([[1.0, 2.0], [0.0, 1.0], [1.0, 2.0]]))
    >>> first.tolist(), ids.tolist()
    ([0, 1], [0, 1, 0])
    """
    rows = np.ascontiguousarray(rows, dtype=np.float64)
    n = rows.shape[0]
    if n == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    projection = rows @ np.random.default_rng(0).uniform(1.0, 2.0, rows.shape[1])
    _, first, ids = np.unique(projection, return_index=True, return_inverse=True)
    ids = ids.ravel()
    differ = np.flatnonzero(np.any(rows != rows[first[ids]], axis=1))
    if differ.size:     # unequal rows with one projection: sort those exactly
        _, first, ids = np.unique(rows, axis=0, return_index=True, return_inverse=True)
        ids = ids.ravel()
    order = np.argsort(first)            # ids in the order of first appearance
    rank = np.empty_like(order)
    rank[order] = np.arange(order.size)
    return first[order].astype(np.int64), rank[ids].astype(np.int64)


def unit_groups(ids: np.ndarray):
    """``(id, rows)`` for every distinct id, rows in ascending order (one sort, no scans).

    Examples
    --------
    >>> [(g, rows.tolist()) for g, rows in unit_groups(np.array([2, 0, 2, 1]))]
    [(0, [1]), (1, [3]), (2, [0, 2])]
    """
    order = np.argsort(ids, kind="stable")
    sorted_ids = ids[order]
    starts = np.flatnonzero(np.r_[True, sorted_ids[1:] != sorted_ids[:-1]])
    ends = np.r_[starts[1:], ids.size]
    for s, e in zip(starts, ends):
        yield int(sorted_ids[s]), order[s:e]


def level_information(level_terms: Sequence[Term], units: int, cells: int, li: int
                      ) -> tuple[np.ndarray, list[np.ndarray], np.ndarray]:
    """The information of a level's own measurements: each unit's id, the distinct information
    matrices ``Σ_q QᵀWQ`` (one per distinct row of weights), and ``b = Σ_q QᵀWy`` per unit.

    Examples
    --------
    Two units measured by the total of two cells, the second with twice the weight:

    >>> ids, matrices, b = level_information(
    ...     [(np.ones((1, 2)), np.array([[3.0], [4.0]]), np.array([[1.0], [2.0]]))], 2, 2, 0)
    >>> ids.tolist(), [m.tolist() for m in matrices], b.tolist()
    ([0, 1], [[[1.0, 1.0], [1.0, 1.0]], [[2.0, 2.0], [2.0, 2.0]]], [[3.0, 3.0], [8.0, 8.0]])
    """
    batch = {np.ndim(values) for _, values, _ in level_terms}
    k = [np.shape(values)[1] for _, values, _ in level_terms][0] if batch == {3} else None
    b = np.zeros((units, cells) if k is None else (units, k, cells))
    weight_rows, blocks = [], []
    for qi, (q, values, weights) in enumerate(level_terms):
        q = sp.csr_matrix(q, dtype=np.float64)
        dense = q.toarray() if cells <= DENSE_QUERY_CELLS else q
        values = np.asarray(values, dtype=np.float64)
        shape = (units, q.shape[0]) if k is None else (units, k, q.shape[0])
        if q.shape[1] != cells or values.shape != shape:
            raise PostprocError(f"level {li}: a query of shape {q.shape} with values of shape "
                                f"{values.shape}; expected ({q.shape[0]}, {cells}) and {shape}")
        weights = np.broadcast_to(np.asarray(weights, dtype=np.float64), shape[:1] + shape[-1:])
        if not (np.all(np.isfinite(weights)) and np.all(weights >= 0)):
            u, a = (int(x) for x in np.argwhere(~(np.isfinite(weights) & (weights >= 0)))[0])
            raise PostprocError(f"level {li}: weights must be finite and non-negative; query "
                                f"{qi}, unit {u}, answer {a} has {float(weights[u, a])!r}")
        weighted = weights * values if k is None else weights[:, None, :] * values
        b += np.asarray(weighted.reshape(-1, q.shape[0]) @ dense).reshape(b.shape)
        weight_rows.append(weights)
        blocks.append(dense)
    if not blocks:
        return np.zeros(units, dtype=np.int64), [np.zeros((cells, cells))], b
    stacked = np.concatenate(weight_rows, axis=1)
    first, ids = distinct_rows(stacked)
    return ids.ravel().astype(np.int64), _information(blocks, stacked[first], cells), b


def _information(blocks: Sequence[Any], rows: np.ndarray, cells: int) -> list[np.ndarray]:
    """``Σ_q Qᵀ diag(w_q) Q`` for each row of weights (the queries' answers side by side). A
    dense query (at most :data:`DENSE_QUERY_CELLS` cells) whose answers' outer products ``a aᵀ``
    fit in :data:`OUTER_NUMBERS` is done for all rows at once, one product of the weights with
    them (the distinct rows of a part's bottom groups are hundreds, and a sparse product per
    row and query cost more than the rest of the level); a larger one row by row."""
    out = np.zeros((rows.shape[0], cells, cells))
    start = 0
    for q in blocks:
        answers = q.shape[0]
        weights = rows[:, start:start + answers]
        start += answers
        if isinstance(q, np.ndarray) and answers * cells * cells <= OUTER_NUMBERS:
            outer = (q[:, :, None] * q[:, None, :]).reshape(answers, cells * cells)
            out += (weights @ outer).reshape(-1, cells, cells)
            continue
        for matrix, w in zip(out, weights):
            matrix += ((q.T * w) @ q if isinstance(q, np.ndarray)
                       else np.asarray((q.T @ sp.diags(w) @ q).todense()))
    return list(out)


def _pattern_ids(eq: Any, units: int) -> np.ndarray:
    """An id per unit for its equality pattern (which rows, which zero cells), equal ids for
    equal patterns."""
    if eq is None:
        return np.zeros(units, dtype=np.int64)
    bits = np.isfinite(eq.values)
    if eq.zero is not None:
        bits = np.concatenate([bits, eq.zero], axis=1)
    if bits.shape[1] == 0:
        return np.zeros(units, dtype=np.int64)
    packed = np.ascontiguousarray(np.packbits(bits, axis=1))
    return np.unique(packed, axis=0, return_inverse=True)[1].ravel().astype(np.int64)


@dataclass(frozen=True, eq=False)
class _Children:
    """For every unit of a level, an id of what its children give it (their operators and
    multiplicities, or a given covariance), and the covariance ``Σ`` of their sum per id."""

    ids: np.ndarray
    covariance: Any             # id → Σ (None: no children)

    @classmethod
    def none(cls, units: int) -> "_Children":
        return cls(np.zeros(units, dtype=np.int64), lambda sig: None)

    @classmethod
    def given(cls, below: Any) -> "_Children":
        """What a tree's bottom units get from below (a
        :class:`~postproc.methods.gls.tree.Below`)."""
        return cls(below.ids, lambda sig: np.asarray(below.covariances[sig], dtype=np.float64))

    @classmethod
    def of(cls, child_parent: np.ndarray, child_ids: np.ndarray, units: int,
           operators: Sequence[Any]) -> "_Children":
        """Units whose children have the same operators, as many times each, share an id."""
        pairs, counts = np.unique(np.stack([child_parent, child_ids]), axis=1,
                                  return_counts=True)
        parent, op = pairs
        width = int(np.bincount(parent, minlength=units).max(initial=0))
        rank = np.arange(parent.size) - np.searchsorted(parent, parent)
        table = np.full((units, 2 * width), -1, dtype=np.int64)
        table[parent, 2 * rank] = op
        table[parent, 2 * rank + 1] = counts
        distinct, inverse = np.unique(table, axis=0, return_inverse=True)

        def covariance(sig: int) -> np.ndarray:
            row = distinct[sig].reshape(-1, 2)
            row = row[row[:, 0] >= 0]
            return np.sum([operators[c].covariance * k for c, k in row.tolist()], axis=0)

        return cls(inverse.ravel().astype(np.int64), covariance)


class SharedCovariances:
    """Covariance matrices kept once each: equal ones (found by a hash of their bytes, then
    compared) share an id.

    Examples
    --------
    >>> shared = SharedCovariances()
    >>> shared.ids_of([np.eye(2), 2 * np.eye(2), np.eye(2)]).tolist(), len(shared.items)
    ([0, 1, 0], 2)
    """

    def __init__(self) -> None:
        self.items: list[np.ndarray] = []
        self._index: dict[int, list[int]] = {}

    def ids_of(self, covariances: Sequence[np.ndarray]) -> np.ndarray:
        """Each matrix's id (new ones added)."""
        return np.array([self._id(c) for c in covariances], dtype=np.int64)

    def _id(self, covariance: np.ndarray) -> int:
        covariance = np.ascontiguousarray(covariance, dtype=np.float64)
        candidates = self._index.setdefault(hash(covariance.tobytes()), [])
        for i in candidates:
            if np.array_equal(self.items[i], covariance):
                return i
        candidates.append(len(self.items))
        self.items.append(covariance)
        return candidates[-1]
