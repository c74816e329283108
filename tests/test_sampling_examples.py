"""The conditional-sampling examples run end to end (small settings) and write what they say."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pandas as pd
import pytest

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def _load(name: str):
    spec = importlib.util.spec_from_file_location(name, EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_gong_example_table_and_figure(tmp_path, capsys):
    gong = _load("gong_sex_age")
    assert gong.main(["--out", str(tmp_path), "--replicates", "6", "--seed", "1", "--sweeps",
                      "60", "--mis-draws", "3000", "--no-diagnostics", "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    table = pd.read_csv(tmp_path / "comparison.csv")
    assert list(table["key"]) == ["a", "b", "c", "c_mis", "d"]
    assert (table["replicates"] == 6).all()
    by = table.set_index("key")
    assert by.loc["c", "in_S_star"] == 1 and by.loc["c", "integer"] == 1
    assert by.loc["b", "in_S_star"] == 1 and by.loc["a", "in_S_star"] == 0
    assert (tmp_path / "comparison.png").stat().st_size > 0
    assert summary["replicates"] == 6 and len(summary["comparison"]) == 5


@pytest.mark.slow
def test_gong_example_diagnostic_figures(tmp_path):
    gong = _load("gong_sex_age")
    assert gong.main(["--out", str(tmp_path), "--replicates", "4", "--sweeps", "50",
                      "--mis-draws", "3000"]) == 0
    for name in ("acceptance.png", "traces_mis.png", "traces_lattice.png", "ess.png"):
        assert (tmp_path / name).stat().st_size > 0


def test_compare_topdown_sampling_example(tmp_path, capsys):
    compare = _load("compare_topdown_sampling")
    assert compare.main(["--out", str(tmp_path), "--persons", "3000", "--sweeps", "5",
                         "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    table = pd.read_csv(tmp_path / "comparison.csv")
    assert set(table["method"]) == {"topdown", "sampled", "sampled_all"}
    assert set(table["level"]) == {"nation", "state", "county", "enum_dist"}
    # 'tot' is invariant at nation and state: zero error for every method
    held = table[(table["query"] == "total") & table["level"].isin(["nation", "state"])]
    assert (held["mean_abs"] == 0).all()
    assert (held["epl_kind"] == "unbounded").all() and (held["epl_text"] == "unbounded").all()
    # every other row is a number, a lower bound or undefined, and its text says which
    rest = table.drop(held.index)
    assert set(rest["epl_kind"]) <= {"estimate", "bound", "undefined"}
    bounds = rest[rest["epl_kind"] == "bound"]
    assert bounds["epl_text"].str.startswith("≥ ").all() and bounds["epl_low"].gt(0).all()
    numbers = rest[rest["epl_kind"] == "estimate"]
    assert numbers["epl"].gt(0).all() and len(numbers) > 0
    assert summary["persons"] == 3000
