"""A table of counts whose rows are the cells, read from CSV and completed (for the ``postproc mis``
command; :mod:`postproc.methods.sampling.table` releases it).

:func:`read_count_table` reads and checks a CSV of counts; :func:`complete_table` checks that it
has a row for every cell of the cross-product of its key columns' levels, or completes it with
zero rows when the levels are given (releasing only the rows a table has would publish which
cells are zero).

Examples
--------
>>> keys = pd.DataFrame({"sex": ["f", "m"], "adult": ["1", "1"]})
>>> table = _count_table(keys, np.array([3, 4]), {"sex": ("f", "m"), "adult": ("1",)},
...                      "count", "t.csv", "t")
>>> complete_table(table, levels={"sex": ["f", "m"], "adult": ["0", "1"]}).counts.tolist()
[0, 3, 0, 4]
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np
import pandas as pd

from hierarchy.errors import HierarchyError
from hierarchy.schema import Attribute, Schema
from postproc.errors import ConfidentialInputError, PostprocError
from postproc.methods.sampling.target import MEMORY_LIMIT, format_bytes

__all__ = ["CountTable", "read_count_table", "complete_table", "MAX_CELLS"]

#: Largest table (cells of the cross-product of its levels) ``postproc mis`` builds.
MAX_CELLS = 10_000_000

_INTEGER = re.compile(r"^\s*[+-]?\d+\s*$")


@dataclass(frozen=True, eq=False)
class CountTable:
    """A table of counts whose rows are the cells.

    Attributes
    ----------
    keys : DataFrame
        The key columns as read (strings), one row per cell.
    counts : int64 array
    schema : Schema
        One attribute per key column, levels in order of first appearance.
    cells : int64 array
        Each row's cell in the schema's cross-product.
    count_column : str
    source : str

    See Also
    --------
    read_count_table : read one from a CSV file.

    Examples
    --------
    >>> keys = pd.DataFrame({"sex": ["f", "f", "m", "m"], "adult": ["0", "1", "0", "1"]})
    >>> schema = Schema((Attribute("sex", ("f", "m")), Attribute("adult", ("0", "1"))))
    >>> table = CountTable(keys, np.array([3, 5, 2, 4]), schema, np.arange(4))
    >>> table.n, table.cell_labels()[:2]
    (4, ['sex=f, adult=0', 'sex=f, adult=1'])
    """

    keys: pd.DataFrame
    counts: np.ndarray
    schema: Schema
    cells: np.ndarray
    count_column: str = "count"
    source: str = "table"

    @property
    def n(self) -> int:
        return int(self.counts.size)

    def cell_labels(self) -> list[str]:
        """``'sex=female, age_group=<5'`` for each row."""
        cols = list(self.keys.columns)
        return [", ".join(f"{c}={v}" for c, v in zip(cols, row))
                for row in self.keys.itertuples(index=False)]


def read_count_table(path: str | Path, *, count_column: str = "count") -> CountTable:
    """Read a CSV whose rows are cells: key columns and one column of nonnegative integer counts.

    Parameters
    ----------
    path : str or pathlib.Path
    count_column : str

    Returns
    -------
    CountTable

    Raises
    ------
    PostprocError
        Missing file, missing count column, no key columns, a key column name that is not an
        identifier, an empty key, a non-integer or negative count, or a repeated key (naming the
        file, line and value).

    Examples
    --------
    >>> import tempfile, os
    >>> path = os.path.join(tempfile.mkdtemp(), "t.csv")
    >>> _ = open(path, "w").write("g,count\\na,3\\nb,2.5\\n")
    >>> read_count_table(path)
    Traceback (most recent call last):
    ...
    postproc.errors.ConfidentialInputError: .../t.csv, line 3: count '2.5' is not an integer; counts
    must be nonnegative integers
    """
    from hierarchy.io.storage import special_file_kind

    path = Path(path)
    if not path.exists():
        raise PostprocError(f"{path}: no such file; pass --table with a CSV of counts")
    kind = special_file_kind(path)
    if kind is not None:
        raise PostprocError(f"{path} is not a regular file: it is {kind}; pass --table with a "
                            "CSV file on disk (reading a pipe or device could block forever)")
    try:
        frame = pd.read_csv(path, dtype=str, keep_default_na=False, skipinitialspace=True)
    except (pd.errors.EmptyDataError, pd.errors.ParserError, UnicodeDecodeError) as exc:
        raise PostprocError(f"{path}: not a readable CSV ({str(exc).strip()})") from None
    frame.columns = [str(c).strip() for c in frame.columns]
    if count_column not in frame.columns:
        raise PostprocError(f"{path}: no column {count_column!r}; the columns are "
                            f"{list(frame.columns)} (choose one with --count-column)")
    keys = [c for c in frame.columns if c != count_column]
    if not keys:
        raise PostprocError(f"{path}: no key columns besides {count_column!r}; each row needs "
                            "the attributes of its cell")
    for c in keys:
        if not c.isidentifier():
            raise PostprocError(f"{path}: column name {c!r} is not an identifier (letters, "
                                "digits, _); rename it so invariants like marginal(...) can name "
                                "it")
    def refuse(detail: str, public: str) -> ConfidentialInputError:
        # a line, a count or a cell of the confidential table: in the full message only
        return ConfidentialInputError(f"{path}, {detail}", public=f"--table: {public}")

    if frame.empty:
        raise PostprocError(f"{path}: no rows")
    text = frame[count_column].astype(str)
    bad = np.flatnonzero(~text.str.match(_INTEGER).to_numpy())
    rule = "counts must be nonnegative integers"
    if bad.size:
        i = int(bad[0])
        raise refuse(f"line {i + 2}: count {text.iloc[i]!r} is not an integer; {rule}",
                     f"some counts are not integers; {rule}")
    counts = text.str.strip().astype(np.int64).to_numpy()
    neg = np.flatnonzero(counts < 0)
    if neg.size:
        i = int(neg[0])
        raise refuse(f"line {i + 2}: count {counts[i]} is negative; {rule}",
                     f"some counts are negative; {rule}")
    key_frame = frame[keys].apply(lambda col: col.str.strip())
    empty = np.argwhere((key_frame == "").to_numpy())
    if empty.size:
        i, j = empty[0]
        raise refuse(f"line {i + 2}: column {keys[j]!r} is empty",
                     f"column {keys[j]!r} is empty in some rows")
    dup = key_frame.duplicated(keep="first").to_numpy()
    if dup.any():
        i = int(np.flatnonzero(dup)[0])
        first = int(np.flatnonzero((key_frame == key_frame.iloc[i]).all(axis=1).to_numpy())[0])
        raise refuse(f"line {i + 2}: the cell {dict(key_frame.iloc[i])} repeats line "
                     f"{first + 2}; each cell must appear once",
                     "some cells appear on more than one row; each cell must appear once")
    levels = {c: tuple(dict.fromkeys(key_frame[c].tolist())) for c in keys}
    return _count_table(key_frame.reset_index(drop=True), counts, levels, count_column, str(path),
                        path.stem)


def _count_table(keys: pd.DataFrame, counts: np.ndarray, levels: dict[str, tuple[str, ...]],
                 count_column: str, source: str, name: str) -> CountTable:
    """A :class:`CountTable` whose schema has the given levels per key column."""
    attributes = []
    codes = {}
    for c in keys.columns:
        try:
            attributes.append(Attribute(c, levels[c]))
        except HierarchyError as exc:
            raise PostprocError(f"{source}: {exc}") from None
        codes[c] = pd.Index(levels[c]).get_indexer(keys[c]).astype(np.int64)
    schema = Schema(tuple(attributes), name=name)
    return CountTable(keys, counts, schema, schema.cell_index(codes), count_column, source)


def _table_bytes(cells: int, columns: int) -> int:
    """Working memory of ``postproc mis`` on a table of ``cells`` rows before sampling: keys,
    counts, codes, cell labels and the target's vectors (an upper estimate)."""
    return cells * (160 + 40 * columns)


