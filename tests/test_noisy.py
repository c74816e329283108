"""measure() and NoisyHierarchy: shapes, variances, reproducibility, provenance, noise
statistics, storage round trips and the validation of measurements made elsewhere."""

from __future__ import annotations

import json
import math
import os
from fractions import Fraction

import numpy as np
import pandas as pd
import pytest

from hierarchy.budget import Budget
from hierarchy.errors import HierarchyError
from hierarchy.geography import Geography
from hierarchy.io.storage import read_parquet_metadata
from hierarchy.measurement import PUBLISHABLE, measure, published_statistics
from hierarchy.mechanisms import get_mechanism
from hierarchy.noisy import Measurement, NoisyHierarchy
from hierarchy.queries import Workload, e2e_workload, marginal, total
from hierarchy.randomness import RELEASE_LABEL, Randomness
from hierarchy.schema import E2E_1940, E2E_1940_144
from hierarchy.tabulation import tabulate

LEVELS = ["nation", "state", "county"]
W = e2e_workload(E2E_1940)


def synthetic_persons(n_counties, n_persons, seed):
    rng = np.random.default_rng(seed)
    county = np.sort(rng.integers(0, n_counties, n_persons))
    persons = pd.DataFrame({"state": [f"{c % 3:02d}" for c in county],
                            "county": [f"{c % 3:02d}{c:04d}" for c in county]})
    for a in E2E_1940.attributes:
        persons[a.name] = rng.integers(0, a.size, n_persons).astype(np.int8)
    # one housing unit / facility per distinct (county, hhgq) of the persons, plus households
    units = persons.drop_duplicates(["county", "hhgq"])[["state", "county", "hhgq"]]
    units = pd.concat([units, units[units.hhgq == 0]], ignore_index=True)
    return persons, units


@pytest.fixture(scope="module")
def truth():
    persons, units = synthetic_persons(12, 600, 1)
    return tabulate(persons, schema=E2E_1940, levels=LEVELS, units=units)


@pytest.fixture(scope="module")
def noisy(truth):
    return measure(truth, W, Budget.e2e(1, LEVELS), "geometric", rng=42,
                   publish={"tot": ["nation", "state"], "gqhh": ["county"]})


def measured_arrays(nh):
    return {(lv, q): (m.values, m.variances) for lv, qs in nh.measurements.items()
            for q, m in qs.items()}


def assert_same_measurements(a, b):
    ma, mb = measured_arrays(a), measured_arrays(b)
    assert ma.keys() == mb.keys()
    for key in ma:
        assert ma[key][0].dtype == mb[key][0].dtype, key
        np.testing.assert_array_equal(ma[key][0], mb[key][0])
        np.testing.assert_array_equal(ma[key][1], mb[key][1])


# ---------------------------------------------------------------------------------------------
# measure
# ---------------------------------------------------------------------------------------------


def independent_parameter(name, share, kind):
    """The noise parameter of docs/measurement.md for the E2E queries (Δ₁ = 2, Δ₂ = √2)."""
    eps = share if kind == "pure" else math.sqrt(2 * share)
    return {"geometric": eps / 2, "laplace": 2 / eps,
            "gaussian": 2 / (2 * share), "discrete_gaussian": 2 / (2 * share)}[name]


def independent_variance(name, p):
    if name == "geometric":
        return 2 * math.exp(-p) / (1 - math.exp(-p)) ** 2
    if name == "laplace":
        return 2 * p * p
    return p


@pytest.mark.parametrize("name, kind", [("geometric", "pure"), ("laplace", "pure"),
                                        ("gaussian", "zcdp"), ("discrete_gaussian", "zcdp"),
                                        ("geometric", "zcdp")])
