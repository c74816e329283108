"""The published residual EPL estimator of Flaxman (2019), :func:`published_epl`."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from postproc.errors import PostprocError
from postproc.evaluation.epl._checks import _as_errors, _check_memory, _degenerate, _positive, _size
from postproc.evaluation.epl._kernel import _compress, _gaussian_sums
from postproc.evaluation.epl.result import EPLResult, _undefined

__all__ = ["published_epl", "PUBLISHED_SETTINGS"]

#: The named settings of :func:`published_epl` (``settings=``): the KDE's bandwidth factor and
#: the window. ``default`` is the recipe of Petti & Flaxman's re-runs of 2020, this toolkit's
#: ``published`` method: bandwidth factor 0.1, window ``±max(|q₅|, |q₉₅|)`` of the errors.
#: ``paper`` is Flaxman (2019)'s own: bandwidth factor 0.15, window ``±1.5 × q₉₅(|e|)``, the
#: 95th percentile of the absolute errors. ``window`` names the rule: ``two-sided`` takes
#: ``m · max(|q_{100−P}|, |q_P|)`` of the errors, ``absolute`` takes ``m · q_P`` of ``|e|``.
PUBLISHED_SETTINGS = {
    "default": {"bandwidth": 0.1, "percentile": 95.0, "multiplier": 1.0, "window": "two-sided"},
    "paper": {"bandwidth": 0.15, "percentile": 95.0, "multiplier": 1.5, "window": "absolute"},
}

_MAX_WINDOW = 10_000_000   # grid points of the window, as for the improved estimator's grid
_BYTES_PER_POINT = 64.0    # edges, midpoints, densities, ratios and temporaries per point


def published_epl(errors: Any, *, settings: str = "default", percentile: float | None = None,
                  multiplier: float | None = None, bandwidth: float | None = None,
                  fast: bool | None = None) -> EPLResult:
    """The published residual EPL estimator of Flaxman (2019), reproduced exactly.

    ``docs/epl.md``, "The published estimator, reproduced", states the recipe.

    With ``N`` errors ``e``: ``lo, hi`` = the ``(100 − P)``-th and ``P``-th percentiles of ``e``;
    ``b = m · max(|lo|, |hi|)``; ``edges = numpy.arange(−b, b, 1)``; ``x`` = midpoints of
    consecutive edges; ``f(x) = N · scipy.stats.gaussian_kde(e, bw_method=h)(x)``, where ``h`` is
    scipy's bandwidth *factor* (kernel sd = ``h`` × sample sd); ``EPL(x) = log f(x) / f(x + 1)``
    for consecutive points; ``EPL = max |EPL(x)|``. With ``settings="paper"`` (Flaxman 2019's
    own settings) the window is ``b = m · q_P(|e|)``, the ``P``-th percentile of the absolute
    errors, with ``m = 1.5`` and ``h = 0.15`` (:data:`PUBLISHED_SETTINGS`).

    Parameters
    ----------
    errors : array_like, 1-D
        ``DP − exact`` for the units of one level and one query.
    settings : {'default', 'paper'}
        The named settings the other options default to: ``default`` (bandwidth factor 0.1,
        window ``±max(|q₅|, |q₉₅|)``, Petti & Flaxman's re-runs) or ``paper`` (Flaxman 2019:
        bandwidth factor 0.15, window ``±1.5 × q₉₅(|e|)``). An option passed explicitly
        overrides its setting; the window rule is the settings'.
    percentile : float, optional
        ``P`` of the window, in (50, 100] (95 in both settings).
    multiplier : float, optional
        ``m``, the window's half-width in units of the percentile (1, or 1.5 for ``paper``).
    bandwidth : float, optional
        ``h``, scipy's bandwidth factor (0.1, or 0.15 for ``paper``).
    fast : bool or None
        ``False`` evaluates with scipy (O(N × grid)); ``True`` uses the exact binned evaluation
        (distinct values × grid for integer errors, Taylor-corrected binning otherwise), equal to
        scipy's to ~1e-12 relative; ``None`` (default) picks ``True`` when ``N × grid > 4·10⁶``.

    Returns
    -------
    EPLResult
        ``ci_low`` and ``ci_high`` are ``nan`` (the method has no interval); ``x`` are the
        midpoints ``x`` of each ratio ``f(x)/f(x + 1)``; ``parameters`` records the ``settings``
        and the ``percentile``, ``multiplier`` and ``bandwidth`` used. ``+inf`` with a ``reason``
        when fewer than two errors, all errors equal, a window with fewer than two midpoints, or
        a KDE that underflows to 0 inside the window.

    Raises
    ------
    PostprocError
        Non-numeric, non-finite or non-1-D errors; a parameter out of range; unknown settings.

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
    >>> paper = published_epl(errors, settings="paper")       # Flaxman (2019)'s own settings
    >>> paper.parameters["bandwidth"], paper.parameters["multiplier"], paper.parameters["window"]
    (0.15, 1.5, [-9.0, 9.0])
    """
    e = _as_errors(errors)
    parameters = _settings(settings, percentile, multiplier, bandwidth)
    percentile, multiplier, bandwidth = (parameters[name] for name in
                                         ("percentile", "multiplier", "bandwidth"))
    n = int(e.size)
    reason = _degenerate(e)
    if reason:
        return _undefined("published", n, parameters, reason)
    if PUBLISHED_SETTINGS[settings]["window"] == "absolute":
        reach = float(np.percentile(np.abs(e), percentile))
    else:
        lo, hi = np.percentile(e, [100 - percentile, percentile])
        reach = max(abs(float(lo)), abs(float(hi)))
    b = multiplier * reach                      # a Python float: inf, no warning
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


def _settings(settings: Any, percentile: Any, multiplier: Any, bandwidth: Any) -> dict[str, Any]:
    """The checked options of :func:`published_epl`, each defaulting to its named settings'."""
    if not isinstance(settings, str) or settings not in PUBLISHED_SETTINGS:
        raise PostprocError(f"unknown settings {settings!r} of the published estimator; use one "
                            f"of {', '.join(PUBLISHED_SETTINGS)}")
    chosen = PUBLISHED_SETTINGS[settings]
    percentile = _positive(chosen["percentile"] if percentile is None else percentile,
                           "percentile")
    if not 50 < percentile <= 100:
        raise PostprocError(f"percentile must be in (50, 100], not {percentile}")
    multiplier = _positive(chosen["multiplier"] if multiplier is None else multiplier,
                           "multiplier")
    bandwidth = _positive(chosen["bandwidth"] if bandwidth is None else bandwidth,
                          "bandwidth (scipy's bandwidth factor)")
    return {"percentile": percentile, "multiplier": multiplier, "bandwidth": bandwidth,
            "settings": settings}
