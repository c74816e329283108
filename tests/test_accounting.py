"""Privacy accounting against exact answers: formulas at known points, limits, conversions,
composition, MOE calibration round trips, exact budget splits and the reports."""

from __future__ import annotations

import json
import math
from fractions import Fraction

import numpy as np
import pytest
from scipy.special import logsumexp

from hierarchy.accounting import (
    RDPCurve,
    account_levels,
    account_moe,
    allocate_budget,
    as_fraction,
    calibrate_discrete_gaussian,
    calibrate_geometric,
    compose,
    compose_parallel,
    moe_discrete_gaussian,
    moe_geometric,
    pure_to_zcdp,
    rdp_discrete_gaussian,
    rdp_gaussian,
    rdp_geometric,
    rdp_to_approx_dp,
    split_budget,
    zcdp_to_approx_dp_analytic,
    zcdp_to_approx_dp_numeric,
)
from hierarchy.errors import AccountingError

E2E_QUERIES = {"detailed": "0.1", "hhgq": "0.225", "va_hisp_race": "0.675"}
E2E_LEVELS = {lv: "1/4" for lv in ("nation", "state", "county", "ed")}


def brute_rdp_geometric(alpha: float, z: float, shift: np.ndarray | int) -> float:
    """Rényi divergence of the two-sided geometric (parameter z) and its shift, by summation."""
    shifts = np.atleast_1d(shift)
    k = np.arange(-20000, 20001)
    logc = math.log(math.tanh(z / 2.0))
    total = 0.0
    for d in shifts:
        lp = logc - z * np.abs(k)
        lq = logc - z * np.abs(k - d)
        total += logsumexp(alpha * lp + (1.0 - alpha) * lq) / (alpha - 1.0)
    return total


def safetab_printed_tau(alpha: float, eps: float) -> float:
    """The closed form as printed in the SafeTab paper (its Corollary 1)."""
    bracket = (2 * alpha / (eps * (2 * alpha - 1)) * math.exp((alpha - 1) * eps)
               + 2 * (alpha - 1) / (eps * (2 * alpha - 1)) * math.exp(-alpha * eps))
    return math.log((math.exp(eps) - 1) / (math.exp(eps) + 1) * bracket) / (alpha - 1)


def brute_conversion(tau, delta: float) -> float:
    """inf over a very fine grid of the RDP → (ε, δ) lemma."""
    a = 1.0 + np.logspace(-3, 5, 400001)
    L = math.log(1 / delta)
    return float(np.min(tau(a) + (L + (a - 1) * np.log(1 - 1 / a) - np.log(a)) / (a - 1)))


# ---------------------------------------------------------------------------- exact budgets


def test_as_fraction_reads_decimals_ratios_and_floats_exactly():
    assert as_fraction("0.225") == Fraction(9, 40)
    assert as_fraction(" 9/40 ") == Fraction(9, 40)
    assert as_fraction(0.675) == Fraction(27, 40)
    assert as_fraction(Fraction(1, 3)) == Fraction(1, 3)
    assert as_fraction(np.float64(0.1)) == Fraction(1, 10)


@pytest.mark.parametrize("bad", [-1, "-0.1", float("nan"), float("inf"), True, "abc", "1/0",
                                 None, [1]])
def test_as_fraction_rejects_bad_values(bad):
    with pytest.raises(AccountingError):
        as_fraction(bad)


def test_split_budget_e2e_fractions_sum_exactly_even_from_floats():
    # Read as the decimals the user typed, not as binary floats, so no drift.
    parts = split_budget(1, {"detailed": 0.1, "hhgq": 0.225, "va_hisp_race": 0.675})
    assert sum(parts.values()) == 1
    assert parts == {"detailed": Fraction(1, 10), "hhgq": Fraction(9, 40),
                     "va_hisp_race": Fraction(27, 40)}


