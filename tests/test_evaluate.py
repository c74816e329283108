"""postproc.evaluation.evaluate and ``postproc evaluate``: the JSON's keys and values on a small
run, checked against an independent computation from the run's files; raw-measurement answers;
the comparison of post-processors; the HTML report of a run directory; errors that name the
problem."""

from __future__ import annotations

import json
import math
import re

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

from hierarchy.queries import total
from hierarchy.synth import synthesize_1940
from hierarchy.tabulation import tabulate
from postproc.apps.runs.directories import load_run, load_truth
from postproc.cli import main
from postproc.errors import PostprocError
from postproc.evaluation.epl import improved_epl
from postproc.evaluation.evaluate import (
    compare_postprocessors,
    evaluate,
    pivot,
    to_json,
)
from postproc.evaluation.metrics import error_metrics
from postproc.methods.baselines import TreeCounts, gdpc
from postproc.result import histograms_from_table

LEVELS = ["nation", "state", "county", "enum_dist"]


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    from postproc.apps.runs.demo import run_demo

    out = tmp_path_factory.mktemp("evaluate") / "demo"
    run_demo(out, persons=40_000, seed=7, epsilon=2.0, progress=False, log=lambda m: None)
    return out


@pytest.fixture(scope="module")
def cli_json(demo):
    def run(*extra):
        import contextlib
        import io

        buffer = io.StringIO()
        with contextlib.redirect_stdout(buffer):
            code = main(["evaluate", str(demo / "run"), "--truth", str(demo / "data"), "--json",
                         "--seed", "3", *extra])
        assert code == 0
        return json.loads(buffer.getvalue())
    return run


def test_evaluate_json_keys(cli_json):
    result = cli_json()
    assert list(result) == LEVELS
    for level in LEVELS:
        assert list(result[level]) == ["total", "detailed", "hhgq", "va_hisp_race"]
        for query, metrics in result[level].items():
            assert {"mae", "mean_abs", "rmse", "epl", "epl_ci_low", "epl_ci_high", "n",
                    "epl_reason"} <= set(metrics)
            assert metrics["epl"] is None or metrics["epl"] >= 0
            assert (metrics["epl"] is None) == (metrics["epl_reason"] is not None)


def test_evaluate_json_values_match_an_independent_computation(cli_json, demo):
    result = cli_json()
    data = synthesize_1940(40_000, seed=7)
    run = load_run(demo / "run")
    geography = run.estimate.geography
    truth = tabulate(data.persons, schema=run.estimate.schema, levels=LEVELS, units=data.units,
                     geography=geography)
    tot = total(run.estimate.schema)
    for li, level in enumerate(LEVELS):
        table = pq.read_table(demo / "run" / f"{level}.parquet")
        hist = histograms_from_table(table, run.estimate.schema, geography, level)
        vhr = run.estimate.workload["va_hisp_race"]
        for name, query in (("total", tot), ("va_hisp_race", vhr)):
            dp, exact = query.answer(hist), query.answer(truth.counts[li])
            expected = error_metrics(dp, exact)
            got = result[level][name]
            for key in ("mae", "mean_abs", "rmse", "n"):
                assert got[key] == pytest.approx(expected[key], rel=1e-12, abs=1e-12)
    # the state totals are invariant: no error, an unbounded EPL (null) with the reason
    state = result["state"]["total"]
    assert state["mae"] == 0 and state["rmse"] == 0 and state["epl"] is None
    assert state["epl_kind"] == "unbounded" and "held invariant" in state["epl_reason"]
    # the ED va_hisp_race EPL equals the improved estimator on the same errors and seed
    ed = result["enum_dist"]["va_hisp_race"]
    hist = histograms_from_table(pq.read_table(demo / "run" / "enum_dist.parquet"),
                                 run.estimate.schema, geography, "enum_dist")
    query = run.estimate.workload["va_hisp_race"]
    errors = (query.answer(hist) - query.answer(truth.counts[-1])).ravel().astype(float)
    assert ed["epl"] is not None
    from hierarchy.randomness import as_randomness
    estimate = improved_epl(errors, rng=as_randomness(3))   # the default n_boot
    assert ed["epl"] == pytest.approx(estimate.epl, rel=1e-12)
    assert ed["epl_ci_low"] == pytest.approx(estimate.ci_low, rel=1e-12)


def test_result_objects_and_run_directories_evaluate_alike(demo):
    run = load_run(demo / "run")
    truth = load_truth(demo / "data", run)
    with pytest.warns(DeprecationWarning, match="evaluate\\(\\) of a directory is deprecated"):
        from_dir = evaluate(demo / "run", truth, queries=["total"], rng=0,
                            epl_options={"n_boot": 0})
    from_estimate = evaluate(run.estimate, truth, queries=["total"], rng=0,
                             epl_options={"n_boot": 0})
    assert from_dir.equals(from_estimate)


