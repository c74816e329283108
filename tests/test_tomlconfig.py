"""The shared TOML layer (hierarchy.io.tomlconfig): reading, line lookup, allowed keys, randomness,
typed values and writing back.

Each location test finds the expected line in the text independently of the layer (the first
line containing a marker), so a wrong lookup cannot agree with itself.
"""

from __future__ import annotations

import math
import os
import tomllib
from pathlib import Path

import pytest

from hierarchy.errors import HierarchyError
from hierarchy.io.tomlconfig import (
    RANDOMNESS_MODES,
    TomlDocument,
    check_randomness,
    dumps,
    parse_toml,
    randomness_problem,
    read_randomness,
    read_toml,
)
from invariants.errors import SpecError

TEXT = """\
# a comment
top = 1

[data]
persons = "people.parquet"
columns = { state = "ST" }

[budget]
total = 1.0

[budget.query_fractions]
detailed = 1

[[level]]
name = "state"
stability = 2

[[level]]
name = "county"
stability = 3

[ spec . "invariant" ]
name = "tot"

[output]
directory = "out"
overwrite = "yes"
workers = 0
chain = ["osqp", 3]
"""


def line_of(text: str, marker: str, occurrence: int = 1) -> int:
    hits = [i for i, line in enumerate(text.splitlines(), start=1) if marker in line]
    assert len(hits) >= occurrence, f"test bug: {marker!r} occurs {len(hits)} times"
    return hits[occurrence - 1]


@pytest.fixture
def doc():
    return parse_toml(TEXT, source="c.toml")


@pytest.mark.parametrize("table, key, index, marker, occurrence", [
    ("", "top", 0, "top = 1", 1),
    ("data", "persons", 0, "persons =", 1),
    ("data", None, 0, "[data]", 1),
    ("data", "columns", 0, "columns =", 1),
    ("budget", "detailed", 0, "detailed = 1", 1),            # in a sub-table
    ("budget", "query_fractions", 0, "[budget.query_fractions]", 1),   # a key as a table
    ("budget", "kind", 0, "[budget]", 1),                     # absent key: the table
    ("level", "name", 1, 'name = "county"', 1),
    ("level", "stability", 0, "stability = 2", 1),
    ("level", None, 1, "[[level]]", 2),
    ("spec.invariant", "name", 0, 'name = "tot"', 1),         # spaced, quoted header
    ("data.columns", None, 0, "columns =", 1),                # a table written inline
    ("", "level", 0, "[[level]]", 1),                         # a top-level key as a table
])
def test_line_lookup(doc, table, key, index, marker, occurrence):
    assert doc.line(table, key, index) == line_of(TEXT, marker, occurrence)


def test_absent_tables_and_text(doc):
    assert doc.line("randomness") is None and doc.line("randomness", "seed") is None
    assert doc.where("randomness", "seed") == "c.toml [randomness]"
    blind = TomlDocument(doc.data, source="d.toml")            # the data without its text
    assert blind.line("data", "persons") is None
    assert blind.where("data", "persons") == "d.toml [data]"
    assert str(blind.error("data", "persons", "persons must be a path")) == \
        "d.toml: [data] persons must be a path"


def test_check_sections_and_keys_list_the_allowed_ones(doc):
    with pytest.raises(HierarchyError) as info:
        doc.check_sections({"data", "budget", "level", "spec", "output"})
    assert str(info.value) == (f"c.toml, line {line_of(TEXT, 'top = 1')}: unknown section(s) "
                               "['top']; sections are ['budget', 'data', 'level', 'output', "
                               "'spec']")
    levels = doc.tables("level", allowed={"name", "stability"})
    assert [t["name"] for t in levels] == ["state", "county"]
    with pytest.raises(HierarchyError, match=rf"^c.toml, line {line_of(TEXT, 'stability = 2')}: "
                                             r"unknown key 'stability' in \[level\]; allowed: "
                                             r"\['name'\]$"):
        doc.tables("level", allowed={"name"})


def test_missing_and_non_table_sections():
    doc = parse_toml('data = "x"\n', source="c.toml", error=SpecError)
    with pytest.raises(SpecError, match=r"^c.toml: missing section \[budget\]$"):
        doc.table("budget", required=True)
    assert dict(doc.table("budget")) == {}
    with pytest.raises(SpecError, match=r"^c.toml, line 1: \[data\] must be a table$"):
        doc.table("data")
    with pytest.raises(SpecError, match=r"^c.toml, line 1: data entries must be tables"):
        doc.tables("data")


