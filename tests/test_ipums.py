"""An IPUMS USA 1940 extract into the E2E layout (hierarchy.io.ipums).

The extract is written here in IPUMS's format (a DDI codebook and a fixed-width data file,
rectangular or hierarchical, plain or gzipped) and first read back by IPUMS's own library,
ipumspy, so the fixture is what IPUMS delivers. Fifty persons in 20 households and group-quarters
facilities, 2 states, 3 counties (state 01 and 04 both have ICPSR county 0010), 5 EDs (two
numbered 1 in different counties): every E2E value is written beside its IPUMS codes by hand.
"""

from __future__ import annotations

import gzip
import json
import re
import textwrap
import tomllib
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
from _configs import e2e_config, save_config

from hierarchy.errors import ConfidentialDataError, HierarchyError
from hierarchy.io.ipums import (
    LEVELS,
    MADE_BY,
    read_ipums_1940,
    write_ipums_1940_parquet,
)
from hierarchy.io.ipums_extract import write_ipums_extract
from hierarchy.schema import E2E_1940
from hierarchy.tabulation import tabulate
from postproc.cli import main
from postproc.errors import PostprocError

VARIABLES = ("SERIAL", "STATEFIP", "COUNTYICP", "ENUMDIST", "GQ", "GQTYPE", "AGE", "HISPAN",
             "RACE")
