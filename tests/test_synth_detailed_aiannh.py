"""AIANNH areas of the detailed 1940-style data (:mod:`hierarchy.synth.detailed1940_aiannh`).

Structure is checked exactly on 1M persons with a fixed seed (deterministic); the shares are
checked against bounds far from the values the model gives (the areas hold about a third of the
American Indians and a few in a thousand of everyone else).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from hierarchy.errors import HierarchyError
from hierarchy.synth.census1940_tables import STATES
from hierarchy.synth.detailed1940 import DETAILED_COLUMNS, synthesize_detailed_1940
from hierarchy.synth.detailed1940_aiannh import (
    AIANNH_AREAS,
    AIANNH_COLUMN,
    NOT_IN_AIANNH,
    AIANNHArea,
    assign_aiannh,
)

N = 1_000_000
SEED = 77
POSTAL = {row[0]: row[1] for row in STATES}          # FIPS -> postal code


def strings(table: pa.Table, name: str) -> np.ndarray:
    return np.asarray(table.column(name).cast(pa.string()).to_numpy(zero_copy_only=False))


@pytest.fixture(scope="module")
def persons() -> pa.Table:
    return synthesize_detailed_1940(N, seed=SEED).persons


@pytest.fixture(scope="module")
def cols(persons) -> dict[str, np.ndarray]:
    races = np.stack([persons.column(c).to_numpy() for c in ("race1", "race2", "race3")], axis=1)
    return {"area": strings(persons, AIANNH_COLUMN), "state": strings(persons, "state"),
            "county": strings(persons, "county"), "ed": strings(persons, "enum_dist"),
            "races": races, "aian": ((races >= 3000) & (races < 4000)).any(axis=1)}


def test_the_column_holds_area_codes_or_the_outside_code(persons, cols):
    assert persons.column_names[-1] == AIANNH_COLUMN
    assert pa.types.is_dictionary(persons.schema.field(AIANNH_COLUMN).type)
    codes = {area.code for area in AIANNH_AREAS}
    assert len(codes) == len(AIANNH_AREAS) and NOT_IN_AIANNH not in codes
    assert set(np.unique(cols["area"]).tolist()) <= codes | {NOT_IN_AIANNH}
    inside = cols["area"] != NOT_IN_AIANNH
    # most persons live in no area; the areas are mostly American Indian persons' places
    assert 0.001 < inside.mean() < 0.05
    share_aian_inside = (inside & cols["aian"]).sum() / cols["aian"].sum()
    assert 0.15 < share_aian_inside < 0.6
    assert cols["aian"][inside].mean() > 20 * cols["aian"][~inside].mean()


def test_areas_lie_in_their_states_and_some_cross_state_lines(cols):
    inside = cols["area"] != NOT_IN_AIANNH
    states_of = {}
    for area in AIANNH_AREAS:
        rows = cols["area"] == area.code
        found = {POSTAL[s] for s in np.unique(cols["state"][rows]).tolist()}
        assert found <= set(area.states), area.name
        states_of[area.code] = found
    assert len(states_of["0001"]) >= 2                     # the Navajo Nation: AZ, NM, UT
    assert sum(len(found) > 1 for found in states_of.values()) >= 2
    assert sum(bool(found) for found in states_of.values()) >= 15
    # an area covers whole counties' persons, and a county holds at most one area
    county_area = {}
    for county, area in zip(cols["county"][inside], cols["area"][inside]):
        assert county_area.setdefault(county, area) == area


def test_tribes_live_in_their_areas(cols):
    navajo = (cols["races"] == 3101).any(axis=1)
    in_navajo_nation = cols["area"] == "0001"
    assert navajo[in_navajo_nation].mean() > 0.5
    assert (navajo & in_navajo_nation).sum() > 0.2 * navajo.sum()


def test_households_that_share_codes_share_the_area(cols):
    """Consecutive persons of one ED with identical codes are mostly one pseudo-household: they
    live in the same area far more often than chance (HOUSEHOLD_SHARING = 0.92)."""
    same = ((cols["ed"][1:] == cols["ed"][:-1])
            & (cols["races"][1:] == cols["races"][:-1]).all(axis=1) & cols["aian"][1:])
    inside = (cols["area"] != NOT_IN_AIANNH)
    pairs = same & (inside[1:] | inside[:-1])
    agree = (cols["area"][1:] == cols["area"][:-1])[pairs].mean()
    assert agree > 0.85


def test_other_columns_do_not_depend_on_the_areas(monkeypatch):
    """The areas draw from a stream of their own: however many numbers they draw, the other
    columns are the same (they are as before the areas were added: checked once against the
    previous generator when the areas came in)."""
    data = synthesize_detailed_1940(30_000, seed=5).persons
    import hierarchy.synth.detailed1940 as detailed

    def greedy(county, county_state, races, source, rng):
        rng.random(10 * county.size)                    # draws a lot, places nobody
        return np.full(county.size, len(AIANNH_AREAS), np.int32), np.array(
            [a.code for a in AIANNH_AREAS] + [NOT_IN_AIANNH])

    monkeypatch.setattr(detailed, "assign_aiannh", greedy)
    other = synthesize_detailed_1940(30_000, seed=5).persons
    assert set(strings(other, AIANNH_COLUMN)) == {NOT_IN_AIANNH}
    assert other.drop_columns([AIANNH_COLUMN]).equals(data.drop_columns([AIANNH_COLUMN]))
    assert data.column_names[-len(DETAILED_COLUMNS) - 1:-1] == list(DETAILED_COLUMNS)


def test_assign_aiannh_on_hand_made_counties():
    # Arizona has counties 0 (Navajo) and 1 (Apache); New Mexico county 2 (Navajo).
    state = {row[1]: i for i, row in enumerate(STATES)}
    county_state = np.array([state["AZ"], state["AZ"], state["NM"]])
    county = np.repeat([0, 1, 2], 400)
    races = np.zeros((county.size, 2), np.int64)
    races[:, 0] = np.where(county == 1, 3107, 3101)
    races[::4, 0] = 1000                                   # a quarter are White
    index, codes = assign_aiannh(county, county_state, races, np.arange(county.size),
                                 np.random.default_rng(1))
    area = codes[index]
    navajo_nation = {a.name: a.code for a in AIANNH_AREAS}["Navajo Nation Reservation"]
    arizona = {a.code for a in AIANNH_AREAS if "AZ" in a.states}
    # the Navajo Nation takes the Navajo counties in both states; the Apache county goes to
    # another Arizona area (the first in table order that wants it), one area per county
    assert set(area[county != 1]) == {navajo_nation, NOT_IN_AIANNH}
    apache = set(area[county == 1]) - {NOT_IN_AIANNH}
    assert len(apache) == 1 and apache <= arizona - {navajo_nation}
    tribe = races[:, 0] != 1000
    share = (area != NOT_IN_AIANNH)
    assert 0.75 < share[tribe & (county != 1)].mean() < 0.95        # 0.85
    assert share[~tribe].mean() < 0.05                                # 0.005
    # a copier takes the area of the person it copies
    source = np.arange(county.size)
    source[1::2] = source[0::2]
    index, codes = assign_aiannh(county, county_state, races, source, np.random.default_rng(2))
    assert np.array_equal(index[1::2], index[0::2])


def test_invalid_areas_and_arguments_raise():
    with pytest.raises(HierarchyError, match="four digits other than '9999'"):
        AIANNHArea("12", "X", ("AZ",), 3101, "reservation", 1, 0.0)
    with pytest.raises(HierarchyError, match="postal codes"):
        AIANNHArea("0100", "X", ("AK",), 3101, "reservation", 1, 0.0)
    with pytest.raises(HierarchyError, match="American Indian code"):
        AIANNHArea("0100", "X", ("AZ",), 1000, "reservation", 1, 0.0)
    with pytest.raises(HierarchyError, match="counties must be >= 1"):
        AIANNHArea("0100", "X", ("AZ",), 3101, "reservation", 0, 0.0)
    with pytest.raises(HierarchyError, match="same persons"):
        assign_aiannh(np.zeros(3, int), np.zeros(1, int), np.zeros((2, 3), int), np.arange(3),
                      np.random.default_rng(0))
