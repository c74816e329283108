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

from postproc.apps.experiments import EXPERIMENTS, describe, run_experiment
from postproc.apps.runs.report import render_report, write_report
from postproc.cli import main
from postproc.errors import PostprocError

from _examples import load_example

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
    assert set(metrics["query"]) == {"total", "va_hisp_race", "va_hisp_race>0",
                                     "va_hisp_race:authors"}
    for subset in ("va_hisp_race>0", "va_hisp_race:authors"):
        assert (metrics.loc[metrics["query"] == subset, "n"]
                <= metrics.loc[metrics["query"] == "va_hisp_race", "n"].to_numpy()).all()
    invariant = metrics[(metrics["level"].isin(["nation", "state"]))
                        & (metrics["query"] == "total")]
    assert (invariant["mae"] == 0).all() and invariant["epl_reason"].notna().all()
    closest = pd.read_csv(out / "closest_srs.csv")
    assert closest["joint_fraction"].dropna().between(0.1, 0.9).all()
    assert closest["error_fraction"].between(0.1, 0.9).all()
    assert set(closest["matched_on"]) <= {"mae", "mean_abs"}
    assert set(closest["epl_estimator"]) == {"improved", "published"}
    bias = pd.read_csv(out / "bias_by_homogeneity.csv")
    assert bias["homogeneity_index"].between(0, 24).all()


def test_petti_flaxman_paper_grid_and_seeds():
    """Review item 3: the paper's ε grid (with 6) and its 4 seeds in the full run; the authors'
    homogeneity index by default."""
    from postproc.apps.experiments.petti_flaxman import FULL

    assert FULL["epsilons"] == [0.25, 0.5, 0.75, 1.0, 2.0, 4.0, 6.0, 8.0]
    assert len(FULL["seeds"]) == 4 and len(set(FULL["seeds"])) == 4
    assert FULL["homogeneity"] == "authors"


def test_petti_flaxman_exact_median_is_over_the_cells_pooled(quick_runs):
    """Review item 6: the exact_median of the va_hisp_race>0 rows is over the populated cells
    (so at least 1), not over all 24 cells (0 at counties and EDs: most cells are empty)."""
    out, _ = quick_runs["petti_flaxman"]
    metrics = pd.read_csv(out / "topdown_metrics.csv").set_index(["epsilon", "level", "query"])
    for epsilon in (0.5, 2.0):
        for level in ("county", "enum_dist"):
            populated = metrics.loc[(epsilon, level, "va_hisp_race>0"), "exact_median"]
            every = metrics.loc[(epsilon, level, "va_hisp_race"), "exact_median"]
            assert populated >= 1 and every == 0


def test_petti_flaxman_joint_srs_match(quick_runs):
    """Review item 2: the SRS match is the nearest point on log-log (EPL, error) axes; the
    error-only match is kept beside it. The grid fraction of the joint match is never farther
    (in that distance) than the error-only grid fraction."""
    out, _ = quick_runs["petti_flaxman"]
    closest = pd.read_csv(out / "closest_srs.csv")
    srs = pd.read_csv(out / "srs_metrics.csv")
    joint = closest.dropna(subset=["joint_fraction"])
    assert len(joint) > 0
    for _, row in joint.iterrows():
        epl = {"improved": "epl", "published": "epl_published"}[row["epl_estimator"]]
        grid = srs[(srs["level"] == row["level"]) & (srs["query"] == row["query"])]
        grid = grid.set_index("fraction")

        def distance(fraction):
            point = grid.loc[fraction]
            return np.hypot(np.log(point[epl] / row["topdown_epl"]),
                            np.log(max(point[row["matched_on"]], 1e-9) / row["topdown_error"]))

        assert distance(row["joint_fraction"]) <= distance(row["error_fraction"]) + 1e-12
        assert row["joint_distance"] <= distance(row["joint_fraction"]) + 1e-12


def test_petti_flaxman_bias_at_counties_and_eds_both_definitions(quick_runs):
    """Review items 1 and 4: bias by homogeneity index at counties as well as EDs, under the
    authors' index (default, in the figure) and the paper text's zero-cell count."""
    out, summary = quick_runs["petti_flaxman"]
    bias = pd.read_csv(out / "bias_by_homogeneity.csv")
    assert set(bias["level"]) == {"county", "enum_dist"}
    assert set(bias["definition"]) == {"authors", "zero_cells"}
    units = summary["parameters"]["units"]
    seeds = len(summary["parameters"]["seeds"])
    for (level, definition, epsilon), part in bias.groupby(["level", "definition", "epsilon"]):
        assert part["n"].sum() == units[level] * seeds
    # the authors' index is never above the zero-cell count, so its mean is not either
    for level, part in bias[bias["epsilon"] == 0.5].groupby("level"):
        mean = {d: np.average(g["homogeneity_index"], weights=g["n"])
                for d, g in part.groupby("definition")}
        assert mean["authors"] <= mean["zero_cells"]
    assert any(f["file"] == "bias_by_homogeneity.png" for f in summary["figures"])
    assert any(k.startswith("bias county total@") for k in summary["headline"])


