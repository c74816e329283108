"""The release gate and the fault suite of ``postproc run`` (and ``evaluate``, ``report``).

Each test reproduces one finding of the release-safety review — a leak, a lost file, a
traceback, a silent misreading — on small synthetic data, and asserts the fixed behaviour.
The 20M-person variant of the kill/resume check is marked ``slow``.
"""

from __future__ import annotations

import errno
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from typing import Any, Mapping

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
from _configs import e2e_config, save_config

import postproc.apps.runs.pipeline as pipeline
import postproc.methods.topdown as engine
from hierarchy.errors import HierarchyError
from hierarchy.io.storage import (
    MARKER,
    atomic_directory,
    check_file_names,
    lock_directory,
    remove_leftovers,
)
from hierarchy.measurement import measure
from hierarchy.mechanisms import distributions
from hierarchy.mechanisms.distributions import (
    sample_gaussian,
    sample_laplace,
    sample_two_sided_geometric,
)
from hierarchy.randomness import Randomness
from hierarchy.synth import write_synthetic_1940
from invariants.spec import Constraint, Spec
from postproc.apps.runs.config import load_config
from postproc.apps.runs.pipeline import load_truth, run_pipeline
from postproc.cli import main
from postproc.errors import PostprocError

LEVELS = ("nation", "state", "county", "enum_dist")

def write_config(directory: Path, data: Path, *, seed: int | None = None,
                 mechanism: str = "geometric", kind: str = "pure",
                 solver: Mapping[str, Any] | None = None,
                 output: Mapping[str, Any] | None = None, spec: Any = "e2e",
                 name: str = "run.toml") -> Path:
    """The E2E configuration on ``data`` built in Python and saved in ``directory``: release
    mode unless seeded. ``mechanism``, ``kind``, ``solver`` and ``output`` are written as given,
    so a test can write what validation refuses."""
    config = e2e_config(data, seed=0 if seed is None else seed, spec=spec)
    randomness = {"mode": "release", "seed": None} if seed is None else {}
    return save_config(directory / name, config, mechanism={"name": mechanism},
                       budget={"kind": kind}, randomness=randomness, solver=solver or {},
                       output=output or {})


def quiet(_message: str) -> None:
    pass


def files_outside_confidential(directory: Path) -> list[Path]:
    return [p for p in directory.rglob("*")
            if p.is_file() and "confidential" not in p.relative_to(directory).parts]


def line_of(path: Path, text: str) -> str:
    """``line N`` of the first line of ``path`` that contains ``text``."""
    lines = path.read_text().splitlines()
    return f"line {next(i for i, ln in enumerate(lines, start=1) if text in ln)}"


def no_traceback(err: str) -> None:
    assert "Traceback" not in err, err


@pytest.fixture(scope="module")
def truth(data, tmp_path_factory):
    return load_truth(e2e_config(data, seed=1))


@pytest.fixture(scope="module")
def release_run(data, tmp_path_factory):
    """A release-mode run through the command line, with what it printed."""
    base = tmp_path_factory.mktemp("release")
    config = write_config(base, data)
    out = base / "run"
    import contextlib
    import io

    stdout, stderr = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
        code = main(["run", str(config), "--out", str(out), "--no-progress"])
    return out, code, stdout.getvalue(), stderr.getvalue()


# -- 1. the release gate -----------------------------------------------------------------------

def test_release_run_writes_and_prints_nothing_computed_from_the_confidential_data(
        release_run, data, truth):
    out, code, stdout, stderr = release_run
    assert code == 0, stderr
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["safe_for_release"] is True
    # no errors against the truth anywhere: not written, not printed
    assert not (out / "error_table.csv").exists() and not (out / "confidential" /
                                                           "error_table.csv").exists()
    assert "MAE" not in stdout and "exact_median" not in stdout + stderr
    # no input path in any release file (the manifest held absolute paths before)
    for path in files_outside_confidential(out):
        content = path.read_bytes()
        assert str(data).encode() not in content, path
        assert b"persons.parquet" not in content, path
    assert manifest["config"]["data"]["persons"] == "(withheld in release mode)"
    assert "resolved" not in manifest["config"]
    # the release files are listed; confidential/ is not among them
    listed = manifest["release"]["release_files"]
    assert "confidential/" not in listed and all(not f.startswith("confidential") for f in listed)
    # the exact ED-level counts of the confidential data appear in no release file as a column
    ed = pq.read_table(out / "enum_dist.parquet").to_pandas()
    exact_total = int(truth.counts[-1].sum())
    assert int(ed["count"].sum()) == exact_total  # the nation total is a published invariant


