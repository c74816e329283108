"""Where the time and memory of the 2020-style (PL 94-171) run go, step by step.

Run from the repository root::

    python benchmarks/bench_pl94.py [--persons 20000,100000,200000,500000,1000000]
        [--seconds 600] [--profile-persons 100000] [--workdir DIR]
        [--out benchmarks/pl94/results.md] [--json benchmarks/pl94/results.json]

Each size runs in a fresh interpreter (:func:`_common.run_python`), so one size's memory cannot
hide another's. The steps are those of ``postproc run`` on the production configuration
(:func:`postproc.apps.runs.demo.demo_config` with ``preset="pl94_2020"``: schema, workload,
budget, spec, the production fit passes and rounder passes; the discrete Gaussian mechanism
with the demo's sampler, the fast simulation one), called one at a time:

* **synthesis** — :func:`hierarchy.synth.census2020.synthesize_2020` streamed to parquet;
* **tabulation** — :func:`postproc.apps.runs.pipeline.load_truth` (read, validate, tabulate);
* **measurement** — :func:`hierarchy.measurement.measure`, split into computing the exact
  answers (the same sparse products, timed alone) and drawing the noise (the rest);
* **TopDown, per level** — :func:`postproc.methods.topdown.topdown` with an ``on_level`` hook,
  and per level the node statistics: solver time (``fit_seconds``), rounding
  (``round_seconds``), and the rest of the per-node work (building the QP, verification);
* **write** — :meth:`postproc.result.Result.write` of the levels.

For each step: wall and CPU seconds, and the peak resident memory during it (the process's peak
is reset before each step, ``/proc/self/clear_refs``; the figure is the peak minus the
resident memory at the step's start, and the absolute peak; because of the resets, the child
process's own maximum RSS in the JSON is that of the last step only). Sizes run in order while
the next one is predicted (linearly in persons from the last) to fit in what is left of
``--seconds``.
Then one profile (:mod:`cProfile`, top functions by own time and by cumulative time) of the
slowest step at ``--profile-persons``.

Nothing is asserted: the script measures and reports (see ``benchmarks/README.md`` on quiet
machines).
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import (  # noqa: E402
    context_end,
    context_start,
    describe_context,
    emit,
    fmt_bytes,
    markdown_table,
    memory_status,
    reset_peak_rss,
    run_python,
)

DEFAULT_SIZES = (20_000, 100_000, 200_000, 500_000, 1_000_000)
STEPS = ("synthesis", "tabulation", "measurement", "topdown", "write")


class _Steps:
    """Times and peak memory of the steps of one run, in this process."""

    def __init__(self):
        self.figures: dict[str, dict[str, Any]] = {}

    def run(self, name: str, function: Callable[[], Any]) -> Any:
        reset_peak_rss()
        before = memory_status()["rss"]
        t, cpu = time.perf_counter(), time.process_time()
        out = function()
        seconds, cpu = time.perf_counter() - t, time.process_time() - cpu
        peak = memory_status()["peak"]
        self.figures[name] = {"seconds": seconds, "cpu_seconds": cpu, "peak_rss": peak,
                              "peak_increase": max(peak - before, 0)}
        return out


def _configure(persons: int, workdir: str, seed: int):
    """Synthesize (if not done) and build the demo's pl94_2020 configuration in ``workdir``."""
    from postproc.apps.runs.demo import demo_config

    return demo_config(Path(workdir), preset="pl94_2020", seed=seed)


def _synthesize(persons: int, workdir: str, seed: int) -> dict[str, Any]:
    from hierarchy.synth.census2020 import synthesize_2020

    return synthesize_2020(persons, seed=seed, out=Path(workdir) / "data", overwrite=True)


def _answers_seconds(truth, config) -> float:
    """Seconds to compute the exact answers ``measure`` adds noise to (no noise)."""
    t = time.perf_counter()
    for li, level in enumerate(truth.levels):
        counts = truth.counts[li]
        for name in config.budget.queries(level):
            query = config.workload[name]
            if query.expression != "detailed":
                query.answer(counts)
    return time.perf_counter() - t


