"""Per-level error tables: the measurements as measured vs a post-processed result, against the
truth.

The table of ``postproc run`` (``confidential/error_table.csv``): for every level, ``total`` and
every query of the run's workload (:func:`default_queries`), the median absolute error (MAE), mean
absolute error and RMSE of the query's own noisy measurement at the level (columns
``measured_*``; a query not measured there is answered by summing the answers of a measured
query that determines it, named in the column ``measured``) and of the run's post-processor
(columns ``<method>_*``: ``topdown_mae``, ``sampling_mae``, …), integer or real-valued.

``measured`` is not the post-processor ``noisy``: that one releases every level's noisy
*detailed* cells, so its ``total`` is the sum of the 192 noisy cells (E2E), not the total's own
measurement nor the sum of the 24 ``va_hisp_race`` answers, and its error differs (usually
larger). A run with ``--method noisy`` shows both, ``measured_mae`` and ``noisy_mae``;
``postproc compare``'s ``noisy`` rows are the latter.

:class:`EvaluationTable` is the type of :func:`postproc.evaluation.evaluate.evaluate`'s table: a
pandas DataFrame whose notebook display (:func:`evaluation_html`) is compact — the randomness
label as a banner, the main columns with their units, numbers in the reports' one format.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import pandas as pd

from hierarchy.display import counted, html_table
from hierarchy.errors import HierarchyError
from hierarchy.histograms import Hierarchy
from hierarchy.measurement import exact_answers
from hierarchy.noisy import NoisyHierarchy
from hierarchy.queries import Workload, sparse_copy
from postproc.errors import PostprocError
from postproc.evaluation.epl import epl_text
from postproc.evaluation.metrics import error_metrics
from postproc.gate import CONFIDENTIAL_BANNER, label_table, randomness_of, table_mode
from postproc.reports.notes import epl_notes
from postproc.reports.numbers import format_number

__all__ = ["default_queries", "level_error_table", "format_error_table", "print_level_summary",
           "result_prefix", "upgrade_error_table", "MEASURED", "EvaluationTable",
           "evaluation_html", "HEADERS", "DETAIL_COLUMNS", "EPL_DETAIL", "COMPACT_OVER"]

_METRICS = (("mae", "MAE"), ("mean_abs", "mean|e|"), ("rmse", "RMSE"))


def default_queries(workload: Workload) -> tuple[str, ...]:
    """``total`` followed by the workload's queries (``detailed, hhgq, va_hisp_race`` in E2E).

    Parameters
    ----------
    workload : Workload

    Returns
    -------
    tuple of str

    Examples
    --------
    >>> from hierarchy.schema import E2E_1940
    >>> from hierarchy.queries import e2e_workload
    >>> default_queries(e2e_workload(E2E_1940))
    ('total', 'detailed', 'hhgq', 'va_hisp_race')
    """
    return tuple(dict.fromkeys(("total", *workload.names)))


#: The column prefix of the errors of each query's own measurement (see the module docstring).
MEASURED = "measured"


def result_prefix(method: str) -> str:
    """The column prefix of a method's errors: its name (``noisy`` too, as ``postproc compare``
    names it), but ``measured_method`` for a method registered as ``measured``, whose columns
    would otherwise be taken for the measurements'.

    Examples
    --------
    >>> result_prefix("topdown"), result_prefix("noisy"), result_prefix("measured")
    ('topdown', 'noisy', 'measured_method')
    """
    return f"{MEASURED}_method" if method == MEASURED else method


def upgrade_error_table(table: pd.DataFrame) -> pd.DataFrame:
    """An error table written before the measurements' columns were named ``measured_*``
    (they were ``noisy_*``, and the ``noisy`` method's ``noisy_detailed_*``) with today's names;
    a current table is returned as it is.

    Examples
    --------
    >>> old = pd.DataFrame({"level": ["nation"], "query": ["total"], "noisy": ["total"],
    ...                     "noisy_mae": [2.0], "noisy_detailed_mae": [5.0]})
    >>> list(upgrade_error_table(old).columns)
    ['level', 'query', 'measured', 'measured_mae', 'noisy_mae']
    """
    if f"{MEASURED}_mae" in table.columns or "noisy_mae" not in table.columns:
        return table
    names = {c: MEASURED + c[len("noisy"):] for c in table.columns
             if c == "noisy" or (c.startswith("noisy_") and not c.startswith("noisy_detailed"))}
    names.update({c: "noisy" + c[len("noisy_detailed"):] for c in table.columns
                  if c.startswith("noisy_detailed_")})
    return table.rename(columns=names)


def level_error_table(truth: Hierarchy, noisy: NoisyHierarchy, histograms, workload,
                      queries: Sequence[str] | None = None, *, method: str = "topdown"
                      ) -> pd.DataFrame:
    """MAE (median absolute error), mean absolute error and RMSE per level and query, for the
    measurements as measured and for the post-processed histograms.

    Parameters
    ----------
    truth : Hierarchy
    noisy : NoisyHierarchy
    histograms : sequence of arrays
        The post-processed histograms per level (integer or real), root first.
    workload : Workload
    queries : sequence of str, optional
        ``total`` and workload names; default ``total`` and every query of the workload
        (:func:`default_queries`).
    method : str
        Names the result's columns (see :func:`result_prefix`).

    Returns
    -------
    pandas.DataFrame
        ``level, query, units, measured`` (the measured query that answers it: its own name,
        or ``sum of <name>``), then ``measured_mae``, ``<method>_mae``,
        ``measured_mean_abs``, ``<method>_mean_abs``, ``measured_rmse``, ``<method>_rmse`` and
        ``exact_median``. A query no measurement of its level determines has ``measured`` =
        ``"not measured"`` and no ``measured_*`` errors (NaN). When some answers
        were not drawn (``Measurement.drawn``: they are known to be 0), every column counts the
        answers drawn only. Labelled with the measurements' randomness
        (``attrs["randomness"]``, :mod:`postproc.gate`).

    Raises
    ------
    PostprocError
        A query that is neither ``total`` nor in the workload.

    Examples
    --------
    >>> from hierarchy.synth import synthesize_1940
    >>> from hierarchy.tabulation import tabulate
    >>> from hierarchy.measurement import measure
    >>> from hierarchy.budget import Budget
    >>> from hierarchy.queries import e2e_workload
    >>> from hierarchy.schema import E2E_1940
    >>> from postproc.methods import postprocess
    >>> truth = tabulate(synthesize_1940(2_000, seed=1).persons, schema=E2E_1940,
    ...                  levels=["nation", "state"])
    >>> noisy = measure(truth, e2e_workload(E2E_1940), Budget.e2e(1, ["nation", "state"]), rng=2)
    >>> hay = postprocess(noisy, "hay")
    >>> table = level_error_table(truth, noisy, hay.histograms, noisy.workload, method="hay")
    >>> list(table.columns[3:8])
    ['measured', 'measured_mae', 'hay_mae', 'measured_mean_abs', 'hay_mean_abs']
    >>> table[table["level"] == "state"]["measured"].tolist()
    ['sum of va_hisp_race', 'detailed', 'hhgq', 'va_hisp_race']
    >>> table["query"].unique().tolist()          # total and every query of the workload
    ['total', 'detailed', 'hhgq', 'va_hisp_race']
    """
    queries = default_queries(workload) if queries is None else tuple(queries)
    unknown = [q for q in queries if q != "total" and q not in workload]
    if unknown:
        raise PostprocError(f"the workload has no quer{'y' if len(unknown) == 1 else 'ies'} "
                            f"{unknown}; its queries are {list(workload.names)} (and 'total')")
    prefix = result_prefix(method)
    rows: list[dict[str, Any]] = []
    for li, level in enumerate(noisy.levels[:len(histograms)]):
        exact_counts = truth.counts[li]
        # one sparse copy of each level's histograms serves all its queries (a 2020-style
        # block level: 50M cells, 0.3 % nonzero; a copy per query took 4 of a 1M demo's 40 s)
        exact_sparse = sparse_copy(exact_counts)
        post_sparse = sparse_copy(histograms[li])
        for q in queries:
            if q == "total":
                exact = exact_counts.sum(axis=1, keepdims=True)
                post = histograms[li].sum(axis=1, keepdims=True)
            else:
                exact = exact_answers(workload[q], exact_counts, exact_sparse)
                post = exact_answers(workload[q], histograms[li], post_sparse)
            units = int(exact.shape[0])
            try:
                raw, how, drawn = noisy.derived_answers(level, q, with_drawn=True)
                if drawn is not None:       # only the answers drawn (the others are known 0)
                    raw, exact, post = raw[drawn], exact[drawn], post[drawn]
                m_noisy = error_metrics(raw, exact)
            except HierarchyError:      # not determined by this level's measurements
                how, m_noisy = "not measured", {key: float("nan") for key, _ in _METRICS}
            m_post = error_metrics(post, exact)
            row: dict[str, Any] = {"level": level, "query": q, "units": units,
                                   MEASURED: how}
            for key, _ in _METRICS:
                row[f"{MEASURED}_{key}"] = m_noisy[key]
                row[f"{prefix}_{key}"] = m_post[key]
            row["exact_median"] = m_post["exact_median"]
            rows.append(row)
    return label_table(pd.DataFrame(rows), randomness_of(noisy))


def _method_of(table: pd.DataFrame) -> str:
    """The prefix of the result's columns of a :func:`level_error_table` table."""
    prefixes = [c[:-len("_mae")] for c in table.columns
                if c.endswith("_mae") and c != f"{MEASURED}_mae"]
    return prefixes[0] if prefixes else "topdown"


def format_error_table(table: pd.DataFrame) -> str:
    """A compact aligned text table of :func:`level_error_table`'s table.

    Examples
    --------
    >>> t = pd.DataFrame([{"level": "nation", "query": "total", "units": 1, "measured": "total",
    ...                    "measured_mae": 2.0, "rake_mae": 0.5, "measured_mean_abs": 2.0,
    ...                    "rake_mean_abs": 0.5, "measured_rmse": 2.0, "rake_rmse": 0.5}])
    >>> print(format_error_table(t))
     level query  units  MAE measured  MAE rake  mean|e| measured  mean|e| rake
                                                                            RMSE measured  RMSE rake
    nation total      1          2.00      0.50              2.00          0.50
                                                                                     2.00       0.50
    """
    if table.empty:
        return "(no levels)"
    prefix = _method_of(table)
    name = "TopDown" if prefix == "topdown" else prefix
    columns, labels = ["level", "query", "units"], ["level", "query", "units"]
    for key, label in _METRICS:
        columns += [f"{MEASURED}_{key}", f"{prefix}_{key}"]
        labels += [f"{label} {MEASURED}", f"{label} {name}"]
    show = table[columns].copy()
    show.columns = labels
    return show.to_string(index=False, float_format=lambda v: f"{v:,.2f}", na_rep="-")


def print_level_summary(out, *, show_confidential: bool | None = None) -> None:
    """Print which post-processor ran and a finished pipeline's per-level error table (saved
    in ``DIR/confidential/``).

    In release mode the table is never printed (the terminal is an output too): only where it
    was written, if it was asked for. ``show_confidential`` overrides that for a simulation.

    Parameters
    ----------
    out : PipelineResult
        What :func:`postproc.apps.runs.pipeline.run_pipeline` returned.
    show_confidential : bool, optional
        Print the error table (default: in simulation mode only).

    Examples
    --------
    >>> import tempfile
    >>> from pathlib import Path
    >>> from hierarchy.synth import write_synthetic_1940
    >>> from postproc.apps.runs.config import RunConfig
    >>> from postproc.apps.runs.pipeline import run_pipeline
    >>> base = Path(tempfile.mkdtemp())
    >>> _ = write_synthetic_1940(base, 500, seed=1, progress=False)
    >>> config = RunConfig.build(persons="persons.parquet", units="units.parquet",
    ...                          levels=["nation", "state"], budget=1, seed=1, base=base)
    >>> out = run_pipeline(config, out=base / "run", progress=False, log=lambda m: None)
    >>> print_level_summary(out)
    post-processor: topdown (integer, consistent, nonnegative, invariants)
    Error against the confidential data (MAE = median absolute error; measured = the noisy
    measurement before post-processing, summed from a finer measured query where the query was not
    measured itself):
     level        query  units  MAE measured  MAE TopDown  mean|e| measured  mean|e| TopDown
                                                                         RMSE measured  RMSE TopDown
    nation        total      1         26.00         0.00             26.00             0.00
                                                                                 26.00          0.00
    nation     detailed      1         29.00         0.00             40.86             0.76
                                                                                 57.59          3.59
    nation         hhgq      1          6.50         0.00              9.75             0.50
                                                                                 12.88          1.00
    nation va_hisp_race      1          3.00         0.00              5.92             1.67
                                                                                  8.99          2.83
     state        total     49         24.00         0.00             29.08             0.00
                                                                                 34.50          0.00
     state     detailed     49         28.00         0.00             40.01             0.03
                                                                                 56.36          0.38
     state         hhgq     49         13.00         0.00             18.10             0.01
                                                                                 25.45          0.14
     state va_hisp_race     49          4.00         0.00              5.65             0.27
                                                                                  7.70          1.07
    (saved in .../run/confidential/error_table.csv)
    >>> print_level_summary(out, show_confidential=False)      # as in release mode
    post-processor: topdown (integer, consistent, nonnegative, invariants)
    errors against the confidential data: .../run/confidential/error_table.csv (CONFIDENTIAL - do
    not publish)
    """
    from postproc.errors import PostprocError
    from postproc.methods import get

    try:
        promises = ", ".join(get(out.result.method).promises) or "no promises"
    except PostprocError:  # a method unregistered since: say so, do not fail
        promises = "not registered now"
    print(f"post-processor: {out.result.method} ({promises})")
    table = out.error_table
    if table is None:
        if out.release:
            print("release mode: no errors against the confidential data were computed (ask "
                  "with --error-table; they are written under confidential/ only)")
        return
    path = out.directory / "confidential" / "error_table.csv"
    show = (not out.release) if show_confidential is None else show_confidential
    if not show:
        print(f"errors against the confidential data: {path} (CONFIDENTIAL - do not publish)")
        return
    print("Error against the confidential data (MAE = median absolute error; measured = the "
          "noisy measurement before post-processing, summed from a finer measured query where "
          "the query was not measured itself):")
    print(format_error_table(table))
    print(f"(saved in {path})")


# -------------------------------------------------------------------------------------------------
# The evaluation table in a notebook
# -------------------------------------------------------------------------------------------------
#: The header of a column of an evaluation or comparison in the notebook display, with its unit.
HEADERS = {"n": "n (answers)", "mae": "MAE (persons, median |error|)",
           "mean_abs": "mean |error| (persons)", "rmse": "RMSE (persons)",
           "mse": "MSE (persons²)", "p95_abs": "95th pct |error| (persons)",
           "max_abs": "max |error| (persons)", "exact_median": "median true count (persons)",
           "exact_p95": "95th pct true count (persons)", "epl": "EPL (ε)",
           "epl_ci_low": "EPL 95% low (ε)", "epl_ci_high": "EPL 95% high (ε)",
           "epl_low": "EPL 95% low (ε)", "epl_high": "EPL 95% high (ε)", "epl_kind": "EPL kind",
           "epl_method": "EPL estimator", "epl_reason": "why no EPL estimate",
           "epl_note": "why no EPL estimate"}
#: The columns a wide table (more than :data:`COMPACT_OVER` columns) leaves out of its notebook
#: display.
DETAIL_COLUMNS = ("mse", "max_abs", "exact_p95")
#: The columns folded into the ``EPL`` cell of the notebook display (its interval, the kind of
#: number it is) and the notes under the table (why it is not an estimate).
EPL_DETAIL = ("epl_ci_low", "epl_ci_high", "epl_low", "epl_high", "epl_kind", "epl_reason",
              "epl_note")
#: A table with more columns than this is shown compact (:func:`evaluation_html`).
COMPACT_OVER = 10
_BANNERS = {"release": ("confidential", f"release: {CONFIDENTIAL_BANNER}"),
            "simulation": ("unsafe", "simulation: NOT SAFE FOR RELEASE (seeded noise; errors "
                                     "against the data)"),
            "unknown": ("confidential", f"no randomness label: treated as {CONFIDENTIAL_BANNER}")}


class EvaluationTable(pd.DataFrame):
    """The table of :func:`~postproc.evaluation.evaluate.evaluate`: a pandas DataFrame in every
    respect (selections, ``assign``, ``concat``, CSV and Parquet writing; what pandas makes of
    it is an EvaluationTable again, with the same ``attrs``), whose notebook display is
    :func:`evaluation_html`'s compact table under the randomness banner.
    ``pandas.DataFrame(table)`` is the plain DataFrame, shown in full.

    Examples
    --------
    >>> from postproc.gate import label_table
    >>> table = label_table(EvaluationTable({"level": ["nation"], "query": ["total"],
    ...                                      "mae": [2.0]}), "simulation")
    >>> type(table[["mae"]]).__name__, table[["mae"]].attrs["randomness"]["mode"]
    ('EvaluationTable', 'simulation')
    >>> "NOT SAFE FOR RELEASE" in table._repr_html_()
    True
    """

    @property
    def _constructor(self):
        return EvaluationTable

    def _repr_html_(self) -> str:
        """The notebook display (:func:`evaluation_html`)."""
        return evaluation_html(self)


def _epl_cells(frame: pd.DataFrame, notes: list[str]) -> list[str]:
    """The ``EPL [95% interval]`` text of every row (``≥ x`` a one-sided bound), each marked
    ``[k]`` with the note saying why it is not an estimate (appended to ``notes``)."""
    low = next((c for c in ("epl_ci_low", "epl_low") if c in frame), None)
    high = next((c for c in ("epl_ci_high", "epl_high") if c in frame), None)
    nan = np.full(len(frame), np.nan)
    lows = frame[low].to_numpy(float) if low else nan
    highs = frame[high].to_numpy(float) if high else nan
    reason = next((c for c in ("epl_reason", "epl_note") if c in frame), None)
    marks: list[int | None] = [None] * len(frame)
    if reason is not None and "query" in frame:
        reasons = frame[reason].where(frame[reason].astype(str) != "")
        marks, lines = epl_notes(pd.DataFrame({"query": frame["query"], "epl": frame["epl"],
                                               "epl_ci_low": lows, "epl_reason": reasons}))
        notes.extend(lines)
    return [epl_text(e, lo, hi, format_number) + (f" [{m}]" if m is not None else "")
            for e, lo, hi, m in zip(frame["epl"].to_numpy(float), lows, highs, marks)]


def evaluation_html(table: pd.DataFrame, *, max_rows: int | None = None) -> str:
    """The notebook display of an evaluation (or comparison) table.

    Above the table, its randomness label as a banner (:func:`postproc.gate.table_mode`):
    ``release: CONFIDENTIAL …`` in red, ``simulation: NOT SAFE FOR RELEASE …`` in yellow, and a
    table without a label in red as confidential. Headers carry their units (:data:`HEADERS`:
    ``MAE (persons, median |error|)``, ``EPL (ε)``); numbers are written as the reports write
    them (:func:`~postproc.reports.numbers.format_number`: three significant digits, thousands
    separated). The EPL is one cell with its 95 % interval (``≥ x`` a one-sided lower bound),
    why it is not an estimate in numbered notes under the table (:data:`EPL_DETAIL`); a table of
    more than :data:`COMPACT_OVER` columns — a whole evaluation — leaves out
    :data:`DETAIL_COLUMNS` too. The columns left out are named under the table. Every text is
    escaped.

    Parameters
    ----------
    table : pandas.DataFrame
    max_rows : int, optional
        Rows shown (default pandas' ``display.max_rows``).

    Returns
    -------
    str

    Examples
    --------
    >>> from postproc.gate import label_table
    >>> inf = float("inf")
    >>> row = {"level": "state", "query": "total", "n": 49, "mae": 2.0, "mean_abs": 2.37,
    ...        "rmse": 3.1, "mse": 9.6, "p95_abs": 6.0, "max_abs": 9.0, "exact_median": 380.0,
    ...        "exact_p95": 900.0, "epl": 0.5234, "epl_ci_low": 0.41, "epl_ci_high": 0.66,
    ...        "epl_kind": "estimate", "epl_method": "improved", "epl_reason": ""}
    >>> page = evaluation_html(label_table(pd.DataFrame([row]), "release"))
    >>> "release: CONFIDENTIAL" in page, "MAE (persons, median |error|)" in page
    (True, True)
    >>> "0.523 [0.41, 0.66]" in page, "Not shown: mse, max_abs, exact_p95" in page
    (True, True)
    """
    mode = table_mode(table)
    frame = table.reset_index() if any(n is not None for n in table.index.names) else table
    if max_rows is None:
        max_rows = pd.get_option("display.max_rows") or 60
    shown = frame.head(max_rows)
    notes: list[str] = []
    methods = list(frame["epl_method"].dropna().unique()) if "epl_method" in frame else []
    left_out = set(DETAIL_COLUMNS) if frame.shape[1] > COMPACT_OVER else set()
    if "epl" in frame:          # the EPL in one cell, its method in the header when it is one
        left_out |= set(EPL_DETAIL) | ({"epl_method"} if len(methods) == 1 else set())
    columns = [c for c in shown.columns if c not in left_out]
    cells = {c: [format_number(v) for v in shown[c]] for c in columns}
    header = {c: HEADERS.get(str(c), str(c)) for c in columns}
    if "epl" in columns:
        cells["epl"] = _epl_cells(shown, notes)
        header["epl"] = ("EPL (ε, " + (f"{methods[0]} estimator, " if len(methods) == 1 else "")
                         + "95% interval)")
    rows = list(zip(*(cells[c] for c in columns))) if columns else []
    numeric = [i for i, c in enumerate(columns)
               if c == "epl" or (pd.api.types.is_numeric_dtype(frame[c])
                                 and not pd.api.types.is_bool_dtype(frame[c]))]
    if {"mae", "mean_abs"} & set(columns):
        notes.insert(0, "MAE is the median |error| (the census convention); mean |error| is "
                        "the mean. Errors are in persons: the result minus the truth.")
    hidden = [str(c) for c in frame.columns if c in left_out]
    if hidden:
        notes.append(f"Not shown: {', '.join(hidden)} (an EPL's interval and kind are in its "
                     f"cell, why it is not an estimate in the notes; pandas.DataFrame(table) "
                     f"shows all {frame.shape[1]} columns).")
    caption = counted(len(frame), "row") + (f", showing the first {len(shown):,}"
                                           if len(shown) < len(frame) else "")
    return html_table([header[c] for c in columns], rows, caption=caption, numeric=numeric,
                      notes=notes, banner=_BANNERS[mode])
