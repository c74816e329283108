"""Exact integer sampling (Canonne, Kamath & Steinke 2020): no floating point in any draw.

The exact samplers keep their parameter as a :class:`fractions.Fraction`. A float parameter is
rounded **up** to a rational with a bounded denominator (:func:`round_up_to_rational`): a larger
σ² or Laplace scale means more noise, so the rounding never weakens privacy. They are vectorized
over samples: each loop runs over *rounds* of the algorithm with a shrinking active set, never over
samples. Arithmetic is int64 when every intermediate provably fits (checked before computing) and
numpy object arrays of Python ints otherwise (slow, still exact).

* :func:`round_up_to_rational` — a rational parameter, rounded up.
* uniform integers below any bound, Bernoulli(exp(−γ)) for rational γ (CKS Algorithm 1).
* :func:`sample_discrete_laplace_exact` — CKS Algorithm 2.
* :func:`sample_discrete_gaussian` — CKS Algorithms 1–3.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import numpy as np

from hierarchy.errors import HierarchyError
from hierarchy.mechanisms._checks import _shape
from hierarchy.numbers import integer, positive
from hierarchy.randomness import as_randomness

__all__ = ["DEFAULT_MAX_DENOMINATOR", "round_up_to_rational", "sample_discrete_laplace_exact",
           "sample_discrete_gaussian"]

DEFAULT_MAX_DENOMINATOR = 10**6
"""Denominator bound used when a float parameter of an exact sampler is rounded up to a rational."""

_DRAW_BOUND = 1 << 62                    # the largest bound Randomness.integers_below accepts
_SQRT_INT64 = math.isqrt((1 << 63) - 1)  # |m| <= this  =>  m*m fits in int64
_MAX_EXACT_SCALE = 1e15                   # exact samplers: keep every draw far inside int64


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
    target = positive(x, "x", exact=True)
    limit = integer(max_denominator, "max_denominator")
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
    exact = positive(value, name, exact=True)
    if isinstance(value, (float, np.floating)):
        return round_up_to_rational(exact, max_denominator=max_denominator)
    return exact



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
    exact = _exact_parameter(scale, "scale", integer(max_denominator, "max_denominator"))
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
    exact = _exact_parameter(sigma2, "sigma2", integer(max_denominator, "max_denominator"))
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
