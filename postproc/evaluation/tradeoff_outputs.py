"""The accuracy–ε curve as a figure and as files: :func:`plot_tradeoff` draws the table of
:func:`postproc.evaluation.tradeoff.tradeoff_table` (L1 and the shares within ±k against the
budget on a log axis, one line per level, the exact expectations dotted, one row of panels per
query) and :func:`write_tradeoff` writes a curve as CSV, PNG and JSON, atomically and with its
randomness label (:mod:`postproc.gate`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping, Sequence

import pandas as pd

from postproc.evaluation.evaluate import json_ready
from postproc.evaluation.tradeoff import (
    _SYMBOL,
    MEASURED,
    _columns,
    _grid_column,
    tradeoff_table,
)
from postproc.gate import banner_figure, table_gate, write_csv

__all__ = ["plot_tradeoff", "write_tradeoff"]


def plot_tradeoff(table: pd.DataFrame, *, queries: Sequence[str] | None = None,
                  within: Sequence[int] | None = None, title: str | None = None,
                  confidential: bool = False) -> Any:
    """The curve: L1 and the shares within ±k against the budget (log x), one line per level,
    the exact expectations dotted; one row of panels per query.

    Parameters
    ----------
    table : pandas.DataFrame
        From :func:`tradeoff_table` (or :func:`tradeoff_curve`: averaged over seeds first).
    queries : sequence of str, optional
        Default: every query of the table.
    within : sequence of int, optional
        The tolerances to draw; default every ``within_<k>`` column.
    title : str, optional
        What the curve is of (default: the noisy measurements, or the table's method).
    confidential : bool
        Draw a table that is not labelled simulation, under a CONFIDENTIAL banner
        (:func:`postproc.gate.table_gate`).

    Returns
    -------
    matplotlib.figure.Figure
        Made without pyplot (no global state).

    Raises
    ------
    PostprocError
        A table of a release-mode measurement, or unlabelled, without ``confidential``.

    Examples
    --------
    >>> from postproc.gate import label_table
    >>> table = label_table(pd.DataFrame({
    ...     "epsilon": [0.5, 2.0], "method": "measured", "level": "state", "query": "total",
    ...     "l1": [4.0, 1.0], "within_1": [0.3, 0.8], "expected_within_1": [0.31, 0.79]}),
    ...     "simulation")
    >>> fig = plot_tradeoff(table)
    >>> [ax.get_title() for ax in fig.axes]
    ['total: L1', 'total: within ±1']
    >>> [line.get_label() for line in fig.axes[1].get_lines()]      # "_": not in the legend
    ['state', '_state exact']
    """
    from matplotlib.figure import Figure

    banner = table_gate(table, None, confidential=confidential, what="the trade-off figure")
    if "seed" in table.columns:
        table = tradeoff_table(table)
    grid = _grid_column(table)
    ks = [int(c.removeprefix("within_")) for c in _columns(table, "within_")]
    ks = [k for k in ks if within is None or k in within]
    queries = list(queries) if queries is not None else list(dict.fromkeys(table["query"]))
    columns = ["l1"] + [f"within_{k}" for k in ks]
    fig = Figure(figsize=(3.4 * len(columns), 2.9 * len(queries)), layout="constrained")
    axes = fig.subplots(len(queries), len(columns), squeeze=False)
    ticks = sorted(table[grid].unique())
    for row, query in zip(axes, queries):
        part = table[table["query"] == query]
        for ax, column in zip(row, columns):
            _panel(ax, part, grid, column, ticks)
            ax.set_title(f"{query}: " + ("L1" if column == "l1" else
                                         f"within ±{column.removeprefix('within_')}"),
                         fontsize=9)
    axes[0][0].legend(fontsize=7, title="level (dotted: exact)", title_fontsize=7)
    method = str(table["method"].iloc[0]) if "method" in table.columns and len(table) else ""
    what = title or ("the noisy measurements" if method in ("", MEASURED)
                     else f"after {method}")
    fig.suptitle(f"Accuracy against {_SYMBOL[grid]}: {what} (simulation: seeded noise, not "
                 "safe for release)", fontsize=9)
    banner_figure(fig, banner)
    return fig


def _panel(ax: Any, part: pd.DataFrame, grid: str, column: str, ticks: list[float]) -> None:
    """One panel: ``column`` against the grid, a line per level, its expectation dotted."""
    from matplotlib import colormaps
    from matplotlib.ticker import FixedLocator, FuncFormatter, LogLocator, NullLocator

    colors = colormaps["tab10"]
    for i, level in enumerate(dict.fromkeys(part["level"])):
        rows = part[part["level"] == level].sort_values(grid)
        y = rows[column].astype(float)
        if column == "l1":
            y = y.where(y > 0)                 # 0 (exact) has no place on a log axis
        ax.plot(rows[grid], y, marker="o", ms=3.5, lw=1.3, color=colors(i % 10), label=level)
        exact = f"expected_{column}"
        if exact in rows.columns and rows[exact].notna().any():
            ax.plot(rows[grid], rows[exact], ls=":", lw=1.5, color=colors(i % 10),
                    label=f"_{level} exact")            # "_": not in the legend
    plain = FuncFormatter(lambda value, _pos: f"{value:g}")   # 0.5, 2, 100: no 2×10⁰
    ax.set_xscale("log")
    ax.xaxis.set_major_locator(FixedLocator(ticks))
    ax.xaxis.set_major_formatter(plain)
    ax.xaxis.set_minor_locator(NullLocator())
    if column == "l1":
        if (part["l1"] > 0).any():
            ax.set_yscale("log")
            ax.yaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
            ax.yaxis.set_major_formatter(plain)
            ax.yaxis.set_minor_locator(NullLocator())
        ax.set_ylabel("L1: mean |error| per answer", fontsize=8)
    else:
        ax.set_ylim(-0.03, 1.03)
        ax.set_ylabel(f"share within ±{column.removeprefix('within_')}", fontsize=8)
    ax.set_xlabel(f"{_SYMBOL[grid]} (total budget)", fontsize=8)
    ax.grid(True, alpha=0.3)


def write_tradeoff(by_seed: pd.DataFrame, directory: str | Path, *, stem: str = "tradeoff",
                   about: Mapping[str, Any] | None = None) -> list[Path]:
    """Write the curve: ``<stem>.csv`` (mean over seeds), ``<stem>_by_seed.csv``,
    ``<stem>.png`` and ``<stem>.json``, each atomically.

    The CSVs carry the label in a ``randomness`` column (:func:`postproc.gate.write_csv`), the
    figure says simulation in its title, and the JSON holds the label, the grid, seeds,
    tolerances, method, mechanism and budget split, the files and the mean table's rows
    (non-finite numbers as ``null``).

    Parameters
    ----------
    by_seed : pandas.DataFrame
        From :func:`tradeoff_curve`.
    directory : str or Path
        Created if missing.
    stem : str
    about : mapping, optional
        More entries for the JSON (the run configuration, say).

    Returns
    -------
    list of Path
        The files, in the order above.

    Raises
    ------
    PostprocError
        A table not labelled simulation outside a ``confidential/`` folder
        (:func:`postproc.gate.table_gate`).

    Examples
    --------
    >>> import json, tempfile
    >>> from postproc.gate import label_table
    >>> by_seed = label_table(pd.DataFrame({
    ...     "epsilon": [0.5, 2.0], "seed": 1, "method": "measured", "level": "state",
    ...     "query": "total", "answers": 49, "answer_from": "total", "summed": 1.0,
    ...     "l1": [4.0, 1.0], "l2": [5.0, 1.5], "within_1": [0.3, 0.8]}), "simulation")
    >>> files = write_tradeoff(by_seed, tempfile.mkdtemp())
    >>> [f.name for f in files]
    ['tradeoff.csv', 'tradeoff_by_seed.csv', 'tradeoff.png', 'tradeoff.json']
    >>> document = json.loads(files[-1].read_text())
    >>> document["randomness"]["mode"], len(document["rows"])
    ('simulation', 2)
    """
    from hierarchy.io.storage import atomic_path, write_json

    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    table = tradeoff_table(by_seed)
    files = [write_csv(table, directory / f"{stem}.csv", what="the trade-off table"),
             write_csv(by_seed, directory / f"{stem}_by_seed.csv", what="the trade-off table")]
    figure = plot_tradeoff(table)
    png = directory / f"{stem}.png"
    with atomic_path(png) as tmp:
        figure.savefig(tmp, format="png", dpi=110)
    files.append(png)
    files.append(directory / f"{stem}.json")
    document = {"format": "dapp.tradeoff",
                "randomness": by_seed.attrs.get("randomness"),
                **{k: json_ready(v) if not isinstance(v, (dict, list)) else v
                   for k, v in by_seed.attrs.get("tradeoff", {}).items()},
                **dict(about or {}),
                "files": [f.name for f in files],
                "rows": [{k: json_ready(v) for k, v in record.items()}
                         for record in table.to_dict(orient="records")]}
    write_json(document, files[-1])
    return files
