"""Poisson count released with Laplace noise: MCEM and exact ABC against exact answers.

The worked example of Gong (2020) (docs/inference.md). A count ``s | θ ~ Poisson(θ)`` is
released as ``s_dp = s + Laplace(scale 1/ε)`` with ε = 0.2 (sensitivity 1); we observe
``s_dp = 37.4``.

* **Likelihood.** Monte Carlo EM (:func:`postproc.inference.mcem`) gives the MLE and the
  observed information (Louis' method). It is checked against the exact likelihood
  ``L(θ) = Σ_s Poisson(s; θ) · (ε/2) e^{−ε|s_dp − s|}`` by summation over s = 0 … 600, whose
  maximizer and negative second derivative are computed directly. The *naive* analysis treats
  ``s_dp`` as the exact count: MLE ``s_dp`` and information ``1/s_dp`` — too much information,
  because it ignores the noise's variance 2/ε² = 50.
* **Bayes.** With prior θ ~ Gamma(25, rate 1), exact ABC (:func:`postproc.inference.
  abc_posterior`) draws from ``π(θ | s_dp)``; the exact posterior by summation is the mixture
  ``Σ_s w_s Gamma(25 + s, rate 2)`` with ``w_s ∝ NegBin(s; 25, 1/2) · e^{−ε|s_dp − s|}``.

Randomness is in simulation mode (seeded, reproducible), which is right for an analysis of
already-released data. Run ``python examples/poisson_laplace_mcem.py [--json] [--seed N]``.
"""

from __future__ import annotations

import argparse
import json
import math
import sys

import numpy as np
from scipy import stats
from scipy.optimize import minimize_scalar
from scipy.special import gammaln

from hierarchy.randomness import Randomness
from postproc.inference import NoiseModel, abc_posterior, mcem, monte_carlo_log_likelihood

EPSILON = 0.2
S_DP = 37.4
PRIOR_SHAPE, PRIOR_RATE = 25.0, 1.0
S_GRID = np.arange(0, 601)           # summation range for the exact answers


# ------------------------------------------------------------------------- the model (MCEM)

def sample_unit(theta: np.ndarray, size: int, generator: np.random.Generator) -> np.ndarray:
    """Confidential counts s ~ Poisson(θ)."""
    return generator.poisson(theta[0], size)


def maximize(samples: np.ndarray, weights: np.ndarray) -> list[float]:
    """Weighted complete-data MLE of a Poisson mean: the weighted mean count."""
    return [float(np.sum(weights * samples) / np.sum(weights))]


def complete_log_likelihood(samples: np.ndarray, theta: np.ndarray) -> np.ndarray:
    """log Poisson(s; θ)."""
    return samples * np.log(theta[0]) - theta[0] - gammaln(samples + 1.0)


# ------------------------------------------------------------------------- exact answers

def _log_eta(s: np.ndarray) -> np.ndarray:
    return math.log(EPSILON / 2.0) - EPSILON * np.abs(S_DP - s)


def exact_log_likelihood(theta: float) -> float:
    """log Σ_s Poisson(s; θ) η(s_dp − s), by summation."""
    return float(np.logaddexp.reduce(stats.poisson.logpmf(S_GRID, theta) + _log_eta(S_GRID)))


def exact_mle() -> tuple[float, float]:
    """The exact MLE and observed information (−d²/dθ² log L, by Louis' identity in closed
    form: E[s | s_dp]/θ² − Var[s | s_dp]/θ², exact by summation)."""
    res = minimize_scalar(lambda t: -exact_log_likelihood(t), bounds=(1.0, 150.0),
                          method="bounded", options={"xatol": 1e-10})
    theta = float(res.x)
    log_w = stats.poisson.logpmf(S_GRID, theta) + _log_eta(S_GRID)
    w = np.exp(log_w - np.logaddexp.reduce(log_w))
    mean = float(np.sum(w * S_GRID))
    var = float(np.sum(w * S_GRID ** 2) - mean ** 2)
    return theta, mean / theta ** 2 - var / theta ** 2


