"""Flaxman's (2019) synthetic population on a regular tree and the GDPC, ADPC, RDPC baselines.

The population (SPEC §5): ``N`` persons, ``J`` nested levels below a root, ``C = ⌊(N/μ)^{1/J}⌋``
children per node, so ``C^J`` leaves with mean ``μ`` persons each; every person's unit at each level
is drawn uniformly from its parent's ``C`` children, i.e. the leaf is uniform over all ``C^J``
leaves. The statistic is the total count (TC) of every unit.

A :class:`TreeCounts` holds the counts of every level, root first; node ``i`` of level ``j`` has the
children ``i·C … i·C + C − 1`` on level ``j + 1``. The baselines return one as well:

``gdpc``
    Two-sided geometric noise with ``z = ε/Δ`` on every leaf count; the counts of higher levels
    are sums of the noisy leaves (integers, possibly negative).
``adpc``
    The mean of ``P`` independent GDPC runs, each with budget ``ε/P`` (run ``p`` draws from the
    child stream ``p`` of ``rng``); not integers.
``rdpc``
    Raking: budget ``ε/(J+1)`` per level. The root is ``N + G``; each lower level's noisy counts
    are scaled so that siblings sum to their parent's raked count,
    ``RDPC_child = NoisyC_child · RDPC_parent / Σ_siblings NoisyC``. When the siblings' noisy sum
    is zero or negative the ratio is meaningless (it would flip or blow up every sibling), so the
    parent is split equally among its ``C`` children instead; negative noisy children under a
    positive sum are kept as the formula gives them (the siblings still sum to the parent).
    Level ``j`` draws from the child stream ``j`` of ``rng``.
``hay``
    The same measurements as RDPC (every node, ``ε/(J+1)`` per level), made consistent by the
    closed-form least squares of Hay et al. (2010), see :mod:`postproc.baselines.least_squares`.

Sensitivity ``Δ`` is 1 by default: one person added, removed or moved changes a unit's count by
at most one, and the EPL of a count is measured per unit, so GDPC's log ratio is exactly ``ε``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Mapping

import numpy as np

from hierarchy.mechanisms import sample_two_sided_geometric
from hierarchy.randomness import as_randomness
from postproc.errors import PostprocError

__all__ = ["TreeCounts", "children_per_node", "flaxman_population", "gdpc", "adpc", "rdpc",
           "clip_tree"]


@dataclass(frozen=True, eq=False)
class TreeCounts:
    """Total counts of every unit of a regular tree, root first.

    Parameters
    ----------
    children : int
        ``C``, the number of children of every node (at least 1).
    counts : tuple of 1-D arrays
        ``counts[j]`` has ``C**j`` entries; ``counts[0]`` is the root.
    method : str
        What made the counts (``"exact"``, ``"gdpc"``, …).
    provenance : dict
        JSON-ready description (budget, randomness, options).

    Raises
    ------
    PostprocError
        Bad ``children``, wrong shapes, or non-finite counts.

    Examples
    --------
    >>> tree = TreeCounts.from_leaves([1, 2, 3, 4], children=2)
    >>> [c.tolist() for c in tree.counts]
    [[10], [3, 7], [1, 2, 3, 4]]
    >>> tree.depth, tree.parents(2).tolist()
    (2, [0, 0, 1, 1])
    """

    children: int
    counts: tuple[np.ndarray, ...]
    method: str = "exact"
    provenance: Mapping[str, Any] = field(default_factory=dict, repr=False)

    def __post_init__(self):
        if isinstance(self.children, bool) or not isinstance(self.children, (int, np.integer)) \
                or self.children < 1:
            raise PostprocError(f"children must be a positive integer, not {self.children!r}")
        counts = tuple(np.asarray(c) for c in self.counts)
        if not counts:
            raise PostprocError("a tree needs at least the root level")
        for j, c in enumerate(counts):
            if c.shape != (self.children ** j,):
                raise PostprocError(f"level {j} has shape {c.shape}; a regular tree with "
                                    f"{self.children} children per node has {self.children ** j}"
                                    f" units there")
            if c.dtype.kind not in "iuf" or (c.dtype.kind == "f" and not np.isfinite(c).all()):
                raise PostprocError(f"level {j} counts must be finite numbers")
        object.__setattr__(self, "children", int(self.children))
        object.__setattr__(self, "counts", counts)
        object.__setattr__(self, "provenance", dict(self.provenance))

    @classmethod
    def from_leaves(cls, leaves: Any, children: int, *, depth: int | None = None,
                    method: str = "exact",
                    provenance: Mapping[str, Any] | None = None) -> "TreeCounts":
        """The tree whose every count is the sum of the leaves below it.

        Parameters
        ----------
        leaves : array_like, shape (C**J,)
        children : int
        depth : int, optional
            ``J``; inferred from the number of leaves unless ``children`` is 1.
        method : str
        provenance : dict, optional

        Returns
        -------
        TreeCounts

        Raises
        ------
        PostprocError
            The number of leaves is not ``children ** depth``.

        Examples
        --------
        >>> TreeCounts.from_leaves(np.arange(9), 3).counts[1].tolist()
        [3, 12, 21]
        """
        leaves = np.asarray(leaves)
        if leaves.ndim != 1 or leaves.size == 0:
            raise PostprocError(f"leaves must be a non-empty 1-D array, not shape {leaves.shape}")
        if depth is None:
            depth = 0 if children == 1 else round(math.log(leaves.size, children))
        if children ** depth != leaves.size:
            raise PostprocError(f"{leaves.size} leaves are not {children} children per node "
                                f"over {depth} levels")
        counts = [leaves]
        for _ in range(depth):
            counts.append(counts[-1].reshape(-1, children).sum(axis=1))
        return cls(children, tuple(reversed(counts)), method, provenance or {})

    @property
    def depth(self) -> int:
        """``J``: the number of levels below the root."""
        return len(self.counts) - 1

    @property
    def leaves(self) -> np.ndarray:
        """The bottom level's counts."""
        return self.counts[-1]

    def parents(self, level: int) -> np.ndarray:
        """The index of each unit's parent on the level above (``[-1]`` for the root).

        Parameters
        ----------
        level : int

        Returns
        -------
        numpy.ndarray of int64
        """
        if level == 0:
            return np.array([-1], dtype=np.int64)
        return np.arange(self.children ** level, dtype=np.int64) // self.children


