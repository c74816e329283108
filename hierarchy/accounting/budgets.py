"""Exact budget splits in :class:`fractions.Fraction`: "fractions sum to 1" without float drift."""

from __future__ import annotations

from fractions import Fraction
from typing import Any, Mapping

from hierarchy import numbers
from hierarchy.budget import ZCDP, PureDP
from hierarchy.errors import AccountingError

__all__ = ["as_fraction", "split_budget", "allocate_budget"]


def as_fraction(value: Any, *, name: str = "budget") -> Fraction:
    """An exact, non-negative rational: :func:`hierarchy.numbers.as_fraction` for ``postproc``.

    The toolkit's one parser (strings ``"0.225"`` or ``"9/40"``, ints, Fractions, Decimals,
    floats that are short decimals such as ``0.1``; a float like ``1/3`` is refused with the
    suggestion to write ``'1/3'``), raising :class:`~hierarchy.errors.AccountingError` and refusing
    negative values, as budgets and their shares are never negative.

    Parameters
    ----------
    value : Fraction, int, str, Decimal or float
    name : str
        What the value is, for error messages.

    Returns
    -------
    fractions.Fraction

    Raises
    ------
    AccountingError
        If the value is not an exact number (see :func:`hierarchy.numbers.as_fraction`) or is
        negative.

    Examples
    --------
    >>> as_fraction("0.225"), as_fraction("9/40"), as_fraction(0.1), as_fraction(2)
    (Fraction(9, 40), Fraction(9, 40), Fraction(1, 10), Fraction(2, 1))
    """
    result = numbers.as_fraction(value, what=name, error=AccountingError)
    if result < 0:
        raise AccountingError(f"{name} must be >= 0, not {value!r}")
    return result


def _total(total: Any) -> Fraction:
    """The value of a total budget: ε or ρ of a typed budget, or a bare number read exactly."""
    if isinstance(total, (PureDP, ZCDP)):
        return total.value
    return as_fraction(total, name="total budget")


def split_budget(total: Any, fractions: Mapping[str, Any], *,
                 what: str = "budget fractions") -> dict[str, Fraction]:
    """Split ``total`` exactly by named fractions that are positive and sum to exactly 1.

    Parameters
    ----------
    total : PureDP, ZCDP, Fraction, int, str or float
        The budget to split (ε or ρ); a bare number is read with :func:`as_fraction`.
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
    AccountingError
        If there are no fractions, one is not positive, or they do not sum to exactly 1.

    Examples
    --------
    >>> split_budget("1", {"detailed": "0.1", "hhgq": "0.225", "va_hisp_race": "0.675"})
    {'detailed': Fraction(1, 10), 'hhgq': Fraction(9, 40), 'va_hisp_race': Fraction(27, 40)}
    >>> split_budget(1, {"a": 0.5, "b": 0.4})
    Traceback (most recent call last):
    ...
    hierarchy.errors.AccountingError: budget fractions must sum to exactly 1, but a, b sum to 9/10
    (0.9); ...
    """
    total_fraction = _total(total)
    if not fractions:
        raise AccountingError(f"{what}: nothing to split the budget over; give at least one part")
    parsed = {name: as_fraction(value, name=f"fraction of {name!r}")
              for name, value in fractions.items()}
    for name, value in parsed.items():
        if value <= 0:
            raise AccountingError(
                f"{what}: the fraction of {name!r} is {value}, but every fraction must be > 0; "
                f"drop {name!r} instead of giving it nothing")
    s = sum(parsed.values(), Fraction(0))
    if s != 1:
        names = ", ".join(parsed)
        raise AccountingError(
            f"{what} must sum to exactly 1, but {names} sum to {s} ({float(s):.6g}); "
            f"write them as exact decimals or ratios (e.g. '9/40') so that they add up to 1")
    return {name: total_fraction * value for name, value in parsed.items()}


def allocate_budget(total: Any, *, levels: Mapping[str, Any],
                    queries: Mapping[str, Any]) -> dict[str, dict[str, Fraction]]:
    """Split a total budget over levels, then each level's share over queries, exactly.

    Parameters
    ----------
    total : PureDP, ZCDP, Fraction, int, str or float
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
    AccountingError
        If a split is invalid (see :func:`split_budget`) or a level has no query split.

    Examples
    --------
    >>> b = allocate_budget(1, levels={lv: "1/4" for lv in ("nation", "state", "county", "ed")},
    ...                     queries={"detailed": "0.1", "hhgq": "0.225", "va_hisp_race": "0.675"})
    >>> b["state"]
    {'detailed': Fraction(1, 40), 'hhgq': Fraction(9, 160), 'va_hisp_race': Fraction(27, 160)}
    >>> sum(sum(q.values()) for q in b.values())
    Fraction(1, 1)
    >>> allocate_budget(ZCDP("1/2"), levels={"nation": 1}, queries={"total": 1})
    {'nation': {'total': Fraction(1, 2)}}
    """
    per_level = split_budget(total, levels, what="level fractions")
    nested = bool(queries) and all(isinstance(v, Mapping) for v in queries.values())
    out: dict[str, dict[str, Fraction]] = {}
    for level, budget in per_level.items():
        if nested:
            if level not in queries:
                raise AccountingError(f"no query fractions for level {level!r}; give one mapping "
                                    f"for every level ({', '.join(per_level)}) or one for all")
            shares = queries[level]
        else:
            shares = queries
        out[level] = split_budget(budget, shares, what=f"query fractions of level {level!r}")
    return out
