"""Exact tree GLS (``postproc.methods.gls.tree.tree_gls``) against a dense referee.

The referee, :func:`_dense_gls`, stacks every unit's histogram of every level into one vector,
builds the whole weighted least-squares objective ``½ xᵀHx − gᵀx`` and every equality constraint
``Cx = d`` (parents are the sums of their children, each unit's equalities, its zero cells) as
dense matrices, and solves the problem by the null-space method: a particular solution ``x0`` of
``Cx = d``, an orthonormal basis ``Z`` of the null space of ``C``, and

    x = x0 + Z (ZᵀHZ)⁻¹ Zᵀ (g − H x0),        Cov(x) = Z (ZᵀHZ)⁻¹ Zᵀ.

It is checked where the answer is known independently: Hay et al.'s three-node example and two
hand-solved variants with an equality and a zero cell; the closed-form ``tree_least_squares``
(means, no equalities) and a leaves-only parametrisation (covariances, no equalities) on random
trees. Then ``tree_gls`` must agree with it on random small hierarchies (:func:`_random_case`) —
every unit's mean and covariance — be consistent, hold every equality and zero cell, and refuse
an undetermined bottom unit and bad weights with a :class:`PostprocError`.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.linalg import null_space

from postproc.errors import PostprocError
from postproc.methods.baselines.least_squares import tree_least_squares

SEEDS = range(20)
RTOL = 1e-8


def _dense(q: Any) -> np.ndarray:
    return np.asarray(q.todense() if sp.issparse(q) else q, dtype=np.float64)


def _atol(reference: np.ndarray) -> float:
    """1e-8 of the reference's magnitude (at least 1e-8)."""
    return RTOL * max(1.0, float(np.abs(reference).max(initial=0.0)))


# -- the referee ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class _Layout:
    """Where unit ``u`` of level ``l`` sits in the stacked vector of all histograms."""

    sizes: list[int]
    cells: int

    @property
    def length(self) -> int:
        return sum(self.sizes) * self.cells

    def block(self, level: int, unit: int) -> slice:
        start = (sum(self.sizes[:level]) + unit) * self.cells
        return slice(start, start + self.cells)

    def level(self, x: np.ndarray, level: int) -> np.ndarray:
        start = sum(self.sizes[:level]) * self.cells
        return x[start:start + self.sizes[level] * self.cells].reshape(self.sizes[level], -1)


def _objective(layout: _Layout, terms, cells: int) -> tuple[np.ndarray, np.ndarray]:
    """``H = Σ QᵀWQ`` and ``g = Σ QᵀWy``, block-diagonal over units, in the stacked vector."""
    h = np.zeros((layout.length, layout.length))
    g = np.zeros(layout.length)
    for level, level_terms in enumerate(terms):
        for q, values, weights in level_terms:
            q = _dense(q)
            values = np.asarray(values, dtype=np.float64)
            weights = np.broadcast_to(np.asarray(weights, dtype=np.float64), values.shape)
            for unit in range(layout.sizes[level]):
                s = layout.block(level, unit)
                h[s, s] += q.T @ (weights[unit][:, None] * q)
                g[s] += q.T @ (weights[unit] * values[unit])
    return h, g


def _constraints(layout: _Layout, parents, equalities, sums=None
                 ) -> tuple[np.ndarray, np.ndarray]:
    """Every equality constraint as rows of ``C x = d``; ``sums``: rows across units, as
    ``(level, units, coefficients over the cells, value)``."""
    rows, rhs = [], []

    def row(entries: list[tuple[slice, np.ndarray]], value: float) -> None:
        r = np.zeros(layout.length)
        for s, coefficients in entries:
            r[s] += coefficients
        rows.append(r)
        rhs.append(value)

    eye = np.eye(layout.cells)
    for level in range(1, len(parents)):                    # parent − Σ children = 0
        for parent in range(layout.sizes[level - 1]):
            children = np.flatnonzero(np.asarray(parents[level]) == parent)
            for k in range(layout.cells):
                row([(layout.block(level - 1, parent), eye[k])]
                    + [(layout.block(level, c), -eye[k]) for c in children], 0.0)
    for level, eq in enumerate(equalities or []):
        if eq is None:
            continue
        matrix = _dense(eq.matrix)
        values = None if eq.values is None else np.asarray(eq.values, dtype=np.float64)
        zero = None if eq.zero is None else np.asarray(eq.zero, dtype=bool)
        for unit in range(layout.sizes[level]):
            s = layout.block(level, unit)
            if values is not None:
                for r in np.flatnonzero(np.isfinite(values[unit])):
                    row([(s, matrix[r])], float(values[unit, r]))
            if zero is not None:
                for k in np.flatnonzero(zero[unit]):
                    row([(s, eye[k])], 0.0)
    for level, units, coefficients, value in sums or []:
        row([(layout.block(level, u), np.asarray(coefficients, float)) for u in units],
            float(value))
    if not rows:
        return np.zeros((0, layout.length)), np.zeros(0)
    return np.array(rows), np.array(rhs)


