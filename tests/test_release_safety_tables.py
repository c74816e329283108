"""Tables computed against the truth carry their randomness label, and every writer and plotter
of them keeps a release-mode table to ``confidential/`` (issue 35, item 3).

1. The label: ``evaluate``, ``compare``, ``compare_postprocessors``, ``compare_methods`` and the
   run's error table carry the measurements' mode in ``attrs["randomness"]``, kept through
   selections and concatenations.
2. The writers and plotters refuse a release-mode (or unlabelled) table outside a
   ``confidential/`` folder unless ``confidential=True``, and then banner it; a simulation's
   table is written as before, with its label.
3. ``postproc evaluate`` of a release-mode run prints a CONFIDENTIAL banner; ``report.html``
   holds no absolute path.
"""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pandas as pd
import pytest
from _configs import save_config
from matplotlib.figure import Figure

from hierarchy import E2E_1940, Budget, e2e_workload, measure, synthesize_1940, tabulate
from hierarchy.synth import write_synthetic_1940
from invariants.spec import Spec
from postproc import evaluate, postprocess
from postproc.apps.runs.directories import CompareOutput
from postproc.cli import main
from postproc.errors import PostprocError
from postproc.evaluation.compare import (
    compare_methods,
    write_comparison,
    write_figure,
    write_html,
    write_mae_figure,
    write_table,
)
from postproc.evaluation.evaluate import (
    compare,
    compare_postprocessors,
    reference_results,
    write_evaluation,
)
from postproc.evaluation.plots import (
    plot_comparison,
    plot_epl,
    plot_error_spread,
    plot_errors_by_level,
    save_by_query,
)
from postproc.evaluation.tables import level_error_table
from postproc.gate import CONFIDENTIAL_BANNER, label_table, table_mode, write_csv

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "e2e1940.toml"
LEVELS = ["nation", "state", "county"]
MODES = {"release": None, "simulation": 7}


@pytest.fixture(scope="module")
def truth():
    data = synthesize_1940(3_000, seed=3)
    return tabulate(data.persons, schema=E2E_1940, levels=LEVELS, units=data.units)


@pytest.fixture(scope="module", params=list(MODES))
def made(request, truth):
    """(mode, measurements, Hay's result, compare_methods' table) in each mode."""
    rng = MODES[request.param]
    noisy = measure(truth, e2e_workload(E2E_1940), Budget.e2e(1, LEVELS), rng=rng,
                    spec=Spec.e2e(LEVELS), accounted_elsewhere=True)
    table = compare_methods(noisy, truth, ["hay", "noisy"], rng=rng, queries=["total"],
                            epl_method="published")
    return request.param, noisy, postprocess(noisy, "hay"), table


def release_table(truth) -> pd.DataFrame:
    noisy = measure(truth, e2e_workload(E2E_1940), Budget.e2e(1, LEVELS), spec=Spec.e2e(LEVELS),
                    accounted_elsewhere=True)
    return compare_methods(noisy, truth, ["hay"], queries=["total"], epl_method="published")


# -- 1. the label ----------------------------------------------------------------------------

def test_every_table_against_the_truth_carries_the_measurements_mode(made, truth):
    mode, noisy, hay, table = made
    rng = MODES[mode]
    options = dict(queries=["total"], epl_method="published")
    with pytest.warns(DeprecationWarning):      # the older runners, kept for one release
        deprecated = {
            "compare": compare({"hay": hay, "noisy": noisy}, truth, **options),
            "compare_postprocessors": compare_postprocessors(noisy, truth, methods=["hay"],
                                                             rng=rng, **options)}
    tables = {
        "evaluate(result)": evaluate(hay, truth, **options),
        "evaluate(noisy)": evaluate(noisy, truth, **options),
        "evaluate(results)": evaluate({"hay": hay, "noisy": noisy}, truth, **options),
        "evaluate(reference_results)": evaluate(
            reference_results(noisy, truth, methods=["hay"], rng=rng), truth, **options),
        **deprecated,
        "compare_methods": table,
        "level_error_table": level_error_table(truth, noisy, hay.histograms, noisy.workload,
                                               method="hay"),
    }
    for name, t in tables.items():
        assert t.attrs["randomness"]["mode"] == mode, name
        assert table_mode(t[t.columns[:3]].round(1)) == mode, name      # kept by pandas
        assert table_mode(pd.concat([t, t], ignore_index=True)) == mode, name


