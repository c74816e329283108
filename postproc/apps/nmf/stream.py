"""TopDown on a Noisy Measurement File state by state (``postproc nmf run --stream``).

TopDown solves a level's node problems from the parents' rounded histograms only, so once the
nation → state pieces problem is solved, each state's subtree is a problem of its own, and
below a state's block groups each run of block groups is one too. :func:`run_nmf_streamed`
reads the nation and the state pieces first (a few files: ``read_nmf(..., down_to="state")``)
and solves them — the states' totals held over their pieces, as in the whole run — then the
states, two at a time on one pool of workers: each state's pieces down to its block groups read
and solved under its pieces' histograms, then its blocks part by part
(:mod:`postproc.apps.nmf.blocks`: one checked pass over its block files spills each part's
rows to disk; each part is then read, solved and written on a worker). Memory is two states
above their blocks plus a part per worker, never a state's block level, and the integers are
the whole run's (the same node problems, each from the same parent: tested). Each finished
state leaves a record in ``.states/``; a run into the same directory after an interruption
takes those states as they are.

The directory is what :meth:`Result.write <postproc.result.Result.write>` writes — every level in
long form, the geography, the node statistics, the manifest — and ``block_geoid.parquet``, built
from the states' files without holding the nation's histograms; :meth:`Result.read
<postproc.result.Result.read>` reads it.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from hierarchy.presets.pl94 import LEVELS
from postproc.apps.nmf.blocks import (
    _part_blocks,
    _SolveBlocks,
    _spill_blocks,
    block_codes,
    with_blocks,
)
from postproc.apps.nmf.files import _product_dir
from postproc.apps.nmf.layout import split_piece
from postproc.apps.nmf.reader import read_nmf
from postproc.apps.nmf.run import MADE_BY, nmf_record, production_options
from postproc.apps.nmf.tally import _blocks_done, _StateFiles, _Tally, _upper_levels
from postproc.apps.runs.directories import claim_output
from postproc.apps.runs.parts_plan import part_geography, plan_parts
from postproc.errors import PostprocError
from postproc.infra.executors import get_executor
from postproc.result import file_metadata

__all__ = ["run_nmf_streamed"]

_PARTS = ".states"          # the states' files until they are joined
_STATES_AT_ONCE = 2


def run_nmf_streamed(root: str | Path, out: str | Path, *,
                     states: Sequence[str] | None = None,
                     state_totals: str | Path | Mapping[str, int] | None = None,
                     method: str = "topdown", product: str = "persons",
                     options: Mapping[str, Any] | None = None, workers: int | None = None,
                     part_blocks: int | None = None, progress: bool = False,
                     queries: Sequence[str] = ("total",), interval: float = 0.9,
                     log: Callable[[str], None] = print) -> Path:
    """TopDown with the 2020 production options on a Noisy Measurement File, state by state
    and each state's blocks part by part (module docstring), into ``out``; or, with
    ``method="gls"``, the GLS estimate with intervals
    (:func:`~postproc.apps.nmf.stream_gls.gls_nmf_streamed`).

    Parameters
    ----------
    root, states, state_totals
        As for :func:`~postproc.apps.nmf.reader.read_nmf` (the persons' product).
    method, product, options
        What a caller was asked for: TopDown or BlueDown with the production options, or
        ``gls``, on the persons' product runs state by state
        (:mod:`~postproc.apps.nmf.stream_gls`, :mod:`~postproc.apps.nmf.stream_bluedown`);
        anything else is refused before anything is read.
    out : path
        A new or empty directory, or an earlier ``postproc nmf run``'s.
    workers : int, optional
        Processes that solve node problems, read block files and solve parts (every CPU when
        left out; 1: all in this process).
    part_blocks : int, optional
        Blocks per part at most (:mod:`postproc.apps.nmf.blocks`; a block group with more is
        a part alone): memory per worker. Default
        :data:`~postproc.apps.runs.parts_plan.DEFAULT_PART_BLOCKS` (20,000).
    progress : bool
        A progress bar over each state's parts.
    queries, interval
        ``gls`` only: the queries whose estimates and intervals are written for every unit,
        and the intervals' coverage.
    log : callable
        One line per step.

    Returns
    -------
    pathlib.Path

    Examples
    --------
    >>> run_nmf_streamed("/nonexistent", "/tmp/never", state_totals={"44": 1})
    Traceback (most recent call last):
    ...
    postproc.errors.PostprocError: NMF root '/nonexistent' is not a directory
    """
    from postproc.methods import postprocess
    from postproc.methods.topdown.options import TopDownOptions

    if method == "gls" and product == "persons" and not options:
        from postproc.apps.nmf.stream_gls import gls_nmf_streamed

        return gls_nmf_streamed(root, out, states=states, state_totals=state_totals,
                                queries=queries, interval=interval, workers=workers,
                                part_blocks=part_blocks, progress=progress, log=log)
    if method == "bluedown" and product == "persons" and not options:
        from postproc.apps.nmf.stream_bluedown import bluedown_nmf_streamed

        return bluedown_nmf_streamed(root, out, states=states, state_totals=state_totals,
                                     workers=workers, part_blocks=part_blocks,
                                     progress=progress, log=log)
    if queries != ("total",) or interval != 0.9:
        raise PostprocError("queries and interval are the GLS's: TopDown writes every "
                            "histogram whole")
    if method != "topdown" or product != "persons" or options:
        raise PostprocError(f"a run state by state is TopDown or BlueDown with the production "
                            f"options, or gls, on the persons' product, not {method} on the "
                            f"{product}' product" + (" with other options" if options else ""))
    part_blocks = _part_blocks(part_blocks)
    t0 = time.perf_counter()
    directory = claim_output(out, MADE_BY)    # before reading: a wrong --out, at once
    top, top_spec = read_nmf(root, states=states, state_totals=state_totals, down_to="state")
    full = production_options(list(LEVELS))
    top_options = {k: ({lv: v[lv] for lv in top.levels} if isinstance(v, dict) else v)
                   for k, v in full.items()}
    result = postprocess(top, "topdown", top_spec, **top_options)
    pieces = [str(p) for p in top.geography.geocodes[1]]
    log(f"nation -> {len(pieces)} state piece{'s' * (len(pieces) > 1)} in "
        f"{time.perf_counter() - t0:.1f} s")
    meta = file_metadata(top.provenance["randomness"], top.schema)
    parts = directory / _PARTS
    parts.mkdir(exist_ok=True)
    tally = _Tally(top, result)
    state = _State(root, state_totals, parts, meta, part_blocks, progress)
    with get_executor("serial" if workers == 1 else "process", workers=workers) as ex:
        below = TopDownOptions.of(full, executor=ex)    # every state's levels are the file's

        def one(fips: str) -> dict[str, Any]:
            t1 = time.perf_counter()
            record = state.done(fips, pieces, result.histograms[1])
            if record is not None:
                log(f"state {fips}: {record['blocks']:,} blocks solved by an earlier run "
                    "(resumed)")
                return record
            record = state.solve(fips, pieces, result.histograms[1], below, ex, log)
            log(f"state {fips}: {record['blocks']:,} blocks in {time.perf_counter() - t1:.1f} s")
            return record

        # two states at once on a pool: one's parts keep the workers busy while the other's
        # largest node problems (a state → county node, a level's last nodes) run alone
        threads = ThreadPoolExecutor(1 if workers == 1 else _STATES_AT_ONCE)
        try:
            for record in threads.map(one, sorted({split_piece(p)[0] for p in pieces})):
                tally.take(record, parts)
        finally:
            threads.shutdown(wait=True, cancel_futures=True)
    record = {**nmf_record(top.provenance), "files": tally.files, "bytes": tally.bytes}
    tally.write(directory, meta, {"nmf": record, "streamed": "state by state",
                                  "part_blocks": part_blocks},
                time.perf_counter() - t0)
    shutil.rmtree(parts)
    log(f"wrote {directory} in {time.perf_counter() - t0:.1f} s")
    return directory


@dataclass(frozen=True)
class _State(_StateFiles):
    """One state's run: above its blocks from its pieces' histograms, then its blocks part
    by part (:mod:`postproc.apps.nmf.blocks`)."""

    def key(self, fips: str, pieces: Sequence[str], pieces_solved: np.ndarray) -> str:
        """What a state's result depends on: the file, the parts' size and its pieces'
        histograms (from the nation's problem)."""
        own = [i for i, p in enumerate(pieces) if split_piece(p)[0] == fips]
        digest = hashlib.sha256(np.ascontiguousarray(pieces_solved[own]).tobytes())
        digest.update(f"{Path(self.root).resolve()}|{self.part_blocks}".encode())
        return digest.hexdigest()

    def done(self, fips: str, pieces: Sequence[str], pieces_solved: np.ndarray
             ) -> dict[str, Any] | None:
        """The record of state ``fips`` written by an earlier, interrupted run into the same
        directory, if it solved the same state from the same pieces; else None."""
        marker = self.parts / f"state-{fips}.json"
        if not marker.is_file():
            return None
        try:
            record = json.loads(marker.read_text())
        except (OSError, ValueError):
            return None
        if record.get("key") != self.key(fips, pieces, pieces_solved):
            return None
        names = [n for entry in record["levels"] for n in entry["files"]]
        names += [record["node_stats"], record["geography"]]
        return record if all((self.parts / n).is_file() for n in names) else None

    def solve(self, fips: str, pieces: Sequence[str], pieces_solved: np.ndarray, below: Any,
              ex: Any, log: Callable[[str], None]) -> dict[str, Any]:
        """Solve state ``fips`` (``pieces_solved``: the nation's pieces' histograms, in
        ``pieces``' order), write its levels, node statistics and geography under ``parts``
        and, last, its record (``state-SS.json``: what a resumed run skips); returns the
        record."""
        from postproc.methods.topdown.plan import plan_run
        from postproc.methods.topdown.run import solve_plan

        t0 = time.perf_counter()
        upper, spec = read_nmf(self.root, states=[fips], state_totals=self.state_totals,
                               down_to="block_group")
        own = [str(p) for p in upper.geography.geocodes[1]]
        given = pieces_solved[[pieces.index(p) for p in own]]
        plan = plan_run(upper, spec, below.at_levels(upper.levels), first=2)
        solved = solve_plan(plan, start=(2, [given.sum(axis=0, keepdims=True), given]))
        record: dict[str, Any] = {"key": self.key(fips, pieces, pieces_solved), "levels": [],
                                  "files": upper.provenance["files"],
                                  "bytes": upper.provenance["bytes"]}
        _upper_levels(record, self.parts, fips, upper.geography, solved, self.meta)
        log(f"state {fips}: down to its {upper.geography.n_units(upper.levels[-1]):,} block "
            f"groups in {time.perf_counter() - t0:.1f} s")
        t1 = time.perf_counter()
        pdir = _product_dir(self.root, "persons")
        geo = with_blocks(upper.geography, block_codes(pdir, own))
        split = geo.depth - 2
        cuts = plan_parts(geo, split, self.part_blocks)
        spill = self.parts / f"spill-{fips}"
        shutil.rmtree(spill, ignore_errors=True)     # an interrupted run's, cut otherwise
        files, nbytes, work = _spill_blocks(pdir, own, spill, np.asarray(geo.geocodes[split]),
                                           np.array([stop for _, stop in cuts]), ex)
        record["files"] += files
        record["bytes"] += nbytes
        # the wall time counts the wait behind the other state's parts; the work says the cost
        log(f"state {fips}: {files:,} block files ({nbytes / 2**30:.2f} GiB) read and split "
            f"into {len(cuts):,} part{'s' * (len(cuts) > 1)} ({work:.1f} s of work on the "
            f"workers) in {time.perf_counter() - t1:.1f} s")
        task = _SolveBlocks(spill, below.at_levels([LEVELS[-1]]).replace(
            executor="serial", workers=None), upper.provenance, self.meta)
        items = [(k, part_geography(geo, split, a, b), solved.histograms[split][a:b],
                  self.parts / f"block-{fips}-{k:05d}.parquet") for k, (a, b) in enumerate(cuts)]
        record = _blocks_done(record, self.parts, fips, geo, items, task, ex,
                              [solved.node_stats], self.progress)
        shutil.rmtree(spill)
        return record
