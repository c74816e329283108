"""invariants.spec: TOML and Python forms of invariants and constraints, located errors, round
trips and the E2E preset.

Every error a user can make in a spec file must name the file and the line of the offending
entry; the tests below check the exact line for each kind of mistake.
"""

from __future__ import annotations

import re
import textwrap

import pytest

from invariants.errors import SpecError
from invariants.spec import CATALOGUE_CONSTRAINTS, INVARIANTS, Constraint, Invariant, Spec

LEVELS = ["nation", "state", "county", "enum_dist"]

FULL = textwrap.dedent("""\
    unit_attribute = "hhgq"
    household_level = 0
    imply_upward = false

    [[invariant]]
    name = "tot"
    levels = ["nation", "state"]

    [[invariant]]
    name = "gqhh_vect"
    levels = "enum_dist"

    [[invariant]]
    name = "gqhh_tot"

    [[constraint]]
    name = "hhgq_total_lb"
    levels = ["enum_dist", "state"]

    [[constraint]]
    name = "hhgq_total_ub"
    levels = ["enum_dist", "state"]

    [[constraint]]
    name = "total_ge_households"
    levels = "all"

    [[constraint]]
    name = "no_correctional_or_college"
    type = "structural_zero"
    query = "recode(hhgq: correctional=1; college=5)"
    levels = "all"

    [[constraint]]
    name = "nursing_adults_only"
    type = "linear"
    query = "recode(hhgq: nursing=3) * marginal(votingage)"
    answers = [0]
    sense = "=="
    rhs = 0
    levels = ["county"]

    [[constraint]]
    name = "rhs_list"
    type = "linear"
    query = "marginal(votingage)"
    sense = "<="
    rhs = [10, 20.5]

    [[constraint]]
    name = "rhs_tot"
    type = "linear"
    query = "total"
    sense = ">="
    rhs = "tot"

    [[constraint]]
    name = "rhs_gqhh"
    type = "linear"
    query = "marginal(hhgq)"
    sense = ">="
    rhs = "gqhh"

    [[constraint]]
    name = "rhs_gqhh_i"
    type = "linear"
    query = "recode(hhgq: household=0)"
    sense = ">="
    rhs = "gqhh[ 0 ]"
    """)


def line_of(text: str, needle: str, occurrence: int = 1) -> int:
    """1-based line number of the ``occurrence``-th line containing ``needle``."""
    hits = [i for i, line in enumerate(text.splitlines(), start=1) if needle in line]
    return hits[occurrence - 1]


def error_of(text: str, source: str = "spec.toml") -> str:
    with pytest.raises(SpecError) as info:
        Spec.from_toml_string(text, source=source)
    return str(info.value)


# ---------------------------------------------------------------------------------------------
# parsing every item kind
# ---------------------------------------------------------------------------------------------


def test_full_toml_parses_every_item_kind():
    spec = Spec.from_toml_string(FULL, source="full.toml")
    assert spec.unit_attribute == "hhgq" and spec.household_level == 0
    assert spec.imply_upward is False
    assert [(i.name, i.levels) for i in spec.invariants] == [
        ("tot", ("nation", "state")), ("gqhh_vect", ("enum_dist",)), ("gqhh_tot", "all")]
    assert [i.statistic for i in spec.invariants] == ["tot", "gqhh", "gqhh"]
    by_name = {c.name: c for c in spec.constraints}
    assert by_name["hhgq_total_lb"].type == "catalogue"
    assert by_name["hhgq_total_lb"].levels == ("enum_dist", "state")
    assert by_name["total_ge_households"].levels == "all"
    sz = by_name["no_correctional_or_college"]
    assert (sz.type, sz.query, sz.answers, sz.sense, sz.rhs) == (
        "structural_zero", "recode(hhgq: correctional=1; college=5)", None, None, None)
    lin = by_name["nursing_adults_only"]
    assert (lin.type, lin.answers, lin.sense, lin.rhs, lin.levels) == (
        "linear", (0,), "==", 0, ("county",))
    assert by_name["rhs_list"].rhs == (10, 20.5)
    assert by_name["rhs_list"].statistic_reference() is None
    assert by_name["rhs_tot"].statistic_reference() == ("tot", None)
    assert by_name["rhs_gqhh"].statistic_reference() == ("gqhh", None)
    assert by_name["rhs_gqhh_i"].statistic_reference() == ("gqhh", 0)
    # each item remembers where it came from
    assert by_name["rhs_tot"].source == "full.toml"
    assert by_name["rhs_tot"].line == line_of(FULL, 'name = "rhs_tot"')
    assert spec.invariants[1].line == line_of(FULL, 'name = "gqhh_vect"')


