"""SafeTab's AIANNH geography, detailed/regional iteration levels, race × Hispanic-origin
iterations and the full algorithm's accounting (docs/safetab.md; issue 39, items 5 and 6).

Membership, entities and stability on hand-made records; thresholds on noise-free runs (ε = 200
per count: every count is exact with probability above 1 − 1e−80); configuration errors by file
and line; the example configuration end to end on small synthetic data.
"""

from __future__ import annotations

import itertools
import json
import textwrap
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from hierarchy.mechanisms import get_mechanism
from hierarchy.synth.detailed1940 import DETAILED_RACES, HISPANIC_ORIGINS, synthesize_detailed_1940
from postproc.apps.safetab import (
    TABLE_TYPES,
    DataColumns,
    GroupCounts,
    Iteration,
    Level,
    LevelBudget,
    SafeTabConfig,
    account_safetab,
    accuracy_report,
    check_stability,
    iteration_members,
    load_safetab_config,
    measure_level,
    parse_safetab_config,
    plan_level,
    prepare_records,
    run_safetab,
    safetab,
    tabulate_groups,
)
from postproc.cli import main
from postproc.errors import PostprocError

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "safetab_1940.toml"


# ---------------------------------------------------------------------------------------------
# AIANNH geography: a level keyed by a column outside the state/county nesting
# ---------------------------------------------------------------------------------------------
def aiannh_persons() -> pa.Table:
    """Six records; area 0001 crosses Arizona (04) and New Mexico (35); 9999 is no area."""
    return pa.table({
        "state": ["04", "35", "49", "40", "40", "04"],
        "aiannh": ["0001", "0001", "9999", "0002", "9999", "0001"],
        "sex": [1, 2, 1, 2, 1, 2],
        "age": [30, 4, 70, 17, 50, 90],
        #         Navajo, Navajo+White, three tribes, Cherokee (Hispanic), White, White
        "race1": [3101, 3101, 3101, 3102, 1000, 1000],
        "race2": [0, 1000, 3102, 0, 0, 0],
        "race3": [0, 0, 3103, 0, 0, 0],
        "hisp_origin": [0, 0, 0, 7101, 0, 0],
    })


AIANNH_ITERATIONS = {
    "T": Iteration("T", "Total", "all"),
    "AI": Iteration("AI", "American Indian", ["3000-3999"], iteration_level="regional"),
    "AIA": Iteration("AIA", "American Indian alone", ["3000-3999"], alone=True,
                     iteration_level="regional"),
    "N": Iteration("N", "Navajo", [3101], iteration_level="detailed"),
    "C": Iteration("C", "Cherokee", [3102], iteration_level="detailed"),
    "S": Iteration("S", "Sioux", [3103], iteration_level="detailed"),
}


def aiannh_level(stability: int = 4, **kwargs) -> Level:
    return Level("aiannh", "aiannh", tuple(AIANNH_ITERATIONS), stability, "400", None,
                 (10, 100, 1000), outside="9999", **kwargs)


def test_a_record_in_an_area_counts_there_and_nowhere_else_at_that_level():
    records = prepare_records(aiannh_persons(), DataColumns(), ["aiannh", "state"])
    level = aiannh_level()
    counts = tabulate_groups(records, [level], AIANNH_ITERATIONS)["aiannh"]
    assert counts.geocodes.tolist() == ["0001", "0002"]            # 9999 is no entity
    totals = dict(zip(counts.geocodes, counts.totals().tolist()))
    #                 T  AI AIA N  C  S
    assert totals == {"0001": [3, 2, 1, 2, 0, 0],      # records 0, 1, 5 (AZ and NM alike)
                      "0002": [1, 1, 1, 0, 1, 0]}      # record 3
    # every record inside an area adds to its own area's groups only: removing record 3 (the
    # only one of area 0002) changes area 0002's groups and nothing of area 0001
    without = prepare_records(aiannh_persons().take([0, 1, 2, 4, 5]), DataColumns(), ["aiannh"])
    again = tabulate_groups(without, [level], AIANNH_ITERATIONS)["aiannh"]
    assert again.geocodes.tolist() == ["0001"]
    assert again.totals().tolist() == [totals["0001"]]
    # the same records by state: the record outside every area is counted there
    state = Level("state", "state", tuple(AIANNH_ITERATIONS), 6, "1", None, (10, 100, 1000))
    by_state = tabulate_groups(records, [state], AIANNH_ITERATIONS)["state"]
    assert by_state.totals().sum() > counts.totals().sum()
    assert by_state.totals()[list(by_state.geocodes).index("49")].tolist() == [1, 1, 1, 1, 1, 1]


