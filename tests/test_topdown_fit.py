"""The fit's problem reductions (postproc.methods.topdown.node): auxiliaries only for answers that
need them, and the 2020-style nodes they were made for solved exactly as the generic path does.

The reductions change the QP, not its optimum: an answer with no variable is a constant, an
answer of one variable goes on that variable's diagonal, and equal answers share one auxiliary.
They are checked two ways — the objective identity for random points (any slip in a weight, a
coefficient or a grouping shows as a difference far above float rounding), and the optimum
against :func:`postproc.methods.topdown.generic.fit_node_generic` (one CVXPY problem over every
cell, no reductions) on PL 94-171 nodes, where a child with adults only has its
hispanic × cenrace and votingage × hispanic × cenrace answers on the same variables.
Group sums (``NodeTask.cell_groups``) are checked the same two ways: the rewritten rows count
the same as the original ones at random points, and the nodes' fits do not move.
"""

from __future__ import annotations

import gc
import weakref
from dataclasses import replace
from types import SimpleNamespace

import numpy as np
import pytest
import scipy.sparse as sp

import postproc.methods.topdown.node as node
from hierarchy.geography import Geography
from hierarchy.measurement import measure
from hierarchy.presets.pl94 import LEVELS, PL94_2020, pl94_budget, pl94_workload
from hierarchy.synth.census2020 import synthesize_2020
from hierarchy.tabulation import tabulate
from invariants.compile import compile_spec
from invariants.spec import Spec
from postproc.errors import PostprocError
from postproc.methods.topdown import fit as fit_module
from postproc.methods.topdown import whiten as whiten_module
from postproc.methods.topdown.fit import Fit
from postproc.methods.topdown.fit import auxiliaries as _auxiliaries
from postproc.methods.topdown.fit import group_sums as _group_sums
from postproc.methods.topdown.fit import sum_rows as _sum_rows
from postproc.methods.topdown.fit import summed as _summed
from postproc.methods.topdown.generic import fit_node_generic
from postproc.methods.topdown.node import solve_node
from postproc.methods.topdown.plan import level_tasks, root_task
from postproc.methods.topdown.rows import Layout
from postproc.methods.topdown.rows import stacked as _stacked
from postproc.methods.topdown.task import NodeTask, QueryData


def _objective(answers, x):
    return sum(float(np.sum(w * (sp.csr_matrix((v, (r, c)), shape=(size, x.size)) @ x - y) ** 2))
               for r, c, v, w, y, size in answers)


@pytest.mark.parametrize("seed", range(20))
def test_auxiliaries_keep_the_objective_for_every_point(seed):
    """Σ w (a·x − y)² equals the reduced form ½ Δd x² + Δl x + Σ (W z² − 2 WY z) + Σ w y² at
    random points; the answers include empty ones, single variables with coefficient 1 and 2,
    exact duplicates across queries and near-duplicates differing in one coefficient."""
    rng = np.random.default_rng(seed)
    n_x = int(rng.integers(3, 12))
    answers = []
    for _ in range(int(rng.integers(1, 5))):
        size = int(rng.integers(1, 10))
        dense = (rng.random((size, n_x)) < rng.uniform(0.05, 0.6)).astype(float)
        dense[rng.random(size) < 0.3] *= rng.choice([1.0, 2.0])
        if answers and rng.random() < 0.7:                       # repeat another query's rows
            r0, c0, v0, *_ , s0 = answers[0]
            prev = sp.csr_matrix((v0, (r0, c0)), shape=(s0, n_x)).toarray()
            dense[: min(size, s0)] = prev[: min(size, s0)]
            if rng.random() < 0.5:
                dense[0, rng.integers(n_x)] += 1.0             # a near-duplicate
        coo = sp.coo_matrix(dense)
        answers.append((coo.row.astype(np.int64), coo.col.astype(np.int64), coo.data,
                        rng.uniform(0.1, 3, size), rng.normal(3, 4, size), size))
    d, lin = np.zeros(n_x), np.zeros(n_x)
    # one child whose every cell is a variable: _stacked numbers the queries' answers in turn
    r, c, v, _ = _stacked([sp.csr_matrix((a[2], (a[0], a[1])), shape=(a[5], n_x))
                           for a in answers], np.arange(n_x)[None, :])
    w = np.concatenate([a[3] for a in answers])
    y = np.concatenate([a[4] for a in answers])
    (zr, zc, zv), w_sum, wy_sum = _auxiliaries(r, c, v, w, y, n_x, d, lin)
    assert w_sum.size <= sum(a[5] for a in answers)
    const = sum(float(np.sum(a[3] * a[4] ** 2)) for a in answers)
    for _ in range(5):
        x = rng.normal(2, 3, n_x)
        z = sp.csr_matrix((zv, (zr, zc)), shape=(w_sum.size, n_x)) @ x
        reduced = 0.5 * d @ x ** 2 + lin @ x + w_sum @ z ** 2 - 2 * wy_sum @ z + const
        direct = _objective(answers, x)
        assert abs(reduced - direct) <= 1e-9 * max(1.0, abs(direct)), (reduced, direct)
    # an auxiliary is never of one variable, and no two auxiliaries have the same row
    z_rows = sp.csr_matrix((zv, (zr, zc)), shape=(w_sum.size, n_x)).toarray()
    assert ((z_rows != 0).sum(axis=1) >= 2).all()
    assert len({row.tobytes() for row in z_rows}) == w_sum.size


@pytest.fixture(scope="module")
def pl94_tasks():
    data = synthesize_2020(3_000, seed=5)
    geography, _ = Geography.from_columns(LEVELS, data.geography_columns())
    truth = tabulate(data.persons, schema=PL94_2020, levels=LEVELS, units=data.units,
                     geography=geography)
    spec = Spec.pl94_2020()
    workload = pl94_workload()
    noisy = measure(truth, workload, pl94_budget(), "discrete_gaussian", rng=8, spec=spec)
    compiled = compile_spec(spec, PL94_2020, geography, noisy.invariants)
    tasks = [root_task(noisy, compiled[LEVELS[0]])]
    for li in (len(LEVELS) - 2, len(LEVELS) - 1):          # block groups, blocks
        level = level_tasks(noisy, compiled[LEVELS[li]], li, truth.counts[li - 1])
        tasks += sorted((t for t in level if t.k > 1), key=lambda t: t.k)[:2]
    return tasks


