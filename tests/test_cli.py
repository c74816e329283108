"""The ``postproc`` command line: demo, synth1940, run, validate, help and user errors.

Commands are called through ``postproc.cli.main`` (exit code returned, output captured); one test
runs the installed entry points in a subprocess.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

from hierarchy.noisy import NoisyHierarchy
from hierarchy.synth import write_synthetic_1940
from postproc.apps.runs.config import load_config
from postproc.apps.runs.pipeline import load_truth
from postproc.cli import build_parser, main
from postproc.result import histograms_from_table

LEVELS = ("nation", "state", "county", "enum_dist")
CORE_COMMANDS = ("demo", "synth1940", "run", "validate")

CONFIG = """\
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
total = 1.0
preset = "e2e"

[mechanism]
name = "geometric"

[randomness]
mode = "simulation"
seed = 3

[spec]
preset = "e2e"

[output]
directory = "out"
"""


def no_traceback(err: str) -> None:
    assert "Traceback" not in err, err


def discovered_commands() -> list[str]:
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return list(sub.choices)


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Path:
    """A directory with synthetic data and a config (paths relative to it)."""
    directory = tmp_path_factory.mktemp("project")
    write_synthetic_1940(directory / "data", 20_000, seed=3)
    (directory / "run.toml").write_text(CONFIG)
    return directory


@pytest.fixture(scope="module")
def demo_dir(tmp_path_factory):
    """One demo run: (directory, exit code, stdout, stderr)."""
    import contextlib
    import io

    directory = tmp_path_factory.mktemp("demo") / "demo"
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["demo", "--persons", "20000", "--seed", "4", "--out", str(directory),
                     "--no-progress"])
    return directory, code, out.getvalue(), err.getvalue()


# -- help ----------------------------------------------------------------------------------------

def test_help_lists_every_discovered_command(capsys):
    names = discovered_commands()
    assert set(CORE_COMMANDS) <= set(names)
    assert names[:2] == ["demo", "synth1940"]  # by ORDER: the demo first
    with pytest.raises(SystemExit) as info:
        main(["--help"])
    assert info.value.code == 0
    out = capsys.readouterr().out
    for name in names:
        assert f"    {name}" in out, name


def test_no_command_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as info:
        main([])
    assert info.value.code == 2
    assert "COMMAND" in capsys.readouterr().err


def test_python_dash_m_and_console_script(project):
    done = subprocess.run([sys.executable, "-m", "postproc", "--help"], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    for name in CORE_COMMANDS:
        assert name in done.stdout
    script = shutil.which("postproc", path=str(Path(sys.executable).parent))
    assert script, "the console script `postproc` is not installed next to the interpreter"
    done = subprocess.run([script, "validate", str(project / "missing.toml")],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 1
    assert "missing.toml does not exist" in done.stderr
    no_traceback(done.stderr)


# -- demo ----------------------------------------------------------------------------------------

def test_demo_prints_the_error_table_and_writes_outputs(demo_dir):
    directory, code, out, err = demo_dir
    assert code == 0, err
    no_traceback(err)
    assert "MAE measured" in out and "MAE TopDown" in out
    table_lines = [ln.split() for ln in out.splitlines()
                   if ln.split()[:1] and ln.split()[0] in LEVELS]
    # total and every query of the workload (the E2E workload: detailed, hhgq, va_hisp_race)
    assert {(row[0], row[1]) for row in table_lines} == {
        (lv, q) for lv in LEVELS for q in ("total", "detailed", "hhgq", "va_hisp_race")}
    assert f"postproc run {directory}/config.toml" in out
    run = directory / "run"
    for name in [f"{lv}.parquet" for lv in LEVELS] + ["manifest.json",
                                                      "confidential/error_table.csv",
                                                      "node_stats.parquet"]:
        assert (run / name).is_file(), name
    for name in ("data/persons.parquet", "data/units.parquet", "config.toml", ".postproc-demo"):
        assert (directory / name).is_file(), name
    config = load_config(directory / "config.toml")  # the config it writes is valid and used
    assert config.seed == 4 and config.output == (directory / "run").resolve()
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["safe_for_release"] is False


def test_demo_error_table_matches_the_outputs(demo_dir):
    """Recompute the table's MAE (median absolute error) from the files the demo wrote."""
    directory, *_ = demo_dir
    run = directory / "run"
    table = pd.read_csv(run / "confidential" / "error_table.csv")
    truth = load_truth(load_config(directory / "config.toml"))
    noisy = NoisyHierarchy.load(run / "noisy")
    for li, lv in enumerate(LEVELS):
        hist = histograms_from_table(pq.read_table(run / f"{lv}.parquet"), truth.schema,
                                     noisy.geography, lv)
        exact_total = truth.totals(lv)
        row = table[(table["level"] == lv) & (table["query"] == "total")].iloc[0]
        assert row["topdown_mae"] == np.median(np.abs(hist.sum(axis=1) - exact_total))
        # the noisy total: the measured query whose summed variance is smallest, summed
        best = min(noisy.queries(lv), key=lambda q: noisy.get(lv, q).variances[0].sum())
        noisy_total = noisy.get(lv, best).values.sum(axis=1)
        assert row["measured_mae"] == pytest.approx(np.median(np.abs(noisy_total - exact_total)))
        q = noisy.workload["va_hisp_race"]
        row = table[(table["level"] == lv) & (table["query"] == "va_hisp_race")].iloc[0]
        exact = q.answer(truth.level_counts(lv))
        assert row["topdown_mae"] == np.median(np.abs(q.answer(hist) - exact))
        assert row["measured_mae"] == pytest.approx(
            np.median(np.abs(noisy.get(lv, "va_hisp_race").values - exact)))
    tot = table[(table["query"] == "total") & table["level"].isin(["nation", "state"])]
    assert (tot["topdown_mae"] == 0).all() and (tot["topdown_rmse"] == 0).all()


