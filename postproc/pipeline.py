"""The whole path of ``postproc run``: read, tabulate, measure, TopDown, write — resumable.

Output directory::

    noisy/                 the NoisyHierarchy (measured once; reused on --resume)
    <level>.parquet        post-processed histograms, long form, written as each level finishes
    checkpoint.json        levels completed so far and the config's fingerprint
    node_stats.parquet     per-parent solver statistics
    manifest.json          config, versions, randomness mode, accounting, solver statistics,
                           timings, failsafe reports
    microdata.parquet      synthetic microdata from the bottom level (if asked for)

Every file is written atomically; the checkpoint is updated only after its level's parquet is in
place, so an interrupted run resumes from the last complete level and, because measurements are
reloaded and every solver is deterministic, finishes with identical results. The node statistics
are saved with each level too, so a resumed run's manifest still counts the earlier levels' work.
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from hierarchy.histograms import Hierarchy
from hierarchy.io import check_tabulated_units, read_microdata
from hierarchy.measure import measure
from hierarchy.noisy import NoisyHierarchy
from hierarchy.storage import read_json, write_json, write_parquet
from hierarchy.tabulate import tabulate
from invariants.compile import compile_spec
from postproc.config import RunConfig
from postproc.errors import PostprocError
from postproc.topdown import TopDownResult, histograms_from_table, level_table, topdown

__all__ = ["run_pipeline", "validate_config", "PipelineResult", "load_truth", "accounting"]


@dataclass(frozen=True, eq=False)
class PipelineResult:
    result: TopDownResult
    noisy: NoisyHierarchy
    truth: Hierarchy
    directory: Path
    timings: dict[str, float]


def _fingerprint(config: RunConfig) -> str:
    raw = json.dumps(config.raw, sort_keys=True, default=str)
    return hashlib.sha256(raw.encode()).hexdigest()[:16]


def load_truth(config: RunConfig) -> Hierarchy:
    """Read, validate and tabulate the configured microdata."""
    data = read_microdata(config.persons, schema=config.schema, levels=config.levels,
                          columns=config.columns, values=config.values, units=config.units,
                          unit_attribute=config.spec.unit_attribute, check_units=False)
    truth = tabulate(data.persons, schema=config.schema, levels=config.levels,
                     units=data.units,
                     unit_attribute=config.spec.unit_attribute if data.units is not None
                     else None)
    check_tabulated_units(truth, data)
    return truth


def accounting(config: RunConfig) -> dict[str, Any]:
    """Privacy accounting of the configured measurements, per level and query and in total."""
    from postproc.accounting import account_levels

    b = config.budget
    budgets = {lv: {q: b.query_budget(lv, q) for q in b.queries(lv)} for lv in b.levels}
    sens = {q.name: int(round(b.sensitivity(q)[0])) for q in config.workload}
    notion = "pure" if b.kind == "pure" else "zcdp"
    try:
        out = account_levels(budgets, notion=notion, sensitivity=sens).to_dict()
    except PostprocError as exc:  # accounting is reported, never blocks a run
        return {"error": str(exc)}
    out["mechanism_configured"] = config.mechanism.name
    if out.get("mechanism") != config.mechanism.name:
        # Pure-DP ε and zCDP ρ compose the same for every mechanism of the notion; the RDP curve
        # is the assumed mechanism's own, so it does not describe the configured one.
        out["note"] = (f"rdp_epsilon values are for the {out.get('mechanism')} mechanism's RDP "
                       f"curve; this run used {config.mechanism.name}, so they are omitted "
                       "(pure_epsilon, rho and the zCDP conversions hold)")
        for entry in _loss_entries(out):
            entry["rdp_epsilon"] = None
    return out


def _loss_entries(accounting_dict: dict[str, Any]):
    """Every ``loss`` mapping inside an accounting report (per query, per level, total)."""
    stack = [accounting_dict]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            if isinstance(node.get("loss"), dict):
                yield node["loss"]
            stack.extend(v for k, v in node.items() if k != "loss")


def validate_config(config: RunConfig, *, log: Callable[[str], None] = print) -> Hierarchy:
    """Check a configuration end to end without measuring: data, geography, spec and its data.

    Returns the tabulated truth (kept in memory only).
    """
    t0 = time.perf_counter()
    truth = load_truth(config)
    log(f"data: {truth.summary()[config.levels[0]]['persons']:,} persons; "
        + ", ".join(f"{lv} {truth.geography.n_units(lv):,}" for lv in config.levels))
    config.budget.check_against(config.workload, config.levels)
    from hierarchy.measure import published_statistics

    stats = published_statistics(truth, config.publish())
    compiled = compile_spec(config.spec, config.schema, truth.geography, stats)
    for lv in config.levels:
        lc = compiled[lv]
        log(f"spec at {lv}: {lc.n_rows} constraint rows from "
            f"{', '.join(lc.constraint_names()) or 'nothing'}; "
            f"{int(lc.zero.sum()):,} zero cells over {lc.n_units:,} units")
    from invariants.compile import violations

    for lv in config.levels:
        bad = violations(compiled[lv], truth.level_counts(lv))
        if bad:
            raise PostprocError("the confidential data itself violates the spec (so no release "
                                "could satisfy it):\n  " + "\n  ".join(bad))
    log(f"configuration valid ({time.perf_counter() - t0:.1f} s)")
    return truth


def run_pipeline(config: RunConfig, *, out: Path | str | None = None, resume: bool = False,
                 progress: bool = True, log: Callable[[str], None] = print) -> PipelineResult:
    """Run the configured job, writing outputs (and checkpoints) to ``out``.

    Raises
    ------
    PostprocError
        If ``out`` already holds a run and ``resume`` is off (nothing is overwritten), or the
        checkpoint belongs to a different configuration.
    """
    directory = Path(out) if out is not None else config.output
    timings: dict[str, float] = {}
    checkpoint_path = directory / "checkpoint.json"
    fingerprint = _fingerprint(config)
    completed: list[str] = []
    if directory.exists() and not directory.is_dir():
        raise PostprocError(f"{directory} exists and is not a directory; choose another --out")
    if directory.exists() and any(directory.iterdir()):
        if not resume:
            raise PostprocError(f"{directory} already holds outputs; use --resume to finish an "
                                "interrupted run there, or choose another --out")
        if checkpoint_path.exists():
            cp = read_json(checkpoint_path)
            if cp.get("config") != fingerprint:
                raise PostprocError(f"{directory} was started with a different configuration; "
                                    "resume with the same config or choose another --out")
            completed = list(cp.get("completed", []))
            if cp.get("finished"):
                log(f"{directory}: run already finished; nothing to resume")
    directory.mkdir(parents=True, exist_ok=True)
    if config.randomness_mode == "simulation":
        log("SIMULATION MODE: seeded randomness, reproducible by anyone with the seed — outputs "
            "are labelled NOT SAFE FOR RELEASE")
    t = time.perf_counter()
    truth = load_truth(config)
    timings["read_tabulate"] = time.perf_counter() - t
    noisy_dir = directory / "noisy"
    t = time.perf_counter()
    if resume and (noisy_dir / "metadata.json").exists():
        noisy = NoisyHierarchy.load(noisy_dir)
        log(f"resume: loaded measurements from {noisy_dir}")
    else:
        noisy = measure(truth, config.workload, config.budget, config.mechanism, config.rng,
                        publish=config.publish())
        noisy.save(noisy_dir, overwrite=True)
        write_json({"config": fingerprint, "completed": []}, checkpoint_path)
        completed = []
    timings["measure"] = time.perf_counter() - t
    hists = []
    for lv in completed:
        table = pq.read_table(directory / f"{lv}.parquet")
        hists.append(histograms_from_table(table, config.schema, noisy.geography, lv,
                                           source=str(directory / f"{lv}.parquet")))
    stats_path = directory / "node_stats.parquet"
    earlier_stats = pd.DataFrame()
    if completed:
        log(f"resume: levels {completed} already done")
        if stats_path.exists():  # solver statistics of the levels done before the interruption
            earlier = pq.read_table(stats_path).to_pandas()
            earlier_stats = earlier[earlier["level"].isin(completed)]
    label = noisy.provenance.get("randomness", {}).get("label")
    meta = {"randomness_label": label, "schema": config.schema.to_dict()}

    def on_level(li: int, hist: np.ndarray, partial: TopDownResult) -> None:
        lv = noisy.levels[li]
        write_parquet(level_table(config.schema, noisy.geography, lv, hist),
                      directory / f"{lv}.parquet", metadata=meta)
        stats = _join_stats(earlier_stats, partial.node_stats)
        if len(stats):
            write_parquet(pa.Table.from_pandas(stats, preserve_index=False), stats_path,
                          metadata=meta)
        done = list(noisy.levels[:li + 1])
        write_json({"config": fingerprint, "completed": done}, checkpoint_path)

    t = time.perf_counter()
    with _executor(config) as ex:
        result = topdown(noisy, config.spec, solver=config.solver_chain, executor=ex,
                         failsafe=config.failsafe, passes=config.passes, progress=progress,
                         start=(len(hists), hists) if hists else None, on_level=on_level)
    timings["topdown"] = time.perf_counter() - t
    result = replace(result, node_stats=_join_stats(earlier_stats, result.node_stats))
    t = time.perf_counter()
    extra = {"config": config.to_dict(), "accounting": accounting(config),
             "pipeline_timings": timings, "resumed_levels": completed}
    result.write(directory, levels=[lv for lv in noisy.levels if lv not in completed],
                 extra_manifest=extra)
    if config.microdata:
        write_parquet(result.to_microdata(), directory / "microdata.parquet", metadata=meta)
    write_json({"config": fingerprint, "completed": list(noisy.levels), "finished": True},
               checkpoint_path)
    timings["write"] = time.perf_counter() - t
    return PipelineResult(result, noisy, truth, directory, timings)


def _join_stats(earlier: pd.DataFrame, new: pd.DataFrame) -> pd.DataFrame:
    """Node statistics of the levels done before a resume followed by this run's."""
    frames = [f for f in (earlier, new) if len(f)]
    return pd.concat(frames, ignore_index=True) if len(frames) > 1 else (frames or [new])[0]


def _executor(config: RunConfig):
    from postproc.executors import get_executor

    return get_executor(config.executor, workers=config.workers, scheduler=config.scheduler)