@pytest.mark.parametrize("seed", range(10))
def test_stacked_is_the_kron_of_each_matrix_in_canonical_order(seed):
    """_stacked's triplets are, entry for entry, the rows of kron(I_K, Q_q) stacked over q and
    restricted to the existing variables, in canonical CSR order (what _auxiliaries relies on
    to read rows off without sorting); has_var marks the answers holding a variable.
    Matrices with unsorted entries, duplicates and explicit zeros are taken as they multiply."""
    rng = np.random.default_rng(seed)
    k, n = int(rng.integers(1, 6)), int(rng.integers(2, 12))
    allowed = rng.random((k, n)) < rng.uniform(0.1, 0.9)
    var_index = np.full((k, n), -1)
    var_index[allowed] = np.arange(int(allowed.sum()))
    matrices = []
    for _ in range(int(rng.integers(1, 4))):
        m = int(rng.integers(1, 6))
        nnz = int(rng.integers(0, 2 * m * n))
        r, c = rng.integers(0, m, nnz), rng.integers(0, n, nnz)
        v = rng.choice([0.0, 1.0, 2.0, -1.0], nnz)          # duplicates sum; zeros stay
        coo = sp.coo_matrix((v, (r, c)), shape=(m, n))
        matrices.append(coo.tocsr() if rng.random() < 0.5 else coo)
    rows, cols, vals, has_var = _stacked(matrices, var_index)
    # the reference: every child's block of every matrix, dense, mapped onto the variables
    select = sp.csr_matrix((np.ones(allowed.sum()), (np.flatnonzero(allowed.ravel()),
                                                      np.arange(allowed.sum()))),
                           shape=(k * n, int(allowed.sum())))
    reference = sp.vstack([sp.kron(sp.identity(k), sp.csr_matrix(m)) for m in matrices]) @ select
    got = sp.csr_matrix((vals, (rows, cols)), shape=reference.shape)
    np.testing.assert_array_equal(got.toarray(), reference.toarray())
    key = rows * (allowed.sum() + 1) + cols
    assert np.all(np.diff(key) > 0)                          # sorted, no repeats
    structural = np.zeros(has_var.size, bool)
    structural[rows] = True
    np.testing.assert_array_equal(has_var, structural)
    assert has_var.size == k * sum(m.shape[0] for m in matrices)


def test_auxiliaries_refuse_triplets_out_of_order():
    """_auxiliaries reads rows off its triplets without sorting them: triplets out of
    canonical order (or repeated) are refused, not silently misread."""
    w, y, d, lin = np.ones(2), np.ones(2), np.zeros(3), np.zeros(3)
    r, c, v = np.array([0, 0, 1, 1]), np.array([0, 1, 1, 2]), np.ones(4)
    _auxiliaries(r, c, v, w, y, 3, d, lin)                       # canonical: fine
    for order in ([1, 0, 2, 3], [2, 3, 0, 1]):
        with pytest.raises(ValueError, match="canonical"):
            _auxiliaries(r[order], c[order], v[order], w, y, 3, d, lin)
    with pytest.raises(ValueError, match="canonical"):
        _auxiliaries(np.array([0, 0]), np.array([1, 1]), np.ones(2), w, y, 3, d, lin)


def test_pl94_nodes_need_few_auxiliaries(pl94_tasks):
    """On 2020-style block nodes most answers touch no variable or one: the reduced QP has
    fewer auxiliaries than variables' worth of answers (it had 28 × as many before)."""
    block = pl94_tasks[-1]
    fit = Fit.build(block)
    answers = sum(block.k * q.matrix.shape[0] for q in block.queries if q.name != "detailed")
    live = sum(int(_stacked((q.matrix,), fit.layout.var_index)[3].sum())
               for q in block.queries if q.name != "detailed")
    assert fit.aux < live <= answers
    assert fit.aux <= 2 * fit.variables


def test_pl94_nodes_match_the_generic_path(pl94_tasks):
    """The engine's optimum on PL 94 nodes (the nation, block groups, blocks) equals the generic
    CVXPY path's: objectives to 1e-6 relative, points to 1e-4."""
    for task in pl94_tasks:
        x_gen, f_gen, _ = fit_node_generic(task)
        result = solve_node(task, keep_continuous=True, failsafe=False)
        f_eng = result.stats["objective"]
        assert abs(f_eng - f_gen) <= 1e-6 * max(1.0, abs(f_gen)), (task.level, f_eng, f_gen)
        np.testing.assert_allclose(result.continuous, x_gen, atol=1e-4 * max(1.0, x_gen.max()))


