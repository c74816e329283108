"""Realistic synthetic 1940-style microdata: persons and housing units, state by state.

The generator builds, for each of the 48 states and DC (1940 proportions), a geography of counties
made of whole enumeration districts (EDs) with the sizes of docs/data.md, segregated race and
Hispanic composition, households with 1940-like sizes and group-quarters facilities. It is synthetic
data for experiments, not a privacy mechanism, so its randomness is an ordinary seeded
``numpy.random.Generator``; every state has its own stream
``PCG64(SeedSequence(seed, spawn_key=(state_index,)))``, so a state's rows do not depend on how
the work is chunked.

The model, per state (populations and mixes in :mod:`hierarchy.synth.census1940_tables`):

1. **EDs** — sizes drawn from a quantile function piecewise linear in log size (median 865,
   95th percentile 2,342, mean 982) until they reach the state's population, then rescaled to add
   up exactly. A small state has *fewer* EDs, never smaller ones.
2. **Counties** — the state's 1940 number of counties, scaled to the total (at least 1), with
   log-normal shares of its population (national median about 18,679; the mean, 42,601, follows
   from the counts); a county ends at the ED boundary nearest its cumulative target, so counties
   are whole EDs. Every state has at least one county and one ED.
3. **Composition** (:mod:`hierarchy.synth.census1940_mixes`) — 12 groups (Hispanic × race).
   County mix ~ Dirichlet(``COUNTY_CONCENTRATION`` × state mix); ED mix ~ Dirichlet(a × county
   mix) with a log-uniform concentration ``a``, so EDs range from mixed to single-race; both raked
   so that state and county mixes hold at every scale. A few EDs in large counties are
   "cosmopolitan" (part of their mix spread over all 12 groups), which makes the zero-cell count
   of the 24 va_hisp_race cells (the text's homogeneity index, docs/metrics.md) span 0-23.
   How mixed counties come out is a :class:`~hierarchy.synth.census1940_mixes.Composition`
   (``composition=``; ``"counties_1940"`` gives the real 1940 counties' number of populated
   cells, ``"counties_eds_1940"`` also the real EDs' small cells, through lodgers: household
   members other than the head drawn from their county's mix).
4. **Group quarters** — facilities of types 2, 3, 4, 6, 7 in a minority of EDs (log-normal sizes;
   never more persons than the ED has, so a military-base ED can be all group quarters).
5. **Households** — the rest of each ED is cut into households of 1940-like sizes (mean ≈ 3.8).
   The head is an adult; members share the head's group except for a few percent drawn afresh from
   the ED mix; group-quarters residents are drawn from the ED mix.

Examples
--------
>>> data = synthesize_1940(20_000, seed=1)
>>> data.persons.column_names
['state', 'county', 'enum_dist', 'hhgq', 'votingage', 'hispanic', 'cenrace']
>>> data.units.column_names
['state', 'county', 'enum_dist', 'hhgq']
>>> data.persons.num_rows, data.persons.column("state").type
(20000, DictionaryType(dictionary<values=string, indices=int32, ordered=0>))
>>> len(data.persons.column("state").unique())
49
"""

from __future__ import annotations

import dataclasses
import json
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from hierarchy.errors import HierarchyError
from hierarchy.io.replace import check_parquet_replaceable
from hierarchy.synth import census1940_tables as tables
from hierarchy.synth.census1940_mixes import Composition, _draw_groups, _ed_mixes
from hierarchy.synth.census1940_tables import STATE_FIPS, STATE_POPULATION_1940

__all__ = ["Synthetic1940", "synthesize_1940", "write_synthetic_1940", "STATE_FIPS",
           "STATE_POPULATION_1940", "MIN_PERSONS", "MAX_PERSONS", "MADE_BY"]

#: The ``made_by`` of the JSON metadata (parquet key ``b"dapp"``) of the files written by
#: :func:`write_synthetic_1940`.
MADE_BY = "postproc synth1940"

#: Fewest persons accepted: one per state.
MIN_PERSONS = len(STATE_FIPS)
#: Most persons accepted (about 2.3 times 1940): beyond it the largest states would need more than
#: 999 counties, which the 3-digit county part of the geocode cannot name.
MAX_PERSONS = 300_000_000