def test_a_comparison_takes_the_mode_of_its_measurements_not_of_its_own_draws(truth):
    # bottom-up's own noise and the EPL draws come from rng; whose truth the errors are
    # computed against is said by the measurements' mode — the deprecated runner labels by it;
    # evaluate() of the reference results labels by all its sources, release if any is (the
    # safe side: a seeded draw never makes errors against a real truth publishable)
    for measured, drawn in ((None, 4), (5, None)):
        noisy = measure(truth, e2e_workload(E2E_1940), Budget.e2e(1, LEVELS), rng=measured,
                        spec=Spec.e2e(LEVELS), accounted_elsewhere=True)
        with pytest.warns(DeprecationWarning):
            table = compare_postprocessors(noisy, truth, methods=["hay"], rng=drawn,
                                           queries=["total"], epl_method="published")
        assert table_mode(table) == ("release" if measured is None else "simulation")
        table = evaluate(reference_results(noisy, truth, methods=["hay"], rng=drawn), truth,
                         queries=["total"], epl_method="published")
        assert table_mode(table) == "release"


# -- 2. writers and plotters ---------------------------------------------------------------------

WRITERS = {
    "write_comparison": lambda t, d, **k: write_comparison(t, d, **k),
    "write_table": lambda t, d, **k: write_table(t, d, **k),
    "write_figure": lambda t, d, **k: write_figure(t, d / "epl.png", **k),
    "write_mae_figure": lambda t, d, **k: write_mae_figure(t, d / "mae.png", **k),
    "write_html": lambda t, d, **k: write_html(t, d / "c.html", **k),
    "save_by_query": lambda t, d, **k: save_by_query(t, plot_comparison, d / "m.png", **k),
    "write_evaluation": lambda t, d, **k: write_evaluation(t, d, **k),
    "write_csv": lambda t, d, **k: write_csv(t, d / "t.csv", **k),
}
PLOTTERS = {"plot_comparison": plot_comparison, "plot_epl": plot_epl,
            "plot_error_spread": plot_error_spread}


def evaluation(truth, rng) -> pd.DataFrame:
    noisy = measure(truth, e2e_workload(E2E_1940), Budget.e2e(1, LEVELS), rng=rng,
                    spec=Spec.e2e(LEVELS), accounted_elsewhere=True)
    return evaluate(noisy, truth, queries=["total"], epl_method="published")


@pytest.mark.parametrize("writer", list(WRITERS))
def test_writers_refuse_a_release_table_outside_confidential(truth, tmp_path, writer):
    table = evaluation(truth, None).assign(method="noisy", constrained=False, epl_low=0.0,
                                           epl_high=1.0, epl_note="")
    assert table_mode(table) == "release"
    public = tmp_path / "public"
    with pytest.raises(PostprocError, match="release-mode measurement, so it is written only "
                                            "under a confidential/ folder"):
        WRITERS[writer](table, public)
    assert not public.exists() or not any(public.iterdir())            # nothing written
    for place, options in ((tmp_path / "confidential", {}), (public, {"confidential": True})):
        written = WRITERS[writer](table, place, **options)
        files = written if isinstance(written, list) else [written]
        for path in files:
            if path.suffix == ".csv":
                assert pd.read_csv(path)["randomness"].str.startswith(
                    "release: CONFIDENTIAL").all()
            if path.suffix in (".json", ".html"):
                assert "CONFIDENTIAL" in path.read_text()


@pytest.mark.parametrize("plotter", list(PLOTTERS))
def test_plotters_draw_a_release_table_only_when_asked_and_under_a_banner(truth, plotter):
    table = evaluation(truth, None).assign(method="noisy", constrained=False)
    with pytest.raises(PostprocError, match="pass confidential=True"):
        PLOTTERS[plotter](table, ax=Figure().subplots())
    ax = PLOTTERS[plotter](table, ax=Figure().subplots(), confidential=True)
    assert ax.figure.get_suptitle().startswith(CONFIDENTIAL_BANNER)
    simulated = PLOTTERS[plotter](evaluation(truth, 1).assign(method="noisy",
                                                              constrained=False),
                                  ax=Figure().subplots())
    assert simulated.figure.get_suptitle() == ""                   # drawn as before