def _dense_gls(parents, terms, cells: int, equalities=None, sums=None
               ) -> tuple[list[np.ndarray], Callable[[int, int], np.ndarray]]:
    """The GLS estimate of every unit, solved densely: ``(means per level, covariance(l, u))``.

    Raises ``np.linalg.LinAlgError`` if the constraints are infeasible or the problem does not
    determine every histogram (``ZᵀHZ`` singular).
    """
    layout = _Layout([len(p) for p in parents], cells)
    h, g = _objective(layout, terms, cells)
    c, d = _constraints(layout, parents, equalities, sums)
    if c.shape[0]:
        x0 = np.linalg.lstsq(c, d, rcond=None)[0]
        if np.abs(c @ x0 - d).max() > 1e-9 * max(1.0, np.abs(d).max()):
            raise np.linalg.LinAlgError("the equality constraints are infeasible")
        z = null_space(c)
    else:
        x0, z = np.zeros(layout.length), np.eye(layout.length)
    reduced = z.T @ h @ z
    eigenvalues = np.linalg.eigvalsh(reduced) if reduced.size else np.ones(1)
    if eigenvalues.min() <= 1e-10 * max(1.0, eigenvalues.max()):
        raise np.linalg.LinAlgError("the measurements do not determine every histogram")
    covariance = z @ np.linalg.inv(reduced) @ z.T
    covariance = (covariance + covariance.T) / 2
    x = x0 + covariance @ (g - h @ x0)
    means = [layout.level(x, level) for level in range(len(parents))]

    def unit_covariance(level: int, unit: int, other: int | None = None) -> np.ndarray:
        """A unit's covariance, or (``other``) its covariance with another unit of the level."""
        s = layout.block(level, unit)
        return covariance[s, layout.block(level, unit if other is None else other)]

    return means, unit_covariance


# -- the referee checked where the answer is known ------------------------------------------------
def _hay_three_nodes():
    """Hay et al.'s example: root counted 10, leaves 4 and 5, one cell, all variances 1."""
    one = np.ones((1, 1))
    parents = [np.array([-1]), np.array([0, 0])]
    terms = [[(one, np.array([[10.0]]), one)], [(one, np.array([[4.0], [5.0]]), np.ones((2, 1)))]]
    return parents, terms


def test_referee_reproduces_hay_three_node_example():
    """Means 29/3, 13/3, 16/3 (9.6667, 4.3333, 5.3333), and covariances from the leaves'
    information [[2, 1], [1, 2]]: inverse (1/3)[[2, −1], [−1, 2]], so every unit's variance is
    2/3 (the root's is the sum of all four entries)."""
    parents, terms = _hay_three_nodes()
    means, cov = _dense_gls(parents, terms, 1)
    np.testing.assert_allclose(means[0].ravel(), [29 / 3], rtol=1e-12)
    np.testing.assert_allclose(means[1].ravel(), [13 / 3, 16 / 3], rtol=1e-12)
    for level, unit in [(0, 0), (1, 0), (1, 1)]:
        np.testing.assert_allclose(cov(level, unit), [[2 / 3]], rtol=1e-12)


