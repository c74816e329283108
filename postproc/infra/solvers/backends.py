"""QP backends behind one small interface, and HiGHS for LP/MILP.

Every backend maps its native statuses onto :class:`~postproc.infra.solvers.base.Status`.
Tolerances:

============== ======================================================================
backend        settings
============== ======================================================================
clarabel       Clarabel called directly (interior point): tol_gap_abs/rel = tol_feas = 1e-10
               (1e-8 left x up to 1e-4 off active bounds; 1e-10 costs ~1.5 iterations).
               The default: on E2E ED-level nodes it needs ~13 iterations (max ~20) and was
               8x faster than OSQP over a 1M-person ED level; feasible to 1e-12.
               One thread; the KKT factorization by structure (qdldl, or faer for
               large dense problems: :func:`clarabel_linear_solver`).
osqp           OSQP called directly: eps_abs = eps_rel = 1e-7, polishing on (an exact
               active-set solve; when it succeeds the optimum is accurate to ~1e-9),
               max_iter 20000. ADMM: fast on some nodes (5x faster than Clarabel on the
               132M-person nation→state node) but ~1600 iterations on typical ED nodes.
cvxpy-clarabel the same solvers through CVXPY (the generic path; slower because CVXPY
cvxpy-osqp     canonicalizes every problem). OSQP via CVXPY uses eps 1e-7 and polishing.
cvxpy-ecos     ECOS (interior point, SOCP form of the QP), abstol = reltol = 1e-8.
cvxpy-scs      SCS (first order, conic form), eps_abs = eps_rel = 1e-7, 100000 iterations;
               the backend of last resort.
============== ======================================================================

Every backend receives the node's fit *centred and scaled* (see
:func:`postproc.methods.topdown.node.assemble_fit`): variables are shifts from the measured targets
in units of the measurement noise, so the objective has no large linear term. Posed as the expanded
½xᵀPx + qᵀx + r instead, the 132M-person nation→state fit lost its optimum to cancellation
(Clarabel and OSQP stopped 0.65 % above it while reporting success). Accepted answers must also
satisfy every row to ``feasibility_tol`` (relative, :func:`solve_qp`).

LP and MILP go to HiGHS through ``highspy`` (:func:`solve_lp`).
"""

from __future__ import annotations

import functools
import math
import time
from typing import Callable, Sequence

import numpy as np
import scipy.sparse as sp

from postproc.errors import PostprocError
from postproc.infra.solvers.base import LP, QP, Solution, SolverError, Status

__all__ = ["QP_BACKENDS", "DEFAULT_QP_CHAIN", "solve_qp", "solve_lp", "available_qp_backends",
           "check_chain", "clarabel_linear_solver", "dense_objective", "large_blocks"]


def _osqp(qp: QP) -> Solution:
    import osqp

    t0 = time.perf_counter()
    m = osqp.OSQP()
    m.setup(sp.csc_matrix(qp.P), qp.q, sp.csc_matrix(qp.A), qp.l, qp.u, verbose=False,
            eps_abs=1e-7, eps_rel=1e-7, polishing=True, max_iter=20000, polish_refine_iter=5)
    res = m.solve(raise_error=False)
    native = res.info.status_val
    S = osqp.SolverStatus
    status = {S.OSQP_SOLVED: Status.OPTIMAL, S.OSQP_SOLVED_INACCURATE: Status.INACCURATE,
              S.OSQP_PRIMAL_INFEASIBLE: Status.INFEASIBLE,
              S.OSQP_PRIMAL_INFEASIBLE_INACCURATE: Status.INFEASIBLE,
              S.OSQP_DUAL_INFEASIBLE: Status.UNBOUNDED,
              S.OSQP_DUAL_INFEASIBLE_INACCURATE: Status.UNBOUNDED,
              S.OSQP_MAX_ITER_REACHED: Status.ITERATION_LIMIT,
              S.OSQP_TIME_LIMIT_REACHED: Status.ITERATION_LIMIT}.get(native, Status.ERROR)
    x = np.asarray(res.x) if status in (Status.OPTIMAL, Status.INACCURATE) else None
    return Solution(x, status, qp.objective(x) if x is not None else float("nan"),
                    int(res.info.iter), time.perf_counter() - t0, "osqp",
                    f"{res.info.status}; polish {'ok' if res.info.status_polish == 1 else 'no'}")


