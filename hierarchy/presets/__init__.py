"""Presets: ready-made schemas, workloads, budgets and specs, and the names that select them.

The data model (:mod:`hierarchy.schema`, :mod:`hierarchy.queries`, :mod:`hierarchy.budget`) knows
nothing of the presets; each preset module builds on it, and this package registers every preset
schema by name in :data:`~hierarchy.schema.SCHEMAS` — explicitly, below, when it is imported. So
``get_schema``, ``[schema] preset = "…"`` in a run configuration and ``Schema.from_dict({"preset":
…})`` know every preset once ``hierarchy.presets`` (or any module in it) has been imported;
:func:`get_schema` imported from here always does.

========================  =====================================================================
:mod:`hierarchy.schema`   ``e2e_1940`` (:data:`E2E_1940`, 192 cells) and ``e2e_1940_144``: the
                          1940 end-to-end test's schemas, defined with the schema type itself
:mod:`.pl94`              ``pl94_2020``: the 2020 redistricting (PL 94-171) schema, workload,
                          budget, query ordering and spec (docs/pl94_2020.md)
========================  =====================================================================

Examples
--------
>>> from hierarchy.presets import SCHEMAS, get_schema
>>> get_schema("pl94_2020") is PL94_2020, get_schema("pl94_2020").shape
(True, (8, 2, 2, 63))
>>> sorted(SCHEMAS)
['e2e_1940', 'e2e_1940_144', 'pl94_2020']
"""

from hierarchy.presets.pl94 import PL94_2020
from hierarchy.schema import E2E_1940, E2E_1940_144, SCHEMAS, get_schema

__all__ = ["SCHEMAS", "get_schema", "E2E_1940", "E2E_1940_144", "PL94_2020"]

# Explicit registration: the schema of each preset module, by name (the 1940 ones are
# registered where they are defined, in hierarchy.schema).
for _preset in (PL94_2020,):
    SCHEMAS.setdefault(_preset.name, _preset)
del _preset