def test_referee_solves_hand_solved_equality_and_zero_cell():
    """Hay's example with the root's total fixed at 10: the leaves move by ½ each (4.5, 5.5),
    the root has variance 0 and each leaf ½. With the first leaf's cell fixed at 0 instead:
    root = second leaf = (10 + 5)/2 = 7.5, variance ½, and the zero leaf has variance 0."""
    parents, terms = _hay_three_nodes()
    none = np.array([[False]])

    @dataclass(frozen=True)
    class Eq:
        matrix: np.ndarray
        values: np.ndarray
        zero: np.ndarray

    total = [Eq(np.ones((1, 1)), np.array([[10.0]]), none), None]
    means, cov = _dense_gls(parents, terms, 1, total)
    np.testing.assert_allclose(np.r_[means[0].ravel(), means[1].ravel()], [10, 4.5, 5.5])
    np.testing.assert_allclose([cov(0, 0)[0, 0], cov(1, 0)[0, 0], cov(1, 1)[0, 0]],
                               [0, 0.5, 0.5], atol=1e-12)
    zero = [None, Eq(np.ones((1, 1)), np.full((2, 1), np.nan), np.array([[True], [False]]))]
    means, cov = _dense_gls(parents, terms, 1, zero)
    np.testing.assert_allclose(np.r_[means[0].ravel(), means[1].ravel()], [7.5, 0, 7.5],
                               atol=1e-12)
    np.testing.assert_allclose([cov(0, 0)[0, 0], cov(1, 0)[0, 0], cov(1, 1)[0, 0]],
                               [0.5, 0, 0.5], atol=1e-12)


@pytest.mark.parametrize("seed", range(8))
def test_referee_equals_tree_least_squares_without_equalities(seed):
    """With no equalities the referee's means are ``tree_least_squares``'s, unit for unit."""
    case = _random_case(seed, with_equalities=False)
    means, _ = _dense_gls(case.parents, case.terms, case.cells)
    expected = tree_least_squares(case.parents, case.terms, case.cells)
    for level, (got, want) in enumerate(zip(means, expected)):
        np.testing.assert_allclose(got, want, rtol=RTOL, atol=_atol(want),
                                   err_msg=f"seed {seed}, level {level}")


@pytest.mark.parametrize("seed", range(8))
def test_referee_covariance_equals_leaves_parametrisation(seed):
    """Without equalities, every histogram is ``x = Lθ`` for the bottom level's histograms ``θ``
    (``L`` sums each unit's leaves), so ``Cov(x) = L (LᵀHL)⁻¹ Lᵀ``: the referee's null-space
    covariance of every unit equals that block."""
    case = _random_case(seed, with_equalities=False)
    _, cov = _dense_gls(case.parents, case.terms, case.cells)
    layout = _Layout([len(p) for p in case.parents], case.cells)
    depth, leaves = len(case.parents), len(case.parents[-1])
    owner = [np.arange(leaves)]                      # owner[i][leaf]: its ancestor at depth−1−i
    for level in range(depth - 1, 0, -1):
        owner.append(np.asarray(case.parents[level])[owner[-1]])
    owner = owner[::-1]
    lift = np.zeros((layout.length, leaves * case.cells))
    for level in range(depth):
        for leaf in range(leaves):
            s = layout.block(level, int(owner[level][leaf]))
            lift[s, leaf * case.cells:(leaf + 1) * case.cells] += np.eye(case.cells)
    h, _ = _objective(layout, case.terms, case.cells)
    full = lift @ np.linalg.inv(lift.T @ h @ lift) @ lift.T
    for level in range(depth):
        for unit in range(layout.sizes[level]):
            s = layout.block(level, unit)
            np.testing.assert_allclose(cov(level, unit), full[s, s], rtol=RTOL,
                                       atol=_atol(full[s, s]),
                                       err_msg=f"seed {seed}, level {level}, unit {unit}")


# -- random small hierarchies ---------------------------------------------------------------------
@dataclass(frozen=True)
class _EqualitySpec:
    """The generator's equalities of one level (the fields of ``tree.Equalities``)."""

    matrix: np.ndarray
    values: np.ndarray
    zero: np.ndarray


@dataclass(frozen=True)
class _Case:
    parents: list[np.ndarray]
    terms: list[list[tuple[Any, np.ndarray, np.ndarray]]]
    cells: int
    equalities: list[_EqualitySpec | None] | None
    truth: list[np.ndarray]
    zero: list[np.ndarray]


def _random_tree(rng: np.random.Generator) -> list[np.ndarray]:
    """2–4 levels, 1–4 children per parent, children sometimes listed out of parent order."""
    parents = [np.array([-1])]
    for _ in range(int(rng.integers(2, 5)) - 1):
        above = parents[-1].size
        p = np.repeat(np.arange(above), rng.integers(1, 5, above))
        parents.append(rng.permutation(p) if rng.random() < 0.5 else p)
    return parents


