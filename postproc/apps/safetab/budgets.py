"""Exact budget bookkeeping of SafeTab-style levels, their noise, and their privacy accounting.

A population-group level ``i`` has a budget ``B_i`` — ε (pure DP, two-sided geometric noise) or
ρ (zCDP, discrete Gaussian noise) — and a declared stability ``s_i``: the most groups of the level
one record can belong to. Every group gets ``B_i / s_i`` (generalized parallel composition over a
family of degree ``s_i``). A ``TotalOnly`` group spends it all on one count; any other group
spends ``γ`` of it on the noisy total used for thresholding (Step 1) and ``1 − γ`` on the table
it releases (Step 2; a record is in one cell of the table, so the cells compose in parallel).
All of this is done in :class:`fractions.Fraction`, so ``step1 + step2 == B_i / s_i`` exactly.

The budget is given directly or implied by a target 95 % MOE of the Step-2 counts, through
:func:`hierarchy.accounting.calibrate_geometric` / :func:`~hierarchy.accounting.
calibrate_discrete_gaussian`: the Step-2 budget is that calibration (as an exact rational) and
``B_i = s_i · step2 / (1 − γ)``.

Neighbouring datasets differ by adding or removing one record, so every count has sensitivity 1.

A run is accounted, by default, as SafeTab's **full algorithm** (:data:`ACCOUNTING_ALGORITHMS`):
every level is charged as if any of its groups could be a TotalOnly group releasing one count at
the whole group budget ``B_i / s_i`` — ``s_i`` times the costlier of the two kinds of group at
every Rényi order — whichever iterations the run releases as TotalOnly; ``"as_released"``
charges each level only for the kinds of group it released.

Examples
--------
>>> b = LevelBudget("zcdp", "1/2", stability=5, gamma="1/10")
>>> b.group, b.step1, b.step2, b.step1 + b.step2 == b.total / 5
(Fraction(1, 10), Fraction(1, 100), Fraction(9, 100), True)
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Mapping

import numpy as np

from hierarchy.accounting import (
    PrivacyLoss,
    RDPCurve,
    account_moe,
    as_fraction,
    calibrate_discrete_gaussian,
    calibrate_geometric,
    compose_group_kinds,
    moe_discrete_gaussian,
    moe_geometric,
    rdp_to_approx_dp,
    zcdp_to_approx_dp_analytic,
    zcdp_to_approx_dp_numeric,
)
from hierarchy.budget import NOTIONS as BUDGET_TYPES
from hierarchy.budget import ZCDP, PureDP, as_privacy, notion
from hierarchy.mechanisms import Mechanism, get_mechanism, round_up_to_rational
from postproc.errors import PostprocError

__all__ = ["NOTIONS", "LevelBudget", "Noise", "LevelAccounting", "SafeTabAccounting",
           "account_safetab", "notion_of", "ACCOUNTING_ALGORITHMS"]

#: The noise of each accounting notion: pure DP → geometric, zCDP → discrete Gaussian.
NOTIONS = {PureDP.kind: "geometric", ZCDP.kind: "discrete_gaussian"}

#: How a run's privacy loss is accounted (``[accounting] algorithm``), with what each says.
ACCOUNTING_ALGORITHMS = {
    "full": "SafeTab's full algorithm: every level is charged as if any of its groups could be "
            "a TotalOnly group releasing one count at the whole group budget B/s, or a two-step "
            "group (a Step-1 total at gamma B/s, then Step-2 counts at (1 - gamma) B/s), "
            "whichever iterations this run releases as TotalOnly; one stability s bounds a "
            "record's groups of both kinds, so a level costs s times the costlier kind at every "
            "Renyi order (in pure epsilon and in rho both kinds cost the same). It bounds the "
            "loss of what the run released ([accounting] algorithm = \"as_released\" charges "
            "only that)",
    "as_released": "as released: every level is charged for the kinds of group it released "
                   "(two-step groups: a Step-1 total at gamma B/s and Step-2 counts at "
                   "(1 - gamma) B/s; TotalOnly groups: one count at B/s); a level with both "
                   "kinds costs s times the costlier at every Renyi order. SafeTab's full "
                   "algorithm ([accounting] algorithm = \"full\", the default) charges every "
                   "level for both kinds",
}
_BOTH_KINDS = ("adaptive", "total_only")


def notion_of(mechanism: Mechanism | str) -> str:
    """``'pure'`` for the geometric mechanism, ``'zcdp'`` for the discrete Gaussian.

    Parameters
    ----------
    mechanism : Mechanism or str

    Returns
    -------
    str

    Raises
    ------
    PostprocError
        For any other mechanism (SafeTab releases integer counts with one of these two).

    Examples
    --------
    >>> notion_of("discrete_gaussian"), notion_of("geometric")
    ('zcdp', 'pure')
    """
    name = mechanism.name if isinstance(mechanism, Mechanism) else mechanism
    for kind, mech in NOTIONS.items():
        if name == mech:
            return kind
    raise PostprocError(f"SafeTab noise must be 'geometric' (pure DP, budgets are epsilon) or "
                        f"'discrete_gaussian' (zCDP, budgets are rho), not {name!r}")


def _gamma(value: Any) -> Fraction:
    g = as_fraction(value, name="gamma")
    if not 0 < g < 1:
        raise PostprocError(f"gamma (the share of a group's budget for its noisy total) must be "
                            f"strictly between 0 and 1, not {value!r}; SafeTab uses 0.1")
    return g


def _simplest_fraction(value: float) -> Fraction:
    """A simple rational within two units in the last place of ``value`` (denominator up to
    10³, 10⁶ or 10⁹, the first that fits); else the shortest decimal of ``value``."""
    exact = Fraction(value)
    for bound in (10**3, 10**6, 10**9):
        candidate = exact.limit_denominator(bound)
        if abs(candidate - exact) <= 2 * Fraction(math.ulp(value)):
            return candidate
    return as_fraction(repr(value), name="calibrated budget")


def _stability(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise PostprocError(f"stability must be a positive integer (the most groups of one "
                            f"level a record can belong to), not {value!r}")
    return int(value)


@dataclass(frozen=True)
class LevelBudget:
    """The exact budget of one population-group level and its split.

    Parameters
    ----------
    notion : {'pure', 'zcdp'}
        ε of geometric noise or ρ of discrete Gaussian noise.
    total : PureDP, ZCDP, Fraction, int, str or float
        The level's budget ``B``: a typed budget of that notion, or a bare number read exactly
        with :func:`hierarchy.accounting.as_fraction`.
    stability : int
        The declared ``s``.
    gamma : Fraction, str or float
        Share of a group's budget for the Step-1 total, strictly between 0 and 1.
    moe : int or None
        The target MOE the budget was calibrated to, if any (for the record).

    Raises
    ------
    PostprocError
        On an unknown notion, a budget ≤ 0, a bad stability or γ.

    Examples
    --------
    >>> LevelBudget("pure", 0, stability=1, gamma="0.1")
    Traceback (most recent call last):
    ...
    postproc.errors.PostprocError: a level budget must be > 0, not 0
    >>> LevelBudget("zcdp", ZCDP("1/2"), stability=5, gamma="1/10").group
    Fraction(1, 10)
    """

    notion: str
    total: Fraction
    stability: int
    gamma: Fraction
    moe: int | None = None

    def __post_init__(self):
        if self.notion not in NOTIONS:
            raise PostprocError(f"notion must be one of {sorted(NOTIONS)}, not {self.notion!r}")
        if isinstance(self.total, (PureDP, ZCDP)):
            total = as_privacy(self.total, self.notion, what="the level budget",
                               error=PostprocError).value
        else:
            total = as_fraction(self.total, name="level budget")
        if total <= 0:
            raise PostprocError(f"a level budget must be > 0, not {self.total!r}")
        object.__setattr__(self, "total", total)
        object.__setattr__(self, "stability", _stability(self.stability))
        object.__setattr__(self, "gamma", _gamma(self.gamma))

    @classmethod
    def from_moe(cls, moe: Any, *, notion: str, stability: int, gamma: Any) -> "LevelBudget":
        """The level budget whose Step-2 counts have a target 95 % MOE.

        Step 2 gets ``calibrate_geometric(moe)`` (ε) or ``calibrate_discrete_gaussian(moe)``
        (ρ) as an exact rational: a simple one within two units in the last place of that float
        (denominator up to 10⁹), else its shortest decimal (``1.92/36`` becomes ``4/75``); the
        level gets
        ``stability · step2 / (1 − γ)``, so that ``step2`` comes back exactly.

        Parameters
        ----------
        moe : int
            Target MOE, an integer ≥ 1.
        notion : {'pure', 'zcdp'}
        stability : int
        gamma : Fraction, str or float

        Returns
        -------
        LevelBudget

        Raises
        ------
        PostprocError
            On an MOE that is not an integer ≥ 1, or invalid other arguments.

        Examples
        --------
        >>> b = LevelBudget.from_moe(6, notion="zcdp", stability=4, gamma="0.1")
        >>> b.step2, b.total
        (Fraction(4, 75), Fraction(32, 135))
        """
        if isinstance(moe, bool) or not isinstance(moe, (int, np.integer)) or moe < 1:
            raise PostprocError(f"a target MOE must be an integer >= 1, not {moe!r}")
        if notion not in NOTIONS:
            raise PostprocError(f"notion must be one of {sorted(NOTIONS)}, not {notion!r}")
        calibrate = calibrate_geometric if notion == PureDP.kind else calibrate_discrete_gaussian
        step2 = _simplest_fraction(calibrate(int(moe)))
        g = _gamma(gamma)
        return cls(notion, _stability(stability) * step2 / (1 - g), stability, g, int(moe))

    @property
    def privacy(self) -> PureDP | ZCDP:
        """The level's budget as a typed budget, :class:`~hierarchy.budget.PureDP` or
        :class:`~hierarchy.budget.ZCDP`."""
        return BUDGET_TYPES[self.notion](self.total)

    @property
    def group(self) -> Fraction:
        """Budget of one group: ``total / stability``."""
        return self.total / self.stability

    @property
    def step1(self) -> Fraction:
        """Budget of a group's Step-1 noisy total: ``γ · group``."""
        return self.gamma * self.group

    @property
    def step2(self) -> Fraction:
        """Budget of a group's released table: ``(1 − γ) · group``."""
        return (1 - self.gamma) * self.group

    @property
    def total_only(self) -> Fraction:
        """Budget of a TotalOnly group's single count: the whole ``group``."""
        return self.group

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready, budgets as exact strings such as ``'9/100'``."""
        return {"notion": self.notion, "total": str(self.total), "stability": self.stability,
                "gamma": str(self.gamma), "group": str(self.group), "step1": str(self.step1),
                "step2": str(self.step2), "total_only": str(self.total_only),
                "target_moe": self.moe}


@dataclass(frozen=True)
class Noise:
    """The noise added to counts answered with one budget (sensitivity 1).

    Build with :meth:`for_budget`. For the geometric mechanism the parameter is ``z = ε`` rounded
    *down* to a float (less privacy loss, never more); for the discrete Gaussian it is
    ``σ² = 1/(2ρ)`` rounded *up* to a rational with a denominator of at most 10⁶ (more noise,
    never less), sampled exactly.

    Parameters
    ----------
    mechanism : Mechanism
    budget : Fraction
    parameter : float or Fraction
        ``z`` or ``σ²``.
    variance : float
        Exact variance of the noise.
    moe : int
        95 % MOE by SafeTab's convention (:func:`hierarchy.accounting.moe_geometric`,
        :func:`~hierarchy.accounting.moe_discrete_gaussian`).
    coverage : float
        Exact ``P(|noise| ≤ moe)`` — what the share of counts within ±MOE should be (it is near,
        not exactly, 95 %: the MOE is an integer).
    mean_abs : float
        Exact ``E|noise|``.

    Examples
    --------
    >>> from fractions import Fraction
    >>> noise = Noise.for_budget("discrete_gaussian", Fraction(48, 900))   # rho = 1.92 / 6**2
    >>> noise.parameter, noise.moe, round(noise.coverage, 4)
    (Fraction(75, 8), 6, 0.967)
    >>> noise = Noise.for_budget("geometric", Fraction(1, 2))
    >>> noise.parameter, noise.moe, round(noise.variance, 3), round(noise.coverage, 3)
    (0.5, 5, 7.835, 0.938)
    """

    mechanism: Mechanism
    budget: Fraction
    parameter: Any
    variance: float
    moe: int
    coverage: float
    mean_abs: float

    @classmethod
    def for_budget(cls, mechanism: Mechanism | str, budget: Any) -> "Noise":
        """The noise of a count answered with ``budget`` (ε or ρ, by the mechanism).

        Parameters
        ----------
        mechanism : Mechanism or str
            ``'geometric'`` or ``'discrete_gaussian'``.
        budget : PureDP, ZCDP, Fraction, int, str or float
            > 0; a typed budget must be of the mechanism's notion
            (``mechanism.accounting``).

        Returns
        -------
        Noise

        Raises
        ------
        PostprocError
            On another mechanism or a budget ≤ 0.
        """
        mech = get_mechanism(mechanism)
        kind = notion_of(mech)
        if isinstance(budget, (PureDP, ZCDP)):
            b = as_privacy(budget, mech.accounting, what=f"the budget of {mech.name} noise",
                           error=PostprocError).value
        else:
            b = as_fraction(budget, name="budget")
        if b <= 0:
            raise PostprocError(f"a noise budget must be > 0, not {budget!r}")
        if notion(kind) is PureDP:
            z = float(b)
            if Fraction(z) > b:
                z = float(np.nextafter(z, 0.0))
            parameter: Any = z
            moe = moe_geometric(z)
            sd = math.sqrt(mech.variance(z))
        else:
            parameter = round_up_to_rational(1 / (2 * b))
            moe = moe_discrete_gaussian(float(1 / (2 * parameter)))
            sd = math.sqrt(float(parameter))
        reach = int(math.ceil(60.0 * sd)) + 10
        k = np.arange(-reach, reach + 1)
        pmf = np.exp(mech.logpmf(k, parameter))
        coverage = float(pmf[np.abs(k) <= moe].sum())
        mean_abs = float(np.sum(np.abs(k) * pmf))
        return cls(mech, b, parameter, float(mech.variance(parameter)), int(moe), coverage,
                   mean_abs)

    def sample(self, size: int, rng: Any) -> np.ndarray:
        """``size`` independent draws (int64) from ``rng`` (see
        :func:`hierarchy.randomness.as_randomness`)."""
        return self.mechanism.sample(self.parameter, size, rng)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready description."""
        return {"mechanism": self.mechanism.name, "budget": str(self.budget),
                "parameter_name": self.mechanism.parameter_name,
                "parameter": str(self.parameter), "variance": self.variance, "moe": self.moe,
                "coverage": self.coverage, "mean_abs": self.mean_abs}


