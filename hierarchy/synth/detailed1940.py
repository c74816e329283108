"""Synthetic 1940-style persons with sex, single-year age and detailed race/ethnicity codes.

The data for SafeTab-style detailed tabulation (docs/safetab.md). Geography, the race × Hispanic
composition, group quarters and households come from
:func:`hierarchy.synth.census1940.synthesize_1940` unchanged; this module adds, per person:

* ``sex`` — 1 male, 2 female;
* ``age`` — single years 0-115, consistent with ``votingage`` (18+ exactly when ``votingage`` is
  1), drawn from the 1940 age distribution, with group-quarters profiles (nursing homes hold the
  old, military quarters and work camps young men, juvenile institutions adolescents);
* ``race1, race2, race3`` — detailed race codes (:data:`DETAILED_RACES`), left-packed, 0 = not
  reported. ``race1`` is a detail of the person's ``cenrace`` (White → German, Irish, …; American
  Indian → a tribe; "other" → Filipino, Korean, Asian Indian, Hawaiian, some other race);
  ``race2``/``race3`` are further races a person reports (a record may report several races, so
  it belongs to several race groups: the stability of SafeTab's groups is above 1);
* ``hisp_origin`` — detailed Hispanic origin (:data:`HISPANIC_ORIGINS`) when ``hispanic`` is 1,
  else 0;
* ``aiannh`` — the American Indian / Alaska Native / Native Hawaiian area the person lives in
  (a four-digit code), or ``"9999"`` for none (most persons): a geography beside state and county,
  not nested in either (:mod:`hierarchy.synth.detailed1940_aiannh`).

The 1940 census recorded one race per person; reporting several is what later censuses allow, so
"1940-style" here means 1940 geography, composition, ages and origins with today's multi-race
reporting. Realism comes from three places:

1. **Geography of origins.** Each detailed category has 1940-like state weights (foreign white
   stock by country of origin: Norwegians in Minnesota and North Dakota, Italians in New York and
   New Jersey, little foreign stock in the South; Navajo in Arizona and New Mexico, Lumbee in North
   Carolina, Iroquois in New York; Puerto Ricans in New York, Cubans in Florida, Hispanos in New
   Mexico), and each county draws its own mix around its state's (Dirichlet; tribes cluster most).
2. **Households.** :mod:`hierarchy.synth.census1940` keeps a household's members contiguous and
   of the head's race and Hispanic origin, but does not publish household boundaries. We cut
   every run of household persons of one ED and one group into pseudo-households of the 1940 mean
   size (3.8), and members copy the first member's detailed codes with probability
   :data:`HOUSEHOLD_SHARING` (a family shares its origin and its multi-race reporting).
3. **Multi-race reporting** at rates that depend on the first race (a quarter of American Indians
   also report White; under 1 % of White persons report another race), sometimes three races.

Synthetic data for experiments, not a privacy mechanism: the randomness is an ordinary seeded
``numpy.random.Generator`` (streams ``SeedSequence(seed, spawn_key=(STREAM_KEY, k))``, disjoint
from the per-state streams of :mod:`hierarchy.synth.census1940`), and the output is a
deterministic function of ``(persons, seed)``.

Examples
--------
>>> data = synthesize_detailed_1940(20_000, seed=1)
>>> data.persons.column_names[7:]
['sex', 'age', 'race1', 'race2', 'race3', 'hisp_origin', 'aiannh']
>>> import numpy as np
>>> age = data.persons["age"].to_numpy()
>>> bool(np.all((age >= 18) == (data.persons["votingage"].to_numpy() == 1)))
True
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from hierarchy.errors import HierarchyError
from hierarchy.geography import one_dictionary
from hierarchy.io.storage import write_parquet
from hierarchy.synth.census1940 import STATE_FIPS, synthesize_1940
from hierarchy.synth.detailed1940_aiannh import AIANNH_COLUMN, assign_aiannh

__all__ = ["SyntheticDetailed1940", "synthesize_detailed_1940", "write_synthetic_detailed_1940",
           "DETAILED_RACES", "HISPANIC_ORIGINS", "DETAILED_COLUMNS", "MAX_AGE", "code_labels",
           "major_group"]

#: Oldest single-year age generated.
MAX_AGE = 115

#: Detailed race codes: (code, label). The thousands digit is the major group: 1 White,
#: 2 Black, 3 American Indian, 4 Asian, 5 Pacific Islander, 6 some other race. Codes ending in
#: 000 are "not specified further".
DETAILED_RACES: tuple[tuple[int, str], ...] = (
    (1000, "White"), (1101, "German"), (1102, "Italian"), (1103, "Polish"), (1104, "Irish"),
    (1105, "English"), (1106, "Russian"), (1107, "Swedish"), (1108, "Norwegian"),
    (2000, "Black"), (2101, "West Indian"), (2102, "Cape Verdean"),
    (3000, "American Indian, tribe not specified"), (3101, "Navajo"), (3102, "Cherokee"),
    (3103, "Sioux"), (3104, "Chippewa"), (3105, "Choctaw"), (3106, "Pueblo"), (3107, "Apache"),
    (3108, "Iroquois"), (3109, "Creek"), (3110, "Lumbee"), (3111, "Blackfeet"),
    (4101, "Chinese"), (4102, "Japanese"), (4103, "Filipino"), (4104, "Korean"),
    (4105, "Asian Indian"),
    (5101, "Native Hawaiian"),
    (6000, "Some other race"),
)
#: Detailed Hispanic origin codes: (code, label).
HISPANIC_ORIGINS: tuple[tuple[int, str], ...] = (
    (7101, "Mexican"), (7102, "Puerto Rican"), (7103, "Cuban"), (7104, "Spanish or Hispano"),
    (7105, "Central or South American"),
)
#: Columns added to the :mod:`hierarchy.synth.census1940` persons table, in order.
DETAILED_COLUMNS = ("sex", "age", "race1", "race2", "race3", "hisp_origin")

STREAM_KEY = 1940_0000               # spawn key of this module's streams (synth uses 0..48)
HOUSEHOLD_SIZE = 3.8                 # mean size of the pseudo-households that share codes
HOUSEHOLD_SHARING = 0.92             # chance a member copies the first member's codes
SECOND_ORIGIN = 0.30                 # chance a White person of stated origin draws another
THIRD_RACE = 0.10                    # chance a multi-race person reports a third race

_GEOCODE = pa.dictionary(pa.int32(), pa.string())
_BASE_NAMES = ("state", "county", "enum_dist", "hhgq", "votingage", "hispanic", "cenrace")
PERSONS_SCHEMA = pa.schema([(n, _GEOCODE) for n in _BASE_NAMES[:3]]
                           + [(n, pa.int8()) for n in _BASE_NAMES[3:]]
                           + [("sex", pa.int8()), ("age", pa.int8())]
                           + [(n, pa.int16()) for n in DETAILED_COLUMNS[2:]]
                           + [(AIANNH_COLUMN, _GEOCODE)])

_STATE = {code: i for i, code in enumerate(STATE_FIPS)}
_POSTAL = ("AL AZ AR CA CO CT DE DC FL GA ID IL IN IA KS KY LA ME MD MA MI MN MS MO MT NE NV NH "
           "NJ NM NY NC ND OH OK OR PA RI SC SD TN TX UT VT VA WA WV WI WY").split()
_SOUTH = "AL AR GA KY MS NC SC TN VA WV LA FL".split()

# ---------------------------------------------------------------------------------------------
# category tables: national weights, state multipliers or overrides, county concentration
# ---------------------------------------------------------------------------------------------
# White: foreign white stock by country of origin (1940: share of all White persons), the rest
# "White" (native of native parentage).
_WHITE_CODES = np.array([1000, 1101, 1102, 1103, 1104, 1105, 1106, 1107, 1108], np.int16)
_WHITE_NATIONAL = np.array([0.0, 4.4, 3.9, 2.5, 2.1, 2.1, 2.2, 1.1, 0.8]) / 100
_WHITE_HEAVY = {  # origin index -> (states, multiplier)
    1: ("WI MN IA NE ND SD IL OH MO PA NY", 2.0), 2: ("NY NJ RI CT MA PA", 3.0),
    3: ("IL MI NY PA WI NJ CT MA", 3.0), 4: ("MA NY RI CT NJ PA", 3.0),
    5: ("MA RI UT MI", 2.0), 6: ("NY NJ PA IL ND", 3.0), 7: ("MN IL WA NE", 4.0),
    8: ("MN ND WI WA SD", 6.0)}
# Black.
_BLACK_CODES = np.array([2000, 2101, 2102], np.int16)
_BLACK_STATES = {"NY": (0.92, 0.08, 0.0), "FL": (0.96, 0.04, 0.0), "MA": (0.80, 0.05, 0.15),
                 "RI": (0.78, 0.02, 0.20)}
_BLACK_DEFAULT = (0.995, 0.005, 0.0)
# American Indian: tribes (3000 not specified, then 3101..3111).
_AIAN_CODES = np.array([3000, 3101, 3102, 3103, 3104, 3105, 3106, 3107, 3108, 3109, 3110, 3111],
                       np.int16)
_AIAN_STATES = {
    "AZ": {3101: .40, 3107: .20}, "NM": {3101: .45, 3106: .40, 3107: .08}, "UT": {3101: .50},
    "OK": {3102: .30, 3105: .18, 3109: .15, 3107: .03}, "NC": {3102: .15, 3110: .75},
    "SD": {3103: .90}, "ND": {3103: .45, 3104: .40}, "NE": {3103: .50},
    "MT": {3111: .25, 3103: .20, 3104: .10}, "MN": {3104: .80, 3103: .10},
    "WI": {3104: .35, 3108: .25}, "MI": {3104: .70}, "NY": {3108: .85},
    "MS": {3105: .85}, "AL": {3109: .50, 3105: .20}}
_AIAN_DEFAULT = {3102: .15, 3103: .05, 3104: .05}
# Other races (cenrace 5): Filipino, Korean, Asian Indian, Native Hawaiian, some other race.
_OTHER_CODES = np.array([4103, 4104, 4105, 5101, 6000], np.int16)
_OTHER_STATES = {"CA": (.70, .04, .05, .01, .20), "WA": (.80, .03, .03, .01, .13),
                 "OR": (.60, .03, .05, .02, .30), "NY": (.30, .10, .20, .05, .35)}
_OTHER_DEFAULT = (.45, .05, .10, .05, .35)
# Hispanic origin.
_ORIGIN_CODES = np.array([c for c, _ in HISPANIC_ORIGINS], np.int16)
_ORIGIN_STATES = {
    **{s: (.92, .01, .01, .04, .02) for s in "TX AZ CA NV UT KS IL MI WY".split()},
    "NM": (.35, .00, .00, .63, .02), "CO": (.55, .00, .00, .43, .02),
    "NY": (.05, .45, .10, .20, .20), "FL": (.10, .05, .45, .30, .10),
    "LA": (.20, .05, .10, .45, .20), "NJ": (.05, .40, .10, .25, .20)}
_ORIGIN_DEFAULT = (.55, .03, .02, .25, .15)
# County concentration around the state mix (smaller = more clustered).
_CONCENTRATION = {"white": 150.0, "black": 50.0, "aian": 4.0, "other": 10.0, "origin": 10.0}

# Multi-race reporting: rate by the major group of race1, and the distribution of the major group
# of the further race (white, black, aian, asian, hawaiian, other).
_MAJORS = ("white", "black", "aian", "asian", "hawaiian", "other")
_MULTI_RATE = np.array([0.006, 0.025, 0.25, 0.04, 0.50, 0.05])
_MULTI_TARGET = np.array([
    [0.00, 0.20, 0.70, 0.05, 0.00, 0.05],    # White + ...
    [0.60, 0.00, 0.40, 0.00, 0.00, 0.00],    # Black + ...
    [0.80, 0.20, 0.00, 0.00, 0.00, 0.00],    # American Indian + ...
    [0.60, 0.00, 0.00, 0.20, 0.20, 0.00],    # Asian + ... (another Asian origin, Hawaiian)
    [0.50, 0.00, 0.00, 0.50, 0.00, 0.00],    # Hawaiian + ... (White, Chinese/Filipino)
    [0.80, 0.10, 0.10, 0.00, 0.00, 0.00],    # some other race + ...
])
_ASIAN_FURTHER = (np.array([4101, 4102, 4103], np.int16), np.array([0.5, 0.2, 0.3]))

# Ages: 1940 five-year age distribution (percent), 0-4, ..., 80-84, 85+.
_AGE5 = np.array([8.0, 8.1, 8.9, 9.4, 8.8, 8.4, 7.8, 7.2, 6.7, 6.3, 5.5, 4.4, 3.6, 2.9, 2.0, 1.2,
                  0.6, 0.3])
_OLDEST_DECAY = 0.82                 # each year past 85 holds this share of the year before
# Share male by age (1940: boys outnumber girls, older foreign-born men outnumber women).
_MALE_BY_AGE = np.interp(np.arange(MAX_AGE + 1), [0, 17, 18, 44, 45, 64, 65, 85, MAX_AGE],
                         [0.507, 0.505, 0.497, 0.497, 0.516, 0.512, 0.495, 0.44, 0.30])
# Group-quarters profiles (juvenile institutions: under 18; the others: 18+), see _age_profiles.
_PROFILES = ("juvenile", "nursing", "military", "camp", "institution")


@dataclass(frozen=True)
class SyntheticDetailed1940:
    """Synthetic 1940-style persons with sex, age and detailed race codes, and their units.

    Parameters
    ----------
    persons : pyarrow.Table
        The :mod:`hierarchy.synth.census1940` person columns (``state, county, enum_dist, hhgq,
        votingage, hispanic, cenrace``) followed by ``sex, age`` (int8), ``race1, race2, race3,
        hisp_origin`` (int16) and ``aiannh`` (dictionary-encoded area code, ``"9999"`` for none),
        in the same row order.
    units : pyarrow.Table
        Housing units, exactly as :func:`hierarchy.synth.census1940.synthesize_1940` returns them.

    Raises
    ------
    HierarchyError
        If ``persons`` does not have exactly this schema.

    Examples
    --------
    >>> data = synthesize_detailed_1940(1_000, seed=0)
    >>> SyntheticDetailed1940(persons=data.units, units=data.units)
    Traceback (most recent call last):
    ...
    hierarchy.errors.HierarchyError: SyntheticDetailed1940.persons must have the schema ...
    """

    persons: pa.Table
    units: pa.Table

    def __post_init__(self):
        if not isinstance(self.persons, pa.Table) or not self.persons.schema.equals(
                PERSONS_SCHEMA):
            got = (self.persons.schema.names if isinstance(self.persons, pa.Table)
                   else type(self.persons).__name__)
            raise HierarchyError(
                f"SyntheticDetailed1940.persons must have the schema {PERSONS_SCHEMA.names} with "
                f"types {[str(t) for t in PERSONS_SCHEMA.types]}; got {got}")


# ---------------------------------------------------------------------------------------------
# public API
# ---------------------------------------------------------------------------------------------
def code_labels() -> dict[int, str]:
    """Every detailed code (races and Hispanic origins) with its label.

    Returns
    -------
    dict of int to str

    Examples
    --------
    >>> labels = code_labels()
    >>> labels[3101], labels[7101], len(labels)
    ('Navajo', 'Mexican', 36)
    """
    return dict(DETAILED_RACES + HISPANIC_ORIGINS)


def major_group(codes: Any) -> np.ndarray:
    """The major group of detailed codes: 1 White … 6 other race, 7 Hispanic origin, 0 none.

    Parameters
    ----------
    codes : array_like of int
        Detailed codes (0 = not reported).

    Returns
    -------
    numpy.ndarray of int8

    Examples
    --------
    >>> major_group([1104, 3102, 0, 7101]).tolist()
    [1, 3, 0, 7]
    """
    return (np.asarray(codes, dtype=np.int64) // 1000).astype(np.int8)


def synthesize_detailed_1940(persons: int, *, seed: int) -> SyntheticDetailed1940:
    """Generate 1940-style persons with sex, single-year age and detailed race/origin codes.

    Parameters
    ----------
    persons : int
        Total persons (49 to 300 million; see :func:`hierarchy.synth.census1940.synthesize_1940`).
    seed : int
        Non-negative seed; the same ``(persons, seed)`` gives identical tables. The base columns
        are those of ``synthesize_1940(persons, seed=seed)``.

    Returns
    -------
    SyntheticDetailed1940

    Raises
    ------
    HierarchyError
        If ``persons`` or ``seed`` is out of range.

    Examples
    --------
    >>> data = synthesize_detailed_1940(50_000, seed=4)
    >>> t = data.persons
    >>> race = np.stack([t[c].to_numpy() for c in ("race1", "race2", "race3")], axis=1)
    >>> multi = (race[:, 1] > 0).mean()                   # share reporting 2+ races
    >>> bool(0.002 < multi < 0.05)
    True
    >>> bool(np.all((t["hisp_origin"].to_numpy() > 0) == (t["hispanic"].to_numpy() == 1)))
    True
    """
    base = synthesize_1940(persons, seed=seed)
    columns, (area, area_codes) = _detail(base.persons, seed)
    arrays = base.persons.columns + [pa.array(columns[n], PERSONS_SCHEMA.field(n).type)
                                     for n in DETAILED_COLUMNS]
    arrays.append(pa.DictionaryArray.from_arrays(pa.array(area, pa.int32()),
                                                 pa.array(area_codes.tolist(), pa.string())))
    return SyntheticDetailed1940(persons=pa.Table.from_arrays(arrays, schema=PERSONS_SCHEMA),
                                 units=base.units)


def write_synthetic_detailed_1940(out_dir: str | os.PathLike, persons: int, *,
                                  seed: int) -> dict[str, Any]:
    """Generate detailed 1940-style microdata and write ``persons.parquet`` and ``units.parquet``.

    Both files are written atomically (:func:`hierarchy.io.storage.write_parquet`); their metadata
    records the generator, ``persons`` and ``seed``.

    Parameters
    ----------
    out_dir : str or path-like
        Output directory (created if missing).
    persons : int
        Total persons.
    seed : int
        Non-negative seed.

    Returns
    -------
    dict
        ``persons`` (count), ``persons_path``, ``units_path``, ``seconds``,
        ``persons_per_second``.

    Raises
    ------
    HierarchyError
        If an argument is out of range or ``out_dir`` is not a path.

    Examples
    --------
    >>> import tempfile, pyarrow.parquet as pq
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     summary = write_synthetic_detailed_1940(tmp, 5_000, seed=2)
    ...     names = pq.read_schema(summary["persons_path"]).names
    >>> summary["persons"], names[-2:]
    (5000, ['hisp_origin', 'aiannh'])
    """
    if not isinstance(out_dir, (str, os.PathLike)):
        raise HierarchyError(f"out_dir must be a directory path (str or path-like), got "
                             f"{type(out_dir).__name__}")
    started = time.perf_counter()
    data = synthesize_detailed_1940(persons, seed=seed)
    out = Path(out_dir)
    # the files' label, unchanged since the module moved here
    meta = {"generator": "hierarchy.synth_detailed.synthesize_detailed_1940",
            "persons": int(persons), "seed": int(seed)}
    try:
        persons_path = write_parquet(data.persons, out / "persons.parquet", metadata=meta)
        units_path = write_parquet(data.units, out / "units.parquet", metadata=meta)
    except OSError as exc:
        raise HierarchyError(f"cannot write synthetic data to {str(out)!r}: {exc}") from exc
    seconds = time.perf_counter() - started
    return {"persons": data.persons.num_rows, "persons_path": str(persons_path),
            "units_path": str(units_path), "seconds": seconds,
            "persons_per_second": data.persons.num_rows / seconds}


# ---------------------------------------------------------------------------------------------
# the model
# ---------------------------------------------------------------------------------------------
def _indices(table: pa.Table, name: str) -> tuple[np.ndarray, np.ndarray]:
    """(int32 index per row, dictionary values) of a dictionary column, one dictionary."""
    column = one_dictionary(table.column(name))
    if column.num_chunks == 0:
        return np.zeros(0, np.int32), np.zeros(0, dtype=str)
    idx = np.concatenate([c.indices.to_numpy(zero_copy_only=False) for c in column.chunks])
    return idx.astype(np.int32, copy=False), np.asarray(column.chunk(0).dictionary.to_pylist())


def _detail(persons: pa.Table, seed: int
            ) -> tuple[dict[str, np.ndarray], tuple[np.ndarray, np.ndarray]]:
    """The added columns for the base persons (see the module docstring): the code columns, and
    the AIANNH area (index per person, codes).

    Detailed codes are drawn only for the persons who do not copy them from the first member of
    their pseudo-household (about a third), and per major group only for its members. The areas
    draw from a fifth stream, so the first four (and the other columns) are as they were before
    the areas were added.
    """
    streams = np.random.SeedSequence(seed, spawn_key=(STREAM_KEY,)).spawn(5)
    rng_county, rng_race, rng_age, rng_household, rng_area = (
        np.random.Generator(np.random.PCG64(s)) for s in streams)
    n = persons.num_rows
    county, county_codes = _indices(persons, "county")
    ed, _ = _indices(persons, "enum_dist")
    hhgq = persons.column("hhgq").to_numpy()
    votingage = persons.column("votingage").to_numpy()
    hispanic = persons.column("hispanic").to_numpy()
    cenrace = persons.column("cenrace").to_numpy()

    # county mixes around their state's (a county geocode starts with its state's FIPS code)
    county_state = np.array([_STATE[str(code)[:2]] for code in county_codes], dtype=np.int64)
    mixes = {kind: _county_mix(kind, county_state, rng_county) for kind in _CONCENTRATION}

    # who draws their own codes: first members of pseudo-households, and a few other members
    head = _pseudo_household_heads(ed, hhgq, cenrace, hispanic, rng_household)
    everyone = np.arange(n)
    copy = (head != everyone) & (rng_household.random(n) < HOUSEHOLD_SHARING)
    own = np.flatnonzero(~copy)
    race1, race2, race3 = (np.zeros(n, np.int16) for _ in range(3))
    race1[own], race2[own], race3[own] = _races(cenrace[own], county[own], mixes, rng_race)
    origin = np.zeros(n, np.int16)
    hisp = own[hispanic[own] == 1]
    origin[hisp] = _draw(county[hisp], *mixes["origin"], rng_race)
    source = np.where(copy, head, everyone)
    race1, race2, race3, origin = race1[source], race2[source], race3[source], origin[source]

    age, sex = _ages(votingage, hhgq, rng_age)
    area = assign_aiannh(county, county_state, np.stack([race1, race2, race3], axis=1), source,
                         rng_area)
    return {"sex": sex, "age": age, "race1": race1, "race2": race2, "race3": race3,
            "hisp_origin": origin}, area


def _state_weights(kind: str) -> tuple[np.ndarray, np.ndarray]:
    """(codes, weights per state (49 × K, rows sum to 1)) of one category table."""
    n_states = len(STATE_FIPS)
    if kind == "white":
        weights = np.tile(_WHITE_NATIONAL, (n_states, 1))
        for k, (states, factor) in _WHITE_HEAVY.items():
            weights[[_POSTAL.index(s) for s in states.split()], k] *= factor
        weights[[_POSTAL.index(s) for s in _SOUTH], 1:] *= 0.2
        weights[:, 0] = 1.0 - weights[:, 1:].sum(axis=1)
        return _WHITE_CODES, weights
    if kind in ("black", "other", "origin"):
        codes, states, default = {"black": (_BLACK_CODES, _BLACK_STATES, _BLACK_DEFAULT),
                                  "other": (_OTHER_CODES, _OTHER_STATES, _OTHER_DEFAULT),
                                  "origin": (_ORIGIN_CODES, _ORIGIN_STATES, _ORIGIN_DEFAULT)}[kind]
        weights = np.array([states.get(p, default) for p in _POSTAL], dtype=float)
        return codes, weights / weights.sum(axis=1, keepdims=True)
    weights = np.zeros((n_states, _AIAN_CODES.size))
    column = {int(c): j for j, c in enumerate(_AIAN_CODES)}
    for i, postal in enumerate(_POSTAL):
        for code, share in _AIAN_STATES.get(postal, _AIAN_DEFAULT).items():
            weights[i, column[code]] = share
        weights[i, 0] = 1.0 - weights[i].sum()
    return _AIAN_CODES, weights


def _county_mix(kind: str, county_state: np.ndarray,
                rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """(codes, interior cumulative mix per county, C × (K − 1)): Dirichlet(c × state weights)."""
    codes, weights = _state_weights(kind)
    alpha = np.maximum(_CONCENTRATION[kind] * weights[county_state], 1e-3)
    gamma = rng.standard_gamma(alpha)
    total = gamma.sum(axis=1, keepdims=True)
    mix = np.where(total > 0, gamma / np.where(total > 0, total, 1.0), weights[county_state])
    return codes, np.cumsum(mix, axis=1)[:, :-1]


def _draw(row: np.ndarray, codes: np.ndarray, cumulative: np.ndarray,
          rng: np.random.Generator) -> np.ndarray:
    """One code per element of ``row``, from that row's mix (``cumulative``: C × (K − 1)).

    The category is the number of interior cumulative shares at or below a uniform draw: K − 1
    gathers and comparisons per draw, no search.
    """
    u = rng.random(row.size)
    category = np.zeros(row.size, dtype=np.intp)
    for k in range(cumulative.shape[1]):
        category += u >= cumulative[row, k]
    return codes[category]


def _races(cenrace: np.ndarray, county: np.ndarray, mixes: dict,
           rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """race1 (a detail of cenrace) and further races race2, race3 (0 when not reported)."""
    n = cenrace.size
    race1 = np.empty(n, np.int16)
    for value, kind in ((0, "white"), (1, "black"), (2, "aian"), (5, "other")):
        rows = np.flatnonzero(cenrace == value)
        race1[rows] = _draw(county[rows], *mixes[kind], rng)
    race1[cenrace == 3] = 4101
    race1[cenrace == 4] = 4102
    major = _major_index(race1)
    race2 = np.zeros(n, np.int16)
    race3 = np.zeros(n, np.int16)

    # a second origin for some White persons of stated origin (German and Irish, ...)
    origin = np.flatnonzero((race1 > 1000) & (race1 < 2000))
    origin = origin[rng.random(origin.size) < SECOND_ORIGIN]
    race2[origin] = _draw(county[origin], *mixes["white"], rng)
    race2[race2 == 1000] = 0                          # drew "White, not specified": none

    # another major group for a few persons, at a rate that depends on the first race
    multi = np.flatnonzero(rng.random(n) < _MULTI_RATE[major])
    target = (rng.random(multi.size)[:, None]
              >= np.cumsum(_MULTI_TARGET, axis=1)[major[multi], :-1]).sum(axis=1)
    options = _further_races(county[multi], mixes, rng)
    race2[multi] = options[np.arange(multi.size), target]
    race2[race2 == race1] = 0                         # German + German, Chinese + Chinese: one
    multi = multi[race2[multi] != 0]

    # rarely a third race: American Indian if not yet reported, else Black if not yet reported
    third = multi[rng.random(multi.size) < THIRD_RACE]
    majors = np.stack([major[third], _major_index(race2[third])])
    aian = _draw(county[third], *mixes["aian"], rng)
    race3[third] = np.where(~(majors == 2).any(axis=0), aian,
                            np.where(~(majors == 1).any(axis=0), np.int16(2000), 0))
    return race1, race2, race3


def _further_races(county: np.ndarray, mixes: dict, rng: np.random.Generator) -> np.ndarray:
    """For each person, one candidate code of every major group (n × 6), for a further race."""
    n = county.size
    codes, weights = _ASIAN_FURTHER
    asian = codes[(rng.random(n)[:, None] >= np.cumsum(weights)[:-1]).sum(axis=1)]
    white = np.where(rng.random(n) < 0.8, np.int16(1000), _draw(county, *mixes["white"], rng))
    return np.stack([white, np.full(n, 2000, np.int16), _draw(county, *mixes["aian"], rng), asian,
                     np.full(n, 5101, np.int16), np.full(n, 6000, np.int16)], axis=1)


def _major_index(codes: np.ndarray) -> np.ndarray:
    """Index into _MAJORS (0 White … 5 other) of race codes; Hawaiian (5xxx) is 4."""
    return np.clip(codes // 1000 - 1, 0, 5).astype(np.intp)


def _pseudo_household_heads(ed: np.ndarray, hhgq: np.ndarray, cenrace: np.ndarray,
                            hispanic: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Index of the first member of each person's pseudo-household.

    A pseudo-household is a run of household persons (``hhgq`` 0) of one ED, race and Hispanic
    origin, cut at random into pieces of mean :data:`HOUSEHOLD_SIZE`; every group-quarters person
    is alone.
    """
    n = ed.size
    start = np.ones(n, dtype=bool)
    if n > 1:
        start[1:] = ((ed[1:] != ed[:-1]) | (cenrace[1:] != cenrace[:-1])
                     | (hispanic[1:] != hispanic[:-1]) | (hhgq[1:] != 0)
                     | (rng.random(n - 1) < 1.0 / HOUSEHOLD_SIZE))
    return np.maximum.accumulate(np.where(start, np.arange(n), 0))


