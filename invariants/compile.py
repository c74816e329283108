"""Compiling a :class:`~invariants.spec.Spec` into constraint data, level by level.

For each level the spec compiles once into a :class:`LevelConstraints`: one sparse integer matrix
``C`` (rows = constraint rows over the schema's cells, shared by every unit of the level), per-unit
bounds ``lower ≤ C x_u ≤ upper`` and per-unit zero cells. Everything a post-processor needs for one
parent's problem is then a slice of the children's rows:

* :func:`node_cvxpy_constraints` — CVXPY constraints vectorized over the children (a handful of
  constraint objects per node, never one per child per cell);
* :func:`node_matrices` — ``(A, a, B, b)`` meaning ``A s = a, B s ≥ b`` for samplers;
* :func:`violations` — exact integer verification of a result against every promise.

This module never calls a solver (CVXPY is imported only to build expressions).

Examples
--------
>>> import numpy as np
>>> from hierarchy.schema import E2E_1940
>>> from hierarchy.geography import Geography
>>> from invariants.spec import Spec
>>> geo, _ = Geography.from_columns(["nation", "state"], [[["01", "02"]]])
>>> gqhh = np.zeros((2, 8), np.int64); gqhh[:, 0] = [3, 4]
>>> published = {"nation": {"tot": np.array([20])}, "state": {"tot": np.array([9, 11]),
...              "gqhh": gqhh}}
>>> compiled = compile_spec(Spec.e2e(["nation", "state"]), E2E_1940, geo, published)
>>> lc = compiled["state"]
>>> lc.matrix.shape[1], int(lc.zero[0].sum())      # hhgq types 1-7 have no units: zero cells
(192, 168)
>>> x = np.zeros((2, 192), np.int64); x[0, 0] = 9; x[1, 5] = 11
>>> violations(lc, x)
[]
>>> x[1, 5] = 10; violations(lc, x)[0]
"state '02': tot & total_ge_households: total = 10, must be == 11"
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Mapping, Sequence

import numpy as np
import scipy.sparse as sp

from hierarchy.errors import ConfidentialDataError, HierarchyError
from hierarchy.geography import Geography
from hierarchy.queries import parse_query, sparse_copy
from hierarchy.schema import Schema
from invariants.catalogue import CONSTRAINTS, INVARIANTS, STATISTICS, Rows, needed_statistics
from invariants.errors import SpecError

if TYPE_CHECKING:     # annotations only: invariants.spec imports this module (Spec.check_data)
    from invariants.spec import Constraint, Spec

__all__ = ["LevelConstraints", "compile_spec", "resolve_statistics", "node_cvxpy_constraints",
           "node_matrices", "violations", "check_violations", "data_violations", "check_data"]


@dataclass(frozen=True, eq=False)
class LevelConstraints:
    """The compiled constraints of one level.

    Attributes
    ----------
    level : str
    geocodes : array of str
        Units of the level (for messages).
    matrix : scipy.sparse.csr_matrix, int64, shape (rows, cells)
        Constraint rows, shared by every unit of the level.
    lower, upper : float64 arrays, shape (units, rows)
        Bounds per unit; ``-inf`` / ``+inf`` where a side is free; equal for equalities. Finite
        bounds are integers.
    labels : tuple of str
        What each row is (constraint name and answer), for messages and manifests.
    zero_patterns : bool array, shape (patterns, cells)
        The distinct sets of cells that must be 0 in a unit (structural zeros, and rows bounded
        above by 0). Units share them: at a 2020-style block level a few hundred patterns
        serve millions of blocks, where a dense units × cells array would take 16 GB.
    zero_index : int array, shape (units,), optional
        Each unit's pattern. Without it ``zero_patterns`` is one row per unit.
    zero : bool array, shape (units, cells)
        Every unit's zero cells, dense (computed on each access; for small levels — a node
        takes its children's with :meth:`rows_of`).

    Examples
    --------
    A state level of two units on a 4-cell schema (sex × age), with an exact total per unit and
    at least one adult each; the nation level also gets the sums of its states' rows:

    >>> from invariants.spec import Spec
    >>> from hierarchy.schema import Attribute, Schema
    >>> from invariants.spec import Constraint, Invariant
    >>> schema = Schema((Attribute("sex", ("male", "female")),
    ...                  Attribute("age", ("child", "adult"))))
    >>> geo = Geography(("nation", "state"), (["0"], ["01", "02"]), ([-1], [0, 0]))
    >>> spec = Spec([Invariant("tot", "all")], [Constraint(
    ...     "adults", "all", "linear", "marginal(age)", [1], ">=", 1)])
    >>> compiled = compile_spec(spec, schema, geo, {"nation": {"tot": [7]},
    ...                                              "state": {"tot": [3, 4]}})
    >>> state = compiled["state"]
    >>> state.n_units, state.labels
    (2, ('tot: total', 'adults: adult'))
    >>> state.matrix.toarray().tolist()
    [[1, 1, 1, 1], [0, 1, 0, 1]]
    >>> state.lower.tolist(), state.upper.tolist()
    ([[3.0, 1.0], [4.0, 1.0]], [[3.0, inf], [4.0, inf]])
    >>> compiled["nation"].constraint_names()
    ['tot', 'tot (implied by state)', 'adults', 'adults (implied by state)']
    """

    level: str
    geocodes: np.ndarray
    matrix: sp.csr_matrix
    lower: np.ndarray
    upper: np.ndarray
    labels: tuple[str, ...]
    zero_patterns: np.ndarray
    zero_index: np.ndarray | None = None

    def __post_init__(self):
        if self.zero_index is None:
            object.__setattr__(self, "zero_index", np.arange(self.zero_patterns.shape[0]))

    @property
    def zero(self) -> np.ndarray:
        return self.zero_patterns[self.zero_index]

    @property
    def n_zero_cells(self) -> int:
        """How many (unit, cell) pairs are forced to 0, without building the dense array."""
        per_pattern = self.zero_patterns.sum(axis=1)
        return int(per_pattern[self.zero_index].sum()) if per_pattern.size else 0

    @property
    def n_units(self) -> int:
        return int(self.lower.shape[0])

    @property
    def n_rows(self) -> int:
        return int(self.matrix.shape[0])

    def rows_of(self, units: slice | np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(lower, upper, zero)`` of a set of units (e.g. a parent's children)."""
        return self.lower[units], self.upper[units], self.zero_patterns[self.zero_index[units]]

    def constraint_names(self) -> list[str]:
        """The invariants and constraints behind the rows, e.g. ``['tot', 'hhgq_total_lb (implied
        by enum_dist)']``."""
        names: dict[str, None] = {}
        for lab in self.labels:
            for part in _split_label(lab)[0]:
                names[part] = None
        return list(names)


