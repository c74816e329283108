"""Compare registered post-processors on the same measurements: one tidy table, a figure, a page.

:func:`compare_methods` is the comparison of post-processors (``compare`` and
``compare_postprocessors`` of :mod:`postproc.evaluation.evaluate` are deprecated). It runs each
named post-processor of the registry (:mod:`postproc.methods`) on one
:class:`~hierarchy.noisy.NoisyHierarchy` — the methods that keep invariants (TopDown,
conditional sampling) with the spec, the others without it (they refuse invariants: the table
says ``constrained = False``) — and evaluates every result against the truth with
:func:`postproc.evaluation.evaluate.evaluate`: one row per method, level and query with the
columns of :data:`COLUMNS`. :func:`write_comparison` writes it as ``compare.csv`` and
``compare.json``, the figures ``compare_mae.png`` (MAE by level, one line per method) and
``compare_epl.png`` (EPL with its 95 % interval, constrained beside unconstrained methods) and the
page ``compare.html`` (:func:`render_html`: the report layout of :mod:`postproc.reports`, numbers in
its one format). ``postproc compare`` (:func:`postproc.apps.runs.directories.run_compare`) reads a
run configuration and its data once, measures once, compares and writes — under
``DIR/confidential/`` in release mode: every number of the table is computed from the
confidential data.

Randomness: a randomized method draws from the stream :func:`postproc.methods.registry.method_rng`
derives for it (so ``postproc run --method M`` gives M the same draws from the same seed), and
the EPL interval of method ``M`` from the stream ``(crc32("epl"), crc32(M))``.

Examples
--------
>>> from hierarchy.synth import synthesize_1940
>>> from hierarchy.tabulation import tabulate
>>> from hierarchy.measurement import measure
>>> from hierarchy.budget import Budget
>>> from hierarchy.queries import e2e_workload
>>> from hierarchy.schema import E2E_1940
>>> from invariants.spec import Invariant, Spec
>>> levels = ["nation", "state"]
>>> truth = tabulate(synthesize_1940(2_000, seed=1).persons, schema=E2E_1940, levels=levels)
>>> noisy = measure(truth, e2e_workload(E2E_1940), Budget.e2e(1, levels), rng=2,
...                 publish={"tot": levels})
>>> spec = Spec(invariants=(Invariant("tot", "all"),))
>>> table = compare_methods(noisy, truth, ["topdown", "hay"], spec, rng=3, queries=["total"],
...                         epl_options={"n_boot": 0})        # n_boot=0: no interval
>>> table.groupby("method", sort=False)["constrained"].first().to_dict()
{'topdown': True, 'hay': False}
>>> mae = table[table["query"] == "total"].set_index(["method", "level"])["mae"]
>>> mae["topdown"].tolist()                   # the totals are invariant: exact
[0.0, 0.0]
>>> bool(mae["hay", "state"] > 0)
True
"""

from __future__ import annotations

import json
import sys
import zlib
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd

from hierarchy.histograms import Hierarchy
from hierarchy.noisy import NoisyHierarchy
from postproc.errors import PostprocError
from postproc.evaluation.epl import epl_text
from postproc.evaluation.evaluate import default_queries, evaluate, json_ready
from postproc.gate import label_table, labelled, randomness_of, table_gate, write_csv
from postproc.reports.notes import epl_notes
from postproc.reports.numbers import format_number

__all__ = ["COLUMNS", "FILES", "compare_methods", "parse_methods", "format_pivot",
           "write_table", "write_figure", "write_mae_figure", "render_html", "comparison_notes",
           "write_html",
           "write_comparison", "constrained"]

#: The columns of :func:`compare_methods`' table.
COLUMNS = ("method", "constrained", "level", "query", "n", "mae", "mean_abs", "rmse", "epl",
           "epl_low", "epl_high", "epl_kind", "epl_note")
#: The files :func:`write_comparison` writes (and ``postproc compare`` replaces).
FILES = ("compare.csv", "compare.json", "compare_mae.png", "compare_epl.png", "compare.html")
_EPL_STREAM = zlib.crc32(b"epl")