#: ``clarabel_linear_solver`` picks the supernodal factorization for problems of at least this
#: many variables with at least this many variables per block (``QP.blocks``), or, when the
#: blocks are not known, this many constraint entries per variable.
_FAER_MIN_VARIABLES, _FAER_MIN_BLOCK, _FAER_MIN_DENSITY = 10_000, 1_000, 6.1
_FAER_MIN_P_DENSITY = 6.0      # P's entries per variable: dense blocks in the objective


def clarabel_linear_solver(qp: QP) -> str:
    """The KKT factorization Clarabel should use for ``qp``: ``"faer"`` or ``"qdldl"``.

    Clarabel 0.11's default is faer (supernodal). On TopDown's nodes, one thread, same
    iterations (`benchmarks/bench_clarabel_kkt.py`), what decides is the size of the dense
    blocks the factorization builds, and a child's marginal queries make its variables one
    such block: faer wins where the children are large and few, qdldl (simplicial) elsewhere.
    Since TopDown's fit counts groups of cells through their sums (``node.py``), the children's
    variables per child separate them better than the constraint entries per variable did
    (the sums took those from 6.2–7.6 to 3–4.8 on county nodes), and TopDown's node problems
    say how many children they have (``QP.blocks``). Per problem, with the sums (one thread;
    ``bench_clarabel_kkt.py --per-problem``, ``benchmarks/pl94/clarabel_kkt_problems_10m.md``):
    the nation's state node at 10M persons (51 states, 1,400 variables and auxiliaries per
    state) 14.0 s with faer against 62.8 with qdldl; the largest county node at 100M (77
    counties, 1,143 per county) 16.8 s against 52.4; every county → tract node at 10M (at
    most 606 per tract) and most state → county nodes under 1,000 per county were faster or as
    fast with qdldl (up to 3.6×). So faer at ≥ 10,000 variables and ≥ 1,000 variables per block;
    without ``blocks``, at ≥ 10,000 variables and ≥ 6.1 entries per variable (the rule before
    the sums); qdldl otherwise. And faer wherever ``P`` itself has dense blocks: ≥ 10,000
    variables and ≥ 6 entries of ``P`` per variable. BlueDown's race queries put a dense block
    per child and race into ``P`` (``postproc.methods.topdown.whiten.cell_blocks``); its
    nation → states node, 51 children of 419 variables at 1M persons (6.95 entries of ``P``
    per variable) and of 885 at 10M (14.3), took 2.7 s and 11.1 s with faer against 3.7 s and
    52.5 s with qdldl, while its county → tract nodes (4.3–4.8 entries of ``P`` per variable,
    ≤ 288 variables per tract) took 1.1–2.0× longer with faer. TopDown's ``P`` is diagonal
    but for substituted auxiliaries (at most 4.35 entries per variable on its 1M nodes), so
    this rule leaves its choices as they were.

    Examples
    --------
    >>> import numpy as np, scipy.sparse as sp
    >>> def problem(n, per_variable, blocks=None):   # each entry in a row of its own
    ...     m = int(per_variable * n)
    ...     A = sp.csc_matrix((np.ones(m), (np.arange(m), np.arange(m) % n)), shape=(m, n))
    ...     return QP(sp.identity(n, format="csc"), np.zeros(n), A, np.zeros(m), np.ones(m),
    ...               blocks=blocks)
    >>> clarabel_linear_solver(problem(71_408, 4.7, blocks=51))      # the nation's states
    'faer'
    >>> clarabel_linear_solver(problem(143_285, 3.4, blocks=258))    # a county's tracts
    'qdldl'
    >>> clarabel_linear_solver(problem(23_117, 6.5)), clarabel_linear_solver(problem(130_494, 5.7))
    ('faer', 'qdldl')
    >>> clarabel_linear_solver(problem(8_000, 7.0))     # small: qdldl
    'qdldl'
    >>> dense = problem(45_170, 3.3, blocks=51)     # BlueDown's states: blocks of 32 in P
    >>> clarabel_linear_solver(dense)
    'qdldl'
    >>> blocks = sp.block_diag([np.ones((32, 32))] * (45_170 // 32) + [np.eye(45_170 % 32)])
    >>> clarabel_linear_solver(QP(blocks.tocsc(), dense.q, dense.A, dense.l, dense.u, blocks=51))
    'faer'
    """
    if dense_objective(qp.n, qp.P.nnz):
        return "faer"
    if qp.blocks:
        return "faer" if large_blocks(qp.n, qp.blocks) else "qdldl"
    if qp.n < _FAER_MIN_VARIABLES:
        return "qdldl"
    return "faer" if qp.A.nnz >= _FAER_MIN_DENSITY * qp.n else "qdldl"


