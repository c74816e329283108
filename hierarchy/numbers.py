"""The toolkit's one reading of numbers: exact fractions, positive and non-negative parameters,
integers.

Four functions, used by every module that takes a budget, a fraction, a noise parameter or a
count:

* :func:`as_fraction` — an *exact* rational (:class:`fractions.Fraction`) from an int, a
  Fraction, a Decimal, a string such as ``"1/3"``, ``"0.225"`` or ``"2"``, or a float that is a
  short decimal (``0.25``, ``0.1``, ``1.5``). Budgets and their splits are read with it, so
  "fractions sum to 1" is checked exactly.
* :func:`positive` — a positive finite number (a float, an int or an exact Fraction) for noise
  parameters, sensitivities, bandwidths and other continuous settings.
* :func:`nonnegative` — a finite float ≥ 0 (optionally at most a bound) for privacy losses and
  weights, where 0 is a valid value.
* :func:`integer` — an int (numpy ints included) of at least a minimum, for counts, degrees and
  stabilities, where a float such as ``3.0`` is refused.

**Which floats are exact numbers.** A float is accepted by :func:`as_fraction` when its shortest
decimal representation (``repr``) has at most 15 significant digits, and it is read as that
decimal: ``0.1`` is 1/10, not the binary ``3602879701896397/2**55``. Every decimal of up to 15
significant digits survives the trip to a float and back (``sys.float_info.dig``), so this is
exactly what a user typed. A float whose shortest representation needs 16 or 17 digits, such as
``1/3 = 0.3333333333333333``, was computed rather than typed; reading it as a decimal would give
a number the user never meant, so it is refused with a suggestion to write ``'1/3'``.

Errors are :class:`hierarchy.errors.HierarchyError` by default; a caller of another package
passes its own base exception as ``error=`` (``postproc`` passes ``PostprocError``). Messages
name the value (``what``) and say how to fix it.

Examples
--------
>>> as_fraction("9/40", what="a query fraction"), as_fraction(0.225, what="a query fraction")
(Fraction(9, 40), Fraction(9, 40))
>>> as_fraction(1 / 3, what="the level fraction")
Traceback (most recent call last):
...
hierarchy.errors.HierarchyError: the level fraction is the float 0.3333333333333333, which is not a
short decimal (16 significant digits; it looks computed, e.g. 1/3 in floating point); write the
exact value as a string, e.g. '1/3'
>>> positive(0.5, "z"), positive(2, "sigma2", exact=True)
(0.5, Fraction(2, 1))
>>> nonnegative(0, "epsilon"), integer(9, "stability")
(0.0, 9)
"""

from __future__ import annotations

import math
import sys
from decimal import Decimal
from fractions import Fraction
from numbers import Rational
from typing import Any

import numpy as np

from hierarchy.errors import HierarchyError

__all__ = ["as_fraction", "positive", "nonnegative", "integer", "MAX_FLOAT_DIGITS"]

#: Most significant digits of a float that :func:`as_fraction` reads as the decimal it prints as
#: (``sys.float_info.dig``: every decimal this short round-trips through a float).
MAX_FLOAT_DIGITS = sys.float_info.dig


def _significant_digits(text: str) -> int:
    """Significant digits of a float's ``repr`` (``'0.025'`` → 2, ``'1.5e-07'`` → 2)."""
    mantissa = text.lower().split("e")[0].lstrip("-").replace(".", "")
    return len(mantissa.strip("0")) or 1


def _float_fraction(value: float, what: str, error: type[Exception]) -> Fraction:
    """A finite float as the short decimal it prints as, or ``error`` saying what to write."""
    text = repr(float(value))        # repr(float(...)): numpy 2 prints 'np.float64(0.1)'
    digits = _significant_digits(text)
    if digits <= MAX_FLOAT_DIGITS:
        return Fraction(text)
    guess = Fraction(float(value)).limit_denominator(10**6)
    if float(guess) == float(value):
        hint, example = f"it looks computed, e.g. {guess} in floating point", f"'{guess}'"
    else:
        hint, example = "it looks computed, not typed", "'1/3' or '0.1'"
    raise error(f"{what} is the float {text}, which is not a short decimal ({digits} significant "
                f"digits; {hint}); write the exact value as a string, e.g. {example}")