def test_release_run_keeps_the_data_fingerprint_only_under_confidential(release_run, truth):
    out = release_run[0]
    digest = pipeline.data_fingerprint(truth)["persons"]
    hits = [p for p in out.rglob("*") if p.is_file() and digest.encode() in p.read_bytes()]
    assert hits == [out / "confidential" / "data_fingerprint.json"]
    readme = (out / "confidential" / "README.txt").read_text()
    assert "DO NOT PUBLISH" in readme


def test_release_run_error_table_only_when_asked_and_only_under_confidential(data, tmp_path,
                                                                             capsys):
    config = write_config(tmp_path, data)
    out = tmp_path / "run"
    assert main(["run", str(config), "--out", str(out), "--no-progress", "--error-table"]) == 0
    stdout = capsys.readouterr().out
    table = pd.read_csv(out / "confidential" / "error_table.csv")
    assert set(table["level"]) == set(LEVELS)
    assert "MAE" not in stdout and "confidential/error_table.csv" in stdout
    for value in table["topdown_mean_abs"]:
        assert f"{value:,.2f}" not in stdout
    assert not [p for p in files_outside_confidential(out) if "error" in p.name]


def test_release_report_hides_errors_unless_asked_then_writes_them_under_confidential(
        data, tmp_path, capsys):
    config = write_config(tmp_path, data)
    out = tmp_path / "run"
    assert main(["run", str(config), "--out", str(out), "--no-progress", "--error-table"]) == 0
    assert main(["report", str(out)]) == 0
    page = (out / "report.html").read_text()
    assert "error_table.csv" not in page and "--confidential" in page
    assert main(["report", str(out), "--confidential"]) == 0
    secret = (out / "confidential" / "report.html").read_text()
    assert "error_table.csv" in secret and "CONFIDENTIAL" in secret
    capsys.readouterr()


def test_simulation_run_still_prints_its_error_table(data, tmp_path, capsys):
    config = write_config(tmp_path, data, seed=3)
    assert main(["run", str(config), "--out", str(tmp_path / "run"), "--no-progress"]) == 0
    assert "MAE TopDown" in capsys.readouterr().out
    manifest = json.loads((tmp_path / "run" / "manifest.json").read_text())
    assert manifest["safe_for_release"] is False


# -- 2. the data are checked against the spec before anything is measured ------------------------

NO_ADULTS = Spec(constraints=(Constraint("no_adults", "all", type="structural_zero",
                                          query="marginal(votingage)", answers=(1,)),))


def test_run_refuses_a_spec_the_data_contradict_without_printing_counts(data, truth, tmp_path,
                                                                        capsys):
    config = write_config(tmp_path, data, spec=NO_ADULTS)
    out = tmp_path / "run"
    assert main(["run", str(config), "--out", str(out), "--no-progress"]) == 1
    err = capsys.readouterr().err
    no_traceback(err)
    assert "no_adults" in err and "break the spec" in err
    # release mode: the constraint, never how many units break it or which (issue 35)
    n_ed = truth.geography.n_units("enum_dist")
    assert "units break it" not in err and "e.g. '" not in err
    assert not re.search(r"\d", err.replace(str(out), "DIR")), err
    details = (out / "confidential" / "validation.txt").read_text()
    assert f"of {n_ed:,} enum_dist units break it, e.g. '" in details
    adults = int(truth.counts[0].reshape(8, 2, 12)[:, 1].sum())
    assert f"{adults}" not in err and f"{adults:,}" not in err
    assert not (out / "noisy").exists()  # nothing measured


