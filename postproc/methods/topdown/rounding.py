"""The node's rounding: integer child histograms from the fit that keep every constraint.

``X̃ = ⌊X*⌋ + B`` with ``B ∈ [0, 1]``: ``Σ_k B_kj = x̂_pj − Σ_k ⌊X*_kj⌋``,
``lower − C⌊X*⌋ ≤ C B ≤ upper − C⌊X*⌋``, minimizing ``Σ (1 − 2·frac) B`` (= ``Σ |X̃ − X*|`` up to
a constant). The constraint matrix is totally unimodular for the usual nested constraints, so the
LP's vertex optimum is integral: it is solved as an LP, integrality is *verified*, and a MILP is
solved when it is not. With rounding passes (``NodeTask.round_passes``), each pass first rounds
its queries' answers as close (L1) to the fit's as the constraints allow and holds them; an
answer an earlier fit pass held, whose target is a half, goes toward that pass's answer (a tie
the multipass fit makes, which the fit's last digits would otherwise decide). In the failsafe,
parent consistency gets integer slacks at a large cost and the kept answers stay exact
(``docs/topdown.md``, "Rounding" and "Failsafe").
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import scipy.sparse as sp

from postproc.infra.solvers import LP, InfeasibleError, solve_lp
from postproc.methods.topdown.failsafe import rounding_allowance
from postproc.methods.topdown.rows import (
    Layout,
    Rows,
    child_sum_rows,
    kept_rows,
    parent_rows,
    stacked,
)
from postproc.methods.topdown.task import KeptQuery, NodeTask

__all__ = ["round_node", "toward_held"]

_FRAC_TOL = 1e-7      # X* within this of an integer counts as that integer
_INT_TOL = 1e-6       # LP solution within this of an integer is integral
_TIE_TOL = 1e-5       # a rounding target within this of a half is a tie (toward_held)
_TIE_NUDGE = 1e-4     # ... and is moved this far from the half, toward the held answer


def round_node(task: NodeTask, x_star: np.ndarray, layout: Layout, *, failsafe: bool = False,
               keep: Sequence[KeptQuery] = (), held: dict[str, np.ndarray] | None = None
               ) -> tuple[np.ndarray, dict[str, Any]]:
    """``⌊X*⌋ + B`` (module docstring); with ``failsafe``, integer slacks on parent consistency
    and the ``keep`` answers exact: the least total slack first (at a large cost), then, where
    ``task.failsafe_slack`` admits more integer slack (:func:`rounding_allowance`), the cells'
    rounding cost alone within the least slack plus that allowance. ``held``: query name →
    answers (K × m) an earlier fit pass held, toward which a rounding pass of that query breaks
    its ties (:func:`toward_held`).

    Examples
    --------
    Two children share a parent (3, 1); the fit split it into halves where it could not do
    better, and the rounding keeps the parent's cells exact, as close to the fit as it can:

    >>> import scipy.sparse as sp
    >>> task = NodeTask("county", "p", np.array([3, 1]), np.array(["a", "b"], dtype=object),
    ...                 (), sp.csr_matrix((0, 2), dtype=np.int64), np.zeros((2, 0)),
    ...                 np.zeros((2, 0)), np.zeros((2, 2), bool))
    >>> hist, stats = round_node(task, np.array([[1.5, 1.0], [1.5, 0.0]]), Layout.of(task))
    >>> hist.sum(axis=0).tolist(), stats["rounding"]
    ([3, 1], 'lp')
    """
    lay = layout      # the fit's: Layout.of(task), or Layout.relaxed(task, keep) (failsafe)
    extra = rounding_allowance(task.failsafe_slack, keep) if failsafe else 0
    # on the variables only (child by child, cell by cell; every other cell is 0)
    x = np.maximum(x_star[lay.allowed], 0.0)
    floor = np.floor(x + _FRAC_TOL)
    frac = np.clip(x - floor, 0.0, 1.0)
    nb = lay.n_x
    act = np.flatnonzero(lay.active)
    n_slack = 2 * act.size if (failsafe and task.parent_hist is not None) else 0
    rows = Rows(nb + n_slack)
    if task.parent_hist is not None:  # Σ_k B_kj = parent_j − Σ_k ⌊X*_kj⌋ (± integer slacks)
        floor_sum = np.bincount(lay.cell, weights=floor, minlength=task.n)
        need = task.parent_hist[act] - floor_sum[act]
        r, c, data = parent_rows(lay.var_index, act, nb if n_slack else None)
        rows.add(r, c, data, need, need)
        if n_slack and keep:  # kept answers: Σ B over an answer's cells = what floors leave
            r, c, data, target, _ = kept_rows(task, lay, keep, nb + n_slack, floor_sum)
            rows.add(r, c, data, target, target)
    if task.matrix.shape[0]:  # lower − C⌊X*⌋ ≤ C B ≤ upper − C⌊X*⌋
        r, cc, v, has_var = lay.constraint_rows(task)
        base = np.bincount(r, weights=v * floor[cc], minlength=has_var.size)
        lower, upper = lay.bounds(task, exact_parent=not n_slack)
        lo, hi = lower.ravel() - base, upper.ravel() - base
        keep = has_var & (np.isfinite(lo) | np.isfinite(hi))
        renumber = np.cumsum(keep) - 1
        sel = keep[r]
        rows.add(renumber[r[sel]], cc[sel], v[sel], lo[keep], hi[keep])
    for r, cc, v, lo, hi in child_sum_rows(task, lay, floor):  # rows across children
        rows.add(r, cc, v, lo, hi)
    cell_cost = np.concatenate([1.0 - 2.0 * frac, np.full(n_slack, 1e4)])
    stats: dict[str, Any] = {"round_seconds": 0.0}
    methods = []
    passes = () if failsafe or not task.round_passes else task.round_passes
    for answers in passes:  # multipass: L1 on the pass's answers, then hold them exactly
        r, cc, v, target = _round_answers(lay, answers, x, floor, held)
        if not r.size:
            continue
        # An answer of one variable B_j (coefficient 1) deviates by f or 1 − f: slope 1 − 2f
        # on B_j. Every other answer s = a·B gets |s − f| as a convex piecewise-linear cost
        # over three columns, s = s⁻ + s⁰ + s⁺ with s⁻ ≤ ⌊f⌋ at −1, s⁰ ≤ 1 at 1 − 2·frac(f),
        # s⁺ at +1. Their rows join the per-cell and per-child (laminar) rows, so the matrix
        # stays totally unimodular and the LP's vertex is integral (the |·| ≤ t form is not).
        m = target.size
        count = np.bincount(r, minlength=m)
        one = (count == 1) & (np.bincount(r, weights=(v == 1), minlength=m) == 1)
        cost = np.concatenate([np.zeros(nb), cell_cost[nb:]])
        pick = one[r]
        np.add.at(cost, cc[pick], 1.0 - 2.0 * np.clip(target[r[pick]], 0.0, 1.0))
        multi = np.flatnonzero(~one)
        renumber = np.full(m, -1, np.int64)
        renumber[multi] = np.arange(multi.size)
        rm, cm, vm = renumber[r[~pick]], cc[~pick], v[~pick]
        k = multi.size
        low = np.floor(target[multi] + _FRAC_TOL)
        part = np.clip(target[multi] - low, 0.0, 1.0)
        trial = rows.widened(nb + n_slack + 3 * k)
        seg = nb + n_slack + np.arange(3 * k)
        trial.add(np.concatenate([rm, np.tile(np.arange(k), 3)]), np.concatenate([cm, seg]),
                  np.concatenate([vm, -np.ones(3 * k)]), np.zeros(k), np.zeros(k))
        cost = np.concatenate([cost, -np.ones(k), 1.0 - 2.0 * part, np.ones(k)])
        seg_ub = np.concatenate([np.maximum(low, 0.0), np.ones(k), np.full(k, np.inf)])
        b, method = _round_lp(task, stats, cost, trial, nb, n_slack, seg_ub)
        methods.append(method)
        if np.unique(cc[pick]).size == nb:
            break   # the pass had every cell as an answer (the detailed query): B is decided
        achieved = np.zeros(m)
        np.add.at(achieved, r, v * b[cc])
        rows.add(r, cc, v, np.round(achieved), np.round(achieved))
    else:   # the cells last, as close to the fit as what the passes held allows
        b, method = _round_lp(task, stats, cell_cost, rows, nb, n_slack, np.zeros(0))
        methods.append(method)
    if n_slack and extra:
        # the Census Bureau's rule in integers: the total slack within its least value (just
        # found) plus the allowance, and among such roundings the one closest to the fit
        least = float(b[nb:].sum())
        rows.add(np.zeros(n_slack), nb + np.arange(n_slack), 1.0, [0.0], [least + extra])
        b, method = _round_lp(task, stats, np.concatenate([cell_cost[:nb], np.zeros(n_slack)]),
                              rows, nb, n_slack, np.zeros(0))
        stats["round_least_slack"] = least
    out = np.zeros((task.k, task.n), dtype=np.int64)
    out[lay.allowed] = floor.astype(np.int64) + b[:nb].astype(np.int64)
    stats["rounding"] = "milp" if "milp" in methods or method == "milp" else "lp"
    stats["round_passes"] = len(methods)
    if n_slack:
        s = n_slack // 2
        stats["round_slack_cells"] = np.flatnonzero(lay.active)[
            np.abs(b[nb:nb + s] - b[nb + s:]) > 0].tolist()
    return out, stats


def _round_answers(lay: Layout, answers: Sequence[tuple[str, sp.csr_matrix]],
                   x: np.ndarray, floor: np.ndarray, held: dict[str, np.ndarray] | None = None
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The rows ``a·B`` of a rounding pass's answers that hold a variable, as COO over the
    variables, and their targets ``a·(X* − ⌊X*⌋)`` (``x``, ``floor``: ``X*`` and ``⌊X*⌋`` on
    the variables). An answer ``held`` by an earlier fit pass (under the same name, children ×
    answers) breaks a tie on a half toward what that pass fitted (:func:`toward_held`)."""
    matrices = [matrix for _, matrix in answers]
    r, c, v, has_var = stacked(matrices, lay.var_index, lay.cells)
    live = np.flatnonzero(has_var)
    renumber = np.full(has_var.size, -1, np.int64)
    renumber[live] = np.arange(live.size)
    # a·(X* − ⌊X*⌋) over the answer's variables (the rest is 0 off them), in the order a
    # product with each matrix would sum it
    targets = np.bincount(r, weights=v * (x - floor)[c], minlength=has_var.size)
    if held and any(name in held for name, _ in answers):
        # the held answers in stacked's order (child by child within a matrix), NaN where
        # none was held
        k = lay.var_index.shape[0]
        toward = np.concatenate([
            held[name].ravel() if name in held and held[name].shape == (k, m.shape[0])
            else np.full(k * m.shape[0], np.nan) for name, m in answers])
        # relative to a·⌊X*⌋, as the targets are
        toward -= np.bincount(r, weights=v * floor[c], minlength=has_var.size)
        targets = toward_held(targets, toward)
    return renumber[r], c, v, targets[live]