#: IPUMS codes                                  → E2E (hhgq, votingage, hispanic, cenrace)
PEOPLE = [
    # state 01, county 0010, ED 1: a household of four, one of two, a household under the 1990
    # definition that GQTYPE 9 calls "other non-institutional GQ", a prison (GQTYPE 2)
    ((1, 1, 10, 1, 1, 0, 45, 0, 1), (0, 1, 0, 0)),
    ((1, 1, 10, 1, 1, 0, 43, 0, 1), (0, 1, 0, 0)),
    ((1, 1, 10, 1, 1, 0, 17, 0, 1), (0, 0, 0, 0)),
    ((1, 1, 10, 1, 1, 0, 0, 0, 1), (0, 0, 0, 0)),
    ((2, 1, 10, 1, 1, 0, 18, 0, 2), (0, 1, 0, 1)),
    ((2, 1, 10, 1, 1, 0, 16, 0, 2), (0, 0, 0, 1)),
    ((3, 1, 10, 1, 2, 9, 60, 0, 1), (7, 1, 0, 0)),
    ((3, 1, 10, 1, 2, 9, 25, 0, 2), (7, 1, 0, 1)),
    ((4, 1, 10, 1, 3, 2, 30, 0, 2), (1, 1, 0, 1)),
    ((4, 1, 10, 1, 3, 2, 22, 1, 1), (1, 1, 1, 0)),
    ((4, 1, 10, 1, 3, 2, 41, 0, 3), (1, 1, 0, 2)),
    # state 01, county 0010, ED 2: a Mexican household, a mental institution, a home for the aged
    ((5, 1, 10, 2, 1, 0, 35, 1, 1), (0, 1, 1, 0)),
    ((5, 1, 10, 2, 1, 0, 12, 1, 1), (0, 0, 1, 0)),
    ((5, 1, 10, 2, 1, 0, 8, 1, 3), (0, 0, 1, 2)),
    ((6, 1, 10, 2, 3, 3, 55, 0, 1), (2, 1, 0, 0)),
    ((6, 1, 10, 2, 3, 3, 70, 0, 2), (2, 1, 0, 1)),
    ((7, 1, 10, 2, 3, 4, 81, 0, 1), (3, 1, 0, 0)),
    ((7, 1, 10, 2, 3, 4, 15, 0, 1), (3, 0, 0, 0)),
    # state 01, county 0030, ED 1: Chinese and Japanese households, a barracks, a dormitory
    ((8, 1, 30, 1, 1, 0, 50, 0, 4), (0, 1, 0, 3)),
    ((8, 1, 30, 1, 1, 0, 20, 0, 4), (0, 1, 0, 3)),
    ((9, 1, 30, 1, 1, 0, 33, 0, 5), (0, 1, 0, 4)),
    ((9, 1, 30, 1, 1, 0, 3, 0, 5), (0, 0, 0, 4)),
    ((10, 1, 30, 1, 4, 6, 19, 0, 1), (4, 1, 0, 0)),
    ((10, 1, 30, 1, 4, 6, 21, 0, 2), (4, 1, 0, 1)),
    ((10, 1, 30, 1, 4, 6, 23, 2, 1), (4, 1, 1, 0)),
    ((11, 1, 30, 1, 4, 7, 18, 0, 1), (5, 1, 0, 0)),
    ((11, 1, 30, 1, 4, 7, 17, 0, 6), (5, 0, 0, 5)),
    # state 04, county 0010, ED 1: Mexican, Cuban and other Hispanic persons, a rooming house
    ((12, 4, 10, 1, 1, 0, 38, 1, 1), (0, 1, 1, 0)),
    ((12, 4, 10, 1, 1, 0, 36, 1, 1), (0, 1, 1, 0)),
    ((12, 4, 10, 1, 1, 0, 10, 1, 1), (0, 0, 1, 0)),
    ((12, 4, 10, 1, 1, 0, 6, 1, 1), (0, 0, 1, 0)),
    ((13, 4, 10, 1, 1, 0, 29, 3, 1), (0, 1, 1, 0)),
    ((13, 4, 10, 1, 1, 0, 27, 4, 7), (0, 1, 1, 5)),
    ((14, 4, 10, 1, 4, 8, 44, 0, 1), (6, 1, 0, 0)),
    ((14, 4, 10, 1, 4, 8, 52, 0, 2), (6, 1, 0, 1)),
    ((14, 4, 10, 1, 4, 8, 61, 1, 1), (6, 1, 1, 0)),
    # state 04, county 0010, ED 7: an American Indian household, other non-institutional GQ, ...
    ((15, 4, 10, 7, 1, 0, 40, 0, 3), (0, 1, 0, 2)),
    ((15, 4, 10, 7, 1, 0, 14, 0, 3), (0, 0, 0, 2)),
    ((15, 4, 10, 7, 1, 0, 2, 0, 3), (0, 0, 0, 2)),
    ((16, 4, 10, 7, 4, 9, 28, 0, 1), (7, 1, 0, 0)),
    ((16, 4, 10, 7, 4, 9, 31, 0, 6), (7, 1, 0, 5)),
    ((17, 4, 10, 7, 1, 0, 90, 0, 2), (0, 1, 0, 1)),
    ((17, 4, 10, 7, 1, 0, 1, 0, 2), (0, 0, 0, 1)),
    ((18, 4, 10, 7, 2, 0, 65, 2, 1), (0, 1, 1, 0)),
    ((18, 4, 10, 7, 2, 0, 64, 0, 1), (0, 1, 0, 0)),
    ((19, 4, 10, 7, 1, 0, 47, 0, 6), (0, 1, 0, 5)),
    ((19, 4, 10, 7, 1, 0, 45, 0, 4), (0, 1, 0, 3)),
    ((19, 4, 10, 7, 1, 0, 13, 0, 6), (0, 0, 0, 5)),
    # back in state 01, county 0030, ED 1 (a state's persons need not be contiguous)
    ((20, 1, 30, 1, 1, 0, 70, 0, 2), (0, 1, 0, 1)),
    ((20, 1, 30, 1, 1, 0, 68, 0, 2), (0, 1, 0, 1)),
]
ED = {(1, 10, 1): "0100100000001", (1, 10, 2): "0100100000002", (1, 30, 1): "0100300000001",
      (4, 10, 1): "0400100000001", (4, 10, 7): "0400100000007"}
#: Persons per unit of every level, counted by hand.
TOTALS = {"nation": {"0": 50}, "state": {"01": 29, "04": 21},
          "county": {"010010": 18, "010030": 11, "040010": 21},
          "enum_dist": {"0100100000001": 11, "0100100000002": 7, "0100300000001": 11,
                        "0400100000001": 9, "0400100000007": 12}}
