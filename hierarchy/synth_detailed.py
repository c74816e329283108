"""Deprecated: the detailed 1940-style generator moved to :mod:`hierarchy.synth.detailed1940`.

This module hands out the same objects and warns when it is imported; it will be removed.
"""

import warnings

from hierarchy.synth.detailed1940 import *  # noqa: F403
from hierarchy.synth.detailed1940 import (  # noqa: F401
    HOUSEHOLD_SHARING,
    HOUSEHOLD_SIZE,
    PERSONS_SCHEMA,
    SECOND_ORIGIN,
    STREAM_KEY,
    THIRD_RACE,
    __all__,
)

warnings.warn("hierarchy.synth_detailed is deprecated: import from hierarchy.synth.detailed1940 "
              "(the same objects)", DeprecationWarning, stacklevel=2)
