"""The node problem's variables and rows: which cells are variables (:class:`Layout`) and the
sparse rows the fit and the rounding assemble over them (:class:`Rows`, and the per-child and
per-cell blocks: :func:`per_child`, :func:`stacked`, :func:`parent_rows`, :func:`kept_rows`).

A node's variables are the cells a child may hold, child by child and cell by cell; every other
cell is 0 (``docs/topdown.md``, "The node problem"). The blocks repeat one small matrix per
child (a query's rows, the constraint rows) and one row per cell across children (parent
consistency); they are built as index arithmetic over the children × cells variable map.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np
import scipy.sparse as sp

from postproc.methods.topdown.failsafe import dead_cells, stack_kept
from postproc.methods.topdown.task import KeptQuery, NodeTask

__all__ = ["Layout"]      # the rest serve the fit and the rounding


@dataclass(frozen=True, eq=False)
class Layout:
    """Which cells of a node are variables, and where each variable sits.

    Built once per node (:meth:`of`) and handed to every fit pass and to the rounding, which
    all read the same variables; the failsafe builds its own (:meth:`relaxed`).

    Examples
    --------
    >>> from postproc.methods.topdown.task import QueryData
    >>> task = NodeTask("county", "p", np.array([3, 0]), np.array(["a", "b"], dtype=object),
    ...                 (), sp.csr_matrix((0, 2), dtype=np.int64), np.zeros((2, 0)),
    ...                 np.zeros((2, 0)), np.array([[False, False], [True, False]]))
    >>> layout = Layout.of(task)       # cell 1 is empty in the parent; child b may not hold cell 0
    >>> layout.n_x, layout.var_index.tolist()
    (1, [[0, -1], [-1, -1]])
    """

    allowed: np.ndarray        # (K, n) bool: variable exists
    var_index: np.ndarray      # (K, n) int: position in x, -1 where fixed at 0
    active: np.ndarray         # (n,) bool: parent cell > 0 (all True at the root)
    cells: np.ndarray          # (n,) bool: some child has the cell as a variable
    n_x: int
    child: np.ndarray          # (n_x,) each variable's child
    cell: np.ndarray           # (n_x,) and cell
    memo: dict = field(default_factory=dict, repr=False)    # what depends on it alone

    @classmethod
    def of(cls, task: NodeTask) -> "Layout":
        """The variables of ``task``: a child's cells that are not zero cells of the child and
        not 0 in the parent."""
        active = (np.ones(task.n, bool) if task.parent_hist is None
                  else task.parent_hist > 0)
        return cls._build(task, active)

    @classmethod
    def relaxed(cls, task: NodeTask, keep: Sequence[KeptQuery] = ()) -> "Layout":
        """The failsafe's variables: cells that are 0 in the parent stay variables too, their
        parent consistency relaxed with slacks like every other cell's — except cells of a kept
        answer that is 0 in the parent, which stay 0 in every child."""
        active = (np.ones(task.n, bool) if task.parent_hist is None
                  else ~dead_cells(keep, task.parent_hist))
        return cls._build(task, active)

    @classmethod
    def _build(cls, task: NodeTask, active: np.ndarray) -> "Layout":
        allowed = active[None, :] & ~task.zero
        child, cell = np.nonzero(allowed)
        var_index = np.full((task.k, task.n), -1, dtype=np.int64)
        var_index[child, cell] = np.arange(child.size)
        return cls(allowed, var_index, active, allowed.any(axis=0), child.size, child, cell)

    def constraint_rows(self, task: NodeTask
                        ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """:func:`per_child` of the task's constraint matrix (this layout is the task's;
        every fit pass and the rounding read it, so it is built once)."""
        if "constraints" not in self.memo:
            self.memo["constraints"] = per_child(task.matrix, self.var_index, self.cells)
        return self.memo["constraints"]

    def bounds(self, task: NodeTask, exact_parent: bool) -> tuple[np.ndarray, np.ndarray]:
        """:func:`binding_bounds` of the task (this layout is the task's; every fit pass and
        the rounding read them, so they are found once)."""
        key = ("bounds", exact_parent)
        if key not in self.memo:
            self.memo[key] = binding_bounds(task, exact_parent)
        return self.memo[key]

    def scatter(self, values: np.ndarray) -> np.ndarray:
        """Children × cells from the variables' values (the first ``n_x`` of ``values``)."""
        out = np.zeros(self.allowed.shape)
        out[self.allowed] = values[:self.n_x]
        return out


