"""Privacy budgets: a total ε (pure DP) or ρ (zCDP) split over levels and queries.

Splits are exact rationals (:class:`fractions.Fraction`), so "fractions sum to 1" is checked
exactly, never up to float drift. Decimal strings and floats are read as the decimal they print
as (``0.225`` is 9/40).

**Composition.** Within a level, every person is in exactly one unit, so the level's queries
compose sequentially and the units in parallel; levels compose sequentially. The total loss is the
sum over levels and queries of each query's share.

**Sensitivity** is computed from each query's matrix for the neighbour relation:

* ``"change"`` (default; the E2E's): one person's record changes, possibly moving to another unit
  of the level. The level's answer vector moves by at most twice the largest column of the query:
  ``Δ₁ = 2·max_j Σ_i |Q_ij|`` and ``Δ₂ = sqrt(2·max_j Σ_i Q_ij²)``. For the E2E queries ``Δ₁ = 2``.
* ``"add_remove"``: a person is added or removed: ``Δ₁ = max_j Σ_i |Q_ij|``,
  ``Δ₂ = sqrt(max_j Σ_i Q_ij²)``.

Examples
--------
>>> from hierarchy.schema import E2E_1940
>>> from hierarchy.queries import e2e_workload
>>> b = Budget.e2e(1, ["nation", "state", "county", "enum_dist"])
>>> b.query_budget("county", "va_hisp_race")
Fraction(27, 160)
>>> b.sensitivity(e2e_workload(E2E_1940)["hhgq"])
(2.0, 1.4142135623730951)
>>> Budget("pure", 1, {"a": "1/2", "b": "1/4"}, {"detailed": 1})
Traceback (most recent call last):
...
hierarchy.errors.HierarchyError: level fractions must sum to 1 exactly; they sum to 3/4 (a=1/2,
b=1/4)

**Range.** The total and every query's share must lie in [:data:`MIN_BUDGET`,
:data:`MAX_BUDGET`] = [1e-12, 500]: beyond it the noise parameters derived from a share under- or
overflow in floating point (a variance of about ``2/ε²`` overflows, a geometric variance of about
``2e^-ε`` underflows to 0) or leave the samplers' int64 range.

>>> Budget("pure", "1e-300", {"a": 1}, {"q": 1})
Traceback (most recent call last):
...
hierarchy.errors.HierarchyError: the total budget ε = 1e-300 is below 1e-12: ...
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, ClassVar, Mapping, Sequence

from hierarchy.display import budget_html
from hierarchy.errors import HierarchyError
from hierarchy.numbers import as_fraction
from hierarchy.queries import Query, Workload

__all__ = ["Budget", "PureDP", "ZCDP", "NOTIONS", "notion", "as_privacy", "as_fraction",
           "E2E_QUERY_FRACTIONS", "MIN_BUDGET", "MAX_BUDGET"]

#: The E2E split of each level's budget over its three queries (docs/measurement.md).
E2E_QUERY_FRACTIONS = {"detailed": Fraction(1, 10), "hhgq": Fraction(9, 40),
                       "va_hisp_race": Fraction(27, 40)}


#: Smallest total or query share (ε, or ρ for a zCDP budget). Below it, for sensitivities up to
#: 1000, the noise leaves the int64 range of the exact samplers (geometric noise needs
#: ``z = ε/Δ₁ >= 1e-15``, the discrete Gaussian ``σ² = Δ₂²/(2ρ) <= 1e30``); far below it
#: (ε < 1e-154) the variance ``≈ 2Δ₁²/ε²`` overflows float64 and its computation divides by 0.
MIN_BUDGET = Fraction(1, 10**12)

#: Largest total or query share. Above about 745·Δ the variance of geometric noise
#: (``2e^-z/(1 - e^-z)²``) and of the discrete Gaussian (``≈ 2e^-ρ/Δ²``) underflows to 0; 500
#: keeps a margin for sensitivity 1. A budget this large protects nothing anyway (e^500).
MAX_BUDGET = Fraction(500)


def _short(value: Fraction) -> str:
    """A Fraction for a message: ``1e-300`` or ``0.025``, not 300 digits; exact when small."""
    if value.denominator == 1 and abs(value.numerator) < 10**6:
        return str(value.numerator)
    try:
        number = float(value)
    except OverflowError:
        number = math.inf
    if number != 0 and math.isfinite(number):
        return f"{number:.6g}"
    digits = len(str(abs(value.numerator))) - len(str(value.denominator))
    return f"about 1e{digits}"


def _check_range(value: Fraction, what: str, fix: str) -> None:
    """Raise unless ``MIN_BUDGET <= value <= MAX_BUDGET``; ``what`` names the value."""
    if value < MIN_BUDGET:
        raise HierarchyError(
            f"{what} = {_short(value)} is below {float(MIN_BUDGET):g}: the noise parameters "
            f"derived from it would overflow (a noise variance grows like 1/budget²) or leave "
            f"the samplers' int64 range; {fix}")
    if value > MAX_BUDGET:
        raise HierarchyError(
            f"{what} = {_short(value)} is above {float(MAX_BUDGET):g}: the noise variances "
            f"derived from it would underflow to 0 (geometric and discrete Gaussian noise "
            f"vanish like e^-budget), and such a budget protects nothing; {fix}")


@dataclass(frozen=True, repr=False)
class PureDP:
    """A pure ε-differential-privacy budget: an exact, positive ε.

    Parameters
    ----------
    epsilon : int, Fraction, Decimal, str or float
        Read exactly with :func:`hierarchy.numbers.as_fraction` (``"1/3"``, ``0.5``, ``2``).

    Attributes
    ----------
    kind : str
        ``'pure'``: the name of the notion in configurations, reports and
        ``Mechanism.accounting``.
    symbol, parameter_name : str
        ``'ε'`` and ``'epsilon'``.

    Raises
    ------
    HierarchyError
        If ε is not a finite number > 0 (or a float that is not a short decimal).

    Examples
    --------
    >>> PureDP("1/2")
    PureDP('1/2')
    >>> PureDP(1).to_zcdp()                 # ε-DP implies ε²/2-zCDP (Bun & Steinke 2016)
    ZCDP('1/2')
    >>> PureDP(0.5) == PureDP("1/2"), PureDP(2).kind, str(PureDP(2))
    (True, 'pure', 'ε = 2 (pure DP)')
    >>> PureDP(0)
    Traceback (most recent call last):
    ...
    hierarchy.errors.HierarchyError: the ε of PureDP must be positive (> 0), not 0
    """

    epsilon: Fraction
    kind: ClassVar[str] = "pure"
    symbol: ClassVar[str] = "ε"
    parameter_name: ClassVar[str] = "epsilon"

    def __init__(self, epsilon: Any):
        object.__setattr__(self, "epsilon",
                           as_fraction(epsilon, what="the ε of PureDP", positive=True))

    @property
    def value(self) -> Fraction:
        """ε, whatever the notion's parameter is called."""
        return self.epsilon

    def to_zcdp(self) -> "ZCDP":
        """The zCDP budget this one implies: ρ = ε²/2 (Bun & Steinke 2016, Prop. 1.4)."""
        return ZCDP(self.epsilon * self.epsilon / 2)

    def spendable(self, accounting: str) -> float:
        """What a mechanism accounted in ``accounting`` may spend of this budget, as a float.

        A pure-DP mechanism spends ε. A zCDP mechanism (Gaussian noise) cannot keep a pure-DP
        promise, so that raises.

        Parameters
        ----------
        accounting : {'pure', 'zcdp'}
            ``Mechanism.accounting``.

        Returns
        -------
        float

        Raises
        ------
        HierarchyError
            For a zCDP mechanism or an unknown notion.

        Examples
        --------
        >>> PureDP("1/4").spendable("pure")
        0.25
        """
        if notion(accounting) is ZCDP:
            raise HierarchyError(f"a zCDP mechanism (Gaussian noise) cannot keep the pure-DP "
                                 f"budget {self}; use a ZCDP budget or a pure-DP mechanism "
                                 f"(geometric, laplace)")
        return float(self.epsilon)

    def __repr__(self) -> str:
        return f"PureDP({_literal(self.epsilon)})"

    def __str__(self) -> str:
        return f"ε = {self.epsilon} (pure DP)"