def parse_methods(text: str | Sequence[str]) -> list[str]:
    """Registered post-processor names from ``"a,b,c"`` (or a sequence), checked.

    Parameters
    ----------
    text : str or sequence of str

    Returns
    -------
    list of str

    Raises
    ------
    PostprocError
        None given, a name repeated, or a name not registered (the message lists the registry).

    Examples
    --------
    >>> parse_methods("topdown, hay")
    ['topdown', 'hay']
    >>> parse_methods("topdown,tpodown")
    Traceback (most recent call last):
    ...
    postproc.errors.PostprocError: unknown post-processor 'tpodown'; registered: topdown, ...
    """
    from postproc.methods import get

    names = ([n.strip() for n in text.split(",")] if isinstance(text, str)
             else [str(n).strip() for n in text])
    names = [n for n in names if n]
    if not names:
        raise PostprocError("no methods to compare; name them, e.g. --methods topdown,hay,noisy "
                            "(postproc methods lists them)")
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise PostprocError(f"methods named more than once: {repeated}")
    for name in names:
        get(name)
    return names


def constrained(method: str, spec: Any) -> bool:
    """Whether the registered post-processor ``method`` runs constrained by ``spec`` in a
    comparison: it keeps invariants (:func:`postproc.methods.registry.method_spec` gives it the
    spec) and the spec has invariants or constraints.

    Examples
    --------
    >>> from invariants.spec import Spec
    >>> spec = Spec.e2e(["nation", "state"])
    >>> constrained("topdown", spec), constrained("hay", spec), constrained("topdown", None)
    (True, False, False)
    """
    from postproc.methods.registry import method_spec

    spec = method_spec(method, spec)
    return spec is not None and bool(getattr(spec, "invariants", ()) or
                                     getattr(spec, "constraints", ()))


def compare_methods(noisy: NoisyHierarchy, truth: Hierarchy, methods: Sequence[str],
                    spec: Any = None, *, rng: Any = None, epl_method: str = "improved",
                    progress: bool = False, queries: Sequence[str] | None = None,
                    options: Mapping[str, Mapping[str, Any]] | None = None,
                    epl_options: Mapping[str, Any] | None = None) -> pd.DataFrame:
    """Run each registered post-processor on the same measurements and evaluate it.

    Parameters
    ----------
    noisy : NoisyHierarchy
        The measurements every method post-processes.
    truth : Hierarchy
        The confidential counts the errors are measured against.
    methods : sequence of str
        Registered post-processors (``postproc methods`` lists them).
    spec : Spec, optional
        Given to the methods that keep invariants (TopDown, sampling); the others run without
        it (``constrained`` is False for them).
    rng : None, int, numpy.random.Generator or Randomness
        The randomized methods' draws and the EPL intervals' (see the module docstring);
        ``None`` is release mode.
    epl_method : {'improved', 'published'}
        The EPL estimator (:func:`postproc.evaluation.epl.estimate_epl`). The direct estimator needs
        repeated runs on neighbouring datasets, which one measurement cannot give.
    progress : bool
        One progress line per method on stderr.
    queries : sequence of str, optional
        Default: ``total`` and every query of the workload.
    options : mapping method → mapping, optional
        Keyword options of each method.
    epl_options : mapping, optional
        Options of the EPL estimator (e.g. ``{"n_boot": 0}`` for no interval).

    Returns
    -------
    pandas.DataFrame
        Columns :data:`COLUMNS`, one row per method, level and query: ``mae`` is the median
        absolute error, ``epl_low``/``epl_high`` the 95 % interval, ``epl_kind`` ``estimate``,
        ``bound`` (``epl`` is ``inf`` and ``epl_low`` a one-sided lower bound), ``unbounded``
        (held invariant) or ``undefined``, and ``epl_note`` why an EPL is not estimated; the
        numbers are :func:`~postproc.evaluation.evaluate.evaluate`'s.
        ``attrs["randomness"]`` is the measurements' label: the writers below keep a
        release-mode table to ``confidential/`` (:mod:`postproc.gate`).

    Raises
    ------
    PostprocError
        An unknown method or option, a method that fails on these measurements (named), or
        an unknown query.

    Examples
    --------
    >>> from hierarchy.synth import synthesize_1940
    >>> from hierarchy.tabulation import tabulate
    >>> from hierarchy.measurement import measure
    >>> from hierarchy.budget import Budget
    >>> from hierarchy.queries import e2e_workload
    >>> from hierarchy.schema import E2E_1940
    >>> truth = tabulate(synthesize_1940(2_000, seed=1).persons, schema=E2E_1940,
    ...                  levels=["nation", "state"])
    >>> noisy = measure(truth, e2e_workload(E2E_1940), Budget.e2e(1, ["nation", "state"]), rng=2)
    >>> table = compare_methods(noisy, truth, ["noisy", "rake"], rng=0, queries=["total"],
    ...                         epl_method="published")
    >>> table[["method", "constrained", "level", "query", "n"]].to_string(index=False)
    'method  constrained  level query  n\\n noisy        False nation total  1\\n noisy        False
    state total 49\\n  rake        False nation total  1\\n  rake        False  state total 49'
    """
    from hierarchy.randomness import as_randomness
    from postproc.methods import postprocess
    from postproc.methods.registry import method_rng, method_spec

    methods = parse_methods(methods)
    options = dict(options or {})
    stray = sorted(set(options) - set(methods))
    if stray:
        raise PostprocError(f"options given for {stray}, which are not among the methods "
                            f"compared {methods}")
    if epl_method == "direct":
        raise PostprocError("the direct EPL estimator needs repeated runs of a mechanism on "
                            "neighbouring datasets, and a comparison measures the data once; "
                            "use 'improved' (default) or 'published'")
    rnd = as_randomness(rng)
    queries = list(queries) if queries is not None else list(default_queries(noisy.workload))
    frames = []
    bar = _progress(methods, progress)
    try:
        for name in methods:
            bar.set_description(f"compare: {name}")
            method_spec_ = method_spec(name, spec)
            try:
                result = postprocess(noisy, name, method_spec_, rng=method_rng(rnd, name),
                                     **dict(options.get(name, {})))
            except PostprocError as exc:
                raise PostprocError(f"compare: {exc}") from None
            table = evaluate(result, truth, queries=queries, epl_method=epl_method,
                             epl_options=epl_options, spec=method_spec_,
                             rng=rnd.child(_EPL_STREAM, zlib.crc32(name.encode())))
            frames.append(pd.DataFrame({
                "method": name, "constrained": constrained(name, spec),
                "level": table["level"], "query": table["query"], "n": table["n"],
                "mae": table["mae"], "mean_abs": table["mean_abs"], "rmse": table["rmse"],
                "epl": table["epl"], "epl_low": table["epl_ci_low"],
                "epl_high": table["epl_ci_high"], "epl_kind": table["epl_kind"],
                "epl_note": table["epl_reason"].fillna("").astype(str)}))
            bar.update(1)
    finally:
        bar.close()
    return label_table(pd.concat(frames, ignore_index=True)[list(COLUMNS)], randomness_of(noisy))


