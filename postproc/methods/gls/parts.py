"""A part of a tree cut under its split level, measured once: its upward pass, what that keeps
for its downward pass, and the downward pass (``docs/gls.md``, "At national scale").

**The bottom level on its active cells.** A bottom unit's subtree estimate ``L`` is the BLUE of
its histogram from its own measurements: the units do not interact until their parents sum
them. Most of a bottom unit's cells are fixed at 0 by the spec (a 2020 block with households
only: 185 of 2,016 cells active on average, a quarter of the blocks none), and the answers that
count only fixed cells carry no information about the others. So the bottom units are solved
in groups that share their active cells, each on those cells only (the queries' columns and the
answers that count one of them; the equalities' columns): the same estimate, exactly — the
fixed cells' coordinates are 0 and drop out of every term — at about a tenth of the work.
Their sums and covariances, embedded back in the whole cells, are what the level above gets
from below (:class:`~postproc.methods.gls.tree.Below`).

**What the downward pass needs.** For every unit that has children, its subtree estimate
``L``, its children's sum ``S`` and its operators (``C``, ``Σ⁺``); for a bottom unit, only what
is asked of it: the answers of a few queries. Since ``B = L + C · step`` and the answers are
linear, a bottom unit's answers are ``Q L`` (kept from the upward pass) plus ``Q C · step``,
the same for the units that share an operator and a parent. So a part's :class:`PartState` is
about ``k × cells`` numbers per unit above the bottom and a few per bottom unit, and
:func:`part_downward` needs neither the part's measurements nor its bottom level's histograms.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Any, Mapping, Sequence

import numpy as np
import scipy.sparse as sp

from hierarchy.noisy import NoisyHierarchy
from invariants.compile import LevelConstraints
from postproc.errors import PostprocError
from postproc.methods.gls.bluedown import SubtreeMeasurement, split_weights, subtree_measurements
from postproc.methods.gls.information import _Children
from postproc.methods.gls.method import (
    equalities_of,
    gls_problems,
    level_terms,
    split_problems,
)
from postproc.methods.gls.operators import _answer_variances, step_precision
from postproc.methods.gls.symmetry import Symmetry, find_symmetry
from postproc.methods.gls.tree import Below, Equalities, _add_steps, _steps

__all__ = ["PartState", "BottomGroup", "part_upward", "part_downward", "part_variances",
           "part_subtrees"]


@dataclass(frozen=True, eq=False)
class BottomGroup:
    """Bottom units that share their active cells, solved on them.

    Attributes
    ----------
    rows : int array
        The units (rows of the bottom level).
    coordinates : int array
        Their active coordinates in a problem's cells (groups of cells on the succinct path,
        cells on the general path).
    cells : int array
        Their active cells of the histogram.
    symmetry : Symmetry or None
        The split of the active cells (``len(coordinates)`` groups).
    ids : list (per problem) of int arrays
        Each unit's operator.
    covariances : list (per problem) of lists of arrays
        The operators' covariances ``C`` (active coordinates × active coordinates).

    Examples
    --------
    >>> group = BottomGroup(np.array([0, 2]), np.array([1]), np.array([1]), None,
    ...                     [np.array([0, 0])], [[np.eye(1)]])
    >>> group.rows.tolist(), group.cells.tolist()
    ([0, 2], [1])
    """

    rows: np.ndarray
    coordinates: np.ndarray
    cells: np.ndarray
    symmetry: Symmetry | None
    ids: list[np.ndarray]
    covariances: list[list[np.ndarray]]

    def join(self, arrays: Sequence[np.ndarray]) -> np.ndarray:
        """The group's active cells (units × len(cells)) from one array per problem."""
        return arrays[0] if self.symmetry is None else self.symmetry.join(*arrays)


