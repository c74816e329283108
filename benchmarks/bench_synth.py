"""Time the synthetic 1940-style microdata generator.

Run ``python benchmarks/bench_synth.py [persons] [repeats] [--out=DIR]``. It prints, as the
median of ``repeats`` timed runs (after one untimed warm-up at 1/10 of the size):

* ``in-memory`` — :func:`hierarchy.synth.synthesize_1940` (persons per second);
* ``parquet`` — :func:`hierarchy.synth.write_synthetic_1940` into a temporary directory (under
  ``--out=DIR`` if given; removed afterwards);

and, for each, the peak resident memory of the process that ran it (``ru_maxrss``). Each
phase runs in its own fresh process so that one's peak does not hide the other's.

Target: at least 2 million persons per second in memory at 10 million persons on 2 cores.
"""

from __future__ import annotations

import concurrent.futures
import multiprocessing
import os
import platform
import resource
import statistics
import sys
import tempfile
import time


def _phase(kind: str, persons: int, repeats: int, out: str | None) -> dict:
    """Run in a fresh process: warm up, time ``repeats`` runs, report the process's peak RSS."""
    from hierarchy.synth import synthesize_1940, write_synthetic_1940

    def once(n: int, seed: int) -> tuple[float, float]:
        start, cpu = time.perf_counter(), time.process_time()
        if kind == "in-memory":
            data = synthesize_1940(n, seed=seed)
            del data
        else:
            with tempfile.TemporaryDirectory(dir=out) as tmp:
                write_synthetic_1940(tmp, n, seed=seed)
        return time.perf_counter() - start, time.process_time() - cpu

    once(max(persons // 10, 49), 0)
    timings = [once(persons, seed) for seed in range(1, repeats + 1)]
    median = statistics.median(t for t, _ in timings)
    return {"seconds": median, "persons_per_second": persons / median,
            "all_seconds": [t for t, _ in timings],
            "cpu_seconds": statistics.median(c for _, c in timings),
            "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def run(persons: int = 10_000_000, repeats: int = 3, *, out: str | None = None) -> dict:
    """Median time and throughput of in-memory generation and of writing Parquet.

    Parameters
    ----------
    persons : int, optional
        Persons per run.
    repeats : int, optional
        Timed runs per phase (seeds 1..repeats); the median is reported.
    out : str, optional
        Directory for the temporary Parquet files (default: the system temporary directory).

    Returns
    -------
    dict
        ``{"persons", "repeats", "machine", "in-memory": {...}, "parquet": {...}}``, each phase
        with ``seconds`` (median wall-clock), ``persons_per_second``, ``all_seconds``,
        ``cpu_seconds`` (median CPU time of the process: the figure to trust on a busy machine)
        and ``peak_rss_mib``.

    Examples
    --------
    >>> result = run(persons=20_000, repeats=1)
    >>> sorted(result["in-memory"])
    ['all_seconds', 'cpu_seconds', 'peak_rss_mib', 'persons_per_second', 'seconds']
    """
    result = {"persons": persons, "repeats": repeats,
              "machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs"}
    context = multiprocessing.get_context("spawn")
    for kind in ("in-memory", "parquet"):
        with concurrent.futures.ProcessPoolExecutor(1, mp_context=context) as pool:
            result[kind] = pool.submit(_phase, kind, persons, repeats, out).result()
    return result


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if not a.startswith("--out")]
    out_dir = next((a.split("=", 1)[1] for a in sys.argv[1:] if a.startswith("--out=")), None)
    n = int(float(args[0])) if args else 10_000_000
    reps = int(args[1]) if len(args) > 1 else 3
    res = run(n, reps, out=out_dir)

    def persons_cpu(r: dict) -> float:
        return res["persons"] / r["cpu_seconds"]

    print(f"synthetic 1940 microdata, {res['persons']:,} persons, median of {res['repeats']} "
          f"runs ({res['machine']})")
    for phase in ("in-memory", "parquet"):
        r = res[phase]
        print(f"  {phase:10s} {r['seconds']:7.2f} s  {r['persons_per_second'] / 1e6:6.2f}M "
              f"persons/s  (CPU {r['cpu_seconds']:.2f} s: {persons_cpu(r) / 1e6:.2f}M persons per "
              f"CPU-second)  peak RSS {r['peak_rss_mib']:,.0f} MiB")