def _progress(methods: Sequence[str], progress: bool):
    from tqdm.auto import tqdm

    return tqdm(total=len(methods), disable=not progress, file=sys.stderr, unit="method",
                leave=False)


# -- text, table files, figures, page -------------------------------------------------------------
def _epl_text(row: Mapping[str, Any]) -> str:
    return epl_text(row["epl"], row["epl_low"], row["epl_high"], format_number)


def _pivot_rows(table: pd.DataFrame, column: str) -> list[list[str]]:
    """``[query, method, *levels]`` rows of the text in ``column`` (query named once)."""
    levels = [str(lv) for lv in dict.fromkeys(table["level"])]
    shown = table.assign(level=table["level"].astype(str), label=table["method"].astype(str)
                         + np.where(table["constrained"], "", " (unconstrained)"))
    rows = []
    for query in dict.fromkeys(shown["query"]):
        for i, (label, part) in enumerate(
                shown[shown["query"] == query].groupby("label", sort=False)):
            values = part.set_index("level")[column].reindex(levels).fillna("")
            rows.append([str(query) if i == 0 else "", label, *values])
    return rows


def format_pivot(table: pd.DataFrame) -> str:
    """The comparison for a terminal: one row per query and method, one column per level;
    first the MAE (median absolute error), then the EPL with its interval.

    Parameters
    ----------
    table : pandas.DataFrame
        From :func:`compare_methods`.

    Returns
    -------
    str

    Examples
    --------
    >>> t = pd.DataFrame({"method": ["hay", "hay"], "constrained": [False, False],
    ...                   "level": ["nation", "state"], "query": ["total", "total"],
    ...                   "n": [1, 49], "mae": [2.0, 1.5], "mean_abs": [2.0, 1.7],
    ...                   "rmse": [2.0, 2.1], "epl": [float("inf"), 0.52],
    ...                   "epl_low": [float("nan"), 0.4], "epl_high": [float("nan"), 0.61],
    ...                   "epl_note": ["one error", ""]})
    >>> print(format_pivot(t))
    MAE (median absolute error) by level
    query  method                 nation  state
    total  hay (unconstrained)         2    1.5
    <BLANKLINE>
    EPL [95% interval] by level
    query  method                    nation              state
    total  hay (unconstrained)    undefined  0.52 [0.4, 0.61]
    """
    levels = [str(lv) for lv in dict.fromkeys(table["level"])]
    shown = table.assign(mae_text=table["mae"].map(format_number),
                         epl_text=table.apply(_epl_text, axis=1))
    blocks = []
    for column, title in (("mae_text", "MAE (median absolute error) by level"),
                          ("epl_text", "EPL [95% interval] by level")):
        rows = [["query", "method", *levels]] + _pivot_rows(shown, column)
        widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
        lines = ["  ".join([r[0].ljust(widths[0]), r[1].ljust(widths[1])]
                           + [v.rjust(w) for v, w in zip(r[2:], widths[2:])]).rstrip()
                 for r in rows]
        blocks.append(title + "\n" + "\n".join(lines))
    return "\n\n".join(blocks)


