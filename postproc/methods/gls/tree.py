"""The exact best linear unbiased estimate of every unit's histogram on a tree, with equalities.

:func:`tree_gls` minimises

    Σ_u Σ_q (Q_q x_u − y_{u,q})ᵀ W_{u,q} (Q_q x_u − y_{u,q})

over the histograms ``x_u`` of every unit, subject to ``x_parent = Σ_children x_child`` and each
unit's equalities (rows ``E x_u = c_u``: invariant totals; cells fixed at 0), where ``W`` holds
each answer's inverse variance. That is generalized least squares (GLS): by the Gauss–Markov–
Aitken theorem, the best linear unbiased estimate (BLUE) of the histograms from the
measurements. It is real-valued (it may be negative) and consistent.

It is computed in two passes over the tree, as belief propagation on a tree computes a Gaussian
posterior (``docs/gls.md`` states and proves each step):

**Upward** (bottom level first): each unit's subtree estimate ``L_v`` — the BLUE of ``x_v``
from the measurements of ``v`` and its descendants — and its covariance ``C_v``. The children's
estimates summed, ``S_v = Σ L_c`` with covariance ``Σ_v = Σ C_c``, are one more measurement of
``x_v``; directions in which ``Σ_v`` is zero (the children's equalities) are equalities of ``v``.
With ``F`` the unit's equality rows and ``Z`` an orthonormal basis of their null space,

    L_v = x₀ + Z (Zᵀ A Z)⁻¹ Zᵀ (b − A x₀),   C_v = Z (Zᵀ A Z)⁻¹ Zᵀ,

where ``A = Σ_q QᵀWQ + Σ_v⁺`` and ``b = Σ_q QᵀWy + Σ_v⁺ S_v`` (information), and ``x₀`` is the
least-norm solution of the equalities.

**Downward** (root first): the root's estimate is its subtree estimate, ``B = L``. A child ``c``
of ``p`` gets the conditional mean given the parent's final estimate,

    B_c = L_c + C_c Σ_p⁺ (B_p − S_p),
    Cov(B_c) = C_c − C_c Σ_p⁺ C_c + C_c Σ_p⁺ Cov(B_p) Σ_p⁺ C_c,

so the children sum to the parent exactly (to float rounding) and keep their equalities.

The matrices depend only on a unit's own variances, its equality pattern (which rows, which zero
cells — not their values) and its children's matrices, so they are computed once per distinct
signature and applied to all the units that share it. The cost is linear in the number of units
times the cube of the cells per distinct signature.

The function's example is Hay et al.'s three-node tree.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np
import scipy.sparse as sp

from postproc.errors import PostprocError
from postproc.methods.gls.information import (
    SharedCovariances,
    Term,
    _Children,
    _pattern_ids,
    level_information,
    times,
    unit_groups,
)
from postproc.methods.gls.means import _level_means
from postproc.methods.gls.operators import (
    _answer_variances,
    _conditioned_covariance,
    _Operator,
    _operators,
    step_precision,
)

__all__ = ["Equalities", "TreeGLS", "tree_gls", "Below"]

@dataclass(frozen=True, eq=False)
class Equalities:
    """The equalities of one level's units.

    Parameters
    ----------
    matrix : (rows × cells) array or sparse matrix
        The rows ``E``.
    values : float array (units × rows)
        ``c``: unit ``u`` holds ``E[r] x_u = values[u, r]``; NaN where it has no such equality.
    zero : bool array (units × cells), optional
        Cells fixed at 0.

    Examples
    --------
    >>> eq = Equalities(np.ones((1, 3)), np.array([[4.0], [np.nan]]),
    ...                 np.array([[False, False, True], [False, False, False]]))
    >>> eq.rows(0)[0].tolist(), eq.rows(0)[1].tolist(), eq.rows(1)[0].shape
    ([[1.0, 1.0, 1.0], [0.0, 0.0, 1.0]], [4.0, 0.0], (0, 3))
    """

    matrix: Any
    values: np.ndarray
    zero: np.ndarray | None = None

    def __post_init__(self):
        matrix = self.matrix.toarray() if sp.issparse(self.matrix) else self.matrix
        object.__setattr__(self, "matrix", np.atleast_2d(np.asarray(matrix, dtype=np.float64)))
        object.__setattr__(self, "values", np.atleast_2d(np.asarray(self.values, np.float64)))
        if self.values.shape[1] != self.matrix.shape[0]:
            raise PostprocError(f"equalities: {self.values.shape[1]} values per unit for "
                                f"{self.matrix.shape[0]} rows")
        if self.zero is not None:
            object.__setattr__(self, "zero", np.asarray(self.zero, dtype=bool))

    def pattern(self, u: int) -> tuple[bytes, bytes]:
        """What the matrices depend on: which rows and which zero cells unit ``u`` has."""
        rows = np.isfinite(self.values[u])
        zero = self.zero[u] if self.zero is not None else np.zeros(0, bool)
        return np.packbits(rows).tobytes(), np.packbits(zero).tobytes()

    def rows(self, u: int) -> tuple[np.ndarray, np.ndarray]:
        """Unit ``u``'s rows and right-hand sides (its equality rows, then its zero cells)."""
        active = np.isfinite(self.values[u])
        mats, rhs = [self.matrix[active]], [self.values[u, active]]
        if self.zero is not None and self.zero[u].any():
            cells = np.flatnonzero(self.zero[u])
            mats.append(np.eye(self.matrix.shape[1])[cells])
            rhs.append(np.zeros(cells.size))
        return np.concatenate(mats, axis=0), np.concatenate(rhs)


