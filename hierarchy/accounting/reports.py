"""Reports: one loss in every notion, and a TopDown run's levels.

:class:`PrivacyLoss` holds one loss as pure ε, ρ and (ε, δ) three ways; :func:`account_levels`
builds a JSON-ready report of a run (per query, per level, in total) from its budgets. The report
of SafeTab-style levels calibrated to target MOEs is
:func:`~hierarchy.accounting.moe_levels.account_moe`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Mapping

from hierarchy.accounting._checks import check_delta, check_sensitivity
from hierarchy.accounting.budgets import (
    allocate_budget,  # noqa: F401  (account_levels' doctest)
    as_fraction,
)
from hierarchy.accounting.conversions import (
    rdp_to_approx_dp,
    zcdp_to_approx_dp_analytic,
    zcdp_to_approx_dp_numeric,
)
from hierarchy.accounting.rdp import RDPCurve, compose
from hierarchy.budget import ZCDP, PureDP
from hierarchy.budget import notion as notion_type
from hierarchy.errors import AccountingError

__all__ = ["PrivacyLoss", "LevelsAccounting", "account_levels"]


@dataclass(frozen=True)
class PrivacyLoss:
    """One privacy loss in every notion.

    Parameters
    ----------
    pure_epsilon : float or None
        Pure-DP ε (``None`` for zCDP mechanisms, which are not pure DP).
    rho : float
        zCDP ρ (ε²/2 for pure ε-DP mechanisms).
    rdp_epsilon : float
        ε at ``delta`` from the mechanism's RDP curve (:func:`rdp_to_approx_dp`).
    zcdp_epsilon_analytic, zcdp_epsilon_numeric : float
        ε at ``delta`` from ρ (:func:`zcdp_to_approx_dp_analytic`, ``..._numeric``).
    delta : float

    Examples
    --------
    >>> loss = PrivacyLoss.from_curve(RDPCurve.geometric(1.0), delta=1e-10)
    >>> loss.pure_epsilon, loss.rho, round(loss.zcdp_epsilon_analytic, 3)
    (1.0, 0.5, 7.286)
    """

    pure_epsilon: float | None
    rho: float
    rdp_epsilon: float
    zcdp_epsilon_analytic: float
    zcdp_epsilon_numeric: float
    delta: float

    @classmethod
    def from_curve(cls, curve: RDPCurve, *, delta: Any) -> "PrivacyLoss":
        """All notions for a composition of geometric (pure) and zCDP terms.

        The pure ε is τ(∞) (``None`` when a zCDP term makes it infinite); ρ is the zCDP terms'
        ρ plus ε²/2 for each geometric term (pure ε-DP ⇒ ε²/2-zCDP, then composition).
        """
        d = check_delta(delta)
        pure = curve.pure_epsilon
        rho = curve.zcdp_rho
        return cls(pure_epsilon=pure if math.isfinite(pure) else None, rho=rho,
                   rdp_epsilon=rdp_to_approx_dp(curve, d),
                   zcdp_epsilon_analytic=zcdp_to_approx_dp_analytic(rho, d),
                   zcdp_epsilon_numeric=zcdp_to_approx_dp_numeric(rho, d), delta=d)

    @classmethod
    def of(cls, *, epsilon: Any = None, rho: Any = None, budget: PureDP | ZCDP | None = None,
           delta: Any = 1e-10, sensitivity: int = 1) -> "PrivacyLoss":
        """All notions for one geometric mechanism with budget ε, or one ρ-zCDP mechanism.

        Parameters
        ----------
        epsilon : float, optional
            Pure-DP budget of a geometric mechanism, in [0, 1e15] (give exactly one of ε, ρ and
            ``budget``; beyond 1e15 its ρ = ε²/2 is too large for the conversions).
        rho : float, optional
            zCDP budget (e.g. of a discrete Gaussian mechanism), in [0, 1e30].
        budget : PureDP or ZCDP, optional
            The same, typed: ``PureDP(ε)`` is ``epsilon=ε``, ``ZCDP(ρ)`` is ``rho=ρ``.
        delta : float, optional
            Default 1e−10.
        sensitivity : int, optional
            Δ of the geometric mechanism's query (shapes its RDP curve). Default 1.

        Returns
        -------
        PrivacyLoss

        Raises
        ------
        AccountingError
            Unless exactly one of ε, ρ and ``budget`` is given, or on invalid values.

        Examples
        --------
        >>> round(PrivacyLoss.of(rho=0.5, delta=1e-10).zcdp_epsilon_numeric, 4)
        6.8393
        >>> PrivacyLoss.of(budget=PureDP(1)) == PrivacyLoss.of(epsilon=1)
        True
        """
        if sum(v is not None for v in (epsilon, rho, budget)) != 1:
            raise AccountingError("give exactly one of epsilon (pure DP, geometric mechanism), "
                                "rho (zCDP) and budget (a PureDP or ZCDP)")
        if budget is not None:
            if not isinstance(budget, (PureDP, ZCDP)):
                raise AccountingError(f"budget must be a PureDP or ZCDP, not {budget!r}; give a "
                                    f"bare number as epsilon= or rho=")
            epsilon, rho = ((float(budget.epsilon), None) if isinstance(budget, PureDP)
                            else (None, float(budget.rho)))
        if epsilon is not None:
            curve = RDPCurve.geometric(epsilon, sensitivity=sensitivity)
        else:
            curve = RDPCurve.zcdp(rho)
        return cls.from_curve(curve, delta=delta)

    def to_dict(self) -> dict[str, float | None]:
        """JSON-ready: the five numbers (``delta`` is reported once by the enclosing report)."""
        return {"pure_epsilon": self.pure_epsilon, "rho": self.rho,
                "rdp_epsilon": self.rdp_epsilon,
                "zcdp_epsilon_analytic": self.zcdp_epsilon_analytic,
                "zcdp_epsilon_numeric": self.zcdp_epsilon_numeric}


@dataclass(frozen=True)
class LevelsAccounting:
    """The accounting of a TopDown-style run: per query, per level and in total.

    Built by :func:`account_levels`; see there for the composition rules.

    Parameters
    ----------
    notion : {'pure', 'zcdp'}
    delta : float
    budgets : dict of str to dict of str to Fraction
        ``budgets[level][query]``, exact.
    sensitivity : dict of str to int
        Δ per query.
    per_query : dict of (str, str) to PrivacyLoss
    per_level : dict of str to PrivacyLoss
    total : PrivacyLoss

    Examples
    --------
    >>> acc = account_levels({"nation": {"total": "1/2"},
    ...                       "state": {"total": "1/4", "detailed": "1/4"}}, notion="zcdp")
    >>> acc.per_level["state"].rho, acc.total.rho, acc.total.pure_epsilon
    (0.5, 1.0, None)
    >>> round(acc.per_query[("state", "detailed")].zcdp_epsilon_analytic, 3)
    5.049
    >>> report = acc.to_dict()
    >>> total = report["total"]
    >>> report["mechanism"], total["budget"], round(total["loss"]["rdp_epsilon"], 3)
    ('discrete_gaussian', '1', 10.034)
    """

    notion: str
    delta: float
    budgets: dict[str, dict[str, Fraction]]
    sensitivity: dict[str, int]
    per_query: dict[tuple[str, str], PrivacyLoss] = field(repr=False)
    per_level: dict[str, PrivacyLoss] = field(repr=False)
    total: PrivacyLoss

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict for a run manifest; exact budgets appear as strings like ``'9/160'``.

        Returns
        -------
        dict
            ``{"notion", "mechanism", "delta", "composition", "levels": {level: {"budget",
            "loss", "queries": {query: {"budget", "sensitivity", "loss"}}}}, "total": {"budget",
            "loss"}}``.
        """
        mechanism = "geometric" if notion_type(self.notion) is PureDP else "discrete_gaussian"
        levels = {}
        for level, queries in self.budgets.items():
            levels[level] = {
                "budget": str(sum(queries.values(), Fraction(0))),
                "loss": self.per_level[level].to_dict(),
                "queries": {q: {"budget": str(b), "sensitivity": self.sensitivity[q],
                                "loss": self.per_query[(level, q)].to_dict()}
                            for q, b in queries.items()},
            }
        total_budget = sum((sum(q.values(), Fraction(0)) for q in self.budgets.values()),
                           Fraction(0))
        return {
            "notion": self.notion, "mechanism": mechanism, "delta": self.delta,
            "composition": "sequential across levels and queries; parallel across the units of "
                           "a level (degree 1)",
            "levels": levels,
            "total": {"budget": str(total_budget), "loss": self.total.to_dict()},
        }


