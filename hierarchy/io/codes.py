"""The codes of an attribute column, from a file's values: codes, digit strings, labels or a map.

What :func:`hierarchy.io.read_microdata` makes of each attribute column, and the messages that
name the column, the rows and the fix when a value is not a level (with only the column, the
rule and the fix in their public part: :class:`~hierarchy.errors.ConfidentialDataError`). A
file with its own coding maps its values through a :class:`Recode` (ranges allowed).

Examples
--------
>>> from hierarchy.schema import Attribute
>>> votingage = Attribute("votingage", ("under 18", "18+"))
>>> attribute_codes(["18+", "under 18", "1"], votingage).tolist()
[1, 0, 1]
"""

from __future__ import annotations

import re
from typing import Any, Mapping

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from hierarchy.errors import ConfidentialDataError, HierarchyError
from hierarchy.geography import one_dictionary

__all__ = ["Recode", "attribute_codes", "as_arrow_column"]


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
    hierarchy.errors.HierarchyError: values['age']: keys '0-17' and '15-64' both cover 15..17; give
    each value one key
    >>> Recode(age, {"0-17": "kid"})
    Traceback (most recent call last):
    ...
    hierarchy.errors.HierarchyError: values['age']['0-17'] = 'kid': attribute 'age' has no level
    'kid'; levels are ['child', 'adult', 'senior'] (or codes 0..2)
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
    >>> from hierarchy.schema import Attribute
    >>> sex = Attribute("sex", ("male", "female"))
    >>> attribute_codes(pd.Series(["female", "male"]), sex).tolist()
    [1, 0]
    >>> attribute_codes(pd.Categorical(["female"], categories=["female", "male"]), sex).tolist()
    [1]
    >>> attribute_codes(["male", "femal"], sex, column="sex")
    Traceback (most recent call last):
    ...
    hierarchy.errors.ConfidentialDataError: persons table: column 'sex' (attribute 'sex'): 1
    value(s) are not levels of the attribute: 'femal' (row 1). Levels are ['male', 'female'] or
    codes 0..1; fix the data or map the values with values={'sex': {...}}
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
