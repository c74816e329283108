"""``gls`` in parts (:func:`postproc.apps.runs.parts_gls.gls_in_parts`) against the GLS of the
whole geography measured with the same keyed streams (:func:`whole_measurement`): the same
estimates and the same standard errors at every level."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pandas as pd
import pytest
from _gls_toys import empty_blocks_part

from hierarchy.synth.census2020 import synthesize_2020
from invariants.spec import Spec
from postproc.apps.runs.demo import demo_config
from postproc.apps.runs.parts import whole_measurement
from postproc.apps.runs.parts_gls import gls_in_parts
from postproc.apps.runs.pipeline import load_truth
from postproc.errors import PostprocError
from postproc.methods.gls import gls


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    base = tmp_path_factory.mktemp("gls_parts")
    synthesize_2020(4_000, seed=3, out=base / "data")
    config = demo_config(base, preset="pl94_2020", seed=5, executor="serial")
    # the total held at the nation only, so that state and tract totals have errors to compare
    spec = config.spec.to_dict()
    spec["invariant"] = [{"name": "tot", "levels": ["nation"]}] + spec["invariant"][1:]
    config = dataclasses.replace(config, spec=Spec.from_dict(spec))
    done = gls_in_parts(config, base / "out", part_blocks=30,
                        queries=("total", "hhgq", "votingage * hispanic * cenrace"),
                        log=lambda line: None)
    whole = gls(whole_measurement(config, load_truth(config)), config.spec)
    return config, done, whole


def test_parts_equal_the_whole_at_every_level(runs):
    """Every level's total, hhgq and race-by-ethnicity-by-age estimates equal the whole GLS's
    (rtol 1e-8, atol 1e-6)."""
    config, done, whole = runs
    assert done.parts > 3
    for li, level in enumerate(done.levels):
        got = pd.read_parquet(done.directory / f"{level}.parquet")
        for name in ("total", "hhgq", "votingage * hispanic * cenrace"):
            q = config.workload[name]
            want = q.answer(whole.histograms[li]).astype(float)
            rows = got[got["query"] == name]
            assert len(rows) == want.size, (level, name)
            order = pd.Index(whole.geography.geocodes[li].astype(str))
            units = order.get_indexer(rows[level].astype(str))
            assert (units >= 0).all()
            estimate = np.empty(want.size)
            estimate[units * want.shape[1] + np.tile(np.arange(want.shape[1]),
                                                     want.shape[0])] = rows["estimate"]
            np.testing.assert_allclose(estimate.reshape(want.shape), want, rtol=1e-8,
                                       atol=1e-6, err_msg=f"{level} {name}")


def test_standard_errors_at_every_level_equal_the_whole(runs):
    """Every level's standard errors of the total, hhgq and race-by-ethnicity-by-age answers
    equal the whole GLS's — above the split from the top, below it from the parts' own
    covariances under their split units' (rtol 1e-7; atol 1e-5: an invariant total's standard
    error is 0 up to the square root of float rounding, about 1e-6 either way)."""
    _, done, whole = runs
    for level in done.levels:
        got = pd.read_parquet(done.directory / f"{level}.parquet")
        for name in ("total", "hhgq", "votingage * hispanic * cenrace"):
            rows = got[got["query"] == name]
            want = whole.intervals(level, name, interval=0.9)
            key = [level, "answer"]
            merged = rows.merge(want, on=key, suffixes=("", "_whole"), validate="1:1")
            assert len(merged) == len(want), (level, name)
            np.testing.assert_allclose(merged["se"], merged["se_whole"], rtol=1e-7, atol=1e-5,
                                       err_msg=f"{level} {name}")
            np.testing.assert_allclose(rows["upper"] - rows["lower"], 2 * 1.6448536269514722
                                       * rows["se"], rtol=1e-9, atol=1e-9, err_msg=level)
    for level in ("tract", "block_group"):     # not invariant there
        rows = pd.read_parquet(done.directory / f"{level}.parquet")
        assert rows.loc[rows["query"] == "total", "se"].min() > 0.1, level
    blocks = pd.read_parquet(done.directory / "block.parquet")     # but for empty blocks
    assert (blocks.loc[blocks["query"] == "total", "se"] > 0.1).mean() > 0.5


def test_a_top_cut_under_the_counties_equals_the_whole(runs, tmp_path, monkeypatch):
    """With the top cut under the county level in chunks of at most 7 tracts (``TOP_UNITS``;
    the nation has 80,841), every level's estimates and standard errors equal the whole
    GLS's (rtol 1e-8 / 1e-7)."""
    from postproc.apps.runs import parts_gls_top

    config, _, whole = runs
    monkeypatch.setattr(parts_gls_top, "TOP_UNITS", 7)
    done = gls_in_parts(config, tmp_path / "cut", part_blocks=30, queries=("total", "hhgq"),
                        log=lambda line: None)
    manifest = json.loads((done.directory / "manifest.json").read_text())
    assert manifest["structure"]["top_cut_under"] == "county"
    for li, level in enumerate(done.levels):
        got = pd.read_parquet(done.directory / f"{level}.parquet")
        for name in ("total", "hhgq"):
            want = config.workload[name].answer(whole.histograms[li]).astype(float)
            rows = got[got["query"] == name]
            np.testing.assert_allclose(rows["estimate"].to_numpy().reshape(want.shape), want,
                                       rtol=1e-8, atol=1e-6, err_msg=f"{level} {name}")
            np.testing.assert_allclose(
                rows["se"], whole.intervals(level, name)["se"], rtol=1e-7, atol=1e-5,
                err_msg=f"{level} {name}")


