"""Amplification by sampling (``hierarchy.accounting.sampling``), checked against independent
computations: the exact output distributions of small sampled mechanisms, and the Rényi divergence
of the sampled Gaussian integrated numerically.

* Poisson sampling: the two-sided geometric mechanism on a count, with the neighbour's extra
  person in the sample with probability q, has the output distribution (1 − q)P + q·P(· − 1);
  its largest log ratio (both directions) is the closed form, which it attains.
* Sampling without replacement: every population of 6 binary records, every sample of 2, every
  neighbour (one record substituted), for two ε-DP mechanisms on the sample; the worst log ratio
  never exceeds the bound, and for the geometric mechanism equals it.
* The sampled Gaussian: D_α((1 − q)N(0, σ²) + qN(1, σ²) ‖ N(0, σ²)) by quadrature.
"""

from __future__ import annotations

import itertools
import json
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import integrate
from scipy.special import logsumexp
from scipy.stats import norm

from hierarchy.accounting import (
    MAX_INTEGER_ORDER,
    AmplifiedLoss,
    PrivacyLoss,
    RDPCurve,
    SampledRDPCurve,
    amplify_loss,
    amplify_poisson,
    amplify_without_replacement,
    compose,
    compose_parallel,
    rdp_gaussian,
    rdp_sampled_gaussian,
    rdp_to_approx_dp,
    sampling_assumption,
)
from hierarchy.errors import AccountingError, HierarchyError
from postproc.cli import main


def closed_form(epsilon: float, fraction: float) -> float:
    """The bound as printed in the papers, for comparison at moderate ε."""
    return math.log(1.0 + fraction * (math.exp(epsilon) - 1.0))


def log_geometric(k: np.ndarray, epsilon: float) -> np.ndarray:
    """log P[k] of the two-sided geometric noise with P[k] ∝ exp(−ε|k|)."""
    return math.log(math.tanh(epsilon / 2.0)) - epsilon * np.abs(k)


# -- Poisson sampling: the geometric mechanism's exact output distribution ----------------------

@pytest.mark.parametrize("epsilon,rate", [(0.1, 0.01), (0.5, 0.25), (1.0, 0.1), (2.0, 0.5),
                                          (3.0, 0.9), (5.0, 0.001), (0.7, 1.0)])
def test_poisson_geometric_count_attains_the_bound(epsilon, rate):
    # x has count c; x' = x plus one person, who is in the sample with probability q, so the
    # sampled count is c + 1 with probability q: output (1 − q)·P(o − c) + q·P(o − c − 1)
    c = 3
    o = np.arange(-400, 401)
    log_p = log_geometric(o - c, epsilon)
    with np.errstate(divide="ignore"):
        log_mixture = np.logaddexp(np.log1p(-rate) + log_p,
                                   math.log(rate) + log_geometric(o - c - 1, epsilon))
    worst = max(np.max(log_mixture - log_p), np.max(log_p - log_mixture))
    amplified, _ = amplify_poisson(epsilon, rate=rate)
    assert worst == pytest.approx(amplified, abs=1e-9)
    assert amplified == pytest.approx(closed_form(epsilon, rate), rel=1e-12)


def test_poisson_one_person_coin_flip_never_exceeds_the_bound():
    # a different ε-DP mechanism: randomized response on "is anyone with trait T in the
    # sample"; the extra person has the trait, the others do not
    for epsilon, rate in [(0.3, 0.2), (1.0, 0.5), (4.0, 0.05)]:
        keep = math.exp(epsilon) / (1.0 + math.exp(epsilon))
        without = np.array([1.0 - keep, keep])[::-1]          # truth "no": P[no], P[yes]
        with_person = (1.0 - rate) * without + rate * without[::-1]
        worst = np.max(np.abs(np.log(with_person) - np.log(without)))
        assert worst <= amplify_poisson(epsilon, rate=rate)[0] + 1e-12


# -- sampling without replacement: exact enumeration -------------------------------------------

N_POPULATION, N_SAMPLE = 6, 2
SUBSETS = list(itertools.combinations(range(N_POPULATION), N_SAMPLE))
OUTPUTS = np.arange(-60, 63)          # the geometric mechanism's outputs looked at


