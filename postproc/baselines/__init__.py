"""Baselines to compare post-processors against (SPEC §5, §7).

On Flaxman's (2019) synthetic population of total counts on a regular tree
(:mod:`postproc.baselines.tree`): :func:`flaxman_population`, :func:`gdpc`, :func:`adpc`,
:func:`rdpc`, :func:`hay` (closed-form least squares) and :func:`clip_tree`.

On the hierarchy data model (:class:`~hierarchy.histograms.Hierarchy`,
:class:`~hierarchy.noisy.NoisyHierarchy`), each returning a :class:`~postproc.result.Result`:
:func:`hay_consistency` (closed-form consistent least squares of every measurement),
:func:`clip_negative`, :func:`bottom_up` and :func:`calibrate_to_totals`.

On both: :func:`srs`, a simple random sample of persons weighted ``1/f``.

All privacy noise is two-sided geometric from :mod:`hierarchy.mechanisms`, drawn through an
``rng`` normalised by :func:`hierarchy.randomness.as_randomness` (``None`` is release mode; an
integer seed is simulation mode, reproducible and unsafe for releases).

Examples
--------
>>> pop = flaxman_population(200_000, levels=3, mean_leaf=20, rng=0)
>>> pop.children, pop.leaves.size
(21, 9261)
>>> [type(f(pop, 1.0, rng=1)).__name__ for f in (gdpc, adpc, rdpc, hay)]
['TreeCounts', 'TreeCounts', 'TreeCounts', 'TreeCounts']
"""

from postproc.baselines.histograms import (bottom_up, calibrate_to_totals, clip_negative,
                                           sums_from_bottom)
from postproc.baselines.least_squares import hay, hay_consistency, tree_least_squares
from postproc.baselines.reconcile import bottom_up_sums, clip_scale, level_least_squares, rake
from postproc.baselines.sampling import sample_counts, srs
from postproc.baselines.tree import (TreeCounts, adpc, children_per_node, clip_tree,
                                     flaxman_population, gdpc, rdpc)

__all__ = ["TreeCounts", "children_per_node", "flaxman_population",
           "gdpc", "adpc", "rdpc", "hay", "clip_tree", "tree_least_squares", "hay_consistency",
           "clip_negative", "bottom_up", "calibrate_to_totals", "sums_from_bottom",
           "sample_counts", "srs", "level_least_squares", "clip_scale", "rake", "bottom_up_sums"]
