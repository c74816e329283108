"""The 2020-style (PL 94-171) path end to end: presets in the run configuration, ``[data]
blocks``, per-level ``[solver] passes``, and a small run through ``postproc run``'s pipeline.

The run: 6,000 synthetic persons (:func:`hierarchy.synth.census2020.synthesize_2020`, the 50 states
and DC), all six levels (nation → state → county → tract → block_group → block), the production
schema, workload, budget and spec, the discrete Gaussian mechanism — a few seconds. Its outputs
are checked against the truth read from the parquet files with pandas, independently of the
tabulation and of the engine's own verification.
"""

from __future__ import annotations

import json
import tomllib
from fractions import Fraction
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from hierarchy.io import read_microdata
from hierarchy.presets.pl94 import (
    LEVELS,
    PL94_2020,
    PRODUCTION_PASS_TOLERANCE,
    TOTAL_RHO,
    pl94_budget,
    pl94_passes,
    pl94_round_passes,
    pl94_spec_dict,
    pl94_workload,
)
from hierarchy.synth.census2020 import synthesize_2020
from hierarchy.tabulation import tabulate
from invariants.spec import Spec
from postproc.apps.runs.config import RunConfig, config_from_dict, load_config, read_blocks
from postproc.apps.runs.demo import demo_config, run_demo
from postproc.apps.runs.pipeline import run_pipeline
from postproc.cli import main
from postproc.errors import PostprocError
from postproc.result import Result

REPO = Path(__file__).resolve().parents[1]
PERSONS = 6_000


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> Path:
    directory = tmp_path_factory.mktemp("pl94") / "data"
    synthesize_2020(PERSONS, seed=11, out=directory)
    return directory


def pl94_config(data: Path, **options) -> RunConfig:
    settings = dict(persons=data / "persons.parquet", units=data / "units.parquet",
                    blocks=data / "blocks.parquet", levels=LEVELS, schema="pl94_2020",
                    workload="pl94_2020", budget="pl94_2020", mechanism="discrete_gaussian",
                    seed=5, spec="pl94_2020", output=data.parent / "run")
    settings.update(options)
    return RunConfig.build(**settings)


@pytest.fixture(scope="module")
def run(data):
    config = pl94_config(data, passes="pl94_2020", round_passes="pl94_2020",
                         method_options={"pass_tolerance": PRODUCTION_PASS_TOLERANCE})
    return run_pipeline(config, progress=False, log=lambda line: None)


# -- the presets in a configuration ---------------------------------------------------------

def test_presets_are_the_production_objects(data):
    config = pl94_config(data)
    assert config.schema == PL94_2020
    assert config.workload.to_dict() == pl94_workload().to_dict()
    assert config.budget == pl94_budget()
    assert config.budget.total == Fraction(542, 339) ** 2
    assert config.spec.to_dict() == Spec.from_dict(pl94_spec_dict()).to_dict()
    assert config.spec.to_dict() == Spec.pl94_2020(LEVELS).to_dict()


def test_the_example_uses_the_presets():
    text = (REPO / "examples" / "pl94_2020.toml").read_text()
    raw = tomllib.loads(text)
    for section in ("workload", "budget", "spec"):
        assert raw[section] == {"preset": "pl94_2020"}, section
    config = load_config(REPO / "examples" / "pl94_2020.toml")
    assert config.blocks == (REPO / "data" / "pl94_2020" / "blocks.parquet").resolve()
    # production's order per level: the total alone first at state … block_group, one pass
    # at the nation and the block
    for level in LEVELS:
        assert [list(p) for p in config.passes_at(level)] == pl94_passes(level), level
        rounder = config.topdown.round_passes[level]
        assert [list(p) for p in rounder] == pl94_round_passes(level)
    assert config.mechanism.exact is False            # the fast sampler, in simulation mode
    # later passes hold the earlier passes' answers within production's 0.1
    assert config.method_options == {"pass_tolerance": PRODUCTION_PASS_TOLERANCE} == {
        "pass_tolerance": 0.1}


def test_a_bad_pass_tolerance_in_a_config_is_refused_at_its_line(tmp_path):
    text = (REPO / "examples" / "pl94_2020.toml").read_text()
    assert "\npass_tolerance = 0.1\n" in text
    bad = text.replace("\npass_tolerance = 0.1\n", "\npass_tolerance = 0\n")
    (tmp_path / "bad.toml").write_text(bad)
    line = bad.splitlines().index("pass_tolerance = 0") + 1         # the option's own line
    with pytest.raises(PostprocError, match=rf"bad.toml, line {line}: topdown: pass_tolerance "
                                            r"must be a finite number above 0 .* such as 0.01"):
        load_config(tmp_path / "bad.toml")