def as_fraction(value: Any, *, what: str, positive: bool = False, at_most: Any = None,
                error: type[Exception] = HierarchyError) -> Fraction:
    """An exact rational from an int, a Fraction, a Decimal, a string or a short-decimal float.

    Parameters
    ----------
    value : int, Fraction, Decimal, str or float
        Strings may be integers (``"2"``), decimals (``"0.225"``, ``"1e-3"``) or ratios
        (``"9/40"``), with surrounding spaces. Floats are read as the decimal they print as when
        that has at most :data:`MAX_FLOAT_DIGITS` (15) significant digits (see the module notes).
        numpy integers and floats are read like Python ones.
    what : str
        What the value is, for messages (``"the total budget"``, ``"gamma"``).
    positive : bool, optional
        Require ``value > 0``.
    at_most : number, optional
        Require ``value <= at_most`` (compared exactly).
    error : type of Exception, optional
        The exception to raise; :class:`~hierarchy.errors.HierarchyError` by default.

    Returns
    -------
    fractions.Fraction

    Raises
    ------
    HierarchyError (or ``error``)
        For a bool, NaN or infinity, a string that is not a number, a float that is not a short
        decimal (the message suggests the fraction to write), another type, a value ≤ 0 when
        ``positive``, or a value above ``at_most``.

    Examples
    --------
    >>> as_fraction("0.225", what="x"), as_fraction(" 9/40 ", what="x"), as_fraction(2, what="x")
    (Fraction(9, 40), Fraction(9, 40), Fraction(2, 1))
    >>> from decimal import Decimal
    >>> as_fraction(Decimal("0.1"), what="x"), as_fraction(0.1, what="x")
    (Fraction(1, 10), Fraction(1, 10))
    >>> as_fraction(True, what="epsilon")
    Traceback (most recent call last):
    ...
    hierarchy.errors.HierarchyError: epsilon must be a number, not True
    >>> as_fraction("3/2", what="gamma", at_most=1)
    Traceback (most recent call last):
    ...
    hierarchy.errors.HierarchyError: gamma must be at most 1, not 3/2
    """
    if isinstance(value, (bool, np.bool_)):
        raise error(f"{what} must be a number, not {value!r}")
    result: Fraction | None = None
    if isinstance(value, (float, np.floating)):
        if math.isfinite(value):
            result = _float_fraction(value, what, error)
    elif isinstance(value, (int, np.integer)):
        result = Fraction(int(value))
    elif isinstance(value, Rational):
        result = Fraction(value.numerator, value.denominator)
    elif isinstance(value, Decimal):
        if value.is_finite():
            result = Fraction(value)
    elif isinstance(value, str):
        try:
            result = Fraction(value.strip())
        except (ValueError, ZeroDivisionError):
            pass
    if result is None:
        raise error(f"{what} must be a finite number, written as an int, a decimal or a "
                    f"fraction like '9/40' or '0.225', not {value!r}")
    if positive and result <= 0:
        raise error(f"{what} must be positive (> 0), not {result}")
    if at_most is not None and result > as_fraction(at_most, what="at_most"):
        raise error(f"{what} must be at most {at_most}, not {result}")
    return result


def positive(value: Any, what: str, *, integer: bool = False, exact: bool = False,
             error: type[Exception] = HierarchyError) -> float | int | Fraction:
    """A positive finite number: a noise parameter, a sensitivity, a bandwidth.

    Parameters
    ----------
    value : int, float, Fraction or Decimal (or their numpy counterparts)
        Strings are refused (write the number itself).
    what : str
        What the value is, for messages.
    integer : bool, optional
        Require a whole number (an int, or a float such as ``3.0``) and return an int.
    exact : bool, optional
        Return an exact :class:`~fractions.Fraction` (a float's exact binary value) instead of
        a float.
    error : type of Exception, optional
        The exception to raise; :class:`~hierarchy.errors.HierarchyError` by default.

    Returns
    -------
    float, or int when ``integer``, or Fraction when ``exact``

    Raises
    ------
    HierarchyError (or ``error``)
        If the value is not a number (bools and strings included), is NaN, infinite, ≤ 0, or
        not whole when ``integer``.

    Examples
    --------
    >>> positive(2, "sensitivity"), positive(3.0, "workers", integer=True)
    (2.0, 3)
    >>> positive(0.1, "z", exact=True) == Fraction(0.1)
    True
    >>> positive(-1.0, "scale")
    Traceback (most recent call last):
    ...
    hierarchy.errors.HierarchyError: scale must be a positive number, not -1.0
    >>> positive("1", "scale")
    Traceback (most recent call last):
    ...
    hierarchy.errors.HierarchyError: scale must be a positive number, not '1' (a string); pass the
    number itself
    """
    if isinstance(value, (bool, np.bool_)) or not isinstance(
            value, (int, float, Fraction, Decimal, np.integer, np.floating)):
        extra = " (a string); pass the number itself" if isinstance(value, str) else ""
        raise error(f"{what} must be a positive number, not {value!r}{extra}")
    if not isinstance(value, (int, np.integer, Fraction)) and not math.isfinite(value):
        raise error(f"{what} must be a finite positive number, not {value!r}")
    if value == 0:
        raise error(f"{what} must be > 0, not {value!r}")
    if value < 0:
        raise error(f"{what} must be a positive number, not {value!r}")
    if isinstance(value, (int, np.integer)):
        number = Fraction(int(value))
    elif isinstance(value, Fraction):
        number = value
    else:
        number = Fraction(value) if isinstance(value, Decimal) else Fraction(float(value))
    if integer:
        if number.denominator != 1:
            raise error(f"{what} must be a whole number, not {value!r}")
        return int(number)
    if exact:
        return number
    try:
        return float(number)
    except OverflowError:
        raise error(f"{what} = {value} is too large for a float (above about 1.8e308)") from None


