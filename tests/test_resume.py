"""Resuming ``postproc run``: a resumed run's manifest is the uninterrupted run's, and a resume
reuses the measurements whatever the post-processing now is — never measuring twice.

1. Per-level provenance. After ``kill -9``, SIGINT or SIGTERM of a real ``postproc run``
   process (paused after a level's checkpoint, so the signal lands where it is meant to), after
   a tampered level file, and on a finished run, ``--resume`` gives the level files, ``noisy/``
   and ``manifest.json`` of an uninterrupted run — the failsafe's kept queries and reports of
   every level included (issue 35: they listed only the levels solved after the resume) — except
   timings and the records of the resume itself. In release mode the reference is the same
   measurements solved in one session.
2. Changes on resume. A change that touches only the post-processing (method, options, solver,
   spec constraints, output choices) is accepted: the saved measurements are reused, the
   manifest records the old and new settings. A change that touches the measurement (budget,
   seed, mechanism, workload, levels, the invariants published) is refused, naming it, and the
   directory is left as it was.

Both in simulation and in release mode. The E2E spec without upward implication makes the
failsafe relax a state (its report must survive a resume below it).
"""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from _configs import e2e_config, save_config

import postproc.apps.runs.pipeline as pipeline
from hierarchy.io.storage import read_json
from invariants.spec import Spec
from postproc.cli import main

LEVELS = ("nation", "state", "county", "enum_dist")
#: Seed and ε of the simulation runs: the failsafe relaxes a state there (checked below).
SEED, EPSILON = 2, 0.5
#: Manifest entries that differ between any two runs (seconds) or that record the resume.
UNCOMPARED = {"seconds", "fit_seconds", "round_seconds", "timings", "pipeline_timings",
              "created", "resumed_levels", "postprocess_changes"}

#: ``postproc run`` that pauses for a minute after checkpointing level ``argv[1]`` (-1: after
#: measuring, before the first level), for a test to send it a signal there.
PAUSED = """
import signal, sys, time
import postproc.methods.topdown as engine
from postproc.cli import main

# Ctrl-C as an interactive shell gives it: a process started in the background of a
# non-interactive shell inherits SIGINT ignored (and Python then leaves it ignored), which made
# this test fail under `(bash .ci/run &)` — the run ignored the signal and finished.
signal.signal(signal.SIGINT, signal.default_int_handler)
signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT, signal.SIGTERM})

after, real = int(sys.argv[1]), engine.topdown


def topdown(*args, on_level, **kwargs):
    def pause(li, hist, partial):
        on_level(li, hist, partial)
        if li == after:
            time.sleep(60)
    if after < 0:
        time.sleep(60)
    return real(*args, on_level=pause, **kwargs)


engine.topdown = topdown
sys.exit(main(sys.argv[2:]))
"""


def spec() -> Spec:
    return replace(Spec.e2e(LEVELS), imply_upward=False)


def config_file(directory: Path, data: Path, *, release: bool = False, name: str = "run.toml",
                **sections: Any) -> Path:
    """The E2E run on ``data`` (ε = 0.5, no upward implication), saved as ``directory/name``;
    ``sections`` change keys of the file (:func:`save_config`)."""
    config = e2e_config(data, budget=EPSILON, spec=spec(),
                        **({"mode": "release"} if release else {"seed": SEED}))
    return save_config(directory / name, config, **sections)


def run(config: Path, out: Path, *extra: str) -> None:
    assert main(["run", str(config), "--out", str(out), "--no-progress", *extra]) == 0


def comparable(manifest: Any) -> Any:
    """``manifest`` without timings and resume records."""
    if isinstance(manifest, dict):
        return {k: comparable(v) for k, v in manifest.items() if k not in UNCOMPARED}
    if isinstance(manifest, list):
        return [comparable(v) for v in manifest]
    return manifest


def files(directory: Path, pattern: str = "*") -> dict[str, bytes]:
    """The files under ``directory`` matching ``pattern``, relative path → bytes."""
    return {str(p.relative_to(directory)): p.read_bytes()
            for p in sorted(directory.rglob(pattern)) if p.is_file()}


def snapshot(directory: Path) -> dict[str, bytes]:
    return {k: v for k, v in files(directory).items() if not k.endswith(".dapp-lock")}