def test_shapes_dtypes_and_variances(truth, name, kind):
    budget = Budget.e2e("0.5", LEVELS, kind=kind)
    nh = measure(truth, W, budget, name, rng=3)
    mech = get_mechanism(name)
    for lv in LEVELS:
        assert nh.queries(lv) == W.names
        n = truth.geography.n_units(lv)
        for q in W:
            m = nh.get(lv, q.name)
            assert m.values.shape == (n, q.n_answers) == m.variances.shape
            assert m.values.dtype == (np.int64 if mech.discrete else np.float64)
            share = float(budget.query_budget(lv, q.name))
            p = independent_parameter(name, share, kind)
            params = nh.provenance["parameters"][lv][q.name]
            assert params[mech.parameter_name] == pytest.approx(p, rel=1e-12)
            assert np.all(m.variances == m.variances.flat[0])
            if name == "discrete_gaussian":
                # the exact sampler rounds σ² up to a rational with denominator ≤ 1e6; the
                # variance reported is that of the noise actually added
                assert m.variances.flat[0] == mech.variance(params["sigma2"])
                assert m.variances.flat[0] == pytest.approx(p, abs=2e-6)
                assert m.variances.flat[0] <= p + 2e-6
            else:
                assert m.variances.flat[0] == pytest.approx(independent_variance(name, p),
                                                            rel=1e-12)
            assert params["budget"] == str(budget.query_budget(lv, q.name))
            assert params["variance"] == m.variances.flat[0]
            assert params["sensitivity"] == [2.0, math.sqrt(2)]
            # noise was added (a draw of exactly zero in every answer is essentially impossible)
            assert not np.array_equal(m.values, truth.answers(lv, q))


def test_only_budgeted_levels_and_queries_are_measured(truth):
    budget = Budget("pure", 1, {"nation": "1/2", "county": "1/2"},
                    {"nation": {"hhgq": 1}, "county": {"va_hisp_race": "1/3", "detailed": "2/3"}})
    nh = measure(truth, W, budget, rng=0)
    assert set(nh.measurements) == {"nation", "county"}
    assert nh.queries("nation") == ("hhgq",)
    assert nh.queries("state") == ()
    assert nh.queries("county") == ("detailed", "va_hisp_race")     # workload order
    with pytest.raises(HierarchyError, match=r"no measurement of 'detailed' at level 'state'"):
        nh.get("state", "detailed")
    assert nh.invariants == {}


def test_simulation_seed_reproducibility(truth):
    budget = Budget.e2e(1, LEVELS)
    a = measure(truth, W, budget, rng=123)
    b = measure(truth, W, budget, rng=123)
    c = measure(truth, W, budget, rng=124)
    assert_same_measurements(a, b)
    assert a.provenance["randomness"] == b.provenance["randomness"]
    for lv in LEVELS:
        for q in W.names:
            assert not np.array_equal(a.get(lv, q).values, c.get(lv, q).values)
    # each (level, query) has its own documented stream: child(level index, query index)
    mech = get_mechanism("geometric")
    for li, lv in enumerate(LEVELS):
        for qi, q in enumerate(budget.queries(lv)):
            z = a.provenance["parameters"][lv][q]["z"]
            exact = truth.answers(lv, W[q])
            noise = mech.sample(z, exact.shape, Randomness.simulation(123).child(li, qi))
            np.testing.assert_array_equal(a.get(lv, q).values, exact + noise)


def test_release_and_simulation_provenance(truth):
    budget = Budget.e2e(1, LEVELS)
    rel = measure(truth, W, budget, accounted_elsewhere=True)
    assert rel.safe_for_release is True
    assert rel.provenance["randomness"]["mode"] == "release"
    assert rel.provenance["randomness"]["seed"] is None
    assert rel.provenance["randomness"]["label"] == RELEASE_LABEL
    assert "randomness=release" in repr(rel)
    sim = measure(truth, W, budget, rng=Randomness.simulation(9))
    assert sim.safe_for_release is False
    assert "NOT SAFE" in sim.provenance["randomness"]["label"]
    assert sim.provenance["randomness"]["seed"] == 9
    assert "randomness=simulation" in repr(sim)
    assert sim.provenance["budget"] == budget.to_dict()
    assert sim.provenance["mechanism"]["name"] == "geometric"
    # two release runs differ
    rel2 = measure(truth, W, budget, accounted_elsewhere=True)
    assert not np.array_equal(rel.get("county", "detailed").values,
                              rel2.get("county", "detailed").values)