def exact_posterior() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Mixture weights and Gamma shapes/rates of π(θ | s_dp) under the Gamma(25, 1) prior."""
    p = PRIOR_RATE / (PRIOR_RATE + 1.0)
    log_w = stats.nbinom.logpmf(S_GRID, PRIOR_SHAPE, p) + _log_eta(S_GRID)
    w = np.exp(log_w - np.logaddexp.reduce(log_w))
    return w, PRIOR_SHAPE + S_GRID, np.full(S_GRID.shape, PRIOR_RATE + 1.0)


def exact_posterior_cdf(theta: np.ndarray) -> np.ndarray:
    """CDF of the exact posterior at ``theta``."""
    w, shape, rate = exact_posterior()
    return np.sum(w * stats.gamma.cdf(np.asarray(theta)[..., None], shape, scale=1.0 / rate),
                  axis=-1)


def exact_posterior_moments() -> tuple[float, float]:
    """Mean and standard deviation of the exact posterior."""
    w, shape, rate = exact_posterior()
    mean = float(np.sum(w * shape / rate))
    second = float(np.sum(w * (shape / rate ** 2 + (shape / rate) ** 2)))
    return mean, math.sqrt(second - mean ** 2)


# ------------------------------------------------------------------------- the analysis

def analyse(*, seed: int = 2020, n_iter: int = 60, n_samples: int = 20_000,
            n_draws: int = 20_000) -> dict:
    """Run MCEM and ABC and compare with the exact answers; a JSON-ready dict."""
    rng = Randomness.simulation(seed)
    noise = NoiseModel.from_budget("laplace", EPSILON)
    fit = mcem(S_DP, theta0=[S_DP], sample_unit=sample_unit, maximize=maximize,
               complete_log_likelihood=complete_log_likelihood, noise=noise, rng=rng.child(1),
               n_iter=n_iter, n_samples=n_samples)
    mle = float(fit.theta[0])
    info = float(fit.observed_information[0, 0])
    theta_exact, info_exact = exact_mle()
    abc = abc_posterior(S_DP, sample_prior=lambda n, g: g.gamma(PRIOR_SHAPE, 1.0 / PRIOR_RATE, n),
                        sample_data=lambda th, g: g.poisson(th), noise=noise, n_draws=n_draws,
                        rng=rng.child(2))
    post_mean, post_sd = exact_posterior_moments()
    ks = stats.kstest(abc.samples, exact_posterior_cdf)
    return {
        "mle": mle,
        "observed_information": info,
        "standard_error": 1.0 / math.sqrt(info),
        "naive_mle": S_DP,
        "naive_information": 1.0 / S_DP,
        "naive_standard_error": math.sqrt(S_DP),
        "exact_mle": theta_exact,
        "exact_observed_information": info_exact,
        "exact_log_likelihood_at_mle": exact_log_likelihood(theta_exact),
        "monte_carlo_log_likelihood_at_mle": monte_carlo_log_likelihood(
            S_DP, [theta_exact], sample_unit=sample_unit, noise=noise, n_samples=200_000,
            rng=rng.child(3)),
        "mcem_effective_sample_size": fit.effective_sample_size,
        "abc_posterior_mean": float(abc.samples.mean()),
        "abc_posterior_sd": float(abc.samples.std(ddof=1)),
        "exact_posterior_mean": post_mean,
        "exact_posterior_sd": post_sd,
        "abc_acceptance_rate": abc.acceptance_rate,
        "abc_ks_statistic": float(ks.statistic),
        "abc_ks_pvalue": float(ks.pvalue),
        "epsilon": EPSILON,
        "s_dp": S_DP,
        "seed": seed,
        "randomness": rng.label,
    }


def _report(r: dict) -> str:
    return "\n".join([
        f"Poisson count with Laplace noise: epsilon = {r['epsilon']}, s_dp = {r['s_dp']}",
        "",
        f"{'':24}{'MLE':>10}{'information':>14}{'std. error':>12}",
        f"{'MCEM (Louis)':24}{r['mle']:>10.3f}{r['observed_information']:>14.5f}"
        f"{r['standard_error']:>12.3f}",
        f"{'exact (summation)':24}{r['exact_mle']:>10.3f}{r['exact_observed_information']:>14.5f}"
        f"{1 / math.sqrt(r['exact_observed_information']):>12.3f}",
        f"{'naive (s_dp as exact)':24}{r['naive_mle']:>10.3f}{r['naive_information']:>14.5f}"
        f"{r['naive_standard_error']:>12.3f}",
        "",
        f"log-likelihood at the exact MLE: exact {r['exact_log_likelihood_at_mle']:.4f}, "
        f"Monte Carlo {r['monte_carlo_log_likelihood_at_mle']:.4f}",
        "",
        "posterior under Gamma(25, 1):  mean      sd",
        f"  exact ABC ({r['abc_acceptance_rate']:.1%} accepted) {r['abc_posterior_mean']:7.3f} "
        f"{r['abc_posterior_sd']:7.3f}",
        f"  exact by summation        {r['exact_posterior_mean']:7.3f} "
        f"{r['exact_posterior_sd']:7.3f}",
        f"  KS test of the ABC draws against the exact posterior: D = "
        f"{r['abc_ks_statistic']:.4f}, p = {r['abc_ks_pvalue']:.2f}",
        "",
        r["randomness"],
    ])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--seed", type=int, default=2020, help="simulation seed (default 2020)")
    parser.add_argument("--n-samples", type=int, default=20_000,
                        help="importance samples per E-step (default 20000)")
    parser.add_argument("--n-draws", type=int, default=20_000,
                        help="ABC posterior draws (default 20000)")
    args = parser.parse_args(argv)
    result = analyse(seed=args.seed, n_samples=args.n_samples, n_draws=args.n_draws)
    print(json.dumps(result, indent=2) if args.json else _report(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
