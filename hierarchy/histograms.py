"""The confidential hierarchy: exact detailed histograms (and unit counts) of every unit."""

from __future__ import annotations

import html
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np
import pandas as pd

from hierarchy.errors import HierarchyError
from hierarchy.frames import resolve_query, tidy_frame
from hierarchy.geography import Geography
from hierarchy.queries import Query
from hierarchy.schema import Schema

__all__ = ["Hierarchy"]

#: The longest one-line ``repr`` of a hierarchy, its measurements or a result.
REPR_LIMIT = 200


def short_repr(kind: str, sizes: Sequence[tuple[str, int]], persons: str | None,
               label: str | None, head: str = "", tail: str = "") -> str:
    """One line of at most :data:`REPR_LIMIT` characters: ``kind(head; levels with units;
    persons; randomness label; tail)``, the middle levels elided (``…``) when there are too many.

    Examples
    --------
    >>> short_repr("Hierarchy", [("nation", 1), ("state", 2)], "7", None)
    'Hierarchy(nation=1, state=2 units; 7 persons)'
    >>> line = short_repr("Result", [(f"level{i}", 10 ** i) for i in range(30)], "1", "release",
    ...                   head="'topdown'")
    >>> len(line) <= REPR_LIMIT, "…" in line, line.endswith("randomness release)")
    (True, True, True)
    """
    def line(parts: list[str]) -> str:
        fields = [head] if head else []
        fields.append(", ".join(parts) + " units")
        if persons is not None:
            fields.append(f"{persons} persons")
        if label is not None:
            fields.append(f"randomness {label}")
        if tail:
            fields.append(tail)
        return f"{kind}({'; '.join(fields)})"

    parts = [f"{name}={n:,}" for name, n in sizes]
    text = line(parts)
    keep = len(parts)
    while len(text) > REPR_LIMIT and keep > 2:
        keep -= 1
        text = line(parts[:keep - 1] + ["…"] + parts[-1:])
    return text if len(text) <= REPR_LIMIT else text[:REPR_LIMIT - 2] + "…)"


def summary_html(title: str, rows: Sequence[tuple[str, int, str]], notes: Sequence[str] = (),
                 persons_header: str = "persons") -> str:
    """A small HTML table for notebooks: a caption, one row per level (level, units, persons),
    then notes; every text escaped.

    Examples
    --------
    >>> print(summary_html("Hierarchy <x>", [("nation", 1, "7")], ["a & b"]))
    <table><caption>Hierarchy
    &lt;x&gt;</caption><thead><tr><th>level</th>...<th>persons</th></tr></thead><tbody><tr><td>nation</td><td
    style="text-align:right">1</td><td
    style="text-align:right">7</td></tr></tbody></table><p>a &amp; b</p>
    """
    esc = html.escape
    body = "".join(f"<tr><td>{esc(str(level))}</td><td style=\"text-align:right\">{units:,}</td>"
                   f"<td style=\"text-align:right\">{esc(persons)}</td></tr>"
                   for level, units, persons in rows)
    head = (f"<tr><th>level</th><th>units</th><th>{esc(persons_header)}</th></tr>")
    table = (f"<table><caption>{esc(title)}</caption><thead>{head}</thead>"
             f"<tbody>{body}</tbody></table>")
    return table + "".join(f"<p>{esc(note)}</p>" for note in notes)


