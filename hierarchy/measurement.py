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

__all__ = ["measure", "published_statistics", "persons_per_unit", "units_by_type",
           "PUBLISHABLE"]


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


def measure(truth: Hierarchy, workload: Workload, budget: Budget, mechanism: Any = "geometric",
            rng: Any = None, *, publish: Mapping[str, Sequence[str]] | None = None
            ) -> NoisyHierarchy:
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
        Exact statistics to carry along as invariants (see :data:`PUBLISHABLE`).

    Returns
    -------
    NoisyHierarchy

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
        "invariants_published": {k: list(v) if not isinstance(v, str) else [v]
                                 for k, v in (publish or {}).items()},
    }
    invariants = published_statistics(truth, publish or {})
    return NoisyHierarchy(truth.schema, truth.geography, workload, measurements, invariants,
                          provenance)


def _sampler_used(mech: Any, rnd: Any) -> str:
    """How the noise was drawn: release mode always uses the exact integer samplers."""
    if not mech.discrete:
        return "floating point (simulation only)"
    if mech.name == "geometric" and not getattr(mech, "exact", False) and rnd.mode != "release":
        return "inverse CDF on 53-bit uniforms (simulation only)"
    return "exact integer"
