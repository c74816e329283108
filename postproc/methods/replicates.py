"""Approximate Monte Carlo intervals for the counts of any post-processor
(``docs/replicate_intervals.md``).

The released result is treated as if it were the truth: it is measured again, ``R`` times, with
the workload, budget and mechanism of the original measurements (:func:`remeasure`), the same
post-processor is run on each replicate with the same spec and options, and the spread of the
replicates' answers around the released answer gives each count a standard error and an
interval (:func:`replicate_intervals`) — the Census Bureau's "approximate Monte Carlo" idea.

Nothing confidential is touched: the released result and the published invariants are public.
The intervals are **approximate**: TopDown is nonlinear (nonnegativity and rounding bias counts
near 0), and the replicates are centred on the released result rather than on the truth, so
their spread describes the method's error at the wrong point; the coverage measured on
synthetic data is in the docs page.

The budget and mechanism are read from the measurements' provenance (``noisy.provenance``:
``budget`` is :meth:`hierarchy.budget.Budget.to_dict`, ``mechanism`` is
:meth:`hierarchy.mechanisms.Mechanism.to_dict`, as :func:`hierarchy.measurement.measure` and
:meth:`hierarchy.noisy.NoisyHierarchy.save` record them) and checked against the variances the
measurements carry. Measurements made outside the toolkit
(:meth:`hierarchy.noisy.NoisyHierarchy.from_measurements`) record neither, unless given them in
``provenance=``: they cannot be re-measured.
"""

from __future__ import annotations

import json
import sys
from statistics import NormalDist
from typing import Any, Mapping, NamedTuple

import numpy as np
import pandas as pd

from hierarchy.budget import Budget
from hierarchy.errors import ConfidentialDataError, DappError
from hierarchy.frames import resolve_query
from hierarchy.histograms import Hierarchy
from hierarchy.measurement import measure_level, measurement_provenance
from hierarchy.mechanisms import Mechanism
from hierarchy.noisy import Measurement, NoisyHierarchy
from hierarchy.randomness import as_randomness
from invariants.spec import Spec
from postproc.errors import PostprocError
from postproc.methods.registry import get, method_rng, postprocess
from postproc.result import Result

__all__ = ["remeasure", "replicate_intervals", "measurement_design", "check_same_model"]

#: What :func:`replicate_intervals`' table says of itself (``attrs["note"]``).
NOTE = ("approximate Monte Carlo intervals: the released result was re-measured and "
        "post-processed again as if it were the truth; their coverage is not exact "
        "(docs/replicate_intervals.md)")


