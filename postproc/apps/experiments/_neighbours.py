"""Flaxman (2019)'s D/D′ experiment: the direct EPL of GDPC, ADPC and RDPC.

Take a small population ``D`` on Flaxman's regular tree and its neighbour ``D′``: one person moved
from the first leaf to the last (different top-level subtrees, so every level but the root
changes along both paths). Run a mechanism ``R`` times on each and compare the distributions of
one unit's released value with :func:`postproc.evaluation.epl.direct_epl` — no exchangeability
assumption, unlike the residual estimators, which pool the errors of many units of one run.

``R`` must be large (10⁴–10⁵ runs per dataset), so the three mechanisms (each a measurement of
:func:`~postproc.methods.baselines.tree.measure_tree` and its reconciler) are applied here to ``R``
runs at once: the noise of every run is drawn in one call and the same arithmetic is applied along a
leading run axis.
:func:`release_runs` is that arithmetic; ``tests/test_experiments_neighbours.py`` checks it
against :func:`~postproc.methods.baselines.gdpc`, :func:`~postproc.methods.baselines.adpc` and
:func:`~postproc.methods.baselines.rdpc` bit for bit, given the same noise.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from hierarchy.mechanisms import sample_two_sided_geometric
from hierarchy.randomness import Randomness
from postproc.errors import PostprocError
from postproc.evaluation.epl import direct_epl
from postproc.methods.baselines import TreeCounts

__all__ = ["METHODS", "ADPC_RUNS", "neighbour", "noise_shapes", "noise_parameters",
           "release_runs", "draw_noise", "neighbour_epl", "describe"]

#: The mechanisms compared (Flaxman 2019).
METHODS = ("gdpc", "adpc", "rdpc")
#: ``P`` of ADPC, as in :func:`postproc.methods.baselines.adpc`.
ADPC_RUNS = 4
#: Runs drawn at once (bounds memory: ADPC draws ``P × leaves`` values per run).
_CHUNK = 20_000


def neighbour(truth: TreeCounts) -> tuple[TreeCounts, int, int]:
    """``D′``: one person moved from the first leaf to the last.

    Parameters
    ----------
    truth : TreeCounts
        ``D``; its first leaf must hold someone.

    Returns
    -------
    TreeCounts, int, int
        ``D′``, the source leaf and the destination leaf.

    Raises
    ------
    PostprocError
        A tree with one leaf, or an empty first leaf.

    Examples
    --------
    >>> d = TreeCounts.from_leaves([3, 1, 2, 5], children=2)
    >>> moved, source, destination = neighbour(d)
    >>> moved.leaves.tolist(), [c.tolist() for c in moved.counts[:2]], source, destination
    ([2, 1, 2, 6], [[11], [3, 8]], 0, 3)
    """
    leaves = np.asarray(truth.leaves, dtype=np.int64).copy()
    if leaves.size < 2 or leaves[0] < 1:
        raise PostprocError("D/D′ needs at least two leaves and a person in the first one")
    leaves[0] -= 1
    leaves[-1] += 1
    return (TreeCounts.from_leaves(leaves, truth.children, depth=truth.depth),
            0, leaves.size - 1)


def noise_shapes(method: str, truth: TreeCounts) -> list[tuple[int, ...]]:
    """Shapes (without the run axis) of the noise arrays ``method`` draws, in drawing order."""
    if method == "gdpc":
        return [(truth.leaves.size,)]
    if method == "adpc":
        return [(truth.leaves.size,)] * ADPC_RUNS
    if method == "rdpc":
        return [(c.size,) for c in truth.counts]
    raise PostprocError(f"unknown method {method!r}; use one of {', '.join(METHODS)}")


def noise_parameters(method: str, epsilon: float, depth: int) -> float:
    """The ``z`` of every noise array of ``method`` (Δ = 1)."""
    return {"gdpc": epsilon, "adpc": epsilon / ADPC_RUNS, "rdpc": epsilon / (depth + 1)}[method]


def release_runs(method: str, truth: TreeCounts, noise: Sequence[np.ndarray]) -> np.ndarray:
    """The leaves ``method`` releases in each run, given the noise of every run.

    Parameters
    ----------
    method : {'gdpc', 'adpc', 'rdpc'}
    truth : TreeCounts
    noise : sequence of numpy.ndarray
        One array per entry of :func:`noise_shapes`, each with a leading run axis: GDPC the leaf
        noise, ADPC the leaf noise of each of its ``P`` runs, RDPC the noise of each level, root
        first.

    Returns
    -------
    numpy.ndarray, shape (runs, leaves)
        The same numbers (int64 for GDPC, float64 otherwise) as
        :func:`~postproc.methods.baselines.gdpc`,
        :func:`~postproc.methods.baselines.adpc` or :func:`~postproc.methods.baselines.rdpc` would
        release from that noise.

    Examples
    --------
    >>> d = TreeCounts.from_leaves([10, 20, 30, 40], children=2)
    >>> release_runs("gdpc", d, [np.array([[1, 0, -1, 2]])]).tolist()
    [[11, 20, 29, 42]]
    >>> rdpc = release_runs("rdpc", d, [np.array([[0]]), np.array([[0, 0]]),
    ...                                 np.array([[0, 0, 0, 0]])])
    >>> rdpc.tolist()
    [[10.0, 20.0, 30.0, 40.0]]
    """
    if method == "gdpc":
        return truth.leaves.astype(np.int64)[None, :] + noise[0]
    if method == "adpc":
        total = np.zeros(noise[0].shape, dtype=np.float64)
        for part in noise:
            total += truth.leaves.astype(np.int64)[None, :] + part
        return total / len(noise)
    if method == "rdpc":
        c = truth.children
        raked = truth.counts[0].astype(np.float64)[None, :] + noise[0]
        for j in range(1, truth.depth + 1):
            noisy = truth.counts[j].astype(np.float64)[None, :] + noise[j]
            groups = noisy.reshape(noisy.shape[0], -1, c)
            sums = groups.sum(axis=2)
            bad = sums <= 0
            with np.errstate(divide="ignore", invalid="ignore"):
                child = groups * (raked / np.where(bad, 1.0, sums))[:, :, None]
            child[bad] = np.broadcast_to((raked / c)[:, :, None], child.shape)[bad]
            raked = child.reshape(noisy.shape[0], -1)
        return raked
    raise PostprocError(f"unknown method {method!r}; use one of {', '.join(METHODS)}")


def draw_noise(method: str, truth: TreeCounts, epsilon: float, runs: int,
               rnd: Randomness) -> list[np.ndarray]:
    """The noise of ``runs`` runs of ``method`` (array ``k`` from ``rnd.child(k)``)."""
    z = noise_parameters(method, epsilon, truth.depth)
    return [sample_two_sided_geometric(z, (runs, *shape), rnd.child(k))
            for k, shape in enumerate(noise_shapes(method, truth))]


def _outputs(method: str, truth: TreeCounts, epsilon: float, runs: int, units: Sequence[int],
             rnd: Randomness) -> np.ndarray:
    """Released values of ``units`` over ``runs`` runs, shape (runs, len(units))."""
    parts = []
    for b, start in enumerate(range(0, runs, _CHUNK)):
        size = min(_CHUNK, runs - start)
        leaves = release_runs(method, truth, draw_noise(method, truth, epsilon, size,
                                                        rnd.child(b)))
        parts.append(leaves[:, list(units)].astype(np.float64))
    return np.concatenate(parts)


def neighbour_epl(truth: TreeCounts, *, epsilons: Sequence[float], runs: int, rnd: Randomness,
                  n_boot: int = 200) -> tuple[pd.DataFrame, dict]:
    """Direct EPL of each method and ε at the two leaves that differ between ``D`` and ``D′``.

    Parameters
    ----------
    truth : TreeCounts
        ``D``.
    epsilons : sequence of float
    runs : int
        Runs of each mechanism on each dataset.
    rnd : Randomness
        Stream ``(method, ε index, 0)`` drives the runs on ``D``, ``(…, 1)`` those on ``D′``,
        ``(…, 2)`` the interval's draws.
    n_boot : int
        Draws that calibrate the interval of :func:`~postproc.evaluation.epl.direct_epl`.

    Returns
    -------
    pandas.DataFrame, dict
        One row per method, ε and unit (``source`` and ``destination`` leaf): exact counts on
        ``D`` and ``D′``, runs, EPL with its interval, ``max_se``, the event attaining it and the
        reason when undefined; and ``{(method, ε): (EPLResult of the source leaf, outputs on D,
        outputs on D′)}`` for the figures.

    Examples
    --------
    >>> from postproc.methods.baselines import flaxman_population
    >>> d = flaxman_population(800, levels=2, mean_leaf=50, rng=0)
    >>> table, _ = neighbour_epl(d, epsilons=[1.0], runs=20_000, rnd=Randomness.simulation(1),
    ...                          n_boot=0)
    >>> gdpc = table[(table["method"] == "gdpc") & (table["unit"] == "source leaf")].iloc[0]
    >>> bool(abs(gdpc["epl"] - 1.0) < 4.5 * gdpc["max_se"])
    True
    """
    moved, source, destination = neighbour(truth)
    rows, curves = [], {}
    for mi, method in enumerate(METHODS):
        for ei, epsilon in enumerate(epsilons):
            on_d = _outputs(method, truth, float(epsilon), runs, [source, destination],
                            rnd.child(mi, ei, 0))
            on_moved = _outputs(method, moved, float(epsilon), runs, [source, destination],
                                rnd.child(mi, ei, 1))
            for k, (unit, leaf) in enumerate((("source leaf", source),
                                              ("destination leaf", destination))):
                result = direct_epl(on_d[:, k], on_moved[:, k], n_boot=n_boot,
                                    rng=rnd.child(mi, ei, 2, k))
                rows.append({"method": method, "epsilon": float(epsilon), "unit": unit,
                             "leaf": leaf, "exact_d": int(truth.leaves[leaf]),
                             "exact_d_prime": int(moved.leaves[leaf]), "runs": runs,
                             "epl": result.epl, "epl_ci_low": result.ci_low,
                             "epl_ci_high": result.ci_high, "epl_kind": result.kind,
                             "max_se": result.parameters.get("max_se"),
                             "argmax": result.parameters.get("argmax"),
                             "epl_reason": result.reason})
                if k == 0:
                    curves[(method, float(epsilon))] = (result, on_d[:, 0], on_moved[:, 0])
    return pd.DataFrame(rows), curves


def describe(truth: TreeCounts) -> dict[str, Any]:
    """The D/D′ population in a few numbers (for the summary)."""
    return {"children": truth.children, "depth": truth.depth,
            "leaves": int(truth.leaves.size), "persons": int(truth.counts[0][0])}
