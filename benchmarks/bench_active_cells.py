"""How many cells of the 2020-style (PL 94-171) run can the post-processor change?

Run from the repository root::

    python benchmarks/bench_active_cells.py [--persons 100000,1000000] [--seed 1]
        [--out benchmarks/active_cells/results.md] [--json FILE]

For each size: :func:`hierarchy.synth.census2020.synthesize_2020` persons (in memory), the published
statistics of the production spec (``tot`` at nation and state, ``gqhh`` by block — counted
straight from the persons and units tables, cross-checked against
:func:`hierarchy.measurement.published_statistics` of the tabulated truth at the smallest size),
:func:`invariants.compile.compile_spec` of :meth:`invariants.spec.Spec.pl94_2020`, then
:func:`invariants.active.find_active_cells_by_level`. Per level: units, empty units (no active
cell), mean/median/max active cells per unit, the fraction of (unit, cell) pairs that are active,
the distinct patterns, and the noisy answers of the level's production queries — every answer
(what is drawn today) against those touching an active cell (what must be drawn). The parent
rule (:meth:`invariants.active.ActiveCells.within`) is applied too and its extra fixed pairs
counted.

Then the block level's memory — dense units × 2,016 arrays against sparse storage of the active
pairs — measured and extrapolated linearly in persons to 331,449,281 (the 2020 census of the 50
states and DC), and at the census's 8.0 million blocks from the mean active cells per block.

Nothing is asserted; figures are computed from array sizes, not from the resident memory.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import (  # noqa: E402
    context_end,
    context_start,
    describe_context,
    emit,
    fmt_bytes,
    markdown_table,
    parse_count,
)

NATION = 331_449_281            # persons, 2020 census, 50 states + DC
NATION_BLOCKS = 8_000_000       # about 8 million tabulation blocks (docs/pl94_2020.md)
CELLS = 2_016


def published_from_tables(data, levels: tuple[str, ...]):
    """Geography and the spec's published statistics counted from the tables (no dense
    histogram): ``tot`` at nation and state, ``gqhh`` by block. Also the (block, cell) pairs
    the persons occupy."""
    from hierarchy.geography import Geography
    from hierarchy.presets.pl94 import PL94_2020

    columns = [[table.column(name) for name in levels[1:]]
               for table in (data.blocks, data.units, data.persons)]
    geography, (_, unit_leaf, person_leaf) = Geography.from_columns(levels, columns)
    n_blocks = geography.n_units(levels[-1])
    hhgq = data.units.column("hhgq").to_numpy().astype(np.int64)
    gqhh = np.bincount(unit_leaf.astype(np.int64) * 8 + hhgq,
                       minlength=n_blocks * 8).reshape(n_blocks, 8)
    persons = np.bincount(person_leaf, minlength=n_blocks)
    state = geography.aggregate(persons, levels[-1], levels[1]).astype(np.int64)
    published = {levels[0]: {"tot": np.array([state.sum()], dtype=np.int64)},
                 levels[1]: {"tot": state}, levels[-1]: {"gqhh": gqhh}}
    cells = PL94_2020.cell_index({name: data.persons.column(name).to_numpy()
                                  for name in PL94_2020.names})
    occupied = np.unique(person_leaf.astype(np.int64) * CELLS + cells).size
    return geography, published, occupied


def cross_check(data, levels, geography, published) -> None:
    """The counted statistics equal published_statistics of the tabulated truth."""
    from hierarchy.measurement import published_statistics
    from hierarchy.presets.pl94 import PL94_2020
    from hierarchy.tabulation import tabulate
    from invariants.catalogue import statistics_to_publish
    from invariants.spec import Spec

    truth = tabulate(data.persons, schema=PL94_2020, levels=list(levels), units=data.units,
                     geography=geography)
    want = published_statistics(truth, statistics_to_publish(Spec.pl94_2020(), levels))
    for level, stats in want.items():
        for stat, value in stats.items():
            if not np.array_equal(value, published[level][stat]):
                raise RuntimeError(f"counted {stat} at {level} differs from "
                                   "published_statistics; the benchmark's counting is wrong")


def measure_size(persons: int, seed: int, check: bool) -> dict[str, Any]:
    from hierarchy.presets.pl94 import LEVELS, PL94_2020, pl94_budget, pl94_workload
    from hierarchy.synth.census2020 import synthesize_2020
    from invariants.active import find_active_cells_by_level
    from invariants.compile import compile_spec
    from invariants.spec import Spec

    out: dict[str, Any] = {"persons": persons}
    start = time.perf_counter()
    data = synthesize_2020(persons, seed=seed)
    out["synth_seconds"] = time.perf_counter() - start
    geography, published, occupied = published_from_tables(data, LEVELS)
    if check:
        cross_check(data, LEVELS, geography, published)
        out["cross_checked"] = True
    del data
    start = time.perf_counter()
    compiled = compile_spec(Spec.pl94_2020(), PL94_2020, geography, published)
    out["compile_seconds"] = time.perf_counter() - start
    start = time.perf_counter()
    found = find_active_cells_by_level(compiled, geography)
    out["active_seconds"] = time.perf_counter() - start
    nested = find_active_cells_by_level(compiled, geography, through_parents=True)
    workload, budget = pl94_workload(), pl94_budget()
    rows = []
    for level in LEVELS:
        active = found[level]
        summary = active.summary()
        queries = budget.queries(level)
        dense = sum(workload[q].n_answers for q in queries) * active.n_units
        touched = sum(active.answers(workload[q]).n_active for q in queries)
        summary.update(answers_dense=dense, answers_touched=touched,
                       parent_rule_extra_fixed=active.n_active - nested[level].n_active,
                       answers_per_unit=dense // max(active.n_units, 1))
        rows.append(summary)
    out["levels"] = rows
    blocks = found[LEVELS[-1]]
    out["block"] = {"units": blocks.n_units, "active_pairs": blocks.n_active,
                    "occupied_pairs": occupied, "pattern_bytes": blocks.nbytes,
                    "answers_per_unit": rows[-1]["answers_per_unit"],
                    "answers_touched": rows[-1]["answers_touched"]}
    return out


def memory_rows(blocks: int, active_pairs: float, occupied_pairs: float, pattern_bytes: float,
                answers_per_unit: int, touched_answers: float) -> dict[str, float]:
    """Bytes of the block level's arrays (int64/float64 values, int32 cell indices)."""
    csr = (blocks + 1) * 8
    return {"dense int64 counts (units × 2,016)": blocks * CELLS * 8,
            "dense bool zero cells (LevelConstraints.zero)": blocks * CELLS,
            "dense float64 noisy answers, all 11 queries": blocks * answers_per_unit * 8,
            "CSR float64 on active cells": csr + active_pairs * 12,
            "CSR float64 noisy answers touching an active cell": csr + touched_answers * 12,
            "active cells as patterns (this structure)": pattern_bytes,
            "CSR int64 on occupied cells (truth nonzeros)": csr + occupied_pairs * 12}


