"""Sums over sets of units (``UnitSum``, ``[[sum]]``): a query's exact answers over a group of
sibling units together, as the 2020 state totals hold over a state's two pieces. The spec form
and its errors, the node engine against the generic CVXPY reference with a row across children,
the rounding, the failsafe and the grouped path holding it exactly, and the verification that
catches a result that breaks it."""

from dataclasses import replace

import numpy as np
import pytest
import scipy.sparse as sp

from hierarchy import E2E_1940, Budget, e2e_workload, measure, synthesize_1940, tabulate
from hierarchy.geography import Geography
from hierarchy.schema import Attribute, Schema
from invariants.errors import SpecError
from invariants.spec import Invariant, Spec, UnitSum
from invariants.verify import verify_histograms
from postproc import postprocess
from postproc.methods.topdown.generic import fit_node_generic
from postproc.methods.topdown.groups import solve_grouped
from postproc.methods.topdown.node import solve_node
from postproc.methods.topdown.task import ChildSum, NodeTask, QueryData
from postproc.methods.topdown.verify import VerificationError, verify_node

SPEC_TOML = '''
[[invariant]]
name = "tot"
levels = ["nation"]

[[sum]]
name = "state_total"
level = "state"
groups = [["004", "104"], ["044"]]
values = [7151502, 1097379]
'''


def test_the_toml_form_round_trips_and_names_its_errors_with_the_line():
    spec = Spec.from_toml_string(SPEC_TOML, source="s.toml")
    [s] = spec.sums
    assert s.groups == (("004", "104"), ("044",)) and s.values == ((7151502,), (1097379,))
    assert Spec.from_dict(spec.to_dict()) == spec
    assert "sum" not in Spec().to_dict()            # specs without sums keep their old form
    bad = SPEC_TOML.replace('values = [7151502, 1097379]', 'values = [7151502]')
    with pytest.raises(SpecError, match=r"s.toml, line 7: sum 'state_total': values must give "
                                        r"one entry per group \(2\)"):
        Spec.from_toml_string(bad, source="s.toml")
    with pytest.raises(SpecError, match="unit '004' is in two groups"):
        UnitSum("x", "state", [["004", "104"], ["004"]], [1, 2])
    with pytest.raises(SpecError, match="whole numbers"):
        UnitSum("x", "state", [["004"]], [1.5])
    with pytest.raises(SpecError, match="constraint and sum names must be unique"):
        Spec(sums=[UnitSum("x", "state", [["1"]], [1]), UnitSum("x", "state", [["2"]], [1])])


def _geo():
    return Geography.from_columns(["nation", "state", "county"],
                                  [[["1", "1", "2", "2"], ["a", "b", "c", "d"]]])[0]


def test_compiling_refuses_what_a_node_cannot_hold():
    schema = Schema((Attribute("sex", ("m", "f")),))
    geo = _geo()

    zeros = [np.zeros((1, 2), np.int64), np.zeros((2, 2), np.int64), np.zeros((4, 2), np.int64)]

    def compiled(s):         # compiles the spec, then checks the zero histograms against it
        return verify_histograms(zeros, Spec(sums=[s]), schema, geo, {}, invariants=True)

    with pytest.raises(SpecError, match="have different parents"):
        compiled(UnitSum("x", "county", [["b", "c"]], [1]))
    with pytest.raises(SpecError, match="root level has one unit"):
        compiled(UnitSum("x", "nation", [["0"]], [1]))
    with pytest.raises(SpecError, match="no county unit 'z'"):
        compiled(UnitSum("x", "county", [["a", "z"]], [1]))
    with pytest.raises(SpecError, match="has 2 answers but the values give 1"):
        compiled(UnitSum("x", "county", [["a", "b"]], [1], query="marginal(sex)"))
    with pytest.raises(SpecError, match="negative answer"):
        compiled(UnitSum("x", "county", [["a", "b"]], [-1]))
    # and on valid data it reports the groups whose sums are off, in exact integers
    problems = compiled(UnitSum("x", "county", [["a", "b"]], [1]))
    assert problems == ["x: a+b: total is 0, held at 1"]