@dataclass(frozen=True, eq=False)
class PartState:
    """What a part's upward pass keeps for its downward pass.

    Attributes
    ----------
    parents : list of int arrays
        Per level of the part, each unit's parent (the top level's: its split unit's row in
        the part).
    upper : list (per problem) of lists (per level above the bottom) of (L, S, ids)
    operators : list (per problem) of dicts id → (C, Σ⁺)
        The operators of the units above the bottom.
    groups : list of BottomGroup
        The bottom units, by their active cells.
    answers : list of float arrays
        Per query, the bottom units' ``Q L`` (units × answers).
    symmetry : Symmetry or None
        The split of the whole cells (the upper levels' coordinates are joined by it).
    batched : tuple of bool
        Per problem, whether its arrays carry a batch axis (the contrast problems').
    zero : list of bool arrays
        Per level above the bottom, the cells fixed at 0.
    fixed_answers : list of bool arrays
        Per query, the bottom answers that count only cells fixed at 0.
    bottom_means : list or None
        Per group, its units' subtree estimates per problem (None for a group without active
        cells), when the upward pass was asked to keep them (``bluedown`` reads them:
        :func:`part_subtrees`).
    coordinates : int
        A problem's coordinates (cells; on the succinct path, groups of cells).

    Examples
    --------
    Made by :func:`part_upward`; see :func:`part_downward`.

    >>> PartState([np.array([0])], [[]], [{}], [], [np.zeros((1, 1))], None, (False,), [],
    ...           [np.ones((1, 1), bool)]).answers[0].shape
    (1, 1)
    """

    parents: list[np.ndarray]
    upper: list[list[tuple[np.ndarray, np.ndarray, np.ndarray]]]
    operators: list[dict[int, tuple[np.ndarray, np.ndarray | None]]]
    groups: list[BottomGroup]
    answers: list[np.ndarray]
    symmetry: Symmetry | None
    batched: tuple[bool, ...]
    zero: list[np.ndarray]
    fixed_answers: list[np.ndarray]
    bottom_means: list[list[np.ndarray] | None] | None = None
    coordinates: int = 0

    def join(self, arrays: Sequence[np.ndarray]) -> np.ndarray:
        """Histograms from one array per problem."""
        return arrays[0] if self.symmetry is None else self.symmetry.join(*arrays)


def part_upward(noisy: NoisyHierarchy, compiled: Mapping[str, LevelConstraints],
                levels: Sequence[str], split_units: int, queries: Sequence[Any], *,
                keep_means: bool = False) -> tuple[PartState, list[Below]]:
    """A part's upward pass: its bottom level by groups of active cells, the levels above it as
    a forest under the part's ``split_units`` split units; returns what its downward pass needs
    and what its split units need from below (a :class:`Below` per problem).

    Parameters
    ----------
    noisy : NoisyHierarchy
        The part's measurement (its levels below the split).
    compiled : mapping
        The part's spec compiled for its levels.
    levels : sequence of str
        The part's levels below the split, the bottom last.
    split_units : int
        How many split units the part has (its top level's parents).
    queries : sequence of (answers × cells) matrices
        What is asked of the bottom units.
    keep_means : bool
        Keep the bottom units' subtree estimates in the state (for :func:`part_subtrees`).

    Examples
    --------
    A part of one split unit over two blocks of one cell, measured 3 and 5 (variance 1): the
    split unit is told their sum 8 with variance 2.

    >>> from hierarchy.geography import Geography
    >>> from hierarchy.noisy import Measurement
    >>> from hierarchy.queries import Workload, total
    >>> from hierarchy.schema import Attribute, Schema
    >>> from invariants.compile import compile_spec
    >>> from invariants.spec import Spec
    >>> schema = Schema((Attribute("all", ("all",)),))
    >>> geo = Geography(("part", "tract", "block"), (np.array(["p"]), np.array(["t"]),
    ...                 np.array(["a", "b"])), (np.array([-1]), np.array([0]), np.array([0, 0])))
    >>> workload = Workload((total(schema),))
    >>> noisy = NoisyHierarchy(schema, geo, workload,
    ...     {"block": {"total": Measurement("total", np.array([[3], [5]]), 1.0)}}, {}, {})
    >>> state, below = part_upward(noisy, compile_spec(Spec(), schema, geo, {}), ["block"], 1,
    ...                            [np.ones((1, 1))])
    >>> below[0].sums.tolist(), [c.tolist() for c in below[0].covariances]
    ([[8.0]], [[[2.0]]])
    """
    geo = noisy.geography
    levels = list(levels)
    terms = [level_terms(noisy, level) for level in levels[:-1]]
    terms.append([(noisy.workload[name].matrix, noisy.get(levels[-1], name).values,
                   UnitWeights(noisy.get(levels[-1], name)))
                  for name in noisy.queries(levels[-1])])
    equalities = [equalities_of(compiled[level]) for level in levels]
    symmetry, _ = find_symmetry(noisy.schema.shape, terms, equalities, noisy.schema.names)
    bottom_parent = np.asarray(geo.parents[geo.level_index(levels[-1])])
    above = split_units if len(levels) == 1 else geo.n_units(levels[-2])
    groups, means = _bottom_groups(terms[-1], equalities[-1], bottom_parent.size, symmetry,
                                   noisy.schema.shape, [str(g) for g in geo.geocodes[-1]])
    size = noisy.schema.size if symmetry is None else symmetry.groups
    problems = len(groups[0].ids) if groups else (1 if symmetry is None else 2)
    batched = (False,) if symmetry is None else (False, True)    # the contrast problems are
    batches = [(symmetry.size - 1,) if b else () for b in batched]   # k = R − 1 at once
    from_bottom = [_below(groups, means, p, bottom_parent, above, size, batches[p])
                   for p in range(problems)]
    upper, operators = [[] for _ in range(problems)], [{} for _ in range(problems)]
    below = from_bottom
    if len(levels) > 1:
        upper_problems = gls_problems(noisy, compiled, levels=levels[:-1], symmetry=symmetry)
        fits = upper_problems.fit(below=from_bottom, downward=False)
        below = [Below.of_part(fit, upper_problems.parents[0], split_units) for fit in fits]
        for p, fit in enumerate(fits):
            upper[p] = [(fit.subtree[li], fit.child_sums[li], fit._lower[li])
                        for li in range(len(levels) - 1)]
            operators[p] = {op: (fit._operators[op].covariance, fit._operators[op].sigma_pinv)
                            for li in range(len(levels) - 1)
                            for op in np.unique(fit._lower[li]).tolist()}
    answers, fixed = _bottom_answers(groups, means, bottom_parent.size, queries)
    parents = [np.asarray(geo.parents[geo.level_index(level)]) for level in levels]
    return (PartState(parents, upper, operators, groups, answers, symmetry, batched,
                      [compiled[level].zero for level in levels[:-1]], fixed,
                      means if keep_means else None, size), below)


