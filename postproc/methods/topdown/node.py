"""One parent's problem: weighted least-squares fit, constraint-preserving rounding, verification.

A :class:`NodeTask` holds everything about one parent and its ``K`` children: the parent's
rounded histogram (``None`` at the root), the children's noisy answers and weights for each
measured query, and the children's compiled constraint rows. :func:`solve_node` turns it into
integer child histograms.

**Fit** (docs/topdown.md, "The node problem"). Variables are only the cells a child may hold:
cells that are 0 in the parent and a child's zero cells (structural zeros, unit types the child has no unit of) are fixed at 0
and dropped. Non-identity queries get auxiliary variables ``z = Q x`` so the objective is
diagonal. Rows: ``Q x − z = 0``, ``Σ_k x_k = x̂_p`` per cell, ``lower ≤ C x_k ≤ upper`` per child,
``x ≥ 0``. Weights are divided by their maximum before solving (better conditioning) and the
objective is reported in the original units. With ``NodeTask.cell_groups``, a row that counts
all of a child's variables in a group with one coefficient counts the group's sum, a variable
of its own, instead (``Σ group − t = 0``): the same problem, whose KKT factorization no longer
makes every child's variables a clique. Auxiliaries over at most
:data:`SUBSTITUTE_ENTRIES` variables and sums are substituted back into the objective (a small
dense block in ``P`` for a variable and a row fewer), except where the children are large
enough for Clarabel to factor them as dense blocks anyway.

**Rounding.** ``X̃ = ⌊X*⌋ + B`` with ``B ∈ [0, 1]``: ``Σ_k B_kj = x̂_pj − Σ_k ⌊X*_kj⌋``,
``lower − C⌊X*⌋ ≤ C B ≤ upper − C⌊X*⌋``, minimizing ``Σ (1 − 2·frac) B`` (= ``Σ |X̃ − X*|`` up to
a constant). The constraint matrix is totally unimodular for the usual nested constraints, so the
LP's vertex optimum is integral: it is solved as an LP, integrality is *verified*, and a MILP is
solved when it is not. With rounding passes (``NodeTask.round_passes``), each pass first rounds
its queries' answers as close (L1) to the fit's as the constraints allow and holds them; an
answer an earlier fit pass held, whose target is a half, goes toward that pass's answer (a tie
the multipass fit makes, which the fit's last digits would otherwise decide).

**Failsafe.** When the fit is infeasible, parent consistency is relaxed with slacks cell by cell
while the parent's total and its kept query answers stay exact (:mod:`postproc.methods.topdown.failsafe`):
first the least total slack (LP), then the fit with the total slack at most that least value
plus ``NodeTask.failsafe_slack`` (1.0 by default, the Census Bureau's rule); the rounding keeps
the same answers exact and allows integer slacks at a large cost, then, where the allowance
admits another integer slack (:func:`~postproc.methods.topdown.failsafe.rounding_allowance`),
rounds again within that least integer slack plus the allowance. When keeping them is
infeasible, the kept set is relaxed one level at a time (margins, then the total). The unit,
the relaxation, the cells that gained and lost persons and the binding constraints are
reported.
"""

from __future__ import annotations

import threading
import time
import weakref
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np
import scipy.sparse as sp

from postproc.infra.solvers import (
    DEFAULT_QP_CHAIN,
    LP,
    QP,
    InfeasibleError,
    SolverError,
    Status,
    solve_lp,
    solve_qp,
)
from postproc.infra.solvers.backends import large_blocks
from postproc.methods.topdown.failsafe import (
    KeptQuery,
    check_parent_can_hold,
    dead_cells,
    kept_violations,
    moved_cells,
    relaxation_of,
    relaxation_stages,
    rounding_allowance,
    stack_kept,
)
from postproc.methods.topdown.task import NodeResult, NodeTask, QueryData

__all__ = ["QueryData", "NodeTask", "NodeResult", "solve_node", "assemble_fit", "VerificationError"]

_FRAC_TOL = 1e-7      # X* within this of an integer counts as that integer
_INT_TOL = 1e-6       # LP solution within this of an integer is integral
_TIE_TOL = 1e-5       # a rounding target within this of a half is a tie (_toward_held)
_TIE_NUDGE = 1e-4     # ... and is moved this far from the half, toward the held answer


class VerificationError(InfeasibleError):
    """A result broke a promise in exact integer arithmetic (a bug, never silently passed).

    Examples
    --------
    Children that do not sum to their parent:

    >>> task = NodeTask("county", "p", np.array([3, 1]), np.array(["a", "b"], dtype=object),
    ...                 (), sp.csr_matrix((0, 2), dtype=np.int64), np.zeros((2, 0)),
    ...                 np.zeros((2, 0)), np.zeros((2, 2), bool))
    >>> verify_node(task, np.array([[2, 1], [2, 0]]))
    Traceback (most recent call last):
    ...
    postproc.methods.topdown.node.VerificationError: county children of 'p' fail verification: ... 4 ≠ 3
    """


# -- fit ----------------------------------------------------------------------------------------