def test_validate_names_the_constraint_without_counts(data, truth, tmp_path, capsys):
    config = write_config(tmp_path, data, spec=NO_ADULTS)
    assert main(["validate", str(config)]) == 1
    err = capsys.readouterr().err
    assert "no_adults" in err and " = " not in err and "must be" not in err


# -- 4. exact integer noise in release mode -------------------------------------------------------

@pytest.mark.parametrize("mechanism,kind", [("laplace", "pure"), ("gaussian", "zcdp")])
def test_release_config_refuses_floating_point_mechanisms(data, tmp_path, capsys, mechanism,
                                                          kind):
    config = write_config(tmp_path, data, mechanism=mechanism, kind=kind)
    assert main(["validate", str(config)]) == 1
    err = capsys.readouterr().err
    assert line_of(config, f'name = "{mechanism}"') in err
    assert "Mironov" in err and "simulation" in err


def test_release_mode_refuses_float_noise_in_the_library(truth):
    from hierarchy.budget import Budget
    from hierarchy.queries import e2e_workload

    with pytest.raises(HierarchyError, match="refused in release mode"):
        measure(truth, e2e_workload(truth.schema), Budget.e2e(1, LEVELS), "laplace", None,
                accounted_elsewhere=True)
    # simulations may still use them
    assert sample_laplace(1.0, 3, 1).shape == sample_gaussian(1.0, 3, 1).shape == (3,)


def test_release_geometric_uses_the_exact_integer_sampler(monkeypatch, truth):
    calls = []
    real = distributions.sample_two_sided_geometric_inversion

    def spy(*args, **kwargs):
        calls.append(args[0])
        return real(*args, **kwargs)

    monkeypatch.setattr(distributions, "sample_two_sided_geometric_inversion", spy)
    x = sample_two_sided_geometric(0.5, 1000, Randomness.release())
    assert len(calls) == 1 and x.dtype == np.int64
    sample_two_sided_geometric(0.5, 1000, Randomness.simulation(1))
    assert len(calls) == 1  # simulations keep the fast inverse CDF
    from hierarchy.budget import Budget
    from hierarchy.queries import e2e_workload

    noisy = measure(truth, e2e_workload(truth.schema), Budget.e2e(1, LEVELS), "geometric", None,
                    accounted_elsewhere=True)
    assert noisy.provenance["sampler"] == "exact integer"


def test_exact_release_geometric_matches_its_pmf():
    """Chi-square goodness of fit of 200,000 release-mode draws (z = 0.5) against the pmf;
    threshold at the 1 - 1e-6 quantile, so a correct sampler fails once in a million runs."""
    from scipy import stats

    z = 0.5
    x = sample_two_sided_geometric(z, 200_000, Randomness.release())
    edges = np.arange(-12, 13)
    k = np.clip(x, -12, 12)
    observed = np.array([(k == e).sum() for e in edges])
    pmf = np.tanh(z / 2) * np.exp(-z * np.abs(edges.astype(float)))
    tail = np.exp(-z * 12) / (1 + np.exp(-z))   # P[X >= 12] = P[X <= -12]
    pmf[0], pmf[-1] = tail, tail
    chi2 = ((observed - pmf * x.size) ** 2 / (pmf * x.size)).sum()
    assert chi2 < stats.chi2.ppf(1 - 1e-6, edges.size - 1)


# -- 5. one run, one output ------------------------------------------------------------------------

@pytest.mark.timeout(120)     # a run that waited for the lock would hang
def test_a_second_run_into_a_locked_directory_fails_at_once(data, tmp_path):
    config = e2e_config(data, seed=2)
    out = tmp_path / "run"
    out.mkdir()
    (out / MARKER).write_text("{}")
    with lock_directory(out, what="test holder"):
        with pytest.raises(PostprocError, match="in use by test holder"):
            run_pipeline(config, out=out, resume=True, progress=False, log=quiet)
    assert not (out / "noisy").exists()  # the data were not measured a second time


