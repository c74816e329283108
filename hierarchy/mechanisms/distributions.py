"""The noise laws: fast floating-point samplers, pmfs and densities, variances.

* two-sided geometric (discrete Laplace): inverse-CDF sampler on 53-bit uniforms (or the exact
  sampler of :mod:`hierarchy.mechanisms._exact` with ``exact=True``), pmf, log pmf, variance;
* discrete Gaussian: pmf, log pmf and variance (its sampler is exact, in ``_exact``);
* continuous Laplace and Gaussian: samplers, log densities, variances.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from hierarchy.errors import HierarchyError
from hierarchy.mechanisms._checks import _integer_mask, _shape
from hierarchy.mechanisms._exact import (
    DEFAULT_MAX_DENOMINATOR,
    round_up_to_rational,
    sample_discrete_laplace_exact,
)
from hierarchy.mechanisms._inversion import _table_size, sample_two_sided_geometric_inversion
from hierarchy.numbers import positive
from hierarchy.randomness import as_randomness

__all__ = [
    "sample_two_sided_geometric", "two_sided_geometric_pmf", "two_sided_geometric_logpmf",
    "two_sided_geometric_variance",
    "discrete_gaussian_pmf", "discrete_gaussian_logpmf", "discrete_gaussian_variance",
    "sample_laplace", "laplace_logpdf", "laplace_variance",
    "sample_gaussian", "gaussian_logpdf", "gaussian_variance",
]

_CHUNK = 1 << 16                          # samples per chunk of the inverse-CDF samplers
_MIN_Z = 1e-15                            # below this a geometric draw may overflow int64
_MAX_INVERSION_TABLE = 100_000            # exact geometric: inversion table size limit
_TWO_POW_53_INV = 1.0 / 9007199254740992.0


# ---------------------------------------------------------------------------------------------
# two-sided geometric (discrete Laplace), inverse CDF
# ---------------------------------------------------------------------------------------------
def sample_two_sided_geometric(z: float, size: int | tuple[int, ...], rng: Any = None, *,
                               exact: bool = False,
                               max_denominator: int = DEFAULT_MAX_DENOMINATOR) -> np.ndarray:
    """Draw two-sided geometric noise, ``P[X = k] = (1 - e^-z)/(1 + e^-z) e^(-z|k|)``.

    By default ``X = G1 - G2`` with ``G = floor(log(U) / log(1 - p))``, ``p = 1 - e^-z``
    (``log(1 - p) = -z`` is used exactly) and ``U`` a 53-bit uniform on (0, 1]; each pair of
    uniforms comes from consecutive random words, so the first ``n`` draws of a stream do not
    depend on how many are requested. This inverse-CDF method is approximate at the level of the
    uniforms' 2**-53 resolution: tail probabilities below about 1e-16 are not represented exactly.
    ``exact=True`` samples exactly instead, with ``z = 1/scale`` for the scale ``1/z`` rounded up
    to a rational (never less noise): by inversion on 64-bit words with exact tie-breaking
    (:mod:`hierarchy.mechanisms._inversion`; no floating point touches a draw) while its table
    of about ``44/z`` thresholds is small (``z`` above about 4e-4), else by
    :func:`sample_discrete_laplace_exact`. **Release mode always samples exactly** (floating-point
    samplers leak through their rounding, Mironov 2012); the inverse CDF serves seeded
    simulations only.

    Parameters
    ----------
    z : float
        Positive finite parameter (``epsilon / sensitivity``); at least 1e-15.
    size : int or tuple of int
        Shape of the output.
    rng : None, int, numpy.random.Generator or Randomness, optional
        Source of randomness (see :func:`hierarchy.randomness.as_randomness`); ``None`` is
        release mode.
    exact : bool, optional
        Use the exact integer sampler (always used in release mode).
    max_denominator : int, optional
        Denominator bound for rounding ``1/z`` up for the exact sampler.

    Returns
    -------
    numpy.ndarray of int64, shape ``size``

    Raises
    ------
    HierarchyError
        If ``z`` is not positive and finite, is below 1e-15, or ``size`` is invalid.

    Examples
    --------
    >>> from hierarchy.randomness import Randomness
    >>> x = sample_two_sided_geometric(1.0, 5, Randomness.simulation(3))
    >>> x.shape, x.dtype
    ((5,), dtype('int64'))
    >>> bool(np.array_equal(x, sample_two_sided_geometric(1.0, 5, Randomness.simulation(3))))
    True
    """
    given = z
    z = positive(z, "z")
    if z < _MIN_Z:
        raise HierarchyError(f"z = {z!r} is below {_MIN_Z}: the noise would not fit in int64")
    shape, n = _shape(size)
    source = as_randomness(rng)
    if exact or source.mode == "release":
        scale = 1 / positive(given, "z", exact=True)
        if isinstance(given, (float, np.floating)):
            scale = round_up_to_rational(scale, max_denominator=max_denominator)
        if _table_size(1 / scale) <= _MAX_INVERSION_TABLE:
            return sample_two_sided_geometric_inversion(1 / scale, n, source).reshape(shape)
        return sample_discrete_laplace_exact(scale, shape, source,
                                             max_denominator=max_denominator)
    out = np.empty(n, dtype=np.int64)
    for start in range(0, n, _CHUNK):
        stop = min(n, start + _CHUNK)
        u = source.uniform(2 * (stop - start))
        np.log(u, out=u)
        np.divide(u, -z, out=u)
        np.floor(u, out=u)
        out[start:stop] = u[0::2] - u[1::2]   # both are exact integers below 2**53
    return out.reshape(shape)


def _refuse_float_release(source, name: str) -> None:
    """Floating-point noise in release mode is refused: its rounding leaks the true value."""
    if source.mode == "release":
        exact = "geometric" if name == "Laplace" else "discrete_gaussian"
        raise HierarchyError(f"continuous {name} noise is refused in release mode: floating-point "
                             "samples leak the value they protect through their rounding "
                             f"(Mironov 2012); use the {exact!r} mechanism (exact integer "
                             "sampling), or simulation mode (a seed) for experiments")


def two_sided_geometric_logpmf(k: Any, z: float) -> np.ndarray:
    """Log pmf of the two-sided geometric distribution: ``log tanh(z/2) - z|k|``.

    Parameters
    ----------
    k : array_like
        Points; non-integers have probability 0 (log ``-inf``).
    z : float
        Positive finite parameter.

    Returns
    -------
    numpy.ndarray of float64

    Raises
    ------
    HierarchyError
        If ``z`` is not positive and finite.

    Examples
    --------
    >>> np.round(two_sided_geometric_logpmf([0, -2, 0.5], 1.0), 6)
    array([-0.771937, -2.771937, -inf])
    """
    z = positive(z, "z")
    values, integer = _integer_mask(k)
    log_norm = math.log(-math.expm1(-z)) - math.log1p(math.exp(-z))
    with np.errstate(invalid="ignore"):
        return np.where(integer, log_norm - z * np.abs(values), -np.inf)


def two_sided_geometric_pmf(k: Any, z: float) -> np.ndarray:
    """Pmf of the two-sided geometric distribution, ``(1 - e^-z)/(1 + e^-z) e^(-z|k|)``.

    Parameters
    ----------
    k : array_like
        Points; non-integers have probability 0.
    z : float
        Positive finite parameter.

    Returns
    -------
    numpy.ndarray of float64

    Raises
    ------
    HierarchyError
        If ``z`` is not positive and finite.

    Examples
    --------
    >>> np.round(two_sided_geometric_pmf([0, 1, -1], 1.0), 6)
    array([0.462117, 0.170003, 0.170003])
    """
    return np.exp(two_sided_geometric_logpmf(k, z))


def two_sided_geometric_variance(z: float) -> float:
    """Variance of the two-sided geometric distribution, ``2 e^-z / (1 - e^-z)^2``.

    Parameters
    ----------
    z : float
        Positive finite parameter.

    Returns
    -------
    float

    Raises
    ------
    HierarchyError
        If ``z`` is not positive and finite.

    Examples
    --------
    >>> round(two_sided_geometric_variance(0.25), 4)
    31.8339
    """
    z = positive(z, "z")
    return 2.0 * math.exp(-z) / math.expm1(-z) ** 2


# ---------------------------------------------------------------------------------------------
# discrete Gaussian
# ---------------------------------------------------------------------------------------------
def _discrete_gaussian_log_normalizer(sigma2: float) -> float:
    """``log sum_k exp(-k²/(2σ²))``, by direct summation or, for large σ², Jacobi's dual sum."""
    if sigma2 <= 1.0:
        k = np.arange(1, math.ceil(math.sqrt(2 * sigma2 * 50)) + 2)
        return math.log1p(2.0 * float(np.sum(np.exp(-k * k / (2 * sigma2)))))
    m = np.arange(1, 4)
    dual = float(np.sum(np.exp(-2 * math.pi ** 2 * sigma2 * m * m)))
    return 0.5 * math.log(2 * math.pi * sigma2) + math.log1p(2.0 * dual)


