"""Realistic synthetic 2020-style persons, units and blocks for the PL 94-171 presets.

The generator builds, for each of the 50 states and DC (and Puerto Rico on request), the census
geography state → county → tract → block group → block at the scale of the 2020 census, and the
persons of the :data:`hierarchy.presets.pl94.PL94_2020` schema in it. It is synthetic data for
experiments, not a privacy mechanism: its randomness is an ordinary seeded
``numpy.random.Generator``. A state's plan has the stream ``SeedSequence(seed, spawn_key=(fips,
0))`` and each county's persons ``SeedSequence(seed, spawn_key=(fips, 1, county))``, so a
county's rows depend neither on the other states chosen nor on how the work is chunked.

The model (its constants and the state figures, :data:`STATES`, are in
:mod:`hierarchy.synth.census2020_model`; the steps are drawn in
:mod:`hierarchy.synth.census2020_counties`):

1. **Population** — ``persons`` is split over the states in proportion to their 2020 counts
   (largest remainders, each state ≥ 1). A state's group-quarters population is drawn first
   (step 4); the rest lives in households.
2. **Geography** — the state's 2020 number of counties scaled to its persons (≥ 1), with
   log-normal sizes (sd :data:`COUNTY_LOG_SD`); tracts of about :data:`TRACT_PERSONS`, block
   groups of about :data:`BLOCK_GROUP_PERSONS` (1-9 per tract), and blocks so that there are
   :data:`PERSONS_PER_BLOCK` persons per block on average (about 8.1 million blocks for 331
   million persons), a tract-level share of them empty (mean :data:`EMPTY_BLOCK_SHARE`) and the
   others with log-normal weights (sd :data:`BLOCK_LOG_SD`): heavy-tailed block sizes. Sizes are
   split by largest remainders, so every level adds up exactly. Geocodes are the census's: state
   (2 digits), county (+3, odd numbers), tract (+6), block group (+1) and block (+4, the first
   being the block group's digit) — 16 characters, as production's ``geolevel_leng``.
3. **Race and Hispanic origin** — seven major groups (non-Hispanic White, Black, AIAN, Asian,
   NHPI alone, non-Hispanic other (Some Other Race alone or two or more races) and Hispanic),
   with each state's 2020 mix; county mixes ~ Dirichlet(:data:`COUNTY_CONCENTRATION` × state),
   tract mixes ~ Dirichlet(a × county) with a log-uniform on :data:`TRACT_CONCENTRATION`, both
   raked back to their parents. In each block a dominant group (drawn from the tract's mix)
   takes a share ~ U(0, :data:`BLOCK_DOMINANCE`) of its households; the rest draw from the tract
   mix (so the tract's mix holds in expectation). A household shares its householder's group;
   each other member is drawn afresh with probability :data:`HOUSEHOLD_MIXING`. The 63 cenrace
   combinations of the "other" and Hispanic groups come from state-tilted national
   distributions (:func:`cenrace_distribution`): two-race combinations are most of the
   multiracial (White and Some Other Race dominates among Hispanic persons).
4. **Group quarters** — facilities of the seven types with national shares of the population
   and log-normal sizes (:data:`GQ_TYPES`), in blocks drawn uniformly (so a small share of
   blocks, empty ones included: a prison in an otherwise unpopulated block). No facility holds
   more than a twentieth of its state, nor all facilities together a quarter.
5. **Households** — each block's household population is cut into households of 2020-like
   sizes (:data:`HOUSEHOLD_SIZE_PMF`, mean about 2.5); every household is an occupied housing
   unit, and each block also gets vacant housing units (about :data:`VACANCY` of its occupied
   ones; a few empty blocks have only vacant units).
6. **Voting age** — householders are 18 or over; other members are under 18 with a
   probability set per tract around the state's 2020 share under 18 and scaled by group
   (:data:`MINOR_FACTORS`); group-quarters residents by type (no minors in nursing facilities,
   so ``nurse_nva_0`` holds for the truth).

Output: ``persons`` (one row per person, sorted by block, households before group quarters),
``units`` (one row per occupied household, ``hhgq`` 0, or group-quarters facility, ``hhgq``
1-7, the catalogue's units data: every person of a type has a unit of that type in the block)
and ``blocks`` (every block, empty ones included, with its housing units occupied or vacant).

Examples
--------
>>> data = synthesize_2020(20_000, seed=1)
>>> data.persons.column_names
['state', 'county', 'tract', 'block_group', 'block', 'hhgq', 'votingage', 'hispanic', 'cenrace']
>>> data.persons.num_rows, len(data.persons.column("state").unique())
(20000, 51)
>>> data.blocks.num_rows > len(data.persons.column("block").unique())  # empty blocks
True
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from hierarchy.errors import HierarchyError
from hierarchy.presets.pl94 import LEVELS
from hierarchy.synth.census2020_counties import (
    _County,
    _generate_county,
    _plan_state,
    _StatePlan,
)
from hierarchy.synth.census2020_model import _FIPS, _PUERTO_RICO, STATES, cenrace_distribution

__all__ = ["Synthetic2020", "synthesize_2020", "apportion_states_2020", "cenrace_distribution",
           "STATES", "MADE_BY", "MAX_PERSONS", "PERSON_COLUMNS", "UNIT_COLUMNS",
           "BLOCK_COLUMNS"]

#: The ``made_by`` of the manifest and of the parquet metadata (key ``b"dapp"``).
MADE_BY = "postproc synth2020"

#: Most persons accepted (about 1.2 times 2020): more would need more than 499 counties in a
#: state (odd 3-digit county codes) or 999 blocks in a block group.
MAX_PERSONS = 400_000_000

PERSON_COLUMNS = LEVELS[1:] + ("hhgq", "votingage", "hispanic", "cenrace")
UNIT_COLUMNS = LEVELS[1:] + ("hhgq",)
BLOCK_COLUMNS = LEVELS[1:] + ("housing_units",)
_GEOCODE = pa.dictionary(pa.int32(), pa.string())
PERSONS_SCHEMA = pa.schema([(n, _GEOCODE) for n in LEVELS[1:]]
                           + [(n, pa.int8()) for n in PERSON_COLUMNS[5:]])
UNITS_SCHEMA = pa.schema([(n, _GEOCODE) for n in LEVELS[1:]] + [("hhgq", pa.int8())])
BLOCKS_SCHEMA = pa.schema([(n, _GEOCODE) for n in LEVELS[1:]] + [("housing_units", pa.int32())])


@dataclass(frozen=True)
class Synthetic2020:
    """Synthetic 2020-style microdata held in memory.

    Parameters
    ----------
    persons : pyarrow.Table
        One row per person: geocode columns ``state, county, tract, block_group, block``
        (dictionary-encoded strings) and ``hhgq, votingage, hispanic, cenrace`` (int8 codes of
        :data:`hierarchy.presets.pl94.PL94_2020`), sorted by block.
    units : pyarrow.Table
        One row per occupied household (``hhgq`` 0) or group-quarters facility (``hhgq`` 1-7),
        with the same geocode columns.
    blocks : pyarrow.Table
        One row per block, empty blocks included, with ``housing_units`` (occupied or vacant).

    Raises
    ------
    HierarchyError
        If a table is not a pyarrow Table with exactly the contracted columns and types.

    Examples
    --------
    >>> data = synthesize_2020(2_000, seed=0)
    >>> data.units.num_rows < data.persons.num_rows
    True
    >>> Synthetic2020(persons=data.units, units=data.units, blocks=data.blocks)
    Traceback (most recent call last):
    ...
    hierarchy.errors.HierarchyError: Synthetic2020.persons must have the schema ...
    """

    persons: pa.Table
    units: pa.Table
    blocks: pa.Table

    def __post_init__(self):
        for name, schema in (("persons", PERSONS_SCHEMA), ("units", UNITS_SCHEMA),
                             ("blocks", BLOCKS_SCHEMA)):
            table = getattr(self, name)
            if not isinstance(table, pa.Table) or not table.schema.equals(schema):
                got = table.schema if isinstance(table, pa.Table) else type(table).__name__
                raise HierarchyError(
                    f"Synthetic2020.{name} must have the schema {schema.names} with types "
                    f"{[str(t) for t in schema.types]}; got {got}")

    def geography_columns(self) -> list[list[pa.ChunkedArray]]:
        """The geocode columns of the blocks table, as ``Geography.from_columns`` takes them:
        a geography with every block, empty ones included.

        Examples
        --------
        >>> from hierarchy.geography import Geography
        >>> data = synthesize_2020(2_000, seed=0)
        >>> geo, _ = Geography.from_columns(LEVELS, data.geography_columns())
        >>> geo.n_units("block") == data.blocks.num_rows
        True
        """
        return [[self.blocks.column(name) for name in LEVELS[1:]]]


# ---------------------------------------------------------------------------------------------
# public API
# ---------------------------------------------------------------------------------------------
def synthesize_2020(persons: int, *, seed: int, states: Sequence[str] | None = None,
                    puerto_rico: bool = False, out: str | os.PathLike | None = None,
                    chunk: int = 2_000_000, overwrite: bool = False,
                    progress: bool = False) -> Synthetic2020 | dict[str, Any]:
    """Generate synthetic 2020-style persons, units and blocks; in memory or streamed to parquet.

    Parameters
    ----------
    persons : int
        Total persons, from one per state to :data:`MAX_PERSONS`, split over the states in
        2020 proportions (331,449,281 for the 50 states and DC is the 2020 census).
    seed : int
        Non-negative seed; the same arguments give identical tables.
    states : sequence of str, optional
        FIPS codes or postal codes of the states to generate (default: the 50 states and DC).
    puerto_rico : bool, default False
        Add Puerto Rico (FIPS 72).
    out : path, optional
        Write ``persons.parquet``, ``units.parquet``, ``blocks.parquet`` and ``manifest.json``
        into this directory instead of returning tables. Counties are generated and written in
        groups of about ``chunk`` persons (one row group each), so memory holds one group (or one
        county larger than ``chunk``) and the plan of one state, never a whole state's persons.
        Files appear complete or not at all (written under temporary names, then renamed).
    chunk : int, default 2,000,000
        Persons per written group of counties (``out`` only; the rows do not depend on it).
    overwrite : bool, default False
        Replace the files of an earlier ``synth2020`` run in ``out`` (a directory the toolkit
        did not write is never touched).
    progress : bool, default False
        A progress bar on stderr (tqdm).

    Returns
    -------
    Synthetic2020 or dict
        The tables (one dictionary per geocode column) without ``out``; with ``out``, the
        manifest: counts, ``seconds``, ``persons_per_second`` and the file paths.

    Raises
    ------
    HierarchyError
        If an argument is out of range or unknown (the message says which and the valid
        values), or ``out`` cannot be written or holds files the toolkit did not write.

    Examples
    --------
    >>> data = synthesize_2020(5_000, seed=3, states=["DC", "72"])
    >>> sorted(data.persons.column("state").unique().to_pylist())
    ['11', '72']
    >>> import tempfile, pyarrow.parquet as pq
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     manifest = synthesize_2020(5_000, seed=3, states=["DC", "72"], out=tmp + "/d")
    ...     streamed = pq.read_table(manifest["files"]["persons"])
    >>> manifest["persons"], streamed.num_rows
    (5000, 5000)
    >>> synthesize_2020(10, seed=1, states=["XX"])
    Traceback (most recent call last):
    ...
    hierarchy.errors.HierarchyError: unknown state 'XX'; give FIPS codes or postal codes such as
    '06' or 'CA' (Puerto Rico: '72' or 'PR', or puerto_rico=True)
    """
    rows = _select_states(states, puerto_rico)
    persons, seed, chunk = _check_arguments(persons, seed, chunk, len(rows))
    if out is not None:
        return _write(Path(out), persons, seed, rows, chunk, overwrite=overwrite,
                      progress=progress, arguments={"persons": persons, "seed": seed,
                                                    "states": [STATES[r][0] for r in rows],
                                                    "chunk": chunk})
    parts = list(_generate(persons, seed, rows, progress=progress))
    return Synthetic2020(*_tables(parts))


def apportion_states_2020(persons: int, states: Sequence[str] | None = None, *,
                          puerto_rico: bool = False) -> dict[str, int]:
    """Split ``persons`` over states in 2020 proportions (largest remainders, each ≥ 1).

    Parameters
    ----------
    persons : int
    states : sequence of str, optional
        As in :func:`synthesize_2020`.
    puerto_rico : bool, default False

    Returns
    -------
    dict
        FIPS code → persons, in FIPS order, adding up to ``persons``.

    Raises
    ------
    HierarchyError
        If ``persons`` is below the number of states or above :data:`MAX_PERSONS`.

    Examples
    --------
    >>> shares = apportion_states_2020(331_449_281)   # the 2020 count of the states and DC
    >>> shares["06"], shares["56"], len(shares)
    (39538223, 576851, 51)
    """
    rows = _select_states(states, puerto_rico)
    persons, _, _ = _check_arguments(persons, 0, 1, len(rows))
    return dict(zip((STATES[r][0] for r in rows), _apportion(persons, rows).tolist()))



# ---------------------------------------------------------------------------------------------
# driving: states → groups of counties → tables
# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class _Part:
    """A group of consecutive counties of one state, with geocode indices local to it."""

    dictionaries: tuple[np.ndarray, ...]   # str: state, county, tract, block group, block
    persons: tuple[np.ndarray, ...]        # 5 int32 geocode indices, 4 int8 attributes
    units: tuple[np.ndarray, ...]          # 5 int32 geocode indices, hhgq
    blocks: tuple[np.ndarray, ...]         # 5 int32 geocode indices, housing units

    @property
    def n_persons(self) -> int:
        return int(self.persons[0].size)


def _generate(persons: int, seed: int, rows: Sequence[int], *, chunk: int = 2_000_000,
              progress: bool = False) -> Iterator[_Part]:
    """Every state's counties, in groups of about ``chunk`` persons."""
    bar = None
    if progress:
        from tqdm import tqdm
        bar = tqdm(total=persons, unit="person", unit_scale=True, desc="synthetic 2020")
    try:
        for row, size in zip(rows, _apportion(persons, rows)):
            plan = _plan_state(row, int(size), seed)
            group: list[_County] = []
            first = 0
            n_counties = plan.codes[0].size
            for c in range(n_counties):
                group.append(_generate_county(plan, c, seed))
                if sum(g.person_block.size for g in group) >= chunk or c == n_counties - 1:
                    part = _part(plan, group, first)
                    if bar is not None:
                        bar.update(part.n_persons)
                    yield part
                    group, first = [], c + 1
    finally:
        if bar is not None:
            bar.close()