def test_the_passes_preset_brings_productions_hold_unless_the_file_sets_one(tmp_path):
    text = (REPO / "examples" / "pl94_2020.toml").read_text()
    without = text.replace("\npass_tolerance = 0.1\n", "\n")
    assert "pass_tolerance =" not in without and 'passes = "pl94_2020"' in without
    (tmp_path / "preset.toml").write_text(without)
    assert load_config(tmp_path / "preset.toml").method_options == {"pass_tolerance": 0.1}
    (tmp_path / "own.toml").write_text(text.replace("\npass_tolerance = 0.1\n",
                                                    "\npass_tolerance = 0.5\n"))
    assert load_config(tmp_path / "own.toml").method_options == {"pass_tolerance": 0.5}
    # passes listed by hand are TopDown's own, with its default hold
    listed = without.replace('\npasses = "pl94_2020"\n', '\npasses = [["total"]]\n')
    assert listed != without
    (tmp_path / "listed.toml").write_text(listed)
    assert load_config(tmp_path / "listed.toml").method_options == {}


def test_a_saved_configuration_reads_back_equal(data, tmp_path):
    config = pl94_config(data, passes="pl94_2020", budget={"preset": "pl94_2020",
                                                           "total": "3/2"})
    path = tmp_path / "run.toml"
    path.write_text(config.to_toml())
    again = load_config(path)
    assert again.budget == config.budget and again.topdown.passes == config.topdown.passes
    assert again.blocks == config.blocks and again.fingerprint() == config.fingerprint()


def test_budget_preset_rescales_rho_keeping_the_shares(data):
    config = pl94_config(data, budget={"preset": "pl94_2020", "total": "1/2",
                                       "neighbours": "change"})
    production = pl94_budget()
    assert config.budget.total == Fraction(1, 2) and config.budget.neighbours == "change"
    for level in LEVELS:
        assert config.budget.queries(level) == production.queries(level)
        for query in production.queries(level):
            assert (config.budget.query_budget(level, query) / config.budget.total
                    == production.query_budget(level, query) / production.total)


@pytest.mark.parametrize("options, where, words", [
    (dict(budget={"preset": "pl94_2020", "kind": "pure"}), "[budget]", ["zCDP", "kind"]),
    (dict(budget={"preset": "pl94_2020", "level_fractions": {"nation": 1}}),
     "[budget]", ["level_fractions", "remove"]),
    (dict(budget={"preset": "pl94_2020", "total": -1}), "[budget]", ["total"]),
    (dict(budget={"preset": "pl94_2021"}), "[budget]", ["pl94_2021", '"pl94_2020"']),
    (dict(schema="e2e_1940", spec=None), "[workload]", ["pl94_2020 schema"]),
    (dict(workload={"preset": "pl95"}), "[workload]", ["pl95", '"e2e"']),
    (dict(spec={"preset": "pl94"}), "[spec]", ["pl94", '"pl94_2020"']),
    (dict(levels=LEVELS[:5], spec=None), "[budget]", ["6 level names"]),
])
def test_preset_errors_name_the_section_and_the_fix(data, options, where, words):
    with pytest.raises(PostprocError) as info:
        pl94_config(data, **options)
    message = str(info.value)
    assert where in message, message
    for word in words:
        assert word in message, (word, message)


# -- per-level passes -----------------------------------------------------------------------

def test_passes_preset_is_the_production_order_per_level(data):
    config = pl94_config(data, passes="pl94_2020")
    for level in LEVELS:
        assert [list(p) for p in config.passes_at(level)] == pl94_passes(level)
    assert config.passes_at("nation") == (tuple(q for q in pl94_passes("nation")[0]),)
    assert "total" not in config.passes_at("nation")[0]


def test_passes_table_leaves_other_levels_to_the_default(data):
    config = pl94_config(data, passes={"block": [["detailed"], ["total"]]})
    assert config.passes_at("block") == (("detailed",), ("total",))
    assert config.passes_at("state") is None


@pytest.mark.parametrize("passes, words", [
    ({"nation": [["total"], ["detailed"]]}, ["level 'nation'", "['total']", "not measured"]),
    ({"county": [["detailed"]], "blok": [["total"]]}, ["['blok']", "[geography] levels"]),
    ({"block": [["total", "hhgq * sex"]]}, ["['hhgq * sex']", "not measured at 'block'"]),
    ({"block": ["total"]}, ["list of lists"]),
    ({"block": []}, ["list of lists"]),
    ("production", ["unknown passes preset", '"pl94_2020"']),
    ([["total"], ["age"]], ["['age']", "not in the workload"]),
])
def test_passes_errors(data, passes, words):
    with pytest.raises(PostprocError) as info:
        pl94_config(data, passes=passes)
    message = str(info.value)
    assert "[solver]" in message, message
    for word in words:
        assert word in message, (word, message)


