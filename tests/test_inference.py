"""ABC and Monte Carlo EM against the exact posterior and likelihood of Poisson–Laplace models.

Statistical tolerances: every run uses a fixed seed, so the tests are deterministic; the
tolerances are set at >= 4 Monte Carlo standard errors (stated next to each check), so a change
of seed fails with probability below about 1e-4 per check.
"""

from __future__ import annotations

import importlib.util
import json
import math
from pathlib import Path

import numpy as np
import pytest
from scipy import stats
from scipy.optimize import minimize_scalar
from scipy.special import gammaln

from postproc.errors import PostprocError
from postproc.inference import (
    NoiseModel,
    abc_posterior,
    louis_information,
    mcem,
    monte_carlo_log_likelihood,
)

EPS = 0.2
S_DP = 37.4
S = np.arange(0, 401)
EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def log_eta(x):
    return math.log(EPS / 2) - EPS * np.abs(x)


def exact_loglik(theta, observed=(S_DP,)):
    """Σ_j log Σ_s Poisson(s; θ) η(s_dp,j − s)."""
    lp = stats.poisson.logpmf(S, theta)
    return sum(float(np.logaddexp.reduce(lp + log_eta(o - S))) for o in observed)


def exact_mle(observed=(S_DP,)):
    res = minimize_scalar(lambda t: -exact_loglik(t, observed), bounds=(5, 100),
                          method="bounded", options={"xatol": 1e-10})
    return float(res.x)


def exact_information(theta, observed=(S_DP,), h=1e-3):
    f = lambda t: exact_loglik(t, observed)  # noqa: E731
    return -(f(theta + h) - 2 * f(theta) + f(theta - h)) / h ** 2


POISSON = dict(
    sample_unit=lambda th, m, g: g.poisson(th[0], m),
    maximize=lambda s, w: [np.sum(w * s) / np.sum(w)],
    complete_log_likelihood=lambda s, th: s * np.log(th[0]) - th[0] - gammaln(s + 1),
)
LAPLACE = NoiseModel.from_budget("laplace", EPS)


# ---------------------------------------------------------------------------- noise models


def test_noise_model_laplace_density_and_budget():
    assert LAPLACE.parameter == pytest.approx(5.0)
    x = np.array([-3.0, 0.0, 2.5])
    np.testing.assert_allclose(LAPLACE.log_density(x), log_eta(x))
    assert LAPLACE.log_density_max == pytest.approx(math.log(0.1))
    geo = NoiseModel.from_budget("geometric", 1.0, sensitivity=2)
    assert geo.parameter == 0.5
    assert geo.log_density_max == pytest.approx(math.log(math.tanh(0.25)))
    assert NoiseModel("gaussian", 4.0).log_density_max == pytest.approx(
        -0.5 * math.log(2 * math.pi * 4.0))
    draws = LAPLACE.sample(50_000, 0)
    assert np.var(draws) == pytest.approx(50.0, rel=0.05)   # 2 b²; ± >4 s.e.


@pytest.mark.parametrize("args", [("cauchy", 1.0), ("laplace", -1.0), ("laplace", 0.0)])
def test_noise_model_rejects_bad_input(args):
    with pytest.raises(PostprocError, match="invalid noise model"):
        NoiseModel(*args)
    with pytest.raises(PostprocError):
        NoiseModel.from_budget(args[0], args[1])


# ---------------------------------------------------------------------------- ABC


def exact_posterior_cdf(theta):
    """π(θ | s_dp) under Gamma(25, 1): Σ_s w_s Gamma(25 + s, rate 2)."""
    log_w = stats.nbinom.logpmf(S, 25, 0.5) + log_eta(S_DP - S)
    w = np.exp(log_w - np.logaddexp.reduce(log_w))
    return np.sum(w * stats.gamma.cdf(np.asarray(theta)[..., None], 25 + S, scale=0.5), axis=-1)


def test_abc_matches_exact_posterior():
    res = abc_posterior(S_DP, sample_prior=lambda n, g: g.gamma(25.0, 1.0, n),
                        sample_data=lambda th, g: g.poisson(th), noise=LAPLACE,
                        n_draws=20_000, rng=11)
    log_w = stats.nbinom.logpmf(S, 25, 0.5) + log_eta(S_DP - S)
    w = np.exp(log_w - np.logaddexp.reduce(log_w))
    mean = np.sum(w * (25 + S) / 2)
    sd = math.sqrt(np.sum(w * ((25 + S) / 4 + ((25 + S) / 2) ** 2)) - mean ** 2)
    assert mean == pytest.approx(28.576, abs=1e-3)
    # s.e. of the mean 4.73/sqrt(20000) = 0.033; of the sd about 0.024
    assert res.samples.mean() == pytest.approx(mean, abs=0.15)
    assert res.samples.std() == pytest.approx(sd, abs=0.1)
    assert stats.kstest(res.samples, exact_posterior_cdf).pvalue > 1e-3
    assert 0.1 < res.acceptance_rate < 0.25
    assert res.n_proposed >= 20_000 / res.acceptance_rate * 0.99


