"""pandas-first input: a user's own schema (sex × age group × tenure) and own geocodes, given as
integer codes, labels, pandas categoricals, a pyarrow table or a file, with range recodes (age in
years → groups), tabulate to the same hierarchy; the invariants are declared once, in the spec;
the whole path tabulate → measure → TopDown → evaluate gives the same result from every form."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from hierarchy.budget import Budget
from hierarchy.errors import HierarchyError
from hierarchy.io import Recode, read_microdata
from hierarchy.measurement import measure, spec_statistics
from hierarchy.queries import Workload
from hierarchy.schema import Attribute, Schema
from hierarchy.tabulation import tabulate
from invariants.spec import Invariant, Spec
from postproc.errors import PostprocError
from postproc.evaluation.evaluate import evaluate
from postproc.evaluation.tables import level_error_table
from postproc.methods import postprocess

SEX = ("female", "male")
AGE = ("child", "adult", "senior")
TENURE = ("owner", "renter", "group quarters")
SCHEMA = Schema((Attribute("sex", SEX), Attribute("age", AGE), Attribute("tenure", TENURE)),
                name="survey")
LEVELS = ["country", "province", "district"]
AGE_GROUPS = {"0-17": "child", "18-64": "adult", "65-": "senior"}


def age_group(years):
    return np.where(years < 18, 0, np.where(years < 65, 1, 2))


@pytest.fixture(scope="module")
def people():
    """1,500 persons: the codes, and age in years (0..99) whose groups are the age codes."""
    rng = np.random.default_rng(11)
    n = 1_500
    province = rng.integers(1, 5, n)
    district = rng.integers(1, 4, n)
    years = rng.integers(0, 100, n)
    codes = pd.DataFrame({
        "province": [f"P{p:02d}" for p in province],
        "district": [f"P{p:02d}-{d:03d}" for p, d in zip(province, district)],
        "sex": rng.integers(0, 2, n), "age": age_group(years), "tenure": rng.integers(0, 3, n)})
    return codes, years


def as_labels(codes):
    return codes.assign(sex=np.array(SEX)[codes.sex], age=np.array(AGE)[codes.age],
                        tenure=np.array(TENURE)[codes.tenure])


def as_categoricals(codes):
    """Categories in another order than the schema's, and tenure's a subset of its labels."""
    labels = as_labels(codes)
    present = [t for t in TENURE if t in set(labels.tenure)]
    return labels.assign(sex=pd.Categorical(labels.sex, categories=["male", "female"]),
                         age=pd.Categorical(labels.age, categories=AGE[::-1]),
                         tenure=pd.Categorical(labels.tenure, categories=present[::-1]))


def same_hierarchy(a, b):
    return a.geography.equals(b.geography) and all(
        np.array_equal(x, y) for x, y in zip(a.counts, b.counts))


def test_labels_categoricals_tables_and_files_tabulate_like_codes(people, tmp_path):
    codes, years = people
    reference = tabulate(codes, schema=SCHEMA, levels=LEVELS)
    assert reference.summary()["country"]["persons"] == len(codes)
    labels, cats = as_labels(codes), as_categoricals(codes)
    assert set(cats.tenure.cat.categories) <= set(TENURE)
    forms = {
        "labels": tabulate(labels, schema=SCHEMA, levels=LEVELS),
        "categoricals": tabulate(cats, schema=SCHEMA, levels=LEVELS),
        "arrow labels": tabulate(pa.Table.from_pandas(labels), schema=SCHEMA, levels=LEVELS),
        "arrow categoricals": tabulate(pa.Table.from_pandas(cats), schema=SCHEMA, levels=LEVELS),
        "years": tabulate(codes.assign(age=years), schema=SCHEMA, levels=LEVELS,
                          values={"age": AGE_GROUPS}),
    }
    renamed = labels.rename(columns={"district": "ward", "sex": "gender"})
    forms["renamed"] = tabulate(renamed, schema=SCHEMA, levels=LEVELS,
                                columns={"district": "ward", "sex": "gender"})
    labels.assign(age=years).to_parquet(tmp_path / "people.parquet", index=False)
    labels.to_csv(tmp_path / "people.csv", index=False)
    forms["parquet path"] = tabulate(tmp_path / "people.parquet", schema=SCHEMA, levels=LEVELS,
                                     values={"age": AGE_GROUPS})
    forms["csv path"] = tabulate(str(tmp_path / "people.csv"), schema=SCHEMA, levels=LEVELS)
    for name, truth in forms.items():
        assert same_hierarchy(truth, reference), name


def test_read_microdata_takes_dataframes_like_tables(people):
    codes, years = people
    for frame in (as_labels(codes), as_categoricals(codes), codes):
        data = read_microdata(frame, schema=SCHEMA, levels=LEVELS)
        for attr in SCHEMA.names:
            assert data.persons.column(attr).to_pylist() == codes[attr].tolist()
        assert data.persons_source == "persons table"
    data = read_microdata(codes.assign(age=years), schema=SCHEMA, levels=LEVELS,
                          values={"age": AGE_GROUPS})
    assert data.persons.column("age").to_pylist() == codes.age.tolist()
    with pytest.raises(HierarchyError, match=r"persons must be a pandas DataFrame, a pyarrow "
                                             r"Table or the path .*not list"):
        read_microdata([1, 2], schema=SCHEMA, levels=LEVELS)


def test_range_recode_bounds_and_errors():
    age = SCHEMA.attribute("age")
    recode = Recode(age, {"0-17": "child", "18-64": 1, "65+": "senior"})
    years = np.arange(0, 130)
    assert [recode.code(str(y)) for y in years] == age_group(years).tolist()
    # an exact key wins over the range that holds it only if they do not overlap: they may not
    with pytest.raises(HierarchyError, match=r"keys '18-64' and 30 both cover 30\.\.30"):
        Recode(age, {"0-17": "child", "18-64": "adult", 30: "senior"})
    with pytest.raises(HierarchyError, match=r"keys '0-' and '65-' both cover 65\.\."):
        Recode(age, {"0-": "child", "65-": "senior"})
    with pytest.raises(HierarchyError, match=r"range '64-18' ends before it starts"):
        Recode(age, {"64-18": "adult"})
    with pytest.raises(HierarchyError, match=r"values\['age'\]\['0-17'\] = 'kid'.*levels are "
                                             r"\['child', 'adult', 'senior'\]"):
        Recode(age, {"0-17": "kid"})
    frame = pd.DataFrame({"province": ["P1"] * 4, "district": ["D1"] * 4, "sex": [0] * 4,
                          "age": [3, 70, 130, 140], "tenure": [0] * 4})
    with pytest.raises(HierarchyError) as err:
        tabulate(frame, schema=SCHEMA, levels=LEVELS,
                 values={"age": {"0-17": "child", "18-64": "adult", "65-120": "senior"}})
    message = str(err.value)
    assert "column 'age'" in message and "2 value(s) are covered by no key" in message
    assert "'130', '140'" in message and "rows 2, 3" in message
    assert "['0-17', '18-64', '65-120']" in message
    # a value that is exactly a key (a literal '0-17' in the data) maps by that key
    assert Recode(age, {"0-17": "child", "18-": "adult"}).code("0-17") == 0


def test_labels_not_in_the_schema_name_column_value_row_and_labels(people):
    codes, _ = people
    labels = as_labels(codes.head(6))
    bad = labels.assign(tenure=labels.tenure.where(labels.index != 4, "tenant"))
    with pytest.raises(HierarchyError) as err:
        tabulate(bad, schema=SCHEMA, levels=LEVELS)
    message = str(err.value)
    assert "column 'tenure'" in message and "'tenant'" in message and "(row 4)" in message
    assert "['owner', 'renter', 'group quarters']" in message
    cat = labels.assign(sex=pd.Categorical(np.where(labels.index == 2, "M", labels.sex)))
    with pytest.raises(HierarchyError, match=r"column 'sex'.*'M' \(row 2\)\. Levels are "
                                             r"\['female', 'male'\]"):
        read_microdata(cat, schema=SCHEMA, levels=LEVELS)
    unused = labels.assign(sex=pd.Categorical(labels.sex, categories=[*SEX, "unknown"]))
    with pytest.raises(HierarchyError, match=r"'sex'.*categories that are not levels of the "
                                             r"attribute: 'unknown' \(no row uses them\).*"
                                             r"remove_unused_categories"):
        tabulate(unused, schema=SCHEMA, levels=LEVELS)
    missing = labels.assign(age=labels.age.where(labels.index != 3, None))
    with pytest.raises(HierarchyError, match=r"'age'.*1 missing value\(s\) at row 3"):
        tabulate(missing, schema=SCHEMA, levels=LEVELS)
    with pytest.raises(HierarchyError, match=r"column mapping names \['years'\]"):
        tabulate(labels, schema=SCHEMA, levels=LEVELS, columns={"years": "age"})


SPEC = Spec(invariants=(Invariant("tot", ["country", "province"]),), unit_attribute="tenure")
WORKLOAD = Workload.from_expressions(SCHEMA, {"detailed": "detailed",
                                              "sex_age": "marginal(sex, age)",
                                              "tenure": "marginal(tenure)"})
BUDGET = Budget("pure", 2, {"country": "1/3", "province": "1/3", "district": "1/3"},
                {"detailed": "1/2", "sex_age": "1/4", "tenure": "1/4"})


def test_publish_is_derived_from_the_spec(people):
    codes, _ = people
    truth = tabulate(codes, schema=SCHEMA, levels=LEVELS)
    # the spec declares tot at country and province, and nothing else
    assert spec_statistics(SPEC, LEVELS) == {"tot": ["country", "province"]}
    by_spec = measure(truth, WORKLOAD, BUDGET, rng=3, spec=SPEC)
    explicit = measure(truth, WORKLOAD, BUDGET, rng=3, publish={"tot": ["country", "province"]})
    assert by_spec.provenance["invariants_published"] == {"tot": ["country", "province"]}
    for level in ("country", "province"):
        assert by_spec.invariants[level]["tot"].tolist() == truth.totals(level).tolist()
        assert np.array_equal(by_spec.invariants[level]["tot"],
                              explicit.invariants[level]["tot"])
    assert "district" not in by_spec.invariants
    # publishing more than the spec needs is the user's choice; less is an error naming both
    more = measure(truth, WORKLOAD, BUDGET, rng=3, spec=SPEC,
                   publish={"tot": ["country", "province", "district"]})
    assert more.invariants["district"]["tot"].tolist() == truth.totals("district").tolist()
    with pytest.raises(HierarchyError) as err:
        measure(truth, WORKLOAD, BUDGET, rng=3, spec=SPEC, publish={"tot": "country"})
    message = str(err.value)
    assert "the spec declares 'tot' invariant at ['country', 'province']" in message
    assert "publish= publishes it at ['country'], without ['province']" in message
    with pytest.raises(HierarchyError, match="spec= must be a Spec"):
        measure(truth, WORKLOAD, BUDGET, rng=3, spec={"tot": ["country"]})


def run_through(frame, **options):
    """tabulate → measure (invariants from the spec) → TopDown → evaluate."""
    truth = tabulate(frame, schema=SCHEMA, levels=LEVELS, **options)
    noisy = measure(truth, WORKLOAD, BUDGET, rng=5, spec=SPEC)
    result = postprocess(noisy, "topdown", SPEC)
    table = evaluate(result, truth, rng=0, epl_options={"n_boot": 0})
    return truth, noisy, result, table


def test_whole_path_from_labels_and_categoricals_equals_the_code_path(people):
    codes, years = people
    truth, noisy, result, table = run_through(codes)
    # the invariants hold, and every level is evaluated on total and the workload's own queries
    for level in ("country", "province"):
        assert result.histograms[LEVELS.index(level)].sum(axis=1).tolist() == \
            truth.totals(level).tolist()
    assert table["query"].unique().tolist() == ["total", "detailed", "sex_age", "tenure"]
    assert table.groupby("level", sort=False)["query"].count().to_dict() == \
        {lv: 4 for lv in LEVELS}
    assert (table.loc[table["level"] != "district"].query("query == 'total'")["mae"] == 0).all()
    for frame, options in ((as_labels(codes), {}), (as_categoricals(codes), {}),
                           (as_labels(codes).assign(age=years), {"values": {"age": AGE_GROUPS}})):
        truth2, noisy2, result2, table2 = run_through(frame, **options)
        assert same_hierarchy(truth2, truth)
        assert all(np.array_equal(a, b) for a, b in zip(result2.histograms, result.histograms))
        pd.testing.assert_frame_equal(table2, table)


def test_the_error_table_shows_every_query_of_the_workload(people):
    codes, _ = people
    truth, noisy, result, _ = run_through(codes)
    table = level_error_table(truth, noisy, result.histograms, WORKLOAD)
    assert [(r.level, r.query) for r in table.itertuples()] == [
        (lv, q) for lv in LEVELS for q in ("total", "detailed", "sex_age", "tenure")]
    tenure = WORKLOAD["tenure"]
    row = table[(table["level"] == "district") & (table["query"] == "tenure")].iloc[0]
    exact = tenure.answer(truth.level_counts("district"))
    assert row["topdown_mae"] == np.median(np.abs(tenure.answer(result.histograms[-1]) - exact))
    assert row["measured"] == "tenure"
    with pytest.raises(PostprocError, match=r"no query \[.race.\]"):
        level_error_table(truth, noisy, result.histograms, WORKLOAD, ["total", "race"])