def _random_zero_cells(rng, parents, cells: int) -> list[np.ndarray]:
    """Zero cells: a unit's zero cells are zero in all its descendants, and a cell zero in every
    child may be zero in the parent too."""
    rate = rng.choice([0.0, 0.1, 0.25])
    zero = [rng.random((1, cells)) < rate / 3]
    for p in parents[1:]:
        zero.append(zero[-1][p] | (rng.random((p.size, cells)) < rate))
    for level in range(len(parents) - 1, 0, -1):
        in_every_child = np.ones_like(zero[level - 1])
        np.logical_and.at(in_every_child, parents[level], zero[level])
        zero[level - 1] |= in_every_child & (rng.random(in_every_child.shape) < 0.5)
    return zero


def _random_query(rng, cells: int) -> np.ndarray:
    """1–3 rows of 0/1, none empty."""
    q = (rng.random((int(rng.integers(1, 4)), cells)) < 0.5).astype(np.float64)
    q[np.arange(q.shape[0]), rng.integers(0, cells, q.shape[0])] = 1.0
    return q


def _random_terms(rng, parents, cells: int, truth) -> list[list[tuple]]:
    """1–3 queries per level (identity first at the bottom, sometimes elsewhere; sometimes a
    level above the bottom measures nothing); every answer its own variance in [0.5, 20]; about
    15% of answers unmeasured (weight 0, value arbitrary) unless that leaves a bottom unit
    undetermined by its own measurements."""
    bottom = len(parents) - 1
    terms = []
    for level, p in enumerate(parents):
        if level < bottom and rng.random() < 0.25:
            terms.append([])
            continue
        queries = [_random_query(rng, cells) for _ in range(int(rng.integers(1, 4)))]
        if level == bottom or rng.random() < 0.3:
            queries[0] = np.eye(cells)
        weights = [1 / rng.uniform(0.5, 20, (p.size, q.shape[0])) for q in queries]
        for w in weights:
            w[rng.random(w.shape) < 0.15] = 0.0
        if level == bottom:
            for unit in range(p.size):
                info = sum(q.T @ (w[unit][:, None] * q) for q, w in zip(queries, weights))
                if np.linalg.matrix_rank(info) < cells:
                    weights[0][unit] = 1 / rng.uniform(0.5, 20, cells)
        level_terms = []
        for q, w in zip(queries, weights):
            exact = truth[level] @ q.T
            noisy = exact + rng.normal(size=exact.shape) / np.sqrt(np.where(w > 0, w, 1.0))
            values = np.where(w > 0, noisy, rng.uniform(-1e3, 1e3, w.shape))
            level_terms.append((sp.csr_matrix(q) if rng.random() < 0.3 else q, values, w))
        terms.append(level_terms)
    return terms


def _random_equalities(rng, parents, cells: int, truth, zero) -> list[_EqualitySpec | None]:
    """Per level: the unit total (and sometimes a random 0/1 row), each held at about half the
    units with the truth's value (NaN elsewhere), and the level's zero cells. A level without
    zero cells sometimes has no equalities at all (``None``)."""
    out: list[_EqualitySpec | None] = []
    for level, p in enumerate(parents):
        if not zero[level].any() and rng.random() < 0.3:
            out.append(None)
            continue
        rows = [np.ones(cells)]
        if rng.random() < 0.5:
            rows.append(_random_query(rng, cells)[0])
        matrix = np.array(rows)
        values = truth[level] @ matrix.T
        values[rng.random(values.shape) < 0.5] = np.nan
        out.append(_EqualitySpec(matrix, values, zero[level].copy()))
    return out


def _random_case(seed: int, with_equalities: bool = True) -> _Case:
    """A small random hierarchy: a tree, a nonnegative integer truth (0 on zero cells), noisy
    measurements of it, and equalities the truth satisfies (so they are feasible); a quarter of
    the seeds have none (``equalities=None``)."""
    rng = np.random.default_rng(seed)
    cells = int(rng.integers(3, 7))
    parents = _random_tree(rng)
    with_equalities = with_equalities and seed % 4 != 3
    zero = (_random_zero_cells(rng, parents, cells) if with_equalities
            else [np.zeros((p.size, cells), dtype=bool) for p in parents])
    bottom = np.where(zero[-1], 0, rng.integers(0, 10, zero[-1].shape)).astype(np.float64)
    truth = [bottom]
    for level in range(len(parents) - 1, 0, -1):
        above = np.zeros((len(parents[level - 1]), cells))
        np.add.at(above, parents[level], truth[0])
        truth.insert(0, above)
    terms = _random_terms(rng, parents, cells, truth)
    equalities = (_random_equalities(rng, parents, cells, truth, zero) if with_equalities
                  else None)
    return _Case(parents, terms, cells, equalities, truth, zero)


