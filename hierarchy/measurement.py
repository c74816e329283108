"""Measurement: exact hierarchy + workload + budget + mechanism → :class:`NoisyHierarchy`."""

from __future__ import annotations

import hashlib
from datetime import datetime, timezone
from typing import Any, Mapping, NamedTuple, Sequence

import numpy as np

from hierarchy.budget import Budget
from hierarchy.errors import HierarchyError
from hierarchy.histograms import Hierarchy
from hierarchy.noisy import Measurement, NoisyHierarchy
from hierarchy.published_queries import published_queries, spec_queries
from hierarchy.queries import Workload, sparse_copy
from hierarchy.randomness import as_randomness

__all__ = ["measure", "measure_level", "ancestor_offsets", "stable_key", "published_statistics",
           "spec_statistics", "spec_queries", "published_queries", "persons_per_unit",
           "units_by_type", "PUBLISHABLE", "KEYED_STREAM", "measurement_provenance",
           "exact_answers"]


def persons_per_unit(truth: Hierarchy, level: str) -> np.ndarray:
    """The exact number of persons of each unit of ``level`` (the ``tot`` statistic).

    Examples
    --------
    >>> from hierarchy.schema import E2E_1940
    >>> from hierarchy.tabulation import tabulate
    >>> persons = pd.DataFrame({"state": ["01", "02", "02"], "hhgq": [0, 0, 3],
    ...                         "votingage": [1, 1, 0], "hispanic": [0, 0, 0],
    ...                         "cenrace": [0, 1, 2]})
    >>> truth = tabulate(persons, schema=E2E_1940, levels=["nation", "state"])
    >>> persons_per_unit(truth, "state").tolist()
    [1, 2]
    """
    return np.asarray(truth.totals(level), dtype=np.int64)


def units_by_type(truth: Hierarchy, level: str) -> np.ndarray:
    """The exact numbers of occupied housing units and group-quarters facilities of each type
    in each unit of ``level`` (the ``gqhh`` statistic), shape (units, types).

    Raises
    ------
    HierarchyError
        If ``truth`` was tabulated without a units table.

    Examples
    --------
    >>> from hierarchy.schema import E2E_1940
    >>> from hierarchy.tabulation import tabulate
    >>> persons = pd.DataFrame({"state": ["01"], "hhgq": [0], "votingage": [1],
    ...                         "hispanic": [0], "cenrace": [0]})
    >>> units_by_type(tabulate(persons, schema=E2E_1940, levels=["nation", "state"]), "state")
    Traceback (most recent call last):
    ...
    hierarchy.errors.HierarchyError: this hierarchy has no units table; tabulate one with
    tabulate(..., units=...)
    """
    return np.array(truth.level_units(level), dtype=np.int64)   # a copy, never the truth


#: Exact statistics that can be published as invariants: name → how it is computed from the
#: truth, ``f(truth, level) → int64 array``. What each means and which invariants and constraints
#: use it is the invariant catalogue's (:mod:`invariants.catalogue`, which reads these functions:
#: ``hierarchy`` never imports ``invariants``).
PUBLISHABLE = {"tot": persons_per_unit, "gqhh": units_by_type}


