"""Choosing the MIS proposal parameter ``ε̃``: acceptance curves and an automatic tuner.

The proposal draws ``s̃_I`` double geometric with parameter ``ε̃`` around ``s*_I``. Too small an
``ε̃`` scatters proposals (the solved cells ``I^c`` stray and go negative); too large a one
proposes almost only ``s*`` and cannot reach the target's tails. Gong & Meng observe the
acceptance rate peaking a little above the mechanism's ``ε``. :func:`acceptance_curve` runs a
short pilot chain per grid point; :func:`tune_proposal_epsilon` picks the grid point with the
highest acceptance rate (default) or the most effective samples per second.

Examples
--------
>>> from postproc.methods.sampling.target import conditional_target
>>> t = conditional_target([[1, 1, 1, 1, 1]], [20], centre=[6, 5, 4, 3, 2], epsilon=0.5)
>>> tuning = tune_proposal_epsilon(t, rng=3, proposals=5000)
>>> 0.25 < tuning.best < 1.25, len(tuning.grid)
(True, 13)
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from hierarchy.randomness import as_randomness
from postproc.errors import PostprocError
from postproc.methods.sampling.diagnostics import effective_sample_size, summarize_ess
from postproc.methods.sampling.exact import IndexSet
from postproc.methods.sampling.mis_kernel import (
    MISKernel,
    mis_index_set,
    reference_epsilon,
    run_mis,
)
from postproc.methods.sampling.target import ConditionalTarget

__all__ = ["TuningResult", "acceptance_curve", "tune_proposal_epsilon", "default_grid"]

_BATCHES = 20


@dataclass(frozen=True)
class TuningResult:
    """Pilot runs of the MIS over a grid of ``ε̃``.

    Attributes
    ----------
    grid : tuple of float
    acceptance : tuple of float
        Acceptance rate per grid point.
    stderr : tuple of float
        Batch-means standard error of each acceptance rate (20 batches).
    ess_per_second : tuple of float
        Smallest per-cell ESS per second of each pilot (``nan`` unless computed).
    best : float
        The chosen ``ε̃``.
    criterion : {'acceptance', 'ess_per_second'}
    proposals : int
        Pilot length per grid point.
    seconds : float
        Time the pilots took.

    Examples
    --------
    >>> from postproc.methods.sampling.target import conditional_target
    >>> target = conditional_target([[1, 1, 1]], [9], centre=[3, 3, 3], epsilon=1.0)
    >>> tuning = acceptance_curve(target, [0.5, 1.0, 2.0], rng=0, proposals=2000)
    >>> tuning.grid, tuning.criterion, tuning.proposals
    ((0.5, 1.0, 2.0), 'acceptance', 2000)
    >>> [round(rate, 2) for rate in tuning.acceptance], tuning.best
    ([0.22, 0.57, 0.86], 2.0)
    >>> tuning.to_dict()["ess_per_second"]              # not computed: JSON null
    [None, None, None]
    """

    grid: tuple[float, ...]
    acceptance: tuple[float, ...]
    stderr: tuple[float, ...]
    ess_per_second: tuple[float, ...]
    best: float
    criterion: str
    proposals: int
    seconds: float = field(default=0.0, compare=False)

    def to_dict(self) -> dict[str, Any]:
        def clean(values):
            return [float(v) if np.isfinite(v) else None for v in values]

        return {"grid": list(self.grid), "acceptance": clean(self.acceptance),
                "stderr": clean(self.stderr), "ess_per_second": clean(self.ess_per_second),
                "best": self.best, "criterion": self.criterion, "proposals": self.proposals,
                "seconds": self.seconds}


def default_grid(target: ConditionalTarget, points: int = 13) -> np.ndarray:
    """``ε̃`` from 0.5 to 2.5 times :func:`~postproc.methods.sampling.mis.reference_epsilon`,
    log-spaced.

    Examples
    --------
    >>> from postproc.methods.sampling.target import conditional_target
    >>> t = conditional_target([[1, 1]], [2], centre=[1, 1], epsilon=1.0)
    >>> default_grid(t, 3).round(3).tolist()
    [0.5, 1.118, 2.5]
    """
    return reference_epsilon(target) * np.geomspace(0.5, 2.5, points)


def acceptance_curve(target: ConditionalTarget, grid: Sequence[float] | None = None, *,
                     rng: Any = None, proposals: int = 50_000,
                     index_set: IndexSet | None = None, start: Any = None,
                     ess: bool = False) -> TuningResult:
    """Acceptance rate (and optionally ESS per second) of a pilot MIS run at each ``ε̃``.

    Parameters
    ----------
    target : ConditionalTarget
    grid : sequence of float, optional
        Default :func:`default_grid`.
    rng : None, int, numpy.random.Generator or Randomness
        Each grid point uses its own child stream.
    proposals : int
        Pilot iterations per grid point.
    index_set : IndexSet, optional
    start : array_like, optional
        Start of every pilot (default :meth:`ConditionalTarget.start`).
    ess : bool
        Also keep the chains and compute the smallest per-cell ESS per second.

    Returns
    -------
    TuningResult
        ``best`` is the grid point with the highest acceptance rate.

    Examples
    --------
    >>> from postproc.methods.sampling.target import conditional_target
    >>> t = conditional_target([[1, 1, 1]], [9], centre=[3, 3, 3], epsilon=1.0)
    >>> curve = acceptance_curve(t, [0.5, 1.0, 2.0], rng=0, proposals=4000)
    >>> [0 < a < 1 for a in curve.acceptance]
    [True, True, True]
    """
    source = as_randomness(rng)
    grid = np.asarray(default_grid(target) if grid is None else grid, dtype=np.float64)
    if grid.ndim != 1 or grid.size == 0 or not np.all(np.isfinite(grid)) or np.any(grid <= 0):
        raise PostprocError("the ε̃ grid must be a non-empty list of positive numbers")
    if isinstance(proposals, bool) or not isinstance(proposals, (int, np.integer)) or \
            proposals < _BATCHES:
        raise PostprocError(f"proposals must be an integer ≥ {_BATCHES}, not {proposals!r}")
    ix = index_set if index_set is not None else mis_index_set(target)
    start = target.start() if start is None else np.asarray(start)
    batch = proposals // _BATCHES
    acc, se, eps_rate = [], [], []
    t_all = time.perf_counter()
    for i, eps in enumerate(grid):
        kernel = MISKernel(target, ix, float(eps))
        stream = source.child(i)
        rates = []
        kept_all = []
        state = start
        seconds = 0.0
        for _ in range(_BATCHES):
            t0 = time.perf_counter()
            kept, final, accepted, _ = run_mis(kernel, state, batch, stream, keep=ess)
            seconds += time.perf_counter() - t0
            rates.append(accepted / batch)
            state = final + target.centre
            if ess:
                kept_all.append(kept)
        rates = np.asarray(rates)
        acc.append(float(rates.mean()))
        se.append(float(rates.std(ddof=1) / np.sqrt(_BATCHES)))
        if ess:
            chain = np.concatenate(kept_all)
            eps_rate.append(summarize_ess(effective_sample_size(chain))["min"] / seconds)
        else:
            eps_rate.append(float("nan"))
    best = float(grid[int(np.argmax(acc))])
    return TuningResult(tuple(float(g) for g in grid), tuple(acc), tuple(se), tuple(eps_rate),
                        best, "acceptance", int(batch * _BATCHES),
                        time.perf_counter() - t_all)


def tune_proposal_epsilon(target: ConditionalTarget, *, rng: Any = None,
                          criterion: str = "acceptance", grid: Sequence[float] | None = None,
                          proposals: int = 20_000, index_set: IndexSet | None = None,
                          start: Any = None) -> TuningResult:
    """Pick ``ε̃`` for the MIS by pilot runs over a grid.

    Parameters
    ----------
    target : ConditionalTarget
    rng : None, int, numpy.random.Generator or Randomness
    criterion : {'acceptance', 'ess_per_second'}
        Maximize the acceptance rate (default; cheap and stable) or the smallest per-cell
        effective sample size per second of sampling.
    grid : sequence of float, optional
        Default :func:`default_grid` (13 points, 0.5–2.5 × the mechanism's ``ε``).
    proposals : int
        Pilot iterations per grid point.
    index_set : IndexSet, optional
    start : array_like, optional

    Returns
    -------
    TuningResult

    Raises
    ------
    PostprocError
        Unknown criterion or bad grid.

    Examples
    --------
    >>> from postproc.methods.sampling.target import conditional_target
    >>> t = conditional_target([[1, 1, 1]], [9], centre=[3, 3, 3], epsilon=1.0)
    >>> r = tune_proposal_epsilon(t, rng=0, grid=[0.8, 1.2, 2.0], proposals=2000,
    ...                           criterion="ess_per_second")
    >>> r.criterion, r.best in (0.8, 1.2, 2.0)
    ('ess_per_second', True)
    """
    if criterion not in ("acceptance", "ess_per_second"):
        raise PostprocError(f"criterion must be 'acceptance' or 'ess_per_second', not "
                            f"{criterion!r}")
    curve = acceptance_curve(target, grid, rng=rng, proposals=proposals, index_set=index_set,
                             start=start, ess=criterion == "ess_per_second")
    if criterion == "acceptance":
        return curve
    rates = np.asarray(curve.ess_per_second)
    best = float(curve.grid[int(np.nanargmax(rates))]) if np.isfinite(rates).any() else curve.best
    return TuningResult(curve.grid, curve.acceptance, curve.stderr, curve.ess_per_second, best,
                        criterion, curve.proposals, curve.seconds)