#: Unit types in serial order: 12 households; a prison, a mental institution, a home for the
#: aged, a barracks, a dormitory, a rooming house and two units of other non-institutional GQ
#: (serial 3, a household under hhgq_rule="gq", and 16).
UNIT_HHGQ = [0, 0, 7, 1, 0, 2, 3, 0, 0, 4, 5, 0, 0, 6, 0, 7, 0, 0, 0, 0]


def records(people=PEOPLE) -> dict[str, list[int]]:
    return {name: [codes[i] for codes, _ in people] for i, name in enumerate(VARIABLES)}


def expected_column(name: str) -> list[int]:
    return [e2e[("hhgq", "votingage", "hispanic", "cenrace").index(name)] for _, e2e in PEOPLE]


@pytest.fixture
def extract(tmp_path) -> Path:
    return write_ipums_extract(tmp_path / "rect", records())


def test_the_extract_written_here_is_what_ipumspy_reads(tmp_path):
    from ipumspy.readers import read_hierarchical_microdata, read_ipums_ddi, read_microdata

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")                 # IPUMS's citation reminder
        rect = read_ipums_ddi(write_ipums_extract(tmp_path / "r", records()))
        frame = read_microdata(rect, tmp_path / "r" / "usa_00001.dat")
        tree = read_ipums_ddi(write_ipums_extract(tmp_path / "h", records(), compress=True,
                                                  structure="hierarchical"))
        parts = read_hierarchical_microdata(tree, tmp_path / "h" / "usa_00001.dat.gz")
    assert rect.file_description.structure == "rectangular"
    assert rect.get_variable_info("RACE").codes["Other race, nec"] == 7
    for name, values in records().items():
        assert frame[name].tolist() == values
    assert tree.file_description.rectypes == ["P", "H"] and len(parts["P"]) == 50
    assert parts["P"]["AGE"].tolist() == records()["AGE"]
    assert parts["H"]["SERIAL"].tolist() == list(range(1, 21))
    assert parts["H"]["GQTYPE"].tolist() == [0, 0, 9, 2, 0, 3, 4, 0, 0, 6, 7, 0, 0, 8, 0, 9, 0,
                                             0, 0, 0]


def test_every_person_and_unit_is_recoded_as_by_hand(extract):
    data = read_ipums_1940(extract)
    persons = data.persons.to_pydict()
    for name in ("hhgq", "votingage", "hispanic", "cenrace"):
        assert persons[name] == expected_column(name), name
    places = [codes[1:4] for codes, _ in PEOPLE]
    assert persons["state"] == [f"{s:02d}" for s, _, _ in places]
    assert persons["county"] == [f"{s:02d}{c:04d}" for s, c, _ in places]
    assert persons["enum_dist"] == [ED[p] for p in places]
    units = data.units.to_pydict()
    assert units["hhgq"] == UNIT_HHGQ
    first = [i for i, (codes, _) in enumerate(PEOPLE) if i == 0 or codes[0] != PEOPLE[i - 1][0][0]]
    assert units["enum_dist"] == [persons["enum_dist"][i] for i in first]
    assert data.persons.schema.names == ["state", "county", "enum_dist", *E2E_1940.names]
    assert "cite" in data.citation


def test_the_layout_is_the_synthetic_data_s(extract):
    from hierarchy.synth.census1940 import PERSONS_SCHEMA, UNITS_SCHEMA

    data = read_ipums_1940(extract)
    assert data.persons.schema.equals(PERSONS_SCHEMA) and data.units.schema.equals(UNITS_SCHEMA)
    assert LEVELS == ("nation", "state", "county", "enum_dist")