def assert_resumed_like(out: Path, reference: Path, *, measured_spec: bool = True) -> None:
    """Level files, measurements, node statistics and manifest as ``reference``'s.
    ``measured_spec=False``: the measurements' record of the spec they were checked against
    (``spec_checked``) may differ — the resume changed the spec after measuring."""
    for lv in LEVELS:
        assert (out / f"{lv}.parquet").read_bytes() == \
            (reference / f"{lv}.parquet").read_bytes(), lv
    assert files(out / "noisy", "*.parquet") == files(reference / "noisy", "*.parquet")
    metadata = [comparable(read_json(d / "noisy" / "metadata.json")) for d in (out, reference)]
    if not measured_spec:
        for m in metadata:
            m["provenance"].pop("spec_checked")
    assert metadata[0] == metadata[1]
    manifest, expected = read_json(out / "manifest.json"), read_json(reference / "manifest.json")
    if not measured_spec:
        for m in (manifest, expected):
            m["provenance"]["noisy"].pop("spec_checked")
    solver = manifest["provenance"]["solver"]
    assert list(solver["failsafe_keep"]) == list(LEVELS[1:])
    assert comparable(manifest) == comparable(expected)
    assert set(manifest["provenance"]["timings"]["levels"]) == set(LEVELS)
    assert read_json(out / "checkpoint.json")["finished"] is True


