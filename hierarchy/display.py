"""Notebook display: the small, escaped HTML tables Jupyter shows for the toolkit's values.

Jupyter shows an object by its ``_repr_html_``. :class:`~hierarchy.schema.Schema`,
:class:`~hierarchy.queries.Workload`, :class:`~hierarchy.budget.Budget`,
:class:`invariants.Spec` and the evaluation table of :func:`postproc.evaluate` all draw theirs
with :func:`html_table`, so they look alike: an optional banner, a caption, a compact table
(long lists cut by :func:`shorten`, numbers right-aligned) and notes under it. Every text is
escaped, so a label such as ``<script>`` is shown, never run. The renderers of this package's
types are here too (:func:`schema_html`, :func:`workload_html`, :func:`budget_html`); they read
their object's attributes and import none of its modules.

Examples
--------
>>> from hierarchy.schema import E2E_1940
>>> page = E2E_1940._repr_html_()
>>> "<caption>Schema &#x27;e2e_1940&#x27;: 4 attributes, 192 cells</caption>" in page
True
>>> "<td>cenrace</td>" in page
True
"""

from __future__ import annotations

import html
from fractions import Fraction
from typing import Any, Iterable, Sequence

__all__ = ["html_table", "shorten", "percent", "counted", "schema_html", "workload_html",
           "budget_html", "BANNER_STYLES"]

#: The inline style of a banner by kind: ``confidential`` (red: computed from confidential data
#: in release mode, or of unknown origin), ``unsafe`` (yellow: a simulation) and ``safe``
#: (green) — the colours of the run report's banners.
BANNER_STYLES = {
    "confidential": "background:#fde2e2;border:1px solid #c33;color:#600",
    "unsafe": "background:#fff3cd;border:1px solid #e0b000;color:#5a4500",
    "safe": "background:#e7f5e7;border:1px solid #4a4;color:#1f4d1f",
}
_RIGHT = ' style="text-align:right"'


def shorten(items: Iterable[Any], limit: int = 6, *, sep: str = ", ") -> str:
    """The first ``limit`` items as text, then ``… (N in all)`` when there are more.

    Parameters
    ----------
    items : iterable
    limit : int
        Items shown.
    sep : str
        Between two items.

    Returns
    -------
    str

    Examples
    --------
    >>> shorten(["a", "b", "c"], 2)
    'a, b, … (3 in all)'
    >>> shorten(range(3))
    '0, 1, 2'
    """
    items = [str(item) for item in items]
    if len(items) <= limit:
        return sep.join(items)
    return sep.join(items[:limit]) + f"{sep}… ({len(items):,} in all)"


def percent(fraction: Any) -> str:
    """A share as a percentage with at most three significant digits.

    Examples
    --------
    >>> [percent(f) for f in (Fraction(1, 4), Fraction(9, 40), Fraction(1, 3), 1)]
    ['25 %', '22.5 %', '33.3 %', '100 %']
    """
    return f"{float(fraction) * 100:.3g} %"


def counted(n: int, word: str, plural: str | None = None) -> str:
    """``n`` and ``word``, in the plural unless ``n`` is 1.

    Examples
    --------
    >>> counted(1, "attribute"), counted(1_000, "cell"), counted(2, "query", "queries")
    ('1 attribute', '1,000 cells', '2 queries')
    """
    return f"{n:,} {word if n == 1 else plural or word + 's'}"


def html_table(header: Sequence[str], rows: Iterable[Sequence[Any]], *, caption: str = "",
               numeric: Iterable[int] = (), notes: Iterable[str] = (),
               banner: tuple[str, str] | None = None) -> str:
    """A compact HTML table, every text escaped.

    Parameters
    ----------
    header : sequence of str
        The column headers (units in them: ``MAE (persons)``).
    rows : iterable of sequences
        Cells, turned into text with ``str``.
    caption : str
        Above the table.
    numeric : iterable of int
        Positions of the columns to right-align.
    notes : iterable of str
        Paragraphs under the table.
    banner : (kind, text), optional
        A coloured box above the table; ``kind`` is a key of :data:`BANNER_STYLES`.

    Returns
    -------
    str

    Examples
    --------
    >>> print(html_table(["name", "n"], [["<b>", 3]], caption="A & B", numeric=[1],
    ...                  notes=["x < y"]))
    <table><caption>A &amp; B</caption><thead><tr><th>name</th><th
    style="text-align:right">n</th></tr></thead><tbody><tr><td>&lt;b&gt;</td><td
    style="text-align:right">3</td></tr></tbody></table><p>x &lt; y</p>
    >>> html_table(["x"], [], banner=("unsafe", "SIMULATION")).startswith('<div style="')
    True
    """
    esc = html.escape
    right = set(numeric)
    head = "".join(f"<th{_RIGHT if i in right else ''}>{esc(str(h))}</th>"
                   for i, h in enumerate(header))
    body = "".join("<tr>" + "".join(f"<td{_RIGHT if i in right else ''}>{esc(str(c))}</td>"
                                    for i, c in enumerate(row)) + "</tr>" for row in rows)
    top = ""
    if banner is not None:
        kind, text = banner
        top = (f'<div style="{BANNER_STYLES.get(kind, BANNER_STYLES["confidential"])};'
               f'padding:0.4em 0.8em;margin:0.3em 0;font-weight:600">{esc(text)}</div>')
    table = (f"<table>{f'<caption>{esc(caption)}</caption>' if caption else ''}"
             f"<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>")
    return top + table + "".join(f"<p>{esc(note)}</p>" for note in notes)


