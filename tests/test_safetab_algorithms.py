"""SafeTab's two algorithms, accounted side by side (``postproc account moe``, docs/safetab.md).

With the SafeTab paper's settings (MOEs 6 6 11 11 50 50 50, s = 9, γ = 0.1, δ = 1e-10), RDP →
(ε, δ) with geometric noise is 12.93 for the two-step groups only (the default accounting), 14.19
for the full algorithm (TotalOnly groups at the full group budget too), and 13.57 for the full
algorithm by the paper's Corollary 1, which understates the geometric mechanism's divergence. Each
is checked against a second computation: ``postproc safetab``'s own accounting of the same levels,
or a curve built here from :func:`rdp_geometric` / the closed form written out below.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from hierarchy.accounting import (
    RDPCurve,
    account_moe,
    calibrate_geometric,
    rdp_geometric,
    rdp_geometric_safetab_paper,
    rdp_to_approx_dp,
    with_safetab_paper_tau,
)
from hierarchy.errors import AccountingError
from postproc.apps.safetab import LevelBudget, account_safetab
from postproc.cli import main

MOES = [6, 6, 11, 11, 50, 50, 50]
S, GAMMA, DELTA = 9, 0.1, 1e-10
REFERENCE = ["account", "moe", "--moe", *map(str, MOES), "--stability", "9", "--gamma", "0.1",
             "--delta", "1e-10"]


@pytest.fixture(scope="module")
def paper():
    return account_moe(MOES, stability=S, gamma="0.1", delta=DELTA)


def corollary_1(alpha: float, epsilon: float) -> float:
    """The closed form as printed, evaluated directly (moderate α·ε only)."""
    value = ((math.exp(epsilon) - 1) / (math.exp(epsilon) + 1)
             * (2 * alpha * math.exp((alpha - 1) * epsilon)
                + 2 * (alpha - 1) * math.exp(-alpha * epsilon)) / (epsilon * (2 * alpha - 1)))
    return math.log(value) / (alpha - 1)


def test_the_three_totals_of_the_papers_settings(paper):
    two_step, full = paper.algorithms["two_step_only"], paper.algorithms["full_algorithm"]
    assert round(paper.rdp_epsilon, 2) == 12.93                  # the default accounting
    assert two_step["rdp_epsilon"] == paper.rdp_epsilon
    assert round(full["rdp_epsilon"], 2) == 14.19
    assert round(full["rdp_epsilon_corollary_1"], 2) == 13.57
    # one count at the whole group budget costs more than the same budget split in two; the
    # closed form understates either; all are below the pure-DP sum
    assert (two_step["rdp_epsilon_corollary_1"] < two_step["rdp_epsilon"]
            < full["rdp_epsilon_corollary_1"] < full["rdp_epsilon"] < paper.pure_dp_epsilon)
    # none is the paper's 13.2 at the paper's precision
    for value in (two_step["rdp_epsilon"], full["rdp_epsilon"], full["rdp_epsilon_corollary_1"]):
        assert round(value, 1) != 13.2
    # pure DP and zCDP do not tell the two algorithms apart
    assert paper.algorithms["pure_dp_epsilon"] == pytest.approx(paper.pure_dp_epsilon, rel=1e-12)
    assert paper.algorithms["rho"] == pytest.approx(paper.rho, rel=1e-12)


def test_the_totals_are_postproc_safetabs_accounting_of_the_same_levels(paper):
    """``postproc safetab`` accounts a level with both kinds of group at the full group budget
    B/s (the full algorithm) and, as released, one with two-step groups only; its totals are the
    same. By default it accounts every level as the full algorithm, whatever it released."""
    budgets = {f"L{i}": LevelBudget.from_moe(m, notion="pure", stability=S, gamma="0.1")
               for i, m in enumerate(MOES)}
    for kinds, key in ((("adaptive",), "two_step_only"),
                       (("adaptive", "total_only"), "full_algorithm")):
        safetab = account_safetab(budgets, kinds={name: kinds for name in budgets},
                                  delta=DELTA, algorithm="as_released")
        assert safetab.total.rdp_epsilon == pytest.approx(
            paper.algorithms[key]["rdp_epsilon"], rel=1e-6)
    default = account_safetab(budgets, kinds={name: ("adaptive",) for name in budgets},
                              delta=DELTA)
    assert default.total.rdp_epsilon == pytest.approx(
        paper.algorithms["full_algorithm"]["rdp_epsilon"], rel=1e-6)
    assert round(default.total.rdp_epsilon, 2) == 14.19


def test_the_full_algorithm_is_s_times_one_count_at_the_group_budget(paper):
    groups = [calibrate_geometric(m) / (1 - GAMMA) for m in MOES]
    curve = RDPCurve(tuple(term for e in groups for term in (S * RDPCurve.geometric(e)).terms))
    assert rdp_to_approx_dp(curve, DELTA) == pytest.approx(
        paper.algorithms["full_algorithm"]["rdp_epsilon"], rel=1e-9)

    def by_hand(alpha):
        a = np.asarray(alpha, dtype=float)
        return sum(S * np.vectorize(corollary_1)(a, e) for e in groups)

    alphas = np.linspace(1.5, 60.0, 400)          # where the printed form does not overflow
    np.testing.assert_allclose(with_safetab_paper_tau(curve)(alphas), by_hand(alphas),
                               rtol=1e-10)


@pytest.mark.parametrize("epsilon", [0.05, 0.43, 1.0, 3.0])
def test_corollary_1_is_the_printed_form_and_understates_the_divergence(epsilon):
    alphas = np.array([1.5, 2.0, 4.0, 10.0, 40.0])
    paper = rdp_geometric_safetab_paper(alphas, epsilon)
    np.testing.assert_allclose(paper, [corollary_1(a, epsilon) for a in alphas], rtol=1e-10)
    assert (paper < rdp_geometric(alphas, epsilon)).all()
    assert float(rdp_geometric_safetab_paper(np.inf, epsilon)) == epsilon
    assert float(rdp_geometric_safetab_paper(1.0 + 1e-6, epsilon)) < 0
    assert float(rdp_geometric_safetab_paper(2.0, 1.0)) == pytest.approx(0.5403, abs=1e-4)


def test_full_as_a_total_only_moe_is_the_full_algorithm(paper):
    full = account_moe(MOES, stability=S, gamma="0.1", delta=DELTA,
                       total_only_moes=["full"] * len(MOES))
    assert full.rdp_epsilon == pytest.approx(paper.algorithms["full_algorithm"]["rdp_epsilon"],
                                             rel=1e-9)
    assert full.pure_dp_epsilon == pytest.approx(paper.pure_dp_epsilon, rel=1e-12)
    assert full.rho == pytest.approx(paper.rho, rel=1e-12)
    count = full.levels[0].total_only
    assert count.moe is None and count.epsilon == pytest.approx(
        calibrate_geometric(6) / (1 - GAMMA))
    assert full.levels[4].total_only.to_dict()["moe_geometric"] == 45
    # the side-by-side rows depend on the two-step MOEs only, not on the TotalOnly groups given
    assert full.algorithms == paper.algorithms
    with pytest.raises(AccountingError, match="level 2: TotalOnly groups at the full group"):
        account_moe([6, None], stability=S, total_only_moes=[None, "full"])


def test_cli_shows_both_algorithms_by_default_and_the_full_one_on_request(capsys):
    assert main(REFERENCE) == 0
    out = capsys.readouterr().out
    assert "RDP -> (eps, delta) (geometric)      epsilon = 12.9279" in out
    rows = {line.split("  ")[1].strip(): line.split()[-2:] for line in out.splitlines()
            if line.startswith("  two-step groups only") or line.startswith("  full algorithm")}
    assert rows == {"two-step groups only": ["12.9279", "12.3854"],
                    "full algorithm: + TotalOnly groups at the full group budget":
                        ["14.1944", "13.5742"]}
    assert main(REFERENCE + ["--full-algorithm"]) == 0
    out = capsys.readouterr().out
    assert "RDP -> (eps, delta) (geometric)      epsilon = 14.1944" in out
    assert "5/5" in out and "45/47" in out
    assert main(REFERENCE + ["--total-only-moe"] + ["full"] * 7 + ["--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert round(data["total"]["rdp_epsilon"], 4) == 14.1944
    assert set(data["algorithms"]) == {"two_step_only", "full_algorithm", "pure_dp_epsilon",
                                       "rho", "moes"}
    assert main(REFERENCE + ["--full-algorithm", "--total-only-moe"] + ["5"] * 7) == 1
    assert "give it or --total-only-moe, not both" in capsys.readouterr().err