def test_defaults_of_an_empty_spec():
    spec = Spec.from_toml_string("", source="empty.toml")
    assert spec == Spec()
    assert (spec.invariants, spec.constraints, spec.unit_attribute, spec.household_level,
            spec.imply_upward) == ((), (), "hhgq", 0, True)


def test_single_table_instead_of_array_is_accepted():
    spec = Spec.from_toml_string('[invariant]\nname = "tot"\nlevels = "all"\n')
    assert [i.name for i in spec.invariants] == ["tot"]


def test_python_objects_match_toml():
    spec = Spec.from_toml_string(FULL)
    again = Spec(
        invariants=(Invariant("tot", ("nation", "state")), Invariant("gqhh_vect", "enum_dist"),
                    Invariant("gqhh_tot")),
        constraints=spec.constraints, imply_upward=False)
    assert again == spec
    # answers given as a bare int become a 1-tuple; rhs lists become tuples
    c = Constraint("x", type="linear", query="total", answers=0, sense=">=", rhs=[1])
    assert c.answers == (0,) and c.rhs == (1,)


def test_catalogues_are_the_spec_names():
    assert set(INVARIANTS) == {"tot", "gqhh_vect", "gqhh_tot"}
    assert set(CATALOGUE_CONSTRAINTS) == {"hhgq_total_lb", "hhgq_total_ub",
                                          "total_ge_households"}


# ---------------------------------------------------------------------------------------------
# round trip
# ---------------------------------------------------------------------------------------------


def _toml_of(d: dict) -> str:
    """A tiny TOML writer for spec dicts (tomllib cannot write)."""
    def val(v):
        if isinstance(v, bool):
            return "true" if v else "false"
        if isinstance(v, str):
            return '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'
        if isinstance(v, (list, tuple)):
            return "[" + ", ".join(val(x) for x in v) + "]"
        return repr(v)
    out = [f"{k} = {val(v)}" for k, v in d.items() if not isinstance(v, list)
           or not all(isinstance(x, dict) for x in v) or not v]
    for key in ("invariant", "constraint"):
        for item in d.get(key, []):
            out.append(f"\n[[{key}]]")
            out.extend(f"{k} = {val(v)}" for k, v in item.items())
    return "\n".join(line for line in out if not line.startswith(("invariant =",
                                                                   "constraint =")))


@pytest.mark.parametrize("spec", [Spec.from_toml_string(FULL), Spec.e2e(LEVELS), Spec(),
                                  Spec.e2e(["nation", "state"])],
                         ids=["full", "e2e", "empty", "e2e-two-levels"])
def test_to_dict_from_dict_round_trip(spec):
    d = spec.to_dict()
    assert Spec.from_dict(d) == spec
    assert Spec.from_dict(d).to_dict() == d
    # and through TOML text, which is how configs carry specs
    assert Spec.from_toml_string(_toml_of(d)) == spec


def test_from_toml_file_and_missing_file(tmp_path):
    path = tmp_path / "my_spec.toml"
    path.write_text(FULL, encoding="utf-8")
    spec = Spec.from_toml(path)
    assert spec == Spec.from_toml_string(FULL)
    assert spec.constraints[0].source == str(path)
    with pytest.raises(SpecError, match="does not exist"):
        Spec.from_toml(tmp_path / "nope.toml")
    bad = tmp_path / "bad.toml"
    bad.write_text('[[invariant]]\nname = "tots"\n', encoding="utf-8")
    with pytest.raises(SpecError, match=re.escape(f"{bad}, line 2: unknown invariant 'tots'")):
        Spec.from_toml(bad)


# ---------------------------------------------------------------------------------------------
# E2E preset
# ---------------------------------------------------------------------------------------------


