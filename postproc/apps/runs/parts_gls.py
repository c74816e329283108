"""``gls`` in parts: the best linear unbiased estimate of a geography too large to hold whole
(``docs/gls.md``, "At national scale").

The hierarchical GLS is two passes over the tree; cut under the split level (``tract`` by
default) as :func:`~postproc.apps.runs.parts.run_in_parts` cuts it, it runs in four steps, and
no level below the split is ever held whole:

1. **Tabulate** part by part, and **measure the top** (root → split), as a TopDown run in parts
   does (the same streams, keyed by the split level; only the answers that count an active
   cell).
2. **Upward, part by part** (:func:`~postproc.methods.gls.parts.part_upward`): each part is
   measured once (in release mode saved in ``noisy/parts/`` first) and its levels below the
   split solved upward as a forest, its bottom level in groups of units that share their
   active cells. What its split units need from below — the sum of their children's subtree
   estimates and its covariance (a :class:`~postproc.methods.gls.tree.Below`) — goes back to
   this process; what its own downward pass needs (a
   :class:`~postproc.methods.gls.parts.PartState`: no measurement, no bottom histogram) is
   saved in ``parts/state-K.pkl``.
3. **The top**, with those sums (``below``): the estimate and covariance of every unit from the
   root to the split level — the whole tree's, exactly — and each split unit's step for its
   children. Written with intervals.
4. **Downward, part by part** (:func:`~postproc.methods.gls.parts.part_downward`): each part's
   state and its split units' steps give its levels' estimates; its split units'
   ``M = Σ⁺ V Σ⁺ − Σ⁺`` (:func:`~postproc.methods.gls.operators.step_precision`, kept by the top
   in ``parts/precision-P.npy``) give its units' covariances
   (:func:`~postproc.methods.gls.parts.part_variances`), exactly the whole tree's. Written
   part by part and joined.

Output directory: ``<level>.parquet`` for every level: the estimates of the requested queries
with their intervals (long form: the level's geocode, ``query``, ``answer``, ``estimate``,
``se``, ``lower``, ``upper``); ``geography.parquet``; ``manifest.json`` (timings, the
randomness label); ``noisy/`` in release mode.
"""

from __future__ import annotations

import pickle
import time
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np
import pandas as pd
import pyarrow as pa

from hierarchy.errors import HierarchyError
from hierarchy.frames import resolve_query
from hierarchy.geography import Geography
from hierarchy.io.joins import join_parquet
from hierarchy.io.storage import (
    atomic_path,
    claim_directory,
    confidential_directory,
    lock_directory,
    write_json,
    write_parquet,
)
from invariants.compile import check_data, compile_spec
from postproc.apps.runs.config import RunConfig
from postproc.apps.runs.parts import _begin, _measure_top, _SolvePart
from postproc.apps.runs.parts_bluedown import _bluedown_in_parts
from postproc.apps.runs.parts_gls_top import (
    _Gathered,
    _GLSTask,
    _mapped,
    _Precisions,
    _query,
    _top,
    top_problems,
)
from postproc.apps.runs.parts_outputs import _meta, _remove_part_files
from postproc.apps.runs.parts_plan import (
    DEFAULT_PART_BLOCKS,
    _check,
    _count,
    _Run,
    part_geography,
    plan_parts,
)
from postproc.apps.runs.parts_tabulate import Published, _tabulate_all
from postproc.errors import PostprocError
from postproc.gate import data_errors, source_names
from postproc.infra.executors import get_executor
from postproc.intervals import interval_table, z_value
from postproc.methods.gls.bluedown import check_weight_cells
from postproc.methods.gls.parts import part_downward, part_upward, part_variances
from postproc.methods.gls.tree import Below

__all__ = ["gls_in_parts", "GLSParts"]

_MADE_BY = "postproc gls in parts"


@dataclass(frozen=True)
class GLSParts:
    """What :func:`gls_in_parts` did: its directory, levels, parts, persons (the root's
    estimate), and seconds per step.

    Examples
    --------
    >>> done = GLSParts(Path("out"), ("nation", "tract", "block"), 3, 1000.0, {"total": 1.5})
    >>> done.parts, done.timings["total"]
    (3, 1.5)
    """

    directory: Path
    levels: tuple[str, ...]
    parts: int
    persons: float
    timings: dict[str, float]