def nonnegative(value: Any, what: str, *, at_most: float | None = None, why: str = "",
                error: type[Exception] = HierarchyError) -> float:
    """A finite number ≥ 0 (and ≤ ``at_most`` when given), as a float: a privacy loss, a weight.

    Parameters
    ----------
    value : number
        Anything :class:`float` reads — ints, Fractions, Decimals, numpy numbers and numeric
        strings (options of the command line arrive as text) — but a bool. An int or Fraction
        beyond the float range counts as infinite.
    what : str
        What the value is, for messages.
    at_most : float, optional
        The largest value allowed.
    why : str, optional
        Why ``at_most`` is the bound: added to the message, in parentheses.
    error : type of Exception, optional
        The exception to raise; :class:`~hierarchy.errors.HierarchyError` by default.

    Returns
    -------
    float

    Raises
    ------
    HierarchyError (or ``error``)
        If the value is not a number, is NaN, infinite or negative, or is above ``at_most``
        (then the message gives the whole range and ``why``).

    Examples
    --------
    >>> nonnegative(0, "rho"), nonnegative("0.5", "epsilon"), nonnegative(2, "w", at_most=3)
    (0.0, 0.5, 2.0)
    >>> nonnegative(-1, "epsilon")
    Traceback (most recent call last):
    ...
    hierarchy.errors.HierarchyError: epsilon must be a finite number >= 0, not -1
    >>> nonnegative(True, "weight")
    Traceback (most recent call last):
    ...
    hierarchy.errors.HierarchyError: weight must be a number, not True
    >>> nonnegative(5, "rho", at_most=1e3, why="beyond it the conversions break down")
    5.0
    >>> nonnegative(2e3, "rho", at_most=1e3, why="beyond it the conversions break down")
    Traceback (most recent call last):
    ...
    hierarchy.errors.HierarchyError: rho must be a finite number in [0, 1000], not 2000.0 (beyond it
    the conversions break down)
    """
    number = _as_float(value)
    bad = number is None or not math.isfinite(number) or number < 0
    if at_most is not None:
        if bad or number > at_most:
            reason = f" ({why})" if why else ""
            raise error(f"{what} must be a finite number in [0, {at_most:g}], not {value!r}"
                        f"{reason}")
        return number
    if number is None:
        raise error(f"{what} must be a number, not {value!r}")
    if bad:
        raise error(f"{what} must be a finite number >= 0, not {value!r}")
    return number


def _as_float(value: Any) -> float | None:
    """``float(value)``; ``None`` for a bool or what is not a number, ``inf`` beyond the float
    range (an int or Fraction too large)."""
    if isinstance(value, bool):
        return None
    try:
        return float(value)
    except OverflowError:
        return math.inf
    except (TypeError, ValueError):
        return None


def integer(value: Any, what: str, *, minimum: int = 1, why: str = "",
            error: type[Exception] = HierarchyError) -> int:
    """An int of at least ``minimum``: a count, a degree, a stability, a table size.

    Unlike :func:`positive` with ``integer=True``, a float is refused even when whole (``3.0``):
    these values are counted, never measured.

    Parameters
    ----------
    value : int or numpy integer
        Bools are refused.
    what : str
        What the value is, for messages.
    minimum : int, optional
        The smallest value allowed (default 1: a positive integer).
    why : str, optional
        What the value counts: added to the message, in parentheses.
    error : type of Exception, optional
        The exception to raise; :class:`~hierarchy.errors.HierarchyError` by default.

    Returns
    -------
    int

    Raises
    ------
    HierarchyError (or ``error``)
        If the value is not an int (a bool, a float, a string…) or is below ``minimum``.

    Examples
    --------
    >>> import numpy as np
    >>> integer(9, "stability"), integer(np.int64(0), "an MOE", minimum=0)
    (9, 0)
    >>> integer(3.0, "sensitivity", why="counts change by whole units")
    Traceback (most recent call last):
    ...
    hierarchy.errors.HierarchyError: sensitivity must be a positive integer (counts change by whole
    units), not 3.0
    >>> integer(-1, "an MOE", minimum=0)
    Traceback (most recent call last):
    ...
    hierarchy.errors.HierarchyError: an MOE must be an integer >= 0, not -1
    """
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)) \
            or value < minimum:
        kind = "a positive integer" if minimum == 1 else f"an integer >= {minimum}"
        reason = f" ({why})" if why else ""
        raise error(f"{what} must be {kind}{reason}, not {value!r}")
    return int(value)
