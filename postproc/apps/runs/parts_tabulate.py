"""Reading and tabulating the parts of a run in parts (:mod:`postproc.apps.runs.parts`, step 1).

Each part's persons and units are read from the parquet files — in one pass when their rows
come part by part, as a file sorted by geography does; else with a filter on the part's
split-level geocodes — and tabulated on the part's geography, its bottom level sparse, by this
process: one part's rows in memory, never the files. The split level's histograms and the
published statistics of the levels below are kept (the top's truth is built from them), and
each part's bottom-level counts are saved under ``confidential/parts/`` for the second pass.
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Mapping, Sequence

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import scipy.sparse as sp

from hierarchy.geography import Geography, encode_column
from hierarchy.histograms import Hierarchy
from hierarchy.io import check_tabulated_units, read_microdata
from hierarchy.io.storage import atomic_path
from hierarchy.measurement import published_statistics
from hierarchy.tabulation import LeafCounts, from_leaf_counts, tabulate_leaf
from postproc.apps.runs.config import RunConfig
from postproc.apps.runs.parts_outputs import _check_settings
from postproc.apps.runs.parts_plan import _progress, _Run, part_geography
from postproc.errors import PostprocError
from postproc.infra.executors import Executor, SerialExecutor


def _read_part(config: RunConfig, geo: Geography, split: int, part: Geography
               ) -> tuple[pa.Table, pa.Table | None]:
    """The part's persons and units, read with a filter on the split level's geocodes (for
    files whose rows do not come part by part)."""
    column = config.columns.get(geo.levels[split], geo.levels[split])
    codes = part.geocodes[1].astype(str).tolist()
    tables = []
    for path in (config.persons, config.units):
        if path is None:
            tables.append(None)
            continue
        try:
            tables.append(pq.read_table(path, filters=[(column, "in", codes)]))
        except (OSError, pa.ArrowException) as exc:
            raise PostprocError(f"a run in parts reads parquet files with a filter on the "
                                f"{geo.levels[split]!r} column {column!r}; reading {path.name} "
                                f"failed: {exc}") from None
    return tables[0], tables[1]


class _Unsorted(Exception):
    """A file's rows do not come part by part."""


def _rows_in_order(path: Path, column: str, tracts: pd.Index, part_of: np.ndarray,
                   n_parts: int) -> Iterator[pa.Table]:
    """Every part's rows, in plan order, from one pass over a parquet file whose rows come part
    by part (as a file sorted by geography does); rows of a split-level unit the geography does
    not have are left out (the count of persons read then falls short, which is reported).
    Raises :class:`_Unsorted` at the first row of a part already passed."""
    source = pq.ParquetFile(path)
    empty = source.schema_arrow.empty_table()
    current, pieces = 0, []
    for batch in source.iter_batches(batch_size=1 << 20):
        codes, dictionary = encode_column(batch.column(column), name=column)
        unit = tracts.get_indexer(dictionary)[codes]
        keep = np.flatnonzero(unit >= 0)
        if keep.size < unit.size:
            batch = batch.take(pa.array(keep))
            unit = unit[keep]
        if not unit.size:
            continue
        part = part_of[unit]
        if part[0] < current or np.any(np.diff(part) < 0):
            raise _Unsorted
        cuts = np.concatenate([[0], np.flatnonzero(np.diff(part)) + 1, [part.size]])
        for a, b in zip(cuts[:-1], cuts[1:]):
            while current < part[a]:
                yield pa.Table.from_batches(pieces, source.schema_arrow) if pieces else empty
                current, pieces = current + 1, []
            pieces.append(batch.slice(int(a), int(b - a)))
    while current < n_parts:
        yield pa.Table.from_batches(pieces, source.schema_arrow) if pieces else empty
        current, pieces = current + 1, []