def remeasure(result: Result, noisy: NoisyHierarchy, rng: Any = None, *,
              spec: Spec | None = None) -> NoisyHierarchy:
    """Measure a released result again as if it were the truth: one replicate of ``noisy``.

    Every query ``noisy`` measured at a level is answered on the result's histograms of that
    level with fresh noise of the original law — the budget and mechanism recorded in
    ``noisy.provenance``, whose noise variances must be those ``noisy`` carries. The published
    invariants are kept as they are (they are public); an answer that was not drawn originally
    (it counts only cells the invariants fix at 0) is not drawn again. Query ``q`` of level
    ``l`` draws from the stream ``rng.child(l, q)``, as :func:`hierarchy.measurement.measure`
    does (a replicate's noise need not be keyed by geography: its law is the same).

    Parameters
    ----------
    result : Result
        A complete released result on ``noisy``'s schema and geography (every level).
    noisy : NoisyHierarchy
        The measurements the result was made from.
    rng : None, int, numpy Generator or Randomness
        ``None``: the secure source (release mode); an int: a seeded simulation. The released
        result is public, so the choice protects nothing here; it is recorded as everywhere.
    spec : Spec, optional
        The spec the post-processor keeps: the result is checked against its constraints and
        the check is recorded (``provenance["spec_checked"]``), as ``measure(..., spec=)`` does
        for confidential data, so that TopDown accepts the replicate.

    Returns
    -------
    NoisyHierarchy
        Provenance: as :func:`hierarchy.measurement.measure` records it, with ``remeasured``
        (the result's method and the note that this is a replicate of a released result).

    Raises
    ------
    PostprocError
        A partial result, a result of another schema or geography, a provenance without budget
        or mechanism (measurements made outside the toolkit) or with ones that do not give the
        measurements' variances, or a result that breaks ``spec``.

    Examples
    --------
    >>> from hierarchy import E2E_1940, Budget, e2e_workload, measure, synthesize_1940, tabulate
    >>> from invariants import Spec
    >>> levels = ["nation", "state"]
    >>> data = synthesize_1940(1_000, seed=1)
    >>> truth = tabulate(data.persons, schema=E2E_1940, levels=levels, units=data.units)
    >>> spec = Spec.e2e(levels)
    >>> noisy = measure(truth, e2e_workload(E2E_1940), Budget.e2e(1, levels), rng=2, spec=spec)
    >>> result = postprocess(noisy, "topdown", spec)
    >>> again = remeasure(result, noisy, rng=3, spec=spec)
    >>> again.queries("state") == noisy.queries("state")
    True
    >>> again.provenance["remeasured"]["method"], again.provenance["randomness"]["mode"]
    ('topdown', 'simulation')
    >>> bool((again.get("state", "detailed").variances == noisy.get("state", "detailed")
    ...       .variances).all())
    True
    """
    check_same_model(result, noisy)
    budget, mechanism = measurement_design(noisy)
    checked = _check_result(result, noisy, spec)
    return _draw(result, noisy, budget, mechanism, as_randomness(rng), checked)