def test_petti_flaxman_sets_our_numbers_beside_the_papers(quick_runs):
    out, _ = quick_runs["petti_flaxman"]
    table = pd.read_csv(out / "paper_comparison.csv")
    assert {"tc_mae", "sc_mae", "tc_epl_published", "tc_bias", "srs_match_joint_tc"} <= set(
        table["quantity"])
    assert table["source"].str.contains("aflaxman/dp_2020_census").all()
    county = table[(table["quantity"] == "tc_bias") & (table["level"] == "county")]
    assert set(county["epsilon"]) == {0.5, 2.0}


@pytest.mark.parametrize("name", ["petti_flaxman", "clark_dajani"])
def test_quick_hierarchies_have_several_units_per_parent(quick_runs, name):
    """Review item 7: with one county per state (the old 100,000-person quick data) county totals
    copy the invariant state totals and every county comparison is degenerate."""
    from postproc.apps.experiments import clark_dajani, petti_flaxman
    from postproc.apps.experiments._common import synthetic_truth

    module = {"petti_flaxman": petti_flaxman, "clark_dajani": clark_dajani}[name]
    geography = synthetic_truth(module.QUICK).geography
    for li in range(1, geography.depth):
        children = np.bincount(geography.parents[li], minlength=geography.n_units(li - 1))
        assert children.min() >= 3, (name, geography.levels[li])
    _, summary = quick_runs[name]
    assert summary["parameters"]["units"] == {lv: geography.n_units(lv)
                                              for lv in geography.levels}


def test_flaxman_quick_trees_have_several_children():
    from postproc.apps.experiments.flaxman2019 import FULL, QUICK
    from postproc.methods.baselines import children_per_node

    for params in (QUICK, FULL):
        assert children_per_node(params["persons"], params["levels"], params["mean_leaf"]) >= 3
        assert children_per_node(params["neighbour_persons"], params["levels"],
                                 params["neighbour_mean_leaf"]) >= 3


def test_flaxman_quick_neighbour_experiment(quick_runs):
    """Review item 5: the D/D′ driver (statistics justified in test_experiments_neighbours.py)."""
    out, summary = quick_runs["flaxman2019"]
    table = pd.read_csv(out / "neighbour_epl.csv")
    assert set(table["method"]) == {"gdpc", "adpc", "rdpc"}
    assert set(table["epsilon"]) == {0.5, 2.0}
    assert set(table["unit"]) == {"source leaf", "destination leaf"}
    assert (table["exact_d"] - table["exact_d_prime"]).abs().eq(1).all()
    for (epsilon, unit), rows in table.groupby(["epsilon", "unit"]):
        epl = rows.set_index("method")["epl"]
        gdpc = rows[rows["method"] == "gdpc"].iloc[0]
        assert abs(gdpc["epl"] - epsilon) < 4.5 * gdpc["max_se"]
        defined = epl[np.isfinite(epl)]
        assert "gdpc" in defined and (defined.drop("gdpc") < defined["gdpc"]).all()
        undefined = rows[~np.isfinite(rows["epl"])]
        assert undefined["epl_reason"].str.contains("too few runs").all()
        if epsilon == 2.0:
            assert undefined.empty and epl["adpc"] > epl["rdpc"]
    assert any(f["file"] == "neighbour_epl.png" for f in summary["figures"])


def test_docs_tables_regenerate_from_the_outputs(quick_runs, capsys):
    """examples/experiment_tables.py prints the markdown tables of docs/experiments.md."""
    module = load_example("experiment_tables")
    base = quick_runs["petti_flaxman"][0].parent
    assert module.main([str(base)]) == 0
    text = capsys.readouterr().out
    for name in ("petti_flaxman tc", "petti_flaxman srs county sc", "petti_flaxman bias county",
                 "flaxman2019 direct", "clark_dajani"):
        assert f"<!-- table: {name}" in text
    assert "| 0.5 |" in text and "| 2 |" in text


def _outside_tables(text):
    """The lines of a markdown page that are not table rows or the titles of a marked table."""
    kept, skipping = [], False
    for line in text.split("\n"):
        if line.startswith("<!-- table: "):
            skipping = True
        elif skipping and line.startswith("|"):
            continue
        elif skipping and not line.startswith("|") and kept and kept[-1].startswith("|"):
            skipping = False
        if not skipping and not line.startswith("|"):
            kept.append(line)
    return kept


def _written_with(module, base, name, run, page):
    """``experiment_tables.py base --write page`` with ``run`` standing in as ``base/name``;
    the page's text after."""
    (base / name).symlink_to(run, target_is_directory=True)
    try:
        assert module.main([str(base), "--write", str(page)]) == 0
    finally:
        (base / name).unlink()
    return page.read_text(encoding="utf-8")


def _first_cells(text, table, cells=1):
    """The first ``cells`` cells of every data row of the table marked ``table`` in ``text``."""
    rows = text.split(f"<!-- table: {table} -->")[1].split("\n\n")[1].split("\n")[2:]
    return [row.split(" | ")[:cells] for row in rows]