def published_statistics(truth: Hierarchy, publish: Mapping[str, Sequence[str]], *,
                         queries: Mapping[str, Mapping[str, Any]] | None = None
                         ) -> dict[str, dict[str, np.ndarray]]:
    """Exact statistics to publish as invariants: ``{statistic: [levels]}`` → per-level arrays.

    Only what is asked for is copied: a unit's exact total is confidential unless the user
    declares it invariant.

    Parameters
    ----------
    truth : Hierarchy
        Exact histograms.
    publish : mapping statistic → levels
        Which statistics of :data:`PUBLISHABLE` to publish at which levels (a level name alone
        is one level).
    queries : mapping, optional
        Query invariants (:func:`spec_queries`) whose answers to publish too
        (:func:`published_queries`).

    Returns
    -------
    dict
        ``{level: {statistic: int64 array per unit}}`` (a query invariant's array is units ×
        the answers it holds).

    Raises
    ------
    HierarchyError
        If a statistic is not publishable or a level is not in the geography.

    Examples
    --------
    >>> from hierarchy.schema import E2E_1940
    >>> from hierarchy.synth import synthesize_1940
    >>> from hierarchy.tabulation import tabulate
    >>> data = synthesize_1940(500, seed=1)
    >>> truth = tabulate(data.persons, units=data.units, schema=E2E_1940,
    ...                  levels=["nation", "state"])
    >>> published = published_statistics(truth, {"tot": ["nation"], "gqhh": "state"})
    >>> published["nation"]
    {'tot': array([500])}
    >>> published["state"]["gqhh"].shape     # 49 states × 8 unit types
    (49, 8)
    >>> published_statistics(truth, {"total": "nation"})
    Traceback (most recent call last):
    ...
    hierarchy.errors.HierarchyError: cannot publish 'total'; publishable statistics are ['gqhh',
    'tot']
    """
    out: dict[str, dict[str, np.ndarray]] = {}
    for stat, levels in publish.items():
        if stat not in PUBLISHABLE:
            raise HierarchyError(f"cannot publish {stat!r}; publishable statistics are "
                                 f"{sorted(PUBLISHABLE)}")
        if isinstance(levels, str):
            levels = [levels]
        for lv in levels:
            i = truth.geography.level_index(lv)
            out.setdefault(truth.levels[i], {})[stat] = PUBLISHABLE[stat](truth, lv)
    for level, answers in published_queries(truth, queries or {}).items():
        out.setdefault(level, {}).update(answers)
    return out


def spec_statistics(spec: Any, levels: Sequence[str]) -> dict[str, list[str]]:
    """The exact statistics a spec declares invariant, with their levels: ``measure``'s
    ``publish`` derived from the spec.

    ``hierarchy`` does not import ``invariants``: ``spec`` is any object with a method
    ``invariant_levels(statistic, levels) → levels`` (an :class:`invariants.spec.Spec` has it).

    Parameters
    ----------
    spec : Spec or any object with ``invariant_levels``
    levels : sequence of str
        The geography's levels, root first.

    Returns
    -------
    dict
        Statistic of :data:`PUBLISHABLE` → levels (geography order); statistics at no level are
        left out.

    Raises
    ------
    HierarchyError
        If ``spec`` has no ``invariant_levels`` method.

    Examples
    --------
    >>> from invariants.spec import Spec
    >>> spec_statistics(Spec.e2e(["nation", "state", "county"]), ["nation", "state", "county"])
    {'tot': ['nation', 'state'], 'gqhh': ['county']}
    >>> spec_statistics({"tot": ["nation"]}, ["nation"])
    Traceback (most recent call last):
    ...
    hierarchy.errors.HierarchyError: spec= must be a Spec (an object with
    invariant_levels(statistic, levels)), not dict; pass a mapping of statistics to levels as
    publish=
    """
    at = getattr(spec, "invariant_levels", None)
    if not callable(at):
        raise HierarchyError(f"spec= must be a Spec (an object with invariant_levels(statistic, "
                             f"levels)), not {type(spec).__name__}; pass a mapping of "
                             "statistics to levels as publish=")
    out = {}
    for stat in PUBLISHABLE:
        found = list(at(stat, list(levels)))
        if found:
            out[stat] = found
    return out


def _publish(publish: Mapping[str, Any] | None, spec: Any, truth: Hierarchy,
             workload: Workload) -> tuple[Any, dict[str, list[str]], dict[str, Any]]:
    """The spec with the queries it names by their workload names resolved; ``publish`` with
    every value a list, derived from ``spec`` when not given, and checked to hold everything the
    spec declares invariant; and the spec's query invariants (:func:`spec_queries`)."""
    resolve = getattr(spec, "resolve_queries", None)
    if callable(resolve):
        spec = resolve(workload)
    queries = spec_queries(spec, truth.schema, truth.levels, workload=workload)
    return spec, _statistics(publish, spec, truth.levels), queries


