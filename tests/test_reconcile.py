"""The simple reconcilers of a NoisyHierarchy: least_squares, clip_scale, rake, rake_unclipped,
bottom_up.

Every run goes through the registry (``postprocess``), so each result is also checked against
its method's declared promises by :func:`invariants.verify.verify_histograms`.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from hierarchy.budget import Budget
from hierarchy.geography import Geography
from hierarchy.measurement import measure
from hierarchy.noisy import Measurement, NoisyHierarchy
from hierarchy.queries import Workload, detailed, e2e_workload, marginal, total
from hierarchy.schema import E2E_1940, Attribute, Schema
from hierarchy.synth import synthesize_1940
from hierarchy.tabulation import tabulate
from invariants.spec import Invariant, Spec
from postproc.errors import PostprocError
from postproc.methods import get, postprocess

LEVELS = ["nation", "state", "county"]
METHODS = ["least_squares", "clip_scale", "rake", "rake_unclipped", "bottom_up"]


@pytest.fixture(scope="module")
def truth():
    return tabulate(synthesize_1940(5_000, seed=1).persons, schema=E2E_1940, levels=LEVELS)


@pytest.fixture(scope="module")
def noisy(truth):
    """E2E measurements at every level (ε = 1, small enough for many negative cells), with the
    totals of nation and state published."""
    return measure(truth, e2e_workload(E2E_1940), Budget.e2e(1, LEVELS), rng=4,
                   publish={"tot": ["nation", "state"]})


def _budget(per_level: dict[str, dict[str, int]]) -> Budget:
    share = Fraction(1, len(per_level))
    return Budget("pure", 1, {lv: share for lv in per_level},
                  {lv: {q: Fraction(1, len(qs)) for q in qs} for lv, qs in per_level.items()})


def _tiny(values: dict[str, dict[str, np.ndarray]], variances=None) -> NoisyHierarchy:
    """A hand-built hierarchy: 6 cells (a × b), nation → 2 states → 5 counties."""
    schema = Schema((Attribute("a", ("a0", "a1")), Attribute("b", ("b0", "b1", "b2"))))
    geo = Geography(("nation", "state", "county"),
                    (np.array(["US"]), np.array(["S1", "S2"]),
                     np.array(["C1", "C2", "C3", "C4", "C5"])),
                    (np.array([-1]), np.array([0, 0]), np.array([0, 0, 1, 1, 1])))
    workload = Workload((detailed(schema), total(schema), marginal(schema, "a", name="a"),
                         marginal(schema, "b", name="b")))
    variances = variances or {}
    measurements = {lv: {q: Measurement(q, np.asarray(v),
                                        variances.get(lv, {}).get(q, np.ones(np.shape(v))))
                         for q, v in qs.items()} for lv, qs in values.items()}
    return NoisyHierarchy(schema, geo, workload, measurements, {}, {"randomness": {}})


# -- least_squares ------------------------------------------------------------------------------
def test_least_squares_of_detailed_alone_is_the_measurements(truth):
    noisy = measure(truth, e2e_workload(E2E_1940),
                    _budget({lv: {"detailed": 1} for lv in LEVELS}), rng=5)
    result = postprocess(noisy, "least_squares")
    assert result.method == "least_squares" and not result.integer
    for li, level in enumerate(LEVELS):
        np.testing.assert_allclose(result.histograms[li], noisy.get(level, "detailed").values,
                                   rtol=0, atol=1e-9)


def test_least_squares_matches_dense_lstsq_with_several_queries_and_weights():
    rng = np.random.default_rng(0)
    units = {"nation": 1, "state": 2, "county": 5}
    answers = {"detailed": 6, "total": 1, "a": 2, "b": 3}
    measured = {"nation": ["detailed", "total", "a", "b"], "state": ["detailed", "b"],
                "county": ["detailed", "total", "a"]}
    values = {lv: {q: rng.normal(10, 5, (units[lv], answers[q])) for q in qs}
              for lv, qs in measured.items()}
    # two distinct variances per query among the counties: several weight groups per level
    variances = {lv: {q: rng.choice([1.0, 4.0], size=(units[lv], 1)) * np.ones(answers[q])
                      for q in qs} for lv, qs in measured.items()}
    noisy = _tiny(values, variances)
    result = postprocess(noisy, "least_squares")
    assert result.provenance["weight_groups"]["county"] > 1
    for li, level in enumerate(units):
        for u in range(units[level]):
            rows, rhs = [], []
            for q in measured[level]:
                root_w = 1 / np.sqrt(variances[level][q][u])
                rows.append(root_w[:, None] * noisy.workload[q].matrix.toarray())
                rhs.append(root_w * values[level][q][u])
            expected = np.linalg.lstsq(np.vstack(rows), np.concatenate(rhs), rcond=None)[0]
            np.testing.assert_allclose(result.histograms[li][u], expected, rtol=1e-9, atol=1e-9)


def test_least_squares_names_a_level_whose_queries_do_not_determine_the_histogram(truth):
    noisy = measure(truth, e2e_workload(E2E_1940),
                    _budget({"nation": {"detailed": 1}, "state": {"hhgq": 1, "va_hisp_race": 1},
                             "county": {"detailed": 1}}), rng=5)
    with pytest.raises(PostprocError, match=r"least_squares: level 'state' measured "
                                            r"\['hhgq', 'va_hisp_race'\].*measure 'detailed'"):
        postprocess(noisy, "least_squares")


# -- clip_scale ---------------------------------------------------------------------------------
def test_clip_scale_is_nonnegative_with_the_target_totals(noisy):
    result = postprocess(noisy, "clip_scale")
    assert result.provenance["totals"] == {"nation": "invariant tot", "state": "invariant tot",
                                           "county": "sum of va_hisp_race"}
    for li, level in enumerate(LEVELS):
        hist = result.histograms[li]
        assert (hist >= 0).all()
        if level in noisy.invariants:
            target = noisy.invariants[level]["tot"]
        else:
            target = np.maximum(noisy.derived_answers(level, "total")[0][:, 0], 0)
        np.testing.assert_allclose(hist.sum(axis=1), target, rtol=1e-12, atol=1e-9)


def test_clip_scale_spreads_the_total_of_a_unit_without_positive_cells():
    detailed_values = {"nation": [[1.0, -2, 3, 0, 4, 0]], "state": [[-1.0] * 6, [2, 0, 0, 0, 0, 1]],
                       "county": np.ones((5, 6))}
    totals = {"nation": [[16.0]], "state": [[3.0], [-5]], "county": np.ones((5, 1))}
    noisy = _tiny({lv: {"detailed": np.asarray(detailed_values[lv]),
                        "total": np.asarray(totals[lv])} for lv in LEVELS},
                  {lv: {"total": np.full((len(totals[lv]), 1), 0.5)} for lv in LEVELS})
    result = postprocess(noisy, "clip_scale")
    assert result.histograms[0].tolist() == [[2.0, 0, 6, 0, 8, 0]]
    assert result.histograms[1].tolist() == [[0.5] * 6, [0.0] * 6]   # spread; negative total → 0
    assert result.provenance["spread_evenly"] == {"nation": 0, "state": 1, "county": 0}


# -- rake ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("method", ["rake", "rake_unclipped"])
def test_rake_is_consistent_with_the_published_root_total(noisy, method):
    result = postprocess(noisy, method)
    assert result.provenance["root_total"] == "invariant tot"
    assert result.histograms[0].sum() == pytest.approx(noisy.invariants["nation"]["tot"][0],
                                                       rel=1e-12)
    geo = noisy.geography
    for li in range(1, len(LEVELS)):            # to float rounding of the children's magnitudes
        summed = geo.aggregate(result.histograms[li], li, li - 1)
        scale = geo.aggregate(np.abs(result.histograms[li]), li, li - 1)
        assert np.all(np.abs(summed - result.histograms[li - 1]) <= 1e-12 * np.maximum(1, scale))
    assert result.provenance["equal_splits"]["county"] > 0         # empty cells are common
    if method == "rake":
        assert all((h >= 0).all() for h in result.histograms)
    else:
        assert (result.histograms[-1] < 0).any()                    # nothing is clipped


def test_rake_splits_equally_where_the_children_have_nothing():
    noisy = _tiny({"nation": {"detailed": np.array([[6.0, 3, 0, 0, 0, 0]])},
                   "state": {"detailed": np.array([[2.0, -1, 0, 0, 0, 0],
                                                   [1.0, -4, 0, 0, 0, 0]])},
                   "county": {"detailed": np.ones((5, 6))}})
    result = postprocess(noisy, "rake")
    assert result.histograms[1][:, :2].tolist() == [[4.0, 1.5], [2.0, 1.5]]
    np.testing.assert_allclose(result.histograms[2][2:, 0], [2 / 3] * 3)


def test_rake_unclipped_is_flaxmans_rule():
    noisy = _tiny({"nation": {"detailed": np.array([[6.0, 3, -2, 0, 0, 0]])},
                   "state": {"detailed": np.array([[2.0, -1, 1, 0, 0, 0],
                                                   [1.0, 4, -3, 0, 0, 0]])},
                   "county": {"detailed": np.ones((5, 6))}})
    result = postprocess(noisy, "rake_unclipped")
    assert result.histograms[0].tolist() == [[6.0, 3.0, -2.0, 0.0, 0.0, 0.0]]    # as measured
    # cell 0: 2 and 1 scaled to 6; cell 1: -1 and 4 already sum to 3, the negative one is kept;
    # cell 2: the children sum to -2 ≤ 0, so the parent's -2 is split equally
    assert result.histograms[1][:, :3].tolist() == [[4.0, -1.0, -1.0], [2.0, 4.0, -1.0]]
    assert result.provenance["root_total"] == "as measured"
    assert result.provenance["equal_splits"] == {"state": 4, "county": 0}     # cells 2 … 5
    np.testing.assert_allclose(result.histograms[2][2:, 1], [4 / 3] * 3)


# -- bottom_up ----------------------------------------------------------------------------------
def test_bottom_up_is_exactly_consistent_and_keeps_the_bottom_measurements(noisy):
    result = postprocess(noisy, "bottom_up")
    assert result.integer
    bottom = noisy.get("county", "detailed").values
    assert np.array_equal(result.histograms[-1], bottom)
    geo = noisy.geography
    for li in range(1, len(LEVELS)):
        assert np.array_equal(geo.aggregate(result.histograms[li], li, li - 1),
                              result.histograms[li - 1])
    assert (bottom < 0).any()                    # it makes no nonnegativity promise


# -- the protocol -------------------------------------------------------------------------------
def test_registered_promises():
    assert {m: get(m).promises for m in METHODS} == {
        "least_squares": (), "clip_scale": ("nonnegative",),
        "rake": ("consistent", "nonnegative"), "rake_unclipped": ("consistent",),
        "bottom_up": ("consistent",)}
    assert all(get(m).options() == () and not get(m).randomized for m in METHODS)


@pytest.mark.parametrize("method", METHODS)
def test_results_carry_the_measurements_provenance(noisy, method):
    result = postprocess(noisy, method, Spec(), rng=0)
    assert result.method == method
    assert result.provenance["noisy"] == dict(noisy.provenance)
    assert [h.shape for h in result.histograms] == [
        (noisy.geography.n_units(lv), E2E_1940.size) for lv in LEVELS]


@pytest.mark.parametrize("method", METHODS)
def test_a_spec_with_invariants_is_refused(noisy, method):
    spec = Spec(invariants=(Invariant("tot", ("nation",)),))
    with pytest.raises(PostprocError, match=f"{method} does not honour invariants"):
        postprocess(noisy, method, spec)


@pytest.mark.parametrize("method", ["clip_scale", "rake", "rake_unclipped", "bottom_up"])
def test_a_missing_detailed_measurement_is_named(truth, method):
    noisy = measure(truth, e2e_workload(E2E_1940),
                    _budget({lv: {"hhgq": 1, "va_hisp_race": 1} for lv in LEVELS}), rng=5)
    level = "nation" if method != "bottom_up" else "county"
    with pytest.raises(PostprocError, match=f"{method}: level '{level}' has no detailed "
                                            f"measurement"):
        postprocess(noisy, method)