def geometric_given(sample: tuple[int, ...], epsilon: float) -> np.ndarray:
    """log P[o], o in OUTPUTS, of the geometric mechanism on the sample's count of ones."""
    return log_geometric(OUTPUTS - sum(sample), epsilon)


def response_sum_given(sample: tuple[int, ...], epsilon: float) -> np.ndarray:
    """log P[o], o in 0..len(sample): each bit by randomized response (kept with probability
    e^ε/(1 + e^ε)), then the number of reported ones."""
    keep = math.exp(epsilon) / (1.0 + math.exp(epsilon))
    pmf = np.array([1.0])
    for bit in sample:
        one = keep if bit else 1.0 - keep
        pmf = np.convolve(pmf, [1.0 - one, one])
    return np.log(pmf)


def on_a_sample(given):
    """The mechanism ``given`` run on a sample of N_SAMPLE records drawn uniformly without
    replacement: log P[o] averaged over every sample."""
    def mechanism(records: tuple[int, ...], epsilon: float) -> np.ndarray:
        logs = np.array([given(tuple(records[i] for i in s), epsilon) for s in SUBSETS])
        return logsumexp(logs, axis=0) - math.log(len(SUBSETS))
    return mechanism


def substitutions(records: tuple[int, ...]):
    for i in range(len(records)):
        yield records[:i] + (1 - records[i],) + records[i + 1:]


def worst_log_ratio(mechanism, epsilon: float) -> float:
    """The largest |log P_x(o) − log P_x'(o)| over all populations x, all x' differing from x in
    one record (substitution) and all outputs o."""
    worst = 0.0
    for records in itertools.product((0, 1), repeat=N_POPULATION):
        here = mechanism(records, epsilon)
        for neighbour in substitutions(records):
            worst = max(worst, float(np.max(np.abs(here - mechanism(neighbour, epsilon)))))
    return worst


@pytest.mark.parametrize("epsilon", [0.2, 1.0, 3.0])
def test_without_replacement_geometric_count_attains_the_bound(epsilon):
    bound, _ = amplify_without_replacement(epsilon, sample_size=N_SAMPLE,
                                           population=N_POPULATION)
    assert bound == pytest.approx(closed_form(epsilon, N_SAMPLE / N_POPULATION), rel=1e-12)
    worst = worst_log_ratio(on_a_sample(geometric_given), epsilon)
    assert worst <= bound + 1e-12
    # tight: all zeros against one 1 — the changed record is in the sample with probability
    # m/n, and nothing else differs, so above every count the ratio is 1 + (m/n)(e^ε − 1)
    assert worst == pytest.approx(bound, abs=1e-12)


@pytest.mark.parametrize("epsilon", [0.2, 1.0, 3.0])
def test_without_replacement_randomized_response_stays_under_the_bound(epsilon):
    bound, _ = amplify_without_replacement(epsilon, sample_size=N_SAMPLE,
                                           population=N_POPULATION)
    assert worst_log_ratio(on_a_sample(response_sum_given), epsilon) <= bound + 1e-12


@pytest.mark.parametrize("epsilon", [0.2, 1.0, 3.0])
def test_the_mechanisms_on_the_sample_are_epsilon_dp_for_substitution(epsilon):
    # what the bound asks of them, on every sample of N_SAMPLE records: the geometric count's
    # worst ratio is ε itself, randomized response's at most ε
    def worst(given):
        return max(float(np.max(np.abs(given(sample, epsilon) - given(other, epsilon))))
                   for sample in itertools.product((0, 1), repeat=N_SAMPLE)
                   for other in substitutions(sample))
    assert worst(geometric_given) == pytest.approx(epsilon, abs=1e-12)
    assert worst(response_sum_given) <= epsilon + 1e-12
    # and with the whole population as the sample there is no amplification
    assert amplify_without_replacement(epsilon, sample_size=6, population=6) == (epsilon, 0.0)


# -- the sampled Gaussian's Rényi divergence, by quadrature -----------------------------------

