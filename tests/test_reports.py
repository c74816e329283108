"""The HTML reports (issue 14, item 2): templates render for every kind of page, one number
format, descriptions rendered from reST, figures in every report, tables that scroll and are cut
with a link to their CSV, and the release gate on a run's errors and their figures."""

from __future__ import annotations

import json
import math
import re
import tomllib
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from _configs import e2e_config

from postproc.apps.experiments import EXPERIMENTS, describe
from postproc.apps.runs.report import render_report, write_report
from postproc.cli import main
from postproc.evaluation.compare import render_html, write_comparison
from postproc.gate import label_table
from postproc.reports.numbers import format_number
from postproc.reports.rest import rest_to_html

ROOT = Path(__file__).resolve().parents[1]
SCROLL = '<div class="scroll">\n<table'


def visible(page: str) -> str:
    """The page without its embedded images (base64 may hold any letters, 'e+' among them)."""
    return re.sub(r"data:image/png;base64,[A-Za-z0-9+/=]+", "data:…", page)


def numbers_outside_tags(page: str) -> list[str]:
    return re.findall(r">([^<>]*)<", visible(page))


# -- the one number format ----------------------------------------------------------------------

def test_format_number_follows_its_stated_rule():
    # the mix: 3.197e+04 beside 27,467 — now both with separators
    assert format_number(3.197e4) == "31,970" and format_number(27467) == "27,467"
    assert format_number(np.int64(1_234_567)) == "1,234,567"
    assert format_number(float("inf")) == "undefined"       # an EPL that cannot be estimated
    assert format_number(2e-12) == format_number(-3e-9) == "≈ 0"
    assert format_number(float("nan")) == format_number(None) == ""
    assert format_number(0.0) == "0" and format_number(np.float64(5.0)) == "5"


def test_format_number_keeps_three_significant_digits_without_exponents():
    rng = np.random.default_rng(0)
    for value in np.exp(rng.uniform(np.log(1e-6), np.log(1e14), 2000)) * rng.choice([-1, 1],
                                                                                  2000):
        text = format_number(value)
        assert "e" not in text, (value, text)
        back = float(text.replace(",", ""))
        if abs(value) >= 1000:                       # rounded to a whole number
            assert abs(back - value) <= 0.5 + 1e-9 * abs(value), (value, text)
        else:                                        # 3 significant digits
            assert abs(back - value) <= 0.5 * 10 ** (math.floor(math.log10(abs(value))) - 2) \
                * (1 + 1e-9), (value, text)


# -- descriptions ---------------------------------------------------------------------------------

@pytest.mark.parametrize("name", sorted(EXPERIMENTS))
def test_descriptions_render_without_raw_rest(name):
    html = str(rest_to_html(describe(name)))
    text = re.sub(r"<[^>]+>", "", html)
    assert "``" not in html and "`" not in text
    assert not re.search(r":(func|mod|class|meth|data):", html)
    assert "<code>" in html and "<p>" in html


def test_rest_lists_roles_and_escaping():
    html = str(rest_to_html("Intro with *emphasis* and <script>.\n\n"
                            "* first item,\n  continued\n* second :func:`~a.b.c`\n\n"
                            "After the list."))
    assert html == ("<p>Intro with <em>emphasis</em> and &lt;script&gt;.</p>\n"
                    "<ul><li>first item, continued</li><li>second <code>c</code></li></ul>\n"
                    "<p>After the list.</p>")


# -- an experiment directory ----------------------------------------------------------------

@pytest.fixture
def experiment_dir(tmp_path):
    from matplotlib.figure import Figure

    fig = Figure(figsize=(2, 2))
    fig.subplots().plot([0, 1], [0, 1])
    fig.savefig(tmp_path / "line.png")
    rows = 100
    pd.DataFrame({"level": [f"unit{i:03d}" for i in range(rows)],
                  "mae": np.linspace(31967.23, 1.5e7, rows),
                  "epl": [float("inf")] * rows,
                  "epl_reason": ["all 3 errors equal 0: the error distribution is a point mass "
                                 "(e.g. a level held invariant), so its log ratio is undefined"]
                  * rows,
                  "query": "total"}).to_csv(tmp_path / "wide.csv", index=False)
    summary = {"experiment": "petti_flaxman", "title": "A test", "ran": "TopDown at ε ∈ {0.5, 2}",
               "parameters": {"epsilons": [0.5, 2.0], "persons": 3_000_000, "data_seed": 1940},
               "headline": {"mae": 31967.23, "epl": None}, "notes": [],
               "tables": [{"file": "wide.csv", "caption": "Wide."}],
               "figures": [{"file": "line.png", "caption": "A line."}], "seconds": 1.5,
               "randomness": {"safe_for_release": False, "label": "SIMULATION MODE"}}
    (tmp_path / "summary.json").write_text(json.dumps(summary))
    pd.DataFrame({"x": [1]}).to_csv(tmp_path / "stray.csv", index=False)
    return tmp_path


