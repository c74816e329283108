"""``bluedown`` in parts: BlueDown of a geography too large to hold whole (``docs/gls.md``,
"BlueDown at national scale").

BlueDown needs only the upward pass of the GLS: each unit's subtree estimate ``L`` and its
covariance, which replace the unit's own measurements in TopDown's node problems. So a run in
parts (:func:`~postproc.apps.runs.parts_gls.gls_in_parts` with ``method="bluedown"``) shares
the first two steps of ``gls`` in parts — tabulate and measure the top; measure each part once
and solve it upward, keeping its bottom units' estimates — and then:

3. **The top** (:func:`_bluedown_top`): the GLS upward from the split level to the root with
   what the parts give it (cut in chunks of split units when they are many, as the GLS top
   is: :func:`_top_subtrees`), then TopDown's node problems root → split on the subtree
   estimates, on the executor. Its levels' integer histograms are written.
4. **Each part** (:class:`_BlueDownPart`): from its saved state
   (:func:`~postproc.methods.gls.parts.part_subtrees`) TopDown's node problems below its split
   units' rounded histograms, serially in one worker. The node problems are the whole tree's:
   the same subtree estimates and weights, the same constraints (the spec compiled from the
   part's published statistics), the same rounding and verification in exact integers.
"""

from __future__ import annotations

import pickle
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd

from hierarchy.geography import Geography
from hierarchy.io.storage import write_parquet
from hierarchy.noisy import NoisyHierarchy
from invariants.compile import compile_spec
from postproc.apps.runs.config import RunConfig
from postproc.apps.runs.parts_errors import _Errors
from postproc.apps.runs.parts_gls_top import (
    TOP_UNITS,
    _chunks,
    _Gathered,
    _mapped,
    _upward_chunks,
)
from postproc.apps.runs.parts_outputs import _finish, _meta, _Tally
from postproc.apps.runs.parts_plan import _Run
from postproc.infra.executors import get_executor
from postproc.methods.gls.bluedown import (
    bluedown_plan,
    check_options,
    level_measurements,
    signature_weight,
    subtree_measurements,
)
from postproc.methods.gls.method import GLSProblems
from postproc.methods.gls.parts import part_subtrees
from postproc.methods.gls.tree import Below
from postproc.methods.topdown.options import TopDownOptions
from postproc.methods.topdown.plan import plan_run
from postproc.methods.topdown.run import solve_plan
from postproc.result import level_table

__all__ = ["bluedown_options"]


def bluedown_options(config: RunConfig, levels: Sequence[str]) -> TopDownOptions:
    """TopDown's options of ``config`` at ``levels`` as BlueDown takes them: without the fit
    passes (each child has one pseudo-measurement); the rounding passes, failsafe and solver
    kept.

    Examples
    --------
    >>> import tempfile
    >>> from postproc.apps.runs.demo import demo_config
    >>> config = demo_config(tempfile.mkdtemp(), preset="pl94_2020", seed=1)
    >>> opts = bluedown_options(config, ("nation", "state"))
    >>> opts.passes, sorted(opts.round_passes)
    (None, ['nation', 'state'])
    """
    return check_options(config.topdown_options().at_levels(levels).replace(passes=None))


def _top_subtrees(run: _Run, problems: GLSProblems, schema: Any, below: Sequence[Below]
                  ) -> tuple[dict[str, list[Any]], dict[str, Any]]:
    """Step 3's GLS: the subtree estimates and weights of every level from the root to the
    split (as :func:`~postproc.methods.gls.bluedown.level_measurements` gives them), with what
    the parts give the split units (``below``), and the GLS's structure. With more than
    :data:`~postproc.apps.runs.parts_gls_top.TOP_UNITS` split units they are solved in chunks
    of consecutive parents, and only their estimates and weights are kept."""
    levels = run.top_levels
    parent = problems.parents[-1]
    if parent.size <= TOP_UNITS or len(problems.parents) <= 2:
        uncertainty = problems.uncertainty(problems.fit(below=below, downward=False))
        return ({lv: level_measurements(uncertainty, li) for li, lv in enumerate(levels)},
                problems.structure)
    means = np.empty((parent.size, schema.size))
    ids = np.empty(parent.size, dtype=np.int64)
    weights: list[Any] = []
    gathered = _Gathered(problems.parents[-2].size)
    for t0, t1, chunk, fits in _upward_chunks(problems, below, _chunks(parent, TOP_UNITS),
                                              gathered):
        uncertainty = chunk.uncertainty(fits)
        means[t0:t1] = uncertainty.subtree_means(0)
        distinct, inverse = np.unique(uncertainty.subtree_ids(0), return_inverse=True)
        ids[t0:t1] = len(weights) + inverse.ravel()
        weights.extend(signature_weight(uncertainty, int(i)) for i in distinct)
    upper = problems.upper(len(problems.parents) - 1)
    uncertainty = upper.uncertainty(upper.fit(below=gathered.below(), downward=False))
    out = {lv: level_measurements(uncertainty, li) for li, lv in enumerate(levels[:-1])}
    out[levels[-1]] = subtree_measurements(means, ids, weights.__getitem__, problems.symmetry)
    return out, {**problems.structure, "top_cut_under": levels[-2]}


