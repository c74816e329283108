"""One self-contained HTML page of an output directory: ``postproc report DIR`` → DIR/report.html.

Works for the directories of

* ``postproc experiment`` (``summary.json``): what this run ran (its own parameters, not the
  full design), the description of the analysis (its module docstring, reST rendered), headline
  numbers, every figure with its caption, every table, the parameters;
* ``postproc run`` (``manifest.json``): what ran (method, levels and units, budget, mechanism,
  spec, randomness), the configuration, the per-level solver summary and — where the release
  gate allows — the errors against the confidential data, with figures drawn from them: the
  MAE of the measurements as measured and of the result by level and query
  (``confidential/error_table.csv``, written by ``postproc run``), and after ``postproc
  evaluate --save`` the distribution of the absolute errors and the EPL with its interval
  (``confidential/evaluation.csv``) and the comparison of post-processors (``--compare``:
  ``confidential/comparison.csv``);
* ``postproc compare`` (a manifest ``made_by`` it): the comparison page
  (:func:`postproc.evaluation.compare.render_html`);
* anything else: every PNG and CSV found.

The pages are filled from the templates of :mod:`postproc.reports` (one layout, numbers in one
format, wide tables scroll, long tables cut after ``max_rows`` rows with a link to the full CSV,
long texts as numbered notes). Figures are PNG files beside the data they are drawn from —
``report_*.png`` in ``confidential/`` for a run's errors — and are embedded, so the page opens
from a file and can be mailed; nothing is fetched from the network.

The release gate: the errors of a run are computed from the confidential data. For a
release-mode run, ``DIR/report.html`` shows only what may be published and reads nothing under
``confidential/``; the errors and their figures appear only in ``DIR/confidential/report.html``,
written when asked for (``confidential=True``, ``postproc report DIR --confidential``) under a
CONFIDENTIAL banner. A simulation run (labelled unsafe throughout) shows them in
``DIR/report.html``.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pandas as pd

from postproc.errors import PostprocError
from postproc.gate import label_table, table_gate, table_mode
from postproc.reports.numbers import format_number

__all__ = ["write_report", "render_report", "MAX_ROWS"]

#: Rows of a table shown on a page by default; the full table is the linked CSV.
MAX_ROWS = 25
#: The sections of a run's configuration shown (never ``data``: input paths stay off the page).
CONFIG_SECTIONS = ("schema", "geography", "workload", "budget", "mechanism", "spec",
                   "randomness", "postprocess", "solver")


def _read_csv(path: Path) -> pd.DataFrame | None:
    try:
        return pd.read_csv(path)
    except (OSError, ValueError, pd.errors.ParserError):
        return None


def _csv_table(directory: Path, file: str, caption: str, max_rows: int, link_prefix: str = "",
               title: str | None = None):
    from postproc.reports.page import table

    frame = _read_csv(directory / file)
    if frame is None:
        return None
    return table(frame, max_rows=max_rows, link=link_prefix + file, caption=caption,
                 title=file if title is None else title)


def _section(anchor: str, title: str, **content: Any) -> dict[str, Any]:
    return {"id": anchor, "title": title, **content}


def _nav(sections: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [(s["id"], s["title"]) for s in sections if s.get("id")]


# -- experiments ------------------------------------------------------------------------------
def _experiment_page(directory: Path, summary: dict[str, Any], max_rows: int
                     ) -> tuple[dict[str, Any], set[str]]:
    from postproc.apps.experiments import EXPERIMENTS, describe
    from postproc.reports.page import banner, figure, mapping

    name = summary.get("experiment", "")
    description = ""
    if name in EXPERIMENTS:
        text = describe(name)
        description = text.split("\n", 1)[1] if "\n" in text else ""
    used: set[str] = set()
    figures = []
    for item in summary.get("figures", []):
        if (directory / item["file"]).is_file():
            figures.append(figure(directory / item["file"], item.get("caption", "")))
            used.add(item["file"])
    tables = []
    for item in summary.get("tables", []):
        shown = _csv_table(directory, item["file"], item.get("caption", ""), max_rows)
        if shown is not None:
            tables.append(shown)
            used.add(item["file"])
    parameters = dict(summary.get("parameters", {}))
    parameters["run time (s)"] = summary.get("seconds")
    sections = [_section("headline", "Headline numbers",
                         pairs=mapping(summary.get("headline", {}), missing="undefined"),
                         notes=[f"Note: {n}" for n in summary.get("notes", [])]),
                _section("figures", "Figures", figures=figures),
                _section("tables", "Tables", tables=tables),
                _section("parameters", "Parameters", pairs=mapping(parameters))]
    context = {"ran": summary.get("ran", ""), "description": description,
               "banners": banner(summary.get("randomness")), "sections": sections}
    return context, used


# -- runs -------------------------------------------------------------------------------------
def _coinciding_levels(levels: dict[str, Any]) -> list[tuple[str, str, int]]:
    """``(upper, lower, units)`` for each level whose units are one per unit of the level above
    (each parent has exactly one child): its histograms repeat the parent level's."""
    names = list(levels)
    out = []
    for upper, lower in zip(names, names[1:]):
        above, below = levels[upper], levels[lower]
        units = below.get("units")
        if units and units == above.get("units") and below.get("parents") in (None, units):
            out.append((upper, lower, int(units)))
    return out