def dense_objective(n: int, p_entries: int) -> bool:
    """Whether a problem of ``n`` variables whose ``P`` has ``p_entries`` entries (both
    triangles) is one Clarabel factors with faer for ``P``'s dense blocks
    (:func:`clarabel_linear_solver`): at least 10,000 variables and 6 entries per variable.

    Examples
    --------
    >>> dense_objective(45_170, 646_523), dense_objective(45_170, 150_000)
    (True, False)
    >>> dense_objective(900, 9_000)         # small
    False
    """
    return n >= _FAER_MIN_VARIABLES and p_entries >= _FAER_MIN_P_DENSITY * n


def large_blocks(n: int, blocks: int) -> bool:
    """Whether a problem of ``n`` variables in ``blocks`` blocks is one Clarabel factors with
    faer (:func:`clarabel_linear_solver`): at least 10,000 variables, 1,000 per block.

    Examples
    --------
    >>> large_blocks(71_408, 51), large_blocks(143_285, 258), large_blocks(9_000, 1)
    (True, False, False)
    """
    return n >= _FAER_MIN_VARIABLES and n >= _FAER_MIN_BLOCK * blocks


def _clarabel_units(b: np.ndarray) -> list[float]:
    """The units (persons per variable, powers of ten) in which :func:`_clarabel` solves again
    a problem it called infeasible, finest first: from the one that brings the largest finite
    bound of ``b`` under 10⁷ (at least 10) to the one that brings it to at most 10⁴.

    Examples
    --------
    >>> _clarabel_units(np.array([8_160_383.1, -3.0])), _clarabel_units(np.array([9_999.0]))
    ([10.0, 100.0, 1000.0], [])
    >>> _clarabel_units(np.array([152_305_629.0]))
    [100.0, 1000.0, 10000.0, 100000.0]
    """
    finite = np.abs(b[np.isfinite(b)])
    largest = float(finite.max()) if finite.size else 0.0
    if largest <= 1e4:
        return []
    coarsest = math.ceil(math.log10(largest / 1e4))
    finest = max(1, math.ceil(math.log10(largest / 1e7)))
    return [10.0 ** k for k in range(min(finest, coarsest), coarsest + 1)]


#: A point Clarabel solved in coarser units is taken when no row is broken by more than this
#: (relative to ``max(1, |bound|)``); otherwise the next unit is tried.
_UNIT_ROWS_KEPT = 1e-5


#: Clarabel's "infeasible" within this many iterations is checked again with
#: :data:`_MORE_EQUILIBRATION` iterations of equilibration (:func:`_clarabel`).
_EARLY_INFEASIBLE = 2
_MORE_EQUILIBRATION = 50


