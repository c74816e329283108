"""``postproc run`` with any registered post-processor: ``[postprocess] method`` and ``--method``.

A small configuration (3 levels, 5,000 persons) is run end to end with methods other than
TopDown; the outputs are checked against the same method applied to the saved measurements, for
layout, provenance, resume, the error table (integer and real-valued) and the release gate.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
from _configs import e2e_config, save_config

from hierarchy.io.storage import read_json, read_parquet_metadata, write_json
from hierarchy.noisy import NoisyHierarchy
from hierarchy.synth import write_synthetic_1940
from postproc.apps.runs.config import RUN_OPTIONS, load_config
from postproc.apps.runs.directories import load_run
from postproc.apps.runs.pipeline import load_truth, method_rng, run_pipeline
from postproc.cli import main
from postproc.errors import PostprocError
from postproc.evaluation.evaluate import evaluate
from postproc.methods import available, catalogue, postprocess
from postproc.result import Result

LEVELS = ("nation", "state", "county")


def run_config(data: Path, *, seed: int | None = 3, **options):
    """The E2E configuration on ``data`` at three levels (``seed=None``: release mode)."""
    return e2e_config(data, levels=LEVELS, seed=seed,
                      **({"mode": "release"} if seed is None else {}), **options)


def config_file(directory: Path, data: Path, name: str = "run.toml", *, sections=None,
                **options) -> Path:
    """:func:`run_config` saved as ``directory/name``; ``sections`` changes keys of the file."""
    return save_config(directory / name, run_config(data, **options), **(sections or {}))


def quiet(_message: str) -> None:
    pass


def snapshot(directory: Path) -> dict[str, bytes]:
    return {str(p.relative_to(directory)): p.read_bytes()
            for p in sorted(directory.rglob("*")) if p.is_file() and p.name != ".dapp-lock"}


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> Path:
    directory = tmp_path_factory.mktemp("data")
    write_synthetic_1940(directory, 5_000, seed=11)
    return directory


@pytest.fixture(scope="module")
def rake_run(data, tmp_path_factory):
    """``postproc run CONFIG --method rake`` through the command line."""
    folder = tmp_path_factory.mktemp("rake")
    config = config_file(folder, data)
    out = folder / "run"
    import contextlib
    import io

    stdout = io.StringIO()
    with contextlib.redirect_stdout(stdout):
        code = main(["run", str(config), "--method", "rake", "--out", str(out), "--no-progress"])
    assert code == 0
    return config, out, stdout.getvalue()


def test_run_method_writes_the_layout_and_names_the_method(rake_run):
    _, out, stdout = rake_run
    for level in LEVELS:
        assert (out / f"{level}.parquet").is_file(), level
        assert "NOT SAFE" in read_parquet_metadata(out / f"{level}.parquet")["randomness_label"]
    assert (out / "noisy" / "metadata.json").is_file()
    manifest = read_json(out / "manifest.json")
    assert manifest["method"] == "rake" and manifest["integer"] is False
    assert manifest["postprocess"]["method"] == "rake"
    assert manifest["postprocess"]["options"] == {}
    assert manifest["postprocess"]["constrained"] is False
    assert manifest["randomness"]["mode"] == "simulation"
    assert set(manifest["release"]["release_files"]) >= {f"{lv}.parquet" for lv in LEVELS}
    assert read_json(out / "checkpoint.json")["finished"] is True
    assert "post-processor: rake" in stdout and "MAE rake" in stdout
    assert f"outputs in {out}" in stdout


def test_a_run_read_back_knows_its_randomness(rake_run):
    """Result.read of a run directory carries the run's randomness label (a run's manifest
    states it at its top level), so a simulation run never reads back as 'unknown'."""
    from postproc.result import Result

    _, out, _ = rake_run
    result = Result.read(out)
    assert result.randomness["mode"] == "simulation"
    assert result.safe_for_release is False
    assert "simulation (unsafe for release)" in repr(result)


def test_run_method_result_is_the_method_on_the_saved_measurements(rake_run):
    _, out, _ = rake_run
    noisy = NoisyHierarchy.load(out / "noisy")
    expected = postprocess(noisy, "rake")
    written = Result.read(out)
    assert written.method == "rake" and not written.integer
    for li in range(len(LEVELS)):
        np.testing.assert_allclose(written.histograms[li], expected.histograms[li],
                                   rtol=0, atol=1e-9)
    # rake promises consistency and nonnegativity: the written levels keep them
    for li in range(1, len(LEVELS)):
        parents = noisy.geography.parents[li]
        sums = np.zeros_like(written.histograms[li - 1])
        np.add.at(sums, parents, written.histograms[li])
        np.testing.assert_allclose(sums, written.histograms[li - 1], atol=1e-6)
        assert (written.histograms[li] >= 0).all()


def test_error_table_of_a_real_valued_method_matches_evaluate(rake_run):
    config, out, _ = rake_run
    table = pd.read_csv(out / "confidential" / "error_table.csv")
    assert {"measured_mae", "rake_mae", "rake_mean_abs", "rake_rmse"} <= set(table.columns)
    run = load_run(out)
    assert run.estimate.method == "rake"
    truth = load_truth(load_config(config))
    evaluation = evaluate(run.estimate, truth, queries=["total", "va_hisp_race"], rng=0,
                          epl_options={"n_boot": 0}).set_index(["level", "query"])
    for _, row in table[table["query"].isin(["total", "va_hisp_race"])].iterrows():
        expected = evaluation.loc[(row["level"], row["query"])]
        assert row["rake_mae"] == pytest.approx(expected["mae"], rel=1e-9, abs=1e-9)
        assert row["rake_rmse"] == pytest.approx(expected["rmse"], rel=1e-9, abs=1e-9)


def test_configured_sampling_is_seeded_and_resumes(data, tmp_path):
    config = run_config(data, method="sampling", method_options={"sweeps": 5}, microdata=True)
    assert config.method == "sampling" and config.method_options == {"sweeps": 5}
    out = tmp_path / "run"
    done = run_pipeline(config, out=out, progress=False, log=quiet)
    result = done.result
    assert result.method == "sampling" and result.integer
    again = postprocess(done.noisy, "sampling", config.spec, rng=method_rng(3, "sampling"),
                        sweeps=5)
    for a, b in zip(result.histograms, again.histograms):
        np.testing.assert_array_equal(a, b)           # the seed's stream for this method
    manifest = read_json(out / "manifest.json")
    assert manifest["postprocess"]["options"] == {"sweeps": 5}
    assert manifest["postprocess"]["constrained"] is True
    assert manifest["postprocess"]["randomness"]["mode"] == "simulation"
    assert pq.read_table(out / "microdata.parquet").num_rows == int(result.histograms[0].sum())
    # a finished run is left as it is
    before = snapshot(out)
    messages: list[str] = []
    run_pipeline(config, out=out, resume=True, progress=False, log=messages.append)
    assert any("already finished" in m for m in messages)
    assert snapshot(out) == before
    # an interrupted one (measurements saved, no finished outputs) finishes identically
    (out / "county.parquet").unlink()
    (out / "manifest.json").unlink()
    write_json({"config": read_json(out / "checkpoint.json")["config"], "completed": []},
               out / "checkpoint.json")
    messages.clear()
    run_pipeline(config, out=out, resume=True, progress=False, log=messages.append)
    assert any("loaded measurements" in m for m in messages)
    assert (out / "county.parquet").read_bytes() == before["county.parquet"]


def test_resume_with_another_method_post_processes_the_saved_measurements(rake_run, tmp_path,
                                                                         capsys):
    """A method changed on resume runs on the measurements saved (the post-processing alone
    changed: tests/test_resume.py has the rules); resumed again unchanged, it is finished."""
    config, out, _ = rake_run
    copy = tmp_path / "run"
    import shutil

    shutil.copytree(out, copy)
    measured = {k: v for k, v in snapshot(copy).items() if k.startswith("noisy/")}
    assert main(["run", str(config), "--method", "hay", "--out", str(copy), "--resume",
                 "--no-progress"]) == 0
    assert "post-processing changed since the run was measured (method)" in \
        capsys.readouterr().out
    assert Result.read(copy).method == "hay"
    assert {k: v for k, v in snapshot(copy).items() if k.startswith("noisy/")} == measured
    expected = postprocess(NoisyHierarchy.load(copy / "noisy"), "hay")
    for got, want in zip(Result.read(copy).histograms, expected.histograms):
        np.testing.assert_array_equal(got, want)
    before = snapshot(copy)
    assert main(["run", str(config), "--method", "hay", "--out", str(copy), "--resume",
                 "--no-progress"]) == 0
    assert "already finished" in capsys.readouterr().out
    assert snapshot(copy) == before


def test_release_mode_error_table_only_on_request_and_under_confidential(data, tmp_path,
                                                                          capsys):
    config = config_file(tmp_path, data, seed=None)
    out = tmp_path / "plain"
    assert main(["run", str(config), "--method", "hay", "--out", str(out),
                 "--no-progress"]) == 0
    stdout = capsys.readouterr().out
    assert "post-processor: hay" in stdout and "MAE" not in stdout
    assert not (out / "confidential" / "error_table.csv").exists()
    assert read_json(out / "manifest.json")["safe_for_release"] is True
    asked = tmp_path / "asked"
    assert main(["run", str(config), "--method", "noisy", "--out", str(asked), "--error-table",
                 "--no-progress"]) == 0
    stdout = capsys.readouterr().out
    table = pd.read_csv(asked / "confidential" / "error_table.csv")
    assert "noisy_mae" in table.columns and "MAE" not in stdout
    assert not (asked / "error_table.csv").exists()


def test_the_measurements_and_the_noisy_method_are_named_apart(data, tmp_path):
    """The run's error table names each query's own measurement ``measured``; ``noisy`` is
    the post-processor of that name, the noisy detailed cells summed, with the very numbers
    ``compare`` gives its ``noisy`` rows (issue 35: both were called noisy, 21.5 against 26.5
    on one seed)."""
    from postproc.evaluation.compare import compare_methods

    out = run_pipeline(run_config(data, seed=3, method="noisy"), out=tmp_path / "run",
                       progress=False, log=quiet)
    table = out.error_table.set_index(["level", "query"])
    compared = compare_methods(out.noisy, out.truth, ["noisy"], rng=3,
                               queries=["total", "detailed", "va_hisp_race"],
                               epl_method="published").set_index(["level", "query"])
    for lv in LEVELS:
        for q in ("total", "detailed", "va_hisp_race"):
            assert table.loc[(lv, q), "noisy_mae"] == compared.loc[(lv, q), "mae"], (lv, q)
    # measured: the measurement of va_hisp_race itself, its 24 answers summed for the total
    for li, lv in enumerate(LEVELS):
        exact = out.truth.counts[li].sum(axis=1)
        vhr = out.noisy.get(lv, "va_hisp_race").values.sum(axis=1)
        detailed = out.noisy.get(lv, "detailed").values.sum(axis=1)
        assert table.loc[(lv, "total"), "measured"] == "sum of va_hisp_race"
        assert table.loc[(lv, "total"), "measured_mae"] == np.median(np.abs(vhr - exact))
        assert table.loc[(lv, "total"), "noisy_mae"] == np.median(np.abs(detailed - exact))
    assert not [c for c in table.columns if c.startswith("noisy_detailed")]
    topdown = run_pipeline(run_config(data, seed=3), out=tmp_path / "topdown", progress=False,
                           log=quiet).error_table
    assert not [c for c in topdown.columns if c.startswith("noisy")]
    assert {"measured", "measured_mae", "topdown_mae"} <= set(topdown.columns)


def test_unknown_method_or_option_is_a_clear_error(data, tmp_path, capsys):
    config = config_file(tmp_path, data)
    assert main(["run", str(config), "--method", "tpodown", "--out",
                 str(tmp_path / "x")]) == 1
    err = capsys.readouterr().err
    assert "unknown post-processor 'tpodown'" in err
    assert all(name in err for name in available())
    assert not (tmp_path / "x").exists()
    bad = config_file(tmp_path, data, "bad.toml", sections={"postprocess": {"method": "smapling"}})
    with pytest.raises(PostprocError, match=r"bad\.toml, line \d+: unknown method 'smapling'"):
        load_config(bad)
    bad = config_file(tmp_path, data, "bad2.toml",
                      sections={"postprocess": {"method": "hay", "options": {"sweeps": 3}}})
    with pytest.raises(PostprocError, match=r"hay takes no option\(s\) \['sweeps'\]"):
        load_config(bad)
    with pytest.raises(PostprocError, match=r"hay takes no option\(s\) \['sweeps'\]"):
        run_pipeline(replace(run_config(data), method="hay", method_options={"sweeps": 3}),
                     out=tmp_path / "api", progress=False, log=quiet)
    assert not (tmp_path / "api").exists()
    # microdata needs nonnegative integers: refused before anything is written
    config = run_config(data, method="hay", microdata=True)
    with pytest.raises(PostprocError, match="microdata"):
        run_pipeline(config, out=tmp_path / "micro", progress=False, log=quiet)
    assert not (tmp_path / "micro").exists()


def option_line(path: Path, option: str) -> str:
    """``FILE, line N`` of ``option = …`` (or of its table ``[….option]``) in a config."""
    lines = path.read_text().splitlines()
    number = next(i for i, line in enumerate(lines, start=1)
                  if line.strip().startswith(f"{option} =")
                  or line.strip().endswith(f".{option}]"))
    return f"{path}, line {number}"


@pytest.mark.parametrize("release", [False, True])
def test_a_wrongly_typed_option_is_refused_before_anything_is_measured(data, tmp_path, capsys,
                                                                       release):
    """Issue 35: ``sweeps = "200"`` passed validate; run measured the data, saved noisy/, then
    refused without a line. Now validate and run refuse it at its line, measuring nothing."""
    config = config_file(tmp_path, data, seed=None if release else 3, sections={
        "postprocess": {"method": "sampling", "options": {"sweeps": "200"}}})
    for argv in (["validate", str(config)], ["run", str(config), "--out", str(tmp_path / "run")]):
        assert main(argv) == 1
        err = capsys.readouterr().err
        assert f"{option_line(config, 'sweeps')}: sampling: option sweeps must be an " \
               "integer, not '200' (without the quotes: sweeps = 200)" in err, err
    assert not (tmp_path / "run").exists()


#: For each method, an option value no declared type of any option accepts.
WRONG = {"wrong": [1]}


@pytest.mark.parametrize("method, option", [
    (entry.name, option) for entry in catalogue() for option in entry.options()
    if option not in RUN_OPTIONS])
def test_every_option_of_every_method_is_type_checked_in_the_config(data, tmp_path, method,
                                                                    option):
    """Generic: each option a config may set has a declared type the config checks (a new
    option of a method is checked without config code; one left untyped fails here)."""
    config = config_file(tmp_path, data, sections={
        "postprocess": {"method": method, "options": {option: WRONG}}})
    with pytest.raises(PostprocError, match=rf"{method}: option {option} must be .*, not "
                                            rf"\{{'wrong': \[1\]\}}") as refused:
        load_config(config)
    assert str(refused.value).startswith(f"{config}, line ")


@pytest.mark.parametrize("method, options, fragment", [
    ("sampling", {"sweeps": -1}, "sweeps must be a non-negative integer"),
    ("sampling", {"retries": -2}, "retries must be a non-negative integer"),
    ("sampling", {"time_limit": -1.0}, "time_limit must be a number of seconds >= 0"),
    ("sampling", {"step_factor": 0}, "step_factor must be a number above 0"),
    ("sampling", {"queries": ["detailed", "race"]}, "queries must be 'detailed', 'all' or"),
    ("sampling", {"start": "l2"}, "option start must be one of 'topdown', 'l1'"),
    ("sampling", {"sweeps": 2.5}, "option sweeps must be an integer, not 2.5"),
    ("topdown", {"pass_tolerance": 0}, "pass_tolerance must be a finite number above 0"),
    ("topdown", {"group_children": {"tract": 8}}, "group_children names levels ['tract']"),
    ("topdown", {"batch_children": 0}, "batch_children must be a positive integer"),
])
def test_option_values_are_checked_in_the_config(data, tmp_path, method, options, fragment):
    config = config_file(tmp_path, data, sections={
        "postprocess": {"method": method, "options": options}})
    with pytest.raises(PostprocError) as refused:
        load_config(config)
    message = str(refused.value)
    assert fragment in message and message.startswith(
        f"{option_line(config, next(iter(options)))}: "), message


def test_a_registered_methods_typed_option_is_checked_with_no_config_code(data, tmp_path):
    from postproc.methods import register, unregister

    @register("scaled_noisy", summary="the noisy detailed cells times a factor")
    def scaled(noisy, spec=None, *, rng=None, factor: float = 1.0, label="x"):
        out = postprocess(noisy, "noisy")
        return replace(out, histograms=tuple(h * factor for h in out.histograms))

    try:
        for options, fragment in (({"factor": "2"}, "option factor must be a number, not '2'"),
                                  ({"label": 3}, "option label must be a string, not 3")):
            config = config_file(tmp_path, data, sections={
                "postprocess": {"method": "scaled_noisy", "options": options}})
            with pytest.raises(PostprocError, match=fragment):
                load_config(config)
        good = config_file(tmp_path, data, sections={
            "postprocess": {"method": "scaled_noisy", "options": {"factor": 2, "label": "y"}}})
        assert load_config(good).method_options == {"factor": 2, "label": "y"}
        noisy = NoisyHierarchy.load(rake_noisy(data, tmp_path))
        with pytest.raises(PostprocError, match="option factor must be a number"):
            postprocess(noisy, "scaled_noisy", factor=[2])       # and from Python
    finally:
        unregister("scaled_noisy")


def rake_noisy(data: Path, tmp_path: Path) -> Path:
    """Measurements of the small configuration, saved."""
    out = run_pipeline(run_config(data, method="noisy"), out=tmp_path / "noisy_run",
                       progress=False, log=quiet)
    return out.directory / "noisy"


def test_method_override_drops_the_other_methods_options(data, tmp_path, capsys):
    config = config_file(tmp_path, data, method="sampling", method_options={"sweeps": 5})
    out = tmp_path / "run"
    assert main(["run", str(config), "--method", "bottom_up", "--out", str(out),
                 "--no-progress"]) == 0
    captured = capsys.readouterr()
    assert "runs with its defaults" in captured.err
    manifest = read_json(out / "manifest.json")
    assert manifest["method"] == "bottom_up" and manifest["postprocess"]["options"] == {}


def test_a_run_shows_the_methods_own_progress(data, tmp_path, capfd):
    """postproc run passes its progress setting to a method that takes one (sampling's bars per
    level on stderr), and keeps it out of the recorded options."""
    config = run_config(data, method="sampling", method_options={"sweeps": 3})
    run_pipeline(config, out=tmp_path / "run", progress=True, log=quiet)
    err = capfd.readouterr().err
    assert "sampling county" in err and "sweep/s" in err
    assert read_json(tmp_path / "run" / "manifest.json")["postprocess"]["options"] == {
        "sweeps": 3}
