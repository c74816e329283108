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
hierarchy.errors.ConfidentialDataError: .../bad.csv: column 'race' (attribute 'cenrace'): 1 value(s)
are not levels of the attribute: 'purple' (row 0 (CSV line 2)). Levels are ['white', 'black',
'American Indian', 'Chinese', 'Japanese', 'other'] or codes 0..5; fix the data or map the values
with values={'cenrace': {...}}
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

from hierarchy.errors import ConfidentialDataError, HierarchyError
from hierarchy.geography import one_dictionary
from hierarchy.io.codes import _attribute_codes, _chunked, _data_error, _where, as_arrow_column
from hierarchy.io.storage import special_file_kind
from hierarchy.io.units import _check_units, _raise_unit_conflicts, attribute_totals
from hierarchy.schema import Schema

__all__ = ["read_table", "read_microdata", "Microdata", "source_table", "check_tabulated_units"]


def read_table(path: str | os.PathLike, *, role: str | None = None) -> pa.Table:
    """Read a CSV (``.csv``, ``.csv.gz``) or parquet (``.parquet``, ``.pq``) file.

    Geocode-like text columns stay text (leading zeros are kept): CSV columns are read as
    strings and converted per attribute later. A parquet path may also be a directory holding a
    partitioned parquet dataset.

    Parameters
    ----------
    path : str or path
    role : str, optional
        What the file holds (``"persons"``, ``"units"``), for the error's public message.

    Raises
    ------
    ConfidentialDataError
        If the path does not exist, is a special file (a named pipe, device or socket, which
        could block the read forever) or a directory where a file is needed, has an unknown
        suffix, or cannot be parsed. The public part of the message names neither the path nor
        the reader's own message (which may quote a record).

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
    hierarchy.errors.ConfidentialDataError: .../people.xlsx does not exist
    >>> _ = (d / "people.xlsx").write_text("")
    >>> read_table(d / "people.xlsx")
    Traceback (most recent call last):
    ...
    hierarchy.errors.ConfidentialDataError: .../people.xlsx: unknown file type; use .csv, .csv.gz,
    .parquet or .pq
    """
    path = Path(path)

    def refuse(detail: str, public: str, *, reader: bool = False) -> ConfidentialDataError:
        # only the reader's own message (which may quote a record) says more than the path
        return ConfidentialDataError(f"{path}{detail}", public=public, source=str(path),
                                     role=role, has_detail=reader)

    if not path.exists():
        raise refuse(" does not exist", "the file does not exist")
    name = path.name.lower()
    dataset = path.is_dir() and name.endswith((".parquet", ".pq"))
    kind = None if dataset else special_file_kind(path)
    if kind is not None:
        advice = ("; give the path of a CSV or parquet file on disk (reading a pipe or device "
                  "could block forever)")
        raise refuse(f" is not a regular file: it is {kind}{advice}",
                     f"the file is not a regular file: it is {kind}{advice}")
    try:
        if name.endswith((".parquet", ".pq")):
            return pq.read_table(path)
        if name.endswith((".csv", ".csv.gz", ".txt")):
            first = pacsv.open_csv(path).schema
            opts = pacsv.ConvertOptions(column_types={f.name: pa.string() for f in first},
                                        strings_can_be_null=True, auto_dict_encode=False)
            return pacsv.read_csv(path, convert_options=opts)
    except (pa.ArrowInvalid, OSError) as exc:
        raise refuse(f": cannot be read: {exc}",
                     "cannot be read as a CSV or parquet file (the reader's message is "
                     "withheld: it may quote a record)", reader=True) from None
    unknown = ": unknown file type; use .csv, .csv.gz, .parquet or .pq"
    raise refuse(unknown, unknown[2:])