def test_passes_error_in_a_file_names_its_line(data, tmp_path):
    raw = tomllib.loads(pl94_config(data).to_toml())
    raw["solver"] = {"passes": {"nation": [["total"]]}}
    text = '[solver]\nchain = ["osqp"]\n\n[solver.passes]\nnation = [["total"]]\n'
    with pytest.raises(PostprocError, match=r"run\.toml, line 4: .*level 'nation'"):
        config_from_dict(raw, source="run.toml", text=text)


@pytest.mark.parametrize("round_passes, words", [
    ({"block": [["total", "marginal(hhgq, colour)"]]}, ["round_passes of level 'block'",
                                                        "'marginal(hhgq, colour)'", "colour"]),
    ({"blok": [["total"]]}, ["['blok']", "[geography] levels"]),
    ("production", ["unknown round_passes preset", '"pl94_2020"']),
    ([["total"], "hhgq"], ["list of lists"]),
])
def test_round_passes_errors(data, round_passes, words):
    with pytest.raises(PostprocError) as info:
        pl94_config(data, round_passes=round_passes)
    message = str(info.value)
    assert "[solver]" in message and "round_passes" in message, message
    for word in words:
        assert word in message, (word, message)


def test_the_run_rounds_in_production_passes_per_level(run):
    """The rounder's order reaches every node: two rounding LPs where the total is rounded
    alone first (state … block group), one at the nation and the block; the last pass has the
    detailed query, so it decides every cell and no cells-only LP follows."""
    recorded = run.result.provenance["solver"]["round_passes"]
    stats = run.result.node_stats
    for level in LEVELS:
        assert recorded[level] == pl94_round_passes(level), level
        solved = stats[(stats.level == level) & (stats.rounding != "copy")]
        assert (solved.round_passes == len(pl94_round_passes(level))).all(), level
        assert (solved.rounding == "lp").all(), level          # integral vertices, no MILP


# -- blocks ---------------------------------------------------------------------------------

def test_blocks_keep_the_empty_blocks_in_the_geography(data):
    blocks = pd.read_parquet(data / "blocks.parquet")
    persons = pd.read_parquet(data / "persons.parquet")
    units = pd.read_parquet(data / "units.parquet")
    occupied = set(persons["block"].astype(str)) | set(units["block"].astype(str))
    empty = set(blocks["block"].astype(str)) - occupied
    assert empty, "the synthetic data should have empty blocks"
    config = pl94_config(data)
    geography = config.read_geography()
    assert list(geography.geocodes[-1]) == sorted(blocks["block"].astype(str))
    # tabulated into that geography, the empty blocks are units with zero persons
    micro = read_microdata(config.persons, schema=config.schema, levels=config.levels,
                           units=config.units)
    truth = tabulate(micro.persons, schema=config.schema, levels=config.levels,
                     units=micro.units, geography=geography)
    at = truth.geography.index_of("block", sorted(empty))
    assert truth.counts[-1][at].sum() == 0 and truth.units[-1][at].sum() == 0
    assert truth.geography.n_units("block") == len(blocks) > len(occupied)
    assert pl94_config(data, blocks=None).read_geography() is None


def test_the_run_fits_in_production_passes_per_level(run):
    """TopDown takes the per-level order: the provenance records each level's passes."""
    recorded = run.result.provenance["solver"]["passes"]
    for level in LEVELS:
        assert recorded[level] == [list(p) for p in pl94_passes(level)], level
    assert run.result.provenance["solver"]["pass_tolerance"] == PRODUCTION_PASS_TOLERANCE


def test_release_mode_refuses_the_fast_sampler_when_the_config_loads(data):
    with pytest.raises(PostprocError, match="exact = false .* release mode needs the exact"):
        pl94_config(data, mode="release", seed=None,
                    mechanism={"name": "discrete_gaussian", "exact": False})


def test_the_run_tabulates_into_the_blocks_geography(data, run):
    """The pipeline's truth has every block of the blocks file, the empty ones too, and so do
    the run's outputs (an empty block is a unit with zero persons, not a missing one)."""
    from postproc.apps.runs.pipeline import load_truth

    blocks = pd.read_parquet(data / "blocks.parquet")
    truth = load_truth(pl94_config(data))
    assert truth.geography.n_units("block") == len(blocks)
    assert run.result.geography.n_units("block") == len(blocks)


def test_blocks_file_errors(data, tmp_path):
    bad = tmp_path / "blocks.csv"
    bad.write_text("state,county,block\n01,01001,0100\n")
    with pytest.raises(PostprocError, match="no column 'tract' for level 'tract'"):
        read_blocks(bad, LEVELS)
    with pytest.raises(PostprocError, match="blocks: .*does not exist"):
        read_blocks(tmp_path / "none.parquet", LEVELS)
    renamed = tmp_path / "renamed.csv"
    renamed.write_text("st,block\n01,A\n02,B\n")
    geo = read_blocks(renamed, ["nation", "state", "block"], {"state": "st"})
    assert list(geo.geocodes[1]) == ["01", "02"]


