"""Simple reconcilers of a NoisyHierarchy: the baselines TopDown is compared against.

Each is a post-processor of the registry (:mod:`postproc.methods`): it takes a
:class:`~hierarchy.noisy.NoisyHierarchy`, ignores ``rng`` (none draws randomness), refuses a spec
with invariants or constraints, and returns a :class:`~postproc.result.Result` of real-valued
histograms (``bottom_up_sums`` keeps the measurements' dtype).

``level_least_squares`` (registered as ``least_squares``; "unconstrained")
    Each unit's weighted least-squares histogram from every query measured at its level, weights
    the inverse variances: ``x = (Σ_q Q_qᵀ W_q Q_q)⁻¹ Σ_q Q_qᵀ W_q y_q``. Levels are fitted
    independently, so they do not add up, and cells may be negative. Units that share their
    weights share one matrix, inverted once (once per level for the E2E measurements).
``clip_scale``
    Every level's noisy ``detailed`` counts clipped at 0, then each unit scaled to its total:
    the published invariant ``tot`` where there is one, else the unit's most precise noisy total
    (:meth:`~hierarchy.noisy.NoisyHierarchy.derived_answers`, clipped at 0). A unit whose clipped
    cells are all 0 gets its total spread evenly. Nonnegative, not consistent. Clipping lifts the
    many empty cells above 0 and the scaling takes that back from the populated ones, so small cells
    are biased up and large ones down (the bias of the "proportional" calibration in
    :func:`postproc.methods.baselines.histograms.calibrate_to_totals`).
``rake``
    Raking down the tree (Flaxman's RDPC for histograms): the root is ``clip_scale``'s; on each
    next level the children's noisy ``detailed`` counts are clipped at 0 and, per parent and cell,
    scaled so they sum to the parent's cell — split equally among the children where their
    clipped sum is 0. Nonnegative and consistent (to float rounding); only the root's total comes
    from an invariant, those published lower down are not imposed. ``clip=False`` is Flaxman's
    own rule (registered as ``rake_unclipped``; :func:`postproc.methods.baselines.rdpc` reconciles
    with it): the root as measured (raked to ``tot`` if published), the children's noisy counts
    unclipped, an equal split where their sum is ≤ 0 — consistent, may be negative.
``bottom_up_sums`` (registered as ``bottom_up``)
    The bottom level's noisy ``detailed`` counts, every level above their sums
    (:func:`sums_from_bottom`). Bottom-up is a *measurement strategy* — spend the whole budget on
    the bottom level's detailed cells (:func:`postproc.methods.baselines.histograms.measure_bottom`,
    Clark & Dajani 2019; :func:`postproc.methods.baselines.tree.measure_tree` with
    ``strategy="leaves"`` on a tree) — and this is the reconciler to run on such measurements; it
    works on any NoisyHierarchy with a bottom-level ``detailed`` measurement, ignoring the other
    levels. Exactly consistent; integer when the measurements are; may be negative.

Examples
--------
>>> from hierarchy.synth import synthesize_1940
>>> from hierarchy.tabulation import tabulate
>>> from hierarchy.measurement import measure
>>> from hierarchy.budget import Budget
>>> from hierarchy.queries import e2e_workload
>>> from hierarchy.schema import E2E_1940
>>> truth = tabulate(synthesize_1940(2_000, seed=1).persons, schema=E2E_1940,
...                  levels=["nation", "state"])
>>> noisy = measure(truth, e2e_workload(E2E_1940), Budget.e2e(1, ["nation", "state"]), rng=2,
...                 publish={"tot": ["nation"]})
>>> [f(noisy).method for f in (level_least_squares, clip_scale, rake, bottom_up_sums)]
['least_squares', 'clip_scale', 'rake', 'bottom_up']
>>> float(rake(noisy).histograms[0].sum())          # the published total
2000.0
"""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.sparse as sp

from hierarchy.noisy import Measurement, NoisyHierarchy
from postproc.errors import PostprocError, refuse_spec
from postproc.methods.baselines.least_squares import _apply
from postproc.methods.gls.information import level_information
from postproc.result import Result

