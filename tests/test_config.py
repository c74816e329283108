"""The run configuration: TOML → RunConfig, explicit and preset forms, and located errors.

Every error test checks the promise of :mod:`postproc.apps.runs.config`: the message starts with the
file and the line of the offending key (found in the text independently of the parser) and says what
would be valid.
"""

from __future__ import annotations

import json
import re
from fractions import Fraction
from pathlib import Path

import pytest

from hierarchy.budget import Budget
from hierarchy.mechanisms import get_mechanism
from hierarchy.queries import e2e_workload
from hierarchy.schema import E2E_1940
from invariants.spec import Invariant, Spec
from postproc.apps.runs.config import RunConfig, config_from_dict, load_config
from postproc.errors import PostprocError

REPO = Path(__file__).resolve().parents[1]
LEVELS = ("nation", "state", "county", "enum_dist")

PRESETS = """\
[data]
persons = "data/persons.parquet"
units = "data/units.parquet"

[schema]
preset = "e2e_1940"

[geography]
levels = ["nation", "state", "county", "enum_dist"]

[workload]
preset = "e2e"

[budget]
kind = "pure"
total = 1.0
preset = "e2e"

[mechanism]
name = "geometric"

[randomness]
mode = "simulation"
seed = 7

[spec]
preset = "e2e"

[solver]
executor = "serial"

[output]
directory = "out"
"""

# The E2E spec written out, once as tables inside the config and once as a file of its own.
SPEC_BODY = """\
[[{p}invariant]]
name = "tot"
levels = ["nation", "state"]

[[{p}invariant]]
name = "gqhh_vect"
levels = ["enum_dist"]

[[{p}invariant]]
name = "gqhh_tot"
levels = ["enum_dist"]

[[{p}constraint]]
name = "hhgq_total_lb"
levels = ["enum_dist", "state"]

[[{p}constraint]]
name = "hhgq_total_ub"
levels = ["enum_dist", "state"]

[[{p}constraint]]
name = "total_ge_households"
levels = "all"

[[{p}constraint]]
name = "structural_zeros"
type = "structural_zero"
query = "recode(hhgq: correctional=1; college=5)"
levels = "all"
"""


def _schema_toml() -> str:
    attrs = ", ".join("{name = %s, labels = %s}" % (json.dumps(a.name), json.dumps(list(a.labels)))
                      for a in E2E_1940.attributes)
    return f'name = "e2e_1940"\nattributes = [{attrs}]\n'


EXPLICIT = f"""\
[data]
persons = "in/people.csv"
units = "in/housing.csv"
columns = {{ state = "st", county = "co", enum_dist = "ed", hhgq = "gq" }}
values = {{ cenrace = {{ "1" = "white", "2" = "black" }} }}

[schema]
{_schema_toml()}
[geography]
levels = ["nation", "state", "county", "enum_dist"]

[workload.queries]
detailed = "detailed"
hhgq = "marginal(hhgq)"
va_hisp_race = "marginal(votingage, hispanic, cenrace)"

[budget]
kind = "pure"
total = 1.0
neighbours = "change"
level_fractions = {{ nation = 0.25, state = 0.25, county = 0.25, enum_dist = 0.25 }}
query_fractions = {{ detailed = 0.1, hhgq = 0.225, va_hisp_race = 0.675 }}

[mechanism]
name = "geometric"
exact = true

[randomness]
mode = "simulation"
seed = 11

[spec]
{SPEC_BODY.format(p="spec.")}
[solver]
chain = ["osqp", "clarabel"]
executor = "process"
workers = 2
failsafe = false
passes = [["va_hisp_race"], ["hhgq", "detailed"]]

[output]
directory = "results/run1"
microdata = true
"""


def _write(directory: Path, text: str, name: str = "run.toml") -> Path:
    path = directory / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def _line(text: str, pattern: str) -> int:
    """1-based line of the first line of ``text`` whose stripped form matches ``pattern``."""
    hits = [i for i, ln in enumerate(text.splitlines(), 1) if re.match(pattern, ln.strip())]
    assert hits, f"test bug: {pattern!r} not in the config"
    return hits[0]


def _replace(text: str, old: str, new: str) -> str:
    assert text.count(old) == 1, f"test bug: {old!r} occurs {text.count(old)} times"
    return text.replace(old, new)


