"""Sums over sets of sibling units in the GLS: an unmeasured level of the groups, inserted above
them, holds each group's answers as an equality of its own.

A spec's sums (:class:`~invariants.sums.UnitSum`: a state's total over its two AIAN pieces) are
rows across units, and the GLS's tree problems hold equalities unit by unit. Inserting a level
between the sums' units and their parents — one unit per group, one per unit in no group, each
the sum of its children (the hierarchy's consistency) and measured by nothing — turns each
group's sum into an equality of one unit. The estimate of the original units is unchanged by the
extra unit (it adds a variable and an equation that defines it, and no measurement), so the
GLS of the augmented tree, less the inserted level, is the constrained GLS exactly
(``docs/gls.md``, "Sums over units"). The groups must be runs of consecutive children (the
reader puts a state's pieces next to each other); :class:`SkippedLevels` answers for the
original levels from the augmented tree's covariance.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Mapping, Sequence

import numpy as np
import scipy.sparse as sp

from hierarchy.geography import Geography
from hierarchy.noisy import NoisyHierarchy
from invariants.compile import LevelConstraints
from postproc.errors import PostprocError

__all__ = ["with_sum_levels", "SkippedLevels"]


def with_sum_levels(noisy: NoisyHierarchy, compiled: Mapping[str, LevelConstraints]
                    ) -> tuple[NoisyHierarchy, dict[str, LevelConstraints], list[int]] | None:
    """The hierarchy with a level of groups inserted above every level that has sums, its
    compiled constraints (the groups' answers as equalities of the inserted units; the original
    levels' sums dropped) and the inserted levels' positions; ``None`` without sums.

    Raises
    ------
    PostprocError
        A group whose units are not consecutive children, or a unit in groups of two sums.

    Examples
    --------
    >>> from hierarchy.schema import Attribute, Schema
    >>> from hierarchy.queries import Workload
    >>> from invariants.compile import compile_spec
    >>> from invariants.spec import Spec, UnitSum
    >>> schema = Schema((Attribute("sex", ("m", "f")),))
    >>> geo, _ = Geography.from_columns(["nation", "state"], [[["a", "b", "c"]]])
    >>> spec = Spec(sums=[UnitSum("ab", "state", [["a", "b"]], [5])])
    >>> noisy = NoisyHierarchy(schema, geo, Workload.from_expressions(schema, {"d": "detailed"}),
    ...                        {}, {}, {})
    >>> augmented, compiled, inserted = with_sum_levels(noisy, compile_spec(spec, schema, geo,
    ...                                                                     {}))
    >>> augmented.levels, inserted, list(augmented.geography.geocodes[1])
    (('nation', 'state (sums)', 'state'), [1], ['a+b', 'c'])
    >>> compiled["state (sums)"].lower.tolist()
    [[5.0], [-inf]]
    """
    geo = noisy.geography
    if not any(compiled[lv].sums for lv in geo.levels):
        return None
    levels, codes, parents = [], [], []
    out: dict[str, LevelConstraints] = {}
    inserted = []
    for li, lv in enumerate(geo.levels):
        lc = compiled[lv]
        parent = geo.parents[li]
        if lc.sums:
            name = f"{lv} (sums)"
            if name in geo.levels:
                raise PostprocError(f"gls: a level is already named {name!r}")
            group_codes, group_parents, child_parent, bounds, matrix, labels = _groups(
                geo, li, lc, noisy.schema.size)
            levels.append(name)
            codes.append(group_codes)
            parents.append(group_parents)
            inserted.append(len(levels) - 1)
            out[name] = LevelConstraints(
                name, group_codes, matrix, bounds, bounds.copy(), labels,
                np.zeros((1, noisy.schema.size), bool), np.zeros(group_codes.size, np.int64))
            parent = child_parent
            lc = replace(lc, sums=())
        levels.append(lv)
        codes.append(geo.geocodes[li])
        parents.append(parent)
        out[lv] = lc
    augmented = Geography(tuple(levels), tuple(codes), tuple(parents))
    invariants = {lv: dict(noisy.invariants.get(lv, {})) for lv in levels}
    return (NoisyHierarchy(noisy.schema, augmented, noisy.workload, dict(noisy.measurements),
                           invariants, dict(noisy.provenance)), out, inserted)


def _groups(geo: Geography, li: int, lc: LevelConstraints, cells: int):
    """A level's groups as the units of the level inserted above it: their geocodes and
    parents, each original unit's group, and the groups' rows (every sum's query, bounded at
    its values for that sum's groups, free elsewhere)."""
    k = geo.n_units(li)
    group = np.full(k, -1, np.int64)
    held: list[tuple[Any, int]] = []
    for s in lc.sums:
        for g, units in enumerate(s.units):
            units = np.sort(units)
            if (group[units] >= 0).any():
                raise PostprocError(f"gls: a {lc.level} unit is in groups of two sums; "
                                    "their groups must not overlap")
            if np.any(np.diff(units) != 1):
                raise PostprocError(
                    f"gls: the units of {s.labels[g][0].rsplit(':', 1)[0]!r} are not "
                    "consecutive children; gls holds a sum over a run of siblings")
            group[units] = len(held)
            held.append((s, g))
    first = np.ones(k, bool)
    first[1:] = (group[1:] < 0) | (group[1:] != group[:-1])
    child_parent = np.cumsum(first) - 1
    starts = np.flatnonzero(first)
    ends = np.append(starts[1:], k)
    names = np.array(["+".join(str(c) for c in geo.geocodes[li][a:b])
                      for a, b in zip(starts, ends)], dtype=object)
    rows = [sp.csr_matrix(s.matrix, dtype=np.int64) for s in lc.sums]
    offsets = np.cumsum([0] + [m.shape[0] for m in rows])
    bounds = np.full((starts.size, int(offsets[-1])), -np.inf)
    which = {id(s): i for i, s in enumerate(lc.sums)}
    for v, a in enumerate(starts):
        if group[a] >= 0:
            s, g = held[group[a]]
            i = which[id(s)]
            bounds[v, offsets[i]:offsets[i + 1]] = s.values[g]
    labels = tuple(f"{s.name}: answer {a}" for s in lc.sums for a in range(s.matrix.shape[0]))
    return (names, geo.parents[li][starts], child_parent, bounds,
            sp.vstack(rows).tocsr() if rows else sp.csr_matrix((0, cells), dtype=np.int64),
            labels)


class SkippedLevels:
    """The covariance of a GLS fit on an augmented tree (:func:`with_sum_levels`), answering
    for the original levels: every method that takes a level maps it past the inserted ones;
    the rest is the fit's (``inner``).

    Examples
    --------
    >>> class Fit:
    ...     def variances(self, level, matrix):
    ...         return level
    >>> SkippedLevels(Fit(), [1]).variances(1, None), SkippedLevels(Fit(), [1]).level_of(0)
    (2, 0)
    """

    def __init__(self, inner: Any, inserted: Sequence[int]):
        self.inner = inner
        self.inserted = sorted(int(i) for i in inserted)

    def level_of(self, level: int) -> int:
        """The augmented tree's index of the original ``level``."""
        out = int(level)
        for i in self.inserted:
            if i <= out:
                out += 1
        return out

    def variances(self, level: int, matrix: Any) -> np.ndarray:
        return self.inner.variances(self.level_of(level), matrix)

    def sum_variances(self, level: int, rows: np.ndarray) -> np.ndarray:
        return self.inner.sum_variances(self.level_of(level), rows)

    def subtree_means(self, level: int) -> np.ndarray:
        return self.inner.subtree_means(self.level_of(level))

    def subtree_ids(self, level: int) -> np.ndarray:
        return self.inner.subtree_ids(self.level_of(level))

    def covariance(self, level: int, unit: int) -> np.ndarray:
        return self.inner.covariance(self.level_of(level), unit)

    def covariance_ids(self, level: int) -> np.ndarray:
        return self.inner.covariance_ids(self.level_of(level))

    def __getattr__(self, name: str) -> Any:
        return getattr(self.__dict__["inner"], name)