def _bottom_groups(terms: Sequence[Any], eq: Equalities, units: int, symmetry: Symmetry | None,
                   shape: Sequence[int], names: Sequence[str]
                   ) -> tuple[list[BottomGroup], list[list[np.ndarray] | None]]:
    """The bottom units in groups that share their active cells, each solved on them, and
    each group's subtree estimates per problem (None for a group with no active cell)."""
    zero = eq.zero if eq.zero is not None else np.zeros((units, int(np.prod(shape))), bool)
    size = shape[-1]
    active = ~(zero.reshape(units, -1, size)[:, :, 0] if symmetry is not None else zero)
    packed = np.ascontiguousarray(np.packbits(active, axis=1))
    _, first, pattern = np.unique(packed, axis=0, return_index=True, return_inverse=True)
    order = np.argsort(pattern.ravel(), kind="stable")
    bounds = np.flatnonzero(np.diff(np.r_[-1, pattern.ravel()[order], -2]))
    groups, means = [], []
    matrices = [sp.csc_matrix(q, dtype=np.float64) for q, _, _ in terms]
    for lo, hi in zip(bounds[:-1], bounds[1:]):
        rows = np.sort(order[lo:hi])
        coordinates = np.flatnonzero(active[rows[0]])
        cells = (coordinates[:, None] * size + np.arange(size)).ravel() \
            if symmetry is not None else coordinates
        if coordinates.size == 0:
            k = 1 if symmetry is None else 2
            groups.append(BottomGroup(rows, coordinates, cells, None, [np.zeros(rows.size,
                          np.int64)] * k, [[np.zeros((0, 0))]] * k))
            means.append(None)
            continue
        restricted = []
        for q, (_, values, weights) in zip(matrices, terms):
            qc = q[:, cells].tocsr()
            answers = np.flatnonzero(qc.getnnz(axis=1))
            if answers.size:
                restricted.append((qc[answers], np.asarray(values)[np.ix_(rows, answers)],
                                   _take(weights, np.shape(values), rows, answers)))
        sub_eq = Equalities(eq.matrix[:, cells], eq.values[rows], None)
        sub_symmetry = None if symmetry is None else Symmetry(coordinates.size, size)
        sub = split_problems([restricted], [sub_eq], [np.full(rows.size, -1)],
                             [[names[r] for r in rows]], (cells.size,) if symmetry is None
                             else (coordinates.size, size), symmetry=sub_symmetry)
        fits = sub.fit(downward=False)
        distinct = [np.unique(fit._lower[0], return_inverse=True) for fit in fits]
        groups.append(BottomGroup(
            rows, coordinates, cells, sub_symmetry,
            [inverse.ravel().astype(np.int64) for _, inverse in distinct],
            [[fit._operators[op].covariance for op in ops.tolist()]
             for fit, (ops, _) in zip(fits, distinct)]))
        means.append([fit.subtree[0] for fit in fits])
    return groups, means