def test_a_record_outside_every_area_is_in_no_group_and_no_stability():
    """Record 2 reports three tribes: at a level that counted it, it would be in all six
    groups. Outside every area it is in none, so the observed stability is 4 (records 0 and 3)
    and a declared stability of 4 holds."""
    records = prepare_records(aiannh_persons(), DataColumns(), ["aiannh"])
    counts = tabulate_groups(records, [aiannh_level(4)], AIANNH_ITERATIONS)["aiannh"]
    assert counts.observed_stability == 4
    check_stability(aiannh_level(4), counts, records, AIANNH_ITERATIONS)     # no error
    # without `outside`, 9999 is one more entity and record 2 is in six of its groups
    plain = Level("aiannh", "aiannh", tuple(AIANNH_ITERATIONS), 4, "1", None, (10, 100, 1000))
    counts = tabulate_groups(records, [plain], AIANNH_ITERATIONS)["aiannh"]
    assert "9999" in counts.geocodes.tolist() and counts.observed_stability == 6
    with pytest.raises(PostprocError, match="belongs to 6 of its groups"):
        check_stability(plain, counts, records, AIANNH_ITERATIONS)


def test_aiannh_level_runs_noise_free_end_to_end():
    """Noise-free (ε = 200 per count). The detailed iterations have thresholds (1, 2, 3):
    Navajo in area 0001 (2 persons) releases sex × Age9 and Cherokee in 0002 (1) sex × Age4,
    where the level's thresholds (10, 100, 1000), which the regional iterations keep, would
    release the total."""
    level = aiannh_level(4, iteration_thresholds={"detailed": (1, 2, 3)})
    config = SafeTabConfig(tuple(AIANNH_ITERATIONS.values()), (level,),
                           mechanism=get_mechanism("geometric"), gamma="1/2",
                           randomness_mode="simulation", seed=3, synthetic=(100, 1))
    result = safetab(aiannh_persons(), config)
    release = result.releases["aiannh"]
    table = release.to_table().to_pandas()
    assert set(table.geography) == {"0001", "0002"}
    assert np.array_equal(release.count, release.truth)
    totals = table.groupby(["geography", "iteration"])["count"].sum()
    assert totals[("0001", "T")] == 3 and totals[("0002", "C")] == 1
    assert totals[("0001", "AI")] == 2 and totals[("0001", "S")] == 0
    chosen = table.groupby(["geography", "iteration"])["table"].first()
    assert chosen[("0001", "N")] == "sex_age9" and chosen[("0002", "C")] == "sex_age4"
    assert chosen[("0001", "T")] == chosen[("0001", "AI")] == chosen[("0001", "S")] == "total"
    assert result.manifest()["levels"]["aiannh"]["outside"] == "9999"
    # the report judges each group's choice by the thresholds of its own iteration level
    assert accuracy_report(result)["levels"]["aiannh"]["choice_agreement"] == 1.0