# -- the run --------------------------------------------------------------------------------

def test_run_writes_the_run_layout(run):
    directory = run.directory
    for name in [f"{lv}.parquet" for lv in LEVELS] + ["manifest.json", "checkpoint.json",
                                                      "node_stats.parquet",
                                                      "confidential/error_table.csv"]:
        assert (directory / name).is_file(), name
    manifest = json.loads((directory / "manifest.json").read_text())
    assert manifest["safe_for_release"] is False
    again = Result.read(directory)
    for mine, read in zip(run.result.histograms, again.histograms):
        assert np.array_equal(mine, read)


def test_run_keeps_the_published_state_totals(run, data):
    persons = pd.read_parquet(data / "persons.parquet")
    truth = persons.groupby(persons["state"].astype(str), observed=True).size()
    geo = run.result.geography
    published = pd.Series(run.result.histograms[1].sum(axis=1), index=geo.geocodes[1])
    assert published.to_dict() == truth.to_dict()
    assert int(run.result.histograms[0].sum()) == PERSONS


def test_run_keeps_the_block_units_and_their_constraints(run, data):
    """gqhh at the block: persons of each type ≥ the units of that type (each occupied unit
    holds a person), none where there is none; nobody under 18 in a nursing facility."""
    units = pd.read_parquet(data / "units.parquet")
    geo = run.result.geography
    table = np.zeros((geo.n_units("block"), 8), dtype=np.int64)
    at = geo.index_of("block", units["block"].astype(str).to_numpy())
    np.add.at(table, (at, units["hhgq"].to_numpy()), 1)
    blocks = run.result.histograms[-1].reshape(-1, *PL94_2020.shape)
    by_type = blocks.sum(axis=(2, 3, 4))
    assert (by_type >= table).all()
    assert (by_type[table == 0] == 0).all()
    assert table[:, 0].sum() > 1000 and (table[:, 1:] > 0).any()   # the check has teeth
    assert blocks[:, 3, 0].sum() == 0   # nurse_nva_0: hhgq nursing (3) × votingage minor (0)


def test_run_is_consistent_integer_and_nonnegative(run):
    geo = run.result.geography
    hists = run.result.histograms
    for li in range(1, len(LEVELS)):
        assert hists[li].dtype.kind == "i" and (hists[li] >= 0).all()
        assert np.array_equal(geo.aggregate(hists[li], li, li - 1), hists[li - 1])


# -- the demo -------------------------------------------------------------------------------

def test_demo_pl94_config_is_the_presets(tmp_path):
    config = demo_config(tmp_path, preset="pl94_2020", seed=3)
    assert config.budget == pl94_budget() and config.levels == LEVELS
    assert config.method_options == {"pass_tolerance": PRODUCTION_PASS_TOLERANCE}
    assert config.blocks == (tmp_path / "data" / "blocks.parquet").resolve()
    with pytest.raises(PostprocError, match="unknown demo preset"):
        demo_config(tmp_path, preset="pl94")


def test_demo_pl94_refuses_epsilon(tmp_path, capsys):
    code = main(["demo", "--preset", "pl94_2020", "--epsilon", "1", "--persons", "500",
                 "--out", str(tmp_path / "demo"), "--no-progress"])
    assert code == 1
    assert "takes no ε" in capsys.readouterr().err
    assert not (tmp_path / "demo").exists()


def test_demo_pl94_from_the_command_line(tmp_path, capsys):
    out = tmp_path / "demo"
    code = main(["demo", "--preset", "pl94_2020", "--persons", "3000", "--seed", "2",
                 "--out", str(out), "--no-progress"])
    printed = capsys.readouterr().out
    assert code == 0
    for level in LEVELS:
        assert f"TopDown {level}:" in printed
    assert "MAE TopDown" in printed and f"postproc run {out}/config.toml" in printed
    config = load_config(out / "config.toml")
    assert config.budget == pl94_budget() and config.seed == 2
    result = Result.read(out / "run")
    assert int(result.histograms[0].sum()) == 3000


def test_run_demo_replaces_only_its_own_directory(tmp_path):
    foreign = tmp_path / "mine"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("keep")
    with pytest.raises(PostprocError, match="not made by `postproc demo`"):
        run_demo(foreign, preset="pl94_2020", persons=500, progress=False, log=lambda m: None)
    assert (foreign / "notes.txt").read_text() == "keep"


def test_total_rho_in_the_example_is_production():
    assert load_config(REPO / "examples" / "pl94_2020.toml").budget.total == TOTAL_RHO
