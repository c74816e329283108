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
hierarchy.errors.ConfidentialDataError: .../bad.csv: column 'race' (attribute 'cenrace'): 1 value(s) are not levels of the attribute: 'purple' (row 0 (CSV line 2)). Levels are ['white', 'black', 'American Indian', 'Chinese', 'Japanese', 'other'] or codes 0..5; fix the data or map the values with values={'cenrace': {...}}
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import scipy.sparse as sp

from hierarchy.errors import ConfidentialDataError, HierarchyError
from hierarchy.geography import encode_column, one_dictionary
from hierarchy.schema import Schema
from hierarchy.storage import special_file_kind

__all__ = ["read_table", "read_microdata", "Microdata", "Recode", "attribute_codes",
           "as_arrow_column", "source_table", "leaf_index", "check_units", "check_tabulated_units",
           "attribute_totals"]


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
    hierarchy.errors.ConfidentialDataError: .../people.xlsx: unknown file type; use .csv, .csv.gz, .parquet or .pq
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


def _where(rows: np.ndarray, csv: bool) -> str:
    """'row 3 (CSV line 5)' or 'rows 3, 8, … (CSV lines 5, 10, …)': rows are 0-based data rows."""
    more = " …" if rows.size > 5 else ""
    shown = ", ".join(str(int(r)) for r in rows[:5]) + more
    text = f"row {shown}" if rows.size == 1 else f"rows {shown}"
    if csv:
        lines = ", ".join(str(int(r) + 2) for r in rows[:5]) + more
        text += f" (CSV line{'s' if rows.size > 1 else ''} {lines})"
    return text


def _data_error(where: str, role: str | None, detail: str, public: str
                ) -> ConfidentialDataError:
    """An error about the records of ``where``: the full message ``where: detail``, and the
    ``public`` one that states no count, row number, value or path (see
    :class:`~hierarchy.errors.ConfidentialDataError`)."""
    return ConfidentialDataError(f"{where}: {detail}", public=public, source=where, role=role)


