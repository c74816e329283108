"""Reading real microdata: CSV or parquet, a column mapping, and validation that names rows.

Nothing is silently dropped: a record with a missing geocode, an unknown attribute value, or a
person in a unit with no housing unit / facility of their type stops the read with an error that
names the file, the rows and the fix.

Examples
--------
>>> import tempfile, os
>>> from hierarchy.schema import E2E_1940
>>> d = tempfile.mkdtemp()
>>> path = os.path.join(d, "people.csv")
>>> _ = open(path, "w").write("st,co,gq,age18,hisp,race\\n01,01001,0,1,0,white\\n"
...                           "01,01001,0,0,0,2\\n")
>>> data = read_microdata(path, schema=E2E_1940, levels=["nation", "state", "county"],
...                       columns={"state": "st", "county": "co", "hhgq": "gq",
...                                "votingage": "age18", "hispanic": "hisp", "cenrace": "race"})
>>> data.persons.column("cenrace").to_pylist()
[0, 2]
>>> bad = os.path.join(d, "bad.csv")
>>> _ = open(bad, "w").write("st,co,gq,age18,hisp,race\\n01,01001,0,1,0,purple\\n")
>>> read_microdata(bad, schema=E2E_1940, levels=["nation", "state", "county"],
...                columns={"state": "st", "county": "co", "hhgq": "gq", "votingage": "age18",
...                         "hispanic": "hisp", "cenrace": "race"})
Traceback (most recent call last):
...
hierarchy.errors.HierarchyError: .../bad.csv: column 'race' (attribute 'cenrace'): 1 value(s) are not levels of the attribute: 'purple' (row 0 (CSV line 2)). Levels are ['white', 'black', 'American Indian', 'Chinese', 'Japanese', 'other'] or codes 0..5; fix the data or map the values with values={'cenrace': {...}}
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from hierarchy.errors import HierarchyError
from hierarchy.storage import special_file_kind
from hierarchy.schema import Schema

__all__ = ["read_table", "read_microdata", "Microdata", "check_units", "check_tabulated_units"]


def read_table(path: str | os.PathLike) -> pa.Table:
    """Read a CSV (``.csv``, ``.csv.gz``) or parquet (``.parquet``, ``.pq``) file.

    Geocode-like text columns stay text (leading zeros are kept): CSV columns are read as
    strings and converted per attribute later. A parquet path may also be a directory holding a
    partitioned parquet dataset.

    Raises
    ------
    HierarchyError
        If the path does not exist, is a special file (a named pipe, device or socket, which
        could block the read forever) or a directory where a file is needed, has an unknown
        suffix, or cannot be parsed.

    Examples
    --------
    >>> import tempfile
    >>> d = Path(tempfile.mkdtemp())
    >>> _ = (d / "people.csv").write_text("state,county,cenrace\\n01,01001,2\\n")
    >>> table = read_table(d / "people.csv")
    >>> table.column("county").to_pylist(), table.column("cenrace").to_pylist()
    (['01001'], ['2'])
    >>> read_table(d / "people.xlsx")
    Traceback (most recent call last):
    ...
    hierarchy.errors.HierarchyError: .../people.xlsx does not exist
    >>> _ = (d / "people.xlsx").write_text("")
    >>> read_table(d / "people.xlsx")
    Traceback (most recent call last):
    ...
    hierarchy.errors.HierarchyError: .../people.xlsx: unknown file type; use .csv, .csv.gz, .parquet or .pq
    """
    path = Path(path)
    if not path.exists():
        raise HierarchyError(f"{path} does not exist")
    name = path.name.lower()
    dataset = path.is_dir() and name.endswith((".parquet", ".pq"))
    kind = None if dataset else special_file_kind(path)
    if kind is not None:
        raise HierarchyError(f"{path} is not a regular file: it is {kind}; give the "
                             "path of a CSV or parquet file on disk (reading a pipe or device "
                             "could block forever)")
    try:
        if name.endswith((".parquet", ".pq")):
            return pq.read_table(path)
        if name.endswith((".csv", ".csv.gz", ".txt")):
            first = pacsv.open_csv(path).schema
            opts = pacsv.ConvertOptions(column_types={f.name: pa.string() for f in first},
                                        strings_can_be_null=True, auto_dict_encode=False)
            return pacsv.read_csv(path, convert_options=opts)
    except (pa.ArrowInvalid, OSError) as exc:
        raise HierarchyError(f"{path}: cannot be read: {exc}") from None
    raise HierarchyError(f"{path}: unknown file type; use .csv, .csv.gz, .parquet or .pq")


def _where(rows: np.ndarray, csv: bool) -> str:
    """'row 3 (CSV line 5)' or 'rows 3, 8, … (CSV lines 5, 10, …)': rows are 0-based data rows."""
    more = " …" if rows.size > 5 else ""
    shown = ", ".join(str(int(r)) for r in rows[:5]) + more
    text = f"row {shown}" if rows.size == 1 else f"rows {shown}"
    if csv:
        lines = ", ".join(str(int(r) + 2) for r in rows[:5]) + more
        text += f" (CSV line{'s' if rows.size > 1 else ''} {lines})"
    return text


def _attribute_codes(column: pa.ChunkedArray, attr, value_map: Mapping[Any, Any] | None,
                     where: str, source_name: str, csv: bool) -> pa.Array:
    """int8/int16 codes of an attribute column given as codes, digit strings or labels."""
    col = column
    if col.null_count:
        rows = np.flatnonzero(col.is_null().to_numpy(zero_copy_only=False))
        raise HierarchyError(f"{where}: column {source_name!r} (attribute {attr.name!r}) has "
                             f"{rows.size} missing value(s) at {_where(rows, csv)}; every "
                             "person needs a value for every attribute")
    dtype = np.int8 if attr.size <= 127 else np.int32
    if pa.types.is_integer(col.type) and not value_map:
        bounds = pc.min_max(col).as_py() if len(col) else {"min": 0, "max": 0}
        if bounds["min"] < 0 or bounds["max"] >= attr.size:  # error path: find the rows
            arr = col.to_numpy()
            rows = np.flatnonzero((arr < 0) | (arr >= attr.size))
            raise HierarchyError(
                f"{where}: column {source_name!r} (attribute {attr.name!r}): {rows.size} "
                f"value(s) outside 0..{attr.size - 1}, e.g. {arr[rows[0]]} at "
                f"{_where(rows, csv)}; fix the data or map the values with "
                f"values={{{attr.name!r}: {{...}}}}")
        target = pa.from_numpy_dtype(dtype)
        return col if col.type == target else col.cast(target)
    if isinstance(col, pa.ChunkedArray):  # labels or digit strings: one array to encode
        col = col.combine_chunks()
    encoded = pc.dictionary_encode(col.cast(pa.string()) if not pa.types.is_dictionary(col.type)
                                   else col)
    dictionary = encoded.dictionary.cast(pa.string()).to_pylist()
    lookup = np.empty(len(dictionary), dtype=np.int64)
    unknown = []
    for i, value in enumerate(dictionary):
        v = value.strip()
        if value_map:
            mapped = value_map.get(v, value_map.get(_maybe_int(v)))
            if mapped is None:
                unknown.append(i)
                continue
            v = mapped
        try:
            lookup[i] = attr.code(v)
        except HierarchyError:
            unknown.append(i)
    if unknown:
        idx = encoded.indices.to_numpy()
        rows = np.flatnonzero(np.isin(idx, unknown))
        vals = ", ".join(f"{dictionary[u]!r}" for u in unknown[:5])
        raise HierarchyError(
            f"{where}: column {source_name!r} (attribute {attr.name!r}): {rows.size} value(s) are "
            f"not levels of the attribute: {vals} ({_where(rows, csv)}). Levels are "
            f"{list(attr.labels)} or codes 0..{attr.size - 1}; fix the data or map the values "
            f"with values={{{attr.name!r}: {{...}}}}")
    return pa.array(lookup[encoded.indices.to_numpy()].astype(dtype))


def _chunked(col: pa.Array | pa.ChunkedArray) -> pa.ChunkedArray:
    return col if isinstance(col, pa.ChunkedArray) else pa.chunked_array([col])


def _maybe_int(v: str) -> Any:
    try:
        return int(v)
    except ValueError:
        return v


def _normalise(table: pa.Table, *, names: Sequence[str], geocode_names: Sequence[str],
               schema: Schema, columns: Mapping[str, str], values: Mapping[str, Mapping],
               where: str, csv: bool) -> pa.Table:
    out = {}
    available = table.column_names
    for name in names:
        source = columns.get(name, name)
        if source not in available:
            raise HierarchyError(f"{where}: no column {source!r} for {name!r}; columns are "
                                 f"{available}. Map it with columns={{{name!r}: 'your_column'}}")
        col = table.column(source)
        if name in geocode_names:
            if col.null_count:
                rows = np.flatnonzero(col.is_null().to_numpy(zero_copy_only=False))
                raise HierarchyError(f"{where}: column {source!r} ({name} geocode) is missing at "
                                     f"{_where(rows, csv)}; every record needs a geocode "
                                     "at every level")
            if not pa.types.is_dictionary(col.type):
                col = pc.dictionary_encode(col.cast(pa.string()))
            col = _chunked(col).unify_dictionaries()
            # Blank geocodes: look at the dictionary (one entry per distinct code), and at the
            # records only when a blank entry exists.
            if col.num_chunks:
                dictionary = col.chunk(0).dictionary.cast(pa.string())
                blank = np.flatnonzero(np.asarray(pc.equal(pc.utf8_trim_whitespace(dictionary),
                                                           "").to_numpy(zero_copy_only=False)))
                if blank.size:
                    indices = np.concatenate([c.indices.to_numpy(zero_copy_only=False)
                                              for c in col.chunks])
                    rows = np.flatnonzero(np.isin(indices, blank))
                    if rows.size:
                        raise HierarchyError(f"{where}: column {source!r} ({name} geocode) is "
                                             f"empty at {_where(rows, csv)}")
            out[name] = col
        else:
            out[name] = _attribute_codes(col, schema.attribute(name), values.get(name), where,
                                         source, csv)
    return pa.table(out)


@dataclass(frozen=True)
class Microdata:
    """Normalised microdata: columns renamed to level and attribute names, codes as integers.

    Made by :func:`read_microdata`; ready for :func:`hierarchy.tabulation.tabulate`.

    Attributes
    ----------
    persons : pyarrow.Table
        A geocode column per non-root level (dictionary-encoded text), an integer code column
        per schema attribute.
    units : pyarrow.Table or None
        The same geocode columns and ``unit_attribute``, one row per housing unit / facility.
    levels : tuple of str
    unit_attribute : str or None
    persons_source, units_source : str
        Where the records came from (a path, or ``"table"``), for error messages.

    Examples
    --------
    >>> from hierarchy.schema import Schema, Attribute
    >>> s = Schema((Attribute("age", ("child", "adult")),))
    >>> data = read_microdata(pa.table({"county": ["001", "003"], "age": ["adult", "child"]}),
    ...                       schema=s, levels=["state", "county"])
    >>> data.persons.column("age").to_pylist(), data.levels, data.units
    ([1, 0], ('state', 'county'), None)
    """

    persons: pa.Table
    units: pa.Table | None
    levels: tuple[str, ...]
    unit_attribute: str | None
    persons_source: str = "persons"
    units_source: str | None = None


def read_microdata(persons: str | os.PathLike | pa.Table, *, schema: Schema,
                   levels: Sequence[str], columns: Mapping[str, str] | None = None,
                   values: Mapping[str, Mapping[Any, Any]] | None = None,
                   units: str | os.PathLike | pa.Table | None = None,
                   unit_attribute: str = "hhgq", check_units: bool = True) -> Microdata:
    """Read and validate persons (and optionally units) microdata.

    Parameters
    ----------
    persons, units : path or pyarrow.Table
        CSV or parquet. Units: one row per occupied housing unit or group-quarters facility.
    schema : Schema
    levels : sequence of str
        Geography levels, root first; each non-root level needs a geocode column.
    columns : mapping, optional
        Level or attribute name → column name in the files (default: the same name).
    values : mapping, optional
        Attribute → {value in the file: code or label}, for files with their own coding.
    unit_attribute : str
        The attribute typing units (``hhgq``).
    check_units : bool
        Check persons against units here. A caller that tabulates anyway can pass ``False`` and
        call :func:`check_tabulated_units` on the result, which costs nothing extra.

    Returns
    -------
    Microdata

    Raises
    ------
    HierarchyError
        Naming the file, column, rows and fix: missing columns, missing geocodes, unknown
        attribute values, persons in a unit with no housing unit or facility of their type, or
        units without a person of their type.

    Examples
    --------
    Files with their own column names and coding (tables here; paths work the same way):

    >>> from hierarchy.schema import Schema, Attribute
    >>> s = Schema((Attribute("hhgq", ("household", "gq")), Attribute("age", ("child", "adult"))))
    >>> persons = pa.table({"co": ["001", "001", "003"], "hh": ["H", "H", "G"],
    ...                     "age": ["adult", "child", "adult"]})
    >>> options = dict(schema=s, levels=["state", "county"],
    ...                columns={"county": "co", "hhgq": "hh"},
    ...                values={"hhgq": {"H": "household", "G": "gq"}})
    >>> read_microdata(persons, **options).persons.to_pydict()
    {'county': ['001', '001', '003'], 'hhgq': [0, 0, 1], 'age': [1, 0, 1]}

    The person in county 003 lives in group quarters, which the units table lacks:

    >>> read_microdata(persons, units=pa.table({"co": ["001", "003"], "hh": ["H", "H"]}),
    ...                **options)
    Traceback (most recent call last):
    ...
    hierarchy.errors.HierarchyError: persons table: 1 person(s) live in a county with no unit of their hhgq type in units table; e.g. county '003', hhgq 1, row 2. Add the missing housing units / facilities to the units table or correct the persons' hhgq or geocodes
    """
    columns = dict(columns or {})
    values = dict(values or {})
    geocode_names = list(levels[1:])
    unknown = set(columns) - set(geocode_names) - set(schema.names)
    if unknown:
        raise HierarchyError(f"column mapping names {sorted(unknown)}, which are neither levels "
                             f"{geocode_names} nor attributes {list(schema.names)}")

    def load(src, names, kind):
        where = str(src) if not isinstance(src, pa.Table) else f"{kind} table"
        csv = not isinstance(src, pa.Table) and ".csv" in str(src).lower()
        table = src if isinstance(src, pa.Table) else read_table(src)
        return _normalise(table, names=names, geocode_names=geocode_names, schema=schema,
                          columns=columns, values=values, where=where, csv=csv), where

    p_table, p_where = load(persons, geocode_names + list(schema.names), "persons")
    u_table, u_where = None, None
    if units is not None:
        u_table, u_where = load(units, geocode_names + [unit_attribute], "units")
        if check_units:
            _check_units(p_table, u_table, geocode_names, unit_attribute,
                         schema.attribute(unit_attribute).size, p_where, u_where)
    return Microdata(p_table, u_table, tuple(levels), unit_attribute if units is not None
                     else None, p_where, u_where)


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
    hierarchy.errors.HierarchyError: units: county '001' has 2 unit(s) of hhgq type 0 (rows 0, 1) but only 1 person(s) of that type; every occupied unit holds at least one person — remove vacant units from the units table (1 county/type pair(s) affected)
    >>> check_units(persons, units.slice(1), ["county"], "hhgq", 2) is None
    True
    """
    _check_units(persons, units, geocode_names, unit_attribute, n_types, persons_where,
                 units_where)