def gls_in_parts(config: RunConfig, out: str | Path, *, split: str = "tract",
                 part_blocks: int = DEFAULT_PART_BLOCKS, queries: Sequence[str] = ("total",),
                 interval: float = 0.9, progress: bool = False,
                 log: Callable[[str], None] = print,
                 show_confidential: bool = False, method: str = "gls") -> GLSParts:
    """The GLS of ``config``'s data one part of the geography at a time (see the module).

    Parameters
    ----------
    config : RunConfig
        A run on parquet files with a blocks file (the geography); its method is not read.
    out : str or Path
        A new output directory.
    split, part_blocks
        As :func:`~postproc.apps.runs.parts.run_in_parts`.
    queries : sequence of str
        The queries whose estimates are written for every unit of every level (workload names
        or query expressions); default the total.
    interval : float
        The coverage of the intervals written for every unit.
    progress : bool
        Progress bars over the parts.
    log : callable
        Receives one line per step.
    show_confidential : bool
        As :func:`~postproc.apps.runs.parts.run_in_parts`.
    method : {"gls", "bluedown"}
        ``"bluedown"``: BlueDown in parts instead
        (:mod:`~postproc.apps.runs.parts_bluedown`): its integer histograms, written and
        described as a TopDown run in parts writes them (``queries`` and ``interval`` unused).

    Returns
    -------
    GLSParts

    Raises
    ------
    PostprocError
        As :func:`~postproc.apps.runs.parts.run_in_parts`; an unknown query.

    Examples
    --------
    >>> import tempfile
    >>> from hierarchy.synth.census2020 import synthesize_2020
    >>> from postproc.apps.runs.demo import demo_config
    >>> base = Path(tempfile.mkdtemp())
    >>> _ = synthesize_2020(3_000, seed=1, out=base / "data")
    >>> done = gls_in_parts(demo_config(base, preset="pl94_2020", seed=1, executor="serial"),
    ...                     base / "gls", part_blocks=40, log=lambda line: None)
    >>> done.parts > 1, round(done.persons)
    (True, 3000)
    >>> tracts = pd.read_parquet(done.directory / "tract.parquet")
    >>> list(tracts.columns)
    ['tract', 'query', 'answer', 'estimate', 'se', 'lower', 'upper']
    """
    t_start = time.perf_counter()
    if method not in ("gls", "bluedown"):
        raise PostprocError(f"in parts: method {method!r} is not 'gls' or 'bluedown'")
    geo, s = _check(config, split, part_blocks, methods=None)
    for q in queries:       # an unknown query: before any work
        try:
            resolve_query(q, config.schema, config.workload)
        except HierarchyError as exc:
            raise PostprocError(f"gls in parts: {exc}") from None
    with ExitStack() as stack:
        try:
            directory = claim_directory(Path(out), made_by=_MADE_BY)
            stack.enter_context(lock_directory(directory, what=_MADE_BY))
        except HierarchyError as exc:
            raise PostprocError(str(exc)) from None
        stack.enter_context(data_errors(release=config.release, show=show_confidential,
                                        directory=directory, names=source_names(config)))
        return _gls_locked(config, directory, geo, s, split, part_blocks, tuple(queries),
                           interval, progress, log, t_start, method)