def test_docs_tables_are_rewritten_in_place_by_one_command(quick_runs, tmp_path):
    """``experiment_tables.py DIR --write FILE`` replaces every marked table of a copy of
    docs/experiments.md with the quick runs' tables and leaves every other line alone."""
    from pathlib import Path

    module = load_example("experiment_tables")
    page = Path(__file__).resolve().parents[1] / "docs" / "experiments.md"
    copy = tmp_path / "experiments.md"
    copy.write_text(page.read_text(encoding="utf-8"), encoding="utf-8")
    base = quick_runs["petti_flaxman"][0].parent
    assert module.main([str(base), "--write", str(copy)]) == 0
    before, after = page.read_text(encoding="utf-8"), copy.read_text(encoding="utf-8")
    markers = [line for line in before.split("\n") if line.startswith("<!-- table: ")]
    assert len(markers) == 23 and markers == [line for line in after.split("\n")
                                              if line.startswith("<!-- table: ")]
    # the quick petti_flaxman run has ε = 0.5 and 2 only: the full run's ε = 0.25 rows are gone
    tc = after.split("<!-- table: petti_flaxman tc -->")[1].split("\n\n")[1]
    assert [row.split(" | ")[0] for row in tc.split("\n")[2:]] == ["| 0.5", "| 2"]
    assert before != after
    # no petti_flaxman_full output beside them: the full-size run's 9 tables are left as they were
    full = [line for line in before.split("\n") if "table: petti_flaxman_full" in line]
    assert len(full) == 9
    part = before.split(full[0])[1].split("### ")[0]
    assert part in after
    # with one (the quick run standing in for it), they are replaced too, the states' included
    again = _written_with(module, base, "petti_flaxman_full", quick_runs["petti_flaxman"][0],
                          copy)
    assert _first_cells(again, "petti_flaxman_full tc") == [["| 0.5"], ["| 2"]]
    assert _first_cells(again, "petti_flaxman_full state", 2) == [["| 0.5", "0"], ["| 2", "0"]]
    # the full-size run on the counties_1940 composition: its TC and county bias tables only
    assert not any("petti_flaxman_counties_1940 srs" in line for line in markers)
    again = _written_with(module, base, "petti_flaxman_counties_1940",
                          quick_runs["petti_flaxman"][0], copy)
    assert _first_cells(again, "petti_flaxman_counties_1940 tc") == [["| 0.5"], ["| 2"]]
    assert [line for line in _outside_tables(after) if line.strip()] == [
        line for line in _outside_tables(before) if line.strip()]
    # a table the page has no comment for is refused before anything is written
    stripped = tmp_path / "stripped.md"
    stripped.write_text(before.replace("<!-- table: clark_dajani -->", ""), encoding="utf-8")
    with pytest.raises(SystemExit, match="no '<!-- table: NAME -->' comment for clark_dajani"):
        module.main([str(base), "--write", str(stripped)])
    assert stripped.read_text(encoding="utf-8") == before.replace(
        "<!-- table: clark_dajani -->", "")


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
    assert page.count("data:image/png;base64,") == 4       # with the trade-off curve
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


def test_petti_flaxman_composition_shapes_the_synthetic_counties_only(tmp_path, capsys):
    """``composition`` (``--composition``) reaches the synthesizer: the same persons per ED,
    county and state, fewer populated votingage × hispanic × race cells per county
    (``docs/experiments.md``, "What makes the county totals' error"); bad uses are refused
    before anything runs."""
    from hierarchy.queries import e2e_workload
    from hierarchy.schema import E2E_1940
    from postproc.apps.experiments import petti_flaxman
    from postproc.apps.experiments._common import synthetic_truth

    default = synthetic_truth(petti_flaxman.QUICK)
    matched = synthetic_truth({**petti_flaxman.QUICK, "composition": "counties_1940"})
    cells = e2e_workload(E2E_1940)["va_hisp_race"]
    for li in range(default.geography.depth):
        assert np.array_equal(default.counts[li].sum(axis=1), matched.counts[li].sum(axis=1))
    populated = [(cells.answer(t.counts[2]) > 0).sum(axis=1) for t in (default, matched)]
    assert populated[1].mean() < populated[0].mean() - 0.5
    for argv, message in [
            (["petti_flaxman", "--composition", "urban"],
             "--composition must be one of default, counties_1940, counties_eds_1940, not "
             "'urban'"),
            (["clark_dajani", "--composition", "counties_1940"],
             "--composition applies to petti_flaxman only, not clark_dajani"),
            (["petti_flaxman", "--composition", "counties_1940", "--data", str(tmp_path)],
             "--composition shapes the synthetic data; with --data the files are the data")]:
        assert main(["experiment", *argv, "--quick", "--out", str(tmp_path / "bad")]) == 1
        assert message in capsys.readouterr().err
    assert not (tmp_path / "bad").exists()