def test_demo_replaces_its_own_previous_demo(tmp_path, capsys):
    directory = tmp_path / "demo"
    assert main(["demo", "--persons", "20000", "--seed", "1", "--out", str(directory),
                 "--no-progress"]) == 0
    (directory / "run" / "stale.txt").write_text("from the first demo")
    assert main(["demo", "--persons", "20000", "--seed", "2", "--epsilon", "2", "--out",
                 str(directory), "--no-progress"]) == 0
    assert not (directory / "run" / "stale.txt").exists()
    config = load_config(directory / "config.toml")
    assert config.seed == 2 and float(config.budget.total) == 2
    assert json.loads((directory / "run" / "manifest.json").read_text())[
        "randomness"]["seed"] == 2
    no_traceback(capsys.readouterr().err)


def test_demo_refuses_a_directory_it_did_not_make(tmp_path, capsys):
    (tmp_path / "thesis.tex").write_text("precious")
    assert main(["demo", "--persons", "20000", "--out", str(tmp_path), "--no-progress"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("postproc demo: error: ")
    assert "was not made by `postproc demo`" in err
    no_traceback(err)
    assert [p.name for p in tmp_path.iterdir()] == ["thesis.tex"]
    assert (tmp_path / "thesis.tex").read_text() == "precious"


def test_demo_refuses_a_file(tmp_path, capsys):
    target = tmp_path / "taken"
    target.write_text("precious")
    assert main(["demo", "--persons", "20000", "--out", str(target), "--no-progress"]) == 1
    err = capsys.readouterr().err
    assert "not a directory" in err
    no_traceback(err)
    assert target.read_text() == "precious"


# -- synth1940 -----------------------------------------------------------------------------------

def test_synth1940_writes_persons_and_units(tmp_path, capsys):
    out = tmp_path / "synth"
    assert main(["synth1940", "--persons", "20000", "--seed", "9", "--out", str(out),
                 "--no-progress"]) == 0
    stdout = capsys.readouterr().out
    assert "persons.parquet" in stdout and "units.parquet" in stdout
    assert "20,000 persons" in stdout
    persons = pq.read_table(out / "persons.parquet")
    units = pq.read_table(out / "units.parquet")
    assert persons.num_rows == 20_000
    assert persons.column_names == ["state", "county", "enum_dist", "hhgq", "votingage",
                                    "hispanic", "cenrace"]
    assert units.column_names == ["state", "county", "enum_dist", "hhgq"]
    again = tmp_path / "again"
    assert main(["synth1940", "--persons", "20000", "--seed", "9", "--out", str(again),
                 "--no-progress"]) == 0
    assert pq.read_table(again / "persons.parquet").equals(persons)
    assert pq.read_table(again / "units.parquet").equals(units)


def test_synth1940_composition(tmp_path, capsys):
    """``--composition`` reaches the files: the named composition in their metadata, the same
    persons' places as the default's, other groups."""
    import json

    for name in ("default", "counties_1940"):
        assert main(["synth1940", "--persons", "20000", "--seed", "9", "--composition", name,
                     "--out", str(tmp_path / name), "--no-progress"]) == 0
    default, mixed = (pq.read_table(tmp_path / n / "persons.parquet")
                      for n in ("default", "counties_1940"))
    made = json.loads(mixed.schema.metadata[b"dapp"])
    assert made["composition"] == "counties_1940"
    assert "composition" not in json.loads(default.schema.metadata[b"dapp"])
    assert mixed.column("hhgq").equals(default.column("hhgq"))


@pytest.mark.parametrize("args,message", [
    (["--persons", "10", "--seed", "1"], "persons must be at least 49"),
    (["--persons", "100", "--seed", "-1"], "seed must be a non-negative integer"),
    (["--persons", "100", "--seed", "1", "--composition", "urban"],
     "unknown composition 'urban': use one of default, counties_1940"),
])
def test_synth1940_bad_arguments_exit_1(tmp_path, capsys, args, message):
    assert main(["synth1940", *args, "--out", str(tmp_path / "x"), "--no-progress"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("postproc synth1940: error: ") and message in err
    no_traceback(err)


# -- run and validate ----------------------------------------------------------------------------

def test_validate_happy_path(project, capsys):
    assert main(["validate", str(project / "run.toml")]) == 0
    out = capsys.readouterr().out
    assert "20,000 persons" in out and "configuration valid" in out


def test_run_writes_outputs_resumes_and_refuses_to_overwrite(project, tmp_path, capsys):
    out = tmp_path / "run"
    config = str(project / "run.toml")
    assert main(["run", config, "--out", str(out), "--no-progress"]) == 0
    stdout = capsys.readouterr().out
    assert "MAE TopDown" in stdout and f"outputs in {out}" in stdout
    for lv in LEVELS:
        assert (out / f"{lv}.parquet").is_file()
    assert (out / "confidential" / "error_table.csv").is_file()
    assert (out / "manifest.json").is_file() and not (out / "error_table.csv").exists()
    levels_before = {lv: (out / f"{lv}.parquet").read_bytes() for lv in LEVELS}

    assert main(["run", config, "--out", str(out), "--no-progress"]) == 1
    err = capsys.readouterr().err
    assert "already holds outputs; use --resume" in err
    no_traceback(err)

    assert main(["run", config, "--out", str(out), "--resume", "--no-progress"]) == 0
    assert "already finished" in capsys.readouterr().out
    assert {lv: (out / f"{lv}.parquet").read_bytes() for lv in LEVELS} == levels_before


def test_run_uses_the_config_output_directory(project, tmp_path, capsys):
    shutil.copytree(project / "data", tmp_path / "data")
    (tmp_path / "run.toml").write_text(CONFIG)
    assert main(["run", str(tmp_path / "run.toml"), "--executor", "serial",
                 "--no-progress"]) == 0
    assert (tmp_path / "out" / "enum_dist.parquet").is_file()
    capsys.readouterr()


@pytest.mark.parametrize("command", ["run", "validate"])
def test_missing_config_exits_1_naming_it(command, tmp_path, capsys):
    missing = tmp_path / "nowhere.toml"
    assert main([command, str(missing)]) == 1
    err = capsys.readouterr().err
    assert err == f"postproc {command}: error: config file {missing} does not exist\n"


def test_config_that_is_a_directory_exits_1(tmp_path, capsys):
    assert main(["validate", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert f"config file {tmp_path}" in err
    no_traceback(err)


def test_config_error_exits_1_with_file_and_line(project, tmp_path, capsys):
    bad = tmp_path / "bad.toml"
    bad.write_text(CONFIG.replace('[budget]\n', '[budget]\nepsilon = 1\n'))
    assert main(["validate", str(bad)]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"postproc validate: error: {bad}, line 15: unknown key 'epsilon'")
    no_traceback(err)


def test_data_errors_exit_1_without_traceback(project, tmp_path, capsys):
    # persons that do not exist (relative to the config, not the cwd)
    (tmp_path / "run.toml").write_text(CONFIG)
    assert main(["validate", str(tmp_path / "run.toml")]) == 1
    err = capsys.readouterr().err
    assert f"{tmp_path / 'data' / 'persons.parquet'} does not exist" in err
    no_traceback(err)
    # a spec the confidential data violates
    violated = CONFIG.replace('[spec]\npreset = "e2e"',
                              '[[spec.constraint]]\nname = "tiny"\ntype = "linear"\n'
                              'query = "total"\nsense = "<="\nrhs = 1\nlevels = ["enum_dist"]')
    (project / "violated.toml").write_text(violated)
    assert main(["validate", str(project / "violated.toml")]) == 1
    err = capsys.readouterr().err
    assert "break the spec" in err and "tiny" in err
    no_traceback(err)


def test_interrupt_exits_130(project, tmp_path, capsys, monkeypatch):
    import postproc.apps.runs.pipeline

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(postproc.apps.runs.pipeline, "run_pipeline", interrupted)
    assert main(["run", str(project / "run.toml"), "--out", str(tmp_path / "o")]) == 130
    assert capsys.readouterr().err == ("postproc run: interrupted; the outputs written so far are "
                                       "complete files — rerun the same command with --resume "
                                       "to finish the run\n")


def test_bugs_are_not_disguised_as_user_errors(project, monkeypatch):
    import postproc.apps.runs.pipeline

    def broken(*args, **kwargs):
        raise ZeroDivisionError("a bug")

    monkeypatch.setattr(postproc.apps.runs.pipeline, "validate_config", broken)
    with pytest.raises(ZeroDivisionError):
        main(["validate", str(project / "run.toml")])


def test_error_table_is_written_atomically(project, tmp_path, capsys, monkeypatch):
    """A failure while writing error_table.csv leaves no partial file behind, and the user gets
    one line saying what failed and that --resume finishes the run."""
    def failing_to_csv(self, path, *args, **kwargs):
        Path(path).write_text("level,query\nnation,")
        raise OSError("disk full")

    monkeypatch.setattr(pd.DataFrame, "to_csv", failing_to_csv)
    out = tmp_path / "run"
    assert main(["run", str(project / "run.toml"), "--out", str(out), "--no-progress"]) == 1
    err = capsys.readouterr().err
    assert "disk full" in err and "--resume" in err
    no_traceback(err)
    conf = out / "confidential"
    assert not (conf / "error_table.csv").exists() and not (out / "error_table.csv").exists()
    assert not [p.name for p in list(out.iterdir()) + list(conf.iterdir())
                if p.name.endswith(".tmp")]


def test_cli_lists_the_library_s_experiments_and_samplers():
    # the parser is built without importing these packages; the names it offers must still be
    # the library's own
    from postproc.apps.experiments import EXPERIMENTS
    from postproc.cli.experiment import experiment_names
    from postproc.methods.sampling.target import MIN_STEPS
    assert experiment_names() == sorted(EXPERIMENTS)
    mis = build_parser()._subparsers._group_actions[0].choices["mis"]
    burn_in = next(a for a in mis._actions if a.dest == "burn_in")
    assert f"at least {MIN_STEPS} " in burn_in.help


def test_toolkit_errors_exit_1_with_their_message(capsys, monkeypatch):
    # the CLI maps the one base exception, whichever package raised it
    import postproc.cli.synth as synth
    from hierarchy.errors import DappError
    from invariants.errors import SpecError
    for error in (SpecError("invariant 'tot': fix it"), DappError("something: fix it")):
        def fail(args, error=error):
            raise error
        monkeypatch.setattr(synth, "run", fail)
        code = main(["synth1940", "--persons", "10", "--seed", "1", "--out", "x"])
        assert code == 1
        assert capsys.readouterr().err.strip() == f"postproc synth1940: error: {error}"


def test_every_help_text_reads_cleanly():
    """Every command's --help: no doubled percent signs (argparse formats help strings but not
    descriptions, so '%%' written in a description shows as is) and no raw reST."""
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    assert len(sub.choices) >= 14
    for name, command in sub.choices.items():
        text = command.format_help()
        assert "%%" not in text, name
        assert "``" not in text and ":func:" not in text, name


def test_a_closed_pipe_ends_a_command_quietly(monkeypatch, capsys):
    """``postproc … | head``: the reader goes away; the command stops with 128 + SIGPIPE and
    no error message (an OSError otherwise prints one)."""
    import signal

    import postproc.cli as cli

    def closed(args):
        raise BrokenPipeError(32, "Broken pipe")

    parser = cli.build_parser
    monkeypatch.setattr(cli, "build_parser", lambda: _with_func(parser(), closed))
    stdout = sys.stdout
    try:
        assert cli.main(["methods"]) == 128 + signal.SIGPIPE
    finally:
        sys.stdout = stdout
    assert capsys.readouterr().err == ""


def _with_func(parser, func):
    """``parser`` whose every command runs ``func``."""
    parse = parser.parse_args

    def parse_args(argv=None):
        args = parse(argv)
        args.func = func
        return args

    parser.parse_args = parse_args
    return parser
