"""SafeTab-style adaptive tabulation (:mod:`postproc.apps.safetab`, docs/safetab.md).

Budget bookkeeping is checked exactly in rationals; thresholds and tables on hand-made noisy
totals and on noise-free runs; stability on hand-made multi-race records; accuracy statistically,
with the tolerance and false-failure rate stated at the test (fixed seeds, so deterministic).
"""

from __future__ import annotations

import json
import math
import textwrap
from fractions import Fraction
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from hierarchy.accounting import account_moe
from hierarchy.mechanisms import get_mechanism
from hierarchy.synth.detailed1940 import synthesize_detailed_1940
from postproc.apps.safetab import (
    AGE4,
    AGE9,
    AGE23,
    STAT_LABELS,
    TABLE_TYPES,
    AgeRecode,
    DataColumns,
    GroupCounts,
    Iteration,
    Level,
    LevelBudget,
    Noise,
    SafeTabConfig,
    account_safetab,
    accuracy_report,
    cell_labels,
    check_stability,
    choose_tables,
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
from postproc.apps.safetab.recodes import MAX_AGE, stat_offset
from postproc.cli import main
from postproc.errors import PostprocError

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "safetab_1940.toml"


# ---------------------------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------------------------
def config_text(levels: str = "", iterations: str = "", **sections: str) -> str:
    """A small valid config, with optional replacements of its parts."""
    head = sections.get("head", textwrap.dedent("""\
        [data]
        synthetic = { persons = 20000, seed = 1 }
        [randomness]
        mode = "simulation"
        seed = 7
        [adaptive]
        thresholds = [100, 1000, 10000]
        """))
    iterations = iterations or textwrap.dedent("""\
        [[iteration]]
        id = "0001"
        name = "Total"
        codes = "all"
        [[iteration]]
        id = "3000"
        name = "American Indian"
        codes = ["3000-3999"]
        """)
    levels = levels or textwrap.dedent("""\
        [[level]]
        name = "state"
        stability = 2
        moe = 8
        """)
    return head + iterations + levels


def write(tmp_path: Path, text: str, name: str = "config.toml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def line_of(text: str, needle: str, occurrence: int = 1) -> int:
    """1-based line number of the ``occurrence``-th line containing ``needle``."""
    seen = 0
    for number, line in enumerate(text.splitlines(), start=1):
        if needle in line:
            seen += 1
            if seen == occurrence:
                return number
    raise AssertionError(f"{needle!r} not found")


def hand_made_persons() -> pa.Table:
    """Six records, some multi-race, in two states."""
    return pa.table({
        "state": ["01", "01", "01", "02", "02", "02"],
        "sex": [1, 2, 1, 2, 2, 1],
        "age": [30, 4, 70, 17, 18, 115],
        #         German+Irish, White+Cherokee+Black, Chinese, White, Navajo, Cherokee+White
        "race1": [1101, 1000, 4101, 1000, 3101, 3102],
        "race2": [1104, 3102, 0, 0, 0, 1000],
        "race3": [0, 2000, 0, 0, 0, 0],
        "hisp_origin": [0, 0, 0, 7101, 0, 0],
    })


HAND_ITERATIONS = {
    "T": Iteration("T", "Total", "all"),
    "W": Iteration("W", "White in combination", ["1000-1999"]),
    "WA": Iteration("WA", "White alone", ["1000-1999"], alone=True),
    "G": Iteration("G", "German", [1101]),
    "I": Iteration("I", "Irish", [1104]),
    "B": Iteration("B", "Black in combination", ["2000-2999"]),
    "A": Iteration("A", "American Indian in combination", ["3000-3999"]),
    "C": Iteration("C", "Cherokee", [3102]),
    "H": Iteration("H", "Hispanic", ["7000-7999"]),
}
# Groups (of a level with every iteration) each record belongs to, by hand:
HAND_MEMBERSHIP = [
    {"T", "W", "WA", "G", "I"},            # German + Irish
    {"T", "W", "B", "A", "C"},             # White + Cherokee + Black
    {"T"},                                 # Chinese
    {"T", "W", "WA", "H"},                 # White, Mexican
    {"T", "A"},                            # Navajo
    {"T", "W", "A", "C"},                  # Cherokee + White
]


def hand_level(stability: int, **kwargs) -> Level:
    return Level("state", "state", tuple(HAND_ITERATIONS), stability,
                 kwargs.pop("budget", None), kwargs.pop("moe", 5), (10, 20, 30), **kwargs)


@pytest.fixture(scope="module")
def persons_small() -> pa.Table:
    return synthesize_detailed_1940(60_000, seed=3).persons


# ---------------------------------------------------------------------------------------------
# Age recodes and table labels
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("recode", [AGE4, AGE9, AGE23], ids=lambda r: r.name)
def test_age_recode_partitions_the_ages(recode):
    ages = np.arange(MAX_AGE + 1)
    group = recode.index(ages)
    # every age in exactly one group; groups are consecutive intervals covering 0..MAX_AGE
    assert group[0] == 0 and group[-1] == recode.size - 1
    assert np.all(np.diff(group) >= 0) and np.all(np.diff(group) <= 1)
    assert np.array_equal(np.unique(group), np.arange(recode.size))
    assert [int(ages[group == g][0]) for g in range(recode.size)] == list(recode.lower)
    # a coarsening of Age23: the group of an age is the group of its Age23 group
    assert np.array_equal(recode.from_age23()[AGE23.index(ages)], group)


def test_age_recodes_are_the_census_groups():
    assert AGE23.labels == ("<5", "5-9", "10-14", "15-17", "18-19", "20", "21", "22-24",
                            "25-29", "30-34", "35-39", "40-44", "45-49", "50-54", "55-59",
                            "60-61", "62-64", "65-66", "67-69", "70-74", "75-79", "80-84", "85+")
    gong = Path(__file__).resolve().parents[1] / "examples" / "data" / "gong_sex_age.csv"
    rows = np.genfromtxt(gong, delimiter=",", dtype=str, skip_header=1)
    assert tuple(rows[rows[:, 0] == "female", 1]) == AGE23.labels
    assert AGE9.lower == (0, 5, 18, 25, 35, 45, 55, 65, 75)
    assert AGE4.lower == (0, 18, 45, 65)
    assert AGE4.index([17, 18]).tolist() == [0, 1]       # the voting-age boundary


def test_stat_labels_and_offsets():
    assert len(STAT_LABELS) == 1 + 8 + 18 + 46
    for table in TABLE_TYPES:
        labels = cell_labels(table)
        assert len(set(labels)) == len(labels) == (1 if "total" in table else
                                                   2 * int(table.removeprefix("sex_age")))
        start = stat_offset(table)
        assert STAT_LABELS[start:start + len(labels)] == labels


@pytest.mark.parametrize("lower, labels, message", [
    ((1, 18), ("a", "b"), "start at age 0"),
    ((0, 18, 18), ("a", "b", "c"), "increase strictly"),
    ((0, 200), ("a", "b"), "increase strictly"),
    ((0, 18), ("a",), "2 groups but 1 labels"),
])
def test_invalid_age_recode_raises(lower, labels, message):
    with pytest.raises(PostprocError, match=message):
        AgeRecode("bad", lower, labels)


def test_recode_not_a_coarsening_of_age23_raises():
    with pytest.raises(PostprocError, match="not a coarsening of Age23"):
        AgeRecode("odd", (0, 16), ("<16", "16+")).from_age23()


# ---------------------------------------------------------------------------------------------
# budget bookkeeping
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("notion", ["pure", "zcdp"])
@pytest.mark.parametrize("stability", [1, 3, 8, 9])
@pytest.mark.parametrize("gamma", ["0.1", "1/3", "0.05"])
def test_group_budgets_add_up_exactly(notion, stability, gamma):
    for budget in (LevelBudget(notion, "0.7", stability=stability, gamma=gamma),
                   LevelBudget(notion, Fraction(2, 7), stability=stability, gamma=gamma),
                   LevelBudget.from_moe(11, notion=notion, stability=stability, gamma=gamma)):
        assert all(isinstance(b, Fraction) for b in
                   (budget.total, budget.group, budget.step1, budget.step2, budget.total_only))
        assert budget.step1 + budget.step2 == budget.total / stability      # exact
        assert budget.total_only == budget.group == budget.total / stability
        assert budget.step1 == Fraction(gamma) * budget.group
        assert budget.group * stability == budget.total


@pytest.mark.parametrize("notion, mechanism", [("pure", "geometric"),
                                               ("zcdp", "discrete_gaussian")])
def test_moe_calibration_round_trips(notion, mechanism):
    for moe in [1, 2, 5, 6, 11, 50, 137, 1000]:
        budget = LevelBudget.from_moe(moe, notion=notion, stability=9, gamma="0.1")
        assert Noise.for_budget(mechanism, budget.step2).moe == moe
        assert budget.step2 * 9 / (1 - budget.gamma) == budget.total


@pytest.mark.parametrize("mechanism", ["geometric", "discrete_gaussian"])
def test_plans_and_accounting_add_up(persons_small, mechanism):
    levels = (Level("nation", "nation", ("0001", "3000"), 2, "0.3", None, (10, 100, 1000)),
              Level("state", "state", ("0001", "3000"), 2, None, 6, (10, 100, 1000)),
              Level("county", "county", ("0001", "3000"), 2, None, 11, (10, 100, 1000),
                    frozenset({"3000"})))
    config = SafeTabConfig((Iteration("0001", "Total", "all"),
                            Iteration("3000", "AIAN", ["3000-3999"])), levels,
                           mechanism=get_mechanism(mechanism), randomness_mode="simulation",
                           seed=1, synthetic=(60_000, 3))
    result = safetab(persons_small, config)
    acc = result.accounting
    # every group's Step-1 + Step-2 (or TotalOnly) budget is exactly the level's budget / s
    for level in levels:
        b = result.plans[level.name].budget
        assert b.step1 + b.step2 == b.total_only == b.total / level.stability
        assert result.plans[level.name].noise["step1"].budget == b.step1
    # level budgets add up to the accounting total, exactly
    assert acc.total_budget == sum((result.plans[lv.name].budget.total for lv in levels),
                                   Fraction(0))
    assert math.isclose(acc.total.rho, sum(a.loss.rho for a in acc.levels.values()),
                        rel_tol=1e-12)
    if mechanism == "geometric":
        assert acc.total.pure_epsilon == float(acc.total_budget)
        assert math.isclose(sum(a.loss.pure_epsilon for a in acc.levels.values()),
                            acc.total.pure_epsilon, rel_tol=1e-12)
    else:
        assert acc.total.pure_epsilon is None
        assert math.isclose(acc.total.rho, float(acc.total_budget), rel_tol=1e-12)
    # composition never makes a total smaller than its largest level
    assert acc.total.rdp_epsilon >= max(a.loss.rdp_epsilon for a in acc.levels.values())
    assert result.plans["county"].kinds == ("adaptive", "total_only")


@pytest.mark.parametrize("algorithm", ["as_released", "full"])
@pytest.mark.parametrize("moes", [[6, 11], [6, 6, 11, 11, 50, 50, 50]])
def test_accounting_matches_account_moe(moes, algorithm):
    """Levels calibrated to MOEs with one stability: the same totals as hierarchy.accounting —
    two-step groups as released, or SafeTab's full algorithm (TotalOnly groups at the full
    group budget too) as account_moe's ``total_only_moes="full"``."""
    full = ["full"] * len(moes) if algorithm == "full" else None
    reference = account_moe(moes, stability=9, gamma="0.1", delta=1e-10, total_only_moes=full)
    for notion in ("pure", "zcdp"):
        budgets = {f"L{i}": LevelBudget.from_moe(m, notion=notion, stability=9, gamma="0.1")
                   for i, m in enumerate(moes)}
        acc = account_safetab(budgets, kinds={n: ("adaptive",) for n in budgets}, delta=1e-10,
                              algorithm=algorithm)
        assert acc.to_dict()["algorithm"]["name"] == algorithm
        if notion == "pure":
            assert math.isclose(acc.total.pure_epsilon, reference.pure_dp_epsilon, rel_tol=1e-12)
            assert math.isclose(acc.total.rdp_epsilon, reference.rdp_epsilon, rel_tol=1e-9)
            for level, ref in zip(acc.levels.values(), reference.levels):
                assert math.isclose(level.loss.pure_epsilon, ref.epsilon_total, rel_tol=1e-12)
        else:
            assert math.isclose(acc.total.rho, reference.rho, rel_tol=1e-12)
            assert math.isclose(acc.total.zcdp_epsilon_analytic,
                                reference.zcdp_epsilon_analytic, rel_tol=1e-12)
            assert math.isclose(acc.total.zcdp_epsilon_numeric,
                                reference.zcdp_epsilon_numeric, rel_tol=1e-9)


def test_mixed_level_is_charged_its_costlier_group_kind():
    budget = {"L": LevelBudget("pure", "1.2", stability=3, gamma="0.1")}
    both = account_safetab(budget, kinds={"L": ("adaptive", "total_only")},
                           algorithm="as_released")
    only = account_safetab(budget, kinds={"L": ("total_only",)}, algorithm="as_released")
    adaptive = account_safetab(budget, kinds={"L": ("adaptive",)}, algorithm="as_released")
    # the full algorithm (the default) charges every level for both kinds, whatever it released
    for kinds in (("adaptive",), ("total_only",), ("adaptive", "total_only")):
        full = account_safetab(budget, kinds={"L": kinds})
        assert full.total.rdp_epsilon == both.total.rdp_epsilon
        assert full.levels["L"].kinds == kinds
        assert full.levels["L"].charged == ("adaptive", "total_only")
    assert both.total.pure_epsilon == only.total.pure_epsilon == adaptive.total.pure_epsilon
    assert both.total.rdp_epsilon >= adaptive.total.rdp_epsilon
    assert math.isclose(both.total.rdp_epsilon, only.total.rdp_epsilon, rel_tol=1e-12)
    assert both.total.rho == only.total.rho > adaptive.total.rho


@pytest.mark.parametrize("kwargs, message", [
    (dict(notion="pure", total="0", stability=1, gamma="0.1"), "must be > 0"),
    (dict(notion="pure", total="1", stability=0, gamma="0.1"), "stability must be a positive"),
    (dict(notion="pure", total="1", stability=2, gamma="1"), "strictly between 0 and 1"),
    (dict(notion="pure", total="1", stability=2, gamma="0"), "strictly between 0 and 1"),
    (dict(notion="renyi", total="1", stability=2, gamma="0.1"), "notion must be"),
])
def test_invalid_level_budget_raises(kwargs, message):
    with pytest.raises(PostprocError, match=message):
        LevelBudget(**kwargs)


# ---------------------------------------------------------------------------------------------
# membership and stability
# ---------------------------------------------------------------------------------------------
def test_membership_on_hand_made_records():
    records = prepare_records(hand_made_persons(), DataColumns(), ["state"])
    for iteration in HAND_ITERATIONS.values():
        expected = [iteration.id in groups for groups in HAND_MEMBERSHIP]
        got = iteration_members(iteration, records.races, records.origin).tolist()
        assert got == expected, iteration.id


def test_stability_is_computed_on_hand_made_records():
    records = prepare_records(hand_made_persons(), DataColumns(), ["state"])
    counts = tabulate_groups(records, [hand_level(5)], HAND_ITERATIONS)["state"]
    assert counts.observed_stability == max(len(g) for g in HAND_MEMBERSHIP) == 5
    assert len(HAND_MEMBERSHIP[counts.witness]) == 5
    # counts per group agree with the hand-made membership
    state = np.array([0, 0, 0, 1, 1, 1])
    for j, it in enumerate(HAND_ITERATIONS):
        for e in (0, 1):
            expected = sum(1 for r, g in enumerate(HAND_MEMBERSHIP) if state[r] == e and it in g)
            assert counts.totals()[e, j] == expected
    check_stability(hand_level(5), counts, records, HAND_ITERATIONS)     # no error
    check_stability(hand_level(8), counts, records, HAND_ITERATIONS)     # larger is fine
    # a subset of iterations has its own, smaller stability
    level = Level("state", "state", ("T", "A", "C"), 3, None, 5, (10, 20, 30))
    assert tabulate_groups(records, [level], HAND_ITERATIONS)["state"].observed_stability == 3


def test_declared_stability_smaller_than_the_data_raises_with_location(tmp_path):
    persons = hand_made_persons()
    iterations = "".join(
        f'[[iteration]]\nid = "{it.id}"\nname = "{it.name}"\n'
        f'codes = {json.dumps("all" if it.codes is None else sorted(it.codes))}\n'
        + ("alone = true\n" if it.alone else "")
        for it in HAND_ITERATIONS.values())
    text = config_text(iterations=iterations, levels=textwrap.dedent("""\
        [[level]]
        name = "state"
        stability = 4
        moe = 5
        """))
    path = write(tmp_path, text)
    config = load_safetab_config(path)
    with pytest.raises(PostprocError) as info:
        safetab(persons, config)
    message = str(info.value)
    assert message.startswith(f"{path}, line {line_of(text, 'stability = 4')}: ")
    assert "declares stability = 4" in message and "belongs to 5 of its groups" in message
    assert "record 0 (race codes [1101, 1104])" in message
    assert "(iterations T, W, WA, G, I)" in message
    assert "declare stability = 5 or more" in message


# ---------------------------------------------------------------------------------------------
# thresholds and the tables released
# ---------------------------------------------------------------------------------------------
def test_thresholds_select_the_table_on_hand_made_noisy_totals():
    theta = (50, 500, 5000)
    noisy = np.array([-20, 0, 49, 50, 51, 499, 500, 4999, 5000, 10**6])
    expected = ["total", "total", "total", "sex_age4", "sex_age4", "sex_age4", "sex_age9",
                "sex_age9", "sex_age23", "sex_age23"]
    assert [TABLE_TYPES[1 + k] for k in choose_tables(noisy, theta)] == expected
    assert choose_tables([49.5, 50.0], (49.5, 50.0, 50.5)).tolist() == [1, 2]
    with pytest.raises(PostprocError, match="theta1 < theta2 < theta3"):
        choose_tables([1], (5, 5, 6))


def noise_free_plan(level: Level):
    """A plan whose noise is zero with probability > 1 − 1e−40 per count (ε = 100 per count)."""
    return plan_level(level, mechanism="geometric", gamma="1/2")


def test_noise_free_run_releases_the_right_tables_and_cells():
    rng = np.random.default_rng(0)
    totals = [0, 9, 10, 99, 100, 999, 1000, 5000]
    cells = np.zeros((len(totals), 1, 2, 23), np.int64)
    for e, total in enumerate(totals):                 # spread each total over random cells
        cells[e, 0] = rng.multinomial(total, np.full(46, 1 / 46)).reshape(2, 23)
    counts = GroupCounts("county", np.array([f"{e:05d}" for e in range(len(totals))]), ("1",),
                         cells, 1)
    level = Level("county", "county", ("1",), 1, "400", None, (10, 100, 1000))
    release = measure_level(counts, noise_free_plan(level), rng=5)
    chosen = [TABLE_TYPES[c] for c in release.choice.ravel()]
    assert chosen == ["total", "total", "sex_age4", "sex_age4", "sex_age9", "sex_age9",
                      "sex_age23", "sex_age23"]
    assert np.array_equal(release.count, release.truth)                # no noise at ε = 200
    assert np.array_equal(release.step1.ravel(), totals)
    table = release.to_table().to_pandas()
    for e, total in enumerate(totals):
        rows = table[table.geography == f"{e:05d}"]
        assert rows["count"].sum() == total                            # cells add up
        kind = chosen[e]
        assert list(rows["stat"]) == list(cell_labels(kind))
        if kind != "total":
            recode = {"sex_age4": AGE4, "sex_age9": AGE9, "sex_age23": AGE23}[kind]
            expected = np.zeros((2, recode.size), np.int64)
            np.add.at(expected, (slice(None), recode.from_age23()), cells[e, 0])
            assert rows["count"].tolist() == expected.ravel().tolist()
    assert "truth" not in table.columns


def test_total_only_groups_release_one_count_with_the_whole_group_budget():
    cells = np.zeros((3, 2, 2, 23), np.int64)
    cells[:, :, 0, 10] = 2000
    counts = GroupCounts("state", np.array(["01", "02", "03"]), ("1", "2"), cells, 1)
    level = Level("state", "state", ("1", "2"), 2, "1", None, (10, 100, 1000), frozenset({"2"}))
    plan = plan_level(level, mechanism="discrete_gaussian", gamma="0.1")
    release = measure_level(counts, plan, rng=3)
    assert [TABLE_TYPES[c] for c in release.choice[:, 1]] == ["total_only"] * 3
    only = release.table == 0
    assert only.sum() == 3 and set(release.stat[only].tolist()) == {0}
    assert np.all(release.variance[only] == plan.noise["total_only"].variance)
    assert plan.noise["total_only"].budget == Fraction(1, 2)
    assert plan.noise["step2"].budget == Fraction(9, 20)
    choices = release.choices_table().to_pandas()
    assert choices.loc[choices.iteration == "2", "noisy_total_step1"].isna().all()
    assert choices.loc[choices.iteration == "1", "noisy_total_step1"].notna().all()


# ---------------------------------------------------------------------------------------------
# accuracy: the share of released counts within ±MOE
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("mechanism, moe", [("discrete_gaussian", 6), ("geometric", 11),
                                            ("discrete_gaussian", 50)])
def test_share_within_moe_matches_its_exact_probability(mechanism, moe):
    """≈ 95 % of the counts lie within ±MOE.

    With n = 2,000 groups × 46 cells = 92,000 independent counts, the observed share is
    binomial around the exact coverage p = P(|noise| ≤ MOE) (not exactly 0.95: the MOE is an
    integer). Tolerance 4.5 binomial standard deviations: false-failure rate 7e-6 (normal
    approximation); the seed is fixed, so the test is deterministic. p itself is within 2.5
    points of 95 %.
    """
    entities = 2000
    cells = np.full((entities, 1, 2, 23), 40, np.int64)
    counts = GroupCounts("county", np.array([f"{e:05d}" for e in range(entities)]), ("1",),
                         cells, 1)
    level = Level("county", "county", ("1",), 4, None, moe, (-3, -2, -1))  # all Age23
    plan = plan_level(level, mechanism=mechanism, gamma="0.1")
    release = measure_level(counts, plan, rng=2024)
    assert np.all(release.table == TABLE_TYPES.index("sex_age23"))
    p = plan.noise["step2"].coverage
    assert abs(p - 0.95) < 0.025
    n = release.rows
    share = np.mean(np.abs(release.count - release.truth) <= moe)
    assert abs(share - p) <= 4.5 * math.sqrt(p * (1 - p) / n), (share, p)
    # the errors' mean absolute value and variance match the noise law (4.5 standard errors)
    error = (release.count - release.truth).astype(float)
    noise = plan.noise["step2"]
    assert abs(np.abs(error).mean() - noise.mean_abs) <= 4.5 * math.sqrt(noise.variance / n)
    assert abs(error.mean()) <= 4.5 * math.sqrt(noise.variance / n)


def test_accuracy_report_of_a_run(persons_small):
    config = SafeTabConfig(
        (Iteration("0001", "Total", "all"), Iteration("1000", "White", ["1000-1999"]),
         Iteration("2000", "Black", ["2000-2999"])),
        (Level("state", "state", ("0001", "1000", "2000"), 3, None, 6, (50, 500, 5000)),
         Level("county", "county", ("0001", "1000", "2000"), 3, None, 11, (20, 200, 2000),
               frozenset({"2000"}))),
        randomness_mode="simulation", seed=8, synthetic=(60_000, 3))
    result = safetab(persons_small, config)
    report = accuracy_report(result)
    assert report["confidential"] is True
    overall = report["overall"]
    assert overall["counts"] == sum(r.rows for r in result.releases.values())
    # |z| <= 4: false-failure rate 6e-5 (the report's own criterion)
    assert overall["consistent"] and abs(overall["z"]) <= 4
    state = report["levels"]["state"]
    assert state["stability_observed"] <= state["stability_declared"] == 3
    assert sum(state["choices"].values()) == state["groups"] == 49 * 3
    assert report["levels"]["county"]["choices"]["total_only"] == \
        len(result.releases["county"].geocodes)
    for level in report["levels"].values():
        for table in level["tables"].values():
            assert 0.9 < table["expected_within_moe"] < 0.99


# ---------------------------------------------------------------------------------------------
# configuration
# ---------------------------------------------------------------------------------------------
def test_example_config_parses_and_runs_on_small_data(tmp_path, persons_small):
    config = load_safetab_config(EXAMPLE)
    assert [lv.name for lv in config.levels] == ["nation", "state", "county", "aiannh"]
    assert config.notion == "zcdp" and config.randomness_mode == "simulation"
    assert any(it.alone for it in config.iterations)
    assert config.levels[2].total_only
    run = run_safetab(config, out=tmp_path / "out", persons=persons_small)
    assert run.report is not None and run.report["overall"]["consistent"]
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert manifest["randomness"]["mode"] == "simulation"
    assert "NOT SAFE" in manifest["randomness"]["label"]
    assert set(manifest["accounting"]["total"]["loss"]) == {
        "pure_epsilon", "rho", "rdp_epsilon", "zcdp_epsilon_analytic", "zcdp_epsilon_numeric"}
    for level in ("nation", "state", "county", "aiannh"):
        meta = json.loads(pq.read_schema(tmp_path / "out" / "tables" / f"{level}.parquet")
                          .metadata[b"dapp"])
        assert meta["randomness"]["safe_for_release"] is False
        assert meta["randomness"]["label"] == manifest["randomness"]["label"]
        assert manifest["levels"][level]["choices"] == run.result.releases[level].choice_counts()


def test_release_mode_is_the_default(tmp_path, persons_small):
    text = config_text(head='[data]\nsynthetic = { persons = 20000, seed = 1 }\n'
                            '[adaptive]\nthresholds = [100, 1000, 10000]\n')
    config = parse_safetab_config(text)
    assert config.randomness_mode == "release" and config.rng is None
    assert config.accuracy_report is False                        # confidential: opt-in
    run = run_safetab(config, out=tmp_path / "r", persons=persons_small)
    assert run.report is None
    assert not (tmp_path / "r" / "accuracy_report.json").exists()
    assert run.manifest["randomness"]["safe_for_release"] is True
    meta = json.loads(pq.read_schema(tmp_path / "r" / "tables" / "state.parquet")
                      .metadata[b"dapp"])
    assert meta["randomness"]["mode"] == "release"


def test_simulation_is_reproducible_and_seed_dependent(persons_small):
    config = parse_safetab_config(config_text())
    a = safetab(persons_small, config).releases["state"]
    b = safetab(persons_small, config).releases["state"]
    c = safetab(persons_small, config, rng=8).releases["state"]
    assert a.to_table().equals(b.to_table())
    assert not np.array_equal(a.count, c.count) or not np.array_equal(a.step1, c.step1)


def test_output_directory_is_not_overwritten_by_default(tmp_path, persons_small):
    config = parse_safetab_config(config_text())
    run_safetab(config, out=tmp_path / "o", persons=persons_small)
    with pytest.raises(PostprocError, match="already exists"):
        run_safetab(config, out=tmp_path / "o", persons=persons_small)
    run_safetab(config, out=tmp_path / "o", persons=persons_small, overwrite=True)


BAD_CONFIGS = [
    # (replacement of the levels part, needle of the line the error must name, message part)
    ('[[level]]\nname = "state"\nstability = 2\nmoe = 8\ncolour = "red"\n', "colour",
     "unknown key 'colour'"),
    ('[[level]]\nname = "state"\nstability = 0\nmoe = 8\n', "stability = 0",
     "stability must be a positive integer"),
    ('[[level]]\nname = "state"\nstability = 2\nmoe = 8\nbudget = "1"\n', "budget =",
     "exactly one of budget"),
    ('[[level]]\nname = "state"\nstability = 2\nmoe = 0\n', "moe = 0", "moe must be an integer"),
    ('[[level]]\nname = "state"\nstability = 2\nbudget = "-1"\n', "budget =", "must be >= 0"),
    ('[[level]]\nname = "state"\nstability = 2\nmoe = 8\nthresholds = [5, 5, 6]\n',
     "thresholds = [5", "theta1 < theta2 < theta3"),
    ('[[level]]\nname = "state"\nstability = 2\nmoe = 8\niterations = ["0001", "9"]\n',
     "iterations =", "that no [[iteration]] defines"),
    ('[[level]]\nname = "state"\nstability = 2\nmoe = 8\ntotal_only = ["9"]\n', "total_only",
     "does not have"),
    ('[[level]]\nname = "state"\nstability = 2\nmoe = 8\n[[level]]\nname = "state"\n'
     'stability = 2\nmoe = 8\n', ('name = "state"', 2), "already used"),
]


@pytest.mark.parametrize("levels, needle, message", BAD_CONFIGS)
def test_config_errors_name_file_and_line(tmp_path, levels, needle, message):
    text = config_text(levels=levels)
    path = write(tmp_path, text)
    with pytest.raises(PostprocError) as info:
        load_safetab_config(path)
    needle, occurrence = needle if isinstance(needle, tuple) else (needle, 1)
    line = line_of(text, needle, occurrence)
    assert str(info.value).startswith(f"{path}, line {line}: "), str(info.value)
    assert message in str(info.value)


@pytest.mark.parametrize("part, replacement, needle, message", [
    ("iterations", '[[iteration]]\nid = "1"\nname = "A"\ncodes = ["9-3"]\n', "codes =",
     "is empty"),
    ("iterations", '[[iteration]]\nid = "1"\nname = "A"\ncodes = "all"\nalone = true\n',
     "alone =", "alone = true needs a list"),
    ("iterations", '[[iteration]]\nid = "1"\nname = "A"\ncodes = [0]\n', "codes =",
     "codes must be in 1..99999"),
    ("iterations", '[[iteration]]\nid = "1"\nname = "A"\ncodes = "all"\n'
                   '[[iteration]]\nid = "1"\nname = "B"\ncodes = "all"\n', ('id = "1"', 2),
     "already used"),
    ("head", '[data]\nsynthetic = { persons = 20000, seed = 1 }\n[randomness]\n'
             'mode = "release"\nseed = 3\n', "seed = 3", "release mode cannot be seeded"),
    ("head", '[data]\nsynthetic = { persons = 20000, seed = 1 }\n[randomness]\n'
             'mode = "simulation"\n', "mode =", "needs seed"),
    ("head", '[data]\nsynthetic = { persons = 20000, seed = 1 }\n[mechanism]\n'
             'name = "laplace"\n', 'name = "laplace"', "must be 'geometric'"),
    ("head", '[data]\nsynthetic = { persons = 20000, seed = 1 }\n[adaptive]\ngamma = "1.5"\n',
     "gamma =", "strictly between 0 and 1"),
    ("head", '[data]\nsynthetic = { persons = 20000 }\n', "synthetic =", "synthetic must be"),
    ("head", '[data]\nsynthetic = { persons = 20000, seed = 1 }\n[output]\nwhere = "x"\n',
     "where =", "unknown key 'where'"),
    ("head", '[data]\nsynthetic = { persons = 20000, seed = 1 }\n[data.columns]\nsex = 3\n',
     "[data.columns]", "columns must be non-empty strings"),
    ("head", '[accounting]\ndelta = 2\n[data]\nsynthetic = { persons = 20000, seed = 1 }\n',
     "delta = 2", "delta must be a number in (0, 1)"),
])
def test_more_config_errors_name_file_and_line(tmp_path, part, replacement, needle, message):
    text = config_text(**{part: replacement})
    if part == "head" and "thresholds" not in replacement:
        text = text.replace('name = "state"\n', 'name = "state"\nthresholds = [1, 2, 3]\n')
    path = write(tmp_path, text)
    with pytest.raises(PostprocError) as info:
        load_safetab_config(path)
    needle, occurrence = needle if isinstance(needle, tuple) else (needle, 1)
    assert str(info.value).startswith(f"{path}, line {line_of(text, needle, occurrence)}: "), \
        str(info.value)
    assert message in str(info.value)


def test_config_file_errors(tmp_path):
    with pytest.raises(PostprocError, match="does not exist"):
        load_safetab_config(tmp_path / "missing.toml")
    path = write(tmp_path, "[data\n")
    with pytest.raises(PostprocError, match=f"{path}: invalid TOML"):
        load_safetab_config(path)
    path = write(tmp_path, config_text(head="[data]\n"), "nodata.toml")
    with pytest.raises(PostprocError, match=rf"{path}, line 1: \[data\] needs exactly one of"):
        load_safetab_config(path)


@pytest.mark.parametrize("build, message", [
    (lambda: Iteration("", "x", "all"), "non-empty string"),
    (lambda: Iteration("a", "x", []), "non-empty list"),
    (lambda: Iteration("a", "x", ["5-x"]), "integer or a range"),
    (lambda: Level("s", "s", (), 1, "1", None, (1, 2, 3)), "iterations must be"),
    (lambda: Level("s", "s", ("1",), 1, None, None, (1, 2, 3)), "exactly one of budget"),
    (lambda: Level("s", "", ("1",), 1, "1", None, (1, 2, 3)), "geography must be"),
    (lambda: SafeTabConfig((Iteration("1", "T", "all"),),
                           (Level("s", "s", ("2",), 1, "1", None, (1, 2, 3)),),
                           synthetic=(100, 1)), "names iterations ['2']"),
    (lambda: SafeTabConfig((Iteration("1", "T", "all"),),
                           (Level("s", "s", ("1",), 1, "1", None, (1, 2, 3)),)),
     "exactly one data source"),
    (lambda: SafeTabConfig((Iteration("1", "T", "all"),),
                           (Level("s", "s", ("1",), 1, "1", None, (1, 2, 3)),),
                           mechanism=get_mechanism("laplace"), synthetic=(100, 1)),
     "must be 'geometric'"),
    (lambda: SafeTabConfig((Iteration("1", "T", "all"),),
                           (Level("s", "s", ("1",), 1, "1", None, (1, 2, 3)),),
                           randomness_mode="simulation", synthetic=(100, 1)), "needs seed"),
])
def test_invalid_value_types_raise(build, message):
    with pytest.raises(PostprocError, match=re_escape(message)):
        build()


def re_escape(text: str) -> str:
    import re
    return re.escape(text)


# ---------------------------------------------------------------------------------------------
# data validation
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("change, message", [
    (lambda t: t.drop_columns(["age"]), "no column 'age'"),
    (lambda t: t.set_column(1, "sex", pa.array([1, 2, 1, 0, 2, 1])), "must be in 1..2"),
    (lambda t: t.set_column(2, "age", pa.array([1, 2, 3, 4, 5, 116])), "must be in 0..115"),
    (lambda t: t.set_column(0, "state", pa.array(["01", None, "01", "02", "02", "02"])),
     "1 missing values"),
    (lambda t: t.set_column(3, "race1", pa.array([1.0] * 6)), "must hold integers"),
])
def test_invalid_data_raises(change, message):
    config = SafeTabConfig(tuple(HAND_ITERATIONS.values()), (hand_level(8),),
                           randomness_mode="simulation", seed=1, synthetic=(100, 1))
    with pytest.raises(PostprocError, match=re_escape(message)):
        safetab(change(hand_made_persons()), config)


# ---------------------------------------------------------------------------------------------
# CLI
# ---------------------------------------------------------------------------------------------
def test_cli_json_and_text(tmp_path, capsys):
    path = write(tmp_path, config_text().replace("persons = 20000", "persons = 30000"))
    assert main(["safetab", str(path), "--out", str(tmp_path / "o"), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert set(out) == {"directory", "randomness", "accounting", "levels", "accuracy",
                        "accuracy_report"}
    assert out["accuracy_report"] == str(tmp_path / "o" / "confidential" / "accuracy_report.json")
    assert out["accuracy"]["overall"]["consistent"]
    assert out["levels"]["state"]["budget"]["target_moe"] == 8
    assert main(["safetab", str(path), "--out", str(tmp_path / "o"), "--overwrite"]) == 0
    text = capsys.readouterr().out
    assert "Privacy accounting" in text and "Adaptive choices" in text
    assert "within +-MOE" in text and "NOT SAFE FOR A REAL RELEASE" in text


def test_cli_error_is_one_line_with_exit_code_1(tmp_path, capsys):
    path = write(tmp_path, config_text(levels='[[level]]\nname = "state"\nstability = 0\n'
                                              'moe = 8\n'))
    assert main(["safetab", str(path), "--out", str(tmp_path / "o")]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"postproc safetab: error: {path}, line ")
    assert "Traceback" not in err


def test_example_script_runs(tmp_path, capsys, monkeypatch):
    import runpy
    monkeypatch.setattr("sys.argv", ["safetab_1940.py", "--persons", "40000",
                                     "--out", str(tmp_path / "ex"), "--json"])
    with pytest.raises(SystemExit) as info:
        runpy.run_path(str(ROOT / "examples" / "safetab_1940.py"), run_name="__main__")
    assert info.value.code == 0
    out = json.loads(capsys.readouterr().out)
    assert {"accounting", "choices", "accuracy"} <= set(out)
    assert out["accuracy"]["overall"]["consistent"]


def test_persons_file_is_read_and_checked(tmp_path):
    persons = hand_made_persons()
    pq.write_table(persons, tmp_path / "persons.parquet")
    pq.write_table(persons.drop_columns(["race3"]), tmp_path / "short.parquet")
    levels = textwrap.dedent("""\
        [[level]]
        name = "state"
        stability = 2
        budget = "1"
        """)
    head = '[data]\npersons = "{}"\n[randomness]\nmode = "simulation"\nseed = 1\n' \
           '[adaptive]\nthresholds = [1, 2, 3]\n'
    good = write(tmp_path, config_text(head=head.format("persons.parquet"), levels=levels),
                 "good.toml")
    run = run_safetab(load_safetab_config(good), out=tmp_path / "o")
    assert run.result.records == 6
    assert run.result.releases["state"].truth_totals.tolist() == [[3, 1], [3, 2]]
    for name, message in (("short.parquet", "has no column(s) ['race3']"),
                          ("absent.parquet", "does not exist")):
        path = write(tmp_path, config_text(head=head.format(name), levels=levels), "bad.toml")
        with pytest.raises(PostprocError, match=re_escape(message)):
            run_safetab(load_safetab_config(path), out=tmp_path / "x")