def toward_held(target: np.ndarray, held: np.ndarray) -> np.ndarray:
    """Rounding targets with their ties broken toward the answers an earlier pass held.

    A later fit pass holds an earlier pass's answer ``h`` within ``±pass_tolerance``; where
    ``h ± pass_tolerance`` is a half (with the default 0.5: ``h`` an integer, as when a parent
    of two children splits its total into integers or halves; with production's 0.1: ``h`` at
    x.4 or x.6, as when five children share a residual) and the later pass pulls the answer
    onto that bound, the target is an exact half,
    and rounding it up or down costs the same: the fit's last digits (804.4999999999 or
    804.5000000009), or the LP solver's pivoting where the cost difference is below its
    tolerance, would decide, and any change of solver, BLAS or formulation could move persons.
    A target within ``_TIE_TOL`` of a half therefore goes ``_TIE_NUDGE`` toward ``h`` (NaN: not
    held; a held answer on the half itself has no side).

    Examples
    --------
    >>> toward_held(np.array([0.4999999999, 0.5000000009, 0.5, 0.3, 0.5]),
    ...              np.array([0.0, 0.0, 1.0, 0.0, np.nan])).tolist()
    [0.4999, 0.4999, 0.5001, 0.3, 0.5]
    """
    mid = np.round(target - 0.5) + 0.5
    side = np.sign(held - mid)
    tie = (np.abs(target - mid) <= _TIE_TOL) & np.isfinite(held) & (
        np.abs(held - mid) > _TIE_TOL)
    return np.where(tie, mid + _TIE_NUDGE * side, target)


