"""``postproc compare``, :mod:`postproc.evaluation.compare` and ``postproc methods``.

The table's numbers are checked against :func:`postproc.evaluation.evaluate.evaluate` of the same
result; the command is run on a small configuration (nation and state, 2,000 persons) in simulation
mode (files beside each other, table printed) and in release mode (nothing outside
``confidential/``, no number on the terminal); output directories that are not a comparison's are
refused.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from _configs import e2e_config, save_config

from hierarchy.budget import Budget
from hierarchy.io.storage import MARKER
from hierarchy.measurement import measure
from hierarchy.queries import e2e_workload
from hierarchy.schema import E2E_1940
from hierarchy.synth import synthesize_1940, write_synthetic_1940
from hierarchy.tabulation import tabulate
from invariants.spec import Invariant, Spec
from postproc.apps.runs.config import load_config
from postproc.apps.runs.directories import default_directory
from postproc.apps.runs.pipeline import method_rng
from postproc.cli import main
from postproc.errors import PostprocError
from postproc.evaluation.compare import COLUMNS, compare_methods, format_pivot
from postproc.evaluation.evaluate import compare_postprocessors, default_queries, evaluate
from postproc.methods import available, postprocess

LEVELS = ["nation", "state"]
NO_BOOT = {"n_boot": 0}

def write_config(directory: Path, data: Path, *, seed: int | None = 5) -> Path:
    config = e2e_config(data, levels=LEVELS, seed=seed,
                        **({"mode": "release"} if seed is None else {}))
    return save_config(directory / "compare.toml", config)


@pytest.fixture(scope="module")
def measured():
    data = synthesize_1940(2_000, seed=1)
    truth = tabulate(data.persons, schema=E2E_1940, levels=LEVELS)
    noisy = measure(truth, e2e_workload(E2E_1940), Budget.e2e(1, LEVELS), rng=2,
                    publish={"tot": LEVELS})
    return truth, noisy, Spec(invariants=(Invariant("tot", "all"),))


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> Path:
    directory = tmp_path_factory.mktemp("data")
    write_synthetic_1940(directory, 2_000, seed=4)
    return directory


def run_cli(*argv: str) -> int:
    return main(["compare", *argv, "--no-progress", "--n-boot", "0"])


# -- the library ---------------------------------------------------------------------------------

def test_table_columns_and_numbers_equal_evaluate(measured):
    truth, noisy, spec = measured
    queries = ["total", "va_hisp_race"]
    table = compare_methods(noisy, truth, ["sampling", "hay"], spec, rng=9, queries=queries,
                            options={"sampling": {"sweeps": 3}}, epl_options=NO_BOOT)
    assert tuple(table.columns) == COLUMNS
    assert list(dict.fromkeys(table["method"])) == ["sampling", "hay"]
    assert table.groupby("method")["constrained"].all().to_dict() == {"sampling": True,
                                                                      "hay": False}
    assert len(table) == 2 * len(LEVELS) * len(queries)
    results = {"sampling": postprocess(noisy, "sampling", spec, rng=method_rng(9, "sampling"),
                                       sweeps=3),
               "hay": postprocess(noisy, "hay")}
    for name, result in results.items():
        expected = evaluate(result, truth, queries=queries, rng=0, epl_options=NO_BOOT,
                            spec=spec if name == "sampling" else None)
        got = table[table["method"] == name].reset_index(drop=True)
        assert got["level"].tolist() == expected["level"].tolist()
        for mine, theirs in (("n", "n"), ("mae", "mae"), ("mean_abs", "mean_abs"),
                             ("rmse", "rmse"), ("epl", "epl"), ("epl_low", "epl_ci_low"),
                             ("epl_kind", "epl_kind")):
            np.testing.assert_array_equal(got[mine].to_numpy(), expected[theirs].to_numpy())
        assert got["epl_note"].tolist() == expected["epl_reason"].fillna("").tolist()
    # the sampled totals keep the invariant: no error and an EPL that says why it is no number
    exact = table[(table["method"] == "sampling") & (table["query"] == "total")]
    assert (exact["mae"] == 0).all() and np.isinf(exact["epl"]).all()
    assert (exact["epl_note"] != "").all()
    state = exact.set_index("level").loc["state"]
    assert state["epl_kind"] == "unbounded" and "held invariant" in state["epl_note"]


def test_default_queries_are_the_workloads(measured):
    truth, noisy, _ = measured
    table = compare_methods(noisy, truth, ["noisy"], rng=1, epl_options=NO_BOOT)
    assert list(dict.fromkeys(table["query"])) == list(default_queries(noisy.workload))
    assert set(noisy.workload.names) <= set(table["query"])


def test_compare_methods_errors(measured):
    truth, noisy, spec = measured
    with pytest.raises(PostprocError, match="unknown post-processor 'hays'"):
        compare_methods(noisy, truth, ["hays"])
    with pytest.raises(PostprocError, match="more than once"):
        compare_methods(noisy, truth, ["hay", "hay"])
    with pytest.raises(PostprocError, match="unknown option"):
        compare_methods(noisy, truth, ["hay"], options={"hay": {"sweeps": 2}})
    with pytest.raises(PostprocError, match="not among the methods"):
        compare_methods(noisy, truth, ["hay"], options={"sampling": {"sweeps": 2}})
    with pytest.raises(PostprocError, match="direct EPL"):
        compare_methods(noisy, truth, ["hay"], epl_method="direct")


def test_format_pivot_has_a_row_per_query_and_method(measured):
    truth, noisy, spec = measured
    table = compare_methods(noisy, truth, ["topdown", "noisy"], spec, rng=1,
                            queries=["total"], epl_options=NO_BOOT)
    text = format_pivot(table)
    assert "topdown " in text and "noisy (unconstrained)" in text
    header = next(line for line in text.splitlines() if line.startswith("query"))
    assert header.split()[-2:] == LEVELS


def test_compare_postprocessors_runs_registered_methods(measured):
    truth, noisy, spec = measured
    with pytest.warns(DeprecationWarning, match="compare_postprocessors is deprecated"):
        table = compare_postprocessors(noisy, truth, methods=["rake", "least_squares+clip"],
                                       rng=0, queries=["total"], epl_options=NO_BOOT)
    assert list(dict.fromkeys(table["method"])) == [
        "noisy", "rake", "least_squares+clip", "bottom_up", "bottom_up+calibrated"]
    rake = table[table["method"] == "rake"].reset_index(drop=True)
    expected = evaluate(postprocess(noisy, "rake"), truth, queries=["total"], rng=0,
                        epl_options=NO_BOOT)
    np.testing.assert_array_equal(rake["mae"], expected["mae"])
    with pytest.raises(PostprocError, match="'\\+clip'"), pytest.warns(DeprecationWarning):
        compare_postprocessors(noisy, truth, methods=["hay+round"], rng=0)


def test_the_older_runners_are_deprecated_and_give_the_same_tables(measured):
    from hierarchy.randomness import as_randomness
    from postproc.evaluation.evaluate import compare, reference_results
    from postproc.gate import label_table, randomness_of

    truth, noisy, spec = measured
    options = {"queries": ["total", "detailed"], "epl_options": NO_BOOT}
    topdown = postprocess(noisy, "topdown", spec)
    with pytest.warns(DeprecationWarning, match="compare_postprocessors is deprecated"):
        old = compare_postprocessors(noisy, truth, topdown=topdown, spec=spec, rng=6, **options)
    rnd = as_randomness(6)
    made = reference_results(noisy, truth, results={"topdown": topdown}, spec=spec, rng=rnd)
    new = label_table(evaluate(made, truth, spec=spec, rng=rnd.child(1), **options),
                      randomness_of(noisy))
    pd.testing.assert_frame_equal(old, new)
    assert old.attrs == new.attrs and old.attrs["randomness"]
    assert list(made) == ["noisy", "clip", "hay", "hay+clip", "topdown", "bottom_up",
                          "bottom_up+calibrated"] and made["topdown"] is topdown
    results = {"topdown": topdown, "raw": noisy}
    with pytest.warns(DeprecationWarning, match="evaluate.compare is deprecated"):
        old = compare(results, truth, rng=3, **options)
    new = evaluate(results, truth, rng=3, **options)
    pd.testing.assert_frame_equal(old, new)
    assert old.attrs == new.attrs and list(new.columns[:3]) == ["method", "level", "query"]
    for name, result in results.items():         # each result's rows are its own evaluation
        own = evaluate(result, truth, rng=3, **options)
        rows = new[new["method"] == name].drop(columns="method").reset_index(drop=True)
        pd.testing.assert_frame_equal(rows, own)


# -- the command ---------------------------------------------------------------------------------

def test_compare_in_simulation_mode_writes_and_prints_the_table(data, tmp_path, capsys):
    config = write_config(tmp_path, data)
    out = tmp_path / "cmp"
    assert run_cli(str(config), "--methods", "topdown,hay,noisy", "--out", str(out)) == 0
    stdout = capsys.readouterr().out
    for name in ("compare.csv", "compare.json", "compare_epl.png", "compare.html",
                 "manifest.json"):
        assert (out / name).is_file(), name
    assert not (out / "confidential").exists()
    table = pd.read_csv(out / "compare.csv")
    assert tuple(table.columns) == COLUMNS + ("randomness",)       # its label, on every row
    assert table["randomness"].str.startswith("simulation: NOT SAFE FOR RELEASE").all()
    workload = load_config(config).workload
    assert set(table["query"]) == set(default_queries(workload))
    assert len(table) == 3 * len(LEVELS) * len(default_queries(workload))
    rows = json.loads((out / "compare.json").read_text())
    assert len(rows) == len(table) and set(rows[0]) == set(COLUMNS) | {"randomness"}
    assert all(r["epl"] is None for r in rows if r["epl_note"])
    page = (out / "compare.html").read_text()
    assert "data:image/png;base64," in page and "SIMULATION MODE" in page
    assert "MAE (median absolute error) by level" in stdout
    assert "hay (unconstrained)" in stdout and "noisy (unconstrained)" in stdout
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["constrained"] == {"topdown": True, "hay": False, "noisy": False}
    # a second comparison into it replaces the first (it is ours)
    first = (out / "compare.csv").read_bytes()
    assert run_cli(str(config), "--methods", "topdown,hay,noisy", "--out", str(out)) == 0
    assert (out / "compare.csv").read_bytes() == first            # same seed, same table


def test_compare_in_release_mode_writes_only_under_confidential_and_prints_no_number(
        data, tmp_path, capsys):
    config = write_config(tmp_path, data, seed=None)
    out = tmp_path / "cmp"
    assert run_cli(str(config), "--methods", "topdown,sampling,hay", "--out", str(out)) == 0
    captured = capsys.readouterr()
    outside = [p.relative_to(out) for p in out.rglob("*")
               if p.is_file() and p.parts[len(out.parts)] != "confidential"]
    assert {str(p) for p in outside} <= {MARKER, ".dapp-lock"}
    for name in ("compare.csv", "compare.json", "compare_epl.png", "compare.html",
                 "manifest.json"):
        assert (out / "confidential" / name).is_file(), name
    for stream in (captured.out, captured.err):
        text = stream.replace(str(out), "DIR")
        assert not re.search(r"\d", text), text
    assert "MAE" not in captured.out and "CONFIDENTIAL" in captured.out
    table = pd.read_csv(out / "confidential" / "compare.csv")
    assert set(table["method"]) == {"topdown", "sampling", "hay"}
    assert table["randomness"].str.startswith("release: CONFIDENTIAL").all()


def test_compare_refuses_directories_it_did_not_write(data, tmp_path, capsys):
    config = write_config(tmp_path, data)
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep")
    assert run_cli(str(config), "--methods", "hay", "--out", str(mine)) == 1
    assert "not empty and was not written by this toolkit" in capsys.readouterr().err
    assert [p.name for p in mine.iterdir()] == ["notes.txt"]
    run = tmp_path / "run"
    assert main(["run", str(config), "--method", "noisy", "--out", str(run),
                 "--no-progress"]) == 0
    capsys.readouterr()
    assert run_cli(str(config), "--methods", "hay", "--out", str(run)) == 1
    assert "not of postproc compare" in capsys.readouterr().err
    assert not (run / "compare.csv").exists()


def test_compare_default_directory_and_unknown_method(data, tmp_path, capsys):
    config = load_config(write_config(tmp_path, data))
    assert default_directory(config) == config.output.with_name("out-compare")
    assert run_cli(str(tmp_path / "compare.toml"), "--methods", "topdown,hays") == 1
    err = capsys.readouterr().err
    assert "unknown post-processor 'hays'" in err and "postproc methods" in err
    assert not default_directory(config).exists()


def test_methods_lists_every_registered_method_in_100_columns(capsys):
    assert main(["methods"]) == 0
    stdout = capsys.readouterr().out
    names = {line.split()[0] for line in stdout.splitlines()
             if line and not line.startswith(" ")}
    assert set(available()) <= names
    assert max(len(line) for line in stdout.splitlines()) <= 100
    assert "promises: integer, consistent, nonnegative, invariants" in stdout
    assert "sweeps" in stdout                      # sampling's options


def test_the_mae_figure_takes_a_log_scale_when_methods_are_orders_apart():
    """Noisy cells 500 persons off beside post-processed ones 2 off: log scale above one
    person, so both lines show; float rounding of a held 0 (1e-10) does not move the
    threshold; methods within a factor 20 stay on a linear scale."""
    from matplotlib.figure import Figure

    from postproc.evaluation.plots import plot_comparison
    from postproc.gate import label_table

    def axes(maes):
        table = label_table(pd.DataFrame({
            "method": ["a", "a", "b", "b"], "constrained": [True, True, False, False],
            "level": ["nation", "state"] * 2, "query": ["total"] * 4, "mae": maes}),
            "simulation")
        return plot_comparison(table, ax=Figure().subplots())

    wide = axes([1e-10, 2.0, 500.0, 400.0])
    assert wide.get_yscale() == "symlog" and "above 1)" in wide.get_ylabel()
    assert axes([3.0, 2.0, 30.0, 20.0]).get_yscale() == "linear"
