"""The detailed 1940-style generator (:mod:`hierarchy.synth.detailed1940`).

Structure is checked exactly; realism statistically on 1M persons with a fixed seed, so the
checks are deterministic. Each tolerance is wide compared with the sampling error at this size
(binomial standard errors are below 0.05 percentage points for the national shares; the
geographic checks compare shares that differ by an order of magnitude).
"""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from hierarchy.errors import HierarchyError
from hierarchy.synth import synthesize_1940
from hierarchy.synth.detailed1940 import (
    DETAILED_COLUMNS,
    DETAILED_RACES,
    HISPANIC_ORIGINS,
    MAX_AGE,
    SyntheticDetailed1940,
    code_labels,
    major_group,
    synthesize_detailed_1940,
    write_synthetic_detailed_1940,
)

N = 1_000_000
SEED = 77


@pytest.fixture(scope="module")
def data() -> SyntheticDetailed1940:
    return synthesize_detailed_1940(N, seed=SEED)


@pytest.fixture(scope="module")
def cols(data) -> dict[str, np.ndarray]:
    t = data.persons
    out = {name: t.column(name).to_numpy().astype(np.int64)
           for name in ("hhgq", "votingage", "hispanic", "cenrace") + DETAILED_COLUMNS}
    out["state"] = np.asarray(t.column("state").cast(pa.string()).to_numpy(zero_copy_only=False))
    out["county"] = np.asarray(t.column("county").cast(pa.string())
                               .to_numpy(zero_copy_only=False))
    out["ed"] = np.asarray(t.column("enum_dist").cast(pa.string()).to_numpy(zero_copy_only=False))
    out["races"] = np.stack([out["race1"], out["race2"], out["race3"]], axis=1)
    return out


# ---------------------------------------------------------------------------------------------
# structure and determinism
# ---------------------------------------------------------------------------------------------
def test_deterministic_for_a_seed_and_seed_dependent():
    a = synthesize_detailed_1940(30_000, seed=5)
    b = synthesize_detailed_1940(30_000, seed=5)
    c = synthesize_detailed_1940(30_000, seed=6)
    assert a.persons.equals(b.persons) and a.units.equals(b.units)
    assert not a.persons.select(DETAILED_COLUMNS).equals(c.persons.select(DETAILED_COLUMNS))


def test_base_columns_are_those_of_synth():
    detailed = synthesize_detailed_1940(30_000, seed=9)
    base = synthesize_1940(30_000, seed=9)
    names = base.persons.column_names
    assert detailed.persons.column_names == names + list(DETAILED_COLUMNS) + ["aiannh"]
    assert detailed.persons.select(names).equals(base.persons)
    assert detailed.units.equals(base.units)


def test_schema(data):
    types = {f.name: str(f.type) for f in data.persons.schema}
    assert types["sex"] == types["age"] == "int8"
    assert all(types[c] == "int16" for c in ("race1", "race2", "race3", "hisp_origin"))
    assert types["state"].startswith("dictionary")
    assert data.persons.num_rows == N


def test_invalid_construction_and_arguments_raise(data):
    with pytest.raises(HierarchyError, match="must have the schema"):
        SyntheticDetailed1940(persons=data.units, units=data.units)
    with pytest.raises(HierarchyError, match="at least 49"):
        synthesize_detailed_1940(10, seed=1)
    with pytest.raises(HierarchyError, match="seed"):
        synthesize_detailed_1940(1000, seed=-1)
    with pytest.raises(HierarchyError, match="directory path"):
        write_synthetic_detailed_1940(3, 1000, seed=1)


def test_write_round_trip(tmp_path):
    summary = write_synthetic_detailed_1940(tmp_path / "d", 20_000, seed=4)
    persons = pq.read_table(summary["persons_path"])
    assert persons.equals(synthesize_detailed_1940(20_000, seed=4).persons)
    meta = json.loads(pq.read_schema(summary["persons_path"]).metadata[b"dapp"])
    assert meta == {"generator": "hierarchy.synth_detailed.synthesize_detailed_1940",
                    "persons": 20_000, "seed": 4}
    assert pq.read_table(summary["units_path"]).num_rows > 0


def test_codes_are_valid_and_consistent(cols):
    races, cenrace = cols["races"], cols["cenrace"]
    valid = {code for code, _ in DETAILED_RACES}
    assert set(np.unique(races[:, 0]).tolist()) <= valid
    assert set(np.unique(races[:, 1:]).tolist()) <= valid | {0}
    # left-packed, no code twice in a record
    assert np.all((races[:, 2] == 0) | (races[:, 1] != 0))
    assert not np.any((races[:, 1] != 0) & (races[:, 1] == races[:, 0]))
    assert not np.any((races[:, 2] != 0) & ((races[:, 2] == races[:, 0])
                                            | (races[:, 2] == races[:, 1])))
    # race1 details cenrace
    major = major_group(races[:, 0])
    expected = {0: {1}, 1: {2}, 2: {3}, 3: {4}, 4: {4}, 5: {4, 5, 6}}
    for race, majors in expected.items():
        assert set(np.unique(major[cenrace == race]).tolist()) <= majors, race
    assert np.all(races[cenrace == 3, 0] == 4101) and np.all(races[cenrace == 4, 0] == 4102)
    # Hispanic origin exactly for Hispanic persons
    origin = cols["hisp_origin"]
    assert np.array_equal(origin > 0, cols["hispanic"] == 1)
    assert set(np.unique(origin[origin > 0]).tolist()) <= {c for c, _ in HISPANIC_ORIGINS}
    assert len(code_labels()) == len(DETAILED_RACES) + len(HISPANIC_ORIGINS)


