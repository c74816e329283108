"""TopDown, level by level: root first, then every parent's children, mapped over an executor."""

from __future__ import annotations

import time
from typing import Any, Callable, Mapping, Sequence

import numpy as np
import pandas as pd

from hierarchy.noisy import NoisyHierarchy
from invariants.compile import LevelConstraints
from invariants.spec import Spec
from postproc.errors import PostprocError
from postproc.infra.executors import Executor, get_executor
from postproc.infra.solvers import DEFAULT_QP_CHAIN  # noqa: F401  (imported from here)
from postproc.methods.topdown.failsafe import KeptQuery
from postproc.methods.topdown.groups import solve_nodes
from postproc.methods.topdown.node import NodeResult, NodeTask
from postproc.methods.topdown.options import (  # noqa: F401  (their old home)
    TopDownOptions,
    constrained_attributes,
    resolve_failsafe_keep,
)
from postproc.methods.topdown.plan import RunPlan, level_tasks, plan_run, root_task
from postproc.methods.topdown.task import cell_groups  # noqa: F401  (its old home)
from postproc.methods.topdown.verify import verify_level
from postproc.result import Result

__all__ = ["topdown", "solve_plan", "level_tasks", "root_task"]


def _batches(tasks: list[NodeTask], target_children: int) -> list[list[NodeTask]]:
    out, cur, size = [], [], 0
    for t in tasks:
        cur.append(t)
        size += t.k
        if size >= target_children:
            out.append(cur)
            cur, size = [], 0
    if cur:
        out.append(cur)
    return out


def _largest_first(batches: list[list[NodeTask]]) -> list[int]:
    """The batches' indices, the largest problem first (by children × the parent's nonzero
    cells, ties in order): a level's longest node — a county of a thousand tracts takes
    minutes where the median takes a second — then starts first instead of whenever its turn
    comes, and the workers finish together. Results are put back in order, so the output
    does not depend on it.

    Examples
    --------
    >>> import numpy as np
    >>> from types import SimpleNamespace
    >>> node = lambda k, cells: SimpleNamespace(k=k, n=4, parent_hist=np.array(cells))
    >>> _largest_first([[node(3, [1, 0, 0, 0])], [node(2, [5, 5, 0, 1])],
    ...                 [node(1, [1, 1, 1, 1])], [node(1, [2, 0, 0, 0]), node(1, [2, 0, 0, 0])]])
    [1, 2, 0, 3]
    """
    def size(batch: list[NodeTask]) -> int:
        return sum(t.k * (t.n if t.parent_hist is None else int(np.count_nonzero(t.parent_hist)))
                   for t in batch)
    sizes = [size(batch) for batch in batches]
    return sorted(range(len(batches)), key=lambda b: -sizes[b])


def _label_cells(reports: list[dict[str, Any]], schema) -> None:
    """Name the cells a failsafe report says gained or lost persons (attribute=label, …)."""
    for rep in reports:
        cells = sorted(set(rep.get("gained", {})) | set(rep.get("lost", {})))
        rep["cell_labels"] = {j: ", ".join(f"{a}={v}" for a, v in schema.cell_labels(j).items())
                              for j in cells}


class _Solver:
    """Picklable callable an executor maps over batches."""

    def __init__(self, chain: Sequence[str], failsafe: bool, group_children: int | None = None):
        self.chain = tuple(chain)
        self.failsafe = failsafe
        self.group_children = group_children

    def __call__(self, batch: list[NodeTask]) -> list[NodeResult]:
        return solve_nodes(batch, self.chain, self.failsafe, self.group_children)