def replicate_intervals(result: Result, noisy: NoisyHierarchy, method: str = "topdown",
                        spec: Spec | None = None, *, level: str, query: str = "total",
                        replicates: int = 20, interval: float = 0.9, rng: Any = None,
                        options: Mapping[str, Any] | None = None,
                        progress: bool = False) -> pd.DataFrame:
    """Approximate Monte Carlo intervals for the answers of ``query`` at ``level``.

    The released ``result`` is re-measured ``replicates`` times (:func:`remeasure`) and
    ``method`` is run on each replicate with ``spec`` and ``options``; each answer's standard
    error ``se`` is the root mean square of the replicates' deviations from the released
    answer, and its interval is ``estimate ± z·se`` with ``z`` the standard normal quantile of
    the two-sided ``interval`` (1.645 for 0.9).

    Deviations from the released answer, not the replicates' mean, so that ``se`` counts the
    method's bias (``replicate_mean`` shows it); ``estimate ± z·se``, not replicate quantiles,
    which 20 replicates pin down badly (an interval may reach below 0: it is not clipped).
    Why, and why the coverage is not exact: ``docs/replicate_intervals.md``. Cost:
    ``replicates`` full runs of ``method`` and as many measurements.

    Parameters
    ----------
    result : Result
        The released result: complete, on ``noisy``'s schema and geography, made by ``method``.
    noisy : NoisyHierarchy
        The measurements it was made from; their provenance must record the budget and the
        mechanism (:func:`measurement_design`).
    method : str
        The registered post-processor that made ``result`` (``result.method``).
    spec : Spec, optional
        The spec the result was made with; default: the one its provenance records (TopDown
        records it), or none. A spec that differs from the recorded one is refused.
    level, query : str
        The level whose units get intervals; a workload query name or a query expression
        (``"total"``, the default, or ``"marginal(votingage)"``).
    replicates, interval : int, float
        How many replicates (at least 2), and the nominal two-sided level, in (0, 1).
    rng : None, int, numpy Generator or Randomness
        ``None``: the secure source; an int: a seeded simulation. Replicate ``r`` draws from
        ``rng.child(r)`` (a randomized method from ``method_rng(rng.child(r), method)``).
    options : mapping, optional
        The method's options the result was made with (not recorded in one form: unchecked).
    progress : bool
        A progress bar over the replicates (tqdm, on stderr).

    Returns
    -------
    pandas.DataFrame
        One row per unit of ``level`` and answer of ``query``: the level's geocode (a column
        named as the level), ``answer`` (the answer's labels, or the query's name for a single
        answer), ``estimate`` (the released answer), ``se``, ``lower``, ``upper`` and
        ``replicate_mean``. ``attrs``: ``method``, ``level``, ``query``, ``replicates``,
        ``interval``, ``z``, ``interval_kind``, ``approximate`` (True), ``note``, ``spec``
        (where it came from), ``options``, ``randomness`` (the replicates', with its label)
        and ``measurements_randomness`` (the released result's).

    Raises
    ------
    PostprocError
        ``replicates`` < 2, ``interval`` outside (0, 1), a result made by another method or
        with another spec, a partial result or one of another schema or geography, or
        measurements that cannot be re-measured (:func:`remeasure`).
    HierarchyError
        An unknown level or query.

    Examples
    --------
    >>> from hierarchy import E2E_1940, Budget, e2e_workload, measure, synthesize_1940, tabulate
    >>> from invariants import Spec
    >>> levels = ["nation", "state"]
    >>> data = synthesize_1940(1_000, seed=1)
    >>> truth = tabulate(data.persons, schema=E2E_1940, levels=levels, units=data.units)
    >>> spec = Spec.e2e(levels)
    >>> noisy = measure(truth, e2e_workload(E2E_1940), Budget.e2e(1, levels), rng=2, spec=spec)
    >>> result = postprocess(noisy, "topdown", spec)
    >>> table = replicate_intervals(result, noisy, "topdown", spec, level="state",
    ...                             query="marginal(votingage)", replicates=3, rng=4)
    >>> list(table.columns)
    ['state', 'answer', 'estimate', 'se', 'lower', 'upper', 'replicate_mean']
    >>> len(table) == 49 * 2, sorted(set(table["answer"]))
    (True, ['18+', 'under 18'])
    >>> table.attrs["approximate"], table.attrs["randomness"]["mode"]
    (True, 'simulation')
    >>> replicate_intervals(result, noisy, level="state", replicates=1)
    Traceback (most recent call last):
    ...
    postproc.errors.PostprocError: replicates must be an integer >= 2 (the spread of one
    replicate is not defined), not 1
    """
    _check_counts(replicates, interval)
    check_same_model(result, noisy)
    li = noisy.geography.level_index(level)
    q = resolve_query(query, noisy.schema, noisy.workload)
    if result.method != method:
        raise PostprocError(f"the result was made by {result.method!r}, not {method!r}: "
                            f"replicates must re-run the method that made it (pass "
                            f"method={result.method!r})")
    get(method)                                     # an unknown method fails before any run
    spec, spec_source = _spec_of(result, spec)
    budget, mechanism = measurement_design(noisy)
    rnd = as_randomness(rng)
    rerun = _Rerun(result, noisy, method, spec, dict(options or {}), budget, mechanism,
                   _check_result(result, noisy, spec))
    estimate = result.answers(li, q)
    draws = np.empty((replicates,) + estimate.shape, dtype=np.float64)
    bar = _progress(replicates, method, progress)
    try:
        for r in range(replicates):
            draws[r] = rerun(rnd.child(r)).answers(li, q)
            bar.update(1)
    finally:
        bar.close()
    z = NormalDist().inv_cdf(0.5 + interval / 2)
    table = _table(noisy, li, q, estimate, draws, z)
    table.attrs.update({
        "method": method, "level": noisy.levels[li], "query": q.name, "replicates": replicates,
        "interval": interval, "z": z, "interval_kind": "estimate ± z·se (normal)",
        "approximate": True, "note": NOTE, "spec": spec_source, "options": rerun.options,
        "randomness": rnd.provenance(), "measurements_randomness": result.randomness})
    return table


