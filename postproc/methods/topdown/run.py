"""TopDown, level by level: root first, then every parent's children, mapped over an executor."""

from __future__ import annotations

import time
from typing import Any, Callable, Mapping, Sequence

import numpy as np
import pandas as pd
import scipy.sparse as sp

from hierarchy.noisy import NoisyHierarchy
from hierarchy.queries import Workload, sparse_copy
from hierarchy.schema import Schema
from invariants.compile import LevelConstraints, compile_spec, violations
from invariants.spec import Spec
from postproc.errors import PostprocError, require_checked_spec
from postproc.infra.executors import Executor, get_executor
from postproc.infra.solvers import DEFAULT_QP_CHAIN  # noqa: F401  (imported from here)
from postproc.methods.topdown.failsafe import (
    AUTO,
    DEFAULT_FAILSAFE_SLACK,
    KeptQuery,
    check_failsafe_slack,
    check_parent_can_hold,
    kept_violations,
    total_kept,
)
from postproc.methods.topdown.groups import group_children_at, solve_nodes
from postproc.methods.topdown.node import NodeResult, NodeTask, QueryData, VerificationError
from postproc.methods.topdown.options import TopDownOptions, check_failsafe_keep
from postproc.result import Result

__all__ = ["topdown", "level_tasks", "root_task"]


def _level_queries(noisy: NoisyHierarchy, level: str) -> list[tuple[str, Any, Any]]:
    """(name, matrix, measurement) of every query measured at ``level``, the matrix computed
    once per level: tasks then hold *views* (slices) of the values, never per-task copies, and
    their own children's weights (the level's weights are not made whole: with some answers
    undrawn that was a float per answer, 320 MB per query on a part's blocks)."""
    return [(name, noisy.workload[name].matrix.astype(np.float64).tocsr(),
             noisy.get(level, name)) for name in noisy.queries(level)]


def _queries(level_queries, units: slice) -> tuple[QueryData, ...]:
    return tuple(QueryData(name, matrix, m.values[units], m.weights_of(units))
                 for name, matrix, m in level_queries)


def root_task(noisy: NoisyHierarchy, lc: LevelConstraints, *,
              passes: Sequence[Sequence[str]] | None = None,
              pass_tolerance: float = 0.5,
              round_passes: Sequence[Sequence[str]] | None = None) -> NodeTask:
    """The root problem (one unit, no parent).

    Parameters
    ----------
    noisy : NoisyHierarchy
    lc : LevelConstraints
        The root level's compiled constraints.
    passes : sequence of sequences of query names, optional
        Multipass order (see :func:`topdown`).
    pass_tolerance : float, optional
    round_passes : sequence of sequences of query names or expressions, optional
        Multipass rounding order (see :func:`topdown`).

    Returns
    -------
    NodeTask

    Examples
    --------
    >>> from hierarchy import E2E_1940, Budget, e2e_workload, measure, synthesize_1940, tabulate
    >>> from invariants.spec import Invariant
    >>> levels = ["nation", "state"]
    >>> truth = tabulate(synthesize_1940(500, seed=1).persons, schema=E2E_1940, levels=levels)
    >>> noisy = measure(truth, e2e_workload(E2E_1940), Budget.e2e(1, levels), rng=2,
    ...                 publish={"tot": ["nation"]})
    >>> compiled = compile_spec(Spec([Invariant("tot", "nation")]), E2E_1940, noisy.geography,
    ...                         noisy.invariants)
    >>> root = root_task(noisy, compiled["nation"])
    >>> root.parent_hist is None, root.k, [query.name for query in root.queries], root.labels
    (True, 1, ['detailed', 'hhgq', 'va_hisp_race'], ('tot: total',))
    """
    root = noisy.levels[0]
    sl = slice(0, 1)
    lower, upper, zero = lc.rows_of(sl)
    return NodeTask(root, "", None, noisy.geography.geocodes[0][sl],
                    _queries(_level_queries(noisy, root), sl),
                    lc.matrix, lower, upper, zero, lc.labels,
                    tuple(map(tuple, passes)) if passes else None, pass_tolerance,
                    round_passes=_round_matrices(noisy, round_passes),
                    cell_groups=cell_groups(noisy.schema))