def test_noisy_total_is_the_sum_of_the_most_precise_measurement(demo):
    run = load_run(demo / "run")
    values, how = run.noisy.derived_answers("county", "total")
    assert how == "sum of va_hisp_race"
    assert np.array_equal(values[:, 0], run.noisy.get("county", "va_hisp_race").values.sum(1))
    detailed, how = run.noisy.derived_answers("county", "detailed")
    assert how == "detailed"


def test_compare_postprocessors_same_data_same_budget(demo):
    run = load_run(demo / "run")
    truth = load_truth(demo / "data", run)
    with pytest.warns(DeprecationWarning, match="compare_postprocessors is deprecated"):
        table = compare_postprocessors(run.noisy, truth, topdown=run.estimate, rng=1,
                                       queries=["total", "va_hisp_race"],
                                       epl_options={"n_boot": 0})
    assert list(dict.fromkeys(table["method"])) == [
        "noisy", "clip", "hay", "hay+clip", "topdown", "bottom_up", "bottom_up+calibrated"]
    mae = pivot(table, "mae").set_index(["level", "query"])
    # calibrated to the published state totals: exact there and above
    assert mae.loc[("state", "total"), "bottom_up+calibrated"] == pytest.approx(0, abs=1e-6)
    assert mae.loc[("nation", "total"), "topdown"] == 0
    # TopDown beats the raw sums of noisy va_hisp_race at the ED totals
    assert mae.loc[("enum_dist", "total"), "topdown"] < mae.loc[("enum_dist", "total"), "noisy"]
    nested = to_json(table)
    assert set(nested) == set(table["method"]) and nested["topdown"]["state"]["total"]["epl"] \
        is None
    # results= is the general form of topdown=: the given result is compared, not dropped
    with pytest.warns(DeprecationWarning, match="compare_postprocessors is deprecated"):
        same = compare_postprocessors(run.noisy, truth, results={"topdown": run.estimate},
                                      rng=1, queries=["total", "va_hisp_race"],
                                      epl_options={"n_boot": 0})
    pd.testing.assert_frame_equal(same, table)


def test_evaluate_save_and_report(demo):
    assert main(["evaluate", str(demo / "run"), "--truth", str(demo / "data"), "--save",
                 "--queries", "total,va_hisp_race", "--n-boot", "0"]) == 0
    assert (demo / "run" / "confidential" / "evaluation.csv").is_file()
    assert not (demo / "run" / "evaluation.csv").exists()
    saved = json.loads((demo / "run" / "confidential" / "evaluation.json").read_text())
    assert saved["state"]["total"]["epl"] is None
    assert main(["report", str(demo / "run")]) == 0
    page = (demo / "run" / "report.html").read_text()
    assert "evaluation.csv" in page and "SIMULATION MODE" in page and "Levels" in page


def test_evaluate_of_tree_counts():
    pop = TreeCounts.from_leaves(np.full(10_000, 50), 10)
    table = evaluate(gdpc(pop, 1.0, rng=2), pop, rng=0)
    leaf = table.iloc[-1]
    assert leaf["level"] == "level 4" and abs(leaf["epl"] - 1.0) < 4.5 * 0.25 * 1e4 ** -0.25 * 2
    assert math.isinf(table.iloc[0]["epl"]) is False or table.iloc[0]["epl_reason"]


def test_errors_name_the_problem(demo, tmp_path, capsys):
    with pytest.raises(PostprocError, match="no manifest.json"):
        load_run(tmp_path)
    run = load_run(demo / "run")
    with pytest.raises(PostprocError, match=r"no persons file \(persons.parquet, persons.csv\)"):
        load_truth(tmp_path, run)
    other = tabulate(synthesize_1940(5_000, seed=1).persons, schema=run.estimate.schema,
                     levels=LEVELS)
    with pytest.raises(PostprocError, match="geography"):
        evaluate(run.estimate, other)
    with pytest.raises(PostprocError, match="direct EPL"):
        evaluate(run.estimate, load_truth(demo / "data", run), epl_method="direct")
    assert main(["evaluate", str(tmp_path), "--truth", str(demo / "data")]) == 1
    assert "no manifest.json" in capsys.readouterr().err


def test_truth_as_a_file_of_any_name_or_a_directory(demo, tmp_path):
    run = load_run(demo / "run")
    from_dir = load_truth(demo / "data", run)
    own = tmp_path / "census_people_2024.parquet"
    own.write_bytes((demo / "data" / "persons.parquet").read_bytes())
    units = tmp_path / "dwellings.parquet"
    units.write_bytes((demo / "data" / "units.parquet").read_bytes())
    from_file = load_truth(own, run, units=units)
    assert all(np.array_equal(a, b) for a, b in zip(from_file.counts, from_dir.counts))
    assert all(np.array_equal(a, b) for a, b in zip(from_file.units, from_dir.units))
    assert load_truth(own, run).units is None          # a persons file alone: no units
    with pytest.raises(PostprocError, match="does not exist"):
        load_truth(tmp_path / "nowhere.parquet", run)
    args = ["evaluate", str(demo / "run"), "--queries", "total", "--n-boot", "0", "--json"]
    outputs = []
    for truth in (["--truth", str(own), "--units", str(units)], ["--truth", str(demo / "data")]):
        import contextlib
        import io

        buffer = io.StringIO()
        with contextlib.redirect_stdout(buffer):
            assert main(args + truth) == 0
        outputs.append(json.loads(buffer.getvalue()))
    assert outputs[0] == outputs[1] and outputs[0]["state"]["total"]["mae"] == 0


