"""The published residual EPL estimator of Flaxman (2019), :func:`published_epl`."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from postproc.errors import PostprocError
from postproc.evaluation.epl._checks import _as_errors, _check_memory, _degenerate, _positive, _size
from postproc.evaluation.epl._kernel import _compress, _gaussian_sums
from postproc.evaluation.epl.result import EPLResult, _undefined

__all__ = ["published_epl"]

_MAX_WINDOW = 10_000_000   # grid points of the window, as for the improved estimator's grid
_BYTES_PER_POINT = 64.0    # edges, midpoints, densities, ratios and temporaries per point


def published_epl(errors: Any, *, percentile: float = 95.0, multiplier: float = 1.0,
                  bandwidth: float = 0.1, fast: bool | None = None) -> EPLResult:
    """The published residual EPL estimator of Flaxman (2019), reproduced exactly.

    ``docs/epl.md``, "The published estimator, reproduced", states the recipe.

    With ``N`` errors ``e``: ``lo, hi`` = the ``(100 − P)``-th and ``P``-th percentiles of ``e``;
    ``b = m · max(|lo|, |hi|)``; ``edges = numpy.arange(−b, b, 1)``; ``x`` = midpoints of
    consecutive edges; ``f(x) = N · scipy.stats.gaussian_kde(e, bw_method=h)(x)``, where ``h`` is
    scipy's bandwidth *factor* (kernel sd = ``h`` × sample sd); ``EPL(x) = log f(x) / f(x + 1)``
    for consecutive points; ``EPL = max |EPL(x)|``.

    Parameters
    ----------
    errors : array_like, 1-D
        ``DP − exact`` for the units of one level and one query.
    percentile : float
        ``P`` of the window, in (50, 100].
    multiplier : float
        ``m``, the window's half-width in units of the larger percentile.
    bandwidth : float
        ``h``, scipy's bandwidth factor.
    fast : bool or None
        ``False`` evaluates with scipy (O(N × grid)); ``True`` uses the exact binned evaluation
        (distinct values × grid for integer errors, Taylor-corrected binning otherwise), equal to
        scipy's to ~1e-12 relative; ``None`` (default) picks ``True`` when ``N × grid > 4·10⁶``.

    Returns
    -------
    EPLResult
        ``ci_low`` and ``ci_high`` are ``nan`` (the method has no interval); ``x`` are the
        midpoints ``x`` of each ratio ``f(x)/f(x + 1)``. ``+inf`` with a ``reason`` when fewer than
        two errors, all errors equal, a window with fewer than two midpoints, or a KDE that
        underflows to 0 inside the window.

    Raises
    ------
    PostprocError
        Non-numeric, non-finite or non-1-D errors; a parameter out of range.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> errors = rng.laplace(0, 2.0, size=2000).round()      # log ratio ≈ 1/2 in the tails
    >>> r = published_epl(errors)
    >>> r.method, r.n, bool(0.2 < r.epl < 1.0)
    ('published', 2000, True)
    >>> bool(abs(published_epl(errors, fast=True).epl - r.epl) < 1e-9)
    True
    >>> published_epl([3, 3, 3]).reason
    'all 3 errors equal 3: the error distribution is a point mass, whose log ratio ...'
    """
    e = _as_errors(errors)
    percentile = _positive(percentile, "percentile")
    if not 50 < percentile <= 100:
        raise PostprocError(f"percentile must be in (50, 100], not {percentile}")
    multiplier = _positive(multiplier, "multiplier")
    bandwidth = _positive(bandwidth, "bandwidth (scipy's bandwidth factor)")
    n = int(e.size)
    parameters = {"percentile": percentile, "multiplier": multiplier, "bandwidth": bandwidth}
    reason = _degenerate(e)
    if reason:
        return _undefined("published", n, parameters, reason)
    lo, hi = np.percentile(e, [100 - percentile, percentile])
    b = multiplier * max(abs(float(lo)), abs(float(hi)))   # a Python float: inf, no warning
    points = 2 * b                              # may be inf for an absurd multiplier
    if points > _MAX_WINDOW:
        raise PostprocError(
            f"the window [-{b:g}, {b:g}) would hold {points:,.0f} grid points (about "
            f"{_size(_BYTES_PER_POINT * points)} of arrays, and a kernel sum at each point); "
            f"the most is {_MAX_WINDOW:,}: lower multiplier (--multiplier, now {multiplier:g}) or "
            f"percentile (--percentile, now {percentile:g}), or check the errors for outliers")
    _check_memory(_BYTES_PER_POINT * points,
                  f"the window [-{b:g}, {b:g}) of {points:,.0f} grid points",
                  f"lower multiplier (--multiplier, now {multiplier:g}) or percentile "
                  f"(--percentile, now {percentile:g})")
    edges = np.arange(-b, b, 1)
    x = (edges[:-1] + edges[1:]) / 2
    parameters["window"] = [float(-b), float(b)]
    if x.size < 2:
        return _undefined("published", n, parameters,
                          f"the window [-{b:g}, {b:g}) holds {x.size} midpoint(s), fewer than the "
                          f"two a log ratio needs; raise percentile or multiplier")
    if fast is None:
        fast = n * x.size > 4_000_000
    parameters["fast"] = bool(fast)
    if fast:
        sigma = bandwidth * math.sqrt(float(np.var(e, ddof=1)))
        values, weights = _compress(e)
        f = _gaussian_sums(values, weights, start=float(x[0]), step=1.0, size=x.size, sigma=sigma)
    else:
        from scipy.stats import gaussian_kde
        f = n * gaussian_kde(e, bw_method=bandwidth)(x)
    with np.errstate(divide="ignore", invalid="ignore"):
        epl_x = np.log(f[:-1] / f[1:])
    if not np.all(np.isfinite(epl_x)):
        where = x[np.flatnonzero(f <= 0)[0]]
        return _undefined("published", n, parameters,
                          f"the KDE underflows to 0 at x = {where:g} inside the window: the "
                          f"bandwidth factor {bandwidth:g} is too small for these errors")
    nan = float("nan")
    return EPLResult(epl=float(np.max(np.abs(epl_x))), ci_low=nan, ci_high=nan, n=n,
                     method="published", parameters=parameters, x=x[:-1], epl_x=epl_x)
