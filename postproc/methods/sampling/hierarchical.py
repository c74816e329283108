"""Top-down conditional sampling of a :class:`~hierarchy.noisy.NoisyHierarchy`.

An alternative to TopDown's optimization (docs/topdown.md) in the spirit of Gong & Meng (2020):
at every level, each parent's children are *drawn*, not fitted.

What is sampled
---------------
Let ``y_k`` be child ``k``'s noisy detailed histogram, ``f`` the per-cell noise law of the
mechanism that produced it (two-sided geometric with the level's ``z``; discrete Gaussian with the
level's ``σ²``; Laplace and Gaussian measurements are treated as their integer analogues, the
two-sided geometric with ``z = 1/b`` and the discrete Gaussian with the same ``σ²``). For a parent
``p`` with released histogram ``x̂_p`` and children ``1..K`` the children are one draw of

    ``π_p(X) ∝ ∏_k ∏_j f(X_kj − y_kj) · 1{Σ_k X_k = x̂_p} · 1{X_k ∈ S_k for every k}``

over integer ``X`` (``S_k``: child ``k``'s invariants and constraints, nonnegativity and zero
cells, from :func:`invariants.compile.compile_spec`). The root is one draw of
``∏_j f(X_j − y_j) · 1{X ∈ S_root}``.

Why this is the conditional mechanism, level by level
------------------------------------------------------
Gong & Meng's conditional mechanism releases ``M(x) | M(x) ∈ S*``: the mechanism's law around the
confidential ``x``, restricted to the invariant set. ``π_p`` is exactly that construction with the
noisy measurement in the role of the centre (``f`` is symmetric, so ``f(X − y) = f(y − X)``) and
``S*`` = the set of children tables consistent with the already released parent and with the
children's own invariants — the invariant set that the top-down release must respect at that
node. Two consequences, stated plainly:

* the output is a function of the noisy measurements, the published invariants and fresh
  randomness only, so it is post-processing: it spends no privacy budget beyond the measurements
  (unlike Gong & Meng's mechanism applied to ``x``, whose cost is ``(1 + γ) k ε``);
* the centre is ``y`` = ``x`` + noise, so a draw carries the measurement's noise *and* a second
  draw's worth of spread before the invariants shrink it. Expect errors above TopDown's, which
  returns (near) the mode; the sampled release is unbiased-in-spirit rather than optimal.

By default every measured query's noise law enters ``π_p`` (``queries="all"``: the likelihood
of all the measurements, which is what TopDown fits too); ``queries="detailed"`` keeps only the
detailed measurements, which wastes the budget spent on marginals: on a 20,000-person E2E
hierarchy at ε = 1 it left county ``hhgq`` errors about 4 times larger (mean absolute error 10.3
against 2.4 with ``"all"``, TopDown 1.5), and more sweeps did not help.

How it is sampled
-----------------
Each level's chains start from a feasible integer point. ``start="topdown"`` (default) takes
TopDown's: at the root TopDown's root solution; below, one TopDown node solve (weighted least
squares, constraint-keeping rounding, exact check; failsafe off) of each *sampled* parent, so
the start sums to the parent actually released and keeps every invariant and constraint of its
level — TopDown's own solution of that level would sum to TopDown's parents, not to the sampled
ones, and is used only where a parent was sampled exactly as TopDown released it (a given
TopDown result). This costs one TopDown solve in all. ``start="l1"`` takes the L1-closest point
to ``y`` (the mode for the geometric law) that the next level can split, by one HiGHS LP for all
parents of the level (block diagonal; integrality verified, MILP as a fallback) — minutes on
large levels. Either start is then forgotten only as fast as the chain mixes: the release is the
state after ``sweeps`` sweeps. Then :class:`~postproc.methods.sampling.lattice.LatticeEngine` runs
``sweeps`` sweeps of Metropolis lattice moves for all parents at once: children are paired at random
within their parent; a cell moves ``+k``/``−k`` between paired children (the parent's sum holds) or,
where children have equality invariants such as ``tot``, a swap ``(+k, −k, −k, +k)`` on two cells
keeps them; coupled constraint rows are checked exactly. The step's mean size is
``max(1, min(0.8 σ, x̂_pj / K_p))`` — it depends on the parent (fixed during the level), never
on the state, so the proposal stays symmetric. Every level is verified in exact integer
arithmetic (children sum to the parent; every invariant and constraint holds).

Examples
--------
>>> from hierarchy.synth import synthesize_1940
>>> from hierarchy.tabulation import tabulate
>>> from hierarchy.measurement import measure
>>> from hierarchy.budget import Budget
>>> from hierarchy.queries import e2e_workload
>>> from hierarchy.schema import E2E_1940
>>> from invariants.spec import Invariant, Spec
>>> levels = ["nation", "state", "county", "enum_dist"]
>>> data = synthesize_1940(5_000, seed=1)
>>> truth = tabulate(data.persons, schema=E2E_1940, levels=levels, units=data.units)
>>> spec = Spec.e2e(levels)
>>> noisy = measure(truth, e2e_workload(E2E_1940), Budget.e2e(1, levels), "geometric",
...                 rng=3, spec=spec)
>>> result = sample_topdown(noisy, spec, rng=4, sweeps=20)
>>> [int(h.sum()) for h in result.histograms] == [int(truth.counts[0].sum())] * 4
True
>>> bool((result.histograms[-1] >= 0).all()), result.provenance["sampler"]["name"]
(True, 'lattice')
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from hierarchy.noisy import NoisyHierarchy
from hierarchy.randomness import as_randomness
from invariants.compile import LevelConstraints, compile_spec, violations
from invariants.spec import Spec
from postproc.errors import PostprocError, require_checked_spec
from postproc.methods.sampling.engine import LatticeEngine, default_step, move_structure
from postproc.methods.sampling.hierarchical_plan import (
    _answer_terms,
    _Clock,
    _LevelSetup,
    _Plan,
    _Progress,
    _queries,
    level_noise,
)
from postproc.methods.sampling.hierarchical_start import _check_start, _level_start
from postproc.methods.sampling.target import _positive_int
from postproc.result import Result

# level_noise (and _Clock) live in hierarchical_plan.py and still import from here
__all__ = ["sample_topdown", "level_noise"]


def sample_topdown(noisy: NoisyHierarchy, spec: Spec | None = None, *, rng: Any = None,
                   sweeps: int = 100, mechanism: str | None = None,
                   queries: Any = "all", step_factor: float = 0.8,
                   retries: int = 10, start: Any = "topdown", progress: bool = False,
                   time_limit: float | None = None) -> Result:
    """Post-process a noisy hierarchy by top-down conditional sampling (see the module docs).

    Parameters
    ----------
    noisy : NoisyHierarchy
        Must have the ``detailed`` query measured at every level.
    spec : Spec, optional
        Invariants and constraints (default none: nonnegativity and consistency only); one
        with constraints must be covered by the spec ``noisy`` was measured with
        (:func:`postproc.errors.require_checked_spec`).
    rng : None, int, numpy.random.Generator or Randomness
        ``None`` is release mode; an int seed is simulation mode (labelled unsafe).
    sweeps : int
        Metropolis sweeps per level from the level's start; the final state is released.
    mechanism : str, optional
        Override the measurement mechanism named in the provenance.
    queries : 'detailed', 'all' or list of query names
        Which measurements enter the law. ``'all'`` (default) multiplies in every measured
        query's noise law at its answers,
        ``∏_q ∏_a f_q((Q_q X_k)_a − y_{k,q,a})`` — the likelihood of all measurements, which
        is much tighter when most of the budget went to marginals (as in the E2E split);
        ``'detailed'`` uses the detailed measurements only.
    step_factor : float
        Mean step = ``max(1, min(step_factor · σ, x̂_pj / K_p))`` with ``σ`` the smallest noise
        sd among the used queries.
    retries : int
        When the next level cannot split a level's draw (a parent drawn into a corner), sample
        that level ``sweeps`` more sweeps and check again, up to ``retries`` times; then release
        the level's start (and, if TopDown's split cannot be split either, the weighted-L1
        start, splittable by construction). Every such event is listed in
        ``provenance['failsafe_reports']``.
    start : 'topdown' (default), 'l1' or Result
        Where each level's chains start. ``'topdown'``: TopDown's integer solution — at the root
        TopDown's root, below it one TopDown node solve per sampled parent (fast; it satisfies
        every constraint and sums to the sampled parent). ``'l1'``: the weighted-L1 mode, one
        HiGHS LP per level (MILP if not integral) that also asks the next level to be
        splittable (slow on large levels). A :class:`~postproc.result.Result` of
        ``topdown(noisy, spec)``: as ``'topdown'``, reusing its root and its children of any
        parent sampled exactly as TopDown released it.
    progress : bool
        A tqdm bar per level on stderr (sweeps; its postfix says start, sweeps or split check).
    time_limit : float, optional
        Seconds for the whole call; when exceeded, a :class:`PostprocError` names the level,
        what it was doing and the levels finished, and says how to go on.

    Returns
    -------
    Result
        Method ``"sampling"``: int64 histograms per level, root first;
        ``node_stats`` per parent (children, moves proposed and accepted, acceptance rate);
        ``provenance['sampler']`` with the law, parameters, sweeps, start, randomness and each
        level's acceptance rate (``None`` where no move was proposed);
        ``provenance['timings']`` with seconds per level, and of those the start's and the
        sweeps' (``start``, ``sweeps``).

    Raises
    ------
    PostprocError
        Missing measurements or provenance, unsatisfiable invariants at a node (naming it), a
        start result that does not fit, the time limit, or a failed exact verification.

    Examples
    --------
    >>> import pandas as pd
    >>> from hierarchy.budget import Budget
    >>> from hierarchy.measurement import measure
    >>> from hierarchy.queries import e2e_workload
    >>> from hierarchy.schema import E2E_1940
    >>> from hierarchy.tabulation import tabulate
    >>> from invariants.spec import Invariant
    >>> persons = pd.DataFrame({"state": ["01"] * 5 + ["02"] * 3, "hhgq": [0] * 8,
    ...                         "votingage": [1, 1, 0, 1, 1, 1, 0, 1], "hispanic": [0] * 8,
    ...                         "cenrace": [0, 0, 0, 1, 1, 0, 2, 2]})
    >>> truth = tabulate(persons, schema=E2E_1940, levels=["nation", "state"])
    >>> noisy = measure(truth, e2e_workload(E2E_1940), Budget.e2e(2, ["nation", "state"]),
    ...                 "geometric", rng=1, publish={"tot": ["nation", "state"]})
    >>> spec = Spec(invariants=(Invariant("tot", "all"),))
    >>> out = sample_topdown(noisy, spec, rng=2, sweeps=20, queries="all")
    >>> out.histograms[1].sum(axis=1).tolist(), out.safe_for_release
    ([5, 3], False)
    >>> out.provenance["sampler"]["start"], sorted(out.provenance["timings"])
    ('topdown', ['levels', 'start', 'sweeps', 'total'])
    >>> sample_topdown(noisy, spec, rng=2, sweeps=20, time_limit=0)
    Traceback (most recent call last):
    ...
    postproc.errors.PostprocError: conditional sampling stopped by time_limit=0 s at level ...
    """
    plan = _plan(noisy, spec, rng=rng, sweeps=sweeps, mechanism=mechanism, queries=queries,
                 step_factor=step_factor, retries=retries, start=start, time_limit=time_limit)
    clock = _Clock(plan.time_limit, plan.sweeps, plan.kind)
    log = _Log()
    bar = _Progress(progress, plan.sweeps, plan.geo.levels[0])
    try:
        at = _root_start(plan, clock, log)
        for li in range(plan.geo.depth):
            at = _sample_level(plan, li, at, clock, bar, log)
    finally:
        bar.close()
    return _result(plan, log, clock.t0)


def _plan(noisy: NoisyHierarchy, spec: Spec | None, *, rng: Any, sweeps: Any, mechanism: Any,
          queries: Any, step_factor: float, retries: Any, start: Any, time_limit: Any) -> _Plan:
    """Check the inputs and plan the levels: each level's law and step size, the compiled
    constraints and the start."""
    sweeps = _positive_int(sweeps, "sweeps", zero=True)
    retries = _positive_int(retries, "retries", zero=True)
    if time_limit is not None and not (isinstance(time_limit, (int, float))
                                       and not isinstance(time_limit, bool)
                                       and time_limit >= 0):
        raise PostprocError(f"time_limit must be a number of seconds >= 0 or None, "
                            f"not {time_limit!r}")
    require_checked_spec("sampling", noisy, spec)
    source = as_randomness(rng)
    spec = spec or Spec()
    geo = noisy.geography
    used = _queries(noisy, queries)
    laws = [level_noise(noisy, lv, mechanism, "detailed" if "detailed" in used else used[0])
            for lv in geo.levels]
    sds = [min(float(default_step(*level_noise(noisy, lv, mechanism, q))) / 0.8 for q in used)
           for lv in geo.levels]
    compiled = compile_spec(spec, noisy.schema, geo, noisy.invariants)
    kind, given = _check_start(start, noisy, compiled)
    return _Plan(noisy=noisy, spec=spec, source=source, used=used, laws=laws, sds=sds,
                 compiled=compiled, kind=kind, given=given, sweeps=sweeps, retries=retries,
                 step_factor=step_factor, mechanism=mechanism,
                 time_limit=None if time_limit is None else float(time_limit))


@dataclass
class _Log:
    """What the call records as it goes, level by level: the released histograms, the node
    statistics, the failsafe reports, each level's acceptance rate and its seconds (in all, of
    its start, of its sweeps)."""

    hists: list[np.ndarray] = field(default_factory=list)
    stats: list[dict[str, Any]] = field(default_factory=list)
    reports: list[dict[str, Any]] = field(default_factory=list)
    acceptance: dict[str, float | None] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)
    start_seconds: dict[str, float] = field(default_factory=dict)
    sweep_seconds: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True, eq=False)
class _Start:
    """A level's sampled units and the feasible integer state their chains start from."""

    setup: _LevelSetup
    hist: np.ndarray