@pytest.mark.timeout(120)
@pytest.mark.parametrize("resume", [False, True])
def test_a_run_into_a_directory_in_use_is_told_so(data, tmp_path, capsys, resume):
    """Issue 35: a second run (without --resume) into a directory another run is writing was
    told "already holds outputs; use --resume" — wrong advice while the first runs. It is told
    what docs/release.md documents: the directory is in use, by which process."""
    config = write_config(tmp_path, data, seed=2)
    out = tmp_path / "run"
    out.mkdir()
    (out / MARKER).write_text("{}")
    (out / "checkpoint.json").write_text("{}")             # the first run's outputs so far
    with lock_directory(out, what="postproc run"):
        before = sorted(p.name for p in out.iterdir())
        assert main(["run", str(config), "--out", str(out), "--no-progress"]
                    + (["--resume"] if resume else [])) == 1
    err = capsys.readouterr().err
    assert f"{out} is in use by postproc run (pid {os.getpid()}, since " in err, err
    assert "already holds outputs" not in err and "Traceback" not in err
    assert sorted(p.name for p in out.iterdir()) == before
    # once it is no longer in use, the advice is to resume
    assert main(["run", str(config), "--out", str(out), "--no-progress"]) == 1
    assert "already holds outputs; use --resume" in capsys.readouterr().err


def test_two_concurrent_cli_runs_one_fails_and_the_data_are_measured_once(data, tmp_path):
    config = write_config(tmp_path, data, seed=4)
    out = tmp_path / "run"
    cmd = [sys.executable, "-m", "postproc", "run", str(config), "--out", str(out),
           "--no-progress", "--resume"]
    procs = [subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(2)]
    results = [(p.wait(timeout=300), p.stderr.read()) for p in procs]
    codes = sorted(code for code, _ in results)
    if codes == [0, 0]:
        # not concurrent after all (the first finished before the second took the lock): the
        # second must then have reused the first's measurements, never measured again
        assert all("Traceback" not in err for _, err in results)
    else:
        assert codes == [0, 1], results
        assert any("in use by postproc run" in err for _, err in results)
    noisy_dirs = [p for p in out.iterdir() if p.name.startswith(".noisy") or p.name == "noisy"]
    assert [p.name for p in noisy_dirs] == ["noisy"]


def test_resume_removes_leftovers_of_an_interrupted_save(data, tmp_path, monkeypatch):
    config = e2e_config(data, seed=5)
    out = tmp_path / "run"
    real_save = pipeline.NoisyHierarchy.save

    def killed_during_save(self, directory, **kwargs):
        with atomic_directory(directory, made_by="test") as tmp:
            (tmp / "geography.parquet").write_bytes(b"half")
            raise KeyboardInterrupt  # as a kill -9 mid-save would leave it (no cleanup)

    monkeypatch.setattr(pipeline.NoisyHierarchy, "save", killed_during_save)
    with pytest.raises(KeyboardInterrupt):
        run_pipeline(config, out=out, progress=False, log=quiet)
    # atomic_directory cleans up on an exception; a kill -9 would not: recreate what it leaves
    leftover = out / ".noisy.abc123.tmp"
    leftover.mkdir()
    (leftover / "geography.parquet").write_bytes(b"half")
    (out / ".west.parquet.xyz.tmp").write_bytes(b"half")
    monkeypatch.setattr(pipeline.NoisyHierarchy, "save", real_save)
    messages: list[str] = []
    run_pipeline(config, out=out, resume=True, progress=False, log=messages.append)
    assert not leftover.exists() and not (out / ".west.parquet.xyz.tmp").exists()
    assert any("removed 2 leftover" in m for m in messages)
    assert (out / "noisy" / "metadata.json").is_file()


def test_resume_with_changed_data_is_refused(data, tmp_path, monkeypatch):
    copy = tmp_path / "data"
    shutil.copytree(data, copy)
    config = e2e_config(copy, seed=6)
    out = tmp_path / "run"
    real = engine.topdown

    def stop(*args, on_level, **kwargs):
        def after_first(li, hist, partial):
            on_level(li, hist, partial)
            raise KeyboardInterrupt
        return real(*args, on_level=after_first, **kwargs)

    monkeypatch.setattr(engine, "topdown", stop)
    with pytest.raises(KeyboardInterrupt):
        run_pipeline(config, out=out, progress=False, log=quiet)
    monkeypatch.setattr(engine, "topdown", real)
    # one person moves to another race: same shape, same geography, other data
    persons = pq.read_table(copy / "persons.parquet").to_pandas()
    persons.loc[0, "cenrace"] = (persons.loc[0, "cenrace"] + 1) % 6
    persons.to_parquet(copy / "persons.parquet")
    with pytest.raises(PostprocError, match="input data differ.*persons"):
        run_pipeline(config, out=out, resume=True, progress=False, log=quiet)