def _statistics(publish: Mapping[str, Any] | None, spec: Any, levels: Sequence[str]
                ) -> dict[str, list[str]]:
    given = None if publish is None else {
        stat: [lv] if isinstance(lv, str) else list(lv) for stat, lv in publish.items()}
    if spec is None:
        return given or {}
    needed = spec_statistics(spec, levels)
    if given is None:
        return needed
    for stat, at in needed.items():
        missing = [lv for lv in at if lv not in given.get(stat, [])]
        if missing:
            raise HierarchyError(
                f"the spec declares {stat!r} invariant at {at} but publish= publishes it at "
                f"{given.get(stat, [])}, without {missing}; leave publish= out (measure derives "
                f"it from spec=) or add {missing} to publish[{stat!r}]")
    return given


def measure(truth: Hierarchy, workload: Workload, budget: Budget, mechanism: Any = "geometric",
            rng: Any = None, *, publish: Mapping[str, Sequence[str]] | None = None,
            spec: Any = None, key_level: str | None = None, active: Mapping[str, Any] | None = None,
            accounted_elsewhere: bool = False) -> NoisyHierarchy:
    """Answer every query of the budget at every level with noise: a :class:`NoisyHierarchy`.

    Parameters
    ----------
    truth : Hierarchy
        Exact histograms (from :func:`hierarchy.tabulation.tabulate`).
    workload : Workload
        Queries that may be measured; the budget says which are measured at which level.
    budget : Budget
        Total budget and its split; its levels and queries are validated against the geography
        and the workload.
    mechanism : str or mechanism object
        ``"geometric"`` (default), ``"discrete_gaussian"``, ``"laplace"`` or ``"gaussian"``.
    rng : None, int, numpy Generator or Randomness
        ``None`` = release mode (cryptographically secure); an int seed = simulation mode
        (reproducible, labelled unsafe in the output's provenance).
    publish : mapping statistic → levels, optional
        Exact statistics to carry along as invariants (see :data:`PUBLISHABLE`). Default: what
        ``spec`` declares invariant (:func:`spec_statistics`), or nothing without a spec. The
        answers of the spec's query invariants are published too (:func:`spec_queries`; recorded
        in ``provenance["query_invariants_published"]``).
    spec : Spec, optional
        The invariants and constraints the post-processor will keep: each invariant is declared
        once, in the spec, and published from it; and the data are checked against the spec's
        constraints *before any noise is drawn* (``spec.check_data``: a structural zero or
        bound the data contradict is refused, as ``postproc run`` refuses it). The
        measurements record the spec they were checked against
        (``provenance["spec_checked"]``), which TopDown and sampling require in release mode
        (:func:`postproc.errors.require_checked_spec`).
    key_level : str, optional
        Key the noise of the levels below this one by their ancestor there: the units below
        each ``key_level`` unit draw from a stream of their own, named by the level and that
        ancestor's geocode (:func:`measure_level`). A part of the geography measured alone
        then gets the same values as in a measurement of the whole, which a run in parts
        (:mod:`postproc.apps.runs.parts`) needs. Default: one stream per level and query.
    active : mapping level → invariants.active.ActiveCells, optional
        Draw, at these levels, only the answers that count an active cell of their unit
        (:func:`measure_level`); every answer elsewhere. Default: every answer everywhere.
    accounted_elsewhere : bool, optional
        ``True``: the caller accounts for the budget, which release mode requires outside a Session.

    Returns
    -------
    NoisyHierarchy

    Raises
    ------
    HierarchyError
        A workload of another schema, a budget that does not fit, floating-point noise in release
        mode, or a ``publish`` that leaves out a statistic the ``spec`` declares invariant
        (naming both).
    ConfidentialDataError
        The data break a constraint of ``spec`` (nothing is drawn).

    Examples
    --------
    >>> from hierarchy.schema import E2E_1940
    >>> from hierarchy.queries import e2e_workload
    >>> from hierarchy.tabulation import tabulate
    >>> persons = pd.DataFrame({"state": ["01", "02"], "hhgq": [0, 0], "votingage": [1, 1],
    ...                         "hispanic": [0, 0], "cenrace": [0, 1]})
    >>> truth = tabulate(persons, schema=E2E_1940, levels=["nation", "state"])
    >>> noisy = measure(truth, e2e_workload(E2E_1940), Budget.e2e(1, ["nation", "state"]),
    ...                 "geometric", rng=42, publish={"tot": ["nation"]})
    >>> noisy.get("state", "va_hisp_race").values.shape
    (2, 24)
    >>> noisy.provenance["randomness"]["safe_for_release"]
    False

    The invariants declared once, in the spec (here the nation's and the states' totals):

    >>> from invariants.spec import Invariant, Spec
    >>> spec = Spec(invariants=(Invariant("tot", ["nation", "state"]),))
    >>> noisy = measure(truth, e2e_workload(E2E_1940), Budget.e2e(1, ["nation", "state"]),
    ...                 rng=42, spec=spec)
    >>> noisy.provenance["invariants_published"], noisy.invariants["state"]["tot"].tolist()
    ({'tot': ['nation', 'state']}, [1, 1])
    >>> noisy.provenance["spec_checked"]["invariant"]
    [{'name': 'tot', 'levels': ['nation', 'state']}]

    A spec the data contradict is refused before any noise is drawn (here: no adult may live
    in a state where both persons are adults):

    >>> from invariants.spec import Constraint
    >>> no_adults = Spec(constraints=(Constraint("no_adults", type="structural_zero",
    ...                                          query="marginal(votingage)", answers=[1]),))
    >>> measure(truth, e2e_workload(E2E_1940), Budget.e2e(1, ["nation", "state"]), rng=42,
    ...         spec=no_adults)
    Traceback (most recent call last):
    ...
    hierarchy.errors.ConfidentialDataError: the confidential data break the spec, ...
    >>> measure(truth, e2e_workload(E2E_1940), Budget.e2e(1, ["nation", "state"]), rng=42,
    ...         spec=spec, publish={"tot": ["nation"]})
    Traceback (most recent call last):
    ...
    hierarchy.errors.HierarchyError: the spec declares 'tot' invariant at ['nation', 'state'] but
    publish= publishes it at ['nation'], without ['state']; leave publish= out (measure derives it
    from spec=) or add ['state'] to publish['tot']
    """
    from hierarchy.mechanisms import get_mechanism

    rnd = _accounted(as_randomness(rng), accounted_elsewhere)     # release: through a Session
    mech = get_mechanism(mechanism) if isinstance(mechanism, str) else mechanism
    _check_inputs(truth, workload, budget, mech, rnd)
    spec, publish, queries = _publish(publish, spec, truth, workload)
    invariants = published_statistics(truth, publish, queries=queries)
    check = getattr(spec, "check_data", None)
    if callable(check):           # before any noise is drawn (hierarchy knows no Spec type)
        check(truth, invariants)
    key_index = None if key_level is None else truth.geography.level_index(key_level)
    measurements, parameters = _measure_levels(truth, workload, budget, mech, rnd, key_index,
                                               active or {})
    provenance = _provenance(truth, budget, mech, rnd, parameters, publish, key_index,
                             active or {}, spec if callable(check) else None, queries)
    return NoisyHierarchy(truth.schema, truth.geography, workload, measurements, invariants,
                          provenance)


