"""Baselines that measure and then reconcile, and simple adjustments of their results.

Each baseline here is a measuring step (a strategy that returns a
:class:`~hierarchy.noisy.NoisyHierarchy`) followed by a reconciling step (a post-processor of
:mod:`postproc.methods.baselines.reconcile` that takes it), so its measurements can also be handed
to any other registered post-processor (:mod:`postproc.methods`):

``bottom_up`` = :func:`measure_bottom`, then :func:`~.reconcile.bottom_up_sums`
    Geometric noise on every detailed cell of every bottom-level unit, spending the *whole*
    budget there (``z = ε/Δ``, ``Δ = 2`` for the E2E "change one record" neighbours); every higher
    level's histograms, margins and totals are sums of those noisy cells (Clark & Dajani 2019).
    Compare it with TopDown at the same total ε.
``gdpc``, ``adpc``, ``rdpc`` = :func:`~.tree.measure_tree`, then a reconciler
    Flaxman's (2019) baselines on a :class:`~postproc.methods.baselines.tree.TreeCounts`: the leaves
    measured (GDPC) or measured ``P`` times and averaged (ADPC), then summed up the tree
    (``bottom_up_sums``); or every level measured and raked top-down (RDPC,
    :func:`~postproc.methods.baselines.reconcile.rake` with ``clip=False``). They return a
    ``TreeCounts``.

And on any result:

``clip_negative``
    Negative cells set to 0 — of the noisy ``detailed`` measurements of every level (each level
    on its own, so levels stop adding up), or of any :class:`~postproc.result.Result`.
``calibrate_to_totals``
    Optional calibration of a bottom-level estimate to published totals (e.g. the invariant
    ``tot`` of states), two ways. ``additive`` (default): the least-squares adjustment — every
    bottom-level cell under a unit of the calibration level moves by the same amount,
    ``(total − Σ cells) / cells`` — the smallest change in L2 that hits the totals; it keeps the
    noise unbiased and may leave negative cells. ``proportional``: cells clipped at 0, then scaled
    so they sum to the total (an all-zero unit gets the total spread evenly); nonnegative, but
    clipping the many empty cells first inflates them, and the scaling then takes that excess out
    of the populated cells — badly biased at small ε (see ``postproc experiment clark_dajani``).
    The levels above are re-summed either way.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from hierarchy.histograms import Hierarchy
from hierarchy.mechanisms import (
    get_mechanism,
    sample_two_sided_geometric,
    two_sided_geometric_variance,
)
from hierarchy.noisy import Measurement, NoisyHierarchy
from hierarchy.queries import Workload, detailed, e2e_workload
from hierarchy.randomness import as_randomness
from postproc.errors import PostprocError
from postproc.methods.baselines.reconcile import bottom_up_sums, rake, sums_from_bottom
from postproc.methods.baselines.tree import TreeCounts, _budget, measure_tree
from postproc.result import Result

__all__ = ["measure_bottom", "bottom_up", "gdpc", "adpc", "rdpc", "clip_negative",
           "calibrate_to_totals", "sums_from_bottom"]


def measure_bottom(truth: Hierarchy, epsilon: float, rng: Any = None, *,
                   sensitivity: float = 2.0, workload: Workload | None = None) -> NoisyHierarchy:
    """Bottom-up's measurement: geometric noise on every detailed cell of the bottom level.

    Parameters
    ----------
    truth : Hierarchy
        Exact histograms.
    epsilon : float
        The whole budget, spent on the bottom level's detailed cells (the units of one level
        compose in parallel); ``z = ε/Δ``, drawn from ``rng`` itself.
    rng : None, int, numpy.random.Generator or Randomness
        Noise source (``None``: release mode, exact sampler).
    sensitivity : float
        ``Δ`` of the detailed histogram of one level: 2 when one person's record may change
        (the E2E neighbours), 1 for adding or removing a person.
    workload : Workload, optional
        The queries of the measurements (default: the E2E workload if the schema has its
        attributes, else ``detailed`` alone). Its ``detailed`` query is the one measured; one
        named ``detailed`` is added in front if it has none.

    Returns
    -------
    NoisyHierarchy
        The bottom level's ``detailed`` query measured (int64, variance ``V(z)`` per cell), no
        other level; ``provenance`` has the strategy (``"bottom"``), budget, ``z``, sensitivity
        and randomness.

    Raises
    ------
    PostprocError
        A non-positive budget or sensitivity, or a workload whose query named ``detailed`` is
        another query.

    Examples
    --------
    >>> from hierarchy.synth import synthesize_1940
    >>> from hierarchy.tabulation import tabulate
    >>> from hierarchy.schema import E2E_1940
    >>> truth = tabulate(synthesize_1940(2_000, seed=1).persons, schema=E2E_1940,
    ...                  levels=["nation", "state"])
    >>> measure_bottom(truth, 1.0, rng=3)
    NoisyHierarchy(state[detailed]; randomness=simulation)
    """
    epsilon = _budget(epsilon)
    delta = _budget(sensitivity, "sensitivity")
    z = epsilon / delta
    rnd = as_randomness(rng)
    workload = _with_detailed(workload or _default_workload(truth.schema))
    query = next(q.name for q in workload if q.expression == "detailed")
    leaves = truth.counts[-1]
    values = leaves.astype(np.int64) + sample_two_sided_geometric(z, leaves.shape, rnd)
    variance = two_sided_geometric_variance(z)
    bottom = truth.levels[-1]
    measured = Measurement(query, values, np.broadcast_to(np.float64(variance), values.shape))
    return NoisyHierarchy(truth.schema, truth.geography, workload, {bottom: {query: measured}},
                          {}, {"strategy": "bottom", "epsilon": epsilon, "sensitivity": delta,
                               "mechanism": get_mechanism("geometric").to_dict(),
                               "parameters": {bottom: {query: {"budget": epsilon, "z": z,
                                                               "variance": variance}}},
                               "randomness": rnd.provenance()})


def bottom_up(truth: Hierarchy, epsilon: float, rng: Any = None, *, sensitivity: float = 2.0,
              workload: Workload | None = None) -> Result:
    """Bottom-up: :func:`measure_bottom`, then
    :func:`~postproc.methods.baselines.reconcile.bottom_up_sums`.

    Parameters
    ----------
    truth : Hierarchy
        Exact histograms.
    epsilon : float
        The whole budget, spent on the bottom level's detailed cells.
    rng : None, int, numpy.random.Generator or Randomness
        Noise source (``None``: release mode).
    sensitivity : float
        ``Δ`` of the detailed histogram of one level (2: E2E neighbours; 1: add/remove).
    workload : Workload, optional
        Named queries for :meth:`Result.answers` (see :func:`measure_bottom`).

    Returns
    -------
    Result
        ``method="bottom_up"``, int64 histograms (possibly negative), consistent by construction;
        ``provenance["noisy"]`` is the measurement's provenance.

    Raises
    ------
    PostprocError
        A non-positive budget or sensitivity.

    Examples
    --------
    >>> from hierarchy.synth import synthesize_1940
    >>> from hierarchy.tabulation import tabulate
    >>> from hierarchy.schema import E2E_1940
    >>> truth = tabulate(synthesize_1940(2_000, seed=1).persons, schema=E2E_1940,
    ...                  levels=["nation", "state"])
    >>> est = bottom_up(truth, 1.0, rng=3)
    >>> bool((est.histograms[0] == est.histograms[1].sum(axis=0)).all())
    True
    """
    return bottom_up_sums(measure_bottom(truth, epsilon, rng, sensitivity=sensitivity,
                                         workload=workload))


def gdpc(truth: TreeCounts, epsilon: float, rng: Any = None, *,
         sensitivity: float = 1.0) -> TreeCounts:
    """GDPC: the leaves measured with the whole budget (``z = ε/Δ``); higher levels are sums.

    :func:`~postproc.methods.baselines.tree.measure_tree` with ``strategy="leaves"``, then
    :func:`~postproc.methods.baselines.reconcile.bottom_up_sums`.

    Parameters
    ----------
    truth : TreeCounts
        Exact counts.
    epsilon : float
        The whole budget, all spent on the leaves.
    rng : None, int, numpy.random.Generator or Randomness
        Noise source (``None``: release mode).
    sensitivity : float
        ``Δ`` of a leaf count.

    Returns
    -------
    TreeCounts
        ``method="gdpc"``, int64 (possibly negative).

    Raises
    ------
    PostprocError
        A non-positive budget or sensitivity.

    Examples
    --------
    >>> pop = TreeCounts.from_leaves(np.full(4, 50), 2)
    >>> noisy = gdpc(pop, 1.0, rng=1)
    >>> int(noisy.counts[0][0]) == int(noisy.leaves.sum())
    True
    """
    noisy = measure_tree(truth, epsilon, rng, strategy="leaves", sensitivity=sensitivity)
    return _tree("gdpc", bottom_up_sums(noisy), noisy, z="z")


def adpc(truth: TreeCounts, epsilon: float, rng: Any = None, *, runs: int = 4,
         sensitivity: float = 1.0) -> TreeCounts:
    """ADPC: the mean of ``runs`` independent GDPC runs, each with budget ``ε / runs``.

    :func:`~postproc.methods.baselines.tree.measure_tree` with ``strategy="averaged_leaves"`` (run
    ``p`` draws from ``rng.child(p)``), then
    :func:`~postproc.methods.baselines.reconcile.bottom_up_sums`: the mean of the runs' leaves
    summed up the tree, which is the mean of the runs' trees.

    Parameters
    ----------
    truth : TreeCounts
    epsilon : float
        Total budget (sequential composition of the runs).
    rng : None, int, numpy.random.Generator or Randomness
    runs : int
        ``P``.
    sensitivity : float

    Returns
    -------
    TreeCounts
        ``method="adpc"``, float64 (multiples of ``1/P``).

    Raises
    ------
    PostprocError
        ``runs`` not a positive integer, or a bad budget.

    Examples
    --------
    >>> from hierarchy.randomness import Randomness
    >>> pop = TreeCounts.from_leaves(np.full(8, 30), 2)
    >>> mean = adpc(pop, 1.0, rng=5, runs=4)
    >>> parts = [gdpc(pop, 0.25, Randomness.simulation(5).child(p)).leaves for p in range(4)]
    >>> bool(np.allclose(mean.leaves, np.mean(parts, axis=0)))
    True
    """
    noisy = measure_tree(truth, epsilon, rng, strategy="averaged_leaves", runs=runs,
                         sensitivity=sensitivity)
    return _tree("adpc", bottom_up_sums(noisy), noisy, z="z_per_run",
                 runs=noisy.provenance["runs"])


def rdpc(truth: TreeCounts, epsilon: float, rng: Any = None, *,
         sensitivity: float = 1.0) -> TreeCounts:
    """RDPC: noisy counts at every level (``ε/(J+1)`` each), raked top-down to their parents.

    :func:`~postproc.methods.baselines.tree.measure_tree` with ``strategy="every_level"`` (level
    ``j`` draws from ``rng.child(j)``), then :func:`~postproc.methods.baselines.reconcile.rake` with
    ``clip=False``: ``RDPC_root = N + G``; ``RDPC_child = NoisyC_child · RDPC_parent /
    Σ_siblings NoisyC``, or ``RDPC_parent / C`` for every sibling when ``Σ_siblings NoisyC ≤ 0``.
    Siblings sum to their parent up to float rounding: ``|Σ − parent| ≤ C · 4 · 2⁻⁵² · Σ|child|``.

    Parameters
    ----------
    truth : TreeCounts
    epsilon : float
        Total budget, split equally over the ``J + 1`` levels.
    rng : None, int, numpy.random.Generator or Randomness
        Level ``j`` draws its noise from ``rng.child(j)``.
    sensitivity : float

    Returns
    -------
    TreeCounts
        ``method="rdpc"``, float64; ``provenance["equal_splits"]`` counts the sibling groups whose
        noisy sum was not positive, per level below the root.

    Raises
    ------
    PostprocError
        A bad budget.

    Examples
    --------
    >>> pop = TreeCounts.from_leaves(np.full(16, 40), 4)
    >>> raked = rdpc(pop, 1.0, rng=2)
    >>> bool(np.allclose(raked.leaves.reshape(4, 4).sum(axis=1), raked.counts[1]))
    True
    """
    noisy = measure_tree(truth, epsilon, rng, strategy="every_level", sensitivity=sensitivity)
    raked = rake(noisy, clip=False)
    splits = raked.provenance["equal_splits"]
    return _tree("rdpc", raked, noisy, z="z_per_level",
                 equal_splits=[splits[level] for level in noisy.levels[1:]])


def _tree(method: str, result: Result, noisy: NoisyHierarchy, *, z: str, **extra: Any
          ) -> TreeCounts:
    """A tree baseline's TreeCounts: every level of ``result``; what was measured, in the
    provenance (under the keys the baselines have always used, ``z`` named as given)."""
    measured = noisy.provenance
    parameters = next(iter(measured["parameters"].values()))["detailed"]
    return TreeCounts.from_result(result, method=method, provenance={
        "method": method, "epsilon": measured["epsilon"], z: parameters["z"], **extra,
        "measurement": measured["strategy"], "reconciler": result.method,
        "randomness": measured["randomness"]})


def _with_detailed(workload: Workload) -> Workload:
    """``workload``, with a ``detailed`` query added in front if it has none."""
    if any(q.expression == "detailed" for q in workload):
        return workload
    if "detailed" in workload:
        raise PostprocError(f"the workload's query 'detailed' is "
                            f"{workload['detailed'].expression!r}, not the detailed histogram; "
                            f"rename it or add the detailed query under another name")
    return Workload((detailed(workload.schema), *workload))


def clip_negative(source: NoisyHierarchy | Result, *, query: str = "detailed") -> Result:
    """Nonnegative clipping, level by level.

    Parameters
    ----------
    source : NoisyHierarchy or Result
        For a NoisyHierarchy, the measurements of ``query`` (which must be ``detailed``-shaped:
        one answer per cell) at every level are clipped; for a Result, its histograms.
    query : str
        The measured query to clip (NoisyHierarchy only).

    Returns
    -------
    Result
        ``method="clip"`` (or the estimate's method + ``"+clip"``); every cell ≥ 0. Levels are
        clipped independently, so they no longer add up.

    Raises
    ------
    PostprocError
        ``query`` is not measured at some level, or has fewer answers than cells.

    Examples
    --------
    >>> from hierarchy.schema import E2E_1940
    >>> from hierarchy.geography import Geography
    >>> geo = Geography(("nation",), (np.array(["0"]),), (np.array([-1]),))
    >>> est = Result("x", E2E_1940, geo, e2e_workload(E2E_1940), (np.full((1, 192), -1.0),))
    >>> float(clip_negative(est).histograms[0].min()), clip_negative(est).method
    (0.0, 'x+clip')
    """
    if isinstance(source, Result):
        return Result(f"{source.method}+clip", source.schema, source.geography,
                        source.workload, tuple(np.maximum(h, 0) for h in source.histograms),
                        {**source.provenance, "clipped": True})
    if not isinstance(source, NoisyHierarchy):
        raise PostprocError(f"clip_negative needs a NoisyHierarchy or a Result, not "
                            f"{type(source).__name__}")
    hists = []
    for level in source.levels:
        if query not in source.queries(level):
            raise PostprocError(f"clipping needs {query!r} measured at every level; level "
                                f"{level!r} measured {list(source.queries(level))}")
        values = source.get(level, query).values
        if values.shape[1] != source.schema.size:
            raise PostprocError(f"query {query!r} has {values.shape[1]} answers, not one per "
                                f"cell ({source.schema.size}); clip 'detailed'")
        hists.append(np.maximum(values, 0))
    return Result("clip", source.schema, source.geography, source.workload, tuple(hists),
                    {"method": "clip", "query": query, "noisy": dict(source.provenance)})


def _default_workload(schema) -> Workload:
    from hierarchy.errors import HierarchyError
    from hierarchy.queries import detailed
    try:
        return e2e_workload(schema)
    except HierarchyError:
        return Workload((detailed(schema),))


def calibrate_to_totals(estimate: Result, level: str, totals: Any, *,
                        method: str = "additive") -> Result:
    """Adjust the bottom-level cells under each unit of ``level`` to a published total.

    Parameters
    ----------
    estimate : Result
        Any estimate; only its bottom level is used (the levels above are re-summed).
    level : str
        The level whose totals are published (e.g. ``"state"``); calibrating there also fixes
        every level above.
    totals : array_like, shape (units of ``level``,)
        The published totals (non-negative).
    method : {'additive', 'proportional'}
        Equal shift of every cell (least squares), or clip at 0 and scale.

    Returns
    -------
    Result
        ``method`` + ``"+calibrated"`` (``"+calibrated_proportional"``); float histograms,
        consistent, with the published totals at ``level``; nonnegative for ``proportional``.

    Raises
    ------
    PostprocError
        Wrong number of totals, negative totals, or an unknown method.

    Examples
    --------
    >>> from hierarchy.schema import E2E_1940
    >>> from hierarchy.geography import Geography
    >>> geo = Geography(("n", "s"), (np.array(["0"]), np.array(["a", "b"])),
    ...                 (np.array([-1]), np.array([0, 0])))
    >>> bottom = np.zeros((2, 192)); bottom[0, :2] = [3, -1]; bottom[1, 0] = 5
    >>> est = Result("bu", E2E_1940, geo, e2e_workload(E2E_1940), sums_from_bottom(geo, bottom))
    >>> cal = calibrate_to_totals(est, "n", [12], method="proportional")
    >>> cal.histograms[1][:, :2].tolist(), float(cal.histograms[0].sum())
    ([[4.5, 0.0], [7.5, 0.0]], 12.0)
    >>> shifted = calibrate_to_totals(est, "n", [7 + 384])         # +1 in each of 384 cells
    >>> shifted.histograms[1][:, :2].tolist(), shifted.method
    ([[4.0, 0.0], [6.0, 1.0]], 'bu+calibrated')
    """
    if method not in ("additive", "proportional"):
        raise PostprocError(f"calibration method must be 'additive' or 'proportional', not "
                            f"{method!r}")
    geo = estimate.geography
    li = geo.level_index(level)
    totals = np.asarray(totals, dtype=np.float64).ravel()
    if totals.size != geo.n_units(li):
        raise PostprocError(f"{totals.size} totals for the {geo.n_units(li)} units of level "
                            f"{geo.levels[li]!r}")
    if not np.all(np.isfinite(totals)) or np.any(totals < 0):
        raise PostprocError("published totals must be finite and non-negative")
    bottom = estimate.histograms[-1].astype(np.float64)
    if method == "proportional":
        bottom = np.maximum(bottom, 0)
    owner = np.arange(geo.n_units(-1))
    for lv in range(geo.depth - 1, li, -1):
        owner = geo.parents[lv][owner]
    sums = np.bincount(owner, weights=bottom.sum(axis=1), minlength=totals.size)
    cells = np.bincount(owner, minlength=totals.size) * bottom.shape[1]
    if method == "additive":
        bottom = bottom + ((totals - sums) / np.maximum(cells, 1))[owner][:, None]
        suffix = "+calibrated"
    else:
        empty = sums <= 0
        scale = np.where(empty, 0.0, totals / np.where(empty, 1.0, sums))
        bottom = bottom * scale[owner][:, None]
        bottom += np.where(empty, totals / np.maximum(cells, 1), 0.0)[owner][:, None]
        suffix = "+calibrated_proportional"
    return Result(f"{estimate.method}{suffix}", estimate.schema, geo, estimate.workload,
                    sums_from_bottom(geo, bottom),
                    {**estimate.provenance, "calibrated_to": geo.levels[li],
                     "calibration": method})
