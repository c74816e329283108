"""Noise mechanisms: samplers, densities and the mechanism registry (SPEC §2–3).

Every sampler draws *all* of its randomness through :func:`hierarchy.randomness.as_randomness`
and only its methods ``random_raw``, ``uniform`` and ``integers_below``. Release mode (OS CSPRNG
bits) and simulation mode (seeded PCG64 bits) therefore run exactly the same sampling code.

Samplers
--------
* :func:`sample_two_sided_geometric` — inverse CDF on 53-bit uniforms (fast; what the spec and
  Clark–Dajani describe), or ``exact=True`` for the integer-only sampler below.
* :func:`sample_discrete_laplace_exact` — Canonne–Kamath–Steinke (2020) Algorithm 2, exact.
* :func:`sample_discrete_gaussian` — CKS Algorithms 1–3, exact: only integer comparisons of
  uniform integers, no floating point anywhere in the sampling.
* :func:`sample_laplace`, :func:`sample_gaussian` — continuous, floating point.

The exact samplers keep their parameter as a :class:`fractions.Fraction`. A float parameter is
rounded **up** to a rational with a bounded denominator (:func:`round_up_to_rational`): a larger
σ² or Laplace scale means more noise, so the rounding never weakens privacy. They are vectorized
over samples: each loop runs over *rounds* of the algorithm with a shrinking active set, never over
samples. Arithmetic is int64 when every intermediate provably fits (checked before computing) and
numpy object arrays of Python ints otherwise (slow, still exact).

Mechanisms
----------
:func:`get_mechanism` returns one of the frozen dataclasses registered in :data:`MECHANISMS`
(``'geometric'``, ``'discrete_gaussian'``, ``'laplace'``, ``'gaussian'``), each with
``parameter(budget, sensitivity)``, ``variance``, ``sample``, ``logpmf`` and ``to_dict``.

Examples
--------
>>> from hierarchy.randomness import Randomness
>>> mech = get_mechanism("geometric")
>>> z = mech.parameter(0.5, 2)          # epsilon 0.5, sensitivity 2
>>> z, round(mech.variance(z), 3)
(0.25, 31.834)
>>> noise = mech.sample(z, (2, 3), Randomness.simulation(0))
>>> noise.shape, noise.dtype
((2, 3), dtype('int64'))
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields
from fractions import Fraction
from typing import Any, ClassVar

import numpy as np

from hierarchy.errors import HierarchyError
from hierarchy.randomness import as_randomness

__all__ = [
    "DEFAULT_MAX_DENOMINATOR", "round_up_to_rational",
    "sample_two_sided_geometric", "two_sided_geometric_pmf", "two_sided_geometric_logpmf",
    "two_sided_geometric_variance",
    "sample_discrete_laplace_exact",
    "sample_discrete_gaussian", "discrete_gaussian_pmf", "discrete_gaussian_logpmf",
    "discrete_gaussian_variance",
    "sample_laplace", "laplace_logpdf", "laplace_variance",
    "sample_gaussian", "gaussian_logpdf", "gaussian_variance",
    "Mechanism", "Geometric", "DiscreteGaussian", "Laplace", "Gaussian",
    "MECHANISMS", "get_mechanism",
]

DEFAULT_MAX_DENOMINATOR = 10**6
"""Denominator bound used when a float parameter of an exact sampler is rounded up to a rational."""

_DRAW_BOUND = 1 << 62                    # the largest bound Randomness.integers_below accepts
_SQRT_INT64 = math.isqrt((1 << 63) - 1)  # |m| <= this  =>  m*m fits in int64
_CHUNK = 1 << 16                          # samples per chunk of the inverse-CDF samplers
_MIN_Z = 1e-15                            # below this a geometric draw may overflow int64
_MAX_EXACT_SCALE = 1e15                   # exact samplers: keep every draw far inside int64
_TWO_POW_53_INV = 1.0 / 9007199254740992.0


# ---------------------------------------------------------------------------------------------
# validation helpers
# ---------------------------------------------------------------------------------------------
def _positive(value: Any, name: str, *, exact: bool = False) -> float | Fraction:
    """``value`` as a float (or an exact Fraction) after checking it is positive and finite."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(
            value, (int, float, Fraction, np.integer, np.floating)):
        raise HierarchyError(f"{name} must be a positive finite number, not {value!r}")
    if isinstance(value, (int, np.integer, Fraction)):
        if value <= 0:
            raise HierarchyError(f"{name} must be positive, not {value}")
        return Fraction(value) if exact else float(value)
    number = float(value)
    if not math.isfinite(number) or number <= 0:
        raise HierarchyError(f"{name} must be a positive finite number, not {value!r}")
    return Fraction(number) if exact else number


