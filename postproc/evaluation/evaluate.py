"""Error and empirical privacy loss of any post-processed result, per level and query.

The metrics are stated in docs/metrics.md, the EPL estimators in docs/epl.md.

:func:`evaluate` takes a result — any post-processor's :class:`~postproc.result.Result` or the
raw :class:`~hierarchy.noisy.NoisyHierarchy` measurements — and the confidential
:class:`~hierarchy.histograms.Hierarchy`, and returns one tidy row per level and query: the error
metrics of :func:`postproc.evaluation.metrics.error_metrics` and the EPL of the pooled errors (all
units and answers of that level and query, treated as draws of one error distribution) with its
interval.

The EPL is estimated with :func:`postproc.evaluation.epl.estimate_epl` — the *improved* estimator
unless told otherwise. Where every error is zero (a level held invariant, e.g. the state totals of
the E2E spec) the error distribution is a point mass and the EPL is undefined: the table holds
``inf`` with the reason in ``epl_reason``, and :func:`to_json` writes ``null``.

Raw measurements answer a query they did not measure from the finest measured query that
determines it (``total`` from the sum of ``va_hisp_race``, say: the most precise such sum), which
is what a user without post-processing would publish.

Given several results by name, :func:`evaluate` puts them in one table with a ``method``
column. To compare post-processors, use the one comparison,
:func:`postproc.evaluation.compare.compare_methods`: it runs registered methods on the same
measurements and evaluates them (``postproc compare`` on the command line).
:func:`reference_results` makes the results of the reference analysis that ``postproc evaluate
--compare`` sets beside a run's result: the raw measurements, the clipped measurements,
closed-form least squares (with and without clipping) and TopDown, and bottom-up with the same
total ε (its own measurement) and its calibration to the published totals. (:func:`compare` and
:func:`compare_postprocessors` are their deprecated forerunners.)

Examples
--------
>>> from hierarchy.synth import synthesize_1940
>>> from hierarchy.tabulation import tabulate
>>> from hierarchy.measurement import measure
>>> from hierarchy.budget import Budget
>>> from hierarchy.queries import e2e_workload
>>> from hierarchy.schema import E2E_1940
>>> levels = ["nation", "state", "county"]
>>> truth = tabulate(synthesize_1940(20_000, seed=1).persons, schema=E2E_1940, levels=levels)
>>> noisy = measure(truth, e2e_workload(E2E_1940), Budget.e2e(1, levels), rng=2)
>>> table = evaluate(noisy, truth, queries=["total", "va_hisp_race"], rng=0)
>>> print(table[["level", "query", "n"]].to_string(index=False))
 level        query    n
nation        total    1
nation va_hisp_race   24
 state        total   49
 state va_hisp_race 1176
county        total   49
county va_hisp_race 1176
>>> sorted(to_json(table)["county"]["total"])
['epl', 'epl_ci_high', 'epl_ci_low', 'epl_kind', 'epl_method', 'epl_reason', 'exact_median',
 'exact_p95', 'mae', 'max_abs', 'mean_abs', 'mse', 'n', 'p95_abs', 'rmse']
"""

from __future__ import annotations

import json
import math
import warnings
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd

from hierarchy.errors import DappError, HierarchyError
from hierarchy.histograms import Hierarchy
from hierarchy.noisy import NoisyHierarchy
from hierarchy.queries import Query
from postproc.errors import PostprocError
from postproc.evaluation.epl import estimate_epl, unbounded
from postproc.evaluation.metrics import METRICS, error_metrics
from postproc.evaluation.tables import EvaluationTable, default_queries
from postproc.gate import combined_randomness, label_table, randomness_of
from postproc.methods.baselines import TreeCounts, bottom_up, calibrate_to_totals, clip_negative
from postproc.result import Provenance, Result, resolve_query

__all__ = ["EVALUATION_COLUMNS", "default_queries", "result_answers",
           "evaluate", "reference_results", "DEFAULT_COMPARISON", "compare",
           "compare_postprocessors", "to_json", "json_ready",
           "pivot", "write_evaluation"]