def test_typed_readers_name_file_line_table_and_key(doc, tmp_path):
    output = doc.table("output")
    cases = [
        (lambda: output.boolean("overwrite"), "overwrite =",
         "[output] overwrite must be true or false (a TOML boolean, without quotes), not 'yes'"),
        (lambda: output.positive_int("workers"), "workers =",
         "[output] workers must be a positive integer, e.g. workers = 2, not 0"),
        (lambda: output.strings("chain"), "chain =",
         "[output] chain must be a list of strings"),
        (lambda: output.path("workers"), "workers =",
         "[output] workers must be a non-empty path string"),
        (lambda: output.string("workers"), "workers =",
         "[output] workers must be a non-empty string"),
    ]
    for read, marker, words in cases:
        with pytest.raises(HierarchyError) as info:
            read()
        assert str(info.value).startswith(f"c.toml, line {line_of(TEXT, marker)}: {words}"), \
            str(info.value)
    # absent keys give the default, untouched; present good values are read
    assert output.boolean("microdata", None) is None and output.positive_int("n", 4) == 4
    assert output.path("directory", base=tmp_path) == (tmp_path / "out").resolve()
    assert output.path("elsewhere", "x", base=tmp_path) == (tmp_path / "x").resolve()
    assert output.path("elsewhere") is None
    good = parse_toml('[s]\nflag = false\nn = 3\nnames = ["a"]\nname = "x"\n').table("s")
    assert (good.boolean("flag", True), good.positive_int("n"), good.strings("names"),
            good.string("name")) == (False, 3, ("a",), "x")
    for value in ("true", "1", "2.0", "[]", '[""]'):
        bad = parse_toml(f"[s]\nv = {value}\n").table("s")
        readers = {"true": bad.positive_int, "1": bad.boolean, "2.0": bad.positive_int,
                   "[]": bad.strings, '[""]': bad.string}
        with pytest.raises(HierarchyError, match=r"^<config>, line 2: \[s\] v must be"):
            readers[value]("v")


def test_located_wraps_errors_at_the_key(doc):
    def bad():
        raise HierarchyError("the total budget must be positive")

    with pytest.raises(HierarchyError, match=rf"^c.toml, line {line_of(TEXT, 'total =')}: the "
                                             "total budget must be positive$"):
        doc.table("budget").located("total", bad)
    with pytest.raises(ZeroDivisionError):       # other errors pass through unchanged
        doc.table("budget").located("total", lambda: 1 / 0)


@pytest.mark.parametrize("mode, seed, key, words", [
    ("testing", None, "mode", 'mode must be "release"'),
    (None, None, "mode", "(seeded, NOT safe for releases)"),
    ("release", 3, "seed", "release mode cannot be seeded"),
    ("simulation", None, "mode", "simulation mode needs seed = <non-negative integer>"),
    ("simulation", -1, "seed", "needs seed = <non-negative integer>, not -1"),
    ("simulation", True, "seed", "not True"),
    ("simulation", 2.0, "seed", "not 2.0"),
])
def test_randomness_rules(mode, seed, key, words):
    found = randomness_problem(mode, seed)
    assert found is not None and found[0] == key and words in found[1]
    with pytest.raises(SpecError, match=f"^{found[1][:20]}"):
        check_randomness(mode, seed, error=SpecError)
    lines = ["[randomness]"] + ([f'mode = "{mode}"'] if mode else []) + (
        [f"seed = {str(seed).lower()}"] if seed is not None else [])
    text = "\n".join(lines) + "\n"
    with pytest.raises(HierarchyError) as info:
        read_randomness(parse_toml(text, source="r.toml").table("randomness"))
    marker = f"{key} =" if (key == "seed" or mode) else "[randomness]"
    assert str(info.value) == f"r.toml, line {line_of(text, marker)}: [randomness] {found[1]}"


def test_randomness_that_fits():
    assert set(RANDOMNESS_MODES) == {"release", "simulation"}
    for mode, seed in (("release", None), ("simulation", 0), ("simulation", 2**63)):
        assert randomness_problem(mode, seed) is None
        text = f'[randomness]\nmode = "{mode}"\n' + (f"seed = {seed}\n" if seed is not None
                                                       else "")
        assert read_randomness(parse_toml(text).table("randomness")) == (mode, seed)
    assert read_randomness(parse_toml("").table("randomness"), default_mode="release") == \
        ("release", None)