def discrete_gaussian_logpmf(k: Any, sigma2: Any) -> np.ndarray:
    """Log pmf of the discrete Gaussian, ``-k²/(2σ²) - log sum_j exp(-j²/(2σ²))``.

    The normalizing sum is computed directly for σ² <= 1 and by the Jacobi theta identity
    ``sum_j exp(-j²/(2σ²)) = sqrt(2πσ²) sum_m exp(-2π²σ²m²)`` above (both to double precision).

    Parameters
    ----------
    k : array_like
        Points; non-integers have probability 0 (log ``-inf``).
    sigma2 : float or Fraction
        Positive finite σ².

    Returns
    -------
    numpy.ndarray of float64

    Raises
    ------
    HierarchyError
        If ``sigma2`` is not positive and finite.

    Examples
    --------
    >>> np.round(discrete_gaussian_logpmf([0, 1, 2], 1.0), 6)
    array([-0.918939, -1.418939, -2.918939])
    """
    sigma2 = positive(sigma2, "sigma2")
    values, integer = _integer_mask(k)
    log_norm = _discrete_gaussian_log_normalizer(sigma2)
    with np.errstate(invalid="ignore"):
        return np.where(integer, -values * values / (2 * sigma2) - log_norm, -np.inf)


def discrete_gaussian_pmf(k: Any, sigma2: Any) -> np.ndarray:
    """Pmf of the discrete Gaussian ``N_Z(σ²)``.

    Parameters
    ----------
    k : array_like
        Points; non-integers have probability 0.
    sigma2 : float or Fraction
        Positive finite σ².

    Returns
    -------
    numpy.ndarray of float64

    Raises
    ------
    HierarchyError
        If ``sigma2`` is not positive and finite.

    Examples
    --------
    >>> np.round(discrete_gaussian_pmf([0, 1, 2], 0.3), 6)
    array([0.724482, 0.136837, 0.000922])
    """
    return np.exp(discrete_gaussian_logpmf(k, sigma2))


