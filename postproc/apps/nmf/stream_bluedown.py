"""BlueDown on a Noisy Measurement File state by state (``postproc nmf run --stream --method
bluedown``): TopDown's node problems on the GLS subtree estimates, without holding a state's
block level.

BlueDown needs only the GLS's upward pass — each unit's subtree estimate and its covariance,
which replace the unit's measurements in TopDown's node problems. So the run is the GLS's
upward pass state by state (:mod:`postproc.apps.nmf.stream_gls`: each state read down to its
block groups, its blocks spilled and solved upward part by part, then its levels), keeping the
parts' bottom estimates and the state pieces', and then TopDown's passes from the top:

1. **The nation and the state pieces**: the nation's subtree estimate (from its own
   measurements and the states') and the pieces' (from their states) in the nation → pieces
   problem, the states' totals held over their pieces.
2. **Each state**, read again: its levels' subtree estimates (its levels solved upward again
   with what its parts gave) in its node problems from its pieces' histograms down to its block
   groups; then its parts on the workers, each from its block groups' histograms and its
   blocks' subtree estimates kept by the upward pass.

Every node problem is the whole file's BlueDown's — the same subtree estimates and weights,
the same constraints, rounding and exact verification — so the integers are the whole run's
(tested). The directory is what TopDown's stream writes (:mod:`postproc.apps.nmf.stream`):
``Result.read`` reads it. An interrupted run resumes: the upward passes as the GLS's do, and
each state's node problems once its record (``.states/state-SS.json``) is written.
"""

from __future__ import annotations

import hashlib
import json
import pickle
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import numpy as np
import pandas as pd

from hierarchy.geography import Geography
from hierarchy.io.storage import write_parquet
from hierarchy.noisy import NoisyHierarchy
from hierarchy.presets.pl94 import LEVELS, PL94_2020, pl94_workload
from postproc.apps.nmf.blocks import _part_blocks
from postproc.apps.nmf.reader import _spec, read_nmf
from postproc.apps.nmf.run import MADE_BY, nmf_record, production_options
from postproc.apps.nmf.stream_gls import _PARTS, _Nation, _StateRun, _undrawn
from postproc.apps.nmf.tally import _blocks_done, _Tally, _upper_levels
from postproc.apps.runs.directories import claim_output
from postproc.apps.runs.parts_plan import part_geography
from postproc.infra.executors import get_executor
from postproc.methods.gls.bluedown import (
    bluedown_plan,
    check_options,
    check_weight_cells,
    level_measurements,
    subtree_measurements,
)
from postproc.methods.gls.parts import part_subtrees
from postproc.methods.topdown.options import TopDownOptions
from postproc.methods.topdown.plan import plan_run
from postproc.methods.topdown.run import solve_plan
from postproc.result import file_metadata, level_table

__all__ = ["bluedown_nmf_streamed"]


