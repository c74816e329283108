"""``postproc init``: a configuration written from one's own data file, which ``postproc
validate`` and ``postproc run`` then take unchanged; the inference of the schema; and the
refusals, each before anything is written."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

from postproc.apps.runs.config import load_config
from postproc.apps.runs.init import MARKER, config_text, init_config
from postproc.cli import main
from postproc.errors import PostprocError

LEVELS = "region,district,village"
N = 3_000


def _people(n: int = N, seed: int = 5) -> pd.DataFrame:
    """Persons in 3 regions → 4 districts each → 5 villages each, with a text sex, an integer
    age 0–99, a categorical tenure, a small integer and an identifier."""
    rng = np.random.default_rng(seed)
    region = rng.choice(["North", "South", "East"], n)
    district = [f"{r[0]}{d}" for r, d in zip(region, rng.integers(1, 5, n))]
    return pd.DataFrame({
        "person_id": np.arange(100_000, 100_000 + n),
        "region": region, "district": district,
        "village": [f"{d}-{v}" for d, v in zip(district, rng.integers(1, 6, n))],
        "sex": rng.choice(["female", "male"], n),
        "age": rng.integers(0, 100, n),
        "tenure": pd.Categorical(rng.choice(["owner", "renter", "group quarters"], n,
                                            p=[0.6, 0.35, 0.05]),
                                 categories=["owner", "renter", "group quarters"]),
        "cars in household": rng.integers(0, 3, n)})


@pytest.fixture
def people(tmp_path) -> Path:
    path = tmp_path / "data" / "people.parquet"
    path.parent.mkdir()
    _people().to_parquet(path)
    return path


def _init(*args: str) -> int:
    return main(["init", *map(str, args)])


# -- init → validate → run ---------------------------------------------------------------------

def test_init_then_validate_then_run(people, tmp_path, capsys):
    config = tmp_path / "cfg" / "people.toml"
    assert _init(people, "--levels", LEVELS, "--out", config) == 0
    assert "wrote" in capsys.readouterr().out
    parsed = load_config(config)
    assert parsed.persons == people.resolve()
    assert parsed.levels == ("country", "region", "district", "village")
    assert (parsed.randomness_mode, parsed.seed) == ("simulation", 1)
    assert parsed.output == (tmp_path / "cfg" / "people_out").resolve()
    assert main(["validate", str(config)]) == 0
    assert "configuration valid" in capsys.readouterr().out
    assert main(["run", str(config), "--no-progress"]) == 0
    out = parsed.output
    for level in parsed.levels:
        counts = pq.read_table(out / f"{level}.parquet").column("count").to_numpy()
        assert counts.sum() == N, level           # the root's total is held, levels agree
        assert (counts >= 0).all()
    assert "simulation" in (out / "manifest.json").read_text()


def test_the_schema_is_inferred_from_the_columns(people, tmp_path):
    config = tmp_path / "people.toml"
    result = init_config(people, LEVELS.split(","), out=config)
    assert result.skipped == ("person_id",)
    assert result.attributes == ("sex", "age", "tenure", "cars_in_household")
    data = tomllib.loads(config.read_text())
    labels = {a["name"]: a["labels"] for a in data["schema"]["attributes"]}
    assert labels["sex"] == ["female", "male"]
    assert labels["tenure"] == ["owner", "renter", "group quarters"]       # category order
    assert labels["age"] == [f"{10 * i}-{10 * i + 9}" for i in range(9)] + ["90+"]
    assert labels["cars_in_household"] == ["0", "1", "2"]
    assert data["data"]["values"]["age"] == {v: v for v in labels["age"]}
    assert data["data"]["columns"] == {"cars_in_household": "cars in household"}
    assert data["workload"]["queries"] == {
        "detailed": "detailed", "sex": "marginal(sex)", "age": "marginal(age)",
        "tenure": "marginal(tenure)", "cars_in_household": "marginal(cars_in_household)"}
    budget = data["budget"]
    assert (budget["kind"], budget["total"]) == ("pure", 1)
    assert set(budget["level_fractions"].values()) == {"1/4"}
    assert set(budget["query_fractions"].values()) == {"1/5"}
    assert data["spec"]["invariant"] == [{"name": "tot", "levels": ["country"]}]
    text = config.read_text()
    assert text.startswith(MARKER)
    assert "drawn from the confidential file" in text and 'mode = "release"' in text
    assert '# or: labels = ["0-24", "25-49", "50-74", "75+"]' in text


def test_a_csv_file_gives_a_configuration_that_validates(tmp_path, capsys):
    csv = tmp_path / "people.csv"
    _people(600).to_csv(csv, index=False)
    config = tmp_path / "people.toml"
    init_config(csv, LEVELS.split(","), out=config, seed=7, epsilon="1/2")
    data = tomllib.loads(config.read_text())
    assert (data["budget"]["total"], data["randomness"]["seed"]) == ("1/2", 7)
    assert data["schema"]["attributes"][1]["labels"][-1] == "90+"   # integers read as text
    assert main(["validate", str(config)]) == 0


def test_the_commented_spec_examples_parse_when_uncommented(people, tmp_path):
    config = tmp_path / "people.toml"
    init_config(people, LEVELS.split(","), out=config)
    text = re.sub(r"(?m)^# (\[\[spec\.|(query|levels|name|type|answers|sense|rhs) = )",
                  r"\1", config.read_text())
    edited = tmp_path / "edited.toml"
    edited.write_text(text)
    spec = load_config(edited).spec
    assert [i.name for i in spec.invariants] == ["tot", "sex"]
    assert [(c.name, c.type) for c in spec.constraints] == [
        ("impossible", "structural_zero"), ("not_empty", "linear")]


def test_the_same_data_give_the_same_text(people, tmp_path):
    frame = _people()
    first = config_text(frame, LEVELS.split(","), data_path="data/people.parquet")
    assert config_text(frame, LEVELS.split(","), data_path="data/people.parquet") == first
    config = tmp_path / "people.toml"
    init_config(people, LEVELS.split(","), out=config)
    again = tmp_path / "again.toml"
    init_config(people, LEVELS.split(","), out=again)
    assert config.read_text() == again.read_text().replace("again.toml", "people.toml")
    # the text of the file is the text of the frame it was written from
    assert config.read_text() == first


def test_the_default_output_is_named_after_the_data_in_the_current_directory(
        people, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert _init(people, "--levels", LEVELS) == 0
    assert load_config(tmp_path / "people.toml").persons == people.resolve()


# -- refusals, before anything is written -------------------------------------------------------

def _refused(capsys, *args: str) -> str:
    assert _init(*args) == 1
    return capsys.readouterr().err


def test_a_level_that_is_not_a_column(people, tmp_path, capsys):
    out = tmp_path / "x.toml"
    err = _refused(capsys, people, "--levels", "region,county", "--out", out)
    assert "no column for level(s) ['county']" in err
    assert "'village'" in err and "'sex'" in err            # the columns are listed
    assert not out.exists()


def test_a_float_column(tmp_path, capsys):
    frame = _people(300)
    frame["weight"] = np.linspace(0.5, 2.5, len(frame))
    data = tmp_path / "people.parquet"
    frame.to_parquet(data)
    out = tmp_path / "x.toml"
    err = _refused(capsys, data, "--levels", LEVELS, "--out", out)
    assert "column 'weight' holds floating-point numbers" in err and "--skip weight" in err
    assert not out.exists()
    assert _init(data, "--levels", LEVELS, "--out", out, "--skip", "weight") == 0
    assert "# column weight: left out (--skip)" in out.read_text()


def test_geocodes_that_do_not_nest(tmp_path, capsys):
    frame = _people(300)
    frame["village"] = "V" + frame.index.astype(str).str[-1]     # V0…V9 in every district
    data = tmp_path / "people.parquet"
    frame.to_parquet(data)
    err = _refused(capsys, data, "--levels", LEVELS, "--out", tmp_path / "x.toml")
    assert "geocode(s) of level 'village' lie in more than one 'district'" in err
    assert "'V" not in err                                  # no value of the data is shown
    assert not (tmp_path / "x.toml").exists()


def test_an_existing_file_is_replaced_only_with_force_and_only_if_init_wrote_it(
        people, tmp_path, capsys):
    out = tmp_path / "people.toml"
    assert _init(people, "--levels", LEVELS, "--out", out) == 0
    first = out.read_text()
    err = _refused(capsys, people, "--levels", LEVELS, "--out", out, "--seed", "2")
    assert "exists; pass --force" in err
    assert out.read_text() == first
    assert _init(people, "--levels", LEVELS, "--out", out, "--seed", "2", "--force") == 0
    assert "seed = 2" in out.read_text()
    mine = tmp_path / "mine.toml"
    mine.write_text("# my own configuration\n")
    err = _refused(capsys, people, "--levels", LEVELS, "--out", mine, "--force")
    assert "was not written by postproc init" in err
    assert mine.read_text() == "# my own configuration\n"


@pytest.mark.parametrize("args, words", [
    (["--epsilon", "-1"], "--epsilon"),
    (["--seed", "-3"], "--seed: simulation mode needs seed"),
    (["--root", "region"], "choose another with --root"),
    (["--skip", "colour"], "--skip names ['colour']"),
])
def test_bad_options(people, tmp_path, capsys, args, words):
    out = tmp_path / "x.toml"
    assert words in _refused(capsys, people, "--levels", LEVELS, "--out", out, *args)
    assert not out.exists()


def test_missing_values_and_identifiers(tmp_path):
    frame = _people(200)
    frame.loc[3, "sex"] = None
    with pytest.raises(PostprocError, match="column 'sex' has missing values"):
        config_text(frame, LEVELS.split(","), data_path="p.parquet")
    with pytest.raises(PostprocError, match="no column besides the levels"):
        config_text(frame[["region", "person_id"]], ["region"], data_path="p.parquet")
