"""The node's promises checked in exact integer arithmetic (:func:`verify_node`): a result that
breaks one raises :class:`VerificationError` — a bug, never passed silently."""

from __future__ import annotations

from typing import Sequence

import numpy as np

from postproc.infra.solvers import InfeasibleError
from postproc.methods.topdown.failsafe import kept_violations
from postproc.methods.topdown.task import KeptQuery, NodeTask

__all__ = ["VerificationError", "verify_node"]


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
        lo_bad = np.isfinite(task.lower) & (vals < np.where(np.isfinite(task.lower),
                                                             task.lower, 0).astype(np.int64))
        hi_bad = np.isfinite(task.upper) & (vals > np.where(np.isfinite(task.upper),
                                                             task.upper, 0).astype(np.int64))
        for k, r in np.argwhere(lo_bad | hi_bad)[:5]:
            problems.append(f"{task.children[k]!r}: {task.labels[r] if task.labels else r} = "
                            f"{int(vals[k, r])} outside [{task.lower[k, r]:g}, "
                            f"{task.upper[k, r]:g}]")
    if problems:
        raise VerificationError(f"{task.where} fail verification: "
                                + "; ".join(problems))