PERSON_COLUMNS = ("state", "county", "enum_dist", "hhgq", "votingage", "hispanic", "cenrace")
UNIT_COLUMNS = ("state", "county", "enum_dist", "hhgq")
_GEOCODE = pa.dictionary(pa.int32(), pa.string())
PERSONS_SCHEMA = pa.schema([(name, _GEOCODE) for name in PERSON_COLUMNS[:3]]
                           + [(name, pa.int8()) for name in PERSON_COLUMNS[3:]])
UNITS_SCHEMA = pa.schema([(name, _GEOCODE) for name in UNIT_COLUMNS[:3]] + [("hhgq", pa.int8())])

HOUSEHOLD_MIXING = 0.03             # chance a household member is drawn afresh from the ED mix
SECOND_MEMBER_ADULT = 0.90          # chance the 2nd member of a household is 18+ (the head is)
LATER_MEMBER_ADULT = 0.43           # chance the 3rd, 4th, ... member is 18+
_MEAN_ED = 982.0


@dataclass(frozen=True)
class Synthetic1940:
    """Synthetic 1940-style microdata held in memory.

    Parameters
    ----------
    persons : pyarrow.Table
        One row per person, columns ``state, county, enum_dist`` (dictionary-encoded geocode
        strings) and ``hhgq, votingage, hispanic, cenrace`` (int8), sorted by geography with each
        household's members contiguous.
    units : pyarrow.Table
        One row per occupied household (``hhgq`` 0) or group-quarters facility (``hhgq`` 2..7),
        columns ``state, county, enum_dist, hhgq``, in the same order as the persons.

    Raises
    ------
    HierarchyError
        If a table is not a pyarrow Table with exactly the contracted columns and types.

    Examples
    --------
    >>> data = synthesize_1940(1_000, seed=0)
    >>> data.units.num_rows < data.persons.num_rows
    True
    >>> Synthetic1940(persons=data.units, units=data.units)
    Traceback (most recent call last):
    ...
    hierarchy.errors.HierarchyError: Synthetic1940.persons must have the schema ...
    """

    persons: pa.Table
    units: pa.Table

    def __post_init__(self):
        for name, schema in (("persons", PERSONS_SCHEMA), ("units", UNITS_SCHEMA)):
            table = getattr(self, name)
            if not isinstance(table, pa.Table) or not table.schema.equals(schema):
                got = table.schema if isinstance(table, pa.Table) else type(table).__name__
                raise HierarchyError(
                    f"Synthetic1940.{name} must have the schema {schema.names} with types "
                    f"{[str(t) for t in schema.types]}; got {got}")


@dataclass(frozen=True)
class _StateBlock:
    """One state's generated data, with geocode indices local to the state."""

    state_index: int
    county_codes: np.ndarray        # str, one per county
    ed_codes: np.ndarray            # str, one per ED
    ed_county: np.ndarray           # int32, the county of each ED
    ed_persons: np.ndarray          # int64, persons per ED
    unit_ed: np.ndarray             # int32, the ED of each unit
    unit_hhgq: np.ndarray           # int8
    unit_persons: np.ndarray        # int64, persons per unit (households and facilities)
    person_hhgq: np.ndarray         # int8, per person (the ED of a person is unit_ed repeated)
    votingage: np.ndarray           # int8
    hispanic: np.ndarray            # int8
    cenrace: np.ndarray             # int8

    @property
    def persons(self) -> int:
        return int(self.ed_persons.sum())

    @property
    def person_ed(self) -> np.ndarray:
        return np.repeat(self.unit_ed, self.unit_persons)