@dataclass(frozen=True, repr=False)
class ZCDP:
    """A zero-concentrated differential privacy budget: an exact, positive ρ.

    Parameters
    ----------
    rho : int, Fraction, Decimal, str or float
        Read exactly with :func:`hierarchy.numbers.as_fraction`.

    Attributes
    ----------
    kind : str
        ``'zcdp'``.
    symbol, parameter_name : str
        ``'ρ'`` and ``'rho'``.

    Raises
    ------
    HierarchyError
        If ρ is not a finite number > 0.

    Examples
    --------
    >>> budget = ZCDP("0.005")
    >>> budget, budget.rho, budget.kind
    (ZCDP('1/200'), Fraction(1, 200), 'zcdp')
    >>> budget.spendable("pure")            # a pure mechanism with ε = sqrt(2ρ) is ρ-zCDP
    0.1
    """

    rho: Fraction
    kind: ClassVar[str] = "zcdp"
    symbol: ClassVar[str] = "ρ"
    parameter_name: ClassVar[str] = "rho"

    def __init__(self, rho: Any):
        object.__setattr__(self, "rho", as_fraction(rho, what="the ρ of ZCDP", positive=True))

    @property
    def value(self) -> Fraction:
        """ρ, whatever the notion's parameter is called."""
        return self.rho

    def to_zcdp(self) -> "ZCDP":
        """This budget (already zCDP)."""
        return self

    def spendable(self, accounting: str) -> float:
        """What a mechanism accounted in ``accounting`` may spend of this budget, as a float.

        A zCDP mechanism spends ρ; a pure-DP mechanism spends ε = sqrt(2ρ), since ε-DP implies
        ε²/2-zCDP.

        Parameters
        ----------
        accounting : {'pure', 'zcdp'}
            ``Mechanism.accounting``.

        Returns
        -------
        float

        Raises
        ------
        HierarchyError
            For an unknown notion.

        Examples
        --------
        >>> ZCDP("1/8").spendable("zcdp"), ZCDP("1/8").spendable("pure")
        (0.125, 0.5)
        """
        if notion(accounting) is PureDP:
            return math.sqrt(2 * float(self.rho))
        return float(self.rho)

    def __repr__(self) -> str:
        return f"ZCDP({_literal(self.rho)})"

    def __str__(self) -> str:
        return f"ρ = {self.rho} (zCDP)"


