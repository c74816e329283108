"""How far below the raw measurements production's total-first pass can bring the tract totals.

Run from the repository root, on a directory of :mod:`bench_pl94_parts` (its ``data/`` and the
run in parts in ``parts/``, measured with the benchmark's seed)::

    python benchmarks/pl94_total_first.py /tmp/bench_pl94_parts_…/p10000000 [--seed 2020]

At the tract level, production's first fit pass (``[["total"], …]``) fits the tracts' totals to
their raw measurements alone, subject to summing to their county's rounded total; the later
passes hold them. With equal weights that fit is the raw total plus the county's shortfall
shared equally, ``raw_t + (county − Σ raw)/K``: it removes about ``1/K`` of the raw variance,
little when a county has 20-odd tracts. The script prints the mean |error| of the tract totals:
raw, that continuous total-only fit (from the run's own county totals) and the run's rounded
TopDown totals, with the number of tracts per county. Nothing is asserted.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    import numpy as np
    import pyarrow.parquet as pq

    from hierarchy.geography import Geography
    from hierarchy.measurement import measure_level
    from hierarchy.randomness import as_randomness
    from hierarchy.tabulation import from_leaf_counts
    from postproc.apps.runs import parts as P
    from postproc.apps.runs.demo import demo_config
    from postproc.infra.executors import SerialExecutor
    from postproc.result import histograms_from_table

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("directory", help="a size's directory of bench_pl94_parts.py")
    parser.add_argument("--seed", type=int, default=2020)
    parser.add_argument("--part-blocks", type=int, default=20_000)
    args = parser.parse_args(argv)
    d = Path(args.directory)
    config = demo_config(d, preset="pl94_2020", seed=args.seed, executor="serial")
    geo = config.read_geography()
    s = geo.level_index("tract")
    plan = P.plan_parts(geo, s, args.part_blocks)
    with tempfile.TemporaryDirectory() as cache:
        tabulate = P._TabulatePart(config, Path(cache), config.publish(), geo.levels[s + 1:])
        _, counts, units, _, _ = P._tabulate_parts(
            SerialExecutor(), tabulate, P._parts_in_one_pass(config, geo, s, plan), len(plan),
            False)
    top = Geography(geo.levels[:s + 1], geo.geocodes[:s + 1], geo.parents[:s + 1])
    truth = from_leaf_counts(config.schema, top, np.concatenate(counts), np.concatenate(units),
                             config.spec.unit_attribute)
    measured, _ = measure_level(truth.counts[s], "tract", s, config.workload, config.budget,
                                config.mechanism, as_randomness(config.rng))
    raw = measured["total"].values[:, 0].astype(float)
    exact = truth.counts[s].sum(axis=1)

    def totals(level: str) -> np.ndarray:
        table = pq.read_table(d / "parts" / f"{level}.parquet")
        return histograms_from_table(table, config.schema, geo, level).sum(axis=1)

    county, tract = totals("county"), totals("tract")
    parent = geo.parents[s]
    k = np.bincount(parent)
    fit = raw + ((county - np.bincount(parent, weights=raw)) / k)[parent]
    print(f"{geo.n_units(s):,} tracts in {geo.n_units(s - 1):,} counties "
          f"({k.mean():.1f} per county)")
    print(f"mean |error| of the tract totals: raw {np.abs(raw - exact).mean():.3f}, "
          f"total-only fit {np.abs(fit - exact).mean():.3f}, "
          f"TopDown {np.abs(tract - exact).mean():.3f}")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    raise SystemExit(main())