def test_text_collapses_the_reasons_and_offers_the_estimators_options(demo, capsys):
    assert main(["evaluate", str(demo / "run"), "--truth", str(demo / "data"), "--n-boot",
                 "0", "--seed", "3"]) == 0
    out = capsys.readouterr().out
    rows = [ln for ln in out.splitlines() if ln.split()[:1] and ln.split()[0] in LEVELS]
    marked = [ln for ln in rows if re.search(r"(undefined|unbounded|≥ [0-9.]+) \[\d+\]$", ln)]
    notes = [ln for ln in out.splitlines() if re.match(r"\[\d+\] EPL ", ln)]
    assert len(rows) == len(LEVELS) * 4 and marked
    # one note per kind, numbered in order, whose counts add up to the marked rows
    assert [int(n[1:n.index("]")]) for n in notes] == list(range(1, len(notes) + 1))
    counts = [int(re.search(r" in (\d+) rows?", n).group(1)) for n in notes]
    assert sum(counts) == len(marked)
    for k, count in enumerate(counts, start=1):
        assert sum(ln.endswith(f"[{k}]") for ln in marked) == count
    assert len(set(n.split(": ", 1)[1] for n in notes)) == len(notes)
    # the invariant state totals say so; the row shows 'unbounded', not a bare 'undefined'
    invariant = [n for n in notes if "held invariant: the spec publishes tot" in n]
    assert invariant and "EPL unbounded in" in invariant[0]
    assert any(ln.split()[:2] == ["state", "total"] and "unbounded [" in ln for ln in rows)
    assert "--reach" in out and "--precision" in out
    # where a note gives a bound for too few errors, the precision it advises gives a number
    run = load_run(demo / "run")
    table = evaluate(run.estimate, load_truth(demo / "data", run),
                     queries=["va_hisp_race"], rng=0, epl_options={"n_boot": 0})
    bounds = table[table["epl_reason"].fillna("").str.contains("pass precision=")]
    assert len(bounds) and (bounds["epl_kind"] == "bound").all()
    for _, row in bounds.iterrows():
        advised = float(re.search(r"pass precision=([0-9.]+)", row["epl_reason"]).group(1))
        again = evaluate(run.estimate, load_truth(demo / "data", run),
                         queries=["va_hisp_race"], levels=[row["level"]], rng=0,
                         epl_options={"n_boot": 0, "precision": advised})
        assert again["epl_kind"].iloc[0] == "estimate" and np.isfinite(again["epl"].iloc[0])
    assert main(["evaluate", str(demo / "run"), "--truth", str(demo / "data"), "--epl-method",
                 "published", "--reach", "90"]) == 1
    assert "--reach applies to --epl-method improved only" in capsys.readouterr().err


def test_a_directory_given_to_evaluate_is_deprecated_and_reads_as_load_run_gives_it(demo):
    run = load_run(demo / "run")
    truth = load_truth(demo / "data", run)
    with pytest.warns(DeprecationWarning, match=r"load_run\(directory\)\.estimate"):
        from_dir = evaluate(demo / "run", truth, queries=["total", "detailed"], rng=1,
                            epl_options={"n_boot": 0})
    from_run = evaluate(run.estimate, truth, queries=["total", "detailed"], rng=1,
                        epl_options={"n_boot": 0})
    pd.testing.assert_frame_equal(from_dir, from_run)
    assert from_dir.attrs == from_run.attrs and from_dir.attrs["randomness"]


@pytest.mark.parametrize("module, names, home", [
    ("postproc.evaluation.evaluate", ["RunOutput", "load_run", "load_truth", "evaluate_run"],
     "postproc.apps.runs.directories"),
    ("postproc.evaluation.compare", ["CompareOutput", "run_compare", "default_directory"],
     "postproc.apps.runs.directories"),
    ("postproc.evaluation.evaluate", ["epl_notes"], "postproc.reports.notes")])
def test_the_old_paths_of_moved_names_warn_and_give_the_same_object(module, names, home):
    import importlib

    old, new = importlib.import_module(module), importlib.import_module(home)
    for name in names:
        with pytest.warns(DeprecationWarning, match=f"{module}.{name} is deprecated: import "
                                                    f"{name} from {home}"):
            assert getattr(old, name) is getattr(new, name)
        assert name not in old.__all__
    with pytest.raises(AttributeError, match=f"module '{module}' has no attribute 'nonesuch'"):
        old.nonesuch  # noqa: B018