def topdown(noisy: NoisyHierarchy, spec: Spec | None = None, *,
            options: TopDownOptions | Mapping[str, Any] | None = None,
            start: tuple[int, Sequence[np.ndarray]] | None = None,
            on_level: Callable[[int, np.ndarray, Result], None] | None = None,
            compiled: Mapping[str, LevelConstraints] | None = None, **option_values: Any
            ) -> Result:
    """TopDown post-processing of a :class:`~hierarchy.noisy.NoisyHierarchy`.

    Root first, then for every parent of each level: the weighted least-squares fit (weights
    1/variance) with parent consistency, invariants, constraints, nonnegativity and zero cells;
    then rounding that keeps every constraint; then verification of every promise in exact integer
    arithmetic (per node and again per level).

    Parameters
    ----------
    noisy : NoisyHierarchy
        Must have measurements at every level.
    spec : Spec, optional
        Invariants and constraints (default: none — only nonnegativity and consistency). A spec
        with constraints must be the one ``noisy`` was measured with (``measure(...,
        spec=spec)`` checks the data against it first), or one it covers: otherwise release-mode
        measurements are refused and a simulation warns
        (:func:`postproc.errors.require_checked_spec`).
    options : TopDownOptions or mapping, optional
        The options below as one record (:class:`~postproc.methods.topdown.options.
        TopDownOptions`); keyword arguments given as well replace its values.
    start : (level index, histograms of levels before it), optional
        Resume after a checkpoint: levels before ``start[0]`` are taken as given (and need no
        measurements).
    on_level : callable(level_index, histograms, partial_result), optional
        Called after each level (e.g. to write a checkpoint).
    compiled : mapping level → LevelConstraints, optional
        The spec already compiled (:func:`invariants.compile.compile_spec`) for at least the
        levels to solve, in the geography's unit order. A run in parts compiles the top levels
        on the whole geography, whose constraints below imply rows at the top
        (:mod:`postproc.apps.runs.parts`). Default: compiled here from ``noisy.invariants``.
    **option_values
        Any option of :class:`~postproc.methods.topdown.options.TopDownOptions`, which says what
        each does (``solver``, ``executor``, ``workers``, ``batch_children``, ``failsafe``,
        ``failsafe_keep``, ``failsafe_slack``, ``passes``, ``pass_tolerance``,
        ``round_passes``, ``progress``, ``group_children``).

    Returns
    -------
    Result

    Examples
    --------
    >>> from hierarchy.synth import synthesize_1940
    >>> from hierarchy.tabulation import tabulate
    >>> from hierarchy.measurement import measure
    >>> from hierarchy.budget import Budget
    >>> from hierarchy.queries import e2e_workload
    >>> from hierarchy.schema import E2E_1940
    >>> levels = ["nation", "state", "county", "enum_dist"]
    >>> data = synthesize_1940(20_000, seed=1)
    >>> truth = tabulate(data.persons, schema=E2E_1940, levels=levels, units=data.units)
    >>> spec = Spec.e2e(levels)          # measure checks the data against it, then publishes
    >>> noisy = measure(truth, e2e_workload(E2E_1940), Budget.e2e(1, levels), "geometric",
    ...                 rng=3, spec=spec)                      # its invariants
    >>> result = topdown(noisy, spec)
    >>> bool((result.histograms[-1] >= 0).all())
    True
    >>> int(result.histograms[0].sum()) == int(truth.counts[0].sum())   # 'tot' is invariant
    True
    """
    t_start = time.perf_counter()
    opts = TopDownOptions.of(options, **option_values)
    first = 0 if start is None else int(start[0])
    plan = plan_run(noisy, spec, opts, first=first, compiled=compiled)
    return solve_plan(plan, start=start, on_level=on_level, t_start=t_start)


def solve_plan(plan: RunPlan, *, start: tuple[int, Sequence[np.ndarray]] | None = None,
               on_level: Callable[[int, np.ndarray, Result], None] | None = None,
               t_start: float | None = None) -> Result:
    """Solve a run's plan (:func:`~postproc.methods.topdown.plan.plan_run`) level by level:
    every level's node problems on the executor, each level checked against every promise.
    :func:`topdown` is ``solve_plan(plan_run(...))``; a method that hands the engine other
    measurements (``bluedown``) replaces the plan's ``measured`` first.

    Examples
    --------
    >>> from hierarchy import E2E_1940, Budget, e2e_workload, measure, synthesize_1940, tabulate
    >>> levels = ["nation", "state"]
    >>> truth = tabulate(synthesize_1940(500, seed=1).persons, schema=E2E_1940, levels=levels)
    >>> noisy = measure(truth, e2e_workload(E2E_1940), Budget.e2e(1, levels), rng=2)
    >>> result = solve_plan(plan_run(noisy, None, TopDownOptions()))
    >>> result.method, [int(h.sum()) > 0 for h in result.histograms]
    ('topdown', [True, True])
    """
    t_start = time.perf_counter() if t_start is None else t_start
    opts, noisy = plan.options, plan.noisy
    hists = _given_histograms(start, noisy.levels)
    stats: list[dict[str, Any]] = []
    reports: list[dict[str, Any]] = []
    timings: dict[str, float] = {}
    ex = get_executor(opts.executor, workers=opts.workers)
    own_executor = not isinstance(opts.executor, Executor)
    try:
        for li in range(plan.first, noisy.geography.depth):
            if li == 1 and plan.joint_root:
                continue                 # solved with the root
            t0 = time.perf_counter()
            tasks = plan.tasks(li, hists)
            if li == 0 and plan.joint_root:
                # an unmeasured root: its children in one problem under its rows; the root is
                # their sum, and both levels are checked as any other
                results = _solve_level(ex, tasks, opts, noisy.levels[1])
                root = results[0].histograms.sum(axis=0, keepdims=True)
                verify_level(plan.compiled[noisy.levels[0]], noisy.geography, 0, root, None,
                             {})
                hists.append(root)
                li = 1
            else:
                results = _solve_level(ex, tasks, opts, noisy.levels[li])
            hists.append(_accept_level(plan, li, tasks, results, hists, stats, reports))
            timings[noisy.levels[li]] = time.perf_counter() - t0
            if on_level is not None:
                done = (0, 1) if plan.joint_root and li == 1 else (li,)
                for at in done:
                    on_level(at, hists[at], _result(plan, hists[:at + 1], stats, reports,
                                                    timings, ex, t_start))
    finally:
        if own_executor:
            ex.close()
    return _result(plan, hists, stats, reports, timings, ex, t_start)