def _accounted(rnd: Any, accounted_elsewhere: bool) -> Any:
    """``rnd``, unless it is release mode and the call is made neither through a
    :class:`~hierarchy.session.Session` nor by code that accounts for the budget itself
    (``accounted_elsewhere``): then :func:`measure` refuses before it reads anything."""
    if rnd.mode == "release" and accounted_elsewhere is not True:
        raise HierarchyError(
            "measure() in release mode spends the privacy budget anew at every call, and "
            "nothing here counts what was spent: measure through a Session, which holds the data "
            "and their total budget and refuses to spend beyond it (from hierarchy import "
            "Session; session = Session(truth, total); noisy = session.measure(workload, "
            "budget, mechanism, spec=spec)); or give rng a seed for a simulation; or, if your "
            "code accounts for the budget itself (as postproc run does, measuring once per "
            "locked output directory), pass accounted_elsewhere=True")
    return rnd


def _check_inputs(truth: Hierarchy, workload: Workload, budget: Budget, mech: Any, rnd: Any
                  ) -> None:
    """:func:`measure`'s checks before anything is published or drawn: the workload's schema,
    no floating-point noise in release mode, and a budget that fits the workload and levels."""
    if workload.schema != truth.schema:
        raise HierarchyError("the workload's schema differs from the tabulated schema")
    if rnd.mode == "release" and not mech.discrete:
        raise HierarchyError(f"the {mech.name} mechanism adds floating-point noise, which is "
                             "refused in release mode (its rounding leaks the protected value, "
                             "Mironov 2012); use 'geometric' or 'discrete_gaussian' (exact "
                             "integer samplers), or a seed for a simulation")
    budget.check_against(workload, truth.levels)


