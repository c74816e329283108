"""Throughput of the discrete Gaussian samplers: the fast simulation sampler against the exact one.

Run ``python benchmarks/bench_samplers.py [--draws 10M] [--exact-draws 1M] [--repeats 5]
[--out FILE] [--json FILE]``. For every σ² of the block level of the PL 94-171 production strategy
(:func:`hierarchy.presets.pl94.pl94_budget`, the discrete Gaussian at sensitivity 1: σ² from about
5 to 4,000) it times, in simulation mode and in the same run,

* ``sample_discrete_gaussian_fast`` (``DiscreteGaussian(exact=False)``) on ``--draws`` draws,
* ``sample_discrete_gaussian`` (exact, CKS 2020; ``exact=True``, the only sampler of release
  mode) on ``--exact-draws`` draws,

and reports draws per second (median of ``--repeats`` timed runs after a warm-up that also builds
the fast sampler's table), per second of wall-clock and of CPU time, and their ratio. A second table
times the fast sampler alone over the σ² it supports, from 1e-2 to 1e12 (its table method up to 1e6,
its envelope method above). Target (issue 13): at least 50 million draws per second at every
block-level σ². The machine's load is reported; figures from a busy machine are upper bounds on the
time.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from hierarchy.mechanisms import (
    get_mechanism,
    sample_discrete_gaussian,
    sample_discrete_gaussian_fast,
)
from hierarchy.mechanisms._fast import MAX_TABLE_SIGMA2
from hierarchy.presets.pl94 import pl94_budget, pl94_workload
from hierarchy.randomness import Randomness

from _common import (
    context_end,
    context_start,
    describe_context,
    emit,
    markdown_table,
    parse_count,
    timed,
    verdict,
)

TARGET = 50_000_000   # fast draws per second at the block level (issue 13)
RANGE = (1e-2, 1.0, 1e2, 1e4, 1e6, 1e7, 1e8, 1e10, 1e12)


def block_sigma2() -> dict[float, list[str]]:
    """The distinct σ² of the production strategy's block-level queries, with their queries."""
    budget, workload = pl94_budget(), pl94_workload()
    mechanism = get_mechanism("discrete_gaussian")
    out: dict[float, list[str]] = {}
    for query in budget.queries("block"):
        sigma2 = float(budget.noise_parameter("block", workload[query], mechanism))
        out.setdefault(sigma2, []).append(query)
    return dict(sorted(out.items()))


def rate(sampler, sigma2: float, draws: int, repeats: int) -> tuple[float, float]:
    """Draws per second of ``sampler(sigma2, draws, rng)``, a new seed per run: per second of
    wall-clock time and per second of CPU time (the steadier figure on a busy machine), each
    the median of ``repeats`` runs."""
    seeds = iter(range(repeats + 1))
    timing = timed(lambda: sampler(sigma2, draws, Randomness.simulation(next(seeds))),
                   repeats, warmup=1)
    return draws / timing["seconds"], draws / timing["cpu_seconds"]


def run(draws: int = 10_000_000, exact_draws: int = 1_000_000, repeats: int = 5) -> dict[str, Any]:
    """Time both samplers at the block-level σ², and the fast one over its range.

    Returns
    -------
    dict
        ``context``; ``block``: one row per σ² (``sigma2``, ``queries``, ``fast`` and ``exact``
        draws per wall-clock second, ``fast_cpu`` and ``exact_cpu`` per CPU second, ``ratio`` of
        the wall-clock rates); ``range``: ``sigma2``, ``fast`` and ``fast_cpu`` per row;
        ``draws``, ``exact_draws``, ``repeats``, ``target`` and ``target_met`` (wall clock).
    """
    context = context_start()
    block = []
    for sigma2, queries in block_sigma2().items():
        fast, fast_cpu = rate(sample_discrete_gaussian_fast, sigma2, draws, repeats)
        exact, exact_cpu = rate(sample_discrete_gaussian, sigma2, exact_draws, repeats)
        block.append({"sigma2": sigma2, "queries": queries, "fast": fast, "fast_cpu": fast_cpu,
                      "exact": exact, "exact_cpu": exact_cpu, "ratio": fast / exact})
    spread = []
    for sigma2 in RANGE:
        fast, fast_cpu = rate(sample_discrete_gaussian_fast, sigma2, draws, repeats)
        spread.append({"sigma2": sigma2, "fast": fast, "fast_cpu": fast_cpu})
    return {"context": context_end(context), "draws": draws, "exact_draws": exact_draws,
            "repeats": repeats, "target": TARGET, "block": block, "range": spread,
            "target_met": min(row["fast"] for row in block) >= TARGET}


def report(result: dict[str, Any]) -> str:
    """The markdown report of :func:`run`."""
    def millions(x: float) -> str:
        return f"{x / 1e6:,.1f}M"

    block = markdown_table(
        ["σ²", "block-level queries", "fast draws/s", "(per CPU s)", "exact draws/s",
         "(per CPU s)", "fast / exact"],
        [[f"{r['sigma2']:,.2f}", ", ".join(r["queries"]), millions(r["fast"]),
          millions(r["fast_cpu"]), millions(r["exact"]), millions(r["exact_cpu"]),
          f"{r['ratio']:,.0f}×"] for r in result["block"]],
        align="llrrrrr")
    def method(sigma2: float) -> str:
        return "table" if sigma2 <= MAX_TABLE_SIGMA2 else "envelope"

    spread = markdown_table(["σ²", "method", "fast draws/s", "(per CPU s)"],
                            [[f"{r['sigma2']:g}", method(r["sigma2"]), millions(r["fast"]),
                              millions(r["fast_cpu"])] for r in result["range"]],
                            align="llrr")
    worst = min(r["fast"] for r in result["block"])
    return "\n".join([
        "# Discrete Gaussian samplers (simulation mode)", "",
        describe_context(result["context"]), "",
        f"Median of {result['repeats']} runs: {result['draws']:,} fast draws, "
        f"{result['exact_draws']:,} exact draws per run; one thread.", "",
        "## Block level of the PL 94-171 production strategy", "", block, "",
        f"Target ≥ {TARGET / 1e6:.0f}M fast draws/s at every block-level σ² (slowest: "
        f"{millions(worst)}): {verdict(result['target_met'])}", "",
        "## The fast sampler over its range", "", spread])


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--draws", type=parse_count, default=10_000_000)
    parser.add_argument("--exact-draws", type=parse_count, default=1_000_000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--out", help="also write the markdown report here")
    parser.add_argument("--json", dest="json_path", help="write every figure here as JSON")
    args = parser.parse_args(argv[1:])
    result = run(args.draws, args.exact_draws, args.repeats)
    emit(report(result), result, out=args.out, json_path=args.json_path)


if __name__ == "__main__":
    main(sys.argv)
