"""The failsafe's slack allowance: the total slack up to its least value plus ``failsafe_slack``.

When the failsafe relaxes a node, the Census Bureau's 2018 and 2020 TopDown code first finds the
least total cell slack, then fits with the total slack at most that least value plus 1.0, and
rounds the same way (its least integer slack given the fit's floors, plus 1.0); the toolkit's
``failsafe_slack`` (default 1.0; 0 holds the slack at the least) does the same
(docs/topdown.md, "Failsafe"). Checked here:

* two nodes small enough to solve by hand, whose fits and integers are derived in the
  docstrings;
* random relaxed nodes against an independent statement of the rule — CVXPY over every cell
  for the fit, a MILP (SciPy's HiGHS) with one slack per cell for the rounding, as the Census
  code states it — for allowances 0, 0.5, 1 and 2 and every relaxation (margins, total,
  nothing kept): the same integers; the fit's total slack within [least, least + allowance];
  its objective no larger than with the least slack; every promise in exact integers;
* the option is validated, recorded in the provenance, listed by ``postproc methods``, read
  from ``[postprocess.options]`` (a bad value named at its line) and passed to the top and
  every part of a run in parts.
"""

from __future__ import annotations

import json
from dataclasses import replace

import cvxpy as cp
import numpy as np
import pytest
import scipy.sparse as sp
from scipy.optimize import Bounds, LinearConstraint, milp

from invariants.spec import Spec
from postproc.errors import PostprocError
from postproc.methods.topdown import NodeTask, QueryData, solve_node, topdown
from postproc.methods.topdown.failsafe import rounding_allowance, stack_kept, total_kept

from test_failsafe import random_infeasible_task, review_case  # noqa: F401  (a fixture)
from test_topdown import LEVELS

# ---------------------------------------------------------------------------------------------
# by hand
# ---------------------------------------------------------------------------------------------


def facility_task(values, *, keep=None, slack):
    """Cells (household, nursing); child c0 has a nursing facility (≥ 1 nursing resident), the
    others have none (their nursing cell is a zero cell); the parent (5, 0) has nobody in a
    nursing facility. Detailed measurements ``values``, weight 1."""
    k = len(values)
    zero = np.zeros((k, 2), bool)
    zero[1:, 1] = True
    lower = np.array([[1.0]] + [[0.0]] * (k - 1))
    upper = np.array([[np.inf]] + [[0.0]] * (k - 1))
    return NodeTask("enum_dist", "county 7", np.array([5, 0]),
                    np.array([f"c{i}" for i in range(k)], dtype=object),
                    (QueryData("detailed", sp.identity(2, format="csr"),
                               np.array(values, dtype=float), np.ones((k, 2))),),
                    sp.csr_matrix(np.array([[0, 1]])), lower, upper, zero,
                    ("hhgq_total_lb: hhgq=nursing",), failsafe_keep=keep, failsafe_slack=slack)


def test_by_hand_total_kept_the_fit_moves_half_a_person_more():
    """c0 measured (1, 3), c1 (3, 0); the total is kept. With x = c0's nursing residents, the
    children's household cells hold 5 − x and the slacks are x (household) + x (nursing) = 2x;
    the least is 2 (x = 1). Least slack: x = 1, households (1, 3) exactly, objective
    (1 − 3)² = 4. Allowance 1: 2x ≤ 3, and the nursing measurement pulls x to 1.5; households
    share 3.5 against measured 4, 0.25 less each: (0.75, 2.75), objective
    2·0.25² + 1.5² = 2.375. The rounding's slacks sum to twice the persons moved, an even
    number ≤ 2 + 1: one person moves, and both round to ((1, 1), (3, 0))."""
    least = solve_node(facility_task([[1, 3], [3, 0]], slack=0.0), keep_continuous=True)
    census = solve_node(facility_task([[1, 3], [3, 0]], slack=1.0), keep_continuous=True)
    np.testing.assert_allclose(least.continuous, [[1, 1], [3, 0]], atol=1e-5)
    np.testing.assert_allclose(census.continuous, [[0.75, 1.5], [2.75, 0]], atol=1e-5)
    assert least.stats["objective"] == pytest.approx(4, abs=1e-4)
    assert census.stats["objective"] == pytest.approx(2.375, abs=1e-4)
    for result, allowance in ((least, 0.0), (census, 1.0)):
        assert result.histograms.tolist() == [[1, 1], [3, 0]]
        report = result.failsafe
        assert report["total_slack"] == pytest.approx(2, abs=1e-5)        # the least
        assert report["slack_allowance"] == allowance
        assert report["fit_slack"] == pytest.approx(2 + allowance, abs=1e-5)
        assert report["gained"] == {1: 1} and report["lost"] == {0: 1}