def _bluedown_top(run: _Run, measured: dict[str, list[Any]], structure: Mapping[str, Any],
                  noisy: NoisyHierarchy, top_spec: Any, compiled_top: Mapping[str, Any],
                  executor: Any) -> Any:
    """Step 3's TopDown: the node problems root → split on the top's subtree estimates
    (``measured``, :func:`_top_subtrees`), on ``executor``; every top level's histograms
    written. Returns the top's result."""
    opts = bluedown_options(run.config, run.top_levels).replace(executor=executor)
    plan = plan_run(noisy, top_spec, opts, compiled=compiled_top, measured=measured)
    result = solve_plan(bluedown_plan(plan, structure))
    for li, lv in enumerate(run.top_levels):
        write_parquet(level_table(run.config.schema, noisy.geography, lv, result.histograms[li]),
                      run.directory / f"{lv}.parquet", metadata=_meta(run.config))
    return result


@dataclass(frozen=True)
class _BlueDownTask:
    """One part for a worker: its index, geography and its split units' histograms."""

    index: int
    geography: Geography
    given: np.ndarray


class _BlueDownPart:
    """A part's BlueDown (picklable): its state saved by the upward pass (with the part's
    published statistics and its measurement's provenance) gives its levels' subtree
    estimates; TopDown's node problems under its split units, serially; its levels' files and
    node statistics written to ``parts/``. Returns the part's index, persons per level and
    node statistics."""

    def __init__(self, config: RunConfig, levels: Sequence[str], split: int, parts_dir: Path,
                 structure: Mapping[str, Any]):
        self.config, self.parts_dir = config, parts_dir
        self.low_levels = tuple(levels[split + 1:])
        self.spec = config.spec.restricted(self.low_levels, levels)
        self.structure = dict(structure)

    def __call__(self, task: _BlueDownTask) -> tuple[dict[str, Any], pd.DataFrame]:
        config, part, k = self.config, task.geography, task.index
        state_file = self.parts_dir / f"state-{k:06d}.pkl"
        saved = pickle.loads(state_file.read_bytes())      # written by this run's upward pass
        noisy = NoisyHierarchy(config.schema, part, config.workload, {}, saved["invariants"],
                               saved["provenance"])
        compiled = compile_spec(self.spec, config.schema, part, saved["invariants"])
        measured = dict(zip(self.low_levels, part_subtrees(saved["state"])))
        del saved
        opts = bluedown_options(config, self.low_levels).replace(executor="serial",
                                                                 workers=None)
        plan = plan_run(noisy, self.spec, opts, first=2, compiled=compiled, measured=measured)
        given = task.given
        result = solve_plan(bluedown_plan(plan, self.structure),
                            start=(2, [given.sum(axis=0, keepdims=True), given]))
        for li in range(2, part.depth):
            write_parquet(level_table(config.schema, part, part.levels[li],
                                      result.histograms[li]),
                          self.parts_dir / f"{part.levels[li]}-{k:06d}.parquet")
        state_file.unlink()
        return ({"part": k, "persons": {lv: int(h.sum()) for lv, h in zip(
                    part.levels[2:], result.histograms[2:])},
                 "levels": result.provenance["timings"]["levels"],
                 "failsafe_reports": result.provenance.get("failsafe_reports", [])},
                result.node_stats)


def _bluedown_in_parts(run: _Run, problems: list[GLSProblems], noisy: NoisyHierarchy,
                       measurement: dict[str, Any], top_spec: Any,
                       compiled_top: Mapping[str, Any], below: list[Sequence[Below]],
                       tasks: Sequence[Any], cache: Path, timings: dict[str, Any],
                       t_start: float) -> int:
    """Steps 3 and 4 (see the module) and the join: the top's GLS upward, then its node
    problems on a fresh executor, then every part's on it, each part's persons, solve seconds
    and node statistics tallied; the files joined and the manifest written as a run in parts
    writes them (``method="bluedown"``, no error table: the parts' BlueDown sees no
    measurement). ``problems`` and ``below`` come in one-item lists the call empties: the
    top's GLS problems and what the parts gave them are not held while the node problems are
    solved. Returns the root's persons."""
    config, geo, log = run.config, run.geo, run.log
    tally = _Tally(_Errors(), dict.fromkeys(geo.levels, 0), dict.fromkeys(geo.levels, 0.0))
    timings["levels"] = tally.seconds
    ex = get_executor(config.topdown.executor, workers=config.topdown.workers,
                      scheduler=config.scheduler)
    try:
        t = time.perf_counter()
        measured, structure = _top_subtrees(run, problems.pop(), noisy.schema, below.pop())
        top = _bluedown_top(run, measured, structure, noisy, top_spec, compiled_top, ex)
        del measured
        tally.account({"persons": {lv: int(h.sum()) for lv, h in zip(run.top_levels,
                                                                       top.histograms)},
                       "levels": top.provenance["timings"]["levels"]}, top.node_stats)
        timings["top"] = time.perf_counter() - t
        log(f"    BlueDown {' → '.join(run.top_levels)} in {timings['top']:.1f} s")
        t = time.perf_counter()
        solver = _BlueDownPart(config, geo.levels, run.s, run.parts_dir, structure)
        todo = [_BlueDownTask(task.index, task.geography, top.histograms[-1][first:stop])
                for task, (first, stop) in zip(tasks, run.plan)]
        for marker, node_stats in _mapped(ex, solver, todo, run.progress, "BlueDown parts"):
            tally.account(marker, node_stats)
        timings["parts"] = time.perf_counter() - t
        log(f"    BlueDown {' → '.join(run.low_levels)} in {len(todo):,} parts in "
            f"{timings['parts']:.1f} s")
    finally:
        ex.close()
    _finish(run, cache, tally, measurement=measurement, top=top.provenance, timings=timings,
            t_start=t_start, method="bluedown")
    return tally.persons[geo.levels[0]]