def _clarabel(qp: QP) -> Solution:
    import clarabel

    t0 = time.perf_counter()
    eq = np.isfinite(qp.l) & (qp.l == qp.u)
    up = np.isfinite(qp.u) & ~eq
    lo = np.isfinite(qp.l) & ~eq
    # rows A[eq] = l, then A[up] ≤ u, then −A[lo] ≤ −l: one row permutation and a sign per
    # row (three slices and a vstack cost 1 ms per block-group node)
    order = np.concatenate([np.flatnonzero(eq), np.flatnonzero(up), np.flatnonzero(lo)])
    M = sp.csr_matrix(qp.A)[order]
    if lo.any():
        M.data[M.indptr[M.shape[0] - int(lo.sum())]:] *= -1.0
    M = M.tocsc()
    b = np.concatenate([qp.l[eq], qp.u[up], -qp.l[lo]])
    cones = []
    if eq.any():
        cones.append(clarabel.ZeroConeT(int(eq.sum())))
    if up.any() or lo.any():
        cones.append(clarabel.NonnegativeConeT(int(up.sum() + lo.sum())))
    P = sp.csc_matrix(qp.P)
    column = np.repeat(np.arange(P.shape[1]), np.diff(P.indptr))
    upper = P.indices <= column
    if not P.has_canonical_format:
        P = sp.triu(P, format="csc")     # Clarabel reads the upper triangle
    elif not upper.all():                # the same, without scipy's COO round trip
        P = sp.csc_matrix((P.data[upper], P.indices[upper], np.concatenate(
            [[0], np.cumsum(np.bincount(column[upper], minlength=P.shape[1]))])),
            shape=P.shape)

    def run(tol: float, ktratio: float, refine: bool = True, unit: float = 1.0,
            equilibrate: int | None = None):
        # unit: solve for x / unit (unit persons per variable), the rows' bounds divided by it;
        # equilibrate: Ruiz equilibration's iterations (Clarabel's default 10)
        settings = clarabel.DefaultSettings()
        if equilibrate is not None:
            settings.equilibrate_max_iter = equilibrate
        settings.iterative_refinement_enable = refine
        settings.verbose = False
        settings.direct_solve_method = clarabel_linear_solver(qp)
        # one thread: our executors parallelize over processes (a worker's second thread only
        # contends), and the same arithmetic on every machine keeps runs reproducible
        settings.max_threads = 1
        settings.tol_gap_abs = settings.tol_gap_rel = settings.tol_feas = tol
        settings.tol_ktratio = ktratio
        if unit == 1.0:
            return clarabel.DefaultSolver(P, qp.q, M, b, cones, settings).solve()
        return clarabel.DefaultSolver(P * unit ** 2, qp.q * unit, M, b / unit, cones,
                                      settings).solve()

    S = clarabel.SolverStatus
    # Without iterative refinement first: on TopDown's nodes (10M persons) the same optima
    # (objectives within 3e-11 relative, fits within 2e-4 persons, residuals within the
    # tolerances) in 17 % less CPU per block node, 9 % per county → tract node
    # (`benchmarks/pl94/node_refinement_10m.md`); a problem it does not solve is solved
    # again with refinement, Clarabel's default.
    res, res_unit = run(1e-10, 1e-8, refine=False), 1.0
    iterations, steps = int(res.iterations), [f"{res.status} at 1e-10 unrefined"]
    if str(res.status) != str(S.Solved):
        res = run(1e-10, 1e-8)
        iterations += int(res.iterations)
        steps.append(f"{res.status} at 1e-10")
    infeasible = str(res.status) in (str(S.PrimalInfeasible), str(S.AlmostPrimalInfeasible))
    if infeasible and int(res.iterations) <= _EARLY_INFEASIBLE:
        # Called infeasible at once, from a certificate of the first iterates: with bounds of
        # millions (a BlueDown state → county node at 331M persons: California, 58 counties,
        # bounds to 1.2e7) that certificate can be spurious. More equilibration scales the
        # rows first: the node was then solved in persons (29 iterations, every row met to
        # 2e-9), where solving in thousands of persons (below) left the nonnegativity bounds
        # 2e-4 persons off and the fit was refused. A truly infeasible node is called so again.
        again = run(1e-10, 1e-8, refine=False, equilibrate=_MORE_EQUILIBRATION)
        iterations += int(again.iterations)
        steps.append(f"{again.status} at 1e-10 equilibrated {_MORE_EQUILIBRATION} times")
        if str(again.status) == str(S.Solved):
            res, infeasible = again, False
    # Bounds of millions over variables most of which the objective does not weigh (a
    # state → county totals pass at 331M persons: California, 39.5M persons, bounds up to
    # 8.2M) can make Clarabel declare a feasible problem infeasible after one iteration
    # (HiGHS found a feasible point; OSQP, ECOS and SCS failed). In thousands of persons it
    # was solved (28 more iterations, every row met to 3e-9 relative). Too coarse a unit
    # fails the other way: the nation → 88 state pieces totals pass of the 331M synthetic
    # NMF (bounds to 1.5e8) was AlmostSolved in units of 1e5 and its point broke a row by 4 %
    # of its bound, where in hundreds of persons it was solved to 7e-9 (23 iterations). So
    # the units are tried from the finest that brings every bound under 1e7 persons, and
    # the first whose point keeps every row is taken.
    for unit in (_clarabel_units(b) if infeasible else ()):   # no scan of b on solved nodes
        again = run(1e-10, 1e-8, unit=unit)
        iterations += int(again.iterations)
        steps.append(f"{again.status} at 1e-10 in units of {unit:g}")
        if str(again.status) == str(S.AlmostSolved):
            again = run(1e-8, 1e-8, unit=unit)
            iterations += int(again.iterations)
            steps.append(f"{again.status} at 1e-8 in units of {unit:g}")
        if str(again.status) == str(S.Solved) and \
                qp.max_relative_violation(np.asarray(again.x) * unit) <= _UNIT_ROWS_KEPT:
            res, res_unit = again, unit
            break
    if str(res.status) == str(S.AlmostSolved):
        # 1e-10 is tighter than Clarabel's defaults; a problem whose optimum is not unique
        # (a pass fitting 20 county totals over 12,809 cells, at 100M persons) can stall just
        # short of it. Clarabel's own tolerances (1e-8) then solve it in a few iterations —
        # the totals agreed to 2e-10 persons — where OSQP took 4,600 iterations.
        again = run(1e-8, 1e-8, unit=res_unit)
        iterations += int(again.iterations)
        steps.append(f"{again.status} at 1e-8")
        if str(again.status) == str(S.Solved):
            res = again
    message = str(res.status) if len(steps) == 1 else ", ".join(steps)
    status = {str(S.Solved): Status.OPTIMAL, str(S.AlmostSolved): Status.INACCURATE,
              str(S.PrimalInfeasible): Status.INFEASIBLE,
              str(S.AlmostPrimalInfeasible): Status.INFEASIBLE,
              str(S.DualInfeasible): Status.UNBOUNDED,
              str(S.AlmostDualInfeasible): Status.UNBOUNDED,
              str(S.MaxIterations): Status.ITERATION_LIMIT,
              str(S.MaxTime): Status.ITERATION_LIMIT}.get(str(res.status), Status.ERROR)
    x = np.asarray(res.x) * res_unit if status in (Status.OPTIMAL, Status.INACCURATE) else None
    return Solution(x, status, qp.objective(x) if x is not None else float("nan"),
                    iterations, time.perf_counter() - t0, "clarabel", message)