@pytest.mark.parametrize("seed", range(20))
def test_summed_rows_count_the_same_for_every_point(seed):
    """``_summed`` rewrites whole groups of one coefficient onto their sums (``_sum_rows``
    defines them): at random points (the sums set to their groups' totals) every row counts
    what it counted, the sum rows are 0, and no rewritten row keeps an entry on a member of a
    group it counts whole."""
    rng = np.random.default_rng(seed)
    n_x, n_other = int(rng.integers(4, 30)), int(rng.integers(0, 5))
    var_sum = rng.integers(-1, int(rng.integers(1, 6)), n_x)     # −1: a group of its own
    _, var_sum[var_sum >= 0] = np.unique(var_sum[var_sum >= 0], return_inverse=True)
    n_sum = int(var_sum.max()) + 1
    first = n_x + int(rng.integers(0, n_other + 1))           # the sums among the other columns
    n_cols = n_x + n_other + n_sum
    other = np.setdiff1d(np.arange(n_x, n_cols), np.arange(first, first + n_sum))
    rows = []
    for _ in range(int(rng.integers(1, 25))):
        row = np.zeros(n_cols)
        for g in range(n_sum):                  # some groups whole, one coefficient or two
            if rng.random() < 0.4:
                row[np.flatnonzero(var_sum == g)] = rng.choice([1.0, -2.0])
                if rng.random() < 0.2:
                    row[rng.choice(np.flatnonzero(var_sum == g))] = 3.0
        partial = rng.random(n_x) < 0.2
        row[:n_x][partial] = rng.normal(size=int(partial.sum()))
        row[other] = np.where(rng.random(other.size) < 0.3, 1.0, 0.0)
        rows.append(row)
    A = sp.coo_matrix(np.array(rows))
    r, c, v = _summed(A.row, A.col, A.data, var_sum, first, n_sum)
    sr, sc, sv = _sum_rows(var_sum, first, n_sum)
    out = sp.coo_matrix((np.concatenate([v, sv]), (np.concatenate([r, A.shape[0] + sr]),
                                                   np.concatenate([c, sc]))),
                        shape=(A.shape[0] + n_sum, n_cols)).toarray()
    assert out.shape == (A.shape[0] + n_sum, n_cols)
    for _ in range(5):
        x = rng.normal(size=n_cols)
        x[first:first + n_sum] = np.bincount(var_sum[var_sum >= 0],
                                             weights=x[:n_x][var_sum >= 0], minlength=n_sum)
        np.testing.assert_allclose(out @ x, np.concatenate([A @ x, np.zeros(n_sum)]),
                                   atol=1e-12)
    dense = A.toarray()
    for i in range(A.shape[0]):
        for g in range(n_sum):
            members = np.flatnonzero(var_sum == g)
            values = dense[i, members]
            whole = values[0] != 0 and (values == values[0]).all()
            assert (out[i, members] == 0).all() == whole or not values.any()
            assert out[i, first + g] == (values[0] if whole else 0.0)


def test_group_sums_change_the_problem_not_the_fit(pl94_tasks):
    """Each PL 94 node with the schema's groups, with none and with random groups: the same
    optimum (objectives to 1e-8 relative, fits to 1e-5 persons), the same constraints kept; and
    the schema's groups make the constraint matrix sparser (what they are for)."""
    rng = np.random.default_rng(7)
    for task in pl94_tasks:
        assert task.cell_groups is not None
        base = solve_node(replace(task, cell_groups=None), keep_continuous=True)
        shuffled = rng.integers(0, 40, task.n)
        for groups in (task.cell_groups, shuffled):
            grouped = solve_node(replace(task, cell_groups=groups), keep_continuous=True)
            f0, f1 = base.stats["objective"], grouped.stats["objective"]
            assert abs(f1 - f0) <= 1e-8 * max(1.0, abs(f0)), (task.level, f0, f1)
            np.testing.assert_allclose(grouped.continuous, base.continuous, atol=1e-5)
        fit = Fit.build(task)
        qp, plain = fit.qp, Fit.build(replace(task, cell_groups=None)).qp
        assert fit.group_sums > 0 and qp.A.nnz < plain.A.nnz, task.level
        # the QP says how many blocks of variables it couples (the factorization's choice)
        assert qp.blocks == plain.blocks == task.k, task.level


def _point(task, fit, x):
    """All the fit's variables at children's cells ``x`` (auxiliaries and group sums what
    their rows define, slacks 0), in the QP's centred units."""
    qp, lay, n_aux = fit.qp, fit.layout, fit.aux
    v = np.zeros(qp.n)
    v[:lay.n_x] = x
    var_sum, n_sum = _group_sums(task, lay)
    member = np.flatnonzero(var_sum >= 0)
    first = lay.n_x + n_aux
    v[first:first + n_sum] = np.bincount(var_sum[member], weights=x[member], minlength=n_sum)
    # Q x − z = 0 is the first n_aux rows, in original units (z = 0: the row is Q x)
    v[lay.n_x:first] = (qp.A[:n_aux] @ v) if n_aux else 0.0
    return (v - fit.centre) / fit.unit


@pytest.mark.parametrize("most", [1, 2, 3, 5, 40])
def test_substitution_keeps_the_objective_and_rows_for_every_point(pl94_tasks, most):
    """Auxiliaries substituted into P (``Fit.build(substitute=…)``): at random points
    around the targets, the objective in original units is the unsubstituted QP's to 1e-10
    relative, every row that stays reads the same, and the substituted rows are gone."""
    rng = np.random.default_rng(most)
    for task in pl94_tasks:
        fit, fit_s = Fit.build(task), Fit.build(task, substitute=most)
        plain, sub, scale, lay = fit.qp, fit_s.qp, fit.scale, fit.layout
        assert fit_s.scale == scale and fit_s.layout.n_x == lay.n_x
        gone = fit.aux - fit_s.aux
        assert gone == fit_s.substituted and sub.n == plain.n - gone
        assert gone > 0 or most == 1          # (a row of one entry: a whole group's sum)
        assert sub.A.shape[0] == plain.A.shape[0] - gone
        kept = fit_s.kept_aux
        # a substituted row had at most `most` entries (through the group sums)
        counts = np.diff(sp.csr_matrix(plain.A[:fit.aux]).indptr) - 1
        assert counts[np.setdiff1d(np.arange(fit.aux), kept)].max(initial=0) <= most
        assert (counts[kept] > most).all()
        for _ in range(5):
            x = fit.centre[:lay.n_x] + rng.normal(0, 3, lay.n_x)
            d_plain = _point(task, fit, x)
            d_sub = _point(task, fit_s, x)
            f_plain, f_sub = plain.objective(d_plain) / scale, sub.objective(d_sub) / scale
            assert abs(f_sub - f_plain) <= 1e-10 * max(1.0, abs(f_plain)), (f_plain, f_sub)
            res_plain = (plain.A @ d_plain - plain.l) * fit.unit
            res_sub = (sub.A @ d_sub - sub.l) * fit_s.unit
            np.testing.assert_allclose(res_sub[fit_s.aux:], res_plain[fit.aux:], atol=1e-8)
            np.testing.assert_allclose(res_sub[:fit_s.aux], res_plain[kept], atol=1e-8)