def renyi_by_quadrature(rate: float, sigma: float, alpha: float, *, reverse: bool = False
                        ) -> float:
    """D_α(μ ‖ μ0) (or D_α(μ0 ‖ μ)) for μ = (1 − q)N(0, σ²) + qN(1, σ²), μ0 = N(0, σ²).

    ``∫ μ0 (μ/μ0)^α`` minus 1 (∫ μ0 = 1), with μ/μ0 = 1 + q(e^{(2z − 1)/(2σ²)} − 1), so that a
    small divergence keeps its digits; the reverse divergence is ``∫ μ0 (μ/μ0)^{1−α}``.
    """
    power = 1.0 - alpha if reverse else alpha

    def integrand(z: float) -> float:
        log_ratio = math.log1p(rate * math.expm1((2.0 * z - 1.0) / (2.0 * sigma ** 2)))
        if power * log_ratio > 700.0:        # far in the tail: the −1 no longer matters
            return math.exp(norm.logpdf(z, scale=sigma) + power * log_ratio)
        return norm.pdf(z, scale=sigma) * math.expm1(power * log_ratio)

    lo, hi = -40.0 * sigma - 1.0, math.ceil(alpha) + 40.0 * sigma + 1.0
    points = np.arange(0.0, math.ceil(alpha) + 1.0)
    value, _ = integrate.quad(integrand, lo, hi, points=points, limit=1000, epsabs=0.0,
                              epsrel=1e-11)
    return math.log1p(value) / (alpha - 1.0)


CASES = [(0.1, 1.0, 2), (0.01, 2.0, 8), (0.5, 0.8, 5), (0.2, 1.5, 16), (0.05, 0.6, 4),
         (0.001, 1.0, 3), (0.3, 0.7, 12)]


@pytest.mark.parametrize("rate,sigma,alpha", CASES)
def test_sampled_gaussian_matches_quadrature(rate, sigma, alpha):
    exact = rdp_sampled_gaussian(alpha, sigma, rate=rate)
    assert exact == pytest.approx(renyi_by_quadrature(rate, sigma, alpha), rel=1e-7)
    # Mironov, Talwar & Zhang: the other direction is never larger
    assert renyi_by_quadrature(rate, sigma, alpha, reverse=True) <= exact * (1 + 1e-9)


def test_sampled_gaussian_sensitivity_scales_sigma():
    assert rdp_sampled_gaussian(6, 3.0, rate=0.1, sensitivity=2.0) == pytest.approx(
        rdp_sampled_gaussian(6, 1.5, rate=0.1), rel=1e-14)


def test_sampled_gaussian_at_rate_one_is_the_gaussian():
    alphas = np.array([2.0, 3.0, 10.0, 100.0])
    assert np.array_equal(rdp_sampled_gaussian(alphas, 1.3, rate=1.0), rdp_gaussian(alphas, 1.3))
    # and the general sum tends to it
    close = rdp_sampled_gaussian(alphas, 1.3, rate=1 - 1e-12)
    np.testing.assert_allclose(close, rdp_gaussian(alphas, 1.3), rtol=1e-9)


def test_sampled_gaussian_stays_finite_and_below_the_gaussian():
    alphas = np.array([2, 50, 1000, 5000])
    values = rdp_sampled_gaussian(alphas, 0.5, rate=0.01)
    assert np.all(np.isfinite(values)) and np.all(values > 0)
    assert np.all(values <= rdp_gaussian(alphas, 0.5))
    assert np.all(np.diff(values) > 0)                       # grows with the order
    assert rdp_sampled_gaussian(np.inf, 1.0, rate=0.5) == math.inf
    # a small rate keeps its digits: τ(2) = log(1 + q²(e^{1/σ²} − 1)) ≈ q²(e − 1)
    assert rdp_sampled_gaussian(2, 1.0, rate=1e-6) == pytest.approx(1e-12 * (math.e - 1),
                                                                     rel=1e-9)


# -- the curve: orders between integers, composition, conversion --------------------------------

def test_curve_bounds_orders_between_integers_by_the_next_one():
    curve = SampledRDPCurve.gaussian(1.0, rate=0.1)
    alphas = np.array([1.5, 2.0, 2.5, 7.01, 8.0])
    expected = rdp_sampled_gaussian(np.array([2, 2, 3, 8, 8]), 1.0, rate=0.1)
    np.testing.assert_array_equal(curve(alphas), expected)
    for alpha in (1.5, 2.5, 7.01):           # a valid bound: the true divergence is below
        assert renyi_by_quadrature(0.1, 1.0, alpha) <= float(curve(alpha))