def test_evaluate_refuses_another_truth_with_the_same_geography(data, tmp_path, capsys):
    config = write_config(tmp_path, data, seed=8)
    out = tmp_path / "run"
    assert main(["run", str(config), "--out", str(out), "--no-progress"]) == 0
    other = tmp_path / "other"
    shutil.copytree(data, other)
    persons = pq.read_table(other / "persons.parquet").to_pandas()
    persons.loc[0, "votingage"] = 1 - persons.loc[0, "votingage"]
    persons.to_parquet(other / "persons.parquet")
    capsys.readouterr()
    assert main(["evaluate", str(out), "--truth", str(other), "--n-boot", "0"]) == 1
    err = capsys.readouterr().err
    assert "input data differ" in err
    assert main(["evaluate", str(out), "--truth", str(data), "--n-boot", "0"]) == 0


# -- 6. a remote scheduler only from the command line, with a warning -----------------------------

def test_scheduler_in_a_config_is_refused(data, tmp_path, capsys):
    config = write_config(tmp_path, data, solver={"scheduler": "tcp://10.0.0.1:8786"})
    assert main(["validate", str(config)]) == 1
    err = capsys.readouterr().err
    assert "--scheduler" in err and line_of(config, "scheduler =") in err


def test_scheduler_on_the_command_line_is_warned_about(data, tmp_path, capsys):
    import argparse

    from postproc.cli.run import _config

    config = write_config(tmp_path, data)
    args = argparse.Namespace(config=str(config), executor=None, workers=None,
                              scheduler="tcp://10.0.0.1:8786")
    resolved = _config(args)
    err = capsys.readouterr().err
    assert resolved.topdown.executor == "dask" and resolved.scheduler == "tcp://10.0.0.1:8786"
    assert "WARNING" in err and "leave this machine" in err and "10.0.0.1" in err


# -- 7, 8. never destroy what we did not write; no colliding names ---------------------------------

def test_atomic_directory_never_replaces_a_directory_it_did_not_write(tmp_path, monkeypatch):
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "thesis.tex").write_text("years of work")
    with pytest.raises(HierarchyError, match="not written by this toolkit"):
        with atomic_directory(mine, overwrite=True):
            pass
    assert (mine / "thesis.tex").read_text() == "years of work"
    monkeypatch.chdir(tmp_path)
    with atomic_directory(tmp_path / "ours", made_by="test") as tmp:
        (tmp / "x").write_text("1")
    (tmp_path / MARKER).write_text("{}")  # even a marked current directory is never replaced
    with pytest.raises(HierarchyError, match="current directory"):
        with atomic_directory(".", overwrite=True):
            pass
    assert (mine / "thesis.tex").exists()


def test_leftover_cleaning_touches_only_owned_directories(tmp_path):
    (tmp_path / ".notes.tmp").write_text("a user's file that looks like a leftover")
    assert remove_leftovers(tmp_path) == []
    assert (tmp_path / ".notes.tmp").exists()


def test_reserved_and_colliding_level_names_are_refused(data, tmp_path):
    with pytest.raises(HierarchyError, match="reserves"):
        check_file_names(["nation", "node_stats"], what="level", reserved=["node_stats"])
    with pytest.raises(HierarchyError, match="'a/b' and 'a_b'"):
        check_file_names(["a/b", "a_b"], what="level")
    with pytest.raises(HierarchyError, match="'State' and 'state'"):
        check_file_names(["State", "state"], what="level")
    config = e2e_config(data, seed=1)
    from dataclasses import replace

    bad = replace(config, levels=("nation", "state", "county", "node_stats"))
    with pytest.raises(PostprocError, match="node_stats.*reserves"):
        run_pipeline(bad, out=tmp_path / "run", progress=False, log=quiet)


