"""The Gaussian kernel-sum engine under every KDE of the EPL estimators, ``_gaussian_sums``."""

from __future__ import annotations

import math

import numpy as np
from numpy.lib.stride_tricks import as_strided

_TAIL = 40.0            # kernel cut at 40 sd: exp(-800) underflows to 0 in float64, as in scipy
_TAYLOR_TOL = 1e-14     # relative error of each kernel term in the binned path
_SUB = 256              # fine-grid nodes per kernel sd in the binned path
_DIRECT_LIMIT = 2 ** 24  # distinct values × grid points summed directly (exactly)
_BLOCK = 2 ** 22        # elements per temporary matrix


def _is_integer(e: np.ndarray) -> bool:
    return bool(np.array_equal(e, np.rint(e)))


def _compress(e: np.ndarray, integer: bool | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Sorted distinct values and their counts when ``e`` is integer-valued, else ``(e, ones)``."""
    if _is_integer(e) if integer is None else integer:
        low = e.min()
        span = e.max() - low
        if span < 4 * e.size + 1_000_000:
            counts = np.bincount((e - low).astype(np.int64)).astype(float)
            present = np.flatnonzero(counts)
            return low + present.astype(float), counts[present]
        values, counts = np.unique(e, return_counts=True)
        return values, counts.astype(float)
    return e, np.ones(e.size)


def _direct_sums(values, weights, x, sigma):
    out = np.empty(x.size)
    rows = max(1, _BLOCK // max(values.size, 1))
    for j0 in range(0, x.size, rows):
        d = (x[j0:j0 + rows, None] - values[None, :]) / sigma
        out[j0:j0 + rows] = np.exp(-0.5 * d * d) @ weights
    return out


def _gaussian_sums(values, weights, *, start, step, size, sigma):
    """``S[j] = Σ_i w_i exp(−(x_j − v_i)² / (2σ²))`` at ``x_j = start + j·step``, ``j < size``.

    Direct (exact) sums when ``distinct values × size`` is small. Otherwise each value ``v`` goes
    to its nearest node ``g`` of a grid of spacing ``δ = step / sub`` (``δ ≤ σ/256``, or
    ``sub = 1`` when the values lie on the evaluation grid) and, with ``r = v − g``, ``t = x − g``,
    ``exp(−(t − r)²/2σ²) = exp(−t²/2σ²) · exp(−r²/2σ²) · Σ_p (t/σ)^p (r/σ)^p / p!``: the node
    moments ``Σ w exp(−r²/2σ²) (r/σ)^p/p!`` are bincounts, each convolved with the kernel
    ``(t/σ)^p exp(−t²/2σ²)``; enough terms are kept for a relative error below 1e-14 over the
    kernel's ±40σ support (beyond it ``exp`` underflows to 0 in float64 anyway).
    """
    x_last = start + (size - 1) * step
    keep = (values >= start - _TAIL * sigma) & (values <= x_last + _TAIL * sigma)
    if not keep.all():
        values, weights = values[keep], weights[keep]
    # Read through the package, where tests lower it to force the binned paths.
    if values.size * size <= _DIRECT_LIMIT:
        return _direct_sums(values, weights, start + step * np.arange(size), sigma)
    offsets = (values - start) / step
    on_grid = np.array_equal(offsets, np.rint(offsets))
    sub = 1 if on_grid else max(1, math.ceil(_SUB * step / sigma))
    delta = step / sub
    half = math.ceil(_TAIL * sigma / delta)
    n_nodes = (size - 1) * sub + 2 * half + 1
    node = np.rint((values - start) / delta).astype(np.int64)
    resid = (values - (start + node * delta)) / sigma
    node += half
    inside = (node >= 0) & (node < n_nodes)
    if not inside.all():
        node, resid, weights = node[inside], resid[inside], weights[inside]
    u_max = _TAIL * float(np.max(np.abs(resid), initial=0.0))
    terms = 1
    while u_max > 0 and u_max ** terms * math.exp(u_max) / math.factorial(terms) > _TAYLOR_TOL:
        terms += 1
    q = -(-(2 * half + 1) // sub)            # kernel taps per evaluation point, in rows of `sub`
    rows = size + q - 1
    if rows * sub * terms > 8 * _BLOCK:      # too fine a grid for memory: sum exactly instead
        return _direct_sums(values, weights, start + step * np.arange(size), sigma)
    moments = np.zeros((terms, rows * sub))
    term = weights * np.exp(-0.5 * resid * resid)
    for p in range(terms):
        moments[p, :n_nodes] = np.bincount(node, term, minlength=n_nodes)
        if p + 1 < terms:
            term = term * resid / (p + 1)
    taps = np.arange(q * sub)
    t = (half - taps) * (delta / sigma)
    gauss = np.where(taps <= 2 * half, np.exp(-0.5 * t * t), 0.0)
    kernels = gauss * t ** np.arange(terms)[:, None]
    # S[j] = Σ_p Σ_s moments[p, j·sub + s] kernels[p, s].
    if q > 2048:  # a wide kernel: FFT correlation, accurate to ~1e-13 of the largest sum
        from scipy.signal import fftconvolve
        full = sum(fftconvolve(moments[p], kernels[p, ::-1], mode="valid") for p in range(terms))
        return full[::sub][:size]
    # With rows of `sub` nodes this is A = moments_rows @ kernel_rows.T, then
    # S[j] = Σ_k A[j + k, k], a sum along the diagonals of A.
    mr = moments.reshape(terms, rows, sub).transpose(1, 0, 2).reshape(rows, terms * sub)
    kr = kernels.reshape(terms, q, sub).transpose(1, 0, 2).reshape(q, terms * sub)
    out = np.empty(size)
    block = max(q, _BLOCK // q)
    for j0 in range(0, size, block):
        j1 = min(size, j0 + block)
        a = np.ascontiguousarray(mr[j0:j1 + q - 1] @ kr.T)
        diagonals = as_strided(a, shape=(j1 - j0, q),
                               strides=(a.strides[0], a.strides[0] + a.strides[1]))
        out[j0:j1] = diagonals.sum(axis=1)
    return out