@pytest.mark.parametrize("name, kind", [("geometric", "pure"), ("laplace", "pure"),
                                        ("gaussian", "zcdp"), ("discrete_gaussian", "zcdp")])
def test_noise_mean_and_variance_over_many_units(name, kind):
    # 1000 units × 192 cells = 192,000 noise draws of one law. Mean within 5 standard errors
    # (two-sided false-failure rate ≈ 6e-7); sample variance within 5 of its standard errors,
    # using kurtosis ≤ 6 for all four laws (Laplace has 6): relative tolerance 5·sqrt(5/n).
    persons, _ = synthetic_persons(1000, 3000, 2)
    truth = tabulate(persons, schema=E2E_1940, levels=LEVELS)
    budget = Budget(kind, 1, {"county": 1}, {"detailed": 1})
    nh = measure(truth, W, budget, name, rng=77)
    m = nh.get("county", "detailed")
    noise = (m.values - truth.level_counts("county")).ravel().astype(np.float64)
    var = m.variances.flat[0]
    n = noise.size
    assert abs(noise.mean()) < 5 * math.sqrt(var / n)
    assert noise.var() == pytest.approx(var, rel=5 * math.sqrt(5 / n))
    # symmetric law: as many positive as negative draws (binomial, 5 sd)
    pos, neg = np.count_nonzero(noise > 0), np.count_nonzero(noise < 0)
    assert abs(pos - neg) < 5 * math.sqrt(pos + neg)


def test_measure_validation(truth):
    budget = Budget.e2e(1, LEVELS)
    with pytest.raises(HierarchyError, match="schema differs"):
        measure(truth, e2e_workload(E2E_1940_144), budget, rng=0)
    with pytest.raises(HierarchyError, match=r"levels \['tract'\] that the geography"):
        measure(truth, W, Budget.e2e(1, LEVELS + ["tract"]), rng=0)
    small = Workload((W["detailed"],))
    with pytest.raises(HierarchyError, match=r"queries \['hhgq', 'va_hisp_race'\]"):
        measure(truth, small, budget, rng=0)
    with pytest.raises(HierarchyError, match="needs a zCDP budget"):
        measure(truth, W, budget, "gaussian", rng=0)
    with pytest.raises(HierarchyError, match="unknown mechanism"):
        measure(truth, W, budget, "uniform", rng=0)
    with pytest.raises(HierarchyError, match="rng must be"):
        measure(truth, W, budget, rng="seed")


# ---------------------------------------------------------------------------------------------
# published statistics
# ---------------------------------------------------------------------------------------------


def test_published_statistics_are_only_what_was_asked(truth, noisy):
    assert {lv: set(s) for lv, s in noisy.invariants.items()} == {
        "nation": {"tot"}, "state": {"tot"}, "county": {"gqhh"}}
    np.testing.assert_array_equal(noisy.invariant("state", "tot"), truth.totals("state"))
    np.testing.assert_array_equal(noisy.invariant("county", "gqhh"), truth.level_units("county"))
    assert noisy.invariant("county", "gqhh").dtype == np.int64
    assert noisy.provenance["invariants_published"] == {"tot": ["nation", "state"],
                                                        "gqhh": ["county"]}
    with pytest.raises(HierarchyError, match=r"no published invariant 'tot' at level 'county' "
                                             r"\(published there: \['gqhh'\]\)"):
        noisy.invariant("county", "tot")
    # a level given as a string; nothing else is published
    stats = published_statistics(truth, {"tot": "county"})
    assert list(stats) == ["county"] and list(stats["county"]) == ["tot"]
    assert published_statistics(truth, {}) == {}
    assert set(PUBLISHABLE) == {"tot", "gqhh"}
    with pytest.raises(HierarchyError, match=r"cannot publish 'counts'"):
        published_statistics(truth, {"counts": ["county"]})
    no_units = tabulate(synthetic_persons(4, 50, 3)[0], schema=E2E_1940, levels=LEVELS)
    with pytest.raises(HierarchyError, match="no units table"):
        published_statistics(no_units, {"gqhh": ["county"]})
    with pytest.raises(HierarchyError, match="unknown geography level 'tract'"):
        published_statistics(truth, {"tot": ["tract"]})