def _node(rng, k=5, n=6, pair=(0, 2)):
    """A random node whose parent is the sum of random children, measured with noise, and the
    children ``pair``'s total held at its true value."""
    truth = rng.integers(0, 6, size=(k, n))
    values = truth + rng.normal(0, 2.0, size=truth.shape)
    detailed = QueryData("detailed", sp.identity(n, format="csr"), values,
                         rng.uniform(0.5, 2.0, size=(k, n)))
    total = QueryData("total", sp.csr_matrix(np.ones((1, n))),
                      truth.sum(axis=1, keepdims=True) + rng.normal(0, 1.0, size=(k, 1)),
                      np.ones((k, 1)))
    held = ChildSum.exact(np.array(pair), sp.csr_matrix(np.ones((1, n), np.int64)),
                          np.array([int(truth[list(pair)].sum())]), ("pair: total",))
    task = NodeTask("county", "p", truth.sum(axis=0), np.array([f"c{i}" for i in range(k)],
                                                                dtype=object),
                    (detailed, total), sp.csr_matrix((0, n), dtype=np.int64), np.zeros((k, 0)),
                    np.zeros((k, 0)), np.zeros((k, n), bool), sums=(held,))
    return task, held


@pytest.mark.parametrize("seed", range(5))
def test_the_engine_fits_what_the_generic_reference_fits_and_rounds_holding_the_sum(seed):
    task, held = _node(np.random.default_rng(seed))
    result = solve_node(task, keep_continuous=True)
    x, objective, _ = fit_node_generic(task)
    assert np.allclose(result.continuous, x, atol=1e-4)
    assert result.stats["objective"] == pytest.approx(objective, rel=1e-6, abs=1e-6)
    hist = result.histograms
    assert int(hist[held.children].sum()) == int(held.lower[0])      # exact, in integers
    assert (hist.sum(axis=0) == task.parent_hist).all() and (hist >= 0).all()
    # the fit without the row does not hold it (so the test would catch a dropped row)
    free = solve_node(replace(task, sums=()), keep_continuous=True).continuous
    assert abs(free[held.children].sum() - held.lower[0]) > 1e-3


def test_a_result_that_breaks_the_sum_fails_verification():
    task, held = _node(np.random.default_rng(7))
    hist = solve_node(task).histograms.copy()
    i, j = held.children                   # move a person from the pair to a third child
    cell = int(np.flatnonzero(hist[i] > 0)[0])
    hist[i, cell] -= 1
    hist[1, cell] += 1
    with pytest.raises(VerificationError, match=r"pair: total = \d+ outside \["):
        verify_node(task, hist)


def test_the_failsafe_relaxes_parent_consistency_but_never_the_sum():
    task, held = _node(np.random.default_rng(3))
    n = task.n
    # child 1's total at least the parent's total plus 3: infeasible without the failsafe
    bound = np.full((task.k, 1), -np.inf)
    bound[1, 0] = task.parent_hist.sum() + 3
    task = replace(task, matrix=sp.csr_matrix(np.ones((1, n), np.int64)), lower=bound,
                   upper=np.full((task.k, 1), np.inf), labels=("big: total",),
                   failsafe_keep=())
    result = solve_node(task)
    assert result.failsafe is not None
    hist = result.histograms
    assert int(hist[1].sum()) >= task.parent_hist.sum() + 3
    assert int(hist[held.children].sum()) == int(held.lower[0])


def test_a_node_with_a_sum_is_solved_whole_not_in_groups():
    task, held = _node(np.random.default_rng(11), k=8, pair=(1, 6))
    result = solve_grouped(task, 3)
    assert result.stats.get("groups", 1) == 1
    assert int(result.histograms[held.children].sum()) == int(held.lower[0])


def test_topdown_and_gls_hold_a_sum_over_states():
    levels = ["nation", "state", "county"]
    data = synthesize_1940(4_000, seed=5)
    truth = tabulate(data.persons, schema=E2E_1940, levels=levels)
    states = [str(s) for s in truth.geography.geocodes[1]]
    pairs = [states[i:i + 2] for i in range(0, len(states) - 1, 2)]
    index = {s: i for i, s in enumerate(states)}
    totals = truth.counts[1].sum(axis=1)
    spec = Spec([Invariant("tot", ["nation"])], sums=[UnitSum(
        "pair_total", "state", pairs, [int(totals[[index[s] for s in p]].sum()) for p in pairs])])
    noisy = measure(truth, e2e_workload(E2E_1940), Budget.e2e(0.5, levels), rng=3, spec=spec)
    result = postprocess(noisy, "topdown", spec)
    got = result.histograms[1].sum(axis=1)
    for p in pairs:
        at = [index[s] for s in p]
        assert got[at].sum() == totals[at].sum()
    assert verify_histograms(result.histograms, spec, E2E_1940, truth.geography,
                             noisy.invariants, invariants=True) == []
    broken = [h.copy() for h in result.histograms]
    a, b = index[pairs[0][0]], index[pairs[1][0]]
    cell = int(np.flatnonzero(broken[1][a] > 0)[0])
    broken[1][a, cell] -= 1
    broken[1][b, cell] += 1
    assert any("pair_total" in p for p in verify_histograms(
        broken, spec, E2E_1940, truth.geography, noisy.invariants, invariants=True))
    estimate = postprocess(noisy, "gls", spec).histograms[1].sum(axis=1)
    for p in pairs:
        at = [index[s] for s in p]
        assert estimate[at].sum() == pytest.approx(totals[at].sum(), abs=1e-6)