def complete_table(table: CountTable, *, levels: Mapping[str, Sequence[str]] | None = None,
                   derived: Mapping[str, str] | None = None) -> CountTable:
    """Check that a table has a row for every cell, or complete it with zero rows.

    The cells are the cross-product of the levels of the key columns other than the *derived*
    ones. A table without some of its zero rows (as ``pandas`` ``groupby().size()`` makes) would
    otherwise be released with exactly the rows it has, publishing which cells are zero; so a
    missing cell is an error unless ``levels`` is given, and then the table is rebuilt as the
    full cross-product in the order of the given levels (row-major, the first column slowest),
    with a zero count for every cell it lacked. The order never depends on which rows were
    missing.

    Without ``levels`` the levels are those observed, so a level with no row at all (every
    cell of it zero) cannot be noticed: give ``levels`` whenever a level may be empty.

    Parameters
    ----------
    table : CountTable
    levels : mapping of str to sequence of str, optional
        The levels of every non-derived key column (public knowledge, not read from the data).
    derived : mapping of str to str, optional
        ``{column: source}`` for a key column that is a function of another (``voting_age`` of
        ``age_group``): it is not part of the cross-product, and a completed row takes its value
        from the rows of the same ``source`` level.

    Returns
    -------
    CountTable
        ``table`` itself when it is complete and no ``levels`` are given.

    Raises
    ------
    PostprocError
        Missing cells without ``levels`` (how many, one example, the fix); a duplicated cell; a
        label not among the given levels; levels missing for a column or given for an unknown
        one; a derived column that is not a function of its source; a cross-product of more
        than ``MAX_CELLS`` cells or ``MEMORY_LIMIT`` bytes (refused before allocating it).

    Examples
    --------
    >>> keys = pd.DataFrame({"sex": ["f", "m"], "adult": ["1", "0"]})
    >>> t = _count_table(keys, np.array([3, 4]), {"sex": ("f", "m"), "adult": ("1", "0")},
    ...                  "count", "t.csv", "t")
    >>> complete_table(t)
    Traceback (most recent call last):
    ...
    postproc.errors.ConfidentialInputError: t.csv: 2 of the 4 cells (sex 2 × adult 2 levels) have no
    row, e.g. sex=f, ...
    >>> full = complete_table(t, levels={"sex": ["f", "m"], "adult": ["0", "1"]})
    >>> full.keys.to_dict("list"), full.counts.tolist()
    ({'sex': ['f', 'f', 'm', 'm'], 'adult': ['0', '1', '0', '1']}, [0, 3, 4, 0])
    """
    derived = _checked_derived(table, derived)
    primary = [c for c in table.keys.columns if c not in derived]
    if levels is None:
        level_lists = {c: table.schema.attribute(c).labels for c in primary}
    else:
        level_lists = _given_levels(table, levels, derived, primary)
    cells = _Cells.of(table, primary, level_lists)
    if levels is None:
        if cells.missing == 0:
            return table
        raise _missing_cells_error(table, cells)
    return _full_table(table, cells, derived)