# ---------------------------------------------------------------------------------------------
# storage
# ---------------------------------------------------------------------------------------------


def test_save_load_round_trip_is_exact(noisy, tmp_path):
    path = noisy.save(tmp_path / "out")
    assert sorted(os.listdir(path)) == [".dapp-output", "geography.parquet", "invariants",
                                        "measurements",
                                        "metadata.json"]
    back = NoisyHierarchy.load(path)
    assert back.equals(noisy) and noisy.equals(back)
    assert_same_measurements(back, noisy)
    for lv, stats in noisy.invariants.items():
        for k, v in stats.items():
            assert back.invariants[lv][k].dtype == v.dtype
            np.testing.assert_array_equal(back.invariants[lv][k], v)
    assert back.provenance == noisy.provenance
    assert back.workload.queries == noisy.workload.queries
    # the randomness label travels inside every data file too
    label = noisy.provenance["randomness"]["label"]
    assert read_parquet_metadata(path / "geography.parquet")["randomness_label"] == label
    assert read_parquet_metadata(path / "measurements" / "county.parquet")[
        "randomness_label"] == label
    meta = json.loads((path / "metadata.json").read_text())
    assert meta["format"] == "dapp.NoisyHierarchy"
    assert "NOT SAFE" in meta["provenance"]["randomness"]["label"]


def test_save_load_float_measurements_and_partial_levels(truth, tmp_path):
    budget = Budget("zcdp", 1, {"nation": "0.25", "county": "0.75"},
                    {"nation": {"hhgq": 1}, "county": {"detailed": "0.5", "va_hisp_race": "0.5"}})
    nh = measure(truth, W, budget, "gaussian", rng=5, publish={"tot": ["state"]})
    back = NoisyHierarchy.load(nh.save(tmp_path / "g"))
    assert back.equals(nh)
    assert back.get("county", "detailed").values.dtype == np.float64
    # an invariant at a level where nothing was measured survives too
    assert back.queries("state") == () and list(back.invariants) == ["state"]
    np.testing.assert_array_equal(back.invariant("state", "tot"), truth.totals("state"))


def test_equals_detects_differences(noisy, truth):
    other = measure(truth, W, Budget.e2e(1, LEVELS), "geometric", rng=43,
                    publish={"tot": ["nation", "state"], "gqhh": ["county"]})
    assert not noisy.equals(other)
    assert not noisy.equals("not a hierarchy")
    same_values_float = NoisyHierarchy(
        noisy.schema, noisy.geography, noisy.workload,
        {lv: {q: Measurement(q, m.values.astype(np.float64), m.variances)
              for q, m in qs.items()} for lv, qs in noisy.measurements.items()},
        noisy.invariants, noisy.provenance)
    assert not noisy.equals(same_values_float)          # dtypes are part of equality


