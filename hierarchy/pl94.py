"""Deprecated: the 2020 PL 94-171 presets moved to :mod:`hierarchy.presets.pl94`.

This module hands out the same objects and warns when it is imported; it will be removed.
"""

import warnings

from hierarchy.presets.pl94 import *  # noqa: F403
from hierarchy.presets.pl94 import NURSE_NVA_0, __all__  # noqa: F401

warnings.warn("hierarchy.pl94 is deprecated: import from hierarchy.presets.pl94 (the same "
              "objects)", DeprecationWarning, stacklevel=2)
