"""The operators one unit signature shares in the hierarchical GLS (``docs/gls.md``): its
subtree estimate's covariance ``C``, the map from its equalities' right-hand sides, and its
children's sum's pseudo-inverse covariance ``Σ⁺``; and what a unit's children need of it for
their covariances when they are solved apart (:func:`step_precision`)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from postproc.errors import PostprocError

__all__ = ["step_precision", "RANK_TOLERANCE"]

#: Relative size below which an eigenvalue (of a covariance) or a singular value (of the
#: equality rows) counts as zero.
RANK_TOLERANCE = 1e-10


@dataclass(eq=False)
class _Operator:
    """What one distinct signature's units share: the subtree estimate's covariance ``C``, the
    maps from information and right-hand sides to the estimate, and the children's sum's
    pseudo-inverse covariance (for the downward pass)."""

    covariance: np.ndarray                  # C (cells × cells)
    of_rhs: np.ndarray                      # (I − C A) F⁺ (cells × rows of F)
    sigma_pinv: np.ndarray | None           # Σ⁺ of the children's sum (None at the bottom)
    null_sigma: np.ndarray | None           # U₀: the directions where Σ is 0 (cells × k)


def step_precision(sigma_pinv: np.ndarray, covariance: np.ndarray) -> np.ndarray:
    """What a unit's children need of it for their covariances: ``M = Σ⁺ V Σ⁺ − Σ⁺``, with
    ``Σ⁺`` the pseudo-inverse covariance of its children's sum and ``V`` its estimate's
    covariance; a child with subtree covariance ``C`` then has ``Cov(B_c) = C + C M C``
    (``C − C Σ⁺ C + C Σ⁺ V Σ⁺ C``). Stacked: (units × k × k) arrays.

    Examples
    --------
    Hay et al.'s root (its children's sum has variance 2, its estimate 2/3): a leaf of
    subtree variance 1 has variance 1 − 1/2 + 2/3 · 1/4 = 2/3.

    >>> m = step_precision(np.array([[0.5]]), np.array([[2 / 3]]))
    >>> round(float(1 + 1 * m[0, 0] * 1), 4)
    0.6667
    """
    out = sigma_pinv @ covariance @ sigma_pinv - sigma_pinv
    return (out + np.swapaxes(out, -1, -2)) / 2


def _spectrum(matrix: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Eigenvalues and eigenvectors of a positive semidefinite matrix, and which eigenvalues
    count as positive (above :data:`RANK_TOLERANCE` of the largest)."""
    values, vectors = np.linalg.eigh((matrix + matrix.T) / 2)
    top = max(float(values.max(initial=0.0)), 0.0)
    keep = values > RANK_TOLERANCE * top if top > 0 else np.zeros(values.size, bool)
    return values, vectors, keep


def _pinv_psd(matrix: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Pseudo-inverse of a positive semidefinite matrix and a basis of its null space."""
    values, vectors, keep = _spectrum(matrix)
    pinv = (vectors[:, keep] / values[keep]) @ vectors[:, keep].T
    return (pinv + pinv.T) / 2, vectors[:, ~keep]


def _operator(info: np.ndarray, rows: np.ndarray, sigma: np.ndarray | None, where: str
              ) -> _Operator:
    """The subtree estimate's operators for information ``info``, equality rows ``rows`` and the
    children's sum's covariance ``sigma`` (None at the bottom level)."""
    n = info.shape[0]
    sigma_pinv = null_sigma = None
    if sigma is not None:
        sigma_pinv, null_sigma = _pinv_psd(sigma)
        info = info + sigma_pinv
        rows = np.concatenate([rows, null_sigma.T], axis=0)
    if rows.shape[0]:
        w, s, vt = np.linalg.svd(rows, full_matrices=True)
        rank = int(np.sum(s > RANK_TOLERANCE * s.max())) if s.size else 0
        rows_pinv = (vt[:rank].T / s[:rank]) @ w[:, :rank].T
        basis = vt[rank:].T
    else:
        rows_pinv, basis = np.zeros((n, 0)), np.eye(n)
    reduced = basis.T @ info @ basis
    values, vectors = np.linalg.eigh((reduced + reduced.T) / 2)
    scale = max(float(np.abs(values).max(initial=0.0)), 1e-300)
    if values.size and values.min() <= RANK_TOLERANCE * scale:
        loose = basis @ vectors[:, values <= RANK_TOLERANCE * scale]
        cells = np.flatnonzero(np.abs(loose).max(axis=1) > 1e-6)
        raise PostprocError(f"{where}: its measurements do not determine its histogram "
                            f"(cells {cells[:12].tolist()}{' …' if cells.size > 12 else ''} "
                            f"are neither determined by the measured queries nor fixed by an "
                            f"equality); measure 'detailed' there or queries that together "
                            f"determine every cell")
    inner = (vectors / values) @ vectors.T
    cov = basis @ inner @ basis.T
    cov = (cov + cov.T) / 2
    of_rhs = rows_pinv - cov @ (info @ rows_pinv)
    return _Operator(cov, of_rhs, sigma_pinv, null_sigma)
