"""The published statistics each compiled level reads: :func:`resolve_statistics`.

A step of :func:`invariants.compile.compile_spec` (which re-exports it): the invariant data
given with the noisy measurements are checked (shape, whole non-negative numbers, the same
totals at every level) and each level gets the statistics its rows read, summed from a lower
level where they are published only there. It imports the catalogue and the spec's items, and
:mod:`invariants.compile` imports it.
"""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from hierarchy.geography import Geography
from hierarchy.schema import Schema
from invariants.catalogue import CONSTRAINTS, STATISTICS, SpecView, needed_statistics
from invariants.errors import SpecError
from invariants.items import Constraint

__all__ = ["resolve_statistics"]


def resolve_statistics(spec: SpecView, schema: Schema, geography: Geography,
                       published: Mapping[str, Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """The exact statistics each level's constraints need, validated and consistent.

    ``tot`` must be published at every level where the ``tot`` invariant is declared. Units data
    (``gqhh``) at a level comes from that level if published there, otherwise it is the sum of
    the nearest lower level where ``gqhh_vect`` is declared and published.

    Parameters
    ----------
    spec, schema, geography, published
        As in :func:`compile_spec`.

    Returns
    -------
    dict level → (dict statistic → int64 array)
        The statistics each level's rows read (every level of the geography is a key).

    Raises
    ------
    SpecError
        If data is missing, malformed (negative, not integral, wrong shape), or inconsistent
        across levels (a parent's value is not the sum of its children's), naming the unit.

    Examples
    --------
    The E2E spec publishes units data at the bottom level only; the levels above read its sums:

    >>> from invariants.spec import Spec
    >>> from hierarchy.schema import E2E_1940
    >>> geo, _ = Geography.from_columns(["nation", "state", "county"],
    ...                                 [[["01", "01", "02"], ["01001", "01003", "02001"]]])
    >>> gqhh = np.zeros((3, 8), np.int64); gqhh[:, 0] = [3, 1, 4]; gqhh[2, 6] = 1
    >>> published = {"nation": {"tot": np.array([30])}, "state": {"tot": np.array([12, 18])},
    ...              "county": {"gqhh": gqhh}}
    >>> stats = resolve_statistics(Spec.e2e(geo.levels), E2E_1940, geo, published)
    >>> {level: sorted(needed) for level, needed in stats.items()}
    {'nation': ['gqhh', 'tot'], 'state': ['gqhh', 'tot'], 'county': ['gqhh']}
    >>> stats["state"]["gqhh"].tolist()
    [[4, 0, 0, 0, 0, 0, 0, 0], [4, 0, 0, 0, 0, 0, 1, 0]]
    >>> published["nation"]["tot"] = np.array([31])
    >>> resolve_statistics(Spec.e2e(geo.levels), E2E_1940, geo, published)
    Traceback (most recent call last):
    ...
    invariants.errors.SpecError: invariant 'tot' is inconsistent across levels: nation '0' has 31
    but ...
    """
    levels = geography.levels
    spec.check_levels(levels)
    need = needed_statistics(spec, levels)
    declared = {stat: spec.invariant_levels(stat, levels) for stat in STATISTICS}
    # Data typed by the unit attribute is shaped (units, types) wherever declared or needed.
    n_types = None
    for stat, entry in STATISTICS.items():
        if entry.per_type and (declared[stat] or any(stat in s for s in need.values())):
            if spec.unit_attribute not in schema.names:
                raise SpecError(f"units data ({stat}) is typed by the spec's unit attribute "
                                f"{spec.unit_attribute!r}, which is not in the schema "
                                f"{list(schema.names)}")
            n_types = schema.attribute(spec.unit_attribute).size
    data: dict[str, dict[str, np.ndarray]] = {}
    for stat, entry in STATISTICS.items():
        for lv in declared[stat]:
            value = published.get(lv, {}).get(stat)
            if value is None:
                if not entry.summable or not any(
                        published.get(low, {}).get(stat) is not None
                        for low in levels[levels.index(lv):]):
                    name = entry.declared_by
                    raise SpecError(
                        f"invariant {name!r} is declared at level {lv!r} but no {stat!r} data was "
                        f"published there; publish it when measuring (measure(..., publish="
                        f"{{{stat!r}: [{lv!r}, ...]}})) or drop {lv!r} from the invariant's levels")
                continue
            arr = _check_statistic(np.asarray(value), stat, lv, geography, n_types)
            data.setdefault(lv, {})[stat] = arr
    # Consistency across declared levels: each declared level equals the sum of the next one.
    for stat in STATISTICS:
        have = [lv for lv in levels if stat in data.get(lv, {})]
        for upper_lv, lower_lv in zip(have, have[1:]):
            summed = geography.aggregate(data[lower_lv][stat], lower_lv, upper_lv)
            bad = np.flatnonzero(np.any((summed != data[upper_lv][stat]).reshape(
                summed.shape[0], -1), axis=1))
            if bad.size:
                u = bad[0]
                name = STATISTICS[stat].declared_by
                raise SpecError(
                    f"invariant {name!r} is inconsistent across levels: {upper_lv} "
                    f"{geography.geocodes[levels.index(upper_lv)][u]!r} has "
                    f"{_show(data[upper_lv][stat][u])} but its {lower_lv} units sum to "
                    f"{_show(summed[u])} ({bad.size} {upper_lv} unit(s) differ); the published "
                    "statistics must come from the same confidential data")
    resolved: dict[str, dict[str, np.ndarray]] = {lv: {} for lv in levels}
    for lv in levels:
        for stat in need[lv]:
            if stat in data.get(lv, {}):
                resolved[lv][stat] = data[lv][stat]
                continue
            entry = STATISTICS[stat]
            if not entry.summable:
                raise SpecError(
                    f"a constraint at level {lv!r} uses {entry.label} ({stat!r}) but the "
                    f"{entry.declared_by!r} invariant is not declared at {lv!r}; declare it or "
                    "remove the constraint there")
            below = [low for low in levels[levels.index(lv) + 1:] if stat in data.get(low, {})]
            if not below:
                users = sorted({c.name for c in spec.constraints
                                if lv in spec.levels_of(c, levels)
                                and stat in _statistics_used(c)})
                raise SpecError(
                    f"constraint(s) {users} at level {lv!r} need {entry.label} ({stat}) at "
                    f"{lv!r} or a level below, but {entry.declared_by!r} is not declared and "
                    f"published at any of them; declare {entry.declared_by} (e.g. at the bottom "
                    f"level) and publish {stat!r}")
            resolved[lv][stat] = geography.aggregate(data[below[0]][stat], below[0], lv)
    return resolved


def _statistics_used(c: Constraint) -> tuple[str, ...]:
    """The statistics a constraint reads (a catalogue constraint's, or a linear rhs's)."""
    if c.type == "catalogue":
        return CONSTRAINTS[c.name].needs
    ref = c.statistic_reference()
    return (ref[0],) if ref else ()


def _show(v: np.ndarray) -> str:
    v = np.asarray(v)
    return str(int(v)) if v.ndim == 0 else str(v.tolist())


def _check_statistic(arr: np.ndarray, stat: str, level: str, geography: Geography,
                     n_types: int | None) -> np.ndarray:
    n = geography.n_units(level)
    shape = (n,) if stat == "tot" else (n, n_types)
    if arr.shape != shape:
        raise SpecError(f"published {stat!r} at level {level!r} has shape {arr.shape}, expected "
                        f"{shape}")
    if arr.dtype.kind == "f":
        if not np.all(np.isfinite(arr)) or np.any(arr != np.round(arr)):
            raise SpecError(f"published {stat!r} at level {level!r} must hold whole numbers")
        arr = arr.astype(np.int64)
    if arr.dtype.kind not in "iu":
        raise SpecError(f"published {stat!r} at level {level!r} must be integers")
    if np.any(arr < 0):
        u = int(np.flatnonzero(np.any(arr.reshape(n, -1) < 0, axis=1))[0])
        raise SpecError(f"published {stat!r} at {level} "
                        f"{geography.geocodes[geography.level_index(level)][u]!r} is negative")
    return arr.astype(np.int64)
