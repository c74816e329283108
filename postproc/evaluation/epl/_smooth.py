"""The smoother under the improved and direct estimators: penalized Poisson fits of log counts.

The counts ``c_u`` of one side of a distribution (bins ``u = 0, 1, …, U`` away from its centre) are
modelled as independent Poisson with ``log μ_u = η_u = (Bα)_u``: ``B`` is the identity for up to
``_KMAX`` bins and cubic B-splines with ``_KMAX`` coefficients otherwise. The fit maximizes the
penalized log-likelihood ``Σ (c_u η_u − μ_u) − (λ/2) ‖D_d α‖²``, ``D_d`` the ``d``-th differences,
``d = 3`` (fewer when the side has fewer than three non-empty bins). Third differences leave every
quadratic ``η`` unpenalized, so a geometric tail (linear ``η``) and a discrete Gaussian (quadratic
``η``) are fitted without smoothing bias whatever ``λ``. ``λ`` minimizes the Laplace-approximate
marginal likelihood (Wood 2011) over a grid and ``λ = ∞`` (the quadratic fit); the sampling
distribution of the fit is the Bayesian posterior ``α ~ N(α̂, H⁻¹)``, ``H = BᵀWB + λDᵀD``
(Wahba 1983; Nychka 1988; Marra & Wood 2012).

Everything an estimator derives from a fit is a set of linear functionals ``Aα`` (log ratios of
neighbouring bins, or fitted log counts): :class:`Functionals` carries their values, standard
errors and the means to draw them, and :func:`max_with_interval` turns any such set into the
estimate ``max |value|``, the contenders for that maximum, and the interval.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import sparse
from scipy.interpolate import BSpline
from scipy.linalg import LinAlgError, cho_factor, cho_solve, solve_triangular
from scipy.special import ndtri
from scipy.stats import chi2

_KMAX = 40                                  # coefficients of one side's fit
_LOG_LAMBDA = np.arange(6.0, -6.01, -1.0)   # log10 λ relative to the data's scale, strong first
_REFINE = 0.5                               # then the best one's neighbours at ± this
_NEWTON_STEPS = 100
_MAX_BINS = 2_000_000                       # bins of one side's fit
_SHAPE_LEVEL = 0.01                 # a side is as simple as the data allow, tested at 1 %
_CHI2_LINEAR = float(chi2.ppf(1 - _SHAPE_LEVEL, 1))
_DENSE_BINS = 50_000                        # a dense basis up to this many bins, sparse beyond


@dataclass(frozen=True)
class SideFit:
    """One side's fit: basis ``B`` (``G × K``), coefficients, Cholesky factor of ``H``, ``λ``."""

    basis: object          # numpy array or scipy sparse matrix
    coef: np.ndarray
    chol: np.ndarray       # lower-triangular L with H = L Lᵀ (H of the projected coefficients)
    log_lambda: float      # log10 of λ relative to the data's scale (inf: the null-space fit)
    order: int             # penalty order actually used
    project: np.ndarray | None = None   # α = project @ β for λ = ∞ (β has the Hessian H)

    def rows(self, u: np.ndarray) -> np.ndarray:
        """Dense rows ``B[u]`` of the basis."""
        rows = self.basis[np.asarray(u, dtype=np.int64)]
        return rows.toarray() if sparse.issparse(rows) else np.asarray(rows)


def _basis(size: int):
    """The identity for few bins, else cubic B-splines with ``_KMAX`` coefficients (sparse beyond
    ``_DENSE_BINS`` bins)."""
    if size <= _KMAX:
        return np.eye(size)
    segments = _KMAX - 3
    step = (size - 1) / segments
    knots = step * np.arange(-3, segments + 4)
    basis = BSpline.design_matrix(np.arange(size, dtype=float), knots, 3,
                                  extrapolate=True).tocsr()
    return basis.toarray() if size <= _DENSE_BINS else basis


def _hessian(basis, mu):
    if sparse.issparse(basis):
        return np.asarray((basis.T @ basis.multiply(mu[:, None])).todense())
    return basis.T @ (basis * mu[:, None])


def _penalized_loglik(basis, counts, penalty, lam, coef):
    eta = basis @ coef
    with np.errstate(over="ignore", invalid="ignore"):
        value = counts @ eta - np.sum(np.exp(eta)) - 0.5 * lam * coef @ penalty @ coef
    return value if np.isfinite(value) else -np.inf


