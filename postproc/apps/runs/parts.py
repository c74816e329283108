"""TopDown in parts: a geography too large to hold dense, run one part of it at a time.

A level of the 2020 geography held as dense units × cells arrays does not fit in memory: 8
million blocks × 2,016 cells are 130 GB for the truth alone, as much again for TopDown's
output and more for the noisy answers. :func:`run_in_parts` never holds a level below the
*split level* (``tract`` by default) whole. It cuts the split level into parts, runs of
consecutive units with at most ``part_blocks`` bottom-level units below them (cut from the
public geography, never from the data), and runs:

1. **Tabulate, part by part.** Each part's persons and units are read from the parquet files
   (in one pass when their rows come part by part, as a file sorted by geography does; else
   with a filter on the part's split-level geocodes) and tabulated on the part's geography,
   its bottom level sparse (:func:`~hierarchy.tabulation.tabulate_leaf`), by this process:
   one part's rows in memory, never the files. (Sending the rows to the executor's workers
   instead cost more than it saved once the tabulation was sparse:
   ``benchmarks/bench_tabulate_parts.py``.) The split level's histograms and the published
   statistics of the levels below (``gqhh`` per block: units × 8) are kept, and each part's
   bottom-level counts are saved (its nonzero cells) under ``confidential/parts/`` until the
   run ends.
2. **The top**, from the root to the split level: measured (one stream per level and query,
   as :func:`hierarchy.measurement.measure` draws) and solved by :func:`topdown` as one
   hierarchy. The spec is compiled on the *whole* geography, so the rows the levels below
   imply at the top (``imply_upward``) are the same as in a run of the whole.
3. **Each part**, from its saved counts: its levels below the split are measured from streams
   keyed by their split-level ancestor (:func:`hierarchy.measurement.measure_level`) and solved
   by :func:`topdown` starting under the split level's rounded histograms. Its histograms are
   written to ``parts/`` at once; a resumed run skips the parts already written.
4. The parts' files are joined into one ``<level>.parquet`` per level.

**Only the answers that can matter are drawn** (unless ``all_answers``): at every level, the
answers that count an active cell of their unit (:func:`invariants.active.find_active_cells`,
from the spec and the published invariants); the others are known to be 0, and TopDown's
output does not depend on them (``docs/scale2020.md``). At the block level that is about a
quarter of the answers.

**Same results as the whole.** Every node problem of a run in parts is the one a run of the
whole geography solves, with the same noisy answers — when the whole is measured with
``measure(..., key_level=split, active=…)`` — so the histograms are identical, whatever
``part_blocks`` and whichever executor (``tests/test_parts.py`` checks it level by level).

**Memory** is the top's dense levels (84,000 tracts × 2,016 cells: 1.4 GB per array for the
nation) plus one part per worker (about ``part_blocks`` × 2,016 × 8 bytes per array; while
tabulating, two parts' rows per worker in flight): the executor maps the parts over its
workers, and each worker solves its part's nodes serially and writes its files (so a Dask
worker needs the output directory on storage it shares).

**Release mode measures once.** In simulation mode a resumed run measures an unfinished part
(and the top) again: the keyed streams give the same values. Release mode draws from the
operating system's secure source, which cannot draw the same values twice, and a second draw
would be a second measurement of the data: so the top's noisy answers are saved in
``noisy/top/`` before the top is solved, and each part's in ``noisy/parts/part-K/`` before
that part is solved; a resumed run loads them and measures only the parts never measured. The
log then shows the persons count only when the spec publishes the root's total, and no error
table is made.

Output directory::

    <level>.parquet        every level's histograms, long form (as ``postproc run``)
    geography.parquet      the geography
    node_stats.parquet     one row per node problem (solver, seconds, variables, …)
    manifest.json          a result's manifest (``Result.read`` reads the directory), with the
                           parts, their timings and the randomness label
    parts/                 one file per part and level below the split, and one marker per
                           finished part (what a resumed run skips); removed when joined
    noisy/                 release mode: the noisy measurements (``top/``, and ``parts/part-K/``
                           per part), each a NoisyHierarchy (``NoisyHierarchy.load``)
    confidential/          error_table.csv (simulation mode): noisy measurements and TopDown
                           against the data per level and measured query, the columns of
                           ``postproc run``'s table; parts/ while the run lasts
"""

from __future__ import annotations

import hashlib
import json
import time
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping, Sequence

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import scipy.sparse as sp

from hierarchy.errors import HierarchyError
from hierarchy.geography import Geography, encode_column
from hierarchy.histograms import Hierarchy
from hierarchy.io import check_tabulated_units, read_microdata
from hierarchy.io.storage import (
    CONFIDENTIAL_DIR,
    atomic_path,
    claim_directory,
    confidential_directory,
    lock_directory,
    read_json,
    remove_leftovers,
    write_json,
    write_parquet,
)
from hierarchy.measurement import (
    ancestor_offsets,
    exact_answers,
    measure_level,
    measurement_provenance,
    published_statistics,
)
from hierarchy.noisy import NoisyHierarchy
from hierarchy.queries import sparse_copy
from hierarchy.randomness import as_randomness
from hierarchy.tabulation import LeafCounts, from_leaf_counts, tabulate_leaf
from invariants.active import find_active_cells
from invariants.compile import check_data, compile_spec
from postproc.apps.runs.config import RunConfig
from postproc.apps.runs.pipeline import run_fingerprint
from postproc.errors import PostprocError
from postproc.gate import data_errors, label_table, source_names, write_csv
from postproc.infra.executors import Executor, SerialExecutor, get_executor
from postproc.methods.topdown import topdown
from postproc.result import file_metadata, level_entry, level_table, manifest_document