@dataclass(frozen=True)
class LevelAccounting:
    """The privacy loss of one level (see :func:`account_safetab`).

    Parameters
    ----------
    budget : LevelBudget
    kinds : tuple of str
        Which kinds of group the level has: ``'adaptive'`` (Step 1 + Step 2) and/or
        ``'total_only'``.
    loss : PrivacyLoss
    moe_calibration : dict or None
        For an MOE-calibrated level, :func:`hierarchy.accounting.account_moe`'s entry for it
        (the ε and ρ of both mechanisms for that MOE; with TotalOnly groups charged, those at
        the full group budget too).
    charged : tuple of str
        The kinds of group the loss charges: both under the full algorithm, else ``kinds``
        (empty: ``kinds``).

    Examples
    --------
    A county level calibrated to a Step-2 MOE of 20 with discrete Gaussian noise, stability 3:

    >>> budget = LevelBudget.from_moe(20, notion="zcdp", stability=3, gamma="0.1")
    >>> level = account_safetab({"county": budget}, kinds={"county": ("adaptive",)}
    ...                         ).levels["county"]
    >>> level.kinds, level.charged, level.loss.rho, round(level.loss.zcdp_epsilon_numeric, 3)
    (('adaptive',), ('adaptive', 'total_only'), 0.016, 1.103)
    >>> level.moe_calibration["moe"], level.moe_calibration["rho_total"]
    (20, 0.016)
    """

    budget: LevelBudget
    kinds: tuple[str, ...]
    loss: PrivacyLoss
    moe_calibration: dict[str, Any] | None = None
    charged: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return {"budget": self.budget.to_dict(), "kinds": list(self.kinds),
                "charged_kinds": list(self.charged or self.kinds),
                "loss": self.loss.to_dict(), "moe_calibration": self.moe_calibration}


