"""The accuracy–ε curve (Clark & Dajani 2019): :mod:`postproc.evaluation.tradeoff` and
``postproc tradeoff``.

The statistical checks run on a hand-made table (a nation, 20 states, 400 counties; random
counts in the 192 cells of the E2E schema), so that one measurement holds tens of thousands of
independent noisy answers. Their tolerances and false-failure rates (for a random seed; the seeds
here are fixed, so the tests are deterministic):

* a share within ±k over ``n`` independent answers is a mean of ``n`` independent Bernoulli
  variables, so by Hoeffding's inequality it lies within ``√(ln(2/δ)/(2n))`` of its expectation
  but with probability at most ``δ``; ``δ = 1e-6`` per comparison, a union bound below 1e-4 over
  the comparisons of a test;
* a mean of squared errors over ``n`` independent answers that each sum ``m`` draws, of kurtosis
  ``κ_m = 3 + (κ₁ − 3)/m`` (``κ₁`` from the pmf), has relative standard deviation
  ``√((κ_m − 1)/n)``; the tolerance is 6 of them (normal approximation, ``n`` in the thousands:
  about 2e-9 per comparison);
* the curve falls with ε: the expected L1 halves (or more) each time ε doubles, and the
  observed means over at least 40 answers per point sit within a few per cent of it (and the
  draws of one seed are coupled across ε, common random numbers), so a rise is many standard
  deviations away.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from _configs import e2e_config, save_config

from hierarchy.budget import Budget
from hierarchy.geography import Geography
from hierarchy.histograms import Hierarchy
from hierarchy.mechanisms import (
    DiscreteGaussian,
    discrete_gaussian_pmf,
    two_sided_geometric_pmf,
    two_sided_geometric_variance,
)
from hierarchy.queries import e2e_workload
from hierarchy.schema import E2E_1940
from hierarchy.synth import write_synthetic_1940
from postproc.cli import main
from postproc.errors import PostprocError
from postproc.evaluation.tradeoff import (
    MEASURED,
    accuracy,
    check_arguments,
    expected_accuracy,
    tradeoff_curve,
    tradeoff_table,
)
from postproc.evaluation.tradeoff_outputs import plot_tradeoff, write_tradeoff
from postproc.gate import label_table

LEVELS = ("nation", "state", "county")
WORKLOAD = e2e_workload(E2E_1940)
#: Bottom-up (Clark & Dajani): the whole budget on the counties' detailed cells, Δ = 1.
BOTTOM_UP = Budget("pure", 1, {"county": 1}, {"detailed": 1}, "add_remove")
DELTA = 1e-6


@pytest.fixture(scope="module")
def truth() -> Hierarchy:
    states, per_state = 20, 20
    counties = states * per_state
    geography = Geography(LEVELS, (["0"], [f"{s:02d}" for s in range(states)],
                                   [f"{c:04d}" for c in range(counties)]),
                          ([-1], [0] * states, np.repeat(np.arange(states), per_state)))
    rng = np.random.default_rng(20190101)
    bottom = rng.poisson(rng.gamma(0.5, 6.0, size=(counties, E2E_1940.size)))
    state = bottom.reshape(states, per_state, -1).sum(axis=1)
    return Hierarchy(E2E_1940, geography, (state.sum(axis=0, keepdims=True), state, bottom))


def hoeffding(n: int) -> float:
    return math.sqrt(math.log(2 / DELTA) / (2 * n))


def kurtosis(pmf: np.ndarray, support: np.ndarray) -> float:
    variance = float(support.astype(float) ** 2 @ pmf)
    return float(support.astype(float) ** 4 @ pmf) / variance ** 2


def law_by_convolution(pmf: np.ndarray, m: int) -> np.ndarray:
    law = pmf
    for _ in range(m - 1):
        law = np.convolve(law, pmf)
    return law


# -- the exact law ------------------------------------------------------------------------------

@pytest.mark.parametrize("z,m", [(0.3, 1), (1.0, 2), (1.0, 8), (0.25, 20), (3.0, 50)])
def test_expected_shares_are_the_law_of_the_sum(z, m):
    """The FFT law of a sum of m geometric draws equals brute-force convolution of the pmf."""
    half = int(60 / z) + 10
    support = np.arange(-half, half + 1)
    law = law_by_convolution(two_sided_geometric_pmf(support, z), m)
    values = np.arange(-(law.size // 2), law.size // 2 + 1)
    got = expected_accuracy("geometric", z, [m], within=[0, 1, 5, 10])
    assert got["expected_l1"] == pytest.approx(float(np.abs(values) @ law), rel=1e-9)
    for k in (0, 1, 5, 10):
        assert got[f"expected_within_{k}"] == pytest.approx(law[np.abs(values) <= k].sum(),
                                                            abs=1e-12)
    assert got["expected_l2"] ** 2 == pytest.approx(m * two_sided_geometric_variance(z),
                                                    rel=1e-12)


def test_expected_shares_of_continuous_noise_are_not_claimed():
    got = expected_accuracy("laplace", 2.0, [1, 3], within=[0])
    assert got["expected_l2"] ** 2 == pytest.approx(2 * 2 * 2.0 ** 2)
    assert math.isnan(got["expected_l1"]) and math.isnan(got["expected_within_0"])


def test_accuracy_counts_within_k_inclusively():
    got = accuracy(np.array([[0, 1], [-1, 2]]), within=[0, 1])
    assert got == {"l1": 1.0, "l2": math.sqrt(1.5), "within_0": 0.25, "within_1": 0.75}
    assert accuracy([1e-12, 1 + 1e-12], within=[0, 1])["within_1"] == 1.0   # float rounding
    with pytest.raises(PostprocError, match="finite"):
        accuracy([np.nan])


# -- the curve on the hand-made table -----------------------------------------------------------

def test_observed_shares_agree_with_the_exact_pmf(truth):
    """Bottom-up at ε = 1: the counties' detailed cells are single draws (m = 1), the counties'
    va_hisp_race answers sums of 8 cells, the states' detailed cells sums of 20 counties'."""
    seeds = [1, 2]
    curve = tradeoff_curve(truth, workload=WORKLOAD, budget=BOTTOM_UP, grid=[1.0], seeds=seeds,
                           queries=["detailed", "va_hisp_race"], within=[0, 1, 5, 10])
    table = tradeoff_table(curve).set_index(["level", "query"])
    z = 1.0
    support = np.arange(-200, 201)
    pmf = two_sided_geometric_pmf(support, z)
    for (level, query), m in {("county", "detailed"): 1, ("county", "va_hisp_race"): 8,
                              ("state", "detailed"): 20}.items():
        row = table.loc[(level, query)]
        assert row["summed"] == m
        law = law_by_convolution(pmf, m)
        values = np.arange(-(law.size // 2), law.size // 2 + 1)
        n = int(row["answers"]) * len(seeds)
        for k in (0, 1, 5, 10):
            exact = law[np.abs(values) <= k].sum()              # independent of the library
            assert row[f"expected_within_{k}"] == pytest.approx(exact, abs=1e-12)
            assert abs(row[f"within_{k}"] - exact) < hoeffding(n), (level, query, k)


def test_observed_shares_agree_with_the_discrete_gaussian_pmf(truth):
    """A zCDP budget (the grid is ρ) with discrete Gaussian noise: σ² = Δ₂²/(2ρ) = 1 at ρ = 1/2."""
    budget = Budget("zcdp", "1/2", {"county": 1}, {"detailed": 1}, "add_remove")
    curve = tradeoff_curve(truth, workload=WORKLOAD, budget=budget, grid=[0.5],
                           mechanism=DiscreteGaussian(exact=False), seeds=[3],
                           queries=["detailed"], within=[0, 1, 2])
    assert "rho" in curve.columns and "epsilon" not in curve.columns
    row = curve.set_index("level").loc["county"]
    support = np.arange(-40, 41)
    pmf = discrete_gaussian_pmf(support, 1.0)
    for k in (0, 1, 2):
        exact = pmf[np.abs(support) <= k].sum()
        assert row[f"expected_within_{k}"] == pytest.approx(exact, abs=1e-12)
        assert abs(row[f"within_{k}"] - exact) < hoeffding(int(row["answers"]))


def test_squared_l2_of_sums_is_m_times_the_variance(truth):
    """L2² ≈ m·σ²: sums of m noisy cells (bottom-up), and the E2E split's totals, each the sum
    of the 24 va_hisp_race answers of its unit (the most precise measured query that determines
    the total)."""
    seeds = [1, 2, 3]
    curve = tradeoff_table(tradeoff_curve(
        truth, workload=WORKLOAD, budget=BOTTOM_UP, grid=[1.0], seeds=seeds,
        queries=["detailed", "va_hisp_race"], within=[])).set_index(["level", "query"])
    z, half = 1.0, 200
    support = np.arange(-half, half + 1)
    kappa = kurtosis(two_sided_geometric_pmf(support, z), support)
    for (level, query), m in {("county", "va_hisp_race"): 8, ("state", "detailed"): 20}.items():
        row = curve.loc[(level, query)]
        expected = m * two_sided_geometric_variance(z)
        assert row["expected_l2"] ** 2 == pytest.approx(expected, rel=1e-12)
        n = int(row["answers"]) * len(seeds)
        tolerance = 6 * math.sqrt((3 + (kappa - 3) / m - 1) / n)
        assert abs(row["l2"] ** 2 / expected - 1) < tolerance, (level, query)

    epsilon = 2.0
    e2e = tradeoff_table(tradeoff_curve(
        truth, workload=WORKLOAD, budget=Budget.e2e(1, LEVELS), grid=[epsilon],
        seeds=[1, 2, 3, 4], queries=["total"], within=[0])).set_index("level")
    # each level's share ε/3, va_hisp_race's 0.675 of it, Δ₁ = 2 (change one record)
    z_va = epsilon / 3 * 0.675 / 2
    expected = 24 * two_sided_geometric_variance(z_va)
    county = e2e.loc["county"]
    assert county["answer_from"] == "sum of va_hisp_race" and county["summed"] == 24
    assert county["expected_l2"] ** 2 == pytest.approx(expected, rel=1e-12)
    n = int(county["answers"]) * 4
    kappa_va = kurtosis(two_sided_geometric_pmf(np.arange(-400, 401), z_va), np.arange(-400, 401))
    assert abs(county["l2"] ** 2 / expected - 1) < 6 * math.sqrt((3 + (kappa_va - 3) / 24 - 1)
                                                                 / n)


def test_the_curve_falls_with_epsilon(truth):
    grid = [0.25, 0.5, 1, 2, 4]
    table = tradeoff_table(tradeoff_curve(truth, workload=WORKLOAD, budget=Budget.e2e(1, LEVELS),
                                          grid=grid, seeds=[1, 2], within=[0, 1, 5]))
    assert sorted(set(table["epsilon"])) == grid
    for (level, query), rows in table.groupby(["level", "query"]):
        rows = rows.sort_values("epsilon")
        assert (np.diff(rows["expected_l1"]) < 0).all(), (level, query)
        for k in (0, 1, 5):
            assert (np.diff(rows[f"expected_within_{k}"]) > 0).all(), (level, query, k)
        if rows["answers"].iloc[0] >= 20:
            assert (np.diff(rows["l1"]) < 0).all(), (level, query)
            for k in (0, 1, 5):
                assert (np.diff(rows[f"within_{k}"]) >= -hoeffding(rows["answers"].iloc[0] * 2)
                        ).all(), (level, query, k)
    # on average over every level and query, too
    mean = table.groupby("epsilon")[["l1", "within_5"]].mean()
    assert (np.diff(mean["l1"]) < 0).all() and (np.diff(mean["within_5"]) > 0).all()


def test_a_post_processed_curve_has_no_closed_form(truth):
    curve = tradeoff_curve(truth, workload=WORKLOAD, budget=Budget.e2e(1, LEVELS), grid=[1, 4],
                           seeds=[1], queries=["total"], within=[0], method="hay")
    assert set(curve["method"]) == {"hay"} and set(curve["answer_from"]) == {"hay"}
    assert curve[["summed", "expected_l1", "expected_l2", "expected_within_0"]].isna().all().all()
    assert (curve["l1"] > 0).all()
    raw = tradeoff_curve(truth, workload=WORKLOAD, budget=Budget.e2e(1, LEVELS), grid=[1, 4],
                         seeds=[1], queries=["total"], within=[0])
    assert set(raw["method"]) == {MEASURED}
    # least squares uses every level's measurements: the county totals are more accurate
    assert (curve.query("level == 'county'")["l1"].to_numpy()
            < raw.query("level == 'county'")["l1"].to_numpy()).all()


def test_the_same_seed_gives_the_same_curve_and_seeds_differ(truth):
    def run(seeds):
        return tradeoff_curve(truth, workload=WORKLOAD, budget=BOTTOM_UP, grid=[1], seeds=seeds,
                              queries=["total"], within=[0])

    pd.testing.assert_frame_equal(run([5]), run([5]))
    assert not run([5])["l1"].equals(run([6])["l1"])
    assert run([5]).attrs["randomness"]["mode"] == "simulation"


def test_bad_arguments_are_refused_naming_them(truth):
    assert check_arguments([1, 2], [1, 2], []) == ((1.0, 2.0), (1, 2), ())
    for args, match in [(([0], [1], [0]), "epsilons must be positive, finite numbers"),
                        (([math.inf], [1], [0]), "epsilons must be positive"),
                        (([math.nan], [1], [0]), "epsilons must be positive"),
                        (([True], [1], [0]), "epsilons must be positive"),
                        (([], [1], [0]), "epsilons must hold at least one"),
                        (([1, 1.0], [1], [0]), "epsilons repeat 1"),
                        (([1], [-1], [0]), "seeds must be non-negative integers"),
                        (([1], [], [0]), "seeds must hold at least one"),
                        (([1], [1], [-1]), "within must be non-negative integers"),
                        (([1], [1], [0.5]), "within must be non-negative integers")]:
        with pytest.raises(PostprocError, match=match):
            check_arguments(*args)
    with pytest.raises(PostprocError, match="rhos must be positive"):
        tradeoff_curve(truth, workload=WORKLOAD, budget=Budget("zcdp", 1, {"county": 1},
                                                                {"detailed": 1}),
                       grid=[-1], mechanism="discrete_gaussian")
    with pytest.raises(PostprocError, match="unknown post-processor 'hays'"):
        tradeoff_curve(truth, workload=WORKLOAD, budget=BOTTOM_UP, grid=[1], method="hays")


def test_figure_and_files(truth, tmp_path):
    curve = tradeoff_curve(truth, workload=WORKLOAD, budget=BOTTOM_UP, grid=[0.5, 2], seeds=[1],
                           queries=["total", "detailed"], within=[0, 5])
    fig = plot_tradeoff(curve)
    assert [ax.get_title() for ax in fig.axes][:3] == ["total: L1", "total: within ±0",
                                                       "total: within ±5"]
    assert len(fig.axes) == 6 and "simulation" in fig.get_suptitle()
    assert fig.axes[0].get_xscale() == "log"
    files = write_tradeoff(curve, tmp_path / "curve")
    assert [f.name for f in files] == ["tradeoff.csv", "tradeoff_by_seed.csv", "tradeoff.png",
                                       "tradeoff.json"]
    assert files[2].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    with pytest.raises(PostprocError, match="no randomness label"):
        plot_tradeoff(pd.DataFrame(curve))                 # attrs lost: may be anything
    released = label_table(curve.copy(), "release")
    with pytest.raises(PostprocError, match="release-mode"):
        write_tradeoff(released, tmp_path / "released")


# -- the command --------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def data(tmp_path_factory) -> Path:
    directory = tmp_path_factory.mktemp("data")
    write_synthetic_1940(directory, 2_000, seed=4, progress=False)
    return directory


def write_config(directory: Path, data: Path, **options) -> Path:
    return save_config(directory / "run.toml", e2e_config(data, levels=LEVELS, **options))


def test_cli_writes_the_csv_the_figure_and_the_json(data, tmp_path, capsys):
    config = write_config(tmp_path, data)
    out = tmp_path / "curve"
    argv = ["tradeoff", str(config), "--epsilons", "0.5", "2", "--seeds", "1", "2",
            "--within", "0", "1", "5", "--out", str(out), "--json", "--no-progress"]
    assert main(argv) == 0
    captured = capsys.readouterr()
    document = json.loads(captured.out)
    assert "SIMULATION MODE" in captured.err
    assert document == json.loads((out / "tradeoff.json").read_text())
    assert document["randomness"]["mode"] == "simulation"
    assert document["randomness"]["safe_for_release"] is False
    assert document["values"] == [0.5, 2.0] and document["seeds"] == [1, 2]
    assert document["within"] == [0, 1, 5] and document["method"] == MEASURED
    assert document["files"] == ["tradeoff.csv", "tradeoff_by_seed.csv", "tradeoff.png",
                                 "tradeoff.json"]
    table = pd.read_csv(out / "tradeoff.csv")
    queries = ["total", "detailed", "hhgq", "va_hisp_race"]
    assert len(table) == 2 * len(LEVELS) * len(queries) == len(document["rows"])
    assert {"epsilon", "level", "query", "l1", "l2", "within_0", "within_1", "within_5",
            "expected_l1", "expected_l2", "expected_within_5", "randomness"} <= set(table.columns)
    assert table["randomness"].str.startswith("simulation: NOT SAFE FOR RELEASE").all()
    assert len(pd.read_csv(out / "tradeoff_by_seed.csv")) == 2 * len(table)
    assert (out / "tradeoff.png").read_bytes()[:4] == b"\x89PNG"
    first = (out / "tradeoff.csv").read_bytes()
    assert main(argv[:-2] + ["--no-progress"]) == 0           # its own directory: replaced
    text = capsys.readouterr().out
    assert "within_5" in text and "not safe for release" in text
    assert (out / "tradeoff.csv").read_bytes() == first       # the same seeds, the same curve


def test_cli_post_processes_each_replicate_with_method(data, tmp_path, capsys):
    config = write_config(tmp_path, data)
    out = tmp_path / "hay"
    assert main(["tradeoff", str(config), "--epsilons", "1", "--method", "hay", "--queries",
                 "total", "--out", str(out), "--json", "--no-progress"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["method"] == "hay" and document["seeds"] == [1]     # the config's seed
    assert {row["answer_from"] for row in document["rows"]} == {"hay"}
    assert all(row["expected_l2"] is None for row in document["rows"])


def test_cli_refuses_a_release_mode_config(data, tmp_path, capsys):
    config = write_config(tmp_path, data, mode="release")
    out = tmp_path / "curve"
    assert main(["tradeoff", str(config), "--epsilons", "1", "--out", str(out)]) == 1
    err = capsys.readouterr().err
    assert "postproc tradeoff: error:" in err and "simulation tool" in err
    assert 'mode = "simulation"' in err and "seed" in err
    assert not out.exists()


@pytest.mark.parametrize("argv,message", [
    (["--epsilons", "0"], "argument --epsilons: must be a positive, finite number, not '0'"),
    (["--epsilons", "1", "-1"], "argument --epsilons: must be a positive, finite number"),
    (["--epsilons", "nan"], "argument --epsilons: must be a positive, finite number"),
    (["--epsilons", "inf"], "argument --epsilons: must be a positive, finite number"),
    (["--epsilons", "one"], "argument --epsilons: must be a positive, finite number"),
    (["--epsilons", "1", "--within", "-1"], "argument --within: must be a non-negative integer"),
    (["--epsilons", "1", "--within", "0.5"], "argument --within: must be a non-negative integer"),
    (["--epsilons", "1", "--seeds", "-3"], "argument --seeds: must be a non-negative integer"),
    ([], "one of the arguments --epsilons --rhos is required"),
])
def test_cli_refuses_bad_arguments_naming_them(data, tmp_path, capsys, argv, message):
    config = write_config(tmp_path, data)
    with pytest.raises(SystemExit) as exit_:
        main(["tradeoff", str(config), *argv, "--out", str(tmp_path / "curve")])
    assert exit_.value.code == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "curve").exists()


@pytest.mark.parametrize("argv,message", [
    (["--epsilons", "1", "1"], "epsilons repeat 1"),
    (["--rhos", "0.5"], "give the grid as epsilons, not rhos"),
    (["--epsilons", "1", "--method", "hays"], "unknown post-processor 'hays'"),
])
def test_cli_refuses_inconsistent_arguments_before_writing(data, tmp_path, capsys, argv,
                                                           message):
    config = write_config(tmp_path, data)
    assert main(["tradeoff", str(config), *argv, "--out", str(tmp_path / "curve")]) == 1
    assert message in capsys.readouterr().err
    assert not (tmp_path / "curve").exists()


def test_cli_missing_config_and_a_directory_not_ours(data, tmp_path, capsys):
    assert main(["tradeoff", str(tmp_path / "none.toml"), "--epsilons", "1"]) == 1
    assert "none.toml does not exist" in capsys.readouterr().err
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep")
    config = write_config(tmp_path, data)
    assert main(["tradeoff", str(config), "--epsilons", "1", "--out", str(mine)]) == 1
    assert "not empty and was not written by this toolkit" in capsys.readouterr().err
    assert [p.name for p in mine.iterdir()] == ["notes.txt"]