def _root_start(plan: _Plan, clock: _Clock, log: _Log) -> _Start:
    """The root's units and start (TopDown's root, or the weighted-L1 mode)."""
    root = plan.geo.levels[0]
    clock.at(root, "finding its start")
    t0 = time.perf_counter()
    setup = plan.setup(0, None)
    start = _Start(setup, _level_start(plan, 0, setup, clock, strict=True))
    log.start_seconds[root] = time.perf_counter() - t0
    return start


def _sample_level(plan: _Plan, li: int, at: _Start, clock: _Clock, bar: _Progress,
                  log: _Log) -> _Start | None:
    """Sample level ``li``'s children from their start; find the next level's start in the
    draw; verify and record the level. Returns the next level's start (``None`` after the
    last)."""
    levels = plan.geo.levels
    level = levels[li]
    below = levels[li + 1] if li + 1 < plan.geo.depth else None
    t_level = time.perf_counter() - log.start_seconds[level]
    t0 = time.perf_counter()
    chain = _run_chains(plan, li, at, clock, bar)
    log.sweep_seconds[level] = time.perf_counter() - t0
    following = None
    if below is not None:
        t_next = time.perf_counter()
        following, report = _next_start(plan, li, at, chain, clock, bar)
        if report is not None:
            log.reports.append(report)
        log.start_seconds[below] = time.perf_counter() - t_next
    _record_level(plan, li, at.setup, chain, log)
    clock.done.append(level)
    bar.next_level(below)
    # a level's time: its start and its sweeps (its split check is the next one's start)
    log.timings[level] = (time.perf_counter() - t_level - log.start_seconds[below]
                          if below is not None else time.perf_counter() - t_level)
    return following


