"""Release hygiene of messages and of the Python path (issue 35, items 2 and 3).

1. In release mode a refused input is described by its column and rule, never by a count, a row
   number, a value or the input's path; the details go to ``DIR/confidential/validation.txt``
   (or are shown with ``--show-confidential``). Simulation mode keeps the full messages.
2. A persons file with column names and no records is named (not blamed on the units).
3. The Python path refuses a spec the data contradict before measuring, as the CLI does.
"""

from __future__ import annotations

import re
import tomllib
import warnings
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from _configs import save_config

from hierarchy import E2E_1940, Budget, e2e_workload, measure, tabulate
from hierarchy.errors import ConfidentialDataError
from hierarchy.io import read_microdata
from hierarchy.io.storage import MARKER
from hierarchy.noisy import NoisyHierarchy
from hierarchy.synth import synthesize_1940, write_synthetic_1940
from invariants.spec import Constraint, Spec
from postproc import postprocess, topdown
from postproc.cli import main
from postproc.errors import PostprocError, UncheckedSpecWarning
from postproc.gate import VALIDATION_FILE

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "e2e1940.toml"
LEVELS = ["nation", "state", "county", "enum_dist"]
BAD_ROWS = [5, 77, 900, 1234]
#: What the message of the bad persons file may not say in release mode.
SECRETS = ["99", "1234", "900", "77", "4 value", "rows 5"]
NO_MINORS = {"name": "no_minors", "type": "structural_zero", "query": "marginal(votingage)",
             "answers": [0], "levels": "all"}


