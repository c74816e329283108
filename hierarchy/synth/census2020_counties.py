"""One state's plan and its counties' rows, for the synthetic 2020-style population.

Steps 2-6 of the model of :mod:`hierarchy.synth.census2020`, whose driver calls
:func:`_plan_state` once per state and :func:`_generate_county` once per county: the plan holds
the state's geography (counties, tracts, block groups, blocks and their geocodes), household
persons per block, group-quarters facilities, the tracts' major-group mixes and chances of being
under 18; a county's rows are its persons, units and blocks. The figures come from
:mod:`hierarchy.synth.census2020_model`. Each state's plan has the stream
``SeedSequence(seed, spawn_key=(fips, 0))`` and each county's rows ``SeedSequence(seed,
spawn_key=(fips, 1, county))``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from hierarchy.synth.census1940_mixes import _rake
from hierarchy.synth.census2020_model import (
    _MINOR_CALIBRATION,
    BLOCK_DENSITY_LOG_SD,
    BLOCK_DOMINANCE,
    BLOCK_GROUP_PERSONS,
    BLOCK_GROUP_SHAPE,
    BLOCK_LOG_SD,
    COUNTY_CONCENTRATION,
    COUNTY_LOG_SD,
    EMPTY_BLOCK_SHARE,
    EMPTY_BLOCK_VACANT,
    GQ_TYPES,
    HOUSEHOLD_MIXING,
    HOUSEHOLD_SIZE_PMF,
    MINOR_FACTORS,
    PERSONS_PER_BLOCK,
    STATES,
    TRACT_CONCENTRATION,
    TRACT_MINOR_LOG_SD,
    TRACT_PERSONS,
    TRACT_SHAPE,
    VACANCY,
    _state_major_mix,
    cenrace_distribution,
)


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

