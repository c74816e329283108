"""Figures for notebooks: each function draws on a matplotlib ``Axes`` and returns it.

:func:`plot_errors_by_level` draws a result's errors against the truth, one box per level
(:meth:`postproc.result.Result.plot`); :func:`plot_comparison` draws the table of
:func:`postproc.evaluation.compare.compare_methods`, the MAE by level with one line per method
(:meth:`postproc.evaluation.compare.CompareOutput.plot`). Pass ``ax`` to draw into a figure of
your own; without it a new pyplot figure is made (shown inline by Jupyter). matplotlib is
imported only when a figure is drawn.

Errors are computed from the confidential truth: drawing them for a result made in release mode
is refused (they may be shown only from ``DIR/confidential/``, see
:func:`hierarchy.storage.confidential_directory`).

Examples
--------
>>> from matplotlib.figure import Figure
>>> table = pd.DataFrame({"method": ["topdown", "topdown", "hay", "hay"],
...                       "constrained": [True, True, False, False],
...                       "level": ["nation", "state"] * 2, "query": ["total"] * 4,
...                       "mae": [0.0, 0.0, 3.0, 2.5]})
>>> ax = plot_comparison(table, ax=Figure().subplots())
>>> [line.get_label() for line in ax.get_lines()]
['topdown', 'hay (unconstrained)']
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from hierarchy.frames import resolve_query
from postproc.errors import PostprocError

__all__ = ["plot_errors_by_level", "plot_comparison"]

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
                         ax: Any = None) -> Any:
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

    Returns
    -------
    matplotlib.axes.Axes

    Raises
    ------
    PostprocError
        The result was made in release mode (its errors are confidential), or the truth's
        units differ from the result's at a level.

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
    ...                tuple(np.zeros_like(c) for c in truth.counts))
    >>> ax = plot_errors_by_level(zeros, truth, ax=Figure().subplots())
    >>> [t.get_text() for t in ax.get_xticklabels()], ax.get_ylabel()
    (['nation', 'state'], 'error (result − truth)')
    """
    if result.safe_for_release:
        raise PostprocError(f"{result.method}: this result was made in release mode, so its "
                            f"errors against the truth are confidential and are not drawn; "
                            f"evaluate it into DIR/confidential/ (postproc evaluate) instead")
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
    return ax


def plot_comparison(table: pd.DataFrame, query: str | None = None, *, ax: Any = None) -> Any:
    """MAE (median absolute error) by level, one line per method: solid for the methods that
    keep the invariants, dashed for the unconstrained ones.

    Parameters
    ----------
    table : pandas.DataFrame
        From :func:`postproc.evaluation.compare.compare_methods` (columns ``method``,
        ``constrained``, ``level``, ``query``, ``mae``).
    query : str, optional
        Which query's rows to draw; default ``"total"`` if the table has it, else its first.
    ax : matplotlib.axes.Axes, optional
        Where to draw; a new pyplot figure when omitted.

    Returns
    -------
    matplotlib.axes.Axes

    Raises
    ------
    PostprocError
        The table lacks a needed column or has no row of ``query``.

    Examples
    --------
    >>> from matplotlib.figure import Figure
    >>> table = pd.DataFrame({"method": ["sampling", "sampling"], "constrained": [True, True],
    ...                       "level": ["nation", "state"], "query": ["detailed"] * 2,
    ...                       "mae": [4.0, 1.0]})
    >>> ax = plot_comparison(table, ax=Figure().subplots())
    >>> ax.get_title(), ax.get_lines()[0].get_ydata().tolist()
    ('MAE of detailed by level', [4.0, 1.0])
    """
    missing = [c for c in ("method", "constrained", "level", "query", "mae")
               if c not in table.columns]
    if missing:
        raise PostprocError(f"the comparison table has no column {missing}; pass the table "
                            f"compare_methods returns")
    queries = list(dict.fromkeys(table["query"]))
    if query is None:
        query = "total" if "total" in queries else (queries[0] if queries else "total")
    part = table[table["query"] == query]
    if not len(part):
        raise PostprocError(f"the comparison table has no rows of query {query!r}; it has "
                            f"{queries}")
    levels = list(dict.fromkeys(table["level"]))
    ax = _axes(ax)
    positions = np.arange(len(levels))
    for method, rows in part.groupby("method", sort=False):
        constrained = bool(rows["constrained"].iloc[0])
        mae = rows.set_index("level")["mae"].reindex(levels).to_numpy(dtype=np.float64)
        ax.plot(positions, mae, marker="o", linestyle="-" if constrained else "--",
                label=method if constrained else f"{method} (unconstrained)")
    ax.set_xticks(positions, levels)
    ax.set_xlabel("level")
    ax.set_ylabel("MAE (median absolute error)")
    ax.set_ylim(bottom=0)
    ax.set_title(f"MAE of {query} by level")
    ax.grid(True, axis="y", alpha=0.3)
    ax.legend(fontsize=8, frameon=False)
    return ax