def _cvxpy(name: str) -> Callable[[QP], Solution]:
    def solve(qp: QP) -> Solution:
        import cvxpy as cp

        t0 = time.perf_counter()
        x = cp.Variable(qp.n)
        P = sp.csc_matrix(qp.P)
        d = P.diagonal()
        if (P - sp.diags(d)).count_nonzero() == 0:
            # Diagonal P (our fits): complete the square, ½ d (x − c)² with c = −q/d, so the
            # objective is near 0 at the optimum instead of −Σ w y² (≈ −1e8 on state counts).
            # With the expanded form ECOS's relative gap test failed ("numerical problems") on
            # state-scale nodes and on unbounded problems; the constant is restored by
            # qp.objective below.
            pos = d > 0
            c = np.zeros(qp.n)
            c[pos] = -qp.q[pos] / d[pos]
            objective = 0.5 * cp.sum(cp.multiply(d[pos], cp.square(x[pos] - c[pos]))) \
                if pos.any() else cp.Constant(0.0)
            if (~pos).any():
                objective = objective + qp.q[~pos] @ x[~pos]
        else:
            objective = 0.5 * cp.quad_form(x, cp.psd_wrap(P)) + qp.q @ x
        A = sp.csr_matrix(qp.A)
        eq = np.isfinite(qp.l) & (qp.l == qp.u)
        lo = np.isfinite(qp.l) & ~eq
        hi = np.isfinite(qp.u) & ~eq
        cons = []
        if eq.any():
            cons.append(A[eq] @ x == qp.l[eq])
        if lo.any():
            cons.append(A[lo] @ x >= qp.l[lo])
        if hi.any():
            cons.append(A[hi] @ x <= qp.u[hi])
        prob = cp.Problem(cp.Minimize(objective), cons)
        opts = {"OSQP": dict(eps_abs=1e-7, eps_rel=1e-7, polishing=True, max_iter=50000),
                "ECOS": dict(abstol=1e-8, reltol=1e-8, feastol=1e-8, max_iters=500),
                "SCS": dict(eps_abs=1e-7, eps_rel=1e-7, max_iters=100000),
                "CLARABEL": dict(tol_gap_abs=1e-8, tol_gap_rel=1e-8, tol_feas=1e-8)}[name]
        try:
            prob.solve(solver=name, verbose=False, **opts)
        except cp.error.SolverError as exc:
            return Solution(None, Status.ERROR, seconds=time.perf_counter() - t0,
                            backend=f"cvxpy-{name.lower()}", message=str(exc))
        status = {cp.OPTIMAL: Status.OPTIMAL, cp.OPTIMAL_INACCURATE: Status.INACCURATE,
                  cp.INFEASIBLE: Status.INFEASIBLE, cp.INFEASIBLE_INACCURATE: Status.INFEASIBLE,
                  cp.UNBOUNDED: Status.UNBOUNDED, cp.UNBOUNDED_INACCURATE: Status.UNBOUNDED,
                  cp.USER_LIMIT: Status.ITERATION_LIMIT}.get(prob.status, Status.ERROR)
        xv = np.asarray(x.value) if x.value is not None and status in (
            Status.OPTIMAL, Status.INACCURATE) else None
        iters = prob.solver_stats.num_iters if prob.solver_stats else 0
        return Solution(xv, status, qp.objective(xv) if xv is not None else float("nan"),
                        int(iters or 0), time.perf_counter() - t0, f"cvxpy-{name.lower()}",
                        str(prob.status))
    return solve


