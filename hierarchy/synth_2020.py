"""Deprecated: the synthetic 2020-style generator moved to :mod:`hierarchy.synth.census2020`.

Its figures and constants are in :mod:`hierarchy.synth.census2020_model`. This module hands out
the same objects and warns when it is imported; it will be removed.
"""

import warnings

from hierarchy.synth.census2020 import *  # noqa: F403
from hierarchy.synth.census2020 import (  # noqa: F401
    BLOCKS_SCHEMA,
    PERSONS_SCHEMA,
    UNITS_SCHEMA,
    __all__,
)
from hierarchy.synth.census2020_model import (  # noqa: F401
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
    HISPANIC_RACE,
    HISPANIC_RACE_PR,
    HOUSEHOLD_MIXING,
    HOUSEHOLD_SIZE_PMF,
    MAJOR_GROUPS,
    MINOR_FACTORS,
    NH_SOME_OTHER_RACE,
    PAIRS_HISPANIC,
    PAIRS_NON_HISPANIC,
    PERSONS_PER_BLOCK,
    RACE_PROPENSITY,
    TRACT_CONCENTRATION,
    TRACT_MINOR_LOG_SD,
    TRACT_PERSONS,
    TRACT_SHAPE,
    TWO_RACE_SHARE,
    VACANCY,
)

warnings.warn("hierarchy.synth_2020 is deprecated: import from hierarchy.synth.census2020 (the "
              "same objects; the model's constants from hierarchy.synth.census2020_model)",
              DeprecationWarning, stacklevel=2)
