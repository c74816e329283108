"""Solver regression catalogue: small QPs with known optima run through every installed backend,
the fallback chain, HiGHS LP/MILP, and the TopDown node fit against the generic CVXPY path.

Every optimum below is derived by hand (or, for the one non-diagonal case, by solving its KKT
system with numpy after checking that no inequality is active) — never by a backend. The
objective of every fit is ``Σ w (x − y)²`` written as ``½ xᵀPx + qᵀx + r`` with ``P = 2 diag(w)``,
``q = −2 w y`` and ``r = Σ w y²``.

Tolerances (relative to ``max(1, ‖x*‖∞)`` for points and ``max(1, |f*|)`` for objectives) are
per backend, from how each method stops (settings in :mod:`postproc.infra.solvers.backends`), with
the worst error measured on this catalogue in brackets:

* clarabel (interior point, gap 1e-10): points 1e-7 [1e-11], objectives 1e-8 [3.4e-9];
* osqp, cvxpy-osqp (ADMM, then *polishing* — an exact solve on the detected active set):
  points 1e-6 [2e-9], objectives 1e-7 [1.9e-8, when polishing gives up on the large case];
* cvxpy-clarabel (interior point, gap 1e-8): points 1e-6 [1e-8], objectives 1e-7 [6e-9];
* cvxpy-ecos: **points 1e-3 [5.5e-4], objectives 1e-4 [1.2e-5]**. ECOS is an
  interior-point method on the SOCP (epigraph) form CVXPY gives a QP; its gap tolerance (1e-8)
  bounds the *objective*, and in a quadratic bowl an objective error δ moves the point by
  ~√δ ≈ 1e-4. The worst case is the non-diagonal P (written with ``quad_form``), which TopDown
  never produces (its fits are diagonal); diagonal cases stay below 2e-5.
* cvxpy-scs: **points 1e-5 [1e-7], objectives 1e-6**. SCS is a first-order (ADMM) method on the
  conic form with no polishing step; it stops when residuals are small *relative to the norms
  of the problem data* (eps 1e-7), so how close the point is to the optimum depends on the
  conditioning of each problem, not on eps alone. On this catalogue it was as accurate as the
  others; the looser bound is the headroom we give a method whose accuracy we cannot tie to
  its tolerance. (In the regression catalogue, ECOS — not SCS — is the least accurate.)

Degenerate optima — an active bound whose multiplier is 0 (``root_identity``: a noisy count of
exactly 0, common in TopDown) — are approached by interior-point methods at the rate √gap, so
for those cases every interior-point backend is held to 1e-4 on the point (measured: clarabel
5.5e-6, cvxpy-clarabel 3.2e-6, ECOS 1.5e-6); the objective error, quadratic in the point
error, stays within the usual bound.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest
import scipy.sparse as sp

from postproc.errors import PostprocError
from postproc.infra.solvers import (
    DEFAULT_QP_CHAIN,
    LP,
    QP,
    QP_BACKENDS,
    InfeasibleError,
    Solution,
    SolverError,
    Status,
    available_qp_backends,
    check_chain,
    solve_lp,
    solve_qp,
)

INF = np.inf
BACKENDS = available_qp_backends()

#: (point, objective, point on degenerate optima), relative; see the module docstring.
TOLERANCE = {"clarabel": (1e-7, 1e-8, 1e-4), "osqp": (1e-6, 1e-7, 1e-6),
             "cvxpy-clarabel": (1e-6, 1e-7, 1e-4), "cvxpy-osqp": (1e-6, 1e-7, 1e-6),
             "cvxpy-ecos": (1e-3, 1e-4, 1e-3), "cvxpy-scs": (1e-5, 1e-6, 1e-5)}


def test_every_registered_backend_has_a_tolerance_and_all_are_installed():
    assert set(TOLERANCE) == set(QP_BACKENDS)
    # the project depends on every solver package, so all must be usable here
    assert BACKENDS == list(QP_BACKENDS)
    assert set(DEFAULT_QP_CHAIN) <= set(QP_BACKENDS)


# ---------------------------------------------------------------------------------------------
# the catalogue
# ---------------------------------------------------------------------------------------------


@dataclass
class Case:
    name: str
    qp: QP
    status: Status
    x: np.ndarray | None = None
    f: float | None = None
    degenerate: bool = False      # an active bound with a zero multiplier


def fit_qp(y, w, rows=(), extra_P=None):
    """``Σ w (x − y)²`` subject to ``rows`` = [(coefficients, lower, upper), ...] and x ≥ 0."""
    y = np.asarray(y, float).ravel()
    w = np.asarray(w, float).ravel() * np.ones_like(y)
    n = y.size
    P = sp.diags(2 * w).tocsc()
    if extra_P is not None:
        P = (P + sp.csc_matrix(extra_P)).tocsc()
    A = [np.asarray(a, float).reshape(1, n) for a, _, _ in rows] + [np.eye(n)]
    l = [lo for _, lo, _ in rows] + [0.0] * n
    u = [hi for _, _, hi in rows] + [INF] * n
    return QP(P, -2 * w * y, sp.csc_matrix(np.vstack(A)), np.array(l, float),
              np.array(u, float), float(np.sum(w * y * y)))


def parent_rows(k, n, parent):
    """Σ_k x_{k,j} = parent_j for x flattened child-major (child 0's cells, then child 1's…)."""
    rows = []
    for j in range(n):
        a = np.zeros(k * n)
        a[j::n] = 1
        rows.append((a, parent[j], parent[j]))
    return rows


def sel(n, idx):
    a = np.zeros(n)
    a[list(idx)] = 1
    return a


def weighted_split(y, w, parent):
    """Closed form when nonnegativity is slack: x_k = y_k + w_k⁻¹/Σ_j w_j⁻¹ · (p − Σ_j y_j),
    per cell; objective Σ_cells (p − Σy)² / Σ_k w_k⁻¹."""
    y, w, parent = (np.asarray(v, float) for v in (y, w, parent))
    inv = 1 / w
    gap = parent - y.sum(axis=0)
    x = y + inv / inv.sum(axis=0) * gap
    return x, float(np.sum(gap ** 2 / inv.sum(axis=0)))


def catalogue() -> list[Case]:
    cases = []
    # 1. three children, two cells, unequal weights; nonnegativity slack -> closed form
    y = np.array([[10, 4], [7, 9], [3, 6]])
    w = np.array([[1, 2], [0.5, 1], [4, 0.25]])
    p = np.array([25, 15])
    x, f = weighted_split(y, w, p)
    assert (x > 0.5).all()
    cases.append(Case("weighted_split", fit_qp(y, w, parent_rows(3, 2, p)), Status.OPTIMAL,
                      x.ravel(), f))
    # 2. the same at state scale (counts ~ 1e5): relative accuracy
    y = np.array([[52_000, 1_300], [48_250, 2_050], [61_700, 990], [39_020, 1_770]])
    w = np.array([[1 / 22.5, 1 / 3.1], [1 / 22.5, 1 / 3.1], [1 / 40.0, 1 / 9.0],
                  [1 / 40.0, 1 / 9.0]])
    p = np.array([200_321, 6_001])
    x, f = weighted_split(y, w, p)
    cases.append(Case("weighted_split_large", fit_qp(y, w, parent_rows(4, 2, p)),
                      Status.OPTIMAL, x.ravel(), f))
    # 3. root: nothing but x >= 0 and nonnegative data -> x = y, objective 0
    y = np.array([3.0, 0.0, 7.5, 1.25])
    cases.append(Case("root_identity", fit_qp(y, [1, 2, 3, 4]), Status.OPTIMAL, y, 0.0,
                      degenerate=True))
    # 4. nonnegativity binds: y = (-5, 4), x0 + x1 = 2 -> (0, 2), f = 25 + 4
    cases.append(Case("nonneg_binds", fit_qp([-5, 4], 1, [([1, 1], 2, 2)]), Status.OPTIMAL,
                      np.array([0, 2.0]), 29.0))
    # 5. weighted, nonnegativity binds on one child: y = (-6, 1, 2), w = (1, 1, 2), sum 4.
    #    x0 = 0; the rest split the gap 1 by inverse weights (2/3, 1/3). KKT: the multiplier of
    #    x0 >= 0 is 2·6 − 2·(2/3) > 0.
    cases.append(Case("nonneg_binds_weighted", fit_qp([-6, 1, 2], [1, 1, 2], [([1, 1, 1], 4, 4)]),
                      Status.OPTIMAL, np.array([0, 1 + 2 / 3, 2 + 1 / 3]), 36 + 2 / 3))
    # 6. an upper bound on the total binds: y = (1, 2, 3), sum <= 4 -> y − 2/3
    cases.append(Case("total_ub_binds", fit_qp([1, 2, 3], 1, [([1, 1, 1], -INF, 4)]),
                      Status.OPTIMAL, np.array([1, 4, 7]) / 3, 4 / 3))
    # 7. an invariant total: sum = 9 -> y + 1
    cases.append(Case("total_equality", fit_qp([1, 2, 3], 1, [([1, 1, 1], 9, 9)]),
                      Status.OPTIMAL, np.array([2.0, 3, 4]), 3.0))
    # 8. hhgq lower bounds bind: type A {0,1} >= 10 with y (2, 3) -> (4.5, 5.5);
    #    type B {2,3} >= 8 with y (-4, 5) -> (0, 8) (multiplier of x2 >= 0 is 8 − 6 = 2 > 0)
    cases.append(Case("hhgq_lb_binds", fit_qp([2, 3, -4, 5], 1, [(sel(4, [0, 1]), 10, INF),
                                                               (sel(4, [2, 3]), 8, INF)]),
                      Status.OPTIMAL, np.array([4.5, 5.5, 0, 8]), 12.5 + 25))
    # 9. hhgq upper bounds bind: {0,1} <= 3 with y (3, 4) -> (1, 2); {2,3} <= 0 (no unit of the
    #    type) -> (0, 0)
    cases.append(Case("hhgq_ub_binds", fit_qp([3, 4, 2, 1], 1, [(sel(4, [0, 1]), -INF, 3),
                                                              (sel(4, [2, 3]), -INF, 0)]),
                      Status.OPTIMAL, np.array([1, 2, 0, 0.0]), 8 + 5))
    # 10. a zero cell (x0 == 0) and an invariant total 10: the others split the gap 5
    cases.append(Case("zero_cell_and_total", fit_qp([5, 2, 3], 1, [(sel(3, [0]), 0, 0),
                                                                  ([1, 1, 1], 10, 10)]),
                      Status.OPTIMAL, np.array([0, 4.5, 5.5]), 25 + 12.5))
    # 11. two-sided rows (lower < upper both finite): 5 <= x0 + x1 <= 7
    cases.append(Case("range_lower_binds", fit_qp([1, 1], 1, [([1, 1], 5, 7)]), Status.OPTIMAL,
                      np.array([2.5, 2.5]), 4.5))
    cases.append(Case("range_upper_binds", fit_qp([4, 4], 1, [([1, 1], 5, 7)]), Status.OPTIMAL,
                      np.array([3.5, 3.5]), 0.5))
    cases.append(Case("range_slack", fit_qp([3, 3], 1, [([1, 1], 5, 7)]), Status.OPTIMAL,
                      np.array([3.0, 3.0]), 0.0))
    # 12. a non-diagonal P: detailed cells plus a total query answered with weight w_t:
    #     Σ (x − y)² + w_t (1ᵀx − t)², with a parent-like equality x0 + x1 = 6. No inequality is
    #     active (checked), so the optimum solves the KKT system [P Aᵀ; A 0].
    y = np.array([2.0, 3.0, 4.0, 1.0])
    t, w_t = 12.0, 3.0
    ones = np.ones((4, 4))
    qp = fit_qp(y, 1, [(sel(4, [0, 1]), 6, 6)], extra_P=2 * w_t * ones)
    qp = QP(qp.P, qp.q - 2 * w_t * t * np.ones(4), qp.A, qp.l, qp.u, qp.r + w_t * t * t)
    a = sel(4, [0, 1])[None, :]
    kkt = np.block([[qp.P.toarray(), a.T], [a, np.zeros((1, 1))]])
    sol = np.linalg.solve(kkt, np.r_[-qp.q, 6.0])
    x = sol[:4]
    assert (x > 0.1).all()
    f = float(np.sum((x - y) ** 2) + w_t * (x.sum() - t) ** 2)
    cases.append(Case("nondiagonal_kkt", qp, Status.OPTIMAL, x, f))
    # 13. infeasible: x0 + x1 = 5 with x0 >= 3 and x1 >= 3
    cases.append(Case("infeasible", fit_qp([1, 1], 1, [([1, 1], 5, 5), (sel(2, [0]), 3, INF),
                                                       (sel(2, [1]), 3, INF)]),
                      Status.INFEASIBLE))
    # 14. infeasible by nonnegativity alone: x >= 0 and sum = -1
    cases.append(Case("infeasible_negative_total", fit_qp([1, 1], 1, [([1, 1], -1, -1)]),
                      Status.INFEASIBLE))
    # 15. unbounded: min x0² − x1 over x >= 0
    cases.append(Case("unbounded", QP(sp.diags([2.0, 0.0]).tocsc(), np.array([0.0, -1.0]),
                                      sp.identity(2, format="csc"), np.zeros(2),
                                      np.full(2, INF)), Status.UNBOUNDED))
    return cases


CASES = catalogue()


def test_catalogue_optima_are_feasible_and_kkt_optimal():
    """The hand-derived optima satisfy their constraints and first-order conditions: the
    gradient P x + q is a nonnegative combination of active constraint normals (checked by
    nonnegative least squares)."""
    from scipy.optimize import nnls

    for case in CASES:
        if case.x is None:
            continue
        qp, x = case.qp, case.x
        assert qp.max_violation(x) < 1e-9, case.name
        # (rel 1e-9: the constant r ~ 1e8 of the large case cancels in floating point)
        assert qp.objective(x) == pytest.approx(case.f, rel=1e-9, abs=1e-9), case.name
        grad = qp.P @ x + qp.q
        A = qp.A.toarray()
        ax = A @ x
        scale = max(1.0, np.abs(x).max())
        normals = []
        for i in range(A.shape[0]):          # normals pointing into the feasible side
            if abs(ax[i] - qp.l[i]) < 1e-9 * scale:
                normals.append(A[i])
            if abs(ax[i] - qp.u[i]) < 1e-9 * scale:
                normals.append(-A[i])
        N = np.array(normals).T if normals else np.zeros((x.size, 0))
        if N.shape[1]:
            _, resid = nnls(N, grad)
        else:
            resid = np.linalg.norm(grad)
        assert resid < 1e-7 * max(1.0, np.linalg.norm(grad)), case.name


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
@pytest.mark.parametrize("backend", BACKENDS)
def test_backend_on_catalogue(backend, case):
    sol = QP_BACKENDS[backend](case.qp)
    assert isinstance(sol, Solution) and sol.backend == backend
    assert sol.status == case.status, (sol.status, sol.message)
    if case.status != Status.OPTIMAL:
        assert sol.x is None and np.isnan(sol.objective)
        return
    x_tol, f_tol, degenerate_tol = TOLERANCE[backend]
    if case.degenerate:
        x_tol = degenerate_tol
    scale = max(1.0, float(np.abs(case.x).max()))
    np.testing.assert_allclose(sol.x, case.x, rtol=0, atol=x_tol * scale)
    assert abs(sol.objective - case.f) <= f_tol * max(1.0, abs(case.f)), (sol.objective, case.f)
    assert sol.objective == pytest.approx(case.qp.objective(sol.x), rel=1e-12, abs=1e-12)
    assert case.qp.max_violation(sol.x) <= x_tol * scale
    assert sol.seconds >= 0


@pytest.mark.parametrize("case", [c for c in CASES if c.status == Status.OPTIMAL],
                         ids=lambda c: c.name)
def test_solve_qp_default_chain_reaches_every_optimum_first_try(case):
    sol = solve_qp(case.qp)
    assert sol.status == Status.OPTIMAL
    assert sol.attempts == ((DEFAULT_QP_CHAIN[0], "optimal"),)
    x_tol = TOLERANCE[DEFAULT_QP_CHAIN[0]][2 if case.degenerate else 0]
    np.testing.assert_allclose(sol.x, case.x, atol=x_tol * max(1.0, np.abs(case.x).max()))


# ---------------------------------------------------------------------------------------------
# the chain: fallback, attempts, infeasibility and failure
# ---------------------------------------------------------------------------------------------


def crashing(qp):
    raise RuntimeError("segfault simulated")


def erroring(qp):
    return Solution(None, Status.ERROR, backend="erroring", message="license expired")


def iteration_limit(qp):
    return Solution(None, Status.ITERATION_LIMIT, backend="slow")


def says_optimal_but_infeasible(qp):
    x = np.full(qp.n, -1.0)              # breaks x >= 0 by 1
    return Solution(x, Status.OPTIMAL, qp.objective(x), backend="liar")


def says_infeasible(qp):
    return Solution(None, Status.INFEASIBLE, backend="pessimist")


@pytest.fixture
def registry(monkeypatch):
    fakes = {"crashing": crashing, "erroring": erroring, "iteration_limit": iteration_limit,
             "liar": says_optimal_but_infeasible, "pessimist": says_infeasible}
    for name, fn in fakes.items():
        monkeypatch.setitem(QP_BACKENDS, name, fn)
    return fakes


def case(name):
    return next(c for c in CASES if c.name == name)


def test_chain_falls_back_and_records_every_attempt(registry):
    c = case("hhgq_lb_binds")
    sol = solve_qp(c.qp, ["crashing", "erroring", "iteration_limit", "liar", "osqp",
                          "clarabel"])
    assert sol.status == Status.OPTIMAL and sol.backend == "osqp"
    assert sol.attempts == (("crashing", "error"), ("erroring", "error"),
                            ("iteration_limit", "iteration_limit"),
                            ("liar", "optimal_inaccurate"), ("osqp", "optimal"))
    np.testing.assert_allclose(sol.x, c.x, atol=1e-5 * 10)


def test_a_point_that_breaks_constraints_is_not_accepted(registry):
    c = case("total_equality")
    sol = solve_qp(c.qp, ["liar", "clarabel"])
    assert sol.attempts[0] == ("liar", "optimal_inaccurate")
    assert sol.backend == "clarabel"
    with pytest.raises(SolverError, match="liar: optimal_inaccurate"):
        solve_qp(c.qp, ["liar"])


def test_infeasible_everywhere_is_returned_for_the_failsafe(registry):
    c = case("infeasible")
    sol = solve_qp(c.qp, ["pessimist", "clarabel", "osqp"], confirm_infeasible=3)
    assert sol.status == Status.INFEASIBLE and sol.x is None
    assert sol.attempts == (("pessimist", "infeasible"), ("clarabel", "infeasible"),
                            ("osqp", "infeasible"))


def test_two_agreeing_certificates_of_infeasibility_end_the_chain(registry, monkeypatch):
    """By default the chain stops once the first two backends both say infeasible: the slow
    tail (SCS took 38 s on a 49-state node) is not run. A backend that fails otherwise among
    the first ones does not count: the chain goes on, and a mix still raises."""
    c = case("infeasible")
    called = []

    def spy(qp):
        called.append("spy")
        return says_infeasible(qp)

    monkeypatch.setitem(QP_BACKENDS, "spy", spy)
    sol = solve_qp(c.qp, ["clarabel", "osqp", "spy"])
    assert sol.status == Status.INFEASIBLE and sol.x is None and called == []
    assert sol.attempts == (("clarabel", "infeasible"), ("osqp", "infeasible"))
    sol = solve_qp(c.qp, ["clarabel"])                      # a chain of one: its verdict
    assert sol.status == Status.INFEASIBLE and sol.attempts == (("clarabel", "infeasible"),)
    with pytest.raises(SolverError, match="crashing: error; osqp: infeasible; spy: infeasible"):
        solve_qp(c.qp, ["crashing", "osqp", "spy"])
    assert called == ["spy"]
    # a point found after one infeasible verdict is still taken
    ok = case("hhgq_lb_binds")
    sol = solve_qp(ok.qp, ["pessimist", "clarabel", "spy"])
    assert sol.status == Status.OPTIMAL and sol.backend == "clarabel"
    for bad in (0, -1, 1.5, True):
        with pytest.raises(PostprocError, match="confirm_infeasible must be a positive integer"):
            solve_qp(c.qp, ["clarabel"], confirm_infeasible=bad)


def test_mixed_failures_raise_listing_attempts(registry):
    c = case("infeasible")
    with pytest.raises(SolverError) as info:
        solve_qp(c.qp, ["crashing", "clarabel"])
    msg = str(info.value)
    assert "crashing: error" in msg and "clarabel: infeasible" in msg and "Try another" in msg
    with pytest.raises(SolverError, match="clarabel: unbounded; osqp: unbounded"):
        solve_qp(case("unbounded").qp, ["clarabel", "osqp"])


def test_check_chain():
    assert check_chain("osqp") == ("osqp",)
    assert check_chain(["clarabel", "cvxpy-scs"]) == ("clarabel", "cvxpy-scs")
    with pytest.raises(PostprocError, match="empty"):
        check_chain([])
    with pytest.raises(PostprocError, match=r"unknown solver\(s\) \['gurobi'\]"):
        check_chain(["clarabel", "gurobi"])


def test_qp_validates_shapes():
    with pytest.raises(PostprocError, match="shapes disagree"):
        QP(sp.identity(2, format="csc"), np.zeros(3), sp.identity(2, format="csc"), np.zeros(2),
           np.zeros(2))
    with pytest.raises(PostprocError, match="one entry per row"):
        QP(sp.identity(2, format="csc"), np.zeros(2), sp.identity(2, format="csc"), np.zeros(1),
           np.zeros(2))


# ---------------------------------------------------------------------------------------------
# HiGHS: LP and MILP
# ---------------------------------------------------------------------------------------------


def lp(c, A, l, u, lb=None, ub=None, integer=None):
    c = np.asarray(c, float)
    return LP(c, sp.csr_matrix(np.asarray(A, float)), np.asarray(l, float), np.asarray(u, float),
              np.zeros(c.size) if lb is None else np.asarray(lb, float),
              np.full(c.size, INF) if ub is None else np.asarray(ub, float),
              None if integer is None else np.asarray(integer))


def test_lp_known_optimum():
    # max x0 + 2 x1 s.t. x0 + x1 <= 4, x0 + 3 x1 <= 6, x >= 0 -> vertex (3, 1), value 5
    sol = solve_lp(lp([-1, -2], [[1, 1], [1, 3]], [-INF, -INF], [4, 6]))
    assert sol.status == Status.OPTIMAL and sol.backend == "highs-lp"
    np.testing.assert_allclose(sol.x, [3, 1], atol=1e-9)
    assert sol.objective == pytest.approx(-5)


def test_milp_differs_from_its_relaxation():
    # max 5 x0 + 4 x1 s.t. 6 x0 + 4 x1 <= 24, x0 + 2 x1 <= 6: LP (3, 1.5) = 21;
    # integers: (4, 0) = 20 (also feasible: (3, 1) = 19, (2, 2) = 18)
    A, l, u = [[6, 4], [1, 2]], [-INF, -INF], [24, 6]
    relaxed = solve_lp(lp([-5, -4], A, l, u))
    np.testing.assert_allclose(relaxed.x, [3, 1.5], atol=1e-9)
    assert relaxed.objective == pytest.approx(-21)
    sol = solve_lp(lp([-5, -4], A, l, u, integer=[1, 1]))
    assert sol.status == Status.OPTIMAL and sol.backend == "highs-milp"
    np.testing.assert_array_equal(np.round(sol.x), [4, 0])
    assert sol.objective == pytest.approx(-20)
    # integer=zeros is an LP
    assert solve_lp(lp([-5, -4], A, l, u, integer=[0, 0])).backend == "highs-lp"


def test_rounding_lp_on_a_tu_matrix_has_an_integral_vertex():
    # a 2 × 3 transportation problem (totally unimodular): rows 5 and 4, columns 3, 3, 3
    A = [[1, 1, 1, 0, 0, 0], [0, 0, 0, 1, 1, 1], [1, 0, 0, 1, 0, 0], [0, 1, 0, 0, 1, 0],
         [0, 0, 1, 0, 0, 1]]
    b = [5, 4, 3, 3, 3]
    sol = solve_lp(lp([0.3, -0.2, 0.7, -0.5, 0.1, 0.4], A, b, b, ub=np.full(6, 3)))
    assert sol.status == Status.OPTIMAL
    np.testing.assert_array_equal(sol.x, np.round(sol.x))


def test_lp_infeasible_and_unbounded_statuses():
    assert solve_lp(lp([1, 1], [[1, 1]], [3], [2])).status == Status.INFEASIBLE
    assert solve_lp(lp([1, 1], [[1, 1]], [-INF], [-1])).status == Status.INFEASIBLE  # x >= 0
    sol = solve_lp(lp([-1, -1], [[1, 0]], [-INF], [1]))
    assert sol.status == Status.UNBOUNDED and sol.x is None
    sol = solve_lp(lp([1, 1], [[1, 1]], [2.5], [2.5], ub=[1, 1], integer=[1, 1]))
    assert sol.status == Status.INFEASIBLE
    # an LP without constraint rows
    sol = solve_lp(LP(np.array([1.0, -1.0]), sp.csr_matrix((0, 2)), np.zeros(0), np.zeros(0),
                      np.zeros(2), np.array([5.0, 2.0])))
    np.testing.assert_allclose(sol.x, [0, 2])


# ---------------------------------------------------------------------------------------------
# node level: the engine's fit against the generic CVXPY path
# ---------------------------------------------------------------------------------------------


def random_task(rng, *, root=False):
    """A random small NodeTask that is feasible by construction: bounds are drawn around a
    nonnegative integer ``truth`` whose cell sums are the parent."""
    from postproc.methods.topdown.node import NodeTask, QueryData

    k = 1 if root else int(rng.integers(2, 5))
    n = int(rng.integers(3, 9))
    truth = rng.integers(0, 6, (k, n)) * (rng.random((k, n)) < 0.7)
    zero = (truth == 0) & (rng.random((k, n)) < 0.4)
    groups = rng.integers(0, 3, n)
    rows = [np.ones(n, np.int64)] + [(groups == g).astype(np.int64) for g in range(3)
                                     if (groups == g).any()]
    rows.append((rng.random(n) < 0.5).astype(np.int64))          # a crossing row
    C = sp.csr_matrix(np.array(rows, np.int64))
    vals = (C @ truth.T).T.astype(float)
    lower = np.where(rng.random(vals.shape) < 0.5, vals - rng.integers(0, 3, vals.shape), -INF)
    upper = np.where(rng.random(vals.shape) < 0.5, vals + rng.integers(0, 3, vals.shape), INF)
    eq = rng.random(vals.shape) < 0.15
    lower[eq], upper[eq] = vals[eq], vals[eq]
    detailed = sp.identity(n, format="csr")
    marg = sp.csr_matrix(np.array([(groups == g) for g in range(3)], float))
    tot = sp.csr_matrix(np.ones((1, n)))
    queries = []
    for name, m in (("detailed", detailed), ("groups", marg), ("total", tot)):
        if name != "detailed" and rng.random() < 0.3:
            continue
        exact = (m @ truth.T).T
        values = exact + rng.normal(0, 2, exact.shape).round()
        weights = np.broadcast_to(rng.choice([0.05, 0.5, 2.0]), exact.shape).copy()
        queries.append(QueryData(name, m.tocsr(), values, weights))
    return NodeTask("lv", "P", None if root else truth.sum(0).astype(np.int64),
                    np.array([f"c{i}" for i in range(k)]), tuple(queries), C, lower, upper,
                    zero, tuple(f"row{r}" for r in range(C.shape[0])))


@pytest.mark.parametrize("seed", range(12))
def test_engine_fit_matches_generic_path(seed):
    """The engine (reduced variables, auxiliary query variables, scaled weights, Clarabel called
    directly) and the generic path (one CVXPY problem over every cell) solve the same problem:
    objectives agree to 1e-6 relative, and — the objective being strictly convex in x because
    every cell is measured — the points agree too."""
    from postproc.methods.topdown.fit import Fit
    from postproc.methods.topdown.generic import fit_node_generic
    from postproc.methods.topdown.node import solve_node

    rng = np.random.default_rng(seed)
    task = random_task(rng, root=seed % 4 == 0)
    x_gen, f_gen, _ = fit_node_generic(task)
    result = solve_node(task, keep_continuous=True, failsafe=False)
    f_eng = result.stats["objective"]
    assert abs(f_eng - f_gen) <= 1e-6 * max(1.0, abs(f_gen)), (f_eng, f_gen)
    np.testing.assert_allclose(result.continuous, x_gen, atol=1e-4 * max(1.0, x_gen.max()))
    # Fit.build + solve_qp directly: the same objective once scaled back
    fit = Fit.build(task)
    qp = fit.qp
    sol = solve_qp(qp)
    assert abs(fit.objective(sol) - f_gen) <= 1e-6 * max(1.0, abs(f_gen))
    np.testing.assert_allclose(fit.histograms(sol.x), x_gen, atol=1e-4 * max(1.0, x_gen.max()))
    assert fit.variables == int((~task.zero & (
        True if task.parent_hist is None else task.parent_hist[None, :] > 0)).sum())
    # and every backend of the chain agrees on this node (SCS within its looser tolerance)
    for backend in ("osqp", "cvxpy-ecos", "cvxpy-scs"):
        other = solve_qp(qp, [backend])
        f_tol = TOLERANCE[backend][1]
        assert abs(fit.objective(other) - f_gen) <= max(1e-6, 10 * f_tol) * max(
            1.0, abs(f_gen)), backend


def test_node_fallback_is_recorded_in_node_stats(registry):
    from postproc.methods.topdown.node import solve_node

    task = random_task(np.random.default_rng(3))
    result = solve_node(task, chain=("crashing", "clarabel"))
    assert result.stats["backend"] == "clarabel"
    assert result.stats["attempts"] == "crashing:error;clarabel:optimal"


def test_node_solver_failure_is_an_error_not_a_failsafe(registry):
    from postproc.methods.topdown.node import solve_node

    task = random_task(np.random.default_rng(4))
    with pytest.raises(SolverError, match="every solver failed"):
        solve_node(task, chain=("crashing", "erroring"))
    assert issubclass(InfeasibleError, PostprocError)


def test_problems_without_variables():
    """A node whose parent is all zeros has no variables: both solvers answer directly (OSQP
    rejects n = 0 and scipy's milp raises ValueError), feasible iff every row allows 0."""
    empty = sp.csc_matrix((2, 0))
    sol = solve_qp(QP(sp.csc_matrix((0, 0)), np.zeros(0), empty, np.array([-1.0, 0.0]),
                      np.array([0.0, INF]), 3.5), ["osqp"])
    assert sol.status == Status.OPTIMAL and sol.x.shape == (0,) and sol.objective == 3.5
    sol = solve_qp(QP(sp.csc_matrix((0, 0)), np.zeros(0), empty, np.array([1.0, 0.0]),
                      np.array([2.0, INF])))
    assert sol.status == Status.INFEASIBLE and sol.x is None
    sol = solve_lp(LP(np.zeros(0), sp.csr_matrix((1, 0)), np.array([0.0]), np.array([0.0]),
                      np.zeros(0), np.zeros(0)))
    assert sol.status == Status.OPTIMAL and sol.x.shape == (0,)
    sol = solve_lp(LP(np.zeros(0), sp.csr_matrix((1, 0)), np.array([-INF]), np.array([-1.0]),
                      np.zeros(0), np.zeros(0)))
    assert sol.status == Status.INFEASIBLE


def test_node_with_an_all_zero_parent():
    from postproc.methods.topdown.node import NodeTask, QueryData, solve_node

    task = NodeTask("county", "P", np.zeros(2, np.int64), np.array(["a", "b"], dtype=object),
                    (QueryData("detailed", sp.identity(2, format="csr"),
                               np.array([[1.0, 0.0], [2.0, 1.0]]), np.ones((2, 2))),),
                    sp.csr_matrix(np.ones((1, 2), np.int64)), np.zeros((2, 1)),
                    np.full((2, 1), INF), np.zeros((2, 2), bool), ("total_ge_households",))
    result = solve_node(task)
    np.testing.assert_array_equal(result.histograms, 0)
    assert result.stats["objective"] == pytest.approx(6.0)     # Σ w y² at x = 0


def _recorded_qp(name):
    """A node problem recorded from a real run (``tests/data/<name>``)."""
    from pathlib import Path

    d = np.load(Path(__file__).parent / "data" / name)
    A = sp.csr_matrix((d["A_data"].astype(np.float64), d["A_indices"], d["A_indptr"]),
                      shape=tuple(d["A_shape"]))
    qp = QP(sp.diags(d["P_diag"], format="csc"), d["q"], A.tocsc(), d["l"], d["u"],
            float(d["r"]))
    return qp, int(d["n_x"]), int(d["n_aux"])


def _highs_qp(qp):
    """The QP solved by HiGHS's own QP solver (an active-set method: a reference independent
    of the interior-point backends and of CVXPY)."""
    import highspy

    h = highspy.Highs()
    h.setOptionValue("output_flag", False)
    inf, A = highspy.kHighsInf, sp.csc_matrix(qp.A)
    lp = highspy.HighsLp()
    lp.num_col_, lp.num_row_ = qp.n, A.shape[0]
    lp.col_cost_ = qp.q
    lp.col_lower_, lp.col_upper_ = np.full(qp.n, -inf), np.full(qp.n, inf)
    lp.row_lower_ = np.where(np.isfinite(qp.l), qp.l, -inf)
    lp.row_upper_ = np.where(np.isfinite(qp.u), qp.u, inf)
    lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
    lp.a_matrix_.start_, lp.a_matrix_.index_, lp.a_matrix_.value_ = A.indptr, A.indices, A.data
    h.passModel(lp)
    P = sp.triu(sp.csc_matrix(qp.P), format="csc")
    hessian = highspy.HighsHessian()
    hessian.dim_, hessian.format_ = qp.n, highspy.HessianFormat.kTriangular
    hessian.start_, hessian.index_, hessian.value_ = P.indptr, P.indices, P.data
    h.passHessian(hessian)
    h.run()
    assert h.getModelStatus() == highspy.HighsModelStatus.kOptimal
    return np.array(h.getSolution().col_value)


def test_clarabel_finishes_a_degenerate_pass_at_its_own_tolerances():
    """The total-first pass of one state's county node at 100M persons: 20 county totals
    fitted over 12,809 cells, so the cells' optimum is not unique and the feasible set is thin.
    With iterative refinement Clarabel stalled 'almost solved' at our 1e-10 (its own 1e-8 then
    solved it), OSQP hit its 20,000-iteration limit, ECOS was inaccurate and CVXPY's Clarabel
    path calls it infeasible; without refinement, our first attempt, it is solved at 1e-10.
    Its point is feasible and no worse than HiGHS's active-set QP optimum (whose objective
    here is 3e-4 higher)."""
    qp, n_x, n_aux = _recorded_qp("qp_county_totals_pass.npz")
    sol = solve_qp(qp)
    assert sol.attempts == (("clarabel", "optimal"),)
    assert sol.message == "Solved"
    assert qp.max_relative_violation(sol.x) < 1e-9
    reference = _highs_qp(qp)
    assert qp.max_relative_violation(reference) < 1e-9
    assert sol.objective <= qp.objective(reference) + 1e-9 * abs(sol.objective)


def test_clarabel_falls_back_to_refinement_then_its_own_tolerances(monkeypatch):
    """When the unrefined attempt does not solve a problem, Clarabel solves it again with
    iterative refinement, and at its own 1e-8 when that stalls 'almost solved'. (Clarabel is
    made to stall at 1e-10 here: the recorded problem that did so is now solved unrefined.)
    The answer is the 1e-8 solve's, and the message names every attempt."""
    import clarabel

    real = clarabel.DefaultSolver

    class Stalling:
        def __init__(self, P, q, A, b, cones, settings):
            self.settings, self.solver = settings, real(P, q, A, b, cones, settings)

        def solve(self):
            res = self.solver.solve()
            if self.settings.tol_feas < 1e-9:
                return type("Stalled", (), {"status": clarabel.SolverStatus.AlmostSolved,
                                            "iterations": res.iterations, "x": res.x})()
            return res

    monkeypatch.setattr(clarabel, "DefaultSolver", Stalling)
    qp, x, f = _grouped_split(4, 5, seed=1)
    sol = solve_qp(qp)
    assert sol.status == Status.OPTIMAL
    assert sol.message == ("AlmostSolved at 1e-10 unrefined, AlmostSolved at 1e-10, "
                           "Solved at 1e-8")
    np.testing.assert_allclose(sol.x, x, atol=1e-6)
    assert abs(sol.objective - f) <= 1e-8 * abs(f)


def _grouped_split(k, n, seed):
    """``k`` children × ``n`` cells fitted to noisy counts under their parent's cell totals,
    x ≥ 0 slack: the closed form of :func:`weighted_split`, built sparse (12,000 variables)."""
    rng = np.random.default_rng(seed)
    y = rng.uniform(50, 100, size=(k, n))
    w = rng.uniform(0.5, 2.0, size=(k, n))
    p = np.round(y.sum(axis=0) + rng.normal(0, 5, size=n))
    x, f = weighted_split(y, w, p)
    assert (x > 1).all()
    m = k * n
    coupling = sp.csr_matrix((np.ones(m), (np.arange(m) % n, np.arange(m))), shape=(n, m))
    A = sp.vstack([coupling, sp.identity(m)], format="csc")
    qp = QP(sp.diags(2 * w.ravel(), format="csc"), -2 * (w * y).ravel(), A,
            np.concatenate([p, np.zeros(m)]), np.concatenate([p, np.full(m, INF)]),
            float(np.sum(w * y * y)))
    return qp, x.ravel(), f


@pytest.mark.parametrize("k, n", [(20, 600), (200, 60)])
def test_both_clarabel_factorizations_reach_the_closed_form_optimum(monkeypatch, k, n):
    """Clarabel factorizes with faer (supernodal) or qdldl by the problem's size and density
    (measured in benchmarks/bench_clarabel_kkt.py); each must give the optimum."""
    import postproc.infra.solvers.backends as backends

    qp, x, f = _grouped_split(k, n, seed=k)
    for method in ("qdldl", "faer"):
        monkeypatch.setattr(backends, "clarabel_linear_solver", lambda _qp: method)
        sol = solve_qp(qp, ["clarabel"])
        assert sol.status == Status.OPTIMAL, method
        np.testing.assert_allclose(sol.x, x, atol=1e-6, rtol=0, err_msg=method)
        assert sol.objective == pytest.approx(f, rel=1e-8, abs=1e-6), method


def test_lp_with_and_without_presolve_reaches_the_same_integral_optimum():
    """The rounding LPs skip HiGHS's presolve (benchmarks/bench_rounding_lp.py): on a
    transportation problem like the rounding's (B ∈ [0, 1] per child and cell, the cells' sums
    across children and each child's sum fixed; totally unimodular) both give an integral
    vertex with the same objective."""
    rng = np.random.default_rng(7)
    k, n = 30, 40
    cost = rng.uniform(-1, 1, size=(k, n))
    b = (rng.uniform(size=(k, n)) < 0.4).astype(float)      # a feasible 0/1 point
    m = k * n
    cells = sp.csr_matrix((np.ones(m), (np.arange(m) % n, np.arange(m))), shape=(n, m))
    children = sp.csr_matrix((np.ones(m), (np.arange(m) // n, np.arange(m))), shape=(k, m))
    A = sp.vstack([cells, children], format="csr")
    target = A @ b.ravel()
    lp = LP(cost.ravel(), A, target, target, np.zeros(m), np.ones(m))
    with_presolve = solve_lp(lp, presolve=True)
    without = solve_lp(lp)
    for sol in (with_presolve, without):
        assert sol.status == Status.OPTIMAL
        np.testing.assert_allclose(sol.x, np.round(sol.x), atol=1e-9)
        np.testing.assert_allclose(A @ np.round(sol.x), target)
    assert without.objective == pytest.approx(with_presolve.objective, rel=1e-12, abs=1e-9)
    assert without.objective <= cost.ravel() @ b.ravel() + 1e-9


def test_clarabel_solves_again_in_larger_units_a_large_problem_it_calls_infeasible(monkeypatch):
    """Clarabel called a feasible state → county totals pass at 331M persons (bounds up to
    8.2M persons) primal infeasible after one iteration; ``_clarabel`` then solves it again in
    units of a power of ten persons (bounds at most 10⁴) and scales the point back. Simulated
    here by a Clarabel that calls every problem with a bound above 10⁴ infeasible: the retry's
    point is the optimum, in persons."""
    import types

    import clarabel

    from postproc.infra.solvers.backends import _clarabel

    real, largest = clarabel.DefaultSolver, []

    class CallsLargeProblemsInfeasible:
        def __init__(self, P, q, A, b, cones, settings):
            largest.append(float(np.abs(b).max()))
            self.solver = real(P, q, A, b, cones, settings)

        def solve(self):
            if largest[-1] > 1e4:
                return types.SimpleNamespace(status=clarabel.SolverStatus.PrimalInfeasible,
                                             iterations=1, x=None)
            return self.solver.solve()

    monkeypatch.setattr(clarabel, "DefaultSolver", CallsLargeProblemsInfeasible)
    # min (x0 − 3e6)² + (x1 − 1e6)²  s.t.  x0 + x1 = 5e6, x ≥ 0:  x = (3.5e6, 1.5e6)
    qp = QP(P=sp.csc_matrix(np.eye(2) * 2), q=np.array([-6e6, -2e6]),
            A=sp.csc_matrix(np.array([[1.0, 1.0], [1.0, 0.0], [0.0, 1.0]])),
            l=np.array([5e6, 0.0, 0.0]), u=np.array([5e6, np.inf, np.inf]))
    sol = _clarabel(qp)
    assert sol.status == Status.OPTIMAL and "Solved at 1e-10 in units of 1000" in sol.message
    # unrefined, refined, more equilibrated, then in tens, hundreds and thousands
    assert largest == [5e6, 5e6, 5e6, 5e5, 5e4, 5e3]
    np.testing.assert_allclose(sol.x, [3.5e6, 1.5e6], rtol=1e-9)
    assert sol.objective == pytest.approx(qp.objective(np.array([3.5e6, 1.5e6])), rel=1e-9)
    # a problem that stays infeasible in larger units is still infeasible
    bad = QP(P=sp.csc_matrix(np.eye(1)), q=np.zeros(1), A=sp.csc_matrix(np.ones((2, 1))),
             l=np.array([2e6, -np.inf]), u=np.array([np.inf, 1e6]))
    assert _clarabel(bad).status == Status.INFEASIBLE


def test_clarabel_passes_over_a_unit_whose_point_breaks_a_row(monkeypatch):
    """Too coarse a unit fails the other way: the nation → 88 state pieces totals pass of the
    331M synthetic NMF was AlmostSolved in units of 1e5 and its point broke a row by 4 %. So
    the units are tried finest first and a point that breaks a row is passed over. Simulated
    by a Clarabel that calls the problem in persons infeasible and, in tens of persons, returns
    a point 1 % off: ``_clarabel`` takes the optimum found in hundreds."""
    import types

    import clarabel

    from postproc.infra.solvers.backends import _clarabel

    real, largest = clarabel.DefaultSolver, []

    class OffInTens:
        def __init__(self, P, q, A, b, cones, settings):
            largest.append(float(np.abs(b).max()))
            self.solver = real(P, q, A, b, cones, settings)

        def solve(self):
            if largest[-1] > 1e6:
                return types.SimpleNamespace(status=clarabel.SolverStatus.PrimalInfeasible,
                                             iterations=1, x=None)
            res = self.solver.solve()
            if largest[-1] > 1e5:        # in tens: "solved", but 1 % off every row
                return types.SimpleNamespace(status=res.status, iterations=res.iterations,
                                             x=np.asarray(res.x) * 1.01)
            return res

    monkeypatch.setattr(clarabel, "DefaultSolver", OffInTens)
    qp = QP(P=sp.csc_matrix(np.eye(2) * 2), q=np.array([-6e6, -2e6]),
            A=sp.csc_matrix(np.array([[1.0, 1.0], [1.0, 0.0], [0.0, 1.0]])),
            l=np.array([5e6, 0.0, 0.0]), u=np.array([5e6, np.inf, np.inf]))
    sol = _clarabel(qp)
    assert sol.status == Status.OPTIMAL
    assert "Solved at 1e-10 in units of 10, Solved at 1e-10 in units of 100" in sol.message
    assert largest == [5e6, 5e6, 5e6, 5e5, 5e4]       # thousands never tried
    np.testing.assert_allclose(sol.x, [3.5e6, 1.5e6], rtol=1e-9)
    assert qp.max_relative_violation(sol.x) < 1e-9


def test_clarabel_equilibrates_more_a_problem_it_calls_infeasible_at_once(monkeypatch):
    """Clarabel called a feasible BlueDown state → county node at 331M persons (California,
    bounds to 1.2e7) primal infeasible after one iteration with its default equilibration, and
    solved it in persons with 50 equilibration iterations. Simulated by a Clarabel that calls
    a problem infeasible at once unless it equilibrates that much: ``_clarabel`` solves it in
    persons (no larger units), and a problem infeasible in truth stays infeasible."""
    import types

    import clarabel

    from postproc.infra.solvers.backends import _MORE_EQUILIBRATION, _clarabel

    real, seen = clarabel.DefaultSolver, []

    class NeedsEquilibration:
        def __init__(self, P, q, A, b, cones, settings):
            seen.append(settings.equilibrate_max_iter)
            self.solver = real(P, q, A, b, cones, settings)

        def solve(self):
            if seen[-1] < _MORE_EQUILIBRATION:
                return types.SimpleNamespace(status=clarabel.SolverStatus.PrimalInfeasible,
                                             iterations=1, x=None)
            return self.solver.solve()

    monkeypatch.setattr(clarabel, "DefaultSolver", NeedsEquilibration)
    qp = QP(P=sp.csc_matrix(np.eye(2) * 2), q=np.array([-6e6, -2e6]),
            A=sp.csc_matrix(np.array([[1.0, 1.0], [1.0, 0.0], [0.0, 1.0]])),
            l=np.array([5e6, 0.0, 0.0]), u=np.array([5e6, np.inf, np.inf]))
    sol = _clarabel(qp)
    assert sol.status == Status.OPTIMAL and "equilibrated 50 times" in sol.message
    assert "units of" not in sol.message and len(seen) == 3
    np.testing.assert_allclose(sol.x, [3.5e6, 1.5e6], rtol=1e-9)
    bad = QP(P=sp.csc_matrix(np.eye(1)), q=np.zeros(1), A=sp.csc_matrix(np.ones((2, 1))),
             l=np.array([2e6, -np.inf]), u=np.array([np.inf, 1e6]))
    assert _clarabel(bad).status == Status.INFEASIBLE
