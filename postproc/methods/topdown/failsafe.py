"""What the failsafe keeps exact when it relaxes parent consistency (docs/topdown.md).

When a node is infeasible — the rounded parent cannot be split among its children under their
constraints — parent consistency is relaxed: each cell may differ from the parent by a slack.
As in the Census Bureau's 2018 and 2020 TopDown code, the relaxation keeps the parent's total
and some of its query answers *exact*, so persons move between cells instead of being added:

    Σ_k x_k = x̂_p + s⁺ − s⁻   cell by cell, s⁺, s⁻ ≥ 0,
    Q Σ_k x_k = Q x̂_p          for every kept query Q (the total and the kept margins),

minimizing ``Σ (s⁺ + s⁻)`` first, then the usual fit with the total slack at most that minimum
plus an allowance (``topdown(..., failsafe_slack=...)``, default 1.0, as the Census Bureau's 2018
and 2020 code allows; :func:`~postproc.methods.topdown.options.check_failsafe_slack`). The rounding
does the same in integers: its least total slack, then the cells' rounding cost within that least
slack plus the allowance (:func:`rounding_allowance`).

**What is kept** (``topdown(..., failsafe_keep=...)``). ``"auto"`` (the default) keeps the total
and every workload query (but ``detailed``) whose answers sum over all the attributes the
children's constraints distinguish — the Census Bureau's 2018 E2E code keeps the parent's
margin over everything but its configured "minimal schema" (``hhgq``). For the E2E spec the
constraints only see ``hhgq`` (units by type, structural zeros, the total), so the parent's
total and its ``va_hisp_race`` margin (24 answers) are kept and the failsafe moves persons
between group-quarters types within a votingage × hispanic × race class. A list of query names
keeps the total and those queries; an empty list keeps nothing (free cell slacks: persons may be
added or removed — the behaviour before the kept margins existed). The option is parsed in the
run layer (:func:`~postproc.methods.topdown.run.resolve_failsafe_keep`, with the workload and
the level's constraint rows); this module holds the rules, the relaxed solve is
:mod:`~postproc.methods.topdown.relaxed`.

**Fallbacks**, one level at a time and each recorded in the node's failsafe report: when
keeping the margins is itself infeasible (a margin the parent has 0 in, where a child needs a
person), only the total is kept; when that is infeasible too (the children's invariant totals
disagree with the parent's), nothing is.

A parent with no persons whose children must hold persons is refused before any solver runs
(:func:`check_parent_can_hold`): no relaxation that keeps the total can split it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Sequence

import numpy as np
import scipy.sparse as sp

from postproc.infra.solvers import InfeasibleError
from postproc.methods.topdown.options import (  # noqa: F401  (their old home)
    AUTO,
    DEFAULT_FAILSAFE_SLACK,
    check_failsafe_keep,
    check_failsafe_slack,
)
from postproc.methods.topdown.task import (  # noqa: F401  (KeptQuery: its old home)
    KeptQuery,
    NodeTask,
    total_kept,
)

if TYPE_CHECKING:  # pragma: no cover
    pass

__all__ = ["KeptQuery", "AUTO", "RELAXATIONS", "DEFAULT_FAILSAFE_SLACK", "total_kept",
           "relaxation_stages",
           "relaxation_of", "stack_kept", "dead_cells", "kept_violations",
           "check_parent_can_hold", "moved_cells", "check_failsafe_slack",
           "rounding_allowance"]

#: Relaxation labels in failsafe reports, strictest first: ``margins`` (the total and the kept
#: queries exact), ``total`` (only the total exact), ``cells`` (nothing kept: persons may be
#: added or removed).
RELAXATIONS = ("margins", "total", "cells")




def relaxation_of(keep: Sequence[KeptQuery]) -> str:
    """The report label of a kept set: ``margins``, ``total`` or ``cells``.

    Examples
    --------
    >>> halves = KeptQuery("halves", sp.csr_matrix([[1, 1, 0, 0], [0, 0, 1, 1]]))
    >>> relaxation_of(()), relaxation_of((total_kept(4),)), relaxation_of((total_kept(4), halves))
    ('cells', 'total', 'margins')
    """
    if not keep:
        return "cells"
    return "total" if all(q.name == "total" for q in keep) else "margins"


def relaxation_stages(keep: Sequence[KeptQuery]) -> list[tuple[KeptQuery, ...]]:
    """The kept sets to try in order, one level of relaxation at a time: everything kept, then
    only the total (when something else was kept), then nothing.

    Examples
    --------
    >>> t, m = total_kept(2), KeptQuery("m", sp.identity(2, format="csr"))
    >>> [relaxation_of(s) for s in relaxation_stages((t, m))]
    ['margins', 'total', 'cells']
    >>> [relaxation_of(s) for s in relaxation_stages((t,))]
    ['total', 'cells']
    """
    keep = tuple(keep)
    stages = [keep] if keep else []
    total = tuple(q for q in keep if q.name == "total")
    if total and len(total) < len(keep):
        stages.append(total)
    stages.append(())
    return stages


def stack_kept(keep: Sequence[KeptQuery], *, drop_implied: bool = False
               ) -> tuple[sp.csr_matrix, list[str]]:
    """The kept queries' rows stacked (answers × cells, int64) and a label per row.

    With ``drop_implied`` the total is left out when another kept query's answers partition the
    cells (their sum is the total): the problem then has no redundant equality.

    Examples
    --------
    >>> halves = KeptQuery("halves", sp.csr_matrix([[1, 1, 0, 0], [0, 0, 1, 1]]))
    >>> rows, labels = stack_kept((total_kept(4), halves))
    >>> rows.toarray().tolist(), labels
    ([[1, 1, 1, 1], [1, 1, 0, 0], [0, 0, 1, 1]], ['total', 'halves[0]', 'halves[1]'])
    >>> stack_kept((total_kept(4), halves), drop_implied=True)[1]
    ['halves[0]', 'halves[1]']
    """
    keep = list(keep)
    if drop_implied and any(q.partitions_cells for q in keep if q.name != "total"):
        keep = [q for q in keep if q.name != "total"]
    if not keep:
        return sp.csr_matrix((0, 0), dtype=np.int64), []
    labels = [q.name if q.n_answers == 1 else f"{q.name}[{i}]"
              for q in keep for i in range(q.n_answers)]
    return sp.vstack([q.matrix for q in keep], format="csr").astype(np.int64), labels


def dead_cells(keep: Sequence[KeptQuery], parent: np.ndarray) -> np.ndarray:
    """Cells counted by a kept answer that is 0 in the parent: every child must hold 0 there.

    Examples
    --------
    >>> halves = KeptQuery("halves", sp.csr_matrix([[1, 1, 0, 0], [0, 0, 1, 1]]))
    >>> dead_cells((total_kept(4), halves), [2, 1, 0, 0]).tolist()   # halves[1] is 0
    [False, False, True, True]
    >>> dead_cells((), [2, 1, 0, 0]).tolist()                       # nothing kept
    [False, False, False, False]
    """
    parent = np.asarray(parent, dtype=np.int64)
    if not keep:
        return np.zeros(parent.shape[0], dtype=bool)
    m, _ = stack_kept(keep)
    empty = np.flatnonzero(m @ parent == 0)
    return np.asarray(m[empty].sum(axis=0)).ravel() > 0


def kept_violations(keep: Sequence[KeptQuery], parent: np.ndarray, children_sum: np.ndarray
                    ) -> list[str]:
    """Kept answers where the children's sum differs from the parent, in exact int64.

    Examples
    --------
    A person moved from cell 0 to cell 2: the total is kept, the halves are not.

    >>> halves = KeptQuery("halves", sp.csr_matrix([[1, 1, 0, 0], [0, 0, 1, 1]]))
    >>> for problem in kept_violations((total_kept(4), halves), [2, 1, 0, 0], [1, 1, 1, 0]):
    ...     print(problem)
    kept answer halves[0]: children sum to 2, the parent has 3
    kept answer halves[1]: children sum to 1, the parent has 0
    >>> kept_violations((total_kept(4), halves), [2, 1, 0, 0], [1, 2, 0, 0])
    []
    """
    if not keep:
        return []
    m, labels = stack_kept(keep)
    want = m @ np.asarray(parent, dtype=np.int64)
    got = m @ np.asarray(children_sum, dtype=np.int64)
    return [f"kept answer {labels[i]}: children sum to {int(got[i])}, the parent has "
            f"{int(want[i])}" for i in np.flatnonzero(got != want)]


def check_parent_can_hold(task: "NodeTask") -> None:
    """Refuse a parent with no persons whose children must hold persons.

    A child must hold persons when one of its rows with nonnegative coefficients (rows that
    count persons) has a positive lower bound — an invariant total, units of a group-quarters
    type, occupied households. Splitting an empty parent among such children could only add
    persons, so no failsafe is attempted.

    Raises
    ------
    InfeasibleError
        Naming the parent, the children that need persons and the rows that say so.

    Examples
    --------
    >>> import numpy as np, scipy.sparse as sp
    >>> from postproc.methods.topdown.task import NodeTask, QueryData
    >>> tot = np.array([[0.0], [4.0]])
    >>> task = NodeTask("county", "S1", np.zeros(2, np.int64), np.array(["c0", "c1"]),
    ...                 (QueryData("detailed", sp.identity(2, format="csr"), np.ones((2, 2)),
    ...                            np.ones((2, 2))),),
    ...                 sp.csr_matrix(np.ones((1, 2), np.int64)), tot, tot.copy(),
    ...                 np.zeros((2, 2), bool), ("tot: total",))
    >>> check_parent_can_hold(task)
    Traceback (most recent call last):
    ...
    postproc.infra.solvers.base.InfeasibleError: county children of 'S1':
    the parent has no persons, ...
    """
    parent = task.parent_hist
    if parent is None or int(np.sum(parent)) > 0 or not task.matrix.shape[0]:
        return
    m = sp.csr_matrix(task.matrix)
    nonneg = np.asarray((m.minimum(0) != 0).sum(axis=1)).ravel() == 0
    top = np.asarray(m.max(axis=1).toarray()).ravel()
    lower = np.where(nonneg[None, :] & np.isfinite(task.lower) & (top[None, :] > 0),
                     task.lower, 0.0)
    persons = np.ceil(lower / np.maximum(top, 1)[None, :])        # persons each row needs
    need = persons.max(axis=1) if persons.size else np.zeros(task.k)
    children = np.flatnonzero(need > 0)
    if not children.size:
        return
    shown = []
    for k in children[:5]:
        r = int(np.argmax(persons[k]))
        label = task.labels[r] if task.labels else f"row {r}"
        shown.append(f"{str(task.children[k])!r} ({label} ≥ {task.lower[k, r]:g})")
    more = f" and {children.size - 5} more" if children.size > 5 else ""
    raise InfeasibleError(
        f"{task.where}: the parent has no persons, but "
        f"{children.size} of its {task.k} children must hold persons "
        f"({int(need[children].sum()):,} in all): {', '.join(shown)}{more}. Splitting it would "
        "add persons, so it is refused. The parent was rounded to zero while the children's "
        "constraints need persons — typically an invariant (e.g. 'tot') published at the "
        f"{task.level} level but not at the parent's: declare it at the parent's level too, or "
        "check that the published statistics come from the same data")


def moved_cells(parent: np.ndarray, children_sum: np.ndarray) -> dict[str, Any]:
    """Where the children's sum differs from the parent: cells that gained and lost persons
    (children minus parent), and the persons added in all (0 when the total is kept).

    Examples
    --------
    >>> moved_cells([2, 1, 0, 0], [1, 1, 1, 0])          # one person moved, the total kept
    {'gained': {2: 1}, 'lost': {0: 1}, 'persons_added': 0}
    >>> moved_cells([2, 1, 0, 0], [2, 2, 0, 0])["persons_added"]
    1
    """
    diff = np.asarray(children_sum, dtype=np.int64) - np.asarray(parent, dtype=np.int64)
    return {"gained": {int(j): int(diff[j]) for j in np.flatnonzero(diff > 0)},
            "lost": {int(j): int(-diff[j]) for j in np.flatnonzero(diff < 0)},
            "persons_added": int(diff.sum())}





def rounding_allowance(failsafe_slack: float, keep: Sequence[KeptQuery]) -> int:
    """The extra integer slack the failsafe's rounding may use beyond its least total slack.

    The rounding's cell slacks are integers, so a total of at most ``S + failsafe_slack``
    is at most ``S + ⌊failsafe_slack⌋``. When the kept queries hold the children's total to the
    parent's (the total, or a query whose answers partition the cells, is kept), persons only
    move: the slacks sum to twice the persons moved, an even number, and the allowance is the
    largest even number not above ``⌊failsafe_slack⌋`` (0 for the default 1.0: the rounding
    keeps its least slack, as it would with the Census Bureau's rule).

    Examples
    --------
    >>> rounding_allowance(1.0, ()), rounding_allowance(1.0, (total_kept(4),))
    (1, 0)
    >>> rounding_allowance(2.5, (total_kept(4),)), rounding_allowance(0.5, ())
    (2, 0)
    """
    extra = int(np.floor(failsafe_slack + 1e-9))
    if any(q.partitions_cells for q in keep):
        extra -= extra % 2
    return extra
