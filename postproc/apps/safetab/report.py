"""The accuracy report: theoretical MOE next to the observed error, and the printed summaries.

The report compares every released count with its true value. That comparison is computed from
the confidential data, so the report is a diagnostic for the people who run the tabulation (and
for simulations), **not** a differentially private output: ``postproc safetab`` writes it only in
simulation mode or when asked to (``[output] accuracy_report = true``), marked confidential.

For each level and released table type it gives the number of groups and counts, the 95 % MOE,
the exact probability ``P(|noise| ≤ MOE)`` under the noise law (the MOE is an integer, so this is
near, not exactly, 95 %), the observed share of counts within ±MOE of the truth, the observed and
expected mean absolute error, and the observed RMSE next to the noise standard deviation. Over
all counts, the observed share within ±MOE is compared with its expectation: the counts' errors
are independent, so the number within ±MOE is a sum of independent Bernoulli variables with known
probabilities, and ``|z| ≤ 4`` (``z`` = standardized difference) has a false-alarm rate below
1e-4 (normal approximation).

Examples
--------
>>> format_share(0.9512)
'95.1%'
"""

from __future__ import annotations

import math
import textwrap
from typing import Any

import numpy as np

from hierarchy.budget import notion
from hierarchy.numbers import as_fraction
from postproc.apps.safetab.algorithm import choose_tables
from postproc.apps.safetab.recodes import TABLE_TYPES
from postproc.errors import PostprocError

__all__ = ["accuracy_report", "format_report", "format_accounting", "format_choices",
           "format_share", "Z_TOLERANCE"]

#: Largest standardized difference between the observed and expected share within ±MOE that the
#: report calls consistent (two-sided normal tail 6.3e-5).
Z_TOLERANCE = 4.0


def format_share(value: float) -> str:
    """A share as a percentage with one decimal.

    Examples
    --------
    >>> format_share(0.5)
    '50.0%'
    """
    return f"{100.0 * value:.1f}%"


