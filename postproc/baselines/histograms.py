"""Baselines on the hierarchy data model: nonnegative clipping, bottom-up, calibration to totals.

``clip_negative``
    Negative cells set to 0 — of the noisy ``detailed`` measurements of every level (each level
    on its own, so levels stop adding up), or of any :class:`~postproc.result.Result`.
``bottom_up``
    Geometric noise on every detailed cell of every bottom-level unit, spending the *whole*
    budget there (``z = ε/Δ``, ``Δ = 2`` for the E2E "change one record" neighbours); every higher
    level's histograms, margins and totals are sums of those noisy cells (Clark & Dajani 2019).
    It is its own measurement, not a post-processing of a NoisyHierarchy, so compare it with
    TopDown at the same total ε.
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
from hierarchy.mechanisms import sample_two_sided_geometric
from hierarchy.noisy import NoisyHierarchy
from hierarchy.queries import Workload, e2e_workload
from hierarchy.randomness import as_randomness
from postproc.result import Result
from postproc.baselines.tree import _budget
from postproc.errors import PostprocError

__all__ = ["clip_negative", "bottom_up", "calibrate_to_totals", "sums_from_bottom"]


def sums_from_bottom(geography, bottom: np.ndarray) -> tuple[np.ndarray, ...]:
    """Every level's histograms as sums of the bottom level's, root first.

    Parameters
    ----------
    geography : Geography
    bottom : array, shape (bottom-level units, cells)

    Returns
    -------
    tuple of arrays

    Examples
    --------
    >>> from hierarchy.geography import Geography
    >>> geo = Geography(("n", "s"), (np.array(["0"]), np.array(["a", "b"])),
    ...                 (np.array([-1]), np.array([0, 0])))
    >>> [h.tolist() for h in sums_from_bottom(geo, np.array([[1, 2], [3, 4]]))]
    [[[4, 6]], [[1, 2], [3, 4]]]
    """
    out = [np.asarray(bottom)]
    for li in range(geography.depth - 1, 0, -1):
        out.append(np.add.reduceat(out[-1], geography.child_offsets(li - 1)[:-1], axis=0))
    return tuple(reversed(out))


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


def bottom_up(truth: Hierarchy, epsilon: float, rng: Any = None, *, sensitivity: float = 2.0,
              workload: Workload | None = None) -> Result:
    """Bottom-up: geometric noise on every detailed cell of the bottom level; the rest are sums.

    Parameters
    ----------
    truth : Hierarchy
        Exact histograms.
    epsilon : float
        The whole budget, spent on the bottom level's detailed cells (the units of one level
        compose in parallel).
    rng : None, int, numpy.random.Generator or Randomness
        Noise source (``None``: release mode).
    sensitivity : float
        ``Δ`` of the detailed histogram of one level: 2 when one person's record may change
        (the E2E neighbours), 1 for adding or removing a person.
    workload : Workload, optional
        Named queries for :meth:`Result.answers` (default: the E2E workload if the schema has
        its attributes, else ``detailed`` alone).

    Returns
    -------
    Result
        ``method="bottom_up"``, int64 histograms (possibly negative), consistent by construction.

    Raises
    ------
    PostprocError
        A non-positive budget or sensitivity.

    Examples
    --------
    >>> from hierarchy.synth import synthesize_1940
    >>> from hierarchy.tabulate import tabulate
    >>> from hierarchy.schema import E2E_1940
    >>> truth = tabulate(synthesize_1940(2_000, seed=1).persons, schema=E2E_1940,
    ...                  levels=["nation", "state"])
    >>> est = bottom_up(truth, 1.0, rng=3)
    >>> bool((est.histograms[0] == est.histograms[1].sum(axis=0)).all())
    True
    """
    epsilon = _budget(epsilon)
    z = epsilon / _budget(sensitivity, "sensitivity")
    rnd = as_randomness(rng)
    leaves = truth.counts[-1]
    noisy = leaves.astype(np.int64) + sample_two_sided_geometric(z, leaves.shape, rnd)
    return Result("bottom_up", truth.schema, truth.geography,
                    workload or _default_workload(truth.schema),
                    sums_from_bottom(truth.geography, noisy),
                    {"method": "bottom_up", "epsilon": epsilon, "z": z,
                     "sensitivity": float(sensitivity), "randomness": rnd.provenance()})


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
