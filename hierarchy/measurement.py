"""Measurement: exact hierarchy + workload + budget + mechanism → :class:`NoisyHierarchy`."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any, Mapping, Sequence

import numpy as np

from hierarchy.budget import Budget
from hierarchy.errors import HierarchyError
from hierarchy.histograms import Hierarchy
from hierarchy.noisy import Measurement, NoisyHierarchy
from hierarchy.queries import Workload
from hierarchy.randomness import as_randomness

__all__ = ["measure", "published_statistics", "spec_statistics", "persons_per_unit",
           "units_by_type", "PUBLISHABLE"]


def persons_per_unit(truth: Hierarchy, level: str) -> np.ndarray:
    """The exact number of persons of each unit of ``level`` (the ``tot`` statistic).

    Examples
    --------
    >>> import pandas as pd
    >>> from hierarchy.schema import E2E_1940
    >>> from hierarchy.tabulation import tabulate
    >>> persons = pd.DataFrame({"state": ["01", "02", "02"], "hhgq": [0, 0, 3],
    ...                         "votingage": [1, 1, 0], "hispanic": [0, 0, 0],
    ...                         "cenrace": [0, 1, 2]})
    >>> truth = tabulate(persons, schema=E2E_1940, levels=["nation", "state"])
    >>> persons_per_unit(truth, "state").tolist()
    [1, 2]
    """
    return np.asarray(truth.counts[truth.geography.level_index(level)].sum(axis=1),
                      dtype=np.int64)


def units_by_type(truth: Hierarchy, level: str) -> np.ndarray:
    """The exact numbers of occupied housing units and group-quarters facilities of each type
    in each unit of ``level`` (the ``gqhh`` statistic), shape (units, types).

    Raises
    ------
    HierarchyError
        If ``truth`` was tabulated without a units table.

    Examples
    --------
    >>> import pandas as pd
    >>> from hierarchy.schema import E2E_1940
    >>> from hierarchy.tabulation import tabulate
    >>> persons = pd.DataFrame({"state": ["01"], "hhgq": [0], "votingage": [1],
    ...                         "hispanic": [0], "cenrace": [0]})
    >>> units_by_type(tabulate(persons, schema=E2E_1940, levels=["nation", "state"]), "state")
    Traceback (most recent call last):
    ...
    hierarchy.errors.HierarchyError: this hierarchy has no units table; tabulate one with tabulate(..., units=...)
    """
    return np.array(truth.level_units(level), dtype=np.int64)   # a copy, never the truth


#: Exact statistics that can be published as invariants: name → how it is computed from the
#: truth, ``f(truth, level) → int64 array``. What each means and which invariants and constraints
#: use it is the invariant catalogue's (:mod:`invariants.catalogue`, which reads these functions:
#: ``hierarchy`` never imports ``invariants``).
PUBLISHABLE = {"tot": persons_per_unit, "gqhh": units_by_type}


def published_statistics(truth: Hierarchy, publish: Mapping[str, Sequence[str]]
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

    Returns
    -------
    dict
        ``{level: {statistic: int64 array per unit}}``.

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
    hierarchy.errors.HierarchyError: cannot publish 'total'; publishable statistics are ['gqhh', 'tot']
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
    hierarchy.errors.HierarchyError: spec= must be a Spec (an object with invariant_levels(statistic, levels)), not dict; pass a mapping of statistics to levels as publish=
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


def _publish(publish: Mapping[str, Any] | None, spec: Any, levels: Sequence[str]
             ) -> dict[str, list[str]]:
    """``publish`` with every value a list, derived from ``spec`` when not given, and checked to
    hold everything the spec declares invariant."""
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
            spec: Any = None) -> NoisyHierarchy:
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
        ``spec`` declares invariant (:func:`spec_statistics`), or nothing without a spec.
    spec : Spec, optional
        The invariants the post-processor will keep: each is declared once, in the spec, and
        published from it.

    Returns
    -------
    NoisyHierarchy

    Raises
    ------
    HierarchyError
        A workload of another schema, a budget that does not fit, floating-point noise in release
        mode, or a ``publish`` that leaves out a statistic the ``spec`` declares invariant
        (naming both).

    Examples
    --------
    >>> import pandas as pd
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
    >>> measure(truth, e2e_workload(E2E_1940), Budget.e2e(1, ["nation", "state"]), rng=42,
    ...         spec=spec, publish={"tot": ["nation"]})
    Traceback (most recent call last):
    ...
    hierarchy.errors.HierarchyError: the spec declares 'tot' invariant at ['nation', 'state'] but publish= publishes it at ['nation'], without ['state']; leave publish= out (measure derives it from spec=) or add ['state'] to publish['tot']
    """
    from hierarchy.mechanisms import get_mechanism

    rnd = as_randomness(rng)
    mech = get_mechanism(mechanism) if isinstance(mechanism, str) else mechanism
    if workload.schema != truth.schema:
        raise HierarchyError("the workload's schema differs from the tabulated schema")
    if rnd.mode == "release" and not mech.discrete:
        raise HierarchyError(f"the {mech.name} mechanism adds floating-point noise, which is "
                             "refused in release mode (its rounding leaks the protected value, "
                             "Mironov 2012); use 'geometric' or 'discrete_gaussian' (exact "
                             "integer samplers), or a seed for a simulation")
    budget.check_against(workload, truth.levels)
    publish = _publish(publish, spec, truth.levels)
    measurements: dict[str, dict[str, Measurement]] = {}
    parameters: dict[str, dict[str, Any]] = {}
    for li, level in enumerate(truth.levels):
        if level not in budget.levels:
            continue
        counts = truth.counts[li]
        for qi, qname in enumerate(budget.queries(level)):
            query = workload[qname]
            param = float(budget.noise_parameter(level, query, mech))
            variance = float(mech.variance(param))
            exact = counts if query.expression == "detailed" else query.answer(counts)
            noise = mech.sample(param, exact.shape, rnd.child(li, qi))
            values = exact + noise
            measurements.setdefault(level, {})[qname] = Measurement(
                qname, values, np.broadcast_to(np.float64(variance), values.shape))
            parameters.setdefault(level, {})[qname] = {
                "budget": str(budget.query_budget(level, qname)), mech.parameter_name: param,
                "variance": variance, "sensitivity": list(budget.sensitivity(query))}
    provenance = {
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "budget": budget.to_dict(), "mechanism": mech.to_dict(), "parameters": parameters,
        "sampler": _sampler_used(mech, rnd),
        "randomness": rnd.provenance(),
        "invariants_published": publish,
    }
    invariants = published_statistics(truth, publish)
    return NoisyHierarchy(truth.schema, truth.geography, workload, measurements, invariants,
                          provenance)


def _sampler_used(mech: Any, rnd: Any) -> str:
    """How the noise was drawn: release mode always uses the exact integer samplers."""
    if not mech.discrete:
        return "floating point (simulation only)"
    if mech.name == "geometric" and not getattr(mech, "exact", False) and rnd.mode != "release":
        return "inverse CDF on 53-bit uniforms (simulation only)"
    if mech.name == "discrete_gaussian" and not getattr(mech, "exact", True):
        return "table inversion on 64-bit words (simulation only)"
    return "exact integer"