def _coinciding_note(pairs: list[tuple[str, str, int]]) -> str:
    """One sentence for the figures' captions: which level repeats which."""
    if not pairs:
        return ""
    said = " and ".join(f"{lower} repeats {upper}" for upper, lower, _ in pairs)
    return (f"Here {said} (one unit per parent): a consistent result has the same counts at "
            f"those levels, so its points coincide; noisy measurements of each level are "
            f"separate draws and differ.")


def _levels_text(levels: Any) -> str:
    """``nation, state`` or ``all`` (an item's levels in a spec)."""
    return ", ".join(map(str, levels)) if isinstance(levels, (list, tuple)) else str(levels)


def _spec_text(spec: Any) -> str:
    """A spec as one line: its invariants and constraints by name, each with its levels; a
    preset (the configuration's ``[spec] preset = "e2e"``) by name."""
    if not isinstance(spec, dict):
        return str(spec)
    parts = []
    for key, word in (("invariant", "invariants"), ("constraint", "constraints"),
                      ("sum", "sums")):
        items = spec.get(key) or []
        items = [items] if isinstance(items, dict) else items
        named = [f"{item.get('name') or item.get('query')} "
                 f"({_levels_text(item.get('levels', item.get('level', 'all')))})"
                 for item in items if isinstance(item, dict)]
        if named:
            parts.append(f"{word}: {', '.join(named)}")
    if "preset" in spec:
        parts.insert(0, f"preset {spec['preset']}")
    return "; ".join(parts) or "no invariants or constraints"


def _budget_text(manifest: dict[str, Any]) -> str | None:
    """The measurements' budget as one line: the total, the levels' shares and the queries'
    (said once when every level has the same); None when the manifest records none."""
    from hierarchy.budget import Budget
    from hierarchy.errors import HierarchyError

    try:
        budget = Budget.from_dict(manifest["provenance"]["noisy"]["budget"])
    except (KeyError, TypeError, HierarchyError):
        return None
    shares = {share for _, share in budget.level_fractions}
    levels = (f"each level {shares.pop()}" if len(shares) == 1 else
              "levels " + ", ".join(f"{lv} {share}" for lv, share in budget.level_fractions))
    splits = {qs for _, qs in budget.query_fractions}
    if len(splits) == 1:
        queries = "each level's queries " + ", ".join(f"{q} {f}" for q, f in splits.pop())
    else:
        queries = "queries " + "; ".join(f"{lv}: " + ", ".join(f"{q} {f}" for q, f in qs)
                                         for lv, qs in budget.query_fractions)
    notion = "pure DP" if budget.kind == "pure" else "zCDP"
    return (f"{notion}, {budget.symbol} = {budget.total} ({budget.neighbours} neighbours); "
            f"{levels}; {queries}")