class _Chain:
    """A level's lattice chains: the engine, its random stream and the callback after each sweep
    (the progress bar, the clock); :meth:`run` writes the chains' state into the level's
    histogram."""

    def __init__(self, engine: LatticeEngine, stream: Any, setup: _LevelSetup, clock: _Clock,
                 bar: _Progress, sweeps: int):
        self.engine, self.stream, self.setup = engine, stream, setup
        self.clock, self.bar, self.sweeps = clock, bar, sweeps
        self.done = 0

    def on_sweep(self, i: int) -> None:
        self.done += 1
        self.bar.update(1)
        if self.clock.limit is not None:
            self.clock.doing = f"running sweep {self.done} of {self.sweeps}"
            self.clock.check()

    def run(self, sweeps: int) -> None:
        self.done = 0
        self.engine.run(sweeps, self.stream, on_sweep=self.on_sweep)
        self.setup.hist[self.setup.units] = self.engine.X


def _run_chains(plan: _Plan, li: int, at: _Start, clock: _Clock,
                bar: _Progress) -> _Chain | None:
    """Run the level's chains ``sweeps`` sweeps from its start (``None``: nothing to sample,
    every parent has one child)."""
    setup = at.setup
    bar.postfix("sweeps")
    if not setup.units.size:
        bar.update(plan.sweeps)
        return None
    chain = _Chain(_engine(plan, li, at), plan.source.child(li), setup, clock, bar, plan.sweeps)
    clock.at(setup.level, f"running sweep 1 of {plan.sweeps}")
    chain.run(plan.sweeps)
    return chain