def _age_profiles() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(1940 age cdf over 0..MAX_AGE, cdf per group-quarters profile, share male per profile)."""
    ages = np.arange(MAX_AGE + 1)
    pyramid = np.repeat(_AGE5[:-1] / 5.0, 5)
    oldest = _OLDEST_DECAY ** (ages[85:] - 85)
    pyramid = np.concatenate([pyramid, _AGE5[-1] * oldest / oldest.sum()])
    adult = np.where(ages >= 18, pyramid, 0.0)
    juvenile = np.where((ages >= 10) & (ages < 18), 1.0 + (ages - 10), 0.0)
    nursing = np.where(ages >= 65, pyramid * 3.0, np.where(ages >= 50, pyramid * 0.3, 0.0))
    military = np.where((ages >= 18) & (ages <= 34), np.exp(-(ages - 21) ** 2 / 30.0), 0.0)
    camp = np.where((ages >= 18) & (ages <= 29), 1.0, np.where(ages >= 30, 0.05 * adult, 0.0))
    pmf = np.stack([juvenile, nursing, military, camp, adult])
    profiles = np.cumsum(pmf, axis=1) / pmf.sum(axis=1, keepdims=True)
    male = np.array([0.70, 0.45, 0.98, 0.88, 0.56])
    return np.cumsum(pyramid) / pyramid.sum(), profiles, male


def _inverse_cdf(u: np.ndarray, cdf: np.ndarray, resolution: int = 4096) -> np.ndarray:
    """The smallest ``i`` with ``u < cdf[i]`` for every ``u`` in [0, 1), by a guide table.

    ``guide[j]`` is the answer for ``u = j/resolution``; from there a few steps forward, taken
    only by the draws that need them, reach the answer (Chen & Asau 1974). Much faster than a
    binary search per draw.
    """
    cdf = np.append(cdf[:-1], np.inf)                 # u < 1 always lands in range
    guide = np.searchsorted(cdf, np.arange(resolution) / resolution, side="right")
    index = guide[(u * resolution).astype(np.intp)]
    todo = np.flatnonzero(u >= cdf[index])
    while todo.size:
        index[todo] += 1
        todo = todo[u[todo] >= cdf[index[todo]]]
    return index


def _ages(votingage: np.ndarray, hhgq: np.ndarray,
          rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Single-year age (int8) and sex (int8: 1 male, 2 female) of every person.

    Household persons (and group-quarters persons of no special profile) follow the 1940 age
    distribution restricted to under 18 or 18+ by ``votingage``: one inverse-cdf draw with the
    uniform squeezed into ``[0, F(17))`` or ``[F(17), 1)``. Juvenile institutions, nursing homes,
    military quarters, other non-institutional quarters (work camps) and other institutions have
    profiles of their own.
    """
    n = votingage.size
    adult = votingage == 1
    cdf, profiles, male = _age_profiles()
    under_18 = cdf[17]
    u = rng.random(n)
    u = np.where(adult, under_18 + u * (1.0 - under_18), u * under_18)
    age = np.clip(_inverse_cdf(u, cdf), 0, MAX_AGE)
    age = np.where(adult, np.maximum(age, 18), np.minimum(age, 17))  # rounding at F(17) only
    p_male = _MALE_BY_AGE[age]
    gq = np.flatnonzero((hhgq != 0) & (adult | (hhgq == 2)))
    profile = np.select([~adult[gq], hhgq[gq] == 3, hhgq[gq] == 6, hhgq[gq] == 7,
                         hhgq[gq] == 4], [0, 1, 2, 3, 4], -1)
    for k in range(len(male)):
        rows = gq[profile == k]
        age[rows] = _inverse_cdf(rng.random(rows.size), profiles[k])
        p_male[rows] = male[k]
    sex = np.where(rng.random(n) < p_male, 1, 2).astype(np.int8)
    return age.astype(np.int8), sex