def _measure_levels(truth: Hierarchy, workload: Workload, budget: Budget, mech: Any, rnd: Any,
                    key_index: int | None, active: Mapping[str, Any]
                    ) -> tuple[dict[str, dict[str, Measurement]], dict[str, dict[str, Any]]]:
    """:func:`measure_level` for every level of the budget, root first: the measurements and
    noise parameters per level. Levels below ``key_index`` draw from streams keyed by their
    ancestor at that level."""
    geo = truth.geography
    measurements: dict[str, dict[str, Measurement]] = {}
    parameters: dict[str, dict[str, Any]] = {}
    for li, level in enumerate(truth.levels):
        if level not in budget.levels:
            continue
        keys = None
        if key_index is not None and li > key_index:
            keys = (geo.geocodes[key_index], ancestor_offsets(geo, li, key_index))
        measurements[level], parameters[level] = measure_level(
            truth.counts[li], level, li, workload, budget, mech, rnd, keys=keys,
            active=active.get(level))
    return measurements, parameters


def _provenance(truth: Hierarchy, budget: Budget, mech: Any, rnd: Any,
                parameters: Mapping[str, Any], publish: Mapping[str, Any],
                key_index: int | None, active: Mapping[str, Any], checked_spec: Any,
                queries: Mapping[str, Any]) -> dict[str, Any]:
    """:func:`measure`'s provenance (:func:`measurement_provenance`), with the spec the data
    were checked against (``checked_spec``, None when none was) as ``spec_checked`` and the
    query invariants published (``queries``) as ``query_invariants_published``."""
    provenance = measurement_provenance(budget, mech, rnd, parameters, publish,
                                        key_level=None if key_index is None
                                        else truth.geography.levels[key_index],
                                        active_levels=[lv for lv in truth.levels
                                                       if lv in active])
    if checked_spec is not None and callable(getattr(checked_spec, "to_dict", None)):
        provenance["spec_checked"] = checked_spec.to_dict()
    if queries:
        provenance["query_invariants_published"] = dict(queries)
    return provenance


def _drawn_mask(active: Any, query: Any) -> np.ndarray:
    """Units × answers: which answers of ``query`` count an active cell of their unit."""
    per = active.answers(query)
    return per.patterns.toarray()[per.pattern]


def measurement_provenance(budget: Budget, mechanism: Any, rnd: Any,
                           parameters: Mapping[str, Any], publish: Mapping[str, Any], *,
                           key_level: str | None = None,
                           active_levels: Sequence[str] = ()) -> dict[str, Any]:
    """The provenance a :class:`NoisyHierarchy` records of its measurement: budget, mechanism,
    noise parameters per level and query, sampler, randomness (with its label), the published
    invariants, for keyed streams their level, and the levels where only the answers that count
    an active cell were drawn (``active_levels``).

    Examples
    --------
    >>> from hierarchy.mechanisms import get_mechanism
    >>> from hierarchy.randomness import Randomness
    >>> p = measurement_provenance(Budget.e2e(1, ["nation"]), get_mechanism("geometric"),
    ...                            Randomness.simulation(3), {}, {}, key_level="tract")
    >>> p["randomness"]["safe_for_release"], p["noise_streams"]
    (False, {'key_level': 'tract'})
    """
    provenance = {
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "budget": budget.to_dict(), "mechanism": mechanism.to_dict(), "parameters": parameters,
        "sampler": _sampler_used(mechanism, rnd),
        "randomness": rnd.provenance(),
        "invariants_published": dict(publish),
    }
    if key_level is not None and rnd.mode != "release":   # release mode draws unkeyed
        provenance["noise_streams"] = {"key_level": key_level}
    if active_levels:
        provenance["answers_drawn"] = {"active_only": list(active_levels)}
    return provenance


