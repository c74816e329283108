"""Argument checks shared by the accounting modules and their command line; a bad value raises a
AccountingError that names the value and its valid range."""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import numpy as np

from hierarchy.accounting.budgets import as_fraction
from hierarchy.errors import AccountingError


def _nonnegative(value: Any, name: str) -> float:
    """``value`` as a finite float ≥ 0, or a AccountingError naming ``name``."""
    if isinstance(value, bool):
        raise AccountingError(f"{name} must be a number, not {value!r}")
    try:
        number = float(value)
    except OverflowError:                       # an int or Fraction beyond float range
        number = math.inf
    except (TypeError, ValueError):
        raise AccountingError(f"{name} must be a number, not {value!r}") from None
    if not math.isfinite(number) or number < 0:
        raise AccountingError(f"{name} must be a finite number >= 0, not {value!r}")
    return number


#: Largest ρ the conversions accept: beyond it the optimal Rényi order 1 + sqrt(log(1/δ)/ρ)
#: rounds to 1 in float64 and the (ε, δ) conversions break down.
MAX_RHO = 1e30

#: Largest pure ε accepted for one mechanism: its ρ = ε²/2 stays below :data:`MAX_RHO`.
MAX_EPSILON = 1e15


def _in_range(value: Any, name: str, high: float, why: str) -> float:
    """``value`` as a float in ``[0, high]``, or a AccountingError naming ``name`` and the range."""
    try:
        number = _nonnegative(value, name)
    except AccountingError:
        number = None
    if number is None or number > high:
        raise AccountingError(f"{name} must be a finite number in [0, {high:g}], not {value!r} "
                            f"({why})")
    return number


def check_epsilon(value: Any, name: str = "epsilon") -> float:
    """A pure-DP ε in [0, MAX_EPSILON], or a AccountingError naming ``name`` and the range."""
    return _in_range(value, name, MAX_EPSILON,
                     f"above {MAX_EPSILON:g} its zCDP rho = {name}²/2 exceeds {MAX_RHO:g}, where "
                     f"the (epsilon, delta) conversions break down")


def check_rho(value: Any, name: str = "rho") -> float:
    """A zCDP ρ in [0, MAX_RHO], or a AccountingError naming ``name`` and the range."""
    return _in_range(value, name, MAX_RHO,
                     f"above {MAX_RHO:g} the best Renyi order 1 + sqrt(log(1/delta)/rho) rounds "
                     f"to 1 in float64 and the (epsilon, delta) conversions break down")


def check_delta(delta: Any) -> float:
    if isinstance(delta, bool):
        raise AccountingError(f"delta must be a number in (0, 1), not {delta!r}")
    try:
        value = float(delta)
    except (TypeError, ValueError, OverflowError):
        raise AccountingError(f"delta must be a number in (0, 1), not {delta!r}") from None
    if not 0.0 < value < 1.0:
        raise AccountingError(f"delta must be in the open interval (0, 1), not {delta!r}; "
                            f"a typical choice is 1e-10")
    return value


def check_sensitivity(value: Any, name: str = "sensitivity") -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise AccountingError(f"{name} of a geometric mechanism must be a positive integer "
                            f"(counts change by whole units), not {value!r}")
    return int(value)


def _alpha(alpha: Any) -> np.ndarray:
    a = np.asarray(alpha, dtype=float)
    if np.any(np.isnan(a)) or np.any(a <= 1.0):
        raise AccountingError(f"Rényi orders alpha must be > 1 (np.inf allowed), not {alpha!r}")
    return a


def check_moe(value: Any, *, level: int, what: str = "MOE") -> int:
    """A target MOE: an integer >= 1 (ints and integral floats), or a AccountingError naming
    ``what`` and the level."""
    try:
        m_float = _nonnegative(value, f"{what} of level {level}")
    except AccountingError:
        m_float = math.nan
    if not m_float >= 1 or m_float != math.floor(m_float):
        raise AccountingError(f"{what} of level {level} must be an integer >= 1, not {value!r}")
    return int(m_float)


def check_stability(stability: Any) -> int:
    """The stability s (the most groups of one level a record is in): an integer >= 1."""
    if isinstance(stability, bool) or not isinstance(stability, (int, np.integer)) \
            or stability < 1:
        raise AccountingError(f"stability must be a positive integer (the most groups of one "
                            f"level a record can belong to), not {stability!r}")
    return int(stability)


def check_gamma(gamma: Any) -> Fraction:
    """γ, the share of a group's budget for the noisy total: an exact number in [0, 1)."""
    try:
        g = as_fraction(gamma, name="gamma")
    except AccountingError:
        g = None
    if g is None or g >= 1:
        raise AccountingError(f"gamma (the share of a group's budget for the noisy total) must be "
                            f"a number in [0, 1), not {gamma!r}; SafeTab uses 0.1")
    return g

