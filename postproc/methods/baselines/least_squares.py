"""Closed-form hierarchical consistency without nonnegativity (Hay et al. 2010), generalised.

Hay et al. make a tree of noisy counts consistent (every parent the sum of its children) by least
squares, in two passes over the tree, no solver. :func:`tree_least_squares` does the same for
histograms with several linear queries per unit and any variances: it minimises

    Σ_u Σ_q ‖ W_{u,q}^{1/2} (Q_q x_u − y_{u,q}) ‖²   subject to   x_parent = Σ_children x_child

over the histograms ``x_u`` of every unit (``W`` = inverse variances). With one count per unit
and equal variances per level it is Hay et al.'s estimator; in general it is the best linear
unbiased estimate under the consistency constraints (Gaussian belief propagation on the tree).

**Upward pass** (bottom level first). Each unit gets the information ``A_u = Σ_q Q_qᵀ W_{u,q} Q_q``
and ``b_u = Σ_q Q_qᵀ W_{u,q} y_{u,q}`` of its own measurements. A leaf's subtree estimate is
``m = A⁻¹ b`` with covariance ``P = A⁻¹``. A parent sees its children's subtrees as one measurement
of itself, ``Σ m_c`` with covariance ``S = Σ P_c``, so ``P_v = (A_v + S⁻¹)⁻¹`` and
``m_v = P_v (b_v + S⁻¹ Σ m_c)``.

**Downward pass** (root first). The root's estimate is ``x = m``; children of a unit with final
``x_v`` are ``x_c = m_c + P_c S⁻¹ (x_v − Σ m_c)`` — they sum to ``x_v`` exactly (in exact
arithmetic; to float rounding here).

The matrices depend only on a unit's own variances and the shape of its subtree, so they are
computed once per distinct (variances, children's matrices) signature — once per level for the
E2E measurements with one variance per level and query — and applied to all units sharing them.
Nonnegativity is **not** imposed: the result is real-valued and may be negative (clip it with
:func:`postproc.methods.baselines.histograms.clip_negative` if needed, losing consistency).

Every bottom-level unit needs measurements that determine its histogram (``A`` invertible, e.g.
``detailed`` measured there); levels without measurements are fine.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import scipy.sparse as sp

from hierarchy.mechanisms import sample_two_sided_geometric, two_sided_geometric_variance
from hierarchy.noisy import NoisyHierarchy
from hierarchy.randomness import as_randomness
from postproc.errors import PostprocError
from postproc.methods.baselines.tree import TreeCounts, _budget
from postproc.methods.gls.information import Term, level_information, unit_groups
from postproc.result import Result

__all__ = ["Term", "tree_least_squares", "hay_consistency", "hay"]



def _apply(ids: np.ndarray, matrices: Sequence[np.ndarray], vectors: np.ndarray) -> np.ndarray:
    """``out[u] = matrices[ids[u]] @ vectors[u]`` (every matrix symmetric), grouped by id."""
    out = np.empty_like(vectors)
    for g, rows in unit_groups(ids):
        out[rows] = vectors[rows] @ matrices[g]
    return out


def _inverse(matrix: np.ndarray, what: str) -> np.ndarray:
    try:
        inverse = np.linalg.inv(matrix)
    except np.linalg.LinAlgError:
        inverse = None
    if inverse is None or not np.all(np.isfinite(inverse)):
        raise PostprocError(f"{what} is singular: its measurements do not determine every cell. "
                            f"Measure 'detailed' (or queries that together determine it) at the "
                            f"bottom level")
    return (inverse + inverse.T) / 2


def tree_least_squares(parents: Sequence[Any], terms: Sequence[Sequence[Term]], cells: int
                       ) -> list[np.ndarray]:
    """Consistent weighted least-squares histograms of every unit of a tree, in closed form.

    Parameters
    ----------
    parents : sequence of int arrays
        For each level (root first), the index of each unit's parent on the level above; the
        root level's entry is ``[-1]``.
    terms : sequence of sequences of (Q, values, weights)
        For each level, its measured queries: ``Q`` (answers × cells, dense or sparse), ``values``
        and ``weights`` (inverse variances), both (units × answers). A level may have none.
    cells : int
        Cells per histogram.

    Returns
    -------
    list of float64 arrays
        ``x[l]`` of shape (units of level ``l``, ``cells``); every parent is the sum of its
        children (to float rounding).

    Raises
    ------
    PostprocError
        Mismatched shapes, or a bottom-level unit whose measurements do not determine its
        histogram.

    Examples
    --------
    Hay et al.'s example: a root and two leaves, each counted once with unit variance.

    >>> one = np.ones((1, 1))
    >>> x = tree_least_squares([[-1], [0, 0]],
    ...                        [[(one, np.array([[10.0]]), one)],
    ...                         [(one, np.array([[4.0], [5.0]]), np.ones((2, 1)))]], cells=1)
    >>> [v.ravel().round(4).tolist() for v in x]        # the 1 missing person is shared out
    [[9.6667], [4.3333, 5.3333]]
    """
    parents = [np.asarray(p, dtype=np.int64).ravel() for p in parents]
    if len(parents) != len(terms) or not parents:
        raise PostprocError(f"{len(parents)} parent arrays for {len(terms)} levels of terms")
    if parents[0].size != 1:
        raise PostprocError("the root level must have exactly one unit")
    sizes = [p.size for p in parents]
    for li in range(1, len(parents)):
        p = parents[li]
        if p.size and (p.min() < 0 or p.max() >= sizes[li - 1]):
            raise PostprocError(f"level {li}: parent indices must be in 0..{sizes[li - 1] - 1}")
        if np.setdiff1d(np.arange(sizes[li - 1]), p).size:
            raise PostprocError(f"level {li - 1}: every unit above the bottom level needs a child")
    own_ids, own_matrices, own_b = [], [], []
    for li, level_terms in enumerate(terms):
        ids, matrices, b = level_information(level_terms, sizes[li], cells, li)
        own_ids.append(ids)
        own_matrices.append(matrices)
        own_b.append(b)
    depth = len(parents)
    covariance: list[np.ndarray] = []              # P of each distinct signature
    pid: list[np.ndarray] = [None] * depth          # type: ignore[list-item]
    mean: list[np.ndarray] = [None] * depth         # type: ignore[list-item]
    sinv_id: list[np.ndarray] = [None] * depth      # type: ignore[list-item]
    sinv: list[np.ndarray] = []
    # upward pass
    bottom = depth - 1
    index_of: dict[Any, int] = {}
    ids = np.empty(sizes[bottom], dtype=np.int64)
    for g, rows in unit_groups(own_ids[bottom]):
        index_of[("leaf", g)] = len(covariance)
        covariance.append(_inverse(own_matrices[bottom][g],
                                   f"the information matrix of bottom-level units {rows[:3]}"))
        ids[rows] = index_of[("leaf", g)]
    pid[bottom] = ids
    mean[bottom] = _apply(ids, covariance, own_b[bottom])
    for li in range(bottom - 1, -1, -1):
        child_parent = parents[li + 1]
        aggregate = sp.csr_matrix((np.ones(child_parent.size), (child_parent,
                                                                np.arange(child_parent.size))),
                                  shape=(sizes[li], child_parent.size))
        child_sum = np.asarray(aggregate @ mean[li + 1])
        signature = _signatures(child_parent, pid[li + 1], sizes[li])
        keys = [(li, int(own_ids[li][u]), signature[u]) for u in range(sizes[li])]
        s_ids = np.empty(sizes[li], dtype=np.int64)
        p_ids = np.empty(sizes[li], dtype=np.int64)
        s_index: dict[Any, int] = {}
        for u, key in enumerate(keys):
            _, own, children = key
            if children not in s_index:
                total = np.sum([covariance[c] * k for c, k in children], axis=0)
                s_index[children] = len(sinv)
                sinv.append(_inverse(total, f"the children's covariance at level {li}"))
            if key not in index_of:
                index_of[key] = len(covariance)
                covariance.append(_inverse(own_matrices[li][own] + sinv[s_index[children]],
                                           f"the information at level {li}"))
            s_ids[u] = s_index[children]
            p_ids[u] = index_of[key]
        pid[li], sinv_id[li] = p_ids, s_ids
        mean[li] = _apply(p_ids, covariance, own_b[li] + _apply(s_ids, sinv, child_sum))
    # downward pass
    x = [None] * depth
    x[0] = mean[0]
    for li in range(1, depth):
        p = parents[li]
        aggregate = sp.csr_matrix((np.ones(p.size), (p, np.arange(p.size))),
                                  shape=(sizes[li - 1], p.size))
        gap = x[li - 1] - np.asarray(aggregate @ mean[li])
        direction = _apply(sinv_id[li - 1], sinv, gap)
        x[li] = mean[li] + _apply(pid[li], covariance, direction[p])
    return x


def _signatures(child_parent: np.ndarray, child_pid: np.ndarray, n_parents: int) -> list:
    """For every parent, its children's covariance ids as a sorted tuple of (id, multiplicity)."""
    order = np.lexsort((child_pid, child_parent))
    par, cid = child_parent[order], child_pid[order]
    pairs, counts = np.unique(np.stack([par, cid]), axis=1, return_counts=True)
    out: list[list] = [[] for _ in range(n_parents)]
    for (parent, c), k in zip(pairs.T.tolist(), counts.tolist()):
        out[parent].append((c, k))
    return [tuple(s) for s in out]


