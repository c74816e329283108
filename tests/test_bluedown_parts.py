"""``bluedown`` in parts (:func:`postproc.apps.runs.parts_gls.gls_in_parts` with
``method="bluedown"``) against BlueDown of the whole geography measured with the same keyed
streams (:func:`whole_measurement`): the same integer histograms at every level, with the top
whole and cut in chunks; and a part's subtree estimates and weights
(:func:`~postproc.methods.gls.parts.part_subtrees`) against the whole tree's."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
from _gls_toys import empty_blocks_part

from hierarchy.synth.census2020 import synthesize_2020
from invariants.spec import Spec
from postproc.apps.runs import parts_bluedown
from postproc.apps.runs.demo import demo_config
from postproc.apps.runs.parts import whole_measurement
from postproc.apps.runs.parts_gls import gls_in_parts
from postproc.apps.runs.pipeline import load_truth
from postproc.errors import PostprocError
from postproc.methods.gls.bluedown import bluedown
from postproc.result import Result


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Two small states (several counties, tracts and block groups each), the total held at
    the nation only; BlueDown in parts of at most 30 blocks, with the top whole and with it
    cut under the counties in chunks of one county each; BlueDown of the whole."""
    base = tmp_path_factory.mktemp("bluedown_parts")
    synthesize_2020(20_000, seed=3, states=["RI", "DE"], out=base / "data")
    config = demo_config(base, preset="pl94_2020", seed=5, executor="serial")
    spec = config.spec.to_dict()
    spec["invariant"] = [{"name": "tot", "levels": ["nation"]}] + spec["invariant"][1:]
    config = dataclasses.replace(config, spec=Spec.from_dict(spec))
    done = {"whole top": gls_in_parts(config, base / "out", part_blocks=30, method="bluedown",
                                      log=lambda line: None)}
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(parts_bluedown, "TOP_UNITS", 1)
        done["top in chunks"] = gls_in_parts(config, base / "cut", part_blocks=30,
                                             method="bluedown", log=lambda line: None)
    options = {k: v for k, v in config.topdown_options().as_dict().items()
               if k not in ("passes", "pass_tolerance")}
    whole = bluedown(whole_measurement(config, load_truth(config)), config.spec, **options)
    return config, done, whole


@pytest.mark.parametrize("top", ["whole top", "top in chunks"])
def test_parts_equal_the_whole_at_every_level(runs, top):
    """Every level's integer histograms equal BlueDown's of the whole geography, cell for
    cell (the node problems are the same: same subtree estimates, weights and constraints)."""
    config, done, whole = runs
    got = Result.read(done[top].directory)
    assert done[top].parts >= 4 and whole.geography.n_units("tract") >= 4
    manifest = json.loads((done[top].directory / "manifest.json").read_text())
    assert manifest["method"] == "bluedown"
    gls = manifest["provenance"]["bluedown"]["gls"]
    assert gls["structure"] == "split"
    assert ("top_cut_under" in gls) == (top == "top in chunks")
    for li, level in enumerate(whole.geography.levels):
        np.testing.assert_array_equal(got.histograms[li], whole.histograms[li],
                                      err_msg=f"{top}: {level}")


def test_the_result_is_integer_consistent_and_keeps_the_spec(runs):
    """Read back: integer, nonnegative, children summing to their parents, the nation total
    the published one; no parts files or exact counts left."""
    config, done, whole = runs
    got = Result.read(done["whole top"].directory)
    assert got.method == "bluedown" and got.integer
    for li in range(1, len(got.histograms)):
        child, parent = got.histograms[li], got.histograms[li - 1]
        assert (child >= 0).all()
        sums = np.zeros_like(parent)
        np.add.at(sums, got.geography.parents[li], child)
        np.testing.assert_array_equal(sums, parent)
    assert int(got.histograms[0].sum()) == 20_000
    directory = done["whole top"].directory
    assert not (directory / "parts").exists()
    assert not list((directory / "confidential").rglob("*.npz"))


