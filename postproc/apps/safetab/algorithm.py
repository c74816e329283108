"""One level's adaptive algorithm: noisy totals, thresholds, released tables (docs/safetab.md).

For every group of a level (entity × iteration), with ``B`` the level budget and ``s`` its
declared stability, so that the group has ``B/s``:

* a ``TotalOnly`` group releases its total with noise of budget ``B/s``;
* any other group draws a **Step-1** noisy total with budget ``γ B/s``; its value ``t̃`` picks
  the table (:func:`choose_tables`): ``t̃ < θ1`` → the total, ``θ1 ≤ t̃ < θ2`` → sex × Age4,
  ``θ2 ≤ t̃ < θ3`` → sex × Age9, ``t̃ ≥ θ3`` → sex × Age23; **Step 2** releases that table's
  counts, each with noise of budget ``(1 − γ) B/s`` (a record is in one cell: parallel
  composition within the table). The thresholds are the level's, or those it gives the
  iteration's iteration level (detailed or regional).

Noise is two-sided geometric (pure DP, ``z = ε``) or discrete Gaussian (zCDP, ``σ² = 1/(2ρ)``),
sensitivity 1, through :mod:`hierarchy.mechanisms`. Released counts may be negative; nothing is
made consistent. Randomness: the level's stream ``rng`` has three children — 0 for Step 1, 1 for
Step 2, 2 for TotalOnly counts — so a simulation run is reproducible from its seed.

Examples
--------
>>> choose_tables(np.array([-3, 9, 10, 99, 100, 999, 1000]), (10, 100, 1000)).tolist()
[0, 0, 1, 1, 2, 2, 3]
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np
import pyarrow as pa

from hierarchy.randomness import as_randomness
from postproc.apps.safetab.budgets import LevelBudget, Noise, notion_of
from postproc.apps.safetab.config_types import Iteration, Level
from postproc.apps.safetab.groups import GroupCounts
from postproc.apps.safetab.recodes import (
    AGE_RECODES,
    DETAILED_TABLES,
    STAT_LABELS,
    TABLE_TYPES,
    stat_offset,
)
from postproc.errors import PostprocError

__all__ = ["choose_tables", "LevelPlan", "plan_level", "LevelRelease", "measure_level"]


def choose_tables(noisy_totals: Any, thresholds: Any) -> np.ndarray:
    """The table each noisy total selects: index into :data:`~postproc.apps.safetab.recodes.
    DETAILED_TABLES` (0 total, 1 sex × Age4, 2 sex × Age9, 3 sex × Age23).

    Parameters
    ----------
    noisy_totals : array_like
        Step-1 noisy totals, ``n`` of them.
    thresholds : array_like
        θ1 < θ2 < θ3 for all totals, shape (3,), or for each, shape (n, 3). A total equal to a
        threshold selects the larger table.

    Returns
    -------
    numpy.ndarray of int8

    Raises
    ------
    PostprocError
        If the thresholds are not three increasing numbers (per total).

    Examples
    --------
    >>> choose_tables([5, 50, 500, 5000], [50, 500, 5000]).tolist()
    [0, 1, 2, 3]
    >>> choose_tables([60, 60], [[50, 500, 5000], [100, 1000, 10000]]).tolist()
    [1, 0]
    """
    theta = np.asarray(thresholds, dtype=float)
    totals = np.asarray(noisy_totals, dtype=float)
    ok = theta.ndim in (1, 2) and theta.shape[-1] == 3 and bool(
        np.all((theta[..., 0] < theta[..., 1]) & (theta[..., 1] < theta[..., 2])))
    if not ok or (theta.ndim == 2 and theta.shape[0] != totals.size):
        raise PostprocError(f"thresholds must be three numbers theta1 < theta2 < theta3 (for "
                            f"all totals, or one triple per total), not {thresholds!r}")
    if theta.ndim == 1:
        return np.searchsorted(theta, totals, side="right").astype(np.int8)
    return (theta <= totals.reshape(-1, 1)).sum(axis=1).astype(np.int8)


@dataclass(frozen=True)
class LevelPlan:
    """A level's budget, TotalOnly iterations and noise: everything but the data.

    Parameters
    ----------
    level : Level
    budget : LevelBudget
    total_only : tuple of bool
        Per iteration of the level, whether it is TotalOnly.
    noise : dict of str to Noise
        ``'step1'``, ``'step2'`` and ``'total_only'``.
    thresholds : tuple of (θ1, θ2, θ3), optional
        Per iteration of the level, its thresholds (:meth:`Level.thresholds_for` of its
        iteration level); empty: the level's ``thresholds`` for all.

    Examples
    --------
    Made by :func:`plan_level`: a level of two iterations, the second TotalOnly, calibrated to
    a Step-2 MOE of 6 with discrete Gaussian noise (budgets are exact ρ):

    >>> level = Level("county", "county", ("1", "2"), 2, None, 6, (10, 100, 1000),
    ...               frozenset({"2"}))
    >>> plan = plan_level(level, mechanism="discrete_gaussian", gamma="0.1")
    >>> plan.budget.total, plan.budget.group
    (Fraction(16, 135), Fraction(8, 135))
    >>> {step: noise.moe for step, noise in plan.noise.items()}
    {'step1': 18, 'step2': 6, 'total_only': 5}
    >>> plan.to_dict()["total_only"]
    ['2']
    """

    level: Level
    budget: LevelBudget
    total_only: tuple[bool, ...]
    noise: Mapping[str, Noise]
    thresholds: tuple[tuple[float, float, float], ...] = ()

    def iteration_thresholds(self) -> np.ndarray:
        """The thresholds of each iteration, shape (iterations, 3)."""
        rows = self.thresholds or (self.level.thresholds,) * len(self.level.iterations)
        return np.asarray(rows, dtype=float).reshape(len(self.level.iterations), 3)

    @property
    def kinds(self) -> tuple[str, ...]:
        """``'adaptive'`` and/or ``'total_only'``: the kinds of group the level has."""
        return tuple(k for k, present in (("adaptive", not all(self.total_only)),
                                          ("total_only", any(self.total_only))) if present)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready description."""
        out = {"geography": self.level.geography, "iterations": list(self.level.iterations),
               "total_only": [i for i, t in zip(self.level.iterations, self.total_only) if t],
               "thresholds": list(self.level.thresholds), "budget": self.budget.to_dict(),
               "noise": {k: v.to_dict() for k, v in self.noise.items()}}
        if self.level.outside is not None:
            out["outside"] = self.level.outside
        if self.level.iteration_thresholds:
            out["thresholds_by_iteration_level"] = {
                k: list(v) for k, v in self.level.iteration_thresholds}
            out["thresholds_by_iteration"] = {
                i: list(t) for i, t in zip(self.level.iterations,
                                           self.iteration_thresholds().tolist())}
        return out