def _records(table: pd.DataFrame) -> list[dict[str, Any]]:
    """Rows as JSON-ready dicts: non-finite numbers become None."""
    return [{k: json_ready(v) for k, v in row.items()}
            for row in table.to_dict(orient="records")]


def write_table(table: pd.DataFrame, directory: str | Path, *,
                confidential: bool = False) -> list[Path]:
    """Write ``compare.csv`` and ``compare.json`` (a list of rows; undefined numbers ``null``)
    into ``directory``, atomically, each row with the table's randomness label (column and
    field ``randomness``).

    Parameters
    ----------
    table : pandas.DataFrame
        From :func:`compare_methods`.
    directory : str or Path
    confidential : bool
        Write a release-mode (or unlabelled) table outside a ``confidential/`` folder, under
        its CONFIDENTIAL label (see :func:`postproc.gate.table_gate`).

    Returns
    -------
    list of Path

    Raises
    ------
    PostprocError
        A release-mode or unlabelled table outside ``confidential/`` without ``confidential``.

    Examples
    --------
    >>> import tempfile
    >>> from postproc.gate import label_table
    >>> t = label_table(pd.DataFrame([{"method": "hay", "constrained": False, "level": "nation",
    ...                                "query": "total", "n": 1, "mae": 2.0, "mean_abs": 2.0,
    ...                                "rmse": 2.0, "epl": float("inf"),
    ...                                "epl_low": float("nan"), "epl_high": float("nan"),
    ...                                "epl_note": "one error"}]), "simulation")
    >>> paths = write_table(t, tempfile.mkdtemp())
    >>> row = json.loads(paths[1].read_text())[0]
    >>> row["epl"] is None, row["randomness"].split(":")[0]
    (True, 'simulation')
    """
    from hierarchy.io.storage import atomic_path

    directory = Path(directory)
    csv = write_csv(table, directory / "compare.csv", confidential=confidential,
                    what="the comparison table")          # the gate first: nothing is written
    js = directory / "compare.json"
    with atomic_path(js) as tmp:
        tmp.write_text(json.dumps(_records(labelled(table)), indent=1, allow_nan=False) + "\n",
                       encoding="utf-8")
    return [csv, js]