def test_substitution_changes_the_problem_not_the_fit(pl94_tasks, monkeypatch):
    """solve_node with the auxiliaries substituted (the default) and without: the same
    optimum (objectives to 1e-8 relative, fits to 1e-5 persons) on every PL 94 node."""
    assert node.SUBSTITUTE_ENTRIES > 0
    for task in pl94_tasks:
        assert Fit.build(task, substitute=node.SUBSTITUTE_ENTRIES).substituted > 0
    with_sub = [solve_node(task, keep_continuous=True) for task in pl94_tasks]
    monkeypatch.setattr(node, "SUBSTITUTE_ENTRIES", 0)
    for task, a in zip(pl94_tasks, with_sub):
        b = solve_node(task, keep_continuous=True)
        f0, f1 = b.stats["objective"], a.stats["objective"]
        assert abs(f1 - f0) <= 1e-8 * max(1.0, abs(f0)), (task.level, f0, f1)
        np.testing.assert_allclose(a.continuous, b.continuous, atol=1e-5)


def test_children_with_large_blocks_keep_their_auxiliaries(pl94_tasks, monkeypatch):
    """Where Clarabel would factor the children as large dense blocks (faer), nothing is
    substituted: the factorization's choice is made on the problem it was measured on."""
    task = pl94_tasks[-1]
    assert Fit.build(task, substitute=5).substituted > 0
    monkeypatch.setattr(fit_module, "large_blocks", lambda n, blocks: True)
    assert Fit.build(task, substitute=5).substituted == 0


def test_every_fit_pass_substitutes_and_multipass_histograms_do_not_move(pl94_tasks,
                                                                         monkeypatch):
    """A multipass fit substitutes in every pass, and on the PL 94 test nodes its integer
    histograms are those of the plain fit: the ties the later pass makes on the earlier pass's
    bounds (exact halves) are broken toward the held answers, not by the fit's last digits.
    (Children that nothing measured tells apart can still tie: docs/scale2020.md.)"""
    calls = []
    build = Fit.build

    def spy(task, layout=None, **kw):
        calls.append(kw.get("substitute", 0))
        return build(task, layout, **kw)

    monkeypatch.setattr(Fit, "build", staticmethod(spy))
    tasks = []
    for task in pl94_tasks[1:]:                  # the root measures no total (an invariant)
        names = tuple(q.name for q in task.queries)
        total = next(q.matrix for q in task.queries if q.name == "total")
        tasks.append(replace(task, passes=(("total",), tuple(n for n in names if n != "total")),
                             round_passes=((("total", total.astype(np.float64)),),)))
    substituted = [solve_node(task) for task in tasks]
    assert calls and set(calls) == {node.SUBSTITUTE_ENTRIES}
    monkeypatch.setattr(node, "SUBSTITUTE_ENTRIES", 0)
    for task, a in zip(tasks, substituted):
        np.testing.assert_array_equal(solve_node(task).histograms, a.histograms)


def test_one_layout_per_node_handed_to_every_pass_and_the_rounding(pl94_tasks, monkeypatch):
    """The node's variables are decided once (``Layout.of``) and the very object is handed to
    every fit pass and to the rounding — no cache keeps it: when the node is done, nothing
    refers to it."""
    made, given = [], []
    of, build, round_node = Layout.of, Fit.build, node.round_node

    def spy_of(task):
        made.append(of(task))
        return made[-1]

    def spy_build(task, layout=None, **kw):
        given.append(layout)
        return build(task, layout, **kw)

    def spy_round(task, x_star, layout, **kw):
        given.append(layout)
        return round_node(task, x_star, layout, **kw)

    monkeypatch.setattr(Layout, "of", staticmethod(spy_of))
    monkeypatch.setattr(Fit, "build", staticmethod(spy_build))
    monkeypatch.setattr(node, "round_node", spy_round)
    for task in pl94_tasks:
        made.clear(), given.clear()
        task = replace(task, passes=(("total",),)) if task.parent_hist is not None else task
        solve_node(task)
        assert len(made) == 1 and len(given) >= 2, task.level
        assert all(layout is made[0] for layout in given), task.level
        ref = weakref.ref(made[0])
        made.clear(), given.clear()
        gc.collect()
        assert ref() is None, task.level


def test_a_substituted_fit_its_first_backend_cannot_solve_goes_plain_through_the_chain(
        monkeypatch):
    """An infeasible one-pass node (children's invariant totals 3 and 2, parent 4): the
    substituted problem is tried with the chain's first backend only, then the plain problem
    with the whole chain decides (every backend says infeasible), then the failsafe."""
    chains = []
    solve = node.solve_qp

    def spy(qp, chain, **kw):
        chains.append(tuple(chain))
        return solve(qp, chain, **kw)

    monkeypatch.setattr(node, "solve_qp", spy)
    total = node.QueryData("total", sp.csr_matrix(np.ones((1, 2))), np.array([[3.0], [2.0]]),
                           np.ones((2, 1)))
    detailed = node.QueryData("detailed", sp.identity(2, format="csr"),
                              np.array([[2.0, 1.0], [2.0, 0.0]]), np.ones((2, 2)))
    bounds = np.array([[3.0], [2.0]])
    task = node.NodeTask("county", "p", np.array([3, 1]), np.array(["a", "b"], dtype=object),
                         (detailed, total), sp.csr_matrix(np.ones((1, 2), np.int64)), bounds,
                         bounds.copy(), np.zeros((2, 2), bool), ("tot: total",))
    assert Fit.build(task, substitute=node.SUBSTITUTE_ENTRIES).substituted == 2
    chain = ("clarabel", "osqp", "cvxpy-ecos")
    result = solve_node(task, chain=chain)
    assert chains[:2] == [chain[:1], chain]
    # the unsubstituted pass stops once two backends agree (ECOS is not run)
    attempts = result.stats["attempts"].split(";")
    assert attempts[:3] == ["clarabel:infeasible (substituted)", "clarabel:infeasible",
                            "osqp:infeasible"]
    assert not any(a.startswith("cvxpy-ecos") for a in attempts)
    assert result.stats["failsafe"]