def test_save_refuses_non_empty_directory_and_leaves_it_intact(noisy, tmp_path):
    target = tmp_path / "busy"
    target.mkdir()
    (target / "keep.txt").write_text("precious")
    with pytest.raises(HierarchyError, match="already exists and is not empty.*overwrite=True"):
        noisy.save(target)
    assert os.listdir(target) == ["keep.txt"]
    assert (target / "keep.txt").read_text() == "precious"
    assert [p for p in os.listdir(tmp_path) if p != "busy"] == []     # no temporary left over
    # an existing empty directory is fine, and overwrite replaces everything
    empty = tmp_path / "empty"
    empty.mkdir()
    assert NoisyHierarchy.load(noisy.save(empty)).equals(noisy)
    # overwrite replaces only a directory the toolkit wrote: never a user's
    with pytest.raises(HierarchyError, match="not written by this toolkit"):
        noisy.save(target, overwrite=True)
    assert os.listdir(target) == ["keep.txt"]
    noisy.save(empty, overwrite=True)
    assert NoisyHierarchy.load(empty).equals(noisy)
    assert sorted(os.listdir(tmp_path)) == ["busy", "empty"]


def test_save_onto_a_file_is_a_hierarchy_error(noisy, tmp_path):
    f = tmp_path / "a_file"
    f.write_text("x")
    for overwrite in (False, True):
        with pytest.raises(HierarchyError, match="not a directory"):
            noisy.save(f, overwrite=overwrite)
    assert f.read_text() == "x"


def test_load_errors(noisy, tmp_path):
    with pytest.raises(HierarchyError, match="no metadata.json"):
        NoisyHierarchy.load(tmp_path)
    path = noisy.save(tmp_path / "x")
    meta = json.loads((path / "metadata.json").read_text())
    (path / "metadata.json").write_text(json.dumps(dict(meta, format_version=99)))
    with pytest.raises(HierarchyError, match="newer version"):
        NoisyHierarchy.load(path)
    (path / "metadata.json").write_text(json.dumps(dict(meta, format="other")))
    with pytest.raises(HierarchyError, match="does not describe a NoisyHierarchy"):
        NoisyHierarchy.load(path)
    (path / "metadata.json").write_text("{not json")
    with pytest.raises(HierarchyError, match="not valid JSON: line 1"):
        NoisyHierarchy.load(path)


# ---------------------------------------------------------------------------------------------
# long form
# ---------------------------------------------------------------------------------------------


def test_to_measurements_layout(noisy):
    t = noisy.to_measurements()
    assert t.columns.tolist() == ["level", "geocode", "query", "index", "value", "variance"]
    expected_rows = sum(noisy.geography.n_units(lv) * W[q].n_answers
                        for lv in LEVELS for q in noisy.queries(lv))
    assert len(t) == expected_rows
    one = t[(t.level == "county") & (t["query"] == "hhgq")]
    m = noisy.get("county", "hhgq")
    geocodes = noisy.geography.geocodes[2]
    for row in one.sample(20, random_state=0).itertuples():
        u = list(geocodes).index(row.geocode)
        assert row.value == m.values[u, row.index]
        assert row.variance == m.variances[u, row.index]


@pytest.mark.parametrize("name", ["geometric", "laplace"])
def test_long_form_round_trip(truth, name, tmp_path):
    nh = measure(truth, W, Budget.e2e(1, LEVELS), name, rng=8, publish={"tot": ["nation"]})
    table = nh.to_measurements().sample(frac=1, random_state=1)       # any row order
    back = NoisyHierarchy.from_measurements(table, schema=nh.schema, geography=nh.geography,
                                            workload=nh.workload, invariants=nh.invariants,
                                            source="m.csv")
    assert_same_measurements(back, nh)
    assert back.provenance["source"] == "m.csv"
    assert back.provenance["randomness"]["mode"] == "external"
    np.testing.assert_array_equal(back.invariant("nation", "tot"), nh.invariant("nation", "tot"))
    # through a CSV file, as measurements made elsewhere would arrive
    table.to_csv(tmp_path / "m.csv", index=False)
    csv = pd.read_csv(tmp_path / "m.csv", dtype={"geocode": str})
    back2 = NoisyHierarchy.from_measurements(csv, schema=nh.schema, geography=nh.geography,
                                             workload=nh.workload)
    assert_same_measurements(back2, nh)


