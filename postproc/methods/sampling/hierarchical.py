"""Top-down conditional sampling of a :class:`~hierarchy.noisy.NoisyHierarchy`.

An alternative to TopDown's optimization (docs/topdown.md) in the spirit of Gong & Meng (2020):
at every level, each parent's children are *drawn*, not fitted.

What is sampled
---------------
Let ``y_k`` be child ``k``'s noisy detailed histogram, ``f`` the per-cell noise law of the
mechanism that produced it (two-sided geometric with the level's ``z``; discrete Gaussian with the
level's ``σ²``; Laplace and Gaussian measurements are treated as their integer analogues, the
two-sided geometric with ``z = 1/b`` and the discrete Gaussian with the same ``σ²``). For a parent
``p`` with released histogram ``x̂_p`` and children ``1..K`` the children are one draw of

    ``π_p(X) ∝ ∏_k ∏_j f(X_kj − y_kj) · 1{Σ_k X_k = x̂_p} · 1{X_k ∈ S_k for every k}``

over integer ``X`` (``S_k``: child ``k``'s invariants and constraints, nonnegativity and zero
cells, from :func:`invariants.compile.compile_spec`). The root is one draw of
``∏_j f(X_j − y_j) · 1{X ∈ S_root}``.

Why this is the conditional mechanism, level by level
------------------------------------------------------
Gong & Meng's conditional mechanism releases ``M(x) | M(x) ∈ S*``: the mechanism's law around the
confidential ``x``, restricted to the invariant set. ``π_p`` is exactly that construction with the
noisy measurement in the role of the centre (``f`` is symmetric, so ``f(X − y) = f(y − X)``) and
``S*`` = the set of children tables consistent with the already released parent and with the
children's own invariants — the invariant set that the top-down release must respect at that
node. Two consequences, stated plainly:

* the output is a function of the noisy measurements, the published invariants and fresh
  randomness only, so it is post-processing: it spends no privacy budget beyond the measurements
  (unlike Gong & Meng's mechanism applied to ``x``, whose cost is ``(1 + γ) k ε``);
* the centre is ``y`` = ``x`` + noise, so a draw carries the measurement's noise *and* a second
  draw's worth of spread before the invariants shrink it. Expect errors above TopDown's, which
  returns (near) the mode; the sampled release is unbiased-in-spirit rather than optimal.

By default every measured query's noise law enters ``π_p`` (``queries="all"``: the likelihood
of all the measurements, which is what TopDown fits too); ``queries="detailed"`` keeps only the
detailed measurements, which wastes the budget spent on marginals: on a 20,000-person E2E
hierarchy at ε = 1 it left county ``hhgq`` errors about 4 times larger (mean absolute error 10.3
against 2.4 with ``"all"``, TopDown 1.5), and more sweeps did not help.

How it is sampled
-----------------
Each level's chains start from a feasible integer point. ``start="topdown"`` (default) takes
TopDown's: at the root TopDown's root solution; below, one TopDown node solve (weighted least
squares, constraint-keeping rounding, exact check; failsafe off) of each *sampled* parent, so
the start sums to the parent actually released and keeps every invariant and constraint of its
level — TopDown's own solution of that level would sum to TopDown's parents, not to the sampled
ones, and is used only where a parent was sampled exactly as TopDown released it (a given
TopDown result). This costs one TopDown solve in all. ``start="l1"`` takes the L1-closest point
to ``y`` (the mode for the geometric law) that the next level can split, by one HiGHS LP for all
parents of the level (block diagonal; integrality verified, MILP as a fallback) — minutes on
large levels. Either start is then forgotten only as fast as the chain mixes: the release is the
state after ``sweeps`` sweeps. Then :class:`~postproc.methods.sampling.lattice.LatticeEngine` runs ``sweeps`` sweeps of
Metropolis lattice moves for all parents at once: children are paired at random within their
parent; a cell moves ``+k``/``−k`` between paired children (the parent's sum holds) or, where
children have equality invariants such as ``tot``, a swap ``(+k, −k, −k, +k)`` on two cells keeps
them; coupled constraint rows are checked exactly. The step's mean size is
``max(1, min(0.8 σ, x̂_pj / K_p))`` — it depends on the parent (fixed during the level), never
on the state, so the proposal stays symmetric. Every level is verified in exact integer
arithmetic (children sum to the parent; every invariant and constraint holds).

Examples
--------
>>> from hierarchy.synth import synthesize_1940
>>> from hierarchy.tabulation import tabulate
>>> from hierarchy.measurement import measure
>>> from hierarchy.budget import Budget
>>> from hierarchy.queries import e2e_workload
>>> from hierarchy.schema import E2E_1940
>>> from invariants.spec import Invariant, Spec
>>> levels = ["nation", "state", "county", "enum_dist"]
>>> data = synthesize_1940(5_000, seed=1)
>>> truth = tabulate(data.persons, schema=E2E_1940, levels=levels, units=data.units)
>>> spec = Spec.e2e(levels)
>>> noisy = measure(truth, e2e_workload(E2E_1940), Budget.e2e(1, levels), "geometric",
...                 rng=3, spec=spec)
>>> result = sample_topdown(noisy, spec, rng=4, sweeps=20)
>>> [int(h.sum()) for h in result.histograms] == [int(truth.counts[0].sum())] * 4
True
>>> bool((result.histograms[-1] >= 0).all()), result.provenance["sampler"]["name"]
(True, 'lattice')
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import pandas as pd
import scipy.sparse as sp

from hierarchy.noisy import NoisyHierarchy
from hierarchy.randomness import as_randomness
from invariants.compile import LevelConstraints, compile_spec, node_matrices, violations
from invariants.spec import Spec
from postproc.errors import PostprocError, require_checked_spec
from postproc.methods.sampling.engine import LatticeEngine, default_step, move_structure
from postproc.result import Result

__all__ = ["sample_topdown", "level_noise"]

#: How a measurement mechanism's law is used for integer histograms.
_INTEGER_LAW = {"geometric": ("geometric", "z", lambda v: v),
                "discrete_gaussian": ("discrete_gaussian", "sigma2", lambda v: v),
                "laplace": ("geometric", "scale", lambda v: 1.0 / v),
                "gaussian": ("discrete_gaussian", "sigma2", lambda v: v)}


def level_noise(noisy: NoisyHierarchy, level: str, mechanism: str | None = None,
                query: str = "detailed") -> tuple[str, float]:
    """``(law, parameter)`` of a level's measurements of ``query`` for the sampler.

    Raises
    ------
    PostprocError
        ``query`` not measured at ``level``, or no mechanism/parameter in the provenance.

    Examples
    --------
    >>> import pandas as pd
    >>> from hierarchy.budget import Budget
    >>> from hierarchy.measurement import measure
    >>> from hierarchy.queries import e2e_workload
    >>> from hierarchy.schema import E2E_1940
    >>> from hierarchy.tabulation import tabulate
    >>> persons = pd.DataFrame({"state": ["01", "02"], "hhgq": [0, 0], "votingage": [1, 1],
    ...                         "hispanic": [0, 0], "cenrace": [0, 1]})
    >>> truth = tabulate(persons, schema=E2E_1940, levels=["nation", "state"])
    >>> noisy = measure(truth, e2e_workload(E2E_1940), Budget.e2e(1, ["nation", "state"]),
    ...                 "geometric", rng=1)
    >>> level_noise(noisy, "state")          # 10 % of ε/2, sensitivity 2
    ('geometric', 0.025)
    """
    if query not in noisy.queries(level):
        raise PostprocError(f"conditional sampling needs the {query!r} query measured at every "
                            f"level; level {level!r} has {list(noisy.queries(level))}. Give "
                            f"{query!r} a share of the budget at every level")
    name = mechanism or noisy.provenance.get("mechanism", {}).get("name")
    if name not in _INTEGER_LAW:
        raise PostprocError(f"unknown measurement mechanism {name!r}; pass mechanism= one of "
                            f"{sorted(_INTEGER_LAW)}")
    law, key, convert = _INTEGER_LAW[name]
    try:
        value = float(noisy.provenance["parameters"][level][query][key])
    except (KeyError, TypeError, ValueError):
        raise PostprocError(f"the noisy hierarchy's provenance has no {key!r} for the {query!r} "
                            f"query at level {level!r}; it must come from measure()") from None
    return law, convert(value)


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
    from scipy.optimize import Bounds, LinearConstraint, linprog, milp

    A, a, B, b = _node_blocks(lc, groups, parents)
    U, n = upper.shape
    V = U * n
    Z, extra = 0, None
    if below is not None and below[1]:
        extra = _children_rows(below[0], below[1], U, n)
        Z = extra["size"]
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
    lo = np.zeros(V + T + Z)
    hi = np.concatenate([upper.ravel(), np.full(T, np.inf)])
    cost = np.concatenate(costs + [np.zeros(Z)])
    if extra is not None:
        rows.append(sp.hstack([sp.csr_matrix((extra["B"].shape[0], V + T)), -extra["B"]]))
        rhs_ub.append(-extra["b"].astype(float))
        eq_rows.append(sp.hstack([sp.csr_matrix((extra["A"].shape[0], V + T)), extra["A"]]))
        eq_rhs.append(extra["a"])
        eq_rows.append(sp.hstack([-sp.identity(V), sp.csr_matrix((V, T)), extra["S"]]))
        eq_rhs.append(np.zeros(V))
        hi = np.concatenate([hi, extra["upper"]])
    A_ub = sp.vstack(rows, format="csr")
    b_ub = np.concatenate(rhs_ub)
    A_eq = sp.vstack(eq_rows, format="csr")
    a = np.concatenate(eq_rhs)
    left = None if clock is None else clock.remaining()
    res = linprog(cost, A_ub=A_ub, b_ub=b_ub, A_eq=A_eq, b_eq=a.astype(float),
                  bounds=np.stack([lo, hi], 1), method="highs",
                  options={} if left is None else {"time_limit": max(left, 1e-3)})
    if clock is not None:
        clock.check()
    if res.status == 2:
        if not strict:
            return None
        _name_infeasible(lc, groups, parents, level, parent_codes)
    if res.status != 0:
        raise PostprocError(f"level {level!r}: no starting point for the sampler: {res.message}")
    x = res.x
    xi = np.rint(x)
    if np.max(np.abs(x[:V] - xi[:V]), initial=0.0) > 1e-6 or \
            np.max(np.abs(x[V + T:] - xi[V + T:]), initial=0.0) > 1e-6 or \
            not _exact_ok(A_eq, a, -A_ub[:B.shape[0]], -b_ub[:B.shape[0]], xi):
        cons = [LinearConstraint(sp.vstack([A_ub, A_eq]), np.concatenate(
            [np.full(A_ub.shape[0], -np.inf), a]), np.concatenate([b_ub, a]))]
        integrality = np.concatenate([np.ones(V), np.zeros(T), np.ones(Z)])
        left = None if clock is None else clock.remaining()
        res = milp(cost, constraints=cons, integrality=integrality, bounds=Bounds(lo, hi),
                   options={"time_limit": 60.0 if left is None else max(min(60.0, left), 1e-3)})
        if clock is not None:
            clock.check()
        if res.x is not None:
            xi = np.rint(res.x)
        elif len(fits) > 1:
            return _l1_start(lc, groups, parents, fits[:1], upper, level, parent_codes,
                             below=below, strict=strict, clock=clock)
        elif not strict:
            return None
        else:
            _name_infeasible(lc, groups, parents, level, parent_codes)
    xi = xi[:V]
    return xi.astype(np.int64).reshape(U, n)


def _exact_ok(A, a, B, b, x) -> bool:
    """``A x = a``, ``B x ≥ b``, ``x ≥ 0`` for the integer rounding of ``x`` (the matrices hold
    small integers, so float64 products are exact)."""
    xi = np.rint(x)
    return bool(np.array_equal(A @ xi, a) and np.all(B @ xi >= b) and np.all(xi >= 0))


def _children_rows(lc_next: LevelConstraints, slices: list[slice], U: int, n: int) -> dict:
    """Rows tying ``U`` units to their children at the next level: the children's own node
    constraints (block diagonal) and ``Σ children − unit = 0`` (the matrix ``S`` over the
    children's variables)."""
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
    return {"A": sp.block_diag(A_parts, format="csr"), "a": np.concatenate(a_parts),
            "B": sp.block_diag(B_parts, format="csr"), "b": np.concatenate(b_parts), "S": S,
            "upper": np.concatenate(upper), "size": S.shape[1]}


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


def _structure(lc: LevelConstraints, units: np.ndarray, cap: np.ndarray):
    """Equality rows to preserve, coupled rows to check, and the move structure (cells capped
    at 0 in every unit never move)."""
    lower, upper, zero = lc.rows_of(units)
    M = lc.matrix.toarray()
    support = M != 0
    eq = np.isfinite(lower) & (lower == upper)
    # an equality is trivial for a unit when every cell it counts is a zero cell there
    live = (~zero).astype(np.int64) @ support.T.astype(np.int64) > 0
    eq_any = np.any(eq & live, axis=0)
    fixed = (zero | (cap <= 0)).all(axis=0)
    structure = move_structure(M[eq_any], fixed)
    bounded = np.any(np.isfinite(lower) | np.isfinite(upper), axis=0) & ~eq_any
    rows = M[bounded]
    return structure, rows, lower[:, bounded], upper[:, bounded], eq_any


def _verify(lc, hist, parent_hist, geo, li) -> None:
    found = violations(lc, hist)
    if parent_hist is not None:
        summed = geo.aggregate(hist, li, li - 1)
        for p, j in np.argwhere(summed != parent_hist)[:5]:
            found.append(f"{geo.levels[li]} units of {geo.levels[li - 1]} "
                         f"{geo.geocodes[li - 1][p]!r} sum to {int(summed[p, j])} in cell {j}, "
                         f"the parent has {int(parent_hist[p, j])}")
    if found:
        raise PostprocError("conditional sampling result fails verification:\n  "
                            + "\n  ".join(found))


def _answer_terms(noisy: NoisyHierarchy, level: str, queries: list[str], units: np.ndarray,
                  mechanism: str | None):
    """Log-density terms of non-detailed measured queries: answer index per cell and query."""
    answer_of, centre, param = [], [], []
    for q in queries:
        if q == "detailed":
            continue
        Q = noisy.workload[q].matrix.tocsc()
        counts = np.diff(Q.indptr)
        if np.any(counts > 1) or np.any(Q.data != 1):
            raise PostprocError(f"query {q!r} counts a cell in more than one answer; conditional "
                                "sampling supports marginals and recodes (one answer per cell)")
        ans = np.full(Q.shape[1], -1, dtype=np.int64)
        has = counts == 1
        ans[has] = Q.indices[Q.indptr[:-1][has]]
        answer_of.append(ans)
        centre.append(np.asarray(noisy.get(level, q).values, dtype=np.float64)[units])
        law, value = level_noise(noisy, level, mechanism, q)
        param.append(np.full(Q.shape[0], value))
    if not answer_of:
        return None
    # answers beyond the largest used index still need a slot: pad the centre accordingly
    sizes = [int(a.max()) + 1 for a in answer_of]
    centre = np.concatenate([c[:, :k] for c, k in zip(centre, sizes)], axis=1)
    param = np.concatenate([p[:k] for p, k in zip(param, sizes)])
    return {"answer_of": np.stack(answer_of), "centre": centre, "parameter": param}


def _fits(noisy: NoisyHierarchy, level: str, used: list[str], units: np.ndarray,
          y: np.ndarray, mechanism: str | None) -> list[tuple[Any, np.ndarray, float]]:
    """The misfit terms of the start: the detailed cells first (weight = its log-density slope
    ``z``, or ``1/σ``), then every other used query."""
    out = []
    for q in (["detailed"] if "detailed" not in used else []) + used:
        if q == "detailed":
            centre = y[units]
            if "detailed" in noisy.queries(level):
                law, value = level_noise(noisy, level, mechanism, "detailed")
            else:
                law, value = "geometric", 1e-6
            Q = sp.identity(noisy.schema.size, format="csr")
        else:
            centre = np.asarray(noisy.get(level, q).values, dtype=np.float64)[units]
            law, value = level_noise(noisy, level, mechanism, q)
            Q = noisy.workload[q].matrix
        weight = value if law == "geometric" else 1.0 / np.sqrt(value)
        out.append((Q, centre, weight))
    return out


def _queries(noisy: NoisyHierarchy, queries: Any) -> list[str]:
    if queries == "detailed":
        return ["detailed"]
    if queries == "all":
        names = set()
        for lv in noisy.levels:
            names |= set(noisy.queries(lv))
        return [q for q in noisy.workload.names if q in names]
    chosen = [str(q) for q in queries] if not isinstance(queries, str) else [queries]
    unknown = [q for q in chosen if q not in noisy.workload.names]
    if unknown or not chosen:
        raise PostprocError(f"queries must be 'detailed', 'all' or names from the workload "
                            f"{list(noisy.workload.names)}; got {queries!r}")
    return chosen


class _Clock:
    """The ``time_limit`` of one call: what is being done, seconds left, and the error naming
    the level and what was done when they run out."""

    def __init__(self, limit: float | None, sweeps: int, start: str):
        self.limit, self.sweeps, self.start = limit, sweeps, start
        self.t0 = time.perf_counter()
        self.level, self.doing, self.done = "", "starting", []

    def at(self, level: str, doing: str) -> None:
        self.level, self.doing = level, doing
        self.check()

    def remaining(self) -> float | None:
        return None if self.limit is None else self.limit - (time.perf_counter() - self.t0)

    def check(self) -> None:
        left = self.remaining()
        if left is not None and left <= 0:
            raise self.error()

    def error(self) -> PostprocError:
        advice = [f"a larger time_limit (now {self.limit:g} s)",
                  f"fewer sweeps (now {self.sweeps} per level)"]
        if self.start == "l1":
            advice.append("start='topdown' (the default: TopDown's node solves instead of one "
                          "weighted-L1 LP per level, which can take minutes on large levels)")
        return PostprocError(
            f"conditional sampling stopped by time_limit={self.limit:g} s at level "
            f"{self.level!r}, while {self.doing}, after "
            f"{time.perf_counter() - self.t0:.1f} s; levels finished: "
            f"{', '.join(self.done) or 'none'}. To go on, try " + ", or ".join(advice))


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
    from postproc.methods.topdown.run import level_tasks, root_task

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


def _bar(progress: bool, level: str, sweeps: int):
    """A tqdm bar of a level's sweeps on stderr (``None`` when ``progress`` is off)."""
    if not progress:
        return None
    import sys

    from tqdm.auto import tqdm

    return tqdm(total=sweeps, desc=f"sampling {level}", unit="sweep", file=sys.stderr,
                leave=True)


def sample_topdown(noisy: NoisyHierarchy, spec: Spec | None = None, *, rng: Any = None,
                   sweeps: int = 100, mechanism: str | None = None,
                   queries: Any = "all", step_factor: float = 0.8,
                   retries: int = 10, start: Any = "topdown", progress: bool = False,
                   time_limit: float | None = None) -> Result:
    """Post-process a noisy hierarchy by top-down conditional sampling (see the module docs).

    Parameters
    ----------
    noisy : NoisyHierarchy
        Must have the ``detailed`` query measured at every level.
    spec : Spec, optional
        Invariants and constraints (default none: nonnegativity and consistency only); one
        with constraints must be covered by the spec ``noisy`` was measured with
        (:func:`postproc.errors.require_checked_spec`).
    rng : None, int, numpy.random.Generator or Randomness
        ``None`` is release mode; an int seed is simulation mode (labelled unsafe).
    sweeps : int
        Metropolis sweeps per level from the level's start; the final state is released.
    mechanism : str, optional
        Override the measurement mechanism named in the provenance.
    queries : 'detailed', 'all' or list of query names
        Which measurements enter the law. ``'all'`` (default) multiplies in every measured
        query's noise law at its answers,
        ``∏_q ∏_a f_q((Q_q X_k)_a − y_{k,q,a})`` — the likelihood of all measurements, which
        is much tighter when most of the budget went to marginals (as in the E2E split);
        ``'detailed'`` uses the detailed measurements only.
    step_factor : float
        Mean step = ``max(1, min(step_factor · σ, x̂_pj / K_p))`` with ``σ`` the smallest noise
        sd among the used queries.
    retries : int
        When the next level cannot split a level's draw (a parent drawn into a corner), sample
        that level ``sweeps`` more sweeps and check again, up to ``retries`` times; then release
        the level's start (and, if TopDown's split cannot be split either, the weighted-L1
        start, splittable by construction). Every such event is listed in
        ``provenance['failsafe_reports']``.
    start : 'topdown' (default), 'l1' or Result
        Where each level's chains start. ``'topdown'``: TopDown's integer solution — at the root
        TopDown's root, below it one TopDown node solve per sampled parent (fast; it satisfies
        every constraint and sums to the sampled parent). ``'l1'``: the weighted-L1 mode, one
        HiGHS LP per level (MILP if not integral) that also asks the next level to be
        splittable (slow on large levels). A :class:`~postproc.result.Result` of
        ``topdown(noisy, spec)``: as ``'topdown'``, reusing its root and its children of any
        parent sampled exactly as TopDown released it.
    progress : bool
        A tqdm bar per level on stderr (sweeps; its postfix says start, sweeps or split check).
    time_limit : float, optional
        Seconds for the whole call; when exceeded, a :class:`PostprocError` names the level,
        what it was doing and the levels finished, and says how to go on.

    Returns
    -------
    Result
        Method ``"sampling"``: int64 histograms per level, root first;
        ``node_stats`` per parent (children, moves proposed and accepted, acceptance rate);
        ``provenance['sampler']`` with the law, parameters, sweeps, start, randomness and each
        level's acceptance rate (``None`` where no move was proposed);
        ``provenance['timings']`` with seconds per level, and of those the start's and the
        sweeps' (``start``, ``sweeps``).

    Raises
    ------
    PostprocError
        Missing measurements or provenance, unsatisfiable invariants at a node (naming it), a
        start result that does not fit, the time limit, or a failed exact verification.

    Examples
    --------
    >>> import pandas as pd
    >>> from hierarchy.budget import Budget
    >>> from hierarchy.measurement import measure
    >>> from hierarchy.queries import e2e_workload
    >>> from hierarchy.schema import E2E_1940
    >>> from hierarchy.tabulation import tabulate
    >>> from invariants.spec import Invariant
    >>> persons = pd.DataFrame({"state": ["01"] * 5 + ["02"] * 3, "hhgq": [0] * 8,
    ...                         "votingage": [1, 1, 0, 1, 1, 1, 0, 1], "hispanic": [0] * 8,
    ...                         "cenrace": [0, 0, 0, 1, 1, 0, 2, 2]})
    >>> truth = tabulate(persons, schema=E2E_1940, levels=["nation", "state"])
    >>> noisy = measure(truth, e2e_workload(E2E_1940), Budget.e2e(2, ["nation", "state"]),
    ...                 "geometric", rng=1, publish={"tot": ["nation", "state"]})
    >>> spec = Spec(invariants=(Invariant("tot", "all"),))
    >>> out = sample_topdown(noisy, spec, rng=2, sweeps=20, queries="all")
    >>> out.histograms[1].sum(axis=1).tolist(), out.safe_for_release
    ([5, 3], False)
    >>> out.provenance["sampler"]["start"], sorted(out.provenance["timings"])
    ('topdown', ['levels', 'start', 'sweeps', 'total'])
    >>> sample_topdown(noisy, spec, rng=2, sweeps=20, time_limit=0)
    Traceback (most recent call last):
    ...
    postproc.errors.PostprocError: conditional sampling stopped by time_limit=0 s at level ...
    """
    from postproc.methods.sampling.mis import _positive_int

    sweeps = _positive_int(sweeps, "sweeps", zero=True)
    retries = _positive_int(retries, "retries", zero=True)
    if time_limit is not None and not (isinstance(time_limit, (int, float))
                                       and not isinstance(time_limit, bool)
                                       and time_limit >= 0):
        raise PostprocError(f"time_limit must be a number of seconds >= 0 or None, "
                            f"not {time_limit!r}")
    require_checked_spec("sampling", noisy, spec)
    source = as_randomness(rng)
    spec = spec or Spec()
    geo = noisy.geography
    used = _queries(noisy, queries)
    laws = [level_noise(noisy, lv, mechanism, "detailed" if "detailed" in used else used[0])
            for lv in geo.levels]
    sds = [min(float(default_step(*level_noise(noisy, lv, mechanism, q))) / 0.8 for q in used)
           for lv in geo.levels]
    compiled = compile_spec(spec, noisy.schema, geo, noisy.invariants)
    kind, given = _check_start(start, noisy, compiled)
    clock = _Clock(None if time_limit is None else float(time_limit), sweeps, kind)
    t_start = clock.t0
    n = noisy.schema.size

    def setup(li: int, parent_hist: np.ndarray | None) -> dict:
        """The units that are sampled at level ``li`` and everything their engine needs."""
        level = geo.levels[li]
        lc = compiled[level]
        if "detailed" in noisy.queries(level):
            y = np.asarray(noisy.get(level, "detailed").values, dtype=np.float64)
        else:   # only the start uses y then
            y = np.zeros((geo.n_units(li), n))
        sd_step = sds[li] * step_factor
        hist = np.zeros((geo.n_units(li), n), dtype=np.int64)
        if li == 0:
            units = np.arange(geo.n_units(0))
            groups = [slice(int(u), int(u) + 1) for u in units]
            upper = np.where(lc.zero, 0.0, np.inf)
            step = np.full((units.size, n), float(max(1.0, sd_step)))
            return dict(level=level, lc=lc, y=y, hist=hist, units=units, groups=groups,
                        upper=upper, step=step, group_of=units, cross=False, parents=None,
                        parent_hist=None, multi=units, parent_codes=None,
                        copies=np.zeros(0, np.int64))
        offsets = geo.child_offsets(li - 1)
        k = np.diff(offsets)
        single = np.flatnonzero(k == 1)
        hist[offsets[single]] = parent_hist[single]
        multi = np.flatnonzero(k >= 2)
        groups = [slice(int(offsets[p]), int(offsets[p + 1])) for p in multi]
        units = (np.concatenate([np.arange(g.start, g.stop) for g in groups])
                 if groups else np.zeros(0, np.int64))
        group_of = np.repeat(np.arange(multi.size), k[multi])
        cap = parent_hist[multi][group_of].astype(np.float64)
        upper = np.where(lc.rows_of(units)[2], 0.0, cap)
        share = cap / k[multi][group_of][:, None]
        step = np.maximum(1.0, np.minimum(sd_step, share))
        return dict(level=level, lc=lc, y=y, hist=hist, units=units, groups=groups, upper=upper,
                    step=step, group_of=group_of, cross=True, parents=parent_hist[multi],
                    parent_hist=parent_hist, multi=multi,
                    parent_codes=geo.geocodes[li - 1][multi], copies=single)

    def start_of(li: int, st: dict, strict: bool, how: str = kind) -> np.ndarray | None:
        """A feasible integer start of the level's sampled units (``None``: none exists, when
        not ``strict``): TopDown's split of the sampled parents, or the weighted-L1 mode that
        the next level can split."""
        if st["units"].size == 0:
            return np.zeros((0, n), np.int64)
        if how == "topdown":
            found = _topdown_split(noisy, st["lc"], li, st["parent_hist"], st["multi"], given,
                                   clock)
            if found is not None or not strict:
                return found
        below = None
        if li + 1 < geo.depth:
            offsets = geo.child_offsets(li)
            below = (compiled[geo.levels[li + 1]],
                     [slice(int(offsets[u]), int(offsets[u + 1])) for u in st["units"]])
        return _l1_start(st["lc"], st["groups"], st["parents"],
                         _fits(noisy, st["level"], used, st["units"], st["y"], mechanism),
                         st["upper"], st["level"], st["parent_codes"], below=below,
                         strict=strict, clock=clock)

    hists: list[np.ndarray] = []
    stats: list[dict[str, Any]] = []
    timings: dict[str, float] = {}
    start_seconds: dict[str, float] = {}
    sweep_seconds: dict[str, float] = {}
    acceptance: dict[str, float | None] = {}
    reports: list[dict[str, Any]] = []
    bar = _bar(progress, geo.levels[0], sweeps)
    try:
        clock.at(geo.levels[0], "finding its start")
        t0 = time.perf_counter()
        st = setup(0, None)
        start_hist = start_of(0, st, strict=True)
        start_seconds[geo.levels[0]] = time.perf_counter() - t0
        for li, level in enumerate(geo.levels):
            t_level = time.perf_counter() - start_seconds[level]
            lc, units, groups, hist = st["lc"], st["units"], st["groups"], st["hist"]
            law, param = laws[li]
            accepted = proposed = 0
            next_st = next_start = None
            engine = None
            t0 = time.perf_counter()
            if bar is not None:
                bar.set_postfix_str("sweeps")
            if units.size:
                structure, rows, row_lo, row_hi, eq_rows = _structure(lc, units, st["upper"])
                engine = LatticeEngine(start_hist, st["y"][units], law, param, 0.0, st["upper"],
                                       structure, groups=st["group_of"], cross=st["cross"],
                                       rows=rows if rows.size else None, row_lower=row_lo,
                                       row_upper=row_hi, step=st["step"], integer=True,
                                       terms=_answer_terms(noisy, level, used, units, mechanism),
                                       cell_terms="detailed" in used)
                engine.track_units = True
                stream = source.child(li)
                done = [0]

                def on_sweep(i: int, done=done) -> None:
                    done[0] += 1
                    if bar is not None:
                        bar.update(1)
                    if clock.limit is not None:
                        clock.doing = f"running sweep {done[0]} of {sweeps}"
                        clock.check()

                clock.at(level, f"running sweep 1 of {sweeps}")
                engine.run(sweeps, stream, on_sweep=on_sweep)
                hist[units] = engine.X
            elif bar is not None:
                bar.update(sweeps)
            sweep_seconds[level] = time.perf_counter() - t0
            # the next level must be able to split this one: otherwise sample on, then fall back
            extra_runs = 0
            if li + 1 < geo.depth:
                below = geo.levels[li + 1]
                t_next = time.perf_counter()
                while True:
                    clock.at(level, f"finding the start of {below!r} (splitting {level!r})")
                    if bar is not None:
                        bar.set_postfix_str(f"start of {below}")
                    next_st = setup(li + 1, hist)
                    next_start = start_of(li + 1, next_st, strict=False)
                    if next_start is not None or engine is None or extra_runs >= retries:
                        break
                    clock.at(level, f"retry {extra_runs + 1} of {retries}: {sweeps} more "
                                    f"sweeps, {below!r} could not split the draw")
                    if bar is not None:
                        bar.total += max(sweeps, 1)
                        bar.set_postfix_str(f"retry {extra_runs + 1}")
                    done[0] = 0
                    engine.run(max(sweeps, 1), stream, on_sweep=on_sweep)
                    hist[units] = engine.X
                    extra_runs += 1
                action = None
                if next_start is None and engine is not None:
                    # release the start: TopDown's split, then the weighted-L1 mode (splittable
                    # by construction)
                    for how in dict.fromkeys((kind, "l1")):
                        fallback = start_hist if how == kind else start_of(li, st, False, "l1")
                        if fallback is None:
                            continue
                        hist[units] = fallback
                        next_st = setup(li + 1, hist)
                        next_start = start_of(li + 1, next_st, strict=False)
                        if next_start is None and kind == "topdown":
                            next_start = start_of(li + 1, next_st, False, "l1")
                        if next_start is not None:
                            action = ("released the start (TopDown's split)" if how == "topdown"
                                      else "released the weighted-L1 start") + \
                                ": no sampled state could be split into the next level"
                            break
                if next_start is None:     # not even the start: raise, naming the node
                    next_start = start_of(li + 1, next_st, strict=True, how="l1")
                if action is not None:
                    reports.append({"level": level, "retries": extra_runs, "action": action})
                elif extra_runs:
                    reports.append({"level": level, "retries": extra_runs,
                                    "action": "sampled further until the next level could "
                                              "split the state"})
                start_seconds[below] = time.perf_counter() - t_next
            if engine is not None:
                accepted, proposed = engine.accepted, engine.proposed
                per_group_prop = np.bincount(st["group_of"], engine.unit_proposed,
                                             minlength=len(groups))
                per_group_acc = np.bincount(st["group_of"], engine.unit_accepted,
                                            minlength=len(groups))
                for i, g in enumerate(groups):
                    stats.append({
                        "level": level,
                        "parent": "" if st["parent_codes"] is None
                        else str(st["parent_codes"][i]),
                        "children": int(g.stop - g.start),
                        "variables": int((g.stop - g.start) * n),
                        "proposed": int(per_group_prop[i]), "accepted": int(per_group_acc[i]),
                        "acceptance": float(per_group_acc[i] / per_group_prop[i])
                        if per_group_prop[i] else float("nan"),
                        "copied": False})
            for p in st["copies"]:
                stats.append({"level": level, "parent": str(geo.geocodes[li - 1][p]),
                              "children": 1, "variables": n, "proposed": 0, "accepted": 0,
                              "acceptance": float("nan"), "copied": True})
            _verify(lc, hist, hists[li - 1] if li else None, geo, li)
            hists.append(hist)
            # None (JSON null), not NaN, where no move was proposed: the provenance goes into a
            # result directory's manifest.json, and NaN is not JSON
            acceptance[level] = accepted / proposed if proposed else None
            clock.done.append(level)
            if bar is not None:
                bar.close()
                bar = None if li + 1 == geo.depth else _bar(progress, geo.levels[li + 1],
                                                              sweeps)
            # a level's time: its start and its sweeps (its split check is the next one's start)
            timings[level] = (time.perf_counter() - t_level
                              - start_seconds.get(geo.levels[li + 1], 0.0)
                              if li + 1 < geo.depth else time.perf_counter() - t_level)
            st, start_hist = next_st, next_start
    finally:
        if bar is not None:
            bar.close()
    provenance = {
        "noisy": dict(noisy.provenance), "spec": spec.to_dict(),
        "sampler": {"name": "lattice", "method": "top-down conditional sampling",
                    "sweeps": sweeps, "step_factor": step_factor, "queries": used,
                    "retries": retries, "start": kind if given is None else "topdown (given)",
                    "laws": {lv: {"law": law, "parameter": p} for lv, (law, p) in
                             zip(geo.levels, laws)},
                    "acceptance": acceptance, "randomness": source.provenance()},
        "timings": {"levels": timings, "start": start_seconds, "sweeps": sweep_seconds,
                    "total": time.perf_counter() - t_start},
        "failsafe_reports": reports,
    }
    return Result("sampling", noisy.schema, geo, noisy.workload, tuple(hists), provenance,
                  pd.DataFrame(stats))
