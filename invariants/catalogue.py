"""The invariant catalogue: every published statistic, invariant and catalogue constraint, once.

Three kinds of entries (docs/spec.md states each):

* a **statistic** (:data:`STATISTICS`) is an exact count of the confidential data that may be
  published: ``tot`` (persons per unit) and ``gqhh`` (occupied housing units and group-quarters
  facilities per unit, by type). Each says how it is computed from the truth — a function of
  :mod:`hierarchy.measurement`, which computes what is published without knowing this catalogue —
  and the shape of its data.
* an **invariant** (:data:`INVARIANTS`) declares a statistic published at some levels, and may
  compile into rows of its own (``tot``: the unit's total is exact).
* a **catalogue constraint** (:data:`CONSTRAINTS`) restricts post-processed histograms using a
  published statistic (``hhgq_total_lb``: each occupied unit holds at least one person).

A :class:`~invariants.spec.Spec` names entries of this catalogue;
:func:`statistics_to_publish` says what a spec needs measured exactly, :func:`needed_statistics`
what each level's constraints read, and each entry's ``rows`` how it compiles
(:func:`invariants.compile.compile_spec` stacks them).

This module is the bottom of :mod:`invariants` (it imports only :mod:`hierarchy`): the spec's
items check their names against it and the compiler reads it. It therefore names no spec class
— not even for annotations, which would close an import circle — and knows a spec by what it
reads of one, :class:`SpecView`.

Examples
--------
>>> sorted(INVARIANTS), sorted(CONSTRAINTS)
(['gqhh_tot', 'gqhh_vect', 'tot'], ['hhgq_total_lb', 'hhgq_total_ub', 'total_ge_households'])
>>> INVARIANTS["gqhh_vect"].statistic, CONSTRAINTS["hhgq_total_lb"].needs
('gqhh', ('gqhh',))
>>> from invariants.spec import Spec
>>> statistics_to_publish(Spec.e2e(["nation", "state", "county"]), ["nation", "state", "county"])
{'tot': ['nation', 'state'], 'gqhh': ['county']}
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping, Protocol, Sequence

import numpy as np
import scipy.sparse as sp

from hierarchy.measurement import PUBLISHABLE, spec_statistics
from hierarchy.queries import marginal, total
from hierarchy.schema import Schema

__all__ = ["Statistic", "Rows", "CatalogueInvariant", "CatalogueConstraint", "STATISTICS",
           "INVARIANTS", "CONSTRAINTS", "statistics_to_publish", "needed_statistics", "SpecView"]


class SpecView(Protocol):
    """What the catalogue and the compiler read of a spec; :class:`invariants.spec.Spec` is one.

    The items are :class:`invariants.items.Invariant` and :class:`invariants.items.Constraint`.
    A protocol, not the class, because the spec sits above this module (see the module
    docstring).

    Examples
    --------
    >>> from invariants.spec import Spec
    >>> spec: SpecView = Spec.e2e(["nation", "state"])
    >>> spec.unit_attribute, spec.household_level, spec.levels_of(spec.invariants[1],
    ...                                                           ["nation", "state"])
    ('hhgq', 0, ('state',))
    """

    @property
    def invariants(self) -> Sequence[Any]: ...
    @property
    def constraints(self) -> Sequence[Any]: ...
    @property
    def unit_attribute(self) -> str: ...
    @property
    def household_level(self) -> int: ...
    @property
    def imply_upward(self) -> bool: ...

    def levels_of(self, item: Any, all_levels: Sequence[str]) -> tuple[str, ...]: ...
    def invariant_levels(self, statistic: str, all_levels: Sequence[str]) -> tuple[str, ...]: ...
    def check_levels(self, all_levels: Sequence[str]) -> None: ...


@dataclass(frozen=True)
class Statistic:
    """An exact statistic that may be published as an invariant.

    Attributes
    ----------
    name : str
        How specs and ``measure(..., publish=…)`` name it.
    meaning : str
    label : str
        A few words for messages (``"the total"``).
    per_type : bool
        Its data is shaped (units, types of the spec's unit attribute) instead of (units,).
    declared_by : str
        The invariant that publishes it unit by unit (named in messages about its data).
    summable : bool
        A level without it may use the sum of a lower level where it is published.
    compute : callable
        ``compute(truth, level) → int64 array``: how it is computed from the confidential
        :class:`~hierarchy.histograms.Hierarchy` (:data:`hierarchy.measurement.PUBLISHABLE`).

    Examples
    --------
    >>> STATISTICS["tot"].shape(4, 8), STATISTICS["gqhh"].shape(4, 8)
    ((4,), (4, 8))
    """

    name: str
    meaning: str
    label: str
    per_type: bool
    declared_by: str
    summable: bool
    compute: Callable[[Any, str], np.ndarray]

    def shape(self, n_units: int, n_types: int | None) -> tuple[int, ...]:
        """The shape of its data at a level of ``n_units`` units."""
        return (n_units, n_types) if self.per_type else (n_units,)


@dataclass(frozen=True)
class Rows:
    """Constraint rows ``lower ≤ matrix · x_u ≤ upper`` for each unit ``u`` of a level.

    Attributes
    ----------
    matrix : sparse matrix, shape (rows, cells)
        Shared by every unit of the level.
    lower, upper : float64 arrays, shape (units, rows)
        ``-inf`` / ``+inf`` where a side is free.
    labels : list of str
        ``"name: answer"`` of each row, for messages.

    Examples
    --------
    The rows of the ``tot`` invariant at a level of two units, on a 4-cell schema:

    >>> from hierarchy.schema import Attribute, Schema
    >>> from invariants.spec import Spec
    >>> schema = Schema((Attribute("sex", ("male", "female")),
    ...                  Attribute("age", ("child", "adult"))))
    >>> rows = INVARIANTS["tot"].rows(schema, Spec(), {"tot": np.array([3, 5])})
    >>> rows.matrix.toarray().tolist(), rows.labels
    ([[1, 1, 1, 1]], ['tot: total'])
    >>> rows.lower.ravel().tolist(), rows.upper.ravel().tolist()     # equalities: lower = upper
    ([3.0, 5.0], [3.0, 5.0])
    """

    matrix: sp.spmatrix
    lower: np.ndarray
    upper: np.ndarray
    labels: list[str]


#: ``rows(schema, spec, stats)``: one level's rows from the level's statistics.
RowsFunction = Callable[[Schema, SpecView, Mapping[str, np.ndarray]], Rows]


@dataclass(frozen=True)
class CatalogueInvariant:
    """An invariant: a statistic published at the levels a spec lists.

    Attributes
    ----------
    name, statistic, meaning : str
    rows : callable or None
        How it compiles at a level where it is declared; ``None`` when it only publishes data
        (which catalogue constraints then use).

    Examples
    --------
    >>> INVARIANTS["tot"].statistic, INVARIANTS["tot"].needs
    ('tot', ('tot',))
    >>> gqhh_tot = INVARIANTS["gqhh_tot"]        # publishes data, compiles into no rows
    >>> gqhh_tot.statistic, gqhh_tot.needs, gqhh_tot.rows
    ('gqhh', (), None)
    """

    name: str
    statistic: str
    meaning: str
    rows: RowsFunction | None = None

    @property
    def needs(self) -> tuple[str, ...]:
        """Statistics its rows read at its levels."""
        return (self.statistic,) if self.rows is not None else ()


@dataclass(frozen=True)
class CatalogueConstraint:
    """A catalogue constraint: rows built from published statistics.

    Attributes
    ----------
    name, meaning : str
    needs : tuple of str
        Statistics it needs at each of its levels (published there or, when summable, below).
    rows : callable
        How it compiles at a level.

    Examples
    --------
    Upper bounds on the persons of each unit type, in one unit with 10 persons, 2 households
    and 1 facility of type 7:

    >>> from hierarchy.schema import E2E_1940
    >>> from invariants.spec import Spec
    >>> ub = CONSTRAINTS["hhgq_total_ub"]
    >>> ub.needs
    ('gqhh',)
    >>> gqhh = np.array([[2, 0, 0, 0, 0, 0, 0, 1]])
    >>> stats = {"gqhh": gqhh, "tot": np.array([10])}
    >>> rows = ub.rows(E2E_1940, Spec.e2e(["nation", "state"]), stats)
    >>> rows.upper.tolist(), rows.labels[0]
    ([[9.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 8.0]], 'hhgq_total_ub: hhgq=household')
    """

    name: str
    meaning: str
    needs: tuple[str, ...]
    rows: RowsFunction


# -- how each entry compiles --------------------------------------------------------------------

def _tot_rows(schema: Schema, spec: SpecView, stats: Mapping[str, np.ndarray]) -> Rows:
    t = stats["tot"].astype(np.float64)[:, None]
    return Rows(total(schema).matrix, t, t.copy(), ["tot: total"])


def _total_ge_households_rows(schema: Schema, spec: SpecView, stats: Mapping[str, np.ndarray]
                              ) -> Rows:
    households = stats["gqhh"][:, spec.household_level:spec.household_level + 1]
    lower = households.astype(np.float64)
    return Rows(total(schema).matrix, lower, np.full_like(lower, np.inf),
                ["total_ge_households: total"])


def _by_type(schema: Schema, spec: SpecView, name: str):
    q = marginal(schema, spec.unit_attribute)
    return q.matrix, [f"{name}: {spec.unit_attribute}={lab[0]}" for lab in q.answer_labels]


def _hhgq_total_lb_rows(schema: Schema, spec: SpecView, stats: Mapping[str, np.ndarray]) -> Rows:
    matrix, labels = _by_type(schema, spec, "hhgq_total_lb")
    lower = stats["gqhh"].astype(np.float64)
    return Rows(matrix, lower, np.full_like(lower, np.inf), labels)


def _hhgq_total_ub_rows(schema: Schema, spec: SpecView, stats: Mapping[str, np.ndarray]) -> Rows:
    matrix, labels = _by_type(schema, spec, "hhgq_total_ub")
    gqhh = stats["gqhh"]
    upper = np.full(gqhh.shape, np.inf)
    if "tot" in stats:          # where the total is invariant too
        others = gqhh.sum(axis=1, keepdims=True) - gqhh
        upper = (stats["tot"][:, None] - others).astype(np.float64)
    upper[gqhh == 0] = 0.0
    return Rows(matrix, np.full_like(upper, -np.inf), upper, labels)


# -- the catalogue ------------------------------------------------------------------------------

#: Statistic name → :class:`Statistic`.
STATISTICS: dict[str, Statistic] = {
    "tot": Statistic("tot", "persons per unit", "the total", False, "tot", False,
                     PUBLISHABLE["tot"]),
    "gqhh": Statistic("gqhh", "occupied housing units and group-quarters facilities of each "
                              "type per unit", "units by type", True, "gqhh_vect", True,
                      PUBLISHABLE["gqhh"]),
}

#: Invariant name → :class:`CatalogueInvariant`.
INVARIANTS: dict[str, CatalogueInvariant] = {
    "tot": CatalogueInvariant("tot", "tot", "total persons of the unit is exact", _tot_rows),
    "gqhh_vect": CatalogueInvariant("gqhh_vect", "gqhh", "numbers of occupied households and "
                                    "group-quarters facilities of each type are exact data"),
    "gqhh_tot": CatalogueInvariant("gqhh_tot", "gqhh", "total number of occupied housing units "
                                   "and facilities is exact data"),
}

#: Catalogue constraint name → :class:`CatalogueConstraint`.
CONSTRAINTS: dict[str, CatalogueConstraint] = {
    "hhgq_total_lb": CatalogueConstraint(
        "hhgq_total_lb", "persons of each unit type ≥ units of that type (each occupied unit "
        "holds at least one person)", ("gqhh",), _hhgq_total_lb_rows),
    "hhgq_total_ub": CatalogueConstraint(
        "hhgq_total_ub", "persons of type g ≤ total − units of every other type where the "
        "total is invariant; 0 where there is no unit of type g", ("gqhh",),
        _hhgq_total_ub_rows),
    "total_ge_households": CatalogueConstraint(
        "total_ge_households", "total persons ≥ occupied households", ("gqhh",),
        _total_ge_households_rows),
}


def statistics_to_publish(spec: SpecView, levels: Sequence[str]) -> dict[str, list[str]]:
    """The exact statistics a spec's invariants declare, with their levels: the ``publish``
    argument of :func:`hierarchy.measurement.measure`.

    Parameters
    ----------
    spec : Spec
    levels : sequence of str
        The geography's levels, root first.

    Returns
    -------
    dict
        Statistic name → levels (in geography order); statistics at no level are left out.

    Examples
    --------
    >>> from invariants.spec import Invariant, Spec
    >>> statistics_to_publish(Spec(invariants=(Invariant("gqhh_tot", "all"),)), ["a", "b"])
    {'gqhh': ['a', 'b']}
    """
    return spec_statistics(spec, levels)      # one loop over the statistics (STATISTICS and
    # hierarchy's PUBLISHABLE name the same ones; tests/test_config checks they stay in step)


def needed_statistics(spec: SpecView, levels: Sequence[str]) -> dict[str, set[str]]:
    """The statistics each level's rows read: those of the invariants that compile into rows
    there, of the catalogue constraints there, and of linear constraints whose ``rhs`` names
    a statistic.

    Examples
    --------
    >>> from invariants.spec import Spec
    >>> need = needed_statistics(Spec.e2e(["nation", "state", "county"]),
    ...                          ["nation", "state", "county"])
    >>> sorted(need["nation"]), sorted(need["county"])
    (['gqhh', 'tot'], ['gqhh'])
    """
    need: dict[str, set[str]] = {lv: set() for lv in levels}
    for inv in spec.invariants:
        if inv.statistic is None:       # a query invariant reads its own published answers
            continue
        for lv in spec.levels_of(inv, levels):
            need[lv].update(INVARIANTS[inv.name].needs)
    for c in spec.constraints:
        if c.type == "catalogue":
            stats = CONSTRAINTS[c.name].needs
        elif c.type == "linear" and c.statistic_reference():
            stats = (c.statistic_reference()[0],)
        else:
            continue
        for lv in spec.levels_of(c, levels):
            need[lv].update(stats)
    return need
