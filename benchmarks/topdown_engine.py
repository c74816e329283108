"""The TopDown engine's fit against the generic CVXPY path, parent by parent (issue 3a).

Run ``python benchmarks/topdown_engine.py [--persons 1M] [--repeats 3] [--max-parents N]``
(``--help`` for all options). It prints markdown: the date, machine, commit and load average at
start and end, then one row per level and an overall row.

The workload: ``synthesize_1940(persons, seed=--data-seed)``, tabulated with units over the 4
levels nation/state/county/enum_dist (192 cells), measured with the E2E workload and the E2E
budget at ε = ``--epsilon`` (default 1) with the geometric mechanism (simulation seed
``--noise-seed``), publishing ``tot`` at nation and state and the units data at the bottom; the
E2E spec. One serial ``topdown()`` run gives the rounded histogram of every parent, so every
parent problem below is exactly the one the engine solved in that run.

Then for **every parent problem** — the root and each parent with more than one child at every
level (a single child copies its parent; no fit) — or a random sample of ``--max-parents`` per
level (seed 0), it times, interleaved, ``--repeats`` times each (median per parent):

* **engine** — :meth:`postproc.methods.topdown.fit.Fit.build` +
  :func:`postproc.infra.solvers.solve_qp` with the default backend chain, and mapping the solution
  back to the children × cells (exactly the fit of ``solve_node``; rounding is not included on
  either side);
* **generic** — :func:`postproc.methods.topdown.generic.fit_node_generic`: one CVXPY problem per
  parent, built afresh (Clarabel, tolerances 1e-9), build + solve.

Both start with one untimed warm-up (imports, first-call overheads). The report gives, per level
and overall, the summed median seconds of each path, their ratio (target: the engine ≥ 20×
faster), and the largest objective difference ``|f_engine − f_generic| / max(1, |f_generic|)``
of the objectives the two solvers report (target ≤ 1e-6; the same measure as the slow test
``test_engine_matches_generic_path_on_real_e2e_nodes``). As a cross-check it also evaluates the
weighted least-squares objective itself at both solutions and gives the largest difference of
any fitted cell. Parents where either path does not reach an optimum (the engine would take its
failsafe) are counted and left out of the comparison.

Nothing here asserts a timing; the figures need a quiet machine to mean anything.
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _common as common  # noqa: E402

LEVELS = ["nation", "state", "county", "enum_dist"]
RATIO_TARGET = 20.0
OBJECTIVE_TARGET = 1e-6


def build_workload(persons: int, *, epsilon: float = 1.0, data_seed: int = 1,
                   noise_seed: int = 3):
    """Synthesize, tabulate and measure: the NoisyHierarchy and the E2E spec."""
    from hierarchy.budget import Budget
    from hierarchy.measurement import measure
    from hierarchy.queries import e2e_workload
    from hierarchy.schema import E2E_1940
    from hierarchy.synth import synthesize_1940
    from hierarchy.tabulation import tabulate
    from invariants.spec import Spec

    data = synthesize_1940(persons, seed=data_seed)
    truth = tabulate(data.persons, schema=E2E_1940, levels=LEVELS, units=data.units)
    del data
    noisy = measure(truth, e2e_workload(E2E_1940), Budget.e2e(epsilon, LEVELS), "geometric",
                    rng=noise_seed, publish={"tot": LEVELS[:2], "gqhh": LEVELS[-1:]})
    return noisy, Spec.e2e(LEVELS)


def engine_fit(task, chain) -> dict[str, Any]:
    """The engine's fit of one node: assemble the QP, solve it, map it back to the cells."""

    from postproc.infra.solvers import Status, solve_qp
    from postproc.methods.topdown.fit import Fit

    t0 = time.perf_counter()
    fit = Fit.build(task)
    if fit.infeasible_rows:
        return {"seconds": time.perf_counter() - t0, "ok": False, "status": "infeasible rows"}
    sol = solve_qp(fit.qp, chain)
    if sol.status != Status.OPTIMAL:
        return {"seconds": time.perf_counter() - t0, "ok": False, "status": sol.status.value}
    x = fit.histograms(sol.x)
    seconds = time.perf_counter() - t0
    return {"seconds": seconds, "ok": True, "x": x, "objective": fit.objective(sol),
            "backend": sol.backend}


