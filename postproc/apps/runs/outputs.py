"""What a run writes (:mod:`postproc.apps.runs.pipeline`) once its data are post-processed: the
level files, node statistics and manifest (:meth:`postproc.result.Result.write`) with the run's
records — configuration, privacy accounting, the post-processing, timings, what a resume
changed, the release files — and the microdata; the outputs an earlier post-processing of the
same measurements wrote and this one does not are removed.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hierarchy.io.storage import CONFIDENTIAL_DIR, write_parquet
from hierarchy.noisy import NoisyHierarchy
from postproc.apps.runs.checkpoint import Checkpoint
from postproc.apps.runs.config import RunConfig
from postproc.errors import PostprocError
from postproc.methods.registry import method_rng, method_spec
from postproc.result import Result

__all__ = ["accounting"]


@dataclass(frozen=True)
class _PostProcessed:
    """What post-processing gave: the result, the levels this session wrote and those a
    resumed run took as done, and whether the method runs level by level (TopDown)."""

    result: Result
    written: list[str]
    completed: list[str]
    levelwise: bool


def _write_outputs(config: RunConfig, directory: Path, noisy: NoisyHierarchy,
                   done: _PostProcessed, checkpoint: Checkpoint,
                   timings: dict[str, float]) -> None:
    """The result's files and manifest, the microdata if asked for; then the outputs this
    post-processing does not make removed, and the checkpoint marked finished."""
    result = done.result
    release_files = ["manifest.json", "checkpoint.json", "geography.parquet"] + (
        ["node_stats.parquet"] if len(result.node_stats) or done.levelwise else []) + [
        "noisy/"] + [f"{lv}.parquet" for lv in noisy.levels] + (
        ["microdata.parquet"] if config.microdata else [])
    entry = _registered(config.method)
    extra = {"config": config.to_dict(), "accounting": accounting(config),
             "postprocess": {"method": config.method,
                             "options": _json_options(config.method_options),
                             "promises": list(entry.promises),
                             "constrained": method_spec(config.method, config.spec) is not None,
                             "randomness": (method_rng(config.rng, config.method).provenance()
                                            if entry.randomized else None)},
             "pipeline_timings": timings, "resumed_levels": done.completed,
             "postprocess_changes": checkpoint.changes,
             "release": {"release_files": release_files,
                         "not_for_release": f"{CONFIDENTIAL_DIR}/ (computed from the "
                                            "confidential data: never publish it)"}}
    result.write(directory, levels=done.written, extra_manifest=extra)
    if config.microdata:
        meta = {"randomness_label": noisy.provenance.get("randomness", {}).get("label"),
                "schema": config.schema.to_dict()}
        write_parquet(result.to_microdata(), directory / "microdata.parquet", metadata=meta)
    # what an earlier post-processing of these measurements wrote and this one does not
    _remove_outputs(directory, [name for name in ("node_stats.parquet", "microdata.parquet")
                                if name not in release_files])
    checkpoint.completed, checkpoint.finished = list(noisy.levels), True
    checkpoint.save()


def accounting(config: RunConfig) -> dict[str, Any]:
    """Privacy accounting of the configured measurements, per level and query and in total.

    Reported in every notion (pure ε where it applies, ρ, RDP and zCDP conversions to
    (ε, δ)); written to the run's manifest. An accounting error is reported in the result
    (``{"error": message}``), never raised: it must not block a run.

    Parameters
    ----------
    config : RunConfig

    Returns
    -------
    dict
        ``notion``, ``mechanism``, ``delta``, ``composition``, ``levels`` (per level and
        query) and ``total``.

    Examples
    --------
    >>> config = RunConfig.build(persons="persons.parquet", levels=["nation", "state"],
    ...                          budget=1, seed=1)
    >>> report = accounting(config)
    >>> report["notion"], report["total"]["budget"], report["total"]["loss"]["pure_epsilon"]
    ('pure', '1', 1.0)
    >>> {q: v["budget"] for q, v in report["levels"]["state"]["queries"].items()}
    {'detailed': '1/20', 'hhgq': '9/80', 'va_hisp_race': '27/80'}
    """
    from hierarchy.accounting import account_levels

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


def _remove_outputs(directory: Path, names: list[str]) -> None:
    """Remove the named outputs of this toolkit from the run ``directory`` (it owns them)."""
    for name in names:
        (directory / name).unlink(missing_ok=True)


def _registered(method: str):
    from postproc.methods import get

    return get(method)


def _json_options(options: Any) -> dict[str, Any]:
    """Options as the manifest records them (JSON values; anything else by its repr)."""
    return json.loads(json.dumps(dict(options), default=repr))
