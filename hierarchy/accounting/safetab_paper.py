"""The SafeTab paper's closed form for the geometric mechanism's Rényi DP, to reproduce its figures.

The SafeTab paper states, as its Corollary 1 (as this project's earlier notes transcribed it),
the Rényi divergence of order α of the two-sided geometric mechanism with budget ε (sensitivity 1)
as

``τ_C1(α, ε) =
log[ (e^ε − 1)/(e^ε + 1) · (2α e^{(α−1)ε} + 2(α − 1) e^{−αε}) / (ε(2α − 1)) ] / (α − 1)``.

That is the continuous Laplace mechanism's divergence (Mironov 2017) times ``2 tanh(ε/2)/ε < 1``
inside the logarithm, and it is *smaller* than the geometric mechanism's true divergence
(:func:`~hierarchy.accounting.rdp_geometric`, by direct summation): at α = 2, ε = 1 it gives 0.540
where the divergence is 0.735, and near α = 1 it is negative. Accounting with it understates the
privacy loss. The toolkit never accounts with it; :func:`rdp_geometric_safetab_paper` and
:func:`with_safetab_paper_tau` exist so that totals computed "by the paper's Corollary 1" can be
shown beside the exact ones (``postproc account moe``; ``docs/safetab.md``).
"""

from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np

from hierarchy.accounting._checks import _alpha
from hierarchy.accounting.groups import LevelCurve
from hierarchy.accounting.rdp import RDPCurve
from hierarchy.errors import AccountingError
from hierarchy.numbers import nonnegative

__all__ = ["rdp_geometric_safetab_paper", "with_safetab_paper_tau"]


def rdp_geometric_safetab_paper(alpha: Any, epsilon: Any) -> np.ndarray | float:
    """The SafeTab paper's Corollary 1 for the geometric mechanism (sensitivity 1); understates.

    Evaluated in logarithms (``logaddexp``), so large ``α·ε`` does not overflow; ``α = ∞`` gives
    the limit ε.

    Parameters
    ----------
    alpha : float or array_like
        Orders, each > 1; ``np.inf`` allowed.
    epsilon : float
        The budget ε ≥ 0 of the geometric mechanism (noise parameter ε, sensitivity 1).

    Returns
    -------
    float or numpy.ndarray
        ``τ_C1(α, ε)`` with the shape of ``alpha`` (0 for ε = 0).

    Raises
    ------
    AccountingError
        An order ≤ 1 or a negative ε.

    Examples
    --------
    >>> round(float(rdp_geometric_safetab_paper(2.0, 1.0)), 4)     # the exact divergence: 0.7353
    0.5403
    >>> float(rdp_geometric_safetab_paper(np.inf, 0.5))
    0.5
    >>> bool(rdp_geometric_safetab_paper(1.001, 1.0) < 0)           # not a divergence near α = 1
    True
    """
    a = _alpha(alpha)
    eps = nonnegative(epsilon, "epsilon", error=AccountingError)
    out = np.zeros(a.shape, dtype=float)
    if eps == 0.0:
        return out if out.ndim else float(out)
    finite = np.isfinite(a)
    af = a[finite]
    inner = np.logaddexp(np.log(2.0 * af) + (af - 1.0) * eps,
                         np.log(2.0 * (af - 1.0)) - af * eps)
    log_value = math.log(math.tanh(eps / 2.0)) + inner - np.log(eps * (2.0 * af - 1.0))
    out[finite] = log_value / (af - 1.0)
    out[~finite] = eps
    return out if out.ndim else float(out)


def _paper_curve(curve: RDPCurve) -> Callable[[Any], np.ndarray]:
    """An :class:`RDPCurve` of sensitivity-1 geometric terms, each evaluated with τ_C1."""
    for kind, _, sensitivity, _ in curve.terms:
        if kind != "geometric" or sensitivity != 1:
            raise AccountingError("the SafeTab paper's Corollary 1 is for the geometric "
                                  "mechanism on a sensitivity-1 count; this curve has a "
                                  f"{kind!r} term of sensitivity {sensitivity}")

    weights: dict[float, float] = {}               # equal budgets evaluated once
    for _, epsilon, _, weight in curve.terms:
        weights[epsilon] = weights.get(epsilon, 0.0) + weight

    def tau(alpha: Any) -> np.ndarray:
        a = _alpha(alpha)
        out = np.zeros(a.shape, dtype=float)
        for epsilon, weight in weights.items():
            out = out + weight * np.asarray(rdp_geometric_safetab_paper(a, epsilon))
        return out

    return tau


def with_safetab_paper_tau(curve: RDPCurve | LevelCurve) -> Callable[[Any], np.ndarray | float]:
    """The same composition with every geometric mechanism's τ replaced by τ_C1.

    Parameters
    ----------
    curve : RDPCurve or LevelCurve
        Geometric terms of sensitivity 1 only (a :class:`LevelCurve`: its kinds' curves, each
        so); a level keeps its rule ``stability · max_k τ_k(α)``.

    Returns
    -------
    callable
        α ↦ τ(α), vectorized, for :func:`~hierarchy.accounting.rdp_to_approx_dp`.

    Raises
    ------
    AccountingError
        A zCDP term, or a geometric term of sensitivity other than 1.

    Examples
    --------
    >>> from hierarchy.accounting import rdp_to_approx_dp
    >>> level = 9 * (RDPCurve.geometric(0.05) + RDPCurve.geometric(0.45))
    >>> exact = rdp_to_approx_dp(level, 1e-10)
    >>> paper = rdp_to_approx_dp(with_safetab_paper_tau(level), 1e-10)
    >>> bool(paper < exact)
    True
    """
    if isinstance(curve, LevelCurve):
        kinds = [_paper_curve(c) for c in curve.curves]

        def level(alpha: Any) -> np.ndarray | float:
            a = _alpha(alpha)
            out = curve.stability * np.maximum.reduce([k(a) for k in kinds])
            return out if out.ndim else float(out)

        return level
    if not isinstance(curve, RDPCurve):
        raise AccountingError(f"expected an RDPCurve or a LevelCurve, not {curve!r}")
    tau = _paper_curve(curve)

    def composed(alpha: Any) -> np.ndarray | float:
        out = tau(alpha)
        return out if out.ndim else float(out)

    return composed
