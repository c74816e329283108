"""TopDown on a Noisy Measurement File state by state (``postproc nmf run --stream``).

TopDown solves a level's node problems from the parents' rounded histograms only, so once the
nation → state pieces problem is solved, each state's subtree is a problem of its own.
:func:`run_nmf_streamed` reads the nation and the state pieces first (a few files:
``read_nmf(..., down_to="state")``) and solves them — the states' totals held over their pieces,
as in the whole run — then reads one state at a time (its one or two pieces and everything below
them), solves its counties, tracts, block groups and blocks under its pieces' histograms, writes
its levels and lets it go. Memory is that of the largest state, never the whole file's, and the
integers are the whole run's (the same node problems, each from the same parent: tested).

The directory is what :meth:`Result.write <postproc.result.Result.write>` writes — every level in
long form, the geography, the node statistics, the manifest — and ``block_geoid.parquet``, built
from the states' files without holding the nation's histograms; :meth:`Result.read
<postproc.result.Result.read>` reads it.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import numpy as np
import pandas as pd
import pyarrow as pa

from hierarchy.io.joins import join_parquet
from hierarchy.io.storage import write_json, write_parquet
from hierarchy.presets.pl94 import LEVELS
from postproc.apps.nmf.layout import split_piece
from postproc.apps.nmf.reader import read_nmf
from postproc.apps.nmf.run import MADE_BY, nmf_record, production_options, write_block_geoids
from postproc.apps.runs.directories import claim_output
from postproc.errors import PostprocError
from postproc.result import file_metadata, level_entry, level_table, manifest_document

__all__ = ["run_nmf_streamed"]

_PARTS = ".states"          # the states' files until they are joined


def run_nmf_streamed(root: str | Path, out: str | Path, *,
                     states: Sequence[str] | None = None,
                     state_totals: str | Path | Mapping[str, int] | None = None,
                     method: str = "topdown", product: str = "persons",
                     options: Mapping[str, Any] | None = None,
                     log: Callable[[str], None] = print) -> Path:
    """TopDown with the 2020 production options on a Noisy Measurement File, state by state
    (module docstring), into ``out``.

    Parameters
    ----------
    root, states, state_totals
        As for :func:`~postproc.apps.nmf.reader.read_nmf` (the persons' product).
    method, product, options
        What a caller was asked for: only TopDown with its production options on the persons'
        product runs state by state (gls and BlueDown estimate the whole tree at once);
        anything else is refused before anything is read.
    out : path
        A new or empty directory, or an earlier ``postproc nmf run``'s.
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
    from postproc.methods.topdown.plan import plan_run
    from postproc.methods.topdown.run import solve_plan

    if method != "topdown" or product != "persons" or options:
        raise PostprocError(f"a run state by state is TopDown with the production options on "
                            f"the persons' product, not {method} on the {product}' product"
                            + (" with other options" if options else "") + "; gls and "
                            "BlueDown estimate the whole tree at once")
    t0 = time.perf_counter()
    directory = claim_output(out, MADE_BY)    # before reading: a wrong --out, at once
    top, top_spec = read_nmf(root, states=states, state_totals=state_totals, down_to="state")
    full = production_options(list(LEVELS))
    top_options = {k: ({lv: v[lv] for lv in top.levels} if isinstance(v, dict) else v)
                   for k, v in full.items()}
    result = postprocess(top, "topdown", top_spec, **top_options)
    pieces = [str(p) for p in top.geography.geocodes[1]]
    log(f"nation -> {len(pieces)} state pieces in {time.perf_counter() - t0:.1f} s")
    schema, randomness = top.schema, top.provenance["randomness"]
    meta = file_metadata(randomness, schema)
    parts = directory / _PARTS
    parts.mkdir(exist_ok=True)
    tally = _Tally(top, result)
    below = TopDownOptions.of(full)          # every state's levels are the file's
    for fips in sorted({split_piece(p)[0] for p in pieces}):
        t1 = time.perf_counter()
        noisy, spec = read_nmf(root, states=[fips], state_totals=state_totals)
        given = result.histograms[1][[pieces.index(str(p)) for p in noisy.geography.geocodes[1]]]
        plan = plan_run(noisy, spec, below, first=2)
        solved = solve_plan(plan, start=(2, [given.sum(axis=0, keepdims=True), given]))
        for li in range(2, noisy.geography.depth):
            lv = noisy.levels[li]
            write_parquet(level_table(schema, noisy.geography, lv, solved.histograms[li]),
                          parts / f"{lv}-{fips}.parquet", metadata=meta)
        tally.add(noisy, solved, fips)
        log(f"state {fips}: {noisy.geography.n_units(noisy.levels[-1]):,} blocks in "
            f"{time.perf_counter() - t1:.1f} s")
        del noisy, solved, plan
    record = {**nmf_record(top.provenance), "files": tally.files, "bytes": tally.bytes}
    tally.write(directory, parts, meta, {"nmf": record, "streamed": "state by state"},
                time.perf_counter() - t0)
    shutil.rmtree(parts)
    log(f"wrote {directory} in {time.perf_counter() - t0:.1f} s")
    return directory


class _Tally:
    """What the states add up to: each level's units, persons and seconds, the node
    statistics, each state's geography below its pieces."""

    def __init__(self, top: Any, result: Any):
        self.top, self.result = top, result
        self.units = {lv: int(h.shape[0]) for lv, h in zip(top.levels, result.histograms)}
        self.persons = {lv: int(h.sum()) for lv, h in zip(top.levels, result.histograms)}
        self.seconds = dict(result.provenance.timings.get("levels", {}))
        self.stats = [result.node_stats]
        self.frames: list[pd.DataFrame] = []
        self.states: list[str] = []
        self.files, self.bytes = top.provenance["files"], top.provenance["bytes"]

    def add(self, noisy: Any, solved: Any, fips: str) -> None:
        for li in range(2, noisy.geography.depth):
            lv = noisy.levels[li]
            self.units[lv] = self.units.get(lv, 0) + int(solved.histograms[li].shape[0])
            self.persons[lv] = self.persons.get(lv, 0) + int(solved.histograms[li].sum())
            self.seconds[lv] = self.seconds.get(lv, 0.0) + float(
                solved.provenance.timings.get("levels", {}).get(lv, 0.0))
        self.stats.append(solved.node_stats)
        self.files += noisy.provenance["files"]
        self.bytes += noisy.provenance["bytes"]
        frame = noisy.geography.to_frame()
        self.frames.append(frame[~frame["level"].isin(noisy.levels[:2])])
        self.states.append(fips)

    def write(self, directory: Path, parts: Path, meta: Mapping[str, Any],
              extra: Mapping[str, Any], seconds: float) -> None:
        """Every level's file, the geography (each level in its parents' order), the node
        statistics, ``block_geoid.parquet`` and the manifest."""
        top, result = self.top, self.result
        levels = list(LEVELS)
        for lv in top.levels:
            write_parquet(result.to_table(lv), directory / f"{lv}.parquet", metadata=meta)
        for lv in levels[2:]:
            join_parquet([parts / f"{lv}-{fips}.parquet" for fips in self.states],
                         directory / f"{lv}.parquet", metadata=meta)
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
        manifest = manifest_document("topdown", True, per_level, result.randomness,
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
