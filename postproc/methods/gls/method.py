"""``gls``: the best linear unbiased estimate of every unit's histogram from a noisy hierarchy,
under the spec's equalities, with its covariance (``docs/gls.md``).

:func:`gls` hands :func:`~postproc.methods.gls.tree.tree_gls` every measured query of every
level with each answer's own variance, and the spec's equalities compiled for every unit:
the rows whose lower and upper bounds are equal (invariant totals, and what they imply) and the
cells fixed at 0 (structural zeros, group-quarters types a unit does not have, empty units).
Inequalities (bounds that are not equalities) and nonnegativity are not imposed: the estimate is
linear in the measurements, unbiased, and may be negative. The result carries its covariance:
:meth:`Result.intervals <postproc.result.Result.intervals>` gives intervals for any query of any
unit.
"""

from __future__ import annotations

import time
import warnings
from typing import Any, Mapping

import numpy as np

from hierarchy.noisy import NoisyHierarchy
from invariants.compile import LevelConstraints, compile_spec
from invariants.spec import Spec
from postproc.errors import require_checked_spec
from postproc.methods.gls.symmetry import SymmetricCovariance, Symmetry, find_symmetry
from postproc.methods.gls.tree import Equalities, tree_gls
from postproc.result import Result

__all__ = ["gls", "solve_gls", "equalities_of"]

#: Cells per histogram above which the general path (dense cells × cells algebra per distinct
#: unit signature) warns of its cost.
DENSE_WARNING_CELLS = 512


def equalities_of(lc: LevelConstraints) -> Equalities:
    """The equalities of a level's compiled constraints: the rows whose bounds are equal, and the
    cells fixed at 0.

    Examples
    --------
    >>> from hierarchy.geography import Geography
    >>> from hierarchy.schema import Attribute, Schema
    >>> from invariants.spec import Invariant
    >>> schema = Schema((Attribute("sex", ("male", "female")),))
    >>> geo, _ = Geography.from_columns(["nation", "state"], [[["01", "02"]]])
    >>> compiled = compile_spec(Spec([Invariant("tot", "nation")]), schema, geo,
    ...                         {"nation": {"tot": [7]}})
    >>> eq = equalities_of(compiled["nation"])
    >>> eq.matrix.tolist(), eq.values.tolist()
    ([[1.0, 1.0]], [[7.0]])
    >>> equalities_of(compiled["state"]).values.shape
    (2, 0)
    """
    lower, upper = np.asarray(lc.lower, float), np.asarray(lc.upper, float)
    values = np.where(np.isfinite(lower) & (lower == upper), lower, np.nan)
    return Equalities(lc.matrix, values, lc.zero)


def gls(noisy: NoisyHierarchy, spec: Spec | None = None) -> Result:
    """The generalized least-squares (best linear unbiased) estimate of every unit's histogram.

    Parameters
    ----------
    noisy : NoisyHierarchy
        Every measured query of every level is used, each answer with its own variance. The
        bottom level's measurements (with the spec's zero cells) must determine its histograms.
    spec : Spec, optional
        Its equalities are imposed exactly (to float rounding): invariant totals, structural
        zeros, cells a unit's published counts fix at 0. Inequalities are not.

    Returns
    -------
    Result
        ``method="gls"``: real histograms (may be negative), consistent, with
        :attr:`~postproc.result.Result.uncertainty` (the estimate's covariance:
        :meth:`~postproc.result.Result.intervals`).

    Raises
    ------
    PostprocError
        A unit whose measurements do not determine its histogram (naming the unit and the cells
        left free), or equalities that contradict each other.

    Examples
    --------
    >>> from hierarchy import E2E_1940, Budget, e2e_workload, measure, synthesize_1940, tabulate
    >>> levels = ["nation", "state", "county"]
    >>> data = synthesize_1940(5_000, seed=1)
    >>> truth = tabulate(data.persons, schema=E2E_1940, levels=levels, units=data.units)
    >>> spec = Spec.e2e(levels)
    >>> noisy = measure(truth, e2e_workload(E2E_1940), Budget.e2e(1, levels), rng=4, spec=spec)
    >>> result = gls(noisy, spec)
    >>> float(result.histograms[0].sum().round(6)) == int(truth.counts[0].sum())  # invariant
    True
    >>> frame = result.intervals("state", "total", interval=0.9)
    >>> list(frame.columns)
    ['state', 'answer', 'estimate', 'se', 'lower', 'upper']
    >>> bool((frame["se"] < 1e-4).all())          # the state totals are invariant: exact
    True
    """
    t0 = time.perf_counter()
    means, uncertainty, structure = solve_gls(noisy, spec)
    return Result("gls", noisy.schema, noisy.geography, noisy.workload, tuple(means), {
        "noisy": dict(noisy.provenance), "spec": (spec or Spec()).to_dict(),
        "timings": {"total": time.perf_counter() - t0},
        "estimator": "best linear unbiased (generalized least squares)", **structure},
        uncertainty=uncertainty)


