"""Conversions to (ε, δ)-DP: from an RDP curve, and from zCDP analytically or numerically."""

from __future__ import annotations

import math
from typing import Any, Callable, Iterable

import numpy as np
from scipy.optimize import minimize_scalar

from hierarchy.accounting._checks import check_delta, check_rho
from hierarchy.accounting.rdp import RDPCurve
from hierarchy.errors import AccountingError
from hierarchy.numbers import nonnegative

__all__ = ["ALPHA_GRID_MINUS_ONE", "rdp_to_approx_dp", "zcdp_to_approx_dp_analytic",
           "zcdp_to_approx_dp_numeric"]

#: Orders α − 1 searched by :func:`rdp_to_approx_dp`: a log-spaced grid over 14 decades.
ALPHA_GRID_MINUS_ONE = np.logspace(-6.0, 8.0, 2801)


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
    AccountingError
        If δ is not in (0, 1) or the curve returns NaN.

    Examples
    --------
    >>> round(rdp_to_approx_dp(RDPCurve.geometric(1.0), 1e-10), 6)
    1.0
    >>> round(rdp_to_approx_dp(RDPCurve.zcdp(0.5), 1e-10), 4)
    6.8393
    """
    d = check_delta(delta)
    log_inv_delta = -math.log(d)
    extra = np.asarray(list(alphas), dtype=float) - 1.0
    if extra.size and np.any(extra <= 0):
        raise AccountingError(f"extra orders alpha must be > 1, not {list(alphas)!r}")
    t = np.sort(np.concatenate([ALPHA_GRID_MINUS_ONE, extra[np.isfinite(extra)]]))

    def objective(tt: np.ndarray) -> np.ndarray:
        return np.asarray(curve(1.0 + tt), dtype=float) + _conversion_penalty(tt, log_inv_delta)

    values = objective(t)
    if np.any(np.isnan(values)):
        raise AccountingError("the RDP curve returned NaN; check its parameters")
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
    AccountingError
        If ρ < 0 or δ is not in (0, 1).

    Examples
    --------
    >>> round(zcdp_to_approx_dp_analytic(0.5, 1e-10), 4)
    7.2861
    """
    r = nonnegative(rho, "rho", error=AccountingError)
    d = check_delta(delta)
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
    AccountingError
        If ρ is not in [0, 1e30] or δ is not in (0, 1).

    Examples
    --------
    >>> round(zcdp_to_approx_dp_numeric(0.5, 1e-10), 4)
    6.8393
    """
    r = check_rho(rho)
    d = check_delta(delta)
    if r == 0.0:
        return 0.0
    return rdp_to_approx_dp(RDPCurve.zcdp(r), d,
                            alphas=[1.0 + math.sqrt(math.log(1.0 / d) / r)])
