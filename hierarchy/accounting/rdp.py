"""Rényi DP and zCDP of single mechanisms, the :class:`RDPCurve` of a composition, composition.

Pure ε-DP implies ε²/2-zCDP; the geometric mechanism has an exact RDP curve
(:func:`rdp_geometric`), the Gaussian and discrete Gaussian ones the curve αρ. Sequential
composition adds losses (:func:`compose`, ``+`` on curves); generalized parallel composition over
a family of degree ``z`` multiplies them by ``z`` (:func:`compose_parallel`, ``z * curve``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction  # noqa: F401  (the doctests of compose and compose_parallel)
from functools import cached_property
from typing import Any, Iterable

import numpy as np
from scipy.special import logsumexp

from hierarchy.accounting._checks import (
    _alpha,
    check_epsilon,
    check_rho,
    check_sensitivity,
)
from hierarchy.errors import AccountingError
from hierarchy.numbers import integer, nonnegative, positive

__all__ = ["pure_to_zcdp", "rdp_geometric", "rdp_gaussian", "rdp_discrete_gaussian", "RDPCurve",
           "compose", "compose_parallel"]


# --------------------------------------------------------------------------------------------
# Single mechanisms
# --------------------------------------------------------------------------------------------


def pure_to_zcdp(epsilon: Any) -> float:
    """The zCDP parameter implied by pure ε-DP: ρ = ε²/2 (Bun & Steinke 2016, Prop. 1.4).

    Parameters
    ----------
    epsilon : float
        Pure-DP budget, ≥ 0.

    Returns
    -------
    float

    Raises
    ------
    AccountingError
        If ε is negative or not finite.

    Examples
    --------
    >>> pure_to_zcdp(1.0)
    0.5
    """
    eps = nonnegative(epsilon, "epsilon", error=AccountingError)
    return eps * eps / 2.0


def _log_geometric_shift(alpha: np.ndarray, z: float, shift: int) -> np.ndarray:
    """(α − 1)·D_α(G + shift ‖ G) for the two-sided geometric G with parameter z, α finite.

    With P[k] = c e^{−z|k|}, c = tanh(z/2), summing P[k]^α P[k − d]^{1−α} over k ≤ 0, k ≥ d and
    0 < k < d gives
    ``S = (e^{z(α−1)d} + e^{−zαd}) / (1 + e^{−z}) + c e^{z(α−1)d} Σ_{k=1}^{d−1} e^{−z(2α−1)k}``.
    Near α = 1 the logarithm of S ≈ 1 loses digits, so where z(α−1)d ≤ 1 we use instead, with
    t = α − 1, ``S − 1 = [expm1(ztd) + e^{−zd} expm1(−ztd)]/(1 + e^{−z})
    + c Σ_k e^{−zk} expm1(zt(d − 2k))`` (the terms at t = 0 cancel exactly) and ``log1p``.
    """
    d = float(shift)
    t = alpha - 1.0
    out = np.empty(alpha.shape, dtype=float)
    near = z * t * d <= 1.0
    k = np.arange(1, shift, dtype=float)
    c = math.tanh(z / 2.0)
    if np.any(near):
        tn = t[near]
        s_minus_1 = (np.expm1(z * tn * d) + math.exp(-z * d) * np.expm1(-z * tn * d)) \
            / (1.0 + math.exp(-z))
        if shift > 1:
            s_minus_1 = s_minus_1 + c * np.sum(
                np.exp(-z * k) * np.expm1(z * tn[..., None] * (d - 2.0 * k)), axis=-1)
        out[near] = np.log1p(s_minus_1)
    far = ~near
    if np.any(far):
        af = alpha[far]
        outer = np.logaddexp(z * t[far] * d, -z * af * d) - math.log1p(math.exp(-z))
        if shift > 1:
            inner_sum = logsumexp(-z * (2.0 * af[..., None] - 1.0) * k, axis=-1)
            outer = np.logaddexp(outer, math.log(c) + z * t[far] * d + inner_sum)
        out[far] = outer
    return out


def rdp_geometric(alpha: Any, epsilon: Any, *, sensitivity: int = 1) -> np.ndarray | float:
    """Rényi divergence of order α of the two-sided geometric mechanism, exactly.

    The mechanism answers a query of L1 sensitivity Δ with budget ε by adding two-sided
    geometric noise of parameter z = ε/Δ (docs/measurement.md); it is ε-DP. Its RDP curve is the
    largest Rényi divergence between the noise and a copy shifted by an integer vector of L1 norm
    ≤ Δ.
    For a shift d in one coordinate (P[k] = tanh(z/2) e^{−z|k|}) summation gives

    ``D_α(d) = log[ (e^{z(α−1)d} + e^{−zαd})/(1 + e^{−z}) + tanh(z/2) e^{z(α−1)d}
    Σ_{k=1}^{d−1} e^{−z(2α−1)k} ] / (α − 1)``;

    for Δ = 1 (a count under add/remove neighbours) the sum is empty:
    ``τ(α, ε) = log[(e^{(α−1)ε} + e^{−αε})/(1 + e^{−ε})]/(α − 1)``. Rényi divergences of product
    distributions add, so a change spread over several cells costs the sum over its parts; the
    curve returned is the maximum over all integer partitions of every shift ≤ Δ (computed by
    dynamic programming, so no convexity argument is needed; in every case the tests check, one
    cell moved by Δ is the worst).

    .. note:: The SafeTab paper (its Corollary 1; docs/accounting.md) prints
       ``τ = log[ (e^ε−1)/(e^ε+1) · (2α e^{(α−1)ε} + 2(α−1) e^{−αε}) / (ε(2α−1)) ] / (α−1)``.
       That expression is *smaller* than the divergence computed by direct summation (at α = 2,
       ε = 1 it gives 0.540 where the true divergence is 0.735; it is even below the continuous
       Laplace mechanism's 0.619), so it would understate the privacy loss. We implement the exact
       sum instead; ``tests/test_accounting.py`` checks it against brute-force summation.

    Limits: τ → ε·tanh(ε/2) (the KL divergence) as α → 1 for Δ = 1; τ → ε as α → ∞ (returned
    for ``alpha = np.inf``); τ ≤ min(ε, α ε²/2) always.

    Parameters
    ----------
    alpha : float or array_like
        Orders, each > 1; ``np.inf`` gives the pure-DP ε.
    epsilon : float
        The query's pure-DP budget ε (noise parameter z = ε/Δ), ≥ 0.
    sensitivity : int, optional
        The query's L1 sensitivity Δ (a positive integer). Default 1.

    Returns
    -------
    float or numpy.ndarray
        τ(α), with the shape of ``alpha``.

    Raises
    ------
    AccountingError
        If an order is ≤ 1, ε is negative or Δ is not a positive integer.

    Examples
    --------
    >>> round(float(rdp_geometric(2.0, 1.0)), 6)
    0.735326
    >>> float(rdp_geometric(np.inf, 1.0))
    1.0
    >>> rdp_geometric([2.0, 10.0], 1.0, sensitivity=2).round(4)
    array([0.6548, 0.9473])
    """
    a = _alpha(alpha)
    eps = nonnegative(epsilon, "epsilon", error=AccountingError)
    delta_q = check_sensitivity(sensitivity)
    out = np.zeros(a.shape, dtype=float)
    if eps == 0.0:
        return out if out.ndim else float(out)
    z = eps / delta_q
    finite = np.isfinite(a)
    af = a[finite]
    # best[d] = largest (α−1)·divergence over integer vectors of L1 norm exactly d.
    best: list[np.ndarray] = [np.zeros(af.shape)]
    for d in range(1, delta_q + 1):
        value = _log_geometric_shift(af, z, d)
        for k in range(1, d // 2 + 1):
            value = np.maximum(value, best[k] + best[d - k])
        best.append(value)
    out[finite] = best[delta_q] / (af - 1.0)
    out[~finite] = eps
    return out if out.ndim else float(out)


def rdp_gaussian(alpha: Any, sigma: Any, *, sensitivity: float = 1.0) -> np.ndarray | float:
    """Rényi DP of the Gaussian mechanism: τ(α) = α Δ² / (2σ²) (Mironov 2017, Prop. 7).

    Parameters
    ----------
    alpha : float or array_like
        Orders > 1.
    sigma : float
        Noise standard deviation, > 0.
    sensitivity : float, optional
        L2 sensitivity Δ. Default 1.

    Returns
    -------
    float or numpy.ndarray

    Raises
    ------
    AccountingError
        On an order ≤ 1 or a non-positive σ or Δ.

    Examples
    --------
    >>> rdp_gaussian(3.0, 2.0)
    0.375
    """
    a = _alpha(alpha)
    s = positive(sigma, "sigma", error=AccountingError)
    d = positive(sensitivity, "sensitivity", error=AccountingError)
    out = a * d * d / (2.0 * s * s)
    return out if out.ndim else float(out)


def rdp_discrete_gaussian(alpha: Any, sigma: Any, *, sensitivity: int = 1) -> np.ndarray | float:
    """Rényi DP of the discrete Gaussian mechanism N_ℤ(σ²): the bound α Δ² / (2σ²).

    This is the standard bound of Canonne, Kamath & Steinke (2020, Thm. 4): adding N_ℤ(σ²) to an
    integer query of sensitivity Δ is Δ²/(2σ²)-zCDP, i.e. the *same* curve as the continuous
    Gaussian (:func:`rdp_gaussian`). The exact divergence is slightly smaller; we do not use it.

    Parameters
    ----------
    alpha : float or array_like
        Orders > 1.
    sigma : float
        The σ parameter of N_ℤ(σ²), > 0.
    sensitivity : int, optional
        Δ (a positive integer). Default 1.

    Returns
    -------
    float or numpy.ndarray

    Raises
    ------
    AccountingError
        On an order ≤ 1, a non-positive σ or a non-integer Δ.

    Examples
    --------
    >>> rdp_discrete_gaussian(3.0, 2.0, sensitivity=2)
    1.5
    """
    return rdp_gaussian(alpha, sigma, sensitivity=check_sensitivity(sensitivity))


_KINDS = ("geometric", "zcdp")


@dataclass(frozen=True)
class RDPCurve:
    """The Rényi-DP curve α ↦ τ(α) of a composition of geometric and zCDP mechanisms.

    A curve is a sum of weighted terms; ``+`` is sequential composition and ``z * curve`` is
    generalized parallel composition over a family of maximum degree ``z``. Evaluate with
    ``curve(alpha)``.

    Parameters
    ----------
    terms : tuple of (kind, parameter, sensitivity, weight)
        ``('geometric', ε, Δ, w)`` contributes ``w · rdp_geometric(α, ε, sensitivity=Δ)``;
        ``('zcdp', ρ, 1, w)`` contributes ``w · α ρ`` (Gaussian and discrete Gaussian
        mechanisms). Build with the class methods rather than by hand.

    Raises
    ------
    AccountingError
        If a term is malformed.

    Examples
    --------
    >>> level = 9 * (RDPCurve.geometric(0.1) + RDPCurve.geometric(0.9))
    >>> round(float(level(np.inf)), 12)
    9.0
    >>> RDPCurve.zcdp(0.5)(4.0)
    2.0
    """

    terms: tuple[tuple[str, float, int, float], ...] = ()

    def __post_init__(self) -> None:
        for term in self.terms:
            if (type(term) is tuple and len(term) == 4 and term[0] in _KINDS
                    and type(term[1]) is float and 0.0 <= term[1] < math.inf
                    and type(term[2]) is int and term[2] >= 1
                    and type(term[3]) is float and 0.0 <= term[3] < math.inf):
                continue   # the common, well-formed case, checked without a call per field
            if len(term) != 4 or term[0] not in _KINDS:
                raise AccountingError(f"an RDP term is (kind, parameter, sensitivity, weight) with "
                                    f"kind 'geometric' or 'zcdp', not {term!r}")
            nonnegative(term[1], f"{term[0]} parameter", error=AccountingError)
            check_sensitivity(term[2])
            nonnegative(term[3], "weight of an RDP term", error=AccountingError)

    @classmethod
    def geometric(cls, epsilon: Any, *, sensitivity: int = 1) -> "RDPCurve":
        """The geometric mechanism with budget ε (in [0, 1e15]) on a sensitivity-Δ query."""
        return cls((("geometric", check_epsilon(epsilon), check_sensitivity(sensitivity),
                     1.0),))

    @classmethod
    def zcdp(cls, rho: Any) -> "RDPCurve":
        """Any ρ-zCDP mechanism (ρ in [0, 1e30]): τ(α) = αρ."""
        return cls((("zcdp", check_rho(rho), 1, 1.0),))

    @classmethod
    def gaussian(cls, sigma: Any, *, sensitivity: float = 1.0) -> "RDPCurve":
        """The (continuous or discrete) Gaussian mechanism: ρ = Δ²/(2σ²)."""
        s = positive(sigma, "sigma", error=AccountingError)
        d = positive(sensitivity, "sensitivity", error=AccountingError)
        return cls.zcdp(d * d / (2.0 * s * s))

    def __add__(self, other: "RDPCurve") -> "RDPCurve":
        if not isinstance(other, RDPCurve):
            return NotImplemented
        return RDPCurve(self.terms + other.terms)

    def __rmul__(self, degree: Any) -> "RDPCurve":
        w = nonnegative(degree, "composition degree", error=AccountingError)
        return RDPCurve(tuple((k, p, s, weight * w) for k, p, s, weight in self.terms))

    __mul__ = __rmul__

    @property
    def rho(self) -> float:
        """The total ρ of the zCDP terms (the geometric terms are not included)."""
        return sum(w * p for k, p, _, w in self.terms if k == "zcdp")

    @property
    def zcdp_rho(self) -> float:
        """ρ of the whole composition as zCDP: the zCDP terms' ρ plus ε²/2 for each geometric
        term (pure ε-DP implies ε²/2-zCDP, then composition).

        Examples
        --------
        >>> (RDPCurve.geometric(1.0) + RDPCurve.zcdp(0.25)).zcdp_rho
        0.75
        """
        return sum(w * (p if k == "zcdp" else p * p / 2.0) for k, p, _, w in self.terms)

    @property
    def pure_epsilon(self) -> float:
        """τ(∞): the pure-DP ε of the composition (``inf`` if it has a zCDP term with ρ > 0)."""
        return float(self(np.inf))

    @cached_property
    def _merged(self) -> tuple[float, dict[int, tuple[np.ndarray, np.ndarray]]]:
        """The terms with equal (kind, parameter, sensitivity) merged by adding their weights:
        the zCDP terms' total ``Σ w ρ``, and per sensitivity the distinct geometric budgets
        (ascending) with their total weights. Cached: a curve is immutable."""
        rho = 0.0
        geometric: dict[int, dict[float, float]] = {}
        for kind, parameter, sensitivity, weight in self.terms:
            if weight == 0 or parameter == 0:
                continue
            if kind == "zcdp":
                rho += weight * parameter
            else:
                budgets = geometric.setdefault(int(sensitivity), {})
                budgets[float(parameter)] = budgets.get(float(parameter), 0.0) + weight
        merged = {}
        for sensitivity, budgets in geometric.items():
            eps = np.array(sorted(budgets))
            merged[sensitivity] = (eps, np.array([budgets[e] for e in eps]))
        return rho, merged

    def __call__(self, alpha: Any) -> np.ndarray | float:
        """τ(α), summing the terms; equal terms are evaluated once (their weights added), and
        many distinct geometric terms of sensitivity 1 together, so a curve of n terms costs
        O(n) — not O(n) Python calls per order α."""
        a = _alpha(alpha)
        out = np.zeros(a.shape, dtype=float)
        rho, geometric = self._merged
        for sensitivity, (eps, weights) in geometric.items():
            if sensitivity == 1 and eps.size >= _VECTORIZE_FROM:
                out = out + _rdp_geometric_unit_sum(a, eps, weights)
                continue
            for e, w in zip(eps, weights):
                out = out + w * np.asarray(rdp_geometric(a, e, sensitivity=sensitivity))
        if rho:
            out = out + rho * a
        return out if out.ndim else float(out)


#: From this many distinct sensitivity-1 geometric budgets on, a curve evaluates them together.
_VECTORIZE_FROM = 16
_CHUNK_ELEMENTS = 2 ** 18   # budgets × orders per temporary array (about 2 MB)


def _rdp_geometric_unit_sum(alpha: np.ndarray, eps: np.ndarray,
                            weights: np.ndarray) -> np.ndarray:
    """``Σ_i w_i · rdp_geometric(α, ε_i)`` for sensitivity 1, over many budgets at once.

    The same two formulas as :func:`_log_geometric_shift` with shift 1 (``log1p`` of the
    ``expm1`` form where ``ε(α − 1) ≤ 1``, ``logaddexp`` beyond), evaluated on blocks of budgets
    × orders. With the orders sorted, a block of ascending budgets needs the first formula only
    below ``α − 1 = 1/ε_min`` and the second only above ``1/ε_max``; only the orders in between
    are computed both ways. ``eps`` is ascending and positive.
    """
    flat = alpha.ravel()
    out = np.empty(flat.shape)
    finite = np.isfinite(flat)
    out[~finite] = float(weights @ eps)                  # τ(∞) = ε
    af = flat[finite]
    order = np.argsort(af, kind="stable")
    a_sorted = af[order]
    t = a_sorted - 1.0
    sums = np.zeros(t.size)
    rows = max(1, _CHUNK_ELEMENTS // max(t.size, 1))
    with np.errstate(over="ignore", invalid="ignore"):
        for r0 in range(0, eps.size, rows):
            z, w = eps[r0:r0 + rows], weights[r0:r0 + rows]
            zc = z[:, None]
            ez = np.exp(-zc)
            log_norm = np.log1p(ez)
            # all rows use the near form before j_lo, the far form from j_hi on (± one order)
            j_lo = max(0, int(np.searchsorted(t, 1.0 / z[-1], side="right")) - 1)
            j_hi = min(t.size, int(np.searchsorted(t, 1.0 / z[0], side="right")) + 1)
            if j_hi > 0:
                tn = t[:j_hi]
                zt = zc * tn
                value = np.expm1(zt)
                value += ez * np.expm1(-zt)
                value /= 1.0 + ez
                np.log1p(value, out=value)
                if j_hi > j_lo:
                    mid = slice(j_lo, j_hi)
                    far = np.logaddexp(zt[:, mid], -zc * a_sorted[mid]) - log_norm
                    value[:, mid] = np.where(zt[:, mid] <= 1.0, value[:, mid], far)
                value /= tn
                sums[:j_hi] += w @ value
            if j_hi < t.size:
                tf = t[j_hi:]
                value = np.logaddexp(zc * tf, -zc * a_sorted[j_hi:])
                value -= log_norm
                value /= tf
                sums[j_hi:] += w @ value
    unsorted = np.empty(t.size)
    unsorted[order] = sums
    out[finite] = unsorted
    return out.reshape(alpha.shape)


# --------------------------------------------------------------------------------------------
# Composition
# --------------------------------------------------------------------------------------------


def compose(values: Iterable[Any]) -> Any:
    """Sequential composition: pure ε, zCDP ρ and RDP curves all compose by addition.

    Parameters
    ----------
    values : iterable of numbers, Fractions or RDPCurve
        The losses of the mechanisms run one after another on the same data.

    Returns
    -------
    number, Fraction or RDPCurve
        The sum; exact when every value is a Fraction.

    Raises
    ------
    AccountingError
        If the iterable is empty.

    Examples
    --------
    >>> compose([Fraction(1, 4), Fraction(3, 4)])
    Fraction(1, 1)
    >>> round(compose([RDPCurve.zcdp(0.1), RDPCurve.zcdp(0.2)]).rho, 12)
    0.3
    """
    items = list(values)
    if not items:
        raise AccountingError("nothing to compose: give at least one privacy loss")
    if all(isinstance(item, RDPCurve) for item in items):
        # one concatenation: adding curves pairwise would copy (and check) the terms again at
        # every step, quadratic in the number of curves
        return RDPCurve(tuple(term for item in items for term in item.terms))
    total = items[0]
    for item in items[1:]:
        total = total + item
    return total


def compose_parallel(value: Any, *, degree: int) -> Any:
    """Generalized parallel composition: z·ε, z·ρ or z·τ for a family of maximum degree z.

    Mechanisms run on the subsets of a family of subsets of the records, each with the same loss;
    if a record lies in at most ``degree`` subsets (the *stability* of SafeTab's population
    groups), the whole is ``degree`` times as costly as one mechanism. Degree 1 is ordinary
    parallel composition over disjoint units.

    Parameters
    ----------
    value : number, Fraction or RDPCurve
        The loss of the mechanism run on each subset.
    degree : int
        Maximum number of subsets containing one record, ≥ 1.

    Returns
    -------
    number, Fraction or RDPCurve

    Raises
    ------
    AccountingError
        If ``degree`` is not a positive integer.

    Examples
    --------
    >>> compose_parallel(Fraction(1, 10), degree=9)
    Fraction(9, 10)
    """
    return integer(degree, "the composition degree (stability)", error=AccountingError) * value