@pytest.mark.parametrize("fractions, message", [
    ({"a": "0.5", "b": "0.4"}, "sum to exactly 1"),
    ({"a": "0.5", "b": "0.5000001"}, "sum to exactly 1"),
    ({"a": "1", "b": "0"}, "must be > 0"),
    ({"a": "1.5", "b": "-0.5"}, ">= 0"),
    ({}, "nothing to split"),
])
def test_split_budget_rejects_invalid_fractions(fractions, message):
    with pytest.raises(AccountingError, match=message):
        split_budget(1, fractions)


def test_split_budget_rejects_negative_total():
    with pytest.raises(AccountingError, match="total budget"):
        split_budget(-1, {"a": 1})


def test_allocate_budget_e2e():
    b = allocate_budget("1", levels=E2E_LEVELS, queries=E2E_QUERIES)
    assert list(b) == list(E2E_LEVELS)
    assert b["ed"] == {"detailed": Fraction(1, 40), "hhgq": Fraction(9, 160),
                       "va_hisp_race": Fraction(27, 160)}
    assert sum(sum(q.values()) for q in b.values()) == 1


def test_allocate_budget_per_level_queries_and_missing_level():
    queries = {"nation": {"total": 1}, "state": {"total": "1/2", "detailed": "1/2"}}
    b = allocate_budget(2, levels={"nation": "1/2", "state": "1/2"}, queries=queries)
    assert b == {"nation": {"total": 1}, "state": {"total": Fraction(1, 2),
                                                   "detailed": Fraction(1, 2)}}
    with pytest.raises(AccountingError, match="no query fractions for level 'county'"):
        allocate_budget(1, levels={"nation": "1/2", "county": "1/2"}, queries=queries)


# ---------------------------------------------------------------------------- mechanisms


@pytest.mark.parametrize("eps", [0.0, 0.3, 1.0, 4.0])
def test_pure_to_zcdp(eps):
    assert pure_to_zcdp(eps) == eps * eps / 2


@pytest.mark.parametrize("alpha", [1.01, 1.5, 2.0, 5.0, 40.0])
@pytest.mark.parametrize("eps", [0.05, 0.5, 1.0, 3.0])
def test_rdp_geometric_matches_summation_sensitivity_one(alpha, eps):
    assert rdp_geometric(alpha, eps) == pytest.approx(brute_rdp_geometric(alpha, eps, 1),
                                                      rel=1e-9, abs=1e-13)


@pytest.mark.parametrize("delta_q", [2, 3, 5])
@pytest.mark.parametrize("alpha", [1.5, 3.0, 20.0])
def test_rdp_geometric_matches_summation_larger_sensitivity(delta_q, alpha):
    eps = 1.2
    z = eps / delta_q
    single = brute_rdp_geometric(alpha, z, delta_q)
    # every way of spreading the change over cells costs no more than one cell moved by Δ
    spread = max(brute_rdp_geometric(alpha, z, np.array(p)) for p in _partitions(delta_q))
    assert single == pytest.approx(spread, rel=1e-12)
    assert rdp_geometric(alpha, eps, sensitivity=delta_q) == pytest.approx(single, rel=1e-9)


def _partitions(n: int, largest: int | None = None):
    largest = n if largest is None else largest
    if n == 0:
        yield []
        return
    for k in range(min(n, largest), 0, -1):
        for rest in _partitions(n - k, k):
            yield [k] + rest


def test_safetab_printed_formula_understates_the_divergence():
    """The SafeTab paper's printed τ is below the true Rényi divergence; we use the exact one."""
    for alpha in (1.5, 2.0, 5.0, 20.0):
        for eps in (0.1, 1.0, 2.0):
            assert safetab_printed_tau(alpha, eps) < brute_rdp_geometric(alpha, eps, 1)
    assert safetab_printed_tau(2.0, 1.0) == pytest.approx(0.5403, abs=1e-4)
    assert rdp_geometric(2.0, 1.0) == pytest.approx(0.7353, abs=1e-4)


