"""One parent's problem, solved: :func:`solve_node` fits, rounds and verifies a node.

A :class:`NodeTask` holds everything about one parent and its ``K`` children: the parent's
rounded histogram (``None`` at the root), the children's noisy answers and weights for each
measured query, and the children's compiled constraint rows. Solving it takes plain steps, each
a module of its own (``docs/topdown.md``, "The node problem"):

* :mod:`~postproc.methods.topdown.task` — the node's data (``NodeTask``, ``QueryData``);
* :mod:`~postproc.methods.topdown.rows` — which cells are variables (``Layout``) and the rows;
* :mod:`~postproc.methods.topdown.fit` — the weighted least-squares fit as an object
  (``Fit.build`` poses the QP, ``Fit.histograms`` maps a solution back); here, pass by pass
  (:func:`fit_passes`);
* :mod:`~postproc.methods.topdown.rounding` — integer histograms that keep every constraint;
* :mod:`~postproc.methods.topdown.relaxed` — the failsafe's solve when the fit is infeasible
  (its rules in :mod:`~postproc.methods.topdown.failsafe`);
* :mod:`~postproc.methods.topdown.verify` — every promise checked in exact integers.
"""

from __future__ import annotations

import time
from typing import Any, Sequence

import numpy as np

from postproc.infra.solvers import DEFAULT_QP_CHAIN, InfeasibleError, SolverError, Status, solve_qp
from postproc.methods.topdown.failsafe import check_parent_can_hold
from postproc.methods.topdown.fit import SUBSTITUTE_ENTRIES, Fit, assemble_fit
from postproc.methods.topdown.relaxed import solve_relaxed
from postproc.methods.topdown.rounding import round_node
from postproc.methods.topdown.rows import Layout
from postproc.methods.topdown.task import NodeResult, NodeTask, QueryData
from postproc.methods.topdown.verify import VerificationError, verify_node

__all__ = ["QueryData", "NodeTask", "NodeResult", "solve_node", "assemble_fit", "Fit",
           "VerificationError", "verify_node"]


def fit_passes(task: NodeTask, layout: Layout, chain: Sequence[str]
               ) -> tuple[np.ndarray | None, dict[str, Any], list[QueryData] | None]:
    """The fit, pass by pass, every pass over ``layout``'s variables. Returns
    ``(x*, stats, None)``, or ``(None, stats, queries)`` when the node is infeasible: the
    failsafe then fits ``queries``."""
    stats: dict[str, Any] = {"fit_seconds": 0.0, "iterations": 0, "backends": []}
    passes = task.passes or (tuple(q.name for q in task.queries),)
    # Queries no pass names are fitted in a final pass of their own ("total first, then the
    # rest", docs/topdown.md); without it passes=[["total"]] fitted everything at once.
    listed = {name for p in passes for name in p}
    rest = tuple(q.name for q in task.queries if q.name not in listed)
    if rest:
        passes = tuple(passes) + (rest,)
    done: set[str] = set()
    hold: list[tuple[QueryData, np.ndarray]] = []
    x_star = None
    objective = float("nan")
    for i, names in enumerate(passes):
        last = i == len(passes) - 1
        use = [q for q in task.queries if (q.name in names or (last and q.name not in done))]
        if not use:
            continue
        if not last and all(_pinned(task, q) for q in use):
            # Every answer of this pass is fixed by an equality the children must meet (the
            # state totals under the tot invariant): the pass has nothing to fit, and its QP —
            # every cell a variable, the objective on the totals alone — is so degenerate that
            # Clarabel stopped 'almost solved' at the state level and OSQP took 1,325
            # iterations. Later passes meet the equalities anyway.
            done.update(q.name for q in use)
            continue
        # Short auxiliaries substituted in every pass: the ties a later pass makes on an
        # earlier pass's bounds (exact halves) follow the held answers, not the fit's last
        # digits (_toward_held), so the substituted arithmetic moves no person through them.
        fit = Fit.build(task, layout, queries=use, hold=hold, substitute=SUBSTITUTE_ENTRIES)
        stats.update(variables=fit.variables, rows=fit.rows)
        if fit.infeasible_rows:
            sol = None
        else:
            try:
                # substituted, only the chain's first backend: when it does not solve it,
                # the plain problem goes through the whole chain (SCS alone spent 9 s
                # calling an infeasible substituted node unbounded)
                sol = solve_qp(fit.qp, chain[:1] if fit.substituted else chain)
            except SolverError:
                if not fit.substituted:
                    raise
                sol = None
            if fit.substituted and (sol is None or not sol.status.ok):
                # Not solved with the short auxiliaries substituted: the plain problem decides,
                # the one every backend was checked on (on an infeasible node SCS called the
                # substituted problem unbounded, and the plain one infeasible, as the others
                # did both)
                stats.setdefault("attempts", []).extend(
                    f"{b}:{s} (substituted)" for b, s in (sol.attempts if sol else ()))
                fit = Fit.build(task, layout, queries=use, hold=hold)
                sol = solve_qp(fit.qp, chain)
            stats["fit_seconds"] += sol.seconds
            stats["iterations"] += sol.iterations
            stats["backends"].append(sol.backend)
            # every pass's attempts (a fallback in an early pass is a fallback of the node)
            stats.setdefault("attempts", []).extend(f"{b}:{s}" for b, s in sol.attempts)
        if sol is None or sol.status == Status.INFEASIBLE:
            if task.passes and i > 0:
                raise InfeasibleError(
                    f"{task.where}: multipass pass {i + 1} is "
                    f"infeasible with earlier answers held within ±{task.pass_tolerance}; "
                    "increase the pass tolerance")
            return None, stats, use
        x_star = fit.histograms(sol.x)
        objective = fit.objective(sol)
        for q in use:
            if q.name in names:
                if not last:    # the answers later passes hold (none after the last)
                    hold.append((q, (q.matrix @ x_star.T).T))
                done.add(q.name)
    stats["objective"] = objective
    # the rounding breaks its ties on the held answers' bounds toward them (_toward_held)
    stats["held"] = {q.name: answers for q, answers in hold}
    return x_star, stats, None


