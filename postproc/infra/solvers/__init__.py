"""Solvers behind one small interface: QP backends for the fit, HiGHS for rounding.

See :mod:`postproc.infra.solvers.backends` for the backends and their tolerances.

Examples
--------
>>> qp = QP(P=sp.csc_matrix(np.eye(2) * 2), q=np.array([-2.0, -4.0]),
...         A=sp.csc_matrix(np.ones((1, 2))), l=np.array([1.0]), u=np.array([1.0]))
>>> sol = solve_qp(qp, ["osqp"])          # min (x0-1)^2 + (x1-2)^2 - 5, x0 + x1 = 1
>>> sol.status.value, np.round(sol.x, 6).tolist()
('optimal', [0.0, 1.0])
"""

from postproc.infra.solvers.backends import (
    DEFAULT_QP_CHAIN,
    QP_BACKENDS,
    available_qp_backends,
    check_chain,
    solve_lp,
    solve_qp,
)
from postproc.infra.solvers.base import LP, QP, InfeasibleError, Solution, SolverError, Status

__all__ = ["QP", "LP", "Solution", "Status", "SolverError", "InfeasibleError", "solve_qp",
           "solve_lp", "QP_BACKENDS", "DEFAULT_QP_CHAIN", "available_qp_backends", "check_chain"]
