"""The improved EPL estimator, :func:`improved_epl`: the largest log ratio of a smoothed pmf.

Also the binning, window and per-side fitting that the direct estimator shares.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.special import ndtri
from scipy.stats import beta

from hierarchy.randomness import as_randomness
from postproc.errors import PostprocError
from postproc.evaluation.epl._checks import _as_errors, _check_memory, _degenerate, _positive
from postproc.evaluation.epl._kernel import _compress, _is_integer
from postproc.evaluation.epl._smooth import (
    _MAX_BINS,
    Functionals,
    SideFit,
    fit_side,
    functionals,
    max_with_interval,
)
from postproc.evaluation.epl.result import EPLResult, _bounded, _undefined

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
                 precision: float = 0.25, n_boot: int = 1000, level: float = 0.95,
                 rng: Any = None) -> EPLResult:
    r"""Our default EPL estimator: the largest log ratio of a smoothed pmf, within a window.

    **Estimand.** Count the errors in bins of width ``w`` (``bandwidth``; default
    :func:`default_bandwidth`, 1 for integer errors) and let ``p`` be the bins' pmf. Over the
    *window* ``W = [⌊q_{100−r}⌋, ⌈q_r⌉]`` of bins (the ``(100 − r)``-th and ``r``-th percentiles,
    ``r = reach``; widened to the centre's two neighbours when it holds one bin), the EPL is

    .. math:: \theta_W = \max_{x,\ x+1 \in W} |\log p(x) - \log p(x+1)| / w.

    For the two-sided geometric mechanism it is ``z`` whatever ``W``; for a discrete Gaussian
    of variance ``σ²`` it is ``(2 max(|W_lo|, W_hi) − 1)/(2σ²)``, so it depends on the window.

    **Estimator.** Split the bins at the median ``m`` (additive noise has its cusp there) and fit
    ``log E[count]`` on each side, from ``m`` out to one window-width beyond the window's edge, by
    a penalized Poisson regression: a straight line unless the data reject it, a quadratic unless
    they reject that, a smoothing spline chosen by marginal likelihood otherwise (see
    ``docs/epl.md``). The fitted log ratios ``L̂(x)`` of the pairs in ``W`` form the curve; the
    estimate is ``θ̂ = max |L̂(x)|``.

    **Interval.** ``[max(|L̂| − c_sup s), max(|L̂| + c s)]``, ``c = Φ⁻¹(level)``, ``c_sup`` the
    ``level`` quantile of the largest standardized deviation over ``n_boot`` draws of the fits
    (a parametric bootstrap). It covers with probability ≥ ``2·level − 1`` in every
    configuration and about ``level`` both when the ratios tie (the geometric) and when one
    dominates; the estimate always lies inside it.

    **A bound instead of a number.** ``epl`` is ``inf`` and ``ci_low`` a one-sided lower bound
    (``EPL ≥ ci_low`` at ``level``; :attr:`EPLResult.kind` is ``'bound'``) when the errors
    cannot pin the maximum down:

    * *too concentrated*: fewer than 10 errors lie beyond the centre on a side (an accurate
      mechanism, or a level held invariant: every error 0). That side's log ratio next to the
      centre is bounded by the exact (Clopper–Pearson) binomial bound on its neighbour's share;
    * *too few errors for their spread*: a contender for the maximum (a pair with
      ``|L̂(x)| + Φ⁻¹(level)·s(x) ≥ θ̂``) has a standard error above ``precision · θ̂``. The
      bound is the interval's lower end; the withheld estimate is in ``parameters['estimate']``
      and the reason says which ``precision`` would report it.

    It is undefined (``ci_low`` nan) only when nothing positive can be said: fewer than two
    errors, or too few for any bound.

    Parameters
    ----------
    errors : array_like, 1-D
        ``DP − exact``; integers or not.
    bandwidth : float, optional
        Bin width ``w`` in count units (the resolution); default :func:`default_bandwidth`.
    reach : float
        Percentile, in (50, 100], of the window's edges.
    precision : float
        Largest standard error, relative to the estimate, of a contender for the maximum, in
        (0, 1).
    n_boot : int
        Draws of the fits that calibrate the interval (0 for no interval; the estimate does not
        depend on them, and a bound then uses a Bonferroni critical value instead).
    level : float
        Confidence level of the interval and of a bound, in [0.5, 1).
    rng : None, int, numpy.random.Generator or hierarchy.randomness.Randomness
        Randomness for the draws (``None``: unpredictable).

    Returns
    -------
    EPLResult
        The curve holds the window's pairs ``x`` (left bin, in error units) and ``L̂(x)``;
        ``parameters`` records ``bandwidth``, ``reach``, ``precision``, ``n_boot``, ``level``,
        the ``window`` (error units), the ``centre``, ``argmax``, ``max_se`` (the largest standard
        error of a contender), ``shape`` (each side's fit: ``straight``, ``quadratic``,
        ``spline`` or ``concentrated``) and ``log10_lambda`` (each side's smoothing, relative to
        its data; ``inf`` for a polynomial).

    Raises
    ------
    PostprocError
        Bad errors or parameters.

    Examples
    --------
    >>> from hierarchy.mechanisms import sample_two_sided_geometric
    >>> z = 0.5
    >>> r = improved_epl(sample_two_sided_geometric(z, 100_000, 1), rng=0)
    >>> r.n, r.kind, bool(r.ci_low <= r.epl <= r.ci_high), bool(abs(r.epl - z) < 0.05)
    (100000, 'estimate', True, True)
    >>> r.parameters["shape"]
    ['straight', 'straight']
    >>> print(improved_epl(np.zeros(1000), rng=0))
    EPL ≥ 5.6 (all 1,000 errors equal 0: too concentrated to resolve the log ratio next to it; ...)
    >>> from hierarchy.mechanisms import sample_discrete_gaussian
    >>> few = improved_epl(sample_discrete_gaussian(400, 60, 0), rng=1)   # sigma = 20
    >>> few.kind, few.reason
    ('bound', 'too few errors (60) for their spread ... pass precision=0.41 to report it ...')
    """
    e = _as_errors(errors)
    n = int(e.size)
    options = _Options.checked(reach, precision, n_boot, level)
    parameters: dict[str, Any] = {
        "bandwidth": None if bandwidth is None else _positive(bandwidth, "bandwidth"),
        **options.record()}
    if n < 2:
        return _undefined("improved", n, parameters, f"{n} error(s): too few units to estimate "
                          "a loss (a density needs at least two errors)")
    window = _Window.of(e, options.reach, parameters)
    sides = _fit_sides(window, parameters)
    curve = _Curve.of(sides, window)
    if any(side.fit is None for side in sides):
        return _concentrated(e, window, sides, curve.functionals, parameters, options, rng)
    return _estimate_or_bound(curve, window, options, parameters, n, rng)


@dataclass(frozen=True)
class _Options:
    """The checked options of the improved and the direct estimator."""

    reach: float
    precision: float
    n_boot: int
    level: float

    @classmethod
    def checked(cls, reach: Any, precision: Any, n_boot: Any, level: Any) -> _Options:
        reach = _reach(reach)
        precision = _precision(precision)
        n_boot, level = _bootstrap_options(n_boot, level)
        return cls(reach=reach, precision=precision, n_boot=n_boot, level=level)

    def record(self) -> dict[str, Any]:
        """The options as a result's ``parameters`` record them."""
        return {"reach": self.reach, "precision": self.precision, "n_boot": self.n_boot,
                "level": self.level}


@dataclass(frozen=True, eq=False)
class _Window:
    """The errors in bins of width ``w`` and the window ``[low, high]`` of bins around the
    median bin ``centre``."""

    binned: Binned
    w: float
    low: int
    high: int
    centre: int

    @classmethod
    def of(cls, e: np.ndarray, reach: float, parameters: dict[str, Any]) -> _Window:
        """Bin the errors (default bandwidth: :func:`_lattice_spacing`) and find the window;
        ``parameters`` gets the bandwidth, the window and the centre, in error units."""
        if parameters["bandwidth"] is None:
            distinct, _ = _compress(e, _is_integer(e))
            parameters["bandwidth"] = _lattice_spacing(np.unique(distinct))
        w = parameters["bandwidth"]
        binned = Binned(_bins(e, w, "errors", "bandwidth"))
        low, high = binned.window(reach)
        centre = binned.median()
        if high - low < 1:
            # the central errors are one value: compare it with its neighbours
            low, high = min(low, centre - 1), max(high, centre + 1)
        parameters["window"] = [low * w, high * w]
        parameters["centre"] = centre * w
        return cls(binned=binned, w=w, low=low, high=high, centre=centre)


def _fit_sides(window: _Window, parameters: dict[str, Any]) -> list[_Side]:
    """Each side of the centre that reaches into the window, left first, fitted (or too
    concentrated to fit); ``parameters`` gets their ``shape`` and ``log10_lambda``."""
    sides = [_Side.fitted(window.binned, window.centre, sign, span)
             for sign, span in ((-1, window.centre - window.low), (1, window.high - window.centre))
             if span > 0]
    parameters["shape"] = [side.shape for side in sides]
    parameters["log10_lambda"] = [side.fit.log_lambda if side.fit else None for side in sides]
    return sides


@dataclass(frozen=True, eq=False)
class _Curve:
    """The fitted log ratios of the window's pairs: each pair's left bin ``x`` and the
    functionals ``L̂(x)``, per count unit (the fitted sides' pairs, left side first)."""

    x: np.ndarray
    functionals: Functionals

    @classmethod
    def of(cls, sides: list[_Side], window: _Window) -> _Curve:
        xs, values, blocks = [], [], []
        for side in [side for side in sides if side.fit is not None]:
            x, v, block = _side_log_ratios(side.fit, side.sign, window.centre, side.span,
                                           sum(a.size for a in values), window.w)
            xs.append(x)
            values.append(v)
            blocks.append(block)
        functionals = Functionals(values=np.concatenate(values) if values else np.zeros(0),
                                  blocks=tuple(blocks))
        return cls(x=(np.concatenate(xs) if xs else np.zeros(0)).astype(float),
                   functionals=functionals)


def _estimate_or_bound(curve: _Curve, window: _Window, options: _Options,
                       parameters: dict[str, Any], n: int, rng: Any) -> EPLResult:
    """The largest fitted log ratio with its interval, or a lower bound when a contender for the
    maximum is not known to ``precision``; ``parameters`` gets ``argmax`` and ``max_se`` (and the
    withheld ``estimate``)."""
    functionals, w = curve.functionals, window.w
    best = _maximum(functionals, level=options.level, n_boot=options.n_boot, rng=rng,
                    what=f"the bootstrap (n_boot = {options.n_boot} replicates, each a resample "
                         f"of the fitted log-ratio curve at {functionals.values.size} pairs from "
                         f"{functionals.draw_size} coefficients)",
                    fix="lower n_boot (--n-boot; 1,000 draws give a stable 95% interval), or "
                        "pass n_boot = 0 (--n-boot 0) for no interval")
    parameters["argmax"] = float(curve.x[best.argmax] * w)
    parameters["max_se"] = best.max_se
    if not best.max_se <= options.precision * best.estimate:
        parameters["estimate"] = best.estimate
        relative = best.max_se / best.estimate if best.estimate > 0 else math.inf
        bound = best.ci_low if options.n_boot else _bonferroni_low(functionals, options.level)
        advice = (f"pass precision={math.ceil(relative * 100) / 100:g} to report it with its "
                  f"interval, or more errors" if relative < 0.99 else "pass more errors")
        return _bounded(
            "improved", n, parameters, bound,
            f"too few errors ({n:,}) for their spread (window [{window.low * w:g}, "
            f"{window.high * w:g}]): the log ratio at x = {curve.x[best.worst] * w:g} could be "
            f"the largest but has standard error {best.max_se:.3g}, {relative:.2f} of the "
            f"estimate {best.estimate:.3g} (more than precision = {options.precision:g}); "
            f"{advice}")
    order = np.argsort(curve.x, kind="stable")
    return EPLResult(epl=best.estimate, ci_low=best.ci_low, ci_high=best.ci_high, n=n,
                     method="improved", parameters=parameters, x=curve.x[order] * w,
                     epl_x=functionals.values[order])


#: A side with fewer errors beyond the centre is too concentrated to fit: the log ratio next to
#: the centre rests on its neighbour's count, which needs about 10 to be known within 1/√10.
MIN_BEYOND_CENTRE = 10


@dataclass(frozen=True)
class _Side:
    """One side of the centre: its bins' counts, its span in the window and its fit (None when
    it is too concentrated to fit)."""

    sign: int
    span: int
    counts: np.ndarray
    fit: SideFit | None

    @classmethod
    def fitted(cls, binned: Binned, centre: int, sign: int, span: int) -> "_Side":
        counts, _ = binned.side(centre, sign, span)
        beyond = _beyond(binned, centre, sign)
        fit = fit_side(counts) if beyond >= MIN_BEYOND_CENTRE else None
        return cls(sign=sign, span=span, counts=counts, fit=fit)

    @property
    def shape(self) -> str:
        if self.fit is None:
            return "concentrated"
        if self.fit.log_lambda != math.inf:
            return "spline"
        return "straight" if self.fit.order == 2 else "quadratic"


def _beyond(binned: Binned, centre: int, sign: int) -> int:
    """How many errors lie beyond the centre bin on one side."""
    chosen = binned.values > centre if sign > 0 else binned.values < centre
    return int(binned.counts[chosen].sum())


def _pair_bound(at_centre: float, neighbour: float, level: float) -> float:
    """Exact one-sided lower bound on ``log p(m) / p(m ± 1)`` at ``level``: given the two bins'
    counts, the neighbour's count is binomial with share ``π = p(m±1) / (p(m) + p(m±1))``, whose
    Clopper–Pearson upper limit ``π_u`` gives ``log((1 − π_u) / π_u)``."""
    upper = float(beta.ppf(level, neighbour + 1, at_centre)) if at_centre > 0 else 1.0
    return math.log((1 - upper) / upper) if 0 < upper < 1 else -math.inf


def _bonferroni_low(curve: Functionals, level: float) -> float:
    """``max (|v| − c s)`` with Bonferroni's ``c`` for the distinct functionals (a straight side's
    log ratios are one number): a lower bound on the largest ``|v|`` at ``level`` without
    draws."""
    if not curve.values.size:
        return -math.inf
    distinct = np.unique(np.round(np.c_[np.abs(curve.values), curve.se], 12), axis=0)
    c = float(ndtri(1 - (1 - level) / len(distinct)))
    return float(np.max(distinct[:, 0] - c * distinct[:, 1]))


def _concentrated(e: np.ndarray, window: _Window, sides: list, curve: Functionals,
                  parameters: dict, options: _Options, rng: Any):
    """The bound when a side is too concentrated to fit: the largest of each side's bound, each
    at ``1 − (1 − level)/k`` for ``k`` sides (Bonferroni: the largest is chosen after seeing
    them); a concentrated side bounds its log ratio next to the centre exactly, the fitted sides
    by their curve's lower end."""
    n, binned, w, n_boot = int(e.size), window.binned, window.w, options.n_boot
    each = 1 - (1 - options.level) / len(sides)
    bounds = []
    for side in sides:
        if side.fit is None:                       # per count unit, as the estimand
            bounds.append(_pair_bound(side.counts[0], side.counts[1], each) / w)
    if curve.values.size:
        if n_boot:
            generator = as_randomness(rng).generator
            bounds.append(max_with_interval(curve, level=each, n_boot=n_boot,
                                            generator=generator).ci_low)
        else:
            bounds.append(_bonferroni_low(curve, each))
    centre = parameters["centre"]
    below, above = (_beyond(binned, int(round(centre / w)), sign) for sign in (-1, 1))
    at_centre = n - below - above
    if binned.values.size == 1:
        what = (f"all {n:,} errors equal {centre:g}: too concentrated to resolve the log ratio "
                f"next to it; only more errors would pin it down (at a level held invariant "
                f"every error is 0 and the loss is unbounded)")
    elif n <= 2 * MIN_BEYOND_CENTRE:
        what = (f"too few errors ({n:,}): each side of the centre {centre:g} needs "
                f"{MIN_BEYOND_CENTRE} to fit, and {below:,} lie below it and {above:,} above")
    elif 2 * at_centre >= n:
        what = (f"{at_centre:,} of the {n:,} errors equal the centre {centre:g}, {below:,} lie "
                f"below it and {above:,} above (fewer than {MIN_BEYOND_CENTRE} on a side): too "
                f"concentrated to resolve the log ratio next to the centre; only more errors "
                f"would pin it down")
    else:
        what = (f"too few errors ({n:,}) to fit both sides of the centre {centre:g}: {below:,} "
                f"lie below it and {above:,} above, fewer than {MIN_BEYOND_CENTRE} on a side; "
                f"only more errors would pin the loss down")
    return _bounded("improved", n, parameters, max(bounds), what)