def level_tasks(noisy: NoisyHierarchy, lc: LevelConstraints, level_index: int,
                parent_hists: np.ndarray, *, passes: Sequence[Sequence[str]] | None = None,
                pass_tolerance: float = 0.5,
                failsafe_keep: Sequence[str] | str | tuple[KeptQuery, ...] = AUTO,
                round_passes: Sequence[Sequence[str]] | None = None,
                failsafe_slack: float = DEFAULT_FAILSAFE_SLACK) -> list[NodeTask]:
    """One task per parent of level ``level_index - 1``; ``failsafe_keep`` as for
    :func:`topdown` (or already resolved KeptQuery objects).

    Parameters
    ----------
    noisy : NoisyHierarchy
    lc : LevelConstraints
        The compiled constraints of level ``level_index`` (the children's).
    level_index : int
        The children's level, ≥ 1.
    parent_hists : int64 array (parents × cells)
        The parents' rounded histograms.
    passes, pass_tolerance, failsafe_keep, round_passes, failsafe_slack
        As for :func:`topdown`.

    Returns
    -------
    list of NodeTask
        In parent order.

    Raises
    ------
    PostprocError
        If ``failsafe_keep`` names a query the workload does not have.

    Examples
    --------
    The states of a nation whose histogram TopDown has fitted and rounded:

    >>> from hierarchy import E2E_1940, Budget, e2e_workload, measure, synthesize_1940, tabulate
    >>> from invariants.spec import Invariant
    >>> from postproc.methods.topdown.node import solve_node
    >>> levels = ["nation", "state"]
    >>> truth = tabulate(synthesize_1940(500, seed=1).persons, schema=E2E_1940, levels=levels)
    >>> noisy = measure(truth, e2e_workload(E2E_1940), Budget.e2e(1, levels), rng=2,
    ...                 publish={"tot": levels})
    >>> compiled = compile_spec(Spec([Invariant("tot", "all")]), E2E_1940, noisy.geography,
    ...                         noisy.invariants)
    >>> nation = solve_node(root_task(noisy, compiled["nation"])).histograms
    >>> [task] = level_tasks(noisy, compiled["state"], 1, nation)
    >>> task.parent, task.k, [kept.name for kept in task.kept]
    ('0', 49, ['total', 'hhgq', 'va_hisp_race'])
    >>> states = solve_node(task).histograms
    >>> int(states.sum()), bool((states.sum(axis=1) == noisy.invariants["state"]["tot"]).all())
    (500, True)
    >>> level_tasks(noisy, compiled["state"], 1, nation, failsafe_keep=["race"])
    Traceback (most recent call last):
    ...
    postproc.errors.PostprocError: failsafe_keep names unknown queries ['race']; ...
    """
    keep = _resolve_keep(failsafe_keep, noisy, lc)
    failsafe_slack = check_failsafe_slack(failsafe_slack)
    geo = noisy.geography
    level = geo.levels[level_index]
    offsets = geo.child_offsets(level_index - 1)
    parents = geo.geocodes[level_index - 1]
    children = geo.geocodes[level_index]
    queries = _level_queries(noisy, level)
    rounding = _round_matrices(noisy, round_passes)
    groups = cell_groups(noisy.schema)
    tasks = []
    for p in range(parents.size):
        sl = slice(int(offsets[p]), int(offsets[p + 1]))
        lower, upper, zero = lc.rows_of(sl)
        tasks.append(NodeTask(level, str(parents[p]), parent_hists[p], children[sl],
                              _queries(queries, sl), lc.matrix, lower, upper, zero,
                              lc.labels, tuple(map(tuple, passes)) if passes else None,
                              pass_tolerance, keep, rounding, groups, failsafe_slack))
    return tasks


def cell_groups(schema: Any) -> np.ndarray | None:
    """The cells that differ only in the schema's last attribute, numbered (``None`` when that
    attribute has one level): the fit's :attr:`~postproc.methods.topdown.node.NodeTask.cell_groups`.
    A marginal that does not cross the last attribute counts such cells together.

    Examples
    --------
    >>> from hierarchy import E2E_1940
    >>> E2E_1940.shape, cell_groups(E2E_1940)[[0, 5, 6, 191]].tolist()
    ((8, 2, 2, 6), [0, 0, 1, 31])
    """
    last = int(schema.shape[-1])
    return np.arange(int(schema.size)) // last if last > 1 else None