@pytest.mark.parametrize("seed", SEEDS)
def test_random_case_is_feasible_and_determined(seed):
    """The generator keeps its promises: the truth is consistent, 0 on every zero cell, and
    holds every equality; zero cells are inherited by children; every bottom unit's own
    measurements determine its histogram; answers have weight 0 or variance in [0.5, 20]."""
    case = _random_case(seed)
    for level in range(1, len(case.parents)):
        summed = np.zeros_like(case.truth[level - 1])
        np.add.at(summed, case.parents[level], case.truth[level])
        np.testing.assert_array_equal(summed, case.truth[level - 1])
        assert not (case.zero[level - 1][case.parents[level]] & ~case.zero[level]).any()
    for level, eq in enumerate(case.equalities or []):
        if eq is None:
            assert not case.zero[level].any()
            continue
        assert (case.truth[level][eq.zero] == 0).all()
        held = np.isfinite(eq.values)
        np.testing.assert_array_equal((case.truth[level] @ eq.matrix.T)[held], eq.values[held])
    for unit in range(len(case.parents[-1])):
        info = sum(_dense(q).T @ (w[unit][:, None] * _dense(q)) for q, _, w in case.terms[-1])
        assert np.linalg.matrix_rank(info) == case.cells
    for level_terms in case.terms:
        for _, _, w in level_terms:
            assert ((w == 0) | ((w >= 1 / 20) & (w <= 2))).all()


# -- tree_gls against the referee -----------------------------------------------------------------
@functools.lru_cache(maxsize=None)
def _solved(seed: int):
    """The case of a seed, the referee's answer, and ``tree_gls``'s."""
    from postproc.methods.gls.tree import Equalities, tree_gls

    case = _random_case(seed)
    reference = _dense_gls(case.parents, case.terms, case.cells, case.equalities)
    equalities = (None if case.equalities is None else
                  [None if eq is None else Equalities(eq.matrix, eq.values, eq.zero)
                   for eq in case.equalities])
    return case, reference, tree_gls(case.parents, case.terms, case.cells, equalities)


@pytest.mark.parametrize("seed", SEEDS)
def test_tree_gls_means_equal_the_referee(seed):
    """Every unit's mean equals the dense referee's (rtol 1e-8, atol 1e-8 × magnitude)."""
    case, (means, _), result = _solved(seed)
    assert len(result.means) == len(case.parents)
    for level, (got, want) in enumerate(zip(result.means, means)):
        assert got.shape == want.shape, f"seed {seed}, level {level}"
        np.testing.assert_allclose(got, want, rtol=RTOL, atol=_atol(want),
                                   err_msg=f"seed {seed}, level {level}")


@pytest.mark.parametrize("seed", SEEDS)
def test_tree_gls_covariances_equal_the_referee(seed):
    """Every unit's covariance (cells × cells) equals the dense referee's block (rtol 1e-8,
    atol 1e-8 × the largest entry of that block, at least 1e-8)."""
    case, (_, cov), result = _solved(seed)
    for level in range(len(case.parents)):
        for unit in range(len(case.parents[level])):
            want = cov(level, unit)
            got = np.asarray(result.covariance(level, unit))
            np.testing.assert_allclose(got, want, rtol=RTOL, atol=_atol(want),
                                       err_msg=f"seed {seed}, level {level}, unit {unit}")


@pytest.mark.parametrize("seed", SEEDS)
def test_tree_gls_parents_are_sums_of_children(seed):
    """Every parent's histogram equals the sum of its children's (atol 1e-8 × magnitude)."""
    case, _, result = _solved(seed)
    for level in range(1, len(case.parents)):
        summed = np.zeros_like(result.means[level - 1])
        np.add.at(summed, case.parents[level], result.means[level])
        np.testing.assert_allclose(summed, result.means[level - 1], rtol=0,
                                   atol=_atol(result.means[level - 1]),
                                   err_msg=f"seed {seed}, level {level - 1}")


@pytest.mark.parametrize("seed", SEEDS)
def test_tree_gls_holds_equalities_and_zero_cells(seed):
    """Every equality row with a value holds, and every zero cell of the estimate is 0 (both to
    atol 1e-8 × magnitude)."""
    case, _, result = _solved(seed)
    for level, eq in enumerate(case.equalities or []):
        if eq is None:
            continue
        x = result.means[level]
        held = np.isfinite(eq.values)
        np.testing.assert_allclose((x @ eq.matrix.T)[held], eq.values[held], rtol=0,
                                   atol=_atol(eq.values[held]), err_msg=f"seed {seed}, {level=}")
        np.testing.assert_allclose(x[eq.zero], 0.0, rtol=0, atol=_atol(x),
                                   err_msg=f"seed {seed}, {level=}")


