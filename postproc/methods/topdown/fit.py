"""The node's fit as an explicit object: :class:`Fit` builds the weighted least-squares QP of a
node (``apply``) and maps the QP's solution back to the children's histograms (``invert``), as a
reduction of cvxpy does; it holds everything the map needs, so nothing travels beside it.

The problem (``docs/topdown.md``, "The node problem"): variables are only the cells a child may
hold (:class:`~postproc.methods.topdown.rows.Layout`). The objective is
``Σ_q Σ_k (Q x_k − y_k)ᵀ W_k (Q x_k − y_k)`` over the measured queries, with ``W_k`` the
weights of child ``k``'s answers: a diagonal (a weight per answer, the inverse of its variance)
or, for a query whose ``QueryData.weights`` is children × answers × answers, a general positive
definite matrix (the inverse of a covariance: the next estimator feeds subtree estimates with
their covariance). A matrix weight on a query whose answers are cells goes straight into ``P``
as a dense block per child over those cells, centred on the answers' targets (on a query whose
answers are whole cell groups, over the child's group sums, below); any other is
whitened — with ``W_k = L_k L_kᵀ`` its term is ``‖L_kᵀ Q x_k − L_kᵀ y_k‖²``, answers of weight 1
over the rows of ``L_kᵀ Q`` (:mod:`postproc.methods.topdown.whiten`) — so every other term is
``w (a·x − y)²`` and the rest of the fit is one path. Non-identity answers get auxiliary
variables ``z = a·x`` so the objective is diagonal (:func:`auxiliaries` merges what can be
merged). Rows: ``a·x − z = 0``, ``Σ_k x_k = x̂_p`` per cell, ``lower ≤ C x_k ≤ upper`` per
child, held answers of earlier passes, ``x ≥ 0``. Weights are divided by their maximum (better
conditioning) and the objective is reported in the original units. With
``NodeTask.cell_groups``, a row that counts all of a child's variables in a group with one
coefficient counts the group's sum, a variable of its own, instead (``Σ group − t = 0``).
Auxiliaries over at most :data:`SUBSTITUTE_ENTRIES` variables and sums are substituted back into
the objective (a small dense block in ``P`` for a variable and a row fewer), except where the
children are large enough for Clarabel to factor them as dense blocks anyway.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np
import scipy.sparse as sp

from postproc.infra.solvers import QP
from postproc.infra.solvers.backends import dense_objective, large_blocks
from postproc.methods.topdown.rows import (
    Layout,
    Rows,
    child_sum_rows,
    kept_rows,
    parent_rows,
    per_child,
    stacked,
)
from postproc.methods.topdown.task import KeptQuery, NodeTask, QueryData
from postproc.methods.topdown.whiten import (
    CellBlocks,
    SumColumns,
    block_entries,
    cell_blocks,
    in_blocks,
    whitened,
)

__all__ = ["Fit", "SUBSTITUTE_ENTRIES", "assemble_fit"]


def auxiliaries(r: np.ndarray, c: np.ndarray, v: np.ndarray, w: np.ndarray, y: np.ndarray,
                 n_x: int, x_diag: np.ndarray, x_lin: np.ndarray
                 ) -> tuple[tuple[np.ndarray, np.ndarray, np.ndarray], np.ndarray, np.ndarray]:
    """The auxiliary variables ``z = a·x`` of the objective's non-identity answers, fewest
    possible, exactly.

    ``r, c, v``: the answers' rows over the variables in canonical CSR order (answers
    ascending, variables ascending within an answer, no repeats: :func:`stacked`'s output;
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
    # r, c in canonical CSR order (:func:`stacked`): rows are read off as slices, no sort
    if r.size and not np.all(np.diff(r * (n_x + 1) + c) > 0):
        raise ValueError("auxiliaries needs its triplets in canonical CSR order")
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


def group_sums(task: NodeTask, lay: Layout) -> tuple[np.ndarray, int]:
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


