"""A fast discrete Gaussian sampler for simulations: inversion of 64-bit words through tables.

:func:`sample_discrete_gaussian_fast` draws ``N_Z(σ²)``, ``P[X = k] ∝ exp(-k² / (2σ²))``, tens of
times faster than the exact sampler of Canonne, Kamath & Steinke
(:func:`~hierarchy.mechanisms.sample_discrete_gaussian`), which stays the only one allowed in
release mode. Its law differs from ``N_Z(σ²)`` by a total variation distance below
:data:`TV_BOUND` ``= 2**-45`` (about 2.8e-14): no experiment of fewer than about 1e26 draws can
tell the two apart, but the tables are built in floating point, whose rounding is what release
mode must never let touch the noise (Mironov 2012).

Two methods, both driven by one table that maps a uniform 64-bit word ``w`` to an integer by
inversion: the value is ``low + #{i : t_i <= w}`` for cumulative integer thresholds ``t_i``
(integer weights that sum to exactly ``2**64``, so the word's uniformity is used without loss). A
*guide* of ``2**16`` entries, indexed by the word's top 16 bits, holds the answer for every
bucket of words that no threshold splits; only the few words in split buckets (at most
``#thresholds / 2**16`` of them) are resolved by binary search.

* **Table** (σ² up to :data:`MAX_TABLE_SIGMA2`): the table is the pmf itself on ``[-K, K]``, one
  word per draw. ``K`` is the smallest cut with tail mass ``P[|X| > K] <= 2**-61`` (from the
  bound ``sum_{j>K} e^(-j²/2σ²) <= e^(-(K+1)²/2σ²) / (1 - e^(-(2K+3)/2σ²))`` and
  ``Z >= max(1, sqrt(2πσ²))``), about ``9.3 σ``.
* **Envelope** (larger σ²): rejection from a piecewise-constant envelope on cells of
  ``c = 2**m`` consecutive integers (``c`` about σ/32 to σ/64): a cell ``j`` is drawn from the table
  of weights ``e_j = exp(-m_j² / 2σ²)`` (``m_j`` the smallest ``|k|`` in the cell), ``k`` uniformly
  in the cell from a word's top ``m`` bits, and ``k`` is kept with probability
  ``exp(-(k² - m_j²) / 2σ²)`` (a 53-bit uniform against it). Kept draws have law
  ``∝ exp(-k²/2σ²)`` on the cells covering ``[-K, K]``; about 99 % of proposals are kept. The
  table has about 1,200 cells whatever σ², so every σ² up to 1e30 is cheap to set up.

Tables are cached per σ² (:func:`_table_for`: the 64 most recent, about 0.5 MB each).

The distance bound
------------------
Write ``q`` for the law drawn and ``p`` for ``N_Z(σ²)``. Cutting the support loses at most
``2**-61`` of mass on each side. A weight ``w_j = rint(p̂_j 2**64)`` is off by at most ``1/2``
from ``p̂_j 2**64``, and the float ``p̂_j`` (an ``exp`` of an argument of at most 45 in
magnitude, computed from exact integers ``k²``) is within ``107 · 2**-53 < 2**-46`` of ``p_j``
relatively; the largest weight absorbs the rest so that the weights sum to ``2**64``, which at
most doubles the error. Hence ``TV(q, p) <= 2**-60 + 2**-46 + (number of weights) · 2**-64``,
below ``2**-45`` for tables of up to ``2**17`` weights (the table method's largest, at
:data:`MAX_TABLE_SIGMA2`, has 17,859; the envelope's about 1,200).
For the envelope, the same argument bounds the error of the cell weights, and the acceptance test
(a 53-bit uniform against an ``exp`` of an argument below 1) adds at most ``2**-50`` relatively.
``tests/test_fast_sampler.py`` computes ``q`` from the tables and ``p`` in 40-digit decimal
arithmetic and checks the bound.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np

from hierarchy.errors import HierarchyError
from hierarchy.mechanisms._checks import _shape
from hierarchy.mechanisms.distributions import discrete_gaussian_pmf
from hierarchy.numbers import positive
from hierarchy.randomness import as_randomness

__all__ = ["sample_discrete_gaussian_fast", "TV_BOUND", "MAX_TABLE_SIGMA2", "MAX_SIGMA2"]

TV_BOUND = 2.0 ** -45
"""Bound on the total variation distance between the fast sampler's law and ``N_Z(σ²)``."""

