"""95 % margin of error ↔ parameter of the geometric and discrete Gaussian mechanisms, and the
exact coverage of such a margin.

SafeTab's MOE (docs/accounting.md, "Margins of error") is a convention, not an exact 95 %
interval: the noise is integer, so ``P[|X| ≤ MOE]`` is what it is — 90.5 % to just under 95 % for
the geometric mechanism at its calibrated ε, about 95 % to 97 % for the discrete Gaussian at its
calibrated ρ.
:func:`coverage_geometric` and :func:`coverage_discrete_gaussian` give that probability exactly,
to report beside the nominal 95 % (:data:`NOMINAL_COVERAGE`).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from scipy.special import erfc

from hierarchy.accounting._checks import check_sensitivity
from hierarchy.errors import AccountingError
from hierarchy.numbers import integer, nonnegative, positive

__all__ = ["moe_geometric", "calibrate_geometric", "moe_discrete_gaussian",
           "calibrate_discrete_gaussian", "coverage_geometric", "coverage_discrete_gaussian",
           "NOMINAL_COVERAGE"]

#: The coverage SafeTab's margins of error are named after (a "95 % MOE").
NOMINAL_COVERAGE = 0.95


def moe_geometric(epsilon: Any, *, sensitivity: int = 1) -> int:
    """The 95 % margin of error of the geometric mechanism: ``⌊b ln(40/(1 + e^{1/b}))⌋``, b = Δ/ε.

    This is SafeTab's convention (docs/accounting.md). With z = 1/b,
    P[|X| > m] = 2e^{−z(m+1)}/(1 + e^{−z}), and the formula is the largest integer m with
    P[|X| > m] ≥ 5 % — so P[|X| > MOE + 1] < 5 %.
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
    AccountingError
        If ε ≤ 0 or Δ is not a positive integer.

    Examples
    --------
    >>> moe_geometric(math.log(20) / 7)
    6
    """
    eps = positive(epsilon, "epsilon", error=AccountingError)
    b = check_sensitivity(sensitivity) / eps
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
    AccountingError
        If the MOE is negative or not finite.

    Examples
    --------
    >>> round(calibrate_geometric(6), 6)
    0.427962
    >>> moe_geometric(calibrate_geometric(6))
    6
    """
    m = math.floor(nonnegative(moe, "MOE", error=AccountingError))
    return check_sensitivity(sensitivity) * math.log(20.0) / (m + 1)


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
    AccountingError
        If ρ ≤ 0.

    Examples
    --------
    >>> moe_discrete_gaussian(1.92 / 36)
    6
    """
    r = positive(rho, "rho", error=AccountingError)
    sigma = check_sensitivity(sensitivity) / math.sqrt(2.0 * r)
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
    AccountingError
        If ⌊MOE⌋ < 1 (an MOE of 0 needs infinite ρ).

    Examples
    --------
    >>> round(calibrate_discrete_gaussian(6), 6)
    0.053333
    """
    m = math.floor(nonnegative(moe, "MOE", error=AccountingError))
    if m < 1:
        raise AccountingError(f"a discrete Gaussian MOE must be at least 1 (an MOE of {moe!r} "
                            f"would need infinite rho); ask for MOE >= 1")
    d = check_sensitivity(sensitivity)
    return 1.92 * d * d / (m * m)


def coverage_geometric(epsilon: Any, *, moe: Any = None, sensitivity: int = 1) -> float:
    """``P[|X| ≤ MOE]`` for the geometric mechanism's noise X at budget ε, exactly.

    X is two-sided geometric with parameter z = ε/Δ, P[X = k] = tanh(z/2) e^{−z|k|}, so
    ``P[|X| > m] = 2 e^{−z(m+1)} / (1 + e^{−z})`` (a geometric series). At the calibrated
    ``ε = ln 20/(m + 1)`` (Δ = 1) this is ``0.1/(1 + e^{−ε})``: the "95 %" MOE covers
    ``1 − 0.1/(1 + e^{−ε})``, from 90.48 % at MOE 0 up to, never reaching, 95 %.

    Parameters
    ----------
    epsilon : float
        Budget of the query, > 0.
    moe : int, optional
        The margin, an integer ≥ 0. Default: :func:`moe_geometric` of ε.
    sensitivity : int, optional
        Δ. Default 1.

    Returns
    -------
    float

    Raises
    ------
    AccountingError
        If ε ≤ 0, the MOE is not an integer ≥ 0 or Δ is not a positive integer.

    Examples
    --------
    >>> round(coverage_geometric(calibrate_geometric(6)), 6)        # MOE 6
    0.939461
    >>> round(coverage_geometric(calibrate_geometric(0), moe=0), 6)
    0.904762
    """
    eps = positive(epsilon, "epsilon", error=AccountingError)
    d = check_sensitivity(sensitivity)
    m = moe_geometric(eps, sensitivity=d) if moe is None else integer(
        moe, "an MOE", minimum=0, error=AccountingError)
    z = eps / d
    return 1.0 - 2.0 * math.exp(-z * (m + 1)) / (1.0 + math.exp(-z))


