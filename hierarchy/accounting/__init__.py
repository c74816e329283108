"""Privacy accounting: pure DP, zCDP and Rényi DP, conversions to (ε, δ), MOE calibration.

What a configuration costs, in every notion the toolkit reports (docs/accounting.md states each):

* **pure ε-DP** composes by addition; ε-DP implies ε²/2-zCDP (:func:`pure_to_zcdp`);
* **zCDP ρ** composes by addition; the discrete Gaussian and the Gaussian with variance σ² on a
  sensitivity-Δ query are Δ²/(2σ²)-zCDP;
* **Rényi DP** of order α composes by addition; an :class:`RDPCurve` is the function α ↦ τ(α)
  of a composition, with :func:`rdp_geometric` in closed form for the two-sided geometric
  mechanism;
* **generalized parallel composition**: mechanisms on subsets of a family in which a record lies
  in at most ``z`` subsets compose to z·ε, z·ρ, z·τ (:func:`compose_parallel`, ``z * curve``);
* **(ε, δ)** from an RDP curve (:func:`rdp_to_approx_dp`) and from zCDP, analytically
  (:func:`zcdp_to_approx_dp_analytic`) or numerically (:func:`zcdp_to_approx_dp_numeric`);
* **MOE ↔ parameter** calibration for the geometric and discrete Gaussian mechanisms, and the
  exact coverage ``P[|noise| ≤ MOE]`` of SafeTab's nominally 95 % margins
  (:func:`coverage_geometric`, :func:`coverage_discrete_gaussian`);
* **amplification by sampling**: a mechanism run on a secret random sample, Poisson at rate q
  (neighbours add or remove one person) or m of n without replacement (neighbours substitute
  one record), is ``log(1 + q(e^ε − 1))``-DP (:func:`amplify_poisson`,
  :func:`amplify_without_replacement`, :func:`amplify_loss`); the Poisson-subsampled Gaussian
  has an RDP curve at integer orders (:func:`rdp_sampled_gaussian`, :class:`SampledRDPCurve`);
* **levels of groups of several kinds** sharing one stability ``s`` cost ``s`` times the
  costliest kind at every Rényi order (:func:`compose_group_kinds`);
* **exact budget splits** in :class:`fractions.Fraction`, so "fractions sum to 1" has no float
  drift (:func:`as_fraction`, :func:`split_budget`, :func:`allocate_budget`);
* **reports**: :func:`account_levels` (a TopDown run: per query, per level, in total) and
  :func:`account_moe` (SafeTab-style levels calibrated to target MOEs, with or without
  TotalOnly groups, saying which terms of the SafeTab paper's eq. 39 it includes), both
  JSON-ready.

Everything here is a pure function of its arguments or a frozen dataclass. The modules:
:mod:`~hierarchy.accounting.budgets` (exact splits), :mod:`~hierarchy.accounting.rdp` (single
mechanisms, :class:`RDPCurve`, composition), :mod:`~hierarchy.accounting.conversions` (to (ε, δ)),
:mod:`~hierarchy.accounting.moe` (MOE calibration and coverage),
:mod:`~hierarchy.accounting.groups` (a level of groups of several kinds),
:mod:`~hierarchy.accounting.sampling` (amplification by sampling),
:mod:`~hierarchy.accounting.reports` (:class:`PrivacyLoss`, :func:`account_levels`) and
:mod:`~hierarchy.accounting.moe_levels` (:func:`account_moe`), and
:mod:`~hierarchy.accounting.safetab_paper` (the SafeTab paper's closed form for the geometric
mechanism's RDP, which understates it: only to set totals computed with it beside the exact ones);
every public name is importable from :mod:`hierarchy.accounting` itself.

Examples
--------
>>> curve = 2 * RDPCurve.geometric(0.5) + RDPCurve.zcdp(0.01)
>>> round(float(curve(2.0)), 4)
0.4747
>>> round(rdp_to_approx_dp(curve, 1e-10), 3)
1.842
"""

from __future__ import annotations

from hierarchy.accounting._checks import (
    MAX_EPSILON,
    MAX_RHO,
    check_delta,
    check_epsilon,
    check_gamma,
    check_moe,
    check_rho,
    check_sensitivity,
    check_stability,
)
from hierarchy.accounting.budgets import allocate_budget, as_fraction, split_budget
from hierarchy.accounting.conversions import (
    ALPHA_GRID_MINUS_ONE,  # noqa: F401  (not in __all__)
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
from hierarchy.accounting.moe_levels import CalibratedCount, MOEAccounting, MOELevel, account_moe
from hierarchy.accounting.rdp import (
    RDPCurve,
    compose,
    compose_parallel,
    pure_to_zcdp,
    rdp_discrete_gaussian,
    rdp_gaussian,
    rdp_geometric,
)
from hierarchy.accounting.reports import LevelsAccounting, PrivacyLoss, account_levels
from hierarchy.accounting.safetab_paper import rdp_geometric_safetab_paper, with_safetab_paper_tau
from hierarchy.accounting.sampling import (
    MAX_INTEGER_ORDER,
    AmplifiedLoss,
    SampledRDPCurve,
    amplify_loss,
    amplify_poisson,
    amplify_without_replacement,
    check_sample_rate,
    check_sample_size,
    rdp_sampled_gaussian,
    sampling_assumption,
)

__all__ = [
    "as_fraction", "split_budget", "allocate_budget",
    "check_epsilon", "check_rho", "check_delta", "check_sensitivity", "check_moe",
    "check_stability", "check_gamma", "MAX_EPSILON", "MAX_RHO",
    "pure_to_zcdp", "rdp_geometric", "rdp_gaussian", "rdp_discrete_gaussian", "RDPCurve",
    "compose", "compose_parallel",
    "rdp_to_approx_dp", "zcdp_to_approx_dp_analytic", "zcdp_to_approx_dp_numeric",
    "moe_geometric", "calibrate_geometric", "moe_discrete_gaussian",
    "calibrate_discrete_gaussian", "coverage_geometric", "coverage_discrete_gaussian",
    "NOMINAL_COVERAGE", "LevelCurve", "compose_group_kinds",
    "PrivacyLoss", "LevelsAccounting", "account_levels", "CalibratedCount", "MOELevel",
    "MOEAccounting", "account_moe", "rdp_geometric_safetab_paper", "with_safetab_paper_tau",
    "check_sample_rate", "check_sample_size", "amplify_poisson", "amplify_without_replacement",
    "sampling_assumption", "AmplifiedLoss", "amplify_loss", "rdp_sampled_gaussian",
    "SampledRDPCurve", "MAX_INTEGER_ORDER",
]
