"""``account moe``: the exact coverage of its "95 %" MOEs, the TotalOnly term of the SafeTab
paper's eq. 39, and the assumption it states — each against an independent computation."""

from __future__ import annotations

import json
import math
import re
from fractions import Fraction

import numpy as np
import pytest
from scipy.special import erf

import hierarchy.accounting.moe as moe_module
from hierarchy.accounting import (
    NOMINAL_COVERAGE,
    LevelCurve,
    RDPCurve,
    account_moe,
    calibrate_discrete_gaussian,
    calibrate_geometric,
    compose_group_kinds,
    coverage_discrete_gaussian,
    coverage_geometric,
    rdp_geometric,
    rdp_to_approx_dp,
    zcdp_to_approx_dp_analytic,
    zcdp_to_approx_dp_numeric,
)
from hierarchy.errors import AccountingError
from hierarchy.mechanisms import discrete_gaussian_logpmf, two_sided_geometric_logpmf
from postproc.apps.safetab import LevelBudget, account_safetab
from postproc.cli import main

MOES = [6, 6, 11, 11, 50, 50, 50]
REFERENCE = ["account", "moe", "--moe", "6", "6", "11", "11", "50", "50", "50",
             "--stability", "9", "--gamma", "0.1", "--delta", "1e-10"]
S, GAMMA, DELTA = 9, 0.1, 1e-10


def run(capsys, argv):
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def flat(text: str) -> str:
    """Whitespace (line wrapping) collapsed to single spaces."""
    return " ".join(text.split())


def summed_coverage(logpmf, moe: int, reach: int) -> float:
    """P[|X| ≤ moe] by adding the pmf (hierarchy.mechanisms, another implementation) term by
    term over |k| ≤ moe; the pmf's mass beyond ``reach`` must be negligible (checked)."""
    k = np.arange(-reach, reach + 1)
    pmf = np.exp(logpmf(k))
    assert abs(math.fsum(pmf) - 1.0) < 1e-12          # the support summed is all that matters
    return math.fsum(pmf[np.abs(k) <= moe])


# ------------------------------------------------------------------------------ coverage

@pytest.mark.parametrize("m", list(range(0, 61)) + [100, 500])
def test_geometric_coverage_equals_the_summed_pmf(m):
    eps = calibrate_geometric(m)
    reach = int(60 / eps) + 10                         # tail below e^{-60}
    expected = summed_coverage(lambda k: two_sided_geometric_logpmf(k, eps), m, reach)
    assert coverage_geometric(eps) == pytest.approx(expected, abs=1e-13)
    assert coverage_geometric(eps, moe=m) == pytest.approx(expected, abs=1e-13)


def test_geometric_coverage_range_is_90_5_to_94_9_percent():
    """docs/accounting.md: at the calibrated ε the geometric's ±MOE covers 90.5 % (MOE 0) to
    94.9 % (MOE 50), rising with the MOE and never reaching 95 %."""
    values = [coverage_geometric(calibrate_geometric(m), moe=m) for m in range(0, 200)]
    assert round(100 * values[0], 1) == 90.5 and round(100 * values[50], 1) == 94.9
    assert all(a < b for a, b in zip(values, values[1:]))
    assert values[-1] < NOMINAL_COVERAGE


def test_geometric_coverage_with_sensitivity_and_another_margin():
    eps, m = 0.8, 3                                    # z = ε/Δ = 0.4
    expected = summed_coverage(lambda k: two_sided_geometric_logpmf(k, 0.4), m, 200)
    assert coverage_geometric(eps, moe=m, sensitivity=2) == pytest.approx(expected, abs=1e-13)


@pytest.mark.parametrize("m", list(range(1, 61)) + [100, 1000, 4800])
def test_discrete_gaussian_coverage_equals_the_summed_pmf(m):
    rho = calibrate_discrete_gaussian(m)
    sigma2 = 1 / (2 * rho)
    reach = int(40 * math.sqrt(sigma2)) + 10
    expected = summed_coverage(lambda k: discrete_gaussian_logpmf(k, sigma2), m, reach)
    assert coverage_discrete_gaussian(rho, moe=m) == pytest.approx(expected, abs=1e-13)