def test_level_names_equal_after_unicode_normalisation_are_refused(data, tmp_path, capsys):
    """``Kreis-ä`` composed (NFC) and decomposed (NFD) are one name to a reader and one file on
    macOS (its file systems normalise) — refused like names equal up to case (issue 35), in the
    library and by ``postproc validate``, naming the line."""
    import unicodedata

    nfc, nfd = unicodedata.normalize("NFC", "Kreis-ä"), unicodedata.normalize("NFD", "Kreis-ä")
    assert nfc != nfd
    with pytest.raises(HierarchyError, match=r"'Kreis-\\xe4' and 'Kreis-a\\u0308' are one name "
                                             r"in two Unicode forms"):
        check_file_names(["nation", nfc, nfd], what="level")
    with pytest.raises(HierarchyError, match="one name in two Unicode forms"):
        check_file_names([nfd, nfc.upper()], what="level")          # and up to case
    check_file_names(["nation", nfc, "Gemeinde"], what="level")     # different names are fine
    # letters beyond ASCII stay letters: 'Kreis-ä' and 'Kreis-ö' are two files (both were
    # 'Kreis-_', refused as one)
    assert check_file_names(["Kreis-ä", "Kreis-ö"], what="level") == {"Kreis-ä": "Kreis-ä",
                                                                       "Kreis-ö": "Kreis-ö"}
    assert check_file_names([nfd], what="level") == {nfd: nfc}     # written composed
    for levels, fragment in (([nfc, nfd], "two Unicode forms"), (["County", "county"], "'County' "
                                                                 "and 'county'")):
        config = save_config(tmp_path / "levels.toml", e2e_config(data, seed=1),
                             geography={"levels": ["nation", "state", *levels]})
        assert main(["validate", str(config)]) == 1
        err = capsys.readouterr().err
        no_traceback(err)
        assert fragment in err and f"{config}, {line_of(config, 'levels')}: " in err, err


# -- 9. booleans are booleans, counts are counts -----------------------------------------------

@pytest.mark.parametrize("section,key,value", [
    ("solver", "failsafe", "false"),
    ("output", "microdata", "no"),
    ("output", "error_table", 1),
    ("solver", "workers", 0),
    ("solver", "workers", True),
])
def test_strict_booleans_and_counts_in_the_config(data, tmp_path, capsys, section, key, value):
    config = write_config(tmp_path, data, **{section: {key: value}})
    assert main(["validate", str(config)]) == 1
    err = capsys.readouterr().err
    assert key in err and "line " in err
    no_traceback(err)


def test_workers_zero_on_the_command_line_is_an_error(data, tmp_path, capsys):
    config = write_config(tmp_path, data)
    with pytest.raises(SystemExit) as exc:
        main(["run", str(config), "--workers", "0"])
    assert exc.value.code == 2
    assert "--workers: must be at least 1, not 0" in capsys.readouterr().err


def test_process_executor_refuses_zero_workers():
    from postproc.infra.executors import ProcessExecutor

    with pytest.raises(PostprocError, match="workers must be an integer ≥ 1, not 0"):
        ProcessExecutor(0)


# -- 11. I/O failures: one line, and --resume finishes the run ------------------------------------

def test_disk_full_is_one_line_and_resume_finishes_identically(data, tmp_path, capsys,
                                                               monkeypatch):
    config = write_config(tmp_path, data, seed=9)
    reference = tmp_path / "reference"
    assert main(["run", str(config), "--out", str(reference), "--no-progress"]) == 0
    out = tmp_path / "run"
    real = pipeline.write_parquet

    def full(table, path, **kwargs):
        if Path(path).name == "county.parquet":
            raise OSError(errno.ENOSPC, "No space left on device", str(path))
        return real(table, path, **kwargs)

    monkeypatch.setattr(pipeline, "write_parquet", full)
    capsys.readouterr()
    assert main(["run", str(config), "--out", str(out), "--no-progress"]) == 1
    err = capsys.readouterr().err
    no_traceback(err)
    assert err.count("\n") == 1
    assert "no space left on device" in err and "county.parquet" in err and "--resume" in err
    monkeypatch.setattr(pipeline, "write_parquet", real)
    assert main(["run", str(config), "--out", str(out), "--no-progress", "--resume"]) == 0
    for lv in LEVELS:
        assert (out / f"{lv}.parquet").read_bytes() == (reference / f"{lv}.parquet").read_bytes()