class _Rerun(NamedTuple):
    """One replicate's work: re-measure the released result (with the design read once) and
    run the method on it."""

    result: Result
    noisy: NoisyHierarchy
    method: str
    spec: Spec | None
    options: dict[str, Any]
    budget: Budget
    mechanism: Mechanism
    checked: Spec | None

    def __call__(self, rnd: Any) -> Result:
        again = _draw(self.result, self.noisy, self.budget, self.mechanism, rnd, self.checked)
        return postprocess(again, self.method, self.spec, rng=method_rng(rnd, self.method),
                           **self.options)


def check_same_model(result: Result, noisy: NoisyHierarchy) -> None:
    """Raise unless ``result`` is complete and on ``noisy``'s schema and geography.

    Examples
    --------
    >>> from hierarchy.geography import Geography
    >>> from hierarchy.queries import Workload, detailed
    >>> from hierarchy.schema import Attribute, Schema
    >>> schema = Schema((Attribute("sex", ("male", "female")),))
    >>> geo = Geography(("nation", "state"), (["US"], ["A", "B"]), ([-1], [0, 0]))
    >>> noisy = NoisyHierarchy(schema, geo, Workload((detailed(schema),)), {})
    >>> other = Geography(("nation", "state"), (["US"], ["A", "C"]), ([-1], [0, 0]))
    >>> result = Result("mine", schema, other, noisy.workload,
    ...                 (np.array([[3, 4]]), np.array([[1, 4], [2, 0]])))
    >>> check_same_model(result, noisy)
    Traceback (most recent call last):
    ...
    postproc.errors.PostprocError: the result's geography differs from the measurements' (at
    level 'state': other geocodes or parents); pass the measurements the result was made from
    """
    if result.schema != noisy.schema:
        raise PostprocError(f"the result's schema {list(result.schema.names)} differs from the "
                            f"measurements' {list(noisy.schema.names)}; pass the measurements "
                            f"the result was made from")
    if not result.geography.equals(noisy.geography):
        mine, theirs = result.geography, noisy.geography
        where = (f"levels {list(mine.levels)} against {list(theirs.levels)}"
                 if mine.levels != theirs.levels else
                 "at level " + next(repr(lv) for i, lv in enumerate(mine.levels)
                                    if not (np.array_equal(mine.geocodes[i], theirs.geocodes[i])
                                            and np.array_equal(mine.parents[i],
                                                               theirs.parents[i])))
                 + ": other geocodes or parents")
        raise PostprocError(f"the result's geography differs from the measurements' ({where}); "
                            f"pass the measurements the result was made from")
    if len(result.histograms) != noisy.geography.depth:
        raise PostprocError(f"the result is partial: it has {len(result.histograms)} of the "
                            f"{noisy.geography.depth} levels {list(noisy.levels)}; re-measuring "
                            f"needs every level")


