"""The figures of the synthetic 2020-style population: states, model constants, race mixes.

What :mod:`hierarchy.synth.census2020` generates from (its docstring states the model, step by
step): the 2020 figures of every state (:data:`STATES`), the constants of each step (geography,
composition, households, group quarters, age) and the state-level distributions derived from
them — the seven major groups' mix of a state and the 63 cenrace shares of its Hispanic and
non-Hispanic "other" persons (:func:`cenrace_distribution`). The plan of a state and the rows of
its counties are drawn in :mod:`hierarchy.synth.census2020_counties`.

Examples
--------
>>> len(STATES), STATES[4][:3]
(52, ('06', 'CA', 39538223))
>>> round(float(_state_major_mix(4).sum()), 12)
1.0
"""

from __future__ import annotations

import functools
import itertools
from typing import Any

import numpy as np

from hierarchy.presets.pl94 import CENRACE_LABELS

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