def accuracy_report(result: Any) -> dict[str, Any]:
    """Observed error against the truth next to the theoretical accuracy, by level and table.

    Parameters
    ----------
    result : SafeTabResult
        From :func:`postproc.apps.safetab.safetab` (holds the releases, their truth and the plans).

    Returns
    -------
    dict
        ``{"confidential": True, "note", "nominal_coverage": 0.95, "z_tolerance",
        "levels": {level: {"stability_declared", "stability_observed", "groups",
        "released_counts", "choices", "choice_agreement", "tables": {table: {"groups",
        "counts", "moe", "expected_within_moe", "within_moe", "mae", "expected_mae", "rmse",
        "noise_sd"}}}}, "overall": {"counts", "expected_within_moe", "within_moe", "z",
        "consistent", "mae"}}``. JSON-ready.

    Examples
    --------
    >>> from postproc.apps.safetab import safetab
    >>> from postproc.apps.safetab.config import Iteration, Level, SafeTabConfig
    >>> from hierarchy.synth.detailed1940 import synthesize_detailed_1940
    >>> config = SafeTabConfig(
    ...     (Iteration("1", "Total", "all"),),
    ...     (Level("state", "state", ("1",), 1, None, 20, (100, 1000, 5000)),),
    ...     randomness_mode="simulation", seed=1, synthetic=(20_000, 1))
    >>> result = safetab(synthesize_detailed_1940(20_000, seed=1).persons, config)
    >>> report = accuracy_report(result)
    >>> report["levels"]["state"]["groups"], report["levels"]["state"]["tables"]["total"]["moe"]
    (49, 20)
    """
    levels = {}
    expected_sum = variance_sum = within_sum = abs_sum = 0.0
    n_all = 0
    for name, release in result.releases.items():
        plan = result.plans[name]
        error = release.count - release.truth
        within = np.abs(error) <= release.moe
        tables = {}
        group_choice = np.bincount(release.choice.ravel(), minlength=len(TABLE_TYPES))
        for k, table in enumerate(TABLE_TYPES):
            rows = release.table == k
            if not rows.any():
                continue
            noise = plan.noise["total_only" if table == "total_only" else "step2"]
            e = error[rows]
            tables[table] = {
                "groups": int(group_choice[k]), "counts": int(rows.sum()), "moe": noise.moe,
                "expected_within_moe": noise.coverage,
                "within_moe": float(within[rows].mean()),
                "mae": float(np.abs(e).mean()), "expected_mae": noise.mean_abs,
                "rmse": float(math.sqrt(np.mean(e.astype(float) ** 2))),
                "noise_sd": math.sqrt(noise.variance)}
        adaptive = release.choice.ravel() > 0
        theta = plan.iteration_thresholds()[np.flatnonzero(adaptive) % len(release.iterations)]
        truth_choice = choose_tables(release.truth_totals.ravel()[adaptive], theta) + 1
        agreement = (float(np.mean(truth_choice == release.choice.ravel()[adaptive]))
                     if adaptive.any() else None)
        levels[name] = {
            "stability_declared": plan.level.stability,
            "stability_observed": result.observed_stability[name],
            "groups": int(release.choice.size), "released_counts": release.rows,
            "choices": release.choice_counts(), "choice_agreement": agreement,
            "tables": tables}
        expected_sum += float(release.coverage.sum())
        variance_sum += float(np.sum(release.coverage * (1.0 - release.coverage)))
        within_sum += float(within.sum())
        abs_sum += float(np.abs(error).sum())
        n_all += release.rows
    if n_all:
        expected = expected_sum / n_all
        observed = within_sum / n_all
        z = (within_sum - expected_sum) / math.sqrt(variance_sum) if variance_sum > 0 else 0.0
        overall = {"counts": n_all, "expected_within_moe": expected, "within_moe": observed,
                   "z": z, "consistent": bool(abs(z) <= Z_TOLERANCE), "mae": abs_sum / n_all}
    else:
        overall = {"counts": 0, "expected_within_moe": None, "within_moe": None, "z": None,
                   "consistent": None, "mae": None}
    return {"confidential": True,
            "note": "computed from the confidential data: a diagnostic, not a DP output; "
                    "do not publish",
            "nominal_coverage": 0.95, "z_tolerance": Z_TOLERANCE,
            "levels": levels, "overall": overall}