class Rows:
    """Rows of a sparse constraint matrix, built as COO triplets and assembled once.

    The node problems repeat one small block per child (a query's rows, the constraint rows) and
    one row per cell across children (parent consistency); building them as index arithmetic
    over the children × cells variable map is several times faster than sparse ``kron`` and
    column slicing per node.
    """

    def __init__(self, n_var: int):
        self.n_var = n_var
        self.rows: list[np.ndarray] = []
        self.cols: list[np.ndarray] = []
        self.data: list[np.ndarray] = []
        self.lower: list[np.ndarray] = []
        self.upper: list[np.ndarray] = []
        self.n = 0

    def add(self, rows, cols, data, lower, upper) -> None:
        """Add ``len(lower)`` rows; ``rows`` are numbered from 0 within the block."""
        self.rows.append(np.asarray(rows, dtype=np.int64) + self.n)
        self.cols.append(np.asarray(cols, dtype=np.int64))
        self.data.append(np.broadcast_to(np.asarray(data, dtype=np.float64), np.shape(rows)))
        self.lower.append(np.asarray(lower, dtype=np.float64))
        self.upper.append(np.asarray(upper, dtype=np.float64))
        self.n += len(self.lower[-1])

    def widened(self, n_var: int) -> "Rows":
        """The same rows over ``n_var ≥ self.n_var`` columns (a copy to add more rows to)."""
        out = Rows(n_var)
        out.rows, out.cols, out.data = list(self.rows), list(self.cols), list(self.data)
        out.lower, out.upper, out.n = list(self.lower), list(self.upper), self.n
        return out

    def matrix(self, fmt: str = "csc") -> sp.spmatrix:
        if not self.rows:
            return sp.csc_matrix((0, self.n_var)) if fmt == "csc" else sp.csr_matrix(
                (0, self.n_var))
        m = sp.coo_matrix((np.concatenate(self.data), (np.concatenate(self.rows),
                                                       np.concatenate(self.cols))),
                          shape=(self.n, self.n_var))
        return m.tocsc() if fmt == "csc" else m.tocsr()

    def bounds(self) -> tuple[np.ndarray, np.ndarray]:
        if not self.lower:
            return np.zeros(0), np.zeros(0)
        return np.concatenate(self.lower), np.concatenate(self.upper)


#: Triplets of the query and constraint matrices, which every node of a level shares: id →
#: (matrix, triplets). The matrix is held so its id cannot be reused while it is here; query
#: and constraint matrices are never changed in place.
_TRIPLETS: dict[int, tuple[Any, tuple[np.ndarray, np.ndarray, np.ndarray]]] = {}
_TRIPLETS_KEPT = 256
_TRIPLETS_LOCK = threading.Lock()


def triplets(matrix: sp.spmatrix) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(rows, cols, data)`` of a sparse matrix in row-major order, columns ascending within a
    row (a COO conversion per call was a tenth of a block-group node's Python time; the nodes
    of a level share their matrices, so the triplets are kept for the next node)."""
    hit = _TRIPLETS.get(id(matrix))
    if hit is not None and hit[0] is matrix:
        return hit[1]
    csr = sp.csr_matrix(matrix, copy=True)
    csr.sum_duplicates()
    found = (np.repeat(np.arange(csr.shape[0]), np.diff(csr.indptr)), csr.indices, csr.data)
    with _TRIPLETS_LOCK:                                # executors may run nodes in threads
        if len(_TRIPLETS) >= _TRIPLETS_KEPT:
            _TRIPLETS.pop(next(iter(_TRIPLETS)))        # the oldest
        _TRIPLETS[id(matrix)] = (matrix, found)
    return found


def per_child(matrix: sp.spmatrix, var_index: np.ndarray, alive: np.ndarray | None = None
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``kron(I_K, matrix)`` restricted to existing variables, as COO ``(rows, cols, data)``
    (row ``k·m + r`` is row ``r`` of child ``k``), and which rows kept any variable."""
    return stacked((matrix,), var_index, alive)


