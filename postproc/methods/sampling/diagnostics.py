"""MCMC diagnostics: autocorrelation, effective sample size, and the figures users expect.

Effective sample size (ESS) follows Geyer's (1992) *initial monotone sequence* estimator in the
multi-chain form of Gelman et al. (BDA3, §11.5) and Stan: for ``M`` chains of length ``N``,

* ``W`` = mean within-chain variance, ``var⁺ = (N−1)/N · W + B/N`` with ``B/N`` the variance of
  the chain means (one chain: ``var⁺ = (N−1)/N · W``);
* ``ρ_t = 1 − (W − mean_m γ_{m,t}) / var⁺`` with ``γ_{m,t}`` chain ``m``'s autocovariance at lag
  ``t`` (computed by FFT);
* pair sums ``P_k = ρ_{2k} + ρ_{2k+1}`` are kept while positive and made non-increasing;
  ``τ = −1 + 2 Σ P_k``, ``ESS = M N / max(τ, 1/log10(M N))``.

A cell that never changes has no defined ESS (``nan``). Everything is vectorized over cells.

Examples
--------
>>> rng = np.random.default_rng(0)
>>> iid = rng.standard_normal((4000, 2))
>>> ess = effective_sample_size(iid)
>>> bool(np.all((ess > 3000) & (ess < 5500)))
True
>>> ar = np.zeros(4000)
>>> for t in range(1, 4000):
...     ar[t] = 0.9 * ar[t - 1] + rng.standard_normal()
>>> 100 < float(effective_sample_size(ar)[0]) < 400       # (1 - 0.9) / (1 + 0.9) * 4000 = 211
True
"""

from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

from postproc.errors import PostprocError

__all__ = ["autocovariance", "effective_sample_size", "summarize_ess", "plot_acceptance_curve",
           "plot_traces", "plot_ess"]


def autocovariance(x: Any) -> np.ndarray:
    """Autocovariance at every lag along axis ``-2`` (draws), per trailing column, by FFT.

    Parameters
    ----------
    x : array_like, shape (..., N, n)

    Returns
    -------
    numpy.ndarray, shape (..., N, n)
        ``γ_t = (1/N) Σ_{i<N−t} (x_i − x̄)(x_{i+t} − x̄)``.

    Examples
    --------
    >>> np.round(autocovariance(np.array([[1.0], [2.0], [3.0]]))[:, 0], 4).tolist()
    [0.6667, 0.0, -0.3333]
    """
    x = np.asarray(x, dtype=np.float64)
    n = x.shape[-2]
    centred = x - x.mean(axis=-2, keepdims=True)
    size = 1 << max(1, (2 * n - 1).bit_length())
    f = np.fft.rfft(centred, n=size, axis=-2)
    acov = np.fft.irfft(f * np.conj(f), n=size, axis=-2)[..., :n, :]
    return acov / n


def effective_sample_size(draws: Any) -> np.ndarray:
    """Multi-chain effective sample size per cell (Geyer's initial monotone sequence).

    Parameters
    ----------
    draws : array_like
        Shape ``(N,)`` (one chain, one cell), ``(N, n)`` (one chain) or ``(M, N, n)``.

    Returns
    -------
    numpy.ndarray of float64, shape (n,)
        ``nan`` for cells that are constant in every chain.

    Raises
    ------
    PostprocError
        Fewer than 4 draws per chain, or a bad shape.

    Examples
    --------
    >>> effective_sample_size(np.ones((10, 1))).tolist()
    [nan]
    """
    x = np.asarray(draws, dtype=np.float64)
    if x.ndim == 1:
        x = x[None, :, None]
    elif x.ndim == 2:
        x = x[None]
    if x.ndim != 3:
        raise PostprocError(f"draws must have shape (N,), (N, cells) or (chains, N, cells), not "
                            f"{np.shape(draws)}")
    m, n, cells = x.shape
    if n < 4:
        raise PostprocError(f"the effective sample size needs at least 4 draws per chain, got {n}")
    acov = autocovariance(x)                                   # (m, n, cells)
    chain_mean = x.mean(axis=1)                                # (m, cells)
    chain_var = acov[:, 0, :] * n / (n - 1.0)
    within = chain_var.mean(axis=0)
    var_plus = within * (n - 1.0) / n
    if m > 1:
        var_plus = var_plus + chain_mean.var(axis=0, ddof=1)
    constant = ~(var_plus > 0)
    safe = np.where(constant, 1.0, var_plus)
    rho = 1.0 - (within - acov.mean(axis=0)) / safe            # (n, cells)
    rho[0] = 1.0
    pairs = n // 2
    p = rho[0:2 * pairs:2] + rho[1:2 * pairs:2]                # (pairs, cells)
    negative = p < 0
    first_negative = np.where(negative.any(axis=0), negative.argmax(axis=0), pairs)
    keep = np.arange(pairs)[:, None] < first_negative[None, :]
    p = np.where(keep, p, 0.0)
    p = np.minimum.accumulate(np.where(keep, p, np.inf), axis=0)
    p = np.where(keep, p, 0.0)
    tau = -1.0 + 2.0 * p.sum(axis=0)
    total = m * n
    tau = np.maximum(tau, 1.0 / math.log10(total))
    ess = total / tau
    ess[constant] = np.nan
    return ess


