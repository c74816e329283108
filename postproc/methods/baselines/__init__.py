"""Baselines to compare post-processors against (docs/experiments.md, docs/metrics.md).

A baseline is a measuring step — a strategy that returns a
:class:`~hierarchy.noisy.NoisyHierarchy` — and a reconciling step, a post-processor that takes
one and returns a :class:`~postproc.result.Result` (registered in :mod:`postproc.methods`, so the
same measurements can go to TopDown or any other post-processor instead).

Measuring: :func:`measure_tree` (Flaxman's tree: ``"leaves"``, ``"averaged_leaves"``,
``"every_level"``) and :func:`measure_bottom` (the bottom level's detailed cells, bottom-up's).

Reconciling a NoisyHierarchy: :func:`bottom_up_sums`, :func:`rake` (``clip=False``: Flaxman's
rule), :func:`clip_scale`, :func:`level_least_squares`, :func:`hay_consistency` (closed-form
consistent least squares of every measurement).

The two composed, as published: on Flaxman's (2019) synthetic population of total counts on a
regular tree (:func:`flaxman_population`, a :class:`TreeCounts`), :func:`gdpc`, :func:`adpc`,
:func:`rdpc` and :func:`hay`, each returning a TreeCounts; on the hierarchy data model,
:func:`bottom_up` (Clark & Dajani 2019). Adjustments: :func:`clip_tree`, :func:`clip_negative`,
:func:`calibrate_to_totals`. On both: :func:`srs`, a simple random sample of persons weighted
``1/f``.

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
>>> noisy = measure_tree(pop, 1.0, rng=1, strategy="every_level")     # RDPC's measurements
>>> raked = rake(noisy, clip=False)                                    # RDPC's reconciler
>>> bool((TreeCounts.from_result(raked).leaves == rdpc(pop, 1.0, rng=1).leaves).all())
True
"""

from postproc.methods.baselines.histograms import (
    adpc,
    bottom_up,
    calibrate_to_totals,
    clip_negative,
    gdpc,
    measure_bottom,
    rdpc,
    sums_from_bottom,
)
from postproc.methods.baselines.least_squares import hay, hay_consistency, tree_least_squares
from postproc.methods.baselines.reconcile import (
    bottom_up_sums,
    clip_scale,
    level_least_squares,
    rake,
)
from postproc.methods.baselines.sampling import sample_counts, srs
from postproc.methods.baselines.tree import (
    STRATEGIES,
    TREE_SCHEMA,
    TreeCounts,
    children_per_node,
    clip_tree,
    flaxman_population,
    measure_tree,
)

__all__ = ["TreeCounts", "TREE_SCHEMA", "STRATEGIES", "children_per_node", "flaxman_population",
           "measure_tree", "measure_bottom",
           "gdpc", "adpc", "rdpc", "hay", "clip_tree", "tree_least_squares", "hay_consistency",
           "clip_negative", "bottom_up", "calibrate_to_totals", "sums_from_bottom",
           "sample_counts", "srs", "level_least_squares", "clip_scale", "rake", "bottom_up_sums"]