def test_compare_output_and_result_plot_follow_the_same_rule(truth, tmp_path):
    table = release_table(truth)
    done = CompareOutput(table, tmp_path, [], True)
    with pytest.raises(PostprocError, match="pass confidential=True"):
        done.plot(ax=Figure().subplots())
    assert done.plot(ax=Figure().subplots(), confidential=True).figure.get_suptitle()
    noisy = measure(truth, e2e_workload(E2E_1940), Budget.e2e(1, LEVELS), spec=Spec.e2e(LEVELS),
                    accounted_elsewhere=True)
    # a seeded sampler on release measurements: the result is not safe for release, yet its
    # errors are computed against the release's confidential truth
    sampled = postprocess(noisy, "sampling", Spec.e2e(LEVELS), rng=3, sweeps=1)
    assert not sampled.safe_for_release
    with pytest.raises(PostprocError, match="release-mode measurement"):
        plot_errors_by_level(sampled, truth, ax=Figure().subplots())
    ax = plot_errors_by_level(sampled, truth, ax=Figure().subplots(), confidential=True)
    assert ax.figure.get_suptitle().startswith("CONFIDENTIAL")


def test_an_unlabelled_table_is_written_only_as_confidential(tmp_path):
    mine = pd.DataFrame({"method": ["a"], "constrained": [True], "level": ["nation"],
                         "query": ["total"], "n": [1], "mae": [2.0], "mean_abs": [2.0],
                         "rmse": [2.0], "epl": [0.5], "epl_low": [0.4], "epl_high": [0.6],
                         "epl_note": [""]})
    with pytest.raises(PostprocError, match="carries no randomness label"):
        write_comparison(mine, tmp_path / "a")
    with pytest.raises(PostprocError, match="carries no randomness label"):
        plot_comparison(mine, ax=Figure().subplots())
    files = write_comparison(label_table(mine.copy(), "simulation"), tmp_path / "b")
    assert pd.read_csv(files[0])["randomness"].str.startswith("simulation: NOT SAFE").all()
    assert "SIMULATION MODE" in (tmp_path / "b" / "compare.html").read_text()
    # tables of different modes concatenated lose the label (pandas): treated as unknown
    mixed = pd.concat([label_table(mine.copy(), "simulation"), label_table(mine.copy(),
                                                                           "release")])
    assert table_mode(mixed) == "unknown"
    with pytest.raises(PostprocError, match="carries no randomness label"):
        write_comparison(mixed, tmp_path / "c")


# -- 3. the commands ------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def data(tmp_path_factory):
    directory = tmp_path_factory.mktemp("tables") / "data"
    write_synthetic_1940(directory, 1500, seed=2)
    return directory


def config(folder: Path, data: Path, *, release: bool) -> Path:
    raw = tomllib.loads(EXAMPLE.read_text())
    raw["data"].update(persons=str(data / "persons.parquet"), units=str(data / "units.parquet"))
    raw["output"]["directory"] = "out"
    randomness = {"mode": "release", "seed": None} if release else {"mode": "simulation"}
    return save_config(folder / "config.toml", raw, randomness=randomness)


@pytest.mark.parametrize("release", [False, True], ids=["simulation", "release"])
def test_run_evaluate_and_report_say_what_the_tables_are(data, tmp_path, capsys, release):
    run = tmp_path / "run"
    argv = ["run", str(config(tmp_path, data, release=release)), "--out", str(run),
            "--no-progress", "--error-table"]
    assert main(argv) == 0
    errors = pd.read_csv(run / "confidential" / "error_table.csv")
    prefix = "release: CONFIDENTIAL" if release else "simulation: NOT SAFE"
    assert errors["randomness"].str.startswith(prefix).all()
    capsys.readouterr()
    assert main(["evaluate", str(run), "--truth", str(data), "--queries", "total",
                 "--epl-method", "published", "--save"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"*** {CONFIDENTIAL_BANNER}") == release
    saved = pd.read_csv(run / "confidential" / "evaluation.csv")
    assert saved["randomness"].str.startswith(prefix).all()
    assert main(["evaluate", str(run), "--truth", str(data), "--queries", "total",
                 "--epl-method", "published", "--json"]) == 0
    captured = capsys.readouterr()
    assert "state" in json.loads(captured.out)                 # stdout stays one JSON object
    assert (CONFIDENTIAL_BANNER in captured.err) == release
    assert main(["report", str(run)]) == 0
    page = (run / "report.html").read_text()
    assert str(run) not in page and str(run.resolve()) not in page
    assert str(tmp_path) not in page


def test_report_refuses_a_release_table_outside_confidential(truth, tmp_path):
    from postproc.apps.runs.report import write_report

    folder = tmp_path / "copied"
    write_comparison(release_table(truth), folder, confidential=True)
    (folder / "compare.html").unlink()
    with pytest.raises(PostprocError, match="computed in release mode"):
        write_report(folder)
    assert not (folder / "report.html").exists()
    inside = tmp_path / "confidential"
    write_comparison(release_table(truth), inside)
    page = write_report(inside).read_text()
    assert "CONFIDENTIAL" in page