#: Up to this σ the discrete Gaussian's sums are taken term by term (40σ terms); beyond it the
#: tail is summed by Euler–Maclaurin, whose error there is below 1e-25 of the tail.
_DIRECT_SUM_MAX_SIGMA = 1e5


def _discrete_gaussian_sums(m: int, sigma: float) -> tuple[float, float]:
    """``(Σ_{k>m} w_k, Σ_{k∈ℤ} w_k)`` with ``w_k = e^{−k²/(2σ²)}``."""
    two_var = 2.0 * sigma * sigma
    reach = int(math.ceil(40.0 * sigma)) + 2               # w_k < e^{−800} beyond 40σ
    if sigma <= _DIRECT_SUM_MAX_SIGMA:
        k = np.arange(1, reach + 1, dtype=float)
        w = np.exp(-(k * k) / two_var)
        total = 1.0 + 2.0 * float(np.sum(w))
        if m < reach:
            return float(np.sum(w[m:])), total
        k = (m + 1.0) + np.arange(reach, dtype=float)
        return float(np.sum(np.exp(-(k * k) / two_var))), total
    # Σ_k w_k = σ√(2π)·(1 + 2Σ_{n≥1} e^{−2π²σ²n²}) (Poisson summation; the correction is 0 in
    # float64 for σ ≥ 2). With f(x) = e^{−x²/(2σ²)} and a = m + 1, Euler–Maclaurin gives
    # Σ_{k≥a} f(k) = ∫_a^∞ f + f(a)/2 − f′(a)/12 + f‴(a)/720 + O(σ⁻⁵ f(a)).
    a = float(m + 1)
    var = sigma * sigma
    fa = math.exp(-a * a / two_var)
    integral = sigma * math.sqrt(math.pi / 2.0) * float(erfc(a / (sigma * math.sqrt(2.0))))
    d1 = -a / var * fa
    d3 = (3.0 * a / var ** 2 - a ** 3 / var ** 3) * fa
    return integral + fa / 2.0 - d1 / 12.0 + d3 / 720.0, sigma * math.sqrt(2.0 * math.pi)


def coverage_discrete_gaussian(rho: Any, *, moe: Any = None, sensitivity: int = 1) -> float:
    """``P[|X| ≤ MOE]`` for the discrete Gaussian noise X of a ρ-zCDP count, exactly.

    X has ``P[X = k] ∝ e^{−k²/(2σ²)}`` on the integers, σ² = Δ²/(2ρ). The tail ``Σ_{k>m}`` and
    the normalising sum are summed term by term out to 40σ (the terms beyond are below
    e^{−800}); for σ > 10⁵ the tail is summed by Euler–Maclaurin and the normaliser is σ√(2π)
    (Poisson summation), both exact in float64 there. The result is ``1 − 2·tail/sum``.

    Parameters
    ----------
    rho : float
        zCDP budget of the count, > 0.
    moe : int, optional
        The margin, an integer ≥ 0. Default: :func:`moe_discrete_gaussian` of ρ.
    sensitivity : int, optional
        Δ. Default 1.

    Returns
    -------
    float

    Raises
    ------
    AccountingError
        If ρ ≤ 0, the MOE is not an integer ≥ 0 or Δ is not a positive integer.

    Examples
    --------
    >>> round(coverage_discrete_gaussian(calibrate_discrete_gaussian(6)), 6)   # MOE 6
    0.967024
    """
    r = positive(rho, "rho", error=AccountingError)
    d = check_sensitivity(sensitivity)
    m = moe_discrete_gaussian(r, sensitivity=d) if moe is None else integer(
        moe, "an MOE", minimum=0, error=AccountingError)
    tail, total = _discrete_gaussian_sums(m, d / math.sqrt(2.0 * r))
    return 1.0 - 2.0 * tail / total
