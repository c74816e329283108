"""A parent with many children, solved in two stages: groups of consecutive children, then each
group's children.

One county → tract node is one least-squares problem over all of the county's tracts, and its
cost grows faster than the tracts: its parent-consistency rows couple every child, and the
interior-point method's factorizations and iterations grow with them (the largest county of
the 100M-person synthetic run, 1,021 tracts, took 80 s to fit; a 450-tract county took 38.4 s
of CPU to fit, round and verify whole, 17.5 s in groups of 64). With ``group_children = g`` a
parent of more than ``g`` children is solved as

1. a node whose children are ``⌈K / g⌉`` groups of consecutive children (of nearly equal size):
   each group's measurement of an answer is the sum of its children's answers projected on
   what the parent allows (:func:`answer_projection`: per answer, the children's values
   nearest their measurements that are nonnegative and sum to the parent's answer), its
   variance the sum of the children's (weight ``1 / Σ 1/wᵢ``); an answer a child did not draw
   leaves the group's answer unmeasured (weight 0), and unprojected, unless it counts only
   cells that child cannot hold; each group's constraint rows are its children's rows summed
   (bounds added), its zero cells those zero in every child;
2. one node per group, the group's rounded histogram as the parent.

The projection matters: the whole node knows that each child's counts are nonnegative, which
is most of what TopDown gains over the raw measurements for small counts, and a group's raw
sum (of 64 tracts: 8 times one tract's noise) does not; projected, the groups' sums were four
times closer to the whole node's (a 450-tract county, groups of 64). For one query without
bounds the two stages give the one-stage fit exactly (the parent's difference from the
measured children is shared in proportion to variance either way); with several queries, the
children's own bounds and the groups' rounding they differ a little (``docs/scale2020.md``).
This is not the production algorithm, which solves each county whole; it is off unless asked
for. Every promise of the whole node is verified on the result in exact integers as usual.
The groups' summed bounds are necessary, not sufficient, for their children: when a stage is
infeasible the node is solved whole (with the failsafe if it needs it), and its statistics say
so. (Projecting the answers that count what a constraint row counts within that row's bounds
as well was tried and not kept: no better on the 10M run, tract totals slightly worse.)
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Any, Mapping, Sequence

import numpy as np

from postproc.errors import PostprocError
from postproc.infra.solvers import DEFAULT_QP_CHAIN, InfeasibleError
from postproc.infra.solvers.base import SolverError
from postproc.methods.topdown.node import (
    NodeResult,
    NodeTask,
    QueryData,
    VerificationError,
    solve_node,
    verify_node,
)
from postproc.methods.topdown.options import _group_size, check_group_children  # noqa: F401

__all__ = ["solve_grouped", "group_bounds", "grouped_task", "check_group_children",
           "group_children_at", "answer_projection"]








def group_children_at(group_children: Any, level: str) -> int | None:
    """The group size of the parents of ``level``'s units: the one size of every level, or
    the level's entry of a mapping (``None`` when it has none: solved whole).

    Examples
    --------
    >>> group_children_at(64, "block"), group_children_at({"tract": 64}, "block")
    (64, None)
    """
    return group_children.get(level) if isinstance(group_children, Mapping) else group_children


def group_bounds(k: int, group_children: int) -> np.ndarray:
    """Start of each group and the end of the last: ``⌈k / group_children⌉`` groups of
    consecutive children, sizes differing by at most one.

    Examples
    --------
    >>> group_bounds(10, 4).tolist(), group_bounds(8, 4).tolist(), group_bounds(3, 4).tolist()
    ([0, 3, 6, 10], [0, 4, 8], [0, 3])
    """
    _group_size(group_children, "group_children")
    g = max(1, -(-k // group_children))
    return np.floor(np.arange(g + 1) * (k / g)).astype(np.int64)


def grouped_task(task: NodeTask, bounds: np.ndarray) -> NodeTask:
    """The node of the parent and its groups of children (``bounds`` as :func:`group_bounds`).

    Examples
    --------
    Four children in two groups; the second child did not draw its total, which counts a cell
    it can hold, so the first group's total is unmeasured (weight 0):

    >>> total = QueryData("total", sp.csr_matrix(np.ones((1, 2))),
    ...                   np.array([[3.0], [0.0], [2.0], [5.0]]),
    ...                   np.array([[0.5], [0.0], [1.0], [1.0]]))
    >>> task = NodeTask("tract", "c", np.array([6, 4]), np.array(["a", "b", "c", "d"]), (total,),
    ...                 sp.csr_matrix((0, 2), dtype=np.int64), np.zeros((4, 0)),
    ...                 np.zeros((4, 0)), np.array([[0, 0], [0, 0], [1, 0], [0, 1]], bool))
    >>> groups = grouped_task(task, group_bounds(4, 2))
    >>> groups.children.tolist(), groups.zero.tolist()
    (['a…b', 'c…d'], [[False, False], [False, False]])
    >>> groups.queries[0].values.tolist(), groups.queries[0].weights.tolist()
    ([[3.0], [7.0]], [[0.0], [0.5]])
    """
    starts = bounds[:-1]
    live = (task.parent_hist > 0)[None, :] & ~task.zero          # cells each child can hold
    queries = []
    for q in task.queries:
        w = np.asarray(q.weights, dtype=np.float64)
        if w.ndim != 2:
            raise PostprocError(
                f"{task.where}: grouping children (group_children) needs a weight per answer; "
                f"query {q.name!r} has a weight matrix per child — run without grouping")
        counts_live = np.asarray(q.matrix @ live.T.astype(np.float64)).T > 0   # K × answers
        drawn = w > 0
        use = drawn & counts_live           # an answer counting only dead cells is exactly 0
        variance = np.add.reduceat(np.divide(1.0, w, out=np.zeros_like(w), where=use),
                                   starts, axis=0)
        unknown = np.logical_or.reduceat(~drawn & counts_live, starts, axis=0)
        weights = np.divide(1.0, variance, out=np.zeros_like(variance),
                            where=~unknown & (variance > 0))
        values = np.add.reduceat(np.where(use, q.values, 0.0), starts, axis=0)
        # Where every child that can count an answer measured it, the group's value is the sum
        # of the children's answers projected on what the parent allows (nonnegative, summing
        # to the parent's answer), not of the raw measurements (module docstring).
        measured = ~np.any(counts_live & ~drawn, axis=0)
        if measured.any():
            parent_answers = np.rint(q.matrix @ task.parent_hist.astype(np.float64))
            projected = answer_projection(np.asarray(q.values, dtype=np.float64), w,
                                          counts_live & measured[None, :], parent_answers)
            values[:, measured] = np.add.reduceat(projected, starts, axis=0)[:, measured]
        queries.append(QueryData(q.name, q.matrix, values, weights))
    names = np.array([f"{task.children[s]}…{task.children[e - 1]}"
                      for s, e in zip(bounds[:-1], bounds[1:])], dtype=object)
    sums = (lambda a: np.add.reduceat(np.asarray(a, dtype=np.float64), starts, axis=0)
            if a.shape[1] else np.zeros((starts.size, 0)))
    return replace(task, children=names, queries=tuple(queries), lower=sums(task.lower),
                   upper=sums(task.upper),
                   zero=np.logical_and.reduceat(task.zero, starts, axis=0))


def answer_projection(values: np.ndarray, weights: np.ndarray, live: np.ndarray,
                      parent: np.ndarray, iterations: int = 64) -> np.ndarray:
    """For each answer (column) separately, the children's answers ``z`` nearest their
    measurements that the parent allows: minimize ``Σ_c w_c (z_c − y_c)²`` subject to
    ``z_c ≥ 0``, ``z_c = 0`` where the child cannot count the answer (``~live``) and
    ``Σ_c z_c = parent``. The solution is ``z_c = max(0, y_c + λ / w_c)`` on live children, with
    one ``λ`` per answer, found by bisection (vectorized over the answers). Answers with no live
    child, or a parent answer of 0, get 0. Live children need positive weights.

    Examples
    --------
    A parent answer of 4 split among three children measured 3, −1 and 2 with equal weights:
    the negative one is held at 0, the others share the remaining shortfall (−1) equally.

    >>> z = answer_projection(np.array([[3.0], [-1.0], [2.0]]), np.ones((3, 1)),
    ...                       np.ones((3, 1), bool), np.array([4.0]))
    >>> z.round(9).ravel().tolist()
    [2.5, 0.0, 1.5]
    """
    z = np.zeros_like(values)
    cols = np.flatnonzero(live.any(axis=0) & (parent > 0))
    if not cols.size:
        return z
    live_c = live[:, cols]
    if np.any(live_c & ~(weights[:, cols] > 0)):
        raise ValueError("answer_projection: a live child has no positive weight")
    y = np.where(live_c, values[:, cols], 0.0)
    w = np.where(live_c, weights[:, cols], 1.0)
    p = parent[cols].astype(np.float64)
    # Σ max(0, y + λ/w) is 0 at λ = min(−y·w) and at least p at max(−y·w) + p·max(w)
    lo = np.min(np.where(live_c, -y * w, np.inf), axis=0)
    hi = np.max(np.where(live_c, -y * w, -np.inf), axis=0) + p * np.max(
        np.where(live_c, w, 0.0), axis=0)
    for _ in range(iterations):
        mid = (lo + hi) / 2
        over = np.where(live_c, np.maximum(0.0, y + mid / w), 0.0).sum(axis=0) > p
        hi = np.where(over, mid, hi)
        lo = np.where(over, lo, mid)
    z[:, cols] = np.where(live_c, np.maximum(0.0, y + (lo + hi) / 2 / w), 0.0)
    return z


def _members(task: NodeTask, start: int, end: int, parent_hist: np.ndarray) -> NodeTask:
    sl = slice(start, end)
    return replace(task, parent=f"{task.parent} ({task.children[start]}…)",
                   parent_hist=parent_hist, children=task.children[sl],
                   queries=tuple(QueryData(q.name, q.matrix, q.values[sl], q.weights[sl])
                                 for q in task.queries),
                   lower=task.lower[sl], upper=task.upper[sl], zero=task.zero[sl])


def solve_grouped(task: NodeTask, group_children: int | None, *,
                  chain: Sequence[str] = DEFAULT_QP_CHAIN, failsafe: bool = True) -> NodeResult:
    """:func:`~postproc.methods.topdown.node.solve_node`, in two stages (module docstring) when
    the parent has more than ``group_children`` children.

    Parameters
    ----------
    task : NodeTask
    group_children : int or None
        Children per group (at least 2); ``None`` solves every node whole, as is a node
        with sums across its children (:attr:`NodeTask.sums`).
    chain, failsafe
        As for :func:`~postproc.methods.topdown.node.solve_node`.

    Returns
    -------
    NodeResult
        Its statistics add ``groups`` (the number of groups; 1 when the node was solved whole
        after a stage was infeasible, which ``attempts`` then records).

    Examples
    --------
    Six children measured without noise, in groups of three, keep their counts:

    >>> counts = np.array([[1, 0], [2, 1], [0, 3], [4, 0], [1, 1], [0, 2]])
    >>> detailed = QueryData("detailed", sp.identity(2, format="csr"), counts.astype(float),
    ...                      np.ones((6, 2)))
    >>> task = NodeTask("tract", "c", counts.sum(axis=0), np.array(list("abcdef")), (detailed,),
    ...                 sp.csr_matrix((0, 2), dtype=np.int64), np.zeros((6, 0)),
    ...                 np.zeros((6, 0)), np.zeros((6, 2), bool))
    >>> result = solve_grouped(task, 3)
    >>> bool((result.histograms == counts).all()), result.stats["groups"]
    (True, 2)
    """
    if group_children is None or task.parent_hist is None or task.k <= group_children \
            or task.sums:     # a row across children couples the groups: solved whole
        return solve_node(task, chain=chain, failsafe=failsafe)
    t0 = time.perf_counter()
    bounds = group_bounds(task.k, group_children)
    try:
        top = solve_node(grouped_task(task, bounds), chain=chain, failsafe=False)
        parts = [solve_node(_members(task, int(s), int(e), top.histograms[g]), chain=chain,
                            failsafe=False)
                 for g, (s, e) in enumerate(zip(bounds[:-1], bounds[1:]))]
    except VerificationError:
        raise
    except InfeasibleError as exc:
        whole = solve_node(task, chain=chain, failsafe=failsafe)
        first = str(exc).split(":")[0]
        attempts = ";".join(filter(None, [f"groups of {group_children}: infeasible ({first}); "
                                          "solved whole", whole.stats.get("attempts", "")]))
        return NodeResult(whole.histograms, {**whole.stats, "groups": 1, "attempts": attempts},
                          whole.failsafe, whole.continuous)
    hist = np.concatenate([r.histograms for r in parts], axis=0)
    verify_node(task, hist)
    return NodeResult(hist, _merged(task, top, parts, time.perf_counter() - t0))


def _merged(task: NodeTask, top: NodeResult, parts: list[NodeResult], seconds: float
            ) -> dict[str, Any]:
    stages = [top.stats] + [r.stats for r in parts]

    def joined(key: str) -> str:
        return "+".join(dict.fromkeys(s[key] for s in stages if s.get(key)))

    return {"level": task.level, "parent": task.parent, "children": task.k,
            "variables": sum(s["variables"] for s in stages),
            "backend": joined("backend"),
            "attempts": ";".join(s["attempts"] for s in stages if s.get("attempts")),
            "fit_seconds": sum(s["fit_seconds"] for s in stages),
            "iterations": sum(s["iterations"] for s in stages),
            # the children's fit: the sum of the groups' objectives (a group of one child is
            # a copy, without one)
            "objective": float(np.nansum([r.stats["objective"] for r in parts])),
            "rounding": joined("rounding"),
            "round_seconds": sum(s["round_seconds"] for s in stages),
            "round_passes": max(s["round_passes"] for s in stages),
            "failsafe": False, "seconds": seconds, "groups": len(parts)}


def solve_nodes(tasks: Sequence[NodeTask], chain: Sequence[str], failsafe: bool,
                group_children: int | None = None) -> list[NodeResult]:
    """Solve a batch of nodes (the unit of work an executor runs); with ``group_children``, a
    parent of more children in two stages (:func:`solve_grouped`). A SolverError names the
    node it came from (level, parent, children, cells)."""
    results = []
    for task in tasks:
        try:
            results.append(solve_grouped(task, group_children, chain=chain,
                                         failsafe=failsafe))
        except SolverError as exc:
            where = (f"the {task.level} (root) problem ({task.n} cells)"
                     if task.parent_hist is None else
                     f"{task.where} ({task.k} children, {task.n} cells)")
            raise SolverError(f"{where}: {exc}") from None
    return results