class UnitWeights:
    """A bottom level's measurement's weights as :func:`_bottom_groups` and
    :func:`~postproc.methods.gls.symmetry.find_symmetry` read them, without the units × answers
    array ``Measurement.weights`` is when some answers were not drawn (a 2020 block level: 2,016
    answers of ``detailed`` per block, 320 MB for a part of 20,000 blocks): a group's rows and
    answers at a time, and whether the weights are equal along the last attribute.

    Examples
    --------
    >>> from hierarchy.noisy import Measurement
    >>> m = Measurement("q", np.array([[3, 0], [5, 2]]), 4.0,
    ...                 drawn=np.array([[True, False], [True, True]]))
    >>> w = UnitWeights(m)
    >>> w.take(np.array([1]), np.array([0, 1])).tolist(), m.weights[1:].tolist()
    ([[0.25, 0.25]], [[0.25, 0.25]])
    >>> w.equal_along_last(1, 2), UnitWeights(Measurement("q", np.ones((2, 2)), 4.0)
    ...                                      ).equal_along_last(1, 2)
    (False, True)
    """

    __slots__ = ("measurement",)

    def __init__(self, measurement: Any):
        self.measurement = measurement

    def take(self, rows: np.ndarray, answers: np.ndarray) -> np.ndarray:
        """``weights[rows][:, answers]``, computed for those entries only
        (``Measurement.weights_at``)."""
        return self.measurement.weights_at(rows, answers)

    def equal_along_last(self, groups: int, size: int) -> bool:
        """Whether every unit's weights of answers ``(g, r)`` (``groups × size`` answers, the
        last attribute's value ``r`` last) are equal over ``r``: with one variance for the
        whole level or one per unit, whether the answers drawn are (a weight is ``1 / variance
        > 0`` where drawn, 0 elsewhere); otherwise checked on the whole array."""
        m = self.measurement
        v = m.variances
        if v.size and v.ndim == 2 and v.strides[1] == 0:
            if m.drawn is None:
                return True
            d = m.drawn.reshape(m.drawn.shape[0], groups, size)
            return bool(np.all(d == d[:, :, :1]))
        w = np.broadcast_to(m.weights, np.shape(m.values)).reshape(-1, groups, size)
        return bool(np.all(w == w[:, :, :1]))


def _take(weights: Any, shape: tuple[int, ...], rows: np.ndarray, answers: np.ndarray
          ) -> np.ndarray:
    """``weights[rows][:, answers]`` of an array (broadcast to the values' ``shape``) or of a
    :class:`UnitWeights`."""
    if isinstance(weights, UnitWeights):
        return weights.take(rows, answers)
    return np.broadcast_to(weights, shape)[np.ix_(rows, answers)]