def test_curve_above_the_largest_order_uses_the_gaussian():
    curve = SampledRDPCurve.gaussian(30.0, rate=0.01)
    above = float(MAX_INTEGER_ORDER) + 0.5
    assert curve(above) == pytest.approx(rdp_gaussian(above, 30.0), rel=1e-14)
    assert curve(float(MAX_INTEGER_ORDER)) <= curve(above)


def test_curve_composes_with_rdp_curves():
    geometric = RDPCurve.geometric(0.3)
    sampled = SampledRDPCurve.gaussian(2.0, rate=0.05)
    alphas = np.array([1.2, 2.0, 9.0, 64.0])
    expected = geometric(alphas) + 3 * sampled(alphas)
    for total in (geometric + 3 * sampled, 3 * sampled + geometric,
                  compose([geometric, sampled, sampled, sampled]),
                  geometric + compose_parallel(sampled, degree=3)):
        np.testing.assert_allclose(total(alphas), expected, rtol=1e-14)
    assert (geometric + sampled).pure_epsilon == math.inf
    assert (geometric + sampled).zcdp_rho == pytest.approx(0.3 ** 2 / 2 + 1 / 8)


def test_curve_converts_to_approx_dp():
    delta = 1e-10
    whole = rdp_to_approx_dp(RDPCurve.gaussian(2.0), delta)
    at_rate_one = rdp_to_approx_dp(SampledRDPCurve.gaussian(2.0, rate=1.0), delta)
    assert at_rate_one == pytest.approx(whole, rel=1e-12)
    sampled = rdp_to_approx_dp(SampledRDPCurve.gaussian(2.0, rate=0.1), delta)
    assert sampled < whole
    # no better than the conversion restricted to the integer orders, and at most a little worse
    orders = np.arange(2, 2000)
    tau = rdp_sampled_gaussian(orders, 2.0, rate=0.1)
    t = orders - 1.0
    integer_only = np.min(tau + (math.log(1 / delta) + t * np.log1p(-1 / orders)
                                 - np.log(orders)) / t)
    assert integer_only <= sampled <= integer_only * (1 + 1e-6)
    # the conversion sees an integer order exactly only if asked to
    with_integers = rdp_to_approx_dp(SampledRDPCurve.gaussian(2.0, rate=0.1), delta,
                                     alphas=orders)
    assert with_integers == pytest.approx(integer_only, rel=1e-12)
    loss = PrivacyLoss.from_curve(SampledRDPCurve.gaussian(2.0, rate=0.1), delta=delta)
    assert loss.pure_epsilon is None and loss.rdp_epsilon == pytest.approx(sampled)
    assert loss.rho == pytest.approx(1 / 8)                  # ρ is not amplified


# -- the closed forms: properties ----------------------------------------------------------------

@settings(max_examples=300, deadline=None)
@given(epsilon=st.floats(min_value=0.0, max_value=1e15),
       q1=st.floats(min_value=1e-300, max_value=1.0), q2=st.floats(min_value=1e-300, max_value=1.0))
def test_amplified_epsilon_is_at_most_epsilon_and_grows_with_the_rate(epsilon, q1, q2):
    lo, hi = sorted((q1, q2))
    small, big = amplify_poisson(epsilon, rate=lo)[0], amplify_poisson(epsilon, rate=hi)[0]
    assert 0.0 <= small <= big <= epsilon
    assert amplify_poisson(epsilon, rate=1.0)[0] == epsilon


@settings(max_examples=200, deadline=None)
@given(epsilon=st.floats(min_value=0.0, max_value=50.0), n=st.integers(1, 10**9),
       data=st.data())
def test_without_replacement_grows_with_the_sample(epsilon, n, data):
    m1 = data.draw(st.integers(1, n))
    m2 = data.draw(st.integers(m1, n))
    small = amplify_without_replacement(epsilon, sample_size=m1, population=n)[0]
    big = amplify_without_replacement(epsilon, sample_size=m2, population=n)[0]
    assert small <= big <= epsilon
    assert small == amplify_poisson(epsilon, rate=m1 / n)[0]