def _newton(basis, counts, penalty, lam, coef):
    """Maximize the penalized Poisson log-likelihood from ``coef``; None if it does not converge.

    Newton's method with Armijo backtracking; converged when the Newton decrement ``gᵀH⁻¹g``
    (twice the predicted gain, in log-likelihood units) is below 1e-10. Near the optimum
    (decrement below 1e-6) the full step is taken: its gain is then below the objective's
    rounding error, so backtracking would only stall.
    """
    current = _penalized_loglik(basis, counts, penalty, lam, coef)
    for _ in range(_NEWTON_STEPS):
        with np.errstate(over="ignore", invalid="ignore"):
            mu = np.exp(basis @ coef)
            gradient = basis.T @ (counts - mu) - lam * (penalty @ coef)
            hessian = _hessian(basis, mu) + lam * penalty
        try:
            step = cho_solve(cho_factor(hessian, lower=True), gradient)
        except (LinAlgError, ValueError):
            return None
        decrement = float(gradient @ step)
        if not np.isfinite(decrement):
            return None
        if decrement < 1e-10:
            return coef
        t = 1.0
        while True:
            trial = coef + t * step
            value = _penalized_loglik(basis, counts, penalty, lam, trial)
            if value >= current + 0.25 * t * decrement or (decrement < 1e-6 and value > -np.inf):
                break
            t /= 2
            if t < 1e-12:
                return None
        coef, current = trial, value
    return None


def _polynomial_fit(basis, counts: np.ndarray, null: np.ndarray, coef: np.ndarray):
    """The Poisson maximum-likelihood fit of ``η = B N β`` (``N`` the columns of ``null``): its
    coefficients ``N β``, the Cholesky factor of its Hessian in ``β``, and its log-likelihood;
    None if it does not converge."""
    dim = null.shape[1]
    design = np.asarray(basis @ null)
    fitted = _newton(design, counts, np.zeros((dim, dim)), 0.0, null.T @ coef)
    if fitted is None:
        return None
    eta = design @ fitted
    try:
        chol = np.linalg.cholesky(_hessian(design, np.exp(eta)))
    except LinAlgError:
        return None
    return null @ fitted, chol, float(counts @ eta - np.sum(np.exp(eta)))


def _polynomials(k: int, degree: int) -> np.ndarray:
    """An orthonormal basis of the coefficient vectors that are polynomials of ``degree`` (or
    less) in their index: the null space of the ``degree + 1``-th differences."""
    index = np.linspace(-1.0, 1.0, k)
    return np.linalg.qr(np.vander(index, degree + 1, increasing=True))[0]


def _straight_suffices(basis, counts: np.ndarray, coef: np.ndarray) -> bool:
    """Whether the data do not reject a straight ``η`` (linear in ``u``) against a quadratic one:
    the likelihood-ratio statistic of the quadratic term is below χ²₁'s ``_LINEAR_LEVEL``
    quantile. A geometric side is straight; a discrete Gaussian side is not."""
    k = basis.shape[1]
    quadratic = _polynomial_fit(basis, counts, _polynomials(k, 2), coef)
    straight = _polynomial_fit(basis, counts, _polynomials(k, 1), coef)
    if quadratic is None or straight is None:
        return False
    return 2 * (quadratic[2] - straight[2]) < _CHI2_LINEAR


def _rejects(basis, flexible, polynomial, penalty, order: int) -> bool:
    """Whether a penalized fit rejects the polynomial (null-space) fit at ``_SHAPE_LEVEL``: its
    likelihood-ratio statistic exceeds the ``1 − _SHAPE_LEVEL`` quantile of χ² with its effective
    degrees of freedom beyond the polynomial's (the trace of its hat matrix ``H⁻¹ BᵀWB``, less
    ``order``), and at least one: a fit a hair from the polynomial (strong smoothing, a
    fraction of a degree of freedom) must still gain a whole parameter's worth."""
    if polynomial is None:
        return True
    coef, chol = flexible[1], flexible[2]
    mu = np.exp(basis @ coef)
    fisher = _hessian(basis, mu)
    edf = float(np.trace(cho_solve((chol, True), fisher)))
    extra = max(1.0, edf - order)
    return 2 * (flexible[5] - polynomial[5]) > chi2.ppf(1 - _SHAPE_LEVEL, extra)