MAX_TABLE_SIGMA2 = 1e6
"""Largest σ² sampled from a table of the pmf; larger σ² use the envelope method."""

MAX_SIGMA2 = 1e30
"""Largest σ² accepted (the same limit as the exact sampler: draws stay far inside int64)."""

_LOG_TAIL = -62 * math.log(2)   # each tail: 2 * bound <= 2**-61 leaves a factor 2 for rounding
_GUIDE_BITS = 16
_CHUNK = 1 << 14                 # draws per chunk: the working arrays stay in cache
_MIXED = np.iinfo(np.int64).min  # guide entry of a bucket that a threshold splits
_TWO_POW_53_INV = 1.0 / 9007199254740992.0
_CELLS_PER_SIGMA = 32            # envelope cells: c = 2**m <= σ / 32


@dataclass(frozen=True)
class _Inversion:
    """Inversion of a uniform 64-bit word: ``low + #{i : thresholds[i] <= word}``."""

    low: int
    thresholds: np.ndarray   # uint64, non-decreasing
    guide: np.ndarray        # int64, 2**_GUIDE_BITS entries: the value, or _MIXED

    def weights(self) -> list[int]:
        """The integer weights (summing to ``2**64``) of ``low, low + 1, ...``."""
        cuts = [0, *(int(t) for t in self.thresholds), 1 << 64]
        return [b - a for a, b in zip(cuts, cuts[1:])]

    def invert(self, words: np.ndarray, out: np.ndarray) -> None:
        """Write the value of each word of ``words`` (uint64) into ``out`` (int64, same size)."""
        # The top bits as a signed index: a bucket u >= 2**15 comes out as u - 2**16, which
        # np.take reads from the end of the guide, i.e. entry u.
        index = words.view(np.int64) >> (64 - _GUIDE_BITS)
        np.take(self.guide, index, out=out)
        split = np.flatnonzero(out == _MIXED)
        if split.size:
            out[split] = np.searchsorted(self.thresholds, words[split], side="right") + self.low


def _inversion(probabilities: np.ndarray, low: int) -> _Inversion:
    """The inversion table of ``probabilities`` (float64 on ``low, low + 1, ...``, summing to
    about 1): weights ``rint(p 2**64)``, the largest one adjusted so that they sum to ``2**64``,
    zero weights at either end dropped."""
    anchor = int(np.argmax(probabilities))
    scaled = np.rint(np.ldexp(probabilities, 64))
    scaled[anchor] = 0.0
    weights = scaled.astype(np.uint64)
    # an exact sum of up to 2**32 words: halves of 32 bits cannot overflow a uint64
    high, low_half = weights >> np.uint64(32), weights & np.uint64(2**32 - 1)
    rest = (int(high.sum()) << 32) + int(low_half.sum())
    if rest >= 1 << 64:
        raise HierarchyError("internal error: the fast sampler's table weights exceed 2**64")
    nonzero = np.flatnonzero(weights)
    first = min(anchor, int(nonzero[0])) if nonzero.size else anchor
    last = max(anchor, int(nonzero[-1])) if nonzero.size else anchor
    weights = weights[first:last + 1]
    if rest == 0:   # one value carries all the mass
        thresholds = np.empty(0, dtype=np.uint64)
    else:
        weights[anchor - first] = np.uint64((1 << 64) - rest)
        # every partial sum but the last (2**64) is below 2**64: the last weight is positive
        thresholds = np.cumsum(weights[:-1], dtype=np.uint64)
    shift = np.uint64(64 - _GUIDE_BITS)
    starts = np.arange(1 << _GUIDE_BITS, dtype=np.uint64) << shift
    ends = starts | ((np.uint64(1) << shift) - np.uint64(1))
    below_start = np.searchsorted(thresholds, starts, side="right")
    below_end = np.searchsorted(thresholds, ends, side="right")
    guide = np.where(below_start == below_end, below_start + (low + first), _MIXED)
    return _Inversion(low + first, thresholds, guide.astype(np.int64))


