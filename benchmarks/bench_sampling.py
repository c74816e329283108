"""Conditional samplers on Gong & Meng's 46-cell table: MIS proposals per second, and effective
samples per second of the MIS and the lattice sampler.

Run ``python benchmarks/bench_sampling.py [repeats] [--json]``. Each figure is the median of
``repeats`` timed runs with different seeds, reported both per second of wall time and per second
of process CPU time (on a shared machine the CPU figure is the stable one; the load average is
printed). Targets: at least 1 million MIS proposals per second (simulation mode). ESS is the
smallest and the median per-cell multi-chain ESS (Geyer's initial monotone sequence) of the kept
draws, divided by the sampling time (tuning and diagnostics excluded).

Runs:

* ``mis_proposals`` — 2,000,000 MIS iterations at ε̃ = 0.65 without storing the chain;
* ``mis`` — 1,000,000 iterations at ε̃ = 0.65 (the acceptance peak), every 10th state kept;
* ``mis_release`` — the same in release mode (OS CSPRNG), proposals per second only;
* ``lattice_1`` — one chain, 20,000 sweeps; ``lattice_4`` and ``lattice_64`` — 4 and 64 chains.
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

import numpy as np

from hierarchy.randomness import Randomness
from postproc.methods.sampling import (
    effective_sample_size,
    read_count_table,
    sample_lattice,
    sample_mis,
    summarize_ess,
    table_target,
)
from postproc.methods.sampling.mis import MISKernel, mis_index_set, run_mis

DATA = [Path(__file__).resolve().parents[1] / "examples" / "data" / "gong_sex_age.csv"]
PROPOSAL_TARGET = 1_000_000
EPS_TILDE = 0.65


def _target():
    path = next(p for p in DATA if p.is_file())
    return table_target(read_count_table(path), ["total", "marginal(sex)",
                                                 "marginal(voting_age)"], epsilon=0.5)


def _timed(fn):
    w0, c0 = time.perf_counter(), time.process_time()
    out = fn()
    return out, time.perf_counter() - w0, time.process_time() - c0


def summary(ess):
    return summarize_ess(ess)


def _median(values):
    return float(statistics.median(values))


def run(repeats: int = 3) -> dict:
    """Time every sampler ``repeats`` times; medians of rates (wall and CPU)."""
    target = _target()
    ix = mis_index_set(target)
    results: dict[str, dict] = {}

    def proposals(rng, steps=2_000_000):
        kernel = MISKernel(target, ix, EPS_TILDE)
        return run_mis(kernel, target.centre, steps, rng, keep=False)

    proposals(Randomness.simulation(0), 10_000)          # warm-up
    for name, make in (("mis_proposals", Randomness.simulation),
                       ("mis_release", lambda seed: Randomness.release())):
        wall, cpu = [], []
        for rep in range(repeats):
            (_, _, _, steps), w, c = _timed(lambda: proposals(make(rep + 1)))
            wall.append(steps / w)
            cpu.append(steps / c)
        results[name] = {"proposals_per_second_wall": _median(wall),
                         "proposals_per_second_cpu": _median(cpu)}

    def summarize(runs, extra=None):
        """``runs``: (result, CPU seconds, per-cell ESS) of each repeat."""
        def med(f):
            return _median([f(res, cpu, summary(ess)) for res, cpu, ess in runs])

        out = {"acceptance_rate": med(lambda r, c, e: r.acceptance_rate),
               "ess_min": med(lambda r, c, e: e["min"]),
               "ess_median": med(lambda r, c, e: e["median"]),
               "seconds_wall": med(lambda r, c, e: r.seconds),
               "seconds_cpu": med(lambda r, c, e: c),
               "ess_min_per_second_wall": med(lambda r, c, e: e["min"] / r.seconds),
               "ess_min_per_second_cpu": med(lambda r, c, e: e["min"] / c),
               "ess_median_per_second_wall": med(lambda r, c, e: e["median"] / r.seconds),
               "ess_median_per_second_cpu": med(lambda r, c, e: e["median"] / c)}
        out.update(extra or {})
        return out

    runs = []
    for rep in range(repeats):
        (res, _, cpu) = _timed(lambda: sample_mis(
            target, draws=1_000_000, burn_in=0, thin=10, proposal_epsilon=EPS_TILDE,
            rng=100 + rep, index_set=ix, diagnostics=False))
        runs.append((res, cpu, effective_sample_size(res.chain)))
    results["mis"] = summarize(runs, {
        "iterations": 1_000_000, "thin": 10, "proposal_epsilon": EPS_TILDE,
        "proposals_per_second_wall": _median([r.proposals_per_second for r, _, _ in runs])})
    for chains, sweeps in ((1, 20_000), (4, 20_000), (64, 5_000)):
        runs = []
        for rep in range(repeats):
            (res, _, cpu) = _timed(lambda: sample_lattice(
                target, draws=sweeps, burn_in=0, chains=chains, rng=200 + rep,
                diagnostics=False))
            runs.append((res, cpu, effective_sample_size(res.chain)))
        results[f"lattice_{chains}"] = summarize(runs, {"chains": chains, "sweeps": sweeps,
                                                        "step": runs[0][0].settings["step"]})
    return {"results": results, "repeats": repeats, "cells": target.n,
            "target_proposals_per_second": PROPOSAL_TARGET,
            "meets_target_wall": results["mis_proposals"]["proposals_per_second_wall"]
            >= PROPOSAL_TARGET,
            "meets_target_cpu": results["mis_proposals"]["proposals_per_second_cpu"]
            >= PROPOSAL_TARGET,
            "machine": {"python": platform.python_version(), "numpy": np.__version__,
                        "cpus": os.cpu_count(), "load_average": os.getloadavg()}}


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    as_json = "--json" in argv
    argv = [a for a in argv if a != "--json"]
    repeats = int(argv[0]) if argv else 3
    report = run(repeats)
    if as_json:
        print(json.dumps(report, indent=2))
        return 0
    r = report["results"]
    print(f"Gong & Meng table ({report['cells']} cells), median of {repeats} runs; "
          f"load average {report['machine']['load_average'][0]:.1f} on "
          f"{report['machine']['cpus']} CPUs")
    for name in ("mis_proposals", "mis_release"):
        print(f"{name:>15}: {r[name]['proposals_per_second_wall']:>12,.0f} proposals/s wall, "
              f"{r[name]['proposals_per_second_cpu']:>12,.0f} per CPU second")
    print(f"{'':>15}  target {PROPOSAL_TARGET:,}/s: wall {report['meets_target_wall']}, "
          f"CPU {report['meets_target_cpu']}")
    print(f"{'sampler':>15}  {'accept':>7}  {'ESS min':>9}  {'ESS med':>9}  "
          f"{'min ESS/s wall':>15}  {'min ESS/s CPU':>14}  {'med ESS/s CPU':>14}")
    for name in ("mis", "lattice_1", "lattice_4", "lattice_64"):
        x = r[name]
        print(f"{name:>15}  {x['acceptance_rate']:7.4f}  {x['ess_min']:9,.0f}  "
              f"{x['ess_median']:9,.0f}  {x['ess_min_per_second_wall']:15,.0f}  "
              f"{x['ess_min_per_second_cpu']:14,.0f}  {x['ess_median_per_second_cpu']:14,.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