def fit_side(counts: np.ndarray) -> SideFit | None:
    """Fit one side's counts (``counts[u]`` at ``u`` bins from the centre); None if impossible.

    **The shape.** The smoothing penalty is on third differences, which leave every quadratic
    ``η`` unpenalized, unless the data do not reject a straight ``η`` against a quadratic one (a
    likelihood-ratio test at 5 %, :func:`_straight_suffices`): then on second differences, which
    leave every straight ``η`` unpenalized. A geometric side is straight, so its fitted log
    ratios are one number, estimated from all of the side's counts, instead of a line whose far
    end carries the noise of a curvature the data cannot see.

    **The smoothing.** The candidates are ``λ = ∞`` — the Poisson maximum-likelihood fit within
    the penalty's null space (a quadratic or a straight ``η``), computed exactly rather than as a
    badly conditioned limit — and the grid ``_LOG_LAMBDA`` (refined by ``±_REFINE`` around the
    best finite value); the one with the smallest Laplace-approximate marginal likelihood
    criterion wins. The fit needs at least two non-empty bins: with ``m`` of them the penalty
    order is at most ``m``, so its unpenalized polynomials (degree ``order − 1``) cannot vanish
    on every non-empty bin, and the maximum-likelihood fit exists.
    """
    counts = np.asarray(counts, dtype=float)
    size = counts.size
    occupied = int(np.count_nonzero(counts))
    if occupied < 2:
        return None
    basis = _basis(size)
    k = basis.shape[1]
    start = np.log(counts + 0.5)
    if k < size:             # B-splines: least squares of log(counts + 1/2)
        gram = _hessian(basis, np.ones(size)) + 1e-8 * np.eye(k)
        coef = np.linalg.solve(gram, basis.T @ start)
    else:                    # the identity
        coef = start.copy()
    order = min(3, occupied, k)
    if order == 3 and _straight_suffices(basis, counts, coef):
        order = 2
    difference = np.diff(np.eye(k), n=order, axis=0)
    penalty = difference.T @ difference
    rank = k - order
    eigenvalues, eigenvectors = np.linalg.eigh(penalty)
    null = eigenvectors[:, :order]                    # the unpenalized polynomials, orthonormal
    log_det_penalty = float(np.sum(np.log(eigenvalues[order:])))
    scale = np.trace(_hessian(basis, counts + 0.5)) / max(np.trace(penalty), 1e-300)

    def infinite(coef):
        fitted = _polynomial_fit(basis, counts, null, coef)
        if fitted is None:
            return None
        coef, chol, loglik = fitted
        criterion = -loglik + np.sum(np.log(np.diag(chol))) + 0.5 * log_det_penalty
        return criterion, coef, chol, math.inf, null, loglik

    def finite(log_lambda, coef):
        lam = scale * 10.0 ** log_lambda
        fitted = _newton(basis, counts, penalty, lam, coef)
        if fitted is None:
            return None
        eta = basis @ fitted
        try:
            chol = np.linalg.cholesky(_hessian(basis, np.exp(eta)) + lam * penalty)
        except LinAlgError:
            return None
        # Laplace-approximate (negative log) marginal likelihood; the constant -½ log|P|₊ is
        # dropped here and in `infinite`, where the limit λ → ∞ leaves ½ log|N'B'WBN| + ½ log|P|₊
        loglik = float(counts @ eta - np.sum(np.exp(eta)))
        criterion = (-loglik + 0.5 * lam * fitted @ penalty @ fitted
                     + np.sum(np.log(np.diag(chol))) - 0.5 * rank * math.log(lam))
        return criterion, fitted, chol, float(log_lambda), None, loglik

    best = infinite(coef)
    if rank > 0:
        coef = best[1] if best is not None else coef
        best_finite = None
        for log_lambda in _LOG_LAMBDA:
            candidate = finite(log_lambda, coef)
            if candidate is None:
                continue
            coef = candidate[1]
            if best_finite is None or candidate[0] < best_finite[0]:
                best_finite = candidate
        if best_finite is not None:
            for log_lambda in (best_finite[3] - _REFINE, best_finite[3] + _REFINE):
                if _LOG_LAMBDA[-1] <= log_lambda <= _LOG_LAMBDA[0]:
                    candidate = finite(log_lambda, best_finite[1])
                    if candidate is not None and candidate[0] < best_finite[0]:
                        best_finite = candidate
            if best is None or (best_finite[0] < best[0]
                                and _rejects(basis, best_finite, best, penalty, order)):
                best = best_finite
    if best is None:
        return None
    coef, chol, log_lambda, project = best[1:5]
    return SideFit(basis=basis, coef=coef, chol=chol, log_lambda=log_lambda, order=order,
                   project=project)