__all__ = ["level_least_squares", "clip_scale", "rake", "bottom_up_sums", "sums_from_bottom"]


def level_least_squares(noisy: NoisyHierarchy, spec: Any = None, *, rng: Any = None) -> Result:
    """Each unit's weighted least-squares histogram from the queries measured at its level.

    For every unit ``u``, ``x_u = (Σ_q Q_qᵀ W_{u,q} Q_q)⁻¹ Σ_q Q_qᵀ W_{u,q} y_{u,q}`` over the
    queries ``q`` measured at its level, ``W`` the inverse variances. No consistency between
    levels, no nonnegativity ("unconstrained" least squares).

    Parameters
    ----------
    noisy : NoisyHierarchy
        Every level's measurements must determine its histograms (e.g. ``detailed`` measured).
    spec : Spec, optional
        Refused if it has invariants or constraints.
    rng : ignored
        Nothing is random.

    Returns
    -------
    Result
        ``method="least_squares"``; float64 histograms. ``provenance["queries"]`` lists the
        queries fitted per level, ``provenance["weight_groups"]`` the number of distinct
        weightings (matrices inverted) per level.

    Raises
    ------
    PostprocError
        A spec with invariants or constraints, or a level whose measurements do not determine
        every cell (named, with its measured queries).

    Examples
    --------
    >>> from hierarchy.synth import synthesize_1940
    >>> from hierarchy.tabulation import tabulate
    >>> from hierarchy.measurement import measure
    >>> from hierarchy.budget import Budget
    >>> from hierarchy.queries import e2e_workload
    >>> from hierarchy.schema import E2E_1940
    >>> truth = tabulate(synthesize_1940(2_000, seed=1).persons, schema=E2E_1940,
    ...                  levels=["nation", "state"])
    >>> noisy = measure(truth, e2e_workload(E2E_1940), Budget.e2e(1, ["nation", "state"]), rng=2)
    >>> est = level_least_squares(noisy)
    >>> est.provenance["weight_groups"]
    {'nation': 1, 'state': 1}
    >>> bool(np.allclose(est.histograms[1].sum(axis=0), est.histograms[0][0]))   # not consistent
    False
    """
    refuse_spec("least_squares", spec)
    geo, cells = noisy.geography, noisy.schema.size
    hists, groups = [], {}
    for li, level in enumerate(noisy.levels):
        names = noisy.queries(level)
        terms = []
        for name in names:
            m = noisy.get(level, name)
            terms.append((noisy.workload[name].matrix, m.values, m.weights))
        ids, matrices, b = level_information(terms, geo.n_units(li), cells, li)
        inverses = []
        for g, matrix in enumerate(matrices):
            inverse, rank = _symmetric_inverse(matrix)
            if inverse is None:
                units = geo.geocodes[li][ids == g][:3].tolist()
                raise PostprocError(
                    f"least_squares: level {level!r} measured {list(names)}, which do not "
                    f"determine every cell of a unit's histogram (rank {rank} of {cells} for "
                    f"units {units}); measure 'detailed' there (or queries that together "
                    f"determine it), or use hay, which needs that only at the bottom level")
            inverses.append(inverse)
        hists.append(_apply(ids, inverses, b))
        groups[level] = len(matrices)
    return Result("least_squares", noisy.schema, geo, noisy.workload, tuple(hists), {
        "method": "least_squares", "noisy": dict(noisy.provenance),
        "queries": {lv: list(noisy.queries(lv)) for lv in noisy.levels},
        "weight_groups": groups})