@dataclass(frozen=True)
class SafeTabAccounting:
    """The accounting of a SafeTab-style run: per level and in total.

    Parameters
    ----------
    notion : {'pure', 'zcdp'}
    delta : float
    levels : dict of str to LevelAccounting
    total_budget : Fraction
        Σ of the level budgets (ε or ρ), exact.
    total : PrivacyLoss
    algorithm : {"full", "as_released"}
        What the levels are charged for (:data:`ACCOUNTING_ALGORITHMS`).

    Examples
    --------
    Made by :func:`account_safetab`; levels compose sequentially:

    >>> budgets = {"state": LevelBudget("zcdp", "1/10", stability=2, gamma="0.1"),
    ...            "county": LevelBudget("zcdp", "1/50", stability=3, gamma="0.1")}
    >>> acc = account_safetab(budgets, kinds={"state": ("adaptive", "total_only"),
    ...                                       "county": ("adaptive",)})
    >>> acc.notion, acc.total_budget, acc.total.rho, acc.total.pure_epsilon
    ('zcdp', Fraction(3, 25), 0.12, None)
    >>> acc.to_dict()["mechanism"], list(acc.to_dict()["levels"])
    ('discrete_gaussian', ['state', 'county'])
    >>> acc.to_dict()["algorithm"]["name"]
    'full'
    """

    notion: str
    delta: float
    levels: Mapping[str, LevelAccounting]
    total_budget: Fraction
    total: PrivacyLoss = field(repr=False)
    algorithm: str = "full"

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: ``{notion, mechanism, delta, neighbours, composition, algorithm: {name,
        statement}, levels, total}``."""
        return {
            "notion": self.notion, "mechanism": NOTIONS[self.notion], "delta": self.delta,
            "neighbours": "add or remove one record (every count has sensitivity 1)",
            "composition": "each group gets budget/s of its level (generalized parallel "
                           "composition, degree s); Step 1 and Step 2 of a group compose "
                           "sequentially (adaptively); levels compose sequentially",
            "algorithm": {"name": self.algorithm,
                          "statement": ACCOUNTING_ALGORITHMS[self.algorithm]},
            "levels": {name: level.to_dict() for name, level in self.levels.items()},
            "total": {"budget": str(self.total_budget), "loss": self.total.to_dict()},
        }


def _group_curves(budget: LevelBudget, kinds: tuple[str, ...]) -> list[RDPCurve]:
    """The RDP curve of each kind of group of a level (sensitivity 1)."""
    curves = []
    for kind in kinds:
        if notion(budget.notion) is ZCDP:
            curves.append(RDPCurve.zcdp(float(budget.group)))
        elif kind == "adaptive":
            curves.append(RDPCurve.geometric(float(budget.step1))
                          + RDPCurve.geometric(float(budget.step2)))
        else:
            curves.append(RDPCurve.geometric(float(budget.total_only)))
    return curves


def account_safetab(budgets: Mapping[str, LevelBudget], *, kinds: Mapping[str, tuple[str, ...]],
                    delta: Any = 1e-10, algorithm: str = "full") -> SafeTabAccounting:
    """Account for SafeTab-style levels: per level and in total, in every notion.

    By generalized parallel composition a level costs ``s`` times one group: ``s · group`` as
    pure ε (geometric) or ρ (discrete Gaussian), and the RDP curve ``s · [τ(α, step1) +
    τ(α, step2)]`` for a two-step (adaptive) group, ``s · τ(α, group)`` for a TotalOnly group.
    A level charged for both kinds costs at most ``s`` times the larger curve at every order α;
    that pointwise maximum (:func:`hierarchy.accounting.compose_group_kinds`) is what is
    converted. With ``algorithm="full"`` (the default: SafeTab's full algorithm) every level is
    charged for both kinds, whatever ``kinds`` it released; with ``"as_released"``, for its
    ``kinds``. Levels compose sequentially.
    Reported per level and in total: pure ε (geometric only), ρ (for geometric noise, ε²/2 per
    mechanism, composed), RDP → (ε, δ), and zCDP → (ε, δ) analytic and numeric.

    Parameters
    ----------
    budgets : mapping of level name to LevelBudget
        All with the same notion.
    kinds : mapping of level name to tuple of str
        ``'adaptive'`` and/or ``'total_only'``: the kinds of group each level released.
    delta : float, optional
        δ of the (ε, δ) conversions. Default 1e−10.
    algorithm : {"full", "as_released"}, optional
        What a level is charged for (:data:`ACCOUNTING_ALGORITHMS`). Default ``"full"``.

    Returns
    -------
    SafeTabAccounting

    Raises
    ------
    PostprocError
        On no levels, mixed notions, a level without kinds, δ outside (0, 1) or an unknown
        algorithm.

    Examples
    --------
    >>> b = {"state": LevelBudget("pure", "1", stability=2, gamma="0.1"),
    ...      "county": LevelBudget("pure", "1/2", stability=2, gamma="0.1")}
    >>> acc = account_safetab(b, kinds={"state": ("adaptive",), "county": ("adaptive",)})
    >>> acc.total_budget, acc.total.pure_epsilon
    (Fraction(3, 2), 1.5)
    >>> acc.levels["state"].loss.pure_epsilon + acc.levels["county"].loss.pure_epsilon
    1.5

    Splitting a group's budget into a Step-1 and a Step-2 count costs less Rényi divergence
    than one count at the whole budget: the full algorithm's (ε, δ) is the larger.

    >>> released = account_safetab(b, kinds={"state": ("adaptive",), "county": ("adaptive",)},
    ...                            algorithm="as_released")
    >>> bool(released.total.rdp_epsilon <= acc.total.rdp_epsilon)
    True
    """
    if algorithm not in ACCOUNTING_ALGORITHMS:
        raise PostprocError(f"the accounting algorithm must be one of "
                            f"{list(ACCOUNTING_ALGORITHMS)}, not {algorithm!r}")
    if not budgets:
        raise PostprocError("no levels to account for")
    notions = {b.notion for b in budgets.values()}
    if len(notions) != 1:
        raise PostprocError(f"every level must use the same notion, got {sorted(notions)}")
    kind = notions.pop()
    pure = notion(kind) is PureDP
    d = PrivacyLoss.of(rho=1.0, delta=delta).delta        # validates delta
    levels: dict[str, LevelAccounting] = {}
    level_curves = []
    for name, budget in budgets.items():
        level_kinds = tuple(kinds.get(name, ()))
        if not level_kinds or set(level_kinds) - set(_BOTH_KINDS):
            raise PostprocError(f"level {name!r}: kinds must be a non-empty subset of "
                                f"{_BOTH_KINDS}, not {level_kinds!r}")
        charged = _BOTH_KINDS if algorithm == "full" else level_kinds
        s = budget.stability
        curve = compose_group_kinds(_group_curves(budget, charged), stability=s)
        rho = curve.zcdp_rho
        loss = PrivacyLoss(pure_epsilon=float(budget.total) if pure else None,
                           rho=rho, rdp_epsilon=rdp_to_approx_dp(curve, d),
                           zcdp_epsilon_analytic=zcdp_to_approx_dp_analytic(rho, d),
                           zcdp_epsilon_numeric=zcdp_to_approx_dp_numeric(rho, d), delta=d)
        calibration = None
        if budget.moe is not None:
            full = ["full"] if "total_only" in charged else None
            calibration = account_moe([budget.moe], stability=s, gamma=budget.gamma, delta=d,
                                      total_only_moes=full).to_dict()["levels"][0]
        levels[name] = LevelAccounting(budget, level_kinds, loss, calibration, charged)
        level_curves.append(curve)

    def total_curve(alpha):
        return sum(np.asarray(c(alpha), dtype=float) for c in level_curves)

    total_budget = sum((b.total for b in budgets.values()), Fraction(0))
    rho = sum(level.loss.rho for level in levels.values())
    total = PrivacyLoss(pure_epsilon=float(total_budget) if pure else None, rho=rho,
                        rdp_epsilon=rdp_to_approx_dp(total_curve, d),
                        zcdp_epsilon_analytic=zcdp_to_approx_dp_analytic(rho, d),
                        zcdp_epsilon_numeric=zcdp_to_approx_dp_numeric(rho, d), delta=d)
    return SafeTabAccounting(kind, d, levels, total_budget, total, algorithm)