@dataclass(frozen=True)
class Functionals:
    """Linear functionals of independent Gaussian fits: values, standard errors, and draws.

    ``blocks`` are ``(columns, Y)`` pairs (distinct columns within a block): the functionals in
    ``columns`` receive ``Yᵀ ξ`` with ``ξ ~ N(0, I)`` of the block's size, ``Y = L⁻¹ Aᵀ`` for the
    fit's factor ``L`` (so that ``Cov = A H⁻¹ Aᵀ``); independent blocks add.
    """

    values: np.ndarray
    blocks: tuple

    @property
    def se(self) -> np.ndarray:
        var = np.zeros(self.values.size)
        for columns, y in self.blocks:
            var[columns] += np.sum(y * y, axis=0)
        return np.sqrt(var)

    @property
    def draw_size(self) -> int:
        """Numbers drawn per replicate (for the memory estimate)."""
        return int(sum(y.shape[0] for _, y in self.blocks))

    def draws(self, generator: np.random.Generator, n: int) -> np.ndarray:
        """``n`` draws of the functionals' deviations from their values, ``(n, size)``."""
        out = np.zeros((n, self.values.size))
        for columns, y in self.blocks:
            out[:, columns] += generator.standard_normal((n, y.shape[0])) @ y
        return out


def functionals(fit: SideFit, rows: np.ndarray, columns: np.ndarray, sign: float = 1.0,
                offset: float = 0.0):
    """``sign · (rows @ α) + offset`` and its block for :class:`Functionals`."""
    values = sign * (rows @ fit.coef) + offset
    if fit.project is not None:
        rows = rows @ fit.project
    y = solve_triangular(fit.chol, sign * rows.T, lower=True)
    return values, (np.asarray(columns, dtype=np.int64), y)


@dataclass(frozen=True)
class MaxEstimate:
    """The largest ``|value|``, its contenders and interval (see :func:`max_with_interval`)."""

    estimate: float
    argmax: int
    max_se: float          # largest standard error among the contenders
    worst: int             # the contender with that standard error
    ci_low: float
    ci_high: float


def max_with_interval(f: Functionals, *, level: float, n_boot: int,
                      generator: np.random.Generator | None) -> MaxEstimate:
    """``θ̂ = max |v̂_j|``, its contenders, and a one-sided-calibrated interval.

    With ``c = Φ⁻¹(level)``, the *contenders* are the ``j`` with ``|v̂_j| + c·s_j ≥ θ̂``: the
    functionals whose value could be the largest. The interval is
    ``[max_j (|v̂_j| − c_sup s_j), max_j (|v̂_j| + c s_j)]``, where ``c_sup`` is the ``level``
    quantile of ``max_j sign(v̂_j)(v*_j − v̂_j)/s_j`` over ``n_boot`` draws of the fits: the lower
    end is too high only if some ``v̂_j`` exceeds its mean by ``c_sup s_j`` (probability
    ``≤ 1 − level``, reached when all ``|v_j|`` tie), the upper end too low only if the true
    maximizer's estimate falls ``c s_j`` short (``≤ 1 − level``, reached when one ratio dominates).
    Both critical values are clamped at 0, so ``θ̂`` always lies inside.
    """
    values, se = f.values, f.se
    magnitude = np.abs(values)
    argmax = int(np.argmax(magnitude))
    estimate = float(magnitude[argmax])
    c = max(0.0, float(ndtri(level)))
    contenders = np.flatnonzero(magnitude + c * se >= estimate)
    worst = int(contenders[np.argmax(se[contenders])])
    ci_low = ci_high = float("nan")
    if n_boot and generator is not None:
        deviations = f.draws(generator, n_boot)
        with np.errstate(divide="ignore", invalid="ignore"):
            standardized = np.where(se > 0, np.sign(values) * deviations / se, 0.0)
        sup = np.sort(standardized.max(axis=1))
        c_sup = max(0.0, float(sup[min(n_boot - 1, int(math.ceil(level * n_boot)) - 1)]))
        ci_low = max(0.0, float(np.max(magnitude - c_sup * se)))
        ci_high = float(np.max(magnitude + c * se))
    return MaxEstimate(estimate=estimate, argmax=argmax, max_se=float(se[worst]), worst=worst,
                       ci_low=ci_low, ci_high=ci_high)
