"""The result of a post-processor: integer histograms per level, statistics, outputs."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

import numpy as np
import pandas as pd
import pyarrow as pa

from hierarchy.geography import Geography
from hierarchy.queries import Query, Workload
from hierarchy.schema import Schema
from hierarchy.storage import check_file_names, package_versions, write_json, write_parquet
from postproc.errors import PostprocError

__all__ = ["TopDownResult", "level_table", "histograms_from_table"]


#: File stems of a result directory that a level must not be named after.
RESERVED_STEMS = ("node_stats", "manifest", "microdata", "noisy")

def level_table(schema: Schema, geography: Geography, level: str, hist: np.ndarray, *,
                keep_zeros: bool = False) -> pa.Table:
    """Long form of one level: the level's geocode column, one column per attribute, ``count``.

    Zero cells are omitted unless ``keep_zeros``.
    """
    li = geography.level_index(level)
    hist = np.asarray(hist)
    units, cells = (np.nonzero(hist) if not keep_zeros
                    else np.indices(hist.shape).reshape(2, -1))
    codes = np.unravel_index(cells, schema.shape)
    cols: dict[str, Any] = {level: pa.DictionaryArray.from_arrays(
        pa.array(units.astype(np.int32)), pa.array(geography.geocodes[li].astype(str)))}
    for attr, c in zip(schema.attributes, codes):
        cols[attr.name] = pa.array(c.astype(np.int8 if attr.size <= 127 else np.int32))
    cols["count"] = pa.array(hist[units, cells].astype(np.int64))
    return pa.table(cols)


def histograms_from_table(table: pa.Table | pd.DataFrame, schema: Schema, geography: Geography,
                          level: str, *, source: str = "table") -> np.ndarray:
    """Inverse of :func:`level_table`: dense (units × cells) int64 histograms, validated."""
    frame = table.to_pandas() if isinstance(table, pa.Table) else table
    need = [level, *schema.names, "count"]
    missing = [c for c in need if c not in frame.columns]
    if missing:
        raise PostprocError(f"{source}: missing column(s) {missing}; expected {need}")
    li = geography.level_index(level)
    unit = pd.Index(geography.geocodes[li]).get_indexer(frame[level].astype(str))
    if (unit < 0).any():
        bad = frame[level].astype(str).to_numpy()[unit < 0][:5].tolist()
        raise PostprocError(f"{source}: {level} geocodes {bad} are not in the geography")
    cell = np.zeros(len(frame), dtype=np.int64)
    for attr in schema.attributes:
        col = frame[attr.name].to_numpy()
        if np.any((col < 0) | (col >= attr.size)):
            raise PostprocError(f"{source}: column {attr.name!r} has codes outside "
                                f"0..{attr.size - 1}")
        cell = cell * attr.size + col.astype(np.int64)
    counts = frame["count"].to_numpy()
    if np.any(counts < 0) or counts.dtype.kind not in "iu":
        raise PostprocError(f"{source}: counts must be non-negative integers")
    out = np.zeros((geography.n_units(li), schema.size), dtype=np.int64)
    np.add.at(out, (unit, cell), counts.astype(np.int64))
    return out


@dataclass(frozen=True, eq=False)
class TopDownResult:
    """Integer histograms for every unit of every level, with per-node solver statistics.

    Attributes
    ----------
    histograms : tuple of int64 arrays (units × cells), root level first
    node_stats : DataFrame
        One row per parent problem: level, parent, children, variables, backend, attempts,
        fit and rounding seconds, iterations, objective, rounding method, failsafe.
    provenance : dict
        Inputs' provenance (incl. the randomness label), spec, solver settings, timings,
        failsafe reports.
    """

    schema: Schema
    geography: Geography
    workload: Workload
    histograms: tuple[np.ndarray, ...]
    node_stats: pd.DataFrame = field(repr=False)
    provenance: Mapping[str, Any] = field(default_factory=dict, repr=False)

    @property
    def levels(self) -> tuple[str, ...]:
        return self.geography.levels[:len(self.histograms)]

    def level_histograms(self, level: str | int) -> np.ndarray:
        li = self.geography.level_index(level)
        if li >= len(self.histograms):
            raise PostprocError(f"level {self.geography.levels[li]!r} has not been computed")
        return self.histograms[li]

    def answers(self, level: str | int, query: str | Query) -> np.ndarray:
        """Answers of a workload query (or any Query) for every unit of ``level``."""
        q = self.workload[query] if isinstance(query, str) else query
        return q.answer(self.level_histograms(level))

    @property
    def failsafe_reports(self) -> list[dict[str, Any]]:
        return list(self.provenance.get("failsafe_reports", []))

    @property
    def safe_for_release(self) -> bool:
        rnd = self.provenance.get("noisy", {}).get("randomness", {})
        return bool(rnd.get("safe_for_release", False))

    def to_table(self, level: str | int) -> pa.Table:
        """Long form of a level (see :func:`level_table`)."""
        li = self.geography.level_index(level)
        return level_table(self.schema, self.geography, self.geography.levels[li],
                           self.level_histograms(li))

    def manifest(self) -> dict[str, Any]:
        """JSON-ready run manifest: provenance, per-level summaries, solver statistics."""
        stats = self.node_stats
        per_level = {}
        for li, lv in enumerate(self.levels):
            s = stats[stats["level"] == lv] if len(stats) else stats
            per_level[lv] = {
                "units": int(self.histograms[li].shape[0]),
                "persons": int(self.histograms[li].sum()),
                "parents": int(len(s)),
                "seconds": float(self.provenance.get("timings", {}).get("levels", {}).get(lv, 0)),
                "fit_seconds": float(s["fit_seconds"].sum()) if len(s) else 0.0,
                "round_seconds": float(s["round_seconds"].sum()) if len(s) else 0.0,
                "backends": s["backend"].value_counts().to_dict() if len(s) else {},
                "rounding": s["rounding"].value_counts().to_dict() if len(s) else {},
                "fallbacks": int(s["attempts"].fillna("").str.contains(";").sum())
                if len(s) and "attempts" in s else 0,
                "failsafe_nodes": int(s["failsafe"].sum()) if len(s) else 0,
            }
        rnd = self.provenance.get("noisy", {}).get("randomness", {})
        return {"format": "dapp.TopDownResult", "levels": per_level,
                "randomness": rnd, "safe_for_release": bool(rnd.get("safe_for_release", False)),
                "provenance": dict(self.provenance), "versions": package_versions()}

    def write(self, directory: str | os.PathLike, *, levels: list[str] | None = None,
              node_stats: bool = True, extra_manifest: Mapping[str, Any] | None = None) -> Path:
        """Write ``DIR/<level>.parquet`` (long form) and ``DIR/manifest.json``, atomically
        file by file. Every file carries the randomness label in its metadata."""
        directory = Path(directory)
        check_file_names(self.levels, what="level", reserved=RESERVED_STEMS)
        directory.mkdir(parents=True, exist_ok=True)
        label = self.provenance.get("noisy", {}).get("randomness", {}).get("label")
        meta = {"randomness_label": label, "schema": self.schema.to_dict()}
        for lv in levels or self.levels:
            write_parquet(self.to_table(lv), directory / f"{lv}.parquet", metadata=meta)
        if node_stats and len(self.node_stats):
            write_parquet(pa.Table.from_pandas(self.node_stats, preserve_index=False),
                          directory / "node_stats.parquet", metadata=meta)
        manifest = self.manifest()
        if extra_manifest:
            manifest.update(extra_manifest)
        write_json(manifest, directory / "manifest.json")
        return directory

    def to_microdata(self, level: str | int | None = None) -> pa.Table:
        """Synthetic microdata: one row per person of ``level`` (default: the bottom level), with
        the geocode of every level above and every attribute."""
        li = len(self.histograms) - 1 if level is None else self.geography.level_index(level)
        hist = self.level_histograms(li)
        units, cells = np.nonzero(hist)
        counts = hist[units, cells]
        unit_rep = np.repeat(units, counts)
        cell_rep = np.repeat(cells, counts)
        cols: dict[str, Any] = {}
        idx = unit_rep
        chain = [(li, idx)]
        for lv in range(li, 0, -1):
            idx = self.geography.parents[lv][idx]
            chain.append((lv - 1, idx))
        for lv, ix in reversed(chain[:-1] if li > 0 else chain):
            if lv == 0:
                continue
            cols[self.geography.levels[lv]] = pa.DictionaryArray.from_arrays(
                pa.array(ix.astype(np.int32)),
                pa.array(self.geography.geocodes[lv].astype(str)))
        codes = np.unravel_index(cell_rep, self.schema.shape)
        for attr, c in zip(self.schema.attributes, codes):
            cols[attr.name] = pa.array(c.astype(np.int8 if attr.size <= 127 else np.int32))
        return pa.table(cols)