def _run_settings(manifest: dict[str, Any], directory: Path) -> list[tuple[str, str]]:
    """What ran, as ``(setting, text)`` rows for the page's "This run" box: the result, levels,
    schema, workload, budget, mechanism, spec and randomness, read from the manifest (nothing
    computed from the confidential data)."""
    from postproc.reports.page import mapping

    config = manifest.get("config", {})
    levels = manifest.get("levels", {})
    rows = []
    kind = {True: "integer counts", False: "real-valued counts"}.get(manifest.get("integer"))
    promises = manifest.get("postprocess", {}).get("promises") or []
    rows.append(("result", "; ".join([str(manifest.get("method", "a post-processor"))]
                                     + ([kind] if kind else [])
                                     + ([f"promises {', '.join(promises)}"] if promises else []))))
    if levels:
        rows.append(("units by level", ", ".join(f"{lv} {format_number(info.get('units'))}"
                                                 for lv, info in levels.items())))
        first = next(iter(levels.values()))
        if first.get("persons") is not None:
            rows.append(("persons in the result", format_number(first["persons"])))
    schema = manifest.get("schema")
    if isinstance(schema, dict) and schema.get("attributes"):
        attributes = [a.get("name", "?") for a in schema["attributes"]]
        cells = math.prod(len(a.get("labels", ())) for a in schema["attributes"])
        rows.append(("schema", f"{schema.get('name', 'custom')}: {' × '.join(attributes)} "
                               f"({cells:,} cells)"))
    if isinstance(manifest.get("workload"), dict):
        rows.append(("workload", ", ".join(manifest["workload"])))
    budget = _budget_text(manifest)
    if budget is None and isinstance(config.get("budget"), dict):     # as configured
        budget = "; ".join(f"{key} {text}" for key, text in mapping(config["budget"]))
    if budget:
        rows.append(("budget", budget))
    mechanism = (manifest.get("provenance", {}).get("noisy", {}).get("mechanism")
                 or config.get("mechanism") or {})
    if isinstance(mechanism, dict) and mechanism.get("name"):
        rows.append(("mechanism", str(mechanism["name"])))
    spec = manifest.get("provenance", {}).get("spec") or config.get("spec")
    if spec:
        rows.append(("spec", _spec_text(spec)))
    randomness = manifest.get("randomness", {})
    if randomness.get("mode"):
        seed = randomness.get("seed")
        rows.append(("randomness", f"{randomness['mode']}"
                                   + (f", seed {seed}" if seed is not None else "")
                                   + ("" if randomness.get("safe_for_release")
                                      else " (not safe for release)")))
    source = str(config.get("resolved", {}).get("source") or "")
    if source.endswith(".toml"):            # recorded in simulation mode only
        rows.append(("configuration", Path(source).name))
    rows.append(("output directory", directory.name))
    return rows


def _run_title(manifest: dict[str, Any], directory: Path) -> str:
    """The page's title: the run by its directory's name, then what it was — method, schema,
    total budget and randomness mode (``topdown run "run": e2e_1940, ε = 1, simulation``)."""
    from hierarchy.budget import Budget
    from hierarchy.errors import HierarchyError

    what = []
    schema = manifest.get("schema")
    if isinstance(schema, dict) and schema.get("name"):
        what.append(str(schema["name"]))
    try:
        budget = Budget.from_dict(manifest["provenance"]["noisy"]["budget"])
        what.append(f"{budget.symbol} = {budget.total}")
    except (KeyError, TypeError, HierarchyError):
        pass
    mode = manifest.get("randomness", {}).get("mode")
    if mode:
        what.append(str(mode))
    title = f"{manifest.get('method', 'postproc')} run “{directory.name}”"
    return title + (f": {', '.join(what)}" if what else "")


def _long_errors(table: pd.DataFrame, method: str, constrained: bool) -> pd.DataFrame:
    """The run's error table (measured and result columns side by side) as one row per series,
    level and query — what :func:`postproc.evaluation.plots.plot_comparison` draws."""
    from postproc.evaluation.tables import MEASURED, result_prefix

    frames = []
    for prefix, name, keeps in ((MEASURED, "measured", False),
                                (result_prefix(method), method, constrained)):
        if f"{prefix}_mae" in table:
            frames.append(pd.DataFrame({"method": name, "constrained": keeps,
                                        "level": table["level"], "query": table["query"],
                                        "mae": table[f"{prefix}_mae"]}))
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


#: What the sections of a run's errors say first, in a box: the numbers below are computed
#: from the confidential data — shown because the run is a simulation, or on the confidential
#: page of a release.
CONFIDENTIAL_NOTES = {
    "simulation": ("unsafe", "Computed from the confidential data (the input this run "
                             "measured): errors against its exact counts, and the median and "
                             "95th percentile of those counts (exact_median, exact_p95). Shown "
                             "because this run is a simulation; a release-mode run keeps them "
                             "off its page."),
    "release": ("confidential", "Computed from the confidential data: errors against its exact "
                                "counts, and the median and 95th percentile of those counts "
                                "(exact_median, exact_p95). CONFIDENTIAL: never publish them."),
}
#: How the pages state the MAE, wherever it is shown.
MAE_NOTE = ("MAE is the median of |error| (the census convention), not its mean; mean |error| "
            "stands beside it. Errors are in persons: the result minus the truth.")