def measurement_design(noisy: NoisyHierarchy) -> tuple[Budget, Mechanism]:
    """The budget and mechanism of ``noisy``'s measurements, read from its provenance and
    checked against the variances it carries.

    Raises
    ------
    PostprocError
        No budget or mechanism recorded (measurements made outside the toolkit), a record that
        cannot be read, or one that does not describe these measurements (other levels or
        queries, or other variances).

    Examples
    --------
    >>> from hierarchy import E2E_1940, Budget, e2e_workload, measure, synthesize_1940, tabulate
    >>> levels = ["nation", "state"]
    >>> truth = tabulate(synthesize_1940(500, seed=1).persons, schema=E2E_1940, levels=levels)
    >>> noisy = measure(truth, e2e_workload(E2E_1940), Budget.e2e(1, levels), rng=2)
    >>> budget, mechanism = measurement_design(noisy)
    >>> str(budget.total), mechanism.name
    ('1', 'geometric')
    >>> elsewhere = NoisyHierarchy.from_measurements(
    ...     noisy.to_measurements(), schema=noisy.schema, geography=noisy.geography,
    ...     workload=noisy.workload)
    >>> measurement_design(elsewhere)
    Traceback (most recent call last):
    ...
    postproc.errors.PostprocError: cannot re-measure: the measurements' provenance records no
    budget and no mechanism ...
    """
    provenance = noisy.provenance
    missing = [key for key in ("budget", "mechanism") if not provenance.get(key)]
    if missing:
        raise PostprocError(
            f"cannot re-measure: the measurements' provenance records no "
            f"{' and no '.join(missing)} (measurements made outside this toolkit, "
            f"NoisyHierarchy.from_measurements, record neither): the noise law cannot be "
            f"recovered from the variances alone; give from_measurements "
            f"provenance={{'budget': budget.to_dict(), 'mechanism': mechanism.to_dict()}}")
    try:
        budget = Budget.from_dict(provenance["budget"])
        mechanism = Mechanism.from_dict(dict(provenance["mechanism"]))
    except (DappError, TypeError, AttributeError) as exc:
        raise PostprocError(f"cannot re-measure: the measurements' provenance records a budget "
                            f"or mechanism that cannot be read ({exc})") from None
    _check_design(noisy, budget, mechanism)
    return budget, mechanism


def _check_design(noisy: NoisyHierarchy, budget: Budget, mechanism: Mechanism) -> None:
    """Raise unless ``budget`` measures exactly ``noisy``'s levels and queries, and gives each
    measurement the variance it carries."""
    measured = [lv for lv in noisy.levels if noisy.queries(lv)]
    if sorted(measured) != sorted(budget.levels):
        raise PostprocError(f"cannot re-measure: the recorded budget measures the levels "
                            f"{list(budget.levels)}, the measurements hold {measured}")
    for level in measured:
        if sorted(budget.queries(level)) != sorted(noisy.queries(level)):
            raise PostprocError(f"cannot re-measure: at level {level!r} the recorded budget "
                                f"measures {list(budget.queries(level))}, the measurements "
                                f"hold {list(noisy.queries(level))}")
        for name in budget.queries(level):
            try:
                parameter = budget.noise_parameter(level, noisy.workload[name], mechanism)
            except DappError as exc:
                raise PostprocError(f"cannot re-measure: {exc}") from None
            want = float(mechanism.variance(parameter))
            have = noisy.get(level, name).variances
            flat = have.flat[0] if have.size and have.strides == (0,) * have.ndim else have
            if not np.allclose(flat, want, rtol=1e-9, atol=0):
                raise PostprocError(
                    f"cannot re-measure: the recorded budget and {mechanism.name} mechanism give "
                    f"{name!r} at level {level!r} the noise variance {want:g}, the measurements "
                    f"carry {float(np.mean(have)):g}; the provenance does not describe them")


def _check_counts(replicates: Any, interval: Any) -> None:
    if isinstance(replicates, bool) or not isinstance(replicates, (int, np.integer)) \
            or replicates < 2:
        raise PostprocError(f"replicates must be an integer >= 2 (the spread of one replicate "
                            f"is not defined), not {replicates!r}")
    if isinstance(interval, bool) or not isinstance(interval, (int, float, np.floating)) \
            or not 0 < interval < 1:
        raise PostprocError(f"interval must be a probability strictly between 0 and 1 (0.9 for "
                            f"90 % intervals), not {interval!r}")


def _as_json(value: Any) -> Any:
    """``value`` as it reads back from JSON (tuples become lists)."""
    return json.loads(json.dumps(value))


