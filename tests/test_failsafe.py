"""The failsafe keeps the parent's total and its kept margins exact (docs/topdown.md).

When a node is infeasible, parent consistency is relaxed cell by cell, but — as in the Census
Bureau's 2018 and 2020 TopDown code — the children must still sum to the parent's total and to
its kept query answers (E2E: ``va_hisp_race``), so the failsafe *moves* persons between cells
instead of adding them. Checked here, from the data directly (numpy marginals, not the code
that enforces them):

* the review's case — an ED with a nursing facility whose county was rounded with nobody in a
  nursing facility: before the fix the EDs summed to the county + 1; now to the county exactly,
  in the total and in all 24 ``va_hisp_race`` answers; ``failsafe_keep=()`` still gives + 1;
* the fallbacks, one level at a time and recorded: margins → total → free cells;
* a parent with no persons whose children must hold persons is an error naming both, raised
  before any solver runs;
* the exact verification checks the kept answers (a violation raises);
* a property over random infeasible nodes (20 seeds): totals and kept margins exact,
  nonnegative integers, every child constraint holds, the report matches the result.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
import scipy.sparse as sp

from hierarchy.budget import Budget
from hierarchy.measurement import measure
from hierarchy.queries import e2e_workload
from hierarchy.schema import E2E_1940
from invariants.compile import compile_spec, violations
from invariants.spec import Invariant, Spec
from postproc.errors import PostprocError
from postproc.infra.solvers import InfeasibleError
from postproc.methods.topdown import NodeTask, QueryData, solve_node, topdown
from postproc.methods.topdown.failsafe import KeptQuery, total_kept
from postproc.methods.topdown.node import VerificationError

from test_topdown import LEVELS, make_noisy, make_truth  # noqa: E402  (tests/ is on sys.path)

HHGQ = 8
VA_HISP_RACE = e2e_workload(E2E_1940)["va_hisp_race"]


def by_type(hist):
    """Persons per hhgq type (hhgq is the slowest attribute of the E2E schema)."""
    return hist.reshape(hist.shape[0], HHGQ, -1).sum(axis=2)


def by_class(hist):
    """Persons per votingage × hispanic × race class (hhgq summed out): ``va_hisp_race``."""
    return hist.reshape(hist.shape[0], HHGQ, -1).sum(axis=1)


# ---------------------------------------------------------------------------------------------
# the review's case, end to end at the ED level
# ---------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def review_case():
    """Counties from the truth, except one: a county with several EDs, one of which has the
    county's only facility of a group-quarters type g, gets its type-g persons moved to
    households of the same votingage × hispanic × race class. Its total and va_hisp_race margin
    are the truth's; the ED needs ≥ 1 person of type g and the county has none."""
    truth = make_truth(60_000, seed=11)
    noisy = make_noisy(truth, 5)
    geo = truth.geography
    units, parent_of = truth.units[3], geo.parents[3]
    county_units = truth.units[2]
    many = geo.n_children(2)[parent_of] > 1
    candidates = [(ed, g) for g in (2, 3, 4, 6, 7) for ed in np.flatnonzero(many)
                  if units[ed, g] == 1 and county_units[parent_of[ed], g] == 1]
    assert candidates, "the synthetic data has no single-facility ED to build the case from"
    ed, g = min(candidates)
    county = int(parent_of[ed])
    counties = truth.counts[2].copy()
    h = counties[county].reshape(HHGQ, -1)
    h[0] += h[g]
    h[g] = 0
    start = (3, [truth.counts[0], truth.counts[1], counties])
    return truth, noisy, start, county, ed, g


def ed_promises(truth, noisy, result, parents):
    """The E2E promises at the ED level, from the truth's units data (not the compiled spec)."""
    hist = result.histograms[3]
    units = truth.units[3]
    assert hist.dtype == np.int64 and (hist >= 0).all()
    persons = by_type(hist)
    assert (persons >= units).all()                                    # hhgq_total_lb
    assert (persons[units == 0] == 0).all()                            # hhgq_total_ub
    assert (persons[:, [1, 5]] == 0).all()                             # structural zeros
    assert (hist.sum(1) >= units[:, 0]).all()                          # total ≥ households
    # and the compiled spec agrees, in exact integer arithmetic
    lc = compile_spec(Spec.e2e(LEVELS), truth.schema, truth.geography,
                      noisy.invariants)["enum_dist"]
    assert violations(lc, hist) == []
    summed = truth.geography.aggregate(hist, 3, 2)
    return summed - parents