def _part(plan: _StatePlan, counties: list[_County], first: int) -> _Part:
    """Counties ``first, first + 1, …`` of ``plan`` as one part."""
    stop = first + len(counties)
    b0, b1 = int(plan.county_blocks[first]), int(plan.county_blocks[stop])
    tract_county, bg_tract, block_bg = plan.parents
    bg = block_bg[b0:b1]
    tract = bg_tract[bg]
    g0, t0 = int(bg[0]), int(tract[0])
    per_block = (np.zeros(b1 - b0, np.int32), (tract_county[tract] - first).astype(np.int32),
                 (tract - t0).astype(np.int32), (bg - g0).astype(np.int32),
                 np.arange(b1 - b0, dtype=np.int32))
    offsets = plan.county_blocks[first:stop] - b0

    def rows_of(name: str) -> np.ndarray:
        return np.concatenate([getattr(c, name) + np.int32(o) for c, o in zip(counties, offsets)])

    person_block, unit_block = rows_of("person_block"), rows_of("unit_block")
    persons = tuple(level[person_block] for level in per_block) + tuple(
        np.concatenate([c.person_columns[k] for c in counties]) for k in range(4))
    units = tuple(level[unit_block] for level in per_block) + (
        np.concatenate([c.unit_hhgq for c in counties]),)
    blocks = per_block + (np.concatenate([c.housing_units for c in counties]),)
    county, tract_codes, bg_codes, block_codes = plan.codes
    dictionaries = (np.array([plan.fips]), county[first:stop],
                    tract_codes[t0:int(tract[-1]) + 1], bg_codes[g0:int(bg[-1]) + 1],
                    block_codes[b0:b1])
    return _Part(dictionaries, persons, units, blocks)