def test_the_parts_files_and_exact_counts_are_gone(runs):
    """Only the outputs remain: no parts directory, no exact counts under confidential/."""
    _, done, _ = runs
    assert not (done.directory / "parts").exists()
    assert not list((done.directory / "confidential").rglob("*.npz"))
    assert (done.directory / "manifest.json").is_file()


def test_an_unknown_query_is_refused_before_any_work(runs, tmp_path):
    config, _, _ = runs
    with pytest.raises(PostprocError, match="nonesuch"):
        gls_in_parts(config, tmp_path / "x", queries=("nonesuch",), log=lambda line: None)
    assert not (tmp_path / "x").exists()


def test_the_cli_runs_gls_in_parts(runs, tmp_path, capsys):
    """``postproc run CONFIG --parts N --method gls --queries …`` runs gls in parts and writes
    every level; flags it does not take are refused with the reason."""
    from postproc.cli import main

    config, _, _ = runs
    path = config.blocks.parent.parent / "cli.toml"     # beside the data its paths name
    path.write_text(config.to_toml())
    out = tmp_path / "cli"
    assert main(["run", str(path), "--parts", "30", "--method", "gls", "--queries",
                 "total,hhgq", "--out", str(out), "--no-progress"]) == 0
    assert "gls in" in capsys.readouterr().out
    block = pd.read_parquet(out / "block.parquet")
    assert sorted(block["query"].unique()) == ["hhgq", "total"]
    assert main(["run", str(path), "--parts", "30", "--method", "gls", "--resume",
                 "--out", str(tmp_path / "again")]) != 0
    assert "does not take --resume" in capsys.readouterr().err
    assert main(["run", str(path), "--method", "gls", "--queries", "total"]) != 0
    assert "add --parts" in capsys.readouterr().err
    assert main(["report", str(out)]) != 0             # a clear message, not a traceback
    assert "holds gls in parts estimates" in capsys.readouterr().err