@pytest.mark.parametrize("seed", SEEDS)
def test_tree_gls_covariance_vanishes_where_the_estimate_is_fixed(seed):
    """On a unit's zero cells the covariance's rows and columns are 0, and every held equality
    row ``e`` has variance ``eᵀΣe`` = 0 (both to atol 1e-8 × the largest entry of Σ)."""
    case, _, result = _solved(seed)
    for level, eq in enumerate(case.equalities or []):
        if eq is None:
            continue
        for unit in range(len(case.parents[level])):
            sigma = np.asarray(result.covariance(level, unit))
            where = f"seed {seed}, level {level}, unit {unit}"
            fixed = eq.zero[unit]
            np.testing.assert_allclose(sigma[fixed], 0.0, atol=_atol(sigma), err_msg=where)
            np.testing.assert_allclose(sigma[:, fixed], 0.0, atol=_atol(sigma), err_msg=where)
            rows = eq.matrix[np.isfinite(eq.values[unit])]
            variances = np.einsum("rc,cd,rd->r", rows, sigma, rows)
            np.testing.assert_allclose(variances, 0.0, atol=_atol(sigma), err_msg=where)


# -- errors ---------------------------------------------------------------------------------------
def _six_leaves(missing_cell_weight: float = 1.0, level_weight: float = 1.0):
    """A root measured by its total, six leaves measured cell by cell (3 cells); leaf 4's third
    cell gets weight ``missing_cell_weight``, the root's total ``level_weight``."""
    cells = 3
    parents = [np.array([-1]), np.zeros(6, dtype=np.int64)]
    weights = np.ones((6, cells))
    weights[4, 2] = missing_cell_weight
    values = np.arange(18, dtype=float).reshape(6, cells)
    terms = [[(np.ones((1, cells)), np.array([[150.0]]), np.array([[level_weight]]))],
             [(np.eye(cells), values, weights)]]
    return parents, terms, cells


def test_stacked_operators_equal_the_one_unit_statement():
    """``_operators`` (stacks of equal shapes) against ``_operator`` (one unit at a time) on 60
    signatures of mixed sizes, equality rows (some dependent, some none), children's sums
    (some singular, some none) (seed 11): every matrix equal to 1e-10; and a signature whose
    information leaves a cell free is named the same way by both."""
    from postproc.methods.gls.operators import _operator, _operators

    rng = np.random.default_rng(11)
    infos, rows, sigmas, names = [], [], [], []
    for i in range(60):
        n = int(rng.choice([2, 3, 5]))
        a = rng.normal(size=(n + 2, n))
        infos.append(a.T @ a)
        r = int(rng.integers(0, 3))
        f = rng.normal(size=(r, n))
        if r == 2 and i % 4 == 0:
            f[1] = 2 * f[0]                          # a dependent row
        rows.append(f)
        if i % 3 == 0:
            sigmas.append(None)
        else:
            b = rng.normal(size=(n, n - (i % 2)))    # rank n − 1 for odd i: a null direction
            sigmas.append(b @ b.T)
        names.append(f"unit {i}")
    got = _operators(infos, rows, sigmas, names)
    for i, op in enumerate(got):
        want = _operator(infos[i], rows[i], sigmas[i], names[i])
        for field in ("covariance", "of_rhs", "sigma_pinv", "null_sigma"):
            a, b = getattr(op, field), getattr(want, field)
            if b is None:
                assert a is None, (i, field)
            elif field == "null_sigma":              # a basis: equal up to signs
                np.testing.assert_allclose(np.abs(a.T @ b), np.eye(b.shape[1]), atol=1e-10)
            else:
                np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-10, err_msg=f"{i} {field}")
    singular = np.diag([1.0, 0.0, 1.0])
    messages = []
    for call in (lambda: _operator(singular, np.zeros((0, 3)), None, "unit x"),
                 lambda: _operators([np.eye(3), singular], [np.zeros((0, 3))] * 2,
                                    [None, None], ["unit w", "unit x"])):
        with pytest.raises(PostprocError, match="unit x: its measurements do not determine") \
                as caught:
            call()
        messages.append(str(caught.value))
    assert messages[0] == messages[1] and "cells [1]" in messages[0]


