"""Argument checks shared by the accounting modules; a bad value raises a PostprocError."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from postproc.errors import PostprocError


def _nonnegative(value: Any, name: str) -> float:
    """``value`` as a finite float ≥ 0, or a PostprocError naming ``name``."""
    if isinstance(value, bool):
        raise PostprocError(f"{name} must be a number, not {value!r}")
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise PostprocError(f"{name} must be a number, not {value!r}") from None
    if not math.isfinite(number) or number < 0:
        raise PostprocError(f"{name} must be a finite number >= 0, not {value!r}")
    return number


def _positive(value: Any, name: str) -> float:
    number = _nonnegative(value, name)
    if number == 0:
        raise PostprocError(f"{name} must be > 0, not {value!r}")
    return number


def _delta(delta: Any) -> float:
    if isinstance(delta, bool):
        raise PostprocError(f"delta must be a number in (0, 1), not {delta!r}")
    try:
        value = float(delta)
    except (TypeError, ValueError):
        raise PostprocError(f"delta must be a number in (0, 1), not {delta!r}") from None
    if not 0.0 < value < 1.0:
        raise PostprocError(f"delta must be in the open interval (0, 1), not {delta!r}; "
                            f"a typical choice is 1e-10")
    return value


def _sensitivity(value: Any, name: str = "sensitivity") -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise PostprocError(f"{name} of a geometric mechanism must be a positive integer "
                            f"(counts change by whole units), not {value!r}")
    return int(value)


def _alpha(alpha: Any) -> np.ndarray:
    a = np.asarray(alpha, dtype=float)
    if np.any(np.isnan(a)) or np.any(a <= 1.0):
        raise PostprocError(f"Rényi orders alpha must be > 1 (np.inf allowed), not {alpha!r}")
    return a