def bluedown_nmf_streamed(root: str | Path, out: str | Path, *,
                          states: Sequence[str] | None = None,
                          state_totals: str | Path | Mapping[str, int] | None = None,
                          workers: int | None = None, part_blocks: int | None = None,
                          progress: bool = False, log: Callable[[str], None] = print) -> Path:
    """BlueDown with the 2020 production rounding passes on a Noisy Measurement File (the
    persons' product), state by state and each state's blocks part by part (module
    docstring), into ``out``.

    Parameters
    ----------
    root, states, state_totals
        As for :func:`~postproc.apps.nmf.reader.read_nmf`.
    out, workers, part_blocks, progress, log
        As for :func:`~postproc.apps.nmf.stream.run_nmf_streamed`.

    Returns
    -------
    pathlib.Path

    Examples
    --------
    >>> bluedown_nmf_streamed("/nonexistent", "/tmp/never", part_blocks=0)
    Traceback (most recent call last):
    ...
    postproc.errors.PostprocError: part_blocks must be a positive whole number, not 0
    """
    part_blocks = _part_blocks(part_blocks)
    t0 = time.perf_counter()
    directory = claim_output(out, MADE_BY)    # before reading: a wrong --out, at once
    top, top_spec = read_nmf(root, states=states, state_totals=state_totals, down_to="state")
    nation = _Nation.of(top, top_spec)
    check_weight_cells(nation.structure, top.schema)
    meta = file_metadata(top.provenance["randomness"], top.schema)
    parts = directory / _PARTS
    parts.mkdir(exist_ok=True)
    run = _StateRun(root, state_totals, parts, meta, part_blocks, progress, ("total",), 0.9,
                    nation.symmetry, keep_means=True)
    fips_all = sorted({str(p)[1:] for p in top.geography.geocodes[1]})
    with get_executor("serial" if workers == 1 else "process", workers=workers) as ex:
        options = check_options(TopDownOptions.of(production_options(list(LEVELS), "bluedown"),
                                                  executor=ex))
        ups = []
        for fips in fips_all:                                       # the GLS upward
            t1 = time.perf_counter()
            up = run.upward_done(fips)
            if up is None:
                up = run.upward(fips, ex, log)
                log(f"state {fips}: upward in {time.perf_counter() - t1:.1f} s")
            else:
                log(f"state {fips}: upward done by an earlier run (resumed)")
            ups.append(up)
        t1 = time.perf_counter()
        measured = {LEVELS[0]: nation.subtrees([up["contribution"] for up in ups]),
                    LEVELS[1]: _pieces(top, ups, nation.symmetry)}
        plan = plan_run(top, top_spec, options.at_levels(top.levels), measured=measured)
        result = solve_plan(bluedown_plan(plan, nation.structure))
        pieces = [str(p) for p in top.geography.geocodes[1]]
        log(f"nation -> {len(pieces)} state piece{'s' * (len(pieces) > 1)} in "
            f"{time.perf_counter() - t1:.1f} s")
        tally = _Tally(top, result, method="bluedown")
        tally.files += sum(up["files"] for up in ups)
        tally.bytes += sum(up["bytes"] for up in ups)
        state = _BlueDownState(run, options, nation.structure)
        for fips in fips_all:                                       # TopDown's passes
            t1 = time.perf_counter()
            given = result.histograms[1][[i for i, p in enumerate(pieces) if p[1:] == fips]]
            record = state.done(fips, given)
            if record is None:
                record = state.solve(fips, given, ex)
                log(f"state {fips}: {record['blocks']:,} blocks in "
                    f"{time.perf_counter() - t1:.1f} s")
            else:
                log(f"state {fips}: {record['blocks']:,} blocks solved by an earlier run "
                    "(resumed)")
            tally.take(record, parts)
    nmf = {**nmf_record(top.provenance), "files": tally.files, "bytes": tally.bytes}
    tally.write(directory, meta, {"nmf": nmf, "streamed": "state by state",
                                  "part_blocks": part_blocks, "gls": nation.structure},
                time.perf_counter() - t0)
    shutil.rmtree(parts)
    log(f"wrote {directory} in {time.perf_counter() - t0:.1f} s")
    return directory


def _pieces(top: NoisyHierarchy, ups: Sequence[Mapping[str, Any]], symmetry: Any) -> list[Any]:
    """The state pieces' subtree estimates, gathered from the states' upward passes in the
    order of the top's pieces."""
    means, ids, codes, weights = [], [], [], []
    for up in ups:
        own = up["pieces"]
        means.append(own["means"])
        ids.append(len(weights) + own["ids"])
        codes.extend(own["codes"])
        weights.extend(own["weights"])
    order = pd.Index(codes).get_indexer([str(p) for p in top.geography.geocodes[1]])
    return subtree_measurements(np.concatenate(means)[order], np.concatenate(ids)[order],
                                weights.__getitem__, symmetry)