def _below(groups: Sequence[BottomGroup], means: Sequence[Any], p: int, parent: np.ndarray,
           above: int, size: int, batch: tuple[int, ...]) -> Below:
    """What the bottom units tell the units above them in problem ``p`` (whose values carry
    the ``batch`` axes): their estimates' sums and covariances, embedded in the whole
    coordinates."""
    sums = np.zeros((above, *batch, size))
    ops: list[Any] = []
    ids = np.empty(parent.size, dtype=np.int64)
    for g, m in zip(groups, means):
        offset = len(ops)
        for c in g.covariances[p]:
            full = np.zeros((size, size))
            full[np.ix_(g.coordinates, g.coordinates)] = c
            ops.append(_Covariance(full))
        ids[g.rows] = offset + g.ids[p]
        if m is not None:
            part = np.zeros((above, *batch, g.coordinates.size))
            np.add.at(part, parent[g.rows], m[p])
            sums[..., g.coordinates] += part
    children = _Children.of(parent, ids, above, ops)
    distinct, inverse = np.unique(children.ids, return_inverse=True)
    return Below(sums, inverse.ravel(), [children.covariance(int(i)) for i in distinct])


class _Covariance:
    """An operator as :class:`_Children` reads it (its covariance)."""

    __slots__ = ("covariance", "sigma_pinv")

    def __init__(self, covariance: np.ndarray, sigma_pinv: np.ndarray | None = None):
        self.covariance, self.sigma_pinv = covariance, sigma_pinv


def _bottom_answers(groups: Sequence[BottomGroup], means: Sequence[Any], units: int,
                    queries: Sequence[Any]) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Every bottom unit's ``Q L`` per query, and which answers count only fixed cells."""
    answers, fixed = [], []
    for q in queries:
        q = sp.csc_matrix(q, dtype=np.float64)
        out = np.zeros((units, q.shape[0]))
        counted = np.zeros((units, q.shape[0]), bool)
        for g, m in zip(groups, means):
            if m is None:
                continue
            qc = q[:, g.cells]
            out[g.rows] = _times_transposed(g.join(m), qc)
            counted[g.rows] = qc.getnnz(axis=1) > 0
        answers.append(out)
        fixed.append(~counted)
    return answers, fixed


def part_subtrees(state: PartState) -> list[list[tuple[str, Any, SubtreeMeasurement]]]:
    """The subtree estimates of every level of the part below its split units (the bottom
    last) as ``bluedown``'s node problems read them
    (:func:`~postproc.methods.gls.bluedown.subtree_measurements`): what a run of the whole
    tree gives those levels, from the part's state alone (kept by ``part_upward(...,
    keep_means=True)``). A bottom unit's covariance on its active coordinates is embedded in
    the whole coordinates with zeros: its fixed directions get the largest weight, as the
    whole tree's (whose covariance is 0 there) do.

    Examples
    --------
    The two blocks of :func:`part_upward`'s example, each its own estimate with variance 1:

    >>> state, _ = _two_blocks(keep_means=True)
    >>> [[(name, m.values.ravel().tolist(), m.weights_of(slice(0, 2)).ravel().tolist())
    ...   for name, _, m in level] for level in part_subtrees(state)]
    [[('subtree', [3.0, 5.0], [1.0, 1.0])]]
    """
    if state.bottom_means is None:
        raise PostprocError("the part's upward pass did not keep its bottom units' estimates "
                            "(part_upward(..., keep_means=True))")
    sym = state.symmetry
    races = None if sym is None else sym.size
    out = []
    for li in range(len(state.parents) - 1):
        level = [s[li] for s in state.upper]
        means = state.join([_batched(m) if state.batched[p] else _batched(m)[:, 0, :]
                            for p, (m, _, _) in enumerate(level)])
        distinct, ids = np.unique(np.stack([i for _, _, i in level], axis=1), axis=0,
                                  return_inverse=True)
        covariances = [[state.operators[p][op][0] for p, op in enumerate(row)]
                       for row in distinct.tolist()]
        out.append(subtree_measurements(means, ids.ravel(), partial(
            _weight, covariances, races), sym))
    out.append(_bottom_subtrees(state, races))
    return out


def _weight(covariances: Sequence[Sequence[np.ndarray]], races: int | None, i: int) -> Any:
    """A signature's weight as :func:`subtree_measurements` takes it: its covariance, or
    (problems: mean, contrast) the pair of :func:`split_weights`."""
    c = covariances[i]
    return c[0] if races is None else split_weights(c[1], c[0], races)


