"""Time the EPL estimators on large residual sets.

Run ``python benchmarks/bench_epl.py [n] [repeats]``. It prints the median seconds of ``repeats``
timed runs (after one untimed warm-up) of:

* ``improved`` — the default estimator with its default 1,000 interval draws, on ``n``
  integer residuals (two-sided geometric, ``z = 0.25``) and on ``n`` continuous ones (Laplace);
* ``published-fast`` — the published estimator's exact binned evaluation, same inputs;
* ``published-exact`` — scipy's ``gaussian_kde`` evaluation, on ``n // 100`` integer residuals
  (it is O(n × grid)), for scale.

Target: EPL of 10 million residuals in seconds.
"""

from __future__ import annotations

import os
import platform
import statistics
import sys
import time

from hierarchy.mechanisms import sample_laplace, sample_two_sided_geometric
from postproc.evaluation.epl import improved_epl, published_epl


def _seconds(function, repeats: int) -> float:
    function()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        function()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def run(n: int = 10_000_000, repeats: int = 3) -> dict:
    """Median seconds of each estimator on ``n`` residuals.

    Parameters
    ----------
    n : int, optional
        Residuals per run (``n // 100`` for the exact published evaluation).
    repeats : int, optional
        Timed runs per figure; the median is reported.

    Returns
    -------
    dict
        ``{"n": n, "repeats": repeats, "machine": ..., "seconds": {name: seconds}}``.

    Examples
    --------
    >>> result = run(n=20_000, repeats=1)
    >>> sorted(result["seconds"])[:2]
    ['improved (continuous)', 'improved (integer)']
    """
    integer = sample_two_sided_geometric(0.25, n, 1).astype(float)
    continuous = sample_laplace(4.0, n, 2)
    small = integer[: max(n // 100, 2)]
    cases = {
        "improved (integer)": lambda: improved_epl(integer, rng=0),
        "improved (continuous)": lambda: improved_epl(continuous, rng=0),
        "published-fast (integer)": lambda: published_epl(integer, fast=True),
        "published-fast (continuous)": lambda: published_epl(continuous, fast=True),
        f"published-exact (integer, n={small.size})": lambda: published_epl(small, fast=False),
    }
    return {"n": n, "repeats": repeats,
            "machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs",
            "seconds": {name: _seconds(case, repeats) for name, case in cases.items()}}


if __name__ == "__main__":
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 10_000_000
    repeats = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    result = run(n, repeats)
    print(f"EPL estimators, n = {result['n']:,} residuals, median of {result['repeats']} runs "
          f"({result['machine']})")
    for name, seconds in result["seconds"].items():
        print(f"  {name:45s} {seconds:8.3f} s")
