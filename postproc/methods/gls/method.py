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

import dataclasses
import time
import warnings
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np

from hierarchy.noisy import NoisyHierarchy
from invariants.compile import LevelConstraints, compile_spec
from invariants.spec import Spec
from postproc.errors import PostprocError, require_checked_spec
from postproc.methods.gls.chains import measured_at_chain_bottoms
from postproc.methods.gls.sums import SkippedLevels, with_sum_levels
from postproc.methods.gls.symmetry import SymmetricCovariance, Symmetry, find_symmetry
from postproc.methods.gls.tree import Below, Equalities, TreeGLS, tree_gls
from postproc.result import Result

__all__ = ["gls", "solve_gls", "equalities_of", "gls_problems", "GLSProblems", "exact_zeros",
           "level_terms", "split_problems"]

#: ``gls_problems(symmetry=FIND)``: look for the split (the default).
FIND = "find"

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
    if compiled is None:
        compiled = compile_spec(spec, noisy.schema, noisy.geography, noisy.invariants)
    # only children without measurements (a Noisy Measurement File's): the same information,
    # measured at the bottom of each chain, which leaves every bottom unit measured
    tree, tree_compiled, inserted = measured_at_chain_bottoms(noisy), compiled, []
    augmented = with_sum_levels(tree, compiled)
    if augmented is not None:   # sums over sibling units: a level of their groups above them
        tree, tree_compiled, inserted = augmented
    problems = gls_problems(tree, tree_compiled)
    if problems.symmetry is None and problems.cells > DENSE_WARNING_CELLS:
        warnings.warn(f"gls: the succinct path does not apply ({problems.why}), and with "
                      f"{problems.cells:,} cells per histogram the general path does dense "
                      f"{problems.cells:,} × {problems.cells:,} algebra for every distinct unit "
                      f"(about {problems.cells ** 3 / 2e10:.1f} s each): this can take hours",
                      stacklevel=3)
    fits = problems.fit()
    means = [m for li, m in enumerate(problems.means(fits)) if li not in inserted]
    means = [exact_zeros(m, compiled[level]) for m, level in zip(means, noisy.geography.levels)]
    uncertainty = problems.uncertainty(fits)
    if inserted:
        uncertainty = SkippedLevels(uncertainty, inserted)
    return means, uncertainty, problems.structure


