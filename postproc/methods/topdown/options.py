"""TopDown's options as one frozen, self-validating record: what the registry, a run
configuration, a run in parts and the command line all pass to :func:`~postproc.methods.
topdown.topdown`. Adding an option is adding a field here (with its check); the registry's option
list and types, the configuration's key table and the provenance follow from it.

Every option's parser lives here too (``check_failsafe_keep``, ``check_failsafe_slack``,
``check_group_children``, ``check_pass_tolerance``), not in the modules that do the maths.

A value is checked when the record is made (types and ranges: :class:`TopDownOptions`); the
checks that need the measurements (query names in ``passes``, ``round_passes`` and
``failsafe_keep``, level names in per-level mappings) are :meth:`TopDownOptions.check_against`.

Examples
--------
>>> options = TopDownOptions(passes=[["total"], ["detailed"]], failsafe_slack=0)
>>> options.passes, options.failsafe_slack, options.solver[0]
((('total',), ('detailed',)), 0.0, 'clarabel')
>>> options.replace(workers=2).workers
2
>>> TopDownOptions(batch_children=0)
Traceback (most recent call last):
...
postproc.errors.PostprocError: batch_children must be a positive integer (children per work item),
got 0
>>> [f for f in FIELDS if f not in CONFIG_KEYS.values()]      # set in [postprocess.options]
['batch_children', 'failsafe_slack', 'pass_tolerance', 'progress', 'group_children']
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Mapping, Sequence

import numpy as np
import scipy.sparse as sp

from hierarchy.errors import HierarchyError
from hierarchy.frames import resolve_query
from postproc.errors import PostprocError
from postproc.infra.executors import EXECUTORS, Executor
from postproc.infra.solvers import DEFAULT_QP_CHAIN, check_chain
from postproc.methods.topdown.task import DEFAULT_FAILSAFE_SLACK, KeptQuery, total_kept

if TYPE_CHECKING:  # pragma: no cover
    from hierarchy.queries import Workload
    from hierarchy.schema import Schema

__all__ = ["TopDownOptions", "FIELDS", "CONFIG_KEYS", "RUN_FIELDS", "AUTO",
           "DEFAULT_FAILSAFE_SLACK", "check_pass_tolerance", "check_failsafe_keep",
           "check_failsafe_slack", "check_group_children", "resolve_failsafe_keep",
           "constrained_attributes", "rounding_matrices"]


#: ``failsafe_keep`` value: the total and every workload query summing over the constrained
#: attributes.
AUTO = "auto"



def check_failsafe_keep(keep: Sequence[str] | str, workload: "Workload"
                        ) -> tuple[str, ...] | None:
    """Validate a ``failsafe_keep`` value: ``None`` for ``"auto"``, else the tuple of names
    (each a query of ``workload``, or ``"total"``).

    Examples
    --------
    >>> from hierarchy import E2E_1940, e2e_workload
    >>> workload = e2e_workload(E2E_1940)
    >>> check_failsafe_keep("auto", workload), check_failsafe_keep(["total", "hhgq"], workload)
    (None, ('total', 'hhgq'))
    >>> check_failsafe_keep(["sex"], workload)
    Traceback (most recent call last):
    ...
    postproc.errors.PostprocError: failsafe_keep names unknown queries ['sex']; the workload has
    ['detailed', 'hhgq', 'va_hisp_race'] (and 'total' is always available)
    """
    names = _keep_names(keep)
    if names is None:
        return None
    unknown = [n for n in names if n not in workload and n != "total"]
    if unknown:
        raise PostprocError(f"failsafe_keep names unknown queries {unknown}; the workload has "
                            f"{list(workload.names)} (and 'total' is always available)")
    return names


def _keep_names(keep: Sequence[str] | str) -> tuple[str, ...] | None:
    """The form of a ``failsafe_keep`` value, checked without a workload: ``None`` for
    ``"auto"``, else the tuple of names (strings)."""
    if isinstance(keep, str):
        if keep == AUTO:
            return None
        raise PostprocError(f"failsafe_keep must be {AUTO!r} or a list of query names (an empty "
                            f"list keeps nothing), not {keep!r}; e.g. failsafe_keep=[{keep!r}]")
    try:
        names = tuple(keep)
    except TypeError:
        raise PostprocError(f"failsafe_keep must be {AUTO!r} or a list of query names, not "
                            f"{keep!r}") from None
    if not all(isinstance(n, str) for n in names):
        raise PostprocError(f"failsafe_keep must list query names (strings), not {list(names)}")
    return names


def check_failsafe_slack(value: Any) -> float:
    """``failsafe_slack`` as a float, or a PostprocError saying why not: a finite number ≥ 0.

    The failsafe first finds the least total slack ``S`` a relaxed node needs, then fits (and
    rounds) with the total slack at most ``S + failsafe_slack`` (docs/topdown.md, "Failsafe").

    Examples
    --------
    >>> check_failsafe_slack(1), check_failsafe_slack(0.0)
    (1.0, 0.0)
    >>> check_failsafe_slack(-1)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    postproc.errors.PostprocError: failsafe_slack must be a finite number ≥ 0 (how much ...
    """
    why = ("how much the failsafe's total slack may exceed its least value, in persons; "
           "1.0 as the Census Bureau's code, 0 holds it at the least")
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise PostprocError(f"failsafe_slack must be a number ({why}), got {value!r}")
    if not np.isfinite(value) or value < 0:
        raise PostprocError(f"failsafe_slack must be a finite number ≥ 0 ({why}), got {value!r}")
    return float(value)


def check_group_children(value: Any, levels: Sequence[str] | None = None
                         ) -> int | dict[str, int | None] | None:
    """``group_children`` checked: an int (``None`` stays ``None``), or a mapping level → int
    (or ``None``: that level whole) for levels of their own; a PostprocError saying why not.
    With ``levels``, a mapping may name only those (the levels solved: a key is the level of
    the children, as for per-level passes).

    Examples
    --------
    >>> check_group_children(64), check_group_children(None)
    (64, None)
    >>> check_group_children({"county": 64, "tract": 64}, ["state", "county", "tract"])
    {'county': 64, 'tract': 64}
    >>> check_group_children(1)
    Traceback (most recent call last):
    ...
    postproc.errors.PostprocError: group_children must be at least 2 (children per group), got 1
    >>> check_group_children({"tracts": 64}, ["state", "county", "tract"])
    Traceback (most recent call last):
    ...
    postproc.errors.PostprocError: group_children names levels ['tracts'] that the geography \
does not have; its levels are ['state', 'county', 'tract']
    """
    if isinstance(value, Mapping):
        out = {}
        for lv, size in value.items():
            out[str(lv)] = None if size is None else _group_size(
                size, f"group_children of level {lv!r}", or_table=False)
        unknown = sorted(set(out) - set(levels)) if levels is not None else []
        if unknown:
            raise PostprocError(f"group_children names levels {unknown} that the geography "
                                f"does not have; its levels are {list(levels)}")
        return out
    return None if value is None else _group_size(value, "group_children")


def _group_size(value: Any, what: str, or_table: bool = True) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        table = " or a table of level = integer" if or_table else ""
        raise PostprocError(f"{what} must be an integer (children per group){table}, got "
                            f"{value!r}")
    if value < 2:
        raise PostprocError(f"{what} must be at least 2 (children per group), got {value!r}")
    return int(value)


def check_pass_tolerance(value: Any) -> float:
    """``pass_tolerance`` as a float, or a PostprocError saying why not: a finite number above 0.

    Examples
    --------
    >>> check_pass_tolerance(0.1), check_pass_tolerance(1)
    (0.1, 1.0)
    >>> check_pass_tolerance(0)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    postproc.errors.PostprocError: pass_tolerance must be a finite number above 0 ..., got 0; ...
    """
    why = "how far a later pass may move the answers an earlier pass fitted"
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise PostprocError(f"pass_tolerance must be a number ({why}), got {value!r}")
    if not np.isfinite(value) or value <= 0:
        raise PostprocError(f"pass_tolerance must be a finite number above 0 ({why}), got "
                            f"{value!r}; to hold them nearly exactly use a small value such as "
                            f"0.01 (0 would leave the solver a feasible region of zero width)")
    return float(value)


#: One level's multipass order: passes of query names (or, for the rounder, expressions).
Passes = tuple[tuple[str, ...], ...]


def _passes(value: Any, name: str) -> Passes | dict[str, Passes | None] | None:
    """A ``passes`` / ``round_passes`` value as tuples (a mapping level → passes kept a dict)."""
    if value is None:
        return None
    if isinstance(value, Mapping):
        return {str(level): _passes(order, f"{name} of level {level!r}")
                for level, order in value.items()}
    if isinstance(value, str) or not isinstance(value, Sequence):
        raise PostprocError(f"{name} must be a list of passes, each a list of query names, or a "
                            f"mapping level → such a list; got {value!r}")
    out = []
    for one in value:
        if isinstance(one, str) or not isinstance(one, Sequence) or \
                not all(isinstance(q, str) for q in one):
            raise PostprocError(f"{name} must be a list of passes, each a list of query names; "
                                f"got the pass {one!r}")
        out.append(tuple(one))
    return tuple(out)


@dataclass(frozen=True)
class TopDownOptions:
    """Every option of :func:`~postproc.methods.topdown.topdown`, checked when made.

    Parameters
    ----------
    solver : str or sequence of str
        QP backend chain (see :mod:`postproc.infra.solvers.backends`); on failure the next is
        tried and the switch is recorded in the node statistics.
    executor : 'serial', 'process', 'dask' or an Executor
    workers : int, optional
    batch_children : int
        Children per work item handed to the executor.
    failsafe : bool
        Relax parent consistency (and report it) when a node is infeasible; otherwise raise.
    failsafe_keep : "auto" or list of query names
        What the failsafe keeps exact at the parent while it moves persons between cells (see
        :mod:`postproc.methods.topdown.failsafe`). ``"auto"``: the total and every workload
        query that sums over the attributes the children's constraints distinguish (E2E:
        ``total`` and ``va_hisp_race``). A list: the total and those workload queries. ``[]``:
        nothing — free cell slacks, which may add or remove persons (the behaviour before kept
        answers). When keeping them is infeasible the failsafe keeps only the total, then nothing,
        and records each step in the node's failsafe report.
    failsafe_slack : float, optional
        How much the failsafe's total cell slack may exceed its least value, in persons
        (default 1.0, as the Census Bureau's 2018 and 2020 code; 0 holds it at the least): the
        fit, then the rounding, may use that much more slack where it brings the children
        closer to their measurements (``docs/topdown.md``, "Failsafe"). Recorded in the
        provenance.
    passes : list of lists of query names, or a mapping level → such a list, optional
        Multipass: fit the first list's queries, hold their answers within ``pass_tolerance``,
        then the next, … (queries not listed are fitted in a final pass of their own). A
        mapping gives each level its own order (the 2020 production ordering differs by
        level); a level it does not name fits every query in one pass.
    pass_tolerance : float, optional
        How far a later pass may move an answer an earlier pass fitted (default 0.5; the 2020
        production value is 0.1, :data:`hierarchy.presets.pl94.PRODUCTION_PASS_TOLERANCE`, which the
        ``pl94_2020`` demo and example use). Recorded in the provenance.
    round_passes : list of lists of query names or expressions, or a mapping level → such a
        list, optional
        Multipass rounding (the 2020 production rounder): each pass rounds so that its
        queries' answers are as close as possible (L1) to the fit's, then holds them exactly;
        the cells come last. E.g. ``[["total"], ["hhgq", "marginal(hhgq, hispanic)"]]``
        rounds every child's total to within 1 of its fitted total first. Default: the cells
        only.
    progress : bool
        A progress bar per level.
    group_children : int, or a mapping level → int, optional
        Solve a parent of more children than this in two stages: groups of about this many
        consecutive children (measured by their children's answers, projected on what the
        parent allows, summed), then each group's children
        (:mod:`postproc.methods.topdown.groups`). Much faster for counties of hundreds of
        tracts; not the production algorithm, and the results differ a little. A mapping
        groups only the parents of the levels it names (keyed by the children's level, as
        ``passes``): ``{"county": 64, "tract": 64}`` groups the large states and counties and
        solves every block group whole, which is faster there too (its parents are small;
        ``docs/scale2020.md``). Default: every parent solved whole.

    Raises
    ------
    PostprocError
        A value of the wrong type or out of range, naming the option.

    Examples
    --------
    >>> options = TopDownOptions(solver="osqp", failsafe_keep=["total"], workers=2)
    >>> options.solver, options.failsafe_keep
    (('osqp',), ('total',))
    >>> options.at_levels(["county"]).replace(group_children={"county": 64}).group_children
    {'county': 64}
    """

    solver: tuple[str, ...] | str | None = DEFAULT_QP_CHAIN
    executor: Any = "serial"
    workers: int | None = None
    batch_children: int = 512
    failsafe: bool = True
    failsafe_keep: str | Sequence[str] = AUTO
    failsafe_slack: float = DEFAULT_FAILSAFE_SLACK
    passes: Sequence[Sequence[str]] | Mapping[str, Sequence[Sequence[str]] | None] | None = None
    pass_tolerance: float = 0.5
    round_passes: Sequence[Sequence[str]] | Mapping[str, Sequence[Sequence[str]] | None] | None \
        = None
    progress: bool = False
    group_children: int | Mapping[str, int | None] | None = None

    def __post_init__(self):
        put = object.__setattr__
        put(self, "solver", check_chain(self.solver if self.solver else DEFAULT_QP_CHAIN))
        if not isinstance(self.executor, Executor) and self.executor not in EXECUTORS:
            raise PostprocError(f"executor must be one of {sorted(EXECUTORS)} or an Executor, "
                                f"got {self.executor!r}")
        if self.workers is not None and (isinstance(self.workers, bool) or not isinstance(
                self.workers, (int, np.integer)) or self.workers < 1):
            raise PostprocError(f"workers must be a positive integer or None, got "
                                f"{self.workers!r}")
        if isinstance(self.batch_children, bool) or not isinstance(
                self.batch_children, (int, np.integer)) or self.batch_children < 1:
            raise PostprocError(f"batch_children must be a positive integer (children per work "
                                f"item), got {self.batch_children!r}")
        for name in ("failsafe", "progress"):
            if not isinstance(getattr(self, name), (bool, np.bool_)):
                raise PostprocError(f"{name} must be true or false, got "
                                    f"{getattr(self, name)!r}")
        keep = _keep_names(self.failsafe_keep)
        put(self, "failsafe_keep", AUTO if keep is None else keep)
        put(self, "failsafe_slack", check_failsafe_slack(self.failsafe_slack))
        put(self, "pass_tolerance", check_pass_tolerance(self.pass_tolerance))
        put(self, "passes", _passes(self.passes, "passes"))
        put(self, "round_passes", _passes(self.round_passes, "round_passes"))
        put(self, "group_children", check_group_children(self.group_children))

    @classmethod
    def of(cls, options: "TopDownOptions | Mapping[str, Any] | None" = None,
           **changes: Any) -> "TopDownOptions":
        """``options`` (a record, a mapping of option names, or None: the defaults) with
        ``changes``; an unknown name is an error listing the options.

        Examples
        --------
        >>> TopDownOptions.of({"failsafe": False}, workers=2).workers
        2
        >>> TopDownOptions.of(damping=0.5)
        Traceback (most recent call last):
        ...
        postproc.errors.PostprocError: TopDown has no option(s) ['damping']; its options are
        ['solver', 'executor', 'workers', 'batch_children', 'failsafe', 'failsafe_keep',
        'failsafe_slack', 'passes', 'pass_tolerance', 'round_passes', 'progress', 'group_children']
        """
        given = dict(options.as_dict() if isinstance(options, TopDownOptions) else options or {})
        given.update(changes)
        unknown = [name for name in given if name not in FIELDS]
        if unknown:
            raise PostprocError(f"TopDown has no option(s) {unknown}; its options are "
                                f"{list(FIELDS)}")
        return cls(**given)

    def replace(self, **changes: Any) -> "TopDownOptions":
        """A copy with ``changes`` (checked)."""
        return TopDownOptions.of(self, **changes)

    def as_dict(self) -> dict[str, Any]:
        """The options by name, as they are (the executor may be an object)."""
        return {f: getattr(self, f) for f in FIELDS}

    def passes_at(self, level: str) -> Passes | None:
        """The fitting passes of ``level`` (None: every query in one pass)."""
        return _at(self.passes, level)

    def round_passes_at(self, level: str) -> Passes | None:
        """The rounding passes of ``level`` (None: the cells only)."""
        return _at(self.round_passes, level)

    def group_children_at(self, level: str) -> int | None:
        """The group size of the parents of ``level``'s units (None: solved whole)."""
        return _at(self.group_children, level)

    def at_levels(self, levels: Sequence[str]) -> "TopDownOptions":
        """A copy whose per-level mappings keep only ``levels`` (a run in parts solves the top
        and the bottom levels separately)."""
        def keep(value):
            if isinstance(value, Mapping):
                return {lv: v for lv, v in value.items() if lv in levels}
            return value

        return self.replace(passes=keep(self.passes), round_passes=keep(self.round_passes),
                            group_children=keep(self.group_children))

    def check_against(self, workload: Any, levels: Sequence[str]) -> None:
        """The checks that need the measurements: query names of the workload in ``passes``
        and ``failsafe_keep``, level names in the per-level mappings. (``round_passes``'
        expressions are resolved by TopDown itself.)

        Raises
        ------
        PostprocError
        """
        check_failsafe_keep(self.failsafe_keep, workload)
        check_group_children(self.group_children, list(levels))
        for name in ("passes", "round_passes"):
            value = getattr(self, name)
            if isinstance(value, Mapping):
                unknown = sorted(set(value) - set(levels))
                if unknown:
                    what = "multipass" if name == "passes" else name
                    raise PostprocError(f"{what} names levels {unknown} that the geography "
                                        f"does not have; its levels are {list(levels)}")
        if self.passes:
            per_level = self.passes.values() if isinstance(self.passes, Mapping) \
                else [self.passes]
            known = set(workload.names)
            bad = sorted({q for order in per_level for p in order or () for q in p
                          if q not in known})
            if bad:
                raise PostprocError(f"multipass names unknown queries {bad}; the workload has "
                                    f"{sorted(known)}")


def rounding_matrices(round_passes: Sequence[Sequence[str]] | None, schema: Schema,
                      workload: Workload) -> tuple[tuple[tuple[str, Any], ...], ...] | None:
    """Rounding passes as (name, float matrix) pairs: a workload query by name, anything else
    parsed as a query expression on the schema (the production rounder targets queries it
    does not measure, e.g. ``marginal(hhgq, hispanic)``).

    Examples
    --------
    >>> from hierarchy import E2E_1940, e2e_workload
    >>> [[(name, m.shape) for name, m in group] for group in rounding_matrices(
    ...     [["hhgq"], ["marginal(votingage)"]], E2E_1940, e2e_workload(E2E_1940))]
    [[('hhgq', (8, 192))], [('marginal(votingage)', (2, 192))]]
    >>> rounding_matrices([["sexx"]], E2E_1940, e2e_workload(E2E_1940))
    Traceback (most recent call last):
    ...
    postproc.errors.PostprocError: rounding pass: ...
    """
    if not round_passes:
        return None
    out = []
    for names in round_passes:
        group = []
        for name in names:
            try:
                query = resolve_query(name, schema, workload)
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


def _at(value: Any, level: str) -> Any:
    if isinstance(value, Mapping):
        return value.get(level)
    return value


#: The option names, in order.
FIELDS: tuple[str, ...] = tuple(f.name for f in dataclasses.fields(TopDownOptions))
#: ``[solver]`` keys of a run configuration → the option each sets; the others are set in
#: ``[postprocess.options]`` (``scheduler`` is the Dask executor's, not TopDown's).
CONFIG_KEYS: dict[str, str] = {"chain": "solver", "executor": "executor", "workers": "workers",
                               "failsafe": "failsafe", "failsafe_keep": "failsafe_keep",
                               "passes": "passes", "round_passes": "round_passes"}
#: The options a run sets itself (from ``[solver]`` and the command line), refused in
#: ``[postprocess.options]``.
RUN_FIELDS: frozenset[str] = frozenset(CONFIG_KEYS.values()) | {"progress"}
