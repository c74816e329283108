"""The privacy loss of one level of population groups of one or more kinds (docs/safetab.md).

A SafeTab level is a family of population groups in which one record lies in at most ``s``
groups (the level's *stability*). Its groups may be of different kinds — *two-step* groups (a
noisy total, then the table it selects) and *TotalOnly* groups (one count) — each kind with its
own mechanisms and so its own RDP curve for one group. Whatever the kinds of a record's groups,
its privacy loss is the sum over them, at most ``s`` times the costliest kind's, at every Rényi
order α: a level costs ``s · max_k τ_k(α)``. With one kind this is generalized parallel
composition (:func:`~hierarchy.accounting.compose_parallel`). The bound needs ``s`` to count a
record's groups of *every* kind of the level together; if ``s`` bounds each kind separately,
the kinds are separate levels and their losses add.

:func:`compose_group_kinds` builds the :class:`LevelCurve`; ``postproc safetab``
(:func:`postproc.apps.safetab.account_safetab`) and ``postproc account moe``
(:func:`~hierarchy.accounting.account_moe`) both account a level with it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable

import numpy as np

from hierarchy.accounting._checks import _alpha, check_stability
from hierarchy.accounting.rdp import RDPCurve
from hierarchy.errors import AccountingError

__all__ = ["LevelCurve", "compose_group_kinds"]


@dataclass(frozen=True)
class LevelCurve:
    """The RDP curve of a level: ``stability · max_k τ_k(α)`` over its kinds of group.

    Build with :func:`compose_group_kinds`. Evaluate with ``level(alpha)`` (vectorized; ``np.inf``
    gives the pure ε), so it can be handed to :func:`~hierarchy.accounting.rdp_to_approx_dp`.

    Parameters
    ----------
    curves : tuple of RDPCurve
        The curve of one group of each kind of the level.
    stability : int
        The most groups of the level, of any kind, one record can belong to.

    Raises
    ------
    AccountingError
        On no curves, a curve that is not an :class:`~hierarchy.accounting.RDPCurve`, or a
        stability that is not a positive integer.

    Examples
    --------
    >>> LevelCurve((), stability=2)
    Traceback (most recent call last):
    ...
    hierarchy.errors.AccountingError: a level needs the RDP curve of at least one kind of group
    """

    curves: tuple[RDPCurve, ...]
    stability: int

    def __post_init__(self) -> None:
        curves = tuple(self.curves)
        if not curves:
            raise AccountingError("a level needs the RDP curve of at least one kind of group")
        for curve in curves:
            if not isinstance(curve, RDPCurve):
                raise AccountingError(f"the loss of one group of a kind must be an RDPCurve, not "
                                    f"{curve!r}")
        object.__setattr__(self, "curves", curves)
        object.__setattr__(self, "stability", check_stability(self.stability))

    def __call__(self, alpha: Any) -> np.ndarray | float:
        """τ(α) of the level."""
        a = _alpha(alpha)
        values = [np.asarray(curve(a), dtype=float) for curve in self.curves]
        worst = np.maximum.reduce(values) if len(values) > 1 else values[0]
        out = self.stability * worst
        return out if out.ndim else float(out)

    @property
    def pure_epsilon(self) -> float:
        """τ(∞): the level's pure ε (``inf`` if a kind has a zCDP term with ρ > 0)."""
        return float(self(np.inf))

    @property
    def zcdp_rho(self) -> float:
        """The level's ρ: ``stability · max_k ρ_k``, with ρ of a kind its zCDP terms' ρ plus
        ε²/2 for each geometric mechanism (pure ε-DP implies ε²/2-zCDP)."""
        return self.stability * max(curve.zcdp_rho for curve in self.curves)


def compose_group_kinds(curves: Iterable[RDPCurve], *, stability: int) -> LevelCurve:
    """The loss of a level whose groups, of one or more kinds, share one stability.

    Parameters
    ----------
    curves : iterable of RDPCurve
        The RDP curve of one group of each kind (e.g. a two-step group's
        ``RDPCurve.geometric(ε₁) + RDPCurve.geometric(ε₂)`` and a TotalOnly group's
        ``RDPCurve.geometric(ε)``).
    stability : int
        The most groups of the level, of any kind, one record can belong to.

    Returns
    -------
    LevelCurve
        ``stability · max_k τ_k(α)``, with ``pure_epsilon`` and ``zcdp_rho``.

    Raises
    ------
    AccountingError
        See :class:`LevelCurve`.

    Examples
    --------
    >>> two_step = RDPCurve.geometric(0.05) + RDPCurve.geometric(0.45)
    >>> level = compose_group_kinds([two_step, RDPCurve.geometric(0.6)], stability=3)
    >>> round(level.pure_epsilon, 12), round(level.zcdp_rho, 12)      # the TotalOnly kind
    (1.8, 0.54)
    >>> level(2.0) == 3 * max(two_step(2.0), RDPCurve.geometric(0.6)(2.0))
    True
    """
    return LevelCurve(tuple(curves), stability)
