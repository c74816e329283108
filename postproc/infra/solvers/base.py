"""Solver-independent problem and result types, and the fixed set of statuses."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum

import numpy as np
import scipy.sparse as sp

from postproc.errors import PostprocError

__all__ = ["Status", "QP", "LP", "Solution", "SolverError", "InfeasibleError"]


class SolverError(PostprocError):
    """Every backend failed on a problem (the message lists each attempt and its status)."""


class InfeasibleError(PostprocError):
    """A post-processing problem has no solution; the message names the unit and constraints."""


class Status(str, Enum):
    """The few statuses every backend's native status is mapped onto."""

    OPTIMAL = "optimal"
    INACCURATE = "optimal_inaccurate"
    INFEASIBLE = "infeasible"
    UNBOUNDED = "unbounded"
    ITERATION_LIMIT = "iteration_limit"
    ERROR = "error"

    @property
    def ok(self) -> bool:
        """A usable optimum (only OPTIMAL; inaccurate answers go to the next backend)."""
        return self is Status.OPTIMAL


@dataclass(frozen=True, eq=False)
class QP:
    """``minimize ½ xᵀPx + qᵀx + r  subject to  l ≤ Ax ≤ u`` (±inf allowed in l, u).

    ``P`` must be symmetric positive semidefinite (our fits have a diagonal P).
    """

    P: sp.csc_matrix
    q: np.ndarray
    A: sp.csc_matrix
    l: np.ndarray
    u: np.ndarray
    r: float = 0.0

    def __post_init__(self):
        n = self.q.shape[0]
        if self.P.shape != (n, n) or self.A.shape[1] != n:
            raise PostprocError(f"QP shapes disagree: P {self.P.shape}, q {self.q.shape}, "
                                f"A {self.A.shape}")
        if not (self.l.shape == self.u.shape == (self.A.shape[0],)):
            raise PostprocError("QP bounds must have one entry per row of A")

    @property
    def n(self) -> int:
        return int(self.q.shape[0])

    def objective(self, x: np.ndarray) -> float:
        return float(0.5 * x @ (self.P @ x) + self.q @ x + self.r)

    def max_violation(self, x: np.ndarray) -> float:
        """Largest absolute constraint violation."""
        ax = self.A @ x
        return float(max(np.max(self.l - ax, initial=0.0), np.max(ax - self.u, initial=0.0)))

    def max_relative_violation(self, x: np.ndarray) -> float:
        """Largest violation of a row relative to its bound: ``viol / max(1, |bound|)``."""
        ax = self.A @ x
        with np.errstate(invalid="ignore"):
            lo = np.where(np.isfinite(self.l), (self.l - ax) / np.maximum(1.0, np.abs(self.l)),
                          0.0)
            hi = np.where(np.isfinite(self.u), (ax - self.u) / np.maximum(1.0, np.abs(self.u)),
                          0.0)
        return float(max(np.max(lo, initial=0.0), np.max(hi, initial=0.0)))


@dataclass(frozen=True, eq=False)
class LP:
    """``minimize cᵀx  subject to  l ≤ Ax ≤ u,  lb ≤ x ≤ ub``; ``integer`` marks integer vars."""

    c: np.ndarray
    A: sp.csr_matrix
    l: np.ndarray
    u: np.ndarray
    lb: np.ndarray
    ub: np.ndarray
    integer: np.ndarray | None = None


@dataclass(frozen=True, eq=False)
class Solution:
    """What a backend returns: the point, the mapped status and the bookkeeping."""

    x: np.ndarray | None
    status: Status
    objective: float = float("nan")
    iterations: int = 0
    seconds: float = 0.0
    backend: str = ""
    message: str = ""
    attempts: tuple[tuple[str, str], ...] = field(default=())