# -- valid configurations ----------------------------------------------------------------------

def test_presets_parse_to_the_e2e_objects(tmp_path, monkeypatch):
    path = _write(tmp_path / "cfg", PRESETS)
    monkeypatch.chdir(tmp_path)  # relative paths follow the config file, not the cwd
    config = load_config(Path("cfg") / "run.toml")
    assert isinstance(config, RunConfig)
    assert config.persons == (tmp_path / "cfg" / "data" / "persons.parquet").resolve()
    assert config.units == (tmp_path / "cfg" / "data" / "units.parquet").resolve()
    assert config.output == (tmp_path / "cfg" / "out").resolve()
    assert config.schema == E2E_1940
    assert config.levels == LEVELS
    assert config.workload.names == e2e_workload(E2E_1940).names
    assert config.budget == Budget.e2e(1, LEVELS)
    assert config.mechanism == get_mechanism("geometric")
    assert (config.randomness_mode, config.seed, config.rng) == ("simulation", 7, 7)
    assert config.spec.to_dict() == Spec.e2e(LEVELS).to_dict()
    options = config.topdown
    assert options.executor == "serial" and options.failsafe and options.passes is None
    assert config.microdata is False
    assert config.publish() == {"tot": ["nation", "state"], "gqhh": ["enum_dist"]}
    assert config.source == str(Path("cfg") / "run.toml")
    resolved = config.to_dict()["resolved"]
    assert resolved["persons"] == str(config.persons) and resolved["output"] == str(config.output)
    assert path.exists()


def test_explicit_forms_equal_the_presets(tmp_path):
    config = load_config(_write(tmp_path, EXPLICIT))
    preset = load_config(_write(tmp_path, PRESETS, "preset.toml"))
    assert config.persons == (tmp_path / "in" / "people.csv").resolve()
    assert config.units == (tmp_path / "in" / "housing.csv").resolve()
    assert dict(config.columns) == {"state": "st", "county": "co", "enum_dist": "ed",
                                    "hhgq": "gq"}
    assert {k: dict(v) for k, v in config.values.items()} == {"cenrace": {"1": "white",
                                                                          "2": "black"}}
    assert config.schema == E2E_1940
    assert config.workload.names == preset.workload.names
    for q in preset.workload:
        assert (config.workload[q.name].matrix != q.matrix).nnz == 0, q.name
    assert config.budget == preset.budget
    assert config.budget.query_budget("state", "hhgq") == Fraction(9, 160)
    assert config.mechanism == get_mechanism("geometric", exact=True)
    assert config.seed == 11
    assert config.spec.to_dict() == preset.spec.to_dict()
    assert config.topdown.solver == ("osqp", "clarabel")
    assert (config.topdown.executor, config.topdown.workers,
            config.topdown.failsafe) == ("process", 2, False)
    assert config.topdown.passes == (("va_hisp_race",), ("hhgq", "detailed"))
    assert config.output == (tmp_path / "results" / "run1").resolve()
    assert config.microdata is True
    json.dumps(config.to_dict())  # the manifest copy is JSON-ready


def test_spec_file_relative_to_the_config(tmp_path, monkeypatch):
    _write(tmp_path / "project" / "specs", SPEC_BODY.format(p=""), "e2e.toml")
    text = _replace(PRESETS, '[spec]\npreset = "e2e"', '[spec]\nfile = "specs/e2e.toml"')
    _write(tmp_path / "project", text)
    monkeypatch.chdir(tmp_path)
    config = load_config("project/run.toml")
    assert config.spec.to_dict() == Spec.e2e(LEVELS).to_dict()