@pytest.mark.parametrize("eps", [0.01, 0.2, 1.0, 5.0])
@pytest.mark.parametrize("delta_q", [1, 2])
def test_rdp_geometric_bounds_and_limits(eps, delta_q):
    alpha = 1.0 + np.logspace(-5, 6, 300)
    tau = rdp_geometric(alpha, eps, sensitivity=delta_q)
    assert np.all(tau <= eps * (1 + 1e-12))                  # ≤ pure ε
    assert np.all(tau <= alpha * eps * eps / 2 * (1 + 1e-9))  # ε-DP ⇒ ε²/2-zCDP
    assert np.all(np.diff(tau) >= -1e-12)                    # RDP is nondecreasing in α
    assert rdp_geometric(np.inf, eps, sensitivity=delta_q) == eps
    assert rdp_geometric(1e9, eps, sensitivity=delta_q) == pytest.approx(eps, rel=1e-7)
    if delta_q == 1:  # α → 1: the KL divergence ε tanh(ε/2)
        assert rdp_geometric(1 + 1e-7, eps) == pytest.approx(eps * math.tanh(eps / 2), rel=1e-5)


def test_rdp_geometric_zero_budget_and_validation():
    assert rdp_geometric(2.0, 0.0) == 0.0
    with pytest.raises(AccountingError, match="alpha must be > 1"):
        rdp_geometric(1.0, 1.0)
    with pytest.raises(AccountingError, match="positive integer"):
        rdp_geometric(2.0, 1.0, sensitivity=1.5)
    with pytest.raises(AccountingError, match="epsilon"):
        rdp_geometric(2.0, -1.0)


def test_gaussian_and_discrete_gaussian_rdp():
    assert rdp_gaussian(2.0, 1.0) == 1.0
    assert rdp_gaussian(4.0, 3.0, sensitivity=2.0) == pytest.approx(4 * 4 / 18)
    assert rdp_discrete_gaussian(4.0, 3.0, sensitivity=2) == rdp_gaussian(4.0, 3.0,
                                                                          sensitivity=2.0)
    with pytest.raises(AccountingError):
        rdp_gaussian(2.0, 0.0)
    with pytest.raises(AccountingError):
        rdp_discrete_gaussian(2.0, 1.0, sensitivity=0)


# ---------------------------------------------------------------------------- composition


def test_sequential_and_parallel_composition():
    assert compose([Fraction(1, 10), Fraction(9, 40), Fraction(27, 40)]) == 1
    assert compose([0.25, 0.5]) == 0.75
    assert compose_parallel(Fraction(1, 10), degree=9) == Fraction(9, 10)
    a, b = RDPCurve.geometric(0.3), RDPCurve.gaussian(2.0)
    alphas = np.array([1.5, 3.0, 10.0])
    np.testing.assert_allclose(compose([a, b])(alphas),
                               rdp_geometric(alphas, 0.3) + rdp_gaussian(alphas, 2.0))
    np.testing.assert_allclose(compose_parallel(a + b, degree=9)(alphas),
                               9 * (rdp_geometric(alphas, 0.3) + rdp_gaussian(alphas, 2.0)))
    assert (3 * RDPCurve.zcdp(0.1)).rho == pytest.approx(0.3)
    assert (2 * RDPCurve.geometric(0.7)).pure_epsilon == pytest.approx(1.4)
    assert math.isinf((RDPCurve.geometric(0.7) + RDPCurve.zcdp(0.1)).pure_epsilon)


@pytest.mark.parametrize("degree", [0, -1, 1.5, True])
def test_parallel_composition_rejects_bad_degree(degree):
    with pytest.raises(AccountingError, match="positive integer"):
        compose_parallel(1.0, degree=degree)