def test_review_case_moves_a_person_and_keeps_total_and_va_hisp_race(review_case):
    truth, noisy, start, county, ed, g = review_case
    parents = start[1][2]
    result = topdown(noisy, Spec.e2e(LEVELS), start=start)
    diff = ed_promises(truth, noisy, result, parents)
    # only the failsafe county differs, and only by moving persons
    others = np.delete(np.arange(parents.shape[0]), county)
    assert not diff[others].any()
    assert diff[county].sum() == 0                                      # total exact
    np.testing.assert_array_equal(by_class(diff[county:county + 1]), 0)  # 24 answers exact
    assert diff[county].any()                                           # …and persons moved
    assert by_type(diff[county:county + 1])[0, g] == 1   # the ED's facility got its person
    # the report names the unit and what moved
    (report,) = result.failsafe_reports
    geo = truth.geography
    assert report["level"] == "enum_dist" and report["parent"] == geo.geocodes[2][county]
    assert report["relaxation"] == "margins" and report["fallbacks"] == []
    assert report["kept"] == ["total", "va_hisp_race"]
    assert report["persons_added"] == 0
    assert report["gained"] == {int(j): int(diff[county, j]) for j in
                                np.flatnonzero(diff[county] > 0)}
    assert report["lost"] == {int(j): int(-diff[county, j]) for j in
                              np.flatnonzero(diff[county] < 0)}
    assert sum(report["gained"].values()) == sum(report["lost"].values()) == 1
    assert report["total_slack"] == pytest.approx(2, abs=1e-5)        # one person, two cells
    gq_label = E2E_1940.attribute("hhgq").labels[g]
    (gained,) = report["gained"]
    assert report["cell_labels"][gained].startswith(f"hhgq={gq_label}, ")
    assert set(report["cell_labels"]) == set(report["gained"]) | set(report["lost"])
    assert result.provenance["solver"]["failsafe_keep"]["enum_dist"] == ["total",
                                                                        "va_hisp_race"]


def test_review_case_old_mode_adds_a_person(review_case):
    """``failsafe_keep=()`` keeps nothing: with the least slack (``failsafe_slack=0``) the EDs
    hold the county + 1, and the va_hisp_race answer of the added person's class is off by
    one — the defect, kept as an option. With the default allowance (1.0) the slack may be one
    more: the EDs hold the county + 1 or + 2."""
    truth, noisy, start, county, ed, g = review_case
    parents = start[1][2]
    result = topdown(noisy, Spec.e2e(LEVELS), start=start, failsafe_keep=(), failsafe_slack=0)
    diff = ed_promises(truth, noisy, result, parents)
    assert diff[county].sum() == 1
    assert np.abs(by_class(diff[county:county + 1])).sum() == 1
    (report,) = result.failsafe_reports
    assert report["relaxation"] == "cells" and report["kept"] == []
    assert report["persons_added"] == 1 and report["lost"] == {}
    assert result.provenance["solver"]["failsafe_keep"]["enum_dist"] == []
    default = topdown(noisy, Spec.e2e(LEVELS), start=start, failsafe_keep=())
    diff = ed_promises(truth, noisy, default, parents)
    (report,) = default.failsafe_reports
    assert report["total_slack"] == pytest.approx(1, abs=1e-6)       # the least: one person
    assert 1 <= diff[county].sum() == report["persons_added"] <= 2   # ≤ the least + 1


def test_review_case_keeping_only_the_total(review_case):
    truth, noisy, start, county, ed, g = review_case
    result = topdown(noisy, Spec.e2e(LEVELS), start=start, failsafe_keep=["total"])
    diff = ed_promises(truth, noisy, result, start[1][2])
    assert diff[county].sum() == 0 and diff[county].any()
    assert result.failsafe_reports[0]["relaxation"] == "total"


def test_ordinary_runs_do_not_depend_on_failsafe_keep():
    """Nodes that need no failsafe are solved exactly as before, whatever is kept."""
    truth = make_truth(20_000, seed=4)
    noisy = make_noisy(truth, 8)
    default = topdown(noisy, Spec.e2e(LEVELS))
    assert default.failsafe_reports == []
    for keep in ((), ["hhgq"]):
        other = topdown(noisy, Spec.e2e(LEVELS), failsafe_keep=keep)
        for a, b in zip(default.histograms, other.histograms):
            np.testing.assert_array_equal(a, b)


