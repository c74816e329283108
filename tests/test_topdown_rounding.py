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
from postproc.methods.topdown.node import NodeTask, QueryData, solve_node

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
    assert achieved <= optimum + 1e-5, (achieved, optimum)   # X* within 1e-7 of an integer counts as it
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
    noisy = measure(truth, e2e_workload(E2E_1940), Budget.e2e(1, levels), rng=4,
                    publish={"tot": levels[:2], "gqhh": levels[-1:]})
    spec = Spec.e2e(levels)
    result = topdown(noisy, spec, round_passes=[["total"], ["hhgq", "marginal(hhgq, hispanic)"]])
    stats = result.node_stats
    assert (stats.loc[stats.rounding != "copy", "round_passes"] == 3).all()
    assert result.provenance["solver"]["round_passes"] == [["total"],
                                                           ["hhgq", "marginal(hhgq, hispanic)"]]
    with pytest.raises(PostprocError,
                       match="'marginal\\(colour\\)': not in the workload .* and not an expression"):
        topdown(noisy, spec, round_passes={"county": [["marginal(colour)"]]})