def test_by_hand_nothing_kept_the_rounding_uses_its_allowance_too():
    """Nothing kept (free cell slacks): c0 measured (1.4, 3), c1 (1.4, 0), c2 (2.5, 0). The
    slack is |5 − households| + c0's nursing; the least is 1 (one nursing resident added).

    Least slack: nursing 1, households 5 against measured 5.3, 0.1 less each:
    (1.3, 1.3, 2.4); rounded, the households need one more person than the floors (4): the
    largest fraction, c2's, rounds up: ((1, 1), (1, 0), (3, 0)).

    Allowance 1: slack ≤ 2. The nursing measurement (3) pulls harder (2·(3 − x)) than the
    households' shortfall (0.2 in all), so the extra unit goes to nursing: 2 residents,
    households as before. Rounded: the floors leave nursing at 2 (slack 2) and households one
    short; the least integer slack, 2, needs one household person more (cheapest c2's,
    cost 1 − 2·0.4 = 0.2); within 2 + 1 none is needed (cost 0): ((1, 2), (1, 0), (2, 0))."""
    values = [[1.4, 3], [1.4, 0], [2.5, 0]]
    least = solve_node(facility_task(values, keep=(), slack=0.0), keep_continuous=True)
    census = solve_node(facility_task(values, keep=(), slack=1.0), keep_continuous=True)
    np.testing.assert_allclose(least.continuous, [[1.3, 1], [1.3, 0], [2.4, 0]], atol=1e-5)
    np.testing.assert_allclose(census.continuous, [[1.3, 2], [1.3, 0], [2.4, 0]], atol=1e-5)
    assert least.histograms.tolist() == [[1, 1], [1, 0], [3, 0]]
    assert census.histograms.tolist() == [[1, 2], [1, 0], [2, 0]]
    assert census.stats["objective"] == pytest.approx(0.03 + 1, abs=1e-4)   # 3·0.1² + 1²
    assert least.stats["objective"] == pytest.approx(0.03 + 4, abs=1e-4)    # 3·0.1² + 2²
    assert census.failsafe["persons_added"] == least.failsafe["persons_added"] == 1
    assert census.failsafe["gained"] == {1: 2} and census.failsafe["lost"] == {0: 1}


def test_the_rounding_allowance_is_whole_persons_and_even_when_the_total_is_kept():
    total = (total_kept(4),)
    assert [rounding_allowance(s, ()) for s in (0, 0.5, 1, 1.5, 2, 3)] == [0, 0, 1, 1, 2, 3]
    assert [rounding_allowance(s, total) for s in (0, 1, 2, 3)] == [0, 0, 2, 2]


# ---------------------------------------------------------------------------------------------
# against an independent statement of the rule
# ---------------------------------------------------------------------------------------------


