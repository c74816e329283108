"""The operators one unit signature shares in the hierarchical GLS (``docs/gls.md``): its
subtree estimate's covariance ``C``, the map from its equalities' right-hand sides, and its
children's sum's pseudo-inverse covariance ``Σ⁺``; and what a unit's children need of it for
their covariances when they are solved apart (:func:`step_precision`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np
import scipy.sparse as sp

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


def _conditioned_covariance(c: np.ndarray, sigma_pinv: np.ndarray, parent_cov: np.ndarray
                            ) -> np.ndarray:
    """A child's covariance given every measurement, ``C − C Σ⁺ C + C Σ⁺ V Σ⁺ C``, from its
    subtree covariance ``C``, its parent's children's sum's ``Σ⁺`` and the parent's estimate's
    covariance ``V`` (:func:`step_precision` is the same with ``M`` formed once per parent)."""
    gain = c @ sigma_pinv
    cov = c - gain @ c + gain @ parent_cov @ gain.T
    return (cov + cov.T) / 2


def _answer_variances(covariances: Sequence[np.ndarray], q: Any, races: int | None = None
                      ) -> np.ndarray:
    """The variances (units × answers) of a query's answers (``q``: answers × cells of the
    covariances' coordinates) from each unit's covariance per problem (stacked, units × k × k):
    ``diag(Q V Qᵀ)`` with one problem; on the succinct path (``races`` = R, the mean problem's
    and the contrast problems' covariances) ``V = F₁ ⊗ I + F₂ ⊗ J`` with ``F₁`` the contrast
    problem's and ``F₂ = (V_mean − F₁)/R``. Negative rounding clipped to 0."""
    q = q.toarray() if sp.issparse(q) else np.asarray(q, dtype=np.float64)
    if races is None:
        return np.maximum(np.einsum("nab,qab->nq", covariances[0],
                                    np.einsum("qa,qb->qab", q, q)), 0.0)
    q = q.reshape(q.shape[0], -1, races)
    sums = q.sum(axis=2)
    f1 = covariances[1]
    f2 = (covariances[0] - f1) / races
    return np.maximum(np.einsum("nab,qab->nq", f1, np.einsum("qar,qbr->qab", q, q))
                      + np.einsum("nab,qab->nq", f2, np.einsum("qa,qb->qab", sums, sums)), 0.0)


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
    children's sum's covariance ``sigma`` (None at the bottom level). One unit at a time: the
    statement of what :func:`_operators` computes in stacks (and its referee in the tests)."""
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
        _refuse(where, basis @ vectors[:, values <= RANK_TOLERANCE * scale])
    inner = (vectors / values) @ vectors.T
    cov = basis @ inner @ basis.T
    cov = (cov + cov.T) / 2
    of_rhs = rows_pinv - cov @ (info @ rows_pinv)
    return _Operator(cov, of_rhs, sigma_pinv, null_sigma)


#: Units whose operators are computed in one stack at most (memory: a few stacks of this many
#: cells × cells matrices).
STACK_UNITS = 4096


def _operators(infos: Sequence[np.ndarray], rows: Sequence[np.ndarray],
               sigmas: Sequence[np.ndarray | None], names: Sequence[str]) -> list[_Operator]:
    """:func:`_operator` of many signatures at once: the same factorizations, done in stacks
    of equal shapes (numpy's batched ``eigh`` and ``svd``) instead of one small call each —
    the block groups of a part are hundreds of distinct 32 × 32 signatures."""
    out: list[_Operator] = []
    for lo in range(0, len(infos), STACK_UNITS):
        hi = lo + STACK_UNITS
        out.extend(_stacked(infos[lo:hi], rows[lo:hi], sigmas[lo:hi], names[lo:hi]))
    return out


def _swap(a: np.ndarray) -> np.ndarray:
    return np.swapaxes(a, -1, -2)


def _by_shape(indices: Sequence[int], shape_of) -> list[tuple[Any, np.ndarray]]:
    """The indices grouped by ``shape_of(i)``."""
    groups: dict[Any, list[int]] = {}
    for i in indices:
        groups.setdefault(shape_of(i), []).append(i)
    return [(shape, np.array(idx)) for shape, idx in groups.items()]


def _stacked(infos: Sequence[np.ndarray], rows: Sequence[np.ndarray],
             sigmas: Sequence[np.ndarray | None], names: Sequence[str]) -> list[_Operator]:
    m = len(infos)
    sigma_pinv: list[np.ndarray | None] = [None] * m
    null: list[np.ndarray | None] = [None] * m
    with_sigma = [i for i in range(m) if sigmas[i] is not None]
    for _, idx in _by_shape(with_sigma, lambda i: sigmas[i].shape):     # Σ⁺ and its null space
        stack = np.stack([np.asarray(sigmas[i], dtype=np.float64) for i in idx])
        values, vectors = np.linalg.eigh((stack + _swap(stack)) / 2)
        top = np.maximum(values.max(axis=1, initial=0.0), 0.0)
        keep = (values > RANK_TOLERANCE * top[:, None]) & (top[:, None] > 0)
        inverse = np.where(keep, 1.0 / np.where(keep, values, 1.0), 0.0)
        pinv = (vectors * inverse[:, None, :]) @ _swap(vectors)
        pinv = (pinv + _swap(pinv)) / 2
        for j, i in enumerate(idx.tolist()):
            sigma_pinv[i], null[i] = pinv[j], vectors[j][:, ~keep[j]]
    info = [infos[i] if sigma_pinv[i] is None else infos[i] + sigma_pinv[i] for i in range(m)]
    full = [rows[i] if null[i] is None else np.concatenate([rows[i], null[i].T], axis=0)
            for i in range(m)]
    out: list[_Operator | None] = [None] * m
    for (r, n), idx in _by_shape(range(m), lambda i: full[i].shape):
        a = np.stack([info[i] for i in idx])
        if r:
            w, s, vt = np.linalg.svd(np.stack([full[i] for i in idx]), full_matrices=True)
            rank = np.sum(s > RANK_TOLERANCE * s.max(axis=1, keepdims=True), axis=1)
        else:
            rank = np.zeros(idx.size, dtype=np.int64)
        for k in np.unique(rank).tolist():
            sub = np.flatnonzero(rank == k)
            if r:
                rows_pinv = (_swap(vt[sub, :k]) / s[sub, None, :k]) @ _swap(w[sub][:, :, :k])
                basis = _swap(vt[sub, k:])
            else:
                rows_pinv = np.zeros((sub.size, n, 0))
                basis = np.broadcast_to(np.eye(n), (sub.size, n, n))
            covariances, of_rhs = _reduced(a[sub], basis, rows_pinv,
                                           [names[i] for i in idx[sub].tolist()])
            for j, i in enumerate(idx[sub].tolist()):
                out[i] = _Operator(covariances[j], of_rhs[j], sigma_pinv[i], null[i])
    return out        # type: ignore[return-value]


def _reduced(info: np.ndarray, basis: np.ndarray, rows_pinv: np.ndarray, names: Sequence[str]
             ) -> tuple[np.ndarray, np.ndarray]:
    """The covariances ``Z (Zᵀ A Z)⁻¹ Zᵀ`` and maps ``F⁺ − C A F⁺`` of a stack of units with
    bases ``Z`` of equal width; a unit whose information leaves a direction free is named."""
    units, n, free = basis.shape
    if free == 0:
        covariances = np.zeros((units, n, n))
    else:
        reduced = _swap(basis) @ info @ basis
        values, vectors = np.linalg.eigh((reduced + _swap(reduced)) / 2)
        scale = np.maximum(np.abs(values).max(axis=1), 1e-300)
        loose = values <= RANK_TOLERANCE * scale[:, None]
        if loose.any():
            u = int(np.flatnonzero(loose.any(axis=1))[0])
            _refuse(names[u], basis[u] @ vectors[u][:, loose[u]])
        covariances = basis @ ((vectors / values[:, None, :]) @ _swap(vectors)) @ _swap(basis)
        covariances = (covariances + _swap(covariances)) / 2
    return covariances, rows_pinv - covariances @ (info @ rows_pinv)


def _refuse(where: str, loose: np.ndarray) -> None:
    """A unit whose measurements and equalities leave the directions ``loose`` free."""
    cells = np.flatnonzero(np.abs(loose).max(axis=1) > 1e-6)
    raise PostprocError(f"{where}: its measurements do not determine its histogram "
                        f"(cells {cells[:12].tolist()}{' …' if cells.size > 12 else ''} "
                        f"are neither determined by the measured queries nor fixed by an "
                        f"equality); measure 'detailed' there or queries that together "
                        f"determine every cell")
