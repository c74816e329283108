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

When the GLS took the succinct path (:mod:`postproc.methods.gls.symmetry`), a child's weight is
``P_c ⊗ I + G ⊗ J`` (``P_c`` the contrast problem's precision, ``G = (P_m − P_c)/R``), and
its part of the objective is ``Σ_r d_rᵀ P_c d_r + (Σ_r d_r)ᵀ G (Σ_r d_r)`` for ``d = x_c − L_c``
arranged as groups × races: one query per race (the race's cells, weight ``P_c``) and one of
race totals (weight ``G``), each ``A × A`` — 32 × 32 for the 2020 workload instead of one
2,016 × 2,016 matrix.
"""

from __future__ import annotations

import dataclasses
from functools import lru_cache, partial
from typing import Any, Callable, Mapping

import numpy as np
import scipy.sparse as sp

from hierarchy.noisy import NoisyHierarchy
from invariants.compile import compile_spec
from invariants.spec import Spec
from postproc.errors import PostprocError, require_checked_spec
from postproc.methods.gls.method import solve_gls
from postproc.methods.gls.operators import _spectrum
from postproc.methods.gls.sums import SkippedLevels
from postproc.methods.gls.symmetry import SymmetricCovariance
from postproc.methods.topdown.options import TopDownOptions
from postproc.methods.topdown.plan import plan_run
from postproc.methods.topdown.run import solve_plan
from postproc.result import Result

__all__ = ["bluedown", "SubtreeMeasurement", "precision", "split_measurements",
           "subtree_measurements", "split_weights", "bluedown_plan", "level_measurements",
           "signature_weight", "check_weight_cells", "check_options"]

#: Cells per histogram above which the dense weight matrix per child (cells × cells) is refused.
DENSE_WEIGHT_CELLS = 512


def precision(covariance: np.ndarray, fill: float = 0.0) -> np.ndarray:
    """The weight of an estimate with this covariance: its pseudo-inverse, plus the largest
    eigenvalue of that (or ``fill`` if larger) in the directions the covariance is 0 (positive
    definite).

    Examples
    --------
    >>> precision(np.array([[2.0, 0.0], [0.0, 0.0]])).tolist()
    [[0.5, 0.0], [0.0, 0.5]]
    """
    values, vectors, keep = _spectrum(covariance)
    inverse = np.where(keep, 1.0 / np.where(keep, values, 1.0), 0.0)
    fill = max(float(inverse.max(initial=0.0)), fill) or 1.0
    weights = np.where(keep, inverse, fill)
    out = (vectors * weights) @ vectors.T
    return (out + out.T) / 2


@dataclasses.dataclass(frozen=True, eq=False)
class SubtreeMeasurement:
    """A level's subtree estimates as the node engine reads a measurement: ``values`` (units ×
    cells) and, for the children of one parent at a time, a weight matrix per child
    (:func:`precision` of its subtree covariance, or the weight itself when ``weighted``;
    units sharing a signature share it).

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
    weighted: bool = False
    shared: dict | None = None

    def __post_init__(self):
        of = self.covariance_of if self.weighted else (
            lambda i: precision(self.covariance_of(i)))
        object.__setattr__(self, "_weight", lru_cache(maxsize=256)(of))

    def weights_of(self, units: slice) -> np.ndarray:
        """The weight matrices of ``units`` (children × cells × cells). Measurements given one
        ``shared`` dict return one array for the same units (the last asked for), so the node
        engine factors it once."""
        key = (units.start, units.stop, units.step)
        if self.shared is not None and self.shared.get("key") == key:
            return self.shared["weights"]
        ids = self.ids[units]
        distinct, inverse = np.unique(ids, return_inverse=True)
        weights = np.stack([self._weight(int(i)) for i in distinct])[inverse.ravel()]
        if self.shared is not None:
            self.shared.update(key=key, weights=weights)
        return weights


def split_measurements(covariance: SymmetricCovariance, level: int
                       ) -> list[tuple[str, Any, SubtreeMeasurement]]:
    """A level's subtree estimates as one query per value of the split attribute (its cells,
    weight ``P_c``) and one of its totals (weight ``G``), for the node engine.

    Examples
    --------
    >>> from postproc.methods.gls.symmetry import Symmetry
    >>> from postproc.methods.gls.tree import tree_gls
    >>> sym = Symmetry(1, 2)
    >>> terms = [[(np.ones((1, 2)), np.array([[7.0]]), np.array([[4.0]]))],
    ...          [(np.eye(2), np.array([[3.0, 1.0], [0.0, 2.0]]), np.ones((2, 2)))]]
    >>> parts = [sym.split_terms(level) for level in terms]
    >>> cov = SymmetricCovariance(sym, *[tree_gls([[-1], [0, 0]], [p[i] for p in parts], 1)
    ...                                  for i in (0, 1)])
    >>> [(name, matrix.toarray().tolist()) for name, matrix, _ in split_measurements(cov, 1)]
    [('subtree[0]', [[1.0, 0.0]]), ('subtree[1]', [[0.0, 1.0]]), ('subtree_total', [[1.0, 1.0]])]
    """
    return subtree_measurements(covariance.subtree_means(level), covariance.subtree_ids(level),
                                partial(signature_weight, covariance), covariance.symmetry)


def check_options(options: TopDownOptions) -> TopDownOptions:
    """TopDown's options as BlueDown takes them: refused with fitting passes (each child has
    one pseudo-measurement).

    Examples
    --------
    >>> check_options(TopDownOptions(passes=[["total"]]))
    Traceback (most recent call last):
    ...
    postproc.errors.PostprocError: bluedown fits each child's subtree estimate in one pass; ...
    """
    if options.passes:
        raise PostprocError("bluedown fits each child's subtree estimate in one pass; leave "
                            "out passes= (rounding passes, round_passes=, are taken)")
    return options


def check_weight_cells(structure: Mapping[str, Any], schema: Any) -> None:
    """Refuse a GLS on the general path with more than :data:`DENSE_WEIGHT_CELLS` cells per
    histogram (a dense weight matrix per child), saying why it did not split.

    Examples
    --------
    >>> from hierarchy import E2E_1940
    >>> check_weight_cells({"structure": "general", "why_not_split": "…"}, E2E_1940)
    """
    cells = schema.size
    if structure.get("structure") == "general" and cells > DENSE_WEIGHT_CELLS:
        raise PostprocError(f"bluedown: the measurements do not split by {schema.names[-1]} "
                            f"({structure.get('why_not_split', '')}), and {cells:,} cells per "
                            f"histogram would need a dense {cells:,} × {cells:,} weight matrix "
                            f"per child; use 'gls' for the estimate and its intervals")


def level_measurements(uncertainty: Any, level: int
                       ) -> list[tuple[str, Any, SubtreeMeasurement]]:
    """A level's subtree estimates for the node engine from a ``gls`` fit's ``uncertainty``
    (a :class:`~postproc.methods.gls.tree.TreeGLS` or a :class:`SymmetricCovariance`).

    Examples
    --------
    >>> from postproc.methods.gls.tree import tree_gls
    >>> fit = tree_gls([[-1], [0, 0]], [[(np.ones((1, 1)), np.array([[7.0]]), np.ones((1, 1)))],
    ...                 [(np.eye(1), np.array([[3.0], [4.0]]), np.ones((2, 1)))]], cells=1)
    >>> [(name, m.values.ravel().tolist()) for name, _, m in level_measurements(fit, 1)]
    [('subtree', [3.0, 4.0])]
    """
    if isinstance(uncertainty, SkippedLevels):     # a fit with sums' levels inserted
        return level_measurements(uncertainty.inner, uncertainty.level_of(level))
    if isinstance(uncertainty, SymmetricCovariance):
        return split_measurements(uncertainty, level)
    return subtree_measurements(uncertainty.subtree_means(level),
                                uncertainty.subtree_ids(level), uncertainty.subtree_covariance)


def signature_weight(uncertainty: Any, signature: int) -> Any:
    """What :func:`subtree_measurements` takes as a signature's weight, from a ``gls`` fit's
    ``uncertainty``: the pair of :func:`split_weights` (succinct path) or the covariance.

    Examples
    --------
    >>> from postproc.methods.gls.tree import tree_gls
    >>> fit = tree_gls([[-1]], [[(np.ones((1, 1)), np.array([[7.0]]), np.full((1, 1), 4.0))]],
    ...                cells=1)
    >>> signature_weight(fit, 0).tolist()
    [[0.25]]
    """
    if isinstance(uncertainty, SkippedLevels):
        return signature_weight(uncertainty.inner, signature)
    if isinstance(uncertainty, SymmetricCovariance):
        m, c = uncertainty.pair(signature)
        return split_weights(uncertainty.contrast.subtree_covariance(c),
                             uncertainty.mean.subtree_covariance(m), uncertainty.symmetry.size)
    return uncertainty.subtree_covariance(signature)


def subtree_measurements(means: np.ndarray, ids: np.ndarray, weight_of: Callable[[int], Any],
                         symmetry: Any = None) -> list[tuple[str, Any, SubtreeMeasurement]]:
    """A level's subtree estimates ``means`` (units × cells) as the node engine reads
    measurements, each unit weighted by its signature's (``ids``) weight: with a ``symmetry``
    (:class:`~postproc.methods.gls.symmetry.Symmetry`), ``weight_of(i)`` is the pair ``(P_c,
    G)`` of :func:`split_weights` and the estimates are one query per value of the split
    attribute and one of its totals (:func:`split_measurements`); without, it is the
    covariance (cells × cells), weighted by its :func:`precision`, and the estimates are one
    query of every cell.

    Examples
    --------
    >>> [(name, matrix.shape) for name, matrix, _ in subtree_measurements(
    ...     np.zeros((2, 3)), np.array([0, 0]), lambda i: np.eye(3))]
    [('subtree', (3, 3))]
    """
    if symmetry is None:
        cells = means.shape[1]
        return [("subtree", sp.identity(cells, format="csr", dtype=np.float64),
                 SubtreeMeasurement(means, ids, weight_of))]
    a, r = symmetry.groups, symmetry.size
    means = means.reshape(-1, a, r)
    weights = lru_cache(maxsize=256)(weight_of)
    shared: dict = {}                   # one array of P_c for every race's query
    out = []
    for race in range(r):
        matrix = sp.kron(sp.identity(a), sp.csr_matrix(np.eye(r)[race:race + 1]), format="csr")
        out.append((f"subtree[{race}]", matrix,
                    SubtreeMeasurement(means[:, :, race], ids, lambda i: weights(i)[0],
                                       weighted=True, shared=shared)))
    out.append(("subtree_total", sp.kron(sp.identity(a), np.ones((1, r)), format="csr"),
                SubtreeMeasurement(means.sum(axis=2), ids, lambda i: weights(i)[1],
                                   weighted=True)))
    return out


def split_weights(contrast: np.ndarray, mean: np.ndarray, races: int
                  ) -> tuple[np.ndarray, np.ndarray]:
    """``(P_c, G)`` of a subtree estimate whose contrast and mean problems' covariances are
    ``contrast`` and ``mean`` (groups × groups): the contrast precision and ``(P_m − P_c)/R``,
    both positive definite (``G`` is positive semidefinite in exact arithmetic — the mean
    problem has all the contrast problem's information and more — so rounding below 0 is
    clipped, and both get a floor of 1e-12 of their largest eigenvalue).

    Examples
    --------
    >>> p_c, g = split_weights(np.array([[2.0]]), np.array([[1.0]]), 2)
    >>> p_c.tolist(), g.tolist()
    ([[0.5]], [[0.25]])
    """
    p_c = precision(contrast)
    p_m = precision(mean, fill=float(np.linalg.eigvalsh(p_c).max()))
    return _floored(p_c), _floored((p_m - p_c) / races)


def _floored(matrix: np.ndarray) -> np.ndarray:
    values, vectors = np.linalg.eigh((matrix + matrix.T) / 2)
    top = max(float(values.max(initial=0.0)), 1e-300)
    out = (vectors * np.maximum(values, 1e-12 * top)) @ vectors.T
    return (out + out.T) / 2


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
        Measurements that do not split by the last attribute with more than 512 cells per
        histogram (a dense weight matrix per child), fitting passes, or what ``gls`` or TopDown
        refuse.

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
    opts = check_options(TopDownOptions.of(options, **option_values))
    require_checked_spec("bluedown", noisy, spec)
    compiled = compile_spec(spec or Spec(), noisy.schema, noisy.geography, noisy.invariants)
    _, uncertainty, structure = solve_gls(noisy, spec, compiled=compiled)
    check_weight_cells(structure, noisy.schema)
    measured = {level: level_measurements(uncertainty, li)
                for li, level in enumerate(noisy.levels)}
    plan = plan_run(noisy, spec, opts, compiled=compiled, measured=measured)
    return solve_plan(bluedown_plan(plan, structure))


def bluedown_plan(plan: Any, structure: Mapping[str, Any]) -> Any:
    """A TopDown plan given subtree measurements, named ``bluedown`` and noting what its
    estimates are and the GLS's ``structure``.

    Examples
    --------
    >>> from hierarchy import E2E_1940, Budget, e2e_workload, measure, synthesize_1940, tabulate
    >>> truth = tabulate(synthesize_1940(300, seed=1).persons, schema=E2E_1940, levels=["n"])
    >>> noisy = measure(truth, e2e_workload(E2E_1940), Budget.e2e(1, ["n"]), rng=2)
    >>> bluedown_plan(plan_run(noisy, None, TopDownOptions()), {}).method
    'bluedown'
    """
    return dataclasses.replace(plan, method="bluedown", notes={
        "estimates": "subtree GLS estimates weighted by their inverse covariance",
        "gls": dict(structure)})
