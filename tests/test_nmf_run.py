"""``postproc nmf run``: a Noisy Measurement File post-processed into a run directory that
``Result.read`` reads back, with each block's census GEOID, never into another program's
directory."""

from __future__ import annotations

import json

import numpy as np
import pyarrow.parquet as pq
import pytest

from hierarchy.synth.census2020 import synthesize_2020
from postproc.apps.nmf.reader import read_nmf
from postproc.apps.nmf.run import run_nmf
from postproc.apps.nmf.synthetic import write_synthetic_nmf
from postproc.cli import main
from postproc.errors import PostprocError
from postproc.methods import postprocess
from postproc.result import Result


@pytest.fixture(scope="module")
def nmf(tmp_path_factory):
    root = tmp_path_factory.mktemp("nmfrun")
    synthesize_2020(15_000, seed=5, states=["44"], out=root / "data", progress=False)
    write_synthetic_nmf(root / "data", root / "nmf", seed=4)
    return root


def test_the_cli_writes_what_the_library_computes(nmf, tmp_path, capsys):
    out = tmp_path / "run"
    totals = str(nmf / "nmf" / "state_totals.csv")
    assert main(["nmf", "run", str(nmf / "nmf"), "--out", str(out), "--state-totals", totals,
                 "--states", "44"]) == 0
    got = Result.read(out)
    noisy, spec = read_nmf(nmf / "nmf", states=["44"], state_totals=totals)
    from postproc.apps.nmf.run import production_options

    want = postprocess(noisy, "topdown", spec, **production_options(noisy.levels))
    for a, b in zip(got.histograms, want.histograms):
        assert np.array_equal(a, b)
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["nmf"]["pieces"] == ["044"] and manifest["method"] == "topdown"
    assert manifest["safe_for_release"] is False                # a synthetic file's noise
    assert "NOT SAFE FOR" in manifest["randomness"]["label"]
    geoids = pq.read_table(out / "block_geoid.parquet").to_pydict()
    assert len(geoids["block"]) == noisy.geography.n_units("block")
    assert all(len(g) == 15 and g.startswith("44") for g in geoids["geoid"])
    assert all(b[-16:][:11] + b[-16:][12:] == g for b, g in zip(geoids["block"], geoids["geoid"]))
    # again into its own output: replaced, not refused
    assert main(["nmf", "run", str(nmf / "nmf"), "--out", str(out), "--state-totals", totals,
                 "--states", "44", "--method", "gls"]) == 0
    assert Result.read(out).method == "gls"


def test_another_programs_directory_is_refused_before_anything_is_read(nmf, tmp_path):
    with pytest.raises(PostprocError, match="holds the output of postproc synth2020"):
        run_nmf(nmf / "nmf", nmf / "data", state_totals={"44": 1}, log=lambda _: None)
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep")
    with pytest.raises(PostprocError, match="not written by this toolkit"):
        run_nmf(nmf / "nmf", mine, state_totals={"44": 1}, log=lambda _: None)
    assert (mine / "notes.txt").read_text() == "keep"
    with pytest.raises(PostprocError, match="unknown method 'fancy'"):
        run_nmf(nmf / "nmf", tmp_path / "x", method="fancy", state_totals={"44": 1})