def census_fit(task, keep, allowance):
    """The fit as the Census code states it: every cell a variable (≥ 0, zero cells 0), the
    children's rows within their bounds, the kept answers exact, ``t = Σ_j |parent_j −
    Σ_k x_kj|``; least ``t`` first (an LP), then least squares with ``t ≤ least +
    allowance``. Returns (x, least, objective)."""
    x = cp.Variable((task.k, task.n), nonneg=True)
    c = task.matrix.toarray().astype(float)
    rows = x @ c.T
    lo, hi = np.isfinite(task.lower), np.isfinite(task.upper)
    cons = [x[task.zero] == 0] if task.zero.any() else []
    cons += [rows[lo] >= task.lower[lo]] if lo.any() else []
    cons += [rows[hi] <= task.upper[hi]] if hi.any() else []
    if keep:
        q = stack_kept(keep)[0].toarray()
        cons.append(q @ cp.sum(x, axis=0) == q @ task.parent_hist)
    slack = cp.sum(cp.abs(task.parent_hist - cp.sum(x, axis=0)))
    first = cp.Problem(cp.Minimize(slack), cons)
    least = first.solve(solver="CLARABEL")
    fit = sum(cp.sum(cp.multiply(qd.weights, cp.square(x @ qd.matrix.T.toarray() - qd.values)))
              for qd in task.queries)
    second = cp.Problem(cp.Minimize(fit), cons + [slack <= least * (1 + 1e-8) + allowance])
    objective = second.solve(solver="CLARABEL")
    assert first.status == second.status == cp.OPTIMAL
    return np.asarray(x.value), least, objective


def census_round(task, keep, x_star, allowance):
    """The rounding as the Census code states it: ``⌊X*⌋ + B``, ``B`` binary (0 on zero
    cells), one slack per cell ``t_j ≥ |parent_j − Σ_k (⌊X*⌋ + B)_kj|``, the children's rows and
    the kept answers exact; least ``Σ t`` first (a MILP), then ``Σ (1 − 2·frac) B`` with
    ``Σ t ≤ least + allowance``. Returns (integers, least)."""
    k, n = task.k, task.n
    x = np.maximum(x_star, 0.0)
    floor = np.floor(x + 1e-7)
    frac = np.clip(x - floor, 0.0, 1.0)
    need = task.parent_hist - floor.sum(axis=0)
    per_cell = np.tile(np.eye(n), (1, k))                  # Σ_k B_kj (B child by child)
    eye = np.eye(n)
    blocks = [np.hstack([per_cell, eye]), np.hstack([-per_cell, eye])]
    lower, upper = [need, -need], [np.full(n, np.inf)] * 2
    c = task.matrix.toarray().astype(float)
    base = (floor @ c.T).ravel()
    blocks.append(np.hstack([np.kron(np.eye(k), c), np.zeros((k * c.shape[0], n))]))
    lower.append(task.lower.ravel() - base)
    upper.append(task.upper.ravel() - base)
    if keep:
        q = stack_kept(keep)[0].toarray()
        blocks.append(np.hstack([q @ per_cell, np.zeros((q.shape[0], n))]))
        lower.append(q @ need)
        upper.append(q @ need)
    a, lo, hi = np.vstack(blocks), np.concatenate(lower), np.concatenate(upper)
    bounds = Bounds(0, np.concatenate([np.where(task.zero, 0, 1).ravel(), np.full(n, np.inf)]))
    integer = np.concatenate([np.ones(k * n), np.zeros(n)])
    total = np.concatenate([np.zeros(k * n), np.ones(n)])
    first = milp(total, constraints=LinearConstraint(a, lo, hi), integrality=integer,
                 bounds=bounds)
    least = int(round(first.fun))
    second = milp(np.concatenate([1 - 2 * frac.ravel(), np.zeros(n)]),
                  constraints=[LinearConstraint(a, lo, hi),
                               LinearConstraint(total, -np.inf, least + allowance)],
                  integrality=integer, bounds=bounds)
    assert first.success and second.success
    return (floor + np.round(second.x[:k * n]).reshape(k, n)).astype(np.int64), least


