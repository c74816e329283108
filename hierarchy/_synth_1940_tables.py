"""Deprecated: the 1940 generator's tables moved to :mod:`hierarchy.synth.census1940_tables`.

This module hands out the same objects and warns when it is imported; it will be removed.
"""

import warnings

from hierarchy.synth.census1940_tables import (  # noqa: F401
    COUNTY_LOG_SD,
    ED_QUANTILES,
    GQ_ED_PROBABILITY,
    GQ_EXTRA_FACILITIES,
    GQ_LOG_SD,
    GQ_MEDIAN_PERSONS,
    GQ_TYPES,
    GQ_UNDER_18,
    HISPANIC_RACE,
    HOUSEHOLD_SIZE_PMF,
    STATES,
)

warnings.warn("hierarchy._synth_1940_tables is deprecated: import from "
              "hierarchy.synth.census1940_tables (the same objects)", DeprecationWarning,
              stacklevel=2)