#: Columns of :func:`evaluate`'s table after ``level`` and ``query``.
EVALUATION_COLUMNS = (*METRICS, "epl", "epl_ci_low", "epl_ci_high", "epl_kind", "epl_method",
                      "epl_reason")


# --------------------------------------------------------------------------------------------------
# Answers of any result
# --------------------------------------------------------------------------------------------------
def result_answers(result: Any, level: str | int, query: str | Query) -> np.ndarray:
    """Answers of ``query`` for every unit of ``level`` of any result.

    Parameters
    ----------
    result : Result, NoisyHierarchy, Hierarchy or TreeCounts
        A TreeCounts answers only ``total``, at integer levels.
    level : str or int
    query : str or Query

    Returns
    -------
    numpy.ndarray, shape (units, answers)

    Raises
    ------
    PostprocError
        An unsupported result type or query.

    Examples
    --------
    >>> result_answers(TreeCounts.from_leaves([1, 2, 3, 4], 2), 1, "total").tolist()
    [[3], [7]]
    """
    if isinstance(result, NoisyHierarchy):
        return result.answers(level, query)
    if isinstance(result, TreeCounts):
        if (query.name if isinstance(query, Query) else query) != "total":
            raise PostprocError("a TreeCounts holds total counts only; ask for 'total'")
        return np.asarray(result.counts[int(level)])[:, None]
    if isinstance(result, Hierarchy):
        q = resolve_query(query, result.schema)
        return q.answer(result.level_counts(level))
    histograms = getattr(result, "histograms", None)
    if histograms is None:
        raise PostprocError(f"cannot evaluate a {type(result).__name__}: pass a Result, "
                            f"a NoisyHierarchy, a Hierarchy, a TreeCounts or a run directory")
    q = resolve_query(query, result.schema, getattr(result, "workload", None))
    li = result.geography.level_index(level)
    if li >= len(histograms):
        raise PostprocError(f"the result has no histograms for level "
                            f"{result.geography.levels[li]!r}")
    return q.answer(histograms[li])


# --------------------------------------------------------------------------------------------------
# Evaluation
# --------------------------------------------------------------------------------------------------
def _epl_options(method: str, options: Mapping[str, Any] | None, rng: Any) -> dict[str, Any]:
    if method == "direct":
        raise PostprocError("the direct EPL estimator needs repeated runs on neighbouring "
                            "datasets, not one result's errors; use 'improved' or 'published'")
    out = dict(options or {})
    if method == "improved":
        out.setdefault("rng", rng)
    return out


def _epl_row(errors: np.ndarray, method: str, options: dict[str, Any],
             held: Sequence[str] = ()) -> dict[str, Any]:
    """The EPL columns of one row; ``held`` names the invariants the spec publishes at the
    row's level: when every error there is 0, the counts are exact and the loss unbounded."""
    if held and errors.size and not np.any(errors):
        result = unbounded(method, int(errors.size),
                           f"held invariant: the spec publishes {', '.join(held)} exactly at "
                           f"this level and every error is 0, so the loss is unbounded")
    else:
        result = estimate_epl(errors, method=method, **options)
    return {"epl": result.epl, "epl_ci_low": result.ci_low, "epl_ci_high": result.ci_high,
            "epl_kind": result.kind, "epl_method": method, "epl_reason": result.reason}


def _spec_of(result: Any) -> Any:
    """The spec a result records having kept (its provenance's ``spec``, as TopDown's does), or
    None."""
    from invariants.spec import Spec
    try:
        recorded = Provenance.from_dict(getattr(result, "provenance", None)).spec
        return Spec.from_dict(recorded) if recorded else None
    except DappError:
        return None


def _held_invariants(spec: Any, level: str, levels: Sequence[str]) -> tuple[str, ...]:
    """The invariants ``spec`` publishes at ``level`` (none without a spec)."""
    if spec is None:
        return ()
    return tuple(dict.fromkeys(inv.name for inv in spec.invariants
                               if level in spec.levels_of(inv, levels)))