def generic_fit(task) -> dict[str, Any]:
    """The generic path: one CVXPY problem built afresh."""
    from postproc.infra.solvers import SolverError
    from postproc.methods.topdown.generic import fit_node_generic

    t0 = time.perf_counter()
    try:
        x, objective, _ = fit_node_generic(task)
    except SolverError as exc:
        return {"seconds": time.perf_counter() - t0, "ok": False, "status": str(exc)[:80]}
    return {"seconds": time.perf_counter() - t0, "ok": True, "x": x, "objective": objective}


def objective_at(task, x) -> float:
    """The weighted least-squares objective ``Σ_q Σ w (Q x − y)²`` at ``x`` (K × cells)."""
    import numpy as np

    total = 0.0
    for q in task.queries:
        answers = np.asarray(q.matrix @ x.T).T
        total += float(np.sum(q.weights * (answers - q.values) ** 2))
    return total


def run(persons: int = 1_000_000, *, repeats: int = 3, max_parents: int | None = None,
        epsilon: float = 1.0, data_seed: int = 1, noise_seed: int = 3,
        log=lambda msg: print(msg, file=sys.stderr)) -> dict[str, Any]:
    """Time the engine's fit and the generic path on every parent problem of one workload.

    Parameters
    ----------
    persons : int
        Synthetic persons.
    repeats : int
        Timed fits per parent and path (interleaved); the median per parent is summed.
    max_parents : int, optional
        At most this many parents per level, a uniform random sample (seed 0); default: all.
    epsilon : float
        Total ε of the E2E budget.
    data_seed, noise_seed : int
        Seeds of the synthetic data and of the noise (simulation mode).

    Returns
    -------
    dict
        ``context``, ``workload`` (units per level, timings of the preparation and of the
        TopDown run) and ``levels``: per level the parents eligible and timed, the summed
        median seconds of each path, their ratio, the largest objective differences, and
        ``overall``.
    """
    import numpy as np

    from invariants.compile import compile_spec
    from postproc.infra.solvers import DEFAULT_QP_CHAIN
    from postproc.methods.topdown import topdown
    from postproc.methods.topdown.plan import level_tasks, root_task

    context = common.context_start()
    t0 = time.perf_counter()
    log(f"[topdown_engine] synthesize, tabulate and measure {persons:,} persons ...")
    noisy, spec = build_workload(persons, epsilon=epsilon, data_seed=data_seed,
                                 noise_seed=noise_seed)
    prepare_seconds = time.perf_counter() - t0
    log("[topdown_engine] TopDown run (serial) for the parents' rounded histograms ...")
    t0 = time.perf_counter()
    result = topdown(noisy, spec)
    topdown_seconds = time.perf_counter() - t0
    manifest_levels = result.manifest()["levels"]
    geo = noisy.geography
    compiled = compile_spec(spec, noisy.schema, geo, noisy.invariants)
    chain = DEFAULT_QP_CHAIN
    sampler = np.random.default_rng(0)
    plan = []
    for li, level in enumerate(LEVELS):
        if li == 0:
            tasks = [root_task(noisy, compiled[level])]
        else:
            tasks = [t for t in level_tasks(noisy, compiled[level], li, result.histograms[li - 1])
                     if t.k > 1]
        eligible = len(tasks)
        if max_parents is not None and len(tasks) > max_parents:
            keep = np.sort(sampler.choice(len(tasks), size=max_parents, replace=False))
            tasks = [tasks[i] for i in keep]
        plan.append((level, eligible, tasks))
    warm = next(tasks[0] for _, _, tasks in reversed(plan) if tasks)
    engine_fit(warm, chain)
    generic_fit(warm)
    levels: dict[str, dict[str, Any]] = {}
    for level, eligible, tasks in plan:
        log(f"[topdown_engine] {level}: timing {len(tasks)} of {eligible} parent problems ...")
        load_before = common.load_average()
        rows = []
        for task in tasks:
            eng_times, gen_times = [], []
            eng = gen = None
            for _ in range(repeats):
                eng = engine_fit(task, chain)
                eng_times.append(eng["seconds"])
                gen = generic_fit(task)
                gen_times.append(gen["seconds"])
            row = {"parent": task.parent, "children": task.k,
                   "engine_seconds": statistics.median(eng_times),
                   "generic_seconds": statistics.median(gen_times),
                   "ok": bool(eng["ok"] and gen["ok"]),
                   "status": None if eng["ok"] and gen["ok"] else
                   f"engine {eng.get('status', 'optimal')}, generic {gen.get('status', 'ok')}"}
            if row["ok"]:
                fe, fg = eng["objective"], gen["objective"]
                re_e, re_g = objective_at(task, eng["x"]), objective_at(task, gen["x"])
                row.update(objective_engine=fe, objective_generic=fg,
                           objective_diff=abs(fe - fg) / max(1.0, abs(fg)),
                           evaluated_diff=abs(re_e - re_g) / max(1.0, abs(re_g)),
                           max_cell_diff=float(np.max(np.abs(eng["x"] - gen["x"]),
                                                      initial=0.0)))
            rows.append(row)
        levels[level] = _summarize(rows, eligible)
        levels[level].update(load_before=load_before, load_after=common.load_average(),
                             topdown_seconds=manifest_levels[level]["seconds"],
                             topdown_fit_seconds=manifest_levels[level]["fit_seconds"],
                             topdown_round_seconds=manifest_levels[level]["round_seconds"],
                             units=int(geo.n_units(level)), parents=rows)
    overall = _summarize([r for lv in levels.values() for r in lv["parents"]],
                         sum(lv["eligible"] for lv in levels.values()))
    return {"context": common.context_end(context), "persons": persons, "repeats": repeats,
            "max_parents": max_parents, "epsilon": epsilon, "data_seed": data_seed,
            "noise_seed": noise_seed, "prepare_seconds": prepare_seconds,
            "topdown_seconds": topdown_seconds, "chain": list(chain),
            "levels": levels, "overall": overall}


