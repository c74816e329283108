"""The full 1940-scale ``postproc run``: total, per-phase and per-level time, peak memory.

Run ``python benchmarks/full_run.py [--persons 132.2M] [--executor serial] [--workers 2]``
(``--help`` for all options). It prints markdown: the date, machine, commit and load average at
start and end, a summary against the targets, the phases and the levels.

1. **Data** — ``write_synthetic_1940(DATA, persons, seed=--seed)`` in a child process, unless
   ``DATA`` (``--data``, default ``WORKDIR/data-<persons>-seed<seed>``) already holds the same
   persons and seed from an earlier run (then it is reused; ``bench-data.json`` records them).
2. **Config** — ``WORKDIR/config-<persons>.toml``: the E2E configuration of
   ``examples/e2e1940.toml`` (192-cell schema, 4 levels, E2E workload, pure-DP E2E budget at
   ``--epsilon``, geometric mechanism, simulation seed ``--noise-seed``, E2E spec, the default
   solver chain) with ``--executor`` and ``--workers``.
3. **Run** — after one untimed warm-up run on 50,000 persons (cold caches; ``--no-warmup``
   skips it), ``python -m postproc run CONFIG --out OUT --no-progress`` in a child process under
   ``/usr/bin/time -v``, ``--repeats`` times (a fresh ``OUT`` each time; removed afterwards unless
   ``--keep``). Wall time is measured around the child (it includes the interpreter's start and
   imports); the phases (read + tabulate, measure, TopDown, write) come from the manifest's
   ``pipeline_timings``, the per-level wall times from ``provenance.timings.levels`` and the fit
   and rounding seconds per level from ``levels`` (solver seconds summed over the level's parents:
   with a process pool or Dask they add up the workers' time, so they can exceed the level's wall
   time). Peak memory is reported twice: ``/usr/bin/time -v``'s maximum resident set size (the
   largest *single* process — the issue's measure; with a process pool or Dask, workers are
   separate processes) and the largest sum of resident memory over the whole process tree,
   sampled every 0.2 s (errs high: shared pages count once per process; may miss a spike shorter
   than the interval).

Targets: the whole run in under 15 minutes (issue 3) and in ≤ 5 minutes within 12 GiB peak
(issue 7), on the 2-core machine. Nothing here asserts them; the figures need a quiet machine.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _common as common  # noqa: E402

LEVELS = ["nation", "state", "county", "enum_dist"]
PHASES = ("read_tabulate", "measure", "topdown", "write")
PHASE_LABEL = {"read_tabulate": "read + tabulate", "measure": "measure (+ save noisy)",
               "topdown": "TopDown (incl. executor start-up, checkpoints)",
               "write": "write outputs + manifest"}
OTHER_LABEL = ("other: interpreter start, imports, config, and the error table the CLI prints "
               "after the pipeline")
WARMUP_PERSONS = 50_000
ISSUE3_SECONDS = 15 * 60
ISSUE7_SECONDS = 5 * 60
ISSUE7_MEMORY = 12 * 2 ** 30


def generate(directory: str, persons: int, seed: int) -> dict[str, Any]:
    """Write the synthetic data (child process) and record what was written."""
    from hierarchy.synth import write_synthetic_1940

    summary = write_synthetic_1940(directory, persons, seed=seed)
    record = {"persons": persons, "seed": seed, "summary": summary}
    (Path(directory) / "bench-data.json").write_text(json.dumps(record))
    return summary


def ensure_data(directory: Path, persons: int, seed: int,
                log=lambda msg: print(msg, file=sys.stderr)) -> dict[str, Any]:
    """Reuse ``directory`` when it holds the same persons and seed; otherwise generate."""
    marker = directory / "bench-data.json"
    if marker.exists() and (directory / "persons.parquet").exists() and \
            (directory / "units.parquet").exists():
        record = json.loads(marker.read_text())
        if record.get("persons") == persons and record.get("seed") == seed:
            log(f"[full_run] reusing {persons:,} persons (seed {seed}) in {directory}")
            return {"reused": True, **record["summary"]}
    directory.mkdir(parents=True, exist_ok=True)
    log(f"[full_run] writing {persons:,} synthetic persons (seed {seed}) to {directory} ...")
    out = common.run_python("full_run", "generate",
                            {"directory": str(directory), "persons": persons, "seed": seed})
    return {"reused": False, **out["result"],
            "process_max_rss_bytes": out["process"].get("max_rss_bytes")}


def write_config(path: Path, data: Path, *, epsilon: float, noise_seed: int, executor: str,
                 workers: int | None) -> Path:
    """The E2E configuration (as ``examples/e2e1940.toml``) for ``data``."""
    lines = [
        "# written by benchmarks/full_run.py: the E2E configuration of examples/e2e1940.toml",
        "[data]",
        f"persons = {json.dumps(str(data / 'persons.parquet'))}",
        f"units = {json.dumps(str(data / 'units.parquet'))}",
        "[schema]", 'preset = "e2e_1940"',
        "[geography]", f"levels = {json.dumps(LEVELS)}",
        "[workload]", 'preset = "e2e"',
        "[budget]", 'kind = "pure"', f"total = {float(epsilon)!r}", 'preset = "e2e"',
        'neighbours = "change"',
        "[mechanism]", 'name = "geometric"',
        "[randomness]", 'mode = "simulation"', f"seed = {int(noise_seed)}",
        "[spec]", 'preset = "e2e"',
        "[solver]", 'chain = ["clarabel", "osqp", "cvxpy-ecos", "cvxpy-scs"]',
        f"executor = {json.dumps(executor)}",
    ]
    if workers is not None:
        lines.append(f"workers = {int(workers)}")
    lines += ["failsafe = true", "[output]", f"directory = {json.dumps(str(path.parent / 'out'))}",
              "microdata = false"]
    path.write_text("\n".join(lines) + "\n")
    return path


def run_once(config: Path, out: Path, *, keep: bool = False,
             echo: bool = True) -> dict[str, Any]:
    """One ``postproc run`` in a measured child process; figures from its manifest."""
    if out.exists():
        shutil.rmtree(out)
    load_before = common.load_average()
    measured = common.run_measured(
        [sys.executable, "-m", "postproc", "run", str(config), "--out", str(out),
         "--no-progress"], cwd=common.REPO_DIR, echo_stderr=echo)
    load_after = common.load_average()
    if measured["returncode"] != 0:
        raise RuntimeError(f"postproc run failed (exit {measured['returncode']}):\n"
                           f"{measured['stdout'][-2000:]}\n{measured['stderr'][-4000:]}")
    manifest = json.loads((out / "manifest.json").read_text())
    level_walls = manifest["provenance"]["timings"]["levels"]
    levels = {}
    for lv, s in manifest["levels"].items():
        levels[lv] = {"units": s["units"], "persons": s["persons"], "parents": s["parents"],
                      "seconds": float(level_walls.get(lv, s.get("seconds", 0.0))),
                      "fit_seconds": s["fit_seconds"], "round_seconds": s["round_seconds"],
                      "backends": s.get("backends", {}), "rounding": s.get("rounding", {}),
                      "fallbacks": s.get("fallbacks", 0),
                      "failsafe_nodes": s.get("failsafe_nodes", 0)}
    solver = manifest["provenance"].get("solver", {})
    phases = {k: float(v) for k, v in manifest["pipeline_timings"].items()}
    write_source = "manifest"
    if "write" not in phases:
        # The manifest is written during the write phase, before that phase's time is known:
        # estimate it from file times — the measurements are saved just before TopDown starts,
        # the final checkpoint is the last file the write phase writes.
        noisy_files = [p for p in (out / "noisy").rglob("*") if p.is_file()]
        checkpoint = out / "checkpoint.json"
        if noisy_files and checkpoint.exists() and "topdown" in phases:
            measured_end = max(p.stat().st_mtime for p in noisy_files)
            phases["write"] = max(0.0, checkpoint.stat().st_mtime - measured_end
                                  - phases["topdown"])
            write_source = "file times"
    if not keep:
        shutil.rmtree(out, ignore_errors=True)
    return {"wall_seconds": measured["wall_seconds"],
            "elapsed_seconds": measured.get("elapsed_seconds"),
            "user_seconds": measured.get("user_seconds"),
            "system_seconds": measured.get("system_seconds"),
            "max_rss_bytes": measured.get("max_rss_bytes"),
            "tree_peak_rss_bytes": measured.get("tree_peak_rss_bytes"),
            "rss_source": measured.get("rss_source"),
            "phases": phases, "write_source": write_source,
            "topdown_total": manifest["provenance"]["timings"].get("total"),
            "levels": levels, "executor": solver.get("executor"),
            "workers": solver.get("workers"), "load_before": load_before,
            "load_after": load_after, "output": str(out) if keep else None}


def run(persons: int = 132_200_000, *, executor: str = "serial", workers: int | None = None,
        repeats: int = 1, seed: int = 1, noise_seed: int = 1940, epsilon: float = 1.0,
        data: str | None = None, workdir: str | None = None, keep: bool = False,
        warmup: bool = True, echo: bool = True) -> dict[str, Any]:
    """Generate (or reuse) the data and time ``repeats`` full ``postproc run``\\ s.

    Parameters
    ----------
    persons : int
        Synthetic persons.
    executor : {'serial', 'process', 'dask'}
    workers : int, optional
        Workers of the process pool or Dask cluster (the library's default when omitted).
    repeats : int
        Runs; medians are reported, the peak memory is the largest.
    seed, noise_seed : int
        Seeds of the synthetic data and of the noise (simulation mode).
    epsilon : float
        Total ε.
    data : str, optional
        Data directory (reused when it holds the same persons and seed).
    workdir : str, optional
        Directory for data, config and outputs; default: a temporary directory removed at the
        end. A given workdir is kept (its data can be reused), outputs are removed unless
        ``keep``.
    keep : bool
        Keep the outputs (and a temporary workdir).
    warmup : bool
        First one untimed ``postproc run`` of 50,000 persons with the same configuration, so
        that the timed runs do not pay for cold caches (the interpreter's and libraries' files,
        first-time compilation).
    echo : bool
        Copy the child's stderr (logs) to ours.

    Returns
    -------
    dict
        ``context``, the data summary, every run's figures (``runs``) and ``median``: the
        median wall time, phases and per-level figures over the runs, and the largest peaks.
    """
    if executor not in ("serial", "process", "dask"):
        raise ValueError(f"executor must be serial, process or dask, not {executor!r}")
    context = common.context_start()
    temporary = workdir is None
    base = Path(tempfile.mkdtemp(prefix="dapp-full-run-") if temporary else workdir)
    base.mkdir(parents=True, exist_ok=True)
    try:
        data_dir = Path(data) if data else base / f"data-{persons}-seed{seed}"
        data_summary = ensure_data(data_dir, persons, seed)
        tag = f"{persons}-{executor}{workers or ''}"
        config = write_config(base / f"config-{tag}.toml", data_dir, epsilon=epsilon,
                              noise_seed=noise_seed, executor=executor, workers=workers)
        if warmup:
            small = base / f"data-{WARMUP_PERSONS}-seed{seed}"
            ensure_data(small, WARMUP_PERSONS, seed)
            warm_config = write_config(base / f"config-warmup-{tag}.toml", small,
                                       epsilon=epsilon, noise_seed=noise_seed,
                                       executor=executor, workers=workers)
            print("[full_run] untimed warm-up run ...", file=sys.stderr)
            run_once(warm_config, base / f"out-warmup-{tag}", echo=echo)
        runs = []
        for r in range(repeats):
            print(f"[full_run] postproc run {r + 1}/{repeats}: {persons:,} persons, "
                  f"executor {executor}" + (f" ({workers} workers)" if workers else "") + " ...",
                  file=sys.stderr)
            runs.append(run_once(config, base / f"out-{tag}-{r}", keep=keep, echo=echo))
    finally:
        if temporary and not keep:
            shutil.rmtree(base, ignore_errors=True)
    return {"context": common.context_end(context), "persons": persons, "executor": executor,
            "workers": workers, "repeats": repeats, "seed": seed, "noise_seed": noise_seed,
            "epsilon": epsilon, "warmup": warmup, "data": data_summary, "runs": runs,
            "median": summarize(runs),
            "workdir": None if temporary and not keep else str(base)}


def summarize(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Medians over runs (times) and maxima (memory)."""
    med = common.median
    levels = {}
    for lv in runs[0]["levels"]:
        first = runs[0]["levels"][lv]
        levels[lv] = {**{k: first[k] for k in ("units", "persons", "parents", "backends",
                                                "rounding", "fallbacks", "failsafe_nodes")},
                      **{k: med(r["levels"][lv][k] for r in runs)
                         for k in ("seconds", "fit_seconds", "round_seconds")}}
    phases = {k: med(r["phases"].get(k, float("nan")) for r in runs) for k in PHASES}

    def peak(key: str) -> int | None:
        values = [r[key] for r in runs if r.get(key) is not None]
        return max(values) if values else None
    return {"wall_seconds": med(r["wall_seconds"] for r in runs),
            "wall_runs": [r["wall_seconds"] for r in runs],
            "cpu_seconds": med((r["user_seconds"] or 0) + (r["system_seconds"] or 0)
                               for r in runs),
            "phases": phases, "levels": levels, "max_rss_bytes": peak("max_rss_bytes"),
            "tree_peak_rss_bytes": peak("tree_peak_rss_bytes")}


# -- report ------------------------------------------------------------------------------------

def summary_table(result: dict[str, Any]) -> str:
    m = result["median"]
    wall, rss, tree = m["wall_seconds"], m["max_rss_bytes"], m["tree_peak_rss_bytes"]
    rows = [["total wall time (median)", common.fmt_seconds(wall), "< 15 min (issue 3)",
             common.verdict(wall < ISSUE3_SECONDS)],
            ["total wall time (median)", common.fmt_seconds(wall), "≤ 5 min (issue 7)",
             common.verdict(wall <= ISSUE7_SECONDS)],
            ["peak RSS, largest process (`/usr/bin/time -v`)", common.fmt_bytes(rss),
             "≤ 12 GiB (issue 7)", common.verdict(rss <= ISSUE7_MEMORY) if rss else "n/a"],
            ["peak RSS summed over the process tree (sampled)", common.fmt_bytes(tree),
             "≤ 12 GiB (issue 7)", common.verdict(tree <= ISSUE7_MEMORY) if tree else "n/a"]]
    return common.markdown_table(["measurement", "figure", "target", "meets target"], rows,
                                 "lrrr")


def phase_table(result: dict[str, Any]) -> str:
    m = result["median"]
    wall = m["wall_seconds"]
    estimated = any(r.get("write_source") == "file times" for r in result["runs"])
    rows = []
    for k in PHASES:
        label = PHASE_LABEL[k] + (" (estimated from file times: the manifest is written "
                                  "before this phase ends)" if k == "write" and estimated
                                  else "")
        rows.append([label, f"{m['phases'][k]:.2f}", f"{m['phases'][k] / wall:.0%}"])
    accounted = sum(m["phases"][k] for k in PHASES)
    rows.append([OTHER_LABEL, f"{wall - accounted:.2f}", f"{(wall - accounted) / wall:.0%}"])
    rows.append(["**total wall**", f"{wall:.2f}", "100%"])
    return common.markdown_table(["phase", "seconds (median)", "share"], rows)


def level_table(result: dict[str, Any]) -> str:
    rows = []
    for lv, s in result["median"]["levels"].items():
        backends = ", ".join(f"{k} {v:,}" for k, v in s["backends"].items())
        rounding = ", ".join(f"{k} {v:,}" for k, v in s["rounding"].items())
        rows.append([lv, f"{s['units']:,}", f"{s['parents']:,}", f"{s['seconds']:.2f}",
                     f"{s['fit_seconds']:.2f}", f"{s['round_seconds']:.2f}", backends or "—",
                     rounding or "—", f"{s['fallbacks']:,}", f"{s['failsafe_nodes']:,}"])
    return common.markdown_table(["level", "units", "parents", "wall s", "fit s (solver, summed)",
                                  "rounding s (solver, summed)", "fit backends",
                                  "rounding", "backend fallbacks", "failsafe nodes"], rows,
                                 "lrrrrrllrr")


def report(result: dict[str, Any]) -> str:
    d = result["data"]
    workers = f", {result['workers']} workers" if result["workers"] else ""
    runs = ", ".join(f"{s:.1f}" for s in result["median"]["wall_runs"])
    loads = "; ".join(f"run {i + 1}: {common.fmt_load(r['load_before'])} → "
                      f"{common.fmt_load(r['load_after'])}"
                      for i, r in enumerate(result["runs"]))
    data = (f"{d.get('persons', result['persons']):,} persons, "
            f"{d.get('households', 0):,} households, {d.get('gq_facilities', 0):,} GQ "
            f"facilities, {d.get('counties', 0):,} counties, {d.get('enum_dists', 0):,} EDs "
            f"(seed {result['seed']}; " + ("reused from an earlier run" if d.get("reused") else
                                           f"written in {d.get('seconds', float('nan')):.1f} s")
            + ")")
    return "\n".join([
        (f"## Full `postproc run`, {result['persons']:,} persons, executor "
         f"{result['executor']}{workers}"), "",
        common.describe_context(result["context"]), "",
        (f"Data: {data}. E2E configuration, ε = {result['epsilon']:g}, geometric, simulation "
         f"seed {result['noise_seed']}. "
         + ("After one untimed 50,000-person warm-up run, " if result.get("warmup") else "")
         + f"{result['repeats']} run(s), wall {runs} s; medians below. CPU (user + system, "
         f"median): {result['median']['cpu_seconds']:.1f} s. Load average per run (before → "
         f"after): {loads}. The input files were just "
         "written or read, so they are likely in the page cache (a cold read would be "
         "slower)."), "",
        summary_table(result), "", "### Phases (from the manifest)", "", phase_table(result),
        "", "### Levels", "",
        ("Wall seconds per level from the manifest's `provenance.timings.levels` (fit, "
         "rounding, verification, assembly, checkpoint); fit and rounding are the solvers' "
         "own seconds summed over the level's parents (summed over workers when parallel)."),
        "", level_table(result), ""])


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--persons", type=common.parse_count, default=132_200_000,
                        help="synthetic persons (default 132.2M)")
    parser.add_argument("--executor", choices=["serial", "process", "dask"], default="serial")
    parser.add_argument("--workers", type=int, default=None)
    parser.add_argument("--repeats", type=int, default=1,
                        help="full runs; medians reported (default 1)")
    parser.add_argument("--seed", type=int, default=1, help="seed of the synthetic data")
    parser.add_argument("--noise-seed", type=int, default=1940, help="simulation seed")
    parser.add_argument("--epsilon", type=float, default=1.0)
    parser.add_argument("--data", help="data directory (reused if it holds the same persons "
                                       "and seed)")
    parser.add_argument("--workdir", help="directory for data, config and outputs (kept; "
                                          "default: a temporary directory, removed)")
    parser.add_argument("--keep", action="store_true", help="keep the run outputs")
    parser.add_argument("--no-warmup", action="store_true",
                        help="skip the untimed 50,000-person warm-up run")
    parser.add_argument("--out", help="also write the markdown report to this file")
    parser.add_argument("--json", help="write every raw figure to this JSON file")
    args = parser.parse_args(argv)
    result = run(args.persons, executor=args.executor, workers=args.workers,
                 repeats=args.repeats, seed=args.seed, noise_seed=args.noise_seed,
                 epsilon=args.epsilon, data=args.data, workdir=args.workdir, keep=args.keep,
                 warmup=not args.no_warmup)
    common.emit(report(result), result, out=args.out, json_path=args.json)
    return result


if __name__ == "__main__":
    main()