def test_zcdp_release_and_level_keyed_fractions(tmp_path):
    text = _replace(PRESETS, 'kind = "pure"\ntotal = 1.0\npreset = "e2e"',
                    'kind = "zcdp"\ntotal = 0.5\nneighbours = "add_remove"\n'
                    'level_fractions = { nation = 0.5, state = 0.25, county = 0.125, '
                    'enum_dist = 0.125 }\n'
                    '[budget.query_fractions]\n'
                    'nation = { detailed = 1.0 }\n'
                    'state = { detailed = 0.5, va_hisp_race = 0.5 }\n'
                    'county = { hhgq = 0.25, va_hisp_race = 0.75 }\n'
                    'enum_dist = { detailed = 0.5, hhgq = 0.5 }')
    text = _replace(text, 'name = "geometric"', 'name = "discrete_gaussian"')
    text = _replace(text, 'mode = "simulation"\nseed = 7', 'mode = "release"')
    config = load_config(_write(tmp_path, text))
    assert config.budget.kind == "zcdp" and config.budget.neighbours == "add_remove"
    assert config.budget.queries("nation") == ("detailed",)
    assert config.budget.query_budget("county", "va_hisp_race") == \
        Fraction(1, 2) * Fraction(1, 8) * Fraction(3, 4)
    assert config.mechanism.name == "discrete_gaussian"
    assert (config.randomness_mode, config.seed, config.rng) == ("release", None, None)


def test_optional_sections_default(tmp_path):
    text = PRESETS.split("[spec]")[0]  # no [spec], [solver], [output]
    config = load_config(_write(tmp_path, text))
    assert config.spec.invariants == () and config.spec.constraints == ()
    assert config.topdown.executor == "serial" and config.topdown.failsafe is True
    assert config.output == (tmp_path / "out").resolve()


def test_example_e2e1940_parses():
    path = REPO / "examples" / "e2e1940.toml"
    config = load_config(path)
    assert config.levels == LEVELS
    assert config.persons == (REPO / "data" / "e2e1940" / "persons.parquet").resolve()
    assert config.output == (REPO / "out" / "e2e1940").resolve()
    assert config.budget == Budget.e2e(1, LEVELS)
    assert config.spec.to_dict() == Spec.e2e(LEVELS).to_dict()
    assert config.randomness_mode == "simulation" and config.microdata is False
    assert config.topdown.solver[0] == "clarabel"


def test_config_from_dict_without_text():
    import tomllib

    config = config_from_dict(tomllib.loads(PRESETS), base="/srv/job")
    assert config.persons == Path("/srv/job/data/persons.parquet").resolve()
    data = tomllib.loads(PRESETS)
    del data["randomness"]["seed"]
    with pytest.raises(PostprocError,
                       match=r"^<config>: \[randomness\] simulation mode needs seed"):
        config_from_dict(data)


# -- errors: file, line of the offending key, what is valid ---------------------------------------

EXTRA_SOLVER = '[solver]\nexecutor = "serial"'

