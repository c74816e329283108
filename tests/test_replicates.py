"""Approximate Monte Carlo intervals (:mod:`postproc.methods.replicates`).

Re-measuring is measuring: a result that is the truth re-measured with a seed gives the very
values ``measure`` gives with that seed, and a replicate's noise has the recorded variance. The
table has its shape, its columns and its labels; a seed reproduces it; every misuse is refused
with a message that names it. And the coverage of the intervals is *measured* — on a small 1940
E2E synthetic, S independent measurements of one truth, TopDown and its replicate intervals for
each — and held to a loose range in CI, and recorded in a full variant (``-m slow``).

The geography of ``synthesize_1940(3000, ...)`` has one county per state (counties keep their
1940 sizes, so a small population fills one per state): under ``Spec.e2e`` the state totals are
invariant, and so are the county totals, which equal them. Their intervals have width 0 and
cover by construction; the coverage that means something is that of counts that are not
invariant — the county counts by voting age under ``Spec.e2e``, and the county totals under
the E2E spec with the nation's total alone invariant (``NATION_ONLY``).
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from hierarchy.budget import Budget
from hierarchy.errors import HierarchyError
from hierarchy.geography import Geography
from hierarchy.measurement import measure
from hierarchy.noisy import NoisyHierarchy
from hierarchy.queries import Workload, detailed, e2e_workload
from hierarchy.schema import E2E_1940, Attribute, Schema
from hierarchy.synth import synthesize_1940
from hierarchy.tabulation import tabulate
from invariants.spec import Invariant, Spec
from postproc.errors import PostprocError
from postproc.methods import postprocess, remeasure, replicate_intervals
from postproc.result import Result

LEVELS = ["nation", "state", "county"]
SPEC = Spec.e2e(LEVELS)
#: The E2E spec with the persons of the nation alone invariant: the state (and county) totals
#: are then estimated, and their intervals say something.
NATION_ONLY = Spec(invariants=(Invariant("tot", ("nation",)), *SPEC.invariants[1:]),
                   constraints=SPEC.constraints)


def _measure(truth, spec, seed):
    return measure(truth, e2e_workload(E2E_1940), Budget.e2e(1, LEVELS), "geometric", rng=seed,
                   spec=spec)


@pytest.fixture(scope="module")
def truth():
    data = synthesize_1940(3_000, seed=11)
    return tabulate(data.persons, schema=E2E_1940, levels=LEVELS, units=data.units)


@pytest.fixture(scope="module")
def released(truth):
    noisy = _measure(truth, SPEC, 2)
    return postprocess(noisy, "topdown", SPEC), noisy


@pytest.fixture(scope="module")
def table(released):
    result, noisy = released
    return replicate_intervals(result, noisy, "topdown", SPEC, level="county",
                               query="marginal(votingage)", replicates=3, rng=7)


# -- re-measuring ---------------------------------------------------------------------------------
def test_remeasuring_the_truth_is_measuring_it(truth):
    """A result holding the truth, re-measured with a seed, gets the values ``measure`` draws
    with that seed (same workload, budget, mechanism, streams), and the same variances."""
    noisy = _measure(truth, SPEC, 5)
    as_result = Result("topdown", truth.schema, truth.geography, noisy.workload, truth.counts)
    again = remeasure(as_result, noisy, rng=5)
    for level in LEVELS:
        assert again.queries(level) == noisy.queries(level) == ("detailed", "hhgq",
                                                                "va_hisp_race")
        for name in noisy.queries(level):
            assert np.array_equal(again.get(level, name).values, noisy.get(level, name).values)
            assert np.array_equal(again.get(level, name).variances,
                                  noisy.get(level, name).variances)
    assert again.provenance["budget"] == noisy.provenance["budget"]
    assert again.provenance["mechanism"] == noisy.provenance["mechanism"]
    assert again.provenance["parameters"] == noisy.provenance["parameters"]
    assert again.provenance["remeasured"]["method"] == "topdown"
    assert "spec_checked" not in again.provenance          # no spec given: nothing checked
    assert all(np.array_equal(again.invariants[lv][k], noisy.invariants[lv][k])
               for lv in noisy.invariants for k in noisy.invariants[lv])


def test_a_replicates_noise_has_the_recorded_variance(released):
    """The noise of a replicate of the released result: mean 0 and the recorded variance
    (county detailed cells: 9,408 draws of variance 7,200; the sample variance of geometric
    noise, kurtosis about 6, is within 2.3 % of it one time in three, so 10 % is 4 standard
    deviations; its mean within 4 · 85 / 97 = 3.5)."""
    result, noisy = released
    again = remeasure(result, noisy, rng=9, spec=SPEC)
    noise = again.get("county", "detailed").values - result.histograms[2]
    variance = noisy.provenance["parameters"]["county"]["detailed"]["variance"]
    assert abs(noise.var() / variance - 1) < 0.10
    assert abs(noise.mean()) < 3.5
    assert again.provenance["spec_checked"] == SPEC.to_dict()
    assert again.provenance["randomness"]["mode"] == "simulation"


def test_answers_not_drawn_are_not_drawn_again(truth):
    """Measurements that drew only the answers counting an active cell: a replicate draws
    those same answers (the others count cells the invariants fix at 0), and TopDown reads it."""
    from invariants.active import find_active_cells
    from invariants.compile import compile_spec

    published = _measure(truth, SPEC, 4).invariants
    active = find_active_cells(compile_spec(SPEC, E2E_1940, truth.geography, published)["county"])
    noisy = measure(truth, e2e_workload(E2E_1940), Budget.e2e(1, LEVELS), rng=4, spec=SPEC,
                    active={"county": active})
    result = postprocess(noisy, "topdown", SPEC)
    again = remeasure(result, noisy, rng=6, spec=SPEC)
    mask = noisy.get("county", "detailed").drawn
    assert mask is not None and 0 < mask.mean() < 1
    for name in noisy.queries("county"):
        drawn = noisy.get("county", name).drawn
        assert (again.get("county", name).drawn is None) == (drawn is None)
        if drawn is not None:
            assert np.array_equal(again.get("county", name).drawn, drawn)
            assert not again.get("county", name).values[~drawn].any()
    assert again.provenance["answers_drawn"] == {"active_only": ["county"]}
    assert postprocess(again, "topdown", SPEC).histograms[2].sum() == truth.counts[0].sum()


# -- the table ------------------------------------------------------------------------------------
def test_the_table_has_a_row_per_unit_and_answer(table, released):
    result, _ = released
    assert list(table.columns) == ["county", "answer", "estimate", "se", "lower", "upper",
                                   "replicate_mean"]
    assert len(table) == 49 * 2
    assert table["county"].tolist()[:2] == [result.geography.geocodes[2][0]] * 2
    assert table["answer"].tolist()[:2] == ["under 18", "18+"]
    assert table["estimate"].tolist() == result.answers("county", "marginal(votingage)").ravel()\
        .tolist()
    assert (table["se"] > 0).mean() > 0.9          # voting age by county is not invariant
    assert np.allclose(table["upper"] - table["estimate"], 1.6448536 * table["se"])
    assert np.allclose(table["estimate"] - table["lower"], 1.6448536 * table["se"])
    attrs = table.attrs
    assert (attrs["method"], attrs["level"], attrs["query"], attrs["replicates"],
            attrs["interval"], attrs["approximate"]) == ("topdown", "county",
                                                         "marginal(votingage)", 3, 0.9, True)
    assert "not exact" in attrs["note"] and attrs["spec"] == "given"
    assert attrs["randomness"]["mode"] == "simulation"
    assert attrs["randomness"]["label"].startswith("SIMULATION")
    assert attrs["measurements_randomness"]["mode"] == "simulation"


def test_a_seed_reproduces_the_table_and_another_seed_does_not(table, released):
    result, noisy = released
    kwargs = dict(level="county", query="marginal(votingage)", replicates=3)
    again = replicate_intervals(result, noisy, "topdown", SPEC, rng=7, **kwargs)
    assert again.equals(table)
    other = replicate_intervals(result, noisy, "topdown", SPEC, rng=8, **kwargs)
    assert not np.array_equal(other["se"], table["se"])


def test_the_spec_is_read_from_the_results_provenance(table, released):
    result, noisy = released
    recovered = replicate_intervals(result, noisy, level="county", query="marginal(votingage)",
                                    replicates=3, rng=7)
    assert recovered.attrs["spec"] == "the result's provenance"
    assert recovered.equals(table)


def test_invariant_totals_have_intervals_of_width_zero(released):
    result, noisy = released
    table = replicate_intervals(result, noisy, level="state", replicates=2, rng=1)
    assert table["answer"].unique().tolist() == ["total"]
    assert (table["se"] == 0).all()
    assert table["estimate"].tolist() == noisy.invariants["state"]["tot"].tolist()


def test_any_registered_method_and_a_release_mode_progress_bar(released, capsys):
    """Hay's least squares keeps no invariant: its state totals vary between replicates; with
    rng=None the replicates draw from the secure source and say so."""
    _, noisy = released
    result = postprocess(noisy, "hay")
    table = replicate_intervals(result, noisy, "hay", level="state", replicates=2,
                                progress=True)
    assert (table["se"] > 0).all()
    assert table.attrs["randomness"]["mode"] == "release"
    assert table.attrs["spec"] is None
    assert "replicates of hay" in capsys.readouterr().err


# -- errors ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("replicates", [1, 0, 2.5, True])
def test_fewer_than_two_replicates_are_refused(released, replicates):
    with pytest.raises(PostprocError, match="replicates must be an integer >= 2"):
        replicate_intervals(*released, level="state", replicates=replicates)


@pytest.mark.parametrize("interval", [0, 1, 1.5, -0.1, "0.9"])
def test_an_interval_outside_0_1_is_refused(released, interval):
    with pytest.raises(PostprocError, match="interval must be a probability strictly between"):
        replicate_intervals(*released, level="state", interval=interval)


def test_unknown_level_and_query_are_named(released):
    with pytest.raises(HierarchyError, match="unknown geography level 'tract'; levels are"):
        replicate_intervals(*released, level="tract")
    with pytest.raises(HierarchyError, match="unknown query 'marginal\\(age\\)'"):
        replicate_intervals(*released, level="state", query="marginal(age)")


def test_a_result_of_another_method_spec_or_model_is_refused(truth, released):
    result, noisy = released
    with pytest.raises(PostprocError, match="made by 'topdown', not 'hay'"):
        replicate_intervals(result, noisy, "hay", level="state")
    with pytest.raises(PostprocError, match="the spec given differs from the one the result"):
        replicate_intervals(result, noisy, "topdown", NATION_ONLY, level="state")
    two = tabulate(synthesize_1940(3_000, seed=11).persons, schema=E2E_1940,
                   levels=["nation", "state"])
    other = measure(two, e2e_workload(E2E_1940), Budget.e2e(1, two.levels), rng=1)
    with pytest.raises(PostprocError, match="geography differs .*levels \\['nation', 'state', "
                                            "'county'\\] against \\['nation', 'state'\\]"):
        replicate_intervals(result, other, level="state")
    partial = Result("topdown", result.schema, result.geography, result.workload,
                     result.histograms[:2], result.provenance)
    with pytest.raises(PostprocError, match="the result is partial: it has 2 of the 3 levels"):
        replicate_intervals(partial, noisy, level="state")
    schema = Schema((Attribute("sex", ("male", "female")),))
    geo = Geography(("nation",), (["US"],), ([-1],))
    tiny = Result("topdown", schema, geo, Workload((detailed(schema),)), (np.array([[1, 2]]),))
    with pytest.raises(PostprocError, match="the result's schema \\['sex'\\] differs"):
        replicate_intervals(tiny, noisy, level="nation")


def test_a_result_that_breaks_the_spec_cannot_stand_for_the_truth(released):
    result, noisy = released
    hists = [h.copy() for h in result.histograms]
    correctional = np.ravel_multi_index((1, 1, 0, 0), E2E_1940.shape)   # a structural zero
    for h in hists:
        h[0, correctional] += 1
    broken = Result("topdown", result.schema, result.geography, result.workload, tuple(hists),
                    result.provenance)
    with pytest.raises(PostprocError, match="(?s)the released result breaks the spec.*"
                                            "structural_zeros"):
        replicate_intervals(broken, noisy, level="state")


def test_measurements_whose_noise_law_is_not_recorded_cannot_be_remeasured(released):
    result, noisy = released
    elsewhere = NoisyHierarchy.from_measurements(
        noisy.to_measurements(), schema=noisy.schema, geography=noisy.geography,
        workload=noisy.workload, invariants=noisy.invariants)
    with pytest.raises(PostprocError, match="records no budget and no mechanism"):
        remeasure(result, elsewhere)
    wrong = dict(noisy.provenance, budget=Budget.e2e(2, LEVELS).to_dict())
    with pytest.raises(PostprocError, match="give 'detailed' at level 'nation' the noise "
                                            "variance .* the provenance does not describe"):
        remeasure(result, dataclasses.replace(noisy, provenance=wrong))
    unknown = dict(noisy.provenance, mechanism={"name": "nonesuch"})
    with pytest.raises(PostprocError, match="cannot be read"):
        remeasure(result, dataclasses.replace(noisy, provenance=unknown))


# -- coverage -------------------------------------------------------------------------------------
def _coverage(truth, spec, level, query, draws, replicates, seed):
    """Per draw: the share of (unit, answer) pairs of ``level`` whose true answer of ``query``
    lies in its 90 % replicate interval; draw ``s`` measures the truth with seed ``seed + s``,
    runs TopDown and ``replicates`` replicates."""
    true = truth.answers(level, query).ravel()
    shares = []
    for s in range(draws):
        noisy = _measure(truth, spec, seed + s)
        result = postprocess(noisy, "topdown", spec)
        table = replicate_intervals(result, noisy, "topdown", spec, level=level, query=query,
                                    replicates=replicates, rng=seed + 100_000 + s)
        shares.append(float(np.mean((table["lower"] <= true) & (true <= table["upper"]))))
    return np.array(shares)


def test_coverage_of_90_percent_intervals_in_a_loose_range(truth):
    """Three measurements, eight replicates each: the 90 % intervals of the county counts by
    voting age (98 counts per measurement, none invariant) cover between 70 % and 98 % of the
    true counts, and the invariant county totals all of them with width 0.

    Why these bounds, and why they do not fail falsely. The coverage is not 90 %: eight
    replicates estimate ``se`` with a relative error of about 1/√16 = 25 %, which alone brings
    a normal interval's 90 % to about 86 % (Student's t with 8 degrees of freedom), and TopDown
    is not linear. The same setting run on 100 measurements (``docs/replicate_intervals.md``)
    gave a per-measurement coverage of mean 0.875, sd 0.050, min 0.73, max 1.0; the mean of
    three such shares has sd 0.029, so 0.70 is 6 sd below the mean, and resampling the 100
    shares put the mean of three above 0.98 once in 100,000. The seeds are fixed, so the test
    is deterministic; the bounds are what keeps it passing under another seed or a change of
    solver that moves TopDown's output, and failing if the intervals lose their meaning (a se
    too small covers far less, a se too large covers everything)."""
    shares = _coverage(truth, SPEC, "county", "marginal(votingage)", draws=3, replicates=8,
                       seed=300)
    assert 0.70 <= shares.mean() <= 0.98, shares
    totals = _coverage(truth, SPEC, "county", "total", draws=1, replicates=2, seed=300)
    assert totals.tolist() == [1.0]


@pytest.mark.slow
@pytest.mark.parametrize("spec_name,query", [("e2e", "marginal(votingage)"),
                                             ("nation_only", "total")])
def test_coverage_of_90_percent_intervals_measured(truth, spec_name, query, record_property):
    """The coverage of 90 % replicate intervals (20 replicates) over 100 independent
    measurements of one truth, county level: the counts by voting age under ``Spec.e2e``, and
    the totals under the E2E spec with the nation's total alone invariant. Recorded in the test
    output (``-m slow -rP`` prints it; ``record_property`` puts it in a junit XML report).

    TopDown is not linear and the replicates are centred on the released result, not the
    truth: 90 % is not asserted. What is asserted is what the measured numbers support with a
    wide margin: a mean coverage between 80 % and 96 %. A run with other seeds measured 0.905
    (counts by voting age) and 0.874 (totals), with an sd of 0.043 and 0.050 per measurement,
    so 0.004 to 0.005 for the mean of 100: both bounds are more than 10 sd away, and a mean
    outside them means the intervals changed, not chance."""
    spec = SPEC if spec_name == "e2e" else NATION_ONLY
    shares = _coverage(truth, spec, "county", query, draws=100, replicates=20, seed=1_000)
    summary = {"spec": spec_name, "query": query, "draws": 100, "replicates": 20,
               "coverage": round(float(shares.mean()), 4),
               "sd": round(float(shares.std()), 4), "min": round(float(shares.min()), 4),
               "max": round(float(shares.max()), 4)}
    record_property("coverage", summary)
    print(f"replicate interval coverage (nominal 0.90): {summary}")
    assert 0.80 <= shares.mean() <= 0.96, summary