def test_the_tabulation_has_the_hand_counted_totals(extract):
    data = read_ipums_1940(extract)
    truth = tabulate(data.persons, schema=E2E_1940, levels=list(LEVELS), units=data.units)
    for i, level in enumerate(LEVELS):
        codes = truth.geography.geocodes[i].tolist()
        assert dict(zip(codes, truth.counts[i].sum(axis=1).tolist())) == TOTALS[level], level
    expected = np.zeros((5, E2E_1940.size), dtype=np.int64)
    eds = sorted(ED.values())
    for codes, e2e in PEOPLE:
        cell = E2E_1940.cell_index(dict(zip(E2E_1940.names, ([v] for v in e2e))))[0]
        expected[eds.index(ED[codes[1:4]]), cell] += 1
    assert truth.geography.geocodes[3].tolist() == eds
    np.testing.assert_array_equal(truth.counts[3], expected)
    assert truth.leaf_units.sum() == 20


@pytest.mark.parametrize("chunksize", [1, 7, 1000])
def test_hierarchical_gzipped_and_chunked_extracts_read_the_same(tmp_path, extract, chunksize):
    whole = read_ipums_1940(extract)
    tree = write_ipums_extract(tmp_path / "tree", records(), structure="hierarchical",
                               compress=True)
    for ddi in (extract, tree):
        part = read_ipums_1940(ddi, chunksize=chunksize)
        assert part.persons.equals(whole.persons) and part.units.equals(whole.units)


def test_a_hierarchical_extract_skips_vacant_units_and_checks_serial_numbers(tmp_path, extract):
    whole = read_ipums_1940(extract)
    tree = write_ipums_extract(tmp_path, records(), structure="hierarchical")
    data = tree.with_suffix(".dat")
    text = data.read_text().splitlines()
    assert [line[0] for line in text[:6]] == ["H", "P", "P", "P", "P", "H"]
    vacant = text[0][:5] + "00000099" + " " * (len(text[0]) - 13)   # RECTYPE, YEAR, SERIAL
    data.write_text("\n".join(text[:5] + [vacant] + text[5:]) + "\n")
    for chunksize in (1, 4, 100):
        part = read_ipums_1940(tree, chunksize=chunksize)
        assert part.persons.equals(whole.persons) and part.units.equals(whole.units)
    assert write_ipums_1940_parquet(tree, None, tmp_path / "out")["lines"] == 50 + 20 + 1
    text[1] = text[1][:5] + "00000007" + text[1][13:]       # a person with another serial
    data.write_text("\n".join(text) + "\n")
    refused(tree, r"line 2: the person's SERIAL 7 is not that of the household record before "
                  r"it \(1\)")


def test_the_chunked_writer_gives_the_one_shot_reader_s_rows(tmp_path, extract):
    whole = read_ipums_1940(extract)
    summary = write_ipums_1940_parquet(extract, None, tmp_path / "out", chunksize=7)
    persons, units = pq.read_table(summary["persons_path"]), pq.read_table(summary["units_path"])
    assert persons.num_rows == 50 and persons.to_pandas().equals(whole.persons.to_pandas())
    assert units.to_pandas().equals(whole.units.to_pandas())
    assert pq.ParquetFile(summary["persons_path"]).metadata.num_row_groups == 8
    meta = json.loads(persons.schema.metadata[b"dapp"])
    assert meta["made_by"] == MADE_BY and meta["table"] == "persons" and meta["citation"]
    assert {k: summary[k] for k in ("persons", "households", "gq_facilities", "states",
                                    "counties", "enum_dists", "lines")} == \
        {"persons": 50, "households": 12, "gq_facilities": 8, "states": 2, "counties": 3,
         "enum_dists": 5, "lines": 50}
    with pytest.raises(HierarchyError, match=r"pass --overwrite \(overwrite=True\) to replace it"):
        write_ipums_1940_parquet(extract, None, tmp_path / "out")
    again = write_ipums_1940_parquet(extract, None, tmp_path / "out", overwrite=True)
    assert again["persons"] == 50
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "units.parquet").write_text("mine")
    with pytest.raises(HierarchyError, match="was not written by this toolkit"):
        write_ipums_1940_parquet(extract, None, foreign, overwrite=True)
    assert (foreign / "units.parquet").read_text() == "mine"


