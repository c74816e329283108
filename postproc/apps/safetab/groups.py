"""Population groups: who belongs to which iteration, the stability, and the true counts.

A population group is a (geographic entity, iteration) pair of a level. Each record lies in at
most one entity of a level's geography — exactly one, unless the level names an ``outside``
geocode (``"9999"``: not in an AIANNH area), whose records are in none — and in every iteration
whose codes and Hispanic-origin condition it matches (:func:`iteration_members`), so it belongs
to as many groups of the level as it matches iterations (none when outside); the largest such
number over the records is the level's observed stability (:func:`tabulate_groups`), which must
not exceed the declared one (:func:`check_stability`).

True counts are tabulated once per group by sex × Age23 (46 cells, ``np.bincount``, one pass per
iteration over the records); every released table is a sum of those cells.

Examples
--------
>>> import pyarrow as pa
>>> from postproc.apps.safetab.config import DataColumns, Iteration, Level
>>> persons = pa.table({"state": ["01", "01", "02"], "sex": [1, 2, 2], "age": [30, 4, 70],
...                     "race1": [1000, 3102, 2000], "race2": [3102, 1000, 0]})
>>> records = prepare_records(persons, DataColumns(races=("race1", "race2"), origin=None),
...                           ["state"])
>>> its = {"W": Iteration("W", "White", [1000]), "C": Iteration("C", "Cherokee", [3102])}
>>> level = Level("state", "state", ("W", "C"), 2, None, 5, (1, 2, 3))
>>> counts = tabulate_groups(records, [level], its)["state"]
>>> counts.totals().tolist(), counts.observed_stability
([[2, 2], [0, 0]], 2)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from hierarchy.geography import one_dictionary
from postproc.apps.safetab.config_types import HISPANIC, MAX_CODE, DataColumns, Iteration, Level
from postproc.apps.safetab.recodes import AGE23, MAX_AGE, SEXES
from postproc.errors import ConfidentialInputError, PostprocError

__all__ = ["Records", "prepare_records", "iteration_members", "GroupCounts", "tabulate_groups",
           "check_stability", "NATION"]

#: The geography name that, without a column of that name, means one entity for all records.
NATION = "nation"
_CELLS = len(SEXES) * AGE23.size          # 46 sex × Age23 cells


@dataclass(frozen=True)
class Records:
    """The columns SafeTab needs, as numpy arrays (one row per record).

    Parameters
    ----------
    geography : dict of str to (numpy.ndarray, numpy.ndarray)
        For each geography column: the entity index of every record (int32, 0-based) and the
        entity geocodes (sorted strings).
    cell : numpy.ndarray
        The sex × Age23 cell of every record: ``23 · (sex − 1) + Age23 group`` (int16).
    races : numpy.ndarray
        Detailed race codes, shape (records, race columns), 0 = not reported (int32).
    origin : numpy.ndarray or None
        Detailed Hispanic origin codes, 0 = not Hispanic (int32).

    Examples
    --------
    Made by :func:`prepare_records`; ``"nation"`` needs no column (one entity, ``US``):

    >>> persons = pa.table({"county": ["001", "002", "001"], "sex": [2, 1, 1],
    ...                     "age": [0, 44, 90], "race1": [1000, 1000, 4000],
    ...                     "hisp_origin": [0, 0, 0]})
    >>> records = prepare_records(persons, DataColumns(races=("race1",)), ["county", "nation"])
    >>> records.size, records.cell.tolist(), records.races[:, 0].tolist()
    (3, [23, 11, 22], [1000, 1000, 4000])
    >>> entity, geocodes = records.geography["county"]
    >>> entity.tolist(), geocodes.tolist(), records.geography["nation"][1].tolist()
    ([0, 1, 0], ['001', '002'], ['US'])
    """

    geography: Mapping[str, tuple[np.ndarray, np.ndarray]]
    cell: np.ndarray
    races: np.ndarray
    origin: np.ndarray | None = field(default=None)

    @property
    def size(self) -> int:
        """Number of records."""
        return int(self.cell.size)


def _column(persons: pa.Table, name: str, what: str) -> pa.ChunkedArray:
    if name not in persons.column_names:
        raise PostprocError(f"the persons data has no column {name!r} ({what}); its columns are "
                            f"{persons.column_names}; name the right one in [data.columns] or "
                            f"the level's geography")
    column = persons.column(name)
    if column.null_count:
        raise ConfidentialInputError(f"column {name!r} ({what}) has {column.null_count} "
                                     f"missing values; every record needs one",
                                     public=f"column {name!r} ({what}) has missing values; "
                                            f"every record needs one")
    return column


def _integers(persons: pa.Table, name: str, what: str, lo: int, hi: int) -> np.ndarray:
    column = _column(persons, name, what)
    if not pa.types.is_integer(column.type):
        raise PostprocError(f"column {name!r} ({what}) must hold integers, not {column.type}")
    values = column.to_numpy()
    if values.size:
        bad = np.flatnonzero((values < lo) | (values > hi))
        if bad.size:
            raise ConfidentialInputError(
                f"column {name!r} ({what}) must be in {lo}..{hi}, but {bad.size} records are "
                f"not (e.g. record {bad[0]}: {values[bad[0]]})",
                public=f"column {name!r} ({what}) must be in {lo}..{hi}, but some records are "
                       f"not")
    return values


def _entities(persons: pa.Table, name: str) -> tuple[np.ndarray, np.ndarray]:
    """(entity index per record, sorted geocodes of the entities that have records)."""
    if name == NATION and name not in persons.column_names:
        return np.zeros(persons.num_rows, np.int32), np.array(["US"])
    column = _column(persons, name, "geography")
    if not pa.types.is_dictionary(column.type):
        column = pc.dictionary_encode(column)
    column = one_dictionary(column)
    if column.num_chunks == 0:
        return np.zeros(0, np.int32), np.array([], dtype=str)
    index = np.concatenate([c.indices.to_numpy(zero_copy_only=False) for c in column.chunks])
    values = np.asarray(column.chunk(0).dictionary.to_pylist()).astype(str)
    used = np.flatnonzero(np.bincount(index, minlength=values.size) > 0)
    order = np.argsort(values[used], kind="stable")
    remap = np.full(values.size, -1, dtype=np.int32)
    remap[used[order]] = np.arange(used.size, dtype=np.int32)
    return remap[index], values[used[order]]


def prepare_records(persons: pa.Table, columns: DataColumns,
                    geographies: Sequence[str]) -> Records:
    """Check the persons table and extract what SafeTab tabulates.

    Parameters
    ----------
    persons : pyarrow.Table
    columns : DataColumns
        Which columns hold sex (1 male, 2 female), age (0-115), race codes and origin codes
        (0..99,999, 0 = not reported).
    geographies : sequence of str
        Geography columns of the levels (``"nation"`` needs no column).

    Returns
    -------
    Records

    Raises
    ------
    PostprocError
        If a column is missing, has missing values, or holds values out of range (the message
        names the column and a record).

    Examples
    --------
    >>> import pyarrow as pa
    >>> t = pa.table({"sex": [1, 3], "age": [1, 2], "race1": [1000, 1000]})
    >>> prepare_records(t, DataColumns(races=("race1",), origin=None), ["nation"])
    Traceback (most recent call last):
    ...
    postproc.errors.ConfidentialInputError: column 'sex' (sex: 1 male, 2 female)
    must be in 1..2, ...
    """
    if not isinstance(persons, pa.Table):
        raise PostprocError(f"persons must be a pyarrow Table, not {type(persons).__name__}")
    sex = _integers(persons, columns.sex, "sex: 1 male, 2 female", 1, 2)
    age = _integers(persons, columns.age, "age in single years", 0, MAX_AGE)
    age23 = AGE23.index(np.arange(MAX_AGE + 1)).astype(np.int16)      # lookup table
    cell = (sex.astype(np.int16) - 1) * AGE23.size + age23[age]
    races = np.stack([_integers(persons, c, "detailed race code, 0 = none", 0, MAX_CODE)
                      .astype(np.int32, copy=False) for c in columns.races], axis=1)
    origin = None
    if columns.origin:
        origin = _integers(persons, columns.origin, "detailed Hispanic origin code, 0 = none",
                           0, MAX_CODE).astype(np.int32, copy=False)
    geography = {name: _entities(persons, name) for name in dict.fromkeys(geographies)}
    return Records(geography, cell.astype(np.int16), races, origin)


def iteration_members(iteration: Iteration, races: np.ndarray,
                      origin: np.ndarray | None = None) -> np.ndarray:
    """Which records belong to an iteration.

    Parameters
    ----------
    iteration : Iteration
    races : numpy.ndarray
        Race codes, shape (records, columns), 0 = not reported.
    origin : numpy.ndarray or None
        Hispanic origin codes, 0 = not Hispanic.

    Returns
    -------
    numpy.ndarray of bool
        "Alone or in any combination" (default): any race or origin code is in the iteration's
        set. ``alone``: at least one race code, and every race code in the set. ``"all"``: True.
        Then, with ``hispanic="not"``, only the records whose origin code is 0; with
        ``"only"``, only those with an origin code.

    Raises
    ------
    PostprocError
        If the iteration has a Hispanic-origin condition and ``origin`` is None.

    Examples
    --------
    >>> races = np.array([[1101, 0], [1101, 1104], [1101, 3102], [0, 0]])
    >>> white = Iteration("W", "White", ["1000-1999"])
    >>> iteration_members(white, races).tolist()
    [True, True, True, False]
    >>> iteration_members(Iteration("WA", "White alone", ["1000-1999"], alone=True), races).tolist()
    [True, True, False, False]
    >>> iteration_members(Iteration("H", "Hispanic", ["7000-7999"]), races,
    ...                   np.array([7101, 0, 0, 7102])).tolist()
    [True, False, False, True]
    >>> white_nh = Iteration("WNH", "White alone, not Hispanic", ["1000-1999"], alone=True,
    ...                      hispanic="not")
    >>> iteration_members(white_nh, races, np.array([7101, 0, 0, 7102])).tolist()
    [False, True, False, False]
    """
    n = races.shape[0]
    if iteration.hispanic is not None and origin is None:
        raise PostprocError(f"iteration {iteration.id!r} keeps only the records that are "
                            f"{HISPANIC[iteration.hispanic]}, but there is no origin column; "
                            f"name it in [data.columns] origin")
    if iteration.codes is None:
        members = np.ones(n, dtype=bool)
    else:
        lookup = np.zeros(MAX_CODE + 1, dtype=bool)
        lookup[np.fromiter(iteration.codes, dtype=np.int64)] = True
        if iteration.alone:
            reported = races != 0
            members = reported.any(axis=1) & (lookup[races] | ~reported).all(axis=1)
        else:
            members = lookup[races].any(axis=1)
            if origin is not None:
                members |= lookup[origin]
    if iteration.hispanic == "not":
        members &= origin == 0
    elif iteration.hispanic == "only":
        members &= origin != 0
    return members


@dataclass(frozen=True)
class GroupCounts:
    """True counts of every group of one level, by sex × Age23. Confidential.

    Parameters
    ----------
    level : str
    geocodes : numpy.ndarray
        The level's entities (sorted geocodes), ``E`` of them.
    iterations : tuple of str
        The level's iteration ids, ``I`` of them.
    counts : numpy.ndarray
        int64, shape ``(E, I, 2, 23)``: persons of each group by sex and Age23.
    observed_stability : int
        The most groups of this level one record belongs to.
    witness : int
        A record (row number) that belongs to that many groups; -1 without records.

    Examples
    --------
    Normally made by :func:`tabulate_groups`; one state, one iteration, one person in every
    sex × Age23 cell:

    >>> counts = GroupCounts("state", np.array(["01"]), ("T",), np.ones((1, 1, 2, 23), np.int64),
    ...                      observed_stability=1)
    >>> counts.totals().tolist(), counts.counts.shape
    ([[46]], (1, 1, 2, 23))
    """

    level: str
    geocodes: np.ndarray
    iterations: tuple[str, ...]
    counts: np.ndarray
    observed_stability: int
    witness: int = -1

    def totals(self) -> np.ndarray:
        """True total of every group, shape ``(E, I)``."""
        return self.counts.sum(axis=(2, 3))


def tabulate_groups(records: Records, levels: Sequence[Level],
                    iterations: Mapping[str, Iteration]) -> dict[str, GroupCounts]:
    """True sex × Age23 counts of every group of every level, and each level's stability.

    One pass per iteration: its membership is computed once and tabulated for every level that
    uses it (``np.bincount`` over entity × cell).

    Parameters
    ----------
    records : Records
    levels : sequence of Level
    iterations : mapping of id to Iteration

    Returns
    -------
    dict of level name to GroupCounts

    Raises
    ------
    PostprocError
        If a level's geography is not in ``records`` or it names an unknown iteration.

    Notes
    -----
    A level with an ``outside`` geocode has as entities every other geocode present; a record
    with that geocode is in none of them. A record has one geocode per geography, so it is in
    at most one entity of every level, nested in the other levels or not.

    Examples
    --------
    Two counties × (everyone, Asian), and the nation × Asian:

    >>> persons = pa.table({"county": ["001", "002", "001"], "sex": [2, 1, 1],
    ...                     "age": [0, 44, 90], "race1": [1000, 1000, 4000]})
    >>> records = prepare_records(persons, DataColumns(races=("race1",), origin=None),
    ...                           ["county", "nation"])
    >>> its = {"T": Iteration("T", "Total", "all"), "A": Iteration("A", "Asian", ["4000-4999"])}
    >>> levels = [Level("county", "county", ("T", "A"), 2, "1", None, (1, 2, 3)),
    ...           Level("nation", "nation", ("A",), 1, "1", None, (1, 2, 3))]
    >>> counts = tabulate_groups(records, levels, its)
    >>> counts["county"].totals().tolist(), counts["county"].observed_stability
    ([[2, 1], [1, 0]], 2)
    >>> counts["nation"].geocodes.tolist(), counts["nation"].totals().tolist()
    (['US'], [[1]])
    >>> tabulate_groups(records, [Level("state", "state", ("T",), 1, "1", None, (1, 2, 3))], its)
    Traceback (most recent call last):
    ...
    postproc.errors.PostprocError: level 'state': geography 'state' was not read; pass it to
    prepare_records

    An AIANNH level: the geocode ``"9999"`` (in no area) is no entity, and its records are in
    no group of the level (nor count towards its stability):

    >>> persons = persons.append_column("aiannh", pa.array(["0001", "9999", "9999"]))
    >>> records = prepare_records(persons, DataColumns(races=("race1",), origin=None), ["aiannh"])
    >>> aiannh = Level("aiannh", "aiannh", ("T", "A"), 2, "1", None, (1, 2, 3), outside="9999")
    >>> counts = tabulate_groups(records, [aiannh], its)["aiannh"]
    >>> counts.geocodes.tolist(), counts.totals().tolist(), counts.observed_stability
    (['0001'], [[1, 0]], 1)
    """
    keys, memberships, out, inside, entities = {}, {}, {}, {}, {}
    for level in levels:
        if level.geography not in records.geography:
            raise PostprocError(f"level {level.name!r}: geography {level.geography!r} was not "
                                f"read; pass it to prepare_records")
        entity, geocodes, inside[level.name] = _level_entities(level, records)
        entities[level.name] = geocodes
        keys[level.name] = entity.astype(np.int64) * _CELLS + records.cell
        memberships[level.name] = np.zeros(records.size, dtype=np.int16)
        out[level.name] = np.zeros((geocodes.size, len(level.iterations), _CELLS), np.int64)
    used = dict.fromkeys(i for level in levels for i in level.iterations)
    for iteration_id in used:
        if iteration_id not in iterations:
            raise PostprocError(f"no iteration {iteration_id!r} is defined")
        members = iteration_members(iterations[iteration_id], records.races, records.origin)
        for level in levels:
            if iteration_id not in level.iterations:
                continue
            j = level.iterations.index(iteration_id)
            size = out[level.name].shape[0] * _CELLS
            here = members if inside[level.name] is None else members & inside[level.name]
            out[level.name][:, j, :] = np.bincount(keys[level.name][here],
                                                   minlength=size).reshape(-1, _CELLS)
            memberships[level.name] += here
    result = {}
    for level in levels:
        count = memberships[level.name]
        witness = int(np.argmax(count)) if count.size else -1
        observed = int(count[witness]) if count.size else 0
        geocodes = entities[level.name]
        result[level.name] = GroupCounts(
            level.name, geocodes, level.iterations,
            out[level.name].reshape(geocodes.size, len(level.iterations), len(SEXES),
                                    AGE23.size), observed, witness)
    return result


def _level_entities(level: Level, records: Records
                    ) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """(entity index per record, the level's geocodes, which records are in an entity — None
    for all): the geography's entities without the level's ``outside`` geocode, whose records
    are in no entity (their index is then 0, never used: they are masked out)."""
    entity, geocodes = records.geography[level.geography]
    if level.outside is None or level.outside not in geocodes:
        return entity, geocodes, None
    k = int(np.flatnonzero(geocodes == level.outside)[0])
    inside = entity != k
    return (np.where(inside, entity - (entity > k), 0).astype(np.int32),
            np.delete(geocodes, k), inside)


def check_stability(level: Level, counts: GroupCounts, records: Records | None = None,
                    iterations: Mapping[str, Iteration] | None = None, *,
                    release: bool = False) -> None:
    """Raise if the data puts a record in more groups of ``level`` than its declared stability.

    Parameters
    ----------
    level : Level
    counts : GroupCounts
        Its tabulation (with the observed stability and a witness record).
    records : Records, optional
        To quote the witness record's codes in the message.
    iterations : mapping of id to Iteration, optional
        To name the iterations the witness record belongs to.
    release : bool, optional
        A release-mode run: the message then quotes nothing from the confidential data (not the
        record, its codes, nor the observed stability).

    Raises
    ------
    PostprocError
        Naming the level (and where its stability is declared), the record, its codes, its
        groups, and the fix (in release mode, the level and the fix only).

    Examples
    --------
    >>> import pyarrow as pa
    >>> from postproc.apps.safetab.config import DataColumns
    >>> persons = pa.table({"sex": [1], "age": [30], "race1": [1000], "race2": [3102]})
    >>> records = prepare_records(persons, DataColumns(races=("race1", "race2"), origin=None),
    ...                           ["nation"])
    >>> its = {"W": Iteration("W", "White", [1000]), "C": Iteration("C", "Cherokee", [3102])}
    >>> level = Level("nation", "nation", ("W", "C"), 1, None, 5, (1, 2, 3))
    >>> check_stability(level, tabulate_groups(records, [level], its)["nation"], records, its)
    Traceback (most recent call last):
    ...
    postproc.errors.PostprocError: level 'nation' declares stability = 1, ... (iterations W, C); ...
    """
    if counts.observed_stability <= level.stability:
        return
    where = f"{level.location}: " if level.location else ""
    if release:
        raise PostprocError(
            f"{where}level {level.name!r} declares stability = {level.stability}, but a record "
            f"of the data belongs to more of its groups; declare the most groups of the level a "
            f"record can belong to under your data model, or drop overlapping iterations from "
            f"the level (the record and its codes come from the confidential data, so they are "
            f"shown only in simulation mode)")
    row = counts.witness
    detail = matched = ""
    if records is not None and row >= 0:
        detail = f" (race codes {[int(c) for c in records.races[row] if c]}"
        origin = None if records.origin is None else records.origin[row:row + 1]
        if origin is not None and origin[0]:
            detail += f", origin code {int(origin[0])}"
        detail += ")"
        if iterations is not None:
            ids = [i for i in level.iterations
                   if iteration_members(iterations[i], records.races[row:row + 1], origin)[0]]
            matched = f" (iterations {', '.join(ids)})"
    raise PostprocError(
        f"{where}level {level.name!r} declares stability = {level.stability}, but record "
        f"{row}{detail} belongs to {counts.observed_stability} of its groups{matched}; declare "
        f"stability = {counts.observed_stability} or more (each group then gets "
        f"budget/{counts.observed_stability}), or drop overlapping iterations from the level")