def _tabulate_part(config: RunConfig, part: Geography, persons: pa.Table,
                   units: pa.Table | None) -> LeafCounts:
    """A part's persons and units, validated and tabulated on the part's geography: its
    blocks' counts sparse (:func:`~hierarchy.tabulation.tabulate_leaf`; dense, a part's
    blocks × cells are 0.3 GB, 98 % zeros, and passes over them were most of its
    tabulation)."""
    keep = set(part.levels[1:]) | set(config.schema.names)
    columns = {k: v for k, v in config.columns.items() if k in keep}
    data = read_microdata(persons, schema=config.schema, levels=part.levels, columns=columns,
                          values=config.values, units=units,
                          unit_attribute=config.spec.unit_attribute, check_units=False)
    truth = tabulate_leaf(data.persons, schema=config.schema, levels=part.levels,
                          units=data.units, geography=part,
                          unit_attribute=config.spec.unit_attribute if data.units is not None
                          else None)
    check_tabulated_units(truth, data)
    return truth


def _parts_in_one_pass(config: RunConfig, geo: Geography, split: int,
                       plan: Sequence[tuple[int, int]]
                       ) -> Iterator[tuple[int, Geography, pa.Table, pa.Table | None]]:
    """(index, geography, persons, units) of every part, in order, from one pass over the
    files; raises :class:`_Unsorted` when their rows do not come part by part."""
    column = config.columns.get(geo.levels[split], geo.levels[split])
    tracts = pd.Index(geo.geocodes[split].astype(str))
    part_of = np.repeat(np.arange(len(plan)), [stop - first for first, stop in plan])
    streams = [None if path is None else
               _rows_in_order(path, column, tracts, part_of, len(plan))
               for path in (config.persons, config.units)]
    for k, (first, stop) in enumerate(plan):
        part = part_geography(geo, split, first, stop)
        persons, units = (None if stream is None else next(stream) for stream in streams)
        yield k, part, persons, units


def _parts_filtered(config: RunConfig, geo: Geography, split: int,
                    plan: Sequence[tuple[int, int]]
                    ) -> Iterator[tuple[int, Geography, pa.Table, pa.Table | None]]:
    """(index, geography, persons, units) of every part, each read with a filter on its
    units."""
    for k, (first, stop) in enumerate(plan):
        part = part_geography(geo, split, first, stop)
        yield (k, part) + _read_part(config, geo, split, part)


def _publish_at(publish: Mapping[str, Sequence[str]], levels: Sequence[str]
                ) -> dict[str, list[str]]:
    out = {stat: [lv for lv in at if lv in levels] for stat, at in publish.items()}
    return {stat: at for stat, at in out.items() if at}


@dataclass(frozen=True)
class Published:
    """What a run in parts publishes exactly: the catalogue's statistics by level
    (:meth:`RunConfig.publish`) and the spec's query invariants
    (:meth:`RunConfig.query_invariants`), each computed where its level's units are — the top's
    from the top's truth, a part's from the part's.

    Examples
    --------
    >>> from hierarchy.schema import E2E_1940
    >>> from hierarchy.synth import synthesize_1940
    >>> from hierarchy.tabulation import tabulate
    >>> data = synthesize_1940(500, seed=1)
    >>> truth = tabulate(data.persons, units=data.units, schema=E2E_1940,
    ...                  levels=["nation", "state"])
    >>> age = {"age": {"query": "marginal(votingage)", "answers": None, "levels": ["state"]}}
    >>> published = Published({"tot": ["nation"]}, age)
    >>> answers = published.answers(truth, ["nation", "state"])
    >>> answers["nation"]["tot"].tolist(), answers["state"]["age"].shape
    ([500], (49, 2))
    >>> list(published.answers(truth, ["nation"]).get("state", {}))
    []
    """

    statistics: Mapping[str, Sequence[str]]
    queries: Mapping[str, Mapping[str, Any]]

    @classmethod
    def of(cls, config: RunConfig) -> "Published":
        """What ``config``'s spec publishes."""
        return cls(config.publish(), config.query_invariants())

    def answers(self, truth: Hierarchy, levels: Sequence[str]) -> dict[str, dict[str, Any]]:
        """The exact values published at ``levels`` (those of ``truth``'s geography), by level
        and name (:func:`published_statistics`)."""
        queries = {name: {**entry, "levels": [lv for lv in entry["levels"] if lv in levels]}
                   for name, entry in self.queries.items()}
        return published_statistics(truth, _publish_at(self.statistics, levels),
                                    queries={n: e for n, e in queries.items() if e["levels"]})

    def at_root(self, statistic: str, root: str) -> bool:
        """Whether ``statistic`` is published at the root level ``root``."""
        return root in self.statistics.get(statistic, [])