def _levels_and_names(result: Any, truth: Any) -> tuple[list[Any], list[str]]:
    if isinstance(truth, TreeCounts):
        levels = list(range(truth.depth + 1))
        return levels, [f"level {j}" for j in levels]
    levels = list(truth.geography.levels)
    return levels, levels


def evaluate(result: Any, truth: Hierarchy | TreeCounts, *,
             queries: Sequence[str] | None = None, levels: Sequence[str] | None = None,
             epl_method: str = "improved", epl_options: Mapping[str, Any] | None = None,
             rng: Any = None, spec: Any = None) -> pd.DataFrame:
    """Error metrics and EPL of ``result`` against ``truth`` for every level and query — or of
    several results, given by name, in one table.

    Parameters
    ----------
    result : Result, NoisyHierarchy or TreeCounts, or a mapping name → result
        Several results are evaluated on the same truth with the same options, one after the
        other. A path of a result directory (a ``postproc run`` output) is deprecated: pass
        :func:`postproc.apps.runs.directories.load_run`'s ``estimate`` or
        :meth:`Result.read <postproc.result.Result.read>`'s result.
    truth : Hierarchy or TreeCounts
        The exact counts, on the same geography (or the same regular tree).
    queries : sequence of str, optional
        Workload names or query expressions; default :func:`default_queries` (``total`` only
        for a TreeCounts).
    levels : sequence of str, optional
        Default: every level of the truth.
    epl_method : {'improved', 'published'}
    epl_options : dict, optional
        Keyword options of the estimator (e.g. ``{"n_boot": 0}``).
    rng : None, int, numpy.random.Generator or Randomness
        Bootstrap randomness of the improved estimator.
    spec : Spec, optional
        The spec the result keeps (default: the one its provenance records, as TopDown's
        does): at a level where it publishes an invariant, a query whose every error is 0 is
        reported as held invariant (an unbounded loss) rather than bounded from a point mass.

    Returns
    -------
    EvaluationTable
        A pandas DataFrame (:class:`~postproc.evaluation.tables.EvaluationTable`: in a notebook,
        a compact table with units under its randomness banner), columns ``level, query`` then
        :data:`EVALUATION_COLUMNS`. ``mae`` is the *median* absolute error, ``mean_abs`` the
        mean. ``epl`` is the estimate with its interval ``epl_ci_low``, ``epl_ci_high``; where
        the errors cannot pin it down it is ``inf``, with ``epl_reason`` saying why, and
        ``epl_ci_low`` a one-sided lower bound when one exists (``nan`` otherwise; ``inf`` for
        a query held invariant) — see :class:`~postproc.evaluation.epl.EPLResult`.
        ``attrs["randomness"]`` is the randomness label of ``result``'s measurements (none
        when it records none): the toolkit's writers and plotters keep a release-mode table to
        ``confidential/`` (:mod:`postproc.gate`). For a mapping, a ``method`` column (the
        names) comes first, and the label is release if any result's measurements were release
        mode (their truth is real), else simulation if any were
        (:func:`postproc.gate.combined_randomness`).

    Raises
    ------
    PostprocError
        Different geographies, unknown queries or levels, an unsupported result.

    Examples
    --------
    >>> truth = TreeCounts.from_leaves(np.arange(100) % 7, 10)
    >>> table = evaluate(truth, truth, rng=0)          # no error at all
    >>> columns = ["level", "query", "mae", "epl", "epl_ci_low"]
    >>> print(table[columns].iloc[:3].to_string(index=False))
      level query  mae  epl  epl_ci_low
    level 0 total  0.0  inf         NaN
    level 1 total  0.0  inf    0.807155
    level 2 total  0.0  inf    3.281346
    >>> table["epl_kind"].tolist()[:3]         # one error tells nothing; more bound the loss
    ['undefined', 'bound', 'bound']
    >>> table["epl_reason"].iloc[2]
    'all 100 errors equal 0: too concentrated to resolve the log ratio next to it; ...'

    Several results, by name:

    >>> from postproc.methods.baselines import gdpc, rdpc
    >>> pop = TreeCounts.from_leaves(np.full(1000, 100), 10)
    >>> table = evaluate({"gdpc": gdpc(pop, 1, rng=1), "rdpc": rdpc(pop, 1, rng=1)}, pop, rng=0)
    >>> table.groupby("method")["level"].count().to_dict()
    {'gdpc': 4, 'rdpc': 4}
    """
    if isinstance(result, Mapping):
        return _evaluate_each(result, truth, queries=queries, levels=levels,
                              epl_method=epl_method, epl_options=epl_options, rng=rng,
                              spec=spec)
    if isinstance(result, (str, Path)):
        result = _read_directory(result)
    _check_geography(result, truth)
    level_keys, level_names = _levels_and_names(result, truth)
    if levels is not None:
        wanted = list(levels)
        unknown = [lv for lv in wanted if lv not in level_names]
        if unknown:
            raise PostprocError(f"unknown level(s) {unknown}; levels are {level_names}")
        picked = [(k, n) for k, n in zip(level_keys, level_names) if n in wanted]
    else:
        picked = list(zip(level_keys, level_names))
    if queries is None:
        workload = getattr(result, "workload", None)
        queries = ("total",) if isinstance(truth, TreeCounts) or workload is None \
            else default_queries(workload)
    options = _epl_options(epl_method, epl_options, rng)
    if not isinstance(truth, TreeCounts):
        workload = getattr(result, "workload", None)
        queries = [resolve_query(q, truth.schema, workload) for q in queries]
    if spec is None:
        spec = _spec_of(result)
    rows = []
    for key, name in picked:
        held = _held_invariants(spec, name, level_names)
        for query in queries:
            dp = np.asarray(result_answers(result, key, query), dtype=np.float64)
            exact = np.asarray(result_answers(truth, key, query), dtype=np.float64)
            metrics = error_metrics(dp, exact)
            errors = (dp - exact).ravel()
            rows.append({"level": name, "query": query if isinstance(query, str) else query.name,
                         **metrics, **_epl_row(errors, epl_method, options, held)})
    return label_table(EvaluationTable(rows, columns=["level", "query", *EVALUATION_COLUMNS]),
                       randomness_of(result))