# (id, old, new, regex of the offending line in the new text, fragments of the message)
ERRORS = [
    ("unknown section", '[output]\ndirectory = "out"\n',
     '[output]\ndirectory = "out"\n\n[extras]\nthing = 1\n', r"\[extras\]",
     ["unknown section", "extras", "'randomness'", "'solver'"]),
    ("unknown key", 'persons = "data/persons.parquet"',
     'persons = "data/persons.parquet"\npeople = "x.csv"', r"people\s*=",
     ["unknown key 'people' in [data]", "'columns'", "'units'"]),
    ("unknown solver key", EXTRA_SOLVER, EXTRA_SOLVER + "\nthreads = 2", r"threads\s*=",
     ["'threads'", "'workers'"]),
    ("missing persons", 'persons = "data/persons.parquet"\n', "", r"\[data\]",
     ["persons ="]),
    ("columns for an unknown name", 'units = "data/units.parquet"',
     'units = "data/units.parquet"\ncolumns = { stat = "ST", hhgq = "GQ" }', r"columns\s*=",
     ["['stat']", "'state'", "'cenrace'"]),
    ("values for an unknown attribute", 'units = "data/units.parquet"',
     'units = "data/units.parquet"\nvalues = { cenrac = { "1" = "white" } }', r"values\s*=",
     ["['cenrac']", "'cenrace'"]),
    ("columns not a table", 'units = "data/units.parquet"',
     'units = "data/units.parquet"\ncolumns = "ST"', r"columns\s*=", ["must be a table"]),
    ("values not tables", 'units = "data/units.parquet"',
     'units = "data/units.parquet"\nvalues = { cenrace = 3 }', r"values\s*=",
     ["must be a table"]),
    ("levels not a list", 'levels = ["nation", "state", "county", "enum_dist"]',
     'levels = "nation"', r"levels\s*=", ["list of level names"]),
    ("levels repeat", 'levels = ["nation", "state", "county", "enum_dist"]',
     'levels = ["nation", "state", "state"]', r"levels\s*=", ["repeat", "'state'"]),
    ("unknown schema preset", 'preset = "e2e_1940"', 'preset = "e2e_1950"',
     r'preset = "e2e_1950"', ["e2e_1950", "'e2e_1940'", "'e2e_1940_144'"]),
    ("unknown workload preset", '[workload]\npreset = "e2e"', '[workload]\npreset = "sf1"',
     r'preset = "sf1"', ["'sf1'", '"e2e"']),
    # a query named total that is not the total passed validate and broke the error table
    # after every level was solved (issue 35)
    ("query named total that is not the total", '[workload]\npreset = "e2e"',
     '[workload.queries]\ndetailed = "detailed"\ntotal = "marginal(hhgq)"',
     r'total = "marginal', ["'total'", "marginal(hhgq)", "name it otherwise"]),
    ("query named detailed that is not", '[workload]\npreset = "e2e"',
     '[workload.queries]\ndetailed = "marginal(cenrace)"', r'detailed = "marginal',
     ["'detailed'", "marginal(cenrace)"]),
    ("query expression unknown", '[workload]\npreset = "e2e"',
     '[workload.queries]\ndetailed = "detailed"\nrace = "marginal(race)"',
     r'race = "marginal', ["'race'"]),
    ("unknown budget preset", 'total = 1.0\npreset = "e2e"', 'total = 1.0\npreset = "dhc"',
     r'preset = "dhc"', ["'dhc'", '"e2e"']),
    ("unknown spec preset", '[spec]\npreset = "e2e"', '[spec]\npreset = "pl94"',
     r'preset = "pl94"', ["'pl94'", '"e2e"']),
    ("level fractions do not sum to 1", 'total = 1.0\npreset = "e2e"',
     'total = 1.0\nlevel_fractions = { nation = 0.25, state = 0.25, county = 0.25, '
     'enum_dist = 0.2 }\nquery_fractions = { detailed = 0.1, hhgq = 0.225, '
     'va_hisp_race = 0.675 }', r"level_fractions\s*=", ["sum to 1", "19/20"]),
    ("query fractions do not sum to 1", 'total = 1.0\npreset = "e2e"',
     'total = 1.0\nlevel_fractions = { nation = 0.25, state = 0.25, county = 0.25, '
     'enum_dist = 0.25 }\nquery_fractions = { detailed = 0.1, hhgq = 0.2, '
     'va_hisp_race = 0.675 }', r"query_fractions\s*=", ["sum to 1"]),
    ("unknown query in budget", 'total = 1.0\npreset = "e2e"',
     'total = 1.0\nlevel_fractions = { nation = 0.25, state = 0.25, county = 0.25, '
     'enum_dist = 0.25 }\nquery_fractions = { detailed = 0.1, hhgq = 0.225, age = 0.675 }',
     r"query_fractions\s*=", ["'age'", "'va_hisp_race'"]),
    ("query fractions table lacks a level", 'total = 1.0\npreset = "e2e"',
     'total = 1.0\nlevel_fractions = { nation = 0.5, state = 0.25, county = 0.125, '
     'enum_dist = 0.125 }\n[budget.query_fractions]\nnation = { detailed = 1.0 }',
     r"\[budget\.query_fractions\]", ["missing for levels", "'state'"]),
    ("query fractions not a table", 'total = 1.0\npreset = "e2e"',
     'total = 1.0\nlevel_fractions = { nation = 1.0 }\nquery_fractions = 3',
     r"query_fractions\s*=", ["must be a table"]),
    ("unknown level in budget", 'total = 1.0\npreset = "e2e"',
     'total = 1.0\nlevel_fractions = { nation = 0.5, tract = 0.5 }\n'
     'query_fractions = { detailed = 1.0 }', r"level_fractions\s*=", ["'tract'", "'county'"]),
    ("budget without total", 'total = 1.0\n', "", r"\[budget\]", ["total ="]),
    ("non-positive total", 'total = 1.0', 'total = -1.0', r"total\s*=",
     ["total budget", "-1"]),
    ("unknown budget kind", 'kind = "pure"', 'kind = "approx"', r"kind\s*=",
     ["'approx'", "'pure'", "'zcdp'"]),
    ("unknown mechanism", 'name = "geometric"', 'name = "cauchy"', r'name = "cauchy"',
     ["'cauchy'", "'geometric'", "'discrete_gaussian'"]),
    ("zCDP mechanism with pure budget", 'name = "geometric"', 'name = "discrete_gaussian"',
     r'name = "discrete_gaussian"', ["zCDP", 'kind = "zcdp"']),
    ("unknown randomness mode", 'mode = "simulation"', 'mode = "testing"', r"mode\s*=",
     ['"release"', '"simulation"']),
    ("release mode with a seed", 'mode = "simulation"', 'mode = "release"', r"seed\s*=",
     ["cannot be seeded", "remove seed"]),
    ("simulation without a seed", 'seed = 7\n', "", r'mode = "simulation"',
     ["[randomness] simulation mode needs seed = <non-negative integer>"]),
    ("negative seed", 'seed = 7', 'seed = -7', r"seed\s*=", ["non-negative"]),
    ("unknown executor", 'executor = "serial"', 'executor = "threads"', r"executor\s*=",
     ["'threads'", "'process'", "'serial'"]),
    ("unknown solver", EXTRA_SOLVER, EXTRA_SOLVER + '\nchain = ["gurobi", "clarabel"]',
     r"chain\s*=", ["'gurobi'", "'clarabel'", "'osqp'"]),
    ("empty solver chain", EXTRA_SOLVER, EXTRA_SOLVER + '\nchain = []', r"chain\s*=",
     ["empty"]),
    ("bad workers", EXTRA_SOLVER, EXTRA_SOLVER + '\nworkers = 0', r"workers\s*=",
     ["positive integer"]),
    ("passes name unknown queries", EXTRA_SOLVER, EXTRA_SOLVER + '\npasses = [["total"]]',
     r"passes\s*=", ["['total']", "'va_hisp_race'"]),
    ("passes not lists", EXTRA_SOLVER, EXTRA_SOLVER + '\npasses = ["detailed"]',
     r"passes\s*=", ["list of lists"]),
    ("unknown output key", 'directory = "out"', 'directory = "out"\nformat = "csv"',
     r"format\s*=", ["'format'", "'microdata'"]),
    ("spec invariant unknown", '[spec]\npreset = "e2e"',
     '[spec]\n[[spec.invariant]]\nname = "total_pop"\nlevels = ["nation"]',
     r'name = "total_pop"', ["'total_pop'", "'tot'"]),
    ("spec level unknown", '[spec]\npreset = "e2e"',
     '[spec]\n[[spec.invariant]]\nname = "tot"\nlevels = ["planet"]',
     r'name = "tot"', ["'planet'", "'enum_dist'"]),
    ("spec linear sense", '[spec]\npreset = "e2e"',
     '[spec]\n[[spec.constraint]]\nname = "cap"\ntype = "linear"\nquery = "total"\n'
     'sense = "=<"\nrhs = 5', r'name = "cap"', ["'=<'", "'<='"]),
    ("spec file missing", '[spec]\npreset = "e2e"', '[spec]\nfile = "nowhere.toml"',
     r"file\s*=", ["nowhere.toml", "does not exist"]),
]