def test_e2e_preset_is_the_documented_e2e_spec():
    spec = Spec.e2e(LEVELS)
    assert [(i.name, i.levels) for i in spec.invariants] == [
        ("tot", ("nation", "state")), ("gqhh_vect", ("enum_dist",)),
        ("gqhh_tot", ("enum_dist",))]
    c = {x.name: x for x in spec.constraints}
    assert list(c) == ["hhgq_total_lb", "hhgq_total_ub", "total_ge_households",
                       "structural_zeros"]
    assert set(c["hhgq_total_lb"].levels) == {"enum_dist", "state"}
    assert set(c["hhgq_total_ub"].levels) == {"enum_dist", "state"}
    assert c["total_ge_households"].levels == "all"
    sz = c["structural_zeros"]
    assert sz.type == "structural_zero" and sz.levels == "all"
    assert sz.query == "recode(hhgq: correctional=1; college=5)"
    assert spec.imply_upward and spec.unit_attribute == "hhgq" and spec.household_level == 0
    assert spec.levels_of(c["hhgq_total_lb"], LEVELS) == ("state", "enum_dist")
    assert spec.invariant_levels("tot", LEVELS) == ("nation", "state")
    assert spec.invariant_levels("gqhh", LEVELS) == ("enum_dist",)
    spec.check_levels(LEVELS)


def test_e2e_preset_with_two_levels_and_errors():
    spec = Spec.e2e(["nation", "state"])
    c = {x.name: x for x in spec.constraints}
    assert c["hhgq_total_lb"].levels == ("state",)     # bottom and second level coincide
    assert spec.invariants[0].levels == ("nation", "state")
    with pytest.raises(SpecError, match="at least two levels"):
        Spec.e2e(["nation"])


# ---------------------------------------------------------------------------------------------
# check_levels
# ---------------------------------------------------------------------------------------------


def test_check_levels_names_the_item_file_and_line():
    text = FULL.replace('levels = ["county"]', 'levels = ["county", "tract"]')
    spec = Spec.from_toml_string(text, source="s.toml")
    with pytest.raises(SpecError) as info:
        spec.check_levels(LEVELS)
    msg = str(info.value)
    line = line_of(text, 'name = "nursing_adults_only"')
    assert msg.startswith(f"s.toml, line {line}: ")
    assert "constraint 'nursing_adults_only'" in msg and "['tract']" in msg
    assert str(LEVELS) in msg
    inv = Spec(invariants=(Invariant("tot", ["nation", "region"]),))
    with pytest.raises(SpecError, match=r"invariant 'tot' names unknown level\(s\) \['region'\]"):
        inv.check_levels(LEVELS)
    Spec(invariants=(Invariant("tot", "all"),)).check_levels(["a"])   # "all" never fails


# ---------------------------------------------------------------------------------------------
# every error path names the file and line
# ---------------------------------------------------------------------------------------------