def _round_matrices(noisy: NoisyHierarchy, round_passes: Sequence[Sequence[str]] | None
                    ) -> tuple[tuple[tuple[str, Any], ...], ...] | None:
    """Rounding passes as (name, float matrix) pairs: a workload query by name, anything else
    parsed as a query expression on the schema (the production rounder targets queries it
    does not measure, e.g. ``marginal(hhgq, hispanic)``)."""
    if not round_passes:
        return None
    from hierarchy.errors import HierarchyError
    from hierarchy.frames import resolve_query

    out = []
    for names in round_passes:
        group = []
        for name in names:
            try:
                query = resolve_query(name, noisy.schema, noisy.workload)
            except HierarchyError as exc:
                raise PostprocError(f"rounding pass: {exc}") from None
            group.append((name, query.matrix.astype(np.float64).tocsr()))
        out.append(tuple(group))
    return tuple(out)


def constrained_attributes(matrix: sp.spmatrix, schema: Schema) -> tuple[str, ...]:
    """Attributes the constraint rows ``matrix`` (rows × cells) tell apart: a row distinguishes
    an attribute when its coefficients are not constant along that attribute's axis.

    Examples
    --------
    >>> from hierarchy.schema import E2E_1940
    >>> from hierarchy.queries import marginal, total
    >>> rows = sp.vstack([total(E2E_1940).matrix, marginal(E2E_1940, "hhgq").matrix])
    >>> constrained_attributes(rows, E2E_1940)
    ('hhgq',)
    """
    if matrix.shape[0] == 0:
        return ()
    dense = np.asarray(sp.csr_matrix(matrix).toarray()).reshape((-1, *schema.shape))
    out = []
    for axis, attr in enumerate(schema.attributes, start=1):
        if np.any(dense != np.take(dense, [0], axis=axis)):
            out.append(attr.name)
    return tuple(out)


def resolve_failsafe_keep(keep: Sequence[str] | str, workload: Workload,
                          constraints: sp.spmatrix | None = None) -> tuple[KeptQuery, ...]:
    """The queries the failsafe keeps exact at one level's parents.

    Parameters
    ----------
    keep : "auto" or sequence of str
        ``"auto"``: the total and every workload query (other than the total itself and
        ``detailed``) whose answers sum over all the attributes ``constraints`` distinguish
        (with no constraint rows, every such query). A list of names: the
        total and those queries (``"total"`` may be listed; it is kept whenever anything is).
        An empty list: nothing (free cell slacks).
    workload : Workload
    constraints : sparse (rows × cells), optional
        The children's compiled constraint rows (``LevelConstraints.matrix``), for ``"auto"``.

    Returns
    -------
    tuple of KeptQuery
        The total first, then the kept queries in workload order; empty for ``()``.

    Raises
    ------
    PostprocError
        ``keep`` is neither ``"auto"`` nor a list of names of workload queries (or ``"total"``).

    Examples
    --------
    >>> from hierarchy.queries import e2e_workload, marginal
    >>> from hierarchy.schema import E2E_1940
    >>> w = e2e_workload(E2E_1940)
    >>> hhgq_rows = marginal(E2E_1940, "hhgq").matrix
    >>> [(q.name, q.n_answers) for q in resolve_failsafe_keep("auto", w, hhgq_rows)]
    [('total', 1), ('va_hisp_race', 24)]
    >>> [q.name for q in resolve_failsafe_keep(["hhgq"], w)]
    ['total', 'hhgq']
    >>> resolve_failsafe_keep((), w)
    ()
    >>> resolve_failsafe_keep(["race"], w)
    Traceback (most recent call last):
    ...
    postproc.errors.PostprocError: failsafe_keep names unknown queries ['race']; the workload ...
    """
    names = check_failsafe_keep(keep, workload)
    schema = workload.schema
    total = total_kept(schema.size)
    if names is None:  # auto
        constrained = set(constrained_attributes(
            constraints if constraints is not None else sp.csr_matrix((0, schema.size)),
            schema))
        chosen = [q for q in workload if q.answer_attributes and q.expression != "detailed"
                  and not constrained & set(q.answer_attributes)]
        return (total, *(KeptQuery(q.name, q.matrix) for q in chosen))
    if not names:
        return ()
    return (total, *(KeptQuery(n, workload[n].matrix) for n in dict.fromkeys(names)
                     if n != "total"))


def _resolve_keep(failsafe_keep, noisy: NoisyHierarchy, lc: LevelConstraints
                  ) -> tuple[KeptQuery, ...]:
    if not isinstance(failsafe_keep, str) and all(isinstance(q, KeptQuery)
                                                  for q in failsafe_keep):
        return tuple(failsafe_keep)
    return resolve_failsafe_keep(failsafe_keep, noisy.workload, lc.matrix)


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


