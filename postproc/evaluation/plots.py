"""Figures for notebooks and reports: each ``plot_*`` function draws on a matplotlib ``Axes``
and returns it.

:func:`plot_errors_by_level` draws a result's errors against the truth, one box per level
(the result is its argument: ``Result.plot``, its deprecated alias, says the same);
:func:`plot_comparison` draws the table of
:func:`postproc.evaluation.compare.compare_methods`, the MAE by level with one line per method
(:meth:`postproc.apps.runs.directories.CompareOutput.plot`); :func:`plot_epl` the EPL by level with
its interval, one marker per method; :func:`plot_error_spread` the median, mean, 95th percentile
and maximum of the absolute errors by level (the summary of the error distribution that
``postproc evaluate`` keeps). Pass ``ax`` to draw into a figure of your own; without it a new
pyplot figure is made (shown inline by Jupyter). :func:`save_by_query` draws one of them per
query into one PNG (the reports' figures). matplotlib is imported only when a figure is drawn.

Errors are computed from the confidential truth: a table (or result) of a release-mode
measurement, or one with no randomness label, is drawn only with ``confidential=True``, under a
CONFIDENTIAL banner, and written by :func:`save_by_query` only into a ``confidential/`` folder
(or with ``confidential=True``); a simulation's is drawn as it is
(:func:`postproc.gate.table_gate`).

Examples
--------
>>> from matplotlib.figure import Figure
>>> table = label_table(pd.DataFrame({"method": ["topdown", "topdown", "hay", "hay"],
...                                   "constrained": [True, True, False, False],
...                                   "level": ["nation", "state"] * 2, "query": ["total"] * 4,
...                                   "mae": [0.0, 0.0, 3.0, 2.5]}), "simulation")
>>> ax = plot_comparison(table, ax=Figure().subplots())
>>> [line.get_label() for line in ax.get_lines()]
['topdown', 'hay (unconstrained)']
>>> ax = plot_comparison(label_table(table, "release"), ax=Figure().subplots(),
...                      confidential=True)
>>> ax.figure.get_suptitle().startswith("CONFIDENTIAL")
True
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np
import pandas as pd

from hierarchy.frames import resolve_query
from postproc.errors import PostprocError
from postproc.evaluation.epl.result import epl_kind
from postproc.gate import banner_figure, label_table, randomness_of, table_gate

__all__ = ["plot_errors_by_level", "plot_comparison", "plot_epl", "plot_error_spread",
           "save_by_query"]

#: Levels with at most this many units also show every unit's error as a point.
POINTS_UP_TO = 50


def _axes(ax: Any, size: tuple[float, float] = (6.0, 3.6)) -> Any:
    """``ax`` itself, or the axes of a new pyplot figure (so Jupyter shows it inline)."""
    if ax is not None:
        return ax
    import matplotlib.pyplot as plt

    _, ax = plt.subplots(figsize=size, layout="constrained")
    return ax


def plot_errors_by_level(result: Any, truth: Any, query: str = "total", *,
                         ax: Any = None, confidential: bool = False) -> Any:
    """Box plot of the errors (result − truth) of ``query`` by level, root first.

    Every answer of every unit is one error; levels with at most :data:`POINTS_UP_TO` units show
    each error as a point too (a box of one unit is a line).

    Parameters
    ----------
    result : Result
        A post-processor's result (:class:`postproc.result.Result`).
    truth : Hierarchy
        The confidential truth, on the same geography.
    query : str
        A workload query's name or a query expression (``"total"``, ``"marginal(sex)"``).
    ax : matplotlib.axes.Axes, optional
        Where to draw; a new pyplot figure when omitted.
    confidential : bool
        Draw the errors of a result whose measurements were made in release mode (or record
        no randomness), under a CONFIDENTIAL banner.

    Returns
    -------
    matplotlib.axes.Axes

    Raises
    ------
    PostprocError
        The result's measurements were made in release mode or record no randomness (its
        errors are confidential) and ``confidential`` is off, or the truth's units differ
        from the result's at a level.

    Examples
    --------
    >>> from matplotlib.figure import Figure
    >>> from hierarchy.synth import synthesize_1940
    >>> from hierarchy.tabulation import tabulate
    >>> from hierarchy.schema import E2E_1940
    >>> from hierarchy.queries import e2e_workload
    >>> from postproc.result import Result
    >>> truth = tabulate(synthesize_1940(500, seed=1).persons, schema=E2E_1940,
    ...                  levels=["nation", "state"])
    >>> zeros = Result("zeros", E2E_1940, truth.geography, e2e_workload(E2E_1940),
    ...                tuple(np.zeros_like(c) for c in truth.counts),
    ...                {"noisy": {"randomness": {"mode": "simulation"}}})
    >>> ax = plot_errors_by_level(zeros, truth, ax=Figure().subplots())
    >>> [t.get_text() for t in ax.get_xticklabels()], ax.get_ylabel()
    (['nation', 'state'], 'error (result − truth)')
    """
    shown = table_gate(label_table(pd.DataFrame(), randomness_of(result)), None,
                       confidential=confidential,
                       what=f"{result.method}: the errors of this result against the truth")
    q = resolve_query(query, result.schema, result.workload)
    levels = list(result.levels)
    errors = []
    for level in levels:
        mine = result.answers(level, q)
        exact = truth.answers(level, q)
        if mine.shape != exact.shape:
            raise PostprocError(f"level {level!r}: the result has {mine.shape[0]} units, the "
                                f"truth {exact.shape[0]}; compare a result with the truth it "
                                f"was measured from")
        errors.append((mine - exact).ravel().astype(np.float64))
    ax = _axes(ax)
    positions = np.arange(len(levels))
    ax.boxplot(errors, positions=positions, widths=0.5, showfliers=False)
    for x, e in zip(positions, errors):
        if e.size <= POINTS_UP_TO * q.n_answers:
            ax.plot(np.full(e.size, x), e, ".", color="C0", alpha=0.6, markersize=4)
    ax.axhline(0, color="0.5", linewidth=0.8)
    ax.set_xticks(positions, levels)
    ax.set_xlabel("level")
    ax.set_ylabel("error (result − truth)")
    ax.set_title(f"{result.method}: error of {q.name} by level")
    ax.grid(True, axis="y", alpha=0.3)
    banner_figure(ax.figure, shown)
    return ax


def plot_comparison(table: pd.DataFrame, query: str | None = None, *, ax: Any = None,
                    legend: bool = True, confidential: bool = False) -> Any:
    """MAE (median absolute error) by level, one line per method: solid for the methods given
    the spec (they keep its invariants, or its equalities), dashed for the unconstrained ones;
    a logarithmic scale above the smallest positive MAE when the methods are more than 20
    times apart.

    Parameters
    ----------
    table : pandas.DataFrame
        From :func:`postproc.evaluation.compare.compare_methods` (columns ``method``,
        ``constrained``, ``level``, ``query``, ``mae``); without ``constrained`` every line is
        solid and labelled by its method alone.
    query : str, optional
        Which query's rows to draw; default ``"total"`` if the table has it, else its first.
    ax : matplotlib.axes.Axes, optional
        Where to draw; a new pyplot figure when omitted.
    legend : bool
        Draw the legend on ``ax`` (:func:`save_by_query` draws one for the whole figure).
    confidential : bool
        Draw a release-mode or unlabelled table, under a CONFIDENTIAL banner.

    Returns
    -------
    matplotlib.axes.Axes

    Raises
    ------
    PostprocError
        The table lacks a needed column or has no row of ``query``; a release-mode or
        unlabelled table without ``confidential``.

    Examples
    --------
    >>> from matplotlib.figure import Figure
    >>> table = label_table(pd.DataFrame({"method": ["sampling", "sampling"],
    ...                                   "constrained": [True, True],
    ...                                   "level": ["nation", "state"],
    ...                                   "query": ["detailed"] * 2, "mae": [4.0, 1.0]}),
    ...                     "simulation")
    >>> ax = plot_comparison(table, ax=Figure().subplots())
    >>> ax.get_title(), ax.get_lines()[0].get_ydata().tolist()
    ('MAE of detailed by level', [4.0, 1.0])
    """
    shown = table_gate(table, None, confidential=confidential, what="the comparison table")
    part, query, levels = _query_rows(table, query, ("method", "level", "query", "mae"))
    ax = _axes(ax)
    positions = np.arange(len(levels))
    for method, rows in part.groupby("method", sort=False):
        constrained = _is_constrained(rows)
        mae = rows.set_index("level")["mae"].reindex(levels).to_numpy(dtype=np.float64)
        ax.plot(positions, mae, marker="o", linestyle="-" if constrained else "--",
                label=_method_label(method, constrained))
    ax.set_xticks(positions, levels)
    ax.set_xlabel("level")
    ax.set_ylabel("MAE (median absolute error)")
    top = float(part["mae"].max()) if len(part) else 0.0
    positive = part["mae"][part["mae"] > 1e-6 * top]        # float rounding of a held 0 is 0
    if len(positive) and positive.max() > 20 * positive.min():
        # methods an order of magnitude apart (the noisy cells beside post-processed ones):
        # linear up to one person (or the smallest MAE below that), logarithmic above
        threshold = min(1.0, float(positive.min()))
        ax.set_yscale("symlog", linthresh=threshold)
        ax.set_ylabel(f"MAE (median absolute error; log scale above {threshold:g})")
    ax.set_ylim(bottom=0)
    if not (part["mae"] > 0).any():
        _say(ax, "every MAE is 0")
    ax.set_title(f"MAE of {query} by level")
    ax.grid(True, axis="y", alpha=0.3)
    if legend:
        ax.legend(fontsize=8, frameon=False)
    banner_figure(ax.figure, shown)
    return ax


def _query_rows(table: pd.DataFrame, query: str | None,
                needed: tuple[str, ...]) -> tuple[pd.DataFrame, str, list[str]]:
    """The rows of ``query`` (default ``total`` if present, else the first), the query, and
    every level of the table in order; a missing column or query is refused by name."""
    missing = [c for c in needed if c not in table.columns]
    if missing:
        raise PostprocError(f"the table has no column {missing}; pass the table "
                            f"compare_methods or evaluate returns")
    queries = list(dict.fromkeys(table["query"]))
    if query is None:
        query = "total" if "total" in queries else (queries[0] if queries else "total")
    part = table[table["query"] == query]
    if not len(part):
        raise PostprocError(f"the table has no rows of query {query!r}; it has {queries}")
    return part, query, list(dict.fromkeys(table["level"]))


def _say(ax: Any, text: str) -> None:
    """A panel whose data draw nothing visible says why, in its middle."""
    ax.text(0.5, 0.5, text, transform=ax.transAxes, ha="center", va="center", color="#666666",
            fontsize=9)


def _is_constrained(rows: pd.DataFrame) -> bool:
    return bool(rows["constrained"].iloc[0]) if "constrained" in rows else True


def _method_label(method: Any, constrained: bool) -> str:
    return str(method) if constrained else f"{method} (unconstrained)"


def _by_method(part: pd.DataFrame) -> list[tuple[str, pd.DataFrame]]:
    """``(method, rows)``, constrained methods first; a table without ``method`` is one."""
    if "method" not in part:
        return [("", part)]
    groups = list(part.groupby("method", sort=False))
    return ([g for g in groups if _is_constrained(g[1])]
            + [g for g in groups if not _is_constrained(g[1])])


def plot_epl(table: pd.DataFrame, query: str | None = None, *, ax: Any = None,
             legend: bool = True, confidential: bool = False) -> Any:
    """EPL by level with its 95 % interval, one marker per method beside the others at every
    level: filled for the methods that keep the invariants, open for the unconstrained ones.
    A one-sided lower bound (``EPL ≥ b``: the errors cannot pin the loss down) is a triangle
    at ``b`` with an arrow up; an unbounded EPL (held invariant) an ``∞`` at the top; an
    undefined one an ``×`` on the level axis. EPLs spanning more than a factor 20 get a log
    axis (points and interval bars only: no bars or lines to break on it).

    Parameters
    ----------
    table : pandas.DataFrame
        Columns ``level``, ``query``, ``epl`` and the interval as ``epl_low``/``epl_high``
        (:func:`~postproc.evaluation.compare.compare_methods`) or ``epl_ci_low``/``epl_ci_high``
        (:func:`~postproc.evaluation.evaluate.evaluate`); ``method`` and ``constrained``
        optional.
    query : str, optional
        Default ``"total"`` if the table has it, else its first query.
    ax : matplotlib.axes.Axes, optional
    legend : bool
    confidential : bool
        Draw a release-mode or unlabelled table, under a CONFIDENTIAL banner.

    Returns
    -------
    matplotlib.axes.Axes

    Raises
    ------
    PostprocError
        A needed column or the query is missing; a release-mode or unlabelled table without
        ``confidential``.

    Examples
    --------
    >>> from matplotlib.figure import Figure
    >>> inf = float("inf")
    >>> table = label_table(pd.DataFrame({"level": ["nation", "state"], "query": ["total"] * 2,
    ...                                   "epl": [inf, 0.4], "epl_ci_low": [np.nan, 0.3],
    ...                                   "epl_ci_high": [np.nan, 0.5]}), "simulation")
    >>> ax = plot_epl(table, ax=Figure().subplots())
    >>> ax.get_title(), [t.get_text() for t in ax.get_xticklabels()]
    ('EPL of total by level', ['nation', 'state'])
    >>> bounds = table.assign(epl=[inf, inf], epl_ci_low=[inf, 2.5], epl_ci_high=[inf, inf])
    >>> ax = plot_epl(bounds, ax=Figure().subplots())
    >>> [t.get_text() for t in ax.texts if t.get_text()], len(ax.texts)   # '∞', and an arrow
    (['∞'], 2)
    >>> [line.get_label() for line in ax.get_lines()][-1]
    'lower bound (EPL ≥)'
    """
    shown = table_gate(table, None, confidential=confidential, what="the EPL table")
    low, high = (("epl_low", "epl_high") if "epl_low" in table.columns
                 else ("epl_ci_low", "epl_ci_high"))
    part, query, levels = _query_rows(table, query, ("level", "query", "epl", low, high))
    groups = _by_method(part)
    ax = _axes(ax)
    width = 0.8 / max(1, len(groups))
    for mi, (method, rows) in enumerate(groups):
        color = f"C{mi % 10}"
        rows = rows.set_index("level")
        xs, ys, below, above, undefined, bound_x, bound_y, infinite = [], [], [], [], [], [], \
            [], []
        for li, level in enumerate(levels):
            if level not in rows.index:
                continue
            row = rows.loc[level]
            x = li - 0.4 + width * (mi + 0.5)
            kind = epl_kind(row["epl"], row[low])
            if kind != "estimate":
                if kind == "bound":
                    bound_x.append(x)
                    bound_y.append(row[low])
                else:
                    (infinite if kind == "unbounded" else undefined).append(x)
                continue
            xs.append(x)
            ys.append(row["epl"])
            below.append(row["epl"] - (row[low] if np.isfinite(row[low]) else row["epl"]))
            above.append((row[high] if np.isfinite(row[high]) else row["epl"]) - row["epl"])
        filled = _is_constrained(rows)
        ax.errorbar(xs, ys, yerr=[np.maximum(below, 0), np.maximum(above, 0)], fmt="o",
                    color=color, capsize=3, markersize=6,
                    markerfacecolor=color if filled else "white",
                    label=_method_label(method, filled) if method else "EPL")
        if bound_x:                            # EPL >= b: a triangle with an arrow up
            ax.plot(bound_x, bound_y, "^", color=color, markersize=7,
                    markerfacecolor=color if filled else "white", linestyle="none",
                    label="lower bound (EPL ≥)" if mi == len(groups) - 1 else "_nolegend_")
            for x, y in zip(bound_x, bound_y):
                ax.annotate("", xy=(x, y), xytext=(0, 22), textcoords="offset points",
                            arrowprops={"arrowstyle": "<-", "color": color, "lw": 1.2})
        for x in infinite:                     # held invariant: unbounded, at the top
            ax.text(x, 0.97, "∞", color=color, ha="center", va="top", fontsize=12,
                    transform=ax.get_xaxis_transform())
        if undefined:                          # on the x axis, whatever the y scale
            ax.plot(undefined, [0] * len(undefined), "x", color=color, markersize=7,
                    clip_on=False, transform=ax.get_xaxis_transform())
    ax.set_xticks(range(len(levels)), levels)
    ax.set_xlim(-0.6, len(levels) - 0.4)
    drawn = np.where(np.isfinite(part["epl"]), part["epl"], part[low])
    finite = drawn[np.isfinite(drawn) & (drawn > 0)]
    if len(finite) and finite.max() > 20 * finite.min():
        ax.set_yscale("log")                   # EPLs of different orders of magnitude
    else:
        ax.set_ylim(bottom=0)
    if not len(finite):
        _say(ax, "no EPL estimated at any level (× undefined, ∞ held invariant)")
    ax.set_xlabel("level")
    ax.set_ylabel("EPL (95% interval)")
    ax.set_title(f"EPL of {query} by level")
    ax.grid(True, axis="y", alpha=0.3)
    if legend:
        ax.legend(fontsize=8, frameon=False)
    banner_figure(ax.figure, shown)
    return ax


#: What :func:`plot_error_spread` draws: column, label, marker.
SPREAD = (("mae", "median", "o"), ("mean_abs", "mean", "D"), ("p95_abs", "95th percentile", "^"),
          ("max_abs", "maximum", "v"))


def plot_error_spread(table: pd.DataFrame, query: str | None = None, *, ax: Any = None,
                      legend: bool = True, confidential: bool = False) -> Any:
    """The distribution of the absolute errors by level: median, mean, 95th percentile and
    maximum (one marker each, joined by a thin line from the median to the maximum), one
    colour per method beside the others at every level; a linear axis from 0.

    Parameters
    ----------
    table : pandas.DataFrame
        From :func:`~postproc.evaluation.evaluate.evaluate`, of one result or several (columns
        ``level``, ``query``, ``mae``, ``mean_abs``, ``p95_abs``, ``max_abs``; ``method``
        optional).
    query : str, optional
        Default ``"total"`` if the table has it, else its first query.
    ax : matplotlib.axes.Axes, optional
    legend : bool
    confidential : bool
        Draw a release-mode or unlabelled table, under a CONFIDENTIAL banner.

    Returns
    -------
    matplotlib.axes.Axes

    Raises
    ------
    PostprocError
        A needed column or the query is missing; a release-mode or unlabelled table without
        ``confidential``.

    Examples
    --------
    >>> from matplotlib.figure import Figure
    >>> table = label_table(pd.DataFrame({"level": ["nation", "state"], "query": ["total"] * 2,
    ...                                   "mae": [0.0, 2.0], "mean_abs": [0.0, 2.5],
    ...                                   "p95_abs": [0.0, 6.0], "max_abs": [0.0, 9.0]}),
    ...                     "simulation")
    >>> ax = plot_error_spread(table, ax=Figure().subplots())
    >>> [line.get_ydata().tolist() for line in ax.get_lines()[-4:]]
    [[0.0, 2.0], [0.0, 2.5], [0.0, 6.0], [0.0, 9.0]]
    """
    shown = table_gate(table, None, confidential=confidential, what="the error table")
    part, query, levels = _query_rows(table, query,
                                      ("level", "query", *(c for c, _, _ in SPREAD)))
    groups = _by_method(part)
    ax = _axes(ax)
    width = 0.8 / max(1, len(groups))
    for mi, (method, rows) in enumerate(groups):
        color = f"C{mi % 10}"
        rows = rows.set_index("level").reindex(levels)
        x = np.arange(len(levels)) - 0.4 + width * (mi + 0.5)
        ax.vlines(x, rows["mae"], rows["max_abs"], color=color, lw=1, alpha=0.6)
        for column, name, marker in SPREAD:
            ax.plot(x, rows[column].to_numpy(dtype=np.float64), marker, linestyle="none",
                    color=color, markersize=5,
                    label=f"{method}: {name}" if method else name)
    ax.set_xticks(range(len(levels)), levels)
    ax.set_xlim(-0.6, len(levels) - 0.4)
    ax.set_ylim(bottom=0)
    if not (part["max_abs"] > 0).any():
        _say(ax, "every error is 0 (exact answers)")
    ax.set_xlabel("level")
    ax.set_ylabel("|error| (result − truth)")
    ax.set_title(f"|error| of {query} by level")
    ax.grid(True, axis="y", alpha=0.3)
    if legend:
        ax.legend(fontsize=7, frameon=False, ncols=2)
    banner_figure(ax.figure, shown)
    return ax


def save_by_query(table: pd.DataFrame, draw: Callable[..., Any], path: str | Path, *,
                  title: str = "", queries: Sequence[str] | None = None,
                  ncols: int = 2, confidential: bool = False) -> Path:
    """Draw ``draw(table, query, ax=…, legend=False)`` once per query into one figure (one
    panel each, one legend below them) and write it as a PNG, atomically.

    A release-mode or unlabelled table is written only into a ``confidential/`` folder, or
    with ``confidential``, and then under a CONFIDENTIAL banner (:func:`postproc.gate.table_gate`).

    Parameters
    ----------
    table : pandas.DataFrame
    draw : callable
        :func:`plot_comparison`, :func:`plot_epl` or :func:`plot_error_spread`.
    path : str or Path
    title : str
        Above the panels.
    queries : sequence of str, optional
        Default: every query of the table, in order.
    ncols : int
        Panels per row.
    confidential : bool
        Write a release-mode or unlabelled table's figure outside ``confidential/``.

    Returns
    -------
    pathlib.Path

    Raises
    ------
    PostprocError
        A release-mode or unlabelled table outside ``confidential/`` without ``confidential``.

    Examples
    --------
    >>> import tempfile
    >>> table = label_table(pd.DataFrame({"method": ["a"] * 2, "level": ["nation"] * 2,
    ...                                   "query": ["total", "detailed"], "mae": [1.0, 2.0]}),
    ...                     "simulation")
    >>> save_by_query(table, plot_comparison, tempfile.mkdtemp() + "/m.png").read_bytes()[:4]
    b'\\x89PNG'
    """
    from matplotlib.figure import Figure

    from hierarchy.io.storage import atomic_path

    path = Path(path)
    shown = table_gate(table, path, confidential=confidential, what=f"the figure {path.name}")
    queries = list(queries) if queries is not None else list(dict.fromkeys(table["query"]))
    ncols = max(1, min(ncols, len(queries)))
    nrows = max(1, math.ceil(len(queries) / ncols))
    fig = Figure(figsize=(6.2 * ncols, 3.8 * nrows), layout="constrained")
    axes = np.atleast_1d(fig.subplots(nrows, ncols, squeeze=False)).ravel()
    for ax, query in zip(axes, queries):
        draw(table, query, ax=ax, legend=False, confidential=True)    # allowed above
        ax.set_title(query, fontsize=10)
    for ax in axes[len(queries):]:
        ax.set_visible(False)
    handles, labels = axes[0].get_legend_handles_labels()
    if handles:
        fig.legend(handles, labels, loc="outside lower center", ncols=min(4, len(handles)),
                   fontsize=8, frameon=False)
    if title:
        fig.suptitle(title, fontsize=10)
    banner_figure(fig, shown)
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png", dpi=110)
    return path
