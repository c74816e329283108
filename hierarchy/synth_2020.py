"""Realistic synthetic 2020-style persons, units and blocks for the PL 94-171 presets.

The generator builds, for each of the 50 states and DC (and Puerto Rico on request), the census
geography state → county → tract → block group → block at the scale of the 2020 census, and the
persons of the :data:`hierarchy.presets.pl94.PL94_2020` schema in it. It is synthetic data for
experiments, not a privacy mechanism: its randomness is an ordinary seeded
``numpy.random.Generator``. A state's plan has the stream ``SeedSequence(seed, spawn_key=(fips,
0))`` and each county's persons ``SeedSequence(seed, spawn_key=(fips, 1, county))``, so a
county's rows depend neither on the other states chosen nor on how the work is chunked.

The model (constants below; state figures in :data:`STATES`):

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

import functools
import itertools
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
from hierarchy.presets.pl94 import CENRACE_LABELS, LEVELS
from hierarchy.synth import _rake

__all__ = ["Synthetic2020", "synthesize_2020", "apportion_states_2020", "cenrace_distribution",
           "STATES", "MADE_BY", "MAX_PERSONS", "PERSON_COLUMNS", "UNIT_COLUMNS",
           "BLOCK_COLUMNS"]

#: The ``made_by`` of the manifest and of the parquet metadata (key ``b"dapp"``).
MADE_BY = "postproc synth2020"

#: Most persons accepted (about 1.2 times 2020): more would need more than 499 counties in a
#: state (odd 3-digit county codes) or 999 blocks in a block group.
MAX_PERSONS = 400_000_000

#: 2020 figures per state, in FIPS order: (FIPS, postal code, 2020 census population, counties
#: (county equivalents), % Hispanic, % Black alone, % Asian alone, % AIAN alone, % NHPI alone,
#: % two or more races, % under 18). Populations and county counts are the 2020 census's; the
#: percentages are the 2020 redistricting-data shares rounded to about 0.1 point (race "alone"
#: of any ethnicity), transcribed for synthetic data, not for analysis.
STATES: tuple[tuple[Any, ...], ...] = (
    ("01", "AL", 5_024_279, 67, 5.3, 25.8, 1.5, 0.7, 0.1, 5.1, 22.2),
    ("02", "AK", 733_391, 29, 7.1, 3.0, 6.5, 15.2, 1.7, 12.9, 24.6),
    ("04", "AZ", 7_151_502, 15, 30.7, 4.7, 3.7, 4.5, 0.2, 13.9, 22.5),
    ("05", "AR", 3_011_524, 75, 8.5, 15.1, 1.7, 0.9, 0.5, 7.0, 23.2),
    ("06", "CA", 39_538_223, 58, 39.4, 5.7, 15.5, 1.6, 0.4, 14.6, 22.5),
    ("08", "CO", 5_773_714, 64, 21.9, 4.1, 3.5, 1.3, 0.2, 11.7, 21.8),
    ("09", "CT", 3_605_944, 8, 17.3, 10.8, 4.8, 0.4, 0.1, 9.1, 20.4),
    ("10", "DE", 989_948, 3, 10.5, 22.1, 4.2, 0.5, 0.1, 6.4, 20.7),
    ("11", "DC", 689_545, 1, 11.3, 41.4, 4.8, 0.5, 0.1, 7.3, 18.1),
    ("12", "FL", 21_538_187, 67, 26.5, 15.1, 3.0, 0.4, 0.1, 15.2, 19.7),
    ("13", "GA", 10_711_908, 159, 10.5, 31.0, 4.5, 0.5, 0.1, 6.3, 23.4),
    ("15", "HI", 1_455_271, 5, 9.5, 1.6, 37.2, 0.3, 10.8, 25.3, 21.3),
    ("16", "ID", 1_839_106, 44, 13.0, 0.7, 1.5, 1.4, 0.2, 8.5, 24.8),
    ("17", "IL", 12_812_508, 102, 18.2, 14.0, 6.0, 0.8, 0.1, 8.4, 22.1),
    ("18", "IN", 6_785_528, 92, 8.2, 9.6, 2.7, 0.4, 0.1, 6.0, 23.3),
    ("19", "IA", 3_190_369, 99, 6.8, 4.1, 2.6, 0.5, 0.2, 5.1, 23.1),
    ("20", "KS", 2_937_880, 105, 13.0, 5.7, 3.0, 1.0, 0.1, 8.4, 23.7),
    ("21", "KY", 4_505_836, 120, 4.6, 8.0, 1.6, 0.3, 0.1, 5.5, 22.6),
    ("22", "LA", 4_657_757, 64, 6.9, 31.4, 1.8, 0.7, 0.1, 4.8, 23.2),
    ("23", "ME", 1_362_359, 16, 1.9, 1.9, 1.2, 0.6, 0.1, 5.0, 18.5),
    ("24", "MD", 6_177_224, 24, 11.8, 29.5, 6.8, 0.6, 0.1, 6.0, 22.0),
    ("25", "MA", 7_029_917, 14, 12.6, 7.0, 7.2, 0.3, 0.1, 8.7, 19.6),
    ("26", "MI", 10_077_331, 83, 5.6, 13.7, 3.4, 0.6, 0.1, 5.6, 21.4),
    ("27", "MN", 5_706_494, 87, 6.1, 7.0, 5.2, 1.1, 0.1, 5.5, 22.9),
    ("28", "MS", 2_961_279, 82, 3.6, 36.6, 1.1, 0.6, 0.1, 3.5, 23.3),
    ("29", "MO", 6_154_913, 115, 5.1, 11.4, 2.2, 0.5, 0.2, 6.6, 22.2),
    ("30", "MT", 1_084_225, 56, 4.4, 0.5, 0.8, 6.2, 0.1, 7.0, 21.0),
    ("31", "NE", 1_961_504, 93, 12.0, 4.9, 2.7, 1.1, 0.1, 7.2, 24.2),
    ("32", "NV", 3_104_614, 17, 28.7, 10.3, 8.7, 1.4, 0.9, 13.8, 22.3),
    ("33", "NH", 1_377_529, 10, 4.3, 1.5, 2.6, 0.2, 0.1, 5.4, 18.7),
    ("34", "NJ", 9_288_994, 21, 21.6, 12.4, 10.3, 0.6, 0.1, 8.7, 21.8),
    ("35", "NM", 2_117_522, 33, 47.7, 2.1, 1.8, 10.0, 0.1, 19.0, 22.3),
    ("36", "NY", 20_201_249, 62, 19.5, 15.2, 9.6, 0.8, 0.1, 9.3, 20.8),
    ("37", "NC", 10_439_388, 100, 10.7, 20.5, 3.3, 1.2, 0.1, 6.6, 21.9),
    ("38", "ND", 779_094, 53, 4.3, 3.4, 1.7, 5.0, 0.1, 5.0, 23.5),
    ("39", "OH", 11_799_448, 88, 4.4, 12.5, 2.5, 0.2, 0.1, 5.5, 22.0),
    ("40", "OK", 3_959_353, 77, 11.9, 7.0, 2.3, 8.0, 0.2, 14.3, 23.8),
    ("41", "OR", 4_237_256, 36, 13.9, 2.0, 4.7, 1.4, 0.5, 10.7, 20.5),
    ("42", "PA", 13_002_700, 67, 8.1, 11.0, 3.9, 0.2, 0.1, 5.4, 20.8),
    ("44", "RI", 1_097_379, 5, 16.6, 5.7, 3.6, 0.7, 0.1, 9.6, 19.3),
    ("45", "SC", 5_118_425, 46, 6.9, 25.0, 1.8, 0.5, 0.1, 5.4, 21.4),
    ("46", "SD", 886_667, 66, 4.5, 2.0, 1.5, 8.8, 0.1, 5.4, 24.2),
    ("47", "TN", 6_910_840, 95, 6.9, 15.8, 2.0, 0.4, 0.1, 5.4, 22.0),
    ("48", "TX", 29_145_505, 254, 39.3, 12.2, 5.4, 1.0, 0.1, 17.6, 25.2),
    ("49", "UT", 3_271_616, 29, 15.1, 1.2, 2.5, 1.3, 1.1, 9.2, 28.6),
    ("50", "VT", 643_077, 14, 2.4, 1.4, 1.8, 0.4, 0.1, 5.6, 18.2),
    ("51", "VA", 8_631_393, 133, 10.5, 18.6, 7.1, 0.5, 0.1, 7.6, 21.8),
    ("53", "WA", 7_705_281, 39, 13.7, 4.0, 9.6, 1.6, 0.8, 10.9, 21.8),
    ("54", "WV", 1_793_716, 55, 1.9, 3.6, 0.8, 0.2, 0.1, 4.3, 20.2),
    ("55", "WI", 5_893_718, 72, 7.6, 6.4, 3.0, 1.0, 0.1, 5.5, 21.8),
    ("56", "WY", 576_851, 23, 10.2, 0.9, 0.9, 2.4, 0.1, 8.3, 22.9),
    ("72", "PR", 3_285_874, 78, 98.9, 7.0, 0.1, 0.5, 0.1, 49.8, 17.9),
)
_FIPS = tuple(row[0] for row in STATES)
_PUERTO_RICO = _FIPS.index("72")

PERSON_COLUMNS = LEVELS[1:] + ("hhgq", "votingage", "hispanic", "cenrace")
UNIT_COLUMNS = LEVELS[1:] + ("hhgq",)
BLOCK_COLUMNS = LEVELS[1:] + ("housing_units",)
_GEOCODE = pa.dictionary(pa.int32(), pa.string())
PERSONS_SCHEMA = pa.schema([(n, _GEOCODE) for n in LEVELS[1:]]
                           + [(n, pa.int8()) for n in PERSON_COLUMNS[5:]])
UNITS_SCHEMA = pa.schema([(n, _GEOCODE) for n in LEVELS[1:]] + [("hhgq", pa.int8())])
BLOCKS_SCHEMA = pa.schema([(n, _GEOCODE) for n in LEVELS[1:]] + [("housing_units", pa.int32())])

# -- geography ------------------------------------------------------------------------------------
COUNTY_LOG_SD = 1.4          # log-sd of county sizes within a state
TRACT_PERSONS = 4_000        # persons per tract, on average
TRACT_SHAPE = 6.0            # gamma shape of tract weights in a county (CV about 0.4)
BLOCK_GROUP_PERSONS = 1_500  # persons per block group, on average (1-9 per tract)
BLOCK_GROUP_SHAPE = 4.0      # gamma shape of block-group weights in a tract
PERSONS_PER_BLOCK = 40.8     # about 8.1M blocks for 331M persons
BLOCK_DENSITY_LOG_SD = 0.5   # tract-level log-sd of blocks per person (rural tracts: more)
EMPTY_BLOCK_SHARE = 0.30     # mean share of empty blocks (tract-level Beta(3, 7))
BLOCK_LOG_SD = 1.1           # log-sd of the weights of non-empty blocks in a block group

# -- composition ----------------------------------------------------------------------------------
#: The seven major groups: non-Hispanic White, Black, AIAN, Asian, NHPI alone; non-Hispanic
#: other (Some Other Race alone or two or more races); Hispanic.
MAJOR_GROUPS = ("nh_white", "nh_black", "nh_aian", "nh_asian", "nh_nhpi", "nh_other",
                "hispanic")
COUNTY_CONCENTRATION = 20.0          # Dirichlet concentration of a county's mix around its state
TRACT_CONCENTRATION = (1.0, 100.0)   # log-uniform range of a tract's concentration around county
BLOCK_DOMINANCE = 0.8                # a block's dominant group takes U(0, this) of its households
HOUSEHOLD_MIXING = 0.06              # chance a household member is drawn afresh from the tract
#: Race of Hispanic persons (2020, national): shares of the six races alone and of two or more.
HISPANIC_RACE = (0.203, 0.019, 0.024, 0.005, 0.001, 0.421, 0.327)
#: Puerto Rico's own (its population is almost all Hispanic).
HISPANIC_RACE_PR = (0.171, 0.070, 0.005, 0.001, 0.001, 0.253, 0.499)
NH_SOME_OTHER_RACE = 0.0063          # non-Hispanic Some Other Race alone, share of non-Hispanics
#: Relative frequency of the 15 two-race combinations (in CENRACE_LABELS order 6..20) among the
#: multiracial: non-Hispanic, then Hispanic (White and Some Other Race dominates the latter).
PAIRS_NON_HISPANIC = (0.215, 0.19, 0.19, 0.02, 0.11, 0.035, 0.015, 0.004, 0.025, 0.006, 0.002,
                      0.006, 0.03, 0.01, 0.002)
PAIRS_HISPANIC = (0.03, 0.04, 0.012, 0.003, 0.78, 0.003, 0.001, 0.0005, 0.03, 0.001, 0.0003,
                  0.04, 0.001, 0.006, 0.002)
TWO_RACE_SHARE = (0.92, 0.95)        # of the multiracial, non-Hispanic and Hispanic
#: Propensity of each race to appear in a combination of three or more.
RACE_PROPENSITY = (1.0, 0.35, 0.45, 0.35, 0.25, 0.3)

# -- households, group quarters, age -----------------------------------------------------------
#: Household sizes 1..10 (2020-like; mean about 2.5).
HOUSEHOLD_SIZE_PMF = (0.278, 0.345, 0.153, 0.127, 0.058, 0.023, 0.009, 0.004, 0.002, 0.001)
VACANCY = 0.107                      # vacant per occupied housing unit (9.7 % vacant)
EMPTY_BLOCK_VACANT = (0.1, 3.0)      # chance an empty block has vacant units, and their mean
#: GQ types 1-7: (share of the population, median persons, log-sd of persons, share under 18).
GQ_TYPES = ((0.0059, 250, 1.2, 0.002), (0.0002, 20, 0.9, 0.75), (0.0038, 85, 0.6, 0.0),
            (0.0010, 20, 1.2, 0.08), (0.0083, 250, 1.0, 0.03), (0.0010, 250, 1.2, 0.02),
            (0.0047, 12, 1.2, 0.12))
#: Relative chance that a household member (not the householder) is under 18, by major group.
MINOR_FACTORS = (0.80, 1.05, 1.10, 0.95, 1.10, 1.60, 1.30)
TRACT_MINOR_LOG_SD = 0.15            # tract-level spread of the chance of being under 18
_MINOR_CALIBRATION = 1.00            # households cut at block boundaries have fewer members


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
    hierarchy.errors.HierarchyError: unknown state 'XX'; give FIPS codes or postal codes such as '06' or 'CA' (Puerto Rico: '72' or 'PR', or puerto_rico=True)
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


@functools.cache
def cenrace_distribution(state: str, hispanic: bool) -> np.ndarray:
    """The 63 cenrace shares of a state's Hispanic or non-Hispanic "other" persons.

    Non-Hispanic: the group "Some Other Race alone or two or more races" (the single races of
    non-Hispanic persons are groups of their own). Hispanic: every combination. Two-race
    combinations get the national relative frequencies (:data:`PAIRS_NON_HISPANIC`,
    :data:`PAIRS_HISPANIC`) tilted by the square root of how much more common each of its races
    is in the state than nationally; three or more races share the rest in proportion to
    :data:`RACE_PROPENSITY`.

    Parameters
    ----------
    state : str
        FIPS code.
    hispanic : bool

    Returns
    -------
    numpy.ndarray
        63 shares (read-only) summing to 1, in :data:`hierarchy.presets.pl94.CENRACE_LABELS` order.

    Examples
    --------
    >>> p = cenrace_distribution("06", hispanic=True)
    >>> round(float(p.sum()), 12), int(p.argmax()), CENRACE_LABELS[int(p.argmax())]
    (1.0, 5, 'sor')
    >>> q = cenrace_distribution("06", hispanic=False)
    >>> float(q[:5].sum()), CENRACE_LABELS[int(q[6:].argmax()) + 6]
    (0.0, 'white-asian')
    """
    row = _FIPS.index(state)
    tilt = np.sqrt(_race_tilt(row))
    multi = np.zeros(len(CENRACE_LABELS))
    pairs = np.array(PAIRS_HISPANIC if hispanic else PAIRS_NON_HISPANIC) * np.array(
        [tilt[a] * tilt[b] for a, b in itertools.combinations(range(6), 2)])
    two = TWO_RACE_SHARE[1 if hispanic else 0]
    multi[6:21] = two * pairs / pairs.sum()
    more = np.array([np.prod([RACE_PROPENSITY[r] * tilt[r] for r in combo])
                     for k in range(3, 7) for combo in itertools.combinations(range(6), k)])
    multi[21:] = (1 - two) * more / more.sum()
    if hispanic:
        alone = HISPANIC_RACE_PR if row == _PUERTO_RICO else HISPANIC_RACE
        out = np.concatenate([alone[:6], np.zeros(57)]) + alone[6] * multi
    else:
        _, other, sor = _non_hispanic_shares(row)
        out = multi * (other - sor) / other
        out[5] = sor / other
    out = out / out.sum()
    out.setflags(write=False)
    return out


# ---------------------------------------------------------------------------------------------
# the state mixes
# ---------------------------------------------------------------------------------------------
def _hispanic_race(row: int) -> tuple[float, ...]:
    return HISPANIC_RACE_PR if row == _PUERTO_RICO else HISPANIC_RACE


def _non_hispanic_shares(row: int) -> tuple[np.ndarray, float, float]:
    """(non-Hispanic White, Black, AIAN, Asian, NHPI alone as shares of the state), the
    non-Hispanic "other" share, and its Some Other Race alone part."""
    _, _, _, _, hisp, black, asian, aian, nhpi, two, _ = STATES[row]
    h = hisp / 100
    hr = _hispanic_race(row)
    alone = np.maximum(np.array([black, aian, asian, nhpi]) / 100
                       - h * np.array([hr[1], hr[2], hr[3], hr[4]]), 1e-4)
    sor = NH_SOME_OTHER_RACE * (1 - h)
    other = max(two / 100 - h * hr[6], 0.002 * (1 - h)) + sor
    white = 1 - h - alone.sum() - other
    if white < 0.001:                       # only for Puerto Rico-like rows: shrink the rest
        scale = (1 - h - 0.001) / (alone.sum() + other)
        alone, other, sor, white = alone * scale, other * scale, sor * scale, 0.001
    return np.concatenate([[white], alone]), other, sor


@functools.cache
def _state_major_mix(row: int) -> np.ndarray:
    """The state's shares of the seven major groups."""
    alone, other, _ = _non_hispanic_shares(row)
    mix = np.concatenate([alone, [other, STATES[row][4] / 100]])
    return mix / mix.sum()


