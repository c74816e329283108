"""Feasible integer starts of the hierarchical sampler's levels.

Each level's chains start from an integer point that keeps every invariant and constraint of the
level and sums to the released parents (see the module docs of
:mod:`postproc.methods.sampling.hierarchical`):

* ``start="topdown"`` — :func:`_topdown_split`: one TopDown node solve per sampled parent (or the
  children of a given TopDown result, where it released the parent as sampled);
* ``start="l1"`` — :func:`_l1_start`: the weighted-L1 mode by one HiGHS LP for all parents of the
  level (a MILP where the LP's vertex is not integral), also asking that the next level can split
  it.

:func:`_level_start` picks one for a level; :func:`_check_start` reads the ``start`` option.

Examples
--------
>>> _check_start("l1", None, {})
('l1', None)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp

from hierarchy.noisy import NoisyHierarchy
from invariants.compile import LevelConstraints, node_matrices, violations
from postproc.errors import PostprocError
from postproc.methods.sampling.hierarchical_plan import _Clock, _fits, _LevelSetup, _Plan
from postproc.result import Result

__all__: list[str] = []


def _check_start(start: Any, noisy: NoisyHierarchy, compiled: dict) -> tuple[str, Result | None]:
    """``(kind, given TopDown result)`` from the ``start`` option, the result checked against
    this hierarchy and spec."""
    if isinstance(start, Result):
        geo = noisy.geography
        shapes = [(geo.n_units(li), noisy.schema.size) for li in range(geo.depth)]
        if [h.shape for h in start.histograms] != shapes or \
                start.geography.levels != geo.levels:
            raise PostprocError(
                f"start: the given result ({start.method}) has levels {list(start.levels)} and "
                f"shapes {[h.shape for h in start.histograms]}, the noisy hierarchy "
                f"{list(geo.levels)} and {shapes}; pass topdown(noisy, spec) of the same "
                "measurements")
        for level, hist in zip(geo.levels, start.histograms):
            if not np.issubdtype(hist.dtype, np.integer):
                raise PostprocError(f"start: the given result ({start.method}) is not integer "
                                    f"at level {level!r}; pass an integer TopDown result")
            found = violations(compiled[level], hist, limit=3)
            if found:
                raise PostprocError(
                    f"start: the given result ({start.method}) breaks this spec at level "
                    f"{level!r}: {'; '.join(found)}. Pass topdown(noisy, spec) with the same "
                    "spec")
        return "topdown", start
    if start not in ("topdown", "l1"):
        raise PostprocError(f"start must be 'topdown', 'l1' or a TopDown Result, not {start!r}")
    return start, None


def _level_start(plan: _Plan, li: int, st: _LevelSetup, clock: _Clock, *, strict: bool,
                 how: str | None = None) -> np.ndarray | None:
    """A feasible integer start of the level's sampled units (``None``: none exists, when
    not ``strict``): TopDown's split of the sampled parents, or the weighted-L1 mode that
    the next level can split. ``how`` defaults to the plan's start."""
    how = plan.kind if how is None else how
    noisy, geo = plan.noisy, plan.geo
    if st.units.size == 0:
        return np.zeros((0, noisy.schema.size), np.int64)
    if how == "topdown":
        found = _topdown_split(noisy, st.lc, li, st.parent_hist, st.multi, plan.given, clock)
        if found is not None or not strict:
            return found
    below = None
    if li + 1 < geo.depth:
        offsets = geo.child_offsets(li)
        below = (plan.compiled[geo.levels[li + 1]],
                 [slice(int(offsets[u]), int(offsets[u + 1])) for u in st.units])
    return _l1_start(st.lc, st.groups, st.parents,
                     _fits(noisy, st.level, plan.used, st.units, st.y, plan.mechanism),
                     st.upper, st.level, st.parent_codes, below=below, strict=strict, clock=clock)


