"""Argument checks shared by the samplers, densities and mechanism classes of this package.

Numbers are checked by :mod:`hierarchy.numbers` (a noise parameter by
:func:`~hierarchy.numbers.positive`, ``max_denominator`` by :func:`~hierarchy.numbers.integer`);
what is left here is particular to sampling: the ``size`` of a draw and the support of a pmf.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from hierarchy.errors import HierarchyError


def _shape(size: Any) -> tuple[tuple[int, ...], int]:
    """Normalise ``size`` (an int or a tuple of ints) to ``(shape, number of draws)``."""
    dims = size if isinstance(size, tuple) else (size,)
    for dim in dims:
        if isinstance(dim, (bool, np.bool_)) or not isinstance(dim, (int, np.integer)) or dim < 0:
            raise HierarchyError(
                f"size must be a non-negative int or a tuple of them, not {size!r}")
    shape = tuple(int(d) for d in dims)
    return shape, math.prod(shape)


def _integer_mask(k: Any) -> tuple[np.ndarray, np.ndarray]:
    """``k`` as a float array and a mask of its integer entries (the support of a pmf)."""
    values = np.asarray(k, dtype=np.float64)
    return values, np.isfinite(values) & (values == np.floor(values))