@dataclass(frozen=True, eq=False)
class GLSProblems:
    """The GLS of a noisy hierarchy as the tree problems :func:`tree_gls` solves: one (the
    general path) or the mean and contrast problems of the succinct path, each with its terms
    and equalities per level.

    Attributes
    ----------
    symmetry : Symmetry or None
        The split, or None on the general path (``why`` says why).
    parents, names : per level, the units' parents and names
    terms, equalities : per problem, per level
    cells : int
        Cells per histogram.
    why, split_by : str
        Why the general path (the failed condition), and the attribute the split is by.

    Examples
    --------
    A root measured 10 over two leaves measured 4 and 5 (one cell, unit variances), Hay et
    al.'s example:

    >>> one = np.ones((1, 1))
    >>> problems = GLSProblems(None, [np.array([-1]), np.array([0, 0])], [["r"], ["a", "b"]],
    ...                        [[[(one, np.array([[10.0]]), one)],
    ...                          [(one, np.array([[4.0], [5.0]]), np.ones((2, 1)))]]],
    ...                        [[None, None]], 1)
    >>> [m.ravel().round(4).tolist() for m in problems.means(problems.fit())]
    [[9.6667], [4.3333, 5.3333]]
    """

    symmetry: Symmetry | None
    parents: list[np.ndarray]
    names: list[list[str]]
    terms: list[list[Any]]
    equalities: list[list[Equalities | None]]
    cells: int
    why: str = ""
    split_by: str = ""

    @property
    def structure(self) -> dict[str, Any]:
        """Which path, for a result's provenance."""
        if self.symmetry is None:
            return {"structure": "general", "why_not_split": self.why}
        return {"structure": "split", "split_by": self.split_by,
                "cells_per_problem": self.symmetry.groups}

    def fit(self, below: Sequence[Below] | None = None,
            above: Sequence[np.ndarray] | None = None, downward: bool = True) -> list[TreeGLS]:
        """Every problem solved (``below``/``above``: per problem, for a tree cut into parts;
        ``downward``: see :func:`~postproc.methods.gls.tree.tree_gls`)."""
        cells = self.cells if self.symmetry is None else self.symmetry.groups
        return [tree_gls(self.parents, terms, cells, equalities, names=self.names,
                         below=None if below is None else below[i],
                         above=None if above is None else above[i], downward=downward)
                for i, (terms, equalities) in enumerate(zip(self.terms, self.equalities))]

    def upper(self, levels: int) -> "GLSProblems":
        """The problems of the first ``levels`` levels (a top cut above its bottom level).

        Examples
        --------
        >>> one = np.ones((1, 1))
        >>> problems = GLSProblems(None, [np.array([-1]), np.array([0, 0])], [["r"], ["a", "b"]],
        ...                        [[[(one, np.array([[10.0]]), one)], []]], [[None, None]], 1)
        >>> len(problems.upper(1).parents)
        1
        """
        return dataclasses.replace(
            self, parents=self.parents[:levels], names=self.names[:levels],
            terms=[t[:levels] for t in self.terms],
            equalities=[e[:levels] for e in self.equalities])

    def bottom_rows(self, rows: slice) -> "GLSProblems":
        """The problems of the bottom level's units ``rows`` alone, as a forest (their parents
        are above, in another tree).

        Examples
        --------
        >>> one = np.ones((2, 1))
        >>> problems = GLSProblems(None, [np.array([-1]), np.array([0, 0])], [["r"], ["a", "b"]],
        ...                        [[[], [(np.ones((1, 1)), np.array([[4.0], [5.0]]), one)]]],
        ...                        [[None, None]], 1)
        >>> problems.bottom_rows(slice(1, 2)).names
        [['b']]
        """
        units = np.arange(self.parents[-1].size)[rows]
        terms = [[[(q, values[rows], np.broadcast_to(weights, np.shape(values)[:1] + np.shape(
            weights)[-1:])[rows]) for q, values, weights in t[-1]]] for t in self.terms]
        equalities = [[None if e[-1] is None else Equalities(
            e[-1].matrix, e[-1].values[rows], None if e[-1].zero is None else e[-1].zero[rows])]
            for e in self.equalities]
        return dataclasses.replace(self, parents=[np.full(units.size, -1)],
                                   names=[self.names[-1][rows]], terms=terms,
                                   equalities=equalities)

    def join(self, arrays: Sequence[np.ndarray]) -> np.ndarray:
        """Histograms (units × cells) from one array per problem (each problem's coordinates
        of the same units)."""
        return arrays[0] if self.symmetry is None else self.symmetry.join(*arrays)

    def means(self, fits: Sequence[TreeGLS]) -> list[np.ndarray]:
        """Every level's estimates (units × cells)."""
        return [self.join(level) for level in zip(*(fit.means for fit in fits))]

    def uncertainty(self, fits: Sequence[TreeGLS]) -> Any:
        """The estimates' covariance: the TreeGLS, or a SymmetricCovariance."""
        return fits[0] if self.symmetry is None else SymmetricCovariance(self.symmetry, *fits)


def gls_problems(noisy: NoisyHierarchy, compiled: Mapping[str, LevelConstraints], *,
                 levels: Sequence[str] | None = None, symmetry: Any = FIND) -> GLSProblems:
    """The tree problems of the GLS of ``noisy`` under ``compiled`` (its spec compiled), on
    ``levels`` (default all; a run in parts passes the levels below its split: a forest whose
    top units' parents are the split's units). ``symmetry``: the split to use (a
    :class:`Symmetry`, or None for the general path) when the caller has found it on more
    levels than these; by default it is looked for here.

    Examples
    --------
    >>> from hierarchy import E2E_1940, Budget, e2e_workload, measure, synthesize_1940, tabulate
    >>> levels = ["nation", "state"]
    >>> truth = tabulate(synthesize_1940(500, seed=1).persons, schema=E2E_1940, levels=levels)
    >>> noisy = measure(truth, e2e_workload(E2E_1940), Budget.e2e(1, levels), rng=2)
    >>> problems = gls_problems(noisy, compile_spec(Spec(), E2E_1940, truth.geography, {}))
    >>> problems.structure["cells_per_problem"], len(problems.fit())
    (32, 2)
    """
    geo, schema = noisy.geography, noisy.schema
    levels = list(geo.levels if levels is None else levels)
    held = sorted({held.name for level in levels for held in compiled[level].sums})
    if held:
        raise PostprocError(
            f"sums over sets of units ({held}) reach the GLS's tree problems, which hold "
            "equalities unit by unit: solve_gls inserts a level of their groups first "
            "(gls, bluedown); a run in parts does not do that yet")
    index = [geo.level_index(level) for level in levels]
    parents = [np.asarray(geo.parents[li]) for li in index]
    if index[0] == 0:
        parents[0] = np.array([-1])
    names = [[str(g) for g in geo.geocodes[li]] for li in index]
    return split_problems([level_terms(noisy, level) for level in levels],
                          [equalities_of(compiled[level]) for level in levels], parents, names,
                          schema.shape, schema.names, symmetry=symmetry)


