"""The improved EPL estimator, :func:`improved_epl`: the largest log ratio of a smoothed pmf.

Also the binning, window and per-side fitting that the direct estimator shares.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from hierarchy.randomness import as_randomness
from postproc.evaluation.epl._checks import _as_errors, _check_memory, _degenerate, _positive
from postproc.evaluation.epl._kernel import _compress, _is_integer
from postproc.evaluation.epl._smooth import (_MAX_BINS, Functionals, SideFit, fit_side, functionals,
                                  max_with_interval)
from postproc.evaluation.epl.result import EPLResult, _undefined
from postproc.errors import PostprocError

__all__ = ["improved_epl", "default_bandwidth"]

_BYTES_PER_DRAW = 8.0 * 4   # per drawn number: the normal deviate, the curve, its standardization


def _maximum(curve: Functionals, *, level: float, n_boot: int, rng: Any, what: str, fix: str):
    """:func:`max_with_interval` of ``curve``, after checking its draws fit in memory."""
    if n_boot:
        _check_memory(_BYTES_PER_DRAW * n_boot * (curve.draw_size + curve.values.size), what, fix)
    generator = as_randomness(rng).generator if n_boot else None
    return max_with_interval(curve, level=level, n_boot=n_boot, generator=generator)


def default_bandwidth(errors: Any) -> float:
    """The improved estimator's default resolution ``w`` in count units: the errors' bin width.

    Errors are counted in bins of width ``w`` and the log ratio is taken between neighbouring
    bins, per unit count. ``w`` is the spacing of the lattice the errors lie on when that is at
    least 1 (the greatest common divisor of the differences of integer errors; a regular spacing
    of non-integer ones, such as weighted sample counts; three distinct values at least), else 1.

    Parameters
    ----------
    errors : array_like, 1-D
        The errors, at least two, not all equal.

    Returns
    -------
    float

    Raises
    ------
    PostprocError
        Fewer than two errors, all equal, or bad input.

    Examples
    --------
    >>> default_bandwidth([-2, -1, 0, 0, 1, 3])
    1.0
    >>> default_bandwidth([-4, 0, 6, 10])          # every error even
    2.0
    >>> default_bandwidth([-0.2, 0.0, 0.1, 0.3])
    1.0
    >>> default_bandwidth([0.5, 3.0, 10.5])         # a lattice of spacing 2.5
    2.5
    """
    e = _as_errors(errors)
    reason = _degenerate(e)
    if reason:
        raise PostprocError(f"no bandwidth: {reason}")
    values, _ = _compress(e, _is_integer(e))
    return _lattice_spacing(np.unique(values))


def _lattice_spacing(distinct: np.ndarray) -> float:
    """Spacing (≥ 1) of the lattice the sorted distinct values lie on, or 1.

    Two values always lie on a lattice, so at least three are needed to call it one."""
    gaps = np.diff(distinct)
    if gaps.size < 2 or gaps.size > 1_000_000:
        return 1.0
    if np.array_equal(distinct, np.rint(distinct)):
        spacing = float(np.gcd.reduce(gaps.astype(np.int64)))
    else:
        spacing = float(gaps.min())
        steps = gaps / spacing
        if spacing < 1 or np.max(np.abs(steps - np.rint(steps))) > 1e-6:
            return 1.0
    return max(1.0, spacing)


def _order_statistics(e: np.ndarray, values: np.ndarray, weights: np.ndarray):
    """A function from 0-based ranks to order statistics of ``e``.

    From the cumulative counts when ``e`` was compressed to sorted distinct values (O(distinct)),
    otherwise one ``np.partition`` per call.
    """
    if values.size < e.size:
        cumulative = np.cumsum(weights)
        return lambda ranks: values[np.searchsorted(cumulative, ranks, side="right")]
    return lambda ranks: np.partition(e, np.unique(ranks))[ranks]


def _percentiles(order_statistic, n: int, percentiles) -> np.ndarray:
    """numpy's default (linear) percentiles from a function of ranks, for all at once."""
    position = (n - 1) * np.asarray(percentiles, dtype=float) / 100
    below = np.floor(position).astype(np.int64)
    stats = order_statistic(np.r_[below, np.minimum(below + 1, n - 1)])
    a, b, t = stats[:below.size], stats[below.size:], position - below
    return np.where(t >= 0.5, b - (b - a) * (1 - t), a + (b - a) * t)   # numpy's lerp