def test_discrete_gaussian_coverage_beyond_direct_summation(monkeypatch):
    """The Euler–Maclaurin branch (used for σ > 10⁵) agrees with the summed pmf when forced on
    at small σ. Its error falls like σ⁻⁵: 5e-11 at σ = 10 (MOE 20), 1e-13 at σ = 30, rounding
    from σ = 150 on — and beyond 10⁵, where it is used, below 1e-25."""
    monkeypatch.setattr(moe_module, "_DIRECT_SUM_MAX_SIGMA", 5.0)
    for m, tolerance in ((20, 1e-10), (60, 3e-13), (300, 1e-14), (2000, 1e-14), (10000, 1e-14)):
        rho = calibrate_discrete_gaussian(m)
        sigma2 = 1 / (2 * rho)
        reach = int(40 * math.sqrt(sigma2)) + 10
        expected = summed_coverage(lambda k: discrete_gaussian_logpmf(k, sigma2), m, reach)
        assert coverage_discrete_gaussian(rho, moe=m) == pytest.approx(expected, abs=tolerance)


def test_discrete_gaussian_coverage_of_a_huge_moe_is_the_continuous_limit():
    """MOE 10¹²: nothing of size σ is allocated, and the coverage is the Gaussian's
    P[|Z| ≤ sqrt(3.84)] (the lattice changes it by O(1/σ))."""
    m = 10 ** 12
    value = coverage_discrete_gaussian(calibrate_discrete_gaussian(m), moe=m)
    assert value == pytest.approx(float(erf(math.sqrt(1.92))), abs=1e-9)


@pytest.mark.parametrize("call, message", [
    (lambda: coverage_geometric(0.0), "epsilon must be > 0"),
    (lambda: coverage_geometric(1.0, moe=-1), "integer >= 0"),
    (lambda: coverage_geometric(1.0, moe=2.5), "integer >= 0"),
    (lambda: coverage_discrete_gaussian(-1.0), "rho"),
    (lambda: coverage_discrete_gaussian(1.0, moe=True), "integer >= 0"),
])
def test_coverage_rejects_bad_input(call, message):
    with pytest.raises(AccountingError, match=message):
        call()


def test_every_level_reports_its_coverage_in_json_and_text(capsys):
    code, out, _ = run(capsys, REFERENCE + ["--json"])
    assert code == 0
    for level in json.loads(out)["levels"]:
        m = level["moe"]
        assert level["coverage"]["nominal"] == 0.95
        assert level["coverage"]["geometric"] == pytest.approx(
            summed_coverage(lambda k: two_sided_geometric_logpmf(k, calibrate_geometric(m)), m,
                            int(60 / calibrate_geometric(m)) + 10), abs=1e-13)
        sigma2 = 1 / (2 * calibrate_discrete_gaussian(m))
        assert level["coverage"]["discrete_gaussian"] == pytest.approx(
            summed_coverage(lambda k: discrete_gaussian_logpmf(k, sigma2), m,
                            int(40 * math.sqrt(sigma2)) + 10), abs=1e-13)
    code, out, _ = run(capsys, REFERENCE)
    rows = {int(r.split()[0]): r.split() for r in out.splitlines()
            if re.match(r"^\s+\d+\s+\d+\s+\d", r)}
    assert len(rows) == 7
    for i, m in enumerate(MOES, start=1):
        cover_geom, cover_dg, nominal = rows[i][-3:]
        assert cover_geom == f"{100 * coverage_geometric(calibrate_geometric(m)):.2f}%"
        rho = calibrate_discrete_gaussian(m)
        assert cover_dg == f"{100 * coverage_discrete_gaussian(rho, moe=m):.2f}%"
        assert nominal == "95%"
    assert "the geometric's covers 90.5% (MOE 0) to just under 95%" in flat(out)


# ------------------------------------------------------------------------------ assumption