# -- a weight matrix per child (the covariance of a subtree's estimates) ------------------------

def _covariance_task(rng, k, n, constrained):
    """A node whose detailed query carries a random positive definite weight matrix per child
    and whose total a weight per answer; every cell measured, so the fit is unique."""
    detailed_values = rng.uniform(0, 8, (k, n))
    a = rng.normal(size=(k, n, n))
    weights = a @ np.swapaxes(a, 1, 2) + 0.5 * np.eye(n)          # K × n × n, PD
    detailed = QueryData("detailed", sp.identity(n, format="csr"), detailed_values, weights)
    total = QueryData("total", sp.csr_matrix(np.ones((1, n))),
                      detailed_values.sum(axis=1, keepdims=True) + rng.normal(0, 2, (k, 1)),
                      rng.uniform(0.2, 2.0, (k, 1)))
    parent = rng.integers(0, 12, n)
    if constrained:     # each child's total within ±3 of the even split
        share = np.full((k, 1), parent.sum() / k)
        matrix = sp.csr_matrix(np.ones((1, n), np.int64))
        lower, upper, labels = np.floor(share) - 3, np.ceil(share) + 3, ("near: total",)
    else:
        matrix, lower, upper, labels = (sp.csr_matrix((0, n), dtype=np.int64),
                                        np.zeros((k, 0)), np.zeros((k, 0)), ())
    return NodeTask("tract", "p", parent, np.array([f"c{i}" for i in range(k)], dtype=object),
                    (detailed, total), matrix, lower, upper, np.zeros((k, n), bool), labels)


def _same_as_generic(task):
    """The engine's optimum of ``task`` is the generic path's (objective to 1e-6 relative, points
    to 1e-4), and its integers keep the parent."""
    x_gen, f_gen, _ = fit_node_generic(task)
    result = solve_node(task, keep_continuous=True, failsafe=False)
    f_eng = result.stats["objective"]
    assert abs(f_eng - f_gen) <= 1e-6 * max(1.0, abs(f_gen)), (f_eng, f_gen)
    np.testing.assert_allclose(result.continuous, x_gen, atol=1e-4 * max(1.0, x_gen.max()))
    assert (result.histograms.sum(axis=0) == task.parent_hist).all()


@pytest.mark.parametrize("seed", range(10))
def test_a_weight_matrix_per_child_is_the_fit_the_generic_path_finds(seed):
    """Σ_k (x_k − y_k)ᵀ W_k (x_k − y_k) with a general positive definite W_k: the engine (whose
    answers are cells here, so W_k goes into P as a block per child) and one CVXPY problem with
    the quadratic forms written out agree on the optimum."""
    rng = np.random.default_rng(seed)
    task = _covariance_task(rng, int(rng.integers(2, 5)), int(rng.integers(2, 6)),
                            constrained=seed % 2 == 1)
    _same_as_generic(task)


def test_diagonal_weight_matrices_give_the_per_answer_fit(pl94_tasks):
    """Every non-detailed query's weights given as diagonal matrices instead: the same fit
    (objective to 1e-8 relative, fits to 1e-5 persons) and the same integers on every PL 94
    node."""
    for task in pl94_tasks:
        as_matrices = tuple(
            q if q.name == "detailed" else QueryData(
                q.name, q.matrix, q.values,
                np.einsum("ka,ab->kab", q.weights, np.eye(q.weights.shape[1])))
            for q in task.queries)
        base = solve_node(task, keep_continuous=True)
        other = solve_node(replace(task, queries=as_matrices), keep_continuous=True)
        f0, f1 = base.stats["objective"], other.stats["objective"]
        assert abs(f1 - f0) <= 1e-8 * max(1.0, abs(f0)), (task.level, f0, f1)
        np.testing.assert_allclose(other.continuous, base.continuous, atol=1e-5)
        np.testing.assert_array_equal(other.histograms, base.histograms)


def test_a_weight_matrix_that_is_not_positive_definite_is_refused():
    rng = np.random.default_rng(0)
    task = _covariance_task(rng, 2, 3, constrained=False)
    detailed = task.queries[0]
    bad = detailed.weights.copy()
    bad[1] = -np.eye(3)
    with pytest.raises(PostprocError, match="'detailed': a child's weight matrix is not "
                                            "positive definite"):
        Fit.build(replace(task, queries=(replace(detailed, weights=bad),)))
    with pytest.raises(PostprocError, match=r"children × answers × answers = \(2, 3, 3\)"):
        Fit.build(replace(task, queries=(replace(detailed, weights=bad[:, :2]),)))
    skew = detailed.weights.copy()
    skew[0, 0, 1] += 1.0
    with pytest.raises(PostprocError, match="not symmetric"):
        Fit.build(replace(task, queries=(replace(detailed, weights=skew),)))