@dataclass(eq=False)
class TreeGLS:
    """The BLUE of every unit's histogram, and the covariances to go with it.

    Attributes
    ----------
    means : list of float arrays (units × cells), root level first
        The BLUE from every measurement.
    subtree : list of float arrays (units × cells), root level first
        Each unit's subtree estimate ``L``: the BLUE from its own and its descendants'
        measurements (the root's is its ``means``); its covariance is
        :meth:`subtree_covariance`.
    child_sums : list of float arrays or None, root level first
        Each unit's children's subtree estimates summed, ``S`` (None at the bottom level,
        unless given from below).
    below_steps : float array or None
        Given ``below``: each bottom unit's step ``Σ⁺ (B − S)`` for its children in the parts.

    The covariances are computed on demand, level by level from the root, once per distinct
    (subtree signature, parent's covariance) pair, and shared by the units that have it.

    Examples
    --------
    A root and two leaves of two cells, the leaves measured cell by cell (variance 1) and the
    root's total (variance 1/4): the variance of each leaf's total and of its first cell.

    >>> leaves = np.array([[3.0, 1.0], [0.0, 2.0]])
    >>> fit = tree_gls([[-1], [0, 0]], [[(np.ones((1, 2)), np.array([[7.0]]), np.array([[4.0]]))],
    ...                                 [(np.eye(2), leaves, np.ones((2, 2)))]], cells=2)
    >>> fit.variances(1, [[1.0, 1.0], [1.0, 0.0]]).round(4).tolist()
    [[1.0588, 0.7647], [1.0588, 0.7647]]
    >>> fit.covariance_ids(1).tolist()        # the two leaves share one (the root's is 0)
    [1, 1]
    """

    means: list[np.ndarray]
    subtree: list[np.ndarray] = field(repr=False)
    _parents: list[np.ndarray] = field(repr=False)
    _lower: list[np.ndarray] = field(repr=False)        # each unit's operator id
    _operators: list[_Operator] = field(repr=False)
    _ids: list[np.ndarray] = field(default_factory=list, repr=False)
    _covariances: list[np.ndarray] = field(default_factory=list, repr=False)
    below_steps: np.ndarray | None = field(default=None, repr=False)
    _above: bool = field(default=False, repr=False)
    child_sums: list[np.ndarray | None] = field(default_factory=list, repr=False)
    _given_parents: Any = field(default=None, repr=False)

    def subtree_means(self, level: int) -> np.ndarray:
        """The subtree estimates ``L`` of a level's units (units × cells)."""
        return self.subtree[level]

    def subtree_ids(self, level: int) -> np.ndarray:
        """Each unit's subtree signature: units with one id share :meth:`subtree_covariance`."""
        return self._lower[level]

    def subtree_covariance(self, signature: int) -> np.ndarray:
        """The covariance of the subtree estimate of the units with this signature."""
        return self._operators[signature].covariance

    def covariance(self, level: int, unit: int) -> np.ndarray:
        """The covariance (cells × cells) of unit ``unit`` of level ``level``'s estimate given
        every measurement."""
        return self._covariances[int(self.covariance_ids(level)[unit])]

    def covariance_ids(self, level: int) -> np.ndarray:
        """Each unit's covariance id: units with one id share the covariance."""
        while len(self._ids) <= level:
            self._next_level()
        return self._ids[level]

    def variances(self, level: int, matrix: Any) -> np.ndarray:
        """The variance of every answer of the query ``matrix`` (answers × cells) for every unit
        of ``level``, shape (units × answers): the diagonal of ``Q Cov Qᵀ``, computed once per
        distinct covariance."""
        distinct, inverse = np.unique(self.covariance_ids(level), return_inverse=True)
        per = _answer_variances([np.stack([self._covariances[int(i)] for i in distinct])],
                                matrix)
        return per[inverse.ravel()]

    def sum_variances(self, level: int, rows: np.ndarray) -> np.ndarray:
        """The variances of sums over units: ``rows`` (units of ``level`` × m × cells) holds, for
        each of ``m`` functionals, a row per unit, and functional ``j`` is
        ``Σ_u rows[u, j] · x_u`` — a set of units' total of a query's answer, say. Exact:
        across units too (the covariances between units are not formed; see
        ``docs/gls.md``, "Intervals for sets of units").

        Examples
        --------
        Hay et al.'s tree (a root counted 10 over leaves counted 4 and 5, unit variances): the
        two leaves together are the root (variance 2/3); one leaf alone has variance 1/2+1/6.

        >>> one = np.ones((1, 1))
        >>> fit = tree_gls([[-1], [0, 0]], [[(one, np.array([[10.0]]), one)],
        ...                 [(one, np.array([[4.0], [5.0]]), np.ones((2, 1)))]], cells=1)
        >>> fit.sum_variances(1, np.array([[[1.0], [1.0]], [[1.0], [0.0]]])).round(4).tolist()
        [0.6667, 0.6667]
        """
        if self._above:
            raise PostprocError("the covariances of a part solved under a top are not "
                                "computed (its top level's covariance needs its parents')")
        r = np.asarray(rows, dtype=np.float64)
        total = np.zeros(r.shape[1])
        for li in range(level, 0, -1):
            parent = self._parents[li]
            rc = np.empty_like(r)
            for g, units in unit_groups(self._lower[li]):
                rc[units] = times(r[units], self._operators[g].covariance)
            total += np.einsum("umc,umc->m", rc, r)
            gathered = np.zeros((self._parents[li - 1].size, *r.shape[1:]))
            np.add.at(gathered, parent, rc)
            step = np.empty_like(gathered)
            for g, units in unit_groups(self._lower[li - 1]):
                step[units] = times(gathered[units], self._operators[g].sigma_pinv)
            total -= np.einsum("pmc,pmc->m", step, gathered)
            r = step
        for g, units in unit_groups(self._lower[0]):
            total += np.einsum("umc,umc->m", times(r[units], self._operators[g].covariance),
                               r[units])
        return np.maximum(total, 0.0)

    def attach_parents(self, ids: Any, pairs: Sequence[tuple[np.ndarray, np.ndarray]]) -> None:
        """For a tree solved under a top (``above``): each top unit's parent, ``ids`` into
        ``pairs`` of the parent's ``Σ⁺`` and its estimate's covariance, so that the covariances
        here are computed (the top level's is ``C − C Σ⁺ C + C Σ⁺ Cov(B_p) Σ⁺ C``).

        Examples
        --------
        Hay et al.'s leaves solved under their root (estimate 29/3, variance 2/3):

        >>> one = np.ones((1, 1))
        >>> whole = tree_gls([[-1], [0, 0]], [[(one, np.array([[10.0]]), one)],
        ...                  [(one, np.array([[4.0], [5.0]]), np.ones((2, 1)))]], cells=1)
        >>> step = np.array([[1 / 3], [1 / 3]])          # Σ⁺ (B − S) = (29/3 − 9) / 2
        >>> leaves = tree_gls([[-1, -1]], [[(one, np.array([[4.0], [5.0]]), np.ones((2, 1)))]],
        ...                   cells=1, above=step)
        >>> leaves.attach_parents([0, 0], [(np.array([[0.5]]), whole.covariance(0, 0))])
        >>> [round(float(leaves.covariance(0, u)[0, 0]), 4) for u in (0, 1)]
        [0.6667, 0.6667]
        """
        if self._ids:
            raise PostprocError("attach the parents before any covariance is asked for")
        self._given_parents = (np.asarray(ids, dtype=np.int64).ravel(), list(pairs))

    def pairs_for_children(self, level: int) -> tuple[np.ndarray, list[tuple[np.ndarray,
                                                                            np.ndarray]]]:
        """What the children of ``level``'s units need for their covariances when they are
        solved apart (:meth:`attach_parents` takes it): each unit's id into distinct pairs of
        its children's sum's ``Σ⁺`` and its estimate's covariance.

        Examples
        --------
        Hay et al.'s root (children's sum of variance 2, estimate of variance 2/3):

        >>> one = np.ones((1, 1))
        >>> fit = tree_gls([[-1], [0, 0]], [[(one, np.array([[10.0]]), one)],
        ...                 [(one, np.array([[4.0], [5.0]]), np.ones((2, 1)))]], cells=1)
        >>> ids, pairs = fit.pairs_for_children(0)
        >>> ids.tolist(), [(float(s[0, 0]), round(float(v[0, 0]), 4)) for s, v in pairs]
        ([0], [(0.5, 0.6667)])
        """
        keys = np.stack([self._lower[level], self.covariance_ids(level)], axis=1)
        distinct, inverse = np.unique(keys, axis=0, return_inverse=True)
        return inverse.ravel(), [(self._operators[op].sigma_pinv, self._covariances[c])
                                 for op, c in distinct.tolist()]

    def step_precisions(self, level: int) -> np.ndarray:
        """Each unit of ``level``'s :func:`step_precision` (units × k × k): what its children
        in a part solved apart need for their covariances (``M = Σ⁺ V Σ⁺ − Σ⁺``), once per
        distinct (operator, covariance) pair.

        Examples
        --------
        Hay et al.'s root (children's sum of variance 2, estimate of variance 2/3):

        >>> one = np.ones((1, 1))
        >>> fit = tree_gls([[-1], [0, 0]], [[(one, np.array([[10.0]]), one)],
        ...                 [(one, np.array([[4.0], [5.0]]), np.ones((2, 1)))]], cells=1)
        >>> fit.step_precisions(0).round(4).tolist()
        [[[-0.3333]]]
        """
        ids, pairs = self.pairs_for_children(level)
        return np.stack([step_precision(s, v) for s, v in pairs])[ids]

    def _next_level(self) -> None:
        li = len(self._ids)
        if li == 0 and self._above and self._given_parents is not None:
            ids, pairs = self._given_parents
            keys = np.stack([self._lower[0], ids], axis=1)
            distinct, inverse = np.unique(keys, axis=0, return_inverse=True)
            for own, parent in distinct.tolist():
                self._covariances.append(_conditioned_covariance(
                    self._operators[own].covariance, *pairs[parent]))
            self._ids.append(inverse.ravel().astype(np.int64))
            return
        if li == 0:
            if self._above:
                raise PostprocError("the covariances of a part solved under a top are not "
                                    "computed (its top level's covariance needs its parents': "
                                    "attach_parents)")
            distinct, inverse = np.unique(self._lower[0], return_inverse=True)
            self._covariances.extend(self._operators[int(i)].covariance for i in distinct)
            self._ids.append(inverse.ravel().astype(np.int64))
            return
        p = self._parents[li]
        keys = np.stack([self._lower[li], self._lower[li - 1][p], self._ids[li - 1][p]], axis=1)
        distinct, inverse = np.unique(keys, axis=0, return_inverse=True)
        start = len(self._covariances)
        for own, parent_op, parent_cov in distinct.tolist():
            self._covariances.append(_conditioned_covariance(
                self._operators[own].covariance, self._operators[parent_op].sigma_pinv,
                self._covariances[parent_cov]))
        self._ids.append(start + inverse.ravel().astype(np.int64))