def _sampler_rate(config, draws: int = 2_000_000) -> dict[str, float]:
    """Draws per second of the configured sampler alone, at the block level's detailed σ²."""
    import numpy as np

    level = config.levels[-1]
    sigma2 = float(config.budget.noise_parameter(level, config.workload["detailed"],
                                                 config.mechanism))
    rng = np.random.default_rng(0)
    t = time.perf_counter()
    config.mechanism.sample(sigma2, (draws,), rng)
    seconds = time.perf_counter() - t
    return {"sigma2": sigma2, "draws": draws, "draws_per_second": draws / seconds}


def _level_stats(result) -> dict[str, dict[str, float]]:
    stats = result.node_stats
    out = {}
    for level, frame in stats.groupby("level", sort=False):
        out[str(level)] = {"parents": int(len(frame)), "children": int(frame["children"].sum()),
                           "variables": int(frame["variables"].sum()),
                           "fit_seconds": float(frame["fit_seconds"].sum()),
                           "round_seconds": float(frame["round_seconds"].sum()),
                           "node_seconds": float(frame["seconds"].sum()),
                           "slowest_node_seconds": float(frame["seconds"].max()),
                           "iterations": int(frame["iterations"].sum())}
    return out


def run_size(persons: int, workdir: str, seed: int = 2020) -> dict[str, Any]:
    """One size, every step (called in a fresh interpreter by :func:`main`)."""
    from hierarchy.measurement import measure
    from postproc.apps.runs.pipeline import load_truth, method_options
    from postproc.methods.topdown import topdown

    steps = _Steps()
    made = steps.run("synthesis", lambda: _synthesize(persons, workdir, seed))
    config = _configure(persons, workdir, seed)
    truth = steps.run("tabulation", lambda: load_truth(config))
    noisy = steps.run("measurement", lambda: measure(
        truth, config.workload, config.budget, config.mechanism, config.rng,
        publish=config.publish()))
    answers = _answers_seconds(truth, config)
    draws = sum(noisy.get(lv, q).values.size for lv in noisy.levels for q in noisy.queries(lv))
    levels: dict[str, dict[str, Any]] = {}
    clock = {"t": 0.0, "cpu": 0.0, "rss": 0}

    def start_level() -> None:
        reset_peak_rss()
        clock.update(t=time.perf_counter(), cpu=time.process_time(),
                     rss=memory_status()["rss"])

    def on_level(li: int, hist, partial) -> None:
        peak = memory_status()["peak"]
        levels[config.levels[li]] = {
            "seconds": time.perf_counter() - clock["t"],
            "cpu_seconds": time.process_time() - clock["cpu"], "peak_rss": peak,
            "peak_increase": max(peak - clock["rss"], 0), "units": int(hist.shape[0])}
        start_level()

    start_level()
    result = steps.run("topdown", lambda: topdown(
        noisy, config.spec, on_level=on_level, **method_options(config, "topdown")))
    with tempfile.TemporaryDirectory(dir=workdir) as out:
        steps.run("write", lambda: result.write(Path(out) / "run"))
    dense = {lv: {"units": int(c.shape[0]), "bytes": int(c.nbytes)}
             for lv, c in zip(truth.levels, truth.counts)}
    noisy_bytes = {lv: int(sum(noisy.get(lv, q).values.nbytes for q in noisy.queries(lv)))
                   for lv in noisy.levels}
    return {"persons": persons, "synthesis": made, "steps": steps.figures, "levels": levels,
            "node_stats": _level_stats(result), "measurement": {
                "draws": int(draws), "answers_seconds": answers,
                "noise_seconds": steps.figures["measurement"]["seconds"] - answers,
                "sampler": noisy.provenance.get("sampler"),
                "sampler_alone": _sampler_rate(config)},
            "dense_counts": dense, "noisy_values_bytes": noisy_bytes,
            "failsafe_reports": len(result.provenance.get("failsafe_reports", []))}


