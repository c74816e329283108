"""Multipass rounding (the 2020 production rounder): each pass rounds so that its queries'
answers are as close (L1) to the fit's as the constraints allow, then holds them exactly.

The engine writes ``|a·B − f|`` as three segment columns so that the rounding LP keeps the
totally unimodular structure of per-cell and per-child (laminar) rows and its vertex is integral.
The tests check that claim against an independent formulation — the same pass as a MILP with
``|a·B − f| ≤ t`` rows, solved by SciPy's HiGHS MILP — and that the LP is integral where the
structure says it must be.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.optimize import Bounds, LinearConstraint, milp

from postproc.errors import PostprocError
from postproc.methods.topdown.node import NodeTask, QueryData, solve_node, verify_node

INF = np.inf


def laminar_task(rng) -> NodeTask:
    """K children × n cells with cells in 3 groups; noisy detailed, group and total queries;
    per-child bounds on the group sums around a feasible integer truth (laminar rows)."""
    k, n = int(rng.integers(2, 7)), int(rng.integers(4, 12))
    truth = rng.integers(0, 7, (k, n)) * (rng.random((k, n)) < 0.75)
    groups = np.sort(rng.integers(0, 3, n))
    g_rows = np.array([(groups == g) for g in range(3) if (groups == g).any()], np.int64)
    C = sp.csr_matrix(g_rows)
    vals = (C @ truth.T).T.astype(float)
    lower = np.where(rng.random(vals.shape) < 0.4, vals - rng.integers(0, 2, vals.shape), -INF)
    upper = np.where(rng.random(vals.shape) < 0.4, vals + rng.integers(0, 2, vals.shape), INF)
    queries = []
    for name, m in (("detailed", sp.identity(n, format="csr")),
                    ("groups", sp.csr_matrix(g_rows.astype(float))),
                    ("total", sp.csr_matrix(np.ones((1, n))))):
        exact = (m @ truth.T).T
        queries.append(QueryData(name, m, exact + rng.normal(0, 3, exact.shape),
                                 np.full(exact.shape, rng.choice([0.1, 1.0, 4.0]))))
    return NodeTask("lv", "P", truth.sum(0).astype(np.int64),
                    np.array([f"c{i}" for i in range(k)]), tuple(queries), C, lower, upper,
                    np.zeros((k, n), bool), tuple(f"g{r}" for r in range(C.shape[0])))


def pass_one_optimum(task: NodeTask, x_star: np.ndarray, matrix: sp.csr_matrix) -> float:
    """min Σ_children Σ_answers |a·X − a·X*| over integer X with ⌊X*⌋ ≤ X ≤ ⌊X*⌋ + 1, the
    parent's cell sums and the children's rows — as a MILP with |·| ≤ t rows."""
    k, n = x_star.shape
    floor = np.floor(x_star + 1e-7)
    target = (matrix @ x_star.T).T.ravel()
    m = target.size
    per_child = sp.kron(sp.identity(k), matrix)                 # answers × (k·n)
    rows_c = sp.kron(sp.identity(k), task.matrix)
    parent = sp.kron(np.ones((1, k)), sp.identity(n))
    A = sp.vstack([sp.hstack([per_child, -sp.identity(m)]), sp.hstack([per_child, sp.identity(m)]),
                   sp.hstack([parent, sp.csr_matrix((n, m))]),
                   sp.hstack([rows_c, sp.csr_matrix((rows_c.shape[0], m))])]).tocsr()
    lo = np.concatenate([np.full(m, -INF), target, task.parent_hist, task.lower.ravel()])
    hi = np.concatenate([target, np.full(m, INF), task.parent_hist, task.upper.ravel()])
    c = np.concatenate([np.zeros(k * n), np.ones(m)])
    lb = np.concatenate([floor.ravel(), np.zeros(m)])
    ub = np.concatenate([floor.ravel() + 1, np.full(m, INF)])
    res = milp(c, constraints=LinearConstraint(A, lo, hi), bounds=Bounds(lb, ub),
               integrality=np.concatenate([np.ones(k * n), np.zeros(m)]))
    assert res.success, res.message
    return float(res.fun)


@pytest.mark.parametrize("seed", range(30))
def test_first_pass_is_as_close_as_the_milp_allows_and_the_lp_is_integral(seed):
    rng = np.random.default_rng(seed)
    task = laminar_task(rng)
    first = rng.choice(["total", "groups"])
    order = (("total",), ("groups",)) if first == "total" else (("groups",), ("total",))
    matrices = {q.name: q.matrix for q in task.queries}
    multi = replace(task, round_passes=tuple(tuple((q, matrices[q]) for q in p) for p in order))
    result = solve_node(multi, keep_continuous=True, failsafe=False)    # verified inside
    x_star = result.continuous
    m = matrices[first]
    achieved = float(np.abs((m @ result.histograms.T) - (m @ x_star.T)).sum())
    optimum = pass_one_optimum(task, x_star, m)
    # X* within 1e-7 of an integer counts as it
    assert achieved <= optimum + 1e-5, (achieved, optimum)
    assert result.stats["rounding"] == "lp"          # the laminar structure: integral vertex
    # the cells-only rounder does no better on the first pass's answers
    plain = solve_node(task, failsafe=False).histograms
    assert achieved <= float(np.abs((m @ plain.T) - (m @ x_star.T)).sum()) + 1e-6


def test_totals_first_puts_every_child_within_one_of_its_fitted_total():
    """With no child rows to stop it, rounding the totals first leaves each child's total at
    ⌊T*⌋ or ⌈T*⌉ — the cells-only rounder does not (it is what made TopDown's tract totals
    worse than the raw measurements)."""
    worst_plain = 0.0
    for seed in range(20):
        task = replace(laminar_task(np.random.default_rng(100 + seed)),
                       matrix=sp.csr_matrix((0, 1), dtype=np.int64))
        n = task.n
        task = replace(task, matrix=sp.csr_matrix((0, n), dtype=np.int64),
                       lower=np.zeros((task.k, 0)), upper=np.zeros((task.k, 0)), labels=())
        total = next(q.matrix for q in task.queries if q.name == "total")
        multi = replace(task, round_passes=((("total", total),),))
        result = solve_node(multi, keep_continuous=True, failsafe=False)
        fitted = result.continuous.sum(axis=1)
        assert (np.abs(result.histograms.sum(axis=1) - fitted) < 1).all(), seed
        plain = solve_node(task, failsafe=False).histograms
        worst_plain = max(worst_plain, float(np.abs(plain.sum(axis=1) - fitted).max()))
    assert worst_plain >= 1            # the property is not automatic


def test_round_passes_reach_the_nodes_and_bad_names_are_refused():
    from hierarchy.budget import Budget
    from hierarchy.measurement import measure
    from hierarchy.queries import e2e_workload
    from hierarchy.schema import E2E_1940
    from hierarchy.synth import synthesize_1940
    from hierarchy.tabulation import tabulate
    from invariants.spec import Spec
    from postproc.methods.topdown import topdown

    levels = ["nation", "state", "county"]
    data = synthesize_1940(3_000, seed=2)
    truth = tabulate(data.persons, schema=E2E_1940, levels=levels, units=data.units)
    spec = Spec.e2e(levels)
    noisy = measure(truth, e2e_workload(E2E_1940), Budget.e2e(1, levels), rng=4, spec=spec)
    result = topdown(noisy, spec, round_passes=[["total"], ["hhgq", "marginal(hhgq, hispanic)"]])
    stats = result.node_stats
    assert (stats.loc[stats.rounding != "copy", "round_passes"] == 3).all()
    assert result.provenance["solver"]["round_passes"] == [["total"],
                                                           ["hhgq", "marginal(hhgq, hispanic)"]]
    with pytest.raises(PostprocError, match="'marginal\\(colour\\)': not in the workload .* "
                                            "and not an expression"):
        topdown(noisy, spec, round_passes={"county": [["marginal(colour)"]]})


# -- ties on the held answers' bounds -----------------------------------------------------------

def _tied_totals(d: float, held_a: int) -> tuple[NodeTask, np.ndarray, dict]:
    """Three children, two cells: a's total is 500.5 + d (two variables), c's 100.5 − d (one
    variable: its second cell is a zero cell), b's 599; the parent (800, 400). The totals'
    first fit pass held a at ``held_a`` and c at 601 − ``held_a``."""
    total = sp.csr_matrix(np.ones((1, 2)))
    zero = np.zeros((3, 2), bool)
    zero[2, 1] = True
    task = NodeTask("lv", "P", np.array([800, 400]), np.array(["a", "b", "c"], dtype=object),
                    (), sp.csr_matrix((0, 2), dtype=np.int64), np.zeros((3, 0)),
                    np.zeros((3, 0)), zero, (), round_passes=((("total", total),),))
    x_star = np.array([[300.25, 200.25 + d], [399.25 + d, 199.75 - d], [100.5 - d, 0.0]])
    held = {"total": np.array([[held_a], [599.0], [601.0 - held_a]])}
    return task, x_star, held


@pytest.mark.parametrize("held_a", [500, 501])
@pytest.mark.parametrize("d", [-1e-10, 0.0, 1e-10, -3e-6, 3e-6])
def test_a_tie_on_a_held_bound_rounds_toward_the_held_answer(d, held_a):
    """An exact half left by a later fit pass (the earlier pass's integer answer ± the 0.5
    tolerance) rounds toward that answer whatever the fit's last digits: for a total of two
    variables (three segment columns) and of one (a cell's own cost). Without the held
    answers, the sign of the last digits decides."""
    from postproc.methods.topdown.rounding import round_node
    from postproc.methods.topdown.rows import Layout

    task, x_star, held = _tied_totals(d, held_a)
    hist, _ = round_node(task, x_star, Layout.of(task), held=held)
    verify_node(task, hist)
    assert hist.sum(axis=1).tolist() == [held_a, 599, 601 - held_a]
    if d:
        plain, _ = round_node(task, x_star, Layout.of(task))
        assert plain.sum(axis=1)[0] == (501 if d > 0 else 500)


def test_every_backend_rounds_a_multipass_tie_the_same_way():
    """Two children; the totals pass splits the parent's 1,608 into 801 and 807 exactly, the
    cells pass pulls them onto the ±0.5 bounds (801.5, 806.5). Each QP backend ends there with
    its own last digits (SCS just outside, Clarabel just inside); every one rounds back to the
    totals pass's answers, to the same histograms."""
    from postproc.infra.solvers import available_qp_backends

    n = 2
    total, cells = sp.csr_matrix(np.ones((1, n))), sp.identity(n, format="csr")
    results = {}
    for backend in available_qp_backends():
        for shift in (0.0, 3.0, 7.25):
            queries = (QueryData("total", total, np.array([[800.0], [806.0]]), np.ones((2, 1))),
                       QueryData("detailed", cells, np.array([[520.0, 300 + shift],
                                                              [480.0, 300 - shift]]),
                                 np.ones((2, 2))))
            task = NodeTask("lv", "P", np.array([1000, 608]),
                            np.array(["a", "b"], dtype=object), queries,
                            sp.csr_matrix((0, n), dtype=np.int64), np.zeros((2, 0)),
                            np.zeros((2, 0)), np.zeros((2, n), bool), (),
                            passes=(("total",), ("detailed",)),
                            round_passes=((("total", total),),))
            result = solve_node(task, chain=(backend,), keep_continuous=True, failsafe=False)
            np.testing.assert_allclose(result.continuous.sum(axis=1), [801.5, 806.5], atol=1e-4)
            assert result.histograms.sum(axis=1).tolist() == [801, 807], (backend, shift)
            results.setdefault(shift, []).append(result.histograms)
    for shift, hists in results.items():
        assert len(hists) >= 2 and all(np.array_equal(h, hists[0]) for h in hists), shift
