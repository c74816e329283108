"""The items of a spec: :class:`Invariant` and :class:`Constraint`, validated when made.

An **invariant** names a statistic of the catalogue published exactly at some levels; a
**constraint** restricts post-processed histograms (a catalogue constraint, a structural zero or a
linear constraint over a query). Both are plain frozen data: :class:`invariants.spec.Spec` holds
them (and re-exports every name here), :mod:`invariants.compile` turns them into rows.

Where this module sits: it imports only :mod:`invariants.catalogue` (the names it checks against)
and :mod:`invariants.errors`; the compiler imports it, and the spec imports the compiler, so the
import graph of :mod:`invariants` runs one way, catalogue < items < compile < spec.

Examples
--------
>>> Invariant("tot", "state").levels
('state',)
>>> Constraint("hhgq_total_lb", ["county"]).to_dict()
{'name': 'hhgq_total_lb', 'levels': ['county']}
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from invariants import catalogue
from invariants.errors import SpecError

__all__ = ["Invariant", "Constraint", "INVARIANTS", "CATALOGUE_CONSTRAINTS", "SENSES"]

#: Invariant name → (statistic it publishes, meaning); the catalogue's
#: :data:`invariants.catalogue.INVARIANTS`.
INVARIANTS = {name: (entry.statistic, entry.meaning)
              for name, entry in catalogue.INVARIANTS.items()}

#: Catalogue constraint name → meaning (docs/spec.md), from
#: :data:`invariants.catalogue.CONSTRAINTS`.
CATALOGUE_CONSTRAINTS = {name: entry.meaning for name, entry in catalogue.CONSTRAINTS.items()}

SENSES = ("==", ">=", "<=")
_KINDS = ("catalogue", "structural_zero", "linear", "published")
_STAT_REF = re.compile(rf"^\s*({'|'.join(map(re.escape, catalogue.STATISTICS))})\s*"
                       r"(?:\[\s*(\d+)\s*\])?\s*$")


def _where(source: str | None, line: int | None) -> str:
    if source and line:
        return f"{source}, line {line}: "
    if source:
        return f"{source}: "
    return ""


def _only(item: Mapping[str, Any], allowed: set[str], what: str, source: str | None,
          line: int | None) -> None:
    """Refuse an entry of a spec file with keys ``allowed`` does not list, or without a name."""
    extra = set(item) - allowed
    if extra:
        raise SpecError(f"{_where(source, line)}{what} {item.get('name')!r} has unknown key(s) "
                        f"{sorted(extra)}; allowed: {sorted(allowed)}")
    if "name" not in item:
        raise SpecError(f"{_where(source, line)}every {what} needs a name")


def _levels(value: Any, where: str, name: str) -> tuple[str, ...] | str:
    if value == "all":
        return "all"
    if isinstance(value, str):
        return (value,)
    if isinstance(value, Sequence) and value and all(isinstance(v, str) for v in value):
        if len(set(value)) != len(value):
            raise SpecError(f"{where}{name!r} lists a level twice: {list(value)}")
        return tuple(value)
    raise SpecError(f"{where}{name!r} needs levels: a list of level names or \"all\", not "
                    f"{value!r}")


@dataclass(frozen=True, repr=False)
class Invariant:
    """An exact statistic published at some levels: a catalogue invariant (:data:`INVARIANTS`)
    or the answers of any query (a *query invariant*).

    Parameters
    ----------
    name : str, optional
        One of :data:`INVARIANTS` (``'tot'``, ``'gqhh_vect'`` or ``'gqhh_tot'``); or, with
        ``query``, the invariant's own name (default: the query as written), under which its
        data are published (``noisy.invariants[level][name]``, units × answers).
    levels : tuple of str or "all"
        The levels where it is published (a single level name is one level).
    query : str, optional
        A query expression (``"marginal(sex)"``, ``"marginal(sex) * recode(age: …)"``) or the
        name of a query of the workload (resolved by :meth:`invariants.spec.Spec.resolve_queries`,
        which ``measure``, ``postprocess`` and ``postproc run`` call): its answers are published
        exactly at ``levels`` and every post-processed result keeps them.
    answers : tuple of int or str, optional
        Which answers of the query (indices, or labels such as ``"female"`` or, for a query of
        several attributes, ``"female, 18+"``); default all.

    Raises
    ------
    SpecError
        On an unknown catalogue name, a query invariant named like a catalogue entry, bad levels
        or answers (naming the file and line when read from one).

    Examples
    --------
    >>> tot = Invariant("tot", ["nation", "state"])
    >>> tot
    Invariant(name='tot', levels=('nation', 'state'))
    >>> tot.statistic, tot.to_dict()
    ('tot', {'name': 'tot', 'levels': ['nation', 'state']})
    >>> Invariant("total")
    Traceback (most recent call last):
    ...
    invariants.errors.SpecError: unknown invariant 'total'; known invariants are [...]; to hold
    the answers of a query exact give it a query, e.g. query = "marginal(sex)"

    Any query at any level — females per village exact:

    >>> females = Invariant(query="marginal(sex)", levels=["village"], answers=["female"])
    >>> females
    Invariant(name='marginal(sex)', levels=('village',), query='marginal(sex)', answers=('female',))
    >>> females.statistic is None, females.is_query
    (True, True)
    """

    name: str | None = None
    levels: tuple[str, ...] | str = "all"
    query: str | None = None
    answers: tuple[int | str, ...] | None = None
    source: str | None = field(default=None, compare=False)
    line: int | None = field(default=None, compare=False)

    def __post_init__(self):
        where = _where(self.source, self.line)
        if self.query is None:
            if self.answers is not None:
                raise SpecError(f"{where}invariant {self.name!r}: answers go with a query; a "
                                "catalogue invariant takes only levels")
            if self.name not in INVARIANTS:
                raise SpecError(f"{where}unknown invariant {self.name!r}; known invariants are "
                                f"{sorted(INVARIANTS)}; to hold the answers of a query exact "
                                "give it a query, e.g. query = \"marginal(sex)\"")
        else:
            if not isinstance(self.query, str) or not self.query.strip():
                raise SpecError(f"{where}invariant {self.name!r}: query must be a query "
                                f"expression or a workload query's name, not {self.query!r}")
            name = self.query.strip() if self.name is None else self.name
            if not isinstance(name, str) or not name.strip():
                raise SpecError(f"{where}a query invariant's name must be a non-empty string, "
                                f"not {name!r}")
            if name in INVARIANTS or name in catalogue.STATISTICS:
                raise SpecError(f"{where}invariant {name!r} with a query: {name!r} names a "
                                "catalogue entry; give the query invariant a name of its own")
            object.__setattr__(self, "name", name)
            object.__setattr__(self, "answers", _answer_list(self.answers, where,
                                                             f"invariant {name!r}"))
        object.__setattr__(self, "levels", _levels(self.levels, where, self.name))

    def __repr__(self) -> str:
        extra = "".join(f", {k}={getattr(self, k)!r}" for k in ("query", "answers")
                        if getattr(self, k) is not None)
        return f"Invariant(name={self.name!r}, levels={self.levels!r}{extra})"

    @property
    def is_query(self) -> bool:
        """Whether it publishes a query's answers (not a catalogue statistic)."""
        return self.query is not None

    @property
    def statistic(self) -> str | None:
        """The catalogue statistic it publishes; ``None`` for a query invariant."""
        return None if self.is_query else INVARIANTS[self.name][0]

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "levels": self.levels if self.levels == "all"
                               else list(self.levels)}
        if self.is_query:
            out["query"] = self.query
            if self.answers is not None:
                out["answers"] = list(self.answers)
        return out


