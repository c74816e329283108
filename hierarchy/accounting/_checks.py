"""Argument checks shared by the accounting modules and their command line; a bad value raises a
AccountingError that names the value and its valid range.

The checks of plain numbers are :mod:`hierarchy.numbers`' (:func:`~hierarchy.numbers.nonnegative`,
:func:`~hierarchy.numbers.integer`), raising AccountingError; this module adds the ranges and
meanings of accounting's own quantities (ε, ρ, δ, γ, an MOE, the stability).
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import numpy as np

from hierarchy.accounting.budgets import as_fraction
from hierarchy.errors import AccountingError
from hierarchy.numbers import integer, nonnegative

#: Largest ρ the conversions accept: beyond it the optimal Rényi order 1 + sqrt(log(1/δ)/ρ)
#: rounds to 1 in float64 and the (ε, δ) conversions break down.
MAX_RHO = 1e30

#: Largest pure ε accepted for one mechanism: its ρ = ε²/2 stays below :data:`MAX_RHO`.
MAX_EPSILON = 1e15


def check_epsilon(value: Any, name: str = "epsilon") -> float:
    """A pure-DP ε in [0, MAX_EPSILON], or a AccountingError naming ``name`` and the range."""
    return nonnegative(value, name, at_most=MAX_EPSILON, error=AccountingError,
                       why=f"above {MAX_EPSILON:g} its zCDP rho = {name}²/2 exceeds {MAX_RHO:g}, "
                           f"where the (epsilon, delta) conversions break down")


def check_rho(value: Any, name: str = "rho") -> float:
    """A zCDP ρ in [0, MAX_RHO], or a AccountingError naming ``name`` and the range."""
    return nonnegative(value, name, at_most=MAX_RHO, error=AccountingError,
                       why=f"above {MAX_RHO:g} the best Renyi order 1 + sqrt(log(1/delta)/rho) "
                           f"rounds to 1 in float64 and the (epsilon, delta) conversions break "
                           f"down")


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
    return integer(value, f"{name} of a geometric mechanism", why="counts change by whole units",
                   error=AccountingError)


def _alpha(alpha: Any) -> np.ndarray:
    a = np.asarray(alpha, dtype=float)
    if np.any(np.isnan(a)) or np.any(a <= 1.0):
        raise AccountingError(f"Rényi orders alpha must be > 1 (np.inf allowed), not {alpha!r}")
    return a


def check_moe(value: Any, *, level: int, what: str = "MOE") -> int:
    """A target MOE: an integer >= 1 (ints and integral floats), or a AccountingError naming
    ``what`` and the level."""
    try:
        m_float = nonnegative(value, f"{what} of level {level}", error=AccountingError)
    except AccountingError:
        m_float = math.nan
    if not m_float >= 1 or m_float != math.floor(m_float):
        raise AccountingError(f"{what} of level {level} must be an integer >= 1, not {value!r}")
    return int(m_float)


def check_stability(stability: Any) -> int:
    """The stability s (the most groups of one level a record is in): an integer >= 1."""
    return integer(stability, "stability", why="the most groups of one level a record can "
                   "belong to", error=AccountingError)


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

