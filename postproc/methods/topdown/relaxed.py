"""The failsafe's solve: a node whose fit is infeasible, with parent consistency relaxed.

Parent consistency is relaxed with slacks cell by cell while the parent's total and its kept
query answers stay exact (the rules: :mod:`postproc.methods.topdown.failsafe`): first the least
total slack (an LP), then the fit with the total slack at most that least value plus
``NodeTask.failsafe_slack`` (1.0 by default, the Census Bureau's rule); the rounding keeps the same
answers exact and allows integer slacks at a large cost
(:func:`~postproc.methods.topdown.rounding.round_node`). When keeping them is infeasible, the
kept set is relaxed one level at a time (margins, then the total). The unit, the relaxation,
the cells that gained and lost persons and the binding constraints are reported
(``docs/topdown.md``, "Failsafe").
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import scipy.sparse as sp

from postproc.infra.solvers import LP, InfeasibleError, solve_lp, solve_qp
from postproc.methods.topdown.failsafe import moved_cells, relaxation_of, relaxation_stages
from postproc.methods.topdown.fit import Fit
from postproc.methods.topdown.rounding import round_node
from postproc.methods.topdown.rows import Layout
from postproc.methods.topdown.task import KeptQuery, NodeTask, QueryData
from postproc.methods.topdown.verify import VerificationError, verify_node

__all__ = []      # the engine calls these (node.py); nothing here is a user's entry point


def failsafe_fit(task: NodeTask, chain: Sequence[str], queries: Sequence[QueryData],
                 stats: dict[str, Any], keep: Sequence[KeptQuery]
                 ) -> tuple[np.ndarray, Layout, dict[str, Any]]:
    """Relax parent consistency with slacks, keeping ``keep`` exact: least total slack, then
    the fit within it. Returns the fit (children × cells), the relaxed layout the rounding
    uses, and the failsafe report. Raises :class:`InfeasibleError` when that is impossible."""
    layout = Layout.relaxed(task, keep)
    fit = Fit.build(task, layout, queries=queries, slack=np.inf, keep=keep)
    kept = ", ".join(q.name for q in keep)
    if fit.infeasible_rows:
        child, row = fit.infeasible_rows[0]
        raise InfeasibleError(
            f"{task.level} {task.children[child]!r}: constraint {task.labels[row]!r} cannot hold "
            "because every cell it counts is forced to 0 (by zero cells"
            + (f", or kept answers ({kept}) the parent has 0 in)" if keep else ")"))
    if fit.kept_unholdable:
        raise InfeasibleError(
            f"{task.where}: kept answer(s) "
            f"{list(fit.kept_unholdable[:5])} hold persons in the parent but no child may hold "
            "persons in their cells")
    n_var = fit.qp.n
    slack_cols = np.arange(n_var - fit.n_slack, n_var)
    c = np.zeros(n_var)
    c[slack_cols] = 1.0
    lp = LP(c, sp.csr_matrix(fit.qp.A), fit.qp.l, fit.qp.u,
            np.full(n_var, -np.inf), np.full(n_var, np.inf))
    lp_sol = solve_lp(lp)
    stats["fit_seconds"] += lp_sol.seconds
    if not lp_sol.status.ok:
        if keep:
            raise InfeasibleError(
                f"{task.where}: infeasible with the parent's {kept} "
                f"kept exact — moving persons between cells cannot meet the children's "
                f"constraints ({lp_sol.status.value})")
        raise InfeasibleError(
            f"{task.where}: infeasible even with parent consistency "
            "relaxed — the children's own constraints contradict each other; check their "
            f"invariant data. Rows: {list(task.labels)}")
    min_slack = fit.least_slack(lp_sol.objective)  # back to persons
    # the fit may use up to failsafe_slack persons of slack beyond the least (the Census
    # Bureau's rule, docs/topdown.md "Failsafe"); 0: held at the least
    within = Fit.build(task, layout, queries=queries,
                       slack=min_slack * (1 + 1e-6) + 1e-6 + task.failsafe_slack, keep=keep)
    sol = solve_qp(within.qp, chain)
    stats["fit_seconds"] += sol.seconds
    if not sol.status.ok:
        raise InfeasibleError(f"{task.where}: failsafe fit failed ({sol.status.value})")
    stats["iterations"] += sol.iterations
    stats["backends"].append(sol.backend)
    stats["objective"] = within.objective(sol)
    x_star = within.histograms(sol.x)
    act, slack = within.slacks(sol.x)
    cells = act[np.abs(slack) > 1e-6]
    binding = _binding_rows(task, x_star)
    fit_slack = float(np.abs(task.parent_hist - x_star.sum(axis=0)).sum())
    report = {"level": task.level, "parent": task.parent, "total_slack": min_slack,
              "slack_allowance": task.failsafe_slack, "fit_slack": fit_slack,
              "cells": cells.tolist(), "binding_constraints": binding}
    return x_star, layout, report


def _binding_rows(task: NodeTask, x: np.ndarray, tol: float = 1e-6) -> list[str]:
    if not task.matrix.shape[0]:
        return []
    vals = (task.matrix @ x.T).T
    tight = (np.isfinite(task.lower) & (vals <= task.lower + tol)) | (
        np.isfinite(task.upper) & (vals >= task.upper - tol))
    out = []
    for child, row in np.argwhere(tight)[:20]:
        out.append(f"{task.level} {task.children[child]!r}: {task.labels[row]}")
    return out



def solve_relaxed(task: NodeTask, chain: Sequence[str], queries: Sequence[QueryData],
                  stats: dict[str, Any], failsafe: bool
                  ) -> tuple[np.ndarray, np.ndarray, dict[str, Any], dict[str, Any]]:
    """Solve an infeasible node with parent consistency relaxed, trying the kept sets of
    :func:`~postproc.methods.topdown.failsafe.relaxation_stages` in order (each failure is
    recorded); with ``failsafe`` off, raise an InfeasibleError describing the first relaxation that
    fits.

    Returns ``(x*, integer histograms, rounding stats, failsafe report)``.
    """
    if task.parent_hist is None:
        raise InfeasibleError(
            f"the {task.level} (root) problem is infeasible: its invariants and constraints "
            f"contradict each other; rows: {list(task.labels)}")
    stages = relaxation_stages(task.kept)
    fallbacks: list[dict[str, Any]] = []
    for i, keep in enumerate(stages):
        last = i == len(stages) - 1
        names = [q.name for q in keep]
        try:
            x_star, layout, report = failsafe_fit(task, chain, queries, stats, keep)
            if not failsafe:
                break
            hist, round_stats = round_node(task, x_star, layout, failsafe=True, keep=keep)
        except VerificationError:
            raise
        except InfeasibleError as exc:
            if last:
                raise
            fallbacks.append({"relaxation": relaxation_of(keep), "kept": names,
                              "reason": str(exc)})
            continue
        moved = round_stats.get("round_slack_cells", [])   # where the children differ
        verify_node(task, hist, allow_cells=moved, keep=keep)
        cells = sorted(set(report["cells"]) | set(moved))
        children_sum = hist.sum(axis=0)
        report.update(
            relaxation=relaxation_of(keep), kept=names, fallbacks=fallbacks, cells=cells,
            parent_minus_children={int(j): int(task.parent_hist[j] - children_sum[j])
                                   for j in cells},
            **moved_cells(task.parent_hist, children_sum))
        return x_star, hist, round_stats, report
    kept = f" with the parent's {', '.join(names)} kept exact" if names else ""
    raise InfeasibleError(
        f"{task.where} are infeasible: the rounded parent cannot "
        f"be split among them under their constraints (a relaxation{kept} would differ from "
        f"the parent in cells {report['cells']}; binding: {report['binding_constraints'][:3]}). "
        "Run with failsafe on to relax parent consistency and report it")