def schema_html(schema: Any) -> str:
    """The notebook display of a :class:`~hierarchy.schema.Schema`: one row per attribute, its
    number of levels and its labels (the first few).

    Examples
    --------
    >>> from hierarchy.schema import Attribute, Schema
    >>> page = schema_html(Schema((Attribute("sex", ("<f>", "m")),), name="demo"))
    >>> "<td>&lt;f&gt;, m</td>" in page, "1 attribute, 2 cells" in page
    (True, True)
    """
    rows = [(a.name, a.size, shorten(a.labels)) for a in schema.attributes]
    return html_table(["attribute", "levels", "labels (codes 0, 1, …)"], rows, numeric=[1],
                      caption=f"Schema {schema.name!r}: "
                              f"{counted(len(schema.attributes), 'attribute')}, "
                              f"{counted(schema.size, 'cell')}")


def workload_html(workload: Any) -> str:
    """The notebook display of a :class:`~hierarchy.queries.Workload`: per query its name,
    expression, number of answers, the attributes that index them and the first answers.

    Examples
    --------
    >>> from hierarchy.queries import e2e_workload
    >>> from hierarchy.schema import E2E_1940
    >>> page = workload_html(e2e_workload(E2E_1940))
    >>> "<td>marginal(votingage, hispanic, cenrace)</td>" in page
    True
    >>> "3 queries on schema &#x27;e2e_1940&#x27;" in page
    True
    """
    rows = []
    for q in workload:
        labels = (", ".join(label) or "total" for label in q.answer_labels)
        rows.append((q.name, q.expression, f"{q.n_answers:,}",
                     " × ".join(q.answer_attributes) or "(every cell summed)",
                     shorten(labels, 3, sep="; ")))
    return html_table(["query", "expression", "answers", "answers by", "first answers"], rows,
                      numeric=[2], caption=f"Workload: {counted(len(workload), 'query', 'queries')}"
                                           f" on schema {workload.schema.name!r}")


def budget_html(budget: Any) -> str:
    """The notebook display of a :class:`~hierarchy.budget.Budget`: per level and query the
    level's share of the total, the query's share of the level and the resulting ε (or ρ),
    exact and as a decimal.

    Examples
    --------
    >>> from hierarchy.budget import Budget
    >>> page = budget_html(Budget.e2e(1, ["nation", "state"]))
    >>> "<caption>Budget: pure DP, ε = 1 (change neighbours)</caption>" in page
    True
    >>> "<td>va_hisp_race</td><td style=\\"text-align:right\\">67.5 %</td>" in page
    True
    >>> "27/80" in page            # 1 × 1/2 × 27/40
    True
    """
    symbol = budget.symbol
    notion = "pure DP" if budget.kind == "pure" else "zCDP"
    rows = []
    for level, share in budget.level_fractions:
        for i, query in enumerate(budget.queries(level)):
            value = Fraction(budget.query_budget(level, query))
            rows.append((level if i == 0 else "", percent(share) if i == 0 else "", query,
                         percent(value / budget.level_budget(level)), str(value),
                         f"{float(value):.4g}"))
    return html_table(
        ["level", "level share", "query", "query share", f"{symbol} (exact)", symbol], rows,
        numeric=[1, 3, 4, 5], caption=f"Budget: {notion}, {symbol} = {budget.total} "
                                      f"({budget.neighbours} neighbours)",
        notes=[f"A query's {symbol} is the total × its level's share × its share of the "
               f"level; levels and queries compose sequentially, the units of a level in "
               f"parallel."])