def interrupt(config: Path, out: Path, after: int, how: signal.Signals, *extra: str
              ) -> tuple[int, str]:
    """Start ``postproc run`` (with ``extra`` arguments) in a process of its own, wait until it
    has checkpointed level ``after`` (or measured, for -1), send it ``how``; its exit code and
    stderr."""
    proc = subprocess.Popen([sys.executable, "-c", PAUSED, str(after), "run", str(config),
                             "--out", str(out), "--no-progress", *extra],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            cwd=Path(__file__).resolve().parents[1])
    masks = _signal_masks(proc.pid)      # what the child inherited (an old flake: exit 0)
    want = list(LEVELS[:after + 1])
    deadline = time.monotonic() + 300
    try:
        while time.monotonic() < deadline:
            checkpoint = out / "checkpoint.json"
            if checkpoint.exists() and (out / "noisy" / "metadata.json").exists() \
                    and read_json(checkpoint).get("completed") == want:
                break
            assert proc.poll() is None, proc.stderr.read()
            time.sleep(0.05)
        else:
            pytest.fail(f"the run did not checkpoint {want} in time")
        time.sleep(0.3)                              # well inside the pause
        masks += "; before the signal: " + _signal_masks(proc.pid)
        proc.send_signal(how)
        code = proc.wait(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return code, proc.stderr.read() + f"\n[child's signal masks at start: {masks}]"


def _signal_masks(pid: int) -> str:
    """The ignored, blocked and caught signal masks of a process (Linux), for a failure's
    message: a child that ignored or blocked SIGINT would exit 0 where the test expects 130."""
    try:
        with open(f"/proc/{pid}/status") as fh:
            return ", ".join(line.strip() for line in fh
                             if line.startswith(("SigIgn", "SigBlk", "SigCgt")))
    except OSError as exc:
        return f"unreadable ({exc})"


@pytest.fixture(scope="module")
def reference(data, tmp_path_factory) -> tuple[Path, Path]:
    """The uninterrupted simulation run: its config and its directory."""
    folder = tmp_path_factory.mktemp("reference")
    config = config_file(folder, data)
    run(config, folder / "run")
    manifest = read_json(folder / "run" / "manifest.json")
    # what the comparisons rely on: a failsafe report at the state level, kept queries below
    assert [r["level"] for r in manifest["provenance"]["failsafe_reports"]] == ["state"]
    assert list(manifest["provenance"]["solver"]["failsafe_keep"]) == list(LEVELS[1:])
    return config, folder / "run"


# -- 1. per-level provenance survives an interruption ----------------------------------------

@pytest.mark.timeout(600)
@pytest.mark.parametrize("how, after, code, said", [
    (signal.SIGKILL, 1, -9, None),
    (signal.SIGINT, 2, 130, "interrupted"),
    (signal.SIGTERM, 1, 143, "terminated (SIGTERM)"),
    (signal.SIGKILL, 3, -9, None),                 # after the last level, before the manifest
])
def test_a_run_killed_then_resumed_has_the_uninterrupted_manifest(reference, tmp_path, how,
                                                                  after, code, said):
    config, ref = reference
    out = tmp_path / "run"
    got, err = interrupt(config, out, after, how)
    assert got == code, err
    if said is not None:              # a signal that lets the run speak says how to finish
        assert f"postproc run: {said}" in err and "--resume" in err and "Traceback" not in err
    assert not (out / "manifest.json").exists()
    run(config, out, "--resume")
    assert_resumed_like(out, ref)
    assert read_json(out / "manifest.json")["resumed_levels"] == list(LEVELS[:after + 1])


def test_a_tampered_level_file_is_solved_again_with_its_provenance(reference, tmp_path, capsys):
    config, ref = reference
    out = tmp_path / "run"
    shutil.copytree(ref, out)
    (out / "county.parquet").write_bytes(b"PAR1 tampered")
    checkpoint = read_json(out / "checkpoint.json")
    checkpoint.pop("finished")
    (out / "checkpoint.json").write_text(json.dumps(checkpoint))
    (out / "manifest.json").unlink()
    run(config, out, "--resume")
    assert "county.parquet cannot be read" in capsys.readouterr().out
    assert_resumed_like(out, ref)


def test_resuming_a_finished_run_keeps_its_manifest(reference, tmp_path):
    config, ref = reference
    out = tmp_path / "run"
    shutil.copytree(ref, out)
    run(config, out, "--resume")
    assert_resumed_like(out, ref)


def test_a_checkpoint_without_a_levels_provenance_solves_that_level_again(reference, tmp_path,
                                                                          capsys):
    """A checkpoint written before levels carried their provenance (or edited by hand): the
    levels it says nothing about are solved again (the same measurements give the same
    result), so the manifest is complete."""
    config, ref = reference
    out = tmp_path / "run"
    shutil.copytree(ref, out)
    checkpoint = read_json(out / "checkpoint.json")
    checkpoint.pop("finished")
    del checkpoint["levels"]["state"]
    (out / "checkpoint.json").write_text(json.dumps(checkpoint))
    run(config, out, "--resume")
    assert "no provenance of level 'state'" in capsys.readouterr().out
    assert_resumed_like(out, ref)
    assert read_json(out / "manifest.json")["resumed_levels"] == ["nation"]


@pytest.mark.timeout(600)
def test_release_run_killed_then_resumed_has_the_manifest_of_one_session(data, tmp_path):
    """Release noise cannot be drawn twice alike: the reference is the same measurements (a
    run killed after measuring, copied) solved in one session; the other copy is killed again
    (SIGTERM) after the state level and resumed."""
    config = config_file(tmp_path, data, release=True)
    once, twice = tmp_path / "once", tmp_path / "twice"
    code, err = interrupt(config, once, -1, signal.SIGKILL)
    assert code == -9, err
    shutil.copytree(once, twice)
    run(config, once, "--resume")
    code, err = interrupt(config, twice, 1, signal.SIGTERM, "--resume")
    assert code == 143 and "--resume" in err, err
    run(config, twice, "--resume")
    manifest = read_json(twice / "manifest.json")
    assert manifest["safe_for_release"] is True and manifest["resumed_levels"] == ["nation",
                                                                                   "state"]
    assert_resumed_like(twice, once)


def test_release_run_resumed_when_finished_keeps_its_manifest(data, tmp_path):
    config = config_file(tmp_path, data, release=True)
    out, again = tmp_path / "run", tmp_path / "again"
    run(config, out)
    shutil.copytree(out, again)
    run(config, again, "--resume")
    assert_resumed_like(again, out)
    assert read_json(again / "manifest.json")["provenance"]["solver"]["failsafe_keep"]


# -- 2. what a resume may change, and what it may not ------------------------------------------

def no_measuring(monkeypatch) -> None:
    """Make measuring fail: a resume must reuse the saved measurements."""
    def measure(*args, **kwargs):
        raise AssertionError("the data were measured a second time")

    monkeypatch.setattr(pipeline, "measure", measure)


@pytest.mark.timeout(600)
@pytest.mark.parametrize("release", [False, True])
def test_a_failed_post_processing_is_fixed_and_resumed_without_measuring_again(
        data, tmp_path, capsys, monkeypatch, release):
    """The issue's case: the method fails after the data were measured (here sampling's time
    limit); the option is fixed and ``--resume`` post-processes the saved measurements, which
    stay as they were, and the manifest says what changed."""
    sampling = {"method": "sampling", "options": {"sweeps": 5, "time_limit": 0}}
    failing = config_file(tmp_path, data, release=release, postprocess=sampling)
    out = tmp_path / "run"
    assert main(["run", str(failing), "--out", str(out), "--no-progress"]) == 1
    assert "time_limit=0" in capsys.readouterr().err
    measured = files(out / "noisy")
    assert measured and not (out / "manifest.json").exists()
    fixed = config_file(tmp_path, data, release=release, name="fixed.toml",
                        postprocess={"method": "sampling", "options": {"sweeps": 5}})
    no_measuring(monkeypatch)
    run(fixed, out, "--resume")
    printed = capsys.readouterr().out
    assert "the post-processing changed since the run was measured (options)" in printed
    assert files(out / "noisy") == measured
    manifest = read_json(out / "manifest.json")
    assert manifest["method"] == "sampling" and manifest["safe_for_release"] is release
    assert manifest["postprocess_changes"] == [{
        "old": {"options": {"sweeps": 5, "time_limit": 0}}, "new": {"options": {"sweeps": 5}},
        "post_processed_again": True, "levels_done_before": []}]
    assert manifest["postprocess"]["options"] == {"sweeps": 5}
    if not release:     # the same seed measures alike: as a fresh run of the fixed config
        monkeypatch.undo()
        run(fixed, tmp_path / "fresh")
        for lv in LEVELS:
            assert (out / f"{lv}.parquet").read_bytes() == \
                (tmp_path / "fresh" / f"{lv}.parquet").read_bytes(), lv


def test_another_method_on_a_finished_run_replaces_its_results(reference, tmp_path, capsys,
                                                               monkeypatch):
    config, ref = reference
    out = tmp_path / "run"
    shutil.copytree(ref, out)
    no_measuring(monkeypatch)
    run(config, out, "--resume", "--method", "hay")
    manifest = read_json(out / "manifest.json")
    assert manifest["method"] == "hay" and manifest["resumed_levels"] == []
    (change,) = manifest["postprocess_changes"]
    assert change["old"]["method"] == "topdown" and change["new"]["method"] == "hay"
    assert change["levels_done_before"] == list(LEVELS) and change["post_processed_again"]
    assert not (out / "node_stats.parquet").exists()          # TopDown's, hay has none
    assert not (out / "microdata.parquet").exists()           # hay's counts are not integers
    assert files(out / "noisy") == files(ref / "noisy")
    monkeypatch.undo()
    fresh = tmp_path / "fresh"
    run(config, fresh, "--method", "hay")
    for lv in LEVELS:
        assert (out / f"{lv}.parquet").read_bytes() == (fresh / f"{lv}.parquet").read_bytes()


def test_a_changed_spec_constraint_is_post_processed_again(reference, data, tmp_path,
                                                           monkeypatch):
    """Upward implication changes the node problems, not the measurements."""
    _, ref = reference
    out = tmp_path / "run"
    shutil.copytree(ref, out)
    implied = save_config(tmp_path / "implied.toml",
                          e2e_config(data, budget=EPSILON, seed=SEED, spec=Spec.e2e(LEVELS)))
    no_measuring(monkeypatch)
    run(implied, out, "--resume")
    (change,) = read_json(out / "manifest.json")["postprocess_changes"]
    assert list(change["old"]) == ["spec"] and change["old"]["spec"]["imply_upward"] is False
    monkeypatch.undo()
    run(implied, tmp_path / "fresh")
    # the measurements keep the spec they were checked against when they were made
    measured = read_json(out / "noisy" / "metadata.json")["provenance"]["spec_checked"]
    assert measured["imply_upward"] is False
    assert_resumed_like(out, tmp_path / "fresh", measured_spec=False)


def test_a_refused_resume_with_a_changed_post_processing_leaves_the_run_as_it_was(
        reference, data, tmp_path, capsys):
    """The new spec's constraint contradicts the data: refused before anything is replaced
    (the old manifest and checkpoint stay), and the run can still be resumed as it was."""
    from invariants.spec import Constraint

    config, ref = reference
    out = tmp_path / "run"
    shutil.copytree(ref, out)
    before = snapshot(out)
    no_adults = replace(spec(), constraints=spec().constraints + (Constraint(
        "no_adults", "all", type="structural_zero", query="marginal(votingage)",
        answers=(1,)),))
    contradicted = save_config(tmp_path / "contradicted.toml", e2e_config(
        data, budget=EPSILON, seed=SEED, spec=no_adults))
    assert main(["run", str(contradicted), "--out", str(out), "--no-progress",
                 "--resume"]) == 1
    assert "break the spec" in capsys.readouterr().err
    assert snapshot(out) == before
    run(config, out, "--resume")
    assert_resumed_like(out, ref)


def test_a_changed_solver_setting_is_post_processed_again(reference, data, tmp_path,
                                                         monkeypatch):
    config, ref = reference
    out = tmp_path / "run"
    shutil.copytree(ref, out)
    keep_total = config_file(tmp_path, data, name="total.toml",
                             solver={"failsafe_keep": ["total"]})
    no_measuring(monkeypatch)
    run(keep_total, out, "--resume")
    manifest = read_json(out / "manifest.json")
    (change,) = manifest["postprocess_changes"]
    assert list(change["old"]) == ["solver"] and change["post_processed_again"]
    assert change["new"]["solver"]["failsafe_keep"] == ["total"]
    assert manifest["resumed_levels"] == []
    assert set(map(tuple, manifest["provenance"]["solver"]["failsafe_keep"].values())) == \
        {("total",)}


def test_an_output_choice_changed_on_resume_keeps_the_results(reference, data, tmp_path,
                                                              monkeypatch, capsys):
    config, ref = reference
    out = tmp_path / "run"
    shutil.copytree(ref, out)
    levels = files(out, "*.parquet")
    for name, microdata in (("with.toml", True), ("without.toml", False)):
        changed = config_file(tmp_path, data, name=name, output={"microdata": microdata})
        no_measuring(monkeypatch)
        run(changed, out, "--resume")
        assert "the output choices changed (microdata); the results are kept" in \
            capsys.readouterr().out
        assert (out / "microdata.parquet").exists() is microdata
        assert {k: v for k, v in files(out, "*.parquet").items()
                if k != "microdata.parquet"} == levels
        manifest = read_json(out / "manifest.json")
        assert manifest["resumed_levels"] == list(LEVELS)
        assert manifest["postprocess_changes"][-1] == {
            "old": {"microdata": not microdata}, "new": {"microdata": microdata},
            "post_processed_again": False, "levels_done_before": list(LEVELS)}
        assert comparable(manifest) == {**comparable(read_json(ref / "manifest.json")),
                                        "config": manifest["config"],
                                        "release": manifest["release"]}


def changed(raw: dict[str, Any], **sections: dict[str, Any]) -> dict[str, Any]:
    """``raw`` (a parsed config) with whole sections replaced."""
    return {**raw, **sections}


#: Measurement changes: the setting a refusal must name, and the change to the parsed config.
MEASUREMENT_CHANGES = {
    "budget": lambda raw: changed(raw, budget={**raw["budget"], "total": 1.0}),
    "seed": lambda raw: changed(raw, randomness={"mode": "simulation", "seed": SEED + 1}),
    "mechanism": lambda raw: changed(raw, mechanism={"name": "laplace"}),
    "workload": lambda raw: changed(raw, workload={"queries": {
        "detailed": "detailed", "hhgq": "marginal(hhgq)",
        "va_hisp_race": "marginal(votingage, cenrace)"}}),
    "levels": lambda raw: changed(raw, geography={"levels": list(LEVELS[:3])},
                                  spec={"preset": "e2e"}),
    "published invariants": lambda raw: changed(raw, spec={
        "unit_attribute": "hhgq", "invariant": [{"name": "tot", "levels": "all"}]}),
    "randomness mode": lambda raw: changed(raw, randomness=(
        {"mode": "simulation", "seed": SEED} if raw["randomness"]["mode"] == "release"
        else {"mode": "release"})),
}


@pytest.mark.parametrize("name, release", [
    (name, release) for name in sorted(MEASUREMENT_CHANGES) for release in (False, True)
    # release mode has no seed, and refuses floating-point noise such as laplace
    if not (release and name in ("seed", "mechanism"))])
def test_a_change_to_the_measurement_is_refused_naming_it(data, tmp_path, capsys, release,
                                                          name):
    import re
    import tomllib

    config = config_file(tmp_path, data, release=release)
    raw = MEASUREMENT_CHANGES[name](tomllib.loads(config.read_text()))
    out = tmp_path / "run"
    run(config, out)
    before = snapshot(out)
    other = save_config(tmp_path / "changed.toml", raw)
    assert main(["run", str(other), "--out", str(out), "--no-progress", "--resume"]) == 1
    err = capsys.readouterr().err
    named = re.search(r"measured its data with another configuration: the (.+?) changed since",
                      err)
    assert named and name in named[1], err
    assert "another --out" in err and "Traceback" not in err
    assert snapshot(out) == before