def _refuse_empty_parents(tasks: list[NodeTask], parent_hists: np.ndarray) -> None:
    """Raise (before any solver runs) for a parent with no persons whose children need some."""
    for p in np.flatnonzero(parent_hists.sum(axis=1) == 0):
        check_parent_can_hold(tasks[p])


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


def _check_level(noisy: NoisyHierarchy, lc: LevelConstraints, li: int, hist: np.ndarray,
                 parent_hist: np.ndarray | None, allowed: dict[int, list[int]],
                 kept: dict[int, tuple[KeptQuery, ...]] | None = None) -> None:
    """Level-wide exact verification (independent of the per-node checks): failsafe parents
    (``allowed``) may differ in their reported cells, but not in their ``kept`` answers.
    A mostly empty level (a part's blocks) is checked and summed from one sparse copy."""
    sparse = sparse_copy(hist)
    found = violations(lc, hist, sparse=sparse)
    if parent_hist is not None:
        geo = noisy.geography
        summed = geo.aggregate(hist if sparse is None else sparse, li, li - 1)
        for p, keep in (kept or {}).items():
            found += [f"{geo.levels[li]} units of {geo.levels[li - 1]} "
                      f"{geo.geocodes[li - 1][p]!r}: {v}"
                      for v in kept_violations(keep, parent_hist[p], summed[p])[:5]]
        diff = summed - parent_hist
        for p, cells in allowed.items():
            diff[p, cells] = 0
        for p, j in np.argwhere(diff != 0)[:5]:
            found.append(f"{geo.levels[li]} units of {geo.levels[li - 1]} "
                         f"{geo.geocodes[li - 1][p]!r} sum to {int(summed[p, j])} in cell {j}, "
                         f"the parent has {int(parent_hist[p, j])}")
    if found:
        raise VerificationError("TopDown result fails verification:\n  " + "\n  ".join(found))


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
    require_checked_spec("topdown", noisy, spec)
    spec = spec or Spec()
    geo = noisy.geography
    first = 0 if start is None else int(start[0])
    compiled = _checked_inputs(noisy, spec, opts, first, compiled)
    hists = _start_histograms(start, geo)
    kept_by_level: dict[str, list[str]] = {}
    stats: list[dict[str, Any]] = []
    reports: list[dict[str, Any]] = []
    timings: dict[str, float] = {}
    ex = get_executor(opts.executor, workers=opts.workers)
    own_executor = not isinstance(opts.executor, Executor)
    try:
        for li in range(first, geo.depth):
            t0 = time.perf_counter()
            level = geo.levels[li]
            lc = compiled[level]
            tasks = _tasks_of_level(noisy, lc, li, opts, hists, kept_by_level)
            results = _solve_level(ex, tasks, opts, level)
            hist = _accept_level(noisy, lc, li, tasks, results, hists, stats, reports)
            hists.append(hist)
            timings[level] = time.perf_counter() - t0
            if on_level is not None:
                on_level(li, hist, _result(noisy, spec, hists, stats, reports, timings, opts,
                                           ex, t_start, kept_by_level))
    finally:
        if own_executor:
            ex.close()
    return _result(noisy, spec, hists, stats, reports, timings, opts, ex, t_start,
                   kept_by_level)


def _checked_inputs(noisy: NoisyHierarchy, spec: Spec, opts: TopDownOptions, first: int,
                    compiled: Mapping[str, LevelConstraints] | None
                    ) -> Mapping[str, LevelConstraints]:
    """Check what a run needs before any level is solved (measurements at every level from
    ``first``, the options against the workload, every rounding name), and the compiled
    constraints (compiled here unless given)."""
    geo = noisy.geography
    missing = [lv for lv in geo.levels[first:] if not noisy.queries(lv)]
    if missing:
        raise PostprocError(f"TopDown needs noisy measurements at every level; none at "
                            f"{missing}. Give those levels a share of the budget")
    opts.check_against(noisy.workload, geo.levels)
    for lv in geo.levels:           # every rounding name resolves before any level is solved
        _round_matrices(noisy, opts.round_passes_at(lv))
    if compiled is None:
        return compile_spec(spec, noisy.schema, geo, noisy.invariants)
    _check_compiled(compiled, geo, first)
    return compiled


