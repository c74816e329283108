"""A state's blocks in parts (``postproc nmf run --stream``): TopDown below the block groups
without holding the state's block level.

A large state's blocks are most of its numbers (Texas: 1.6 billion of 1.7) and TopDown's dense
block histograms would be 700,000 × 2,016 × 8 bytes — more than a laptop holds. So a state is
solved in two steps, each node problem the one a run of the whole state solves:

1. **Above the blocks**: the state read down to its block groups (a few percent of its
   numbers) and solved from its pieces' histograms down to the block groups.
2. **The blocks, part by part.** The block groups are cut into runs of consecutive units with
   at most ``part_blocks`` blocks below them (:func:`~postproc.apps.runs.parts_plan.
   plan_parts`, from the state's geography, read first from the block constraint rows' geocodes
   alone). One pass over the state's block files (:class:`_Spill`, each run of a file's row
   groups on a worker: a published file holds a state piece's blocks whole) checks every row as
   the reader does — an error names the published file, partition and row — and writes each
   part's rows, already parsed, to ``<spill>/<dataset>/p<part>-f<task>-<n>.npz``. Then
   each part (:class:`_SolveBlocks`, on a worker) loads its rows, builds its hierarchy (a root,
   its block groups, their blocks), solves its block groups → blocks problems from the block
   groups' rounded histograms and writes its blocks.

Memory is the state above its blocks plus one part per worker; the spilled rows take about 4
bytes per number on disk (Texas: 6.5 GB) until the state is done.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from hierarchy.geography import Geography
from hierarchy.io.storage import write_parquet
from hierarchy.noisy import NoisyHierarchy
from hierarchy.presets.pl94 import LEVELS, PL94_2020, pl94_workload
from invariants.spec import Spec
from postproc.apps.nmf.files import _batches, _dataset_files, _Rows, _where
from postproc.apps.nmf.layout import (
    AXES,
    CON_SUFFIX,
    CONSTRAINT,
    DPQUERY,
    GEOLEVELS,
    row_kinds,
)
from postproc.apps.nmf.reader import _measurements, _spec, _unit_rows
from postproc.apps.runs.parts_plan import DEFAULT_PART_BLOCKS
from postproc.errors import PostprocError
from postproc.result import level_table

__all__ = ["block_codes", "with_blocks"]

_BLOCK = GEOLEVELS[-1]
#: The constraint every geounit has, whose rows give the geography.
_KEY = "hhgq_total_lb"


def block_codes(pdir: Path, pieces: Sequence[str]) -> _Rows:
    """The state pieces' blocks as the geography needs them: the geocodes of the block
    constraint rows of kind ``hhgq_total_lb`` (two columns of small files; no values read).

    Examples
    --------
    >>> block_codes(Path("/nonexistent"), ["044"])
    Traceback (most recent call last):
    ...
    postproc.errors.PostprocError: the NMF in '/nonexistent' has no Block.parquet/Constraint/ ...
    """
    key = _KEY + CON_SUFFIX
    rows = _Rows()
    for piece, f in _dataset_files(pdir, _BLOCK, CONSTRAINT, pieces):
        try:
            table = pq.read_table(f, columns=["geocode", "query_name"])
        except (pa.ArrowInvalid, OSError, KeyError) as exc:
            raise PostprocError(f"{_where(f, piece)}: not a readable NMF constraint file "
                                f"({exc})") from None
        codes = table.column("geocode").filter(pc.equal(table.column("query_name"), key))
        rows.geocodes.setdefault(_KEY, []).append(
            codes.to_numpy(zero_copy_only=False).astype(str))
    return rows


def _prefixes(codes: np.ndarray, width: int) -> np.ndarray:
    """Each geocode's first ``width`` characters (a block's block group), by one cast."""
    return np.asarray(codes, dtype=str).astype(f"U{width}")


def with_blocks(geography: Geography, blocks: _Rows) -> Geography:
    """The geography read down to the block groups with the blocks below them, ordered as
    a read of the whole state orders them (each block group's blocks by geocode); every block
    under a block group of the file, every block group with a block.

    Examples
    --------
    >>> geo = Geography(("nation", "block_group"), (np.array([""], object),
    ...                 np.array(["01", "02"], object)), (np.array([-1]), np.array([0, 0])))
    >>> blocks = _Rows(geocodes={"hhgq_total_lb": [np.array(["02b", "01c", "01a"])]})
    >>> full = with_blocks(geo, blocks)
    >>> full.levels, full.geocodes[2].tolist(), full.parents[2].tolist()
    (('nation', 'block_group', 'block'), ['01a', '01c', '02b'], [0, 0, 1])
    >>> with_blocks(geo, _Rows(geocodes={"hhgq_total_lb": [np.array(["01a"])]}))
    Traceback (most recent call last):
    ...
    postproc.errors.PostprocError: Block_Group '02' has constraint rows but no Block under it
    """
    groups = np.asarray(geography.geocodes[-1]).astype(str)
    codes = np.unique(np.concatenate(blocks.geocodes.get(_KEY, [np.zeros(0, str)])))
    width = len(groups[0]) if groups.size else 0
    parent = pd.Index(groups).get_indexer(_prefixes(codes, width))
    if (parent < 0).any():
        raise PostprocError(f"{_BLOCK} {str(codes[np.flatnonzero(parent < 0)[0]])!r} has "
                            "constraint rows but its block group has none")
    empty = np.bincount(parent, minlength=groups.size) == 0
    if empty.any():
        raise PostprocError(f"Block_Group {str(groups[np.flatnonzero(empty)[0]])!r} has constraint "
                            f"rows but no {_BLOCK} under it")
    order = np.lexsort((codes, parent))
    return Geography((*geography.levels, LEVELS[-1]),
                     (*geography.geocodes, codes[order].astype(object)),
                     (*geography.parents, parent[order].astype(np.int64)))


#: Rows one spill task reads (a run of a file's row groups) and the most it holds before it
#: writes them out: a file of many row groups (a published one holds a state piece's blocks in
#: one file) is shared among the workers, and a task's memory is bounded even by one huge row
#: group.
SPILL_ROWS = 1 << 18


@dataclass(frozen=True)
class _Spill:
    """Check a run of one block file's rows (as the reader does) and write each part's to its
    own ``.npz`` (picklable: an executor maps it over :func:`_spill_items`); returns the task's
    seconds. ``stops``: each part's end in the block groups ``groups`` (in the geography's
    order)."""

    spill: Path
    groups: np.ndarray
    stops: np.ndarray
    product: str = "persons"

    def __call__(self, item: tuple[int, str, str, Path, tuple[int, ...]]) -> float:
        t0 = time.perf_counter()
        index, dataset, piece, path, row_groups = item
        kinds = {k.query_name: k for k in row_kinds(self.product, _BLOCK, dataset)}
        pending, written = _Rows(), 0
        for batch in _batches(path, piece, dataset, kinds, AXES[self.product], row_groups):
            pending.extend(batch)
            if pending.count >= SPILL_ROWS:
                self._write(pending, index, written, path, piece, dataset)
                pending, written = _Rows(), written + 1
        if pending.count:
            self._write(pending, index, written, path, piece, dataset)
        # Arrow's allocator keeps what the parsing freed; the worker goes on to solve parts
        pa.default_memory_pool().release_unused()
        return time.perf_counter() - t0

    def _write(self, rows: _Rows, index: int, seq: int, path: Path, piece: str,
               dataset: str) -> None:
        width = len(str(self.groups[0]))
        lookup = pd.Index(self.groups.astype(str))
        chunks: dict[int, dict[str, np.ndarray]] = {}
        for kind in list(rows.geocodes):
            codes, values, var = rows.joined(kind)
            group = lookup.get_indexer(_prefixes(codes, width))
            if (group < 0).any():
                first = str(codes[np.flatnonzero(group < 0)[0]])
                raise PostprocError(f"{_where(path, piece)}: block {first!r} has {kind!r} rows "
                                    "but its block group has no constraint rows in the file")
            part = np.searchsorted(self.stops, group, side="right")
            for p in np.unique(part):
                sel = part == p
                chunk = chunks.setdefault(int(p), {})
                chunk[f"{kind}__g"], chunk[f"{kind}__v"] = codes[sel], values[sel]
                if var is not None:
                    chunk[f"{kind}__w"] = var[sel]
        folder = self.spill / dataset
        folder.mkdir(parents=True, exist_ok=True)
        for p, arrays in chunks.items():
            np.savez(folder / f"p{p:05d}-f{index:05d}-{seq:04d}.npz", **arrays)


def _spill_items(files: Sequence[tuple[str, str, Path]], rows: int | None = None
                 ) -> list[tuple[int, str, str, Path, tuple[int, ...]]]:
    """The spill's tasks: each file's row groups in consecutive runs of about ``rows`` rows
    (default :data:`SPILL_ROWS`; at least one group a run), numbered.

    Examples
    --------
    >>> import pyarrow as pa, tempfile
    >>> folder = Path(tempfile.mkdtemp())
    >>> pq.write_table(pa.table({"a": range(10)}), folder / "x.parquet", row_group_size=3)
    >>> [(k, groups) for k, _, _, _, groups in _spill_items([("DPQuery", "044",
    ...     folder / "x.parquet")], rows=5)]
    [(0, (0, 1)), (1, (2, 3))]
    """
    items = []
    rows = SPILL_ROWS if rows is None else rows
    for dataset, piece, path in files:
        try:
            meta = pq.ParquetFile(path).metadata
        except (pa.ArrowInvalid, OSError) as exc:
            raise PostprocError(f"{_where(path, piece)}: not a readable parquet file "
                                f"({exc})") from None
        run: list[int] = []
        held = 0
        for group in range(meta.num_row_groups):
            run.append(group)
            held += meta.row_group(group).num_rows
            if held >= rows:
                items.append((len(items), dataset, piece, path, tuple(run)))
                run, held = [], 0
        if run or not meta.num_row_groups:
            items.append((len(items), dataset, piece, path, tuple(run)))
    return items


def _spill_blocks(pdir: Path, pieces: Sequence[str], spill: Path, groups: np.ndarray,
                 stops: np.ndarray, executor: Any, product: str = "persons"
                 ) -> tuple[int, int, float]:
    """Every block file of ``pieces`` (constraints and measurements) checked and its rows
    written part by part under ``spill`` (module docstring), the files' row groups shared
    among the executor's workers; returns the files and bytes read and the seconds the tasks
    took (summed over the workers: their own work, not the wait for a worker)."""
    files = [(dataset, piece, f) for dataset in (CONSTRAINT, DPQUERY)
             for piece, f in _dataset_files(pdir, _BLOCK, dataset, pieces)]
    seconds = sum(executor.map(_Spill(spill, groups, stops, product), _spill_items(files)))
    return len(files), sum(f.stat().st_size for _, _, f in files), seconds


def _part_blocks(value: Any) -> int:
    """``part_blocks`` as given (None: the default), checked."""
    value = DEFAULT_PART_BLOCKS if value is None else value
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise PostprocError(f"part_blocks must be a positive whole number, not {value!r}")
    return value


def _part_rows(spill: Path, dataset: str, part: int) -> _Rows:
    """A part's rows of one dataset, as the spill wrote them."""
    rows = _Rows()
    for f in sorted((spill / dataset).glob(f"p{part:05d}-f*.npz")):
        with np.load(f) as data:
            kinds = sorted({k.rsplit("__", 1)[0] for k in data.files})
            for kind in kinds:
                var = data[f"{kind}__w"] if f"{kind}__w" in data.files else None
                rows.add(kind, data[f"{kind}__g"], data[f"{kind}__v"], var)
    return rows


