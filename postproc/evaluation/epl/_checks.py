"""Input checks shared by the EPL estimators."""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from hierarchy.numbers import positive
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
    """:func:`hierarchy.numbers.positive` raising a PostprocError (the EPL modules' spelling)."""
    return positive(value, name, error=PostprocError)


def _degenerate(e: np.ndarray) -> str | None:
    """Why no density can be estimated from ``e``, or None."""
    if e.size < 2:
        return f"{e.size} error(s): a density needs at least two"
    if e.min() == e.max():
        return (f"all {e.size} errors equal {e[0]:g}: the error distribution is a point mass, "
                f"whose log ratio this estimator cannot take (a level held invariant, or a "
                f"mechanism too accurate for {e.size} errors to show one that differs)")
    return None


def _available_memory() -> int | None:
    """Bytes of memory this process can still use: the smallest of the system's available
    memory (``MemAvailable``) and the room left under a cgroup v2 limit; ``None`` if unknown."""
    limits = []
    try:
        with open("/proc/meminfo", encoding="ascii") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    limits.append(int(line.split()[1]) * 1024)
                    break
    except (OSError, ValueError, IndexError):
        pass
    if not limits:
        try:
            limits.append(os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))
        except (AttributeError, OSError, ValueError):
            pass
    try:
        with open("/sys/fs/cgroup/memory.max", encoding="ascii") as f:
            cap = f.read().strip()
        with open("/sys/fs/cgroup/memory.current", encoding="ascii") as f:
            used = int(f.read().strip())
        if cap != "max":
            limits.append(max(0, int(cap) - used))
    except (OSError, ValueError):
        pass
    return min(limits) if limits else None


def _size(n_bytes: float) -> str:
    """``'3.2 GiB'``, ``'640 MiB'``: a byte count for a message."""
    for unit, scale in (("TiB", 2 ** 40), ("GiB", 2 ** 30), ("MiB", 2 ** 20)):
        if n_bytes >= scale:
            return f"{n_bytes / scale:.3g} {unit}"
    return f"{n_bytes / 2 ** 10:.3g} KiB"


def _check_memory(n_bytes: float, what: str, fix: str) -> None:
    """Raise a PostprocError *before* allocating if ``n_bytes`` will not fit in memory.

    ``what`` says what would be allocated and why (it starts the message); ``fix`` says which
    option to lower. The limit is the memory available right now (:func:`_available_memory`).
    """
    available = _available_memory()
    if available is not None and n_bytes > available:
        raise PostprocError(f"{what} would need about {_size(n_bytes)} of memory, but only "
                            f"{_size(available)} is available; {fix}")
