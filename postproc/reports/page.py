"""The templates of the reports and what they show: tables, figures, key–value lists.

:func:`render` fills a template of ``postproc/reports/templates/`` (Jinja2, autoescaped: every
string of the data is escaped, only :class:`markupsafe.Markup` passes as it is). The pages
extend ``base.html.j2``; the pieces they show are made here:

* :func:`table` — a DataFrame as a table: numbers through
  :func:`~postproc.reports.numbers.format_number` and right-aligned, at most ``max_rows`` rows
  with a link to the full CSV, long texts (e.g. why an EPL is undefined) as numbered notes under
  the table (a repeated text once, with its count), the whole inside a horizontally scrolling
  box so a wide table never widens the page;
* :func:`figure` — a PNG embedded (the page stays one self-contained file) with its caption and
  a link to the file beside the page;
* :func:`mapping` — a ``{name: value}`` list (parameters, headline numbers), nested values
  flattened to text; :func:`flat_mapping` — one row per leaf of a nested mapping (a
  configuration).

Examples
--------
>>> frame = pd.DataFrame({"level": ["nation", "state"], "mae": [31967.23, 0.5]})
>>> page = render("base.html.j2", title="Demo", banners=[], nav=[])
>>> page.startswith("<!DOCTYPE html>") and "<h1>Demo</h1>" in page
True
>>> t = table(frame, max_rows=1, link="errors.csv")
>>> [[c.text for c in row] for row in t.rows], t.total, t.link
([['nation', '31,967']], 2, 'errors.csv')
"""

from __future__ import annotations

import base64
import re
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import pandas as pd

from postproc.reports.notes import epl_notes
from postproc.reports.numbers import format_number
from postproc.reports.rest import rest_to_html

__all__ = ["render", "table", "figure", "mapping", "flat_mapping", "banner", "CONFIDENTIAL",
           "Table", "Cell", "Figure", "LONG_TEXT"]

#: A text cell longer than this becomes a numbered note under its table.
LONG_TEXT = 60
#: The banner of a page computed from the confidential data.
CONFIDENTIAL = ("confidential", "CONFIDENTIAL - this page shows numbers computed from the "
                                "confidential data. Do not publish it.")