def _tables(parts: Sequence[_Part]) -> tuple[pa.Table, pa.Table, pa.Table]:
    """Persons, units and blocks tables of ``parts``, one dictionary per geocode column (a
    single part keeps its own dictionaries)."""
    dictionaries, shifts = [], []
    for k in range(5):
        codes = [p.dictionaries[k] for p in parts]
        if k == 0:                       # one entry per state, however many parts it has
            states, shift = np.unique([c[0] for c in codes], return_inverse=True)
            dictionaries.append(states)
        else:
            sizes = np.array([c.size for c in codes])
            dictionaries.append(np.concatenate(codes))
            shift = np.cumsum(sizes) - sizes
        shifts.append(shift)
    # (from a list: pyarrow converts numpy unicode arrays about 50 times more slowly)
    dictionaries = [pa.array(d.tolist(), pa.string()) for d in dictionaries]
    out = []
    for table, schema in (("persons", PERSONS_SCHEMA), ("units", UNITS_SCHEMA),
                          ("blocks", BLOCKS_SCHEMA)):
        columns = [np.concatenate([getattr(p, table)[k] for p in parts])
                   for k in range(len(schema))]
        lengths = [getattr(p, table)[0].size for p in parts]
        arrays = [pa.DictionaryArray.from_arrays(
            pa.array(columns[k] + np.repeat(shifts[k], lengths).astype(np.int32), pa.int32()),
            dictionaries[k]) for k in range(5)]
        arrays += [pa.array(c, schema.field(k + 5).type) for k, c in enumerate(columns[5:])]
        out.append(pa.Table.from_arrays(arrays, schema=schema))
    return tuple(out)