@pytest.fixture()
def long_table():
    s = E2E_1940
    geo, _ = Geography.from_columns(["nation", "county"], [[["a", "b", "c"]]])
    w = Workload((total(s), marginal(s, "votingage", name="va")))
    rows = []
    for lv, codes in (("nation", ["0"]), ("county", ["a", "b", "c"])):
        for g in codes:
            rows.append((lv, g, "total", 0, 10.0, 2.0))
            rows.append((lv, g, "va", 0, 4.0, 2.0))
            rows.append((lv, g, "va", 1, 6.0, 2.0))
    t = pd.DataFrame(rows, columns=["level", "geocode", "query", "index", "value", "variance"])
    return t, dict(schema=s, geography=geo, workload=w, source="meas.csv")


def test_from_measurements_accepts_the_good_table(long_table):
    t, kw = long_table
    nh = NoisyHierarchy.from_measurements(t, **kw)
    assert nh.get("county", "va").values.tolist() == [[4, 6]] * 3
    assert nh.get("county", "va").values.dtype == np.int64
    t2 = t.assign(value=t.value + 0.5)
    assert NoisyHierarchy.from_measurements(t2, **kw).get("nation", "total").values.dtype == \
        np.float64


@pytest.mark.parametrize("mutate, message", [
    (lambda t: t.assign(level=t.level.where(t.index != 4, "tract")),
     r"meas.csv: unknown level \(levels are \['nation', 'county'\]\) at row\(s\) \[4\]"),
    (lambda t: t.assign(query=t["query"].where(t.index != 5, "sex")),
     r"unknown query \(the workload has \['total', 'va'\]\) at row\(s\) \[5\]"),
    (lambda t: t.assign(geocode=t.geocode.where(t.index != 6, "zz")),
     r"geocode is not a county unit of the geography at row\(s\) \[6\]"),
    (lambda t: pd.concat([t, t.iloc[[7]]], ignore_index=True),
     r"duplicate answer for \(county, va\).* at row\(s\) \[7, 12\]"),
    (lambda t: t.drop(index=8).reset_index(drop=True),
     r"level 'county', query 'va': 1 answer\(s\) missing, e.g. for units \['b'\]"),
    (lambda t: t.assign(variance=t.variance.where(t.index != 2, 0.0)),
     r"variance must be a positive finite number at row\(s\) \[2\]"),
    (lambda t: t.assign(variance=t.variance.where(t.index != 2, -1.0)),
     r"variance must be .* at row\(s\) \[2\]"),
    (lambda t: t.assign(variance=t.variance.where(t.index != 3, np.nan)),
     r"variance must be .* at row\(s\) \[3\]"),
    (lambda t: t.assign(value=t.value.where(t.index != 1, np.nan)),
     r"value is missing or not a finite number at row\(s\) \[1\]"),
    (lambda t: t.assign(value=t.value.astype(object).where(t.index != 1, "ten")),
     r"value is missing .* at row\(s\) \[1\]"),
    (lambda t: t.assign(index=t["index"].where(t.index != 5, 2)),
     r"answer index out of range for 'va' \(it has 2 answers\) at row\(s\) \[5\]"),
    (lambda t: t.assign(index=t["index"].where(t.index != 5, -1)),
     r"answer index must be a non-negative integer at row\(s\) \[5\]"),
    (lambda t: t.assign(index=t["index"].astype(float).where(t.index != 5, 0.5)),
     r"answer index must be a non-negative integer at row\(s\) \[5\]"),
    (lambda t: t.drop(columns="variance"), r"missing column\(s\) \['variance'\]"),
])
def test_from_measurements_validation_names_rows(long_table, mutate, message):
    t, kw = long_table
    with pytest.raises(HierarchyError, match=message):
        NoisyHierarchy.from_measurements(mutate(t), **kw)


