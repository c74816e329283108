"""The data model: schemas, queries, geography, tabulation, mechanisms, budgets, measurements.

The names a user needs are exported here, loaded on first use (``import hierarchy`` stays
cheap). The whole path from microdata to a saved and reloaded ``NoisyHierarchy``:

>>> import tempfile
>>> from hierarchy import (E2E_1940, Budget, NoisyHierarchy, e2e_workload, measure,
...                        synthesize_1940, tabulate)
>>> levels = ["nation", "state", "county", "enum_dist"]
>>> data = synthesize_1940(50_000, seed=7)                       # microdata
>>> truth = tabulate(data.persons, schema=E2E_1940, levels=levels, units=data.units)
>>> truth.level_counts("enum_dist").shape[1]                     # 192 cells per unit
192
>>> noisy = measure(truth, e2e_workload(E2E_1940), Budget.e2e(1.0, levels), "geometric",
...                 rng=11, publish={"tot": ["nation", "state"]})
>>> path = noisy.save(tempfile.mkdtemp() + "/noisy")           # parquet + JSON, never pickle
>>> NoisyHierarchy.load(path).equals(noisy)
True
>>> noisy.provenance["randomness"]["safe_for_release"]           # seeded: simulation mode
False
"""

from hierarchy.exports import lazy_exports  # noqa: F401  (also its old home: hierarchy.lazy_exports)

# exported name -> the module that defines it
_EXPORTS = {
    "Schema": "hierarchy.schema", "E2E_1940": "hierarchy.schema",
    "Query": "hierarchy.queries", "Workload": "hierarchy.queries",
    "e2e_workload": "hierarchy.queries", "parse_query": "hierarchy.queries",
    "Geography": "hierarchy.geography", "Hierarchy": "hierarchy.histograms",
    "tabulate": "hierarchy.tabulation", "Budget": "hierarchy.budget",
    "PureDP": "hierarchy.budget", "ZCDP": "hierarchy.budget",
    "measure": "hierarchy.measurement", "NoisyHierarchy": "hierarchy.noisy",
    "synthesize_1940": "hierarchy.synth.census1940", "get_mechanism": "hierarchy.mechanisms",
    "DappError": "hierarchy.errors", "HierarchyError": "hierarchy.errors",
    "Attribute": "hierarchy.schema", "Randomness": "hierarchy.randomness",
    "ConfidentialDataError": "hierarchy.errors",
    "Session": "hierarchy.session", "BudgetExceededError": "hierarchy.session",
    "tabulate_weighted": "hierarchy.weighted", "measure_weighted": "hierarchy.weighted",
    "WeightedHierarchy": "hierarchy.weighted",
    "__version__": "hierarchy._version",  # one distribution, one version
}

__all__ = sorted(name for name in _EXPORTS if not name.startswith("__"))


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