__all__ = ["run_in_parts", "plan_parts", "part_geography", "whole_measurement", "active_cells",
           "PartsResult", "DEFAULT_PART_BLOCKS", "PART_ROOT"]

#: Bottom-level units per part by default: about 0.8 million persons at 2020 densities and
#: 0.3 GiB per dense array of the part's bottom level.
DEFAULT_PART_BLOCKS = 20_000
#: The name of a part's root level (a level no geography of ours has).
PART_ROOT = "part"
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


def plan_parts(geography: Geography, split: int, max_blocks: int) -> list[tuple[int, int]]:
    """Cut the split level into runs of consecutive units with at most ``max_blocks``
    bottom-level units below each run (a unit with more is a part of its own).

    Returns
    -------
    list of (first, stop) split-level unit ranges, in order, covering the level.

    Examples
    --------
    >>> geo = Geography(("n", "t", "b"), (["0"], ["1", "2", "3"], list("abcdef")),
    ...                 ([-1], [0, 0, 0], [0, 0, 0, 1, 2, 2]))
    >>> plan_parts(geo, 1, 3), plan_parts(geo, 1, 2), plan_parts(geo, 1, 100)
    ([(0, 1), (1, 3)], [(0, 1), (1, 2), (2, 3)], [(0, 3)])
    """
    offsets = ancestor_offsets(geography, geography.depth - 1, split)
    n = offsets.size - 1
    out, first = [], 0
    for u in range(1, n):
        if offsets[u + 1] - offsets[first] > max_blocks:
            out.append((first, u))
            first = u
    out.append((first, n))
    return out


def part_geography(geography: Geography, split: int, first: int, stop: int) -> Geography:
    """The geography of split-level units ``first:stop`` and everything below them, under a
    root unit of its own (level :data:`PART_ROOT`, geocode ``"<first>-<stop>"``).

    Examples
    --------
    >>> geo = Geography(("n", "t", "b"), (["0"], ["1", "2", "3"], list("abcdef")),
    ...                 ([-1], [0, 0, 0], [0, 0, 0, 1, 2, 2]))
    >>> part = part_geography(geo, 1, 1, 3)
    >>> part.levels, part.geocodes[1].tolist(), part.geocodes[2].tolist(), part.parents[2].tolist()
    (('part', 't', 'b'), ['2', '3'], ['d', 'e', 'f'], [0, 1, 1])
    """
    levels = (PART_ROOT,) + geography.levels[split:]
    codes = [np.array([f"{first}-{stop}"], dtype=object)]
    parents = [np.array([-1])]
    lo, hi = first, stop
    codes.append(geography.geocodes[split][lo:hi])
    parents.append(np.zeros(hi - lo, np.int64))
    for li in range(split + 1, geography.depth):
        offsets = geography.child_offsets(li - 1)
        clo, chi = int(offsets[lo]), int(offsets[hi])
        codes.append(geography.geocodes[li][clo:chi])
        parents.append(geography.parents[li][clo:chi] - lo)
        lo, hi = clo, chi
    return Geography(levels, tuple(codes), tuple(parents))


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