# ---------------------------------------------------------------------------------------------
# value validation
# ---------------------------------------------------------------------------------------------


def test_measurement_validation():
    with pytest.raises(HierarchyError, match="numeric"):
        Measurement("q", np.array([["a"]]), 1.0)
    with pytest.raises(HierarchyError, match="2-d"):
        Measurement("q", np.zeros(3), 1.0)
    with pytest.raises(HierarchyError, match="NaN or infinite"):
        Measurement("q", np.array([[np.inf]]), 1.0)
    for bad in (0.0, -1.0, np.nan, np.inf):
        with pytest.raises(HierarchyError, match="positive and finite"):
            Measurement("q", np.zeros((2, 2)), bad)
    m = Measurement("q", np.zeros((2, 3)), 4.0)
    assert m.variances.shape == (2, 3) and np.all(m.weights == 0.25)
    per_answer = np.ones((2, 3))
    per_answer[1, 2], per_answer[1, 0] = -2.0, np.nan        # the first in row order is named
    with pytest.raises(HierarchyError, match=r"unit \(row\) 1, answer 0 has nan \(2 such "
                                             r"answers\)"):
        Measurement("q", np.zeros((2, 3)), per_answer)
    values = np.zeros((2, 3))
    values[0, 1] = np.inf
    with pytest.raises(HierarchyError, match=r"NaN or infinite values: unit \(row\) 0, answer 1"):
        Measurement("q", values, 1.0)


def test_noisy_hierarchy_validation(noisy):
    good = noisy.measurements["county"]["hhgq"]
    kw = dict(schema=noisy.schema, geography=noisy.geography, workload=noisy.workload)
    with pytest.raises(HierarchyError, match=r"values have shape \(12, 8\), expected \(3, 8\)"):
        NoisyHierarchy(measurements={"state": {"hhgq": good}}, **kw)
    with pytest.raises(HierarchyError, match="stored under 'detailed' is of 'hhgq'"):
        NoisyHierarchy(measurements={"county": {"detailed": good}}, **kw)
    with pytest.raises(HierarchyError, match="workload has no query 'sex'"):
        NoisyHierarchy(measurements={"county": {"sex": Measurement("sex", good.values, 1)}},
                       **kw)
    with pytest.raises(HierarchyError, match="unknown geography level 'tract'"):
        NoisyHierarchy(measurements={"tract": {"hhgq": good}}, **kw)
    with pytest.raises(HierarchyError, match="invariant 'tot' at level 'state' has 2 rows"):
        NoisyHierarchy(measurements={}, invariants={"state": {"tot": np.zeros(2)}}, **kw)
    with pytest.raises(HierarchyError, match="workload's schema differs"):
        NoisyHierarchy(noisy.schema, noisy.geography, e2e_workload(E2E_1940_144), {})


def test_budget_fraction_in_provenance_is_exact(noisy):
    assert Fraction(noisy.provenance["parameters"]["county"]["va_hisp_race"]["budget"]) == \
        Fraction(27, 120)


def _blanked(noisy, level="county", query="detailed", keep=0.5, seed=0):
    """``noisy`` with some answers of one measurement marked not drawn (values 0)."""
    m = noisy.get(level, query)
    drawn = np.random.default_rng(seed).random(m.values.shape) < keep
    ms = {lv: dict(qs) for lv, qs in noisy.measurements.items()}
    ms[level][query] = Measurement(query, np.where(drawn, m.values, 0), m.variances, drawn)
    return NoisyHierarchy(noisy.schema, noisy.geography, noisy.workload, ms, noisy.invariants,
                          noisy.provenance), drawn