def _checked_derived(table: CountTable, derived: Mapping[str, str] | None) -> dict[str, str]:
    """``{column: source}`` as strings, each a key column that is a function of another,
    non-derived one."""
    columns = list(table.keys.columns)
    derived = {str(k): str(v) for k, v in (derived or {}).items()}
    for column, source in derived.items():
        if column not in columns or source not in columns:
            bad = column if column not in columns else source
            raise PostprocError(f"derived column {column}={source}: {bad!r} is not a key column "
                                f"of {table.source}; the key columns are {columns}")
        if source == column or source in derived:
            raise PostprocError(f"derived column {column}={source}: the source must be another, "
                                "non-derived key column")
        pairs = table.keys[[source, column]].drop_duplicates()
        clash = pairs[pairs[source].duplicated(keep=False)]
        if not clash.empty:
            level = clash[source].iloc[0]
            values = clash.loc[clash[source] == level, column].tolist()
            raise PostprocError(f"{table.source}: {column!r} is not a function of {source!r}: "
                                f"{source}={level} has {column}={values[0]} and "
                                f"{column}={values[1]}; drop --derived {column}={source}")
    return derived


def _given_levels(table: CountTable, levels: Mapping[str, Sequence[str]],
                  derived: dict[str, str], primary: list[str]) -> dict[str, tuple[str, ...]]:
    """The given levels of every primary key column, checked: non-empty distinct labels, for
    key columns that are not derived, every column given, every label in the table among them."""
    columns = list(table.keys.columns)
    level_lists = {}
    for column, labels in levels.items():
        column = str(column)
        if column not in columns:
            raise PostprocError(f"levels given for {column!r}, which is not a key column of "
                                f"{table.source}; the key columns are {columns}")
        if column in derived:
            raise PostprocError(f"levels given for the derived column {column!r}; its levels "
                                f"follow from {derived[column]!r}'s")
        labels = tuple(str(v).strip() for v in labels)
        if not labels or "" in labels:
            raise PostprocError(f"the levels of {column!r} must be non-empty labels, not "
                                f"{list(labels)}")
        if len(set(labels)) != len(labels):
            dup = sorted({v for v in labels if labels.count(v) > 1})
            raise PostprocError(f"the levels of {column!r} repeat {dup}")
        level_lists[column] = labels
    lacking = [c for c in primary if c not in level_lists]
    if lacking:
        raise PostprocError(f"give the levels of every key column (missing: "
                            f"{', '.join(lacking)}), e.g. --levels {lacking[0]}=A,B,C")
    for column in primary:
        known = pd.Index(level_lists[column])
        unknown = np.flatnonzero(known.get_indexer(table.keys[column]) < 0)
        if unknown.size:
            label = table.keys[column].iloc[int(unknown[0])]
            raise PostprocError(f"{table.source}: a row has {column}={label}, which is not "
                                f"among the levels given for {column!r} "
                                f"({', '.join(level_lists[column])}); add it to --levels")
    return level_lists