def test_gq_rule_counts_households_by_gq(tmp_path, extract):
    data = read_ipums_1940(extract, hhgq_rule="gq")
    expected = [0 if codes[4] in (1, 2) else e2e[0] for codes, e2e in PEOPLE]
    assert data.persons.column("hhgq").to_pylist() == expected
    assert data.units.column("hhgq").to_pylist() == [0, 0, 0] + UNIT_HHGQ[3:]
    bad = write_ipums_extract(tmp_path / "untyped", records([((1, 1, 10, 1, 3, 0, 30, 0, 1),
                                                              None)]))
    with pytest.raises(ConfidentialDataError, match="GQ says group quarters"):
        read_ipums_1940(bad, hhgq_rule="gq")
    vacant = write_ipums_extract(tmp_path / "vacant", records([((1, 1, 10, 1, 0, 0, 30, 0, 1),
                                                                None)]))
    with pytest.raises(ConfidentialDataError, match=r"GQ code 0 \(Vacant unit\) is neither"):
        read_ipums_1940(vacant, hhgq_rule="gq")
    assert read_ipums_1940(vacant).persons.column("hhgq").to_pylist() == [0]   # E2E: GQTYPE


def test_another_county_variable_is_named_by_columns(tmp_path):
    rows = records()
    rows["COUNTYNHG"] = [s * 10000 + c for s, c in zip(rows["STATEFIP"], rows.pop("COUNTYICP"))]
    ddi = write_ipums_extract(tmp_path, rows)
    with pytest.raises(HierarchyError, match=r"usa_00001\.xml: the codebook has no variable "
                                             r"COUNTYICP \(the county\)"):
        read_ipums_1940(ddi)
    data = read_ipums_1940(ddi, columns={"county": "countynhg"})
    assert data.persons.column("county").to_pylist()[0] == "010010010"
    assert data.persons.column("hhgq").to_pylist() == expected_column("hhgq")


def refused(ddi, match, **options) -> ConfidentialDataError:
    with pytest.raises(ConfidentialDataError, match=match) as caught:
        read_ipums_1940(ddi, **options)
    return caught.value


@pytest.mark.parametrize("variable,code,label,line", [
    ("RACE", 8, "Two major races", 3), ("HISPAN", 9, "Not Reported", 10),
    ("GQTYPE", 5, "Non-institutional GQ", 44), ("GQTYPE", 1, "Institution", 44)])
def test_a_code_with_no_e2e_level_is_refused_naming_it(tmp_path, variable, code, label, line):
    rows = records()
    serial = rows["SERIAL"][line - 1]
    members = [i for i, s in enumerate(rows["SERIAL"]) if s == serial] \
        if variable == "GQTYPE" else [line - 1]             # a household's type is shared
    for i in members:
        rows[variable][i] = code
    error = refused(write_ipums_extract(tmp_path, rows), f"line {line}: {variable} code {code} "
                                                         rf"\({label}")
    assert "has no level of the E2E schema" in str(error)
    assert variable in error.public and re.search(rf"\b{code}\b", error.public) is None
    assert str(tmp_path) not in error.public and error.source.endswith("usa_00001.dat")


def test_an_age_the_codebook_does_not_list_is_refused(tmp_path):
    ages = {a: str(a) for a in range(0, 121)}
    rows = records()
    rows["AGE"][4] = 130
    error = refused(write_ipums_extract(tmp_path, rows, labels={"AGE": ages}),
                    "line 5: AGE code 130 is not one of the codebook's codes")
    assert error.public == "AGE holds a code the codebook does not list"
    rows["AGE"][4] = 18
    assert read_ipums_1940(write_ipums_extract(tmp_path, rows, labels={"AGE": ages})) \
        .persons.num_rows == 50


def test_a_codebook_without_a_variable_is_refused_naming_both(tmp_path):
    rows = records()
    del rows["RACE"], rows["ENUMDIST"]
    ddi = write_ipums_extract(tmp_path, rows)
    with pytest.raises(HierarchyError) as caught:
        read_ipums_1940(ddi)
    message = str(caught.value)
    assert str(ddi) in message and "ENUMDIST (the enum_dist), RACE (the cenrace)" in message
    assert "columns={'enum_dist': ...}" in message


