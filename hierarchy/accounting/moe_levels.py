"""SafeTab-style levels calibrated to target MOEs: their budgets, the coverage of each MOE, and
the total privacy loss (``postproc account moe``; docs/accounting.md, docs/safetab.md).

A level's groups are *two-step* (a noisy total, then the table it selects; target MOE of the
released Step-2 counts) and/or *TotalOnly* (one count; its own target MOE). The SafeTab paper's
privacy-loss total (its eq. 39) has a term for each kind. :func:`account_moe` accounts for the
TotalOnly term only when it is given TotalOnly MOEs, and its report says which terms it
includes (:attr:`MOEAccounting.assumption`): without them it answers the narrower question of
the loss of the two-step groups alone, not the paper's Table 2.
"""

from __future__ import annotations

import textwrap
from collections import Counter
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Iterable

import numpy as np

from hierarchy.accounting._checks import check_delta, check_gamma, check_moe, check_stability
from hierarchy.accounting.conversions import (
    rdp_to_approx_dp,
    zcdp_to_approx_dp_analytic,
    zcdp_to_approx_dp_numeric,
)
from hierarchy.accounting.groups import LevelCurve, compose_group_kinds
from hierarchy.accounting.moe import (
    NOMINAL_COVERAGE,
    calibrate_discrete_gaussian,
    calibrate_geometric,
    coverage_discrete_gaussian,
    coverage_geometric,
    moe_discrete_gaussian,
    moe_geometric,
)
from hierarchy.accounting.rdp import RDPCurve
from hierarchy.accounting.safetab_paper import with_safetab_paper_tau
from hierarchy.errors import AccountingError

__all__ = ["CalibratedCount", "MOELevel", "MOEAccounting", "account_moe"]