class _Errors:
    """Errors per (level, query) in a form that adds up over parts: counts, sums of absolute
    and squared errors, and the distributions of the integer absolute errors and exact answers
    (value → count), from which the medians of ``postproc run``'s table are exact."""

    def __init__(self):
        self.rows: dict[tuple[str, str], dict[str, Any]] = {}

    def add(self, level: str, query: Any, exact: np.ndarray, noisy: Any,
            post: np.ndarray, post_sparse: Any = None) -> None:
        """One level and query: its exact answers, noisy measurement and post-processed
        histograms (errors over the answers drawn, as ``level_error_table`` counts them);
        ``post_sparse``: ``post``'s :func:`~hierarchy.queries.sparse_copy`, made once per
        level."""
        units = int(exact.shape[0])
        answers = exact_answers(query, post, post_sparse)
        if noisy.drawn is None:
            dn, dp = noisy.values - exact, answers - exact
        else:   # only the answers drawn (at a part's blocks about 1 % of the detailed cells)
            at = np.flatnonzero(noisy.drawn)
            exact = exact.ravel()[at]
            dn, dp = noisy.values.ravel()[at] - exact, answers.ravel()[at] - exact
        part = {"units": units, "answers": int(exact.size),
                "sums": [float(np.abs(dn).sum()), float(np.square(dn, dtype=np.float64).sum()),
                         float(np.abs(dp).sum()), float(np.square(dp, dtype=np.float64).sum())]}
        integer = all(a.dtype.kind in "iu" for a in (dn, dp, exact))
        part["counts"] = {name: _value_counts(v) if integer else None
                          for name, v in (("noisy", np.abs(dn)), ("post", np.abs(dp)),
                                          ("exact", exact))}
        self._merge_one((level, query.name), part)

    def _merge_one(self, key: tuple[str, str], part: Mapping[str, Any]) -> None:
        row = self.rows.get(key)
        if row is None:
            self.rows[key] = {"units": part["units"], "answers": part["answers"],
                              "sums": list(part["sums"]), "counts": dict(part["counts"])}
            return
        row["units"] += part["units"]
        row["answers"] += part["answers"]
        row["sums"] = [a + b for a, b in zip(row["sums"], part["sums"])]
        for name, counts in part["counts"].items():
            mine = row["counts"].get(name)
            row["counts"][name] = (None if mine is None or counts is None
                                   else _add_counts(mine, counts))

    def to_dict(self) -> dict[str, Any]:
        return {f"{lv}\t{q}": row for (lv, q), row in self.rows.items()}

    def merge(self, data: Mapping[str, Any]) -> None:
        for key, part in data.items():
            lv, q = key.split("\t")
            self._merge_one((lv, q), part)

    def table(self, levels: Sequence[str], method: str = "topdown") -> pd.DataFrame:
        """``postproc run``'s error table (:func:`postproc.evaluation.tables.level_error_table`)
        for the measured queries: MAE (median absolute error), mean absolute error, RMSE."""
        rows = []
        for (lv, q), row in self.rows.items():
            n = row["answers"]
            an, sn, ap, sp_ = row["sums"]
            counts = row["counts"]
            rows.append({"level": lv, "query": q, "units": row["units"], "measured": q,
                         "measured_mae": _median(counts.get("noisy")),
                         f"{method}_mae": _median(counts.get("post")),
                         "measured_mean_abs": an / n, f"{method}_mean_abs": ap / n,
                         "measured_rmse": float(np.sqrt(sn / n)),
                         f"{method}_rmse": float(np.sqrt(sp_ / n)),
                         "exact_median": _median(counts.get("exact"))})
        frame = pd.DataFrame(rows)
        if frame.empty:
            return frame
        order = {lv: i for i, lv in enumerate(levels)}
        frame["_order"] = frame["level"].map(order)
        return (frame.sort_values(["_order", "query"], kind="stable")
                .drop(columns="_order").reset_index(drop=True))


def _value_counts(values: np.ndarray) -> list[list[int]]:
    """[[distinct values], [their counts]] of an integer array (by counting when the values
    are small and nonnegative, as errors and block counts are: linear, not a sort)."""
    values = np.asarray(values).ravel()
    if values.size and values.min() >= 0 and values.max() <= max(1 << 20, values.size):
        counts = np.bincount(values)
        v = np.flatnonzero(counts)
        return [v.tolist(), counts[v].tolist()]
    v, c = np.unique(values, return_counts=True)
    return [v.tolist(), c.tolist()]


def _add_counts(a: Sequence[Sequence[int]], b: Sequence[Sequence[int]]) -> list[list[int]]:
    values = np.concatenate([np.asarray(a[0], np.int64), np.asarray(b[0], np.int64)])
    counts = np.concatenate([np.asarray(a[1], np.int64), np.asarray(b[1], np.int64)])
    v, inverse = np.unique(values, return_inverse=True)
    return [v.tolist(), np.bincount(inverse, weights=counts).astype(np.int64).tolist()]