def format_report(report: dict[str, Any]) -> str:
    """The accuracy report as a text table.

    Parameters
    ----------
    report : dict
        From :func:`accuracy_report`.

    Returns
    -------
    str

    Examples
    --------
    >>> from hierarchy.synth.detailed1940 import synthesize_detailed_1940
    >>> from postproc.apps.safetab import SafeTabConfig, Iteration, Level, safetab
    >>> config = SafeTabConfig((Iteration("1", "Total", "all"),),
    ...                        (Level("state", "state", ("1",), 1, None, 10, (100, 1000, 10000)),),
    ...                        randomness_mode="simulation", seed=4, synthetic=(20_000, 1))
    >>> result = safetab(synthesize_detailed_1940(20_000, seed=1).persons, config)
    >>> print(format_report(accuracy_report(result)))
    Accuracy against the truth (CONFIDENTIAL diagnostic, not a DP output)
    MOE: 95% margin of error of the noise; P(|e|<=MOE): its exact coverage; within: observed share
    of counts within +-MOE
    <BLANKLINE>
    level      table        groups    counts   MOE P(|e|<=MOE)  within     MAE    E|e|    RMSE
                                                                                                  sd
    --------------------------------------------------------------------------------------------------
    state      total            11        11    10       96.1%  100.0%    3.55    4.06    4.52
                                                                                                5.10
    state      sex_age4         33       264    10       96.1%   96.2%    4.13    4.06    5.13
                                                                                                5.10
    state      sex_age9          5        90    10       96.1%   97.8%    4.21    4.06    5.26
                                                                                                5.10
    --------------------------------------------------------------------------------------------------
    all 365 released counts: 96.7% within +-MOE (expected 96.1% from the noise law, nominal 95%; z =
    +0.63, consistent at |z| <= 4); mean absolute error 4.13
    state: the noisy thresholding chose the table the true total would have chosen for 98.0% of
    adaptive groups; stability declared 1, observed 1
    """
    header = (f"{'level':<10} {'table':<11} {'groups':>7} {'counts':>9} {'MOE':>5} "
              f"{'P(|e|<=MOE)':>11} {'within':>7} {'MAE':>7} {'E|e|':>7} {'RMSE':>7} "
              f"{'sd':>7}")
    lines = ["Accuracy against the truth (CONFIDENTIAL diagnostic, not a DP output)",
             "MOE: 95% margin of error of the noise; P(|e|<=MOE): its exact coverage; within: "
             "observed share of counts within +-MOE", "", header, "-" * len(header)]
    for level, entry in report["levels"].items():
        for table, t in entry["tables"].items():
            lines.append(
                f"{level:<10} {table:<11} {t['groups']:>7,} {t['counts']:>9,} {t['moe']:>5} "
                f"{format_share(t['expected_within_moe']):>11} {format_share(t['within_moe']):>7}"
                f" {t['mae']:>7.2f} {t['expected_mae']:>7.2f} {t['rmse']:>7.2f} "
                f"{t['noise_sd']:>7.2f}")
    lines.append("-" * len(header))
    o = report["overall"]
    if o["counts"]:
        verdict = "consistent" if o["consistent"] else "NOT consistent"
        lines.append(f"all {o['counts']:,} released counts: {format_share(o['within_moe'])} "
                     f"within +-MOE (expected {format_share(o['expected_within_moe'])} from the "
                     f"noise law, nominal 95%; z = {o['z']:+.2f}, {verdict} at |z| <= "
                     f"{report['z_tolerance']:g}); mean absolute error {o['mae']:.2f}")
    for level, entry in report["levels"].items():
        agreement = entry["choice_agreement"]
        if agreement is not None:
            lines.append(f"{level}: the noisy thresholding chose the table the true total would "
                         f"have chosen for {format_share(agreement)} of adaptive groups; "
                         f"stability declared {entry['stability_declared']}, observed "
                         f"{entry['stability_observed']}")
    return "\n".join(lines)