def stacked(matrices: Sequence[sp.spmatrix], var_index: np.ndarray,
             alive: np.ndarray | None = None
             ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """:func:`per_child` of several matrices, their answers numbered one after another: row
    ``r`` of child ``k`` in matrix ``q`` is answer ``K·(m_0 + … + m_{q-1}) + k·m_q + r``.

    The triplets come in canonical CSR order (answers ascending, variables ascending within an
    answer): variables are numbered child by child, cell by cell. All matrices are expanded
    in one K × entries gather; only their entries on a cell some child has as a variable take
    part (at a 2020-style block group about 40 of 2,016 cells): ``alive``, when given, is that
    mask (``Layout.cells``).
    """
    k = var_index.shape[0]
    if alive is None:
        alive = (var_index >= 0).any(axis=0)
    rows, cols, data, which, sizes = [], [], [], [], []
    for q, matrix in enumerate(matrices):
        r, c, d = triplets(matrix)
        sel = np.flatnonzero(alive[c])
        rows.append(r[sel])
        cols.append(c[sel])
        data.append(d[sel])
        which.append(np.full(sel.size, q))
        sizes.append(matrix.shape[0])
    if not matrices:
        return np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0), np.zeros(0, bool)
    row, col, entry = np.concatenate(rows), np.concatenate(cols), np.concatenate(data)
    q = np.concatenate(which)
    m = np.asarray(sizes, dtype=np.int64)
    answer0 = k * np.concatenate([[0], np.cumsum(m)[:-1]])        # first answer of each matrix
    count = np.bincount(q, minlength=m.size)                     # live entries per matrix
    entry0 = np.concatenate([[0], np.cumsum(count)[:-1]])
    vi = var_index[:, col]                                       # K × live entries
    child = np.arange(k)[:, None]
    answer = answer0[q] + child * m[q] + row                     # K × live entries
    # output order: matrix, child, entry (what stacking each matrix's kron gives)
    at = (k * entry0[q] + child * count[q] + (np.arange(col.size) - entry0[q])).ravel()
    order = np.empty(at.size, dtype=np.int64)
    order[at] = np.arange(at.size)
    vi, answer = vi.ravel()[order], answer.ravel()[order]
    keep = vi >= 0
    answer = answer[keep]
    has_var = np.zeros(k * int(m.sum()), dtype=bool)
    has_var[answer] = True
    values = np.broadcast_to(entry.astype(np.float64), (k, col.size)).ravel()[order][keep]
    return answer, vi[keep], values, has_var