# ---------------------------------------------------------------------------------------------
# race × Hispanic origin, and detailed and regional iterations
# ---------------------------------------------------------------------------------------------
RACE_ORIGIN_RECORDS = [
    # (race codes, origin code)
    ((1000, 0), 0),          # a: White alone, not Hispanic
    ((1000, 0), 7101),       # b: White alone, Hispanic
    ((1000, 2000), 0),       # c: White and Black, not Hispanic
    ((1101, 3101), 7102),    # d: German and Navajo, Hispanic
    ((2000, 0), 0),          # e: Black alone, not Hispanic
    ((0, 0), 7103),          # f: no race reported, Hispanic
    ((2000, 0), 7101),       # g: Black alone, Hispanic
]
RACE_ORIGIN_MEMBERS = {
    # iteration -> the records (letters) that belong, by the definitions
    Iteration("WNH", "White in combination, not Hispanic", ["1000-1999"], hispanic="not"): "ac",
    Iteration("WH", "White in combination, Hispanic", ["1000-1999"], hispanic="only"): "bd",
    Iteration("WANH", "White alone, not Hispanic", ["1000-1999"], alone=True,
              hispanic="not"): "a",
    Iteration("WAH", "Hispanic, White alone", ["1000-1999"], alone=True, hispanic="only"): "b",
    Iteration("NH", "Not Hispanic", "all", hispanic="not"): "ace",
    Iteration("H", "Hispanic", "all", hispanic="only"): "bdfg",
    Iteration("HC", "Hispanic by its codes", ["7000-7999"]): "bdfg",
    Iteration("W", "White in combination", ["1000-1999"]): "abcd",
    Iteration("WA", "White alone", ["1000-1999"], alone=True): "ab",
    Iteration("BH", "Black alone or in combination, Hispanic", ["2000-2999"],
              hispanic="only"): "g",
}


def test_race_by_hispanic_origin_membership_is_exactly_as_defined():
    races = np.array([r for r, _ in RACE_ORIGIN_RECORDS])
    origin = np.array([o for _, o in RACE_ORIGIN_RECORDS])
    letters = "abcdefg"
    for iteration, members in RACE_ORIGIN_MEMBERS.items():
        got = "".join(c for c, m in zip(letters, iteration_members(iteration, races, origin))
                      if m)
        assert got == members, iteration.id
    # "not" and "only" split an iteration in two
    for base in ("W", "WA"):
        whole = next(it for it in RACE_ORIGIN_MEMBERS if it.id == base)
        parts = [it for it in RACE_ORIGIN_MEMBERS if it.id in (base + "NH", base + "H")]
        split = [iteration_members(it, races, origin) for it in parts]
        assert not (split[0] & split[1]).any()
        assert np.array_equal(split[0] | split[1], iteration_members(whole, races, origin))
    with pytest.raises(PostprocError, match="there is no origin column"):
        iteration_members(next(iter(RACE_ORIGIN_MEMBERS)), races, None)


def test_overlapping_detailed_and_regional_iterations_share_the_stability():
    """A Navajo person is in "Navajo" (detailed) and "American Indian" (regional): two groups of
    a level with both, one of a level with either."""
    records = prepare_records(aiannh_persons(), DataColumns(), ["state"])
    both = Level("state", "state", ("AI", "N"), 1, "1", None, (10, 100, 1000))
    counts = tabulate_groups(records, [both], AIANNH_ITERATIONS)["state"]
    assert counts.observed_stability == 2
    assert set(counts.totals()[list(counts.geocodes).index("04")].tolist()) == {1}
    with pytest.raises(PostprocError, match=r"belongs to 2 of its groups \(iterations AI, N\)"):
        check_stability(both, counts, records, AIANNH_ITERATIONS)
    for alone in (("AI",), ("N",)):
        level = Level("state", "state", alone, 1, "1", None, (10, 100, 1000))
        assert tabulate_groups(records, [level], AIANNH_ITERATIONS)["state"] \
            .observed_stability == 1


def test_thresholds_by_iteration_level_select_the_tables_noise_free():
    """Each group just below and at each threshold of its own iteration level: regional
    groups by (10, 100, 1000), detailed ones by (5, 50, 500)."""
    regional = [9, 10, 99, 100, 999, 1000]
    detailed = [4, 5, 49, 50, 499, 500]
    cells = np.zeros((len(regional), 2, 2, 23), np.int64)
    cells[:, 0, 1, 7] = regional
    cells[:, 1, 0, 12] = detailed
    counts = GroupCounts("county", np.array([f"{e:03d}" for e in range(len(regional))]),
                         ("R", "D"), cells, 1)
    its = {"R": Iteration("R", "Regional", ["3000-3999"], iteration_level="regional"),
           "D": Iteration("D", "Detailed", [3101], iteration_level="detailed")}
    level = Level("county", "county", ("R", "D"), 1, "400", None, (10, 100, 1000),
                  iteration_thresholds={"detailed": (5, 50, 500)})
    plan = plan_level(level, mechanism="geometric", gamma="1/2", iterations=its)
    release = measure_level(counts, plan, rng=11)
    assert np.array_equal(release.count, release.truth)                  # noise-free
    expected = ["total", "sex_age4", "sex_age4", "sex_age9", "sex_age9", "sex_age23"]
    assert [TABLE_TYPES[c] for c in release.choice[:, 0]] == expected
    assert [TABLE_TYPES[c] for c in release.choice[:, 1]] == expected
    # the level's thresholds alone would put the detailed groups in smaller tables
    plain = plan_level(Level("county", "county", ("R", "D"), 1, "400", None, (10, 100, 1000)),
                       mechanism="geometric", gamma="1/2", iterations=its)
    assert [TABLE_TYPES[c] for c in measure_level(counts, plain, rng=11).choice[:, 1]] == [
        "total", "total", "sex_age4", "sex_age4", "sex_age9", "sex_age9"]
    with pytest.raises(PostprocError, match="pass its iterations"):
        plan_level(level, mechanism="geometric", gamma="1/2")