def _shape(size: Any) -> tuple[tuple[int, ...], int]:
    """Normalise ``size`` (an int or a tuple of ints) to ``(shape, number of draws)``."""
    dims = size if isinstance(size, tuple) else (size,)
    for dim in dims:
        if isinstance(dim, (bool, np.bool_)) or not isinstance(dim, (int, np.integer)) or dim < 0:
            raise HierarchyError(
                f"size must be a non-negative int or a tuple of them, not {size!r}")
    shape = tuple(int(d) for d in dims)
    return shape, math.prod(shape)


def _max_denominator(value: Any) -> int:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)) or value < 1:
        raise HierarchyError(f"max_denominator must be a positive int, not {value!r}")
    return int(value)


def round_up_to_rational(x: Any, *, max_denominator: int = DEFAULT_MAX_DENOMINATOR) -> Fraction:
    """The smallest fraction ``>= x`` whose denominator is at most ``max_denominator``.

    Exact samplers need their parameter as a ratio of integers. Rounding a noise parameter (σ² or
    a Laplace scale) *up* can only add noise, so it never weakens the privacy guarantee. Decimal
    floats come back as the decimal they were typed as (``0.3 -> 3/10``); in general the result
    exceeds ``x`` by less than ``1 / max_denominator``. Integers and fractions whose denominator
    is already small enough are returned unchanged.

    Parameters
    ----------
    x : int, float or Fraction
        A positive finite number.
    max_denominator : int, optional
        Bound on the denominator of the result.

    Returns
    -------
    Fraction

    Raises
    ------
    HierarchyError
        If ``x`` is not positive and finite or ``max_denominator`` is not a positive int.

    Examples
    --------
    >>> round_up_to_rational(0.3), round_up_to_rational(2.5), round_up_to_rational(1 / 3)
    (Fraction(3, 10), Fraction(5, 2), Fraction(1, 3))
    >>> round_up_to_rational(2 ** 0.5)     # 1.6e-12 above the float
    Fraction(665857, 470832)
    >>> round_up_to_rational(3.14159265, max_denominator=100)
    Fraction(22, 7)
    """
    target = _positive(x, "x", exact=True)
    limit = _max_denominator(max_denominator)
    if target.denominator <= limit:
        return target
    # The two neighbours of x in the Farey sequence of order `limit` (the construction of
    # Fraction.limit_denominator); they bracket x, and we keep the upper one.
    p0, q0, p1, q1 = 0, 1, 1, 0
    num, den = target.numerator, target.denominator
    while True:
        a = num // den
        q2 = q0 + a * q1
        if q2 > limit:
            break
        p0, q0, p1, q1 = p1, q1, p0 + a * p1, q2
        num, den = den, num - a * den
    k = (limit - q0) // q1
    first = Fraction(p0 + k * p1, q0 + k * q1)
    second = Fraction(p1, q1)
    return first if first >= target else second


def _exact_parameter(value: Any, name: str, max_denominator: int) -> Fraction:
    """An exact sampler's parameter: ints and Fractions as given, floats rounded up."""
    exact = _positive(value, name, exact=True)
    if isinstance(value, (float, np.floating)):
        return round_up_to_rational(exact, max_denominator=max_denominator)
    return exact