def _pinned(task: NodeTask, query: QueryData) -> bool:
    """Whether every answer of ``query`` is a constraint row with equal finite bounds for every
    child (so any feasible fit has the same answers)."""
    if not task.matrix.shape[0]:
        return False
    fixed = np.flatnonzero(np.all((task.lower == task.upper) & np.isfinite(task.lower), axis=0))
    if query.matrix.shape[0] > fixed.size:   # its distinct answers need as many rows
        return False                         # (and a detailed query is never densified here)
    rows = task.matrix[fixed].astype(np.float64).toarray()
    wanted = query.matrix.astype(np.float64).toarray()
    return all(np.any(np.all(rows == answer, axis=1)) for answer in wanted)




# -- entry point --------------------------------------------------------------------------------

def solve_node(task: NodeTask, *, chain: Sequence[str] = DEFAULT_QP_CHAIN,
               failsafe: bool = True, keep_continuous: bool = False) -> NodeResult:
    """Fit, round and verify one node. A single child copies its parent (then is verified).

    Parameters
    ----------
    task : NodeTask
    chain : sequence of str, optional
        QP backends to try in order (:func:`postproc.infra.solvers.solve_qp`).
    failsafe : bool, optional
        Relax parent consistency when the node is infeasible (default), instead of raising.
    keep_continuous : bool, optional
        Keep the fit before rounding in ``NodeResult.continuous``.

    Returns
    -------
    NodeResult

    Raises
    ------
    InfeasibleError
        When the parent has no persons but a child must hold some (before any solver runs);
        when the problem is infeasible and ``failsafe`` is off, or even the failsafe fails.
    VerificationError
        If the result breaks a promise (never expected; it would be a bug).

    Examples
    --------
    Two children whose totals are invariant (2 persons each) share a parent of histogram
    (3, 1):

    >>> detailed = QueryData("detailed", sp.identity(2, format="csr"),
    ...                      np.array([[2.0, 1.0], [2.0, 0.0]]), np.ones((2, 2)))
    >>> def node(totals):
    ...     bounds = np.array(totals, dtype=float)[:, None]
    ...     return NodeTask("county", "p", np.array([3, 1]),
    ...                     np.array(["a", "b"], dtype=object), (detailed,),
    ...                     sp.csr_matrix(np.ones((1, 2), np.int64)), bounds, bounds.copy(),
    ...                     np.zeros((2, 2), bool), ("tot: total",))
    >>> solve_node(node([2, 2])).histograms.tolist()
    [[1, 1], [2, 0]]

    Totals of 3 and 2 cannot split a parent of 4 persons: the failsafe adds a person where it
    must, and says so.

    >>> report = solve_node(node([3, 2])).failsafe
    >>> report["relaxation"], report["gained"], report["persons_added"]
    ('cells', {0: 1}, 1)
    >>> solve_node(node([3, 2]), failsafe=False)
    Traceback (most recent call last):
    ...
    postproc.infra.solvers.base.InfeasibleError: county children of 'p' are infeasible: ...
    """
    t0 = time.perf_counter()
    check_parent_can_hold(task)
    if task.parent_hist is not None and task.k == 1:
        hist = task.parent_hist[None, :].astype(np.int64).copy()
        try:
            verify_node(task, hist)
        except VerificationError:
            # The parent breaks its only child's constraints (possible when they are not
            # implied upward): solve it like any node, so the failsafe or a clear
            # InfeasibleError applies.
            pass
        else:
            return NodeResult(hist, {"level": task.level, "parent": task.parent,
                                     "children": 1, "variables": 0, "rounding": "copy",
                                     "backend": "copy", "fit_seconds": 0.0,
                                     "round_seconds": 0.0, "round_passes": 0,
                                     "seconds": time.perf_counter() - t0,
                                     "objective": float("nan"), "iterations": 0,
                                     "failsafe": False})
    layout = Layout.of(task)        # every fit pass and the rounding share it
    x_star, fit_stats, infeasible = fit_passes(task, layout, chain)
    report = None
    if infeasible is None:
        hist, round_stats = round_node(task, x_star, layout, held=fit_stats.get("held"))
        verify_node(task, hist)
    else:
        x_star, hist, round_stats, report = solve_relaxed(task, chain, infeasible, fit_stats,
                                                          failsafe)
    stats = {"level": task.level, "parent": task.parent, "children": task.k,
             "variables": fit_stats.get("variables", 0),
             "backend": "+".join(dict.fromkeys(fit_stats["backends"])),
             "attempts": ";".join(fit_stats.get("attempts", [])),
             "fit_seconds": fit_stats["fit_seconds"], "iterations": fit_stats["iterations"],
             "objective": fit_stats.get("objective", float("nan")),
             "rounding": round_stats["rounding"], "round_seconds": round_stats["round_seconds"],
             "round_passes": round_stats.get("round_passes", 1),
             "failsafe": report is not None, "seconds": time.perf_counter() - t0}
    return NodeResult(hist, stats, report, x_star if keep_continuous else None)