def test_the_cli_runs_bluedown_in_parts(runs, tmp_path, capsys):
    """``postproc run CONFIG --parts N --method bluedown`` runs BlueDown in parts (the same
    histograms); ``--queries`` is refused with the reason."""
    from postproc.cli import main

    config, done, _ = runs
    path = config.blocks.parent.parent / "cli.toml"
    path.write_text(config.to_toml())
    out = tmp_path / "cli"
    assert main(["run", str(path), "--parts", "30", "--method", "bluedown", "--out", str(out),
                 "--no-progress"]) == 0
    assert "bluedown in" in capsys.readouterr().out
    want = Result.read(done["whole top"].directory)
    np.testing.assert_array_equal(Result.read(out).histograms[-1], want.histograms[-1])
    assert main(["run", str(path), "--parts", "30", "--method", "bluedown", "--queries",
                 "total", "--out", str(tmp_path / "q")]) != 0
    assert "does not take --queries" in capsys.readouterr().err


def test_an_unknown_method_in_parts_is_refused(runs, tmp_path):
    config, _, _ = runs
    with pytest.raises(PostprocError, match="'topdown' is not 'gls' or 'bluedown'"):
        gls_in_parts(config, tmp_path / "x", method="topdown", log=lambda line: None)
    assert not (tmp_path / "x").exists()


@pytest.mark.parametrize("first", [[1, 0, 2, 0, 0, 0], [0] * 6])
@pytest.mark.parametrize("succinct", [True, False])
def test_a_parts_subtree_estimates_and_weights_are_the_whole_trees(first, succinct):
    """A part of two tracts over four blocks, three of them with every cell fixed at 0 (and
    the first too, or not): ``part_subtrees`` gives the blocks' subtree estimates and weights
    the whole tree's GLS gives them (rtol 1e-8), on the succinct path and the general one —
    the fixed directions, whose covariance is 0, weighted as the whole tree weights them."""
    from postproc.methods.gls.bluedown import level_measurements
    from postproc.methods.gls.method import gls_problems
    from postproc.methods.gls.parts import part_subtrees, part_upward

    noisy, compiled, workload = empty_blocks_part(first, succinct)
    whole = gls_problems(noisy, compiled)
    assert (whole.symmetry is not None) == succinct
    want = level_measurements(whole.uncertainty(whole.fit(downward=False)), 2)
    state, _ = part_upward(noisy, compiled, ["block"], 2, [q.matrix for q in workload],
                           keep_means=True)
    [got] = part_subtrees(state)
    assert [name for name, _, _ in got] == [name for name, _, _ in want]
    units = slice(0, 4)
    for (name, matrix, m), (_, matrix_want, m_want) in zip(got, want):
        assert (matrix != matrix_want).nnz == 0, name
        np.testing.assert_allclose(m.values, m_want.values, rtol=1e-8, atol=1e-9,
                                   err_msg=name)
        w, w_want = m.weights_of(units), m_want.weights_of(units)
        np.testing.assert_allclose(w, w_want, rtol=1e-8, atol=1e-8 * np.abs(w_want).max(),
                                   err_msg=name)


def test_part_subtrees_needs_the_kept_estimates():
    from postproc.methods.gls.parts import _two_blocks, part_subtrees

    state, _ = _two_blocks()
    with pytest.raises(PostprocError, match="keep_means=True"):
        part_subtrees(state)


def test_postproc_evaluate_reads_a_run_in_parts(runs):
    """``evaluate_run`` on the parts' directory (no ``noisy/``: the files are read as a
    Result's) gives the whole BlueDown's errors against the truth."""
    from postproc.apps.runs.directories import evaluate_run
    from postproc.evaluation.evaluate import evaluate

    config, done, whole = runs
    options = {"queries": ["total", "hhgq"], "rng": 0, "epl_options": {"n_boot": 0}}
    with pytest.warns(UserWarning, match="part by part"):
        got = evaluate_run(done["whole top"].directory, config.persons.parent, **options)
    want = evaluate(whole, load_truth(config), spec=config.spec, **options)
    columns = ["level", "query", "n", "mae", "mean_abs", "rmse"]
    assert len(got) == 2 * len(whole.geography.levels)
    np.testing.assert_array_equal(got[columns].to_numpy(), want[columns].to_numpy())