@dataclass(frozen=True)
class _BlueDownState:
    """One state's node problems below its pieces: its levels down to its block groups here,
    its blocks part by part on the workers."""

    run: _StateRun
    options: TopDownOptions
    structure: Mapping[str, Any]

    def key(self, fips: str, given: np.ndarray) -> str:
        """What the state's integers depend on: its upward pass's key and its pieces'
        histograms."""
        digest = hashlib.sha256(self.run.key(fips).encode())
        digest.update(np.ascontiguousarray(given).tobytes())
        return digest.hexdigest()

    def done(self, fips: str, given: np.ndarray) -> dict[str, Any] | None:
        """The record an earlier, interrupted run into the same directory left for state
        ``fips`` from the same pieces' histograms (its files all there); else None."""
        marker = self.run.parts / f"state-{fips}.json"
        try:
            record = json.loads(marker.read_text()) if marker.is_file() else None
        except (OSError, ValueError):
            return None
        if record is None or record.get("key") != self.key(fips, given):
            return None
        names = [n for entry in record["levels"] for n in entry["files"]]
        names += [record["node_stats"], record["geography"]]
        return record if all((self.run.parts / n).is_file() for n in names) else None

    def solve(self, fips: str, given: np.ndarray, ex: Any) -> dict[str, Any]:
        """State ``fips`` from its pieces' histograms ``given``: its levels, node statistics
        and geography written under the run's ``.states/``, and last its record."""
        parts, run = self.run.parts, self.run
        saved = pickle.loads((parts / f"up-{fips}.pkl").read_bytes())
        tree, spec = run._read(fips)
        problems, _, levels = run._problems(_undrawn(tree, tree.levels[-1], saved["moved"]),
                                            spec, fips)
        uncertainty = problems.uncertainty(problems.fit(below=saved["below"], downward=False))
        measured = {lv: level_measurements(uncertainty, li) for li, lv in enumerate(levels)
                    if lv in tree.levels}
        plan = plan_run(tree, spec, self.options.at_levels(tree.levels), first=2,
                        measured=measured)
        solved = solve_plan(bluedown_plan(plan, self.structure),
                            start=(2, [given.sum(axis=0, keepdims=True), given]))
        del measured, uncertainty, problems
        record: dict[str, Any] = {"key": self.key(fips, given), "levels": [], "files": 0,
                                  "bytes": 0}
        _upper_levels(record, parts, fips, tree.geography, solved, run.meta)
        geo: Geography = saved["geo"]
        split = geo.depth - 2
        task = _BlueDownBlocks(self.options.at_levels([LEVELS[-1]]).replace(
            executor="serial", workers=None), dict(self.structure), dict(run.meta))
        spill = parts / f"spill-{fips}"
        items = [(spill / f"gls-{k:05d}.pkl", part_geography(geo, split, a, b),
                  solved.histograms[split][a:b], parts / f"block-{fips}-{k:05d}.parquet")
                 for k, (a, b) in enumerate(saved["cuts"])]
        del saved
        return _blocks_done(record, parts, fips, geo, items, task, ex, [solved.node_stats],
                            run.progress)


@dataclass(frozen=True)
class _BlueDownBlocks:
    """One part's block group → blocks node problems on a worker (picklable), from its block
    groups' histograms and its blocks' subtree estimates kept by the upward pass; its blocks
    written. Returns the part's persons, seconds and node statistics."""

    options: TopDownOptions
    structure: Mapping[str, Any]
    metadata: Mapping[str, Any]

    def __call__(self, item: tuple[Path, Geography, np.ndarray, Path]
                 ) -> tuple[int, float, pd.DataFrame]:
        state_file, geography, given, path = item
        t0 = time.perf_counter()
        saved = pickle.loads(state_file.read_bytes())      # written by the upward pass
        lv = geography.levels[2]
        noisy = NoisyHierarchy(PL94_2020, geography, pl94_workload(), {}, saved["invariants"],
                               saved["provenance"])
        spec = _spec(LEVELS, True).restricted([lv], LEVELS)
        measured = {lv: part_subtrees(saved["state"])[0]}
        del saved
        plan = plan_run(noisy, spec, self.options, first=2, measured=measured)
        result = solve_plan(bluedown_plan(plan, self.structure),
                            start=(2, [given.sum(axis=0, keepdims=True), given]))
        write_parquet(level_table(PL94_2020, geography, lv, result.histograms[2]), path,
                      metadata=dict(self.metadata))
        return int(result.histograms[2].sum()), time.perf_counter() - t0, result.node_stats
