"""Deprecated: the TOML layer of the configuration files moved to :mod:`hierarchy.io.tomlconfig`.

This module hands out the same objects and warns when it is imported; it will be removed.
"""

import warnings

from hierarchy.io.tomlconfig import *  # noqa: F403
from hierarchy.io.tomlconfig import __all__  # noqa: F401

warnings.warn("hierarchy.tomlconfig is deprecated: import from hierarchy.io.tomlconfig (the same "
              "objects)", DeprecationWarning, stacklevel=2)
