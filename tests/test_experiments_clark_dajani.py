"""Clark & Dajani's bottom-up experiment: the sensitivity Δ of its noise is an option.

The paper's neighbours add or delete one person, so a detailed cell changes by at most 1
(Δ = 1, the default); ``--sensitivity 2`` gives the E2E "change one record" noise, twice as wide.
The checks read the mechanism's parameter ``z = ε/Δ`` from the measurement's provenance (the
table's ``z`` column), not a constant.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest

from hierarchy.mechanisms import two_sided_geometric_variance
from postproc.apps.experiments import run_experiment
from postproc.cli import main
from postproc.errors import PostprocError

SMALL = {"persons": 1_000_000, "states": 2, "seeds": [1, 2], "epsilons": [0.25, 1.0]}


@pytest.fixture(scope="module")
def by_sensitivity(tmp_path_factory):
    runs = {}
    for label, options in (("default", {}), ("one", {"sensitivity": 1}),
                           ("two", {"sensitivity": 2.0})):
        out = tmp_path_factory.mktemp(f"cd_{label}")
        summary = run_experiment("clark_dajani", out, quick=True, log=lambda m: None,
                                 **SMALL, **options)
        table = pd.read_csv(out / "bottom_up_errors.csv")
        runs[label] = (summary, table[table["method"] == "bottom_up"].set_index(
            ["epsilon", "level", "query"]).sort_index())
    return runs


def test_the_default_is_the_papers_add_delete_sensitivity(by_sensitivity):
    summary, table = by_sensitivity["default"]
    assert summary["parameters"]["sensitivity"] == 1.0
    assert "Δ = 1" in summary["ran"]
    assert (table["sensitivity"] == 1.0).all()
    # the mechanism ran with z = ε: the whole budget on a count a person changes by 1
    for epsilon in SMALL["epsilons"]:
        assert (table.loc[epsilon, "z"] == epsilon).all()
    pd.testing.assert_frame_equal(table, by_sensitivity["one"][1])


def test_sensitivity_two_halves_the_mechanisms_parameter_and_widens_the_noise(by_sensitivity):
    _, one = by_sensitivity["one"]
    _, two = by_sensitivity["two"]
    assert (two["sensitivity"] == 2.0).all()
    np.testing.assert_array_equal(two["z"] * 2, one["z"])
    for epsilon in SMALL["epsilons"]:
        # the closed form of each run follows its own z ...
        expected = math.sqrt(two_sided_geometric_variance(epsilon / 2)
                             / two_sided_geometric_variance(epsilon))
        detailed = (epsilon, "enum_dist", "detailed")
        assert two.loc[detailed, "rmse_theory"] / one.loc[detailed, "rmse_theory"] == \
            pytest.approx(expected)
        # ... and so does the simulation: 156 EDs × 192 cells × 2 seeds, within 3 % of it
        assert two.loc[detailed, "l2"] / one.loc[detailed, "l2"] == pytest.approx(expected,
                                                                                  rel=0.03)
        # about 2× at small ε, where the geometric is close to a Laplace of scale Δ/ε
        assert expected > 1.9 if epsilon < 0.5 else expected > 1.5


@pytest.mark.parametrize("value", [0, -1, 0.0, math.nan, math.inf, "2", True, None])
def test_a_bad_sensitivity_is_refused_before_anything_runs(tmp_path, value):
    with pytest.raises(PostprocError, match="sensitivity must be a positive, finite number"):
        run_experiment("clark_dajani", tmp_path / "out", quick=True, log=lambda m: None,
                       sensitivity=value)
    assert not (tmp_path / "out").exists()


def test_cli_sensitivity_option(tmp_path, capsys):
    out = tmp_path / "cd"
    assert main(["experiment", "clark_dajani", "--quick", "--sensitivity", "2",
                 "--out", str(out)]) == 0
    table = pd.read_csv(out / "bottom_up_errors.csv")
    assert set(table["sensitivity"]) == {2.0}
    raw = table[table["method"] == "bottom_up"]
    assert np.allclose(raw["z"], raw["epsilon"] / 2)
    capsys.readouterr()
    assert main(["experiment", "clark_dajani", "--quick", "--sensitivity", "two",
                 "--out", str(tmp_path / "bad")]) == 1
    err = capsys.readouterr().err
    assert "--sensitivity must be a positive, finite number" in err and "'two'" in err
    assert not (tmp_path / "bad").exists()
    assert main(["experiment", "flaxman2019", "--quick", "--sensitivity", "2",
                 "--out", str(tmp_path / "f")]) == 1
    assert "--sensitivity applies to clark_dajani only" in capsys.readouterr().err
    assert not (tmp_path / "f").exists()


def test_cli_persons_sets_the_size_of_the_synthetic_data(tmp_path, capsys):
    """``--persons`` reaches the analysis (the quick variant's 3M persons → 2M: fewer EDs in
    its three states) and bad values or ``--data`` beside it are refused before anything
    runs."""
    sizes = {}
    for persons in ("3_000_000", "2,000,000"):
        out = tmp_path / persons
        assert main(["experiment", "clark_dajani", "--quick", "--persons", persons,
                     "--out", str(out)]) == 0
        summary = json.loads((out / "summary.json").read_text())
        assert summary["parameters"]["persons"] == int(persons.replace("_", "").replace(",", ""))
        sizes[persons] = summary["parameters"]["units"]["enum_dist"]
    assert sizes["2,000,000"] < sizes["3_000_000"]
    capsys.readouterr()
    for bad in ("0", "1e6", "-5", "many"):
        assert main(["experiment", "clark_dajani", "--quick", "--persons", bad,
                     "--out", str(tmp_path / "bad")]) == 1
        assert f"--persons must be a whole number of persons ≥ 1 (e.g. 132000000), not " \
               f"{bad!r}" in capsys.readouterr().err
    assert main(["experiment", "petti_flaxman", "--persons", "1000", "--data",
                 str(tmp_path), "--out", str(tmp_path / "bad")]) == 1
    assert "with --data the files' persons are the data" in capsys.readouterr().err
    assert not (tmp_path / "bad").exists()


def test_cli_workers_runs_petti_flaxman_on_a_process_pool(tmp_path, capsys):
    """``--workers N`` puts petti_flaxman's TopDown on N worker processes (its results are the
    serial run's: executors give TopDown's integers unchanged, tests/test_executors.py); other
    analyses and bad values are refused before anything runs."""
    out = tmp_path / "pf"
    assert main(["experiment", "petti_flaxman", "--quick", "--workers", "2",
                 "--out", str(out)]) == 0
    parameters = json.loads((out / "summary.json").read_text())["parameters"]
    assert (parameters["executor"], parameters["workers"]) == ("process", 2)
    capsys.readouterr()
    assert main(["experiment", "clark_dajani", "--quick", "--workers", "2",
                 "--out", str(tmp_path / "cd")]) == 1
    assert "--workers applies to petti_flaxman only" in capsys.readouterr().err
    assert main(["experiment", "petti_flaxman", "--quick", "--workers", "0",
                 "--out", str(tmp_path / "bad")]) == 1
    assert "--workers must be a whole number ≥ 1 (e.g. 2), not '0'" in capsys.readouterr().err
    assert not any((tmp_path / d).exists() for d in ("cd", "bad"))
