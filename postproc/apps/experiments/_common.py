"""What every reference analysis shares: its output directory, tables, figures and summary."""

from __future__ import annotations

import json
import math
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pandas as pd

from hierarchy.io.storage import atomic_path, package_versions
from hierarchy.randomness import UNSAFE_LABEL
from postproc.errors import PostprocError

__all__ = ["Output", "new_figure", "EPSILON_COLORS", "epsilon_color", "method_style",
           "plain_log_axis", "legend_if_any", "merge_coinciding", "E2E_LEVELS",
           "synthetic_truth", "describe_grid", "describe_units"]

#: The E2E geography levels of the 1940-style analyses.
E2E_LEVELS = ["nation", "state", "county", "enum_dist"]


def synthetic_truth(params: dict[str, Any]):
    """The exact E2E hierarchy (with units) of ``synthesize_1940(params["persons"],
    seed=params["data_seed"], composition=params["composition"])`` (the composition optional,
    default ``"default"``); the microdata are dropped once tabulated.

    ``params["states"]`` (optional; ``None`` keeps all 49) keeps only that many states: those with
    the most counties (ties: more persons). The synthesizer keeps 1940 county sizes, so a small
    national total has one county per state and the county level copies the state level; a few
    county-rich states of a larger total give a small hierarchy with several units per parent at
    every level (what the quick variants use).
    """
    from hierarchy.schema import E2E_1940
    from hierarchy.synth import synthesize_1940
    from hierarchy.tabulation import tabulate

    data = synthesize_1940(int(params["persons"]), seed=int(params["data_seed"]),
                           composition=params.get("composition") or "default")
    persons, units = data.persons, data.units
    keep = params.get("states")
    if keep is not None:
        persons, units = _keep_states(persons, units, int(keep))
    return tabulate(persons, schema=E2E_1940, levels=E2E_LEVELS, units=units)


def _keep_states(persons, units, keep: int):
    """The persons and units of the ``keep`` states with the most counties."""
    import pyarrow as pa
    import pyarrow.compute as pc

    def indices(table, column):
        array = table[column].combine_chunks()
        return array.indices.to_numpy(zero_copy_only=False), array.dictionary

    state, names = indices(persons, "state")
    county, _ = indices(persons, "county")
    if not 1 <= keep <= len(names):
        raise PostprocError(f"states must be between 1 and {len(names)}, not {keep}")
    county_state = np.full(int(county.max()) + 1, -1, dtype=np.int64)
    county_state[county] = state                  # a county code lies in one state
    counties = np.bincount(county_state[county_state >= 0], minlength=len(names))
    people = np.bincount(state, minlength=len(names))
    chosen = pa.array([names[int(i)].as_py() for i in np.lexsort((-people, -counties))[:keep]])

    def rows(table):
        return table.filter(pc.is_in(pc.cast(table["state"], pa.string()), value_set=chosen))

    return rows(persons), rows(units)


#: Colours of the methods, the same in every figure.
_METHOD_COLORS = {"gdpc": "#1f77b4", "adpc": "#ff7f0e", "rdpc": "#2ca02c", "hay": "#9467bd",
                  "topdown": "#d62728", "srs": "#7f7f7f", "noisy": "#8c564b",
                  "bottom_up": "#1f77b4", "bottom_up+calibrated": "#17becf", "clip": "#444444",
                  "hay+clip": "#c5b0d5"}
EPSILON_COLORS = "viridis"


def epsilon_color(i: int, n: int):
    """Colour of the ``i``-th of ``n`` ε values: viridis up to 0.85 of its range, so the largest
    ε is a readable green rather than viridis' pale yellow on a white background."""
    import matplotlib

    return matplotlib.colormaps[EPSILON_COLORS](0.85 * i / max(1, n - 1))


def method_style(method: str) -> dict[str, Any]:
    """Colour and marker of a method, the same across figures."""
    markers = {"gdpc": "o", "adpc": "s", "rdpc": "^", "hay": "D", "topdown": "o", "srs": "s",
               "noisy": "v", "bottom_up": "o", "bottom_up+calibrated": "s"}
    return {"color": _METHOD_COLORS.get(method, "#333333"), "marker": markers.get(method, "o"),
            "linestyle": "--" if method in ("hay", "bottom_up+calibrated") else "-"}


