"""Exact budget splits in :class:`fractions.Fraction`: "fractions sum to 1" without float drift."""

from __future__ import annotations

import math
from fractions import Fraction
from numbers import Rational
from typing import Any, Mapping

import numpy as np

from postproc.errors import PostprocError

__all__ = ["as_fraction", "split_budget", "allocate_budget"]


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