def test_lines_that_do_not_match_the_codebook_are_refused(tmp_path, extract):
    data = extract.with_suffix(".dat")
    lines = data.read_text().splitlines()
    data.write_text("\n".join(lines[:6] + [lines[6][:-1]] + lines[7:]) + "\n")
    error = refused(extract, r"usa_00001\.dat line 7: 31 characters, but usa_00001\.xml "
                             "describes records of 32")
    assert error.public.startswith("a record's length does not match the codebook's layout")
    data.write_text("\r\n".join(lines) + "\r\n")           # DOS line ends are read
    assert read_ipums_1940(extract).persons.num_rows == 50
    tree = write_ipums_extract(tmp_path / "tree", records(), structure="hierarchical")
    text = tree.with_suffix(".dat").read_text().splitlines()
    tree.with_suffix(".dat").write_text("\n".join(text[:3] + ["X" + text[3][1:]] + text[4:]))
    refused(tree, r"line 4: record type 'X', which usa_00001\.xml does not describe")
    tree.with_suffix(".dat").write_text("\n".join(text[1:]))
    refused(tree, "line 1: a person record before any household record")


def test_a_field_that_is_not_a_number_is_refused(extract):
    data = extract.with_suffix(".dat")
    lines = data.read_text().splitlines()
    lines[2] = lines[2][:-1] + "?"                         # RACE is the last field
    data.write_text("\n".join(lines) + "\n")
    error = refused(extract, r"line 3: RACE \(the cenrace\) is '\?', not a number")
    assert error.public == ("RACE (the cenrace) holds a value that is not a number; is this the "
                            "data file of that codebook?")
    lines[2] = lines[2][:-1] + " "
    data.write_text("\n".join(lines) + "\n")
    refused(extract, r"line 3: RACE \(the cenrace\) is blank")


def test_households_must_agree_and_be_contiguous(tmp_path):
    rows = records()
    rows["ENUMDIST"][1] = 2                               # one person of household 1 moved
    refused(write_ipums_extract(tmp_path / "a", rows),
            "line 2: household 1 has persons in two enumeration districts")
    rows = records()
    rows["SERIAL"][-2:] = [1, 1]                          # serial 1 again at the end
    for name in ("STATEFIP", "COUNTYICP", "ENUMDIST", "GQ", "GQTYPE"):
        rows[name][-2:] = rows[name][:2]
    error = refused(write_ipums_extract(tmp_path / "b", rows),
                    "the persons of household 1 are in two separate runs of lines")
    assert "1940 100% sample" in error.public
    rows = records()
    rows["YEAR"] = [1940] * 49 + [1950]
    refused(write_ipums_extract(tmp_path / "c", rows), "line 50: YEAR is 1950, not 1940")


def test_what_is_not_an_extract_is_refused(tmp_path, extract):
    with pytest.raises(HierarchyError, match="the DDI codebook does not exist"):
        read_ipums_1940(tmp_path / "nothing.xml")
    (tmp_path / "bad.xml").write_text("<codeBook/>")
    with pytest.raises(HierarchyError, match=r"bad\.xml: cannot be read as an IPUMS DDI"):
        read_ipums_1940(tmp_path / "bad.xml")
    text = extract.read_text().replace("fixed length fields", "comma separated values")
    (tmp_path / "csv.xml").write_text(text)
    with pytest.raises(HierarchyError, match="request the fixed-width text"):
        read_ipums_1940(tmp_path / "csv.xml")
    with pytest.raises(HierarchyError, match="the data file .* does not exist"):
        read_ipums_1940(extract, tmp_path / "elsewhere.dat")
    with pytest.raises(HierarchyError, match="hhgq_rule must be one of e2e, gq"):
        read_ipums_1940(extract, hhgq_rule="labels")
    with pytest.raises(HierarchyError, match=r"columns names the roles \['sex'\]"):
        read_ipums_1940(extract, columns={"sex": "SEX"})
    with pytest.raises(HierarchyError, match="chunksize must be a positive number"):
        read_ipums_1940(extract, chunksize=0)
    empty = extract.with_suffix(".dat")
    empty.write_text("")
    with pytest.raises(HierarchyError, match="has no person records"):
        read_ipums_1940(extract)
    truncated = tmp_path / "cut.dat.gz"
    truncated.write_bytes(gzip.compress(b"1940" * 1000)[:40])
    with pytest.raises(HierarchyError, match="is the download complete"):
        read_ipums_1940(extract, truncated)