def _normalise(table: pa.Table, *, names: Sequence[str], geocode_names: Sequence[str],
               schema: Schema, columns: Mapping[str, str], values: Mapping[str, Mapping],
               where: str, csv: bool, role: str | None = None) -> pa.Table:
    out = {}
    available = table.column_names
    for name in names:
        source = columns.get(name, name)
        if source not in available:
            message = (f"no column {source!r} for {name!r}; columns are {available}. Map it "
                       f"with columns={{{name!r}: 'your_column'}}")
            raise _data_error(where, role, message, message)
        col = table.column(source)
        if name in geocode_names:
            column = f"column {source!r} ({name} geocode)"
            fix = "every record needs a geocode at every level"
            if col.null_count:
                rows = np.flatnonzero(col.is_null().to_numpy(zero_copy_only=False))
                raise _data_error(where, role,
                                  f"{column} is missing at {_where(rows, csv)}; {fix}",
                                  f"{column} has missing values; {fix}")
            if not pa.types.is_dictionary(col.type):
                col = pc.dictionary_encode(col.cast(pa.string()))
            col = one_dictionary(_chunked(col))
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
                        raise _data_error(where, role, f"{column} is empty at "
                                                       f"{_where(rows, csv)}; {fix}",
                                          f"{column} has empty values; {fix}")
            out[name] = col
        else:
            out[name] = _attribute_codes(col, schema.attribute(name), values.get(name), where,
                                         source, csv, role)
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


def source_table(source: Any, kind: str = "persons") -> tuple[pa.Table, str, bool]:
    """Microdata given as a path, a pyarrow Table, a pandas DataFrame or a mapping of columns,
    as a pyarrow Table with where it came from (for messages) and whether it is a CSV file.

    Raises
    ------
    HierarchyError
        Anything else (naming its type), or a file :func:`read_table` cannot read.

    Examples
    --------
    >>> table, where, csv = source_table(pd.DataFrame({"county": ["001"], "age": [3]}))
    >>> table.column_names, where, csv
    (['county', 'age'], 'persons table', False)
    >>> source_table([1, 2], "units")
    Traceback (most recent call last):
    ...
    hierarchy.errors.HierarchyError: units must be a pandas DataFrame, a pyarrow Table or the path
    of a CSV or parquet file, not list
    """
    import pandas as pd

    if isinstance(source, (str, os.PathLike)):
        return read_table(source, role=kind), str(source), ".csv" in str(source).lower()
    where = f"{kind} table"
    if isinstance(source, pa.Table):
        return source, where, False
    if isinstance(source, pd.DataFrame):
        try:
            return pa.Table.from_pandas(source, preserve_index=False), where, False
        except (pa.ArrowInvalid, pa.ArrowTypeError):      # a column mixing text and numbers
            return pa.table({str(c): as_arrow_column(source[c]) for c in source.columns}), \
                where, False
    if isinstance(source, Mapping):
        return pa.table({str(c): as_arrow_column(v) for c, v in source.items()}), where, False
    raise HierarchyError(f"{kind} must be a pandas DataFrame, a pyarrow Table or the path of a "
                         f"CSV or parquet file, not {type(source).__name__}")


