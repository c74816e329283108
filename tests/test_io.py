"""Reading microdata: CSV and parquet, column and value mapping, and errors that name the file,
the column, the rows (and CSV lines) and the fix. Nothing may be dropped."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from hierarchy.errors import HierarchyError
from hierarchy.io import check_units, read_microdata, read_table
from hierarchy.schema import E2E_1940
from hierarchy.tabulation import tabulate

LEVELS = ["nation", "state", "county"]
COLUMNS = {"state": "st", "county": "co", "hhgq": "gq", "votingage": "age18",
           "hispanic": "hisp", "cenrace": "race"}
RACES = list(E2E_1940.attribute("cenrace").labels)


def random_persons(n, seed):
    """Persons in the file's own coding: race as labels or codes (mixed), voting age as Y/N,
    Hispanic as 1/2 (census style), geocodes with leading zeros."""
    rng = np.random.default_rng(seed)
    state = rng.integers(1, 4, n)
    county = rng.integers(1, 4, n)
    race = rng.integers(0, 6, n)
    frame = pd.DataFrame({
        "st": [f"{s:02d}" for s in state],
        "co": [f"{s:02d}{c:03d}" for s, c in zip(state, county)],
        "gq": rng.choice([0, 0, 0, 3, 6], n),
        "age18": np.where(rng.random(n) < 0.7, "Y", "N"),
        "hisp": rng.integers(1, 3, n),
        "race": [RACES[r] if i % 2 else str(r) for i, r in enumerate(race)],
    })
    return frame, race


VALUES = {"votingage": {"N": 0, "Y": "18+"}, "hispanic": {1: "not Hispanic", 2: 1}}


def units_for(persons):
    """One unit per distinct (county, gq) of the persons, so every person has a unit."""
    return persons.drop_duplicates(["co", "gq"])[["st", "co", "gq"]].reset_index(drop=True)


def expected_codes(frame, race):
    return {"hhgq": frame.gq.to_numpy(), "votingage": (frame.age18 == "Y").to_numpy().astype(int),
            "hispanic": frame.hisp.to_numpy() - 1, "cenrace": race}


@pytest.mark.parametrize("fmt", ["csv", "csv.gz", "parquet"])
def test_read_with_column_and_value_maps(tmp_path, fmt):
    persons, race = random_persons(300, 1)
    units = units_for(persons)
    p_path, u_path = tmp_path / f"persons.{fmt}", tmp_path / f"units.{fmt}"
    if fmt == "parquet":
        persons.to_parquet(p_path, index=False)
        units.to_parquet(u_path, index=False)
    else:
        persons.to_csv(p_path, index=False)
        units.to_csv(u_path, index=False)
    data = read_microdata(p_path, schema=E2E_1940, levels=LEVELS, columns=COLUMNS,
                          values=VALUES, units=u_path)
    assert data.levels == tuple(LEVELS) and data.unit_attribute == "hhgq"
    assert data.persons.num_rows == len(persons)             # nothing dropped
    assert data.units.num_rows == len(units)
    assert data.persons.column_names == ["state", "county", "hhgq", "votingage", "hispanic",
                                         "cenrace"]
    for name, codes in expected_codes(persons, race).items():
        np.testing.assert_array_equal(data.persons.column(name).to_numpy(), codes)
    # geocodes keep their leading zeros
    assert data.persons.column("county").to_pylist() == persons.co.tolist()
    assert data.persons.column("state").to_pylist() == persons.st.tolist()
    # the result tabulates, and every person is counted exactly once
    truth = tabulate(data.persons, schema=E2E_1940, levels=LEVELS, units=data.units)
    assert truth.totals("nation").tolist() == [len(persons)]
    by_county = persons.groupby("co").size()
    np.testing.assert_array_equal(truth.totals("county"),
                                  by_county.reindex(truth.geography.geocodes[2]).to_numpy())
    assert truth.level_units("nation").sum() == len(units)


def test_pyarrow_tables_and_default_column_names():
    table = pa.table({"state": ["01", "01"], "county": ["01001", "01002"],
                      "hhgq": pa.array([0, 7], pa.int64()), "votingage": ["18+", "under 18"],
                      "hispanic": [0, 1], "cenrace": ["other", "white"]})
    data = read_microdata(table, schema=E2E_1940, levels=LEVELS)
    assert data.persons.column("hhgq").to_pylist() == [0, 7]
    assert data.persons.column("votingage").to_pylist() == [1, 0]
    assert data.persons.column("cenrace").to_pylist() == [5, 0]
    assert data.units is None and data.unit_attribute is None


def test_float_codes_from_parquet(tmp_path):
    # integer codes stored as floats (pandas does this when a column once had gaps)
    frame = pd.DataFrame({"state": ["01"], "county": ["01001"], "hhgq": [3.0],
                          "votingage": [1.0], "hispanic": [0.0], "cenrace": [2.0]})
    frame.to_parquet(tmp_path / "p.parquet")
    data = read_microdata(tmp_path / "p.parquet", schema=E2E_1940, levels=LEVELS)
    assert [data.persons.column(a).to_pylist()[0] for a in E2E_1940.names] == [3, 1, 0, 2]
    frame.assign(hhgq=[2.5]).to_parquet(tmp_path / "q.parquet")
    with pytest.raises(HierarchyError, match=r"'hhgq'.*'2.5'"):
        read_microdata(tmp_path / "q.parquet", schema=E2E_1940, levels=LEVELS)


# ---------------------------------------------------------------------------------------------
# error paths
# ---------------------------------------------------------------------------------------------

HEADER = "st,co,gq,age18,hisp,race\n"


def write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    return path


def read(path, **kw):
    return read_microdata(path, schema=E2E_1940, levels=LEVELS,
                          columns=kw.pop("columns", COLUMNS), **kw)


def test_missing_column_names_file_and_fix(tmp_path):
    path = write(tmp_path, "p.csv", "st,co,gq,age18,hisp\n01,01001,0,1,0\n")
    with pytest.raises(HierarchyError) as err:
        read(path)
    msg = str(err.value)
    assert str(path) in msg and "no column 'race' for 'cenrace'" in msg
    assert "columns={'cenrace': 'your_column'}" in msg


def test_column_mapping_with_unknown_names():
    with pytest.raises(HierarchyError, match=r"\['sex'\], which are neither levels"):
        read_microdata(pa.table({"x": [1]}), schema=E2E_1940, levels=LEVELS,
                       columns={"sex": "s"})


def test_missing_geocode_names_rows_and_csv_lines(tmp_path):
    path = write(tmp_path, "p.csv", HEADER + "01,01001,0,1,0,0\n01,,0,1,0,0\n"
                                              "01,01001,0,1,0,0\n")
    with pytest.raises(HierarchyError, match=r"column 'co' \(county geocode\) is missing at "
                                             r"row 1 \(CSV line 3\)"):
        read(path)
    path = write(tmp_path, "q.csv", HEADER + "01,01001,0,1,0,0\n,01001,0,1,0,0\n")
    with pytest.raises(HierarchyError, match=r"'st' \(state geocode\) is missing at row 1 "
                                             r"\(CSV line 3\)"):
        read(path)
    table = pa.table({"state": ["01", ""], "county": ["a", "b"], "hhgq": [0, 0],
                      "votingage": [0, 0], "hispanic": [0, 0], "cenrace": [0, 0]})
    with pytest.raises(HierarchyError, match=r"table: column 'state' \(state geocode\) is "
                                             r"empty at row 1"):
        read_microdata(table, schema=E2E_1940, levels=LEVELS)


def test_unknown_values_name_rows_and_csv_lines(tmp_path):
    lines = ["01,01001,0,1,0,white", "01,01001,0,1,0,purple", "01,01001,0,1,0,0",
             "01,01001,0,1,0,mauve", "01,01001,0,1,0,purple"]
    path = write(tmp_path, "p.csv", HEADER + "\n".join(lines) + "\n")
    with pytest.raises(HierarchyError) as err:
        read(path)
    msg = str(err.value)
    assert str(path) in msg
    assert "column 'race' (attribute 'cenrace'): 3 value(s) are not levels" in msg
    assert "'purple'" in msg and "'mauve'" in msg
    assert "rows 1, 3, 4 (CSV lines 3, 5, 6)" in msg
    assert "values={'cenrace': {...}}" in msg


def test_out_of_range_codes_and_missing_values(tmp_path):
    path = write(tmp_path, "p.csv", HEADER + "01,01001,0,1,0,0\n01,01001,9,1,0,0\n")
    with pytest.raises(HierarchyError, match=r"'gq' \(attribute 'hhgq'\).*'9'.*row 1 "
                                             r"\(CSV line 3\)"):
        read(path)
    frame = pd.DataFrame({"state": ["01"] * 3, "county": ["a"] * 3, "hhgq": [0, 8, -1],
                          "votingage": [0] * 3, "hispanic": [0] * 3, "cenrace": [0] * 3})
    frame.to_parquet(tmp_path / "p.parquet")
    with pytest.raises(HierarchyError, match=r"'hhgq'.*2 value\(s\) outside 0..7, e.g. 8 at "
                                             r"rows 1, 2"):
        read_microdata(tmp_path / "p.parquet", schema=E2E_1940, levels=LEVELS)
    path = write(tmp_path, "m.csv", HEADER + "01,01001,0,1,0,0\n01,01001,0,,0,0\n")
    with pytest.raises(HierarchyError, match=r"'age18' \(attribute 'votingage'\) has 1 missing "
                                             r"value\(s\) at row 1 \(CSV line 3\)"):
        read(path)


def test_value_map_is_complete_or_fails(tmp_path):
    path = write(tmp_path, "p.csv", HEADER + "01,01001,0,Y,1,0\n01,01001,0,maybe,1,0\n")
    with pytest.raises(HierarchyError, match=r"'age18'.*'maybe'.*row 1 \(CSV line 3\)"):
        read(path, values=VALUES)


def test_persons_without_a_unit_of_their_type(tmp_path):
    persons = write(tmp_path, "p.csv", HEADER + "01,01001,0,1,0,0\n01,01001,3,1,0,0\n"
                                                "01,01002,0,1,0,0\n01,01001,3,0,0,0\n")
    units = write(tmp_path, "u.csv", "st,co,gq\n01,01001,0\n01,01002,0\n")
    with pytest.raises(HierarchyError) as err:
        read(persons, units=units)
    msg = str(err.value)
    assert msg.startswith(f"{persons}: 2 person(s) live in a county with no unit of their "
                          f"hhgq type in {units}")
    assert "county '01001', hhgq 3" in msg
    assert "rows 1, 3 (CSV lines 3, 5)" in msg


def test_more_units_than_persons(tmp_path):
    persons = write(tmp_path, "p.csv", HEADER + "01,01001,0,1,0,0\n01,01002,0,1,0,0\n")
    units = write(tmp_path, "u.csv", "st,co,gq\n01,01001,0\n01,01002,0\n01,01002,0\n"
                                     "01,01003,6\n")
    with pytest.raises(HierarchyError) as err:
        read(persons, units=units)
    msg = str(err.value)
    assert str(units) in msg
    # the rows of the offending units are named, with their CSV lines
    assert ("county '01002' has 2 unit(s) of hhgq type 0 (rows 1, 2 (CSV lines 3, 4)) but only "
            "1 person(s)") in msg
    assert "(2 county/type pair(s) affected)" in msg


def test_units_create_counties_only_when_they_hold_persons(tmp_path):
    # a unit in a county without persons is a vacant unit: refused (never silently dropped)
    persons = write(tmp_path, "p.csv", HEADER + "01,01001,0,1,0,0\n")
    units = write(tmp_path, "u.csv", "st,co,gq\n01,01001,0\n02,02001,0\n")
    with pytest.raises(HierarchyError, match=r"county '02001' has 1 unit\(s\).*only 0 person"):
        read(persons, units=units)


def test_check_units_accepts_consistent_tables():
    persons = pa.table({"state": ["1", "1", "1"], "county": ["a", "a", "b"],
                        "hhgq": pa.array([0, 0, 3], pa.int8())})
    units = pa.table({"state": ["1", "1"], "county": ["a", "b"],
                      "hhgq": pa.array([0, 3], pa.int8())})
    check_units(persons, units, ["state", "county"], "hhgq", 8)


def test_read_table_errors(tmp_path):
    with pytest.raises(HierarchyError, match="does not exist"):
        read_table(tmp_path / "nope.csv")
    (tmp_path / "x.json").write_text("{}")
    with pytest.raises(HierarchyError, match="unknown file type"):
        read_table(tmp_path / "x.json")
    (tmp_path / "bad.parquet").write_text("not parquet")
    with pytest.raises(HierarchyError, match="cannot be read"):
        read_table(tmp_path / "bad.parquet")
    (tmp_path / "ragged.csv").write_text("a,b\n1,2\n3\n")
    with pytest.raises(HierarchyError, match="cannot be read"):
        read_table(tmp_path / "ragged.csv")
    # CSV columns stay text: leading zeros survive
    (tmp_path / "z.csv").write_text("code\n007\n")
    assert read_table(tmp_path / "z.csv").column("code").to_pylist() == ["007"]