def _topdown_split(noisy: NoisyHierarchy, lc: LevelConstraints, li: int,
                   parent_hist: np.ndarray | None, parents: np.ndarray,
                   given: Result | None, clock: _Clock) -> np.ndarray | None:
    """TopDown's integer solution for the children of each of ``parents`` (indices into the
    previous level) given the *sampled* ``parent_hist``; the root's at level 0.

    Each parent is one TopDown node solve (fit, constraint-keeping rounding, exact check) with
    the failsafe off, so the children sum to the sampled parent and keep every invariant and
    constraint of their level. A parent that ``given`` (a TopDown result) has exactly as sampled
    reuses its children. ``None`` when a parent cannot be split (infeasible or every solver
    failed); the caller then samples on or falls back.
    """
    from postproc.infra.solvers.base import InfeasibleError, SolverError
    from postproc.methods.topdown.node import solve_node
    from postproc.methods.topdown.plan import level_tasks, root_task

    try:
        if li == 0:
            if given is not None:
                return np.asarray(given.histograms[0], dtype=np.int64)
            return solve_node(root_task(noisy, lc), failsafe=False).histograms
        geo = noisy.geography
        offsets = geo.child_offsets(li - 1)
        tasks = level_tasks(noisy, lc, li, parent_hist)
        out = []
        for p in parents:
            sl = slice(int(offsets[p]), int(offsets[p + 1]))
            if given is not None and np.array_equal(given.histograms[li - 1][p], parent_hist[p]):
                children = np.asarray(given.histograms[li][sl], dtype=np.int64)
                if np.array_equal(children.sum(axis=0), parent_hist[p]):
                    out.append(children)
                    continue
            out.append(solve_node(tasks[p], failsafe=False).histograms)
            clock.check()
    except (InfeasibleError, SolverError):
        return None
    return np.concatenate(out, axis=0) if out else np.zeros((0, noisy.schema.size), np.int64)


def _l1_start(lc: LevelConstraints, groups: list[slice], parents: np.ndarray | None,
              fits: list[tuple[Any, np.ndarray, float]], upper: np.ndarray, level: str,
              parent_codes, *, below: tuple[LevelConstraints, list[slice]] | None = None,
              strict: bool = True, clock: _Clock | None = None) -> np.ndarray | None:
    """Integer ``X`` satisfying every node's constraints that minimizes the weighted L1 misfit
    ``Σ_q w_q Σ |Q_q X_k − y_{k,q}|`` — the mode of the target for the geometric law.

    ``fits`` lists ``(Q (answers × cells) sparse, y (units × answers), w)``. One HiGHS LP for all
    nodes; its vertex is integral when the constraints are totally unimodular (checked), otherwise
    a MILP (time-limited), and as a last resort the detailed-only L1 fit, which is TU.

    ``below = (constraints of the next level, children slices of each unit)`` also requires that
    ``X`` can be split into children satisfying their own constraints (the children are extra LP
    variables without cost), so the start is not a corner the next level cannot leave. With
    ``strict=False`` an infeasible problem returns ``None`` instead of raising. HiGHS gets the
    seconds ``clock`` has left; running out raises its time-limit error.
    """
    from scipy.optimize import linprog

    lp = _l1_problem(lc, groups, parents, fits, upper, below)
    left = None if clock is None else clock.remaining()
    res = linprog(lp.cost, A_ub=lp.A_ub, b_ub=lp.b_ub, A_eq=lp.A_eq, b_eq=lp.b_eq.astype(float),
                  bounds=np.stack([lp.lo, lp.hi], 1), method="highs",
                  options={} if left is None else {"time_limit": max(left, 1e-3)})
    if clock is not None:
        clock.check()
    if res.status == 2:
        if not strict:
            return None
        _name_infeasible(lc, groups, parents, level, parent_codes)
    if res.status != 0:
        raise PostprocError(f"level {level!r}: no starting point for the sampler: {res.message}")
    xi = np.rint(res.x)
    if not lp.integral(res.x, xi):
        xi = _l1_milp(lp, clock)
        if xi is None:
            if len(fits) > 1:
                return _l1_start(lc, groups, parents, fits[:1], upper, level, parent_codes,
                                 below=below, strict=strict, clock=clock)
            if not strict:
                return None
            _name_infeasible(lc, groups, parents, level, parent_codes)
    xi = xi[:lp.V]
    return xi.astype(np.int64).reshape(upper.shape)