@dataclass(frozen=True, eq=False)
class _Layout:
    allowed: np.ndarray        # (K, n) bool: variable exists
    var_index: np.ndarray      # (K, n) int: position in x, -1 where fixed at 0
    active: np.ndarray         # (n,) bool: parent cell > 0 (all True at the root)
    cells: np.ndarray          # (n,) bool: some child has the cell as a variable
    n_x: int
    child: np.ndarray          # (n_x,) each variable's child
    cell: np.ndarray           # (n_x,) and cell
    memo: dict = field(default_factory=dict, repr=False)    # what depends on it alone

    def constraint_rows(self, task: NodeTask
                        ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """:func:`_per_child` of the task's constraint matrix (this layout is the task's;
        every fit pass and the rounding read it)."""
        if "constraints" not in self.memo:
            self.memo["constraints"] = _per_child(task.matrix, self.var_index, self.cells)
        return self.memo["constraints"]


#: The layout of each task being solved (``relax`` off): every fit pass and the rounding share
#: it; :func:`solve_node` drops it when the node is done.
_LAYOUTS: "weakref.WeakKeyDictionary[NodeTask, _Layout]" = weakref.WeakKeyDictionary()
_LAYOUTS_LOCK = threading.Lock()


def _layout(task: NodeTask, relax: bool = False, keep: Sequence[KeptQuery] = ()) -> _Layout:
    """Which cells are variables. ``relax`` (the failsafe): cells that are 0 in the parent stay
    variables too, their parent consistency relaxed with slacks like every other cell's —
    except cells of a kept answer that is 0 in the parent, which stay 0 in every child."""
    if not relax:
        with _LAYOUTS_LOCK:
            hit = _LAYOUTS.get(task)
        if hit is None:
            hit = _new_layout(task)
            with _LAYOUTS_LOCK:
                _LAYOUTS[task] = hit
        return hit
    return _new_layout(task, relax, keep)


def _forget_layout(task: NodeTask) -> None:
    """Drop the task's layout (its node is solved; a level's tasks all live until the level is
    done, and their layouts — children × cells arrays — would add up)."""
    with _LAYOUTS_LOCK:
        _LAYOUTS.pop(task, None)


def _new_layout(task: NodeTask, relax: bool = False, keep: Sequence[KeptQuery] = ()
                ) -> _Layout:
    k, n = task.k, task.n
    if task.parent_hist is None:
        active = np.ones(n, bool)
    elif relax:
        active = ~dead_cells(keep, task.parent_hist)
    else:
        active = task.parent_hist > 0
    allowed = active[None, :] & ~task.zero
    child, cell = np.nonzero(allowed)
    var_index = np.full((k, n), -1, dtype=np.int64)
    var_index[child, cell] = np.arange(child.size)
    return _Layout(allowed, var_index, active, allowed.any(axis=0), child.size, child, cell)


class _Rows:
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

    def widened(self, n_var: int) -> "_Rows":
        """The same rows over ``n_var ≥ self.n_var`` columns (a copy to add more rows to)."""
        out = _Rows(n_var)
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


def _triplets(matrix: sp.spmatrix) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
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


def _per_child(matrix: sp.spmatrix, var_index: np.ndarray, alive: np.ndarray | None = None
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``kron(I_K, matrix)`` restricted to existing variables, as COO ``(rows, cols, data)``
    (row ``k·m + r`` is row ``r`` of child ``k``), and which rows kept any variable."""
    return _stacked((matrix,), var_index, alive)


def _stacked(matrices: Sequence[sp.spmatrix], var_index: np.ndarray,
             alive: np.ndarray | None = None
             ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """:func:`_per_child` of several matrices, their answers numbered one after another: row
    ``r`` of child ``k`` in matrix ``q`` is answer ``K·(m_0 + … + m_{q-1}) + k·m_q + r``.

    The triplets come in canonical CSR order (answers ascending, variables ascending within an
    answer): variables are numbered child by child, cell by cell. All matrices are expanded
    in one K × entries gather; only their entries on a cell some child has as a variable take
    part (at a 2020-style block group about 40 of 2,016 cells): ``alive``, when given, is that
    mask (``_Layout.cells``).
    """
    k = var_index.shape[0]
    if alive is None:
        alive = (var_index >= 0).any(axis=0)
    rows, cols, data, which, sizes = [], [], [], [], []
    for q, matrix in enumerate(matrices):
        r, c, d = _triplets(matrix)
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


def _per_cell(var_index: np.ndarray, cells: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Rows ``Σ_k x_kj`` for each ``j`` in ``cells`` (row i is cell ``cells[i]``), as COO."""
    vi = var_index[:, cells]                                     # K × len(cells)
    keep = vi >= 0
    rows = np.broadcast_to(np.arange(cells.size)[None, :], vi.shape)[keep]
    return rows, vi[keep]


def _parent_rows(var_index: np.ndarray, cells: np.ndarray, first_slack: int | None
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Rows ``Σ_k x_kj`` for each cell in ``cells``, as COO; with ``first_slack``, plus slack
    columns ``+s⁺_j − s⁻_j`` numbered from ``first_slack`` (s⁺ first, then s⁻)."""
    r, c = _per_cell(var_index, cells)
    data = np.ones(r.size)
    if first_slack is None:
        return r, c, data
    m = cells.size
    return (np.concatenate([r, np.arange(m), np.arange(m)]),
            np.concatenate([c, first_slack + np.arange(m), first_slack + m + np.arange(m)]),
            np.concatenate([data, np.ones(m), -np.ones(m)]))


def _kept_rows(task: NodeTask, lay: _Layout, keep: Sequence[KeptQuery], n_cols: int,
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
    r, c = _per_cell(lay.var_index, act)
    cell_vars = sp.csr_matrix((np.ones(r.size), (r, c)), shape=(act.size, n_cols))
    rows = sp.coo_matrix(m[live][:, act].astype(np.float64) @ cell_vars)
    empty = np.setdiff1d(np.arange(live.size), rows.row)
    return (rows.row.astype(np.int64), rows.col.astype(np.int64), rows.data,
            target.astype(np.float64), [labels[live[i]] for i in empty])



def _auxiliaries(r: np.ndarray, c: np.ndarray, v: np.ndarray, w: np.ndarray, y: np.ndarray,
                 n_x: int, x_diag: np.ndarray, x_lin: np.ndarray
                 ) -> tuple[tuple[np.ndarray, np.ndarray, np.ndarray], np.ndarray, np.ndarray]:
    """The auxiliary variables ``z = a·x`` of the objective's non-identity answers, fewest
    possible, exactly.

    ``r, c, v``: the answers' rows over the variables in canonical CSR order (answers
    ascending, variables ascending within an answer, no repeats: :func:`_stacked`'s output;
    checked); ``w, y``: one weight
    and one value per answer. Terms ``w·(a·x − y)²`` are merged without
    changing the objective beyond a constant (which the caller keeps as ``Σ w y²``):

    * an answer with no variable is constant: no auxiliary (at a 2020-style block-group node,
      188 variables had 5,283 auxiliaries, all but 577 of them pinned at 0);
    * an answer of one variable, ``w·(a x_j − y)²``, goes on ``x_j``'s diagonal (``x_diag``,
      ``x_lin`` are updated in place);
    * answers with the same coefficients on the same variables (a child's hispanic × cenrace
      and votingage × hispanic × cenrace answers when it has adults only) share one auxiliary:
      ``Σ w_i (z − y_i)² = (Σ w_i) z² − 2 (Σ w_i y_i) z + const``.

    Returns ``((rows, cols, data) of the auxiliaries' rows z_i = a_i·x, Σw per auxiliary,
    Σwy per auxiliary)``.
    """
    # r, c in canonical CSR order (:func:`_stacked`): rows are read off as slices, no sort
    if r.size and not np.all(np.diff(r * (n_x + 1) + c) > 0):
        raise ValueError("_auxiliaries needs its triplets in canonical CSR order")
    v = np.asarray(v, dtype=np.float64)
    count = np.bincount(r, minlength=w.size)
    indptr = np.concatenate([[0], np.cumsum(count)])
    single = np.flatnonzero(count == 1)
    if single.size:
        a, j = v[indptr[single]], c[indptr[single]]
        np.add.at(x_diag, j, 2 * w[single] * a * a)
        np.add.at(x_lin, j, -2 * w[single] * a * y[single])
    multi = np.flatnonzero(count > 1)
    if not multi.size:
        return (np.zeros(0, np.int64),) * 2 + (np.zeros(0),), np.zeros(0), np.zeros(0)
    in_multi = count[r] > 1                          # the entries of those rows, in order
    cols, data = c[in_multi], v[in_multi]
    n = count[multi]
    start = np.concatenate([[0], np.cumsum(n)[:-1]])
    # group equal rows: a random 64-bit key per variable and coefficient, then an exact check
    rng = np.random.default_rng(0x5EED)
    salt = rng.integers(1, 2 ** 63, size=n_x, dtype=np.uint64)
    with np.errstate(over="ignore"):                 # wrap-around arithmetic on purpose
        terms = salt[cols] * (data.view(np.uint64) | np.uint64(1))
        key = np.add.reduceat(terms, start)
    _, first, group = np.unique(key, return_index=True, return_inverse=True)
    rep = first[group]
    pos = np.arange(cols.size) - np.repeat(start, n)
    same = (np.array_equal(n, n[rep])
            and np.array_equal(cols, cols[np.repeat(start[rep], n) + pos])
            and np.array_equal(data, data[np.repeat(start[rep], n) + pos]))
    if not same:                                     # a key collision: keep every row
        first, group = np.arange(multi.size), np.arange(multi.size)
    w_sum = np.bincount(group, weights=w[multi], minlength=first.size)
    wy_sum = np.bincount(group, weights=w[multi] * y[multi], minlength=first.size)
    size = n[first]                                  # the auxiliaries' rows: z_i = a_i·x
    at = np.repeat(start[first], size) + np.arange(int(size.sum())) \
        - np.repeat(np.cumsum(size) - size, size)
    return ((np.repeat(np.arange(first.size), size), cols[at].astype(np.int64), data[at]),
            w_sum, wy_sum)


def _group_sums(task: NodeTask, lay: _Layout) -> tuple[np.ndarray, int]:
    """The fit's group sums (:attr:`NodeTask.cell_groups`): for each variable, the number of
    its group's sum variable (−1 when no other variable of its child is in its group), and how
    many sums there are."""
    if task.cell_groups is None or not lay.n_x:
        return np.full(lay.n_x, -1, np.int64), 0
    groups = np.asarray(task.cell_groups, dtype=np.int64)
    key = lay.child * (int(groups.max()) + 1) + groups[lay.cell]   # (child, group), ascending
    size = np.bincount(key)
    number = np.full(size.size, -1, np.int64)
    several = size >= 2
    number[several] = np.arange(int(several.sum()))
    return number[key], int(several.sum())


def _summed(r: np.ndarray, c: np.ndarray, v: np.ndarray, var_sum: np.ndarray, first: int,
            n_sum: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Rows given as COO triplets (no repeated row and column) with each row's entries on all
    the variables of a group, with one coefficient, replaced by that coefficient on the group's
    sum (column ``first + i`` for sum ``i`` of ``var_sum``); :func:`_sum_rows` defines the sums.

    An entry per group member in every child's coarse answers (a total, the hhgq and
    voting-age answers) made each child's variables a clique in the KKT factorization; through
    the sums, a row of 35 variables is one of 4. The feasible set and objective are unchanged.
    Only rows that can count a whole group need to pass here: a row with at most one variable
    of each child and group (a parent cell's sum across children, a bound) never does.
    """
    r, c = np.asarray(r, dtype=np.int64), np.asarray(c, dtype=np.int64)
    v = np.asarray(v, dtype=np.float64)
    if not n_sum or not r.size:
        return r, c, v
    group = np.full(c.size, -1, np.int64)
    on_x = c < var_sum.size
    group[on_x] = var_sum[c[on_x]]
    cand = np.flatnonzero(group >= 0)
    size = np.bincount(var_sum[var_sum >= 0], minlength=n_sum)
    key, first_at, which, count = np.unique(r[cand] * n_sum + group[cand], return_index=True,
                                            return_inverse=True, return_counts=True)
    g = key % n_sum
    coefficient = v[cand[first_at]]
    mixed = np.bincount(which, weights=v[cand] != coefficient[which], minlength=key.size)
    whole = (count == size[g]) & (mixed == 0)
    keep = np.ones(c.size, bool)
    keep[cand[whole[which]]] = False
    return (np.concatenate([r[keep], key[whole] // n_sum]),
            np.concatenate([c[keep], first + g[whole]]),
            np.concatenate([v[keep], coefficient[whole]]))


def _sum_rows(var_sum: np.ndarray, first: int, n_sum: int
              ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The rows ``Σ group − sum = 0`` defining the group sums of :func:`_summed`, as COO (row
    ``i`` is sum ``i``, column ``first + i``)."""
    member = np.flatnonzero(var_sum >= 0)
    return (np.concatenate([var_sum[member], np.arange(n_sum)]),
            np.concatenate([member, first + np.arange(n_sum)]),
            np.concatenate([np.ones(member.size), -np.ones(n_sum)]))


#: Every fit pass substitutes auxiliaries defined over at most this many entries
#: (:func:`_substitution`); 0 keeps them all.
SUBSTITUTE_ENTRIES = 5


def _substitution(r: np.ndarray, c: np.ndarray, v: np.ndarray, n: int, most: int
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Which of ``n`` auxiliaries' rows ``z_i = a_i·x`` (COO, rows numbered from 0) have at most
    ``most`` entries (a mask), and those rows as a table: their numbers (``n_s``), their
    columns and coefficients (``n_s × width``, padded with column −1 and coefficient 0).

    A substituted auxiliary's term ``W (z − Y)²`` becomes ``W (a·x − Y)²``: the same objective
    on the same feasible set, with one variable and one row fewer and an ``s × s`` block
    ``2W aaᵀ`` in ``P``. On 2020-style block nodes (1,400 variables, 500 auxiliaries, most of
    them over at most 5 entries) Clarabel took a fifth less time; a long auxiliary (a child's
    total over its group sums) would add a dense block of its size, so it stays.
    """
    count = np.bincount(r, minlength=n)
    small = (count <= most) & (count > 0)
    rows = np.flatnonzero(small)
    sel = np.flatnonzero(small[r])
    sel = sel[np.argsort(r[sel], kind="stable")]             # by row, then as given
    size = count[rows]
    slot = np.arange(sel.size) - np.repeat(np.cumsum(size) - size, size)
    at = np.repeat(np.arange(rows.size), size)
    width = int(size.max(initial=0))
    cols = np.full((rows.size, width), -1, np.int64)
    coef = np.zeros((rows.size, width))
    cols[at, slot], coef[at, slot] = c[sel], v[sel]
    return small, rows, cols, coef


def assemble_fit(task: NodeTask, *, queries: Sequence[QueryData] | None = None,
                 hold: Sequence[tuple[QueryData, np.ndarray]] = (),
                 slack: float | None = None, keep: Sequence[KeptQuery] = (),
                 substitute: int = 0) -> tuple[QP, _Layout, float, dict[str, Any]]:
    """Build the fit QP of a node (see the module docstring).

    Parameters
    ----------
    queries : the queries in the objective (default: all of the task's).
    hold : (query, answers K × m) pairs held within ``task.pass_tolerance`` (multipass).
    slack : if not None, parent consistency is relaxed with slack variables whose total is at
        most ``slack`` (failsafe stage 2); ``slack=np.inf`` builds the slack variables unbounded.
    keep : with ``slack``, answers of the parent kept exact (the children's sums must equal
        them); ``info["kept_unholdable"]`` lists kept answers no variable can hold.
    substitute : auxiliaries over at most this many variables and group sums are substituted
        (:func:`_substitution`; :data:`SUBSTITUTE_ENTRIES` is what the fit passes use);
        0: none. Ignored where the children are large (``large_blocks``): none there either.

    Returns
    -------
    qp, layout, scale, info
        ``qp`` is posed in ``δ = (v − info["centre"]) / info["unit"]`` (``v`` = all variables);
        its objective is the original objective times ``scale``.

    Examples
    --------
    >>> from postproc.infra.solvers import solve_qp
    >>> detailed = QueryData("detailed", sp.identity(2, format="csr"),
    ...                      np.array([[2.0, 1.0], [2.0, 0.0]]), np.ones((2, 2)))
    >>> task = NodeTask("county", "p", np.array([3, 1]), np.array(["a", "b"], dtype=object),
    ...                 (detailed,), sp.csr_matrix((0, 2), dtype=np.int64), np.zeros((2, 0)),
    ...                 np.zeros((2, 0)), np.zeros((2, 2), bool))
    >>> qp, layout, scale, info = assemble_fit(task)
    >>> info["variables"], info["rows"]        # 4 cells; 2 parent sums and 4 bounds x ≥ 0
    (4, 6)
    >>> solution = solve_qp(qp)
    >>> (info["centre"] + info["unit"] * solution.x).round(4).tolist()     # the fit, child by child
    [1.5, 1.0, 1.5, 0.0]
    """
    queries = task.queries if queries is None else tuple(queries)
    lay = _layout(task, relax=slack is not None, keep=keep if slack is not None else ())
    # objective: x (identity queries directly), then auxiliaries z = Q x for the live answers
    const = 0.0
    w_max = max((float(np.max(q.weights)) for q in queries if q.weights.size), default=1.0)
    scale = 1.0 / w_max if w_max > 0 else 1.0
    x_diag = np.zeros(lay.n_x)
    x_lin = np.zeros(lay.n_x)
    others, w_others, y_others = [], [], []     # the non-identity queries
    for q in queries:
        w = q.weights * scale
        y = q.values.astype(np.float64)
        const += float(np.sum(w * y * y))
        if q.is_identity:
            wa, ya = w[lay.allowed], y[lay.allowed]
            x_diag += 2 * wa
            x_lin += -2 * wa * ya
            continue
        others.append(q.matrix)
        w_others.append(np.ravel(w))
        y_others.append(y.ravel())
    r, c, v, _ = _stacked(others, lay.var_index, lay.cells)
    aux_rows, aux_w, aux_wy = _auxiliaries(
        r, c, v, np.concatenate(w_others or [np.zeros(0)]),
        np.concatenate(y_others or [np.zeros(0)]), lay.n_x, x_diag, x_lin)
    var_sum, n_sum = _group_sums(task, lay)
    act = np.flatnonzero(lay.active)
    n_slack = 2 * act.size if (slack is not None and task.parent_hist is not None) else 0
    if large_blocks(lay.n_x + aux_w.size + n_sum + n_slack, task.k):
        # children this large are factored as dense supernodes already; substituting would
        # change what the factorization's choice was measured on (and had no gain to show)
        substitute = 0
    # the auxiliaries' rows through the group sums (numbered from n_x until the kept
    # auxiliaries are known); the short ones are substituted
    ar, ac, av = _summed(*aux_rows, var_sum, lay.n_x, n_sum)
    small, sub, sub_cols, sub_coef = _substitution(ar, ac, av, aux_w.size, substitute)
    kept_aux = np.flatnonzero(~small)
    n_aux = kept_aux.size
    slack0 = lay.n_x + n_aux + n_sum            # x, auxiliaries, group sums, slacks
    n_var = slack0 + n_slack
    d = np.concatenate([x_diag, 2 * aux_w[kept_aux], np.zeros(n_sum + n_slack)])   # P's diagonal
    q_vec = np.concatenate([x_lin, -2 * aux_wy[kept_aux], np.zeros(n_sum + n_slack)])
    sum0 = lay.n_x + n_aux

    def summed(r, c, v):    # rows that may count a whole group: through its sum
        return _summed(r, c, v, var_sum, sum0, n_sum)

    def shifted(c):         # the auxiliaries' columns past the kept auxiliaries
        return np.where(c >= lay.n_x, c + n_aux, c)

    rows = _Rows(n_var)
    if n_aux:  # Q x − z = 0
        sel = ~small[ar]
        r = (np.cumsum(~small) - 1)[ar[sel]]
        rows.add(np.concatenate([r, np.arange(n_aux)]),
                 np.concatenate([shifted(ac[sel]), lay.n_x + np.arange(n_aux)]),
                 np.concatenate([av[sel], -np.ones(n_aux)]), np.zeros(n_aux), np.zeros(n_aux))
    if task.parent_hist is not None:  # Σ_k x_k = parent on active cells (± slacks)
        r, c, data = _parent_rows(lay.var_index, act, slack0 if n_slack else None)
        p = task.parent_hist[act].astype(np.float64)
        rows.add(r, c, data, p, p)
        if n_slack and np.isfinite(slack):
            rows.add(np.zeros(n_slack), slack0 + np.arange(n_slack), 1.0, [0.0], [float(slack)])
    unholdable: list[str] = []
    if n_slack and keep:  # the parent's kept answers are exact
        r, c, data, target, unholdable = _kept_rows(task, lay, keep, n_var)
        rows.add(*summed(r, c, data), target, target)
    infeasible_rows: list[tuple[int, int]] = []
    if task.matrix.shape[0]:  # lower ≤ C x_k ≤ upper
        r, c, v, has_var = lay.constraint_rows(task)
        lo, hi = task.lower.ravel(), task.upper.ravel()
        bounded = np.isfinite(lo) | np.isfinite(hi)
        empty = ~has_var & bounded & ((lo > 0) | (hi < 0))
        infeasible_rows = [divmod(int(i), task.matrix.shape[0]) for i in np.flatnonzero(empty)]
        keep = has_var & bounded
        renumber = np.cumsum(keep) - 1
        sel = keep[r]
        rows.add(*summed(renumber[r[sel]], c[sel], v[sel]), lo[keep], hi[keep])
    for hq, answers in hold:  # multipass: earlier answers held within the tolerance
        r, c, v, _ = _per_child(hq.matrix, lay.var_index, lay.cells)
        a = np.asarray(answers, dtype=np.float64).ravel()
        rows.add(*summed(r, c, v), a - task.pass_tolerance, a + task.pass_tolerance)
    nonneg = np.concatenate([np.arange(lay.n_x), slack0 + np.arange(n_slack)])  # x, slacks ≥ 0
    rows.add(np.arange(nonneg.size), nonneg, 1.0, np.zeros(nonneg.size),
             np.full(nonneg.size, np.inf))
    if n_sum:
        rows.add(*_sum_rows(var_sum, sum0, n_sum), np.zeros(n_sum), np.zeros(n_sum))
    l_vec, u_vec = rows.bounds()
    A = rows.matrix("csc")
    # Centre every variable at its own unconstrained minimizer v0 = -q/d (the measured targets),
    # and measure the shift in units of c (the noise s.d. of the most precise measurement):
    # x = v0 + c·δ. The objective becomes ½ δᵀPδ + r' with no linear term, so solvers' relative
    # tolerances apply to the residuals that matter. Expanded as ½xᵀPx + qᵀx + r, a state-level
    # fit (counts ~1e6, residuals ~1e2) loses the optimum to cancellation: Clarabel and OSQP
    # stopped 0.65 % above it.
    v0 = np.divide(-q_vec, d, out=np.zeros_like(q_vec), where=d > 0)
    if n_sum:   # a group's sum at the sum of its members' targets (its row's rhs stays 0)
        member = np.flatnonzero(var_sum >= 0)
        v0[sum0:slack0] = np.bincount(var_sum[member], weights=v0[member], minlength=n_sum)
    const += float(q_vec @ v0 + 0.5 * v0 @ (d * v0))
    q_vec = q_vec + d * v0          # zero wherever d > 0
    if sub.size:
        # a substituted W (a·x − Y)² − W Y² (what W z² − 2WY z was) at x = v0 + c·δ, with
        # res = a·v0 − Y: c² W (a·δ)² + 2 c W res (a·δ) + W (res² − Y²)
        cols, width = shifted(sub_cols), sub_cols.shape[1]          # padding: −1, coef 0
        w = aux_w[sub]
        y = np.divide(aux_wy[sub], w, out=np.zeros(sub.size), where=w > 0)
        res = (sub_coef * v0[cols]).sum(axis=1) - y
        real = cols >= 0
        q_vec += np.bincount(cols[real], weights=((2 * w * res)[:, None] * sub_coef)[real],
                             minlength=n_var)
        const += float(w @ (res * res - y * y))
        pr, pc = np.repeat(cols, width, axis=1).ravel(), np.tile(cols, width).ravel()
        pv = (2 * w[:, None, None] * sub_coef[:, :, None] * sub_coef[:, None, :]).ravel()
        pair = (pr >= 0) & (pc >= 0)
        nz = np.flatnonzero(d)
        P = sp.csc_matrix((np.concatenate([d[nz], pv[pair]]),
                           (np.concatenate([nz, pr[pair]]), np.concatenate([nz, pc[pair]]))),
                          shape=(n_var, n_var))
    else:
        P = _diagonal(d)
    av0 = A @ v0
    c = max(1.0, 1.0 / np.sqrt(w_max)) if w_max > 0 else 1.0
    qp = QP(P, q_vec / c, A, (l_vec - av0) / c, (u_vec - av0) / c, const / c ** 2,
            blocks=task.k)
    info = {"variables": lay.n_x, "aux": n_aux, "kept_aux": kept_aux,
            "substituted": int(sub.size), "group_sums": n_sum, "rows": int(A.shape[0]),
            "infeasible_rows": infeasible_rows, "n_slack": n_slack, "unit": c, "centre": v0,
            "kept_unholdable": unholdable}
    return qp, lay, scale / c ** 2, info


def _diagonal(d: np.ndarray) -> sp.csc_matrix:
    """``diag(d)`` in CSC without its zeros (what ``sp.diags(d, format="csc")`` gives, built
    directly: the DIA route cost 0.4 ms per block-group node)."""
    nz = np.flatnonzero(d)
    indptr = np.zeros(d.size + 1, dtype=np.int32)
    indptr[nz + 1] = 1
    return sp.csc_matrix((d[nz], nz.astype(np.int32), np.cumsum(indptr, dtype=np.int32)),
                         shape=(d.size, d.size))


def _variables(sol_x: np.ndarray, info: dict[str, Any]) -> np.ndarray:
    """All variables in original units from a solution of the centred, scaled QP."""
    return info["centre"] + info["unit"] * sol_x


def _scatter(task: NodeTask, lay: _Layout, v: np.ndarray) -> np.ndarray:
    out = np.zeros((task.k, task.n))
    out[lay.allowed] = v[:lay.n_x]
    return out


def _fit(task: NodeTask, chain: Sequence[str]
         ) -> tuple[np.ndarray | None, dict[str, Any], list[QueryData] | None]:
    """The fit, pass by pass. Returns ``(x*, stats, None)``, or ``(None, stats, queries)`` when
    the node is infeasible: the failsafe then fits ``queries``."""
    stats: dict[str, Any] = {"fit_seconds": 0.0, "iterations": 0, "backends": []}
    passes = task.passes or (tuple(q.name for q in task.queries),)
    # Queries no pass names are fitted in a final pass of their own ("total first, then the
    # rest", docs/topdown.md); without it passes=[["total"]] fitted everything at once.
    listed = {name for p in passes for name in p}
    rest = tuple(q.name for q in task.queries if q.name not in listed)
    if rest:
        passes = tuple(passes) + (rest,)
    done: set[str] = set()
    hold: list[tuple[QueryData, np.ndarray]] = []
    x_star = None
    objective = float("nan")
    for i, names in enumerate(passes):
        last = i == len(passes) - 1
        use = [q for q in task.queries if (q.name in names or (last and q.name not in done))]
        if not use:
            continue
        if not last and all(_pinned(task, q) for q in use):
            # Every answer of this pass is fixed by an equality the children must meet (the
            # state totals under the tot invariant): the pass has nothing to fit, and its QP —
            # every cell a variable, the objective on the totals alone — is so degenerate that
            # Clarabel stopped 'almost solved' at the state level and OSQP took 1,325
            # iterations. Later passes meet the equalities anyway.
            done.update(q.name for q in use)
            continue
        # Short auxiliaries substituted in every pass: the ties a later pass makes on an
        # earlier pass's bounds (exact halves) follow the held answers, not the fit's last
        # digits (_toward_held), so the substituted arithmetic moves no person through them.
        qp, lay, scale, info = assemble_fit(task, queries=use, hold=hold,
                                            substitute=SUBSTITUTE_ENTRIES)
        stats.update(variables=info["variables"], rows=info["rows"])
        if info["infeasible_rows"]:
            sol = None
        else:
            try:
                # substituted, only the chain's first backend: when it does not solve it,
                # the plain problem goes through the whole chain (SCS alone spent 9 s
                # calling an infeasible substituted node unbounded)
                sol = solve_qp(qp, chain[:1] if info["substituted"] else chain)
            except SolverError:
                if not info["substituted"]:
                    raise
                sol = None
            if info["substituted"] and (sol is None or not sol.status.ok):
                # Not solved with the short auxiliaries substituted: the plain problem decides,
                # the one every backend was checked on (on an infeasible node SCS called the
                # substituted problem unbounded, and the plain one infeasible, as the others
                # did both)
                stats.setdefault("attempts", []).extend(
                    f"{b}:{s} (substituted)" for b, s in (sol.attempts if sol else ()))
                qp, lay, scale, info = assemble_fit(task, queries=use, hold=hold)
                sol = solve_qp(qp, chain)
            stats["fit_seconds"] += sol.seconds
            stats["iterations"] += sol.iterations
            stats["backends"].append(sol.backend)
            # every pass's attempts (a fallback in an early pass is a fallback of the node)
            stats.setdefault("attempts", []).extend(f"{b}:{s}" for b, s in sol.attempts)
        if sol is None or sol.status == Status.INFEASIBLE:
            if task.passes and i > 0:
                raise InfeasibleError(
                    f"{task.where}: multipass pass {i + 1} is "
                    f"infeasible with earlier answers held within ±{task.pass_tolerance}; "
                    "increase the pass tolerance")
            return None, stats, use
        x_star = _scatter(task, lay, _variables(sol.x, info))
        objective = sol.objective / scale
        for q in use:
            if q.name in names:
                if not last:    # the answers later passes hold (none after the last)
                    hold.append((q, (q.matrix @ x_star.T).T))
                done.add(q.name)
    stats["objective"] = objective
    # the rounding breaks its ties on the held answers' bounds toward them (_toward_held)
    stats["held"] = {q.name: answers for q, answers in hold}
    return x_star, stats, None


def _pinned(task: NodeTask, query: QueryData) -> bool:
    """Whether every answer of ``query`` is a constraint row with equal finite bounds for every
    child (so any feasible fit has the same answers)."""
    if not task.matrix.shape[0]:
        return False
    fixed = np.flatnonzero(np.all((task.lower == task.upper) & np.isfinite(task.lower), axis=0))
    if query.matrix.shape[0] > fixed.size:   # its distinct answers need as many rows
        return False                         # (and a detailed query is never densified here)
    rows = task.matrix[fixed].astype(np.float64).toarray()
    wanted = query.matrix.astype(np.float64).toarray()
    return all(np.any(np.all(rows == answer, axis=1)) for answer in wanted)


def _failsafe_fit(task: NodeTask, chain: Sequence[str], queries: Sequence[QueryData],
                  stats: dict[str, Any], keep: Sequence[KeptQuery]
                  ) -> tuple[np.ndarray, dict[str, Any]]:
    """Relax parent consistency with slacks, keeping ``keep`` exact: least total slack, then
    the fit within it. Raises :class:`InfeasibleError` when that is impossible."""
    qp, lay, scale, info = assemble_fit(task, queries=queries, slack=np.inf, keep=keep)
    kept = ", ".join(q.name for q in keep)
    if info["infeasible_rows"]:
        child, row = info["infeasible_rows"][0]
        raise InfeasibleError(
            f"{task.level} {task.children[child]!r}: constraint {task.labels[row]!r} cannot hold "
            "because every cell it counts is forced to 0 (by zero cells"
            + (f", or kept answers ({kept}) the parent has 0 in)" if keep else ")"))
    if info["kept_unholdable"]:
        raise InfeasibleError(
            f"{task.where}: kept answer(s) "
            f"{info['kept_unholdable'][:5]} hold persons in the parent but no child may hold "
            "persons in their cells")
    n_var = qp.n
    slack_cols = np.arange(n_var - info["n_slack"], n_var)
    c = np.zeros(n_var)
    c[slack_cols] = 1.0
    lp = LP(c, sp.csr_matrix(qp.A), qp.l, qp.u, np.full(n_var, -np.inf), np.full(n_var, np.inf))
    lp_sol = solve_lp(lp)
    stats["fit_seconds"] += lp_sol.seconds
    if not lp_sol.status.ok:
        if keep:
            raise InfeasibleError(
                f"{task.where}: infeasible with the parent's {kept} "
                f"kept exact — moving persons between cells cannot meet the children's "
                f"constraints ({lp_sol.status.value})")
        raise InfeasibleError(
            f"{task.where}: infeasible even with parent consistency "
            "relaxed — the children's own constraints contradict each other; check their "
            f"invariant data. Rows: {list(task.labels)}")
    min_slack = float(lp_sol.objective) * info["unit"]  # back to persons
    # the fit may use up to failsafe_slack persons of slack beyond the least (the Census
    # Bureau's rule, docs/topdown.md "Failsafe"); 0: held at the least
    qp2, lay2, scale2, info2 = assemble_fit(
        task, queries=queries, slack=min_slack * (1 + 1e-6) + 1e-6 + task.failsafe_slack,
        keep=keep)
    sol = solve_qp(qp2, chain)
    stats["fit_seconds"] += sol.seconds
    if not sol.status.ok:
        raise InfeasibleError(f"{task.where}: failsafe fit failed ({sol.status.value})")
    stats["iterations"] += sol.iterations
    stats["backends"].append(sol.backend)
    stats["objective"] = sol.objective / scale2
    v = _variables(sol.x, info2)
    x_star = _scatter(task, lay2, v)
    act = np.flatnonzero(lay2.active)
    s = act.size
    slack = v[n_var - 2 * s:n_var - s] - v[n_var - s:]
    cells = act[np.abs(slack) > 1e-6]
    binding = _binding_rows(task, x_star)
    fit_slack = float(np.abs(task.parent_hist - x_star.sum(axis=0)).sum())
    report = {"level": task.level, "parent": task.parent, "total_slack": min_slack,
              "slack_allowance": task.failsafe_slack, "fit_slack": fit_slack,
              "cells": cells.tolist(), "binding_constraints": binding}
    return x_star, report


def _binding_rows(task: NodeTask, x: np.ndarray, tol: float = 1e-6) -> list[str]:
    if not task.matrix.shape[0]:
        return []
    vals = (task.matrix @ x.T).T
    tight = (np.isfinite(task.lower) & (vals <= task.lower + tol)) | (
        np.isfinite(task.upper) & (vals >= task.upper - tol))
    out = []
    for child, row in np.argwhere(tight)[:20]:
        out.append(f"{task.level} {task.children[child]!r}: {task.labels[row]}")
    return out


# -- rounding -----------------------------------------------------------------------------------

def _round(task: NodeTask, x_star: np.ndarray, failsafe: bool,
           keep: Sequence[KeptQuery] = (), held: dict[str, np.ndarray] | None = None
           ) -> tuple[np.ndarray, dict[str, Any]]:
    """``⌊X*⌋ + B`` (module docstring); with ``failsafe``, integer slacks on parent consistency
    and the ``keep`` answers exact: the least total slack first (at a large cost), then, where
    ``task.failsafe_slack`` admits more integer slack (:func:`rounding_allowance`), the cells'
    rounding cost alone within the least slack plus that allowance. ``held``: query name →
    answers (K × m) an earlier fit pass held, toward which a rounding pass of that query breaks
    its ties (:func:`_toward_held`)."""
    lay = _layout(task, relax=failsafe, keep=keep if failsafe else ())
    extra = rounding_allowance(task.failsafe_slack, keep) if failsafe else 0
    # on the variables only (child by child, cell by cell; every other cell is 0)
    x = np.maximum(x_star[lay.allowed], 0.0)
    floor = np.floor(x + _FRAC_TOL)
    frac = np.clip(x - floor, 0.0, 1.0)
    nb = lay.n_x
    act = np.flatnonzero(lay.active)
    n_slack = 2 * act.size if (failsafe and task.parent_hist is not None) else 0
    rows = _Rows(nb + n_slack)
    if task.parent_hist is not None:  # Σ_k B_kj = parent_j − Σ_k ⌊X*_kj⌋ (± integer slacks)
        floor_sum = np.bincount(lay.cell, weights=floor, minlength=task.n)
        need = task.parent_hist[act] - floor_sum[act]
        r, c, data = _parent_rows(lay.var_index, act, nb if n_slack else None)
        rows.add(r, c, data, need, need)
        if n_slack and keep:  # kept answers: Σ B over an answer's cells = what floors leave
            r, c, data, target, _ = _kept_rows(task, lay, keep, nb + n_slack, floor_sum)
            rows.add(r, c, data, target, target)
    if task.matrix.shape[0]:  # lower − C⌊X*⌋ ≤ C B ≤ upper − C⌊X*⌋
        r, cc, v, has_var = lay.constraint_rows(task)
        base = np.bincount(r, weights=v * floor[cc], minlength=has_var.size)
        lo, hi = task.lower.ravel() - base, task.upper.ravel() - base
        keep = has_var & (np.isfinite(lo) | np.isfinite(hi))
        renumber = np.cumsum(keep) - 1
        sel = keep[r]
        rows.add(renumber[r[sel]], cc[sel], v[sel], lo[keep], hi[keep])
    cell_cost = np.concatenate([1.0 - 2.0 * frac, np.full(n_slack, 1e4)])
    stats: dict[str, Any] = {"round_seconds": 0.0}
    methods = []
    passes = () if failsafe or not task.round_passes else task.round_passes
    for answers in passes:  # multipass: L1 on the pass's answers, then hold them exactly
        r, cc, v, target = _round_answers(lay, answers, x, floor, held)
        if not r.size:
            continue
        # An answer of one variable B_j (coefficient 1) deviates by f or 1 − f: slope 1 − 2f
        # on B_j. Every other answer s = a·B gets |s − f| as a convex piecewise-linear cost
        # over three columns, s = s⁻ + s⁰ + s⁺ with s⁻ ≤ ⌊f⌋ at −1, s⁰ ≤ 1 at 1 − 2·frac(f),
        # s⁺ at +1. Their rows join the per-cell and per-child (laminar) rows, so the matrix
        # stays totally unimodular and the LP's vertex is integral (the |·| ≤ t form is not).
        m = target.size
        count = np.bincount(r, minlength=m)
        one = (count == 1) & (np.bincount(r, weights=(v == 1), minlength=m) == 1)
        cost = np.concatenate([np.zeros(nb), cell_cost[nb:]])
        pick = one[r]
        np.add.at(cost, cc[pick], 1.0 - 2.0 * np.clip(target[r[pick]], 0.0, 1.0))
        multi = np.flatnonzero(~one)
        renumber = np.full(m, -1, np.int64)
        renumber[multi] = np.arange(multi.size)
        rm, cm, vm = renumber[r[~pick]], cc[~pick], v[~pick]
        k = multi.size
        low = np.floor(target[multi] + _FRAC_TOL)
        part = np.clip(target[multi] - low, 0.0, 1.0)
        trial = rows.widened(nb + n_slack + 3 * k)
        seg = nb + n_slack + np.arange(3 * k)
        trial.add(np.concatenate([rm, np.tile(np.arange(k), 3)]), np.concatenate([cm, seg]),
                  np.concatenate([vm, -np.ones(3 * k)]), np.zeros(k), np.zeros(k))
        cost = np.concatenate([cost, -np.ones(k), 1.0 - 2.0 * part, np.ones(k)])
        seg_ub = np.concatenate([np.maximum(low, 0.0), np.ones(k), np.full(k, np.inf)])
        b, method = _round_lp(task, stats, cost, trial, nb, n_slack, seg_ub)
        methods.append(method)
        if np.unique(cc[pick]).size == nb:
            break   # the pass had every cell as an answer (the detailed query): B is decided
        achieved = np.zeros(m)
        np.add.at(achieved, r, v * b[cc])
        rows.add(r, cc, v, np.round(achieved), np.round(achieved))
    else:   # the cells last, as close to the fit as what the passes held allows
        b, method = _round_lp(task, stats, cell_cost, rows, nb, n_slack, np.zeros(0))
        methods.append(method)
    if n_slack and extra:
        # the Census Bureau's rule in integers: the total slack within its least value (just
        # found) plus the allowance, and among such roundings the one closest to the fit
        least = float(b[nb:].sum())
        rows.add(np.zeros(n_slack), nb + np.arange(n_slack), 1.0, [0.0], [least + extra])
        b, method = _round_lp(task, stats, np.concatenate([cell_cost[:nb], np.zeros(n_slack)]),
                              rows, nb, n_slack, np.zeros(0))
        stats["round_least_slack"] = least
    out = np.zeros((task.k, task.n), dtype=np.int64)
    out[lay.allowed] = floor.astype(np.int64) + b[:nb].astype(np.int64)
    stats["rounding"] = "milp" if "milp" in methods or method == "milp" else "lp"
    stats["round_passes"] = len(methods)
    if n_slack:
        s = n_slack // 2
        stats["round_slack_cells"] = np.flatnonzero(lay.active)[
            np.abs(b[nb:nb + s] - b[nb + s:]) > 0].tolist()
    return out, stats


def _round_answers(lay: _Layout, answers: Sequence[tuple[str, sp.csr_matrix]],
                   x: np.ndarray, floor: np.ndarray, held: dict[str, np.ndarray] | None = None
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The rows ``a·B`` of a rounding pass's answers that hold a variable, as COO over the
    variables, and their targets ``a·(X* − ⌊X*⌋)`` (``x``, ``floor``: ``X*`` and ``⌊X*⌋`` on
    the variables). An answer ``held`` by an earlier fit pass (under the same name, children ×
    answers) breaks a tie on a half toward what that pass fitted (:func:`_toward_held`)."""
    matrices = [matrix for _, matrix in answers]
    r, c, v, has_var = _stacked(matrices, lay.var_index, lay.cells)
    live = np.flatnonzero(has_var)
    renumber = np.full(has_var.size, -1, np.int64)
    renumber[live] = np.arange(live.size)
    # a·(X* − ⌊X*⌋) over the answer's variables (the rest is 0 off them), in the order a
    # product with each matrix would sum it
    targets = np.bincount(r, weights=v * (x - floor)[c], minlength=has_var.size)
    if held and any(name in held for name, _ in answers):
        # the held answers in _stacked's order (child by child within a matrix), NaN where
        # none was held
        k = lay.var_index.shape[0]
        toward = np.concatenate([
            held[name].ravel() if name in held and held[name].shape == (k, m.shape[0])
            else np.full(k * m.shape[0], np.nan) for name, m in answers])
        # relative to a·⌊X*⌋, as the targets are
        toward -= np.bincount(r, weights=v * floor[c], minlength=has_var.size)
        targets = _toward_held(targets, toward)
    return renumber[r], c, v, targets[live]


def _toward_held(target: np.ndarray, held: np.ndarray) -> np.ndarray:
    """Rounding targets with their ties broken toward the answers an earlier pass held.

    A later fit pass holds an earlier pass's answer ``h`` within ``±pass_tolerance``; where
    ``h ± pass_tolerance`` is a half (with the default 0.5: ``h`` an integer, as when a parent
    of two children splits its total into integers or halves; with production's 0.1: ``h`` at
    x.4 or x.6, as when five children share a residual) and the later pass pulls the answer
    onto that bound, the target is an exact half,
    and rounding it up or down costs the same: the fit's last digits (804.4999999999 or
    804.5000000009), or the LP solver's pivoting where the cost difference is below its
    tolerance, would decide, and any change of solver, BLAS or formulation could move persons.
    A target within ``_TIE_TOL`` of a half therefore goes ``_TIE_NUDGE`` toward ``h`` (NaN: not
    held; a held answer on the half itself has no side).

    Examples
    --------
    >>> _toward_held(np.array([0.4999999999, 0.5000000009, 0.5, 0.3, 0.5]),
    ...              np.array([0.0, 0.0, 1.0, 0.0, np.nan])).tolist()
    [0.4999, 0.4999, 0.5001, 0.3, 0.5]
    """
    mid = np.round(target - 0.5) + 0.5
    side = np.sign(held - mid)
    tie = (np.abs(target - mid) <= _TIE_TOL) & np.isfinite(held) & (
        np.abs(held - mid) > _TIE_TOL)
    return np.where(tie, mid + _TIE_NUDGE * side, target)


def _round_lp(task: NodeTask, stats: dict[str, Any], cost: np.ndarray, rows: "_Rows", nb: int,
              n_slack: int, extra_ub: np.ndarray) -> tuple[np.ndarray, str]:
    """One rounding LP over ``B ∈ [0, 1]``, then integer slacks ≥ 0, then further nonnegative
    columns bounded by ``extra_ub``: its vertex when integral, else the MILP's optimum.
    Returns ``(solution, "lp" | "milp")``."""
    lb = np.zeros(nb + n_slack + extra_ub.size)
    ub = np.concatenate([np.ones(nb), np.full(n_slack, np.inf), extra_ub])
    A = rows.matrix("csc")      # HiGHS takes columns
    l, u = rows.bounds()
    sol = solve_lp(LP(cost, A, l, u, lb, ub))
    stats["round_seconds"] += sol.seconds
    if sol.status.ok and np.all(np.abs(sol.x - np.round(sol.x)) <= _INT_TOL):
        return np.round(sol.x), "lp"
    sol = solve_lp(LP(cost, A, l, u, lb, ub, integer=np.ones(cost.size)))
    stats["round_seconds"] += sol.seconds
    if not sol.status.ok:
        raise InfeasibleError(
            f"{task.where}: no integer rounding within ±1 of "
            f"the fit satisfies the constraints ({sol.status.value})")
    return np.round(sol.x), "milp"


# -- verification -------------------------------------------------------------------------------

def verify_node(task: NodeTask, hist: np.ndarray, *, allow_cells: Sequence[int] = (),
                keep: Sequence[KeptQuery] = ()) -> None:
    """Check every promise in exact integer arithmetic; raise :class:`VerificationError`.

    ``allow_cells`` (a failsafe node): cells where the children may differ from the parent;
    ``keep``: answers of the parent the children must still sum to exactly.
    """
    problems: list[str] = []
    if hist.dtype != np.int64:
        problems.append(f"histograms are {hist.dtype}, not int64")
    if np.any(hist < 0):
        k, j = np.argwhere(hist < 0)[0]
        problems.append(f"{task.children[k]!r} cell {j} is negative ({hist[k, j]})")
    if np.any(hist[task.zero] != 0):
        k, j = np.argwhere(task.zero & (hist != 0))[0]
        problems.append(f"{task.children[k]!r} cell {j} must be 0, is {hist[k, j]}")
    if task.parent_hist is not None:
        diff = hist.sum(axis=0) - task.parent_hist
        diff[np.asarray(allow_cells, dtype=np.int64)] = 0
        if np.any(diff != 0):
            j = int(np.flatnonzero(diff)[0])
            problems.append(f"children do not sum to the parent in cell {j}: "
                            f"{int(hist[:, j].sum())} ≠ {int(task.parent_hist[j])}")
        problems += kept_violations(keep, task.parent_hist, hist.sum(axis=0))[:5]
    if task.matrix.shape[0]:
        vals = (task.matrix @ hist.T).T
        lo_bad = np.isfinite(task.lower) & (vals < np.where(np.isfinite(task.lower),
                                                             task.lower, 0).astype(np.int64))
        hi_bad = np.isfinite(task.upper) & (vals > np.where(np.isfinite(task.upper),
                                                             task.upper, 0).astype(np.int64))
        for k, r in np.argwhere(lo_bad | hi_bad)[:5]:
            problems.append(f"{task.children[k]!r}: {task.labels[r] if task.labels else r} = "
                            f"{int(vals[k, r])} outside [{task.lower[k, r]:g}, "
                            f"{task.upper[k, r]:g}]")
    if problems:
        raise VerificationError(f"{task.where} fail verification: "
                                + "; ".join(problems))


# -- entry point --------------------------------------------------------------------------------

def solve_node(task: NodeTask, *, chain: Sequence[str] = DEFAULT_QP_CHAIN,
               failsafe: bool = True, keep_continuous: bool = False) -> NodeResult:
    """Fit, round and verify one node. A single child copies its parent (then is verified).

    Parameters
    ----------
    task : NodeTask
    chain : sequence of str, optional
        QP backends to try in order (:func:`postproc.infra.solvers.solve_qp`).
    failsafe : bool, optional
        Relax parent consistency when the node is infeasible (default), instead of raising.
    keep_continuous : bool, optional
        Keep the fit before rounding in ``NodeResult.continuous``.

    Returns
    -------
    NodeResult

    Raises
    ------
    InfeasibleError
        When the parent has no persons but a child must hold some (before any solver runs);
        when the problem is infeasible and ``failsafe`` is off, or even the failsafe fails.
    VerificationError
        If the result breaks a promise (never expected; it would be a bug).

    Examples
    --------
    Two children whose totals are invariant (2 persons each) share a parent of histogram
    (3, 1):

    >>> detailed = QueryData("detailed", sp.identity(2, format="csr"),
    ...                      np.array([[2.0, 1.0], [2.0, 0.0]]), np.ones((2, 2)))
    >>> def node(totals):
    ...     bounds = np.array(totals, dtype=float)[:, None]
    ...     return NodeTask("county", "p", np.array([3, 1]),
    ...                     np.array(["a", "b"], dtype=object), (detailed,),
    ...                     sp.csr_matrix(np.ones((1, 2), np.int64)), bounds, bounds.copy(),
    ...                     np.zeros((2, 2), bool), ("tot: total",))
    >>> solve_node(node([2, 2])).histograms.tolist()
    [[1, 1], [2, 0]]

    Totals of 3 and 2 cannot split a parent of 4 persons: the failsafe adds a person where it
    must, and says so.

    >>> report = solve_node(node([3, 2])).failsafe
    >>> report["relaxation"], report["gained"], report["persons_added"]
    ('cells', {0: 1}, 1)
    >>> solve_node(node([3, 2]), failsafe=False)
    Traceback (most recent call last):
    ...
    postproc.infra.solvers.base.InfeasibleError: county children of 'p' are infeasible: ...
    """
    t0 = time.perf_counter()
    check_parent_can_hold(task)
    if task.parent_hist is not None and task.k == 1:
        hist = task.parent_hist[None, :].astype(np.int64).copy()
        try:
            verify_node(task, hist)
        except VerificationError:
            # The parent breaks its only child's constraints (possible when they are not
            # implied upward): solve it like any node, so the failsafe or a clear
            # InfeasibleError applies.
            pass
        else:
            return NodeResult(hist, {"level": task.level, "parent": task.parent,
                                     "children": 1, "variables": 0, "rounding": "copy",
                                     "backend": "copy", "fit_seconds": 0.0,
                                     "round_seconds": 0.0, "round_passes": 0,
                                     "seconds": time.perf_counter() - t0,
                                     "objective": float("nan"), "iterations": 0,
                                     "failsafe": False})
    try:
        x_star, fit_stats, infeasible = _fit(task, chain)
        report = None
        if infeasible is None:
            hist, round_stats = _round(task, x_star, failsafe=False,
                                       held=fit_stats.get("held"))
            verify_node(task, hist)
        else:
            x_star, hist, round_stats, report = _failsafe(task, chain, infeasible, fit_stats,
                                                          failsafe)
    finally:
        _forget_layout(task)
    stats = {"level": task.level, "parent": task.parent, "children": task.k,
             "variables": fit_stats.get("variables", 0),
             "backend": "+".join(dict.fromkeys(fit_stats["backends"])),
             "attempts": ";".join(fit_stats.get("attempts", [])),
             "fit_seconds": fit_stats["fit_seconds"], "iterations": fit_stats["iterations"],
             "objective": fit_stats.get("objective", float("nan")),
             "rounding": round_stats["rounding"], "round_seconds": round_stats["round_seconds"],
             "round_passes": round_stats.get("round_passes", 1),
             "failsafe": report is not None, "seconds": time.perf_counter() - t0}
    return NodeResult(hist, stats, report, x_star if keep_continuous else None)


def _failsafe(task: NodeTask, chain: Sequence[str], queries: Sequence[QueryData],
              stats: dict[str, Any], failsafe: bool
              ) -> tuple[np.ndarray, np.ndarray, dict[str, Any], dict[str, Any]]:
    """Solve an infeasible node with parent consistency relaxed, trying the kept sets of
    :func:`~postproc.methods.topdown.failsafe.relaxation_stages` in order (each failure is recorded);
    with ``failsafe`` off, raise an InfeasibleError describing the first relaxation that fits.

    Returns ``(x*, integer histograms, rounding stats, failsafe report)``.
    """
    if task.parent_hist is None:
        raise InfeasibleError(
            f"the {task.level} (root) problem is infeasible: its invariants and constraints "
            f"contradict each other; rows: {list(task.labels)}")
    stages = relaxation_stages(task.kept)
    fallbacks: list[dict[str, Any]] = []
    for i, keep in enumerate(stages):
        last = i == len(stages) - 1
        names = [q.name for q in keep]
        try:
            x_star, report = _failsafe_fit(task, chain, queries, stats, keep)
            if not failsafe:
                break
            hist, round_stats = _round(task, x_star, failsafe=True, keep=keep)
        except VerificationError:
            raise
        except InfeasibleError as exc:
            if last:
                raise
            fallbacks.append({"relaxation": relaxation_of(keep), "kept": names,
                              "reason": str(exc)})
            continue
        moved = round_stats.get("round_slack_cells", [])   # where the children differ
        verify_node(task, hist, allow_cells=moved, keep=keep)
        cells = sorted(set(report["cells"]) | set(moved))
        children_sum = hist.sum(axis=0)
        report.update(
            relaxation=relaxation_of(keep), kept=names, fallbacks=fallbacks, cells=cells,
            parent_minus_children={int(j): int(task.parent_hist[j] - children_sum[j])
                                   for j in cells},
            **moved_cells(task.parent_hist, children_sum))
        return x_star, hist, round_stats, report
    kept = f" with the parent's {', '.join(names)} kept exact" if names else ""
    raise InfeasibleError(
        f"{task.where} are infeasible: the rounded parent cannot "
        f"be split among them under their constraints (a relaxation{kept} would differ from "
        f"the parent in cells {report['cells']}; binding: {report['binding_constraints'][:3]}). "
        "Run with failsafe on to relax parent consistency and report it")