def test_out_under_a_file_is_a_clear_error(data, tmp_path, capsys):
    config = write_config(tmp_path, data)
    (tmp_path / "afile").write_text("mine")
    assert main(["run", str(config), "--out", str(tmp_path / "afile" / "run")]) == 1
    err = capsys.readouterr().err
    no_traceback(err)
    assert "a part of the path is a file" in err
    assert (tmp_path / "afile").read_text() == "mine"


def test_a_killed_worker_pool_is_one_line_with_the_resume_hint(data, tmp_path, capsys,
                                                                monkeypatch):
    config = write_config(tmp_path, data, seed=10)

    def broken(*args, **kwargs):
        raise BrokenProcessPool("A process in the process pool was terminated abruptly")

    monkeypatch.setattr(engine, "topdown", broken)
    assert main(["run", str(config), "--out", str(tmp_path / "run"), "--no-progress"]) == 1
    err = capsys.readouterr().err
    no_traceback(err)
    assert "a worker process died" in err and "--resume" in err


def test_a_corrupt_level_file_on_resume_is_recomputed(data, tmp_path, capsys):
    config = write_config(tmp_path, data, seed=12)
    out = tmp_path / "run"
    assert main(["run", str(config), "--out", str(out), "--no-progress"]) == 0
    good = {lv: (out / f"{lv}.parquet").read_bytes() for lv in LEVELS}
    (out / "state.parquet").write_bytes(b"PAR1 garbage")
    checkpoint = json.loads((out / "checkpoint.json").read_text())
    checkpoint.pop("finished")
    (out / "checkpoint.json").write_text(json.dumps(checkpoint))
    capsys.readouterr()
    assert main(["run", str(config), "--out", str(out), "--no-progress", "--resume"]) == 0
    assert {lv: (out / f"{lv}.parquet").read_bytes() for lv in LEVELS} == good


# -- the same kill/resume check at scale -----------------------------------------------------------

@pytest.mark.slow
def test_kill_9_at_20m_persons_then_resume_reproduces_the_run(tmp_path):
    data = tmp_path / "data"
    write_synthetic_1940(data, 20_000_000, seed=1, progress=False)
    config = write_config(tmp_path, data, seed=1, solver={"executor": "process", "workers": 2})
    reference = tmp_path / "reference"
    assert main(["run", str(config), "--out", str(reference), "--no-progress"]) == 0
    out = tmp_path / "run"
    cmd = [sys.executable, "-m", "postproc", "run", str(config), "--out", str(out),
           "--no-progress"]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    deadline = time.time() + 600
    while time.time() < deadline and not (out / "county.parquet").exists():
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    assert main(["run", str(config), "--out", str(out), "--no-progress", "--resume"]) == 0
    for lv in LEVELS:
        assert (out / f"{lv}.parquet").read_bytes() == (reference / f"{lv}.parquet").read_bytes()


@pytest.mark.timeout(20)
@pytest.mark.parametrize("command", ["run", "validate", "safetab"])
def test_a_fifo_or_directory_as_config_is_refused_without_hanging(tmp_path, capsys, command):
    fifo = tmp_path / "config.toml"
    os.mkfifo(fifo)
    assert main([command, str(fifo)]) == 1
    assert "not a regular file" in capsys.readouterr().err
    assert main([command, str(tmp_path)]) == 1
    assert "is a directory" in capsys.readouterr().err


def test_failsafe_keep_is_read_and_checked_from_the_config(data, tmp_path, capsys):
    config = write_config(tmp_path, data, solver={"failsafe_keep": ["va_hisp_race"]})
    assert load_config(config).topdown.failsafe_keep == ("va_hisp_race",)
    assert load_config(write_config(tmp_path, data, name="b.toml")).topdown.failsafe_keep == "auto"
    bad = write_config(tmp_path, data, solver={"failsafe_keep": ["no_such_query"]},
                       name="c.toml")
    assert main(["validate", str(bad)]) == 1
    err = capsys.readouterr().err
    assert "no_such_query" in err and line_of(bad, "failsafe_keep") in err