def _write(out: Path, persons: int, seed: int, rows: Sequence[int], chunk: int, *,
           overwrite: bool, progress: bool, arguments: dict[str, Any]) -> dict[str, Any]:
    """Stream the parts into ``out`` (see :func:`synthesize_2020`); return the manifest."""
    from contextlib import ExitStack

    from hierarchy.io.storage import atomic_path, claim_directory, write_json

    started = time.perf_counter()
    claim_directory(out, made_by=MADE_BY, reuse=overwrite,
                    how_to_reuse="pass overwrite=True (synth2020 --overwrite) to replace the "
                                 "synthetic data written there")
    names = {"persons": "persons.parquet", "units": "units.parquet", "blocks": "blocks.parquet"}
    for name in (*names.values(), "manifest.json"):
        _check_ours(out / name)
    schemas = {k: s.with_metadata({b"dapp": json.dumps({"made_by": MADE_BY, "table": k,
                                                        **arguments}).encode()})
               for k, s in (("persons", PERSONS_SCHEMA), ("units", UNITS_SCHEMA),
                            ("blocks", BLOCKS_SCHEMA))}
    counts = dict.fromkeys(("persons", "households", "gq_facilities", "housing_units",
                            "counties", "tracts", "block_groups", "blocks", "empty_blocks"), 0)
    states = set()
    try:
        with ExitStack() as stack:
            writers = {k: stack.enter_context(pq.ParquetWriter(
                stack.enter_context(atomic_path(out / names[k])), schemas[k],
                compression="zstd", write_statistics=list(LEVELS[1:])))
                for k in names}
            with _BackgroundWriter() as background:
                for part in _generate(persons, seed, rows, chunk=chunk, progress=progress):
                    background.submit(writers, dict(zip(names, _tables([part]))))
                    _count(counts, part)
                    states.add(str(part.dictionaries[0][0]))
    except OSError as exc:
        raise HierarchyError(f"cannot write synthetic data to {str(out)!r}: {exc}") from exc
    seconds = time.perf_counter() - started
    manifest = {"made_by": MADE_BY, "schema": "pl94_2020", "levels": list(LEVELS),
                "arguments": arguments, **counts, "states": len(states),
                "files": {k: str(out / v) for k, v in names.items()},
                "seconds": seconds, "persons_per_second": counts["persons"] / seconds}
    write_json(manifest, out / "manifest.json")
    return manifest


