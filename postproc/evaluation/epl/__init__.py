"""Empirical privacy loss (EPL) of post-processed counts, estimated from their errors.

The estimators are stated in ``docs/epl.md``.

A mechanism whose errors ``e = DP − exact`` have probability function ``p`` leaks, at output ``x``,
the log ratio ``log p(x) / p(x + 1)`` between a count and its neighbour one person away; the EPL is
the largest absolute log ratio. For the two-sided geometric mechanism of parameter ``z``
(``P[e = k] ∝ e^{−z|k|}``) it is exactly ``z``. Three estimators share one result type,
:class:`EPLResult`, and one entry point, :func:`estimate_epl`:

``published`` (:func:`published_epl`)
    The residual estimator of Flaxman (2019), reproduced exactly: scipy's Gaussian KDE with a
    bandwidth *factor* of 0.1, evaluated at the midpoints of ``numpy.arange(−b, b, 1)`` inside a
    95 % percentile window. Exact scipy evaluation is O(n × grid); for large inputs an exact
    binned evaluation gives the same numbers to ~1e-12 in a fraction of the time.
``improved`` (:func:`improved_epl`, the default)
    The largest log ratio of neighbouring bins of a smoothed pmf over the central window of the
    errors (5th to 95th percentile): ``log E[count]`` is fitted on each side of the median by a
    Poisson regression of the simplest shape the data do not reject — straight (geometric
    noise), quadratic (Gaussian noise), or a penalized spline — with a parametric-bootstrap
    interval that always contains the estimate. Where the errors cannot pin the loss down (too
    few for their spread, or too concentrated) it returns a one-sided lower bound instead
    (``EPLResult.kind == "bound"``, ``EPL ≥ ci_low``).
``direct`` (:func:`direct_epl`)
    Repeated runs of a mechanism on a dataset ``D`` and on a neighbour ``D′``: the largest
    ``|log p̂(k) − log p̂′(k)|`` over the window, each pmf fitted by the same smoother, with the
    same interval and the same rule for a bound.

Beside them, :func:`direct_tail_epl` estimates the loss on the tail events ``{error ≥ k}`` and
``{error ≤ −k}`` from the same runs on ``D`` and ``D′`` (a :class:`TailEPL` per threshold, each
with the counts behind it, or *not estimable* when a tail holds too few runs), and
:func:`exact_tail_epl` computes it for additive noise of known pmf. ``published_epl(...,
settings="paper")`` runs the published recipe with Flaxman (2019)'s own KDE settings
(:data:`PUBLISHED_SETTINGS`).

``docs/epl.md`` argues the design and reports a simulation study of bias, coverage and the rate
of numbers, bounds and undefined results (``benchmarks/bench_epl_study.py``).

Modules: :mod:`~postproc.evaluation.epl.result` (:class:`EPLResult`),
:mod:`~postproc.evaluation.epl.published`,
:mod:`~postproc.evaluation.epl.improved` (with binning and windows),
:mod:`~postproc.evaluation.epl.direct`, :mod:`~postproc.evaluation.epl.tail` (tail events),
``_smooth`` (the penalized Poisson fits, their draws, and the maximum with its interval) and
``_kernel`` (the Gaussian kernel sums of the published estimator's fast path). Every public
name is importable from :mod:`postproc.evaluation.epl` itself.
"""

from __future__ import annotations

import inspect
from typing import Any

import numpy as np  # noqa: F401  (the doctest of estimate_epl)

from postproc.errors import PostprocError

# private names tests/test_epl.py reaches as ``postproc.evaluation.epl._name``
from postproc.evaluation.epl._kernel import _compress, _gaussian_sums  # noqa: F401
from postproc.evaluation.epl.direct import direct_epl
from postproc.evaluation.epl.improved import (  # noqa: F401
    _order_statistics,
    _percentiles,
    default_bandwidth,
    improved_epl,
)
from postproc.evaluation.epl.published import PUBLISHED_SETTINGS, published_epl
from postproc.evaluation.epl.result import METHODS, EPLResult, epl_kind, epl_text, unbounded
from postproc.evaluation.epl.tail import MIN_TAIL_COUNT, TailEPL, direct_tail_epl, exact_tail_epl

__all__ = ["EPLResult", "METHODS", "estimate_epl", "published_epl", "improved_epl", "direct_epl",
           "default_bandwidth", "unbounded", "epl_kind", "epl_text", "direct_tail_epl",
           "exact_tail_epl", "TailEPL", "MIN_TAIL_COUNT", "PUBLISHED_SETTINGS"]


def estimate_epl(errors: Any, *, method: str = "improved", **params: Any) -> EPLResult:
    """Estimate the empirical privacy loss of ``errors`` with ``method``.

    Parameters
    ----------
    errors : array_like, 1-D
        ``DP − exact`` of one level and query; for ``method="direct"``, the outputs of the runs on
        ``D`` (pass those on ``D′`` as ``neighbour=``).
    method : {'improved', 'published', 'direct'}
        Which estimator: :func:`improved_epl` (default), :func:`published_epl`,
        :func:`direct_epl`.
    **params
        That estimator's keyword options.

    Returns
    -------
    EPLResult

    Raises
    ------
    PostprocError
        Unknown method, an option the method does not take, or bad input.

    Examples
    --------
    >>> errors = np.random.default_rng(0).laplace(0, 2, 5000).round()
    >>> estimate_epl(errors, method="published").method
    'published'
    >>> estimate_epl(errors, method="improved", percentile=90)
    Traceback (most recent call last):
    ...
    postproc.errors.PostprocError: method 'improved' takes no option 'percentile'; its options are
    bandwidth, reach, precision, n_boot, level, rng
    """
    estimators = {"improved": improved_epl, "published": published_epl, "direct": direct_epl}
    if method not in estimators:
        raise PostprocError(f"unknown EPL method {method!r}; use one of {', '.join(METHODS)}")
    signature = inspect.signature(estimators[method])
    options = [p.name for p in signature.parameters.values() if p.kind is p.KEYWORD_ONLY]
    if method == "direct":
        if "neighbour" not in params:
            raise PostprocError("method 'direct' needs neighbour=, the outputs of the runs on D′")
        return direct_epl(errors, params.pop("neighbour"), **_known(params, method, options))
    return estimators[method](errors, **_known(params, method, options))


def _known(params: dict, method: str, options: list[str]) -> dict:
    unknown = sorted(set(params) - set(options))
    if unknown:
        raise PostprocError(f"method {method!r} takes no option {unknown[0]!r}; its options are "
                            f"{', '.join(options)}")
    return params
