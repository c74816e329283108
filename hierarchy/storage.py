"""Deprecated: atomic writes and owned output directories moved to :mod:`hierarchy.io.storage`.

This module hands out the same objects and warns when it is imported; it will be removed.
"""

import warnings

from hierarchy.io.storage import *  # noqa: F403
from hierarchy.io.storage import __all__, read_parquet_metadata  # noqa: F401

warnings.warn("hierarchy.storage is deprecated: import from hierarchy.io.storage (the same "
              "objects)", DeprecationWarning, stacklevel=2)