class _BackgroundWriter:
    """Write row groups on a second thread while the next part is generated (parquet encoding
    releases the GIL). At most two parts wait, so memory stays bounded; an error in the writer
    is raised in the caller at the next submit or at the end."""

    def __init__(self):
        import queue
        import threading

        self._queue: Any = queue.Queue(maxsize=2)
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="synth2020-writer", daemon=True)

    def __enter__(self) -> "_BackgroundWriter":
        self._thread.start()
        return self

    def _run(self) -> None:
        while (item := self._queue.get()) is not None:
            if self._error is None:
                try:
                    writers, tables = item
                    for k, table in tables.items():
                        writers[k].write_table(table, row_group_size=max(1, table.num_rows))
                except BaseException as exc:   # re-raised in the generating thread
                    self._error = exc

    def submit(self, writers: dict[str, Any], tables: dict[str, pa.Table]) -> None:
        self._raise()
        self._queue.put((writers, tables))

    def _raise(self) -> None:
        if self._error is not None:
            raise self._error

    def __exit__(self, *exc_info) -> None:
        self._queue.put(None)
        self._thread.join()
        if exc_info[0] is None:
            self._raise()


def _count(counts: dict[str, int], part: _Part) -> None:
    hhgq = part.units[5]
    households = int(np.count_nonzero(hhgq == 0))
    occupied = np.bincount(part.persons[4], minlength=part.dictionaries[4].size)
    counts["persons"] += part.n_persons
    counts["households"] += households
    counts["gq_facilities"] += hhgq.size - households
    counts["housing_units"] += int(part.blocks[5].sum())
    for key, k in (("counties", 1), ("tracts", 2), ("block_groups", 3), ("blocks", 4)):
        counts[key] += part.dictionaries[k].size
    counts["empty_blocks"] += int(np.count_nonzero(occupied == 0))