@dataclass(frozen=True, eq=False)
class _L1Problem:
    """The weighted-L1 LP of one level: ``min cost·v`` s.t. ``A_ub v ≤ b_ub``, ``A_eq v = b_eq``,
    ``lo ≤ v ≤ hi`` over ``v = (X, t, children)``: the units' cells (``V``), one misfit per
    query answer of each unit (``T``) and the children's cells (``Z``). The first ``node_rows``
    rows of ``A_ub`` are the nodes' own inequalities (negated)."""

    cost: np.ndarray
    A_ub: Any
    b_ub: np.ndarray
    A_eq: Any
    b_eq: np.ndarray
    lo: np.ndarray
    hi: np.ndarray
    V: int
    T: int
    Z: int
    node_rows: int

    def integral(self, x: np.ndarray, xi: np.ndarray) -> bool:
        """Whether the LP's solution ``x`` is integral in ``X`` and the children, and its
        rounding ``xi`` keeps every node's constraints exactly."""
        V, T, k = self.V, self.T, self.node_rows
        return not (np.max(np.abs(x[:V] - xi[:V]), initial=0.0) > 1e-6 or
                    np.max(np.abs(x[V + T:] - xi[V + T:]), initial=0.0) > 1e-6 or
                    not _exact_ok(self.A_eq, self.b_eq, -self.A_ub[:k], -self.b_ub[:k], xi))


def _l1_problem(lc: LevelConstraints, groups: list[slice], parents: np.ndarray | None,
                fits: list[tuple[Any, np.ndarray, float]], upper: np.ndarray,
                below: tuple[LevelConstraints, list[slice]] | None) -> _L1Problem:
    """The LP of :func:`_l1_start`: the nodes' constraints, ``±(Q X_k − y_k) ≤ t`` for every
    fit, and (with ``below``) the children's own constraints and their sums."""
    A, a, B, b = _node_blocks(lc, groups, parents)
    U, n = upper.shape
    V = U * n
    Z, extra = 0, None
    if below is not None and below[1]:
        extra = _children_rows(below[0], below[1], U, n)
        Z = extra.size
    eye_u = sp.identity(U, format="csr")
    rhs_ub, costs = [-b.astype(float)], [np.zeros(V)]
    t_sizes = []
    for Q, y, w in fits:
        t_sizes.append(U * Q.shape[0])           # rows of kron(I_U, Q), built once below
        costs.append(np.full(t_sizes[-1], float(w)))
        rhs_ub.extend([np.rint(y.ravel()), -np.rint(y.ravel())])
    T = sum(t_sizes)
    rows = [sp.hstack([-B, sp.csr_matrix((B.shape[0], T + Z))])]
    offset = 0
    for (Q, y, w), size in zip(fits, t_sizes):
        Qb = sp.kron(eye_u, sp.csr_matrix(Q, dtype=np.float64), format="csr")
        sel = sp.csr_matrix((np.ones(size), (np.arange(size), offset + np.arange(size))),
                            shape=(size, T + Z))
        rows.append(sp.hstack([Qb, -sel]))
        rows.append(sp.hstack([-Qb, -sel]))
        offset += size
    eq_rows, eq_rhs = [sp.hstack([A, sp.csr_matrix((A.shape[0], T + Z))])], [a]
    hi = np.concatenate([upper.ravel(), np.full(T, np.inf)])
    if extra is not None:
        rows.append(sp.hstack([sp.csr_matrix((extra.B.shape[0], V + T)), -extra.B]))
        rhs_ub.append(-extra.b.astype(float))
        eq_rows.append(sp.hstack([sp.csr_matrix((extra.A.shape[0], V + T)), extra.A]))
        eq_rhs.append(extra.a)
        eq_rows.append(sp.hstack([-sp.identity(V), sp.csr_matrix((V, T)), extra.S]))
        eq_rhs.append(np.zeros(V))
        hi = np.concatenate([hi, extra.upper])
    return _L1Problem(cost=np.concatenate(costs + [np.zeros(Z)]),
                      A_ub=sp.vstack(rows, format="csr"), b_ub=np.concatenate(rhs_ub),
                      A_eq=sp.vstack(eq_rows, format="csr"), b_eq=np.concatenate(eq_rhs),
                      lo=np.zeros(V + T + Z), hi=hi, V=V, T=T, Z=Z, node_rows=B.shape[0])


def _l1_milp(lp: _L1Problem, clock: _Clock | None) -> np.ndarray | None:
    """The LP as a MILP, integral in ``X`` and the children (at most 60 s, or the seconds
    ``clock`` has left): its rounded solution, or ``None`` when HiGHS found none."""
    from scipy.optimize import Bounds, LinearConstraint, milp

    cons = [LinearConstraint(sp.vstack([lp.A_ub, lp.A_eq]), np.concatenate(
        [np.full(lp.A_ub.shape[0], -np.inf), lp.b_eq]), np.concatenate([lp.b_ub, lp.b_eq]))]
    integrality = np.concatenate([np.ones(lp.V), np.zeros(lp.T), np.ones(lp.Z)])
    left = None if clock is None else clock.remaining()
    res = milp(lp.cost, constraints=cons, integrality=integrality, bounds=Bounds(lp.lo, lp.hi),
               options={"time_limit": 60.0 if left is None else max(min(60.0, left), 1e-3)})
    if clock is not None:
        clock.check()
    return None if res.x is None else np.rint(res.x)


