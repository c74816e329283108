"""Tabulation: microdata → exact detailed histograms of every unit at every level.

The kernel computes each record's key ``leaf × cells + cell`` in cache-sized chunks and counts the
keys with ``np.bincount``. When records arrive sorted by geography (census files and our
synthetic data are), each chunk's keys span a narrow range and are counted locally into that slice
of the output; otherwise the keys are collected for one global ``bincount``. Upper levels are sums
of contiguous children (``np.add.reduceat``).

Examples
--------
>>> import pandas as pd
>>> from hierarchy.schema import E2E_1940
>>> persons = pd.DataFrame({"state": ["01", "01", "02"], "county": ["01001", "01001", "02001"],
...                         "hhgq": [0, 0, 3], "votingage": [1, 0, 1], "hispanic": [0, 0, 0],
...                         "cenrace": [0, 0, 1]})
>>> truth = tabulate(persons, schema=E2E_1940, levels=["nation", "state", "county"])
>>> truth.summary()
{'nation': {'units': 1, 'persons': 3}, 'state': {'units': 2, 'persons': 3}, 'county': {'units': 2,
'persons': 3}}
>>> int(truth.level_counts("county")[1, 3 * 24 + 12 + 1])   # nursing, 18+, not Hispanic, black
1
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd
import pyarrow as pa
import scipy.sparse as sp

from hierarchy.errors import ConfidentialDataError, HierarchyError
from hierarchy.geography import Geography
from hierarchy.histograms import Hierarchy
from hierarchy.io.codes import attribute_codes
from hierarchy.io.microdata import read_table
from hierarchy.io.units import leaf_index
from hierarchy.schema import Schema

__all__ = ["tabulate", "tabulate_leaf", "count_cells", "count_cells_sparse",
           "column_array", "from_leaf_counts", "LeafCounts"]

_CHUNK = 1 << 18


def column_array(table: Any, name: str) -> Any:
    """A column of a pyarrow Table, pandas DataFrame or mapping, without copying when possible.

    Geocode columns are returned as they are (dictionary arrays stay dictionary-encoded);
    attribute columns are converted by the caller.

    Raises
    ------
    HierarchyError
        If the table has no such column (listing the columns it has).

    Examples
    --------
    >>> persons = {"state": ["01", "02"], "cenrace": [0, 3]}
    >>> column_array(pa.table(persons), "state").to_pylist()
    ['01', '02']
    >>> column_array(pd.DataFrame(persons), "cenrace").tolist()
    [0, 3]
    >>> column_array(pd.DataFrame(persons), "county")
    Traceback (most recent call last):
    ...
    hierarchy.errors.HierarchyError: table has no column 'county'; columns are ['state', 'cenrace']
    """
    if isinstance(table, pa.Table):
        if name not in table.column_names:
            raise HierarchyError(f"table has no column {name!r}; columns are {table.column_names}")
        return table.column(name)
    if isinstance(table, pd.DataFrame):
        if name not in table.columns:
            raise HierarchyError(f"table has no column {name!r}; columns are "
                                 f"{list(table.columns)}")
        return table[name]
    try:
        return table[name]
    except (KeyError, IndexError, TypeError):
        raise HierarchyError(f"table has no column {name!r}") from None


def _attribute_column(table: Any, source: str, attr, value_map: Mapping[Any, Any] | None
                      ) -> np.ndarray:
    """Codes of one attribute: an integer column as it is (its range is checked while
    counting); labels, digit strings, categoricals or a value map through
    :func:`hierarchy.io.attribute_codes`."""
    col = column_array(table, source)
    if value_map is None:
        if isinstance(col, (pa.ChunkedArray, pa.Array)) and pa.types.is_integer(col.type):
            if col.null_count:
                rows = np.flatnonzero(np.asarray(col.is_null().to_numpy(zero_copy_only=False)))
                raise ConfidentialDataError(f"column {source!r} has {rows.size} missing "
                                            f"value(s) at rows {rows[:10].tolist()}",
                                            public=f"column {source!r} has missing values")
            return np.asarray(col.to_numpy())
        if not isinstance(col, (pa.ChunkedArray, pa.Array)):
            arr = np.asarray(col)
            if arr.dtype.kind in "iu":
                return arr
    return attribute_codes(col, attr, value_map=value_map, column=source)


def _cells(columns: Sequence[np.ndarray], shape: Sequence[int], strides: Sequence[int],
           start: int, stop: int, dtype, names: Sequence[str] | None = None) -> np.ndarray:
    """Row-major cell index of records ``start:stop``, with every code range-checked.

    An int8/uint8 column is checked with one ``max`` over its uint8 view (a negative int8 reads
    as ≥ 128, above every attribute size ≤ 127); wider columns need a min and a max. An
    attribute of one value adds nothing once checked (its code is 0), and is skipped: its stride
    can be the number of cells itself, one more than ``dtype`` holds (256 cells in ``uint8``).
    """
    cell = None
    for j, (col, size, stride) in enumerate(zip(columns, shape, strides)):
        part = col[start:stop]
        if part.dtype.itemsize == 1 and size <= 128:
            part = part.view(np.uint8)
            bad = part.size and part.max() >= size
        else:
            bad = part.size and (part.max() >= size or part.min() < 0)
        if bad:
            row = int(np.flatnonzero((col[start:stop] >= size) | (col[start:stop] < 0))[0])
            what = repr(names[j]) if names is not None else str(j)
            raise ConfidentialDataError(f"attribute {what} has code {col[start + row]} at row "
                                        f"{start + row}, outside 0..{size - 1}",
                                        public=f"attribute {what} has codes outside "
                                               f"0..{size - 1}")
        if size == 1:
            continue
        term = part.astype(dtype, copy=False)
        if stride != 1:
            term = term * dtype(stride)
        if cell is None:
            cell = term.copy() if term is part else term
        else:
            cell += term
    return cell if cell is not None else np.zeros(stop - start, dtype=dtype)


def count_cells(leaf: np.ndarray, columns: Sequence[np.ndarray], shape: Sequence[int],
                n_leaves: int, *, chunk: int = _CHUNK, leaf_sorted: bool | None = None,
                names: Sequence[str] | None = None) -> np.ndarray:
    """Count records per (leaf, cell): the core kernel of :func:`tabulate`.

    Records are processed in cache-sized chunks. When the leaf index is sorted (records grouped
    by geography, as census files and the synthetic data are), each chunk's keys are
    ``(leaf − first leaf)·cells + cell`` in int32 and are counted straight into that slice of the
    output: no min/max scans, no global key array. Otherwise a chunk whose keys span a narrow
    range is still counted locally, and the rest are collected for one global ``bincount``.

    Parameters
    ----------
    leaf : int array
        Bottom-level unit of every record.
    columns : sequence of int arrays
        Attribute codes of every record, one array per schema attribute.
    shape : sequence of int
        Attribute sizes.
    n_leaves : int
    leaf_sorted : bool, optional
        Whether ``leaf`` is non-decreasing; checked (one pass) when not given.
    names : sequence of str, optional
        Attribute names, for error messages (else attributes are named by position).

    Returns
    -------
    counts : int64 array of shape (n_leaves, prod(shape))

    Raises
    ------
    HierarchyError
        If a code is outside its attribute's range (naming the attribute and a row).

    Examples
    --------
    >>> count_cells(np.array([0, 0, 1]), [np.array([1, 1, 0], np.int8)], [2], 2).tolist()
    [[0, 2], [1, 0]]
    >>> count_cells(np.array([0, 1]), [np.array([1, 2])], [2], 2, names=["sex"])
    Traceback (most recent call last):
    ...
    hierarchy.errors.ConfidentialDataError: attribute 'sex' has code 2 at row 1, outside 0..1
    """
    leaf, n, n_cells, strides = _check_records(leaf, columns, shape, n_leaves)
    cell_dtype = np.uint8 if n_cells <= 256 else np.int64
    key_dtype = np.int32 if n_leaves * n_cells < 2 ** 31 else np.int64
    if leaf_sorted is None:
        leaf_sorted = n < 2 or bool(np.all(leaf[1:] >= leaf[:-1]))
    out = np.zeros(n_leaves * n_cells, dtype=np.int64)
    spill = None  # keys of unsorted chunks whose keys span a wide range
    n_spill = 0
    for start in range(0, n, chunk):
        stop = min(n, start + chunk)
        cell = _cells(columns, shape, strides, start, stop, cell_dtype, names)
        if leaf_sorted:
            first, last = int(leaf[start]), int(leaf[stop - 1])
            key = leaf[start:stop].astype(key_dtype)
            key -= key_dtype(first)
            key *= key_dtype(n_cells)
            key += cell
            out[first * n_cells:(last + 1) * n_cells] += np.bincount(
                key, minlength=(last - first + 1) * n_cells)
            continue
        key = leaf[start:stop].astype(np.int64)
        key *= n_cells
        key += cell
        lo, hi = int(key.min()), int(key.max()) + 1
        if hi - lo <= 8 * (stop - start):
            out[lo:hi] += np.bincount(key - lo, minlength=hi - lo)
        else:
            if spill is None:
                spill = np.empty(n - start, dtype=np.int64)
            spill[n_spill:n_spill + key.size] = key
            n_spill += key.size
    if n_spill:
        out += np.bincount(spill[:n_spill], minlength=out.size)
    return out.reshape(n_leaves, n_cells)


def _check_records(leaf, columns, shape, n_leaves):
    """``leaf`` as an array, the number of records, cells and the cells' strides; raises
    unless every attribute column has a code for every record."""
    leaf = np.asarray(leaf)
    n = int(leaf.shape[0])
    lengths = [int(np.asarray(c).shape[0]) for c in columns]
    if any(m != n for m in lengths):
        raise HierarchyError(f"attribute columns have {lengths} rows but there are {n} leaf "
                             "indices; every record needs a unit and a code for every attribute")
    n_cells = int(np.prod(shape))
    strides = [int(np.prod(shape[i + 1:])) for i in range(len(shape))]
    if n_leaves * n_cells >= 2 ** 62:
        raise HierarchyError("too many leaves × cells to count")
    return leaf, n, n_cells, strides


def count_cells_sparse(leaf: np.ndarray, columns: Sequence[np.ndarray], shape: Sequence[int],
                       n_leaves: int, *, chunk: int = _CHUNK,
                       names: Sequence[str] | None = None) -> sp.csr_matrix:
    """:func:`count_cells`, its result sparse: the (leaf, cell) counts that are not 0.

    For bottom levels whose dense array is mostly zeros: a 2020-style part of 20,000 blocks ×
    2,016 cells holds about 0.8 million persons in 0.3 GB of int64, 98 % of it zeros, which
    the dense count writes (and the operating system maps in) before anything is counted.
    Here each record's key ``leaf × cells + cell`` is computed in chunks (every code
    range-checked, as :func:`count_cells` does), the keys are sorted once and runs of equal
    keys counted: time and memory in the records, not in leaves × cells.

    Parameters
    ----------
    leaf, columns, shape, n_leaves, chunk, names
        As for :func:`count_cells` (the leaves need not be sorted).

    Returns
    -------
    scipy.sparse.csr_matrix, int64, shape (n_leaves, prod(shape))
        In canonical form (each row's cells sorted, no duplicates, no explicit zeros): its
        triplets in row-major order are those of ``np.nonzero`` on the dense counts.

    Raises
    ------
    HierarchyError
        As :func:`count_cells`.

    Examples
    --------
    >>> counts = count_cells_sparse(np.array([1, 0, 1, 1]), [np.array([1, 1, 0, 1], np.int8)],
    ...                             [2], 3)
    >>> counts.toarray().tolist(), counts.nnz
    ([[0, 1], [1, 2], [0, 0]], 3)
    >>> bool((counts.toarray() == count_cells(np.array([1, 0, 1, 1]),
    ...                                       [np.array([1, 1, 0, 1])], [2], 3)).all())
    True
    """
    leaf, n, n_cells, strides = _check_records(leaf, columns, shape, n_leaves)
    key_dtype = np.int32 if n_leaves * n_cells < 2 ** 31 else np.int64
    cell_dtype = np.uint8 if n_cells <= 256 else key_dtype
    keys = np.empty(n, dtype=key_dtype)
    for start in range(0, n, chunk):
        stop = min(n, start + chunk)
        key = keys[start:stop]
        key[:] = leaf[start:stop]
        key *= key_dtype(n_cells)
        key += _cells(columns, shape, strides, start, stop, cell_dtype, names)
    keys.sort()
    first = np.flatnonzero(np.diff(keys, prepend=keys[:1] - 1)) if n else np.zeros(0, np.intp)
    counts = np.diff(first, append=n).astype(np.int64)
    rows, cells = np.divmod(keys[first], key_dtype(n_cells))
    return sp.csr_matrix((counts, (rows, cells)), shape=(n_leaves, n_cells))


def tabulate(persons: Any, *, schema: Schema, levels: Sequence[str],
             geocode_columns: Sequence[str] | None = None, units: Any = None,
             unit_attribute: str | None = "hhgq", geography: Geography | None = None,
             columns: Mapping[str, str] | None = None,
             values: Mapping[str, Mapping[Any, Any]] | None = None,
             chunk: int = _CHUNK) -> Hierarchy:
    """Tabulate a persons table (and optionally a units table) into a :class:`Hierarchy`.

    Parameters
    ----------
    persons : pandas.DataFrame, pyarrow.Table, mapping of columns, or path
        One row per person: a geocode column for every non-root level and a column for every
        schema attribute holding integer codes, labels, or a pandas categorical whose categories
        are labels of the attribute (all of them or some). A path is a CSV or parquet file
        (:func:`hierarchy.io.read_table`).
    schema : Schema
    levels : sequence of str
        Geography levels, root first. Unless ``geocode_columns`` or ``columns`` say otherwise,
        the geocode column of each non-root level has the level's name.
    geocode_columns : sequence of str, optional
        Column names for the non-root levels.
    columns : mapping, optional
        Level or attribute name → column name (default: the same name), as in
        :func:`hierarchy.io.read_microdata`.
    values : mapping, optional
        Attribute → {value in the data: label or code}, with integer ranges ``"18-64"`` and
        open-ended ranges ``"65-"`` as keys (see :class:`hierarchy.io.Recode`).
    units : table or path, optional
        One row per housing unit / facility: the same geocode columns and ``unit_attribute``.
        Every unit must belong to a unit of the geography (units may create empty units).
    unit_attribute : str or None
        Schema attribute that types the units.
    geography : Geography, optional
        A prebuilt geography (e.g. with extra empty units); records must map into it.

    Returns
    -------
    Hierarchy

    Raises
    ------
    HierarchyError
        A missing column, a missing value, a code outside its attribute, a label (or
        category) that is not a level of its attribute or a value the ``values`` map does not
        cover (naming the column, the value, the rows and the valid labels), or a geocode
        outside the given ``geography``.

    Examples
    --------
    Four persons in two states, counted by sex × age (cells (male, child), (male, adult),
    (female, child), (female, adult)):

    >>> from hierarchy.schema import Schema, Attribute
    >>> s = Schema((Attribute("sex", ("male", "female")), Attribute("age", ("child", "adult"))))
    >>> persons = {"state": ["A", "A", "B", "B"], "sex": [0, 1, 1, 1], "age": [1, 1, 0, 1]}
    >>> truth = tabulate(persons, schema=s, levels=["nation", "state"])
    >>> truth.level_counts("state").tolist(), truth.level_counts("nation").tolist()
    ([[0, 1, 0, 1], [0, 0, 1, 1]], [[0, 1, 1, 2]])

    A prebuilt geography keeps units that have nobody in them (state ``C`` here):

    >>> geo, _ = Geography.from_columns(["nation", "state"], [[["A", "B", "C"]]])
    >>> tabulate(persons, schema=s, levels=["nation", "state"], geography=geo).totals("state")
    array([2, 2, 0])

    Labels and pandas categoricals count like codes; ages in years are recoded by ranges:

    >>> people = pd.DataFrame({"state": ["A", "A", "B", "B"],
    ...                        "sex": pd.Categorical(["male", "female", "female", "female"]),
    ...                        "years": [40, 30, 9, 70]})
    >>> same = tabulate(people, schema=s, levels=["nation", "state"], columns={"age": "years"},
    ...                 values={"age": {"0-17": "child", "18-": "adult"}})
    >>> bool((same.level_counts("state") == truth.level_counts("state")).all())
    True
    >>> tabulate({"state": ["A"], "sex": ["female"], "age": ["old"]}, schema=s,
    ...          levels=["nation", "state"])
    Traceback (most recent call last):
    ...
    hierarchy.errors.ConfidentialDataError: persons table: column 'age' (attribute 'age'): 1
    value(s) are not levels of the attribute: 'old' (row 0). Levels are ['child', 'adult'] or codes
    0..1; fix the data or map the values with values={'age': {...}}
    """
    geography, leaves, leaf_sorted, codes, types = _records(
        persons, schema, levels, geocode_columns, units, unit_attribute, geography, columns,
        values)
    n_leaves = geography.n_units(-1)
    leaf_counts = count_cells(leaves[0], codes, schema.shape, n_leaves, chunk=chunk,
                              leaf_sorted=leaf_sorted[0], names=schema.names)
    leaf_units = None
    if types is not None:
        leaf_units = count_cells(leaves[1], [types], [schema.attribute(unit_attribute).size],
                                 n_leaves, chunk=chunk, leaf_sorted=leaf_sorted[1],
                                 names=[unit_attribute])
    return from_leaf_counts(schema, geography, leaf_counts, leaf_units, unit_attribute)


def tabulate_leaf(persons: Any, *, schema: Schema, levels: Sequence[str],
                  geocode_columns: Sequence[str] | None = None, units: Any = None,
                  unit_attribute: str | None = "hhgq", geography: Geography | None = None,
                  columns: Mapping[str, str] | None = None,
                  values: Mapping[str, Mapping[Any, Any]] | None = None,
                  chunk: int = _CHUNK) -> "LeafCounts":
    """:func:`tabulate`, but only the bottom level's counts, and those sparse
    (:func:`count_cells_sparse`): a :class:`LeafCounts`, for a geography whose bottom level is
    mostly empty (the blocks of a 2020-style part). The upper levels are sums it computes when
    asked; :meth:`LeafCounts.to_hierarchy` is what :func:`tabulate` returns.

    Parameters and errors as for :func:`tabulate`.

    Examples
    --------
    >>> from hierarchy.schema import Schema, Attribute
    >>> s = Schema((Attribute("sex", ("male", "female")), Attribute("age", ("child", "adult"))))
    >>> persons = {"state": ["A", "A", "B", "B"], "sex": [0, 1, 1, 1], "age": [1, 1, 0, 1]}
    >>> leaf = tabulate_leaf(persons, schema=s, levels=["nation", "state"])
    >>> leaf.leaf_counts.nnz, leaf.level_counts("nation").tolist(), leaf.totals("state").tolist()
    (4, [[0, 1, 1, 2]], [2, 2])
    >>> truth = tabulate(persons, schema=s, levels=["nation", "state"])
    >>> all((a == b).all() for a, b in zip(leaf.to_hierarchy().counts, truth.counts))
    True
    """
    geography, leaves, _, codes, types = _records(
        persons, schema, levels, geocode_columns, units, unit_attribute, geography, columns,
        values)
    n_leaves = geography.n_units(-1)
    counts = count_cells_sparse(leaves[0], codes, schema.shape, n_leaves, chunk=chunk,
                                names=schema.names)
    leaf_units = None
    if types is not None:
        leaf_units = count_cells(leaves[1], [types], [schema.attribute(unit_attribute).size],
                                 n_leaves, chunk=chunk, names=[unit_attribute])
    return LeafCounts(schema, geography, counts, leaf_units,
                      unit_attribute if leaf_units is not None else None)


def _records(persons, schema, levels, geocode_columns, units, unit_attribute, geography,
             columns, values):
    """What :func:`tabulate` counts: the geography, every record's leaf (and whether the
    leaves are sorted), the persons' attribute codes and the units' types (or None)."""
    levels = list(levels)
    columns = dict(columns or {})
    values = dict(values or {})
    unknown = set(columns) - set(levels[1:]) - set(schema.names)
    if unknown:
        raise HierarchyError(f"column mapping names {sorted(unknown)}, which are neither levels "
                             f"{levels[1:]} nor attributes {list(schema.names)}")
    if set(values) - set(schema.names):
        raise HierarchyError(f"values= maps {sorted(set(values) - set(schema.names))}, which are "
                             f"not attributes; attributes are {list(schema.names)}")
    if isinstance(persons, (str, os.PathLike)):
        persons = read_table(persons, role="persons")
    if isinstance(units, (str, os.PathLike)):
        units = read_table(units, role="units")
    if geocode_columns is not None and any(lv in columns for lv in levels[1:]):
        raise HierarchyError("give the geocode columns once: geocode_columns or columns=, not "
                             "both")
    geo_cols = list(geocode_columns) if geocode_columns is not None \
        else [columns.get(lv, lv) for lv in levels[1:]]
    if len(geo_cols) != len(levels) - 1:
        raise HierarchyError(f"levels {levels} need {len(levels) - 1} geocode columns, got "
                             f"{geo_cols}")
    record_sets = [[column_array(persons, c) for c in geo_cols]]
    if units is not None:
        if unit_attribute is None:
            raise HierarchyError("a units table needs unit_attribute (the attribute typing units)")
        record_sets.append([column_array(units, c) for c in geo_cols])
    if geography is None:
        geography, leaves, leaf_sorted = Geography.from_columns(levels, record_sets,
                                                                return_sorted=True)
    else:
        if tuple(levels) != geography.levels:
            raise HierarchyError(f"levels {levels} differ from the geography's "
                                 f"{list(geography.levels)}")
        leaves = [leaf_index(geography, cols) for cols in record_sets]
        leaf_sorted = [None] * len(leaves)
    codes = [_attribute_column(persons, columns.get(a.name, a.name), a, values.get(a.name))
             for a in schema.attributes]
    if geography.depth == 1:
        # No geocode columns: the number of records comes from the attribute columns (the
        # geography cannot know it), and every record is in the root.
        leaves[0] = np.zeros(len(codes[0]), dtype=np.int64)
    types = None
    if units is not None:
        attr = schema.attribute(unit_attribute)
        types = _attribute_column(units, columns.get(unit_attribute, unit_attribute), attr,
                                  values.get(unit_attribute))
        if geography.depth == 1:
            leaves[1] = np.zeros(len(types), dtype=np.int64)
    return geography, leaves, leaf_sorted, codes, types


def from_leaf_counts(schema: Schema, geography: Geography, leaf_counts: np.ndarray,
                     leaf_units: np.ndarray | None = None,
                     unit_attribute: str | None = None) -> Hierarchy:
    """A :class:`Hierarchy` from its bottom level's counts (and units), summed up the
    geography: what :func:`tabulate` builds once it has counted the records.

    Examples
    --------
    >>> from hierarchy.schema import Attribute, Schema
    >>> s = Schema((Attribute("sex", ("m", "f")),))
    >>> geo, _ = Geography.from_columns(["nation", "state"], [[["A", "B"]]])
    >>> from_leaf_counts(s, geo, np.array([[1, 2], [0, 4]])).level_counts("nation").tolist()
    [[1, 6]]
    """
    units = None if leaf_units is None else _all_levels(geography, leaf_units)
    return Hierarchy(schema, geography, _all_levels(geography, leaf_counts), units,
                     unit_attribute if units is not None else None)


@dataclass(frozen=True, eq=False)
class LeafCounts:
    """A hierarchy's exact counts held by its bottom level alone, sparse: the upper levels are
    sums computed when asked (:meth:`level_counts`, :meth:`totals`), the whole dense
    :class:`~hierarchy.histograms.Hierarchy` by :meth:`to_hierarchy`. Confidential, like the
    Hierarchy; :func:`tabulate_leaf` makes one.

    It answers what :func:`hierarchy.measurement.published_statistics` and
    :func:`hierarchy.io.check_tabulated_units` ask of a Hierarchy (``totals``,
    ``level_units``, ``leaf_counts``, ``leaf_units``), so a part of a 2020-style geography is
    checked and its invariants published without its dense blocks × cells array.

    Parameters
    ----------
    schema, geography
    leaf_counts : scipy.sparse.csr_matrix (leaves × cells), int64
    leaf_units : int64 array (leaves × unit types), optional
    unit_attribute : str, optional
        The attribute that types the units (needed with ``leaf_units``).

    Examples
    --------
    >>> from hierarchy.schema import Schema, Attribute
    >>> s = Schema((Attribute("sex", ("male", "female")),))
    >>> geo, _ = Geography.from_columns(["nation", "state"], [[["A", "B", "C"]]])
    >>> leaf = LeafCounts(s, geo, sp.csr_matrix(np.array([[1, 2], [0, 0], [0, 4]])))
    >>> leaf.level_counts("nation").tolist(), leaf.totals("state").tolist()
    ([[1, 6]], [3, 0, 4])
    >>> leaf.to_hierarchy()
    Hierarchy(nation=1, state=3 units; 7 persons; confidential)
    """

    schema: Schema
    geography: Geography
    leaf_counts: sp.csr_matrix
    leaf_units: np.ndarray | None = None
    unit_attribute: str | None = None

    def __post_init__(self):
        counts = sp.csr_matrix(self.leaf_counts)
        shape = (self.geography.n_units(-1), self.schema.size)
        if counts.shape != shape:
            raise HierarchyError(f"leaf counts have shape {counts.shape}, expected {shape}")
        object.__setattr__(self, "leaf_counts", counts)
        if self.leaf_units is not None and self.unit_attribute is None:
            raise HierarchyError("units given without the attribute that types them")

    @property
    def levels(self) -> tuple[str, ...]:
        return self.geography.levels

    def level_counts(self, level: str | int) -> np.ndarray:
        """The dense histograms of one level (units × cells): sums of the leaves' nonzero
        counts (the bottom level itself is made dense: that is what the class avoids)."""
        li = self.geography.level_index(level)
        if li == self.geography.depth - 1:
            return self.leaf_counts.toarray()
        return self.geography.aggregate(self.leaf_counts, -1, li)

    def totals(self, level: str | int) -> np.ndarray:
        """Persons per unit of ``level``."""
        per_leaf = np.asarray(self.leaf_counts.sum(axis=1), dtype=np.int64).ravel()
        return self.geography.aggregate(per_leaf, -1, level)

    def level_units(self, level: str | int) -> np.ndarray:
        """Units of each type per unit of ``level``."""
        if self.leaf_units is None:
            raise HierarchyError("these counts have no units table; tabulate one with "
                                 "tabulate_leaf(..., units=...)")
        return self.geography.aggregate(self.leaf_units, -1, level)

    def to_hierarchy(self) -> Hierarchy:
        """The dense :class:`~hierarchy.histograms.Hierarchy` of every level (what
        :func:`tabulate` returns from the same records)."""
        counts = tuple(self.level_counts(li) for li in range(self.geography.depth))
        units = None if self.leaf_units is None else _all_levels(self.geography,
                                                                 self.leaf_units)
        return Hierarchy(self.schema, self.geography, counts, units, self.unit_attribute)


def _all_levels(geography: Geography, leaf_values: np.ndarray) -> tuple[np.ndarray, ...]:
    out = [leaf_values]
    for lv in range(geography.depth - 1, 0, -1):
        out.append(np.add.reduceat(out[-1], geography.child_offsets(lv - 1)[:-1], axis=0))
    return tuple(reversed(out))