def per_cell(var_index: np.ndarray, cells: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Rows ``Σ_k x_kj`` for each ``j`` in ``cells`` (row i is cell ``cells[i]``), as COO."""
    vi = var_index[:, cells]                                     # K × len(cells)
    keep = vi >= 0
    rows = np.broadcast_to(np.arange(cells.size)[None, :], vi.shape)[keep]
    return rows, vi[keep]


def parent_rows(var_index: np.ndarray, cells: np.ndarray, first_slack: int | None
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Rows ``Σ_k x_kj`` for each cell in ``cells``, as COO; with ``first_slack``, plus slack
    columns ``+s⁺_j − s⁻_j`` numbered from ``first_slack`` (s⁺ first, then s⁻)."""
    r, c = per_cell(var_index, cells)
    data = np.ones(r.size)
    if first_slack is None:
        return r, c, data
    m = cells.size
    return (np.concatenate([r, np.arange(m), np.arange(m)]),
            np.concatenate([c, first_slack + np.arange(m), first_slack + m + np.arange(m)]),
            np.concatenate([data, np.ones(m), -np.ones(m)]))


def kept_rows(task: NodeTask, lay: Layout, keep: Sequence[KeptQuery], n_cols: int,
               floor_sum: np.ndarray | None = None
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, list[str]]:
    """Rows ``Σ_{j ∈ answer} Σ_k x_kj = parent's answer`` for every kept answer the parent has
    persons in (minus what the floors account for, ``floor_sum`` per cell, in the rounding),
    as COO over the variables;
    and the labels of such answers that no variable can hold (the relaxation is infeasible)."""
    m, labels = stack_kept(keep, drop_implied=True)
    if not m.shape[0]:
        return np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0), np.zeros(0), []
    parent = task.parent_hist.astype(np.int64)
    live = np.flatnonzero(m @ parent > 0)     # answers that are 0 hold only dead cells
    target = (m @ parent if floor_sum is None
              else m @ (parent - floor_sum.astype(np.int64)))[live]
    act = np.flatnonzero(lay.active)
    r, c = per_cell(lay.var_index, act)
    cell_vars = sp.csr_matrix((np.ones(r.size), (r, c)), shape=(act.size, n_cols))
    rows = sp.coo_matrix(m[live][:, act].astype(np.float64) @ cell_vars)
    empty = np.setdiff1d(np.arange(live.size), rows.row)
    return (rows.row.astype(np.int64), rows.col.astype(np.int64), rows.data,
            target.astype(np.float64), [labels[live[i]] for i in empty])


def child_sum_rows(task: NodeTask, lay: Layout, floor: np.ndarray | None = None
                   ) -> list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]]:
    """The rows of the task's sums across children (:attr:`NodeTask.sums`), one block per sum
    as COO over the variables (row ``a``: answer ``a`` of the summed children) with its lower
    and upper bounds; with ``floor`` (the rounding's ``⌊X*⌋`` on the variables), the bounds
    less what the floors already count. Rows free on both sides are left out.

    Examples
    --------
    >>> from postproc.methods.topdown.task import ChildSum
    >>> pair = ChildSum.exact(np.array([0, 2]), sp.csr_matrix(np.ones((1, 2), np.int64)),
    ...                       np.array([4]), ("pair: total",))
    >>> task = NodeTask("state", "", np.array([5, 2]), np.array(["a", "b", "c"], dtype=object),
    ...                 (), sp.csr_matrix((0, 2), dtype=np.int64), np.zeros((3, 0)),
    ...                 np.zeros((3, 0)), np.zeros((3, 2), bool), sums=(pair,))
    >>> [(r.tolist(), c.tolist(), lo.tolist(), hi.tolist()) for r, c, _, lo, hi
    ...  in child_sum_rows(task, Layout.of(task))]        # a's cells are x0, x1; c's x4, x5
    [([0, 0, 0, 0], [0, 1, 4, 5], [4.0], [4.0])]
    """
    out = []
    for held in task.sums:
        vi = np.full_like(lay.var_index, -1)
        vi[held.children] = lay.var_index[held.children]
        r, c, v, _ = per_child(held.matrix, vi, lay.cells)
        m = held.matrix.shape[0]
        r = r % m                     # child k's answer a is row k·m + a: the answer
        lo, hi = held.lower.astype(np.float64), held.upper.astype(np.float64)
        if floor is not None:
            base = np.bincount(r, weights=v * floor[c], minlength=m)
            lo, hi = lo - base, hi - base
        bounded = np.isfinite(lo) | np.isfinite(hi)
        if not bounded.all():
            renumber = np.cumsum(bounded) - 1
            sel = bounded[r]
            r, c, v = renumber[r[sel]], c[sel], v[sel]
            lo, hi = lo[bounded], hi[bounded]
        out.append((r, c, v, lo, hi))
    return out