def _check_ours(path: Path) -> None:
    """Refuse to replace a file that an earlier synth2020 did not write."""
    if not path.exists() and not path.is_symlink():
        return
    made_by = None
    if path.is_file() and not path.is_symlink():
        try:
            if path.suffix == ".json":
                made_by = json.loads(path.read_text(encoding="utf-8")).get("made_by")
            else:
                raw = (pq.read_schema(path).metadata or {}).get(b"dapp")
                made_by = json.loads(raw).get("made_by") if raw else None
        except (OSError, ValueError, AttributeError, pa.ArrowInvalid):
            made_by = None
    if made_by != MADE_BY:
        raise HierarchyError(f"{path} exists and was not written by {MADE_BY}; it is never "
                             "replaced — choose another output directory, or move it away")


# ---------------------------------------------------------------------------------------------
# arguments
# ---------------------------------------------------------------------------------------------
def _select_states(states: Sequence[str] | None, puerto_rico: bool) -> tuple[int, ...]:
    if states is None:
        chosen = set(range(_PUERTO_RICO))
    else:
        if isinstance(states, str) or not all(isinstance(s, str) for s in states):
            raise HierarchyError(f"states must be a list of FIPS or postal codes, e.g. "
                                 f"['06', 'TX'], not {states!r}")
        postal = {row[1]: i for i, row in enumerate(STATES)}
        chosen = set()
        for s in states:
            code = s.strip().upper()
            if code in _FIPS:
                chosen.add(_FIPS.index(code))
            elif code in postal:
                chosen.add(postal[code])
            else:
                raise HierarchyError(f"unknown state {s!r}; give FIPS codes or postal codes such "
                                     "as '06' or 'CA' (Puerto Rico: '72' or 'PR', or "
                                     "puerto_rico=True)")
        if not chosen:
            raise HierarchyError("states is empty; give at least one state (or None for all)")
    if puerto_rico:
        chosen.add(_PUERTO_RICO)
    return tuple(sorted(chosen))


def _apportion(persons: int, rows: Sequence[int]) -> np.ndarray:
    """Persons per chosen state in 2020 proportions (largest remainders, each ≥ 1)."""
    pops = np.array([STATES[r][2] for r in rows], dtype=np.float64)
    exact = persons * pops / pops.sum()
    counts = np.floor(exact).astype(np.int64)
    order = np.argsort(counts - exact, kind="stable")
    counts[order[: persons - int(counts.sum())]] += 1
    while (counts == 0).any():          # small totals: take from the largest state
        counts[np.argmax(counts)] -= 1
        counts[np.flatnonzero(counts == 0)[0]] += 1
    return counts


def _check_arguments(persons: Any, seed: Any, chunk: Any, n_states: int) -> tuple[int, int, int]:
    for name, value, low in (("persons", persons, n_states), ("seed", seed, 0),
                             ("chunk", chunk, 1)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
            raise HierarchyError(f"{name} must be an integer, got {value!r} "
                                 f"({type(value).__name__})")
        if value < low:
            need = f"one per state ({n_states})" if name == "persons" else str(low)
            raise HierarchyError(f"{name} must be at least {need}, got {value}")
    if persons > MAX_PERSONS:
        raise HierarchyError(f"persons must be at most {MAX_PERSONS:,} (a state would need more "
                             f"counties or blocks than its geocodes can name), got {persons:,}")
    return int(persons), int(seed), int(chunk)