#: Name → solve function, in default preference order.
QP_BACKENDS: dict[str, Callable[[QP], Solution]] = {
    "clarabel": _clarabel,
    "osqp": _osqp,
    "cvxpy-clarabel": _cvxpy("CLARABEL"),
    "cvxpy-osqp": _cvxpy("OSQP"),
    "cvxpy-ecos": _cvxpy("ECOS"),
    "cvxpy-scs": _cvxpy("SCS"),
}

#: The chain tried by default: on failure the next backend is tried and the switch recorded.
DEFAULT_QP_CHAIN = ("clarabel", "osqp", "cvxpy-ecos", "cvxpy-scs")


def available_qp_backends() -> list[str]:
    """Backends whose solver package is installed, in the preference order of ``QP_BACKENDS``.

    Examples
    --------
    Every solver is a dependency of the toolkit, so a full install lists them all:

    >>> available_qp_backends()
    ['clarabel', 'osqp', 'cvxpy-clarabel', 'cvxpy-osqp', 'cvxpy-ecos', 'cvxpy-scs']
    """
    import importlib.util

    needs = {"osqp": "osqp", "clarabel": "clarabel", "cvxpy-clarabel": "clarabel",
             "cvxpy-osqp": "osqp", "cvxpy-ecos": "ecos", "cvxpy-scs": "scs"}
    return [name for name in QP_BACKENDS
            if importlib.util.find_spec(needs[name]) is not None
            and (not name.startswith("cvxpy") or importlib.util.find_spec("cvxpy") is not None)]


def check_chain(chain: Sequence[str] | str) -> tuple[str, ...]:
    """Validate a backend chain (a name or a list of names).

    Parameters
    ----------
    chain : str or sequence of str
        Backend names from ``QP_BACKENDS``, tried in this order.

    Returns
    -------
    tuple of str
        The chain as a tuple.

    Raises
    ------
    PostprocError
        The chain is empty, names an unknown backend or one whose package is not installed.

    Examples
    --------
    >>> check_chain("osqp")
    ('osqp',)
    >>> check_chain(["clarabel", "cvxpy-scs"])
    ('clarabel', 'cvxpy-scs')
    >>> check_chain(["gurobi"])
    Traceback (most recent call last):
    ...
    postproc.errors.PostprocError: unknown solver(s) ['gurobi']; choose from ['clarabel', 'osqp',
    'cvxpy-clarabel', 'cvxpy-osqp', 'cvxpy-ecos', 'cvxpy-scs']
    """
    chain = (chain,) if isinstance(chain, str) else tuple(chain)
    if not chain:
        raise PostprocError("the solver chain is empty; name at least one of "
                            f"{list(QP_BACKENDS)}")
    unknown = [c for c in chain if c not in QP_BACKENDS]
    if unknown:
        raise PostprocError(f"unknown solver(s) {unknown}; choose from {list(QP_BACKENDS)}")
    missing = [c for c in chain if c not in available_qp_backends()]
    if missing:
        raise PostprocError(f"solver(s) {missing} are not installed; installed: "
                            f"{available_qp_backends()}")
    return chain


