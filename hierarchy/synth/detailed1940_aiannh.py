"""American Indian / Alaska Native / Native Hawaiian (AIANNH) areas of the detailed 1940 data.

The Census Bureau tabulates detailed race groups for AIANNH areas — reservations and off-
reservation trust lands, Oklahoma tribal statistical areas (OTSAs), state designated tribal
statistical areas (SDTSAs), … — a geography of its own beside nation, state, county and tract:
an area is not nested in a state (the Navajo Nation lies in Arizona, New Mexico and Utah) and
most persons live in none. :func:`assign_aiannh` gives every person of
:func:`hierarchy.synth.detailed1940.synthesize_detailed_1940` the code of the area it lives in,
or :data:`NOT_IN_AIANNH` (``"9999"``), in the column :data:`AIANNH_COLUMN` (``aiannh``).

The areas (:data:`AIANNH_AREAS`) are modelled on real ones of 1940's 48 states (no Alaska Native
village areas or Hawaiian home lands: Alaska and Hawaii are not in the 1940-style data); their
four-digit codes are this generator's own, **not** the Census Bureau's AIANNH codes. The
synthetic counties have no real extent, so an area is placed, in each of its states, on the
``counties`` not yet taken by another area that hold the most persons of its tribe (by the first
race code; a tribe-unspecified area takes the counties with the most American Indians). There,
a person is in the area with probability :data:`IN_AREA_TRIBE` when it reports the area's tribe
(for a tribe-unspecified area: any American Indian code), :data:`IN_AREA_AIAN` when it reports
another American Indian code, and the area's ``others`` otherwise (reservations hold few other
persons; an OTSA covers whole counties, most of whose residents are not American Indian). Each
county belongs to at most one area, so a person is in at most one area. Members of a
pseudo-household who copy the first member's race codes copy its area too.

Examples
--------
>>> navajo = AIANNH_AREAS[0]
>>> navajo.name, navajo.states, navajo.tribe
('Navajo Nation Reservation', ('AZ', 'NM', 'UT'), 3101)
>>> sorted({area.kind for area in AIANNH_AREAS})
['OTSA', 'SDTSA', 'reservation']
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from hierarchy.errors import HierarchyError
from hierarchy.synth.census1940_tables import STATES

__all__ = ["AIANNHArea", "AIANNH_AREAS", "AIANNH_COLUMN", "NOT_IN_AIANNH", "IN_AREA_TRIBE",
           "IN_AREA_AIAN", "assign_aiannh"]

#: The persons column holding each person's AIANNH area code.
AIANNH_COLUMN = "aiannh"
#: The code of "not in an AIANNH area" (most persons).
NOT_IN_AIANNH = "9999"
#: Chance that a person of an area's county who reports the area's tribe lives in the area.
IN_AREA_TRIBE = 0.85
#: Chance for a person of the county who reports another American Indian code.
IN_AREA_AIAN = 0.40

_AIAN_LOW, _AIAN_HIGH = 3000, 3999          # American Indian codes
_UNSPECIFIED = 3000                          # "tribe not specified": any American Indian


@dataclass(frozen=True)
class AIANNHArea:
    """One synthetic AIANNH area.

    Parameters
    ----------
    code : str
        Four-digit code (this generator's own; not a Census Bureau code).
    name : str
    states : tuple of str
        Postal codes of the states it lies in (several for an area that crosses state lines).
    tribe : int
        The detailed race code of its tribe (:data:`~hierarchy.synth.detailed1940.
        DETAILED_RACES`), 3000 when it is not one of them.
    kind : str
        ``"reservation"`` (with off-reservation trust land), ``"OTSA"`` or ``"SDTSA"``.
    counties : int
        Counties it covers in each of its states.
    others : float
        Chance that a person of those counties who reports no American Indian code lives in it.

    Raises
    ------
    HierarchyError
        On a code that is not four digits or is :data:`NOT_IN_AIANNH`, no or unknown states, a
        tribe outside 3000-3999, ``counties`` < 1 or ``others`` outside [0, 1].

    Examples
    --------
    >>> AIANNHArea("0099", "Test Reservation", ("AZ",), 3101, "reservation", 1, 0.02).states
    ('AZ',)
    >>> AIANNHArea("9999", "Nowhere", ("AZ",), 3101, "reservation", 1, 0.02)
    Traceback (most recent call last):
    ...
    hierarchy.errors.HierarchyError: AIANNH area code must be four digits other than '9999' ...
    """

    code: str
    name: str
    states: tuple[str, ...]
    tribe: int
    kind: str
    counties: int
    others: float

    def __post_init__(self):
        if (not isinstance(self.code, str) or len(self.code) != 4 or not self.code.isdigit()
                or self.code == NOT_IN_AIANNH):
            raise HierarchyError(f"AIANNH area code must be four digits other than "
                                 f"{NOT_IN_AIANNH!r} (not in an area), not {self.code!r}")
        unknown = [s for s in self.states if s not in _STATE_INDEX]
        if not self.states or unknown:
            raise HierarchyError(f"AIANNH area {self.code}: states must be postal codes of the "
                                 f"1940 states, not {list(self.states)}")
        if not _AIAN_LOW <= self.tribe <= _AIAN_HIGH:
            raise HierarchyError(f"AIANNH area {self.code}: tribe must be an American Indian "
                                 f"code 3000-3999, not {self.tribe!r}")
        if self.counties < 1 or not 0.0 <= self.others <= 1.0:
            raise HierarchyError(f"AIANNH area {self.code}: counties must be >= 1 and others "
                                 f"in [0, 1], not {self.counties!r} and {self.others!r}")


_STATE_INDEX = {row[1]: i for i, row in enumerate(STATES)}


def _area(code: str, name: str, states: str, tribe: int, kind: str = "reservation",
          counties: int = 1, others: float = 0.005) -> AIANNHArea:
    return AIANNHArea(code, name, tuple(states.split()), tribe, kind, counties, others)


#: The areas, in the order they choose their counties (so that small data, whose states have
#: one or two counties, hold the largest and those crossing state lines).
AIANNH_AREAS: tuple[AIANNHArea, ...] = (
    _area("0001", "Navajo Nation Reservation", "AZ NM UT", 3101),
    _area("0002", "Standing Rock Reservation", "ND SD", 3103),
    _area("0003", "Cherokee OTSA", "OK", 3102, "OTSA", 3, 0.3),
    _area("0004", "Lumbee SDTSA", "NC", 3110, "SDTSA", 1, 0.2),
    _area("0005", "Red Lake Reservation", "MN", 3104, others=0.002),
    _area("0006", "Allegany Reservation", "NY", 3108),
    _area("0007", "Blackfeet Indian Reservation", "MT", 3111),
    _area("0008", "Mississippi Choctaw Reservation", "MS", 3105, others=0.002),
    _area("0009", "Lac du Flambeau Reservation", "WI", 3104),
    _area("0010", "Isabella Reservation", "MI", 3104, others=0.03),
    _area("0011", "Poarch Creek Reservation", "AL", 3109),
    _area("0012", "Colorado River Reservation", "AZ CA", 3000),
    _area("0013", "Ute Mountain Reservation", "CO NM UT", 3000),
    _area("0014", "Duck Valley Reservation", "ID NV", 3000),
    _area("0015", "Wind River Reservation", "WY", 3000, others=0.03),
    _area("0016", "Pine Ridge Reservation", "SD NE", 3103),
    _area("0017", "Lake Traverse Reservation", "SD ND", 3103, others=0.03),
    _area("0018", "Turtle Mountain Reservation", "ND", 3104),
    _area("0019", "Fort Peck Reservation", "MT", 3103, others=0.03),
    _area("0020", "Creek OTSA", "OK", 3109, "OTSA", 2, 0.3),
    _area("0021", "Choctaw OTSA", "OK", 3105, "OTSA", 2, 0.3),
    _area("0022", "White Earth Reservation", "MN", 3104, others=0.03),
    _area("0023", "Oneida Reservation", "WI", 3108, others=0.03),
    _area("0024", "Menominee Reservation", "WI", 3000, others=0.002),
    _area("0025", "Onondaga Nation Reservation", "NY", 3108, others=0.002),
    _area("0026", "Eastern Cherokee Reservation", "NC", 3102),
    _area("0027", "Fort Apache Reservation", "AZ", 3107),
    _area("0028", "San Carlos Reservation", "AZ", 3107),
    _area("0029", "Fort Mojave Reservation", "AZ CA NV", 3000),
    _area("0030", "Zuni Reservation", "NM", 3106, others=0.002),
    _area("0031", "Uintah and Ouray Reservation", "UT", 3000, others=0.03),
)


def _places(county_state: np.ndarray, race1: np.ndarray, county: np.ndarray) -> np.ndarray:
    """The area index of every county (-1: none): each area, in table order, takes in each of
    its states the counties not yet taken with the most persons of its tribe (first race)."""
    n_counties = county_state.size
    tribes = sorted({area.tribe for area in AIANNH_AREAS})
    aian = (race1 >= _AIAN_LOW) & (race1 <= _AIAN_HIGH)
    column = np.searchsorted(tribes, race1[aian])
    known = (column < len(tribes)) & (np.asarray(tribes + [-1])[column] == race1[aian])
    counts = np.bincount(county[aian][known] * len(tribes) + column[known],
                         minlength=n_counties * len(tribes)).reshape(n_counties, len(tribes))
    all_aian = np.bincount(county[aian], minlength=n_counties)
    place = np.full(n_counties, -1, dtype=np.int64)
    for k, area in enumerate(AIANNH_AREAS):
        weight = all_aian if area.tribe == _UNSPECIFIED else counts[:, tribes.index(area.tribe)]
        for state in area.states:
            free = np.flatnonzero((county_state == _STATE_INDEX[state]) & (place < 0))
            free = free[weight[free] > 0]
            best = free[np.argsort(-weight[free], kind="stable")][:area.counties]
            place[best] = k
    return place


def assign_aiannh(county: np.ndarray, county_state: np.ndarray, races: np.ndarray,
                  source: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """The AIANNH area of every person (see the module docstring).

    Parameters
    ----------
    county : numpy.ndarray
        County index of every person.
    county_state : numpy.ndarray
        State index (:data:`~hierarchy.synth.census1940.STATE_FIPS` order) of every county.
    races : numpy.ndarray
        Detailed race codes, shape (persons, race columns), 0 = none.
    source : numpy.ndarray
        The person each person copies its race codes from (itself if none): copiers copy the
        area too.
    rng : numpy.random.Generator

    Returns
    -------
    (numpy.ndarray, numpy.ndarray)
        The int32 index of every person's area into the codes, and the codes: those of
        :data:`AIANNH_AREAS`, then :data:`NOT_IN_AIANNH`.

    Raises
    ------
    HierarchyError
        If the arrays do not fit together.

    Examples
    --------
    Two counties of Arizona (state index 1), the first with the Navajo: there a Navajo person is
    in the Navajo Nation with probability 0.85, another rarely; the second, without American
    Indians, holds no area.

    >>> county = np.array([0, 0, 0, 1, 1])
    >>> races = np.array([[3101, 0], [3101, 1000], [1000, 0], [1000, 0], [2000, 0]])
    >>> index, codes = assign_aiannh(county, np.array([1, 1]), races, np.arange(5),
    ...                              np.random.default_rng(0))
    >>> codes[index].tolist()
    ['0001', '0001', '9999', '9999', '9999']
    """
    n = county.size
    if races.ndim != 2 or races.shape[0] != n or source.shape != (n,):
        raise HierarchyError(f"assign_aiannh: county ({n}), races {races.shape} and source "
                             f"{source.shape} must describe the same persons")
    codes = np.array([area.code for area in AIANNH_AREAS] + [NOT_IN_AIANNH])
    outside = len(AIANNH_AREAS)
    if n == 0:
        return np.zeros(0, np.int32), codes
    county_place = _places(county_state, races[:, 0], county).astype(np.int32)
    place = county_place[county]
    out = np.full(n, outside, dtype=np.int32)
    candidates = np.flatnonzero(place >= 0)           # persons of an area's counties
    if candidates.size == 0:
        return out, codes
    place = place[candidates]
    area_tribe = np.array([a.tribe for a in AIANNH_AREAS])[place]
    others = np.array([a.others for a in AIANNH_AREAS])[place]
    aian = np.zeros(candidates.size, dtype=bool)
    tribe = area_tribe == _UNSPECIFIED
    for k in range(races.shape[1]):                   # a few columns: faster than .any(axis=1)
        code = races[candidates, k]
        aian |= (code >= _AIAN_LOW) & (code <= _AIAN_HIGH)
        tribe |= code == area_tribe
    tribe &= aian
    share = np.where(tribe, IN_AREA_TRIBE, np.where(aian, IN_AREA_AIAN, others))
    inside = rng.random(candidates.size) < share
    # a copier follows the person it copies, who lives in the same county: a candidate too
    position = np.empty(n, dtype=np.int32)
    position[candidates] = np.arange(candidates.size, dtype=np.int32)
    inside = inside[position[source[candidates]]]
    out[candidates] = np.where(inside, place, outside)
    return out, codes
