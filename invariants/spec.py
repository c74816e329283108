"""A declarative spec of invariants and constraints, from TOML or Python.

An **invariant** declares that an exact statistic of the confidential data is published at some
levels (``tot``: persons per unit; ``gqhh_vect``: housing units / facilities by type;
``gqhh_tot``: their total). A **constraint** restricts post-processed histograms: catalogue
constraints (``hhgq_total_lb``, ``hhgq_total_ub``, ``total_ge_households``), structural zeros,
and arbitrary linear equalities or inequalities over named queries. Every item lists the levels
it applies to (or ``"all"``). The catalogue (:mod:`invariants.catalogue`) defines every named
invariant and catalogue constraint; :data:`INVARIANTS` and :data:`CATALOGUE_CONSTRAINTS` below
are its names and meanings.

TOML form::

    [[invariant]]
    name = "tot"
    levels = ["nation", "state"]

    [[constraint]]
    name = "hhgq_total_lb"
    levels = ["enum_dist", "state"]

    [[constraint]]
    name = "no_correctional_or_college"
    type = "structural_zero"
    query = "recode(hhgq: correctional=1; college=5)"
    levels = "all"

    [[constraint]]
    name = "nursing_adults_only"
    type = "linear"
    query = "recode(hhgq: nursing=3) * marginal(votingage)"
    answers = [0]                # under-18 residents of nursing facilities
    sense = "=="
    rhs = 0
    levels = "all"

``rhs`` is a number, a list (one per answer), or a published statistic: ``"tot"``, ``"gqhh"``
(one per answer of a marginal of the unit attribute) or ``"gqhh[3]"``.

Where this module sits: :class:`Invariant`, :class:`Constraint` and the name tables are defined
in :mod:`invariants.items` (re-exported here); :class:`Spec` holds them, reads them from TOML,
and is the top of the spec side of :mod:`invariants`: it imports :mod:`invariants.compile` (for
:meth:`Spec.check_data`), while the compiler and the catalogue know a spec only by what they read
of it (:class:`invariants.catalogue.SpecView`) and import nothing from here.

Examples
--------
>>> spec = Spec.e2e(["nation", "state", "county", "enum_dist"])
>>> [c.name for c in spec.constraints]
['hhgq_total_lb', 'hhgq_total_ub', 'total_ge_households', 'structural_zeros']
>>> spec.levels_of(spec.invariants[0], ["nation", "state", "county", "enum_dist"])
('nation', 'state')
>>> Spec.from_toml_string('[[invariant]]\\nname = "tots"\\nlevels = "all"\\n', source="x.toml")
Traceback (most recent call last):
...
invariants.errors.SpecError: x.toml, line 2: unknown invariant 'tots'; known invariants are
['gqhh_tot', 'gqhh_vect', 'tot']; to hold the answers of a query exact give it a query, e.g.
query = "marginal(sex)"
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

from hierarchy.io.tomlconfig import TomlDocument, parse_toml, read_toml
from invariants.compile import check_data as _check_data
from invariants.errors import SpecError
from invariants.items import (
    CATALOGUE_CONSTRAINTS,
    INVARIANTS,
    SENSES,
    Constraint,
    Invariant,
    _check_finite,
    _only,
    _where,
)
from invariants.rows import _check_item_query
from invariants.sums import UnitSum

__all__ = ["Invariant", "Constraint", "UnitSum", "Spec", "INVARIANTS", "CATALOGUE_CONSTRAINTS",
           "SENSES"]


@dataclass(frozen=True)
class Spec:
    """Invariants and constraints, each with its levels.

    Parameters
    ----------
    invariants, constraints : sequences
    unit_attribute : str
        The schema attribute typing housing units (``hhgq``) for the catalogue constraints.
    household_level : int
        Code of occupied households in ``unit_attribute`` (0).
    imply_upward : bool
        Also impose, at every parent level, the sums of its children's constraints (valid for the
        truth, so nothing feasible is lost). This keeps a rounded parent splittable among its
        children, so the failsafe is rarely needed. On by default.
    sums : sequence of UnitSum
        Exact answers over groups of sibling units (:mod:`invariants.sums`; ``[[sum]]`` in
        TOML), such as a state's total over its two pieces in the 2020 geography.

    Raises
    ------
    SpecError
        If two constraints share a name or an invariant is declared twice.

    See Also
    --------
    Spec.from_toml, Spec.e2e

    Examples
    --------
    >>> spec = Spec(invariants=[Invariant("tot", ["nation", "state"])],
    ...             constraints=[Constraint("no_minors", type="structural_zero",
    ...                                     query="marginal(votingage)", answers=[0])])
    >>> spec.invariant_levels("tot", ["nation", "state", "county"])
    ('nation', 'state')
    >>> spec.check_levels(["nation", "county"])
    Traceback (most recent call last):
    ...
    invariants.errors.SpecError: invariant 'tot' names unknown level(s) ['state']; ...
    >>> Spec(invariants=[Invariant("tot", "nation"), Invariant("tot", "state")])
    Traceback (most recent call last):
    ...
    invariants.errors.SpecError: invariant 'tot' is declared twice; list all its levels in one entry
    """

    invariants: tuple[Invariant, ...] = ()
    constraints: tuple[Constraint, ...] = ()
    unit_attribute: str = "hhgq"
    household_level: int = 0
    imply_upward: bool = True
    sums: tuple[UnitSum, ...] = ()
    source: str | None = field(default=None, compare=False, repr=False)

    def __post_init__(self):
        object.__setattr__(self, "invariants", tuple(self.invariants))
        object.__setattr__(self, "constraints", tuple(self.constraints))
        object.__setattr__(self, "sums", tuple(self.sums))
        if not all(isinstance(s, UnitSum) for s in self.sums):
            raise SpecError("a spec's sums must be UnitSum items")
        names = [c.name for c in (*self.constraints, *self.sums)]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            again = _second((*self.constraints, *self.sums), dup[0])
            raise SpecError(f"{_where(again.source or self.source, again.line)}constraint and "
                            f"sum names must be unique; repeated: {dup}")
        inv = [i.name for i in self.invariants]
        dup = sorted({n for n in inv if inv.count(n) > 1})
        if dup:
            again = _second(self.invariants, dup[0])
            raise SpecError(f"{_where(again.source or self.source, again.line)}invariant "
                            f"{dup[0]!r} is declared twice; list all its levels in one entry")
        for i in self.invariants:       # a query invariant's data sit under its name
            if i.is_query and i.name in names:
                raise SpecError(f"{_where(i.source or self.source, i.line)}invariant {i.name!r} "
                                "has the name of a constraint or sum; give it another name")

    # -- construction --------------------------------------------------------------------------
    @classmethod
    def e2e(cls, levels: Sequence[str]) -> "Spec":
        """The 2018 E2E spec (docs/spec.md) for levels ``[nation, state, …, ED]`` (≥ 2 levels):
        ``tot`` at the top two levels, units data at the bottom, ``hhgq_total_lb/ub`` at the
        bottom and second levels, ``total ≥ households`` everywhere, hhgq types 1 and 5
        (correctional, college) structural zeros."""
        levels = list(levels)
        if len(levels) < 2:
            raise SpecError("the E2E spec needs at least two levels (nation and below)")
        lb_levels = tuple(dict.fromkeys([levels[-1], levels[1]]))
        return cls(
            invariants=(Invariant("tot", tuple(levels[:2])),
                        Invariant("gqhh_vect", (levels[-1],)),
                        Invariant("gqhh_tot", (levels[-1],))),
            constraints=(Constraint("hhgq_total_lb", lb_levels),
                         Constraint("hhgq_total_ub", lb_levels),
                         Constraint("total_ge_households", "all"),
                         Constraint("structural_zeros", "all", type="structural_zero",
                                    query="recode(hhgq: correctional=1; college=5)")))

    @classmethod
    def pl94_2020(cls, levels: Sequence[str] | None = None) -> "Spec":
        """The 2020 redistricting-data (PL 94-171) production spec (docs/pl94_2020.md).

        ``tot`` at the top two levels, ``gqhh_vect`` and ``gqhh_tot`` at the block,
        ``hhgq_total_lb`` and ``hhgq_total_ub`` at state and block, and ``nurse_nva_0`` (no
        persons under 18 in nursing facilities) at the block:
        :func:`hierarchy.presets.pl94.pl94_spec_dict`, where each is traced to the production code.

        Parameters
        ----------
        levels : sequence of 6 str, optional
            The names of US, State, County, Tract, Block_Group and Block, root first (default
            :data:`hierarchy.presets.pl94.LEVELS`).

        Returns
        -------
        Spec

        Raises
        ------
        SpecError
            If ``levels`` is not six distinct names.

        Examples
        --------
        >>> spec = Spec.pl94_2020()
        >>> [(i.name, i.levels) for i in spec.invariants][0]
        ('tot', ('nation', 'state'))
        >>> spec.constraints[-1].name, spec.constraints[-1].levels
        ('nurse_nva_0', ('block',))
        >>> Spec.pl94_2020(["nation", "state", "county"])
        Traceback (most recent call last):
        ...
        invariants.errors.SpecError: the PL 94 presets need 6 level names, root first, one for each
        production geolevel ['US', 'State', 'County', 'Tract', 'Block_Group', 'Block']; got
        ['nation', 'state', 'county']
        """
        from hierarchy.errors import HierarchyError
        from hierarchy.presets.pl94 import pl94_spec_dict

        try:
            data = pl94_spec_dict(levels)
        except HierarchyError as exc:
            raise SpecError(str(exc)) from None
        return cls.from_dict(data)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, source: str | None = None,
                  text: str | None = None, table: str = "") -> "Spec":
        """From a mapping shaped like the TOML form (``invariant``/``constraint`` lists).

        Parameters
        ----------
        data : mapping
        source : str, optional
            The file name used in messages.
        text : str, optional
            The TOML text ``data`` comes from, for line numbers in messages.
        table : str, optional
            Where ``data`` sits in that text: ``""`` for a spec file, ``"spec"`` for the
            ``[spec]`` section of a run configuration.

        Returns
        -------
        Spec

        Raises
        ------
        SpecError
            Naming the file and line of the offending entry when ``source`` and ``text`` are
            given.

        Examples
        --------
        >>> Spec.from_dict({"invariant": [{"name": "tot", "levels": ["nation"]}]}).invariants
        (Invariant(name='tot', levels=('nation',)),)
        """
        doc = TomlDocument(data, text or "", source=source or "", error=SpecError)

        def line(key: str) -> int | None:
            return doc.line(table, key) if source else None

        known = {"invariant", "constraint", "sum", "unit_attribute", "household_level",
                 "imply_upward"}
        unknown = set(data) - known
        if unknown:
            first = sorted(unknown)[0]
            raise SpecError(f"{_where(source, line(first))}unknown spec key(s) "
                            f"{sorted(unknown)}; a spec has {sorted(known)}")
        for key, kind, ok in (("unit_attribute", "a string (an attribute name)",
                               lambda v: isinstance(v, str)),
                              ("household_level", "a non-negative integer code",
                               lambda v: isinstance(v, int) and not isinstance(v, bool)
                               and v >= 0),
                              ("imply_upward", "true or false", lambda v: isinstance(v, bool))):
            if key in data and not ok(data[key]):
                raise SpecError(f"{_where(source, line(key))}{key} must be {kind}, not "
                                f"{data[key]!r}")
        items: dict[str, list[tuple[Mapping[str, Any], int | None]]] = {}
        for what in ("invariant", "constraint", "sum"):
            entries = data.get(what, [])
            if isinstance(entries, Mapping):
                entries = [entries]
            if not isinstance(entries, list) or not all(isinstance(v, Mapping) for v in entries):
                raise SpecError(f"{_where(source, None)}{what} entries must be tables "
                                f"([[{what}]] in TOML)")
            block = f"{table}.{what}" if table else what
            items[what] = [(item, _entry_line(doc, block, i, item) if source else None)
                           for i, item in enumerate(entries)]
        invariants, constraints = [], []
        for item, at in items["invariant"]:
            if "name" not in item and "query" in item:   # a query invariant may go unnamed
                item = {**item, "name": None}
            _only(item, {"name", "levels", "query", "answers"}, "invariant", source, at)
            invariants.append(Invariant(item.get("name"), item.get("levels", "all"),
                                        item.get("query"), item.get("answers"),
                                        source=source, line=at))
        for i, (item, at) in enumerate(items["constraint"]):
            _only(item, {"name", "levels", "type", "query", "answers", "sense", "rhs"},
                  "constraint", source, at)
            for key in ("rhs", "answers"):       # the keys that hold numbers
                if key in item:
                    _check_finite(item[key], key, f"constraint {item.get('name')!r}", source,
                                  _key_line(doc, table, i, key, at))
            kind = item.get("type", "catalogue")
            constraints.append(Constraint(
                item.get("name"), item.get("levels", "all"), kind, item.get("query"),
                item.get("answers"), item.get("sense"), item.get("rhs"), source=source,
                line=at))
        sums = [UnitSum.from_dict(item, source=source, line=at) for item, at in items["sum"]]
        return cls(tuple(invariants), tuple(constraints),
                   unit_attribute=data.get("unit_attribute", "hhgq"),
                   household_level=data.get("household_level", 0),
                   imply_upward=data.get("imply_upward", True), sums=tuple(sums), source=source)

    @classmethod
    def from_toml_string(cls, text: str, *, source: str = "<spec>") -> "Spec":
        """Parse a spec from TOML text (see the module's TOML form).

        Raises
        ------
        SpecError
            If the text is not TOML or holds an invalid spec, naming ``source`` and the line.

        Examples
        --------
        >>> Spec.from_toml_string('[[invariant]]\\nname = "tot"\\n').invariants[0].levels
        'all'
        """
        doc = parse_toml(text, source=source, error=SpecError)
        return cls.from_dict(doc.data, source=source, text=text)

    @classmethod
    def from_toml(cls, path: str | Path) -> "Spec":
        """Read a spec from a TOML file.

        Raises
        ------
        SpecError
            If the file does not exist, is not a regular file (a directory, or a named pipe or
            device, which could block the read forever), cannot be read as UTF-8 text, or holds
            an invalid spec; the message names the file (and the line where there is one).

        Examples
        --------
        >>> Spec.from_toml("no/such/spec.toml")
        Traceback (most recent call last):
        ...
        invariants.errors.SpecError: spec file no/such/spec.toml does not exist
        """
        doc = read_toml(path, what="spec file", error=SpecError)
        return cls.from_dict(doc.data, source=doc.source, text=doc.text)

    def to_dict(self) -> dict[str, Any]:
        return {"unit_attribute": self.unit_attribute, "household_level": self.household_level,
                "imply_upward": self.imply_upward,
                "invariant": [i.to_dict() for i in self.invariants],
                "constraint": [c.to_dict() for c in self.constraints],
                **({"sum": [s.to_dict() for s in self.sums]} if self.sums else {})}

    # -- the confidential data -----------------------------------------------------------------
    def check_data(self, truth: Any, published: Mapping[str, Mapping[str, Any]] | None = None
                   ) -> None:
        """Refuse confidential data that break this spec's constraints, before anything is
        measured (:func:`invariants.compile.check_data`); :func:`hierarchy.measurement.measure`
        calls it when given ``spec=``.

        Raises
        ------
        hierarchy.errors.ConfidentialDataError
            Naming the broken constraints (and, in the full message, how many units break each
            and one example unit).

        Examples
        --------
        >>> from hierarchy import E2E_1940, tabulate
        >>> persons = pd.DataFrame({"state": ["01"], "hhgq": [5], "votingage": [1],
        ...                         "hispanic": [0], "cenrace": [0]})    # one student
        >>> truth = tabulate(persons, schema=E2E_1940, levels=["nation", "state"])
        >>> Spec(constraints=[Constraint("no_dorms", type="structural_zero",
        ...                              query="recode(hhgq: college=5)")]).check_data(truth)
        Traceback (most recent call last):
        ...
        hierarchy.errors.ConfidentialDataError: the confidential data break the spec, ...
        """
        _check_data(self, truth, published)

    def covers(self, other: "Spec") -> bool:
        """Whether data that satisfy this spec satisfy ``other``'s constraints too: each of
        ``other``'s constraints is one of this spec's, at some of its levels (``"all"`` covers
        any), with the same unit attribute and household code. What
        :func:`postproc.errors.require_checked_spec` asks of the spec the data were checked
        against.

        Examples
        --------
        >>> full = Spec.e2e(["nation", "state", "county"])
        >>> full.covers(full.restricted(["county"], ["nation", "state", "county"]))
        True
        >>> Spec().covers(full), full.covers(Spec())
        (False, True)
        """
        if (other.unit_attribute, other.household_level) != (self.unit_attribute,
                                                             self.household_level):
            return False
        mine: dict[str, list[Constraint]] = {}
        for c in self.constraints:
            mine.setdefault(c.name, []).append(c)

        def within(c: Constraint, d: Constraint) -> bool:
            if dataclasses.replace(c, levels="all") != dataclasses.replace(d, levels="all"):
                return False
            return d.levels == "all" or (c.levels != "all" and set(c.levels) <= set(d.levels))

        return all(any(within(c, d) for d in mine.get(c.name, ())) for c in other.constraints
                   ) and all(s in self.sums for s in other.sums)

    # -- levels --------------------------------------------------------------------------------
    @staticmethod
    def levels_of(item: Invariant | Constraint, all_levels: Sequence[str]) -> tuple[str, ...]:
        """The levels an item applies to, in geography order."""
        if item.levels == "all":
            return tuple(all_levels)
        return tuple(lv for lv in all_levels if lv in item.levels)

    def query_invariants(self, all_levels: Sequence[str]
                         ) -> dict[str, tuple[str, tuple[int | str, ...] | None, tuple[str, ...]]]:
        """The query invariants: name → (query, answers, levels in geography order), what
        :func:`hierarchy.measurement.spec_queries` publishes.

        Examples
        --------
        >>> spec = Spec(invariants=[Invariant("tot", "all"),
        ...                         Invariant(query="marginal(sex)", levels=["village"])])
        >>> spec.query_invariants(["country", "region", "village"])
        {'marginal(sex)': ('marginal(sex)', None, ('village',))}
        """
        return {i.name: (i.query, i.answers, self.levels_of(i, all_levels))
                for i in self.invariants if i.is_query}

    def resolve_queries(self, workload: Any) -> "Spec":
        """This spec with every query that names a query of ``workload`` (a query invariant's
        or a constraint's) replaced by that query's expression, so that it compiles without the
        workload. ``measure``, ``postprocess`` and ``postproc run`` call it.

        Examples
        --------
        >>> from hierarchy.queries import e2e_workload
        >>> from hierarchy.schema import E2E_1940
        >>> spec = Spec(invariants=[Invariant("races", ["state"], query="va_hisp_race")])
        >>> spec.resolve_queries(e2e_workload(E2E_1940)).invariants[0].query
        'marginal(votingage, hispanic, cenrace)'
        """
        named = {q.name: q.expression for q in workload}

        def resolved(item):
            query = getattr(item, "query", None)
            if query is None or query not in named or named[query] == query:
                return item
            return dataclasses.replace(item, query=named[query])

        invariants = tuple(resolved(i) for i in self.invariants)
        constraints = tuple(resolved(c) for c in self.constraints)
        if invariants == self.invariants and constraints == self.constraints:
            return self
        return dataclasses.replace(self, invariants=invariants, constraints=constraints)

    def check_queries(self, schema: Any) -> None:
        """Raise naming the item (and its file and line) whose query or answers ``schema``
        does not have: a query invariant's, or a constraint's.

        Examples
        --------
        >>> from hierarchy.schema import E2E_1940
        >>> Spec(invariants=[Invariant("gq", query="marginal(hhgq)", answers=["dorm"])]
        ...      ).check_queries(E2E_1940)
        Traceback (most recent call last):
        ...
        invariants.errors.SpecError: invariant 'gq': query 'marginal(hhgq)' has no answer 'dorm';
        its answers are 'household', 'correctional', ... (or their indices 0..7)
        """
        for item in (*self.invariants, *self.constraints):
            if getattr(item, "query", None) is None:
                continue
            kind = "invariant" if isinstance(item, Invariant) else "constraint"
            _check_item_query(item, schema, f"{kind} {item.name!r}")

    def invariant_levels(self, statistic: str, all_levels: Sequence[str]) -> tuple[str, ...]:
        """Levels where ``statistic`` (tot or gqhh) is declared exact."""
        out = set()
        for inv in self.invariants:
            if inv.statistic == statistic:
                out.update(self.levels_of(inv, all_levels))
        return tuple(lv for lv in all_levels if lv in out)

    def restricted(self, levels: Sequence[str], all_levels: Sequence[str]) -> "Spec":
        """The spec on ``levels`` only (a part of the geography's levels, ``all_levels``):
        every item keeps those of its levels among them, and an item left with none is dropped.

        Examples
        --------
        >>> from hierarchy.presets.pl94 import LEVELS
        >>> part = Spec.pl94_2020().restricted(["block_group", "block"], LEVELS)
        >>> [(i.name, i.levels) for i in part.invariants]
        [('gqhh_vect', ('block',)), ('gqhh_tot', ('block',))]
        >>> [c.name for c in part.constraints]
        ['hhgq_total_lb', 'hhgq_total_ub', 'nurse_nva_0']
        """
        keep = set(levels)

        def narrowed(items):
            out = []
            for item in items:
                at = tuple(lv for lv in self.levels_of(item, all_levels) if lv in keep)
                if at:
                    out.append(dataclasses.replace(item, levels=at))
            return tuple(out)

        return dataclasses.replace(self, invariants=narrowed(self.invariants),
                                   constraints=narrowed(self.constraints),
                                   sums=tuple(s for s in self.sums if s.level in keep))

    def check_levels(self, all_levels: Sequence[str]) -> None:
        """Raise naming any item that lists a level the geography does not have."""
        for item in (*self.invariants, *self.constraints):
            if item.levels == "all":
                continue
            unknown = [lv for lv in item.levels if lv not in all_levels]
            if unknown:
                kind = "invariant" if isinstance(item, Invariant) else "constraint"
                raise SpecError(f"{_where(item.source, item.line)}{kind} {item.name!r} names "
                                f"unknown level(s) {unknown}; the geography's levels are "
                                f"{list(all_levels)}")
        for s in self.sums:
            if s.level not in all_levels:
                raise SpecError(f"{_where(s.source, s.line)}sum {s.name!r} names unknown level "
                                f"{s.level!r}; the geography's levels are {list(all_levels)}")

    # -- display -------------------------------------------------------------------------------
    def _repr_html_(self) -> str:
        """Notebook display: one row per invariant, constraint and sum — what it holds and at
        which levels (:func:`hierarchy.display.html_table`, every text escaped)."""
        from hierarchy.display import counted, html_table, shorten

        def levels(item: Any) -> str:
            return "all" if item.levels == "all" else shorten(item.levels)

        def query(item: Any) -> str:
            answers = f" answers {shorten(item.answers)}" if item.answers is not None else ""
            return f"{item.query}{answers}" if item.query else ""

        rows = []
        for i in self.invariants:
            meaning = INVARIANTS[i.name][1] if i.name in INVARIANTS else "published exactly"
            rows.append(("invariant", i.name, f"{query(i)}: {meaning}" if i.is_query
                         else meaning, levels(i)))
        for c in self.constraints:
            if c.type == "catalogue":
                what = CATALOGUE_CONSTRAINTS.get(c.name, "catalogue constraint")
            elif c.type == "structural_zero":
                what = f"structural zero: {query(c)} = 0"
            else:
                rhs = shorten(c.rhs) if isinstance(c.rhs, (list, tuple)) else c.rhs
                what = f"{c.type}: {query(c)} {c.sense or ''} {'' if rhs is None else rhs}"
            rows.append(("constraint", c.name, what.strip(), levels(c)))
        rows += [("sum", s.name, f"{s.query} exact over {counted(len(s.groups), 'group')} of "
                                 f"units", s.level) for s in self.sums]
        caption = (f"Spec: {counted(len(self.invariants), 'invariant')}, "
                   f"{counted(len(self.constraints), 'constraint')}"
                   + (f", {counted(len(self.sums), 'sum')}" if self.sums else "")
                   + (f" ({self.source})" if self.source else ""))
        notes = [f"Unit attribute {self.unit_attribute} (occupied households: code "
                 f"{self.household_level}); constraints imposed upward on parents too: "
                 f"{'yes' if self.imply_upward else 'no'}."]
        return html_table(["kind", "name", "what", "levels"], rows, caption=caption,
                          notes=notes)


def _entry_line(doc: TomlDocument, block: str, index: int, item: Mapping[str, Any]
                ) -> int | None:
    """The line of an invariant or constraint: its ``name =`` (else its ``[[header]]``) when
    written as a table, else where its name appears (an inline table)."""
    if doc.has_table(block, index):
        return doc.line(block, "name", index)
    return doc.mention("name", item.get("name"))


def _key_line(doc: TomlDocument, table: str, index: int, key: str,
              entry: int | None) -> int | None:
    """Line of ``key`` in the ``index``-th constraint when written as a table; else the
    entry's own line."""
    block = f"{table}.constraint" if table else "constraint"
    if not doc.has_table(block, index):
        return entry
    block_keys = doc.line(block, key, index)
    return block_keys if block_keys != doc.line(block, None, index) else entry



def _second(items: Sequence[Invariant | Constraint], name: str) -> Invariant | Constraint:
    """The second item called ``name`` (where a duplicate is reported)."""
    return [it for it in items if it.name == name][1]

