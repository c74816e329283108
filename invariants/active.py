"""Which cells a post-processor can change: the cells the compiled constraints leave free.

A unit's cell is *fixed* when it is 0 in every histogram that satisfies the unit's compiled
constraints (:class:`~invariants.compile.LevelConstraints`: ``x ≥ 0`` and
``lower ≤ C x ≤ upper``); every other cell is *active*. A post-processor that keeps every
constraint can only ever write 0 into a fixed cell, so noisy answers that count fixed cells
only cannot change its output (``docs/scale2020.md`` gives the argument and what it means for
measuring and accounting).

**What is proved, and how.** A row is a *counting row* when its coefficients are nonnegative
(every query row is: a person it counts can only raise it). For a counting row ``r`` with
finite upper bound ``U_r`` and a family ``D`` of counting rows whose supports are pairwise
disjoint, contained in ``r``'s, and whose coefficients are at most ``r``'s,

    U_r ≥ c_r·x = Σ_{s∈D} c_s·x + Σ_{j∈S} d_j x_j ≥ Σ_{s∈D} max(L_s, 0) + Σ_{j∈S} d_j x_j,

where ``S`` holds the cells of ``r`` outside every ``s`` and the cells where ``c_r`` exceeds
``c_s`` (each with ``d_j > 0``). When ``Σ max(L_s, 0) ≥ U_r`` every ``x_j``, ``j ∈ S``, is 0 in
every feasible histogram. ``D = ∅`` is the plain cap: a counting row bounded above by 0 fixes its
whole support — a structural zero; ``hhgq_total_ub`` for a unit type the unit has no housing
unit or facility of; ``tot`` = 0, which fixes every cell of the unit. A fixed cell is 0, so the
rules then run again on the remaining (open) cells of each row — a row with a negative
coefficient is read both ways and counts once its negative (or positive) cells are fixed — until
nothing new is fixed.

The rules are *sound* (a fixed cell is provably 0) and *conservative*: a cell they leave active
may still be fixed when only a combination of rows proves it (an infeasible unit, too, is
reported with active cells). For the catalogue constraints — a total, rows by unit type that
partition the cells, structural zeros — they are complete: every active cell can hold a person
(``docs/scale2020.md``). ``tests/test_active.py`` checks both against the LP maximum of each
cell.

**Parents.** In TopDown a child's cell is at most the parent's rounded cell, so a cell fixed in
the parent is 0 in every child: :meth:`ActiveCells.within` intersects each unit's active cells
with its parent's. That relies on exact parent consistency (TopDown's failsafe relaxes it).
For the PL 94 and E2E specs it adds nothing: a parent's rows are its own plus the sums of its
children's (``imply_upward``), and every cell they fix is already fixed in each child.

**Storage.** Units are grouped by their fixed cells; a level is stored as one pattern
index per unit and the distinct active sets (patterns × cells, sparse) — ``O(units + patterns ×
cells)`` memory, never a dense units × cells array. :meth:`ActiveCells.to_csr` expands the
units × cells matrix when a small level wants it.

This module never calls a solver.

Examples
--------
>>> import numpy as np
>>> from hierarchy.presets.pl94 import PL94_2020
>>> from hierarchy.geography import Geography
>>> from invariants.compile import compile_spec
>>> from invariants.spec import Spec
>>> geo, _ = Geography.from_columns(["nation", "block"], [[["1", "2", "3"]]])
>>> gqhh = np.array([[2, 0, 0, 1, 0, 0, 0, 0],     # households and a nursing facility
...                  [5, 0, 0, 0, 0, 0, 0, 0],     # households only
...                  [0, 0, 0, 0, 0, 0, 0, 0]])    # empty
>>> spec = Spec.from_dict({"invariant": [{"name": "gqhh_vect", "levels": ["block"]}],
...     "constraint": [{"name": "hhgq_total_ub", "levels": ["block"]},
...                    {"name": "nurse_nva_0", "type": "structural_zero", "levels": ["block"],
...                     "query": "recode(hhgq: nursing=3) * recode(votingage: minors=0)"}]})
>>> compiled = compile_spec(spec, PL94_2020, geo, {"block": {"gqhh": gqhh}})
>>> active = find_active_cells(compiled["block"])
>>> active.counts.tolist()          # 252 household cells (+ 126 adult nursing cells)
[378, 252, 0]
>>> active.summary()["empty_units"], active.n_patterns
(1, 3)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np
import scipy.sparse as sp

from hierarchy.geography import Geography
from invariants.compiled import LevelConstraints, _group_rows
from invariants.errors import SpecError

__all__ = ["ActiveCells", "find_active_cells", "find_active_cells_by_level", "fixing_rules"]

_PATTERN_CHUNK = 4096       # patterns expanded to dense cells at a time (bounds temporary memory)


@dataclass(frozen=True, eq=False)
class ActiveCells:
    """The active cells of every unit of a level, stored by pattern.

    Attributes
    ----------
    level : str
    geocodes : array of str
        The level's units (for messages).
    pattern : int64 array, shape (units,)
        Each unit's row of ``patterns``.
    patterns : scipy.sparse.csr_matrix, bool, shape (patterns, columns)
        The distinct active sets; ``True`` where a cell is active. Columns are the schema's cells
        (or, for :meth:`answers`, a query's answers).

    Raises
    ------
    SpecError
        If the arrays do not fit together (a pattern index out of range, lengths that differ).

    Examples
    --------
    >>> import scipy.sparse as sp
    >>> a = ActiveCells("block", np.array(["1", "2"]), np.array([0, 0]),
    ...                 sp.csr_matrix(np.array([[True, False, True]])))
    >>> a.counts.tolist(), a.cells(1).tolist(), int(a.to_csr().sum())
    ([2, 2], [0, 2], 4)
    >>> ActiveCells("block", np.array(["1"]), np.array([1]), sp.csr_matrix((1, 3), dtype=bool))
    Traceback (most recent call last):
    ...
    invariants.errors.SpecError: ActiveCells of level 'block': pattern indices must lie in [0, 1);
    got 1..1
    """

    level: str
    geocodes: np.ndarray
    pattern: np.ndarray
    patterns: sp.csr_matrix

    def __post_init__(self):
        where = f"ActiveCells of level {self.level!r}"
        pattern = np.asarray(self.pattern)
        patterns = self.patterns
        if not sp.issparse(patterns) or patterns.ndim != 2:
            raise SpecError(f"{where}: patterns must be a 2-d scipy.sparse matrix, not "
                            f"{type(patterns).__name__}")
        if pattern.ndim != 1 or pattern.dtype.kind not in "iu":
            raise SpecError(f"{where}: pattern must be a 1-d integer array (one index per unit)")
        if np.asarray(self.geocodes).shape != pattern.shape:
            raise SpecError(f"{where}: {np.asarray(self.geocodes).size} geocodes for "
                            f"{pattern.size} pattern indices; give one of each per unit")
        if pattern.size and (pattern.min() < 0 or pattern.max() >= patterns.shape[0]):
            raise SpecError(f"{where}: pattern indices must lie in [0, {patterns.shape[0]}); "
                            f"got {pattern.min()}..{pattern.max()}")
        patterns = sp.csr_matrix(patterns, dtype=bool)
        patterns.eliminate_zeros()
        patterns.sort_indices()
        object.__setattr__(self, "pattern", pattern.astype(np.int64))
        object.__setattr__(self, "patterns", patterns)

    @property
    def n_units(self) -> int:
        return int(self.pattern.size)

    @property
    def n_columns(self) -> int:
        """Cells of the schema (answers of the query, for :meth:`answers`)."""
        return int(self.patterns.shape[1])

    @property
    def n_patterns(self) -> int:
        return int(self.patterns.shape[0])

    @property
    def counts(self) -> np.ndarray:
        """Active cells of each unit, int64 (units,)."""
        return np.diff(self.patterns.indptr).astype(np.int64)[self.pattern]

    @property
    def n_active(self) -> int:
        """Active (unit, cell) pairs of the level."""
        return int(np.bincount(self.pattern, minlength=self.n_patterns)
                   @ np.diff(self.patterns.indptr))

    @property
    def nbytes(self) -> int:
        """Memory of this structure (pattern indices and the patterns' CSR arrays)."""
        p = self.patterns
        return int(self.pattern.nbytes + p.data.nbytes + p.indices.nbytes + p.indptr.nbytes)

    def cells(self, unit: int) -> np.ndarray:
        """The active cells (column indices, ascending) of one unit."""
        if not 0 <= unit < self.n_units:
            raise SpecError(f"{self.level} has {self.n_units} units; unit {unit} is out of range")
        p = self.patterns
        row = int(self.pattern[unit])
        return p.indices[p.indptr[row]:p.indptr[row + 1]].astype(np.int64)

    def to_csr(self) -> sp.csr_matrix:
        """The units × columns boolean matrix of active cells (memory ∝ active pairs)."""
        return self.patterns[self.pattern]

    def answers(self, query: Any) -> "ActiveCells":
        """The answers of ``query`` that count an active cell, unit by unit.

        Parameters
        ----------
        query : Query or sparse matrix (answers × cells)
            A nonnegative query (every :class:`~hierarchy.queries.Query` is 0/1).

        Returns
        -------
        ActiveCells
            The same units and pattern index; its columns are the query's answers. An answer
            outside it counts fixed cells only: it is 0 in every feasible histogram.

        Examples
        --------
        >>> import scipy.sparse as sp
        >>> a = ActiveCells("u", np.array(["1"]), np.array([0]),
        ...                 sp.csr_matrix(np.array([[True, False, False, False]])))
        >>> q = sp.csr_matrix(np.array([[1, 1, 0, 0], [0, 0, 1, 1]]))
        >>> a.answers(q).cells(0).tolist()
        [0]
        """
        matrix = getattr(query, "matrix", query)
        if not sp.issparse(matrix):
            matrix = sp.csr_matrix(np.asarray(matrix))
        if matrix.ndim != 2 or matrix.shape[1] != self.n_columns:
            raise SpecError(f"a query over {matrix.shape[-1]} cells cannot be read on the "
                            f"{self.n_columns} columns of level {self.level!r}")
        if (matrix.data < 0).any():
            raise SpecError("a query with negative coefficients can be nonzero on fixed cells "
                            "alone (the cells' values cancel); give a 0/1 query")
        touched = self.patterns.astype(np.int64) @ sp.csr_matrix(matrix, dtype=np.int64).T
        return ActiveCells(self.level, self.geocodes, self.pattern, sp.csr_matrix(touched > 0))

    def within(self, parent: "ActiveCells", parent_index: np.ndarray) -> "ActiveCells":
        """Each unit's active cells that are also active in its parent.

        Valid for a post-processor that keeps every child's cell at most its parent's (TopDown's
        exact parent consistency; not its failsafe, which relaxes it).

        Parameters
        ----------
        parent : ActiveCells
            The parent level's.
        parent_index : int array, shape (units,)
            Each unit's parent (``Geography.parents[level]``).

        Returns
        -------
        ActiveCells

        Raises
        ------
        SpecError
            If the levels have different columns or ``parent_index`` does not fit.

        Examples
        --------
        >>> import scipy.sparse as sp
        >>> up = ActiveCells("p", np.array(["1"]), np.array([0]),
        ...                  sp.csr_matrix(np.array([[True, True, False]])))
        >>> down = ActiveCells("c", np.array(["11", "12"]), np.array([0, 0]),
        ...                    sp.csr_matrix(np.array([[False, True, True]])))
        >>> down.within(up, np.array([0, 0])).counts.tolist()
        [1, 1]
        """
        parent_index = np.asarray(parent_index)
        if parent.n_columns != self.n_columns:
            raise SpecError(f"level {self.level!r} has {self.n_columns} columns, its parent "
                            f"level {parent.level!r} {parent.n_columns}")
        if parent_index.shape != (self.n_units,) or parent_index.dtype.kind not in "iu" or (
                self.n_units and (parent_index.min() < 0
                                  or parent_index.max() >= parent.n_units)):
            raise SpecError(f"parent_index must give each of the {self.n_units} {self.level} "
                            f"units a {parent.level} unit in [0, {parent.n_units}) "
                            "(Geography.parents[level])")
        pairs = self.pattern * parent.n_patterns + parent.pattern[parent_index]
        keys, inverse = np.unique(pairs, return_inverse=True)
        own, up = np.divmod(keys, parent.n_patterns)
        both = self.patterns[own].multiply(parent.patterns[up])
        return ActiveCells(self.level, self.geocodes, inverse.ravel(), sp.csr_matrix(both))

    def summary(self) -> dict[str, Any]:
        """Counts of the level: units, empty units (no active cell), active pairs, the mean,
        median and largest number of active cells per unit, the fraction of (unit, cell) pairs
        that are active and the number of distinct patterns.

        Examples
        --------
        >>> import scipy.sparse as sp
        >>> a = ActiveCells("u", np.array(["1", "2"]), np.array([0, 1]),
        ...                 sp.csr_matrix(np.array([[True, True], [False, False]])))
        >>> a.summary()["fraction_active"], a.summary()["empty_units"]
        (0.5, 1)
        """
        counts = self.counts
        n = max(self.n_units, 1)
        return {"level": self.level, "units": self.n_units,
                "empty_units": int((counts == 0).sum()), "active_pairs": self.n_active,
                "mean_active": float(counts.mean()) if counts.size else 0.0,
                "median_active": float(np.median(counts)) if counts.size else 0.0,
                "max_active": int(counts.max()) if counts.size else 0,
                "fraction_active": self.n_active / (n * max(self.n_columns, 1)),
                "patterns": self.n_patterns}


# -- the rules ----------------------------------------------------------------------------------

@dataclass(frozen=True)
class _Rules:
    """Fixing rules of a set of rows: rule ``i`` holds when ``Σ_{s∈D_i} max(lower_s, 0) ≥
    upper_{target[i]}`` (``D_i`` = column ``i`` of ``family``) and, if ``empty[i] ≥ 0``,
    ``lower_{empty[i]} ≤ 0``; it fixes row ``i`` of ``fixes``."""

    target: np.ndarray          # (rules,) row index r
    family: sp.csc_matrix       # (rows, rules) 0/1: the rows s of D
    empty: np.ndarray           # (rules,) row index z, or -1
    fixes: sp.csr_matrix        # (rules, columns) bool: S


def fixing_rules(matrix: sp.spmatrix, lower: np.ndarray | None = None,
                 upper: np.ndarray | None = None
                 ) -> list[tuple[int, tuple[int, ...], int, np.ndarray]]:
    """The rules that can fix cells, read from constraint rows (module docstring).

    A rule ``(r, D, z, S)`` says: when ``Σ_{s∈D} max(lower_s, 0) ≥ upper_r`` (and, if
    ``z ≥ 0``, ``lower_z ≤ 0``), the cells ``S`` are 0. ``D = ()`` is a cap (``upper_r ≤ 0``
    fixes the support of ``r``). When the rule holds every ``s ∈ D`` counts exactly
    ``max(lower_s, 0)``, so a member ``z`` of a larger family whose lower bound is not positive
    counts nobody: its support is fixed (``S`` = the support of ``z``). Only counting rows
    (nonnegative coefficients) are read, and only rows that can matter: ``r`` needs a finite
    upper bound in some unit, each ``s`` a positive lower bound in some unit (when ``lower`` and
    ``upper`` are given). Among the rows nested in ``r`` (support inside ``r``'s, coefficients at
    most ``r``'s) one disjoint family is chosen greedily, largest supports first; each nested
    row alone is a family too.

    Parameters
    ----------
    matrix : sparse matrix, shape (rows, cells)
    lower, upper : float arrays, shape (units, rows), optional

    Returns
    -------
    list of (int, tuple of int, int, int array)
        ``(r, D, z, S)`` with ``z = -1`` when there is no condition on a lower bound and ``S``
        the fixed cells, ascending.

    Examples
    --------
    >>> import scipy.sparse as sp
    >>> rows = sp.csr_matrix(np.array([[1, 1, 1, 0], [1, 1, 0, 0]]))
    >>> [(r, d, z, s.tolist()) for r, d, z, s in fixing_rules(rows)]
    [(0, (), -1, [0, 1, 2]), (0, (1,), -1, [2]), (1, (), -1, [0, 1])]
    """
    m = sp.csr_matrix(matrix, dtype=np.float64)
    m.sum_duplicates()
    m.eliminate_zeros()
    dense = m.toarray()
    support = dense != 0
    size = support.sum(axis=1)
    counting = (size > 0) & ~(dense < 0).any(axis=1)
    capped = counting if upper is None else counting & np.isfinite(upper).any(axis=0)
    bounded = counting if lower is None else counting & (lower > 0).any(axis=0)
    overlap = support.astype(np.int64) @ support.T.astype(np.int64)     # rows × rows
    rules: list[tuple[int, tuple[int, ...], int, np.ndarray]] = []
    for r in np.flatnonzero(capped):
        rules.append((int(r), (), -1, np.flatnonzero(support[r])))
        inside = bounded & (overlap[:, r] == size) & (np.arange(dense.shape[0]) != r)
        inside &= ~((dense > dense[r]) & support).any(axis=1)         # c_s <= c_r
        nested = sorted(np.flatnonzero(inside).tolist(), key=lambda s: (-size[s], s))
        greedy: list[int] = []
        for s in nested:
            if all(overlap[s, t] == 0 for t in greedy):
                greedy.append(s)
        for family in dict.fromkeys([tuple(sorted(greedy))] + [(s,) for s in nested]):
            if not family:
                continue
            covered = dense[list(family)].sum(axis=0)          # disjoint: each cell's c_s
            fixed = np.flatnonzero(support[r] & (covered < dense[r]))
            if fixed.size:
                rules.append((int(r), family, -1, fixed))
            if len(family) > 1:
                rules.extend((int(r), family, z, np.flatnonzero(support[z])) for z in family)
    return rules


def _compile_rules(matrix: sp.spmatrix, lower: np.ndarray, upper: np.ndarray) -> _Rules:
    rules = fixing_rules(matrix, lower, upper)
    n_rows, n_cells = matrix.shape
    target = np.array([r for r, _, _, _ in rules], dtype=np.int64)
    fam_rows = [s for _, d, _, _ in rules for s in d]
    fam_cols = [i for i, (_, d, _, _) in enumerate(rules) for _ in d]
    family = sp.csc_matrix((np.ones(len(fam_rows)), (fam_rows, fam_cols)),
                           shape=(n_rows, len(rules)))
    empty = np.array([z for _, _, z, _ in rules], dtype=np.int64)
    fix_rows = np.repeat(np.arange(len(rules)), [s.size for _, _, _, s in rules])
    fix_cols = (np.concatenate([s for _, _, _, s in rules]) if rules
                else np.zeros(0, dtype=np.int64))
    fixes = sp.csr_matrix((np.ones(fix_cols.size, dtype=bool), (fix_rows, fix_cols)),
                          shape=(len(rules), n_cells))
    return _Rules(target, family, empty, fixes)


def _newly_fixed(matrix: sp.csc_matrix, lower: np.ndarray, upper: np.ndarray
                 ) -> tuple[np.ndarray, np.ndarray]:
    """What the rules of ``matrix`` fix (bounds units × rows): ``(distinct, inverse)`` — the
    distinct fixed sets (bool, sets × columns) and each unit's; never a units × columns array."""
    rules = _compile_rules(matrix, lower, upper)
    floor = np.maximum(np.where(np.isfinite(lower), lower, 0.0), 0.0)
    need = np.asarray((rules.family.T @ floor.T).T)
    cap = upper[:, rules.target]
    holding = np.isfinite(cap) & (need >= cap)
    conditional = rules.empty >= 0
    holding[:, conditional] &= lower[:, rules.empty[conditional]] <= 0
    distinct, inverse = _group_rows(holding)
    fixed = (sp.csr_matrix(distinct.astype(np.int64)) @ rules.fixes.astype(np.int64)).toarray()
    return fixed > 0, inverse


def _oriented(matrix: sp.spmatrix, lower: np.ndarray, upper: np.ndarray
              ) -> tuple[sp.csc_matrix, np.ndarray, np.ndarray]:
    """The rows, plus the negation of every row with a negative coefficient (``-u ≤ -c·x ≤
    -l``): once its positive cells are fixed, the negated row counts persons."""
    m = sp.csr_matrix(matrix, dtype=np.float64)
    mixed = np.flatnonzero(np.asarray((m < 0).sum(axis=1)).ravel() > 0)
    if mixed.size:
        m = sp.vstack([m, -m[mixed]], format="csr")
        lower, upper = (np.hstack([lower, -upper[:, mixed]]),
                        np.hstack([upper, -lower[:, mixed]]))
    return sp.csc_matrix(m), lower, upper


def _fixed_patterns(matrix: sp.spmatrix, lower: np.ndarray, upper: np.ndarray
                    ) -> tuple[np.ndarray, np.ndarray]:
    """``(fixed, inverse)``: distinct fixed sets (patterns × cells, bool) and each unit's.

    The rules run on the open cells of each pattern — a fixed cell is 0, so a row's remaining
    cells are what it constrains — and units are regrouped by their fixed sets until no rule
    fixes anything new (each round only grows the sets)."""
    m, lower, upper = _oriented(matrix, lower, upper)
    n_units, n_cells = lower.shape[0], m.shape[1]
    fixed = np.zeros((1, n_cells), dtype=bool)
    inverse = np.zeros(n_units, dtype=np.int64)
    grew = m.shape[0] > 0 and n_units > 0
    while grew:
        grew = False
        candidates, new_inverse = [], np.empty(n_units, dtype=np.int64)
        order = np.argsort(inverse, kind="stable")
        groups = np.split(order, np.cumsum(np.bincount(inverse, minlength=fixed.shape[0]))[:-1])
        for p, units in enumerate(groups):
            open_cells = np.flatnonzero(~fixed[p])
            if not (units.size and open_cells.size):
                new_inverse[units] = len(candidates)
                candidates.append(fixed[p])
                continue
            added, which = _newly_fixed(m[:, open_cells], lower[units], upper[units])
            grown = np.repeat(fixed[p][None, :], added.shape[0], axis=0)
            grown[:, open_cells] |= added
            grew |= bool(added.any())
            new_inverse[units] = len(candidates) + which
            candidates.extend(grown)
        fixed, remap = _group_rows(np.array(candidates, dtype=bool).reshape(-1, n_cells))
        inverse = remap[new_inverse]
    return fixed, inverse


def find_active_cells(level_constraints: LevelConstraints) -> ActiveCells:
    """The cells each unit's compiled constraints leave free (module docstring: the rules).

    Reads only the level's rows (``matrix``, ``lower``, ``upper``: units × rows); the result
    holds one pattern index per unit and the distinct active sets. Temporary memory is
    ``O(units × rows + patterns × cells)``; the rules run once per pattern and round.

    Parameters
    ----------
    level_constraints : LevelConstraints
        One level of :func:`~invariants.compile.compile_spec`.

    Returns
    -------
    ActiveCells
        Restrict it to the parents' active cells with :meth:`ActiveCells.within`.

    Raises
    ------
    SpecError
        If ``level_constraints`` is not a compiled level.

    Examples
    --------
    A unit whose ``tot`` invariant is 0 has no active cell; a structural zero fixes its cells
    everywhere:

    >>> from hierarchy.schema import E2E_1940
    >>> from hierarchy.geography import Geography
    >>> from invariants.compile import compile_spec
    >>> from invariants.spec import Spec
    >>> geo, _ = Geography.from_columns(["nation", "state"], [[["01", "02"]]])
    >>> spec = Spec.from_dict({"invariant": [{"name": "tot", "levels": "all"}],
    ...     "constraint": [{"name": "no_minors_in_gq", "type": "structural_zero",
    ...                     "query": "recode(hhgq: gq=1-7) * recode(votingage: minor=0)"}]})
    >>> published = {"nation": {"tot": np.array([4])}, "state": {"tot": np.array([0, 4])}}
    >>> lc = compile_spec(spec, E2E_1940, geo, published)["state"]
    >>> find_active_cells(lc).counts.tolist()       # 192 cells - 7 GQ types × 12 minor cells
    [0, 108]
    """
    if not isinstance(level_constraints, LevelConstraints):
        raise SpecError("find_active_cells needs one compiled level (compile_spec(...)[level]), "
                        f"not {type(level_constraints).__name__}")
    lc = level_constraints
    fixed, inverse = _fixed_patterns(lc.matrix, np.asarray(lc.lower, dtype=np.float64),
                                     np.asarray(lc.upper, dtype=np.float64))
    return ActiveCells(lc.level, np.asarray(lc.geocodes), inverse, sp.csr_matrix(~fixed))


def find_active_cells_by_level(compiled: Mapping[str, LevelConstraints],
                               geography: Geography, *, through_parents: bool = False
                               ) -> dict[str, ActiveCells]:
    """:func:`find_active_cells` for every level of a compiled spec, root first.

    Parameters
    ----------
    compiled : mapping level → LevelConstraints
        :func:`~invariants.compile.compile_spec`'s result.
    geography : Geography
    through_parents : bool, default False
        Restrict each level to its parents' active cells (:meth:`ActiveCells.within`). Only
        valid for a post-processor that never lets a child hold a person in a cell its parent
        has 0 in (TopDown's failsafe may); the default uses each unit's own rows only.

    Returns
    -------
    dict level → ActiveCells

    Raises
    ------
    SpecError
        If a level of the geography is missing from ``compiled``.

    Examples
    --------
    >>> from hierarchy.schema import E2E_1940
    >>> from invariants.compile import compile_spec
    >>> from invariants.spec import Spec
    >>> geo, _ = Geography.from_columns(["nation", "state"], [[["01", "02"]]])
    >>> gqhh = np.zeros((2, 8), np.int64); gqhh[:, 0] = [3, 4]; gqhh[1, 3] = 1
    >>> published = {"nation": {"tot": np.array([20])}, "state": {"tot": np.array([9, 11]),
    ...              "gqhh": gqhh}}
    >>> compiled = compile_spec(Spec.e2e(["nation", "state"]), E2E_1940, geo, published)
    >>> found = find_active_cells_by_level(compiled, geo)
    >>> found["nation"].counts.tolist(), found["state"].counts.tolist()
    ([48], [24, 48])
    """
    out: dict[str, ActiveCells] = {}
    above: ActiveCells | None = None
    for i, level in enumerate(geography.levels):
        if level not in compiled:
            raise SpecError(f"no compiled constraints for level {level!r}; compile the spec for "
                            f"the whole geography (compile_spec) first")
        found = find_active_cells(compiled[level])
        if through_parents and above is not None:
            found = found.within(above, geography.parents[i])
        out[level] = above = found
    return out