# ---------------------------------------------------------------------------------------------
# public API
# ---------------------------------------------------------------------------------------------
def synthesize_1940(persons: int, *, seed: int,
                    composition: str | Composition = "default") -> Synthetic1940:
    """Generate synthetic 1940-style persons and housing units in memory.

    Parameters
    ----------
    persons : int
        Total persons, from :data:`MIN_PERSONS` (49, one per state) to :data:`MAX_PERSONS`.
        States get populations in 1940 proportions; EDs and counties keep their 1940 sizes, so a
        smaller total means fewer units.
    seed : int
        Non-negative seed. The same seed gives byte-identical tables.
    composition : str or Composition, default "default"
        How mixed counties and EDs are (:class:`~hierarchy.synth.census1940_mixes.Composition`,
        or a name of :data:`~hierarchy.synth.census1940_mixes.COMPOSITIONS`). It changes the
        persons' groups only: sizes, geography, households and ages are the same.

    Returns
    -------
    Synthetic1940
        ``persons`` and ``units`` tables (see :class:`Synthetic1940`), each geocode column with a
        single dictionary for the whole table.

    Raises
    ------
    HierarchyError
        If ``persons`` or ``seed`` is not an integer in range, or ``composition`` is unknown.

    Examples
    --------
    >>> data = synthesize_1940(20_000, seed=3)
    >>> data.persons.num_rows
    20000
    >>> import pyarrow.compute as pc
    >>> households = pc.sum(pc.equal(data.units["hhgq"], 0)).as_py()
    >>> in_households = pc.sum(pc.equal(data.persons["hhgq"], 0)).as_py()
    >>> 3.5 < in_households / households < 4.1
    True
    >>> {1, 5} & set(pc.unique(data.persons["hhgq"]).to_pylist())  # structural zeros
    set()
    >>> synthesize_1940(10, seed=3)
    Traceback (most recent call last):
    ...
    hierarchy.errors.HierarchyError: persons must be at least 49 (one per state and DC), got 10

    The same persons, places and households in less mixed counties:

    >>> mixed = synthesize_1940(20_000, seed=3, composition="counties_1940")
    >>> mixed.persons["enum_dist"].equals(data.persons["enum_dist"])
    True
    """
    persons, seed = _check_arguments(persons, seed)
    composition = Composition.named(composition)
    state_persons = apportion_states(persons)
    columns = {name: np.empty(persons, dtype=np.int8) for name in PERSON_COLUMNS[3:]}
    geo_index = {name: np.empty(persons, dtype=np.int32) for name in PERSON_COLUMNS[:3]}
    unit_parts: list[tuple[np.ndarray, ...]] = []
    county_codes: list[np.ndarray] = []
    ed_codes: list[np.ndarray] = []
    start = n_counties = n_eds = 0
    for s, size in enumerate(state_persons):
        block = _generate_state(s, int(size), seed, composition)
        stop = start + block.persons
        person_ed = block.person_ed
        geo_index["state"][start:stop] = s
        geo_index["county"][start:stop] = block.ed_county[person_ed] + n_counties
        geo_index["enum_dist"][start:stop] = person_ed + n_eds
        for name in PERSON_COLUMNS[3:]:
            columns[name][start:stop] = getattr(block, "person_hhgq" if name == "hhgq" else name)
        unit_parts.append((np.full(block.unit_ed.size, s, np.int32),
                           block.ed_county[block.unit_ed] + n_counties,
                           block.unit_ed + n_eds, block.unit_hhgq))
        county_codes.append(block.county_codes)
        ed_codes.append(block.ed_codes)
        n_counties += block.county_codes.size
        n_eds += block.ed_codes.size
        start = stop
        del block, person_ed
    dictionaries = (np.array(STATE_FIPS), np.concatenate(county_codes), np.concatenate(ed_codes))
    person_table = _table(PERSONS_SCHEMA, [geo_index[n] for n in PERSON_COLUMNS[:3]],
                          dictionaries, [columns[n] for n in PERSON_COLUMNS[3:]])
    del geo_index, columns
    unit_cols = [np.concatenate([part[i] for part in unit_parts]) for i in range(4)]
    unit_table = _table(UNITS_SCHEMA, unit_cols[:3], dictionaries, unit_cols[3:])
    return Synthetic1940(persons=person_table, units=unit_table)