def _attribute_codes(column: pa.ChunkedArray | pa.Array, attr,
                     value_map: Mapping[Any, Any] | None, where: str, source_name: str,
                     csv: bool, role: str | None = None) -> pa.Array:
    """int8/int32 codes of an attribute column given as codes, digit strings, labels or a
    dictionary (pandas categorical) column, through ``value_map`` (see :class:`Recode`) if any."""
    col = column
    column = f"column {source_name!r} (attribute {attr.name!r})"
    mapping = f"map the values with values={{{attr.name!r}: {{...}}}}"
    if col.null_count:
        rows = np.flatnonzero(col.is_null().to_numpy(zero_copy_only=False))
        fix = "every person needs a value for every attribute"
        raise _data_error(where, role, f"{column} has {rows.size} missing value(s) at "
                                       f"{_where(rows, csv)}; {fix}",
                          f"{column} has missing values; {fix}")
    dtype = np.int8 if attr.size <= 127 else np.int32
    if pa.types.is_integer(col.type) and not value_map:
        bounds = pc.min_max(col).as_py() if len(col) else {"min": 0, "max": 0}
        if bounds["min"] < 0 or bounds["max"] >= attr.size:  # error path: find the rows
            arr = col.to_numpy()
            rows = np.flatnonzero((arr < 0) | (arr >= attr.size))
            raise _data_error(
                where, role, f"{column}: {rows.size} value(s) outside 0..{attr.size - 1}, e.g. "
                             f"{arr[rows[0]]} at {_where(rows, csv)}; fix the data or {mapping}",
                f"{column} holds values outside 0..{attr.size - 1} (the codes of "
                f"{attr.name!r} in the schema); fix the data or {mapping}")
        target = pa.from_numpy_dtype(dtype)
        return col if col.type == target else col.cast(target)
    recode = Recode(attr, value_map) if value_map else None
    if isinstance(col, pa.ChunkedArray):  # labels or digit strings: one array to encode
        col = one_dictionary(col) if pa.types.is_dictionary(col.type) else col
        col = col.combine_chunks() if col.num_chunks != 1 else col.chunk(0)
    encoded = pc.dictionary_encode(col.cast(pa.string()) if not pa.types.is_dictionary(col.type)
                                   else col)
    dictionary = encoded.dictionary.cast(pa.string()).to_pylist()
    lookup = np.empty(len(dictionary), dtype=np.int64)
    unknown = []
    for i, value in enumerate(dictionary):
        code = recode.code(value) if recode is not None else _label_code(attr, value)
        if code is None:
            unknown.append(i)
        else:
            lookup[i] = code
    idx = encoded.indices.to_numpy(zero_copy_only=False)
    if unknown:
        used = np.bincount(idx, minlength=len(dictionary)) > 0
        rows = np.flatnonzero(np.isin(idx, unknown))
        if rows.size == 0:   # only categories that no row uses
            vals = ", ".join(f"{dictionary[u]!r}" for u in unknown[:5])
            fix = (f"Categories must be the levels {list(attr.labels)} or a subset; drop the "
                   f"others with .cat.remove_unused_categories() or {mapping}")
            raise _data_error(
                where, role, f"{column} is categorical with categories that are not levels of "
                             f"the attribute: {vals} (no row uses them). {fix}",
                f"{column} is categorical with categories that are not levels of the "
                f"attribute (no row uses them). {fix}")
        unknown = [u for u in unknown if used[u]]
        vals = ", ".join(f"{dictionary[u]!r}" for u in unknown[:5])
        if recode is not None:
            fix = (f"Its keys are {recode.keys}; add the missing values to the mapping (a "
                   f"value, a range 'lo-hi' or an open-ended range 'lo-')")
            raise _data_error(
                where, role, f"{column}: {rows.size} value(s) are covered by no key of "
                             f"values[{attr.name!r}]: {vals} ({_where(rows, csv)}). {fix}",
                f"{column} holds values that no key of values[{attr.name!r}] covers. {fix}")
        fix = (f"Levels are {list(attr.labels)} or codes 0..{attr.size - 1}; fix the data or "
               f"{mapping}")
        raise _data_error(
            where, role, f"{column}: {rows.size} value(s) are not levels of the attribute: "
                         f"{vals} ({_where(rows, csv)}). {fix}",
            f"{column} holds values that are not levels of the attribute. {fix}")
    return pa.array(lookup[idx].astype(dtype))


def _label_code(attr, value: str) -> int | None:
    """The code of a label or digit string, or None."""
    try:
        return attr.code(value.strip())
    except HierarchyError:
        return None


_RANGE = re.compile(r"^\s*(\d+)\s*(?:-\s*(\d*)|\+)\s*$")


