"""Simple random sampling (SRS) of persons, weighted ``1/f``: the survey baseline (docs/metrics.md).

A sample of ``n = round(f · N)`` persons is drawn without replacement from all ``N`` persons, and
every sampled person counts ``1/f``. The sampled counts of the bottom-level cells are then one
multivariate hypergeometric draw (numpy's ``multivariate_hypergeometric``, ``'marginals'``
method: one pass over the cells, no per-person work), and every higher level is a sum. Each
estimated count ``ĉ = s/f`` is unbiased: ``E[s] = n·c/N = c·f`` exactly when ``f·N`` is an integer
(otherwise ``E[ĉ] = c · n/(fN)``), with ``Var ĉ = c (N − c)(N − n) / (f² N (N − 1)) · n/N``.
Sampling is not a privacy mechanism here: it draws from the ``generator`` of ``rng``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from hierarchy.histograms import Hierarchy
from hierarchy.randomness import as_randomness
from postproc.errors import PostprocError
from postproc.methods.baselines.histograms import _default_workload, sums_from_bottom
from postproc.methods.baselines.tree import TreeCounts
from postproc.result import Result

__all__ = ["sample_counts", "srs"]


def sample_counts(counts: Any, fraction: float, rng: Any = None) -> np.ndarray:
    """Counts of a without-replacement sample of ``round(f · Σcounts)`` persons, any shape.

    Parameters
    ----------
    counts : array_like of non-negative int
        Persons per cell (any shape).
    fraction : float
        ``f`` in (0, 1].
    rng : None, int, numpy.random.Generator or Randomness
        Sampling randomness (its ``generator``).

    Returns
    -------
    numpy.ndarray of int64, same shape
        Sampled persons per cell (not yet weighted).

    Raises
    ------
    PostprocError
        A fraction outside (0, 1] or negative or non-integer counts.

    Examples
    --------
    >>> s = sample_counts([[10, 0], [30, 60]], 0.5, rng=0)
    >>> int(s.sum()), bool((s <= [[10, 0], [30, 60]]).all())
    (50, True)
    """
    fraction = float(fraction)
    if not (0 < fraction <= 1):
        raise PostprocError(f"the sampling fraction must be in (0, 1], not {fraction}")
    counts = np.asarray(counts)
    if counts.dtype.kind not in "iu" and not np.array_equal(counts, np.rint(counts)):
        raise PostprocError("counts to sample must be integers")
    counts = counts.astype(np.int64)
    if counts.size and counts.min() < 0:
        raise PostprocError("counts to sample must be non-negative")
    flat = counts.ravel()
    population = int(flat.sum())
    size = int(round(fraction * population))
    generator = as_randomness(rng).generator
    sampled = generator.multivariate_hypergeometric(flat, size, method="marginals")
    return sampled.astype(np.int64).reshape(counts.shape)


def srs(truth: Hierarchy | TreeCounts, fraction: float, rng: Any = None
        ) -> Result | TreeCounts:
    """Simple random sample of persons at ``fraction``, each weighted ``1/fraction``.

    Parameters
    ----------
    truth : Hierarchy or TreeCounts
        Exact counts: the bottom level is sampled, the levels above are sums.
    fraction : float
        ``f`` in (0, 1].
    rng : None, int, numpy.random.Generator or Randomness

    Returns
    -------
    Result or TreeCounts
        ``method = "srs f=<f>"``, float64 estimates (multiples of ``1/f``).

    Raises
    ------
    PostprocError
        A bad fraction.

    Examples
    --------
    >>> pop = TreeCounts.from_leaves(np.full(100, 50), 10)
    >>> est = srs(pop, 0.2, rng=1)
    >>> est.method, float(est.counts[0][0])
    ('srs f=0.2', 5000.0)
    """
    name = f"srs f={float(fraction):g}"
    provenance = {"method": "srs", "fraction": float(fraction),
                  "randomness": as_randomness(rng).provenance()}
    if isinstance(truth, TreeCounts):
        sampled = sample_counts(truth.leaves, fraction, rng) / float(fraction)
        return TreeCounts.from_leaves(sampled, truth.children, depth=truth.depth, method=name,
                                      provenance=provenance)
    if not isinstance(truth, Hierarchy):
        raise PostprocError(f"srs needs a Hierarchy or TreeCounts, not {type(truth).__name__}")
    sampled = sample_counts(truth.counts[-1], fraction, rng) / float(fraction)
    return Result(name, truth.schema, truth.geography, _default_workload(truth.schema),
                    sums_from_bottom(truth.geography, sampled), provenance)