@pytest.mark.parametrize("block", [4_000_000, 60])
def test_weight_matrices_whitened_together_as_each_alone(block, monkeypatch):
    """Queries with a weight matrix per child are whitened all at once when they share the
    weights and each counts a cell in one answer at most (BlueDown's 63 race queries): the
    rows and columns are what forming each query's ``L_kᵀ Q`` densely gives — in canonical
    order, over each child's own cells — and the values bit for bit for the sums (one product
    each; to 1e-12 for a query that counts a cell twice, which takes the dense path), on random
    layouts, with the children in blocks; the targets to 1e-12."""
    from types import SimpleNamespace

    monkeypatch.setattr(whiten_module, "_WHITEN_BLOCK", block)
    rng = np.random.default_rng(11)
    for _ in range(60):
        k, n, m = int(rng.integers(1, 30)), int(rng.integers(2, 200)), int(rng.integers(1, 9))
        allowed = rng.random((k, n)) < rng.uniform(0.05, 1)
        var_index = np.full((k, n), -1)
        var_index[allowed] = np.arange(allowed.sum())
        lay = SimpleNamespace(allowed=allowed, var_index=var_index)
        a = rng.standard_normal((k, m, m))
        shared, other = a @ np.swapaxes(a, 1, 2) + np.eye(m), np.eye(m)[None].repeat(k, 0) * 3
        queries = []
        for r in range(int(rng.integers(1, 6))):
            if r == 0 or rng.random() < 0.7:     # a sum: each cell in one answer at most
                answer = rng.integers(-1, m, n)
                cells = np.flatnonzero(answer >= 0)
                matrix = sp.csr_matrix((rng.choice([1.0, 2.0, -1.0], cells.size),
                                        (answer[cells], cells)), shape=(m, n))
            else:
                matrix = sp.csr_matrix(rng.random((m, n)) * (rng.random((m, n)) < 0.3))
            queries.append(QueryData(f"q{r}", matrix, rng.standard_normal((k, m)),
                                     shared if rng.random() < 0.8 else other))
        got = whiten_module.whitened(queries, lay, 0.5)
        for q, (rows, cols, data, targets) in zip(queries, got):
            lt = np.swapaxes(np.linalg.cholesky(q.weights * 0.5), 1, 2)
            product = lt @ q.matrix.toarray()                   # children × m × cells
            product *= allowed[:, None, :]
            child, i, cell = np.nonzero(product)
            assert np.array_equal(rows, child * m + i)
            assert np.array_equal(cols, var_index[child, cell])
            summing = q.matrix.nnz == np.unique(q.matrix.indices).size
            if summing:
                assert np.array_equal(data, product[child, i, cell])
            np.testing.assert_allclose(data, product[child, i, cell], rtol=1e-12, atol=1e-15)
            np.testing.assert_allclose(targets, np.einsum("kij,kj->ki", lt, q.values).ravel(),
                                       rtol=1e-12, atol=1e-15)


def _cellwise_queries(rng, k, n, m, races):
    """``races`` queries whose answers are cells (each its own ``m`` distinct cells, a
    coefficient of 1, 2 or −1 each) sharing one positive definite weight matrix per child, as a
    BlueDown child's race queries do."""
    a = rng.standard_normal((k, m, m))
    shared = a @ np.swapaxes(a, 1, 2) + np.eye(m)
    cells = rng.permutation(n)[:races * m].reshape(races, m)
    return [QueryData(f"race{r}", sp.csr_matrix((rng.choice([1.0, 2.0, -1.0], m),
                                                 (np.arange(m), cells[r])), shape=(m, n)),
                      rng.uniform(-1, 6, (k, m)), shared) for r in range(races)]


def test_cellwise_weight_matrices_go_into_p_with_the_objective_whitening_gives():
    """Queries whose answers are cells (:func:`whiten.one_cell_each`) put their terms straight
    into ``P`` as dense blocks (:func:`whiten.cell_blocks`): ½ xᵀPx + linearᵀx + const equals
    Σ_k (Q x_k − y_k)ᵀ scale·W_k (Q x_k − y_k) at random points, on random layouts whose cells
    that are not variables are 0 (1e-10 relative: a wrong index, sign, coefficient or factor
    ½ shows far above that); each covered variable's centre is its answer's target."""
    rng = np.random.default_rng(5)
    for _ in range(40):
        k, m, races = int(rng.integers(1, 6)), int(rng.integers(1, 6)), int(rng.integers(1, 4))
        n = races * m + int(rng.integers(0, 5))
        allowed = rng.random((k, n)) < rng.uniform(0.2, 1)
        var_index = np.full((k, n), -1)
        var_index[allowed] = np.arange(allowed.sum())
        lay = SimpleNamespace(allowed=allowed, var_index=var_index, n_x=int(allowed.sum()))
        queries = _cellwise_queries(rng, k, n, m, races)
        assert all(whiten_module.one_cell_each(q) for q in queries)
        blocks = whiten_module.cell_blocks(queries, lay, 0.5)
        assert whiten_module.block_entries(queries, lay) == blocks.data.size
        P = sp.csr_matrix((blocks.data, (blocks.rows, blocks.cols)), shape=(lay.n_x,) * 2)
        assert (P != P.T).nnz == 0
        for _ in range(3):
            x = rng.uniform(-3, 9, lay.n_x)
            hist = np.zeros((k, n))
            hist[allowed] = x
            direct = sum(float(r @ (0.5 * q.weights[c]) @ r)
                         for q in queries for c in range(k)
                         for r in [q.matrix @ hist[c] - q.values[c]])
            got = 0.5 * x @ (P @ x) + blocks.linear @ x + blocks.const
            assert abs(got - direct) <= 1e-10 * max(1.0, abs(direct)), (got, direct)
        q_of = {(int(var_index[c, j])): (q, i, c) for q in queries for c in range(k)
                for i, j in enumerate(q.matrix.indices) if allowed[c, j]}
        assert sorted(blocks.covered.tolist()) == sorted(q_of)
        for v, t in zip(blocks.covered, blocks.target):
            q, i, c = q_of[int(v)]
            assert t == q.values[c, i] / q.matrix.data[i]


def _group_task(rng, k, groups, queries):
    """A node of ``k`` children over cells grouped by ``groups``, some cells of each child not
    variables (so a child's group may have several variables, one or none), holding
    ``queries``."""
    n = groups.size
    zero = rng.random((k, n)) < rng.uniform(0.0, 0.7)
    return NodeTask("tract", "p", rng.integers(0, 9, n),
                    np.array([f"c{i}" for i in range(k)], dtype=object), tuple(queries),
                    sp.csr_matrix((0, n), dtype=np.int64), np.zeros((k, 0)), np.zeros((k, 0)),
                    zero, cell_groups=groups)