def binding_bounds(task: NodeTask, exact_parent: bool = True
                   ) -> tuple[np.ndarray, np.ndarray]:
    """The task's constraint bounds (children × rows) with the sides that cannot bind made
    infinite (an equality stays one). On a row whose coefficients are all ≥ 0: a lower bound
    ≤ 0 (every variable is ≥ 0); and, when the children's cells sum to the parent's exactly
    (``exact_parent``: not in the failsafe, whose slacks relax that), an upper bound at or
    above what the row can reach, ``Σ_c a_c · parent_c`` (each child's cell is at most the
    parent's; at the root, whose total a row holds exactly, ``max_c a_c · total``). The
    optimum is the same; but a bound of 10¹¹ on a row of tens of millions (the Census
    Bureau's household upper bounds, housing units × 99,999) spoils the solver's scaling:
    Clarabel stalled short of optimal on such a node and the fit fell through to OSQP.

    Examples
    --------
    >>> import numpy as np, scipy.sparse as sp
    >>> from postproc.methods.topdown.task import NodeTask
    >>> C = sp.csr_matrix(np.array([[1.0, 1.0], [1.0, -1.0]]))
    >>> task = NodeTask("county", "p", np.array([3, 1]), np.array(["a", "b"], dtype=object),
    ...                 (), C, np.array([[0.0, -5.0], [1.0, -5.0]]),
    ...                 np.array([[4e11, 5.0], [3.0, 5.0]]), np.zeros((2, 2), bool))
    >>> lo, hi = binding_bounds(task)
    >>> lo.tolist(), hi.tolist()
    ([[-inf, -5.0], [1.0, -5.0]], [[inf, 5.0], [3.0, 5.0]])
    >>> binding_bounds(task, exact_parent=False)[1].tolist()
    [[400000000000.0, 5.0], [3.0, 5.0]]

    At the root, a row holding its total exactly bounds every other row:

    >>> root = NodeTask("nation", "", None, np.array([""], dtype=object), (),
    ...                 sp.csr_matrix(np.array([[1.0, 1.0], [2.0, 0.0]])),
    ...                 np.array([[7.0, 0.0]]), np.array([[7.0, 1e12]]), np.zeros((1, 2), bool))
    >>> binding_bounds(root)[1].tolist()
    [[7.0, inf]]
    """
    lower, upper = task.lower, task.upper
    matrix = sp.csr_matrix(task.matrix)
    if not matrix.shape[0]:
        return lower, upper
    negative = np.zeros(matrix.shape[0], bool)
    rows_of = np.repeat(np.arange(matrix.shape[0]), np.diff(matrix.indptr))
    negative[rows_of[matrix.data < 0]] = True
    equal = lower == upper              # an equality stays one
    lower = np.where(~negative[None, :] & (lower <= 0) & ~equal, -np.inf, lower)
    if exact_parent and task.parent_hist is not None:
        reach = np.where(negative, np.inf, matrix @ task.parent_hist.astype(np.float64))
        upper = np.where((upper >= reach[None, :]) & ~equal, np.inf, upper)
    elif task.parent_hist is None:      # the root: its total, where a row holds it exactly
        ones = (np.diff(matrix.indptr) == matrix.shape[1]) & ~negative
        ones &= np.array([bool(np.all(matrix.data[a:b] == 1.0)) for a, b in
                          zip(matrix.indptr[:-1], matrix.indptr[1:])])
        exact = ones[None, :] & (task.lower == task.upper) & np.isfinite(task.lower)
        if exact.any():
            total = np.where(exact, task.lower, np.inf).min(axis=1)       # per child
            top = np.zeros(matrix.shape[0])
            np.maximum.at(top, rows_of, matrix.data)
            reach = np.where(negative[None, :], np.inf, top[None, :] * total[:, None])
            upper = np.where((upper >= reach) & ~equal, np.inf, upper)
    return lower, upper
