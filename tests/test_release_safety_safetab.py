"""Release safety of ``postproc safetab`` (:mod:`postproc.apps.safetab.run` and ``.config``).

Each test asserts the property a release depends on: nothing computed from the confidential data
outside ``DIR/confidential/`` or on the terminal in release mode; the user's files survive any
output directory; level names never share a file; a killed run's leftovers are cleaned and two
runs never write one directory at once; booleans and counts are what they say; release noise is
drawn by exact integer samplers. Small synthetic data (20,000 persons), a few seconds in all.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from hierarchy.io.storage import MARKER
from hierarchy.mechanisms import get_mechanism
from hierarchy.synth.detailed1940 import synthesize_detailed_1940
from postproc.apps.safetab import (
    Iteration,
    Level,
    SafeTabConfig,
    format_report,
    load_safetab_config,
    parse_safetab_config,
    run_safetab,
    safetab,
    write_safetab,
)
from postproc.cli import main
from postproc.errors import PostprocError

ROOT = Path(__file__).resolve().parents[1]

ITERATIONS = textwrap.dedent("""\
    [[iteration]]
    id = "0001"
    name = "Total"
    codes = "all"
    [[iteration]]
    id = "3000"
    name = "American Indian"
    codes = ["3000-3999"]
    """)
LEVEL = textwrap.dedent("""\
    [[level]]
    name = "state"
    stability = 2
    moe = 8
    """)
# Keys and words of the accuracy report: none may appear outside confidential/ in release mode.
REPORT_WORDS = ("within_moe", "expected_mae", "rmse", "choice_agreement", "stability_observed",
                "noise_sd", "Accuracy against the truth")


def config_text(*, mode: str = "release", data: str = "synthetic = { persons = 20000, seed = 1 }",
                output: str = "", mechanism: str = "", levels: str = LEVEL) -> str:
    randomness = 'mode = "release"' if mode == "release" else 'mode = "simulation"\nseed = 5'
    return (f"[data]\n{data}\n[randomness]\n{randomness}\n"
            f"[adaptive]\nthresholds = [100, 1000, 10000]\n"
            + (f"[mechanism]\n{mechanism}\n" if mechanism else "")
            + (f"[output]\n{output}\n" if output else "") + ITERATIONS + levels)


def write(folder: Path, text: str, name: str = "config.toml") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(text, encoding="utf-8")
    return path


def line_of(text: str, needle: str, occurrence: int = 1) -> int:
    lines = [n for n, line in enumerate(text.splitlines(), start=1) if needle in line]
    return lines[occurrence - 1]


@pytest.fixture(scope="module")
def persons():
    return synthesize_detailed_1940(20_000, seed=1).persons


def files_outside_confidential(directory: Path) -> list[Path]:
    return [p for p in directory.rglob("*")
            if p.is_file() and "confidential" not in p.relative_to(directory).parts]


# ---------------------------------------------------------------------------------------------
# 1. the release gate
# ---------------------------------------------------------------------------------------------
def test_release_run_keeps_the_accuracy_report_and_input_paths_out_of_the_release(
        tmp_path, persons, capsys):
    data = tmp_path / "private_project"
    data.mkdir()
    pq.write_table(persons, data / "secret_persons.parquet")
    path = write(data, config_text(data='persons = "secret_persons.parquet"',
                                   output='directory = "../release"\naccuracy_report = true'),
                 "secret_config.toml")
    out = tmp_path / "release"
    assert main(["safetab", str(path)]) == 0
    stdout = capsys.readouterr().out

    report_file = out / "confidential" / "accuracy_report.json"
    report = json.loads(report_file.read_text())
    assert report["confidential"] is True and "overall" in report
    assert "CONFIDENTIAL" in (out / "confidential" / "README.txt").read_text()
    assert not (out / "accuracy_report.json").exists()
    # nothing computed from the truth, and no input path, in any release file
    for file in files_outside_confidential(out):
        content = file.read_bytes()
        for word in REPORT_WORDS + ("secret_persons", "secret_config", "private_project",
                                    str(tmp_path)):
            assert word.encode() not in content, (file, word)
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["randomness"]["safe_for_release"] is True
    assert "records" not in manifest                            # an exact confidential count
    listed = manifest["release"]["release_files"]
    assert sorted(listed) == sorted(p.relative_to(out).as_posix()
                                    for p in files_outside_confidential(out) if p.name != MARKER)
    assert "confidential/" in manifest["release"]["not_for_release"]
    assert "resolved" not in manifest["config"]
    # nor on the terminal: not the report, not the record count; only where the report is
    for line in format_report(report).splitlines():
        if any(c.isdigit() for c in line):
            assert line not in stdout
    assert "Accuracy against the truth" not in stdout and "stability declared" not in stdout
    assert "20,000" not in stdout
    assert str(report_file) in stdout and "CONFIDENTIAL" in stdout


def test_release_stability_error_quotes_no_record(tmp_path, persons, capsys):
    text = config_text(levels=LEVEL.replace("stability = 2", "stability = 1"))
    path = write(tmp_path, text)
    assert main(["safetab", str(path), "--out", str(tmp_path / "o")]) == 1
    err = capsys.readouterr().err
    assert f"{path}, line {line_of(text, 'stability = 1')}: " in err
    assert "declares stability = 1, but a record of the data belongs to more" in err
    assert "race codes" not in err and "belongs to 2" not in err   # simulation mode shows them
    with pytest.raises(PostprocError, match="record .* belongs to 2 of its groups"):
        safetab(persons, load_safetab_config(path), rng=3)


def test_release_json_output_holds_no_report(tmp_path, capsys):
    path = write(tmp_path, config_text(output="accuracy_report = true"))
    assert main(["safetab", str(path), "--out", str(tmp_path / "o"), "--json"]) == 0
    printed = capsys.readouterr().out
    out = json.loads(printed)
    assert out["accuracy"] is None
    assert out["accuracy_report"] == str(tmp_path / "o" / "confidential" / "accuracy_report.json")
    assert not any(word in printed for word in REPORT_WORDS)


def test_simulation_report_is_under_confidential_too_and_labelled_unsafe(tmp_path, persons):
    config = parse_safetab_config(config_text(mode="simulation"))
    run = run_safetab(config, out=tmp_path / "sim", persons=persons)
    assert run.report_path == tmp_path / "sim" / "confidential" / "accuracy_report.json"
    assert run.report_path.is_file()
    assert run.manifest["randomness"]["safe_for_release"] is False
    assert run.manifest["records"] == 20_000                 # simulation: kept
    for file in files_outside_confidential(tmp_path / "sim"):
        assert b"within_moe" not in file.read_bytes()


def test_release_manifest_withholds_paths_when_written_directly(tmp_path, persons):
    config = parse_safetab_config(config_text(output='directory = "/home/alice/census"'))
    manifest = write_safetab(safetab(persons, config), tmp_path / "w")
    text = (tmp_path / "w" / "manifest.json").read_text()
    assert "alice" not in text and manifest["config"]["output"]["directory"].startswith("(with")


# ---------------------------------------------------------------------------------------------
# 2. the user's files survive any output directory
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("marked", [False, True], ids=["plain", "previous-output"])
def test_output_dot_never_deletes_the_config_folder(tmp_path, monkeypatch, capsys, marked):
    folder = tmp_path / "work"
    config = write(folder, config_text(mode="simulation",
                                       output='directory = "."\noverwrite = true'))
    (folder / "notes.txt").write_text("mine")
    if marked:                                    # the folder was once an output of ours
        (folder / MARKER).write_text("{}")
    monkeypatch.chdir(folder)
    assert main(["safetab", "config.toml"]) == 1
    err = capsys.readouterr().err
    assert "config.toml" in err and "choose" in err
    assert config.read_text().startswith("[data]") and (folder / "notes.txt").read_text() == "mine"


def test_output_dot_into_an_empty_current_directory_is_refused(tmp_path, monkeypatch, capsys):
    config = write(tmp_path / "configs", config_text(mode="simulation"))
    here = tmp_path / "empty"
    here.mkdir()
    monkeypatch.chdir(here)
    assert main(["safetab", str(config), "--out", "."]) == 1
    assert "current directory" in capsys.readouterr().err
    assert here.is_dir() and not any(here.iterdir())
    assert sorted(p.name for p in tmp_path.iterdir()) == ["configs", "empty"]   # no lock left


def test_output_holding_the_config_is_refused_from_any_directory(tmp_path, monkeypatch, persons):
    folder = tmp_path / "old_output"                  # carries our marker: replaceable
    config_path = write(folder, config_text(mode="simulation",
                                            output='directory = "."\noverwrite = true'))
    (folder / MARKER).write_text("{}")
    monkeypatch.chdir(tmp_path)                       # not the current directory
    with pytest.raises(PostprocError, match="holds the configuration file config.toml"):
        run_safetab(load_safetab_config(config_path), persons=persons)
    assert config_path.is_file()


# ---------------------------------------------------------------------------------------------
# 3. level names never share a file
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("first, second, message", [
    ("a/b", "a_b", "'a/b' and 'a_b' would both be written as 'a_b'"),
    ("State", "state", "'State' and 'state' would both be written as 'state'"),
    ("x", "CON", "'CON' would be written as 'CON', which the toolkit reserves"),
])
def test_colliding_level_names_are_a_config_error(tmp_path, first, second, message):
    levels = (f'[[level]]\nname = "{first}"\ngeography = "state"\nstability = 2\nmoe = 8\n'
              f'[[level]]\nname = "{second}"\ngeography = "state"\nstability = 2\nmoe = 8\n')
    text = config_text(levels=levels)
    path = write(tmp_path, text)
    with pytest.raises(PostprocError) as info:
        load_safetab_config(path)
    second_line = line_of(text, f'name = "{second}"')
    assert str(info.value).startswith(f"{path}, line {second_line}: ")
    assert message in str(info.value)
    level = lambda name: Level(name, "state", ("1",), 1, "1", None, (1, 2, 3))  # noqa: E731
    with pytest.raises(PostprocError, match="would"):
        SafeTabConfig((Iteration("1", "T", "all"),), (level(first), level(second)),
                      synthetic=(100, 1))


# ---------------------------------------------------------------------------------------------
# 4. a killed run's leftovers; two runs into one directory
# ---------------------------------------------------------------------------------------------
def test_leftovers_of_a_killed_run_are_removed_by_the_next_run(tmp_path):
    path = write(tmp_path, config_text(mode="simulation"))
    out = tmp_path / "st_out"
    # a real kill -9 while the manifest is being written
    script = textwrap.dedent(f"""
        import os, signal
        import postproc.apps.safetab.run as run
        from postproc.apps.safetab import load_safetab_config
        run.write_json = lambda *args, **kwargs: os.kill(os.getpid(), signal.SIGKILL)
        run.run_safetab(load_safetab_config({str(path)!r}), out={str(out)!r})
        """)
    killed = subprocess.run([sys.executable, "-c", script], cwd=ROOT)
    assert killed.returncode == -signal.SIGKILL
    leftovers = sorted(p.name for p in tmp_path.glob(".st_out.*.tmp"))
    assert len(leftovers) == 1 and (tmp_path / leftovers[0] / MARKER).is_file()
    assert not out.exists()
    # not ours to remove: another output's temporary directory, and one without the marker
    other = tmp_path / ".st_out.v2.abcd1234.tmp"
    unmarked = tmp_path / ".st_out.abcd1234.tmp"
    for folder in (other, unmarked):
        folder.mkdir()
        (folder / "keep.txt").write_text("x")
    (other / MARKER).write_text("{}")
    run_safetab(load_safetab_config(path), out=out)
    assert (out / "manifest.json").is_file()
    assert sorted(p.name for p in tmp_path.glob(".st_out.*.tmp")) == sorted(
        [other.name, unmarked.name])


def test_a_second_run_into_the_same_directory_fails_at_once(tmp_path, monkeypatch):
    from postproc.apps.safetab.run import _output_lock

    config = parse_safetab_config(config_text(mode="simulation"))
    out = tmp_path / "busy"

    def must_not_read(_config):
        raise AssertionError("the data were read although the output is locked")

    monkeypatch.setattr("postproc.apps.safetab.run.load_persons", must_not_read)
    with _output_lock(out):                           # what a running first run holds
        with pytest.raises(PostprocError, match=f"another run is writing {out}.*in use by"):
            run_safetab(config, out=out)
    assert not out.exists()


# ---------------------------------------------------------------------------------------------
# 5. booleans are booleans, counts are counts, numbers are finite
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("section, replacement, key, message", [
    ("output", 'overwrite = "false"', "overwrite", "overwrite must be true or false"),
    ("output", 'accuracy_report = "no"', "accuracy_report", "accuracy_report must be true"),
    ("output", "accuracy_report = 1", "accuracy_report", "accuracy_report must be true"),
    ("data", "synthetic = { persons = 0, seed = 1 }", "synthetic", "persons >= 1"),
    ("data", "synthetic = { persons = 20000, seed = -1 }", "synthetic", "seed >= 0"),
    ("data", "synthetic = { persons = 2e4, seed = 1 }", "synthetic", "persons = <int>"),
    ("accounting", "delta = nan", "delta", "delta must be a number in (0, 1)"),
    ("accounting", "delta = true", "delta", "delta must be a number in (0, 1)"),
    ("mechanism", 'name = "geometric"\nexact = "no"', "exact", "'exact' must be a bool"),
    ("mechanism", "max_denominator = 1e6", "max_denominator", "must be a positive int"),
    ("level", "stability = 2.0", "stability", "stability must be a positive integer"),
    ("level", "moe = 8.0", "moe", "moe must be an integer >= 1"),
    ("level", "budget = inf", "budget", "finite number"),
    ("level", 'budget = "nan"', "budget", "finite number"),
    ("adaptive", "gamma = nan", "gamma", "finite number"),
    ("adaptive", "thresholds = [1, 2, inf]", "thresholds", "theta1 < theta2 < theta3"),
])
def test_wrongly_typed_values_are_config_errors_naming_file_line_and_key(
        tmp_path, section, replacement, key, message):
    text = config_text()
    if section == "level":
        old = "stability = 2" if key == "stability" else "moe = 8"
        text = text.replace(old, replacement)
    elif section == "data":
        text = text.replace("synthetic = { persons = 20000, seed = 1 }", replacement)
    elif section == "adaptive":
        text = text.replace("thresholds = [100, 1000, 10000]", replacement)
    else:
        text = f"[{section}]\n{replacement}\n" + text
    path = write(tmp_path, text)
    with pytest.raises(PostprocError) as info:
        load_safetab_config(path)
    needle = f"{key} =" if key != "synthetic" else "synthetic ="
    assert str(info.value).startswith(f"{path}, line {line_of(text, needle)}: "), str(info.value)
    assert message in str(info.value)


@pytest.mark.parametrize("options, message", [
    (dict(overwrite="false"), "overwrite must be true or false"),
    (dict(accuracy_report="no"), "accuracy_report must be true or false"),
    (dict(delta=float("nan")), "delta must be a number"),
    (dict(synthetic=(0, 1)), "persons >= 1"),
])
def test_config_object_checks_its_types(options, message):
    levels = (Level("state", "state", ("1",), 1, "1", None, (1, 2, 3)),)
    kwargs = {"synthetic": (100, 1), **options}
    with pytest.raises(PostprocError, match=message):
        SafeTabConfig((Iteration("1", "T", "all"),), levels, **kwargs)


def test_overwrite_argument_must_be_a_bool(tmp_path, persons):
    config = parse_safetab_config(config_text(mode="simulation"))
    run_safetab(config, out=tmp_path / "o", persons=persons)
    with pytest.raises(PostprocError, match="overwrite must be True or False, not 'false'"):
        run_safetab(config, out=tmp_path / "o", persons=persons, overwrite="false")
    assert (tmp_path / "o" / "manifest.json").is_file()


# ---------------------------------------------------------------------------------------------
# 6. release noise is exact integer noise
# ---------------------------------------------------------------------------------------------
def test_release_mode_samples_the_geometric_mechanism_exactly(tmp_path, persons):
    config = parse_safetab_config(config_text(mechanism='name = "geometric"'))
    assert config.mechanism == get_mechanism("geometric", exact=True)
    run = run_safetab(config, out=tmp_path / "g", persons=persons)
    assert all(noise.mechanism.exact for plan in run.result.plans.values()
               for noise in plan.noise.values())
    assert run.manifest["mechanism"]["exact"] is True
    # simulation keeps the (faster) inverse CDF unless asked
    sim = parse_safetab_config(config_text(mode="simulation", mechanism='name = "geometric"'))
    assert sim.mechanism.exact is False


def test_release_mode_refuses_floating_point_noise(tmp_path):
    text = config_text(mechanism='name = "geometric"\nexact = false')
    path = write(tmp_path, text)
    with pytest.raises(PostprocError) as info:
        load_safetab_config(path)
    assert str(info.value).startswith(f"{path}, line {line_of(text, 'exact = false')}: ")
    assert "release mode needs exact integer noise" in str(info.value)
    levels = (Level("state", "state", ("1",), 1, "1", None, (1, 2, 3)),)
    for mechanism in (get_mechanism("geometric"), get_mechanism("laplace")):
        with pytest.raises(PostprocError, match="exact integer noise|must be 'geometric'"):
            SafeTabConfig((Iteration("1", "T", "all"),), levels, mechanism=mechanism,
                          synthetic=(100, 1))
