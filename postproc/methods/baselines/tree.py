"""Flaxman's (2019) synthetic population on a regular tree, and how its counts are measured.

The population (Flaxman 2019; docs/experiments.md): ``N`` persons, ``J`` nested levels below a
root, ``C = ⌊(N/μ)^{1/J}⌋`` children per node, so ``C^J`` leaves with mean ``μ`` persons each; every
person's unit at each level is drawn uniformly from its parent's ``C`` children, i.e. the leaf is
uniform over all ``C^J`` leaves. The statistic is the total count (TC) of every unit.

A :class:`TreeCounts` holds the counts of every level, root first; node ``i`` of level ``j`` has the
children ``i·C … i·C + C − 1`` on level ``j + 1``. The same tree is a
:class:`~hierarchy.histograms.Hierarchy` (:meth:`TreeCounts.to_hierarchy`) whose schema
(:data:`TREE_SCHEMA`) has one cell, the unit's count: level ``j`` is named ``"level{j}"`` and node
``i`` has the geocode ``str(i)``. So the tree's measurements are a
:class:`~hierarchy.noisy.NoisyHierarchy` that every post-processor of :mod:`postproc.methods` reads,
and each of Flaxman's baselines is a measuring step (:func:`measure_tree`) followed by a
reconciling step (composed in :mod:`postproc.methods.baselines.histograms`):

``gdpc``
    ``strategy="leaves"`` (the whole ``ε`` on the leaves), reconciled by
    :func:`~postproc.methods.baselines.reconcile.bottom_up_sums` (higher levels are sums of the
    leaves).
``adpc``
    ``strategy="averaged_leaves"`` (``P`` runs of ``ε/P`` on the leaves, averaged), reconciled by
    :func:`~postproc.methods.baselines.reconcile.bottom_up_sums`.
``rdpc``
    ``strategy="every_level"`` (``ε/(J+1)`` per level), reconciled by Flaxman's raking,
    :func:`~postproc.methods.baselines.reconcile.rake` with ``clip=False``.
``hay``
    ``strategy="every_level"``, reconciled by
    :func:`~postproc.methods.baselines.least_squares.hay_consistency` (Hay et al.'s least squares).

The noise is two-sided geometric with ``z = ε/Δ`` per measurement (Δ = 1 by default: one person
added, removed or moved changes a unit's count by at most one, and the EPL of a count is measured
per unit, so GDPC's log ratio is exactly ``ε``). :func:`clip_tree` clips a tree's counts at 0.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Mapping

import numpy as np

from hierarchy.geography import Geography
from hierarchy.histograms import Hierarchy
from hierarchy.mechanisms import (
    get_mechanism,
    sample_two_sided_geometric,
    two_sided_geometric_variance,
)
from hierarchy.noisy import Measurement, NoisyHierarchy
from hierarchy.numbers import positive
from hierarchy.queries import Workload, detailed
from hierarchy.randomness import as_randomness
from hierarchy.schema import Attribute, Schema
from postproc.errors import PostprocError

__all__ = ["TreeCounts", "TREE_SCHEMA", "STRATEGIES", "children_per_node", "flaxman_population",
           "measure_tree", "clip_tree"]

#: The schema of a tree of total counts as a :class:`~hierarchy.histograms.Hierarchy`: one
#: attribute with one level, so every unit's histogram is its count.
TREE_SCHEMA = Schema((Attribute("persons", ("all",)),), name="tree_total")

#: The measurement strategies of :func:`measure_tree`.
STRATEGIES = ("leaves", "averaged_leaves", "every_level")


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

    @property
    def geography(self) -> Geography:
        """The tree as a :class:`~hierarchy.geography.Geography`: levels ``level0`` (the root) to
        ``level{J}``, node ``i`` of a level with the geocode ``str(i)`` (one object per shape,
        shared and read-only).

        Examples
        --------
        >>> TreeCounts.from_leaves([1, 2, 3, 4], children=2).geography
        Geography(level0=1, level1=2, level2=4)
        """
        return _tree_geography(self.children, self.depth)

    def to_hierarchy(self) -> Hierarchy:
        """The same tree as a :class:`~hierarchy.histograms.Hierarchy` of :data:`TREE_SCHEMA`.

        Every unit's histogram is one cell, its count, so anything that reads a Hierarchy
        (:func:`hierarchy.measurement.measure`, :func:`postproc.evaluation.evaluate.evaluate`, …)
        reads the tree.

        Returns
        -------
        Hierarchy
            int64 counts of shape (units, 1) per level.

        Raises
        ------
        PostprocError
            Counts that are not whole numbers (a Hierarchy holds exact counts).

        Examples
        --------
        >>> truth = TreeCounts.from_leaves([1, 2, 3, 4], children=2).to_hierarchy()
        >>> truth.levels, truth.totals("level1").tolist()
        (('level0', 'level1', 'level2'), [3, 7])
        """
        return Hierarchy(TREE_SCHEMA, self.geography,
                         tuple(c[:, None] for c in _exact_counts(self)))

    @classmethod
    def from_result(cls, result: Any, *, method: str | None = None,
                    provenance: Mapping[str, Any] | None = None) -> "TreeCounts":
        """The tree of a post-processor's result on tree measurements (every level kept as is).

        Parameters
        ----------
        result : Result
            Histograms of one cell per unit (:data:`TREE_SCHEMA`) on a regular tree, e.g. a
            post-processor's output for :func:`measure_tree`'s measurements.
        method : str, optional
            Default: the result's.
        provenance : dict, optional
            Default: the result's.

        Returns
        -------
        TreeCounts

        Raises
        ------
        PostprocError
            More than one cell per unit, or a geography that is not a regular tree.

        Examples
        --------
        >>> from postproc.methods.baselines.reconcile import bottom_up_sums
        >>> truth = TreeCounts.from_leaves([5, 0, 2, 9], children=2)
        >>> noisy = measure_tree(truth, 1.0, rng=3, strategy="leaves")
        >>> tree = TreeCounts.from_result(bottom_up_sums(noisy))
        >>> tree.method, tree.children, int(tree.counts[0][0]) == int(tree.leaves.sum())
        ('bottom_up', 2, True)
        """
        cells = result.schema.size
        if cells != 1:
            raise PostprocError(f"a TreeCounts holds one count per unit; this result has {cells} "
                                f"cells per unit (sum them, or use the Result itself)")
        geo = result.geography
        children = geo.n_units(1) if geo.depth > 1 else 1
        regular = all(np.array_equal(geo.parents[j], np.arange(children ** j) // children)
                      for j in range(1, geo.depth))
        if not regular:
            raise PostprocError(f"the result's geography {geo!r} is not a regular tree (node i of "
                                f"a level the parent of nodes i·C … i·C + C − 1 below it)")
        counts = tuple(np.asarray(h)[:, 0] for h in result.histograms)
        return cls(children, counts, method or result.method,
                   result.provenance if provenance is None else provenance)


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
    """A budget or sensitivity: a positive finite number, as a float
    (:func:`hierarchy.numbers.positive`, raising :class:`PostprocError`)."""
    return positive(epsilon, name, error=PostprocError)


def measure_tree(truth: TreeCounts, epsilon: float, rng: Any = None, *, strategy: str,
                 runs: int | None = None, sensitivity: float = 1.0) -> NoisyHierarchy:
    """Measure a tree's counts with two-sided geometric noise: the measuring step of the baselines.

    ``"leaves"``
        The whole budget on the leaves, ``z = ε/Δ``, drawn from ``rng`` itself (GDPC's and Clark
        & Dajani's bottom-up measurement). Variance ``V(z)`` per leaf, where
        ``V(z) = 2e^{-z}/(1 − e^{-z})²`` is the two-sided geometric variance.
    ``"averaged_leaves"``
        ``P = runs`` (default 4) independent measurements of the leaves with ``z = ε/P/Δ`` each
        (sequential composition: ``ε`` in all), run ``p`` drawn from ``rng.child(p)``, stored as
        their mean (ADPC's measurement). The mean is what a least-squares reconciler would make of
        the ``P`` measurements anyway (equal variances), so one measurement of variance
        ``V(ε/P/Δ)/P`` per leaf is kept. It is larger than GDPC's ``V(ε/Δ)`` (about ``P`` times
        when ``ε`` is small).
    ``"every_level"``
        Every node counted with ``z = ε/(J+1)/Δ``, level ``j`` drawn from ``rng.child(j)``
        (RDPC's and Hay et al.'s measurement); variance ``V(z)``.

    Parameters
    ----------
    truth : TreeCounts
        Exact counts (whole numbers).
    epsilon : float
        The total budget.
    rng : None, int, numpy.random.Generator or Randomness
        Noise source (``None``: release mode, exact sampler).
    strategy : {'leaves', 'averaged_leaves', 'every_level'}
    runs : int, optional
        ``P`` of ``"averaged_leaves"`` (default 4); refused for the other strategies.
    sensitivity : float
        ``Δ`` of one unit's count.

    Returns
    -------
    NoisyHierarchy
        Of :data:`TREE_SCHEMA` on :attr:`TreeCounts.geography`; the measured query is
        ``detailed`` (the count); int64 values, float64 for ``"averaged_leaves"``.
        ``provenance`` has the strategy, the budget, ``z`` and variance per measured level
        (``parameters``), ``runs`` and the randomness.

    Raises
    ------
    PostprocError
        An unknown strategy, a bad budget, sensitivity or ``runs``, or counts that are not whole
        numbers.

    Examples
    --------
    >>> truth = TreeCounts.from_leaves(np.full(4, 50), 2)
    >>> noisy = measure_tree(truth, 1.0, rng=1, strategy="every_level")
    >>> noisy
    NoisyHierarchy(level0[detailed]; level1[detailed]; level2[detailed]; randomness=simulation)
    >>> noisy.provenance["parameters"]["level2"]["detailed"]["z"]        # ε / (J + 1)
    0.3333333333333333
    >>> mean = measure_tree(truth, 1.0, rng=1, strategy="averaged_leaves", runs=2)
    >>> one = two_sided_geometric_variance(0.5)                          # each run: ε/2
    >>> bool(np.isclose(mean.get("level2", "detailed").variances[0, 0], one / 2))
    True
    """
    if strategy not in STRATEGIES:
        raise PostprocError(f"unknown measurement strategy {strategy!r}; use one of "
                            f"{', '.join(map(repr, STRATEGIES))}")
    if runs is not None and strategy != "averaged_leaves":
        raise PostprocError(f"runs is an option of the 'averaged_leaves' strategy, not of "
                            f"{strategy!r}; leave it out")
    epsilon = _budget(epsilon)
    delta = _budget(sensitivity, "sensitivity")
    exact = _exact_counts(truth)
    rnd = as_randomness(rng)
    bottom = truth.depth
    if strategy == "leaves":
        z = epsilon / delta
        values = {bottom: exact[bottom] + sample_two_sided_geometric(z, exact[bottom].size, rnd)}
        variance, share = two_sided_geometric_variance(z), epsilon
    elif strategy == "averaged_leaves":
        runs = 4 if runs is None else runs
        if isinstance(runs, bool) or not isinstance(runs, (int, np.integer)) or runs < 1:
            raise PostprocError(f"runs must be a positive integer, not {runs!r}")
        z = epsilon / runs / delta
        total = np.zeros(exact[bottom].size, dtype=np.float64)
        for p in range(runs):
            total += exact[bottom] + sample_two_sided_geometric(z, exact[bottom].size,
                                                                rnd.child(p))
        values = {bottom: total / runs}
        variance, share = two_sided_geometric_variance(z) / runs, epsilon
    else:
        z = epsilon / (bottom + 1) / delta
        values = {j: exact[j] + sample_two_sided_geometric(z, exact[j].size, rnd.child(j))
                  for j in range(bottom + 1)}
        variance, share = two_sided_geometric_variance(z), epsilon / (bottom + 1)
    geo = truth.geography
    measurements = {geo.levels[j]: {"detailed": Measurement(
        "detailed", v[:, None], np.broadcast_to(np.float64(variance), (v.size, 1)))}
        for j, v in values.items()}
    parameters = {geo.levels[j]: {"detailed": {"budget": share, "z": z, "variance": variance}}
                  for j in values}
    provenance = {"strategy": strategy, "epsilon": epsilon, "sensitivity": delta,
                  "mechanism": get_mechanism("geometric").to_dict(), "parameters": parameters,
                  "randomness": rnd.provenance()}
    if strategy == "averaged_leaves":
        provenance["runs"] = int(runs)
    return NoisyHierarchy(TREE_SCHEMA, geo, _TREE_WORKLOAD, measurements, {}, provenance)


_TREE_WORKLOAD = Workload((detailed(TREE_SCHEMA),))


def _exact_counts(truth: TreeCounts) -> list[np.ndarray]:
    """Every level's counts as int64; an error if some count is not a whole number."""
    out = []
    for j, c in enumerate(truth.counts):
        if c.dtype.kind == "f" and not np.array_equal(c, np.round(c)):
            raise PostprocError(f"level {j} of the tree ({truth.method!r}) has counts that are "
                                f"not whole numbers; measure exact counts (e.g. "
                                f"flaxman_population or TreeCounts.from_leaves of integers)")
        out.append(c.astype(np.int64))
    return out


@lru_cache(maxsize=16)
def _tree_geography(children: int, depth: int) -> Geography:
    """The geography of a regular tree (cached; its arrays are read-only)."""
    sizes = [children ** j for j in range(depth + 1)]
    geo = Geography(tuple(f"level{j}" for j in range(depth + 1)),
                    tuple(np.arange(n).astype(str) for n in sizes),
                    tuple([np.array([-1])] + [np.arange(n) // children for n in sizes[1:]]))
    for array in geo.geocodes + geo.parents:
        array.flags.writeable = False
    return geo


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