def _tail_cut(sigma2: float) -> int:
    """The smallest ``K >= 0`` whose bound on ``P[X > K]`` is at most ``2**-62``."""
    log_z = max(0.0, 0.5 * math.log(2 * math.pi * sigma2))   # Z >= max(1, sqrt(2πσ²))

    def log_bound(k: int) -> float:
        ratio = (2 * k + 3) / (2 * sigma2)
        return -(k + 1) ** 2 / (2 * sigma2) - math.log(-math.expm1(-ratio)) - log_z

    low, high = 0, 1
    while log_bound(high) > _LOG_TAIL:
        low, high = high, 2 * high
    if log_bound(low) <= _LOG_TAIL:
        return low
    while high - low > 1:   # log_bound(low) > target >= log_bound(high)
        middle = (low + high) // 2
        low, high = (low, middle) if log_bound(middle) <= _LOG_TAIL else (middle, high)
    return high


@dataclass(frozen=True)
class _Envelope:
    """Rejection from cells of ``2**bits`` integers; see the module docstring."""

    sigma2: float
    bits: int
    cells: _Inversion          # draws a cell index j (cell j holds j 2**bits ... + 2**bits - 1)
    first: int                 # the first cell's index
    nearest: np.ndarray        # int64 per cell from ``first`` on: the smallest |k| in the cell

    def sample(self, n: int, source) -> np.ndarray:
        out = np.empty(n, dtype=np.int64)
        todo = np.arange(n)
        shift = np.uint64(64 - self.bits)
        while todo.size:
            m = todo.size
            words = source.random_raw(3 * m)
            cell = np.empty(m, dtype=np.int64)
            self.cells.invert(words[:m], cell)
            offset = (words[m:2 * m] >> shift).astype(np.int64)
            k = (cell << self.bits) + offset
            nearest = self.nearest[cell - self.first]
            magnitude = np.abs(k)
            exponent = ((magnitude - nearest).astype(np.float64)
                        * (magnitude + nearest).astype(np.float64)) / (2.0 * self.sigma2)
            uniform = (words[2 * m:] >> np.uint64(11)).astype(np.float64) * _TWO_POW_53_INV
            keep = uniform < np.exp(-exponent)
            out[todo[keep]] = k[keep]
            todo = todo[~keep]
        return out


def _table(sigma2: float) -> _Inversion:
    cut = _tail_cut(sigma2)
    values = np.arange(-cut, cut + 1)
    return _inversion(discrete_gaussian_pmf(values, sigma2), -cut)


