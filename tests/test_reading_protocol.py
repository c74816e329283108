"""The one reading protocol: the truth, the measurements and every result answer
``answers(level, query)`` for a workload name, an expression or a Query, and the histogram
holders give the same tidy frame."""

import numpy as np
import pytest

from hierarchy.budget import Budget
from hierarchy.errors import HierarchyError
from hierarchy.frames import refinement, resolve_query
from hierarchy.measurement import measure
from hierarchy.queries import Workload, e2e_workload, total
from hierarchy.schema import E2E_1940
from hierarchy.synth import synthesize_1940
from hierarchy.tabulation import tabulate
from postproc.result import Result

LEVELS = ["nation", "state", "county"]


@pytest.fixture(scope="module")
def case():
    truth = tabulate(synthesize_1940(3_000, seed=3).persons, schema=E2E_1940, levels=LEVELS)
    noisy = measure(truth, e2e_workload(E2E_1940), Budget.e2e(1, LEVELS), rng=5)
    exact = Result("exact", truth.schema, truth.geography, noisy.workload, truth.counts)
    return truth, noisy, exact


@pytest.mark.parametrize("query", ["total", "marginal(hhgq)", "marginal(votingage)",
                                   "marginal(votingage, hispanic)", "detailed"])
def test_truth_and_result_answer_alike(case, query):
    truth, _, exact = case
    for level in LEVELS:
        q = resolve_query(query, truth.schema, exact.workload)
        expected = q.answer(truth.level_counts(level))
        np.testing.assert_array_equal(truth.answers(level, query), expected)
        np.testing.assert_array_equal(exact.answers(level, query), expected)
        np.testing.assert_array_equal(truth.answers(level, q), expected)


def test_truth_frame_equals_result_frame(case):
    truth, _, exact = case
    for level in LEVELS:
        a, b = truth.to_frame(level), exact.to_frame(level, zeros=False)
        assert a.equals(b)
        assert int(a["count"].sum()) == 3_000
        # every parent geocode is the parent of the unit's geocode
        geo = truth.geography
        li = geo.level_index(level)
        if li:
            parent_of = dict(zip(geo.geocodes[li].astype(str),
                                 geo.geocodes[li - 1].astype(str)[geo.parents[li]]))
            assert (a[LEVELS[li - 1]] == a[level].map(parent_of)).all()


def test_noisy_answers_measured_and_derived(case):
    _, noisy, _ = case
    for level in LEVELS:
        for name in noisy.queries(level):
            np.testing.assert_array_equal(noisy.answers(level, name), noisy.get(level, name).values)
        values, how = noisy.derived_answers(level, "total")
        source = how.removeprefix("sum of ")
        expected = noisy.get(level, source).values.sum(axis=1, keepdims=True)
        np.testing.assert_array_equal(values, expected)
        # the most precise of the measured queries that determine the total
        variances = {n: float(noisy.get(level, n).variances.sum(axis=1).mean())
                     for n in noisy.queries(level)
                     if refinement(total(noisy.schema), noisy.workload[n]) is not None}
        assert variances[source] == min(variances.values())


def test_noisy_answers_unknown_or_undetermined_query_is_a_clear_error(case):
    truth, noisy, _ = case
    with pytest.raises(HierarchyError, match="unknown query 'nonsense'"):
        noisy.answers("nation", "nonsense")
    workload = Workload.from_expressions(truth.schema, {"total": "total"})
    only_totals = measure(truth, workload, Budget("pure", 1, {lv: "1/3" for lv in LEVELS},
                                                  {"total": 1}), rng=2)
    with pytest.raises(HierarchyError, match=r"'marginal\(hhgq\)' is not measured at level "
                                             r"'state' and no measured query \(\['total'\]\)"):
        only_totals.answers("state", "marginal(hhgq)")
