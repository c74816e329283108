"""The generic reference path: one CVXPY problem per parent, built afresh.

This is how one would write TopDown's fit directly in CVXPY: a ``K × n`` variable over every
cell, the weighted least-squares objective written with the query matrices, and the node's
constraints from :func:`invariants.compile.node_cvxpy_constraints`. It is slow (CVXPY
canonicalizes every problem) but simple enough to trust, so it is the reference the engine of
:mod:`postproc.methods.topdown.node` is checked against, and the baseline its speed is measured
against.

Examples
--------
>>> import numpy as np
>>> from postproc.methods.topdown.node import NodeTask, QueryData
>>> task = NodeTask("county", "p", np.array([3, 1]), np.array(["a", "b"]),
...                 (QueryData("detailed", sp.identity(2, format="csr"),
...                            np.array([[2.0, 1.0], [2.0, 0.0]]), np.ones((2, 2))),),
...                 sp.csr_matrix((0, 2), dtype=np.int64), np.zeros((2, 0)), np.zeros((2, 0)),
...                 np.zeros((2, 2), bool))
>>> x, objective, seconds = fit_node_generic(task)
>>> np.round(x, 4).tolist(), round(objective, 6)
([[1.5, 1.0], [1.5, 0.0]], 0.5)
>>> from postproc.methods.topdown.node import solve_node        # the engine agrees
>>> engine = solve_node(task, keep_continuous=True)
>>> bool(np.allclose(engine.continuous, x, atol=1e-4)), round(engine.stats["objective"], 6)
(True, 0.5)
"""

from __future__ import annotations

import time

import numpy as np

from invariants.compile import LevelConstraints, node_cvxpy_constraints
from postproc.infra.solvers.base import SolverError
from postproc.methods.topdown.node import NodeTask

__all__ = ["fit_node_generic"]


def fit_node_generic(task: NodeTask, *, solver: str = "CLARABEL",
                     **solver_options) -> tuple[np.ndarray, float, float]:
    """Fit one node with a freshly built CVXPY problem.

    Parameters
    ----------
    task : NodeTask
    solver : str, optional
        A CVXPY solver name (default ``"CLARABEL"``, with tight tolerances).
    **solver_options
        Passed to ``cvxpy.Problem.solve``.

    Returns
    -------
    x : (children × cells) continuous optimum
    objective : the weighted least-squares objective (original units)
    seconds : build + solve time

    Raises
    ------
    SolverError
        If CVXPY does not report an optimum (e.g. the node is infeasible).

    Examples
    --------
    Two children of a parent (3, 1) whose totals are invariant (2 persons each):

    >>> from postproc.methods.topdown.node import QueryData
    >>> detailed = QueryData("detailed", sp.identity(2, format="csr"),
    ...                      np.array([[2.0, 1.0], [2.0, 0.0]]), np.ones((2, 2)))
    >>> def node(totals):
    ...     bounds = np.array(totals, dtype=float)[:, None]
    ...     return NodeTask("county", "p", np.array([3, 1]), np.array(["a", "b"], dtype=object),
    ...                     (detailed,), sp.csr_matrix(np.ones((1, 2), np.int64)), bounds,
    ...                     bounds.copy(), np.zeros((2, 2), bool), ("tot: total",))
    >>> x, objective, seconds = fit_node_generic(node([2, 2]))
    >>> np.round(x, 4).tolist(), round(objective, 6)
    ([[1.25, 0.75], [1.75, 0.25]], 0.75)
    >>> fit_node_generic(node([3, 2]))
    Traceback (most recent call last):
    ...
    postproc.infra.solvers.base.SolverError: generic fit of county children of 'p': infeasible
    """
    import cvxpy as cp

    t0 = time.perf_counter()
    k, n = task.k, task.n
    X = cp.Variable((k, n))
    terms = []
    for q in task.queries:
        residual = X @ q.matrix.T - q.values
        if q.weights.ndim == 3:     # a weight matrix per child: Σ_k r_kᵀ W_k r_k
            terms += [cp.quad_form(residual[child], cp.psd_wrap(q.weights[child]))
                      for child in range(k)]
        else:
            terms.append(cp.sum(cp.multiply(q.weights, cp.square(residual))))
    lc = LevelConstraints(task.level, task.children, task.matrix, task.lower, task.upper,
                          task.labels, task.zero)
    cons = node_cvxpy_constraints(X, lc, slice(None), task.parent_hist)
    for held in task.sums:            # rows across children (NodeTask.sums)
        answers = cp.sum(X[held.children], axis=0) @ held.matrix.T
        lo, hi = np.isfinite(held.lower), np.isfinite(held.upper)
        cons += [answers[np.flatnonzero(lo)] >= held.lower[lo]] if lo.any() else []
        cons += [answers[np.flatnonzero(hi)] <= held.upper[hi]] if hi.any() else []
    prob = cp.Problem(cp.Minimize(cp.sum(terms)), cons)
    options = {"CLARABEL": dict(tol_gap_abs=1e-9, tol_gap_rel=1e-9, tol_feas=1e-9)}.get(
        solver, {})
    options.update(solver_options)
    prob.solve(solver=solver, **options)
    if prob.status not in (cp.OPTIMAL,):
        raise SolverError(f"generic fit of {task.where}: {prob.status}")
    return np.asarray(X.value), float(prob.value), time.perf_counter() - t0
