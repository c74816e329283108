"""Data tables behind :mod:`hierarchy.synth.census1940`: 1940 state populations and mixes, sizes.

Sources and approximations
--------------------------
* State populations: the 1940 census counts (48 states and DC), exact.
* Race shares (percent of the state's population): 1940 census "Black", "Indian", "Chinese",
  "Japanese" and "other races" (Filipino, Hindu, Korean, ...) counts, rounded; very small groups are
  given a token share so that no group is impossible anywhere (there were, for example, Chinese
  communities in the Mississippi Delta).
* Hispanic share: 1940 had no Hispanic-origin question; the figure is an approximation of the
  Spanish-mother-tongue / Spanish-surname population (large in NM, AZ, TX, CO, CA; small elsewhere).
* County counts: the 1940 number of counties (and county equivalents) of each state, 3,097 in all,
  so the mean county is 131.7M / 3,097 = 42,515 persons (the target, docs/data.md: 42,601).
* Size distributions: the enumeration-district (ED) quantile function is piecewise linear in log
  size between the knots below, through the median 865 and 95th percentile 2,342 of
  docs/data.md and tuned so that its mean is 982 persons. County sizes within a state are log-normal
  around the state's mean county, with the log-sd tuned so that the national median county is near
  18,679. ``tests/test_synth.py`` checks both.
"""

from __future__ import annotations

import numpy as np

#: (FIPS, postal code, 1940 population, 1940 counties (county equivalents: Louisiana parishes,
#: Virginia's independent cities, Baltimore and St. Louis cities, DC), % Black, % American Indian,
#: % Chinese, % Japanese, % other race, % Hispanic), in FIPS order.
STATES: tuple[tuple[str, str, int, int, float, float, float, float, float, float], ...] = (
    ("01", "AL", 2832961, 67, 34.7, 0.02, 0.002, 0.001, 0.005, 0.10),
    ("04", "AZ", 499261, 14, 3.0, 11.0, 0.10, 0.13, 0.10, 20.0),
    ("05", "AR", 1949387, 75, 24.8, 0.01, 0.01, 0.001, 0.01, 0.10),
    ("06", "CA", 6907387, 58, 1.8, 0.27, 0.57, 1.36, 0.50, 6.0),
    ("08", "CO", 1123296, 63, 1.1, 0.16, 0.01, 0.24, 0.02, 8.0),
    ("09", "CT", 1709242, 8, 1.9, 0.01, 0.02, 0.01, 0.02, 0.20),
    ("10", "DE", 266505, 3, 13.5, 0.01, 0.03, 0.001, 0.01, 0.10),
    ("11", "DC", 663091, 1, 28.2, 0.03, 0.10, 0.01, 0.05, 0.30),
    ("12", "FL", 1897414, 67, 27.1, 0.03, 0.01, 0.01, 0.02, 1.20),
    ("13", "GA", 3123723, 159, 34.7, 0.002, 0.01, 0.001, 0.01, 0.05),
    ("16", "ID", 524873, 44, 0.1, 0.67, 0.04, 0.23, 0.03, 0.50),
    ("17", "IL", 7897241, 102, 4.9, 0.01, 0.03, 0.01, 0.02, 0.40),
    ("18", "IN", 3427796, 92, 3.6, 0.002, 0.01, 0.001, 0.01, 0.30),
    ("19", "IA", 2538268, 99, 0.7, 0.02, 0.002, 0.001, 0.01, 0.20),
    ("20", "KS", 1801028, 105, 3.6, 0.06, 0.002, 0.001, 0.01, 0.80),
    ("21", "KY", 2845627, 120, 7.5, 0.002, 0.002, 0.001, 0.01, 0.03),
    ("22", "LA", 2363880, 64, 35.9, 0.05, 0.01, 0.001, 0.03, 0.50),
    ("23", "ME", 847226, 16, 0.1, 0.08, 0.01, 0.001, 0.01, 0.05),
    ("24", "MD", 1821244, 24, 16.6, 0.002, 0.03, 0.001, 0.01, 0.10),
    ("25", "MA", 4316721, 14, 1.3, 0.02, 0.06, 0.01, 0.05, 0.20),
    ("26", "MI", 5256106, 83, 4.0, 0.12, 0.02, 0.002, 0.02, 0.50),
    ("27", "MN", 2792300, 87, 0.4, 0.45, 0.01, 0.002, 0.01, 0.10),
    ("28", "MS", 2183796, 82, 49.2, 0.10, 0.03, 0.001, 0.01, 0.05),
    ("29", "MO", 3784664, 115, 6.5, 0.01, 0.01, 0.002, 0.01, 0.20),
    ("30", "MT", 559456, 56, 0.2, 3.0, 0.05, 0.09, 0.02, 0.50),
    ("31", "NE", 1315834, 93, 1.1, 0.26, 0.01, 0.04, 0.01, 0.50),
    ("32", "NV", 110247, 17, 0.6, 4.3, 0.30, 0.43, 0.10, 2.0),
    ("33", "NH", 491524, 10, 0.1, 0.01, 0.01, 0.001, 0.01, 0.05),
    ("34", "NJ", 4160165, 21, 5.5, 0.002, 0.03, 0.01, 0.02, 0.40),
    ("35", "NM", 531818, 31, 0.9, 6.5, 0.01, 0.03, 0.03, 41.0),
    ("36", "NY", 13479142, 62, 4.2, 0.06, 0.10, 0.02, 0.05, 1.0),
    ("37", "NC", 3571623, 100, 27.5, 0.63, 0.002, 0.001, 0.01, 0.03),
    ("38", "ND", 641935, 53, 0.03, 1.58, 0.002, 0.001, 0.01, 0.10),
    ("39", "OH", 6907612, 88, 4.9, 0.002, 0.01, 0.001, 0.01, 0.20),
    ("40", "OK", 2336434, 77, 7.2, 2.7, 0.002, 0.002, 0.01, 0.30),
    ("41", "OR", 1089684, 36, 0.2, 0.42, 0.19, 0.37, 0.05, 0.30),
    ("42", "PA", 9900180, 67, 4.7, 0.002, 0.01, 0.001, 0.01, 0.15),
    ("44", "RI", 713346, 5, 1.5, 0.03, 0.02, 0.001, 0.02, 0.10),
    ("45", "SC", 1899804, 46, 42.9, 0.06, 0.002, 0.001, 0.01, 0.03),
    ("46", "SD", 642961, 69, 0.07, 3.6, 0.002, 0.001, 0.01, 0.10),
    ("47", "TN", 2915841, 95, 17.4, 0.002, 0.002, 0.001, 0.01, 0.05),
    ("48", "TX", 6414824, 254, 14.4, 0.02, 0.01, 0.01, 0.02, 11.5),
    ("49", "UT", 550310, 29, 0.2, 0.66, 0.04, 0.40, 0.03, 0.80),
    ("50", "VT", 359231, 14, 0.1, 0.002, 0.002, 0.001, 0.01, 0.03),
    ("51", "VA", 2677773, 124, 24.7, 0.01, 0.01, 0.001, 0.01, 0.05),
    ("53", "WA", 1736191, 39, 0.4, 0.66, 0.14, 0.84, 0.20, 0.30),
    ("54", "WV", 1901974, 55, 6.2, 0.002, 0.002, 0.001, 0.01, 0.10),
    ("55", "WI", 3137587, 71, 0.4, 0.39, 0.01, 0.001, 0.01, 0.10),
    ("56", "WY", 250742, 23, 0.8, 0.94, 0.03, 0.20, 0.02, 1.50),
)