def children_per_node(persons: int, levels: int, mean_leaf: float) -> int:
    """``C = ⌊(N/μ)^{1/J}⌋``, computed exactly (no floating-point root at the boundary).

    Parameters
    ----------
    persons : int
        ``N``.
    levels : int
        ``J`` (≥ 1).
    mean_leaf : float
        ``μ``, the mean persons per leaf.

    Returns
    -------
    int

    Raises
    ------
    PostprocError
        ``C`` would be below 1, or a non-positive argument.

    Examples
    --------
    >>> children_per_node(1_000_000, 3, 1)     # exactly 100, not 99.99999
    100
    >>> children_per_node(2_000_000, 3, 20)
    46
    """
    if persons <= 0 or levels < 1 or mean_leaf <= 0:
        raise PostprocError(f"need persons > 0, levels >= 1 and mean_leaf > 0; got {persons}, "
                            f"{levels}, {mean_leaf}")
    c = int(math.floor((persons / mean_leaf) ** (1.0 / levels)))
    while (c + 1) ** levels * mean_leaf <= persons:
        c += 1
    while c > 0 and c ** levels * mean_leaf > persons:
        c -= 1
    if c < 1:
        raise PostprocError(f"{persons} persons with {mean_leaf} per leaf fill no level of "
                            f"{levels}; raise persons or lower mean_leaf")
    return c


