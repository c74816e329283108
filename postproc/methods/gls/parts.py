"""A part of a tree cut under its split level, measured once: what its upward pass keeps for its
downward pass, and that downward pass (``docs/gls.md``, "At national scale").

The downward pass of a part needs, for every unit that has children, its subtree estimate
``L``, its children's sum ``S`` and its operators (``C``, ``Σ⁺``); for a bottom unit, only what
is asked of it: the answers of a few queries. Since ``B = L + C · step`` and the answers are
linear, a bottom unit's answers are ``Q L`` (kept from the upward pass) plus ``Q C · step``,
which is the same for the units that share an operator and a parent. So a part's
:class:`PartState` is about ``k × cells`` numbers per unit above the bottom and a few per
bottom unit, and :func:`part_downward` needs neither the part's measurements nor its bottom
level's histograms: each part is measured and its bottom level solved once.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np
import scipy.sparse as sp

from postproc.methods.gls.method import GLSProblems
from postproc.methods.gls.symmetry import Symmetry
from postproc.methods.gls.tree import TreeGLS, _add_steps, _Operator, _steps

__all__ = ["PartState", "part_state", "part_downward"]


@dataclass(frozen=True, eq=False)
class PartState:
    """What a part's upward pass keeps for its downward pass.

    Attributes
    ----------
    parents : list of int arrays
        Per level of the part, each unit's parent (the top level's: its split unit's row in
        the part).
    upper : list (per problem) of lists (per level above the bottom) of (L, S, ids)
    bottom_ids : list (per problem) of int arrays
        The bottom units' operator ids.
    operators : list (per problem) of dicts id → (C, Σ⁺)
        The operators the part's units use (Σ⁺ None at the bottom).
    answers : list of float arrays
        Per query, the bottom units' ``Q L`` (units × answers).
    symmetry : Symmetry or None
        The split the problems come from (their coordinates are joined by it).
    batched : list of bool
        Per problem, whether its arrays carry a batch axis (the contrast problems').
    zero : list of bool arrays or None
        Per level above the bottom, the cells fixed at 0.
    fixed_answers : list of bool arrays or None
        Per query, the bottom answers that count only cells fixed at 0.

    Examples
    --------
    Made by :func:`part_state`; two leaves of one cell under one split unit:

    >>> one = np.ones((2, 1))
    >>> problems = GLSProblems(None, [np.array([0, 0])], [["a", "b"]],
    ...                        [[[(np.ones((1, 1)), np.array([[3.0], [5.0]]), one)]]], [[None]], 1)
    >>> state = part_state(problems, problems.fit(downward=False), [np.ones((1, 1))])
    >>> len(state.upper[0]), state.bottom_ids[0].tolist()      # no level above the bottom
    (0, [0, 0])
    """

    parents: list[np.ndarray]
    upper: list[list[tuple[np.ndarray, np.ndarray, np.ndarray]]]
    bottom_ids: list[np.ndarray]
    operators: list[dict[int, tuple[np.ndarray, np.ndarray | None]]]
    answers: list[np.ndarray]
    symmetry: Symmetry | None = None
    batched: tuple[bool, ...] = (False,)
    zero: list[np.ndarray | None] | None = None
    fixed_answers: list[np.ndarray | None] | None = None

    def join(self, arrays: Sequence[np.ndarray]) -> np.ndarray:
        """Histograms from one array per problem."""
        return arrays[0] if self.symmetry is None else self.symmetry.join(*arrays)


def part_state(problems: GLSProblems, fits: Sequence[TreeGLS], queries: Sequence[Any],
               zero: Sequence[np.ndarray | None] | None = None) -> PartState:
    """The state of a part after its upward pass (``fits``: ``problems.fit(downward=False)``),
    with the bottom units' answers of ``queries`` (answers × cells matrices). ``zero``: per
    level of the part, the cells its spec fixes at 0 (units × cells): the downward pass sets
    them, and the bottom answers that count only them, to exactly 0.

    Examples
    --------
    Two leaves of one cell under one split unit, measured 3 and 5 (variance 1):

    >>> from postproc.methods.gls.tree import tree_gls
    >>> one = np.ones((2, 1))
    >>> problems = GLSProblems(None, [np.array([0, 0])], [["a", "b"]],
    ...                        [[[(np.ones((1, 1)), np.array([[3.0], [5.0]]), one)]]], [[None]], 1)
    >>> state = part_state(problems, problems.fit(downward=False), [np.ones((1, 1))])
    >>> state.answers[0].ravel().tolist()
    [3.0, 5.0]
    """
    depth = len(problems.parents)
    upper, bottom_ids, operators = [], [], []
    for fit in fits:
        used: dict[int, tuple[np.ndarray, np.ndarray | None]] = {}
        for li in range(depth):
            for op in np.unique(fit._lower[li]).tolist():
                o: _Operator = fit._operators[op]
                used[op] = (o.covariance, o.sigma_pinv if li < depth - 1 else None)
        upper.append([(fit.subtree[li], fit.child_sums[li], fit._lower[li])
                      for li in range(depth - 1)])
        bottom_ids.append(fit._lower[depth - 1])
        operators.append(used)
    bottom = problems.join([fit.subtree[depth - 1] for fit in fits])
    zero = list(zero) if zero is not None else [None] * depth
    answers, fixed = [], []
    for q in queries:
        q = _dense(q)
        answers.append(np.asarray(bottom @ q.T))
        fixed.append(None if zero[-1] is None else
                     (~np.asarray(zero[-1], bool)).astype(np.float64) @ (q != 0).T.astype(
                         np.float64) == 0)
    return PartState(list(problems.parents), upper, bottom_ids, operators, answers,
                     problems.symmetry, tuple(_batched_problem(problems, p)
                                              for p in range(len(fits))),
                     zero[:-1], fixed)


def part_downward(state: PartState, above: Sequence[np.ndarray], queries: Sequence[Any]
                  ) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """The part's downward pass from its split units' steps (``above``: per problem, a row
    per split unit of the part): the histograms of the levels above its bottom, and the bottom
    units' answers of ``queries`` (the queries :func:`part_state` was given).

    Examples
    --------
    The two leaves of :func:`part_state`'s example, their split unit's estimate found to be 10
    (its children's sum is 8, their covariance 2: step 1):

    >>> from postproc.methods.gls.tree import tree_gls
    >>> one = np.ones((2, 1))
    >>> problems = GLSProblems(None, [np.array([0, 0])], [["a", "b"]],
    ...                        [[[(np.ones((1, 1)), np.array([[3.0], [5.0]]), one)]]], [[None]], 1)
    >>> q = [np.ones((1, 1))]
    >>> state = part_state(problems, problems.fit(downward=False), q)
    >>> _, answers = part_downward(state, [np.array([[1.0]])], q)
    >>> answers[0].ravel().tolist()
    [4.0, 6.0]
    """
    depth = len(state.parents)
    steps = [_batched(np.asarray(a, dtype=np.float64))[state.parents[0]] for a in above]
    hists = []
    for li in range(depth - 1):
        estimates = []
        for p, (means, sums, ids) in enumerate(s[li] for s in state.upper):
            ops = _operator_list(state.operators[p])
            b = _batched(means).copy()
            _add_steps(b, steps[p], ids, ops)
            estimates.append(b)
            steps[p] = _steps(b, _batched(sums), ids, ops)[state.parents[li + 1]]
        hist = state.join([_unbatched(b, state.batched[p]) for p, b in enumerate(estimates)])
        if state.zero and state.zero[li] is not None:
            hist[np.asarray(state.zero[li], bool)] = 0.0
        hists.append(hist)
    return hists, _bottom_answers(state, steps, queries)


def _bottom_answers(state: PartState, steps: list[np.ndarray],
                    queries: Sequence[Any]) -> list[np.ndarray]:
    """``Q L + Q C · step`` for every bottom unit, ``Q C · step`` computed once per distinct
    (operators, parent) pair."""
    parent = state.parents[-1]
    keys = np.stack([*state.bottom_ids, parent], axis=1)
    distinct, first, inverse = np.unique(keys, axis=0, return_index=True, return_inverse=True)
    inverse = inverse.ravel()
    moves = []
    for p, step in enumerate(steps):
        ops = _operator_list(state.operators[p])
        rows = step[first]
        out = np.empty_like(rows)
        for i, op in enumerate(distinct[:, p].tolist()):
            out[i] = rows[i] @ ops[op].covariance
        moves.append(_unbatched(out, state.batched[p]))
    moved = state.join(moves)
    out = [a + np.asarray(moved @ _dense(q).T)[inverse] for a, q in zip(state.answers, queries)]
    for a, fixed in zip(out, state.fixed_answers or [None] * len(out)):
        if fixed is not None:
            a[fixed] = 0.0
    return out


class _Op:
    """An operator as the downward helpers read it."""

    __slots__ = ("covariance", "sigma_pinv")

    def __init__(self, covariance: np.ndarray, sigma_pinv: np.ndarray | None):
        self.covariance, self.sigma_pinv = covariance, sigma_pinv


class _Ops(dict):
    """Operator id → :class:`_Op`, indexed as the tree's operator list is."""


def _operator_list(used: dict[int, tuple[np.ndarray, np.ndarray | None]]) -> _Ops:
    return _Ops({op: _Op(c, s) for op, (c, s) in used.items()})


def _batched(a: np.ndarray) -> np.ndarray:
    return a if a.ndim == 3 else a[:, None, :]


def _unbatched(a: np.ndarray, batched: bool) -> np.ndarray:
    return a if batched else a[:, 0, :]


def _batched_problem(problems: GLSProblems, p: int) -> bool:
    """Whether problem ``p``'s values carry a batch axis (the contrast problems do)."""
    return any(np.ndim(values) == 3 for level in problems.terms[p] for _, values, _ in level)


def _dense(q: Any) -> np.ndarray:
    return q.toarray() if sp.issparse(q) else np.asarray(q, dtype=np.float64)