@pytest.mark.parametrize("old,new,pattern,fragments", [e[1:] for e in ERRORS],
                         ids=[e[0] for e in ERRORS])
def test_error_names_file_line_and_what_is_valid(tmp_path, old, new, pattern, fragments):
    text = _replace(PRESETS, old, new)
    path = _write(tmp_path, text)
    with pytest.raises(PostprocError) as info:
        load_config(path)
    message = str(info.value)
    expected = f"{path}, line {_line(text, pattern)}: "
    assert message.startswith(expected), f"{message!r} does not start with {expected!r}"
    # one location only: a second 'file, line' prefix would contradict the first
    assert message.count(f"{path}, line") == 1, message
    for fragment in fragments:
        assert fragment in message, f"{fragment!r} not in {message!r}"


def test_error_in_a_spec_file_names_that_file_and_line(tmp_path):
    spec = _write(tmp_path, '[[invariant]]\nname = "tot"\nlevels = ["nation"]\n\n'
                            '[[invariant]]\nname = "tots"\nlevels = "all"\n', "spec.toml")
    text = _replace(PRESETS, '[spec]\npreset = "e2e"', '[spec]\nfile = "spec.toml"')
    path = _write(tmp_path, text)
    with pytest.raises(PostprocError) as info:
        load_config(path)
    message = str(info.value)
    assert f"{spec}, line 6: unknown invariant 'tots'" in message
    line = _line(text, r"file\s*=")
    assert message.startswith(f"{path}, line {line}: ")


