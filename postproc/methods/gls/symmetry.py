"""The succinct path: when the last attribute's values are interchangeable, the GLS problem of
``A × R`` cells splits exactly into one problem of ``A`` cells and ``R − 1`` more that share
their matrices (``docs/gls.md``, "The succinct path").

The 2020 redistricting workload measures every query either with all 63 races apart or with
them summed; no query groups some races, no constraint singles one out, and an answer's
variance does not depend on its race. Then the problem is invariant under permutations of the
races, and the orthogonal change of coordinates that takes a unit's histogram ``X`` (``A``
groups of cells × ``R`` values of the last attribute) to

    m = X u₀  (u₀ = 1/√R: the race "mean", A numbers)   and   c = X V  (V: R − 1 orthonormal
    contrasts, each summing to 0: A × (R − 1) numbers)

decouples it. A query that keeps the races apart, ``Q = Q_a ⊗ I_R``, measures ``Q_a m`` and each
``Q_a c_k`` with the same variance (the noise of the R answers of one row of ``Q_a`` is
independent with one variance, and an orthogonal map keeps it so); a query that sums them,
``Q = Q_a ⊗ 1ᵀ``, measures ``√R Q_a m`` and nothing of the contrasts; a row of an equality that
does not single out a race is ``e ⊗ 1ᵀ`` and holds ``√R e·m``; a cell group fixed at 0 fixes
``m_a`` and every ``c_{a,k}``; consistency is linear in each coordinate. So the BLUE is the mean
problem's BLUE and the contrast problems' BLUEs, mapped back, and the covariance of a unit's
estimate is ``F₁ ⊗ I + F₂ ⊗ J`` with ``F₁ = Cov(c_k)`` and ``F₂ = (Cov(m) − Cov(c_k)) / R``.
For the 2020 workload that is two problems of 32 cells instead of one of 2,016.

:func:`find_symmetry` checks every condition exactly and says which one fails; the general path
is used then.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np
import scipy.sparse as sp

from postproc.methods.gls.information import Term, times
from postproc.methods.gls.operators import _answer_variances
from postproc.methods.gls.tree import Equalities, TreeGLS

__all__ = ["Symmetry", "find_symmetry", "SymmetricCovariance"]


@dataclass(frozen=True, eq=False)
class Symmetry:
    """The split of ``groups × size`` cells (the last attribute has ``size`` values).

    Examples
    --------
    >>> sym = Symmetry(2, 3)
    >>> sym.basis[:, 0].round(4).tolist(), sym.basis[:, 1:].sum(axis=0).round(12).tolist()
    ([0.5774, 0.5774, 0.5774], [0.0, 0.0])
    >>> bool(np.allclose(sym.basis.T @ sym.basis, np.eye(3)))
    True
    """

    groups: int
    size: int

    @property
    def basis(self) -> np.ndarray:
        """``[u₀, V]``: an orthonormal basis of R^size, the constant vector first."""
        start = np.eye(self.size)
        start[:, 0] = 1.0
        q, _ = np.linalg.qr(start)
        return q * np.sign(q[0, 0])

    def split_terms(self, terms: Sequence[Term]) -> tuple[list[Term], list[Term]]:
        """One level's terms as the mean problem's and the contrast problems' (batched)."""
        basis, r = self.basis, self.size
        mean, contrast = [], []
        for q, values, weights in terms:
            kind, qa = _kind(q, self.groups, r)
            units = values.shape[0]
            if kind == "summed":
                mean.append((np.sqrt(r) * qa, values, weights))
                continue
            y = np.asarray(values, dtype=np.float64).reshape(units, qa.shape[0], r)
            w = np.broadcast_to(weights, values.shape)[:, ::r]
            coordinates = times(y, basis)               # units × answers of Q_a × R
            mean.append((qa, coordinates[:, :, 0], w))
            contrast.append((qa, np.transpose(coordinates[:, :, 1:], (0, 2, 1)), w))
        return mean, contrast

    def split_equalities(self, eq: Equalities | None, units: int
                         ) -> tuple[Equalities | None, Equalities | None]:
        """One level's equalities as the mean problem's and the contrast problems'."""
        if eq is None:
            return None, None
        rows = eq.matrix.reshape(eq.matrix.shape[0], self.groups, self.size)[:, :, 0]
        zero = None if eq.zero is None else eq.zero.reshape(units, self.groups, self.size)[:, :, 0]
        return (Equalities(np.sqrt(self.size) * rows, eq.values, zero),
                Equalities(np.zeros((0, self.groups)), np.zeros((units, 0)), zero))

    def join(self, mean: np.ndarray, contrast: np.ndarray) -> np.ndarray:
        """Histograms (units × cells) from the mean (units × A) and contrast
        (units × (R − 1) × A) estimates."""
        coordinates = np.concatenate([mean[:, :, None], np.transpose(contrast, (0, 2, 1))],
                                     axis=2)                        # units × A × R
        return times(coordinates, self.basis.T).reshape(mean.shape[0], self.groups * self.size)