class Recode:
    """A value map of one attribute: values in the file → the attribute's labels or codes.

    Keys are values as they appear in the file (``"Y"``, ``2``), ranges of integers
    ``"lo-hi"`` (both ends included) or open-ended ranges ``"lo-"`` (or ``"lo+"``); a value of
    the file matches its own key first, then an integer key, then the range holding it. Targets
    are labels or codes of the attribute. Ranges and integer keys may not overlap.

    Parameters
    ----------
    attribute : Attribute
    mapping : mapping
        Key → label or code.

    Raises
    ------
    HierarchyError
        A target that is not a level of the attribute, a range whose ends are reversed, or two
        keys that cover the same value (naming both).

    Examples
    --------
    >>> from hierarchy.schema import Attribute
    >>> age = Attribute("age", ("child", "adult", "senior"))
    >>> recode = Recode(age, {"0-17": "child", "18-64": "adult", "65-": "senior"})
    >>> [recode.code(v) for v in ("0", "17", "18", "64", "65", "104", "x")]
    [0, 0, 1, 1, 2, 2, None]
    >>> Recode(age, {"0-17": "child", "15-64": "adult"})
    Traceback (most recent call last):
    ...
    hierarchy.errors.HierarchyError: values['age']: keys '0-17' and '15-64' both cover 15..17; give each value one key
    >>> Recode(age, {"0-17": "kid"})
    Traceback (most recent call last):
    ...
    hierarchy.errors.HierarchyError: values['age']['0-17'] = 'kid': attribute 'age' has no level 'kid'; levels are ['child', 'adult', 'senior'] (or codes 0..2)
    """

    def __init__(self, attribute, mapping: Mapping[Any, Any]):
        self.attribute = attribute
        self.keys = list(mapping)
        self._exact: dict[str, int] = {}
        self._integers: dict[int, int] = {}
        self._ranges: list[tuple[int, int | None, int]] = []
        spans = []                            # (lo, hi or None, key) of integer and range keys
        for key, target in mapping.items():
            try:
                code = attribute.code(target)
            except HierarchyError as exc:
                raise HierarchyError(f"values[{attribute.name!r}][{key!r}] = {target!r}: "
                                     f"{exc}") from None
            text = str(key).strip()
            self._exact[text] = code
            number = key if isinstance(key, (int, np.integer)) and not isinstance(key, bool) \
                else _maybe_int(text)
            if isinstance(number, (int, np.integer)):
                self._integers[int(number)] = code
                spans.append((int(number), int(number), key))
                continue
            match = _RANGE.match(text) if isinstance(key, str) else None
            if match:
                lo = int(match.group(1))
                hi = int(match.group(2)) if match.group(2) else None
                if hi is not None and hi < lo:
                    raise HierarchyError(f"values[{attribute.name!r}]: range {key!r} ends "
                                         f"before it starts; write it '{hi}-{lo}'")
                spans.append((lo, hi, key))
                self._ranges.append((lo, hi, code))
        spans.sort(key=lambda s: s[0])
        for (lo0, hi0, key0), (lo1, hi1, key1) in zip(spans, spans[1:]):
            if hi0 is None or hi0 >= lo1:
                top = hi1 if hi0 is None else (hi0 if hi1 is None else min(hi0, hi1))
                both = f"{lo1}.." + ("" if top is None else str(top))
                raise HierarchyError(f"values[{attribute.name!r}]: keys {key0!r} and {key1!r} "
                                     f"both cover {both}; give each value one key")

    def code(self, value: str) -> int | None:
        """The code of a value of the file (as text), or None when no key covers it."""
        text = value.strip()
        if text in self._exact:
            return self._exact[text]
        number = _maybe_int(text)
        if not isinstance(number, int):
            return None
        if number in self._integers:
            return self._integers[number]
        for lo, hi, code in self._ranges:
            if lo <= number and (hi is None or number <= hi):
                return code
        return None


def as_arrow_column(values: Any) -> pa.ChunkedArray:
    """A column of a pandas DataFrame, pyarrow Table, numpy array or list as a pyarrow array.

    pandas categoricals become dictionary arrays (their categories are the dictionary); an
    object column mixing text and numbers becomes text; missing values stay missing.

    Examples
    --------
    >>> import pandas as pd
    >>> as_arrow_column(pd.Series(pd.Categorical(["b", "a"], categories=["a", "b"]))).type
    DictionaryType(dictionary<values=large_string, indices=int8, ordered=0>)
    >>> as_arrow_column(pd.Series(["a", 1, None], dtype=object)).to_pylist()
    ['a', '1', None]
    """
    if isinstance(values, (pa.Array, pa.ChunkedArray)):
        return _chunked(values)
    try:
        return _chunked(pa.array(values, from_pandas=True))
    except (pa.ArrowInvalid, pa.ArrowTypeError):      # mixed text and numbers: as text
        import pandas as pd

        text = [None if pd.isna(v) else str(v) for v in values]
        return _chunked(pa.array(text, type=pa.string()))