def test_answers_not_drawn_weigh_nothing_and_survive_storage(noisy, tmp_path):
    with pytest.raises(HierarchyError, match="boolean array of the values' shape"):
        Measurement("q", np.zeros((2, 3)), 1.0, np.ones((2, 2), bool))
    with pytest.raises(HierarchyError, match="boolean array"):
        Measurement("q", np.zeros((2, 3)), 1.0, np.ones((2, 3), int))
    with pytest.raises(HierarchyError, match="nonzero values where no answer was drawn"):
        Measurement("q", np.ones((2, 3)), 1.0, np.eye(2, 3, dtype=bool))
    assert Measurement("q", np.ones((2, 3)), 1.0, np.ones((2, 3), bool)).drawn is None
    partial, drawn = _blanked(noisy)
    m = partial.get("county", "detailed")
    assert m.n_drawn == drawn.sum() < drawn.size
    assert np.all(m.weights[~drawn] == 0) and np.all(m.weights[drawn] == 1 / m.variances[drawn])
    back = NoisyHierarchy.load(partial.save(tmp_path / "partial"))
    assert back.equals(partial) and not back.equals(noisy)
    np.testing.assert_array_equal(back.get("county", "detailed").drawn, drawn)
    import pyarrow.parquet as pq  # stored as nulls, never as numbers
    stored = pq.read_table(tmp_path / "partial" / "measurements" / "county.parquet")
    flat = stored.column("detailed").combine_chunks().flatten()
    np.testing.assert_array_equal(flat.is_null().to_numpy(zero_copy_only=False),
                                  ~drawn.ravel())
    rows = partial.to_measurements()
    here = rows[(rows.level == "county") & (rows["query"] == "detailed")]
    assert len(here) == drawn.sum()              # answers not drawn are not measurements
    # a sum of answers holds a drawn answer unless every answer it adds was left out
    partial, drawn = _blanked(noisy, query="va_hisp_race", keep=0.1)
    values, how, held = partial.derived_answers("county", "total", with_drawn=True)
    assert how == "sum of va_hisp_race" and held.shape == (drawn.shape[0], 1)
    np.testing.assert_array_equal(held[:, 0], drawn.any(axis=1))
    assert not held.all() and held.any()
    assert noisy.derived_answers("county", "detailed", with_drawn=True)[2] is None


def test_only_topdown_takes_measurements_that_left_answers_undrawn(noisy):
    from invariants.spec import Invariant, Spec
    from postproc.errors import PostprocError
    from postproc.methods import postprocess

    partial, _ = _blanked(noisy)
    with pytest.raises(PostprocError, match=r"hay: the measurements of 'detailed' at county"):
        postprocess(partial, "hay")
    result = postprocess(partial, "topdown", Spec([Invariant("tot", ["nation", "state"])]))
    assert result.histograms[0].sum() == noisy.invariant("nation", "tot").sum()


def test_release_mode_draws_each_query_in_one_call_even_with_keys(truth):
    """Keyed streams are for reproducible simulations; the secure source repeats nothing, so a
    release draws a query's answers in one call (the exact sampler's cost is per call)."""
    from hierarchy.measurement import measure_level

    class Counting:
        def __init__(self, inner):
            self.inner, self.calls = inner, []

        def __getattr__(self, name):
            return getattr(self.inner, name)

        def sample(self, parameter, size, rng):
            self.calls.append(size)
            return self.inner.sample(parameter, size, rng)

    budget = Budget.e2e(1, LEVELS)
    counts = truth.counts[2]
    keys = (truth.geography.geocodes[1], np.searchsorted(truth.geography.parents[2],
                                                         np.arange(4)))
    for mode, calls_per_query in (("release", 1), ("simulation", 3)):
        mech = Counting(get_mechanism("geometric"))
        rnd = Randomness.release() if mode == "release" else Randomness.simulation(4)
        got, _ = measure_level(counts, "county", 2, W, budget, mech, rnd, keys=keys)
        assert len(mech.calls) == calls_per_query * len(got), mode
        for name, m in got.items():
            assert m.values.shape == W[name].answer(counts).shape