def test_failsafe_keep_is_validated(review_case):
    _, noisy, start, *_ = review_case
    with pytest.raises(PostprocError, match=r"unknown queries \['race'\].*'va_hisp_race'"):
        topdown(noisy, Spec.e2e(LEVELS), start=start, failsafe_keep=["race"])
    with pytest.raises(PostprocError, match=r"failsafe_keep must be 'auto' or a list"):
        topdown(noisy, Spec.e2e(LEVELS), start=start, failsafe_keep="va_hisp_race")


# ---------------------------------------------------------------------------------------------
# a parent with no persons whose children must hold persons
# ---------------------------------------------------------------------------------------------


def test_empty_parent_with_invariant_children_is_an_error_before_any_solver(monkeypatch):
    """``tot`` published at the county level but the state handed in with nobody: splitting it
    could only add persons. The error names the state and its counties, and no solver runs."""
    import postproc.methods.topdown.node as node_module
    import postproc.methods.topdown.relaxed as relaxed_module
    import postproc.methods.topdown.rounding as rounding_module

    truth = make_truth(20_000, seed=4, eds_per_county=1)      # some states have 3 counties
    spec = Spec.e2e(LEVELS)
    spec = replace(spec, invariants=(Invariant("tot", tuple(LEVELS[:3])),
                                     *spec.invariants[1:]))
    noisy = measure(truth, e2e_workload(E2E_1940), Budget.e2e(1, LEVELS), "geometric", rng=2,
                    spec=spec)
    geo = truth.geography
    state = int(np.argmax(geo.n_children(1)))
    states = truth.counts[1].copy()
    states[state] = 0

    def no_solver(*args, **kwargs):
        raise AssertionError("a solver ran")

    for module in (node_module, relaxed_module):
        monkeypatch.setattr(module, "solve_qp", no_solver)
    for module in (rounding_module, relaxed_module):
        monkeypatch.setattr(module, "solve_lp", no_solver)
    for keep in ("auto", ()):
        with pytest.raises(InfeasibleError) as info:
            topdown(noisy, spec, start=(2, [truth.counts[0], states]), failsafe_keep=keep)
        msg = str(info.value)
        counties = geo.geocodes[2][geo.parents[2] == state]
        assert counties.size > 1
        assert f"county children of {geo.geocodes[1][state]!r}" in msg
        assert f"the parent has no persons, but {counties.size} of its {counties.size} " \
               "children must hold persons" in msg
        assert all(repr(c) in msg for c in counties)
        assert f"{int(truth.counts[1][state].sum()):,} in all" in msg
        assert "tot" in msg


def small_task(parent, lower, upper, values, *, keep=None, labels=None, name="P"):
    """A node over a 2 × 2 schema (type × class, type slowest): rows total, type 0, type 1."""
    rows = np.array([[1, 1, 1, 1], [1, 1, 0, 0], [0, 0, 1, 1]], np.int64)
    lower, upper = np.asarray(lower, float), np.asarray(upper, float)
    zero = (upper[:, 1:] <= 0).repeat(2, axis=1)
    k = lower.shape[0]
    return NodeTask("county", name, np.asarray(parent, np.int64),
                    np.array([f"c{i}" for i in range(k)], dtype=object),
                    (QueryData("detailed", sp.identity(4, format="csr"),
                               np.asarray(values, float), np.ones((k, 4))),),
                    sp.csr_matrix(rows), lower, upper, zero,
                    labels or ("tot: total", "lb: type=0", "lb: type=1"), failsafe_keep=keep)


CLASS = KeptQuery("class", sp.csr_matrix(np.array([[1, 0, 1, 0], [0, 1, 0, 1]])))
INF = np.inf


def test_empty_parent_is_refused_by_solve_node_too():
    task = small_task([0, 0, 0, 0], [[-INF, 0, 1], [-INF, 0, 0]], [[INF, INF, INF]] * 2,
                      np.zeros((2, 4)), name="S9")
    with pytest.raises(InfeasibleError, match=r"county children of 'S9': the parent has no "
                                              r"persons, but 1 of its 2 children.*'c0' "
                                              r"\(lb: type=1 ≥ 1\)"):
        solve_node(task)
    # an empty parent whose children need no one is an ordinary (all-zero) node
    ok = small_task([0, 0, 0, 0], [[-INF, 0, 0]] * 2, [[INF] * 3] * 2, np.ones((2, 4)))
    np.testing.assert_array_equal(solve_node(ok).histograms, 0)


# ---------------------------------------------------------------------------------------------
# fallbacks, one level of relaxation at a time
# ---------------------------------------------------------------------------------------------