def summarize_ess(ess: Any) -> dict[str, float]:
    """``{'min', 'median'}`` of a per-cell ESS over cells where it is defined (``nan`` if none).

    Examples
    --------
    >>> summarize_ess([10.0, np.nan, 30.0, 20.0])
    {'min': 10.0, 'median': 20.0}
    """
    e = np.asarray(ess, dtype=np.float64)
    e = e[np.isfinite(e)]
    if e.size == 0:
        return {"min": float("nan"), "median": float("nan")}
    return {"min": float(e.min()), "median": float(np.median(e))}


# ---------------------------------------------------------------------------------------------
# figures (matplotlib, Agg backend, PNG)
# ---------------------------------------------------------------------------------------------
def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_acceptance_curve(tuning, path: str, *, epsilon: float | None = None,
                          title: str | None = None) -> str:
    """Acceptance rate of the MIS against the proposal parameter ``ε̃`` (PNG).

    Parameters
    ----------
    tuning : TuningResult
        From :func:`postproc.methods.sampling.tuning.tune_proposal_epsilon` (or
        :func:`~postproc.methods.sampling.tuning.acceptance_curve`).
    path : str
        Output PNG path.
    epsilon : float, optional
        The mechanism's ``ε``, drawn as a reference line.
    title : str, optional

    Returns
    -------
    str
        ``path``.

    Examples
    --------
    >>> import os, tempfile
    >>> from postproc.methods.sampling import acceptance_curve, conditional_target
    >>> t = conditional_target([[1, 1, 1]], [9], centre=[3, 3, 3], epsilon=1.0)
    >>> curve = acceptance_curve(t, [0.8, 1.2], rng=0, proposals=2000)
    >>> path = plot_acceptance_curve(curve, os.path.join(tempfile.mkdtemp(), "a.png"), epsilon=1)
    >>> os.path.getsize(path) > 0
    True
    """
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6.4, 4.2), dpi=120)
    grid = np.asarray(tuning.grid)
    acc = np.asarray(tuning.acceptance)
    ax.plot(grid, 100 * acc, "o-", color="C0", label="acceptance rate")
    if getattr(tuning, "stderr", None) is not None:
        se = 100 * np.asarray(tuning.stderr)
        ax.fill_between(grid, 100 * acc - 2 * se, 100 * acc + 2 * se, color="C0", alpha=0.2,
                        label="± 2 standard errors")
    best = float(tuning.best)
    ax.axvline(best, color="C3", ls="--", label=f"best ε̃ = {best:.3g}")
    if epsilon is not None:
        ax.axvline(epsilon, color="0.4", ls=":", label=f"mechanism ε = {epsilon:g}")
    ax.set_xlabel("proposal parameter ε̃ (double geometric)")
    ax.set_ylabel("acceptance rate (%)")
    ax.set_ylim(bottom=0)
    ax.set_title(title or "MIS acceptance rate against ε̃")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path


