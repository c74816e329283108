"""Sums over sets of units: an exact answer of a query over several units of one level together.

An invariant or constraint holds unit by unit. Some published numbers hold for a *set* of
units instead: the 2020 Census's optimized geography splits a state with American Indian and
Alaska Native areas into two pieces (``0SS`` and ``1SS``), and the state's published total is
the total of the two pieces together, not of either (``docs/nmf.md``). A :class:`UnitSum`
states such numbers: a query, groups of units of one level that share a parent, and the exact
answers of each group's summed histogram. TopDown holds each group's sum in the node problem of
its units' parent (a row across children: ``docs/topdown.md``, "Sums over units"), and every
result is verified against it in exact integers (:func:`sum_violations`).

Where this module sits: it imports the queries and the geography (below :mod:`invariants`) and
:mod:`invariants.errors`; :mod:`invariants.spec` and :mod:`invariants.compile` import it.

Examples
--------
Two pieces of state 04 share its total; state 44 is one piece:

>>> s = UnitSum("state_total", "state", [["004", "104"]], [7151502])
>>> s.groups, s.values, s.query
((('004', '104'),), ((7151502,),), 'total')
>>> s.to_dict()
{'name': 'state_total', 'level': 'state', 'query': 'total', 'groups': [['004', '104']], \
'values': [[7151502]]}
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import numpy as np
import scipy.sparse as sp

from hierarchy.errors import HierarchyError
from hierarchy.geography import Geography
from hierarchy.queries import parse_query
from hierarchy.schema import Schema
from invariants.errors import SpecError
from invariants.items import _only, _where

__all__ = ["UnitSum", "CompiledSum", "compile_sums", "sum_violations"]


def _whole(value: Any) -> bool:
    return (isinstance(value, (int, np.integer)) and not isinstance(value, bool)) or (
        isinstance(value, (float, np.floating)) and np.isfinite(value) and value == int(value))


@dataclass(frozen=True)
class UnitSum:
    """Exact answers of ``query`` over groups of units of ``level`` (each group's histograms
    summed).

    Parameters
    ----------
    name : str
        Names the rows in messages and reports.
    level : str
        The units' level (not the root: a sum over the root's one unit is an invariant).
    groups : sequence of sequences of str
        Each group's geocodes; a unit is in at most one group, and a group's units share a
        parent (TopDown holds the sum in that parent's node problem).
    values : sequence
        Each group's answers: one whole number per group for a query of one answer (``total``),
        otherwise one sequence of answers per group.
    query : str
        A query expression over the schema (``docs/queries.md``); default ``"total"``.

    Raises
    ------
    SpecError
        A missing name or level, an empty group, a unit in two groups, values that are not
        whole numbers or do not match the groups (naming the file and line when read from one).

    Examples
    --------
    >>> UnitSum("pair", "county", [["a", "b"], ["c", "d"]], [[3, 4], [5, 6]],
    ...         query="marginal(sex)").values
    ((3, 4), (5, 6))
    >>> UnitSum("pair", "county", [["a", "b"], ["b", "c"]], [1, 2])
    Traceback (most recent call last):
    ...
    invariants.errors.SpecError: sum 'pair': unit 'b' is in two groups; a unit may be in one ...
    """

    name: str
    level: str
    groups: tuple[tuple[str, ...], ...]
    values: tuple[tuple[int, ...], ...]
    query: str = "total"
    source: str | None = field(default=None, compare=False, repr=False)
    line: int | None = field(default=None, compare=False, repr=False)

    def __post_init__(self):
        where = _where(self.source, self.line)
        if not isinstance(self.name, str) or not self.name:
            raise SpecError(f"{where}a sum needs a name")
        what = f"{where}sum {self.name!r}"
        if not isinstance(self.level, str) or not self.level:
            raise SpecError(f"{what} needs a level (the units' level name)")
        if not isinstance(self.query, str) or not self.query.strip():
            raise SpecError(f"{what}: query must be a query expression, not {self.query!r}")
        groups = self.groups
        if isinstance(groups, str) or not isinstance(groups, Sequence) or not groups or any(
                isinstance(g, str) or not isinstance(g, Sequence) or not g
                or not all(isinstance(u, str) for u in g) for g in groups):
            raise SpecError(f"{what}: groups must be a non-empty list of non-empty lists of "
                            f"geocodes, not {groups!r}")
        groups = tuple(tuple(g) for g in groups)
        seen: set[str] = set()
        for g in groups:
            for u in g:
                if u in seen:
                    raise SpecError(f"{what}: unit {u!r} is in two groups; a unit may be in "
                                    "one group of a sum")
                seen.add(u)
        values = self.values
        if isinstance(values, str) or not isinstance(values, Sequence) or \
                len(values) != len(groups):
            raise SpecError(f"{what}: values must give one entry per group ({len(groups)}), "
                            f"not {values!r}")
        rows = tuple(tuple(v) if isinstance(v, Sequence) and not isinstance(v, str) else (v,)
                     for v in values)
        if len({len(r) for r in rows}) != 1 or not rows[0] or not all(
                _whole(v) for r in rows for v in r):
            raise SpecError(f"{what}: values must be whole numbers, the same count of answers "
                            f"for every group; got {values!r}")
        object.__setattr__(self, "groups", groups)
        object.__setattr__(self, "values", tuple(tuple(int(v) for v in r) for r in rows))

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "level": self.level, "query": self.query,
                "groups": [list(g) for g in self.groups],
                "values": [list(v) for v in self.values]}

    @classmethod
    def from_dict(cls, item: Mapping[str, Any], *, source: str | None = None,
                  line: int | None = None) -> "UnitSum":
        """From the TOML form (``[[sum]]``: ``name``, ``level``, ``query``, ``groups``,
        ``values``).

        Examples
        --------
        >>> UnitSum.from_dict({"name": "s", "level": "state", "groups": [["1", "2"]],
        ...                    "values": [10]}).values
        ((10,),)
        >>> UnitSum.from_dict({"name": "s", "level": "state", "group": [["1"]]})
        Traceback (most recent call last):
        ...
        invariants.errors.SpecError: sum 's' has unknown key(s) ['group']; allowed: ['groups', ...
        """
        _only(item, {"name", "level", "query", "groups", "values"}, "sum", source, line)
        missing = sorted({"name", "level", "groups", "values"} - set(item))
        if missing:
            raise SpecError(f"{_where(source, line)}sum {item.get('name')!r} needs "
                            f"{missing}")
        return cls(item["name"], item["level"], item["groups"], item["values"],
                   item.get("query", "total"), source=source, line=line)


@dataclass(frozen=True, eq=False)
class CompiledSum:
    """A :class:`UnitSum` on a geography: its query's matrix (answers × cells), each group's
    units (indices into the level), the groups' exact answers (groups × answers) and a label
    per group and answer (``"name: 004+104: total"``).

    Examples
    --------
    >>> from hierarchy.schema import Attribute
    >>> schema = Schema((Attribute("sex", ("m", "f")),))
    >>> geo, _ = Geography.from_columns(["nation", "state"], [[["1", "2", "3"]]])
    >>> [c] = compile_sums([UnitSum("s", "state", [["1", "3"]], [5])], schema, geo)["state"]
    >>> c.units[0].tolist(), c.values.tolist(), c.labels
    ([0, 2], [[5]], (('s: 1+3: total',),))
    """

    name: str
    level: str
    matrix: sp.csr_matrix
    units: tuple[np.ndarray, ...]
    values: np.ndarray
    labels: tuple[tuple[str, ...], ...]


def compile_sums(sums: Sequence[UnitSum], schema: Schema, geography: Geography
                 ) -> dict[str, tuple[CompiledSum, ...]]:
    """Every sum on ``geography``: level → its compiled sums (levels without any absent).

    Raises
    ------
    SpecError
        An unknown level or geocode, the root level, a group whose units have different
        parents, a bad query, answers of the wrong count or negative answers of a query that
        counts persons.

    Examples
    --------
    >>> from hierarchy.schema import Attribute
    >>> schema = Schema((Attribute("sex", ("m", "f")),))
    >>> geo, _ = Geography.from_columns(["nation", "state", "county"],
    ...                                 [[["1", "1", "2"], ["a", "b", "c"]]])
    >>> compile_sums([UnitSum("s", "county", [["b", "c"]], [5])], schema, geo)
    Traceback (most recent call last):
    ...
    invariants.errors.SpecError: sum 's': the units of group ['b', 'c'] have different parents;...
    """
    out: dict[str, list[CompiledSum]] = {}
    for s in sums:
        where = f"{_where(s.source, s.line)}sum {s.name!r}"
        if s.level not in geography.levels:
            raise SpecError(f"{where}: unknown level {s.level!r}; the geography's levels are "
                            f"{list(geography.levels)}")
        li = geography.levels.index(s.level)
        if li == 0:
            raise SpecError(f"{where}: the root level has one unit; declare its answers as an "
                            "invariant or a constraint instead")
        try:
            q = parse_query(s.query, schema)
        except HierarchyError as exc:
            raise SpecError(f"{where}: bad query {s.query!r}: {exc}") from None
        values = np.asarray(s.values, dtype=np.int64)
        if values.shape[1] != q.n_answers:
            raise SpecError(f"{where}: query {s.query!r} has {q.n_answers} answers but the "
                            f"values give {values.shape[1]} per group")
        matrix = sp.csr_matrix(q.matrix, dtype=np.int64)
        if matrix.data.min(initial=0) >= 0 and (values < 0).any():
            g = int(np.argwhere(values < 0)[0][0])
            raise SpecError(f"{where}: group {list(s.groups[g])} has a negative answer "
                            f"{values[g].tolist()} of a query that counts persons")
        index = {str(c): i for i, c in enumerate(geography.geocodes[li])}
        parents = geography.parents[li]
        units = []
        for g in s.groups:
            unknown = [u for u in g if u not in index]
            if unknown:
                raise SpecError(f"{where}: no {s.level} unit {unknown[0]!r} in the geography")
            at = np.array([index[u] for u in g], dtype=np.int64)
            if np.unique(parents[at]).size > 1:
                raise SpecError(f"{where}: the units of group {list(g)} have different "
                                "parents; a sum holds within one parent's children")
            units.append(at)
        answers = [", ".join(lab) if lab else "total" for lab in q.answer_labels]
        labels = tuple(tuple(f"{s.name}: {'+'.join(g)}: {a}" for a in answers)
                       for g in s.groups)
        out.setdefault(s.level, []).append(
            CompiledSum(s.name, s.level, matrix, tuple(units), values, labels))
    return {lv: tuple(v) for lv, v in out.items()}


def sum_violations(compiled: Sequence[CompiledSum], hist: np.ndarray, limit: int = 10, *,
                   tolerance: float = 0.0) -> list[str]:
    """The groups whose summed answers differ from their sums' values: in exact integers
    (``hist``: the level's histograms, units × cells), or, for real-valued histograms, by more
    than ``tolerance`` × max(1, |value|).

    Examples
    --------
    >>> from hierarchy.schema import Attribute
    >>> schema = Schema((Attribute("sex", ("m", "f")),))
    >>> geo, _ = Geography.from_columns(["nation", "state"], [[["1", "2", "3"]]])
    >>> compiled = compile_sums([UnitSum("s", "state", [["1", "3"]], [5])], schema, geo)
    >>> sum_violations(compiled["state"], np.array([[1, 2], [0, 0], [2, 0]]))
    []
    >>> sum_violations(compiled["state"], np.array([[1, 2], [0, 0], [2, 1]]))
    ['s: 1+3: total is 6, held at 5']
    """
    out: list[str] = []
    hist = np.asarray(hist)
    exact = hist.dtype.kind in "iu"
    for c in compiled:
        for g, units in enumerate(c.units):
            summed = hist[units].sum(axis=0)
            want = c.values[g]
            if exact:
                got = c.matrix @ summed.astype(np.int64)
                off = np.flatnonzero(got != want)
            else:
                got = c.matrix.astype(np.float64) @ summed.astype(np.float64)
                off = np.flatnonzero(np.abs(got - want) > tolerance * np.maximum(1, np.abs(want)))
            for a in off:
                shown = int(got[a]) if exact else f"{got[a]:.6g}"
                out.append(f"{c.labels[g][a]} is {shown}, held at {int(want[a])}")
                if len(out) >= limit:
                    return out
    return out