def discrete_gaussian_variance(sigma2: Any) -> float:
    """Variance of the discrete Gaussian ``N_Z(σ²)`` — not σ², which it only approaches.

    Computed by summing ``k² pmf(k)`` of the normalized pmf over ``|k| <= sqrt(100 σ²) + 2``
    (the rest is below ``e^-50``). For σ² > 1e8 that sum would be long; there the identity
    ``Var = σ² - 4π²σ⁴ sum_m m² e^(-2π²σ²m²) / sum_m e^(-2π²σ²m²)`` is used, which equals σ² to
    double precision.

    Parameters
    ----------
    sigma2 : float or Fraction
        Positive finite σ².

    Returns
    -------
    float

    Raises
    ------
    HierarchyError
        If ``sigma2`` is not positive and finite.

    Examples
    --------
    >>> round(discrete_gaussian_variance(0.3), 6), round(discrete_gaussian_variance(4.0), 6)
    (0.281054, 4.0)
    """
    sigma2 = positive(sigma2, "sigma2")
    if sigma2 > 1e8:
        m = np.arange(1, 4)
        weights = np.exp(-2 * math.pi ** 2 * sigma2 * m * m)
        correction = float(np.sum(m * m * weights)) / (1.0 + 2.0 * float(np.sum(weights)))
        return sigma2 - 8 * math.pi ** 2 * sigma2 ** 2 * correction
    k = np.arange(1, math.ceil(math.sqrt(100 * sigma2)) + 3, dtype=np.float64)
    pmf = discrete_gaussian_pmf(k, sigma2)
    return float(2.0 * np.sum(k * k * pmf))


# ---------------------------------------------------------------------------------------------
# continuous Laplace and Gaussian
# ---------------------------------------------------------------------------------------------
def sample_laplace(scale: float, size: int | tuple[int, ...], rng: Any = None) -> np.ndarray:
    """Continuous Laplace noise with density ``exp(-|x|/b) / (2b)``.

    Inverse CDF of ``|X|`` (an exponential: ``-b log U`` with ``U`` the top 53 bits of a random
    word, on (0, 1]) with the sign from the word's lowest bit: one random word per draw.
    Floating-point Laplace noise is not exactly differentially private (Mironov 2012); prefer the
    geometric mechanism for counts.

    Parameters
    ----------
    scale : float
        Positive finite scale ``b``.
    size : int or tuple of int
        Shape of the output.
    rng : None, int, numpy.random.Generator or Randomness, optional
        Source of randomness; ``None`` is release mode.

    Returns
    -------
    numpy.ndarray of float64, shape ``size``

    Raises
    ------
    HierarchyError
        If ``scale`` is not positive and finite or ``size`` is invalid.

    Examples
    --------
    >>> from hierarchy.randomness import Randomness
    >>> sample_laplace(2.0, (3, 1), Randomness.simulation(0)).shape
    (3, 1)
    """
    scale = positive(scale, "scale")
    shape, n = _shape(size)
    source = as_randomness(rng)
    _refuse_float_release(source, 'Laplace')
    out = np.empty(n, dtype=np.float64)
    for start in range(0, n, _CHUNK):
        stop = min(n, start + _CHUNK)
        words = source.random_raw(stop - start)
        u = ((words >> np.uint64(11)).astype(np.float64) + 1.0) * _TWO_POW_53_INV
        magnitude = -scale * np.log(u)
        out[start:stop] = np.where((words & np.uint64(1)).astype(bool), -magnitude, magnitude)
    return out.reshape(shape)


