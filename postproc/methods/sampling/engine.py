"""The lattice move engine: Metropolis moves along integer kernel vectors, vectorized.

:func:`move_structure` finds the moves that keep ``A s = a`` (classes of cells with identical
equality columns; a lifted integer kernel basis of the class-level matrix). :class:`LatticeEngine`
runs sweeps of such moves for many independent problems at once — chains of one table
(:func:`postproc.methods.sampling.lattice.sample_lattice`) or every parent of a hierarchy level
(:func:`postproc.methods.sampling.hierarchical.sample_topdown`).

A sweep is a fixed-order list of moves whose random choices are drawn before the state is
touched. Moves of one stage never share a cell, and the target factorizes over cells, so their
decisions are independent — except through coupled rows of ``B`` or shared measurement answers
(log-density terms on query answers). Those moves are decided in sub-rounds in move order: a move
waits while an earlier candidate shares one of its blocking keys (an answer touched by two or more
candidates, or a row whose slack is smaller than the candidates' largest possible total change).
The outcome equals a one-by-one scan of the moves.

Examples
--------
>>> ms = move_structure(np.array([[1, 1, 1, 1]]))
>>> engine = LatticeEngine([[4, 3, 2, 1]], [[4, 3, 2, 1]], "geometric", 0.5, 0.0, np.inf, ms)
>>> engine.run(50, Randomness.simulation(0))
>>> int(engine.X.sum()), bool((engine.X >= 0).all()), 0 < engine.acceptance_rate < 1
(10, True, True)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from hierarchy.randomness import Randomness
from postproc.errors import PostprocError
from postproc.methods.sampling.exact import integer_kernel_basis
from postproc.methods.sampling.target import log_noise_density

__all__ = ["LatticeEngine", "MoveStructure", "move_structure", "default_step", "FREE", "FIXED"]

_TWO_POW_53_INV = 1.0 / 9007199254740992.0
FREE = -1    # class id of a cell in no equality: it moves alone
FIXED = -2   # class id of a cell fixed in every unit (lower == upper): never moved


@dataclass(frozen=True, eq=False)
class MoveStructure:
    """Which cells move together.

    Attributes
    ----------
    cell_class : int array (n,)
        Class of each cell: ``FREE`` (-1), ``FIXED`` (-2) or ``0..classes-1``.
    class_kernel : int array (classes, q)
        Integer kernel basis of the class-level equality matrix (``q`` may be 0).

    Examples
    --------
    Built by :func:`move_structure`. One sum over four cells: a single class, whose moves
    shift counts between two of its cells (no class-level kernel needed):

    >>> move_structure(np.array([[1, 1, 1, 1]])).describe()
    {'classes': [4], 'free_cells': 0, 'fixed_cells': 0, 'class_kernel': []}

    Row and column sums of a 2 × 2 table: four classes of one cell, moved together along the
    kernel vector (+1, −1, −1, +1):

    >>> ms = move_structure(np.array([[1, 1, 1, 1], [1, 0, 1, 0], [1, 1, 0, 0]]))
    >>> ms.n_classes, ms.describe()["class_kernel"]
    (4, [[1, -1, -1, 1]])
    >>> move_structure(np.array([[1, 1, 0, 0]]), fixed=[False, False, False, True]).describe()
    {'classes': [2], 'free_cells': 1, 'fixed_cells': 1, 'class_kernel': []}
    """

    cell_class: np.ndarray
    class_kernel: np.ndarray

    @property
    def n_classes(self) -> int:
        return int(self.class_kernel.shape[0])

    def describe(self) -> dict[str, Any]:
        sizes = np.bincount(self.cell_class[self.cell_class >= 0], minlength=self.n_classes)
        return {"classes": sizes.tolist(), "free_cells": int(np.sum(self.cell_class == FREE)),
                "fixed_cells": int(np.sum(self.cell_class == FIXED)),
                "class_kernel": self.class_kernel.T.tolist()}


def move_structure(equalities: Any, fixed: Any = None) -> MoveStructure:
    """Classes of cells with identical equality columns, and the class-level kernel basis.

    Parameters
    ----------
    equalities : array_like (m, n), integer
        The equality rows that moves must preserve (per unit).
    fixed : bool array (n,), optional
        Cells that never move.

    Returns
    -------
    MoveStructure

    Raises
    ------
    PostprocError
        If the class-level matrix has no unimodular block (no lattice basis by this route).

    Examples
    --------
    >>> ms = move_structure(np.array([[1, 1, 1, 1, 0], [1, 1, 0, 0, 0]]))
    >>> ms.cell_class.tolist(), ms.class_kernel.shape          # two classes, no class-level move
    ([0, 0, 1, 1, -1], (2, 0))
    >>> move_structure(np.array([[1, 1, 1, 1], [1, 0, 1, 0], [1, 1, 0, 0]])).class_kernel.T.tolist()
    [[1, -1, -1, 1]]
    """
    E = np.asarray(equalities)
    if E.ndim != 2:
        raise PostprocError("the equality matrix must be 2-D")
    n = E.shape[1]
    fixed = np.zeros(n, bool) if fixed is None else np.asarray(fixed, dtype=bool)
    cell_class = np.full(n, FREE, dtype=np.int64)
    cell_class[fixed] = FIXED
    moving = np.flatnonzero(~fixed & np.any(E != 0, axis=0))
    if moving.size == 0:
        return MoveStructure(cell_class, np.zeros((0, 0), dtype=np.int64))
    cols, first, inverse = np.unique(E[:, moving].T, axis=0, return_index=True,
                                     return_inverse=True)
    # number classes in order of their first cell
    order = np.argsort(first, kind="stable")
    rank = np.empty_like(order)
    rank[order] = np.arange(order.size)
    cell_class[moving] = rank[np.asarray(inverse).ravel()]
    A_c = cols[order].T                                     # (m, classes)
    kernel = integer_kernel_basis(A_c) if A_c.shape[1] else np.zeros((0, 0), np.int64)
    return MoveStructure(cell_class, kernel)


def default_step(mechanism: str, parameter: Any) -> np.ndarray:
    """Mean absolute step of a move: ``max(1, 0.8 σ)`` with ``σ`` the per-cell noise sd.

    Examples
    --------
    >>> float(default_step("geometric", 0.5))
    2.23...
    """
    from postproc.methods.sampling.target import _noise_sd

    p = np.asarray(parameter, dtype=np.float64)
    sd = np.vectorize(lambda v: _noise_sd(mechanism, float(v)))(p) if p.ndim else \
        _noise_sd(mechanism, float(p))
    return np.maximum(1.0, 0.8 * np.asarray(sd, dtype=np.float64))


class LatticeEngine:
    """Metropolis lattice moves for many independent problems at once.

    Each *unit* is one histogram (a chain of a table, or a child of a parent); *groups* are
    independent problems (a unit per group for chains; the children of one parent in a
    hierarchy, with ``cross=True``).

    Parameters
    ----------
    state : array (U, n)
        A feasible start (int64 for integer data).
    centre : array (U, n)
    mechanism : str
    parameter : float or array broadcastable to (U, n)
    lower, upper : arrays (U, n)
        Per-cell bounds.
    structure : MoveStructure
    groups : int array (U,), optional
        Group of each unit, nondecreasing (default: every unit its own group).
    cross : bool
        Moves between paired units of a group (parent consistency) instead of within units.
    rows : int array (r, n), optional
        Coupled inequality rows; with ``row_lower``/``row_upper`` (U, r) (``±inf`` = free).
    step : float or array (U, n)
        Mean absolute step (integer data: ``1 + geometric``; continuous: Laplace scale).
    integer : bool

    Raises
    ------
    PostprocError
        If the start is outside the bounds or a coupled row, or the units are not ordered by
        group.

    Examples
    --------
    Two chains, each a 4-cell table whose total is kept, with geometric noise (z = 0.5)
    around the measured counts:

    >>> total = move_structure(np.array([[1, 1, 1, 1]]))
    >>> start = [[4, 3, 2, 1], [1, 1, 1, 1]]
    >>> engine = LatticeEngine(start, start, "geometric", 0.5, 0.0, np.inf, total)
    >>> engine.run(100, Randomness.simulation(0))
    >>> engine.X.sum(axis=1).tolist(), engine.proposed, round(engine.acceptance_rate, 3)
    ([10, 4], 400, 0.578)

    Two children of one parent (``cross=True``): moves between them keep the parent's cells:

    >>> no_rows = move_structure(np.zeros((0, 2), int))
    >>> pair = LatticeEngine([[2, 1], [0, 3]], [[2, 1], [0, 3]], "geometric", 0.5, 0, np.inf,
    ...                      no_rows, groups=[0, 0], cross=True)
    >>> pair.run(50, Randomness.simulation(1))
    >>> pair.X.sum(axis=0).tolist()
    [2, 4]
    >>> LatticeEngine([[4, -1, 2, 1]], [[4, 0, 2, 1]], "geometric", 0.5, 0.0, np.inf, total)
    Traceback (most recent call last):
    ...
    postproc.errors.PostprocError: the start is outside the bounds at unit 0, cell 1
    """

    def __init__(self, state, centre, mechanism, parameter, lower, upper, structure, *,
                 groups=None, cross=False, rows=None, row_lower=None, row_upper=None, step=1.0,
                 integer=True, terms=None, cell_terms=True):
        self.X = np.array(state, dtype=np.int64 if integer else np.float64)
        U, n = self.X.shape
        self.U, self.n = U, n
        self.centre = np.asarray(centre, dtype=np.float64)
        self.mechanism = mechanism
        param = np.asarray(parameter, dtype=np.float64)
        self.param = float(param) if param.ndim == 0 else np.broadcast_to(param, (U, n))
        self.lower = np.broadcast_to(np.asarray(lower, dtype=np.float64), (U, n))
        self.upper = np.broadcast_to(np.asarray(upper, dtype=np.float64), (U, n))
        st = np.asarray(step, dtype=np.float64)
        self.step = float(st) if st.ndim == 0 else np.broadcast_to(st, (U, n))
        self.integer = integer
        self.structure = structure
        self.groups = np.arange(U) if groups is None else np.asarray(groups, dtype=np.int64)
        if np.any(np.diff(self.groups) < 0):
            raise PostprocError("units must be ordered by group")
        self.cross = cross
        cc = structure.cell_class
        self.free_cells = np.flatnonzero(cc == FREE)
        self.class_cells = np.flatnonzero(cc >= 0)
        order = np.argsort(cc[self.class_cells], kind="stable")
        self.cells_by_class = self.class_cells[order]
        sizes = np.bincount(cc[self.class_cells], minlength=structure.n_classes)
        self.class_size = sizes
        self.class_start = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)
        if rows is not None and np.asarray(rows).shape[0]:
            self.rows = np.asarray(rows, dtype=np.int64)
            self.row_lower = np.asarray(row_lower, dtype=np.float64).reshape(U, -1)
            self.row_upper = np.asarray(row_upper, dtype=np.float64).reshape(U, -1)
            self.RX = (self.X @ self.rows.T).astype(np.float64)
        else:
            self.rows = None
        self.cell_terms = cell_terms
        self.terms = None
        if terms is not None:
            self._set_terms(**terms)
        self.proposed = 0
        self.accepted = 0
        self.track_units = cross
        self.unit_proposed = np.zeros(U, dtype=np.int64)
        self.unit_accepted = np.zeros(U, dtype=np.int64)
        if cross:
            counts = np.bincount(self.groups)
            self.pairable = counts[self.groups] >= 2
        self._check_start()

    def _set_terms(self, answer_of, centre, parameter):
        """Log-density terms on query answers: ``answer_of`` (Q, n) gives each cell's answer of
        query q (−1: none); ``centre`` (U, answers) the measured answers; ``parameter``
        (answers,) their noise parameters."""
        answer_of = np.asarray(answer_of, dtype=np.int64)
        sizes = answer_of.max(axis=1) + 1
        self.answer_of = answer_of
        self.answer_offset = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)
        self.n_answers = int(sizes.sum())
        self.answer_centre = np.asarray(centre, dtype=np.float64).reshape(self.U, self.n_answers)
        self.answer_param = np.asarray(parameter, dtype=np.float64).reshape(self.n_answers)
        T = np.zeros((self.U, self.n_answers))
        for q in range(answer_of.shape[0]):
            valid = answer_of[q] >= 0
            idx = self.answer_offset[q] + answer_of[q][valid]
            np.add.at(T.T, idx, self.X[:, valid].T.astype(np.float64))
        self.T = T
        self.terms = True

    def _check_start(self):
        bad = (self.X < self.lower) | (self.X > self.upper)
        if bad.any():
            u, j = np.argwhere(bad)[0]
            raise PostprocError(f"the start is outside the bounds at unit {u}, cell {j}")
        if self.rows is not None:
            bad = (self.RX < self.row_lower - 1e-9) | (self.RX > self.row_upper + 1e-9)
            if bad.any():
                u, r = np.argwhere(bad)[0]
                raise PostprocError(f"the start violates coupled row {r} of unit {u}")

    # -- randomness helpers -------------------------------------------------------------------
    def _uniform(self, shape, source: Randomness) -> np.ndarray:
        n = int(np.prod(shape))
        words = source.random_raw(n)
        return (((words >> np.uint64(11)).astype(np.float64) + 1.0) * _TWO_POW_53_INV
                ).reshape(shape), words.reshape(shape)

    def _steps(self, scale, shape, source: Randomness) -> np.ndarray:
        """Symmetric nonzero steps with mean |step| = ``scale`` (broadcast to ``shape``)."""
        u, words = self._uniform(shape, source)
        negative = (words & np.uint64(1)).astype(bool)
        scale = np.broadcast_to(np.asarray(scale, dtype=np.float64), shape)
        if not self.integer:
            out = -scale * np.log(u)
        else:
            # 1 + Geometric on {0, 1, ...} with P[g] = (1 - ρ) ρ^g and mean ρ/(1 - ρ) = scale - 1
            rho = np.clip((scale - 1.0) / np.maximum(scale, 1.0), 0.0, 1.0 - 1e-12)
            log_rho = np.log(np.where(rho > 0, rho, 0.5))
            out = 1.0 + np.where(rho > 0, np.floor(np.log(u) / log_rho), 0.0)
        np.negative(out, out=out, where=negative)
        return out

    def _matching(self, group: np.ndarray, S: int, source: Randomness):
        """``S`` independent uniformly random pairings of items within each group.

        ``group`` (items,) is nondecreasing. Returns ``(left, right)`` item indices, shape
        (S, pairs); the pairs per group are the same number every time.
        """
        m = group.size
        if m < 2:
            return np.zeros((S, 0), np.int64), np.zeros((S, 0), np.int64)
        start = np.flatnonzero(np.concatenate([[True], group[1:] != group[:-1]]))
        first = np.repeat(start, np.diff(np.concatenate([start, [m]])))
        rank = np.arange(m) - first
        pos = np.flatnonzero((rank % 2 == 0) & (np.arange(m) + 1 < m))
        pos = pos[group[np.minimum(pos + 1, m - 1)] == group[pos]]
        # shuffle within groups: sort by (group, random key)
        keys = source.random_raw(S * m).reshape(S, m) >> np.uint64(24)       # 40 random bits
        if int(group.max()).bit_length() > 23:
            order = np.stack([np.lexsort((keys[s], group)) for s in range(S)])
        else:   # one sort key: group in the top 24 bits, the random key below
            combined = (group.astype(np.uint64) << np.uint64(40)) | keys
            order = np.argsort(combined, axis=1, kind="stable")
        return order[:, pos], order[:, pos + 1]

    def _random_cells(self, classes: np.ndarray, source: Randomness) -> np.ndarray:
        """One uniformly random cell of each given class (any shape)."""
        size = self.class_size[classes]
        pick = source.integers_below(size)
        return self.cells_by_class[self.class_start[classes] + pick]

    # -- plans --------------------------------------------------------------------------------
    def _plans(self, S: int, source: Randomness) -> list[dict]:
        """The stages of ``S`` sweeps, with every random choice drawn now (state-free)."""
        ms = self.structure
        kernel = ms.class_kernel
        stages: list[tuple] = []   # (unit (S,m,w), cell (S,m,w), coef (w,) or (S,m,w), slots)
        if not self.cross:   # moves within each unit
            units = np.arange(self.U)
            if self.free_cells.size:
                f = self.free_cells.size
                u = np.broadcast_to(np.repeat(units, f)[None, :, None], (S, self.U * f, 1))
                c = np.broadcast_to(np.tile(self.free_cells, self.U)[None, :, None], u.shape)
                stages.append((u, c, np.ones(1), u[:, :, :1], np.zeros(1, np.int64)))
            if self.class_cells.size >= 2:
                cls = ms.cell_class[self.cells_by_class]
                left, right = self._matching(cls, S, source)
                if left.shape[1]:
                    j, k = self.cells_by_class[left], self.cells_by_class[right]   # (S, P)
                    P = j.shape[1]
                    u = np.broadcast_to(np.repeat(units, P)[None, :, None], (S, self.U * P, 2))
                    c = np.stack([np.tile(j, (1, self.U)), np.tile(k, (1, self.U))], axis=2)
                    stages.append((u, c, np.array([1.0, -1.0]), u[:, :, :1],
                                   np.zeros(2, np.int64)))
            for q in range(kernel.shape[1]):
                support = np.flatnonzero(kernel[:, q])
                cells = self._random_cells(np.broadcast_to(support, (S, self.U, support.size)),
                                           source)
                u = np.broadcast_to(units[None, :, None], cells.shape)
                stages.append((u, cells, kernel[support, q].astype(np.float64), u[:, :, :1],
                               np.zeros(support.size, np.int64)))
        else:
            eligible = np.flatnonzero(self.pairable)
            left, right = self._matching(self.groups[eligible], S, source)
            a, b = eligible[left], eligible[right]                   # (S, p)
            p = a.shape[1]
            if p:
                slots = np.stack([a, b], axis=2)                      # (S, p, 2)
                if self.free_cells.size:
                    f = self.free_cells.size
                    ua, ub = np.repeat(a, f, axis=1), np.repeat(b, f, axis=1)
                    cells = np.broadcast_to(np.tile(self.free_cells, p), ua.shape)
                    stages.append((np.stack([ua, ub], 2), np.stack([cells, cells], 2),
                                   np.array([1.0, -1.0]), np.stack([ua, ub], 2),
                                   np.array([0, 1])))
                if self.class_cells.size >= 2:
                    cls = ms.cell_class[self.cells_by_class]
                    cl, cr = self._matching(cls, S, source)
                    if cl.shape[1]:
                        j, k = self.cells_by_class[cl], self.cells_by_class[cr]   # (S, P)
                        P = j.shape[1]
                        ua, ub = np.repeat(a, P, axis=1), np.repeat(b, P, axis=1)
                        jj, kk = np.tile(j, (1, p)), np.tile(k, (1, p))
                        stages.append((np.stack([ua, ub, ua, ub], 2), np.stack([jj, jj, kk, kk], 2),
                                       np.array([1.0, -1.0, -1.0, 1.0]), np.stack([ua, ub], 2),
                                       np.array([0, 1, 0, 1])))
                for q in range(kernel.shape[1]):
                    support = np.flatnonzero(kernel[:, q])
                    s_ = support.size
                    cells = self._random_cells(np.broadcast_to(support, (S, p, s_)), source)
                    coef = kernel[support, q].astype(np.float64)
                    stages.append((np.concatenate([np.repeat(a[:, :, None], s_, 2),
                                                   np.repeat(b[:, :, None], s_, 2)], 2),
                                   np.concatenate([cells, cells], 2), np.concatenate([coef, -coef]),
                                   slots, np.concatenate([np.zeros(s_, np.int64),
                                                          np.ones(s_, np.int64)])))
        plans = []
        for unit, cell, coef, slot_units, slot_of in stages:
            unit = np.ascontiguousarray(unit)
            cell = np.ascontiguousarray(cell)
            m = unit.shape[1]
            if isinstance(self.step, float):
                scale = self.step
            else:
                scale = self.step[unit, cell].min(axis=2)
            steps = self._steps(scale, (S, m), source)
            change = steps[:, :, None] * coef
            if self.integer:
                change = np.rint(change).astype(np.int64)
            logu = np.log(self._uniform((S, m), source)[0])
            plan = {"unit": unit, "cell": cell, "change": change, "logu": logu,
                    "lower": self.lower[unit, cell], "upper": self.upper[unit, cell],
                    "centre": self.centre[unit, cell],
                    "param": self.param if isinstance(self.param, float)
                    else self.param[unit, cell],
                    "slot_units": np.ascontiguousarray(np.broadcast_to(
                        slot_units, (S, m, slot_units.shape[2]))), "slot_of": slot_of,
                    "bounded_above": bool(np.isfinite(self.upper).any())}
            plans.append(plan)
        return plans

    def _batch(self) -> int:
        """Sweeps planned at once: about a million move-cells per plan."""
        per_sweep = max(1, self.U * max(1, self.n))
        return int(max(1, min(256, (1 << 20) // per_sweep)))

    def run(self, sweeps: int, source: Randomness, on_sweep=None) -> None:
        """``sweeps`` sweeps; ``on_sweep(i)`` after each."""
        done = 0
        while done < sweeps:
            S = min(self._batch(), sweeps - done)
            plans = self._plans(S, source)
            for s in range(S):
                for plan in plans:
                    self._apply(plan, s)
                if on_sweep is not None:
                    on_sweep(done + s)
            done += S

    def sweep(self, source: Randomness) -> None:
        """One sweep: every stage of moves once (new random pairings and steps)."""
        self.run(1, source)

    def _apply(self, plan: dict, s: int) -> None:
        """Decide every move of one stage of sweep ``s`` as a one-by-one scan would."""
        unit, cell = plan["unit"][s], plan["cell"][s]
        m = unit.shape[0]
        if m == 0:
            return
        change = plan["change"][s]
        old = self.X[unit, cell]
        new = old + change
        ok = (new >= plan["lower"][s]).all(axis=1)
        if plan["bounded_above"]:
            ok &= (new <= plan["upper"][s]).all(axis=1)
        if self.cell_terms:
            centre = plan["centre"][s]
            par = plan["param"] if isinstance(plan["param"], float) else plan["param"][s]
            if self.mechanism == "geometric":
                dlogp = ((np.abs(old - centre) - np.abs(new - centre)) * par).sum(axis=1)
            else:
                dlogp = (log_noise_density(self.mechanism, new - centre, par)
                         - log_noise_density(self.mechanism, old - centre, par)).sum(axis=1)
        else:
            dlogp = np.zeros(m)
        logu = plan["logu"][s]
        if self.terms is None:
            ok &= logu < dlogp           # the whole Metropolis ratio is known now
        self.proposed += m
        slot_units = plan["slot_units"][s]
        if self.track_units:
            np.add.at(self.unit_proposed, slot_units[:, 0], 1)
        cand = np.flatnonzero(ok)
        if cand.size == 0:
            return
        if self.rows is not None or self.terms is not None:
            cand = self._coupled_scan(cand, unit, cell, change, slot_units, plan["slot_of"], new,
                                      dlogp, logu)
        else:
            self.X[unit[cand], cell[cand]] = new[cand]
        self.accepted += cand.size
        if self.track_units and cand.size:
            np.add.at(self.unit_accepted, slot_units[cand, 0], 1)

    def _coupled_scan(self, cand, unit, cell, change, slot_units, slot_of, new, dlogp, logu
                      ) -> np.ndarray:
        """Decide candidate moves that interact through shared measurement answers (terms of
        the log density) or coupled constraint rows, exactly as a one-by-one scan in move order.

        A move waits until every earlier candidate sharing one of its *blocking keys* has been
        decided: an answer touched by two or more candidates, or a row whose slack is smaller
        than the candidates' largest possible total change. Moves with no blocking key are
        decided at once.
        """
        c = cand.size
        keys_parts, delta_parts, move_parts = [], [], []
        n_term_keys = 0
        if self.terms is not None:
            A = self.n_answers
            n_term_keys = self.U * A
            w = cell.shape[1]
            for q in range(self.answer_of.shape[0]):
                ans = self.answer_of[q][cell[cand]]                       # (c, w)
                valid = ans >= 0
                tid = unit[cand] * A + self.answer_offset[q] + ans
                mv = np.broadcast_to(np.arange(c)[:, None], (c, w))
                keys_parts.append(tid[valid])
                delta_parts.append(change[cand][valid].astype(np.float64))
                move_parts.append(mv[valid])
        if self.rows is not None:
            r = self.rows.shape[0]
            h = slot_units.shape[1]
            contrib = change[cand][:, :, None] * self.rows[:, cell[cand]].transpose(1, 2, 0)
            delta = np.zeros((c, h, r))
            for sl in range(h):
                delta[:, sl, :] = contrib[:, slot_of == sl, :].sum(axis=1)
            ids = n_term_keys + slot_units[cand][:, :, None] * r + np.arange(r)
            nz = delta != 0
            keys_parts.append(ids[nz])
            delta_parts.append(delta[nz])
            move_parts.append(np.broadcast_to(np.arange(c)[:, None, None], delta.shape)[nz])
        key = np.concatenate(keys_parts)
        dval = np.concatenate(delta_parts)
        move = np.concatenate(move_parts)
        # net change per (move, key)
        combined = move * (n_term_keys + (self.U * self.rows.shape[0] if self.rows is not None
                                           else 0)) + key
        uniq, inverse = np.unique(combined, return_inverse=True)
        dval = np.bincount(inverse, dval, minlength=uniq.size)
        total_keys = n_term_keys + (self.U * self.rows.shape[0] if self.rows is not None else 0)
        move, key = uniq // total_keys, uniq % total_keys
        nz = dval != 0
        move, key, dval = move[nz], key[nz], dval[nz]
        is_term = key < n_term_keys
        blocking = np.zeros(key.size, bool)
        if n_term_keys:
            touched = np.bincount(key[is_term], minlength=n_term_keys)
            blocking[is_term] = touched[key[is_term]] >= 2
        if self.rows is not None:
            rk = key[~is_term] - n_term_keys
            size = self.U * self.rows.shape[0]
            dv = dval[~is_term]
            dec = np.bincount(rk, np.maximum(0.0, -dv), minlength=size)
            inc = np.bincount(rk, np.maximum(0.0, dv), minlength=size)
            RX = self.RX.reshape(-1)
            unsafe = (dec > RX - self.row_lower.reshape(-1) + 1e-9) | \
                (inc > self.row_upper.reshape(-1) - RX + 1e-9)
            blocking[~is_term] = unsafe[rk]
        pending = np.ones(c, bool)
        accepted = []
        while pending.any():
            live = pending[move] & blocking
            first = np.full(total_keys, c)
            np.minimum.at(first, key[live], move[live])
            late = np.zeros(c, bool)
            late[move[live][first[key[live]] != move[live]]] = True
            ready = pending & ~late
            good = self._decide(np.flatnonzero(ready), ready[move], move, key, dval, is_term,
                                dlogp, logu, cand, unit, cell, new, n_term_keys)
            accepted.append(good)
            pending &= late
        return cand[np.concatenate(accepted)] if accepted else cand[:0]

    def _decide(self, ready, entry_mask, move, key, dval, is_term, dlogp, logu, cand, unit,
                cell, new, n_term_keys) -> np.ndarray:
        """Accept or reject the ``ready`` moves against the current answers and rows; commit."""
        if ready.size == 0:
            return ready
        c = cand.size
        ok = np.zeros(c, bool)
        ok[ready] = True
        total = dlogp[cand].copy()
        sel_t = entry_mask & is_term
        if sel_t.any():
            tk, td = key[sel_t], dval[sel_t]
            T = self.T.reshape(-1)[tk]
            y = self.answer_centre.reshape(-1)[tk]
            par = self.answer_param[tk % self.n_answers]
            gain = (log_noise_density(self.mechanism, T + td - y, par)
                    - log_noise_density(self.mechanism, T - y, par))
            total += np.bincount(move[sel_t], gain, minlength=c)
            ok &= logu[cand] < total
        sel_r = entry_mask & ~is_term
        if sel_r.any():
            rk, rd = key[sel_r] - n_term_keys, dval[sel_r]
            after = self.RX.reshape(-1)[rk] + rd
            bad = (after < self.row_lower.reshape(-1)[rk] - 1e-9) | \
                (after > self.row_upper.reshape(-1)[rk] + 1e-9)
            ok[move[sel_r][bad]] = False
        good = np.flatnonzero(ok)
        if good.size == 0:
            return good
        moves = cand[good]
        self.X[unit[moves], cell[moves]] = new[moves]
        commit = entry_mask & ok[move]
        if n_term_keys:
            ct = commit & is_term
            np.add.at(self.T.reshape(-1), key[ct], dval[ct])
        if self.rows is not None:
            cr = commit & ~is_term
            np.add.at(self.RX.reshape(-1), key[cr] - n_term_keys, dval[cr])
        return good

    @property
    def acceptance_rate(self) -> float:
        return self.accepted / self.proposed if self.proposed else float("nan")