def _median(counts: Sequence[Sequence[int]] | None) -> float:
    """The median (``numpy.median``'s: the mean of the two middle values of an even count) of
    a value → count distribution; NaN without one (real-valued noise)."""
    if counts is None:
        return float("nan")
    values = np.asarray(counts[0], np.float64)
    cumulative = np.cumsum(counts[1])
    n = int(cumulative[-1])
    lo = values[np.searchsorted(cumulative, (n - 1) // 2, side="right")]
    hi = values[np.searchsorted(cumulative, n // 2, side="right")]
    return float((lo + hi) / 2)


def run_in_parts(config: RunConfig, out: str | Path, *, split: str = "tract",
                 part_blocks: int = DEFAULT_PART_BLOCKS, all_answers: bool = False,
                 resume: bool = False, progress: bool = False,
                 log: Callable[[str], None] = print,
                 show_confidential: bool = False) -> PartsResult:
    """Run TopDown on ``config`` one part of the geography at a time (see the module).

    Parameters
    ----------
    config : RunConfig
        A TopDown run on parquet files, with a blocks file (the geography); in release mode
        the measurements are saved under ``noisy/`` before they are solved (see the module).
    out : str or Path
        The output directory (created; with ``resume``, an interrupted run's to finish).
    split : str
        The level cut into parts; the levels above it are solved whole.
    part_blocks : int
        At most this many bottom-level units per part (a split-level unit with more is a part
        of its own).
    all_answers : bool
        Draw every answer of every query. By default only the answers that count a cell the
        post-processor can change are drawn (``measure_level(active=…)``): the others are
        known to be 0 from the published invariants, and TopDown's output is the same
        (``docs/scale2020.md``, "Why skipping those answers does not change TopDown's output").
    resume : bool
        Finish an interrupted run in ``out``: the top is solved again (the same measurements
        and histograms), parts already written are skipped, and in release mode the
        measurements saved are loaded, never drawn again.
    progress : bool
        A progress bar over the parts.
    log : callable
        Receives one line per step.
    show_confidential : bool
        In release mode, let the message of data that fail a check state the counts, rows and
        values it found; otherwise they go to ``out/confidential/validation.txt``
        (:mod:`postproc.gate`).

    Returns
    -------
    PartsResult

    Raises
    ------
    PostprocError
        No blocks file, a method other than TopDown, a split level that is the
        root or the bottom, persons outside the blocks file's geography, an ``out`` that
        holds something else, or one another run is writing (two runs into one directory would
        measure the data twice).

    Examples
    --------
    >>> import tempfile
    >>> from hierarchy.synth.census2020 import synthesize_2020
    >>> from postproc.apps.runs.demo import demo_config
    >>> base = Path(tempfile.mkdtemp())
    >>> _ = synthesize_2020(3_000, seed=1, out=base / "data")
    >>> done = run_in_parts(demo_config(base, preset="pl94_2020", seed=1, executor="serial"),
    ...                     base / "parts", part_blocks=40, log=lambda line: None)
    >>> done.parts > 1, sorted(p.name for p in done.directory.glob("*.parquet"))[:3]
    (True, ['block.parquet', 'block_group.parquet', 'county.parquet'])
    """
    t_start = time.perf_counter()
    geo, s = _check(config, split, part_blocks)
    with ExitStack() as stack:
        try:
            directory = claim_directory(Path(out), made_by=_MADE_BY, reuse=resume,
                                        how_to_reuse="pass resume=True (--resume) to finish an "
                                                     "interrupted run there")
            # one run at a time in a directory: a second would measure the data again
            stack.enter_context(lock_directory(directory, what=_MADE_BY))
        except HierarchyError as exc:
            raise PostprocError(str(exc)) from None
        stack.enter_context(data_errors(release=config.release, show=show_confidential,
                                        directory=directory, names=source_names(config)))
        return _run_in_parts_locked(config, directory, geo, s, split=split,
                                    part_blocks=part_blocks, all_answers=all_answers,
                                    resume=resume, progress=progress, log=log, t_start=t_start)


def _run_in_parts_locked(config: RunConfig, directory: Path, geo: Geography, s: int, *,
                         split: str, part_blocks: int, all_answers: bool, resume: bool,
                         progress: bool, log: Callable[[str], None],
                         t_start: float) -> PartsResult:
    """:func:`run_in_parts` in ``directory``, claimed and locked."""
    parts_dir = directory / "parts"
    if resume and (directory / "manifest.json").exists() and not parts_dir.exists():
        log(f"{directory}: run already finished; nothing to resume")
        return _finished(directory)
    if resume:
        removed = remove_leftovers(directory)
        if removed:
            log(f"    resume: removed {len(removed)} leftover(s) of an interrupted write")
    if config.randomness_mode == "simulation":
        log("    SIMULATION MODE: seeded randomness, reproducible by anyone with the seed — "
            "outputs are labelled NOT SAFE FOR RELEASE")
    parts_dir.mkdir(exist_ok=True)
    plan = plan_parts(geo, s, part_blocks)
    _check_settings(parts_dir / "plan.json", {
        "config": run_fingerprint(config), "split": split, "part_blocks": int(part_blocks),
        "parts": len(plan), "all_answers": bool(all_answers)}, directory)
    top_levels, low_levels = geo.levels[:s + 1], geo.levels[s + 1:]
    log(f"    {_count(len(plan), 'part')} of at most {part_blocks:,} {geo.levels[-1]} units "
        f"under {geo.n_units(s):,} {geo.levels[s]} units")
    timings: dict[str, Any] = {"levels": dict.fromkeys(geo.levels, 0.0)}

    ex = get_executor(config.topdown.executor, workers=config.topdown.workers,
                      scheduler=config.scheduler)
    try:
        # 1. tabulate part by part: the split level's histograms, the statistics below
        t = time.perf_counter()
        publish = config.publish()
        cache = confidential_directory(directory, what="error tables, the parts' exact counts "
                                       "while the run lasts") / "parts"
        cache.mkdir(exist_ok=True)
        tabulate = _TabulatePart(config, cache, publish, low_levels)
        # in this process: with the bottom level sparse, a part's tabulation (0.2–0.3 s) costs
        # less than sending its rows to a worker (40–60 MB pickled with their dictionaries):
        # 100M persons 52 s serially against 66 s on two workers
        # (benchmarks/pl94/parts_tabulate_100m_sparse.md)
        here = SerialExecutor()
        try:
            tabulated = _tabulate_parts(here, tabulate, _parts_in_one_pass(config, geo, s, plan),
                                        len(plan), progress)
        except _Unsorted:
            log(f"    the files' rows do not come {split} by {split} in the blocks file's order: "
                f"each part is read with a filter (slower; sort the files by geography to read "
                f"them in one pass)")
            tabulated = _tabulate_parts(here, tabulate, _parts_filtered(config, geo, s, plan),
                                        len(plan), progress)
        persons, split_counts, split_units, low_stats, digest = tabulated
        _check_all_read(config, persons)
        _check_settings(cache.parent / "parts_data_sha256.json", {"data": digest}, directory,
                        what="data")
        top_geo = Geography(top_levels, geo.geocodes[:s + 1], geo.parents[:s + 1])
        top_truth = from_leaf_counts(config.schema, top_geo, np.concatenate(split_counts),
                                     np.concatenate(split_units) if split_units else None,
                                     config.spec.unit_attribute)
        del split_counts, split_units
        published = published_statistics(top_truth, _publish_at(publish, top_levels))
        for lv, stats in low_stats.items():
            published.setdefault(lv, {}).update({k: np.concatenate(v) for k, v in stats.items()})
        del low_stats
        timings["tabulate"] = time.perf_counter() - t
        shown = _persons(persons, config.release, geo.levels[0] in publish.get("tot", []))
        log(f"    tabulated {shown} in {timings['tabulate']:.1f} s")

        # 2. the top, compiled on the whole geography
        t = time.perf_counter()
        compiled = compile_spec(config.spec, config.schema, geo, published)
        compiled_top = {lv: compiled[lv] for lv in top_levels}
        del compiled
        top_spec = config.spec.restricted(top_levels, geo.levels)
        check_data(top_spec, top_truth, compiled=compiled_top)    # before anything is drawn
        rnd = as_randomness(config.rng)
        mech = config.mechanism
        saved_top = directory / "noisy" / "top" if config.release else None
        loaded = saved_top is not None and resume and (saved_top / "metadata.json").exists()
        measurements, parameters = {}, {}
        top_exact = ({lv: _level_answers(config, top_truth.counts[li], lv)
                      for li, lv in enumerate(top_levels)}
                     if not loaded or config.wants_error_table else {})
        if loaded:
            measurements = NoisyHierarchy.load(saved_top).measurements
            log("    resume: loaded the top's measurements from noisy/top (the data are not "
                "measured again)")
        no_units = np.zeros((0, config.schema.size), np.int64)
        for li, lv in enumerate(geo.levels):
            if li > s or loaded:    # the parts' levels, or a top loaded: noise parameters only
                _, parameters[lv] = measure_level(no_units, lv, li, config.workload, config.budget,
                                                  mech, rnd)     # (no unit: no draw)
            else:
                measurements[lv], parameters[lv] = measure_level(
                    top_truth.counts[li], lv, li, config.workload, config.budget, mech, rnd,
                    answers=top_exact[lv],
                    active=None if all_answers else find_active_cells(compiled_top[lv]))
        provenance = measurement_provenance(config.budget, mech, rnd, parameters, publish,
                                            key_level=split,
                                            active_levels=() if all_answers else geo.levels)
        top_published = {lv: published[lv] for lv in top_levels if lv in published}
        noisy_top = NoisyHierarchy(config.schema, top_geo, config.workload, measurements,
                                   top_published,
                                   {**provenance, "spec_checked": top_spec.to_dict()})
        if saved_top is not None and not loaded:    # saved before anything is solved from it
            noisy_top.save(saved_top)
        errors = _Errors()
        top = topdown(noisy_top, top_spec, compiled=compiled_top,
                      options=config.topdown_options().at_levels(top_levels).replace(
                          executor=ex))
        for lv, seconds in top.provenance["timings"]["levels"].items():
            timings["levels"][lv] += seconds
        stats = [top.node_stats]
        level_persons = {lv: int(h.sum()) for lv, h in zip(top_levels, top.histograms)}
        level_persons.update(dict.fromkeys(low_levels, 0))
        for li, lv in enumerate(top_levels):
            write_parquet(level_table(config.schema, top_geo, lv, top.histograms[li]),
                          directory / f"{lv}.parquet", metadata=_meta(config))
            if config.wants_error_table:
                for name, m in measurements[lv].items():
                    errors.add(lv, config.workload[name], top_exact[lv][name], m,
                               top.histograms[li])
        split_hist = top.histograms[s]
        del noisy_top, measurements, top_truth, top_exact
        timings["top"] = time.perf_counter() - t
        log(f"    TopDown {' → '.join(top_levels)} in {timings['top']:.1f} s")

        # 3. the parts: each solved whole by one worker, which writes its files
        t = time.perf_counter()
        solver = _SolvePart(config, geo.levels, s, publish, provenance, parts_dir, cache,
                            directory / "noisy" / "parts" if config.release else None,
                            all_answers)
        todo, reports = [], []
        for k, (first, stop) in enumerate(plan):
            marker = parts_dir / f"part-{k:06d}.json"
            if marker.exists():
                _account(read_json(marker), errors, level_persons, timings, reports)
                stats.append(pd.read_parquet(parts_dir / f"node_stats-{k:06d}.parquet"))
            else:
                todo.append(_PartTask(k, part_geography(geo, s, first, stop),
                                      split_hist[first:stop]))
        bar = _progress(progress, len(todo), "TopDown parts")
        for done_part, node_stats_part in ex.map(solver, todo):
            _account(done_part, errors, level_persons, timings, reports)
            stats.append(node_stats_part)
            if bar is not None:
                bar.update(1)
        if bar is not None:
            bar.close()
        solved = len(todo)
        timings["parts"] = time.perf_counter() - t
        log(f"    TopDown {' → '.join(low_levels)} in {_count(len(plan), 'part')} in "
            f"{timings['parts']:.1f} s ({solved:,} solved now)")
    finally:
        ex.close()

    # 4. join
    t = time.perf_counter()
    for lv in low_levels:
        files = [parts_dir / f"{lv}-{k:06d}.parquet" for k in range(len(plan))]
        _join(files, directory / f"{lv}.parquet", _meta(config))
    write_parquet(pa.Table.from_pandas(geo.to_frame(), preserve_index=False),
                  directory / "geography.parquet", metadata=_meta(config))
    table = None
    if config.wants_error_table:
        table = label_table(errors.table(geo.levels), config.randomness_mode)
        conf = confidential_directory(directory, what="error tables")
        write_csv(table, conf / "error_table.csv")
    timings["join"] = time.perf_counter() - t
    timings["total"] = time.perf_counter() - t_start
    node_stats = pd.concat(stats, ignore_index=True)
    write_parquet(pa.Table.from_pandas(node_stats, preserve_index=False),
                  directory / "node_stats.parquet", metadata=_meta(config))
    write_json(_manifest(config, geo, node_stats, level_persons, provenance, top.provenance,
                         timings, {"split": split, "part_blocks": part_blocks,
                                   "parts": len(plan)}, reports),
               directory / "manifest.json")
    for k in range(len(plan)):          # only the files this run wrote
        for path in [parts_dir / f"{lv}-{k:06d}.parquet" for lv in low_levels] + [
                parts_dir / f"node_stats-{k:06d}.parquet", parts_dir / f"part-{k:06d}.json"]:
            path.unlink(missing_ok=True)
    (parts_dir / "plan.json").unlink(missing_ok=True)
    if not any(parts_dir.iterdir()):
        parts_dir.rmdir()
    for k in range(len(plan)):
        (cache / f"truth-{k:06d}.npz").unlink(missing_ok=True)
    if not any(cache.iterdir()):
        cache.rmdir()
    return PartsResult(directory, geo.levels, len(plan), solved, persons, timings, table,
                       config.release)


def whole_measurement(config: RunConfig, truth: Hierarchy, *, split: str = "tract",
                      all_answers: bool = False) -> NoisyHierarchy:
    """The measurement of the whole geography that a run in parts draws, part by part: streams
    keyed by ``split`` and, unless ``all_answers``, only the answers that count an active cell.
    TopDown on it gives the run in parts' histograms (to check the run, or to compare with it).

    Examples
    --------
    >>> import tempfile
    >>> from hierarchy.synth.census2020 import synthesize_2020
    >>> from postproc.apps.runs.demo import demo_config
    >>> from postproc.apps.runs.pipeline import load_truth
    >>> base = Path(tempfile.mkdtemp())
    >>> _ = synthesize_2020(2_000, seed=1, out=base / "data")
    >>> config = demo_config(base, preset="pl94_2020", seed=1)
    >>> noisy = whole_measurement(config, load_truth(config))
    >>> noisy.provenance["noise_streams"], noisy.get("block", "detailed").drawn is not None
    ({'key_level': 'tract'}, True)
    """
    from hierarchy.measurement import measure

    return measure(truth, config.workload, config.budget, config.mechanism, config.rng,
                   spec=config.spec, key_level=split,
                   active=None if all_answers else active_cells(config, truth))


def active_cells(config: RunConfig, truth: Hierarchy) -> dict[str, Any]:
    """Every level's active cells (:func:`invariants.active.find_active_cells`), from the spec
    compiled on the published statistics of ``truth`` (never its histograms).

    Examples
    --------
    >>> import tempfile
    >>> from hierarchy.synth.census2020 import synthesize_2020
    >>> from postproc.apps.runs.demo import demo_config
    >>> from postproc.apps.runs.pipeline import load_truth
    >>> base = Path(tempfile.mkdtemp())
    >>> _ = synthesize_2020(2_000, seed=1, out=base / "data")
    >>> config = demo_config(base, preset="pl94_2020", seed=1)
    >>> active = active_cells(config, load_truth(config))
    >>> blocks = active["block"]
    >>> blocks.n_units == load_truth(config).geography.n_units("block"), blocks.n_patterns < 40
    (True, True)
    """
    published = published_statistics(truth, config.publish())
    compiled = compile_spec(config.spec, config.schema, truth.geography, published)
    return {lv: find_active_cells(compiled[lv]) for lv in truth.levels}


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


def _check(config: RunConfig, split: str, part_blocks: int) -> tuple[Geography, int]:
    """The whole geography and the split level's index, or a PostprocError saying why not."""
    if config.method != "topdown":
        raise PostprocError(f"a run in parts runs TopDown, not {config.method!r}")
    if config.blocks is None:
        raise PostprocError("a run in parts needs [data] blocks: the geography, every block, "
                            "is cut into parts before any data is read")
    for path in (config.persons, config.units):
        if path is not None and path.suffix.lower() not in (".parquet", ".pq"):
            raise PostprocError(f"a run in parts reads its parts from parquet files; "
                                f"{path.name} is not parquet (convert it, e.g. with "
                                "pandas.read_csv(...).to_parquet(...))")
    if isinstance(part_blocks, bool) or not isinstance(part_blocks, (int, np.integer)) \
            or part_blocks < 1:
        raise PostprocError(f"part_blocks must be a positive integer, not {part_blocks!r}")
    geo = config.read_geography()
    if split not in geo.levels[1:-1]:
        raise PostprocError(f"the split level must be below the root and above the bottom: "
                            f"one of {list(geo.levels[1:-1])}, not {split!r}")
    return geo, geo.level_index(split)


def _count(n: int, noun: str) -> str:
    """``n`` and ``noun``, plural unless ``n`` is 1.

    >>> _count(1, "part"), _count(1_203, "part")
    ('1 part', '1,203 parts')
    """
    return f"{n:,} {noun}{'' if n == 1 else 's'}"


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


@dataclass(frozen=True)
class _PartTask:
    """One part for a worker: its index, its geography and the split level's histograms."""

    index: int
    geography: Geography
    given: np.ndarray


class _SolvePart:
    """Solve one part (picklable: an executor maps it over the parts): its saved counts, its
    measurement from keyed streams, TopDown below the split (serially: the parts are what runs
    in parallel), its files in ``parts/`` and last its marker. Returns the marker's contents
    and the part's node statistics."""

    def __init__(self, config: RunConfig, levels: Sequence[str], split: int,
                 publish: Mapping[str, Sequence[str]], provenance: dict[str, Any],
                 parts_dir: Path, cache: Path, noisy_dir: Path | None = None,
                 all_answers: bool = False):
        self.config, self.split = config, split
        self.low_levels = tuple(levels[split + 1:])
        self.spec = config.spec.restricted(self.low_levels, levels)
        self.publish, self.provenance = publish, provenance
        self.parts_dir, self.cache = parts_dir, cache
        self.noisy_dir = noisy_dir     # release mode: where each part's measurement is saved
        self.all_answers = all_answers

    def __call__(self, task: _PartTask) -> tuple[dict[str, Any], pd.DataFrame]:
        config, part, k = self.config, task.geography, task.index
        saved = None if self.noisy_dir is None else self.noisy_dir / f"part-{k:06d}"
        loaded = saved is not None and (saved / "metadata.json").exists()
        exact: dict[str, dict[str, np.ndarray]] = {}
        noisy = NoisyHierarchy.load(saved) if loaded else None
        # a part is checked against the spec before it is measured; a part measured by an
        # older version recorded no check, and is checked now
        unchecked = noisy is None or "spec_checked" not in noisy.provenance
        if not loaded or config.wants_error_table or unchecked:
            leaf = _load_counts(config, part, self.cache / f"truth-{k:06d}.npz")
            truth = leaf.to_hierarchy()
            exact = {part.levels[li]: _level_answers(
                config, truth.counts[li], part.levels[li],
                leaf.leaf_counts if li == part.depth - 1 else None)
                for li in range(2, part.depth)}
        if loaded:      # measured before an interruption: never measured again
            published = noisy.invariants
        else:
            published = published_statistics(truth, _publish_at(self.publish, self.low_levels))
        compiled = compile_spec(self.spec, config.schema, part, published)
        if unchecked:   # before the part is measured: data that break the spec are refused
            check_data(self.spec, truth, compiled=compiled)
            checked = {**(noisy.provenance if loaded else self.provenance),
                       "spec_checked": self.spec.to_dict()}
            if loaded:
                noisy = NoisyHierarchy(noisy.schema, noisy.geography, noisy.workload,
                                       noisy.measurements, noisy.invariants, checked)
        if not loaded:
            noisy = _measure_part(config, truth, part, self.split, as_randomness(config.rng),
                                  published, checked, exact,
                                  None if self.all_answers else compiled)
            if saved is not None:   # saved before anything is solved from it
                noisy.save(saved)
        given = task.given
        result = topdown(noisy, self.spec, start=(2, [given.sum(axis=0, keepdims=True), given]),
                         compiled=compiled, options=config.topdown_options().at_levels(
                             self.low_levels).replace(executor="serial", workers=None))
        errors = _Errors()
        for li in range(2, part.depth):
            lv = part.levels[li]
            write_parquet(level_table(config.schema, part, lv, result.histograms[li]),
                          self.parts_dir / f"{lv}-{k:06d}.parquet")
            if config.wants_error_table:
                post = result.histograms[li]
                post_sparse = sparse_copy(post)
                for name in noisy.queries(lv):
                    errors.add(lv, config.workload[name], exact[lv][name],
                               noisy.get(lv, name), post, post_sparse)
        write_parquet(pa.Table.from_pandas(result.node_stats, preserve_index=False),
                      self.parts_dir / f"node_stats-{k:06d}.parquet")
        marker = {"part": k, "errors": errors.to_dict(),
                  "persons": {lv: int(h.sum()) for lv, h in zip(part.levels[2:],
                                                                result.histograms[2:])},
                  "levels": result.provenance["timings"]["levels"],
                  "failsafe_reports": result.provenance.get("failsafe_reports", [])}
        write_json(marker, self.parts_dir / f"part-{k:06d}.json")
        return marker, result.node_stats


def _level_answers(config: RunConfig, counts: np.ndarray, level: str, sparse: Any = None
                   ) -> dict[str, np.ndarray]:
    """The exact answers of every query the budget measures at ``level``: computed once for
    the measurement and the error table, from one sparse copy of a mostly empty level (made
    per query, the copies cost 0.1 s each on a part's blocks; ``sparse``: the copy, when the
    caller has it)."""
    if sparse is None:
        sparse = sparse_copy(counts)
    return {q: exact_answers(config.workload[q], counts, sparse)
            for q in config.budget.queries(level)}


def _account(marker: Mapping[str, Any], errors: "_Errors", persons: dict[str, int],
             timings: dict[str, Any], reports: list[dict[str, Any]]) -> None:
    """Add a finished part's errors, persons, solve times and failsafe reports to the run's."""
    errors.merge(marker.get("errors", {}))
    reports.extend(marker.get("failsafe_reports", []))
    for lv, n in marker.get("persons", {}).items():
        persons[lv] += n
    for lv, seconds in marker.get("levels", {}).items():
        if lv in timings["levels"]:
            timings["levels"][lv] += seconds


class _TabulatePart:
    """Tabulate one part (picklable: an executor can map it over the parts as they are read): its
    rows validated and tabulated on the part's geography, and its counts saved for the second
    pass. Returns the persons read, the split level's histograms and units, the published
    statistics of the levels below, and the SHA-256 of what was saved."""

    def __init__(self, config: RunConfig, cache: Path, publish: Mapping[str, Sequence[str]],
                 low_levels: Sequence[str]):
        self.config, self.cache = config, cache
        self.publish, self.low_levels = publish, tuple(low_levels)

    def __call__(self, item: tuple[int, Geography, pa.Table, pa.Table | None]
                 ) -> tuple[int, np.ndarray, np.ndarray | None, dict[str, Any], str]:
        k, part, persons, units = item
        truth = _tabulate_part(self.config, part, persons, units)
        digest = _save_counts(truth, self.cache / f"truth-{k:06d}.npz")
        stats = published_statistics(truth, _publish_at(self.publish, self.low_levels))
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


def _measure_part(config: RunConfig, truth: Hierarchy, part: Geography, split: int, rnd: Any,
                  published: Mapping[str, Any], provenance: dict[str, Any],
                  exact: Mapping[str, Mapping[str, np.ndarray]],
                  compiled: Mapping[str, Any] | None) -> NoisyHierarchy:
    """The part's levels below the split, measured from streams keyed by their split-level
    ancestor: the values a measurement of the whole with ``key_level`` gets. ``exact``: level
    → query → exact answers, computed once for the measurement and the errors; with
    ``compiled`` (the part's constraints), only the answers that count an active cell."""
    codes = part.geocodes[1]
    measurements = {}
    for li in range(2, part.depth):
        lv = part.levels[li]
        measurements[lv], _ = measure_level(
            truth.counts[li], lv, split + li - 1, config.workload, config.budget,
            config.mechanism, rnd, keys=(codes, ancestor_offsets(part, li, 1)),
            answers=exact.get(lv),
            active=None if compiled is None else find_active_cells(compiled[lv]))
    return NoisyHierarchy(config.schema, part, config.workload, measurements, published,
                          provenance)


def _manifest(config: RunConfig, geo: Geography, node_stats: pd.DataFrame,
              persons: Mapping[str, int], measurement: dict[str, Any],
              top: Mapping[str, Any], timings: dict[str, Any], parts: dict[str, Any],
              failsafe_reports: Sequence[dict[str, Any]]) -> dict[str, Any]:
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
    return {**manifest_document("topdown", True, levels, randomness,
                                randomness.get("safe_for_release", False), config.schema,
                                config.workload, provenance), "release": release}


def _record(passes: Any) -> Any:
    if isinstance(passes, Mapping):
        return {lv: [list(p) for p in v] if v else None for lv, v in passes.items()}
    return [list(p) for p in passes] if passes else None


def _join(files: Sequence[Path], target: Path, metadata: Mapping[str, Any]) -> None:
    """The parts' tables of one level, one after another, into ``target`` (atomically)."""
    schema = pq.read_schema(files[0]).with_metadata(
        {b"dapp": json.dumps(dict(metadata)).encode()})
    with atomic_path(target) as path:
        with pq.ParquetWriter(path, schema, compression="zstd") as writer:
            for file in files:
                writer.write_table(pq.read_table(file).replace_schema_metadata(schema.metadata))


def _meta(config: RunConfig) -> dict[str, Any]:
    """The metadata of every file the run writes: that of a result's files
    (:func:`~postproc.result.file_metadata`) and what made it."""
    return {**file_metadata(as_randomness(config.rng).provenance(), config.schema),
            "made_by": _MADE_BY}


def _progress(enabled: bool, total: int, desc: str):
    if not enabled:
        return None
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=desc, unit="part")