@dataclass(frozen=True, eq=False)
class Hierarchy:
    """Exact histograms of every unit at every level — the confidential truth.

    Build it with :func:`hierarchy.tabulation.tabulate`. Nothing in this object is ever written to
    an output unless the user asks for it explicitly.

    Parameters
    ----------
    schema : Schema
    geography : Geography
    counts : tuple of int64 arrays
        ``counts[l]`` has shape (units of level ``l``, ``schema.size``).
    units : tuple of int64 arrays or None
        ``units[l]`` has shape (units of level ``l``, levels of ``unit_attribute``): the number of
        housing units / facilities of each type (occupied households are type 0 in the E2E
        schema). ``None`` when no units table was tabulated.
    unit_attribute : str or None
        The schema attribute that types the units (``"hhgq"``).

    Raises
    ------
    HierarchyError
        If a level's counts (or units) do not have one row per unit of the level and one column
        per cell (per unit type), or units are given without ``unit_attribute``.

    Examples
    --------
    A nation of two states, persons counted by sex (usually :func:`~hierarchy.tabulation.tabulate`
    builds this from microdata):

    >>> import numpy as np
    >>> from hierarchy.schema import Schema, Attribute
    >>> from hierarchy.geography import Geography
    >>> schema = Schema((Attribute("sex", ("male", "female")),))
    >>> geo, _ = Geography.from_columns(["nation", "state"], [[["A", "B"]]])
    >>> truth = Hierarchy(schema, geo, (np.array([[3, 4]]), np.array([[1, 4], [2, 0]])))
    >>> truth.summary()
    {'nation': {'units': 1, 'persons': 7}, 'state': {'units': 2, 'persons': 7}}
    >>> truth.totals("state").tolist()
    [5, 2]
    >>> truth
    Hierarchy(nation=1, state=2 units; 7 persons; confidential)

    Each level needs one row per unit:

    >>> Hierarchy(schema, geo, (np.array([[3, 4]]), np.array([[1, 4]])))
    Traceback (most recent call last):
    ...
    hierarchy.errors.HierarchyError: level 'state': counts have shape (1, 2), expected (2, 2)
    """

    schema: Schema
    geography: Geography
    counts: tuple[np.ndarray, ...]
    units: tuple[np.ndarray, ...] | None = None
    unit_attribute: str | None = None

    def __post_init__(self):
        counts = tuple(np.asarray(c) for c in self.counts)
        object.__setattr__(self, "counts", counts)
        if len(counts) != self.geography.depth:
            raise HierarchyError("one count array per geography level is needed")
        for name, c, g in zip(self.geography.levels, counts, self.geography.geocodes):
            if c.shape != (g.size, self.schema.size):
                raise HierarchyError(f"level {name!r}: counts have shape {c.shape}, expected "
                                     f"({g.size}, {self.schema.size})")
        if self.units is not None:
            if self.unit_attribute is None:
                raise HierarchyError("units given without the attribute that types them")
            k = self.schema.attribute(self.unit_attribute).size
            units = tuple(np.asarray(u) for u in self.units)
            object.__setattr__(self, "units", units)
            for name, u, g in zip(self.geography.levels, units, self.geography.geocodes):
                if u.shape != (g.size, k):
                    raise HierarchyError(f"level {name!r}: units have shape {u.shape}, "
                                         f"expected ({g.size}, {k})")

    @property
    def levels(self) -> tuple[str, ...]:
        return self.geography.levels

    def level_counts(self, level: str | int) -> np.ndarray:
        """Detailed histograms of one level, shape (units, cells)."""
        return self.counts[self.geography.level_index(level)]

    @property
    def leaf_counts(self) -> np.ndarray:
        """The bottom level's histograms (as :attr:`hierarchy.tabulation.LeafCounts.leaf_counts`,
        dense)."""
        return self.counts[-1]

    @property
    def leaf_units(self) -> np.ndarray | None:
        """The bottom level's units of each type, if tabulated with a units table."""
        return None if self.units is None else self.units[-1]

    def level_units(self, level: str | int) -> np.ndarray:
        if self.units is None:
            raise HierarchyError("this hierarchy has no units table; tabulate one with "
                                 "tabulate(..., units=...)")
        return self.units[self.geography.level_index(level)]

    def answers(self, level: str | int, query: str | Query) -> np.ndarray:
        """Exact answers of ``query`` — a Query or a query expression such as ``"total"`` or
        ``"marginal(sex)"`` — for every unit of ``level``, shape (units, answers).

        Examples
        --------
        >>> from hierarchy.synth import synthesize_1940
        >>> from hierarchy.tabulation import tabulate
        >>> from hierarchy.schema import E2E_1940
        >>> truth = tabulate(synthesize_1940(500, seed=1).persons, schema=E2E_1940,
        ...                  levels=["nation", "state"])
        >>> truth.answers("nation", "total").tolist()
        [[500]]
        >>> truth.answers("state", "marginal(votingage)").shape
        (49, 2)
        """
        return resolve_query(query, self.schema).answer(self.level_counts(level))

    def to_frame(self, level: str | int, *, labels: bool = True, parents: bool = True,
                 zeros: bool = False) -> pd.DataFrame:
        """A tidy DataFrame of one level's exact counts: one row per unit and cell
        (see :func:`hierarchy.frames.tidy_frame`). Confidential, like everything here.

        Examples
        --------
        >>> from hierarchy.synth import synthesize_1940
        >>> from hierarchy.tabulation import tabulate
        >>> from hierarchy.schema import E2E_1940
        >>> truth = tabulate(synthesize_1940(500, seed=1).persons, schema=E2E_1940,
        ...                  levels=["nation", "state"])
        >>> frame = truth.to_frame("state")
        >>> list(frame.columns)
        ['nation', 'state', 'hhgq', 'votingage', 'hispanic', 'cenrace', 'count']
        >>> int(frame["count"].sum())
        500
        """
        li = self.geography.level_index(level)
        return tidy_frame(self.schema, self.geography, li, self.counts[li], labels=labels,
                          parents=parents, zeros=zeros)

    def totals(self, level: str | int) -> np.ndarray:
        return self.level_counts(level).sum(axis=1)

    def __repr__(self) -> str:
        persons = f"{int(self.counts[0].sum()):,}"
        sizes = [(lv, int(g.size)) for lv, g in zip(self.levels, self.geography.geocodes)]
        return short_repr("Hierarchy", sizes, persons, None, tail="confidential")

    def _repr_html_(self) -> str:
        rows = [(lv, int(g.size), f"{int(c.sum()):,}")
                for lv, g, c in zip(self.levels, self.geography.geocodes, self.counts)]
        return summary_html(f"Hierarchy (confidential truth): {self.schema.size:,} cells", rows)

    def summary(self) -> dict[str, Any]:
        """Units and persons per level (JSON-ready)."""
        return {name: {"units": int(g.size), "persons": int(c.sum())}
                for name, g, c in zip(self.levels, self.geography.geocodes, self.counts)}
