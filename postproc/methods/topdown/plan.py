"""What a TopDown run solves, checked and built from the noisy hierarchy before any level is
solved (:func:`plan_run` gives a :class:`RunPlan`), and the node problems of each level it
hands the engine (:func:`root_task`, :func:`level_tasks`).

Everything TopDown reads from the noisy hierarchy, it reads here, once: the measurements of
each level, the options checked against the workload and the geography, the rounding passes'
queries, the compiled spec, the answers the failsafe keeps at each level
(:func:`~postproc.methods.topdown.options.resolve_failsafe_keep`: the failsafe's option is
resolved in the run layer, its rules are in :mod:`postproc.methods.topdown.failsafe`). A bad
input is refused before the first solver runs; :mod:`postproc.methods.topdown.run` then only
loops over the levels.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Mapping, Sequence

import numpy as np

from hierarchy.noisy import NoisyHierarchy
from invariants.compile import LevelConstraints, compile_spec
from invariants.spec import Spec
from postproc.errors import PostprocError, require_checked_spec
from postproc.methods.topdown.failsafe import check_parent_can_hold
from postproc.methods.topdown.options import (
    AUTO,
    TopDownOptions,
    check_failsafe_slack,
    resolve_failsafe_keep,
    rounding_matrices,
)
from postproc.methods.topdown.task import (
    DEFAULT_FAILSAFE_SLACK,
    ChildSum,
    KeptQuery,
    NodeTask,
    QueryData,
    cell_groups,
)

__all__ = ["RunPlan", "plan_run", "root_task", "level_tasks", "joint_root_task"]


@dataclass(frozen=True, eq=False)
class RunPlan:
    """A TopDown run's inputs, checked, and what it resolved from them once for every level.

    Attributes
    ----------
    noisy : NoisyHierarchy
    spec : Spec
    options : TopDownOptions
    first : int
        The first level to solve (after a checkpoint: the levels before it are given).
    measured : mapping level → list of (query name, float matrix, measurement)
        Each level's measured queries from ``first`` on; the matrices are computed once for
        the run, the tasks hold views (slices) of the measurements.
    compiled : mapping level → LevelConstraints
        The spec compiled for every level (or the ``compiled=`` given, checked).
    rounding : mapping level → rounding passes as (name, matrix) pairs, or None
    keep : mapping level → tuple of KeptQuery
        What the failsafe keeps exact at the parents of each level below the root.
    groups : int array or None
        :func:`cell_groups` of the schema.
    joint_root : bool
        The root is unmeasured: its children are solved in one problem with the root's rows
        across them (:meth:`tasks` at level 0), and the root is their sum.
    method : str
        The name the result carries (``"topdown"``; a method that hands the node engine other
        measurements, as ``bluedown`` does, its own).
    notes : mapping
        What that method adds to the result's provenance.

    Examples
    --------
    >>> from hierarchy import E2E_1940, Budget, e2e_workload, measure, synthesize_1940, tabulate
    >>> levels = ["nation", "state"]
    >>> truth = tabulate(synthesize_1940(500, seed=1).persons, schema=E2E_1940, levels=levels)
    >>> noisy = measure(truth, e2e_workload(E2E_1940), Budget.e2e(1, levels), rng=2)
    >>> plan = plan_run(noisy, None, TopDownOptions())
    >>> [q.name for q in plan.keep["state"]], [(t.parent, t.k) for t in plan.tasks(0, [])]
    (['total', 'hhgq', 'va_hisp_race'], [('', 1)])
    >>> plan_run(noisy, None, TopDownOptions(round_passes=[["sex"]]))
    Traceback (most recent call last):
    ...
    postproc.errors.PostprocError: rounding pass: ...
    """

    noisy: NoisyHierarchy
    spec: Spec
    options: TopDownOptions
    first: int
    measured: Mapping[str, list[tuple[str, Any, Any]]]
    compiled: Mapping[str, LevelConstraints]
    rounding: Mapping[str, Any]
    keep: Mapping[str, tuple[KeptQuery, ...]]
    groups: np.ndarray | None
    joint_root: bool = False
    method: str = "topdown"
    notes: Mapping[str, Any] = field(default_factory=dict)

    def tasks(self, li: int, hists: Sequence[np.ndarray]) -> list[NodeTask]:
        """The node problems of level ``li``: the root's one, or one per parent of the level
        above (whose histograms are ``hists[li - 1]``), checked that an empty parent does not
        have children that must hold persons. With :attr:`joint_root`, level 0's one problem is
        the root's children's (:func:`joint_root_task`)."""
        level = self.noisy.levels[li]
        opts = self.options
        data = (self.noisy, self.measured[level], self.compiled[level], li)
        if li == 0 and self.joint_root:
            below = self.noisy.levels[1]
            [task] = _node_tasks(self.noisy, self.measured[below], self.compiled[below], 1,
                                 None, opts.passes_at(below), opts.pass_tolerance, None,
                                 self.rounding[below], self.groups, DEFAULT_FAILSAFE_SLACK)
            return [joint_root_task(task, self.compiled[level])]
        if li == 0:
            return _node_tasks(*data, None, opts.passes_at(level), opts.pass_tolerance, None,
                               self.rounding[level], self.groups, DEFAULT_FAILSAFE_SLACK)
        tasks = _node_tasks(*data, hists[li - 1], opts.passes_at(level), opts.pass_tolerance,
                            self.keep[level], self.rounding[level], self.groups,
                            opts.failsafe_slack)
        for p in np.flatnonzero(hists[li - 1].sum(axis=1) == 0):
            check_parent_can_hold(tasks[p])
        return tasks


def plan_run(noisy: NoisyHierarchy, spec: Spec | None, options: TopDownOptions, *,
             first: int = 0, compiled: Mapping[str, LevelConstraints] | None = None,
             measured: Mapping[str, list[tuple[str, Any, Any]]] | None = None) -> RunPlan:
    """Check a TopDown run's inputs and resolve what every level needs, before any level is
    solved (the arguments as for :func:`topdown <postproc.methods.topdown.run.topdown>`;
    ``measured``: each level's measurements as ``(name, float matrix, measurement)`` in
    place of ``noisy``'s — what a method that hands the node engine other measurements, as
    ``bluedown`` does, gives it).

    Raises
    ------
    PostprocError
        A spec the measurements were not checked against (release mode), a level without
        measurements, an option the workload or geography does not match, a rounding query
        that does not parse, ``compiled=`` for other units.
    SpecError
        The spec does not compile against the published invariants.

    Examples
    --------
    >>> from hierarchy import E2E_1940, Budget, e2e_workload, measure, synthesize_1940, tabulate
    >>> levels = ["nation", "state"]
    >>> truth = tabulate(synthesize_1940(500, seed=1).persons, schema=E2E_1940, levels=levels)
    >>> noisy = measure(truth, e2e_workload(E2E_1940), Budget.e2e(1, levels), rng=2,
    ...                 publish={"tot": ["nation"]})
    >>> plan = plan_run(noisy, None, TopDownOptions(failsafe_keep=["hhgq"]))
    >>> plan.compiled["state"].n_rows, [q.name for q in plan.keep["state"]]
    (0, ['total', 'hhgq'])
    >>> plan_run(noisy, None, TopDownOptions(failsafe_keep=["race"]))
    Traceback (most recent call last):
    ...
    postproc.errors.PostprocError: failsafe_keep names unknown queries ['race']; ...
    """
    require_checked_spec("topdown", noisy, spec)
    spec = spec or Spec()
    geo, workload = noisy.geography, noisy.workload
    if measured is None:
        matrices = {q.name: q.matrix.astype(np.float64).tocsr() for q in workload}
        measured = {lv: [(name, matrices[name], noisy.get(lv, name))
                         for name in noisy.queries(lv)] for lv in geo.levels[first:]}
    else:
        measured = {lv: list(measured.get(lv, ())) for lv in geo.levels[first:]}
    # a level of only children needs none: each copies its parent (as the Census Bureau's
    # files have it, whose only children's budget their parents spent)
    missing = [lv for lv, queries in measured.items() if not queries and not (
        geo.level_index(lv) and geo.only_children(lv).all())]
    # an unmeasured root over measured children (the state pieces read from a Noisy Measurement
    # File: the US rows are the whole nation's): the children are solved jointly under the
    # root's rows, as the Census Bureau's nation → state problem solves the states
    joint_root = first == 0 and missing == [geo.levels[0]] and geo.depth > 1 and bool(
        measured.get(geo.levels[1]))
    if missing and not joint_root:
        raise PostprocError(f"TopDown needs noisy measurements at every level; none at "
                            f"{missing}. Give those levels a share of the budget")
    options.check_against(workload, geo.levels)
    rounding = {lv: rounding_matrices(options.round_passes_at(lv), noisy.schema, workload)
                for lv in geo.levels}
    if compiled is None:
        compiled = compile_spec(spec, noisy.schema, geo, noisy.invariants)
    else:
        _check_compiled(compiled, geo, first)
    keep = {lv: resolve_failsafe_keep(options.failsafe_keep, workload, compiled[lv].matrix)
            for lv in geo.levels[max(first, 1):]}
    return RunPlan(noisy, spec, options, first, measured, compiled, rounding, keep,
                   cell_groups(noisy.schema), joint_root)


def joint_root_task(task: NodeTask, root: LevelConstraints) -> NodeTask:
    """An unmeasured root's children in one problem (``task``: their node problem without a
    parent): the root's constraint rows become one row across all of them each
    (:class:`ChildSum`), the root's zero cells every child's; the root is then their sum.

    Examples
    --------
    >>> import scipy.sparse as sp
    >>> from hierarchy.geography import Geography
    >>> from hierarchy.schema import Attribute, Schema
    >>> from invariants.spec import Invariant
    >>> schema = Schema((Attribute("sex", ("m", "f")),))
    >>> geo, _ = Geography.from_columns(["nation", "state"], [[["a", "b"]]])
    >>> root = compile_spec(Spec([Invariant("tot", "nation")]), schema, geo,
    ...                     {"nation": {"tot": [8]}})["nation"]
    >>> detailed = QueryData("detailed", sp.identity(2, format="csr"),
    ...                      np.array([[2.0, 1.0], [1.0, 0.0]]), np.ones((2, 2)))
    >>> task = NodeTask("state", "", None, np.array(["a", "b"], dtype=object), (detailed,),
    ...                 sp.csr_matrix((0, 2), dtype=np.int64), np.zeros((2, 0)),
    ...                 np.zeros((2, 0)), np.zeros((2, 2), bool))
    >>> from postproc.methods.topdown.node import solve_node
    >>> hist = solve_node(joint_root_task(task, root)).histograms    # 4 measured, 8 held
    >>> int(hist.sum()), hist.tolist()          # one more person in each of the four cells
    (8, [[3, 2], [2, 1]])
    """
    rows = ChildSum(np.arange(task.k), root.matrix, root.lower[0], root.upper[0],
                    tuple(f"{label} (of the unmeasured root)" for label in root.labels))
    zero = task.zero | root.zero_patterns[root.zero_index[0]][None, :]
    return replace(task, zero=zero, sums=tuple(task.sums) + ((rows,) if root.n_rows else ()))


def _node_tasks(noisy: NoisyHierarchy, queries: list[tuple[str, Any, Any]],
                lc: LevelConstraints, li: int, parent_hists: np.ndarray | None, passes,
                pass_tolerance: float, keep: tuple[KeptQuery, ...] | None, rounding, groups,
                failsafe_slack: float) -> list[NodeTask]:
    """One task per parent of level ``li - 1`` (the root's one when ``li == 0``), holding views
    of the level's measurements ``queries`` (:func:`_level_queries`)."""
    geo = noisy.geography
    level = geo.levels[li]
    passes = tuple(map(tuple, passes)) if passes else None
    children = geo.geocodes[li]
    if li == 0:
        offsets, parents = np.array([0, 1]), [""]
    else:
        offsets, parents = geo.child_offsets(li - 1), geo.geocodes[li - 1]
    sums = _child_sums(lc, geo, li, offsets)
    tasks = []
    for p in range(len(parents)):
        sl = slice(int(offsets[p]), int(offsets[p + 1]))
        lower, upper, zero = lc.rows_of(sl)
        tasks.append(NodeTask(level, str(parents[p]),
                              None if parent_hists is None else parent_hists[p], children[sl],
                              _queries(queries, sl), lc.matrix, lower, upper, zero, lc.labels,
                              passes, pass_tolerance, keep, rounding, groups, failsafe_slack,
                              tuple(sums.get(p, ()))))
    return tasks


def _child_sums(lc: LevelConstraints, geo: Any, li: int, offsets: np.ndarray
                ) -> dict[int, list[ChildSum]]:
    """The level's sums over groups of units (:attr:`LevelConstraints.sums`) as rows across
    the children of each group's parent: parent index → its :class:`ChildSum` items."""
    out: dict[int, list[ChildSum]] = {}
    for held in getattr(lc, "sums", ()):
        for g, units in enumerate(held.units):
            p = int(geo.parents[li][units[0]]) if li else 0
            out.setdefault(p, []).append(ChildSum.exact(units - int(offsets[p]), held.matrix,
                                                        held.values[g], held.labels[g]))
    return out


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
    [task] = _node_tasks(noisy, _level_queries(noisy, noisy.levels[0]), lc, 0, None, passes,
                         pass_tolerance, None,
                         rounding_matrices(round_passes, noisy.schema, noisy.workload),
                         cell_groups(noisy.schema), DEFAULT_FAILSAFE_SLACK)
    return task


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
    return _node_tasks(noisy, _level_queries(noisy, noisy.levels[level_index]), lc,
                       level_index, parent_hists, passes, pass_tolerance,
                       _resolve_keep(failsafe_keep, noisy, lc),
                       rounding_matrices(round_passes, noisy.schema, noisy.workload),
                       cell_groups(noisy.schema), check_failsafe_slack(failsafe_slack))


def _resolve_keep(failsafe_keep, noisy: NoisyHierarchy, lc: LevelConstraints
                  ) -> tuple[KeptQuery, ...]:
    if not isinstance(failsafe_keep, str) and all(isinstance(q, KeptQuery)
                                                  for q in failsafe_keep):
        return tuple(failsafe_keep)
    return resolve_failsafe_keep(failsafe_keep, noisy.workload, lc.matrix)


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


