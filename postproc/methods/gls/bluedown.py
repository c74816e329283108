"""``bluedown``: TopDown's node problems fed with each child's subtree GLS estimate and its
covariance instead of the child's raw measurements (``docs/gls.md``, "BlueDown").

In TopDown, a child's part of its parent's objective is its own measurements, each answer
weighted by its inverse variance. BlueDown (Ghazi, Kamath, Kumar, Manurangsi and Sealfon 2026)
replaces them by one correlated pseudo-measurement per child: its subtree estimate ``L_c`` — the
BLUE of its histogram from its own and all its descendants' measurements — weighted by the
inverse of its covariance ``C_c``:

    Σ_c (x_c − L_c)ᵀ C_c⁻¹ (x_c − L_c)    subject to   Σ_c x_c = x̂_p, the constraints, x ≥ 0.

Without the inequalities and the rounding, its minimiser is the BLUE itself
(``B_c = L_c + C_c Σ⁺ (x̂_p − Σ L)``, the downward pass of :mod:`postproc.methods.gls.tree`), so
BlueDown is the BLUE made nonnegative, integral and constraint-keeping by TopDown's own fit,
rounding, failsafe and verification (:func:`~postproc.methods.topdown.run.solve_plan`).
Directions a child's equalities fix have no variance; they get a weight as large as the child's
largest and change nothing (the node's constraints hold them).
"""

from __future__ import annotations

import dataclasses
from functools import lru_cache
from typing import Any, Callable, Mapping

import numpy as np
import scipy.sparse as sp

from hierarchy.noisy import NoisyHierarchy
from invariants.spec import Spec
from postproc.errors import PostprocError
from postproc.methods.gls.method import solve_gls
from postproc.methods.topdown.options import TopDownOptions
from postproc.methods.topdown.plan import plan_run
from postproc.methods.topdown.run import solve_plan
from postproc.result import Result

__all__ = ["bluedown", "SubtreeMeasurement", "precision"]

#: Cells per histogram above which the dense weight matrix per child (cells × cells) is refused.
DENSE_WEIGHT_CELLS = 512


def precision(covariance: np.ndarray) -> np.ndarray:
    """The weight of an estimate with this covariance: its pseudo-inverse, plus the largest
    eigenvalue of that in the directions the covariance is 0 (positive definite).

    Examples
    --------
    >>> precision(np.array([[2.0, 0.0], [0.0, 0.0]])).tolist()
    [[0.5, 0.0], [0.0, 0.5]]
    """
    values, vectors = np.linalg.eigh((covariance + covariance.T) / 2)
    top = float(values.max(initial=0.0))
    keep = values > 1e-10 * top if top > 0 else np.zeros(values.size, bool)
    inverse = np.where(keep, 1.0 / np.where(keep, values, 1.0), 0.0)
    fill = float(inverse.max(initial=0.0)) or 1.0
    weights = np.where(keep, inverse, fill)
    out = (vectors * weights) @ vectors.T
    return (out + out.T) / 2


@dataclasses.dataclass(frozen=True, eq=False)
class SubtreeMeasurement:
    """A level's subtree estimates as the node engine reads a measurement: ``values`` (units ×
    cells) and, for the children of one parent at a time, a weight matrix per child
    (:func:`precision` of its subtree covariance; units sharing a signature share it).

    Examples
    --------
    >>> m = SubtreeMeasurement(np.zeros((3, 2)), np.array([0, 1, 0]),
    ...                        lambda i: np.eye(2) * (i + 1))
    >>> m.weights_of(slice(0, 2)).tolist()
    [[[1.0, 0.0], [0.0, 1.0]], [[0.5, 0.0], [0.0, 0.5]]]
    """

    values: np.ndarray
    ids: np.ndarray
    covariance_of: Callable[[int], np.ndarray]

    def __post_init__(self):
        object.__setattr__(self, "_weight", lru_cache(maxsize=256)(
            lambda i: precision(self.covariance_of(i))))

    def weights_of(self, units: slice) -> np.ndarray:
        """The weight matrices of ``units`` (children × cells × cells)."""
        ids = self.ids[units]
        distinct, inverse = np.unique(ids, return_inverse=True)
        return np.stack([self._weight(int(i)) for i in distinct])[inverse.ravel()]


def bluedown(noisy: NoisyHierarchy, spec: Spec | None = None, *,
             options: TopDownOptions | Mapping[str, Any] | None = None,
             **option_values: Any) -> Result:
    """BlueDown: TopDown's fit, rounding and verification on the subtree GLS estimates.

    Parameters
    ----------
    noisy : NoisyHierarchy
    spec : Spec, optional
        As for TopDown; its equalities are imposed in the GLS too.
    options : TopDownOptions or mapping, optional
        TopDown's options (solver, executor, failsafe, rounding passes, …); fitting passes are
        not taken (each child has one pseudo-measurement).
    **option_values
        Any of those options.

    Returns
    -------
    Result
        ``method="bluedown"``: integer, nonnegative, consistent, every constraint kept.

    Raises
    ------
    PostprocError
        More than 512 cells per histogram (a dense weight matrix per child; the succinct fit is
        not built yet: use ``gls``), fitting passes, or what ``gls`` or TopDown refuse.

    Examples
    --------
    >>> from hierarchy import E2E_1940, Budget, e2e_workload, measure, synthesize_1940, tabulate
    >>> levels = ["nation", "state", "county"]
    >>> data = synthesize_1940(3_000, seed=1)
    >>> truth = tabulate(data.persons, schema=E2E_1940, levels=levels, units=data.units)
    >>> spec = Spec.e2e(levels)
    >>> noisy = measure(truth, e2e_workload(E2E_1940), Budget.e2e(1, levels), rng=4, spec=spec)
    >>> result = bluedown(noisy, spec)
    >>> result.method, result.integer, bool((result.histograms[-1] >= 0).all())
    ('bluedown', True, True)
    """
    opts = TopDownOptions.of(options, **option_values)
    if opts.passes:
        raise PostprocError("bluedown fits each child's subtree estimate in one pass; leave "
                            "out passes= (rounding passes, round_passes=, are taken)")
    cells = noisy.schema.size
    if cells > DENSE_WEIGHT_CELLS:
        raise PostprocError(f"bluedown: {cells:,} cells per histogram need a dense "
                            f"{cells:,} × {cells:,} weight matrix per child, which the node "
                            f"engine cannot take at this size yet (the structured fit is to be "
                            f"built); use 'gls' for the estimate and its intervals")
    _, uncertainty, structure = solve_gls(noisy, spec)
    plan = plan_run(noisy, spec, opts)
    identity = sp.identity(cells, format="csr", dtype=np.float64)
    measured = {level: [("subtree", identity, SubtreeMeasurement(
        uncertainty.subtree_means(li), uncertainty.subtree_ids(li),
        uncertainty.subtree_covariance))] for li, level in enumerate(noisy.levels)}
    plan = dataclasses.replace(plan, measured=measured, method="bluedown", notes={
        "estimates": "subtree GLS estimates weighted by their inverse covariance",
        "gls": structure})
    return solve_plan(plan)