class _GLSUpward(_SolvePart):
    """A part's upward pass (picklable): measured, its problems solved upward, what its
    downward pass needs saved in ``parts/state-K.pkl``; returns what its split units need from
    below (a :class:`Below` per problem) and the seconds spent measuring and solving."""

    def __init__(self, *args: Any, queries: Sequence[str] = ("total",),
                 keep_means: bool = False, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.queries, self.keep_means = tuple(queries), keep_means

    def __call__(self, task: _GLSTask) -> tuple[int, list[Below], dict[str, float]]:
        config, part, k = self.config, task.geography, task.index
        t = time.perf_counter()
        noisy, compiled, _ = self.measured(task)
        measured = time.perf_counter() - t
        state, below = part_upward(noisy, compiled, part.levels[2:], part.n_units(1),
                                   [_query(config, q).matrix for q in self.queries],
                                   keep_means=self.keep_means)
        saved = {"state": state, "invariants": noisy.invariants,
                 "provenance": dict(noisy.provenance)}
        del noisy
        with atomic_path(self.parts_dir / f"state-{k:06d}.pkl") as path:
            path.write_bytes(pickle.dumps(saved, protocol=pickle.HIGHEST_PROTOCOL))
        return k, below, {"measure": measured, "gls": time.perf_counter() - t - measured}


class _GLSDownward:
    """A part's downward pass (picklable): its saved state, its split units' steps and their
    ``M`` (:class:`_Precisions`) give its levels' estimates and intervals, written to
    ``parts/``; returns the part's index."""

    def __init__(self, config: RunConfig, parts_dir: Path, queries: Sequence[str],
                 precisions: "_Precisions", interval: float):
        self.config, self.parts_dir, self.queries = config, parts_dir, tuple(queries)
        self.precisions, self.z = precisions, z_value(interval)

    def __call__(self, task: _GLSTask) -> int:
        config, part, k = self.config, task.geography, task.index
        state_file = self.parts_dir / f"state-{k:06d}.pkl"
        state = pickle.loads(state_file.read_bytes())["state"]  # written by the upward pass
        queries = [_query(config, q) for q in self.queries]
        matrices = [q.matrix for q in queries]
        hists, answers = part_downward(state, task.above, matrices)
        variances = part_variances(state, self.precisions.rows(*task.rows), matrices)
        for li, hist in enumerate(hists, start=2):
            self._write(k, part, li, queries,
                        [np.asarray(q.answer(hist), float) for q in queries], variances[li - 2])
        self._write(k, part, part.depth - 1, queries, answers, variances[-1])
        state_file.unlink()
        return k

    def _write(self, k: int, part: Geography, li: int, queries: Sequence[Any],
               answers: Sequence[np.ndarray], variances: Sequence[np.ndarray]) -> None:
        level, codes = part.levels[li], part.geocodes[li]
        frame = pd.concat([interval_table(level, codes, q, a, np.sqrt(v), self.z)
                           .assign(query=q.name) for q, a, v in zip(queries, answers, variances)],
                          ignore_index=True)
        frame = frame[[level, "query", "answer", "estimate", "se", "lower", "upper"]]
        write_parquet(pa.Table.from_pandas(frame, preserve_index=False),
                      self.parts_dir / f"{level}-{k:06d}.parquet")


def _gls_locked(config: RunConfig, directory: Path, geo: Geography, s: int, split: str,
                part_blocks: int, queries: tuple[str, ...], interval: float, progress: bool,
                log: Callable[[str], None], t_start: float, method: str) -> GLSParts:
    """The four steps in a claimed, locked directory (the last two BlueDown's for
    ``method="bluedown"``)."""
    _begin(config, directory, False, log)
    plan = plan_parts(geo, s, part_blocks)
    log(f"    {_count(len(plan), 'part')} of at most {part_blocks:,} {geo.levels[-1]} units "
        f"under {geo.n_units(s):,} {geo.levels[s]} units")
    parts_dir = directory / "parts"
    parts_dir.mkdir()
    run = _Run(config, directory, geo, split, s, plan, part_blocks, False, False, progress, log)
    timings: dict[str, float] = {}
    ex = get_executor(config.topdown.executor, workers=config.topdown.workers,
                      scheduler=config.scheduler)
    try:
        publish = Published.of(config)
        cache = confidential_directory(directory, what="the parts' exact counts while the run "
                                       "lasts") / "parts"
        cache.mkdir(exist_ok=True)
        t = time.perf_counter()
        tabulated = _tabulate_all(run, publish, cache)                     # 1. tabulate
        compiled = compile_spec(config.spec, config.schema, geo, tabulated.published)
        compiled_top = {lv: compiled[lv] for lv in run.top_levels}
        del compiled
        top_spec = config.spec.restricted(run.top_levels, geo.levels)
        check_data(top_spec, tabulated.top_truth, compiled=compiled_top)
        measured = _measure_top(run, tabulated, top_spec, compiled_top)
        provenance = measured.provenance
        randomness = provenance.get("randomness", {})
        del tabulated
        problems, shell = top_problems(measured.noisy, compiled_top)
        del measured        # its answers are in the problems
        if method == "bluedown":    # refused before any part is measured
            check_weight_cells(problems.structure, config.schema)
        timings["tabulate and measure the top"] = time.perf_counter() - t
        upward = _GLSUpward(config, geo.levels, s, publish, provenance, parts_dir,
                            cache, directory / "noisy" / "parts" if config.release else None,
                            False, queries=queries, keep_means=method == "bluedown")
        tasks = [_GLSTask(k, part_geography(geo, s, first, stop))
                 for k, (first, stop) in enumerate(plan)]
        t = time.perf_counter()
        gathered = _Gathered(geo.n_units(s))                                # 2. upward
        for k, below, seconds in _mapped(ex, upward, tasks, progress, "GLS upward"):
            gathered.add(plan[k][0], below)
            for step, x in seconds.items():
                timings[f"upward: {step} (summed over workers)"] = timings.get(
                    f"upward: {step} (summed over workers)", 0.0) + x
        ex.close()          # the idle workers' memory is the top's
        timings["upward"] = time.perf_counter() - t
        log(f"    measured and solved upward below the {split} level in "
            f"{timings['upward']:.1f} s")
        if method == "bluedown":                                            # 3, 4: BlueDown
            held, given = [problems], [gathered.below()]      # emptied by the call
            del problems, gathered
            persons = _bluedown_in_parts(run, held, shell, provenance, top_spec,
                                         compiled_top, given, tasks, cache, timings, t_start)
            log(f"    BlueDown in parts: {timings['total']:.1f} s; {directory}")
            return GLSParts(directory, geo.levels, len(plan), float(persons), timings)
        t = time.perf_counter()
        precisions = _Precisions(parts_dir, geo.n_units(s))
        steps, structure = _top(run, problems, shell, compiled_top, gathered.below(), queries,
                                interval, precisions)                       # 3. the top
        del problems, gathered
        timings["top"] = time.perf_counter() - t
        log(f"    GLS {' → '.join(run.top_levels)} in {timings['top']:.1f} s")
        t = time.perf_counter()
        down = [_GLSTask(task.index, task.geography, tuple(st[first:stop] for st in steps),
                         (first, stop)) for task, (first, stop) in zip(tasks, plan)]
        downward = _GLSDownward(config, parts_dir, queries, precisions, interval)
        ex = get_executor(config.topdown.executor, workers=config.topdown.workers,
                          scheduler=config.scheduler)
        for _ in _mapped(ex, downward, down, progress, "GLS downward"):     # 4. downward
            pass
        timings["downward"] = time.perf_counter() - t
        log(f"    downward pass below the {split} level in {timings['downward']:.1f} s")
    finally:
        ex.close()
    t = time.perf_counter()
    for lv in run.low_levels:
        join_parquet([parts_dir / f"{lv}-{k:06d}.parquet" for k in range(len(plan))],
                     directory / f"{lv}.parquet", metadata=_meta(config))
    write_parquet(pa.Table.from_pandas(geo.to_frame(), preserve_index=False),
                  directory / "geography.parquet", metadata=_meta(config))
    timings["join"] = time.perf_counter() - t
    timings["total"] = time.perf_counter() - t_start
    write_json({"made_by": _MADE_BY, "method": "gls", "split": split,
                "part_blocks": part_blocks, "parts": len(plan), "queries": list(queries),
                "interval": interval, "levels": list(geo.levels), "timings": timings,
                "structure": structure, "randomness": randomness,
                "safe_for_release": bool(config.release)},
               directory / "manifest.json")
    precisions.remove()
    _remove_part_files(parts_dir, cache, len(plan), run.low_levels)
    log(f"    GLS in parts: {timings['total']:.1f} s; {directory}")
    return GLSParts(directory, geo.levels, len(plan), structure["persons"], timings)
