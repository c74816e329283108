"""The node's promises checked in exact integer arithmetic (:func:`verify_node`): a result that
breaks one raises :class:`VerificationError` — a bug, never passed silently."""

from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np

from hierarchy.geography import Geography
from hierarchy.queries import sparse_copy
from invariants.compile import LevelConstraints, violations
from invariants.sums import sum_violations
from postproc.infra.solvers import InfeasibleError
from postproc.methods.topdown.failsafe import kept_violations
from postproc.methods.topdown.task import KeptQuery, NodeTask

__all__ = ["VerificationError", "verify_node", "verify_level"]


class VerificationError(InfeasibleError):
    """A result broke a promise in exact integer arithmetic (a bug, never silently passed).

    Examples
    --------
    Children that do not sum to their parent:

    >>> task = NodeTask("county", "p", np.array([3, 1]), np.array(["a", "b"], dtype=object),
    ...                 (), sp.csr_matrix((0, 2), dtype=np.int64), np.zeros((2, 0)),
    ...                 np.zeros((2, 0)), np.zeros((2, 2), bool))
    >>> verify_node(task, np.array([[2, 1], [2, 0]]))
    Traceback (most recent call last):
    ...
    postproc.methods.topdown.verify.VerificationError: county children of 'p' fail verification: ...
    4 ≠ 3
    """



def verify_node(task: NodeTask, hist: np.ndarray, *, allow_cells: Sequence[int] = (),
                keep: Sequence[KeptQuery] = ()) -> None:
    """Check every promise in exact integer arithmetic; raise :class:`VerificationError`.

    ``allow_cells`` (a failsafe node): cells where the children may differ from the parent;
    ``keep``: answers of the parent the children must still sum to exactly.

    Examples
    --------
    >>> bounds = np.array([[2.0], [2.0]])          # each child's total is invariant: 2
    >>> task = NodeTask("county", "p", np.array([3, 1]), np.array(["a", "b"], dtype=object),
    ...                 (), sp.csr_matrix(np.ones((1, 2), np.int64)), bounds, bounds.copy(),
    ...                 np.zeros((2, 2), bool), ("tot: total",))
    >>> verify_node(task, np.array([[1, 1], [2, 0]]))            # every promise kept: silent
    >>> verify_node(task, np.array([[2, 1], [1, 0]]))
    Traceback (most recent call last):
    ...
    postproc.methods.topdown.verify.VerificationError: county children of 'p' fail verification:
    'a': tot: total = 3 outside [2, 2]; 'b': tot: total = 1 outside [2, 2]
    """
    problems: list[str] = []
    if hist.dtype != np.int64:
        problems.append(f"histograms are {hist.dtype}, not int64")
    if np.any(hist < 0):
        k, j = np.argwhere(hist < 0)[0]
        problems.append(f"{task.children[k]!r} cell {j} is negative ({hist[k, j]})")
    if np.any(hist[task.zero] != 0):
        k, j = np.argwhere(task.zero & (hist != 0))[0]
        problems.append(f"{task.children[k]!r} cell {j} must be 0, is {hist[k, j]}")
    if task.parent_hist is not None:
        diff = hist.sum(axis=0) - task.parent_hist
        diff[np.asarray(allow_cells, dtype=np.int64)] = 0
        if np.any(diff != 0):
            j = int(np.flatnonzero(diff)[0])
            problems.append(f"children do not sum to the parent in cell {j}: "
                            f"{int(hist[:, j].sum())} ≠ {int(task.parent_hist[j])}")
        problems += kept_violations(keep, task.parent_hist, hist.sum(axis=0))[:5]
    if task.matrix.shape[0]:
        vals = (task.matrix @ hist.T).T
        for k, r in np.argwhere(_outside(vals, task.lower, task.upper))[:5]:
            problems.append(f"{task.children[k]!r}: {task.labels[r] if task.labels else r} = "
                            f"{int(vals[k, r])} outside [{task.lower[k, r]:g}, "
                            f"{task.upper[k, r]:g}]")
    for held in task.sums:     # rows across children: never relaxed
        got = held.matrix @ hist[held.children].sum(axis=0)
        for a in np.flatnonzero(_outside(got, held.lower, held.upper))[:5]:
            problems.append(f"{held.labels[a]} = {int(got[a])} outside [{held.lower[a]:g}, "
                            f"{held.upper[a]:g}]")
    if problems:
        raise VerificationError(f"{task.where} fail verification: "
                                + "; ".join(problems))


def _outside(values: np.ndarray, lower: np.ndarray, upper: np.ndarray) -> np.ndarray:
    """Where integer ``values`` fall outside their finite bounds (whole numbers, compared in
    int64)."""
    lo = np.isfinite(lower) & (values < np.where(np.isfinite(lower), lower, 0).astype(np.int64))
    hi = np.isfinite(upper) & (values > np.where(np.isfinite(upper), upper, 0).astype(np.int64))
    return lo | hi


def verify_level(lc: LevelConstraints, geo: Geography, li: int, hist: np.ndarray,
                 parent_hist: np.ndarray | None, allowed: Mapping[int, list[int]],
                 kept: Mapping[int, tuple[KeptQuery, ...]] | None = None) -> None:
    """Level-wide exact verification (independent of the per-node checks): failsafe parents
    (``allowed``) may differ in their reported cells, but not in their ``kept`` answers.
    A mostly empty level (a part's blocks) is checked and summed from one sparse copy.

    Examples
    --------
    Two states whose counts (cells 0 and 1) must sum to the nation's:

    >>> from invariants.compile import compile_spec
    >>> from invariants.spec import Spec
    >>> from hierarchy.geography import Geography
    >>> from hierarchy.schema import Attribute, Schema
    >>> geo, _ = Geography.from_columns(["nation", "state"], [[["01", "02"]]])
    >>> schema = Schema((Attribute("sex", ("male", "female")),))
    >>> lc = compile_spec(Spec(), schema, geo, {})["state"]
    >>> verify_level(lc, geo, 1, np.array([[1, 2], [0, 1]]), np.array([[1, 3]]), {})
    >>> verify_level(lc, geo, 1, np.array([[1, 2], [1, 1]]), np.array([[1, 3]]), {})
    Traceback (most recent call last):
    ...
    postproc.methods.topdown.verify.VerificationError: TopDown result fails verification:
      state units of nation '0' sum to 2 in cell 0, the parent has 1
    """
    sparse = sparse_copy(hist)
    found = violations(lc, hist, sparse=sparse) + sum_violations(lc.sums, hist)
    if parent_hist is not None:
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