def _group_totals(rng, groups, k, coefficient=1.0):
    """A query of every group's sum (times ``coefficient``), groups in a random order, with a
    positive definite weight matrix per child."""
    order = rng.permutation(int(groups.max()) + 1)
    m = order.size
    rows = np.concatenate([np.full(int((groups == g).sum()), i) for i, g in enumerate(order)])
    cells = np.concatenate([np.flatnonzero(groups == g) for g in order])
    a = rng.standard_normal((k, m, m))
    return QueryData("totals", sp.csr_matrix((np.full(cells.size, coefficient), (rows, cells)),
                                             shape=(m, groups.size)),
                     rng.uniform(-1, 9, (k, m)), a @ np.swapaxes(a, 1, 2) + np.eye(m))


def test_group_sum_weight_matrices_go_into_p_with_the_objective_they_stand_for():
    """A query whose answers are whole groups (:func:`whiten.whole_groups`) puts its term into
    ``P`` as blocks over the fit's group sums (a group's own sum variable, its one variable, or
    nothing): ½ vᵀPv + linearᵀv + const, with each sum at its members' total, equals
    Σ_k (Q x_k − y_k)ᵀ scale·W_k (Q x_k − y_k) at random points (1e-10 relative), beside race
    queries on cells sharing another weight array; a sum's centre is its answer's target."""
    rng = np.random.default_rng(11)
    for _ in range(40):
        k, groups_n, races = (int(rng.integers(1, 5)), int(rng.integers(1, 5)),
                              int(rng.integers(1, 4)))
        groups = np.repeat(np.arange(groups_n), races)
        totals = _group_totals(rng, groups, k, coefficient=float(rng.choice([1.0, 2.0, -1.0])))
        raced = _cellwise_queries(rng, k, groups.size, groups_n, races)
        task = _group_task(rng, k, groups, raced + [totals])
        lay = Layout.of(task)
        var_sum, n_sum = _group_sums(task, lay)
        sums = fit_module._sum_columns(task, lay, var_sum, n_sum)
        assert whiten_module.whole_groups(totals, groups) is not None
        assert [whiten_module.in_blocks(q, sums) for q in task.queries] == [True] * (races + 1)
        blocks = whiten_module.cell_blocks(task.queries, lay, 0.5, sums)
        n = lay.n_x + n_sum
        P = sp.csr_matrix((blocks.data, (blocks.rows, blocks.cols)), shape=(n, n))
        assert (P != P.T).nnz == 0 and blocks.linear.size == n
        for _ in range(3):
            x = rng.uniform(-3, 9, lay.n_x)
            v = np.concatenate([x, np.bincount(var_sum[var_sum >= 0], weights=x[var_sum >= 0],
                                               minlength=n_sum)])
            hist = np.zeros((k, groups.size))
            hist[lay.allowed] = x
            direct = sum(float(r @ (0.5 * q.weights[c]) @ r)
                         for q in task.queries for c in range(k)
                         for r in [q.matrix @ hist[c] - q.values[c]])
            got = 0.5 * v @ (P @ v) + blocks.linear @ v + blocks.const
            assert abs(got - direct) <= 1e-10 * max(1.0, abs(direct)), (got, direct)
        group_of, coef = whiten_module.whole_groups(totals, groups)
        for c in range(k):
            for i, g in enumerate(group_of):
                column = sums.column[c, g]
                members = lay.var_index[c][(groups == g) & lay.allowed[c]]
                assert column == (-1 if members.size == 0 else members[0] if members.size == 1
                                  else lay.n_x + var_sum[members[0]])
                if members.size > 1:
                    assert (blocks.covered == column).sum() == 1
                    at = int(np.flatnonzero(blocks.covered == column)[0])
                    assert blocks.target[at] == totals.values[c, i] / coef[i]


def test_only_queries_of_whole_groups_are_group_sums():
    """:func:`whiten.whole_groups` refuses an answer missing a cell of its group, mixing two
    coefficients, reaching into another group, or a group answered twice."""
    groups = np.array([0, 0, 0, 1, 1, 1])

    def answer(*rows):
        matrix = sp.csr_matrix(np.array(rows, dtype=float))
        return whiten_module.whole_groups(QueryData("q", matrix, np.zeros((1, len(rows))),
                                                    np.eye(len(rows))[None]), groups)

    assert [a.tolist() for a in answer([0, 0, 0, 3, 3, 3], [1, 1, 1, 0, 0, 0])] == \
        [[1, 0], [3.0, 1.0]]
    assert answer([1, 1, 0, 0, 0, 0]) is None               # a cell of the group missing
    assert answer([1, 2, 1, 0, 0, 0]) is None               # two coefficients
    assert answer([1, 1, 1, 1, 0, 0]) is None               # a cell of another group
    assert answer([1, 1, 1, 0, 0, 0], [2, 2, 2, 0, 0, 0]) is None     # a group twice
    assert answer([0, 0, 0, 0, 0, 0]) is None               # an answer of no cell
    # one matrix asked about under other groups, then under an equal copy of the first's
    q = QueryData("q", sp.csr_matrix(np.array([[1.0, 1.0, 1.0, 0, 0, 0]])), np.zeros((1, 1)),
                  np.eye(1)[None])
    assert whiten_module.whole_groups(q, groups) is not None
    assert whiten_module.whole_groups(q, np.array([0, 0, 1, 1, 1, 1])) is None
    assert whiten_module.whole_groups(q, groups.copy())[0].tolist() == [0]


def test_group_sums_are_whitened_where_the_cells_blocks_make_the_node_a_dense_one():
    """Where the cells' blocks alone make the node one Clarabel factors with faer (≥ 10,000
    variables, ≥ 6 entries of ``P`` per variable: BlueDown's nation → states node), the race
    totals are whitened (auxiliaries, or rows substituted back), as they were measured faster
    there; a smaller node of the same shape puts them into ``P`` over its sums (none of
    either)."""
    rng = np.random.default_rng(21)
    groups_n, races = 16, 32
    groups = np.repeat(np.arange(groups_n), races)
    for k, dense in ((20, True), (4, False)):
        queries = _cellwise_queries(rng, k, groups.size, groups_n, races)
        queries.append(_group_totals(rng, groups, k))
        task = _group_task(rng, k, groups, queries)
        task = replace(task, zero=np.zeros((k, groups.size), bool),
                       parent_hist=task.parent_hist + 1)
        fit = Fit.build(task, substitute=fit_module.SUBSTITUTE_ENTRIES)
        assert (fit.variables >= 10_000) is dense
        assert (fit.aux + fit.substituted > 0) is dense, (k, fit.aux, fit.substituted)