def clip_scale(noisy: NoisyHierarchy, spec: Any = None, *, rng: Any = None) -> Result:
    """Each level's noisy detailed counts clipped at 0 and scaled to each unit's total.

    The total of a unit is the published invariant ``tot`` of its level when there is one, else
    its most precise noisy total (:meth:`~hierarchy.noisy.NoisyHierarchy.derived_answers` of
    ``"total"``: a measured total, or the sum of the measured query with the smallest variance),
    clipped at 0. A unit whose clipped cells are all 0 gets its total spread evenly over the cells.

    Parameters
    ----------
    noisy : NoisyHierarchy
        Needs ``detailed`` measured at every level.
    spec : Spec, optional
        Refused if it has invariants or constraints.
    rng : ignored
        Nothing is random.

    Returns
    -------
    Result
        ``method="clip_scale"``; float64, nonnegative, not consistent.
        ``provenance["totals"]`` says per level where the totals came from,
        ``provenance["spread_evenly"]`` how many units had no positive cell.

    Raises
    ------
    PostprocError
        A spec with invariants or constraints, or a level without a ``detailed`` measurement
        (named).

    Examples
    --------
    >>> from hierarchy.synth import synthesize_1940
    >>> from hierarchy.tabulation import tabulate
    >>> from hierarchy.measurement import measure
    >>> from hierarchy.budget import Budget
    >>> from hierarchy.queries import e2e_workload
    >>> from hierarchy.schema import E2E_1940
    >>> truth = tabulate(synthesize_1940(2_000, seed=1).persons, schema=E2E_1940,
    ...                  levels=["nation", "state"])
    >>> noisy = measure(truth, e2e_workload(E2E_1940), Budget.e2e(1, ["nation", "state"]), rng=2,
    ...                 publish={"tot": ["nation"]})
    >>> est = clip_scale(noisy)
    >>> est.provenance["totals"]
    {'nation': 'invariant tot', 'state': 'sum of va_hisp_race'}
    >>> float(est.histograms[0].sum()), bool((est.histograms[1] >= 0).all())
    (2000.0, True)
    """
    refuse_spec("clip_scale", spec)
    hists, sources, spread = [], {}, {}
    for level in noisy.levels:
        hist, sources[level], spread[level] = _clip_scale_level(noisy, level, "clip_scale")
        hists.append(hist)
    return Result("clip_scale", noisy.schema, noisy.geography, noisy.workload, tuple(hists), {
        "method": "clip_scale", "noisy": dict(noisy.provenance), "totals": sources,
        "spread_evenly": spread})


