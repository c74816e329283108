"""Privacy accounting: pure DP, zCDP and Rényi DP, conversions to (ε, δ), MOE calibration.

What a configuration costs, in every notion the toolkit reports (SPEC §3, §8):

* **pure ε-DP** composes by addition; ε-DP implies ε²/2-zCDP (:func:`pure_to_zcdp`);
* **zCDP ρ** composes by addition; the discrete Gaussian and the Gaussian with variance σ² on a
  sensitivity-Δ query are Δ²/(2σ²)-zCDP;
* **Rényi DP** of order α composes by addition; an :class:`RDPCurve` is the function α ↦ τ(α)
  of a composition, with :func:`rdp_geometric` in closed form for the two-sided geometric
  mechanism;
* **generalized parallel composition**: mechanisms on subsets of a family in which a record lies
  in at most ``z`` subsets compose to z·ε, z·ρ, z·τ (:func:`compose_parallel`, ``z * curve``);
* **(ε, δ)** from an RDP curve (:func:`rdp_to_approx_dp`) and from zCDP, analytically
  (:func:`zcdp_to_approx_dp_analytic`) or numerically (:func:`zcdp_to_approx_dp_numeric`);
* **MOE ↔ parameter** calibration for the geometric and discrete Gaussian mechanisms;
* **exact budget splits** in :class:`fractions.Fraction`, so "fractions sum to 1" has no float
  drift (:func:`as_fraction`, :func:`split_budget`, :func:`allocate_budget`);
* **reports**: :func:`account_levels` (a TopDown run: per query, per level, in total) and
  :func:`account_moe` (SafeTab-style levels calibrated to target MOEs), both JSON-ready.

Everything here is a pure function of its arguments or a frozen dataclass.

Examples
--------
>>> curve = 2 * RDPCurve.geometric(0.5) + RDPCurve.zcdp(0.01)
>>> round(float(curve(2.0)), 4)
0.4747
>>> round(rdp_to_approx_dp(curve, 1e-10), 3)
1.842
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from fractions import Fraction
from numbers import Rational
from typing import Any, Callable, Iterable, Mapping

import numpy as np
from scipy.optimize import minimize_scalar
from scipy.special import logsumexp

from postproc.errors import PostprocError

__all__ = [
    "as_fraction", "split_budget", "allocate_budget",
    "pure_to_zcdp", "rdp_geometric", "rdp_gaussian", "rdp_discrete_gaussian", "RDPCurve",
    "compose", "compose_parallel",
    "rdp_to_approx_dp", "zcdp_to_approx_dp_analytic", "zcdp_to_approx_dp_numeric",
    "moe_geometric", "calibrate_geometric", "moe_discrete_gaussian",
    "calibrate_discrete_gaussian",
    "PrivacyLoss", "LevelsAccounting", "account_levels", "MOELevel", "MOEAccounting",
    "account_moe",
]

#: Orders α − 1 searched by :func:`rdp_to_approx_dp`: a log-spaced grid over 14 decades.
ALPHA_GRID_MINUS_ONE = np.logspace(-6.0, 8.0, 2801)

# --------------------------------------------------------------------------------------------
# Validation helpers
# --------------------------------------------------------------------------------------------


def _nonnegative(value: Any, name: str) -> float:
    """``value`` as a finite float ≥ 0, or a PostprocError naming ``name``."""
    if isinstance(value, bool):
        raise PostprocError(f"{name} must be a number, not {value!r}")
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise PostprocError(f"{name} must be a number, not {value!r}") from None
    if not math.isfinite(number) or number < 0:
        raise PostprocError(f"{name} must be a finite number >= 0, not {value!r}")
    return number


def _positive(value: Any, name: str) -> float:
    number = _nonnegative(value, name)
    if number == 0:
        raise PostprocError(f"{name} must be > 0, not {value!r}")
    return number


def _delta(delta: Any) -> float:
    if isinstance(delta, bool):
        raise PostprocError(f"delta must be a number in (0, 1), not {delta!r}")
    try:
        value = float(delta)
    except (TypeError, ValueError):
        raise PostprocError(f"delta must be a number in (0, 1), not {delta!r}") from None
    if not 0.0 < value < 1.0:
        raise PostprocError(f"delta must be in the open interval (0, 1), not {delta!r}; "
                            f"a typical choice is 1e-10")
    return value


def _sensitivity(value: Any, name: str = "sensitivity") -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise PostprocError(f"{name} of a geometric mechanism must be a positive integer "
                            f"(counts change by whole units), not {value!r}")
    return int(value)


def _alpha(alpha: Any) -> np.ndarray:
    a = np.asarray(alpha, dtype=float)
    if np.any(np.isnan(a)) or np.any(a <= 1.0):
        raise PostprocError(f"Rényi orders alpha must be > 1 (np.inf allowed), not {alpha!r}")
    return a


# --------------------------------------------------------------------------------------------
# Exact budgets
# --------------------------------------------------------------------------------------------


def as_fraction(value: Any, *, name: str = "budget") -> Fraction:
    """An exact, non-negative rational from a Fraction, an int, a decimal string or a float.

    Strings may be decimals (``"0.225"``) or ratios (``"9/40"``). A float is read by its shortest
    decimal representation (``0.1`` becomes ``1/10``, not the binary ``3602879701896397/2**55``),
    which is what the user typed.

    Parameters
    ----------
    value : Fraction, int, str or float
    name : str
        What the value is, for error messages.

    Returns
    -------
    fractions.Fraction

    Raises
    ------
    PostprocError
        If the value is not a number, is negative, infinite or NaN.

    Examples
    --------
    >>> as_fraction("0.225"), as_fraction("9/40"), as_fraction(0.1), as_fraction(2)
    (Fraction(9, 40), Fraction(9, 40), Fraction(1, 10), Fraction(2, 1))
    """
    if isinstance(value, bool):
        raise PostprocError(f"{name} must be a number, not {value!r}")
    try:
        if isinstance(value, Rational):
            result = Fraction(value.numerator, value.denominator)
        elif isinstance(value, (float, np.floating)):
            if not math.isfinite(value):
                raise ValueError
            result = Fraction(repr(float(value)))
        elif isinstance(value, (int, np.integer)):
            result = Fraction(int(value))
        elif isinstance(value, str):
            result = Fraction(value.strip())
        else:
            raise TypeError
    except (TypeError, ValueError, ZeroDivisionError):
        raise PostprocError(f"{name} must be a finite number such as 0.225 or '9/40', "
                            f"not {value!r}") from None
    if result < 0:
        raise PostprocError(f"{name} must be >= 0, not {value!r}")
    return result


def split_budget(total: Any, fractions: Mapping[str, Any], *,
                 what: str = "budget fractions") -> dict[str, Fraction]:
    """Split ``total`` exactly by named fractions that are positive and sum to exactly 1.

    Parameters
    ----------
    total : Fraction, int, str or float
        The budget to split (ε or ρ); read with :func:`as_fraction`.
    fractions : mapping of str to Fraction, int, str or float
        Share of each part.
    what : str
        What the fractions are (for error messages), e.g. ``"query fractions of level 'state'"``.

    Returns
    -------
    dict of str to Fraction
        ``total * fraction`` for each name, in the input order.

    Raises
    ------
    PostprocError
        If there are no fractions, one is not positive, or they do not sum to exactly 1.

    Examples
    --------
    >>> split_budget("1", {"detailed": "0.1", "hhgq": "0.225", "va_hisp_race": "0.675"})
    {'detailed': Fraction(1, 10), 'hhgq': Fraction(9, 40), 'va_hisp_race': Fraction(27, 40)}
    >>> split_budget(1, {"a": 0.5, "b": 0.4})
    Traceback (most recent call last):
    ...
    postproc.errors.PostprocError: budget fractions must sum to exactly 1, but a, b sum to 9/10 (0.9); ...
    """
    total_fraction = as_fraction(total, name="total budget")
    if not fractions:
        raise PostprocError(f"{what}: nothing to split the budget over; give at least one part")
    parsed = {name: as_fraction(value, name=f"fraction of {name!r}")
              for name, value in fractions.items()}
    for name, value in parsed.items():
        if value <= 0:
            raise PostprocError(f"{what}: the fraction of {name!r} is {value}, but every fraction "
                                f"must be > 0; drop {name!r} instead of giving it nothing")
    s = sum(parsed.values(), Fraction(0))
    if s != 1:
        names = ", ".join(parsed)
        raise PostprocError(
            f"{what} must sum to exactly 1, but {names} sum to {s} ({float(s):.6g}); "
            f"write them as exact decimals or ratios (e.g. '9/40') so that they add up to 1")
    return {name: total_fraction * value for name, value in parsed.items()}


def allocate_budget(total: Any, *, levels: Mapping[str, Any],
                    queries: Mapping[str, Any]) -> dict[str, dict[str, Fraction]]:
    """Split a total budget over levels, then each level's share over queries, exactly.

    Parameters
    ----------
    total : Fraction, int, str or float
        Total ε (pure DP) or ρ (zCDP).
    levels : mapping of str to fraction
        Share of each geographic level (positive, summing to 1).
    queries : mapping of str to fraction, or mapping of level to such a mapping
        Share of each query within a level: one mapping for every level, or one per level.

    Returns
    -------
    dict of str to dict of str to Fraction
        ``budgets[level][query]``, ready for :func:`account_levels`.

    Raises
    ------
    PostprocError
        If a split is invalid (see :func:`split_budget`) or a level has no query split.

    Examples
    --------
    >>> b = allocate_budget(1, levels={lv: "1/4" for lv in ("nation", "state", "county", "ed")},
    ...                     queries={"detailed": "0.1", "hhgq": "0.225", "va_hisp_race": "0.675"})
    >>> b["state"]
    {'detailed': Fraction(1, 40), 'hhgq': Fraction(9, 160), 'va_hisp_race': Fraction(27, 160)}
    >>> sum(sum(q.values()) for q in b.values())
    Fraction(1, 1)
    """
    per_level = split_budget(total, levels, what="level fractions")
    nested = bool(queries) and all(isinstance(v, Mapping) for v in queries.values())
    out: dict[str, dict[str, Fraction]] = {}
    for level, budget in per_level.items():
        if nested:
            if level not in queries:
                raise PostprocError(f"no query fractions for level {level!r}; give one mapping "
                                    f"for every level ({', '.join(per_level)}) or one for all")
            shares = queries[level]
        else:
            shares = queries
        out[level] = split_budget(budget, shares, what=f"query fractions of level {level!r}")
    return out


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
    PostprocError
        If ε is negative or not finite.

    Examples
    --------
    >>> pure_to_zcdp(1.0)
    0.5
    """
    eps = _nonnegative(epsilon, "epsilon")
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
    geometric noise of parameter z = ε/Δ (SPEC §2); it is ε-DP. Its RDP curve is the largest
    Rényi divergence between the noise and a copy shifted by an integer vector of L1 norm ≤ Δ.
    For a shift d in one coordinate (P[k] = tanh(z/2) e^{−z|k|}) summation gives

    ``D_α(d) = log[ (e^{z(α−1)d} + e^{−zαd})/(1 + e^{−z}) + tanh(z/2) e^{z(α−1)d}
    Σ_{k=1}^{d−1} e^{−z(2α−1)k} ] / (α − 1)``;

    for Δ = 1 (the SPEC's base mechanism) the sum is empty:
    ``τ(α, ε) = log[(e^{(α−1)ε} + e^{−αε})/(1 + e^{−ε})]/(α − 1)``. Rényi divergences of product
    distributions add, so a change spread over several cells costs the sum over its parts; the
    curve returned is the maximum over all integer partitions of every shift ≤ Δ (computed by
    dynamic programming, so no convexity argument is needed; in every case the tests check, one
    cell moved by Δ is the worst).

    .. note:: SPEC §3 prints, from the SafeTab paper,
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
    PostprocError
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
    eps = _nonnegative(epsilon, "epsilon")
    delta_q = _sensitivity(sensitivity)
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
    PostprocError
        On an order ≤ 1 or a non-positive σ or Δ.

    Examples
    --------
    >>> rdp_gaussian(3.0, 2.0)
    0.375
    """
    a = _alpha(alpha)
    s = _positive(sigma, "sigma")
    d = _positive(sensitivity, "sensitivity")
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
    PostprocError
        On an order ≤ 1, a non-positive σ or a non-integer Δ.

    Examples
    --------
    >>> rdp_discrete_gaussian(3.0, 2.0, sensitivity=2)
    1.5
    """
    return rdp_gaussian(alpha, sigma, sensitivity=_sensitivity(sensitivity))


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
    PostprocError
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
            if len(term) != 4 or term[0] not in ("geometric", "zcdp"):
                raise PostprocError(f"an RDP term is (kind, parameter, sensitivity, weight) with "
                                    f"kind 'geometric' or 'zcdp', not {term!r}")
            _nonnegative(term[1], f"{term[0]} parameter")
            _sensitivity(term[2])
            _nonnegative(term[3], "weight of an RDP term")

    @classmethod
    def geometric(cls, epsilon: Any, *, sensitivity: int = 1) -> "RDPCurve":
        """The geometric mechanism with budget ε on a sensitivity-Δ query."""
        return cls((("geometric", _nonnegative(epsilon, "epsilon"), _sensitivity(sensitivity),
                     1.0),))

    @classmethod
    def zcdp(cls, rho: Any) -> "RDPCurve":
        """Any ρ-zCDP mechanism: τ(α) = αρ."""
        return cls((("zcdp", _nonnegative(rho, "rho"), 1, 1.0),))

    @classmethod
    def gaussian(cls, sigma: Any, *, sensitivity: float = 1.0) -> "RDPCurve":
        """The (continuous or discrete) Gaussian mechanism: ρ = Δ²/(2σ²)."""
        s = _positive(sigma, "sigma")
        d = _positive(sensitivity, "sensitivity")
        return cls.zcdp(d * d / (2.0 * s * s))

    def __add__(self, other: "RDPCurve") -> "RDPCurve":
        if not isinstance(other, RDPCurve):
            return NotImplemented
        return RDPCurve(self.terms + other.terms)

    def __rmul__(self, degree: Any) -> "RDPCurve":
        w = _nonnegative(degree, "composition degree")
        return RDPCurve(tuple((k, p, s, weight * w) for k, p, s, weight in self.terms))

    __mul__ = __rmul__

    @property
    def rho(self) -> float:
        """The total ρ of the zCDP terms (the geometric terms are not included)."""
        return sum(w * p for k, p, _, w in self.terms if k == "zcdp")

    @property
    def pure_epsilon(self) -> float:
        """τ(∞): the pure-DP ε of the composition (``inf`` if it has a zCDP term with ρ > 0)."""
        return float(self(np.inf))

    def __call__(self, alpha: Any) -> np.ndarray | float:
        a = _alpha(alpha)
        out = np.zeros(a.shape, dtype=float)
        for kind, parameter, sensitivity, weight in self.terms:
            if weight == 0 or parameter == 0:
                continue
            if kind == "geometric":
                out = out + weight * np.asarray(
                    rdp_geometric(a, parameter, sensitivity=sensitivity))
            else:
                out = out + weight * parameter * a
        return out if out.ndim else float(out)


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
    PostprocError
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
        raise PostprocError("nothing to compose: give at least one privacy loss")
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
    PostprocError
        If ``degree`` is not a positive integer.

    Examples
    --------
    >>> compose_parallel(Fraction(1, 10), degree=9)
    Fraction(9, 10)
    """
    if isinstance(degree, bool) or not isinstance(degree, (int, np.integer)) or degree < 1:
        raise PostprocError(f"the composition degree (stability) must be a positive integer, "
                            f"not {degree!r}")
    return int(degree) * value


# --------------------------------------------------------------------------------------------
# Conversions to (ε, δ)
# --------------------------------------------------------------------------------------------


def _conversion_penalty(t: np.ndarray, log_inv_delta: float) -> np.ndarray:
    """[log(1/δ) + (α−1) log(1 − 1/α) − log α] / (α − 1) with t = α − 1 (finite)."""
    log_alpha = np.log1p(t)
    return log_inv_delta / t + (np.log(t) - log_alpha) - log_alpha / t


def rdp_to_approx_dp(curve: RDPCurve | Callable[[np.ndarray], np.ndarray], delta: Any, *,
                     alphas: Iterable[float] = ()) -> float:
    """(ε, δ)-DP from a Rényi-DP curve, minimizing the conversion lemma over the order α.

    ``ε(α) = τ(α) + [log(1/δ) + (α−1) log(1 − 1/α) − log α] / (α − 1)`` (Canonne, Kamath &
    Steinke 2020, Prop. 12; Asoodeh et al. 2021), and ``ε = inf_α ε(α)``. The infimum is found
    numerically: ε(α) is evaluated on a dense grid of 2,801 orders with α − 1 log-spaced over
    [1e−6, 1e8] (:data:`ALPHA_GRID_MINUS_ONE`), plus ``alphas``, plus α = ∞ when τ(∞) is finite
    (there ε(∞) = τ(∞), the pure-DP ε); then scipy's bounded scalar minimization refines the best
    grid point between its two neighbours (in log(α − 1)). The result is the smallest value seen,
    so it is a valid bound whatever the refinement does, and at most one grid step from optimal.
    Negative values are reported as 0.

    Parameters
    ----------
    curve : RDPCurve or callable
        τ as a function of α, vectorized over numpy arrays (``np.inf`` allowed if finite there).
    delta : float
        In (0, 1).
    alphas : iterable of float, optional
        Extra orders (> 1) to evaluate.

    Returns
    -------
    float
        ε.

    Raises
    ------
    PostprocError
        If δ is not in (0, 1) or the curve returns NaN.

    Examples
    --------
    >>> round(rdp_to_approx_dp(RDPCurve.geometric(1.0), 1e-10), 6)
    1.0
    >>> round(rdp_to_approx_dp(RDPCurve.zcdp(0.5), 1e-10), 4)
    6.8393
    """
    d = _delta(delta)
    log_inv_delta = -math.log(d)
    extra = np.asarray(list(alphas), dtype=float) - 1.0
    if extra.size and np.any(extra <= 0):
        raise PostprocError(f"extra orders alpha must be > 1, not {list(alphas)!r}")
    t = np.sort(np.concatenate([ALPHA_GRID_MINUS_ONE, extra[np.isfinite(extra)]]))

    def objective(tt: np.ndarray) -> np.ndarray:
        return np.asarray(curve(1.0 + tt), dtype=float) + _conversion_penalty(tt, log_inv_delta)

    values = objective(t)
    if np.any(np.isnan(values)):
        raise PostprocError("the RDP curve returned NaN; check its parameters")
    i = int(np.argmin(values))
    best = float(values[i])
    lo, hi = math.log(t[max(i - 1, 0)]), math.log(t[min(i + 1, t.size - 1)])
    if hi > lo:
        res = minimize_scalar(lambda u: float(objective(np.array(math.exp(u)))),
                              bounds=(lo, hi), method="bounded", options={"xatol": 1e-10})
        if np.isfinite(res.fun):
            best = min(best, float(res.fun))
    at_infinity = float(np.asarray(curve(np.inf), dtype=float))
    if np.isfinite(at_infinity):
        best = min(best, at_infinity)
    return max(best, 0.0)


def zcdp_to_approx_dp_analytic(rho: Any, delta: Any) -> float:
    """(ε, δ)-DP from ρ-zCDP by the closed form ε = ρ + sqrt(4ρ log(1/δ)) (Bun & Steinke 2016).

    Parameters
    ----------
    rho : float
        ≥ 0.
    delta : float
        In (0, 1).

    Returns
    -------
    float

    Raises
    ------
    PostprocError
        If ρ < 0 or δ is not in (0, 1).

    Examples
    --------
    >>> round(zcdp_to_approx_dp_analytic(0.5, 1e-10), 4)
    7.2861
    """
    r = _nonnegative(rho, "rho")
    d = _delta(delta)
    return r + math.sqrt(4.0 * r * math.log(1.0 / d))


def zcdp_to_approx_dp_numeric(rho: Any, delta: Any) -> float:
    """(ε, δ)-DP from ρ-zCDP by ``inf_α [ρα + (log(1/δ) + (α−1) log(1−1/α) − log α)/(α−1)]``.

    This is :func:`rdp_to_approx_dp` for the curve τ(α) = αρ, with the analytic optimum
    α = 1 + sqrt(log(1/δ)/ρ) added to the grid, so the result never exceeds
    :func:`zcdp_to_approx_dp_analytic` (at that α the extra terms are negative).

    Parameters
    ----------
    rho : float
        ≥ 0.
    delta : float
        In (0, 1).

    Returns
    -------
    float

    Raises
    ------
    PostprocError
        If ρ < 0 or δ is not in (0, 1).

    Examples
    --------
    >>> round(zcdp_to_approx_dp_numeric(0.5, 1e-10), 4)
    6.8393
    """
    r = _nonnegative(rho, "rho")
    d = _delta(delta)
    if r == 0.0:
        return 0.0
    return rdp_to_approx_dp(RDPCurve.zcdp(r), d,
                            alphas=[1.0 + math.sqrt(math.log(1.0 / d) / r)])


# --------------------------------------------------------------------------------------------
# Margin of error (95 %) ↔ mechanism parameter
# --------------------------------------------------------------------------------------------


def moe_geometric(epsilon: Any, *, sensitivity: int = 1) -> int:
    """The 95 % margin of error of the geometric mechanism: ``⌊b ln(40/(1 + e^{1/b}))⌋``, b = Δ/ε.

    This is SafeTab's convention (SPEC §3). With z = 1/b, P[|X| > m] = 2e^{−z(m+1)}/(1 + e^{−z}),
    and the formula is the largest integer m with P[|X| > m] ≥ 5 % — so P[|X| > MOE + 1] < 5 %.
    Values below 0 (ε > ln 39, essentially no noise) are reported as 0.

    Parameters
    ----------
    epsilon : float
        Budget of the query, > 0.
    sensitivity : int, optional
        Δ. Default 1.

    Returns
    -------
    int

    Raises
    ------
    PostprocError
        If ε ≤ 0 or Δ is not a positive integer.

    Examples
    --------
    >>> moe_geometric(math.log(20) / 7)
    6
    """
    eps = _positive(epsilon, "epsilon")
    b = _sensitivity(sensitivity) / eps
    if 1.0 / b > 700.0:
        return 0
    return max(0, math.floor(b * math.log(40.0 / (1.0 + math.exp(1.0 / b)))))


def calibrate_geometric(moe: Any, *, sensitivity: int = 1) -> float:
    """The budget ε giving the geometric mechanism a target MOE: ``ε = Δ ln(20)/(⌊MOE⌋ + 1)``.

    The round trip ``moe_geometric(calibrate_geometric(m)) == m`` holds for every integer m ≥ 0:
    with u = ln(20)/(m+1) the MOE formula evaluates to m + b·ln(2e^u/(1 + e^u)) ∈ [m + 0.2, m + 1).

    Parameters
    ----------
    moe : float
        Target MOE, ≥ 0 (its floor is used).
    sensitivity : int, optional
        Δ. Default 1.

    Returns
    -------
    float

    Raises
    ------
    PostprocError
        If the MOE is negative or not finite.

    Examples
    --------
    >>> round(calibrate_geometric(6), 6)
    0.427962
    >>> moe_geometric(calibrate_geometric(6))
    6
    """
    m = math.floor(_nonnegative(moe, "MOE"))
    return _sensitivity(sensitivity) * math.log(20.0) / (m + 1)


def moe_discrete_gaussian(rho: Any, *, sensitivity: int = 1) -> int:
    """The 95 % margin of error of the discrete Gaussian: ``⌊1.96 σ⌋`` with σ = Δ/sqrt(2ρ).

    Parameters
    ----------
    rho : float
        zCDP budget of the query, > 0.
    sensitivity : int, optional
        Δ. Default 1.

    Returns
    -------
    int

    Raises
    ------
    PostprocError
        If ρ ≤ 0.

    Examples
    --------
    >>> moe_discrete_gaussian(1.92 / 36)
    6
    """
    r = _positive(rho, "rho")
    sigma = _sensitivity(sensitivity) / math.sqrt(2.0 * r)
    return math.floor(1.96 * sigma)


def calibrate_discrete_gaussian(moe: Any, *, sensitivity: int = 1) -> float:
    """The ρ giving the discrete Gaussian a target MOE: ``ρ = 1.92 Δ²/⌊MOE⌋²`` (SafeTab).

    1.92 rounds 1.96²/2 = 1.9208 down, so the calibrated σ is 1.0002 times the σ that gives
    exactly 1.96σ = MOE. The round trip ``moe_discrete_gaussian(calibrate_discrete_gaussian(m))
    == m`` therefore holds for 1 ≤ m ≤ 4800 and gives m + 1 from m = 4801 on (tested).

    Parameters
    ----------
    moe : float
        Target MOE, ≥ 1 (its floor is used).
    sensitivity : int, optional
        Δ. Default 1.

    Returns
    -------
    float

    Raises
    ------
    PostprocError
        If ⌊MOE⌋ < 1 (an MOE of 0 needs infinite ρ).

    Examples
    --------
    >>> round(calibrate_discrete_gaussian(6), 6)
    0.053333
    """
    m = math.floor(_nonnegative(moe, "MOE"))
    if m < 1:
        raise PostprocError(f"a discrete Gaussian MOE must be at least 1 (an MOE of {moe!r} "
                            f"would need infinite rho); ask for MOE >= 1")
    d = _sensitivity(sensitivity)
    return 1.92 * d * d / (m * m)


# --------------------------------------------------------------------------------------------
# Reports
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PrivacyLoss:
    """One privacy loss in every notion.

    Parameters
    ----------
    pure_epsilon : float or None
        Pure-DP ε (``None`` for zCDP mechanisms, which are not pure DP).
    rho : float
        zCDP ρ (ε²/2 for pure ε-DP mechanisms).
    rdp_epsilon : float
        ε at ``delta`` from the mechanism's RDP curve (:func:`rdp_to_approx_dp`).
    zcdp_epsilon_analytic, zcdp_epsilon_numeric : float
        ε at ``delta`` from ρ (:func:`zcdp_to_approx_dp_analytic`, ``..._numeric``).
    delta : float

    Examples
    --------
    >>> loss = PrivacyLoss.from_curve(RDPCurve.geometric(1.0), delta=1e-10)
    >>> loss.pure_epsilon, loss.rho, round(loss.zcdp_epsilon_analytic, 3)
    (1.0, 0.5, 7.286)
    """

    pure_epsilon: float | None
    rho: float
    rdp_epsilon: float
    zcdp_epsilon_analytic: float
    zcdp_epsilon_numeric: float
    delta: float

    @classmethod
    def from_curve(cls, curve: RDPCurve, *, delta: Any) -> "PrivacyLoss":
        """All notions for a composition of geometric (pure) and zCDP terms.

        The pure ε is τ(∞) (``None`` when a zCDP term makes it infinite); ρ is the zCDP terms'
        ρ plus ε²/2 for each geometric term (pure ε-DP ⇒ ε²/2-zCDP, then composition).
        """
        d = _delta(delta)
        pure = curve.pure_epsilon
        rho = sum(w * (p if k == "zcdp" else p * p / 2.0) for k, p, _, w in curve.terms)
        return cls(pure_epsilon=pure if math.isfinite(pure) else None, rho=rho,
                   rdp_epsilon=rdp_to_approx_dp(curve, d),
                   zcdp_epsilon_analytic=zcdp_to_approx_dp_analytic(rho, d),
                   zcdp_epsilon_numeric=zcdp_to_approx_dp_numeric(rho, d), delta=d)

    @classmethod
    def of(cls, *, epsilon: Any = None, rho: Any = None, delta: Any = 1e-10,
           sensitivity: int = 1) -> "PrivacyLoss":
        """All notions for one geometric mechanism with budget ε, or one ρ-zCDP mechanism.

        Parameters
        ----------
        epsilon : float, optional
            Pure-DP budget of a geometric mechanism (give exactly one of ε and ρ).
        rho : float, optional
            zCDP budget (e.g. of a discrete Gaussian mechanism).
        delta : float, optional
            Default 1e−10.
        sensitivity : int, optional
            Δ of the geometric mechanism's query (shapes its RDP curve). Default 1.

        Returns
        -------
        PrivacyLoss

        Raises
        ------
        PostprocError
            Unless exactly one of ε and ρ is given, or on invalid values.

        Examples
        --------
        >>> round(PrivacyLoss.of(rho=0.5, delta=1e-10).zcdp_epsilon_numeric, 4)
        6.8393
        """
        if (epsilon is None) == (rho is None):
            raise PostprocError("give exactly one of epsilon (pure DP, geometric mechanism) "
                                "and rho (zCDP)")
        if epsilon is not None:
            curve = RDPCurve.geometric(epsilon, sensitivity=sensitivity)
        else:
            curve = RDPCurve.zcdp(rho)
        return cls.from_curve(curve, delta=delta)

    def to_dict(self) -> dict[str, float | None]:
        """JSON-ready: the five numbers (``delta`` is reported once by the enclosing report)."""
        return {"pure_epsilon": self.pure_epsilon, "rho": self.rho,
                "rdp_epsilon": self.rdp_epsilon,
                "zcdp_epsilon_analytic": self.zcdp_epsilon_analytic,
                "zcdp_epsilon_numeric": self.zcdp_epsilon_numeric}


@dataclass(frozen=True)
class LevelsAccounting:
    """The accounting of a TopDown-style run: per query, per level and in total.

    Built by :func:`account_levels`; see there for the composition rules.

    Parameters
    ----------
    notion : {'pure', 'zcdp'}
    delta : float
    budgets : dict of str to dict of str to Fraction
        ``budgets[level][query]``, exact.
    sensitivity : dict of str to int
        Δ per query.
    per_query : dict of (str, str) to PrivacyLoss
    per_level : dict of str to PrivacyLoss
    total : PrivacyLoss
    """

    notion: str
    delta: float
    budgets: dict[str, dict[str, Fraction]]
    sensitivity: dict[str, int]
    per_query: dict[tuple[str, str], PrivacyLoss] = field(repr=False)
    per_level: dict[str, PrivacyLoss] = field(repr=False)
    total: PrivacyLoss

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict for a run manifest; exact budgets appear as strings like ``'9/160'``.

        Returns
        -------
        dict
            ``{"notion", "mechanism", "delta", "composition", "levels": {level: {"budget",
            "loss", "queries": {query: {"budget", "sensitivity", "loss"}}}}, "total": {"budget",
            "loss"}}``.
        """
        mechanism = "geometric" if self.notion == "pure" else "discrete_gaussian"
        levels = {}
        for level, queries in self.budgets.items():
            levels[level] = {
                "budget": str(sum(queries.values(), Fraction(0))),
                "loss": self.per_level[level].to_dict(),
                "queries": {q: {"budget": str(b), "sensitivity": self.sensitivity[q],
                                "loss": self.per_query[(level, q)].to_dict()}
                            for q, b in queries.items()},
            }
        total_budget = sum((sum(q.values(), Fraction(0)) for q in self.budgets.values()),
                           Fraction(0))
        return {
            "notion": self.notion, "mechanism": mechanism, "delta": self.delta,
            "composition": "sequential across levels and queries; parallel across the units of "
                           "a level (degree 1)",
            "levels": levels,
            "total": {"budget": str(total_budget), "loss": self.total.to_dict()},
        }


def account_levels(budgets: Mapping[str, Mapping[str, Any]], *, notion: str = "pure",
                   delta: Any = 1e-10,
                   sensitivity: int | Mapping[str, int] = 1) -> LevelsAccounting:
    """Account for a run that measures queries at every level of a geographic hierarchy.

    Each (level, query) is answered for every unit of the level with its own budget; units of a
    level are disjoint (parallel composition, degree 1), and queries and levels compose
    sequentially. With ``notion='pure'`` the budgets are ε of geometric mechanisms; with
    ``'zcdp'`` they are ρ of discrete Gaussian mechanisms. Every loss is reported as pure ε
    (pure only), ρ (ε²/2 for pure), (ε, δ) from the RDP curve (the exact geometric curve, or αρ),
    and (ε, δ) from ρ, analytic and numeric.

    Parameters
    ----------
    budgets : mapping of level to mapping of query to budget
        Budgets, read exactly with :func:`as_fraction`, e.g. from :func:`allocate_budget`.
    notion : {'pure', 'zcdp'}, optional
        Default ``'pure'``.
    delta : float, optional
        δ for the (ε, δ) conversions. Default 1e−10.
    sensitivity : int or mapping of query to int, optional
        L1 sensitivity Δ of each query (2 in the E2E test, where a changed record moves two
        cells). Affects only the geometric RDP curve. Default 1.

    Returns
    -------
    LevelsAccounting

    Raises
    ------
    PostprocError
        On an unknown notion, a missing sensitivity, a non-positive budget or an empty level.

    Examples
    --------
    >>> b = allocate_budget(1, levels={"nation": "1/2", "state": "1/2"},
    ...                     queries={"total": "1/4", "detailed": "3/4"})
    >>> acc = account_levels(b, notion="pure", sensitivity=2)
    >>> acc.total.pure_epsilon, acc.total.rho
    (1.0, 0.15625)
    >>> acc.to_dict()["levels"]["state"]["queries"]["detailed"]["budget"]
    '3/8'
    """
    if notion not in ("pure", "zcdp"):
        raise PostprocError(f"notion must be 'pure' (geometric noise, budgets are epsilon) or "
                            f"'zcdp' (discrete Gaussian noise, budgets are rho), not {notion!r}")
    d = _delta(delta)
    if not budgets:
        raise PostprocError("no levels to account for; give budgets[level][query]")
    exact: dict[str, dict[str, Fraction]] = {}
    for level, queries in budgets.items():
        if not isinstance(queries, Mapping) or not queries:
            raise PostprocError(f"level {level!r} has no query budgets; give "
                                f"budgets[{level!r}] = {{query: budget, ...}}")
        exact[level] = {}
        for query, value in queries.items():
            b = as_fraction(value, name=f"budget of query {query!r} at level {level!r}")
            if b <= 0:
                raise PostprocError(f"the budget of query {query!r} at level {level!r} is 0; "
                                    f"give it a positive budget or leave it out")
            exact[level][query] = b
    query_names = {q for queries in exact.values() for q in queries}
    if isinstance(sensitivity, Mapping):
        missing = sorted(query_names - set(sensitivity))
        if missing:
            raise PostprocError(f"no sensitivity given for queries {missing}; add them to "
                                f"the sensitivity mapping")
        sens = {q: _sensitivity(sensitivity[q], f"sensitivity of {q!r}") for q in query_names}
    else:
        s = _sensitivity(sensitivity)
        sens = {q: s for q in query_names}

    def curve_of(query: str, budget: Fraction) -> RDPCurve:
        if notion == "pure":
            return RDPCurve.geometric(float(budget), sensitivity=sens[query])
        return RDPCurve.zcdp(float(budget))

    curves = {(lv, q): curve_of(q, b) for lv, qs in exact.items() for q, b in qs.items()}
    per_query = {key: PrivacyLoss.from_curve(c, delta=d) for key, c in curves.items()}
    level_curves = {lv: compose(curves[(lv, q)] for q in qs) for lv, qs in exact.items()}
    per_level = {lv: PrivacyLoss.from_curve(c, delta=d) for lv, c in level_curves.items()}
    total = PrivacyLoss.from_curve(compose(level_curves.values()), delta=d)
    if notion == "pure":
        # Report the exact sums rather than float accumulations where they are defined.
        total = _with_exact_pure(total, sum((sum(q.values(), Fraction(0))
                                             for q in exact.values()), Fraction(0)))
        per_level = {lv: _with_exact_pure(per_level[lv], sum(qs.values(), Fraction(0)))
                     for lv, qs in exact.items()}
    return LevelsAccounting(notion=notion, delta=d, budgets=exact, sensitivity=sens,
                            per_query=per_query, per_level=per_level, total=total)


def _with_exact_pure(loss: PrivacyLoss, epsilon: Fraction) -> PrivacyLoss:
    return PrivacyLoss(pure_epsilon=float(epsilon), rho=loss.rho, rdp_epsilon=loss.rdp_epsilon,
                       zcdp_epsilon_analytic=loss.zcdp_epsilon_analytic,
                       zcdp_epsilon_numeric=loss.zcdp_epsilon_numeric, delta=loss.delta)


@dataclass(frozen=True)
class MOELevel:
    """The budgets of one SafeTab population-group level calibrated to a target MOE.

    Parameters
    ----------
    moe : int
        Target 95 % MOE of the released (Step 2) counts.
    epsilon_step2 : float
        ε of one Step-2 count with geometric noise (:func:`calibrate_geometric`).
    epsilon_total : float
        The level's pure-DP ε: ``s · epsilon_step2 / (1 − γ)``.
    rho_step2 : float
        ρ of one Step-2 count with discrete Gaussian noise (:func:`calibrate_discrete_gaussian`).
    rho_total : float
        The level's ρ: ``s · rho_step2 / (1 − γ)``.
    """

    moe: int
    epsilon_step2: float
    epsilon_total: float
    rho_step2: float
    rho_total: float

    def to_dict(self) -> dict[str, float | int]:
        """JSON-ready: exactly the keys ``moe, epsilon_step2, epsilon_total, rho_step2,
        rho_total``."""
        return {"moe": self.moe, "epsilon_step2": self.epsilon_step2,
                "epsilon_total": self.epsilon_total, "rho_step2": self.rho_step2,
                "rho_total": self.rho_total}


@dataclass(frozen=True)
class MOEAccounting:
    """Total privacy loss of SafeTab-style levels calibrated to MOEs (see :func:`account_moe`).

    Parameters
    ----------
    levels : tuple of MOELevel
    stability : int
    gamma : Fraction
    delta : float
    pure_dp_epsilon : float
        Σ of the levels' ε (geometric noise, pure DP).
    rdp_epsilon : float
        (ε, δ) from the composed RDP curve of the same geometric mechanisms.
    zcdp_epsilon_analytic, zcdp_epsilon_numeric : float
        (ε, δ) from Σ of the levels' ρ (discrete Gaussian noise, zCDP).
    """

    levels: tuple[MOELevel, ...]
    stability: int
    gamma: Fraction
    delta: float
    pure_dp_epsilon: float
    rdp_epsilon: float
    zcdp_epsilon_analytic: float
    zcdp_epsilon_numeric: float

    @property
    def rho(self) -> float:
        """Total ρ over the levels."""
        return sum(level.rho_total for level in self.levels)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: exactly ``{"levels": [...], "total": {"pure_dp_epsilon", "rdp_epsilon",
        "zcdp_epsilon_analytic", "zcdp_epsilon_numeric"}}``."""
        return {"levels": [level.to_dict() for level in self.levels],
                "total": {"pure_dp_epsilon": self.pure_dp_epsilon,
                          "rdp_epsilon": self.rdp_epsilon,
                          "zcdp_epsilon_analytic": self.zcdp_epsilon_analytic,
                          "zcdp_epsilon_numeric": self.zcdp_epsilon_numeric}}


def account_moe(moes: Iterable[Any], *, stability: int, gamma: Any = "0.1",
                delta: Any = 1e-10) -> MOEAccounting:
    """Budgets and total privacy loss of SafeTab-style levels with target MOEs (SPEC §8).

    Each population-group level ``i`` has a target 95 % MOE ``m_i`` for its released (Step 2)
    counts. A group spends a fraction ``γ`` of its budget on the noisy total used for
    thresholding (Step 1) and ``1 − γ`` on the released counts (Step 2; a record falls in one
    released cell of its group, so the counts of one group compose in parallel). Hence, with
    ``s`` the stability (the most groups of one level a record belongs to):

    * Step-2 budget of a group: ``ε₂ = ln 20/(m + 1)`` (geometric) or ``ρ₂ = 1.92/m²`` (discrete
      Gaussian) — calibrated so the released counts have MOE ``m``;
    * group budget: ``ε₂/(1 − γ)`` (so Step 1 gets ``γ ε₂/(1 − γ)``), likewise for ρ;
    * level budget, by generalized parallel composition over groups of degree ``s``:
      ``ε_level = s · ε₂/(1 − γ)`` and ``ρ_level = s · ρ₂/(1 − γ)``.

    Levels compose sequentially. The totals are: pure DP ``Σ ε_level`` (geometric noise);
    RDP → (ε, δ) for the *same geometric mechanisms*, from the curve
    ``Σ_i s·[τ(α, γ ε₂/(1 − γ)) + τ(α, ε₂)]``; zCDP → (ε, δ) analytic and numeric for
    discrete Gaussian noise with the same MOEs, from ``Σ ρ_level``. Sensitivity is 1 (one record
    changes one cell of a group by one).

    Parameters
    ----------
    moes : iterable of int
        Target MOE of each level, each ≥ 1.
    stability : int
        s, ≥ 1.
    gamma : Fraction, str or float, optional
        Share of a group's budget for the Step-1 total, in [0, 1). Default ``"0.1"``.
    delta : float, optional
        δ for the conversions. Default 1e−10.

    Returns
    -------
    MOEAccounting

    Raises
    ------
    PostprocError
        On no levels, an MOE < 1, a bad stability, γ outside [0, 1) or δ outside (0, 1).

    Examples
    --------
    >>> acc = account_moe([6, 50], stability=9, gamma="0.1")
    >>> [round(level.epsilon_total, 4) for level in acc.levels]
    [4.2796, 0.5874]
    >>> round(acc.pure_dp_epsilon, 4), round(acc.rho, 4)
    (4.867, 0.5410)
    """
    moe_list = list(moes)
    if not moe_list:
        raise PostprocError("give at least one MOE (one per population-group level)")
    if isinstance(stability, bool) or not isinstance(stability, (int, np.integer)) \
            or stability < 1:
        raise PostprocError(f"stability must be a positive integer (the most groups of one "
                            f"level a record can belong to), not {stability!r}")
    s = int(stability)
    g = as_fraction(gamma, name="gamma")
    if g >= 1:
        raise PostprocError(f"gamma (the share of a group's budget for the noisy total) must be "
                            f"in [0, 1), not {gamma!r}; SafeTab uses 0.1")
    d = _delta(delta)
    step2_share = 1 - g
    levels: list[MOELevel] = []
    curve = RDPCurve()
    for i, value in enumerate(moe_list):
        m_float = _nonnegative(value, f"MOE of level {i + 1}")
        if m_float != math.floor(m_float) or m_float < 1:
            raise PostprocError(f"MOE of level {i + 1} must be an integer >= 1, not {value!r}")
        m = int(m_float)
        eps2 = calibrate_geometric(m)
        rho2 = calibrate_discrete_gaussian(m)
        eps_group = eps2 / float(step2_share)
        levels.append(MOELevel(moe=m, epsilon_step2=eps2, epsilon_total=s * eps_group,
                               rho_step2=rho2, rho_total=s * rho2 / float(step2_share)))
        group = RDPCurve.geometric(eps2)
        if g > 0:
            group = RDPCurve.geometric(float(g) * eps_group) + group
        curve = curve + compose_parallel(group, degree=s)
    rho_total = sum(level.rho_total for level in levels)
    return MOEAccounting(levels=tuple(levels), stability=s, gamma=g, delta=d,
                         pure_dp_epsilon=sum(level.epsilon_total for level in levels),
                         rdp_epsilon=rdp_to_approx_dp(curve, d),
                         zcdp_epsilon_analytic=zcdp_to_approx_dp_analytic(rho_total, d),
                         zcdp_epsilon_numeric=zcdp_to_approx_dp_numeric(rho_total, d))