def plan_level(level: Level, *, mechanism: Any, gamma: Any,
               total_only: frozenset[str] = frozenset(),
               iterations: Mapping[str, Iteration] | None = None) -> LevelPlan:
    """The budget split, noise and thresholds of a level.

    Parameters
    ----------
    level : Level
        With a budget or a target MOE, and its declared stability.
    mechanism : Mechanism or str
        ``'geometric'`` or ``'discrete_gaussian'``.
    gamma : Fraction, str or float
    total_only : frozenset of str, optional
        TotalOnly iterations (besides ``level.total_only``).
    iterations : mapping of id to Iteration, optional
        The iterations, whose iteration levels pick their thresholds
        (:meth:`Level.thresholds_for`); needed when the level has thresholds by iteration
        level.

    Returns
    -------
    LevelPlan

    Raises
    ------
    PostprocError
        On an invalid mechanism or γ, or thresholds by iteration level without
        ``iterations``.

    Examples
    --------
    >>> level = Level("state", "state", ("1", "2"), 2, None, 6, (10, 100, 1000),
    ...               frozenset({"2"}))
    >>> plan = plan_level(level, mechanism="discrete_gaussian", gamma="0.1")
    >>> plan.noise["step2"].moe, plan.kinds, plan.total_only
    (6, ('adaptive', 'total_only'), (False, True))

    Detailed iterations with thresholds of their own:

    >>> its = {"R": Iteration("R", "American Indian", ["3000-3999"], iteration_level="regional"),
    ...        "D": Iteration("D", "Navajo", [3101], iteration_level="detailed")}
    >>> level = Level("state", "state", ("R", "D"), 2, None, 6, (10, 100, 1000),
    ...               iteration_thresholds={"detailed": (5, 50, 500)})
    >>> plan_level(level, mechanism="geometric", gamma="0.1", iterations=its
    ...            ).iteration_thresholds().tolist()
    [[10.0, 100.0, 1000.0], [5.0, 50.0, 500.0]]
    """
    notion = notion_of(mechanism)
    if level.budget is not None:
        budget = LevelBudget(notion, level.budget, level.stability, gamma)
    else:
        budget = LevelBudget.from_moe(level.moe, notion=notion, stability=level.stability,
                                      gamma=gamma)
    flags = tuple(i in (total_only | level.total_only) for i in level.iterations)
    noise = {"step1": Noise.for_budget(mechanism, budget.step1),
             "step2": Noise.for_budget(mechanism, budget.step2),
             "total_only": Noise.for_budget(mechanism, budget.total_only)}
    thresholds: tuple[tuple[float, float, float], ...] = ()
    if iterations is not None:
        unknown = [i for i in level.iterations if i not in iterations]
        if unknown:
            raise PostprocError(f"level {level.name!r}: no iteration {unknown[0]!r} is defined")
        thresholds = tuple(level.thresholds_for(iterations[i].iteration_level)
                           for i in level.iterations)
    elif level.iteration_thresholds:
        raise PostprocError(f"level {level.name!r} has thresholds by iteration level; pass "
                            f"its iterations (iterations=...) to know theirs")
    return LevelPlan(level, budget, flags, noise, thresholds)


