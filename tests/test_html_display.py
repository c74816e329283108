"""Reading results (issue 40, item 4): the notebook display of the evaluation table and of
``Schema``, ``Workload``, ``Budget`` and ``Spec`` — compact, escaped, with units and the
randomness label — and the run report: a title that names the run, the settings as a table, the
confidential numbers of a simulation said to be so, the MAE said to be a median beside the mean
|error|."""

from __future__ import annotations

import json
import re

import numpy as np
import pandas as pd
import pytest
from _configs import LEVELS, e2e_config

from hierarchy.budget import Budget
from hierarchy.queries import Workload, e2e_workload, marginal, total
from hierarchy.schema import E2E_1940, Attribute, Schema
from invariants.spec import Constraint, Invariant, Spec
from postproc.evaluation.evaluate import evaluate, write_evaluation
from postproc.evaluation.tables import EvaluationTable, evaluation_html
from postproc.gate import label_table, table_mode
from postproc.methods.baselines import TreeCounts, gdpc

SCRIPT = "<script>alert(1)</script>"
ESCAPED = "&lt;script&gt;alert(1)&lt;/script&gt;"


def assert_escaped(page: str) -> None:
    assert SCRIPT not in page and "<script" not in page and ESCAPED in page


# -- Schema, Workload, Budget, Spec ---------------------------------------------------------------

def test_schema_and_workload_show_their_attributes_and_queries_escaped():
    schema = Schema((Attribute("sex", (SCRIPT, "male")),
                     Attribute("age", tuple(f"age{i}" for i in range(20)))), name="demo")
    page = schema._repr_html_()
    assert_escaped(page)
    assert "Schema &#x27;demo&#x27;: 2 attributes, 40 cells" in page
    assert "age5, … (20 in all)" in page and "age6" not in page      # long label lists cut
    workload = Workload((total(schema), marginal(schema, "sex", name="by_sex")))
    page = workload._repr_html_()
    assert_escaped(page)
    assert "<td>by_sex</td><td>marginal(sex)</td>" in page
    assert "Workload: 2 queries on schema &#x27;demo&#x27;" in page
    e2e = e2e_workload(E2E_1940)._repr_html_()
    assert ">192<" in e2e and "hhgq × votingage × hispanic × cenrace" in e2e
    assert "(192 in all)" in e2e


def test_budget_shows_each_query_share_and_its_epsilon_or_rho():
    page = Budget("pure", 2, {"nation": "1/4", SCRIPT: "3/4"},
                  {"total": "1/2", "detailed": "1/2"})._repr_html_()
    assert_escaped(page)
    assert "Budget: pure DP, ε = 2 (change neighbours)" in page
    assert "<th style=\"text-align:right\">ε (exact)</th>" in page
    # nation: 1/4 of ε = 2, half to each query: 1/4 each; the other level 3/4 each
    assert ">25 %<" in page and ">75 %<" in page and ">50 %<" in page
    assert ">1/4<" in page and ">0.25<" in page and ">3/4<" in page
    zcdp = Budget.e2e("1/2", ["nation"], kind="zcdp")._repr_html_()
    assert "zCDP, ρ = 1/2" in zcdp and ">ρ (exact)<" in zcdp and ">27/80<" in zcdp
    assert "ε" not in zcdp


def test_spec_shows_invariants_and_constraints_with_their_levels():
    page = Spec.e2e(["nation", "state", "county"])._repr_html_()
    assert "Spec: 3 invariants, 4 constraints" in page
    assert "<td>invariant</td><td>tot</td>" in page and "<td>nation, state</td>" in page
    assert "structural zero: recode(hhgq: correctional=1; college=5) = 0" in page
    assert "total persons of the unit is exact" in page             # the catalogue's meaning
    linear = Spec(invariants=[Invariant("tot", [SCRIPT])],
                  constraints=[Constraint("adults", type="linear", query="marginal(votingage)",
                                          answers=[1], sense=">=", rhs=1)])._repr_html_()
    assert_escaped(linear)
    assert "Spec: 1 invariant, 1 constraint" in linear
    assert "linear: marginal(votingage) answers 1 &gt;= 1" in linear


# -- the evaluation table --------------------------------------------------------------------------

@pytest.fixture(scope="module")
def evaluated() -> pd.DataFrame:
    pop = TreeCounts.from_leaves(np.full(64, 100), 4)
    return evaluate(gdpc(pop, 1, rng=1), pop, rng=0)