def _envelope(sigma2: float) -> _Envelope:
    cut = _tail_cut(sigma2)
    sigma = math.sqrt(sigma2)
    bits = max(1, math.floor(math.log2(sigma / _CELLS_PER_SIGMA)))
    width = 1 << bits
    first, last = -(-cut // width), cut // width      # cells -first .. last cover [-cut, cut]
    cells = np.arange(-first, last + 1, dtype=np.int64)
    starts = cells << bits
    nearest = np.where(cells > 0, starts, np.where(cells < 0, -(starts + width - 1), 0))
    log_weight = -(nearest.astype(np.float64) ** 2) / (2.0 * sigma2)
    weight = np.exp(log_weight - log_weight.max())
    return _Envelope(sigma2, bits, _inversion(weight / weight.sum(), -first), -first, nearest)


@lru_cache(maxsize=64)
def _table_for(sigma2: float, method: str) -> _Inversion | _Envelope:
    """The cached table (``'table'``) or envelope (``'envelope'``) of σ²."""
    return _table(sigma2) if method == "table" else _envelope(sigma2)


def _method(sigma2: float) -> str:
    return "table" if sigma2 <= MAX_TABLE_SIGMA2 else "envelope"


def _sample(sigma2: float, n: int, source, method: str) -> np.ndarray:
    """``n`` draws with ``method`` (``'table'`` or ``'envelope'``), chunk by chunk."""
    sampler = _table_for(sigma2, method)
    out = np.empty(n, dtype=np.int64)
    for start in range(0, n, _CHUNK):
        stop = min(n, start + _CHUNK)
        if method == "table":
            sampler.invert(source.random_raw(stop - start), out[start:stop])
        else:
            out[start:stop] = sampler.sample(stop - start, source)
    return out


def sample_discrete_gaussian_fast(sigma2: Any, size: int | tuple[int, ...],
                                  rng: Any) -> np.ndarray:
    """Discrete Gaussian noise ``N_Z(σ²)`` for simulations, fast and exact to float precision.

    Draws from a cached table of the pmf by inversion of 64-bit words (one word per draw) for
    σ² up to 1e6, and by rejection from a piecewise-constant envelope above (about three words
    per draw); see :mod:`hierarchy.mechanisms._fast`. The law drawn differs from ``N_Z(σ²)`` by a
    total variation distance below ``2**-45`` (:data:`TV_BOUND`): tail mass below ``2**-60`` is
    cut, and the tables' floating-point rounding accounts for the rest. For the same seed and
    ``size`` the draws are the same; they differ from the exact sampler's.

    **Simulation mode only.** The tables are computed in floating point, and noise whose law
    depends on floating-point rounding is refused in release mode (Mironov 2012): use
    :func:`~hierarchy.mechanisms.sample_discrete_gaussian`, the exact sampler, there.

    Parameters
    ----------
    sigma2 : float, int or Fraction
        Positive σ², at most 1e30. Used as the float nearest to it.
    size : int or tuple of int
        Shape of the output.
    rng : int, numpy.random.Generator or Randomness
        A simulation-mode source of randomness (``None`` means release mode and is refused).

    Returns
    -------
    numpy.ndarray of int64, shape ``size``

    Raises
    ------
    HierarchyError
        If ``rng`` is release-mode randomness, ``sigma2`` is not positive and finite or exceeds
        1e30, or ``size`` is invalid.

    Examples
    --------
    >>> from hierarchy.randomness import Randomness
    >>> x = sample_discrete_gaussian_fast(2.5, (1000, 3), Randomness.simulation(11))
    >>> x.shape, x.dtype, bool(abs(x.mean()) < 0.2), bool(2.2 < x.var() < 2.8)
    ((1000, 3), dtype('int64'), True, True)
    >>> sample_discrete_gaussian_fast(2.5, 3, None)
    Traceback (most recent call last):
    ...
    hierarchy.errors.HierarchyError: the fast discrete Gaussian sampler is refused in release mode:
    its tables are computed in floating point, whose rounding can leak the values it protects
    (Mironov 2012); use the exact sampler (exact = true in a config's [mechanism],
    DiscreteGaussian(exact=True), sample_discrete_gaussian), or a seed for a simulation
    """
    sigma2 = positive(sigma2, "sigma2")
    if sigma2 > MAX_SIGMA2:
        raise HierarchyError(f"sigma2 = {sigma2:g} exceeds {MAX_SIGMA2:g}: the noise would not "
                             f"fit in int64")
    shape, n = _shape(size)
    source = as_randomness(rng)
    if source.mode == "release":
        raise HierarchyError(
            "the fast discrete Gaussian sampler is refused in release mode: its tables are "
            "computed in floating point, whose rounding can leak the values it protects "
            "(Mironov 2012); use the exact sampler (exact = true in a config's [mechanism], "
            "DiscreteGaussian(exact=True), sample_discrete_gaussian), or a seed for a "
            "simulation")
    return _sample(sigma2, n, source, _method(sigma2)).reshape(shape)