@functools.cache
def _national_alone() -> np.ndarray:
    """National shares of the six races alone (50 states and DC, 2020 weights)."""
    pops = np.array([r[2] for r in STATES[:_PUERTO_RICO]], dtype=np.float64)
    shares = np.array([_alone_shares(r) for r in range(_PUERTO_RICO)])
    return pops @ shares / pops.sum()


def _alone_shares(row: int) -> np.ndarray:
    """The state's shares of the six races alone (White from the remainder)."""
    _, _, _, _, _, black, asian, aian, nhpi, two, _ = STATES[row]
    hr = _hispanic_race(row)
    h = STATES[row][4] / 100
    sor = h * hr[5] + NH_SOME_OTHER_RACE * (1 - h)
    rest = np.array([black, aian, asian, nhpi]) / 100
    white = max(1 - rest.sum() - sor - two / 100, 0.001)
    return np.concatenate([[white], rest, [sor]])


def _race_tilt(row: int) -> np.ndarray:
    """How much more common each race alone is in the state than nationally."""
    return np.maximum(_alone_shares(row) / _national_alone(), 0.05)


# ---------------------------------------------------------------------------------------------
# one state's plan: geography, block sizes, facilities, mixes
# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class _StatePlan:
    """What a state's counties are generated from (indices are local to the state)."""

    row: int
    codes: tuple[np.ndarray, ...]     # str geocodes: county, tract, block group, block
    parents: tuple[np.ndarray, ...]   # int32: tract → county, block group → tract, block → bg
    block_tract: np.ndarray           # int32
    county_blocks: np.ndarray         # int64 offsets: county c has blocks [c], [c + 1]
    block_household: np.ndarray       # int64 household persons per block
    facility_block: np.ndarray        # int32, sorted (then by type)
    facility_type: np.ndarray         # int8 1-7
    facility_persons: np.ndarray      # int64
    tract_cut: np.ndarray             # float64 cut points of the tracts' major-group mixes
    minor_chance: np.ndarray          # float64 (tracts × 7): a household member is under 18

    @property
    def fips(self) -> str:
        return STATES[self.row][0]