def write_synthetic_1940(out_dir: str | os.PathLike, persons: int, *, seed: int,
                         progress: bool = False, overwrite: bool = True,
                         composition: str | Composition = "default") -> dict[str, Any]:
    """Generate synthetic 1940-style microdata and write it as Parquet, one state at a time.

    Writes ``out_dir/persons.parquet`` and ``out_dir/units.parquet`` with one row group per state
    (geocode dictionaries local to the state). Both files are written under temporary names in
    ``out_dir`` and moved into place with :func:`os.replace` only when complete. Memory beyond
    the writer's buffers is about one state's data. The rows are the same as those of
    :func:`synthesize_1940` with the same arguments.

    Each file carries the toolkit's JSON metadata under the parquet key ``b"dapp"``
    (:data:`MADE_BY` and the arguments; the composition when it is not the default). An
    existing ``persons.parquet`` or ``units.parquet`` is replaced only if it carries that
    metadata (the toolkit wrote it) and ``overwrite`` is true; a file the toolkit did not write
    is never replaced. Both are checked before anything is generated.

    Parameters
    ----------
    out_dir : str or path-like
        Output directory (created if missing).
    persons : int
        Total persons (see :func:`synthesize_1940`).
    seed : int
        Non-negative seed.
    progress : bool, default False
        Show a progress bar (tqdm, on stderr).
    overwrite : bool, default True
        Replace data files in ``out_dir`` that the toolkit wrote; ``False`` refuses them too
        (``postproc synth1940`` passes ``False`` unless given ``--overwrite``).
    composition : str or Composition, default "default"
        How mixed counties are (see :func:`synthesize_1940`).

    Returns
    -------
    dict
        ``persons, households, gq_facilities, states, counties, enum_dists`` (counts),
        ``seconds`` and ``persons_per_second``, ``persons_path`` and ``units_path``.

    Raises
    ------
    HierarchyError
        If an argument is out of range, ``out_dir`` is not a path, or it cannot be created or
        written; or if ``persons.parquet`` or ``units.parquet`` exists in it and was not written
        by the toolkit, is not a regular file, or ``overwrite`` is false (the message names the
        file and the fix).

    Examples
    --------
    >>> import tempfile, pyarrow.parquet as pq
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     summary = write_synthetic_1940(tmp, 20_000, seed=1)
    ...     table = pq.read_table(summary["persons_path"])
    ...     units = pq.read_table(summary["units_path"])
    >>> summary["persons"], table.num_rows, summary["states"]
    (20000, 20000, 49)
    >>> summary["households"] + summary["gq_facilities"] == units.num_rows
    True
    """
    persons, seed = _check_arguments(persons, seed)
    composition = Composition.named(composition)
    if not isinstance(out_dir, (str, os.PathLike)):
        raise HierarchyError(f"out_dir must be a directory path (str or path-like), got "
                             f"{type(out_dir).__name__}")
    out = Path(out_dir)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise HierarchyError(f"cannot create output directory {str(out)!r}: {exc}") from exc
    final = {"persons": out / "persons.parquet", "units": out / "units.parquet"}
    for path in final.values():
        check_parquet_replaceable(path, overwrite=overwrite)
    started = time.perf_counter()
    temp = {k: out / f".{p.name}.{os.getpid()}.tmp" for k, p in final.items()}
    mixes = {} if composition == Composition() else {
        "composition": composition.name() or dataclasses.asdict(composition)}
    schemas = {k: schema.with_metadata({b"dapp": json.dumps(
        {"made_by": MADE_BY, "table": k, "persons": persons, "seed": seed, **mixes}).encode()})
        for k, schema in (("persons", PERSONS_SCHEMA), ("units", UNITS_SCHEMA))}
    counts = dict(persons=0, households=0, gq_facilities=0, states=0, counties=0, enum_dists=0)
    bar = None
    if progress:
        from tqdm import tqdm
        bar = tqdm(total=persons, unit="person", unit_scale=True, desc="synthetic 1940")
    try:
        with pq.ParquetWriter(temp["persons"], schemas["persons"]) as person_writer, \
                pq.ParquetWriter(temp["units"], schemas["units"]) as unit_writer:
            for s, size in enumerate(apportion_states(persons)):
                block = _generate_state(s, int(size), seed, composition)
                person_table, unit_table = _state_tables(block)
                person_writer.write_table(person_table, row_group_size=person_table.num_rows)
                unit_writer.write_table(unit_table, row_group_size=max(1, unit_table.num_rows))
                n_households = int(np.count_nonzero(block.unit_hhgq == 0))
                counts["persons"] += block.persons
                counts["households"] += n_households
                counts["gq_facilities"] += block.unit_hhgq.size - n_households
                counts["states"] += 1
                counts["counties"] += block.county_codes.size
                counts["enum_dists"] += block.ed_codes.size
                if bar is not None:
                    bar.update(block.persons)
                del block, person_table, unit_table
        for key in final:
            os.replace(temp[key], final[key])
    except OSError as exc:
        raise HierarchyError(f"cannot write synthetic data to {str(out)!r}: {exc}") from exc
    finally:
        if bar is not None:
            bar.close()
        for path in temp.values():
            if path.exists():
                path.unlink()
    seconds = time.perf_counter() - started
    return {**counts, "seconds": seconds, "persons_per_second": counts["persons"] / seconds,
            "persons_path": str(final["persons"]), "units_path": str(final["units"])}