def test_compose_nothing_and_bad_curves():
    with pytest.raises(AccountingError, match="nothing to compose"):
        compose([])
    with pytest.raises(AccountingError):
        RDPCurve((("laplace", 1.0, 1, 1.0),))
    with pytest.raises(AccountingError):
        RDPCurve.zcdp(-0.1)


# ---------------------------------------------------------------------------- conversions


def test_zcdp_analytic_at_known_points():
    assert zcdp_to_approx_dp_analytic(0.5, 1e-10) == pytest.approx(
        0.5 + math.sqrt(2 * math.log(1e10)))
    assert zcdp_to_approx_dp_analytic(0.0, 1e-5) == 0.0
    assert zcdp_to_approx_dp_numeric(0.0, 1e-5) == 0.0


@pytest.mark.parametrize("rho", [1e-6, 1e-3, 0.05, 0.5, 2.0, 20.0])
@pytest.mark.parametrize("delta", [1e-12, 1e-10, 1e-6, 1e-2])
def test_zcdp_numeric_is_below_analytic_and_matches_fine_grid(rho, delta):
    numeric = zcdp_to_approx_dp_numeric(rho, delta)
    assert numeric <= zcdp_to_approx_dp_analytic(rho, delta)
    assert numeric == pytest.approx(rdp_to_approx_dp(RDPCurve.zcdp(rho), delta), rel=1e-9)
    if rho >= 1e-3:  # the fine reference grid reaches α = 1e5
        assert numeric == pytest.approx(brute_conversion(lambda a: rho * a, delta), rel=1e-7)


def test_conversions_decrease_in_delta():
    deltas = np.logspace(-14, -1, 14)
    for f in (lambda d: zcdp_to_approx_dp_analytic(0.3, d),
              lambda d: zcdp_to_approx_dp_numeric(0.3, d),
              lambda d: rdp_to_approx_dp(RDPCurve.geometric(2.0) + RDPCurve.geometric(1.0), d)):
        values = [f(d) for d in deltas]
        assert all(x >= y - 1e-12 for x, y in zip(values, values[1:]))


@pytest.mark.parametrize("eps", [0.05, 0.5, 2.0, 10.0])
@pytest.mark.parametrize("delta", [1e-10, 1e-4])
def test_geometric_rdp_conversion_is_consistent_with_pure_and_zcdp(eps, delta):
    curve = RDPCurve.geometric(eps)
    via_rdp = rdp_to_approx_dp(curve, delta)
    assert via_rdp <= eps                                          # α = ∞ gives pure ε
    assert via_rdp <= zcdp_to_approx_dp_numeric(pure_to_zcdp(eps), delta) + 1e-9
    assert via_rdp == pytest.approx(
        min(eps, brute_conversion(lambda a: rdp_geometric(a, eps), delta)), rel=1e-6)


@pytest.mark.parametrize("delta", [0, 1, -1e-3, 2, float("nan"), "x"])
def test_conversions_reject_bad_delta(delta):
    for f in (lambda: zcdp_to_approx_dp_analytic(1.0, delta),
              lambda: zcdp_to_approx_dp_numeric(1.0, delta),
              lambda: rdp_to_approx_dp(RDPCurve.zcdp(1.0), delta)):
        with pytest.raises(AccountingError, match="delta"):
            f()


# ---------------------------------------------------------------------------- MOE


def test_geometric_moe_calibration_round_trips():
    for m in range(0, 3000):
        assert moe_geometric(calibrate_geometric(m)) == m
    assert calibrate_geometric(6) == pytest.approx(math.log(20) / 7)
    assert calibrate_geometric(6.9) == calibrate_geometric(6)          # ⌊MOE⌋
    assert calibrate_geometric(5, sensitivity=2) == 2 * calibrate_geometric(5)
    assert moe_geometric(calibrate_geometric(5, sensitivity=2), sensitivity=2) == 5