@dataclass(frozen=True)
class LevelRelease:
    """What one level releases, row by row, with the truth kept beside it (never written).

    Rows are sorted by group (entity, then iteration) and statistic. Group ``g`` is entity
    ``g // I``, iteration ``g % I``.

    Parameters
    ----------
    level : str
    geocodes : numpy.ndarray
        Entities, ``E`` of them.
    iterations : tuple of str
        ``I`` iteration ids.
    choice : numpy.ndarray
        int8 ``(E, I)``: index into :data:`~postproc.apps.safetab.recodes.TABLE_TYPES` of what each
        group released.
    step1 : numpy.ndarray
        int64 ``(E, I)``: the Step-1 noisy totals (0 for TotalOnly groups, which have none).
    group, table, stat : numpy.ndarray
        Per row: group index, table type (index into TABLE_TYPES), statistic (index into
        :data:`~postproc.apps.safetab.recodes.STAT_LABELS`).
    count : numpy.ndarray
        int64 noisy counts (may be negative).
    variance : numpy.ndarray
        Noise variance of each count.
    moe : numpy.ndarray
        95 % MOE of each count.
    coverage : numpy.ndarray
        Exact probability that each count's noise is within ±MOE.
    truth : numpy.ndarray
        True counts. Confidential: for the accuracy report only.
    truth_totals : numpy.ndarray
        True group totals ``(E, I)``. Confidential.

    Examples
    --------
    Made by :func:`measure_level`. Two entities of one TotalOnly iteration release one noisy
    total each:

    >>> from postproc.apps.safetab.groups import GroupCounts
    >>> cells = np.zeros((2, 1, 2, 23), np.int64)
    >>> cells[:, 0, 1, 5] = [12, 30]
    >>> plan = plan_level(Level("state", "state", ("9",), 1, "1/2", None, (10, 20, 30),
    ...                         frozenset({"9"})), mechanism="geometric", gamma="0.1")
    >>> release = measure_level(GroupCounts("state", np.array(["01", "02"]), ("9",), cells, 1),
    ...                         plan, rng=3)
    >>> release.rows, release.choice_counts()
    (2, {'total_only': 2, 'total': 0, 'sex_age4': 0, 'sex_age9': 0, 'sex_age23': 0})
    >>> release.to_table().select(["geography", "table", "count", "moe"]).to_pylist()
    [{'geography': '01', 'table': 'total_only', 'count': 13, 'moe': 5},
     {'geography': '02', 'table': 'total_only', 'count': 30, 'moe': 5}]
    """

    level: str
    geocodes: np.ndarray
    iterations: tuple[str, ...]
    choice: np.ndarray
    step1: np.ndarray
    group: np.ndarray
    table: np.ndarray
    stat: np.ndarray
    count: np.ndarray
    variance: np.ndarray
    moe: np.ndarray
    coverage: np.ndarray
    truth: np.ndarray
    truth_totals: np.ndarray

    @property
    def rows(self) -> int:
        """Number of released counts."""
        return int(self.count.size)

    def choice_counts(self) -> dict[str, int]:
        """How many groups released each table type."""
        counts = np.bincount(self.choice.ravel(), minlength=len(TABLE_TYPES))
        return {name: int(c) for name, c in zip(TABLE_TYPES, counts)}

    def to_table(self) -> pa.Table:
        """The released counts in long form (no truth): ``level, geography, iteration, table,
        stat, count, variance, moe``; strings dictionary-encoded."""
        n_it = len(self.iterations)
        entity, iteration = np.divmod(self.group, n_it)
        return pa.table({
            "level": _dictionary(np.zeros(self.rows, np.int32), [self.level]),
            "geography": _dictionary(entity, self.geocodes),
            "iteration": _dictionary(iteration, self.iterations),
            "table": _dictionary(self.table, TABLE_TYPES),
            "stat": _dictionary(_STAT_CODE[self.stat], _STAT_VALUES),
            "count": pa.array(self.count, pa.int64()),
            "variance": pa.array(self.variance, pa.float64()),
            "moe": pa.array(self.moe, pa.int64()),
        })

    def choices_table(self) -> pa.Table:
        """One row per group: ``level, geography, iteration, table`` (what it released) and
        ``noisy_total_step1`` (null for TotalOnly groups). A DP output like the counts."""
        e, i = len(self.geocodes), len(self.iterations)
        group = np.arange(e * i)
        entity, iteration = np.divmod(group, i)
        choice = self.choice.ravel()
        step1 = pa.array(self.step1.ravel(), pa.int64(), mask=choice == 0)
        return pa.table({
            "level": _dictionary(np.zeros(group.size, np.int32), [self.level]),
            "geography": _dictionary(entity, self.geocodes),
            "iteration": _dictionary(iteration, self.iterations),
            "table": _dictionary(choice, TABLE_TYPES),
            "noisy_total_step1": step1,
        })