def apportion_states(persons: int) -> np.ndarray:
    """Split ``persons`` over the 49 states in 1940 proportions (largest remainders, each ≥ 1).

    Parameters
    ----------
    persons : int
        Total, at least :data:`MIN_PERSONS`.

    Returns
    -------
    numpy.ndarray
        int64 persons per state, in :data:`STATE_FIPS` order, summing to ``persons``. When
        ``persons`` ≥ 1,200 every state is within one person of its exact proportional share.

    Examples
    --------
    >>> shares = apportion_states(131_669_275)  # the 1940 total of the 48 states and DC
    >>> int(shares.sum()), int(shares[STATE_FIPS.index("36")])
    (131669275, 13479142)
    >>> apportion_states(49).tolist() == [1] * 49
    True
    """
    persons, _ = _check_arguments(persons, 0)
    exact = persons * (STATE_POPULATION_1940 / STATE_POPULATION_1940.sum())
    counts = np.floor(exact).astype(np.int64)
    remainder = exact - counts
    order = np.argsort(-remainder, kind="stable")
    counts[order[: persons - int(counts.sum())]] += 1
    while (counts == 0).any():          # only below ~1,200 persons: take from the largest state
        counts[np.argmax(counts)] -= 1
        counts[np.flatnonzero(counts == 0)[0]] += 1
    return counts