def test_evaluate_gives_an_evaluation_table_that_stays_one(evaluated):
    table = label_table(evaluated.copy(), "simulation")
    assert type(table) is EvaluationTable and isinstance(table, pd.DataFrame)
    selections = [table[["level", "mae"]], table.iloc[:2], table[table["n"] > 1],
                  table.assign(x=1), table.round(2), pd.concat([table, table]), table.copy(),
                  table.set_index(["level", "query"]), table.sort_values("mae")]
    for part in selections:
        assert type(part) is EvaluationTable, type(part)
        assert table_mode(part) == "simulation"
    assert type(table["mae"]) is pd.Series
    assert type(pd.DataFrame(table)) is pd.DataFrame
    pop = TreeCounts.from_leaves(np.full(16, 10), 4)
    both = evaluate({"a": gdpc(pop, 1, rng=1), "b": gdpc(pop, 1, rng=2)}, pop, rng=0)
    assert type(both) is EvaluationTable and list(both.columns[:3]) == ["method", "level", "query"]


def test_csv_parquet_and_json_are_written_as_from_a_plain_dataframe(evaluated, tmp_path):
    table = label_table(evaluated.copy(), "simulation")
    plain = label_table(pd.DataFrame(table), "simulation")
    assert table.to_csv(index=False) == plain.to_csv(index=False)
    table.to_parquet(tmp_path / "t.parquet")
    plain.to_parquet(tmp_path / "p.parquet")
    back = pd.read_parquet(tmp_path / "t.parquet")
    assert type(back) is pd.DataFrame
    pd.testing.assert_frame_equal(back, pd.read_parquet(tmp_path / "p.parquet"))
    pd.testing.assert_frame_equal(back, plain)
    ours = write_evaluation(table, tmp_path / "ours")
    theirs = write_evaluation(plain, tmp_path / "theirs")
    assert [p.read_bytes() for p in ours] == [p.read_bytes() for p in theirs]
    assert json.loads(ours[1].read_text())["level 1"]["total"]["randomness"].startswith(
        "simulation: NOT SAFE FOR RELEASE")


@pytest.mark.parametrize("mode, kind, text", [
    ("release", "#fde2e2", "release: CONFIDENTIAL - computed from the confidential data"),
    ("simulation", "#fff3cd", "simulation: NOT SAFE FOR RELEASE"),
    (None, "#fde2e2", "no randomness label: treated as CONFIDENTIAL")])
def test_the_display_carries_the_randomness_banner(evaluated, mode, kind, text):
    table = evaluated.copy()
    assert table_mode(table) == "simulation"           # gdpc's seeded noise
    if mode is None:
        table.attrs.clear()                            # a table of one's own: no label
    else:
        label_table(table, mode)
    page = table._repr_html_()
    banner = re.match(r'<div style="([^"]*)">([^<]*)</div>', page)
    assert banner is not None and kind in banner.group(1) and banner.group(2).startswith(text)
    assert page.count("<div") == 1


def test_the_display_is_compact_with_units_and_escaped(evaluated):
    table = label_table(evaluated.assign(level=[SCRIPT] + list(evaluated["level"][1:])),
                        "simulation")
    page = table._repr_html_()
    assert_escaped(page)
    headers = re.findall(r"<th[^>]*>([^<]*)</th>", page)
    assert headers == ["level", "query", "n (answers)", "MAE (persons, median |error|)",
                       "mean |error| (persons)", "RMSE (persons)", "95th pct |error| (persons)",
                       "median true count (persons)",
                       "EPL (ε, improved estimator, 95% interval)"]
    assert "Not shown: mse, max_abs, exact_p95, epl_ci_low" in page and "17 columns" in page
    assert "MAE is the median |error|" in page
    # numbers in the reports' one format: no float printed with six decimals
    assert not re.search(r"\d\.\d{5,}", page)
    cells = re.findall(r"<td[^>]*>([^<]*)</td>", page)
    assert "undefined [1]" in cells                           # one error: an undefined EPL
    assert any(re.fullmatch(r"\d+(\.\d+)? \[\d+(\.\d+)?, \d+(\.\d+)?\]", c) for c in cells)
    # a few columns chosen by hand are shown as they are, the EPL folded with its interval
    narrow = table[["level", "query", "mse", "epl", "epl_ci_low", "epl_ci_high"]]._repr_html_()
    assert "MSE (persons²)" in narrow and "epl_ci_low" in narrow.split("Not shown")[1]
    assert "<p>Not shown: epl_ci_low, epl_ci_high (" in narrow


def test_the_display_cuts_long_tables():
    rows = [{"level": f"unit{i}", "query": "total", "mae": float(i)} for i in range(100)]
    page = evaluation_html(label_table(EvaluationTable(rows), "simulation"), max_rows=10)
    assert "100 rows, showing the first 10" in page
    assert ">unit9<" in page and ">unit10<" not in page