def _round_lp(task: NodeTask, stats: dict[str, Any], cost: np.ndarray, rows: "Rows", nb: int,
              n_slack: int, extra_ub: np.ndarray) -> tuple[np.ndarray, str]:
    """One rounding LP over ``B ∈ [0, 1]``, then integer slacks ≥ 0, then further nonnegative
    columns bounded by ``extra_ub``: its vertex when integral, else the MILP's optimum.
    Returns ``(solution, "lp" | "milp")``."""
    lb = np.zeros(nb + n_slack + extra_ub.size)
    ub = np.concatenate([np.ones(nb), np.full(n_slack, np.inf), extra_ub])
    A = rows.matrix("csc")      # HiGHS takes columns
    l, u = rows.bounds()
    sol = solve_lp(LP(cost, A, l, u, lb, ub))
    stats["round_seconds"] += sol.seconds
    if sol.status.ok and np.all(np.abs(sol.x - np.round(sol.x)) <= _INT_TOL):
        return np.round(sol.x), "lp"
    sol = solve_lp(LP(cost, A, l, u, lb, ub, integer=np.ones(cost.size)))
    stats["round_seconds"] += sol.seconds
    if not sol.status.ok:
        raise InfeasibleError(
            f"{task.where}: no integer rounding within ±1 of "
            f"the fit satisfies the constraints ({sol.status.value})")
    return np.round(sol.x), "milp"