def _persons(persons: int, release: bool, published: bool) -> str:
    """The persons count for the log: in release mode only when the spec publishes the root's
    total (otherwise it is a statistic of the confidential data).

    >>> _persons(1234, release=False, published=False), _persons(1234, True, True)
    ('1,234 persons', '1,234 persons')
    >>> _persons(1234, release=True, published=False)
    'the persons'
    """
    return f"{persons:,} persons" if not release or published else "the persons"


def _check_all_read(config: RunConfig, persons: int) -> None:
    """Every person of the file is in some part (a geocode outside the blocks file's geography
    would otherwise be dropped without a word)."""
    rows = pq.ParquetFile(config.persons).metadata.num_rows
    if rows != persons:
        how_many = ("some persons (how many is not shown in release mode: it is computed from "
                    "the confidential data)" if config.release
                    else f"{rows - persons:,} of {rows:,} persons")
        raise PostprocError(f"{config.persons.name}: {how_many} have a geocode that the blocks "
                            f"file {config.blocks.name} does not list; every person's geography "
                            "must be in it")



class _TabulatePart:
    """Tabulate one part (picklable: an executor can map it over the parts as they are read): its
    rows validated and tabulated on the part's geography, and its counts saved for the second
    pass. Returns the persons read, the split level's histograms and units, the published
    statistics of the levels below, and the SHA-256 of what was saved."""

    def __init__(self, config: RunConfig, cache: Path, publish: Published,
                 low_levels: Sequence[str]):
        self.config, self.cache = config, cache
        self.publish, self.low_levels = publish, tuple(low_levels)

    def __call__(self, item: tuple[int, Geography, pa.Table, pa.Table | None]
                 ) -> tuple[int, np.ndarray, np.ndarray | None, dict[str, Any], str]:
        k, part, persons, units = item
        truth = _tabulate_part(self.config, part, persons, units)
        digest = _save_counts(truth, self.cache / f"truth-{k:06d}.npz")
        stats = self.publish.answers(truth, self.low_levels)
        return (int(truth.leaf_counts.data.sum()), truth.level_counts(1),
                None if truth.leaf_units is None else truth.level_units(1), stats, digest)


def _tabulate_parts(ex: Executor, tabulate: _TabulatePart,
                    parts: Iterator[tuple[int, Geography, pa.Table, pa.Table | None]],
                    n_parts: int, progress: bool):
    """Tabulate every part on ``ex`` as the parts are read (with workers, at most two parts
    per worker read ahead, so memory holds a few parts' rows, not the files); return the persons
    read, the split level's histograms and units, the published statistics of the levels
    below, and a digest of every part's counts (a resumed run checks that its data did not
    change)."""
    split_counts, split_units, low_stats, persons = [], [], {}, 0
    digest = hashlib.sha256()
    bar = _progress(progress, n_parts, "tabulating parts")
    try:
        for n, counts, units, stats, part_digest in ex.map_window(tabulate, parts,
                                                                  2 * ex.workers):
            digest.update(part_digest.encode())
            persons += n
            split_counts.append(counts)
            if units is not None:
                split_units.append(units)
            for lv, by_stat in stats.items():
                for stat, arr in by_stat.items():
                    low_stats.setdefault(lv, {}).setdefault(stat, []).append(arr)
            if bar is not None:
                bar.update(1)
    finally:
        if bar is not None:
            bar.close()
    return persons, split_counts, split_units, low_stats, digest.hexdigest()


