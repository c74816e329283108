"""The reference analyses: every quick variant runs and writes its tables, figures and summary;
the Flaxman quick run shows EPL(GDPC) > EPL(ADPC) > EPL(RDPC); reports of experiment directories.

Why the ordering test is reliable. The quick Flaxman run pools 2 replicates of 97,336 leaves
(n ≈ 195,000 errors per method and ε) at ε = 0.5, 1, 2. The estimates sit near GDPC ≈ ε,
ADPC ≈ 0.55–0.6 ε and RDPC ≈ 0.27–0.3 ε (RDPC's leaf noise has the per-level budget ε/4). Over 30
independent seeds of exactly this configuration the smallest gap at any ε was 0.19 for
GDPC − ADPC (mean 0.22, sd 0.013) and 0.12 for ADPC − RDPC (mean 0.14, sd 0.014), both at
ε = 0.5: the gaps are 10–17 standard deviations from zero, so a false failure is far below 1e-6
even allowing heavy tails. (The improved estimator's own bound says the same: each estimate is
within 4.5 · max_se ≤ 0.21 of its expectation with probability ≥ 1 − 3e-4, and its max_se here is
0.012–0.05.)
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from postproc.cli import main
from postproc.errors import PostprocError
from postproc.experiments import EXPERIMENTS, describe, run_experiment
from postproc.report import render_report, write_report

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def quick_runs(tmp_path_factory):
    base = tmp_path_factory.mktemp("experiments")
    runs = {}
    for name in EXPERIMENTS:
        out = base / name
        runs[name] = (out, run_experiment(name, out, quick=True, log=lambda m: None))
    return runs


@pytest.mark.parametrize("name", sorted(EXPERIMENTS))
def test_quick_variant_writes_its_files(quick_runs, name):
    out, summary = quick_runs[name]
    on_disk = json.loads((out / "summary.json").read_text())
    assert on_disk["experiment"] == name and on_disk["parameters"]["quick"] is True
    assert on_disk["randomness"]["safe_for_release"] is False
    assert summary["tables"] and summary["figures"]
    for item in summary["tables"]:
        frame = pd.read_csv(out / item["file"])
        assert len(frame) > 0 and item["caption"]
    for item in summary["figures"]:
        data = (out / item["file"]).read_bytes()
        assert data.startswith(PNG_MAGIC) and len(data) > 10_000 and item["caption"]
    assert summary["headline"]


def test_flaxman_quick_run_orders_the_methods(quick_runs):
    out, summary = quick_runs["flaxman2019"]
    leaf = pd.read_csv(out / "leaf_epl.csv")
    assert len(leaf) == 3
    assert (leaf["gdpc"] > leaf["adpc"]).all() and (leaf["adpc"] > leaf["rdpc"]).all()
    assert summary["headline"]["ordering_gdpc_gt_adpc_gt_rdpc_at_every_epsilon"] is True
    # GDPC's EPL is ε: 4.5 × the largest max_se rung for n ≈ 195,000 (n^(−1/4) ≈ 0.048) is
    # 0.21; over 30 seeds × 3 ε the largest deviation seen was 0.075
    assert np.allclose(leaf["gdpc"], leaf["epsilon"], rtol=0, atol=0.21)


def test_petti_flaxman_tables_have_the_expected_content(quick_runs):
    out, _ = quick_runs["petti_flaxman"]
    metrics = pd.read_csv(out / "topdown_metrics.csv")
    assert set(metrics["epsilon"]) == {0.5, 2.0}
    assert set(metrics["query"]) == {"total", "va_hisp_race", "va_hisp_race>0"}
    assert (metrics.loc[metrics["query"] == "va_hisp_race>0", "n"]
            <= metrics.loc[metrics["query"] == "va_hisp_race", "n"].to_numpy()).all()
    invariant = metrics[(metrics["level"].isin(["nation", "state"]))
                        & (metrics["query"] == "total")]
    assert (invariant["mae"] == 0).all() and invariant["epl_reason"].notna().all()
    closest = pd.read_csv(out / "closest_srs.csv")
    assert closest["closest_fraction"].between(0.1, 0.9).all()
    assert set(closest["matched_on"]) <= {"mae", "mean_abs"}
    bias = pd.read_csv(out / "bias_by_homogeneity.csv")
    assert bias["homogeneity_index"].between(0, 24).all()


def test_clark_dajani_errors_fall_with_epsilon_and_match_theory(quick_runs):
    out, summary = quick_runs["clark_dajani"]
    table = pd.read_csv(out / "bottom_up_errors.csv")
    raw = table[table["method"] == "bottom_up"].set_index(["level", "query", "epsilon"])
    for level, query in [("enum_dist", "total"), ("county", "va_hisp_race")]:
        assert raw.loc[(level, query, 4.0), "l1"] < raw.loc[(level, query, 0.5), "l1"]
    detailed = raw.xs("detailed", level="query")
    detailed = detailed[detailed.index.get_level_values("level") == "enum_dist"]
    # ~25k noisy cells per seed: the RMSE is within 3 % of its exact expectation
    assert np.allclose(detailed["l2"], detailed["rmse_theory"], rtol=0.03)


def test_cli_runs_an_experiment_and_its_report(tmp_path, capsys):
    out = tmp_path / "cd"
    assert main(["experiment", "clark_dajani", "--quick", "--out", str(out), "--report"]) == 0
    assert "report:" in capsys.readouterr().out
    page = (out / "report.html").read_text()
    assert page.count("data:image/png;base64,") == 3
    assert "bottom_up_errors.csv" in page and "Headline numbers" in page


def test_report_of_an_experiment_directory(quick_runs):
    out, summary = quick_runs["flaxman2019"]
    path = write_report(out)
    page = path.read_text()
    assert page.count("<figure>") == len(summary["figures"])
    for item in summary["figures"] + summary["tables"]:
        assert item["file"] in page
    assert "NOT SAFE FOR A REAL RELEASE" in page
    assert "showing 5 of" in render_report(out, max_rows=5)


def test_unknown_experiment_or_parameter(tmp_path):
    with pytest.raises(PostprocError, match="unknown experiment 'nope'"):
        run_experiment("nope", tmp_path)
    with pytest.raises(PostprocError, match="has no parameter 'persns'"):
        run_experiment("clark_dajani", tmp_path, quick=True, persns=10)
    assert describe("flaxman2019").startswith("Flaxman (2019)")
    with pytest.raises(PostprocError, match="holds no summary.json"):
        write_report(tmp_path)