@cache
def _environment():
    from jinja2 import Environment, PackageLoader, StrictUndefined

    env = Environment(loader=PackageLoader("postproc.reports", "templates"), autoescape=True,
                      undefined=StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    env.filters["number"] = format_number
    env.filters["rest"] = rest_to_html
    return env


def render(template: str, **context: Any) -> str:
    """Fill ``template`` (a file name of ``postproc/reports/templates/``) with ``context``.

    Parameters
    ----------
    template : str
    **context
        The template's variables; ``base.html.j2`` needs ``title``, ``banners`` (a list of
        ``(kind, text)`` with ``kind`` ``"safe"``, ``"unsafe"`` or ``"confidential"``) and
        ``nav`` (a list of ``(anchor, title)``), and shows ``ran`` (what ran: a sentence, or
        ``(setting, text)`` pairs shown as a table) in a box under the banners.

    Returns
    -------
    str
        The page, ending with a newline.

    Examples
    --------
    >>> page = render("base.html.j2", title="<x>", banners=[("unsafe", "SIMULATION")], nav=[])
    >>> "<title>&lt;x&gt;</title>" in page, "banner unsafe" in page
    (True, True)
    >>> page = render("base.html.j2", title="A run", banners=[], nav=[],
    ...               ran=[("budget", "ε = 1 <pure>")])
    >>> "<tr><th>budget</th><td>ε = 1 &lt;pure&gt;</td></tr>" in page
    True
    """
    from hierarchy import __version__

    text = _environment().get_template(template).render(version=__version__, **context)
    return text.rstrip("\n") + "\n"


@dataclass(frozen=True)
class Cell:
    """One cell: its text and whether it is a number (right-aligned).

    Examples
    --------
    >>> Cell("31,967", numeric=True).numeric
    True
    """

    text: str
    numeric: bool = False


@dataclass(frozen=True)
class Table:
    """What the table macro shows: headers, rows of :class:`Cell`, how many rows there are in
    all, the link to the full CSV and the notes under the table. Made by :func:`table`.

    Examples
    --------
    >>> t = table(pd.DataFrame({"x": range(30)}), max_rows=5, link="x.csv")
    >>> len(t.rows), t.total, t.cut
    (5, 30, True)
    """

    columns: list[str]
    numeric: list[bool]
    rows: list[list[Cell]]
    total: int
    link: str | None = None
    caption: str = ""
    title: str = ""
    notes: list[str] = field(default_factory=list)

    @property
    def cut(self) -> bool:
        """Fewer rows shown than the table has."""
        return len(self.rows) < self.total


def _long_text_notes(frame: pd.DataFrame, notes: list[str]) -> pd.DataFrame:
    """Long text cells replaced by ``[k]``; ``notes`` gets one line per distinct text.

    EPL reasons (``epl_reason`` / ``epl_note``) are grouped by
    :func:`postproc.reports.notes.epl_notes` (reasons that differ only in their numbers are one
    note); any other long text by its exact value.
    """
    out = frame.copy()
    for column in frame.columns:
        values = frame[column]
        if pd.api.types.is_numeric_dtype(values):
            continue
        long = values.map(lambda v: isinstance(v, str) and len(v) > LONG_TEXT)
        if not long.any():
            continue
        if column in ("epl_reason", "epl_note") and "query" in frame:
            # with the EPL and the lower end of its interval, a note says which kind it is
            # (a lower bound, unbounded, undefined)
            kept = [c for c in ("epl", "epl_ci_low", "epl_low") if c in frame]
            marks, lines = epl_notes(frame[["query", *kept]].assign(
                epl_reason=values.where(values != "")))
            start = len(notes)
            notes.extend(re.sub(r"^\[(\d+)\]", lambda m: f"[{int(m.group(1)) + start}]", line)
                         for line in lines)
            out[column] = [f"[{m + start}]" if m is not None else "" for m in marks]
            continue
        seen: dict[str, int] = {}
        marks = []
        for value, is_long in zip(values, long):
            if not is_long:
                marks.append(value)
                continue
            if value not in seen:
                seen[value] = len(notes) + 1
                notes.append(f"[{seen[value]}] {value}")
            marks.append(f"[{seen[value]}]")
        out[column] = marks
    return out


def table(frame: pd.DataFrame, *, max_rows: int = 25, link: str | None = None,
          caption: str = "", title: str = "",
          formats: Mapping[str, Callable[[Any], str]] | None = None,
          numeric: Sequence[str] = (), headers: Mapping[str, str] | None = None) -> Table:
    """A DataFrame as the table macro shows it (see the module docstring).

    Parameters
    ----------
    frame : pandas.DataFrame
    max_rows : int
        Rows shown; the rest is in the CSV at ``link``.
    link : str, optional
        Relative address of the full CSV (always shown when given).
    caption, title : str
    formats : mapping column → callable, optional
        A column's own text (default :func:`~postproc.reports.numbers.format_number`).
    numeric : sequence of str
        Columns to align as numbers though they hold text (e.g. ``0.5 [0.4, 0.6]``).
    headers : mapping column → str, optional
        A column's header, with its unit (default: its name).

    Returns
    -------
    Table

    Examples
    --------
    >>> inf = float("inf")
    >>> frame = pd.DataFrame({"query": ["total"] * 3, "epl": [inf, inf, 0.25],
    ...                       "epl_reason": ["all 1 errors equal 0: a point mass " * 2,
    ...                                      "all 49 errors equal 0: a point mass " * 2, ""]})
    >>> t = table(frame)
    >>> [[c.text for c in row] for row in t.rows]
    [['total', 'undefined', '[1]'], ['total', 'undefined', '[1]'], ['total', '0.25', '']]
    >>> t.notes
    ['[1] EPL undefined in 2 rows of total: every error is 0 (exact answers, as for a statistic held
    invariant)']
    >>> table(frame, headers={"epl": "EPL (ε)"}).columns
    ['query', 'EPL (ε)', 'epl_reason']
    """
    notes: list[str] = []
    shown = _long_text_notes(frame.head(max_rows), notes)
    numeric = [c in numeric or (pd.api.types.is_numeric_dtype(frame[c])
                                and not pd.api.types.is_bool_dtype(frame[c]))
               for c in frame.columns]
    formats = dict(formats or {})
    rows = []
    for values in shown.itertuples(index=False):
        rows.append([Cell(formats[c](v) if c in formats else format_number(v), n)
                     for c, v, n in zip(frame.columns, values, numeric)])
    headers = dict(headers or {})
    return Table([headers.get(str(c), str(c)) for c in frame.columns], numeric, rows, len(frame),
                 link, caption, title, notes)


@dataclass(frozen=True)
class Figure:
    """An embedded PNG: its file name, caption, ``data:`` address and relative link. Made by
    :func:`figure`.

    Examples
    --------
    >>> Figure("a.png", "A figure.", "data:image/png;base64,").link is None
    True
    """

    name: str
    caption: str
    source: str
    link: str | None = None


def figure(path: str | Path, caption: str = "", *, link: str | None = None) -> Figure:
    """The PNG at ``path`` to embed, with its caption and a link to the file.

    Parameters
    ----------
    path : str or Path
    caption : str
    link : str, optional
        Relative address of the file from the page (default: its name).

    Returns
    -------
    Figure

    Examples
    --------
    >>> import tempfile
    >>> png = Path(tempfile.mkdtemp()) / "a.png"
    >>> _ = png.write_bytes(b"\\x89PNG")
    >>> f = figure(png, "A figure.")
    >>> f.name, f.link, f.source
    ('a.png', 'a.png', 'data:image/png;base64,iVBORw==')
    """
    path = Path(path)
    data = base64.b64encode(path.read_bytes()).decode("ascii")
    return Figure(path.name, caption, f"data:image/png;base64,{data}",
                  link if link is not None else path.name)


def _plain(value: Any, key: str = "", missing: str = "") -> str:
    if isinstance(value, Mapping):
        return "; ".join(f"{k} = {_plain(v, str(k), missing)}" for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return ", ".join(_plain(v, key, missing) for v in value)
    if value is None:
        return missing
    if "seed" in key.lower() and isinstance(value, int):
        return str(value)                       # an identifier, not a quantity: no separators
    return format_number(value)


def mapping(values: Mapping[str, Any], *, missing: str = "") -> list[tuple[str, str]]:
    """``(name, text)`` pairs of a key–value list; lists and nested mappings become one line.

    Numbers go through :func:`~postproc.reports.numbers.format_number`, except seeds (names
    holding ``seed``), which are identifiers and keep their digits as they are.

    Parameters
    ----------
    values : mapping
    missing : str
        The text of a ``None`` value (e.g. ``"undefined"`` for a headline number that a JSON
        summary stored as ``null`` because it was infinite).

    Returns
    -------
    list of (str, str)

    Examples
    --------
    >>> mapping({"epsilons": [0.5, 2.0], "units": {"state": 3, "county": 13}, "n": 303561,
    ...          "seeds": [2024, 2025], "epl": None}, missing="undefined")
    [('epsilons', '0.5, 2'), ('units', 'state = 3; county = 13'), ('n', '303,561'), ('seeds', '2024,
    2025'), ('epl', 'undefined')]
    """
    return [(str(k), _plain(v, str(k), missing)) for k, v in values.items()]


def flat_mapping(values: Mapping[str, Any], *, prefix: str = "") -> list[tuple[str, str]]:
    """``(name, text)`` pairs of a nested mapping, one per leaf: a nested mapping's keys joined
    with ``·`` (``budget · kind``), a list of mappings numbered (``spec · invariant 1``); the
    texts as :func:`mapping` writes them. What a configuration looks like on a page.

    Parameters
    ----------
    values : mapping
    prefix : str
        Put before every name.

    Returns
    -------
    list of (str, str)

    Examples
    --------
    >>> flat_mapping({"budget": {"kind": "pure", "total": 1.0},
    ...               "spec": {"invariant": [{"name": "tot", "levels": ["nation", "state"]}]}})
    [('budget · kind', 'pure'), ('budget · total', '1'), ('spec · invariant 1', 'name = tot;
    levels = nation, state')]
    """
    pairs = []
    for key, value in values.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping) and value:
            pairs += flat_mapping(value, prefix=f"{name} · ")
        elif isinstance(value, (list, tuple)) and value and all(isinstance(v, Mapping)
                                                                 for v in value):
            pairs += [(f"{name} {i}", _plain(v, str(key))) for i, v in enumerate(value, 1)]
        else:
            pairs.append((name, _plain(value, str(key))))
    return pairs


def banner(randomness: Mapping[str, Any] | None) -> list[tuple[str, str]]:
    """The banner of an output's randomness: its label, green in release mode, yellow in
    simulation mode; none without a record.

    Parameters
    ----------
    randomness : mapping, optional
        A provenance's ``randomness`` record (``safe_for_release``, ``label``).

    Returns
    -------
    list of (kind, text)

    Examples
    --------
    >>> banner({"safe_for_release": False, "label": "SIMULATION MODE"})
    [('unsafe', 'SIMULATION MODE')]
    >>> banner({"safe_for_release": True}), banner(None)
    ([('safe', 'release mode')], [])
    """
    if not randomness:
        return []
    safe = bool(randomness.get("safe_for_release"))
    label = randomness.get("label") or ("release mode" if safe else "simulation mode")
    return [("safe" if safe else "unsafe", str(label))]