@pytest.mark.parametrize("m", [0, 1, 6, 11, 50, 1000])
def test_geometric_moe_meaning_off_by_one(m):
    """At the calibrated ε: P[|X| > MOE] ≥ 5 % > P[|X| > MOE + 1] (the documented convention)."""
    z = calibrate_geometric(m)

    def tail(k):  # P[|X| > k] for the two-sided geometric with parameter z
        return 2 * math.exp(-z * (k + 1)) / (1 + math.exp(-z))

    assert tail(m) >= 0.05 > tail(m + 1)
    assert moe_geometric(calibrate_geometric(m + 1)) == m + 1
    assert moe_geometric(z * 1.3) <= m <= moe_geometric(z / 1.3)   # monotone in ε


def test_geometric_moe_large_epsilon_is_zero():
    assert moe_geometric(5.0) == 0
    assert moe_geometric(1e6) == 0
    with pytest.raises(AccountingError):
        moe_geometric(0.0)


def test_discrete_gaussian_moe_calibration_round_trips_and_edge():
    for m in range(1, 4801):
        assert moe_discrete_gaussian(calibrate_discrete_gaussian(m)) == m
    # 1.92 < 1.96²/2: from MOE 4801 on, the calibrated σ is one unit too generous
    assert moe_discrete_gaussian(calibrate_discrete_gaussian(4801)) == 4802
    assert calibrate_discrete_gaussian(6) == pytest.approx(1.92 / 36)
    assert calibrate_discrete_gaussian(6.5) == calibrate_discrete_gaussian(6)
    assert moe_discrete_gaussian(calibrate_discrete_gaussian(7, sensitivity=3),
                                 sensitivity=3) == 7
    with pytest.raises(AccountingError, match="at least 1"):
        calibrate_discrete_gaussian(0.5)
    with pytest.raises(AccountingError):
        calibrate_geometric(-1)


# ---------------------------------------------------------------------------- reports

MOES = [6, 6, 11, 11, 50, 50, 50]


def test_account_moe_reference_configuration():
    acc = account_moe(MOES, stability=9, gamma="0.1", delta=1e-10)
    d = acc.to_dict()
    assert set(d) == {"assumption", "levels", "total", "algorithms"}
    assert set(d["total"]) == {"pure_dp_epsilon", "rdp_epsilon", "zcdp_epsilon_analytic",
                               "zcdp_epsilon_numeric"}
    for level, m in zip(d["levels"], MOES):
        assert set(level) == {"moe", "epsilon_step2", "epsilon_total", "rho_step2", "rho_total",
                              "coverage", "total_only"}
        assert level["moe"] == m and level["total_only"] is None
        assert level["epsilon_step2"] == pytest.approx(math.log(20) / (m + 1))
        assert level["epsilon_total"] == pytest.approx(10 * math.log(20) / (m + 1))  # 9/(1−0.1)
        assert level["rho_step2"] == pytest.approx(1.92 / m ** 2)
        assert level["rho_total"] == pytest.approx(10 * 1.92 / m ** 2)
    pure = sum(10 * math.log(20) / (m + 1) for m in MOES)
    rho = sum(10 * 1.92 / m ** 2 for m in MOES)
    total = d["total"]
    assert total["pure_dp_epsilon"] == pytest.approx(pure)
    assert total["pure_dp_epsilon"] == pytest.approx(15.3143, abs=1e-4)
    assert total["zcdp_epsilon_analytic"] == pytest.approx(
        rho + math.sqrt(4 * rho * math.log(1e10)))
    assert total["zcdp_epsilon_numeric"] == pytest.approx(
        brute_conversion(lambda a: rho * a, 1e-10), rel=1e-7)

    def tau(a):
        out = 0.0
        for m in MOES:
            e2 = math.log(20) / (m + 1)
            out = out + 9 * (rdp_geometric(a, 0.1 * e2 / 0.9) + rdp_geometric(a, e2))
        return out

    assert total["rdp_epsilon"] == pytest.approx(brute_conversion(tau, 1e-10), rel=1e-7)
    assert total["zcdp_epsilon_numeric"] < total["zcdp_epsilon_analytic"]
    assert total["rdp_epsilon"] < total["pure_dp_epsilon"]
    json.dumps(d)