def profile_step(persons: int, workdir: str, step: str, seed: int = 2020,
                 top: int = 25) -> dict[str, str]:
    """cProfile of one step (``"measurement"``, ``"topdown"`` or ``"tabulation"``) at
    ``persons``, the steps before it run unprofiled."""
    from hierarchy.measurement import measure
    from postproc.apps.runs.pipeline import load_truth, method_options
    from postproc.methods.topdown import topdown

    _synthesize(persons, workdir, seed)
    config = _configure(persons, workdir, seed)
    calls = {
        "tabulation": lambda: load_truth(config),
        "measurement": lambda truth: measure(truth, config.workload, config.budget,
                                             config.mechanism, config.rng,
                                             publish=config.publish()),
        "topdown": lambda noisy: topdown(noisy, config.spec,
                                         **method_options(config, "topdown"))}
    profiler = cProfile.Profile()
    value = None
    for name in ("tabulation", "measurement", "topdown"):
        if name == step:
            profiler.enable()
        value = calls[name]() if name == "tabulation" else calls[name](value)
        if name == step:
            profiler.disable()
            break
    out = {}
    for key in ("tottime", "cumulative"):
        text = io.StringIO()
        pstats.Stats(profiler, stream=text).strip_dirs().sort_stats(key).print_stats(top)
        out[key] = text.getvalue()
    return out


# -- the report ------------------------------------------------------------------------------

def _s(x: float) -> str:
    return f"{x:.2f}" if x < 10 else f"{x:.1f}"