def tree_gls(parents: Sequence[Any], terms: Sequence[Sequence[Term]], cells: int,
             equalities: Sequence[Equalities | None] | None = None, *,
             names: Sequence[Sequence[str]] | None = None, below: "Below | None" = None,
             above: np.ndarray | None = None, downward: bool = True) -> TreeGLS:
    """The BLUE of every unit's histogram under consistency and equalities, in two passes.

    Parameters
    ----------
    parents : sequence of int arrays
        For each level (root first), each unit's parent on the level above; the root level's
        entry is ``[-1]``.
    terms : sequence of sequences of (Q, values, weights)
        For each level, its measured queries: ``Q`` (answers × cells), ``values`` and
        ``weights`` (inverse variances; 0 where an answer was not measured), both
        (units × answers). A level may have none. ``values`` may be (units × k × answers) for
        ``k`` problems that share everything but their values (solved with one set of
        matrices; the means are then units × k × cells).
    cells : int
    equalities : sequence of Equalities or None, optional
        Per level, the units' equalities (invariant totals, zero cells); with ``k`` problems,
        each problem holds the same values.
    names : sequence of sequences of str, optional
        Per level, the units' names (for messages); default their indices.
    below : Below, optional
        The children's sums and their covariances for the bottom level's units, when the tree
        is the top of a larger one cut into parts; the result's ``below_steps`` are then what
        each part's downward pass needs (its ``above``).
    above : float array, optional
        For a tree that is a part under a top solved before it: each top-level unit's step
        ``Σ_p⁺ (B_p − S_p)`` from its parent (the top's ``below_steps``, its rows), units × cells
        or units × k × cells. The top level may then hold any number of units (a forest).
    downward : bool
        False: the upward pass only (a part's first pass); ``means`` are then the subtree
        estimates.

    Returns
    -------
    TreeGLS

    Raises
    ------
    PostprocError
        Mismatched shapes; weights negative or not finite; a unit whose measurements do not
        determine its histogram (naming it and the cells left free); equalities that contradict
        each other or the children's (naming the unit).

    Examples
    --------
    Hay et al.'s example: a root counted 10 and two leaves counted 4 and 5, unit variances; then the
    same with the root's total held at 9 (an invariant):

    >>> one = np.ones((1, 1))
    >>> terms = [[(one, np.array([[10.0]]), one)],
    ...          [(one, np.array([[4.0], [5.0]]), np.ones((2, 1)))]]
    >>> fit = tree_gls([[-1], [0, 0]], terms, cells=1)
    >>> [m.ravel().round(4).tolist() for m in fit.means], float(fit.covariance(0, 0)[0, 0])
    ([[9.6667], [4.3333, 5.3333]], 0.6666666666666666)
    >>> held = tree_gls([[-1], [0, 0]], terms, cells=1,
    ...                 equalities=[Equalities(one, np.array([[9.0]])), None])
    >>> [m.ravel().round(4).tolist() for m in held.means], float(held.covariance(1, 0)[0, 0])
    ([[9.0], [4.0, 5.0]], 0.5)
    """
    parents, equalities = _checked_tree(parents, terms, cells, equalities, below, above)

    def unit_name(li: int, u: int) -> str:
        return f"level {li} unit {names[li][u] if names is not None else u}"

    batch = {np.ndim(values) for level_terms in terms for _, values, _ in level_terms}
    if len(batch) > 1:
        raise PostprocError("every query's values must be units × answers, or all of them "
                            "units × k × answers")
    batched = batch == {3}

    operators, lower, means, child_sums = _upward(parents, terms, cells, equalities, below,
                                                  unit_name)
    estimates, steps = (_downward(parents, means, child_sums, lower, operators, below, above)
                        if downward else (means, None))
    if not batched:
        estimates, means = [e[:, 0, :] for e in estimates], [m[:, 0, :] for m in means]
        child_sums = [c if c is None else c[:, 0, :] for c in child_sums]
        steps = steps[:, 0, :] if steps is not None else None
    return TreeGLS(estimates, means, parents, lower, operators, below_steps=steps,
                   _above=above is not None, child_sums=child_sums)


