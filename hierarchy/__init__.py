"""The data model: schemas, queries, geography, tabulation, mechanisms, budgets, measurements.

The whole path from microdata to a saved and reloaded ``NoisyHierarchy``:

>>> import tempfile
>>> from hierarchy.synth import synthesize_1940
>>> from hierarchy.schema import E2E_1940
>>> from hierarchy.queries import e2e_workload
>>> from hierarchy.tabulate import tabulate
>>> from hierarchy.budget import Budget
>>> from hierarchy.measure import measure
>>> from hierarchy.noisy import NoisyHierarchy
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