def _check_units(persons, units, geocode_names, unit_attribute, n_types, persons_where,
                 units_where) -> None:
    from hierarchy.geography import Geography
    from hierarchy.tabulation import count_cells

    levels = ["(root)"] + list(geocode_names)
    geo, (p_leaf, u_leaf) = Geography.from_columns(
        levels, [[persons.column(c) for c in geocode_names],
                 [units.column(c) for c in geocode_names]])
    n = geo.n_units(-1)
    people = count_cells(p_leaf, [persons.column(unit_attribute).to_numpy()], [n_types], n)
    housing = count_cells(u_leaf, [units.column(unit_attribute).to_numpy()], [n_types], n)
    _raise_unit_conflicts(people, housing, geo, persons, units, geocode_names, unit_attribute,
                          persons_where, units_where, (p_leaf, u_leaf))


def check_tabulated_units(truth, data: Microdata) -> None:
    """:func:`check_units` on an already tabulated hierarchy: the comparison uses the bottom
    level's histograms and unit counts (no pass over the records unless something is wrong,
    and then only to name the rows). Nothing to check without units.

    Parameters
    ----------
    truth : Hierarchy
        ``data`` tabulated with its units.
    data : Microdata
        Read with ``check_units=False``.

    Raises
    ------
    HierarchyError
        As :func:`check_units`.

    Examples
    --------
    >>> from hierarchy.schema import Schema, Attribute
    >>> from hierarchy.tabulation import tabulate
    >>> s = Schema((Attribute("hhgq", ("household", "gq")),))
    >>> data = read_microdata(pa.table({"county": ["001", "003"], "hhgq": [0, 1]}), schema=s,
    ...                       levels=["state", "county"], check_units=False,
    ...                       units=pa.table({"county": ["001", "003"], "hhgq": [0, 0]}))
    >>> truth = tabulate(data.persons, schema=s, levels=data.levels, units=data.units)
    >>> check_tabulated_units(truth, data)
    Traceback (most recent call last):
    ...
    hierarchy.errors.HierarchyError: persons table: 1 person(s) live in a county with no unit of their hhgq type in units table; e.g. county '003', hhgq 1, row 1. Add the missing housing units / facilities to the units table or correct the persons' hhgq or geocodes
    """
    if data.units is None or truth.units is None:
        return
    from hierarchy.queries import marginal

    people = marginal(truth.schema, data.unit_attribute).answer(truth.counts[-1])
    _raise_unit_conflicts(people, truth.units[-1], truth.geography, data.persons, data.units,
                          list(data.levels[1:]), data.unit_attribute, data.persons_source,
                          data.units_source or "units", None)