def laplace_logpdf(x: Any, scale: float) -> np.ndarray:
    """Log density of the Laplace distribution, ``-log(2b) - |x|/b``.

    Parameters
    ----------
    x : array_like
    scale : float
        Positive finite scale ``b``.

    Returns
    -------
    numpy.ndarray of float64

    Raises
    ------
    HierarchyError
        If ``scale`` is not positive and finite.

    Examples
    --------
    >>> np.round(laplace_logpdf([0.0, 1.0], 1.0), 6)
    array([-0.693147, -1.693147])
    """
    scale = positive(scale, "scale")
    return -math.log(2 * scale) - np.abs(np.asarray(x, dtype=np.float64)) / scale


def laplace_variance(scale: float) -> float:
    """Variance of the Laplace distribution, ``2 b²``.

    Parameters
    ----------
    scale : float
        Positive finite scale ``b``.

    Returns
    -------
    float

    Raises
    ------
    HierarchyError
        If ``scale`` is not positive and finite.

    Examples
    --------
    >>> laplace_variance(3.0)
    18.0
    """
    scale = positive(scale, "scale")
    return 2.0 * scale * scale


def sample_gaussian(sigma2: float, size: int | tuple[int, ...], rng: Any = None) -> np.ndarray:
    """Continuous Gaussian noise ``N(0, σ²)`` by the Box–Muller transform on 53-bit uniforms.

    Each pair of uniforms ``(U1, U2)`` on (0, 1] gives two draws ``R cos θ`` and ``R sin θ`` with
    ``R = σ sqrt(-2 log U1)``, ``θ = 2π U2``.

    Parameters
    ----------
    sigma2 : float
        Positive finite variance σ².
    size : int or tuple of int
        Shape of the output.
    rng : None, int, numpy.random.Generator or Randomness, optional
        Source of randomness; ``None`` is release mode.

    Returns
    -------
    numpy.ndarray of float64, shape ``size``

    Raises
    ------
    HierarchyError
        If ``sigma2`` is not positive and finite or ``size`` is invalid.

    Examples
    --------
    >>> from hierarchy.randomness import Randomness
    >>> sample_gaussian(4.0, 3, Randomness.simulation(0)).shape
    (3,)
    """
    sigma = math.sqrt(positive(sigma2, "sigma2"))
    shape, n = _shape(size)
    source = as_randomness(rng)
    _refuse_float_release(source, 'Gaussian')
    out = np.empty(n, dtype=np.float64)
    for start in range(0, n, 2 * _CHUNK):
        stop = min(n, start + 2 * _CHUNK)
        pairs = (stop - start + 1) // 2
        u = source.uniform(2 * pairs)
        radius = sigma * np.sqrt(-2.0 * np.log(u[0::2]))
        angle = (2 * math.pi) * u[1::2]
        both = np.empty(2 * pairs)
        both[0::2] = radius * np.cos(angle)
        both[1::2] = radius * np.sin(angle)
        out[start:stop] = both[:stop - start]
    return out.reshape(shape)


def gaussian_logpdf(x: Any, sigma2: float) -> np.ndarray:
    """Log density of ``N(0, σ²)``.

    Parameters
    ----------
    x : array_like
    sigma2 : float
        Positive finite variance σ².

    Returns
    -------
    numpy.ndarray of float64

    Raises
    ------
    HierarchyError
        If ``sigma2`` is not positive and finite.

    Examples
    --------
    >>> np.round(gaussian_logpdf([0.0, 1.0], 1.0), 6)
    array([-0.918939, -1.418939])
    """
    sigma2 = positive(sigma2, "sigma2")
    x = np.asarray(x, dtype=np.float64)
    return -0.5 * math.log(2 * math.pi * sigma2) - x * x / (2 * sigma2)


def gaussian_variance(sigma2: float) -> float:
    """Variance of ``N(0, σ²)``, i.e. σ² (validated).

    Parameters
    ----------
    sigma2 : float
        Positive finite variance σ².

    Returns
    -------
    float

    Raises
    ------
    HierarchyError
        If ``sigma2`` is not positive and finite.

    Examples
    --------
    >>> gaussian_variance(2)
    2.0
    """
    return float(positive(sigma2, "sigma2"))
