"""Amplification by sampling: the loss of a mechanism run on a secret random sample.

A mechanism that sees only a random sample of the population protects a person more than one
that sees everyone: with probability ``1 − q`` that person is not in the sample at all, and an
observer who does not know who was drawn cannot tell which case happened ("secrecy of the
sample"). This module states what that is worth, under two sampling designs, each with its own
neighbour relation (docs/accounting.md, "Amplification by sampling"):

* **Poisson sampling** at a known rate ``q`` — each person kept independently with probability
  ``q`` — with neighbours that **add or remove one person**. An ε-DP mechanism on the sample is
  ``log(1 + q(e^ε − 1))``-DP on the population, and an (ε, δ)-DP one is
  ``(log(1 + q(e^ε − 1)), qδ)``-DP (Li, Qardaji & Su 2012; Balle, Barthe & Gaboardi 2018):
  :func:`amplify_poisson`.
* **Sampling without replacement** of ``m`` persons out of ``n`` — a simple random sample of
  fixed size — with neighbours that **substitute one person's record** (``n`` is public). The
  same formulas hold with ``q = m/n`` (Balle, Barthe & Gaboardi 2018), provided the mechanism
  is ε-DP (or (ε, δ)-DP) for substitution on samples of size ``m``:
  :func:`amplify_without_replacement`.
* **The Poisson-subsampled Gaussian mechanism** in Rényi DP (Mironov, Talwar & Zhang 2019), at
  integer orders α ≥ 2: :func:`rdp_sampled_gaussian`, and :class:`SampledRDPCurve`, an RDP
  curve that composes with :class:`~hierarchy.accounting.RDPCurve` and converts to (ε, δ) with
  :func:`~hierarchy.accounting.rdp_to_approx_dp`.

:func:`amplify_loss` amplifies every (ε, δ) of a :class:`~hierarchy.accounting.PrivacyLoss`
(what ``postproc account convert --sample-rate`` prints) and :func:`sampling_assumption` states
the assumption in one line. Releases from one sample share it: compose their losses first, then
amplify once (amplifying each and adding understates the loss). None of this applies to a census
enumeration, which is not a sample.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy.special import gammaln, logsumexp

from hierarchy.accounting._checks import _alpha, check_epsilon
from hierarchy.accounting.rdp import RDPCurve, rdp_gaussian
from hierarchy.accounting.reports import PrivacyLoss
from hierarchy.errors import AccountingError
from hierarchy.numbers import integer, nonnegative, positive

__all__ = ["check_sample_rate", "check_sample_size", "amplify_poisson",
           "amplify_without_replacement", "sampling_assumption", "AmplifiedLoss", "amplify_loss",
           "rdp_sampled_gaussian", "SampledRDPCurve", "MAX_INTEGER_ORDER"]

#: Largest Rényi order at which :class:`SampledRDPCurve` sums the sampled Gaussian's closed form
#: (α + 1 terms); above it the curve uses the unsampled Gaussian's α Δ²/(2σ²), an upper bound.
MAX_INTEGER_ORDER = 10_000

_CHUNK_ELEMENTS = 2 ** 20      # orders × terms per temporary array of the closed form (8 MB)
_LARGEST_ORDER = 10 ** 6       # rdp_sampled_gaussian sums at most this many terms per order


def check_sample_rate(rate: Any, name: str = "rate") -> float:
    """A Poisson sampling rate: a number in (0, 1], or an AccountingError naming ``name``.

    Parameters
    ----------
    rate : float
        The probability that each person is in the sample.
    name : str, optional
        The argument's name, for the message.

    Returns
    -------
    float

    Raises
    ------
    AccountingError
        If ``rate`` is not a number in (0, 1].

    Examples
    --------
    >>> check_sample_rate(0.25)
    0.25
    >>> check_sample_rate(1.5)
    Traceback (most recent call last):
    ...
    hierarchy.errors.AccountingError: rate (the probability that each person is in the sample) must
    be in (0, 1], not 1.5; give 1 for a mechanism run on everyone (no amplification)
    """
    value = math.nan
    if not isinstance(rate, (bool, np.bool_)):
        try:
            value = float(rate)
        except (TypeError, ValueError, OverflowError):
            pass
    if not 0.0 < value <= 1.0:
        raise AccountingError(f"{name} (the probability that each person is in the sample) must "
                              f"be in (0, 1], not {rate!r}; give 1 for a mechanism run on "
                              f"everyone (no amplification)")
    return value


def check_sample_size(sample_size: Any, population: Any) -> tuple[int, int]:
    """The size ``m`` of a sample drawn without replacement and its population ``n``: integers
    with 1 ≤ m ≤ n, or an AccountingError naming the argument.

    Parameters
    ----------
    sample_size : int
        ``m``, the number of persons drawn.
    population : int
        ``n``, the number of persons they were drawn from.

    Returns
    -------
    tuple of int
        ``(m, n)``.

    Raises
    ------
    AccountingError
        If either is not a positive integer, or ``m > n``.

    Examples
    --------
    >>> check_sample_size(25, 100)
    (25, 100)
    >>> check_sample_size(7, 6)
    Traceback (most recent call last):
    ...
    hierarchy.errors.AccountingError: sample_size (7) must be at most population (6): a sample drawn
    without replacement holds each person at most once; give the size of the whole population
    the sample was drawn from
    """
    m = integer(sample_size, "sample_size", why="the number of persons drawn",
                error=AccountingError)
    n = integer(population, "population", why="the number of persons the sample is drawn from",
                error=AccountingError)
    if m > n:
        raise AccountingError(f"sample_size ({m}) must be at most population ({n}): a sample "
                              f"drawn without replacement holds each person at most once; give "
                              f"the size of the whole population the sample was drawn from")
    return m, n


def _check_delta(delta: Any) -> float:
    return nonnegative(delta, "delta", at_most=1.0, error=AccountingError,
                       why="0 for a pure-DP mechanism")


def _design(rate: Any, sample_size: Any, population: Any) -> tuple[float, int | None, int | None]:
    """The sampling fraction ``q`` (the rate, or m/n) and ``(m, n)`` of a design, checked."""
    if rate is not None:
        if sample_size is not None or population is not None:
            raise AccountingError("give either rate (Poisson sampling) or sample_size and "
                                  "population (sampling without replacement), not both")
        return check_sample_rate(rate), None, None
    if sample_size is None or population is None:
        raise AccountingError("give rate (Poisson sampling), or both sample_size and population "
                              "(sampling without replacement)")
    m, n = check_sample_size(sample_size, population)
    return m / n, m, n


def _amplify(epsilon: float, fraction: float) -> float:
    """``log(1 + q(e^ε − 1))`` for a checked ε ≥ 0 and q in (0, 1]: ε itself at q = 1.

    ``log1p(q expm1(ε))`` keeps the digits of a small result; beyond ε = 700 (``e^ε`` overflows)
    it is ``ε + log(q + (1 − q) e^{−ε})``. Never above ε, whatever the rounding.
    """
    if fraction == 1.0 or epsilon == 0.0:
        return epsilon
    if epsilon <= 700.0:
        value = math.log1p(fraction * math.expm1(epsilon))
    else:
        value = epsilon + float(np.logaddexp(math.log(fraction), math.log1p(-fraction) - epsilon))
    return min(value, epsilon)


def amplify_poisson(epsilon: Any, *, rate: Any, delta: Any = 0.0) -> tuple[float, float]:
    """The loss of an (ε, δ)-DP mechanism run on a secret Poisson sample at rate ``q``.

    Each person is in the sample independently with probability ``q``, and who is in it is not
    released. For neighbours that **add or remove one person** (the mechanism's ε and δ must hold
    for that relation on the sample), the whole is (ε', δ')-DP with
    ``ε' = log(1 + q(e^ε − 1))`` and ``δ' = qδ`` (Li, Qardaji & Su 2012, "On sampling,
    anonymization, and differential privacy"; Balle, Barthe & Gaboardi 2018, "Privacy
    amplification by subsampling: tight analyses via couplings and divergences"). For small ε,
    ε' ≈ qε. The bound is tight: the geometric mechanism on a count attains it.

    Parameters
    ----------
    epsilon : float
        The mechanism's ε on the sample, in [0, 1e15].
    rate : float
        ``q``, in (0, 1]; at 1 the loss is returned unchanged.
    delta : float, optional
        The mechanism's δ, in [0, 1]; 0 (the default) for a pure-DP mechanism.

    Returns
    -------
    tuple of float
        ``(ε', δ')``.

    Raises
    ------
    AccountingError
        If ε is negative or not finite, ``rate`` is not in (0, 1] or δ not in [0, 1].

    Examples
    --------
    >>> eps, delta = amplify_poisson(1.0, rate=0.25)
    >>> round(eps, 6), delta
    (0.357374, 0.0)
    >>> round(math.log(1 + 0.25 * (math.e - 1)), 6)
    0.357374
    >>> amplify_poisson(2.0, rate=0.01, delta=1e-8)[1]
    1e-10
    >>> amplify_poisson(0.7, rate=1)                  # no sampling: the loss itself
    (0.7, 0.0)
    """
    eps = check_epsilon(epsilon)
    q = check_sample_rate(rate)
    d = _check_delta(delta)
    return _amplify(eps, q), q * d


def amplify_without_replacement(epsilon: Any, *, sample_size: Any, population: Any,
                                delta: Any = 0.0) -> tuple[float, float]:
    """The loss of an (ε, δ)-DP mechanism run on a secret sample of ``m`` of ``n`` persons.

    The sample is drawn uniformly without replacement (a simple random sample of fixed size
    ``m``), ``n`` is public, and who is in the sample is not released. For neighbours that
    **substitute one person's record** — the mechanism's ε and δ must hold for substitution on
    samples of size ``m``; a histogram's L1 sensitivity is 2 under substitution, not 1 — the
    whole is (ε', δ')-DP with ``ε' = log(1 + (m/n)(e^ε − 1))`` and ``δ' = (m/n)δ`` (Balle,
    Barthe & Gaboardi 2018, "Privacy amplification by subsampling: tight analyses via couplings
    and divergences", their bound for sampling without replacement under substitution).

    Parameters
    ----------
    epsilon : float
        The mechanism's ε on the sample (for substitution), in [0, 1e15].
    sample_size : int
        ``m``, at least 1.
    population : int
        ``n``, at least ``m``; at ``m = n`` the loss is returned unchanged.
    delta : float, optional
        The mechanism's δ, in [0, 1]; 0 (the default) for a pure-DP mechanism.

    Returns
    -------
    tuple of float
        ``(ε', δ')``.

    Raises
    ------
    AccountingError
        If ε is negative or not finite, ``m`` or ``n`` is not a positive integer, ``m > n``, or
        δ is not in [0, 1].

    Examples
    --------
    >>> eps, delta = amplify_without_replacement(1.0, sample_size=25, population=100,
    ...                                          delta=1e-6)
    >>> round(eps, 6), delta                          # the same as Poisson sampling at 1/4
    (0.357374, 2.5e-07)
    >>> amplify_without_replacement(1.0, sample_size=6, population=6)
    (1.0, 0.0)
    """
    eps = check_epsilon(epsilon)
    m, n = check_sample_size(sample_size, population)
    d = _check_delta(delta)
    fraction = m / n
    return _amplify(eps, fraction), fraction * d


def sampling_assumption(*, rate: Any = None, sample_size: Any = None,
                        population: Any = None) -> str:
    """The assumption under which a sampling design amplifies the loss, in one line.

    Give ``rate`` for Poisson sampling, or ``sample_size`` and ``population`` for sampling
    without replacement.

    Parameters
    ----------
    rate : float, optional
        The Poisson sampling rate, in (0, 1].
    sample_size, population : int, optional
        ``m`` and ``n`` of a sample drawn without replacement.

    Returns
    -------
    str

    Raises
    ------
    AccountingError
        Unless exactly one design is given, with valid values.

    Examples
    --------
    >>> print(sampling_assumption(rate=0.25))
    assumes the sample is drawn by Poisson sampling at rate 0.25, secret; neighbours add or
    remove one person
    >>> print(sampling_assumption(sample_size=25, population=100))
    assumes the sample is 25 of 100 persons drawn uniformly without replacement, secret;
    neighbours substitute one person's record
    """
    q, m, n = _design(rate, sample_size, population)
    if m is None:
        return (f"assumes the sample is drawn by Poisson sampling at rate {q:g}, secret; "
                f"neighbours add or remove one person")
    return (f"assumes the sample is {m:,} of {n:,} persons drawn uniformly without replacement, "
            f"secret; neighbours substitute one person's record")


@dataclass(frozen=True)
class AmplifiedLoss:
    """A :class:`~hierarchy.accounting.PrivacyLoss` amplified by sampling.

    Built by :func:`amplify_loss`: each (ε, δ) of the loss becomes ``(log(1 + q(e^ε − 1)), qδ)``,
    its pure ε ``log(1 + q(e^ε − 1))``; zCDP's ρ is not amplified by these bounds, so left out.

    Parameters
    ----------
    rate : float
        The sampling fraction ``q``: the Poisson rate, or ``m/n``.
    sample_size, population : int or None
        ``m`` and ``n`` for sampling without replacement; ``None`` for Poisson sampling.
    pure_epsilon : float or None
        The amplified pure ε (``None`` when the loss has none).
    rdp_epsilon, zcdp_epsilon_analytic, zcdp_epsilon_numeric : float
        The amplified ε of each (ε, δ) of the loss, at δ' = ``delta``.
    delta : float
        ``qδ``.

    Raises
    ------
    AccountingError
        On a rate not in (0, 1], or one that is not ``m/n`` for a sample of ``m`` of ``n``.

    Examples
    --------
    >>> loss = amplify_loss(PrivacyLoss.of(epsilon=1.0), rate=0.25)
    >>> loss.scheme, round(loss.pure_epsilon, 6), loss.delta
    ('poisson', 0.357374, 2.5e-11)
    """

    rate: float
    sample_size: int | None
    population: int | None
    pure_epsilon: float | None
    rdp_epsilon: float
    zcdp_epsilon_analytic: float
    zcdp_epsilon_numeric: float
    delta: float
    scheme: str = field(init=False)

    def __post_init__(self) -> None:
        if self.sample_size is None and self.population is None:
            object.__setattr__(self, "scheme", "poisson")
            check_sample_rate(self.rate)
            return
        m, n = check_sample_size(self.sample_size, self.population)
        if self.rate != m / n:
            raise AccountingError(f"rate must be sample_size/population = {m}/{n} for a sample "
                                  f"drawn without replacement, not {self.rate!r}")
        object.__setattr__(self, "scheme", "without_replacement")

    @property
    def assumption(self) -> str:
        """:func:`sampling_assumption` of the design."""
        if self.sample_size is None:
            return sampling_assumption(rate=self.rate)
        return sampling_assumption(sample_size=self.sample_size, population=self.population)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: the design, its assumption, the amplified losses and δ'."""
        return {"scheme": self.scheme, "rate": self.rate, "sample_size": self.sample_size,
                "population": self.population, "assumption": self.assumption,
                "pure_epsilon": self.pure_epsilon, "rdp_epsilon": self.rdp_epsilon,
                "zcdp_epsilon_analytic": self.zcdp_epsilon_analytic,
                "zcdp_epsilon_numeric": self.zcdp_epsilon_numeric, "delta": self.delta}


def amplify_loss(loss: PrivacyLoss, *, rate: Any = None, sample_size: Any = None,
                 population: Any = None) -> AmplifiedLoss:
    """One mechanism's loss in every notion, amplified by a secret sample.

    Give ``rate`` for Poisson sampling (neighbours add or remove one person;
    :func:`amplify_poisson`) or ``sample_size`` and ``population`` for sampling without
    replacement (neighbours substitute one person's record, so ``loss`` must be for
    substitution; :func:`amplify_without_replacement`). The mechanism is (ε, δ)-DP for each of
    the loss's (ε, δ) pairs, so each is amplified to ``(log(1 + q(e^ε − 1)), qδ)``.

    Parameters
    ----------
    loss : PrivacyLoss
        The mechanism's loss on the sample.
    rate : float, optional
        The Poisson sampling rate, in (0, 1].
    sample_size, population : int, optional
        ``m`` and ``n``, 1 ≤ m ≤ n.

    Returns
    -------
    AmplifiedLoss

    Raises
    ------
    AccountingError
        Unless ``loss`` is a PrivacyLoss and exactly one design is given, with valid values.

    Examples
    --------
    >>> loss = PrivacyLoss.of(rho=0.5, delta=1e-10)
    >>> amplified = amplify_loss(loss, sample_size=1, population=10)
    >>> amplified.pure_epsilon is None, amplified.delta
    (True, 1e-11)
    >>> amplified.rdp_epsilon < loss.rdp_epsilon
    True
    """
    if not isinstance(loss, PrivacyLoss):
        raise AccountingError(f"loss must be a PrivacyLoss (e.g. PrivacyLoss.of(epsilon=1)), "
                              f"not {loss!r}")
    q, m, n = _design(rate, sample_size, population)
    pure = None if loss.pure_epsilon is None else _amplify(loss.pure_epsilon, q)
    return AmplifiedLoss(rate=q, sample_size=m, population=n, pure_epsilon=pure,
                         rdp_epsilon=_amplify(loss.rdp_epsilon, q),
                         zcdp_epsilon_analytic=_amplify(loss.zcdp_epsilon_analytic, q),
                         zcdp_epsilon_numeric=_amplify(loss.zcdp_epsilon_numeric, q),
                         delta=q * loss.delta)


def _log_expm1(x: np.ndarray) -> np.ndarray:
    """``log(e^x − 1)`` for x > 0, without overflow for large x."""
    out = np.empty_like(x)
    large = x > 1.0
    out[large] = x[large] + np.log1p(-np.exp(-x[large]))
    out[~large] = np.log(np.expm1(x[~large]))
    return out


def _log_moment(orders: np.ndarray, rate: float, c: float) -> np.ndarray:
    """``log A_α`` for integer orders α ≥ 2, ``0 < rate < 1`` and c = Δ²/(2σ²) > 0.

    The binomial weights of ``A_α = Σ_{k=0}^{α} C(α, k) (1 − q)^{α−k} q^k e^{c(k² − k)}`` sum to
    1 and its terms k = 0, 1 have ``e^0 = 1``, so ``A_α − 1 = Σ_{k≥2} C(α, k) (1 − q)^{α−k} q^k
    (e^{c(k² − k)} − 1)``, positive terms summed in log space: no cancellation, however small q.
    """
    out = np.empty(orders.shape)
    order = np.argsort(orders)[::-1]            # the largest first: one chunk per width
    log_q, log_1mq = math.log(rate), math.log1p(-rate)
    start = 0
    while start < order.size:
        width = int(orders[order[start]])
        rows = order[start:start + max(1, _CHUNK_ELEMENTS // width)]
        start += rows.size
        a = orders[rows].astype(float)[:, None]
        k = np.arange(2, width + 1, dtype=float)
        with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
            terms = (gammaln(a + 1.0) - gammaln(k + 1.0) - gammaln(a - k + 1.0)
                     + (a - k) * log_1mq + k * log_q + _log_expm1(c * k * (k - 1.0)))
        terms = np.where(k <= a, terms, -np.inf)
        out[rows] = np.logaddexp(0.0, logsumexp(terms, axis=1))
    return out


def _integer_orders(alpha: Any) -> np.ndarray:
    a = np.asarray(alpha, dtype=float)
    finite = np.isfinite(a)
    if (np.any(np.isnan(a)) or np.any(a[~finite] < 0) or np.any(a[finite] < 2)
            or np.any(a[finite] != np.floor(a[finite]))):
        raise AccountingError(f"alpha must hold integer orders >= 2 (np.inf allowed), not "
                              f"{alpha!r}: the closed form is a sum over 0..alpha; "
                              f"SampledRDPCurve bounds the orders between integers")
    if np.any(a[finite] > _LARGEST_ORDER):
        raise AccountingError(f"alpha must hold orders of at most {_LARGEST_ORDER:,} (the sum "
                              f"has alpha + 1 terms), not {alpha!r}; SampledRDPCurve bounds "
                              f"larger ones by the unsampled Gaussian's")
    return a


def rdp_sampled_gaussian(alpha: Any, sigma: Any, *, rate: Any,
                         sensitivity: Any = 1.0) -> np.ndarray | float:
    """Rényi DP of the Poisson-subsampled Gaussian mechanism at integer orders α ≥ 2.

    The mechanism adds N(0, σ²) noise to a query of L2 sensitivity Δ computed on a Poisson
    sample at rate ``q``; neighbours **add or remove one person**, who is in the sample with
    probability ``q``. Mironov, Talwar & Zhang (2019, "Rényi differential privacy of the sampled
    Gaussian mechanism") show its RDP of order α is ``D_α((1 − q)N(0, σ²) + qN(Δ, σ²) ‖ N(0, σ²))``
    (the reverse divergence is never larger), which for integer α is ``log(A_α)/(α − 1)`` with

    ``A_α = Σ_{k=0}^{α} C(α, k) (1 − q)^{α−k} q^k exp((k² − k) Δ²/(2σ²))``,

    summed in log space (binomials by ``gammaln``, the sum by ``logsumexp``), so it stays finite
    for large α and small σ. At ``q = 1`` it is the Gaussian's ``α Δ²/(2σ²)``
    (:func:`~hierarchy.accounting.rdp_gaussian`) exactly; at ``α = ∞`` it is ``inf``. The formula
    holds at integer orders only; :class:`SampledRDPCurve` bounds the orders between.

    Parameters
    ----------
    alpha : int, float or array_like
        Orders: integers from 2 to 10⁶, or ``np.inf``.
    sigma : float
        The noise's standard deviation, > 0.
    rate : float
        ``q``, in (0, 1].
    sensitivity : float, optional
        The query's L2 sensitivity Δ, > 0. Default 1.

    Returns
    -------
    float or numpy.ndarray
        τ(α), with the shape of ``alpha``.

    Raises
    ------
    AccountingError
        On an order that is not an integer in [2, 10⁶] (or ∞), a non-positive σ or Δ, or a rate
        not in (0, 1].

    Examples
    --------
    >>> round(rdp_sampled_gaussian(2, 1.0, rate=0.1), 6)             # log(1 + q²(e − 1))
    0.017037
    >>> round(math.log1p(0.1 ** 2 * (math.e - 1)), 6)
    0.017037
    >>> rdp_sampled_gaussian([2, 8, 32], 2.0, rate=0.01).round(7)
    array([2.840e-05, 1.158e-04, 5.029e-04])
    >>> rdp_sampled_gaussian(4, 2.0, rate=1) == rdp_gaussian(4, 2.0)
    True
    """
    a = _integer_orders(alpha)
    s = positive(sigma, "sigma", error=AccountingError)
    d = positive(sensitivity, "sensitivity", error=AccountingError)
    q = check_sample_rate(rate)
    if q == 1.0:
        return rdp_gaussian(a, s, sensitivity=d)
    out = np.full(a.shape, np.inf)
    finite = np.isfinite(a)
    if np.any(finite):
        orders, inverse = np.unique(a[finite], return_inverse=True)
        out[finite] = (_log_moment(orders, q, d * d / (2.0 * s * s)) / (orders - 1.0))[inverse]
    return out if out.ndim else float(out)


def _sampled_bound(alpha: np.ndarray, rate: float, multiplier: float) -> np.ndarray:
    """An upper bound on the sampled Gaussian's RDP at any order α > 1 (noise multiplier σ/Δ).

    Rényi divergences grow with the order, so the value at ⌈α⌉ (at least 2) bounds the value at
    α; above :data:`MAX_INTEGER_ORDER` the unsampled Gaussian's α/(2(σ/Δ)²) does (a mixture
    with the unshifted noise is never farther from it than the shifted noise alone).
    """
    c = 1.0 / (2.0 * multiplier * multiplier)
    if rate == 1.0:
        return alpha * c
    out = np.full(alpha.shape, np.inf)
    finite = np.isfinite(alpha)
    ceiling = np.maximum(np.ceil(np.where(finite, alpha, 2.0)), 2.0)
    exact = finite & (ceiling <= MAX_INTEGER_ORDER)
    if np.any(exact):
        orders, inverse = np.unique(ceiling[exact], return_inverse=True)
        out[exact] = (_log_moment(orders, rate, c) / (orders - 1.0))[inverse]
    above = finite & ~exact
    out[above] = alpha[above] * c
    return out


@dataclass(frozen=True)
class SampledRDPCurve:
    """An RDP curve with Poisson-subsampled Gaussian mechanisms, composed with an RDPCurve.

    :class:`~hierarchy.accounting.RDPCurve` holds geometric and zCDP terms only; this adds
    sampled Gaussian terms (:func:`rdp_sampled_gaussian`). Their closed form holds at integer
    orders, so at an order between integers the curve takes the value at ⌈α⌉ (at least 2) — an
    upper bound, as Rényi divergences grow with the order — and above :data:`MAX_INTEGER_ORDER`
    the unsampled Gaussian's α Δ²/(2σ²), also an upper bound. The curve is thus valid at every
    α > 1 and :func:`~hierarchy.accounting.rdp_to_approx_dp` converts it (pass the integer
    orders as ``alphas=`` to have each tried exactly).

    ``+`` (with an ``RDPCurve`` on either side) and ``z * curve`` compose as for ``RDPCurve``,
    so :func:`~hierarchy.accounting.compose` and :func:`~hierarchy.accounting.compose_parallel`
    accept it. Each sampled term is one mechanism on its own, independent Poisson sample
    (neighbours add or remove one person, the sample secret); mechanisms that share one sample
    are one mechanism on it: compose them, then account for the sampling once.

    Parameters
    ----------
    base : RDPCurve, optional
        The geometric and zCDP terms.
    sampled : tuple of (rate, noise multiplier, weight)
        One ``(q, σ/Δ, w)`` per sampled Gaussian mechanism, contributing
        ``w · rdp_sampled_gaussian(α, σ/Δ, rate=q)``. Build with :meth:`gaussian` rather than
        by hand.

    Raises
    ------
    AccountingError
        If ``base`` is not an RDPCurve or a sampled term is malformed.

    Examples
    --------
    >>> sampled = SampledRDPCurve.gaussian(2.0, rate=0.01)
    >>> round(float(sampled(8)), 8), round(float(sampled(7.5)), 8)    # 7.5: bounded by 8
    (0.00011576, 0.00011576)
    >>> total = RDPCurve.geometric(0.1) + 100 * sampled             # RDPCurve first, too
    >>> bool(total(8) == RDPCurve.geometric(0.1)(8) + 100 * sampled(8))
    True
    >>> from hierarchy.accounting import rdp_to_approx_dp
    >>> round(rdp_to_approx_dp(100 * sampled, 1e-10), 3)      # 100 rounds, each on a 1 % sample
    0.586
    >>> round(rdp_to_approx_dp(RDPCurve.gaussian(2.0), 1e-10), 3)  # one round on everyone
    3.244
    """

    base: RDPCurve = field(default_factory=RDPCurve)
    sampled: tuple[tuple[float, float, float], ...] = ()

    def __post_init__(self) -> None:
        if not isinstance(self.base, RDPCurve):
            raise AccountingError(f"base must be an RDPCurve, not {self.base!r}")
        terms = []
        for term in self.sampled:
            if not isinstance(term, tuple) or len(term) != 3:
                raise AccountingError(f"a sampled Gaussian term is (rate, noise multiplier "
                                      f"sigma/sensitivity, weight), not {term!r}")
            terms.append((check_sample_rate(term[0]),
                          positive(term[1], "noise multiplier sigma/sensitivity",
                                   error=AccountingError),
                          nonnegative(term[2], "weight of a sampled Gaussian term",
                                      error=AccountingError)))
        object.__setattr__(self, "sampled", tuple(terms))

    @classmethod
    def gaussian(cls, sigma: Any, *, rate: Any, sensitivity: Any = 1.0) -> "SampledRDPCurve":
        """The Gaussian mechanism N(0, σ²) on a query of L2 sensitivity Δ, run on a Poisson
        sample at rate ``q`` (in (0, 1]).

        Examples
        --------
        >>> curve = SampledRDPCurve.gaussian(4.0, rate=0.5, sensitivity=2.0)
        >>> curve.sampled
        ((0.5, 2.0, 1.0),)
        """
        s = positive(sigma, "sigma", error=AccountingError)
        d = positive(sensitivity, "sensitivity", error=AccountingError)
        return cls(sampled=((check_sample_rate(rate), s / d, 1.0),))

    def __add__(self, other: Any) -> "SampledRDPCurve":
        if isinstance(other, RDPCurve):
            return SampledRDPCurve(self.base + other, self.sampled)
        if isinstance(other, SampledRDPCurve):
            return SampledRDPCurve(self.base + other.base, self.sampled + other.sampled)
        return NotImplemented

    __radd__ = __add__

    def __rmul__(self, degree: Any) -> "SampledRDPCurve":
        w = nonnegative(degree, "composition degree", error=AccountingError)
        return SampledRDPCurve(w * self.base,
                               tuple((q, m, weight * w) for q, m, weight in self.sampled))

    __mul__ = __rmul__

    @property
    def pure_epsilon(self) -> float:
        """τ(∞): ``inf`` when a sampled Gaussian term has a positive weight."""
        return float(self(np.inf))

    @property
    def zcdp_rho(self) -> float:
        """ρ of the composition as zCDP, *without* amplification: the base's, plus
        Δ²/(2σ²) per unit weight of each sampled Gaussian (sampling never makes the Gaussian
        less private, but these bounds do not amplify ρ)."""
        return self.base.zcdp_rho + sum(w / (2.0 * m * m) for _, m, w in self.sampled)

    def __call__(self, alpha: Any) -> np.ndarray | float:
        """τ(α): the base curve plus each sampled term's bound (see the class notes)."""
        a = _alpha(alpha)
        out = np.asarray(self.base(a), dtype=float).copy()
        merged: dict[tuple[float, float], float] = {}
        for rate, multiplier, weight in self.sampled:
            if weight:
                merged[(rate, multiplier)] = merged.get((rate, multiplier), 0.0) + weight
        for (rate, multiplier), weight in merged.items():
            out = out + weight * _sampled_bound(a, rate, multiplier)
        return out if out.ndim else float(out)