def _read_directory(directory: str | Path) -> Result:
    """The result in ``directory``, as ``load_run`` gives a run's (for one release: reading
    directories belongs to the applications, :mod:`postproc.apps.runs.directories`)."""
    warnings.warn("evaluate() of a directory is deprecated: pass its result, "
                  "postproc.apps.runs.directories.load_run(directory).estimate for a postproc run "
                  "output or postproc.result.Result.read(directory)", DeprecationWarning,
                  stacklevel=3)
    read = Result.read(directory)
    # what load_run records: the method, the directory and the measurements' randomness label —
    # not the spec, so that the held invariants are read as they were for a directory
    return Result(read.method, read.schema, read.geography, read.workload, read.histograms,
                  {"method": read.method, "directory": str(Path(directory)),
                   "noisy": {"randomness": read.randomness}})


def _check_geography(result: Any, truth: Any) -> None:
    if isinstance(truth, TreeCounts):
        if not isinstance(result, TreeCounts) or result.children != truth.children \
                or result.depth != truth.depth:
            raise PostprocError("a TreeCounts truth needs a TreeCounts result of the same shape")
        return
    geo = getattr(result, "geography", None)
    if geo is None:
        return
    if not geo.equals(truth.geography):
        sizes = {lv: geo.n_units(lv) for lv in geo.levels}
        raise PostprocError(f"the result's geography {sizes} differs from the truth's "
                            f"{ {lv: truth.geography.n_units(lv) for lv in truth.levels} }; "
                            f"evaluate against the data the result was made from")