def test_read_toml_errors(tmp_path):
    with pytest.raises(SpecError, match=r"^spec file .*nope\.toml does not exist$"):
        read_toml(tmp_path / "nope.toml", what="spec file", error=SpecError)
    with pytest.raises(HierarchyError, match="is not a regular file: it is a directory; give the "
                                             "path of a .toml file"):
        read_toml(tmp_path)
    binary = tmp_path / "binary.toml"
    binary.write_bytes(b"a = \"\xff\"\n")
    with pytest.raises(HierarchyError, match=r"binary\.toml cannot be read as UTF-8 text"):
        read_toml(binary)
    broken = tmp_path / "broken.toml"
    broken.write_text("[a]\nb = 1\n[c\n")
    with pytest.raises(HierarchyError, match=rf"^{broken}: invalid TOML: .*line 3"):
        read_toml(broken)
    good = tmp_path / "good.toml"
    good.write_text("[a]\nb = 1\n")
    doc = read_toml(good)
    assert doc.data == {"a": {"b": 1}} and doc.source == str(good) and doc.line("a", "b") == 2


def test_a_byte_order_mark_is_read_as_the_editor_meant_it(tmp_path):
    """Windows editors save UTF-8 with a byte-order mark; tomllib refused it as "Invalid
    statement (line 1, column 1)" (issue 35). The file reads as without it, lines unchanged,
    and a real error after it still names its line."""
    plain, marked = tmp_path / "plain.toml", tmp_path / "marked.toml"
    text = "[budget]\ntotal = 1\n\n[output]\ndirectory = \"out\"\n"
    plain.write_text(text, encoding="utf-8")
    marked.write_text("\ufeff" + text, encoding="utf-8")
    assert marked.read_bytes().startswith(b"\xef\xbb\xbf")
    doc = read_toml(marked)
    assert doc.data == read_toml(plain).data == tomllib.loads(text)
    assert doc.line("output", "directory") == 5 and doc.line("budget") == 1
    assert parse_toml("\ufeff" + text).data == doc.data
    marked.write_text("\ufeff[a]\nb = \n", encoding="utf-8")
    with pytest.raises(HierarchyError, match=r"invalid TOML: Invalid value \(at line 2"):
        read_toml(marked)


def test_a_run_config_with_a_byte_order_mark_loads(tmp_path):
    from postproc.apps.runs.config import load_config

    example = Path(__file__).resolve().parents[1] / "examples" / "e2e1940.toml"
    plain, marked = tmp_path / "plain.toml", tmp_path / "marked.toml"
    plain.write_bytes(example.read_bytes())
    marked.write_bytes(b"\xef\xbb\xbf" + example.read_bytes())
    assert load_config(marked).raw == load_config(plain).raw
    assert load_config(marked).fingerprint() == load_config(plain).fingerprint()


@pytest.mark.timeout(20)
def test_read_toml_refuses_a_fifo_without_blocking(tmp_path):
    fifo = tmp_path / "pipe.toml"
    os.mkfifo(fifo)
    with pytest.raises(HierarchyError, match="is not a regular file: it is a named pipe"):
        read_toml(fifo)


@pytest.mark.parametrize("data", [
    {},
    {"a": 1, "b": -2.5, "c": True, "d": "quote \" and \\ and é", "e": [1, 2], "f": []},
    {"data": {"persons": "p.parquet", "columns": {"state": "ST", "odd key": "x"}},
     "budget": {"total": "1/2", "query_fractions": {"state": {"detailed": "1"}}}},
    {"spec": {"imply_upward": False, "invariant": [{"name": "tot", "levels": "all"}],
              "constraint": [{"name": "a", "rhs": [1, 2]}, {"name": "b", "levels": ["x"]}]}},
    {"only": {"nested": {"deeper": {"x": 1}}}},
    {"mixed": [{"a": 1}, 2]},
])
def test_dumps_round_trips(data):
    text = dumps(data)
    assert tomllib.loads(text) == data


def test_dumps_special_values_and_refusals():
    data = tomllib.loads(dumps({"x": {"inf": math.inf, "nan": math.nan, "path": Path("a/b"),
                                      "none": None}}))
    assert data["x"]["inf"] == math.inf and math.isnan(data["x"]["nan"])
    assert data["x"]["path"] == "a/b" and "none" not in data["x"]
    with pytest.raises(SpecError, match=r"cannot write \{1, 2\} \(set\) as TOML"):
        dumps({"x": {1, 2}}, error=SpecError)