def _integer_mask(k: Any) -> tuple[np.ndarray, np.ndarray]:
    """``k`` as a float array and a mask of its integer entries (the support of a pmf)."""
    values = np.asarray(k, dtype=np.float64)
    return values, np.isfinite(values) & (values == np.floor(values))


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
    ``exact=True`` uses :func:`sample_discrete_laplace_exact` with scale ``1/z`` rounded up instead:
    integer-only arithmetic, about 20 times slower.

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
        Use the exact integer sampler.
    max_denominator : int, optional
        Denominator bound for rounding ``1/z`` up when ``exact=True``.

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
    z = _positive(z, "z")
    if z < _MIN_Z:
        raise HierarchyError(f"z = {z!r} is below {_MIN_Z}: the noise would not fit in int64")
    shape, n = _shape(size)
    if exact:
        scale = 1 / _positive(given, "z", exact=True)
        if isinstance(given, (float, np.floating)):
            scale = round_up_to_rational(scale, max_denominator=max_denominator)
        return sample_discrete_laplace_exact(scale, shape, rng, max_denominator=max_denominator)
    source = as_randomness(rng)
    out = np.empty(n, dtype=np.int64)
    for start in range(0, n, _CHUNK):
        stop = min(n, start + _CHUNK)
        u = source.uniform(2 * (stop - start))
        np.log(u, out=u)
        np.divide(u, -z, out=u)
        np.floor(u, out=u)
        out[start:stop] = u[0::2] - u[1::2]   # both are exact integers below 2**53
    return out.reshape(shape)


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
    z = _positive(z, "z")
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
    z = _positive(z, "z")
    return 2.0 * math.exp(-z) / math.expm1(-z) ** 2