def generic_task(seed):
    """A random relaxed node (tests/test_failsafe.py) with measurements off the integers and
    weights in a continuum, so that the fit and its rounding have no ties."""
    task, truth, klass = random_infeasible_task(seed)
    rng = np.random.default_rng(1000 + seed)
    detailed = task.queries[0]
    measured = QueryData(detailed.name, detailed.matrix, truth + rng.normal(0, 1.5, truth.shape),
                         rng.uniform(0.2, 4.0, truth.shape))
    return replace(task, queries=(measured,))


def check_promises(task, keep, hist):
    """Every promise of a relaxed node, in exact int64 arithmetic, from the task's arrays."""
    assert hist.dtype == np.int64 and (hist >= 0).all() and (hist[task.zero] == 0).all()
    rows = (task.matrix @ hist.T).T
    assert (rows >= np.where(np.isfinite(task.lower), task.lower, rows.min() - 1)).all()
    assert (rows <= np.where(np.isfinite(task.upper), task.upper, rows.max() + 1)).all()
    if keep:
        q = stack_kept(keep)[0]
        np.testing.assert_array_equal(q @ hist.sum(axis=0), q @ task.parent_hist)


SEEDS = range(6)


@pytest.mark.parametrize("seed", SEEDS)
def test_random_relaxed_nodes_give_the_census_rules_integers(seed):
    task = generic_task(seed)
    changed = []
    for keep in (task.failsafe_keep, (total_kept(task.n),), ()):
        results = {}
        for allowance in (0.0, 0.5, 1.0, 2.0):
            node = replace(task, failsafe_keep=keep, failsafe_slack=allowance)
            ours = solve_node(node, keep_continuous=True)
            x, least, objective = census_fit(node, keep, allowance)
            hist, least_round = census_round(node, keep, x, allowance)
            np.testing.assert_array_equal(ours.histograms, hist)
            np.testing.assert_allclose(ours.continuous, x, atol=1e-4)
            assert ours.stats["objective"] == pytest.approx(objective, rel=1e-5, abs=1e-5)
            # the fit's total slack, from its cells, within [least, least + allowance]
            # (+ the solvers' tolerance: the bound is the least · (1 + 1e-6) + 1e-6 + allowance)
            fit_slack = np.abs(node.parent_hist - ours.continuous.sum(axis=0)).sum()
            tol = 1e-6 * least + 1e-5
            assert least - tol <= fit_slack <= least + allowance + tol
            assert ours.failsafe["total_slack"] == pytest.approx(least, abs=1e-5)
            assert ours.failsafe["fit_slack"] == pytest.approx(fit_slack, abs=1e-9)
            # the integers' slack within the rounding's least plus the allowance
            int_slack = int(np.abs(node.parent_hist - ours.histograms.sum(axis=0)).sum())
            assert least_round <= int_slack <= least_round + allowance
            check_promises(node, keep, ours.histograms)
            results[allowance] = ours
        # more slack can only lower the fit's objective
        objectives = [results[a].stats["objective"] for a in (0.0, 0.5, 1.0, 2.0)]
        assert all(b <= a + 1e-6 * max(1.0, a) for a, b in zip(objectives, objectives[1:]))
        assert objectives[2] < objectives[0] - 1e-3      # and here the allowance is used
        changed.append(not np.array_equal(results[0.0].histograms, results[1.0].histograms))
    # the rule matters: on these seeds it moves persons differently in some relaxation
    if seed in (0, 3):
        assert any(changed)


# ---------------------------------------------------------------------------------------------
# the option: validation, provenance, configuration, runs in parts
# ---------------------------------------------------------------------------------------------


