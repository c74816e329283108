"""The rows of each constraint at a level, merged: the building blocks of compilation.

:func:`invariants.compile.compile_spec` asks the catalogue for the rows of its invariants and
catalogue constraints, and this module for the rows of the user's own constraints
(structural zeros and linear constraints over a query); it then merges identical rows and finds
the cells each unit must leave at 0. It imports the catalogue, the spec's items and
:mod:`invariants.compiled` (for the row labels).

Examples
--------
>>> flags = np.array([[True, False], [False, False], [True, False]])
>>> distinct, index = _group_rows(flags)
>>> distinct.tolist(), index.tolist()
([[False, False], [True, False]], [1, 0, 1])
"""

from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np
import scipy.sparse as sp

from hierarchy.errors import HierarchyError
from hierarchy.queries import parse_query
from hierarchy.schema import Schema
from invariants.catalogue import Rows
from invariants.compiled import _merge_label
from invariants.errors import SpecError
from invariants.items import Constraint

__all__: list[str] = []


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
