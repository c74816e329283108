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

__all__ = ["Equalities", "TreeGLS", "tree_gls", "Term", "level_information", "unit_groups"]

#: One measured query of one level: ``(Q, values, weights)`` with ``Q`` (answers × cells),
#: ``values`` and ``weights`` (units × answers); weights are inverse variances.
Term = tuple[Any, np.ndarray, np.ndarray]

#: Relative size below which an eigenvalue (of a covariance) or a singular value (of the
#: equality rows) counts as zero.
RANK_TOLERANCE = 1e-10


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
class _Operator:
    """What one distinct signature's units share: the subtree estimate's covariance ``C``, the
    maps from information and right-hand sides to the estimate, and the children's sum's
    pseudo-inverse covariance (for the downward pass)."""

    covariance: np.ndarray                  # C (cells × cells)
    of_rhs: np.ndarray                      # (I − C A) F⁺ (cells × rows of F)
    sigma_pinv: np.ndarray | None           # Σ⁺ of the children's sum (None at the bottom)
    null_sigma: np.ndarray | None           # U₀: the directions where Σ is 0 (cells × k)


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
        q = matrix.toarray() if sp.issparse(matrix) else np.asarray(matrix, dtype=np.float64)
        ids = self.covariance_ids(level)
        distinct, inverse = np.unique(ids, return_inverse=True)
        per = np.stack([np.einsum("ij,jk,ik->i", q, self._covariances[int(i)], q)
                        for i in distinct])
        return np.maximum(per[inverse.ravel()], 0.0)

    def _next_level(self) -> None:
        li = len(self._ids)
        if li == 0:
            self._covariances.append(self._operators[int(self._lower[0][0])].covariance)
            self._ids.append(np.zeros(1, dtype=np.int64))
            return
        p = self._parents[li]
        keys = np.stack([self._lower[li], self._lower[li - 1][p], self._ids[li - 1][p]], axis=1)
        distinct, inverse = np.unique(keys, axis=0, return_inverse=True)
        start = len(self._covariances)
        for own, parent_op, parent_cov in distinct.tolist():
            c = self._operators[own].covariance
            gain = c @ self._operators[parent_op].sigma_pinv
            cov = c - gain @ c + gain @ self._covariances[parent_cov] @ gain.T
            self._covariances.append((cov + cov.T) / 2)
        self._ids.append(start + inverse.ravel().astype(np.int64))


