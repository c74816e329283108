"""What a spec compiles into at one level: :class:`LevelConstraints`, its rows merged
(:func:`_merge`: identical rows become one, their bounds intersected), the cells each unit must
leave at 0 (:func:`_zero_cells`), and the rows' labels.

The bottom of the compiler (:mod:`invariants.compile`): it imports nothing of :mod:`invariants`,
and the modules that build or read compiled levels — :mod:`invariants.rows`,
:mod:`invariants.node`, :mod:`invariants.checks`, :mod:`invariants.compile` — import it.
:mod:`invariants.compile` re-exports :class:`LevelConstraints`.

A row's label reads ``'name & name (implied by level): answer'``: the invariants and
constraints behind the row, then which answer of their query it is.

Examples
--------
>>> _merge_label("tot: total", "total_ge_households: total")
'tot & total_ge_households: total'
>>> _implied_label("adults: adult", "state")
'adults (implied by state): adult'
>>> flags = np.array([[True, False], [False, False], [True, False]])
>>> distinct, index = _group_rows(flags)
>>> distinct.tolist(), index.tolist()
([[False, False], [True, False]], [1, 0, 1])
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np
import scipy.sparse as sp

__all__ = ["LevelConstraints"]


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
    sums : tuple of CompiledSum
        The level's sums over groups of units (:mod:`invariants.sums`): rows across units,
        which TopDown holds in the node problem of the group's parent.

    Examples
    --------
    A state level of two units on a 4-cell schema (sex × age), with an exact total per unit and
    at least one adult each; the nation level also gets the sums of its states' rows:

    >>> from hierarchy.geography import Geography
    >>> from invariants.compile import compile_spec
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
    sums: tuple = ()

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


def _merge(blocks: Sequence[Any], n_units: int, n_cells: int
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