def test_default_states_that_it_leaves_out_the_total_only_term(capsys):
    code, out, _ = run(capsys, REFERENCE + ["--json"])
    assumption = json.loads(out)["assumption"]
    assert assumption["terms_left_out"] == ["TotalOnly groups: one count each"]
    assert assumption["terms_included"] == ["two-step groups: Step-1 noisy total",
                                            "two-step groups: Step-2 released counts"]
    assert assumption["question"] == "the loss of the two-step (total then detailed) groups only"
    assert assumption["narrower_than_paper_table_2"] is True
    statement = assumption["statement"]
    for phrase in ("eq. 39", "leave out the TotalOnly term",
                   "'the loss of the two-step (total then detailed) groups only'",
                   "a narrower question than the paper's Table 2"):
        assert phrase in statement
    code, out, _ = run(capsys, REFERENCE)
    text = flat(out)
    assert flat(statement.replace("Give TotalOnly MOEs", "Give TotalOnly MOEs "
                                  "(--total-only-moe, --total-only-levels)")) in text
    assert text.index("Assumption:") < text.index("level MOE eps step2")      # before the table


def test_with_total_only_the_assumption_names_both_terms(capsys):
    code, out, _ = run(capsys, REFERENCE + ["--total-only-moe", "5", "5", "-", "-", "-", "-",
                                            "-", "--json"])
    assumption = json.loads(out)["assumption"]
    assert assumption["terms_left_out"] == []
    assert "TotalOnly groups: one count each" in assumption["terms_included"]
    assert assumption["narrower_than_paper_table_2"] is False
    assert "both terms" in assumption["statement"] and "at levels 1, 2" in assumption["statement"]
    assert "s times its costlier kind" in assumption["within_level"]
    code, out, _ = run(capsys, REFERENCE + ["--total-only-moe", "5", "5", "-", "-", "-", "-",
                                            "-"])
    assert flat(assumption["statement"]) in flat(out)


def test_total_only_alone_is_also_narrower():
    acc = account_moe([None], stability=2, total_only_moes=[8])
    assert acc.assumption["terms_left_out"] == ["two-step groups: Step-1 noisy total",
                                                "two-step groups: Step-2 released counts"]
    assert acc.assumption["narrower_than_paper_table_2"] is True


# ------------------------------------------------------------------------------ TotalOnly term

def two_step_tau(alpha, m):
    e2 = math.log(20) / (m + 1)
    return rdp_geometric(alpha, GAMMA * e2 / (1 - GAMMA)) + rdp_geometric(alpha, e2)


def test_total_only_levels_add_exactly_their_composed_loss(capsys):
    """Two further levels of TotalOnly groups (MOE 20 and 50): every total grows by exactly
    s · Σ (their count's loss), composed sequentially, computed here from the formulas."""
    extra = [20, 50]
    code, out, _ = run(capsys, REFERENCE + ["--total-only-levels", "20", "50", "--json"])
    assert code == 0
    data = json.loads(out)
    base = account_moe(MOES, stability=S, gamma="0.1", delta=DELTA)
    eps_t = [math.log(20) / (t + 1) for t in extra]
    rho_t = [1.92 / t ** 2 for t in extra]
    total = data["total"]
    assert total["pure_dp_epsilon"] - base.pure_dp_epsilon == pytest.approx(S * sum(eps_t),
                                                                            rel=1e-12)
    rho = base.rho + S * sum(rho_t)
    assert total["zcdp_epsilon_analytic"] == pytest.approx(
        rho + math.sqrt(4 * rho * math.log(1 / DELTA)), rel=1e-12)
    assert total["zcdp_epsilon_numeric"] == pytest.approx(zcdp_to_approx_dp_numeric(rho, DELTA),
                                                          rel=1e-9)

    def tau(alpha):
        return sum(S * two_step_tau(alpha, m) for m in MOES) \
            + sum(S * rdp_geometric(alpha, e) for e in eps_t)

    assert total["rdp_epsilon"] == pytest.approx(rdp_to_approx_dp(tau, DELTA), rel=1e-9)
    assert total["rdp_epsilon"] > base.rdp_epsilon
    new = data["levels"][7:]
    assert [level["moe"] for level in new] == [None, None]
    assert [level["total_only"]["moe"] for level in new] == extra
    assert [level["epsilon_total"] for level in new] == pytest.approx([S * e for e in eps_t])
    assert [level["rho_total"] for level in new] == pytest.approx([S * r for r in rho_t])


