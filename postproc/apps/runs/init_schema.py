"""What ``postproc init`` makes of a data file's columns: the geography's levels checked, and a
schema attribute proposed for every other column.

Each column becomes one :class:`ColumnPlan`:

* **text** (and booleans) → one label per value, sorted;
* **categorical** (a pandas category, a parquet dictionary column) → its categories, in their
  order (unused ones included: the reader takes every category for a level);
* **integers with few values** (at most :data:`MAX_LABELS`) → one label per value, in numeric
  order, through a ``[data] values`` map (the file holds the integers, the schema the labels);
* **integers with many values** (≥ 0) → ranges of a round width — 1, 2, 5, 10, 20, 25, 50,
  100, … — the narrowest giving at most :data:`MAX_GROUPS` groups, starting at the smallest
  value rounded down to the width, the last one open (``"90+"``): equal-width bins, not
  quantiles, so that only the column's smallest and largest values shape them; a coarser
  alternative (at most :data:`ALTERNATIVE_GROUPS` groups) is offered in a comment;
* a column whose every value is distinct (more than :data:`MAX_LABELS` of them; for integers,
  a run of consecutive numbers) is an identifier: left out, with a comment.

Refused, naming the column and the fix (``--skip COLUMN`` leaves a column out): missing values,
floating-point numbers, negative integers with many values, text with more than
:data:`MAX_TEXT_LABELS` values, and other types (dates, times, binary).

Examples
--------
>>> range_groups(0, 99, MAX_GROUPS)
(10, ['0-9', '10-19', '20-29', '30-39', '40-49', '50-59', '60-69', '70-79', '80-89', '90+'])
>>> range_groups(18, 64, ALTERNATIVE_GROUPS)
(20, ['0-19', '20-39', '40-59', '60+'])
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from postproc.errors import PostprocError

__all__ = ["ColumnPlan", "plan_columns", "range_groups", "check_levels", "config_name",
           "MAX_LABELS", "MAX_GROUPS", "ALTERNATIVE_GROUPS", "MAX_TEXT_LABELS"]

#: Integer columns with at most this many distinct values get one label per value.
MAX_LABELS = 12
#: Integer columns with more values are grouped in at most this many ranges …
MAX_GROUPS = 10
#: … and a coarser alternative of at most this many is offered in a comment.
ALTERNATIVE_GROUPS = 4
#: A text column with more distinct values than this is refused (too many labels).
MAX_TEXT_LABELS = 1000

_INTEGER = re.compile(r"^\s*-?(0|[1-9][0-9]*)\s*$")
_NUMBER = re.compile(r"^\s*[-+]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][-+]?[0-9]+)?\s*$|"
                     r"^\s*[-+]?(nan|inf|infinity)\s*$", re.IGNORECASE)
_WIDTH_STEPS = (1, 2, 2.5, 5)


@dataclass(frozen=True)
class ColumnPlan:
    """One column of the data file and the attribute proposed for it.

    ``kind`` is ``"labels"`` (text, booleans, a categorical, or few integers), ``"ranges"``
    (many integers, grouped) or ``"skipped"`` (left out; ``note`` says why). ``values`` maps
    the file's values to the labels (``[data] values``) when the file does not hold the labels
    themselves; ``alternative`` is a coarser grouping ``(labels, values)`` of a ranged column.

    Examples
    --------
    >>> plan = ColumnPlan("age", "age", "ranges", ("0-49", "50+"),
    ...                   {"0-49": "0-49", "50+": "50+"}, "integers 0..99")
    >>> plan.is_attribute, len(plan.labels)
    (True, 2)
    """

    column: str
    name: str
    kind: str
    labels: tuple[str, ...] = ()
    values: dict[str, str] = field(default_factory=dict)
    note: str = ""
    alternative: tuple[tuple[str, ...], dict[str, str]] | None = None

    @property
    def is_attribute(self) -> bool:
        """Whether the column becomes an attribute of the schema (it is not left out)."""
        return self.kind != "skipped"


def config_name(column: str) -> str:
    """A name for ``column`` that queries and file names can take: each character other than a
    letter, digit or underscore becomes ``_``, and a leading digit gets a ``c_`` before it.

    Examples
    --------
    >>> config_name("home owner"), config_name("2020 tenure"), config_name("sex")
    ('home_owner', 'c_2020_tenure', 'sex')
    """
    name = re.sub(r"\W", "_", str(column), flags=re.ASCII)
    return f"c_{name}" if not name or name[0].isdigit() else name


def range_groups(low: int, high: int, most: int) -> tuple[int, list[str]]:
    """Equal ranges of a round width covering ``low..high``, at most ``most`` of them: the
    width and the labels (``"lo-hi"``, the last one open, ``"lo+"``).

    The width is the smallest of 1, 2, 2.5, 5 × 10^k (whole numbers) that needs no more than
    ``most`` groups; the first group starts at ``low`` rounded down to a multiple of it.

    Examples
    --------
    >>> range_groups(1, 7, 10)
    (1, ['1', '2', '3', '4', '5', '6', '7+'])
    >>> range_groups(0, 1234, 4)
    (500, ['0-499', '500-999', '1000+'])
    """
    scale = 1
    while True:
        for step in _WIDTH_STEPS:
            width = step * scale
            if width != int(width):
                continue
            width = int(width)
            start = (low // width) * width
            groups = (high - start) // width + 1
            if groups <= most:
                return width, _range_labels(start, width, groups)
        scale *= 10


def _range_labels(start: int, width: int, groups: int) -> list[str]:
    labels = []
    for i in range(groups):
        lo = start + i * width
        if i == groups - 1:
            labels.append(f"{lo}+")
        else:
            labels.append(str(lo) if width == 1 else f"{lo}-{lo + width - 1}")
    return labels


def check_levels(table: pa.Table, levels: Sequence[str]) -> None:
    """Refuse levels that are not columns of ``table``, have missing values, or whose geocodes
    do not nest (a unit of a level under two units of the level above). The messages name the
    levels and columns, never a value of the data.

    Examples
    --------
    >>> table = pa.table({"region": ["N", "S"], "district": ["D1", "D1"]})
    >>> check_levels(table, ["region", "village"])
    Traceback (most recent call last):
    ...
    postproc.errors.PostprocError: the data have no column for level(s) ['village']; the
    columns are ['region', 'district'] (--levels names the geocode columns, largest units first)
    >>> check_levels(table, ["region", "district"])
    Traceback (most recent call last):
    ...
    postproc.errors.PostprocError: 1 geocode(s) of level 'district' lie in more than one
    'region' unit: a level's geocodes must be unique within it (make them so in the data, e.g.
    by putting the code of the unit above in front of each)
    """
    missing = [lv for lv in levels if lv not in table.column_names]
    if missing:
        raise PostprocError(f"the data have no column for level(s) {missing}; the columns are "
                            f"{table.column_names} (--levels names the geocode columns, "
                            "largest units first)")
    for level in levels:
        if table.column(level).null_count:
            raise PostprocError(f"level column {level!r} has missing values: every person "
                                "needs a geocode at every level")
    codes = [pc.cast(table.column(lv), pa.string()) for lv in levels]
    for parent, child, above, below in zip(levels, levels[1:], codes, codes[1:]):
        parents = pa.table({"unit": below, "parent": above}).group_by("unit").aggregate(
            [("parent", "count_distinct")])
        shared = pc.sum(pc.greater(parents.column("parent_count_distinct"), 1)).as_py() or 0
        if shared:
            raise PostprocError(f"{shared} geocode(s) of level {child!r} lie in more than one "
                                f"{parent!r} unit: a level's geocodes must be unique within it "
                                "(make them so in the data, e.g. by putting the code of the "
                                "unit above in front of each)")


def plan_columns(table: pa.Table, *, exclude: Sequence[str] = (),
                 skip: Sequence[str] = ()) -> list[ColumnPlan]:
    """A :class:`ColumnPlan` for every column of ``table`` but ``exclude`` (the levels').

    Parameters
    ----------
    table : pyarrow.Table
        The data, as :func:`hierarchy.io.read_table` reads them (a CSV's columns are text).
    exclude : sequence of str
        Columns that are not attributes (the geography's).
    skip : sequence of str
        Columns to leave out (each must be a column).

    Returns
    -------
    list of ColumnPlan
        In the table's column order.

    Raises
    ------
    PostprocError
        A ``skip`` that is not a column; a column with missing values, floating-point numbers,
        many negative integers, too many text values, or a type no attribute can have; two
        columns whose names become the same attribute name — naming the column and the fix.

    Examples
    --------
    >>> table = pa.table({"sex": ["m", "f", "f"], "kids": [0, 2, 1],
    ...                   "tenure": pa.array(["own", "rent", "own"]).dictionary_encode()})
    >>> for plan in plan_columns(table):
    ...     print(plan.name, plan.labels, plan.values)
    sex ('f', 'm') {}
    kids ('0', '1', '2') {'0': '0', '1': '1', '2': '2'}
    tenure ('own', 'rent') {}
    >>> plan_columns(pa.table({"weight": [1.5, 2.0]}))
    Traceback (most recent call last):
    ...
    postproc.errors.PostprocError: column 'weight' holds floating-point numbers, which no
    attribute can: a histogram counts persons by labels. Group its values into labels or
    integers in the data, or leave it out with --skip weight
    """
    unknown = [c for c in skip if c not in table.column_names]
    if unknown:
        raise PostprocError(f"--skip names {unknown}, which are not columns of the data; the "
                            f"columns are {table.column_names}")
    plans = []
    for column in table.column_names:
        if column in exclude:
            continue
        if column in skip:
            plans.append(ColumnPlan(column, config_name(column), "skipped",
                                    note="left out (--skip)"))
            continue
        plans.append(_plan(column, table.column(column), table.num_rows))
    names = [p.name for p in plans if p.is_attribute]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        columns = [p.column for p in plans if p.name == twice[0]]
        raise PostprocError(f"columns {columns} would both be the attribute {twice[0]!r}; "
                            "rename one in the data, or leave one out with --skip")
    return plans


def _plan(column: str, values: pa.ChunkedArray, rows: int) -> ColumnPlan:
    """The plan of one attribute column (see the module's rules)."""
    name = config_name(column)
    skip = f"leave it out with --skip {column}"
    if values.null_count:
        raise PostprocError(f"column {column!r} has missing values: every person needs a "
                            "value for every attribute. Fill them in the data (with a label "
                            f"such as \"unknown\"), or {skip}")
    kind = values.type
    if pa.types.is_dictionary(kind):
        labels = _categories(values)
        return ColumnPlan(column, name, "labels", labels,
                          note=f"categorical, {len(labels)} categories in their order")
    if pa.types.is_boolean(kind):
        return ColumnPlan(column, name, "labels", ("false", "true"), note="true or false")
    if pa.types.is_integer(kind):
        return _integers(column, name, values.to_numpy(), rows, "integers")
    if pa.types.is_floating(kind) or pa.types.is_decimal(kind):
        raise _float_error(column)
    if not (pa.types.is_string(kind) or pa.types.is_large_string(kind)):
        raise PostprocError(f"column {column!r} is of type {kind}, which no attribute can "
                            f"be: convert it to labels (text) or integers in the data, or "
                            f"{skip}")
    distinct = pc.unique(values).to_pylist()
    if all(_INTEGER.match(v) for v in distinct):
        return _integers(column, name, np.array([int(v) for v in distinct]), rows,
                         "integers (as text)")
    if all(_NUMBER.match(v) for v in distinct):
        raise _float_error(column)
    if len(distinct) == rows and rows > MAX_LABELS:
        return ColumnPlan(column, name, "skipped",
                          note="left out: every value is distinct (an identifier?)")
    if len(distinct) > MAX_TEXT_LABELS:
        raise PostprocError(f"column {column!r} has {len(distinct):,} distinct values, more "
                            f"than the {MAX_TEXT_LABELS:,} labels an attribute may get here: "
                            f"group them into fewer labels in the data, or {skip}")
    labels = tuple(sorted(distinct))
    return ColumnPlan(column, name, "labels", labels, note=f"text, {len(labels)} values")


def _categories(values: pa.ChunkedArray) -> tuple[str, ...]:
    """A dictionary column's categories, in their order (chunks' own dictionaries merged)."""
    seen: dict[str, None] = {}
    for chunk in values.chunks:
        for category in chunk.dictionary.to_pylist():
            seen.setdefault(str(category), None)
    return tuple(seen)


def _integers(column: str, name: str, numbers: np.ndarray, rows: int, what: str
              ) -> ColumnPlan:
    """The plan of an integer column: labels for few values, ranges for many, skipped when
    every row's value is its own."""
    values = np.unique(numbers)
    low, high = int(values[0]), int(values[-1])
    if values.size <= MAX_LABELS:
        labels = tuple(str(v) for v in values.tolist())
        return ColumnPlan(column, name, "labels", labels, {v: v for v in labels},
                          note=f"{what}, {values.size} values, one label each")
    if values.size == rows and high - low + 1 == rows:
        return ColumnPlan(column, name, "skipped",
                          note="left out: every value is distinct, in one run (an identifier?)")
    if low < 0:
        raise PostprocError(f"column {column!r} holds {values.size} distinct integers, some "
                            "below 0, which cannot be grouped in ranges here: group them into "
                            f"labels in the data, or leave it out with --skip {column}")
    width, labels = range_groups(low, high, MAX_GROUPS)
    plan_labels = tuple(labels)
    alt_width, alt = range_groups(low, high, ALTERNATIVE_GROUPS)
    alternative = None if alt_width == width else (tuple(alt), {v: v for v in alt})
    return ColumnPlan(column, name, "ranges", plan_labels, {v: v for v in labels},
                      note=f"{what} {low}..{high}, in {len(labels)} groups of {width} (the "
                           "last open)",
                      alternative=alternative)


def _float_error(column: str) -> PostprocError:
    return PostprocError(f"column {column!r} holds floating-point numbers, which no attribute "
                         "can: a histogram counts persons by labels. Group its values into "
                         "labels or integers in the data, or leave it out with --skip "
                         f"{column}")