# STAT_LABELS repeats a label shared by two tables (e.g. "male:<5" in Age9 and Age23): the
# output dictionary holds each label once.
_STAT_VALUES = tuple(dict.fromkeys(STAT_LABELS))
_STAT_CODE = np.array([_STAT_VALUES.index(label) for label in STAT_LABELS], dtype=np.int32)


def _dictionary(indices: np.ndarray, values) -> pa.DictionaryArray:
    return pa.DictionaryArray.from_arrays(pa.array(np.asarray(indices, np.int32), pa.int32()),
                                          pa.array([str(v) for v in values], pa.string()))


def _tables(cells: np.ndarray, table: str) -> np.ndarray:
    """True counts of ``table`` for groups with sex × Age23 ``cells`` (G, 2, 23): (G, cells)."""
    if table == "total":
        return cells.sum(axis=(1, 2))[:, None]
    recode = AGE_RECODES[table.removeprefix("sex_")]
    starts = np.flatnonzero(np.diff(recode.from_age23(), prepend=-1))
    if cells.shape[0] == 0:
        return np.zeros((0, 2 * recode.size), np.int64)
    return np.add.reduceat(cells, starts, axis=2).reshape(cells.shape[0], -1)


def measure_level(counts: GroupCounts, plan: LevelPlan, rng: Any = None) -> LevelRelease:
    """Run the adaptive algorithm on every group of one level.

    Parameters
    ----------
    counts : GroupCounts
        The level's true sex × Age23 counts per group.
    plan : LevelPlan
        Its budget, TotalOnly iterations and noise.
    rng : None, int, numpy.random.Generator or Randomness, optional
        The level's randomness (:func:`hierarchy.randomness.as_randomness`; ``None`` is release
        mode). Children 0, 1, 2 feed Step 1, Step 2 and the TotalOnly counts.

    Returns
    -------
    LevelRelease

    Raises
    ------
    PostprocError
        If ``counts`` and ``plan`` describe different iterations.

    Examples
    --------
    >>> from postproc.apps.safetab.groups import GroupCounts
    >>> truth = np.zeros((2, 1, 2, 23), np.int64)
    >>> truth[0, 0, :, 10] = 5000                  # a big group and an empty one
    >>> counts = GroupCounts("state", np.array(["01", "02"]), ("1",), truth, 1)
    >>> level = Level("state", "state", ("1",), 1, "1", None, (100, 1000, 5000))
    >>> plan = plan_level(level, mechanism="geometric", gamma="0.1")
    >>> release = measure_level(counts, plan, rng=7)
    >>> [TABLE_TYPES[c] for c in release.choice.ravel()]
    ['sex_age23', 'total']
    >>> release.rows, int(release.truth.sum())
    (47, 10000)
    """
    if counts.iterations != plan.level.iterations:
        raise PostprocError(f"level {plan.level.name!r}: the counts have iterations "
                            f"{counts.iterations}, the plan {plan.level.iterations}")
    source = as_randomness(rng)
    n_entities, n_iterations = counts.counts.shape[:2]
    cells = counts.counts.reshape(n_entities * n_iterations, 2, -1)
    totals = cells.sum(axis=(1, 2))
    total_only = np.tile(np.asarray(plan.total_only, dtype=bool), n_entities)
    choice = np.zeros(totals.size, np.int8)
    step1 = np.zeros(totals.size, np.int64)

    # Step 1: noisy totals of the adaptive groups, and the tables they select
    adaptive = np.flatnonzero(~total_only)
    step1[adaptive] = totals[adaptive] + plan.noise["step1"].sample(adaptive.size,
                                                                    source.child(0))
    theta = plan.iteration_thresholds()[adaptive % n_iterations]
    picked = choose_tables(step1[adaptive], theta)
    choice[adaptive] = picked + 1                     # TABLE_TYPES[1:] == DETAILED_TABLES

    # Step 2: the selected tables, one noise draw for all of them; TotalOnly counts
    parts = []
    for k, table in enumerate(DETAILED_TABLES):
        groups = adaptive[picked == k]
        truth = _tables(cells[groups], table)
        width = truth.shape[1]
        parts.append((np.repeat(groups, width), np.full(truth.size, k + 1, np.int8),
                      np.tile(np.arange(width) + stat_offset(table), groups.size),
                      truth.ravel()))
    group, table, stat, truth = (np.concatenate([p[i] for p in parts]) for i in range(4))
    step2 = plan.noise["step2"]
    noisy = truth + step2.sample(truth.size, source.child(1))
    only = np.flatnonzero(total_only)
    only_noise = plan.noise["total_only"]
    group = np.concatenate([group, only])
    table = np.concatenate([table, np.zeros(only.size, np.int8)])
    stat = np.concatenate([stat, np.zeros(only.size, np.int64)])
    truth = np.concatenate([truth, totals[only]])
    noisy = np.concatenate([noisy, totals[only] + only_noise.sample(only.size, source.child(2))])
    is_step2 = table > 0
    variance = np.where(is_step2, step2.variance, only_noise.variance)
    moe = np.where(is_step2, step2.moe, only_noise.moe).astype(np.int64)
    coverage = np.where(is_step2, step2.coverage, only_noise.coverage)

    order = np.lexsort((stat, group))
    shape = (n_entities, n_iterations)
    return LevelRelease(
        counts.level, counts.geocodes, counts.iterations, choice.reshape(shape),
        step1.reshape(shape), group[order], table[order], stat[order].astype(np.int16),
        noisy[order], variance[order], moe[order], coverage[order], truth[order],
        totals.reshape(shape))