def _part_noisy(spill: Path, part: int, geography: Geography, provenance: Mapping[str, Any]
               ) -> tuple[NoisyHierarchy, Spec]:
    """One part's hierarchy (its root, block groups and blocks; measured at the blocks only)
    and the spec of its blocks' constraints."""
    codes = np.asarray(geography.geocodes[2]).astype(str)
    cons, dpq = _part_rows(spill, CONSTRAINT, part), _part_rows(spill, DPQUERY, part)
    lv = geography.levels[2]
    names = [k.name for k in row_kinds("persons", "State", CONSTRAINT)]
    invariants = {lv: {n + CON_SUFFIX: _unit_rows(cons, n, codes, lv, required=True)[0]
                       for n in names}}
    measurements = {lv: _measurements(dpq, codes, lv, geography, 2)}
    spec = _spec(LEVELS, True).restricted([lv], LEVELS)
    for level in geography.levels[:2]:
        invariants[level] = {}
    noisy = NoisyHierarchy(PL94_2020, geography, pl94_workload(), measurements, invariants,
                           {**provenance, "spec_checked": spec.to_dict()})
    return noisy, spec


@dataclass(frozen=True)
class _SolveBlocks:
    """Solve one part's block groups → blocks problems and write its blocks (picklable: an
    executor maps it over the parts). Returns the part's persons, seconds and node
    statistics."""

    spill: Path
    options: Any
    provenance: Mapping[str, Any]
    metadata: Mapping[str, Any]

    def __call__(self, item: tuple[int, Geography, np.ndarray, Path]
                 ) -> tuple[int, float, pd.DataFrame]:
        from postproc.methods.topdown.run import topdown

        part, geography, given, path = item
        t0 = time.perf_counter()
        noisy, spec = _part_noisy(self.spill, part, geography, self.provenance)
        result = topdown(noisy, spec, options=self.options,
                         start=(2, [given.sum(axis=0, keepdims=True), given]))
        lv = geography.levels[2]
        write_parquet(level_table(PL94_2020, geography, lv, result.histograms[2]),
                      path, metadata=dict(self.metadata))
        return int(result.histograms[2].sum()), time.perf_counter() - t0, result.node_stats