def _stream(seed: int, *key: int) -> np.random.Generator:
    return np.random.Generator(np.random.PCG64(np.random.SeedSequence(seed, spawn_key=key)))


def _plan_state(row: int, persons: int, seed: int) -> _StatePlan:
    """The state's geography, household persons per block, facilities and mixes."""
    rng = _stream(seed, int(STATES[row][0]), 0)
    fac_type, fac_persons = _facility_sizes(persons, rng)
    household = persons - int(fac_persons.sum())
    # counties (≥ 1 household person each), tracts, block groups
    n_counties = int(np.clip(np.rint(STATES[row][3] * persons / STATES[row][2]), 1,
                             min(499, household)))
    county_hh = 1 + _split(np.array([household - n_counties]), np.array([n_counties]),
                           np.exp(COUNTY_LOG_SD * rng.standard_normal(n_counties)))
    n_tracts = np.maximum(np.rint(county_hh / TRACT_PERSONS), 1).astype(np.int64)
    tract_hh = _split(county_hh, n_tracts, rng.standard_gamma(TRACT_SHAPE, n_tracts.sum()))
    n_bgs = np.clip(np.rint(tract_hh / BLOCK_GROUP_PERSONS), 1, 9).astype(np.int64)
    bg_hh = _split(tract_hh, n_bgs, rng.standard_gamma(BLOCK_GROUP_SHAPE, n_bgs.sum()))
    bg_tract = np.repeat(np.arange(n_tracts.sum()), n_bgs)
    # blocks: a tract-level density and empty share; heavy-tailed sizes of the others
    density = np.exp(BLOCK_DENSITY_LOG_SD * rng.standard_normal(tract_hh.size)
                     - BLOCK_DENSITY_LOG_SD ** 2 / 2)
    per_block = PERSONS_PER_BLOCK * household / persons
    n_blocks = np.clip(np.rint(bg_hh / per_block * density[bg_tract]), 1, 999).astype(np.int64)
    block_bg = np.repeat(np.arange(bg_hh.size), n_blocks)
    empty_share = rng.beta(3.0, 3.0 / EMPTY_BLOCK_SHARE - 3.0, tract_hh.size)
    weight = np.where(rng.random(block_bg.size) < empty_share[bg_tract[block_bg]], 0.0,
                      np.exp(BLOCK_LOG_SD * rng.standard_normal(block_bg.size)))
    first = np.cumsum(n_blocks) - n_blocks
    no_room = (np.add.reduceat(weight, first) == 0) & (bg_hh > 0)
    weight[first[no_room]] = 1.0
    block_hh = _split(bg_hh, n_blocks, weight)
    # facilities in blocks drawn uniformly, sorted by block and type
    fac_block = rng.integers(0, block_bg.size, fac_type.size)
    order = np.lexsort((fac_type, fac_block))
    # composition and age by tract
    tract_county = np.repeat(np.arange(n_counties), n_tracts)
    mixes = _tract_mixes(row, county_hh, tract_hh, tract_county, rng)
    cut = (np.arange(mixes.shape[0])[:, None] + np.cumsum(mixes, axis=1)[:, :-1]).ravel()
    minor = _minor_chance(row, persons, household, tract_hh.size, rng)
    block_tract = bg_tract[block_bg]
    county_blocks = np.searchsorted(tract_county[block_tract], np.arange(n_counties + 1))
    return _StatePlan(row, _geocodes(STATES[row][0], n_tracts, n_bgs, n_blocks),
                      (tract_county.astype(np.int32), bg_tract.astype(np.int32),
                       block_bg.astype(np.int32)),
                      block_tract.astype(np.int32), county_blocks, block_hh,
                      fac_block[order].astype(np.int32), fac_type[order], fac_persons[order],
                      cut, minor)


