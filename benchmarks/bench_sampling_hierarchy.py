"""Conditional sampling of a hierarchy (``sample_topdown``) against TopDown, with both starts.

Run ``python benchmarks/bench_sampling_hierarchy.py [--sizes 20000,200000,1000000]
[--repeats 3] [--sweeps 100] [--own] [--out FILE] [--json FILE]``.

For each size: synthetic 1940 persons (``synthesize_1940``, seed 1), the E2E workload and budget
at ε = 1 (geometric), ``tot`` published at nation and states and ``gqhh`` at EDs, the E2E spec.
TopDown (serial, default solvers) and ``sample_topdown`` with ``start="topdown"`` and
``start="l1"`` (100 sweeps, seed 4) each run ``repeats`` times; every figure is the median.
Per level: the seconds to find the level's start (TopDown's node solves of the sampled parents,
or the weighted-L1 LP with its MILP fallback) and the seconds of the sweeps. The last column
is the mean absolute error of the bottom level's detailed cells against the truth (the first
repeat), to show that the start does not change the accuracy. ``--own`` adds the case of issue
14 that took 209 s: a user's own schema (sex × 18 age groups × tenure, 108 cells) and geography
(10 provinces, 300 districts, 3,000 areas), 200,000 persons, ``tot`` at country and provinces.

Results (2026-11-25, 2 cores, load 0.05 at the start and 2.7 at the end: other jobs ran;
median of 3; 100 sweeps; seconds; "start" is part of "sampling")
---------------------------------------------------------------------------------------------

=========================  =======  =======================  =====================  ===========
case                       TopDown  start="topdown": total   start="l1": total      ratio to
                                    (of it: start)           (of it: start)         TopDown
=========================  =======  =======================  =====================  ===========
1940, 20,000               0.05     0.18 (0.04)              0.44 (0.28)            3.5 / 8.4
1940, 200,000              0.19     0.84 (0.22)              1.27 (0.66)            4.5 / 6.8
1940, 1,000,000            0.46     3.17 (0.66)              17.3 (14.5)            6.9 / 38
own schema, 200,000        2.15     17.9 (3.2)               161 (146)              8.3 / 75
=========================  =======  =======================  =====================  ===========

With ``start="topdown"`` the start takes 0.7-1.5 times a TopDown solve (it *is* one TopDown node
solve per sampled parent); what remains is the sweeps, proportional to ``sweeps`` × units ×
cells (100 sweeps of 3,000 areas × 108 cells: 12.5 s; of 1,050 EDs × 192 cells: 2.2 s). The L1
start's LP grows with the level and with the next level inside it: 12 s for the states at 1 M
persons, and 117 s for the districts of the own-schema case (the shape of issue 14's 209 s),
where the LP vertex is not integral and the MILP runs. The bottom level's mean absolute error
(detailed cells) does not depend on the start: 0.418 / 0.421 at 200,000 (TopDown 0.339),
0.426 / 0.429 at 1 M, 0.845 / 0.845 for the own schema (TopDown 1.100). The default start is
therefore ``"topdown"``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from typing import Any

import numpy as np

from hierarchy.budget import Budget
from hierarchy.measurement import measure
from hierarchy.queries import Workload, e2e_workload
from hierarchy.schema import E2E_1940, Attribute, Schema
from hierarchy.synth import synthesize_1940
from hierarchy.tabulation import tabulate
from invariants.spec import Invariant, Spec
from postproc.methods.sampling import sample_topdown
from postproc.methods.topdown import topdown

from _common import context_end, context_start, describe_context, emit, markdown_table

LEVELS_1940 = ["nation", "state", "county", "enum_dist"]
STARTS = ("topdown", "l1")


def case_1940(persons: int) -> dict[str, Any]:
    """Truth, measurements and spec of the synthetic 1940 case."""
    data = synthesize_1940(persons, seed=1)
    truth = tabulate(data.persons, schema=E2E_1940, levels=LEVELS_1940, units=data.units)
    noisy = measure(truth, e2e_workload(E2E_1940), Budget.e2e(1, LEVELS_1940), "geometric",
                    rng=3, publish={"tot": LEVELS_1940[:2], "gqhh": LEVELS_1940[-1:]})
    return {"name": f"1940 {persons:,}", "truth": truth, "noisy": noisy,
            "spec": Spec.e2e(LEVELS_1940)}


def case_own(persons: int = 200_000) -> dict[str, Any]:
    """A user's own schema and geography, the shape of issue 14's report."""
    import pandas as pd

    rng = np.random.default_rng(0)
    ages = tuple(f"{5 * i}-{5 * i + 4}" for i in range(17)) + ("85+",)
    schema = Schema((Attribute("sex", ("female", "male")), Attribute("age", ages),
                     Attribute("tenure", ("owner", "renter", "other"))), name="survey")
    area = rng.integers(0, 3000, persons)
    district = area * 300 // 3000
    people = pd.DataFrame({"province": [f"P{d * 10 // 300}" for d in district],
                           "district": [f"D{d}" for d in district],
                           "area": [f"A{a}" for a in area],
                           "sex": rng.integers(0, 2, persons), "age": rng.integers(0, 18, persons),
                           "tenure": rng.choice(3, persons, p=[0.6, 0.35, 0.05])})
    levels = ["country", "province", "district", "area"]
    truth = tabulate(people, schema=schema, levels=levels)
    workload = Workload.from_expressions(schema, {"detailed": "detailed",
                                                  "sex_age": "marginal(sex, age)",
                                                  "tenure": "marginal(tenure)"})
    budget = Budget("pure", 1, {lv: "1/4" for lv in levels},
                    {"detailed": "1/3", "sex_age": "1/3", "tenure": "1/3"})
    spec = Spec(invariants=(Invariant("tot", ["country", "province"]),),
                unit_attribute="tenure")
    return {"name": f"own {persons:,}", "truth": truth, "noisy": measure(truth, workload, budget,
                                                                        rng=1, spec=spec),
            "spec": spec}


def _mae(result, truth) -> float:
    return float(np.abs(result.histograms[-1] - truth.counts[-1]).mean())


def run_case(case: dict[str, Any], repeats: int, sweeps: int) -> dict[str, Any]:
    """Median seconds of TopDown and of both starts, per level (start, sweeps) and in total."""
    noisy, spec, truth = case["noisy"], case["spec"], case["truth"]
    levels = list(noisy.levels)
    out: dict[str, Any] = {"name": case["name"], "units": [noisy.geography.n_units(i)
                                                            for i in range(len(levels))]}
    walls, per_level, mae = [], [], None
    for _ in range(repeats):
        t = time.perf_counter()
        result = topdown(noisy, spec)
        walls.append(time.perf_counter() - t)
        per_level.append(result.provenance["timings"]["levels"])
        mae = _mae(result, truth) if mae is None else mae
    out["baseline"] = {"seconds": statistics.median(walls), "mae": mae,
                      "levels": {lv: statistics.median(p[lv] for p in per_level)
                                 for lv in levels}}
    for start in STARTS:
        walls, starts, sweeps_s, mae = [], [], [], None
        for _ in range(repeats):
            t = time.perf_counter()
            result = sample_topdown(noisy, spec, rng=4, sweeps=sweeps, start=start)
            walls.append(time.perf_counter() - t)
            starts.append(result.provenance["timings"]["start"])
            sweeps_s.append(result.provenance["timings"]["sweeps"])
            mae = _mae(result, truth) if mae is None else mae
        out[start] = {"seconds": statistics.median(walls), "mae": mae,
                      "start": {lv: statistics.median(s[lv] for s in starts) for lv in levels},
                      "sweeps": {lv: statistics.median(s[lv] for s in sweeps_s)
                                 for lv in levels},
                      "reports": result.provenance["failsafe_reports"]}
        out[start]["start_total"] = sum(out[start]["start"].values())
        print(f"  {case['name']}: start={start} {out[start]['seconds']:.2f} s", file=sys.stderr)
    return out


def report(results: list[dict[str, Any]], context: dict[str, Any], repeats: int,
           sweeps: int) -> str:
    td = "TopDown"
    lines = ["# Conditional sampling of a hierarchy against TopDown", "",
             describe_context(context), "",
             f"Median of {repeats} runs; {sweeps} sweeps per level; seconds.", ""]
    rows = []
    for r in results:
        base = r["baseline"]["seconds"]
        for start in STARTS:
            s = r[start]
            rows.append([r["name"], start, f"{base:.2f}", f"{s['seconds']:.2f}",
                         f"{s['start_total']:.2f}", f"{sum(s['sweeps'].values()):.2f}",
                         f"{s['seconds'] / base:.1f}", f"{s['start_total'] / base:.1f}",
                         f"{s['mae']:.3f} / {r['baseline']['mae']:.3f}"])
    lines.append(markdown_table(["case", "start", td, "sampling", "of which start",
                                  "of which sweeps", "sampling / TopDown",
                                 "start / TopDown", "bottom MAE (sampling / TopDown)"],
                                rows, "llrrrrrrr"))
    for r in results:
        lines += ["", f"## {r['name']} (units per level {r['units']})", ""]
        levels = list(r["baseline"]["levels"])
        rows = [[lv, f"{r['baseline']['levels'][lv]:.3f}"]
                + [f"{r[s]['start'][lv]:.3f} + {r[s]['sweeps'][lv]:.3f}" for s in STARTS]
                for lv in levels]
        lines.append(markdown_table(["level", td] + [f"start={s}: start + sweeps"
                                                     for s in STARTS], rows, "lrrr"))
        for s in STARTS:
            if r[s]["reports"]:
                lines.append(f"\nstart={s}: failsafe reports {r[s]['reports']}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="20000,200000,1000000",
                        help="persons of the 1940 cases, comma separated")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--sweeps", type=int, default=100)
    parser.add_argument("--own", action="store_true",
                        help="add issue 14's own-schema case (the L1 start takes minutes)")
    parser.add_argument("--out")
    parser.add_argument("--json")
    args = parser.parse_args(argv)
    context = context_start()
    cases = [case_1940(int(s)) for s in args.sizes.split(",") if s]
    if args.own:
        cases.append(case_own())
    results = [run_case(c, args.repeats, args.sweeps) for c in cases]
    context = context_end(context)
    emit(report(results, context, args.repeats, args.sweeps),
         {"context": context, "results": results}, out=args.out, json_path=args.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