def hay_consistency(noisy: NoisyHierarchy) -> Result:
    """Closed-form consistent histograms from every measurement of a NoisyHierarchy.

    Weighted least squares (weights = inverse variances) of all measured queries at all levels,
    subject to children summing to parents, without nonnegativity or integrality
    (:func:`tree_least_squares`). Published invariants are not imposed.

    Parameters
    ----------
    noisy : NoisyHierarchy
        Needs measurements at the bottom level that determine its histograms (``detailed``).

    Returns
    -------
    Result
        ``method="hay"``; float histograms, consistent across levels.

    Raises
    ------
    PostprocError
        The bottom level's measurements do not determine its histograms.

    Examples
    --------
    >>> from hierarchy.synth import synthesize_1940
    >>> from hierarchy.tabulation import tabulate
    >>> from hierarchy.measurement import measure
    >>> from hierarchy.budget import Budget
    >>> from hierarchy.queries import e2e_workload
    >>> from hierarchy.schema import E2E_1940
    >>> levels = ["nation", "state", "county"]
    >>> truth = tabulate(synthesize_1940(5_000, seed=1).persons, schema=E2E_1940, levels=levels)
    >>> noisy = measure(truth, e2e_workload(E2E_1940), Budget.e2e(1, levels), rng=4)
    >>> est = hay_consistency(noisy)
    >>> bool(np.allclose(est.histograms[1].sum(axis=0), est.histograms[0][0]))
    True
    """
    geo = noisy.geography
    terms = []
    for level in geo.levels:
        level_terms = []
        for name in noisy.queries(level):
            m = noisy.get(level, name)
            level_terms.append((noisy.workload[name].matrix, m.values, m.weights))
        terms.append(level_terms)
    x = tree_least_squares(geo.parents, terms, noisy.schema.size)
    return Result("hay", noisy.schema, geo, noisy.workload, tuple(x), {
        "method": "hay", "noisy": dict(noisy.provenance)})