def run_cli(capsys, argv):
    code = main([str(a) for a in argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    """2,000 synthetic persons and their units; ``persons_bad.parquet`` holds cenrace 99 in
    four rows; ``persons_empty.parquet`` column names only."""
    directory = tmp_path_factory.mktemp("messages") / "data"
    write_synthetic_1940(directory, 2000, seed=1)
    persons = pq.read_table(directory / "persons.parquet")
    cenrace = persons.column("cenrace").to_numpy().copy()
    cenrace[BAD_ROWS] = 99
    bad = persons.set_column(persons.schema.get_field_index("cenrace"), "cenrace",
                             pa.array(cenrace, pa.int8()))
    pq.write_table(bad, directory / "persons_bad.parquet")
    pq.write_table(persons.slice(0, 0), directory / "persons_empty.parquet")
    return directory


def config(folder: Path, data: Path, persons: str = "persons.parquet", *, release: bool,
           **sections) -> Path:
    """examples/e2e1940.toml on ``data`` (``persons`` the persons file), in release mode or
    seeded, with ``sections`` changed."""
    raw = tomllib.loads(EXAMPLE.read_text())
    raw["data"].update(persons=str(data / persons), units=str(data / "units.parquet"))
    raw["output"]["directory"] = "out"
    randomness = {"mode": "release", "seed": None} if release else {"mode": "simulation"}
    return save_config(folder / "config.toml", raw, randomness=randomness, **sections)


def without_output(text: str, out: Path) -> str:
    """``text`` with the output directory the user named (which messages may show: it is not
    confidential) replaced, so that a secret number is not found in the temporary directory's
    name (``pytest-199``)."""
    return text.replace(str(out), "<out>")


def outputs_outside_confidential(out: Path) -> set[str]:
    return {str(p.relative_to(out)) for p in out.rglob("*")
            if p.is_file() and p.relative_to(out).parts[0] != "confidential"}


# ---------------------------------------------------------------------------------------------
# 1. refused inputs in release mode
# ---------------------------------------------------------------------------------------------

def test_release_run_names_column_and_rule_and_writes_the_details_to_confidential(
        data, tmp_path, capsys):
    cfg, out = config(tmp_path, data, "persons_bad.parquet", release=True), tmp_path / "out"
    code, stdout, err = run_cli(capsys, ["run", cfg, "--out", out, "--no-progress"])
    assert code == 1
    assert "[data] persons: column 'cenrace' (attribute 'cenrace') holds values outside 0..5" \
        in err
    for secret in [str(data), "persons_bad", *SECRETS]:
        assert secret not in without_output(err + stdout, out), secret
    details = out / "confidential" / VALIDATION_FILE
    assert str(details) in err
    text = details.read_text()
    assert text.startswith("CONFIDENTIAL") and str(data / "persons_bad.parquet") in text
    assert "4 value(s) outside 0..5, e.g. 99 at rows 5, 77, 900, 1234" in text
    assert outputs_outside_confidential(out) <= {MARKER, ".dapp-lock"}     # nothing measured
    # the data fixed, the run finishes there and the stale details are removed
    fixed = config(tmp_path, data, release=True)
    code, _, _ = run_cli(capsys, ["run", fixed, "--out", out, "--no-progress", "--resume"])
    assert code == 0 and not details.exists() and (out / "manifest.json").is_file()


def test_release_validate_has_no_directory_and_says_how_to_see_the_details(
        data, tmp_path, capsys):
    cfg = config(tmp_path, data, "persons_bad.parquet", release=True)
    code, _, err = run_cli(capsys, ["validate", cfg])
    assert code == 1 and "holds values outside 0..5" in err
    assert "rerun with --show-confidential" in err
    for secret in [str(data), "persons_bad", *SECRETS]:
        assert secret not in err, secret
    code, _, err = run_cli(capsys, ["validate", cfg, "--show-confidential"])
    assert code == 1
    assert f"{data / 'persons_bad.parquet'}: column 'cenrace'" in err
    assert "4 value(s) outside 0..5, e.g. 99 at rows 5, 77, 900, 1234" in err


def test_simulation_keeps_the_full_message(data, tmp_path, capsys):
    cfg, out = config(tmp_path, data, "persons_bad.parquet", release=False), tmp_path / "out"
    code, _, err = run_cli(capsys, ["run", cfg, "--out", out, "--no-progress"])
    assert code == 1
    assert (f"{data / 'persons_bad.parquet'}: column 'cenrace' (attribute 'cenrace'): 4 "
            f"value(s) outside 0..5, e.g. 99 at rows 5, 77, 900, 1234") in err
    assert not (out / "confidential" / VALIDATION_FILE).exists()


def test_release_unit_conflict_names_no_unit_count_or_row(data, tmp_path, capsys):
    # the units of the first person's enumeration district and type are dropped
    persons = pq.read_table(data / "persons.parquet").to_pandas()
    units = pq.read_table(data / "units.parquet").to_pandas()
    first = persons.iloc[0]
    keep = ~((units["enum_dist"] == first["enum_dist"]) & (units["hhgq"] == first["hhgq"]))
    folder = tmp_path / "d"
    folder.mkdir()
    pq.write_table(pa.Table.from_pandas(units[keep], preserve_index=False),
                   folder / "units.parquet")
    pq.write_table(pq.read_table(data / "persons.parquet"), folder / "persons.parquet")
    cfg, out = config(tmp_path, folder, release=True), tmp_path / "out"
    code, _, err = run_cli(capsys, ["run", cfg, "--out", out, "--no-progress"])
    assert code == 1
    assert ("[data] persons: some persons live in a enum_dist with no unit of their hhgq type "
            "in the units data") in err
    assert not re.search(r"\d", err.replace(str(out), "DIR")), err
    text = (out / "confidential" / VALIDATION_FILE).read_text()
    assert repr(str(first["enum_dist"])) in text and "person(s) live in" in text


def test_release_spec_contradiction_names_the_constraint_only(data, tmp_path, capsys):
    cfg = config(tmp_path, data, release=True,
                 spec={"preset": None, "constraint": [NO_MINORS]})
    out = tmp_path / "out"
    code, _, err = run_cli(capsys, ["run", cfg, "--out", out, "--no-progress"])
    assert code == 1
    assert "break the spec" in err and "broken: no_minors" in err
    assert not re.search(r"\d", err.replace(str(out), "DIR")), err    # no count, no unit
    text = (out / "confidential" / VALIDATION_FILE).read_text()
    assert re.search(r"no_minors: \d+ of \d+ enum_dist units break it, e\.g\. '\d+'", text)
    assert not (out / "noisy").exists()                               # nothing measured


def test_release_compare_and_evaluate_write_their_details_to_confidential(data, tmp_path,
                                                                           capsys):
    cfg = config(tmp_path, data, "persons_bad.parquet", release=True)
    out = tmp_path / "cmp"
    code, _, err = run_cli(capsys, ["compare", cfg, "--methods", "hay", "--out", out,
                                    "--no-progress"])
    assert code == 1 and "holds values outside 0..5" in err
    assert not any(s in err for s in [str(data), *SECRETS])
    assert "e.g. 99" in (out / "confidential" / VALIDATION_FILE).read_text()
    # a release run evaluated against data that do not fit it
    good, run = config(tmp_path / "g", data, release=True), tmp_path / "run"
    assert run_cli(capsys, ["run", good, "--out", run, "--no-progress"])[0] == 0
    code, stdout, err = run_cli(capsys, ["evaluate", run, "--truth",
                                         data / "persons_bad.parquet", "--units",
                                         data / "units.parquet"])
    assert code == 1 and "(the truth does not fit the run)" in err
    assert "the truth's persons file: column 'cenrace'" in err
    assert not any(s in err + stdout for s in [str(data), *SECRETS])
    assert "e.g. 99" in (run / "confidential" / VALIDATION_FILE).read_text()


def test_release_safetab_says_no_count_record_or_value(tmp_path, capsys):
    from hierarchy.synth.detailed1940 import synthesize_detailed_1940

    persons = synthesize_detailed_1940(2_000, seed=1).persons
    ages = persons.column("age").to_numpy().astype(np.int16)
    ages[[3, 8]] = 130
    persons = persons.set_column(persons.schema.get_field_index("age"), "age",
                                 pa.array(ages, pa.int16()))
    pq.write_table(persons, tmp_path / "persons.parquet")
    text = ('[data]\npersons = "persons.parquet"\n[randomness]\nmode = "release"\n'
            '[[iteration]]\nid = "1"\nname = "Total"\ncodes = "all"\n'
            '[[level]]\nname = "state"\nstability = 1\nmoe = 10\n'
            'thresholds = [100, 500, 2000]\n')
    (tmp_path / "safetab.toml").write_text(text)
    code, _, err = run_cli(capsys, ["safetab", tmp_path / "safetab.toml", "--out",
                                    tmp_path / "out"])
    assert code == 1 and "must be in 0..115, but some records are not" in err
    shown = without_output(err, tmp_path / "out")
    assert "130" not in shown and "record 3" not in shown and "--show-confidential" in err
    code, _, err = run_cli(capsys, ["safetab", tmp_path / "safetab.toml", "--out",
                                    tmp_path / "out", "--show-confidential"])
    assert code == 1 and "2 records are not (e.g. record 3: 130)" in err


def test_release_mis_names_no_line_count_or_cell(tmp_path, capsys):
    table = tmp_path / "t.csv"
    table.write_text("sex,age,count\nf,young,3\nf,old,-7\nm,young,2\nm,old,4\n")
    argv = ["mis", "--table", table, "--invariant", "total", "--epsilon", "1"]
    code, _, err = run_cli(capsys, argv)
    assert code == 1 and "--table: some counts are negative" in err
    assert "-7" not in err and "line" not in err and str(tmp_path) not in err
    code, _, err = run_cli(capsys, argv + ["--seed", "1"])            # a simulation
    assert code == 1 and f"{table}, line 3: count -7 is negative" in err


# ---------------------------------------------------------------------------------------------
# 2. an empty persons file
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("release", [False, True], ids=["simulation", "release"])
def test_empty_persons_file_is_named(data, tmp_path, capsys, release):
    cfg = config(tmp_path, data, "persons_empty.parquet", release=release)
    code, _, err = run_cli(capsys, ["validate", cfg])
    assert code == 1
    name = "[data] persons" if release else str(data / "persons_empty.parquet")
    assert f"{name}: no records, only column names; a run needs at least one person" in err
    assert "units.parquet" not in err and "has no units" not in err


def test_empty_persons_table_from_python_is_named():
    empty = synthesize_1940(100, seed=1).persons.slice(0, 0)
    with pytest.raises(ConfidentialDataError, match=r"^persons table: no records"):
        read_microdata(empty, schema=E2E_1940, levels=LEVELS)


# ---------------------------------------------------------------------------------------------
# 3. the Python path checks the spec against the data before measuring
# ---------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def truth():
    data = synthesize_1940(3_000, seed=2)
    return tabulate(data.persons, schema=E2E_1940, levels=LEVELS[:3], units=data.units)


def no_minors() -> Spec:
    return Spec.from_dict({"constraint": [NO_MINORS]})


def minors(hist: np.ndarray) -> int:
    return int(hist.reshape(-1, 8, 2, 12)[:, :, 0, :].sum())


@pytest.mark.parametrize("rng", [None, 5], ids=["release", "simulation"])
def test_measure_refuses_a_spec_the_data_contradict(truth, rng):
    assert minors(truth.counts[0]) > 0
    with pytest.raises(ConfidentialDataError) as info:
        measure(truth, e2e_workload(E2E_1940), Budget.e2e(1, truth.levels), rng=rng,
                spec=no_minors(), accounted_elsewhere=True)
    assert "no_minors" in info.value.public and not re.search(r"\d", info.value.public)
    assert re.search(r"no_minors: [\d,]+ of 49 county units break it", str(info.value))


def test_release_topdown_refuses_a_spec_the_data_were_not_checked_against(truth):
    noisy = measure(truth, e2e_workload(E2E_1940), Budget.e2e(1, truth.levels),   # release
                    accounted_elsewhere=True)
    message = "the confidential data were never checked against the spec's constraints"
    with pytest.raises(PostprocError, match=message):
        postprocess(noisy, "topdown", no_minors())
    with pytest.raises(PostprocError, match=message):
        topdown(noisy, no_minors())
    with pytest.raises(PostprocError, match=message):
        postprocess(noisy, "sampling", no_minors(), sweeps=1)


def test_simulation_warns_and_shows_what_the_unchecked_spec_does(truth):
    noisy = measure(truth, e2e_workload(E2E_1940), Budget.e2e(1, truth.levels), rng=3)
    with pytest.warns(UncheckedSpecWarning, match="never checked") as caught:
        result = postprocess(noisy, "topdown", no_minors())
    assert len(caught) == 1                  # once, not again by topdown inside postprocess
    assert minors(result.histograms[0]) == 0 < minors(truth.counts[0])   # silently emptied


@pytest.mark.parametrize("rng", [None, 4], ids=["release", "simulation"])
def test_a_spec_checked_when_measuring_passes_and_survives_save_and_load(truth, tmp_path, rng):
    spec = Spec.e2e(truth.levels)
    noisy = measure(truth, e2e_workload(E2E_1940), Budget.e2e(1, truth.levels), rng=rng,
                    spec=spec, accounted_elsewhere=True)
    loaded = NoisyHierarchy.load(noisy.save(tmp_path / "noisy"))
    with warnings.catch_warnings():
        warnings.simplefilter("error", UncheckedSpecWarning)
        result = postprocess(loaded, "topdown", spec)
        # a spec the checked one covers (its county constraints only) passes too
        postprocess(loaded, "topdown", spec.restricted(["county"], truth.levels))
    assert int(result.histograms[0].sum()) == int(truth.counts[0].sum())
    with pytest.raises(PostprocError, match="never checked") if rng is None else \
            pytest.warns(UncheckedSpecWarning):
        postprocess(loaded, "topdown", Spec.from_dict({"constraint": [
            {**NO_MINORS, "answers": [1], "name": "no_adults"}]}))


def test_a_run_in_parts_refuses_a_spec_the_data_contradict_before_measuring(tmp_path):
    # before: a run in parts never checked its data against the spec, and TopDown emptied
    # what the spec said was empty
    from dataclasses import replace

    from hierarchy.synth.census2020 import synthesize_2020
    from postproc.apps.runs.demo import demo_config
    from postproc.apps.runs.parts import run_in_parts

    synthesize_2020(3_000, seed=1, out=tmp_path / "data")
    config = demo_config(tmp_path, preset="pl94_2020", seed=1, executor="serial")
    no_minors = Constraint("no_minors", ("block",), "structural_zero",
                           "marginal(votingage)", (0,))
    config = replace(config, spec=replace(config.spec,
                                          constraints=(*config.spec.constraints, no_minors)))
    out = tmp_path / "parts"
    with pytest.raises(PostprocError, match="break the spec") as info:
        run_in_parts(config, out, part_blocks=40, log=lambda line: None)
    assert "no_minors" in str(info.value)
    assert not list(out.rglob("*.parquet")) and not (out / "noisy").exists()