#: Cells of an EPL's interval that are infinite: unbounded, not "undefined".
_EPL_ENDS = {c: (lambda v: "∞" if v == float("inf") else format_number(v))
             for c in ("epl_ci_low", "epl_ci_high", "epl_low", "epl_high")}


def _error_table_view(errors: pd.DataFrame, method: str) -> tuple[pd.DataFrame, dict[str, str]]:
    """The run's error table for the page: each series' MAE, mean |error| and RMSE side by
    side (measured, then the result), headers with units, without the ``randomness`` column
    (the page's banner says it)."""
    from postproc.evaluation.tables import MEASURED, result_prefix

    prefix = result_prefix(method)
    first = [c for c in ("level", "query", "units", MEASURED) if c in errors]
    series = [f"{who}_{key}" for who in (MEASURED, prefix) for key in ("mae", "mean_abs", "rmse")]
    columns = first + [c for c in series if c in errors]
    columns += [c for c in errors.columns if c not in columns and c != "randomness"]
    words = {"mae": "MAE (median |error|)", "mean_abs": "mean |error|", "rmse": "RMSE"}
    headers = {f"{who}_{key}": f"{name} {word}" for who, name in ((MEASURED, MEASURED),
                                                                  (prefix, method))
               for key, word in words.items()}
    headers["exact_median"] = "median true count"
    return errors[columns], headers


def _errors_section(errors: pd.DataFrame, method: str, constrained: bool, *, draw: Any,
                    note: str, coinciding: str, max_rows: int, link_prefix: str
                    ) -> dict[str, Any]:
    """The section of the run's own error table (``error_table.csv``) and its figure."""
    from postproc.evaluation.plots import plot_comparison
    from postproc.evaluation.tables import upgrade_error_table
    from postproc.reports.page import table

    errors = upgrade_error_table(errors)
    long = label_table(_long_errors(errors, method, constrained), table_mode(errors))
    figures = [draw(long, plot_comparison, "report_errors_by_level.png",
                    f"MAE by level: the measurements and {method}",
                    f"MAE (median absolute error) against the confidential data of each "
                    f"query's noisy measurement as measured (dashed) and of {method} by "
                    f"level, one panel per query; the table below has the mean |error| "
                    f"beside it. {coinciding}")] if len(long) else []
    shown, headers = _error_table_view(errors, method)
    return _section(
        "errors", "Errors by level and query", banners=[note], text=[MAE_NOTE], figures=figures,
        tables=[table(shown, max_rows=max_rows, link=link_prefix + "error_table.csv",
                      title="error_table.csv", headers=headers,
                      caption="Errors of the measurements as measured and of the result "
                              "against the confidential data, per level and query, written "
                              "by postproc run.")])


def _evaluation_section(evaluation: pd.DataFrame, method: str, *, draw: Any, note: str,
                        coinciding: str, max_rows: int, link_prefix: str) -> dict[str, Any]:
    """The section of ``postproc evaluate --save``'s table (``evaluation.csv``): the spread of
    the absolute errors and the EPL."""
    from postproc.evaluation.plots import plot_epl, plot_error_spread
    from postproc.evaluation.tables import HEADERS
    from postproc.reports.page import table

    figures = [draw(evaluation, plot_error_spread, "report_error_spread.png",
                    f"|error| of {method} by level: median, mean, 95th percentile, maximum",
                    f"The distribution of {method}'s absolute errors against the "
                    f"confidential data at every level, one panel per query: median, mean, "
                    f"95th percentile and maximum (postproc evaluate). {coinciding}")]
    if "epl" in evaluation:
        figures.append(draw(evaluation, plot_epl, "report_epl.png",
                            f"Empirical privacy loss of {method} by level (95% intervals; "
                            f"▲↑ lower bound, ∞ held invariant, × undefined)",
                            "EPL (improved estimator unless postproc evaluate was told "
                            "otherwise) with its 95% bootstrap interval, one panel per "
                            "query; a triangle with an arrow up: a one-sided lower bound "
                            "(EPL ≥ it: the errors cannot pin the loss down); ∞ at the top: "
                            "a query held invariant; × on the axis: undefined (the table's "
                            "notes say why)."))
    shown = evaluation.drop(columns="randomness", errors="ignore")
    return _section(
        "evaluation", "Error distribution and EPL", banners=[note], text=[MAE_NOTE],
        figures=figures,
        tables=[table(shown, max_rows=max_rows, link=link_prefix + "evaluation.csv",
                      title="evaluation.csv", headers=HEADERS, formats=_EPL_ENDS,
                      caption="postproc evaluate: error metrics and EPL (95% interval) "
                              "per level and query.")])


