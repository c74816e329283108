"""Invariants of any query at any level (``[[spec.invariant]] query = …``), and answers named by
their labels: what is published, what every post-processor keeps, and the errors.

A user's own data — region → district → village, sex × three age groups — with the sex counts of
every village held exact: the published data are the truth's answers, every registered
post-processor that keeps invariants returns them exactly (checked in integer arithmetic against
the truth, not against the published copy), and a result that breaks them is refused."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from hierarchy import Budget, measure, tabulate
from hierarchy.noisy import NoisyHierarchy
from hierarchy.queries import Workload, parse_query
from hierarchy.schema import Attribute, Schema
from invariants.errors import SpecError
from invariants.spec import Constraint, Invariant, Spec
from invariants.verify import verify_histograms
from postproc import postprocess
from postproc.apps.runs.directories import load_run
from postproc.cli import main

LEVELS = ["country", "region", "district", "village"]
SCHEMA = Schema((Attribute("sex", ("female", "male")),
                 Attribute("age", ("0-14", "15-64", "65+"))))


def _persons(n: int = 3000, seed: int = 5) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    village = rng.integers(0, 24, n)
    return pd.DataFrame({
        "region": [f"R{v // 12}" for v in village],
        "district": [f"R{v // 12}D{v // 4}" for v in village],
        "village": [f"R{v // 12}D{v // 4}V{v}" for v in village],
        "sex": rng.choice(["female", "male"], n),
        "age": rng.choice(["0-14", "15-64", "65+"], n, p=[0.2, 0.65, 0.15]),
    })


def _workload() -> Workload:
    return Workload.from_expressions(SCHEMA, {"detailed": "detailed", "sex": "marginal(sex)",
                                              "age": "marginal(age)"})


def _budget() -> Budget:
    return Budget("pure", 1, {lv: "1/4" for lv in LEVELS},
                  {"detailed": "1/2", "sex": "1/4", "age": "1/4"})


SPEC = Spec.from_dict({
    "invariant": [{"name": "tot", "levels": ["country"]},
                  {"query": "sex", "levels": ["village"]},             # a workload query
                  {"name": "working_age", "query": "marginal(age)", "answers": ["15-64"],
                   "levels": ["district"]}],                             # an answer by label
})


@pytest.fixture(scope="module")
def measured():
    truth = tabulate(_persons(), schema=SCHEMA, levels=LEVELS)
    noisy = measure(truth, _workload(), _budget(), rng=3, spec=SPEC)
    return truth, noisy


def test_the_published_data_are_the_truths_answers(measured):
    truth, noisy = measured
    sex = parse_query("marginal(sex)", SCHEMA)
    np.testing.assert_array_equal(noisy.invariants["village"]["sex"],
                                  sex.answer(truth.level_counts("village")))
    age = parse_query("marginal(age)", SCHEMA)
    np.testing.assert_array_equal(noisy.invariants["district"]["working_age"],
                                  age.answer(truth.level_counts("district"))[:, [1]])
    # only what is declared is published: no other level, no other answer
    assert "sex" not in noisy.invariants.get("district", {})
    assert noisy.invariants["district"]["working_age"].shape == (6, 1)
    assert noisy.provenance["query_invariants_published"] == {
        "sex": {"query": "marginal(sex)", "answers": None, "levels": ["village"]},
        "working_age": {"query": "marginal(age)", "answers": [1], "levels": ["district"]}}


@pytest.mark.parametrize("method", ["topdown", "bluedown", "gls", "sampling"])
def test_every_method_that_keeps_invariants_holds_them_exactly(measured, method):
    truth, noisy = measured
    result = postprocess(noisy, method, SPEC, rng=1)
    sex = parse_query("marginal(sex)", SCHEMA)
    li = LEVELS.index("village")
    held = sex.answer(np.asarray(result.histograms[li]))
    if method == "gls":                     # real-valued: equal to rounding error
        np.testing.assert_allclose(held, sex.answer(truth.counts[li]), atol=1e-6)
    else:
        assert np.asarray(result.histograms[li]).dtype.kind == "i"
        np.testing.assert_array_equal(held, sex.answer(truth.counts[li]))
    di = LEVELS.index("district")
    age = parse_query("marginal(age)", SCHEMA)
    np.testing.assert_allclose(age.answer(np.asarray(result.histograms[di]))[:, 1],
                               age.answer(truth.counts[di])[:, 1], atol=1e-6)


def test_a_result_that_breaks_a_query_invariant_is_reported(measured):
    truth, noisy = measured
    result = postprocess(noisy, "topdown", SPEC)
    broken = [np.array(h, copy=True) for h in result.histograms]
    # move one person from a female cell to a male cell of the same village and age: the
    # totals stay, the sex answer of that village does not
    v = int(np.flatnonzero(broken[3][:, 1] > 0)[0])
    broken[3][v, 1] -= 1
    broken[3][v, 4] += 1
    spec = SPEC.resolve_queries(noisy.workload)      # 'sex' names a workload query
    problems = verify_histograms(broken, spec, SCHEMA, truth.geography, noisy.invariants,
                                 integer=True, consistent=False, invariants=True)
    assert any("sex: female" in p for p in problems), problems


def test_the_spec_round_trips_and_saved_measurements_keep_the_data(measured, tmp_path):
    _, noisy = measured
    again = Spec.from_dict(json.loads(json.dumps(SPEC.to_dict())))
    assert again == SPEC
    assert again.invariants[1] == Invariant("sex", ["village"], query="sex")
    loaded = NoisyHierarchy.load(noisy.save(tmp_path / "noisy"))
    np.testing.assert_array_equal(loaded.invariants["village"]["sex"],
                                  noisy.invariants["village"]["sex"])
    assert postprocess(loaded, "topdown", SPEC).histograms[3].sum() == \
        noisy.invariants["country"]["tot"][0]


def test_constraint_answers_by_label_compile_like_indices():
    by_label = Constraint("no_children", type="structural_zero", query="marginal(age)",
                          answers=["0-14"])
    by_index = Constraint("no_children", type="structural_zero", query="marginal(age)",
                          answers=[0])
    from invariants.compile import compile_spec

    truth = tabulate(_persons(200), schema=SCHEMA, levels=LEVELS)
    a = compile_spec(Spec(constraints=[by_label]), SCHEMA, truth.geography, {})
    b = compile_spec(Spec(constraints=[by_index]), SCHEMA, truth.geography, {})
    for lv in LEVELS:
        assert (a[lv].matrix != b[lv].matrix).nnz == 0 and a[lv].labels == b[lv].labels
    assert list(a["village"].labels) == ["no_children: 0-14"]


@pytest.mark.parametrize("entry, message", [
    ({"name": "tot", "query": "marginal(sex)"}, "names a catalogue entry"),
    ({"name": "tot", "answers": [0]}, "answers go with a query"),
    ({"query": "marginal(sex)", "answers": [-1]}, "answers must be a list"),
    ({"query": "marginal(sex)", "answers": [True]}, "answers must be a list"),
    ({"query": "marginal(sex)", "colour": "red"}, "unknown key(s) ['colour']"),
    ({"query": "  "}, "query must be a query expression"),
])
def test_bad_query_invariants_are_refused_where_they_are_written(entry, message):
    text = "[[invariant]]\n" + "".join(f"{k} = {json.dumps(v)}\n" for k, v in entry.items())
    with pytest.raises(SpecError) as info:
        Spec.from_toml_string(text, source="spec.toml")
    assert str(info.value).startswith("spec.toml, line "), str(info.value)
    assert message in str(info.value)


def test_unknown_labels_and_queries_say_what_there_is(measured):
    truth, _ = measured
    from invariants.compile import compile_spec

    spec = Spec.from_toml_string('[[invariant]]\nquery = "marginal(age)"\nanswers = ["15-65"]\n'
                                 'levels = ["village"]\n', source="spec.toml")
    with pytest.raises(SpecError) as info:
        compile_spec(spec, SCHEMA, truth.geography, {"village": {"marginal(age)": np.zeros(
            (24, 1), np.int64)}})
    assert str(info.value).startswith("spec.toml, line 1: invariant 'marginal(age)': ")
    assert "'0-14', '15-64', '65+'" in str(info.value)
    unknown = Spec(invariants=[Invariant("x", ["village"], query="sexes")])
    with pytest.raises(Exception, match=r"invariant 'x': query 'sexes' is neither a query of "
                                        r"the workload \(\['age', 'detailed', 'sex'\]\)"):
        measure(truth, _workload(), _budget(), rng=3, spec=unknown)


def test_a_query_invariant_may_not_share_a_constraints_name():
    with pytest.raises(SpecError, match="has the name of a constraint or sum"):
        Spec(invariants=[Invariant("adults", query="marginal(age)")],
             constraints=[Constraint("adults", type="linear", query="total", sense=">=",
                                     rhs=0)])


def test_a_config_validates_and_its_run_holds_the_declared_query_exactly(tmp_path):
    persons = _persons(1500, seed=9)
    persons.to_csv(tmp_path / "people.csv", index=False)
    config = tmp_path / "run.toml"
    config.write_text(f"""\