# ---------------------------------------------------------------------------------------------
# one state
# ---------------------------------------------------------------------------------------------
def _generate_state(state_index: int, persons: int, seed: int,
                    composition: Composition = Composition()) -> _StateBlock:
    """All of one state's data from its own random stream (independent of the other states)."""
    rng_geo, rng_mix, rng_gq, rng_hh, rng_person = _state_streams(state_index, seed)
    fips = STATE_FIPS[state_index]

    # 1-2. geography: EDs, then counties as runs of whole EDs
    ed_persons, ed_county = _geography(state_index, persons, rng_geo)
    n_eds, n_counties = ed_persons.size, int(ed_county[-1]) + 1
    county_start = np.searchsorted(ed_county, np.arange(n_counties))
    ed_rank = np.arange(n_eds) - county_start[ed_county]
    if n_counties > 999 or ed_rank.max() >= 9999:
        raise HierarchyError(
            f"state {fips} would need {n_counties} counties / {ed_rank.max() + 1} EDs in one "
            f"county, more than its geocodes can name; use at most {MAX_PERSONS:,} persons")
    county_codes = np.strings.add(fips, np.strings.zfill(
        (np.arange(n_counties) + 1).astype(str), 3))
    ed_codes = np.strings.add(county_codes[ed_county],
                              np.strings.zfill((ed_rank + 1).astype(str), 4))

    # 3. composition: county mix around the state's, ED mix around the county's
    ed_mix = _ed_mixes(state_index, ed_persons, ed_county, rng_mix, composition)
    cut_points = (np.arange(n_eds)[:, None] + np.cumsum(ed_mix, axis=1)[:, :-1]).ravel()

    # 4. group quarters
    fac_ed, fac_hhgq, fac_persons = _facilities(ed_persons, rng_gq)
    gq_persons = np.bincount(fac_ed, weights=fac_persons, minlength=n_eds).astype(np.int64)

    # 5. households over the rest of each ED
    hh_ed, hh_persons = _households(ed_persons - gq_persons, rng_hh)
    hh_group = _draw_groups(hh_ed, cut_points, rng_hh)

    # units in output order: by ED, households first, then facilities by type
    unit_ed = np.concatenate([hh_ed, fac_ed]).astype(np.int32)
    unit_hhgq = np.concatenate([np.zeros(hh_ed.size, np.int8), fac_hhgq])
    order = np.argsort(unit_ed.astype(np.int64) * 8 + unit_hhgq, kind="stable")
    unit_ed, unit_hhgq = unit_ed[order], unit_hhgq[order]
    unit_persons = np.concatenate([hh_persons, fac_persons])[order]
    unit_group = np.concatenate([hh_group, np.zeros(fac_ed.size, np.int8)])[order]

    # persons
    unit_of = np.repeat(np.arange(unit_ed.size, dtype=np.int32), unit_persons)
    starts = np.cumsum(unit_persons) - unit_persons
    position = np.arange(persons, dtype=np.int64) - starts[unit_of]
    person_hhgq = unit_hhgq[unit_of]
    in_household = person_hhgq == 0
    under_18 = np.zeros(8)
    under_18[tables.GQ_TYPES] = tables.GQ_UNDER_18
    child_chance = np.where(in_household,
                            np.array([0.0, 1 - SECOND_MEMBER_ADULT, 1 - LATER_MEMBER_ADULT])
                            [np.minimum(position, 2)],
                            under_18[person_hhgq])
    votingage = (rng_person.random(persons) >= child_chance).astype(np.int8)
    fresh = ~in_household | ((position > 0) & (rng_person.random(persons) < HOUSEHOLD_MIXING))
    group = unit_group[unit_of]
    fresh_index = np.flatnonzero(fresh)
    group[fresh_index] = _draw_groups(unit_ed[unit_of[fresh_index]], cut_points, rng_person)
    if composition.lodgers > 0:     # drawn only then: the default's rows stay as they were
        lodger = np.flatnonzero(in_household & (position > 0)
                                & (rng_person.random(persons) < composition.lodgers))
        county_mix = (np.add.reduceat(ed_mix * ed_persons[:, None], county_start)
                      / np.add.reduceat(ed_persons, county_start)[:, None])
        county_cuts = (np.arange(n_counties)[:, None]
                       + np.cumsum(county_mix, axis=1)[:, :-1]).ravel()
        group[lodger] = _draw_groups(ed_county[unit_ed[unit_of[lodger]]], county_cuts,
                                     rng_person)
    hispanic, cenrace = np.divmod(group, 6)
    return _StateBlock(state_index, county_codes, ed_codes, ed_county.astype(np.int32), ed_persons,
                       unit_ed, unit_hhgq, unit_persons, person_hhgq, votingage,
                       hispanic.astype(np.int8), cenrace.astype(np.int8))


def _state_streams(state_index: int, seed: int) -> list[np.random.Generator]:
    """The state's five generators (geography, mix, group quarters, households, persons), all
    children of ``SeedSequence(seed, spawn_key=(state_index,))``."""
    streams = np.random.SeedSequence(seed, spawn_key=(state_index,)).spawn(5)
    return [np.random.Generator(np.random.PCG64(s)) for s in streams]