def format_accounting(accounting: dict[str, Any], plans: dict[str, Any]) -> str:
    """The privacy accounting of a run as a text table.

    Parameters
    ----------
    accounting : dict
        ``SafeTabAccounting.to_dict()``.
    plans : dict
        Level name to ``LevelPlan.to_dict()``.

    Returns
    -------
    str

    Examples
    --------
    No data needed: the accounting follows from the plan (geometric noise, ε = 1/2 per level).
    By default it is SafeTab's full algorithm's, and says so:

    >>> from postproc.apps.safetab import Level, account_safetab, plan_level
    >>> plans = {name: plan_level(Level(name, name, ("1",), 2, "1/2", None, (10, 100, 1000)),
    ...                           mechanism="geometric", gamma="0.1")
    ...          for name in ("state", "county")}
    >>> accounting = account_safetab({n: p.budget for n, p in plans.items()},
    ...                              kinds={n: p.kinds for n, p in plans.items()})
    >>> print(format_accounting(accounting.to_dict(), {n: p.to_dict() for n, p in plans.items()}))
    Privacy accounting: geometric noise (pure), neighbours add or remove one record (every count has
    sensitivity 1), delta = 1e-10
    Accounted as SafeTab's full algorithm: every level is charged as if any of its groups could be a
    TotalOnly group releasing one count at the whole group budget B/s ([accounting] algorithm =
    "as_released" charges only the kinds of group each level released)
    <BLANKLINE>
    level        s epsilon level epsilon group MOE step2 MOE total-only  eps RDP  eps zCDP
    --------------------------------------------------------------------------------------
    state        2           0.5          0.25        12             11   0.5000    2.2490
    county       2           0.5          0.25        12             11   0.5000    2.2490
    --------------------------------------------------------------------------------------
    total                      1
    <BLANKLINE>
    total privacy loss (delta = 1e-10):
      pure DP                         epsilon = 1.0000
      RDP -> (eps, delta)             epsilon = 1.0000
      zCDP -> (eps, delta), analytic  epsilon = 3.5181   (rho = 0.125)
      zCDP -> (eps, delta), numeric   epsilon = 3.2436
    """
    unit = notion(accounting["notion"], error=PostprocError).parameter_name
    header = (f"{'level':<10} {'s':>3} {unit + ' level':>13} {unit + ' group':>13} "
              f"{'MOE step2':>9} {'MOE total-only':>14} {'eps RDP':>8} {'eps zCDP':>9}")
    lines = [f"Privacy accounting: {accounting['mechanism']} noise ({accounting['notion']}), "
             f"neighbours {accounting['neighbours']}, delta = {accounting['delta']:g}"]
    algorithm = accounting.get("algorithm", {}).get("name")
    if algorithm in _ALGORITHM_LINES:
        lines.append(textwrap.fill(_ALGORITHM_LINES[algorithm], width=len(header)))
    lines += ["", header, "-" * len(header)]
    for level, entry in accounting["levels"].items():
        budget = entry["budget"]
        noise = plans[level]["noise"]
        lines.append(
            f"{level:<10} {budget['stability']:>3} {_budget(budget['total']):>13.6g} "
            f"{_budget(budget['group']):>13.6g} {noise['step2']['moe']:>9} "
            f"{noise['total_only']['moe']:>14} {entry['loss']['rdp_epsilon']:>8.4f} "
            f"{entry['loss']['zcdp_epsilon_numeric']:>9.4f}")
    lines.append("-" * len(header))
    total = accounting["total"]
    loss = total["loss"]
    lines.append(f"{'total':<10} {'':>3} {_budget(total['budget']):>13.6g}")
    lines += ["", f"total privacy loss (delta = {accounting['delta']:g}):"]
    if loss["pure_epsilon"] is not None:
        lines.append(f"  pure DP                         epsilon = {loss['pure_epsilon']:.4f}")
    lines += [f"  RDP -> (eps, delta)             epsilon = {loss['rdp_epsilon']:.4f}",
              f"  zCDP -> (eps, delta), analytic  epsilon = {loss['zcdp_epsilon_analytic']:.4f}"
              f"   (rho = {loss['rho']:.6g})",
              f"  zCDP -> (eps, delta), numeric   epsilon = {loss['zcdp_epsilon_numeric']:.4f}"]
    return "\n".join(lines)


#: One sentence per accounting algorithm for the printed accounting (the manifest has the whole
#: statement, ``accounting.algorithm.statement``).
_ALGORITHM_LINES = {
    "full": "Accounted as SafeTab's full algorithm: every level is charged as if any of its "
            "groups could be a TotalOnly group releasing one count at the whole group budget B/s "
            "([accounting] algorithm = \"as_released\" charges only the kinds of group each "
            "level released)",
    "as_released": "Accounted as released: every level is charged for the kinds of group it "
                   "released, not as SafeTab's full algorithm ([accounting] algorithm = "
                   "\"full\", the default)",
}


def format_choices(choices: dict[str, dict[str, int]]) -> str:
    """How many groups of each level released each table type, as a text table.

    Parameters
    ----------
    choices : dict
        Level name to ``{table type: groups}``.

    Returns
    -------
    str

    Examples
    --------
    >>> print(format_choices({"state": {"total_only": 0, "total": 3, "sex_age4": 1,
    ...                                 "sex_age9": 0, "sex_age23": 2}}))
    Adaptive choices (groups per released table)
    level      total_only      total   sex_age4   sex_age9  sex_age23
    state               0          3          1          0          2
    """
    lines = ["Adaptive choices (groups per released table)",
             f"{'level':<10}" + "".join(f" {t:>10}" for t in TABLE_TYPES)]
    for level, counts in choices.items():
        lines.append(f"{level:<10}" + "".join(f" {counts.get(t, 0):>10,}" for t in TABLE_TYPES))
    return "\n".join(lines)


def _budget(text: str) -> float:
    """A budget written exactly in a report dict (``'9/100'``) as a float for the table."""
    return float(as_fraction(text, what="a budget of the accounting report", error=PostprocError))
