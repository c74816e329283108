"""The information of a level's own measurements, and units grouped by a shared id: the two
pieces every tree least-squares fit of the toolkit builds on (:mod:`postproc.methods.gls.tree`,
:mod:`postproc.methods.baselines.least_squares`, :mod:`postproc.methods.baselines.reconcile`).
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import scipy.sparse as sp

from postproc.errors import PostprocError

__all__ = ["Term", "level_information", "unit_groups"]

#: One measured query of one level: ``(Q, values, weights)`` with ``Q`` (answers × cells),
#: ``values`` and ``weights`` (units × answers); weights are inverse variances.
Term = tuple[Any, np.ndarray, np.ndarray]


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
    for q, values, weights in level_terms:
        q = sp.csr_matrix(q, dtype=np.float64)
        values = np.asarray(values, dtype=np.float64)
        shape = (units, q.shape[0]) if k is None else (units, k, q.shape[0])
        if q.shape[1] != cells or values.shape != shape:
            raise PostprocError(f"level {li}: a query of shape {q.shape} with values of shape "
                                f"{values.shape}; expected ({q.shape[0]}, {cells}) and {shape}")
        weights = np.broadcast_to(np.asarray(weights, dtype=np.float64), shape[:1] + shape[-1:])
        if not (np.all(np.isfinite(weights)) and np.all(weights >= 0)):
            raise PostprocError(f"level {li}: weights must be finite and non-negative")
        weighted = weights * values if k is None else weights[:, None, :] * values
        b += np.asarray(weighted.reshape(-1, q.shape[0]) @ q).reshape(b.shape)
        weight_rows.append(weights)
        blocks.append(q)
    if not blocks:
        return np.zeros(units, dtype=np.int64), [np.zeros((cells, cells))], b
    stacked = np.concatenate(weight_rows, axis=1)
    distinct, ids = np.unique(stacked, axis=0, return_inverse=True)
    matrices = []
    for row in distinct:
        matrix = np.zeros((cells, cells))
        start = 0
        for q in blocks:
            w = row[start:start + q.shape[0]]
            start += q.shape[0]
            matrix += np.asarray((q.T @ sp.diags(w) @ q).todense())
        matrices.append(matrix)
    return ids.ravel().astype(np.int64), matrices, b