def _comparison_section(comparison: pd.DataFrame, *, draw: Any, note: str, coinciding: str,
                        max_rows: int, link_prefix: str) -> dict[str, Any]:
    """The section of ``postproc evaluate --compare --save``'s table (``comparison.csv``)."""
    from postproc.evaluation.evaluate import pivot
    from postproc.evaluation.plots import plot_comparison, plot_epl
    from postproc.evaluation.tables import HEADERS
    from postproc.reports.page import table

    figures = [draw(comparison, plot_comparison, "report_comparison_mae.png",
                    "MAE by level, one line per post-processor",
                    "MAE (median absolute error) of every post-processor of the same "
                    "measurements by level, one panel per query (bottom-up draws its own "
                    f"measurement at the same total ε). {coinciding}")]
    if "epl" in comparison:
        figures.append(draw(comparison, plot_epl, "report_comparison_epl.png",
                            "Empirical privacy loss by level, one marker per post-processor",
                            "EPL with its 95% interval of every post-processor by level, "
                            "one panel per query; × on the axis: undefined."))
    tables = [table(pivot(comparison, value), max_rows=max_rows,
                    title=f"Comparison of post-processors: {what}")
              for value, what in (("mae", "MAE (median |error|, persons)"),
                                  ("mean_abs", "mean |error| (persons)"),
                                  ("epl", "EPL (improved estimator)"))
              if value in comparison]
    tables.append(table(comparison.drop(columns="randomness", errors="ignore"),
                        max_rows=max_rows, link=link_prefix + "comparison.csv",
                        title="comparison.csv", caption="All metrics of every method.",
                        headers=HEADERS, formats=_EPL_ENDS))
    return _section("comparison", "Comparison of post-processors", banners=[note], text=[MAE_NOTE],
                    figures=figures, tables=tables)


def _error_sections(manifest: dict[str, Any], max_rows: int, errors_dir: Path,
                    link_prefix: str, coinciding: list[tuple[str, str, int]]
                    ) -> tuple[list[dict], set[str]]:
    """The errors of a run and their figures (written as ``report_*.png`` into
    ``errors_dir``), each section first saying they are computed from the confidential data."""
    from postproc.evaluation.plots import save_by_query
    from postproc.reports.page import figure

    def draw(frame: pd.DataFrame, plot: Any, name: str, title: str, caption: str):
        path = save_by_query(frame, plot, errors_dir / name, title=title)
        used.add(name)
        return figure(path, caption, link=link_prefix + name)

    method = str(manifest.get("method", "result"))
    constrained = bool(manifest.get("postprocess", {}).get("constrained", True))
    release = bool(manifest.get("safe_for_release"))
    shared = {"draw": draw, "note": CONFIDENTIAL_NOTES["release" if release else "simulation"],
              "coinciding": _coinciding_note(coinciding), "max_rows": max_rows,
              "link_prefix": link_prefix}
    sections, used = [], set()
    errors = _read_csv(errors_dir / "error_table.csv")
    if errors is not None:
        sections.append(_errors_section(errors, method, constrained, **shared))
        used.add("error_table.csv")
    evaluation = _read_csv(errors_dir / "evaluation.csv")
    if evaluation is not None:
        sections.append(_evaluation_section(evaluation, method, **shared))
        used.add("evaluation.csv")
    comparison = _read_csv(errors_dir / "comparison.csv")
    if comparison is not None:
        sections.append(_comparison_section(comparison, **shared))
        used.add("comparison.csv")
    return sections, used