def _summarize(rows: list[dict[str, Any]], eligible: int) -> dict[str, Any]:
    ok = [r for r in rows if r["ok"]]
    eng = sum(r["engine_seconds"] for r in ok)
    gen = sum(r["generic_seconds"] for r in ok)

    def worst(key: str) -> float:
        return max((r[key] for r in ok), default=float("nan"))
    return {"eligible": eligible, "timed": len(rows), "compared": len(ok),
            "children": sum(r["children"] for r in ok), "not_compared": len(rows) - len(ok),
            "engine_seconds": eng, "generic_seconds": gen,
            "ratio": gen / eng if eng > 0 else float("nan"),
            "max_objective_diff": worst("objective_diff"),
            "max_evaluated_diff": worst("evaluated_diff"),
            "max_cell_diff": worst("max_cell_diff")}


def table(result: dict[str, Any]) -> str:
    """Per-level and overall rows as a markdown table."""
    rows = []
    items = list(result["levels"].items()) + [("**overall**", result["overall"])]
    for level, s in items:
        rows.append([level, f"{s['timed']:,} / {s['eligible']:,}", f"{s['children']:,}",
                     f"{s['engine_seconds']:.3f}", f"{s['generic_seconds']:.3f}",
                     common.fmt_ratio(s["ratio"]), _sci(s["max_objective_diff"]),
                     _sci(s["max_evaluated_diff"]), _sci(s["max_cell_diff"]),
                     str(s["not_compared"])])
    return common.markdown_table(
        ["level fitted", "parents timed / with > 1 child", "children",
         "engine fit s", "generic s", "generic / engine", "max objective diff",
         "max diff, objective re-evaluated", "max cell diff", "not compared"], rows)


def _sci(x: float) -> str:
    return "n/a" if math.isnan(x) else f"{x:.1e}"