@pytest.mark.parametrize("seed", SEEDS)
def test_stacked_subtree_estimates_equal_the_referee(seed, monkeypatch):
    """With every level's subtree estimates computed for all units at once (the path taken
    for many small operators: the block groups of a part), means and covariances equal the
    dense referee's (rtol 1e-8)."""
    from postproc.methods.gls import means

    monkeypatch.setattr(means, "_many_small", lambda operators, cells: True)
    case, (means, cov), result = _solved(seed)
    for level, (got, want) in enumerate(zip(result.means, means)):
        np.testing.assert_allclose(got, want, rtol=RTOL, atol=_atol(want),
                                   err_msg=f"seed {seed}, level {level}")
    for level in range(len(case.parents)):
        for unit in range(len(case.parents[level])):
            want = cov(level, unit)
            np.testing.assert_allclose(result.covariance(level, unit), want, rtol=RTOL,
                                       atol=_atol(want), err_msg=f"seed {seed}, {level}, {unit}")


@pytest.mark.parametrize("stacked", [False, True])
def test_contradicting_equalities_name_the_unit(stacked, monkeypatch):
    """A root total held at 9 over leaves held at 4 and 4 (its own row and what its children
    fix disagree), and a leaf held at 4 and at 5 by two rows: each refused naming the unit, on
    both paths of the subtree estimates."""
    from postproc.methods.gls import means
    from postproc.methods.gls.tree import Equalities, tree_gls

    monkeypatch.setattr(means, "_many_small", lambda operators, cells: stacked)
    one = np.ones((1, 1))
    terms = [[(one, np.array([[10.0]]), one)],
             [(one, np.array([[4.0], [5.0]]), np.ones((2, 1)))]]
    with pytest.raises(PostprocError, match="level 0 unit 0: its equalities contradict each "
                                            "other"):
        tree_gls([[-1], [0, 0]], terms, cells=1,
                 equalities=[Equalities(one, np.array([[9.0]])),
                             Equalities(one, np.array([[4.0], [4.0]]))])
    with pytest.raises(PostprocError, match="level 1 unit 1: its equalities contradict each "
                                            "other"):
        tree_gls([[-1], [0, 0]], terms, cells=1,
                 equalities=[None, Equalities(np.ones((2, 1)),
                                              np.array([[4.0, 4.0], [4.0, 5.0]]))])


def test_undetermined_bottom_unit_is_refused():
    """Leaf 4 of six has no measurement of its third cell and nothing else pins it (the root's
    total is unmeasured too, so the problem itself is undetermined, as the referee confirms):
    ``tree_gls`` raises a PostprocError saying the unit's measurements do not determine its
    histogram and naming unit 4."""
    from postproc.methods.gls.tree import tree_gls

    parents, terms, cells = _six_leaves(missing_cell_weight=0.0, level_weight=0.0)
    with pytest.raises(np.linalg.LinAlgError):
        _dense_gls(parents, terms, cells)
    with pytest.raises(PostprocError) as caught:
        tree_gls(parents, terms, cells)
    message = str(caught.value)
    assert re.search(r"do(es)? not determine", message), message
    assert re.search(r"\b4\b", message), message


@pytest.mark.parametrize("bad", [-1.0, np.nan, np.inf])
@pytest.mark.parametrize("where", ["bottom", "root"])
def test_bad_weights_are_refused(bad, where):
    """A negative, NaN or infinite weight, at the bottom or at the root, raises a PostprocError
    naming the query, unit and answer."""
    from postproc.methods.gls.tree import tree_gls

    parents, terms, cells = (_six_leaves(missing_cell_weight=bad) if where == "bottom"
                             else _six_leaves(level_weight=bad))
    with pytest.raises(PostprocError, match=r"weights must be finite and non-negative; query "
                                            r"\d+, unit \d+, answer \d+ has"):
        tree_gls(parents, terms, cells)