def hay(truth: TreeCounts, epsilon: float, rng: Any = None, *,
        sensitivity: float = 1.0) -> TreeCounts:
    """Hay et al. on a regular tree: every node counted with ``ε/(J+1)``, then made consistent.

    The measurements are RDPC's (level ``j`` from ``rng.child(j)``, geometric with
    ``z = ε/((J+1)Δ)``), so the two differ only in how they reconcile them.

    Parameters
    ----------
    truth : TreeCounts
    epsilon : float
    rng : None, int, numpy.random.Generator or Randomness
    sensitivity : float

    Returns
    -------
    TreeCounts
        ``method="hay"``, float64, consistent.

    Raises
    ------
    PostprocError
        A bad budget.

    Examples
    --------
    >>> pop = TreeCounts.from_leaves(np.full(9, 25), 3)
    >>> est = hay(pop, 1.0, rng=0)
    >>> bool(np.isclose(est.leaves.sum(), est.counts[0][0]))
    True
    """
    epsilon = _budget(epsilon)
    z = epsilon / (truth.depth + 1) / _budget(sensitivity, "sensitivity")
    rnd = as_randomness(rng)
    weight = 1.0 / two_sided_geometric_variance(z)
    one = np.ones((1, 1))
    terms = []
    for j, exact in enumerate(truth.counts):
        values = exact.astype(np.float64) + sample_two_sided_geometric(z, exact.size,
                                                                       rnd.child(j))
        terms.append([(one, values[:, None], np.full((exact.size, 1), weight))])
    x = tree_least_squares([truth.parents(j) for j in range(truth.depth + 1)], terms, 1)
    return TreeCounts(truth.children, tuple(v[:, 0] for v in x), "hay", {
        "method": "hay", "epsilon": epsilon, "z_per_level": z, "randomness": rnd.provenance()})
