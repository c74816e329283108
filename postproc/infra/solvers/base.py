"""Solver-independent problem and result types, and the fixed set of statuses."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum

import numpy as np
import scipy.sparse as sp

from postproc.errors import PostprocError

__all__ = ["Status", "QP", "LP", "Solution", "SolverError", "InfeasibleError"]


class SolverError(PostprocError):
    """Every backend failed on a problem (the message lists each attempt and its status).

    Examples
    --------
    A problem unbounded below (``minimize −x, x ≥ 0``) defeats every solver:

    >>> import numpy as np, scipy.sparse as sp
    >>> from postproc.infra.solvers import solve_qp
    >>> qp = QP(P=sp.csc_matrix((1, 1)), q=np.array([-1.0]), A=sp.csc_matrix(np.ones((1, 1))),
    ...         l=np.array([0.0]), u=np.array([np.inf]))
    >>> solve_qp(qp, ["clarabel"])
    Traceback (most recent call last):
    ...
    postproc.infra.solvers.base.SolverError: every solver failed: clarabel: unbounded. Try another
    chain (e.g. --solver clarabel cvxpy-ecos)
    """


class InfeasibleError(PostprocError):
    """A post-processing problem has no solution; the message names the unit and constraints.

    Raised by TopDown when a node stays infeasible after its failsafe; like every error of the
    toolkit it derives from :class:`hierarchy.DappError`, so one ``except`` catches them all.

    Examples
    --------
    >>> from hierarchy import DappError
    >>> try:
    ...     raise InfeasibleError("county '001': invariant 'total' cannot hold")
    ... except DappError as exc:
    ...     print(type(exc).__name__, "-", exc)
    InfeasibleError - county '001': invariant 'total' cannot hold
    """


class Status(str, Enum):
    """The few statuses every backend's native status is mapped onto.

    Examples
    --------
    >>> [status.value for status in Status]
    ['optimal', 'optimal_inaccurate', 'infeasible', 'unbounded', 'iteration_limit', 'error']
    >>> Status.OPTIMAL.ok, Status.INACCURATE.ok
    (True, False)
    >>> Status("infeasible") is Status.INFEASIBLE
    True
    """

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

    ``P`` must be symmetric positive semidefinite (our fits' ``P`` is diagonal but for small
    dense blocks: substituted auxiliaries, matrix-weighted cells). ``blocks``,
    when known, is the number of blocks of variables that only a few coupling rows join
    (TopDown's node problems: the children); a backend may choose its method by it
    (:func:`~postproc.infra.solvers.backends.clarabel_linear_solver`).

    Raises
    ------
    PostprocError
        The shapes of ``P``, ``q``, ``A``, ``l`` and ``u`` disagree.

    Examples
    --------
    ``minimize (x0 − 1)² + (x1 − 2)² − 5  subject to  x0 + x1 = 1``:

    >>> import numpy as np, scipy.sparse as sp
    >>> qp = QP(P=sp.csc_matrix(np.eye(2) * 2), q=np.array([-2.0, -4.0]),
    ...         A=sp.csc_matrix(np.ones((1, 2))), l=np.array([1.0]), u=np.array([1.0]))
    >>> x = np.array([1.0, 1.0])
    >>> qp.n, qp.objective(x), qp.max_violation(x)
    (2, -4.0, 1.0)
    >>> QP(P=sp.csc_matrix(np.eye(3)), q=np.zeros(2), A=sp.csc_matrix(np.ones((1, 2))),
    ...    l=np.zeros(1), u=np.zeros(1))
    Traceback (most recent call last):
    ...
    postproc.errors.PostprocError: QP shapes disagree: P (3, 3), q (2,), A (1, 2)
    """

    P: sp.csc_matrix
    q: np.ndarray
    A: sp.csc_matrix
    l: np.ndarray
    u: np.ndarray
    r: float = 0.0
    blocks: int | None = None

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
    """``minimize cᵀx  subject to  l ≤ Ax ≤ u,  lb ≤ x ≤ ub``; ``integer`` marks integer vars.

    Examples
    --------
    The smallest integer ``x`` with ``2x ≥ 5``:

    >>> import numpy as np, scipy.sparse as sp
    >>> from postproc.infra.solvers import solve_lp
    >>> lp = LP(c=np.ones(1), A=sp.csr_matrix([[2.0]]), l=np.array([5.0]), u=np.array([np.inf]),
    ...         lb=np.zeros(1), ub=np.array([np.inf]), integer=np.array([True]))
    >>> sol = solve_lp(lp)
    >>> sol.status.value, sol.backend, sol.x.round().tolist()
    ('optimal', 'highs-milp', [3.0])
    """

    c: np.ndarray
    A: sp.csr_matrix
    l: np.ndarray
    u: np.ndarray
    lb: np.ndarray
    ub: np.ndarray
    integer: np.ndarray | None = None


@dataclass(frozen=True, eq=False)
class Solution:
    """What a backend returns: the point, the mapped status and the bookkeeping.

    ``x`` is None unless a point was found; ``attempts`` lists ``(backend, status)`` for every
    backend :func:`~postproc.infra.solvers.solve_qp` tried, in order.

    Examples
    --------
    >>> import numpy as np, scipy.sparse as sp
    >>> from postproc.infra.solvers import solve_qp
    >>> qp = QP(P=sp.csc_matrix(np.eye(1)), q=np.zeros(1), A=sp.csc_matrix(np.ones((2, 1))),
    ...         l=np.array([1.0, -np.inf]), u=np.array([np.inf, 0.0]))   # x ≥ 1 and x ≤ 0
    >>> sol = solve_qp(qp, ["clarabel", "osqp"])
    >>> sol.status, sol.x, sol.attempts
    (<Status.INFEASIBLE: 'infeasible'>, None, (('clarabel', 'infeasible'), ('osqp', 'infeasible')))
    """

    x: np.ndarray | None
    status: Status
    objective: float = float("nan")
    iterations: int = 0
    seconds: float = 0.0
    backend: str = ""
    message: str = ""
    attempts: tuple[tuple[str, str], ...] = field(default=())