@dataclass(frozen=True)
class CalibratedCount:
    """One noisy count calibrated to a target 95 % MOE, with either mechanism.

    Parameters
    ----------
    moe : int or None
        Target MOE, ≥ 1; ``None`` for a count given its budget instead (:meth:`at_budget`, e.g. a
        TotalOnly group's count at the full group budget), whose MOE is each mechanism's own.
    epsilon : float
        Its budget with geometric noise, :func:`~hierarchy.accounting.calibrate_geometric`.
    rho : float
        Its budget with discrete Gaussian noise,
        :func:`~hierarchy.accounting.calibrate_discrete_gaussian`.
    coverage_geometric, coverage_discrete_gaussian : float
        The exact ``P[|noise| ≤ MOE]`` at that ε and at that ρ (the "95 %" is nominal).

    Examples
    --------
    >>> count = CalibratedCount.of(6)
    >>> round(count.epsilon, 6), round(count.coverage_geometric, 4)
    (0.427962, 0.9395)
    >>> full = CalibratedCount.at_budget(count.epsilon / 0.9, count.rho / 0.9)
    >>> full.moe, full.moe_geometric, full.moe_discrete_gaussian
    (None, 5, 5)
    """

    moe: int | None
    epsilon: float
    rho: float
    coverage_geometric: float
    coverage_discrete_gaussian: float

    @classmethod
    def of(cls, moe: int) -> "CalibratedCount":
        """The count with target MOE ``moe`` (an integer ≥ 1)."""
        eps = calibrate_geometric(moe)
        rho = calibrate_discrete_gaussian(moe)
        return cls(moe, eps, rho, coverage_geometric(eps, moe=moe),
                   coverage_discrete_gaussian(rho, moe=moe))

    @classmethod
    def at_budget(cls, epsilon: float, rho: float) -> "CalibratedCount":
        """The count with budget ``epsilon`` (geometric) or ``rho`` (discrete Gaussian); its MOE
        is each mechanism's own (:func:`moe_geometric`, :func:`moe_discrete_gaussian`)."""
        return cls(None, float(epsilon), float(rho), coverage_geometric(epsilon),
                   coverage_discrete_gaussian(rho))

    @property
    def moe_geometric(self) -> int:
        """The count's MOE with geometric noise: the target, or SafeTab's MOE of its ε."""
        return self.moe if self.moe is not None else moe_geometric(self.epsilon)

    @property
    def moe_discrete_gaussian(self) -> int:
        """The count's MOE with discrete Gaussian noise: the target, or the MOE of its ρ."""
        return self.moe if self.moe is not None else moe_discrete_gaussian(self.rho)

    def coverage_dict(self) -> dict[str, float]:
        """``{"nominal": 0.95, "geometric": …, "discrete_gaussian": …}``."""
        return {"nominal": NOMINAL_COVERAGE, "geometric": self.coverage_geometric,
                "discrete_gaussian": self.coverage_discrete_gaussian}

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: ``moe, epsilon, rho, coverage``, and for a count given its budget
        (``moe`` null) ``moe_geometric`` and ``moe_discrete_gaussian``."""
        out: dict[str, Any] = {"moe": self.moe, "epsilon": self.epsilon, "rho": self.rho,
                               "coverage": self.coverage_dict()}
        if self.moe is None:
            out.update(moe_geometric=self.moe_geometric,
                       moe_discrete_gaussian=self.moe_discrete_gaussian)
        return out


@dataclass(frozen=True)
class MOELevel:
    """The budgets of one SafeTab population-group level calibrated to target MOEs.

    Parameters
    ----------
    moe : int or None
        Target 95 % MOE of the two-step groups' released (Step 2) counts; ``None`` if the level
        has only TotalOnly groups (then the ``*_step2`` fields are ``None`` too).
    epsilon_step2 : float or None
        ε of one Step-2 count with geometric noise (:func:`calibrate_geometric`).
    epsilon_total : float
        The level's pure-DP ε: ``s · epsilon_step2 / (1 − γ)``; with TotalOnly groups,
        ``s · max(epsilon_step2 / (1 − γ), total_only.epsilon)``.
    rho_step2 : float or None
        ρ of one Step-2 count with discrete Gaussian noise (:func:`calibrate_discrete_gaussian`).
    rho_total : float
        The level's ρ, likewise.
    step2 : CalibratedCount or None
        The Step-2 count, with the exact coverage of its MOE.
    total_only : CalibratedCount or None
        The count of a TotalOnly group of the level, if it has any.

    Examples
    --------
    Built by :func:`account_moe`, one per level: here a level of two-step groups with MOE 6
    and a level of TotalOnly groups with MOE 10.

    >>> acc = account_moe([6, None], stability=9, total_only_moes=[None, 10])
    >>> two_step, total_only = acc.levels
    >>> two_step.kinds, round(two_step.epsilon_step2, 4), round(two_step.epsilon_total, 4)
    (('adaptive',), 0.428, 4.2796)
    >>> {k: round(v, 4) for k, v in two_step.to_dict()["coverage"].items()}
    {'nominal': 0.95, 'geometric': 0.9395, 'discrete_gaussian': 0.967}
    >>> total_only.kinds, total_only.moe, round(total_only.epsilon_total, 4)
    (('total_only',), None, 2.4511)
    """

    moe: int | None
    epsilon_step2: float | None
    epsilon_total: float
    rho_step2: float | None
    rho_total: float
    step2: CalibratedCount | None = None
    total_only: CalibratedCount | None = None

    @property
    def kinds(self) -> tuple[str, ...]:
        """``'adaptive'`` (two-step) and/or ``'total_only'``, as in ``postproc safetab``."""
        return tuple(kind for kind, part in (("adaptive", self.step2),
                                             ("total_only", self.total_only)) if part)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: ``moe, epsilon_step2, epsilon_total, rho_step2, rho_total``, then
        ``coverage`` (of the Step-2 MOE: nominal, geometric, discrete Gaussian) and
        ``total_only`` (``None``, or the TotalOnly count's ``moe, epsilon, rho, coverage``)."""
        return {"moe": self.moe, "epsilon_step2": self.epsilon_step2,
                "epsilon_total": self.epsilon_total, "rho_step2": self.rho_step2,
                "rho_total": self.rho_total,
                "coverage": None if self.step2 is None else self.step2.coverage_dict(),
                "total_only": None if self.total_only is None else self.total_only.to_dict()}