def _bottom_subtrees(state: PartState, races: int | None
                     ) -> list[tuple[str, Any, SubtreeMeasurement]]:
    """The bottom level's :func:`part_subtrees`, group by group on their active cells."""
    units, width = np.asarray(state.parents[-1]).size, state.coordinates
    means = np.zeros((units, width if races is None else width * races))
    ids = np.zeros(units, dtype=np.int64)
    covariances: list[list[np.ndarray]] = []
    for g, m in zip(state.groups, state.bottom_means):
        distinct, inverse = np.unique(np.stack(g.ids, axis=1), axis=0, return_inverse=True)
        ids[g.rows] = len(covariances) + inverse.ravel()
        a = g.coordinates
        for row in distinct.tolist():
            full = [np.zeros((width, width)) for _ in row]
            if a.size:
                for p, op in enumerate(row):
                    full[p][np.ix_(a, a)] = g.covariances[p][op]
            covariances.append(full)
        if m is not None:
            means[np.ix_(g.rows, g.cells)] = g.join(m)
    return subtree_measurements(means, ids, partial(_weight, covariances, races),
                                state.symmetry)


def part_downward(state: PartState, above: Sequence[np.ndarray], queries: Sequence[Any]
                  ) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """The part's downward pass from its split units' steps (``above``: per problem, a row
    per split unit of the part): the histograms of the levels above its bottom, and the bottom
    units' answers of ``queries`` (those :func:`part_upward` was given).

    Examples
    --------
    The two blocks of :func:`part_upward`'s example, their split unit's estimate found to be
    10 (their sum is 8, its variance 2: step 1):

    >>> state, q = _two_blocks()
    >>> _, answers = part_downward(state, [np.array([[1.0]])], q)
    >>> answers[0].ravel().tolist()
    [4.0, 6.0]
    """
    steps = [_batched(np.asarray(a, dtype=np.float64))[state.parents[0]] for a in above]
    operators = [{op: _Covariance(c, s) for op, (c, s) in problem.items()}
                 for problem in state.operators]
    hists = []
    for li in range(len(state.parents) - 1):
        estimates = []
        for p, (means, sums, ids) in enumerate(s[li] for s in state.upper):
            ops = operators[p]
            b = _batched(means).copy()
            _add_steps(b, steps[p], ids, ops)
            estimates.append(b)
            steps[p] = _steps(b, _batched(sums), ids, ops)[state.parents[li + 1]]
        hist = state.join([b if state.batched[p] else b[:, 0, :]
                           for p, b in enumerate(estimates)])
        hist[np.asarray(state.zero[li], bool)] = 0.0
        hists.append(hist)
    return hists, _moved_answers(state, steps, queries)


def _moved_answers(state: PartState, steps: list[np.ndarray], queries: Sequence[Any]
                   ) -> list[np.ndarray]:
    """``Q L + Q C · step`` for every bottom unit, ``Q C · step`` once per distinct
    (operators, parent) pair of each group."""
    out = [a.copy() for a in state.answers]
    matrices = [sp.csc_matrix(q, dtype=np.float64) for q in queries]
    for g in state.groups:
        if g.coordinates.size == 0:
            continue
        keys = np.stack([*g.ids, np.asarray(state.parents[-1])[g.rows]], axis=1)
        distinct, first, inverse = np.unique(keys, axis=0, return_index=True,
                                             return_inverse=True)
        moves = []
        for p, step in enumerate(steps):
            rows = step[g.rows[first]][..., g.coordinates]
            moved = np.empty_like(rows)
            for i, op in enumerate(distinct[:, p].tolist()):
                moved[i] = rows[i] @ g.covariances[p][op]
            moves.append(moved if state.batched[p] else moved[:, 0, :])
        cells = g.join(moves)
        for a, q in zip(out, matrices):
            a[g.rows] += _times_transposed(cells, q[:, g.cells])[inverse.ravel()]
    for a, fixed in zip(out, state.fixed_answers):
        a[fixed] = 0.0
    return out