def verdicts(result: dict[str, Any]) -> str:
    o = result["overall"]
    return common.markdown_table(
        ["target", "measured", "meets target"],
        [[f"engine ≥ {RATIO_TARGET:g}× faster than the generic path",
          common.fmt_ratio(o["ratio"]), common.verdict(o["ratio"] >= RATIO_TARGET)],
         [f"objectives within {OBJECTIVE_TARGET:g} relative",
          _sci(o["max_objective_diff"]),
          common.verdict(o["max_objective_diff"] <= OBJECTIVE_TARGET)]], "lrr")


def report(result: dict[str, Any]) -> str:
    units = ", ".join(f"{lv} {s['units']:,}" for lv, s in result["levels"].items())
    sample = ("every parent" if result["max_parents"] is None else
              f"at most {result['max_parents']} parents per level (random sample, seed 0)")
    loads = "; ".join(f"{lv} {common.fmt_load(s['load_before'])} → "
                      f"{common.fmt_load(s['load_after'])}"
                      for lv, s in result["levels"].items())
    td = ", ".join(f"{lv} {s['topdown_seconds']:.2f} s (fit {s['topdown_fit_seconds']:.2f}, "
                   f"rounding {s['topdown_round_seconds']:.2f})"
                   for lv, s in result["levels"].items())
    lines = [(f"## TopDown engine vs the generic CVXPY path (issue 3a), "
              f"{result['persons']:,} persons"), "",
             common.describe_context(result["context"]), "",
             (f"Workload: {units}; 192 cells; E2E spec; E2E budget ε = {result['epsilon']:g}, "
              f"geometric, data seed {result['data_seed']}, noise seed {result['noise_seed']}. "
              f"Synthesize + tabulate + measure {result['prepare_seconds']:.1f} s; the serial "
              f"TopDown run {result['topdown_seconds']:.1f} s ({td}; fit and rounding are "
              "solver seconds summed over parents)."), "",
             (f"Timed: {sample}; per parent the median of {result['repeats']} interleaved fits "
              "of each path; seconds are sums of those medians. A row is the level whose units "
              "are the variables (nation: the root problem). *Engine fit* is Fit.build + "
              f"solve_qp (chain {', '.join(result['chain'])}) + mapping back; *generic* is "
              "fit_node_generic (CVXPY problem built afresh, Clarabel). *Objective diff* is "
              "|f_engine − f_generic| / max(1, |f_generic|) of the reported optima; the "
              "re-evaluated one computes Σ w (Qx − y)² at each solution; *cell diff* is the "
              "largest |x_engine − x_generic| in persons. Load average per level (before → "
              f"after): {loads}."), "",
             table(result), "", verdicts(result), ""]
    bad = [(lv, r) for lv, s in result["levels"].items() for r in s["parents"] if not r["ok"]]
    if bad:
        lines += ["Not compared: " + "; ".join(f"{lv} {r['parent']!r}: {r['status']}"
                                               for lv, r in bad[:10]), ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--persons", type=common.parse_count, default=1_000_000,
                        help="synthetic persons (default 1M; the issue asks for ≥ 1M)")
    parser.add_argument("--repeats", type=int, default=3,
                        help="timed fits per parent and path; the median is used (default 3)")
    parser.add_argument("--max-parents", type=int, default=None,
                        help="at most this many parents per level (random sample) for quick "
                             "runs (default: every parent)")
    parser.add_argument("--epsilon", type=float, default=1.0)
    parser.add_argument("--data-seed", type=int, default=1)
    parser.add_argument("--noise-seed", type=int, default=3)
    parser.add_argument("--out", help="also write the markdown report to this file")
    parser.add_argument("--json", help="write every raw figure (per parent) to this JSON file")
    args = parser.parse_args(argv)
    result = run(args.persons, repeats=args.repeats, max_parents=args.max_parents,
                 epsilon=args.epsilon, data_seed=args.data_seed, noise_seed=args.noise_seed)
    common.emit(report(result), result, out=args.out, json_path=args.json)
    return result


if __name__ == "__main__":
    main()