def test_thresholds_come_from_the_level_then_from_adaptive():
    text = textwrap.dedent("""\
        [data]
        synthetic = { persons = 1000, seed = 1 }
        [adaptive]
        thresholds = [1, 2, 3]
        thresholds_detailed = [4, 5, 6]
        thresholds_regional = [7, 8, 9]
        [[iteration]]
        id = "D"
        name = "Navajo"
        codes = [3101]
        iteration_level = "detailed"
        [[iteration]]
        id = "R"
        name = "American Indian"
        codes = ["3000-3999"]
        iteration_level = "regional"
        [[iteration]]
        id = "T"
        name = "Total"
        codes = "all"
        [[level]]
        name = "a"
        geography = "state"
        stability = 3
        budget = "1"
        [[level]]
        name = "b"
        geography = "state"
        stability = 3
        budget = "1"
        thresholds = [10, 20, 30]
        [[level]]
        name = "c"
        geography = "state"
        stability = 3
        budget = "1"
        thresholds_detailed = [11, 12, 13]
        [[level]]
        name = "d"
        geography = "state"
        iterations = "detailed"
        stability = 1
        budget = "1"
        """)
    config = parse_safetab_config(text)
    its = {it.id: it for it in config.iterations}
    got = {lv.name: {i: lv.thresholds_for(its[i].iteration_level) for i in lv.iterations}
           for lv in config.levels}
    assert got == {"a": {"D": (4, 5, 6), "R": (7, 8, 9), "T": (1, 2, 3)},
                   "b": {"D": (10, 20, 30), "R": (10, 20, 30), "T": (10, 20, 30)},
                   "c": {"D": (11, 12, 13), "R": (7, 8, 9), "T": (1, 2, 3)},
                   "d": {"D": (4, 5, 6)}}


# ---------------------------------------------------------------------------------------------
# configuration errors, by file and line
# ---------------------------------------------------------------------------------------------
HEAD = textwrap.dedent("""\
    [data]
    synthetic = { persons = 1000, seed = 1 }
    [adaptive]
    thresholds = [10, 100, 1000]
    """)
ITERATION = textwrap.dedent("""\
    [[iteration]]
    id = "3000"
    name = "American Indian"
    codes = ["3000-3999"]
    iteration_level = "regional"
    """)
LEVEL = textwrap.dedent("""\
    [[level]]
    name = "aiannh"
    outside = "9999"
    stability = 1
    moe = 8
    """)

