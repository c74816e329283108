"""Notebook display: one-line reprs of at most 200 characters, escaped HTML tables, and plots
that return matplotlib Axes whose content (titles, ticks, lines, values) says what was drawn."""

from __future__ import annotations

from pathlib import Path

import matplotlib
import numpy as np
import pandas as pd
import pytest
from matplotlib.figure import Figure

from hierarchy.geography import Geography
from hierarchy.histograms import REPR_LIMIT, Hierarchy
from hierarchy.queries import Workload, detailed, total
from hierarchy.schema import Attribute, Schema
from postproc.apps.runs.directories import CompareOutput
from postproc.errors import PostprocError
from postproc.evaluation.plots import plot_comparison, plot_errors_by_level
from postproc.gate import label_table
from postproc.result import Result

matplotlib.use("Agg")

SCHEMA = Schema((Attribute("sex", ("female", "male")), Attribute("tenure", ("owner", "renter"))))
RELEASE = {"noisy": {"randomness": {"mode": "release", "label": "release (secrets)",
                                    "safe_for_release": True}}}
#: A result of a simulation: its errors may be drawn (one with no label may not).
SIMULATION = {"noisy": {"randomness": {"mode": "simulation", "safe_for_release": False}}}


def chain(depth: int, width: int = 3) -> Geography:
    """A root and ``depth - 1`` levels below it, each unit with ``width`` children."""
    levels = tuple(f"level{i}" for i in range(depth))
    codes, parents = [np.array(["R"])], [np.array([-1])]
    for _ in range(1, depth):
        n = codes[-1].size * width
        codes.append(np.array([f"u{j}" for j in range(n)]))
        parents.append(np.repeat(np.arange(codes[-2].size), width))
    return Geography(levels, tuple(codes), tuple(parents))


def truth_on(geo: Geography, seed: int = 0) -> Hierarchy:
    """Random bottom counts, summed up the tree."""
    rng = np.random.default_rng(seed)
    counts = [rng.integers(0, 5, (geo.n_units(geo.levels[-1]), SCHEMA.size))]
    for li in range(geo.depth - 1, 0, -1):
        up = np.zeros((geo.n_units(geo.levels[li - 1]), SCHEMA.size), dtype=np.int64)
        np.add.at(up, geo.parents[li], counts[0])
        counts.insert(0, up)
    return Hierarchy(SCHEMA, geo, tuple(counts))


def result_from(truth: Hierarchy, shift, method="mine", provenance=None) -> Result:
    hists = tuple(c + shift(li, c) for li, c in enumerate(truth.counts))
    return Result(method, SCHEMA, truth.geography, Workload((total(SCHEMA), detailed(SCHEMA))),
                  hists, SIMULATION if provenance is None else provenance)


@pytest.mark.parametrize("depth", [2, 6, 40])
def test_reprs_are_one_short_line_with_levels_persons_and_label(depth):
    truth = truth_on(chain(depth, width=1 if depth > 6 else 3))
    persons = f"{int(truth.counts[0].sum()):,}"
    result = result_from(truth, lambda li, c: 0, provenance=RELEASE)
    for obj, label in ((truth, "confidential"), (result, "randomness release")):
        text = repr(obj)
        assert len(text) <= REPR_LIMIT and "\n" not in text
        assert text.startswith(type(obj).__name__ + "(")
        assert f"{persons} persons" in text and label in text
        assert "level0=1" in text                                 # the root is always named
        last = truth.geography.levels[-1]
        assert f"{last}={truth.geography.n_units(last):,}" in text
        assert ("…" in text) == (depth == 40)                     # middle levels elided


def test_noisy_repr_stays_short_with_many_queries(make_case):
    _, noisy, _ = make_case("chain")                             # the E2E workload, 4 levels
    text = repr(noisy)
    assert len(text) <= REPR_LIMIT and "\n" not in text
    assert text.startswith("NoisyHierarchy(") and "randomness=simulation" in text
    for level in noisy.levels:
        assert level in text


def test_html_tables_have_one_row_per_level_and_escape_text(make_case):
    truth = truth_on(chain(3))
    result = result_from(truth, lambda li, c: 0, method="<script>x</script>")
    page = result._repr_html_()
    assert "<script>" not in page and "&lt;script&gt;" in page
    for obj in (truth, result):
        page = obj._repr_html_()
        assert page.count("<tr>") == 1 + truth.geography.depth    # header + one per level
        for level, g, c in zip(truth.levels, truth.geography.geocodes, truth.counts):
            assert f"<td>{level}</td>" in page
            assert f">{int(c.sum()):,}</td>" in page
    _, noisy, _ = make_case("published")
    page = noisy._repr_html_()
    assert page.count("<tr>") == 1 + len(noisy.levels)
    assert f">{int(noisy.invariant(noisy.levels[0], 'tot').sum()):,}</td>" in page


