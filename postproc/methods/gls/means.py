"""A level's subtree estimates in the upward pass of the hierarchical GLS (``docs/gls.md``):
``L = C b + of_rhs · rhs`` for each unit with its operator, and the check that each unit's
equalities agree with each other and with what its children fix."""

from __future__ import annotations

from typing import Any

import numpy as np

from postproc.errors import PostprocError
from postproc.methods.gls.information import times, unit_groups
from postproc.methods.gls.operators import _Operator

#: A level's equalities, :class:`postproc.methods.gls.tree.Equalities` (tree imports this
#: module, so it is not imported here).
Equalities = Any


def _level_means(li: int, ids: np.ndarray, operators: list[_Operator], b: np.ndarray,
                 eq: Equalities | None, child_sum: np.ndarray | None, cells: int,
                 unit_name) -> np.ndarray:
    """The subtree estimates ``L`` of one level's units (units × k × cells): a group of units
    per operator, or, with many small operators (:func:`_many_small`), every unit at once with
    its operator's matrices gathered."""
    distinct = np.unique(ids)
    if _many_small(distinct.size, cells):
        return _level_means_stacked(li, ids, operators, b, eq, child_sum, cells, unit_name)
    k = b.shape[1]
    out = np.empty((ids.size, k, cells))
    for g, rows in unit_groups(ids):
        op = operators[g]
        info_b = b[rows]
        rhs_parts = []
        if eq is not None:
            active = np.isfinite(eq.values[rows[0]])
            values = eq.values[rows][:, active]
            rhs_parts.append(np.broadcast_to(values[:, None, :], (rows.size, k, values.shape[1])))
            if eq.zero is not None:
                rhs_parts.append(np.zeros((rows.size, k, int(eq.zero[rows[0]].sum()))))
        if op.sigma_pinv is not None:
            s = child_sum[rows]
            info_b = info_b + times(s, op.sigma_pinv)
            rhs_parts.append(times(s, op.null_sigma))
        rhs = (np.concatenate(rhs_parts, axis=2) if rhs_parts
               else np.zeros((rows.size, k, 0)))
        out[rows] = times(info_b, op.covariance) + times(rhs, op.of_rhs.T)
        if rhs.shape[2]:
            _check_feasible(li, rows, out[rows], eq, op, child_sum, unit_name)
    return out


def _many_small(operators: int, cells: int) -> bool:
    """Whether a level's subtree estimates are computed for all units at once: many operators
    (a loop over them would be mostly Python) of few cells (their gathered matrices fit)."""
    return operators > 64 and cells <= 128