# -- a tree cut into parts: the top with what the parts give it, the parts under the top --------
def _cut(case, split: int, parts: int):
    """The case's tree cut under ``split``: the units of level ``split`` in ``parts`` runs of
    consecutive units; for each run, the levels below as a forest (its parents, terms and
    equalities, reindexed) and the rows of every level it holds."""
    from postproc.methods.gls.tree import Equalities

    n = len(case.parents[split])
    bounds = np.linspace(0, n, parts + 1).round().astype(int)
    out = []
    for lo, hi in zip(bounds[:-1], bounds[1:]):
        if lo == hi:
            continue
        keep, parents, rows = np.arange(lo, hi), [], []
        for level in range(split + 1, len(case.parents)):
            child = np.flatnonzero(np.isin(case.parents[level], keep))
            parents.append(np.searchsorted(keep, case.parents[level][child]))
            rows.append(child)
            keep = child
        eqs = None if case.equalities is None else [
            None if case.equalities[level] is None else Equalities(
                case.equalities[level].matrix, case.equalities[level].values[r],
                case.equalities[level].zero[r])
            for level, r in zip(range(split + 1, len(case.parents)), rows)]
        terms = [[(q, v[r], np.broadcast_to(w, v.shape)[r]) for q, v, w in case.terms[level]]
                 for level, r in zip(range(split + 1, len(case.parents)), rows)]
        out.append((lo, hi, parents, rows, terms, eqs))
    return out


#: Seeds whose tree has a level to cut under (three levels or more).
CUT_SEEDS = [s for s in range(100) if len(_random_case(s).parents) >= 3][:20]


@pytest.mark.parametrize("seed", CUT_SEEDS)
def test_tree_gls_in_parts_equals_the_whole(seed):
    """Cut under a level into parts: each part's upward pass gives the top its children's sums
    and covariances (``Below.of_part``, ``Below.join``); the top solved with them, and each part
    again with the top's steps (``above``), give every unit the whole tree's estimate (rtol
    1e-8), and the top's covariances are the whole's."""
    from postproc.methods.gls.tree import Below, Equalities, tree_gls

    case, (means, cov), _ = _solved(seed)
    depth = len(case.parents)
    split = 1 + seed % (depth - 2)
    eqs = (None if case.equalities is None else
           [None if eq is None else Equalities(eq.matrix, eq.values, eq.zero)
            for eq in case.equalities])
    pieces = _cut(case, split, 1 + seed % 3)
    firsts = [tree_gls([np.full(len(p[0]), -1)] + p[1:], terms, case.cells, e)
              for _, _, p, _, terms, e in pieces]
    below = Below.join([Below.of_part(fit, p[0], hi - lo)
                        for fit, (lo, hi, p, _, _, _) in zip(firsts, pieces)])
    top = tree_gls(case.parents[:split + 1], case.terms[:split + 1], case.cells,
                   None if eqs is None else eqs[:split + 1], below=below)
    for level in range(split + 1):
        np.testing.assert_allclose(top.means[level], means[level], rtol=RTOL,
                                   atol=_atol(means[level]), err_msg=f"seed {seed} top {level}")
        for unit in range(len(case.parents[level])):
            want = cov(level, unit)
            np.testing.assert_allclose(top.covariance(level, unit), want, rtol=RTOL,
                                       atol=_atol(want), err_msg=f"seed {seed} {level} {unit}")
    for lo, hi, p, rows, terms, e in pieces:
        part = tree_gls([np.full(len(p[0]), -1)] + p[1:], terms, case.cells, e,
                        above=top.below_steps[lo:hi][p[0]])
        for i, r in enumerate(rows):
            np.testing.assert_allclose(part.means[i], means[split + 1 + i][r], rtol=RTOL,
                                       atol=_atol(means[split + 1 + i]),
                                       err_msg=f"seed {seed} part {lo} level {split + 1 + i}")


@pytest.mark.parametrize("seed", SEEDS)
def test_sums_over_units_have_the_referees_variance(seed):
    """The variance of a sum over a set of units (``TreeGLS.sum_variances``: random rows on
    random units of every level, three functionals at once) equals the dense referee's
    ``Σ_u Σ_v r_u Cov(x_u, x_v) r_vᵀ`` (rtol 1e-8) — the covariances between units included."""
    case, (_, cov), result = _solved(seed)
    rng = np.random.default_rng(seed + 1000)
    for level in range(len(case.parents)):
        n = len(case.parents[level])
        rows = rng.normal(size=(n, 3, case.cells)) * (rng.random((n, 3, 1)) < 0.6)
        want = np.array([sum(rows[u, j] @ cov(level, u, v) @ rows[v, j]
                             for u in range(n) for v in range(n)) for j in range(3)])
        got = result.sum_variances(level, rows)
        np.testing.assert_allclose(got, np.maximum(want, 0), rtol=1e-8,
                                   atol=1e-8 * max(1.0, float(np.abs(want).max())),
                                   err_msg=f"seed {seed}, level {level}")