def attribute_codes(values: Any, attribute, *, value_map: Mapping[Any, Any] | None = None,
                    where: str = "persons table", column: str | None = None) -> np.ndarray:
    """Integer codes of one attribute column given as codes, labels or a pandas categorical.

    Parameters
    ----------
    values : pandas Series, pyarrow array, numpy array or list
    attribute : Attribute
    value_map : mapping, optional
        The file's values → labels or codes, with ranges (see :class:`Recode`).
    where, column : str
        The source and column, for messages.

    Returns
    -------
    numpy.ndarray
        int8 codes (int32 for an attribute of more than 127 levels).

    Raises
    ------
    ConfidentialDataError
        A missing value, a code out of range, a label (or a categorical's category) that is not
        a level, or a value the map does not cover: naming the column, the value, the rows and
        the valid labels (only the column, the rule and the fix in its public part).

    Examples
    --------
    >>> import pandas as pd
    >>> from hierarchy.schema import Attribute
    >>> sex = Attribute("sex", ("male", "female"))
    >>> attribute_codes(pd.Series(["female", "male"]), sex).tolist()
    [1, 0]
    >>> attribute_codes(pd.Categorical(["female"], categories=["female", "male"]), sex).tolist()
    [1]
    >>> attribute_codes(["male", "femal"], sex, column="sex")
    Traceback (most recent call last):
    ...
    hierarchy.errors.ConfidentialDataError: persons table: column 'sex' (attribute 'sex'): 1 value(s) are not levels of the attribute: 'femal' (row 1). Levels are ['male', 'female'] or codes 0..1; fix the data or map the values with values={'sex': {...}}
    """
    codes = _attribute_codes(as_arrow_column(values), attribute, value_map, where,
                             column or attribute.name, False)
    return np.asarray(codes.to_numpy())


def _chunked(col: pa.Array | pa.ChunkedArray) -> pa.ChunkedArray:
    return col if isinstance(col, pa.ChunkedArray) else pa.chunked_array([col])



def _maybe_int(v: str) -> Any:
    try:
        return int(v)
    except ValueError:
        return v


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
    >>> import pandas as pd
    >>> table, where, csv = source_table(pd.DataFrame({"county": ["001"], "age": [3]}))
    >>> table.column_names, where, csv
    (['county', 'age'], 'persons table', False)
    >>> source_table([1, 2], "units")
    Traceback (most recent call last):
    ...
    hierarchy.errors.HierarchyError: units must be a pandas DataFrame, a pyarrow Table or the path of a CSV or parquet file, not list
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
        in years → age groups (see :class:`Recode`; keys may not overlap).
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

    >>> import pandas as pd
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
    hierarchy.errors.ConfidentialDataError: persons table: 1 person(s) live in a county with no unit of their hhgq type in units table; e.g. county '003', hhgq 1, row 2. Add the missing housing units / facilities to the units table or correct the persons' hhgq or geocodes
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
    hierarchy.errors.ConfidentialDataError: units: county '001' has 2 unit(s) of hhgq type 0 (rows 0, 1) but only 1 person(s) of that type; every occupied unit holds at least one person — remove vacant units from the units table (1 county/type pair(s) affected)
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


def check_tabulated_units(truth, data: Microdata) -> None:
    """:func:`check_units` on an already tabulated hierarchy: the comparison uses the bottom
    level's histograms and unit counts (no pass over the records unless something is wrong,
    and then only to name the rows). Nothing to check without units.

    Parameters
    ----------
    truth : Hierarchy or hierarchy.tabulation.LeafCounts
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
    hierarchy.errors.ConfidentialDataError: persons table: 1 person(s) live in a county with no unit of their hhgq type in units table; e.g. county '003', hhgq 1, row 1. Add the missing housing units / facilities to the units table or correct the persons' hhgq or geocodes
    """
    if data.units is None or truth.leaf_units is None:
        return
    people = attribute_totals(truth.schema, truth.leaf_counts, data.unit_attribute)
    _raise_unit_conflicts(people, truth.leaf_units, truth.geography, data.persons, data.units,
                          list(data.levels[1:]), data.unit_attribute, data.persons_source,
                          data.units_source or "units", None)


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