def _evaluate_each(results: Mapping[str, Any], truth: Hierarchy | TreeCounts, **options: Any
                   ) -> pd.DataFrame:
    """:func:`evaluate` of each result on the same truth, one table with a ``method`` column
    first, labelled with the combined randomness of the results' measurements."""
    frames = [evaluate(result, truth, **options).assign(method=name)
              for name, result in results.items()]
    table = pd.concat(frames, ignore_index=True)
    table = table[["method", *[c for c in table.columns if c != "method"]]]
    return label_table(table, combined_randomness(results.values()))


def compare(results: Mapping[str, Any], truth: Hierarchy | TreeCounts, **options: Any
            ) -> pd.DataFrame:
    """Deprecated: :func:`evaluate` takes the mapping itself, ``evaluate(results, truth)``, and
    gives the same table (to run and compare registered methods, use
    :func:`postproc.evaluation.compare.compare_methods`).

    Examples
    --------
    >>> import warnings
    >>> from postproc.methods.baselines import gdpc, rdpc
    >>> pop = TreeCounts.from_leaves(np.full(1000, 100), 10)
    >>> results = {"gdpc": gdpc(pop, 1, rng=1), "rdpc": rdpc(pop, 1, rng=1)}
    >>> with warnings.catch_warnings():
    ...     warnings.simplefilter("ignore", DeprecationWarning)
    ...     table = compare(results, pop, rng=0)
    >>> table.equals(evaluate(results, pop, rng=0))
    True
    """
    warnings.warn("postproc.evaluation.evaluate.compare is deprecated: evaluate(results, truth) "
                  "evaluates a mapping of results into the same table; compare_methods runs "
                  "and compares registered methods", DeprecationWarning, stacklevel=2)
    return evaluate(results, truth, **options)


def _e2e_budget(noisy: NoisyHierarchy) -> tuple[float, float] | None:
    """(total ε, sensitivity of a detailed histogram) of a pure-DP geometric NoisyHierarchy."""
    from hierarchy.budget import Budget
    prov = noisy.provenance
    try:
        budget = Budget.from_dict(prov["budget"])
    except (KeyError, TypeError, HierarchyError):
        return None
    if budget.kind != "pure" or prov.get("mechanism", {}).get("name") != "geometric":
        return None
    return float(budget.total), 2.0 if budget.neighbours == "change" else 1.0


#: The post-processors :func:`reference_results` runs by default, in this order: registered
#: names (:mod:`postproc.methods`), ``NAME+clip`` for a result with its negative cells set to 0,
#: and ``clip`` for ``noisy+clip`` (the clipped detailed measurements).
DEFAULT_COMPARISON = ("clip", "hay", "hay+clip", "topdown")


