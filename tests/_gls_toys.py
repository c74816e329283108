"""Small hierarchies the GLS-in-parts tests share."""

from __future__ import annotations

from typing import Any

import numpy as np


def empty_blocks_part(first: list[int], succinct: bool) -> tuple[Any, Any, Any]:
    """A nation over two tracts over four blocks, each block's total held (so a block of 0
    persons has every cell fixed at 0): the first block's counts are ``first`` (2 × 3 cells),
    the other three empty. Every level measured by the detailed cells, the total and the first
    attribute's marginal (variance 2, seeded normal noise); with ``succinct=False`` also by a
    query of one race, which breaks the races' symmetry. Returns the noisy hierarchy, its
    compiled spec and its workload."""
    from hierarchy.geography import Geography
    from hierarchy.noisy import Measurement, NoisyHierarchy
    from hierarchy.queries import Workload, detailed, marginal, parse_query, total
    from hierarchy.schema import Attribute, Schema
    from invariants.compile import compile_spec
    from invariants.spec import Invariant, Spec

    schema = Schema((Attribute("g", ("a", "b")), Attribute("race", ("x", "y", "z"))))
    geo = Geography(("nation", "tract", "block"),
                    (np.array(["n"]), np.array(["t0", "t1"]), np.array(["b0", "b1", "b2", "b3"])),
                    (np.array([-1]), np.array([0, 0]), np.array([0, 0, 1, 1])))
    queries = [detailed(schema), total(schema), marginal(schema, "g")]
    if not succinct:
        queries.append(parse_query("recode(race: x=0)", schema, name="race x"))
    workload = Workload(tuple(queries))
    rng = np.random.default_rng(4)
    truth = np.array([first] + [[0] * 6] * 3)
    counts = {"block": truth, "tract": np.array([truth[:2].sum(0), truth[2:].sum(0)]),
              "nation": truth.sum(0, keepdims=True)}
    measurements = {level: {q.name: Measurement(q.name, q.answer(c) + rng.normal(
        size=q.answer(c).shape), 2.0) for q in workload} for level, c in counts.items()}
    published = {"block": {"tot": truth.sum(1)}}
    compiled = compile_spec(Spec([Invariant("tot", "block")]), schema, geo, published)
    return NoisyHierarchy(schema, geo, workload, measurements, published, {}), compiled, workload