# (description, TOML text, the line's marker (its occurrence), and words the message must hold)
ITEM_ERRORS = [
    ("unknown invariant", '[[invariant]]\nname = "tots"\n', 'name = "tots"',
     ["unknown invariant 'tots'", "['gqhh_tot', 'gqhh_vect', 'tot']"]),
    ("unknown constraint", '[[constraint]]\nname = "hhgq_total_lbb"\n', 'name = "hhgq_total_lbb"',
     ["unknown constraint 'hhgq_total_lbb'", "type = \"linear\""]),
    ("levels not a list", '[[invariant]]\nname = "tot"\nlevels = 3\n', 'name = "tot"',
     ["'tot' needs levels", "3"]),
    ("levels empty", '[[constraint]]\nname = "hhgq_total_lb"\nlevels = []\n',
     'name = "hhgq_total_lb"', ["needs levels"]),
    ("levels of numbers", '[[constraint]]\nname = "hhgq_total_lb"\nlevels = ["state", 2]\n',
     'name = "hhgq_total_lb"', ["needs levels"]),
    ("level twice", '[[invariant]]\nname = "tot"\nlevels = ["state", "state"]\n',
     'name = "tot"', ["lists a level twice"]),
    ("bad type", '[[constraint]]\nname = "c"\ntype = "quadratic"\nquery = "total"\n',
     'name = "c"', ["unknown type 'quadratic'", "structural_zero"]),
    ("catalogue with query", '[[constraint]]\nname = "hhgq_total_ub"\nquery = "total"\n',
     'name = "hhgq_total_ub"', ["takes only levels"]),
    ("linear without query", '[[constraint]]\nname = "c"\ntype = "linear"\nsense = "=="\n'
     'rhs = 0\n', 'name = "c"', ["needs a query"]),
    ("blank query", '[[constraint]]\nname = "c"\ntype = "structural_zero"\nquery = "  "\n',
     'name = "c"', ["needs a query"]),
    ("bad sense", '[[constraint]]\nname = "c"\ntype = "linear"\nquery = "total"\nsense = "<"\n'
     'rhs = 0\n', 'name = "c"', ["sense", "'<'"]),
    ("missing sense", '[[constraint]]\nname = "c"\ntype = "linear"\nquery = "total"\nrhs = 0\n',
     'name = "c"', ["sense", "None"]),
    ("missing rhs", '[[constraint]]\nname = "c"\ntype = "linear"\nquery = "total"\n'
     'sense = ">="\n', 'name = "c"', ["needs rhs"]),
    ("boolean rhs", '[[constraint]]\nname = "c"\ntype = "linear"\nquery = "total"\n'
     'sense = ">="\nrhs = true\n', 'name = "c"', ["needs rhs"]),
    ("bad rhs reference", '[[constraint]]\nname = "c"\ntype = "linear"\nquery = "total"\n'
     'sense = ">="\nrhs = "tots"\n', 'name = "c"', ["rhs 'tots'", "tot, gqhh, gqhh[i]"]),
    ("rhs list of strings", '[[constraint]]\nname = "c"\ntype = "linear"\nquery = "total"\n'
     'sense = ">="\nrhs = ["a"]\n', 'name = "c"', ["rhs list must hold numbers"]),
    ("rhs table", '[[constraint]]\nname = "c"\ntype = "linear"\nquery = "total"\n'
     'sense = ">="\nrhs = {a = 1}\n', 'name = "c"', ["bad rhs"]),
    ("structural zero with rhs", '[[constraint]]\nname = "z"\ntype = "structural_zero"\n'
     'query = "total"\nrhs = 0\n', 'name = "z"', ["takes no sense or rhs"]),
    ("negative answers", '[[constraint]]\nname = "c"\ntype = "linear"\nquery = "total"\n'
     'answers = [-1]\nsense = ">="\nrhs = 0\n', 'name = "c"', ["answers must be"]),
    ("empty answers", '[[constraint]]\nname = "c"\ntype = "structural_zero"\nquery = "total"\n'
     'answers = []\n', 'name = "c"', ["answers must be"]),
    ("boolean answers", '[[constraint]]\nname = "c"\ntype = "structural_zero"\nquery = "total"\n'
     'answers = [true]\n', 'name = "c"', ["answers must be"]),
    ("unknown constraint key", '[[constraint]]\nname = "hhgq_total_lb"\nlevel = "state"\n',
     'name = "hhgq_total_lb"', ["unknown key(s) ['level']", "allowed"]),
    ("unknown invariant key", '[[invariant]]\nname = "tot"\nsense = "=="\n', 'name = "tot"',
     ["unknown key(s) ['sense']"]),
]


@pytest.mark.parametrize("what,text,marker,words", ITEM_ERRORS, ids=[e[0] for e in ITEM_ERRORS])
def test_item_errors_name_file_and_line(what, text, marker, words):
    # Put two valid entries first so the line is not trivially 1 or 2.
    prefix = ('[[invariant]]\nname = "gqhh_vect"\nlevels = "all"\n\n'
              '[[constraint]]\nname = "total_ge_households"\n\n')
    full = prefix + text
    msg = error_of(full, source="dir/spec.toml")
    assert msg.startswith(f"dir/spec.toml, line {line_of(full, marker)}: "), msg
    for w in words:
        assert w in msg, (w, msg)


def test_line_is_found_for_single_quoted_names():
    text = "[[invariant]]\nname = 'tot'\n\n[[invariant]]\nname = 'tots'\n"
    assert error_of(text).startswith("spec.toml, line 5: ")