def _kind(q: Any, groups: int, size: int) -> tuple[str | None, np.ndarray | None]:
    """``("sliced", Q_a)`` if ``q = Q_a ⊗ I``, ``("summed", Q_a)`` if ``q = Q_a ⊗ 1ᵀ``, else
    ``(None, None)``."""
    q = sp.csr_matrix(q, dtype=np.float64, copy=True)
    if q.shape[1] != groups * size:
        return None, None
    q.eliminate_zeros()
    coo = q.tocoo()
    rows, cols, values = coo.row, coo.col, coo.data
    # each stored entry is matched to a distinct nonzero (i, j) of Q_a and a race r; as many
    # entries as R times Q_a's nonzeros means every (i, j, r) is there: q is Q_a ⊗ (I or 1ᵀ)
    if q.shape[0] % size == 0:
        qa = q[::size, ::size].toarray()
        if (values.size == size * np.count_nonzero(qa)
                and np.array_equal(rows % size, cols % size)
                and np.array_equal(qa[rows // size, cols // size], values)):
            return "sliced", qa
    qa = q[:, ::size].toarray()
    if (values.size == size * np.count_nonzero(qa)
            and np.array_equal(qa[rows, cols // size], values)):
        return "summed", qa
    return None, None


def _equal_along_last(weights: Any, shape: tuple[int, ...], groups: int, size: int) -> bool:
    """Whether a sliced query's weights (an array broadcast to the values' ``shape``, or an
    object that answers ``equal_along_last``, :class:`~postproc.methods.gls.parts.UnitWeights`)
    are equal over the last attribute for every unit and answer group."""
    check = getattr(weights, "equal_along_last", None)
    if callable(check):
        return bool(check(groups, size))
    w = np.broadcast_to(weights, shape).reshape(shape[0], groups, size)
    return bool(np.all(w == w[:, :, :1]))


def find_symmetry(shape: Sequence[int], terms: Sequence[Sequence[Term]],
                  equalities: Sequence[Equalities | None], names: Sequence[str] = ()
                  ) -> tuple[Symmetry | None, str]:
    """The split by the last attribute, if every query, weight and equality allows it, and why
    not otherwise.

    Parameters
    ----------
    shape : sequence of int
        The schema's shape (the last attribute is the one tried).
    terms : per level, sequences of (Q, values, weights)
    equalities : per level, Equalities or None
    names : sequence of str, optional
        The last attribute's name, for the message.

    Returns
    -------
    (Symmetry or None, str)
        The split, or None and the first condition that fails.

    Examples
    --------
    Two groups × three races: a sliced query, a summed one and a total row are symmetric; a
    query that counts the first race alone is not.

    >>> sliced, summed = sp.identity(6), sp.kron(np.eye(2), np.ones((1, 3)))
    >>> ones = np.ones((4, 6))
    >>> level = [(sliced, ones, ones), (summed, ones[:, :2], ones[:, :2])]
    >>> sym, why = find_symmetry((2, 3), [level], [Equalities(np.ones((1, 6)), ones[:, :1])])
    >>> (sym.groups, sym.size), why
    ((2, 3), '')
    >>> find_symmetry((2, 3), [[(sp.csr_matrix(np.eye(6)[:1]), ones[:, :1], ones[:, :1])]],
    ...               [None], ["race"])[1]
    'query 1 of level 0 neither keeps every race apart nor sums them'
    """
    size = int(shape[-1])
    groups = int(np.prod(shape[:-1]))
    what = names[-1] if names else "the last attribute"
    if size < 2:
        return None, f"{what} has one value"
    for li, level_terms in enumerate(terms):
        for i, (q, values, weights) in enumerate(level_terms):
            kind, qa = _kind(q, groups, size)
            if kind is None:
                return None, (f"query {i + 1} of level {li} neither keeps every {what} apart nor "
                              f"sums them")
            if kind == "sliced":
                if not _equal_along_last(weights, np.shape(values), qa.shape[0], size):
                    return None, (f"query {i + 1} of level {li}: the variances of its answers "
                                  f"differ between values of {what}")
    for li, eq in enumerate(equalities):
        if eq is None:
            continue
        rows = eq.matrix.reshape(eq.matrix.shape[0], groups, size)
        if not np.all(rows == rows[:, :, :1]):
            return None, f"an equality of level {li} singles out values of {what}"
        if eq.zero is not None:
            zero = eq.zero.reshape(eq.zero.shape[0], groups, size)
            if not np.all(zero == zero[:, :, :1]):
                return None, f"a unit of level {li} has cells fixed at 0 for some values of {what}"
    return Symmetry(groups, size), ""


@dataclass(eq=False)
class SymmetricCovariance:
    """The covariance of the split estimate: ``F₁ ⊗ I + F₂ ⊗ J`` per unit, from the mean and
    contrast problems' covariances; the ``uncertainty`` of a ``gls`` result.

    Examples
    --------
    A root and two leaves of 1 × 2 cells (one group, two races), the leaves measured cell by
    cell and the root's total: the variance of each leaf's total and of its first cell.

    >>> from postproc.methods.gls.tree import tree_gls
    >>> sym = Symmetry(1, 2)
    >>> terms = [[(np.ones((1, 2)), np.array([[7.0]]), np.array([[4.0]]))],
    ...          [(np.eye(2), np.array([[3.0, 1.0], [0.0, 2.0]]), np.ones((2, 2)))]]
    >>> parts = [sym.split_terms(level) for level in terms]
    >>> fits = [tree_gls([[-1], [0, 0]], [p[i] for p in parts], 1) for i in (0, 1)]
    >>> cov = SymmetricCovariance(sym, *fits)
    >>> cov.variances(1, [[1.0, 1.0], [1.0, 0.0]]).round(4).tolist()
    [[1.0588, 0.7647], [1.0588, 0.7647]]
    """

    symmetry: Symmetry
    mean: TreeGLS
    contrast: TreeGLS
    _pairs: dict = field(default_factory=dict, repr=False)
    _pair_list: list = field(default_factory=list, repr=False)

    def subtree_means(self, level: int) -> np.ndarray:
        """The subtree estimates ``L`` of a level's units (units × cells)."""
        return self.symmetry.join(self.mean.subtree[level], self.contrast.subtree[level])

    def subtree_ids(self, level: int) -> np.ndarray:
        """Each unit's subtree signature (the pair of the two problems' signatures)."""
        out = []
        for pair in zip(self.mean.subtree_ids(level).tolist(),
                        self.contrast.subtree_ids(level).tolist()):
            if pair not in self._pairs:
                self._pairs[pair] = len(self._pair_list)
                self._pair_list.append(pair)
            out.append(self._pairs[pair])
        return np.array(out, dtype=np.int64)

    def pair(self, signature: int) -> tuple[int, int]:
        """The mean and contrast problems' subtree signatures behind a signature."""
        return self._pair_list[signature]

    def subtree_covariance(self, signature: int) -> np.ndarray:
        """The covariance (cells × cells) of the subtree estimate of the units with this
        signature: ``Cov(c) ⊗ (I − J/R) + Cov(m) ⊗ J/R``."""
        m, c = self.pair(signature)
        r = self.symmetry.size
        mean_part = np.full((r, r), 1.0 / r)
        return (np.kron(self.contrast.subtree_covariance(c), np.eye(r) - mean_part)
                + np.kron(self.mean.subtree_covariance(m), mean_part))

    def variances(self, level: int, matrix: Any) -> np.ndarray:
        """The variance of every answer of the query ``matrix`` (answers × cells) for every unit
        of ``level`` (units × answers)."""
        pairs = np.stack([self.mean.covariance_ids(level), self.contrast.covariance_ids(level)],
                         axis=1)
        distinct, inverse = np.unique(pairs, axis=0, return_inverse=True)
        mean = np.stack([self.mean._covariances[m] for m in distinct[:, 0].tolist()])
        contrast = np.stack([self.contrast._covariances[c] for c in distinct[:, 1].tolist()])
        out = _answer_variances([mean, contrast], matrix, self.symmetry.size)
        return out[inverse.ravel()]

    def sum_variances(self, level: int, rows: np.ndarray) -> np.ndarray:
        """The variances of sums over units (:meth:`TreeGLS.sum_variances
        <postproc.methods.gls.tree.TreeGLS.sum_variances>`; ``rows``: units × m × cells): the
        mean problem's and the contrast problems' (independent, one set of operators), summed.

        Examples
        --------
        >>> from postproc.methods.gls.tree import tree_gls
        >>> sym = Symmetry(1, 2)
        >>> terms = [[(np.ones((1, 2)), np.array([[7.0]]), np.array([[4.0]]))],
        ...          [(np.eye(2), np.array([[3.0, 1.0], [0.0, 2.0]]), np.ones((2, 2)))]]
        >>> parts = [sym.split_terms(level) for level in terms]
        >>> cov = SymmetricCovariance(sym, *[tree_gls([[-1], [0, 0]], [p[i] for p in parts], 1)
        ...                                  for i in (0, 1)])
        >>> both = np.ones((2, 1, 2))                       # the two leaves' totals together
        >>> root = cov.variances(0, [[1.0, 1.0]])[0, 0]       # are the root's total
        >>> bool(np.isclose(cov.sum_variances(1, both)[0], root))
        True
        """
        a, r = self.symmetry.groups, self.symmetry.size
        rows = np.asarray(rows, dtype=np.float64)
        units, m = rows.shape[:2]
        coordinates = times(rows.reshape(units, m, a, r), self.symmetry.basis)
        out = self.mean.sum_variances(level, coordinates[..., 0])
        batch = max(1, int(2**25 // max(1, units * (r - 1) * a)))      # ≤ 256 MB at a time
        for lo in range(0, m, batch):
            chunk = coordinates[:, lo:lo + batch, :, 1:]                 # units × b × A × (R−1)
            b = chunk.shape[1]
            contrast = np.transpose(chunk, (0, 1, 3, 2)).reshape(units, b * (r - 1), a)
            out[lo:lo + b] += self.contrast.sum_variances(level, contrast).reshape(
                b, r - 1).sum(axis=1)
        return out

    def covariance_ids(self, level: int) -> np.ndarray:
        """An id shared by the units whose estimates have the same covariance."""
        pairs = np.stack([self.mean.covariance_ids(level), self.contrast.covariance_ids(level)],
                         axis=1)
        return np.unique(pairs, axis=0, return_inverse=True)[1].ravel()
