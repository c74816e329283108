"""Input checks shared by the EPL estimators."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from postproc.errors import PostprocError


def _as_errors(errors: Any, name: str = "errors") -> np.ndarray:
    """``errors`` as a 1-D float array of finite numbers, or a PostprocError saying why not."""
    try:
        e = np.asarray(errors, dtype=float)
    except (TypeError, ValueError) as exc:
        raise PostprocError(f"{name} must be numbers: {exc}") from None
    if e.ndim != 1:
        raise PostprocError(f"{name} must be a 1-D array, not shape {e.shape}; pool the cells of "
                            f"one level and query with .ravel() first")
    bad = ~np.isfinite(e)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise PostprocError(f"{name} must be finite; element {i} is {e[i]} "
                            f"({int(bad.sum())} non-finite in all)")
    return e


def _positive(value: Any, name: str) -> float:
    try:
        value = float(value)
    except (TypeError, ValueError):
        raise PostprocError(f"{name} must be a positive number, not {value!r}") from None
    if not (math.isfinite(value) and value > 0):
        raise PostprocError(f"{name} must be a positive number, not {value!r}")
    return value


def _degenerate(e: np.ndarray) -> str | None:
    """Why no density can be estimated from ``e``, or None."""
    if e.size < 2:
        return f"{e.size} error(s): a density needs at least two"
    if e.min() == e.max():
        return (f"all {e.size} errors equal {e[0]:g}: the error distribution is a point mass "
                f"(e.g. a level held invariant), so its log ratio is undefined")
    return None