def _bootstrap_options(n_boot: Any, level: Any) -> tuple[int, float]:
    level = _positive(level, "level")
    if not 0.5 <= level < 1:
        raise PostprocError(f"level must be in [0.5, 1), not {level}")
    if isinstance(n_boot, bool) or not isinstance(n_boot, (int, np.integer)) or n_boot < 0:
        raise PostprocError(f"n_boot must be a non-negative integer, not {n_boot!r}")
    return int(n_boot), level


def _precision(value: Any) -> float:
    value = _positive(value, "precision")
    if value >= 1:
        raise PostprocError(f"precision must be in (0, 1), a relative standard error such as "
                            f"0.1, not {value}")
    return value


def _reach(value: Any) -> float:
    reach = _positive(value, "reach")
    if not 50 < reach <= 100:
        raise PostprocError(f"reach must be a percentile in (50, 100], not {value}")
    return reach


def _bins(values: np.ndarray, width: float, name: str, option: str) -> np.ndarray:
    """``round(values / width)`` as integers, or a PostprocError if they do not fit in int64."""
    scaled = values / width
    if np.max(np.abs(scaled)) >= 2.0 ** 52:
        raise PostprocError(f"the {name} reach {np.max(np.abs(values)):g}: bins of width "
                            f"{width:g} would number more than 2^52; pass a larger {option}, or "
                            f"check the {name} for outliers")
    return np.floor(scaled + 0.5).astype(np.int64)