@pytest.mark.timeout(20)
def test_a_fifo_as_mis_table_or_safetab_persons_is_refused_without_hanging(tmp_path, capsys):
    fifo = tmp_path / "table.csv"
    os.mkfifo(fifo)
    assert main(["mis", "--table", str(fifo), "--invariant", "total", "--epsilon", "1"]) == 1
    assert "named pipe" in capsys.readouterr().err
    example = Path(__file__).resolve().parents[1] / "examples" / "safetab_1940.toml"
    text = example.read_text()
    import re

    config = tmp_path / "st.toml"
    data = re.sub(r"(?ms)^\[data\].*?(?=^\[)", f'[data]\npersons = "{fifo}"\n\n', text, count=1)
    config.write_text(data)
    assert main(["safetab", str(config), "--out", str(tmp_path / "st")]) == 1
    assert "named pipe" in capsys.readouterr().err


def test_two_runs_racing_to_create_a_directory_do_not_fail_on_each_others_marker(
        tmp_path, monkeypatch):
    """Two runs create one output directory at once. The first marks it, takes the lock and
    clears leftovers while the second is writing its own marker: the first may find the
    second's temporary file gone before it unlinks it, and the second its temporary file
    removed before it renames it. Neither is an error (the lock then refuses the second)."""
    from hierarchy.io import storage
    from hierarchy.io.storage import claim_directory, mark_owned, read_json

    out = claim_directory(tmp_path / "run", made_by="first run")
    ghost = out / f".{MARKER}.gone.tmp"      # listed, then renamed by the second run
    real_iterdir = Path.iterdir

    def listing_with_a_ghost(self):
        yield from real_iterdir(self)
        if self == out:
            yield ghost
    monkeypatch.setattr(Path, "iterdir", listing_with_a_ghost)
    assert remove_leftovers(out) == []
    monkeypatch.setattr(Path, "iterdir", real_iterdir)

    real_replace = os.replace
    second = tmp_path / "run2"
    second.mkdir()                            # made by the first run, not marked yet

    def cleared_before_the_rename(src, dst):
        monkeypatch.setattr(storage.os, "replace", real_replace)
        if Path(dst) == second / MARKER:      # meanwhile the first run marks the directory,
            mark_owned(second, "first run")   # locks it and removes leftovers
        os.unlink(src)
        monkeypatch.setattr(storage.os, "replace", cleared_before_the_rename)
        return real_replace(src, dst)
    monkeypatch.setattr(storage.os, "replace", cleared_before_the_rename)
    assert claim_directory(second, made_by="second run", reuse=True) == second
    assert read_json(second / MARKER)["made_by"] == "first run"
    # without a marker written by another run, the lost temporary file is an error as before
    with pytest.raises(FileNotFoundError):
        claim_directory(tmp_path / "other", made_by="third run")


def test_a_claim_is_not_refused_by_the_marker_another_run_is_writing(tmp_path):
    """Two runs create one output directory: the first has made it and is writing its
    ownership marker (atomic_path's temporary file is there, the marker not yet). The second
    must not take that for a user's file (it then reaches the lock, which refuses it)."""
    import tempfile

    from hierarchy.io.storage import MARKER, claim_directory

    out = tmp_path / "run"
    out.mkdir()
    fd, _ = tempfile.mkstemp(prefix=f".{MARKER}.", suffix=".tmp", dir=out)   # atomic_path's
    os.close(fd)
    assert claim_directory(out, made_by="second run", reuse=True) == out
    # beside a user's file the same temporary file does not make a directory ours
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    fd, _ = tempfile.mkstemp(prefix=f".{MARKER}.", suffix=".tmp", dir=theirs)
    os.close(fd)
    (theirs / "notes.txt").write_text("mine")
    with pytest.raises(HierarchyError, match="not written by this toolkit"):
        claim_directory(theirs, made_by="third run", reuse=True)