def _literal(value: Fraction) -> str:
    """``2`` or ``'1/3'``: a constructor argument that rebuilds ``value`` exactly."""
    return str(value.numerator) if value.denominator == 1 else f"'{value}'"


#: The privacy notions a total budget can be given in, by their ``kind``.
NOTIONS: dict[str, type[PureDP] | type[ZCDP]] = {PureDP.kind: PureDP, ZCDP.kind: ZCDP}


def notion(kind: Any, *, error: type[Exception] = HierarchyError) -> type[PureDP] | type[ZCDP]:
    """The budget type of a notion named ``'pure'`` or ``'zcdp'`` (or of a typed budget).

    Parameters
    ----------
    kind : str, PureDP or ZCDP (or their classes)
    error : type of Exception, optional
        The exception to raise; :class:`~hierarchy.errors.HierarchyError` by default.

    Returns
    -------
    type
        :class:`PureDP` or :class:`ZCDP`.

    Raises
    ------
    HierarchyError (or ``error``)
        For any other value; the message lists the notions.

    Examples
    --------
    >>> notion("zcdp"), notion(PureDP(1))
    (<class 'hierarchy.budget.ZCDP'>, <class 'hierarchy.budget.PureDP'>)
    """
    if isinstance(kind, (PureDP, ZCDP)) or kind in (PureDP, ZCDP):
        return kind if isinstance(kind, type) else type(kind)
    if isinstance(kind, str) and kind in NOTIONS:
        return NOTIONS[kind]
    raise error(f"budget kind must be 'pure' (ε) or 'zcdp' (ρ), or a PureDP or ZCDP "
                f"budget, not {kind!r}")


def as_privacy(value: Any, kind: Any = None, *, what: str = "the total budget",
               error: type[Exception] = HierarchyError) -> PureDP | ZCDP:
    """A typed budget from a :class:`PureDP` / :class:`ZCDP` or a bare number and its notion.

    A bare number means what it always meant: ε when ``kind`` is ``'pure'`` (the default), ρ
    when it is ``'zcdp'``. A typed budget is returned unchanged; a ``kind`` given with it must
    agree (a budget is never converted silently).

    Parameters
    ----------
    value : PureDP, ZCDP or number
    kind : {'pure', 'zcdp'}, optional
    what : str, optional
        What the value is, for messages.
    error : type of Exception, optional

    Returns
    -------
    PureDP or ZCDP

    Raises
    ------
    HierarchyError (or ``error``)
        On an invalid number, an unknown kind, or a kind that contradicts the typed budget.

    Examples
    --------
    >>> as_privacy(1), as_privacy("1/2", "zcdp"), as_privacy(ZCDP(1))
    (PureDP(1), ZCDP('1/2'), ZCDP(1))
    >>> as_privacy(PureDP(1), "zcdp")
    Traceback (most recent call last):
    ...
    hierarchy.errors.HierarchyError: the total budget is PureDP(1) but the notion given with it is
    'zcdp'; give one of them, or convert explicitly (PureDP(ε).to_zcdp())
    """
    if isinstance(value, (PureDP, ZCDP)):
        if kind is not None and notion(kind, error=error) is not type(value):
            raise error(f"{what} is {value!r} but the notion given with it is {kind!r}; give "
                        f"one of them, or convert explicitly (PureDP(ε).to_zcdp())")
        return value
    cls = notion("pure" if kind is None else kind, error=error)
    return cls(as_fraction(value, what=what, positive=True, error=error))