def part_variances(state: PartState, above: Sequence[np.ndarray], queries: Sequence[Any]
                   ) -> list[list[np.ndarray]]:
    """The variance of every answer of ``queries`` for every unit of the part's levels (the
    bottom last): ``[level][query]`` arrays of units × answers, from each split unit's
    :func:`~postproc.methods.gls.operators.step_precision` (``above``: per problem, split units of
    the part × k × k) — exactly the whole tree's (``docs/gls.md``, "At national scale").

    Examples
    --------
    The two blocks of :func:`part_upward`'s example (each measured with variance 1, their
    split unit's estimate with variance 2/3 and their sum with variance 2):

    >>> state, q = _two_blocks()
    >>> m = step_precision(np.array([[0.5]]), np.array([[2 / 3]]))[None]
    >>> part_variances(state, [m], q)[0][0].round(4).ravel().tolist()
    [0.6667, 0.6667]
    """
    m = [np.asarray(a, dtype=np.float64) for a in above]
    matrices = [sp.csc_matrix(q, dtype=np.float64) for q in queries]
    out = []
    for li in range(len(state.parents) - 1):
        parent = state.parents[li]
        covariances, nxt = [], []
        for p in range(len(m)):
            ids = state.upper[p][li][2]
            c = np.stack([state.operators[p][op][0] for op in ids.tolist()]) if ids.size \
                else np.zeros((0, *m[p].shape[1:]))
            v = _conditioned(c, m[p][parent])
            covariances.append(v)
            sigma = np.stack([state.operators[p][op][1] for op in ids.tolist()]) if ids.size \
                else np.zeros_like(c)
            nxt.append(step_precision(sigma, v))
        out.append([_answer_variances(covariances, q, _races(state.symmetry))
                    for q in matrices])
        m = nxt
    out.append(_bottom_variances(state, m, matrices))
    return out


def _conditioned(c: np.ndarray, m: np.ndarray) -> np.ndarray:
    """``C + C M C`` for stacks of matrices."""
    v = c + c @ m @ c
    return (v + np.swapaxes(v, -1, -2)) / 2


def _bottom_variances(state: PartState, m: Sequence[np.ndarray], matrices: Sequence[Any]
                      ) -> list[np.ndarray]:
    """Per query, the bottom units' answer variances, group by group on their active
    coordinates (the parent's ``M`` restricted to them)."""
    units = np.asarray(state.parents[-1]).size
    out = [np.zeros((units, q.shape[0])) for q in matrices]
    parent = np.asarray(state.parents[-1])
    for g in state.groups:
        if g.coordinates.size == 0:
            continue
        a = g.coordinates
        covariances = []
        for p in range(len(m)):
            c = np.stack(g.covariances[p])[g.ids[p]]
            covariances.append(_conditioned(c, m[p][:, a[:, None], a][parent[g.rows]]))
        for o, q in zip(out, matrices):
            o[g.rows] = _answer_variances(covariances, q[:, g.cells], _races(g.symmetry))
    return out


def _races(symmetry: Symmetry | None) -> int | None:
    return None if symmetry is None else symmetry.size


def _two_blocks(keep_means: bool = False) -> tuple[PartState, list[np.ndarray]]:
    """The state of :func:`part_upward`'s example and its query (for the examples)."""
    from hierarchy.geography import Geography
    from hierarchy.noisy import Measurement
    from hierarchy.queries import Workload, total
    from hierarchy.schema import Attribute, Schema
    from invariants.compile import compile_spec
    from invariants.spec import Spec

    schema = Schema((Attribute("all", ("all",)),))
    geo = Geography(("part", "tract", "block"), (np.array(["p"]), np.array(["t"]),
                    np.array(["a", "b"])), (np.array([-1]), np.array([0]), np.array([0, 0])))
    noisy = NoisyHierarchy(schema, geo, Workload((total(schema),)),
                           {"block": {"total": Measurement("total", np.array([[3], [5]]), 1.0)}},
                           {}, {})
    q = [np.ones((1, 1))]
    state, _ = part_upward(noisy, compile_spec(Spec(), schema, geo, {}), ["block"], 1, q,
                           keep_means=keep_means)
    return state, q


def _times_transposed(x: np.ndarray, q: Any) -> np.ndarray:
    """``x @ q.T`` for a dense ``x`` (units × cells) and a sparse query ``q`` (answers ×
    cells), without the copy scipy makes of a transposed dense operand."""
    return np.asarray((q @ np.ascontiguousarray(x.T)).T)


def _batched(a: np.ndarray) -> np.ndarray:
    return a if a.ndim == 3 else a[:, None, :]