def _spec_of(result: Result, spec: Spec | None) -> tuple[Spec | None, str | None]:
    """The spec to re-run with, and where it came from: the one given (which must be the one
    the result records, when it records one), else the one recorded, else none."""
    recorded = result.provenance.spec
    if spec is not None:
        if recorded is not None and _as_json(spec.to_dict()) != _as_json(recorded):
            raise PostprocError(f"the spec given differs from the one the result was made with "
                                f"(its provenance records {recorded}); replicates must keep the "
                                f"same spec: leave spec= out to use the recorded one")
        return spec, "given"
    if recorded and (recorded.get("invariant") or recorded.get("constraint")):
        try:
            return Spec.from_dict(recorded), "the result's provenance"
        except DappError as exc:
            raise PostprocError(f"the spec the result records cannot be read ({exc}); pass "
                                f"it as spec=") from None
    return None, None


def _check_result(result: Result, noisy: NoisyHierarchy, spec: Spec | None) -> Spec | None:
    """``spec`` after checking the released result against its constraints (with the
    published invariants), or None without constraints to check."""
    if spec is None or not spec.constraints:
        return None
    released = Hierarchy(result.schema, result.geography, result.histograms)
    try:
        spec.check_data(released, noisy.invariants)
    except ConfidentialDataError as exc:     # public data here: the full message may show
        raise PostprocError(f"the released result breaks the spec, so it cannot stand for the "
                            f"truth of a replicate; was it made with this spec? ({exc})") from None
    return spec


def _draw(result: Result, noisy: NoisyHierarchy, budget: Budget, mechanism: Mechanism,
          rnd: Any, checked: Spec | None) -> NoisyHierarchy:
    """One replicate: :func:`hierarchy.measurement.measure_level` of the result's histograms
    at every measured level, the answers not drawn originally set back to 0."""
    measurements: dict[str, dict[str, Measurement]] = {}
    parameters: dict[str, Any] = {}
    active = []
    for li, level in enumerate(noisy.levels):
        if level not in budget.levels:
            continue
        drawn, parameters[level] = measure_level(result.histograms[li], level, li,
                                                 noisy.workload, budget, mechanism, rnd)
        for name, m in drawn.items():
            mask = noisy.get(level, name).drawn
            if mask is not None:
                m = Measurement(name, np.where(mask, m.values, 0), m.variances, mask)
                active.append(level)
            drawn[name] = m
        measurements[level] = drawn
    published = dict(noisy.provenance.get("invariants_published", {}))
    provenance = measurement_provenance(budget, mechanism, rnd, parameters, published,
                                        active_levels=list(dict.fromkeys(active)))
    provenance["remeasured"] = {
        "method": result.method,
        "note": "a replicate of a released result: its histograms measured again as if they "
                "were the truth (nothing confidential)"}
    if checked is not None:
        provenance["spec_checked"] = checked.to_dict()
    return NoisyHierarchy(noisy.schema, noisy.geography, noisy.workload, measurements,
                          noisy.invariants, provenance)


def _table(noisy: NoisyHierarchy, li: int, query: Any, estimate: np.ndarray, draws: np.ndarray,
           z: float) -> pd.DataFrame:
    """The intervals' table: one row per unit and answer."""
    se = np.sqrt(np.mean((draws - estimate) ** 2, axis=0))
    units, answers = estimate.shape
    labels = [", ".join(label) if label else query.name for label in query.answer_labels]
    return pd.DataFrame({
        noisy.levels[li]: np.repeat(noisy.geography.geocodes[li], answers),
        "answer": np.tile(np.asarray(labels, dtype=object), units),
        "estimate": estimate.ravel(), "se": se.ravel(),
        "lower": (estimate - z * se).ravel(), "upper": (estimate + z * se).ravel(),
        "replicate_mean": draws.mean(axis=0).ravel()})


def _progress(replicates: int, method: str, progress: bool) -> Any:
    from tqdm.auto import tqdm

    return tqdm(total=replicates, disable=not progress, file=sys.stderr, unit="replicate",
                desc=f"replicates of {method}", leave=False)