def test_abc_two_observed_counts():
    """Two counts with the same θ, geometric noise: checks the product over coordinates."""
    observed = np.array([30.0, 41.0])
    geo = NoiseModel.from_budget("geometric", 0.3)
    res = abc_posterior(observed, sample_prior=lambda n, g: g.gamma(25.0, 1.0, n),
                        sample_data=lambda th, g: g.poisson(th[:, None], (th.size, 2)),
                        noise=geo, n_draws=10_000, rng=5)
    # exact posterior mean: θ | s1, s2 ~ Gamma(25 + s1 + s2, rate 3); weight of t = s1 + s2 is
    # the prior predictive of the pair times the geometric likelihood.
    s1, s2 = np.meshgrid(np.arange(0, 151), np.arange(0, 151), indexing="ij")
    t = s1 + s2
    log_pred = (gammaln(25 + t) - gammaln(25) - gammaln(s1 + 1) - gammaln(s2 + 1)
                + 25 * math.log(1 / 3) + t * math.log(1 / 3))
    log_w = log_pred + geo.log_density(observed[0] - s1) + geo.log_density(observed[1] - s2)
    w = np.exp(log_w - np.logaddexp.reduce(log_w.ravel()))
    mean = float(np.sum(w * (25 + t) / 3))
    # posterior sd ≈ 3.3, s.e. of the mean 0.033
    assert res.samples.mean() == pytest.approx(mean, abs=0.15)


def test_abc_errors():
    common = dict(sample_prior=lambda n, g: g.gamma(25.0, 1.0, n), noise=LAPLACE, n_draws=10,
                  rng=0)
    with pytest.raises(PostprocError, match="shape"):
        abc_posterior(S_DP, sample_data=lambda th, g: g.poisson(th)[:5], **common)
    with pytest.raises(PostprocError, match="accepted only"):
        abc_posterior(1e6, sample_data=lambda th, g: g.poisson(th), max_proposals=1000,
                      batch_size=500, **common)
    with pytest.raises(PostprocError, match="log_density"):
        abc_posterior(S_DP, sample_prior=common["sample_prior"],
                      sample_data=lambda th, g: g.poisson(th), noise=object(), n_draws=10)
    with pytest.raises(PostprocError, match="n_draws"):
        abc_posterior(S_DP, sample_data=lambda th, g: g.poisson(th),
                      **{**common, "n_draws": 0})


# ---------------------------------------------------------------------------- MCEM


def test_exact_reference_values():
    theta = exact_mle()
    assert theta == pytest.approx(37.2373, abs=1e-4)
    assert exact_information(theta) == pytest.approx(0.015821, abs=2e-6)


def test_mcem_matches_exact_mle_and_information():
    res = mcem(S_DP, theta0=[20.0], noise=LAPLACE, rng=7, n_iter=40, n_samples=10_000,
               **POISSON)
    theta = exact_mle()
    # EM contracts by ≈ 0.58 per step (fraction of missing information 50/87); from 20 the
    # iterates have converged by iteration 30, and averaging the last 10 leaves a Monte Carlo
    # s.d. of about 0.03.
    assert res.history.shape == (41, 1)
    assert res.theta[0] == pytest.approx(theta, abs=0.15)
    # Louis with 40,000 draws: relative s.d. about 0.3 %
    assert res.observed_information[0, 0] == pytest.approx(exact_information(theta), rel=0.03)
    assert res.standard_errors[0] == pytest.approx(1 / math.sqrt(exact_information(theta)),
                                                   rel=0.02)
    assert res.observed_information[0, 0] < 1 / S_DP      # less information than naive
    assert res.effective_sample_size > 10_000


def test_mcem_several_units():
    observed = np.array([37.4, 25.0, 44.1, 31.7, 52.9])
    res = mcem(observed, theta0=[10.0], noise=LAPLACE, rng=3, n_iter=50, n_samples=10_000,
               **POISSON)
    theta = exact_mle(observed)
    assert res.theta[0] == pytest.approx(theta, abs=0.15)
    assert res.observed_information[0, 0] == pytest.approx(exact_information(theta, observed),
                                                           rel=0.03)


