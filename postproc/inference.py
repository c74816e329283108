"""Inference from privatized data: exact ABC and Monte Carlo EM (Gong 2020; docs/inference.md).

A privacy mechanism releases ``s_dp = s + noise`` where ``s`` are confidential statistics with
a model ``π(s | θ)`` and the noise law ``η`` is public. Treating ``s_dp`` as if it were ``s``
("naive" analysis) biases estimates and overstates their precision. Both methods here use only
the ability to *simulate* ``s`` from the model and to *evaluate* the noise density:

* :func:`abc_posterior` — Gong's Algorithm 3: draw ``θ ~ π₀``, ``s ~ π(s | θ)``, accept with
  probability ``η(s_dp − s) / max η``. Accepted draws are **exact** draws from ``π(θ | s_dp)``
  (the acceptance probability is proportional to the likelihood of ``s_dp`` given ``s``).
* :func:`mcem` — Monte Carlo EM with an importance-sampling E-step, and the observed Fisher
  information by Louis' method; :func:`monte_carlo_log_likelihood` estimates the observed-data
  log-likelihood for checks.

The model is the user's: plain callables that take a numpy ``Generator`` for their randomness.
The noise is a :class:`NoiseModel` over a mechanism of :mod:`hierarchy.mechanisms`, or any object
with a ``log_density(noise)`` method (elementwise) and a ``log_density_max`` attribute.

All randomness comes from the ``rng`` argument, normalised by
:func:`hierarchy.randomness.as_randomness`; this is statistical (not privacy) randomness, so it
is drawn from that source's ``.generator``. ``rng=None`` is release mode: unpredictable and not
reproducible; pass an integer seed for reproducible runs.

Examples
--------
Poisson counts with Laplace noise (ε = 0.2), one observed value:

>>> noise = NoiseModel.from_budget("laplace", 0.2)
>>> result = mcem(37.4, theta0=[30.0],
...               sample_unit=lambda th, m, g: g.poisson(th[0], m),
...               maximize=lambda s, w: [np.sum(w * s) / np.sum(w)],
...               complete_log_likelihood=lambda s, th: s * np.log(th[0]) - th[0],
...               noise=noise, rng=1, n_iter=40, n_samples=4000)
>>> round(float(result.theta[0]))
37
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np
from scipy.special import logsumexp

from hierarchy.mechanisms import Mechanism, get_mechanism
from hierarchy.randomness import as_randomness
from postproc.errors import PostprocError

__all__ = ["NoiseModel", "ABCResult", "abc_posterior", "MCEMResult", "mcem",
           "monte_carlo_log_likelihood", "louis_information"]


# --------------------------------------------------------------------------------------------
# Noise
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class NoiseModel:
    """The public law of a mechanism's noise: its log density, maximum, and a sampler.

    Parameters
    ----------
    mechanism : str or hierarchy.mechanisms.Mechanism
        ``'laplace'``, ``'gaussian'``, ``'geometric'`` or ``'discrete_gaussian'``.
    parameter : float
        The mechanism's noise parameter (Laplace scale, σ², geometric z), as
        ``mechanism.parameter(budget, sensitivity)`` returns it.

    Raises
    ------
    PostprocError
        If the mechanism is unknown or the parameter invalid.

    Examples
    --------
    >>> noise = NoiseModel.from_budget("laplace", 0.2)
    >>> noise.parameter, round(noise.log_density_max, 4)
    (5.0, -2.3026)
    >>> noise.log_density(np.array([0.0, 5.0])).round(4)
    array([-2.3026, -3.3026])
    """

    mechanism: Mechanism
    parameter: float

    def __post_init__(self) -> None:
        try:
            mech = get_mechanism(self.mechanism)
            value = mech.check_parameter(self.parameter)
        except ValueError as exc:
            raise PostprocError(f"invalid noise model: {exc}") from None
        object.__setattr__(self, "mechanism", mech)
        object.__setattr__(self, "parameter", float(value))

    @classmethod
    def from_budget(cls, mechanism: str | Mechanism, budget: Any, *,
                    sensitivity: float = 1.0) -> "NoiseModel":
        """The noise of ``mechanism`` answering a sensitivity-Δ query with ``budget``.

        For ε = ∞ there is no noise; use the complete-data analysis instead.

        Parameters
        ----------
        mechanism : str or Mechanism
            A registered mechanism (:func:`hierarchy.mechanisms.get_mechanism`).
        budget : PureDP, ZCDP or float
            A typed budget (:class:`hierarchy.budget.PureDP`, :class:`~hierarchy.budget.ZCDP`),
            or a bare ε (pure-DP mechanisms) or ρ (zCDP mechanisms), as
            :meth:`Mechanism.parameter <hierarchy.mechanisms.Mechanism.parameter>` reads it.
        sensitivity : float, optional
            Δ of the query. Default 1.

        Returns
        -------
        NoiseModel

        Raises
        ------
        PostprocError
            On an unknown mechanism, an invalid budget, or a typed budget the mechanism cannot
            spend (a zCDP mechanism under ``PureDP``).

        Examples
        --------
        >>> from hierarchy.budget import PureDP, ZCDP
        >>> (NoiseModel.from_budget("laplace", PureDP("1/5"))
        ...  == NoiseModel.from_budget("laplace", 0.2))
        True
        >>> NoiseModel.from_budget("gaussian", ZCDP("1/2"), sensitivity=2).parameter
        4.0
        """
        try:
            mech = get_mechanism(mechanism)
            return cls(mech, mech.parameter(budget, sensitivity))
        except ValueError as exc:
            raise PostprocError(f"invalid noise model: {exc}") from None

    def log_density(self, noise: Any) -> np.ndarray:
        """Elementwise log density (log pmf for discrete mechanisms) of ``noise``."""
        return np.asarray(self.mechanism.logpmf(noise, self.parameter), dtype=float)

    @property
    def log_density_max(self) -> float:
        """The largest log density: every registered noise law is symmetric with mode 0."""
        return float(self.log_density(np.zeros(1))[0])

    def sample(self, size: int | tuple[int, ...], rng: Any = None) -> np.ndarray:
        """Noise draws through the mechanism's own sampler (``rng`` as in hierarchy)."""
        return self.mechanism.sample(self.parameter, size, rng)


