"""Only children without measurements, for the GLS: each chain's measurements moved to its bottom.

A Noisy Measurement File gives a unit that is its parent's only child no measurements: its
budget went to its parent, and TopDown copies the parent into it. The GLS takes the tree as
it is, except that a bottom unit must be determined by its own measurements. Along a chain of
only children every unit holds the same histogram (each is its parent's only child, and
children sum to their parent), so a measurement of one is a measurement of all: moving every
chain's measurements to its bottom unit changes neither the information about any unit nor the
best linear unbiased estimate — and leaves every bottom unit measured.
"""

from __future__ import annotations

from typing import Mapping

import numpy as np

from hierarchy.noisy import Measurement, NoisyHierarchy

__all__ = ["unmeasured_only_children", "measured_at_chain_bottoms"]


def _unmeasured(ms: Mapping[str, Measurement], n: int) -> np.ndarray:
    """Which of a level's ``n`` units have no answer drawn in any of its measurements ``ms``
    (all of them where nothing is measured at the level)."""
    none = np.ones(n, bool)
    for m in ms.values():
        none &= np.zeros(n, bool) if m.drawn is None else ~m.drawn.any(axis=1)
    return none


def unmeasured_only_children(noisy: NoisyHierarchy) -> bool:
    """Whether every answer left undrawn belongs to a unit that is its parent's only child and
    has no answer drawn at all (as a Noisy Measurement File has them) — the undrawn answers
    :func:`measured_at_chain_bottoms` can move.

    Examples
    --------
    >>> from hierarchy.geography import Geography
    >>> from hierarchy.queries import Workload, total
    >>> from hierarchy.schema import Attribute, Schema
    >>> s = Schema((Attribute("sex", ("male", "female")),))
    >>> geo, _ = Geography.from_columns(["nation", "state", "county"],
    ...                                 [[["A", "B", "B"], ["A1", "B1", "B2"]]])
    >>> drawn = np.array([[False], [True], [True]])
    >>> noisy = NoisyHierarchy(s, geo, Workload((total(s),)), {
    ...     "state": {"total": Measurement("total", np.array([[4], [5]]), 1.0)},
    ...     "county": {"total": Measurement("total", np.array([[0], [2], [3]]), 1.0, drawn)}})
    >>> unmeasured_only_children(noisy)       # county A1 is state A's only child
    True
    """
    geo = noisy.geography
    for li, lv in enumerate(geo.levels):
        ms = noisy.measurements.get(lv, {})
        if not ms:
            continue                # a level measured by nothing: the GLS takes it as it is
        none = _unmeasured(ms, geo.n_units(li))
        for m in ms.values():
            if m.drawn is not None and not np.all(m.drawn.all(axis=1) | none):
                return False        # a unit with some answers drawn and others not
        if none.any() and (li == 0 or not np.all(geo.only_children(li)[none])):
            return False
    return True


def measured_at_chain_bottoms(noisy: NoisyHierarchy) -> NoisyHierarchy:
    """``noisy`` with each unmeasured only child given its parent's measurements (the parent's
    then undrawn), top down, so every chain of only children is measured at its bottom unit.

    Parameters
    ----------
    noisy : NoisyHierarchy
        Whose undrawn answers are only children's (:func:`unmeasured_only_children`).

    Returns
    -------
    NoisyHierarchy
        The same when nothing moves.

    Examples
    --------
    State A's only county A1 had no measurement; it takes A's:

    >>> from hierarchy.geography import Geography
    >>> from hierarchy.queries import Workload, total
    >>> from hierarchy.schema import Attribute, Schema
    >>> s = Schema((Attribute("sex", ("male", "female")),))
    >>> geo, _ = Geography.from_columns(["nation", "state", "county"],
    ...                                 [[["A", "B", "B"], ["A1", "B1", "B2"]]])
    >>> drawn = np.array([[False], [True], [True]])
    >>> noisy = NoisyHierarchy(s, geo, Workload((total(s),)), {
    ...     "state": {"total": Measurement("total", np.array([[4], [5]]), 1.0)},
    ...     "county": {"total": Measurement("total", np.array([[0], [2], [3]]), 1.0, drawn)}})
    >>> moved = measured_at_chain_bottoms(noisy)
    >>> moved.measurements["county"]["total"].values.ravel().tolist()
    [4, 2, 3]
    >>> moved.measurements["state"]["total"].weights.ravel().tolist()
    [0.0, 1.0]
    """
    geo = noisy.geography
    measurements = {lv: dict(ms) for lv, ms in noisy.measurements.items()}
    moved = False
    for li in range(1, geo.depth):
        lv, up = geo.levels[li], geo.levels[li - 1]
        take = _unmeasured(measurements.get(lv, {}), geo.n_units(li)) & geo.only_children(li)
        if not take.any():
            continue
        parent = geo.parents[li]
        for name, pm in measurements.get(up, {}).items():
            cm = measurements.get(lv, {}).get(name)
            n, a = geo.n_units(li), pm.values.shape[1]
            values = np.zeros((n, a), pm.values.dtype) if cm is None else cm.values.copy()
            variances = (np.ones((n, a)) if cm is None else
                         np.array(cm.variances, dtype=np.float64))
            drawn = (np.zeros((n, a), bool) if cm is None else
                     np.ones((n, a), bool) if cm.drawn is None else cm.drawn.copy())
            src = parent[take]
            values[take] = pm.values[src]
            variances[take] = pm.variances[src]
            drawn[take] = True if pm.drawn is None else pm.drawn[src]
            measurements.setdefault(lv, {})[name] = Measurement(name, values, variances, drawn)
            gave = np.zeros(geo.n_units(li - 1), bool)
            gave[src] = True
            pdrawn = (np.ones(pm.values.shape, bool) if pm.drawn is None
                      else pm.drawn.copy())
            pdrawn[gave] = False
            pvalues = pm.values.copy()
            pvalues[gave] = 0
            measurements[up][name] = Measurement(name, pvalues, pm.variances, pdrawn)
            moved = True
    if not moved:
        return noisy
    return NoisyHierarchy(noisy.schema, geo, noisy.workload, measurements, noisy.invariants,
                          noisy.provenance)