def reference_results(noisy: NoisyHierarchy, truth: Hierarchy, *,
                      methods: Sequence[str] | None = None,
                      results: Mapping[str, Any] | None = None, spec: Any = None,
                      rng: Any = None) -> dict[str, Any]:
    """The results of the reference analysis — the raw measurements, registered post-processors
    on them and bottom-up with the same budget — by name, for :func:`evaluate` to compare.

    In order:

    ``noisy``
        The raw measurements (unmeasured queries summed from the finest measured one).
    each of ``methods``
        A registered post-processor (:func:`postproc.methods.postprocess`) run on ``noisy``,
        with ``spec`` if it keeps invariants and without otherwise (see
        :func:`postproc.methods.registry.method_spec`); ``NAME+clip`` is its result with
        negative cells set to 0, and ``clip`` is ``noisy+clip``. By default
        (:data:`DEFAULT_COMPARISON`): ``clip``, ``hay``, ``hay+clip`` and ``topdown`` — the last
        only when a TopDown result or a ``spec`` is given — each left out if it does not apply
        to these measurements.
    ``bottom_up``, ``bottom_up+calibrated``
        Geometric noise on the bottom level's detailed cells with the *same total ε* (a new
        measurement of ``truth`` drawn from ``rng``: a measurement strategy, not a
        post-processor of ``noisy``), then calibrated to the deepest published ``tot``; only
        for a pure-DP geometric budget.

    ``postproc evaluate --compare`` evaluates them beside a run's own result
    (:func:`postproc.apps.runs.directories.evaluate_run`); to compare registered methods, use
    :func:`postproc.evaluation.compare.compare_methods`.

    Parameters
    ----------
    noisy : NoisyHierarchy
    truth : Hierarchy
    methods : sequence of str, optional
        Post-processors to run (default :data:`DEFAULT_COMPARISON`). One named here that does
        not apply is an error.
    results : mapping name → Result, optional
        Results of registered methods on ``noisy`` made already (e.g. a run's), used instead of
        running those methods; a name not among ``methods`` is added after them.
    spec : Spec, optional
        Invariants and constraints for the methods that keep them.
    rng : None, int, numpy.random.Generator or Randomness
        Bottom-up's noise (child stream 0) and each randomized method's draws
        (:func:`postproc.methods.registry.method_rng`).

    Returns
    -------
    dict of str to result

    Raises
    ------
    PostprocError
        An unknown method, or a named one that refuses these measurements.

    Examples
    --------
    >>> from hierarchy.synth import synthesize_1940
    >>> from hierarchy.tabulation import tabulate
    >>> from hierarchy.measurement import measure
    >>> from hierarchy.budget import Budget
    >>> from hierarchy.queries import e2e_workload
    >>> from hierarchy.schema import E2E_1940
    >>> levels = ["nation", "state"]
    >>> truth = tabulate(synthesize_1940(5_000, seed=1).persons, schema=E2E_1940, levels=levels)
    >>> noisy = measure(truth, e2e_workload(E2E_1940), Budget.e2e(1, levels), rng=2,
    ...                 publish={"tot": levels})
    >>> list(reference_results(noisy, truth, rng=0))
    ['noisy', 'clip', 'hay', 'hay+clip', 'bottom_up', 'bottom_up+calibrated']
    >>> made = reference_results(noisy, truth, methods=["rake", "least_squares+clip"], rng=0)
    >>> table = evaluate(made, truth, queries=["total"], epl_method="published")
    >>> list(dict.fromkeys(table["method"]))
    ['noisy', 'rake', 'least_squares+clip', 'bottom_up', 'bottom_up+calibrated']
    """
    from hierarchy.randomness import as_randomness
    from postproc.methods import postprocess
    from postproc.methods.registry import method_rng, method_spec

    rnd = as_randomness(rng)
    made: dict[str, Any] = dict(results or {})
    results = {"noisy": noisy}          # what is compared, in order (``made``: by base name)
    names = list(DEFAULT_COMPARISON if methods is None else methods)
    names += [name for name in made if name not in names]
    for name in names:
        base, _, suffix = ("noisy+clip" if name == "clip" else name).partition("+")
        if suffix not in ("", "clip"):
            raise PostprocError(f"{name!r}: a method is a registered name, optionally followed "
                                f"by '+clip'")
        if base not in made:
            if methods is None and base == "topdown" and spec is None:
                continue                         # TopDown only with its spec or its result
            try:
                made[base] = postprocess(noisy, base, method_spec(base, spec),
                                         rng=method_rng(rnd, base))
            except PostprocError:
                if methods is not None:
                    raise
                continue                         # it does not apply to these measurements
        results[name] = clip_negative(made[base]) if suffix else made[base]
    budget = _e2e_budget(noisy)
    if budget is not None:
        epsilon, sensitivity = budget
        results["bottom_up"] = bottom_up(truth, epsilon, rnd.child(0), sensitivity=sensitivity,
                                         workload=noisy.workload)
        published = [lv for lv in noisy.levels if "tot" in noisy.invariants.get(lv, {})]
        if published:
            deepest = max(published, key=noisy.geography.level_index)
            results["bottom_up+calibrated"] = calibrate_to_totals(
                results["bottom_up"], deepest, noisy.invariant(deepest, "tot"))
    return results