def test_topdown_records_the_allowance_and_uses_it(review_case):   # noqa: F811
    truth, noisy, start, county, ed, g = review_case
    spec = Spec.e2e(LEVELS)
    census = topdown(noisy, spec, start=start)
    least = topdown(noisy, spec, start=start, failsafe_slack=0)
    assert census.provenance["solver"]["failsafe_slack"] == 1.0
    assert least.provenance["solver"]["failsafe_slack"] == 0.0
    (c_report,), (l_report,) = census.failsafe_reports, least.failsafe_reports
    assert c_report["slack_allowance"] == 1.0 and l_report["slack_allowance"] == 0.0
    assert c_report["total_slack"] == pytest.approx(l_report["total_slack"], abs=1e-6)
    assert l_report["fit_slack"] <= l_report["total_slack"] + 1e-5
    assert c_report["fit_slack"] <= c_report["total_slack"] + 1.0 + 1e-5
    # both keep the county's total and va_hisp_race answers; only that county's EDs differ
    for result in (census, least):
        summed = truth.geography.aggregate(result.histograms[3], 3, 2)
        assert summed[county].sum() == start[1][2][county].sum()
    others = truth.geography.parents[3] != county
    np.testing.assert_array_equal(census.histograms[3][others], least.histograms[3][others])


@pytest.mark.parametrize("bad", [-1, -0.5, float("nan"), float("inf"), "1", True, None])
def test_a_bad_failsafe_slack_is_refused_before_solving(review_case, bad):   # noqa: F811
    _, noisy, start, *_ = review_case
    with pytest.raises(PostprocError, match=r"failsafe_slack must be a (finite )?number"):
        topdown(noisy, Spec.e2e(LEVELS), start=start, failsafe_slack=bad)


def test_postproc_methods_lists_failsafe_slack():
    from postproc.cli.methods import describe
    from postproc.methods import get

    assert "failsafe_slack" in get("topdown").options()
    assert "failsafe_slack" in describe([get("topdown")], width=200)


def test_a_config_reads_failsafe_slack_and_names_the_line_of_a_bad_one(tmp_path):
    from postproc.apps.runs.config import load_config

    from test_pl94_run import REPO

    text = (REPO / "examples" / "pl94_2020.toml").read_text()
    assert "\npass_tolerance = 0.1\n" in text
    good = text.replace("\npass_tolerance = 0.1\n",
                        "\npass_tolerance = 0.1\nfailsafe_slack = 0.0\n")
    (tmp_path / "good.toml").write_text(good)
    assert load_config(tmp_path / "good.toml").method_options == {
        "pass_tolerance": 0.1, "failsafe_slack": 0.0}
    bad = good.replace("\nfailsafe_slack = 0.0\n", "\nfailsafe_slack = -1\n")
    (tmp_path / "bad.toml").write_text(bad)
    line = bad.splitlines().index("failsafe_slack = -1") + 1        # the option's own line
    with pytest.raises(PostprocError, match=rf"bad.toml, line {line}: topdown: failsafe_slack "
                                            r"must be a finite number ≥ 0"):
        load_config(tmp_path / "bad.toml")


def test_a_run_in_parts_passes_failsafe_slack_to_the_top_and_every_part(tmp_path, monkeypatch):
    from hierarchy.synth.census2020 import synthesize_2020
    from postproc.apps.runs import parts as parts_module
    from postproc.apps.runs.demo import demo_config
    from postproc.apps.runs.parts import run_in_parts

    synthesize_2020(3_000, seed=3, out=tmp_path / "data")
    config = demo_config(tmp_path, preset="pl94_2020", seed=3, executor="serial")
    config = replace(config, method_options={**config.method_options, "failsafe_slack": 0.25})
    seen = []

    def spy(*args, **kwargs):
        seen.append(kwargs["options"].failsafe_slack)
        return topdown(*args, **kwargs)

    monkeypatch.setattr(parts_module, "topdown", spy)
    done = run_in_parts(config, tmp_path / "out", part_blocks=60, log=lambda line: None)
    assert len(seen) == 1 + done.parts and set(seen) == {0.25}
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert manifest["provenance"]["solver"]["failsafe_slack"] == 0.25