#: First element of a keyed stream's key (:func:`measure_level`): no level index is this large,
#: so keyed streams never meet the (level index, query index) streams of an unkeyed measurement.
KEYED_STREAM = 2 ** 32 + 13


def stable_key(text: str) -> int:
    """A 64-bit integer naming ``text`` in stream keys, the same on every machine and run
    (Python's ``hash`` of a string is salted per process).

    >>> stable_key("block") == stable_key("block") != stable_key("tract")
    True
    """
    return int.from_bytes(hashlib.blake2b(text.encode("utf-8"), digest_size=8).digest(),
                          "little")


def ancestor_offsets(geography: Any, level: int, ancestor_level: int) -> np.ndarray:
    """Offsets of each ``ancestor_level`` unit's descendants at ``level``: those of ancestor
    ``a`` are units ``offsets[a]:offsets[a + 1]`` (contiguous: children are stored in parent
    order).

    >>> from hierarchy.geography import Geography
    >>> geo = Geography(("n", "s", "b"), (["0"], ["1", "2"], ["a", "b", "c"]), ([-1], [0, 0],
    ...                 [0, 0, 1]))
    >>> ancestor_offsets(geo, 2, 1).tolist(), ancestor_offsets(geo, 2, 0).tolist()
    ([0, 2, 3], [0, 3])
    """
    index = np.arange(geography.n_units(level))
    for li in range(level, ancestor_level, -1):
        index = geography.parents[li][index]
    return np.searchsorted(index, np.arange(geography.n_units(ancestor_level) + 1))


def measure_level(counts: np.ndarray, level: str, level_index: int, workload: Workload,
                  budget: Budget, mechanism: Any, rnd: Any, *,
                  keys: tuple[np.ndarray, np.ndarray] | None = None,
                  answers: Mapping[str, np.ndarray] | None = None, active: Any = None
                  ) -> tuple[dict[str, Measurement], dict[str, Any]]:
    """The noisy answers of one level's queries (the budget's, in its order) and their noise
    parameters.

    Parameters
    ----------
    counts : int64 array (units, cells)
        The level's exact histograms.
    level, level_index : str, int
        The level's name and its index in the geography.
    workload, budget, mechanism, rnd
        As in :func:`measure` (``mechanism`` an object, ``rnd`` a Randomness).
    keys : (geocodes, offsets), optional
        Keyed streams: the units ``offsets[a]:offsets[a + 1]`` draw every query's noise, in
        the budget's order, from the stream ``rnd.child(KEYED_STREAM, stable_key(level),
        stable_key(geocodes[a]))``. The values of a unit then depend on its ancestor's geocode
        and the units beside it under that ancestor, not on what else is measured. Without
        ``keys``, or in release mode (whose source repeats nothing, keyed or not): query ``q``
        draws the whole level from ``rnd.child(level_index, q)``.
    answers : mapping query → array (units, answers), optional
        The exact answers of ``counts``, when the caller has them already (computed here
        otherwise).
    active : invariants.active.ActiveCells, optional
        The level's active cells (:func:`invariants.active.find_active_cells`, from the spec
        and the published invariants only): draw only the answers that count an active cell
        of their unit, in the same streams and order, the others being known to be 0
        (``Measurement.drawn``; why TopDown's output is unchanged: ``docs/scale2020.md``).
        Default: draw every answer.

    Returns
    -------
    measurements : dict query → Measurement
    parameters : dict query → JSON-ready noise parameters

    Examples
    --------
    Two blocks under tract "7" measured alone, or with the blocks of another tract before
    them, get the same noise:

    >>> from hierarchy.mechanisms import get_mechanism
    >>> from hierarchy.queries import e2e_workload
    >>> from hierarchy.randomness import Randomness
    >>> from hierarchy.schema import E2E_1940
    >>> workload, budget = e2e_workload(E2E_1940), Budget.e2e(1, ["nation", "block"])
    >>> mech, rnd = get_mechanism("geometric"), Randomness.simulation(5)
    >>> zeros = np.zeros((3, E2E_1940.size), np.int64)
    >>> alone, _ = measure_level(zeros[:2], "block", 1, workload, budget, mech, rnd,
    ...                          keys=(np.array(["7"]), np.array([0, 2])))
    >>> both, _ = measure_level(zeros, "block", 1, workload, budget, mech, rnd,
    ...                         keys=(np.array(["6", "7"]), np.array([0, 1, 3])))
    >>> bool(np.array_equal(alone["detailed"].values, both["detailed"].values[1:]))
    True
    """
    plan = _plan(level, workload, budget, mechanism)
    exact = _exact_of(plan, counts, answers or {})
    drawn = _drawn_masks(plan, active, counts, level)
    if keys is not None and rnd.mode == "release":
        # Keyed streams make a simulation's draws reproducible part by part; the secure source
        # repeats nothing, so a release draws each query's answers in one call (the same law;
        # the exact sampler costs milliseconds per call, which per key ran to minutes).
        keys = None
    # the drawn answers' positions in each query's flattened units × answers (None: all)
    where = [None if mask is None else np.flatnonzero(mask) for mask in drawn]
    if keys is None:
        noise = _draw_unkeyed(plan, exact, where, mechanism, rnd, level_index)
    else:
        noise = _draw_keyed(plan, exact, where, mechanism, rnd, level, keys)
    return _assemble(level, plan, exact, noise, drawn, where, budget, mechanism)


