"""A parent's problem from its children's compiled rows, for post-processors.

* :func:`node_cvxpy_constraints` — CVXPY constraints vectorized over the children (a handful of
  constraint objects per node, never one per child per cell);
* :func:`node_matrices` — ``(A, a, B, b)`` meaning ``A s = a, B s ≥ b`` for samplers.

Both read a :class:`~invariants.compiled.LevelConstraints` and nothing else of
:mod:`invariants`; :mod:`invariants.compile` re-exports them. CVXPY is imported only to build
expressions, inside :func:`node_cvxpy_constraints`.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from invariants.compiled import LevelConstraints

__all__ = ["node_cvxpy_constraints", "node_matrices"]


def node_cvxpy_constraints(X, lc: LevelConstraints, children: slice | np.ndarray,
                           parent: np.ndarray | None = None) -> list:
    """CVXPY constraints for a node problem with variable ``X`` (children × cells).

    Vectorized over the children: parent consistency, equality rows, lower rows, upper rows,
    nonnegativity and zero cells are each one constraint object.

    Parameters
    ----------
    X : cvxpy Variable or expression, shape (children, cells)
    lc : LevelConstraints
        The compiled constraints of the children's level.
    children : slice or int array
        Which units of that level are the children (``Geography.child_offsets``).
    parent : array of shape (cells,), optional
        The parent's histogram the children must sum to.

    Returns
    -------
    list of cvxpy constraints

    Examples
    --------
    A least-squares fit of two states' noisy histograms (sex × age) to their exact totals and
    their nation's histogram:

    >>> from hierarchy.geography import Geography
    >>> from invariants.compile import compile_spec
    >>> from invariants.spec import Spec
    >>> import cvxpy as cp
    >>> from hierarchy.schema import Attribute, Schema
    >>> from invariants.spec import Invariant
    >>> schema = Schema((Attribute("sex", ("male", "female")),
    ...                  Attribute("age", ("child", "adult"))))
    >>> geo = Geography(("nation", "state"), (["0"], ["01", "02"]), ([-1], [0, 0]))
    >>> lc = compile_spec(Spec([Invariant("tot", "state")]), schema, geo,
    ...                   {"state": {"tot": [3, 4]}})["state"]
    >>> X = cp.Variable((2, 4))
    >>> constraints = node_cvxpy_constraints(X, lc, slice(0, 2), parent=np.array([2, 2, 1, 2]))
    >>> len(constraints)         # X ≥ 0, children sum to the parent, totals
    3
    >>> noisy = np.array([[1.5, 0.5, 0.2, 1.0], [0.0, 2.5, 1.4, 0.8]])
    >>> problem = cp.Problem(cp.Minimize(cp.sum_squares(X - noisy)), constraints)
    >>> problem.solve() is not None, problem.status
    (True, 'optimal')
    >>> X.value.sum(axis=1).round(6), X.value.sum(axis=0).round(6)
    (array([3., 4.]), array([2., 2., 1., 2.]))
    """
    import cvxpy as cp

    lower, upper, zero = lc.rows_of(children)
    cons = [X >= 0]
    if zero.any():
        cons.append(cp.multiply(zero.astype(float), X) == 0)
    if parent is not None:
        cons.append(cp.sum(X, axis=0) == np.asarray(parent, dtype=float))
    if lc.n_rows:
        CX = X @ lc.matrix.T.astype(float)
        eq = np.isfinite(lower) & (lower == upper)
        lo = np.isfinite(lower) & ~eq
        hi = np.isfinite(upper) & ~eq
        if eq.any():
            cons.append(cp.multiply(eq.astype(float), CX) == np.where(eq, lower, 0.0))
        if lo.any():
            cons.append(cp.multiply(lo.astype(float), CX) >= np.where(lo, lower, 0.0))
        if hi.any():
            cons.append(cp.multiply(hi.astype(float), CX) <= np.where(hi, upper, 0.0))
    return cons


def node_matrices(lc: LevelConstraints, children: slice | np.ndarray,
                  parent: np.ndarray | None = None
                  ) -> tuple[sp.csr_matrix, np.ndarray, sp.csr_matrix, np.ndarray]:
    """``(A, a, B, b)`` with ``A s = a`` and ``B s ≥ b`` for ``s`` = the children's histograms
    stacked row-major (child 0's cells, then child 1's, …).

    Equalities: parent consistency (if ``parent`` is given), equality rows, zero cells.
    Inequalities: finite lower rows, negated finite upper rows, nonnegativity.

    Parameters
    ----------
    lc : LevelConstraints
        The compiled constraints of the children's level.
    children : slice or int array
        Which units of that level are the children.
    parent : int array of shape (cells,), optional
        The parent's histogram the children must sum to.

    Returns
    -------
    A : scipy.sparse.csr_matrix, int64
    a : int64 array
    B : scipy.sparse.csr_matrix, int64
    b : int64 array

    Examples
    --------
    Two tracts of a county on a 3-cell schema, each with an exact total and at most 2 persons
    aged 65+:

    >>> from hierarchy.geography import Geography
    >>> from invariants.compile import compile_spec
    >>> from invariants.spec import Spec
    >>> from hierarchy.schema import Attribute, Schema
    >>> from invariants.spec import Constraint, Invariant
    >>> schema = Schema((Attribute("age", ("0-17", "18-64", "65+")),))
    >>> geo, _ = Geography.from_columns(["county", "tract"], [[["A", "B"]]])
    >>> spec = Spec([Invariant("tot", "tract")],
    ...             [Constraint("few_seniors", "tract", "linear", "detailed", [2], "<=", 2)])
    >>> lc = compile_spec(spec, schema, geo, {"tract": {"tot": [5, 4]}})["tract"]
    >>> A, a, B, b = node_matrices(lc, slice(0, 2), parent=np.array([3, 4, 2]))
    >>> A.toarray()                         # 3 parent cells, then the 2 totals
    array([[1, 0, 0, 1, 0, 0],
           [0, 1, 0, 0, 1, 0],
           [0, 0, 1, 0, 0, 1],
           [1, 1, 1, 0, 0, 0],
           [0, 0, 0, 1, 1, 1]])
    >>> a
    array([3, 4, 2, 5, 4])
    >>> B.shape, b.tolist()                 # 6 nonnegativity rows, then -(65+) ≥ -2 per tract
    ((8, 6), [0, 0, 0, 0, 0, 0, -2, -2])
    >>> s = np.array([1, 3, 1, 2, 1, 1])    # tract A: 1, 3, 1; tract B: 2, 1, 1
    >>> bool((A @ s == a).all() and (B @ s >= b).all())
    True
    """
    lower, upper, zero = lc.rows_of(children)
    k, n = zero.shape
    eye_k = sp.identity(k, format="csr", dtype=np.int64)
    big_c = sp.kron(eye_k, lc.matrix, format="csr")
    lo, hi = lower.ravel(), upper.ravel()
    eq = np.isfinite(lo) & (lo == hi)
    A_parts, a_parts = [], []
    if parent is not None:
        A_parts.append(sp.kron(np.ones((1, k), dtype=np.int64),
                               sp.identity(n, dtype=np.int64), format="csr"))
        a_parts.append(np.asarray(parent, dtype=np.int64))
    if eq.any():
        A_parts.append(big_c[np.flatnonzero(eq)])
        a_parts.append(lo[eq].astype(np.int64))
    zflat = np.flatnonzero(zero.ravel())
    if zflat.size:
        A_parts.append(sp.identity(k * n, format="csr", dtype=np.int64)[zflat])
        a_parts.append(np.zeros(zflat.size, dtype=np.int64))
    B_parts = [sp.identity(k * n, format="csr", dtype=np.int64)]
    b_parts = [np.zeros(k * n, dtype=np.int64)]
    lo_rows = np.flatnonzero(np.isfinite(lo) & ~eq)
    hi_rows = np.flatnonzero(np.isfinite(hi) & ~eq)
    if lo_rows.size:
        B_parts.append(big_c[lo_rows])
        b_parts.append(lo[lo_rows].astype(np.int64))
    if hi_rows.size:
        B_parts.append(-big_c[hi_rows])
        b_parts.append(-hi[hi_rows].astype(np.int64))
    A = (sp.vstack(A_parts, format="csr") if A_parts
         else sp.csr_matrix((0, k * n), dtype=np.int64))
    a = np.concatenate(a_parts) if a_parts else np.zeros(0, dtype=np.int64)
    return A, a, sp.vstack(B_parts, format="csr"), np.concatenate(b_parts)