def _fractions(mapping: Mapping[str, Any], what: str) -> tuple[tuple[str, Fraction], ...]:
    if not isinstance(mapping, Mapping) or not mapping:
        raise HierarchyError(f"{what} must be a non-empty mapping of name → fraction")
    items = tuple((str(k), as_fraction(v, what=f"{what} {k!r}")) for k, v in mapping.items())
    bad = [f"{k}={v}" for k, v in items if v <= 0]
    if bad:
        raise HierarchyError(f"{what} must be positive; got {', '.join(bad)} (drop a query or "
                             "level from the mapping instead of giving it zero)")
    total = sum((v for _, v in items), Fraction(0))
    if total != 1:
        parts = ", ".join(f"{k}={v}" for k, v in items)
        raise HierarchyError(f"{what} must sum to 1 exactly; they sum to {total} ({parts})")
    return items


@dataclass(frozen=True)
class Budget:
    """A privacy budget split over geography levels and the queries measured at each level.

    Parameters
    ----------
    kind : {'pure', 'zcdp'} or None
        ``'pure'``: ``total`` is ε; ``'zcdp'``: ``total`` is ρ. ``None`` takes the notion of a
        typed ``total`` (and means ``'pure'`` for a bare number).
    total : PureDP, ZCDP, number or str
        The whole budget, between :data:`MIN_BUDGET` (1e-12) and :data:`MAX_BUDGET` (500); a
        bare number is read exactly (:func:`hierarchy.numbers.as_fraction`) as ε or ρ by
        ``kind``.
    level_fractions : mapping level → fraction
        Must be positive and sum to 1 exactly.
    query_fractions : mapping query → fraction, or mapping level → (mapping query → fraction)
        The split of each level's budget; the same for every level when not keyed by level.
        Queries not listed at a level are not measured there.
    neighbours : {'change', 'add_remove'}
        The neighbour relation, which fixes the sensitivities.

    Raises
    ------
    HierarchyError
        On an unknown kind or neighbour relation, a kind that contradicts a typed total, a total
        that is not a finite number in [1e-12, 500], fractions that are not positive or do not
        sum to 1, or a query whose share ``total × level fraction × query fraction`` falls
        outside [1e-12, 500].

    Examples
    --------
    >>> budget = Budget("pure", 1, {"nation": "1/4", "state": "3/4"},
    ...                 {"total": "1/2", "detailed": "1/2"})
    >>> print(budget.describe())
    pure budget ε = 1 (change neighbours)
      nation: 1/4 = total 1/8, detailed 1/8
      state: 3/4 = total 3/8, detailed 3/8
    >>> budget.query_budget("state", "detailed")
    Fraction(3, 8)

    Query fractions may differ by level (here one zCDP level measuring only the total):

    >>> Budget("zcdp", "1/2", {"nation": 1}, {"nation": {"total": 1}}).queries("nation")
    ('total',)
    >>> Budget("pure", 1, {"nation": 1}, {"total": "1/2", "detailed": 0.4})
    Traceback (most recent call last):
    ...
    hierarchy.errors.HierarchyError: query fractions must sum to 1 exactly; they sum to 9/10
    (total=1/2, detailed=2/5)
    """

    kind: str
    total: Fraction
    level_fractions: tuple[tuple[str, Fraction], ...]
    query_fractions: tuple[tuple[str, tuple[tuple[str, Fraction], ...]], ...]
    neighbours: str = "change"

    def __init__(self, kind: str | None, total: Any, level_fractions: Mapping[str, Any],
                 query_fractions: Mapping[str, Any], neighbours: str = "change"):
        if kind is not None:
            notion(kind)
        if neighbours not in ("change", "add_remove"):
            raise HierarchyError(f"neighbours must be 'change' or 'add_remove', not "
                                 f"{neighbours!r}")
        privacy = as_privacy(total, kind)
        kind, total_f, symbol = privacy.kind, privacy.value, privacy.symbol
        _check_range(total_f, f"the total budget {symbol}",
                     f"use a total between {float(MIN_BUDGET):g} and {float(MAX_BUDGET):g}")
        levels = _fractions(level_fractions, "level fractions")
        if all(isinstance(v, Mapping) for v in query_fractions.values()) and query_fractions:
            unknown = set(query_fractions) - {k for k, _ in levels}
            if unknown:
                raise HierarchyError(f"query fractions name unknown levels {sorted(unknown)}; "
                                     f"levels are {[k for k, _ in levels]}")
            missing = [k for k, _ in levels if k not in query_fractions]
            if missing:
                raise HierarchyError(f"query fractions are missing for levels {missing}")
            per_level = tuple((k, _fractions(query_fractions[k], f"query fractions of level {k!r}"))
                              for k, _ in levels)
        else:
            shared = _fractions(query_fractions, "query fractions")
            per_level = tuple((k, shared) for k, _ in levels)
        level_share = dict(levels)
        for level, queries in per_level:
            for query, fraction in queries:
                share = total_f * level_share[level] * fraction
                _check_range(share, f"the share {symbol} of query {query!r} at level {level!r} "
                                    f"(total {_short(total_f)} × level fraction "
                                    f"{level_share[level]} × query fraction {fraction})",
                             "raise the total or that query's fraction" if share < MIN_BUDGET
                             else "lower the total")
        object.__setattr__(self, "kind", kind)
        object.__setattr__(self, "total", total_f)
        object.__setattr__(self, "level_fractions", levels)
        object.__setattr__(self, "query_fractions", per_level)
        object.__setattr__(self, "neighbours", neighbours)

    # -- presets -------------------------------------------------------------------------------
    @classmethod
    def e2e(cls, epsilon: Any, levels: Sequence[str], *, kind: str | None = None,
            neighbours: str = "change") -> "Budget":
        """The E2E split: equal levels; 0.1 / 0.225 / 0.675 to detailed / hhgq / va_hisp_race.

        Parameters
        ----------
        epsilon : PureDP, ZCDP or number
            The total; a bare number is ε (or ρ with ``kind='zcdp'``).
        levels : sequence of str
        kind : {'pure', 'zcdp'}, optional
            The notion of a bare number (default ``'pure'``); must agree with a typed total.
        neighbours : {'change', 'add_remove'}, optional

        Returns
        -------
        Budget

        Examples
        --------
        >>> Budget.e2e(ZCDP("1/2"), ["nation"]).describe().splitlines()[0]
        'zcdp budget ρ = 1/2 (change neighbours)'
        >>> Budget.e2e(PureDP(1), ["nation"]) == Budget.e2e(1, ["nation"])
        True
        """
        levels = list(levels)
        if not levels:
            raise HierarchyError("the E2E budget needs at least one level")
        return cls(kind, epsilon, {lv: Fraction(1, len(levels)) for lv in levels},
                   dict(E2E_QUERY_FRACTIONS), neighbours)

    # -- lookups -------------------------------------------------------------------------------
    @property
    def levels(self) -> tuple[str, ...]:
        return tuple(k for k, _ in self.level_fractions)

    @property
    def privacy(self) -> PureDP | ZCDP:
        """The total as a typed budget, :class:`PureDP` or :class:`ZCDP`."""
        return NOTIONS[self.kind](self.total)

    @property
    def symbol(self) -> str:
        return NOTIONS[self.kind].symbol

    def queries(self, level: str) -> tuple[str, ...]:
        """Queries measured at ``level``."""
        return tuple(q for q, _ in self._level_queries(level))

    def _level_queries(self, level: str) -> tuple[tuple[str, Fraction], ...]:
        for k, qs in self.query_fractions:
            if k == level:
                return qs
        raise HierarchyError(f"the budget has no level {level!r}; its levels are "
                             f"{list(self.levels)}")

    def level_budget(self, level: str) -> Fraction:
        for k, f in self.level_fractions:
            if k == level:
                return self.total * f
        raise HierarchyError(f"the budget has no level {level!r}; its levels are "
                             f"{list(self.levels)}")

    def query_budget(self, level: str, query: str) -> Fraction:
        """The exact share of the total given to ``query`` at ``level``."""
        for q, f in self._level_queries(level):
            if q == query:
                return self.level_budget(level) * f
        raise HierarchyError(f"query {query!r} is not measured at level {level!r}; measured "
                             f"there: {list(self.queries(level))}")

    def check_against(self, workload: Workload, levels: Sequence[str]) -> None:
        """Raise unless every budget level and query exists in the geography and workload."""
        unknown_levels = [lv for lv in self.levels if lv not in levels]
        if unknown_levels:
            raise HierarchyError(f"the budget names levels {unknown_levels} that the geography "
                                 f"does not have; levels are {list(levels)}")
        for lv in self.levels:
            unknown = [q for q in self.queries(lv) if q not in workload]
            if unknown:
                raise HierarchyError(f"the budget of level {lv!r} names queries {unknown} that "
                                     f"are not in the workload {list(workload.names)}")

    # -- noise ---------------------------------------------------------------------------------
    def sensitivity(self, query: Query) -> tuple[float, float]:
        """(L1, L2) sensitivity of a query's answers at one level for this neighbour relation."""
        m = query.matrix
        l1 = float(abs(m).sum(axis=0).max())
        l2sq = float(m.multiply(m).sum(axis=0).max())
        factor = 2.0 if self.neighbours == "change" else 1.0
        return factor * l1, math.sqrt(factor * l2sq)

    def noise_parameter(self, level: str, query: Query, mechanism) -> float:
        """The mechanism's parameter for ``query`` at ``level`` (z, scale or σ²).

        Pure-DP mechanisms under a zCDP budget use ε = sqrt(2ρ) (ε-DP implies ε²/2-zCDP).

        Raises
        ------
        HierarchyError
            If the mechanism needs a zCDP budget and this one is pure, or if the parameter or
            the noise variance it implies is not a positive finite float (a large sensitivity
            can push a share that is in range over the edge); the message names the level, the
            query, the share and the sensitivity.
        """
        share = NOTIONS[self.kind](self.query_budget(level, query.name))
        l1, l2 = self.sensitivity(query)
        if isinstance(share, PureDP) and notion(mechanism.accounting) is ZCDP:
            raise HierarchyError(f"the {mechanism.name} mechanism needs a zCDP budget (ρ); this "
                                 f"budget is pure ε — use kind='zcdp' or a pure-DP mechanism "
                                 "(geometric, laplace)")
        sensitivity = l1 if notion(mechanism.accounting) is PureDP else l2
        parameter = mechanism.parameter(share.spendable(mechanism.accounting), sensitivity)
        variance = mechanism.variance(parameter) if math.isfinite(parameter) and parameter > 0 \
            else math.nan
        if not (math.isfinite(variance) and variance > 0):
            raise HierarchyError(
                f"query {query.name!r} at level {level!r}: its share {self.symbol} = "
                f"{_short(share.value)} with sensitivity {sensitivity:g} gives the "
                f"{mechanism.name} mechanism {mechanism.parameter_name} = {parameter:g} and noise "
                f"variance {variance:g}, which float64 cannot use; move the share towards 1 "
                f"(raise a tiny share, lower a huge one)")
        return parameter

    # -- serialization -------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "total": str(self.total), "neighbours": self.neighbours,
                "level_fractions": {k: str(v) for k, v in self.level_fractions},
                "query_fractions": {k: {q: str(f) for q, f in qs}
                                    for k, qs in self.query_fractions}}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "Budget":
        try:
            return cls(data["kind"], data["total"], data["level_fractions"],
                       data["query_fractions"], data.get("neighbours", "change"))
        except KeyError as exc:
            raise HierarchyError(f"a budget needs kind, total, level_fractions and "
                                 f"query_fractions; missing {exc}") from None

    def _repr_html_(self) -> str:
        """Notebook display: per level and query the shares and the resulting ε or ρ
        (:func:`hierarchy.display.budget_html`)."""
        return budget_html(self)

    def describe(self) -> str:
        """One line per level and query: the exact share."""
        lines = [f"{self.kind} budget {self.symbol} = {self.total} ({self.neighbours} neighbours)"]
        for lv in self.levels:
            parts = ", ".join(f"{q} {self.query_budget(lv, q)}" for q in self.queries(lv))
            lines.append(f"  {lv}: {self.level_budget(lv)} = {parts}")
        return "\n".join(lines)