def rake(noisy: NoisyHierarchy, spec: Any = None, *, rng: Any = None, clip: bool = True
         ) -> Result:
    """Top-down raking: each parent's cells split among its children in proportion to their
    noisy counts (clipped at 0 unless ``clip=False``).

    With ``clip`` (the registry's ``rake``): the root is :func:`clip_scale`'s (scaled to the
    published ``tot`` when there is one); on each next level, with ``c`` the children's noisy
    ``detailed`` counts clipped at 0, child ``k`` of parent ``p`` gets
    ``x_k = c_k · x_p / Σ_siblings c`` in every cell, or ``x_p / n_children`` where the siblings'
    clipped sum is 0.

    With ``clip=False`` (registered as ``rake_unclipped``): Flaxman's (2019) RDPC rule. The root
    is as measured — or, where ``tot`` is published there, its cells raked to it by the same
    rule — and ``c`` are the children's noisy counts as measured: ``x_k = c_k · x_p / Σ c``, or
    ``x_p / n_children`` where ``Σ c ≤ 0`` (the ratio would flip or blow up every sibling).
    Negative children under a positive sum are kept, so the result may be negative.

    Parameters
    ----------
    noisy : NoisyHierarchy
        Needs ``detailed`` measured at every level.
    spec : Spec, optional
        Refused if it has invariants or constraints.
    rng : ignored
        Nothing is random.
    clip : bool
        Clip the noisy counts at 0 before raking (default), or rake them as measured.

    Returns
    -------
    Result
        ``method="rake"`` (``"rake_unclipped"``); float64, consistent (siblings sum to their
        parent up to float rounding, about 1e-15 relative to the children's magnitudes);
        nonnegative with ``clip``. ``provenance["root_total"]`` says where the root's total came
        from; ``provenance["equal_splits"]`` counts, per level below the root, the (parent, cell)
        pairs split equally.

    Raises
    ------
    PostprocError
        A spec with invariants or constraints, or a level without a ``detailed`` measurement
        (named).

    Examples
    --------
    >>> from hierarchy.synth import synthesize_1940
    >>> from hierarchy.tabulation import tabulate
    >>> from hierarchy.measurement import measure
    >>> from hierarchy.budget import Budget
    >>> from hierarchy.queries import e2e_workload
    >>> from hierarchy.schema import E2E_1940
    >>> levels = ["nation", "state", "county"]
    >>> truth = tabulate(synthesize_1940(5_000, seed=1).persons, schema=E2E_1940, levels=levels)
    >>> noisy = measure(truth, e2e_workload(E2E_1940), Budget.e2e(1, levels), rng=4)
    >>> est = rake(noisy)
    >>> bool(np.allclose(est.histograms[2].sum(axis=0), est.histograms[0][0]))
    True
    >>> est.provenance["root_total"]
    'sum of va_hisp_race'

    Flaxman's rule keeps a negative child whose siblings' sum is positive; clipping does not:

    >>> from hierarchy.noisy import Measurement, NoisyHierarchy
    >>> from hierarchy.queries import Workload, detailed
    >>> from postproc.methods.baselines.tree import TREE_SCHEMA, TreeCounts
    >>> tree = NoisyHierarchy(TREE_SCHEMA, TreeCounts.from_leaves([0, 0], 2).geography,
    ...                       Workload((detailed(TREE_SCHEMA),)), {
    ...     "level0": {"detailed": Measurement("detailed", [[10]], 1.0)},
    ...     "level1": {"detailed": Measurement("detailed", [[-2], [6]], 1.0)}})
    >>> [h.ravel().tolist() for h in rake(tree, clip=False).histograms]
    [[10.0], [-5.0, 15.0]]
    >>> [h.ravel().tolist() for h in rake(tree).histograms]
    [[10.0], [0.0, 10.0]]
    """
    method = "rake" if clip else "rake_unclipped"
    refuse_spec(method, spec)
    geo = noisy.geography
    if clip or "tot" in noisy.invariants.get(noisy.levels[0], {}):
        root, source, _ = _clip_scale_level(noisy, noisy.levels[0], method, clip=clip)
    else:
        root = _detailed(noisy, noisy.levels[0], method).values.astype(np.float64)
        source = "as measured"
    hists, splits = [root], {}
    for li in range(1, geo.depth):
        level = noisy.levels[li]
        children = _detailed(noisy, level, method).values.astype(np.float64)
        if clip:
            children = np.maximum(children, 0)
        parent = geo.parents[li]
        n_parents = geo.n_units(li - 1)
        aggregate = sp.csr_matrix((np.ones(parent.size), (parent, np.arange(parent.size))),
                                  shape=(n_parents, parent.size))
        sums = np.asarray(aggregate @ children)
        empty = sums <= 0
        above = hists[-1]
        ratio = np.where(empty, 0.0, above / np.where(empty, 1.0, sums))
        n_children = np.bincount(parent, minlength=n_parents)
        equal = np.where(empty, above / np.maximum(n_children, 1)[:, None], 0.0)
        hists.append(children * ratio[parent] + equal[parent])
        splits[level] = int(empty[n_children > 0].sum())
    return Result(method, noisy.schema, geo, noisy.workload, tuple(hists), {
        "method": method, "noisy": dict(noisy.provenance), "root_total": source,
        "equal_splits": splits})