BAD = [
    # (part, old, new, needle of the line the error must name, message part)
    ("iteration", 'iteration_level = "regional"', 'iteration_level = "tribal"',
     "iteration_level =", "iteration_level must be one of ['detailed', 'regional']"),
    ("iteration", 'iteration_level = "regional"', 'hispanic = "yes"', "hispanic =",
     'hispanic must be "not" (not Hispanic or Latino), "only" (Hispanic or Latino)'),
    ("iteration", 'iteration_level = "regional"', "hispanic = true", "hispanic =",
     "hispanic must be"),
    ("iteration", 'codes = ["3000-3999"]', "codes = []", "codes =", "non-empty list"),
    ("iteration", 'codes = ["3000-3999"]', 'codes = ["3999-3000"]', "codes =", "is empty"),
    ("head", "[adaptive]", '[data.columns]\norigin = ""\n[adaptive]', "hispanic =",
     "origin is empty"),
    ("level", 'outside = "9999"', "outside = 9999", "outside =", "outside must be the geocode"),
    ("level", 'outside = "9999"', 'iterations = "detailed"', "iterations =",
     "selects no iteration: no [[iteration]] has iteration_level = 'detailed'"),
    ("level", 'outside = "9999"', 'iterations = "local"', "iterations =",
     "iterations must be \"all\", an iteration level"),
    ("level", 'outside = "9999"', "thresholds_detailed = [3, 2, 1]", "thresholds_detailed",
     "theta1 < theta2 < theta3"),
    ("level", 'outside = "9999"', "thresholds_local = [1, 2, 3]", "thresholds_local",
     "unknown key 'thresholds_local'"),
    ("head", "thresholds = [10, 100, 1000]",
     "thresholds = [10, 100, 1000]\nthresholds_regional = [1, 2]", "thresholds_regional",
     "theta1 < theta2 < theta3"),
    ("head", "[adaptive]", '[accounting]\nalgorithm = "paper"\n[adaptive]', "algorithm =",
     'algorithm must be "full"'),
]


@pytest.mark.parametrize("part, old, new, needle, message", BAD)
def test_bad_entries_are_refused_with_file_and_line(tmp_path, part, old, new, needle, message):
    parts = {"head": HEAD, "iteration": ITERATION, "level": LEVEL}
    assert old in parts[part]
    parts[part] = parts[part].replace(old, new)
    if "origin is empty" in message:
        parts["iteration"] += 'hispanic = "not"\n'
    text = parts["head"] + parts["iteration"] + parts["level"]
    path = tmp_path / "bad.toml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(PostprocError) as info:
        load_safetab_config(path)
    line = next(n for n, t in enumerate(text.splitlines(), start=1) if needle in t)
    assert str(info.value).startswith(f"{path}, line {line}: "), str(info.value)
    assert message in str(info.value)


def test_value_types_refuse_bad_iterations_and_levels():
    with pytest.raises(PostprocError, match="iteration_level must be one of"):
        Iteration("x", "X", "all", iteration_level="Detailed")
    with pytest.raises(PostprocError, match="thresholds are given for iteration level 'local'"):
        Level("s", "s", ("1",), 1, "1", None, (1, 2, 3), iteration_thresholds={"local": (1, 2, 3)})
    with pytest.raises(PostprocError, match="theta1 < theta2 < theta3"):
        Level("s", "s", ("1",), 1, "1", None, (1, 2, 3),
              iteration_thresholds={"detailed": (3, 2, 1)})
    with pytest.raises(PostprocError, match="but the data have no origin column"):
        SafeTabConfig((Iteration("1", "T", "all", hispanic="only"),),
                      (Level("s", "s", ("1",), 1, "1", None, (1, 2, 3)),),
                      columns=DataColumns(origin=None), synthetic=(100, 1))
    with pytest.raises(PostprocError, match="accounting algorithm must be one of"):
        SafeTabConfig((Iteration("1", "T", "all"),),
                      (Level("s", "s", ("1",), 1, "1", None, (1, 2, 3)),),
                      synthetic=(100, 1), accounting_algorithm="paper")
    with pytest.raises(PostprocError, match="accounting algorithm must be one of"):
        account_safetab({"L": LevelBudget("pure", "1", stability=1, gamma="0.1")},
                        kinds={"L": ("adaptive",)}, algorithm="two_step")


# ---------------------------------------------------------------------------------------------
# the full algorithm's accounting is the run's default description
# ---------------------------------------------------------------------------------------------
ACCOUNTING_CONFIG = HEAD.replace("persons = 1000", "persons = 20000") + textwrap.dedent("""\
    [mechanism]
    name = "geometric"
    [randomness]
    mode = "simulation"
    seed = 4
    """) + ITERATION + textwrap.dedent("""\
    [[level]]
    name = "state"
    stability = 1
    moe = 8
    """)