def test_missing_section_names_file_and_section(tmp_path):
    text = PRESETS.replace('[randomness]\nmode = "simulation"\nseed = 7\n', "")
    path = _write(tmp_path, text)
    with pytest.raises(PostprocError, match=rf"^{re.escape(str(path))}: missing section "
                                            r"\[randomness\]"):
        load_config(path)


def test_section_that_is_not_a_table(tmp_path):
    text = 'schema = "e2e_1940"\n' + PRESETS.replace('[schema]\npreset = "e2e_1940"\n', "")
    path = _write(tmp_path, text)
    with pytest.raises(PostprocError, match=rf"^{re.escape(str(path))}, line 1: "
                                            r"\[schema\] must be a table"):
        load_config(path)


def test_a_schema_written_out_wrongly_shows_what_was_written(tmp_path):
    text = PRESETS.replace('[schema]\npreset = "e2e_1940"\n',
                           '[schema]\nname = "mine"\nattributes = "sex"\n')
    with pytest.raises(PostprocError) as info:
        load_config(_write(tmp_path, text))
    assert "run.toml, line 5: a schema is {'name': ..." in str(info.value)
    assert "got {'name': 'mine', 'attributes': 'sex'}" in str(info.value)
    assert " object at 0x" not in str(info.value)


def test_invalid_toml_names_file_and_line(tmp_path):
    path = _write(tmp_path, PRESETS + "\n[broken\n")
    n = len(PRESETS.splitlines()) + 2
    with pytest.raises(PostprocError, match=rf"^{re.escape(str(path))}: invalid TOML: .*line {n}"):
        load_config(path)


def test_missing_or_unreadable_config_file(tmp_path):
    with pytest.raises(PostprocError, match=r"config file .*nope\.toml does not exist"):
        load_config(tmp_path / "nope.toml")
    with pytest.raises(PostprocError, match=rf"config file {re.escape(str(tmp_path))} "):
        load_config(tmp_path)  # a directory: a clear error, not an OSError


# -- RunConfig.build: Python values through the same validation ----------------------------------

def test_build_equals_the_toml_presets(tmp_path):
    preset = load_config(_write(tmp_path, PRESETS))
    built = RunConfig.build(persons="data/persons.parquet", units="data/units.parquet",
                            levels=LEVELS, budget=1.0, seed=7, base=tmp_path)
    for name in ("persons", "units", "output", "schema", "levels", "budget", "mechanism",
                 "randomness_mode", "seed", "topdown", "microdata", "error_table", "method"):
        assert getattr(built, name) == getattr(preset, name), name
    assert built.workload.names == preset.workload.names
    assert built.spec.to_dict() == preset.spec.to_dict()
    assert built.publish() == preset.publish() == {"tot": ["nation", "state"],
                                                   "gqhh": ["enum_dist"]}


def test_build_takes_python_objects(tmp_path):
    explicit = load_config(_write(tmp_path, EXPLICIT))
    spec = Spec.from_toml_string(SPEC_BODY.format(p=""))
    built = RunConfig.build(
        persons=tmp_path / "in" / "people.csv", units=tmp_path / "in" / "housing.csv",
        columns=explicit.columns, values={"cenrace": {1: "white", 2: "black"}},
        schema=E2E_1940, levels=LEVELS, workload=explicit.workload, budget=explicit.budget,
        mechanism=get_mechanism("geometric", exact=True), seed=11, spec=spec,
        solver_chain=("osqp", "clarabel"), executor="process", workers=2, failsafe=False,
        passes=[["va_hisp_race"], ["hhgq", "detailed"]], output=tmp_path / "results" / "run1",
        microdata=True)
    for name in ("persons", "units", "columns", "values", "schema", "levels", "budget",
                 "mechanism", "seed", "topdown", "output", "microdata"):
        assert getattr(built, name) == getattr(explicit, name), name
    for q in explicit.workload:
        assert (built.workload[q.name].matrix != q.matrix).nnz == 0, q.name
    assert built.spec.to_dict() == explicit.spec.to_dict()
    # a spec file, method options and no spec at all
    spec_file = _write(tmp_path, SPEC_BODY.format(p=""), "spec.toml")
    assert RunConfig.build(persons="p", levels=LEVELS, budget=1, seed=1,
                           spec=spec_file).spec.to_dict() == spec.to_dict()
    empty = RunConfig.build(persons="p", levels=LEVELS, budget=1, seed=1, spec=None,
                            method="sampling", method_options={"sweeps": 3})
    assert empty.spec == Spec() and empty.publish() == {}
    assert (empty.method, dict(empty.method_options)) == ("sampling", {"sweeps": 3})