def test_plot_errors_by_level_draws_each_levels_errors():
    truth = truth_on(chain(3))
    # every unit's total is off by its level index + 1 in the first cell
    result = result_from(truth, lambda li, c: np.pad(np.full((len(c), 1), li + 1),
                                                     ((0, 0), (0, SCHEMA.size - 1))))
    ax = plot_errors_by_level(result, truth, ax=Figure().subplots())
    assert [t.get_text() for t in ax.get_xticklabels()] == list(truth.levels)
    assert ax.get_ylabel() == "error (result − truth)"
    assert "total" in ax.get_title()
    medians = [line for line in ax.get_lines() if line.get_color() != "C0"
               and len(line.get_xdata()) == 2 and line.get_ydata()[0] == line.get_ydata()[1]]
    drawn = {round(float(line.get_ydata()[0]), 6) for line in medians}
    assert {1.0, 2.0, 3.0} <= drawn                               # one median per level
    points = [line for line in ax.get_lines() if line.get_marker() == "."]
    assert sorted(len(p.get_xdata()) for p in points) == sorted(truth.geography.n_units(lv)
                                                                for lv in truth.levels)


def test_plot_errors_by_level_makes_a_pyplot_figure_without_ax():
    import matplotlib.pyplot as plt

    truth = truth_on(chain(2))
    ax = plot_errors_by_level(result_from(truth, lambda li, c: 0), truth, "marginal(sex)")
    try:
        assert ax.figure in map(plt.figure, plt.get_fignums())
        assert "marginal(sex)" in ax.get_title()
    finally:
        plt.close(ax.figure)


def test_plot_errors_by_level_refuses_release_mode_and_another_truth():
    truth = truth_on(chain(3))
    with pytest.raises(PostprocError, match="release-mode measurement"):
        plot_errors_by_level(result_from(truth, lambda li, c: 0, provenance=RELEASE), truth)
    with pytest.raises(PostprocError, match="no randomness label"):
        plot_errors_by_level(result_from(truth, lambda li, c: 0, provenance={}), truth)
    with pytest.raises(PostprocError, match="units"):
        plot_errors_by_level(result_from(truth, lambda li, c: 0), truth_on(chain(3, width=2)))


def test_result_plot_is_a_deprecated_alias_of_plot_errors_by_level():
    truth = truth_on(chain(3))
    result = result_from(truth, lambda li, c: np.pad(np.full((len(c), 1), li + 1),
                                                     ((0, 0), (0, SCHEMA.size - 1))))
    with pytest.warns(DeprecationWarning, match="Result.plot is deprecated: use "
                                                "postproc.evaluation.plots.plot_errors_by_level"):
        alias = result.plot(truth, "marginal(sex)", ax=Figure().subplots())
    direct = plot_errors_by_level(result, truth, "marginal(sex)", ax=Figure().subplots())
    assert alias.get_title() == direct.get_title() == "mine: error of marginal(sex) by level"
    assert [list(line.get_ydata()) for line in alias.get_lines()] == \
        [list(line.get_ydata()) for line in direct.get_lines()]
    with pytest.warns(DeprecationWarning), pytest.raises(PostprocError, match="release-mode"):
        result_from(truth, lambda li, c: 0, provenance=RELEASE).plot(truth)


def comparison_table() -> pd.DataFrame:
    rows = []
    for method, constrained, maes in (("topdown", True, [0.0, 1.0, 2.0]),
                                      ("hay", False, [3.0, 2.5, np.nan])):
        for level, mae in zip(("nation", "state", "county"), maes):
            for query, factor in (("total", 1.0), ("detailed", 10.0)):
                rows.append({"method": method, "constrained": constrained, "level": level,
                             "query": query, "mae": mae * factor})
    return label_table(pd.DataFrame(rows).dropna(), "simulation")


def test_plot_comparison_draws_one_line_per_method():
    table = comparison_table()
    ax = plot_comparison(table, ax=Figure().subplots())
    lines = ax.get_lines()
    assert [line.get_label() for line in lines] == ["topdown", "hay (unconstrained)"]
    assert [line.get_linestyle() for line in lines] == ["-", "--"]
    assert lines[0].get_ydata().tolist() == [0.0, 1.0, 2.0]
    assert np.isnan(lines[1].get_ydata()[2])                      # hay has no county row
    assert [t.get_text() for t in ax.get_xticklabels()] == ["nation", "state", "county"]
    detailed_ax = plot_comparison(table, "detailed", ax=Figure().subplots())
    assert detailed_ax.get_lines()[0].get_ydata().tolist() == [0.0, 10.0, 20.0]
    with pytest.raises(PostprocError, match="no rows of query 'va'"):
        plot_comparison(table, "va", ax=Figure().subplots())
    with pytest.raises(PostprocError, match="mae"):
        plot_comparison(table.drop(columns="mae"), ax=Figure().subplots())


def test_compare_output_display_withholds_release_tables():
    table = comparison_table().assign(mae=lambda t: t["mae"] + 1234.5)
    shown = CompareOutput(table, Path("out"), [], release=False)
    page = shown._repr_html_()
    assert "1,236" in page and "hay (unconstrained)" in page    # _number: 1,235.5 → 1,236
    assert len(shown.plot(ax=Figure().subplots()).get_lines()) == 2
    assert len(repr(shown)) <= REPR_LIMIT and "\n" not in repr(shown)
    hidden = CompareOutput(table, Path("out"), [], release=True)
    assert not any(ch.isdigit() for ch in hidden._repr_html_())
    assert "1234" not in repr(hidden) and "1,23" not in repr(hidden)
    with pytest.raises(PostprocError, match="release-mode measurement"):
        hidden.plot()