# -- statistics ---------------------------------------------------------------------------------

def resolve_statistics(spec: Spec, schema: Schema, geography: Geography,
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
    invariants.errors.SpecError: invariant 'tot' is inconsistent across levels: nation '0' has 31 but ...
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


# -- row blocks ---------------------------------------------------------------------------------

def _answers(q, answers: tuple[int, ...] | None, c: Constraint, where: str):
    m = q.matrix
    labels = [", ".join(lab) if lab else "total" for lab in q.answer_labels]
    if answers is None:
        return m, labels, np.arange(q.n_answers)
    bad = [a for a in answers if a >= q.n_answers]
    if bad:
        raise SpecError(f"{where}constraint {c.name!r}: answers {bad} out of range; its query "
                        f"{c.query!r} has {q.n_answers} answers (0..{q.n_answers - 1})")
    idx = np.asarray(answers)
    return m[idx], [labels[i] for i in idx], idx


def _user_block(c: Constraint, schema: Schema, stats: Mapping[str, np.ndarray], n_units: int
                ) -> Rows:
    where = f"{c.source}, line {c.line}: " if c.source and c.line else ""
    try:
        q = parse_query(c.query, schema)
    except HierarchyError as exc:  # re-raise naming the constraint
        raise SpecError(f"{where}constraint {c.name!r}: bad query {c.query!r}: {exc}") from None
    m, labels, idx = _answers(q, c.answers, c, where)
    labels = [f"{c.name}: {lab}" for lab in labels]
    r = m.shape[0]
    if c.type == "structural_zero":
        z = np.zeros((n_units, r))
        return Rows(m, z, z.copy(), labels)
    ref = c.statistic_reference()
    if ref is None:
        rhs = np.broadcast_to(np.asarray(c.rhs, dtype=np.float64), (r,)) if not isinstance(
            c.rhs, tuple) or len(c.rhs) == r else None
        if rhs is None:
            raise SpecError(f"{where}constraint {c.name!r}: rhs has {len(c.rhs)} values for {r} "
                            "answers")
        rhs = np.broadcast_to(rhs, (n_units, r)).astype(np.float64)
    else:
        stat, index = ref
        value = stats[stat]
        if stat == "tot":
            rhs = np.repeat(value[:, None].astype(np.float64), r, axis=1)
        elif index is not None:
            if index >= value.shape[1]:
                raise SpecError(f"{where}constraint {c.name!r}: gqhh[{index}] is out of range "
                                f"(gqhh has {value.shape[1]} types)")
            rhs = np.repeat(value[:, index:index + 1].astype(np.float64), r, axis=1)
        else:
            if value.shape[1] != r:
                raise SpecError(f"{where}constraint {c.name!r}: rhs 'gqhh' has {value.shape[1]} "
                                f"values per unit but the constraint has {r} answers")
            rhs = value.astype(np.float64)
    # Query rows have integer coefficients and histograms are integers, so a fractional bound
    # tightens to the integer inside it (total ≥ 2.5 means total ≥ 3). Finite bounds must be
    # integers: verification compares them in int64.
    lower = np.ceil(rhs) if c.sense in ("==", ">=") else np.full_like(rhs, -np.inf)
    upper = np.floor(rhs) if c.sense in ("==", "<=") else np.full_like(rhs, np.inf)
    return Rows(m, np.array(lower), np.array(upper), labels)


def _merge(blocks: Sequence[Rows], n_units: int, n_cells: int
           ) -> tuple[sp.csr_matrix, np.ndarray, np.ndarray, tuple[str, ...]]:
    """Stack blocks; identical rows become one row with the intersection of their bounds."""
    if not blocks:
        return (sp.csr_matrix((0, n_cells), dtype=np.int64), np.zeros((n_units, 0)),
                np.zeros((n_units, 0)), ())
    rows: dict[tuple, int] = {}
    mats, lowers, uppers, labels = [], [], [], []
    for b in blocks:
        mat = sp.csr_matrix(b.matrix, dtype=np.int64)
        for i in range(mat.shape[0]):
            start, stop = mat.indptr[i], mat.indptr[i + 1]
            key = (tuple(mat.indices[start:stop]), tuple(mat.data[start:stop]))
            if key in rows:
                j = rows[key]
                lowers[j] = np.maximum(lowers[j], b.lower[:, i])
                uppers[j] = np.minimum(uppers[j], b.upper[:, i])
                labels[j] = _merge_label(labels[j], b.labels[i])
            else:
                rows[key] = len(mats)
                mats.append(mat[i])
                lowers.append(b.lower[:, i].astype(np.float64))
                uppers.append(b.upper[:, i].astype(np.float64))
                labels.append(b.labels[i])
    return (sp.vstack(mats, format="csr").astype(np.int64), np.stack(lowers, axis=1),
            np.stack(uppers, axis=1), tuple(labels))


def _split_label(label: str) -> tuple[list[str], str]:
    """Row labels read 'name & name (implied by level): answer'; names never contain ': '."""
    names, _, what = label.partition(": ")
    return names.split(" & "), what


def _implied_label(label: str, child: str) -> str:
    """'c: what' → 'c (implied by child): what' (kept as is when already implied)."""
    names, what = _split_label(label)
    parts = [n if "(implied by" in n else f"{n} (implied by {child})" for n in names]
    return f"{' & '.join(parts)}: {what}"


def _merge_label(a: str, b: str) -> str:
    """'x: total' + 'y: total' → 'x & y: total'; differing answers are both kept."""
    names_a, what_a = _split_label(a)
    names_b, what_b = _split_label(b)
    what = what_a if what_a == what_b else f"{what_a} (= {what_b})"
    return f"{' & '.join(dict.fromkeys(names_a + names_b))}: {what}"


def _zero_cells(matrix: sp.csr_matrix, upper: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Cells forced to 0 — covered by a row with nonnegative coefficients bounded above by 0 —
    per distinct set of such rows: ``(patterns × cells bool, each unit's pattern)``."""
    nonneg = np.asarray((matrix.minimum(0) != 0).sum(axis=1)).ravel() == 0
    distinct, index = _group_rows((upper <= 0) & nonneg[None, :])
    support = (matrix != 0).astype(np.int64)
    patterns = (sp.csr_matrix(distinct.astype(np.int64)) @ support).toarray() > 0
    return patterns, index.astype(np.int64)


def _group_rows(flags: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Distinct rows of a bool matrix: ``(unique rows, inverse)`` (rows packed to bytes)."""
    packed = np.packbits(flags, axis=1)
    if packed.shape[1] <= 8:
        keys = np.zeros((packed.shape[0], 8), dtype=np.uint8)
        keys[:, :packed.shape[1]] = packed
        _, first, inverse = np.unique(keys.view(np.uint64).ravel(), return_index=True,
                                      return_inverse=True)
    else:
        _, first, inverse = np.unique(packed, axis=0, return_index=True, return_inverse=True)
    return flags[first], inverse.ravel()


def compile_spec(spec: Spec, schema: Schema, geography: Geography,
                 published: Mapping[str, Mapping[str, Any]]) -> dict[str, LevelConstraints]:
    """Compile a spec for every level of the geography, after validating it and its data.

    Parameters
    ----------
    spec : Spec
    schema : Schema
    geography : Geography
    published : mapping level → (mapping statistic → array)
        Exact statistics published as invariants (``NoisyHierarchy.invariants``).

    Returns
    -------
    dict level → LevelConstraints

    Raises
    ------
    SpecError
        Unknown levels or names, missing or inconsistent invariant data, bad queries, or a unit
        whose constraints contradict each other (naming the unit and the constraints).

    Examples
    --------
    A spec with the ``tot`` invariant at every level and a structural zero (no female child:
    cell 2 of the detailed histogram), on a 4-cell schema:

    >>> from invariants.spec import Spec
    >>> from hierarchy.schema import Attribute, Schema
    >>> spec = Spec.from_toml_string('''
    ... [[invariant]]
    ... name = "tot"
    ... levels = "all"
    ... [[constraint]]
    ... name = "no_girls"
    ... type = "structural_zero"
    ... query = "detailed"
    ... answers = [2]
    ... ''', source="spec.toml")
    >>> schema = Schema((Attribute("sex", ("male", "female")), Attribute("age", ("0-17", "18+"))))
    >>> geo, _ = Geography.from_columns(["nation", "state"], [[["01", "02", "03"]]])
    >>> published = {"nation": {"tot": [9]}, "state": {"tot": [3, 4, 2]}}
    >>> compiled = compile_spec(spec, schema, geo, published)
    >>> list(compiled), compiled["state"].zero[0].astype(int).tolist()
    (['nation', 'state'], [0, 0, 1, 0])
    >>> compile_spec(spec, schema, geo, {"nation": {"tot": [9]}})
    Traceback (most recent call last):
    ...
    invariants.errors.SpecError: invariant 'tot' is declared at level 'state' but no 'tot' data ...
    """
    levels = geography.levels
    if spec.unit_attribute not in schema.names and any(
            c.type == "catalogue" for c in spec.constraints):
        raise SpecError(f"the spec's unit attribute {spec.unit_attribute!r} is not in the schema "
                        f"{list(schema.names)}")
    stats = resolve_statistics(spec, schema, geography, published)
    compiled: dict[str, LevelConstraints] = {}
    raw: dict[str, tuple] = {}
    for li, lv in enumerate(levels):
        n = geography.n_units(lv)
        blocks = [INVARIANTS[inv.name].rows(schema, spec, stats[lv]) for inv in spec.invariants
                  if INVARIANTS[inv.name].rows is not None and lv in spec.levels_of(inv, levels)]
        for c in spec.constraints:
            if lv not in spec.levels_of(c, levels):
                continue
            if c.type == "catalogue":
                blocks.append(CONSTRAINTS[c.name].rows(schema, spec, stats[lv]))
            else:
                blocks.append(_user_block(c, schema, stats[lv], n))
        raw[lv] = (blocks, n)
    # Implied constraints: bottom-up, each parent gets the sums of its children's rows.
    merged: dict[str, tuple] = {}
    for li in range(len(levels) - 1, -1, -1):
        lv = levels[li]
        blocks, n = raw[lv]
        if spec.imply_upward and li + 1 < len(levels):
            child = levels[li + 1]
            cm, clo, chi, clab = merged[child]
            if cm.shape[0]:
                lo = geography.aggregate(np.where(np.isinf(clo), np.nan, clo), child, lv)
                hi = geography.aggregate(np.where(np.isinf(chi), np.nan, chi), child, lv)
                lo = np.where(np.isnan(lo), -np.inf, lo)
                hi = np.where(np.isnan(hi), np.inf, hi)
                labels = [_implied_label(lab, child) for lab in clab]
                blocks = list(blocks) + [Rows(cm, lo, hi, labels)]
        merged[lv] = _merge(blocks, n, schema.size)
    for li, lv in enumerate(levels):
        matrix, lower, upper, labels = merged[lv]
        codes = geography.geocodes[li]
        # Rows with nonnegative coefficients count persons: they are never below 0.
        nonneg = np.asarray((matrix.minimum(0) != 0).sum(axis=1)).ravel() == 0
        floor = np.where(nonneg[None, :], np.maximum(lower, 0.0), lower)
        bad = floor > upper
        if bad.any():
            u, r = np.argwhere(bad)[0]
            raise SpecError(
                f"{lv} {codes[u]!r}: constraints contradict each other: {labels[r]} needs "
                f"{floor[u, r]:g} ≤ value ≤ {upper[u, r]:g}; check the invariant data of this "
                "unit (e.g. more housing units than persons allowed by the total)")
        patterns, index = _zero_cells(matrix, upper)
        positive_lower = (lower > 0)
        if positive_lower.any():
            support = (matrix > 0).astype(np.int64)
            open_cells = (sp.csr_matrix((~patterns).astype(np.int64)) @ support.T).toarray()
            dead = positive_lower & (open_cells[index] == 0)
            if dead.any():
                u, r = np.argwhere(dead)[0]
                raise SpecError(f"{lv} {codes[u]!r}: {labels[r]} needs at least "
                                f"{lower[u, r]:g} but every cell it counts is forced to 0")
        compiled[lv] = LevelConstraints(lv, codes, matrix, lower, upper, labels, patterns,
                                          index)
    return compiled


# -- consumers ----------------------------------------------------------------------------------

def node_cvxpy_constraints(X, lc: LevelConstraints, children: slice | np.ndarray,
                           parent: np.ndarray | None = None) -> list:
    """CVXPY constraints for a node problem with variable ``X`` (children × cells).

    Vectorized over the children: parent consistency, equality rows, lower rows, upper rows,
    nonnegativity and zero cells are each one constraint object.

    Parameters
    ----------
    X : cvxpy Variable or expression, shape (children, cells)
    lc : LevelConstraints
        The compiled constraints of the children's level.
    children : slice or int array
        Which units of that level are the children (``Geography.child_offsets``).
    parent : array of shape (cells,), optional
        The parent's histogram the children must sum to.

    Returns
    -------
    list of cvxpy constraints

    Examples
    --------
    A least-squares fit of two states' noisy histograms (sex × age) to their exact totals and
    their nation's histogram:

    >>> from invariants.spec import Spec
    >>> import cvxpy as cp
    >>> from hierarchy.schema import Attribute, Schema
    >>> from invariants.spec import Invariant
    >>> schema = Schema((Attribute("sex", ("male", "female")),
    ...                  Attribute("age", ("child", "adult"))))
    >>> geo = Geography(("nation", "state"), (["0"], ["01", "02"]), ([-1], [0, 0]))
    >>> lc = compile_spec(Spec([Invariant("tot", "state")]), schema, geo,
    ...                   {"state": {"tot": [3, 4]}})["state"]
    >>> X = cp.Variable((2, 4))
    >>> constraints = node_cvxpy_constraints(X, lc, slice(0, 2), parent=np.array([2, 2, 1, 2]))
    >>> len(constraints)         # X ≥ 0, children sum to the parent, totals
    3
    >>> noisy = np.array([[1.5, 0.5, 0.2, 1.0], [0.0, 2.5, 1.4, 0.8]])
    >>> problem = cp.Problem(cp.Minimize(cp.sum_squares(X - noisy)), constraints)
    >>> problem.solve() is not None, problem.status
    (True, 'optimal')
    >>> X.value.sum(axis=1).round(6), X.value.sum(axis=0).round(6)
    (array([3., 4.]), array([2., 2., 1., 2.]))
    """
    import cvxpy as cp

    lower, upper, zero = lc.rows_of(children)
    cons = [X >= 0]
    if zero.any():
        cons.append(cp.multiply(zero.astype(float), X) == 0)
    if parent is not None:
        cons.append(cp.sum(X, axis=0) == np.asarray(parent, dtype=float))
    if lc.n_rows:
        CX = X @ lc.matrix.T.astype(float)
        eq = np.isfinite(lower) & (lower == upper)
        lo = np.isfinite(lower) & ~eq
        hi = np.isfinite(upper) & ~eq
        if eq.any():
            cons.append(cp.multiply(eq.astype(float), CX) == np.where(eq, lower, 0.0))
        if lo.any():
            cons.append(cp.multiply(lo.astype(float), CX) >= np.where(lo, lower, 0.0))
        if hi.any():
            cons.append(cp.multiply(hi.astype(float), CX) <= np.where(hi, upper, 0.0))
    return cons


def node_matrices(lc: LevelConstraints, children: slice | np.ndarray,
                  parent: np.ndarray | None = None
                  ) -> tuple[sp.csr_matrix, np.ndarray, sp.csr_matrix, np.ndarray]:
    """``(A, a, B, b)`` with ``A s = a`` and ``B s ≥ b`` for ``s`` = the children's histograms
    stacked row-major (child 0's cells, then child 1's, …).

    Equalities: parent consistency (if ``parent`` is given), equality rows, zero cells.
    Inequalities: finite lower rows, negated finite upper rows, nonnegativity.

    Parameters
    ----------
    lc : LevelConstraints
        The compiled constraints of the children's level.
    children : slice or int array
        Which units of that level are the children.
    parent : int array of shape (cells,), optional
        The parent's histogram the children must sum to.

    Returns
    -------
    A : scipy.sparse.csr_matrix, int64
    a : int64 array
    B : scipy.sparse.csr_matrix, int64
    b : int64 array

    Examples
    --------
    Two tracts of a county on a 3-cell schema, each with an exact total and at most 2 persons
    aged 65+:

    >>> from invariants.spec import Spec
    >>> from hierarchy.schema import Attribute, Schema
    >>> from invariants.spec import Constraint, Invariant
    >>> schema = Schema((Attribute("age", ("0-17", "18-64", "65+")),))
    >>> geo, _ = Geography.from_columns(["county", "tract"], [[["A", "B"]]])
    >>> spec = Spec([Invariant("tot", "tract")],
    ...             [Constraint("few_seniors", "tract", "linear", "detailed", [2], "<=", 2)])
    >>> lc = compile_spec(spec, schema, geo, {"tract": {"tot": [5, 4]}})["tract"]
    >>> A, a, B, b = node_matrices(lc, slice(0, 2), parent=np.array([3, 4, 2]))
    >>> A.toarray()                         # 3 parent cells, then the 2 totals
    array([[1, 0, 0, 1, 0, 0],
           [0, 1, 0, 0, 1, 0],
           [0, 0, 1, 0, 0, 1],
           [1, 1, 1, 0, 0, 0],
           [0, 0, 0, 1, 1, 1]])
    >>> a
    array([3, 4, 2, 5, 4])
    >>> B.shape, b.tolist()                 # 6 nonnegativity rows, then -(65+) ≥ -2 per tract
    ((8, 6), [0, 0, 0, 0, 0, 0, -2, -2])
    >>> s = np.array([1, 3, 1, 2, 1, 1])    # tract A: 1, 3, 1; tract B: 2, 1, 1
    >>> bool((A @ s == a).all() and (B @ s >= b).all())
    True
    """
    lower, upper, zero = lc.rows_of(children)
    k, n = zero.shape
    eye_k = sp.identity(k, format="csr", dtype=np.int64)
    big_c = sp.kron(eye_k, lc.matrix, format="csr")
    lo, hi = lower.ravel(), upper.ravel()
    eq = np.isfinite(lo) & (lo == hi)
    A_parts, a_parts = [], []
    if parent is not None:
        A_parts.append(sp.kron(np.ones((1, k), dtype=np.int64),
                               sp.identity(n, dtype=np.int64), format="csr"))
        a_parts.append(np.asarray(parent, dtype=np.int64))
    if eq.any():
        A_parts.append(big_c[np.flatnonzero(eq)])
        a_parts.append(lo[eq].astype(np.int64))
    zflat = np.flatnonzero(zero.ravel())
    if zflat.size:
        A_parts.append(sp.identity(k * n, format="csr", dtype=np.int64)[zflat])
        a_parts.append(np.zeros(zflat.size, dtype=np.int64))
    B_parts = [sp.identity(k * n, format="csr", dtype=np.int64)]
    b_parts = [np.zeros(k * n, dtype=np.int64)]
    lo_rows = np.flatnonzero(np.isfinite(lo) & ~eq)
    hi_rows = np.flatnonzero(np.isfinite(hi) & ~eq)
    if lo_rows.size:
        B_parts.append(big_c[lo_rows])
        b_parts.append(lo[lo_rows].astype(np.int64))
    if hi_rows.size:
        B_parts.append(-big_c[hi_rows])
        b_parts.append(-hi[hi_rows].astype(np.int64))
    A = (sp.vstack(A_parts, format="csr") if A_parts
         else sp.csr_matrix((0, k * n), dtype=np.int64))
    a = np.concatenate(a_parts) if a_parts else np.zeros(0, dtype=np.int64)
    return A, a, sp.vstack(B_parts, format="csr"), np.concatenate(b_parts)


def violations(lc: LevelConstraints, histograms: np.ndarray, units: slice | np.ndarray
               | None = None, *, limit: int = 10, sparse: sp.spmatrix | None = None
               ) -> list[str]:
    """Every broken promise of integer ``histograms`` (units × cells), in exact integer
    arithmetic: negative cells, nonzero zero-cells, rows outside their bounds.

    Parameters
    ----------
    lc : LevelConstraints
    histograms : int array, shape (units, cells)
        Histograms of the units ``units`` selects, in that order.
    units : slice or int array, optional
        Which units of the level the rows of ``histograms`` are (default: all of them).
    limit : int, optional
        At most this many messages (default 10).
    sparse : scipy.sparse matrix, optional
        ``histograms``' :func:`~hierarchy.queries.sparse_copy`, when the caller has one (made
        here otherwise, when the histograms are mostly empty). The cells are then checked
        where they are not 0 — the only cells that can be negative or break a zero — rather
        than over units × cells (a part's blocks: 40M cells, 1 % of them nonzero).

    Returns
    -------
    list of str
        One message per broken promise, naming the unit; empty when every promise holds.

    Raises
    ------
    SpecError
        If ``histograms`` are not integers.

    Examples
    --------
    >>> from invariants.spec import Spec
    >>> from hierarchy.schema import Attribute, Schema
    >>> from invariants.spec import Constraint, Invariant
    >>> schema = Schema((Attribute("sex", ("male", "female")),
    ...                  Attribute("age", ("child", "adult"))))
    >>> geo, _ = Geography.from_columns(["nation", "state"], [[["01", "02"]]])
    >>> spec = Spec([Invariant("tot", "state")],
    ...             [Constraint("adults", "state", "linear", "marginal(age)", [1], ">=", 1)])
    >>> lc = compile_spec(spec, schema, geo, {"state": {"tot": [3, 4]}})["state"]
    >>> violations(lc, np.array([[1, 1, 0, 1], [1, 1, 1, 1]]))
    []
    >>> for problem in violations(lc, np.array([[1, 1, 0, 0], [3, 0, 1, 0]])):
    ...     print(problem)
    state '01': tot: total = 2, must be == 3
    state '02': adults: adult = 0, must be >= 1
    >>> violations(lc, np.array([[3, 0, 1, 0]]), units=[1])
    ["state '02': adults: adult = 0, must be >= 1"]
    >>> violations(lc, np.ones((2, 4)))
    Traceback (most recent call last):
    ...
    invariants.errors.SpecError: verification needs integer histograms
    """
    x = np.asarray(histograms)
    if x.dtype.kind not in "iu":
        raise SpecError("verification needs integer histograms")
    x = x.astype(np.int64, copy=False)
    units = slice(None) if units is None else units
    codes = lc.geocodes[units]
    if sparse is None:
        sparse = sparse_copy(x)
    if sparse is None:
        lower, upper, zero = lc.rows_of(units)
        neg = np.argwhere(x < 0)
        nz = np.argwhere(zero & (x != 0))
    else:       # the nonzero cells, in the row-major order of argwhere
        sparse = sp.csr_matrix(sparse)
        sparse.sum_duplicates()
        lower, upper = lc.lower[units], lc.upper[units]
        rows = np.repeat(np.arange(sparse.shape[0]), np.diff(sparse.indptr))
        cells, data = sparse.indices, sparse.data
        forced = lc.zero_patterns[lc.zero_index[units][rows], cells] & (data != 0)
        neg = np.column_stack([rows[data < 0], cells[data < 0]])
        nz = np.column_stack([rows[forced], cells[forced]])
    out: list[str] = []
    for u, j in neg[:limit]:
        out.append(f"{lc.level} {codes[u]!r}: cell {j} is negative ({x[u, j]})")
    for u, j in nz[:limit]:
        out.append(f"{lc.level} {codes[u]!r}: cell {j} must be 0, is {x[u, j]}")
    if lc.n_rows:
        # exact either way (int64 × int64); a mostly empty level (a part's blocks) is
        # multiplied from a sparse copy, the transposed dense product copying every cell
        vals = (lc.matrix @ x.T).T if sparse is None else (sparse @ lc.matrix.T).toarray()
        # Finite bounds are integral; compare in int64 where finite.
        lo_bad = np.isfinite(lower) & (vals < np.where(np.isfinite(lower), lower, 0).astype(
            np.int64))
        hi_bad = np.isfinite(upper) & (vals > np.where(np.isfinite(upper), upper, 0).astype(
            np.int64))
        for u, r in np.argwhere(lo_bad | hi_bad)[:limit]:
            if lower[u, r] == upper[u, r]:
                need = f"must be == {int(lower[u, r])}"
            elif lo_bad[u, r]:
                need = f"must be >= {int(lower[u, r])}"
            else:
                need = f"must be <= {int(upper[u, r])}"
            name, _, what = lc.labels[r].partition(": ")
            out.append(f"{lc.level} {codes[u]!r}: {name}: {what} = {int(vals[u, r])}, {need}")
    return out[:limit]


def data_violations(lc: LevelConstraints, histograms: np.ndarray) -> list[str]:
    """What of the spec confidential ``histograms`` (units × cells) break, without their values.

    One line per broken requirement: the constraint's name, how many units break it and one
    example unit — never a count, so the message can be shown where the data may not be.

    Examples
    --------
    >>> from hierarchy.schema import E2E_1940
    >>> from hierarchy.geography import Geography
    >>> from invariants.spec import Spec
    >>> geo, _ = Geography.from_columns(["nation", "state"], [[["01", "02"]]])
    >>> spec = Spec.from_dict({"constraint": [{"name": "no_adults", "type": "structural_zero",
    ...                        "query": "marginal(votingage)", "levels": "all"}]})
    >>> lc = compile_spec(spec, E2E_1940, geo, {})["state"]
    >>> x = np.zeros((2, 192), np.int64); x[1, 191] = 7
    >>> data_violations(lc, x)
    ["no_adults: 1 of 2 state units break it, e.g. '02'"]
    """
    codes = lc.geocodes
    return [f"{name}: {int(units.sum()):,} of {units.size:,} {lc.level} units break it, e.g. "
            f"{str(codes[np.flatnonzero(units)[0]])!r}"
            for name, units in _broken(lc, histograms).items()]


def _broken(lc: LevelConstraints, histograms: np.ndarray) -> dict[str, np.ndarray]:
    """Requirement name → which units (a boolean per unit) break it."""
    x = np.asarray(histograms).astype(np.int64)
    lower, upper, _ = lc.rows_of(slice(None))
    broken: dict[str, np.ndarray] = {}
    neg = (x < 0).any(axis=1)
    if neg.any():
        broken["negative counts"] = neg
    if lc.n_rows:
        vals = (lc.matrix @ x.T).T
        bad = (np.isfinite(lower) & (vals < np.where(np.isfinite(lower), lower, 0))) | (
            np.isfinite(upper) & (vals > np.where(np.isfinite(upper), upper, 0)))
        for r in np.flatnonzero(bad.any(axis=0)):
            name = lc.labels[r].partition(": ")[0]
            broken[name] = broken.get(name, np.zeros(x.shape[0], bool)) | bad[:, r]
    # zero cells are rows bounded above by 0, so a nonzero one is reported by its row's name
    return broken


_IMPLIED = re.compile(r" \(implied by [^)]*\)$")


def check_data(spec: Spec, truth: Any, published: Mapping[str, Mapping[str, Any]] | None = None,
               *, compiled: Mapping[str, LevelConstraints] | None = None) -> None:
    """Refuse confidential data that break ``spec``: no release could keep its constraints
    honestly (a structural zero the data contradict would be silently enforced).

    Parameters
    ----------
    spec : Spec
    truth : Hierarchy
        The tabulated confidential data.
    published : mapping level → (mapping statistic → array), optional
        The statistics published as invariants; default: those the spec declares, computed
        from ``truth``.
    compiled : mapping level → LevelConstraints, optional
        The spec compiled already on ``truth``'s geography (then ``published`` is not used).

    Raises
    ------
    ConfidentialDataError
        Naming every broken constraint. The full message adds, per level, how many units break
        it and one example unit; the public one names the constraints only.

    Examples
    --------
    >>> from invariants.spec import Spec
    >>> from hierarchy.histograms import Hierarchy
    >>> from hierarchy.schema import E2E_1940
    >>> from hierarchy.geography import Geography
    >>> geo, _ = Geography.from_columns(["nation", "state"], [[["01", "02"]]])
    >>> spec = Spec.from_dict({"constraint": [{"name": "no_adults", "type": "structural_zero",
    ...                        "query": "marginal(votingage)", "answers": [1]}]})
    >>> x = np.zeros((2, 192), np.int64); x[1, 191] = 7
    >>> truth = Hierarchy(E2E_1940, geo, (x.sum(axis=0, keepdims=True), x))
    >>> try:
    ...     check_data(spec, truth)
    ... except ConfidentialDataError as exc:
    ...     print(exc.public); print(exc)
    the confidential data break the spec, so no release could satisfy it (a structural zero or bound the data contradict): broken: no_adults; fix the spec (or the data) and rerun
    the confidential data break the spec, so no release could satisfy it (a structural zero or bound the data contradict):
      no_adults & no_adults (implied by state): 1 of 1 nation units break it, e.g. '0'
      no_adults: 1 of 2 state units break it, e.g. '02'
    fix the spec (or the data) and rerun
    >>> check_data(spec, Hierarchy(E2E_1940, geo, (np.zeros((1, 192)), np.zeros((2, 192)))))
    """
    if compiled is None:
        if published is None:
            from hierarchy.measurement import published_statistics, spec_statistics

            published = published_statistics(truth, spec_statistics(spec, truth.levels))
        compiled = compile_spec(spec, truth.schema, truth.geography, published)
    lines, names = [], {}
    for level in truth.levels:
        if level not in compiled:
            continue
        lc = compiled[level]
        broken = _broken(lc, truth.level_counts(level))
        for name, units in broken.items():
            lines.append(f"{name}: {int(units.sum()):,} of {units.size:,} {lc.level} units "
                         f"break it, e.g. {str(lc.geocodes[np.flatnonzero(units)[0]])!r}")
            names.update(dict.fromkeys(_IMPLIED.sub("", part) for part in name.split(" & ")))
    if lines:
        head = ("the confidential data break the spec, so no release could satisfy it (a "
                "structural zero or bound the data contradict):")
        fix = "fix the spec (or the data) and rerun"
        raise ConfidentialDataError(f"{head}\n  " + "\n  ".join(lines) + f"\n{fix}",
                                    public=f"{head} broken: {', '.join(names)}; {fix}")


def check_violations(lc: LevelConstraints, histograms: np.ndarray,
                     units: slice | np.ndarray | None = None) -> None:
    """Raise :class:`SpecError` listing violations, if any (see :func:`violations`).

    Examples
    --------
    One unit (a single-level geography) with an exact total of 5 persons:

    >>> from invariants.spec import Spec
    >>> from hierarchy.schema import Attribute, Schema
    >>> from invariants.spec import Invariant
    >>> schema = Schema((Attribute("sex", ("male", "female")), Attribute("age", ("0-17", "18+"))))
    >>> geo = Geography(("nation",), (["US"],), ([-1],))
    >>> lc = compile_spec(Spec([Invariant("tot")]), schema, geo, {"nation": {"tot": [5]}})["nation"]
    >>> check_violations(lc, np.array([[1, 2, 1, 1]]))      # silent when every promise holds
    >>> check_violations(lc, np.array([[1, 2, 1, 0]]))
    Traceback (most recent call last):
    ...
    invariants.errors.SpecError: result violates its constraints:
      nation 'US': tot: total = 4, must be == 5
    """
    found = violations(lc, histograms, units)
    if found:
        raise SpecError("result violates its constraints:\n  " + "\n  ".join(found))