def compare_postprocessors(noisy: NoisyHierarchy, truth: Hierarchy, *,
                           methods: Sequence[str] | None = None, topdown: Any = None,
                           results: Mapping[str, Any] | None = None, spec: Any = None,
                           rng: Any = None, **options: Any) -> pd.DataFrame:
    """Deprecated: :func:`evaluate` of :func:`reference_results` gives the same numbers (to run
    and compare registered methods, use :func:`postproc.evaluation.compare.compare_methods`).
    Its label differs only where measurements in simulation mode meet draws in release mode:
    :func:`evaluate` labels by all its sources, release if any is; this labelled by the
    measurements (``label_table(table, randomness_of(noisy))`` does so).

    ``topdown`` is short for ``results={"topdown": topdown}``; ``rng`` draws the reference
    results as :func:`reference_results` says and the EPL intervals from its child stream 1;
    ``options`` go to :func:`evaluate`, with ``spec``; the table is labelled with the randomness
    of ``noisy`` (bottom-up's own noise does not change whose truth the errors are computed
    against).

    Examples
    --------
    >>> import warnings
    >>> from hierarchy.randomness import as_randomness
    >>> from postproc.gate import randomness_of
    >>> from hierarchy.synth import synthesize_1940
    >>> from hierarchy.tabulation import tabulate
    >>> from hierarchy.measurement import measure
    >>> from hierarchy.budget import Budget
    >>> from hierarchy.queries import e2e_workload
    >>> from hierarchy.schema import E2E_1940
    >>> levels = ["nation", "state"]
    >>> truth = tabulate(synthesize_1940(5_000, seed=1).persons, schema=E2E_1940, levels=levels)
    >>> noisy = measure(truth, e2e_workload(E2E_1940), Budget.e2e(1, levels), rng=2)
    >>> with warnings.catch_warnings():
    ...     warnings.simplefilter("ignore", DeprecationWarning)
    ...     old = compare_postprocessors(noisy, truth, methods=["hay"], rng=4, queries=["total"])
    >>> rnd = as_randomness(4)
    >>> new = label_table(evaluate(reference_results(noisy, truth, methods=["hay"], rng=rnd),
    ...                            truth, queries=["total"], rng=rnd.child(1)),
    ...                   randomness_of(noisy))
    >>> old.equals(new)
    True
    """
    from hierarchy.randomness import as_randomness

    warnings.warn("postproc.evaluation.evaluate.compare_postprocessors is deprecated: evaluate("
                  "reference_results(noisy, truth, ...), truth, ...) gives the same numbers; "
                  "compare_methods runs and compares registered methods", DeprecationWarning,
                  stacklevel=2)
    rnd = as_randomness(rng)
    made = {**(results or {}), **({"topdown": topdown} if topdown is not None else {})}
    table = evaluate(reference_results(noisy, truth, methods=methods, results=made, spec=spec,
                                       rng=rnd), truth, spec=spec, rng=rnd.child(1), **options)
    return label_table(table, randomness_of(noisy))




def json_ready(value: Any) -> Any:
    """A table's cell as JSON holds it: numpy numbers as Python ones, a non-finite number as
    ``None`` (``null``).

    Examples
    --------
    >>> [json_ready(v) for v in (np.int64(3), np.float64("inf"), np.bool_(True), "a")]
    [3, None, True, 'a']
    """
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, (float, np.floating)):
        return float(value) if math.isfinite(value) else None
    return value