def _engine(plan: _Plan, li: int, at: _Start) -> LatticeEngine:
    """The lattice engine of a level's sampled units, at their start."""
    st = at.setup
    structure, rows, row_lo, row_hi, _ = _structure(st.lc, st.units, st.upper)
    law, param = plan.laws[li]
    engine = LatticeEngine(at.hist, st.y[st.units], law, param, 0.0, st.upper, structure,
                           groups=st.group_of, cross=st.cross, rows=rows if rows.size else None,
                           row_lower=row_lo, row_upper=row_hi, step=st.step, integer=True,
                           terms=_answer_terms(plan.noisy, st.level, plan.used, st.units,
                                               plan.mechanism),
                           cell_terms="detailed" in plan.used)
    engine.track_units = True
    return engine


def _structure(lc: LevelConstraints, units: np.ndarray, cap: np.ndarray):
    """Equality rows to preserve, coupled rows to check, and the move structure (cells capped
    at 0 in every unit never move)."""
    lower, upper, zero = lc.rows_of(units)
    M = lc.matrix.toarray()
    support = M != 0
    eq = np.isfinite(lower) & (lower == upper)
    # an equality is trivial for a unit when every cell it counts is a zero cell there
    live = (~zero).astype(np.int64) @ support.T.astype(np.int64) > 0
    eq_any = np.any(eq & live, axis=0)
    fixed = (zero | (cap <= 0)).all(axis=0)
    structure = move_structure(M[eq_any], fixed)
    bounded = np.any(np.isfinite(lower) | np.isfinite(upper), axis=0) & ~eq_any
    rows = M[bounded]
    return structure, rows, lower[:, bounded], upper[:, bounded], eq_any