def _split(totals: np.ndarray, counts: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Integer parts of each total in proportion to its children's weights.

    Parent ``j`` has the next ``counts[j]`` (≥ 1) entries of ``weights``; its parts add up to
    ``totals[j]`` (largest remainders; a child of weight 0 gets 0 unless all have weight 0, when
    the first child gets everything).
    """
    totals = np.asarray(totals, dtype=np.int64)
    first = np.cumsum(counts) - counts
    parent = np.repeat(np.arange(counts.size), counts)
    weights = np.asarray(weights, dtype=np.float64).copy()
    dead = np.add.reduceat(weights, first) <= 0
    weights[first[dead]] = 1.0
    exact = totals[parent] * (weights / np.add.reduceat(weights, first)[parent])
    parts = np.floor(exact).astype(np.int64)
    short = totals - np.add.reduceat(parts, first)
    order = np.lexsort((parts - exact, parent))      # by parent, largest remainder first
    rank = np.arange(order.size) - first[parent[order]]
    parts[order[rank < short[parent[order]]]] += 1
    return parts


def _facility_sizes(persons: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Types and persons of a state's group-quarters facilities (each at most a twentieth of
    the state, all together at most a quarter)."""
    types, sizes = [], []
    cap = max(1, persons // 20)
    for gq_type, (share, median, log_sd, _) in enumerate(GQ_TYPES, start=1):
        mean = median * np.exp(log_sd ** 2 / 2)
        n = rng.poisson(share * persons / mean)
        size = np.rint(median * np.exp(log_sd * rng.standard_normal(n)))
        types.append(np.full(n, gq_type, np.int8))
        sizes.append(np.clip(size, 1, cap).astype(np.int64))
    fac_type, fac_persons = np.concatenate(types), np.concatenate(sizes)
    keep = np.cumsum(fac_persons) <= persons // 4
    return fac_type[keep], fac_persons[keep]


def _dirichlet(alpha: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """One Dirichlet draw per row of ``alpha`` (rows whose draws all underflow get the mean)."""
    gamma = rng.standard_gamma(alpha)
    total = gamma.sum(axis=1, keepdims=True)
    dead = total[:, 0] <= 0
    gamma[dead] = alpha[dead]
    total[dead] = alpha[dead].sum(axis=1, keepdims=True)
    return gamma / total


def _tract_mixes(row: int, county_hh: np.ndarray, tract_hh: np.ndarray,
                 tract_county: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """The major-group mix of every tract: counties around the state, tracts around their
    county, each level raked so that its parent's mix holds exactly (by population)."""
    state = _state_major_mix(row)
    county = _dirichlet(np.tile(COUNTY_CONCENTRATION * state, (county_hh.size, 1)), rng)
    county = _rake(county, county_hh.astype(np.float64) + 1e-9, np.array([0]), state[None, :])
    concentration = np.exp(rng.uniform(*np.log(TRACT_CONCENTRATION), tract_hh.size))
    tract = _dirichlet(concentration[:, None] * county[tract_county], rng)
    starts = np.cumsum(np.bincount(tract_county, minlength=county_hh.size))
    starts = np.concatenate([[0], starts[:-1]])
    return _rake(tract, tract_hh.astype(np.float64) + 1e-9, starts, county)


def _minor_chance(row: int, persons: int, household: int, n_tracts: int,
                  rng: np.random.Generator) -> np.ndarray:
    """Chance that a household member other than the householder is under 18, by tract and
    major group, so that the state's share under 18 is about its 2020 value."""
    mean_size = np.dot(np.arange(1, 11), HOUSEHOLD_SIZE_PMF) / sum(HOUSEHOLD_SIZE_PMF)
    members = household * (1 - 1 / mean_size)
    base = STATES[row][10] / 100 * persons / members * _MINOR_CALIBRATION
    factors = np.array(MINOR_FACTORS) / np.dot(_state_major_mix(row), MINOR_FACTORS)
    tract = base * np.exp(TRACT_MINOR_LOG_SD * rng.standard_normal(n_tracts))
    return np.clip(tract[:, None] * factors[None, :], 0.0, 0.95)


def _geocodes(fips: str, n_tracts: np.ndarray, n_bgs: np.ndarray,
              n_blocks: np.ndarray) -> tuple[np.ndarray, ...]:
    """County (5), tract (11), block group (12) and block (16 characters) geocodes."""
    def rank(counts: np.ndarray) -> np.ndarray:       # 0, 1, … within each parent
        return np.arange(counts.sum()) - np.repeat(np.cumsum(counts) - counts, counts)

    county = np.strings.add(fips, np.strings.zfill((2 * np.arange(n_tracts.size) + 1)
                                                   .astype(str), 3))
    tract = np.strings.add(np.repeat(county, n_tracts),
                           np.strings.zfill((100 * (rank(n_tracts) + 1)).astype(str), 6))
    bg_digit = (rank(n_bgs) + 1).astype(str)
    bg = np.strings.add(np.repeat(tract, n_bgs), bg_digit)
    block = np.strings.add(np.repeat(np.strings.add(bg, bg_digit), n_blocks),
                           np.strings.zfill(rank(n_blocks).astype(str), 3))
    return county, tract, bg, block


# ---------------------------------------------------------------------------------------------
# one county's persons, units and blocks
# ---------------------------------------------------------------------------------------------
_BASE_RACE = np.array([0, 1, 2, 3, 4, 5, 5], dtype=np.int8)   # cenrace of the "alone" groups
_MINOR_GQ = np.array([0.0] + [t[3] for t in GQ_TYPES])
_HOUSEHOLD_CDF = np.cumsum(HOUSEHOLD_SIZE_PMF) / sum(HOUSEHOLD_SIZE_PMF)


@dataclass(frozen=True)
class _County:
    """One county's rows; block indices are local to the county."""

    person_block: np.ndarray          # int32, sorted
    person_columns: tuple[np.ndarray, ...]   # int8: hhgq, votingage, hispanic, cenrace
    unit_block: np.ndarray            # int32, sorted
    unit_hhgq: np.ndarray             # int8
    housing_units: np.ndarray         # int32, per block of the county


def _generate_county(plan: _StatePlan, county: int, seed: int) -> _County:
    rng = _stream(seed, int(plan.fips), 1, county)
    b0, b1 = int(plan.county_blocks[county]), int(plan.county_blocks[county + 1])
    tract = plan.block_tract[b0:b1]
    n_blocks = b1 - b0
    # households and their groups: the block's dominant group or a draw from the tract mix
    sizes, hh_block = _households(plan.block_household[b0:b1], rng)
    dominant = _draw_major(plan.tract_cut, tract, rng)
    dominance = BLOCK_DOMINANCE * rng.random(n_blocks)
    hh_major = _draw_major(plan.tract_cut, tract[hh_block], rng)
    take = rng.random(hh_block.size) < dominance[hh_block]
    hh_major[take] = dominant[hh_block[take]]
    # household members: the householder's group, some drawn afresh; members may be minors
    hh_of = np.repeat(np.arange(sizes.size, dtype=np.int32), sizes)
    member = np.ones(hh_of.size, dtype=bool)
    member[np.cumsum(sizes) - sizes] = False
    major = hh_major[hh_of]
    person_tract = tract[hh_block][hh_of]
    fresh = np.flatnonzero(member & (rng.random(hh_of.size) < HOUSEHOLD_MIXING))
    major[fresh] = _draw_major(plan.tract_cut, person_tract[fresh], rng)
    chance = plan.minor_chance.ravel()[person_tract.astype(np.int64) * 7 + major]
    minor = member & (rng.random(hh_of.size) < chance)
    # group-quarters residents, drawn from the tract mix
    f0, f1 = np.searchsorted(plan.facility_block, [b0, b1])
    fac_block = plan.facility_block[f0:f1] - b0
    fac_type = plan.facility_type[f0:f1]
    resident = np.repeat(np.arange(f1 - f0), plan.facility_persons[f0:f1])
    gq_block, gq_type = fac_block[resident], fac_type[resident]
    gq_major = _draw_major(plan.tract_cut, tract[gq_block], rng)
    gq_minor = rng.random(resident.size) < _MINOR_GQ[gq_type]
    # persons in block order, households first
    block = np.concatenate([hh_block[hh_of], gq_block]).astype(np.int32)
    hhgq = np.concatenate([np.zeros(hh_of.size, np.int8), gq_type])
    order = np.argsort(block.astype(np.int64) * 8 + hhgq, kind="stable")
    major = np.concatenate([major, gq_major])[order]
    votingage = (~np.concatenate([minor, gq_minor])[order]).astype(np.int8)
    hispanic, cenrace = _detail(major, plan.fips, rng)
    # units: occupied households and facilities; housing units add vacant ones
    occupied = np.bincount(hh_block, minlength=n_blocks)
    unit_block = np.concatenate([hh_block, fac_block]).astype(np.int32)
    unit_hhgq = np.concatenate([np.zeros(hh_block.size, np.int8), fac_type])
    unit_order = np.argsort(unit_block.astype(np.int64) * 8 + unit_hhgq, kind="stable")
    vacant = rng.poisson(VACANCY * occupied)
    chance, mean = EMPTY_BLOCK_VACANT
    lone = (occupied == 0) & (rng.random(n_blocks) < chance)
    vacant[lone] += 1 + rng.poisson(mean - 1, int(lone.sum()))
    return _County(block[order], (hhgq[order], votingage, hispanic, cenrace),
                   unit_block[unit_order], unit_hhgq[unit_order],
                   (occupied + vacant).astype(np.int32))


def _households(block_persons: np.ndarray, rng: np.random.Generator
                ) -> tuple[np.ndarray, np.ndarray]:
    """Cut each block's household population into households: one run of 2020-like sizes
    over the county, cut again at block boundaries. Returns (persons, block) per household."""
    bounds = np.cumsum(block_persons)
    total = int(bounds[-1]) if bounds.size else 0
    if total == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    n_draw = int(total / 2.4) + 16
    draws = np.searchsorted(_HOUSEHOLD_CDF, rng.random(n_draw), side="right") + 1
    while draws.sum() < total:
        draws = np.concatenate([draws, np.searchsorted(_HOUSEHOLD_CDF, rng.random(n_draw),
                                                       side="right") + 1])
    is_start = np.zeros(total, dtype=bool)
    ends = np.cumsum(draws)
    is_start[ends[ends < total]] = True
    is_start[bounds[bounds < total]] = True
    is_start[0] = True
    starts = np.flatnonzero(is_start)
    sizes = np.diff(np.append(starts, total))
    return sizes, np.searchsorted(bounds, starts, side="right")


def _draw_major(cut: np.ndarray, tract: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """One major group per element of ``tract`` from that tract's mix (one searchsorted)."""
    tract = np.asarray(tract, dtype=np.int64)
    where = np.searchsorted(cut, tract + rng.random(tract.size), side="right") - 6 * tract
    return np.minimum(where, 6).astype(np.int8)   # t + u can round up to t + 1


def _detail(major: np.ndarray, fips: str, rng: np.random.Generator
            ) -> tuple[np.ndarray, np.ndarray]:
    """Hispanic origin and cenrace of persons given their major groups."""
    cenrace = _BASE_RACE[major]
    for group, hispanic in ((5, False), (6, True)):
        idx = np.flatnonzero(major == group)
        cdf = np.cumsum(cenrace_distribution(fips, hispanic))
        cenrace[idx] = np.minimum(np.searchsorted(cdf, rng.random(idx.size) * cdf[-1],
                                                  side="right"), 62)
    return (major == 6).astype(np.int8), cenrace


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

    from hierarchy.storage import atomic_path, claim_directory, write_json

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