@pytest.mark.parametrize("options, table, words", [
    (dict(mode="release", seed=3), "randomness", "release mode cannot be seeded"),
    (dict(seed=None), "randomness", "simulation mode needs seed"),
    (dict(budget=-1), "budget", "the total budget"),
    (dict(budget=True), "budget", "[budget] must be a table"),
    (dict(schema="e2e_1950"), "schema", "'e2e_1940_144'"),
    (dict(workload="sf1"), "workload", "unknown workload preset 'sf1'"),
    (dict(mechanism="cauchy"), "mechanism", "'discrete_gaussian'"),
    (dict(mechanism="laplace", mode="release", seed=None), "mechanism", "Mironov"),
    (dict(spec="pl94"), "spec", "unknown spec preset 'pl94'"),
    (dict(levels=["nation", "nation"]), "geography", "levels repeat a name"),
    (dict(workers=0), "solver", "[solver] workers must be a positive integer"),
    (dict(failsafe="no"), "solver", "[solver] failsafe must be true or false"),
    (dict(executor="threads"), "solver", "unknown executor 'threads'"),
    (dict(passes=[["total"]]), "solver", "passes name queries ['total']"),
    (dict(method="magic"), "postprocess", "unknown method 'magic'"),
    (dict(microdata="yes"), "output", "[output] microdata must be true or false"),
])
def test_build_refuses_what_the_toml_path_refuses(options, table, words):
    settings = dict(persons="p.parquet", levels=LEVELS, budget=1, seed=1)
    settings.update(options)
    with pytest.raises(PostprocError) as info:
        RunConfig.build(**settings)
    message = str(info.value)
    assert message.startswith("RunConfig.build"), message
    assert f"[{table}]" in message and words in message, message


def test_to_toml_reads_back_to_the_same_configuration(tmp_path):
    spec = Spec.from_toml_string(SPEC_BODY.format(p=""))
    built = RunConfig.build(persons="data/persons.parquet", levels=LEVELS, seed=5,
                            budget=Budget.e2e("1/3", LEVELS, kind="zcdp"),
                            mechanism="discrete_gaussian", spec=spec,
                            failsafe_keep=["va_hisp_race"], error_table=True, base=tmp_path)
    path = tmp_path / "saved.toml"
    path.write_text(built.to_toml())
    again = load_config(path)
    assert again.raw == built.raw and again.fingerprint() == built.fingerprint()
    for name in ("persons", "budget", "mechanism", "seed", "topdown", "error_table",
                 "output"):
        assert getattr(again, name) == getattr(built, name), name
    assert again.topdown.failsafe_keep == ("va_hisp_race",)
    assert again.spec.to_dict() == built.spec.to_dict()


def test_publish_follows_the_catalogue():
    from hierarchy.measurement import PUBLISHABLE
    from invariants.catalogue import INVARIANTS, STATISTICS

    # every statistic the catalogue names is one hierarchy can compute, with that function
    assert set(STATISTICS) == set(PUBLISHABLE)
    assert all(STATISTICS[s].compute is PUBLISHABLE[s] for s in STATISTICS)
    for name, entry in INVARIANTS.items():
        spec = Spec(invariants=(Invariant(name, ("state",)),))
        config = RunConfig.build(persons="p", levels=LEVELS, budget=1, seed=1, spec=spec)
        assert config.publish() == {entry.statistic: ["state"]}