def test_closed_form_keeps_its_digits_at_both_ends():
    # small ε: ε' ≈ qε (the naive log(1 + q(e^ε − 1)) loses every digit at 1e−12)
    assert amplify_poisson(1e-12, rate=0.3)[0] == pytest.approx(3e-13, rel=1e-9)
    # large ε: ε' = ε + log q + O(e^−ε), where e^ε overflows
    assert amplify_poisson(1000.0, rate=0.5)[0] == pytest.approx(1000 + math.log(0.5),
                                                                 rel=1e-15)
    assert amplify_poisson(1e15, rate=1e-3)[0] == 1e15 + math.log(1e-3)
    assert amplify_poisson(2.0, rate=0.1, delta=1e-6) == pytest.approx(
        (closed_form(2.0, 0.1), 1e-7), rel=1e-12)


def test_amplify_loss_amplifies_every_approx_dp_pair():
    loss = PrivacyLoss.of(epsilon=1.0, delta=1e-8)
    amplified = amplify_loss(loss, rate=0.2)
    assert amplified.scheme == "poisson" and amplified.delta == pytest.approx(2e-9)
    for name in ("pure_epsilon", "rdp_epsilon", "zcdp_epsilon_analytic", "zcdp_epsilon_numeric"):
        assert getattr(amplified, name) == pytest.approx(
            closed_form(getattr(loss, name), 0.2), rel=1e-12)
    by_sample = amplify_loss(loss, sample_size=1, population=5)
    assert by_sample.scheme == "without_replacement"
    assert by_sample.to_dict()["pure_epsilon"] == amplified.pure_epsilon
    assert "1 of 5 persons" in by_sample.assumption


# -- bad input -----------------------------------------------------------------------------------

@pytest.mark.parametrize("call,named", [
    (lambda: amplify_poisson(1.0, rate=0), "rate"),
    (lambda: amplify_poisson(1.0, rate=1.5), "rate"),
    (lambda: amplify_poisson(1.0, rate=float("nan")), "rate"),
    (lambda: amplify_poisson(1.0, rate=True), "rate"),
    (lambda: amplify_poisson(-1.0, rate=0.5), "epsilon"),
    (lambda: amplify_poisson(float("inf"), rate=0.5), "epsilon"),
    (lambda: amplify_poisson(1.0, rate=0.5, delta=2), "delta"),
    (lambda: amplify_without_replacement(1.0, sample_size=7, population=6), "sample_size (7)"),
    (lambda: amplify_without_replacement(1.0, sample_size=0, population=6), "sample_size"),
    (lambda: amplify_without_replacement(1.0, sample_size=2.0, population=6), "sample_size"),
    (lambda: amplify_without_replacement(1.0, sample_size=2, population=-6), "population"),
    (lambda: amplify_without_replacement(-0.5, sample_size=2, population=6), "epsilon"),
    (lambda: rdp_sampled_gaussian(2.5, 1.0, rate=0.1), "alpha"),
    (lambda: rdp_sampled_gaussian(1, 1.0, rate=0.1), "alpha"),
    (lambda: rdp_sampled_gaussian(10**7, 1.0, rate=0.1), "alpha"),
    (lambda: rdp_sampled_gaussian(2, 0.0, rate=0.1), "sigma"),
    (lambda: rdp_sampled_gaussian(2, 1.0, rate=0.0), "rate"),
    (lambda: SampledRDPCurve.gaussian(1.0, rate=2.0), "rate"),
    (lambda: SampledRDPCurve(sampled=((0.5, 1.0),)), "sampled Gaussian term"),
    (lambda: sampling_assumption(), "rate"),
    (lambda: sampling_assumption(rate=0.1, sample_size=2, population=3), "not both"),
    (lambda: amplify_loss(1.0, rate=0.1), "PrivacyLoss"),
    (lambda: AmplifiedLoss(1.5, None, None, 1.0, 1.0, 1.0, 1.0, 0.0), "rate"),
    (lambda: AmplifiedLoss(0.5, 1, 3, 1.0, 1.0, 1.0, 1.0, 0.0), "sample_size/population"),
])
def test_bad_input_names_the_argument(call, named):
    with pytest.raises(AccountingError) as exc:
        call()
    assert isinstance(exc.value, HierarchyError)
    assert named in str(exc.value)