def test_experiment_page(experiment_dir):
    page = render_report(experiment_dir, max_rows=10)
    shown = visible(page)
    assert page.startswith("<!DOCTYPE html>") and "This run:" in page and "{0.5, 2}" in page
    # the description is rendered: no raw reST
    assert "About the analysis" in page and "``" not in page and ":func:`" not in page
    # numbers in the one format: no exponent anywhere on the page, separators on large values
    assert not any(re.search(r"\de[+-]\d", text) for text in numbers_outside_tags(page))
    assert "31,967" in shown and "1,392,697" in shown             # headline; row 10 of the table
    assert "seed" not in shown or "1,940" not in shown            # a seed is not a quantity
    assert ">undefined<" in shown                                  # a null headline EPL
    # every table scrolls; the long one is cut, with its CSV linked, not inlined
    assert shown.count("<table") == shown.count(SCROLL) >= 3
    assert "showing 10 of 100 rows" in shown and 'href="wide.csv"' in shown
    assert "unit009" in shown and "unit010" not in shown
    # a long, repeated text is one numbered note
    assert shown.count("EPL undefined in 10 rows") == 1 and ">[1]<" in shown
    # the figure is embedded and linked; a stray CSV is linked, never inlined
    assert 'href="line.png"' in shown and page.count("data:image/png;base64,") == 1
    assert 'href="stray.csv"' in shown and ">x<" not in shown


# -- runs: figures and the release gate ------------------------------------------------------------

@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    from hierarchy.synth import write_synthetic_1940
    from postproc.apps.runs.pipeline import run_pipeline

    base = tmp_path_factory.mktemp("reports")
    write_synthetic_1940(base / "data", 5_000, seed=3)       # one county per state
    quiet = {"progress": False, "log": lambda message: None}
    run_pipeline(e2e_config(base / "data"), out=base / "sim", **quiet)
    for extra in ([], ["--compare"]):
        assert main(["evaluate", str(base / "sim"), "--truth", str(base / "data"), "--save",
                     "--n-boot", "0", "--queries", "total,va_hisp_race", *extra]) == 0
    run_pipeline(e2e_config(base / "data", mode="release"), out=base / "rel", error_table=True,
                 **quiet)
    return base


RUN_FIGURES = ("report_errors_by_level.png", "report_error_spread.png", "report_epl.png",
               "report_comparison_mae.png", "report_comparison_epl.png")


def test_simulation_run_report_shows_every_figure(runs, capsys):
    page = write_report(runs / "sim").read_text()
    capsys.readouterr()
    shown = visible(page)
    for name in RUN_FIGURES:
        assert (runs / "sim" / "confidential" / name).is_file(), name
        assert f'href="confidential/{name}"' in shown, name
    assert page.count("data:image/png;base64,") == len(RUN_FIGURES)
    assert shown.count("<table") == shown.count(SCROLL)
    assert 'href="confidential/error_table.csv"' in shown
    # one county per state: the page says the county level repeats the state level
    assert "the county level repeats the state level" in shown
    assert "This run:" in shown and "topdown" in shown
    # the error table's values, in the one format
    errors = pd.read_csv(runs / "sim" / "confidential" / "error_table.csv")
    assert all(format_number(v) in shown for v in errors["measured_mean_abs"].head(5))


def test_release_report_shows_no_error_and_no_figure_of_errors(runs):
    directory = runs / "rel"
    before = {p: p.stat().st_mtime_ns for p in directory.rglob("*") if p.is_file()}
    page = render_report(directory)
    assert {p: p.stat().st_mtime_ns for p in directory.rglob("*") if p.is_file()} == before
    assert "<img" not in page and "data:image" not in page and "report_" not in page
    assert "error_table.csv" not in page and "--confidential" in page
    errors = pd.read_csv(directory / "confidential" / "error_table.csv")
    # values that keep a decimal point once formatted: "49.04" formats as "49", which the page
    # shows as a public count (the number of states)
    distinctive = [text for text in map(format_number, errors["measured_mean_abs"]) if "." in text]
    assert distinctive and not any(f">{text}<" in page for text in distinctive)
    # the confidential page has them, with the errors' figure beside the table
    secret = write_report(directory, confidential=True).read_text()
    assert "CONFIDENTIAL" in secret and 'href="report_errors_by_level.png"' in secret
    assert (directory / "confidential" / "report_errors_by_level.png").is_file()
    assert not list(directory.glob("report_*.png"))
    assert any(f">{text}<" in visible(secret) for text in distinctive)


# -- the comparison page ---------------------------------------------------------------------------