def _save_counts(truth: LeafCounts, path: Path) -> str:
    """Save the part's bottom-level counts (its nonzero cells, in row-major order) and units
    for the second pass (read and tabulated once, not twice); return the SHA-256 of what was
    saved."""
    leaf = truth.leaf_counts
    units = np.repeat(np.arange(leaf.shape[0], dtype=np.int32), np.diff(leaf.indptr))
    arrays = {"shape": np.array(leaf.shape, dtype=np.int64), "units": units,
              "cells": leaf.indices.astype(np.int32), "counts": leaf.data.astype(np.int64)}
    if truth.leaf_units is not None:
        arrays["unit_types"] = truth.leaf_units
    digest = hashlib.sha256()
    for name, array in arrays.items():
        digest.update(name.encode())
        digest.update(np.ascontiguousarray(array).tobytes())
    with atomic_path(path) as tmp:
        with open(tmp, "wb") as f:
            np.savez(f, **arrays)
    return digest.hexdigest()


def _load_counts(config: RunConfig, part: Geography, path: Path) -> LeafCounts:
    """The part's truth from :func:`_save_counts`'s file."""
    with np.load(path) as data:
        leaf = sp.csr_matrix((data["counts"], (data["units"], data["cells"])),
                             shape=tuple(int(n) for n in data["shape"]))
        types = data["unit_types"] if "unit_types" in data else None
    return LeafCounts(config.schema, part, leaf, types,
                      config.spec.unit_attribute if types is not None else None)



@dataclass(frozen=True)
class _Tabulated:
    """What tabulating every part gives the top: the persons read (confidential in release
    mode), the truth of the levels from the root to the split level (on the top of the whole
    geography), every level's published statistics, and the seconds the step took."""

    persons: int
    top_truth: Hierarchy
    published: dict[str, dict[str, np.ndarray]]
    seconds: float


def _tabulate_all(run: _Run, publish: Published, cache: Path) -> _Tabulated:
    """Step 1: tabulate part by part (the split level's histograms, the statistics below, each
    part's counts saved in ``cache``), check that every person was read and that a resumed
    run's data are the interrupted one's, and build the top's truth from the parts'
    split-level histograms."""
    config, geo, s, plan = run.config, run.geo, run.s, run.plan
    t = time.perf_counter()
    tabulate = _TabulatePart(config, cache, publish, run.low_levels)
    # in this process: with the bottom level sparse, a part's tabulation (0.2–0.3 s) costs
    # less than sending its rows to a worker (40–60 MB pickled with their dictionaries):
    # 100M persons 52 s serially against 66 s on two workers
    # (benchmarks/pl94/parts_tabulate_100m_sparse.md)
    here = SerialExecutor()
    try:
        tabulated = _tabulate_parts(here, tabulate, _parts_in_one_pass(config, geo, s, plan),
                                    len(plan), run.progress)
    except _Unsorted:
        run.log(f"    the files' rows do not come {run.split} by {run.split} in the blocks "
                f"file's order: each part is read with a filter (slower; sort the files by "
                f"geography to read them in one pass)")
        tabulated = _tabulate_parts(here, tabulate, _parts_filtered(config, geo, s, plan),
                                    len(plan), run.progress)
    persons, split_counts, split_units, low_stats, digest = tabulated
    _check_all_read(config, persons)
    _check_settings(cache.parent / "parts_data_sha256.json", {"data": digest}, run.directory,
                    what="data")
    top_geo = geo.top(s + 1)
    top_truth = from_leaf_counts(config.schema, top_geo, np.concatenate(split_counts),
                                 np.concatenate(split_units) if split_units else None,
                                 config.spec.unit_attribute)
    del split_counts, split_units
    published = publish.answers(top_truth, run.top_levels)
    for lv, stats in low_stats.items():
        published.setdefault(lv, {}).update({k: np.concatenate(v) for k, v in stats.items()})
    del low_stats
    seconds = time.perf_counter() - t
    shown = _persons(persons, config.release, publish.at_root("tot", geo.levels[0]))
    run.log(f"    tabulated {shown} in {seconds:.1f} s")
    return _Tabulated(persons, top_truth, published, seconds)