@dataclass(frozen=True, eq=False)
class _Cells:
    """The cross-product of the primary (non-derived) key columns' levels, row-major, and where
    the table's rows fall in it: ``flat`` (each row's cell) and ``present`` (per cell)."""

    primary: list[str]
    level_lists: dict[str, tuple[str, ...]]
    shape: tuple[int, ...]
    flat: np.ndarray
    present: np.ndarray

    @property
    def size(self) -> int:
        return int(self.present.size)

    @property
    def missing(self) -> int:
        """Cells without a row (every row is its own cell: :meth:`of` checks it)."""
        return self.size - int(self.present.sum())

    @classmethod
    def of(cls, table: CountTable, primary: list[str],
           level_lists: dict[str, tuple[str, ...]]) -> _Cells:
        """The cells of ``table``; refused when the cross-product is too large (before
        allocating it) or when two rows are the same cell."""
        shape = tuple(len(level_lists[c]) for c in primary)
        size = math.prod(shape)
        need = _table_bytes(size, table.keys.shape[1])
        if size > MAX_CELLS or need > MEMORY_LIMIT:
            raise PostprocError(
                f"{table.source}: the cross-product of the levels "
                f"({_levels_text(primary, shape)}) has {size:,} cells and would need about "
                f"{format_bytes(need)} (limits: {MAX_CELLS:,} cells, "
                f"{format_bytes(MEMORY_LIMIT)}); release a smaller table, e.g. one per level of "
                "a column, or fewer levels")
        codes = [pd.Index(level_lists[c]).get_indexer(table.keys[c]) for c in primary]
        flat = np.ravel_multi_index(codes, shape)       # primary is never empty: a source is in it
        present = np.zeros(size, dtype=bool)
        present[flat] = True
        if int(present.sum()) != table.n:
            seen = pd.Series(flat).duplicated(keep="first").to_numpy()
            i = int(np.flatnonzero(seen)[0])
            first = int(np.flatnonzero(flat == flat[i])[0])
            raise ConfidentialInputError(
                f"{table.source}: rows {first + 1} and {i + 1} are the same cell "
                f"({', '.join(f'{c}={table.keys[c].iloc[i]}' for c in primary)}); each cell "
                "must appear once",
                public="--table: some rows are the same cell; each cell must appear once")
        return cls(primary, level_lists, shape, flat, present)


def _levels_text(primary: list[str], shape: tuple[int, ...]) -> str:
    """``'sex 2 × adult 2'``: each primary column's number of levels."""
    return " × ".join(f"{c} {k}" for c, k in zip(primary, shape))


def _missing_cells_error(table: CountTable, cells: _Cells) -> ConfidentialInputError:
    """The refusal of a table with cells that have no row (and no ``levels`` to add them)."""
    where = np.unravel_index(int(np.flatnonzero(~cells.present)[0]), cells.shape)
    example = ", ".join(f"{c}={cells.level_lists[c][k]}" for c, k in zip(cells.primary, where))
    fix = ("releasing only the rows given would publish which cells are zero. If the "
           "missing cells are zero (pandas groupby().size() drops them), give every key "
           "column's levels with --levels COLUMN=L1,L2,... (library: levels=) to add them "
           "as zero rows; if a column is a function of another (voting_age of age_group), "
           "declare it with --derived COLUMN=SOURCE (library: derived=)")
    return ConfidentialInputError(
        f"{table.source}: {cells.missing:,} of the {cells.size:,} cells "
        f"({_levels_text(cells.primary, cells.shape)} levels) have no row, e.g. {example}; {fix}",
        public=f"--table: some cells of the cross-product of its columns' levels have no "
               f"row; {fix}")


def _full_table(table: CountTable, cells: _Cells, derived: dict[str, str]) -> CountTable:
    """The table rebuilt as the full cross-product of ``cells`` (row-major), a zero count for
    every cell it lacked, each derived column taken from its source's rows."""
    counts = np.zeros(cells.size, dtype=np.int64)
    counts[cells.flat] = table.counts
    index = np.unravel_index(np.arange(cells.size), cells.shape)
    frame = {c: np.asarray(cells.level_lists[c], dtype=object)[index[i]]
             for i, c in enumerate(cells.primary)}
    for column, source in derived.items():
        mapping = dict(zip(table.keys[source], table.keys[column]))
        values = pd.Series(frame[source]).map(mapping)
        if values.isna().any():
            level = frame[source][int(np.flatnonzero(values.isna().to_numpy())[0])]
            raise PostprocError(f"{table.source}: the derived column {column!r} has no value "
                                f"for {source}={level}, which has no row; add a row for it "
                                "(count 0) to the table")
        frame[column] = values.to_numpy(dtype=object)
    columns = list(table.keys.columns)
    keys = pd.DataFrame({c: frame[c] for c in columns})
    all_levels = {c: cells.level_lists[c] if c in cells.level_lists else
                  tuple(dict.fromkeys(keys[c].tolist())) for c in columns}
    return _count_table(keys, counts, all_levels, table.count_column, table.source,
                        table.schema.name)