def comparison_table(mae: float = 31967.23) -> pd.DataFrame:
    """A comparison of a simulation (labelled so: the writers refuse an unlabelled table)."""
    inf, nan = float("inf"), float("nan")
    return label_table(pd.DataFrame({
        "method": ["topdown", "topdown", "hay", "hay"], "constrained": [True, True, False, False],
        "level": ["nation", "state"] * 2, "query": ["total"] * 4, "n": [1, 49, 1, 49],
        "mae": [0.0, 0.0, mae, 2.5e7], "mean_abs": [0.0, 0.0, 1.5, 2.0],
        "rmse": [0.0, 0.0, 2.0, 3.0], "epl": [inf, inf, 0.5, 0.25],
        "epl_low": [nan, nan, 0.4, 0.2], "epl_high": [nan, nan, 0.6, 0.3],
        "epl_note": ["all 1 errors equal 0: a point mass " * 3,
                     "all 49 errors equal 0: a point mass " * 3, "", ""]}), "simulation")


def test_comparison_page(tmp_path):
    files = write_comparison(comparison_table(), tmp_path, notes=["Methods: topdown, hay."],
                             banners=[("unsafe", "SIMULATION MODE")])
    assert [p.name for p in files] == ["compare.csv", "compare.json", "compare_mae.png",
                                       "compare_epl.png", "compare.html"]
    page = (tmp_path / "compare.html").read_text()
    shown = visible(page)
    assert page.count("data:image/png;base64,") == 2 and "SIMULATION MODE" in shown
    assert "31,967" in shown and "25,000,000" in shown
    assert not any(re.search(r"\de[+-]\d", text) for text in numbers_outside_tags(page))
    assert shown.count("<table") == shown.count(SCROLL)
    # the undefined EPLs: one note per table (EPL by level, all numbers), not one per row
    assert "undefined [1]" in shown and shown.count("every error is 0") == 2
    # postproc report of the comparison's directory gives the same page
    (tmp_path / "manifest.json").write_text(json.dumps(
        {"made_by": "postproc compare", "methods": ["topdown", "hay"], "epl_method": "improved",
         "randomness": {"safe_for_release": False, "label": "SIMULATION MODE"}}))
    report = render_report(tmp_path)
    assert "Comparison of post-processors" in report and "31,967" in report
    assert report.count("data:image/png;base64,") == 2


def test_comparison_page_cuts_long_tables():
    table = pd.concat([comparison_table().assign(query=f"q{i}") for i in range(10)])
    shown = visible(render_html(table, max_rows=7))
    assert "showing 7 of 40 rows" in shown and 'href="compare.csv"' in shown


# -- packaging -----------------------------------------------------------------------------

def test_every_template_is_package_data():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert any(d.lower().startswith("jinja2") for d in config["project"]["dependencies"])
    patterns = config["tool"]["setuptools"]["package-data"]["postproc.reports"]
    package = ROOT / "postproc" / "reports"
    covered = {p for pattern in patterns for p in package.glob(pattern)}
    templates = set((package / "templates").iterdir())
    assert templates and templates <= covered


# -- experiment figures ----------------------------------------------------------------------------

class Captured:
    """An experiment Output that keeps its figures instead of writing them."""

    def __init__(self):
        self.figures = {}

    def figure(self, name, fig, caption):
        self.figures[name] = fig


def test_coinciding_levels_are_one_line_and_panels_keep_their_titles():
    from postproc.apps.experiments._figures_petti_flaxman import figure_levels

    rows = []
    for level, scale in (("nation", 0.0), ("state", 1.0), ("county", 1.0), ("enum_dist", 2.0)):
        for epsilon in (0.5, 2.0):                 # county repeats state (one county per state)
            rows.append({"epsilon": epsilon, "level": level, "query": "total",
                         "mae": 10 * scale / epsilon, "mae_sd": 0.0, "epl": scale * epsilon,
                         "epl_ci_low": np.nan, "epl_ci_high": np.nan})
    out = Captured()
    figure_levels(out, pd.DataFrame(rows), [0.5, 2.0], {"total": "TC (total)"},
                  {"total": "mae"}, ["nation", "state", "county", "enum_dist"])
    error_ax, epl_ax = out.figures["mae_epl_by_level"].axes[:2]
    assert error_ax.get_title() == "TC (total)"
    labels = [t.get_text() for t in error_ax.get_legend().get_texts()]
    assert labels == ["state = county", "enum_dist"]


def test_bias_lines_break_where_an_index_is_missing():
    from postproc.apps.experiments._figures_petti_flaxman import figure_bias

    bias = pd.DataFrame({"level": "enum_dist", "definition": "authors", "epsilon": 1.0,
                         "homogeneity_index": [0, 1, 4], "bias": [-5.0, -2.0, 3.0],
                         "se": [1.0, 1.0, 1.0], "n": [3, 30, 300]})
    out = Captured()
    figure_bias(out, bias, "authors")
    ax, count_ax = out.figures["bias_by_homogeneity"].axes
    line = ax.get_lines()[0]                       # the errorbar's data line
    assert line.get_xdata().tolist() == [0, 1, 2, 3, 4]
    y = np.ma.filled(np.ma.asarray(line.get_ydata(), dtype=float), np.nan)
    assert np.isnan(y[2:4]).all() and not np.isnan(y[[0, 1, 4]]).any()   # no 1-to-4 segment
    assert not count_ax.patches                    # points, not bars, on the log axis
