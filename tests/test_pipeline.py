"""``run_pipeline`` and ``validate_config`` end to end on small synthetic 1940-style data.

One uninterrupted run (module fixture) is the reference: its outputs are checked for layout,
provenance and the TopDown promises, and every resumed run must reproduce its level files byte
for byte.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pytest

import postproc.methods.topdown as engine
from hierarchy.errors import HierarchyError
from hierarchy.io.storage import read_json, read_parquet_metadata, write_json
from hierarchy.schema import E2E_1940
from hierarchy.synth import write_synthetic_1940
from postproc.apps.runs.config import load_config
from postproc.apps.runs.pipeline import accounting, load_truth, run_pipeline, validate_config
from postproc.errors import PostprocError
from postproc.result import histograms_from_table

LEVELS = ("nation", "state", "county", "enum_dist")
PERSONS = 50_000

CONFIG = """\
[data]
persons = {persons}
units = {units}
{data_extra}
[schema]
preset = "e2e_1940"

[geography]
levels = ["nation", "state", "county", "enum_dist"]

[workload]
preset = "e2e"

[budget]
kind = "pure"
total = {epsilon}
preset = "e2e"

[mechanism]
name = "geometric"

[randomness]
{randomness}

[spec]
{spec}

[output]
directory = "out"
microdata = {microdata}
"""


def write_config(directory: Path, data: Path, *, persons: Path | None = None,
                 units: Path | None = None, epsilon: float = 1.0, seed: int | None = 7,
                 spec: str = 'preset = "e2e"', microdata: bool = True, data_extra: str = "",
                 name: str = "run.toml") -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    randomness = ('mode = "release"' if seed is None
                  else f'mode = "simulation"\nseed = {seed}')
    text = CONFIG.format(persons=json.dumps(str(persons or data / "persons.parquet")),
                         units=json.dumps(str(units or data / "units.parquet")),
                         data_extra=data_extra, epsilon=epsilon, randomness=randomness,
                         spec=spec, microdata=str(microdata).lower())
    path = directory / name
    path.write_text(text, encoding="utf-8")
    return path


def quiet(_message: str) -> None:
    pass


def snapshot(directory: Path) -> dict[str, bytes]:
    """Every file under ``directory`` (relative path → bytes), but the lock file (which names
    the last process that held it)."""
    return {str(p.relative_to(directory)): p.read_bytes()
            for p in sorted(directory.rglob("*")) if p.is_file() and p.name != ".dapp-lock"}


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> Path:
    directory = tmp_path_factory.mktemp("data")
    write_synthetic_1940(directory, PERSONS, seed=5)
    return directory


@pytest.fixture(scope="module")
def config(data, tmp_path_factory):
    return load_config(write_config(tmp_path_factory.mktemp("cfg"), data))


@pytest.fixture(scope="module")
def reference(config, tmp_path_factory):
    """The uninterrupted run."""
    out = tmp_path_factory.mktemp("reference") / "run"
    messages: list[str] = []
    result = run_pipeline(config, out=out, progress=False, log=messages.append)
    return result, messages


# -- layout and provenance ---------------------------------------------------------------------

def test_run_writes_every_output(reference, config):
    result, messages = reference
    out = result.directory
    for lv in LEVELS:
        assert (out / f"{lv}.parquet").is_file(), lv
    for name in ("manifest.json", "node_stats.parquet", "checkpoint.json",
                 "microdata.parquet", "noisy/metadata.json"):
        assert (out / name).is_file(), name
    assert not [p.name for p in out.rglob("*") if p.name.endswith(".tmp")]
    checkpoint = read_json(out / "checkpoint.json")
    assert checkpoint["finished"] is True and checkpoint["completed"] == list(LEVELS)
    assert any("NOT SAFE FOR RELEASE" in m for m in messages)
    assert set(result.timings) >= {"read_tabulate", "measure", "topdown", "write"}


def test_manifest_records_config_versions_randomness_accounting_stats_timings(reference):
    result, _ = reference
    manifest = json.loads((result.directory / "manifest.json").read_text())
    assert manifest["config"]["budget"] == {"kind": "pure", "total": 1.0, "preset": "e2e"}
    assert manifest["config"]["resolved"]["persons"].endswith("persons.parquet")
    assert {"numpy", "pyarrow", "python"} <= set(manifest["versions"])
    assert manifest["randomness"]["mode"] == "simulation"
    assert manifest["randomness"]["seed"] == 7
    assert "NOT SAFE" in manifest["randomness"]["label"]
    assert manifest["safe_for_release"] is False
    total = manifest["accounting"]["total"]
    assert total["budget"] == "1" and total["loss"]["pure_epsilon"] == pytest.approx(1.0)
    per_level = [manifest["accounting"]["levels"][lv]["loss"]["pure_epsilon"] for lv in LEVELS]
    assert per_level == pytest.approx([0.25] * 4)
    stats = pq.read_table(result.directory / "node_stats.parquet").to_pandas()
    for lv in LEVELS:
        entry = manifest["levels"][lv]
        assert entry["parents"] == int((stats["level"] == lv).sum()) > 0, lv
        assert entry["persons"] == PERSONS
        assert sum(entry["backends"].values()) == entry["parents"]
    assert set(manifest["pipeline_timings"]) >= {"read_tabulate", "measure", "topdown"}
    assert set(manifest["provenance"]["timings"]["levels"]) == set(LEVELS)
    assert manifest["resumed_levels"] == []


def test_every_parquet_carries_the_randomness_label(reference):
    result, _ = reference
    for name in [f"{lv}.parquet" for lv in LEVELS] + ["node_stats.parquet",
                                                       "microdata.parquet"]:
        meta = read_parquet_metadata(result.directory / name)
        assert "NOT SAFE FOR A REAL RELEASE" in meta["randomness_label"], name
    assert read_parquet_metadata(result.directory / "state.parquet")["schema"] == \
        E2E_1940.to_dict()


def test_level_files_read_back_consistent_and_invariant(reference):
    result, _ = reference
    geo, truth = result.noisy.geography, result.truth
    hists = []
    for li, lv in enumerate(LEVELS):
        table = pq.read_table(result.directory / f"{lv}.parquet")
        assert table.column_names == [lv, *E2E_1940.names, "count"]
        assert pa.compute.min(table.column("count")).as_py() > 0  # zero cells omitted
        hist = histograms_from_table(table, E2E_1940, geo, lv)
        np.testing.assert_array_equal(hist, result.result.histograms[li])
        hists.append(hist)
    for li in range(1, len(LEVELS)):
        summed = np.zeros_like(hists[li - 1])
        np.add.at(summed, geo.parents[li], hists[li])
        np.testing.assert_array_equal(summed, hists[li - 1], err_msg=LEVELS[li])
    for lv in ("nation", "state"):  # 'tot' is invariant there
        li = LEVELS.index(lv)
        np.testing.assert_array_equal(hists[li].sum(axis=1), truth.totals(lv))
    # E2E spec at the EDs: hhgq types 1 and 5 never occur; each unit type holds >= its units
    ed = hists[-1].reshape(-1, *E2E_1940.shape)
    by_type = ed.sum(axis=(2, 3, 4))
    assert not by_type[:, [1, 5]].any()
    units = truth.level_units("enum_dist")
    assert (by_type >= units).all()
    assert not by_type[units == 0].any()


def test_microdata_has_one_row_per_person_matching_the_bottom_level(reference):
    result, _ = reference
    micro = pq.read_table(result.directory / "microdata.parquet").to_pandas()
    assert len(micro) == PERSONS
    assert list(micro.columns) == ["state", "county", "enum_dist", *E2E_1940.names]
    counts = micro.groupby(["enum_dist", *E2E_1940.names], observed=True).size()
    table = pq.read_table(result.directory / "enum_dist.parquet").to_pandas()
    expected = table.set_index(["enum_dist", *E2E_1940.names])["count"]
    pd.testing.assert_series_equal(counts.sort_index().astype(np.int64),
                                   expected.sort_index().astype(np.int64), check_names=False)
    # geocodes nest: an ED's county and state are its ancestors
    for child, parent in [("enum_dist", "county"), ("county", "state")]:
        pairs = micro[[child, parent]].astype(str).drop_duplicates()
        assert all(c.startswith(p) for c, p in zip(pairs[child], pairs[parent])), child


def test_accounting_totals_equal_the_budget(data, tmp_path):
    config = load_config(write_config(tmp_path, data, epsilon=2.5))
    report = accounting(config)
    assert report["total"]["loss"]["pure_epsilon"] == pytest.approx(2.5)
    assert [report["levels"][lv]["loss"]["pure_epsilon"] for lv in LEVELS] == \
        pytest.approx([2.5 / 4] * 4)


# -- never overwrite; resume ---------------------------------------------------------------------

def test_non_empty_directory_without_resume_raises_and_keeps_everything(reference, config):
    out = reference[0].directory
    before = snapshot(out)
    with pytest.raises(PostprocError, match="already holds outputs; use --resume"):
        run_pipeline(config, out=out, progress=False, log=quiet)
    assert snapshot(out) == before


def test_unrelated_directory_is_refused(config, tmp_path):
    (tmp_path / "notes.txt").write_text("mine")
    with pytest.raises(PostprocError, match="not empty and was not written by this toolkit"):
        run_pipeline(config, out=tmp_path, progress=False, log=quiet)
    assert [p.name for p in tmp_path.iterdir()] == ["notes.txt"]


def test_output_path_that_is_a_file_is_a_clear_error(config, tmp_path):
    target = tmp_path / "taken"
    target.write_text("mine")
    with pytest.raises(PostprocError, match="not a directory"):
        run_pipeline(config, out=target, progress=False, log=quiet)
    assert target.read_text() == "mine"


class Interrupted(Exception):
    pass


def run_interrupted(config, out: Path, after: int, monkeypatch) -> None:
    """Run until level ``after`` is checkpointed, then stop as a killed process would (the
    pipeline runs TopDown through the registry, which calls
    ``postproc.methods.topdown.topdown``)."""
    real = engine.topdown

    def topdown(*args, on_level, **kwargs):
        def stop_after(li, hist, partial):
            on_level(li, hist, partial)
            if li == after:
                raise Interrupted

        return real(*args, on_level=stop_after, **kwargs)

    monkeypatch.setattr(engine, "topdown", topdown)
    with pytest.raises(Interrupted):
        run_pipeline(config, out=out, progress=False, log=quiet)
    monkeypatch.setattr(engine, "topdown", real)


def assert_same_levels(a: Path, b: Path) -> None:
    for lv in LEVELS:
        assert (a / f"{lv}.parquet").read_bytes() == (b / f"{lv}.parquet").read_bytes(), lv
    assert pq.read_table(a / "microdata.parquet").equals(pq.read_table(b / "microdata.parquet"))


@pytest.mark.parametrize("after", [0, 2])
def test_resume_after_an_interruption_reproduces_the_run(reference, config, tmp_path,
                                                         monkeypatch, after):
    ref = reference[0].directory
    out = tmp_path / "run"
    run_interrupted(config, out, after, monkeypatch)
    checkpoint = read_json(out / "checkpoint.json")
    assert checkpoint["completed"] == list(LEVELS[:after + 1])
    assert "finished" not in checkpoint
    present = {p.name for p in out.iterdir()}
    assert {f"{lv}.parquet" for lv in LEVELS[:after + 1]} <= present
    assert not {f"{lv}.parquet" for lv in LEVELS[after + 1:]} & present
    assert "manifest.json" not in present
    assert not [n for n in present if n.endswith(".tmp")]
    for lv in LEVELS[:after + 1]:  # what was checkpointed is already final
        assert (out / f"{lv}.parquet").read_bytes() == (ref / f"{lv}.parquet").read_bytes()

    messages: list[str] = []
    resumed = run_pipeline(config, out=out, resume=True, progress=False, log=messages.append)
    assert any("loaded measurements" in m for m in messages)
    assert any(f"levels {list(LEVELS[:after + 1])} already done" in m for m in messages)
    assert_same_levels(ref, out)
    for li in range(len(LEVELS)):
        np.testing.assert_array_equal(resumed.result.histograms[li],
                                      reference[0].result.histograms[li])
    assert read_json(out / "checkpoint.json")["finished"] is True
    manifest = read_json(out / "manifest.json")
    assert manifest["resumed_levels"] == list(LEVELS[:after + 1])
    # solver statistics of the levels solved before the interruption are not lost
    ref_manifest = read_json(ref / "manifest.json")
    for lv in LEVELS:
        assert manifest["levels"][lv]["parents"] == ref_manifest["levels"][lv]["parents"], lv
    stats = pq.read_table(out / "node_stats.parquet").to_pandas()
    ref_stats = pq.read_table(ref / "node_stats.parquet").to_pandas()
    assert list(stats["level"]) == list(ref_stats["level"])
    assert list(stats["parent"]) == list(ref_stats["parent"])


def test_resume_from_a_hand_made_checkpoint(reference, config, tmp_path):
    """What a kill between levels leaves: level files up to k and checkpoint.json."""
    ref = reference[0].directory
    out = tmp_path / "run"
    shutil.copytree(ref, out)
    for name in ["county.parquet", "enum_dist.parquet", "manifest.json", "microdata.parquet",
                 "node_stats.parquet"]:
        (out / name).unlink()
    fingerprint = read_json(ref / "checkpoint.json")["config"]
    write_json({"config": fingerprint, "completed": ["nation", "state"]},
               out / "checkpoint.json")
    run_pipeline(config, out=out, resume=True, progress=False, log=quiet)
    assert_same_levels(ref, out)


def test_resume_of_a_finished_run_changes_nothing(reference, config, tmp_path):
    ref = reference[0].directory
    out = tmp_path / "run"
    shutil.copytree(ref, out)
    messages: list[str] = []
    run_pipeline(config, out=out, resume=True, progress=False, log=messages.append)
    assert any("already finished" in m for m in messages)
    assert_same_levels(ref, out)
    assert pq.read_table(out / "node_stats.parquet").num_rows == \
        pq.read_table(ref / "node_stats.parquet").num_rows
    manifest, ref_manifest = read_json(out / "manifest.json"), read_json(ref / "manifest.json")
    assert manifest["levels"] == {lv: {**v, "seconds": manifest["levels"][lv]["seconds"]}
                                  for lv, v in ref_manifest["levels"].items()}


def test_resume_with_a_different_config_raises_and_keeps_everything(reference, data, tmp_path,
                                                                    monkeypatch):
    config = load_config(write_config(tmp_path / "cfg", data))
    out = tmp_path / "run"
    run_interrupted(config, out, 1, monkeypatch)
    before = snapshot(out)
    other = load_config(write_config(tmp_path / "cfg", data, seed=8, name="other.toml"))
    with pytest.raises(PostprocError, match="another configuration: the seed changed since"):
        run_pipeline(other, out=out, resume=True, progress=False, log=quiet)
    assert snapshot(out) == before


def test_resume_into_an_empty_directory_is_a_fresh_run(config, tmp_path, reference):
    out = tmp_path / "fresh"
    run_pipeline(config, out=out, resume=True, progress=False, log=quiet)
    assert_same_levels(reference[0].directory, out)


def test_release_mode_is_labelled_safe_and_not_seeded(data, tmp_path):
    config = load_config(write_config(tmp_path, data, seed=None, microdata=False))
    messages: list[str] = []
    result = run_pipeline(config, out=tmp_path / "run", progress=False, log=messages.append)
    manifest = read_json(tmp_path / "run" / "manifest.json")
    assert manifest["randomness"]["mode"] == "release" and manifest["safe_for_release"] is True
    assert "NOT SAFE" not in manifest["randomness"]["label"]
    assert not any("SIMULATION" in m for m in messages)
    assert "NOT SAFE" not in read_parquet_metadata(tmp_path / "run" / "state.parquet")[
        "randomness_label"]
    assert not (tmp_path / "run" / "microdata.parquet").exists()
    assert result.result.safe_for_release


# -- validation ----------------------------------------------------------------------------------

def test_validate_config_accepts_good_data(config):
    messages: list[str] = []
    truth = validate_config(config, log=messages.append)
    assert int(truth.totals("nation")[0]) == PERSONS
    assert messages[-1].startswith("configuration valid")
    assert any(m.startswith("spec at enum_dist:") for m in messages)


def test_validate_rejects_more_units_than_persons(data, tmp_path):
    units = pq.read_table(data / "units.parquet").to_pandas()
    persons = pq.read_table(data / "persons.parquet").to_pandas()
    ed = str(persons["enum_dist"].iloc[0])
    n_households = int(((persons["enum_dist"].astype(str) == ed) & (persons["hhgq"] == 0)).sum())
    row = units[(units["enum_dist"].astype(str) == ed) & (units["hhgq"] == 0)].iloc[[0]]
    for col in ("state", "county", "enum_dist"):
        units[col] = units[col].astype(str)
        row = row.astype({col: str})
    vacant = pd.concat([units, pd.concat([row] * (n_households + 1))], ignore_index=True)
    bad_units = tmp_path / "units.parquet"
    pq.write_table(pa.Table.from_pandas(vacant, preserve_index=False), bad_units)
    config = load_config(write_config(tmp_path, data, units=bad_units))
    with pytest.raises(HierarchyError) as info:
        validate_config(config, log=quiet)
    message = str(info.value)
    assert str(bad_units) in message and repr(ed) in message
    assert "remove vacant units" in message


def test_validate_rejects_a_spec_the_truth_violates(data, tmp_path):
    spec = ('[[spec.constraint]]\nname = "tiny_states"\ntype = "linear"\nquery = "total"\n'
            'sense = "<="\nrhs = 10\nlevels = ["state"]')
    config = load_config(write_config(tmp_path, data, spec=spec))
    with pytest.raises(PostprocError, match=r"confidential data break the spec"
                                            r"(.|\n)*tiny_states"):
        validate_config(config, log=quiet)


def test_csv_with_column_and_value_maps_tabulates_like_the_parquet(data, tmp_path, config):
    persons = pq.read_table(data / "persons.parquet").to_pandas()
    labels = np.array(["W", "B", "AI", "CH", "JP", "OT"])
    renamed = pd.DataFrame({
        "ST": persons["state"].astype(str), "CO": persons["county"].astype(str),
        "ED": persons["enum_dist"].astype(str), "GQ": persons["hhgq"],
        "votingage": persons["votingage"], "hispanic": persons["hispanic"],
        "RACE": labels[persons["cenrace"].to_numpy()]})
    csv = tmp_path / "people.csv"
    pacsv.write_csv(pa.Table.from_pandas(renamed, preserve_index=False), csv)
    units = pq.read_table(data / "units.parquet").to_pandas()
    units_csv = tmp_path / "units.csv"
    pacsv.write_csv(pa.Table.from_pandas(units.astype({c: str for c in
                                                       ("state", "county", "enum_dist")}).rename(
        columns={"state": "ST", "county": "CO", "enum_dist": "ED", "hhgq": "GQ"}),
        preserve_index=False), units_csv)
    extra = ('columns = { state = "ST", county = "CO", enum_dist = "ED", hhgq = "GQ", '
             'cenrace = "RACE" }\nvalues = { cenrace = { W = "white", B = "black", '
             'AI = "American Indian", CH = "Chinese", JP = "Japanese", OT = "other" } }\n')
    mapped = load_config(write_config(tmp_path, data, persons=csv, units=units_csv,
                                      data_extra=extra))
    got, want = load_truth(mapped), load_truth(config)
    assert got.geography.equals(want.geography)
    for a, b in zip(got.counts, want.counts):
        np.testing.assert_array_equal(a, b)