def to_json(table: pd.DataFrame) -> dict[str, Any]:
    """The nested JSON form of an evaluation: level → query → metrics (→ per method first).

    Non-finite numbers become ``None`` (``null``): an undefined EPL (all errors zero, e.g. an
    invariant level) is ``null`` with its ``epl_reason``.

    Parameters
    ----------
    table : pandas.DataFrame
        From :func:`evaluate` (keyed by method first for several results).

    Returns
    -------
    dict

    Examples
    --------
    >>> row = {"level": "state", "query": "total", "mae": 0.0, "epl": float("inf"),
    ...        "epl_reason": "all errors equal 0"}
    >>> to_json(pd.DataFrame([row]))
    {'state': {'total': {'mae': 0.0, 'epl': None, 'epl_reason': 'all errors equal 0'}}}
    """
    out: dict[str, Any] = {}
    keys = ["method", "level", "query"] if "method" in table.columns else ["level", "query"]
    for record in table.to_dict(orient="records"):
        node = out
        for key in keys[:-1]:
            node = node.setdefault(str(record[key]), {})
        node[str(record[keys[-1]])] = {k: json_ready(v) for k, v in record.items()
                                       if k not in keys}
    return out


def pivot(table: pd.DataFrame, value: str = "mae") -> pd.DataFrame:
    """A wide view of a comparison: rows ``(level, query)``, one column per method.

    Parameters
    ----------
    table : pandas.DataFrame
        From :func:`evaluate` of several results.
    value : str
        The column to spread (``mae``, ``rmse``, ``epl``, …).

    Returns
    -------
    pandas.DataFrame

    Examples
    --------
    >>> t = pd.DataFrame({"method": ["a", "b"], "level": ["x", "x"], "query": ["total"] * 2,
    ...                   "mae": [1.0, 2.0]})
    >>> pivot(t).to_dict(orient="records")
    [{'level': 'x', 'query': 'total', 'a': 1.0, 'b': 2.0}]
    """
    methods = list(dict.fromkeys(table["method"]))
    wide = table.pivot_table(index=["level", "query"], columns="method", values=value,
                             sort=False, aggfunc="first")
    wide = wide.reindex(columns=methods).reset_index()
    wide.columns.name = None
    return wide


def write_evaluation(table: pd.DataFrame, directory: str | Path, *, stem: str = "evaluation",
                     confidential: bool = False) -> list[Path]:
    """Write an evaluation (:func:`evaluate`'s table, of one result or several) as
    ``<stem>.csv`` and ``<stem>.json`` (:func:`to_json`'s form), atomically, each row with the
    table's randomness label (a ``randomness`` column and field).

    ``postproc evaluate --save`` writes into the run's ``confidential/`` folder. A table of a
    release-mode measurement (or one with no label) is written only into a ``confidential/``
    folder, or with ``confidential=True``, and carries a CONFIDENTIAL label then
    (:func:`postproc.gate.table_gate`).

    Parameters
    ----------
    table : pandas.DataFrame
    directory : str or Path
    stem : str
    confidential : bool

    Returns
    -------
    list of Path

    Raises
    ------
    PostprocError
        A release-mode or unlabelled table outside ``confidential/`` without ``confidential``.

    Examples
    --------
    >>> import tempfile, json
    >>> truth = TreeCounts.from_leaves(np.arange(16) % 7, 4)
    >>> table = evaluate(truth, truth, rng=0)           # no randomness label: confidential
    >>> write_evaluation(table, tempfile.mkdtemp())
    Traceback (most recent call last):
    ...
    postproc.errors.PostprocError: evaluation.csv carries no randomness label ...
    >>> csv, js = write_evaluation(table, Path(tempfile.mkdtemp()) / "confidential")
    >>> json.loads(js.read_text())["level 1"]["total"]["randomness"][:22]
    'unknown: CONFIDENTIAL '
    """
    from hierarchy.io.storage import atomic_path
    from postproc.gate import labelled, write_csv

    directory = Path(directory)
    csv = write_csv(table, directory / f"{stem}.csv", confidential=confidential)
    path = directory / f"{stem}.json"
    with atomic_path(path) as tmp:
        tmp.write_text(json.dumps(to_json(labelled(table)), indent=2, allow_nan=False) + "\n")
    return [csv, path]
