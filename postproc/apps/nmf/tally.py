"""What a run state by state adds up and writes (:mod:`postproc.apps.nmf.stream`,
:mod:`postproc.apps.nmf.stream_bluedown`): each state's record of its levels, and the tally of
the states into one result directory."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd
import pyarrow as pa
from tqdm.auto import tqdm

from hierarchy.io.joins import join_parquet
from hierarchy.io.storage import write_json, write_parquet
from hierarchy.presets.pl94 import LEVELS, PL94_2020
from postproc.apps.nmf.run import write_block_geoids
from postproc.result import level_entry, level_table, manifest_document


@dataclass(frozen=True)
class _StateFiles:
    """What every state's run of a run state by state is given (TopDown's
    :class:`~postproc.apps.nmf.stream._State`, the GLS's and BlueDown's
    :class:`~postproc.apps.nmf.stream_gls._StateRun`): the file, the state totals, the folder
    of the states' files, the outputs' metadata, the parts' size and whether to show
    progress."""

    root: str | Path
    state_totals: Any
    parts: Path
    meta: Mapping[str, Any]
    part_blocks: int
    progress: bool


def _upper_levels(record: dict[str, Any], parts: Path, fips: str, geography: Any,
                  solved: Any, meta: Mapping[str, Any]) -> None:
    """A state's solved levels below its pieces down to its block groups, each written to
    ``parts/<level>-SS.parquet`` and entered in its ``record``."""
    timings = solved.provenance.timings.get("levels", {})
    for li in range(2, geography.depth):
        lv = geography.levels[li]
        path = parts / f"{lv}-{fips}.parquet"
        write_parquet(level_table(PL94_2020, geography, lv, solved.histograms[li]), path,
                      metadata=dict(meta))
        record["levels"].append(_entry(lv, solved.histograms[li], timings.get(lv, 0.0),
                                       [path.name]))


def _blocks_done(record: dict[str, Any], parts: Path, fips: str, geo: Any, items: Sequence[Any],
                 task: Any, ex: Any, stats: list[pd.DataFrame], progress: bool) -> dict[str, Any]:
    """A state's parts solved on the executor (``task`` over ``items``, each item's second
    entry its geography, its fourth its file; each returning persons, seconds and node
    statistics), then its node statistics, its geography below its pieces and, last, its
    record (``parts/state-SS.json``: what a resumed run takes as it is) written."""
    bar = tqdm(total=len(items), desc=f"state {fips} blocks", unit="part",
               disable=not progress, leave=False)
    blocks = {"level": LEVELS[-1], "units": 0, "persons": 0, "seconds": 0.0,
              "files": [item[3].name for item in items]}
    for item, (persons, seconds, part_stats) in zip(items, ex.map(task, items)):
        blocks["units"] += item[1].n_units(2)
        blocks["persons"] += persons
        blocks["seconds"] += seconds
        stats.append(part_stats)
        bar.update()
    bar.close()
    record["levels"].append(blocks)
    frame = geo.to_frame()
    record["node_stats"], record["geography"] = (f"node_stats-{fips}.parquet",
                                                 f"geography-{fips}.parquet")
    stats = [s for s in stats if len(s)] or stats[:1]
    write_parquet(pa.Table.from_pandas(pd.concat(stats, ignore_index=True),
                                       preserve_index=False), parts / record["node_stats"])
    write_parquet(pa.Table.from_pandas(frame[~frame["level"].isin(geo.levels[:2])],
                                       preserve_index=False), parts / record["geography"])
    record["blocks"] = geo.n_units(geo.depth - 1)
    write_json(record, parts / f"state-{fips}.json")      # last: the state is done
    return record


def _entry(level: str, hist: np.ndarray, seconds: float, files: list[str]) -> dict[str, Any]:
    return {"level": level, "units": int(hist.shape[0]), "persons": int(hist.sum()),
            "seconds": float(seconds), "files": files}


class _Tally:
    """What the states add up to: each level's units, persons, seconds and files, the node
    statistics, each state's geography below its pieces."""

    def __init__(self, top: Any, result: Any, method: str = "topdown"):
        self.top, self.result, self.method = top, result, method
        self.units = {lv: int(h.shape[0]) for lv, h in zip(top.levels, result.histograms)}
        self.persons = {lv: int(h.sum()) for lv, h in zip(top.levels, result.histograms)}
        self.seconds = dict(result.provenance.timings.get("levels", {}))
        self.outputs: dict[str, list[Path]] = {}
        self.stats = [result.node_stats]
        self.frames: list[pd.DataFrame] = []
        self.files, self.bytes = top.provenance["files"], top.provenance["bytes"]

    def take(self, record: Mapping[str, Any], parts: Path) -> None:
        """A state's record (:meth:`_State.solve`), its files under ``parts``."""
        for entry in record["levels"]:
            lv = entry["level"]
            self.units[lv] = self.units.get(lv, 0) + int(entry["units"])
            self.persons[lv] = self.persons.get(lv, 0) + int(entry["persons"])
            self.seconds[lv] = self.seconds.get(lv, 0.0) + float(entry["seconds"])
            self.outputs.setdefault(lv, []).extend(parts / n for n in entry["files"])
        self.stats.append(pd.read_parquet(parts / record["node_stats"]))
        self.frames.append(pd.read_parquet(parts / record["geography"]))
        self.files += int(record["files"])
        self.bytes += int(record["bytes"])

    def write(self, directory: Path, meta: Mapping[str, Any], extra: Mapping[str, Any],
              seconds: float) -> None:
        """Every level's file, the geography (each level in its parents' order), the node
        statistics, ``block_geoid.parquet`` and the manifest."""
        top, result = self.top, self.result
        levels = list(LEVELS)
        for lv in top.levels:
            write_parquet(result.to_table(lv), directory / f"{lv}.parquet", metadata=meta)
        for lv in levels[2:]:
            join_parquet(self.outputs[lv], directory / f"{lv}.parquet", metadata=meta)
        frame = _ordered(pd.concat([top.geography.to_frame(), *self.frames],
                                   ignore_index=True), levels)
        write_parquet(pa.Table.from_pandas(frame, preserve_index=False),
                      directory / "geography.parquet", metadata=meta)
        stats = pd.concat([s for s in self.stats if len(s)], ignore_index=True)
        if len(stats):
            write_parquet(pa.Table.from_pandas(stats, preserve_index=False),
                          directory / "node_stats.parquet", metadata=meta)
        write_block_geoids(frame.loc[frame["level"] == levels[-1], "geocode"], directory)
        per_level = {lv: level_entry(self.units[lv], np.int64(self.persons[lv]), stats, lv,
                                     self.seconds.get(lv, 0.0)) for lv in levels}
        provenance = {**result.provenance.to_dict(), "timings": {
            "levels": {lv: self.seconds.get(lv, 0.0) for lv in levels}, "total": seconds}}
        manifest = manifest_document(self.method, True, per_level, result.randomness,
                                     result.safe_for_release, top.schema, top.workload,
                                     provenance)
        manifest.update(extra)
        write_json(manifest, directory / "manifest.json")


def _ordered(frame: pd.DataFrame, levels: Sequence[str]) -> pd.DataFrame:
    """The geography table with each level's units in their parents' order (children
    contiguous, as a geography keeps them), each parent's children in the order given."""
    out = []
    previous: pd.Index | None = None
    for lv in levels:
        part = frame[frame["level"] == lv]
        if previous is not None:
            position = previous.get_indexer(part["parent"].astype(str))
            part = part.iloc[np.argsort(position, kind="stable")]
        out.append(part)
        previous = pd.Index(part["geocode"].astype(str))
    return pd.concat(out, ignore_index=True)