def plot_traces(result, cells: Sequence[int], path: str, *, labels: Sequence[str] | None = None,
                max_points: int = 5000, title: str | None = None) -> str:
    """Trace plots of chosen cells of a sampler's chain (chain 0), one panel per cell (PNG).

    Parameters
    ----------
    result : SamplingResult
    cells : sequence of int
        Cell indices (e.g. one in ``I`` and one in ``I^c`` for the MIS).
    path : str
    labels : sequence of str, optional
        Panel titles (default: the target's cell labels).
    max_points : int
        The first ``max_points`` kept draws are shown (a trace of millions is unreadable).
    title : str, optional

    Returns
    -------
    str
        ``path``.

    Examples
    --------
    >>> import os, tempfile
    >>> from postproc.methods.sampling import conditional_target, sample_lattice
    >>> t = conditional_target([[1, 1, 1]], [9], centre=[3, 3, 3], epsilon=1.0)
    >>> res = sample_lattice(t, draws=100, rng=0)
    >>> path = plot_traces(res, [0, 2], os.path.join(tempfile.mkdtemp(), "t.png"))
    >>> os.path.getsize(path) > 0
    True
    """
    plt = _pyplot()
    cells = [int(c) for c in cells]
    fig, axes = plt.subplots(len(cells), 1, figsize=(7.5, 2.2 * len(cells) + 0.6), dpi=120,
                             sharex=True, squeeze=False)
    chain = result.chain[0, :max_points]
    thin = int(result.settings.get("thin", 1))
    steps = np.arange(chain.shape[0]) * thin
    names = labels or [result.target.cell_labels[c] if result.target.cell_labels else f"cell {c}"
                       for c in cells]
    for ax, c, name in zip(axes[:, 0], cells, names):
        ax.plot(steps, chain[:, c], lw=0.6, color="C0", drawstyle="steps-post")
        ax.axhline(result.target.centre[c], color="C3", lw=0.8, ls="--",
                   label="centre (s*)")
        ess = result.ess[c]
        ax.set_title(f"{name} — ESS {ess:,.0f} of {result.chain.shape[1] * result.chain.shape[0]:,}"
                     f" kept draws" if np.isfinite(ess) else f"{name}", fontsize=9)
        ax.set_ylabel("count")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, loc="upper right")
    axes[-1, 0].set_xlabel("iteration" if result.sampler == "mis" else "sweep")
    fig.suptitle(title or f"Trace plots ({result.sampler})", fontsize=10)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path


def plot_ess(results: Sequence, path: str, *, labels: Sequence[str] | None = None,
             per_second: bool = True, title: str | None = None) -> str:
    """Per-cell effective samples (per second of sampling) of one or more sampler runs (PNG).

    Parameters
    ----------
    results : sequence of SamplingResult
    path : str
    labels : sequence of str, optional
        Legend entries (default: the sampler names).
    per_second : bool
        Divide by each run's sampling time.
    title : str, optional

    Returns
    -------
    str
        ``path``.

    Examples
    --------
    >>> import os, tempfile
    >>> from postproc.methods.sampling import conditional_target, sample_lattice
    >>> t = conditional_target([[1, 1, 1]], [9], centre=[3, 3, 3], epsilon=1.0)
    >>> res = sample_lattice(t, draws=100, rng=0)
    >>> path = plot_ess([res], os.path.join(tempfile.mkdtemp(), "e.png"))
    >>> os.path.getsize(path) > 0
    True
    """
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(8, 4.2), dpi=120)
    width = 0.8 / len(results)
    for i, res in enumerate(results):
        ess = np.asarray(res.ess, dtype=float)
        value = ess / res.seconds if per_second else ess
        x = np.arange(ess.size) + (i - (len(results) - 1) / 2) * width
        name = (labels[i] if labels else res.sampler)
        summary = summarize_ess(value)
        ax.bar(x, value, width=width, color=f"C{i}",
               label=f"{name}: min {summary['min']:,.0f}, median {summary['median']:,.0f}")
    ax.set_yscale("log")
    from matplotlib.ticker import FuncFormatter

    plain = FuncFormatter(lambda v, _: f"{v:,.0f}")
    ax.yaxis.set_major_formatter(plain)
    ax.yaxis.set_minor_formatter(FuncFormatter(
        lambda v, _: f"{v:,.0f}" if str(f"{v:.0e}")[0] in "25" else ""))
    ax.set_xlabel("cell")
    ax.set_ylabel("effective samples per second" if per_second else "effective samples")
    ax.set_title(title or "Effective sample size per cell")
    ax.grid(alpha=0.3, axis="y")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path