def test_mixed_levels_cost_s_times_the_costlier_kind():
    """TotalOnly groups inside levels 1, 2 (MOE 5: costlier than the two-step groups) and 5–7
    (MOE 60: cheaper in ε): per level s·max, computed here independently."""
    total_only = [5, 5, None, None, 60, 60, 60]
    acc = account_moe(MOES, stability=S, gamma="0.1", delta=DELTA, total_only_moes=total_only)
    eps_pure, rho, parts = 0.0, 0.0, []
    for m, t in zip(MOES, total_only):
        eps_g = math.log(20) / (m + 1) / (1 - GAMMA)
        rho_g = 1.92 / m ** 2 / (1 - GAMMA)
        if t is None:
            eps_pure += S * eps_g
            rho += S * rho_g
            parts.append(lambda a, m=m: S * two_step_tau(a, m))
        else:
            eps_t, rho_t = math.log(20) / (t + 1), 1.92 / t ** 2
            eps_pure += S * max(eps_g, eps_t)
            rho += S * max(rho_g, rho_t)
            parts.append(lambda a, m=m, e=eps_t: S * np.maximum(two_step_tau(a, m),
                                                                rdp_geometric(a, e)))
    assert acc.pure_dp_epsilon == pytest.approx(eps_pure, rel=1e-12)
    assert acc.rho == pytest.approx(rho, rel=1e-12)
    assert acc.zcdp_epsilon_analytic == pytest.approx(zcdp_to_approx_dp_analytic(rho, DELTA),
                                                      rel=1e-12)
    assert acc.rdp_epsilon == pytest.approx(
        rdp_to_approx_dp(lambda a: sum(p(a) for p in parts), DELTA), rel=1e-9)
    # MOE 5 is costlier than the level's two-step groups, MOE 60 cheaper (in pure ε)
    assert acc.levels[0].epsilon_total == pytest.approx(S * math.log(20) / 6)
    assert acc.levels[4].epsilon_total == pytest.approx(S * math.log(20) / 51 / 0.9)
    assert acc.levels[4].rho_total == pytest.approx(S * 1.92 / 50 ** 2 / 0.9)
    assert [level.kinds for level in acc.levels[:3]] == [("adaptive", "total_only")] * 2 \
        + [("adaptive",)]


def test_a_mixed_level_is_accounted_as_postproc_safetab_accounts_it():
    """MOE 9 with γ = 0.1 gives groups ε = ln 20/9, the budget of a TotalOnly count with MOE 8:
    then account moe's mixed level is safetab's level with both kinds (same group budget)."""
    acc = account_moe([9], stability=4, gamma="0.1", total_only_moes=[8])
    budget = LevelBudget.from_moe(9, notion="pure", stability=4, gamma="0.1")
    assert budget.total_only == Fraction(budget.total, 4)
    safetab = account_safetab({"L": budget}, kinds={"L": ("adaptive", "total_only")})
    assert acc.pure_dp_epsilon == pytest.approx(safetab.total.pure_epsilon, rel=1e-9)
    assert acc.rdp_epsilon == pytest.approx(safetab.total.rdp_epsilon, rel=1e-9)
    alone = account_moe([9], stability=4, gamma="0.1")
    assert acc.rdp_epsilon > alone.rdp_epsilon            # one count costs more than two halves


