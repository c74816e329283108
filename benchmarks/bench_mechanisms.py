"""Throughput of the noise samplers in simulation and release mode.

Run ``python benchmarks/bench_mechanisms.py [n] [repeats]``; it prints draws per second (median of
``repeats`` timed runs) for every sampler and mode. The exact integer samplers are timed on
``n // 10`` draws (they are one to two orders of magnitude slower); the result says which ``n``
each figure used. Target: at least 10 million two-sided geometric draws per second in simulation
mode. Release mode draws the geometric exactly (inversion on 64-bit words with exact
tie-breaking; the CKS rejection sampler, timed beside it, is the baseline) and refuses the
floating-point samplers (reported as "refused").
"""

from __future__ import annotations

import os
import platform
import statistics
import sys
import time
from fractions import Fraction

import numpy as np

from hierarchy.errors import HierarchyError
from hierarchy.mechanisms import (
    sample_discrete_gaussian,
    sample_discrete_laplace_exact,
    sample_gaussian,
    sample_laplace,
    sample_two_sided_geometric,
)
from hierarchy.randomness import Randomness

GEOMETRIC_TARGET = 10_000_000   # draws per second, simulation mode

# name -> (sampler(size, rng), is an exact integer sampler)
SAMPLERS = {
    "two_sided_geometric(z=0.25)": (lambda n, rng: sample_two_sided_geometric(0.25, n, rng), False),
    "two_sided_geometric(z=0.25, exact)": (
        lambda n, rng: sample_two_sided_geometric(0.25, n, rng, exact=True), True),
    "discrete_laplace_exact(scale=4), CKS": (
        lambda n, rng: sample_discrete_laplace_exact(Fraction(4), n, rng), True),
    "discrete_laplace_exact(scale=7/2)": (
        lambda n, rng: sample_discrete_laplace_exact(Fraction(7, 2), n, rng), True),
    "discrete_gaussian(sigma2=2.5)": (lambda n, rng: sample_discrete_gaussian(2.5, n, rng), True),
    "discrete_gaussian(sigma2=1e4)": (lambda n, rng: sample_discrete_gaussian(1e4, n, rng), True),
    "laplace(scale=4)": (lambda n, rng: sample_laplace(4.0, n, rng), False),
    "gaussian(sigma2=2)": (lambda n, rng: sample_gaussian(2.0, n, rng), False),
}


def _rate(sampler, n: int, make_rng, repeats: int) -> float:
    """Median draws per second over ``repeats`` timed runs (after one untimed warm-up)."""
    sampler(min(n, 1000), make_rng(0))
    rates = []
    for rep in range(repeats):
        rng = make_rng(rep + 1)
        start = time.perf_counter()
        sampler(n, rng)
        rates.append(n / (time.perf_counter() - start))
    return statistics.median(rates)


def run(n: int = 10_000_000, repeats: int = 5) -> dict:
    """Time every sampler in both randomness modes.

    Parameters
    ----------
    n : int, optional
        Draws per timed run (``n // 10`` for the exact integer samplers).
    repeats : int, optional
        Timed runs per sampler and mode; the median rate is reported.

    Returns
    -------
    dict
        ``{"n": n, "repeats": repeats, "machine": {...}, "results": {sampler: {"n": draws,
        "simulation": draws per second, "release": draws per second}}, "geometric_target_met":
        bool}``.
    """
    modes = {"simulation": Randomness.simulation, "release": lambda _seed: Randomness.release()}
    results = {}
    for name, (sampler, exact) in SAMPLERS.items():
        draws = max(1, n // 10) if exact else n
        results[name] = {"n": draws}
        for mode, make_rng in modes.items():
            try:
                results[name][mode] = _rate(sampler, draws, make_rng, repeats)
            except HierarchyError:   # floating-point noise in release mode
                results[name][mode] = None
    geometric = results["two_sided_geometric(z=0.25)"]["simulation"]
    return {
        "n": n, "repeats": repeats,
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                    "numpy": np.__version__,
                    "processor": platform.processor() or platform.machine()},
        "results": results,
        "geometric_target_met": geometric >= GEOMETRIC_TARGET,
    }


def main(argv: list[str]) -> None:
    n = int(argv[1]) if len(argv) > 1 else 10_000_000
    repeats = int(argv[2]) if len(argv) > 2 else 5
    report = run(n, repeats)
    print(f"draws per second, median of {repeats} runs "
          f"({report['machine']['cpus']} CPUs, numpy {report['machine']['numpy']})")
    print(f"{'sampler':<38}{'draws':>12}{'simulation':>16}{'release':>16}")
    for name, row in report["results"].items():
        rates = [f"{row[m]:>16,.0f}" if row[m] is not None else f"{'refused':>16}"
                 for m in ("simulation", "release")]
        print(f"{name:<38}{row['n']:>12,}{''.join(rates)}")
    exact = report["results"]["two_sided_geometric(z=0.25, exact)"]["release"]
    cks = report["results"]["discrete_laplace_exact(scale=4), CKS"]["release"]
    print(f"release-mode geometric (exact inversion) / CKS rejection at the same law: "
          f"{exact / cks:.1f}x")
    verdict = "met" if report["geometric_target_met"] else "NOT met"
    print(f"target >= {GEOMETRIC_TARGET:,} geometric draws/s in simulation mode: {verdict}")


if __name__ == "__main__":
    main(sys.argv)