[data]
persons = "people.csv"

[schema]
name = "villages"
attributes = [{{name = "sex", labels = ["female", "male"]}},
              {{name = "age", labels = ["0-14", "15-64", "65+"]}}]

[geography]
levels = {json.dumps(LEVELS)}

[workload.queries]
detailed = "detailed"
sex = "marginal(sex)"

[budget]
kind = "pure"
total = 1.0
level_fractions = {{ country = 0.25, region = 0.25, district = 0.25, village = 0.25 }}
query_fractions = {{ detailed = 0.5, sex = 0.5 }}

[mechanism]
name = "geometric"

[randomness]
mode = "simulation"
seed = 4

[spec]
[[spec.invariant]]
name = "tot"
levels = ["country"]
[[spec.invariant]]
query = "sex"
levels = ["village"]

[output]
""")
    out = tmp_path / "out"
    assert main(["validate", str(config)]) == 0
    assert main(["run", str(config), "--out", str(out), "--no-progress"]) == 0
    estimate = load_run(out).estimate
    truth = tabulate(persons, schema=SCHEMA, levels=LEVELS)
    sex = parse_query("marginal(sex)", SCHEMA)
    np.testing.assert_array_equal(sex.answer(np.asarray(estimate.histograms[3])),
                                  sex.answer(truth.level_counts("village")))
    # the noisy village sex answers differ from the truth: the hold is the post-processor's
    assert not np.array_equal(load_run(out).noisy.get("village", "sex").values,
                              sex.answer(truth.level_counts("village")))