def test_default_numbers_are_unchanged(capsys):
    """The closing notes' figures, and every number of the default JSON as before the TotalOnly
    term and the coverage were added (to 1e-12: the RDP optimum's last bit has varied between
    runs, an order-of-summation effect, not a change of method)."""
    code, out, _ = run(capsys, REFERENCE + ["--json"])
    data = json.loads(out)
    assert data["total"] == pytest.approx({"pure_dp_epsilon": 15.31431764491886,
                                           "rdp_epsilon": 12.927857866697359,
                                           "zcdp_epsilon_analytic": 12.791050926340219,
                                           "zcdp_epsilon_numeric": 12.162909830555694},
                                          rel=1e-12)
    assert round(data["levels"][0]["epsilon_step2"], 6) == 0.427962
    assert [level["total_only"] for level in data["levels"]] == [None] * 7
    code, out, _ = run(capsys, REFERENCE)
    for line in ("pure DP (geometric)                  epsilon = 15.3143",
                 "RDP -> (eps, delta) (geometric)      epsilon = 12.9279",
                 "zCDP -> (eps, delta), analytic       epsilon = 12.7911",
                 "zCDP -> (eps, delta), numeric        epsilon = 12.1629"):
        assert line in out


@pytest.mark.parametrize("extra, message", [
    (["--total-only-moe", "5"], "--total-only-moe: give one value per --moe level (7)"),
    (["--total-only-moe"] + ["x"] * 7,
     "TotalOnly MOE of level 1 must be an integer >= 1, 'full' or '-'"),
    (["--total-only-moe", "-", "0"] + ["-"] * 5, "TotalOnly MOE of level 2 must be an integer"),
    (["--total-only-levels", "0"], "--total-only-levels: TotalOnly MOE of level 8 must be"),
])
def test_total_only_options_errors_name_the_option(capsys, extra, message):
    code, out, err = run(capsys, REFERENCE + extra)
    assert code == 1 and out == ""
    assert err.startswith("postproc account: error: --total-only") and message in err


@pytest.mark.parametrize("kwargs, message", [
    (dict(moes=[6, 6], total_only_moes=[5]), "one TotalOnly MOE per level"),
    (dict(moes=[6, None], total_only_moes=[5, None]), "level 2 has neither"),
    (dict(moes=[None]), "level 1 has neither"),
    (dict(moes=[6], total_only_moes=[0]), "TotalOnly MOE of level 1 must be an integer >= 1"),
])
def test_account_moe_total_only_validation(kwargs, message):
    with pytest.raises(AccountingError, match=message):
        account_moe(kwargs.pop("moes"), stability=S, **kwargs)


# ------------------------------------------------------------------------------ the shared helper

def test_compose_group_kinds_is_s_times_the_pointwise_maximum():
    two_step = RDPCurve.geometric(0.05) + RDPCurve.geometric(0.45)
    total_only = RDPCurve.geometric(0.47)
    level = compose_group_kinds([two_step, total_only], stability=3)
    alpha = np.array([1.001, 1.5, 2.0, 10.0, 1e4, np.inf])
    expected = 3 * np.maximum(two_step(alpha), total_only(alpha))
    assert np.array_equal(level(alpha), expected)
    # the kinds cross: TotalOnly (ε 0.47 < 0.5) is cheaper at large orders, dearer near α = 1
    assert total_only(1.001) > two_step(1.001) and total_only(np.inf) < two_step(np.inf)
    assert level.pure_epsilon == pytest.approx(1.5)
    assert level.zcdp_rho == pytest.approx(3 * max(0.05 ** 2 / 2 + 0.45 ** 2 / 2, 0.47 ** 2 / 2))
    one = compose_group_kinds([two_step], stability=3)
    assert np.allclose(one(alpha), (3 * two_step)(alpha), rtol=1e-15, atol=0)


@pytest.mark.parametrize("curves, stability, message", [
    ((), 2, "at least one kind"),
    ((0.5,), 2, "must be an RDPCurve"),
    ((RDPCurve.geometric(0.5),), 0, "stability must be a positive integer"),
    ((RDPCurve.geometric(0.5),), True, "stability must be a positive integer"),
])
def test_level_curve_rejects_invalid_construction(curves, stability, message):
    with pytest.raises(AccountingError, match=message):
        LevelCurve(curves, stability)