def _given_histograms(start: tuple[int, Sequence[np.ndarray]] | None, levels: Sequence[str]
                      ) -> list[np.ndarray]:
    """The histograms of the levels before the first solved (a resumed run's), checked."""
    if start is None:
        return []
    first, given = start
    hists = [np.asarray(h, dtype=np.int64) for h in given]
    if len(hists) != first:
        raise PostprocError(f"resume needs the histograms of the {first} levels before "
                            f"{levels[first]!r}, got {len(hists)}")
    return hists


def _solve_level(ex: Executor, tasks: list[NodeTask], opts: TopDownOptions, level: str
                 ) -> list[NodeResult]:
    """Solve a level's nodes on the executor, largest batches first; results in task order."""
    batches = _batches(tasks, opts.batch_children)
    solve = _Solver(opts.solver, opts.failsafe, opts.group_children_at(level))
    order = _largest_first(batches)
    solved: list[list[NodeResult]] = [[] for _ in batches]
    bar = _progress(opts.progress, len(tasks), level)
    try:
        for b, batch_results in zip(order, ex.map(solve, [batches[b] for b in order])):
            solved[b] = batch_results
            if bar is not None:
                bar.update(len(batch_results))
    finally:
        if bar is not None:
            bar.close()
    return [r for batch_results in solved for r in batch_results]


def _accept_level(plan: RunPlan, li: int, tasks: list[NodeTask], results: list[NodeResult],
                  hists: list[np.ndarray], stats: list[dict[str, Any]],
                  reports: list[dict[str, Any]]) -> np.ndarray:
    """The level's histograms, checked against every promise (the failsafe's relaxations
    allowed where they were made); its node rows and failsafe reports are appended."""
    hist = np.concatenate([r.histograms for r in results], axis=0)
    allowed: dict[int, list[int]] = {}
    kept: dict[int, tuple[KeptQuery, ...]] = {}
    level_reports = []
    for p, r in enumerate(results):
        stats.append(r.stats)
        if r.failsafe is not None:
            level_reports.append(r.failsafe)
            allowed[p] = list(r.failsafe.get("cells", []))
            names = set(r.failsafe.get("kept", []))
            kept[p] = tuple(q for q in tasks[p].kept if q.name in names)
    _label_cells(level_reports, plan.noisy.schema)
    reports.extend(level_reports)
    verify_level(plan.compiled[plan.noisy.levels[li]], plan.noisy.geography, li, hist,
                 hists[li - 1] if li else None, allowed, kept)
    return hist


def _passes_record(passes: Any) -> Any:
    """Passes as JSON for the provenance: a list of lists, or level → list of lists."""
    if not passes:
        return None
    if isinstance(passes, Mapping):
        return {lv: [list(p) for p in order] if order else None for lv, order in passes.items()}
    return [list(p) for p in passes]


def _result(plan: RunPlan, hists, stats, reports, timings, ex, t_start) -> Result:
    opts, noisy = plan.options, plan.noisy
    solved = noisy.levels[plan.first:len(hists)]
    provenance = {
        "noisy": dict(noisy.provenance), "spec": plan.spec.to_dict(),
        "solver": {"chain": list(opts.solver), **ex.describe(), "failsafe": opts.failsafe,
                   "failsafe_keep": {lv: [q.name for q in plan.keep[lv]] for lv in solved
                                     if lv in plan.keep},
                   "failsafe_slack": opts.failsafe_slack,
                   "passes": _passes_record(opts.passes),
                   "pass_tolerance": opts.pass_tolerance if opts.passes else None,
                   "round_passes": _passes_record(opts.round_passes),
                   "group_children": opts.group_children},
        "timings": {"levels": dict(timings), "total": time.perf_counter() - t_start},
        "failsafe_reports": reports, **plan.notes,
        **({"joint_root": "the root was not measured: its children were solved in one "
                          "problem under its rows, and it is their sum"}
           if plan.joint_root else {}),
    }
    return Result(plan.method, noisy.schema, noisy.geography, noisy.workload, tuple(hists),
                  provenance, pd.DataFrame(stats))


def _progress(enabled: bool, total: int, level: str):
    if not enabled:
        return None
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=f"TopDown {level}", unit="parent", leave=True)