def account_levels(budgets: Mapping[str, Mapping[str, Any]], *, notion: Any = "pure",
                   delta: Any = 1e-10,
                   sensitivity: int | Mapping[str, int] = 1) -> LevelsAccounting:
    """Account for a run that measures queries at every level of a geographic hierarchy.

    Each (level, query) is answered for every unit of the level with its own budget; units of a
    level are disjoint (parallel composition, degree 1), and queries and levels compose
    sequentially. With ``notion='pure'`` the budgets are ε of geometric mechanisms; with
    ``'zcdp'`` they are ρ of discrete Gaussian mechanisms. Every loss is reported as pure ε
    (pure only), ρ (ε²/2 for pure), (ε, δ) from the RDP curve (the exact geometric curve, or αρ),
    and (ε, δ) from ρ, analytic and numeric.

    Parameters
    ----------
    budgets : mapping of level to mapping of query to budget
        Budgets, read exactly with :func:`as_fraction`, e.g. from :func:`allocate_budget`; or
        typed (:class:`~hierarchy.budget.PureDP`, :class:`~hierarchy.budget.ZCDP`) of the
        notion.
    notion : {'pure', 'zcdp'}, PureDP or ZCDP (the class), optional
        Default ``'pure'``.
    delta : float, optional
        δ for the (ε, δ) conversions. Default 1e−10.
    sensitivity : int or mapping of query to int, optional
        L1 sensitivity Δ of each query (2 in the E2E test, where a changed record moves two
        cells). Affects only the geometric RDP curve. Default 1.

    Returns
    -------
    LevelsAccounting

    Raises
    ------
    AccountingError
        On an unknown notion, a missing sensitivity, a non-positive budget or an empty level.

    Examples
    --------
    >>> b = allocate_budget(1, levels={"nation": "1/2", "state": "1/2"},
    ...                     queries={"total": "1/4", "detailed": "3/4"})
    >>> acc = account_levels(b, notion="pure", sensitivity=2)
    >>> acc.total.pure_epsilon, acc.total.rho
    (1.0, 0.15625)
    >>> acc.to_dict()["levels"]["state"]["queries"]["detailed"]["budget"]
    '3/8'
    >>> typed = account_levels({"nation": {"total": PureDP(1)}}, notion=PureDP)
    >>> typed.total == account_levels({"nation": {"total": 1}}).total
    True
    """
    try:
        kind = notion_type(notion).kind
    except ValueError:
        raise AccountingError(f"notion must be 'pure' (geometric noise, budgets are epsilon) or "
                            f"'zcdp' (discrete Gaussian noise, budgets are rho), not "
                            f"{notion!r}") from None
    pure = kind == PureDP.kind
    d = check_delta(delta)
    if not budgets:
        raise AccountingError("no levels to account for; give budgets[level][query]")
    exact: dict[str, dict[str, Fraction]] = {}
    for level, queries in budgets.items():
        if not isinstance(queries, Mapping) or not queries:
            raise AccountingError(f"level {level!r} has no query budgets; give "
                                f"budgets[{level!r}] = {{query: budget, ...}}")
        exact[level] = {}
        for query, value in queries.items():
            what = f"budget of query {query!r} at level {level!r}"
            if isinstance(value, (PureDP, ZCDP)):
                if value.kind != kind:
                    raise AccountingError(f"the {what} is {value!r}, but the notion is {kind!r}; "
                                        f"give every budget in one notion")
                value = value.value
            b = as_fraction(value, name=what)
            if b <= 0:
                raise AccountingError(f"the budget of query {query!r} at level {level!r} is 0; "
                                    f"give it a positive budget or leave it out")
            exact[level][query] = b
    query_names = {q for queries in exact.values() for q in queries}
    if isinstance(sensitivity, Mapping):
        missing = sorted(query_names - set(sensitivity))
        if missing:
            raise AccountingError(f"no sensitivity given for queries {missing}; add them to "
                                f"the sensitivity mapping")
        sens = {q: check_sensitivity(sensitivity[q], f"sensitivity of {q!r}") for q in query_names}
    else:
        s = check_sensitivity(sensitivity)
        sens = {q: s for q in query_names}

    def curve_of(query: str, budget: Fraction) -> RDPCurve:
        if pure:
            return RDPCurve.geometric(float(budget), sensitivity=sens[query])
        return RDPCurve.zcdp(float(budget))

    curves = {(lv, q): curve_of(q, b) for lv, qs in exact.items() for q, b in qs.items()}
    per_query = {key: PrivacyLoss.from_curve(c, delta=d) for key, c in curves.items()}
    level_curves = {lv: compose(curves[(lv, q)] for q in qs) for lv, qs in exact.items()}
    per_level = {lv: PrivacyLoss.from_curve(c, delta=d) for lv, c in level_curves.items()}
    total = PrivacyLoss.from_curve(compose(level_curves.values()), delta=d)
    if pure:
        # Report the exact sums rather than float accumulations where they are defined.
        total = _with_exact_pure(total, sum((sum(q.values(), Fraction(0))
                                             for q in exact.values()), Fraction(0)))
        per_level = {lv: _with_exact_pure(per_level[lv], sum(qs.values(), Fraction(0)))
                     for lv, qs in exact.items()}
    return LevelsAccounting(notion=kind, delta=d, budgets=exact, sensitivity=sens,
                            per_query=per_query, per_level=per_level, total=total)


def _with_exact_pure(loss: PrivacyLoss, epsilon: Fraction) -> PrivacyLoss:
    return PrivacyLoss(pure_epsilon=float(epsilon), rho=loss.rho, rdp_epsilon=loss.rdp_epsilon,
                       zcdp_epsilon_analytic=loss.zcdp_epsilon_analytic,
                       zcdp_epsilon_numeric=loss.zcdp_epsilon_numeric, delta=loss.delta)