def _next_start(plan: _Plan, li: int, at: _Start, chain: _Chain | None, clock: _Clock,
                bar: _Progress) -> tuple[_Start, dict[str, Any] | None]:
    """The next level's units and start, split from this level's draw, and the failsafe report
    (``None`` when the first draw could be split).

    The next level must be able to split this one: otherwise sample on, then fall back to the
    level's start; when not even that can be split, the weighted-L1 start raises naming the
    node.
    """
    setup, start, retries = _split_or_sample_on(plan, li, at.setup, chain, clock, bar)
    action = None
    if start is None and chain is not None:
        setup, start, action = _release_a_start(plan, li, at, setup, clock)
    if start is None:     # not even the start: raise, naming the node
        start = _level_start(plan, li + 1, setup, clock, strict=True, how="l1")
    level = plan.geo.levels[li]
    report = None
    if action is not None:
        report = {"level": level, "retries": retries, "action": action}
    elif retries:
        report = {"level": level, "retries": retries,
                  "action": "sampled further until the next level could split the state"}
    return _Start(setup, start), report


def _split_or_sample_on(plan: _Plan, li: int, st: _LevelSetup, chain: _Chain | None,
                        clock: _Clock, bar: _Progress
                        ) -> tuple[_LevelSetup, np.ndarray | None, int]:
    """The next level's units and start in the level's draw; while it cannot be split, run the
    chains ``sweeps`` more sweeps (at least one), at most ``retries`` times. Returns the units,
    the start (``None``: still not splittable) and the number of retries run."""
    level, below = plan.geo.levels[li], plan.geo.levels[li + 1]
    extra_runs = 0
    while True:
        clock.at(level, f"finding the start of {below!r} (splitting {level!r})")
        bar.postfix(f"start of {below}")
        setup = plan.setup(li + 1, st.hist)
        start = _level_start(plan, li + 1, setup, clock, strict=False)
        if start is not None or chain is None or extra_runs >= plan.retries:
            return setup, start, extra_runs
        clock.at(level, f"retry {extra_runs + 1} of {plan.retries}: {plan.sweeps} more "
                        f"sweeps, {below!r} could not split the draw")
        bar.extend(max(plan.sweeps, 1))
        bar.postfix(f"retry {extra_runs + 1}")
        chain.run(max(plan.sweeps, 1))
        extra_runs += 1