def _level_means_stacked(li: int, ids: np.ndarray, operators: list[_Operator], b: np.ndarray,
                         eq: Equalities | None, child_sum: np.ndarray | None, cells: int,
                         unit_name) -> np.ndarray:
    """:func:`_level_means` with each unit's operator gathered: with ``C``, ``Σ⁺``, ``U₀`` and
    ``of_rhs = [E | Z | N]`` (columns for the active equality rows, the zero cells and the
    children's null directions), ``L = b C + S (Σ⁺ C + U₀ Nᵀ) + c Eᵀ`` (``c`` the equality
    values, the zero cells' right-hand sides being 0)."""
    distinct, first, inverse = np.unique(ids, return_index=True, return_inverse=True)
    inverse = inverse.ravel()
    rows_eq = eq.values.shape[1] if eq is not None else 0
    n_ops = distinct.size
    c_all = np.empty((n_ops, cells, cells))
    d_all = np.zeros((n_ops, cells, cells))
    e_all = np.zeros((n_ops, cells, rows_eq))
    null_width = max((operators[g].null_sigma.shape[1] for g in distinct.tolist()
                      if operators[g].null_sigma is not None), default=0)
    null_all = np.zeros((n_ops, cells, null_width))
    for j, (g, u) in enumerate(zip(distinct.tolist(), first.tolist())):
        op = operators[g]
        c_all[j] = op.covariance
        start = 0
        if eq is not None:
            active = np.isfinite(eq.values[u])
            e_all[j][:, active] = op.of_rhs[:, :int(active.sum())]
            start = int(active.sum()) + (int(eq.zero[u].sum()) if eq.zero is not None else 0)
        if op.sigma_pinv is not None:
            d_all[j] = op.sigma_pinv @ op.covariance + op.null_sigma @ op.of_rhs[:, start:].T
            null_all[j][:, :op.null_sigma.shape[1]] = op.null_sigma
    values = np.nan_to_num(eq.values, nan=0.0) if eq is not None else None
    out = np.empty((ids.size, b.shape[1], cells))
    chunk = max(1, 2**22 // (cells * cells))
    for lo in range(0, ids.size, chunk):
        sl = slice(lo, lo + chunk)
        which = inverse[sl]
        m = b[sl] @ c_all[which]
        if child_sum is not None:
            m += child_sum[sl] @ d_all[which]
        if values is not None:
            m += (e_all[which] @ values[sl][:, :, None])[:, None, :, 0]
        out[sl] = m
        _check_stacked(li, lo, m, eq, None if child_sum is None else child_sum[sl],
                       null_all[which], unit_name)
    return out


def _check_stacked(li: int, lo: int, means: np.ndarray, eq: Equalities | None,
                   child_sum: np.ndarray | None, null: np.ndarray, unit_name) -> None:
    """:func:`_check_feasible` for the units ``lo`` on of a level at once (``null``: each
    unit's ``U₀``, padded with zero columns)."""
    units = slice(lo, lo + means.shape[0])
    scale = 1.0 + np.abs(means).max(axis=(1, 2))
    own = np.zeros(means.shape[0], bool)
    if eq is not None:
        values = eq.values[units]
        got = times(means, eq.matrix.T)
        off = np.where(np.isfinite(values)[:, None, :],
                       np.abs(got - np.nan_to_num(values)[:, None, :]), 0.0)
        own |= off.max(axis=(1, 2), initial=0) > 1e-6 * scale
        if eq.zero is not None:
            zeros = np.where(eq.zero[units][:, None, :], np.abs(means), 0.0)
            own |= zeros.max(axis=(1, 2), initial=0) > 1e-6 * scale
    below = np.zeros(means.shape[0], bool)
    if child_sum is not None and null.shape[2]:
        gap = np.abs((means - child_sum) @ null)
        below = gap.max(axis=(1, 2), initial=0) > 1e-6 * scale
    bad = own | below
    if bad.any():
        u = lo + int(np.argmax(bad))
        what = ("its equalities contradict each other" if own[u - lo] else
                "its equalities contradict what its children's equalities fix")
        raise PostprocError(f"{unit_name(li, u)}: {what} (e.g. an invariant total that is not "
                            f"the sum of its children's invariant totals); check the published "
                            f"invariants")


def _check_feasible(li: int, rows: np.ndarray, means: np.ndarray, eq: Equalities | None,
                    op: _Operator, child_sum: np.ndarray | None, unit_name) -> None:
    """Raise when a unit's equalities contradict each other or its children's sum."""
    scale = 1.0 + np.abs(means).max(axis=(1, 2))
    bad = np.zeros(rows.size, bool)
    what = "its equalities contradict each other"
    if eq is not None:
        active = np.isfinite(eq.values[rows[0]])
        got = times(means, eq.matrix[active].T)
        off = np.abs(got - eq.values[rows][:, None, active])
        bad |= off.max(axis=(1, 2), initial=0) > 1e-6 * scale
        if eq.zero is not None:
            zeros = np.abs(means[:, :, eq.zero[rows[0]]])
            bad |= zeros.max(axis=(1, 2), initial=0) > 1e-6 * scale
    if op.null_sigma is not None and op.null_sigma.shape[1]:
        off = np.abs(times(means - child_sum[rows], op.null_sigma)).max(axis=(1, 2)) > 1e-6 * scale
        if off.any() and not bad.any():
            what = "its equalities contradict what its children's equalities fix"
        bad |= off
    if bad.any():
        raise PostprocError(f"{unit_name(li, int(rows[np.argmax(bad)]))}: {what} (e.g. an "
                            f"invariant total that is not the sum of its children's invariant "
                            f"totals); check the published invariants")