def _start_histograms(start: tuple[int, Sequence[np.ndarray]] | None, geo) -> list[np.ndarray]:
    """The histograms of the levels before the first solved (a resumed run's), checked."""
    if start is None:
        return []
    first, given = start
    hists = [np.asarray(h, dtype=np.int64) for h in given]
    if len(hists) != first:
        raise PostprocError(f"resume needs the histograms of the {first} levels before "
                            f"{geo.levels[first]!r}, got {len(hists)}")
    return hists


def _tasks_of_level(noisy: NoisyHierarchy, lc: LevelConstraints, li: int,
                    opts: TopDownOptions, hists: list[np.ndarray],
                    kept_by_level: dict[str, list[str]]) -> list[NodeTask]:
    """The node problems of level ``li`` (the root's one, or one per parent)."""
    level = lc.level
    if li == 0:
        return [root_task(noisy, lc, passes=opts.passes_at(level),
                          pass_tolerance=opts.pass_tolerance,
                          round_passes=opts.round_passes_at(level))]
    keep = _resolve_keep(opts.failsafe_keep, noisy, lc)
    kept_by_level[level] = [q.name for q in keep]
    tasks = level_tasks(noisy, lc, li, hists[li - 1], passes=opts.passes_at(level),
                        pass_tolerance=opts.pass_tolerance, failsafe_keep=keep,
                        round_passes=opts.round_passes_at(level),
                        failsafe_slack=opts.failsafe_slack)
    _refuse_empty_parents(tasks, hists[li - 1])
    return tasks


def _solve_level(ex: Executor, tasks: list[NodeTask], opts: TopDownOptions, level: str
                 ) -> list[NodeResult]:
    """Solve a level's nodes on the executor, largest batches first; results in task order."""
    batches = _batches(tasks, opts.batch_children)
    solve = _Solver(opts.solver, opts.failsafe, group_children_at(opts.group_children, level))
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


def _accept_level(noisy: NoisyHierarchy, lc: LevelConstraints, li: int,
                  tasks: list[NodeTask], results: list[NodeResult], hists: list[np.ndarray],
                  stats: list[dict[str, Any]], reports: list[dict[str, Any]]) -> np.ndarray:
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
    _label_cells(level_reports, noisy.schema)
    reports.extend(level_reports)
    _check_level(noisy, lc, li, hist, hists[li - 1] if li else None, allowed, kept)
    return hist


def _check_compiled(compiled: Mapping[str, LevelConstraints], geo, first: int) -> None:
    """Raise unless ``compiled`` has every level from ``first`` on, unit for unit."""
    for li in range(first, geo.depth):
        lc = compiled.get(geo.levels[li])
        if lc is None:
            raise PostprocError(f"compiled= has no constraints for level {geo.levels[li]!r}")
        if lc.n_units != geo.n_units(li) or not np.array_equal(lc.geocodes, geo.geocodes[li]):
            raise PostprocError(f"compiled= constraints of level {geo.levels[li]!r} are for "
                                f"other units than the geography's ({lc.n_units:,} against "
                                f"{geo.n_units(li):,})")


def _passes_record(passes: Any) -> Any:
    """Passes as JSON for the provenance: a list of lists, or level → list of lists."""
    if not passes:
        return None
    if isinstance(passes, Mapping):
        return {lv: [list(p) for p in order] if order else None for lv, order in passes.items()}
    return [list(p) for p in passes]


def _result(noisy, spec, hists, stats, reports, timings, opts: TopDownOptions, ex, t_start,
            kept_by_level) -> Result:
    node_stats = pd.DataFrame(stats)
    provenance = {
        "noisy": dict(noisy.provenance), "spec": spec.to_dict(),
        "solver": {"chain": list(opts.solver), **ex.describe(), "failsafe": opts.failsafe,
                   "failsafe_keep": dict(kept_by_level), "failsafe_slack": opts.failsafe_slack,
                   "passes": _passes_record(opts.passes),
                   "pass_tolerance": opts.pass_tolerance if opts.passes else None,
                   "round_passes": _passes_record(opts.round_passes),
                   "group_children": opts.group_children},
        "timings": {"levels": dict(timings), "total": time.perf_counter() - t_start},
        "failsafe_reports": reports,
    }
    return Result("topdown", noisy.schema, noisy.geography, noisy.workload, tuple(hists),
                  provenance, node_stats)


def _progress(enabled: bool, total: int, level: str):
    if not enabled:
        return None
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=f"TopDown {level}", unit="parent", leave=True)