def _spectrum(matrix: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Eigenvalues and eigenvectors of a positive semidefinite matrix, and which eigenvalues
    count as positive (above :data:`RANK_TOLERANCE` of the largest)."""
    values, vectors = np.linalg.eigh((matrix + matrix.T) / 2)
    top = max(float(values.max(initial=0.0)), 0.0)
    keep = values > RANK_TOLERANCE * top if top > 0 else np.zeros(values.size, bool)
    return values, vectors, keep


def _pinv_psd(matrix: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Pseudo-inverse of a positive semidefinite matrix and a basis of its null space."""
    values, vectors, keep = _spectrum(matrix)
    pinv = (vectors[:, keep] / values[keep]) @ vectors[:, keep].T
    return (pinv + pinv.T) / 2, vectors[:, ~keep]


def _operator(info: np.ndarray, rows: np.ndarray, sigma: np.ndarray | None, where: str
              ) -> _Operator:
    """The subtree estimate's operators for information ``info``, equality rows ``rows`` and the
    children's sum's covariance ``sigma`` (None at the bottom level)."""
    n = info.shape[0]
    sigma_pinv = null_sigma = None
    if sigma is not None:
        sigma_pinv, null_sigma = _pinv_psd(sigma)
        info = info + sigma_pinv
        rows = np.concatenate([rows, null_sigma.T], axis=0)
    if rows.shape[0]:
        w, s, vt = np.linalg.svd(rows, full_matrices=True)
        rank = int(np.sum(s > RANK_TOLERANCE * s.max())) if s.size else 0
        rows_pinv = (vt[:rank].T / s[:rank]) @ w[:, :rank].T
        basis = vt[rank:].T
    else:
        rows_pinv, basis = np.zeros((n, 0)), np.eye(n)
    reduced = basis.T @ info @ basis
    values, vectors = np.linalg.eigh((reduced + reduced.T) / 2)
    scale = max(float(np.abs(values).max(initial=0.0)), 1e-300)
    if values.size and values.min() <= RANK_TOLERANCE * scale:
        loose = basis @ vectors[:, values <= RANK_TOLERANCE * scale]
        cells = np.flatnonzero(np.abs(loose).max(axis=1) > 1e-6)
        raise PostprocError(f"{where}: its measurements do not determine its histogram "
                            f"(cells {cells[:12].tolist()}{' …' if cells.size > 12 else ''} "
                            f"are neither determined by the measured queries nor fixed by an "
                            f"equality); measure 'detailed' there or queries that together "
                            f"determine every cell")
    inner = (vectors / values) @ vectors.T
    cov = basis @ inner @ basis.T
    cov = (cov + cov.T) / 2
    of_rhs = rows_pinv - cov @ (info @ rows_pinv)
    return _Operator(cov, of_rhs, sigma_pinv, null_sigma)


def tree_gls(parents: Sequence[Any], terms: Sequence[Sequence[Term]], cells: int,
             equalities: Sequence[Equalities | None] | None = None, *,
             names: Sequence[Sequence[str]] | None = None) -> TreeGLS:
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
    parents, equalities = _checked_tree(parents, terms, cells, equalities)
    depth, sizes = len(parents), [p.size for p in parents]

    def unit_name(li: int, u: int) -> str:
        return f"level {li} unit {names[li][u] if names is not None else u}"

    batch = {np.ndim(values) for level_terms in terms for _, values, _ in level_terms}
    if len(batch) > 1:
        raise PostprocError("every query's values must be units × answers, or all of them "
                            "units × k × answers")
    batched = batch == {3}

    operators: list[_Operator] = []
    lower: list[np.ndarray] = [None] * depth        # type: ignore[list-item]
    means: list[np.ndarray] = [None] * depth        # type: ignore[list-item]
    child_sums: list[np.ndarray | None] = [None] * depth
    for li in range(depth - 1, -1, -1):
        own_ids, own_info, b = level_information(terms[li], sizes[li], cells, li)
        b = b if b.ndim == 3 else b[:, None, :]
        eq = equalities[li]
        if li + 1 < depth:
            child_parent = parents[li + 1]
            aggregate = sp.csr_matrix((np.ones(child_parent.size),
                                       (child_parent, np.arange(child_parent.size))),
                                      shape=(sizes[li], child_parent.size))
            below = means[li + 1]
            child_sums[li] = np.asarray(aggregate @ below.reshape(below.shape[0], -1)
                                        ).reshape(sizes[li], *below.shape[1:])
            children = _children_signatures(child_parent, lower[li + 1], sizes[li])
        else:
            children = [()] * sizes[li]
        index: dict[Any, int] = {}
        ids = np.empty(sizes[li], dtype=np.int64)
        for u in range(sizes[li]):
            key = (int(own_ids[u]), eq.pattern(u) if eq is not None else None, children[u])
            if key not in index:
                rows = eq.rows(u)[0] if eq is not None else np.zeros((0, cells))
                sigma = None
                if children[u]:
                    sigma = np.sum([operators[c].covariance * k for c, k in children[u]], axis=0)
                index[key] = len(operators)
                operators.append(_operator(own_info[own_ids[u]], rows, sigma, unit_name(li, u)))
            ids[u] = index[key]
        lower[li] = ids
        means[li] = _level_means(li, ids, operators, b, eq, child_sums[li], cells, unit_name)
    estimates: list[np.ndarray] = [None] * depth     # type: ignore[list-item]
    estimates[0] = means[0]
    for li in range(1, depth):
        p = parents[li]
        gap = estimates[li - 1] - child_sums[li - 1]
        direction = np.empty_like(gap)
        for g, rows in unit_groups(lower[li - 1]):
            direction[rows] = gap[rows] @ operators[g].sigma_pinv
        estimates[li] = means[li].copy()
        step = direction[p]
        for g, rows in unit_groups(lower[li]):
            estimates[li][rows] += step[rows] @ operators[g].covariance
    if not batched:
        estimates, means = [e[:, 0, :] for e in estimates], [m[:, 0, :] for m in means]
    return TreeGLS(estimates, means, parents, lower, operators)


def _checked_tree(parents: Sequence[Any], terms: Sequence[Sequence[Term]], cells: int,
                  equalities: Sequence[Equalities | None] | None
                  ) -> tuple[list[np.ndarray], list[Equalities | None]]:
    """The parents as int arrays and the equalities per level, checked against each other."""
    parents = [np.asarray(p, dtype=np.int64).ravel() for p in parents]
    depth = len(parents)
    if depth == 0 or len(terms) != depth:
        raise PostprocError(f"{depth} parent arrays for {len(terms)} levels of terms")
    if parents[0].size != 1:
        raise PostprocError("the root level must have exactly one unit")
    sizes = [p.size for p in parents]
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


def _children_signatures(child_parent: np.ndarray, child_ids: np.ndarray, n_parents: int
                         ) -> list[tuple[tuple[int, int], ...]]:
    """For every parent, its children's operator ids as sorted (id, multiplicity) pairs."""
    pairs, counts = np.unique(np.stack([child_parent, child_ids]), axis=1, return_counts=True)
    out: list[list] = [[] for _ in range(n_parents)]
    for (parent, c), k in zip(pairs.T.tolist(), counts.tolist()):
        out[parent].append((c, k))
    return [tuple(s) for s in out]


def _level_means(li: int, ids: np.ndarray, operators: list[_Operator], b: np.ndarray,
                 eq: Equalities | None, child_sum: np.ndarray | None, cells: int,
                 unit_name) -> np.ndarray:
    """The subtree estimates ``L`` of one level's units (units × k × cells), a group of units
    per operator."""
    k = b.shape[1]
    out = np.empty((ids.size, k, cells))
    for g, rows in unit_groups(ids):
        op = operators[g]
        info_b = b[rows]
        rhs_parts = []
        if eq is not None:
            active = np.isfinite(eq.values[rows[0]])
            values = eq.values[rows][:, active]
            rhs_parts.append(np.broadcast_to(values[:, None, :], (rows.size, k, values.shape[1])))
            if eq.zero is not None:
                rhs_parts.append(np.zeros((rows.size, k, int(eq.zero[rows[0]].sum()))))
        if op.sigma_pinv is not None:
            s = child_sum[rows]
            info_b = info_b + s @ op.sigma_pinv
            rhs_parts.append(s @ op.null_sigma)
        rhs = (np.concatenate(rhs_parts, axis=2) if rhs_parts
               else np.zeros((rows.size, k, 0)))
        out[rows] = info_b @ op.covariance + rhs @ op.of_rhs.T
        if rhs.shape[2]:
            _check_feasible(li, rows, out[rows], eq, op, child_sum, unit_name)
    return out


def _check_feasible(li: int, rows: np.ndarray, means: np.ndarray, eq: Equalities | None,
                    op: _Operator, child_sum: np.ndarray | None, unit_name) -> None:
    """Raise when a unit's equalities contradict each other or its children's sum."""
    scale = 1.0 + np.abs(means).max(axis=(1, 2))
    bad = np.zeros(rows.size, bool)
    what = "its equalities contradict each other"
    if eq is not None:
        active = np.isfinite(eq.values[rows[0]])
        got = means @ eq.matrix[active].T
        off = np.abs(got - eq.values[rows][:, None, active])
        bad |= off.max(axis=(1, 2), initial=0) > 1e-6 * scale
        if eq.zero is not None:
            zeros = np.abs(means[:, :, eq.zero[rows[0]]])
            bad |= zeros.max(axis=(1, 2), initial=0) > 1e-6 * scale
    if op.null_sigma is not None and op.null_sigma.shape[1]:
        off = np.abs((means - child_sum[rows]) @ op.null_sigma).max(axis=(1, 2)) > 1e-6 * scale
        if off.any() and not bad.any():
            what = "its equalities contradict what its children's equalities fix"
        bad |= off
    if bad.any():
        raise PostprocError(f"{unit_name(li, int(rows[np.argmax(bad)]))}: {what} (e.g. an "
                            f"invariant total that is not the sum of its children's invariant "
                            f"totals); check the published invariants")


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