def read_microdata(persons: Any, *, schema: Schema,
                   levels: Sequence[str], columns: Mapping[str, str] | None = None,
                   values: Mapping[str, Mapping[Any, Any]] | None = None,
                   units: Any = None, unit_attribute: str = "hhgq",
                   check_units: bool = True) -> Microdata:
    """Read and validate persons (and optionally units) microdata.

    Parameters
    ----------
    persons, units : path, pandas.DataFrame, pyarrow.Table or mapping of columns
        A CSV or parquet path, or a table. Attribute columns hold integer codes, labels, digit
        strings or pandas categoricals (whose categories must be labels of the attribute).
        Units: one row per occupied housing unit or group-quarters facility.
    schema : Schema
    levels : sequence of str
        Geography levels, root first; each non-root level needs a geocode column.
    columns : mapping, optional
        Level or attribute name → column name in the files (default: the same name).
    values : mapping, optional
        Attribute → {value in the file: code or label}, for files with their own coding. A key
        may be a range of integers, ``"18-64"`` (ends included), or open-ended, ``"65-"``: age
        in years → age groups (see :class:`~hierarchy.io.codes.Recode`; keys may not overlap).
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
    ConfidentialDataError
        Naming the file, column, rows and fix: a file with no records, missing columns,
        missing geocodes, unknown attribute values, persons in a unit with no housing unit or
        facility of their type, or units without a person of their type. Its public part
        (:attr:`~hierarchy.errors.ConfidentialDataError.public`) names the column and the rule
        only: no path, count, row number or value.

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

    A pandas DataFrame with age in years, recoded into groups by ranges:

    >>> s2 = Schema((Attribute("age", ("child", "adult", "senior")),))
    >>> years = pd.DataFrame({"county": ["001", "003", "003"], "age": [4, 40, 81]})
    >>> read_microdata(years, schema=s2, levels=["state", "county"],
    ...                values={"age": {"0-17": "child", "18-64": "adult", "65-": "senior"}}
    ...                ).persons.column("age").to_pylist()
    [0, 1, 2]

    The person in county 003 lives in group quarters, which the units table lacks:

    >>> read_microdata(persons, units=pa.table({"co": ["001", "003"], "hh": ["H", "H"]}),
    ...                **options)
    Traceback (most recent call last):
    ...
    hierarchy.errors.ConfidentialDataError: persons table: 1 person(s) live in a county with no unit
    of their hhgq type in units table; e.g. county '003', hhgq 1, row 2. Add the missing housing
    units / facilities to the units table or correct the persons' hhgq or geocodes
    """
    columns = dict(columns or {})
    values = dict(values or {})
    geocode_names = list(levels[1:])
    unknown = set(columns) - set(geocode_names) - set(schema.names)
    if unknown:
        raise HierarchyError(f"column mapping names {sorted(unknown)}, which are neither levels "
                             f"{geocode_names} nor attributes {list(schema.names)}")

    def load(src, names, kind, what):
        table, where, csv = source_table(src, kind)
        if table.num_rows == 0:      # said here, not as "a level has no units" further on
            message = (f"no records, only column names; give the file of {what}, or leave "
                       f"the units out")
            if kind == "persons":
                message = ("no records, only column names; a run needs at least one person: "
                           "give the file of the persons")
            raise _data_error(where, kind, message, message)
        return _normalise(table, names=names, geocode_names=geocode_names, schema=schema,
                          columns=columns, values=values, where=where, csv=csv,
                          role=kind), where

    p_table, p_where = load(persons, geocode_names + list(schema.names), "persons",
                            "the persons")
    u_table, u_where = None, None
    if units is not None:
        u_table, u_where = load(units, geocode_names + [unit_attribute], "units",
                                "occupied housing units and group quarters")
        if check_units:
            _check_units(p_table, u_table, geocode_names, unit_attribute,
                         schema.attribute(unit_attribute).size, p_where, u_where)
    return Microdata(p_table, u_table, tuple(levels), unit_attribute if units is not None
                     else None, p_where, u_where)


def check_tabulated_units(truth, data: Microdata) -> None:
    """:func:`~hierarchy.io.units.check_units` on an already tabulated hierarchy: the comparison
    uses the bottom level's histograms and unit counts (no pass over the records unless something
    is wrong, and then only to name the rows). Nothing to check without units.

    Parameters
    ----------
    truth : Hierarchy or hierarchy.tabulation.LeafCounts
        ``data`` tabulated with its units.
    data : Microdata
        Read with ``check_units=False``.

    Raises
    ------
    HierarchyError
        As :func:`~hierarchy.io.units.check_units`.

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
    hierarchy.errors.ConfidentialDataError: persons table: 1 person(s) live in a county with no unit
    of their hhgq type in units table; e.g. county '003', hhgq 1, row 1. Add the missing housing
    units / facilities to the units table or correct the persons' hhgq or geocodes
    """
    if data.units is None or truth.leaf_units is None:
        return
    people = attribute_totals(truth.schema, truth.leaf_counts, data.unit_attribute)
    _raise_unit_conflicts(people, truth.leaf_units, truth.geography, data.persons, data.units,
                          list(data.levels[1:]), data.unit_attribute, data.persons_source,
                          data.units_source or "units", None)