def write_figure(table: pd.DataFrame, path: str | Path, *, confidential: bool = False) -> Path:
    """Write the EPL figure: one panel per query, levels along the x axis, each method's EPL
    with its 95 % interval — constrained methods (filled markers) beside unconstrained ones
    (open markers) at every level; an undefined EPL is an ``×`` on the axis. A panel whose
    EPLs span more than a factor 20 has a log scale (:func:`~postproc.evaluation.plots.plot_epl`).

    Parameters
    ----------
    table : pandas.DataFrame
        From :func:`compare_methods`.
    path : str or Path
        A ``.png`` file (written atomically).
    confidential : bool
        As :func:`postproc.evaluation.plots.save_by_query`.

    Returns
    -------
    Path

    Examples
    --------
    >>> import tempfile
    >>> from postproc.gate import label_table
    >>> t = label_table(pd.DataFrame({
    ...     "method": ["topdown", "hay"], "constrained": [True, False],
    ...     "level": ["state", "state"], "query": ["total", "total"], "n": [49, 49],
    ...     "mae": [1.0, 2.0], "mean_abs": [1.0, 2.0], "rmse": [1.0, 2.0], "epl": [0.4, 0.6],
    ...     "epl_low": [0.3, 0.5], "epl_high": [0.5, 0.7], "epl_note": ["", ""]}), "simulation")
    >>> write_figure(t, tempfile.mkdtemp() + "/epl.png").read_bytes()[:4]
    b'\\x89PNG'
    """
    from postproc.evaluation.plots import plot_epl, save_by_query

    return save_by_query(table, plot_epl, path,
                         title="Empirical privacy loss by level: filled = constrained "
                               "(the spec kept), open = unconstrained; ▲↑ = lower bound "
                               "(EPL ≥), ∞ = held invariant, × = undefined",
                         confidential=confidential)


def write_mae_figure(table: pd.DataFrame, path: str | Path, *,
                     confidential: bool = False) -> Path:
    """Write the MAE figure: one panel per query, the MAE (median absolute error) by level,
    one line per method (:func:`~postproc.evaluation.plots.plot_comparison`).

    Parameters
    ----------
    table : pandas.DataFrame
        From :func:`compare_methods`.
    path : str or Path
        A ``.png`` file (written atomically).
    confidential : bool
        As :func:`postproc.evaluation.plots.save_by_query`.

    Returns
    -------
    Path

    Examples
    --------
    >>> import tempfile
    >>> from postproc.gate import label_table
    >>> t = label_table(pd.DataFrame({"method": ["topdown", "hay"], "constrained": [True, False],
    ...                               "level": ["state", "state"], "query": ["total", "total"],
    ...                               "mae": [1.0, 2.0]}), "simulation")
    >>> write_mae_figure(t, tempfile.mkdtemp() + "/mae.png").read_bytes()[:4]
    b'\\x89PNG'
    """
    from postproc.evaluation.plots import plot_comparison, save_by_query

    return save_by_query(table, plot_comparison, path,
                         title="MAE (median absolute error) by level: solid = constrained "
                               "(the spec kept), dashed = unconstrained",
                         confidential=confidential)


def _epl_cells(table: pd.DataFrame) -> tuple[pd.Series, list[str]]:
    """Per row the EPL text (an undefined one with the number of its note) and the notes."""
    marks, notes = epl_notes(table.assign(epl_reason=table["epl_note"].where(
        table["epl_note"].astype(str) != "")))
    texts = [_epl_text(row) + (f" [{mark}]" if mark is not None else "")
             for row, mark in zip(table.to_dict(orient="records"), marks)]
    return pd.Series(texts, index=table.index), notes