def _downward(parents: list[np.ndarray], means: list[np.ndarray], child_sums: list[Any],
              lower: list[np.ndarray], operators: list[_Operator], below: "Below | None",
              above: np.ndarray | None) -> tuple[list[np.ndarray], np.ndarray | None]:
    """The downward pass: every unit's estimate ``B`` (units × k × cells) from its subtree
    estimate and its parent's step, and, given ``below``, the bottom units' steps."""
    depth = len(parents)
    estimates: list[np.ndarray] = [None] * depth     # type: ignore[list-item]
    estimates[0] = means[0].copy()
    if above is not None:
        _add_steps(estimates[0], np.asarray(above, dtype=np.float64), lower[0], operators)
    for li in range(1, depth + (below is not None)):
        step = _steps(estimates[li - 1], child_sums[li - 1], lower[li - 1], operators)
        if li == depth:
            return estimates, step
        estimates[li] = means[li].copy()
        _add_steps(estimates[li], step[parents[li]], lower[li], operators)
    return estimates, None


def _upward(parents: list[np.ndarray], terms: Sequence[Sequence[Term]], cells: int,
            equalities: list[Equalities | None], below: "Below | None", unit_name
            ) -> tuple[list[_Operator], list[np.ndarray], list[np.ndarray], list[Any]]:
    """The upward pass: every unit's operator id and subtree estimate ``L`` (units × k × cells),
    and the sum of its children's (None at the bottom level, unless given ``below``); the
    operators computed once per distinct signature."""
    depth, sizes = len(parents), [p.size for p in parents]
    operators: list[_Operator] = []
    lower: list[np.ndarray] = [None] * depth        # type: ignore[list-item]
    means: list[np.ndarray] = [None] * depth        # type: ignore[list-item]
    child_sums: list[np.ndarray | None] = [None] * depth
    # the batch (k) of the measured levels: a level measured by nothing (its units' budget
    # spent by their parents: only children) has no information in every batch
    batches = {np.shape(v)[1] for level_terms in terms for _, v, _ in level_terms
               if np.ndim(v) == 3}
    for li in range(depth - 1, -1, -1):
        own_ids, own_info, b = level_information(terms[li], sizes[li], cells, li)
        if not terms[li] and len(batches) == 1:
            b = np.zeros((sizes[li], next(iter(batches)), cells))
        b = b if b.ndim == 3 else b[:, None, :]
        eq = equalities[li]
        if li + 1 < depth:
            child_parent = parents[li + 1]
            aggregate = sp.csr_matrix((np.ones(child_parent.size),
                                       (child_parent, np.arange(child_parent.size))),
                                      shape=(sizes[li], child_parent.size))
            below_means = means[li + 1]
            child_sums[li] = np.asarray(aggregate @ below_means.reshape(
                below_means.shape[0], -1)).reshape(sizes[li], *below_means.shape[1:])
            children = _Children.of(child_parent, lower[li + 1], sizes[li], operators)
        elif below is not None:
            sums = np.asarray(below.sums, dtype=np.float64)
            child_sums[li] = sums if sums.ndim == 3 else sums[:, None, :]
            children = _Children.given(below)
        else:
            children = _Children.none(sizes[li])
        keys = np.stack([own_ids, _pattern_ids(eq, sizes[li]), children.ids], axis=1)
        distinct, first, inverse = np.unique(keys, axis=0, return_index=True,
                                             return_inverse=True)
        start = len(operators)
        units = first.tolist()
        operators.extend(_operators(
            [own_info[own] for own in distinct[:, 0].tolist()],
            [eq.rows(u)[0] if eq is not None else np.zeros((0, cells)) for u in units],
            [children.covariance(sig) for sig in distinct[:, 2].tolist()],
            [unit_name(li, u) for u in units]))
        lower[li] = start + inverse.ravel().astype(np.int64)
        means[li] = _level_means(li, lower[li], operators, b, eq, child_sums[li], cells,
                                 unit_name)
    return operators, lower, means, child_sums