def test_louis_information_equals_exact_second_derivative():
    theta = exact_mle()
    info, ess = louis_information(S_DP, [theta], noise=LAPLACE, rng=1, n_samples=100_000,
                                  sample_unit=POISSON["sample_unit"],
                                  complete_log_likelihood=POISSON["complete_log_likelihood"])
    assert info.shape == (1, 1)
    assert info[0, 0] == pytest.approx(exact_information(theta), rel=0.02)
    assert ess > 50_000


@pytest.mark.parametrize("theta", [25.0, 37.0, 50.0])
def test_monte_carlo_log_likelihood(theta):
    ll = monte_carlo_log_likelihood(S_DP, [theta], sample_unit=POISSON["sample_unit"],
                                    noise=LAPLACE, n_samples=200_000, rng=2)
    assert ll == pytest.approx(exact_loglik(theta), abs=0.01)


def test_mcem_two_parameter_finite_differences_match_analytic_louis():
    """Normal units with known noise: Louis with finite differences vs the closed form."""
    sigma_noise = 2.0
    noise = NoiseModel("gaussian", sigma_noise ** 2)
    observed = np.array([-3.0, 5.5, 1.0, 8.2, -1.4, 4.0, 2.5, 10.1])
    res = mcem(observed, theta0=[0.0, 1.0], noise=noise, rng=4, n_iter=80, n_samples=20_000,
               sample_unit=lambda th, m, g: g.normal(th[0], th[1], m),
               maximize=lambda s, w: [np.sum(w * s) / np.sum(w),
                                      math.sqrt(np.sum(w * (s - np.sum(w * s) / np.sum(w)) ** 2)
                                                / np.sum(w))],
               complete_log_likelihood=lambda s, th: -np.log(th[1]) - (s - th[0]) ** 2
               / (2 * th[1] ** 2))
    # s_dp ~ N(μ, σ² + 4): MLE μ = mean, σ² = max(0, var − 4)
    n = observed.size
    var = observed.var()
    mu_hat, sigma_hat = observed.mean(), math.sqrt(var - sigma_noise ** 2)
    assert res.theta[0] == pytest.approx(mu_hat, abs=0.05)
    assert res.theta[1] == pytest.approx(sigma_hat, abs=0.1)
    # observed-data information at the MLE, with τ = σ² + 4 = var: n/τ for μ, 2nσ²/τ² for σ
    info = res.observed_information
    assert info[0, 0] == pytest.approx(n / var, rel=0.05)
    assert info[1, 1] == pytest.approx(2 * n * sigma_hat ** 2 / var ** 2, rel=0.1)
    assert abs(info[0, 1]) < 0.05 * math.sqrt(info[0, 0] * info[1, 1])


def test_mcem_errors():
    with pytest.raises(PostprocError, match="shape"):
        mcem(S_DP, theta0=[30.0], noise=LAPLACE, rng=0, n_iter=2, n_samples=100,
             sample_unit=lambda th, m, g: g.poisson(th[0], (m, 2)),
             maximize=POISSON["maximize"],
             complete_log_likelihood=POISSON["complete_log_likelihood"])
    with pytest.raises(PostprocError, match="maximize"):
        mcem(S_DP, theta0=[30.0], noise=LAPLACE, rng=0, n_iter=2, n_samples=100,
             sample_unit=POISSON["sample_unit"], maximize=lambda s, w: [1.0, 2.0],
             complete_log_likelihood=POISSON["complete_log_likelihood"])
    with pytest.raises(PostprocError, match="theta0"):
        mcem(S_DP, theta0=[np.nan], noise=LAPLACE, rng=0, **POISSON)
    with pytest.raises(PostprocError, match="all importance weights are 0"):
        mcem(37.5, theta0=[30.0], noise=NoiseModel.from_budget("geometric", 0.2), rng=0,
             n_iter=2, n_samples=100, **POISSON)
    with pytest.raises(PostprocError, match="n_average"):
        mcem(S_DP, theta0=[30.0], noise=LAPLACE, rng=0, n_iter=2, n_average=5, **POISSON)
    with pytest.raises(PostprocError, match="finite"):
        mcem([np.inf], theta0=[30.0], noise=LAPLACE, rng=0, **POISSON)


def test_mcem_warns_on_small_effective_sample_size():
    with pytest.warns(RuntimeWarning, match="effective sample size"):
        mcem(S_DP, theta0=[37.0], noise=NoiseModel.from_budget("laplace", 50.0), rng=0,
             n_iter=2, n_samples=200, **POISSON)