def test_margins_kept_when_they_can_be():
    # c0 has a type-1 unit (needs ≥ 1 type-1 person); the parent has nobody of type 1
    task = small_task([3, 2, 0, 0], [[-INF, 0, 1], [-INF, 0, 0]],
                      [[INF, INF, INF], [INF, INF, 0]], [[1, 1, 1, 0], [2, 1, 0, 0]],
                      keep=(total_kept(4), CLASS))
    res = solve_node(task)
    hist, rep = res.histograms, res.failsafe
    assert hist.sum() == 5 and hist[0, 2:].sum() >= 1
    np.testing.assert_array_equal(CLASS.matrix @ hist.sum(0), CLASS.matrix @ task.parent_hist)
    assert rep["relaxation"] == "margins" and rep["fallbacks"] == []
    assert rep["persons_added"] == 0 and len(rep["gained"]) == len(rep["lost"]) == 1
    with pytest.raises(InfeasibleError, match="county children of 'P' are infeasible.*kept "
                                              "exact.*failsafe on"):
        solve_node(task, failsafe=False)


def test_margins_infeasible_fall_back_to_the_total():
    """c0 needs a type-1 person of class 0, and the parent has nobody of class 0: the class
    margin cannot be kept, the total can."""
    rows = ("tot: total", "lb: type=0", "gq0: type=1, class=0")
    task = small_task([0, 5, 0, 0], [[-INF, 0, 1], [-INF, 0, 0]],
                      [[INF, INF, INF], [INF, INF, 0]], [[0, 1, 1, 0], [0, 3, 0, 0]],
                      keep=(total_kept(4), CLASS), labels=rows)
    task = replace(task, matrix=sp.csr_matrix(np.array([[1, 1, 1, 1], [1, 1, 0, 0],
                                                        [0, 0, 1, 0]], np.int64)),
                   zero=np.array([[False] * 4, [False, False, True, True]]))
    res = solve_node(task)
    hist, rep = res.histograms, res.failsafe
    assert hist.sum() == 5 and hist[0, 2] >= 1
    assert rep["relaxation"] == "total" and rep["kept"] == ["total"]
    (fallback,) = rep["fallbacks"]
    assert fallback["relaxation"] == "margins" and fallback["kept"] == ["total", "class"]
    assert "gq0: type=1, class=0" in fallback["reason"]
    assert rep["persons_added"] == 0 and rep["gained"] == {2: 1} and rep["lost"] == {1: 1}


def test_total_infeasible_falls_back_to_free_cells():
    """The children's invariant totals (2 + 2) disagree with the parent's 6: nothing can be
    kept, and the report says so step by step."""
    task = small_task([5, 1, 0, 0], [[2, 0, 0], [2, 0, 0]], [[2, INF, 0], [2, INF, 0]],
                      [[2, 0.5, 0, 0], [2.5, 0.5, 0, 0]], keep=(total_kept(4), CLASS))
    res = solve_node(task)
    rep = res.failsafe
    assert res.histograms.sum(1).tolist() == [2, 2]
    assert rep["relaxation"] == "cells" and rep["kept"] == []
    assert [f["relaxation"] for f in rep["fallbacks"]] == ["margins", "total"]
    assert rep["persons_added"] == -2 and rep["total_slack"] == pytest.approx(2, abs=1e-6)


def test_verification_checks_the_kept_answers(monkeypatch):
    """A rounding that moved a person across classes breaks a kept answer: VerificationError."""
    import postproc.methods.topdown.relaxed as relaxed_module

    real = relaxed_module.round_node

    def crossing(task, x_star, layout, failsafe=False, keep=()):
        hist, stats = real(task, x_star, layout, failsafe=failsafe, keep=keep)
        if failsafe and keep:
            hist = hist.copy()
            j = int(np.flatnonzero(hist[1, :2])[0])      # a class-j household person of c1 …
            hist[1, j] -= 1
            hist[1, 1 - j] += 1                           # … moved to the other class
            stats = dict(stats, round_slack_cells=[0, 1, 2, 3])
        return hist, stats

    monkeypatch.setattr(relaxed_module, "round_node", crossing)
    task = small_task([3, 2, 0, 0], [[-INF, 0, 1], [-INF, 0, 0]],
                      [[INF, INF, INF], [INF, INF, 0]], [[1, 1, 1, 0], [2, 1, 0, 0]],
                      keep=(total_kept(4), CLASS))
    with pytest.raises(VerificationError, match=r"kept answer class\[\d\]: children sum to"):
        solve_node(task)