def solve_qp(qp: QP, chain: Sequence[str] = DEFAULT_QP_CHAIN, *,
             feasibility_tol: float = 1e-5, confirm_infeasible: int = 2) -> Solution:
    """Solve with the first backend of ``chain`` that returns an optimum.

    A backend's answer is accepted when its status is OPTIMAL and the point violates no row by
    more than ``feasibility_tol × max(1, |bound|)``; otherwise it counts as inaccurate and the
    next backend is tried. Every attempt is recorded in ``Solution.attempts``. When the
    backends tried so far all say the problem is infeasible, and there are
    ``confirm_infeasible`` of them (or the chain has no more), the last solution (status
    INFEASIBLE) is returned for the caller's failsafe: two independent certificates suffice,
    and the rest of the chain is not run (SCS took 38 s to reach the same verdict on a
    49-state node). Any other mix of failures raises.

    Parameters
    ----------
    qp : QP
        The problem.
    chain : sequence of str
        Backend names (see :func:`check_chain`), tried in order.
    feasibility_tol : float
        Largest accepted relative violation of a row.
    confirm_infeasible : int
        How many backends must agree that the problem is infeasible (the first ones tried,
        with no other failure among them) before the chain stops; default 2.

    Returns
    -------
    Solution

    Raises
    ------
    SolverError
        No backend produced an optimum and the ones tried did not all report infeasibility.

    Examples
    --------
    ``minimize (x0 − 1)² + (x1 − 2)² − 5  subject to  x0 + x1 = 1``:

    >>> import numpy as np, scipy.sparse as sp
    >>> from postproc.infra.solvers import QP
    >>> qp = QP(P=sp.csc_matrix(np.eye(2) * 2), q=np.array([-2.0, -4.0]),
    ...         A=sp.csc_matrix(np.ones((1, 2))), l=np.array([1.0]), u=np.array([1.0]))
    >>> sol = solve_qp(qp)
    >>> sol.status.value, np.round(sol.x, 6).tolist(), round(sol.objective, 6), sol.attempts
    ('optimal', [0.0, 1.0], -3.0, (('clarabel', 'optimal'),))

    An infeasible problem (``x ≥ 1`` and ``x ≤ 0``) returns no point, for the caller's failsafe:

    >>> bad = QP(P=sp.csc_matrix(np.eye(1)), q=np.zeros(1), A=sp.csc_matrix(np.ones((2, 1))),
    ...          l=np.array([1.0, -np.inf]), u=np.array([np.inf, 0.0]))
    >>> sol = solve_qp(bad, ["clarabel", "osqp"])
    >>> sol.status.value, sol.x, sol.attempts
    ('infeasible', None, (('clarabel', 'infeasible'), ('osqp', 'infeasible')))
    """
    if qp.n == 0:
        return _no_variables(qp.l, qp.u, qp.r)
    if isinstance(confirm_infeasible, bool) or not isinstance(confirm_infeasible, int) \
            or confirm_infeasible < 1:
        raise PostprocError(f"confirm_infeasible must be a positive integer, not "
                            f"{confirm_infeasible!r}")
    attempts: list[tuple[str, str]] = []
    last: Solution | None = None
    for name in chain:
        try:
            sol = QP_BACKENDS[name](qp)
        except Exception as exc:  # a crashing backend must not stop the chain
            sol = Solution(None, Status.ERROR, backend=name, message=f"{type(exc).__name__}: "
                                                                     f"{exc}")
        if sol.status.ok and sol.x is not None and \
                qp.max_relative_violation(sol.x) > feasibility_tol:
            sol = Solution(sol.x, Status.INACCURATE, sol.objective, sol.iterations, sol.seconds,
                           sol.backend, f"{sol.message}; relative constraint violation "
                                        f"{qp.max_relative_violation(sol.x):.2e}")
        attempts.append((name, sol.status.value))
        last = sol
        if sol.status.ok:
            return Solution(sol.x, sol.status, sol.objective, sol.iterations, sol.seconds,
                            sol.backend, sol.message, tuple(attempts))
        if len(attempts) >= confirm_infeasible and \
                all(s == Status.INFEASIBLE.value for _, s in attempts):
            break
    assert last is not None
    if all(s == Status.INFEASIBLE.value for _, s in attempts):
        return Solution(None, Status.INFEASIBLE, backend=last.backend,
                        message=last.message, attempts=tuple(attempts))
    raise SolverError("every solver failed: " + "; ".join(f"{n}: {s}" for n, s in attempts)
                      + ". Try another chain (e.g. --solver clarabel cvxpy-ecos)")


def _no_variables(l: np.ndarray, u: np.ndarray, constant: float) -> Solution:
    """A problem without variables (e.g. a node whose parent is all zeros): every row is 0, so
    it is feasible iff ``l ≤ 0 ≤ u``. No backend is called — OSQP rejects n = 0 and HiGHS
    (through scipy's milp) raises ValueError."""
    if np.all(l <= 0) and np.all(u >= 0):
        return Solution(np.zeros(0), Status.OPTIMAL, float(constant), backend="empty",
                        attempts=(("empty", Status.OPTIMAL.value),))
    return Solution(None, Status.INFEASIBLE, backend="empty",
                    message="no variables and a row that needs a nonzero value",
                    attempts=(("empty", Status.INFEASIBLE.value),))


@functools.cache
def _quiet_highs() -> type:
    """``highspy.Highs`` with its console log off before it can print anything.

    HiGHS prints a banner ("Running HiGHS …", a THIRD_PARTY_NOTICES line) on the first call of a
    process that finds ``output_flag`` still on — and ``highspy.Highs()`` makes such a call
    (``enableCallbacks``) inside its constructor, before an option can be set.
    """
    import highspy

    class QuietHighs(highspy.Highs):
        def enableCallbacks(self):  # noqa: N802  (highspy's name)
            self.setOptionValue("output_flag", False)
            return super().enableCallbacks()

    return QuietHighs