def test_reproducible_with_seed():
    a = mcem(S_DP, theta0=[30.0], noise=LAPLACE, rng=9, n_iter=5, n_samples=500, **POISSON)
    b = mcem(S_DP, theta0=[30.0], noise=LAPLACE, rng=9, n_iter=5, n_samples=500, **POISSON)
    np.testing.assert_array_equal(a.history, b.history)


# ---------------------------------------------------------------------------- examples


def load_example(name):
    spec = importlib.util.spec_from_file_location(name, EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_poisson_laplace_example_json(capsys):
    example = load_example("poisson_laplace_mcem")
    assert example.main(["--json", "--n-samples", "5000", "--n-draws", "5000"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert {"mle", "observed_information", "naive_information"} <= set(out)
    assert out["exact_mle"] == pytest.approx(exact_mle(), abs=1e-6)
    assert out["mle"] == pytest.approx(out["exact_mle"], abs=0.3)
    assert out["observed_information"] == pytest.approx(out["exact_observed_information"],
                                                        rel=0.05)
    assert out["naive_information"] == pytest.approx(1 / 37.4)
    assert out["abc_posterior_mean"] == pytest.approx(out["exact_posterior_mean"], abs=0.3)


def test_mcem_singular_information_gives_nan_covariance_and_warns():
    """A parameter the likelihood ignores: zero information, so no covariance."""
    with pytest.warns(RuntimeWarning, match="not positive definite"):
        res = mcem(S_DP, theta0=[30.0, 1.0], noise=LAPLACE, rng=0, n_iter=10, n_samples=2000,
                   sample_unit=POISSON["sample_unit"],
                   maximize=lambda s, w: [np.sum(w * s) / np.sum(w), 1.0],
                   complete_log_likelihood=lambda s, th: s * np.log(th[0]) - th[0])
    assert np.all(np.isnan(res.covariance)) and np.all(np.isnan(res.standard_errors))
    assert res.observed_information[0, 0] > 0
    assert res.observed_information[1, 1] == pytest.approx(0.0, abs=1e-6)


def test_regression_example_exact_likelihood_matches_monte_carlo():
    """The closed-form likelihood of the regression example against the library's MC estimate."""
    example = load_example("regression_mcem")
    noise = example.LaplaceXY(2.0, 5.0)
    released = np.array([[9.3, 31.0], [12.8, 40.2], [7.1, 19.5], [10.4, 37.7]])
    for theta in ([10.0, -5.0, 4.0, 5.0], [9.0, 0.0, 3.0, 2.0]):
        mc = monte_carlo_log_likelihood(released, theta, sample_unit=example.sample_unit,
                                        noise=noise, n_samples=400_000, rng=8)
        # 4 units, each with ESS in the tens of thousands: MC s.d. well below 0.01
        assert mc == pytest.approx(example.exact_log_likelihood(np.array(theta), released, noise),
                                   abs=0.03)


def test_regression_example_smoke(tmp_path, capsys):
    example = load_example("regression_mcem")
    code = example.main(["--json", "--out", str(tmp_path), "--replicates", "2", "--n-iter", "8",
                         "--n-samples", "400", "--final-samples", "2000"])
    assert code == 0
    out = json.loads(capsys.readouterr().out)
    assert (tmp_path / "regression_mcem.png").stat().st_size > 10_000
    assert [e["epsilon"] for e in out["by_epsilon"]] == [0.5, 0.2, 0.1, None]
    no_noise = out["by_epsilon"][-1]
    assert no_noise["naive_slope_median"] == no_noise["mcem_slope_median"]
    assert {"naive_slope_median", "mcem_slope_median", "naive_slope_coverage",
            "mcem_slope_coverage", "mcem_loglik_gap_max"} <= set(out["by_epsilon"][0])


@pytest.mark.slow
def test_regression_example_full_run_attenuation(tmp_path, capsys):
    """The headline claims with the default settings (about a minute)."""
    example = load_example("regression_mcem")
    assert example.main(["--json", "--out", str(tmp_path)]) == 0
    by_eps = {e["epsilon"]: e for e in json.loads(capsys.readouterr().out)["by_epsilon"]}
    for eps, bound in ((0.5, 2.5), (0.2, 1.5), (0.1, 0.5)):
        e = by_eps[eps]
        assert e["naive_slope_median"] < bound                      # attenuated
        assert e["mcem_slope_median"] > e["naive_slope_median"] + 1.5
        assert e["mcem_slope_coverage"] > e["naive_slope_coverage"]
        assert e["mcem_loglik_gap_max"] < 1.0                       # near the exact maximum
    assert abs(by_eps[0.5]["mcem_slope_median"] - 4) < 0.5