def render_html(table: pd.DataFrame, *, figures: Sequence[str | Path] = (),
                title: str = "Comparison of post-processors", notes: Sequence[str] = (),
                banners: Sequence[tuple[str, str]] = (), max_rows: int = 25,
                csv: str | None = "compare.csv", confidential: bool = False) -> str:
    """The comparison page: the MAE and the EPL by query, method and level (tables and
    figures), then every number (cut at ``max_rows`` rows, the full table linked).

    The table's randomness label adds its banner (when ``banners`` has none), and a
    release-mode or unlabelled table is rendered only with ``confidential``, under a
    CONFIDENTIAL banner (:func:`postproc.gate.table_gate`).

    Parameters
    ----------
    table : pandas.DataFrame
        From :func:`compare_methods`.
    figures : sequence of str or Path
        PNGs to embed (``compare_mae.png`` under the MAE, ``compare_epl.png`` under the EPL,
        any other at the end).
    title : str
    notes : sequence of str
        What was compared (plain text; escaped), shown first.
    banners : sequence of (kind, text)
        ``kind`` is ``"unsafe"``, ``"safe"`` or ``"confidential"``.
    max_rows : int
    csv : str, optional
        The full table's relative address.
    confidential : bool
        Render a release-mode or unlabelled table (under a CONFIDENTIAL banner).

    Returns
    -------
    str

    Raises
    ------
    PostprocError
        A release-mode or unlabelled table without ``confidential``.

    Examples
    --------
    >>> from postproc.gate import label_table
    >>> t = label_table(pd.DataFrame([{"method": "hay", "constrained": False, "level": "nation",
    ...                                "query": "total", "n": 1, "mae": 31967.2, "mean_abs": 2.0,
    ...                                "rmse": 2.0, "epl": float("inf"),
    ...                                "epl_low": float("nan"), "epl_high": float("nan"),
    ...                                "epl_note": "<one error>"}]), "simulation")
    >>> page = render_html(t)
    >>> "31,967" in page, "&lt;one error&gt;" in page, "e+" in page, "SIMULATION" in page
    (True, True, False, True)
    """
    from dataclasses import replace

    from postproc.reports.page import Figure, banner, figure, render
    from postproc.reports.page import table as page_table

    banners = list(banners)
    shown = table_gate(table, None, confidential=confidential, what="the comparison table")
    if shown and not any(kind == "confidential" for kind, _ in banners):
        banners.insert(0, ("confidential", shown))
    if not any(kind in ("safe", "unsafe") for kind, _ in banners):
        banners += banner(table.attrs.get("randomness"))

    captions = {"compare_mae.png": "MAE (median absolute error) by level, one panel per "
                                   "query: solid lines keep the invariants, dashed ones do not.",
                "compare_epl.png": "EPL with its 95% interval by level, one panel per query: "
                                   "filled markers keep the invariants, open ones do not; × on "
                                   "the axis: undefined (the table's notes say why)."}
    pictures: dict[str, Figure] = {Path(p).name: figure(p, captions.get(Path(p).name, ""))
                                   for p in figures}
    levels = [str(lv) for lv in dict.fromkeys(table["level"])]
    mae = pd.DataFrame(_pivot_rows(table, "mae"), columns=["query", "method", *levels])
    for level in levels:
        mae[level] = pd.to_numeric(mae[level], errors="coerce")
    epl_text, epl_notes_ = _epl_cells(table)
    epl = pd.DataFrame(_pivot_rows(table.assign(epl_text=epl_text), "epl_text"),
                       columns=["query", "method", *levels])
    sections = [
        {"id": "mae", "title": "Error: MAE by level",
         "text": ["MAE = median absolute error of the method's answers against the "
                  "confidential data, per query and level."],
         "tables": [page_table(mae, max_rows=max_rows, numeric=levels)],
         "figures": [pictures.pop(n) for n in ("compare_mae.png",) if n in pictures]},
        {"id": "epl", "title": "Empirical privacy loss by level",
         "text": ["Empirical privacy loss with its 95% interval in brackets; a numbered note "
                  "says why an EPL is undefined."],
         "tables": [replace(page_table(epl, max_rows=max_rows, numeric=levels),
                            notes=epl_notes_)],
         "figures": [pictures.pop(n) for n in ("compare_epl.png",) if n in pictures]},
        {"id": "numbers", "title": "All numbers",
         "text": ["mae = median absolute error; mean_abs = mean absolute error; epl_low, "
                  "epl_high = 95% interval (for epl_kind = bound, epl_low is a one-sided lower "
                  "bound: EPL >= epl_low); epl_note = why an EPL is not estimated."],
         "tables": [page_table(table, max_rows=max_rows, link=csv)],
         "figures": list(pictures.values())}]
    return render("compare.html.j2", title=title, banners=banners,
                  ran=" ".join(notes), sections=sections,
                  nav=[(s["id"], s["title"]) for s in sections])


def comparison_notes(methods: Sequence[str], epl_method: str) -> list[str]:
    """What a comparison ran, in words, for its page.

    Parameters
    ----------
    methods : sequence of str
    epl_method : str

    Returns
    -------
    list of str

    Examples
    --------
    >>> print(comparison_notes(["topdown", "hay"], "improved")[0])
    Methods: topdown, hay, each run on the same measurements; unconstrained ones ran without the
    spec's invariants and constraints. EPL estimator: improved.
    """
    return [f"Methods: {', '.join(methods)}, each run on the same measurements; "
            "unconstrained ones ran without the spec's invariants and constraints. "
            f"EPL estimator: {epl_method}."]


