"""Queries weighted by a matrix per child (the node fit's, :mod:`postproc.methods.topdown.fit`).

A query whose every answer is one cell (``Q`` selects cells, a coefficient each) puts its term
``(Q x_k − y_k)ᵀ W_k (Q x_k − y_k)`` straight into the QP's ``P`` as a dense block over the
child's cells of that query (:func:`cell_blocks`); so does one whose every answer is a whole
group of the fit's cell groups, as a block over the child's group sums (:func:`whole_groups`).
Any other query is whitened: with ``scale·W_k = L_k L_kᵀ`` its term is
``‖L_kᵀ Q x_k − L_kᵀ y_k‖²``, one answer of weight 1 per row of ``L_kᵀ Q`` (:func:`whitened`).
BlueDown feeds every node such queries: a child's subtree estimate with its covariance, as 63
race queries sharing one weight array (blocks over cells) and a race-totals query (a block over
the group sums when the fit has them, as TopDown's runs do; whitened otherwise, and on a node the
race blocks alone make one Clarabel factors with faer: :func:`block_entries`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np
import scipy.sparse as sp

from postproc.errors import PostprocError
from postproc.methods.topdown.rows import Layout
from postproc.methods.topdown.task import QueryData

__all__ = ["CellBlocks", "SumColumns", "block_entries", "cell_blocks", "in_blocks", "one_cell_each",
           "whitened", "whole_groups"]


def whitened(qs: Sequence[QueryData], lay: Layout, scale: float
              ) -> list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]]:
    """Queries with a weight matrix per child as answers of weight 1: for each query, the rows
    of ``L_kᵀ Q`` over child ``k``'s variables and the targets ``L_kᵀ y_k``, where
    ``scale·W_k = L_k L_kᵀ``. Returns, query by query in the order given, COO
    ``(rows, cols, data)`` in canonical CSR order (answer ``k·m + i`` is row ``i`` of child
    ``k``) and the targets.

    Queries that share one weight array (BlueDown's one per race) are factored once and, when
    each counts a cell in one answer at most (sums over groups of cells, as every PL 94 query
    is), whitened together (:func:`_whitened_sums`): a node's 63 race queries in a few array
    operations, not a few per query.

    Examples
    --------
    One child, two cells, a query of their total (one answer) weighted 4 — ``L = 2``:

    >>> from types import SimpleNamespace
    >>> q = QueryData("total", sp.csr_matrix(np.ones((1, 2))), np.array([[3.0]]),
    ...               np.array([[[4.0]]]))
    >>> lay = SimpleNamespace(allowed=np.array([[True, True]]), var_index=np.array([[0, 1]]))
    >>> [a.tolist() for a in whitened([q], lay, scale=1.0)[0]]
    [[0, 0], [0, 1], [2.0, 2.0], [6.0]]
    """
    out: list = [None] * len(qs)
    for members in _sharing(qs):
        k, m = qs[members[0]].values.shape
        lt = _factor(qs[members[0]], k, m, scale)
        mats = [_csr(qs[i].matrix) for i in members]
        for i, mat, coo in zip(members, mats, _whitened_sums(mats, lt, lay)):
            out[i] = coo if coo is not None else _whitened_dense(mat, lt, lay)
        # the targets of all at once (the same sum per element as one query's einsum)
        values = np.stack([np.asarray(qs[i].values, dtype=np.float64) for i in members])
        targets = np.einsum("kij,rkj->rki", lt, values)
        for r, i in enumerate(members):
            out[i] = (*out[i], targets[r].ravel())
    return out


def _whitened_sums(mats: Sequence[sp.csr_matrix], lt: np.ndarray, lay: Layout
                   ) -> list[tuple[np.ndarray, np.ndarray, np.ndarray] | None]:
    """:func:`whitened`'s COO triplets of the queries (of one weight array) that count each
    cell in one answer at most (None for the others): column ``c`` of ``L_kᵀ Q`` is
    ``v·L_kᵀ[:, j]`` for its one entry ``(j, c, v)``, so only the children's own cells are
    gathered — never a product over cells no child has — and all the queries at once."""
    m = mats[0].shape[0]
    query = np.repeat(np.arange(len(mats)), [mat.nnz for mat in mats])
    j = np.concatenate([np.repeat(np.arange(m), np.diff(mat.indptr)) for mat in mats])
    c = np.concatenate([mat.indices for mat in mats])
    v = np.concatenate([mat.data for mat in mats]).astype(np.float64)
    order = np.lexsort((c, query))                              # by query, then cell
    query, j, c, v = query[order], j[order], c[order], v[order]
    twice = (query[1:] == query[:-1]) & (c[1:] == c[:-1])       # a cell in two answers
    sums = np.ones(len(mats), dtype=bool)
    sums[query[1:][twice]] = False
    if not sums.all():
        keep = sums[query]
        query, j, c, v = query[keep], j[keep], c[keep], v[keep]
    pieces: list[tuple[np.ndarray, ...]] = []
    step = max(1, _WHITEN_BLOCK // max(1, m * c.size))
    for first in range(0, lt.shape[0], step):
        block = slice(first, min(lt.shape[0], first + step))
        child, t = np.nonzero(lay.allowed[block][:, c])        # by child, then entry
        mixed = lt[first + child, :, j[t]] * v[t, None]         # pairs × m
        pair, i = np.nonzero(mixed)
        order = np.lexsort((pair, i, child[pair], query[t[pair]]))   # query, child, row, cell
        pair, i = pair[order], i[order]
        pieces.append((query[t[pair]], (first + child[pair]) * m + i,
                       lay.var_index[first + child[pair], c[t[pair]]], mixed[pair, i]))
    q_of, rows, cols, data = (np.concatenate(a) for a in zip(*pieces))
    if len(pieces) > 1:                                         # blocks of children: by query
        order = np.argsort(q_of, kind="stable")
        q_of, rows, cols, data = q_of[order], rows[order], cols[order], data[order]
    bounds = np.searchsorted(q_of, np.arange(len(mats) + 1))
    return [(rows[a:b], cols[a:b], data[a:b]) if sums[r] else None
            for r, (a, b) in enumerate(zip(bounds[:-1], bounds[1:]))]


def _whitened_dense(mat: sp.csr_matrix, lt: np.ndarray, lay: Layout
                    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`whitened` of any query: children in blocks, each block's ``L_kᵀ Q`` formed
    densely over the cells some child of the block has."""
    k, m = lt.shape[0], mat.shape[0]
    dense = np.asarray(mat.toarray(), dtype=np.float64)         # m × n
    counted = dense.any(axis=0)                                 # the cells the query counts
    rows, cols, data = [], [], []
    first = 0
    while first < k:                                            # children in blocks
        used = np.flatnonzero(counted & lay.allowed[first])
        step = max(1, _WHITEN_BLOCK // max(1, m * max(used.size, 1)))
        block = slice(first, min(k, first + step))
        used = np.flatnonzero(counted & lay.allowed[block].any(axis=0))
        mixed = lt[block] @ dense[:, used]                      # children × m × used cells
        mixed *= lay.allowed[block][:, None, used]              # each child's own variables
        child, r, j = np.nonzero(mixed)                         # child, row, then column
        rows.append((first + child) * m + r)
        cols.append(lay.var_index[first + child, used[j]])
        data.append(mixed[child, r, j])
        first = block.stop
    return np.concatenate(rows), np.concatenate(cols), np.concatenate(data)


def _factor(q: QueryData, k: int, m: int, scale: float) -> np.ndarray:
    """``L_kᵀ`` (children × m × m, upper) with ``scale·W_k = L_k L_kᵀ``, the weights checked."""
    return np.swapaxes(_checked(q, k, m, scale)[1], 1, 2)


def _checked(q: QueryData, k: int, m: int, scale: float) -> tuple[np.ndarray, np.ndarray]:
    """``scale·W_k`` and its Cholesky factor ``L_k`` (lower), once the weights are checked: a
    symmetric positive definite matrix per child."""
    _check_shape(q, k, m)
    w = np.asarray(q.weights, dtype=np.float64)
    if np.abs(w - np.swapaxes(w, 1, 2)).max(initial=0.0) > 1e-12 * np.abs(w).max(initial=0.0):
        raise PostprocError(f"query {q.name!r}: a child's weight matrix is not symmetric")
    w = w * scale
    try:
        chol = np.linalg.cholesky(w)                            # K × m × m, lower
    except np.linalg.LinAlgError:
        raise PostprocError(
            f"query {q.name!r}: a child's weight matrix is not positive definite (the inverse "
            "of a covariance is; a zero-variance answer belongs in the constraints)") from None
    return w, chol


def _check_shape(q: QueryData, k: int, m: int) -> None:
    """A weight matrix per child of ``q`` for its ``k`` children's ``m`` answers."""
    if np.shape(q.weights) != (k, m, m):
        raise PostprocError(
            f"query {q.name!r}: a weight matrix per child must be children × answers × "
            f"answers = {(k, m, m)}, not {np.shape(q.weights)}")


def _sharing(qs: Sequence[QueryData]) -> list[list[int]]:
    """The positions of the queries that share one weight array (BlueDown's 63 race queries),
    group by group in order of first appearance; a group's later members are checked to have
    the children and answers of its weights (its first is checked where they are factored)."""
    shared: dict[int, list[int]] = {}
    for i, q in enumerate(qs):
        shared.setdefault(id(q.weights), []).append(i)
    for members in shared.values():
        for i in members[1:]:       # the same weights: the same children and answers
            _check_shape(qs[i], *qs[i].values.shape)
    return list(shared.values())


def _csr(matrix) -> sp.csr_matrix:
    """``matrix`` as CSR, itself when it is one."""
    return matrix if isinstance(matrix, sp.csr_matrix) else sp.csr_matrix(matrix)


def one_cell_each(q: QueryData) -> bool:
    """Whether every answer of ``q`` is one cell (times a nonzero coefficient) and no cell is in
    two answers: its matrix weights go into ``P`` as blocks (:func:`cell_blocks`).

    Examples
    --------
    >>> one_cell_each(QueryData("race", sp.csr_matrix(np.eye(3)[[2, 0]]), np.zeros((1, 2)),
    ...                         np.eye(2)[None]))
    True
    >>> one_cell_each(QueryData("total", sp.csr_matrix(np.ones((1, 2))), np.zeros((1, 1)),
    ...                         np.eye(1)[None]))
    False
    """
    seen = _CELLWISE.get(id(q.matrix))
    if seen is not None and seen[0] is q.matrix:
        return seen[1]
    mat = _csr(q.matrix)
    indptr = mat.indptr
    cellwise = bool(indptr[-1] == mat.shape[0] and (indptr[1:] - indptr[:-1] == 1).all()
                    and mat.data.all() and np.bincount(mat.indices).max(initial=0) <= 1)
    if len(_CELLWISE) >= 4096:
        _CELLWISE.clear()
    _CELLWISE[id(q.matrix)] = (q.matrix, cellwise)
    return cellwise


#: :func:`one_cell_each`'s answers by matrix: every node of a level shares its queries'
#: matrices (a BlueDown block node's 64 took 1 ms to check, 0.3 s per 300 nodes). The matrix is
#: held beside its answer, so its ``id`` cannot be another's while it is here; query matrices
#: are built once and never changed in place.
_CELLWISE: dict[int, tuple[object, bool]] = {}


def whole_groups(q: QueryData, groups: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """Whether every answer of ``q`` counts all the cells of one group (``groups``: each cell's
    group, the fit's :attr:`~postproc.methods.topdown.task.NodeTask.cell_groups`) with one
    nonzero coefficient, no group in two answers: then each answer's group and coefficient (its
    answers are the fit's group sums, and its weights go into ``P`` as blocks over them:
    :func:`cell_blocks`), else None.

    Examples
    --------
    Cells 0–1 and 2–3 are groups; a query of the second group's sum and twice the first's:

    >>> groups = np.array([0, 0, 1, 1])
    >>> q = QueryData("totals", sp.csr_matrix(np.array([[0, 0, 1, 1], [2, 2, 0, 0]])),
    ...               np.zeros((1, 2)), np.eye(2)[None])
    >>> [a.tolist() for a in whole_groups(q, groups)]
    [[1, 0], [1.0, 2.0]]
    >>> whole_groups(QueryData("part", sp.csr_matrix(np.array([[1, 0, 1, 1]])),
    ...                        np.zeros((1, 1)), np.eye(1)[None]), groups) is None
    True
    """
    seen = _GROUPWISE.get(id(q.matrix))
    if seen is not None and seen[0] is q.matrix and (
            seen[1] is groups or np.array_equal(seen[1], groups)):  # the tasks' own copies
        return seen[2]
    mat = _csr(q.matrix)
    m, n = mat.shape
    count = np.diff(mat.indptr)
    answer = None
    if m and (count > 0).all() and n == groups.size:
        first = mat.indptr[:-1]
        row = np.repeat(np.arange(m), count)
        group, coef = groups[mat.indices[first]], mat.data[first].astype(np.float64)
        size = np.bincount(groups)
        if ((groups[mat.indices] == group[row]).all() and (mat.data == coef[row]).all()
                and coef.all() and (count == size[group]).all()
                and np.unique(row * n + mat.indices).size == mat.nnz
                and np.bincount(group).max() <= 1):
            answer = (group.astype(np.int64), coef)
    if len(_GROUPWISE) >= 4096:
        _GROUPWISE.clear()
    _GROUPWISE[id(q.matrix)] = (q.matrix, groups, answer)
    return answer


#: :func:`whole_groups`' answers by matrix (and groups), held as :data:`_CELLWISE`'s are.
_GROUPWISE: dict[int, tuple[object, object, tuple[np.ndarray, np.ndarray] | None]] = {}


@dataclass(frozen=True, eq=False)
class SumColumns:
    """The fit's group sums as :func:`cell_blocks` reads them: each cell's group (``groups``)
    and, for each child and group, the column that holds the group's sum (``column``, children
    × groups): the sum's own variable (numbered from ``n_x``), the one variable of a group that
    has one, or −1 (no variable: the sum is 0); ``n`` columns in all, variables then sums.

    Examples
    --------
    >>> sums = SumColumns(np.array([0, 0, 1]), np.array([[3, 2]]), 4)
    >>> sums.column[0].tolist()       # group 0's sum is column 3, group 1 is variable 2
    [3, 2]
    """

    groups: np.ndarray
    column: np.ndarray
    n: int


def in_blocks(q: QueryData, sums: SumColumns | None) -> bool:
    """Whether :func:`cell_blocks` takes ``q``: a weight matrix per child on answers that are
    cells (:func:`one_cell_each`) or, given the fit's ``sums``, group sums
    (:func:`whole_groups`).

    Examples
    --------
    >>> q = QueryData("total", sp.csr_matrix(np.ones((1, 2))), np.zeros((1, 1)),
    ...               np.eye(1)[None])
    >>> in_blocks(q, None), in_blocks(q, SumColumns(np.array([0, 0]), np.array([[2]]), 3))
    (False, True)
    """
    return q.weights.ndim == 3 and (one_cell_each(q) or (
        sums is not None and whole_groups(q, sums.groups) is not None))


@dataclass(frozen=True, eq=False)
class CellBlocks:
    """The terms of queries whose answers are cells or group sums (:func:`cell_blocks`):
    ``P``'s entries (COO, both triangles), the linear term on every column (the variables,
    then the group sums: numbered from ``n_x``), the constant, and the columns the queries
    cover with their targets (the fit's centre there).

    Examples
    --------
    No such query: nothing in ``P``, a zero linear term on the node's 3 variables.

    >>> from types import SimpleNamespace
    >>> none = cell_blocks([], SimpleNamespace(n_x=3), scale=1.0)
    >>> none.data.size, none.linear.tolist(), none.const, none.covered.size
    (0, [0.0, 0.0, 0.0], 0.0, 0)
    """

    rows: np.ndarray
    cols: np.ndarray
    data: np.ndarray
    linear: np.ndarray
    const: float
    covered: np.ndarray
    target: np.ndarray


def block_entries(qs: Sequence[QueryData], lay: Layout) -> int:
    """How many entries of ``P`` :func:`cell_blocks` gives queries whose answers are cells
    (:func:`one_cell_each`): a block per query and child over its answers that are variables.

    Examples
    --------
    >>> from types import SimpleNamespace
    >>> q = QueryData("race", sp.identity(3, format="csr"), np.zeros((2, 3)), np.eye(3)[None])
    >>> block_entries([q], SimpleNamespace(allowed=np.array([[1, 1, 0], [1, 1, 1]], bool)))
    13
    """
    return sum(int((lay.allowed[:, _csr(q.matrix).indices].sum(axis=1) ** 2).sum()) for q in qs)


def cell_blocks(qs: Sequence[QueryData], lay: Layout, scale: float,
                sums: SumColumns | None = None) -> CellBlocks:
    """``Σ_k (Q x_k − y_k)ᵀ scale·W_k (Q x_k − y_k)`` of queries whose answers are cells
    (:func:`one_cell_each`) or, with ``sums``, the fit's group sums (:func:`whole_groups`), as
    ``½ vᵀ P v + linearᵀ v + const`` over the variables and the sums (``v``): for each child, a
    dense block ``2·scale·a_i a_j W_k[i, j]`` over the pairs of its answers whose cell (or
    group) has a column, the linear term ``−2·scale·a_i (W_k y_k)_i`` on them, and
    ``scale·Σ_k y_kᵀ W_k y_k``. An answer with no column is 0: its residual ``−y_i`` stays in
    the constant and, through ``W_k``, in the others' linear term — the same objective as
    whitening gives, with no auxiliary variable or row. Queries sharing a weight array (the
    63 race queries of a BlueDown child) are done together.

    Examples
    --------
    One child, cells 0 and 1 answered by a query with weights ``[[2, 1], [1, 2]]``, cell 1
    not a variable: ``P = [4]``, the linear term ``−2 (W y)_0``, ``const = yᵀ W y``:

    >>> from types import SimpleNamespace
    >>> q = QueryData("race", sp.identity(2, format="csr"), np.array([[3.0, 1.0]]),
    ...               np.array([[[2.0, 1.0], [1.0, 2.0]]]))
    >>> lay = SimpleNamespace(allowed=np.array([[True, False]]),
    ...                       var_index=np.array([[0, -1]]), n_x=1)
    >>> b = cell_blocks([q], lay, scale=1.0)
    >>> b.rows.tolist(), b.cols.tolist(), b.data.tolist(), b.linear.tolist(), b.const
    ([0], [0], [4.0], [-14.0], 26.0)
    >>> b.covered.tolist(), b.target.tolist()
    ([0], [3.0])
    """
    n_cols = lay.n_x if sums is None else sums.n
    linear = np.zeros(n_cols)
    const = 0.0
    table = None                    # each child's column of each cell, then of each group
    pieces: list[tuple[np.ndarray, ...]] = []
    for group in _sharing(qs):
        members = [qs[i] for i in group]
        k, m = members[0].values.shape
        w = _checked(members[0], k, m, scale)[0]
        cell, coef = _answers(members, sums)                            # R × m each
        if table is None:
            table = lay.var_index if sums is None else np.hstack([lay.var_index, sums.column])
        y = np.stack([np.asarray(q.values, dtype=np.float64) for q in members])   # R × K × m
        wy = np.matmul(w, y.transpose(1, 2, 0)).transpose(2, 0, 1)     # R × K × m
        const += float(np.vdot(y, wy))
        var_of = table[:, cell].transpose(1, 0, 2)                      # R × K × m
        r, child, i = np.nonzero(var_of >= 0)                           # by (r, child), i
        var = var_of[r, child, i]
        linear += np.bincount(var, weights=-2 * coef[r, i] * wy[r, child, i],
                              minlength=n_cols)
        group = r * k + child                                         # ascending
        counts = np.bincount(group, minlength=len(members) * k)
        size, start = counts[group], (np.cumsum(counts) - counts)[group]  # its group's
        left = np.repeat(np.arange(r.size), size)                     # each with each of its
        right = np.repeat(start, size) + np.arange(left.size) \
            - np.repeat(np.cumsum(size) - size, size)                 # group, in order
        data = 2 * coef[r[left], i[left]] * coef[r[left], i[right]] \
            * w[child[left], i[left], i[right]]
        pieces.append((var[left], var[right], data, var, y[r, child, i] / coef[r, i]))
    if not pieces:
        empty = np.zeros(0, np.int64)
        return CellBlocks(empty, empty, np.zeros(0), linear, 0.0, empty, np.zeros(0))
    rows, cols, data, covered, target = (np.concatenate(a) for a in zip(*pieces))
    return CellBlocks(rows, cols, data, linear, const, covered, target)


def _answers(members: Sequence[QueryData], sums: SumColumns | None
             ) -> tuple[np.ndarray, np.ndarray]:
    """Each answer's column of :func:`cell_blocks`' table (its cell, or the number of cells
    plus its group) and coefficient, query by query (members × answers)."""
    cells, coefs = [], []
    for q in members:
        mat = _csr(q.matrix)
        if one_cell_each(q):
            cells.append(mat.indices)
            coefs.append(mat.data)
        else:
            group, coef = whole_groups(q, sums.groups)
            cells.append(mat.shape[1] + group)
            coefs.append(coef)
    return np.stack(cells).astype(np.int64), np.stack(coefs).astype(np.float64)


#: Entries of the children × answers × cells block :func:`whitened` forms at once.
_WHITEN_BLOCK = 4_000_000