def _release_a_start(plan: _Plan, li: int, at: _Start, setup: _LevelSetup, clock: _Clock
                     ) -> tuple[_LevelSetup, np.ndarray | None, str | None]:
    """No sampled state could be split: release the level's start instead — TopDown's split,
    then the weighted-L1 mode (splittable by construction). Returns the next level's units, its
    start (``None``: neither could be split; the units are then those of the last one tried, or
    ``setup``) and what was released."""
    st = at.setup
    for how in dict.fromkeys((plan.kind, "l1")):
        fallback = (at.hist if how == plan.kind
                    else _level_start(plan, li, st, clock, strict=False, how="l1"))
        if fallback is None:
            continue
        st.hist[st.units] = fallback
        setup = plan.setup(li + 1, st.hist)
        start = _level_start(plan, li + 1, setup, clock, strict=False)
        if start is None and plan.kind == "topdown":
            start = _level_start(plan, li + 1, setup, clock, strict=False, how="l1")
        if start is not None:
            action = ("released the start (TopDown's split)" if how == "topdown"
                      else "released the weighted-L1 start")
            return setup, start, action + ": no sampled state could be split into the next level"
    return setup, None, None


def _record_level(plan: _Plan, li: int, st: _LevelSetup, chain: _Chain | None,
                  log: _Log) -> None:
    """The level's node statistics and acceptance rate; its histogram, verified exactly."""
    geo, n = plan.geo, plan.noisy.schema.size
    level = geo.levels[li]
    accepted = proposed = 0
    if chain is not None:
        accepted, proposed = chain.engine.accepted, chain.engine.proposed
        log.stats.extend(_parent_stats(level, st, chain.engine, n))
    for p in st.copies:
        log.stats.append({"level": level, "parent": str(geo.geocodes[li - 1][p]),
                          "children": 1, "variables": n, "proposed": 0, "accepted": 0,
                          "acceptance": float("nan"), "copied": True})
    _verify(st.lc, st.hist, log.hists[li - 1] if li else None, geo, li)
    log.hists.append(st.hist)
    # None (JSON null), not NaN, where no move was proposed: the provenance goes into a
    # result directory's manifest.json, and NaN is not JSON
    log.acceptance[level] = accepted / proposed if proposed else None


def _parent_stats(level: str, st: _LevelSetup, engine: LatticeEngine,
                  n: int) -> list[dict[str, Any]]:
    """One row of node statistics per sampled parent (per root unit at the root)."""
    per_group_prop = np.bincount(st.group_of, engine.unit_proposed, minlength=len(st.groups))
    per_group_acc = np.bincount(st.group_of, engine.unit_accepted, minlength=len(st.groups))
    return [{"level": level,
             "parent": "" if st.parent_codes is None else str(st.parent_codes[i]),
             "children": int(g.stop - g.start),
             "variables": int((g.stop - g.start) * n),
             "proposed": int(per_group_prop[i]), "accepted": int(per_group_acc[i]),
             "acceptance": float(per_group_acc[i] / per_group_prop[i])
             if per_group_prop[i] else float("nan"),
             "copied": False}
            for i, g in enumerate(st.groups)]


def _verify(lc, hist, parent_hist, geo, li) -> None:
    found = violations(lc, hist)
    if parent_hist is not None:
        summed = geo.aggregate(hist, li, li - 1)
        for p, j in np.argwhere(summed != parent_hist)[:5]:
            found.append(f"{geo.levels[li]} units of {geo.levels[li - 1]} "
                         f"{geo.geocodes[li - 1][p]!r} sum to {int(summed[p, j])} in cell {j}, "
                         f"the parent has {int(parent_hist[p, j])}")
    if found:
        raise PostprocError("conditional sampling result fails verification:\n  "
                            + "\n  ".join(found))


def _result(plan: _Plan, log: _Log, t_start: float) -> Result:
    """Assemble the result: the histograms, the node statistics and the provenance."""
    noisy, geo = plan.noisy, plan.geo
    provenance = {
        "noisy": dict(noisy.provenance), "spec": plan.spec.to_dict(),
        "sampler": {"name": "lattice", "method": "top-down conditional sampling",
                    "sweeps": plan.sweeps, "step_factor": plan.step_factor,
                    "queries": plan.used, "retries": plan.retries,
                    "start": plan.kind if plan.given is None else "topdown (given)",
                    "laws": {lv: {"law": law, "parameter": p} for lv, (law, p) in
                             zip(geo.levels, plan.laws)},
                    "acceptance": log.acceptance, "randomness": plan.source.provenance()},
        "timings": {"levels": log.timings, "start": log.start_seconds,
                    "sweeps": log.sweep_seconds, "total": time.perf_counter() - t_start},
        "failsafe_reports": log.reports,
    }
    return Result("sampling", noisy.schema, geo, noisy.workload, tuple(log.hists), provenance,
                  pd.DataFrame(log.stats))