def test_same_name_twice_reports_the_later_line():
    # Two entries with the same (bad) name: the second is reported at its own line.
    text = ('[[constraint]]\nname = "c"\ntype = "structural_zero"\nquery = "total"\n\n'
            '[[constraint]]\nname = "c"\ntype = "structural_zero"\nquery = ""\n')
    assert error_of(text).startswith("spec.toml, line 7: ")


def test_duplicate_constraint_names_name_file_and_line():
    text = ('[[constraint]]\nname = "hhgq_total_lb"\nlevels = ["state"]\n\n'
            '[[constraint]]\nname = "hhgq_total_lb"\nlevels = ["enum_dist"]\n')
    msg = error_of(text, source="d.toml")
    assert "must be unique" in msg and "hhgq_total_lb" in msg
    assert msg.startswith("d.toml, line 6: "), msg


def test_duplicate_invariant_names_name_file_and_line():
    text = ('[[invariant]]\nname = "tot"\nlevels = ["nation"]\n\n'
            '[[invariant]]\nname = "tot"\nlevels = ["state"]\n')
    msg = error_of(text, source="d.toml")
    assert "'tot' is declared twice" in msg and "list all its levels in one entry" in msg
    assert msg.startswith("d.toml, line 6: "), msg


def test_duplicate_names_in_python_objects():
    with pytest.raises(SpecError, match="must be unique; repeated: \\['x'\\]"):
        Spec(constraints=(Constraint("x", type="structural_zero", query="total"),
                          Constraint("x", type="structural_zero", query="total")))
    with pytest.raises(SpecError, match="declared twice"):
        Spec(invariants=(Invariant("tot", "nation"), Invariant("tot", "state")))
    # the same name for an invariant and a constraint is fine (different namespaces)
    Spec(invariants=(Invariant("tot"),),
         constraints=(Constraint("tot", type="linear", query="total", sense=">=", rhs=0),))


def test_missing_name_names_file_and_line():
    text = '[[invariant]]\nname = "tot"\n\n[[constraint]]\nlevels = "all"\n'
    msg = error_of(text, source="m.toml")
    assert "needs a name" in msg
    assert msg.startswith("m.toml, line 4: "), msg     # the entry's [[constraint]] header


def test_unknown_top_level_key_names_file_and_line():
    text = '[[invariant]]\nname = "tot"\n\n[[constraints]]\nname = "hhgq_total_lb"\n'
    msg = error_of(text, source="k.toml")
    assert "unknown spec key(s) ['constraints']" in msg and "'constraint'" in msg
    assert msg.startswith("k.toml, line 4: "), msg


def test_invalid_toml_names_file_and_line():
    # tomllib locates the error; we keep its words after the file name
    msg = error_of('[[invariant]]\nname = tot\nlevels = "all"\n', source="bad.toml")
    assert msg.startswith("bad.toml: invalid TOML: ") and "line 2" in msg, msg
    msg = error_of('[[invariant]]\nname = "tot"\nlevels = [\n', source="bad.toml")
    assert msg.startswith("bad.toml: invalid TOML: ") and "end of document" in msg, msg


def test_entries_that_are_not_tables():
    msg = error_of('invariant = ["tot"]\n', source="t.toml")
    assert msg.startswith("t.toml") and "[[invariant]]" in msg


def test_bad_top_level_values_are_spec_errors():
    # household_level must be an integer code and imply_upward a boolean; a string "false"
    # silently meaning True would be a trap.
    with pytest.raises(SpecError, match="household_level"):
        Spec.from_toml_string('household_level = "zero"\n', source="h.toml")
    with pytest.raises(SpecError, match="imply_upward"):
        Spec.from_toml_string('imply_upward = "false"\n', source="h.toml")
    with pytest.raises(SpecError, match="unit_attribute"):
        Spec.from_toml_string('unit_attribute = 3\n', source="h.toml")


def test_python_construction_errors_have_no_location_but_name_the_item():
    with pytest.raises(SpecError, match=r"^unknown invariant 'x'"):
        Invariant("x")
    with pytest.raises(SpecError, match=r"^every constraint needs a name"):
        Constraint("")
    with pytest.raises(SpecError, match=r"^linear constraint 'c' needs sense"):
        Constraint("c", type="linear", query="total", rhs=1)