def _steps(estimate: np.ndarray, child_sum: np.ndarray, ids: np.ndarray,
           operators: list[_Operator]) -> np.ndarray:
    """For every unit, ``Σ⁺ (B − S)``: what its children's conditional means add, times
    their covariances."""
    gap = estimate - child_sum
    out = np.empty_like(gap)
    for g, rows in unit_groups(ids):
        out[rows] = times(gap[rows], operators[g].sigma_pinv)
    return out


def _add_steps(estimate: np.ndarray, step: np.ndarray, ids: np.ndarray,
               operators: list[_Operator]) -> None:
    """``B = L + C · step`` for every unit, in place (the downward pass)."""
    step = step if step.ndim == 3 else step[:, None, :]
    for g, rows in unit_groups(ids):
        estimate[rows] += times(step[rows], operators[g].covariance)


@dataclass(frozen=True, eq=False)
class Below:
    """What the levels under a tree's bottom level tell it (a tree cut into parts): for every
    bottom unit, the sum of its children's subtree estimates ``S`` (units × cells, or
    units × k × cells) and which covariance ``Σ`` that sum has (``ids`` into
    ``covariances``).

    Examples
    --------
    >>> Below(np.zeros((2, 3)), np.array([0, 0]), [np.eye(3)]).ids.tolist()
    [0, 0]
    """

    sums: np.ndarray
    ids: np.ndarray
    covariances: Sequence[np.ndarray]

    def __post_init__(self):
        object.__setattr__(self, "ids", np.asarray(self.ids, dtype=np.int64).ravel())

    @classmethod
    def of_part(cls, fit: "TreeGLS", parents: Any, units: int) -> "Below":
        """What a part's top level gives the ``units`` units above it: ``parents`` maps the
        part's top units to them (0 … units − 1, every one with a child).

        Examples
        --------
        Two leaves of one cell measured 3 and 4 (variance 1) under one unit:

        >>> one = np.ones((2, 1))
        >>> part = tree_gls([[-1, -1]], [[(np.ones((1, 1)), np.array([[3.0], [4.0]]), one)]], 1)
        >>> below = Below.of_part(part, [0, 0], 1)
        >>> below.sums.tolist(), [c.tolist() for c in below.covariances]
        ([[7.0]], [[[2.0]]])
        """
        parents = np.asarray(parents, dtype=np.int64).ravel()
        means = fit.subtree[0]
        aggregate = sp.csr_matrix((np.ones(parents.size), (parents, np.arange(parents.size))),
                                  shape=(units, parents.size))
        sums = np.asarray(aggregate @ means.reshape(means.shape[0], -1)).reshape(
            units, *means.shape[1:])
        children = _Children.of(parents, fit.subtree_ids(0), units, fit._operators)
        distinct, inverse = np.unique(children.ids, return_inverse=True)
        return cls(sums, inverse.ravel(), [children.covariance(int(i)) for i in distinct])

    @classmethod
    def join(cls, pieces: Sequence["Below"]) -> "Below":
        """The pieces of consecutive units as one, equal covariances shared.

        Examples
        --------
        >>> a = Below(np.zeros((1, 1)), [0], [np.eye(1)])
        >>> b = Below(np.ones((2, 1)), [1, 0], [np.eye(1) * 2, np.eye(1)])
        >>> joined = Below.join([a, b])
        >>> joined.ids.tolist(), len(joined.covariances)     # b's second covariance is a's
        ([0, 0, 1], 2)
        """
        shared = SharedCovariances()
        ids = [shared.ids_of(piece.covariances)[piece.ids] for piece in pieces]
        return cls(np.concatenate([np.asarray(p.sums) for p in pieces]),
                   np.concatenate(ids), shared.items)