def _node_blocks(lc: LevelConstraints, groups: list[slice], parents: np.ndarray | None):
    """Stacked (A, a, B, b) of several node problems (block diagonal), nonnegativity removed."""
    A_blocks, a_parts, B_blocks, b_parts = [], [], [], []
    for i, sl in enumerate(groups):
        A, a, B, b = node_matrices(lc, sl, None if parents is None else parents[i])
        k = sl.stop - sl.start
        nonneg = k * lc.matrix.shape[1]      # node_matrices puts the identity rows first
        A_blocks.append(A)
        a_parts.append(a)
        B_blocks.append(B[nonneg:])
        b_parts.append(b[nonneg:])
    return (sp.block_diag(A_blocks, format="csr"), np.concatenate(a_parts),
            sp.block_diag(B_blocks, format="csr"), np.concatenate(b_parts))


def _exact_ok(A, a, B, b, x) -> bool:
    """``A x = a``, ``B x ≥ b``, ``x ≥ 0`` for the integer rounding of ``x`` (the matrices hold
    small integers, so float64 products are exact)."""
    xi = np.rint(x)
    return bool(np.array_equal(A @ xi, a) and np.all(B @ xi >= b) and np.all(xi >= 0))


@dataclass(frozen=True, eq=False)
class _ChildRows:
    """Rows tying units to their children at the next level: the children's own node
    constraints ``A c = a``, ``B c ≥ b`` (block diagonal), the matrix ``S`` summing each unit's
    children (``S c`` = the units' cells), the children's upper bounds (0 on zero cells) and
    their number of variables (``size``)."""

    A: Any
    a: np.ndarray
    B: Any
    b: np.ndarray
    S: Any
    upper: np.ndarray
    size: int


def _children_rows(lc_next: LevelConstraints, slices: list[slice], U: int, n: int) -> _ChildRows:
    """The :class:`_ChildRows` of ``U`` units whose children are ``slices`` of the next level."""
    A_parts, a_parts, B_parts, b_parts, S_parts, upper = [], [], [], [], [], []
    for sl in slices:
        A2, a2, B2, b2 = node_matrices(lc_next, sl, None)
        k = sl.stop - sl.start
        A_parts.append(A2)
        a_parts.append(a2)
        B_parts.append(B2[k * n:])
        b_parts.append(b2[k * n:])
        S_parts.append(sp.kron(np.ones((1, k)), sp.identity(n), format="csr"))
        upper.append(np.where(lc_next.rows_of(sl)[2], 0.0, np.inf).ravel())
    S = sp.block_diag(S_parts, format="csr")
    return _ChildRows(A=sp.block_diag(A_parts, format="csr"), a=np.concatenate(a_parts),
                      B=sp.block_diag(B_parts, format="csr"), b=np.concatenate(b_parts), S=S,
                      upper=np.concatenate(upper), size=S.shape[1])


def _name_infeasible(lc, groups, parents, level, parent_codes):
    """Find the first node whose constraints cannot hold and raise naming it."""
    from scipy.optimize import linprog

    for i, sl in enumerate(groups):
        A, a, B, b = node_matrices(lc, sl, None if parents is None else parents[i])
        n = A.shape[1]
        res = linprog(np.zeros(n), A_ub=-B, b_ub=-b.astype(float), A_eq=A, b_eq=a.astype(float),
                      bounds=(0, None), method="highs")
        if res.status == 2:
            where = (f"the children of {parent_codes[i]!r}" if parents is not None
                     else f"{level} {lc.geocodes[sl.start]!r}")
            raise PostprocError(
                f"level {level!r}: the invariants are unsatisfiable for {where}: no nonnegative "
                f"histograms satisfy {', '.join(lc.constraint_names()) or 'the constraints'}"
                + (" together with summing to the released parent" if parents is not None
                   else "") + "; check the published invariant data")
    raise PostprocError(f"level {level!r}: the invariants are unsatisfiable (jointly)")