def bottom_up_sums(noisy: NoisyHierarchy, spec: Any = None, *, rng: Any = None) -> Result:
    """The bottom level's noisy detailed counts, and their sums on every level above.

    Bottom-up is a *measurement strategy*: spend the whole budget on the bottom level's detailed
    cells (:func:`postproc.methods.baselines.histograms.bottom_up` measures that way). This is the
    reconciler for such measurements; on any NoisyHierarchy it uses the bottom level's
    ``detailed`` measurement alone and ignores the other levels' measurements.

    Parameters
    ----------
    noisy : NoisyHierarchy
        Needs ``detailed`` measured at the bottom level.
    spec : Spec, optional
        Refused if it has invariants or constraints.
    rng : ignored
        Nothing is random.

    Returns
    -------
    Result
        ``method="bottom_up"``; exactly consistent, of the measurements' dtype (int64 for the
        discrete mechanisms), possibly negative. Published invariants are not imposed.

    Raises
    ------
    PostprocError
        A spec with invariants or constraints, or no ``detailed`` measurement at the bottom level
        (named).

    Examples
    --------
    >>> from hierarchy.synth import synthesize_1940
    >>> from hierarchy.tabulation import tabulate
    >>> from hierarchy.measurement import measure
    >>> from hierarchy.budget import Budget
    >>> from hierarchy.queries import e2e_workload
    >>> from hierarchy.schema import E2E_1940
    >>> truth = tabulate(synthesize_1940(2_000, seed=1).persons, schema=E2E_1940,
    ...                  levels=["nation", "state"])
    >>> budget = Budget("pure", 1, {"nation": "1/1000", "state": "999/1000"}, {"detailed": 1})
    >>> noisy = measure(truth, e2e_workload(E2E_1940), budget, rng=2)
    >>> est = bottom_up_sums(noisy)
    >>> est.integer, bool((est.histograms[0] == est.histograms[1].sum(axis=0)).all())
    (True, True)
    """
    refuse_spec("bottom_up", spec)
    bottom = noisy.levels[-1]
    m = _detailed(noisy, bottom, "bottom_up")
    return Result("bottom_up", noisy.schema, noisy.geography, noisy.workload,
                  sums_from_bottom(noisy.geography, np.asarray(m.values)), {
                      "method": "bottom_up", "noisy": dict(noisy.provenance),
                      "measurement": {"level": bottom, "query": m.query}})


# --------------------------------------------------------------------------------------------------
def _detailed(noisy: NoisyHierarchy, level: str, method: str) -> Measurement:
    """The measurement of the ``detailed`` query at ``level``; an error naming the level if none."""
    for name in noisy.queries(level):
        if noisy.workload[name].expression == "detailed":
            return noisy.get(level, name)
    raise PostprocError(f"{method}: level {level!r} has no detailed measurement (it measured "
                        f"{list(noisy.queries(level))}); measure 'detailed' there, or use a "
                        f"post-processor that fits the other queries (hay, topdown)")


def _clip_scale_level(noisy: NoisyHierarchy, level: str, method: str, *, clip: bool = True
                      ) -> tuple[np.ndarray, str, int]:
    """One level of :func:`clip_scale`: histograms, where the totals came from, units spread.

    Without ``clip`` the cells are scaled as measured (a unit whose cells sum to ≤ 0 gets its
    total spread evenly)."""
    cells = _detailed(noisy, level, method).values.astype(np.float64)
    if clip:
        cells = np.maximum(cells, 0)
    published = noisy.invariants.get(level, {})
    if "tot" in published:
        totals = np.asarray(published["tot"], dtype=np.float64).ravel()
        source = "invariant tot"
    else:
        answers, source = noisy.derived_answers(level, "total")
        totals = np.maximum(np.asarray(answers, dtype=np.float64)[:, 0], 0)
    sums = cells.sum(axis=1)
    empty = sums <= 0
    out = cells * np.where(empty, 0.0, totals / np.where(empty, 1.0, sums))[:, None]
    out += np.where(empty, totals / cells.shape[1], 0.0)[:, None]
    return out, source, int(empty.sum())


def sums_from_bottom(geography, bottom: np.ndarray) -> tuple[np.ndarray, ...]:
    """Every level's histograms as sums of the bottom level's, root first.

    Parameters
    ----------
    geography : Geography
    bottom : array, shape (bottom-level units, cells)

    Returns
    -------
    tuple of arrays
        Of ``bottom``'s dtype; the bottom level is ``bottom`` itself.

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


def _symmetric_inverse(matrix: np.ndarray) -> tuple[np.ndarray | None, int]:
    """Inverse and rank of a symmetric positive semi-definite information matrix; ``None``
    instead of the inverse when it is singular (numpy's ``matrix_rank`` tolerance)."""
    eigenvalues, vectors = np.linalg.eigh(matrix)
    largest = float(np.max(np.abs(eigenvalues), initial=0.0))
    tolerance = largest * matrix.shape[0] * np.finfo(np.float64).eps
    rank = int((eigenvalues > tolerance).sum())
    if largest == 0 or rank < matrix.shape[0]:
        return None, rank
    inverse = (vectors / eigenvalues) @ vectors.T
    return (inverse + inverse.T) / 2, rank