def test_a_run_is_accounted_as_the_full_algorithm_by_default(tmp_path, capsys):
    persons = synthesize_detailed_1940(20_000, seed=1).persons
    full = safetab(persons, parse_safetab_config(ACCOUNTING_CONFIG))
    released = safetab(persons, parse_safetab_config(
        ACCOUNTING_CONFIG + '[accounting]\nalgorithm = "as_released"\n'))
    # the level releases two-step groups only; the full algorithm charges TotalOnly ones too
    assert full.plans["state"].kinds == ("adaptive",)
    entry = full.manifest()["accounting"]
    assert entry["algorithm"]["name"] == "full"
    assert "SafeTab's full algorithm" in entry["algorithm"]["statement"]
    assert entry["levels"]["state"]["charged_kinds"] == ["adaptive", "total_only"]
    assert entry["levels"]["state"]["moe_calibration"]["total_only"] is not None
    other = released.manifest()["accounting"]
    assert other["algorithm"]["name"] == "as_released"
    assert other["levels"]["state"]["charged_kinds"] == ["adaptive"]
    # same pure epsilon; one count at B/s costs more Renyi divergence than B/s split in two
    # (so more rho, and never a smaller (epsilon, delta))
    assert full.accounting.total.pure_epsilon == released.accounting.total.pure_epsilon
    assert full.accounting.total.rho > released.accounting.total.rho
    assert full.accounting.total.rdp_epsilon >= released.accounting.total.rdp_epsilon
    path = tmp_path / "c.toml"
    path.write_text(ACCOUNTING_CONFIG, encoding="utf-8")
    assert main(["safetab", str(path), "--out", str(tmp_path / "o")]) == 0
    assert "Accounted as SafeTab's full algorithm" in capsys.readouterr().out
    assert main(["safetab", str(path), "--out", str(tmp_path / "o"), "--overwrite",
                 "--accounting", "as_released", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["accounting"]["algorithm"]["name"] == "as_released"
    assert out["accounting"]["total"]["loss"]["rdp_epsilon"] == pytest.approx(
        released.accounting.total.rdp_epsilon, rel=1e-12)


# ---------------------------------------------------------------------------------------------
# the example configuration
# ---------------------------------------------------------------------------------------------
def test_example_stabilities_are_the_bound_of_the_data_model():
    """Every record of up to three distinct race codes and one origin code (the data model of
    the detailed synthetic data): the most groups of each example level one can belong to is
    the level's declared stability, not more (the budget would not hold) nor less needed."""
    config = load_safetab_config(EXAMPLE)
    codes = [code for code, _ in DETAILED_RACES]
    rows = [combo + (0,) * (3 - len(combo)) for k in (1, 2, 3)
            for combo in itertools.combinations(codes, k)]
    races = np.repeat(np.array(rows), 1 + len(HISPANIC_ORIGINS), axis=0)
    origin = np.tile([0] + [code for code, _ in HISPANIC_ORIGINS], len(rows))
    iterations = {it.id: it for it in config.iterations}
    members = {i: iteration_members(it, races, origin) for i, it in iterations.items()}
    for level in config.levels:
        most = sum(members[i].astype(int) for i in level.iterations).max()
        assert most == level.stability, level.name


def test_example_config_with_aiannh_runs_end_to_end(tmp_path):
    config = load_safetab_config(EXAMPLE)
    assert [lv.name for lv in config.levels] == ["nation", "state", "county", "aiannh"]
    aiannh = config.levels[3]
    assert aiannh.geography == "aiannh" and aiannh.outside == "9999"
    assert config.accounting_algorithm == "full"
    assert {it.iteration_level for it in config.iterations} == {None, "detailed", "regional"}
    assert any(it.hispanic == "not" for it in config.iterations)
    persons = synthesize_detailed_1940(100_000, seed=2).persons
    run = run_safetab(config, out=tmp_path / "out", persons=persons)
    table = pa.parquet.read_table(tmp_path / "out" / "tables" / "aiannh.parquet").to_pandas()
    areas = set(table.geography)
    present = set(np.unique(np.asarray(persons.column("aiannh").cast(pa.string()))).tolist())
    assert areas == present - {"9999"} and len(areas) >= 5
    manifest = run.manifest
    assert manifest["levels"]["aiannh"]["outside"] == "9999"
    assert manifest["accounting"]["algorithm"]["name"] == "full"
    assert run.report["overall"]["consistent"]