def _checked_tree(parents: Sequence[Any], terms: Sequence[Sequence[Term]], cells: int,
                  equalities: Sequence[Equalities | None] | None,
                  below: "Below | None" = None, above: np.ndarray | None = None
                  ) -> tuple[list[np.ndarray], list[Equalities | None]]:
    """The parents as int arrays and the equalities per level, checked against each other
    and against what is given from below and above."""
    parents = [np.asarray(p, dtype=np.int64).ravel() for p in parents]
    depth = len(parents)
    if depth == 0 or len(terms) != depth:
        raise PostprocError(f"{depth} parent arrays for {len(terms)} levels of terms")
    if parents[0].size < 1:
        raise PostprocError("the top level has no unit")
    sizes = [p.size for p in parents]
    if below is not None:
        shape = np.shape(below.sums)
        if (shape[0] != sizes[-1] or shape[-1] != cells or below.ids.size != sizes[-1]
                or (below.ids.size and (below.ids.min() < 0
                                        or below.ids.max() >= len(below.covariances)))):
            raise PostprocError(f"below: sums of shape {shape} and {below.ids.size} ids into "
                                f"{len(below.covariances)} covariances for {sizes[-1]} bottom "
                                f"units of {cells} cells")
    if above is not None and (np.shape(above)[0] != sizes[0] or np.shape(above)[-1] != cells):
        raise PostprocError(f"above: steps of shape {np.shape(above)} for {sizes[0]} top units "
                            f"of {cells} cells")
    for li in range(1, depth):
        p = parents[li]
        if p.size and (p.min() < 0 or p.max() >= sizes[li - 1]):
            raise PostprocError(f"level {li}: parent indices must be in 0..{sizes[li - 1] - 1}")
        if np.setdiff1d(np.arange(sizes[li - 1]), p).size:
            raise PostprocError(f"level {li - 1}: every unit above the bottom level needs a child")
    equalities = list(equalities) if equalities is not None else [None] * depth
    if len(equalities) != depth:
        raise PostprocError(f"{len(equalities)} levels of equalities for {depth} levels")
    for li, eq in enumerate(equalities):
        if eq is not None and (eq.values.shape[0] != sizes[li] or eq.matrix.shape[1] != cells
                               or (eq.zero is not None and eq.zero.shape != (sizes[li], cells))):
            raise PostprocError(f"level {li}: equalities for {eq.values.shape[0]} units of "
                                f"{eq.matrix.shape[1]} cells; the level has {sizes[li]} units of "
                                f"{cells}")
    return parents, equalities


