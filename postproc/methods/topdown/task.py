"""The node problem's data: one parent and its children as the engine receives them
(:class:`NodeTask`, with each measured query's :class:`QueryData` and the parent's answers the
failsafe keeps exact, :class:`KeptQuery`), and what solving it gives (:class:`NodeResult`). The fit,
the rounding and the failsafe read these; none of them is defined here (``docs/topdown.md``, "The
node problem")."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import scipy.sparse as sp

from postproc.errors import PostprocError

__all__ = ["KeptQuery", "total_kept", "QueryData", "ChildSum", "NodeTask", "NodeResult",
           "cell_groups"]

#: ``failsafe_slack`` by default: the total slack may exceed its least value by one person,
#: as in the Census Bureau's 2018 and 2020 TopDown code (docs/topdown.md, "Failsafe").
DEFAULT_FAILSAFE_SLACK = 1.0


@dataclass(frozen=True, eq=False)
class KeptQuery:
    """A query whose answers the failsafe keeps exact at the parent.

    Parameters
    ----------
    name : str
        The query's name (a workload query, or ``"total"``).
    matrix : sparse (answers × cells), 0/1
        The query's matrix; stored as int64 CSR.

    Examples
    --------
    >>> import numpy as np, scipy.sparse as sp
    >>> KeptQuery("halves", sp.csr_matrix(np.array([[1, 1, 0, 0], [0, 0, 1, 1]]))).n_answers
    2
    >>> KeptQuery("bad", sp.csr_matrix(np.array([[2, 0]])))
    Traceback (most recent call last):
    ...
    postproc.errors.PostprocError: kept query 'bad' must be a 0/1 matrix (each answer counts ...
    """

    name: str
    matrix: sp.csr_matrix

    def __post_init__(self):
        if not isinstance(self.name, str) or not self.name:
            raise PostprocError("a kept query needs a non-empty name")
        m = sp.csr_matrix(self.matrix, dtype=np.int64)
        m.eliminate_zeros()
        if m.ndim != 2 or m.shape[0] == 0 or np.any(m.data != 1):
            raise PostprocError(f"kept query {self.name!r} must be a 0/1 matrix (each answer "
                                "counts persons in a set of cells)")
        m.sort_indices()
        object.__setattr__(self, "matrix", m)

    @property
    def n_answers(self) -> int:
        return int(self.matrix.shape[0])

    @property
    def partitions_cells(self) -> bool:
        """Every cell is counted by exactly one answer (the answers sum to the total)."""
        return bool(np.all(np.asarray(self.matrix.sum(axis=0)).ravel() == 1))


def total_kept(n_cells: int) -> KeptQuery:
    """The total as a kept query (one row of ones).

    Examples
    --------
    >>> total = total_kept(4)
    >>> total.name, total.matrix.toarray().tolist(), total.partitions_cells
    ('total', [[1, 1, 1, 1]], True)
    """
    return KeptQuery("total", sp.csr_matrix(np.ones((1, n_cells), dtype=np.int64)))


@dataclass(frozen=True, eq=False)
class QueryData:
    """One measured query of the children: matrix (answers × cells), values (children ×
    answers) and weights — children × answers (a weight per answer: the inverse of its
    variance), or children × answers × answers (a positive definite weight matrix per child:
    the inverse of the covariance of its answers, as estimates from a subtree have; the fit
    whitens it, :mod:`postproc.methods.topdown.fit`).

    Examples
    --------
    >>> from postproc.methods.topdown.node import solve_node
    >>> detailed = QueryData("detailed", sp.identity(2, format="csr"),
    ...                      np.array([[2.0, 1.0], [2.0, 0.0]]), np.ones((2, 2)))
    >>> total = QueryData("total", sp.csr_matrix(np.ones((1, 2))), np.array([[3.0], [2.0]]),
    ...                   np.ones((2, 1)))
    >>> detailed.is_identity, total.is_identity      # identity queries need no auxiliaries
    (True, False)
    """

    name: str
    matrix: sp.csr_matrix
    values: np.ndarray
    weights: np.ndarray

    @property
    def is_identity(self) -> bool:
        m = self.matrix
        return (m.shape[0] == m.shape[1] and m.nnz == m.shape[0]
                and np.array_equal(m.indices, np.arange(m.shape[0]))
                and np.array_equal(m.indptr, np.arange(m.shape[0] + 1)))


@dataclass(frozen=True, eq=False)
class ChildSum:
    """Bounds on a query's answers over a set of the node's children together (a row across
    children): a state's total over its two pieces (:mod:`invariants.sums`, exact), or an
    unmeasured root's rows over all its children (:meth:`RunPlan.tasks
    <postproc.methods.topdown.plan.RunPlan.tasks>`).

    Attributes
    ----------
    children : int array
        The children (indices into the node's) whose histograms are summed.
    matrix : csr (answers × cells), int64
    lower, upper : float arrays (answers,)
        Bounds on the answers of the summed histogram: whole numbers, or ``∓inf`` where a side
        is free; equal for exact answers.
    labels : tuple of str
        One per answer, for messages.

    Examples
    --------
    >>> pair = ChildSum.exact(np.array([0, 2]), sp.csr_matrix(np.ones((1, 2), np.int64)),
    ...                       np.array([7]), ("state_total: 004+104: total",))
    >>> pair.children.tolist(), pair.lower.tolist(), pair.upper.tolist()
    ([0, 2], [7.0], [7.0])
    """

    children: np.ndarray
    matrix: sp.csr_matrix
    lower: np.ndarray
    upper: np.ndarray
    labels: tuple[str, ...]

    @classmethod
    def exact(cls, children: np.ndarray, matrix: sp.csr_matrix, values: np.ndarray,
              labels: tuple[str, ...]) -> "ChildSum":
        """Answers held at ``values`` exactly."""
        values = np.asarray(values, dtype=np.float64)
        return cls(np.asarray(children, dtype=np.int64), matrix, values, values.copy(),
                   tuple(labels))


@dataclass(frozen=True, eq=False)
class NodeTask:
    """Everything needed to solve one parent's problem (picklable; no references to the level).

    Attributes
    ----------
    level : str
        The children's level.
    parent : str
        The parent's geocode ("" at the root).
    parent_hist : int64 array (cells,) or None
        The parent's rounded histogram; ``None`` for the root problem.
    children : array of str
        The children's geocodes.
    queries : tuple of QueryData
    matrix : csr (rows × cells), int64
        Constraint rows shared by the level.
    lower, upper : float arrays (children × rows)
    zero : bool array (children × cells)
    labels : tuple of str
        Row labels (for failsafe reports).
    passes : tuple of tuples of query names, optional
        Multipass order; each pass fits its queries, then holds their answers within
        ``pass_tolerance`` for later passes.
    failsafe_keep : tuple of KeptQuery, optional
        Answers of the parent the failsafe keeps exact (see
        :mod:`postproc.methods.topdown.failsafe`); ``None`` keeps the total, ``()`` keeps
        nothing.
    round_passes : tuple of tuples of (name, matrix), optional
        Multipass rounding (the 2020 production rounder): each pass minimizes the L1 distance
        of its queries' answers to the fit's, then holds them exactly for later passes; a final
        pass over the cells decides the rest. ``None``: one pass over the cells.
    cell_groups : int array (cells,), optional
        A partition of the cells for the fit
        (:func:`~postproc.methods.topdown.node.assemble_fit`): a row that counts every
        variable of a child's group with one coefficient counts the group's sum instead, a
        variable of its own. The problem is the same; its KKT factorization is sparser when
        the groups are what the coarse rows count together —
        :func:`cell_groups` gives the cells that differ only in the schema's last
        attribute (what TopDown passes). ``None``: no groups.
    failsafe_slack : float, optional
        How much the failsafe's total slack may exceed its least value (persons; default 1.0,
        as the Census Bureau's code; 0 holds it at the least). See
        :func:`~postproc.methods.topdown.options.check_failsafe_slack`.
    sums : tuple of ChildSum, optional
        Rows across children held exactly by the fit, the rounding and the failsafe (never
        relaxed), and verified; a node with sums is solved whole (not in groups).

    Examples
    --------
    A parent of histogram (3, 1) over two cells, split between two children whose noisy
    counts are (2, 1) and (2, 0), each of weight 1, without constraint rows:

    >>> from postproc.methods.topdown.node import solve_node
    >>> detailed = QueryData("detailed", sp.identity(2, format="csr"),
    ...                      np.array([[2.0, 1.0], [2.0, 0.0]]), np.ones((2, 2)))
    >>> task = NodeTask("county", "p", np.array([3, 1]), np.array(["a", "b"], dtype=object),
    ...                 (detailed,), sp.csr_matrix((0, 2), dtype=np.int64), np.zeros((2, 0)),
    ...                 np.zeros((2, 0)), np.zeros((2, 2), bool))
    >>> task.k, task.n, [kept.name for kept in task.kept], task.where
    (2, 2, ['total'], "county children of 'p'")
    >>> solve_node(task).histograms.tolist()
    [[1, 1], [2, 0]]
    """

    level: str
    parent: str
    parent_hist: np.ndarray | None
    children: np.ndarray
    queries: tuple[QueryData, ...]
    matrix: sp.csr_matrix
    lower: np.ndarray
    upper: np.ndarray
    zero: np.ndarray
    labels: tuple[str, ...] = ()
    passes: tuple[tuple[str, ...], ...] | None = None
    pass_tolerance: float = 0.5
    failsafe_keep: tuple[KeptQuery, ...] | None = None
    round_passes: tuple[tuple[tuple[str, sp.csr_matrix], ...], ...] | None = None
    cell_groups: np.ndarray | None = None
    failsafe_slack: float = DEFAULT_FAILSAFE_SLACK
    sums: tuple[ChildSum, ...] = ()

    @property
    def kept(self) -> tuple[KeptQuery, ...]:
        """What the failsafe keeps exact: ``failsafe_keep``, or the total when it is ``None``."""
        return (total_kept(self.n),) if self.failsafe_keep is None else tuple(self.failsafe_keep)

    @property
    def k(self) -> int:
        return int(self.zero.shape[0])

    @property
    def n(self) -> int:
        return int(self.zero.shape[1])

    @property
    def where(self) -> str:
        """The node as messages name it: ``"{level} children of '{parent}'"``."""
        return f"{self.level} children of {self.parent!r}"


@dataclass(frozen=True, eq=False)
class NodeResult:
    """Integer child histograms and what it took to get them.

    Attributes
    ----------
    histograms : int64 array (children × cells)
    stats : dict
        The node's row of ``Result.node_stats``: level, parent, children, variables, backend,
        rounding, timings, objective, whether the failsafe ran.
    failsafe : dict or None
        The failsafe report (relaxation, cells moved, binding constraints), if it ran.
    continuous : array (children × cells) or None
        The fit before rounding, when asked for (``solve_node(..., keep_continuous=True)``).

    Examples
    --------
    >>> from postproc.methods.topdown.node import solve_node
    >>> detailed = QueryData("detailed", sp.identity(2, format="csr"),
    ...                      np.array([[2.0, 1.0], [2.0, 0.0]]), np.ones((2, 2)))
    >>> task = NodeTask("county", "p", np.array([3, 1]), np.array(["a", "b"], dtype=object),
    ...                 (detailed,), sp.csr_matrix((0, 2), dtype=np.int64), np.zeros((2, 0)),
    ...                 np.zeros((2, 0)), np.zeros((2, 2), bool))
    >>> result = solve_node(task, keep_continuous=True)
    >>> result.histograms.tolist(), result.continuous.round(4).tolist(), result.failsafe
    ([[1, 1], [2, 0]], [[1.5, 1.0], [1.5, 0.0]], None)
    >>> result.stats["children"], result.stats["rounding"], round(result.stats["objective"], 6)
    (2, 'lp', 0.5)
    """

    histograms: np.ndarray
    stats: dict[str, Any]
    failsafe: dict[str, Any] | None = None
    continuous: np.ndarray | None = field(default=None, repr=False)


def cell_groups(schema: Any) -> np.ndarray | None:
    """The cells that differ only in the schema's last attribute, numbered (``None`` when that
    attribute has one level): the fit's :attr:`NodeTask.cell_groups`.
    A marginal that does not cross the last attribute counts such cells together.

    Examples
    --------
    >>> from hierarchy import E2E_1940
    >>> E2E_1940.shape, cell_groups(E2E_1940)[[0, 5, 6, 191]].tolist()
    ((8, 2, 2, 6), [0, 0, 1, 31])
    """
    last = int(schema.shape[-1])
    return np.arange(int(schema.size)) // last if last > 1 else None
