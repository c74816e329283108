"""95 % margin of error ↔ parameter of the geometric and discrete Gaussian mechanisms."""

from __future__ import annotations

import math
from typing import Any

from postproc.accounting._checks import _nonnegative, _positive, _sensitivity
from postproc.errors import PostprocError

__all__ = ["moe_geometric", "calibrate_geometric", "moe_discrete_gaussian",
           "calibrate_discrete_gaussian"]


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