def _report(sizes: list[dict[str, Any]], profile: dict[str, Any] | None,
            context: dict[str, Any], command: str) -> str:
    lines = ["# The 2020-style (PL 94-171) run: where the time and memory go", "",
             f"Command: `{command}`", "", describe_context(context), "",
             "Configuration: `postproc demo --preset pl94_2020` (production schema, workload, "
             "budget ρ = (542/339)², spec; the production fit and rounder passes; "
             "discrete Gaussian with the demo's fast simulation sampler; serial executor; "
             "clarabel first).",
             "", "## Time per step (wall seconds)", ""]
    rows = []
    for r in sizes:
        st = r["steps"]
        total = sum(st[s]["seconds"] for s in STEPS)
        rows.append([f"{r['persons']:,}"] + [_s(st[s]["seconds"]) for s in STEPS]
                    + [_s(total), f"{r['persons'] / total:,.0f}"])
    lines.append(markdown_table(["persons", *STEPS, "total", "persons/s"], rows))
    lines += ["", "## Peak resident memory per step (increase over the step's start / absolute)",
              ""]
    rows = [[f"{r['persons']:,}"] + [f"{fmt_bytes(r['steps'][s]['peak_increase'])} / "
                                     f"{fmt_bytes(r['steps'][s]['peak_rss'])}" for s in STEPS]
            for r in sizes]
    lines.append(markdown_table(["persons", *STEPS], rows))
    lines += ["", "## TopDown per level", "",
              "Seconds of the level (wall), then the node statistics summed over the level's "
              "parents: the QP solver (`fit`), rounding (`round`), the rest of the per-node "
              "work (`other`: building the QP, verification), the slowest parent; peak memory "
              "increase during the level.", ""]
    rows = []
    for r in sizes:
        for lv, fig in r["levels"].items():
            ns = r["node_stats"].get(lv, {})
            other = ns.get("node_seconds", 0) - ns.get("fit_seconds", 0) - ns.get(
                "round_seconds", 0)
            rows.append([f"{r['persons']:,}", lv, f"{fig['units']:,}",
                         f"{ns.get('parents', 0):,}", _s(fig["seconds"]),
                         _s(ns.get("fit_seconds", 0)), _s(ns.get("round_seconds", 0)),
                         _s(other), _s(ns.get("slowest_node_seconds", 0)),
                         f"{ns.get('variables', 0):,}", fmt_bytes(fig["peak_increase"])])
    lines.append(markdown_table(["persons", "level", "units", "parents", "seconds", "fit",
                                 "round", "other", "slowest parent", "QP variables",
                                 "peak +"], rows))
    lines += ["", "## Measurement: answers and noise", ""]
    rows = []
    for r in sizes:
        m = r["measurement"]
        rows.append([f"{r['persons']:,}", f"{m['draws']:,}", _s(m["answers_seconds"]),
                     _s(m["noise_seconds"]),
                     f"{m['draws'] / max(m['noise_seconds'], 1e-9) / 1e6:.2f}M",
                     f"{m['sampler_alone']['draws_per_second'] / 1e6:.2f}M",
                     str(m["sampler"])])
    lines.append(markdown_table(["persons", "noise draws", "answers s", "noise s",
                                 "draws/s in measure", "sampler alone (block σ²)",
                                 "sampler"], rows))
    lines += ["", "## Dense arrays", "",
              "Bytes of the truth's dense units × 2,016-cell int64 arrays per level, and of "
              "the noisy answers of all queries per level (the run holds both, and TopDown's "
              "output again).", ""]
    rows = []
    for r in sizes:
        dense, noisy = r["dense_counts"], r["noisy_values_bytes"]
        rows.append([f"{r['persons']:,}"] + [f"{dense[lv]['units']:,} / "
                                             f"{fmt_bytes(dense[lv]['bytes'])} / "
                                             f"{fmt_bytes(noisy.get(lv, 0))}" for lv in dense])
    levels = list(sizes[0]["dense_counts"]) if sizes else []
    lines.append(markdown_table(["persons", *[f"{lv}: units / truth / noisy" for lv in levels]],
                                rows))
    if profile:
        lines += ["", f"## Profile: {profile['step']} at {profile['persons']:,} persons", "",
                  "Top functions by own time:", "", "```", profile["tottime"].strip(), "```",
                  "", "By cumulative time:", "", "```", profile["cumulative"].strip(), "```"]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--persons", default=",".join(map(str, DEFAULT_SIZES)))
    parser.add_argument("--seconds", type=float, default=600.0,
                        help="wall-clock budget for the sizes (default 600)")
    parser.add_argument("--profile-persons", type=int, default=100_000)
    parser.add_argument("--no-profile", action="store_true")
    parser.add_argument("--workdir", default=None)
    parser.add_argument("--out", default=None)
    parser.add_argument("--json", default=None)
    args = parser.parse_args(argv)
    command = "python benchmarks/bench_pl94.py " + " ".join(argv if argv is not None
                                                            else sys.argv[1:])
    sizes = [int(s.replace("_", "")) for s in args.persons.split(",")]
    context = context_start()
    results: list[dict[str, Any]] = []
    skipped: list[int] = []
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(dir=args.workdir) as work:
        for n in sizes:
            left = args.seconds - (time.perf_counter() - t0)
            if results:
                last = results[-1]
                predicted = last["process"]["wall_seconds"] * n / last["persons"]
                if predicted > left:
                    skipped.append(n)
                    continue
            print(f"bench_pl94: {n:,} persons …", file=sys.stderr)
            out = run_python("bench_pl94", "run_size", {"persons": n,
                                                        "workdir": f"{work}/n{n}"})
            figures = out["result"]
            figures["process"] = out["process"]
            results.append(figures)
        profile = None
        if not args.no_profile and results:
            at = min(results, key=lambda r: abs(r["persons"] - args.profile_persons))
            slowest = max(("tabulation", "measurement", "topdown"),
                          key=lambda s: at["steps"][s]["seconds"])
            print(f"bench_pl94: profiling {slowest} at {at['persons']:,} persons …",
                  file=sys.stderr)
            profile = run_python("bench_pl94", "profile_step", {
                "persons": at["persons"], "workdir": f"{work}/profile", "step": slowest}
            )["result"]
            profile.update(step=slowest, persons=at["persons"])
    context = context_end(context)
    text = _report(results, profile, context, command)
    if skipped:
        text += ("\n\nNot run (predicted past the --seconds budget): "
                 + ", ".join(f"{n:,}" for n in skipped) + " persons.")
    result = {"context": context, "command": command, "sizes": results, "profile": profile,
              "skipped": skipped}
    emit(text, result, out=args.out, json_path=args.json)
    return result


if __name__ == "__main__":
    main()