def test_rate_error_says_the_fix():
    with pytest.raises(AccountingError, match=r"must be in \(0, 1\], not 0; give 1"):
        amplify_poisson(1.0, rate=0)


# -- the command line ----------------------------------------------------------------------------

def run(capsys, argv):
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def test_cli_convert_with_sample_rate_json(capsys):
    code, out, _ = run(capsys, ["account", "convert", "--epsilon", "1", "--sample-rate", "0.1",
                                "--json"])
    assert code == 0
    data = json.loads(out)
    assert {"pure_epsilon", "rho", "rdp_epsilon", "zcdp_epsilon_analytic",
            "zcdp_epsilon_numeric", "delta"} <= set(data)           # the keys of old, unchanged
    assert data["pure_epsilon"] == 1.0
    sampling = data["sampling"]
    assert sampling["pure_epsilon"] == pytest.approx(math.log(1 + 0.1 * (math.e - 1)),
                                                     rel=1e-12)
    assert sampling["delta"] == pytest.approx(1e-11)
    assert sampling["scheme"] == "poisson" and sampling["rate"] == 0.1
    assert sampling["assumption"] == ("assumes the sample is drawn by Poisson sampling at rate "
                                      "0.1, secret; neighbours add or remove one person")
    assert sampling["zcdp_epsilon_numeric"] == pytest.approx(
        closed_form(data["zcdp_epsilon_numeric"], 0.1), rel=1e-12)


def test_cli_convert_without_replacement(capsys):
    code, out, _ = run(capsys, ["account", "convert", "--epsilon", "1", "--sample-size", "25",
                                "--population", "100", "--json"])
    assert code == 0
    sampling = json.loads(out)["sampling"]
    assert sampling["scheme"] == "without_replacement"
    assert (sampling["sample_size"], sampling["population"], sampling["rate"]) == (25, 100, 0.25)
    assert sampling["pure_epsilon"] == pytest.approx(closed_form(1.0, 0.25), rel=1e-12)
    assert "substitute one person's record" in sampling["assumption"]


def test_cli_convert_table_shows_both_columns_and_the_assumption(capsys):
    code, out, _ = run(capsys, ["account", "convert", "--epsilon", "1", "--sample-rate", "0.1"])
    assert code == 0
    assert ("assumes the sample is drawn by Poisson sampling at rate 0.1, secret; neighbours "
            "add or remove one person") in out
    row = next(line for line in out.splitlines() if line.startswith("pure DP epsilon"))
    assert row.split()[-2:] == ["1.000000", f"{closed_form(1.0, 0.1):.6f}"]
    assert "unamplified" in out and "1e-11" in out
    code, out, _ = run(capsys, ["account", "convert", "--epsilon", "1"])
    assert code == 0 and "unamplified" not in out and "assumes" not in out


def test_cli_refuses_two_designs_and_half_a_design(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["account", "convert", "--epsilon", "1", "--sample-rate", "0.1",
              "--sample-size", "3", "--population", "9"])
    assert exc.value.code == 2
    assert "not allowed with" in capsys.readouterr().err
    for argv in (["--population", "9"], ["--sample-size", "3"],
                 ["--sample-rate", "0.1", "--population", "9"]):
        code, _, err = run(capsys, ["account", "convert", "--epsilon", "1", *argv])
        assert code == 1 and "--sample-size and --population go together" in err


@pytest.mark.parametrize("argv,named", [(["--sample-rate", "0"], "--sample-rate: rate"),
                                        (["--sample-rate", "1.5"], "--sample-rate: rate"),
                                        (["--sample-size", "10", "--population", "9"],
                                         "--sample-size: sample_size (10)")])
def test_cli_bad_design_exits_1_naming_the_option(capsys, argv, named):
    code, _, err = run(capsys, ["account", "convert", "--epsilon", "1", *argv])
    assert code == 1 and named in err