def _raise_unit_conflicts(people, housing, geo, persons, units, geocode_names, unit_attribute,
                          persons_where, units_where, leaves) -> None:
    homeless = (people > 0) & (housing == 0)
    empty = housing > people
    if not (homeless.any() or empty.any()):
        return
    if leaves is None:  # error path only: locate the records
        from hierarchy.tabulation import _leaf_in

        leaves = (_leaf_in(geo, [persons.column(c) for c in geocode_names]),
                  _leaf_in(geo, [units.column(c) for c in geocode_names]))
    p_leaf, u_leaf = leaves
    if homeless.any():
        leaf, typ = np.argwhere(homeless)[0]
        p_type = persons.column(unit_attribute).to_numpy()
        rows = np.flatnonzero((p_leaf == leaf) & (p_type == typ))
        n_bad = int(people[homeless].sum())
        raise HierarchyError(
            f"{persons_where}: {n_bad} person(s) live in a {geocode_names[-1]} with no unit of "
            f"their {unit_attribute} type in {units_where}; e.g. {geocode_names[-1]} "
            f"{geo.geocodes[-1][leaf]!r}, {unit_attribute} {typ}, "
            f"{_where(rows, _is_csv(persons_where))}. "
            f"Add the missing housing units / facilities to the units table or correct the "
            f"persons' {unit_attribute} or geocodes")
    leaf, typ = np.argwhere(empty)[0]
    u_type = units.column(unit_attribute).to_numpy()
    rows = np.flatnonzero((u_leaf == leaf) & (u_type == typ))
    raise HierarchyError(
        f"{units_where}: {geocode_names[-1]} {geo.geocodes[-1][leaf]!r} has "
        f"{housing[leaf, typ]} unit(s) of {unit_attribute} type {typ} "
        f"({_where(rows, _is_csv(units_where))}) but only "
        f"{people[leaf, typ]} person(s) of that type; every occupied unit holds at least one "
        f"person — remove vacant units from the units table ({int(empty.sum())} "
        f"{geocode_names[-1]}/type pair(s) affected)")


def _is_csv(where: str) -> bool:
    """Whether a source named ``where`` is a CSV file (so rows also get CSV line numbers)."""
    return ".csv" in where.lower()