def _run_page(directory: Path, manifest: dict[str, Any], max_rows: int, *, errors: bool,
              errors_dir: Path, link_prefix: str) -> tuple[dict[str, Any], set[str]]:
    from postproc.reports.page import banner, flat_mapping, table

    config = manifest.get("config", {})
    levels = manifest.get("levels", {})
    coinciding = _coinciding_levels(levels)
    sections = []
    if config:
        shown = {s: config[s] for s in CONFIG_SECTIONS if config.get(s)}
        sections.append(_section("configuration", "Configuration", pairs=flat_mapping(shown)))
    if levels:
        frame = pd.DataFrame([{"level": lv, **{k: v for k, v in info.items()
                                                 if not isinstance(v, dict)}}
                              for lv, info in levels.items()])
        sections.append(_section(
            "levels", "Levels", tables=[table(frame, max_rows=max_rows)],
            notes=[f"Every {upper} unit has exactly one {lower} unit ({units:,} each): the "
                   f"{lower} level repeats the {upper} level." for upper, lower, units
                   in coinciding]))
    used: set[str] = set()
    if not errors:
        sections.append(_section(
            "errors", "Errors",
            text=["Release mode: errors against the confidential data are not part of this "
                  "page. Write them (under confidential/, never to publish) with "
                  "postproc report DIR --confidential, DIR being the directory of this "
                  "page."]))
    else:
        found, used = _error_sections(manifest, max_rows, errors_dir, link_prefix, coinciding)
        sections += found or [_section(
            "errors", "Errors",
            text=["No error tables yet: run postproc evaluate DIR --truth DATA_DIR --save "
                  "(add --compare to compare post-processors), DIR being the directory of "
                  "this page."])]
    return {"ran": _run_settings(manifest, directory),
            "banners": banner(manifest.get("randomness")), "sections": sections}, used


# -- other directories ------------------------------------------------------------------------
def _others(directory: Path, used: set[str], max_rows: int, *, tables: bool) -> dict | None:
    """The PNGs and CSVs of ``directory`` no section showed: figures embedded; CSVs as cut
    tables (``tables``) or only linked."""
    from postproc.reports.page import figure

    pngs = sorted(p for p in directory.glob("*.png") if p.name not in used)
    csvs = sorted(p for p in directory.glob("*.csv") if p.name not in used)
    if not pngs and not csvs:
        return None
    if tables:
        shown = [t for t in (_csv_table(directory, p.name, "", max_rows) for p in csvs) if t]
        return _section("other", "Files", figures=[figure(p) for p in pngs], tables=shown)
    return _section("other", "Other files", figures=[figure(p) for p in pngs],
                    files=[(p.name, p.name, "CSV") for p in csvs])


def _compare_page(directory: Path, manifest: dict[str, Any], max_rows: int, title: str) -> str:
    from postproc.evaluation.compare import FILES, comparison_notes, render_html
    from postproc.reports.page import CONFIDENTIAL, banner

    table = _read_csv(directory / "compare.csv")
    if table is None:
        raise PostprocError(f"{directory} holds no readable compare.csv; run postproc compare "
                            f"again")
    table["epl_note"] = table["epl_note"].fillna("")
    randomness = manifest.get("randomness", {})
    if table_mode(table) == "unknown":      # a comparison written before tables had a label
        label_table(table, randomness)
    shown = table_gate(table, directory / "report.html", what=f"{directory}/compare.csv")
    banners = ([CONFIDENTIAL] if shown else []) + banner(randomness)
    figures = [directory / f for f in FILES if f.endswith(".png") and (directory / f).is_file()]
    return render_html(table, figures=figures, title=title, banners=banners,
                       notes=comparison_notes(manifest.get("methods", []),
                                              manifest.get("epl_method", "improved")),
                       max_rows=max_rows, confidential=shown is not None)


def _released_tables(directory: Path, page: Path) -> bool:
    """Whether a CSV of ``directory`` is labelled release mode (its ``randomness`` column):
    refused unless the page goes into a ``confidential/`` folder (then it carries the
    CONFIDENTIAL banner)."""
    found = False
    for path in sorted(directory.glob("*.csv")):
        frame = _read_csv(path)
        if frame is not None and table_mode(frame) == "release":
            table_gate(frame, page, what=f"{path} (computed in release mode)")
            found = True
    return found