class _Planned(NamedTuple):
    """One query of a level's measurement: its name, the query, its noise parameter and the
    noise's variance (:func:`measure_level`'s plan, in the budget's order)."""

    name: str
    query: Any
    param: float
    variance: float


def _plan(level: str, workload: Workload, budget: Budget, mechanism: Any) -> list[_Planned]:
    """The level's queries in the budget's order, with their noise parameters."""
    plan = []
    for qname in budget.queries(level):
        query = workload[qname]
        param = float(budget.noise_parameter(level, query, mechanism))
        plan.append(_Planned(qname, query, param, float(mechanism.variance(param))))
    return plan


def _exact_of(plan: Sequence[_Planned], counts: np.ndarray, answers: Mapping[str, np.ndarray]
              ) -> list[np.ndarray]:
    """Each planned query's exact answers: given in ``answers``, else computed from ``counts``
    (through one sparse copy when more than one query needs it)."""
    missing = [qname for qname, _, _, _ in plan if qname not in answers]
    sparse = sparse_copy(counts) if len(missing) > 1 else None
    return [answers[qname] if qname in answers else exact_answers(query, counts, sparse)
            for qname, query, _, _ in plan]


def _drawn_masks(plan: Sequence[_Planned], active: Any, counts: np.ndarray, level: str
                 ) -> list[np.ndarray | None]:
    """Per planned query, which answers are drawn (units × answers), or None for all of them
    (no active cells given)."""
    drawn: list[np.ndarray | None] = [None] * len(plan)
    if active is not None:
        if active.n_units != counts.shape[0]:
            raise HierarchyError(f"active cells of {active.n_units} units for {level}'s "
                                 f"{counts.shape[0]} units")
        drawn = [_drawn_mask(active, query) for _, query, _, _ in plan]
    return drawn


def _draw_unkeyed(plan: Sequence[_Planned], exact: Sequence[np.ndarray],
                  where: Sequence[np.ndarray | None], mechanism: Any, rnd: Any,
                  level_index: int) -> list[np.ndarray]:
    """The noise of each query drawn for the whole level at once, query ``q`` from the stream
    ``rnd.child(level_index, q)``."""
    noise = []
    for qi, ((_, _, param, _), ex, at) in enumerate(zip(plan, exact, where)):
        stream = rnd.child(level_index, qi)
        noise.append(mechanism.sample(param, ex.shape if at is None else at.size, stream))
    return noise