def test_an_unmeasured_root_is_solved_with_its_children_under_its_rows():
    """A root without measurements (a subset of a Noisy Measurement File's states): its
    children in one problem, the root's total held across them, the root their sum."""
    levels = ["nation", "state", "county"]
    data = synthesize_1940(3_000, seed=8)
    truth = tabulate(data.persons, schema=E2E_1940, levels=levels)
    spec = Spec([Invariant("tot", ["nation"])])
    full = measure(truth, e2e_workload(E2E_1940), Budget.e2e(0.5, levels), rng=4, spec=spec)
    measurements = {lv: m for lv, m in full.measurements.items() if lv != "nation"}
    noisy = replace(full, measurements=measurements)
    assert not noisy.queries("nation")
    result = postprocess(noisy, "topdown", spec)
    total = int(truth.counts[0].sum())
    assert int(result.histograms[0].sum()) == total == int(result.histograms[1].sum())
    assert (result.histograms[0] == result.histograms[1].sum(axis=0, keepdims=True)).all()
    assert "joint_root" in result.provenance
    # the root's rows are what holds the total (no child has one of its own): another
    # published total is met exactly
    moved = replace(noisy, invariants={**noisy.invariants,
                                       "nation": {"tot": np.array([total + 7])}})
    again = postprocess(moved, "topdown", spec)
    assert int(again.histograms[0].sum()) == total + 7 == int(again.histograms[2].sum())


def _gls_case(seed: int):
    """A nation of four states (A, B, C, D; B and C a pair whose total is held, as a state's
    two pieces), each with two counties, measured everywhere with drawn variances."""
    from hierarchy.noisy import Measurement, NoisyHierarchy
    from hierarchy.queries import Workload, detailed, total

    schema = Schema((Attribute("sex", ("m", "f")), Attribute("age", ("young", "old"))))
    columns = [["A", "A", "B", "B", "C", "C", "D", "D"],
               ["A1", "A2", "B1", "B2", "C1", "C2", "D1", "D2"]]
    geo, _ = Geography.from_columns(["nation", "state", "county"], [columns])
    rng = np.random.default_rng(seed)
    workload = Workload((detailed(schema), total(schema)))
    measurements = {lv: {q.name: Measurement(
        q.name, rng.integers(0, 40, (geo.n_units(li), q.n_answers)),
        rng.uniform(0.5, 4.0, (geo.n_units(li), q.n_answers))) for q in workload}
        for li, lv in enumerate(geo.levels)}
    noisy = NoisyHierarchy(schema, geo, workload, measurements)
    value = int(rng.integers(40, 120))
    spec = Spec(sums=[UnitSum("pair", "state", [["B", "C"]], [value])])
    return noisy, spec, value


@pytest.mark.parametrize("seed", range(4))
def test_gls_holds_a_sum_over_siblings_as_the_dense_referee_does(seed):
    """gls inserts a level of the groups above the sums' units; its estimate and covariances
    are the dense constrained GLS's with the row across B and C (to 1e-8)."""
    from test_gls_reference import _dense_gls

    noisy, spec, value = _gls_case(seed)
    geo = noisy.geography
    parents = [np.array([-1])] + [np.asarray(geo.parents[li]) for li in (1, 2)]
    terms = [[(noisy.workload[name].matrix.toarray(), m.values.astype(float), m.weights)
              for name, m in noisy.measurements[lv].items()] for lv in geo.levels]
    want, covariance = _dense_gls(parents, terms, noisy.schema.size,
                                  sums=[(1, [1, 2], np.ones(noisy.schema.size), value)])
    result = postprocess(noisy, "gls", spec)
    for li in range(3):
        np.testing.assert_allclose(result.histograms[li], want[li], rtol=0,
                                   atol=1e-8 * max(1.0, np.abs(want[li]).max()))
    assert result.histograms[1][1:3].sum() == pytest.approx(value, abs=1e-8)
    unconstrained = postprocess(noisy, "gls").histograms[1][1:3].sum()
    assert abs(unconstrained - value) > 1e-3           # the row does something
    frame = result.intervals("state", "total", interval=0.9)
    for u in range(4):
        np.testing.assert_allclose(frame["se"].iloc[u] ** 2,
                                   covariance(1, u).sum(), rtol=1e-8, atol=1e-10)
    bd = postprocess(noisy, "bluedown", spec)
    assert int(bd.histograms[1][1:3].sum()) == value
