"""The rows of the user's own constraints at a level (structural zeros and linear constraints
over a query) and of query invariants: a building block of compilation.

:func:`invariants.compile.compile_spec` asks the catalogue for the rows of its invariants and
catalogue constraints, and this module for the rows of the user's own; :mod:`invariants.compiled`
then merges identical rows and finds the cells each unit must leave at 0. It imports the
catalogue (for :class:`~invariants.catalogue.Rows`) and the spec's items.

Examples
--------
>>> from hierarchy.schema import E2E_1940
>>> from invariants.items import Constraint, Invariant
>>> rows = _user_block(Constraint("no_gq", ["state"], type="linear",
...                               query="marginal(hhgq)", answers=[1], sense="==", rhs=0),
...                    E2E_1940, {}, 3)
>>> rows.labels, rows.upper.tolist()
(['no_gq: correctional'], [[0.0], [0.0], [0.0]])

A query invariant's rows hold its published answers (two units, the college answer by label):

>>> held = Invariant("dorms", ["state"], query="marginal(hhgq)", answers=["college"])
>>> rows = _query_invariant_rows(held, E2E_1940, np.array([[4], [0]]), 2, "state")
>>> rows.labels, rows.lower.tolist() == rows.upper.tolist() == [[4.0], [0.0]]
(['dorms: college'], True)
"""

from __future__ import annotations

from typing import Mapping

import numpy as np

from hierarchy.errors import HierarchyError
from hierarchy.queries import parse_query
from hierarchy.schema import Schema
from invariants.catalogue import Rows
from invariants.errors import SpecError
from invariants.items import Constraint, Invariant

__all__: list[str] = []


def _answers(q, answers: tuple[int | str, ...] | None, what: str, where: str):
    """The rows of ``q`` that ``answers`` selects (indices or labels), their labels, indices."""
    m = q.matrix
    labels = [q.answer_label(i) for i in range(q.n_answers)]
    if answers is None:
        return m, labels, np.arange(q.n_answers)
    try:
        idx = q.answer_indices(answers)
    except HierarchyError as exc:
        raise SpecError(f"{where}{what}: {exc}") from None
    return m[idx], [labels[i] for i in idx], idx


def _query(c: Constraint | Invariant, schema: Schema, what: str, where: str):
    try:
        return parse_query(c.query, schema)
    except HierarchyError as exc:  # re-raise naming the item
        hint = ("; if it names a query of the workload, resolve it first: "
                "spec.resolve_queries(workload) (measure, postprocess and postproc run do)"
                if "(" not in c.query and c.query.strip() not in ("detailed", "total") else "")
        raise SpecError(f"{where}{what}: bad query {c.query!r}: {exc}{hint}") from None


def _check_item_query(item: Constraint | Invariant, schema: Schema, what: str) -> None:
    """Raise a :class:`SpecError` naming ``what`` (and the item's file and line) if its query
    does not parse on ``schema`` or names an answer the query does not have."""
    where = f"{item.source}, line {item.line}: " if item.source and item.line else ""
    _answers(_query(item, schema, what, where), item.answers, what, where)


def _query_invariant_rows(inv: Invariant, schema: Schema, value, n_units: int,
                          level: str) -> Rows:
    """A query invariant's rows at a level: its answers equal to the data published under its
    name there (units × the answers it holds)."""
    where = f"{inv.source}, line {inv.line}: " if inv.source and inv.line else ""
    what = f"invariant {inv.name!r}"
    q = _query(inv, schema, what, where)
    m, labels, idx = _answers(q, inv.answers, what, where)
    if value is None:
        raise SpecError(f"{where}{what} is declared at level {level!r} but no data was "
                        f"published there; measure with spec= (it publishes the answers of the "
                        f"spec's query invariants) or drop {level!r} from its levels")
    arr = np.asarray(value)
    if arr.ndim == 1:
        arr = arr[:, None]
    if arr.shape != (n_units, idx.size):
        raise SpecError(f"{where}{what} at level {level!r}: published data of shape "
                        f"{np.shape(value)}, expected ({n_units}, {idx.size}) (units × the "
                        "answers it holds)")
    if arr.dtype.kind not in "iuf" or not np.all(np.isfinite(arr)) or np.any(
            arr != np.round(arr)) or np.any(arr < 0):
        raise SpecError(f"{where}{what} at level {level!r}: the published answers must be "
                        "whole non-negative numbers")
    rhs = arr.astype(np.float64)
    return Rows(m, rhs, rhs.copy(), [f"{inv.name}: {lab}" for lab in labels])


def _user_block(c: Constraint, schema: Schema, stats: Mapping[str, np.ndarray], n_units: int,
                published: Mapping[str, np.ndarray] | None = None, level: str = "") -> Rows:
    where = f"{c.source}, line {c.line}: " if c.source and c.line else ""
    q = _query(c, schema, f"constraint {c.name!r}", where)
    m, labels, idx = _answers(q, c.answers, f"constraint {c.name!r}", where)
    labels = [f"{c.name}: {lab}" for lab in labels]
    r = m.shape[0]
    if c.type == "structural_zero":
        z = np.zeros((n_units, r))
        return Rows(m, z, z.copy(), labels)
    ref = c.statistic_reference()
    if c.type == "published":
        rhs = _published_rhs(c, (published or {}).get(c.name), n_units, idx, level, where)
    elif ref is None:
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


def _published_rhs(c: Constraint, value, n_units: int, idx: np.ndarray, level: str,
                   where: str) -> np.ndarray:
    """A published constraint's right-hand sides at a level: the published data under its
    name, one whole number per unit and answer of its query (``idx``: the answers kept)."""
    at = f"level {level!r}" if level else "this level"
    if value is None:
        raise SpecError(f"{where}published constraint {c.name!r} has no data at {at}: publish "
                        f"its right-hand sides as invariants[{level!r}][{c.name!r}] (units × "
                        "answers) or drop the level from the constraint's levels")
    arr = np.asarray(value)
    if arr.ndim == 1:
        arr = arr[:, None]
    n_answers = int(idx.max(initial=-1)) + 1
    if arr.ndim != 2 or arr.shape[0] != n_units or arr.shape[1] < n_answers:
        raise SpecError(f"{where}published constraint {c.name!r} at {at}: data of shape "
                        f"{np.shape(value)}, expected ({n_units}, answers of its query)")
    if arr.dtype.kind not in "iuf" or (arr.dtype.kind == "f" and not (
            np.all(np.isfinite(arr)) and np.all(arr == np.round(arr)))):
        raise SpecError(f"{where}published constraint {c.name!r} at {at}: the right-hand sides "
                        "must be whole numbers")
    return arr[:, idx].astype(np.float64)