def new_figure(ncols: int = 1, nrows: int = 1, *, width: float = 6.4, height: float = 4.4,
               **kwargs: Any):
    """A matplotlib Figure and its axes, without pyplot's global state (Agg canvas)."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width * ncols, height * nrows), layout="constrained")
    axes = fig.subplots(nrows, ncols, squeeze=False, **kwargs)
    return fig, axes


def plain_log_axis(ax: Any, which: str = "both", ticks: Any = None) -> None:
    """Log scale with plain numbers (``0.5``, ``2``, ``100``) instead of ``2×10⁰`` labels.

    ``ticks`` (for the x axis) pins the major ticks to given values, e.g. the ε grid. There are
    no minor ticks: the major ones already sit at 1, 2 and 5 of every decade, and matplotlib's
    eight unlabelled minor ticks per decade double the time a many-panel figure takes to lay out.
    """
    from matplotlib.ticker import (
        FixedLocator,
        FuncFormatter,
        LogLocator,
        NullFormatter,
        NullLocator,
    )

    def label(value: float, _pos: Any) -> str:
        return f"{value:g}" if value >= 1e-3 else f"{value:.0e}"

    for name in ("x", "y") if which == "both" else (which,):
        axis = getattr(ax, f"{name}axis")
        getattr(ax, f"set_{name}scale")("log")
        if name == "x" and ticks is not None:
            axis.set_major_locator(FixedLocator(list(ticks)))
        else:
            axis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
        axis.set_major_formatter(FuncFormatter(label))
        axis.set_minor_locator(NullLocator())
        axis.set_minor_formatter(NullFormatter())


def legend_if_any(ax: Any, empty: str = "no finite values", **kwargs: Any) -> None:
    """A legend only when something is labelled (an empty panel says ``empty`` instead)."""
    handles, _ = ax.get_legend_handles_labels()
    if handles:
        ax.legend(**kwargs)
    else:
        ax.text(0.5, 0.5, empty, transform=ax.transAxes, ha="center", va="center",
                color="#888888", wrap=True)


def merge_coinciding(series: dict[str, tuple[Any, Any]]) -> dict[str, tuple[Any, Any]]:
    """Series that draw the same points, merged under one label ``"a = b"``.

    At small sizes two levels can coincide (one county per state: the county level repeats the
    state level), and the later line would hide the earlier one while the legend names both.
    ``series`` maps a label to ``(x, y)``; series with equal ``x`` and equal ``y`` (NaN equal to
    NaN) keep the first's place and take the joined label.

    Examples
    --------
    >>> merge_coinciding({"state": ([1, 2], [3.0, 4.0]), "county": ([1, 2], [3.0, 4.0]),
    ...                   "enum_dist": ([1, 2], [5.0, 6.0])})
    {'state = county': ([1, 2], [3.0, 4.0]), 'enum_dist': ([1, 2], [5.0, 6.0])}
    """
    merged: dict[str, tuple[Any, Any]] = {}
    for label, (x, y) in series.items():
        same = next((k for k, (x0, y0) in merged.items()
                     if np.array_equal(np.asarray(x0, dtype=float), np.asarray(x, dtype=float),
                                       equal_nan=True)
                     and np.array_equal(np.asarray(y0, dtype=float), np.asarray(y, dtype=float),
                                        equal_nan=True)), None)
        if same is None:
            merged[label] = (x, y)
        else:
            merged[f"{same} = {label}"] = merged.pop(same)
    return merged


def describe_units(units: dict[str, int]) -> str:
    """Units per level in words: ``3 states, 13 counties, 313 EDs``.

    Examples
    --------
    >>> describe_units({"nation": 1, "state": 3, "county": 13, "enum_dist": 313})
    '1 nation, 3 states, 13 counties, 313 EDs'
    """
    from postproc.reports.numbers import format_number

    plural = {"nation": "nations", "state": "states", "county": "counties", "enum_dist": "EDs"}
    return ", ".join(f"{format_number(n)} "
                     f"{plural.get(lv, lv) if n != 1 else lv.replace('enum_dist', 'ED')}"
                     for lv, n in units.items())


def describe_grid(values: Any) -> str:
    """A grid of values as ``{0.5, 2}`` (numbers in the reports' one format).

    Examples
    --------
    >>> describe_grid([0.5, 2.0]), describe_grid([1, 2, 3, 4])
    ('{0.5, 2}', '{1, 2, 3, 4}')
    """
    from postproc.reports.numbers import format_number

    return "{" + ", ".join(format_number(v) for v in values) + "}"


def _json_ready(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _json_ready(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_ready(v) for v in value]
    if isinstance(value, (np.integer,)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        return float(value) if math.isfinite(value) else None
    if isinstance(value, Path):
        return str(value)
    return value


class Output:
    """An experiment's output directory: CSV tables, PNG figures and ``summary.json``.

    ``summary.json`` lists every table and figure with its caption (``postproc report`` reads it),
    the parameters, the headline numbers, timings and the randomness label: experiments run in
    simulation mode (seeded), so their noise is reproducible and nothing here is a release.

    Parameters
    ----------
    directory : str or Path
        Created if missing; files of the same names are replaced.
    name, title : str
        The experiment's registry name and a human title.
    log : callable
        Progress messages.

    Examples
    --------
    >>> import tempfile
    >>> out = Output(tempfile.mkdtemp(), "demo", "A demo")
    >>> out.table("numbers", pd.DataFrame({"x": [1, 2]}), "Two numbers.").name
    'numbers.csv'
    >>> summary = out.finish({"seed": 1}, {"answer": 42})
    >>> summary["tables"][0]["caption"], summary["headline"]["answer"]
    ('Two numbers.', 42)
    """

    def __init__(self, directory: str | Path, name: str, title: str,
                 log: Callable[[str], None] = print):
        self.directory = Path(directory)
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise PostprocError(f"cannot create output directory {self.directory}: {exc}") from None
        self.name, self.title, self.log = name, title, log
        self.tables: list[dict[str, str]] = []
        self.figures: list[dict[str, str]] = []
        self.started = time.perf_counter()

    def table(self, name: str, frame: pd.DataFrame, caption: str) -> Path:
        """Write ``<name>.csv`` (atomically) and record its caption."""
        path = self.directory / f"{name}.csv"
        with atomic_path(path) as tmp:
            frame.to_csv(tmp, index=False)
        self.tables = [t for t in self.tables if t["file"] != path.name]
        self.tables.append({"file": path.name, "caption": caption})
        return path

    def figure(self, name: str, fig: Any, caption: str) -> Path:
        """Write ``<name>.png`` (atomically, 110 dpi) and record its caption."""
        path = self.directory / f"{name}.png"
        with atomic_path(path) as tmp:
            fig.savefig(tmp, format="png", dpi=110)
        self.figures = [f for f in self.figures if f["file"] != path.name]
        self.figures.append({"file": path.name, "caption": caption})
        return path

    def finish(self, parameters: dict[str, Any], headline: dict[str, Any],
               notes: list[str] | None = None, ran: str = "") -> dict[str, Any]:
        """Write ``summary.json`` and return it; ``ran`` says in words what this run ran (its
        own grid and sizes, which the report shows above the analysis' description)."""
        summary = {"format": "dapp.experiment", "experiment": self.name, "title": self.title,
                   "ran": ran, "parameters": parameters, "headline": headline,
                   "notes": notes or [],
                   "tables": self.tables, "figures": self.figures,
                   "seconds": time.perf_counter() - self.started,
                   "randomness": {"mode": "simulation", "safe_for_release": False,
                                  "label": UNSAFE_LABEL},
                   "versions": package_versions()}
        summary = _json_ready(summary)
        with atomic_path(self.directory / "summary.json") as tmp:
            tmp.write_text(json.dumps(summary, indent=2, allow_nan=False) + "\n")
        return summary