def solve_lp(lp: LP, *, time_limit: float | None = None, presolve: bool = False) -> Solution:
    """Solve an LP or MILP with HiGHS, called directly through ``highspy``.

    (scipy's ``milp`` wraps the same solver but spent ~4 ms of Python per call on the rounding
    LPs of a TopDown level, twice HiGHS's own time.) An LP is solved without HiGHS's presolve
    unless ``presolve``: on TopDown's rounding LPs presolving cost more than it saved (at 10M
    persons 2.8× at the block level, 1.7× at the block groups, 2.3× on county → tract nodes;
    3.8× on a 232-tract county at 100M; same optima, `benchmarks/bench_rounding_lp.py`); a
    MILP is always presolved.

    Parameters
    ----------
    lp : LP
        The problem; variables flagged in ``lp.integer`` must take integer values.
    time_limit : float, optional
        Seconds HiGHS may spend (status ITERATION_LIMIT when exceeded).
    presolve : bool
        Presolve an LP (a MILP always is).

    Returns
    -------
    Solution
        ``backend`` is ``highs-lp`` or ``highs-milp``; ``x`` is None unless the status is optimal.

    Examples
    --------
    ``maximize x0 + 2 x1  subject to  x0 + x1 ≤ 3.5,  0 ≤ x ≤ 10``, continuous then integer:

    >>> import numpy as np, scipy.sparse as sp
    >>> from postproc.infra.solvers import LP
    >>> lp = LP(c=np.array([-1.0, -2.0]), A=sp.csr_matrix(np.ones((1, 2))),
    ...         l=np.array([-np.inf]), u=np.array([3.5]), lb=np.zeros(2), ub=np.full(2, 10.0))
    >>> sol = solve_lp(lp)
    >>> sol.status.value, sol.backend, sol.x.tolist(), sol.objective
    ('optimal', 'highs-lp', [0.0, 3.5], -7.0)
    >>> import dataclasses
    >>> sol = solve_lp(dataclasses.replace(lp, integer=np.array([True, True])))
    >>> sol.backend, np.rint(sol.x).astype(int).tolist(), sol.objective
    ('highs-milp', [0, 3], -6.0)
    """
    import highspy

    if lp.c.size == 0:
        return _no_variables(lp.l, lp.u, 0.0)
    t0 = time.perf_counter()
    h = _quiet_highs()()
    h.setOptionValue("output_flag", False)  # no log, whatever the constructor does
    if time_limit:
        h.setOptionValue("time_limit", float(time_limit))
    n = int(lp.c.size)
    A = sp.csc_matrix(lp.A)
    integer = lp.integer is not None and bool(np.any(lp.integer))
    kinds = np.zeros(n, np.int32)
    if integer:
        kinds[np.asarray(lp.integer, dtype=bool)] = int(highspy.HighsVarType.kInteger)
    elif not presolve:
        h.setOptionValue("presolve", "off")
    # the arrays passed as they are (a HighsLp filled field by field cost 2 ms per
    # block-group rounding LP, close to HiGHS's own time)
    passed = h.passModel(n, int(A.shape[0]), int(A.nnz), int(highspy.MatrixFormat.kColwise),
                         int(highspy.ObjSense.kMinimize), 0.0,
                         *(np.asarray(v, dtype=np.float64) for v in (lp.c, lp.lb, lp.ub, lp.l,
                                                                      lp.u)),
                         A.indptr.astype(np.int32), A.indices.astype(np.int32),
                         A.data.astype(np.float64), kinds)
    if passed == highspy.HighsStatus.kError:
        return Solution(None, Status.ERROR, seconds=time.perf_counter() - t0,
                        backend=f"highs-{'milp' if integer else 'lp'}",
                        message="HiGHS refused the model")
    h.run()
    native = h.getModelStatus()
    M = highspy.HighsModelStatus
    status = {M.kOptimal: Status.OPTIMAL, M.kInfeasible: Status.INFEASIBLE,
              M.kUnbounded: Status.UNBOUNDED, M.kUnboundedOrInfeasible: Status.INFEASIBLE,
              M.kTimeLimit: Status.ITERATION_LIMIT, M.kIterationLimit: Status.ITERATION_LIMIT,
              }.get(native, Status.ERROR)
    x = np.asarray(h.getSolution().col_value) if status.ok else None
    objective = float(h.getInfo().objective_function_value) if x is not None else float("nan")
    return Solution(x, status, objective, 0, time.perf_counter() - t0,
                    f"highs-{'milp' if integer else 'lp'}", str(native))