def render_report(directory: str | Path, *, title: str | None = None, max_rows: int = MAX_ROWS,
                  confidential: bool = False) -> str:
    """The HTML page of an output directory (see the module docstring).

    Drawing a run's errors writes their figures (``report_*.png``) beside the error tables,
    under ``confidential/``.

    Parameters
    ----------
    directory : str or Path
    title : str, optional
        Default: the experiment's title; for a run, its directory's name and what it was
        (``topdown run "run": e2e_1940, ε = 1, simulation``).
    max_rows : int
        Rows shown per table (the full table is the linked CSV).
    confidential : bool
        The page for ``DIR/confidential/report.html``: a run's errors against the confidential
        data, under a CONFIDENTIAL banner.

    Returns
    -------
    str

    Raises
    ------
    PostprocError
        The directory does not exist, or holds nothing to report.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> d = pathlib.Path(tempfile.mkdtemp())
    >>> _ = (d / "numbers.csv").write_text("x,y\\n1,31967.23\\n")
    >>> page = render_report(d)
    >>> '<td class="num">31,967</td>' in page, page.startswith("<!DOCTYPE html>")
    (True, True)
    """
    from hierarchy.io.storage import read_json
    from postproc.reports.page import CONFIDENTIAL, render

    directory = Path(directory)
    if not directory.is_dir():
        raise PostprocError(f"{directory} is not a directory")
    manifest = (read_json(directory / "manifest.json")
                if (directory / "manifest.json").is_file() else None)
    if manifest is not None and manifest.get("made_by") == "postproc gls in parts":
        raise PostprocError(
            f"{directory} holds gls in parts estimates (postproc run --parts --method gls): "
            "its tables are <level>.parquet — estimates of the queries it was asked for, with "
            "standard errors and intervals at every level (docs/gls.md, \"At national "
            "scale\"); read them with pandas.read_parquet. The run report does not draw them "
            "yet")
    if manifest is not None and manifest.get("made_by") == "postproc compare":
        return _compare_page(directory, manifest, max_rows,
                             title or f"Comparison of post-processors: {directory.name}")
    if (directory / "summary.json").is_file():
        summary = read_json(directory / "summary.json")
        context, used = _experiment_page(directory, summary, max_rows)
        if _released_tables(directory, directory / "report.html"):
            context["banners"].insert(0, CONFIDENTIAL)
        template = "experiment.html.j2"
        title = title or summary.get("title") or summary.get("experiment", "experiment")
        other = _others(directory, used, max_rows, tables=False)
    elif manifest is not None:
        release = bool(manifest.get("safe_for_release"))
        errors_dir = directory / "confidential"
        if not (errors_dir / "error_table.csv").is_file() and not release:
            errors_dir = directory  # a run written before confidential/ existed
        context, used = _run_page(directory, manifest, max_rows,
                                  errors=confidential or not release, errors_dir=errors_dir,
                                  link_prefix="" if confidential or errors_dir == directory
                                  else "confidential/")
        if confidential:
            context["banners"].insert(0, CONFIDENTIAL)
        template = "run.html.j2"
        title = title or _run_title(manifest, directory)
        other = _others(directory, used, max_rows, tables=False)
    elif confidential:
        raise PostprocError(f"{directory} is not a postproc run directory (no manifest.json); "
                            "--confidential applies to runs")
    else:
        context, template = {"banners": [], "sections": []}, "directory.html.j2"
        if _released_tables(directory, directory / "report.html"):
            context["banners"].insert(0, CONFIDENTIAL)
        title = title or f"Report: {directory.name}"
        other = _others(directory, set(), max_rows, tables=True)
        if other is None:
            raise PostprocError(f"{directory} holds no summary.json, manifest.json, PNG or CSV "
                                f"to report on")
    if other is not None:
        context["sections"].append(other)
    return render(template, title=title, nav=_nav(context["sections"]), **context)


def write_report(directory: str | Path, *, title: str | None = None, max_rows: int = MAX_ROWS,
                 confidential: bool = False) -> Path:
    """Write ``directory/report.html`` (or, with ``confidential``, the run's
    ``directory/confidential/report.html``) atomically and return its path.

    Parameters
    ----------
    directory : str or Path
    title : str, optional
    max_rows : int
    confidential : bool
        See :func:`render_report`.

    Returns
    -------
    pathlib.Path

    Raises
    ------
    PostprocError
        As :func:`render_report`.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> d = pathlib.Path(tempfile.mkdtemp())
    >>> _ = (d / "t.csv").write_text("a\\n1\\n")
    >>> write_report(d).name
    'report.html'
    """
    from hierarchy.io.storage import atomic_path, confidential_directory

    page = render_report(directory, title=title, max_rows=max_rows, confidential=confidential)
    path = (confidential_directory(directory, what="errors against the confidential data")
            if confidential else Path(directory)) / "report.html"
    with atomic_path(path) as tmp:
        tmp.write_text(page, encoding="utf-8")
    return path