def test_ages_and_sex_are_consistent(cols):
    age, sex = cols["age"], cols["sex"]
    assert age.min() >= 0 and age.max() <= MAX_AGE
    assert np.array_equal(age >= 18, cols["votingage"] == 1)
    assert set(np.unique(sex).tolist()) == {1, 2}


# ---------------------------------------------------------------------------------------------
# realism
# ---------------------------------------------------------------------------------------------
def test_age_and_sex_distribution_is_1940_like(cols):
    age, sex = cols["age"], cols["sex"]
    assert 0.07 < np.mean(age < 5) < 0.09            # 1940: 8.0 %
    assert 0.055 < np.mean(age >= 65) < 0.085        # 1940: 6.8 %
    assert 0.28 < np.mean(age < 18) < 0.34            # set by hierarchy.synth's votingage
    assert 0.495 < np.mean(sex == 1) < 0.515         # 1940: 100.7 men per 100 women
    assert 0.3 < np.mean(age >= 85) / np.mean(age >= 80) < 0.5
    assert np.mean(age > 100) < 1e-3


def test_group_quarters_have_their_profiles(cols):
    age, sex, hhgq = cols["age"], cols["sex"], cols["hhgq"]
    military = hhgq == 6
    assert military.sum() > 100
    assert np.mean(sex[military] == 1) > 0.95 and np.mean((age[military] >= 18)
                                                          & (age[military] <= 34)) == 1.0
    nursing = hhgq == 3
    assert np.mean(age[nursing] >= 65) > 0.7
    juvenile = (hhgq == 2) & (cols["votingage"] == 0)
    assert np.all((age[juvenile] >= 10) & (age[juvenile] <= 17))


def test_multi_race_reporting(cols):
    races = cols["races"]
    multi = races[:, 1] > 0
    assert 0.005 < multi.mean() < 0.05
    major1, major2 = major_group(races[:, 0]), major_group(races[:, 1])
    other_major = multi & (major2 != major1)
    aian = major1 == 3
    assert 0.15 < other_major[aian].mean() < 0.35     # a quarter of American Indians
    assert other_major[major1 == 1].mean() < 0.02     # under 2 % of White persons
    assert 0.0002 < (races[:, 2] > 0).mean() < 0.005  # three races: rare
    # a record belongs to several race groups: up to 3 majors
    majors = np.stack([major_group(races[:, k]) for k in range(3)], axis=1)
    distinct = (majors[:, :, None] == np.arange(1, 7)).any(axis=1).sum(axis=1)
    assert distinct.max() == 3


def share_in(codes: np.ndarray, states: np.ndarray, code: int, wanted: set[str]) -> float:
    has = (codes == code).any(axis=1)
    return float(np.isin(states[has], list(wanted)).mean())


def test_origins_and_tribes_follow_1940_geography(cols):
    races, state = cols["races"], cols["state"]
    assert share_in(races, state, 3101, {"04", "35", "49"}) > 0.8          # Navajo: AZ NM UT
    assert share_in(races, state, 3110, {"37"}) > 0.9                      # Lumbee: NC
    assert share_in(races, state, 3108, {"36", "55"}) > 0.6                # Iroquois: NY WI
    origin = cols["hisp_origin"][:, None]
    assert share_in(origin, state, 7102, {"36", "34"}) > 0.6               # Puerto Rican: NY NJ
    assert share_in(origin, state, 7101, {"48", "06", "04", "35", "08"}) > 0.7   # Mexican
    # Norwegians are a much larger share of the White population in MN and ND than nationally
    white = major_group(races[:, 0]) == 1
    norwegian = (races == 1108).any(axis=1)
    upper_midwest = np.isin(state, ["27", "38"])
    assert norwegian[white & upper_midwest].mean() > 3 * norwegian[white].mean()
    # foreign white stock is rare in the South (1940)
    south = np.isin(state, ["01", "13", "28", "45"])
    stated = white & (races[:, 0] != 1000)
    assert stated[south].mean() < 0.4 * stated.mean()


def test_tribes_cluster_by_county(cols):
    """Counties draw their own tribal mix: the share of the leading tribe among a county's
    American Indians exceeds its state's share in most counties with enough of them."""
    races, county, state = cols["races"], cols["county"], cols["state"]
    tribal = (races[:, 0] > 3100) & (races[:, 0] < 3200)
    ok = total = 0
    for code in np.unique(county[tribal]):
        in_county = tribal & (county == code)
        if in_county.sum() < 30:
            continue
        values, counts = np.unique(races[in_county, 0], return_counts=True)
        lead = values[np.argmax(counts)]
        in_state = tribal & (state == code[:2])
        total += 1
        ok += counts.max() / counts.sum() >= np.mean(races[in_state, 0] == lead)
    assert total >= 5 and ok / total > 0.6


def test_pseudo_households_share_codes(cols):
    """Consecutive household persons of one ED and group share their detailed race far more
    often than two random persons of that group in the same state."""
    races, ed, hhgq = cols["races"], cols["ed"], cols["hhgq"]
    group = 6 * cols["hispanic"] + cols["cenrace"]
    same = ((ed[1:] == ed[:-1]) & (hhgq[1:] == 0) & (hhgq[:-1] == 0)
            & (group[1:] == group[:-1]) & (cols["cenrace"][1:] == 0))
    neighbours = np.mean(races[1:, 0][same] == races[:-1, 0][same])
    rng = np.random.default_rng(0)
    white = np.flatnonzero(cols["cenrace"] == 0)
    a, b = rng.choice(white, 20_000), rng.choice(white, 20_000)
    same_state = cols["state"][a] == cols["state"][b]
    random_pairs = np.mean(races[a, 0][same_state] == races[b, 0][same_state])
    assert neighbours > random_pairs + 0.1