def flaxman_population(persons: int, *, levels: int = 3, mean_leaf: float = 20.0,
                       rng: Any = None) -> TreeCounts:
    """Flaxman's synthetic population: each person's leaf uniform over ``C^J`` leaves.

    Parameters
    ----------
    persons : int
        ``N``.
    levels : int
        ``J``, levels below the root.
    mean_leaf : float
        ``μ``: ``C = ⌊(N/μ)^{1/J}⌋`` children per node.
    rng : None, int, numpy.random.Generator or Randomness
        Randomness for the population (not a privacy mechanism; its ``generator`` is used).

    Returns
    -------
    TreeCounts
        Exact counts, ``method="exact"``; every level sums to ``N``.

    Raises
    ------
    PostprocError
        Bad arguments.

    Examples
    --------
    >>> pop = flaxman_population(100_000, levels=2, mean_leaf=10, rng=0)
    >>> pop.children, pop.leaves.size, int(pop.counts[0][0])
    (100, 10000, 100000)
    """
    children = children_per_node(persons, levels, mean_leaf)
    n_leaves = children ** levels
    generator = as_randomness(rng).generator
    leaves = generator.multinomial(int(persons), np.full(n_leaves, 1.0 / n_leaves))
    return TreeCounts.from_leaves(leaves.astype(np.int64), children, depth=levels, provenance={
        "population": "flaxman2019", "persons": int(persons), "levels": int(levels),
        "mean_leaf": float(mean_leaf), "children": children})


def _budget(epsilon: Any, name: str = "epsilon") -> float:
    try:
        value = float(epsilon)
    except (TypeError, ValueError):
        raise PostprocError(f"{name} must be a positive number, not {epsilon!r}") from None
    if not (math.isfinite(value) and value > 0):
        raise PostprocError(f"{name} must be positive and finite, not {epsilon!r}")
    return value


def gdpc(truth: TreeCounts, epsilon: float, rng: Any = None, *,
         sensitivity: float = 1.0) -> TreeCounts:
    """GDPC: geometric noise (``z = ε/Δ``) on every leaf count; higher levels are sums.

    Parameters
    ----------
    truth : TreeCounts
        Exact counts.
    epsilon : float
        The whole budget, all spent on the leaves.
    rng : None, int, numpy.random.Generator or Randomness
        Noise source (``None``: release mode).
    sensitivity : float
        ``Δ`` of a leaf count.

    Returns
    -------
    TreeCounts
        ``method="gdpc"``, int64.

    Raises
    ------
    PostprocError
        A non-positive budget or sensitivity.

    Examples
    --------
    >>> pop = TreeCounts.from_leaves(np.full(4, 50), 2)
    >>> noisy = gdpc(pop, 1.0, rng=1)
    >>> int(noisy.counts[0][0]) == int(noisy.leaves.sum())
    True
    """
    epsilon = _budget(epsilon)
    z = epsilon / _budget(sensitivity, "sensitivity")
    rnd = as_randomness(rng)
    noise = sample_two_sided_geometric(z, truth.leaves.size, rnd)
    return TreeCounts.from_leaves(truth.leaves.astype(np.int64) + noise, truth.children,
                                  depth=truth.depth, method="gdpc", provenance={
                                      "method": "gdpc", "epsilon": epsilon, "z": z,
                                      "randomness": rnd.provenance()})


def adpc(truth: TreeCounts, epsilon: float, rng: Any = None, *, runs: int = 4,
         sensitivity: float = 1.0) -> TreeCounts:
    """ADPC: the mean of ``runs`` independent GDPC runs, each with budget ``ε / runs``.

    Run ``p`` is ``gdpc(truth, ε/runs, rng.child(p))`` with ``rng`` normalised by
    :func:`~hierarchy.randomness.as_randomness`.

    Parameters
    ----------
    truth : TreeCounts
    epsilon : float
        Total budget (sequential composition of the runs).
    rng : None, int, numpy.random.Generator or Randomness
    runs : int
        ``P``.
    sensitivity : float

    Returns
    -------
    TreeCounts
        ``method="adpc"``, float64 (multiples of ``1/P``).

    Raises
    ------
    PostprocError
        ``runs`` not a positive integer, or a bad budget.

    Examples
    --------
    >>> from hierarchy.randomness import Randomness
    >>> pop = TreeCounts.from_leaves(np.full(8, 30), 2)
    >>> mean = adpc(pop, 1.0, rng=5, runs=4)
    >>> parts = [gdpc(pop, 0.25, Randomness.simulation(5).child(p)).leaves for p in range(4)]
    >>> bool(np.allclose(mean.leaves, np.mean(parts, axis=0)))
    True
    """
    if isinstance(runs, bool) or not isinstance(runs, (int, np.integer)) or runs < 1:
        raise PostprocError(f"runs must be a positive integer, not {runs!r}")
    epsilon = _budget(epsilon)
    rnd = as_randomness(rng)
    total = np.zeros(truth.leaves.size, dtype=np.float64)
    for p in range(runs):
        total += gdpc(truth, epsilon / runs, rnd.child(p), sensitivity=sensitivity).leaves
    return TreeCounts.from_leaves(total / runs, truth.children, depth=truth.depth,
                                  method="adpc", provenance={
        "method": "adpc", "epsilon": epsilon, "runs": int(runs),
        "z_per_run": epsilon / runs / float(sensitivity), "randomness": rnd.provenance()})