def write_html(table: pd.DataFrame, path: str | Path, *, figures: Sequence[str | Path] = (),
               title: str = "Comparison of post-processors", notes: Sequence[str] = (),
               banners: Sequence[tuple[str, str]] = (), max_rows: int = 25,
               confidential: bool = False) -> Path:
    """Write :func:`render_html`'s page to ``path``, atomically.

    Parameters
    ----------
    table : pandas.DataFrame
        From :func:`compare_methods`.
    path : str or Path
    figures, title, notes, banners, max_rows
        As :func:`render_html`.
    confidential : bool
        Write a release-mode or unlabelled table's page outside a ``confidential/`` folder
        (under a CONFIDENTIAL banner, which a page inside one carries too).

    Returns
    -------
    Path

    Raises
    ------
    PostprocError
        A release-mode or unlabelled table outside ``confidential/`` without ``confidential``.

    Examples
    --------
    >>> import tempfile
    >>> from postproc.gate import label_table
    >>> t = label_table(pd.DataFrame([{"method": "hay", "constrained": False, "level": "nation",
    ...                                "query": "total", "n": 1, "mae": 2.0, "mean_abs": 2.0,
    ...                                "rmse": 2.0, "epl": float("inf"),
    ...                                "epl_low": float("nan"), "epl_high": float("nan"),
    ...                                "epl_note": "<one error>"}]), "simulation")
    >>> page = write_html(t, tempfile.mkdtemp() + "/c.html", notes=["SIMULATION"]).read_text()
    >>> "&lt;one error&gt;" in page and "<table" in page
    True
    """
    from hierarchy.io.storage import atomic_path

    path = Path(path)
    shown = table_gate(table, path, confidential=confidential, what="the comparison page")
    page = render_html(table, figures=figures, title=title, notes=notes, banners=banners,
                       max_rows=max_rows, confidential=shown is not None)
    with atomic_path(path) as tmp:
        tmp.write_text(page, encoding="utf-8")
    return path


def write_comparison(table: pd.DataFrame, directory: str | Path, *,
                     notes: Sequence[str] = (),
                     banners: Sequence[tuple[str, str]] = (),
                     confidential: bool = False) -> list[Path]:
    """Write :data:`FILES` into ``directory``: the table (CSV and JSON), the MAE and EPL
    figures and the page that shows them.

    A table computed in release mode (``attrs["randomness"]``, as :func:`compare_methods`
    labels it), or one with no label, is written only into a ``confidential/`` folder, or
    with ``confidential=True``; its files then carry a CONFIDENTIAL banner (the CSV and JSON in
    their ``randomness`` column and field, the figures and the page at the top). A
    simulation's table is written anywhere, labelled not safe for release
    (:mod:`postproc.gate`).

    Parameters
    ----------
    table : pandas.DataFrame
        From :func:`compare_methods`.
    directory : str or Path
    notes : sequence of str
        What was compared, for the page.
    banners : sequence of (kind, text)
        The page's banners (default: the table's randomness label; CONFIDENTIAL as said).
    confidential : bool
        Write a release-mode or unlabelled table outside a ``confidential/`` folder.

    Returns
    -------
    list of Path

    Raises
    ------
    PostprocError
        A release-mode or unlabelled table outside ``confidential/`` without ``confidential``
        (nothing is written).

    Examples
    --------
    >>> import tempfile
    >>> from postproc.gate import label_table
    >>> t = label_table(pd.DataFrame([{"method": "hay", "constrained": False, "level": "nation",
    ...                                "query": "total", "n": 1, "mae": 2.0, "mean_abs": 2.0,
    ...                                "rmse": 2.0, "epl": 0.5, "epl_low": 0.4, "epl_high": 0.6,
    ...                                "epl_note": ""}]), "release")
    >>> write_comparison(t, tempfile.mkdtemp())
    Traceback (most recent call last):
    ...
    postproc.errors.PostprocError: the comparison table was computed against the confidential data
    of a release-mode measurement, so it is written only under a confidential/ folder: ...
    >>> [p.name for p in write_comparison(t, tempfile.mkdtemp() + "/confidential")]
    ['compare.csv', 'compare.json', 'compare_mae.png', 'compare_epl.png', 'compare.html']
    """
    directory = Path(directory)
    paths = write_table(table, directory, confidential=confidential)
    figures = [write_mae_figure(table, directory / "compare_mae.png",
                                confidential=confidential),
               write_figure(table, directory / "compare_epl.png", confidential=confidential)]
    page = write_html(table, directory / "compare.html", figures=figures, notes=notes,
                      banners=banners, confidential=confidential)
    return paths + figures + [page]