#: A TotalOnly "MOE" meaning: TotalOnly groups at the full group budget ``step2 / (1 − γ)``.
FULL = "full"

#: The terms of the SafeTab paper's eq. 39, as named in :attr:`MOEAccounting.assumption`.
TWO_STEP_TERMS = ("two-step groups: Step-1 noisy total", "two-step groups: Step-2 released counts")
TOTAL_ONLY_TERM = "TotalOnly groups: one count each"

_WITHIN_LEVEL = ("a record is in at most s groups of either kind, so a level with both kinds "
                 "costs s times its costlier kind of group at every Renyi order (as postproc "
                 "safetab accounts a level); if s bounds each kind separately, account the "
                 "TotalOnly groups as a level of their own, which adds their cost. Levels "
                 "compose sequentially")


@dataclass(frozen=True)
class MOEAccounting:
    """Total privacy loss of SafeTab-style levels calibrated to MOEs (see :func:`account_moe`).

    Parameters
    ----------
    levels : tuple of MOELevel
    stability : int
    gamma : Fraction
    delta : float
    pure_dp_epsilon : float
        Σ of the levels' ε (geometric noise, pure DP).
    rdp_epsilon : float
        (ε, δ) from the composed RDP curve of the same geometric mechanisms.
    zcdp_epsilon_analytic, zcdp_epsilon_numeric : float
        (ε, δ) from Σ of the levels' ρ (discrete Gaussian noise, zCDP).
    algorithms : dict or None
        SafeTab's two algorithms for the levels' two-step MOEs, whatever TotalOnly groups were
        given (``None`` if no level has two-step groups): RDP → (ε, δ) with geometric noise of
        ``"two_step_only"`` (no TotalOnly groups) and of the ``"full_algorithm"`` (every level
        also has TotalOnly groups at the full group budget ``ε₂/(1 − γ)``, sharing the
        stability), each exact (``rdp_epsilon``) and with the SafeTab paper's Corollary 1 for the
        geometric mechanism's divergence (``rdp_epsilon_corollary_1``, which understates:
        :mod:`~hierarchy.accounting.safetab_paper`); ``"counts"`` says what each includes. Pure
        ε and ρ are the same for both (``pure_dp_epsilon``, ``rho``).

    Examples
    --------
    >>> acc = account_moe([6, 50], stability=9)
    >>> round(acc.pure_dp_epsilon, 4), round(acc.rdp_epsilon, 4), round(acc.zcdp_epsilon_numeric, 4)
    (4.867, 4.8352, 7.1411)
    >>> acc.includes_total_only
    False
    >>> print(acc.assumption_text(60, options="--total-only-moe"))
    Assumption: of the SafeTab paper's privacy-loss total
    (eq. 39), these totals include only the two-step groups'
    terms (each group's Step-1 noisy total and its Step-2
    released counts) and leave out the TotalOnly term (the
    groups that release only their total). They answer 'the loss
    of the two-step (total then detailed) groups only', a
    narrower question than the paper's Table 2. Give TotalOnly
    MOEs (--total-only-moe) to include the TotalOnly term.
    SafeTab's full algorithm (TotalOnly groups at the full group
    budget at every level) is accounted beside these totals.
    """

    levels: tuple[MOELevel, ...]
    stability: int
    gamma: Fraction
    delta: float
    pure_dp_epsilon: float
    rdp_epsilon: float
    zcdp_epsilon_analytic: float
    zcdp_epsilon_numeric: float
    algorithms: dict[str, Any] | None = None

    @property
    def rho(self) -> float:
        """Total ρ over the levels."""
        return sum(level.rho_total for level in self.levels)

    @property
    def includes_total_only(self) -> bool:
        """Whether any level has TotalOnly groups (the TotalOnly term of eq. 39 is included)."""
        return any(level.total_only is not None for level in self.levels)

    @property
    def assumption(self) -> dict[str, Any]:
        """Which terms of the SafeTab paper's eq. 39 the totals include, and what that answers.

        ``{"terms_included", "terms_left_out", "question", "narrower_than_paper_table_2",
        "within_level", "statement"}``; ``statement`` says it all in one paragraph.
        """
        two_step = any(level.step2 is not None for level in self.levels)
        total_only = self.includes_total_only
        included = (list(TWO_STEP_TERMS) if two_step else []) \
            + ([TOTAL_ONLY_TERM] if total_only else [])
        left_out = ([] if two_step else list(TWO_STEP_TERMS)) \
            + ([] if total_only else [TOTAL_ONLY_TERM])
        where = ", ".join(str(i) for i, level in enumerate(self.levels, start=1)
                          if level.total_only is not None)
        if two_step and total_only:
            question = "the loss of the two-step and the TotalOnly groups (both terms of eq. 39)"
            statement = ("Assumption: these totals include both terms of the SafeTab paper's "
                         "privacy-loss total (eq. 39): the two-step groups (each group's Step-1 "
                         "noisy total and its Step-2 released counts) and the TotalOnly groups "
                         f"(one count each; at levels {where}).")
        elif total_only:
            question = "the loss of the TotalOnly groups only"
            statement = ("Assumption: of the SafeTab paper's privacy-loss total (eq. 39), these "
                         "totals include only the TotalOnly term (groups that release only "
                         f"their total; at levels {where}). They answer {question!r}, a narrower "
                         "question than the paper's Table 2.")
        else:
            question = "the loss of the two-step (total then detailed) groups only"
            statement = ("Assumption: of the SafeTab paper's privacy-loss total (eq. 39), these "
                         "totals include only the two-step groups' terms (each group's Step-1 "
                         "noisy total and its Step-2 released counts) and leave out the TotalOnly "
                         "term (the groups that release only their total). They answer "
                         f"{question!r}, a narrower question than the paper's Table 2. Give "
                         "TotalOnly MOEs to include the TotalOnly term. SafeTab's full "
                         "algorithm (TotalOnly groups at the full group budget at every level) "
                         "is accounted beside these totals.")
        if total_only:
            statement += f" Within a level, {_WITHIN_LEVEL}."
        return {"terms_included": included, "terms_left_out": left_out, "question": question,
                "narrower_than_paper_table_2": bool(left_out), "within_level": _WITHIN_LEVEL,
                "statement": statement}

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: ``{"assumption": {...}, "levels": [...], "total": {"pure_dp_epsilon",
        "rdp_epsilon", "zcdp_epsilon_analytic", "zcdp_epsilon_numeric"}, "algorithms": {...}}``
        (``algorithms`` as the attribute)."""
        return {"assumption": self.assumption,
                "levels": [level.to_dict() for level in self.levels],
                "total": {"pure_dp_epsilon": self.pure_dp_epsilon,
                          "rdp_epsilon": self.rdp_epsilon,
                          "zcdp_epsilon_analytic": self.zcdp_epsilon_analytic,
                          "zcdp_epsilon_numeric": self.zcdp_epsilon_numeric},
                "algorithms": self.algorithms}

    def assumption_text(self, width: int = 95, *, options: str | None = None) -> str:
        """The assumption's statement wrapped to ``width`` columns; ``options`` (e.g. a CLI's
        flags) is named after "TotalOnly MOEs" where the statement asks for them."""
        statement = self.assumption["statement"].replace("eq. 39", "eq.\u00a039")
        if options:
            statement = statement.replace("Give TotalOnly MOEs", f"Give TotalOnly MOEs ({options})")
        return textwrap.fill(statement, width=width).replace("\u00a0", " ")


def _levels_of(moes: Iterable[Any], total_only_moes: Iterable[Any] | None
               ) -> list[tuple[int | None, int | str | None]]:
    """Checked ``(two-step MOE, TotalOnly MOE)`` per level, ``None`` where a kind is absent and
    ``"full"`` for TotalOnly groups at the full group budget."""
    moe_list = list(moes)
    if total_only_moes is None:
        total_only_list: list[Any] = [None] * len(moe_list)
    else:
        total_only_list = list(total_only_moes)
        if len(total_only_list) != len(moe_list):
            raise AccountingError(f"give one TotalOnly MOE per level (None where a level has no "
                                f"TotalOnly groups): got {len(total_only_list)} for "
                                f"{len(moe_list)} levels")
    if not moe_list:
        raise AccountingError("give at least one MOE (one per population-group level)")
    levels = []
    for i, (moe, total_only) in enumerate(zip(moe_list, total_only_list), start=1):
        if moe is None and total_only is None:
            raise AccountingError(f"level {i} has neither two-step groups (an MOE) nor TotalOnly "
                                f"groups (a TotalOnly MOE); give it one of them")
        full = isinstance(total_only, str) and total_only.strip().lower() == FULL
        if full and moe is None:
            raise AccountingError(f"level {i}: TotalOnly groups at the full group budget "
                                  f"({FULL!r}) need the level's two-step MOE, which sets that "
                                  f"budget (step2 / (1 - gamma)); give an MOE or a TotalOnly MOE")
        levels.append((None if moe is None else check_moe(moe, level=i),
                       FULL if full else None if total_only is None
                       else check_moe(total_only, level=i, what="TotalOnly MOE")))
    return levels


def account_moe(moes: Iterable[Any], *, stability: int, gamma: Any = "0.1",
                delta: Any = 1e-10, total_only_moes: Iterable[Any] | None = None
                ) -> MOEAccounting:
    """Budgets and total privacy loss of SafeTab-style levels with target MOEs (docs/safetab.md).

    Each population-group level ``i`` has a target 95 % MOE ``m_i`` for the released (Step 2)
    counts of its two-step groups. Such a group spends a fraction ``γ`` of its budget on the
    noisy total used for thresholding (Step 1) and ``1 − γ`` on the released counts (Step 2; a
    record falls in one released cell of its group, so the counts of one group compose in
    parallel). Hence, with ``s`` the stability (the most groups of one level a record belongs
    to):

    * Step-2 budget of a group: ``ε₂ = ln 20/(m + 1)`` (geometric) or ``ρ₂ = 1.92/m²`` (discrete
      Gaussian) — calibrated so the released counts have MOE ``m``;
    * group budget: ``ε₂/(1 − γ)`` (so Step 1 gets ``γ ε₂/(1 − γ)``), likewise for ρ;
    * level budget, by generalized parallel composition over groups of degree ``s``:
      ``ε_level = s · ε₂/(1 − γ)`` and ``ρ_level = s · ρ₂/(1 − γ)``.

    **TotalOnly groups.** Without ``total_only_moes`` the result leaves out the TotalOnly term
    of the SafeTab paper's eq. 39 and answers the narrower question of the loss of the two-step
    groups only; its :attr:`~MOEAccounting.assumption` says so. With them, a level ``i`` with
    TotalOnly MOE ``t_i`` also has groups releasing one count with budget ``ln 20/(t_i + 1)`` or
    ``1.92/t_i²``. Groups of both kinds share the stability ``s``, so the level costs ``s``
    times its costlier kind at every Rényi order (:func:`~hierarchy.accounting.
    compose_group_kinds`, as ``postproc safetab`` accounts a level): pure ε
    ``s · max(ε₂/(1 − γ), ε_t)``, ρ ``s · max(ρ₂/(1 − γ), ρ_t)``. A level with ``moes[i] =
    None`` has only TotalOnly groups and costs ``s · ε_t`` (``s · ρ_t``); such levels add their
    cost to the total, so groups whose stability is counted apart go there.

    Levels compose sequentially. The totals are: pure DP ``Σ ε_level`` (geometric noise);
    RDP → (ε, δ) for the *same geometric mechanisms*, from the curve ``Σ_i s·[τ(α, γ ε₂/(1 − γ))
    + τ(α, ε₂)]`` (with TotalOnly groups, ``s·max(…, τ(α, ε_t))``); zCDP → (ε, δ) analytic and
    numeric for discrete Gaussian noise with the same MOEs, from ``Σ ρ_level``. Sensitivity is
    1 (one record changes one cell of a group by one). Every MOE comes with the exact
    probability that the noise of its count lies within it, under either mechanism
    (:class:`CalibratedCount`).

    Parameters
    ----------
    moes : iterable of int or None
        Target MOE of each level's two-step groups, each ≥ 1; ``None`` for a level of TotalOnly
        groups only.
    stability : int
        s, ≥ 1.
    gamma : Fraction, str or float, optional
        Share of a group's budget for the Step-1 total, in [0, 1). Default ``"0.1"``.
    delta : float, optional
        δ for the conversions. Default 1e−10.
    total_only_moes : iterable of int, "full" or None, optional
        One per level: the target MOE of its TotalOnly groups' counts, ``"full"`` for TotalOnly
        groups at the full group budget ``ε₂/(1 − γ)`` (``ρ₂/(1 − γ)``) as ``postproc safetab``
        releases them (the level needs an MOE), ``None`` where it has none. Default: no
        TotalOnly groups anywhere.

    Returns
    -------
    MOEAccounting
        With :attr:`~MOEAccounting.algorithms`: whatever the TotalOnly groups given, SafeTab's
        two-step-only and full algorithms for the same two-step MOEs, side by side.

    Raises
    ------
    AccountingError
        On no levels, an MOE < 1, a level with neither kind of group, ``total_only_moes`` of
        another length than ``moes``, ``"full"`` at a level without an MOE, a bad stability, γ
        outside [0, 1) or δ outside (0, 1).

    Examples
    --------
    >>> acc = account_moe([6, 50], stability=9, gamma="0.1")
    >>> [round(level.epsilon_total, 4) for level in acc.levels]
    [4.2796, 0.5874]
    >>> round(acc.pure_dp_epsilon, 4), round(acc.rho, 4)
    (4.867, 0.5410)
    >>> acc.assumption["terms_left_out"], acc.assumption["narrower_than_paper_table_2"]
    (['TotalOnly groups: one count each'], True)
    >>> with_total_only = account_moe([6, 50], stability=9, total_only_moes=[None, 10])
    >>> round(with_total_only.levels[1].epsilon_total, 4)      # 9 · ln 20/11 > 9 · ln 20/51/0.9
    2.4511

    The SafeTab paper's settings: the default totals count the two-step groups only; SafeTab's
    full algorithm also has TotalOnly groups at the full group budget (exact, and by the paper's
    Corollary 1, which understates):

    >>> paper = account_moe([6, 6, 11, 11, 50, 50, 50], stability=9, gamma="0.1", delta=1e-10)
    >>> full = paper.algorithms["full_algorithm"]
    >>> [round(x, 2) for x in (paper.rdp_epsilon, full["rdp_epsilon"],
    ...                        full["rdp_epsilon_corollary_1"])]
    [12.93, 14.19, 13.57]
    >>> paper.algorithms["two_step_only"]["rdp_epsilon"] == paper.rdp_epsilon
    True
    """
    levels_in = _levels_of(moes, total_only_moes)
    s = check_stability(stability)
    g = check_gamma(gamma)
    d = check_delta(delta)
    levels, curve = _levels_and_curve(levels_in, stability=s, gamma=g)
    rho_total = sum(level.rho_total for level in levels)
    two_step_moes = [moe for moe, _ in levels_in if moe is not None]
    return MOEAccounting(levels=tuple(levels), stability=s, gamma=g, delta=d,
                         pure_dp_epsilon=sum(level.epsilon_total for level in levels),
                         rdp_epsilon=rdp_to_approx_dp(curve, d),
                         zcdp_epsilon_analytic=zcdp_to_approx_dp_analytic(rho_total, d),
                         zcdp_epsilon_numeric=zcdp_to_approx_dp_numeric(rho_total, d),
                         algorithms=_algorithms(two_step_moes, stability=s, gamma=g, delta=d))


def _levels_and_curve(levels_in: list[tuple[int | None, int | str | None]], *, stability: int,
                      gamma: Fraction) -> tuple[list[MOELevel], Any]:
    """Each level's report (:func:`_level`), and the RDP curve (geometric noise) of all the
    levels composed sequentially: an :class:`RDPCurve`, or a function of the order α when some
    level has groups of both kinds."""
    levels: list[MOELevel] = []
    terms: list[tuple[str, float, int, float]] = []
    mixed: dict[tuple[int | None, int | None], list[Any]] = {}      # key → [curve, count]
    # Levels with the same MOEs have the same budgets and RDP terms, computed once. The terms
    # of all levels with one kind of group make one curve at the end: adding the levels' curves
    # one by one would copy the terms so far at every level, quadratic in the number of levels.
    seen: dict[tuple[int | None, int | None],
               tuple[MOELevel, tuple[tuple[str, float, int, float], ...], LevelCurve | None]] = {}
    for key in levels_in:
        if key not in seen:
            seen[key] = _level(*key, stability=stability, gamma=gamma)
        level, level_terms, level_curve = seen[key]
        levels.append(level)
        terms.extend(level_terms)
        if level_curve is not None:
            mixed.setdefault(key, [level_curve, 0])[1] += 1
    curve: Any = RDPCurve(tuple(terms))
    if mixed:
        single_kind = curve

        def curve(alpha):
            out = np.asarray(single_kind(alpha), dtype=float)
            for level_curve, count in mixed.values():
                out = out + count * np.asarray(level_curve(alpha), dtype=float)
            return out

    return levels, curve


def _algorithms(moes: list[int], *, stability: int, gamma: Fraction, delta: float
                ) -> dict[str, Any] | None:
    """SafeTab's two-step-only and full algorithms for the two-step MOEs ``moes``: RDP → (ε, δ)
    exactly and by the SafeTab paper's Corollary 1 (see :attr:`MOEAccounting.algorithms`).
    Levels with the same MOE are one curve with their count as weight, so the cost grows with
    the number of distinct MOEs, not of levels."""
    if not moes:
        return None
    two_step_terms: list[tuple[str, float, int, float]] = []
    full_levels: list[tuple[LevelCurve, int]] = []          # (level curve, levels with it)
    pure = rho = 0.0
    for moe, count in Counter(moes).items():
        step2 = CalibratedCount.of(moe)
        eps_group = step2.epsilon / float(1 - gamma)
        group = RDPCurve.geometric(step2.epsilon)
        if gamma > 0:
            group = RDPCurve.geometric(float(gamma) * eps_group) + group
        two_step_terms.extend(((stability * count) * group).terms)
        full_levels.append((compose_group_kinds([group, RDPCurve.geometric(eps_group)],
                                                stability=stability), count))
        pure += count * stability * eps_group
        rho += count * stability * step2.rho / float(1 - gamma)
    two_step = RDPCurve(tuple(two_step_terms))

    def full(tau_of):
        parts = [(tau_of(level), count) for level, count in full_levels]

        def curve(alpha):
            return sum(count * np.asarray(tau(alpha), dtype=float) for tau, count in parts)

        return curve

    return {
        "two_step_only": {
            "rdp_epsilon": rdp_to_approx_dp(two_step, delta),
            "rdp_epsilon_corollary_1": rdp_to_approx_dp(with_safetab_paper_tau(two_step), delta),
            "counts": "each two-step group's Step-1 noisy total and Step-2 released counts; "
                      "no TotalOnly groups"},
        "full_algorithm": {
            "rdp_epsilon": rdp_to_approx_dp(full(lambda level: level), delta),
            "rdp_epsilon_corollary_1": rdp_to_approx_dp(full(with_safetab_paper_tau), delta),
            "counts": "the two-step groups, and at every level TotalOnly groups releasing one "
                      "count at the full group budget step2 / (1 - gamma), as postproc safetab "
                      "releases them; s bounds a record's groups of both kinds together, so a "
                      "level costs s times its costlier kind (the TotalOnly one) at every "
                      "Renyi order"},
        "pure_dp_epsilon": pure, "rho": rho, "moes": list(moes)}


def _level(moe: int | None, total_only_moe: int | str | None, *, stability: int,
           gamma: Fraction
           ) -> tuple[MOELevel, tuple[tuple[str, float, int, float], ...], LevelCurve | None]:
    """One level: its report, and its RDP curve (geometric noise) as terms of a sum when it has
    one kind of group, else as a :class:`LevelCurve`."""
    s = stability
    if total_only_moe == FULL:
        step2 = CalibratedCount.of(moe)
        total_only = CalibratedCount.at_budget(step2.epsilon / float(1 - gamma),
                                               step2.rho / float(1 - gamma))
    else:
        total_only = None if total_only_moe is None else CalibratedCount.of(total_only_moe)
    if moe is None:
        if total_only is None:
            raise AccountingError("a level needs two-step groups (an MOE) or TotalOnly groups")
        level = MOELevel(moe=None, epsilon_step2=None, epsilon_total=s * total_only.epsilon,
                         rho_step2=None, rho_total=s * total_only.rho, total_only=total_only)
        return level, (("geometric", total_only.epsilon, 1, float(s)),), None
    step2 = CalibratedCount.of(moe)
    eps2, rho2 = step2.epsilon, step2.rho
    eps_group = eps2 / float(1 - gamma)
    rho_group = rho2 / float(1 - gamma)
    if total_only is None:
        # s · [geometric(γ ε_group) + geometric(ε₂)], the terms of compose_parallel(
        # RDPCurve.geometric(γ ε_group) + RDPCurve.geometric(ε₂), degree=s) written out
        # (RDPCurve(...) in account_moe checks them all once)
        group = ((("geometric", float(gamma) * eps_group, 1, float(s)),) if gamma > 0 else ()) \
            + (("geometric", eps2, 1, float(s)),)
        level = MOELevel(moe=moe, epsilon_step2=eps2, epsilon_total=s * eps_group,
                         rho_step2=rho2, rho_total=s * rho2 / float(1 - gamma), step2=step2)
        return level, group, None
    two_step = RDPCurve.geometric(eps2)
    if gamma > 0:
        two_step = RDPCurve.geometric(float(gamma) * eps_group) + two_step
    geometric = compose_group_kinds([two_step, RDPCurve.geometric(total_only.epsilon)],
                                    stability=s)
    gaussian = compose_group_kinds([RDPCurve.zcdp(rho_group), RDPCurve.zcdp(total_only.rho)],
                                   stability=s)
    level = MOELevel(moe=moe, epsilon_step2=eps2,
                     epsilon_total=s * max(eps_group, total_only.epsilon), rho_step2=rho2,
                     rho_total=gaussian.zcdp_rho, step2=step2, total_only=total_only)
    return level, (), geometric