class Binned:
    """Integer bins of a sample: sorted distinct bins and counts, order statistics, lookups."""

    def __init__(self, bins: np.ndarray):
        self.n = int(bins.size)
        self.values, self.counts = _compress(bins.astype(float), True)
        self.values = self.values.astype(np.int64)
        self._order = _order_statistics(bins, self.values, self.counts)

    def percentiles(self, q) -> np.ndarray:
        return _percentiles(self._order, self.n, q)

    def median(self) -> int:
        return int(self._order(np.array([(self.n - 1) // 2]))[0])

    def window(self, reach: float) -> tuple[int, int]:
        low, high = self.percentiles([100 - reach, reach])
        return int(math.floor(low)), int(math.ceil(high))

    def at(self, bins: np.ndarray) -> np.ndarray:
        """Counts at the given bins (0 where no value fell)."""
        where = np.searchsorted(self.values, bins)
        where = np.minimum(where, self.values.size - 1)
        return np.where(self.values[where] == bins, self.counts[where], 0.0)

    def side(self, centre: int, sign: int, span: int) -> tuple[np.ndarray, int]:
        """Counts at ``centre + sign·u``, ``u = 0 … U``, for a side whose window edge is ``span``
        bins away: ``U`` extends ``span + 1`` beyond the edge, as far as the data reach, and is at
        least 3 (so a side has the four bins a third-difference penalty needs)."""
        far = (self.values[-1] - centre) if sign > 0 else (centre - self.values[0])
        extent = max(3, min(2 * span + 1, max(span, int(far))))
        if extent + 1 > _MAX_BINS:
            raise PostprocError(
                f"the window reaches {span:,} bins from the centre: a fit over {extent + 1:,} "
                f"bins is too large; pass a larger bandwidth (bin width), or check the errors "
                f"for outliers")
        return self.at(centre + sign * np.arange(extent + 1)), extent


def _side_log_ratios(fit: SideFit, sign: int, centre: int, span: int, first_column: int,
                     scale: float):
    """Log ratios ``(η(x) − η(x+1))/w`` of the pairs ``(x, x+1)`` in a side's part of the window.

    Right side (``sign = 1``): ``x = centre + u``, ``u = 0 … span−1``, ratio ``η_u − η_{u+1}``.
    Left side: ``x = centre − u − 1``, ratio ``η_{u+1} − η_u``.
    """
    u = np.arange(span)
    rows = fit.rows(u) - fit.rows(u + 1)
    x = centre + u if sign > 0 else centre - u - 1
    values, block = functionals(fit, rows, first_column + np.arange(span), sign / scale)
    return x, values, block


def improved_epl(errors: Any, *, bandwidth: float | None = None, reach: float = 95.0,
                 precision: float = 0.1, n_boot: int = 1000, level: float = 0.95,
                 rng: Any = None) -> EPLResult:
    r"""Our default EPL estimator: the largest log ratio of a smoothed pmf, within a window.

    **Estimand.** Count the errors in bins of width ``w`` (``bandwidth``; default
    :func:`default_bandwidth`, 1 for integer errors) and let ``p`` be the bins' pmf. Over the
    *window* ``W = [⌊q_{100−r}⌋, ⌈q_r⌉]`` of bins (the ``(100 − r)``-th and ``r``-th percentiles,
    ``r = reach``), the EPL is

    .. math:: \theta_W = \max_{x,\ x+1 \in W} |\log p(x) - \log p(x+1)| / w.

    For the two-sided geometric mechanism it is ``z`` whatever ``W``; for a discrete Gaussian
    of variance ``σ²`` it is ``(2 max(|W_lo|, W_hi) − 1)/(2σ²)``, so it depends on the window.

    **Estimator.** Split the bins at the median ``m`` (additive noise has its cusp there) and fit
    ``log E[count]`` on each side, from ``m`` out to one window-width beyond the window's edge, by
    a penalized Poisson regression whose penalty (third differences) leaves every quadratic
    unpenalized, with its smoothing parameter chosen by marginal likelihood (see
    ``postproc/evaluation/epl/_smooth.py`` and ``docs/epl.md``). The fitted log ratios ``L̂(x)`` of the pairs
    in ``W`` form the curve; the estimate is ``θ̂ = max |L̂(x)|``.

    **Undefined.** The *contenders* are the pairs whose ratio could be the largest,
    ``|L̂(x)| + Φ⁻¹(level)·s(x) ≥ θ̂`` (``s`` the standard error). If one of them is known less
    precisely than ``precision · θ̂`` (one standard error), the EPL is undefined: the errors
    cannot pin the maximum down, typically because ``n`` is small relative to the errors' spread.
    It is also undefined for fewer than two errors, all errors equal, a window of one bin, or a
    side with fewer than two occupied bins.

    **Interval.** ``[max(|L̂| − c_sup s), max(|L̂| + c s)]``, ``c = Φ⁻¹(level)``, ``c_sup`` the
    ``level`` quantile of the largest standardized deviation over ``n_boot`` draws of the fits
    (a parametric bootstrap). It covers with probability ≥ ``2·level − 1`` in every
    configuration and about ``level`` both when the ratios tie (the geometric) and when one
    dominates; the estimate always lies inside it.

    Parameters
    ----------
    errors : array_like, 1-D
        ``DP − exact``; integers or not.
    bandwidth : float, optional
        Bin width ``w`` in count units (the resolution); default :func:`default_bandwidth`.
    reach : float
        Percentile, in (50, 100], of the window's edges.
    precision : float
        Largest standard error, relative to the estimate, of a contender for the maximum.
    n_boot : int
        Draws of the fits that calibrate the interval (0 for no interval; the estimate and its
        definedness do not depend on them).
    level : float
        Confidence level of the interval, in [0.5, 1).
    rng : None, int, numpy.random.Generator or hierarchy.randomness.Randomness
        Randomness for the draws (``None``: unpredictable).

    Returns
    -------
    EPLResult
        The curve holds the window's pairs ``x`` (left bin, in error units) and ``L̂(x)``;
        ``parameters`` records ``bandwidth``, ``reach``, ``precision``, ``n_boot``, ``level``,
        the ``window`` (error units), the ``centre``, ``argmax``, ``max_se`` (the largest standard
        error of a contender) and ``log10_lambda`` (each side's smoothing, relative to its data;
        ``inf`` for a quadratic fit). An undefined result also records the ``estimate`` it
        withheld.

    Raises
    ------
    PostprocError
        Bad errors or parameters.

    Examples
    --------
    >>> from hierarchy.mechanisms import sample_two_sided_geometric
    >>> z = 0.5
    >>> r = improved_epl(sample_two_sided_geometric(z, 100_000, 1), rng=0)
    >>> r.n, bool(r.ci_low <= r.epl <= r.ci_high), bool(abs(r.epl - z) < 0.05)
    (100000, True, True)
    >>> print(improved_epl(sample_two_sided_geometric(0.01, 300, 2)).reason)
    the log ratio at x = ... could be the largest but has standard error ..., more than precision = 0.1 × the estimate ...: too few errors (300) for their spread ...
    >>> improved_epl(np.zeros(50)).reason
    'all 50 errors equal 0: the error distribution is a point mass (e.g. a level held invariant), so its log ratio is undefined'
    """
    e = _as_errors(errors)
    n = int(e.size)
    reach = _reach(reach)
    precision = _precision(precision)
    n_boot, level = _bootstrap_options(n_boot, level)
    parameters: dict[str, Any] = {
        "bandwidth": None if bandwidth is None else _positive(bandwidth, "bandwidth"),
        "reach": reach, "precision": precision, "n_boot": n_boot, "level": level}
    reason = _degenerate(e)
    if reason:
        return _undefined("improved", n, parameters, reason)
    if parameters["bandwidth"] is None:
        distinct, _ = _compress(e, _is_integer(e))
        parameters["bandwidth"] = _lattice_spacing(np.unique(distinct))
    w = parameters["bandwidth"]
    binned = Binned(_bins(e, w, "errors", "bandwidth"))
    low, high = binned.window(reach)
    centre = binned.median()
    parameters["window"] = [low * w, high * w]
    parameters["centre"] = centre * w
    if high - low < 1:
        return _undefined("improved", n, parameters,
                          f"the window [{low * w:g}, {high * w:g}] (the {100 - reach:g}th to "
                          f"{reach:g}th percentiles) holds one bin: no pair of neighbouring "
                          f"values to compare; pass a larger reach or a smaller bandwidth")
    xs, values, blocks, lambdas = [], [], [], []
    for sign, span in ((-1, centre - low), (1, high - centre)):
        if span <= 0:
            continue
        counts, _ = binned.side(centre, sign, span)
        fit = fit_side(counts)
        if fit is None:
            side = "left" if sign < 0 else "right"
            return _undefined("improved", n, parameters,
                              f"fewer than two distinct error values on the {side} of the centre "
                              f"{centre * w:g}: no log ratio can be fitted there; pass more errors "
                              f"or a smaller bandwidth")
        x, v, block = _side_log_ratios(fit, sign, centre, span, sum(a.size for a in values), w)
        xs.append(x)
        values.append(v)
        blocks.append(block)
        lambdas.append(fit.log_lambda)
    parameters["log10_lambda"] = lambdas
    curve = Functionals(values=np.concatenate(values), blocks=tuple(blocks))
    best = _maximum(curve, level=level, n_boot=n_boot, rng=rng,
                    what=f"the bootstrap (n_boot = {n_boot} replicates, each a resample of the "
                         f"fitted log-ratio curve at {curve.values.size} pairs from "
                         f"{curve.draw_size} coefficients)",
                    fix="lower n_boot (--n-boot; 1,000 draws give a stable 95% interval), or "
                        "pass n_boot = 0 (--n-boot 0) for no interval")
    x = np.concatenate(xs).astype(float)
    parameters["argmax"] = float(x[best.argmax] * w)
    parameters["max_se"] = best.max_se
    if not best.max_se <= precision * best.estimate:
        parameters["estimate"] = best.estimate
        at = x[best.worst] * w
        return _undefined(
            "improved", n, parameters,
            f"the log ratio at x = {at:g} could be the largest but has standard error "
            f"{best.max_se:.3g}, more than precision = {precision:g} × the estimate "
            f"{best.estimate:.3g}: too few errors ({n}) for their spread (window [{low * w:g}, "
            f"{high * w:g}]); pass more errors, a smaller reach, or a larger precision")
    order = np.argsort(x, kind="stable")
    return EPLResult(epl=best.estimate, ci_low=best.ci_low, ci_high=best.ci_high, n=n,
                     method="improved", parameters=parameters, x=x[order] * w,
                     epl_x=curve.values[order])