def _geography(state_index: int, persons: int,
               rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Persons per ED and county index per ED of one state (EDs of a county consecutive)."""
    ed_persons = _ed_sizes(persons, rng)
    return ed_persons, _county_of_eds(ed_persons, _county_count(state_index, persons), rng)


def _quantile_draws(n: int, knots: tuple, rng: np.random.Generator) -> np.ndarray:
    """``n`` sizes from a quantile function piecewise linear in log size through ``knots``."""
    probs, values = knots
    size = np.exp(np.interp(rng.random(n), probs, np.log(values)))
    return np.maximum(np.rint(size), 1).astype(np.int64)


def _ed_sizes(total: int, rng: np.random.Generator) -> np.ndarray:
    """ED sizes adding up to ``total``: draw until the running sum passes it, keep the count
    whose sum is nearest, and rescale (largest remainders, each ≥ 1) to add up exactly."""
    sizes = _quantile_draws(int(total / _MEAN_ED * 1.1) + 16, tables.ED_QUANTILES, rng)
    while sizes.sum() < total:
        sizes = np.concatenate([sizes, _quantile_draws(sizes.size, tables.ED_QUANTILES, rng)])
    running = np.cumsum(sizes)
    k = int(np.searchsorted(running, total))          # running[k] >= total
    if k > 0 and total - running[k - 1] < running[k] - total:
        k -= 1
    sizes = sizes[: k + 1]
    return _scale_to_total(sizes, total)


def _scale_to_total(sizes: np.ndarray, total: int) -> np.ndarray:
    """Rescale positive integers to add up to ``total`` (largest remainders), each ≥ 1."""
    if sizes.size == 1:
        return np.array([total], dtype=np.int64)
    exact = sizes * (total / sizes.sum())
    out = np.maximum(np.floor(exact).astype(np.int64), 1)
    short = total - int(out.sum())
    if short > 0:
        out[np.argsort(np.floor(exact) - exact, kind="stable")[:short]] += 1
    elif short < 0:                                   # only for tiny totals: trim the largest
        for _ in range(-short):
            out[np.argmax(out)] -= 1
    return out


def _county_of_eds(ed_persons: np.ndarray, n_counties: int,
                   rng: np.random.Generator) -> np.ndarray:
    """Group consecutive EDs into (about) ``n_counties`` counties.

    County targets are log-normal shares of the state's population; each county ends at the ED
    boundary nearest its cumulative target, so counties are whole EDs (a target smaller than
    about half an ED merges into a neighbour). Returns the county index (0, 1, ...) of every ED.
    """
    running = np.cumsum(ed_persons)
    total, n_eds = int(running[-1]), ed_persons.size
    weights = np.exp(tables.COUNTY_LOG_SD * rng.standard_normal(n_counties))
    ends = np.cumsum(weights)[:-1] * (total / weights.sum())
    after = np.minimum(np.searchsorted(running, ends), n_eds - 1)   # running[after] >= end
    before_sum = np.where(after > 0, running[np.maximum(after - 1, 0)], 0)
    cut = np.where(ends - before_sum < running[after] - ends, after, after + 1)
    cut = np.unique(cut[(cut > 0) & (cut < n_eds)])   # number of EDs before each county boundary
    county = np.zeros(n_eds, dtype=np.int64)
    county[cut] = 1
    return np.cumsum(county)


def _county_count(state_index: int, persons: int) -> int:
    """The state's 1940 number of counties scaled to ``persons`` (rounded, at least 1)."""
    scale = persons / int(STATE_POPULATION_1940[state_index])
    return max(1, int(np.rint(tables.STATES[state_index][3] * scale)))


def _facilities(ed_persons: np.ndarray, rng: np.random.Generator):
    """Group-quarters facilities: (ED, hhgq type, persons), sorted by ED then type, never more
    persons in an ED than the ED has."""
    n_eds = ed_persons.size
    eds, types, persons = [], [], []
    for k, gq_type in enumerate(tables.GQ_TYPES):
        has = np.flatnonzero(rng.random(n_eds) < tables.GQ_ED_PROBABILITY[k])
        count = 1 + rng.poisson(tables.GQ_EXTRA_FACILITIES[k], has.size)
        ed = np.repeat(has, count)
        size = tables.GQ_MEDIAN_PERSONS[k] * np.exp(tables.GQ_LOG_SD[k]
                                                    * rng.standard_normal(ed.size))
        eds.append(ed)
        types.append(np.full(ed.size, gq_type, np.int8))
        persons.append(np.maximum(np.rint(size), 1).astype(np.int64))
    ed, gq_type, size = np.concatenate(eds), np.concatenate(types), np.concatenate(persons)
    order = np.argsort(ed * 8 + gq_type, kind="stable")
    ed, gq_type, size = ed[order], gq_type[order], size[order]
    # at most one facility per person of the ED
    first = np.searchsorted(ed, ed)
    keep = (np.arange(ed.size) - first) < ed_persons[ed]
    ed, gq_type, size = ed[keep], gq_type[keep], size[keep]
    # squeeze EDs whose facilities hold more persons than the ED: 1 each + proportional rest
    count = np.bincount(ed, minlength=n_eds)
    total = np.bincount(ed, weights=size, minlength=n_eds).astype(np.int64)
    over = (total > ed_persons)[ed]
    if over.any():
        room = (ed_persons - count)[ed[over]]
        spare = (total - count)[ed[over]]
        size[over] = 1 + ((size[over] - 1) * room) // spare
        short = ed_persons - np.bincount(ed, weights=size, minlength=n_eds).astype(np.int64)
        first = np.unique(np.searchsorted(ed, ed[over]))
        size[first] += short[ed[first]]
    return ed.astype(np.int32), gq_type, size


def _households(household_persons: np.ndarray, rng: np.random.Generator):
    """Cut each ED's household population into households: one run of 1940-like sizes over the
    whole state, cut again at ED boundaries. Returns (ED, persons) per household."""
    boundaries = np.cumsum(household_persons)
    total = int(boundaries[-1])
    if total == 0:
        return np.zeros(0, np.int32), np.zeros(0, np.int64)
    cdf = np.cumsum(tables.HOUSEHOLD_SIZE_PMF)
    cdf /= cdf[-1]
    n_draw = int(total / 3.7 * 1.05) + 16
    draws = np.searchsorted(cdf, rng.random(n_draw), side="right") + 1
    while draws.sum() < total:
        draws = np.concatenate([draws, np.searchsorted(cdf, rng.random(n_draw), side="right") + 1])
    is_start = np.zeros(total, dtype=bool)           # a household starts at this person
    ends = np.cumsum(draws)
    is_start[ends[ends < total]] = True
    is_start[boundaries[boundaries < total]] = True   # and at every ED boundary
    is_start[0] = True
    starts = np.flatnonzero(is_start)
    sizes = np.diff(np.concatenate([starts, [total]]))
    ed = np.searchsorted(boundaries, starts, side="right")
    return ed.astype(np.int32), sizes.astype(np.int64)


# ---------------------------------------------------------------------------------------------
# tables and checks
# ---------------------------------------------------------------------------------------------
def _table(schema: pa.Schema, geo_indices, dictionaries, attributes) -> pa.Table:
    arrays = [pa.DictionaryArray.from_arrays(pa.array(idx, pa.int32()), pa.array(d, pa.string()))
              for idx, d in zip(geo_indices, dictionaries)]
    arrays += [pa.array(a, pa.int8()) for a in attributes]
    return pa.Table.from_arrays(arrays, schema=schema)


def _state_tables(block: _StateBlock) -> tuple[pa.Table, pa.Table]:
    """Persons and units tables of one state, with dictionaries local to the state."""
    dictionaries = (np.array([STATE_FIPS[block.state_index]]), block.county_codes, block.ed_codes)
    person_ed = block.person_ed
    persons = _table(PERSONS_SCHEMA,
                     [np.zeros(person_ed.size, np.int32), block.ed_county[person_ed], person_ed],
                     dictionaries,
                     [block.person_hhgq, block.votingage, block.hispanic, block.cenrace])
    units = _table(UNITS_SCHEMA,
                   [np.zeros(block.unit_ed.size, np.int32), block.ed_county[block.unit_ed],
                    block.unit_ed], dictionaries, [block.unit_hhgq])
    return persons, units


def _check_arguments(persons: Any, seed: Any) -> tuple[int, int]:
    if isinstance(persons, bool) or not isinstance(persons, (int, np.integer)):
        raise HierarchyError(f"persons must be an integer, got {persons!r} "
                             f"({type(persons).__name__})")
    if persons < MIN_PERSONS:
        raise HierarchyError(f"persons must be at least {MIN_PERSONS} (one per state and DC), "
                             f"got {persons}")
    if persons > MAX_PERSONS:
        raise HierarchyError(f"persons must be at most {MAX_PERSONS:,} (county geocodes have "
                             f"3 digits), got {persons:,}")
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
        raise HierarchyError(f"seed must be a non-negative integer, got {seed!r} "
                             f"({type(seed).__name__})")
    if seed < 0:
        raise HierarchyError(f"seed must be a non-negative integer, got {seed}")
    return int(persons), int(seed)