def _check_noise(noise: Any) -> None:
    if not callable(getattr(noise, "log_density", None)) or not hasattr(noise, "log_density_max"):
        raise PostprocError(f"noise must be a NoiseModel or have a log_density(noise) method and "
                            f"a log_density_max attribute, not {type(noise).__name__}")


def _unit_log_density(noise: Any, observed: np.ndarray, samples: np.ndarray) -> np.ndarray:
    """log η(observed_j − samples_i) summed over a unit's coordinates: shape (m, n_units)."""
    unit_axes = tuple(range(2, 2 + observed.ndim - 1))
    diff = observed[None, ...] - samples[:, None, ...]
    return np.sum(noise.log_density(diff), axis=unit_axes) if unit_axes else \
        noise.log_density(diff)


def _as_units(observed: Any) -> np.ndarray:
    obs = np.asarray(observed, dtype=float)
    if obs.ndim == 0:
        obs = obs.reshape(1)
    if obs.size == 0 or not np.all(np.isfinite(obs)):
        raise PostprocError("observed privatized data must be a non-empty array of finite "
                            "numbers, one row per independent unit")
    return obs


def _count(value: Any, name: str, minimum: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise PostprocError(f"{name} must be an integer >= {minimum}, not {value!r}")
    return int(value)


# --------------------------------------------------------------------------------------------
# ABC with exact posterior (Gong 2020, Algorithm 3)
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ABCResult:
    """Exact posterior draws from :func:`abc_posterior`.

    Parameters
    ----------
    samples : numpy.ndarray
        Accepted θ, shape ``(n_draws, ...)``: exact draws from π(θ | s_dp).
    n_proposed : int
        Number of (θ, s) proposals drawn.
    acceptance_rate : float
        Accepted / proposed (over all proposals drawn, including those past ``n_draws``).

    Examples
    --------
    Two Poisson counts with a common rate θ ~ Gamma(10, 1), released with Laplace noise at
    ε = 0.5 each:

    >>> noise = NoiseModel.from_budget("laplace", 0.5)
    >>> res = abc_posterior([12.3, 8.9], sample_prior=lambda n, g: g.gamma(10.0, 1.0, n),
    ...                     sample_data=lambda th, g: g.poisson(th[:, None], (th.size, 2)),
    ...                     noise=noise, n_draws=500, rng=1)
    >>> res
    ABCResult(n_proposed=100000, acceptance_rate=0.08177)
    >>> res.samples.shape, np.percentile(res.samples, [2.5, 97.5]).round(1).tolist()
    ((500,), [6.5, 14.5])
    """

    samples: np.ndarray = field(repr=False)
    n_proposed: int
    acceptance_rate: float


def abc_posterior(observed: Any, *, sample_prior: Callable[[int, np.random.Generator], Any],
                  sample_data: Callable[[np.ndarray, np.random.Generator], Any], noise: Any,
                  n_draws: int, rng: Any = None, batch_size: int = 100_000,
                  max_proposals: int = 100_000_000) -> ABCResult:
    """Exact posterior draws of θ given privatized data, by ABC (Gong 2020, Algorithm 3).

    Repeat in vectorized batches: θᵢ ~ π₀ (``sample_prior``), sᵢ ~ π(s | θᵢ) (``sample_data``),
    accept with probability ``Πⱼ η(s_dp,ⱼ − sᵢⱼ) / (max η)^J`` over the J coordinates of the
    data. Because the acceptance probability is proportional to the likelihood
    p(s_dp | sᵢ), accepted θᵢ are exact (not approximate) posterior draws. The acceptance rate
    is p(s_dp)/(max η)^J, so the method suits low-dimensional statistics.

    Parameters
    ----------
    observed : array_like
        The privatized statistics s_dp.
    sample_prior : callable ``(size, generator) -> array``
        ``size`` draws of θ (leading axis ``size``).
    sample_data : callable ``(thetas, generator) -> array``
        One confidential data set per θ, shape ``(size,) + observed.shape``.
    noise : NoiseModel or object with ``log_density`` and ``log_density_max``
        The mechanism's noise law η.
    n_draws : int
        Number of posterior draws wanted.
    rng : None, int, numpy.random.Generator or Randomness, optional
        Source of randomness (``None``: secure, not reproducible).
    batch_size : int, optional
        Proposals per batch. Default 100,000.
    max_proposals : int, optional
        Give up (with an error) after this many proposals. Default 1e8.

    Returns
    -------
    ABCResult

    Raises
    ------
    PostprocError
        On malformed input, data of the wrong shape, or too low an acceptance rate.

    Examples
    --------
    >>> noise = NoiseModel.from_budget("laplace", 0.2)
    >>> res = abc_posterior(37.4, sample_prior=lambda n, g: g.gamma(25.0, 1.0, n),
    ...                     sample_data=lambda th, g: g.poisson(th), noise=noise,
    ...                     n_draws=2000, rng=3)
    >>> res.samples.shape, round(float(res.samples.mean()), 1)  # exact posterior mean: 28.58
    ((2000,), 28.6)
    """
    obs = np.asarray(observed, dtype=float)
    if not np.all(np.isfinite(obs)):
        raise PostprocError("observed privatized data must be finite numbers")
    _check_noise(noise)
    n_draws = _count(n_draws, "n_draws")
    batch_size = _count(batch_size, "batch_size")
    max_proposals = _count(max_proposals, "max_proposals")
    gen = as_randomness(rng).generator
    log_max = float(noise.log_density_max) * max(obs.size, 1)
    accepted: list[np.ndarray] = []
    n_accepted = n_proposed = 0
    while n_accepted < n_draws:
        if n_proposed >= max_proposals:
            raise PostprocError(
                f"ABC accepted only {n_accepted} of {n_proposed} proposals (wanted {n_draws}); "
                f"the prior predictive rarely comes close to the observed data. Raise "
                f"max_proposals, or use mcem for high-dimensional data")
        size = min(batch_size, max_proposals - n_proposed)
        thetas = np.asarray(sample_prior(size, gen))
        data = np.asarray(sample_data(thetas, gen), dtype=float)
        if thetas.shape[:1] != (size,) or data.shape != (size,) + obs.shape:
            raise PostprocError(
                f"sample_prior must return {size} draws and sample_data one data set of shape "
                f"{obs.shape} per draw, i.e. {(size,) + obs.shape}; got {thetas.shape} and "
                f"{data.shape}")
        log_eta = noise.log_density(obs[None, ...] - data).reshape(size, -1).sum(axis=1)
        keep = np.log(gen.random(size)) < log_eta - log_max
        accepted.append(thetas[keep])
        n_accepted += int(keep.sum())
        n_proposed += size
    samples = np.concatenate(accepted)[:n_draws]
    return ABCResult(samples=samples, n_proposed=n_proposed,
                     acceptance_rate=n_accepted / n_proposed)


# --------------------------------------------------------------------------------------------
# Monte Carlo EM
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class MCEMResult:
    """Maximum likelihood from privatized data by :func:`mcem`.

    Parameters
    ----------
    theta : numpy.ndarray
        The MLE θ̂ (shape ``(p,)``): the mean of the last ``n_average`` EM iterates.
    observed_information : numpy.ndarray
        Observed Fisher information at θ̂ by Louis' method, ``(p, p)``.
    covariance : numpy.ndarray
        Its inverse, or NaN (with a ``RuntimeWarning``) when the information is not positive
        definite.
    standard_errors : numpy.ndarray
        Square roots of the covariance's diagonal.
    history : numpy.ndarray
        θ⁽⁰⁾ … θ⁽ᵀ⁾, shape ``(n_iter + 1, p)``.
    effective_sample_size : float
        Smallest importance-sampling effective sample size over units at θ̂ (of
        ``final_samples`` draws); small values mean an unreliable E-step.

    Examples
    --------
    Three Poisson counts released with Laplace noise (ε = 0.5): the standard error accounts for
    the noise (a naive analysis of the released values would give √(12.1 / 3) ≈ 2.0):

    >>> noise = NoiseModel.from_budget("laplace", 0.5)
    >>> result = mcem([12.3, 8.9, 15.2], theta0=[5.0],
    ...               sample_unit=lambda th, m, g: g.poisson(th[0], m),
    ...               maximize=lambda s, w: [np.sum(w * s) / np.sum(w)],
    ...               complete_log_likelihood=lambda s, th: s * np.log(th[0]) - th[0],
    ...               noise=noise, rng=2, n_iter=30, n_samples=2000)
    >>> result.theta.round(2), result.standard_errors.round(2)
    (array([12.03]), array([2.43]))
    >>> result.history.shape, result.history[:3, 0].round(2).tolist()   # θ⁽⁰⁾, θ⁽¹⁾, θ⁽²⁾
    ((31, 1), [5.0, 7.68, 10.11])
    """

    theta: np.ndarray
    observed_information: np.ndarray
    covariance: np.ndarray
    standard_errors: np.ndarray
    history: np.ndarray = field(repr=False)
    effective_sample_size: float


def _normalized_weights(observed: np.ndarray, samples: np.ndarray,
                        noise: Any) -> tuple[np.ndarray, np.ndarray]:
    """Per-unit self-normalized importance weights (m, n) and each unit's ESS (n,)."""
    log_w = _unit_log_density(noise, observed, samples)
    if np.any(np.isnan(log_w)):
        raise PostprocError("the noise log density returned NaN; check the noise model")
    log_norm = logsumexp(log_w, axis=0)
    if np.any(~np.isfinite(log_norm)):
        bad = np.flatnonzero(~np.isfinite(log_norm))[:5].tolist()
        raise PostprocError(f"no simulated unit is compatible with observed units {bad} (all "
                            f"importance weights are 0); check that the model can produce "
                            f"them, or raise n_samples")
    w = np.exp(log_w - log_norm)
    ess = 1.0 / np.sum(w * w, axis=0)
    return w, ess


def _draw_units(sample_unit: Callable, theta: np.ndarray, m: int, gen: np.random.Generator,
                unit_shape: tuple[int, ...]) -> np.ndarray:
    samples = np.asarray(sample_unit(theta, m, gen), dtype=float)
    if samples.shape != (m,) + unit_shape:
        raise PostprocError(f"sample_unit(theta, {m}, generator) must return shape "
                            f"{(m,) + unit_shape} (one row per simulated unit), "
                            f"not {samples.shape}")
    return samples


def _finite_difference_derivatives(f: Callable, samples: np.ndarray,
                                   theta: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per-sample gradient (m, p) and Hessian (m, p, p) of f(samples, θ) in θ.

    Central differences with steps h_k = 1e−4 · max(1, |θ_k|) (about ε_mach^{1/4}, which balances
    truncation and rounding for second differences).
    """
    p = theta.size
    h = 1e-4 * np.maximum(1.0, np.abs(theta))

    def f_at(shift: np.ndarray) -> np.ndarray:
        return np.asarray(f(samples, theta + shift), dtype=float)

    f0 = f_at(np.zeros(p))
    m = f0.shape[0]
    grad = np.empty((m, p))
    hess = np.empty((m, p, p))
    eye = np.eye(p)
    plus = [f_at(h[k] * eye[k]) for k in range(p)]
    minus = [f_at(-h[k] * eye[k]) for k in range(p)]
    for k in range(p):
        grad[:, k] = (plus[k] - minus[k]) / (2.0 * h[k])
        hess[:, k, k] = (plus[k] - 2.0 * f0 + minus[k]) / (h[k] * h[k])
        for j in range(k):
            ek, ej = h[k] * eye[k], h[j] * eye[j]
            value = (f_at(ek + ej) - f_at(ek - ej) - f_at(ej - ek) + f_at(-ek - ej)) \
                / (4.0 * h[k] * h[j])
            hess[:, k, j] = hess[:, j, k] = value
    return grad, hess


def louis_information(observed: Any, theta: Any, *, sample_unit: Callable,
                      complete_log_likelihood: Callable, noise: Any, n_samples: int = 40_000,
                      rng: Any = None) -> tuple[np.ndarray, float]:
    """Observed Fisher information of privatized data at θ by Louis' method.

    For independent units j with privatized values s_dp,ⱼ and missing confidential values sⱼ,
    Louis' identity gives ``I(θ) = Σⱼ ( E[−∇² log p(sⱼ | θ) | s_dp,ⱼ] − Var[∇ log p(sⱼ | θ) |
    s_dp,ⱼ] )``. The conditional expectations are importance-sampling estimates with draws
    sᵢ ~ π(s | θ) and weights ∝ η(s_dp,ⱼ − sᵢ); the gradient and Hessian of the user's
    complete-data log-likelihood are central finite differences in θ. At the MLE the weighted
    mean score is ≈ 0 and this is the negative Hessian of the observed-data log-likelihood.

    Parameters
    ----------
    observed : array_like
        Privatized data, shape ``(n_units, *unit_shape)`` (a scalar is one unit).
    theta : array_like
        Parameter, shape ``(p,)``.
    sample_unit : callable ``(theta, size, generator) -> array``
        ``size`` confidential units from π(s | θ), shape ``(size, *unit_shape)``.
    complete_log_likelihood : callable ``(samples, theta) -> array``
        log p(sᵢ | θ) for each sample, shape ``(size,)`` (additive constants may be dropped).
    noise : NoiseModel or compatible
    n_samples : int, optional
        Importance samples. Default 40,000.
    rng : None, int, numpy.random.Generator or Randomness, optional

    Returns
    -------
    information : numpy.ndarray
        ``(p, p)``.
    effective_sample_size : float
        Smallest ESS over units.

    Raises
    ------
    PostprocError
        On malformed input.

    Examples
    --------
    >>> info, ess = louis_information(
    ...     37.4, [37.24], sample_unit=lambda th, m, g: g.poisson(th[0], m),
    ...     complete_log_likelihood=lambda s, th: s * np.log(th[0]) - th[0],
    ...     noise=NoiseModel.from_budget("laplace", 0.2), rng=0)
    >>> round(float(info[0, 0]), 3)  # exact: 0.0158 at the MLE 37.24
    0.016
    """
    obs = _as_units(observed)
    th = np.atleast_1d(np.asarray(theta, dtype=float))
    _check_noise(noise)
    m = _count(n_samples, "n_samples", 2)
    gen = as_randomness(rng).generator
    samples = _draw_units(sample_unit, th, m, gen, obs.shape[1:])
    w, ess = _normalized_weights(obs, samples, noise)
    grad, hess = _finite_difference_derivatives(complete_log_likelihood, samples, th)
    total_w = w.sum(axis=1)                              # Σ_j w_ij
    mean_grad = w.T @ grad                               # (n, p): E_j[score]
    expected_neg_hess = -np.einsum("i,ikl->kl", total_w, hess)
    second_moment = np.einsum("i,ik,il->kl", total_w, grad, grad)
    information = expected_neg_hess - second_moment + mean_grad.T @ mean_grad
    return 0.5 * (information + information.T), float(ess.min())


def mcem(observed: Any, *, theta0: Any, sample_unit: Callable, maximize: Callable,
         complete_log_likelihood: Callable, noise: Any, rng: Any = None, n_iter: int = 60,
         n_samples: int = 10_000, n_average: int | None = None,
         final_samples: int | None = None) -> MCEMResult:
    """Maximum likelihood from privatized data by Monte Carlo EM, with Louis' information.

    The data are ``n`` independent units with privatized values ``s_dp,ⱼ = sⱼ + noise``; the
    confidential ``sⱼ`` are missing. Each iteration:

    * **E-step (importance sampling)**: draw s₁ … s_m ~ π(s | θ⁽ᵗ⁾) (``sample_unit``); unit j's
      conditional law of sⱼ given s_dp,ⱼ is approximated by weights wᵢⱼ ∝ η(s_dp,ⱼ − sᵢ),
      normalised over i. The draws are shared by all units, so the expected complete-data
      log-likelihood is ``Σᵢ Wᵢ log p(sᵢ | θ)`` with ``Wᵢ = Σⱼ wᵢⱼ`` (the Wᵢ sum to n).
    * **M-step**: θ⁽ᵗ⁺¹⁾ = ``maximize(samples, W)``, the user's weighted complete-data MLE.

    Monte Carlo noise keeps the iterates fluctuating around the MLE, so the estimate is the mean
    of the last ``n_average`` iterates; the observed information is computed once at that
    estimate by :func:`louis_information` with ``final_samples`` fresh draws. Check
    ``history`` for convergence (EM converges slowly when much information is missing, i.e. when
    the noise is large relative to the data's spread) and ``effective_sample_size`` for the
    E-step's reliability (a warning is issued below 100).

    Louis' identity subtracts the missing information from the complete-data information; when
    nearly all information is missing (a variance parameter near 0, or a flat ridge) the two
    nearly cancel and the Monte Carlo estimate can be indefinite. Then ``covariance`` is NaN and a
    warning says so; a caller may still use a block of ``observed_information`` (e.g. conditional
    on a boundary parameter).

    Parameters
    ----------
    observed : array_like
        Privatized data, shape ``(n_units, *unit_shape)``; a scalar or 1-D array means scalar
        units.
    theta0 : array_like
        Starting parameter, shape ``(p,)``.
    sample_unit : callable ``(theta, size, generator) -> array``
        ``size`` confidential units from π(s | θ), shape ``(size, *unit_shape)``.
    maximize : callable ``(samples, weights) -> array_like``
        The θ maximizing ``Σᵢ weights[i] · log p(samples[i] | θ)``.
    complete_log_likelihood : callable ``(samples, theta) -> array``
        log p(sᵢ | θ) per sample, shape ``(size,)`` (for the information; constants may be
        dropped).
    noise : NoiseModel or object with ``log_density`` and ``log_density_max``
        The mechanism's noise law η.
    rng : None, int, numpy.random.Generator or Randomness, optional
        Source of randomness (``None``: secure, not reproducible).
    n_iter : int, optional
        EM iterations. Default 60.
    n_samples : int, optional
        Importance samples per E-step. Default 10,000.
    n_average : int, optional
        Iterates averaged for the estimate. Default ``max(1, n_iter // 4)``.
    final_samples : int, optional
        Importance samples for the information. Default ``4 * n_samples``.

    Returns
    -------
    MCEMResult

    Raises
    ------
    PostprocError
        On malformed input or callables returning the wrong shapes.

    Examples
    --------
    See the module docstring and ``examples/poisson_laplace_mcem.py``.

    >>> res = mcem([37.4], theta0=[30.0], sample_unit=lambda th, m, g: g.poisson(th[0], m),
    ...            maximize=lambda s, w: [np.sum(w * s) / np.sum(w)],
    ...            complete_log_likelihood=lambda s, th: s * np.log(th[0]) - th[0],
    ...            noise=NoiseModel.from_budget("laplace", 0.2), rng=0, n_iter=30,
    ...            n_samples=2000)
    >>> res.history.shape, res.observed_information.shape
    ((31, 1), (1, 1))
    """
    obs = _as_units(observed)
    settings = _EMSettings.checked(theta0, noise, n_iter, n_samples, n_average, final_samples)
    gen = as_randomness(rng).generator
    history = _em_iterations(obs, settings, sample_unit, maximize, noise, gen)
    estimate = history[-settings.n_average:].mean(axis=0)
    information, ess = louis_information(obs, estimate, sample_unit=sample_unit,
                                         complete_log_likelihood=complete_log_likelihood,
                                         noise=noise, n_samples=settings.final_samples, rng=gen)
    if ess < 100:
        warnings.warn(f"MCEM: the importance-sampling effective sample size is only {ess:.0f} "
                      f"for some unit; raise n_samples", RuntimeWarning, stacklevel=2)
    covariance = _covariance(information)
    with np.errstate(invalid="ignore"):
        se = np.sqrt(np.diag(covariance))
    return MCEMResult(theta=estimate, observed_information=information, covariance=covariance,
                      standard_errors=se, history=history, effective_sample_size=ess)


@dataclass(frozen=True)
class _EMSettings:
    """The checked settings of :func:`mcem`: the starting parameter, the iterations, the
    importance samples per E-step, the iterates averaged and the information's samples."""

    theta0: np.ndarray
    n_iter: int
    n_samples: int
    n_average: int
    final_samples: int

    @classmethod
    def checked(cls, theta0: Any, noise: Any, n_iter: Any, n_samples: Any, n_average: Any,
                final_samples: Any) -> _EMSettings:
        """Check them in order (and the noise after ``theta0``); the defaults filled in."""
        theta = np.atleast_1d(np.asarray(theta0, dtype=float))
        if theta.ndim != 1 or not np.all(np.isfinite(theta)):
            raise PostprocError(f"theta0 must be a finite 1-D parameter vector, not {theta0!r}")
        _check_noise(noise)
        n_iter = _count(n_iter, "n_iter")
        m = _count(n_samples, "n_samples", 2)
        n_average = max(1, n_iter // 4) if n_average is None else _count(n_average, "n_average")
        if n_average > n_iter:
            raise PostprocError(f"n_average ({n_average}) cannot exceed n_iter ({n_iter})")
        final = 4 * m if final_samples is None else _count(final_samples, "final_samples", 2)
        return cls(theta0=theta, n_iter=n_iter, n_samples=m, n_average=n_average,
                   final_samples=final)


def _em_iterations(obs: np.ndarray, settings: _EMSettings, sample_unit: Callable,
                   maximize: Callable, noise: Any, gen: np.random.Generator) -> np.ndarray:
    """θ⁽⁰⁾ … θ⁽ᵀ⁾ of ``n_iter`` EM iterations: each draws the E-step's importance samples and
    weights at the current θ, then the M-step is the user's weighted MLE."""
    theta = settings.theta0
    history = [theta]
    for _ in range(settings.n_iter):
        samples = _draw_units(sample_unit, theta, settings.n_samples, gen, obs.shape[1:])
        w, _ = _normalized_weights(obs, samples, noise)
        new = np.atleast_1d(np.asarray(maximize(samples, w.sum(axis=1)), dtype=float))
        if new.shape != theta.shape or not np.all(np.isfinite(new)):
            raise PostprocError(f"maximize(samples, weights) must return a finite parameter of "
                                f"shape {theta.shape}, not {new!r}")
        theta = new
        history.append(theta)
    return np.array(history)


def _covariance(information: np.ndarray) -> np.ndarray:
    """The inverse of the observed information, or NaN with a warning (to :func:`mcem`'s
    caller) when it is not positive definite."""
    smallest = float(np.linalg.eigvalsh(information).min())
    if smallest > 0:
        return np.linalg.inv(information)
    warnings.warn(
        f"MCEM: the observed information is not positive definite at the estimate (smallest "
        f"eigenvalue {smallest:.3g}): the maximum may lie on the boundary of the parameter "
        f"space or on a flat ridge, EM may not have converged (see history), or the Monte "
        f"Carlo error is too large (raise final_samples). Covariance and standard errors are "
        f"NaN; observed_information is still returned", RuntimeWarning, stacklevel=3)
    return np.full_like(information, np.nan)


def monte_carlo_log_likelihood(observed: Any, theta: Any, *, sample_unit: Callable, noise: Any,
                               n_samples: int = 100_000, rng: Any = None) -> float:
    """The observed-data log-likelihood ``Σⱼ log E_{s ~ π(s|θ)}[η(s_dp,ⱼ − s)]`` by Monte Carlo.

    Parameters
    ----------
    observed : array_like
        Privatized data, shape ``(n_units, *unit_shape)`` (a scalar is one unit).
    theta : array_like
    sample_unit : callable ``(theta, size, generator) -> array``
    noise : NoiseModel or compatible
    n_samples : int, optional
        Default 100,000.
    rng : None, int, numpy.random.Generator or Randomness, optional

    Returns
    -------
    float

    Raises
    ------
    PostprocError
        On malformed input.

    Examples
    --------
    >>> ll = monte_carlo_log_likelihood(37.4, [36.0],
    ...                                 sample_unit=lambda th, m, g: g.poisson(th[0], m),
    ...                                 noise=NoiseModel.from_budget("laplace", 0.2), rng=0)
    >>> round(ll, 2)  # exact, by summation over s: -3.0773
    -3.08
    """
    obs = _as_units(observed)
    th = np.atleast_1d(np.asarray(theta, dtype=float))
    _check_noise(noise)
    m = _count(n_samples, "n_samples")
    gen = as_randomness(rng).generator
    samples = _draw_units(sample_unit, th, m, gen, obs.shape[1:])
    log_w = _unit_log_density(noise, obs, samples)
    return float(np.sum(logsumexp(log_w, axis=0) - math.log(m)))