def level_terms(noisy: NoisyHierarchy, level: str) -> list[Any]:
    """A level's measured queries as (Q, values, weights).

    Examples
    --------
    >>> from hierarchy import E2E_1940, Budget, e2e_workload, measure, synthesize_1940, tabulate
    >>> truth = tabulate(synthesize_1940(50, seed=1).persons, schema=E2E_1940, levels=["nation"])
    >>> noisy = measure(truth, e2e_workload(E2E_1940), Budget.e2e(1, ["nation"]), rng=2)
    >>> [values.shape for _, values, _ in level_terms(noisy, "nation")][:2]
    [(1, 192), (1, 8)]
    """
    return [(noisy.workload[name].matrix, noisy.get(level, name).values,
             noisy.get(level, name).weights) for name in noisy.queries(level)]


def split_problems(terms: Sequence[Sequence[Any]], equalities: Sequence[Equalities | None],
                   parents: Sequence[np.ndarray], names: Sequence[Sequence[str]],
                   shape: Sequence[int], attributes: Sequence[str] = (), *,
                   symmetry: Any = FIND) -> GLSProblems:
    """The problems of per-level terms and equalities: split by the last attribute when
    ``symmetry`` (found here by default, :func:`find_symmetry`) allows it, else one.

    Examples
    --------
    One unit of 1 × 2 cells (two values of the last attribute), measured cell by cell:

    >>> terms = [[(np.eye(2), np.array([[3.0, 5.0]]), np.ones((1, 2)))]]
    >>> problems = split_problems(terms, [None], [np.array([-1])], [["u"]], (1, 2))
    >>> problems.structure["structure"], problems.means(problems.fit())[0].round(6).tolist()
    ('split', [[3.0, 5.0]])
    """
    why = ""
    if symmetry is FIND:
        symmetry, why = find_symmetry(shape, terms, equalities, attributes)
    cells = int(np.prod(shape))
    if symmetry is None:
        return GLSProblems(None, list(parents), list(names), [list(terms)], [list(equalities)],
                           cells, why or "the caller's choice")
    split = [symmetry.split_terms(t) for t in terms]
    eqs = [symmetry.split_equalities(eq, len(p)) for eq, p in zip(equalities, parents)]
    return GLSProblems(symmetry, list(parents), list(names),
                       [[m for m, _ in split], [c for _, c in split]],
                       [[m for m, _ in eqs], [c for _, c in eqs]], cells,
                       split_by=attributes[-1] if attributes else "the last attribute")


def exact_zeros(means: np.ndarray, lc: LevelConstraints) -> np.ndarray:
    """The estimate with the cells the spec fixes at 0 set to exactly 0 (they are 0 to float
    rounding already; their variance is 0).

    Examples
    --------
    >>> from hierarchy.geography import Geography
    >>> from hierarchy.schema import Attribute, Schema
    >>> from invariants.spec import Invariant
    >>> schema = Schema((Attribute("sex", ("male", "female")),))
    >>> geo, _ = Geography.from_columns(["nation"], [[]])
    >>> compiled = compile_spec(Spec([Invariant("tot", "nation")]), schema, geo,
    ...                         {"nation": {"tot": [0]}})
    >>> exact_zeros(np.array([[1e-17, -2e-17]]), compiled["nation"]).tolist()
    [[0.0, 0.0]]
    """
    out = means.copy()
    out[lc.zero] = 0.0
    return out