def test_a_large_node_whose_cells_blocks_are_sparse_keeps_the_sums_blocks(monkeypatch):
    """A node of ≥ 10,000 variables whose race blocks are small (2 × 2, three entries of ``P``
    per variable) is not a dense one: its totals go into ``P`` over the sums (no auxiliary),
    the same QP as where the density is not asked (the path of smaller nodes, forced here)."""
    rng = np.random.default_rng(22)
    groups_n, races, k = 2, 256, 20
    groups = np.repeat(np.arange(groups_n), races)
    queries = _cellwise_queries(rng, k, groups.size, groups_n, races)
    queries.append(_group_totals(rng, groups, k))
    task = _group_task(rng, k, groups, queries)
    task = replace(task, zero=np.zeros((k, groups.size), bool), parent_hist=task.parent_hist + 1)
    joined = Fit.build(task, substitute=fit_module.SUBSTITUTE_ENTRIES)
    assert joined.variables >= 10_000 and joined.aux + joined.substituted == 0
    monkeypatch.setattr(fit_module, "dense_objective", lambda n, entries: False)
    at_once = Fit.build(task, substitute=fit_module.SUBSTITUTE_ENTRIES)
    assert abs(joined.qp.P - at_once.qp.P).max() <= 1e-12 * abs(at_once.qp.P).max()
    np.testing.assert_allclose(joined.qp.q, at_once.qp.q, rtol=1e-12, atol=1e-12)
    assert joined.qp.r == pytest.approx(at_once.qp.r, rel=1e-12)
    np.testing.assert_array_equal(joined.centre, at_once.centre)


@pytest.mark.parametrize("seed", range(6))
def test_blocks_over_cells_and_group_sums_are_the_fit_the_generic_path_finds(seed):
    """A BlueDown-shaped node whose race totals are the fit's group sums (``cell_groups``
    given): race queries in blocks over cells, the totals in blocks over the sums — the
    engine's optimum is one CVXPY problem's with the quadratic forms written out. A query of
    all cells but one, weighted per answer, is an auxiliary the fit keeps (the sums' columns
    then move past it)."""
    rng = np.random.default_rng(300 + seed)
    k, groups_n, races = int(rng.integers(2, 5)), int(rng.integers(6, 8)), int(rng.integers(2, 4))
    groups = np.repeat(np.arange(groups_n), races)
    queries = _cellwise_queries(rng, k, groups.size, groups_n, races)
    queries.append(_group_totals(rng, groups, k))
    queries.append(QueryData("all_but_one", sp.csr_matrix(np.r_[0.0, np.ones(groups.size - 1)]),
                             rng.uniform(0, 40, (k, 1)), rng.uniform(0.5, 2, (k, 1))))
    task = _group_task(rng, k, groups, queries)
    task = replace(task, zero=np.zeros_like(task.zero), parent_hist=task.parent_hist + 1)
    assert Fit.build(task, substitute=fit_module.SUBSTITUTE_ENTRIES).aux > 0
    _same_as_generic(task)


@pytest.mark.parametrize("seed", range(8))
def test_blocks_in_p_beside_a_whitened_sum_are_the_fit_the_generic_path_finds(seed):
    """A BlueDown-shaped node — race queries whose answers are cells, sharing one weight matrix
    per child (blocks in ``P``), and a race-totals query with its own (whitened), cells of the
    parent that are empty — solved by the engine and by one CVXPY problem with the quadratic
    forms written out: the same optimum (objective to 1e-6 relative, points to 1e-4)."""
    rng = np.random.default_rng(100 + seed)
    k, m, races = int(rng.integers(2, 5)), int(rng.integers(2, 4)), int(rng.integers(2, 4))
    n = races * m
    queries = _cellwise_queries(rng, k, n, m, races)
    cells = np.stack([q.matrix.indices for q in queries])          # races × m
    total = sp.csr_matrix((np.ones(n), (np.repeat(np.arange(m), races), cells.T.ravel())),
                          shape=(m, n))
    a = rng.standard_normal((k, m, m))
    queries.append(QueryData("total", total, rng.uniform(0, 10, (k, m)),
                             a @ np.swapaxes(a, 1, 2) + np.eye(m)))
    assert [whiten_module.one_cell_each(q) for q in queries] == [True] * races + [False]
    parent = rng.integers(0, 8, n) * (rng.random(n) < 0.8)
    task = NodeTask("tract", "p", parent, np.array([f"c{i}" for i in range(k)], dtype=object),
                    tuple(queries), sp.csr_matrix((0, n), dtype=np.int64), np.zeros((k, 0)),
                    np.zeros((k, 0)), np.zeros((k, n), bool))
    _same_as_generic(task)


def test_which_queries_go_into_p_is_answered_per_matrix_even_as_matrices_come_and_go():
    """:func:`whiten.one_cell_each` remembers its answer per matrix (every node of a level shares
    its queries' matrices): fresh matrices made and dropped one after another — whose ``id``
    CPython reuses once one is freed — each get their own answer, past the memo's bound."""
    rng = np.random.default_rng(3)
    for step in range(5000):
        cellwise = bool(rng.integers(2))
        matrix = (sp.csr_matrix(np.eye(4)[rng.permutation(4)[:3]]) if cellwise
                  else sp.csr_matrix(np.ones((1, 4))))
        q = QueryData("q", matrix, np.zeros((1, matrix.shape[0])),
                      np.eye(matrix.shape[0])[None])
        assert whiten_module.one_cell_each(q) is cellwise, step
        assert whiten_module.one_cell_each(q) is cellwise, step