def summed(r: np.ndarray, c: np.ndarray, v: np.ndarray, var_sum: np.ndarray, first: int,
            n_sum: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Rows given as COO triplets (no repeated row and column) with each row's entries on all
    the variables of a group, with one coefficient, replaced by that coefficient on the group's
    sum (column ``first + i`` for sum ``i`` of ``var_sum``); :func:`sum_rows` defines the sums.

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


def sum_rows(var_sum: np.ndarray, first: int, n_sum: int
              ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The rows ``Σ group − sum = 0`` defining the group sums of :func:`summed`, as COO (row
    ``i`` is sum ``i``, column ``first + i``)."""
    member = np.flatnonzero(var_sum >= 0)
    return (np.concatenate([var_sum[member], np.arange(n_sum)]),
            np.concatenate([member, first + np.arange(n_sum)]),
            np.concatenate([np.ones(member.size), -np.ones(n_sum)]))


#: Every fit pass substitutes auxiliaries defined over at most this many entries
#: (:func:`substitution`); 0 keeps them all.
SUBSTITUTE_ENTRIES = 5


def substitution(r: np.ndarray, c: np.ndarray, v: np.ndarray, n: int, most: int
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



def diagonal(d: np.ndarray) -> sp.csc_matrix:
    """``diag(d)`` in CSC without its zeros (what ``sp.diags(d, format="csc")`` gives, built
    directly: the DIA route cost 0.4 ms per block-group node)."""
    nz = np.flatnonzero(d)
    indptr = np.zeros(d.size + 1, dtype=np.int32)
    indptr[nz + 1] = 1
    return sp.csc_matrix((d[nz], nz.astype(np.int32), np.cumsum(indptr, dtype=np.int32)),
                         shape=(d.size, d.size))


@dataclass(frozen=True, eq=False)
class _Objective:
    """The objective's terms before any row is built: ``const`` and the diagonal part on ``x``
    (``x_diag``, ``x_lin``), and the auxiliaries ``z_i = a_i·x`` with their weights."""

    const: float
    w_max: float
    scale: float
    x_diag: np.ndarray
    x_lin: np.ndarray
    aux_rows: tuple[np.ndarray, np.ndarray, np.ndarray]
    aux_w: np.ndarray
    aux_wy: np.ndarray
    blocks: CellBlocks
    var_sum: np.ndarray
    n_sum: int


@dataclass(frozen=True, eq=False)
class _Columns:
    """How the QP's columns are numbered: ``x`` (``n_x``), the auxiliaries kept as variables
    (``n_aux``), the group sums from ``sum0`` (``n_sum``), the slacks from ``slack0``
    (``n_slack``: s⁺ per active cell, then s⁻); and which auxiliaries were substituted."""

    var_sum: np.ndarray
    n_sum: int
    n_slack: int
    aux: tuple[np.ndarray, np.ndarray, np.ndarray]    # their rows through the group sums
    small: np.ndarray
    sub: np.ndarray
    sub_cols: np.ndarray
    sub_coef: np.ndarray
    kept_aux: np.ndarray
    n_x: int

    @property
    def n_aux(self) -> int:
        return int(self.kept_aux.size)

    @property
    def sum0(self) -> int:
        return self.n_x + self.n_aux

    @property
    def slack0(self) -> int:
        return self.n_x + self.n_aux + self.n_sum

    @property
    def n_var(self) -> int:
        return self.slack0 + self.n_slack

    def summed(self, r, c, v):
        """Rows that may count a whole group, through its sum (:func:`summed`)."""
        return summed(r, c, v, self.var_sum, self.sum0, self.n_sum)

    def shifted(self, c: np.ndarray) -> np.ndarray:
        """The auxiliaries' columns (numbered from ``n_x``) past the kept auxiliaries."""
        return np.where(c >= self.n_x, c + self.n_aux, c)


@dataclass(frozen=True, eq=False)
class Fit:
    """A node's fit: the QP (:attr:`qp`) and the map from its solution back (:meth:`values`,
    :meth:`histograms`, :meth:`slacks`, :meth:`objective`).

    The QP is posed in ``δ = (v − centre) / unit`` (``v``: all variables in persons) and its
    objective is the original objective times :attr:`scale`.

    Attributes
    ----------
    qp : QP
    layout : Layout
        The variables (``layout.n_x`` of them come first in ``v``).
    scale, unit : float
    centre : array
        Every variable's unconstrained minimizer (the measured targets).
    kept_aux : int array
        The auxiliaries kept as variables (the others substituted into ``P``).
    substituted, group_sums, n_slack : int
    infeasible_rows : tuple of (child, row)
        Constraint rows no variable can meet (every cell they count is fixed at 0): the node
        is infeasible before any solver runs.
    kept_unholdable : tuple of str
        With ``keep``: kept answers that hold persons in the parent but no variable.

    Examples
    --------
    >>> from postproc.infra.solvers import solve_qp
    >>> detailed = QueryData("detailed", sp.identity(2, format="csr"),
    ...                      np.array([[2.0, 1.0], [2.0, 0.0]]), np.ones((2, 2)))
    >>> task = NodeTask("county", "p", np.array([3, 1]), np.array(["a", "b"], dtype=object),
    ...                 (detailed,), sp.csr_matrix((0, 2), dtype=np.int64), np.zeros((2, 0)),
    ...                 np.zeros((2, 0)), np.zeros((2, 2), bool))
    >>> fit = Fit.build(task)
    >>> fit.variables, fit.rows          # 4 cells; 2 parent sums and 4 bounds x ≥ 0
    (4, 6)
    >>> solution = solve_qp(fit.qp)
    >>> fit.histograms(solution.x).round(4).tolist()        # the fit, child by child
    [[1.5, 1.0], [1.5, 0.0]]
    >>> round(fit.objective(solution), 6)
    0.5

    A weight matrix per child (the inverse of a covariance of its answers) instead of a weight
    per answer; a diagonal one is the same fit:

    >>> same = QueryData("detailed", detailed.matrix, detailed.values,
    ...                  np.stack([np.eye(2), np.eye(2)]))
    >>> from dataclasses import replace
    >>> again = Fit.build(replace(task, queries=(same,)))
    >>> again.histograms(solve_qp(again.qp).x).round(4).tolist()
    [[1.5, 1.0], [1.5, 0.0]]
    """

    qp: QP
    layout: Layout
    scale: float
    unit: float
    centre: np.ndarray
    kept_aux: np.ndarray
    substituted: int
    group_sums: int
    n_slack: int
    infeasible_rows: tuple[tuple[int, int], ...]
    kept_unholdable: tuple[str, ...]

    @property
    def variables(self) -> int:
        """How many cells are variables."""
        return self.layout.n_x

    @property
    def aux(self) -> int:
        """How many auxiliaries are variables of the QP."""
        return int(self.kept_aux.size)

    @property
    def rows(self) -> int:
        return int(self.qp.A.shape[0])

    # -- invert ----------------------------------------------------------------------------

    def values(self, x: np.ndarray) -> np.ndarray:
        """All variables in persons from a solution ``x`` of the centred, scaled QP."""
        return self.centre + self.unit * x

    def histograms(self, x: np.ndarray) -> np.ndarray:
        """The children × cells fit from a solution ``x`` of the QP."""
        return self.layout.scatter(self.values(x))

    def slacks(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The active cells and their slack ``s⁺ − s⁻`` (persons) in a failsafe fit's
        solution ``x``."""
        v = self.values(x)
        act = np.flatnonzero(self.layout.active)
        n_var, s = v.size, act.size
        return act, v[n_var - 2 * s:n_var - s] - v[n_var - s:]

    def objective(self, solution: Any) -> float:
        """The fit's objective in the original units from a QP solution."""
        return solution.objective / self.scale

    def least_slack(self, lp_objective: float) -> float:
        """The least total slack in persons from the objective of the LP that minimizes the
        slacks over this fit's rows (:func:`~postproc.methods.topdown.relaxed.failsafe_fit`)."""
        return float(lp_objective) * self.unit

    # -- apply -----------------------------------------------------------------------------

    @classmethod
    def build(cls, task: NodeTask, layout: Layout | None = None, *,
              queries: Sequence[QueryData] | None = None,
              hold: Sequence[tuple[QueryData, np.ndarray]] = (),
              slack: float | None = None, keep: Sequence[KeptQuery] = (),
              substitute: int = 0) -> "Fit":
        """Build the fit QP of a node.

        Parameters
        ----------
        task : NodeTask
        layout : Layout, optional
            The node's variables, shared by the passes and the rounding; by default
            ``Layout.of(task)``, or ``Layout.relaxed(task, keep)`` with ``slack``.
        queries : the queries in the objective (default: all of the task's).
        hold : (query, answers K × m) pairs held within ``task.pass_tolerance`` (multipass).
        slack : if not None, parent consistency is relaxed with slack variables whose total is
            at most ``slack`` (failsafe stage 2); ``slack=np.inf`` builds them unbounded.
        keep : with ``slack``, answers of the parent kept exact (the children's sums must
            equal them); :attr:`kept_unholdable` lists kept answers no variable can hold.
        substitute : auxiliaries over at most this many variables and group sums are
            substituted (:func:`substitution`; :data:`SUBSTITUTE_ENTRIES` is what the fit
            passes use); 0: none. Ignored where the children are large (``large_blocks``).
        """
        queries = task.queries if queries is None else tuple(queries)
        keep = tuple(keep) if slack is not None else ()
        if layout is None:
            layout = Layout.relaxed(task, keep) if slack is not None else Layout.of(task)
        objective = _objective(task, layout, queries)
        columns = _columns(task, layout, objective, slack, substitute)
        rows, infeasible_rows, unholdable = _rows(task, layout, columns, slack, keep, hold)
        return _centred(cls, task, layout, objective, columns, rows,
                        tuple(infeasible_rows), tuple(unholdable))

    def info(self) -> dict[str, Any]:
        """What :func:`assemble_fit` returned as its fourth item (its old untyped form)."""
        return {"variables": self.variables, "aux": self.aux, "kept_aux": self.kept_aux,
                "substituted": self.substituted, "group_sums": self.group_sums,
                "rows": self.rows, "infeasible_rows": list(self.infeasible_rows),
                "n_slack": self.n_slack, "unit": self.unit, "centre": self.centre,
                "kept_unholdable": list(self.kept_unholdable)}


def _objective(task: NodeTask, lay: Layout, queries: Sequence[QueryData]) -> _Objective:
    """The objective's terms: identity queries (a weight per answer) straight onto the cells'
    diagonal, every other answer through :func:`auxiliaries`."""
    const = 0.0
    distinct = {id(q.weights): q for q in queries if q.weights.size}    # BlueDown's shared
    w_max = max((_largest_weight(q) for q in distinct.values()), default=1.0)
    scale = 1.0 / w_max if w_max > 0 else 1.0
    x_diag = np.zeros(lay.n_x)
    x_lin = np.zeros(lay.n_x)
    others, w_others, y_others = [], [], []     # the non-identity queries
    var_sum, n_sum = group_sums(task, lay)
    matrix_weighted = [q for q in queries if q.weights.ndim == 3]
    sums = _sum_columns(task, lay, var_sum, n_sum) if matrix_weighted else None
    kind = [2 if in_blocks(q, None) else 1 if in_blocks(q, sums) else 0
            for q in matrix_weighted]           # over cells, over group sums, whitened

    def of_kind(*kinds: int) -> list[QueryData]:
        return [q for q, b in zip(matrix_weighted, kind) if b in kinds]

    if (1 in kind and dense_objective(lay.n_x, lay.n_x ** 2)    # large enough to be dense
            and dense_objective(lay.n_x, block_entries(of_kind(2), lay) + lay.n_x)):
        # a node Clarabel factors with faer for the cells' blocks: the sums' blocks were slower
        # there than whitened rows (the 10M nation → states node: 13.0–13.2 s against
        # 9.4–10.7, 32 iterations either way)
        kind = [0 if b == 1 else b for b in kind]
    blocks = cell_blocks(of_kind(1, 2), lay, scale, sums)
    x_lin += blocks.linear[:lay.n_x]
    white = whitened(of_kind(0), lay, scale)
    const += blocks.const + sum(float(np.sum(t ** 2)) for *_, t in white)
    for q in queries:
        if q.weights.ndim == 3:     # in blocks of P or whitened above
            continue
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
    r, c, v, has_var = stacked(others, lay.var_index, lay.cells)
    w_all = np.concatenate(w_others or [np.zeros(0)])
    y_all = np.concatenate(y_others or [np.zeros(0)])
    if white:   # after the others' answers, one query after another (canonical order kept)
        first = np.cumsum([w_all.size] + [t.size for *_, t in white])[:-1]
        r = np.concatenate([r] + [wr + f for (wr, *_), f in zip(white, first)])
        c = np.concatenate([c] + [wc for _, wc, _, _ in white])
        v = np.concatenate([v] + [wv for _, _, wv, _ in white])
        w_all = np.concatenate([w_all] + [np.ones(t.size) for *_, t in white])
        y_all = np.concatenate([y_all] + [t for *_, t in white])
    aux_rows, aux_w, aux_wy = auxiliaries(r, c, v, w_all, y_all, lay.n_x, x_diag, x_lin)
    return _Objective(const, w_max, scale, x_diag, x_lin, aux_rows, aux_w, aux_wy, blocks,
                      var_sum, n_sum)


def _sum_columns(task: NodeTask, lay: Layout, var_sum: np.ndarray, n_sum: int
                 ) -> SumColumns | None:
    """The group sums' columns as :func:`~postproc.methods.topdown.whiten.cell_blocks`
    reads them (None without :attr:`NodeTask.cell_groups`): a sum's own (from ``n_x``), the
    one variable of a child's group that has one, −1 for a group with none."""
    if task.cell_groups is None:
        return None
    groups = np.asarray(task.cell_groups, dtype=np.int64)
    column = np.full((task.k, int(groups.max()) + 1), -1, np.int64)
    own = np.arange(lay.n_x)
    column[lay.child, groups[lay.cell]] = np.where(var_sum >= 0, lay.n_x + var_sum, own)
    return SumColumns(groups, column, lay.n_x + n_sum)


def _largest_weight(q: QueryData) -> float:
    """The largest weight of a query: of an answer, or on a weight matrix's diagonal (which
    bounds every entry of a positive definite matrix)."""
    if q.weights.ndim == 3:
        return float(np.max(np.diagonal(q.weights, axis1=1, axis2=2)))
    return float(np.max(q.weights))


def _columns(task: NodeTask, lay: Layout, objective: _Objective, slack: float | None,
             substitute: int) -> _Columns:
    """Number the QP's columns: decide the group sums, the slacks and which auxiliaries are
    substituted into the objective."""
    var_sum, n_sum = objective.var_sum, objective.n_sum
    n_active = int(np.count_nonzero(lay.active))
    n_slack = 2 * n_active if (slack is not None and task.parent_hist is not None) else 0
    if large_blocks(lay.n_x + objective.aux_w.size + n_sum + n_slack, task.k):
        # children this large are factored as dense supernodes already; substituting would
        # change what the factorization's choice was measured on (and had no gain to show)
        substitute = 0
    # the auxiliaries' rows through the group sums (numbered from n_x until the kept
    # auxiliaries are known); the short ones are substituted
    ar, ac, av = summed(*objective.aux_rows, var_sum, lay.n_x, n_sum)
    small, sub, sub_cols, sub_coef = substitution(ar, ac, av, objective.aux_w.size, substitute)
    return _Columns(var_sum, n_sum, n_slack, (ar, ac, av), small, sub, sub_cols, sub_coef,
                    np.flatnonzero(~small), lay.n_x)


def _rows(task: NodeTask, lay: Layout, col: _Columns, slack: float | None,
          keep: Sequence[KeptQuery], hold: Sequence[tuple[QueryData, np.ndarray]]
          ) -> tuple[Rows, list[tuple[int, int]], list[str]]:
    """The fit's rows, and the constraint rows no variable can meet and the kept answers no
    variable can hold (each makes the node infeasible)."""
    rows = Rows(col.n_var)
    n_aux, (ar, ac, av) = col.n_aux, col.aux
    if n_aux:  # Q x − z = 0
        sel = ~col.small[ar]
        r = (np.cumsum(~col.small) - 1)[ar[sel]]
        rows.add(np.concatenate([r, np.arange(n_aux)]),
                 np.concatenate([col.shifted(ac[sel]), lay.n_x + np.arange(n_aux)]),
                 np.concatenate([av[sel], -np.ones(n_aux)]), np.zeros(n_aux), np.zeros(n_aux))
    n_slack = col.n_slack
    if task.parent_hist is not None:  # Σ_k x_k = parent on active cells (± slacks)
        act = np.flatnonzero(lay.active)
        r, c, data = parent_rows(lay.var_index, act, col.slack0 if n_slack else None)
        p = task.parent_hist[act].astype(np.float64)
        rows.add(r, c, data, p, p)
        if n_slack and np.isfinite(slack):
            rows.add(np.zeros(n_slack), col.slack0 + np.arange(n_slack), 1.0, [0.0],
                     [float(slack)])
    unholdable: list[str] = []
    if n_slack and keep:  # the parent's kept answers are exact
        r, c, data, target, unholdable = kept_rows(task, lay, keep, col.n_var)
        rows.add(*col.summed(r, c, data), target, target)
    infeasible_rows: list[tuple[int, int]] = []
    if task.matrix.shape[0]:  # lower ≤ C x_k ≤ upper
        r, c, v, has_var = lay.constraint_rows(task)
        lo, hi = (b.ravel() for b in lay.bounds(task, exact_parent=not n_slack))
        bounded = np.isfinite(lo) | np.isfinite(hi)
        empty = ~has_var & bounded & ((lo > 0) | (hi < 0))
        infeasible_rows = [divmod(int(i), task.matrix.shape[0]) for i in np.flatnonzero(empty)]
        live = has_var & bounded
        renumber = np.cumsum(live) - 1
        sel = live[r]
        rows.add(*col.summed(renumber[r[sel]], c[sel], v[sel]), lo[live], hi[live])
    for r, c, v, lo, hi in child_sum_rows(task, lay):  # rows across children
        rows.add(*col.summed(r, c, v), lo, hi)
    for hq, answers in hold:  # multipass: earlier answers held within the tolerance
        r, c, v, _ = per_child(hq.matrix, lay.var_index, lay.cells)
        a = np.asarray(answers, dtype=np.float64).ravel()
        rows.add(*col.summed(r, c, v), a - task.pass_tolerance, a + task.pass_tolerance)
    nonneg = np.concatenate([np.arange(lay.n_x), col.slack0 + np.arange(n_slack)])  # ≥ 0
    rows.add(np.arange(nonneg.size), nonneg, 1.0, np.zeros(nonneg.size),
             np.full(nonneg.size, np.inf))
    if col.n_sum:
        rows.add(*sum_rows(col.var_sum, col.sum0, col.n_sum), np.zeros(col.n_sum),
                 np.zeros(col.n_sum))
    return rows, infeasible_rows, unholdable


def _centred(cls: type[Fit], task: NodeTask, lay: Layout, objective: _Objective,
             col: _Columns, rows: Rows, infeasible_rows: tuple[tuple[int, int], ...],
             unholdable: tuple[str, ...]) -> Fit:
    """The QP centred on every variable's unconstrained minimizer and scaled.

    Every variable is centred at its own unconstrained minimizer v0 = -q/d (the measured
    targets; a cell in a block of ``P``, at its answer's target), and the shift measured in
    units of c (the noise s.d. of the most precise measurement): x = v0 + c·δ. The objective
    becomes ½ δᵀPδ + r' with no linear term, so solvers' relative tolerances apply to the
    residuals that matter. Expanded as
    ½xᵀPx + qᵀx + r, a state-level fit (counts ~1e6, residuals ~1e2) loses the optimum to
    cancellation: Clarabel and OSQP stopped 0.65 % above it.
    """
    n_var, n_sum, n_slack, kept_aux = col.n_var, col.n_sum, col.n_slack, col.kept_aux
    aux_w, aux_wy = objective.aux_w, objective.aux_wy
    d = np.concatenate([objective.x_diag, 2 * aux_w[kept_aux],
                        np.zeros(n_sum + n_slack)])                         # P's diagonal
    blocks = objective.blocks       # cells and group sums in blocks of P
    q_vec = np.concatenate([objective.x_lin, -2 * aux_wy[kept_aux], np.zeros(n_sum + n_slack)])
    q_vec[col.sum0:col.sum0 + blocks.linear.size - lay.n_x] += blocks.linear[lay.n_x:]
    const = objective.const
    l_vec, u_vec = rows.bounds()
    A = rows.matrix("csc")
    v0 = np.divide(-q_vec, d, out=np.zeros_like(q_vec), where=d > 0)
    b_rows, b_cols = col.shifted(blocks.rows), col.shifted(blocks.cols)
    v0[col.shifted(blocks.covered)] = blocks.target     # centred on their targets
    if n_sum:   # a group's sum at the sum of its members' targets (its row's rhs stays 0)
        member = np.flatnonzero(col.var_sum >= 0)
        v0[col.sum0:col.slack0] = np.bincount(col.var_sum[member], weights=v0[member],
                                              minlength=n_sum)
    nz = np.flatnonzero(d)          # P's entries (COO): its diagonal, the blocks
    pr, pc, pv = [nz, b_rows], [nz, b_cols], [d[nz], blocks.data]
    pv0 = d * v0
    if blocks.data.size:
        pv0 += np.bincount(b_rows, weights=blocks.data * v0[b_cols], minlength=n_var)
    const += float(q_vec @ v0 + 0.5 * v0 @ pv0)
    q_vec = q_vec + pv0             # zero wherever d > 0 (and in the blocks, but for the
    #                                 residuals of their cells that are not variables)
    sub = col.sub
    if sub.size:
        # a substituted W (a·x − Y)² − W Y² (what W z² − 2WY z was) at x = v0 + c·δ, with
        # res = a·v0 − Y: c² W (a·δ)² + 2 c W res (a·δ) + W (res² − Y²)
        cols, width = col.shifted(col.sub_cols), col.sub_cols.shape[1]    # padding: −1, 0
        sub_coef = col.sub_coef
        w = aux_w[sub]
        y = np.divide(aux_wy[sub], w, out=np.zeros(sub.size), where=w > 0)
        res = (sub_coef * v0[cols]).sum(axis=1) - y
        real = cols >= 0
        q_vec += np.bincount(cols[real], weights=((2 * w * res)[:, None] * sub_coef)[real],
                             minlength=n_var)
        const += float(w @ (res * res - y * y))
        sr, sc = np.repeat(cols, width, axis=1).ravel(), np.tile(cols, width).ravel()
        sv = (2 * w[:, None, None] * sub_coef[:, :, None] * sub_coef[:, None, :]).ravel()
        pair = (sr >= 0) & (sc >= 0)
        pr.append(sr[pair])
        pc.append(sc[pair])
        pv.append(sv[pair])
    if sub.size or blocks.data.size:
        P = sp.csc_matrix((np.concatenate(pv), (np.concatenate(pr), np.concatenate(pc))),
                          shape=(n_var, n_var))
    else:
        P = diagonal(d)
    av0 = A @ v0
    w_max = objective.w_max
    c = max(1.0, 1.0 / np.sqrt(w_max)) if w_max > 0 else 1.0
    qp = QP(P, q_vec / c, A, (l_vec - av0) / c, (u_vec - av0) / c, const / c ** 2,
            blocks=task.k)
    return cls(qp, lay, objective.scale / c ** 2, c, v0, kept_aux, int(sub.size), n_sum,
               n_slack, infeasible_rows, unholdable)


def assemble_fit(task: NodeTask, *, queries: Sequence[QueryData] | None = None,
                 hold: Sequence[tuple[QueryData, np.ndarray]] = (),
                 slack: float | None = None, keep: Sequence[KeptQuery] = (),
                 substitute: int = 0) -> tuple[QP, Layout, float, dict[str, Any]]:
    """Deprecated: :meth:`Fit.build`, as the tuple ``(qp, layout, scale, info)`` it returned
    before the fit was an object (``info`` is :meth:`Fit.info`).

    Examples
    --------
    >>> import warnings
    >>> detailed = QueryData("detailed", sp.identity(2, format="csr"),
    ...                      np.array([[2.0, 1.0], [2.0, 0.0]]), np.ones((2, 2)))
    >>> task = NodeTask("county", "p", np.array([3, 1]), np.array(["a", "b"], dtype=object),
    ...                 (detailed,), sp.csr_matrix((0, 2), dtype=np.int64), np.zeros((2, 0)),
    ...                 np.zeros((2, 0)), np.zeros((2, 2), bool))
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     qp, layout, scale, info = assemble_fit(task)
    >>> info["variables"], caught[0].category.__name__
    (4, 'DeprecationWarning')
    """
    warnings.warn("assemble_fit is deprecated: use Fit.build(task, ...), whose attributes and "
                  "methods replace the info dict", DeprecationWarning, stacklevel=2)
    fit = Fit.build(task, queries=queries, hold=hold, slack=slack, keep=keep,
                    substitute=substitute)
    return fit.qp, fit.layout, fit.scale, fit.info()
