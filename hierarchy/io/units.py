"""Records and their units: persons against housing units and facilities, records to leaves.

Every person lives in a bottom-level unit (a county, a block) that has a housing unit or a
facility of their type, and every occupied unit holds at least one person: :func:`check_units`
on the records, or :func:`hierarchy.io.check_tabulated_units` on their tabulation. Messages name
the unit, the type and the rows (only the rule in their public part). :func:`leaf_index` finds
each record's bottom-level unit in a prebuilt geography.

Examples
--------
>>> import pyarrow as pa
>>> persons = pa.table({"county": ["001", "003"], "hhgq": [0, 1]})
>>> check_units(persons, pa.table({"county": ["001", "003"], "hhgq": [0, 1]}), ["county"],
...             "hhgq", 2) is None
True
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import pyarrow as pa
import scipy.sparse as sp

from hierarchy.errors import ConfidentialDataError
from hierarchy.geography import encode_column
from hierarchy.io.codes import _data_error, _where

__all__ = ["check_units", "attribute_totals", "leaf_index"]


def check_units(persons: pa.Table, units: pa.Table, geocode_names: Sequence[str],
                unit_attribute: str, n_types: int, persons_where: str = "persons",
                units_where: str = "units") -> None:
    """Every person lives in a bottom-level unit with ≥ 1 unit of their type, and every unit
    type present has at least as many persons as units (each occupied unit holds ≥ 1 person).

    Parameters
    ----------
    persons, units : pyarrow.Table
        Normalised tables (:attr:`Microdata.persons`, :attr:`Microdata.units`).
    geocode_names : sequence of str
        The geocode columns, top non-root level first.
    unit_attribute : str
    n_types : int
        The number of levels of ``unit_attribute``.
    persons_where, units_where : str
        The records' sources, for the message.

    Raises
    ------
    HierarchyError
        Naming the unit, the type and the rows of the offending records.

    Examples
    --------
    Two housing units (type 0) in county 001 but only one person of that type there:

    >>> persons = pa.table({"county": ["001", "003"], "hhgq": [0, 1]})
    >>> units = pa.table({"county": ["001", "001", "003"], "hhgq": [0, 0, 1]})
    >>> check_units(persons, units, ["county"], "hhgq", 2)
    Traceback (most recent call last):
    ...
    hierarchy.errors.ConfidentialDataError: units: county '001' has 2 unit(s) of hhgq type 0 (rows
    0, 1) but only 1 person(s) of that type; every occupied unit holds at least one person — remove
    vacant units from the units table (1 county/type pair(s) affected)
    >>> check_units(persons, units.slice(1), ["county"], "hhgq", 2) is None
    True
    """
    _check_units(persons, units, geocode_names, unit_attribute, n_types, persons_where,
                 units_where)


def _check_units(persons, units, geocode_names, unit_attribute, n_types, persons_where,
                 units_where) -> None:
    from hierarchy.geography import Geography

    levels = ["(root)"] + list(geocode_names)
    geo, (p_leaf, u_leaf) = Geography.from_columns(
        levels, [[persons.column(c) for c in geocode_names],
                 [units.column(c) for c in geocode_names]])
    n = geo.n_units(-1)

    def count(leaf, table):              # records per (unit, type); types are checked codes
        key = np.asarray(leaf, dtype=np.int64) * n_types
        key += table.column(unit_attribute).to_numpy().astype(np.int64)
        return np.bincount(key, minlength=n * n_types).reshape(n, n_types)

    people, housing = count(p_leaf, persons), count(u_leaf, units)
    _raise_unit_conflicts(people, housing, geo, persons, units, geocode_names, unit_attribute,
                          persons_where, units_where, (p_leaf, u_leaf))


def attribute_totals(schema, counts: np.ndarray, attribute: str) -> np.ndarray:
    """Per unit, the persons of each value of ``attribute``: ``marginal(schema, attribute)``'s
    answers on ``counts`` (units × cells), dense — summed over the cells' axes in one pass (the
    marginal's sparse product first copies the nonzeros: 0.2 s of a 20,000-block part's 0.85 s
    of tabulation) — or a scipy sparse matrix (its nonzeros counted per unit and value).

    Examples
    --------
    >>> from hierarchy.queries import marginal
    >>> from hierarchy.schema import Schema, Attribute
    >>> s = Schema((Attribute("a", ("x", "y")), Attribute("b", ("u", "v", "w")),
    ...             Attribute("c", ("p", "q"))))
    >>> counts = np.random.default_rng(0).integers(0, 5, size=(4, s.size))
    >>> all(np.array_equal(attribute_totals(s, counts, name), marginal(s, name).answer(counts))
    ...     for name in ("a", "b", "c"))
    True
    >>> attribute_totals(s, counts, "b").shape
    (4, 3)
    >>> import scipy.sparse as sp
    >>> bool((attribute_totals(s, sp.csr_matrix(counts), "b") == attribute_totals(s, counts, "b")
    ...       ).all())
    True
    """
    if sp.issparse(counts):     # already sparse: the marginal's own product
        from hierarchy.queries import marginal

        return marginal(schema, attribute).answer(counts)
    axis = schema.names.index(attribute)
    shape = schema.shape
    before, after = int(np.prod(shape[:axis])), int(np.prod(shape[axis + 1:]))
    cube = np.asarray(counts).reshape(len(counts), before, shape[axis], after)
    return cube.sum(axis=3).sum(axis=1)



def _raise_unit_conflicts(people, housing, geo, persons, units, geocode_names, unit_attribute,
                          persons_where, units_where, leaves) -> None:
    homeless = (people > 0) & (housing == 0)
    empty = housing > people
    if not (homeless.any() or empty.any()):
        return
    if leaves is None:  # error path only: locate the records
        leaves = (leaf_index(geo, [persons.column(c) for c in geocode_names]),
                  leaf_index(geo, [units.column(c) for c in geocode_names]))
    p_leaf, u_leaf = leaves
    unit = geocode_names[-1]
    if homeless.any():
        leaf, typ = np.argwhere(homeless)[0]
        p_type = persons.column(unit_attribute).to_numpy()
        rows = np.flatnonzero((p_leaf == leaf) & (p_type == typ))
        n_bad = int(people[homeless].sum())
        fix = (f"Add the missing housing units / facilities to the units table or correct the "
               f"persons' {unit_attribute} or geocodes")
        raise _data_error(
            persons_where, "persons",
            f"{n_bad} person(s) live in a {unit} with no unit of their {unit_attribute} type in "
            f"{units_where}; e.g. {unit} {geo.geocodes[-1][leaf]!r}, {unit_attribute} {typ}, "
            f"{_where(rows, _is_csv(persons_where))}. {fix}",
            f"some persons live in a {unit} with no unit of their {unit_attribute} type in the "
            f"units data. {fix}")
    leaf, typ = np.argwhere(empty)[0]
    u_type = units.column(unit_attribute).to_numpy()
    rows = np.flatnonzero((u_leaf == leaf) & (u_type == typ))
    fix = ("every occupied unit holds at least one person — remove vacant units from the units "
           "table")
    raise _data_error(
        units_where, "units",
        f"{unit} {geo.geocodes[-1][leaf]!r} has {housing[leaf, typ]} unit(s) of "
        f"{unit_attribute} type {typ} ({_where(rows, _is_csv(units_where))}) but only "
        f"{people[leaf, typ]} person(s) of that type; {fix} ({int(empty.sum())} {unit}/type "
        f"pair(s) affected)",
        f"some {unit} has more units of an {unit_attribute} type than persons of that type "
        f"in the persons data; {fix}")


def _is_csv(where: str) -> bool:
    """Whether a source named ``where`` is a CSV file (so rows also get CSV line numbers)."""
    return ".csv" in where.lower()


def leaf_index(geography: Any, cols: Sequence[Any]) -> np.ndarray:
    """Bottom-level unit of every record in a prebuilt geography, checking every level's code.

    Parameters
    ----------
    geography : Geography
    cols : sequence of columns
        One geocode column per non-root level, top first.

    Returns
    -------
    numpy.ndarray
        The index of each record's unit at the bottom level.

    Raises
    ------
    HierarchyError
        A geocode not in the geography, or a unit not inside the unit above it (naming the row).

    Examples
    --------
    >>> from hierarchy.geography import Geography
    >>> geo, _ = Geography.from_columns(["nation", "state"], [[["A", "B", "C"]]])
    >>> leaf_index(geo, [["C", "A"]]).tolist()
    [2, 0]
    >>> leaf_index(geo, [["D"]])
    Traceback (most recent call last):
    ...
    hierarchy.errors.ConfidentialDataError: state geocode(s) ['D'] are not in the geography
    """
    import pandas as pd

    depth = geography.depth
    if depth == 1:
        return np.zeros(len(cols[0]) if cols else 0, dtype=np.int64)
    prev = None
    for lv in range(1, depth):
        codes, dictionary = encode_column(cols[lv - 1], name=geography.levels[lv])
        pos = pd.Index(geography.geocodes[lv]).get_indexer(dictionary)
        name, above = geography.levels[lv], geography.levels[lv - 1]
        if (pos[np.unique(codes)] < 0).any():
            unknown = dictionary[np.unique(codes)][pos[np.unique(codes)] < 0][:5].tolist()
            raise ConfidentialDataError(f"{name} geocode(s) {unknown} are not in the geography",
                                        public=f"some records' {name} geocodes are not in the "
                                               f"geography")
        idx = pos[codes]
        if prev is not None and np.any(geography.parents[lv][idx] != prev):
            row = int(np.flatnonzero(geography.parents[lv][idx] != prev)[0])
            raise ConfidentialDataError(
                f"row {row}: {name} {geography.geocodes[lv][idx[row]]!r} is not inside {above} "
                f"{geography.geocodes[lv - 1][prev[row]]!r}",
                public=f"some records' {name} is not inside their {above} in the geography")
        prev = idx
    return prev