#: FIPS codes of the 48 states and DC, in order.
STATE_FIPS: tuple[str, ...] = tuple(row[0] for row in STATES)
#: 1940 census population of each state (same order as :data:`STATE_FIPS`).
STATE_POPULATION_1940 = np.array([row[2] for row in STATES], dtype=np.int64)

#: Race distribution (white, Black, American Indian, Chinese, Japanese, other) of Hispanic persons.
#: Mostly white (1940 enumerators were told to record Mexicans as white), with some of every race.
HISPANIC_RACE = np.array([0.90, 0.03, 0.03, 0.01, 0.01, 0.02])

#: ED persons: quantile function knots (probability, persons).
ED_QUANTILES = (
    (0.0, 0.01, 0.05, 0.10, 0.25, 0.50, 0.75, 0.90, 0.95, 0.99, 1.0),
    (10.0, 60.0, 180.0, 300.0, 540.0, 865.0, 1210.0, 1775.0, 2342.0, 3250.0, 5000.0),
)

#: Log-sd of a county's size relative to the mean county of its state (log-normal). With the 1940
#: county counts above it gives a national median county near 18,679 (the mean, 42,601, follows
#: from the counts).
COUNTY_LOG_SD = 1.02

#: 1940-style household size distribution, sizes 1, 2, ..., 12 (mean about 3.8).
HOUSEHOLD_SIZE_PMF = np.array(
    [0.075, 0.235, 0.215, 0.175, 0.117, 0.075, 0.047, 0.028, 0.016, 0.009, 0.005, 0.003])

#: Group-quarters facility types that occur (1 correctional and 5 college never do: structural
#: zeros), with: probability that an ED has facilities of the type, mean number of *extra*
#: facilities in such an ED (Poisson), median and log-sd of facility persons (log-normal), and the
#: probability that a resident is under 18.
GQ_TYPES = np.array([2, 3, 4, 6, 7], dtype=np.int8)
GQ_ED_PROBABILITY = np.array([0.020, 0.050, 0.025, 0.005, 0.150])
GQ_EXTRA_FACILITIES = np.array([0.20, 0.30, 0.10, 0.10, 1.50])
GQ_MEDIAN_PERSONS = np.array([40.0, 30.0, 150.0, 400.0, 15.0])
GQ_LOG_SD = np.array([0.9, 0.8, 1.3, 1.2, 1.0])
GQ_UNDER_18 = np.array([0.85, 0.0, 0.02, 0.0, 0.02])