def solve_gls(noisy: NoisyHierarchy, spec: Spec | None = None, *,
              compiled: Mapping[str, LevelConstraints] | None = None
              ) -> tuple[list[np.ndarray], Any, dict[str, Any]]:
    """The estimate of :func:`gls` before it is a result: the means of every level, their
    covariance (a :class:`~postproc.methods.gls.tree.TreeGLS` or a
    :class:`~postproc.methods.gls.symmetry.SymmetricCovariance`) and which path computed them.
    ``compiled``: the spec already compiled for every level (BlueDown compiles it once for the
    GLS and TopDown's plan).

    Examples
    --------
    >>> from hierarchy import E2E_1940, Budget, e2e_workload, measure, synthesize_1940, tabulate
    >>> levels = ["nation", "state"]
    >>> truth = tabulate(synthesize_1940(500, seed=1).persons, schema=E2E_1940, levels=levels)
    >>> means, covariance, how = solve_gls(measure(truth, e2e_workload(E2E_1940),
    ...                                            Budget.e2e(1, levels), rng=2))
    >>> [m.shape for m in means], type(covariance).__name__, how["structure"]
    ([(1, 192), (49, 192)], 'SymmetricCovariance', 'split')
    """
    require_checked_spec("gls", noisy, spec)
    spec = spec or Spec()
    geo, schema = noisy.geography, noisy.schema
    if compiled is None:
        compiled = compile_spec(spec, schema, geo, noisy.invariants)
    terms = [[(noisy.workload[name].matrix, noisy.get(level, name).values,
               noisy.get(level, name).weights) for name in noisy.queries(level)]
             for level in geo.levels]
    equalities = [equalities_of(compiled[level]) for level in geo.levels]
    names = [[str(g) for g in codes] for codes in geo.geocodes]
    symmetry, why = find_symmetry(schema.shape, terms, equalities, schema.names)
    if symmetry is not None:
        means, uncertainty = _split_gls(symmetry, geo.parents, terms, equalities, names)
        structure = {"structure": "split", "split_by": schema.names[-1],
                     "cells_per_problem": symmetry.groups}
    else:
        if schema.size > DENSE_WARNING_CELLS:
            warnings.warn(f"gls: the succinct path does not apply ({why}), and with "
                          f"{schema.size:,} cells per histogram the general path does dense "
                          f"{schema.size:,} × {schema.size:,} algebra for every distinct unit "
                          f"(about {schema.size ** 3 / 2e10:.1f} s each): this can take hours",
                          stacklevel=3)
        fit = tree_gls(geo.parents, terms, schema.size, equalities, names=names)
        means, uncertainty = fit.means, fit
        structure = {"structure": "general", "why_not_split": why}
    means = [_exact_zeros(m, compiled[level]) for m, level in zip(means, geo.levels)]
    return means, uncertainty, structure


def _split_gls(symmetry: Symmetry, parents, terms, equalities, names
               ) -> tuple[list[np.ndarray], SymmetricCovariance]:
    """The BLUE by the succinct path: the mean problem and the contrast problems, joined."""
    split = [symmetry.split_terms(level_terms) for level_terms in terms]
    eqs = [symmetry.split_equalities(eq, len(p)) for eq, p in zip(equalities, parents)]
    mean = tree_gls(parents, [m for m, _ in split], symmetry.groups, [m for m, _ in eqs],
                    names=names)
    contrast = tree_gls(parents, [c for _, c in split], symmetry.groups, [c for _, c in eqs],
                        names=names)
    means = [symmetry.join(m, c) for m, c in zip(mean.means, contrast.means)]
    return means, SymmetricCovariance(symmetry, mean, contrast)


def _exact_zeros(means: np.ndarray, lc: LevelConstraints) -> np.ndarray:
    """The estimate with the cells the spec fixes at 0 set to exactly 0 (they are 0 to float
    rounding already; their variance is 0)."""
    out = means.copy()
    out[lc.zero] = 0.0
    return out