def report(results: list[dict[str, Any]], context: dict[str, Any], command: str) -> str:
    lines = ["# Active cells of the 2020-style (PL 94-171) run", "", f"Command: `{command}`", "",
             describe_context(context), ""]
    for res in results:
        lines += [f"## {res['persons']:,} persons", "",
                  f"synthesis {res['synth_seconds']:.2f} s, compile_spec "
                  f"{res['compile_seconds']:.2f} s, find_active_cells (all levels) "
                  f"{res['active_seconds']:.2f} s"
                  + ("; counted statistics cross-checked against published_statistics"
                     if res.get("cross_checked") else ""), ""]
        table = []
        for r in res["levels"]:
            table.append([r["level"], f"{r['units']:,}", f"{r['empty_units']:,}",
                          f"{r['mean_active']:,.1f}", f"{r['median_active']:,.0f}",
                          f"{r['max_active']:,}", f"{r['fraction_active']:.3f}",
                          f"{r['patterns']:,}", f"{r['answers_dense']:,}",
                          f"{r['answers_touched']:,}",
                          f"{r['answers_touched'] / max(r['answers_dense'], 1):.3f}",
                          f"{r['parent_rule_extra_fixed']:,}"])
        lines += [markdown_table(
            ["level", "units", "empty", "mean active", "median", "max", "fraction active",
             "patterns", "answers (all)", "answers touching active", "ratio",
             "parent rule: extra fixed"], table), ""]
    last = results[-1]
    block = last["block"]
    scale = NATION / last["persons"]
    per_block = block["active_pairs"] / block["units"]
    touched_per_block = block["answers_touched"] / block["units"]
    columns = {
        f"{r['persons']:,} persons ({r['block']['units']:,} blocks)": memory_rows(
            r["block"]["units"], r["block"]["active_pairs"], r["block"]["occupied_pairs"],
            r["block"]["pattern_bytes"], r["block"]["answers_per_unit"],
            r["block"]["answers_touched"]) for r in results}
    nation_blocks = round(block["units"] * scale)
    columns[f"331M persons, linear ({nation_blocks:,} blocks)"] = memory_rows(
        nation_blocks, block["active_pairs"] * scale, block["occupied_pairs"] * scale,
        block["pattern_bytes"] * scale, block["answers_per_unit"],
        block["answers_touched"] * scale)
    columns[f"{NATION_BLOCKS:,} blocks at {per_block:.0f} active cells each"] = memory_rows(
        NATION_BLOCKS, per_block * NATION_BLOCKS,
        block["occupied_pairs"] / block["units"] * NATION_BLOCKS,
        block["pattern_bytes"] / block["units"] * NATION_BLOCKS, block["answers_per_unit"],
        touched_per_block * NATION_BLOCKS)
    names = list(next(iter(columns.values())))
    lines += ["## Block level: memory, dense against sparse", "",
              f"Extrapolated from the {last['persons']:,}-person run (the last column uses the "
              "mean active cells and answers per block). CSR: int32 cell indices, 8-byte values, "
              "int64 row pointers.", "",
              markdown_table(["array"] + list(columns),
                             [[n] + [fmt_bytes(c[n]) for c in columns.values()]
                              for n in names]), ""]
    draws_dense = NATION_BLOCKS * block["answers_per_unit"]
    draws_sparse = touched_per_block * NATION_BLOCKS
    lines += [f"Noise draws at the block level for {NATION_BLOCKS:,} blocks: "
              f"{draws_dense / 1e9:,.1f} billion for every answer, "
              f"{draws_sparse / 1e9:,.2f} billion for the answers touching an active cell "
              f"({draws_sparse / draws_dense:.3f}).", ""]
    return "\n".join(lines)


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--persons", default="100000,1000000",
                        help="comma-separated sizes (e.g. 100k,1M,10M)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--out", help="write the markdown report here too")
    parser.add_argument("--json", help="write every figure here")
    args = parser.parse_args(argv)
    sizes = [parse_count(p) for p in args.persons.split(",") if p.strip()]
    context = context_start()
    results = [measure_size(n, args.seed, check=(i == 0)) for i, n in enumerate(sizes)]
    context = context_end(context)
    command = "python benchmarks/bench_active_cells.py " + " ".join(argv)
    emit(report(results, context, command.strip()), {"context": context, "results": results},
         out=args.out, json_path=args.json)


if __name__ == "__main__":
    main(sys.argv[1:])