# ---------------------------------------------------------------------------------------------
# exact integer machinery (Canonne, Kamath & Steinke 2020)
# ---------------------------------------------------------------------------------------------
def _uniform_below_big(bound: int, m: int, source) -> np.ndarray:
    """``m`` exactly uniform Python ints in ``[0, bound)`` (object array) for any ``bound >= 1``.

    Concatenates 64-bit words, keeps the top ``bit_length(bound - 1)`` bits and rejects values
    ``>= bound`` (probability below 1/2 per try).
    """
    out = np.empty(m, dtype=object)
    nbits = (bound - 1).bit_length()
    if nbits == 0:
        out[:] = 0
        return out
    words = -(-nbits // 64)
    shift = 64 * words - nbits
    todo = np.arange(m)
    while todo.size:
        raw = source.random_raw(todo.size * words).reshape(todo.size, words).astype(object)
        value = raw[:, 0]
        for column in range(1, words):
            value = (value << 64) | raw[:, column]
        value = value >> shift
        ok = value < bound
        out[todo[ok]] = value[ok]
        todo = todo[~ok]
    return out


def _uniform_below(bound: int, m: int, source, big: bool) -> np.ndarray:
    """``m`` uniform integers in ``[0, bound)``: int64 unless ``big`` or ``bound > 2**62``."""
    if not big and bound <= _DRAW_BOUND:
        return source.integers_below(np.full(m, bound, dtype=np.int64))
    return _uniform_below_big(bound, m, source)


def _bernoulli_ratio(r: np.ndarray, den: int, k: int, source, big: bool) -> np.ndarray:
    """Independent Bernoulli(``r / (den * k)``) for each entry of ``r`` (``0 <= r < den``)."""
    m = r.size
    if big or den > _DRAW_BOUND:
        return _uniform_below_big(den * k, m, source) < r
    if den * k <= _DRAW_BOUND:
        return source.integers_below(np.full(m, den * k, dtype=np.int64)) < r
    # r/(den k) = (1/k)(r/den) with independent factors keeps every bound within 2**62.
    return ((source.integers_below(np.full(m, k, dtype=np.int64)) == 0)
            & (source.integers_below(np.full(m, den, dtype=np.int64)) < r))


def _bernoulli_exp_minus_one(m: int, source) -> np.ndarray:
    """``m`` draws of Bernoulli(exp(-1)) (CKS Algorithm 1 with gamma = 1)."""
    result = np.empty(m, dtype=bool)
    alive = np.arange(m)
    k = 2   # the first trial, Bernoulli(gamma / 1) = Bernoulli(1), always succeeds
    while alive.size:
        success = source.integers_below(np.full(alive.size, k, dtype=np.int64)) == 0
        result[alive[~success]] = k % 2 == 1
        alive = alive[success]
        k += 1
    return result


def _bernoulli_exp_neg(q: np.ndarray | None, r: np.ndarray, den: int, source,
                       big: bool) -> np.ndarray:
    """Bernoulli(exp(-gamma)) with ``gamma = q + r/den`` per entry (CKS Algorithm 1).

    ``q`` (``None`` means 0) and ``r`` (``0 <= r < den``) are int64 or object arrays.
    """
    result = np.ones(r.size, dtype=bool)
    if q is not None:
        # exp(-q) as q independent Bernoulli(exp(-1)) trials that must all succeed
        alive = np.flatnonzero(q > 0)
        need = q[alive]
        while alive.size:
            success = _bernoulli_exp_minus_one(alive.size, source)
            result[alive[~success]] = False
            need = need[success] - 1
            alive = alive[success]
            more = need > 0
            alive, need = alive[more], need[more]
    # exp(-r/den) for r/den in [0, 1): K = 1, 2, ... until Bernoulli(gamma/K) fails; 1 iff K odd
    alive = np.flatnonzero(result & (r > 0))   # r = 0 gives exp(0) = 1 without randomness
    remainder = r[alive]
    k = 1
    while alive.size:
        success = _bernoulli_ratio(remainder, den, k, source, big)
        result[alive[~success]] = k % 2 == 1
        alive, remainder = alive[success], remainder[success]
        k += 1
    return result


def _to_int64(values: np.ndarray) -> np.ndarray:
    """Exact conversion of an object array of Python ints to int64."""
    if values.dtype == np.int64:
        return values
    if values.size and max(abs(int(values.max())), abs(int(values.min()))) >= 1 << 63:
        raise HierarchyError("an exact draw does not fit in int64; use a smaller noise scale")
    return values.astype(np.int64)


def _discrete_laplace_rounds(t: int, s: int, m: int, source, big: bool) -> np.ndarray:
    """``m`` draws with ``P[Z = z] ∝ exp(-|z| s / t)`` (CKS Algorithm 2), vectorized by rounds.

    Returns int64, or an object array of Python ints when ``big``.
    """
    out = np.empty(m, dtype=object if big else np.int64)
    todo = np.arange(m)
    while todo.size:
        u = _uniform_below(t, todo.size, source, big)
        kept = np.flatnonzero(_bernoulli_exp_neg(None, u, t, source, big))   # exp(-U/t)
        u = u[kept]
        v = np.zeros(kept.size, dtype=np.int64)   # number of Bernoulli(exp(-1)) successes
        alive = np.arange(kept.size)
        while alive.size:
            alive = alive[_bernoulli_exp_minus_one(alive.size, source)]
            v[alive] += 1
        if big or (v.size and t * (int(v.max()) + 1) > _DRAW_BOUND):
            x = u.astype(object) + t * v.astype(object)   # Python ints: cannot overflow
            y = x // s
            if not big:
                y = _to_int64(y)
        else:
            y = (u + t * v) // s                          # < 2**62 by the check above
        negative = (source.random_raw(kept.size) & np.uint64(1)).astype(bool)
        accept = ~(negative & (y == 0))
        z = np.where(negative, -y, y)
        done = kept[accept]
        out[todo[done]] = z[accept]
        still = np.ones(todo.size, dtype=bool)
        still[done] = False
        todo = todo[still]
    return out


def _check_arithmetic(arithmetic: str) -> bool:
    """``True`` if Python-int (object) arithmetic is forced."""
    if arithmetic not in ("auto", "object"):
        raise HierarchyError(f"arithmetic must be 'auto' or 'object', not {arithmetic!r}")
    return arithmetic == "object"


def sample_discrete_laplace_exact(scale: Any, size: int | tuple[int, ...], rng: Any = None, *,
                                  max_denominator: int = DEFAULT_MAX_DENOMINATOR,
                                  arithmetic: str = "auto") -> np.ndarray:
    """Exact discrete Laplace noise, ``P[X = k] ∝ exp(-|k| / scale)`` (CKS 2020, Algorithm 2).

    This is the two-sided geometric distribution with ``z = 1/scale``, sampled with integer
    comparisons only. A float ``scale`` is rounded **up** to a rational with denominator at most
    ``max_denominator`` (more noise: never weaker privacy); ints and Fractions are used exactly.

    Parameters
    ----------
    scale : int, float or Fraction
        Positive scale, at most 1e15.
    size : int or tuple of int
        Shape of the output.
    rng : None, int, numpy.random.Generator or Randomness, optional
        Source of randomness; ``None`` is release mode.
    max_denominator : int, optional
        Denominator bound for rounding a float ``scale`` up.
    arithmetic : {'auto', 'object'}, optional
        ``'object'`` forces Python-int arithmetic and multi-word uniform integers for every
        quantity that depends on the parameter (slower; for testing the fallback). The
        Bernoulli(1/K) trials inside Bernoulli(exp(-1)) always use small int64 bounds.

    Returns
    -------
    numpy.ndarray of int64, shape ``size``

    Raises
    ------
    HierarchyError
        If ``scale`` is not positive and finite or exceeds 1e15, or an option is invalid.

    Examples
    --------
    >>> from hierarchy.randomness import Randomness
    >>> x = sample_discrete_laplace_exact(4, (2, 2), Randomness.simulation(5))
    >>> x.shape, x.dtype
    ((2, 2), dtype('int64'))
    """
    exact = _exact_parameter(scale, "scale", _max_denominator(max_denominator))
    if exact > _MAX_EXACT_SCALE:
        raise HierarchyError(f"scale = {float(exact):g} exceeds {_MAX_EXACT_SCALE:g}: the noise "
                             f"would not fit in int64")
    big = _check_arithmetic(arithmetic)
    shape, n = _shape(size)
    source = as_randomness(rng)
    draws = _discrete_laplace_rounds(exact.numerator, exact.denominator, n, source, big)
    return _to_int64(draws).reshape(shape)


# ---------------------------------------------------------------------------------------------
# discrete Gaussian
# ---------------------------------------------------------------------------------------------
def _gamma_parts(abs_y: np.ndarray, a: int, bt: int, den: int,
                 big: bool) -> tuple[np.ndarray, np.ndarray]:
    """``divmod((|y| b t - a)**2, den)`` exactly: the integer and remainder of ``gamma * den``."""
    if not big:
        limit = (_SQRT_INT64 - a) // bt   # |y| <= limit  =>  |y b t - a| <= sqrt(2**63 - 1)
        if not abs_y.size or int(abs_y.max()) <= limit:
            m = abs_y * bt - a
            square = m * m
            return square // den, square % den
    m = abs_y.astype(object) * bt - a
    square = m * m
    q, r = square // den, square % den
    if big:
        return q, r
    r = r.astype(np.int64)   # r < den <= 2**62
    if int(q.max()) <= _DRAW_BOUND:
        q = q.astype(np.int64)
    return q, r


def sample_discrete_gaussian(sigma2: Any, size: int | tuple[int, ...], rng: Any = None, *,
                             max_denominator: int = DEFAULT_MAX_DENOMINATOR,
                             arithmetic: str = "auto") -> np.ndarray:
    """Exact discrete Gaussian noise, ``P[X = x] ∝ exp(-x² / (2 σ²))`` (CKS 2020).

    Algorithm 3 of Canonne, Kamath & Steinke: with ``t = floor(σ) + 1``, draw ``Y`` from the
    discrete Laplace with scale ``t`` (Algorithm 2) and accept it with probability
    ``exp(-(|Y| - σ²/t)² / (2σ²))`` (Algorithm 1); every step compares uniform integers only.
    With ``σ² = a/b`` the acceptance exponent is the exact rational
    ``(|Y| b t - a)² / (2 a b t²)``. All samples advance together, round by round.

    A float ``sigma2`` is rounded **up** to a rational with denominator at most
    ``max_denominator`` (:func:`round_up_to_rational`): more noise, so never weaker privacy. Ints
    and Fractions are used exactly. Arithmetic is int64 when ``2 a b t² <= 2**62`` and each round's
    intermediates are checked to fit; otherwise Python ints in object arrays (exact, much slower).

    Parameters
    ----------
    sigma2 : int, float or Fraction
        Positive σ², at most 1e30.
    size : int or tuple of int
        Shape of the output.
    rng : None, int, numpy.random.Generator or Randomness, optional
        Source of randomness; ``None`` is release mode.
    max_denominator : int, optional
        Denominator bound for rounding a float ``sigma2`` up.
    arithmetic : {'auto', 'object'}, optional
        ``'object'`` forces Python-int arithmetic and multi-word uniform integers for every
        quantity that depends on the parameter (slower; for testing the fallback). The
        Bernoulli(1/K) trials inside Bernoulli(exp(-1)) always use small int64 bounds.

    Returns
    -------
    numpy.ndarray of int64, shape ``size``

    Raises
    ------
    HierarchyError
        If ``sigma2`` is not positive and finite or exceeds 1e30, or an option is invalid.

    Examples
    --------
    >>> from hierarchy.randomness import Randomness
    >>> x = sample_discrete_gaussian(2.5, 1000, Randomness.simulation(11))
    >>> x.dtype, bool(abs(x.mean()) < 0.3), bool(1.8 < x.var() < 3.2)
    (dtype('int64'), True, True)
    """
    exact = _exact_parameter(sigma2, "sigma2", _max_denominator(max_denominator))
    if exact > _MAX_EXACT_SCALE ** 2:
        raise HierarchyError(f"sigma2 = {float(exact):g} exceeds {_MAX_EXACT_SCALE ** 2:g}: the "
                             f"noise would not fit in int64")
    forced = _check_arithmetic(arithmetic)
    shape, n = _shape(size)
    source = as_randomness(rng)
    a, b = exact.numerator, exact.denominator
    t = math.isqrt(a // b) + 1              # floor(sqrt(a/b)) + 1
    den = 2 * a * b * t * t
    big = forced or den > _DRAW_BOUND or a > _SQRT_INT64
    out = np.empty(n, dtype=np.int64)
    todo = np.arange(n)
    while todo.size:
        y = _discrete_laplace_rounds(t, 1, todo.size, source, forced)
        q, r = _gamma_parts(np.abs(y), a, b * t, den, big)
        accept = _bernoulli_exp_neg(q, r, den, source, big)
        out[todo[accept]] = _to_int64(y[accept])
        todo = todo[~accept]
    return out.reshape(shape)


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
    sigma2 = _positive(sigma2, "sigma2")
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
    sigma2 = _positive(sigma2, "sigma2")
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
    scale = _positive(scale, "scale")
    shape, n = _shape(size)
    source = as_randomness(rng)
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
    scale = _positive(scale, "scale")
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
    scale = _positive(scale, "scale")
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
    sigma = math.sqrt(_positive(sigma2, "sigma2"))
    shape, n = _shape(size)
    source = as_randomness(rng)
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
    sigma2 = _positive(sigma2, "sigma2")
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
    return float(_positive(sigma2, "sigma2"))


# ---------------------------------------------------------------------------------------------
# mechanism objects
# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Mechanism:
    """A noise mechanism: how a budget becomes a noise parameter, and that noise's law.

    Subclasses are frozen dataclasses registered in :data:`MECHANISMS`; use
    :func:`get_mechanism`. Class attributes: ``name``, ``accounting`` (``'pure'`` or ``'zcdp'``),
    ``discrete`` (integer noise or not) and ``parameter_name``.

    Examples
    --------
    >>> mech = get_mechanism("discrete_gaussian")
    >>> mech.accounting, mech.parameter_name, mech.parameter(0.5, 1)
    ('zcdp', 'sigma2', 1.0)
    >>> Mechanism.from_dict(mech.to_dict()) == mech
    True
    """

    name: ClassVar[str]
    accounting: ClassVar[str]
    discrete: ClassVar[bool]
    parameter_name: ClassVar[str]

    def parameter(self, budget: float, sensitivity: float) -> float:
        """The noise parameter for a query of ``sensitivity`` answered with ``budget``.

        ``budget`` is ε for ``'pure'`` mechanisms (sensitivity Δ₁) and ρ for ``'zcdp'`` ones
        (sensitivity Δ₂).
        """
        budget = _positive(budget, "epsilon" if self.accounting == "pure" else "rho")
        sensitivity = _positive(sensitivity, "sensitivity")
        return self._parameter(budget, sensitivity)

    def _parameter(self, budget: float, sensitivity: float) -> float:
        raise NotImplementedError

    def check_parameter(self, parameter: Any) -> float:
        """``parameter`` as a float, after checking it is positive and finite."""
        return _positive(parameter, self.parameter_name)

    def variance(self, parameter: Any) -> float:
        """Variance of the noise with this parameter."""
        raise NotImplementedError

    def sample(self, parameter: Any, size: int | tuple[int, ...], rng: Any = None) -> np.ndarray:
        """Noise draws of shape ``size`` (int64 if ``discrete``, else float64)."""
        raise NotImplementedError

    def logpmf(self, k: Any, parameter: Any) -> np.ndarray:
        """Log pmf (log density for continuous mechanisms) of the noise at ``k``."""
        raise NotImplementedError

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready description (name, accounting, parameter name and options)."""
        return {"name": self.name, "accounting": self.accounting, "discrete": self.discrete,
                "parameter_name": self.parameter_name, **asdict(self)}

    @staticmethod
    def from_dict(data: dict[str, Any]) -> "Mechanism":
        """Rebuild a mechanism from :meth:`to_dict` output."""
        if not isinstance(data, dict) or "name" not in data:
            raise HierarchyError(f"a mechanism description needs a 'name', got {data!r}")
        cls = _mechanism_class(data["name"])
        options = {f.name for f in fields(cls)}
        derived = {"name": cls.name, "accounting": cls.accounting, "discrete": cls.discrete,
                   "parameter_name": cls.parameter_name}
        for key, value in data.items():
            if key in derived and value != derived[key]:
                raise HierarchyError(f"mechanism {cls.name!r} has {key} {derived[key]!r}, "
                                     f"not {value!r}")
            if key not in derived and key not in options:
                raise HierarchyError(f"unknown option {key!r} for mechanism {cls.name!r}; "
                                     f"valid options: {sorted(options)}")
        return cls(**{k: v for k, v in data.items() if k in options})


@dataclass(frozen=True)
class Geometric(Mechanism):
    """Two-sided geometric noise, ``z = ε / Δ₁`` (pure DP).

    Parameters
    ----------
    exact : bool, optional
        Sample with the exact integer sampler instead of the inverse CDF.
    """

    name: ClassVar[str] = "geometric"
    accounting: ClassVar[str] = "pure"
    discrete: ClassVar[bool] = True
    parameter_name: ClassVar[str] = "z"
    exact: bool = False

    def __post_init__(self):
        if not isinstance(self.exact, bool):
            raise HierarchyError(f"geometric option 'exact' must be a bool, not {self.exact!r}")

    def _parameter(self, budget, sensitivity):
        return budget / sensitivity

    def variance(self, parameter):
        return two_sided_geometric_variance(parameter)

    def sample(self, parameter, size, rng=None):
        return sample_two_sided_geometric(parameter, size, rng, exact=self.exact)

    def logpmf(self, k, parameter):
        return two_sided_geometric_logpmf(k, parameter)


@dataclass(frozen=True)
class DiscreteGaussian(Mechanism):
    """Exact discrete Gaussian noise, ``σ² = Δ₂² / (2ρ)`` (zCDP).

    The sampler rounds a float σ² up to a rational with denominator at most ``max_denominator``;
    :meth:`variance` and :meth:`logpmf` describe that rounded σ², i.e. the noise actually added.

    Parameters
    ----------
    max_denominator : int, optional
    """

    name: ClassVar[str] = "discrete_gaussian"
    accounting: ClassVar[str] = "zcdp"
    discrete: ClassVar[bool] = True
    parameter_name: ClassVar[str] = "sigma2"
    max_denominator: int = DEFAULT_MAX_DENOMINATOR

    def __post_init__(self):
        _max_denominator(self.max_denominator)

    def _parameter(self, budget, sensitivity):
        return sensitivity * sensitivity / (2.0 * budget)

    def _sampled(self, parameter) -> float:
        return float(_exact_parameter(parameter, "sigma2", self.max_denominator))

    def variance(self, parameter):
        return discrete_gaussian_variance(self._sampled(parameter))

    def sample(self, parameter, size, rng=None):
        return sample_discrete_gaussian(parameter, size, rng,
                                        max_denominator=self.max_denominator)

    def logpmf(self, k, parameter):
        return discrete_gaussian_logpmf(k, self._sampled(parameter))


@dataclass(frozen=True)
class Laplace(Mechanism):
    """Continuous Laplace noise, ``scale = Δ₁ / ε`` (pure DP in exact arithmetic)."""

    name: ClassVar[str] = "laplace"
    accounting: ClassVar[str] = "pure"
    discrete: ClassVar[bool] = False
    parameter_name: ClassVar[str] = "scale"

    def _parameter(self, budget, sensitivity):
        return sensitivity / budget

    def variance(self, parameter):
        return laplace_variance(parameter)

    def sample(self, parameter, size, rng=None):
        return sample_laplace(parameter, size, rng)

    def logpmf(self, k, parameter):
        return laplace_logpdf(k, parameter)


@dataclass(frozen=True)
class Gaussian(Mechanism):
    """Continuous Gaussian noise, ``σ² = Δ₂² / (2ρ)`` (zCDP in exact arithmetic)."""

    name: ClassVar[str] = "gaussian"
    accounting: ClassVar[str] = "zcdp"
    discrete: ClassVar[bool] = False
    parameter_name: ClassVar[str] = "sigma2"

    def _parameter(self, budget, sensitivity):
        return sensitivity * sensitivity / (2.0 * budget)

    def variance(self, parameter):
        return gaussian_variance(parameter)

    def sample(self, parameter, size, rng=None):
        return sample_gaussian(parameter, size, rng)

    def logpmf(self, k, parameter):
        return gaussian_logpdf(k, parameter)


MECHANISMS: dict[str, type[Mechanism]] = {
    cls.name: cls for cls in (Geometric, DiscreteGaussian, Laplace, Gaussian)}
"""Registry of mechanism classes by name."""


def _mechanism_class(name: Any) -> type[Mechanism]:
    if not isinstance(name, str) or name not in MECHANISMS:
        raise HierarchyError(f"unknown mechanism {name!r}; valid names: "
                             f"{', '.join(repr(n) for n in MECHANISMS)}")
    return MECHANISMS[name]


def get_mechanism(name: str | Mechanism, **options: Any) -> Mechanism:
    """The mechanism registered under ``name``, with its options.

    Parameters
    ----------
    name : str or Mechanism
        ``'geometric'``, ``'discrete_gaussian'``, ``'laplace'`` or ``'gaussian'``; a
        :class:`Mechanism` is returned unchanged (then no options are allowed).
    **options
        Dataclass options: ``exact`` for ``'geometric'``, ``max_denominator`` for
        ``'discrete_gaussian'``.

    Returns
    -------
    Mechanism

    Raises
    ------
    HierarchyError
        If the name is unknown (the message lists the valid names) or an option is invalid.

    Examples
    --------
    >>> get_mechanism("laplace").parameter(0.5, 2)
    4.0
    >>> get_mechanism("geometric", exact=True)
    Geometric(exact=True)
    """
    if isinstance(name, Mechanism):
        if options:
            raise HierarchyError("options cannot be given with a Mechanism instance")
        return name
    cls = _mechanism_class(name)
    valid = {f.name for f in fields(cls)}
    unknown = sorted(set(options) - valid)
    if unknown:
        raise HierarchyError(f"unknown option(s) {unknown} for mechanism {name!r}; "
                             f"valid options: {sorted(valid)}")
    return cls(**options)