# ---------------------------------------------------------------------------------------------
# property: random infeasible nodes
# ---------------------------------------------------------------------------------------------

N_TYPES, N_CLASSES = 3, 4          # cells: type × class, type slowest (like hhgq)


def random_infeasible_task(seed):
    """Children drawn from a random truth, with units of each type they hold persons of
    (≥ 1 person per unit, none of a type without units; some children's totals invariant).
    The parent is the truth's sum with every type-1 person moved to type 0 in the same class:
    its total and class margin are the truth's, so keeping them is feasible, but the child with
    a type-1 unit cannot be served by parent consistency."""
    rng = np.random.default_rng(seed)
    k, n = int(rng.integers(2, 6)), N_TYPES * N_CLASSES
    truth = rng.integers(0, 5, (k, n)) * (rng.random((k, n)) < 0.6)
    truth[0, N_CLASSES + int(rng.integers(N_CLASSES))] += 1           # c0 holds type 1
    persons = truth.reshape(k, N_TYPES, N_CLASSES).sum(2)
    units = np.where(persons > 0, rng.integers(1, np.maximum(persons, 1) + 1), 0)
    types = np.kron(np.eye(N_TYPES, dtype=np.int64), np.ones((1, N_CLASSES), np.int64))
    rows = np.vstack([np.ones((1, n), np.int64), types])
    tot = truth.sum(1).astype(float)
    fixed = rng.random(k) < 0.4
    lower = np.column_stack([np.where(fixed, tot, units[:, 0]), units]).astype(float)
    upper = np.column_stack([np.where(fixed, tot, INF),
                             np.where(units == 0, 0.0, INF)]).astype(float)
    zero = np.repeat(units == 0, N_CLASSES, axis=1)
    parent = truth.sum(0).reshape(N_TYPES, N_CLASSES)
    parent[0] += parent[1]
    parent[1] = 0
    values = truth + rng.integers(-2, 3, truth.shape)
    klass = KeptQuery("class", sp.csr_matrix(np.tile(np.eye(N_CLASSES, dtype=np.int64),
                                                     N_TYPES)))
    task = NodeTask("county", f"P{seed}", parent.ravel(),
                    np.array([f"c{i}" for i in range(k)], dtype=object),
                    (QueryData("detailed", sp.identity(n, format="csr"), values.astype(float),
                               rng.choice([0.25, 1.0, 4.0], (k, n))),),
                    sp.csr_matrix(rows), lower, upper, zero,
                    ("tot: total",) + tuple(f"lb/ub: type={t}" for t in range(N_TYPES)),
                    failsafe_keep=(total_kept(n), klass))
    return task, truth, klass


@pytest.mark.parametrize("seed", range(20))
def test_random_infeasible_nodes_move_persons_within_kept_margins(seed):
    task, truth, klass = random_infeasible_task(seed)
    with pytest.raises(InfeasibleError):
        solve_node(task, failsafe=False)
    res = solve_node(task)
    hist, rep = res.histograms, res.failsafe
    parent = task.parent_hist
    # nonnegative integers, zero cells respected
    assert hist.dtype == np.int64 and (hist >= 0).all() and (hist[task.zero] == 0).all()
    # the total and the kept margin exactly; persons moved, none added
    assert hist.sum() == parent.sum()
    np.testing.assert_array_equal(klass.matrix @ hist.sum(0), klass.matrix @ parent)
    # every child constraint, in exact integer arithmetic
    vals = (task.matrix @ hist.T).T
    assert (vals >= np.where(np.isfinite(task.lower), task.lower, -1)).all()
    assert (vals <= np.where(np.isfinite(task.upper), task.upper, vals.max() + 1)).all()
    # the report: unit, relaxation, what moved — matching the result
    diff = hist.sum(0) - parent
    assert rep["level"] == "county" and rep["parent"] == f"P{seed}"
    assert rep["relaxation"] == "margins" and rep["fallbacks"] == []
    assert rep["gained"] == {int(j): int(diff[j]) for j in np.flatnonzero(diff > 0)}
    assert rep["lost"] == {int(j): int(-diff[j]) for j in np.flatnonzero(diff < 0)}
    assert rep["persons_added"] == 0
    assert set(np.flatnonzero(diff).tolist()) <= set(rep["cells"])
    # nested kept queries keep the rounding LP totally unimodular: no MILP was needed
    assert res.stats["rounding"] == "lp"
    # the least slack is no more than the truth's distance from the parent
    assert rep["total_slack"] <= np.abs(truth.sum(0) - parent).sum() + 1e-6