@pytest.mark.parametrize("first", [[1, 0, 2, 0, 0, 0], [0] * 6])
@pytest.mark.parametrize("succinct", [True, False])
def test_a_part_whose_blocks_are_all_empty_equals_the_whole(first, succinct):
    """A part of two tracts whose blocks have no cell left but (or not even) the first (a
    block total held at 0 fixes every cell of a block): ``part_upward`` / ``part_downward``
    under the top give the whole tree's GLS and its variances (rtol 1e-8), on the succinct
    path and on the general one (a query of one race breaks the symmetry), the empty blocks
    exactly 0."""
    from postproc.methods.gls.method import gls_problems
    from postproc.methods.gls.parts import part_downward, part_upward, part_variances

    noisy, compiled, workload = empty_blocks_part(first, succinct)
    whole = gls_problems(noisy, compiled)
    assert (whole.symmetry is not None) == succinct
    whole_fits = whole.fit()
    want = whole.means(whole_fits)
    queries = [q.matrix for q in workload]
    state, below = part_upward(noisy, compiled, ["block"], 2, queries)
    top = gls_problems(noisy, compiled, levels=["nation", "tract"])
    fits = top.fit(below=below)
    for got, expected in zip(top.means(fits), want[:2]):
        np.testing.assert_allclose(got, expected, rtol=1e-8, atol=1e-9)
    _, answers = part_downward(state, [fit.below_steps for fit in fits], queries)
    for q, got in zip(workload, answers):
        np.testing.assert_allclose(got, q.answer(want[2]), rtol=1e-8, atol=1e-9, err_msg=q.name)
        assert (got[1:] == 0).all()
    variances = part_variances(state, [fit.step_precisions(1) for fit in fits], queries)
    uncertainty = whole.uncertainty(whole_fits)
    for q, got in zip(workload, variances[-1]):
        np.testing.assert_allclose(got, uncertainty.variances(2, q.matrix), rtol=1e-8,
                                   atol=1e-9, err_msg=q.name)
        assert (got[1:] == 0).all()
    assert (variances[-1][0][0].max() > 0.1) == any(first)    # the first block's cells vary


@pytest.mark.parametrize("variance", ["level", "unit", "answer"])
def test_bottom_weights_taken_by_group_are_the_measurements_weights(variance):
    """UnitWeights (the bottom level's weights without the units × answers array) gives the
    same numbers as Measurement.weights on any rows and answers, and the same answer to the
    symmetry check as the whole array — with one variance for the level, one per unit (an
    NMF's rows) and one per answer, drawn answers symmetric over the last attribute or not."""
    from hierarchy.noisy import Measurement
    from postproc.methods.gls.parts import UnitWeights, _take
    from postproc.methods.gls.symmetry import _equal_along_last

    rng = np.random.default_rng(7)
    units, groups, size = 9, 4, 3
    values = rng.integers(0, 5, (units, groups * size))
    variances = {"level": 2.5, "unit": rng.uniform(1, 3, (units, 1)),
                 "answer": np.repeat(rng.uniform(1, 3, (units, groups)), size, axis=1)}[variance]
    symmetric = np.repeat(rng.random((units, groups)) < 0.7, size, axis=1)
    lopsided = symmetric.copy()
    lopsided[4, 1] = not lopsided[4, 1]
    for drawn in (None, symmetric, lopsided):
        m = Measurement("q", values * (1 if drawn is None else drawn), variances, drawn=drawn)
        lazy = UnitWeights(m)
        rows, answers = np.array([0, 4, 8]), np.array([1, 2, 3, 10])
        taken = _take(lazy, values.shape, rows, answers)
        assert taken.tobytes() == np.asarray(m.weights)[np.ix_(rows, answers)].tobytes()
        assert taken.tobytes() == _take(m.weights, values.shape, rows, answers).tobytes()
        dense = _equal_along_last(m.weights, values.shape, groups, size)
        assert _equal_along_last(lazy, values.shape, groups, size) == dense
        assert dense == (drawn is not lopsided)
    per_race = Measurement("q", values, np.tile(np.arange(1.0, size + 1), groups)[None, :])
    assert not UnitWeights(per_race).equal_along_last(groups, size)
