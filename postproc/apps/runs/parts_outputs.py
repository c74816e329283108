"""The outputs and checkpoint of a run in parts (:mod:`postproc.apps.runs.parts`): the settings a
resumed run must keep, what the top and the parts add up to (errors, persons, solve times, node
statistics, failsafe reports), and step 4 — the parts' files joined into one file per level, the
geography, the error table, the node statistics and the manifest written, the parts' files
removed.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

import pandas as pd
import pyarrow as pa

from hierarchy.geography import Geography
from hierarchy.io.joins import join_parquet
from hierarchy.io.storage import (
    CONFIDENTIAL_DIR,
    confidential_directory,
    read_json,
    write_json,
    write_parquet,
)
from hierarchy.randomness import as_randomness
from postproc.apps.runs.config import RunConfig
from postproc.apps.runs.parts_errors import _Errors
from postproc.apps.runs.parts_plan import _Run
from postproc.errors import PostprocError
from postproc.gate import label_table, write_csv
from postproc.result import file_metadata, level_entry, manifest_document

__all__ = ["PartsResult"]

_MADE_BY = "postproc run in parts"


@dataclass
class PartsResult:
    """What :func:`run_in_parts` did.

    Attributes
    ----------
    directory : Path
    levels : tuple of str
    parts : int
        Parts the split level was cut into.
    solved : int
        Parts solved by this call (the others were done before it was resumed).
    persons : int
    timings : dict
        Seconds per step (``tabulate``, ``top``, ``parts``, ``join``, ``total``) and per level
        (``levels``: TopDown's solve time, summed over the parts below the split).
    errors : pandas.DataFrame or None
        The error table (simulation mode), also in ``confidential/error_table.csv``.
    release : bool
        Release mode (``persons`` is then the confidential count: the toolkit does not print
        it unless the spec publishes the root's total).

    Examples
    --------
    >>> done = PartsResult(Path("out"), ("nation", "tract", "block"), parts=3, solved=1,
    ...                    persons=1_000)
    >>> f"{done.solved} of {done.parts} parts solved by this call"
    '1 of 3 parts solved by this call'
    """

    directory: Path
    levels: tuple[str, ...]
    parts: int
    solved: int
    persons: int
    timings: dict[str, Any] = field(default_factory=dict)
    errors: pd.DataFrame | None = None
    release: bool = False



def _check_settings(path: Path, settings: dict[str, Any], directory: Path, *,
                    what: str = "settings") -> None:
    """Record ``settings`` in ``path``, or, when an interrupted run recorded some, raise
    unless they are the same (a resumed run must solve the parts it did not finish with
    the plan, configuration and data of those it did)."""
    if path.exists():
        if read_json(path) == settings:
            return
        if what == "data":
            raise PostprocError(f"{directory}: the data differ from those of the interrupted "
                                "run there; resume it with the same files, or choose another "
                                "output directory")
        recorded = read_json(path)
        changed = sorted(k for k in settings if recorded.get(k) != settings[k])
        raise PostprocError(f"{directory}: the interrupted run there had other "
                            f"{', '.join(changed)} "
                            f"({', '.join(f'{k}={recorded.get(k)!r}' for k in changed)}); "
                            "resume it with the same configuration, --parts and --split, or "
                            "choose another output directory")
    write_json(settings, path)


def _finished(directory: Path) -> "PartsResult":
    """What a finished run in ``directory`` did, from its manifest."""
    manifest = read_json(directory / "manifest.json")
    levels = tuple(manifest["geography_levels"])
    provenance = manifest.get("provenance", {})
    errors_file = directory / "confidential" / "error_table.csv"
    return PartsResult(directory, levels, int(provenance.get("parts", {}).get("parts", 0)), 0,
                       int(manifest["levels"][levels[0]]["persons"]),
                       dict(provenance.get("timings", {})),
                       pd.read_csv(errors_file) if errors_file.exists() else None,
                       bool(manifest.get("safe_for_release", False)))



@dataclass(frozen=True)
class _Tally:
    """What a run in parts adds up over the top and the parts, for its error table and
    manifest: the errors, the persons and TopDown's solve seconds per level (``seconds`` is the
    run's ``timings["levels"]``), the node statistics (the top's, then each part's) and the
    parts' failsafe reports."""

    errors: _Errors
    persons: dict[str, int]
    seconds: dict[str, float]
    node_stats: list[pd.DataFrame] = field(default_factory=list)
    reports: list[dict[str, Any]] = field(default_factory=list)

    def account(self, marker: Mapping[str, Any], node_stats: pd.DataFrame) -> None:
        """Add a finished part's errors, persons, solve times and failsafe reports (its marker)
        and its node statistics to the run's."""
        self.errors.merge(marker.get("errors", {}))
        self.reports.extend(marker.get("failsafe_reports", []))
        for lv, n in marker.get("persons", {}).items():
            self.persons[lv] += n
        for lv, seconds in marker.get("levels", {}).items():
            if lv in self.seconds:
                self.seconds[lv] += seconds
        self.node_stats.append(node_stats)


def _finish(run: _Run, cache: Path, tally: _Tally, *, measurement: dict[str, Any],
            top: Mapping[str, Any], timings: dict[str, Any],
            t_start: float, method: str = "topdown") -> pd.DataFrame | None:
    """Step 4: the parts' files joined into one file per level, the geography and the error
    table (simulation mode; not for ``bluedown``, whose parts see no measurement) written,
    then the node statistics and the manifest (``measurement`` and ``top``: the provenance of
    the measurement and of the top's TopDown; ``method``: what made the histograms); last the
    parts' files removed. Returns the error table."""
    config, directory, geo = run.config, run.directory, run.geo
    t = time.perf_counter()
    for lv in run.low_levels:
        files = [run.parts_dir / f"{lv}-{k:06d}.parquet" for k in range(len(run.plan))]
        join_parquet(files, directory / f"{lv}.parquet", metadata=_meta(config))
    write_parquet(pa.Table.from_pandas(geo.to_frame(), preserve_index=False),
                  directory / "geography.parquet", metadata=_meta(config))
    table = None
    if config.wants_error_table and method == "topdown":
        table = label_table(tally.errors.table(geo.levels), config.randomness_mode)
        conf = confidential_directory(directory, what="error tables")
        write_csv(table, conf / "error_table.csv")
    timings["join"] = time.perf_counter() - t
    timings["total"] = time.perf_counter() - t_start
    node_stats = pd.concat(tally.node_stats, ignore_index=True)
    write_parquet(pa.Table.from_pandas(node_stats, preserve_index=False),
                  directory / "node_stats.parquet", metadata=_meta(config))
    write_json(_manifest(config, geo, node_stats, tally.persons, measurement, top, timings,
                         {"split": run.split, "part_blocks": run.part_blocks,
                          "parts": len(run.plan)}, tally.reports, method),
               directory / "manifest.json")
    _remove_part_files(run.parts_dir, cache, len(run.plan), run.low_levels)
    return table


def _remove_part_files(parts_dir: Path, cache: Path, n_parts: int,
                       low_levels: Sequence[str]) -> None:
    """Remove the parts' files once joined — only the files this run wrote — and their
    directories when nothing else is left in them."""
    for k in range(n_parts):
        for path in [parts_dir / f"{lv}-{k:06d}.parquet" for lv in low_levels] + [
                parts_dir / f"node_stats-{k:06d}.parquet", parts_dir / f"part-{k:06d}.json"]:
            path.unlink(missing_ok=True)
    (parts_dir / "plan.json").unlink(missing_ok=True)
    if not any(parts_dir.iterdir()):
        parts_dir.rmdir()
    for k in range(n_parts):
        (cache / f"truth-{k:06d}.npz").unlink(missing_ok=True)
    if not any(cache.iterdir()):
        cache.rmdir()


def _manifest(config: RunConfig, geo: Geography, node_stats: pd.DataFrame,
              persons: Mapping[str, int], measurement: dict[str, Any],
              top: Mapping[str, Any], timings: dict[str, Any], parts: dict[str, Any],
              failsafe_reports: Sequence[dict[str, Any]], method: str = "topdown"
              ) -> dict[str, Any]:
    """The manifest :meth:`postproc.result.Result.write` writes (built by the same
    :func:`~postproc.result.manifest_document`), so that ``Result.read``, ``postproc report``
    and ``postproc evaluate`` read a run in parts like any other."""
    levels = {lv: level_entry(geo.n_units(lv), persons[lv], node_stats, lv,
                              timings["levels"][lv]) for lv in geo.levels}
    randomness = measurement["randomness"]
    provenance = {"noisy": measurement, "spec": config.spec.to_dict(),
                  "solver": {**top["solver"], "passes": _record(config.topdown.passes),
                             "round_passes": _record(config.topdown.round_passes),
                             "group_children": config.topdown_options().group_children},
                  "timings": {"levels": dict(timings["levels"]), "total": timings["total"],
                              "steps": {k: v for k, v in timings.items() if k != "levels"}},
                  "failsafe_reports": list(top.get("failsafe_reports", []))
                  + list(failsafe_reports), "parts": parts}
    release = {"release_files": ["manifest.json", "geography.parquet", "node_stats.parquet"]
               + (["noisy/"] if config.release else [])
               + [f"{lv}.parquet" for lv in geo.levels],
               "not_for_release": f"{CONFIDENTIAL_DIR}/ (computed from the confidential data: "
                                  "never publish it)"}
    if method != "topdown":
        provenance["solver"]["passes"] = None      # (bluedown fits without them)
        provenance[method] = {k: v for k, v in top.items() if k in ("estimates", "gls")}
    return {**manifest_document(method, True, levels, randomness,
                                randomness.get("safe_for_release", False), config.schema,
                                config.workload, provenance), "release": release}


def _record(passes: Any) -> Any:
    if isinstance(passes, Mapping):
        return {lv: [list(p) for p in v] if v else None for lv, v in passes.items()}
    return [list(p) for p in passes] if passes else None


def _meta(config: RunConfig) -> dict[str, Any]:
    """The metadata of every file the run writes: that of a result's files
    (:func:`~postproc.result.file_metadata`) and what made it."""
    return {**file_metadata(as_randomness(config.rng).provenance(), config.schema),
            "made_by": _MADE_BY}