def test_the_command_writes_the_files_and_reports_errors(tmp_path, extract, capsys):
    out = tmp_path / "e2e"
    assert main(["ipums1940", str(extract), "--out", str(out), "--no-progress"]) == 0
    printed = capsys.readouterr().out
    assert "50 persons, 12 households, 8 gq facilities, 2 states, 3 counties, 5 enum dists" \
        in printed and "IPUMS asks to be cited" in printed
    assert pq.read_table(out / "persons.parquet").num_rows == 50
    assert main(["ipums1940", str(extract), "--out", str(out), "--no-progress",
                 "--county", "COUNTYNHG"]) == 1
    assert "no variable COUNTYNHG (the county)" in capsys.readouterr().err


def docs_spec() -> dict:
    """The ``[spec]`` docs/data.md tells a run on the full count to use: the E2E spec without
    its structural zeros of hhgq 1 and 5, which real 1940 data break (a prison, a dormitory)."""
    text = (Path(__file__).parents[1] / "docs" / "data.md").read_text(encoding="utf-8")
    block = text.split("```toml\n", 1)[1].split("```", 1)[0]
    assert block.lstrip().startswith("[spec]")
    return tomllib.loads(textwrap.dedent(block))["spec"]


def test_a_run_on_the_extract_needs_the_spec_without_structural_zeros(tmp_path, extract,
                                                                      capsys):
    data = tmp_path / "e2e"
    write_ipums_1940_parquet(extract, None, data)
    preset = save_config(tmp_path / "preset.toml", e2e_config(data))
    assert main(["run", str(preset), "--out", str(tmp_path / "a"), "--no-progress"]) == 1
    assert "structural_zeros" in capsys.readouterr().err
    spec = docs_spec()
    assert [i["name"] for i in spec["invariant"]] == ["tot", "gqhh_vect", "gqhh_tot"]
    config = save_config(tmp_path / "real.toml", e2e_config(data), spec={"preset": None, **spec})
    assert main(["run", str(config), "--out", str(tmp_path / "b"), "--no-progress"]) == 0
    states = pq.read_table(tmp_path / "b" / "state.parquet").to_pandas()
    assert states.groupby("state")["count"].sum().to_dict() == TOTALS["state"]   # invariant


def test_petti_flaxman_runs_on_the_files_an_extract_becomes(extract, tmp_path):
    """postproc experiment petti_flaxman --data DIR: the study on the real-data path (here the
    50-person extract), with the E2E spec less its structural zeros (the extract has a prison and
    a dormitory, which Spec.e2e's zeros of hhgq 1 and 5 would refuse)."""
    from postproc.apps.experiments import run_experiment

    data = tmp_path / "e2e"
    write_ipums_1940_parquet(extract, None, data)
    out = tmp_path / "pf"
    summary = run_experiment("petti_flaxman", out, quick=True, log=lambda m: None, data=str(data),
                             seeds=[1], epsilons=[2.0], show_epsilon=2.0, compare_epsilon=9.0,
                             n_boot=0, srs_fractions=[0.5])
    assert summary["parameters"]["units"] == {lv: len(t) for lv, t in TOTALS.items()}
    metrics = pd.read_csv(out / "topdown_metrics.csv")
    assert set(metrics["level"]) == set(TOTALS)
    with pytest.raises(PostprocError, match="has no persons.parquet or units.parquet"):
        run_experiment("petti_flaxman", tmp_path / "none", quick=True, log=lambda m: None,
                       data=str(tmp_path / "empty"))
    assert main(["experiment", "petti_flaxman", "--data", str(data), "--sensitivity", "2"]) == 1