def test_account_moe_gamma_zero_and_stability_one():
    acc = account_moe([10], stability=1, gamma=0)
    assert acc.pure_dp_epsilon == pytest.approx(math.log(20) / 11)
    assert acc.rdp_epsilon <= acc.pure_dp_epsilon


@pytest.mark.parametrize("kwargs, message", [
    (dict(moes=[], stability=9), "at least one MOE"),
    (dict(moes=[0], stability=9), "integer >= 1"),
    (dict(moes=[5.5], stability=9), "integer >= 1"),
    (dict(moes=[5], stability=0), "stability"),
    (dict(moes=[5], stability=9, gamma=1), "gamma"),
    (dict(moes=[5], stability=9, gamma="-0.1"), "gamma"),
    (dict(moes=[5], stability=9, delta=0.0), "delta"),
])
def test_account_moe_validation(kwargs, message):
    with pytest.raises(AccountingError, match=message):
        account_moe(kwargs.pop("moes"), **kwargs)


def test_account_levels_pure_e2e():
    budgets = allocate_budget(1, levels=E2E_LEVELS, queries=E2E_QUERIES)
    acc = account_levels(budgets, notion="pure", delta=1e-10, sensitivity=2)
    assert acc.total.pure_epsilon == 1.0
    expected_rho = sum(float(b) ** 2 / 2 for q in budgets.values() for b in q.values())
    assert acc.total.rho == pytest.approx(expected_rho)
    assert acc.per_level["state"].pure_epsilon == 0.25
    assert acc.per_query[("ed", "hhgq")].pure_epsilon == pytest.approx(9 / 160)
    assert acc.total.rdp_epsilon <= 1.0
    assert acc.total.zcdp_epsilon_numeric <= acc.total.zcdp_epsilon_analytic
    d = acc.to_dict()
    json.dumps(d)
    assert d["total"]["budget"] == "1"
    assert d["levels"]["ed"]["queries"]["va_hisp_race"] == {
        "budget": "27/160", "sensitivity": 2,
        "loss": acc.per_query[("ed", "va_hisp_race")].to_dict()}
    assert set(d["total"]["loss"]) == {"pure_epsilon", "rho", "rdp_epsilon",
                                       "zcdp_epsilon_analytic", "zcdp_epsilon_numeric"}


def test_account_levels_zcdp():
    budgets = allocate_budget("0.5", levels={"a": "1/2", "b": "1/2"}, queries={"q": 1})
    acc = account_levels(budgets, notion="zcdp", delta=1e-8)
    assert acc.total.pure_epsilon is None
    assert acc.total.rho == pytest.approx(0.5)
    assert acc.total.rdp_epsilon == pytest.approx(acc.total.zcdp_epsilon_numeric, rel=1e-9)
    assert acc.to_dict()["mechanism"] == "discrete_gaussian"


@pytest.mark.parametrize("kwargs, message", [
    (dict(budgets={"a": {"q": 1}}, notion="renyi"), "notion"),
    (dict(budgets={}), "no levels"),
    (dict(budgets={"a": {}}), "no query budgets"),
    (dict(budgets={"a": {"q": 0}}), "positive budget"),
    (dict(budgets={"a": {"q": -1}}), ">= 0"),
    (dict(budgets={"a": {"q": 1, "r": 1}}, sensitivity={"q": 1}), "no sensitivity"),
    (dict(budgets={"a": {"q": 1}}, delta=1.5), "delta"),
])
def test_account_levels_validation(kwargs, message):
    with pytest.raises(AccountingError, match=message):
        account_levels(**kwargs)