def rdpc(truth: TreeCounts, epsilon: float, rng: Any = None, *,
         sensitivity: float = 1.0) -> TreeCounts:
    """RDPC: noisy counts at every level (``ε/(J+1)`` each), raked top-down to their parents.

    ``RDPC_root = N + G``; ``RDPC_child = NoisyC_child · RDPC_parent / Σ_siblings NoisyC``, or
    ``RDPC_parent / C`` for every sibling when ``Σ_siblings NoisyC ≤ 0``. Siblings sum to their
    parent up to float rounding: ``|Σ − parent| ≤ C · 4 · 2⁻⁵² · Σ|child|``.

    Parameters
    ----------
    truth : TreeCounts
    epsilon : float
        Total budget, split equally over the ``J + 1`` levels.
    rng : None, int, numpy.random.Generator or Randomness
        Level ``j`` draws its noise from ``rng.child(j)``.
    sensitivity : float

    Returns
    -------
    TreeCounts
        ``method="rdpc"``, float64; ``provenance["equal_splits"]`` counts the sibling groups whose
        noisy sum was not positive, per level.

    Raises
    ------
    PostprocError
        A bad budget.

    Examples
    --------
    >>> pop = TreeCounts.from_leaves(np.full(16, 40), 4)
    >>> raked = rdpc(pop, 1.0, rng=2)
    >>> bool(np.allclose(raked.leaves.reshape(4, 4).sum(axis=1), raked.counts[1]))
    True
    """
    epsilon = _budget(epsilon)
    z = epsilon / (truth.depth + 1) / _budget(sensitivity, "sensitivity")
    rnd = as_randomness(rng)
    c = truth.children
    raked = [truth.counts[0].astype(np.float64)
             + sample_two_sided_geometric(z, 1, rnd.child(0))]
    equal_splits = []
    for j in range(1, truth.depth + 1):
        noisy = (truth.counts[j].astype(np.float64)
                 + sample_two_sided_geometric(z, truth.counts[j].size, rnd.child(j)))
        groups = noisy.reshape(-1, c)
        sums = groups.sum(axis=1)
        parent = raked[-1]
        bad = sums <= 0
        with np.errstate(divide="ignore", invalid="ignore"):
            child = groups * (parent / np.where(bad, 1.0, sums))[:, None]
        child[bad] = (parent[bad] / c)[:, None]
        raked.append(child.ravel())
        equal_splits.append(int(bad.sum()))
    return TreeCounts(c, tuple(raked), "rdpc", {
        "method": "rdpc", "epsilon": epsilon, "z_per_level": z, "equal_splits": equal_splits,
        "randomness": rnd.provenance()})


def clip_tree(tree: TreeCounts) -> TreeCounts:
    """Nonnegative clipping: every count below 0 set to 0, level by level (so no longer consistent).

    Parameters
    ----------
    tree : TreeCounts

    Returns
    -------
    TreeCounts
        ``method`` gets the suffix ``"+clip"``.

    Examples
    --------
    >>> tree = TreeCounts(2, (np.array([1]), np.array([-2, 3])), "gdpc")
    >>> clip_tree(tree).counts[1].tolist(), clip_tree(tree).method
    ([0, 3], 'gdpc+clip')
    """
    return TreeCounts(tree.children, tuple(np.maximum(c, 0) for c in tree.counts),
                      f"{tree.method}+clip", {**tree.provenance, "clipped": True})