# -- the run report --------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def run_dirs(tmp_path_factory):
    from hierarchy.synth import write_synthetic_1940
    from postproc.apps.runs.pipeline import run_pipeline
    from postproc.cli import main

    base = tmp_path_factory.mktemp("display")
    write_synthetic_1940(base / "data", 2_000, seed=3, progress=False)
    quiet = {"progress": False, "log": lambda message: None}
    # the budget and spec given whole: the configuration holds nested tables and lists
    options = {"budget": Budget.e2e(1, LEVELS), "spec": Spec.e2e(LEVELS)}
    run_pipeline(e2e_config(base / "data", **options), out=base / "trial-7", **quiet)
    assert main(["evaluate", str(base / "trial-7"), "--truth", str(base / "data"), "--save",
                 "--n-boot", "0", "--queries", "total"]) == 0
    run_pipeline(e2e_config(base / "data", mode="release", **options), out=base / "rel",
                 error_table=True, **quiet)
    return base


def _ran_box(page: str) -> str:
    return page.split('<div class="ran">', 1)[1].split("</table>", 1)[0]


def test_the_run_report_names_the_run_and_shows_its_settings_as_a_table(run_dirs, capsys):
    from postproc.apps.runs.report import render_report

    page = render_report(run_dirs / "trial-7")
    capsys.readouterr()
    title = re.search(r"<title>(.*)</title>", page).group(1)
    assert title == "topdown run “trial-7”: e2e_1940, ε = 1, simulation"
    assert "postproc run:" not in page
    box = _ran_box(page)
    assert "This run:" in box and '<table class="pairs settings">' in box
    assert "{&#39;" not in page and "{'" not in page and "&#39;:" not in page
    settings = dict(re.findall(r"<tr><th>([^<]*)</th><td>([^<]*)</td></tr>", box))
    assert settings["budget"].startswith("pure DP, ε = 1 (change neighbours); each level 1/4")
    assert "tot (nation, state)" in settings["spec"]
    assert settings["randomness"] == "simulation, seed 1 (not safe for release)"
    assert settings["output directory"] == "trial-7"
    assert settings["schema"] == "e2e_1940: hhgq × votingage × hispanic × cenrace (192 cells)"
    # the configuration, one row per setting: no Python reprs of its nested tables
    assert "<th>budget · level_fractions · nation</th>" in page
    assert "<th>spec · invariant 1</th>" in page


def test_a_simulation_report_says_its_errors_come_from_the_confidential_data(run_dirs, capsys):
    from postproc.apps.runs.report import render_report

    page = render_report(run_dirs / "trial-7")
    capsys.readouterr()
    sections = {m.group(1): m.group(2) for m in re.finditer(
        r'<section id="([^"]+)">(.*?)</section>', page, re.S)}
    for name in ("errors", "evaluation"):
        assert "banner unsafe section-banner" in sections[name], name
        assert "Computed from the confidential data" in sections[name]
        assert "Shown because this run is a simulation" in sections[name]
        assert "MAE is the median of |error|" in sections[name]
    # mean |error| beside MAE, in the run's error table and in the evaluation
    headers = re.findall(r"<th[^>]*>([^<]*)</th>", sections["errors"])
    at = headers.index("topdown MAE (median |error|)")
    assert headers[at + 1] == "topdown mean |error|"
    headers = re.findall(r"<th[^>]*>([^<]*)</th>", sections["evaluation"])
    assert headers[headers.index("MAE (persons, median |error|)") + 1] == \
        "mean |error| (persons)"
    assert "randomness" not in headers
    # a simulation's figure carries no CONFIDENTIAL banner of a release
    assert "in release mode" not in sections["errors"]
    for section in ("configuration", "levels"):
        assert "Computed from the confidential data" not in sections[section]


def test_a_release_report_names_the_run_and_shows_no_error(run_dirs):
    from postproc.apps.runs.report import render_report, write_report

    page = render_report(run_dirs / "rel")
    assert re.search(r"<title>topdown run “rel”: e2e_1940, ε = 1, release</title>", page)
    assert "randomness</th><td>release</td>" in page
    assert "Computed from the confidential data" not in page and "mean |error|" not in page
    secret = write_report(run_dirs / "rel", confidential=True).read_text()
    assert "banner confidential section-banner" in secret
    assert "CONFIDENTIAL: never publish them" in secret


def test_experiment_quick_help_states_its_time(capsys):
    from postproc.cli import main
    from postproc.cli.experiment import QUICK_SECONDS

    with pytest.raises(SystemExit):
        main(["experiment", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    for name, seconds in QUICK_SECONDS.items():
        assert f"{name} about {seconds} s" in text
    assert "(seconds)" not in text