def _draw_keyed(plan: Sequence[_Planned], exact: Sequence[np.ndarray],
                where: Sequence[np.ndarray | None], mechanism: Any, rnd: Any, level: str,
                keys: tuple[np.ndarray, np.ndarray]) -> list[np.ndarray]:
    """The noise of each query drawn ancestor by ancestor: the units under ancestor ``a`` draw
    every query's noise, in the plan's order, from the stream named by ``level`` and
    ``a``'s geocode (:func:`measure_level`'s ``keys``)."""
    codes, offsets = keys
    noise = [np.empty(ex.shape if at is None else at.size, dtype=_noise_dtype(mechanism))
             for ex, at in zip(exact, where)]
    # unit range a's drawn answers are starts[a]:starts[a + 1] of a query's positions
    starts = [None if at is None else np.searchsorted(at, np.asarray(offsets) * ex.shape[1])
              for ex, at in zip(exact, where)]
    level_key = stable_key(level)
    for a in np.flatnonzero(np.diff(offsets)):
        lo, hi = int(offsets[a]), int(offsets[a + 1])
        stream = rnd.child(KEYED_STREAM, level_key, stable_key(str(codes[a])))
        for (_, _, param, _), ex, out, start in zip(plan, exact, noise, starts):
            if start is None:
                out[lo:hi] = mechanism.sample(param, (hi - lo, ex.shape[1]), stream)
            else:
                first, stop = int(start[a]), int(start[a + 1])
                out[first:stop] = mechanism.sample(param, stop - first, stream)
    return noise


def _assemble(level: str, plan: Sequence[_Planned], exact: Sequence[np.ndarray],
              noise: Sequence[np.ndarray], drawn: Sequence[np.ndarray | None],
              where: Sequence[np.ndarray | None], budget: Budget, mechanism: Any
              ) -> tuple[dict[str, Measurement], dict[str, Any]]:
    """Exact answers plus noise, as :class:`Measurement` objects, with each query's noise
    parameters."""
    measurements, parameters = {}, {}
    for (qname, query, param, variance), ex, z, mask, at in zip(plan, exact, noise, drawn,
                                                                where):
        kind = np.result_type(ex, z)
        if at is None:
            # in place: the noise array is this query's alone (a block level's sum allocated
            # and touched another 320 MB per query)
            values = z.astype(kind, copy=z.dtype != kind or not z.flags.writeable)
            values += ex
        else:
            # the answers not drawn are 0, known from the invariants: nothing of the data is
            # copied there (and no pass is made over them)
            values = np.zeros(ex.shape, dtype=kind)
            values.reshape(-1)[at] = np.take(ex, at) + z
        measurements[qname] = Measurement(qname, values, np.float64(variance), mask)
        parameters[qname] = {"budget": str(budget.query_budget(level, qname)),
                             mechanism.parameter_name: param, "variance": variance,
                             "sensitivity": list(budget.sensitivity(query))}
    return measurements, parameters


def exact_answers(query: Any, counts: np.ndarray, sparse: Any = None) -> np.ndarray:
    """``query.answer(counts)``, but the histograms themselves for the detailed query (no
    product). ``sparse``: ``counts``' :func:`~hierarchy.queries.sparse_copy`, when the caller
    answers several queries of the same counts (the copy is then made once).

    >>> from hierarchy.queries import e2e_workload
    >>> from hierarchy.schema import E2E_1940
    >>> counts = np.arange(2 * E2E_1940.size).reshape(2, -1)
    >>> exact_answers(e2e_workload(E2E_1940)["detailed"], counts) is counts
    True
    """
    if query.expression == "detailed":
        return counts
    return query.answer(counts if sparse is None else sparse)


def _noise_dtype(mechanism: Any) -> Any:
    return np.int64 if mechanism.discrete else np.float64


def _sampler_used(mech: Any, rnd: Any) -> str:
    """How the noise was drawn: release mode always uses the exact integer samplers."""
    if not mech.discrete:
        return "floating point (simulation only)"
    if mech.name == "geometric" and not getattr(mech, "exact", False) and rnd.mode != "release":
        return "inverse CDF on 53-bit uniforms (simulation only)"
    if mech.name == "discrete_gaussian" and not getattr(mech, "exact", True):
        return "table inversion on 64-bit words (simulation only)"
    return "exact integer"