def _answer_list(answers: Any, where: str, owner: str) -> tuple[int | str, ...] | None:
    """``answers`` of a query as a tuple of indices (non-negative integers) and labels
    (non-empty strings), or None for all; resolved against the query when it is compiled
    (:meth:`hierarchy.queries.Query.answer_indices`)."""
    if answers is None:
        return None
    items = (answers,) if isinstance(answers, (int, str)) else answers
    try:
        items = tuple(items)
    except TypeError:
        items = ()
    ok = bool(items) and all(
        (isinstance(a, int) and not isinstance(a, bool) and a >= 0)
        or (isinstance(a, str) and a.strip()) for a in items)
    if not ok:
        raise SpecError(f"{where}{owner}: answers must be a list of answer indices "
                        f"(non-negative integers) or labels (e.g. [\"female\"]), not {answers!r}")
    return items


@dataclass(frozen=True)
class Constraint:
    """A constraint on post-processed histograms.

    Parameters
    ----------
    name : str
        A catalogue name (:data:`CATALOGUE_CONSTRAINTS`) or, for ``type`` structural_zero and
        linear, the user's own name.
    levels : tuple of str or "all"
    type : {'catalogue', 'structural_zero', 'linear', 'published'}
        Defaults to 'catalogue' for catalogue names. A ``published`` constraint's right-hand
        sides are published data, a value per unit and answer: ``published[level][name]``
        (shape units × answers) of the hierarchy's invariants, as a Noisy Measurement File
        holds its constraints.
    query : str
        Query expression (structural_zero, linear, published).
    answers : tuple of int or str, optional
        Which answers of the query: indices or labels (``"15-64"``; ``"female, 18+"`` for a
        query of several attributes); default all.
    sense : {'==', '>=', '<='}
        For linear and published constraints.
    rhs : number, list of numbers, or statistic reference
        For linear constraints.

    Raises
    ------
    SpecError
        On an unknown catalogue name or type, a missing query, bad answers, or a linear
        constraint without a valid sense or rhs.

    Examples
    --------
    A catalogue constraint takes only levels; your own constraints take a query:

    >>> Constraint("total_ge_households").to_dict()
    {'name': 'total_ge_households', 'levels': 'all'}
    >>> adults = Constraint("adults", ["state"], type="linear", query="marginal(votingage)",
    ...                     answers=[1], sense=">=", rhs=1)
    >>> adults.answers, adults.statistic_reference()
    ((1,), None)
    >>> Constraint("within_total", type="linear", query="total()", sense="<=",
    ...            rhs="tot").statistic_reference()
    ('tot', None)
    >>> Constraint("adults", type="linear", query="marginal(votingage)", sense="=", rhs=1)
    Traceback (most recent call last):
    ...
    invariants.errors.SpecError: linear constraint 'adults' needs sense in (...), not '='

    Bounds published per unit (the data under the constraint's name at each level):

    >>> lb = Constraint("hhgq_lb", type="published", query="marginal(hhgq)", sense=">=")
    >>> lb.to_dict()["type"], lb.sense, lb.statistic_reference()
    ('published', '>=', None)
    """

    name: str
    levels: tuple[str, ...] | str = "all"
    type: str = "catalogue"
    query: str | None = None
    answers: tuple[int | str, ...] | None = None
    sense: str | None = None
    rhs: Any = None
    source: str | None = field(default=None, compare=False, repr=False)
    line: int | None = field(default=None, compare=False, repr=False)

    def __post_init__(self):
        where = _where(self.source, self.line)
        if not isinstance(self.name, str) or not self.name:
            raise SpecError(f"{where}every constraint needs a name")
        if self.type not in _KINDS:
            raise SpecError(f"{where}constraint {self.name!r} has unknown type {self.type!r}; "
                            f"types are {list(_KINDS)}")
        object.__setattr__(self, "levels", _levels(self.levels, where, self.name))
        if self.type == "catalogue":
            if self.name not in CATALOGUE_CONSTRAINTS:
                raise SpecError(
                    f"{where}unknown constraint {self.name!r}; catalogue constraints are "
                    f"{sorted(CATALOGUE_CONSTRAINTS)} — for your own constraint set type = "
                    "\"linear\" or \"structural_zero\" with a query")
            if any(v is not None for v in (self.query, self.answers, self.sense, self.rhs)):
                raise SpecError(f"{where}catalogue constraint {self.name!r} takes only levels")
            return
        if not isinstance(self.query, str) or not self.query.strip():
            raise SpecError(f"{where}constraint {self.name!r} ({self.type}) needs a query "
                            "expression, e.g. query = \"marginal(hhgq)\"")
        object.__setattr__(self, "answers", _answer_list(self.answers, where,
                                                         f"constraint {self.name!r}"))
        if self.type == "structural_zero":
            if self.sense is not None or self.rhs is not None:
                raise SpecError(f"{where}structural zero {self.name!r} takes no sense or rhs")
            return
        if self.sense not in SENSES:
            raise SpecError(f"{where}{self.type} constraint {self.name!r} needs sense in "
                            f"{SENSES}, not {self.sense!r}")
        if self.type == "published":
            if self.rhs is not None:
                raise SpecError(f"{where}published constraint {self.name!r} takes no rhs: its "
                                "right-hand sides are the data published under its name")
            return
        rhs = self.rhs
        if isinstance(rhs, bool) or rhs is None:
            raise SpecError(f"{where}linear constraint {self.name!r} needs rhs: a number, a list "
                            "of numbers, or a statistic such as \"tot\" or \"gqhh[0]\"")
        if isinstance(rhs, str):
            if not _STAT_REF.match(rhs):
                raise SpecError(f"{where}linear constraint {self.name!r}: rhs {rhs!r} is not a "
                                "number or a statistic reference (tot, gqhh, gqhh[i])")
        elif isinstance(rhs, (list, tuple)):
            if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in rhs):
                raise SpecError(f"{where}linear constraint {self.name!r}: rhs list must hold "
                                "numbers")
            _check_finite(list(rhs), "rhs", f"constraint {self.name!r}", self.source, self.line)
            object.__setattr__(self, "rhs", tuple(rhs))
        elif not isinstance(rhs, (int, float)):
            raise SpecError(f"{where}linear constraint {self.name!r}: bad rhs {rhs!r}")
        else:
            _check_finite(rhs, "rhs", f"constraint {self.name!r}", self.source, self.line)

    def statistic_reference(self) -> tuple[str, int | None] | None:
        """``(statistic, index)`` when ``rhs`` names a published statistic."""
        if isinstance(self.rhs, str):
            m = _STAT_REF.match(self.rhs)
            return m.group(1), (int(m.group(2)) if m.group(2) is not None else None)
        return None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name,
                               "levels": self.levels if self.levels == "all" else list(self.levels)}
        if self.type != "catalogue":
            out["type"] = self.type
            out["query"] = self.query
            if self.answers is not None:
                out["answers"] = list(self.answers)
        if self.type == "published":
            out["sense"] = self.sense
        if self.type == "linear":
            out["sense"] = self.sense
            out["rhs"] = list(self.rhs) if isinstance(self.rhs, tuple) else self.rhs
        return out


def _check_finite(value: Any, key: str, owner: str, source: str | None,
                  line: int | None) -> None:
    """Raise a SpecError if ``value`` is, or a list of it holds, a NaN or infinite float.

    ``owner`` names the constraint; ``line`` is where the key is written, when known. (The other
    keys of a spec hold names, levels, booleans or integers, whose own checks refuse a float.)
    """
    if isinstance(value, float) and not math.isfinite(value):
        fix = ("write a finite bound, or drop the constraint (an infinite bound constrains "
               "nothing)" if key == "rhs" else "write a finite number")
        raise SpecError(f"{_where(source, line)}{owner}: {key} = {value} is not a finite "
                        f"number; every number in a spec must be finite: {fix}")
    if isinstance(value, (list, tuple)):
        for item in value:
            _check_finite(item, key, owner, source, line)
